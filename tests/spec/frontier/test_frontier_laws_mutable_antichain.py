"""Laws 37-41 of reference §1.7: MutableAntichain."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain, MutableAntichain, less_equal
from tidegate.spec.strategies import TIME_KINDS, TimeKind, changes, times

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def brute_frontier(counts: Counter[Any]) -> set[Any]:
    positive = [t for t, c in counts.items() if c > 0]
    return {t for t in positive if not any(less_equal(u, t) and u != t for u in positive)}


def batches(kind: TimeKind) -> st.SearchStrategy[list[list[tuple[Any, int]]]]:
    return st.lists(changes(times(kind), max_size=6), max_size=6)


@KINDS
@given(data=st.data())
def test_law_37_frontier_is_minimal_positive_times(kind: TimeKind, data: st.DataObject) -> None:
    m, counts = MutableAntichain(), Counter[Any]()
    for batch in data.draw(batches(kind)):
        m.update_iter(batch)
        for t, d in batch:
            counts[t] += d
        assert set(m.frontier.elements) == brute_frontier(counts)
        assert m.frontier == Antichain(brute_frontier(counts))


@KINDS
@given(data=st.data())
def test_law_38_update_iter_reports_frontier_difference(
    kind: TimeKind, data: st.DataObject
) -> None:
    m = MutableAntichain()
    for batch in data.draw(batches(kind)):
        old = set(m.frontier.elements)
        reported = dict(m.update_iter(batch))
        new = set(m.frontier.elements)
        assert all(d in (1, -1) for d in reported.values())
        assert {t for t, d in reported.items() if d == 1} == new - old
        assert {t for t, d in reported.items() if d == -1} == old - new
        if old == new:
            assert not reported


@KINDS
@given(data=st.data())
def test_law_39_count_for_sums_deltas(kind: TimeKind, data: st.DataObject) -> None:
    m, counts = MutableAntichain(), Counter[Any]()
    for batch in data.draw(batches(kind)):
        m.update_iter(batch)
        for t, d in batch:
            counts[t] += d
    for t in set(counts) | {data.draw(times(kind))}:
        assert m.count_for(t) == counts[t]


@KINDS
@given(data=st.data())
def test_law_40_add_then_remove_restores(kind: TimeKind, data: st.DataObject) -> None:
    m = MutableAntichain()
    m.update_iter(data.draw(changes(times(kind))))
    before_frontier, before_counts = m.frontier, m.updates()
    t = data.draw(times(kind))
    m.update_iter([(t, 1)])
    m.update_iter([(t, -1)])
    assert m.frontier == before_frontier
    assert m.updates() == before_counts


@KINDS
@given(data=st.data())
def test_law_41_nonnegative_counts_empty_iff_all_zero(kind: TimeKind, data: st.DataObject) -> None:
    m, counts = MutableAntichain(), Counter[Any]()
    adds = data.draw(st.lists(times(kind), max_size=8))
    m.update_iter((t, 1) for t in adds)
    counts.update(adds)
    removals = data.draw(st.lists(st.sampled_from(adds), max_size=8)) if adds else []
    for t in removals:
        if counts[t] > 0:
            m.update_iter([(t, -1)])
            counts[t] -= 1
        assert m.is_empty() == all(c == 0 for c in counts.values())
    assert m.is_empty() == all(c == 0 for c in counts.values())
