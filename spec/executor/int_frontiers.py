"""Helpers shared by executors over int times: single-element frontiers and index peek checks.

Executors that only support totally ordered ``int`` times represent a frontier
by its single element, or ``None`` for the empty frontier (the top).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, TypeAlias

from ..errors import ArityMismatch, PeekNotReady, PeekOutOfRange, UnsupportedTimestamp
from ..frontier import Antichain, Row
from ..ids import GlobalId
from ..plan.ordering import check_finishing
from ..protocol.types import RowSetFinishing

__all__ = [
    "Frontier",
    "check_index_peek",
    "consolidate_changes",
    "frontier_le",
    "to_antichain",
    "to_frontier",
]

Frontier: TypeAlias = int | None
"""A frontier of int times: its single element, or ``None`` for the empty frontier."""


def to_frontier(a: Antichain, what: str, executor: str) -> Frontier:
    """``a`` as a :data:`Frontier` [UnsupportedTimestamp unless empty or one int]."""
    els = a.elements
    if not els:
        return None
    if len(els) != 1 or type(els[0]) is not int:
        raise UnsupportedTimestamp(f"{what}: the {executor} needs int times, got {a!r}")
    return int(els[0])


@functools.lru_cache(maxsize=1024)
def to_antichain(f: Frontier) -> Antichain:
    """``f`` as an :class:`Antichain` (cached: frontiers are read far more often than they move)."""
    return Antichain.empty() if f is None else Antichain.from_elem(f)


def frontier_le(a: Frontier, b: Frontier) -> bool:
    """Frontier ``a`` is not ahead of ``b`` (``None`` is the top)."""
    return b is None or (a is not None and a <= b)


def consolidate_changes(
    changes: Iterable[tuple[Any, int, int]],
) -> tuple[tuple[Any, int, int], ...]:
    """Sum the diffs of equal ``(data, time)`` pairs and drop zeros, in first-seen order."""
    acc: dict[tuple[Any, int], int] = {}
    for r, t, d in changes:
        k = (r, t)
        acc[k] = acc.get(k, 0) + d
    return tuple((r, t, d) for (r, t), d in acc.items() if d)


def check_index_peek(
    index_id: GlobalId,
    time: object,
    since: Frontier,
    upper: Frontier,
    key: tuple[int, ...],
    arity: int,
    finishing: RowSetFinishing | None,
    key_lookup: tuple[Row, ...] | None,
) -> RowSetFinishing:
    """Validate a peek of an index export; return the finishing to apply.

    Raises :class:`UnsupportedTimestamp`, :class:`PeekOutOfRange` (before the
    since), :class:`PeekNotReady` (not before the upper), :class:`ArityMismatch`
    (a lookup key of the wrong shape) or the finishing's own errors.
    """
    if type(time) is not int:
        raise UnsupportedTimestamp(f"peek time {time!r} is not an int")
    if not frontier_le(since, time):
        raise PeekOutOfRange(f"peek of {index_id} at {time}: compacted to {to_antichain(since)}")
    if upper is not None and upper <= time:
        raise PeekNotReady(f"peek of {index_id} at {time}: upper is {upper}")
    if key_lookup is not None:
        for k in key_lookup:
            if type(k) is not tuple or len(k) != len(key):
                raise ArityMismatch(f"key {k!r} does not match the index key {key}")
    finishing = finishing or RowSetFinishing()
    check_finishing(finishing, arity)
    return finishing
