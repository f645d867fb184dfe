"""``PlanCompiler``: lowered plans to an executor's operator nodes.

What is the same for every executor lives here: ``Get``s, objects and ``Let``
values are shared nodes, ``ArrangeBy`` is the identity (stateful operators
arrange their own inputs), constants are consolidated, and an n-way join
becomes a left-deep chain of binary joins on the equivalence classes that
span both sides, each checking the classes it completes. The nodes themselves
come from the executor: the stateless ones from a :class:`StatelessNodes`
table of constructors, the others from the subclass's factory methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import InvalidPlan
from ..frontier import Row
from ..ids import GlobalId
from ..plan.relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Let,
    LetRef,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    TemporalFilter,
    Threshold,
    TopK,
    Union,
    Window,
)
from ..plan.scalar import ScalarExpr
from ..plan.schema import Schema
from ..plan.typecheck import typecheck

__all__ = ["PlanCompiler", "StatelessNodes"]

N = TypeVar("N")
"""The executor's operator node type."""


@dataclass(frozen=True, slots=True)
class StatelessNodes(Generic[N]):
    """An executor's constructors of the nodes that need nothing but their inputs and the plan."""

    source: Callable[[], N]
    """An input's node; the executor sets its changes."""
    union: Callable[[list[N]], N]
    map: Callable[[N, tuple[ScalarExpr, ...]], N]
    filter: Callable[[N, tuple[ScalarExpr, ...]], N]
    project: Callable[[N, tuple[int, ...]], N]
    negate: Callable[[list[N]], N]
    filter_classes: Callable[[N, list[tuple[int, ...]], Schema], N]
    """A one-input join: keeps the rows (of the schema) whose columns agree within each class."""


class PlanCompiler(ABC, Generic[N]):
    """Compiles one dataflow's lowered plans into ``nodes`` (in a runnable order).

    ``by_id`` maps each import and compiled object to its node; the executor
    fills it with its inputs' source nodes (``stateless.source``) before
    compiling objects.
    """

    def __init__(self, stateless: StatelessNodes[N]) -> None:
        self.stateless = stateless
        self.nodes: list[N] = []
        self.by_id: dict[GlobalId, N] = {}

    def add(self, node: N) -> N:
        """Append ``node`` to the dataflow's nodes (after those it reads) and return it."""
        self.nodes.append(node)
        return node

    def compile(self, plan: Plan, lets: Mapping[str, tuple[N, Schema]]) -> N:
        """The node computing ``plan``, with ``lets`` the ``Let`` values in scope."""
        if isinstance(plan, Get):
            return self.by_id[plan.id]
        if isinstance(plan, Constant):
            consolidated: dict[Row, int] = {}
            for r, c in plan.rows:
                consolidated[r] = consolidated.get(r, 0) + c
            return self.add(self.constant([(r, c) for r, c in consolidated.items() if c]))
        if isinstance(plan, LetRef):
            return lets[plan.name][0]
        schemas = {n: s for n, (_, s) in lets.items()}
        if isinstance(plan, Let):
            value = self.compile(plan.value, lets)
            schema = typecheck(plan.value, None, schemas)
            return self.compile(plan.body, {**lets, plan.name: (value, schema)})
        if isinstance(plan, Union):
            return self.add(self.stateless.union([self.compile(p, lets) for p in plan.inputs]))
        if isinstance(plan, Join):
            return self._join(plan, lets, schemas)
        inp = self.compile(plan.input, lets)
        kinds = self.stateless
        if isinstance(plan, Map):
            return self.add(kinds.map(inp, plan.exprs))
        if isinstance(plan, Filter):
            return self.add(kinds.filter(inp, plan.predicates))
        if isinstance(plan, Project):
            return self.add(kinds.project(inp, plan.columns))
        if isinstance(plan, Negate):
            return self.add(kinds.negate([inp]))
        if isinstance(plan, ArrangeBy):
            return inp
        if isinstance(plan, TemporalFilter):
            return self.add(self.temporal_filter(inp, plan))
        schema = typecheck(plan.input, None, schemas)
        if isinstance(plan, Distinct | Threshold):
            return self.add(self.distinct(inp, schema, isinstance(plan, Threshold)))
        if isinstance(plan, Reduce):
            return self.add(self.reduce(inp, schema, plan))
        if isinstance(plan, TopK):
            return self.add(self.top_k(inp, schema, plan))
        if isinstance(plan, Window):
            return self.add(self.window(inp, schema, plan))
        raise InvalidPlan(f"not a plan: {plan!r}")

    def _join(
        self, plan: Join, lets: Mapping[str, tuple[N, Schema]], schemas: Mapping[str, Schema]
    ) -> N:
        parts = [typecheck(p, None, schemas) for p in plan.inputs]
        nodes = [self.compile(p, lets) for p in plan.inputs]
        classes = [tuple(c) for c in plan.equivalences]
        if len(nodes) == 1:
            if not classes:
                return nodes[0]
            return self.add(self.stateless.filter_classes(nodes[0], classes, parts[0]))
        left, left_schema = nodes[0], parts[0]
        for node, schema in zip(nodes[1:], parts[1:], strict=True):
            offset = left_schema.arity
            avail = offset + schema.arity
            lkey: list[int] = []
            rkey: list[int] = []
            for cls in classes:
                ls = [i for i in cls if i < offset]
                rs = [i - offset for i in cls if offset <= i < avail]
                if ls and rs:
                    lkey.append(ls[0])
                    rkey.append(rs[0])
            checks = [sub for cls in classes if (sub := tuple(i for i in cls if i < avail))]
            left = self.add(
                self.join(left, node, (left_schema, schema), (tuple(lkey), tuple(rkey)), checks)
            )
            left_schema = left_schema.concat(schema)
        return left

    # -- the executor's nodes ------------------------------------------------------------------

    @abstractmethod
    def constant(self, rows: list[tuple[Row, int]]) -> N:
        """Consolidated ``rows`` (with their counts) at the as_of."""

    @abstractmethod
    def temporal_filter(self, inp: N, plan: TemporalFilter) -> N:
        """``plan``'s temporal filter of ``inp``: each update moved to the times its row enters
        and leaves the output (future ones held until the inputs' frontier passes them)."""

    @abstractmethod
    def distinct(self, inp: N, schema: Schema, threshold: bool) -> N:
        """``Distinct`` (``threshold=False``) or ``Threshold`` of ``inp`` (of ``schema``)."""

    @abstractmethod
    def reduce(self, inp: N, schema: Schema, plan: Reduce) -> N:
        """``plan``'s grouping and aggregates over ``inp`` (of ``schema``)."""

    @abstractmethod
    def top_k(self, inp: N, schema: Schema, plan: TopK) -> N:
        """``plan``'s per-group ordered selection over ``inp`` (of ``schema``)."""

    @abstractmethod
    def window(self, inp: N, schema: Schema, plan: Window) -> N:
        """``plan``'s window functions over ``inp`` (of ``schema``), per partition."""

    @abstractmethod
    def join(
        self,
        left: N,
        right: N,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        checks: list[tuple[int, ...]],
    ) -> N:
        """Equi-join on ``keys`` (columns of each side); ``checks`` are the classes to hold on the output."""
