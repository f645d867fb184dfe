"""The stateless operators: each transforms the step's change as it passes, keeping nothing.

Scalar expressions are compiled once with the spec's ``compile_scalar``, so
a row evaluates here exactly as in the reference executor; an evaluation
error becomes an error change at the row's time and diff.
"""

from __future__ import annotations

from tidegate.spec.errors import EvaluationError
from tidegate.spec.executor.operators import equivalence_check
from tidegate.spec.frontier import Row
from tidegate.spec.plan.relation import TemporalFilter
from tidegate.spec.plan.scalar import ScalarExpr
from tidegate.spec.plan.scalar_eval import compile_scalar
from tidegate.spec.plan.schema import Schema
from tidegate.spec.plan.temporal import compile_validity, temporal_updates

from ._base import Changes, Node

__all__ = [
    "ConstantNode",
    "FilterClassesNode",
    "FilterNode",
    "MapNode",
    "NegateNode",
    "ProjectNode",
    "SourceNode",
    "TemporalFilterNode",
    "UnionNode",
]


class SourceNode(Node):
    """An input: its changes for the step are set from outside."""

    def __init__(self) -> None:
        super().__init__([])
        self.pending: Changes = []
        self.pending_errs: Changes = []

    def run(self, first_time: int | None) -> None:
        pass  # the executor sets out/errs


class ConstantNode(Node):
    """Its rows at the as_of, in the step that includes it; no change after."""

    def __init__(self, rows: list[tuple[Row, int]]) -> None:
        super().__init__([])
        self.rows = rows

    def run(self, first_time: int | None) -> None:
        self.out = [] if first_time is None else [(r, first_time, c) for r, c in self.rows]


class MapNode(Node):
    """Appends one column per expression, each seeing the columns before it."""

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
    """Keeps the rows for which every predicate is true (not NULL, not false)."""

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


class TemporalFilterNode(Node):
    """A temporal filter: each change goes out at the time its row enters the output (its own
    time at the earliest) and comes back retracted at the time it leaves.

    Changes at or past the step's frontier wait in ``pending`` (in the driver) and go out in
    the step whose frontier passes them, so the output's frontier is never held back;
    those at or past the dataflow's ``until`` are dropped. The executor sets both
    frontiers (:meth:`bound`) before each step. A new dataflow over the same input
    recomputes the pending changes from it.
    """

    def __init__(self, inp: Node, plan: TemporalFilter) -> None:
        super().__init__([inp])
        self.validity = compile_validity(plan)
        self.pending: Changes = []
        self._frontier: int | None = None
        self._until: int | None = None

    def bound(self, frontier: int | None, until: int | None) -> None:
        """This step completes every time before ``frontier`` (``None``: all); the dataflow
        keeps no time at or past ``until``."""
        self._frontier, self._until = frontier, until

    def run(self, first_time: int | None) -> None:
        frontier, until = self._frontier, self._until
        errs = self._input_errs()
        moved: Changes = self.pending
        validity = self.validity
        for row, t, d in self.inputs[0].out:
            try:
                interval = validity(row)
            except EvaluationError as e:
                errs.append((str(e), t, d))
                continue
            moved.extend((row, at, diff) for at, diff in temporal_updates(interval, t, d))
        out: Changes = []
        pending: Changes = []
        for u in moved:
            at = u[1]
            if until is not None and at >= until:
                continue
            if frontier is None or at < frontier:
                out.append(u)
            else:
                pending.append(u)
        self.pending = pending
        self.out, self.errs = out, errs


class ProjectNode(Node):
    """Keeps ``columns``, in that order (repeats allowed)."""

    def __init__(self, inp: Node, columns: tuple[int, ...]) -> None:
        super().__init__([inp])
        self.columns = columns

    def run(self, first_time: int | None) -> None:
        cols = self.columns
        self.out = [(tuple(row[i] for i in cols), t, d) for row, t, d in self.inputs[0].out]
        self.errs = self._input_errs()


class NegateNode(Node):
    """Every diff negated."""

    def run(self, first_time: int | None) -> None:
        self.out = [(row, t, -d) for row, t, d in self.inputs[0].out]
        self.errs = self._input_errs()


class UnionNode(Node):
    """The inputs' changes together (not consolidated)."""

    def run(self, first_time: int | None) -> None:
        out: Changes = []
        for n in self.inputs:
            out.extend(n.out)
        self.out, self.errs = out, self._input_errs()


class FilterClassesNode(Node):
    """The equivalence check of a one-input join (over rows of ``schema``)."""

    def __init__(self, inp: Node, classes: list[tuple[int, ...]], schema: Schema) -> None:
        super().__init__([inp])
        self.check = equivalence_check(classes, schema)

    def run(self, first_time: int | None) -> None:
        check = self.check
        self.out = [(r, t, d) for r, t, d in self.inputs[0].out if check(r)]
        self.errs = self._input_errs()
