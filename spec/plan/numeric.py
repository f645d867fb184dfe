"""``numeric``: exact decimal numbers, computed as PostgreSQL computes them, kept as
Materialize keeps them.

A value is a finite :class:`decimal.Decimal` in its *reduced* form: no trailing zeros after
the point, never a positive exponent (``100`` is ``Decimal('100')``, not ``1E+2``), never
``-0``. Materialize stores numerics reduced so that equal numbers are equal rows, and prints
them without trailing zeros (``1.50::numeric`` is ``1.5``); PostgreSQL keeps a display scale
(``1.50``). Reduced values make equality, hashing and text one thing, so rows consolidate,
group and join on the number, which is what both engines compare.

Arithmetic is PostgreSQL's: ``+``, ``-``, ``*`` are exact; ``/`` rounds half away from zero to
PostgreSQL's result scale (at least 16 significant digits, at least either operand's scale:
``select_div_scale`` in PostgreSQL's ``numeric.c``); ``%`` takes the sign of the dividend.
A value PostgreSQL could not hold (more than :data:`MAX_DIGITS` digits before the point, or
more than :data:`MAX_SCALE` after it) is ``22003`` ("value overflows numeric format"). ``NaN`` and the infinities, which
PostgreSQL's numeric has and Materialize's ``NaN`` only, are refused.
"""

from __future__ import annotations

import decimal
import re
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from fractions import Fraction

from ..errors import DivisionByZero, InvalidCast, NumericOverflow

__all__ = [
    "MAX_DIGITS",
    "MAX_PRECISION",
    "MAX_SCALE",
    "apply_typmod",
    "div_scale",
    "float_to_numeric",
    "fraction_to_numeric",
    "numeric_add",
    "numeric_avg",
    "numeric_div",
    "numeric_mod",
    "numeric_mul",
    "numeric_sub",
    "numeric_text",
    "numeric_to_float",
    "numeric_to_int",
    "parse_numeric",
    "reduce",
    "round_numeric",
    "trunc_numeric",
]

MAX_DIGITS = 131072
"""The digits before the point a numeric can have (PostgreSQL's limit)."""
MAX_SCALE = 16383
"""The digits after the point a numeric can have (PostgreSQL's limit)."""
MAX_PRECISION = 1000
"""The largest precision of ``numeric(p, s)`` (PostgreSQL's ``NUMERIC_MAX_PRECISION``)."""

_MIN_SIG_DIGITS = 16
_MAX_DISPLAY_SCALE = 1000

_CTX = decimal.Context(
    prec=MAX_DIGITS + MAX_SCALE + 2,
    rounding=ROUND_HALF_UP,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
)
"""Wide enough that a sum, difference or product of two values in range is exact."""


def _overflow() -> NumericOverflow:
    return NumericOverflow("value overflows numeric format")


def reduce(d: Decimal) -> Decimal:
    """``d`` in the reduced form values take; 22003 if PostgreSQL could not hold it."""
    if not d:
        return Decimal(0)
    if d.adjusted() >= MAX_DIGITS:
        raise _overflow()
    exp = d.as_tuple().exponent
    assert isinstance(exp, int)
    if exp > 0:
        return d.quantize(Decimal(1), context=_CTX)
    if exp < 0:
        d = d.normalize(_CTX)
        exp = d.as_tuple().exponent
        assert isinstance(exp, int)
        if exp > 0:
            d = d.quantize(Decimal(1), context=_CTX)
        elif exp < -MAX_SCALE:
            raise _overflow()
    return d


_SYNTAX = re.compile(
    r"[ \t\n\r\v\f]*([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[ \t\n\r\v\f]*"
)
_SPECIAL = re.compile(r"[ \t\n\r\v\f]*[+-]?(nan|inf|infinity)[ \t\n\r\v\f]*", re.IGNORECASE)


def parse_numeric(text: str) -> Decimal:
    """PostgreSQL's numeric input (ASCII whitespace around, a sign, digits with an optional
    point, an optional exponent); ``22P02`` for anything else, ``0A000``-worded ``22P02``
    for ``NaN``/``Infinity``, ``22003`` beyond the range."""
    m = _SYNTAX.fullmatch(text)
    if m is None:
        if _SPECIAL.fullmatch(text):
            raise InvalidCast(f'numeric value "{text.strip()}" is not supported (NaN, Infinity)')
        raise InvalidCast(f'invalid input syntax for type numeric: "{text}"')
    body = m.group(1)
    _, _, exponent = body.lower().partition("e")
    if exponent and abs(int(exponent)) > 10 * MAX_DIGITS:  # far beyond: no Decimal of it
        raise _overflow()
    return reduce(Decimal(body, _CTX))


def numeric_text(d: Decimal) -> str:
    """The text of a (reduced) value: fixed point, no exponent, no trailing zeros."""
    return format(d, "f")


def float_to_numeric(v: float) -> Decimal:
    """A float64 as PostgreSQL converts it: its 15 significant digits (``%.15g``)."""
    if v != v or v in (float("inf"), float("-inf")):
        raise InvalidCast(f"cannot convert {'NaN' if v != v else 'infinity'} to numeric")
    return reduce(Decimal(f"{v:.15g}"))


