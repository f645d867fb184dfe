"""Test machinery for the compute controller: dataflow builders, effect filters, and a state machine.

:class:`ControllerMachine` is a Hypothesis ``RuleBasedStateMachine`` that
drives a :class:`~tidegate.spec.compute.ComputeController` through its API
while 1-3 scripted replicas answer (advancing frontiers, answering peeks,
streaming subscribe batches, failing and being rehydrated). After every step
it checks the controller's invariants: frontiers never regress, no since
passes a hold, ``AllowCompaction`` frontiers per collection are monotone,
every peek gets exactly one result, every client subscribe stream is gap-free,
and the command history stays bounded. Use it as is::

    TestController = ControllerMachine.TestCase

or subclass it to drive your own controller wiring.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..compute import (
    ComputeController,
    ComputeReadHold,
    Effect,
    InMemoryStorage,
    ManagedLocation,
    PeekResultOut,
    ReplicaConfig,
    ReplicaLogging,
    SendCommand,
    SubscribeBatchOut,
    UnmanagedLocation,
)
from ..frontier import Antichain, Time
from ..ids import GlobalId, ReplicaId
from ..protocol.commands import ComputeCommand
from ..protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)

__all__ = [
    "ComposedControllerMachine",
    "ControllerMachine",
    "ScriptedReplica",
    "commands_to",
    "index_dataflow",
    "mv_dataflow",
    "of_type",
    "replica_configs",
    "subscribe_dataflow",
]

E = TypeVar("E")


def _as_antichain(as_of: Time | Antichain | None) -> Antichain | None:
    if as_of is None or isinstance(as_of, Antichain):
        return as_of
    return Antichain.from_elem(as_of)


def _dataflow(
    export: GlobalId,
    sources: Iterable[GlobalId],
    indexes: Iterable[GlobalId],
    as_of: Time | Antichain | None,
    name: str | None,
    kind: str,
) -> DataflowDescription:
    source_imports = tuple(SourceImport(s) for s in sources)
    index_imports = tuple(IndexImport(i, on_id=i) for i in indexes)
    build = (BuildDesc(export, None),)
    index_exports: tuple[IndexExport, ...] = ()
    sink_exports: tuple[SinkExport, ...] = ()
    if kind == "index":
        index_exports = (IndexExport(export, export),)
    elif kind == "mv":
        sink_exports = (SinkExport(export, export, MaterializedViewConnection()),)
    else:
        sink_exports = (SinkExport(export, export, SubscribeConnection()),)
    return DataflowDescription(
        debug_name=name or f"{kind}-{export}",
        source_imports=source_imports,
        index_imports=index_imports,
        objects_to_build=build,
        index_exports=index_exports,
        sink_exports=sink_exports,
        as_of=_as_antichain(as_of),
    )


def index_dataflow(
    export: GlobalId,
    *,
    sources: Iterable[GlobalId] = (),
    indexes: Iterable[GlobalId] = (),
    as_of: Time | Antichain | None = 0,
    name: str | None = None,
) -> DataflowDescription:
    """A dataflow exporting index ``export`` computed from storage ``sources`` and ``indexes``."""
    return _dataflow(export, sources, indexes, as_of, name, "index")


def mv_dataflow(
    export: GlobalId,
    *,
    sources: Iterable[GlobalId] = (),
    indexes: Iterable[GlobalId] = (),
    as_of: Time | Antichain | None = 0,
    name: str | None = None,
) -> DataflowDescription:
    """A dataflow writing materialized view ``export`` (a storage collection of the same id)."""
    return _dataflow(export, sources, indexes, as_of, name, "mv")


def subscribe_dataflow(
    export: GlobalId,
    *,
    sources: Iterable[GlobalId] = (),
    indexes: Iterable[GlobalId] = (),
    as_of: Time | Antichain | None = 0,
    name: str | None = None,
) -> DataflowDescription:
    """A dataflow exporting subscribe ``export``."""
    return _dataflow(export, sources, indexes, as_of, name, "subscribe")


def replica_configs() -> st.SearchStrategy[ReplicaConfig]:
    """Replica configurations: managed (size, scale, workers) or unmanaged (addresses), logging on or off."""
    managed = st.builds(
        ManagedLocation,
        size=st.sampled_from(["small", "medium", "large"]),
        scale=st.integers(1, 4),
        workers=st.integers(1, 8),
    )
    unmanaged = st.builds(
        UnmanagedLocation,
        st.lists(
            st.integers(1024, 65535).map(lambda p: f"127.0.0.1:{p}"), min_size=1, max_size=3
        ).map(tuple),
    )
    logging = st.builds(
        ReplicaLogging, interval_ms=st.none() | st.integers(1, 10_000), log_logging=st.booleans()
    )
    return st.builds(ReplicaConfig, location=managed | unmanaged, logging=logging)


def commands_to(
    effects: Iterable[Effect], replica: ReplicaId | None = None
) -> list[ComputeCommand]:
    """The commands among ``effects`` (sent to ``replica``, or to any replica if ``None``)."""
    return [
        e.command
        for e in effects
        if isinstance(e, SendCommand) and (replica is None or e.replica == replica)
    ]


def of_type(effects: Iterable[Any], cls: type[E]) -> list[E]:
    """The effects of one type, in order."""
    return [e for e in effects if isinstance(e, cls)]


# -- scripted replicas ----------------------------------------------------------------------


class _ReplicaCollection:
    __slots__ = ("as_of", "compute_inputs", "dropped", "kind", "reported", "storage_inputs")

    def __init__(
        self,
        kind: str,
        as_of: Antichain,
        storage_inputs: tuple[GlobalId, ...],
        compute_inputs: tuple[GlobalId, ...],
    ) -> None:
        self.kind = kind
        self.as_of = as_of
        self.storage_inputs = storage_inputs
        self.compute_inputs = compute_inputs
        self.reported: Antichain | None = None  # last write frontier / subscribe upper sent
        self.dropped = False


class ScriptedReplica:
    """A replica model that follows the protocol: it learns from the commands it is sent and
    produces only responses a correct replica could produce (monotone frontiers bounded by its
    inputs, one answer per peek once the collection has passed the peek time, contiguous
    subscribe batches, ``[]`` reports after a drop)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.collections: dict[GlobalId, _ReplicaCollection] = {}
        self.peeks: dict[_uuid.UUID, tuple[GlobalId, Time]] = {}

    def receive(self, cmd: ComputeCommand) -> None:
        from ..protocol.commands import (
            AllowCompaction,
            CancelPeek,
            CreateDataflow,
            CreateInstance,
            Peek,
        )

        if isinstance(cmd, CreateInstance):
            for _, log in cmd.config.logging.index_logs:
                self.collections[log] = _ReplicaCollection("log", Antichain([0]), (), ())
        elif isinstance(cmd, CreateDataflow):
            df = cmd.dataflow
            assert df.as_of is not None
            sources = tuple(s.id for s in df.source_imports)
            indexes = tuple(i.id for i in df.index_imports)
            subs = set(df.subscribe_ids)
            for e in df.export_ids:
                kind = "subscribe" if e in subs else "index"
                self.collections[e] = _ReplicaCollection(kind, df.as_of, sources, indexes)
        elif isinstance(cmd, AllowCompaction):
            c = self.collections.get(cmd.id)
            if c is not None and not cmd.frontier.elements:
                c.dropped = True
        elif isinstance(cmd, Peek):
            self.peeks[cmd.uuid] = (cmd.peek.id, cmd.peek.timestamp)
        elif isinstance(cmd, CancelPeek):
            self.peeks.pop(cmd.uuid, None)

    def write_of(self, id: GlobalId) -> Antichain:
        c = self.collections.get(id)
        if c is None or c.reported is None:
            return Antichain([0])
        return c.reported

    def progress(
        self, id: GlobalId, step: int, storage_upper: Callable[[GlobalId], Antichain]
    ) -> Any:
        """The next response advancing ``id`` by up to ``step``, or ``None`` if it cannot move."""
        from ..protocol.responses import (
            Frontiers,
            SubscribeBatch,
            SubscribeDroppedAt,
            SubscribeResponse,
        )

        c = self.collections.get(id)
        if c is None:
            return None
        if c.dropped:
            del self.collections[id]
            if c.kind == "subscribe":
                if c.reported is not None and not c.reported.elements:
                    return None
                return SubscribeResponse(id, SubscribeDroppedAt(c.reported or Antichain([0])))
            empty = Antichain()
            if c.reported is not None and not c.reported.elements:
                return None
            return Frontiers(id, empty, empty, empty)
        if not c.as_of.elements:
            return None
        current = c.reported if c.reported is not None else c.as_of
        if not current.elements:
            return None
        if c.kind == "log":
            bound: Antichain = Antichain()
        else:
            bound = Antichain.meet_all(
                [
                    *(storage_upper(s) for s in c.storage_inputs),
                    *(self.write_of(i) for i in c.compute_inputs),
                ]
            )
        cur = current.elements[0]
        target = Antichain([cur + step]).meet(bound)
        first = c.reported is None
        if not (current <= target and (first or current != target)):
            return None
        if c.kind == "subscribe":
            lower = Antichain([0]) if first else current
            low_t = max(c.as_of.elements[0], 0 if first else cur)
            hi = target.elements[0] if target.elements else low_t + 1
            updates = tuple((t, (str(id), t), 1) for t in range(low_t, hi))
            c.reported = target
            return SubscribeResponse(id, SubscribeBatch(lower, target, updates))
        c.reported = target
        return Frontiers(id, target, target, target)

    def answerable_peeks(self) -> list[_uuid.UUID]:
        """Peeks this replica can answer now: its collection passed the time, or is gone (error)."""
        out = []
        for uuid, (id, ts) in sorted(self.peeks.items()):
            c = self.collections.get(id)
            if c is None or c.dropped or (c.reported is not None and not c.reported.less_equal(ts)):
                out.append(uuid)
        return out

    def answer(self, uuid: _uuid.UUID) -> Any:
        from ..protocol.responses import PeekError, PeekResponse, PeekRows

        id, ts = self.peeks.pop(uuid)
        c = self.collections.get(id)
        if c is None or c.dropped:
            return PeekResponse(uuid, PeekError(f"collection {id} is gone"))
        return PeekResponse(uuid, PeekRows((((str(id), ts), 1),)))


