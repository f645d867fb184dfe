"""Window functions over one partition: the semantics documented on :class:`~.relation.Window`.

:func:`window_partition` is the one definition that the reference evaluator
and every executor use, so "the same rows with the same window values" has
one meaning. A partition is sorted as :class:`~.relation.TopK` sorts a group
(``order_by``, then the whole row); each positive multiplicity becomes that
many slots; peers are slots equal in ``order_by`` (NULLs equal to NULLs, as
in PostgreSQL's sort).

Frames follow PostgreSQL: ``ROWS`` offsets count slots; ``RANGE`` offsets
compare the single ``order_by`` column's value (in its direction: ``n
PRECEDING`` in a descending order means values up to ``v + n``), a NULL
value's offset bounds are its peer group, and NULL rows are never within an
offset of a non-NULL value.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..frontier import Row, value_sort_key
from .aggregates import (
    FloatTotal,
    add_exact,
    add_float,
    aggregate,
    exact_mean,
    exact_to_value,
)
from .numeric import numeric_add, numeric_sub
from .ordering import order_key, sort_rows
from .relation import (
    AggFunc,
    Aggregate,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
)

__all__ = ["window_partition"]

_B = WindowBoundKind


def window_partition(rows: Iterable[tuple[Row, int]], plan: Window) -> dict[Row, int]:
    """The output rows (with counts) of one partition's accumulated ``(row, count)`` pairs.

    Raises :class:`~tidegate.spec.errors.NumericOverflow` when an aggregate
    overflows (the evaluators turn it into one error of the partition).
    """
    slots: list[Row] = [r for r, c in sort_rows(rows, plan.order_by) if c > 0 for _ in range(c)]
    if not slots:
        return {}
    n = len(slots)
    # peer groups: first slot of each slot's group, the group's end, its number
    first = [0] * n
    end = [0] * n
    group_no = [0] * n
    prev: tuple[Any, ...] | None = None
    g = -1
    start = 0
    for i, r in enumerate(slots):
        k = order_key(r, plan.order_by)[:-1]
        if prev is None or k != prev:
            for j in range(start, i):
                end[j] = i
            start, prev, g = i, k, g + 1
        first[i], group_no[i] = start, g
    for j in range(start, n):
        end[j] = n
    columns: list[list[Any]] = []
    for f in plan.funcs:
        columns.append(_column(f, plan, slots, first, end, group_no))
    out: dict[Row, int] = {}
    for i, r in enumerate(slots):
        o = r + tuple(col[i] for col in columns)
        out[o] = out.get(o, 0) + 1
    return out


def _column(
    f: WindowFunc,
    plan: Window,
    slots: list[Row],
    first: list[int],
    end: list[int],
    group_no: list[int],
) -> list[Any]:
    n = len(slots)
    k = f.kind
    if k is WindowFuncKind.ROW_NUMBER:
        return list(range(1, n + 1))
    if k is WindowFuncKind.RANK:
        return [x + 1 for x in first]
    if k is WindowFuncKind.DENSE_RANK:
        return [x + 1 for x in group_no]
    if k in (WindowFuncKind.LAG, WindowFuncKind.LEAD):
        assert f.column is not None
        step = -f.offset if k is WindowFuncKind.LAG else f.offset
        vals: list[Any] = []
        for i, r in enumerate(slots):
            j = i + step
            if 0 <= j < n:
                vals.append(slots[j][f.column])
            else:
                vals.append(None if f.default is None else r[f.default])
        return vals
    frames = _frames(f.frame, plan, slots, first, end)
    if k is WindowFuncKind.FIRST_VALUE:
        assert f.column is not None
        return [slots[lo][f.column] if lo < hi else None for lo, hi in frames]
    if k is WindowFuncKind.LAST_VALUE:
        assert f.column is not None
        return [slots[hi - 1][f.column] if lo < hi else None for lo, hi in frames]
    agg = f.aggregate
    assert agg is not None
    col = agg.column
    values = [r if col is None else r[col] for r in slots]
    if agg.func in _SLIDING and not agg.distinct and _monotone(frames):
        return _sliding(agg, values, frames)
    cache: dict[tuple[int, int], Any] = {}
    out: list[Any] = []
    for lo, hi in frames:
        if (lo, hi) not in cache:
            cache[(lo, hi)] = aggregate(agg, [(values[j], 1) for j in range(lo, hi)])
        out.append(cache[(lo, hi)])
    return out


_SLIDING = frozenset({AggFunc.COUNT, AggFunc.SUM, AggFunc.AVG})
"""Aggregates kept as a running total while the frame slides (O(1) per slot)."""


def _monotone(frames: list[tuple[int, int]]) -> bool:
    return all(a[0] <= b[0] and a[1] <= b[1] for a, b in itertools.pairwise(frames))


def _sliding(agg: Aggregate, values: list[Any], frames: list[tuple[int, int]]) -> list[Any]:
    """``count``/``sum``/``avg`` over frames whose ends only move forward: a running exact
    total (as :func:`~.aggregates.aggregate` sums) gains the slots entering and loses those
    leaving, so a partition costs O(slots), not O(slots x frame)."""
    star = agg.column is None
    is_float = any(type(v) is float for v in values)
    numeric = any(type(v) is Decimal for v in values)
    total: int | Fraction | FloatTotal = 0
    count = 0
    lo = hi = 0
    out: list[Any] = []

    def move(v: Any, d: int) -> None:
        nonlocal total, count
        if star:
            count += d
        elif v is not None:
            count += d
            if agg.func is not AggFunc.COUNT:
                if is_float:
                    total = add_float(total, v, d)
                else:
                    total = add_exact(total, (Fraction(v) if numeric else v) * d)

    for f_lo, f_hi in frames:
        f_hi = max(f_hi, f_lo)
        while hi < f_hi:
            move(values[hi], 1)
            hi += 1
        while lo < f_lo:
            if lo < hi:
                move(values[lo], -1)
            lo += 1
        hi = max(hi, lo)
        if agg.func is AggFunc.COUNT:
            out.append(count)
        elif count == 0:
            out.append(None)
        elif agg.func is AggFunc.SUM:
            out.append(exact_to_value(total, is_float, numeric))
        else:
            out.append(exact_mean(total, count, numeric))
    return out


def _frames(
    frame: WindowFrame, plan: Window, slots: list[Row], first: list[int], end: list[int]
) -> list[tuple[int, int]]:
    """Each slot's frame as a half-open range of slots (``lo >= hi``: empty)."""
    n = len(slots)
    if not frame.range:
        return [
            (_rows_bound(frame.start, i, n, True), _rows_bound(frame.end, i, n, False))
            for i in range(n)
        ]
    needs_value = any(b.kind in (_B.PRECEDING, _B.FOLLOWING) for b in (frame.start, frame.end))
    if not needs_value:
        return [
            (
                _peer_bound(frame.start, i, n, first, end, True),
                _peer_bound(frame.end, i, n, first, end, False),
            )
            for i in range(n)
        ]
    order = plan.order_by[0]
    col, desc = order.column, order.desc
    vals = [r[col] for r in slots]
    nonnull = [i for i, v in enumerate(vals) if v is not None]
    a, b = (nonnull[0], nonnull[-1] + 1) if nonnull else (0, 0)
    keys: list[Any] = [
        None if v is None else (_Rev(value_sort_key(v)) if desc else value_sort_key(v))
        for v in vals
    ]
    out = []
    for i in range(n):
        bounds = []
        for bound, is_start in ((frame.start, True), (frame.end, False)):
            if bound.kind not in (_B.PRECEDING, _B.FOLLOWING):
                bounds.append(_peer_bound(bound, i, n, first, end, is_start))
            elif vals[i] is None:
                bounds.append(first[i] if is_start else end[i])
            else:
                bounds.append(_value_bound(bound, keys, a, b, vals[i], desc, is_start))
        out.append((bounds[0], bounds[1]))
    return out


