"""``IntTimeExecutor``: the bookkeeping every executor over ``int`` times shares.

An executor subclass decides how operators run; this base decides everything
the :class:`~.contract.Executor` contract says about dataflows, inputs and
exports, once: validating and installing a dataflow (its inputs, compiled
nodes and exports), feeding source imports, feeding index imports from the
exporting dataflow, the step's frontier logic (which times are complete, the
exports' new uppers, what each export emits, handing changes to importers),
compaction, peeks at index exports, drops and the queries.

A subclass supplies four things: a :class:`~.compile.PlanCompiler` making its
nodes (:meth:`_compiler`), the store of an index export's history
(:meth:`_new_index`), how changes wait at an input for their step
(:meth:`_push`) and how one step of a dataflow runs its nodes
(:meth:`_run`). Times are ``int``; others raise :class:`UnsupportedTimestamp`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeAlias, TypeVar

from ..errors import CompactionRegression, UnknownExport
from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..plan.lower import lower
from ..plan.ordering import peek_result
from ..plan.schema import Schema
from ..plan.typecheck import object_order
from ..protocol.responses import PeekResult
from ..protocol.types import DataflowDescription, RowSetFinishing
from .compile import PlanCompiler
from .contract import DataflowHandle, ErrorUpdate, ExportBatch
from .int_frontiers import (
    Frontier,
    check_feed,
    check_index_peek,
    check_install,
    frontier_le,
    to_antichain,
    to_frontier,
)

__all__ = [
    "DataflowState",
    "IndexStore",
    "InputState",
    "InstalledExport",
    "IntTimeExecutor",
    "StepChanges",
]


class IndexStore(Protocol):
    """Where an index export keeps its output since its since (e.g. :class:`~.index_history.IndexHistory`)."""

    @property
    def key(self) -> tuple[int, ...]:
        """The index's key columns."""
        ...

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add a step's consolidated updates and errors."""
        ...

    def compact(self, since: int) -> None:
        """Merge times at or before ``since``; accumulations at ``>= since`` stay the same."""
        ...

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, restricted to rows whose key is in ``keys``."""
        ...

    def updates(self) -> list[Update]:
        """Every held update (what a dataflow importing the index starts from)."""
        ...

    def error_updates(self) -> list[ErrorUpdate]:
        """Every held error update."""
        ...


NodeT = TypeVar("NodeT")
IndexT = TypeVar("IndexT", bound=IndexStore)


@dataclass(eq=False)
class InstalledExport(Generic[NodeT, IndexT]):
    """An installed export: its node, frontiers, index history and importing inputs."""

    id: GlobalId
    node: NodeT
    since: Frontier
    upper: Frontier
    index: IndexT | None = None  # index exports only
    arity: int = 0
    with_snapshot: bool = True
    up_to: Frontier = None
    importers: list[tuple[DataflowState[NodeT, IndexT], InputState[NodeT, IndexT]]] = field(
        default_factory=list
    )

    def emits(self, t: int, as_of: int) -> bool:
        """Whether changes at ``t`` go out: not the snapshot (the as_of) of a sink without one, nor at or past ``up_to``."""
        if not self.with_snapshot and t == as_of:
            return False
        return self.up_to is None or t < self.up_to

    def emits_all_before(self, frontier: Frontier) -> bool:
        """Whether :meth:`emits` holds at every time from the as_of up to ``frontier``."""
        return self.with_snapshot and (
            self.up_to is None or (frontier is not None and frontier <= self.up_to)
        )


@dataclass(eq=False)
class InputState(Generic[NodeT, IndexT]):
    """A dataflow's import: its source node, schema (source imports) and upper so far.

    ``index_of`` is the export an index import reads; ``is_index`` stays true after
    that export is dropped (the input then stalls at its last upper).
    """

    id: GlobalId
    node: NodeT
    schema: Schema | None
    upper: Frontier = 0
    index_of: InstalledExport[NodeT, IndexT] | None = None
    is_index: bool = False


@dataclass(eq=False)
class DataflowState(Generic[NodeT, IndexT]):
    """An installed dataflow; ``processed`` is the frontier its steps have reached (``None``: done)."""

    handle: DataflowHandle
    desc: DataflowDescription
    as_of: Frontier
    until: Frontier
    processed: Frontier
    inputs: dict[GlobalId, InputState[NodeT, IndexT]]
    nodes: list[NodeT]
    exports: dict[GlobalId, InstalledExport[NodeT, IndexT]]
    started: bool = False
    # Whether an input's upper may have moved since the last step; a step with no
    # input upper moved does nothing (it would stop at ``meet <= processed``).
    dirty: bool = True
    # Set by :meth:`IntTimeExecutor.fail`: the error each export holds from ``processed`` on
    # (``failure_emitted`` once the step placing it has run).
    failed: str | None = None
    failure_emitted: bool = False


StepChanges: TypeAlias = Mapping[GlobalId, tuple[tuple[Update, ...], tuple[ErrorUpdate, ...]]]
"""One step's consolidated, emitted ``(updates, errors)`` of each export of a dataflow."""