# -- the state machine -----------------------------------------------------------------------

STORAGE_IDS = (GlobalId.user(1), GlobalId.user(2), GlobalId.user(3))
LOG_ID = GlobalId.system(100)
REPLICA_IDS = ("r1", "r2", "r3")
MAX_LIVE = 7


class _Stream:
    __slots__ = ("closed", "next_lower")

    def __init__(self, as_of: Antichain) -> None:
        self.next_lower = as_of
        self.closed = False


class ControllerMachine(RuleBasedStateMachine):
    """Drive a compute controller and 1-3 scripted replicas; check the invariants after every step."""

    instance = "c"

    def __init__(self) -> None:
        super().__init__()
        self.ctl = self.make_controller()
        self.replicas: dict[ReplicaId, ScriptedReplica] = {}
        self.kinds: dict[GlobalId, str] = {LOG_ID: "log"}
        self.next_id = 10
        self.peeks_issued: set[_uuid.UUID] = set()
        self.peek_results: dict[_uuid.UUID, int] = {}
        self.pending: dict[_uuid.UUID, tuple[GlobalId, Time]] = {}
        self.holds: list[ComputeReadHold] = []
        self.streams: dict[GlobalId, _Stream] = {}
        self.last: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        self.compaction: dict[tuple[ReplicaId, int, GlobalId], Antichain] = {}
        self.peak = 0
        self.ctl.create_instance(self.instance, {"log": LOG_ID})
        self.absorb()
        self.ctl.initialization_complete()
        self.absorb()

    # -- effect routing and per-effect checks ------------------------------------------------
    def absorb(self) -> None:
        """Take the controller's effects and route them (to scripted replicas, peek and stream checks)."""
        from ..compute import ConnectReplica, DisconnectReplica
        from ..protocol.commands import AllowCompaction

        for e in self.take_effects():
            if isinstance(e, ConnectReplica):
                self.replicas[e.replica] = ScriptedReplica(e.epoch)
            elif isinstance(e, DisconnectReplica):
                r = self.replicas.get(e.replica)
                if r is not None and r.epoch == e.epoch:
                    del self.replicas[e.replica]
            elif isinstance(e, SendCommand):
                cmd = e.command
                if isinstance(cmd, AllowCompaction):
                    key = (e.replica, e.epoch, cmd.id)
                    prev = self.compaction.get(key)
                    assert prev is None or prev <= cmd.frontier, (
                        f"AllowCompaction for {cmd.id} regressed on {e.replica}: {prev} -> {cmd.frontier}"
                    )
                    self.compaction[key] = cmd.frontier
                r = self.replicas.get(e.replica)
                if r is not None and r.epoch == e.epoch:
                    r.receive(cmd)
            elif isinstance(e, PeekResultOut):
                n = self.peek_results.get(e.uuid, 0) + 1
                assert n == 1, f"peek {e.uuid} got {n} results"
                assert e.uuid in self.peeks_issued
                self.peek_results[e.uuid] = n
                self.pending.pop(e.uuid, None)
            elif isinstance(e, SubscribeBatchOut):
                stream = self.streams[e.id]
                assert not stream.closed, f"subscribe {e.id} emitted after its stream ended: {e}"
                assert e.lower == stream.next_lower, (
                    f"gap in subscribe {e.id}: {stream.next_lower} then {e}"
                )
                if e.error is None:
                    assert e.lower <= e.upper and e.lower != e.upper, f"batch does not advance: {e}"
                stream.next_lower = e.upper
                if not e.upper.elements or (e.error is not None and e.lower == e.upper):
                    stream.closed = True
                for t, _, _ in e.updates:
                    assert e.lower.less_equal(t) and not e.upper.less_equal(t)

    # -- storage hooks (override to run the machine on another storage layer) -------------------
    def make_controller(self) -> ComputeController:
        """The controller under test, with storage collections ``STORAGE_IDS`` at since 0, upper 1."""
        self.storage = InMemoryStorage()
        for s in STORAGE_IDS:
            self.storage.add_collection(s, since=0, upper=1)
        return ComputeController(self.storage, check_protocol=True)

    def storage_since(self, id: GlobalId) -> Antichain:
        return self.storage.since(id)

    def storage_upper(self, id: GlobalId) -> Antichain:
        return self.storage.upper(id)

    def storage_fingerprint(self) -> object:
        """A comparable image of every storage hold (equal before and after a rejected call)."""
        return [self.storage.hold_count(s) for s in STORAGE_IDS]

    def take_effects(self) -> list[Any]:
        """The effects of the calls since the last :meth:`absorb`."""
        return self.ctl.drain()

    def advance_storage(self, step: int) -> None:
        """Advance every storage upper by ``step``; storage's own hold follows one tick behind."""
        for id in STORAGE_IDS:
            upper = self.storage.upper(id).elements[0]
            self.storage.advance_upper(id, Antichain([upper + step]))
            target = Antichain([upper + step - 1])
            if self.storage._implied[id] <= target:
                self.storage.set_implied(id, target)
        self.ctl.storage_frontiers_advanced(STORAGE_IDS)

    def _live(self, kinds: tuple[str, ...]) -> list[GlobalId]:
        return sorted(i for i, k in self.kinds.items() if k in kinds)

    def _since(self, id: GlobalId) -> Antichain:
        if id in STORAGE_IDS:
            return self.storage_since(id)
        return self.ctl.instance(self.instance).collection(id).read_frontier

    @initialize(replicas=st.integers(1, 3), subscribe_target=st.booleans())
    def start(self, replicas: int, subscribe_target: bool) -> None:
        """Every run starts with replicas, an index and a subscribe on storage, so there is work."""
        for name in REPLICA_IDS[:replicas]:
            self.ctl.add_replica(self.instance, name)
            self.absorb()
        self._install("index", [STORAGE_IDS[0]], [], Antichain([0]), 1, None)
        self._install(
            "subscribe", [STORAGE_IDS[0]], [], Antichain([0]), 0, "r1" if subscribe_target else None
        )

    # -- replicas ------------------------------------------------------------------------
    @rule(name=st.sampled_from(REPLICA_IDS), config=replica_configs())
    def add_replica(self, name: ReplicaId, config: ReplicaConfig) -> None:
        if name in self.replicas:
            return
        self.ctl.add_replica(self.instance, name, config)
        self.absorb()

    @rule(name=st.sampled_from(REPLICA_IDS))
    def drop_replica(self, name: ReplicaId) -> None:
        if name in self.replicas:
            self.ctl.drop_replica(self.instance, name)
            self.absorb()

    @rule(name=st.sampled_from(REPLICA_IDS))
    def fail_replica(self, name: ReplicaId) -> None:
        r = self.replicas.get(name)
        if r is not None:
            self.ctl.replica_failed(self.instance, name, r.epoch, "scripted failure")
            self.absorb()
            assert self.replicas[name].epoch == r.epoch + 1

    @precondition(lambda self: bool(self.replicas))
    @rule(data=st.data(), step=st.integers(1, 3))
    def replica_tick(self, data: st.DataObject, step: int) -> None:
        """One replica advances every collection it can (inputs first) and answers what it can."""
        name = data.draw(st.sampled_from(sorted(self.replicas)))
        r = self.replicas[name]
        for id in sorted(r.collections):
            response = r.progress(id, step, self.storage_upper)
            if response is not None:
                self.ctl.handle_response(self.instance, name, r.epoch, response)
                self.absorb()
            if self.replicas.get(name) is not r:
                return
        if data.draw(st.booleans()):
            for uuid in r.answerable_peeks():
                self.ctl.handle_response(self.instance, name, r.epoch, r.answer(uuid))
                self.absorb()

    @rule(name=st.sampled_from(REPLICA_IDS))
    def stale_response(self, name: ReplicaId) -> None:
        """A response on an old epoch changes nothing."""
        from ..protocol.responses import Frontiers

        r = self.replicas.get(name)
        if r is not None and r.epoch > 1:
            for cid in self._live(("index",)):
                before = self.ctl.collection_frontiers(self.instance, cid)
                self.ctl.handle_response(
                    self.instance,
                    name,
                    r.epoch - 1,
                    Frontiers(cid, Antichain(), Antichain(), Antichain()),
                )
                assert (
                    self.take_effects() == []
                    and self.ctl.collection_frontiers(self.instance, cid) == before
                )

    # -- dataflows -----------------------------------------------------------------------
    @rule(
        kind=st.sampled_from(["index", "subscribe"]),
        sources=st.sets(st.sampled_from(STORAGE_IDS), max_size=2),
        data=st.data(),
        offset=st.integers(0, 3),
        targeted=st.booleans(),
    )
    def create_dataflow(
        self, kind: str, sources: set[GlobalId], data: st.DataObject, offset: int, targeted: bool
    ) -> None:
        if len(self._live(("index", "subscribe"))) >= MAX_LIVE:
            return
        candidates = self._live(("index", "log"))
        indexes = (
            sorted(data.draw(st.sets(st.sampled_from(candidates), max_size=2)))
            if candidates
            else []
        )
        inputs = [*sorted(sources), *indexes]
        base = Antichain.join_all([self._since(i) for i in inputs])
        as_of = Antichain([base.elements[0] + offset]) if base.elements else base
        target = None
        if kind == "subscribe" and targeted and self.replicas:
            target = data.draw(st.sampled_from(sorted(self.replicas)))
        self._install(kind, sorted(sources), indexes, as_of, offset, target)

    def _install(
        self,
        kind: str,
        sources: list[GlobalId],
        indexes: list[GlobalId],
        as_of: Antichain,
        lag: int,
        target: ReplicaId | None,
    ) -> None:
        from ..frontier.read_policy import LagWriteFrontier

        if kind == "subscribe" and not as_of.elements:
            return
        export = (
            GlobalId.user(self.next_id) if kind == "index" else GlobalId.transient(self.next_id)
        )
        self.next_id += 1
        build = index_dataflow if kind == "index" else subscribe_dataflow
        df = build(export, sources=sources, indexes=indexes, as_of=as_of)
        self.ctl.create_dataflow(self.instance, df, target_replica=target)
        self.absorb()
        self.kinds[export] = kind
        if kind == "subscribe":
            self.streams[export] = _Stream(as_of)
        else:
            self.ctl.set_read_policy(self.instance, [(export, LagWriteFrontier(lag, 1))])
            self.absorb()

    @rule(data=st.data())
    def create_dataflow_below_since(self, data: st.DataObject) -> None:
        """An as_of before an input's since is rejected and changes nothing."""
        from ..errors import SinceViolation

        candidates = [
            i
            for i in (*STORAGE_IDS, *self._live(("index",)))
            if (self._since(i).elements or [0])[0] > 0
        ]
        if not candidates:
            return
        src = data.draw(st.sampled_from(candidates))
        bad = Antichain([self._since(src).elements[0] - 1])
        kw = {"sources": [src]} if src in STORAGE_IDS else {"indexes": [src]}
        df = index_dataflow(GlobalId.user(self.next_id), as_of=bad, **kw)  # type: ignore[arg-type]
        view = self.ctl.instance(self.instance)
        before = (
            view.collection_ids(True),
            view.history_len(),
            self.storage_fingerprint(),
        )
        try:
            self.ctl.create_dataflow(self.instance, df)
        except SinceViolation as e:
            assert e.id == src
        else:
            raise AssertionError("create_dataflow accepted an as_of below a since")
        after = (
            view.collection_ids(True),
            view.history_len(),
            self.storage_fingerprint(),
        )
        assert before == after

    @rule(data=st.data())
    def drop_collection(self, data: st.DataObject) -> None:
        live = self._live(("index", "subscribe"))
        if not live:
            return
        id = data.draw(st.sampled_from(live))
        self.ctl.drop_collections(self.instance, [id])
        self.absorb()
        del self.kinds[id]
        if id in self.streams:
            self.streams[id].closed = True

    @rule(data=st.data(), lag=st.integers(0, 3))
    def set_read_policy(self, data: st.DataObject, lag: int) -> None:
        from ..frontier.read_policy import LagWriteFrontier

        live = self._live(("index", "log"))
        id = data.draw(st.sampled_from(live))
        self.ctl.set_read_policy(self.instance, [(id, LagWriteFrontier(lag, 1))])
        self.absorb()

    # -- peeks and holds ----------------------------------------------------------------------
    @rule(data=st.data(), delta=st.integers(0, 3), targeted=st.booleans())
    def peek(self, data: st.DataObject, delta: int, targeted: bool) -> None:
        live = self._live(("index", "log"))
        id = data.draw(st.sampled_from(live))
        since = self._since(id)
        if not since.elements:
            return
        target = (
            data.draw(st.sampled_from(sorted(self.replicas)))
            if targeted and self.replicas
            else None
        )
        ts = since.elements[0] + delta
        uuid = self.ctl.peek(self.instance, id, ts, target_replica=target)
        self.peeks_issued.add(uuid)
        self.pending[uuid] = (id, ts)
        self.absorb()

    @rule(data=st.data())
    def cancel_peek(self, data: st.DataObject) -> None:
        if self.pending:
            uuid = data.draw(st.sampled_from(sorted(self.pending)))
            self.ctl.cancel_peek(self.instance, uuid)
            self.absorb()

    @rule(data=st.data())
    def acquire_hold(self, data: st.DataObject) -> None:
        live = self._live(("index", "log"))
        if len(self.holds) < 4:
            self.holds.append(
                self.ctl.acquire_read_hold(self.instance, data.draw(st.sampled_from(live)))
            )

    @rule(data=st.data(), step=st.integers(0, 3))
    def downgrade_or_release_hold(self, data: st.DataObject, step: int) -> None:
        if not self.holds:
            return
        hold = data.draw(st.sampled_from(self.holds))
        current = self.ctl.read_hold_frontier(hold)
        if step == 0 or not current.elements:
            self.holds.remove(hold)
            self.ctl.release_read_hold(hold)
            self.absorb()
        else:
            self.ctl.downgrade_read_hold(hold, Antichain([current.elements[0] + step]))
            self.absorb()

    # -- storage and time --------------------------------------------------------------------
    @rule(step=st.integers(1, 3))
    def storage_tick(self, step: int) -> None:
        """Every storage collection advances, storage compacts what it no longer needs, maintenance runs."""
        self.advance_storage(step)
        self.absorb()
        self.ctl.maintain()
        self.absorb()

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def frontiers_never_regress(self) -> None:
        view = self.ctl.instance(self.instance)
        for id in view.collection_ids(include_dropped=True):
            snap = view.collection(id)
            prev = self.last.get(id)
            if prev is not None:
                assert prev[0] <= snap.read_frontier, (
                    f"since of {id} regressed: {prev[0]} -> {snap.read_frontier}"
                )
                assert prev[1] <= snap.write_frontier, (
                    f"upper of {id} regressed: {prev[1]} -> {snap.write_frontier}"
                )
            self.last[id] = (snap.read_frontier, snap.write_frontier)

    @invariant()
    def no_since_passes_a_hold(self) -> None:
        view = self.ctl.instance(self.instance)
        for uuid, (id, ts) in self.pending.items():
            assert view.collection(id).read_frontier.less_equal(ts), (
                f"peek {uuid} at {ts} lost its hold on {id}"
            )
        for hold in self.holds:
            frontier = self.ctl.read_hold_frontier(hold)
            assert view.collection(hold.id).read_frontier <= frontier
        for snap in view.collections(include_dropped=True):
            for dep, held in snap.compute_dependencies:
                assert view.collection(dep).read_frontier <= held, (
                    f"{dep} compacted past {snap.id}'s hold"
                )
            for sid, held in snap.storage_dependencies:
                assert self.storage_since(sid) <= held, f"{sid} compacted past {snap.id}'s hold"
        for name in view.replica_ids():
            for snap in view.collections(include_dropped=True):
                try:
                    rc = view.replica_collection(name, snap.id)
                except LookupError:
                    continue
                for sid, held in rc.input_holds:
                    assert self.storage_since(sid) <= held
                    assert held <= rc.input_frontier, (
                        f"{name} input hold on {sid} passed its progress"
                    )

    @invariant()
    def history_stays_bounded(self) -> None:
        from ..history import reduce_commands

        view = self.ctl.instance(self.instance)
        tracked = len(view.collection_ids(include_dropped=True))
        pending = len(view.pending_peeks())
        reduced = reduce_commands(view.history())
        # Hello, CreateInstance, config, InitializationComplete, and per collection at most a
        # CreateDataflow, Schedule and AllowCompaction; plus the live peeks.
        assert len(reduced) <= 4 + 3 * tracked + pending, (
            f"reduced history too long: {len(reduced)}"
        )
        self.peak = max(self.peak, 4 + 3 * tracked + pending)
        assert view.history_len() <= 2 * self.peak + 1, (
            f"history {view.history_len()} > 2 * {self.peak} + 1"
        )

    @invariant()
    def pending_peeks_match(self) -> None:
        assert sorted(self.pending) == self.ctl.instance(self.instance).pending_peeks()

    def teardown(self) -> None:
        for uuid in sorted(self.pending):
            self.ctl.cancel_peek(self.instance, uuid)
            self.absorb()
        assert all(self.peek_results.get(u) == 1 for u in self.peeks_issued), "a peek got no result"


