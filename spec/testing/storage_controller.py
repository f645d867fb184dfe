"""Reusable test machinery for the storage controller: a shard-store model and a state machine.

:class:`ShardStoreModel` carries out the shard requests a
:class:`~tidegate.spec.storage.StorageController` emits (compare-and-append,
since downgrades, snapshots, drops) the way a persist-like store would (its
compare-and-append is the spec shard's), and records what it saw so tests
can check the controller's promises.

:class:`StorageControllerMachine` is a Hypothesis ``RuleBasedStateMachine``
that drives a controller (read-write, or read-only until it is promoted;
checking the storage protocol on every connection) through tables,
materialized-view outputs with dependencies, ingestions with remap
collections on instances whose one replica is replaced and reconnected,
replica responses (uppers of data and remap collections, statuses,
statistics, dropped ids, and responses that break the protocol), managed
collections, appends with deferred completion, snapshots, read policies,
read holds, exports and drops, and checks after every step that frontiers
never regress, no since passes a hold (the remap holds included: a remap
collection's since never passes ``step_back`` of its ingestion's upper),
compaction frontiers are monotone, every append resolves exactly once,
snapshots read exactly what was appended, each instance has at most one
replica and a bounded history, the managed collections hold what the
controller knows, and a rejected call changes nothing. Subclass it to run the
same checks against a driver of your own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..errors import RemoteProtocolError, StorageError, UpperMismatch
from ..frontier import Antichain, ChangeBatch, Row, Time, Update, consolidate_pairs
from ..frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)
from ..ids import GlobalId
from ..shard import BatchMeta, ShardState, compare_and_append
from ..storage import (
    MANAGED_KINDS,
    AppendCommand,
    AppendCompleted,
    CollectionDescription,
    CreateExportToken,
    DisconnectStorageReplica,
    DowngradeShardSince,
    DroppedId,
    DropShard,
    ExportDescription,
    Ingestion,
    Introspection,
    ManagedWrite,
    MaterializedView,
    ReadSnapshot,
    RegisterShard,
    SendStorageCommand,
    SinkStatistics,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageController,
    StorageEffect,
    StorageFrontierUpper,
    StorageReadHold,
    StorageResponse,
    Table,
    WriteToShard,
    statistics_row,
    status_row,
)

__all__ = [
    "ModelShard",
    "ShardStoreModel",
    "StorageControllerMachine",
    "controller_fingerprint",
    "storage_read_policies",
]


def storage_read_policies(max_time: int = 20) -> st.SearchStrategy[ReadPolicy]:
    """Read policies over int times: lags, step-back, fixed sinces, and combinations of them."""
    leaf: st.SearchStrategy[ReadPolicy] = st.one_of(
        st.builds(LagWriteFrontier, st.integers(0, 4), st.integers(1, 3)),
        st.just(StepBack()),
        st.builds(lambda t: ValidFrom(Antichain([t])), st.integers(0, max_time)),
        st.builds(lambda t: NoPolicy(Antichain([t])), st.integers(0, max_time)),
    )
    return st.one_of(leaf, st.builds(Multiple, st.lists(leaf, min_size=1, max_size=3)))


@dataclass
class ModelShard:
    """One shard: its since, upper and every update written to it."""

    since: Antichain = field(default_factory=lambda: Antichain.bottom(0))
    upper: Antichain = field(default_factory=lambda: Antichain.bottom(0))
    updates: list[Update] = field(default_factory=list)


class ShardStoreModel:
    """An in-memory, persist-like shard store that executes a storage controller's effects.

    Writes are compare-and-append: they apply only if the shard's upper is the
    expected one. Since downgrades must never regress and never pass the
    controller's since at the time they were issued (recorded in
    :attr:`violations`). Snapshot results are kept in :attr:`snapshots`.
    """

    def __init__(self) -> None:
        self.shards: dict[GlobalId, ModelShard] = {}
        self.dropped: list[GlobalId] = []
        self.snapshots: dict[int, list[tuple[Row, int]]] = {}
        self.violations: list[str] = []

    def execute(self, controller: StorageController, effect: StorageEffect) -> None:
        """Carry out one effect; reporting its outcome leaves effects in ``controller``'s outbox."""
        if isinstance(effect, RegisterShard):
            self.shards.setdefault(effect.id, ModelShard())
        elif isinstance(effect, DowngradeShardSince):
            shard = self.shards.get(effect.id)
            if shard is None:
                self.violations.append(f"since downgrade of unknown shard {effect.id}")
            elif not shard.since <= effect.frontier:
                self.violations.append(
                    f"shard {effect.id} since regressed {shard.since!r} -> {effect.frontier!r}"
                )
            else:
                shard.since = effect.frontier
        elif isinstance(effect, DropShard):
            self.shards.pop(effect.id, None)
            self.dropped.append(effect.id)
        elif isinstance(effect, WriteToShard):
            self.write(controller, effect)
        elif isinstance(effect, ReadSnapshot):
            self.read(controller, effect)

    def write(self, controller: StorageController, write: WriteToShard) -> None:
        """Compare-and-append decided by the spec shard's own transition, so the controller's
        writes must be ones a shard accepts (an empty one at the upper is a no-op success).
        A write the shard refuses for any reason but an upper mismatch raises."""
        shard = self.shards.get(write.id)
        if shard is None:
            controller.complete_write(write.ticket, write.id, False, Antichain.empty())
            return
        batch = None
        if write.updates:
            times = [t for _row, t, _d in write.updates]
            lower = write.expected_upper
            batch = BatchMeta("", lower, write.new_upper, lower, len(times), min(times), max(times))
        try:
            out = compare_and_append(
                ShardState(shard=str(write.id), upper=shard.upper),
                batch,
                write.expected_upper,
                write.new_upper,
                writer_id="controller",
                token=None,
                now_ms=0,
            )
        except UpperMismatch as e:
            controller.complete_write(write.ticket, write.id, False, e.actual_upper)
            return
        shard.updates.extend(write.updates)
        shard.upper = out.upper
        controller.complete_write(write.ticket, write.id, True, shard.upper)

    def read(self, controller: StorageController, read: ReadSnapshot) -> None:
        shard = self.shards.get(read.id)
        if shard is None or not shard.since.less_equal(read.as_of):
            self.violations.append(f"snapshot of {read.id} at {read.as_of} is not readable")
            self.snapshots[read.request] = []
        elif shard.upper.less_equal(read.as_of):
            self.violations.append(f"snapshot of {read.id} at {read.as_of} is not complete")
            self.snapshots[read.request] = []
        else:
            self.snapshots[read.request] = self.contents(read.id, read.as_of)
        controller.complete_snapshot(read.request)

    def contents(self, id: GlobalId, as_of: Time) -> list[tuple[Row, int]]:
        """The consolidated ``(row, diff)`` pairs of shard ``id`` at ``as_of``."""
        return consolidate_pairs((row, d) for row, t, d in self.shards[id].updates if t <= as_of)

    def run(
        self, controller: StorageController, taken: Iterable[StorageEffect] = ()
    ) -> list[StorageEffect]:
        """Execute ``taken`` (effects already drained) and ``controller``'s effects to a fixed point.

        Returns every effect seen, in order.
        """
        queue = [*taken, *controller.drain()]
        seen: list[StorageEffect] = []
        while queue:
            effect = queue.pop(0)
            seen.append(effect)
            self.execute(controller, effect)
            queue.extend(controller.drain())
        return seen


