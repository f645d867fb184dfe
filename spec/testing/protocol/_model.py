"""The independent model of the protocol rules, and the legal command sequences built on it."""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ...frontier import Antichain
from ...ids import GlobalId
from ...protocol import (
    AllowCompaction,
    AllowWrites,
    BuildDesc,
    CancelPeek,
    CollectionKind,
    ComputeCommand,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    FrontierKind,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekDescription,
    ReplicaEffect,
    Schedule,
    SinkExport,
    Stage,
    SubscribeConnection,
    UpdateConfiguration,
)
from ...strategies.protocol import compute_parameters

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
