"""``SparkExecutor``: the executor contract with operator state in Apache Spark.

Each installed dataflow compiles its lowered objects into a DAG of
:mod:`.operators`. A step takes, per dataflow, every input change at a time
below the meet of the inputs' uppers and runs the DAG once over all of them:
stateless operators transform the change as it passes, stateful ones look up
the keys it touches in their Spark arrangements (one job each), replay it in
time order, and append it to the arrangement. Index exports keep their output
in an :class:`~._index_output.IndexOutput`: in the driver while the index holds at
most ``index_memory_rows`` rows (a peek is then never a Spark job), in Spark
after (a peek is then one Spark job, and the driver holds no copy); a large
history moves there in the background while the driver's copy goes on serving.

Validation (dataflows, fed rows and frontiers, compaction, peeks) is the
spec's, with the same typed errors as :class:`~tidegate.spec.executor.PythonExecutor`,
and happens before any state changes. Times must be ``int``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias, cast

from pyspark.sql import SparkSession

from tidegate.runtime.heap import gc_paused
from tidegate.spec.errors import ExecutorError, UnknownExport
from tidegate.spec.executor import DataflowHandle, ErrorUpdate, ExportBatch
from tidegate.spec.executor.compile import PlanCompiler, StatelessNodes
from tidegate.spec.executor.core import DataflowState, InputState, IntTimeExecutor, StepChanges
from tidegate.spec.executor.int_frontiers import Frontier, consolidate_changes
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Reduce, TemporalFilter, TopK, Window
from tidegate.spec.plan.schema import Schema

from . import operators as ops
from ._fingerprint import Fingerprinter
from ._index_output import DEFAULT_INDEX_MEMORY_ROWS, IndexOutput, IndexStatus
from .arrangement import DEFAULT_STATE_MEMORY_ROWS
from .index_history import SparkIndexHistory
from .phases import PHASES
from .session import spark_session

__all__ = ["SparkExecutor"]

_Dataflow: TypeAlias = DataflowState[ops.Node, IndexOutput]
_Input: TypeAlias = InputState[ops.Node, IndexOutput]


_STATELESS: StatelessNodes[ops.Node] = StatelessNodes(
    ops.SourceNode,
    ops.UnionNode,
    ops.MapNode,
    ops.FilterNode,
    ops.ProjectNode,
    ops.NegateNode,
    ops.FilterClassesNode,
)


class _Compiler(PlanCompiler[ops.Node]):
    """Makes :mod:`.operators` nodes, their state in ``spark``."""

    def __init__(
        self, spark: SparkSession, fingerprint: Fingerprinter, state_memory_rows: int | None
    ) -> None:
        super().__init__(_STATELESS)
        self.spark = spark
        self.fingerprint = fingerprint
        self.state_memory_rows = state_memory_rows

    def _kept(self, node: ops.StatefulNode) -> ops.Node:
        """``node``, its arrangements kept in the driver up to ``state_memory_rows`` entries."""
        for a in node.arrangements:
            a.keep_in_driver(self.state_memory_rows)
        return node

    def constant(self, rows: list[tuple[Row, int]]) -> ops.Node:
        return ops.ConstantNode(rows)

    def temporal_filter(self, inp: ops.Node, plan: TemporalFilter) -> ops.Node:
        return ops.TemporalFilterNode(inp, plan)

    def distinct(self, inp: ops.Node, schema: Schema, threshold: bool) -> ops.Node:
        return self._kept(ops.DistinctNode(self.spark, inp, schema, threshold))

    def reduce(self, inp: ops.Node, schema: Schema, plan: Reduce) -> ops.Node:
        if ops.AccumulatingReduceNode.supports(schema, plan.aggregates):
            return self._kept(
                ops.AccumulatingReduceNode(
                    self.spark, inp, schema, plan.group_key, plan.aggregates, self.fingerprint
                )
            )
        return self._kept(ops.ReduceNode(self.spark, inp, schema, plan.group_key, plan.aggregates))

    def top_k(self, inp: ops.Node, schema: Schema, plan: TopK) -> ops.Node:
        return self._kept(ops.TopKNode(self.spark, inp, schema, plan))

    def window(self, inp: ops.Node, schema: Schema, plan: Window) -> ops.Node:
        return self._kept(ops.WindowNode(self.spark, inp, schema, plan))

    def join(
        self,
        left: ops.Node,
        right: ops.Node,
        schemas: tuple[Schema, Schema],
        keys: tuple[tuple[int, ...], tuple[int, ...]],
        checks: list[tuple[int, ...]],
    ) -> ops.Node:
        return self._kept(ops.JoinNode(self.spark, left, right, schemas, keys, checks))


class SparkExecutor(IntTimeExecutor[ops.Node, IndexOutput]):
    """The executor contract (:class:`~tidegate.spec.executor.Executor`) on Spark.

    ``spark`` is the session to use (by default :func:`.session.spark_session`
    on ``master``). ``check_rows`` validates every fed row against the
    imported schema. An index with more than ``index_memory_rows`` distinct
    rows keeps its history in Spark instead of the driver (``None``: never).
    Likewise each stateful operator's arrangement is kept in the driver as Arrow
    tables while it holds at most ``state_memory_rows`` entries (a step over it
    runs no Spark job), then moves into Spark in the background (``0``: in Spark
    from the start; ``None``: never). The bookkeeping around the operators is
    :class:`~tidegate.spec.executor.IntTimeExecutor`'s.
    """

    executor_name = "SparkExecutor"

    def __init__(
        self,
        spark: SparkSession | None = None,
        *,
        master: str = "local[2]",
        check_rows: bool = True,
        index_memory_rows: int | None = DEFAULT_INDEX_MEMORY_ROWS,
        state_memory_rows: int | None = DEFAULT_STATE_MEMORY_ROWS,
    ) -> None:
        for name, rows in (
            ("index_memory_rows", index_memory_rows),
            ("state_memory_rows", state_memory_rows),
        ):
            if rows is not None and (type(rows) is not int or rows < 0):
                raise ExecutorError(f"{name} must be an int >= 0 or None, got {rows!r}")
        super().__init__(check_rows=check_rows)
        self.spark = spark if spark is not None else spark_session(master)
        self.index_memory_rows = index_memory_rows
        self.state_memory_rows = state_memory_rows
        self._fingerprint = Fingerprinter()

    # -- the IntTimeExecutor hooks ----------------------------------------------------------

    def _compiler(self, as_of: int) -> _Compiler:
        return _Compiler(self.spark, self._fingerprint, self.state_memory_rows)

    def _new_index(self, schema: Schema, key: tuple[int, ...]) -> IndexOutput:
        return IndexOutput(
            key,
            lambda: SparkIndexHistory(self.spark, schema, key),
            self.index_memory_rows,
            spark=self.spark,
        )

    def _close_index(self, index: IndexOutput) -> None:
        index.close()

    def _node_records(self, node: ops.Node) -> int:
        if isinstance(node, ops.StatefulNode):
            return sum(a.size_bound for a in node.arrangements)
        if isinstance(node, ops.SourceNode | ops.TemporalFilterNode):
            return len(node.pending)
        return 0

    def _index_records(self, index: IndexOutput) -> int:
        return index.records()

    def _release_nodes(self, nodes: list[ops.Node]) -> None:
        for node in nodes:
            if isinstance(node, ops.StatefulNode):
                node.clear()

    def _push(
        self, df: _Dataflow, inp: _Input, updates: Iterable[Update], errors: Iterable[ErrorUpdate]
    ) -> None:
        as_of = df.as_of if df.as_of is not None else 0
        node = cast(ops.SourceNode, inp.node)
        node.pending.extend((r, t if t >= as_of else as_of, d) for r, t, d in updates)
        node.pending_errs.extend((m, t if t >= as_of else as_of, d) for m, t, d in errors)

    def _run(self, df: _Dataflow, as_of: int, meet: Frontier, first: bool) -> StepChanges:
        """Run every node once over all the queued changes before ``meet``."""
        until = df.until

        def ready(t: int) -> bool:
            return meet is None or t < meet

        def live(t: int) -> bool:
            return until is None or t < until

        for inp in df.inputs.values():
            source = cast(ops.SourceNode, inp.node)
            now = [u for u in source.pending if ready(u[1])]
            source.pending = [u for u in source.pending if not ready(u[1])]
            errs = [e for e in source.pending_errs if ready(e[1])]
            source.pending_errs = [e for e in source.pending_errs if not ready(e[1])]
            source.out = [u for u in now if live(u[1])]
            source.errs = [e for e in errs if live(e[1])]
        first_time = as_of if first and live(as_of) else None
        for node in df.nodes:
            if isinstance(node, ops.TemporalFilterNode):
                node.bound(meet, until)
        for node in df.nodes:
            with PHASES("node." + type(node).__name__):
                node.run(first_time)
        changes: dict[GlobalId, tuple[tuple[Update, ...], tuple[ErrorUpdate, ...]]] = {}
        for eid, ex in df.exports.items():
            with PHASES("export.consolidate"):
                out = ex.node.out
                if ex.node.consolidated:
                    ups = (
                        tuple(out)
                        if ex.emits_all_before(meet)
                        else tuple(u for u in out if ex.emits(u[1], as_of))
                    )
                else:
                    ups = consolidate_changes(u for u in out if ex.emits(u[1], as_of))
                es = consolidate_changes(e for e in ex.node.errs if ex.emits(e[1], as_of))
            changes[eid] = (ups, es)
        for node in df.nodes:
            node.out, node.errs = [], []
        return changes

    # -- Spark's own ------------------------------------------------------------------------

    def feed(
        self,
        handle: DataflowHandle,
        input_id: GlobalId,
        updates: Iterable[Update],
        upper: Antichain,
    ) -> None:
        """Give source import ``input_id`` of ``handle`` new updates and its new upper (with
        Python's cyclic collector paused: see :mod:`tidegate.runtime.heap`)."""
        with gc_paused():
            super().feed(handle, input_id, updates, upper)

    def step(self) -> list[ExportBatch]:
        """Process all completed times; one batch per export whose contents or upper changed
        (with Python's cyclic collector paused: see :mod:`tidegate.runtime.heap`)."""
        with PHASES("step"), gc_paused():
            return super().step()

    def drop(self, handle: DataflowHandle) -> None:
        """Remove a dataflow, its exports and its Spark state."""
        df = self._dataflow(handle)
        super().drop(handle)
        self._release_nodes(df.nodes)

    def index_in_spark(self, export_id: GlobalId) -> bool:
        """Whether index ``export_id`` outgrew ``index_memory_rows`` and keeps its history in Spark."""
        output = self._export(export_id)[1].index
        if output is None:
            raise UnknownExport(f"{export_id} is not an index")
        return output.in_spark

    def index_status(self) -> dict[GlobalId, IndexStatus]:
        """Each index export's :class:`IndexStatus` (driver, moving or Spark; failures)."""
        return {
            eid: ex.index.status()
            for df in self._dataflows.values()
            for eid, ex in df.exports.items()
            if ex.index is not None
        }

    def wait_for_index_moves(self) -> None:
        """Wait until every index moving to Spark in the background has moved (or failed to:
        then it stays in the driver and the move is tried again later)."""
        for df in self._dataflows.values():
            for ex in df.exports.values():
                if ex.index is not None:
                    ex.index.settle()

    def state_in_spark(self) -> dict[DataflowHandle, bool]:
        """Per dataflow, whether any of its operators' state has moved (or is moving) into
        Spark; ``False`` for a dataflow whose state is all in the driver."""
        return {
            h: any(
                a.in_spark
                for n in df.nodes
                if isinstance(n, ops.StatefulNode)
                for a in n.arrangements
            )
            for h, df in self._dataflows.items()
        }

    def wait_for_state_moves(self) -> None:
        """Wait until the background work of every operator's state (merges, moves into
        Spark) has finished (for tests and benchmarks)."""
        for df in self._dataflows.values():
            for n in df.nodes:
                if isinstance(n, ops.StatefulNode):
                    for a in n.arrangements:
                        a.settle()

    def spark_jobs(self) -> int:
        """Spark jobs run so far for state lookups (for tests and benchmarks)."""
        return sum(
            n.state_jobs()
            for df in self._dataflows.values()
            for n in df.nodes
            if isinstance(n, ops.StatefulNode)
        )
