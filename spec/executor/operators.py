"""Incremental operators of the :class:`PythonExecutor`.

Each node turns its inputs' changes at one time into its own changes at that
time. Times are processed in increasing order, and only once every input is
complete for them, so a stateful node's arrangement (its state indexed by
key) is the accumulation of everything before the current time. Work per
time is proportional to the change and the keys it touches, never to the
whole state -- except ``min``/``max``/``distinct`` aggregates, TopK and Window,
which recompute the touched groups (partitions) only.

Every node also carries error changes: its own (rows whose expressions
failed) plus all its inputs', unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from operator import itemgetter
from typing import Any

from ..errors import EvaluationError
from ..frontier import Row
from ..plan.aggregates import (
    FloatTotal,
    add_exact,
    add_float,
    aggregate,
    exact_mean,
    exact_to_value,
)
from ..plan.ordering import top_range
from ..plan.relation import AggFunc, Aggregate, TemporalFilter, TopK, Window
from ..plan.scalar import ScalarExpr
from ..plan.scalar_eval import compile_scalar
from ..plan.schema import ScalarType, Schema
from ..plan.temporal import compile_validity, temporal_updates
from ..plan.window import window_partition

__all__ = [
    "ConstantNode",
    "DistinctNode",
    "FilterClassesNode",
    "FilterNode",
    "JoinNode",
    "MapNode",
    "NegateNode",
    "Node",
    "PassNode",
    "ProjectNode",
    "ReduceNode",
    "SourceNode",
    "TemporalFilterNode",
    "TopKNode",
    "UnionNode",
    "WindowNode",
    "consolidate_pairs_fast",
    "equivalence_check",
    "join_key_casts",
    "key_function",
]

Changes = list[tuple[Any, int]]


def consolidate_pairs_fast(changes: Changes) -> dict[Any, int]:
    """Sum diffs per key, dropping zeros (unordered)."""
    acc: dict[Any, int] = {}
    for k, d in changes:
        acc[k] = acc.get(k, 0) + d
    return {k: d for k, d in acc.items() if d}


def key_function(
    key: tuple[int, ...], as_float: tuple[bool, ...] | None = None
) -> Callable[[Row], Row]:
    """A fast function extracting the ``key`` columns of a row as a tuple.

    ``as_float[j]`` converts the ``j``-th key column's non-NULL values to
    float: an int64 column joined with a float64 one is compared as float64,
    as SQL does (see :func:`join_key_casts`), so equal keys must be equal floats.
    """
    if as_float is not None and any(as_float):
        cols = tuple(zip(key, as_float, strict=True))

        def converted(row: Row) -> Row:
            out = []
            for i, conv in cols:
                v = row[i]
                out.append(float(v) if conv and v is not None else v)
            return tuple(out)

        return converted
    if not key:
        return lambda row: ()
    if len(key) == 1:
        (i,) = key
        return lambda row: (row[i],)
    getter: Callable[[Row], Row] = itemgetter(*key)
    return getter


def join_key_casts(
    schemas: tuple[Schema, Schema], keys: tuple[tuple[int, ...], tuple[int, ...]]
) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """For each side of a binary join, which of its key columns to compare as float64.

    A key pair of an int64 and a float64 column is compared as SQL compares
    them, the int64 converted to float64 (``2**62 + 1`` joins ``2.0**62``); pairs
    of one type are compared as they are. The result is ``as_float`` for
    :func:`key_function` of the left and of the right key.
    """
    ltypes = [schemas[0].columns[i].type.scalar for i in keys[0]]
    rtypes = [schemas[1].columns[i].type.scalar for i in keys[1]]
    left = tuple(
        a is ScalarType.INT64 and b is ScalarType.FLOAT64
        for a, b in zip(ltypes, rtypes, strict=True)
    )
    right = tuple(
        b is ScalarType.INT64 and a is ScalarType.FLOAT64
        for a, b in zip(ltypes, rtypes, strict=True)
    )
    return left, right


def _bump(state: dict[Any, int], key: Any, d: int) -> tuple[int, int]:
    """Add ``d`` to ``state[key]`` (dropping zeros); return (old, new)."""
    old = state.get(key, 0)
    new = old + d
    if new:
        state[key] = new
    else:
        state.pop(key, None)
    return old, new


class Node:
    """One operator instance. After :meth:`run`, ``out``/``errs`` hold its changes at that time."""

    __slots__ = ("errs", "inputs", "out")

    def __init__(self, inputs: list[Node]) -> None:
        self.inputs = inputs
        self.out: Changes = []
        self.errs: Changes = []

    def run(self, t: int) -> None:
        raise NotImplementedError

    def records(self) -> int:
        """The records of state this operator holds (what a memory limit weighs)."""
        return 0

    def _input_errs(self) -> Changes:
        if len(self.inputs) == 1:
            return self.inputs[0].errs
        errs: Changes = []
        for n in self.inputs:
            errs.extend(n.errs)
        return errs


class SourceNode(Node):
    """An input: its changes are set from outside before each time runs."""

    __slots__ = ("pending_errs", "pending_rows")

    def __init__(self) -> None:
        super().__init__([])
        self.pending_rows: dict[int, Changes] = {}
        self.pending_errs: dict[int, Changes] = {}

    def run(self, t: int) -> None:
        self.out = self.pending_rows.pop(t, [])
        self.errs = self.pending_errs.pop(t, [])

    def records(self) -> int:
        return sum(map(len, self.pending_rows.values()))


class ConstantNode(Node):
    __slots__ = ("as_of", "rows")

    def __init__(self, rows: Changes, as_of: int) -> None:
        super().__init__([])
        self.rows, self.as_of = rows, as_of

    def run(self, t: int) -> None:
        self.out = list(self.rows) if t == self.as_of else []


class PassNode(Node):
    """Identity (``ArrangeBy``, ``Let`` bodies): the executor's stateful nodes arrange their own inputs."""

    __slots__ = ()

    def run(self, t: int) -> None:
        self.out, self.errs = self.inputs[0].out, self.inputs[0].errs


