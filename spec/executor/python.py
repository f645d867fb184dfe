"""``PythonExecutor``: the pure-Python, incremental implementation of the executor contract.

Each dataflow compiles its (lowered) objects into a DAG of incremental
operators (:mod:`.operators`). A step processes, in increasing order, every
time below the meet of the inputs' uppers that has input changes, running the
operators in topological order; the dataflow's exports then report their
changes and the new upper. Index exports additionally keep their history
since the compaction frontier (:class:`~.index_history.IndexHistory`), so peeks
can read any time in ``[since, upper)``. The bookkeeping around the operators
is :class:`~.core.IntTimeExecutor`'s.

Times must be ``int``; other timestamp kinds raise :class:`UnsupportedTimestamp`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TypeAlias, cast

from ..frontier import Row, Update
from ..ids import GlobalId
from ..plan.relation import Reduce, TemporalFilter, TopK, Window
from ..plan.schema import Schema
from .compile import PlanCompiler, StatelessNodes
from .contract import ErrorUpdate
from .core import DataflowState, InputState, IntTimeExecutor, StepChanges
from .index_history import IndexHistory
from .int_frontiers import Frontier, consolidate_changes
from .operators import (
    ConstantNode,
    DistinctNode,
    FilterClassesNode,
    FilterNode,
    JoinNode,
    MapNode,
    NegateNode,
    Node,
    ProjectNode,
    ReduceNode,
    SourceNode,
    TemporalFilterNode,
    TopKNode,
    UnionNode,
    WindowNode,
)

__all__ = ["PythonExecutor"]

_Dataflow: TypeAlias = DataflowState[Node, IndexHistory]
_Input: TypeAlias = InputState[Node, IndexHistory]


_STATELESS: StatelessNodes[Node] = StatelessNodes(
    SourceNode, UnionNode, MapNode, FilterNode, ProjectNode, NegateNode, FilterClassesNode
)


class _Compiler(PlanCompiler[Node]):
    """Makes :mod:`.operators` nodes; constants appear at ``as_of``."""

    def __init__(self, as_of: int) -> None:
        super().__init__(_STATELESS)
        self.as_of = as_of

    def constant(self, rows: list[tuple[Row, int]]) -> Node:
        return ConstantNode(rows, self.as_of)

    def temporal_filter(self, inp: Node, plan: TemporalFilter) -> Node:
        return TemporalFilterNode(inp, plan)

    def distinct(self, inp: Node, schema: Schema, threshold: bool) -> Node:
        return DistinctNode(inp, threshold=threshold)

    def reduce(self, inp: Node, schema: Schema, plan: Reduce) -> Node:
        return ReduceNode(inp, schema, plan.group_key, plan.aggregates)

    def top_k(self, inp: Node, schema: Schema, plan: TopK) -> Node:
        return TopKNode(inp, plan)

    def window(self, inp: Node, schema: Schema, plan: Window) -> Node:
        return WindowNode(inp, plan)

    def join(
        self,
        left: Node,
        right: Node,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        checks: list[tuple[int, ...]],
    ) -> Node:
        return JoinNode(left, right, schemas, keys, checks)


class PythonExecutor(IntTimeExecutor[Node, IndexHistory]):
    """The reference incremental executor (see the module docstring and :class:`Executor`).

    ``check_rows`` validates every fed row against the imported schema.
    """

    executor_name = "PythonExecutor"

    def _compiler(self, as_of: int) -> _Compiler:
        return _Compiler(as_of)

    def _new_index(self, schema: Schema, key: tuple[int, ...]) -> IndexHistory:
        return IndexHistory(key)

    def _node_records(self, node: Node) -> int:
        return node.records()

    def _index_records(self, index: IndexHistory) -> int:
        return index.rows

    def _push(
        self, df: _Dataflow, inp: _Input, updates: Iterable[Update], errors: Iterable[ErrorUpdate]
    ) -> None:
        as_of = df.as_of if df.as_of is not None else 0
        node = cast(SourceNode, inp.node)
        pending = node.pending_rows
        for r, t, d in updates:
            pending.setdefault(t if t >= as_of else as_of, []).append((r, d))
        perrs = node.pending_errs
        for m, t, d in errors:
            perrs.setdefault(t if t >= as_of else as_of, []).append((m, d))

    def _run(self, df: _Dataflow, as_of: int, meet: Frontier, first: bool) -> StepChanges:
        """Run the nodes once per queued time before ``meet``, in increasing order.

        A temporal filter's changes waiting for a time are queued there too, including
        those it schedules while this step runs."""
        sources = [cast(SourceNode, inp.node) for inp in df.inputs.values()]
        temporal = [n for n in df.nodes if isinstance(n, TemporalFilterNode)]
        times: set[int] = set()
        for node in sources:
            for pending in (node.pending_rows, node.pending_errs):
                times.update(t for t in pending if meet is None or t < meet)
        for tnode in temporal:
            tnode.take_fresh()
            times.update(t for t in tnode.pending_times() if meet is None or t < meet)
        if first:
            times.add(as_of)
        until = df.until
        out: dict[GlobalId, list[Update]] = {eid: [] for eid in df.exports}
        errs: dict[GlobalId, list[ErrorUpdate]] = {eid: [] for eid in df.exports}
        queue = sorted(times)
        heapq.heapify(queue)
        while queue:
            t = heapq.heappop(queue)
            while queue and queue[0] == t:
                heapq.heappop(queue)
            if until is not None and t >= until:
                for node in sources:
                    node.pending_rows.pop(t, None)
                    node.pending_errs.pop(t, None)
                for tnode in temporal:
                    tnode.pending.pop(t, None)
                continue
            for op in df.nodes:
                op.run(t)
            for tnode in temporal:  # changes it scheduled for later times of this step
                for later in tnode.take_fresh():
                    if later > t and (meet is None or later < meet) and later not in times:
                        times.add(later)
                        heapq.heappush(queue, later)
            for eid, ex in df.exports.items():
                if ex.emits(t, as_of):
                    out[eid].extend((r, t, d) for r, d in ex.node.out)
                    errs[eid].extend((m, t, d) for m, d in ex.node.errs)
        return {
            eid: (consolidate_changes(out[eid]), consolidate_changes(errs[eid]))
            for eid in df.exports
        }
