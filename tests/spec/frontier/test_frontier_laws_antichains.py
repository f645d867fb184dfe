"""Laws 6-12 of reference §1.7: antichain construction and comparison."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain, Product, less_equal
from tidegate.spec.strategies import (
    PROBE_MAX,
    TIME_KINDS,
    TimeKind,
    antichains,
    int_times,
    probe_times,
    times,
)

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def universe(kind: TimeKind, top: int = PROBE_MAX) -> list[Any]:
    """Every time of ``kind`` with components in ``0..top`` (the probe universe)."""
    if kind == "int":
        return list(range(top + 1))
    return [Product(a, b) for a, b in itertools.product(range(top + 1), repeat=2)]


def brute_minimal(xs: list[Any]) -> set[Any]:
    return {x for x in xs if not any(less_equal(y, x) and y != x for y in xs)}


def beyond(a: Antichain, t: Any) -> bool:
    """``t`` in the up-set of ``a``, computed from the definition."""
    return any(less_equal(x, t) for x in a.elements)


@KINDS
@given(data=st.data())
def test_law_06_construction_gives_minimal_elements(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(st.lists(times(kind), max_size=8))
    a = Antichain(xs)
    assert set(a.elements) == brute_minimal(xs)
    assert len(a.elements) == len(set(a.elements))
    for x, y in itertools.permutations(a.elements, 2):
        assert not less_equal(x, y)


@KINDS
@given(data=st.data())
def test_law_07_construction_ignores_order_and_multiplicity(
    kind: TimeKind, data: st.DataObject
) -> None:
    xs = data.draw(st.lists(times(kind), max_size=8))
    shuffled = data.draw(st.permutations(xs))
    extra = data.draw(st.lists(st.sampled_from(xs), max_size=4)) if xs else []
    assert Antichain(xs) == Antichain(shuffled) == Antichain(shuffled + extra)
    assert hash(Antichain(xs)) == hash(Antichain(shuffled + extra))


@KINDS
@given(data=st.data())
def test_law_08_insert(kind: TimeKind, data: st.DataObject) -> None:
    a = data.draw(antichains(times(kind)))
    e = data.draw(times(kind))
    b, added = a.insert(e)
    assert added == (not any(less_equal(x, e) for x in a.elements))
    assert b.less_equal(e)
    assert b == Antichain([*a.elements, e])
    if not added:
        assert b == a


@KINDS
@given(data=st.data())
def test_law_09_less_equal_is_upset_membership(kind: TimeKind, data: st.DataObject) -> None:
    a = data.draw(antichains(times(kind)))
    t = data.draw(probe_times(kind))
    assert a.less_equal(t) == beyond(a, t)
    assert a.less_than(t) == any(less_equal(x, t) and x != t for x in a.elements)
    assert not Antichain.empty().less_equal(t)
    zero = 0 if kind == "int" else Product(0, 0)
    assert Antichain.bottom(zero).less_equal(t)


@KINDS
@given(data=st.data())
def test_law_10_antichain_order_is_upset_inclusion(kind: TimeKind, data: st.DataObject) -> None:
    a = data.draw(antichains(times(kind)))
    b = data.draw(antichains(times(kind)))
    included = all(a.less_equal(t) for t in universe(kind) if b.less_equal(t))
    assert (a <= b) == included


@KINDS
@given(data=st.data())
def test_law_11_antichain_order_is_partial_order_with_bounds(
    kind: TimeKind, data: st.DataObject
) -> None:
    a, b, c = (data.draw(antichains(times(kind))) for _ in range(3))
    assert a <= a
    if a <= b and b <= a:
        assert a == b
    if a <= b and b <= c:
        assert a <= c
    zero = 0 if kind == "int" else Product(0, 0)
    assert Antichain.bottom(zero) <= a
    assert a <= Antichain.empty()
    assert (Antichain.empty() <= a) == a.is_empty()
    assert (a < b) == (a <= b and a != b)


@dataclass(frozen=True)
class Unit:
    """The one-element timestamp ``()``, so ``Product(Unit(), int)`` is totally ordered."""

    def less_equal(self, other: Any) -> bool:
        return True

    def join(self, other: Any) -> Unit:
        return self

    def meet(self, other: Any) -> Unit:
        return self

    def sort_key(self) -> tuple[()]:
        return ()

    def minimum(self) -> Unit:
        return self

    def kind(self) -> str:
        return "Unit"


TOTAL_TIMES = {
    "int": int_times(),
    "product": int_times().map(lambda i: Product(Unit(), i)),
}


def as_number(a: Antichain) -> float:
    """The single element of a total antichain as a number, ``[]`` as +infinity."""
    if a.is_empty():
        return float("inf")
    (t,) = a.elements
    return float(t if isinstance(t, int) else t.inner)


@KINDS
@given(data=st.data())
def test_law_12_total_orders_have_singleton_antichains(kind: TimeKind, data: st.DataObject) -> None:
    """Law 12 for ints and for the total ``Product((), int)``."""
    a = data.draw(antichains(TOTAL_TIMES[kind], max_size=6))
    b = data.draw(antichains(TOTAL_TIMES[kind], max_size=6))
    assert len(a) <= 1 and len(b) <= 1
    assert (a <= b) == (as_number(a) <= as_number(b))