class MapNode(Node):
    __slots__ = ("fns",)

    def __init__(self, inp: Node, exprs: tuple[ScalarExpr, ...]) -> None:
        super().__init__([inp])
        self.fns = [compile_scalar(e) for e in exprs]

    def run(self, t: int) -> None:
        out: Changes = []
        errs: Changes = list(self.inputs[0].errs)
        fns = self.fns
        for row, d in self.inputs[0].out:
            try:
                for f in fns:
                    row = (*row, f(row))
            except EvaluationError as e:
                errs.append((str(e), d))
                continue
            out.append((row, d))
        self.out, self.errs = out, errs


class FilterNode(Node):
    __slots__ = ("fns",)

    def __init__(self, inp: Node, predicates: tuple[ScalarExpr, ...]) -> None:
        super().__init__([inp])
        self.fns = [compile_scalar(e) for e in predicates]

    def run(self, t: int) -> None:
        out: Changes = []
        errs: Changes = list(self.inputs[0].errs)
        fns = self.fns
        for row, d in self.inputs[0].out:
            try:
                if all(f(row) is True for f in fns):
                    out.append((row, d))
            except EvaluationError as e:
                errs.append((str(e), d))
        self.out, self.errs = out, errs


class TemporalFilterNode(Node):
    """A temporal filter: each change at ``t`` goes out at the time its row enters the output
    (``t`` at the earliest) and comes back retracted at the time it leaves.

    Changes for later times wait in ``pending`` until that time runs; the executor
    runs every pending time before the inputs' frontier (:meth:`pending_times`), so
    the output's frontier is never held back and nothing is lost while the dataflow
    lives. A new dataflow over the same input recomputes the pending changes from it.
    """

    __slots__ = ("fresh", "pending", "validity")

    def __init__(self, inp: Node, plan: TemporalFilter) -> None:
        super().__init__([inp])
        self.validity = compile_validity(plan)
        self.pending: dict[int, Changes] = {}
        self.fresh: list[int] = []
        """Times that got waiting changes since :meth:`take_fresh` last ran."""

    def pending_times(self) -> list[int]:
        """The times at which changes wait."""
        return list(self.pending)

    def take_fresh(self) -> list[int]:
        """The times that got waiting changes since the last call."""
        fresh, self.fresh = self.fresh, []
        return fresh

    def run(self, t: int) -> None:
        out: Changes = self.pending.pop(t, [])
        errs: Changes = list(self.inputs[0].errs)
        validity, pending = self.validity, self.pending
        for row, d in self.inputs[0].out:
            try:
                interval = validity(row)
            except EvaluationError as e:
                errs.append((str(e), d))
                continue
            for at, diff in temporal_updates(interval, t, d):
                if at == t:
                    out.append((row, diff))
                elif at in pending:
                    pending[at].append((row, diff))
                else:
                    pending[at] = [(row, diff)]
                    self.fresh.append(at)
        self.out, self.errs = out, errs

    def records(self) -> int:
        return sum(map(len, self.pending.values()))


