"""Operator state held in Spark: key-indexed runs, merged like an LSM spine.

A state is the sum of a short list of *runs* (:class:`Run`), each a
consolidated Spark DataFrame. A step appends its change as a new run (a
``LocalRelation`` built from Arrow: no job) at level 0; whenever the newest
``fanout`` runs share a level they are merged into one run of the next level
(a tiered spine), so every entry is rewritten O(log steps) times and at most
``fanout * log(steps)`` runs exist. Off the step's critical path, one
background thread materialises runs in order: each appended run is
hash-partitioned by key and locally checkpointed (so reads scan cached rows
rather than converting its Arrow data again, which measured 2-3x dearer), each
merge is consolidated, partitioned and checkpointed. Until a run is
materialised, reads use what it replaces.

A lookup is one Spark job with no shuffle: the runs' entries under the wanted
keys (a broadcast semi-join, or the whole state when the keys are a large part
of it) are fetched as Arrow and summed in the driver. Its cost follows the
keys asked for, plus a scan of the cached runs.

:class:`SparkArrangement` holds a multiset of rows indexed by key columns
(the input of Distinct, Threshold, TopK, Reduce with recomputed aggregates,
and each side of a Join). :class:`SparkAccumulators` holds per-key vectors of
additive integers (the running counts, sums and fingerprints of an
accumulating Reduce).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal
from enum import Enum
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema

from .arrow import COUNT, column_names, rows_from_table, table_from_counts
from .fingerprint import PRIME

__all__ = ["Acc", "Run", "SparkAccumulators", "SparkArrangement", "Spine"]

_DEC = "decimal(38,0)"
_LOW = 2**31 - 1
_FETCH_ALL = 2
"""Fetch the whole state (no semi-join: it costs a broadcast and a join) when
``_FETCH_ALL * keys`` reaches the estimated keys held (:attr:`Spine.key_bound`)."""


_MERGER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-spine-merge")
"""Runs every spine's merges in the background, one at a time, in submission order."""
_FETCHER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tidegate-spine-fetch")
"""Runs lookups started with :meth:`SparkAccumulators.lookup_start`."""


class Run:
    """One run of a spine: an appended change (``frame``), or the merge of ``parts``.

    Every run is materialised -- consolidated if a merge, key-partitioned and
    locally checkpointed, so reads scan cached rows instead of converting the
    appended Arrow data again -- by a background job (:data:`_MERGER`). Until
    that is done, reads use the appended frame or the parts, so a step never
    waits for it.
    """

    def __init__(
        self, frame: DataFrame | None, size: int, level: int, parts: tuple[Run, ...] = ()
    ) -> None:
        self.frame = frame
        self.size = size
        """The entries held (exact once materialised, else the sum of the parts')."""
        self.level = level
        self.parts = parts
        self.pending: Future[tuple[DataFrame, int]] | None = None

    def _done(self) -> tuple[DataFrame, int] | None:
        p = self.pending
        if p is None or not p.done() or p.cancelled() or p.exception() is not None:
            return None
        return p.result()

    def frames(self) -> list[DataFrame]:
        """The DataFrames whose union is this run (one, once materialised). Safe in any thread."""
        done = self._done()
        if done is not None:
            return [done[0]]
        if self.frame is not None:
            return [self.frame]
        return [f for r in self.parts for f in r.frames()]

    def settle(self) -> None:
        """Adopt a finished materialisation and forget what it replaces (owner's thread only)."""
        done = self._done()
        if done is not None:
            self.frame, self.size = done
            self.parts, self.pending = (), None


