"""``PythonExecutor``: the pure-Python, incremental implementation of the executor contract.

Each dataflow compiles its (lowered) objects into a DAG of incremental
operators (:mod:`.operators`). A step processes, in increasing order, every
time below the meet of the inputs' uppers that has input changes, running the
operators in topological order; the dataflow's exports then report their
changes and the new upper. Index exports additionally keep their history
since the compaction frontier, so peeks can read any time in ``[since, upper)``.

Times must be ``int``; other timestamp kinds raise :class:`UnsupportedTimestamp`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import (
    CompactionRegression,
    InvalidPlan,
    UnknownExport,
)
from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..plan.lower import lower
from ..plan.ordering import peek_result
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
    Threshold,
    TopK,
    Union,
)
from ..plan.schema import Schema
from ..plan.typecheck import object_order, typecheck
from ..protocol.responses import PeekResult
from ..protocol.types import DataflowDescription, RowSetFinishing
from .contract import DataflowHandle, ErrorUpdate, ExportBatch
from .int_frontiers import (
    Frontier,
    check_feed,
    check_index_peek,
    check_install,
    consolidate_changes,
    frontier_le,
    to_antichain,
    to_frontier,
)
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
    TopKNode,
    UnionNode,
    key_function,
)

__all__ = ["PythonExecutor"]


class _History:
    """An index's updates since its compaction frontier, arranged by key then row."""

    def __init__(self, key: tuple[int, ...]) -> None:
        self.key = key
        self.by_key: dict[Row, dict[Row, dict[int, int]]] = {}
        self.errs: dict[str, dict[int, int]] = {}
        self.multi: set[tuple[Row, Row]] = set()

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        keyfn = key_function(self.key)
        by_key, multi = self.by_key, self.multi
        for row, t, d in updates:
            k = keyfn(row)
            rows = by_key.get(k)
            if rows is None:
                rows = by_key[k] = {}
            times = rows.setdefault(row, {})
            n = times.get(t, 0) + d
            if n:
                times[t] = n
            else:
                del times[t]
            if len(times) > 1:
                multi.add((k, row))
            elif not times:
                del rows[row]
                multi.discard((k, row))
                if not rows:
                    del by_key[k]
        for msg, t, d in errors:
            times = self.errs.setdefault(msg, {})
            n = times.get(t, 0) + d
            if n:
                times[t] = n
            else:
                del times[t]
                if not times:
                    del self.errs[msg]

    def compact(self, since: int) -> None:
        """Merge each row's times at or before ``since`` (accumulations at ``>= since`` unchanged)."""
        for k, row in list(self.multi):
            times = self.by_key[k][row]
            merged = sum(d for t, d in times.items() if t <= since)
            rest = {t: d for t, d in times.items() if t > since}
            if merged:
                rest[since] = merged
            if rest:
                self.by_key[k][row] = rest
            else:
                del self.by_key[k][row]
                if not self.by_key[k]:
                    del self.by_key[k]
            if len(rest) <= 1:
                self.multi.discard((k, row))
        for msg in list(self.errs):
            times = self.errs[msg]
            if len(times) > 1:
                merged = sum(d for t, d in times.items() if t <= since)
                rest = {t: d for t, d in times.items() if t > since}
                if merged:
                    rest[since] = merged
                if rest:
                    self.errs[msg] = rest
                else:
                    del self.errs[msg]

    def updates(self) -> list[Update]:
        return [
            (r, t, d)
            for rows in self.by_key.values()
            for r, ts in rows.items()
            for t, d in ts.items()
        ]

    def error_updates(self) -> list[ErrorUpdate]:
        return [(m, t, d) for m, ts in self.errs.items() for t, d in ts.items()]

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        groups = self.by_key.values() if keys is None else [self.by_key.get(k, {}) for k in keys]
        rows: dict[Row, int] = {}
        for group in groups:
            for r, ts in group.items():
                c = sum(d for t, d in ts.items() if t <= time)
                if c:
                    rows[r] = rows.get(r, 0) + c
        errors = {
            m: c for m, ts in self.errs.items() if (c := sum(d for t, d in ts.items() if t <= time))
        }
        return rows, errors