class ProjectNode(Node):
    __slots__ = ("columns",)

    def __init__(self, inp: Node, columns: tuple[int, ...]) -> None:
        super().__init__([inp])
        self.columns = columns

    def run(self, t: int) -> None:
        cols = self.columns
        self.out = [(tuple(row[i] for i in cols), d) for row, d in self.inputs[0].out]
        self.errs = self.inputs[0].errs


class NegateNode(Node):
    __slots__ = ()

    def run(self, t: int) -> None:
        self.out = [(row, -d) for row, d in self.inputs[0].out]
        self.errs = self.inputs[0].errs


class UnionNode(Node):
    __slots__ = ()

    def run(self, t: int) -> None:
        out: Changes = []
        for n in self.inputs:
            out.extend(n.out)
        self.out, self.errs = out, self._input_errs()


def equivalence_check(classes: list[tuple[int, ...]], schema: Schema) -> Callable[[Row], bool]:
    """Whether a row (of ``schema``) has every two columns of each class of positions equal.

    NULL never agrees. Columns are compared as SQL compares them: of one type
    exactly, an int64 with a float64 as float64. So a class mixing the two
    holds when its int64 columns are exactly equal, its float64 columns are
    equal, and the int64 value converted to float64 equals the float64 one
    (``(2**62 + 1, 2.0**62, 2**62)`` fails: its two int64s differ).
    """
    same: list[tuple[int, ...]] = []
    mixed: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for cls in classes:
        types = {i: schema.columns[i].type.scalar for i in cls}
        ints = tuple(i for i in cls if types[i] is ScalarType.INT64)
        floats = tuple(i for i in cls if types[i] is ScalarType.FLOAT64)
        if ints and floats:
            mixed.append((ints, floats))
        else:
            same.append(cls)

    def exact(row: Row, cls: tuple[int, ...]) -> Any:
        """The common value of ``cls``'s columns in ``row``, or ``None`` if they differ."""
        first = row[cls[0]]
        if first is None:
            return None
        for i in cls[1:]:
            v = row[i]
            if v is None or (v != first and v is not first):  # NaN (one object) equals itself
                return None
        return first

    def ok(row: Row) -> bool:
        for cls in same:
            first = row[cls[0]]
            if first is None:
                return False
            for i in cls[1:]:
                v = row[i]
                if v is None or (v != first and v is not first):
                    return False
        return True

    if not mixed:
        return ok

    def ok_mixed(row: Row) -> bool:
        if not ok(row):
            return False
        for ints, floats in mixed:
            i0, f0 = exact(row, ints), exact(row, floats)
            if i0 is None or f0 is None or float(i0) != f0:
                return False
        return True

    return ok_mixed