class Spine:
    """The runs of one state (the base of both kinds of state), indexed by the key columns ``key_cols`` of schema ``key_schema``."""

    def __init__(
        self, spark: SparkSession, key_schema: Schema, key_cols: Sequence[str], partitions: int
    ) -> None:
        self.spark = spark
        self.key_schema = key_schema
        self.key_cols = list(key_cols)
        self.partitions = max(partitions, 1)
        self.fanout = 4
        self.runs: list[Run] = []
        self.jobs = 0
        """Spark jobs run by lookups (merges run in the background)."""

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

    def _fetch_frame(self, keys: Iterable[Row] | None) -> DataFrame | None:
        """The plan reading every run's raw entries under ``keys`` (all for ``None``), as the
        runs are now; ``None`` if nothing can match. Builds the plan only: no job."""
        if not self.runs:
            return None
        wanted = None if keys is None else set(keys)
        if wanted is not None and not wanted:
            return None
        for r in self.runs:
            r.settle()
        state = reduce(DataFrame.unionByName, (f for r in self.runs for f in r.frames()))
        if wanted is not None and self.key_cols and _FETCH_ALL * len(wanted) < self.key_bound:
            ktab = table_from_counts(self.key_schema, ((k, 0) for k in wanted))
            names = [f"k{j}" for j in range(len(self.key_cols))]
            kdf = self.spark.createDataFrame(ktab.drop_columns([COUNT])).toDF(*names)
            cond = [state[c].eqNullSafe(kdf[k]) for c, k in zip(self.key_cols, names, strict=True)]
            state = state.join(F.broadcast(kdf), cond, "left_semi")
        return state

    def _fetch(self, keys: Iterable[Row] | None) -> pa.Table | None:
        """The raw entries of every run under ``keys`` (one job); ``None`` if nothing can match."""
        frame = self._fetch_frame(keys)
        if frame is None:
            return None
        self.jobs += 1
        table: pa.Table = frame.toArrow()
        return table

    def _push(self, table: pa.Table) -> None:
        run = Run(self.spark.createDataFrame(table), table.num_rows, 0)
        run.pending = _MERGER.submit(self._checkpoint, run.frames(), table.num_rows)
        self.runs.append(run)
        fan = self.fanout
        while len(self.runs) >= fan and len({r.level for r in self.runs[-fan:]}) == 1:
            tail = tuple(self.runs[-fan:])
            merged = Run(None, sum(r.size for r in tail), tail[-1].level + 1, tail)
            merged.pending = _MERGER.submit(self._merge_runs, tail)
            self.runs[-fan:] = [merged]

    def _merge_runs(self, parts: tuple[Run, ...]) -> tuple[DataFrame, int]:
        # in the background thread, after the parts' own jobs: reads their materialised frames
        return self._checkpoint([f for r in parts for f in r.frames()], None)

    def _checkpoint(self, frames: list[DataFrame], size: int | None) -> tuple[DataFrame, int]:
        """The union of ``frames`` of known ``size`` (consolidated and counted if ``None``),
        key-partitioned and locally checkpointed, with its size (run in the background)."""
        df = reduce(DataFrame.unionByName, frames)
        if size is None:
            df = self._merge(df)
        if self.key_cols:
            df = df.repartition(self.partitions, *self.key_cols)
        frame = df.localCheckpoint(eager=True)
        return frame, frame.count() if size is None else size

    def _merge(self, df: DataFrame) -> DataFrame:
        raise NotImplementedError

    def clear(self) -> None:
        """Forget the state (its dataflow was dropped)."""
        for r in self.runs:
            if r.pending is not None:
                r.pending.cancel()
        self.runs.clear()


class SparkArrangement(Spine):
    """A multiset of rows of ``schema`` (``row -> count``) indexed by the ``key`` columns."""

    def __init__(
        self, spark: SparkSession, schema: Schema, key: tuple[int, ...], partitions: int = 2
    ) -> None:
        super().__init__(spark, schema.project(key), [f"c{i}" for i in key], partitions)
        self.schema = schema
        self.key = key
        self.cols = column_names(schema.arity)

    def lookup(self, keys: Iterable[Row] | None = None) -> dict[Row, dict[Row, int]]:
        """The rows under each of ``keys`` (all rows for ``None``): ``key -> row -> count``.

        Keys that hold nothing are absent. One Spark job, none if the state is empty.
        """
        table = self._fetch(keys)
        if table is None:
            return {}
        out: dict[Row, dict[Row, int]] = {}
        key = self.key
        for row, n in rows_from_table(table, self.schema.arity):
            group = out.setdefault(tuple(row[i] for i in key), {})
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

    def _merge(self, df: DataFrame) -> DataFrame:
        agg = F.sum(COUNT).alias(COUNT)
        grouped = df.groupBy(*self.cols).agg(agg) if self.cols else df.agg(agg)
        return grouped.where(F.col(COUNT).isNotNull() & (F.col(COUNT) != 0))


class Acc(Enum):
    """The kind of one accumulator: how it is stored and summed."""

    COUNT = "count"  # int64, plain sum
    SUM = "sum"  # decimal(38, 0): unchecked int64 sums cannot overflow it
    FINGERPRINT = "fingerprint"  # int64 in [0, PRIME), summed modulo PRIME


