"""Rows <-> Arrow tables, typed by a plan :class:`Schema`.

Columns are named ``c0, c1, ...`` after their position; a multiplicity column
``_n`` (int64) rides along. Spark reads these tables as ``LocalRelation``s
(``spark.createDataFrame(table)``) and hands results back with ``toArrow()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from tidegate.runtime.arrow_values import arrow_values, column_values
from tidegate.runtime.controller.schemas import ARROW_TYPES
from tidegate.spec.frontier import Row
from tidegate.spec.plan.scalar_eval import canonical_float
from tidegate.spec.plan.schema import ScalarType, Schema

__all__ = ["COUNT", "arrow_schema", "column_names", "rows_from_table", "table_from_counts"]

COUNT = "_n"
"""The name of the multiplicity column."""

_WIDE_INT = pa.decimal128(38, 0)


def column_names(arity: int) -> list[str]:
    """``c0 .. c{arity-1}``."""
    return [f"c{i}" for i in range(arity)]


def arrow_schema(schema: Schema, extra: Sequence[tuple[str, pa.DataType]] = ()) -> pa.Schema:
    """The Arrow schema of rows of ``schema`` plus ``extra`` columns."""
    fields = [pa.field(f"c{i}", ARROW_TYPES[c.type.scalar]) for i, c in enumerate(schema.columns)]
    fields.extend(pa.field(n, t) for n, t in extra)
    return pa.schema(fields)


def _int_column(values: list[Any]) -> pa.Array:
    """An int64 column, or decimal(38, 0) when a value is outside the int64 range."""
    try:
        return pa.array(values, pa.int64())
    except (OverflowError, pa.ArrowInvalid):
        return pa.array([None if v is None else Decimal(v) for v in values], _WIDE_INT)


def table_from_counts(schema: Schema, counts: Iterable[tuple[Row, int]]) -> pa.Table:
    """A table of ``(row, count)`` pairs: one column per row column, then ``_n``.

    An int64 column holding a value outside the int64 range travels as
    ``decimal(38, 0)``; Spark widens it in unions. No operator makes such a
    value (arithmetic and sums are range-checked: an overflow is an error), but
    rows fed with ``check_rows=False`` are not checked.
    """
    pairs = list(counts)
    arrays: list[pa.Array] = []
    for i, c in enumerate(schema.columns):
        values = [r[i] for r, _ in pairs]
        if c.type.scalar is ScalarType.INT64:
            arrays.append(_int_column(values))
        else:
            arrays.append(pa.array(arrow_values(values), ARROW_TYPES[c.type.scalar]))
    arrays.append(pa.array([n for _, n in pairs], pa.int64()))
    return pa.Table.from_arrays(arrays, names=[*column_names(schema.arity), COUNT])


def rows_from_table(table: pa.Table, arity: int) -> list[tuple[Row, int]]:
    """The ``(row, count)`` pairs of a table made like :func:`table_from_counts`."""
    cols = []
    for i in range(arity):
        col = table.column(f"c{i}")
        values = column_values(col)
        if pa.types.is_decimal(col.type):
            values = [None if v is None else int(v) for v in values]
        elif pa.types.is_floating(col.type):  # the one NaN object rows consolidate on
            values = [None if v is None else canonical_float(v) for v in values]
        cols.append(values)
    counts = column_values(table.column(COUNT))
    if not cols:
        return [((), n) for n in counts]
    return list(zip(zip(*cols, strict=True), counts, strict=True))