@dataclass
class _Export:
    id: GlobalId
    node: Node
    since: Frontier
    upper: Frontier
    history: _History | None = None  # index exports only
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


@dataclass
class _Dataflow:
    handle: DataflowHandle
    desc: DataflowDescription
    as_of: Frontier
    until: Frontier
    processed: Frontier
    inputs: dict[GlobalId, _Input]
    nodes: list[Node]
    exports: dict[GlobalId, _Export]
    started: bool = False
    # Whether an input's upper may have moved since the last step; a step with no
    # input upper moved does nothing (it would stop at ``meet <= processed``).
    dirty: bool = True


class _Compiler:
    """Turns lowered plans into operator nodes, sharing ``Get``s, objects and ``Let`` values."""

    def __init__(self, as_of: int) -> None:
        self.as_of = as_of
        self.nodes: list[Node] = []
        self.by_id: dict[GlobalId, Node] = {}

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def compile(self, plan: Plan, lets: Mapping[str, tuple[Node, Schema]]) -> Node:
        if isinstance(plan, Get):
            return self.by_id[plan.id]
        if isinstance(plan, Constant):
            consolidated: dict[Row, int] = {}
            for r, c in plan.rows:
                consolidated[r] = consolidated.get(r, 0) + c
            return self.add(
                ConstantNode([(r, c) for r, c in consolidated.items() if c], self.as_of)
            )
        if isinstance(plan, LetRef):
            return lets[plan.name][0]
        if isinstance(plan, Let):
            value = self.compile(plan.value, lets)
            schema = typecheck(plan.value, None, {n: s for n, (_, s) in lets.items()})
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
        if isinstance(plan, Distinct):
            return self.add(DistinctNode(inp, threshold=False))
        if isinstance(plan, Threshold):
            return self.add(DistinctNode(inp, threshold=True))
        if isinstance(plan, ArrangeBy):
            return inp
        if isinstance(plan, Reduce):
            schema = typecheck(plan.input, None, {n: s for n, (_, s) in lets.items()})
            return self.add(ReduceNode(inp, schema, plan.group_key, plan.aggregates))
        if isinstance(plan, TopK):
            return self.add(TopKNode(inp, plan))
        raise InvalidPlan(f"not a plan: {plan!r}")

    def _join(self, plan: Join, lets: Mapping[str, tuple[Node, Schema]]) -> Node:
        schemas = {n: s for n, (_, s) in lets.items()}
        arities = [typecheck(p, None, schemas).arity for p in plan.inputs]
        nodes = [self.compile(p, lets) for p in plan.inputs]
        classes = [tuple(c) for c in plan.equivalences]
        if len(nodes) == 1:
            return self.add(FilterClassesNode(nodes[0], classes)) if classes else nodes[0]
        left, offset = nodes[0], arities[0]
        for node, arity in zip(nodes[1:], arities[1:], strict=True):
            avail = offset + arity
            lkey: list[int] = []
            rkey: list[int] = []
            for cls in classes:
                ls = [i for i in cls if i < offset]
                rs = [i - offset for i in cls if offset <= i < avail]
                if ls and rs:
                    lkey.append(ls[0])
                    rkey.append(rs[0])
            checks = [sub for cls in classes if (sub := tuple(i for i in cls if i < avail))]
            left = self.add(JoinNode(left, node, tuple(lkey), tuple(rkey), checks))
            offset = avail
        return left


