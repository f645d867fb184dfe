"""``ComputeReplica``: what a compute replica does with each command, as one sans-IO state machine.

The replica feeds every command to its :class:`ReplicaSession` (the protocol
rules), performs the returned effects on an :class:`Executor`, and records in
its outbox the :mod:`outputs <tidegate.spec.compute_replica.outputs>` its
driver takes with :meth:`ComputeReplica.drain`: responses
(each validated by the session before it is returned), storage reads and
writes, persist peeks. The driver delivers storage data (:meth:`feed_source`),
write outcomes (:meth:`write_completed`, :meth:`write_failed`) and persist-peek
results (:meth:`complete_persist_peek`), and calls :meth:`step` to make
progress. Nothing here does IO or reads a clock: time comes from the
``clock`` argument, if any.

Behaviour follows docs/reference/compute.md §6: commands of an iteration are
collected until ``InitializationComplete`` and then reconciled with what the
replica already runs (§6.2): a compatible dataflow is kept, others are dropped
and rebuilt; peeks are answered once the index's upper passes their time
(§6.1); frontiers are reported only when they strictly advance (§6.3);
materialized views write only after ``AllowWrites``.
"""

from __future__ import annotations

import datetime as _dt
import uuid as _uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import DeposedController, ExecutorError, PlanError
from ..errors.replica import (
    CommandRejected,
    DataflowRejected,
    IncompatibleInstance,
    SourceFeedRejected,
    UnknownCopyTo,
    UnknownPersistPeek,
    UnknownSink,
    UnknownSource,
    WriteNotInFlight,
)
from ..executor.contract import DataflowHandle, Executor, ExportBatch
from ..frontier import Antichain, Row, Update, row_sort_key
from ..history import CommandHistory, reduce_commands
from ..ids import GlobalId
from ..outbox import Outbox, atomic
from ..plan.ordering import peek_result
from ..plan.typecheck import validate_dataflow
from ..protocol.commands import (
    AllowCompaction,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
)
from ..protocol.replica_effects import (
    BuildDataflow,
    CancelPendingPeek,
    CompactCollection,
    DropCollection,
    EnableWrites,
    InitializeInstance,
    ReplicaEffect,
    RunDataflow,
    ServePeek,
    SetConfiguration,
    StartIteration,
)
from ..protocol.replica_session import ReplicaSession
from ..protocol.responses import (
    ComputeResponse,
    CopyToDropped,
    CopyToError,
    CopyToResponse,
    CopyToRowCount,
    Frontiers,
    PeekCanceled,
    PeekError,
    PeekResponse,
    PeekResult,
    PeekRows,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from ..protocol.stages import CollectionKind, FrontierKind, Stage
from ..protocol.types import (
    ComputeParameters,
    CopyToConnection,
    DataflowDescription,
    InstanceConfig,
    PeekDescription,
    SubscribeConnection,
)
from .logs import log_dataflow
from .outputs import (
    PeekPersist,
    ReadSource,
    Reconciled,
    ReplicaOutput,
    Respond,
    StopReading,
    WriteCopyTo,
    WriteOutput,
)

__all__ = ["RESULT_TOO_LARGE", "ComputeReplica", "compaction_error_message", "result_size"]

_EMPTY = Antichain()
_BOTTOM = Antichain([0])

Key = tuple[GlobalId, ...]
"""A dataflow's identity: its export ids."""


def _fmt(f: Antichain) -> str:
    return "[" + ", ".join(map(str, f.elements)) + "]"


def compaction_error_message(since: Antichain, time: Any) -> str:
    """The ``PeekError`` text for a read below an index's compaction frontier (reference §6.1)."""
    return (
        f"Arrangement compaction frontier ({_fmt(since)}) is beyond the time of the "
        f"attempted read ({time})"
    )


def _value_size(v: Any) -> int:
    if v is None or isinstance(v, bool):
        return 1
    if isinstance(v, int | float):
        return 8
    if isinstance(v, str):
        return len(v.encode("utf-8"))
    if isinstance(v, _dt.datetime):
        return 8
    if isinstance(v, _dt.date):
        return 4
    return len(repr(v))


RESULT_TOO_LARGE = "result exceeds max size of"
MEMORY_LIMIT_EXCEEDED = "exceeded the replica's memory limit"
"""How the error of a dataflow failed by :meth:`ComputeReplica.fail_largest_dataflow` reads."""
"""How the error answer to a peek over ``max_result_size`` begins (Materialize's wording)."""


def result_size(rows: Iterable[tuple[Row, int]]) -> int:
    """A peek result's size in bytes, for ``max_result_size``: each value's width times its row's count.

    Widths: 8 for numbers and timestamps, 4 for dates, 1 for booleans and
    NULL, the UTF-8 length of strings.
    """
    return sum(count * sum(_value_size(v) for v in row) for row, count in rows)


@dataclass
class _Dataflow:
    """An installed dataflow, possibly kept across reconnects."""

    key: Key
    desc: DataflowDescription
    handle: DataflowHandle
    live: set[GlobalId]
    sources: tuple[GlobalId, ...]
    fed: dict[GlobalId, Antichain]
    running: bool = False
    log_variant: str | None = None
    import_uppers: dict[GlobalId, Antichain] = field(default_factory=dict)


@dataclass
class _Read:
    """One followed storage collection and the dataflows that read it."""

    as_of: Antichain
    upper: Antichain
    readers: set[Key]


@dataclass
class _Subscribe:
    """Updates computed but not yet sent, the computed upper, and the sink's ``up_to``.

    Once the computed upper reaches ``up_to`` the subscribe is complete: its upper becomes
    ``[]`` (the next batch ends the stream, as Materialize's subscribe sink ends it) and later
    executor batches are ignored. An empty ``up_to`` (the default) never completes it.
    """

    updates: dict[tuple[Any, Row], int] = field(default_factory=dict)
    upper: Antichain = field(default_factory=lambda: _BOTTOM)
    error: str | None = None
    up_to: Antichain = field(default_factory=Antichain.empty)


@dataclass
class _Sink:
    """A materialized view's output: computed, buffered until written."""

    as_of: Antichain
    buffered: dict[tuple[Row, Any], int] = field(default_factory=dict)
    computed: Antichain = field(default_factory=lambda: _BOTTOM)
    write_lower: Antichain = field(default_factory=lambda: _BOTTOM)
    storage_upper: Antichain | None = None
    in_flight: Antichain | None = None
    has_written: bool = False


@dataclass
class _CopyTo:
    """A copy-to: its contents at the as_of, gathered until complete, then handed out to write."""

    url: str
    as_of: int | None
    schema: Any
    counts: dict[Row, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    upper: Antichain = field(default_factory=lambda: _BOTTOM)
    writing: bool = False


@dataclass
class _PendingPeek:
    peek: PeekDescription
    received: int


def _step_back(f: Antichain) -> Antichain:
    """``f`` one time earlier (int times; 0 stays 0, ``[]`` stays ``[]``)."""
    els = f.elements
    if len(els) == 1 and type(els[0]) is int:
        t = els[0]
        return Antichain.from_elem(t - 1) if t > 0 else f
    return Antichain([max(int(t) - 1, 0) for t in els]) if els else f


def _has_read_its_snapshot(inst: _Dataflow) -> bool:
    """Whether every storage source of ``inst`` was fed past its as_of (reconciliation, §6.2).

    Only then may a reconnect keep it at its old as_of. Before, it still needs a snapshot at
    that as_of, which only the old controller's read holds kept readable: the replica holds
    nothing of its own until its read is established (reads start at ``Schedule``, and the
    driver's lease is taken later still), and the new controller holds its storage inputs at
    no earlier than their since when it sent the new ``CreateDataflow``, which may be past the
    old as_of. Such a dataflow has done no work, so rebuilding it at the new as_of loses
    nothing.
    """
    as_of = inst.desc.as_of if inst.desc.as_of is not None else _EMPTY
    return all(not inst.fed[src] <= as_of for src in inst.sources)


def _is_int_frontier(f: Antichain) -> bool:
    return all(type(t) is int for t in f.elements)


class ComputeReplica:
    """One compute replica's behaviour (see the module docstring).

    ``executor`` runs the dataflows; ``clock``, if given, returns the current
    time in milliseconds (for the introspection logs' timestamps and
    durations). Every public method validates first: a call that raises
    leaves the replica unchanged, except :class:`IncompatibleInstance` (the
    driver must halt) and an executor refusing, at ``InitializationComplete``,
    a dataflow that passed plan validation when it arrived.

    Storage reads are shared: one :class:`ReadSource` per collection, restarted
    (from below every reader's progress) when another dataflow starts reading
    it. Reported input frontiers trail the delivered uppers by one time, so the
    controller's holds keep such a restart readable in storage.
    """

    def __init__(self, executor: Executor, *, clock: Callable[[], int] | None = None) -> None:
        self._executor = executor
        self._clock = clock
        self._session = ReplicaSession()
        self._config: InstanceConfig | None = None
        self._params = ComputeParameters()
        # This iteration's commands without peeks, reduced as they arrive (so a long-running
        # replica keeps O(live state), not every AllowCompaction); and the last iteration's.
        self._commands = CommandHistory()
        self._executed: CommandHistory | None = None
        self._initializing = False
        self._deferred: list[tuple[ComputeCommand, list[ReplicaEffect]]] = []
        self._dataflows: dict[Key, _Dataflow] = {}
        self._owner: dict[GlobalId, Key] = {}
        self._reads: dict[GlobalId, _Read] = {}
        self._stopped_reads: set[GlobalId] = set()
        # Storage collections the driver reports unreadable (corrupt or missing data), and why;
        # until data arrives again, peeks waiting on them answer an error (see source_failed).
        self._source_errors: dict[GlobalId, str] = {}
        self._subscribes: dict[GlobalId, _Subscribe] = {}
        self._sinks: dict[GlobalId, _Sink] = {}
        self._retired_sinks: set[GlobalId] = set()
        self._copy_tos: dict[GlobalId, _CopyTo] = {}
        # Copy-to writes handed out and then dropped (or of an earlier iteration), counted:
        # their outcomes answer nothing.
        self._retired_copy_tos: dict[GlobalId, int] = {}
        self._peeks: dict[_uuid.UUID, _PendingPeek] = {}
        self._persist_peeks: dict[_uuid.UUID, _PendingPeek] = {}
        # Driver reads of retired persist peeks (cancelled, or of an earlier iteration) not yet
        # completed, counted: a peek replayed on a new connection is handed out again.
        self._retired_persist: dict[_uuid.UUID, int] = {}
        self._log_pending: dict[str, list[tuple[Row, int]]] = {}
        self._log_upper = 0
        self._log_keys: set[Key] = set()  # every key a log dataflow was installed under
        self._lag_rows: dict[GlobalId, Row] = {}
        # The (write, input, output) frontiers last offered per collection in this iteration:
        # when they have not moved, nothing new can be reported, so the checks are skipped.
        self._offered: dict[GlobalId, tuple[Antichain | None, Antichain, Antichain]] = {}
        # Exports whose offer may have moved since they were last published (event-driven
        # publishing: executor batches, source feeds, sink writes); ``_all_dirty`` after
        # anything else that can change what is reportable (commands, a new iteration).
        self._dirty: set[GlobalId] = set()
        self._all_dirty = True
        # True after a step that nothing has followed yet: every input (command, feed, write or
        # persist-peek callback) clears it. Without introspection logging a step's outcome is a
        # function of those inputs alone, so a step of a settled replica has nothing to do.
        self._settled = False
        self._steps = 0
        self._outbox: Outbox[ReplicaOutput] = Outbox()
        self.epoch = 0
        """The highest controller epoch a ``Hello`` brought (a lower one is refused)."""
        self.reused_dataflows = 0
        """Dataflows kept running across reconnects (reconciliation reused them)."""
        self.built_dataflows = 0
        """Dataflows installed on the executor (log dataflows excluded)."""

    def drain(self) -> list[ReplicaOutput]:
        """The outputs of every call since the last drain, in the order they arose."""
        return self._outbox.drain()

    # -- queries --------------------------------------------------------------------

    @property
    def session(self) -> ReplicaSession:
        """The protocol session (read it; do not feed it)."""
        return self._session

    @property
    def stage(self) -> Stage:
        return self._session.stage

    @property
    def parameters(self) -> ComputeParameters:
        """Every ``UpdateConfiguration`` applied so far, merged."""
        return self._params

    def installed_dataflows(self) -> tuple[Key, ...]:
        """Export ids of every dataflow running on the executor (log dataflows included)."""
        return tuple(sorted(self._dataflows))

    def reading(self) -> Mapping[GlobalId, Antichain]:
        """Storage collections followed now, with the as_of of their current read."""
        return {g: r.as_of for g, r in sorted(self._reads.items())}

    @property
    def retained_commands(self) -> int:
        """Commands of this iteration kept for reconciliation (reduced on doubling: bounded by live state)."""
        return len(self._commands)

    def pending_peeks(self) -> tuple[_uuid.UUID, ...]:
        """Peeks (index and persist) still to be answered."""
        return tuple(sorted([*self._peeks, *self._persist_peeks]))

    # -- commands -------------------------------------------------------------------

    @atomic
    def handle_command(self, cmd: ComputeCommand) -> None:
        """Take one command from the controller; what the driver must do now goes to the outbox."""
        session = self._session
        if isinstance(cmd, Hello) and cmd.epoch < self.epoch:
            raise DeposedController(cmd.epoch, self.epoch)
        session.check_command(cmd)
        if isinstance(cmd, Hello):
            self.epoch = cmd.epoch
        self._settled = False
        if not isinstance(cmd, Peek | CancelPeek | AllowCompaction):
            self._all_dirty = True
        if (
            isinstance(cmd, CreateInstance)
            and self._config is not None
            and not self._config.compatible_with(cmd.config)
        ):
            raise IncompatibleInstance(
                f"CreateInstance on reconnect is not compatible with the running instance "
                f"(running {self._config!r}, got {cmd.config!r}): halt the replica process"
            )
        if isinstance(cmd, CreateDataflow):
            self._validate_dataflow(cmd.dataflow)
        elif isinstance(cmd, Peek):
            t = cmd.peek.timestamp
            if type(t) is not int:
                raise CommandRejected(f"Peek {cmd.peek.uuid} of {cmd.peek.id} at {t!r}: not an int")
        elif isinstance(cmd, AllowCompaction) and not _is_int_frontier(cmd.frontier):
            raise CommandRejected(f"AllowCompaction({cmd.id}, {_fmt(cmd.frontier)}): not int times")
        if isinstance(cmd, Hello):
            if not self._initializing and self._config is not None:
                self._executed = self._commands
            self._commands = CommandHistory()
        if self._initializing and not isinstance(cmd, InitializationComplete | Hello):
            effects = session.on_command(cmd, checked=True)
            self._remember(cmd)
            self._deferred.append((cmd, effects))
            return
        handle: DataflowHandle | None = None
        if isinstance(cmd, CreateDataflow):
            handle = self._install(cmd.dataflow)
        effects = session.on_command(cmd, checked=True)
        self._remember(cmd)
        out: list[ReplicaOutput] = []
        if isinstance(cmd, Hello):
            self._start_iteration(effects)
        elif isinstance(cmd, InitializationComplete):
            out.extend(self._reconcile())
        else:
            for eff in effects:
                out.extend(self._perform(eff, handle))
        if session.stage.is_computation:
            out.extend(self._serve_peeks())
            out.extend(self._pay_owed())
        self._outbox.extend(out)

    def _remember(self, cmd: ComputeCommand) -> None:
        """Keep ``cmd`` for reconciliation after a reconnect (peeks never matter there)."""
        if not isinstance(cmd, Peek | CancelPeek):
            self._commands.push(cmd)

    def _validate_dataflow(self, df: DataflowDescription) -> None:
        name = f"CreateDataflow {df.debug_name!r}"
        if df.as_of is None or not _is_int_frontier(df.as_of) or not _is_int_frontier(df.until):
            raise DataflowRejected(f"{name}: as_of and until must be frontiers of int times")
        try:
            validate_dataflow(df)
        except PlanError as e:
            raise DataflowRejected(f"{name}: {e}") from None

    def _install(self, df: DataflowDescription) -> DataflowHandle:
        try:
            return self._executor.install(df)
        except (PlanError, ExecutorError) as e:
            raise DataflowRejected(f"CreateDataflow {df.debug_name!r}: {e}") from None

    def _start_iteration(self, effects: list[ReplicaEffect]) -> None:
        for eff in effects:
            if isinstance(eff, StartIteration):
                for u in eff.abandoned_peeks:
                    self._peeks.pop(u, None)
                    if self._persist_peeks.pop(u, None) is not None:
                        self._retire_persist(u)
        for u in list(self._persist_peeks):  # peeks of an iteration that never completed
            self._retire_persist(u)
        self._persist_peeks.clear()
        self._peeks.clear()
        self._offered.clear()
        self._all_dirty = True
        self._initializing = True
        self._deferred = []

    # -- reconciliation (reference §6.2) --------------------------------------------

    def _reconcile(self) -> list[ReplicaOutput]:
        deferred, self._deferred = self._deferred, []
        self._all_dirty = True
        self._initializing = False
        out: list[ReplicaOutput] = []
        reuse: dict[Key, DataflowDescription] = {}
        reconnect = self._executed is not None
        if self._executed is not None:
            old = reduce_commands(self._executed)
            old_dfs = {
                c.dataflow.export_ids: c.dataflow for c in old if isinstance(c, CreateDataflow)
            }
            finals = {c.id: c.frontier for c in old if isinstance(c, AllowCompaction)}
            retained = {k[0] for k, d in self._dataflows.items() if d.log_variant is not None}
            for cmd, _ in deferred:
                if not isinstance(cmd, CreateDataflow):
                    continue
                new = cmd.dataflow
                key = new.export_ids
                prev = old_dfs.get(key)
                inst = self._dataflows.get(key)
                if prev is None or inst is None or inst.live != set(key):
                    continue
                if self._reusable(prev, new, finals, retained) and _has_read_its_snapshot(inst):
                    reuse[key] = new
                    retained.update(key)
        dropped: list[Key] = []
        for key, inst in sorted(self._dataflows.items()):
            if inst.log_variant is None and key not in reuse:
                dropped.append(key)
                out.extend(self._remove_dataflow(inst))
        for key, new in reuse.items():
            for gid in key:
                self._compact(gid, new.as_of or _EMPTY)
        rebuilt: list[Key] = []
        for _cmd, effects in deferred:
            for eff in effects:
                if isinstance(eff, BuildDataflow):
                    key = eff.dataflow.export_ids
                    if key in reuse:
                        continue
                    rebuilt.append(key)
                    out.extend(self._perform(eff, None))
                else:
                    out.extend(self._perform(eff, None))
        if reconnect:
            self.reused_dataflows += len(reuse)
            out.append(Reconciled(tuple(reuse), tuple(rebuilt), tuple(dropped)))
        return out

    def _reusable(
        self,
        old: DataflowDescription,
        new: DataflowDescription,
        finals: Mapping[GlobalId, Antichain],
        retained: set[GlobalId],
    ) -> bool:
        if new.subscribe_ids or new.copy_to_ids or new.as_of is None or old.as_of is None:
            return False
        if not old.compatible_with(new):
            return False
        for gid in new.export_ids:
            if not finals.get(gid, old.as_of) <= new.as_of:
                return False
            if not self._executor.since(gid) <= new.as_of:
                return False
        return all(imp.id in retained for imp in new.index_imports)

    # -- effects --------------------------------------------------------------------

    def _perform(self, eff: ReplicaEffect, handle: DataflowHandle | None) -> list[ReplicaOutput]:
        if isinstance(eff, InitializeInstance):
            self._initialize(eff.config)
        elif isinstance(eff, SetConfiguration):
            self._params = eff.effective
        elif isinstance(eff, BuildDataflow):
            if handle is None:  # during reconciliation the caller installs it
                handle = self._install(eff.dataflow)
            self._register(eff.dataflow, handle)
        elif isinstance(eff, RunDataflow):
            return self._run(eff.export_ids)
        elif isinstance(eff, CompactCollection):
            self._compact(eff.id, eff.frontier)
        elif isinstance(eff, DropCollection):
            return self._drop(eff.id)
        elif isinstance(eff, ServePeek):
            return self._serve(eff.peek)
        elif isinstance(eff, CancelPendingPeek):
            return self._cancel(eff.uuid)
        elif isinstance(eff, EnableWrites):
            key = self._owner.get(eff.id)
            if eff.id in self._sinks and key is not None and self._dataflows[key].running:
                return self._maybe_write(eff.id)
        return []

    def _initialize(self, config: InstanceConfig) -> None:
        if self._config is None:
            self._config = config
        for variant, gid in config.logging.index_logs:
            if gid in self._owner:
                continue
            handle = self._executor.install(log_dataflow(variant, gid))
            key = (gid,)
            self._dataflows[key] = _Dataflow(
                key, log_dataflow(variant, gid), handle, {gid}, (), {}, True, variant
            )
            self._owner[gid] = key
            self._log_keys.add(key)
            if self._log_upper:
                self._executor.feed(handle, gid, (), Antichain([self._log_upper]))

    def _register(self, df: DataflowDescription, handle: DataflowHandle) -> None:
        key = df.export_ids
        sources = self._executor.source_inputs(handle)
        as_of = df.as_of if df.as_of is not None else _EMPTY
        self._dataflows[key] = _Dataflow(
            key, df, handle, set(key), sources, dict.fromkeys(sources, _BOTTOM)
        )
        for gid in key:
            self._owner[gid] = key
        for s in df.sink_exports:
            if isinstance(s.connection, SubscribeConnection):
                self._subscribes[s.id] = _Subscribe(up_to=s.up_to)
        for gid in df.persist_sink_ids:
            self._sinks[gid] = _Sink(as_of, write_lower=as_of)
            self._retired_sinks.discard(gid)
        copy_tos = [s for s in df.sink_exports if isinstance(s.connection, CopyToConnection)]
        if copy_tos:
            schemas = validate_dataflow(df)
            at = int(as_of.elements[0]) if len(as_of.elements) == 1 else None
            for sk in copy_tos:
                assert isinstance(sk.connection, CopyToConnection)
                self._copy_tos[sk.id] = _CopyTo(sk.connection.url, at, schemas[sk.from_id])
        self.built_dataflows += 1

    def _run(self, key: Key) -> list[ReplicaOutput]:
        inst = self._dataflows.get(key)
        if inst is None or inst.running:
            return []
        inst.running = True
        as_of = inst.desc.as_of if inst.desc.as_of is not None else _EMPTY
        if as_of.is_empty():
            return []
        out: list[ReplicaOutput] = []
        for src in inst.sources:
            read = self._reads.get(src)
            if read is None:
                read = self._reads[src] = _Read(as_of, _BOTTOM, set())
            else:
                # Restart below every reader's progress, so that each one takes only
                # exact updates (times at or past what it was fed) from the new read;
                # never below a reader's reported input frontier (fed stepped back),
                # which is what the controller's holds keep readable in storage.
                needed = [
                    _step_back(self._dataflows[k].fed[src]).join(
                        self._dataflows[k].desc.as_of or _EMPTY
                    )
                    for k in sorted(read.readers)
                ]
                read.as_of = Antichain.meet_all([as_of, *needed])
                read.upper = _BOTTOM  # restarted: the driver delivers the snapshot again
            read.readers.add(key)
            self._stopped_reads.discard(src)
            out.append(ReadSource(src, read.as_of))
        return out

    def _compact(self, gid: GlobalId, frontier: Antichain) -> None:
        if gid not in self._owner:
            return
        since = self._executor.since(gid)
        if since <= frontier and since != frontier:
            self._executor.allow_compaction(gid, frontier)

    def _drop(self, gid: GlobalId) -> list[ReplicaOutput]:
        key = self._owner.pop(gid, None)
        if key is None:
            return []
        inst = self._dataflows[key]
        self._executor.allow_compaction(gid, _EMPTY)
        inst.live.discard(gid)
        self._forget_export(gid)
        if inst.live:
            return []
        del self._dataflows[key]
        return self._release_reads(inst)

    def _remove_dataflow(self, inst: _Dataflow) -> list[ReplicaOutput]:
        for gid in sorted(inst.live):
            self._executor.allow_compaction(gid, _EMPTY)
            self._owner.pop(gid, None)
            self._forget_export(gid)
        inst.live.clear()
        del self._dataflows[inst.key]
        return self._release_reads(inst)

    def _forget_export(self, gid: GlobalId) -> None:
        self._subscribes.pop(gid, None)
        copy_to = self._copy_tos.pop(gid, None)
        if copy_to is not None and copy_to.writing:
            self._retired_copy_tos[gid] = self._retired_copy_tos.get(gid, 0) + 1
        if self._sinks.pop(gid, None) is not None:
            self._retired_sinks.add(gid)
        lag = self._lag_rows.pop(gid, None)
        if lag is not None:
            self._log("frontier_lag", lag, -1)

    def _release_reads(self, inst: _Dataflow) -> list[ReplicaOutput]:
        out: list[ReplicaOutput] = []
        for src in inst.sources:
            read = self._reads.get(src)
            if read is None or inst.key not in read.readers:
                continue
            read.readers.discard(inst.key)
            if not read.readers:
                del self._reads[src]
                self._stopped_reads.add(src)
                out.append(StopReading(src))
        return out

    # -- peeks ----------------------------------------------------------------------

    def _serve(self, peek: PeekDescription) -> list[ReplicaOutput]:
        pending = _PendingPeek(peek, self._now())
        if peek.target == "persist":
            self._persist_peeks[peek.uuid] = pending
            return [PeekPersist(peek.uuid, peek.id, peek.timestamp, peek.finishing)]
        self._peeks[peek.uuid] = pending
        return []

    def _cancel(self, uuid: _uuid.UUID) -> list[ReplicaOutput]:
        if self._peeks.pop(uuid, None) is None:
            if self._persist_peeks.pop(uuid, None) is None:
                return []
            self._retire_persist(uuid)
        return [self._respond(PeekResponse(uuid, PeekCanceled()))]

    def _retire_persist(self, uuid: _uuid.UUID) -> None:
        """A handed-out persist read of ``uuid`` will complete, but answers nothing now."""
        self._retired_persist[uuid] = self._retired_persist.get(uuid, 0) + 1

    def _serve_peeks(self) -> list[ReplicaOutput]:
        out: list[ReplicaOutput] = []
        for uuid, pending in sorted(self._peeks.items()):
            result = self._try_peek(pending.peek)
            if result is None:
                continue
            del self._peeks[uuid]
            out.append(self._answer(pending, result))
        return out

    def _answer(self, pending: _PendingPeek, result: PeekResult) -> Respond:
        p = pending.peek
        self._log("peek_durations", (str(p.uuid), str(p.id), self._now() - pending.received), 1)
        return self._respond(PeekResponse(p.uuid, result))

    def _try_peek(self, p: PeekDescription) -> PeekResult | None:
        """The answer to an index peek, or ``None`` while its upper has not passed its time."""
        ex = self._executor
        if p.id not in self._owner:
            return PeekError(
                f"collection {p.id} was dropped before the peek at {p.timestamp} was ready"
            )
        if ex.upper(p.id).less_equal(p.timestamp):
            blocked = self._unreadable_input(p.id)
            if blocked is not None:
                return PeekError(f"peek of {p.id} at {p.timestamp}: {blocked}")
            return None
        since = ex.since(p.id)
        if not since.less_equal(p.timestamp):
            return PeekError(compaction_error_message(since, p.timestamp))
        try:
            result = ex.peek(p.id, p.timestamp, p.finishing, p.literal_constraints)
        except (ExecutorError, PlanError) as e:
            return PeekError(f"peek of {p.id} at {p.timestamp}: {e}")
        return self._limit(result)

    def _limit(self, result: PeekResult) -> PeekResult:
        limit = self._params.max_result_size
        if isinstance(result, PeekRows) and limit is not None and result_size(result.rows) > limit:
            return PeekError(f"{RESULT_TOO_LARGE} {limit} bytes")
        return result

    @atomic
    def complete_persist_peek(
        self,
        uuid: _uuid.UUID,
        rows: Mapping[Row, int] | None = None,
        *,
        error: str | None = None,
    ) -> None:
        """The driver read a persist peek's collection: ``rows`` (row -> count) at its time, or ``error``.

        The replica applies the peek's finishing and the result-size limit. A
        result for a peek that was cancelled or belonged to an earlier
        connection is ignored.
        """
        pending = self._persist_peeks.get(uuid)
        if pending is None:
            retired = self._retired_persist.get(uuid, 0)
            if retired:
                if retired == 1:
                    del self._retired_persist[uuid]
                else:
                    self._retired_persist[uuid] = retired - 1
                return
            raise UnknownPersistPeek(f"no persist peek {uuid} was handed to the driver")
        self._settled = False
        if error is not None:
            result: PeekResult = PeekError(error)
        else:
            result = self._limit(peek_result(rows or {}, {}, pending.peek.finishing))
        del self._persist_peeks[uuid]
        out: list[ReplicaOutput] = [self._answer(pending, result)]
        out.extend(self._pay_owed())
        self._outbox.extend(out)

    # -- resource limits ------------------------------------------------------------

    @atomic
    def fail_largest_dataflow(self, reason: str) -> tuple[GlobalId, ...]:
        """The replica is over its memory limit (``reason`` says by how much): fail the
        dataflow holding the most state (the executor's estimate, in records; ties go to the
        newest) and return its exports; ``()`` if no running dataflow holds any.

        Its exports hold the error ``dataflow <exports> exceeded the replica's memory
        limit: <reason>`` from the next time on (reads there answer it, see
        :meth:`~tidegate.spec.executor.contract.Executor.fail`); the state is freed. The
        controller sees errored collections, as for any dataflow error; nothing else changes.
        """
        sizes = self._executor.state_records()
        candidates = [
            (sizes[inst.handle], inst.handle, inst)
            for inst in self._dataflows.values()
            if inst.live and sizes.get(inst.handle, 0) > 0
        ]
        if not candidates:
            return ()
        records, _, inst = max(candidates, key=lambda c: (c[0], c[1]))
        exports = tuple(sorted(inst.live, key=lambda g: g.sort_key))
        names = ", ".join(str(g) for g in exports)
        self._executor.fail(
            inst.handle,
            f"dataflow {names} {MEMORY_LIMIT_EXCEEDED}: {reason} ({records} records, the most)",
        )
        self._settled = False
        self._all_dirty = True
        return exports

    # -- storage --------------------------------------------------------------------

    @atomic
    def source_failed(self, collection_id: GlobalId, error: str) -> None:
        """The driver cannot read storage collection ``collection_id``: ``error`` says why (its
        data is corrupt or missing, a definite failure, not a slow store).

        Until data for it arrives again (:meth:`feed_source`, after a repair), every index
        peek that waits on it (directly, or through imported indexes) answers a ``PeekError``
        naming ``error`` rather than waiting for ever. A collection the replica does not
        read is ignored.
        """
        if collection_id not in self._reads:
            return
        self._source_errors[collection_id] = error
        self._settled = False

    def source_errors(self) -> Mapping[GlobalId, str]:
        """Storage collections reported unreadable (:meth:`source_failed`) and not fed since."""
        return dict(self._source_errors)

    def _unreadable_input(self, gid: GlobalId) -> str | None:
        """Why ``gid`` cannot advance, if an input storage collection of its dataflow (or of a
        dataflow whose index it imports) is unreadable; else ``None``."""
        if not self._source_errors:
            return None
        seen: set[Key] = set()
        todo = [gid]
        while todo:
            key = self._owner.get(todo.pop())
            if key is None or key in seen:
                continue
            seen.add(key)
            inst = self._dataflows[key]
            for src in inst.sources:
                error = self._source_errors.get(src)
                if error is not None:
                    return f"storage collection {src} is unreadable: {error}"
            todo.extend(imp.id for imp in inst.desc.index_imports)
        return None

    @atomic
    def feed_source(
        self, collection_id: GlobalId, updates: Iterable[Update], upper: Antichain
    ) -> None:
        """Storage data for a collection the replica reads: updates in ``[previous upper, upper)``.

        Deliveries for a collection the replica stopped reading are ignored
        (they may cross the :class:`StopReading`).
        """
        read = self._reads.get(collection_id)
        if read is None:
            if collection_id in self._stopped_reads:
                return
            raise UnknownSource(
                f"storage data for {collection_id}, which the replica does not read"
            )
        batch = list(updates)
        if not read.upper <= upper:
            raise SourceFeedRejected(
                f"{collection_id}: upper {_fmt(upper)} is behind the delivered {_fmt(read.upper)}"
            )
        for u in batch:
            if type(u) is not tuple or len(u) != 3:
                raise SourceFeedRejected(
                    f"{collection_id}: {u!r} is not a (row, time, diff) update"
                )
            if not read.upper.less_equal(u[1]) or upper.less_equal(u[1]):
                raise SourceFeedRejected(
                    f"{collection_id}: update at {u[1]!r} outside [{_fmt(read.upper)}, {_fmt(upper)})"
                )
        for key in sorted(read.readers):
            inst = self._dataflows[key]
            fed = inst.fed[collection_id]
            if fed <= upper and fed != upper:
                mine = [u for u in batch if fed.less_equal(u[1])]
                try:
                    self._executor.feed(inst.handle, collection_id, mine, upper)
                except (ExecutorError, PlanError) as e:
                    raise SourceFeedRejected(f"{collection_id}: {e}") from None
                inst.fed[collection_id] = upper
                self._dirty.update(key)
        read.upper = upper
        self._source_errors.pop(collection_id, None)  # readable again
        self._settled = False

    @atomic
    def write_completed(self, sink_id: GlobalId, upper: Antichain) -> None:
        """The in-flight :class:`WriteOutput` of ``sink_id`` was appended: the collection's upper is ``upper``."""
        sink = self._sink(sink_id)
        if sink is None:
            return
        if sink.in_flight is None or sink.in_flight != upper:
            raise WriteNotInFlight(
                f"write_completed({sink_id}, {_fmt(upper)}): the write in flight is "
                f"{'none' if sink.in_flight is None else _fmt(sink.in_flight)}"
            )
        sink.in_flight = None
        sink.has_written = True
        self._settled = False
        self._advance_sink(sink, upper)
        self._dirty.add(sink_id)
        self._outbox.extend(self._publish_after_callback())

    @atomic
    def write_failed(self, sink_id: GlobalId, actual_upper: Antichain) -> None:
        """``sink_id``'s storage collection is at ``actual_upper`` (not where a write expected it).

        Another replica wrote first: the replica advances without writing what
        is already there (its output frontier may lag its write frontier).
        Also usable without a write in flight, to report the collection's
        upper as observed (e.g. in read-only mode).
        """
        sink = self._sink(sink_id)
        if sink is None:
            return
        sink.in_flight = None
        self._settled = False
        target = sink.write_lower.join(actual_upper) if sink.has_written else actual_upper
        self._advance_sink(sink, target)
        self._dirty.add(sink_id)
        self._outbox.extend(self._publish_after_callback())

    def _sink(self, sink_id: GlobalId) -> _Sink | None:
        sink = self._sinks.get(sink_id)
        if sink is None and sink_id not in self._retired_sinks:
            raise UnknownSink(f"{sink_id} is not a materialized view this replica runs")
        return sink

    @staticmethod
    def _advance_sink(sink: _Sink, upper: Antichain) -> None:
        sink.write_lower = upper
        sink.storage_upper = upper if sink.storage_upper is None else sink.storage_upper.join(upper)
        sink.buffered = {k: d for k, d in sink.buffered.items() if upper.less_equal(k[1])}

    def _publish_after_callback(self) -> list[ReplicaOutput]:
        if not self._session.stage.is_computation or self._initializing:
            return []
        return [*self._publish(), *self._pay_owed()]

    # -- progress -------------------------------------------------------------------

    @atomic
    def step(self) -> None:
        """Run the executor on what has arrived; report, stream, write and answer what is ready.

        Does nothing before ``InitializationComplete`` (nothing may be sent then), nor
        when nothing has arrived since the last step (unless introspection logging is
        on: then every step is a logged event).
        """
        if not self._session.stage.is_computation or self._initializing:
            return
        if self._settled and not self._logging():
            return
        start = self._now()
        self._advance_logs()
        batches = self._executor.step()
        self._steps += 1
        for batch in batches:
            self._absorb(batch)
        if batches:
            self._mark_moved({b.id for b in batches})
        out = self._publish()
        out.extend(self._serve_peeks())
        out.extend(self._pay_owed())
        self._log("dataflow_steps", (self._steps, self._now() - start, len(batches)), 1)
        self._record_lag()
        self._settled = True
        self._outbox.extend(out)

    def _absorb(self, batch: ExportBatch) -> None:
        copy_to = self._copy_tos.get(batch.id)
        if copy_to is not None:
            if not copy_to.writing and copy_to.as_of is not None:
                at = copy_to.as_of
                counts, errors = copy_to.counts, copy_to.errors
                for row, t, d in batch.updates:
                    if t <= at:
                        n = counts.get(row, 0) + d
                        if n:
                            counts[row] = n
                        else:
                            counts.pop(row, None)
                for m, t, d in batch.errors:
                    if t <= at:
                        n = errors.get(m, 0) + d
                        if n:
                            errors[m] = n
                        else:
                            errors.pop(m, None)
            copy_to.upper = batch.upper
            return
        sub = self._subscribes.get(batch.id)
        if sub is not None:
            if not sub.upper.elements:
                return  # complete (its up_to reached): nothing more goes out
            for row, t, d in batch.updates:
                k = (t, row)
                n = sub.updates.get(k, 0) + d
                if n:
                    sub.updates[k] = n
                else:
                    sub.updates.pop(k, None)
            errs = sorted(m for m, _t, d in batch.errors if d)
            if errs and sub.error is None:
                sub.error = errs[0]
            sub.upper = _EMPTY if sub.up_to <= batch.upper else batch.upper
            return
        sink = self._sinks.get(batch.id)
        if sink is not None:
            for row, t, d in batch.updates:
                k2 = (row, t)
                n = sink.buffered.get(k2, 0) + d
                if n:
                    sink.buffered[k2] = n
                else:
                    sink.buffered.pop(k2, None)
            sink.computed = batch.upper

    def _mark_moved(self, moved: set[GlobalId]) -> None:
        """Exports in ``moved`` changed (contents or upper): they and their importers may publish."""
        dirty = self._dirty
        dirty.update(moved)
        for key, inst in self._dataflows.items():
            for imp in inst.desc.index_imports:
                if imp.id in moved:
                    dirty.update(key)
                    break

    def _publish(self) -> list[ReplicaOutput]:
        """Frontier reports, subscribe batches and writes for exports whose offer may have moved.

        Only exports marked dirty are looked at (an unmarked export's offer equals
        what was last offered, so it has nothing to report); an export skipped
        because it is not yet running stays marked. Materialized views are
        always considered for a write.
        """
        owner = self._owner
        dirty = self._dirty
        if self._all_dirty:
            self._all_dirty = False
            dirty.update(owner)
        candidates = dirty.union(self._sinks) if self._sinks else set(dirty)
        if not candidates:
            return []
        out: list[ReplicaOutput] = []
        collection = self._session.collection
        for gid in sorted(candidates):
            key = owner.get(gid)
            if key is None:
                dirty.discard(gid)
                continue
            rec = collection(gid)
            if rec is None or rec.dropped or not self._dataflows[key].running:
                continue
            if gid in dirty:
                dirty.discard(gid)
                if rec.kind is CollectionKind.SUBSCRIBE:
                    out.extend(self._publish_subscribe(gid))
                elif rec.kind is CollectionKind.COPY_TO:
                    out.extend(self._publish_copy_to(gid))
                else:
                    resp = self._frontiers(gid, rec.kind, self._dataflows[key])
                    if resp is not None:
                        self._session.on_response(resp, checked=True)
                        out.append(Respond(resp))
            if rec.kind is CollectionKind.MATERIALIZED_VIEW and rec.writable:
                out.extend(self._maybe_write(gid))
        return out

    def _frontiers(self, gid: GlobalId, kind: CollectionKind, inst: _Dataflow) -> Frontiers | None:
        """The report of every frontier of ``gid`` that moved and may be reported now (all checked)."""
        upper = self._executor.upper(gid)
        write: Antichain | None = upper
        if kind is CollectionKind.MATERIALIZED_VIEW:
            write = self._sinks[gid].storage_upper
        read = upper if inst.log_variant else self._input_frontier(inst)
        offer = (write, read, upper)
        if self._offered.get(gid) == offer:
            return None
        self._offered[gid] = offer
        w = self._reportable(gid, FrontierKind.WRITE, write)
        i = self._reportable(gid, FrontierKind.INPUT, read)
        o = self._reportable(gid, FrontierKind.OUTPUT, upper)
        if w is None and i is None and o is None:
            return None
        return Frontiers(gid, write=w, input=i, output=o)

    def _reportable(
        self, gid: GlobalId, kind: FrontierKind, value: Antichain | None
    ) -> Antichain | None:
        """``value`` if it is new for ``gid``'s ``kind`` and the session allows reporting it."""
        session = self._session
        if value is None or session.last_reported(gid, kind) == value:
            return None
        return value if session.frontier_report_allowed(gid, kind, value) else None

    def _input_frontier(self, inst: _Dataflow) -> Antichain:
        """Reported input: each source's fed upper stepped back by one (see :meth:`_run`), and imports' uppers."""
        parts = [_step_back(inst.fed[s]) for s in inst.sources]
        for imp in inst.desc.index_imports:
            if imp.id in self._owner:
                inst.import_uppers[imp.id] = self._executor.upper(imp.id)
            parts.append(inst.import_uppers.get(imp.id, _BOTTOM))
        return Antichain.meet_all(parts)

    def _publish_subscribe(self, gid: GlobalId) -> list[ReplicaOutput]:
        session = self._session
        if session.subscribe_ended(gid):
            return []
        sub = self._subscribes[gid]
        lower = session.subscribe_next_lower(gid)
        if not (lower <= sub.upper and lower != sub.upper):
            return []
        if sub.error is not None:
            batch = SubscribeBatch(lower, sub.upper, (), sub.error)
        else:
            ups = sorted(
                ((t, row, d) for (t, row), d in sub.updates.items()),
                key=lambda u: (u[0], row_sort_key(u[1])),
            )
            batch = SubscribeBatch(lower, sub.upper, tuple(ups))
        sub.updates = {}
        return [self._respond(SubscribeResponse(gid, batch))]

    def _publish_copy_to(self, gid: GlobalId) -> list[ReplicaOutput]:
        """Once the copy-to's contents at its as_of are complete: an error answer, or the write."""
        copy_to = self._copy_tos.get(gid)
        if copy_to is None or copy_to.writing or self._session.copy_to_answered(gid):
            return []
        at = copy_to.as_of
        if at is None or copy_to.upper.less_equal(at):
            return []
        errors = sorted(m for m, n in copy_to.errors.items() if n)
        if errors:
            return [self._respond(CopyToResponse(gid, CopyToError(errors[0])))]
        negative = sorted((r for r, n in copy_to.counts.items() if n < 0), key=row_sort_key)
        if negative:
            message = (
                f"copy-to of {gid} at {at}: row {negative[0]!r} has a negative "
                f"multiplicity ({copy_to.counts[negative[0]]})"
            )
            return [self._respond(CopyToResponse(gid, CopyToError(message)))]
        rows = tuple(
            sorted(
                ((r, n) for r, n in copy_to.counts.items() if n), key=lambda p: row_sort_key(p[0])
            )
        )
        copy_to.writing = True
        copy_to.counts, copy_to.errors = {}, {}
        return [WriteCopyTo(gid, copy_to.url, at, copy_to.schema, rows)]

    @atomic
    def copy_to_completed(self, sink_id: GlobalId, rows: int) -> None:
        """The :class:`WriteCopyTo` of ``sink_id`` wrote ``rows`` rows: answer the controller.

        Outcomes must be reported in the order the writes were handed out. An
        outcome of a write whose copy-to was dropped, or belonged to an earlier
        connection, answers nothing.
        """
        self._copy_to_outcome(sink_id, CopyToRowCount(rows))

    @atomic
    def copy_to_failed(self, sink_id: GlobalId, message: str) -> None:
        """The :class:`WriteCopyTo` of ``sink_id`` failed (``message`` says why): answer with the error."""
        self._copy_to_outcome(sink_id, CopyToError(message))

    def _copy_to_outcome(self, sink_id: GlobalId, result: CopyToRowCount | CopyToError) -> None:
        # Outcomes come in the order the writes were handed out: a retired write (dropped, or
        # of an earlier iteration) was handed out before the live one of the same sink.
        retired = self._retired_copy_tos.get(sink_id, 0)
        if retired:
            if retired == 1:
                del self._retired_copy_tos[sink_id]
            else:
                self._retired_copy_tos[sink_id] = retired - 1
            return
        copy_to = self._copy_tos.get(sink_id)
        if copy_to is None or not copy_to.writing:
            raise UnknownCopyTo(f"no copy-to write of {sink_id} was handed to the driver")
        self._settled = False
        copy_to.writing = False
        copy_to.as_of = None  # answered: nothing more to gather or write
        out: list[ReplicaOutput] = [self._respond(CopyToResponse(sink_id, result))]
        out.extend(self._pay_owed())
        self._outbox.extend(out)

    def _maybe_write(self, gid: GlobalId) -> list[ReplicaOutput]:
        sink = self._sinks[gid]
        if sink.in_flight is not None:
            return []
        if not (sink.write_lower <= sink.computed and sink.write_lower != sink.computed):
            return []
        ups = sorted(
            (
                (row, t, d)
                for (row, t), d in sink.buffered.items()
                if sink.write_lower.less_equal(t) and not sink.computed.less_equal(t)
            ),
            key=lambda u: (u[1], row_sort_key(u[0])),
        )
        sink.in_flight = sink.computed
        return [WriteOutput(gid, tuple(ups), sink.write_lower, sink.computed)]

    def _pay_owed(self) -> list[ReplicaOutput]:
        """``[]`` reports and ``DroppedAt`` owed for dropped collections (reference §6.1)."""
        session = self._session
        out: list[ReplicaOutput] = []
        for gid, kinds in session.owed_frontier_reports().items():
            values = {k: _EMPTY for k in kinds}
            out.append(
                self._respond(
                    Frontiers(
                        gid,
                        write=values.get(FrontierKind.WRITE),
                        input=values.get(FrontierKind.INPUT),
                        output=values.get(FrontierKind.OUTPUT),
                    )
                )
            )
        for gid in session.owed_dropped_at():
            resp = SubscribeResponse(gid, SubscribeDroppedAt(session.subscribe_next_lower(gid)))
            out.append(self._respond(resp))
        for gid in session.owed_copy_to_dropped():
            out.append(self._respond(CopyToResponse(gid, CopyToDropped())))
        return out

    def _respond(self, resp: ComputeResponse) -> Respond:
        self._session.on_response(resp)
        return Respond(resp)

    # -- introspection logs ---------------------------------------------------------

    def _now(self) -> int:
        return self._clock() if self._clock is not None else self._steps

    def _logging(self) -> bool:
        return self._config is not None and self._config.logging.enable_logging

    def _log(self, variant: str, row: Row, diff: int) -> None:
        if self._logging():
            self._log_pending.setdefault(variant, []).append((row, diff))

    def _advance_logs(self) -> None:
        """Stamp pending log events at the log time and advance every log's upper past it."""
        t = max(self._log_upper, self._now())
        pending, self._log_pending = self._log_pending, {}
        for key in sorted(k for k in self._log_keys if k in self._dataflows):
            inst = self._dataflows[key]
            if inst.log_variant is None:
                continue
            rows = pending.get(inst.log_variant, ())
            self._executor.feed(
                inst.handle, key[0], [(r, t, d) for r, d in rows], Antichain([t + 1])
            )
        self._log_upper = t + 1

    def _record_lag(self) -> None:
        if not self._logging():
            return
        now = self._log_upper
        for gid, rec in sorted(self._session.collections.items()):
            if rec.kind not in (CollectionKind.INDEX, CollectionKind.MATERIALIZED_VIEW):
                continue
            old = self._lag_rows.get(gid)
            new: Row | None = None
            if gid in self._owner:
                upper = self._executor.upper(gid)
                if upper.elements:
                    new = (str(gid), max(0, now - int(upper.elements[0])))
            if new == old:
                continue
            if old is not None:
                self._log("frontier_lag", old, -1)
                del self._lag_rows[gid]
            if new is not None:
                self._log("frontier_lag", new, 1)
                self._lag_rows[gid] = new