class JoinNode(Node):
    """A binary equi-join stage: both sides arranged by key; a left-deep cascade makes n-way joins.

    ``keys`` are column positions in the left/right rows (of ``schemas``), an
    int64 key meeting a float64 one arranged as float64; ``classes``
    (positions in the joined row) are re-checked on each output row.
    """

    __slots__ = ("check", "larr", "lkey", "rarr", "rkey")

    def __init__(
        self,
        left: Node,
        right: Node,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        classes: list[tuple[int, ...]],
    ) -> None:
        super().__init__([left, right])
        lcast, rcast = join_key_casts(schemas, keys)
        self.lkey = key_function(keys[0], lcast)
        self.rkey = key_function(keys[1], rcast)
        self.larr: dict[Row, dict[Row, int]] = {}
        self.rarr: dict[Row, dict[Row, int]] = {}
        self.check = equivalence_check(classes, schemas[0].concat(schemas[1]))

    @staticmethod
    def _arrange(changes: Changes, keyfn: Callable[[Row], Row]) -> dict[Row, dict[Row, int]]:
        out: dict[Row, dict[Row, int]] = {}
        for row, d in changes:
            k = keyfn(row)
            if None in k:
                continue  # a NULL key never joins
            group = out.setdefault(k, {})
            group[row] = group.get(row, 0) + d
        return out

    @staticmethod
    def _apply(arr: dict[Row, dict[Row, int]], delta: dict[Row, dict[Row, int]]) -> None:
        for k, rows in delta.items():
            group = arr.setdefault(k, {})
            for row, d in rows.items():
                _bump(group, row, d)
            if not group:
                del arr[k]

    def records(self) -> int:
        return sum(map(len, self.larr.values())) + sum(map(len, self.rarr.values()))

    def run(self, t: int) -> None:
        dl = self._arrange(self.inputs[0].out, self.lkey)
        dr = self._arrange(self.inputs[1].out, self.rkey)
        out: Changes = []
        check = self.check
        for k, lrows in dl.items():
            rrows = self.rarr.get(k)
            if rrows:
                for lrow, ld in lrows.items():
                    if ld:
                        for rrow, rc in rrows.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, ld * rc))
        self._apply(self.larr, dl)
        for k, rrows in dr.items():
            lgroup = self.larr.get(k)
            if lgroup:
                for rrow, rd in rrows.items():
                    if rd:
                        for lrow, lc in lgroup.items():
                            row = lrow + rrow
                            if check(row):
                                out.append((row, lc * rd))
        self._apply(self.rarr, dr)
        self.out, self.errs = out, self._input_errs()


class FilterClassesNode(Node):
    """The equivalence check of a one-input join (over rows of ``schema``)."""

    __slots__ = ("check",)

    def __init__(self, inp: Node, classes: list[tuple[int, ...]], schema: Schema) -> None:
        super().__init__([inp])
        self.check = equivalence_check(classes, schema)

    def run(self, t: int) -> None:
        check = self.check
        self.out = [(r, d) for r, d in self.inputs[0].out if check(r)]
        self.errs = self.inputs[0].errs


class DistinctNode(Node):
    """``Distinct`` (``threshold=False``) or ``Threshold`` (``True``) over per-row counts."""

    __slots__ = ("counts", "threshold")

    def __init__(self, inp: Node, threshold: bool) -> None:
        super().__init__([inp])
        self.counts: dict[Row, int] = {}
        self.threshold = threshold

    def records(self) -> int:
        return len(self.counts)

    def run(self, t: int) -> None:
        out: Changes = []
        thr = self.threshold
        for row, d in consolidate_pairs_fast(self.inputs[0].out).items():
            old, new = _bump(self.counts, row, d)
            if thr:
                change = (new if new > 0 else 0) - (old if old > 0 else 0)
            else:
                change = (new > 0) - (old > 0)
            if change:
                out.append((row, change))
        self.out, self.errs = out, self.inputs[0].errs


class _Group:
    """A Reduce group: its accumulated rows and running sums for the invertible aggregates."""

    __slots__ = ("counts", "output", "rows", "sums", "support")

    def __init__(self, n_inc: int) -> None:
        self.rows: dict[Row, int] = {}
        self.counts = [0] * n_inc
        self.sums: list[int | Fraction | FloatTotal] = [0] * n_inc
        self.support = [0] * n_inc
        self.output: Row | str | None = None
        """The group's output: its row, its error message (a sum out of range), or none."""


