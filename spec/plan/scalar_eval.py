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
pattern ends in the escape character (a backslash), as PostgreSQL does.
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

__all__ = ["RowFn", "cast_value", "compile_scalar", "eval_scalar", "like_match", "sql_equal"]

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
}

_UNARY: dict[UnaryFunc, Callable[[Any], Any]] = {
    UnaryFunc.NOT: lambda v: not v,
    UnaryFunc.NEG: lambda v: _num(-v),
    UnaryFunc.LOWER: str.lower,
    UnaryFunc.UPPER: str.upper,
    UnaryFunc.LENGTH: len,
}


@lru_cache(maxsize=256)
def _like_regex(pattern: str) -> re.Pattern[str] | None:
    """The regex of a LIKE pattern, or ``None`` if it ends in an unpaired escape."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 == len(pattern):
                return None
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def like_match(s: str, pattern: str) -> bool:
    """SQL ``s LIKE pattern``: ``%`` any run, ``_`` one character, ``\\`` escapes; case-sensitive.

    A pattern ending in the escape character is an error (PostgreSQL's "LIKE
    pattern must not end with escape character"), raised on every evaluation
    rather than only when matching reaches the end of the pattern, so the
    outcome does not depend on the matching algorithm.
    """
    rx = _like_regex(pattern)
    if rx is None:
        raise InvalidArgument("LIKE pattern must not end with escape character")
    return rx.fullmatch(s) is not None


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


_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}


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
        low = v.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise InvalidCast(f"invalid input syntax for type bool: {v!r}")
    if to is ScalarType.DATE:
        if t is _dt.date:
            return v
        if t is _dt.datetime:
            return v.date()
        try:
            return _dt.date.fromisoformat(v.strip())
        except ValueError:
            raise InvalidCast(f"invalid input syntax for type date: {v!r}") from None
    if t is _dt.datetime:
        return v
    if t is _dt.date:
        return _dt.datetime(v.year, v.month, v.day)
    try:
        ts = _dt.datetime.fromisoformat(v.strip())
    except ValueError:
        raise InvalidCast(f"invalid input syntax for type timestamp: {v!r}") from None
    if ts.tzinfo is not None:
        raise InvalidCast(f"timestamp with a time zone: {v!r}")
    return ts


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
