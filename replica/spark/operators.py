"""Operators of the :class:`~.executor.SparkExecutor`, one step (many times) at a time.

A node turns its inputs' changes for every time of a step, ``(row, time,
diff)``, into its own. Stateless operators (Map, Filter, Project, Union,
Negate, Constant) transform the step's change as it passes. Stateful ones
(Reduce, Distinct, Threshold, TopK, Join) keep their input arrangement in
Spark (:class:`~.arrangement.SparkArrangement`, indexed by their key): a step
looks up the rows under the keys its change touches (one Spark job), replays
the change time by time for those keys only -- with the spec's aggregate,
ordering and selection functions, so results agree with the reference -- and
appends the change to the arrangement. Work per step follows the change.

Errors (messages of failed scalar evaluations) flow through every operator
unchanged, as in the reference: each node's errors are its inputs' plus its own.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pyspark.sql import SparkSession

from tidegate.spec.errors import EvaluationError
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row
from tidegate.spec.plan.aggregates import aggregate
from tidegate.spec.plan.ordering import select_range, sort_rows
from tidegate.spec.plan.relation import AggFunc, Aggregate, TopK
from tidegate.spec.plan.scalar import ScalarExpr
from tidegate.spec.plan.scalar_eval import compile_scalar
from tidegate.spec.plan.schema import ScalarType, Schema

from .arrangement import Acc, SparkAccumulators, SparkArrangement, Spine
from .fingerprint import PRIME, Fingerprinter

__all__ = [
    "AccumulatingReduceNode",
    "ConstantNode",
    "DistinctNode",
    "FilterClassesNode",
    "FilterNode",
    "JoinNode",
    "MapNode",
    "NegateNode",
    "Node",
    "ProjectNode",
    "ReduceNode",
    "SourceNode",
    "StatefulNode",
    "TopKNode",
    "UnionNode",
]

Changes = list[tuple[Any, int, int]]
"""``(row or message, time, diff)`` triples."""


def _by_key_time(
    changes: Changes, keyfn: Callable[[Row], Row]
) -> dict[Row, dict[int, dict[Row, int]]]:
    """Consolidate changes into ``key -> time -> row -> diff`` (zeros dropped)."""
    out: dict[Row, dict[int, dict[Row, int]]] = {}
    for row, t, d in changes:
        rows = out.setdefault(keyfn(row), {}).setdefault(t, {})
        n = rows.get(row, 0) + d
        if n:
            rows[row] = n
        else:
            del rows[row]
    return {k: {t: rs for t, rs in ts.items() if rs} for k, ts in out.items() if any(ts.values())}


def _bump(state: dict[Row, int], row: Row, d: int) -> None:
    n = state.get(row, 0) + d
    if n:
        state[row] = n
    else:
        state.pop(row, None)


def _net(by_key: dict[Row, dict[int, dict[Row, int]]]) -> dict[Row, int]:
    net: dict[Row, int] = {}
    for times in by_key.values():
        for rows in times.values():
            for r, d in rows.items():
                _bump(net, r, d)
    return net


class Node:
    """One operator. After :meth:`run`, ``out``/``errs`` hold its changes for the step."""

    def __init__(self, inputs: list[Node]) -> None:
        self.inputs = inputs
        self.out: Changes = []
        self.errs: Changes = []

    def run(self, first_time: int | None) -> None:
        """Compute this step's changes; ``first_time`` is the as_of when the step includes it."""
        raise NotImplementedError

    def _input_errs(self) -> Changes:
        errs: Changes = []
        for n in self.inputs:
            errs.extend(n.errs)
        return errs


class StatefulNode(Node):
    """A node whose state is held in Spark arrangements."""

    arrangements: tuple[Spine, ...] = ()

    def state_jobs(self) -> int:
        return sum(a.jobs for a in self.arrangements)

    def clear(self) -> None:
        for a in self.arrangements:
            a.clear()


class SourceNode(Node):
    """An input: its changes for the step are set from outside."""

    def __init__(self) -> None:
        super().__init__([])
        self.pending: Changes = []
        self.pending_errs: Changes = []

    def run(self, first_time: int | None) -> None:
        pass  # the executor sets out/errs


class ConstantNode(Node):
    def __init__(self, rows: list[tuple[Row, int]]) -> None:
        super().__init__([])
        self.rows = rows

    def run(self, first_time: int | None) -> None:
        self.out = [] if first_time is None else [(r, first_time, c) for r, c in self.rows]