class IntTimeExecutor(ABC, Generic[NodeT, IndexT]):
    """The :class:`~.contract.Executor` contract over int times, but for running nodes (see the module docstring).

    ``check_rows`` validates every fed row against the imported schema.
    """

    executor_name: ClassVar[str] = "executor"
    """How errors name this executor."""

    def __init__(self, *, check_rows: bool = True) -> None:
        self._check_rows = check_rows
        self._dataflows: dict[DataflowHandle, DataflowState[NodeT, IndexT]] = {}
        self._exports: dict[
            GlobalId, tuple[DataflowState[NodeT, IndexT], InstalledExport[NodeT, IndexT]]
        ] = {}
        self._next_handle = 0

    # -- what a subclass supplies -----------------------------------------------------------

    @abstractmethod
    def _compiler(self, as_of: int) -> PlanCompiler[NodeT]:
        """A fresh compiler for one dataflow installed at ``as_of``."""

    @abstractmethod
    def _new_index(self, schema: Schema, key: tuple[int, ...]) -> IndexT:
        """An empty history for an index export of rows of ``schema`` on ``key``."""

    @abstractmethod
    def _push(
        self,
        df: DataflowState[NodeT, IndexT],
        inp: InputState[NodeT, IndexT],
        updates: Iterable[Update],
        errors: Iterable[ErrorUpdate],
    ) -> None:
        """Queue changes at input ``inp`` of ``df`` (of a started dataflow) for the step that completes their time.

        Times before the as_of are read as of it.
        """

    @abstractmethod
    def _run(
        self, df: DataflowState[NodeT, IndexT], as_of: int, meet: Frontier, first: bool
    ) -> StepChanges:
        """Run ``df`` over every queued time before ``meet``, the inputs' completed frontier.

        ``first``: this is the dataflow's first step, which includes the as_of
        (constants appear there). Times at or past the dataflow's ``until`` are
        discarded. Returns the consolidated changes each export emits
        (:meth:`InstalledExport.emits`).
        """

    def _close_index(self, index: IndexT) -> None:
        """Release an index history whose export is gone (nothing to release by default)."""
        return

    # -- installation -----------------------------------------------------------------------

    def install(self, dataflow: DataflowDescription) -> DataflowHandle:
        """Validate and install ``dataflow`` (its ``as_of`` must be set)."""
        desc = dataflow
        name = self.executor_name
        index_sinces = {
            gid: ex.since for gid, (_df, ex) in self._exports.items() if ex.index is not None
        }
        as_of, until, schemas = check_install(desc, self._exports, index_sinces, name)
        compiler = self._compiler(as_of if as_of is not None else 0)
        inputs: dict[GlobalId, InputState[NodeT, IndexT]] = {}
        for s in desc.source_imports:
            node = compiler.add(compiler.stateless.source())
            inputs[s.id] = InputState(s.id, node, schemas.get(s.id))
            compiler.by_id[s.id] = node
        for ix in desc.index_imports:
            node = compiler.add(compiler.stateless.source())
            inputs[ix.id] = InputState(
                ix.id, node, None, index_of=self._exports[ix.id][1], is_index=True
            )
            compiler.by_id[ix.id] = compiler.by_id[ix.on_id] = node
        plans = {b.id: b.plan for b in desc.objects_to_build}
        for oid in object_order(desc):
            compiler.by_id[oid] = compiler.compile(lower(plans[oid]), {})

        handle = self._next_handle
        self._next_handle += 1
        # an empty as_of: the dataflow never produces anything (its processed frontier is done)
        df = DataflowState(handle, desc, as_of, until, as_of, inputs, compiler.nodes, {})
        for ex in desc.index_exports:
            schema = schemas[ex.on_id]
            df.exports[ex.id] = InstalledExport(
                ex.id,
                compiler.by_id[ex.on_id],
                as_of,
                as_of,
                self._new_index(schema, ex.key),
                arity=schema.arity,
            )
        for sk in desc.sink_exports:
            df.exports[sk.id] = InstalledExport(
                sk.id,
                compiler.by_id[sk.from_id],
                as_of,
                as_of,
                with_snapshot=sk.with_snapshot,
                up_to=to_frontier(sk.up_to, "up_to", name),
            )
        self._dataflows[handle] = df
        for eid, export in df.exports.items():
            self._exports[eid] = (df, export)
        for inp in inputs.values():
            if inp.index_of is not None:
                self._attach_import(df, inp, inp.index_of)
        return handle

    def _attach_import(
        self,
        df: DataflowState[NodeT, IndexT],
        inp: InputState[NodeT, IndexT],
        source: InstalledExport[NodeT, IndexT],
    ) -> None:
        source.importers.append((df, inp))
        if df.processed is not None and source.index is not None:
            self._push(df, inp, source.index.updates(), source.index.error_updates())
        inp.upper = source.upper
        df.dirty = True

    # -- input ------------------------------------------------------------------------------

    def source_inputs(self, handle: DataflowHandle) -> tuple[GlobalId, ...]:
        """The source imports of ``handle`` that the caller must :meth:`feed`."""
        df = self._dataflow(handle)
        return tuple(i for i, inp in df.inputs.items() if not inp.is_index)

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
        if inp is None or inp.is_index:
            raise UnknownExport(f"dataflow {handle} has no source import {input_id}")
        schema = inp.schema if self._check_rows else None
        batch, new_upper = check_feed(
            input_id, updates, inp.upper, upper, schema, self.executor_name
        )
        if df.processed is not None and df.failed is None:
            self._push(df, inp, (u for u in batch if u[2]), ())
        inp.upper = new_upper
        df.dirty = True

    # -- processing -------------------------------------------------------------------------

    def step(self) -> list[ExportBatch]:
        """Process all completed times; one batch per export whose contents or upper changed."""
        batches: list[ExportBatch] = []
        for df in list(self._dataflows.values()):
            if df.dirty:
                df.dirty = False
                batches.extend(self._step_dataflow(df))
        return batches

    def _step_dataflow(self, df: DataflowState[NodeT, IndexT]) -> list[ExportBatch]:
        as_of, processed = df.as_of, df.processed
        if as_of is None or processed is None:
            return []
        meet: Frontier = None
        for inp in df.inputs.values():
            if inp.upper is not None and (meet is None or inp.upper < meet):
                meet = inp.upper
        if meet is not None and meet <= processed:
            return []
        first = not df.started
        df.started = True
        if df.failed is None:
            changes = self._run(df, as_of, meet, first)
        else:
            changes = self._failure_changes(df, processed)
        df.processed = meet
        new_upper = meet if meet is None or meet > as_of else as_of
        batches = []
        for eid, ex in df.exports.items():
            ups, es = changes[eid]
            if not ups and not es and ex.upper == new_upper:
                continue
            if ex.index is not None:
                ex.index.apply(ups, es)
            batches.append(
                ExportBatch(eid, to_antichain(ex.upper), to_antichain(new_upper), ups, es)
            )
            ex.upper = new_upper
            for idf, inp in ex.importers:
                if idf.processed is not None and idf.failed is None:
                    self._push(idf, inp, ups, es)
                inp.upper = new_upper
                idf.dirty = True
        return batches

    # -- state, and failing a dataflow ------------------------------------------------------

    def state_records(self) -> dict[DataflowHandle, int]:
        """An estimate of each live (not failed) dataflow's state: the records its operators,
        pending inputs and indexes hold."""
        return {
            h: sum(self._node_records(n) for n in df.nodes)
            + sum(self._index_records(ex.index) for ex in df.exports.values() if ex.index)
            for h, df in self._dataflows.items()
            if df.failed is None
        }

    def _node_records(self, node: NodeT) -> int:
        """The records operator ``node`` holds (0 for stateless operators)."""
        return 0

    def _index_records(self, index: IndexT) -> int:
        """The records index ``index`` holds."""
        return 0

    def _release_nodes(self, nodes: list[NodeT]) -> None:
        """Free what operator nodes hold outside this process's objects (a failed dataflow's)."""

    def fail(self, handle: DataflowHandle, message: str) -> None:
        """Give up on dataflow ``handle`` (a resource limit): release its operators' state.

        From the first time it has not processed on, each export holds only the
        error ``message`` (an index's rows are retracted there, so compaction frees
        them); earlier times keep their contents, and the exports' uppers go on
        advancing with the inputs, so reads at those times answer the error. A
        finished or already failed dataflow is left alone.
        """
        df = self._dataflow(handle)
        if df.failed is not None or df.processed is None or df.as_of is None:
            return
        df.failed = message
        self._release_nodes(df.nodes)
        df.nodes = []
        for inp in df.inputs.values():
            inp.node = self._compiler(df.as_of).stateless.source()  # its pending rows go too
        df.dirty = True

    def _failure_changes(self, df: DataflowState[NodeT, IndexT], at: Frontier) -> StepChanges:
        """The step of a failed dataflow: the error (and an index's retractions) once, at ``at``."""
        if df.failure_emitted or at is None or df.failed is None:
            return {eid: ((), ()) for eid in df.exports}
        df.failure_emitted = True
        changes: dict[GlobalId, tuple[tuple[Update, ...], tuple[ErrorUpdate, ...]]] = {}
        for eid, ex in df.exports.items():
            retract: tuple[Update, ...] = ()
            if ex.index is not None:
                held: dict[Row, int] = {}
                for row, _t, d in ex.index.updates():
                    held[row] = held.get(row, 0) + d
                retract = tuple((row, at, -n) for row, n in held.items() if n)
            changes[eid] = (retract, ((df.failed, at, 1),) if ex.emits(at, df.as_of or 0) else ())
        return changes

    # -- compaction, peeks, drop ------------------------------------------------------------

    def allow_compaction(self, export_id: GlobalId, frontier: Antichain) -> None:
        """Times before ``frontier`` are no longer read from ``export_id``; ``[]`` drops it."""
        df, ex = self._export(export_id)
        new = to_frontier(frontier, f"compaction of {export_id}", self.executor_name)
        if not frontier_le(ex.since, new):
            raise CompactionRegression(
                f"{export_id}: compaction to {frontier} is behind its since {to_antichain(ex.since)}"
            )
        if new is None:
            if ex.index is not None:
                self._close_index(ex.index)
            del df.exports[export_id]
            del self._exports[export_id]
            if not df.exports:
                self.drop(df.handle)
            return
        ex.since = new
        if ex.index is not None:
            ex.index.compact(new)

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        """The index's contents at ``time``, finished; restricted to rows whose key is in ``key_lookup``."""
        _, ex = self._export(index_id)
        index = ex.index
        if index is None:
            raise UnknownExport(f"{index_id} is not an index")
        finishing = check_index_peek(
            index_id, time, ex.since, ex.upper, index.key, ex.arity, finishing, key_lookup
        )
        rows, errors = index.read(time, key_lookup)
        return peek_result(rows, errors, finishing)

    def drop(self, handle: DataflowHandle) -> None:
        """Remove a dataflow and all its exports."""
        df = self._dataflow(handle)
        del self._dataflows[handle]
        for eid, ex in df.exports.items():
            self._exports.pop(eid, None)
            if ex.index is not None:
                self._close_index(ex.index)
            for _, inp in ex.importers:
                inp.index_of = None  # the importer's input stalls at its last upper
        for inp in df.inputs.values():
            if inp.index_of is not None:
                inp.index_of.importers = [(d, i) for d, i in inp.index_of.importers if d is not df]
        df.exports.clear()

    # -- queries ----------------------------------------------------------------------------

    def since(self, export_id: GlobalId) -> Antichain:
        """The export's compaction frontier."""
        return to_antichain(self._export(export_id)[1].since)

    def upper(self, export_id: GlobalId) -> Antichain:
        """The export's write frontier: contents final for times before it."""
        return to_antichain(self._export(export_id)[1].upper)

    def handle_of(self, export_id: GlobalId) -> DataflowHandle:
        """The dataflow that exports ``export_id``."""
        return self._export(export_id)[0].handle

    def _dataflow(self, handle: DataflowHandle) -> DataflowState[NodeT, IndexT]:
        df = self._dataflows.get(handle)
        if df is None:
            raise UnknownExport(f"no installed dataflow {handle}")
        return df

    def _export(
        self, export_id: GlobalId
    ) -> tuple[DataflowState[NodeT, IndexT], InstalledExport[NodeT, IndexT]]:
        found = self._exports.get(export_id)
        if found is None:
            raise UnknownExport(f"{export_id} is not an export of an installed dataflow")
        return found
