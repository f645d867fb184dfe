"""``SparkIndexHistory``: an index's output history held in Spark, for indexes too large
for the driver.

It answers the same questions as :class:`~tidegate.spec.executor.IndexHistory` -- the rows and
errors accumulated at any time in ``[since, upper)``, optionally under some
keys -- but keeps the rows in Spark's block store, so the driver holds at most
``buffer_rows`` updates of them. The executor keeps small indexes in an
``IndexHistory`` (a peek from memory costs microseconds); this is for those that
outgrow it: every :meth:`~SparkIndexHistory.read` that touches Spark is one
Spark job, about 100 ms or more, so it suits large scans, not point lookups.

Layout. Rows are typed Spark columns ``c0, c1, ...`` (the schema's types,
NULLs where it allows them) plus ``time`` and ``diff`` longs. New updates are
buffered in the driver as Arrow tables; once ``buffer_rows`` are buffered they
are shipped as one *run*: Spark partitions them by the key columns, consolidates
them (sums diffs per row and time, drops zeros, times advanced to the since) and
locally checkpoints the result, so lineage stays one run deep and the driver
keeps no copy. Runs are tiered like an LSM tree: when the newest ``fanout`` runs
share a level they are merged into one run of the next level (union, advance,
consolidate, checkpoint), so every update is rewritten O(log n) times and few
runs exist. :meth:`~SparkIndexHistory.compact` only records the since: reads at
or after it do not depend on whether older times were merged yet, and the next
merges advance them.

A read is one Spark job with no shuffle: the runs' entries at times ``<= t``
(under the wanted keys: an ``isin`` for a few, a Bloom filter for many int64
keys, else a broadcast semi-join), fetched with ``toArrow`` and summed per row
in the driver with the buffer's part. Grouping in Spark first was measured
slower (1,000,000 rows in four runs, local[2]: full read 5.3-6.9 s grouped vs
3.3-3.5 s not, key read 211-294 ms vs 157-189 ms): merges keep each row at few
entries, so the shuffle costs more than it saves. Key partitioning makes a merge one shuffle; a lookup
still scans every partition (Spark cannot prune cached ones by hash), filtering
before anything leaves the executors. Errors are few and stay in the driver.

Values. ``-0.0`` is stored as ``0.0`` and every NaN is one value (Spark groups
them so), returned as :data:`math.nan`; ``IndexHistory`` tells NaN objects apart
(``nan != nan``), this history does not -- reads agree when a NaN row is always
the same object, as :data:`math.nan` is. A row's diffs are summed in Spark's
long arithmetic when runs merge (an overflow fails the merge; the driver's
Python ints do not overflow).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.runtime.arrow_values import arrow_values, column_values
from tidegate.spec.errors import (
    ArityMismatch,
    CompactionRegression,
    ExecutorError,
    InvalidInputRow,
    PeekOutOfRange,
    UnsupportedTimestamp,
)
from tidegate.spec.executor import ErrorUpdate, IndexHistory
from tidegate.spec.frontier import Row, Update
from tidegate.spec.plan.schema import INT64_MAX, INT64_MIN, ScalarType, Schema

from ._arrow import arrow_schema, column_names
from .arrangement import BACKGROUND_POOL
from .bloom import might_contain

__all__ = ["SparkIndexHistory"]

TIME = "time"
DIFF = "diff"
_ARROW_VALUE_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError)
"""What Arrow raises for a Python value that its column's type cannot hold."""
_SHIPPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-index-ship")
"""Ships buffered updates of every Spark index history and merges its runs, one job at a time."""
_MAX_RETRY_APPLIES = 1024
"""After ``n`` failed shipments the next is tried ``min(2**n, _MAX_RETRY_APPLIES)`` applies later."""
_ISIN_MAX = 64
"""Key sets up to this size (single-column keys) filter with ``isin``; larger ones with a
Bloom filter when the key is one int64 column without NULLs asked for, else (and for
composite keys) with a broadcast semi-join."""


