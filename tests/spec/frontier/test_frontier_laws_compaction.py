"""Laws 42-45 of reference §1.7: logical compaction of collections."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import (
    Antichain,
    Product,
    Update,
    accumulate,
    advance_by,
    advance_updates,
    consolidate,
)
from tidegate.spec.strategies import (
    TIME_KINDS,
    TimeKind,
    antichains,
    nonempty_antichains,
    times,
    updates,
)

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def universe(kind: TimeKind, top: int = 8) -> list[Any]:
    """Probe times: inputs are in 0..6, so joins of them stay within 0..6 too."""
    if kind == "int":
        return list(range(top + 1))
    return [Product(a, b) for a, b in itertools.product(range(top + 1), repeat=2)]


def rows_of(xs: list[Update]) -> set[Any]:
    return {r for r, _, _ in xs}


@KINDS
@given(data=st.data())
def test_law_42_compaction_preserves_accumulations(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(updates(times(kind)))
    since = data.draw(nonempty_antichains(times(kind)))
    compacted = advance_updates(xs, since)
    for u in universe(kind):
        if since.less_equal(u):
            assert accumulate(xs, u) == accumulate(compacted, u)


@KINDS
@given(data=st.data())
def test_law_43_compaction_commutes_with_consolidation(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(updates(times(kind)))
    since = data.draw(antichains(times(kind)))

    def advance(us: list[Update]) -> list[Update]:
        return [(r, advance_by(t, since), d) for r, t, d in us]

    assert consolidate(advance(xs)) == consolidate(advance(consolidate(xs)))
    assert advance_updates(xs, since) == consolidate(advance(xs))


@KINDS
@given(data=st.data())
def test_law_44_successive_compaction_equals_direct(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(updates(times(kind)))
    s2 = data.draw(nonempty_antichains(times(kind)))
    s1 = s2.meet(data.draw(antichains(times(kind))))
    assert s1 <= s2
    assert advance_updates(advance_updates(xs, s1), s2) == advance_updates(xs, s2)


@KINDS
@given(data=st.data())
def test_law_45_batch_description_semantics(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(updates(times(kind)))
    lower = data.draw(nonempty_antichains(times(kind)))
    upper = data.draw(antichains(times(kind)))
    since = data.draw(antichains(times(kind)))
    batch = [(r, t, d) for r, t, d in xs if lower.less_equal(t) and not upper.less_equal(t)]
    stored = advance_updates(batch, since)
    for u in universe(kind):
        if since.less_equal(u):
            assert accumulate(stored, u) == accumulate(batch, u)
    if since <= lower:
        assert stored == consolidate(batch)


def test_compaction_example_exact_when_since_not_beyond_lower() -> None:
    batch = [(("a",), 3, 1), (("a",), 4, 1)]
    assert advance_updates(batch, Antichain([2])) == batch
    assert advance_updates(batch, Antichain([5])) == [(("a",), 5, 2)]
