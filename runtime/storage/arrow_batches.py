"""Shard batches as Arrow tables, and as the bytes stored for them.

A batch table has the shard's row columns plus ``__time`` (int64) and
``__diff`` (int64). Its bytes are an Arrow IPC record-batch message (inline
batches, and blobs that maintenance will merge again) or Parquet (the blobs that
stay): :func:`encode_blob` writes either, :func:`decode_batch` reads either.
Consolidation sums ``__diff`` per distinct row (and time) and drops zeros; it is
skipped when one column is already all-distinct, since then no two rows can be
equal.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidegate.runtime.arrow_values import arrow_values, column_values
from tidegate.spec.errors import BlobCorrupt, InvalidUpdates, SchemaMismatch
from tidegate.spec.frontier import Update, consolidate

__all__ = [
    "DIFF",
    "IPC_SUFFIX",
    "PARQUET_SUFFIX",
    "RESERVED",
    "TIME",
    "batch_schema",
    "consolidate_table",
    "decode_batch",
    "encode_blob",
    "encode_inline",
    "encode_parquet",
    "schema_from_text",
    "schema_text",
    "table_and_bounds",
    "table_from_updates",
    "table_to_updates",
    "time_bounds",
    "validate_append_table",
]

TIME = "__time"
DIFF = "__diff"
RESERVED = (TIME, DIFF)
PARQUET_COMPRESSION = "snappy"


def _clean(schema: pa.Schema) -> pa.Schema:
    return schema.remove_metadata()


def schema_text(schema: pa.Schema) -> str:
    """A canonical text for a row schema (the serialized Arrow schema, metadata dropped)."""
    for name in schema.names:
        if name in RESERVED:
            raise SchemaMismatch("", f"column name {name!r} is reserved")
    return base64.b64encode(_clean(schema).serialize().to_pybytes()).decode("ascii")


def schema_from_text(text: str) -> pa.Schema:
    """The row schema encoded by :func:`schema_text`."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


_BATCH_SCHEMAS: dict[int, tuple[pa.Schema, pa.Schema]] = {}
"""Batch schemas by the id of the row schema they extend (kept with it, so the id stays its)."""


def batch_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of a stored batch: the row columns, then ``__time`` and ``__diff``."""
    hit = _BATCH_SCHEMAS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    full = (
        _clean(schema)
        .append(pa.field(TIME, pa.int64(), nullable=False))
        .append(pa.field(DIFF, pa.int64(), nullable=False))
    )
    if len(_BATCH_SCHEMAS) >= 1024:
        _BATCH_SCHEMAS.clear()
    _BATCH_SCHEMAS[id(schema)] = (schema, full)
    return full


_EMPTY_BATCHES: dict[pa.Schema, pa.Table] = {}
"""The empty batch of each batch schema (by equality: a shard's schema is decoded anew from
its state at each read, so the same schema comes as new objects)."""


def _empty_batch(full: pa.Schema) -> pa.Table:
    """An empty table of ``full`` (Arrow tables are immutable: one serves every caller).

    Building one costs about 0.1 ms (an array per column, then the table), and most appends
    are empty: a table tick advances every table's upper without data.
    """
    table = _EMPTY_BATCHES.get(full)
    if table is None:
        table = full.empty_table()
        if len(_EMPTY_BATCHES) >= 1024:
            _EMPTY_BATCHES.clear()
        _EMPTY_BATCHES[full] = table
    return table


def table_from_updates(shard: str, updates: Iterable[Update], schema: pa.Schema) -> pa.Table:
    """Build a batch table from ``(row, time, diff)`` tuples whose rows fit ``schema``."""
    return table_and_bounds(shard, updates, schema)[0]


def table_and_bounds(
    shard: str, updates: Iterable[Update], schema: pa.Schema
) -> tuple[pa.Table, int | None, int | None]:
    """:func:`table_from_updates`, with the least and greatest time (``None`` if empty)."""
    ups = updates if isinstance(updates, list) else list(updates)
    if not ups:
        return _empty_batch(batch_schema(schema)), None, None
    width = len(schema)
    rows: list[Any] = []
    times: list[int] = []
    diffs: list[int] = []
    for u in ups:
        try:
            row, t, d = u
        except (TypeError, ValueError) as e:
            raise InvalidUpdates(shard, f"{u!r} is not a (row, time, diff) update") from e
        if type(row) is not tuple or len(row) != width:
            if not isinstance(row, tuple) or len(row) != width:
                raise SchemaMismatch(
                    shard, f"row {row!r} does not have the schema's {width} columns"
                )
            row = tuple(row)  # a tuple subclass (a named tuple): its plain values
        if type(t) is not int or t < 0:
            raise InvalidUpdates(shard, f"time {t!r} is not a non-negative int")
        if type(d) is not int:
            raise InvalidUpdates(shard, f"diff {d!r} is not an int")
        rows.append(row)
        times.append(t)
        diffs.append(d)
    cols: list[Any] = list(zip(*rows, strict=True)) if rows else [()] * width
    cols += [times, diffs]
    full = batch_schema(schema)
    try:
        arrays = [pa.array(arrow_values(c), type=f.type) for c, f in zip(cols, full, strict=True)]
        table = pa.Table.from_arrays(arrays, schema=full)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
        raise SchemaMismatch(shard, f"rows do not fit the shard's schema: {e}") from e
    return table, (min(times) if times else None), (max(times) if times else None)


def validate_append_table(shard: str, table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Check an appended table: the shard's columns (same types) plus int64 ``__time``/``__diff``.

    Returns it with the stored batch schema (column order fixed, metadata dropped).
    """
    full = batch_schema(schema)
    if sorted(table.schema.names) != sorted(full.names):
        raise SchemaMismatch(
            shard, f"columns {table.schema.names} differ from the shard's {full.names}"
        )
    table = table.select(full.names)
    for f in full:
        actual = table.schema.field(f.name).type
        if actual != f.type:
            raise SchemaMismatch(shard, f"column {f.name!r} has type {actual}, expected {f.type}")
    for name in RESERVED:
        if table.column(name).null_count:
            raise InvalidUpdates(shard, f"column {name!r} has nulls")
    return pa.Table.from_arrays(table.columns, schema=full)