def _rows_bound(bound: WindowBound, i: int, n: int, is_start: bool) -> int:
    k = bound.kind
    if k is _B.UNBOUNDED_PRECEDING:
        return 0
    if k is _B.UNBOUNDED_FOLLOWING:
        return n
    off = int(bound.offset or 0) if k in (_B.PRECEDING, _B.FOLLOWING) else 0
    pos = i - off if k is _B.PRECEDING else i + off
    pos = pos if is_start else pos + 1
    return min(max(pos, 0), n)


def _peer_bound(
    bound: WindowBound, i: int, n: int, first: list[int], end: list[int], is_start: bool
) -> int:
    k = bound.kind
    if k is _B.UNBOUNDED_PRECEDING:
        return 0
    if k is _B.UNBOUNDED_FOLLOWING:
        return n
    # CURRENT ROW in RANGE mode: from the first peer, to the last one
    return first[i] if is_start else end[i]


class _Rev:
    """A sort key in reverse (a descending order's keys, made ascending for bisect)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: _Rev) -> bool:
        return bool(other.key < self.key)


def _value_bound(
    bound: WindowBound, keys: list[Any], a: int, b: int, v: Any, desc: bool, is_start: bool
) -> int:
    """The frame bound ``v`` ``n PRECEDING``/``FOLLOWING`` among the non-NULL slots ``a..b``,
    whose sort ``keys`` ascend (descend under ``desc``, already wrapped in :class:`_Rev`).

    Values compare by their sort key, so NaN (after every number, as PostgreSQL sorts it)
    has only NaN within an offset of it.
    """
    off: Any = bound.offset or 0
    ahead = bound.kind is _B.FOLLOWING
    if type(v) is Decimal:  # a numeric column: its offset exactly (offsets are int or float)
        d = Decimal(off)
        target: Any = value_sort_key(numeric_add(v, d) if ahead != desc else numeric_sub(v, d))
    else:
        target = value_sort_key(v + off if ahead != desc else v - off)
    if desc:
        target = _Rev(target)
    # the start: the first slot not before the target; the end: one past the last not after it
    if is_start:
        return bisect.bisect_left(keys, target, a, b)
    return bisect.bisect_right(keys, target, a, b)
