"""Hypothesis state machines for the compute protocol, reusable against your own implementations.

* :class:`ProtocolSessionsMachine` drives a :class:`ControllerSession` and a
  :class:`ReplicaSession` in lockstep with legal and illegal commands and
  responses, judged by an independent model of the rules: every legal step is
  accepted (with the right replica effects), every illegal one is rejected with
  the right :class:`ProtocolError` and leaves both sessions unchanged. Override
  :meth:`~ProtocolSessionsMachine.make_controller_session` /
  :meth:`~ProtocolSessionsMachine.make_replica_session` to check another
  implementation of the sessions.
* :class:`ReplicaConformanceMachine` sends legal command sequences to a replica
  (:class:`ReplicaUnderTest`: ``handle(command)`` and ``step()`` return
  responses) and checks every response with a :class:`ReplicaSession`; at the
  end it cancels every peek, drops every collection and checks that the replica
  pays everything it owes. Override :meth:`~ReplicaConformanceMachine.make_replica`
  to test your replica; the default is :class:`ProtocolModelReplica`.

Use them as ``TestX = MyMachine.TestCase`` in a pytest module.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..errors import (
    AllowCompactionRegression,
    CollectionDropped,
    CompactionPastPendingPeek,
    DataflowAsOfUnset,
    DroppedAtMismatch,
    DuplicateAllowWrites,
    DuplicateCollection,
    DuplicatePeek,
    DuplicatePeekResponse,
    DuplicateSchedule,
    FrontierBeforeAsOf,
    FrontierRegression,
    FrontiersForSubscribe,
    ImportSinceViolation,
    InvalidPeekRows,
    NotAnIndex,
    NotASubscribe,
    ProtocolError,
    ResponseAfterClose,
    ResponseAfterDrop,
    StageViolation,
    SubscribeGap,
    SubscribeNotConsolidated,
    SubscribeUpdateOutOfRange,
    UnknownCollection,
    UnknownPeek,
    UnrequestedCancel,
    UnrequestedDroppedAt,
)
from ..frontier import Antichain
from ..ids import GlobalId
from ..protocol import (
    AllowCompaction,
    AllowWrites,
    BeginComputation,
    BuildDesc,
    CancelPeek,
    CancelPendingPeek,
    CollectionKind,
    ComputeCommand,
    ComputeParameters,
    ComputeResponse,
    ControllerSession,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    DropCollection,
    FrontierKind,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InitializeInstance,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    ReleaseDataflow,
    ReplicaEffect,
    ReplicaSession,
    RunDataflow,
    Schedule,
    ServePeek,
    SinkExport,
    Stage,
    StartIteration,
    Status,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)
from ..strategies.protocol import compute_parameters

__all__ = [
    "ProtocolCommandModel",
    "ProtocolModelReplica",
    "ProtocolSessionsMachine",
    "ReplicaConformanceFailure",
    "ReplicaConformanceMachine",
    "ReplicaUnderTest",
]

_EMPTY = Antichain()
_SINK_KINDS = (CollectionKind.INDEX, CollectionKind.MATERIALIZED_VIEW, CollectionKind.SUBSCRIBE)


def _at(t: int) -> Antichain:
    return Antichain.from_elem(t)


def _frontiers(gid: GlobalId, values: dict[FrontierKind, Antichain]) -> Frontiers:
    """A ``Frontiers`` report carrying ``values`` (other kinds ``None``)."""
    return Frontiers(
        gid,
        write=values.get(FrontierKind.WRITE),
        input=values.get(FrontierKind.INPUT),
        output=values.get(FrontierKind.OUTPUT),
    )


def _succ(f: Antichain, by: int = 1) -> Antichain:
    """``f`` moved ``by`` steps forward (``[]`` stays ``[]``)."""
    return _EMPTY if f.is_empty() else _at(f.elements[0] + by)


@dataclass
class _Col:
    kind: CollectionKind
    as_of: Antichain
    since: Antichain
    exports: tuple[GlobalId, ...] = ()
    scheduled: bool = False
    writable: bool = False
    dropped: bool = False


@dataclass
class _Peek:
    peek: PeekDescription
    cancelled: bool = False
    answered: bool = False


@dataclass
class _Model:
    """The machine's own picture of one iteration (deliberately independent of the ledger)."""

    stage: Stage = Stage.AWAITING_HELLO
    cols: dict[GlobalId, _Col] = field(default_factory=dict)
    peeks: dict[_uuid.UUID, _Peek] = field(default_factory=dict)
    reported: dict[tuple[GlobalId, FrontierKind], Antichain] = field(default_factory=dict)
    sub_upper: dict[GlobalId, Antichain] = field(default_factory=dict)
    sub_ended: set[GlobalId] = field(default_factory=set)

    def live(self, kinds: Sequence[CollectionKind] = tuple(CollectionKind)) -> list[GlobalId]:
        return sorted(g for g, c in self.cols.items() if not c.dropped and c.kind in kinds)

    def dropped(self) -> list[GlobalId]:
        return sorted(g for g, c in self.cols.items() if c.dropped)

    def closed(self, gid: GlobalId) -> bool:
        if self.cols[gid].kind is CollectionKind.SUBSCRIBE:
            return gid in self.sub_ended
        return all(self.reported.get((gid, k)) == _EMPTY for k in FrontierKind)

    def owed_empty(self, gid: GlobalId) -> tuple[FrontierKind, ...]:
        c = self.cols[gid]
        if not c.dropped or c.kind is CollectionKind.SUBSCRIBE:
            return ()
        return tuple(k for k in FrontierKind if self.reported.get((gid, k)) != _EMPTY)

    def owes_dropped_at(self, gid: GlobalId) -> bool:
        c = self.cols[gid]
        return c.dropped and c.kind is CollectionKind.SUBSCRIBE and gid not in self.sub_ended

    def pending(self) -> list[_uuid.UUID]:
        return sorted(u for u, p in self.peeks.items() if not p.answered)

    def next_lower(self, gid: GlobalId) -> Antichain:
        return self.sub_upper.get(gid, _at(0))

    def ready(self) -> set[tuple[GlobalId, ...]]:
        groups = {c.exports for c in self.cols.values() if c.exports}
        return {
            g
            for g in groups
            if all(self.cols[x].scheduled or self.cols[x].dropped for x in g)
            and any(not self.cols[x].dropped for x in g)
        }