class PythonExecutor:
    """The reference incremental executor (see the module docstring and :class:`Executor`).

    ``check_rows`` validates every fed row against the imported schema.
    """

    def __init__(self, *, check_rows: bool = True) -> None:
        self._check_rows = check_rows
        self._dataflows: dict[DataflowHandle, _Dataflow] = {}
        self._exports: dict[GlobalId, tuple[_Dataflow, _Export]] = {}
        self._next_handle = 0

    # -- installation -----------------------------------------------------------------------

    def install(self, dataflow: DataflowDescription) -> DataflowHandle:
        desc = dataflow
        index_sinces = {
            gid: ex.since for gid, (_df, ex) in self._exports.items() if ex.history is not None
        }
        as_of, until, schemas = check_install(desc, self._exports, index_sinces, "PythonExecutor")

        handle = self._next_handle
        self._next_handle += 1
        compiler = _Compiler(as_of if as_of is not None else 0)
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
        df = _Dataflow(handle, desc, as_of, until, as_of, inputs, compiler.nodes, {})
        start = as_of
        for ex in desc.index_exports:
            df.exports[ex.id] = _Export(
                ex.id,
                compiler.by_id[ex.on_id],
                start,
                start,
                _History(ex.key),
                arity=schemas[ex.on_id].arity,
            )
        for sk in desc.sink_exports:
            df.exports[sk.id] = _Export(
                sk.id,
                compiler.by_id[sk.from_id],
                start,
                start,
                with_snapshot=sk.with_snapshot,
                up_to=to_frontier(sk.up_to, "up_to", "PythonExecutor"),
            )
        self._dataflows[handle] = df
        for eid, export in df.exports.items():
            self._exports[eid] = (df, export)
        for inp in inputs.values():
            if inp.index_of is not None:
                self._attach_import(df, inp, inp.index_of)
        return handle

    def _attach_import(self, df: _Dataflow, inp: _Input, source: _Export) -> None:
        source.importers.append((df, inp))
        if df.as_of is not None and source.history is not None:
            self._push(df, inp, source.history.updates(), source.history.error_updates())
        inp.upper = source.upper
        df.dirty = True

    def _push(
        self, df: _Dataflow, inp: _Input, updates: Iterable[Update], errors: Iterable[ErrorUpdate]
    ) -> None:
        as_of = df.as_of if df.as_of is not None else 0
        pending = inp.node.pending_rows
        for r, t, d in updates:
            pending.setdefault(t if t >= as_of else as_of, []).append((r, d))
        perrs = inp.node.pending_errs
        for m, t, d in errors:
            perrs.setdefault(t if t >= as_of else as_of, []).append((m, d))

    # -- input ------------------------------------------------------------------------------

    def source_inputs(self, handle: DataflowHandle) -> tuple[GlobalId, ...]:
        df = self._dataflow(handle)
        return tuple(i for i, inp in df.inputs.items() if inp.index_of is None)

    def feed(
        self,
        handle: DataflowHandle,
        input_id: GlobalId,
        updates: Iterable[Update],
        upper: Antichain,
    ) -> None:
        df = self._dataflow(handle)
        inp = df.inputs.get(input_id)
        if inp is None or inp.index_of is not None:
            raise UnknownExport(f"dataflow {handle} has no source import {input_id}")
        schema = inp.schema if self._check_rows else None
        batch, new_upper = check_feed(input_id, updates, inp.upper, upper, schema, "PythonExecutor")
        if df.as_of is not None:
            self._push(df, inp, (u for u in batch if u[2]), ())
        inp.upper = new_upper
        df.dirty = True

    # -- processing -------------------------------------------------------------------------

    def step(self) -> list[ExportBatch]:
        batches: list[ExportBatch] = []
        for df in list(self._dataflows.values()):
            if df.dirty:
                df.dirty = False
                batches.extend(self._step_dataflow(df))
        return batches

    def _step_dataflow(self, df: _Dataflow) -> list[ExportBatch]:
        if df.as_of is None or df.processed is None:
            return []
        meet: Frontier = None
        for inp in df.inputs.values():
            if inp.upper is not None and (meet is None or inp.upper < meet):
                meet = inp.upper
        if meet is not None and meet <= df.processed:
            return []
        times: set[int] = set()
        for inp in df.inputs.values():
            for pending in (inp.node.pending_rows, inp.node.pending_errs):
                times.update(t for t in pending if meet is None or t < meet)
        if not df.started:
            times.add(df.as_of)
            df.started = True
        out: dict[GlobalId, list[Update]] = {eid: [] for eid in df.exports}
        errs: dict[GlobalId, list[ErrorUpdate]] = {eid: [] for eid in df.exports}
        for t in sorted(times):
            if df.until is not None and t >= df.until:
                for inp in df.inputs.values():
                    inp.node.pending_rows.pop(t, None)
                    inp.node.pending_errs.pop(t, None)
                continue
            for node in df.nodes:
                node.run(t)
            for eid, ex in df.exports.items():
                if not ex.with_snapshot and t == df.as_of:
                    continue
                if ex.up_to is not None and t >= ex.up_to:
                    continue
                out[eid].extend((r, t, d) for r, d in ex.node.out)
                errs[eid].extend((m, t, d) for m, d in ex.node.errs)
        df.processed = meet
        new_upper = meet if meet is None or meet > df.as_of else df.as_of
        batches = []
        for eid, ex in df.exports.items():
            ups, es = consolidate_changes(out[eid]), consolidate_changes(errs[eid])
            if not ups and not es and ex.upper == new_upper:
                continue
            if ex.history is not None:
                ex.history.apply(ups, es)
            batch = ExportBatch(eid, to_antichain(ex.upper), to_antichain(new_upper), ups, es)
            ex.upper = new_upper
            batches.append(batch)
            for idf, inp in ex.importers:
                if idf.as_of is not None:
                    self._push(idf, inp, ups, es)
                inp.upper = new_upper
                idf.dirty = True
        return batches

    # -- compaction, peeks, drop ------------------------------------------------------------

    def allow_compaction(self, export_id: GlobalId, frontier: Antichain) -> None:
        df, ex = self._export(export_id)
        new = to_frontier(frontier, f"compaction of {export_id}", "PythonExecutor")
        if not frontier_le(ex.since, new):
            raise CompactionRegression(
                f"{export_id}: compaction to {frontier} is behind its since {to_antichain(ex.since)}"
            )
        if new is None:
            del df.exports[export_id]
            del self._exports[export_id]
            if not df.exports:
                self.drop(df.handle)
            return
        ex.since = new
        if ex.history is not None:
            ex.history.compact(new)

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        _, ex = self._export(index_id)
        if ex.history is None:
            raise UnknownExport(f"{index_id} is not an index")
        finishing = check_index_peek(
            index_id, time, ex.since, ex.upper, ex.history.key, ex.arity, finishing, key_lookup
        )
        rows, errors = ex.history.read(time, key_lookup)
        return peek_result(rows, errors, finishing)

    def drop(self, handle: DataflowHandle) -> None:
        df = self._dataflow(handle)
        del self._dataflows[handle]
        for eid, ex in df.exports.items():
            self._exports.pop(eid, None)
            for _, inp in ex.importers:
                inp.index_of = None  # the importer's input stalls at its last upper
        for inp in df.inputs.values():
            if inp.index_of is not None:
                inp.index_of.importers = [(d, i) for d, i in inp.index_of.importers if d is not df]
        df.exports.clear()

    # -- queries ----------------------------------------------------------------------------

    def since(self, export_id: GlobalId) -> Antichain:
        return to_antichain(self._export(export_id)[1].since)

    def upper(self, export_id: GlobalId) -> Antichain:
        return to_antichain(self._export(export_id)[1].upper)

    def handle_of(self, export_id: GlobalId) -> DataflowHandle:
        """The dataflow that exports ``export_id``."""
        return self._export(export_id)[0].handle

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