class _Run:
    """One consolidated, key-partitioned, locally checkpointed frame of the history."""

    __slots__ = ("frame", "level", "size")

    def __init__(self, frame: DataFrame, level: int, size: int) -> None:
        self.frame = frame
        self.level = level
        self.size = size
        """An upper bound of the entries it holds."""


_Shipped = tuple[list[_Run], list[_Run], int]
"""A shipment's outcome: the runs after it, the runs it merged away, the Spark jobs it ran."""


def _release(frame: DataFrame) -> None:
    """Drop a checkpointed frame's blocks now rather than when the JVM collects it.

    Spark has no public call for this: a local checkpoint is a ``LogicalRDD`` whose
    RDD is persisted; unpersisting it frees the blocks. Anything else is left to
    Spark's context cleaner.
    """
    try:
        plan = frame._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # best effort: the context cleaner frees it eventually
        pass


def _pairs(table: pa.Table, cols: Sequence[str], count: str) -> list[tuple[Row, int]]:
    """The ``(row of cols, count)`` pairs of ``table``."""
    counts = column_values(table.column(count))
    if not cols:
        return [((), n) for n in counts]
    rows = zip(*(column_values(table.column(c)) for c in cols), strict=True)
    return list(zip(rows, counts, strict=True))


def _canon_nan(row: Row) -> Row:
    """``row`` with every NaN replaced by :data:`math.nan` (so equal NaN rows are equal)."""
    return tuple(math.nan if type(v) is float and v != v else v for v in row)


