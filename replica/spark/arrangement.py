"""Operator state held in Spark: key-indexed runs, merged like an LSM spine.

A state is the sum of a short list of *runs*, each a consolidated Spark
DataFrame. A step appends its change as a new run (a ``LocalRelation`` built
from Arrow: no job) at level 0; whenever the newest ``fanout`` runs share a
level they are merged into one run of the next level (a tiered spine), so
every entry is rewritten O(log steps) times and at most
``fanout * log(steps)`` runs exist. A merged run
is consolidated, hash-partitioned by key and locally checkpointed (lazily: it
is computed by the next job that reads it), so lineage stays one run deep.

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

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from enum import Enum
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema

from .arrow import COUNT, column_names, rows_from_table, table_from_counts
from .fingerprint import PRIME

__all__ = ["Acc", "SparkAccumulators", "SparkArrangement", "Spine"]

_DEC = "decimal(38,0)"
_FETCH_ALL = 4
"""Fetch the whole state (no semi-join) when ``_FETCH_ALL * keys >= state size``."""


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
        self.runs: list[tuple[DataFrame, int]] = []
        self.levels: list[int] = []  # a run of level l holds about fanout**l appended runs
        self.jobs = 0
        """Spark jobs run by lookups (merges run inside them)."""

    @property
    def size_bound(self) -> int:
        """An upper bound of the entries held (the sum of the runs' sizes)."""
        return sum(n for _, n in self.runs)

    def _fetch(self, keys: Iterable[Row] | None) -> pa.Table | None:
        """The raw entries of every run under ``keys`` (all for ``None``); ``None`` if nothing can match."""
        if not self.runs:
            return None
        wanted = None if keys is None else set(keys)
        if wanted is not None and not wanted:
            return None
        state = reduce(DataFrame.unionByName, (df for df, _ in self.runs))
        if wanted is not None and self.key_cols and _FETCH_ALL * len(wanted) < self.size_bound:
            ktab = table_from_counts(self.key_schema, ((k, 0) for k in wanted))
            names = [f"k{j}" for j in range(len(self.key_cols))]
            kdf = self.spark.createDataFrame(ktab.drop_columns([COUNT])).toDF(*names)
            cond = [state[c].eqNullSafe(kdf[k]) for c, k in zip(self.key_cols, names, strict=True)]
            state = state.join(F.broadcast(kdf), cond, "left_semi")
        self.jobs += 1
        table: pa.Table = state.toArrow()
        return table

    def _push(self, table: pa.Table) -> None:
        self.runs.append((self.spark.createDataFrame(table), table.num_rows))
        self.levels.append(0)
        fan = self.fanout
        while len(self.levels) >= fan and len(set(self.levels[-fan:])) == 1:
            tail = self.runs[-fan:]
            merged = self._merge(reduce(DataFrame.unionByName, (df for df, _ in tail)))
            if self.key_cols:
                merged = merged.repartition(self.partitions, *self.key_cols)
            level = self.levels[-1] + 1
            self.runs[-fan:] = [(merged.localCheckpoint(eager=False), sum(n for _, n in tail))]
            self.levels[-fan:] = [level]

    def _merge(self, df: DataFrame) -> DataFrame:
        raise NotImplementedError

    def clear(self) -> None:
        """Forget the state (its dataflow was dropped)."""
        self.runs.clear()
        self.levels.clear()


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
        table = self._fetch(keys)
        if table is None:
            return {}
        kcols = [_ints(table.column(c)) for c in self.key_cols]
        vcols = [_ints(table.column(v)) for v in self.values]
        fps = [j for j, k in enumerate(self.kinds) if k is Acc.FINGERPRINT]
        out: dict[Row, list[int]] = {}
        for i in range(table.num_rows):
            k = tuple(c[i] for c in kcols)
            vec = [c[i] for c in vcols]
            old = out.get(k)
            if old is None:
                out[k] = vec
            else:
                for j, x in enumerate(vec):
                    old[j] += x
        for vec in out.values():
            for j in fps:
                vec[j] %= PRIME
        return out

    def append(self, deltas: Mapping[Row, list[int]]) -> None:
        """Add ``key -> vector`` deltas (all-zero vectors are skipped)."""
        items = [(k, v) for k, v in deltas.items() if any(v)]
        if not items:
            return
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
        self._push(pa.Table.from_arrays(cols, names=[*self.key_cols, *self.values]))

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
    values: list[Any] = col.to_pylist()
    if pa.types.is_decimal(col.type):
        return [None if v is None else int(v) for v in values]
    return values
