"""Data in and out as Arrow tables and pandas DataFrames.

In: :meth:`Environment.append <tidegate.runtime.environment.Environment.append>`
(and ``append_many``) accepts a ``pyarrow.Table``, a ``pyarrow.RecordBatch``
or a ``pandas.DataFrame`` besides tuples. Its columns are the table's, by name
(in any order), plus an optional integer ``diff`` column (without it every row
is inserted once, a diff of +1). It is checked against the table's schema
before anything is written: a missing or extra column is an
:class:`~tidegate.spec.errors.ArityMismatch`, a column of the wrong name or
type (an Arrow type the column's scalar type cannot hold), a NULL in a
non-nullable column or a value out of range a
:class:`~tidegate.spec.errors.TypeMismatch`.

Out: a peek answers a :class:`PeekAnswer` (a ``list`` of ``(row, count)``
pairs, equal to the plain list) and a subscribe yields
:class:`SubscribeChanges` batches; both have ``to_arrow()`` and ``to_pandas()``
(the table's columns, then ``count``; a batch's ``time``, columns, ``diff``).
``to_pandas()`` needs pandas (``pip install 'tidegate[pandas]'``) and raises
:class:`PandasMissing` without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.spec.compute import SubscribeBatchOut
from tidegate.spec.errors import ArityMismatch, InvalidText, TidegateError, TypeMismatch
from tidegate.spec.frontier import Row
from tidegate.spec.plan import Schema
from tidegate.spec.plan.numeric import reduce as reduce_numeric
from tidegate.spec.plan.schema import ScalarType, check_row

__all__ = [
    "DIFF_COLUMN",
    "PandasMissing",
    "PeekAnswer",
    "SubscribeChanges",
    "arrow_schema",
    "frame_updates",
    "is_frame",
    "read_frame",
    "rows_to_arrow",
    "schema_from_columns",
]

DIFF_COLUMN = "diff"
"""The optional column of an appended frame that holds each row's diff (default +1)."""


