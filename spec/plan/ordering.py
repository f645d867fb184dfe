"""SQL ordering (ORDER BY with NULLS FIRST/LAST), TopK selection and peek finishing.

Both the reference evaluator and every executor use these, so "the same rows
in the same order" has one definition. Ties in ``order_by`` are broken by the
whole row in :func:`row_sort_key` order, ascending.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ArityMismatch, InvalidPlan
from ..frontier import Row, row_sort_key, value_sort_key
from ..protocol.responses import PeekError, PeekResult, PeekRows
from ..protocol.types import ColumnOrder, RowSetFinishing

__all__ = [
    "apply_finishing",
    "check_finishing",
    "order_key",
    "peek_result",
    "select_range",
    "sort_rows",
    "top_range",
]


class _Desc:
    """Reverses the order of a wrapped sort key."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: _Desc) -> bool:
        return bool(other.key < self.key)

    def __gt__(self, other: _Desc) -> bool:
        return bool(other.key > self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and bool(self.key == other.key)

    __hash__ = None  # type: ignore[assignment]


def order_key(row: Row, order_by: Iterable[ColumnOrder]) -> tuple[Any, ...]:
    """A sort key for ``row`` under ``order_by``, then the whole row as the tie-breaker."""
    parts: list[Any] = []
    for o in order_by:
        v = row[o.column]
        if v is None:
            parts.append((1 if o.nulls_last else -1,))
        else:
            k = value_sort_key(v)
            parts.append((0, _Desc(k) if o.desc else k))
    parts.append(row_sort_key(row))
    return tuple(parts)


def sort_rows(
    rows: Iterable[tuple[Row, int]], order_by: tuple[ColumnOrder, ...]
) -> list[tuple[Row, int]]:
    """``(row, count)`` pairs sorted by :func:`order_key`."""
    return sorted(rows, key=lambda rc: order_key(rc[0], order_by))


def select_range(
    ordered: Iterable[tuple[Row, int]], offset: int, limit: int | None
) -> list[tuple[Row, int]]:
    """The slots ``offset .. offset+limit`` of an ordered list where a row of count ``c`` fills ``c`` slots."""
    end = None if limit is None else offset + limit
    out: list[tuple[Row, int]] = []
    pos = 0
    for row, c in ordered:
        if c <= 0:
            continue
        lo, hi = max(pos, offset), pos + c if end is None else min(pos + c, end)
        if hi > lo:
            out.append((row, hi - lo))
        pos += c
        if end is not None and pos >= end:
            break
    return out


def top_range(
    rows: Iterable[tuple[Row, int]],
    order_by: tuple[ColumnOrder, ...],
    offset: int,
    limit: int | None,
) -> list[tuple[Row, int]]:
    """``select_range(sort_rows(rows, order_by), offset, limit)``, without sorting every row.

    Only rows of positive count fill slots, each at least one, so under a LIMIT
    the first ``offset + limit`` of them in order are all that can be selected.
    """
    if limit is None:
        return select_range(sort_rows(rows, order_by), offset, limit)
    live = [rc for rc in rows if rc[1] > 0]
    n = offset + limit
    if len(live) > n:
        live = heapq.nsmallest(n, live, key=lambda rc: order_key(rc[0], order_by))
    else:
        live = sort_rows(live, order_by)
    return select_range(live, offset, limit)


def check_finishing(finishing: RowSetFinishing, arity: int) -> None:
    """Raise unless ``finishing`` fits rows of ``arity`` columns (checked before any row is read).

    Every ORDER BY and projection column must exist (:class:`ArityMismatch`);
    OFFSET and LIMIT must not be negative (:class:`InvalidPlan`).
    """
    for o in finishing.order_by:
        if not 0 <= o.column < arity:
            raise ArityMismatch(
                f"ORDER BY names column {o.column}, but the rows have {arity} columns"
            )
    for c in finishing.project or ():
        if not 0 <= c < arity:
            raise ArityMismatch(
                f"the projection names column {c}, but the rows have {arity} columns"
            )
    if finishing.offset < 0 or (finishing.limit is not None and finishing.limit < 0):
        raise InvalidPlan(
            f"OFFSET {finishing.offset} / LIMIT {finishing.limit} must not be negative"
        )


def apply_finishing(
    rows: Mapping[Row, int], finishing: RowSetFinishing
) -> tuple[tuple[Row, int], ...]:
    """ORDER BY, OFFSET, LIMIT, then projection, of a collection with positive counts."""
    chosen = top_range(rows.items(), finishing.order_by, finishing.offset, finishing.limit)
    if finishing.project is not None:
        proj = finishing.project
        chosen = [(tuple(r[i] for i in proj), c) for r, c in chosen]
    return tuple(chosen)


def peek_result(
    rows: Mapping[Row, int], errors: Mapping[str, int], finishing: RowSetFinishing
) -> PeekResult:
    """The answer to a peek of a collection: its first error, a negative count, or the finished rows."""
    errs = sorted(e for e, c in errors.items() if c)
    if errs:
        return PeekError(errs[0])
    for row, c in sorted(rows.items(), key=lambda rc: row_sort_key(rc[0])):
        if c < 0:
            return PeekError(f"invalid data: negative multiplicity {c} for row {row!r}")
    return PeekRows(apply_finishing({r: c for r, c in rows.items() if c}, finishing))