class ProtocolCommandModel(RuleBasedStateMachine):
    """Legal compute-command sequences, generated from a model; subclasses say where they go.

    Subclasses implement :meth:`deliver` (send one legal command to whatever is
    under test). The model tracks the stage, the collections (kind, as_of,
    since, scheduled, writable, dropped) and the peeks of the current iteration.
    """

    def __init__(self) -> None:
        super().__init__()
        self.model = _Model()
        self._ids = 0
        self._uuids = 0
        self._nonces = 0
        self.abandoned: list[_uuid.UUID] = []
        self.cancel_was_new = False

    # -- hooks ----------------------------------------------------------------------

    def deliver(self, cmd: ComputeCommand) -> list[ReplicaEffect] | None:
        """Send a legal command to the implementation under test (model already updated)."""
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------

    def fresh_id(self) -> GlobalId:
        self._ids += 1
        return GlobalId.user(self._ids)

    def fresh_uuid(self) -> _uuid.UUID:
        self._uuids += 1
        return _uuid.UUID(int=self._uuids)

    @property
    def setup_stage(self) -> bool:
        return self.model.stage in (Stage.INITIALIZATION, Stage.READ_ONLY, Stage.READ_WRITE)

    def send(self, cmd: ComputeCommand) -> list[ReplicaEffect] | None:
        """Update the model with a legal command, then deliver it."""
        m = self.model
        if isinstance(cmd, Hello):
            self.abandoned = m.pending()
            self.model = _Model(stage=Stage.CREATION)
            return self.deliver(cmd)
        if isinstance(cmd, CreateInstance):
            m.stage = Stage.INITIALIZATION
            for _name, gid in cmd.config.logging.index_logs:
                m.cols[gid] = _Col(CollectionKind.LOG_INDEX, _at(0), _at(0))
        elif isinstance(cmd, InitializationComplete):
            rw = any(c.writable for c in m.cols.values())
            m.stage = Stage.READ_WRITE if rw else Stage.READ_ONLY
        elif isinstance(cmd, CreateDataflow):
            df = cmd.dataflow
            as_of = df.as_of if df.as_of is not None else _EMPTY
            for e in df.index_exports:
                m.cols[e.id] = _Col(CollectionKind.INDEX, as_of, as_of, df.export_ids)
            for s in df.sink_exports:
                kind = (
                    CollectionKind.SUBSCRIBE
                    if isinstance(s.connection, SubscribeConnection)
                    else CollectionKind.MATERIALIZED_VIEW
                )
                m.cols[s.id] = _Col(kind, as_of, as_of, df.export_ids)
        elif isinstance(cmd, Schedule):
            m.cols[cmd.id].scheduled = True
        elif isinstance(cmd, AllowWrites):
            m.cols[cmd.id].writable = True
            if m.stage is Stage.READ_ONLY:
                m.stage = Stage.READ_WRITE
        elif isinstance(cmd, AllowCompaction):
            m.cols[cmd.id].since = cmd.frontier
            m.cols[cmd.id].dropped = cmd.frontier.is_empty()
        elif isinstance(cmd, Peek):
            m.peeks[cmd.uuid] = _Peek(cmd.peek)
        elif isinstance(cmd, CancelPeek):
            p = m.peeks[cmd.uuid]
            self.cancel_was_new = not p.cancelled and not p.answered
            p.cancelled = True
        return self.deliver(cmd)

    # -- legal commands -------------------------------------------------------------

    @initialize(stage=st.sampled_from(["awaiting-hello", "creation", "computation", "computation"]))
    def start(self, stage: str) -> None:
        """Begin most runs already computing, so that the steps go to the interesting stage."""
        if stage != "awaiting-hello":
            self.new_iteration()
        if stage == "computation":
            self.send(
                CreateInstance(
                    InstanceConfig(LoggingConfig(index_logs=(("log", self.fresh_id()),)))
                )
            )
            self.send(InitializationComplete())

    def new_iteration(self) -> None:
        self._nonces += 1
        self.send(Hello(_uuid.UUID(int=(1 << 64) + self._nonces)))

    @rule(data=st.data())
    def hello(self, data: st.DataObject) -> None:
        # Reconnecting often would keep iterations short: only one draw in ten does.
        if self.model.stage is Stage.AWAITING_HELLO or data.draw(st.integers(0, 9)) == 0:
            self.new_iteration()

    @precondition(lambda self: self.model.stage is Stage.CREATION)
    @rule(n_logs=st.integers(0, 2), expiration=st.none() | st.integers(0, 10))
    def create_instance(self, n_logs: int, expiration: int | None) -> None:
        logs = tuple((f"log{i}", self.fresh_id()) for i in range(n_logs))
        config = InstanceConfig(LoggingConfig(index_logs=logs), expiration_offset_ms=expiration)
        self.send(CreateInstance(config))

    @precondition(lambda self: self.model.stage is Stage.INITIALIZATION)
    @rule()
    def initialization_complete(self) -> None:
        self.send(InitializationComplete())

    @precondition(lambda self: self.setup_stage)
    @rule(params=compute_parameters())
    def update_configuration(self, params: ComputeParameters) -> None:
        self.send(UpdateConfiguration(params))

    def legal_dataflow(self, data: st.DataObject) -> DataflowDescription:
        """A dataflow that is legal now: fresh exports, live index imports, as_of past their sinces."""
        m = self.model
        indexes = m.live([CollectionKind.INDEX, CollectionKind.LOG_INDEX])
        imports = (
            data.draw(st.lists(st.sampled_from(indexes), unique=True, max_size=2))
            if indexes
            else []
        )
        floor = Antichain.join_all([m.cols[g].since for g in imports])
        if data.draw(st.integers(0, 9)) == 0:
            as_of = _EMPTY
        else:
            as_of = _succ(floor, data.draw(st.integers(0, 3)))
        kinds = data.draw(st.lists(st.sampled_from(_SINK_KINDS), min_size=1, max_size=3))
        built = GlobalId.transient(self._ids + 1)
        index_exports = []
        sink_exports = []
        for kind in kinds:
            gid = self.fresh_id()
            if kind is CollectionKind.INDEX:
                index_exports.append(IndexExport(gid, built, (0,)))
            else:
                conn = (
                    SubscribeConnection()
                    if kind is CollectionKind.SUBSCRIBE
                    else MaterializedViewConnection()
                )
                sink_exports.append(SinkExport(gid, built, conn))
        return DataflowDescription(
            debug_name=f"df{self._ids}",
            index_imports=tuple(IndexImport(g, g) for g in imports),
            objects_to_build=(BuildDesc(built, None),),
            index_exports=tuple(index_exports),
            sink_exports=tuple(sink_exports),
            as_of=as_of,
        )

    @precondition(lambda self: self.setup_stage)
    @rule(data=st.data())
    def create_dataflow(self, data: st.DataObject) -> None:
        self.send(CreateDataflow(self.legal_dataflow(data)))

    @precondition(
        lambda self: (
            self.setup_stage
            and any(
                not c.scheduled for c in self.model.cols.values() if c.exports and not c.dropped
            )
        )
    )
    @rule(data=st.data())
    def schedule(self, data: st.DataObject) -> None:
        m = self.model
        choices = [g for g in m.live() if m.cols[g].exports and not m.cols[g].scheduled]
        self.send(Schedule(data.draw(st.sampled_from(choices))))

    @precondition(
        lambda self: (
            self.setup_stage
            and any(not c.writable for c in self.model.cols.values() if not c.dropped)
        )
    )
    @rule(data=st.data())
    def allow_writes(self, data: st.DataObject) -> None:
        choices = [g for g in self.model.live() if not self.model.cols[g].writable]
        self.send(AllowWrites(data.draw(st.sampled_from(choices))))

    @precondition(lambda self: self.setup_stage and bool(self.model.live()))
    @rule(data=st.data())
    def allow_compaction(self, data: st.DataObject) -> None:
        gid = data.draw(st.sampled_from(self.model.live()))
        since = self.model.cols[gid].since
        # A controller never compacts past a peek it has neither seen answered nor cancelled.
        held = [
            p.peek.timestamp
            for p in self.model.peeks.values()
            if p.peek.id == gid and p.peek.target == "index" and not p.cancelled and not p.answered
        ]
        if data.draw(st.integers(0, 2)) == 0 and not held:
            frontier = _EMPTY
        else:
            frontier = _succ(since, data.draw(st.integers(0, 3)))
            if held:
                if not since.less_equal(min(held)):
                    return  # a peek below the since pins it: no compaction is legal now
                frontier = frontier.meet(_at(min(held)))
        self.send(AllowCompaction(gid, frontier))

    @precondition(
        lambda self: (
            self.setup_stage
            and bool(self.model.live([CollectionKind.INDEX, CollectionKind.LOG_INDEX]))
        )
    )
    @rule(data=st.data())
    def peek(self, data: st.DataObject) -> None:
        gid = data.draw(
            st.sampled_from(self.model.live([CollectionKind.INDEX, CollectionKind.LOG_INDEX]))
        )
        ts = data.draw(st.integers(0, 12))
        self.send(Peek(PeekDescription(self.fresh_uuid(), gid, ts)))

    @precondition(lambda self: self.setup_stage)
    @rule(ts=st.integers(0, 12))
    def persist_peek(self, ts: int) -> None:
        # The target is a storage collection, which the protocol does not track.
        self.send(
            Peek(PeekDescription(self.fresh_uuid(), GlobalId.system(1), ts, target="persist"))
        )

    @precondition(lambda self: self.setup_stage and bool(self.model.peeks))
    @rule(data=st.data())
    def cancel_peek(self, data: st.DataObject) -> None:
        self.send(CancelPeek(data.draw(st.sampled_from(sorted(self.model.peeks)))))