class PandasMissing(TidegateError, ImportError):
    """``to_pandas()`` was called but pandas is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "to_pandas() needs pandas, which is not installed: pip install 'tidegate[pandas]' "
            "(or pandas itself); to_arrow() works without it"
        )


def _pa() -> Any:
    import pyarrow as pa

    return pa


def arrow_type(scalar: ScalarType) -> Any:
    """The Arrow type a column of ``scalar`` is written as (the shards' own)."""
    from .controller.schemas import ARROW_TYPES

    return ARROW_TYPES[scalar]


def arrow_schema(schema: Schema, *extra: tuple[str, Any]) -> Any:
    """``schema`` as a ``pyarrow.Schema`` (nullability kept), then ``extra`` ``(name, type)`` fields."""
    pa = _pa()
    fields = [pa.field(c.name, arrow_type(c.type.scalar), c.type.nullable) for c in schema.columns]
    fields += [pa.field(name, t, False) for name, t in extra]
    return pa.schema(fields)


def _accepts(scalar: ScalarType, t: Any) -> bool:
    """Whether an Arrow column of type ``t`` may fill a column of ``scalar`` (values checked after)."""
    types = _pa().types
    if types.is_null(t):
        return True  # all NULL: the nullability check decides
    if types.is_dictionary(t):
        return _accepts(scalar, t.value_type)
    if scalar in (ScalarType.INT64, ScalarType.INT32, ScalarType.INT16):
        return bool(types.is_integer(t))
    if scalar in (ScalarType.FLOAT64, ScalarType.FLOAT32):
        return bool(types.is_floating(t))
    if scalar is ScalarType.STRING:
        return bool(types.is_string(t) or types.is_large_string(t) or types.is_string_view(t))
    if scalar is ScalarType.BOOL:
        return bool(types.is_boolean(t))
    if scalar is ScalarType.DATE:
        return bool(types.is_date(t))
    if scalar is ScalarType.TIMESTAMP:
        return bool(types.is_timestamp(t) and t.tz is None)
    if scalar is ScalarType.NUMERIC:
        return bool(types.is_binary(t) or types.is_decimal(t))
    return False


def is_frame(data: object) -> bool:
    """Whether ``data`` is a ``pyarrow.Table``/``RecordBatch`` or a ``pandas.DataFrame``."""
    module = type(data).__module__
    name = type(data).__name__
    if module.startswith("pyarrow"):
        return name in ("Table", "RecordBatch")
    return module.startswith("pandas") and name == "DataFrame"


def _to_arrow(data: Any, what: str) -> Any:
    pa = _pa()
    if type(data).__module__.startswith("pandas"):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise TypeMismatch(f"{what}: the DataFrame has no Arrow form: {e}") from None
        except UnicodeEncodeError as e:  # Arrow's strings are UTF-8: a lone surrogate is refused
            raise InvalidText(
                f"{what}: the DataFrame holds text that is not valid Unicode: {e.reason}"
            ) from None
    return data


def frame_updates(schema: Schema, data: Any, what: str) -> list[tuple[Row, int]]:
    """An Arrow table/batch or DataFrame checked against ``schema``, as ``(row, diff)`` pairs.

    See the module docstring for the rules and the errors.
    """
    from .arrow_values import column_values

    table = _to_arrow(data, what)
    names = [str(n) for n in table.schema.names]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise TypeMismatch(f"{what}: the frame repeats columns {dup}")
    wanted = [c.name for c in schema.columns]
    has_diff = DIFF_COLUMN in names and DIFF_COLUMN not in wanted
    given = [n for n in names if not (has_diff and n == DIFF_COLUMN)]
    if len(given) != len(wanted):
        raise ArityMismatch(
            f"{what}: the frame has {len(given)} columns {given} (besides {DIFF_COLUMN!r}), "
            f"the table has {len(wanted)}: {wanted}"
        )
    if set(given) != set(wanted):
        raise TypeMismatch(
            f"{what}: the frame's columns {given} are not the table's {wanted} "
            f"(unknown: {sorted(set(given) - set(wanted))}, "
            f"missing: {sorted(set(wanted) - set(given))})"
        )
    columns: list[list[Any]] = []
    for c in schema.columns:
        col = table.column(c.name)
        if not _accepts(c.type.scalar, col.type):
            raise TypeMismatch(
                f"{what}: column {c.name!r} is Arrow {col.type}, which cannot hold "
                f"{c.type.scalar} values"
            )
        values = column_values(col)
        if c.type.scalar is ScalarType.NUMERIC and _pa().types.is_decimal(col.type):
            values = [None if v is None else reduce_numeric(v) for v in values]
        columns.append(values)
    if has_diff:
        dcol = table.column(DIFF_COLUMN)
        if not _pa().types.is_integer(dcol.type):
            raise TypeMismatch(
                f"{what}: the {DIFF_COLUMN!r} column must be integers, not {dcol.type}"
            )
        if dcol.null_count:
            raise TypeMismatch(f"{what}: the {DIFF_COLUMN!r} column has NULLs")
        diffs: Sequence[int] = column_values(dcol)
    else:
        diffs = [1] * table.num_rows
    out: list[tuple[Row, int]] = []
    for row, diff in zip(zip(*columns, strict=True) if columns else (), diffs, strict=False):
        if not -(2**63) <= diff < 2**63:
            raise TypeMismatch(f"{what} row {row!r}: its diff must be an int64, got {diff!r}")
        check_row(row, schema, f"{what} row")
        out.append((row, diff))
    return out


def rows_to_arrow(
    schema: Schema, rows: Sequence[Row], extra: Sequence[tuple[str, Any, list[Any]]]
) -> Any:
    """``rows`` of ``schema`` as a ``pyarrow.Table``, then the ``extra`` columns ``(name, type,
    values)``."""
    from .arrow_values import arrow_values

    pa = _pa()
    target = arrow_schema(schema, *((n, t) for n, t, _ in extra))
    n = len(schema.columns)
    cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(n)]
    arrays = [pa.array(arrow_values(v), type=f.type) for v, f in zip(cols, target, strict=False)]
    arrays += [pa.array(values, type=t) for _, t, values in extra]
    return pa.Table.from_arrays(arrays, schema=target)


def _pandas(table: Any) -> Any:
    try:
        importlib.import_module("pandas")
    except ImportError:
        raise PandasMissing() from None
    return table.to_pandas()


