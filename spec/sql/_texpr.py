"""Typed expressions (a bound expression and its type, or an untyped literal still to be
read) and the conversions between them: PostgreSQL's implicit casts, its assignment casts, and
the common type of several values."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    EvaluationError,
    InvalidTextRepresentation,
    NumericOverflow,
    NumericValueOutOfRange,
    SqlTypeError,
)
from ..plan import CallUnary, Cast, ColumnType, Literal, ScalarExpr, ScalarType, UnaryFunc
from ..plan.scalar_eval import cast_value
from ._common import S, _err, pg_type

__all__ = [
    "INTEGERS",
    "TExpr",
    "arith",
    "arith_number",
    "assign",
    "cast_to",
    "common_number",
]


@dataclass(frozen=True)
class TExpr:
    """A bound expression: ``expr`` with type ``type``; ``type=None`` is an untyped NULL.

    ``literal`` holds a string literal's text: it may still become another type
    (PostgreSQL's "unknown" literals), see :func:`_coerce`.
    """

    expr: ScalarExpr | None
    type: ColumnType | None
    literal: str | None = None

    @property
    def scalar(self) -> ScalarType | None:
        return None if self.type is None else self.type.scalar


def common_number(a: ScalarType, b: ScalarType) -> ScalarType:
    """The type two number types unify to in a CASE, COALESCE, UNION or USING column: the
    later on :data:`_LADDER` (PostgreSQL's ``select_common_type``: ``coalesce(1::int4,
    1::real)`` is a real)."""
    return a if _RUNG[a] >= _RUNG[b] else b


def arith_number(a: ScalarType, b: ScalarType) -> ScalarType:
    """The type PostgreSQL's operators on two number types compute in, and compare in: the
    later on :data:`_LADDER`, but a real meeting any other type is a double precision (its
    operators take ``float8`` for the other side: ``1::int4 + 1::real`` is a double)."""
    if a is not b and S.FLOAT32 in (a, b):
        return S.FLOAT64
    return common_number(a, b)


def cast_to(expr: ScalarExpr, src: ScalarType, to: ScalarType) -> ScalarExpr:
    """``expr`` of type ``src`` converted to ``to``: a :class:`Cast`, or for a real to text or
    numeric the function that knows its single precision."""
    if src is to:
        return expr
    single_to_numeric = src is S.FLOAT32 and to is S.NUMERIC  # 6 digits: FLOAT32_NUMERIC
    if isinstance(expr, Literal) and src.is_numeric and to.is_numeric and not single_to_numeric:
        # a constant converted now (an integer literal meeting a bigint is a bigint literal,
        # as the plan would have it), unless the conversion fails: then at run time
        if expr.value is None:
            return Literal(None, to)
        try:
            return Literal(cast_value(expr.value, to), to)
        except EvaluationError:
            pass
    if src is S.FLOAT32 and to is S.STRING:
        return CallUnary(UnaryFunc.FLOAT32_TEXT, expr)
    if src is S.FLOAT32 and to is S.NUMERIC:
        return CallUnary(UnaryFunc.FLOAT32_NUMERIC, expr)
    return Cast(expr, to)


def arith(
    build: Callable[[list[ScalarExpr]], ScalarExpr],
    operands: Sequence[tuple[ScalarExpr, ScalarType]],
    out: ScalarType,
) -> ScalarExpr:
    """An arithmetic call of result type ``out`` on operands of number types: the plan's
    arithmetic takes wide types (int64, float64, numeric), so each narrow operand is widened
    and a narrow result cast back, whose range check is PostgreSQL's overflow error
    (``32767::int2 + 1::int2``: "smallint out of range")."""
    wide = out.wide
    args = [e if t is wide or not t.is_narrow else cast_to(e, t, wide) for e, t in operands]
    call = build(args)
    return Cast(call, out) if out.is_narrow else call


def _literal_as(text: str, to: ScalarType, node: Any) -> Literal:
    """A string literal read as a ``to`` [InvalidTextRepresentation (22P02), or
    NumericValueOutOfRange (22003) for a number beyond the type]."""
    try:
        value = cast_value(text, to)
    except NumericOverflow:
        raise _err(
            NumericValueOutOfRange, f'value "{text}" is out of range for type {pg_type(to)}', node
        ) from None
    except EvaluationError:
        raise _err(
            InvalidTextRepresentation,
            f'invalid input syntax for type {pg_type(to)}: "{text}"',
            node,
        ) from None
    return Literal(value, to)


def _coerce(te: TExpr, to: ScalarType, node: Any, what: str = "") -> ScalarExpr:
    """``te`` as a ``to`` (implicit casts only: int to float, literals, NULL) [SqlTypeError]."""
    if te.expr is None or te.type is None:
        return Literal(None, to)
    if te.type.scalar is to:
        return te.expr
    if te.literal is not None:
        return _literal_as(te.literal, to, node)
    if (te.type.scalar, to) in _IMPLICIT_CASTS:
        return cast_to(te.expr, te.type.scalar, to)
    where = f" {what}" if what else ""
    raise _err(
        SqlTypeError,
        f"{where.strip() + ': ' if what else ''}expected {pg_type(to)}, got {pg_type(te.type.scalar)}",
        node,
    )


_LADDER = (S.INT16, S.INT32, S.INT64, S.NUMERIC, S.FLOAT32, S.FLOAT64)
"""PostgreSQL's number types in the order of its implicit casts: each converts implicitly to
every type after it (int2 -> int4 -> int8 -> numeric -> float4 -> float8)."""
_RUNG = {t: i for i, t in enumerate(_LADDER)}
INTEGERS = frozenset({S.INT16, S.INT32, S.INT64})
"""The integer types."""

_IMPLICIT_CASTS = frozenset((a, b) for a in _LADDER for b in _LADDER if _RUNG[a] < _RUNG[b])
"""PostgreSQL's implicit casts between the number types: up :data:`_LADDER`."""

