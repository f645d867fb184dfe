"""The grouped operators: Reduce, Distinct/Threshold, TopK and Window over rows arranged in Spark.

Each keeps its input arrangement in Spark, indexed by its group key; a step
looks up the groups its change touches (one Spark job), replays the change
time by time for those groups only with the spec's aggregate, ordering and
selection functions (so results agree with the reference), and appends the
change to the arrangement. A Reduce group whose sum is out of range outputs
its error (once) instead of a row, as in the reference.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from tidegate.spec.errors import EvaluationError
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.aggregates import aggregate
from tidegate.spec.plan.ordering import top_range
from tidegate.spec.plan.relation import Aggregate, TopK, Window
from tidegate.spec.plan.schema import Schema
from tidegate.spec.plan.window import window_partition

from ..arrangement import SparkArrangement
from ._base import Changes, Node, StatefulNode, bump, by_key_time, net_rows

__all__ = ["DistinctNode", "ReduceNode", "TopKNode", "WindowNode"]


class _GroupedNode(StatefulNode):
    """A stateful node over groups: the output of a group is a function of its accumulated rows."""

    def __init__(
        self, spark: SparkSession, inp: Node, schema: Schema, key: tuple[int, ...]
    ) -> None:
        super().__init__([inp])
        self.key = key
        self.keyfn = key_function(key)
        self.arr = SparkArrangement(spark, schema, key)
        self.arrangements = (self.arr,)

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row | str, int]:
        """The group's output rows (with counts) given its accumulated rows; a ``str`` in
        place of a row is an error message the group outputs instead (a Reduce's sum out
        of range)."""
        raise NotImplementedError

    def run(self, first_time: int | None) -> None:
        self.errs = self._input_errs()
        by_key = by_key_time(self.inputs[0].out, self.keyfn)
        if not by_key:
            self.out = []
            return
        old = self.arr.lookup(by_key)
        out: Changes = []
        errs = self.errs
        for k, times in by_key.items():
            rows = dict(old.get(k, {}))
            prev = self.group_output(k, rows) if rows else {}
            for t in sorted(times):
                for r, d in times[t].items():
                    bump(rows, r, d)
                cur = self.group_output(k, rows) if rows else {}
                if cur != prev:
                    for o in prev.keys() | cur.keys():
                        n = cur.get(o, 0) - prev.get(o, 0)
                        if n:
                            (errs if type(o) is str else out).append((o, t, n))
                    prev = cur
        self.arr.append(net_rows(by_key))
        self.out = out


class ReduceNode(_GroupedNode):
    """Group by ``key``; one output row per non-empty group: the key, then each aggregate."""

    def __init__(
        self,
        spark: SparkSession,
        inp: Node,
        schema: Schema,
        key: tuple[int, ...],
        aggs: tuple[Aggregate, ...],
    ) -> None:
        super().__init__(spark, inp, schema, key)
        self.aggs = aggs

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row | str, int]:
        vals = []
        try:
            for a in self.aggs:
                col = a.column
                pairs = [(r if col is None else r[col], c) for r, c in rows.items()]
                vals.append(aggregate(a, pairs))
        except EvaluationError as e:  # a sum out of range: the group is one error
            return {str(e): 1}
        return {key + tuple(vals): 1}


class DistinctNode(_GroupedNode):
    """``Distinct`` (each row of positive count once) or ``Threshold`` (positive counts kept)."""

    def __init__(self, spark: SparkSession, inp: Node, schema: Schema, threshold: bool) -> None:
        super().__init__(spark, inp, schema, tuple(range(schema.arity)))
        self.threshold = threshold

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row | str, int]:
        return {r: (c if self.threshold else 1) for r, c in rows.items() if c > 0}


class TopKNode(_GroupedNode):
    """Per group, the rows in slots ``offset .. offset+limit`` of the order."""

    def __init__(self, spark: SparkSession, inp: Node, schema: Schema, plan: TopK) -> None:
        super().__init__(spark, inp, schema, plan.group_key)
        self.plan = plan

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row | str, int]:
        p = self.plan
        return dict(top_range(rows.items(), p.order_by, p.offset, p.limit))


class WindowNode(_GroupedNode):
    """Per partition (the group), its rows with their window values; one error instead if an
    aggregate overflows."""

    def __init__(self, spark: SparkSession, inp: Node, schema: Schema, plan: Window) -> None:
        super().__init__(spark, inp, schema, plan.partition_key)
        self.plan = plan

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row | str, int]:
        try:
            return dict(window_partition(rows.items(), self.plan))
        except EvaluationError as e:
            return {str(e): 1}
