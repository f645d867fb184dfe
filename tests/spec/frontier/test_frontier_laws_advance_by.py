"""Laws 21-30 of reference §1.7: ``advance_by`` (logical compaction of one time)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain, Product, advance_by, join, less_equal
from tidegate.spec.strategies import (
    PROBE_MAX,
    TIME_KINDS,
    TimeKind,
    antichains,
    nonempty_antichains,
    times,
)

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def universe(kind: TimeKind, top: int = PROBE_MAX) -> list[Any]:
    if kind == "int":
        return list(range(top + 1))
    return [Product(a, b) for a, b in itertools.product(range(top + 1), repeat=2)]


def compares_like(t: Any, x: Any, frontier: Antichain, probes: list[Any]) -> bool:
    """Whether ``x`` compares to every probe beyond ``frontier`` exactly as ``t`` does."""
    return all(less_equal(t, u) == less_equal(x, u) for u in probes if frontier.less_equal(u))


@KINDS
@given(data=st.data())
def test_law_21_advance_by_empty_frontier_is_identity(kind: TimeKind, data: st.DataObject) -> None:
    t = data.draw(times(kind))
    assert advance_by(t, Antichain.empty()) == t


@KINDS
@given(data=st.data())
def test_law_22_advance_by_is_extensive(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(antichains(times(kind)))
    assert less_equal(t, advance_by(t, f))


@KINDS
@given(data=st.data())
def test_law_23_advance_by_is_idempotent(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(antichains(times(kind)))
    once = advance_by(t, f)
    assert advance_by(once, f) == once


@KINDS
@given(data=st.data())
def test_law_24_advance_by_fixes_advanced_times(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(antichains(times(kind)))
    if f.less_equal(t):
        assert advance_by(t, f) == t


@KINDS
@given(data=st.data())
def test_law_25_advance_by_soundness(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(antichains(times(kind)))
    assert compares_like(t, advance_by(t, f), f, universe(kind))


@KINDS
@given(data=st.data())
def test_law_26_advance_by_canonicity(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(nonempty_antichains(times(kind)))
    probes = universe(kind)
    advanced = advance_by(t, f)
    for x in universe(kind):
        if compares_like(t, x, f, probes):
            assert less_equal(x, advanced), (t, f, x, advanced)


@KINDS
@given(data=st.data())
def test_law_27_advance_by_is_monotone(kind: TimeKind, data: st.DataObject) -> None:
    t, v = data.draw(times(kind)), data.draw(times(kind))
    f = data.draw(antichains(times(kind)))
    if less_equal(t, v):
        assert less_equal(advance_by(t, f), advance_by(v, f))


@KINDS
@given(data=st.data())
def test_law_28_advance_by_singleton_frontier_is_join(kind: TimeKind, data: st.DataObject) -> None:
    t, f = data.draw(times(kind)), data.draw(times(kind))
    advanced = advance_by(t, Antichain.from_elem(f))
    assert advanced == join(t, f)
    assert Antichain.from_elem(f).less_equal(advanced)
    if kind == "int":
        assert advanced == max(t, f)


@KINDS
@given(data=st.data())
def test_law_29_advance_by_successive_compaction(kind: TimeKind, data: st.DataObject) -> None:
    t = data.draw(times(kind))
    g = data.draw(nonempty_antichains(times(kind)))
    f = g.meet(data.draw(antichains(times(kind))))  # any F <= G
    assert f <= g
    assert advance_by(advance_by(t, f), g) == advance_by(t, g)


@KINDS
@given(data=st.data())
def test_law_30_advance_by_composition(kind: TimeKind, data: st.DataObject) -> None:
    t = data.draw(times(kind))
    f = data.draw(nonempty_antichains(times(kind)))
    g = data.draw(nonempty_antichains(times(kind)))
    assert advance_by(advance_by(t, f), g) == advance_by(t, f.join(g))
