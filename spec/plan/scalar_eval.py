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

__all__ = ["RowFn", "cast_value", "compile_scalar", "eval_scalar", "like_match"]

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


_BINARY: dict[BinaryFunc, Callable[[Any, Any], Any]] = {
    BinaryFunc.ADD: lambda a, b: _num(a + b),
    BinaryFunc.SUB: lambda a, b: _num(a - b),
    BinaryFunc.MUL: lambda a, b: _num(a * b),
    BinaryFunc.DIV: _div,
    BinaryFunc.MOD: _mod,
    BinaryFunc.EQ: lambda a, b: a == b,
    BinaryFunc.NE: lambda a, b: a != b,
    BinaryFunc.LT: lambda a, b: a < b,
    BinaryFunc.LE: lambda a, b: a <= b,
    BinaryFunc.GT: lambda a, b: a > b,
    BinaryFunc.GE: lambda a, b: a >= b,
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
def _like_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def like_match(s: str, pattern: str) -> bool:
    """SQL ``s LIKE pattern``: ``%`` any run, ``_`` one character, ``\\`` escapes; case-sensitive."""
    return _like_regex(pattern).fullmatch(s) is not None


def _substring(s: str, start: int, length: int | None) -> str:
    begin = max(start, 1) - 1
    if length is None:
        return s[begin:]
    if length < 0:
        raise InvalidArgument("negative substring length not allowed")
    end = max(start + length - 1, begin)
    return s[begin:end]


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
        try:
            return _int(int(v.strip()))
        except ValueError:
            raise InvalidCast(f"invalid input syntax for type int64: {v!r}") from None
    if to is ScalarType.FLOAT64:
        if t is float:
            return v
        if t is int:
            return float(v)
        try:
            f = float(v)
        except ValueError:
            raise InvalidCast(f"invalid input syntax for type float64: {v!r}") from None
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
