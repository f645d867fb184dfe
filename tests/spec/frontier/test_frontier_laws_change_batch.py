"""Laws 31-36 of reference §1.7: ChangeBatch and consolidation."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import (
    ChangeBatch,
    Product,
    Update,
    accumulate,
    consolidate,
    sort_key,
)
from tidegate.spec.strategies import TIME_KINDS, TimeKind, changes, times, updates

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


def sums(pairs: list[tuple[Any, int]]) -> dict[Any, int]:
    total: Counter[Any] = Counter()
    for k, d in pairs:
        total[k] += d
    return {k: d for k, d in total.items() if d}


def probes(kind: TimeKind) -> list[Any]:
    if kind == "int":
        return list(range(8))
    return [Product(a, b) for a, b in itertools.product(range(8), repeat=2)]


@KINDS
@given(data=st.data())
def test_law_31_change_batch_preserves_sums(kind: TimeKind, data: st.DataObject) -> None:
    pairs = data.draw(changes(times(kind)))
    assert dict(ChangeBatch(pairs).drain()) == sums(pairs)


@KINDS
@given(data=st.data())
def test_law_32_change_batch_drain_is_canonical(kind: TimeKind, data: st.DataObject) -> None:
    cb = ChangeBatch(data.draw(changes(times(kind))))
    drained = cb.drain()
    keys = [k for k, _ in drained]
    assert keys == sorted(keys, key=sort_key)
    assert len(set(keys)) == len(keys)
    assert all(d != 0 for _, d in drained)
    assert cb.is_empty() and cb.drain() == []


@KINDS
@given(data=st.data())
def test_law_33_change_batch_ignores_order_and_splits(kind: TimeKind, data: st.DataObject) -> None:
    pairs = data.draw(changes(times(kind)))
    shuffled = data.draw(st.permutations(pairs))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(pairs)), max_size=3)))
    split = ChangeBatch[Any]()
    for lo, hi in itertools.pairwise([0, *cuts, len(pairs)]):
        split.extend(shuffled[lo:hi])
    assert split.drain() == ChangeBatch(pairs).drain()


@KINDS
@given(data=st.data())
def test_law_34_change_batch_empty_iff_all_sums_zero(kind: TimeKind, data: st.DataObject) -> None:
    pairs = data.draw(changes(times(kind)))
    cb = ChangeBatch(pairs)
    assert cb.is_empty() == (not sums(pairs))
    assert (len(cb) == 0) == cb.is_empty()


def split_and_pad(xs: list[Update], data: st.DataObject) -> list[Update]:
    """An update list with the same per-(row, time) sums as ``xs``, differently written."""
    out: list[Update] = []
    for row, t, d in xs:
        part = data.draw(st.integers(-3, 3))
        out += [(row, t, part), (row, t, d - part)]
    out += [(row, t, 0) for row, t, _ in xs[:2]]
    return data.draw(st.permutations(out))


@KINDS
@given(data=st.data())
def test_law_35_consolidate_is_idempotent_and_canonical(
    kind: TimeKind, data: st.DataObject
) -> None:
    xs = data.draw(updates(times(kind)))
    ys = split_and_pad(xs, data)
    once = consolidate(xs)
    assert consolidate(once) == once
    assert consolidate(ys) == once
    assert all(d != 0 for _, _, d in once)
    assert len({(r, t) for r, t, _ in once}) == len(once)


@KINDS
@given(data=st.data())
def test_law_36_consolidate_preserves_accumulations(kind: TimeKind, data: st.DataObject) -> None:
    xs = data.draw(updates(times(kind)))
    cs = consolidate(xs)
    for t in probes(kind):
        assert accumulate(xs, t) == accumulate(cs, t)
