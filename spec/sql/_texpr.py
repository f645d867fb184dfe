"""Typed expressions (a bound expression and its type, or an untyped literal still to be
read) and the conversions between them: PostgreSQL's implicit casts, its assignment casts, and
the common type of several values."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    EvaluationError,
    InvalidTextRepresentation,
    NumericOverflow,
    NumericValueOutOfRange,
    SqlTypeError,
)
from ..plan import Cast, ColumnType, Literal, ScalarExpr, ScalarType
from ..plan.scalar_eval import cast_value
from ._common import S, _err, pg_type

__all__ = ["TExpr", "assign"]


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
        return Cast(te.expr, to)
    where = f" {what}" if what else ""
    raise _err(
        SqlTypeError,
        f"{where.strip() + ': ' if what else ''}expected {pg_type(to)}, got {pg_type(te.type.scalar)}",
        node,
    )


_IMPLICIT_CASTS = frozenset({(S.INT64, S.FLOAT64), (S.INT64, S.NUMERIC), (S.NUMERIC, S.FLOAT64)})
"""PostgreSQL's implicit casts between the number types: up the ladder int8 -> numeric ->
float8."""

_ASSIGNMENT_CASTS = frozenset(
    {
        *_IMPLICIT_CASTS,
        (S.FLOAT64, S.INT64),
        (S.NUMERIC, S.INT64),
        (S.FLOAT64, S.NUMERIC),
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
            return Cast(te.expr, to)
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
            out = S.FLOAT64 if S.FLOAT64 in (s, out) else S.NUMERIC
            continue
        raise _err(
            SqlTypeError, f"{what} types {pg_type(out)} and {pg_type(s)} cannot be matched", n
        )
    return out


def _nullable(exprs: Iterable[TExpr]) -> bool:
    return any(t.type is None or t.type.nullable for t in exprs)
