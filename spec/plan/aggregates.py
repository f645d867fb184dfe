"""Aggregate functions over a group's accumulated values (the semantics documented on ``Aggregate``)."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from ..frontier import value_sort_key
from .relation import AggFunc, Aggregate

__all__ = ["aggregate", "exact_to_value", "value_to_exact"]


def value_to_exact(v: Any) -> int | Fraction:
    """An exact number for summing: ints stay ints, floats become Fractions (so sums are order-free)."""
    return v if type(v) is int else Fraction(v)


def exact_to_value(total: int | Fraction, is_float: bool) -> Any:
    """Round an exact sum once to the column's type."""
    return float(total) if is_float else int(total)


def aggregate(agg: Aggregate, rows: Iterable[tuple[Any, int]]) -> Any:
    """``agg`` over one group's accumulated rows, given as ``(value, count)`` pairs.

    ``value`` is the aggregated column's value in that row (anything for
    ``count(*)``); counts are the rows' non-zero multiplicities.
    """
    pairs = [(v, c) for v, c in rows if c]
    if agg.func is AggFunc.COUNT and agg.column is None:
        return sum(c for _, c in pairs)
    present = [(v, c) for v, c in pairs if v is not None]
    if agg.distinct or agg.func in (AggFunc.MIN, AggFunc.MAX):
        per_value: dict[Any, int] = {}
        for v, c in present:
            per_value[v] = per_value.get(v, 0) + c
        positive = sorted((v for v, c in per_value.items() if c > 0), key=value_sort_key)
        if agg.func is AggFunc.MIN:
            return positive[0] if positive else None
        if agg.func is AggFunc.MAX:
            return positive[-1] if positive else None
        present = [(v, 1) for v in positive]
    if agg.func is AggFunc.COUNT:
        return sum(c for _, c in present)
    if not present:
        return None
    is_float = type(present[0][0]) is float
    total: int | Fraction = sum((value_to_exact(v) * c for v, c in present), start=0)
    if agg.func is AggFunc.SUM:
        return exact_to_value(total, is_float)
    count = sum(c for _, c in present)
    if count == 0:
        return None
    return float(Fraction(total) / count)