class MapNode(Node):
    def __init__(self, inp: Node, exprs: tuple[ScalarExpr, ...]) -> None:
        super().__init__([inp])
        self.fns = [compile_scalar(e) for e in exprs]

    def run(self, first_time: int | None) -> None:
        out: Changes = []
        errs = self._input_errs()
        fns = self.fns
        for row, t, d in self.inputs[0].out:
            try:
                for f in fns:
                    row = (*row, f(row))
            except EvaluationError as e:
                errs.append((str(e), t, d))
                continue
            out.append((row, t, d))
        self.out, self.errs = out, errs


class FilterNode(Node):
    def __init__(self, inp: Node, predicates: tuple[ScalarExpr, ...]) -> None:
        super().__init__([inp])
        self.fns = [compile_scalar(e) for e in predicates]

    def run(self, first_time: int | None) -> None:
        out: Changes = []
        errs = self._input_errs()
        fns = self.fns
        for row, t, d in self.inputs[0].out:
            try:
                if all(f(row) is True for f in fns):
                    out.append((row, t, d))
            except EvaluationError as e:
                errs.append((str(e), t, d))
        self.out, self.errs = out, errs


class ProjectNode(Node):
    def __init__(self, inp: Node, columns: tuple[int, ...]) -> None:
        super().__init__([inp])
        self.columns = columns

    def run(self, first_time: int | None) -> None:
        cols = self.columns
        self.out = [(tuple(row[i] for i in cols), t, d) for row, t, d in self.inputs[0].out]
        self.errs = self._input_errs()


class NegateNode(Node):
    def run(self, first_time: int | None) -> None:
        self.out = [(row, t, -d) for row, t, d in self.inputs[0].out]
        self.errs = self._input_errs()


class UnionNode(Node):
    def run(self, first_time: int | None) -> None:
        out: Changes = []
        for n in self.inputs:
            out.extend(n.out)
        self.out, self.errs = out, self._input_errs()


def _class_check(classes: list[tuple[int, ...]]) -> Callable[[Row], bool]:
    def ok(row: Row) -> bool:
        for cls in classes:
            first = row[cls[0]]
            if first is None:
                return False
            for i in cls[1:]:
                v = row[i]
                if v is None or v != first:
                    return False
        return True

    return ok


class FilterClassesNode(Node):
    """The equivalence check of a one-input join."""

    def __init__(self, inp: Node, classes: list[tuple[int, ...]]) -> None:
        super().__init__([inp])
        self.check = _class_check(classes)

    def run(self, first_time: int | None) -> None:
        check = self.check
        self.out = [(r, t, d) for r, t, d in self.inputs[0].out if check(r)]
        self.errs = self._input_errs()


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

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row, int]:
        """The group's output rows (with counts) given its accumulated rows."""
        raise NotImplementedError

    def run(self, first_time: int | None) -> None:
        self.errs = self._input_errs()
        by_key = _by_key_time(self.inputs[0].out, self.keyfn)
        if not by_key:
            self.out = []
            return
        old = self.arr.lookup(by_key)
        out: Changes = []
        for k, times in by_key.items():
            rows = dict(old.get(k, {}))
            prev = self.group_output(k, rows) if rows else {}
            for t in sorted(times):
                for r, d in times[t].items():
                    _bump(rows, r, d)
                cur = self.group_output(k, rows) if rows else {}
                if cur != prev:
                    for r in prev.keys() | cur.keys():
                        d = cur.get(r, 0) - prev.get(r, 0)
                        if d:
                            out.append((r, t, d))
                    prev = cur
        self.arr.append(_net(by_key))
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

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row, int]:
        vals = []
        for a in self.aggs:
            col = a.column
            vals.append(aggregate(a, [(r if col is None else r[col], c) for r, c in rows.items()]))
        return {key + tuple(vals): 1}


class DistinctNode(_GroupedNode):
    """``Distinct`` (each row of positive count once) or ``Threshold`` (positive counts kept)."""

    def __init__(self, spark: SparkSession, inp: Node, schema: Schema, threshold: bool) -> None:
        super().__init__(spark, inp, schema, tuple(range(schema.arity)))
        self.threshold = threshold

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row, int]:
        return {r: (c if self.threshold else 1) for r, c in rows.items() if c > 0}


