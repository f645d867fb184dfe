"""``SparkExecutor``: the executor contract with operator state in Apache Spark.

Each installed dataflow compiles its lowered objects into a DAG of
:mod:`.operators`. A step takes, per dataflow, every input change at a time
below the meet of the inputs' uppers and runs the DAG once over all of them:
stateless operators transform the change as it passes, stateful ones look up
the keys it touches in their Spark arrangements (one job each), replay it in
time order, and append it to the arrangement. Index exports keep their output
in an :class:`~.index_output.IndexOutput`: in the driver while the index holds at
most ``index_memory_rows`` rows (a peek is then never a Spark job), in Spark
after (a peek is then one Spark job, and the driver holds no copy).

Validation (dataflows, fed rows and frontiers, compaction, peeks) is the
spec's, with the same typed errors as :class:`~tidegate.spec.executor.PythonExecutor`,
and happens before any state changes. Times must be ``int``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from tidegate.spec.errors import (
    CompactionRegression,
    ExecutorError,
    InvalidPlan,
    UnknownExport,
)
from tidegate.spec.executor import DataflowHandle, ErrorUpdate, ExportBatch
from tidegate.spec.executor.int_frontiers import (
    Frontier,
    check_feed,
    check_index_peek,
    check_install,
    consolidate_changes,
    frontier_le,
    to_antichain,
    to_frontier,
)
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.lower import lower
from tidegate.spec.plan.ordering import peek_result
from tidegate.spec.plan.relation import (
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
    Threshold,
    TopK,
    Union,
)
from tidegate.spec.plan.schema import Schema
from tidegate.spec.plan.typecheck import object_order, typecheck
from tidegate.spec.protocol.responses import PeekResult
from tidegate.spec.protocol.types import DataflowDescription, RowSetFinishing

from .fingerprint import Fingerprinter
from .index_history import SparkIndexHistory
from .index_output import DEFAULT_INDEX_MEMORY_ROWS, IndexOutput
from .operators import (
    AccumulatingReduceNode,
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
    StatefulNode,
    TopKNode,
    UnionNode,
)
from .phases import PHASES
from .session import spark_session

__all__ = ["SparkExecutor"]


@dataclass
class _Export:
    id: GlobalId
    node: Node
    since: Frontier
    upper: Frontier
    output: IndexOutput | None = None  # index exports only
    arity: int = 0
    with_snapshot: bool = True
    up_to: Frontier = None
    importers: list[tuple[_Dataflow, _Input]] = field(default_factory=list)


@dataclass
class _Input:
    id: GlobalId
    node: SourceNode
    schema: Schema | None
    upper: Frontier = 0
    index_of: _Export | None = None  # set for index imports
    pending: list[Update] = field(default_factory=list)
    pending_errs: list[ErrorUpdate] = field(default_factory=list)


@dataclass
class _Dataflow:
    handle: DataflowHandle
    desc: DataflowDescription
    as_of: int
    until: Frontier
    processed: Frontier
    inputs: dict[GlobalId, _Input]
    nodes: list[Node]
    exports: dict[GlobalId, _Export]
    started: bool = False


class _Compiler:
    """Turns lowered plans into nodes, sharing ``Get``s, objects and ``Let`` values."""

    def __init__(self, spark: SparkSession, fingerprint: Fingerprinter) -> None:
        self.spark = spark
        self.fingerprint = fingerprint
        self.nodes: list[Node] = []
        self.by_id: dict[GlobalId, Node] = {}

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def compile(self, plan: Plan, lets: Mapping[str, tuple[Node, Schema]]) -> Node:
        schemas = {n: s for n, (_, s) in lets.items()}
        if isinstance(plan, Get):
            return self.by_id[plan.id]
        if isinstance(plan, Constant):
            consolidated: dict[Row, int] = {}
            for r, c in plan.rows:
                consolidated[r] = consolidated.get(r, 0) + c
            return self.add(ConstantNode([(r, c) for r, c in consolidated.items() if c]))
        if isinstance(plan, LetRef):
            return lets[plan.name][0]
        if isinstance(plan, Let):
            value = self.compile(plan.value, lets)
            schema = typecheck(plan.value, None, schemas)
            return self.compile(plan.body, {**lets, plan.name: (value, schema)})
        if isinstance(plan, Union):
            return self.add(UnionNode([self.compile(p, lets) for p in plan.inputs]))
        if isinstance(plan, Join):
            return self._join(plan, lets)
        inp = self.compile(plan.input, lets)
        if isinstance(plan, Map):
            return self.add(MapNode(inp, plan.exprs))
        if isinstance(plan, Filter):
            return self.add(FilterNode(inp, plan.predicates))
        if isinstance(plan, Project):
            return self.add(ProjectNode(inp, plan.columns))
        if isinstance(plan, Negate):
            return self.add(NegateNode([inp]))
        if isinstance(plan, ArrangeBy):
            return inp
        schema = typecheck(plan.input, None, schemas)
        if isinstance(plan, Distinct | Threshold):
            return self.add(DistinctNode(self.spark, inp, schema, isinstance(plan, Threshold)))
        if isinstance(plan, Reduce):
            if AccumulatingReduceNode.supports(schema, plan.aggregates):
                return self.add(
                    AccumulatingReduceNode(
                        self.spark, inp, schema, plan.group_key, plan.aggregates, self.fingerprint
                    )
                )
            return self.add(ReduceNode(self.spark, inp, schema, plan.group_key, plan.aggregates))
        if isinstance(plan, TopK):
            return self.add(TopKNode(self.spark, inp, schema, plan))
        raise InvalidPlan(f"not a plan: {plan!r}")

    def _join(self, plan: Join, lets: Mapping[str, tuple[Node, Schema]]) -> Node:
        schemas = {n: s for n, (_, s) in lets.items()}
        parts = [typecheck(p, None, schemas) for p in plan.inputs]
        nodes = [self.compile(p, lets) for p in plan.inputs]
        classes = [tuple(c) for c in plan.equivalences]
        if len(nodes) == 1:
            return self.add(FilterClassesNode(nodes[0], classes)) if classes else nodes[0]
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
                JoinNode(
                    self.spark,
                    left,
                    node,
                    (left_schema, schema),
                    (tuple(lkey), tuple(rkey)),
                    checks,
                )
            )
            left_schema = left_schema.concat(schema)
        return left


class SparkExecutor:
    """The executor contract (:class:`~tidegate.spec.executor.Executor`) on Spark.

    ``spark`` is the session to use (by default :func:`.session.spark_session`
    on ``master``). ``check_rows`` validates every fed row against the
    imported schema. An index with more than ``index_memory_rows`` distinct
    rows keeps its history in Spark instead of the driver (``None``: never).
    """

    def __init__(
        self,
        spark: SparkSession | None = None,
        *,
        master: str = "local[2]",
        check_rows: bool = True,
        index_memory_rows: int | None = DEFAULT_INDEX_MEMORY_ROWS,
    ) -> None:
        if index_memory_rows is not None and (
            type(index_memory_rows) is not int or index_memory_rows < 0
        ):
            raise ExecutorError(
                f"index_memory_rows must be an int >= 0 or None, got {index_memory_rows!r}"
            )
        self.spark = spark if spark is not None else spark_session(master)
        self._check_rows = check_rows
        self.index_memory_rows = index_memory_rows
        self._fingerprint = Fingerprinter()
        self._dataflows: dict[DataflowHandle, _Dataflow] = {}
        self._exports: dict[GlobalId, tuple[_Dataflow, _Export]] = {}
        self._next_handle = 0

    # -- installation -----------------------------------------------------------------------

    def install(self, dataflow: DataflowDescription) -> DataflowHandle:
        """Validate and install ``dataflow`` (its ``as_of`` must be set)."""
        desc = dataflow
        index_sinces = {
            gid: ex.since for gid, (_df, ex) in self._exports.items() if ex.output is not None
        }
        as_of, until, schemas = check_install(desc, self._exports, index_sinces, "SparkExecutor")
        compiler = _Compiler(self.spark, self._fingerprint)
        inputs: dict[GlobalId, _Input] = {}
        for s in desc.source_imports:
            node = SourceNode()
            inputs[s.id] = _Input(s.id, node, schemas.get(s.id))
            compiler.by_id[s.id] = compiler.add(node)
        for ix in desc.index_imports:
            node = SourceNode()
            inputs[ix.id] = _Input(ix.id, node, None, index_of=self._exports[ix.id][1])
            compiler.by_id[ix.id] = compiler.by_id[ix.on_id] = compiler.add(node)
        plans = {b.id: b.plan for b in desc.objects_to_build}
        for oid in object_order(desc):
            compiler.by_id[oid] = compiler.compile(lower(plans[oid]), {})

        handle = self._next_handle
        self._next_handle += 1
        # an empty as_of: the dataflow never produces anything (its processed frontier is done)
        start = as_of if as_of is not None else 0
        df = _Dataflow(handle, desc, start, until, as_of, inputs, compiler.nodes, {})
        for ex in desc.index_exports:
            df.exports[ex.id] = _Export(
                ex.id,
                compiler.by_id[ex.on_id],
                as_of,
                as_of,
                self._index_output(schemas[ex.on_id], ex.key),
                arity=schemas[ex.on_id].arity,
            )
        for sk in desc.sink_exports:
            df.exports[sk.id] = _Export(
                sk.id,
                compiler.by_id[sk.from_id],
                as_of,
                as_of,
                with_snapshot=sk.with_snapshot,
                up_to=to_frontier(sk.up_to, "up_to", "SparkExecutor"),
            )
        self._dataflows[handle] = df
        for eid, export in df.exports.items():
            self._exports[eid] = (df, export)
        for inp in inputs.values():
            if inp.index_of is not None:
                source = inp.index_of
                source.importers.append((df, inp))
                if df.processed is not None and source.output is not None:
                    self._push(df, inp, source.output.updates(), source.output.error_updates())
                inp.upper = source.upper
        return handle

    def _index_output(self, schema: Schema, key: tuple[int, ...]) -> IndexOutput:
        return IndexOutput(
            key, lambda: SparkIndexHistory(self.spark, schema, key), self.index_memory_rows
        )

    def _push(
        self, df: _Dataflow, inp: _Input, updates: Iterable[Update], errors: Iterable[ErrorUpdate]
    ) -> None:
        as_of = df.as_of
        inp.pending.extend((r, t if t >= as_of else as_of, d) for r, t, d in updates)
        inp.pending_errs.extend((m, t if t >= as_of else as_of, d) for m, t, d in errors)

    # -- input ------------------------------------------------------------------------------

    def source_inputs(self, handle: DataflowHandle) -> tuple[GlobalId, ...]:
        """The source imports of ``handle`` that the caller must :meth:`feed`."""
        df = self._dataflow(handle)
        return tuple(i for i, inp in df.inputs.items() if inp.index_of is None)

    def feed(
        self,
        handle: DataflowHandle,
        input_id: GlobalId,
        updates: Iterable[Update],
        upper: Antichain,
    ) -> None:
        """Give source import ``input_id`` of ``handle`` new updates and its new upper."""
        df = self._dataflow(handle)
        inp = df.inputs.get(input_id)
        if inp is None or inp.index_of is not None:
            raise UnknownExport(f"dataflow {handle} has no source import {input_id}")
        schema = inp.schema if self._check_rows else None
        batch, new_upper = check_feed(input_id, updates, inp.upper, upper, schema, "SparkExecutor")
        if df.processed is not None:
            self._push(df, inp, (u for u in batch if u[2]), ())
        inp.upper = new_upper

    # -- processing -------------------------------------------------------------------------

    def step(self) -> list[ExportBatch]:
        """Process all completed times; one batch per export whose contents or upper changed."""
        with PHASES("step"):
            return self._step()

    def _step(self) -> list[ExportBatch]:
        batches: list[ExportBatch] = []
        for df in list(self._dataflows.values()):
            batches.extend(self._step_dataflow(df))
        return batches

    def _step_dataflow(self, df: _Dataflow) -> list[ExportBatch]:
        if df.processed is None:
            return []
        meet: Frontier = None
        for inp in df.inputs.values():
            if inp.upper is not None and (meet is None or inp.upper < meet):
                meet = inp.upper
        if meet is not None and meet <= df.processed:
            return []
        until = df.until

        def ready(t: int) -> bool:
            return meet is None or t < meet

        def live(t: int) -> bool:
            return until is None or t < until

        for inp in df.inputs.values():
            now = [u for u in inp.pending if ready(u[1])]
            inp.pending = [u for u in inp.pending if not ready(u[1])]
            errs = [e for e in inp.pending_errs if ready(e[1])]
            inp.pending_errs = [e for e in inp.pending_errs if not ready(e[1])]
            inp.node.out = [u for u in now if live(u[1])]
            inp.node.errs = [e for e in errs if live(e[1])]
        first: int | None = None
        if not df.started:
            df.started = True
            first = df.as_of if live(df.as_of) else None
        for node in df.nodes:
            with PHASES("node." + type(node).__name__):
                node.run(first)
        df.processed = meet
        new_upper = meet if meet is None or meet > df.as_of else df.as_of
        batches = []
        for eid, ex in df.exports.items():
            with PHASES("export.consolidate"):
                out = ex.node.out
                if ex.node.consolidated:
                    ups = (
                        tuple(out)
                        if self._emits_all(df, ex)
                        else tuple(u for u in out if self._emits(df, ex, u[1]))
                    )
                else:
                    ups = consolidate_changes(u for u in out if self._emits(df, ex, u[1]))
                es = consolidate_changes(e for e in ex.node.errs if self._emits(df, ex, e[1]))
            if not ups and not es and ex.upper == new_upper:
                continue
            if ex.output is not None:
                with PHASES("mirror.apply"):
                    ex.output.apply(ups, es)
            batches.append(
                ExportBatch(eid, to_antichain(ex.upper), to_antichain(new_upper), ups, es)
            )
            ex.upper = new_upper
            for idf, inp in ex.importers:
                if idf.processed is not None:
                    self._push(idf, inp, ups, es)
                inp.upper = new_upper
        for node in df.nodes:
            node.out, node.errs = [], []
        return batches

    @staticmethod
    def _emits_all(df: _Dataflow, ex: _Export) -> bool:
        """Whether :meth:`_emits` holds at every time this step can hold (all of them are at
        or after the as_of and before the processed frontier)."""
        return ex.with_snapshot and (
            ex.up_to is None or (df.processed is not None and df.processed <= ex.up_to)
        )

    @staticmethod
    def _emits(df: _Dataflow, ex: _Export, t: int) -> bool:
        if not ex.with_snapshot and t == df.as_of:
            return False
        return ex.up_to is None or t < ex.up_to

    # -- compaction, peeks, drop ------------------------------------------------------------

    def allow_compaction(self, export_id: GlobalId, frontier: Antichain) -> None:
        """Times before ``frontier`` are no longer read from ``export_id``; ``[]`` drops it."""
        df, ex = self._export(export_id)
        new = to_frontier(frontier, f"compaction of {export_id}", "SparkExecutor")
        if not frontier_le(ex.since, new):
            raise CompactionRegression(
                f"{export_id}: compaction to {frontier} is behind its since {to_antichain(ex.since)}"
            )
        if new is None:
            if ex.output is not None:
                ex.output.close()
            del df.exports[export_id]
            del self._exports[export_id]
            if not df.exports:
                self.drop(df.handle)
            return
        ex.since = new
        if ex.output is not None:
            with PHASES("mirror.compact"):
                ex.output.compact(new)

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        """The index's contents at ``time``, finished (a Spark job if its history is in Spark)."""
        _, ex = self._export(index_id)
        if ex.output is None:
            raise UnknownExport(f"{index_id} is not an index")
        finishing = check_index_peek(
            index_id, time, ex.since, ex.upper, ex.output.key, ex.arity, finishing, key_lookup
        )
        rows, errors = ex.output.read(time, key_lookup)
        return peek_result(rows, errors, finishing)

    def drop(self, handle: DataflowHandle) -> None:
        """Remove a dataflow, its exports and its Spark state."""
        df = self._dataflow(handle)
        del self._dataflows[handle]
        for eid, ex in df.exports.items():
            self._exports.pop(eid, None)
            if ex.output is not None:
                ex.output.close()
            for _, inp in ex.importers:
                inp.index_of = None  # the importer's input stalls at its last upper
        for inp in df.inputs.values():
            if inp.index_of is not None:
                inp.index_of.importers = [(d, i) for d, i in inp.index_of.importers if d is not df]
        df.exports.clear()
        for node in df.nodes:
            if isinstance(node, StatefulNode):
                node.clear()

    # -- queries ----------------------------------------------------------------------------

    def since(self, export_id: GlobalId) -> Antichain:
        """The export's compaction frontier."""
        return to_antichain(self._export(export_id)[1].since)

    def upper(self, export_id: GlobalId) -> Antichain:
        """The export's write frontier."""
        return to_antichain(self._export(export_id)[1].upper)

    def index_in_spark(self, export_id: GlobalId) -> bool:
        """Whether index ``export_id`` outgrew ``index_memory_rows`` and keeps its history in Spark."""
        output = self._export(export_id)[1].output
        if output is None:
            raise UnknownExport(f"{export_id} is not an index")
        return output.in_spark

    def handle_of(self, export_id: GlobalId) -> DataflowHandle:
        """The dataflow that exports ``export_id``."""
        return self._export(export_id)[0].handle

    def spark_jobs(self) -> int:
        """Spark jobs run so far for state lookups (for tests and benchmarks)."""
        return sum(
            n.state_jobs()
            for df in self._dataflows.values()
            for n in df.nodes
            if isinstance(n, StatefulNode)
        )

    def _dataflow(self, handle: DataflowHandle) -> _Dataflow:
        df = self._dataflows.get(handle)
        if df is None:
            raise UnknownExport(f"no installed dataflow {handle}")
        return df

    def _export(self, export_id: GlobalId) -> tuple[_Dataflow, _Export]:
        found = self._exports.get(export_id)
        if found is None:
            raise UnknownExport(f"{export_id} is not an export of an installed dataflow")
        return found