def time_bounds(table: pa.Table) -> tuple[int | None, int | None]:
    """The least and greatest ``__time`` (``None`` for an empty table)."""
    if table.num_rows == 0:
        return None, None
    mm = pc.min_max(table.column(TIME))
    return mm["min"].as_py(), mm["max"].as_py()


def encode_parquet(table: pa.Table) -> bytes:
    """A batch table as Parquet bytes."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=PARQUET_COMPRESSION)
    return bytes(sink.getvalue().to_pybytes())


_IPC_MESSAGE = b"\xff\xff\xff\xff"
"""How an Arrow IPC message starts (its continuation marker); Parquet starts with ``PAR1``."""


def _encode_ipc(table: pa.Table) -> bytes | None:
    """``table`` as one Arrow IPC record-batch message, without the schema (the shard
    records it); ``None`` if it cannot be encoded so (no rows, dictionary columns)."""
    try:
        batches = table.to_batches()
        if len(batches) != 1:
            batches = table.combine_chunks().to_batches()
        if len(batches) != 1:
            return None
        return bytes(batches[0].serialize().to_pybytes())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return None


def encode_inline(table: pa.Table, max_bytes: int) -> bytes | None:
    """A small batch table as one Arrow IPC record-batch message, for storing inline in a
    shard's state; ``None`` if it would be larger than ``max_bytes`` (or cannot be encoded so).

    The message leaves out the schema (the shard records it), so a one-row batch takes
    a few hundred bytes, and it encodes and decodes about 20 times faster than Parquet,
    whose fixed costs dominate a batch this small; :func:`decode_batch` reads both.
    """
    # The buffers' total, not ``nbytes``: as good a bound here, and 40 times cheaper.
    if table.get_total_buffer_size() > max_bytes:
        return None
    data = _encode_ipc(table)
    return data if data is not None and len(data) <= max_bytes else None


IPC_SUFFIX = ".arrow"
PARQUET_SUFFIX = ".parquet"


def encode_blob(table: pa.Table, *, ipc: bool) -> tuple[bytes, str]:
    """A batch table's blob bytes, and the key suffix that says their format.

    With ``ipc``, an Arrow IPC message (:data:`IPC_SUFFIX`), like an inline batch, if
    the table has one (not with no rows or dictionary columns); else Parquet
    (:data:`PARQUET_SUFFIX`). The store asks for IPC for small blobs, the ones
    maintenance merges again soon: Parquet's fixed costs dominate them (2,000 rows of
    four int64 columns take 0.7 ms to write and 0.4 ms to read as Parquet, 0.02 and
    0.01 ms as an IPC message, which is about three times the bytes of snappy Parquet).
    """
    if ipc:
        data = _encode_ipc(table)
        if data is not None:
            return data, IPC_SUFFIX
    return encode_parquet(table), PARQUET_SUFFIX


def decode_batch(shard: str, key: str, data: bytes, schema: pa.Schema) -> pa.Table:
    """A batch's bytes back into a table: an Arrow IPC message (inline batches, small
    blobs) or Parquet (see :func:`encode_blob`), told apart by their first bytes, not by
    the key; anything unreadable raises :class:`BlobCorrupt`."""
    full = batch_schema(schema)
    if data[:4] == _IPC_MESSAGE:
        try:
            batch = pa.ipc.read_record_batch(pa.py_buffer(data), full)
        except Exception as e:  # pyarrow raises several unrelated types on garbage
            raise BlobCorrupt(shard, key, f"not a readable Arrow IPC message ({e})") from e
        return pa.Table.from_batches([batch], schema=full)
    try:
        # One thread: batches are small, and a thread pool per read costs more than the read.
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except Exception as e:  # pyarrow raises several unrelated types on garbage
        raise BlobCorrupt(shard, key, f"not a readable Parquet file ({e})") from e
    if not table.schema.remove_metadata().equals(full):
        raise BlobCorrupt(shard, key, f"schema {table.schema} is not the shard's {full}")
    return table


def table_to_updates(table: pa.Table) -> list[Update]:
    """A batch table as ``(row, time, diff)`` tuples (in table order)."""
    names = [n for n in table.schema.names if n not in RESERVED]
    cols = [column_values(table.column(n)) for n in names]
    times = column_values(table.column(TIME))
    diffs = column_values(table.column(DIFF))
    rows = list(zip(*cols, strict=True)) if cols else [()] * table.num_rows
    return [(tuple(r), t, d) for r, t, d in zip(rows, times, diffs, strict=True)]


def _nonzero(table: pa.Table) -> pa.Table:
    diff = table.column(DIFF)
    zeros = pc.equal(diff, 0)
    if pc.any(zeros).as_py():
        return table.filter(pc.invert(zeros))
    return table


def _strictly_increasing(col: pa.ChunkedArray) -> bool:
    n = len(col)
    if col.null_count:
        return False
    return bool(pc.all(pc.greater(col.slice(1), col.slice(0, n - 1))).as_py())


def _has_distinct_column(table: pa.Table, names: Sequence[str]) -> bool:
    """Whether some column has no repeated value (so no two rows are equal).

    Tries a cheap test first (an integer column strictly increasing in table
    order, as keys often are), then counts distinct values.
    """
    n = table.num_rows
    candidates = [
        table.column(name)
        for name in names[:2]
        if not (
            pa.types.is_floating(table.schema.field(name).type)
            or pa.types.is_nested(table.schema.field(name).type)
        )
    ]
    for col in candidates:
        if pa.types.is_integer(col.type) and _strictly_increasing(col):
            return True
    return any(pc.count_distinct(col, mode="all").as_py() == n for col in candidates)


def consolidate_table(table: pa.Table) -> pa.Table:
    """Sum ``__diff`` per distinct (row, ``__time``) and drop zero sums (order not preserved)."""
    keys = [n for n in table.schema.names if n != DIFF]
    data = [n for n in keys if n != TIME]
    if table.num_rows <= 1 or _has_distinct_column(table, data):
        return _nonzero(table)
    try:
        grouped = table.group_by(keys, use_threads=False).aggregate([(DIFF, "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _consolidate_in_python(table, keys)
    grouped = grouped.rename_columns(
        [DIFF if n == f"{DIFF}_sum" else n for n in grouped.schema.names]
    )
    grouped = grouped.select(table.schema.names)
    return _nonzero(pa.Table.from_arrays(grouped.columns, schema=table.schema))


def _consolidate_in_python(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    cols = [column_values(table.column(n)) for n in keys]
    diffs = column_values(table.column(DIFF))
    pairs = [((tuple(k), 0, d)) for k, d in zip(zip(*cols, strict=True), diffs, strict=True)]
    merged = consolidate(pairs)
    out: dict[str, list[Any]] = {n: [] for n in table.schema.names}
    for key, _t, d in merged:
        for n, v in zip(keys, key, strict=True):
            out[n].append(v)
        out[DIFF].append(d)
    return pa.Table.from_pydict(out, schema=table.schema)
