"""Aggregate functions over a group's accumulated values (the semantics documented on ``Aggregate``).

A ``sum`` whose exact value is outside its type's range (int64, or float64
once rounded) raises :class:`NumericOverflow`, as any other overflow in a
scalar expression does, and so does an ``avg`` beyond float64 (possible with
negative multiplicities); the evaluators turn it into one error of the group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ..errors import NumericOverflow
from ..frontier import value_sort_key
from .numeric import fraction_to_numeric, numeric_avg
from .relation import AggFunc, Aggregate
from .scalar_eval import NAN
from .schema import INT64_MAX, INT64_MIN

__all__ = [
    "FloatTotal",
    "add_exact",
    "add_float",
    "aggregate",
    "exact_mean",
    "exact_to_value",
    "value_to_exact",
]


class FloatTotal:
    """A float64 sum kept exactly: the finite values' exact total, and how many infinities and
    NaNs are in it (with their multiplicities), which no :class:`Fraction` can hold. The sum
    is NaN with a NaN or both infinities in it, else the infinity in it, else the finite
    total rounded once (PostgreSQL's float8 sum)."""

    __slots__ = ("finite", "nan", "neg_inf", "pos_inf")

    def __init__(self, finite: int | Fraction = 0) -> None:
        self.finite: int | Fraction = finite
        self.pos_inf = 0
        self.neg_inf = 0
        self.nan = 0

    def add(self, v: float, d: int) -> FloatTotal:
        if v != v:
            self.nan += d
        elif v == math.inf:
            self.pos_inf += d
        elif v == -math.inf:
            self.neg_inf += d
        else:
            self.finite += Fraction(v) * d
        return self

    def special(self) -> float | None:
        """The sum if it is not finite (NaN or an infinity), else None."""
        if self.nan or (self.pos_inf and self.neg_inf):
            return NAN
        if self.pos_inf:
            return math.inf
        if self.neg_inf:
            return -math.inf
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloatTotal) and (
            self.finite,
            self.pos_inf,
            self.neg_inf,
            self.nan,
        ) == (other.finite, other.pos_inf, other.neg_inf, other.nan)

    __hash__ = None  # type: ignore[assignment]


def add_exact(total: int | Fraction | FloatTotal, v: int | Fraction) -> int | Fraction | FloatTotal:
    """``total + v`` for an exact ``v`` (an int64 or a numeric as a Fraction)."""
    if isinstance(total, FloatTotal):  # never: a column's sums are all floats or none
        total.finite += v
        return total
    return total + v


def add_float(total: int | Fraction | FloatTotal, v: float, d: int) -> int | Fraction | FloatTotal:
    """``total + v * d`` for a float64 ``v``, exactly (a finite total stays a Fraction)."""
    if isinstance(total, FloatTotal):
        return total.add(v, d)
    if math.isfinite(v):
        return total + Fraction(v) * d
    return FloatTotal(total).add(v, d)


_BY_VALUE = frozenset(
    {AggFunc.MIN, AggFunc.MAX, AggFunc.BOOL_AND, AggFunc.BOOL_OR, AggFunc.STRING_AGG}
)
"""The aggregates of the values of positive total multiplicity (not of the rows)."""


def value_to_exact(v: Any) -> int | Fraction:
    """An exact number for summing: ints stay ints, floats become Fractions (so sums are order-free)."""
    return v if type(v) is int else Fraction(v)


def exact_to_value(
    total: int | Fraction | FloatTotal, is_float: bool, numeric: bool = False
) -> Any:
    """Round an exact sum once to the column's type; raise :class:`NumericOverflow` if the
    result is beyond it ("float out of range" when it rounds to an infinity, "integer out
    of range" outside int64). A ``numeric`` sum is exact."""
    if numeric and not isinstance(total, FloatTotal):
        return fraction_to_numeric(total)
    if isinstance(total, FloatTotal):
        special = total.special()
        if special is not None:
            return special
        total = total.finite
    if is_float:
        try:
            return float(total)
        except OverflowError:
            raise NumericOverflow("float out of range") from None
    n = int(total)
    if not INT64_MIN <= n <= INT64_MAX:
        raise NumericOverflow("integer out of range")
    return n


def exact_mean(total: int | Fraction | FloatTotal, count: int, numeric: bool = False) -> Any:
    """``total / count`` (``count`` non-zero) rounded once to float64; raise
    :class:`NumericOverflow` ("float out of range") if it rounds to an infinity, which
    negative multiplicities make possible (values ``x, x`` counted ``+1`` and ``0`` counted
    ``-1`` average to ``2x``). A ``numeric`` mean is a numeric, rounded as PostgreSQL's
    ``avg(numeric)`` rounds (at the scale ``/`` gives the sum and the count)."""
    if numeric and not isinstance(total, FloatTotal):
        return numeric_avg(fraction_to_numeric(total), count)
    if isinstance(total, FloatTotal):
        special = total.special()
        if special is not None:
            return special
        total = total.finite
    try:
        return float(Fraction(total) / count)
    except OverflowError:
        raise NumericOverflow("float out of range") from None


def aggregate(agg: Aggregate, rows: Iterable[tuple[Any, int]]) -> Any:
    """``agg`` over one group's accumulated rows, given as ``(value, count)`` pairs.

    ``value`` is the aggregated column's value in that row (anything for
    ``count(*)``); counts are the rows' non-zero multiplicities. Raises
    :class:`NumericOverflow` for a sum beyond its type.
    """
    pairs = [(v, c) for v, c in rows if c]
    if agg.func is AggFunc.COUNT and agg.column is None:
        return sum(c for _, c in pairs)
    present = [(v, c) for v, c in pairs if v is not None]
    if agg.distinct or agg.func in _BY_VALUE:
        per_value: dict[Any, int] = {}
        for v, c in present:
            per_value[v] = per_value.get(v, 0) + c
        positive = sorted((v for v, c in per_value.items() if c > 0), key=value_sort_key)
        if agg.func in (AggFunc.MIN, AggFunc.BOOL_AND):
            return positive[0] if positive else None
        if agg.func in (AggFunc.MAX, AggFunc.BOOL_OR):
            return positive[-1] if positive else None
        if agg.func is AggFunc.STRING_AGG:
            if not positive:
                return None
            sep = agg.separator if agg.separator is not None else ","
            times = (1 if agg.distinct else per_value[v] for v in positive)
            return sep.join(v for v, n in zip(positive, times, strict=True) for _ in range(n))
        present = [(v, 1) for v in positive]
    if agg.func is AggFunc.COUNT:
        return sum(c for _, c in present)
    if not present:
        return None
    is_float = type(present[0][0]) is float
    numeric = type(present[0][0]) is Decimal
    total: int | Fraction | FloatTotal
    if is_float:
        total = 0
        for v, c in present:
            total = add_float(total, v, c)
    else:
        total = sum((value_to_exact(v) * c for v, c in present), start=0)
    if agg.func is AggFunc.SUM:
        return exact_to_value(total, is_float, numeric)
    count = sum(c for _, c in present)
    if count == 0:
        return None
    return exact_mean(total, count, numeric)
