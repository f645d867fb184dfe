"""Column types and schemas: what a row of a collection looks like.

Values are plain Python objects: ``int64`` is ``int`` in the signed 64-bit
range, ``float64`` is a ``float`` (infinities and NaN included: every NaN a
query computes is one object, ``scalar_eval.NAN``), ``string`` is a ``str`` of Unicode
scalar values (no UTF-16 surrogate: :mod:`tidegate.spec.text`), ``bool`` is
``bool``, ``date`` is :class:`datetime.date`, ``timestamp`` is a naive
:class:`datetime.datetime` (microsecond precision, UTC by convention) and ``numeric``
is a finite :class:`decimal.Decimal` in reduced form (:mod:`.numeric`). The narrow number
types (PostgreSQL's ``smallint``, ``integer`` and ``real``) hold the same Python types in
their own ranges: ``int16`` and ``int32`` an ``int`` in the signed 16- and 32-bit range,
``float32`` a ``float`` that single precision represents exactly (infinities and NaN
included). Arithmetic and sums take only the wide types: a plan widens a narrow operand
with a :class:`~.scalar.Cast` and narrows the result with another, whose range check is
PostgreSQL's overflow error.
``None`` is SQL NULL and is allowed only in nullable columns.
"""

from __future__ import annotations

import datetime as _dt
import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from ..errors import ArityMismatch, InvalidText, TypeMismatch, UnknownColumn
from ..text import is_scalar_text, surrogate_at, surrogate_text

