"""Laws 13-20 of reference §1.7: the antichain lattice (join = later frontier, meet = earlier)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.strategies import PROBE_MAX, TIME_KINDS, TimeKind, antichains, times

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def draw3(kind: TimeKind, data: st.DataObject) -> tuple[Antichain, Antichain, Antichain]:
    a, b, c = (data.draw(antichains(times(kind))) for _ in range(3))
    return a, b, c


def universe(kind: TimeKind) -> list[Any]:
    if kind == "int":
        return list(range(PROBE_MAX + 1))
    return [Product(a, b) for a, b in itertools.product(range(PROBE_MAX + 1), repeat=2)]


def bottom(kind: TimeKind) -> Antichain:
    return Antichain.bottom(0 if kind == "int" else Product(0, 0))


@KINDS
@given(data=st.data())
def test_law_13_lattice_commutativity(kind: TimeKind, data: st.DataObject) -> None:
    a, b, _ = draw3(kind, data)
    assert a.join(b) == b.join(a)
    assert a.meet(b) == b.meet(a)


@KINDS
@given(data=st.data())
def test_law_14_lattice_associativity(kind: TimeKind, data: st.DataObject) -> None:
    a, b, c = draw3(kind, data)
    assert a.join(b).join(c) == a.join(b.join(c))
    assert a.meet(b).meet(c) == a.meet(b.meet(c))


@KINDS
@given(data=st.data())
def test_law_15_lattice_idempotence(kind: TimeKind, data: st.DataObject) -> None:
    a, _, _ = draw3(kind, data)
    assert a.join(a) == a
    assert a.meet(a) == a


@KINDS
@given(data=st.data())
def test_law_16_lattice_absorption(kind: TimeKind, data: st.DataObject) -> None:
    a, b, _ = draw3(kind, data)
    assert a.join(a.meet(b)) == a
    assert a.meet(a.join(b)) == a


@KINDS
@given(data=st.data())
def test_law_17_lattice_consistency_with_order(kind: TimeKind, data: st.DataObject) -> None:
    a, b, _ = draw3(kind, data)
    assert (a <= b) == (a.join(b) == b) == (a.meet(b) == a)


@KINDS
@given(data=st.data())
def test_law_18_lattice_bounds(kind: TimeKind, data: st.DataObject) -> None:
    a, b, _ = draw3(kind, data)
    assert a <= a.join(b)
    assert a.meet(b) <= a
    top, bot = Antichain.empty(), bottom(kind)
    assert a.join(top) == top
    assert a.meet(top) == a
    assert a.join(bot) == a
    assert a.meet(bot) == bot


@KINDS
@given(data=st.data())
def test_law_19_lattice_distributivity(kind: TimeKind, data: st.DataObject) -> None:
    a, b, c = draw3(kind, data)
    assert a.join(b.meet(c)) == a.join(b).meet(a.join(c))
    assert a.meet(b.join(c)) == a.meet(b).join(a.meet(c))


@KINDS
@given(data=st.data())
def test_law_20_lattice_upset_semantics(kind: TimeKind, data: st.DataObject) -> None:
    a, b, _ = draw3(kind, data)
    j, m = a.join(b), a.meet(b)
    for t in universe(kind):
        assert j.less_equal(t) == (a.less_equal(t) and b.less_equal(t))
        assert m.less_equal(t) == (a.less_equal(t) or b.less_equal(t))
    assert Antichain.meet_all([a, b]) == m
    assert Antichain.join_all([a, b], minimum=0 if kind == "int" else Product(0, 0)) == j