def numeric_to_float(d: Decimal) -> float:
    """The float64 nearest ``d``; 22003 beyond float64."""
    f = float(d)
    if f in (float("inf"), float("-inf")):
        raise NumericOverflow(f'"{numeric_text(d)}" is out of range for type double precision')
    if f == 0.0 and d:
        raise NumericOverflow(f'"{numeric_text(d)}" is out of range for type double precision')
    return f


def numeric_to_int(d: Decimal, lo: int, hi: int, name: str) -> int:
    """``d`` rounded half away from zero to an integer of ``[lo, hi]`` (22003 else)."""
    n = int(d.quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_CTX))
    if not lo <= n <= hi:
        raise NumericOverflow(f"{name} out of range")
    return n


def numeric_add(a: Decimal, b: Decimal) -> Decimal:
    return reduce(_CTX.add(a, b))


def numeric_sub(a: Decimal, b: Decimal) -> Decimal:
    return reduce(_CTX.subtract(a, b))


def numeric_mul(a: Decimal, b: Decimal) -> Decimal:
    return reduce(_CTX.multiply(a, b))


def _scale(d: Decimal) -> int:
    exp = d.as_tuple().exponent
    assert isinstance(exp, int)
    return max(0, -exp)


def _weight(d: Decimal) -> tuple[int, int]:
    """PostgreSQL's base-10000 weight of ``d`` (non-zero) and its first base-10000 digit."""
    weight = d.adjusted() // 4
    first = int(d.copy_abs().scaleb(-4 * weight, _CTX))
    return weight, first


def div_scale(a: Decimal, b: Decimal) -> int:
    """The scale PostgreSQL gives ``a / b`` (``select_div_scale``): enough digits for 16
    significant ones, at least either operand's scale, at most 1000."""
    w1, f1 = _weight(a) if a else (0, 0)
    w2, f2 = _weight(b) if b else (0, 0)
    qweight = w1 - w2
    if f1 <= f2:
        qweight -= 1
    rscale = _MIN_SIG_DIGITS - qweight * 4
    rscale = max(rscale, _scale(a), _scale(b), 0)
    return min(rscale, _MAX_DISPLAY_SCALE)


def _divide(a: Decimal, b: Decimal, rscale: int) -> Decimal:
    if not b:
        raise DivisionByZero("division by zero")
    if not a:
        return Decimal(0)
    # truncate with digits to spare, then round half away from zero: exact (a value at least
    # half an ulp stays so when truncated at a finer digit)
    digits = max(a.adjusted() - b.adjusted() + 2, 0) + rscale + 2
    ctx = _CTX.copy()
    ctx.prec = digits
    ctx.rounding = ROUND_DOWN
    q = ctx.divide(a, b)
    return reduce(q.quantize(Decimal(1).scaleb(-rscale), rounding=ROUND_HALF_UP, context=_CTX))


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` rounded as PostgreSQL rounds it; 22012 if ``b`` is zero."""
    if not b:
        raise DivisionByZero("division by zero")
    return _divide(a, b, div_scale(a, b))


def numeric_mod(a: Decimal, b: Decimal) -> Decimal:
    """``a % b``, the sign of ``a``; 22012 if ``b`` is zero."""
    if not b:
        raise DivisionByZero("division by zero")
    return reduce(_CTX.remainder(a, b))


def numeric_avg(total: Decimal, count: int) -> Decimal:
    """PostgreSQL's ``avg``: the sum divided by the count, at the scale ``/`` gives."""
    c = Decimal(count)
    return _divide(total, c, div_scale(total, c))


def fraction_to_numeric(f: Fraction | int) -> Decimal:
    """An exact sum of numerics (a fraction whose denominator divides a power of ten)."""
    if isinstance(f, int):
        return reduce(Decimal(f))
    return reduce(_CTX.divide(Decimal(f.numerator), Decimal(f.denominator)))


def round_numeric(d: Decimal, digits: int = 0) -> Decimal:
    """``round(d, digits)``: half away from zero (left of the point if ``digits < 0``)."""
    digits = max(min(digits, MAX_SCALE), -MAX_DIGITS)
    return reduce(d.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP, context=_CTX))


def trunc_numeric(d: Decimal, digits: int = 0) -> Decimal:
    """``trunc(d, digits)``: toward zero."""
    digits = max(min(digits, MAX_SCALE), -MAX_DIGITS)
    return reduce(d.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_DOWN, context=_CTX))


def apply_typmod(d: Decimal, precision: int, scale: int) -> Decimal:
    """``d`` assigned to ``numeric(precision, scale)``: rounded half away from zero to
    ``scale`` digits; 22003 ("numeric field overflow") if more than ``precision - scale``
    digits remain before the point."""
    r = round_numeric(d, scale)
    if r and r.adjusted() >= precision - scale:
        raise NumericOverflow(
            "numeric field overflow: a field with precision "
            f"{precision}, scale {scale} must round to an absolute value less than "
            f"{'1' if precision == scale else '10^' + str(precision - scale)}"
        )
    return r