class PeekAnswer(list[tuple[Row, int]]):
    """A peek's answer: the ``(row, count)`` pairs (a ``list``, equal to the plain one), and the
    schema of its rows (``None`` if unknown), for :meth:`to_arrow` and :meth:`to_pandas`."""

    schema: Schema | None

    def __init__(self, pairs: Sequence[tuple[Row, int]] = (), schema: Schema | None = None) -> None:
        super().__init__(pairs)
        self.schema = schema

    def _schema(self) -> Schema:
        if self.schema is not None:
            return self.schema
        width = len(self[0][0]) if self else 0
        raise TypeMismatch(f"this peek's schema is not known (rows of {width} columns)")

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.Table``: the columns, then ``count`` (int64)."""
        schema = self._schema()
        counts = [c for _, c in self]
        return rows_to_arrow(schema, [r for r, _ in self], [("count", _pa().int64(), counts)])

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (:meth:`to_arrow`'s); :class:`PandasMissing` without pandas."""
        return _pandas(self.to_arrow())


@dataclass(frozen=True, slots=True, eq=False)
class SubscribeChanges(SubscribeBatchOut):
    """A :class:`~tidegate.spec.compute.SubscribeBatchOut` that knows its rows' schema.

    It compares equal to the plain batch with the same fields.
    """

    schema: Schema | None = None

    @classmethod
    def of(cls, batch: SubscribeBatchOut, schema: Schema | None) -> SubscribeChanges:
        return cls(
            batch.instance, batch.id, batch.lower, batch.upper, batch.updates, batch.error, schema
        )

    def _key(self) -> tuple[Any, ...]:
        return (self.instance, self.id, self.lower, self.upper, self.updates, self.error)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SubscribeBatchOut):
            return self._key() == (
                other.instance,
                other.id,
                other.lower,
                other.upper,
                other.updates,
                other.error,
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def to_arrow(self) -> Any:
        """The updates as a ``pyarrow.Table``: ``time`` (int64), the columns, then ``diff`` (int64)."""
        if self.schema is None:
            raise TypeMismatch("this batch's schema is not known")
        pa = _pa()
        rows = [r for _, r, _ in self.updates]
        table = rows_to_arrow(
            self.schema, rows, [(DIFF_COLUMN, pa.int64(), [d for _, _, d in self.updates])]
        )
        times = pa.array([int(t) for t, _, _ in self.updates], type=pa.int64())
        return table.add_column(0, pa.field("time", pa.int64(), False), times)

    def to_pandas(self) -> Any:
        """The updates as a ``pandas.DataFrame`` (:meth:`to_arrow`'s); :class:`PandasMissing` without pandas."""
        return _pandas(self.to_arrow())


def read_frame(path: str, fmt: str, schema: Schema | None = None) -> Any:
    """A CSV (with a header line) or Parquet file as a ``pyarrow.Table``.

    With ``schema``, CSV columns it names are read as its types (dates as
    ``YYYY-MM-DD``, timestamps ISO 8601, booleans ``true``/``false``; as in
    PostgreSQL's CSV, an unquoted empty field is NULL and a quoted one ``""`` the
    empty string) and a ``diff`` column as int64;
    other columns are inferred (and refused by :func:`frame_updates`).
    """
    pa = _pa()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if fmt != "csv":
        raise ValueError(f"unknown file format {fmt!r} (csv, parquet)")
    import pyarrow.csv as pcsv

    types: dict[str, Any] = {}
    if schema is not None:
        types = {c.name: arrow_type(c.type.scalar) for c in schema.columns}
        types.setdefault(DIFF_COLUMN, pa.int64())
    try:
        options = pcsv.ConvertOptions(
            column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False
        )
        return pcsv.read_csv(path, convert_options=options)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TypeMismatch(f"{path}: {e}") from None


_PG_SCALARS = {
    "bigint": ScalarType.INT64,
    "double precision": ScalarType.FLOAT64,
    "text": ScalarType.STRING,
    "boolean": ScalarType.BOOL,
    "date": ScalarType.DATE,
    "timestamp": ScalarType.TIMESTAMP,
    "timestamp without time zone": ScalarType.TIMESTAMP,
    "numeric": ScalarType.NUMERIC,
    "smallint": ScalarType.INT16,
    "integer": ScalarType.INT32,
    "real": ScalarType.FLOAT32,
}


def schema_from_columns(rows: Sequence[Sequence[Any]]) -> Schema:
    """The schema ``SHOW COLUMNS FROM t`` describes (rows of name, nullable, PostgreSQL type)."""
    specs = []
    for name, nullable, pg in rows:
        scalar = _PG_SCALARS.get(str(pg)) or ScalarType(str(pg))
        specs.append((str(name), scalar, bool(nullable)))
    return Schema.of(*specs)
