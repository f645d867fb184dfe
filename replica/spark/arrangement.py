"""Operator state held in the driver while small, then in Spark: key-indexed runs, merged
like an LSM spine.

While a state holds at most :attr:`Spine.memory_rows` entries (see
:meth:`Spine.keep_in_driver`; the ``SparkExecutor`` sets its
``state_memory_rows``), every run is an Arrow table in the driver: level-0 runs
merge inline, larger merges run in Arrow on :data:`_LOCAL_MERGER`, and a lookup
filters the tables in Arrow, so no Spark job runs. The push that takes it past
that size moves it into Spark for good (:meth:`Spine._move`, in the
background); from then on what follows applies.

A state is the sum of a short list of *runs* (:class:`Run`), each holding
consolidated entries. A step appends its change as a new run of level 0;
whenever the newest ``fanout`` runs share a level they are merged into one run
of the next level (a tiered spine), so every entry is rewritten O(log steps)
times and at most ``fanout * log(steps)`` runs exist.

Level-0 runs are the spine's *write buffer*: they stay in the driver as the
Arrow tables the step produced (at most ``fanout - 1`` changes, so the driver
holds change-sized data, never the state), because putting each change into
Spark on its own cost a job, a shuffle and a JVM row conversion per step that
the next merge repeated anyway. When ``fanout`` of them exist they become one
level-1 run: consolidated in Arrow (exactly, with checked int64 sums; tables
with float columns are left to Spark, which groups -0.0 with 0.0 as Python
does), then shipped to Spark and checkpointed by a background job (one thread,
:data:`_MERGER`, off the step's critical path). Higher merges union
materialised runs, hash-partition them by key and consolidate them: one
shuffle, since the partitioning satisfies the grouping. Until a run is
materialised, reads use what it replaces (its Arrow table, or its parts). A
push waits when more than ``max_pending`` background jobs are outstanding, so
the buffer stays bounded when Spark falls behind; a failed background job
raises at the next read.

:class:`SparkAccumulators` stores int64 (Spark long) columns only: sums are
split into a 32-bit low half and a high part, fingerprints are merged with a
modular fold written in long arithmetic (``decimal(38,0)`` sums cost about
40% of the JVM's row conversions).

A lookup is one Spark job with no shuffle over the materialised runs (coalesced
to ``partitions`` tasks; the wanted keys as a Bloom filter in the scan when they
are one int64 column (:mod:`.bloom`), else as a broadcast semi-join, unless they
are a large part of the state), built and run on a fetch thread, plus the
driver's buffered tables filtered in Arrow; the entries are summed in the
driver. Its cost follows the keys asked for, plus a scan of the cached runs.
Background jobs run in the scheduler pool :data:`BACKGROUND_POOL`.

:class:`SparkArrangement` holds a multiset of rows indexed by key columns
(the input of Distinct, Threshold, TopK, Reduce with recomputed aggregates,
and each side of a Join). :class:`SparkAccumulators` holds per-key vectors of
additive integers (the running counts, sums and fingerprints of an
accumulating Reduce).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from enum import Enum
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.runtime.arrow_values import column_values
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Column as SchemaColumn
from tidegate.spec.plan.schema import ColumnType, ScalarType, Schema

from ._arrow import COUNT, column_names, rows_from_table, table_from_counts
from ._fingerprint import PRIME
from .bloom import might_contain
from .phases import PHASES

__all__ = [
    "BACKGROUND_POOL",
    "DEFAULT_STATE_MEMORY_ROWS",
    "Acc",
    "Run",
    "SparkAccumulators",
    "SparkArrangement",
    "Spine",
    "fold_mod_prime",
    "mod_prime",
    "sum_fits",
]

_M30 = 2**30 - 1
_M32 = 2**32 - 1
_INT64 = 2**63
_FETCH_ALL = 2
"""Fetch the whole state (no semi-join: it costs a broadcast and a join) when
``_FETCH_ALL * keys`` reaches the estimated keys held (:attr:`Spine.key_bound`)."""


DEFAULT_STATE_MEMORY_ROWS = 1_000_000
"""A stateful operator's arrangement with more entries than this moves from the driver into
Spark (see :meth:`Spine.keep_in_driver`); as ``index_memory_rows``, a few hundred MB at most."""

BACKGROUND_POOL = "tidegate-background"
"""The Spark scheduler pool of materialisations and merges."""

_MERGER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-spine-merge")
"""Runs every spine's materialisations and merges in the background, one at a time, in
submission order (so a merge's parts are materialised before it starts)."""
_LOCAL_MERGER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-spine-local")
"""Runs the merges of states held in the driver (Arrow only, no Spark), one at a time; apart
from :data:`_MERGER` so that they never queue behind a Spark job."""
_FETCHER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tidegate-spine-fetch")
"""Runs lookups started with :meth:`Spine.fetch_start`."""


class Run:
    """One run of a spine: entries in the driver (``local``), a Spark ``frame``, or the
    merge of ``parts``.

    A run of level >= 1 is materialised -- consolidated and locally checkpointed
    in Spark, hash-partitioned by key when Spark consolidated it -- by a
    background job (:data:`_MERGER`).
    Until that is done, reads use its ``local`` table or its parts, so a step
    never waits for it.
    """

    def __init__(
        self,
        level: int,
        size: int,
        *,
        local: pa.Table | None = None,
        frame: DataFrame | None = None,
        parts: tuple[Run, ...] = (),
    ) -> None:
        self.level = level
        self.size = size
        """The entries held (an upper bound until materialised; then exact or estimated)."""
        self.local = local
        self.frame = frame
        self.parts = parts
        self.pending: Future[tuple[DataFrame | pa.Table, int]] | None = None
        """The background job making this run: a Spark frame (a shipment, a merge in Spark,
        a move) or a driver table (a merge in the driver)."""

    def _done(self) -> tuple[DataFrame | pa.Table, int] | None:
        p = self.pending
        if p is None or not p.done() or p.cancelled() or p.exception() is not None:
            return None
        return p.result()

    def sources(self) -> tuple[list[DataFrame], list[pa.Table]]:
        """The Spark frames and driver tables whose union is this run. Safe in any thread."""
        done = self.done_sources()
        if done is not None:
            return done
        if self.frame is not None:
            return [self.frame], []
        if self.local is not None:
            return [], [self.local]
        frames: list[DataFrame] = []
        tables: list[pa.Table] = []
        for r in self.parts:
            f, t = r.sources()
            frames += f
            tables += t
        return frames, tables

    def done_sources(self) -> tuple[list[DataFrame], list[pa.Table]] | None:
        """The finished background job's result as :meth:`sources`, or ``None``."""
        done = self._done()
        if done is None:
            return None
        if isinstance(done[0], DataFrame):
            return [done[0]], []
        return [], [done[0]]

    def frames(self) -> list[DataFrame]:
        """The Spark frames of :meth:`sources` (one, once materialised)."""
        return self.sources()[0]

    def tables(self) -> list[pa.Table]:
        """The driver tables of :meth:`sources`."""
        return self.sources()[1]

    def settle(self) -> None:
        """Adopt a finished materialisation and forget what it replaces (owner's thread only);
        a failed one raises its error here rather than leaving the run unmaterialised."""
        p = self.pending
        if p is not None and p.done() and not p.cancelled() and p.exception() is not None:
            p.result()
        done = self._done()
        if done is not None:
            data, self.size = done
            if isinstance(data, DataFrame):
                self.frame, self.local = data, None
            else:
                self.frame, self.local = None, data
            self.parts, self.pending = (), None


class Spine:
    """The runs of one state (the base of both kinds of state), indexed by the key columns
    ``key_cols`` of schema ``key_schema``; ``value_cols`` are the stored non-key columns."""

    def __init__(
        self,
        spark: SparkSession,
        key_schema: Schema,
        key_cols: Sequence[str],
        partitions: int,
    ) -> None:
        self.spark = spark
        self.key_schema = key_schema
        self.lookup_schema = key_schema
        """The schema of the keys a lookup asks for (:meth:`keys_table`): the key schema, but
        float64 where an arrangement compares an int64 key column as float64."""
        self.key_cols = list(key_cols)
        self._lookup_cols = list(dict.fromkeys(self.key_cols))
        """The key columns a lookup filters by, each once: a join on a duplicated equivalence
        keys on one column twice, and a key whose two values differ matches no entry."""
        self.partitions = max(partitions, 1)
        self.fanout = 4
        self.max_pending = 2
        """Background jobs a spine may have outstanding; a push beyond it waits for the
        oldest (so the driver's buffer stays change-sized when Spark falls behind)."""
        self.runs: list[Run] = []
        self._outstanding: list[Future[tuple[DataFrame | pa.Table, int]]] = []
        self.jobs = 0
        """Spark jobs run by lookups (materialisations and merges run in the background)."""
        self.memory_rows: int | None = 0
        """The entries the state may hold in the driver before it moves into Spark (``0``:
        in Spark from the first change on, ``None``: never); see :meth:`keep_in_driver`."""
        self.in_spark = True
        """Whether the state has moved (or is moving) into Spark, for good."""

    def keep_in_driver(self, memory_rows: int | None) -> None:
        """Keep the state in the driver while it holds at most ``memory_rows`` entries
        (``None``: always); set before the first change. Until then every run is an Arrow
        table, merged in the driver, and a lookup filters them in Arrow: no Spark job. The
        push that takes it past that size moves it into Spark in the background
        (:meth:`_move`); reads use the driver's tables until the move has finished."""
        if self.runs:
            raise ValueError("keep_in_driver must be called before the first change")
        self.memory_rows = memory_rows
        self.in_spark = memory_rows == 0

    @property
    def driver_entries(self) -> int:
        """An upper bound of the entries held in the driver (runs not yet in Spark)."""
        return sum(r.size for r in self.runs if r.frame is None)

    @property
    def levels(self) -> list[int]:
        """Each run's level: a run of level ``l`` holds about ``fanout**l`` appended runs."""
        return [r.level for r in self.runs]

    @property
    def key_bound(self) -> int:
        """An estimate of the keys held: the largest run's size (merged runs are consolidated)."""
        return max((r.size for r in self.runs), default=0)

    @property
    def size_bound(self) -> int:
        """An upper bound of the entries held (the sum of the runs' sizes)."""
        return sum(r.size for r in self.runs)

    def keys_table(self, keys: Iterable[Row]) -> pa.Table | None:
        """The key columns of ``keys`` as an Arrow table (for :meth:`fetch_start`; a column
        keyed on twice appears once), or ``None`` (read every key) when a key does not fit
        its column's Arrow type -- e.g. an int joined with a float column; callers filter
        with Python's equality anyway."""
        try:
            ktab = table_from_counts(self.lookup_schema, ((k, 0) for k in keys))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            return None
        ktab = ktab.drop_columns([COUNT])
        if len(self._lookup_cols) == len(self.key_cols):  # (no key columns: rows, no columns)
            return ktab.rename_columns(self.key_cols)
        first = [self.key_cols.index(c) for c in self._lookup_cols]
        return pa.table([ktab.column(i) for i in first], names=self._lookup_cols)

    def fetch_start(self, keys: pa.Table | None) -> Callable[[], list[pa.Table]]:
        """Start reading every run's raw entries under the keys in table ``keys`` (columns
        named like the key columns; all entries for ``None``), as the runs are now.

        The Spark part (one job, none if nothing is materialised) runs in a background
        thread; the driver's buffered tables are filtered when the result is called for.
        Call the result to wait for the tables (Spark's first, then the driver's).
        """
        for r in self.runs:
            r.settle()
        frames: list[DataFrame] = []
        tables: list[pa.Table] = []
        for r in self.runs:
            f, t = r.sources()
            frames += f
            tables += t
        if keys is not None and keys.num_rows == 0:
            return list
        job: Future[pa.Table] | None = None
        if frames:
            spark_keys = max(r.size for r in self.runs if r.level > 0) if self.key_cols else 0
            semi = (
                keys is not None and bool(self.key_cols) and _FETCH_ALL * keys.num_rows < spark_keys
            )
            self.jobs += 1
            # the plan is built on the fetch thread too: shipping the keys to Spark is not
            # free, and the caller's own work overlaps it
            job = _FETCHER.submit(self._fetch_job, frames, keys if semi else None)

        def wait() -> list[pa.Table]:
            out = [] if job is None else [job.result()]
            return out + [self._filter(t, keys) for t in tables]

        return wait

    def _fetch_job(self, frames: list[DataFrame], keys: pa.Table | None) -> pa.Table:
        """The entries of ``frames`` (all, or under ``keys`` by a Bloom filter or else a
        broadcast semi-join) as Arrow: one Spark job, coalesced to ``partitions`` tasks."""
        with PHASES("bg.fetch"):
            state = reduce(DataFrame.unionByName, frames)
            if len(frames) > 1:
                state = state.coalesce(self.partitions)
            if keys is not None and (test := self._bloom(keys)) is not None:
                return self._filter(state.filter(test).toArrow(), keys)
            if keys is not None:
                cols = self._lookup_cols
                names = [f"k{j}" for j in range(len(cols))]
                kdf = self.spark.createDataFrame(keys.select(cols)).toDF(*names)
                cond = [state[c].eqNullSafe(kdf[k]) for c, k in zip(cols, names, strict=True)]
                state = state.join(F.broadcast(kdf), cond, "left_semi")
            table: pa.Table = state.toArrow()
            return table

    def _bloom(self, keys: pa.Table) -> Column | None:
        """A Bloom-filter test of a single int64 key column (no NULL asked for), or ``None``
        (then the caller semi-joins): it runs inside the scan, with no job or exchange of
        its own, so it costs ~50 ms less than the semi-join on local[2]. Its false positives
        are dropped by :meth:`_filter`, which is exact for int64 keys."""
        if len(self._lookup_cols) != 1:
            return None
        col = self._lookup_cols[0]
        return might_contain(self.spark, F.col(col), keys.column(col).combine_chunks())

    def _filter(self, table: pa.Table, keys: pa.Table | None) -> pa.Table:
        """The entries of a driver table under ``keys``, filtered in Arrow: by membership for
        one key column, by a semi-join for several. All of them where Arrow's equality is not
        Python's (float columns: -0.0 and 0.0), the types differ (float keys of an int64
        column), or a composite key asked for has a NULL (a join never matches NULLs);
        extra entries are harmless, since the callers filter by key with Python's equality."""
        cols = self._lookup_cols
        if keys is None or not cols or keys.num_rows == 0:
            return table
        for col in cols:
            ttype = table.schema.field(col).type
            if pa.types.is_floating(ttype) or keys.column(col).type != ttype:
                return table
        try:
            if len(cols) == 1:
                col = cols[0]
                mask = pc.is_in(table.column(col), value_set=keys.column(col), skip_nulls=False)
                return table.filter(mask)
            if any(keys.column(c).null_count for c in cols):
                return table
            wanted = keys.select(cols)
            return table.join(wanted, cols, join_type="left semi", use_threads=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return table

    def _push(self, table: pa.Table) -> None:
        """Append ``table`` (consolidated entries) as a level-0 run held in the driver, then
        merge runs as needed. No Spark work on the caller's thread."""
        self.runs.append(Run(0, table.num_rows, local=table))
        if not self.in_spark:
            self._push_driver()
            return
        fan = self.fanout
        while len(self.runs) >= fan and len({r.level for r in self.runs[-fan:]}) == 1:
            tail = tuple(self.runs[-fan:])
            level = tail[-1].level + 1
            if level == 1:
                local = _concat([r.local for r in tail if r.local is not None])
                with PHASES("spine.consolidate_buffer"):
                    consolidated = self._consolidate_local(local)
                if consolidated is not None:
                    merged = Run(1, consolidated.num_rows, local=consolidated)
                    merged.pending = self._background(self._ship, consolidated, None)
                else:
                    merged = Run(1, self._estimate(local), local=local)
                    merged.pending = self._background(self._ship, local, merged.size)
            else:
                merged = Run(level, sum(r.size for r in tail), parts=tail)
                merged.pending = self._background(self._merge_runs, tail)
            self.runs[-fan:] = [merged]
            self._outstanding.append(merged.pending)
        self._outstanding = [f for f in self._outstanding if not f.done()]
        while len(self._outstanding) > self.max_pending:
            with PHASES("spine.backpressure"):
                wait_for([self._outstanding.pop(0)])  # its error, if any, is raised on reading

    def _push_driver(self) -> None:
        """:meth:`_push` for a state in the driver: merge runs as Arrow tables (four of level
        0 inline, as the change-sized write buffer; larger merges on :data:`_LOCAL_MERGER`,
        reads using the parts meanwhile), then move into Spark if the state outgrew
        :attr:`memory_rows`."""
        fan = self.fanout
        while len(self.runs) >= fan and len({r.level for r in self.runs[-fan:]}) == 1:
            tail = tuple(self.runs[-fan:])
            level = tail[-1].level + 1
            if level == 1:
                local = _concat([t for r in tail for t in r.tables()])
                with PHASES("spine.consolidate_buffer"):
                    consolidated = self._consolidate_local(local)
                if consolidated is not None:
                    merged = Run(1, consolidated.num_rows, local=consolidated)
                else:
                    merged = Run(1, local.num_rows, local=local)
            else:
                merged = Run(level, sum(r.size for r in tail), parts=tail)
                merged.pending = _LOCAL_MERGER.submit(self._merge_local, tail)
            self.runs[-fan:] = [merged]
        if self.memory_rows is not None and self.size_bound > self.memory_rows:
            self._move()

    def _merge_local(self, parts: tuple[Run, ...]) -> tuple[pa.Table, int]:
        """Merge driver runs into one table (on :data:`_LOCAL_MERGER`), consolidated in Arrow
        where that is exact (else concatenated; Spark consolidates it if it moves there)."""
        with PHASES("bg.merge_driver"):
            for r in parts:
                if r.pending is not None:
                    r.pending.result()  # a merge of its own, earlier on this thread
            table = _concat([t for r in parts for t in r.tables()])
            consolidated = self._consolidate_local(table)
            if consolidated is not None:
                table = consolidated
            return table, table.num_rows

    def _move(self) -> None:
        """Move the state into Spark, for good: its merged runs become one run shipped,
        hash-partitioned by key and consolidated by a background job (reads use the driver's
        tables until it has finished); the write buffer (level 0) stays in the driver and
        is shipped as usual when four changes are there. A failed move raises at the next
        read, as any failed background job."""
        self.in_spark = True
        old = [r for r in self.runs if r.level > 0]
        if not old:
            return
        moved = Run(max(r.level for r in old), sum(r.size for r in old), parts=tuple(old))
        moved.pending = self._background(self._ship_runs, moved.parts)
        self.runs = [moved, *(r for r in self.runs if r.level == 0)]
        self._outstanding.append(moved.pending)

    def _ship_runs(self, parts: tuple[Run, ...]) -> tuple[DataFrame, int]:
        """Put driver runs into Spark as one consolidated, key-partitioned, checkpointed run."""
        with PHASES("bg.move"):
            for r in parts:
                if r.pending is not None:
                    r.pending.result()  # a merge in the driver, on the other thread
            tables = [t for r in parts for t in r.tables()]
            frame = self._consolidate(self.spark.createDataFrame(_concat(tables)))
            return frame, frame.count()

    def _background(
        self, fn: Callable[..., tuple[DataFrame, int]], *args: Any
    ) -> Future[tuple[DataFrame | pa.Table, int]]:
        """Run ``fn(*args)`` on :data:`_MERGER`, its Spark jobs in the scheduler pool
        :data:`BACKGROUND_POOL` (under the FAIR scheduler a lookup then gets the next free
        task slot instead of queueing behind a merge's tasks)."""
        sc = self.spark.sparkContext

        def run() -> tuple[DataFrame | pa.Table, int]:
            sc.setLocalProperty("spark.scheduler.pool", BACKGROUND_POOL)
            frame, size = fn(*args)
            return frame, size

        return _MERGER.submit(run)

    def _estimate(self, table: pa.Table) -> int:
        """The keys (entries for an arrangement) a consolidated ``table`` would hold, at most."""
        cols = self.group_cols
        if not cols:
            return min(int(table.num_rows), 1)
        return int(table.select(cols).group_by(cols, use_threads=False).aggregate([]).num_rows)

    @property
    def group_cols(self) -> list[str]:
        """The columns entries are consolidated by."""
        return self.key_cols

    def _consolidate_local(self, table: pa.Table) -> pa.Table | None:
        """``table``'s entries consolidated in Arrow, exactly, or ``None`` when that is not
        sure to agree with Python's equality (float columns) or int64 arithmetic."""
        raise NotImplementedError

    def _ship(self, table: pa.Table, size: int | None) -> tuple[DataFrame, int]:
        """Put a level-1 run into Spark and checkpoint it (in the background). ``size`` is
        ``None`` when ``table`` is consolidated already: then it is checkpointed as shipped
        (no shuffle); otherwise Spark partitions and consolidates it (one shuffle)."""
        with PHASES("bg.materialise"):
            df = self.spark.createDataFrame(table)
            if size is None:
                return df.localCheckpoint(eager=True), table.num_rows
            return self._consolidate(df), size

    def _merge_runs(self, parts: tuple[Run, ...]) -> tuple[DataFrame, int]:
        # in the background thread, after the parts' own jobs (one thread, FIFO); a part
        # whose job failed holds its entries only in the driver: its error is re-raised
        # rather than merging without it
        with PHASES("bg.merge"):
            for r in parts:
                if r.pending is not None and r.pending.exception() is not None:
                    r.pending.result()
            df = reduce(DataFrame.unionByName, [f for r in parts for f in r.frames()])
            frame = self._consolidate(df)
            return frame, frame.count()

    def _consolidate(self, df: DataFrame) -> DataFrame:
        """``df`` hash-partitioned by key, consolidated and locally checkpointed: one shuffle
        (the partitioning satisfies the grouping, so the aggregate adds none)."""
        if self.key_cols:
            df = df.repartition(self.partitions, *self.key_cols)
        else:
            df = df.coalesce(1)
        return self._merge(df).localCheckpoint(eager=True)

    def _merge(self, df: DataFrame) -> DataFrame:
        raise NotImplementedError

    def settle(self) -> None:
        """Wait for every background job of this state and adopt its result."""
        for r in self.runs:
            if r.pending is not None:
                wait_for([r.pending])
            r.settle()

    def clear(self) -> None:
        """Forget the state (its dataflow was dropped)."""
        for r in self.runs:
            if r.pending is not None:
                r.pending.cancel()
        self.runs.clear()
        self._outstanding.clear()
        self.in_spark = self.memory_rows == 0


class SparkArrangement(Spine):
    """A multiset of rows of ``schema`` (``row -> count``) indexed by the ``key`` columns.

    ``as_float[j]`` makes the ``j``-th key column (an int64 one) compared as
    float64: its keys are the column's values converted to float (a join of an
    int64 with a float64 column, which SQL compares as float64), looked up in
    Spark by comparing the column cast to double, as Spark casts a long
    compared with a double.
    """

    def __init__(
        self,
        spark: SparkSession,
        schema: Schema,
        key: tuple[int, ...],
        partitions: int = 2,
        *,
        as_float: tuple[bool, ...] | None = None,
    ) -> None:
        super().__init__(spark, schema.project(key), [f"c{i}" for i in key], partitions)
        self.schema = schema
        self.key = key
        self.cols = column_names(schema.arity)
        self.keyfn = key_function(key, as_float)
        if as_float is not None and any(as_float):
            self.lookup_schema = Schema(
                tuple(
                    SchemaColumn(c.name, ColumnType(ScalarType.FLOAT64, c.type.nullable))
                    if conv
                    else c
                    for c, conv in zip(self.key_schema.columns, as_float, strict=True)
                )
            )

    @property
    def group_cols(self) -> list[str]:
        return self.cols

    def lookup(self, keys: Iterable[Row] | None = None) -> dict[Row, dict[Row, int]]:
        """The rows under each of ``keys`` (all rows for ``None``): ``key -> row -> count``.

        Keys that hold nothing are absent. One Spark job, none if nothing is in Spark.
        """
        wanted = None if keys is None else set(keys)
        ktab = None if wanted is None else self.keys_table(wanted)
        out: dict[Row, dict[Row, int]] = {}
        keyfn = self.keyfn
        for table in self.fetch_start(ktab)():
            for row, n in rows_from_table(table, self.schema.arity):
                k = keyfn(row)
                if wanted is not None and k not in wanted:
                    continue
                group = out.setdefault(k, {})
                c = group.get(row, 0) + n
                if c:
                    group[row] = c
                else:
                    del group[row]
        return {k: g for k, g in out.items() if g}

    def append(self, changes: Mapping[Row, int]) -> None:
        """Add ``changes`` (``row -> count delta``) as a new run, then merge runs as needed."""
        pairs = [(r, n) for r, n in changes.items() if n]
        if pairs:
            self._push(table_from_counts(self.schema, pairs))

    def _consolidate_local(self, table: pa.Table) -> pa.Table | None:
        if any(pa.types.is_floating(f.type) for f in table.schema):
            return None
        n = table.column(COUNT)
        if not sum_fits(n, table.num_rows):
            return None
        if self.cols:
            grouped = table.group_by(self.cols, use_threads=False).aggregate([(COUNT, "sum")])
            grouped = grouped.select([*self.cols, f"{COUNT}_sum"])
        else:
            grouped = pa.table({f"{COUNT}_sum": pa.array([pc.sum(n).as_py() or 0], pa.int64())})
        grouped = grouped.rename_columns([*self.cols, COUNT])
        return grouped.filter(pc.not_equal(grouped.column(COUNT), 0))

    def _merge(self, df: DataFrame) -> DataFrame:
        agg = F.sum(COUNT).alias(COUNT)
        grouped = df.groupBy(*self.cols).agg(agg) if self.cols else df.agg(agg)
        return grouped.where(F.col(COUNT).isNotNull() & (F.col(COUNT) != 0))


class Acc(Enum):
    """The kind of one accumulator: how it is stored and summed."""

    COUNT = "count"  # int64, plain sum
    SUM = "sum"  # an exact integer: int64 low 32 bits ("l", unsigned) + int64 high part ("h")
    FINGERPRINT = "fingerprint"  # int64 in [0, PRIME), summed modulo PRIME


def fold_mod_prime(high: Any, low: Any) -> Any:
    """``(high * 2**30 + low) mod PRIME`` for int64 arrays ``0 <= high, low < 2**62``, in
    Arrow kernels (no Python loop)."""
    a = mod_prime(high)
    # a * 2**30 = a1 * 2**61 + a0 * 2**30 with a = a1 * 2**31 + a0, and 2**61 = 1 (mod PRIME)
    a1 = pc.shift_right(a, 31)
    a0 = pc.bit_wise_and(a, 2**31 - 1)
    x = pc.add(pc.add(a1, pc.shift_left(a0, 30)), mod_prime(low))
    return mod_prime(x)


def mod_prime(x: Any) -> Any:
    """``x mod PRIME`` for an int64 array ``0 <= x < 2**63``."""
    y = pc.add(pc.shift_right(x, 61), pc.bit_wise_and(x, PRIME))
    return pc.if_else(pc.greater_equal(y, PRIME), pc.subtract(y, PRIME), y)


def _spark_mod_prime(x: Column) -> Column:
    y = F.shiftright(x, 61) + x.bitwiseAND(F.lit(PRIME))
    return F.when(y >= F.lit(PRIME), y - F.lit(PRIME)).otherwise(y)


class SparkAccumulators(Spine):
    """Per-key vectors of additive integer accumulators of the given ``kinds``.

    The state of a key is the element-wise sum of its vectors over the runs
    (fingerprints modulo :data:`~._fingerprint.PRIME`). Stored columns: ``v{j}``
    for a count or fingerprint, ``v{j}l`` and ``v{j}h`` for a sum.
    """

    def __init__(
        self, spark: SparkSession, key_schema: Schema, kinds: Sequence[Acc], partitions: int = 2
    ) -> None:
        super().__init__(spark, key_schema, column_names(key_schema.arity), partitions)
        self.kinds = list(kinds)
        self.values: list[str] = []
        for j, kind in enumerate(self.kinds):
            self.values += [f"v{j}l", f"v{j}h"] if kind is Acc.SUM else [f"v{j}"]

    @property
    def width(self) -> int:
        return len(self.kinds)

    def lookup(self, keys: Iterable[Row]) -> dict[Row, list[int]]:
        """The summed vector of each of ``keys`` that has one (one Spark job, none if empty)."""
        wanted = set(keys)
        if not wanted:
            return {}
        found = self.lookup_start(self.keys_table(wanted))()
        return {k: v for k, v in found.items() if k in wanted}

    def lookup_start(self, keys: pa.Table | None) -> Callable[[], dict[Row, list[int]]]:
        """Start :meth:`lookup` of the keys in table ``keys`` (the key columns; every key for
        ``None``) in the state as it is now; call the result to wait for it.

        The job runs in a background thread, so the caller can work meanwhile
        (even :meth:`push`: the lookup reads the runs present when it started).
        The result may hold keys not asked for (from the driver's buffer).
        """
        wait = self.fetch_start(keys if self.key_cols else None)
        return lambda: self._sum_tables(wait())

    def sum_arrow(self, tables: list[pa.Table]) -> pa.Table | None:
        """The fetched partial vectors summed per key as a table: the key columns, then
        ``v{j}`` per kind holding the exact total as an int64 (fingerprints folded into
        ``[0, PRIME)``); ``None`` if a total might not fit an int64 (use :meth:`sum_dict`)."""
        tables = [t for t in tables if t.num_rows]
        if not tables or not self.key_cols:
            return None
        with PHASES("reduce.sum_lookup"):
            table = tables[0] if len(tables) == 1 else _concat(tables)
            cols, sums = self._summands(table)
            n = table.num_rows
            if not all(sum_fits(cols[c], n + 1) for c in sums):
                return None
            g = pa.table(cols).group_by(self.key_cols, use_threads=False)
            grouped = g.aggregate([(c, "sum") for c in sums])
            out: list[Any] = [grouped.column(c) for c in self.key_cols]
            try:
                for j, kind in enumerate(self.kinds):
                    if kind is Acc.FINGERPRINT:
                        a, b = grouped.column(f"v{j}a_sum"), grouped.column(f"v{j}b_sum")
                        out.append(fold_mod_prime(a, b))
                    elif kind is Acc.SUM:
                        hi = pc.multiply_checked(grouped.column(f"v{j}h_sum"), 2**32)
                        out.append(pc.add_checked(hi, grouped.column(f"v{j}l_sum")))
                    else:
                        out.append(grouped.column(f"v{j}_sum"))
            except pa.ArrowInvalid:  # an overflow
                return None
            names = [*self.key_cols, *(f"v{j}" for j in range(self.width))]
            return pa.Table.from_arrays(out, names=names)

    def sum_dict(self, tables: list[pa.Table]) -> dict[Row, list[int]]:
        """The fetched partial vectors summed per key: ``key -> vector`` (Python integers)."""
        return self._sum_tables(tables)

    def _summands(self, table: pa.Table) -> tuple[dict[str, Any], list[str]]:
        """The key columns and the columns to sum (fingerprints split into 30-bit halves)."""
        cols: dict[str, Any] = {c: table.column(c) for c in self.key_cols}
        sums: list[str] = []
        for j, kind in enumerate(self.kinds):
            if kind is Acc.FINGERPRINT:
                col = table.column(f"v{j}")
                cols[f"v{j}a"], cols[f"v{j}b"] = pc.shift_right(col, 30), pc.bit_wise_and(col, _M30)
                sums += [f"v{j}a", f"v{j}b"]
            elif kind is Acc.SUM:
                cols[f"v{j}l"], cols[f"v{j}h"] = table.column(f"v{j}l"), table.column(f"v{j}h")
                sums += [f"v{j}l", f"v{j}h"]
            else:
                cols[f"v{j}"] = table.column(f"v{j}")
                sums.append(f"v{j}")
        return cols, sums

    def _sum_tables(self, tables: list[pa.Table]) -> dict[Row, list[int]]:
        tables = [t for t in tables if t.num_rows]
        if not tables:
            return {}
        with PHASES("reduce.sum_lookup"):
            table = tables[0] if len(tables) == 1 else _concat(tables)
            return self._sum_table(table)

    def _sum_table(self, table: pa.Table) -> dict[Row, list[int]]:
        """Sum the runs' partial vectors per key with Arrow's grouped sums (exactly: each
        summed column is checked to fit, else Python's integers do it)."""
        cols, sums = self._summands(table)
        n = table.num_rows
        if not all(sum_fits(cols[s], n) for s in sums):
            return self._sum_rows(table)
        if self.key_cols:
            g = pa.table(cols).group_by(self.key_cols, use_threads=False)
            grouped = g.aggregate([(s, "sum") for s in sums])
        else:
            grouped = pa.table({f"{s}_sum": [pc.sum(cols[s])] for s in sums})
        vcols: list[list[int]] = []
        for j, kind in enumerate(self.kinds):
            if kind is Acc.FINGERPRINT:
                a, b = grouped.column(f"v{j}a_sum"), grouped.column(f"v{j}b_sum")
                vcols.append(column_values(fold_mod_prime(a, b)))
            elif kind is Acc.SUM:
                lo = column_values(grouped.column(f"v{j}l_sum"))
                hi = column_values(grouped.column(f"v{j}h_sum"))
                vcols.append([(h << 32) + x for h, x in zip(hi, lo, strict=True)])
            else:
                vcols.append(column_values(grouped.column(f"v{j}_sum")))
        kcols = [column_values(grouped.column(c)) for c in self.key_cols]
        keys = zip(*kcols, strict=True) if kcols else [()] * grouped.num_rows
        out: dict[Row, list[int]] = {}
        for k, vec in zip(keys, zip(*vcols, strict=True), strict=True):
            old = out.get(k)
            if old is None:
                out[k] = list(vec)
            else:  # keys Arrow tells apart but Python does not (e.g. 0.0 and -0.0)
                self._add_into(old, vec)
        return out

    def _sum_rows(self, table: pa.Table) -> dict[Row, list[int]]:
        """:meth:`_sum_table` with Python integers (for partial sums too large for int64)."""
        kcols = [column_values(table.column(c)) for c in self.key_cols]
        vcols: list[list[int]] = []
        for j, kind in enumerate(self.kinds):
            if kind is Acc.SUM:
                lo = column_values(table.column(f"v{j}l"))
                hi = column_values(table.column(f"v{j}h"))
                vcols.append([(h << 32) + x for h, x in zip(hi, lo, strict=True)])
            else:
                vcols.append(column_values(table.column(f"v{j}")))
        keys = zip(*kcols, strict=True) if kcols else [()] * table.num_rows
        out: dict[Row, list[int]] = {}
        for k, vec in zip(keys, zip(*vcols, strict=True), strict=True):
            old = out.get(k)
            if old is None:
                out[k] = list(vec)
            else:
                self._add_into(old, vec)
        return out

    def _add_into(self, acc: list[int], vec: Sequence[int]) -> None:
        for j, x in enumerate(vec):
            acc[j] += x
        for j, kind in enumerate(self.kinds):
            if kind is Acc.FINGERPRINT:
                acc[j] %= PRIME

    def _consolidate_local(self, table: pa.Table) -> pa.Table | None:
        if any(pa.types.is_floating(table.schema.field(c).type) for c in self.key_cols):
            return None
        cols, sums = self._summands(table)
        n = table.num_rows
        if not all(sum_fits(cols[c], n + 1) for c in sums):
            return None
        if self.key_cols:
            grouped = pa.table(cols).group_by(self.key_cols, use_threads=False)
            g = grouped.aggregate([(c, "sum") for c in sums])
        else:
            g = pa.table(
                {f"{c}_sum": pa.array([pc.sum(cols[c]).as_py()], pa.int64()) for c in sums}
            )
        out: list[Any] = [g.column(c) for c in self.key_cols]
        for j, kind in enumerate(self.kinds):
            if kind is Acc.FINGERPRINT:
                out.append(fold_mod_prime(g.column(f"v{j}a_sum"), g.column(f"v{j}b_sum")))
            elif kind is Acc.SUM:
                lo = g.column(f"v{j}l_sum")
                out.append(pc.bit_wise_and(lo, _M32))
                out.append(pc.add(g.column(f"v{j}h_sum"), pc.shift_right(lo, 32)))
            else:
                out.append(g.column(f"v{j}_sum"))
        merged = pa.Table.from_arrays(out, names=[*self.key_cols, *self.values])
        nonzero: Any = None
        for v in self.values:
            nz = pc.not_equal(merged.column(v), 0)
            nonzero = nz if nonzero is None else pc.or_(nonzero, nz)
        return merged if nonzero is None else merged.filter(nonzero)

    def append(self, deltas: Mapping[Row, list[int]]) -> None:
        """Add ``key -> vector`` deltas (all-zero vectors are skipped)."""
        table = self.prepare(deltas)
        if table is not None:
            self.push(table)

    def push(self, table: pa.Table) -> None:
        """Append a run made by :meth:`prepare` or :meth:`run_table`, then merge runs as needed."""
        self._push(table)

    def prepare(self, deltas: Mapping[Row, list[int]]) -> pa.Table | None:
        """The run holding ``key -> vector`` deltas (``None`` if all are zero); no Spark work."""
        items = [(k, v) for k, v in deltas.items() if any(v)]
        if not items:
            return None
        ktab = table_from_counts(self.key_schema, ((k, 0) for k, _ in items))
        cols: list[Any] = [ktab.column(c) for c in self.key_cols]
        for j, kind in enumerate(self.kinds):
            if kind is Acc.SUM:
                cols.append(pa.array([v[j] & _M32 for _, v in items], pa.int64()))
                cols.append(pa.array([v[j] >> 32 for _, v in items], pa.int64()))
            elif kind is Acc.FINGERPRINT:
                cols.append(pa.array([v[j] % PRIME for _, v in items], pa.int64()))
            else:
                cols.append(pa.array([v[j] for _, v in items], pa.int64()))
        return pa.Table.from_arrays(cols, names=[*self.key_cols, *self.values])

    def run_table(self, keys: Sequence[Any], values: Sequence[Any]) -> pa.Table:
        """The run of key columns ``keys`` and one array per kind: counts and sums as int64
        (sums split here), fingerprints already in ``[0, PRIME)``. No Spark work."""
        cols: list[Any] = list(keys)
        nonzero: Any = None
        for kind, v in zip(self.kinds, values, strict=True):
            if kind is Acc.SUM:
                cols += [pc.bit_wise_and(v, _M32), pc.shift_right(v, 32)]
            else:
                cols.append(v)
            nz = pc.not_equal(v, 0)
            nonzero = nz if nonzero is None else pc.or_(nonzero, nz)
        table = pa.Table.from_arrays(cols, names=[*self.key_cols, *self.values])
        return table if nonzero is None else table.filter(nonzero)

    def _merge(self, df: DataFrame) -> DataFrame:
        aggs: list[Column] = []
        for j, kind in enumerate(self.kinds):
            if kind is Acc.SUM:
                aggs += [F.sum(f"v{j}l").alias(f"v{j}l"), F.sum(f"v{j}h").alias(f"v{j}h")]
            elif kind is Acc.FINGERPRINT:
                v = F.col(f"v{j}")
                aggs.append(F.sum(F.shiftright(v, 30)).alias(f"v{j}a"))
                aggs.append(F.sum(v.bitwiseAND(F.lit(_M30))).alias(f"v{j}b"))
            else:
                aggs.append(F.sum(f"v{j}").alias(f"v{j}"))
        grouped = df.groupBy(*self.key_cols).agg(*aggs) if self.key_cols else df.agg(*aggs)
        out: list[Column] = [F.col(c) for c in self.key_cols]
        for j, kind in enumerate(self.kinds):
            if kind is Acc.SUM:
                lo = F.col(f"v{j}l")
                out.append(lo.bitwiseAND(F.lit(_M32)).alias(f"v{j}l"))
                out.append((F.col(f"v{j}h") + F.shiftright(lo, 32)).alias(f"v{j}h"))
            elif kind is Acc.FINGERPRINT:
                a = _spark_mod_prime(F.col(f"v{j}a"))
                x = (
                    F.shiftright(a, 31)
                    + F.shiftleft(a.bitwiseAND(F.lit(2**31 - 1)), 30)
                    + _spark_mod_prime(F.col(f"v{j}b"))
                )
                out.append(_spark_mod_prime(x).alias(f"v{j}"))
            else:
                out.append(F.col(f"v{j}"))
        merged = grouped.select(*out)
        nonzero = reduce(lambda a, b: a | b, [F.col(v) != 0 for v in self.values])
        return merged.where(nonzero)


def sum_fits(col: Any, n: int) -> bool:
    """Whether every sum of at most ``n`` values of int64 array ``col`` fits an int64."""
    mm = pc.min_max(col)
    lo: int | None = mm["min"].as_py()
    hi: int | None = mm["max"].as_py()
    if lo is None or hi is None:
        return True
    return n * max(abs(lo), abs(hi)) < _INT64


def _concat(tables: list[pa.Table]) -> pa.Table:
    try:
        return pa.concat_tables(tables)
    except pa.ArrowInvalid:
        return pa.concat_tables(tables, promote_options="permissive")
