"""How a tidegate schema becomes an Iceberg schema and a changelog batch becomes Arrow.

The table holds the collection's **changelog**: the schema's columns, then
``_tidegate_time`` and ``_tidegate_diff`` (both ``long``, required). Nullable
columns are optional Iceberg fields, the others required.

A ``numeric`` column is an Iceberg ``string`` of each value's exact text (``-12.5``, no
exponent, no trailing zeros), documented as such (the field's ``doc`` is
:data:`NUMERIC_DOC`): Iceberg's ``decimal(P, S)`` fixes the scale and holds at most 38
digits, and a numeric has any number of either, so no decimal type holds every value
exactly. Any engine casts the text to its decimal type of choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from tidegate.runtime.arrow_values import column_values
from tidegate.spec.errors import SinkDescriptionInvalid
from tidegate.spec.frontier import Row
from tidegate.spec.plan.numeric import numeric_text, parse_numeric
from tidegate.spec.plan.schema import ScalarType, Schema

TIME_COLUMN = "_tidegate_time"
DIFF_COLUMN = "_tidegate_diff"
NUMERIC_DOC = "numeric (exact decimal text)"
"""The ``doc`` of a ``numeric`` column's field: it tells a read-back that the strings are numerics."""

_ICEBERG: dict[ScalarType, IcebergType] = {
    ScalarType.INT64: LongType(),
    ScalarType.FLOAT64: DoubleType(),
    ScalarType.STRING: StringType(),
    ScalarType.BOOL: BooleanType(),
    ScalarType.DATE: DateType(),
    ScalarType.TIMESTAMP: TimestampType(),
    ScalarType.NUMERIC: StringType(),
    ScalarType.INT16: IntegerType(),  # Iceberg has no 16-bit integer
    ScalarType.INT32: IntegerType(),
    ScalarType.FLOAT32: FloatType(),
}

_ARROW: dict[ScalarType, Any] = {
    ScalarType.INT64: pa.int64(),
    ScalarType.FLOAT64: pa.float64(),
    ScalarType.STRING: pa.string(),
    ScalarType.BOOL: pa.bool_(),
    ScalarType.DATE: pa.date32(),
    ScalarType.TIMESTAMP: pa.timestamp("us"),
    ScalarType.NUMERIC: pa.string(),
    ScalarType.INT16: pa.int32(),
    ScalarType.INT32: pa.int32(),
    ScalarType.FLOAT32: pa.float32(),
}


def check_names(schema: Schema) -> None:
    """Iceberg needs unique column names, and the two changelog columns are reserved."""
    seen: set[str] = set()
    for name in schema.names:
        if name in (TIME_COLUMN, DIFF_COLUMN):
            raise SinkDescriptionInvalid(f"column name {name!r} is reserved for the changelog")
        if name in seen:
            raise SinkDescriptionInvalid(
                f"column name {name!r} appears twice; an Iceberg table needs unique names"
            )
        seen.add(name)


def iceberg_schema(schema: Schema) -> IcebergSchema:
    """The table's schema: the collection's columns, then time and diff."""
    fields = [
        NestedField(
            i + 1,
            c.name,
            _ICEBERG[c.type.scalar],
            required=not c.type.nullable,
            doc=NUMERIC_DOC if c.type.scalar is ScalarType.NUMERIC else None,
        )
        for i, c in enumerate(schema.columns)
    ]
    n = len(fields)
    fields.append(NestedField(n + 1, TIME_COLUMN, LongType(), required=True))
    fields.append(NestedField(n + 2, DIFF_COLUMN, LongType(), required=True))
    return IcebergSchema(*fields)


def shape(schema: IcebergSchema) -> list[tuple[str, IcebergType, bool]]:
    """What two schemas must share to hold the same changelog (field ids may differ)."""
    return [(f.name, f.field_type, f.required) for f in schema.fields]


def arrow_schema(schema: Schema) -> Any:
    fields = [
        pa.field(c.name, _ARROW[c.type.scalar], nullable=c.type.nullable) for c in schema.columns
    ]
    fields.append(pa.field(TIME_COLUMN, pa.int64(), nullable=False))
    fields.append(pa.field(DIFF_COLUMN, pa.int64(), nullable=False))
    return pa.schema(fields)


def to_arrow(updates: Sequence[tuple[Row, int, int]], schema: Schema, arrow: Any) -> Any:
    """The (already validated) updates as one Arrow table of ``arrow`` schema."""
    rows = [u[0] for u in updates]
    columns = [
        pa.array(
            [numeric_text(r[i]) if type(r[i]) is Decimal else r[i] for r in rows],
            type=_ARROW[c.type.scalar],
        )
        for i, c in enumerate(schema.columns)
    ]
    columns.append(pa.array([u[1] for u in updates], type=pa.int64()))
    columns.append(pa.array([u[2] for u in updates], type=pa.int64()))
    return pa.Table.from_arrays(columns, schema=arrow)


def from_arrow(table: Any) -> list[tuple[Row, int, int]]:
    """A changelog table read back as ``(row, time, diff)`` triples, in time order."""
    table = table.sort_by(TIME_COLUMN)
    names = [n for n in table.column_names if n not in (TIME_COLUMN, DIFF_COLUMN)]
    columns = [_values(table, n) for n in names]
    times = column_values(table.column(TIME_COLUMN))
    diffs = column_values(table.column(DIFF_COLUMN))
    rows = zip(*columns, strict=True) if columns else iter([()] * len(times))
    return [(tuple(r), t, d) for r, t, d in zip(rows, times, diffs, strict=True)]


def _values(table: Any, name: str) -> list[Any]:
    """A column's values; a numeric column's (its field's doc says so) as numerics."""
    values = column_values(table.column(name))
    metadata = table.schema.field(name).metadata or {}
    if metadata.get(b"doc") == NUMERIC_DOC.encode():
        return [None if v is None else parse_numeric(v) for v in values]
    return values