def controller_fingerprint(controller: StorageController) -> Any:
    """Everything observable about a controller, to check that a rejected call changed nothing."""
    instances = {}
    for i in controller.instances():
        session = controller.protocol_session(i)
        instances[i] = (
            tuple(controller.replicas(i)),
            tuple(controller.history(i)),
            None if session is None else session.snapshot(),
        )
    objects = [v.id for v in controller.collections()] + [e.id for e in controller.exports()]
    return (
        tuple((id, controller.status(id), controller.statistics(id)) for id in sorted(objects)),
        tuple(controller.remap_holds().items()),
        tuple(controller.managed_collections().items()),
        controller.read_only,
        tuple(controller.collections()),
        tuple(controller.exports()),
        instances,
        tuple(controller.outstanding_tokens()),
        tuple(controller.pending_appends()),
        tuple(controller.pending_snapshots()),
        tuple(controller.durable_shards()),
        controller.initialized,
        controller.configuration,
    )


_INSTANCES = ("i1", "i2")
_REPLICAS = ("r1", "r2", "r3")


class StorageControllerMachine(RuleBasedStateMachine):
    """Random walks over the storage controller API with a model shard store; see the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.controller = StorageController(check_protocol=True)
        self.store = ShardStoreModel()
        self.connected: dict[str, str] = {}
        self.managed_rows: dict[GlobalId, dict[Row, int]] = {}
        self.status_rows: dict[GlobalId, list[Row]] = {}
        self.next_id = 1
        self.holds: list[StorageReadHold] = []
        self.tokens: list[CreateExportToken] = []
        self.deferred_writes: list[WriteToShard] = []
        self.deferred_reads: list[ReadSnapshot] = []
        self.tickets: dict[int, int] = {}
        self.appended: dict[int, list[tuple[GlobalId, list[Update]]]] = {}
        self.acknowledged: dict[GlobalId, list[Update]] = {}
        self.last_since: dict[GlobalId, Antichain] = {}
        self.last_upper: dict[GlobalId, Antichain] = {}
        self.last_implied: dict[GlobalId, Antichain] = {}
        self.compactions: dict[tuple[str, str, GlobalId], Antichain] = {}
        for instance in _INSTANCES:
            self.controller.create_instance(instance)

    @initialize(read_only=st.booleans())
    def start(self, read_only: bool) -> None:
        if read_only:
            self.controller = StorageController(read_only=True, check_protocol=True)
            for instance in _INSTANCES:
                self.controller.create_instance(instance)

    # -- plumbing ----------------------------------------------------------------------

    def _take(self) -> None:
        """Run the controller's effects: defer writes and reads (to interleave them), execute the rest."""
        queue = self.controller.drain()
        while queue:
            effect = queue.pop(0)
            if isinstance(effect, WriteToShard):
                self.deferred_writes.append(effect)
                continue
            if isinstance(effect, ReadSnapshot):
                self.deferred_reads.append(effect)
                continue
            if isinstance(effect, AppendCompleted):
                assert effect.ticket in self.tickets, f"unknown completion {effect}"
                self.tickets[effect.ticket] += 1
                if effect.error is None:
                    for id, updates in self.appended.pop(effect.ticket, ()):
                        self.acknowledged.setdefault(id, []).extend(updates)
            if isinstance(effect, DisconnectStorageReplica):
                assert self.connected.get(effect.instance) == effect.replica, effect
            if isinstance(effect, ManagedWrite):
                assert not self.controller.read_only, f"a read-only controller wrote {effect}"
                self._apply_managed(effect)
            if isinstance(effect, SendStorageCommand) and isinstance(
                effect.command, StorageAllowCompaction
            ):
                key = (effect.instance, effect.replica, effect.command.id)
                previous = self.compactions.get(key)
                assert previous is None or previous <= effect.command.frontier, (
                    f"AllowCompaction regressed for {key}: {previous!r} -> {effect.command.frontier!r}"
                )
                self.compactions[key] = effect.command.frontier
            self.store.execute(self.controller, effect)
            queue.extend(self.controller.drain())

    def _rejected(self, call: Any, *args: Any) -> bool:
        """Run ``call``; if it raises a StorageError, check that nothing changed. True if it raised."""
        before = controller_fingerprint(self.controller)
        try:
            call(*args)
        except StorageError:
            assert controller_fingerprint(self.controller) == before, (
                f"{call.__name__} raised but changed state"
            )
            return True
        self._take()
        return False

    def _apply_managed(self, write: ManagedWrite) -> None:
        """What the driver does: fold the rows into the collection (truncating first if asked)."""
        contents = self.managed_rows.setdefault(write.collection_id, {})
        if write.truncate:
            contents.clear()
        for row, diff in write.updates:
            n = contents.get(row, 0) + diff
            assert n >= 0, f"managed write retracts {row} that {write.collection_id} lacks"
            if n:
                contents[row] = n
            else:
                contents.pop(row, None)
            if diff > 0 and len(row) == 4:
                self.status_rows.setdefault(write.collection_id, []).append(row)

    def _fresh_id(self) -> GlobalId:
        self.next_id += 1
        return GlobalId.user(self.next_id)

    def _live(self) -> list[GlobalId]:
        return [v.id for v in self.controller.collections() if not v.is_dropped]

    def _tables(self) -> list[GlobalId]:
        return [
            v.id
            for v in self.controller.collections()
            if not v.is_dropped and isinstance(v.description.data_source, Table)
        ]

    # -- collections ---------------------------------------------------------------------

    @rule()
    def create_table(self) -> None:
        self._rejected(
            self.controller.create_collections, [(self._fresh_id(), CollectionDescription(Table()))]
        )

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data())
    def create_view(self, data: st.DataObject) -> None:
        live = self._live()
        inputs = data.draw(st.lists(st.sampled_from(live), min_size=1, max_size=3, unique=True))
        desc = CollectionDescription(MaterializedView(tuple(sorted(inputs))))
        self._rejected(self.controller.create_collections, [(self._fresh_id(), desc)])

    @rule(data=st.data())
    def create_ingestion(self, data: st.DataObject) -> None:
        instance = data.draw(st.sampled_from(_INSTANCES))
        remap = self._fresh_id()
        source = self._fresh_id()
        descs = [
            (remap, CollectionDescription(Table())),
            (source, CollectionDescription(Ingestion(instance, remap))),
        ]
        self._rejected(self.controller.create_collections, descs)

    @rule(kind=st.sampled_from(sorted(MANAGED_KINDS)))
    def create_managed(self, kind: str) -> None:
        desc = CollectionDescription(Introspection(kind))
        self._rejected(self.controller.create_collections, [(self._fresh_id(), desc)])

    @rule()
    def promote(self) -> None:
        self.controller.read_write()
        self._take()

    @rule()
    def create_with_missing_dependency(self) -> None:
        desc = CollectionDescription(MaterializedView((GlobalId.user(10_000),)))
        assert self._rejected(self.controller.create_collections, [(self._fresh_id(), desc)])

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data())
    def set_policy(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self._live()))
        policy = data.draw(storage_read_policies(max_time=12))
        self._rejected(self.controller.set_read_policy, [(id, policy)])

    # -- appends and uppers ----------------------------------------------------------------

    @precondition(lambda self: bool(self._tables()))
    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self._tables()))
        upper = self.controller.collection(id).upper.as_option()
        pending = [w.new_upper.as_option() for w in self.deferred_writes if w.id == id]
        base = max([upper or 0, *(p or 0 for p in pending)])
        new_upper = base + data.draw(st.integers(0, 3))
        times = st.integers(base, max(base, new_upper - 1))
        rows = (
            st.lists(
                st.tuples(st.tuples(st.sampled_from("abc")), times, st.sampled_from([1, -1])),
                max_size=3,
            )
            if new_upper > base
            else st.just([])
        )
        updates = data.draw(rows)
        before = controller_fingerprint(self.controller)
        try:
            ticket = self.controller.append([AppendCommand(id, updates, Antichain([new_upper]))])
        except StorageError:
            assert controller_fingerprint(self.controller) == before
            return
        self.tickets[ticket] = 0
        self.appended[ticket] = [(id, updates)]
        self._take()

    @precondition(lambda self: bool(self.deferred_writes))
    @rule(data=st.data())
    def complete_write(self, data: st.DataObject) -> None:
        write = self.deferred_writes.pop(data.draw(st.integers(0, len(self.deferred_writes) - 1)))
        self.store.write(self.controller, write)
        self._take()

    @precondition(lambda self: bool(self.deferred_reads))
    @rule(data=st.data())
    def complete_read(self, data: st.DataObject) -> None:
        read = self.deferred_reads.pop(data.draw(st.integers(0, len(self.deferred_reads) - 1)))
        acked = self.acknowledged.get(read.id, [])
        expected = consolidate_pairs((row, d) for row, t, d in acked if t <= read.as_of)
        self.store.read(self.controller, read)
        self._take()
        assert self.store.snapshots[read.request] == expected, (
            "snapshot differs from acknowledged appends"
        )

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data())
    def snapshot(self, data: st.DataObject) -> None:
        views = [v for v in self.controller.collections() if not v.is_dropped]
        readable = [v for v in views if v.since < v.upper]
        prefer_readable: bool = data.draw(st.booleans())
        if readable and prefer_readable:
            view = data.draw(st.sampled_from(readable))
            since = view.since.as_option() or 0
            upper = view.upper.as_option()
            last = upper - 1 if upper is not None else since + 5
            as_of = data.draw(st.integers(since, max(since, last)))
        else:
            view = data.draw(st.sampled_from(views))
            as_of = data.draw(st.integers(0, 12))
        id = view.id
        before = controller_fingerprint(self.controller)
        try:
            self.controller.snapshot(id, as_of)
        except StorageError:
            assert controller_fingerprint(self.controller) == before
            return
        self._take()

    @precondition(lambda self: bool(self.controller.exports() or self._written_elsewhere()))
    @rule(data=st.data())
    def report_upper(self, data: st.DataObject) -> None:
        ids = [e.id for e in self.controller.exports()] + self._written_elsewhere()
        id = data.draw(st.sampled_from(ids))
        upper = Antichain([data.draw(st.integers(0, 14))])
        if id in self.store.shards:
            # An ingestion or a materialized view writes its shard (no data in this model).
            shard = self.store.shards[id]
            if shard.upper < upper:
                shard.upper = upper
        exports = {e.id: e for e in self.controller.exports()}
        if id in exports:
            instance: str | None = exports[id].description.instance
        else:
            instance = self.controller.collection(id).description.instance
        if instance is None:
            self.controller.update_write_frontiers([(id, self.store.shards[id].upper)])
            self._take()
            return
        if id in self.store.shards:
            upper = self.store.shards[id].upper
        self._respond(instance, StorageFrontierUpper(id, upper))

    def _running(self, instance: str) -> tuple[str, Any] | None:
        """The instance's replica and its protocol session, if it may answer now."""
        replicas = self.controller.replicas(instance)
        session = self.controller.protocol_session(instance)
        if not replicas or session is None or not session.stage.is_running:
            return None
        return replicas[0], session

    def _respond(self, instance: str, response: StorageResponse) -> None:
        """Send ``response`` as a correct replica would: only what its session allows."""
        running = self._running(instance)
        if running is None:
            return
        replica, session = running
        try:
            session.check_response(response)
        except RemoteProtocolError:
            return
        self.controller.handle_response(instance, replica, response)
        self._take()

    def _session_objects(self) -> list[tuple[str, Any]]:
        """``(instance, record)`` of every object run in the current iterations."""
        out: list[tuple[str, Any]] = []
        for instance in _INSTANCES:
            running = self._running(instance)
            if running is not None:
                out.extend((instance, rec) for _, rec in sorted(running[1].objects.items()))
        return out

    @precondition(lambda self: bool(self._session_objects()))
    @rule(data=st.data())
    def report_remap_upper(self, data: st.DataObject) -> None:
        instance, rec = data.draw(st.sampled_from(self._session_objects()))
        if rec.remap_id is None:
            return
        upper = Antichain([data.draw(st.integers(0, 14))])
        shard = self.store.shards.get(rec.remap_id)
        if shard is not None and shard.upper < upper:
            shard.upper = upper
        self._respond(instance, StorageFrontierUpper(rec.remap_id, upper))

    @precondition(lambda self: bool(self._session_objects()))
    @rule(data=st.data())
    def report_status(self, data: st.DataObject) -> None:
        instance, rec = data.draw(st.sampled_from(self._session_objects()))
        if rec.dropped:
            status = SourceStatus.DROPPED
        else:
            status = data.draw(
                st.sampled_from([s for s in SourceStatus if s is not SourceStatus.DROPPED])
            )
        error = data.draw(st.sampled_from([None, "upstream is down"]))
        self._respond(instance, StatusUpdate(rec.id, status, error))

    @precondition(lambda self: bool(self._session_objects()))
    @rule(data=st.data())
    def report_statistics(self, data: st.DataObject) -> None:
        instance, rec = data.draw(st.sampled_from(self._session_objects()))
        n = st.integers(0, 3)
        stats: SourceStatistics | SinkStatistics
        if rec.kind == "sink":
            stats = SinkStatistics(data.draw(n), data.draw(n), data.draw(n), data.draw(n))
        else:
            stats = SourceStatistics(
                data.draw(n), data.draw(n), offset_known=data.draw(st.none() | n)
            )
        self._respond(instance, StatisticsUpdate(rec.id, stats))

    @precondition(lambda self: bool(self._session_objects()))
    @rule(data=st.data())
    def report_dropped(self, data: st.DataObject) -> None:
        instance, rec = data.draw(st.sampled_from(self._session_objects()))
        self._respond(instance, DroppedId(rec.id))

    @precondition(lambda self: bool(self._session_objects()))
    @rule(data=st.data())
    def broken_response(self, data: st.DataObject) -> None:
        # A response no correct replica sends: refused with the replica to blame, nothing changed.
        instance, rec = data.draw(st.sampled_from(self._session_objects()))
        running = self._running(instance)
        assert running is not None
        replica, session = running
        last = session.last_reported(rec.id)
        candidates: list[StorageResponse] = [
            StatusUpdate(GlobalId.user(90_000), SourceStatus.RUNNING)
        ]
        if last is not None and not last.is_empty():
            candidates.append(StorageFrontierUpper(rec.id, last))
        if not rec.dropped:
            candidates.append(DroppedId(rec.id))
        if rec.dropped_reported:
            candidates.append(StatusUpdate(rec.id, SourceStatus.DROPPED))
        response = data.draw(st.sampled_from(candidates))
        before = controller_fingerprint(self.controller)
        try:
            self.controller.handle_response(instance, replica, response)
        except RemoteProtocolError:
            assert controller_fingerprint(self.controller) == before
        else:
            raise AssertionError(f"{response} was accepted")

    def _written_elsewhere(self) -> list[GlobalId]:
        return [
            v.id
            for v in self.controller.collections()
            if isinstance(v.description.data_source, (Ingestion, MaterializedView))
        ]

    # -- holds -------------------------------------------------------------------------------

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data())
    def acquire_hold(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self._live()))
        self.holds.extend(self.controller.acquire_read_holds([id]))

    @precondition(lambda self: bool(self.holds))
    @rule(data=st.data())
    def move_hold(self, data: st.DataObject) -> None:
        hold = data.draw(st.sampled_from(self.holds))
        if data.draw(st.booleans()):
            hold.release()
            self._take()
            self.holds.remove(hold)
            return
        current = hold.frontier.as_option() or 0
        hold.downgrade(Antichain([current + data.draw(st.integers(0, 3))]))
        self._take()

    @precondition(lambda self: len(self._live()) >= 2)
    @rule(data=st.data())
    def invalid_hold_changes(self, data: st.DataObject) -> None:
        # A valid change on the larger id (applied first by the worklist) and a
        # release of a hold never taken on the smaller one: all must be undone.
        small, large = sorted(
            data.draw(st.lists(st.sampled_from(self._live()), min_size=2, max_size=2, unique=True))
        )
        since = self.controller.collection(large).since.as_option() or 0
        unheld = max(t for t, _ in self.controller.collection(small).read_capabilities) + 1
        changes = {large: [(since + data.draw(st.integers(0, 2)), 1)], small: [(unheld, -1)]}
        assert self._rejected(self.controller.update_read_capabilities, changes)

    # -- exports -----------------------------------------------------------------------------

    @precondition(lambda self: bool(self._live()))
    @rule(data=st.data())
    def prepare_export(self, data: st.DataObject) -> None:
        source = data.draw(st.sampled_from(self._live()))
        self.tokens.append(self.controller.prepare_export(self._fresh_id(), source))
        self._take()

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data(), create=st.booleans())
    def finish_export(self, data: st.DataObject, create: bool) -> None:
        token = data.draw(st.sampled_from(self.tokens))
        self.tokens.remove(token)
        if create:
            desc = ExportDescription(token.from_id, data.draw(st.sampled_from(_INSTANCES)))
            rejected = self._rejected(self.controller.create_exports, [(token, desc)])
        else:
            rejected = self._rejected(self.controller.cancel_prepare_export, token)
        if rejected:
            self.tokens.append(token)

    # -- drops and replicas --------------------------------------------------------------------

    @precondition(lambda self: bool(self.controller.collections()))
    @rule(data=st.data())
    def drop_source(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from([v.id for v in self.controller.collections()]))
        self._rejected(self.controller.drop_sources, [id])

    @precondition(lambda self: bool(self.controller.exports()))
    @rule(data=st.data())
    def drop_sink(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from([e.id for e in self.controller.exports()]))
        self._rejected(self.controller.drop_sinks, [id])

    @rule(instance=st.sampled_from(_INSTANCES), replica=st.sampled_from(_REPLICAS))
    def connect_replica(self, instance: str, replica: str) -> None:
        # The replay repeats the last compaction of each live object, so even across
        # reconnections a replica never sees a compaction frontier move back.
        self.controller.connect_replica(instance, replica)
        self._take()
        self.connected[instance] = replica

    @rule(instance=st.sampled_from(_INSTANCES), replica=st.sampled_from(_REPLICAS))
    def drop_replica(self, instance: str, replica: str) -> None:
        if not self._rejected(self.controller.drop_replica, instance, replica):
            self.connected.pop(instance, None)

    @rule()
    def initialization_complete(self) -> None:
        self.controller.initialization_complete()
        self._take()

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def frontiers_never_regress(self) -> None:
        for v in self.controller.collections():
            pairs = (
                (self.last_since, v.since),
                (self.last_upper, v.upper),
                (self.last_implied, v.implied_capability),
            )
            for seen, now in pairs:
                before = seen.get(v.id)
                assert before is None or before <= now, f"{v.id} regressed {before!r} -> {now!r}"
                seen[v.id] = now

    @invariant()
    def no_since_passes_a_hold(self) -> None:
        views = {v.id: v for v in self.controller.collections()}
        for v in views.values():
            assert v.since <= v.implied_capability, f"{v.id}: since beyond its implied capability"
            assert all(c > 0 for _, c in v.read_capabilities), f"{v.id}: non-positive count"
            for dep in v.dependencies:
                assert views[dep].since <= v.since, f"{dep} compacted past dependent {v.id}"
        for hold in self.holds:
            assert hold.id in views and views[hold.id].since <= hold.frontier
        for token in self.tokens:
            assert views[token.from_id].since <= token.acquired_since
        for e in self.controller.exports():
            assert views[e.description.from_id].since <= e.read_capability
        for read in self.deferred_reads:
            assert views[read.id].since.less_equal(read.as_of)
        for ingestion, (remap, remap_hold) in self.controller.remap_holds().items():
            # Every remap collection here starts at [0] with its ingestion: the hold keeps its since
            # at or below step_back of the ingestion's upper, whatever its read policy.
            back = StepBack().frontier(views[ingestion].upper)
            assert views[remap].since <= remap_hold <= back, (
                f"remap {remap} since {views[remap].since!r} passed {ingestion}'s upper"
            )

    @invariant()
    def holds_are_accounted_for(self) -> None:
        # Every count in a collection's read capabilities belongs to a holder the
        # machine knows: the implied capability, a dependent's since, a read
        # hold, an export token, an export's capability, or a running snapshot.
        expected: dict[GlobalId, ChangeBatch[Time]] = {}

        def hold(id: GlobalId, frontier: Antichain) -> None:
            expected.setdefault(id, ChangeBatch()).extend((t, 1) for t in frontier)

        for v in self.controller.collections():
            hold(v.id, v.implied_capability)
            for dep in v.dependencies:
                hold(dep, v.since)
        for h in self.holds:
            hold(h.id, h.frontier)
        for token in self.tokens:
            hold(token.from_id, token.acquired_since)
        for e in self.controller.exports():
            hold(e.description.from_id, e.read_capability)
        for read in self.deferred_reads:
            hold(read.id, Antichain([read.as_of]))
        for remap, frontier in self.controller.remap_holds().values():
            hold(remap, frontier)
        for v in self.controller.collections():
            got = list(v.read_capabilities)
            assert got == list(expected.get(v.id, ChangeBatch())), (
                f"{v.id}: holds {got} unaccounted"
            )

    @invariant()
    def shard_store_agrees(self) -> None:
        assert not self.store.violations, self.store.violations
        for v in self.controller.collections():
            shard = self.store.shards[v.id]
            assert shard.since <= v.since, f"shard since of {v.id} is beyond the controller's"

    @invariant()
    def appends_resolve_once(self) -> None:
        assert all(n <= 1 for n in self.tickets.values())
        pending = set(self.controller.pending_appends())
        for ticket, n in self.tickets.items():
            assert (n == 0) == (ticket in pending), f"ticket {ticket} resolved {n} times"

    @invariant()
    def history_bounded(self) -> None:
        live = len(self.controller.collections()) + len(self.controller.exports())
        for instance in self.controller.instances():
            size = len(self.controller.history(instance))
            assert size <= 3 + 2 * live, (
                f"history of {instance} has {size} commands for {live} objects"
            )
            assert len(self.controller.replicas(instance)) <= 1

    @invariant()
    def managed_collections_agree(self) -> None:
        if self.controller.read_only:
            return
        managed = self.controller.managed_collections()
        objects = {v.id for v in self.controller.collections()} | {
            e.id for e in self.controller.exports()
        }
        for kind, sink in (("source_statistics", False), ("sink_statistics", True)):
            if kind not in managed:
                continue
            want = {}
            for id in objects:
                stats = self.controller.statistics(id)
                if stats is not None and isinstance(stats, SinkStatistics) == sink:
                    want[statistics_row(id, stats)] = 1
            got = self.managed_rows.get(managed[kind], {})
            assert got == want, f"{kind}: {got} != {want}"
        for kind in ("source_status_history", "sink_status_history"):
            if kind not in managed:
                continue
            last: dict[str, Row] = {}
            for row in self.status_rows.get(managed[kind], []):
                assert last.get(row[0]) != row, f"{kind} repeats {row}"
                last[row[0]] = row
            for id_text, row in last.items():
                current = self.controller.status(GlobalId.parse(id_text))
                assert current is not None and status_row(current) == row

    def teardown(self) -> None:
        # Drain everything outstanding: every append and snapshot must resolve.
        while self.deferred_writes or self.deferred_reads:
            if self.deferred_writes:
                self.store.write(self.controller, self.deferred_writes.pop(0))
                self._take()
            if self.deferred_reads:
                self.store.read(self.controller, self.deferred_reads.pop(0))
                self._take()
        assert not self.controller.pending_appends()
        assert not self.controller.pending_snapshots()
        assert all(n == 1 for n in self.tickets.values())