class ReduceNode(Node):
    """Group-by with aggregates. count/sum/avg (not distinct) are maintained as running sums;
    min/max and distinct aggregates are recomputed for the touched groups from their rows.
    A group whose sum is out of range outputs its error message instead of a row."""

    __slots__ = ("aggs", "groups", "inc", "inc_out", "key", "keyfn", "recompute")

    def __init__(
        self, inp: Node, schema: Schema, key: tuple[int, ...], aggs: tuple[Aggregate, ...]
    ) -> None:
        super().__init__([inp])
        self.key = key
        self.aggs = aggs
        # incremental aggregates: (agg position, column or None, is_float)
        self.keyfn = key_function(key)
        # (slot, column, is_float, summed, numeric)
        self.inc: list[tuple[int, int | None, bool, bool, bool]] = []
        # (slot, aggregate position, func, is_float, numeric)
        self.inc_out: list[tuple[int, int, AggFunc, bool, bool]] = []
        self.recompute: list[int] = []
        for i, a in enumerate(aggs):
            if not a.distinct and a.func in (AggFunc.COUNT, AggFunc.SUM, AggFunc.AVG):
                scalar = None if a.column is None else schema.columns[a.column].type.scalar
                is_float = scalar is ScalarType.FLOAT64
                numeric = scalar is ScalarType.NUMERIC
                summed = a.func is not AggFunc.COUNT
                self.inc.append((len(self.inc), a.column, is_float, summed, numeric))
                self.inc_out.append((len(self.inc_out), i, a.func, is_float, numeric))
            else:
                self.recompute.append(i)
        self.groups: dict[Row, _Group] = {}

    def records(self) -> int:
        return sum(len(g.rows) + 1 for g in self.groups.values())

    def run(self, t: int) -> None:
        keyfn, inc = self.keyfn, self.inc
        touched: dict[Row, _Group] = {}
        groups = self.groups
        n_inc = len(inc)
        for row, d in self.inputs[0].out:
            if not d:
                continue
            k = keyfn(row)
            g = groups.get(k)
            if g is None:
                g = groups[k] = _Group(n_inc)
            touched[k] = g
            rows = g.rows
            old = rows.get(row, 0)
            new = old + d
            if new:
                rows[row] = new
            else:
                del rows[row]
            if not n_inc:
                continue
            counts, sums, support = g.counts, g.sums, g.support
            for j, col, is_float, summed, numeric in inc:
                if col is None:
                    counts[j] += d
                    continue
                v = row[col]
                if v is None:
                    continue
                counts[j] += d
                if summed:
                    if is_float:
                        sums[j] = add_float(sums[j], v, d)
                    elif numeric:  # exactly, whatever the decimal context's precision
                        sums[j] = add_exact(sums[j], Fraction(v) * d)
                    else:
                        sums[j] += v * d
                if old == 0:
                    support[j] += 1
                elif new == 0:
                    support[j] -= 1
        out: Changes = []
        own_errs: Changes = []
        for k, g in touched.items():
            new_out: Row | str | None = None
            if g.rows:
                try:
                    new_out = self._output(k, g)
                except EvaluationError as e:  # a sum out of range: the group is one error
                    new_out = str(e)
            old_out = g.output
            if new_out != old_out:
                if old_out is not None:
                    (own_errs if type(old_out) is str else out).append((old_out, -1))
                if new_out is not None:
                    (own_errs if type(new_out) is str else out).append((new_out, 1))
                g.output = new_out
            if not g.rows:
                del groups[k]
        self.out = out
        self.errs = [*self.inputs[0].errs, *own_errs] if own_errs else self.inputs[0].errs

    def _output(self, k: Row, g: _Group) -> Row:
        """The group's row; raises :class:`EvaluationError` for a sum out of range."""
        vals: list[Any] = [None] * len(self.aggs)
        counts, sums, support = g.counts, g.sums, g.support
        for j, i, func, is_float, numeric in self.inc_out:
            if func is AggFunc.COUNT:
                vals[i] = counts[j]
            elif support[j] == 0:
                vals[i] = None
            elif func is AggFunc.SUM:
                vals[i] = exact_to_value(sums[j], is_float, numeric)
            else:
                vals[i] = None if counts[j] == 0 else exact_mean(sums[j], counts[j], numeric)
        for i in self.recompute:
            a = self.aggs[i]
            col = a.column
            pairs = [(r if col is None else r[col], c) for r, c in g.rows.items()]
            vals[i] = aggregate(a, pairs)
        return k + tuple(vals)


