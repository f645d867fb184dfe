"""Scalar expressions over one row, and their types.

An expression refers to columns by position (:class:`ColumnRef`); the builder
(:mod:`.builder`) resolves names. :func:`scalar_type` type-checks an expression
against a schema and gives its result type; evaluation lives in
:mod:`.scalar_eval`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from ..errors import InvalidPlan, TypeMismatch
from .schema import ColumnType, ScalarType, Schema, value_matches

__all__ = [
    "CAST_TABLE",
    "BinaryFunc",
    "CallBinary",
    "CallUnary",
    "CallVariadic",
    "Cast",
    "ColumnRef",
    "If",
    "Literal",
    "ScalarExpr",
    "UnaryFunc",
    "VariadicFunc",
    "scalar_type",
]

S = ScalarType


class UnaryFunc(StrEnum):
    NOT = "not"
    NEG = "neg"
    IS_NULL = "is_null"
    LOWER = "lower"
    UPPER = "upper"
    LENGTH = "length"


class BinaryFunc(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    LIKE = "like"


class VariadicFunc(StrEnum):
    AND = "and"
    OR = "or"
    COALESCE = "coalesce"
    CONCAT = "concat"
    SUBSTRING = "substring"


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """The value of column ``index`` of the input row."""

    index: int


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant of type ``type``; ``value=None`` is a typed NULL."""

    value: Any
    type: ScalarType


@dataclass(frozen=True, slots=True)
class CallUnary:
    func: UnaryFunc
    expr: ScalarExpr


@dataclass(frozen=True, slots=True)
class CallBinary:
    func: BinaryFunc
    left: ScalarExpr
    right: ScalarExpr


@dataclass(frozen=True, slots=True)
class CallVariadic:
    func: VariadicFunc
    exprs: tuple[ScalarExpr, ...]


@dataclass(frozen=True, slots=True)
class If:
    """``CASE WHEN cond THEN then ELSE els END`` (a NULL condition takes ``els``)."""

    cond: ScalarExpr
    then: ScalarExpr
    els: ScalarExpr


@dataclass(frozen=True, slots=True)
class Cast:
    """Convert to ``to``; see :data:`CAST_TABLE` for the allowed conversions."""

    expr: ScalarExpr
    to: ScalarType


ScalarExpr: TypeAlias = ColumnRef | Literal | CallUnary | CallBinary | CallVariadic | If | Cast

CAST_TABLE: frozenset[tuple[ScalarType, ScalarType]] = frozenset(
    {
        (S.INT64, S.FLOAT64),
        (S.FLOAT64, S.INT64),
        (S.INT64, S.BOOL),
        (S.BOOL, S.INT64),
        (S.DATE, S.TIMESTAMP),
        (S.TIMESTAMP, S.DATE),
        *((t, S.STRING) for t in S),
        *((S.STRING, t) for t in S),
    }
)
"""The (from, to) pairs a :class:`Cast` supports, besides the identity."""

_ARITH = {BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD}
_COMPARE = {
    BinaryFunc.EQ,
    BinaryFunc.NE,
    BinaryFunc.LT,
    BinaryFunc.LE,
    BinaryFunc.GT,
    BinaryFunc.GE,
}


def _comparable(a: ScalarType, b: ScalarType) -> bool:
    return a == b or (a.is_numeric and b.is_numeric)