_ASSIGNMENT_CASTS = frozenset(
    {
        *((a, b) for a in _LADDER for b in _LADDER if a is not b),
        (S.DATE, S.TIMESTAMP),
        (S.TIMESTAMP, S.DATE),
        *((t, S.STRING) for t in S),
    }
)
"""What an assignment converts (PostgreSQL's assignment casts: between numbers (rounding),
dates and timestamps, and anything to text)."""


def assign(te: TExpr, to: ScalarType, node: Any, what: str = "") -> ScalarExpr:
    """``te`` converted for a column of type ``to`` (``INSERT``, ``UPDATE ... SET``), as
    PostgreSQL's assignment does [SqlTypeError: column "c" is of type ... but expression is of
    type ...]."""
    if te.expr is not None and te.type is not None and te.literal is None:
        src = te.type.scalar
        if src is not to and (src, to) in _ASSIGNMENT_CASTS:
            return cast_to(te.expr, src, to)
        if src is not to:
            raise _err(
                SqlTypeError,
                f"{what + ' is' if what else 'column is'} of type {pg_type(to)} but expression "
                f"is of type {pg_type(src)}",
                node,
                hint="You will need to rewrite or cast the expression.",
            )
    return _coerce(te, to, node, what)


def _common_type(items: Sequence[tuple[TExpr, Any]], what: str) -> ScalarType | None:
    """The type several values unify to (CASE branches, COALESCE, UNION columns)."""
    typed = [(t, n) for t, n in items if t.type is not None and t.literal is None]
    if not typed:
        literals = [t for t, _ in items if t.literal is not None]
        return S.STRING if literals else None
    first = typed[0][0].scalar
    assert first is not None
    out = first
    for t, n in typed[1:]:
        s = t.scalar
        assert s is not None
        if s is out:
            continue
        if s.is_numeric and out.is_numeric:
            out = common_number(s, out)
            continue
        raise _err(
            SqlTypeError, f"{what} types {pg_type(out)} and {pg_type(s)} cannot be matched", n
        )
    return out


def _nullable(exprs: Iterable[TExpr]) -> bool:
    return any(t.type is None or t.type.nullable for t in exprs)