class SparkAccumulators(Spine):
    """Per-key vectors of additive integer accumulators of the given ``kinds``.

    The state of a key is the element-wise sum of its vectors over the runs
    (fingerprints modulo :data:`~.fingerprint.PRIME`).
    """

    def __init__(
        self, spark: SparkSession, key_schema: Schema, kinds: Sequence[Acc], partitions: int = 2
    ) -> None:
        super().__init__(spark, key_schema, column_names(key_schema.arity), partitions)
        self.kinds = list(kinds)
        self.values = [f"v{j}" for j in range(len(self.kinds))]

    @property
    def width(self) -> int:
        return len(self.kinds)

    def lookup(self, keys: Iterable[Row]) -> dict[Row, list[int]]:
        """The summed vector of each of ``keys`` that has one (one Spark job, none if empty)."""
        return self.lookup_start(keys)()

    def lookup_start(self, keys: Iterable[Row]) -> Callable[[], dict[Row, list[int]]]:
        """Start :meth:`lookup` of the state as it is now; call the result to wait for it.

        The job runs in a background thread, so the caller can work meanwhile
        (even :meth:`append`: the lookup reads the runs present when it started).
        """
        frame = self._fetch_frame(keys)
        if frame is None:
            return dict
        self.jobs += 1
        return _FETCHER.submit(lambda: self._sum_table(frame.toArrow())).result

    def _sum_table(self, table: pa.Table) -> dict[Row, list[int]]:
        """Sum the runs' partial vectors per key with Arrow's grouped sums (fingerprints split
        into 31-bit halves first, so no sum can overflow)."""
        cols: dict[str, Any] = {c: table.column(c) for c in self.key_cols}
        for v, kind in zip(self.values, self.kinds, strict=True):
            col = table.column(v)
            if kind is Acc.FINGERPRINT:
                col = col.cast(pa.int64())
                cols[v + "h"] = pc.shift_right(col, 31)
                cols[v + "l"] = pc.bit_wise_and(col, _LOW)
            else:
                cols[v] = col
        sums = [n for n in cols if n not in self.key_cols]
        if self.key_cols:
            g = pa.table(cols).group_by(self.key_cols, use_threads=False)
            grouped = g.aggregate([(n, "sum") for n in sums])
        else:
            grouped = pa.table({f"{n}_sum": [pc.sum(cols[n])] for n in sums})
        kcols = [_ints(grouped.column(c)) for c in self.key_cols]
        vcols: list[list[int]] = []
        for v, kind in zip(self.values, self.kinds, strict=True):
            if kind is Acc.FINGERPRINT:
                hs = _ints(grouped.column(v + "h_sum"))
                ls = _ints(grouped.column(v + "l_sum"))
                vcols.append([((h << 31) + lo) % PRIME for h, lo in zip(hs, ls, strict=True)])
            else:
                vcols.append(_ints(grouped.column(v + "_sum")))
        out: dict[Row, list[int]] = {}
        for k, vec in zip(
            zip(*kcols, strict=True) if kcols else [()] * grouped.num_rows,
            zip(*vcols, strict=True),
            strict=True,
        ):
            old = out.get(k)
            if old is None:
                out[k] = list(vec)
            else:  # keys Arrow tells apart but Python does not (e.g. 0.0 and -0.0)
                for j, x in enumerate(vec):
                    old[j] += x
                for j, kind in enumerate(self.kinds):
                    if kind is Acc.FINGERPRINT:
                        old[j] %= PRIME
        return out

    def append(self, deltas: Mapping[Row, list[int]]) -> None:
        """Add ``key -> vector`` deltas (all-zero vectors are skipped)."""
        table = self.prepare(deltas)
        if table is not None:
            self.push(table)

    def push(self, table: pa.Table) -> None:
        """Append a run made by :meth:`prepare`, then merge runs as needed."""
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
                cols.append(pa.array([Decimal(v[j]) for _, v in items], pa.decimal128(38, 0)))
            else:
                cols.append(
                    pa.array(
                        [v[j] % PRIME if kind is Acc.FINGERPRINT else v[j] for _, v in items],
                        pa.int64(),
                    )
                )
        return pa.Table.from_arrays(cols, names=[*self.key_cols, *self.values])

    def _merge(self, df: DataFrame) -> DataFrame:
        aggs: list[Column] = []
        for v, kind in zip(self.values, self.kinds, strict=True):
            if kind is Acc.SUM:
                aggs.append(F.sum(v).cast(_DEC).alias(v))
            elif kind is Acc.FINGERPRINT:
                aggs.append(F.pmod(F.sum(F.col(v).cast(_DEC)), F.lit(PRIME)).cast("long").alias(v))
            else:
                aggs.append(F.sum(v).alias(v))
        return df.groupBy(*self.key_cols).agg(*aggs) if self.key_cols else df.agg(*aggs)


def _ints(col: pa.ChunkedArray) -> list[Any]:
    """A column as Python values; decimals as ints (through int64 when they fit)."""
    if pa.types.is_decimal(col.type):
        try:
            fast: list[Any] = col.cast(pa.int64()).to_pylist()
            return fast
        except (pa.ArrowInvalid, OverflowError):
            return [None if v is None else int(v) for v in col.to_pylist()]
    values: list[Any] = col.to_pylist()
    return values