class TopKNode(_GroupedNode):
    """Per group, the rows in slots ``offset .. offset+limit`` of the order."""

    def __init__(self, spark: SparkSession, inp: Node, schema: Schema, plan: TopK) -> None:
        super().__init__(spark, inp, schema, plan.group_key)
        self.plan = plan

    def group_output(self, key: Row, rows: dict[Row, int]) -> dict[Row, int]:
        p = self.plan
        return dict(select_range(sort_rows(rows.items(), p.order_by), p.offset, p.limit))


class JoinNode(StatefulNode):
    """A binary equi-join; both inputs arranged in Spark by their key columns.

    A step's output is ``dL x R + L x dR + dL x dR`` (old arrangements ``L``,
    ``R``; a pair of changes at ``t1``, ``t2`` lands at ``max(t1, t2)``). Rows
    with a NULL key never join and are not stored.
    """

    def __init__(
        self,
        spark: SparkSession,
        left: Node,
        right: Node,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        classes: list[tuple[int, ...]],
    ) -> None:
        super().__init__([left, right])
        self.keyfns = (key_function(keys[0]), key_function(keys[1]))
        self.arrs = (
            SparkArrangement(spark, schemas[0], keys[0]),
            SparkArrangement(spark, schemas[1], keys[1]),
        )
        self.arrangements = self.arrs
        self.check = _class_check(classes)

    def _delta(self, side: int) -> dict[Row, dict[int, dict[Row, int]]]:
        keyfn = self.keyfns[side]
        changes = [u for u in self.inputs[side].out if None not in keyfn(u[0])]
        return _by_key_time(changes, keyfn)

    def run(self, first_time: int | None) -> None:
        self.errs = self._input_errs()
        dl, dr = self._delta(0), self._delta(1)
        out: Changes = []
        check = self.check
        if dl or dr:
            old_r = self.arrs[1].lookup(dl)
            old_l = self.arrs[0].lookup(dr)
            for k, times in dl.items():
                rrows = old_r.get(k, {})
                for t, lrows in times.items():
                    for lrow, ld in lrows.items():
                        for rrow, rc in rrows.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, t, ld * rc))
                rtimes = dr.get(k, {})
                for t, lrows in times.items():
                    for t2, rrows2 in rtimes.items():
                        tt = max(t, t2)
                        for lrow, ld in lrows.items():
                            for rrow, rd in rrows2.items():
                                row = lrow + rrow
                                if check(row):
                                    out.append((row, tt, ld * rd))
            for k, times in dr.items():
                lrows_old = old_l.get(k, {})
                for t, rrows in times.items():
                    for rrow, rd in rrows.items():
                        for lrow, lc in lrows_old.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, t, lc * rd))
            self.arrs[0].append(_net(dl))
            self.arrs[1].append(_net(dr))
        self.out = out


