"""Logical compaction (``advance_by``) and differential updates ``(row, time, diff)``."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, TypeAlias, TypeVar

from .antichain import Antichain
from .order import Time, join, less_equal, meet, sort_key
from .rows import Row, value_sort_key

__all__ = [
    "Update",
    "accumulate",
    "advance_by",
    "advance_updates",
    "consolidate",
    "consolidate_pairs",
]

Update: TypeAlias = tuple[Row, Time, int]
"""A differential update: ``row`` changes by ``diff`` copies at ``time``."""

K = TypeVar("K", bound=Hashable)


def advance_by(t: Time, frontier: Antichain) -> Time:
    """The largest time that compares to every time beyond ``frontier`` exactly as ``t`` does.

    ``[]`` leaves ``t`` unchanged; ``[f]`` gives ``t v f`` (``max`` for ints);
    otherwise the meet over ``f`` in ``frontier`` of ``t v f``.
    """
    els = frontier.elements
    if not els:
        return t
    if len(els) == 1:
        f = els[0]
        if type(t) is int and type(f) is int:
            return t if t >= f else f
        return join(t, f)
    result = join(t, els[0])
    for f in els[1:]:
        result = meet(result, join(t, f))
    return result


def consolidate_pairs(pairs: Iterable[tuple[K, int]]) -> list[tuple[K, int]]:
    """Sum diffs of equal keys, drop zeros, sort by key."""
    sums: dict[K, int] = {}
    for k, d in pairs:
        sums[k] = sums.get(k, 0) + d
    return sorted(((k, d) for k, d in sums.items() if d), key=lambda kd: value_sort_key(kd[0]))


def _update_key(u: tuple[tuple[Row, Time], int]) -> Any:
    (row, t), _ = u
    return (value_sort_key(row), sort_key(t))


def consolidate(updates: Iterable[Update]) -> list[Update]:
    """Canonical form of ``(row, time, diff)`` updates: summed per ``(row, time)``, no zeros, sorted."""
    sums: dict[tuple[Row, Time], int] = {}
    for row, t, d in updates:
        key = (row, t)
        sums[key] = sums.get(key, 0) + d
    items = sorted(((k, d) for k, d in sums.items() if d), key=_update_key)
    return [(row, t, d) for (row, t), d in items]


def advance_updates(updates: Iterable[Update], frontier: Antichain) -> list[Update]:
    """Logically compact updates to ``frontier``: advance each time, then consolidate.

    Accumulations at every time beyond ``frontier`` are unchanged.
    """
    return consolidate((row, advance_by(t, frontier), d) for row, t, d in updates)


def accumulate(updates: Iterable[Update], time: Time) -> dict[Row, int]:
    """The collection as of ``time``: per row, the sum of diffs at times ``<= time`` (zeros dropped)."""
    acc: dict[Row, int] = {}
    get = acc.get
    if type(time) is int:
        # Int times (the common case) compare natively; anything else takes the checked path.
        for row, t, d in updates:
            if t <= time if type(t) is int else less_equal(t, time):
                acc[row] = get(row, 0) + d
    else:
        for row, t, d in updates:
            if less_equal(t, time):
                acc[row] = get(row, 0) + d
    return {r: c for r, c in acc.items() if c}