class SparkIndexHistory:
    """An index's updates (and errors) since its compaction frontier, rows held in Spark.

    ``schema`` types the rows, ``key`` names the key columns by position.
    ``buffer_rows`` bounds the updates buffered in the driver before they become a
    run in Spark; ``fanout`` runs of one level merge into one of the next;
    ``partitions`` is the number of key partitions of a run (default: Spark's
    default parallelism).

    Costs: :meth:`apply` is driver work (Arrow conversion); once ``buffer_rows``
    updates are buffered they are shipped -- a shuffle job, and the merges it
    triggers -- on a background thread (:data:`_SHIPPER`, jobs in the background
    scheduler pool) unless ``background`` is false, so no step waits for a merge
    of millions of rows. Until a shipment is done its updates are read from the
    driver, and its result is adopted by the next call on the owner's thread (the
    runs it merged away are released only then, so no read ever loses a frame).
    While one shipment runs the buffer may grow to ``4 * buffer_rows``, then
    :meth:`apply` waits. A shipment that fails puts its updates back in the
    buffer (nothing is lost; :attr:`ship_failures`, :attr:`ship_error`) and is
    tried again after 2, 4, 8, ... applies. :meth:`read` is one Spark job (~100+
    ms) when anything is in Spark. Bad input raises a typed
    :class:`~tidegate.spec.errors.ExecutorError` and changes nothing.
    """

    def __init__(
        self,
        spark: SparkSession,
        schema: Schema,
        key: Sequence[int],
        *,
        buffer_rows: int = 65_536,
        fanout: int = 4,
        partitions: int | None = None,
        background: bool = True,
    ) -> None:
        key = tuple(key)
        for i in key:
            if type(i) is not int or not 0 <= i < schema.arity:
                raise ArityMismatch(f"key column {i!r} is not a column of {schema}")
        if type(buffer_rows) is not int or buffer_rows < 1:
            raise ExecutorError(f"buffer_rows must be a positive int, got {buffer_rows!r}")
        if type(fanout) is not int or fanout < 2:
            raise ExecutorError(f"fanout must be an int >= 2, got {fanout!r}")
        self.spark = spark
        self.schema = schema
        self.key = key
        self.buffer_rows = buffer_rows
        self.fanout = fanout
        self.partitions = max(partitions or spark.sparkContext.defaultParallelism, 1)
        self._cols = column_names(schema.arity)
        self._key_cols = [self._cols[i] for i in key]
        base = arrow_schema(schema, [(TIME, pa.int64()), (DIFF, pa.int64())])
        self._arrow = pa.schema(
            [f.with_nullable(c.type.nullable) for f, c in zip(base, schema.columns, strict=False)]
            + [pa.field(TIME, pa.int64(), False), pa.field(DIFF, pa.int64(), False)]
        )
        self._floats = [
            i for i, c in enumerate(schema.columns) if c.type.scalar is ScalarType.FLOAT64
        ]
        self._key_schema = pa.schema(
            [pa.field(c, self._arrow.field(c).type) for c in self._key_cols]
        )
        self._since: int | None = None
        self.background = background
        self._runs: list[_Run] = []  # levels non-increasing
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._inflight: list[pa.Table] = []
        """What the shipment under way (:attr:`_shipping`) puts into Spark; read from here until
        it is adopted."""
        self._shipping: Future[_Shipped] | None = None
        self._retry_in = 0
        self._errors = IndexHistory(())
        """The errors (few: they stay in the driver), kept as an index's history is."""
        self.jobs = 0
        """Spark jobs run so far by reads, shipments and merges (for tests and benchmarks)."""
        self.ship_failures = 0
        """Background shipments that failed (their updates went back to the buffer)."""
        self.ship_error: BaseException | None = None
        """The last failed shipment's error."""

    # -- queries ---------------------------------------------------------------------------

    @property
    def since(self) -> int | None:
        """The compaction frontier's time (``None``: never compacted)."""
        return self._since

    @property
    def rows_bound(self) -> int:
        """An upper bound of the ``(row, time)`` entries held (in Spark and buffered)."""
        inflight: int = sum(t.num_rows for t in self._inflight)
        return sum(r.size for r in self._runs) + inflight + self._buffered

    @property
    def buffered(self) -> int:
        """The updates buffered in the driver (always fewer than ``buffer_rows``)."""
        return self._buffered

    @property
    def levels(self) -> list[int]:
        """Each Spark run's level (a run of level ``l`` merged ``fanout**l`` shipments), as of
        the last adopted shipment."""
        return [r.level for r in self._runs]

    @property
    def shipping(self) -> bool:
        """Whether a background shipment is under way or finished but not adopted yet."""
        return self._shipping is not None

    def settle(self) -> None:
        """Wait for the shipment under way, if any, and adopt its result."""
        self._settle(wait=True)

    def read(
        self, time: int, keys: Iterable[Row] | None = None
    ) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, rows restricted to ``keys`` if given.

        ``time`` must be an int at or after the since (:class:`PeekOutOfRange` before
        it: compacted history no longer tells earlier times apart); each key a tuple
        of the key's arity (:class:`ArityMismatch`). One Spark job if anything is in
        Spark.
        """
        if type(time) is not int:
            raise UnsupportedTimestamp(f"read time {time!r} is not an int")
        if self._since is not None and time < self._since:
            raise PeekOutOfRange(f"read at {time}: the history is compacted to {self._since}")
        wanted: set[Row] | None = None
        if keys is not None:
            wanted = set()
            for k in keys:
                if type(k) is not tuple or len(k) != len(self.key):
                    raise ArityMismatch(f"key {k!r} does not match the index key {self.key}")
                wanted.add(_canon_nan(k))
            if wanted and not self.key:
                wanted = None  # an index on no columns has the one key (): every row
        self._settle(wait=False)
        errors = self._errors.read(time, None)[1]
        rows: dict[Row, int] = {}
        if wanted is not None and not wanted:
            return rows, errors
        if self._runs:
            self._add_pairs(rows, _pairs(self._read_spark(time, wanted), self._cols, DIFF))
        if self._inflight or self._buffer:
            self._add_pairs(rows, self._read_buffer(time, wanted))
        return {r: n for r, n in rows.items() if n}, errors

    def _add_pairs(self, rows: dict[Row, int], pairs: Iterable[tuple[Row, int]]) -> None:
        canon = bool(self._floats)
        for r, n in pairs:
            if canon:
                r = _canon_nan(r)
            rows[r] = rows.get(r, 0) + n

    def _read_spark(self, time: int, wanted: set[Row] | None) -> pa.Table:
        df = reduce(DataFrame.unionByName, [r.frame for r in self._runs])
        df = df.where(F.col(TIME) <= F.lit(time))
        maybe: pa.Array | None = None
        if wanted is not None:
            df, maybe = self._key_filter(df, wanted)
        self.jobs += 1
        table: pa.Table = df.select(*self._cols, DIFF).toArrow()
        if maybe is not None:  # a Bloom filter's false positives
            table = table.filter(pc.is_in(table.column(self._key_cols[0]), value_set=maybe))
        return table

    def _key_filter(self, df: DataFrame, wanted: set[Row]) -> tuple[DataFrame, pa.Array | None]:
        """``df`` under the ``wanted`` keys, and the keys to filter its result by exactly if
        the filter may let others through (a Bloom filter, for many int64 keys)."""
        ktab = self._keys_table(wanted)
        if ktab.num_rows == 0:
            return df.where(F.lit(False)), None
        single = len(self._key_cols) == 1
        if single and ktab.num_rows > _ISIN_MAX:
            keys = ktab.column(0).combine_chunks()
            test = might_contain(self.spark, F.col(self._key_cols[0]), keys)
            if test is not None:
                return df.where(test), keys
        if single and ktab.num_rows <= _ISIN_MAX:
            col = F.col(self._key_cols[0])
            kcol = ktab.column(0)
            values: list[Any] = (
                # a numeric key's own bytes (NUMERIC_ARROW), as Spark holds them
                [None if v is None else bytearray(v) for v in kcol.to_pylist()]
                if pa.types.is_binary(kcol.type)
                else column_values(kcol)
            )
            nonnull = [v for v in values if v is not None]
            cond: Column = col.isin(nonnull) if nonnull else F.lit(False)
            if len(nonnull) < len(values):
                cond = cond | col.isNull()
            return df.where(cond), None
        names = [f"k{j}" for j in range(len(self._key_cols))]
        kdf = self.spark.createDataFrame(ktab).toDF(*names)
        cond_list = [df[c].eqNullSafe(kdf[k]) for c, k in zip(self._key_cols, names, strict=True)]
        return df.join(F.broadcast(kdf), cond_list, "left_semi"), None

    def _keys_table(self, wanted: set[Row]) -> pa.Table:
        """The keys that fit the key columns' types (others match no stored row)."""
        arrays: list[list[Any]] = [[] for _ in self._key_cols]
        for k in wanted:
            if any(
                pa.types.is_binary(f.type) and v is not None and type(v) is not Decimal
                for v, f in zip(k, self._key_schema, strict=True)
            ):
                continue  # only a numeric is a numeric key (Arrow would take text as bytes)
            try:
                vals = [
                    pa.array(arrow_values([v]), f.type).to_pylist()[0]
                    for v, f in zip(k, self._key_schema, strict=True)
                ]
                vals = [v + 0.0 if type(v) is float else v for v in vals]  # -0.0 is stored as 0.0
            except _ARROW_VALUE_ERRORS:
                continue
            for a, v in zip(arrays, vals, strict=True):
                a.append(v)
        return pa.Table.from_arrays(
            [pa.array(a, f.type) for a, f in zip(arrays, self._key_schema, strict=True)],
            schema=self._key_schema,
        )

    def _read_buffer(self, time: int, wanted: set[Row] | None) -> list[tuple[Row, int]]:
        table = pa.concat_tables(self._inflight + self._buffer)
        table = table.filter(pc.less_equal(table.column(TIME), time))
        if wanted is not None and len(self.key) == 1 and self.key[0] not in self._floats:
            # Arrow's equality is Python's for these types (floats differ: NaN payloads)
            values = self._keys_table(wanted).column(0)
            col = table.column(self._key_cols[0])
            table = table.filter(pc.is_in(col, value_set=values, skip_nulls=False))
            wanted = None
        pairs = _pairs(table, self._cols, DIFF)
        if wanted is None:
            return pairs
        key = self.key
        canon = bool(self._floats)
        out = []
        for r, d in pairs:
            k = tuple(r[i] for i in key)
            if (_canon_nan(k) if canon else k) in wanted:
                out.append((r, d))
        return out

    def updates(self) -> list[Update]:
        """Every held ``(row, time, diff)`` entry (one Spark job if anything is in Spark).

        What a dataflow importing the index starts from; times at or before the
        since may not be advanced to it yet (the importer advances them to its
        as_of, which is not before the since).
        """
        self._settle(wait=False)
        tables: list[pa.Table] = []
        if self._runs:
            self.jobs += 1
            frame = reduce(DataFrame.unionByName, [r.frame for r in self._runs])
            tables.append(frame.select(*self._cols, TIME, DIFF).toArrow())
        tables.extend(self._inflight)
        tables.extend(self._buffer)
        out: list[Update] = []
        for table in tables:
            times = column_values(table.column(TIME))
            pairs = _pairs(table, self._cols, DIFF)
            out.extend((r, t, d) for (r, d), t in zip(pairs, times, strict=True))
        return out

    def error_updates(self) -> list[ErrorUpdate]:
        """Every held ``(message, time, diff)`` error entry."""
        return self._errors.error_updates()

    # -- changes ---------------------------------------------------------------------------

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate] = ()) -> None:
        """Add a step's updates and errors (buffered; shipped to Spark once the buffer fills)."""
        table = self._table(updates)
        errs = self._check_errors(errors)
        self._settle(wait=False)
        self._errors.apply((), errs)
        if table.num_rows:
            self._buffer.append(table)
            self._buffered += table.num_rows
        if self._buffered < self.buffer_rows:
            return
        if self._retry_in > 0:
            self._retry_in -= 1
            return
        if self._shipping is not None:
            if self._buffered < 4 * self.buffer_rows:
                return
            self._settle(wait=True)  # Spark is behind: bound the driver's buffer
            if self._retry_in > 0:
                return
        self._flush(background=self.background)

    def load(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate] = ()) -> None:
        """Add many updates at once (e.g. an ``IndexHistory``'s content): shipped as one run,
        on the caller's thread."""
        table = self._table(updates)
        errs = self._check_errors(errors)
        self._settle(wait=True)
        self._errors.apply((), errs)
        if table.num_rows:
            self._adopt(self._ship_and_merge(list(self._runs), table))

    def compact(self, since: int) -> None:
        """Times at or before ``since`` become ``since``; later accumulations are unchanged.

        Rows are advanced lazily, by the next merges (reads at or after ``since`` do not
        depend on it); errors at once. :class:`CompactionRegression` if ``since`` is
        behind the current since.
        """
        if type(since) is not int:
            raise UnsupportedTimestamp(f"compaction to {since!r}: not an int")
        if self._since is not None and since < self._since:
            raise CompactionRegression(f"compaction to {since} is behind the since {self._since}")
        self._settle(wait=False)
        self._since = since
        self._errors.compact(since)

    def count_entries(self) -> int:
        """The consolidated ``(row, time)`` entries in Spark plus the buffered updates: one
        Spark job (for metrics and tests; :attr:`rows_bound` bounds it for free)."""
        self._settle(wait=True)
        spark_entries = 0
        if self._runs:
            self.jobs += 1
            spark_entries = reduce(DataFrame.unionByName, [r.frame for r in self._runs]).count()
        return spark_entries + self._buffered

    def flush(self) -> None:
        """Ship the driver buffer to Spark now, on the caller's thread (e.g. before a long
        idle period)."""
        self._settle(wait=True)
        if self._buffer:
            self._flush(background=False)

    def clear(self) -> None:
        """Forget every update and error and release the Spark runs (the since is kept).

        A shipment under way is not waited for: the runs it reads and those it makes are
        released when it ends.
        """
        shipping, self._shipping = self._shipping, None
        held = list(self._runs)
        if shipping is not None:
            shipping.add_done_callback(lambda f: _release_after(f, held))
        else:
            for r in held:
                _release(r.frame)
        self._runs.clear()
        self._inflight.clear()
        self._buffer.clear()
        self._buffered = 0
        self._errors = IndexHistory(())

    def close(self) -> None:
        """Release everything held (same as :meth:`clear`; the history reads as empty after)."""
        self.clear()

    # -- internals -------------------------------------------------------------------------

    def _table(self, updates: Iterable[Update]) -> pa.Table:
        """Validated updates (zero diffs dropped) as an Arrow table of the stored layout."""
        arity = self.schema.arity
        rows: list[Row] = []
        times: list[int] = []
        diffs: list[int] = []
        for u in updates:
            if type(u) is not tuple or len(u) != 3:
                raise InvalidInputRow(f"{u!r} is not a (row, time, diff) update")
            row, t, d = u
            if type(t) is not int or not INT64_MIN <= t <= INT64_MAX:
                raise UnsupportedTimestamp(f"update time {t!r} is not an int64")
            if type(d) is not int or not INT64_MIN <= d <= INT64_MAX:
                raise InvalidInputRow(f"diff {d!r} is not an int64")
            if type(row) is not tuple or len(row) != arity:
                raise InvalidInputRow(f"row {row!r} does not have arity {arity}")
            if d:
                rows.append(row)
                times.append(t)
                diffs.append(d)
        arrays: list[pa.Array] = []
        for i, f in enumerate(self._arrow):
            if i == arity:
                break
            try:
                a = pa.array(arrow_values([r[i] for r in rows]), f.type)
            except _ARROW_VALUE_ERRORS:
                raise InvalidInputRow(self._misfit(rows, i)) from None
            if not f.nullable and a.null_count:
                raise InvalidInputRow(self._misfit(rows, i))
            if i in self._floats:
                a = pc.add(a, 0.0)  # -0.0 -> 0.0: Spark hashes them apart when partitioning
            arrays.append(a)
        arrays.append(pa.array(times, pa.int64()))
        arrays.append(pa.array(diffs, pa.int64()))
        return pa.Table.from_arrays(arrays, schema=self._arrow)

    def _misfit(self, rows: list[Row], i: int) -> str:
        """A message naming the first row whose column ``i`` does not fit its type."""
        column = self.schema.columns[i]
        for r in rows:
            v = r[i]
            if v is None and not column.type.nullable:
                break
            try:
                pa.array(arrow_values([v]), self._arrow.field(i).type)
            except _ARROW_VALUE_ERRORS:
                break
        else:
            return f"column {i} ({column.name}: {column.type}): a value does not fit"
        return f"row {r!r}: {v!r} is not a value of column {i} ({column.name}: {column.type})"

    def _check_errors(self, errors: Iterable[ErrorUpdate]) -> list[ErrorUpdate]:
        out = []
        for e in errors:
            if type(e) is not tuple or len(e) != 3:
                raise InvalidInputRow(f"{e!r} is not a (message, time, diff) error update")
            msg, t, d = e
            if type(msg) is not str:
                raise InvalidInputRow(f"error message {msg!r} is not a str")
            if type(t) is not int:
                raise UnsupportedTimestamp(f"error time {t!r} is not an int")
            if type(d) is not int:
                raise InvalidInputRow(f"error diff {d!r} is not an int")
            out.append((msg, t, d))
        return out

    def _level_of(self, size: int) -> int:
        """The level of a run of ``size`` entries: the least ``l`` with
        ``size <= buffer_rows * fanout**l``."""
        level, cap = 0, self.buffer_rows
        while size > cap:
            level += 1
            cap *= self.fanout
        return level

    def _flush(self, *, background: bool) -> None:
        """Ship the buffer as one run: on :data:`_SHIPPER`, or here (errors raised here)."""
        table = pa.concat_tables(self._buffer)
        runs = list(self._runs)
        if not background:
            shipped = self._ship_and_merge(runs, table)
            self._buffer.clear()
            self._buffered = 0
            self._adopt(shipped)
            return
        sc = self.spark.sparkContext

        def ship() -> _Shipped:
            sc.setLocalProperty("spark.scheduler.pool", BACKGROUND_POOL)
            return self._ship_and_merge(runs, table)

        self._inflight = [table]
        self._buffer.clear()
        self._buffered = 0
        self._shipping = _SHIPPER.submit(ship)

    def _settle(self, *, wait: bool) -> None:
        """Adopt the finished shipment (waiting for it if ``wait``); after a failed one, put
        its updates back in the buffer and back off."""
        shipping = self._shipping
        if shipping is None or (not wait and not shipping.done()):
            return
        self._shipping = None
        inflight, self._inflight = self._inflight, []
        try:
            shipped = shipping.result()
        except Exception as e:
            self._buffer[:0] = inflight
            self._buffered += sum(t.num_rows for t in inflight)
            self.ship_failures += 1
            self.ship_error = e
            self._retry_in = min(2**self.ship_failures, _MAX_RETRY_APPLIES)
            return
        self._adopt(shipped)

    def _adopt(self, shipped: _Shipped) -> None:
        runs, merged_away, jobs = shipped
        self._runs = runs
        self.jobs += jobs
        for r in merged_away:
            _release(r.frame)

    def _ship_and_merge(self, runs: list[_Run], table: pa.Table) -> _Shipped:
        """Put validated updates into Spark as a consolidated run, then merge while
        ``fanout`` runs share a level; ``runs`` (a copy) is changed, nothing of ``self``
        but :attr:`_since` is read, so this may run on another thread."""
        frame = self.spark.createDataFrame(table)
        jobs = 1
        new = self._run(frame, self._level_of(table.num_rows), table.num_rows)
        merged_away: list[_Run] = []
        _insert(runs, new)
        while (group := _merge_group(runs, self.fanout)) is not None:
            start, end = group
            parts = runs[start:end]
            union = reduce(DataFrame.unionByName, [r.frame for r in parts])
            merged = self._run(union, parts[0].level + 1, sum(r.size for r in parts))
            jobs += 1
            merged_away += parts
            del runs[start:end]
            _insert(runs, merged)
        return runs, merged_away, jobs

    def _run(self, df: DataFrame, level: int, size: int) -> _Run:
        """A run of ``df``: partitioned by key, times advanced to the since, consolidated and
        locally checkpointed (one shuffle: the partitioning satisfies the grouping)."""
        since = self._since
        if self._key_cols:
            df = df.repartition(self.partitions, *self._key_cols)
        else:
            df = df.coalesce(1)
        if since is not None:
            df = df.withColumn(TIME, F.greatest(F.col(TIME), F.lit(since)))
        total = F.sum(DIFF).alias(DIFF)
        merged = df.groupBy(*self._cols, TIME).agg(total).where(F.col(DIFF) != 0)
        frame = merged.select(*self._cols, TIME, DIFF).localCheckpoint(eager=True)
        return _Run(frame, level, size)


def _insert(runs: list[_Run], run: _Run) -> None:
    """Add ``run`` to ``runs`` keeping levels non-increasing."""
    neg = [-r.level for r in runs]
    runs.insert(bisect.bisect_right(neg, -run.level), run)


def _merge_group(runs: list[_Run], fan: int) -> tuple[int, int] | None:
    """The slice of ``fan`` runs of one level to merge, if any (the lowest such level)."""
    end = len(runs)
    while end >= fan:
        level = runs[end - 1].level
        start = end
        while start > 0 and runs[start - 1].level == level:
            start -= 1
        if end - start >= fan:
            return end - fan, end
        end = start
    return None


def _release_after(shipping: Future[_Shipped], held: list[_Run]) -> None:
    """Once a shipment of a cleared history ends, release the runs it read (``held``) and
    those it made."""
    made: list[_Run] = []
    if not shipping.cancelled() and shipping.exception() is None:
        runs, merged_away, _ = shipping.result()
        made = [r for r in runs + merged_away if all(r is not h for h in held)]
    for r in held + made:
        _release(r.frame)