class AccumulatingReduceNode(StatefulNode):
    """A Reduce whose aggregates are all count/sum/avg (not distinct) over int64 or ``*``.

    Its state is per-key accumulators only (:class:`SparkAccumulators`), not
    the input rows: ``count(*)`` and two row fingerprints (the group is present
    iff its rows are non-empty, see :mod:`.fingerprint`), then per aggregated
    nullable column the count of non-NULL values, their exact sum and two
    fingerprints of the rows with a non-NULL value (``sum`` is NULL iff there
    are none); per non-nullable column only the exact sum, since its count and
    presence are the group's. Fewer columns make every Spark read cheaper. A
    step looks up the touched keys' vectors (one Spark job) and appends the
    vectors' changes, so state and work are per key, independent of how many
    distinct rows the input has accumulated.
    """

    def __init__(
        self,
        spark: SparkSession,
        inp: Node,
        schema: Schema,
        key: tuple[int, ...],
        aggs: tuple[Aggregate, ...],
        fingerprint: Fingerprinter,
    ) -> None:
        super().__init__([inp])
        self.key = key
        self.keyfn = key_function(key)
        self.aggs = aggs
        self.fp = fingerprint
        self.columns = sorted({a.column for a in aggs if a.column is not None})
        kinds = [Acc.COUNT, Acc.FINGERPRINT, Acc.FINGERPRINT]
        self.slot: dict[int, int] = {}
        self._cols: list[tuple[int, int]] = []  # nullable columns: count, sum, 2 fingerprints
        self._sums: list[tuple[int, int]] = []  # non-nullable ones: the sum only
        for c in self.columns:
            self.slot[c] = len(kinds)
            if schema.columns[c].type.nullable:
                self._cols.append((c, len(kinds)))
                kinds += [Acc.COUNT, Acc.SUM, Acc.FINGERPRINT, Acc.FINGERPRINT]
            else:
                self._sums.append((c, len(kinds)))
                kinds.append(Acc.SUM)
        self._nullable = {c for c, _ in self._cols}
        self.acc = SparkAccumulators(spark, schema.project(key), kinds)
        self.arrangements = (self.acc,)
        self._fps = [j for j, kind in enumerate(kinds) if kind is Acc.FINGERPRINT]

    @staticmethod
    def supports(schema: Schema, aggs: tuple[Aggregate, ...]) -> bool:
        """Whether every aggregate is accumulable exactly in integers."""
        return all(
            not a.distinct
            and a.func in (AggFunc.COUNT, AggFunc.SUM, AggFunc.AVG)
            and (a.column is None or schema.columns[a.column].type.scalar is ScalarType.INT64)
            for a in aggs
        )

    def _output(self, key: Row, v: list[int]) -> Row | None:
        if v[0] == 0 and v[1] == 0 and v[2] == 0:
            return None
        vals: list[Any] = []
        for a in self.aggs:
            if a.column is None:
                vals.append(v[0])
                continue
            s = self.slot[a.column]
            if a.column in self._nullable:
                count, total, present = v[s], v[s + 1], v[s] or v[s + 2] or v[s + 3]
            else:  # no NULLs: its values are the group's rows (present, as the group is)
                count, total, present = v[0], v[s], True
            if a.func is AggFunc.COUNT:
                vals.append(count)
            elif not present:
                vals.append(None)
            elif a.func is AggFunc.SUM:
                vals.append(total)
            else:
                vals.append(None if count == 0 else float(Fraction(total) / count))
        return key + tuple(vals)

    def _deltas(self, rows: dict[Row, int]) -> list[int]:
        """The change of a key's vector for ``row -> diff`` changes (fingerprints mod PRIME)."""
        dv = [0] * self.acc.width
        fp = self.fp
        cols, sums = self._cols, self._sums
        for row, d in rows.items():
            f1, f2 = fp(row)
            dv[0] += d
            dv[1] += d * f1
            dv[2] += d * f2
            for c, s in sums:
                x = row[c]
                if x is not None:  # NULL only in a row that broke the schema (check_rows=False)
                    dv[s] += x * d
            for c, s in cols:
                x = row[c]
                if x is None:
                    continue
                dv[s] += d
                dv[s + 1] += x * d
                dv[s + 2] += d * f1
                dv[s + 3] += d * f2
        for j in self._fps:
            dv[j] %= PRIME
        return dv

    def run(self, first_time: int | None) -> None:
        """Look up the touched keys' vectors in Spark while the changes' own vectors are
        computed in the driver (they do not depend on the state), then replay per key."""
        self.errs = self._input_errs()
        by_key = _by_key_time(self.inputs[0].out, self.keyfn)
        if not by_key:
            self.out = []
            return
        pending = self.acc.lookup_start(by_key)
        width = self.acc.width
        fps = self._fps
        seqs: dict[Row, list[tuple[int, list[int]]]] = {}
        total: dict[Row, list[int]] = {}
        for k, times in by_key.items():
            if len(times) == 1:
                ((t, rows),) = times.items()
                dv = self._deltas(rows)
                seqs[k] = [(t, dv)]
                total[k] = dv
                continue
            seq = [(t, self._deltas(times[t])) for t in sorted(times)]
            acc = [0] * width
            for _, dv in seq:
                for j, x in enumerate(dv):
                    acc[j] += x
            for j in fps:
                acc[j] %= PRIME
            seqs[k], total[k] = seq, acc
        run = self.acc.prepare(total)
        old = pending()
        out: Changes = []
        for k, seq in seqs.items():
            base = old.get(k)
            v = [0] * width if base is None else base
            prev = self._output(k, v)
            for t, dv in seq:
                v = [a + b for a, b in zip(v, dv, strict=True)]
                for j in fps:
                    v[j] %= PRIME
                cur = self._output(k, v)
                if cur != prev:
                    if prev is not None:
                        out.append((prev, t, -1))
                    if cur is not None:
                        out.append((cur, t, 1))
                    prev = cur
        if run is not None:
            self.acc.push(run)
        self.out = out