class TopKNode(Node):
    """Per group, the selected rows; touched groups are re-selected from their rows."""

    __slots__ = ("groups", "outputs", "plan")

    def __init__(self, inp: Node, plan: TopK) -> None:
        super().__init__([inp])
        self.plan = plan
        self.groups: dict[Row, dict[Row, int]] = {}
        self.outputs: dict[Row, dict[Row, int]] = {}

    def records(self) -> int:
        return sum(map(len, self.groups.values())) + sum(map(len, self.outputs.values()))

    def run(self, t: int) -> None:
        p = self.plan
        keyfn = key_function(p.group_key)
        touched: set[Row] = set()
        for row, d in self.inputs[0].out:
            k = keyfn(row)
            _bump(self.groups.setdefault(k, {}), row, d)
            touched.add(k)
        out: Changes = []
        for k in touched:
            rows = self.groups.get(k, {})
            new = dict(top_range(rows.items(), p.order_by, p.offset, p.limit))
            old = self.outputs.get(k, {})
            for r in old.keys() | new.keys():
                d = new.get(r, 0) - old.get(r, 0)
                if d:
                    out.append((r, d))
            if new:
                self.outputs[k] = new
            else:
                self.outputs.pop(k, None)
            if not rows:
                self.groups.pop(k, None)
        self.out, self.errs = out, self.inputs[0].errs


class WindowNode(Node):
    """Per partition, its rows with their window values; touched partitions are recomputed.

    A partition whose aggregate overflows outputs one error (its message) instead of rows.
    """

    __slots__ = ("outputs", "partitions", "plan")

    def __init__(self, inp: Node, plan: Window) -> None:
        super().__init__([inp])
        self.plan = plan
        self.partitions: dict[Row, dict[Row, int]] = {}
        self.outputs: dict[Row, dict[Row, int] | str] = {}

    def records(self) -> int:
        return sum(map(len, self.partitions.values())) + sum(
            len(o) if isinstance(o, dict) else 1 for o in self.outputs.values()
        )

    def run(self, t: int) -> None:
        keyfn = key_function(self.plan.partition_key)
        touched: set[Row] = set()
        for row, d in self.inputs[0].out:
            k = keyfn(row)
            _bump(self.partitions.setdefault(k, {}), row, d)
            touched.add(k)
        out: Changes = []
        own_errs: Changes = []
        for k in touched:
            rows = self.partitions.get(k, {})
            new: dict[Row, int] | str
            try:
                new = window_partition(rows.items(), self.plan)
            except EvaluationError as e:  # an aggregate out of range: the partition is one error
                new = str(e)
            old = self.outputs.get(k, {})
            if isinstance(old, str):
                own_errs.append((old, -1))
                old = {}
            if isinstance(new, str):
                own_errs.append((new, 1))
                out.extend((r, -c) for r, c in old.items())
            else:
                for r in old.keys() | new.keys():
                    d = new.get(r, 0) - old.get(r, 0)
                    if d:
                        out.append((r, d))
            if new:
                self.outputs[k] = new
            else:
                self.outputs.pop(k, None)
            if not rows:
                self.partitions.pop(k, None)
        self.out = out
        self.errs = [*self.inputs[0].errs, *own_errs] if own_errs else self.inputs[0].errs