__all__ = [
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "Column",
    "ColumnType",
    "ScalarType",
    "Schema",
    "check_row",
    "is_float32",
    "row_checker",
    "scalar_type_of",
    "value_matches",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT16_MIN = -(2**15)
INT16_MAX = 2**15 - 1
_FLOAT32 = struct.Struct("<f")


def is_float32(v: float) -> bool:
    """Whether the float ``v`` is a single-precision value (NaN and infinities are)."""
    if v != v or v in (math.inf, -math.inf):
        return True
    try:
        return bool(_FLOAT32.unpack(_FLOAT32.pack(v))[0] == v)
    except OverflowError:
        return False


class ScalarType(StrEnum):
    """The type of one column's non-NULL values."""

    INT64 = "int64"
    FLOAT64 = "float64"
    STRING = "string"
    BOOL = "bool"
    DATE = "date"
    TIMESTAMP = "timestamp"
    NUMERIC = "numeric"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT32 = "float32"

    @property
    def is_numeric(self) -> bool:
        return self in _NUMBERS

    @property
    def is_narrow(self) -> bool:
        """``int16``, ``int32`` or ``float32``: a number type arithmetic takes widened."""
        return self in _WIDE

    @property
    def wide(self) -> ScalarType:
        """The type arithmetic on this type computes in: ``int64`` for ``int16`` and ``int32``,
        ``float64`` for ``float32``, else the type itself."""
        return _WIDE.get(self, self)


_NUMBERS = frozenset(
    {
        ScalarType.INT64,
        ScalarType.FLOAT64,
        ScalarType.NUMERIC,
        ScalarType.INT16,
        ScalarType.INT32,
        ScalarType.FLOAT32,
    }
)
_WIDE = {
    ScalarType.INT16: ScalarType.INT64,
    ScalarType.INT32: ScalarType.INT64,
    ScalarType.FLOAT32: ScalarType.FLOAT64,
}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A scalar type and whether NULL is allowed."""

    scalar: ScalarType
    nullable: bool = True

    def __str__(self) -> str:
        return f"{self.scalar}{'?' if self.nullable else ''}"


@dataclass(frozen=True, slots=True)
class Column:
    """A named, typed column."""

    name: str
    type: ColumnType


def scalar_type_of(value: Any) -> ScalarType | None:
    """The scalar type a Python value stands for (``None`` for any other value: a caller
    says in its own terms why it has no type)."""
    if isinstance(value, bool):
        return ScalarType.BOOL
    if isinstance(value, int):
        return ScalarType.INT64
    if isinstance(value, float):
        return ScalarType.FLOAT64
    if isinstance(value, str):
        return ScalarType.STRING
    if type(value) is _dt.datetime:
        return ScalarType.TIMESTAMP
    if type(value) is _dt.date:
        return ScalarType.DATE
    if type(value) is Decimal:
        return ScalarType.NUMERIC
    return None


def value_matches(value: Any, scalar: ScalarType) -> bool:
    """Whether a non-NULL ``value`` is a valid value of ``scalar``."""
    t = type(value)
    if scalar is ScalarType.INT64:
        return t is int and INT64_MIN <= value <= INT64_MAX
    if scalar is ScalarType.FLOAT64:
        return t is float
    if scalar is ScalarType.STRING:
        return t is str and is_scalar_text(value)
    if scalar is ScalarType.BOOL:
        return t is bool
    if scalar is ScalarType.DATE:
        return t is _dt.date
    if scalar is ScalarType.NUMERIC:
        return t is Decimal and _is_reduced(value)
    if scalar is ScalarType.INT32:
        return t is int and INT32_MIN <= value <= INT32_MAX
    if scalar is ScalarType.INT16:
        return t is int and INT16_MIN <= value <= INT16_MAX
    if scalar is ScalarType.FLOAT32:
        return t is float and is_float32(value)
    return t is _dt.datetime and value.tzinfo is None


def _is_reduced(d: Decimal) -> bool:
    """Whether ``d`` is a numeric value: finite, reduced (``spec.plan.numeric``), not ``-0``."""
    if not d.is_finite():
        return False
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    if not d:
        return exp == 0 and not sign
    return exp == 0 or (exp < 0 and digits[-1] != 0)


@dataclass(frozen=True, slots=True)
class Schema:
    """An ordered tuple of named, typed columns. Names need not be unique (joins may repeat them)."""

    columns: tuple[Column, ...]

    @staticmethod
    def of(*columns: tuple[str, ScalarType | str] | tuple[str, ScalarType | str, bool]) -> Schema:
        """``Schema.of(("id", "int64", False), ("name", "string"))``; nullable by default."""
        cols = []
        for spec in columns:
            name, scalar = spec[0], spec[1]
            nullable = bool(spec[2]) if len(spec) > 2 else True
            try:
                st = ScalarType(scalar)
            except ValueError:
                raise TypeMismatch(f"column {name!r}: unknown type {scalar!r}") from None
            cols.append(Column(name, ColumnType(st, nullable)))
        return Schema(tuple(cols))

    @property
    def arity(self) -> int:
        return len(self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def types(self) -> tuple[ColumnType, ...]:
        return tuple(c.type for c in self.columns)

    def index(self, name: str) -> int:
        """The position of the column called ``name`` (the first, if repeated)."""
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise UnknownColumn(f"unknown column {name!r}; columns are {list(self.names)}")

    def column(self, i: int) -> Column:
        if not 0 <= i < len(self.columns):
            raise UnknownColumn(f"column #{i} out of range for arity {len(self.columns)}")
        return self.columns[i]

    def concat(self, other: Schema) -> Schema:
        return Schema(self.columns + other.columns)

    def project(self, indexes: Iterable[int]) -> Schema:
        return Schema(tuple(self.column(i) for i in indexes))

    def __str__(self) -> str:
        return "(" + ", ".join(f"{c.name}: {c.type}" for c in self.columns) + ")"


def check_row(row: Any, schema: Schema, what: str = "row") -> None:
    """Raise :class:`ArityMismatch`/:class:`TypeMismatch` unless ``row`` is a valid row of ``schema``."""
    if type(row) is not tuple:
        raise TypeMismatch(f"{what} {row!r} is not a tuple")
    if len(row) != len(schema.columns):
        raise ArityMismatch(
            f"{what} {row!r} has {len(row)} columns, schema {schema} has {schema.arity}"
        )
    for v, c in zip(row, schema.columns, strict=True):
        if v is None:
            if not c.type.nullable:
                raise TypeMismatch(f"{what} {row!r}: NULL in non-nullable column {c.name!r}")
        elif not value_matches(v, c.type.scalar):
            at = surrogate_at(v) if type(v) is str else None
            if at is not None and c.type.scalar is ScalarType.STRING:
                raise InvalidText(
                    f"{what}: the value of column {c.name!r} is not valid Unicode text: "
                    f"{surrogate_text(v, at)}"
                )
            raise TypeMismatch(
                f"{what} {row!r}: {v!r} is not a {c.type.scalar} (column {c.name!r})"
            )


def row_checker(schema: Schema) -> Callable[[Any], bool]:
    """A fast predicate equivalent to "``check_row`` would not raise" (for validating many rows)."""
    arity = schema.arity
    cols = [(c.type.scalar, c.type.nullable) for c in schema.columns]
    if all(s is ScalarType.INT64 and not n for s, n in cols):
        lo, hi = INT64_MIN, INT64_MAX

        def ints(row: Any) -> bool:
            if type(row) is not tuple or len(row) != arity:
                return False
            return all(type(v) is int and lo <= v <= hi for v in row)

        return ints

    def general(row: Any) -> bool:
        if type(row) is not tuple or len(row) != arity:
            return False
        for v, (s, n) in zip(row, cols, strict=True):
            if v is None:
                if not n:
                    return False
            elif not value_matches(v, s):
                return False
        return True

    return general