class ComposedControllerMachine(ControllerMachine):
    """:class:`ControllerMachine` on the composed controller: compute holds go to the real storage controller."""

    def make_controller(self) -> ComputeController:
        from ..controller import Controller
        from ..frontier.read_policy import LagWriteFrontier
        from ..storage import CollectionDescription, Table

        self.composed = Controller(check_protocol=True)
        self.composed.storage.create_collections(
            [(s, CollectionDescription(Table())) for s in STORAGE_IDS]
        )
        self.composed.storage.update_write_frontiers([(s, Antichain([1])) for s in STORAGE_IDS])
        self.composed.storage.set_read_policy([(s, LagWriteFrontier(1, 1)) for s in STORAGE_IDS])
        return self.composed.compute

    def _frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain]:
        fr = self.composed.storage.storage_frontiers(id)
        assert fr is not None
        return fr

    def storage_since(self, id: GlobalId) -> Antichain:
        return self._frontiers(id)[0]

    def storage_upper(self, id: GlobalId) -> Antichain:
        return self._frontiers(id)[1]

    def storage_fingerprint(self) -> object:
        return [self.composed.storage.collection(s).read_capabilities for s in STORAGE_IDS]

    def take_effects(self) -> list[Any]:
        return self.composed.drain()  # calls made on ``ctl`` (compute) directly included

    def advance_storage(self, step: int) -> None:
        updates = [(s, Antichain([self.storage_upper(s).elements[0] + step])) for s in STORAGE_IDS]
        self.composed.storage.update_write_frontiers(updates)