class ProtocolSessionsMachine(ProtocolCommandModel):
    """Both sessions in lockstep; legal steps accepted, illegal steps rejected with the right error.

    Every legal command also checks the replica session's effects against the
    model (abandoned peeks on ``Hello``, owed reports on a drop, ``RunDataflow``
    once all exports are scheduled, ``CancelPendingPeek`` only for pending peeks).
    """

    def __init__(self) -> None:
        super().__init__()
        self.controller = self.make_controller_session()
        self.replica = self.make_replica_session()
        self._ready_before: set[tuple[GlobalId, ...]] = set()

    def make_controller_session(self) -> ControllerSession:
        """The controller session under test (override to check another implementation)."""
        return ControllerSession()

    def make_replica_session(self) -> ReplicaSession:
        """The replica session under test (override to check another implementation)."""
        return ReplicaSession()

    # -- delivery -------------------------------------------------------------------

    def deliver(self, cmd: ComputeCommand) -> list[ReplicaEffect]:
        m = self.model
        ready_before = self._ready_before
        stage = self.controller.on_command(cmd)
        effects = self.replica.on_command(cmd)
        if stage is not m.stage:
            raise AssertionError(f"controller stage {stage} after {cmd}, model says {m.stage}")
        self._check_effects(cmd, effects, ready_before)
        return effects

    def send(self, cmd: ComputeCommand) -> list[ReplicaEffect] | None:
        self._ready_before = self.model.ready() if not isinstance(cmd, Hello) else set()
        return super().send(cmd)

    def _check_effects(
        self,
        cmd: ComputeCommand,
        effects: list[ReplicaEffect],
        ready_before: set[tuple[GlobalId, ...]],
    ) -> None:
        m = self.model
        kinds = [type(e) for e in effects]
        if isinstance(cmd, Hello):
            if effects != [StartIteration(cmd.nonce, tuple(self.abandoned))]:
                raise AssertionError(f"Hello effects {effects}, abandoned {self.abandoned}")
        elif isinstance(cmd, InitializationComplete):
            if effects != [BeginComputation()]:
                raise AssertionError(f"InitializationComplete effects {effects}")
        elif isinstance(cmd, CancelPeek):
            expect = [CancelPendingPeek(cmd.uuid)] if self.cancel_was_new else []
            if effects != expect:
                raise AssertionError(f"CancelPeek effects {effects}, expected {expect}")
        elif isinstance(cmd, Peek):
            if effects != [ServePeek(cmd.peek)]:
                raise AssertionError(f"Peek effects {effects}")
        elif isinstance(cmd, AllowCompaction) and cmd.frontier.is_empty():
            c = m.cols[cmd.id]
            drop = DropCollection(cmd.id, c.kind, m.owed_empty(cmd.id), m.owes_dropped_at(cmd.id))
            if effects[0] != drop:
                raise AssertionError(f"drop effect {effects[0]}, expected {drop}")
            released = all(m.cols[g].dropped for g in c.exports) and bool(c.exports)
            if (ReleaseDataflow(c.exports) in effects) != released:
                raise AssertionError(f"drop effects {effects}: release expected {released}")
        if isinstance(cmd, Schedule | AllowCompaction):
            runs = sorted(e.export_ids for e in effects if isinstance(e, RunDataflow))
            expect_runs = sorted(m.ready() - ready_before)
            if runs != expect_runs:
                raise AssertionError(f"{cmd}: RunDataflow {runs}, expected {expect_runs}")
        elif RunDataflow in kinds:
            raise AssertionError(f"{cmd}: unexpected RunDataflow in {effects}")

    # -- illegal commands -----------------------------------------------------------

    def expect_command_error(self, cmd: ComputeCommand, error: type[ProtocolError]) -> None:
        """Both sessions reject ``cmd`` with ``error`` and stay unchanged."""
        for session in (self.controller, self.replica):
            before = session.snapshot()
            try:
                session.on_command(cmd)
            except ProtocolError as e:
                if type(e) is not error:
                    raise AssertionError(f"{cmd}: expected {error.__name__}, got {e!r}") from e
            else:
                raise AssertionError(f"{type(session).__name__} accepted illegal {cmd}")
            if session.snapshot() != before:
                raise AssertionError(f"{type(session).__name__} changed on rejected {cmd}")

    @staticmethod
    def pick(data: st.DataObject, options: list[Any]) -> Any:
        """One of ``options`` (tuples whose second item is the expected error): first a rule, uniformly,
        then an option breaking it, so that rare rules get as many turns as common ones."""
        errors = sorted({o[1] for o in options}, key=lambda e: e.__name__)
        error = data.draw(st.sampled_from(errors))
        return data.draw(st.sampled_from([o for o in options if o[1] is error]))

    @staticmethod
    def some(data: st.DataObject, items: list[Any]) -> list[Any]:
        """A few of ``items`` (at most 4), drawn, so that every one gets its turn."""
        if not items:
            return []
        return data.draw(st.lists(st.sampled_from(items), unique=True, max_size=4))

    def unknown_id(self) -> GlobalId:
        return GlobalId.user(1_000_000 + self._ids)

    @rule(data=st.data())
    def illegal_command(self, data: st.DataObject) -> None:
        """A command breaking one rule (the rule drawn first, among those breakable now)."""
        options = self.stage_command_options(data)
        if self.setup_stage:
            options += self.dataflow_options(data) + self.collection_command_options(data)
        cmd, error = self.pick(data, options)
        self.expect_command_error(cmd, error)

    def stage_command_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Commands the current stage does not allow."""
        stage = self.model.stage
        options: list[ComputeCommand]
        if stage is Stage.AWAITING_HELLO:
            options = [
                CreateInstance(InstanceConfig()),
                InitializationComplete(),
                UpdateConfiguration(ComputeParameters()),
                Schedule(self.unknown_id()),
            ]
        elif stage is Stage.CREATION:
            options = [
                InitializationComplete(),
                UpdateConfiguration(ComputeParameters()),
                CancelPeek(self.fresh_uuid()),
            ]
        elif stage is Stage.INITIALIZATION:
            options = [CreateInstance(InstanceConfig())]
        else:
            options = [CreateInstance(InstanceConfig()), InitializationComplete()]
        return [(cmd, StageViolation) for cmd in options]

    def dataflow_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Dataflows breaking one rule each: no as_of, reused id, bad index import."""
        m = self.model
        df = self.legal_dataflow(data)
        options: list[tuple[DataflowDescription, type[ProtocolError]]] = [
            (replace(df, as_of=None), DataflowAsOfUnset),
            (
                replace(df, index_imports=(IndexImport(self.unknown_id(), self.unknown_id()),)),
                UnknownCollection,
            ),
        ]
        if m.cols:
            gid = data.draw(st.sampled_from(sorted(m.cols)))
            options.append(
                (replace(df, index_exports=(IndexExport(gid, gid),)), DuplicateCollection)
            )
        twice = df.export_ids[0]
        options.append(
            (
                replace(df, index_exports=(IndexExport(twice, twice), *df.index_exports)),
                DuplicateCollection,
            )
        )
        if m.dropped():
            gid = data.draw(st.sampled_from(m.dropped()))
            options.append((replace(df, index_imports=(IndexImport(gid, gid),)), CollectionDropped))
        sinks = m.live([CollectionKind.SUBSCRIBE, CollectionKind.MATERIALIZED_VIEW])
        if sinks:
            gid = data.draw(st.sampled_from(sinks))
            options.append((replace(df, index_imports=(IndexImport(gid, gid),)), NotAnIndex))
        compacted = [
            g
            for g in m.live([CollectionKind.INDEX, CollectionKind.LOG_INDEX])
            if m.cols[g].since not in (_at(0), _EMPTY)
        ]
        if compacted:
            gid = data.draw(st.sampled_from(compacted))
            early = _at(m.cols[gid].since.elements[0] - 1)
            options.append(
                (
                    replace(df, index_imports=(IndexImport(gid, gid),), as_of=early),
                    ImportSinceViolation,
                )
            )
        return [(CreateDataflow(bad), error) for bad, error in options]

    def collection_command_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Schedule / AllowWrites / AllowCompaction / Peek breaking a dependency rule."""
        m = self.model
        unknown = self.unknown_id()
        options: list[tuple[ComputeCommand, type[ProtocolError]]] = [
            (Schedule(unknown), UnknownCollection),
            (AllowWrites(unknown), UnknownCollection),
            (AllowCompaction(unknown, _at(3)), UnknownCollection),
            (Peek(PeekDescription(self.fresh_uuid(), unknown, 0)), UnknownCollection),
            (CancelPeek(self.fresh_uuid()), UnknownPeek),
        ]
        for gid in self.some(data, m.dropped()):
            options += [
                (Schedule(gid), CollectionDropped),
                (AllowWrites(gid), CollectionDropped),
                (AllowCompaction(gid, _EMPTY), CollectionDropped),
                (Peek(PeekDescription(self.fresh_uuid(), gid, 0)), CollectionDropped),
            ]
        for gid in self.some(data, m.live()):
            c = m.cols[gid]
            if c.scheduled:
                options.append((Schedule(gid), DuplicateSchedule))
            if c.writable:
                options.append((AllowWrites(gid), DuplicateAllowWrites))
            if c.since not in (_at(0), _EMPTY):
                options.append(
                    (AllowCompaction(gid, _at(c.since.elements[0] - 1)), AllowCompactionRegression)
                )
            if not c.kind.is_index:
                options.append((Peek(PeekDescription(self.fresh_uuid(), gid, 0)), NotAnIndex))
        if m.peeks:
            u = data.draw(st.sampled_from(sorted(m.peeks)))
            p = m.peeks[u].peek
            options.append((Peek(p), DuplicatePeek))
            pending = m.peeks[u]
            target = m.cols.get(p.id)
            if (
                not pending.cancelled
                and not pending.answered
                and p.target == "index"
                and target is not None
                and not target.dropped
                and target.since <= _at(p.timestamp + 1)
            ):
                options.append(
                    (AllowCompaction(p.id, _at(p.timestamp + 1)), CompactionPastPendingPeek)
                )
        return options

    # -- legal responses ------------------------------------------------------------

    def accept_response(self, resp: ComputeResponse) -> None:
        self.controller.on_response(resp)
        self.replica.on_response(resp)

    @property
    def computing(self) -> bool:
        return self.model.stage.is_computation

    @precondition(
        lambda self: (
            self.computing
            and any(
                c.kind.reports_frontiers and not self.model.closed(g)
                for g, c in self.model.cols.items()
            )
        )
    )
    @rule(data=st.data())
    def report_frontiers(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(
            st.sampled_from(
                sorted(g for g, c in m.cols.items() if c.kind.reports_frontiers and not m.closed(g))
            )
        )
        c = m.cols[gid]
        values: dict[FrontierKind, Antichain] = {}
        for kind in data.draw(
            st.lists(st.sampled_from(list(FrontierKind)), unique=True, max_size=3)
        ):
            last = m.reported.get((gid, kind))
            if last == _EMPTY:
                continue
            if c.dropped or data.draw(st.integers(0, 5)) == 0:
                value = _EMPTY
            elif last is None:
                value = _succ(c.as_of, data.draw(st.integers(0, 2)))
            else:
                value = _succ(last, data.draw(st.integers(1, 3)))
            values[kind] = value
        self.accept_response(_frontiers(gid, values))
        for kind, value in values.items():
            m.reported[(gid, kind)] = value

    @precondition(lambda self: self.computing and bool(self.model.pending()))
    @rule(data=st.data())
    def answer_peek(self, data: st.DataObject) -> None:
        m = self.model
        u = data.draw(st.sampled_from(m.pending()))
        results: list[Any] = [PeekRows(((("a", 1), 2),)), PeekRows(()), PeekError("no")]
        if m.peeks[u].cancelled:
            results.append(PeekCanceled())
        self.accept_response(PeekResponse(u, data.draw(st.sampled_from(results))))
        m.peeks[u].answered = True

    def _open_subscribes(self, *, dropped: bool) -> list[GlobalId]:
        m = self.model
        return sorted(
            g
            for g, c in m.cols.items()
            if c.kind is CollectionKind.SUBSCRIBE and c.dropped == dropped and g not in m.sub_ended
        )

    def legal_batch(self, gid: GlobalId, data: st.DataObject) -> SubscribeBatch:
        """The next batch of subscribe ``gid``: contiguous, first upper past the as_of, consolidated."""
        m = self.model
        c = m.cols[gid]
        lower = m.next_lower(gid)
        t0 = lower.elements[0]
        if c.as_of.is_empty():
            return SubscribeBatch(lower, _EMPTY)
        a = c.as_of.elements[0]
        least = max(t0 + 1, a) if gid not in m.sub_upper else t0 + 1
        if data.draw(st.integers(0, 6)) == 0:
            upper, end = _EMPTY, least + 2
        else:
            upper = _at(least + data.draw(st.integers(0, 2)))
            end = upper.elements[0]
        times = list(range(max(t0, a), end))
        updates: tuple[tuple[int, tuple[Any, ...], int], ...] = ()
        if times:
            picks = data.draw(
                st.lists(
                    st.tuples(st.sampled_from(times), st.integers(0, 2)), unique=True, max_size=3
                )
            )
            updates = tuple((t, (r,), data.draw(st.sampled_from([-1, 1, 2]))) for t, r in picks)
        return SubscribeBatch(lower, upper, updates)

    @precondition(lambda self: self.computing and bool(self._open_subscribes(dropped=False)))
    @rule(data=st.data())
    def subscribe_batch(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(self._open_subscribes(dropped=False)))
        batch = self.legal_batch(gid, data)
        self.accept_response(SubscribeResponse(gid, batch))
        m.sub_upper[gid] = batch.upper
        if batch.upper.is_empty():
            m.sub_ended.add(gid)

    @precondition(lambda self: self.computing and bool(self._open_subscribes(dropped=True)))
    @rule(data=st.data())
    def subscribe_dropped_at(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(self._open_subscribes(dropped=True)))
        self.accept_response(SubscribeResponse(gid, SubscribeDroppedAt(m.next_lower(gid))))
        m.sub_ended.add(gid)

    @precondition(
        lambda self: self.computing and any(not self.model.closed(g) for g in self.model.cols)
    )
    @rule(data=st.data())
    def status(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(sorted(g for g in m.cols if not m.closed(g))))
        self.accept_response(Status(gid, "ok"))

    # -- illegal responses ----------------------------------------------------------

    def expect_response_error(
        self, resp: ComputeResponse, error: type[ProtocolError], *, controller_knows: bool = True
    ) -> None:
        """The replica session rejects ``resp`` with ``error``; so does the controller session,
        unless the rule depends on the replica having seen a command (``controller_knows=False``),
        in which case the controller must accept it (checked without recording it)."""
        sessions: list[Any] = [self.replica]
        if controller_knows:
            sessions.append(self.controller)
        else:
            self.controller.check_response(resp)
        for session in sessions:
            before = session.snapshot()
            try:
                session.on_response(resp)
            except ProtocolError as e:
                if type(e) is not error:
                    raise AssertionError(f"{resp}: expected {error.__name__}, got {e!r}") from e
            else:
                raise AssertionError(f"{type(session).__name__} accepted illegal {resp}")
            if session.snapshot() != before:
                raise AssertionError(f"{type(session).__name__} changed on rejected {resp}")

    @rule(data=st.data())
    def illegal_response(self, data: st.DataObject) -> None:
        """A response breaking one rule (the rule drawn first, among those breakable now)."""
        if self.computing:
            options = (
                self.frontiers_options(data)
                + self.peek_response_options(data)
                + self.subscribe_response_options(data)
            )
        else:
            options = self.early_response_options(data)
        resp, error, knows = self.pick(data, options)
        self.expect_response_error(resp, error, controller_knows=knows)

    def early_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        """Responses before ``InitializationComplete``."""
        m = self.model
        options: list[ComputeResponse] = [Status(self.unknown_id())]
        if m.cols:
            gid = data.draw(st.sampled_from(sorted(m.cols)))
            options.append(Frontiers(gid, write=_EMPTY))
        if m.peeks:
            options.append(PeekResponse(data.draw(st.sampled_from(sorted(m.peeks))), PeekRows(())))
        return [(resp, StageViolation, True) for resp in options]

    def frontiers_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError], bool]] = [
            (Frontiers(self.unknown_id(), write=_at(1)), UnknownCollection, True),
            (Status(self.unknown_id()), UnknownCollection, True),
        ]
        for gid in self.some(data, sorted(m.cols)):
            c = m.cols[gid]
            if c.kind is CollectionKind.SUBSCRIBE:
                options.append((Frontiers(gid, output=_EMPTY), FrontiersForSubscribe, True))
                continue
            if m.closed(gid):
                options.append((Status(gid), ResponseAfterClose, True))
            for kind in FrontierKind:
                last = m.reported.get((gid, kind))
                if last == _EMPTY:
                    options.append((_frontiers(gid, {kind: _at(99)}), ResponseAfterClose, True))
                elif c.dropped:
                    bad = _succ(last) if last is not None else _succ(c.as_of)
                    if not bad.is_empty():
                        options.append((_frontiers(gid, {kind: bad}), ResponseAfterDrop, False))
                elif last is not None:
                    options.append((_frontiers(gid, {kind: last}), FrontierRegression, True))
                elif c.as_of != _at(0):
                    before = _at(c.as_of.elements[0] - 1) if c.as_of.elements else _at(7)
                    options.append((_frontiers(gid, {kind: before}), FrontierBeforeAsOf, True))
        return options

    def peek_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError]]] = [
            (PeekResponse(self.fresh_uuid(), PeekRows(())), UnknownPeek)
        ]
        for u in self.some(data, sorted(m.peeks)):
            p = m.peeks[u]
            if p.answered:
                options.append((PeekResponse(u, PeekError("again")), DuplicatePeekResponse))
                continue
            if not p.cancelled:
                options.append((PeekResponse(u, PeekCanceled()), UnrequestedCancel))
            options.append((PeekResponse(u, PeekRows(((("x",), 0),))), InvalidPeekRows))
            options.append((PeekResponse(u, PeekRows(((("x",), -2),))), InvalidPeekRows))
        return [(resp, error, True) for resp, error in options]

    def subscribe_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError], bool]] = [
            (
                SubscribeResponse(self.unknown_id(), SubscribeDroppedAt(_at(0))),
                UnknownCollection,
                True,
            )
        ]
        subscribes = sorted(g for g, c in m.cols.items() if c.kind is CollectionKind.SUBSCRIBE)
        others = sorted(g for g, c in m.cols.items() if c.kind is not CollectionKind.SUBSCRIBE)
        for gid in self.some(data, subscribes) + self.some(data, others)[:1]:
            c = m.cols[gid]
            if c.kind is not CollectionKind.SUBSCRIBE:
                batch = SubscribeBatch(_at(0), _EMPTY)
                options.append((SubscribeResponse(gid, batch), NotASubscribe, True))
                continue
            lower = m.next_lower(gid)
            if gid in m.sub_ended:
                options.append(
                    (SubscribeResponse(gid, SubscribeDroppedAt(lower)), ResponseAfterClose, True)
                )
                continue
            if c.dropped:
                good = self.legal_batch(gid, data)
                options.append((SubscribeResponse(gid, good), ResponseAfterDrop, False))
                if not lower.is_empty():
                    wrong = SubscribeDroppedAt(_succ(lower))
                    options.append((SubscribeResponse(gid, wrong), DroppedAtMismatch, True))
                continue
            options.append(
                (SubscribeResponse(gid, SubscribeDroppedAt(lower)), UnrequestedDroppedAt, True)
            )
            t0 = lower.elements[0]
            gap = SubscribeBatch(_at(t0 + 1), _EMPTY)
            options.append((SubscribeResponse(gid, gap), SubscribeGap, True))
            options.append(
                (SubscribeResponse(gid, SubscribeBatch(lower, lower)), SubscribeGap, True)
            )
            if gid not in m.sub_upper and c.as_of.elements and c.as_of.elements[0] > t0 + 1:
                short = SubscribeBatch(lower, _at(c.as_of.elements[0] - 1))
                options.append((SubscribeResponse(gid, short), FrontierBeforeAsOf, True))
            if not c.as_of.is_empty():
                upper = _at(max(t0, c.as_of.elements[0]) + 2)
                out = SubscribeBatch(lower, upper, ((upper.elements[0], ("r",), 1),))
                options.append((SubscribeResponse(gid, out), SubscribeUpdateOutOfRange, True))
                t = upper.elements[0] - 1
                twice = SubscribeBatch(lower, upper, ((t, ("r",), 1), (t, ("r",), 1)))
                options.append((SubscribeResponse(gid, twice), SubscribeNotConsolidated, True))
                zero = SubscribeBatch(lower, upper, ((t, ("r",), 0),))
                options.append((SubscribeResponse(gid, zero), SubscribeNotConsolidated, True))
                if c.as_of.elements[0] > t0:
                    early = SubscribeBatch(lower, upper, ((c.as_of.elements[0] - 1, ("r",), 1),))
                    options.append((SubscribeResponse(gid, early), SubscribeUpdateOutOfRange, True))
        return options

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def sessions_agree_with_model(self) -> None:
        m = self.model
        for session in (self.controller, self.replica):
            if session.stage is not m.stage:
                raise AssertionError(
                    f"{type(session).__name__} stage {session.stage}, model {m.stage}"
                )
        if list(self.replica.pending_peeks) != m.pending():
            raise AssertionError(
                f"pending peeks {list(self.replica.pending_peeks)} vs {m.pending()}"
            )
        if list(self.controller.unanswered_peeks) != m.pending():
            raise AssertionError("controller's unanswered peeks differ from the model")
        owed = {g: m.owed_empty(g) for g in sorted(m.cols) if m.owed_empty(g)}
        if self.replica.owed_frontier_reports() != owed:
            raise AssertionError(f"owed reports {self.replica.owed_frontier_reports()} vs {owed}")
        dropped_at = tuple(g for g in sorted(m.cols) if m.owes_dropped_at(g))
        if self.replica.owed_dropped_at() != dropped_at:
            raise AssertionError(f"owed DroppedAt {self.replica.owed_dropped_at()} vs {dropped_at}")
        live = {g for g, c in m.cols.items() if not c.dropped}
        if {g for g in self.controller.collections if self.controller.is_live(g)} != live:
            raise AssertionError("controller's live collections differ from the model")


# -- replica conformance ------------------------------------------------------------


class ReplicaUnderTest(Protocol):
    """What :class:`ReplicaConformanceMachine` needs from a replica implementation."""

    def handle(self, command: ComputeCommand) -> Sequence[ComputeResponse]:
        """Take one command; return the responses it sends right away (often none)."""
        ...

    def step(self) -> Sequence[ComputeResponse]:
        """Do some work (time passes, data arrives); return the responses it sends."""
        ...


class ReplicaConformanceFailure(AssertionError):
    """A replica did not pay what it owed once everything was cancelled and dropped."""


class ProtocolModelReplica:
    """A minimal correct replica, built on :class:`ReplicaSession` effects.

    Its collections hold no data; each :meth:`step` moves every running
    collection's frontiers one time forward, emits an (empty) subscribe batch,
    answers peeks once the index's upper passes the peek time (``Error`` below
    the compaction frontier), answers cancelled peeks with ``PeekCanceled``,
    and pays drop obligations (``[]`` reports, ``DroppedAt``). It defers every
    answer until ``InitializationComplete``.
    """

    def __init__(self) -> None:
        self.session = ReplicaSession()
        self.running: set[GlobalId] = set()

    def handle(self, command: ComputeCommand) -> Sequence[ComputeResponse]:
        for effect in self.session.on_command(command):
            if isinstance(effect, StartIteration):
                self.running = set()
            elif isinstance(effect, InitializeInstance):
                self.running.update(effect.log_indexes)
            elif isinstance(effect, RunDataflow):
                self.running.update(effect.export_ids)
            # Everything else (drops, peeks, cancels) is read back from the session in step().
        return []

    def _send(self, out: list[ComputeResponse], resp: ComputeResponse) -> None:
        self.session.on_response(resp)
        out.append(resp)

    def step(self) -> Sequence[ComputeResponse]:
        s = self.session
        out: list[ComputeResponse] = []
        if not s.stage.is_computation:
            return out
        for gid, rec in s.collections.items():
            if rec.dropped:
                owed = s.owed_frontier_reports().get(gid, ())
                if owed:
                    self._send(out, _frontiers(gid, dict.fromkeys(owed, _EMPTY)))
                if gid in s.owed_dropped_at():
                    self._send(
                        out, SubscribeResponse(gid, SubscribeDroppedAt(s.subscribe_next_lower(gid)))
                    )
                continue
            if gid not in self.running:
                continue
            if rec.kind is CollectionKind.SUBSCRIBE:
                if s.subscribe_ended(gid):
                    continue
                lower = s.subscribe_next_lower(gid)
                if rec.as_of.is_empty():
                    upper = _EMPTY
                else:
                    upper = _at(max(lower.elements[0] + 1, rec.as_of.elements[0]))
                self._send(out, SubscribeResponse(gid, SubscribeBatch(lower, upper)))
                continue
            last = s.last_reported(gid, FrontierKind.WRITE)
            nxt = rec.as_of if last is None else _succ(last)
            if s.frontier_report_allowed(gid, FrontierKind.WRITE, nxt):
                self._send(out, Frontiers(gid, write=nxt, input=nxt, output=nxt))
        for u, peek in s.pending_peeks.items():
            if s.cancel_requested(u):
                self._send(out, PeekResponse(u, PeekCanceled()))
                continue
            if peek.target == "persist":
                self._send(out, PeekResponse(u, PeekRows(())))
                continue
            rec = s.collections[peek.id]
            index_upper = s.last_reported(peek.id, FrontierKind.WRITE)
            if index_upper is None or index_upper.less_equal(peek.timestamp):
                continue  # not ready: the index is not complete at the peek time yet
            if rec.since.less_equal(peek.timestamp):
                self._send(out, PeekResponse(u, PeekRows(())))
            else:
                self._send(out, PeekResponse(u, PeekError(f"compacted beyond {peek.timestamp}")))
        return out


class ReplicaConformanceMachine(ProtocolCommandModel):
    """Legal commands to a replica; each of its responses checked by a :class:`ReplicaSession`.

    Override :meth:`make_replica` to return your replica (a :class:`ReplicaUnderTest`).
    At teardown, every peek is cancelled, every collection dropped, and the
    replica is stepped up to :attr:`quiesce_steps` times: it must then owe nothing.
    """

    quiesce_steps = 20

    def __init__(self) -> None:
        super().__init__()
        self.replica = self.make_replica()
        self.checker = ReplicaSession()
        self._busy = False

    def make_replica(self) -> ReplicaUnderTest:
        """The replica under test (override this)."""
        return ProtocolModelReplica()

    def _absorb(self, responses: Sequence[ComputeResponse]) -> None:
        for resp in responses:
            self.checker.on_response(resp)

    def deliver(self, cmd: ComputeCommand) -> None:
        self._busy = True
        self.checker.on_command(cmd)
        self._absorb(self.replica.handle(cmd))
        self._busy = False

    @rule()
    def step(self) -> None:
        self._busy = True
        self._absorb(self.replica.step())
        self._busy = False

    def teardown(self) -> None:
        if self._busy or self.model.stage is Stage.AWAITING_HELLO:
            return  # a rule failed mid-way (or nothing happened): do not mask it
        self._busy = True
        m = self.model
        if m.stage is Stage.CREATION:
            self.send(CreateInstance(InstanceConfig()))
        if m.stage is Stage.INITIALIZATION:
            self.send(InitializationComplete())
        for u in self.model.pending():
            if not self.model.peeks[u].cancelled:
                self.send(CancelPeek(u))
        for gid in self.model.live():
            self.send(AllowCompaction(gid, _EMPTY))
        for _ in range(self.quiesce_steps):
            if self.checker.owes_nothing():
                break
            self._absorb(self.replica.step())
        if not self.checker.owes_nothing():
            raise ReplicaConformanceFailure(
                f"after {self.quiesce_steps} steps the replica still owes: peeks "
                f"{list(self.checker.pending_peeks)}, [] reports {self.checker.owed_frontier_reports()}, "
                f"DroppedAt {self.checker.owed_dropped_at()}"
            )
        self._busy = False
