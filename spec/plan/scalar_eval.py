"""Evaluating scalar expressions: SQL NULL semantics, typed evaluation errors.

``compile_scalar(expr)`` turns an expression into a function of a row, so an
executor pays the dispatch once per expression, not once per row. Errors
(division by zero, overflow, bad casts) raise subclasses of
:class:`EvaluationError`; operators turn them into error-collection updates.

Rules: any NULL operand makes arithmetic, comparison and string functions
NULL; ``AND``/``OR``/``NOT`` follow three-valued logic and are evaluated left
to right, stopping at the first ``false`` (``AND``) or ``true`` (``OR``);
``COALESCE`` stops at the first non-NULL; ``CONCAT`` skips NULLs; int64
``/`` truncates toward zero and ``%`` takes the sign of the dividend.

As in SQL, an int64 meeting a float64 (in arithmetic or a comparison) is
converted to float64 first, so ``2**62 + 1 = 2.0**62`` is true. A string cast
to a number accepts what PostgreSQL's input functions accept, in ASCII only:
surrounding ASCII whitespace, a sign, and for int64 decimal digits (or
``0x``/``0o``/``0b`` digits) with single underscores between them, for
float64 decimal notation with an optional exponent (``NaN`` and infinities
are valid syntax but not float64 values here). ``LIKE`` raises when its
pattern ends in the escape character (a backslash, or the ``ESCAPE`` one), as
PostgreSQL does.

A string cast to bool, date or timestamp follows PostgreSQL's (and DuckDB's)
literal syntax, in ASCII: surrounding ASCII whitespace (never Unicode spaces);
for bool ``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0`` and
PostgreSQL's unambiguous prefixes (``t``, ``tr``, ``y``, ``of``, ...), in any
case; for a date ``YYYY-M-D`` (four-digit year, one or two digits for month
and day); for a timestamp a date, optionally followed by a space or ``T`` and
``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.ffffff`` (one to six fraction digits:
PostgreSQL rounds a seventh, DuckDB truncates it, tidegate refuses it).

The functions added by issue 16 (see ``docs/plan-language.md``): ``abs``
(int64 overflow on ``abs(INT64_MIN)``), ``round`` (to an integral value of the
same type, half away from zero as PostgreSQL's ``numeric`` and DuckDB's
``double`` do; PostgreSQL's ``double precision`` rounds half to even),
``greatest``/``least`` (NULLs ignored, NULL only if all are), ``nullif``,
``trim``/``ltrim``/``rtrim`` (spaces only, as SQL's default), ``replace`` (an
empty search string leaves the string as it is), ``ILIKE`` (each character
lower-cased by its simple one-to-one mapping, as DuckDB does; the escape
character matched as written, as PostgreSQL does),
``LIKE``/``ILIKE ... ESCAPE`` (an escape of one character, or empty for none),
``||`` (NULL if either side is), ``date_trunc``, ``extract`` and
``timestamp ± milliseconds`` (years 1 to 9999, else "timestamp out of range").
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..errors import DivisionByZero, InvalidArgument, InvalidCast, InvalidPlan, NumericOverflow
from ..frontier import Row
from .scalar import (
    EXTRACT_FIELDS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from .schema import INT64_MAX, INT64_MIN, ScalarType

__all__ = [
    "RowFn",
    "cast_value",
    "compile_scalar",
    "date_trunc",
    "eval_scalar",
    "extract_field",
    "ilike_match",
    "like_match",
    "sql_equal",
    "sql_round",
]

RowFn = Callable[[Row], Any]


def eval_scalar(expr: ScalarExpr, row: Row) -> Any:
    """The value of ``expr`` on ``row`` (``None`` is NULL); raises :class:`EvaluationError`."""
    return compile_scalar(expr)(row)


def _int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise NumericOverflow("integer out of range")
    return v


def _float(v: float) -> float:
    if not math.isfinite(v):
        raise NumericOverflow("float out of range")
    return v


def _num(v: Any) -> Any:
    return _int(v) if type(v) is int else _float(v)


def _div(a: Any, b: Any) -> Any:
    if b == 0:
        raise DivisionByZero("division by zero")
    if type(a) is int and type(b) is int:
        q = abs(a) // abs(b)
        return _int(q if (a < 0) == (b < 0) else -q)
    return _float(a / b)


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        raise DivisionByZero("division by zero")
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    return _float(math.fmod(a, b))


def _eq(a: Any, b: Any) -> Any:
    # operands of one type but for int64 against float64 (the typechecker allows no other
    # mix): SQL converts the int64 to float64, where Python would compare exactly
    if type(a) is not type(b):
        return float(a) == float(b)
    return a == b


def _ne(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        return float(a) != float(b)
    return a != b


def _lt(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        return float(a) < float(b)
    return a < b


def _le(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        return float(a) <= float(b)
    return a <= b


def _gt(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        return float(a) > float(b)
    return a > b


def _ge(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        return float(a) >= float(b)
    return a >= b


def sql_equal(a: Any, b: Any) -> bool:
    """Whether non-NULL ``a`` and ``b`` are equal as SQL compares them: an int64 and a
    float64 as float64 (``2**62 + 1`` equals ``2.0**62``), other values of one type exactly."""
    return bool(_eq(a, b))


_BINARY: dict[BinaryFunc, Callable[[Any, Any], Any]] = {
    BinaryFunc.ADD: lambda a, b: _num(a + b),
    BinaryFunc.SUB: lambda a, b: _num(a - b),
    BinaryFunc.MUL: lambda a, b: _num(a * b),
    BinaryFunc.DIV: _div,
    BinaryFunc.MOD: _mod,
    BinaryFunc.EQ: _eq,
    BinaryFunc.NE: _ne,
    BinaryFunc.LT: _lt,
    BinaryFunc.LE: _le,
    BinaryFunc.GT: _gt,
    BinaryFunc.GE: _ge,
    BinaryFunc.LIKE: lambda s, p: like_match(s, p),
    BinaryFunc.ILIKE: lambda s, p: ilike_match(s, p),
    BinaryFunc.CONCAT: lambda a, b: a + b,
    BinaryFunc.ADD_MS: lambda t, ms: _add_ms(t, ms),
    BinaryFunc.SUB_MS: lambda t, ms: _add_ms(t, -ms),
}

_UNARY: dict[UnaryFunc, Callable[[Any], Any]] = {
    UnaryFunc.NOT: lambda v: not v,
    UnaryFunc.NEG: lambda v: _num(-v),
    UnaryFunc.LOWER: str.lower,
    UnaryFunc.UPPER: str.upper,
    UnaryFunc.LENGTH: len,
    UnaryFunc.ABS: lambda v: _num(abs(v)),
    UnaryFunc.ROUND: lambda v: sql_round(v),
    UnaryFunc.TRIM: lambda v: v.strip(" "),
    UnaryFunc.LTRIM: lambda v: v.lstrip(" "),
    UnaryFunc.RTRIM: lambda v: v.rstrip(" "),
}


def sql_round(v: Any) -> Any:
    """``round(v)``: an int64 unchanged; a float64 to the nearest integral float64, halves
    away from zero (``round(2.5) = 3.0``, ``round(-0.5) = -1.0``, ``round(-0.4) = -0.0``)."""
    if type(v) is int:
        return v
    a = abs(v)
    f = math.floor(a)
    r = f + 1.0 if a - f >= 0.5 else float(f)  # a - f is exact: no 0.49999999999999994 trap
    return math.copysign(r, v)


_EPOCH = _dt.datetime(1970, 1, 1)
_MICRO = _dt.timedelta(microseconds=1)
_TS_MIN_US = (_dt.datetime.min - _EPOCH) // _MICRO
_TS_MAX_US = (_dt.datetime.max - _EPOCH) // _MICRO


def _micros(v: _dt.date) -> int:
    """Microseconds since 1970-01-01 00:00 of a timestamp (or a date's midnight)."""
    if type(v) is not _dt.datetime:
        v = _dt.datetime(v.year, v.month, v.day)
    return (v - _EPOCH) // _MICRO


def _add_ms(v: _dt.date, ms: int) -> _dt.datetime:
    us = _micros(v) + ms * 1000
    if not _TS_MIN_US <= us <= _TS_MAX_US:
        raise NumericOverflow("timestamp out of range")
    return _EPOCH + _dt.timedelta(microseconds=us)


def date_trunc(unit: str, ts: _dt.datetime) -> _dt.datetime:
    """``ts`` truncated to the start of its ``unit`` (one of :data:`~.scalar.DATE_TRUNC_UNITS`)."""
    if unit == "second":
        return ts.replace(microsecond=0)
    if unit == "minute":
        return ts.replace(second=0, microsecond=0)
    if unit == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    day = _dt.datetime(ts.year, ts.month, ts.day)
    if unit == "day":
        return day
    if unit == "week":  # ISO weeks start on Monday; 0001-01-01 is a Monday, so none is lost
        return day - _dt.timedelta(days=ts.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "quarter":
        return _dt.datetime(ts.year, 3 * ((ts.month - 1) // 3) + 1, 1)
    if unit == "year":
        return _dt.datetime(ts.year, 1, 1)
    raise InvalidArgument(f"date_trunc() unit {unit!r} not supported")


def extract_field(field: str, v: _dt.date) -> Any:
    """``extract(field FROM v)`` (see :data:`~.scalar.EXTRACT_FIELDS`)."""
    if field == "year":
        return v.year
    if field == "quarter":
        return (v.month - 1) // 3 + 1
    if field == "month":
        return v.month
    if field == "day":
        return v.day
    if field == "dow":
        return v.isoweekday() % 7
    if field == "doy":
        return v.timetuple().tm_yday
    if field == "epoch":
        # the microseconds as float64, then divided: exact below 2^53 us (years 1685-2255)
        return float(_micros(v)) / 1e6
    if type(v) is not _dt.datetime:
        raise InvalidArgument(f"extract({field}) of a date")
    if field == "hour":
        return v.hour
    if field == "minute":
        return v.minute
    if field == "second":
        return v.second
    raise InvalidArgument(f"extract() field {field!r} not supported")


@lru_cache(maxsize=256)
def _like_regex(pattern: str, escape: str, fold: bool) -> re.Pattern[str] | None:
    """The regex of a LIKE pattern, or ``None`` if it ends in an unpaired escape.

    ``escape`` is one character, or empty for none; with ``fold``, literal
    characters are lower-cased (:func:`_simple_lower`), for ILIKE.
    """
    out, i = [], 0
    lit = _simple_lower if fold else str
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            if i + 1 == len(pattern):
                return None
            out.append(re.escape(lit(pattern[i + 1])))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(lit(ch)))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _match(s: str, pattern: str, escape: str, fold: bool) -> bool:
    if len(escape) > 1:
        raise InvalidArgument("invalid escape string: must be empty or one character")
    rx = _like_regex(pattern, escape, fold)
    if rx is None:
        raise InvalidArgument("LIKE pattern must not end with escape character")
    return rx.fullmatch(_simple_lower(s) if fold else s) is not None


def like_match(s: str, pattern: str, escape: str = "\\") -> bool:
    """SQL ``s LIKE pattern ESCAPE escape``: ``%`` any run, ``_`` one character, ``escape``
    (a backslash unless given; empty for none) makes the next character literal;
    case-sensitive.

    A pattern ending in the escape character is an error (PostgreSQL's "LIKE
    pattern must not end with escape character"), raised on every evaluation
    rather than only when matching reaches the end of the pattern, so the
    outcome does not depend on the matching algorithm. An escape of more than
    one character is an error too ("invalid escape string").
    """
    return _match(s, pattern, escape, False)


def _simple_lower(s: str) -> str:
    """``s`` with each character lower-cased by its simple (one-to-one) mapping: Python's
    ``lower`` is the full mapping, which turns ``İ`` into two characters; its first is the
    simple mapping's (the only unconditional one-to-many lower-case mapping)."""
    if s.isascii():
        return s.lower()
    return "".join(c.lower()[0] for c in s)


def ilike_match(s: str, pattern: str, escape: str = "\\") -> bool:
    """SQL ``s ILIKE pattern ESCAPE escape``: :func:`like_match` with the string and the
    pattern's literal characters lower-cased character by character (so ``'İ' ILIKE 'i'``
    holds, ``'ß' ILIKE 'SS'`` does not); the escape character is matched as written."""
    return _match(s, pattern, escape, True)


def _substring(s: str, start: int, length: int | None) -> str:
    begin = max(start, 1) - 1
    if length is None:
        return s[begin:]
    if length < 0:
        raise InvalidArgument("negative substring length not allowed")
    end = max(start + length - 1, begin)
    return s[begin:end]


_INT_SYNTAX = re.compile(
    r"[ \t\n\r\v\f]*([+-]?)"
    r"(0[xX](?:_?[0-9A-Fa-f])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[0-9](?:_?[0-9])*)"
    r"[ \t\n\r\v\f]*"
)
"""What PostgreSQL's int8 input accepts (version 16 on): ASCII whitespace around, a sign,
decimal, hexadecimal, octal or binary digits with single underscores between them (and
after the base prefix)."""
_BASES = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
_FLOAT_SYNTAX = re.compile(
    r"[ \t\n\r\v\f]*[+-]?"
    r"(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)"
    r"[ \t\n\r\v\f]*",
    re.ASCII | re.IGNORECASE,
)
"""What PostgreSQL's float8 input accepts, in decimal notation: ASCII whitespace around, a
sign, digits with an optional point and exponent, ``NaN``, ``Inf`` and ``Infinity`` (any
case). Python's ``float`` reads every such string the same way (and more: non-ASCII
digits and spaces, underscores, which this excludes)."""


def _parse_int(v: str) -> int:
    """``v`` as an int64 literal (:data:`_INT_SYNTAX`); raise :class:`InvalidCast` or
    :class:`NumericOverflow`.

    On printable ASCII without underscores, Python's ``int`` and ``float`` read
    exactly the decimal literals PostgreSQL reads (they differ from it only on
    non-ASCII digits and spaces, ASCII control characters they take for spaces,
    and underscores), so the common case skips the regular expression.
    """
    if v.isascii() and v.isprintable() and "_" not in v:
        try:
            return _int(int(v))
        except ValueError:
            pass  # not decimal (or too long for Python): the full syntax decides
    m = _INT_SYNTAX.fullmatch(v)
    if m is None:
        raise InvalidCast(f"invalid input syntax for type int64: {v!r}")
    sign, digits = m.group(1, 2)
    base = _BASES[digits[:2]] if len(digits) > 1 and digits[1] in "xXoObB" else 10
    try:
        n = int((digits[2:] if base != 10 else digits).replace("_", ""), base)
    except ValueError:  # more decimal digits than Python converts: far beyond int64
        raise NumericOverflow("integer out of range") from None
    return _int(-n if sign == "-" else n)


def _parse_float(v: str) -> float:
    """``v`` as a float64 literal (:data:`_FLOAT_SYNTAX`), possibly not finite; raise
    :class:`InvalidCast` (see :func:`_parse_int` for the shortcut)."""
    try:
        f = float(v)
    except ValueError:
        raise InvalidCast(f"invalid input syntax for type float64: {v!r}") from None
    if not (v.isascii() and v.isprintable() and "_" not in v) and not _FLOAT_SYNTAX.fullmatch(v):
        raise InvalidCast(f"invalid input syntax for type float64: {v!r}")
    return f


_WS = "[ \t\n\r\v\f]*"
_DATE = "([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_DATE_SYNTAX = re.compile(f"{_WS}{_DATE}{_WS}", re.ASCII)
_TS_SYNTAX = re.compile(
    f"{_WS}{_DATE}(?:[ T]([0-9]{{2}}):([0-9]{{2}})(?::([0-9]{{2}})(?:\\.([0-9]{{1,6}}))?)?)?{_WS}",
    re.ASCII,
)
"""The date and timestamp literals PostgreSQL and DuckDB both read (ASCII only)."""
_BOOL_WORDS = (("true", True, 1), ("yes", True, 1), ("on", True, 2))
_BOOL_WORDS_FALSE = (("false", False, 1), ("no", False, 1), ("off", False, 2))


def _parse_bool(v: str) -> bool:
    """PostgreSQL's ``boolin``: ASCII whitespace around, any ASCII case, ``1``/``0`` or a
    prefix of ``true``, ``yes``, ``false``, ``no`` (at least one letter) or of ``on``,
    ``off`` (at least two)."""
    w = v.strip(" \t\n\r\v\f")
    if w.isascii() and w:
        low = w.lower()
        if low == "1":
            return True
        if low == "0":
            return False
        for word, value, least in (*_BOOL_WORDS, *_BOOL_WORDS_FALSE):
            if len(low) >= least and word.startswith(low):
                return value
    raise InvalidCast(f"invalid input syntax for type bool: {v!r}")


def _parse_datetime(v: str, to: ScalarType) -> Any:
    m = (_DATE_SYNTAX if to is ScalarType.DATE else _TS_SYNTAX).fullmatch(v)
    if m is None:
        raise InvalidCast(f"invalid input syntax for type {to.value}: {v!r}")
    parts = m.groups()
    try:
        if to is ScalarType.DATE:
            return _dt.date(int(parts[0]), int(parts[1]), int(parts[2]))
        y, mo, d, h, mi, sec, frac = parts
        return _dt.datetime(
            int(y),
            int(mo),
            int(d),
            int(h or 0),
            int(mi or 0),
            int(sec or 0),
            int((frac or "0").ljust(6, "0")),
        )
    except ValueError:  # a field out of range (month 13, 2020-02-30, hour 24, year 0)
        raise InvalidCast(f"invalid input syntax for type {to.value}: {v!r}") from None


def _to_string(v: Any) -> str:
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is float:
        return repr(v)
    if type(v) is _dt.datetime:
        return v.isoformat(sep=" ")
    if type(v) is _dt.date:
        return v.isoformat()
    return str(v)


def cast_value(v: Any, to: ScalarType) -> Any:
    """Convert the non-NULL value ``v`` to ``to`` (the source type is ``v``'s Python type)."""
    t = type(v)
    if to is ScalarType.STRING:
        return v if t is str else _to_string(v)
    if to is ScalarType.INT64:
        if t is int:
            return v
        if t is bool:
            return int(v)
        if t is float:
            r = round(v)
            if not INT64_MIN <= r <= INT64_MAX:
                raise NumericOverflow("integer out of range")
            return r
        return _parse_int(v)
    if to is ScalarType.FLOAT64:
        if t is float:
            return v
        if t is int:
            return float(v)
        f = _parse_float(v)
        if not math.isfinite(f):
            raise InvalidCast(f"invalid input syntax for type float64: {v!r}")
        return f
    if to is ScalarType.BOOL:
        if t is bool:
            return v
        if t is int:
            return v != 0
        return _parse_bool(v)
    if to is ScalarType.DATE:
        if t is _dt.date:
            return v
        if t is _dt.datetime:
            return v.date()
        return _parse_datetime(v, to)
    if t is _dt.datetime:
        return v
    if t is _dt.date:
        return _dt.datetime(v.year, v.month, v.day)
    return _parse_datetime(v, to)


def _compile_and(fs: list[RowFn]) -> RowFn:
    def f(row: Row) -> Any:
        saw_null = False
        for g in fs:
            v = g(row)
            if v is False:
                return False
            if v is None:
                saw_null = True
        return None if saw_null else True

    return f


def _compile_or(fs: list[RowFn]) -> RowFn:
    def f(row: Row) -> Any:
        saw_null = False
        for g in fs:
            v = g(row)
            if v is True:
                return True
            if v is None:
                saw_null = True
        return None if saw_null else False

    return f


def _word(e: ScalarExpr) -> str:
    if not (isinstance(e, Literal) and isinstance(e.value, str)):
        raise InvalidPlan(f"expected a string literal, got {e!r}")
    return e.value.lower()


def _strict(fn: Callable[..., Any], fs: list[RowFn]) -> RowFn:
    """``fn`` of the arguments' values, NULL if any is NULL (every argument evaluated)."""

    def f(row: Row) -> Any:
        args = [g(row) for g in fs]
        if any(a is None for a in args):
            return None
        return fn(*args)

    return f


def _compile_variadic(expr: CallVariadic, fs: list[RowFn]) -> RowFn:
    vf = expr.func
    if vf in (VariadicFunc.GREATEST, VariadicFunc.LEAST):
        pick = max if vf is VariadicFunc.GREATEST else min

        def extreme(row: Row) -> Any:
            vals = [v for v in (g(row) for g in fs) if v is not None]
            return pick(vals) if vals else None

        return extreme
    if vf is VariadicFunc.NULLIF:
        a, b = fs

        def nullif(row: Row) -> Any:
            x, y = a(row), b(row)
            if x is None or y is None:
                return x
            return None if sql_equal(x, y) else x

        return nullif
    if vf is VariadicFunc.REPLACE:
        return _strict(lambda s, old, new: s.replace(old, new) if old else s, fs)
    if vf is VariadicFunc.LIKE_ESCAPE:
        return _strict(like_match, fs)
    if vf is VariadicFunc.ILIKE_ESCAPE:
        return _strict(ilike_match, fs)
    if vf is VariadicFunc.DATE_TRUNC:
        unit, ts = _word(expr.exprs[0]), fs[1]

        def trunc(row: Row) -> Any:
            v = ts(row)
            return None if v is None else date_trunc(unit, v)

        return trunc
    if vf is VariadicFunc.EXTRACT:
        field, src = _word(expr.exprs[0]), fs[1]
        if field not in EXTRACT_FIELDS:
            raise InvalidPlan(f"extract() field {field!r} not supported")

        def extract(row: Row) -> Any:
            v = src(row)
            return None if v is None else extract_field(field, v)

        return extract
    raise InvalidPlan(f"not a variadic function: {vf!r}")


def compile_scalar(expr: ScalarExpr) -> RowFn:
    """A function computing ``expr`` on a row. The expression is assumed well typed."""
    if isinstance(expr, ColumnRef):
        i = expr.index
        return lambda row: row[i]
    if isinstance(expr, Literal):
        value = expr.value
        return lambda row: value
    if isinstance(expr, CallUnary):
        inner = compile_scalar(expr.expr)
        if expr.func is UnaryFunc.IS_NULL:
            return lambda row: inner(row) is None
        op = _UNARY[expr.func]

        def unary(row: Row) -> Any:
            v = inner(row)
            return None if v is None else op(v)

        return unary
    if isinstance(expr, CallBinary):
        left, right = compile_scalar(expr.left), compile_scalar(expr.right)
        bop = _BINARY[expr.func]

        def binary(row: Row) -> Any:
            a = left(row)
            b = right(row)
            if a is None or b is None:
                return None
            return bop(a, b)

        return binary
    if isinstance(expr, CallVariadic):
        fs = [compile_scalar(e) for e in expr.exprs]
        if expr.func is VariadicFunc.AND:
            return _compile_and(fs)
        if expr.func is VariadicFunc.OR:
            return _compile_or(fs)
        if expr.func is VariadicFunc.COALESCE:

            def coalesce(row: Row) -> Any:
                for g in fs:
                    v = g(row)
                    if v is not None:
                        return v
                return None

            return coalesce
        if expr.func is VariadicFunc.CONCAT:

            def concat(row: Row) -> Any:
                return "".join(v for v in (g(row) for g in fs) if v is not None)

            return concat
        if expr.func is not VariadicFunc.SUBSTRING:
            return _compile_variadic(expr, fs)

        def substring(row: Row) -> Any:
            args = [g(row) for g in fs]
            if any(a is None for a in args):
                return None
            return _substring(args[0], args[1], args[2] if len(args) > 2 else None)

        return substring
    if isinstance(expr, If):
        cond, then, els = (
            compile_scalar(expr.cond),
            compile_scalar(expr.then),
            compile_scalar(expr.els),
        )
        return lambda row: then(row) if cond(row) is True else els(row)
    if isinstance(expr, Cast):
        inner = compile_scalar(expr.expr)
        to = expr.to

        def cast(row: Row) -> Any:
            v = inner(row)
            return None if v is None else cast_value(v, to)

        return cast
    raise InvalidPlan(f"not a scalar expression: {expr!r}")