def scalar_type(expr: ScalarExpr, schema: Schema) -> ColumnType:
    """The type of ``expr`` over rows of ``schema``; raise a typed error if it is ill-typed."""
    if isinstance(expr, ColumnRef):
        return schema.column(expr.index).type
    if isinstance(expr, Literal):
        if not isinstance(expr.type, ScalarType):
            raise TypeMismatch(f"literal type {expr.type!r} is not a ScalarType")
        if expr.value is not None and not value_matches(expr.value, expr.type):
            raise TypeMismatch(f"literal {expr.value!r} is not a {expr.type}")
        return ColumnType(expr.type, expr.value is None)
    if isinstance(expr, CallUnary):
        t = scalar_type(expr.expr, schema)
        f = expr.func
        if f is UnaryFunc.IS_NULL:
            return ColumnType(S.BOOL, False)
        want = {
            UnaryFunc.NOT: (S.BOOL,),
            UnaryFunc.NEG: (S.INT64, S.FLOAT64),
            UnaryFunc.LOWER: (S.STRING,),
            UnaryFunc.UPPER: (S.STRING,),
            UnaryFunc.LENGTH: (S.STRING,),
        }[f]
        if t.scalar not in want:
            raise TypeMismatch(
                f"{f.value}() expects {'/'.join(w.value for w in want)}, got {t.scalar}"
            )
        out = S.INT64 if f is UnaryFunc.LENGTH else t.scalar
        return ColumnType(out, t.nullable)
    if isinstance(expr, CallBinary):
        lt, rt = scalar_type(expr.left, schema), scalar_type(expr.right, schema)
        nullable = lt.nullable or rt.nullable
        fn = expr.func
        if fn in _ARITH:
            if not (lt.scalar.is_numeric and rt.scalar.is_numeric):
                raise TypeMismatch(f"{fn.value} expects numbers, got {lt.scalar} and {rt.scalar}")
            both_int = lt.scalar is S.INT64 and rt.scalar is S.INT64
            return ColumnType(S.INT64 if both_int else S.FLOAT64, nullable)
        if fn in _COMPARE:
            if not _comparable(lt.scalar, rt.scalar):
                raise TypeMismatch(f"cannot compare {lt.scalar} with {rt.scalar} ({fn.value})")
            return ColumnType(S.BOOL, nullable)
        if lt.scalar is not S.STRING or rt.scalar is not S.STRING:
            raise TypeMismatch(f"like expects strings, got {lt.scalar} and {rt.scalar}")
        return ColumnType(S.BOOL, nullable)
    if isinstance(expr, CallVariadic):
        ts = [scalar_type(e, schema) for e in expr.exprs]
        vf = expr.func
        if not ts:
            raise InvalidPlan(f"{vf.value}() needs at least one argument")
        if vf in (VariadicFunc.AND, VariadicFunc.OR, VariadicFunc.CONCAT):
            wanted = S.STRING if vf is VariadicFunc.CONCAT else S.BOOL
            for t in ts:
                if t.scalar is not wanted:
                    raise TypeMismatch(f"{vf.value}() expects {wanted} arguments, got {t.scalar}")
            if vf is VariadicFunc.CONCAT:
                return ColumnType(S.STRING, False)
            return ColumnType(S.BOOL, any(t.nullable for t in ts))
        if vf is VariadicFunc.COALESCE:
            for t in ts[1:]:
                if t.scalar is not ts[0].scalar:
                    raise TypeMismatch(
                        f"coalesce() arguments differ: {ts[0].scalar} and {t.scalar}"
                    )
            return ColumnType(ts[0].scalar, all(t.nullable for t in ts))
        if len(ts) not in (2, 3):
            raise InvalidPlan(f"substring() takes 2 or 3 arguments, got {len(ts)}")
        if ts[0].scalar is not S.STRING or any(t.scalar is not S.INT64 for t in ts[1:]):
            raise TypeMismatch("substring() expects (string, int64[, int64])")
        return ColumnType(S.STRING, any(t.nullable for t in ts))
    if isinstance(expr, If):
        ct = scalar_type(expr.cond, schema)
        if ct.scalar is not S.BOOL:
            raise TypeMismatch(f"if condition must be bool, got {ct.scalar}")
        tt, et = scalar_type(expr.then, schema), scalar_type(expr.els, schema)
        if tt.scalar is not et.scalar:
            raise TypeMismatch(f"if branches differ: {tt.scalar} and {et.scalar}")
        return ColumnType(tt.scalar, tt.nullable or et.nullable)
    if isinstance(expr, Cast):
        t = scalar_type(expr.expr, schema)
        if not isinstance(expr.to, ScalarType):
            raise TypeMismatch(f"cast target {expr.to!r} is not a ScalarType")
        if t.scalar is not expr.to and (t.scalar, expr.to) not in CAST_TABLE:
            raise TypeMismatch(f"cannot cast {t.scalar} to {expr.to}")
        return ColumnType(expr.to, t.nullable)
    raise InvalidPlan(f"not a scalar expression: {expr!r}")
