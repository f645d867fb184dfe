"""Temporal filters: a row's validity interval, and its updates moved to the times it enters and leaves.

A :class:`~.relation.TemporalFilter` keeps a row at the times ``t`` at which every
``mz_now() <op> bound`` holds. Over int times those times are an interval
``[lower, upper)``: :func:`validity_of` computes it from the row, and
:func:`temporal_updates` turns one input update into the output's, the row
inserted when it enters (no earlier than the update's own time) and retracted when
it leaves. Both executors share these; the reference semantics
(:mod:`.reference`) instead compares ``t`` with each bound directly.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

from ..errors import NumericOverflow
from ..frontier import Row
from .relation import Plan, TemporalFilter, TemporalOp, children
from .scalar_eval import compile_scalar

__all__ = [
    "Validity",
    "bound_millis",
    "compile_validity",
    "has_temporal_filter",
    "temporal_updates",
]

Validity = Callable[[Row], tuple[int, int | None] | None]
"""A row's ``(lower, upper)`` validity interval (``upper=None``: unbounded), or ``None``
if it is never valid (a NULL bound). Raises :class:`~tidegate.spec.errors.EvaluationError`."""

_EPOCH = _dt.datetime(1970, 1, 1)
_MILLI = _dt.timedelta(milliseconds=1)


def bound_millis(v: Any) -> int | None:
    """A bound's value as a time: an int as it is, a timestamp (or date) as its milliseconds
    since 1970-01-01 rounded down; ``None`` stays ``None``. A negative time is
    "mz_timestamp out of range", as casting it to Materialize's ``mz_timestamp`` is."""
    if v is None:
        return None
    if type(v) is int:
        ms = v
    elif isinstance(v, _dt.datetime):
        ms = (v - _EPOCH) // _MILLI
    elif isinstance(v, _dt.date):
        ms = (_dt.datetime(v.year, v.month, v.day) - _EPOCH) // _MILLI
    else:
        raise TypeError(f"a temporal bound must be an int64 or a timestamp, got {v!r}")
    if ms < 0:
        raise NumericOverflow("mz_timestamp out of range")
    return ms


def compile_validity(plan: TemporalFilter) -> Validity:
    """The function giving a row's validity interval under ``plan``'s predicates."""
    parts = [(op, compile_scalar(e)) for op, e in plan.predicates]

    def validity(row: Row) -> tuple[int, int | None] | None:
        lower = 0
        upper: int | None = None
        never = False
        for op, fn in parts:
            v = bound_millis(fn(row))  # evaluated even after a NULL: its error wins, as in Filter
            if v is None:
                never = True
                continue
            if op is TemporalOp.GE or op is TemporalOp.EQ:
                lower = max(lower, v)
            elif op is TemporalOp.GT:
                lower = max(lower, v + 1)
            if op is TemporalOp.LT:
                upper = v if upper is None else min(upper, v)
            elif op is TemporalOp.LE or op is TemporalOp.EQ:
                upper = v + 1 if upper is None else min(upper, v + 1)
        return None if never else (lower, upper)

    return validity


def temporal_updates(
    interval: tuple[int, int | None] | None, t: int, d: int
) -> list[tuple[int, int]]:
    """The ``(time, diff)`` updates of the output for an input update at ``t`` with diff ``d``
    of a row valid in ``interval``: inserted at ``max(t, lower)``, retracted at
    ``max(t, upper)``; nothing if the row is never valid from ``t`` on."""
    if interval is None:
        return []
    lower, upper = interval
    start = max(t, lower)
    if upper is None:
        return [(start, d)]
    if start >= upper:
        return []
    return [(start, d), (upper, -d)]


def has_temporal_filter(plan: Plan) -> bool:
    """Whether ``plan`` has a :class:`~.relation.TemporalFilter` anywhere."""
    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, TemporalFilter):
            return True
        stack.extend(children(p))
    return False
