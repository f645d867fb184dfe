"""The storage controller as a pure state machine (docs/reference/storage-and-frontiers.md section 2).

It manages durable collections (tables, ingested sources, materialized-view
outputs) and exports (sinks): their sinces and uppers, read policies and read
holds, dependencies between them, appends and snapshots, and the storage
instances (one replica each) that run ingestions and sinks. Every public call
validates first and mutates after -- a call that raises changes nothing -- and
records the effects the driver must carry out (:mod:`.effects`) in the
controller's outbox, which the owner takes with :meth:`StorageController.drain`.

Read capabilities propagate along dependencies with the worklist algorithm of
section 2.4; its cost for one change is proportional to the dependencies it
reaches, never to the number of collections.

**The remap hold.** A restarted ingestion reads its remap collection as of
``R - 1``, where ``R`` is its resumption frontier (:mod:`.resumption`,
:mod:`.reclock`). Besides the dependency hold (the ingestion's since, section
2.6), the controller therefore holds the remap collection at
``step_back(R)`` for as long as the ingestion lives, moving the hold as the
ingestion's upper advances and releasing it when the ingestion is removed.
Whatever read policy the remap collection has, its since never passes
``step_back`` of the ingestion's upper.

**Status and statistics.** Replicas report :class:`~.commands.StatusUpdate`
and :class:`~.commands.StatisticsUpdate`; the controller keeps the latest
status and the merged statistics of every ingestion and sink
(:meth:`StorageController.status`, :meth:`StorageController.statistics`) and
writes them to the storage-managed collections (:mod:`.introspection`)
through :class:`~.effects.ManagedWrite`. A dropped object gets the status
``dropped``; responses for removed objects are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from ..compute.uuids import UuidFactory, counter_uuids
from ..errors import (
    DependencyCycle,
    ExportInstanceMissing,
    IdentifierInvalid,
    IdentifierMissing,
    IngestionInstanceMissing,
    InvalidAppendBounds,
    InvalidUpper,
    InvalidUppers,
    InvalidUsage,
    ReadBeforeSince,
    ReadBeyondUpper,
    ReadOnlyController,
    SinkIdReused,
    SourceIdReused,
    StorageInstanceExists,
    StorageInstanceMissing,
    StorageReplicaMissing,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
)
from ..errors.frontier import InvalidFrontier
from ..frontier import Antichain, ChangeBatch, Row, Time, Update, check_time
from ..frontier.read_policy import ReadPolicy, StepBack, ValidFrom, apply_policy
from ..ids import GlobalId, InstanceId, ReplicaId
from ..outbox import Outbox, atomic
from .appends import AppendBatch, AppendCommand
from .commands import (
    DroppedId,
    RunIngestion,
    RunSink,
    SinkStatistics,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageResponse,
    StorageUpdateConfiguration,
)
from .descriptions import (
    CollectionDescription,
    CreateExportToken,
    ExportDescription,
    Ingestion,
    Introspection,
    ShardFrontiers,
    StorageParameters,
    Webhook,
)
from .effects import (
    AppendCompleted,
    CollectionDropped,
    DisconnectStorageReplica,
    DowngradeShardSince,
    DropShard,
    ManagedWrite,
    ReadSnapshot,
    RegisterShard,
    SinceChanged,
    StorageEffect,
    UpperChanged,
    WriteToShard,
)
from .holds import StorageReadHold
from .instances import StorageInstance, sink_as_of
from .introspection import (
    MANAGED_KINDS,
    SINK_STATISTICS,
    SINK_STATUS_HISTORY,
    SOURCE_STATISTICS,
    SOURCE_STATUS_HISTORY,
    statistics_row,
    status_row,
)
from .monotonic import APPEND_ONLY_KINDS, MonotonicAppender, MonotonicWrite
from .propagation import propagate_read_capabilities
from .resumption import resumption_frontier
from .sessions import StorageControllerSession
from .state import CollectionState, CollectionView, ExportState, ExportView

__all__ = ["StorageController"]

_RANK = {"s": 0, "u": 1, "t": 2}

_MONOTONIC_RETRIES = 64
"""How many times a monotonic append is written again at a moved upper before its ticket fails
(each retry means another writer advanced the collection meanwhile)."""
_STEP_BACK = StepBack()
_BOTTOM = Antichain.bottom(0)
_EMPTY = Antichain.empty()


def _id_key(id: GlobalId) -> tuple[int, int]:
    return (_RANK[id.namespace], id.value)


def _replace(old: Antichain, new: Antichain) -> list[tuple[Time, int]]:
    """The hold changes that move one hold from ``old`` to ``new``."""
    return [*((t, -1) for t in old), *((t, 1) for t in new)]


def _check_antichain(value: object, what: str) -> Antichain:
    if not isinstance(value, Antichain):
        raise InvalidFrontier(f"{what} must be an Antichain, got {value!r}")
    return value


class StorageController:
    """Durable collections, exports and storage instances; see the module docstring.

    ``durable_shards`` are the shards the shard store held when this
    controller started; :meth:`reconcile_state` drops those that no
    collection claimed since. ``read_only``: no table appends, no managed
    writes, no ``AllowWrites`` to instances until :meth:`read_write`.
    ``uuid_factory`` gives the ``Hello`` nonces (deterministic by default).
    ``check_protocol``: every command sent to a storage replica and every
    response from it goes through a :class:`~.sessions.StorageControllerSession`
    (a response that breaks the protocol raises a ``RemoteProtocolError``
    and changes nothing).
    """

    def __init__(
        self,
        durable_shards: Iterable[GlobalId] = (),
        *,
        read_only: bool = False,
        uuid_factory: UuidFactory | None = None,
        check_protocol: bool = False,
    ) -> None:
        self._read_only = read_only
        self._uuids = uuid_factory if uuid_factory is not None else counter_uuids()
        self.epoch = 0
        """The controller's writer epoch, sent in every replica's ``StorageHello`` (a connection
        made after :meth:`set_epoch` brings the new one)."""
        self._check_protocol = check_protocol
        # Each ingestion's hold on its remap collection: ingestion -> (remap, frontier).
        self._remap_holds: dict[GlobalId, tuple[GlobalId, Antichain]] = {}
        # Latest status (any object ever run) and merged statistics (live objects).
        self._statuses: dict[GlobalId, StatusUpdate] = {}
        self._statistics: dict[GlobalId, SourceStatistics | SinkStatistics] = {}
        # Managed collection of each kind (see .introspection).
        self._managed: dict[str, GlobalId] = {}
        self._collections: dict[GlobalId, CollectionState] = {}
        self._exports: dict[GlobalId, ExportState] = {}
        self._graph: nx.DiGraph = nx.DiGraph()
        self._instances: dict[InstanceId, StorageInstance] = {}
        self._retired: set[GlobalId] = set()
        self._tokens: dict[int, CreateExportToken] = {}
        self._appends: dict[int, AppendBatch] = {}
        self._write_upper: dict[GlobalId, Antichain] = {}
        self._inflight: dict[GlobalId, int] = {}
        self._snapshots: dict[int, tuple[GlobalId, Time]] = {}
        # Monotonic appends in flight: ticket -> the append, and the write it is waiting on.
        self._monotonic: dict[int, tuple[MonotonicWrite, WriteToShard]] = {}
        self._durable_shards: set[GlobalId] = set(durable_shards)
        # Shards a read-only controller was asked to keep when it reconciled: the
        # reconciliation waits for read_write (the writer may still own the others).
        self._deferred_reconcile: set[GlobalId] | None = None
        self._serial = 0
        self._initialized = False
        self._config = StorageParameters()
        self._outbox: Outbox[StorageEffect] = Outbox()
        # Tests flip the worklist's order to check that the fixed point does not depend on it.
        self._largest_first = True

    # ------------------------------------------------------------------ lifecycle

    @atomic
    def initialization_complete(self) -> None:
        """Mark the controller initialized and tell every instance (once)."""
        if self._initialized:
            return
        self._initialized = True
        self._outbox.extend(self._broadcast(StorageInitializationComplete()))

    @property
    def initialized(self) -> bool:
        return self._initialized

    @atomic
    def update_configuration(self, params: StorageParameters) -> None:
        """Merge ``params`` into the configuration and send the merged result to every instance."""
        if not isinstance(params, StorageParameters):
            raise InvalidUsage(f"update_configuration takes StorageParameters, got {params!r}")
        self._config = self._config.update(params)
        self._outbox.extend(self._broadcast(StorageUpdateConfiguration(self._config)))

    @property
    def configuration(self) -> StorageParameters:
        return self._config

    def _broadcast(self, command: StorageCommand) -> list[StorageEffect]:
        out: list[StorageEffect] = []
        for name in sorted(self._instances):
            out.extend(self._instances[name].send(command))
        return out

    # ------------------------------------------------------------------ instances

    @atomic
    def create_instance(self, instance: InstanceId) -> None:
        """Create storage instance ``instance`` (:class:`StorageInstanceExists` if it exists).

        It has no replica yet; initialization and configuration reach its
        replica with the history replayed by :meth:`connect_replica`.
        """
        if instance in self._instances:
            raise StorageInstanceExists(instance)
        self._instances[instance] = StorageInstance(instance, check_protocol=self._check_protocol)

    @atomic
    def drop_instance(self, instance: InstanceId) -> None:
        """Forget storage instance ``instance`` and its replicas (:class:`StorageInstanceMissing`).

        Ingestions and sinks still assigned to it keep their collections and
        holds but are no longer run anywhere (as in the reference, they leak).
        """
        self._instance(instance)
        del self._instances[instance]

    def set_epoch(self, epoch: int) -> None:
        """The controller's writer epoch is now ``epoch`` (for the next connection's Hello)."""
        self.epoch = max(self.epoch, epoch)

    @atomic
    def connect_replica(self, instance: InstanceId, replica: ReplicaId, location: str = "") -> None:
        """(Re)connect ``replica`` at ``location`` as ``instance``'s one replica; replay the history to it.

        If another replica was connected, it is severed first
        (:class:`~.effects.DisconnectStorageReplica`). The replica receives a
        new protocol iteration: ``Hello`` with a fresh nonce, then
        :meth:`history`.
        """
        inst = self._instance(instance)
        history = self._history(inst)
        nonce = self._uuids()
        old = inst.connect(replica, location)
        if old is not None:
            self._outbox.emit(DisconnectStorageReplica(instance, old))
        for cmd in (StorageHello(nonce, self.epoch), *history):
            self._outbox.extend(inst.address(cmd))

    @atomic
    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        """Disconnect ``replica`` from ``instance`` (:class:`StorageReplicaMissing`)."""
        inst = self._instance(instance)
        if inst.replica != replica:
            raise StorageReplicaMissing(instance, replica)
        inst.disconnect()

    def instances(self) -> list[InstanceId]:
        return sorted(self._instances)

    def replicas(self, instance: InstanceId) -> list[ReplicaId]:
        """The replica connected to ``instance``: none or one."""
        return sorted(self._instance(instance).replicas)

    def history(self, instance: InstanceId) -> list[StorageCommand]:
        """What a replica connecting to ``instance`` now would receive after its ``Hello``.

        Its size tracks live state: at most configuration,
        ``InitializationComplete`` and ``AllowWrites``, plus two commands per
        live ingestion or sink (its ``Run`` and its last compaction).
        """
        return self._history(self._instance(instance))

    def protocol_session(self, instance: InstanceId) -> StorageControllerSession | None:
        """The protocol session with ``instance``'s replica (``None`` without ``check_protocol`` or
        replica). Read it; the controller feeds it."""
        return self._instance(instance).session

    def _history(self, inst: StorageInstance) -> list[StorageCommand]:
        return inst.history(
            self._initialized, self._config, self._resume_upper, not self._read_only
        )

    def _resume_upper(self, id: GlobalId) -> Antichain:
        """Where ingestion ``id`` resumes: the resumption frontier of its data outputs."""
        return resumption_frontier([self._upper_of(id)])

    def _instance(self, instance: InstanceId) -> StorageInstance:
        inst = self._instances.get(instance)
        if inst is None:
            raise StorageInstanceMissing(instance)
        return inst

    def _upper_of(self, id: GlobalId) -> Antichain:
        c = self._collections.get(id)
        if c is not None:
            return c.write_frontier
        e = self._exports.get(id)
        return e.write_frontier if e is not None else _EMPTY

    def _send_to(self, instance: InstanceId | None, command: StorageCommand) -> list[StorageEffect]:
        if instance is None:
            return []
        inst = self._instances.get(instance)
        return list(inst.send(command)) if inst is not None else []

    @atomic
    def handle_response(
        self, instance: InstanceId, replica: ReplicaId, response: StorageResponse
    ) -> None:
        """Take a response from the replica of ``instance``.

        ``StorageFrontierUpper`` advances the write frontier of an ingestion,
        its remap collection or a sink the instance runs (non-advancing and
        unknown ids are ignored, so replays never move frontiers back);
        ``StatusUpdate`` and ``StatisticsUpdate`` are folded into the object's
        status and statistics and written to the managed collections;
        ``DroppedId`` needs nothing: the object's state left when its
        compaction reached ``[]``. Responses for objects the controller no
        longer has are ignored. [StorageReplicaMissing] if ``replica`` is not
        the instance's replica; with ``check_protocol``, a response that breaks
        the protocol raises a ``RemoteProtocolError``.
        """
        inst = self._instance(instance)
        if inst.replica != replica:
            raise StorageReplicaMissing(instance, replica)
        if not isinstance(
            response, StorageFrontierUpper | DroppedId | StatusUpdate | StatisticsUpdate
        ):
            raise InvalidUsage(f"not a storage response: {response!r}")
        if isinstance(response, StorageFrontierUpper):
            _check_antichain(response.upper, "StorageFrontierUpper.upper")
        if inst.session is not None:
            inst.session.on_response(response)
        if isinstance(response, StorageFrontierUpper):
            if (
                response.id in inst.ingestions
                or response.id in inst.sinks
                or (response.id in inst.remaps and response.id in self._collections)
            ):
                self.update_write_frontiers([(response.id, response.upper)])
        elif response.id in inst.ingestions or response.id in inst.sinks:
            if isinstance(response, StatusUpdate):
                self._outbox.extend(self._record_status(response))
            elif isinstance(response, StatisticsUpdate):
                self._outbox.extend(self._merge_statistics(response))

    # ------------------------------------------------------------------ status and statistics

    def status(self, id: GlobalId) -> StatusUpdate | None:
        """The latest status of ingestion or sink ``id`` (``dropped`` once dropped; ``None`` if never reported)."""
        return self._statuses.get(id)

    def statistics(self, id: GlobalId) -> SourceStatistics | SinkStatistics | None:
        """The merged statistics of live ingestion or sink ``id`` (``None`` if none reported)."""
        return self._statistics.get(id)

    def managed_collections(self) -> dict[str, GlobalId]:
        """The storage-managed collection of each kind (see :mod:`.introspection`)."""
        return dict(sorted(self._managed.items()))

    def _is_sink(self, id: GlobalId) -> bool:
        return id in self._exports

    def _record_status(self, update: StatusUpdate, sink: bool | None = None) -> list[StorageEffect]:
        """Keep ``update`` as ``update.id``'s status; a change is a row of its status history."""
        if self._statuses.get(update.id) == update:
            return []
        self._statuses[update.id] = update
        is_sink = self._is_sink(update.id) if sink is None else sink
        kind = SINK_STATUS_HISTORY if is_sink else SOURCE_STATUS_HISTORY
        return self._managed_write(kind, ((status_row(update), 1),))

    def _merge_statistics(self, update: StatisticsUpdate) -> list[StorageEffect]:
        old = self._statistics.get(update.id)
        stats = update.statistics
        new: SourceStatistics | SinkStatistics
        if isinstance(stats, SinkStatistics) != self._is_sink(update.id):
            return []  # the wrong kind for this object: nothing to merge it with
        if isinstance(old, SinkStatistics):
            new = old.merged(stats) if isinstance(stats, SinkStatistics) else old
        elif isinstance(old, SourceStatistics):
            new = old.merged(stats) if isinstance(stats, SourceStatistics) else old
        else:
            new = stats
        if new == old:
            return []
        self._statistics[update.id] = new
        return self._statistics_changed(update.id, old, new)

    def _statistics_changed(
        self,
        id: GlobalId,
        old: SourceStatistics | SinkStatistics | None,
        new: SourceStatistics | SinkStatistics | None,
    ) -> list[StorageEffect]:
        """Retract ``old``'s row and insert ``new``'s in the statistics collection."""
        rows: list[tuple[Row, int]] = []
        if old is not None:
            rows.append((statistics_row(id, old), -1))
        if new is not None:
            rows.append((statistics_row(id, new), 1))
        either = old if old is not None else new
        kind = SINK_STATISTICS if isinstance(either, SinkStatistics) else SOURCE_STATISTICS
        return self._managed_write(kind, tuple(rows))

    def _managed_write(
        self, kind: str, updates: tuple[tuple[Row, int], ...], truncate: bool = False
    ) -> list[StorageEffect]:
        target = self._managed.get(kind)
        if target is None or self._read_only or (not updates and not truncate):
            return []
        stamped = kind in (SOURCE_STATUS_HISTORY, SINK_STATUS_HISTORY)  # their occurred_at
        return [ManagedWrite(target, updates, truncate, stamped)]

    def _rewrite_statistics(self, kind: str) -> list[StorageEffect]:
        """Truncate the statistics collection of ``kind`` and write the controller's desired state."""
        want_sink = kind == SINK_STATISTICS
        rows = tuple(
            (statistics_row(id, stats), 1)
            for id, stats in sorted(self._statistics.items())
            if isinstance(stats, SinkStatistics) == want_sink
        )
        return self._managed_write(kind, rows, truncate=True)

    def _object_removed(self, id: GlobalId, sink: bool) -> list[StorageEffect]:
        """Ingestion or sink ``id`` is gone: its status is ``dropped``, its statistics retracted."""
        effects: list[StorageEffect] = []
        stats = self._statistics.pop(id, None)
        if stats is not None:
            effects.extend(self._statistics_changed(id, stats, None))
        effects.extend(self._record_status(StatusUpdate(id, SourceStatus.DROPPED), sink))
        return effects

    # ------------------------------------------------------------------ inspection

    def collection(self, id: GlobalId) -> CollectionView:
        """A snapshot of collection ``id`` (dropped-but-held ones included) [IdentifierMissing]."""
        c = self._collections.get(id)
        if c is None:
            raise IdentifierMissing(id)
        return c.view()

    def collections(self) -> list[CollectionView]:
        """Snapshots of every collection, sorted by id."""
        return [self._collections[id].view() for id in sorted(self._collections)]

    def collection_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain]:
        """``(implied capability, upper)`` of collection ``id``, as the reference's ``collection_frontiers``.

        The implied capability is what new readers may rely on; it is ``[]``
        once the collection is dropped.
        """
        c = self._collections.get(id)
        if c is None:
            raise IdentifierMissing(id)
        return c.implied, c.write_frontier

    def export(self, id: GlobalId) -> ExportView:
        """A snapshot of export ``id`` [IdentifierMissing]."""
        e = self._exports.get(id)
        if e is None:
            raise IdentifierMissing(id)
        return e.view()

    def exports(self) -> list[ExportView]:
        return [self._exports[id].view() for id in sorted(self._exports)]

    def dependencies(self, id: GlobalId) -> list[GlobalId]:
        """The collections ``id`` holds back (its direct dependencies) [IdentifierMissing]."""
        if id not in self._graph:
            raise IdentifierMissing(id)
        return sorted(self._graph.successors(id))

    def dependents(self, id: GlobalId) -> list[GlobalId]:
        """The collections and exports that hold ``id`` back [IdentifierMissing]."""
        if id not in self._graph:
            raise IdentifierMissing(id)
        return sorted(self._graph.predecessors(id))

    def outstanding_tokens(self) -> list[CreateExportToken]:
        """Export tokens neither consumed nor cancelled."""
        return [self._tokens[s] for s in sorted(self._tokens)]

    def pending_appends(self) -> list[int]:
        """Tickets of appends (table and monotonic) not yet completed."""
        return sorted([*self._appends, *self._monotonic])

    def pending_snapshots(self) -> list[int]:
        return sorted(self._snapshots)

    # ------------------------------------------------------------------ collections

    @atomic
    def migrate_collections(
        self, descriptions: Sequence[tuple[GlobalId, CollectionDescription]]
    ) -> None:
        """The durable-metadata migration hook; it has no frontier semantics, so it only validates ids."""
        for id, _ in descriptions:
            if id not in self._collections:
                raise IdentifierMissing(id)

    @atomic
    def create_collections(
        self,
        descriptions: Sequence[tuple[GlobalId, CollectionDescription]],
        shards: Mapping[GlobalId, ShardFrontiers] | None = None,
    ) -> None:
        """Create collections (reference sections 2.2, 2.6 and 2.7 #10), all or nothing.

        ``shards`` gives the since and upper the driver found in each existing
        shard; a collection without an entry gets a new shard at ``[0]``/``[0]``.
        The initial since is the join of the shard's since, the description's
        since and the implied capabilities of its dependencies; it then holds
        each dependency at that since.

        Errors: an id repeated with different descriptions, or already used by
        another description, an export, or a dropped collection
        [SourceIdReused]; a missing dependency or status collection
        [IdentifierMissing]; a missing ingestion instance
        [IngestionInstanceMissing]; dependencies in a cycle [DependencyCycle].
        An id that exists with the same description is left as it is.
        """
        shards = shards or {}
        wanted: dict[GlobalId, CollectionDescription] = {}
        for id, desc in descriptions:
            if not isinstance(desc, CollectionDescription):
                raise InvalidUsage(f"not a CollectionDescription for {id}: {desc!r}")
            if id in wanted and wanted[id] != desc:
                raise SourceIdReused(id)
            wanted[id] = desc
        new: dict[GlobalId, CollectionDescription] = {}
        for id in sorted(wanted):
            desc = wanted[id]
            existing = self._collections.get(id)
            if existing is not None:
                if existing.description != desc or existing.dropped:
                    raise SourceIdReused(id)
                continue
            if id in self._exports or id in self._retired:
                raise SourceIdReused(id)
            new[id] = desc
        for id, desc in new.items():
            for dep in (*desc.dependencies(), *_opt(desc.status_collection)):
                live = self._collections.get(dep)
                if dep not in new and (live is None or live.dropped):
                    raise IdentifierMissing(dep)
            inst = desc.instance
            if inst is not None and inst not in self._instances:
                raise IngestionInstanceMissing(id, inst)
            shard = shards.get(id)
            if shard is not None:
                _check_antichain(shard.since, "shard since")
                _check_antichain(shard.upper, "shard upper")
            if desc.since is not None:
                _check_antichain(desc.since, "description since")
        self._check_roles(new)
        order = _creation_order(new)

        effects: list[StorageEffect] = []
        for id in order:
            desc = new[id]
            shard = shards.get(id)
            shard_since = shard.since if shard is not None else _BOTTOM
            since = shard_since
            if desc.since is not None:
                since = since.join(desc.since)
            deps = desc.dependencies()
            for dep in deps:
                since = since.join(self._collections[dep].implied)
            upper = shard.upper if shard is not None else _BOTTOM
            state = CollectionState(id, desc, since, upper, deps)
            self._collections[id] = state
            self._graph.add_node(id)
            for dep in deps:
                self._graph.add_edge(id, dep)
            self._durable_shards.add(id)
            effects.append(RegisterShard(id))
            if since != shard_since:
                effects.append(DowngradeShardSince(id, since))
            if deps:
                moved = self._apply_capabilities({dep: [(t, 1) for t in since] for dep in deps})
                effects.extend(self._finish(moved))
            src = desc.data_source
            if isinstance(src, Ingestion):
                if src.remap_collection is not None:
                    effects.extend(self._hold_remap(id, src.remap_collection))
                effects.extend(
                    self._send_to(src.instance, RunIngestion(id, desc, self._resume_upper(id)))
                )
            elif isinstance(src, Introspection) and src.kind in MANAGED_KINDS:
                self._managed[src.kind] = id
                if src.kind in (SOURCE_STATISTICS, SINK_STATISTICS):
                    effects.extend(self._rewrite_statistics(src.kind))
        self._outbox.extend(effects)

    def _check_roles(self, new: Mapping[GlobalId, CollectionDescription]) -> None:
        """[IdentifierInvalid] for a remap collection that another ingestion uses or that is an
        ingestion itself, and for a second live managed collection of one kind."""
        remaps: dict[GlobalId, GlobalId] = {
            remap: ing for ing, (remap, _) in self._remap_holds.items()
        }
        managed = {
            kind: id
            for kind, id in self._managed.items()
            if id in self._collections and not self._collections[id].dropped
        }
        for id, desc in sorted(new.items()):
            src = desc.data_source
            if isinstance(src, Ingestion) and src.remap_collection is not None:
                remap = src.remap_collection
                other = remaps.get(remap)
                if other is not None and other != id:
                    raise IdentifierInvalid(remap, f"it is already the remap collection of {other}")
                remap_desc = new[remap].data_source if remap in new else None
                if remap_desc is None and remap in self._collections:
                    remap_desc = self._collections[remap].description.data_source
                if isinstance(remap_desc, Ingestion):
                    raise IdentifierInvalid(remap, "an ingestion cannot be a remap collection")
                remaps[remap] = id
            elif isinstance(src, Introspection) and src.kind in MANAGED_KINDS:
                other = managed.get(src.kind)
                if other is not None and other != id:
                    raise IdentifierInvalid(id, f"{other} already is the {src.kind} collection")
                managed[src.kind] = id

    def _hold_remap(self, ingestion: GlobalId, remap: GlobalId) -> list[StorageEffect]:
        """Take ingestion's remap hold: at ``step_back`` of its resumption frontier (or the remap's since)."""
        since = self._collections[remap].read_capabilities.frontier
        hold = _STEP_BACK.frontier(self._resume_upper(ingestion)).join(since)
        moved = self._apply_capabilities({remap: [(t, 1) for t in hold]})
        self._remap_holds[ingestion] = (remap, hold)
        return self._finish(moved)

    def remap_holds(self) -> dict[GlobalId, tuple[GlobalId, Antichain]]:
        """Each live ingestion's hold on its remap collection: ``ingestion -> (remap, frontier)``."""
        return dict(sorted(self._remap_holds.items()))

    # ------------------------------------------------------------------ exports

    @atomic
    def prepare_export(self, id: GlobalId, from_id: GlobalId) -> CreateExportToken:
        """Hold ``from_id`` at its implied capability until the export is created or the token cancelled.

        Errors: ``id`` already names an export [SourceIdReused]; ``from_id`` is
        not a live collection [IdentifierMissing].
        """
        if id in self._exports:
            raise SourceIdReused(id)
        source = self._collections.get(from_id)
        if source is None or source.dropped:
            raise IdentifierMissing(from_id)
        acquired = _BOTTOM.join(source.implied)
        moved = self._apply_capabilities({from_id: [(t, 1) for t in acquired]})
        self._outbox.extend(self._finish(moved))
        self._serial += 1
        token = CreateExportToken(id, from_id, acquired, self._serial)
        self._tokens[token.serial] = token
        return token

    @atomic
    def cancel_prepare_export(self, token: CreateExportToken) -> None:
        """Release the hold of an unused token [InvalidUsage if it was consumed or cancelled]."""
        self._check_token(token)
        moved = self._apply_capabilities({token.from_id: [(t, -1) for t in token.acquired_since]})
        del self._tokens[token.serial]
        self._outbox.extend(self._finish(moved))

    def _check_token(self, token: CreateExportToken) -> None:
        if self._tokens.get(token.serial) != token:
            raise InvalidUsage(f"export token {token!r} was already used or cancelled")

    @atomic
    def create_exports(
        self, exports: Sequence[tuple[CreateExportToken, ExportDescription]]
    ) -> None:
        """Create exports from prepared tokens (reference section 2.8); the token's hold passes to the export.

        Errors: an id twice in the call, or already used by another
        description, a collection or a dropped object [SinkIdReused]; a
        consumed token or a description whose ``from_id`` is not the token's
        [InvalidUsage]; a missing instance [ExportInstanceMissing]. An export
        that exists with the same description is kept; its token is released.
        """
        seen: set[GlobalId] = set()
        tokens: set[int] = set()
        fresh: list[tuple[CreateExportToken, ExportDescription]] = []
        repeats: list[CreateExportToken] = []
        for token, desc in exports:
            self._check_token(token)
            if token.serial in tokens:
                raise InvalidUsage(f"export token {token!r} appears twice")
            tokens.add(token.serial)
            if not isinstance(desc, ExportDescription):
                raise InvalidUsage(f"not an ExportDescription for {token.id}: {desc!r}")
            id = token.id
            if id in seen:
                raise SinkIdReused(id)
            seen.add(id)
            if desc.from_id != token.from_id:
                raise InvalidUsage(
                    f"export {id} reads {desc.from_id} but its token holds {token.from_id}"
                )
            _check_antichain(desc.as_of, "export as_of")
            existing = self._exports.get(id)
            if existing is not None:
                if existing.description != desc:
                    raise SinkIdReused(id)
                repeats.append(token)
                continue
            if id in self._collections or id in self._retired:
                raise SinkIdReused(id)
            if desc.instance not in self._instances:
                raise ExportInstanceMissing(id, desc.instance)
            fresh.append((token, desc))

        for token in repeats:
            self.cancel_prepare_export(token)
        effects: list[StorageEffect] = []
        for token, desc in fresh:
            del self._tokens[token.serial]
            as_of, strict = sink_as_of(desc.as_of, token.acquired_since)
            state = ExportState(token.id, desc, token.acquired_since, as_of, strict)
            self._exports[token.id] = state
            self._graph.add_edge(token.id, token.from_id)
            effects.extend(self._run_export(state))
        self._outbox.extend(effects)

    def _run_export(self, e: ExportState) -> list[StorageEffect]:
        """``RunSink`` for export ``e`` on its instance, unless the controller is read-only.

        As Materialize's ``run_export``: a read-only controller does not run
        exports at all (it sends no ``RunSink``, so no replica, however faulty,
        can produce an external side effect for it); :meth:`read_write` runs
        them. The as_of is advanced to the export's current hold (SinkAsOf rule).
        """
        if self._read_only:
            return []
        as_of, strict = sink_as_of(e.as_of, e.read_capability)
        return self._send_to(
            e.description.instance, RunSink(e.id, e.description, as_of, strict or e.strict)
        )

    @atomic
    def alter_export(self, id: GlobalId, description: ExportDescription) -> None:
        """Change export ``id``'s description (its input, target or as_of), keeping exactly-once.

        As Materialize's ``alter_export``: the export takes a new hold on the
        (possibly new) input at its since, which must be strictly before every
        time of the export's write frontier, where the sink resumes
        [ReadBeforeSince]; the old hold is released, the write frontier and
        read policy are kept, and the instance gets ``RunSink`` with the new
        description (a read-only controller sends it once writes are allowed).
        The replica replaces the running sink: the new run resumes from what its
        target covers, so no time is written twice or skipped.

        Errors: ``id`` is not an export [IdentifierMissing]; not an
        :class:`ExportDescription` [InvalidUsage]; its input is not a live
        collection [IdentifierMissing]; its instance is missing
        [ExportInstanceMissing]; the input is not readable where the sink
        resumes [ReadBeforeSince]. Nothing changes on error.
        """
        e, since = self._check_alter_export(id, description)
        resume = e.write_frontier
        # The new hold: where the sink's policy (step_back of its write frontier) holds it,
        # never behind the input's since (the check above makes step_back at least that).
        hold = since.join(_STEP_BACK.frontier(resume))
        old_from, old_hold = e.description.from_id, e.read_capability
        changes: dict[GlobalId, list[tuple[Time, int]]]
        if old_from == description.from_id:
            changes = {old_from: _replace(old_hold, hold)}
        else:
            changes = {
                description.from_id: [(t, 1) for t in hold],
                old_from: [(t, -1) for t in old_hold],
            }
        moved = self._apply_capabilities(changes)
        if old_from != description.from_id:
            self._graph.remove_edge(id, old_from)
            self._graph.add_edge(id, description.from_id)
        e.description = description
        e.read_capability = hold
        as_of, strict = sink_as_of(description.as_of, hold)
        e.as_of, e.strict = as_of, strict
        # RunSink first: the new run's compaction frontier may be behind the old run's.
        effects = self._run_export(e)
        effects.extend(self._finish(moved))
        self._outbox.extend(effects)

    def check_alter_export(self, id: GlobalId, description: ExportDescription) -> None:
        """Raise what :meth:`alter_export` would raise now, changing nothing (a caller that
        records the change durably first checks it here; holding the new input keeps it valid)."""
        self._check_alter_export(id, description)

    def _check_alter_export(
        self, id: GlobalId, description: ExportDescription
    ) -> tuple[ExportState, Antichain]:
        """The export and its new input's since, if ``id`` may be altered to ``description``."""
        e = self._exports.get(id)
        if e is None:
            raise IdentifierMissing(id)
        if not isinstance(description, ExportDescription):
            raise InvalidUsage(f"not an ExportDescription for {id}: {description!r}")
        _check_antichain(description.as_of, "export as_of")
        source = self._collections.get(description.from_id)
        if source is None or source.dropped:
            raise IdentifierMissing(description.from_id)
        if description.instance not in self._instances:
            raise ExportInstanceMissing(id, description.instance)
        since = source.read_capabilities.frontier
        resume = e.write_frontier
        if not all(since.less_than(t) for t in resume):
            raise ReadBeforeSince(description.from_id, resume, since)
        return e, since

    # ------------------------------------------------------------------ drops

    @atomic
    def drop_sources(self, ids: Iterable[GlobalId]) -> None:
        """Drop collections; every id must exist [IdentifierMissing, nothing dropped]."""
        ids = list(ids)
        for id in ids:
            if id not in self._collections:
                raise IdentifierMissing(id)
        self.drop_sources_unvalidated(ids)

    @atomic
    def drop_sources_unvalidated(self, ids: Iterable[GlobalId]) -> None:
        """Drop the known collections among ``ids``: their policy becomes ``ValidFrom([])``.

        This releases each collection's own hold; it stays readable while other
        holds (read holds, dependents, exports, snapshots) keep its since, and
        its state, shard and instance object go when the since reaches ``[]``.
        """
        targets = sorted({id for id in ids if id in self._collections})
        changes: dict[GlobalId, list[tuple[Time, int]]] = {}
        for id in targets:
            c = self._collections[id]
            if not c.dropped:
                changes[id] = _replace(c.implied, _EMPTY)
        moved = self._apply_capabilities(changes)
        for id in targets:
            c = self._collections[id]
            c.dropped = True
            c.policy = ValidFrom(_EMPTY)
            c.implied = _EMPTY
        self._managed = {k: m for k, m in self._managed.items() if m not in targets}
        self._outbox.extend(self._finish(moved))

    @atomic
    def drop_sinks(self, ids: Iterable[GlobalId]) -> None:
        """Drop exports; every id must be an export [IdentifierMissing, nothing dropped]."""
        ids = list(ids)
        for id in ids:
            if id not in self._exports:
                raise IdentifierMissing(id)
        self.drop_sinks_unvalidated(ids)

    @atomic
    def drop_sinks_unvalidated(self, ids: Iterable[GlobalId]) -> None:
        """Drop the known exports among ``ids``: release their holds, close their uppers, tear them down."""
        targets = sorted({id for id in ids if id in self._exports})
        changes = {id: _replace(self._exports[id].read_capability, _EMPTY) for id in targets}
        moved = self._apply_capabilities(changes)
        for id in targets:
            e = self._exports[id]
            e.read_capability = _EMPTY
            e.write_frontier = _EMPTY
        effects = self._finish(moved)
        for id in targets:
            del self._exports[id]
            self._graph.remove_node(id)
            self._retired.add(id)
            effects.append(CollectionDropped(id))
            effects.extend(self._object_removed(id, sink=True))
        self._outbox.extend(effects)

    # ------------------------------------------------------------------ appends

    @atomic
    def append(self, commands: Sequence[AppendCommand]) -> int:
        """Append to collections (reference section 2.9); returns a ticket, and emits the shard writes.

        Per collection the commands' updates are concatenated and their uppers
        joined into one compare-and-append that expects the upper the previous
        write will leave. Synchronous errors, raised before anything is
        queued: unknown or dropped id [IdentifierMissing]; an ingestion (its
        instance writes it) or an export [IdentifierInvalid]; an update not
        before its command's upper [UpdateBeyondUpper]; an update before the
        expected upper [UpdateNotBeyondLower]; an upper behind it
        [InvalidAppendBounds]. Upper mismatches at the store resolve the ticket
        with :class:`InvalidUppers`. An empty command list resolves at once.

        A command without updates whose upper is the expected upper (section
        2.9, item 6) still goes to the store, as a write expecting the upper it
        sets: the shard accepts it as a no-op if its upper is still that, and
        reports a mismatch if another writer moved it on.
        """
        if self._read_only:
            raise ReadOnlyController("a table append")
        grouped: dict[GlobalId, tuple[list[Update], Antichain]] = {}
        for cmd in commands:
            id, updates, upper = cmd
            _check_antichain(upper, "append upper")
            self.check_appendable([id])
            for _row, t, _diff in updates:
                check_time(t)
                if upper.less_equal(t):
                    raise UpdateBeyondUpper(id, t, upper)
            prior = grouped.get(id)
            if prior is None:
                grouped[id] = (list(updates), upper)
            else:
                prior[0].extend(updates)
                grouped[id] = (prior[0], prior[1].join(upper))
        for id, (updates, upper) in grouped.items():
            expected = self._expected_upper(id)
            for _row, t, _diff in updates:
                if not expected.less_equal(t):
                    raise UpdateNotBeyondLower(id, t, expected)
            if not expected <= upper:
                raise InvalidAppendBounds(id, expected, upper)

        self._serial += 1
        ticket = self._serial
        if not grouped:
            self._outbox.emit(AppendCompleted(ticket, None))
            return ticket
        writes: dict[GlobalId, WriteToShard] = {}
        for id in sorted(grouped):
            updates, upper = grouped[id]
            writes[id] = WriteToShard(ticket, id, tuple(updates), self._expected_upper(id), upper)
            self._write_upper[id] = upper
            self._inflight[id] = self._inflight.get(id, 0) + 1
        self._appends[ticket] = AppendBatch(writes)
        self._outbox.extend(writes.values())
        return ticket

    def check_appendable(self, ids: Iterable[GlobalId]) -> None:
        """Raise unless every id is a live collection the controller writes (a table).

        [IdentifierMissing] for an unknown or dropped id; [IdentifierInvalid] for an
        export or an ingestion (its storage instance writes it). :meth:`append`
        checks this first; a driver that batches appends checks each request alone.
        """
        for id in ids:
            c = self._collections.get(id)
            if c is None or c.dropped:
                if id in self._exports:
                    raise IdentifierInvalid(id, "exports cannot be appended to")
                raise IdentifierMissing(id)
            if isinstance(c.description.data_source, Ingestion):
                raise IdentifierInvalid(id, "an ingestion is written by its storage instance")

    def _expected_upper(self, id: GlobalId) -> Antichain:
        upper = self._write_upper.get(id)
        return upper if upper is not None else self._collections[id].write_frontier

    @atomic
    def complete_write(
        self, ticket: int, id: GlobalId, success: bool, current_upper: Antichain
    ) -> None:
        """The driver's report on one :class:`WriteToShard`: whether it applied, and the shard's upper now.

        A success advances the collection's upper; a mismatch is recorded as
        :class:`InvalidUpper` and the controller adopts the shard's upper. When
        the last write of the ticket is in, :class:`AppendCompleted` is emitted.
        """
        mono = self._monotonic.get(ticket)
        if mono is not None and mono[1].id == id:
            _check_antichain(current_upper, "current upper")
            self._monotonic_done(ticket, success, current_upper)
            return
        pending = self._appends.get(ticket)
        if pending is None or id not in pending.outstanding:
            raise InvalidUsage(f"no outstanding write to {id} for append ticket {ticket}")
        _check_antichain(current_upper, "current upper")
        write = pending.writes[id]
        learned = write.new_upper if success else current_upper
        self.update_write_frontiers([(id, learned)])
        pending.outstanding.discard(id)
        if not success:
            pending.failures.append(InvalidUpper(id, current_upper))
        self._write_landed(id, success, current_upper)
        if not pending.outstanding:
            del self._appends[ticket]
            error = (
                InvalidUppers(sorted(pending.failures, key=lambda u: _id_key(u.id)))
                if pending.failures
                else None
            )
            self._outbox.emit(AppendCompleted(ticket, error))

    def _write_landed(self, id: GlobalId, success: bool, current_upper: Antichain) -> None:
        """One write to ``id`` is no longer in flight; the next one expects what it left."""
        remaining = self._inflight[id] - 1
        if remaining == 0:
            del self._inflight[id]
            del self._write_upper[id]
        else:
            self._inflight[id] = remaining
            if not success:
                self._write_upper[id] = current_upper

    # ------------------------------------------------------------------ monotonic appends

    @atomic
    def monotonic_appender(self, id: GlobalId) -> MonotonicAppender:
        """A handle that appends to append-only collection ``id`` without a race (:mod:`.monotonic`).

        As Materialize's ``monotonic_appender``: for a webhook source or a status
        history. Unknown or dropped [IdentifierMissing]; another kind of
        collection, or an export [IdentifierInvalid].
        """
        self._check_append_only(id)
        return MonotonicAppender(self, id)

    def _check_append_only(self, id: GlobalId) -> CollectionState:
        c = self._collections.get(id)
        if c is None or c.dropped:
            if id in self._exports:
                raise IdentifierInvalid(id, "exports cannot be appended to")
            raise IdentifierMissing(id)
        src = c.description.data_source
        if not (
            isinstance(src, Webhook)
            or (isinstance(src, Introspection) and src.kind in APPEND_ONLY_KINDS)
        ):
            raise IdentifierInvalid(
                id, "not an append-only collection (a webhook source or a status history)"
            )
        return c

    @atomic
    def monotonic_append(
        self, id: GlobalId, updates: Sequence[tuple[Row, int]], at_least: Time = 0
    ) -> int:
        """Append ``(row, diff)`` pairs to append-only ``id`` at ``max(upper, at_least)``; a ticket.

        The write advances the upper to one past that time; if another writer
        moved the upper meanwhile, the controller writes the same updates
        again at the new upper (at most :data:`_MONOTONIC_RETRIES` times), so
        the ticket's :class:`AppendCompleted` is an error only when the store
        refused the write or the collection went away. Errors, raised before
        anything is queued: read-only [ReadOnlyController]; see
        :meth:`monotonic_appender` for the collection; a non-empty append to
        a closed collection (upper ``[]``) [IdentifierInvalid]; a bad pair
        [InvalidUsage]. An empty append to a closed collection completes at once.
        """
        if self._read_only:
            raise ReadOnlyController("a monotonic append")
        self._check_append_only(id)
        check_time(at_least)
        rows: list[tuple[Row, int]] = []
        for pair in updates:
            if not (
                isinstance(pair, tuple)
                and len(pair) == 2
                and isinstance(pair[0], tuple)
                and type(pair[1]) is int
            ):
                raise InvalidUsage(f"a monotonic append takes (row, diff) pairs, got {pair!r}")
            rows.append(pair)
        expected = self._expected_upper(id)
        if expected.is_empty() and rows:
            raise IdentifierInvalid(id, "the collection is closed (its upper is [])")
        self._serial += 1
        ticket = self._serial
        if expected.is_empty():
            self._outbox.emit(AppendCompleted(ticket, None))
            return ticket
        self._outbox.emit(self._monotonic_write(ticket, MonotonicWrite(id, tuple(rows), at_least)))
        return ticket

    def _monotonic_write(self, ticket: int, w: MonotonicWrite) -> WriteToShard:
        """The write of ``w`` at ``max(expected upper, at_least)``; recorded as in flight."""
        expected = self._expected_upper(w.id)
        (lower,) = expected.elements
        ts = max(int(lower), w.at_least)
        upper = Antichain([ts + 1])
        write = WriteToShard(
            ticket, w.id, tuple((row, ts, diff) for row, diff in w.updates), expected, upper
        )
        self._write_upper[w.id] = upper
        self._inflight[w.id] = self._inflight.get(w.id, 0) + 1
        self._monotonic[ticket] = (w, write)
        return write

    def _monotonic_done(self, ticket: int, success: bool, current_upper: Antichain) -> None:
        w, write = self._monotonic.pop(ticket)
        self.update_write_frontiers([(w.id, write.new_upper if success else current_upper)])
        self._write_landed(w.id, success, current_upper)
        if success:
            self._outbox.emit(AppendCompleted(ticket, None))
            return
        w.attempts += 1
        c = self._collections.get(w.id)
        refused = current_upper == write.expected_upper  # the store said no: not a race
        if (
            c is None
            or c.dropped
            or refused
            or w.attempts > _MONOTONIC_RETRIES
            or self._expected_upper(w.id).is_empty()
        ):
            self._outbox.emit(
                AppendCompleted(ticket, InvalidUppers([InvalidUpper(w.id, current_upper)]))
            )
            return
        self._outbox.emit(self._monotonic_write(ticket, w))

    # ------------------------------------------------------------------ snapshots

    @atomic
    def snapshot(self, id: GlobalId, as_of: Time) -> int:
        """Request the contents of ``id`` as of ``as_of`` (reference section 2.10).

        Valid only for ``since <= as_of < upper``: [IdentifierMissing],
        [ReadBeforeSince], [ReadBeyondUpper]. The controller holds ``as_of``
        until :meth:`complete_snapshot`, so the read cannot be compacted away.
        Returns the request number, named by the :class:`ReadSnapshot` it emits.
        """
        c = self._collections.get(id)
        if c is None:
            if id in self._exports:
                raise IdentifierInvalid(id, "exports cannot be read")
            raise IdentifierMissing(id)
        check_time(as_of)
        since = c.read_capabilities.frontier
        if not since.less_equal(as_of):
            raise ReadBeforeSince(id, as_of, since)
        if c.write_frontier.less_equal(as_of):
            raise ReadBeyondUpper(id, as_of, c.write_frontier)
        moved = self._apply_capabilities({id: [(as_of, 1)]})
        self._serial += 1
        self._snapshots[self._serial] = (id, as_of)
        self._outbox.extend(self._finish(moved))
        self._outbox.emit(ReadSnapshot(self._serial, id, as_of))
        return self._serial

    @atomic
    def complete_snapshot(self, request: int) -> None:
        """The driver has read snapshot ``request``; its hold is released [InvalidUsage if unknown]."""
        entry = self._snapshots.get(request)
        if entry is None:
            raise InvalidUsage(f"no outstanding snapshot request {request}")
        id, as_of = entry
        moved = self._apply_capabilities({id: [(as_of, -1)]})
        del self._snapshots[request]
        self._outbox.extend(self._finish(moved))

    # ------------------------------------------------------------------ frontiers

    @atomic
    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        """Set read policies (reference section 2.3), in order, the last for an id winning.

        The implied capability moves to the policy's frontier if that is at or
        beyond it, and otherwise stays. Every id must be a collection
        [IdentifierMissing; IdentifierInvalid for an export], or nothing
        changes. A dropped collection keeps its ``ValidFrom([])``.
        """
        final: dict[GlobalId, ReadPolicy] = {}
        implied: dict[GlobalId, Antichain] = {}
        for id, policy in policies:
            c = self._collections.get(id)
            if c is None:
                if id in self._exports:
                    raise IdentifierInvalid(id, "an export's read policy is fixed")
                raise IdentifierMissing(id)
            if not isinstance(policy, ReadPolicy):
                raise InvalidUsage(f"not a read policy for {id}: {policy!r}")
            if c.dropped:
                continue
            implied[id] = apply_policy(implied.get(id, c.implied), policy, c.write_frontier)
            final[id] = policy
        changes = {
            id: _replace(self._collections[id].implied, new)
            for id, new in implied.items()
            if new != self._collections[id].implied
        }
        moved = self._apply_capabilities(changes)
        for id, policy in final.items():
            c = self._collections[id]
            c.policy = policy
            c.implied = implied[id]
        self._outbox.extend(self._finish(moved))

    @atomic
    def update_write_frontiers(self, updates: Iterable[tuple[GlobalId, Antichain]]) -> None:
        """New uppers for collections and exports (reference sections 2.3 and 2.8).

        An upper is taken only if it is strictly beyond the current one;
        unknown ids are skipped (late reports for dropped objects). A
        collection's implied capability follows its policy; an export's hold
        on its input follows ``step_back`` of its upper.
        """
        targets: dict[GlobalId, tuple[CollectionState | ExportState, Antichain]] = {}
        for id, upper in updates:
            _check_antichain(upper, "write frontier")
            entry = targets.get(id)
            if entry is None:
                state: CollectionState | ExportState | None = self._collections.get(id)
                if state is None:
                    state = self._exports.get(id)
                    if state is None:
                        continue
                current = state.write_frontier
            else:
                state, current = entry
            if current < upper:
                targets[id] = (state, upper)
        if not targets:
            return
        changes: dict[GlobalId, list[tuple[Time, int]]] = {}
        implied: dict[GlobalId, Antichain] = {}
        remap_moves: dict[GlobalId, tuple[GlobalId, Antichain]] = {}
        for id, (state, upper) in targets.items():
            if isinstance(state, CollectionState):
                old = state.implied
                new = apply_policy(old, state.policy, upper)
                held = self._remap_holds.get(id)
                if held is not None:
                    remap, hold = held
                    moved_hold = apply_policy(hold, _STEP_BACK, resumption_frontier([upper]))
                    if moved_hold != hold:
                        remap_moves[id] = (remap, moved_hold)
                        changes.setdefault(remap, []).extend(_replace(hold, moved_hold))
            else:
                old = state.read_capability
                new = apply_policy(old, _STEP_BACK, upper)
            if new != old:
                implied[id] = new
                changes.setdefault(id, []).extend(_replace(old, new))
        moved = self._apply_capabilities(changes) if changes else set()
        self._remap_holds.update(remap_moves)
        effects: list[StorageEffect] = []
        for id, (state, upper) in targets.items():
            state.write_frontier = upper
            new_implied = implied.get(id)
            if new_implied is not None:
                if isinstance(state, CollectionState):
                    state.implied = new_implied
                else:
                    state.read_capability = new_implied
            effects.append(UpperChanged(id, upper))
        if moved:
            effects.extend(self._finish(moved))
        self._outbox.extend(effects)

    @atomic
    def update_read_capabilities(
        self, changes: Mapping[GlobalId, Iterable[tuple[Time, int]]]
    ) -> None:
        """Add (+1) and release (-1) holds on collections and propagate them (reference section 2.4).

        Purely negative changes for unknown ids are ignored (the collection is
        gone); positive ones raise [IdentifierMissing]. Holds on exports are not
        taken from outside [IdentifierInvalid]. A count driven below zero
        [NegativeReadCapability] or a hold behind the since
        [ReadCapabilityBeforeSince] rejects the whole call.
        """
        batches: dict[GlobalId, ChangeBatch[Time]] = {}
        for id, batch in changes.items():
            # A ChangeBatch is already compacted and is only read below: no copy needed.
            cb: ChangeBatch[Time] = batch if type(batch) is ChangeBatch else ChangeBatch(batch)
            if cb.is_empty():
                continue
            if id not in self._collections:
                if id in self._exports:
                    raise IdentifierInvalid(id, "holds on exports are managed by the controller")
                if any(d > 0 for _, d in cb):
                    raise IdentifierMissing(id)
                continue
            for t, _ in cb:
                check_time(t)
            batches[id] = cb
        moved = self._apply_capabilities(batches)
        self._outbox.extend(self._finish(moved))

    @atomic
    def acquire_read_holds(self, ids: Iterable[GlobalId]) -> list[StorageReadHold]:
        """One hold per id at its current since [IdentifierMissing, no hold taken]."""
        wanted = list(dict.fromkeys(ids))
        for id in wanted:
            if id not in self._collections:
                if id in self._exports:
                    raise IdentifierInvalid(id, "exports cannot be read")
                raise IdentifierMissing(id)
        holds: list[StorageReadHold] = []
        for id in wanted:
            since = self._collections[id].read_capabilities.frontier
            self._apply_capabilities({id: [(t, 1) for t in since]})
            holds.append(StorageReadHold(self, id, since))
        return holds

    # ------------------------------------------------------------------ reconcile

    @atomic
    def reconcile_state(self, claimed: Iterable[GlobalId] = ()) -> None:
        """After bootstrapping: drop every durable shard that no live collection (nor ``claimed``) owns.

        A read-only controller drops nothing: the shards may be the writer's newer objects.
        It reconciles when it becomes read-write (:meth:`read_write`): the writer is fenced
        out then, and a shard of an object it dropped (its last drop cut short by its
        death) must not outlive it.
        """
        if self._read_only:
            self._deferred_reconcile = (self._deferred_reconcile or set()) | set(claimed)
            return
        keep = set(self._collections) | set(claimed)
        orphans = sorted(self._durable_shards - keep)
        self._durable_shards -= set(orphans)
        self._outbox.extend([DropShard(id) for id in orphans])

    @property
    def read_only(self) -> bool:
        """Whether table appends are refused, nothing is written to managed collections, no
        instance may write and no orphaned shard is dropped (read-only mode)."""
        return self._read_only

    @atomic
    def read_write(self) -> None:
        """Leave read-only mode (the caller has fenced out the controller that wrote).

        Every instance's replica gets ``AllowWrites`` (once: a no-op when
        already read-write); the statistics collections are rewritten from the
        controller's state and the latest status of each live object recorded;
        a reconciliation asked for while read-only drops its orphaned shards now.
        """
        if not self._read_only:
            return
        self._read_only = False
        if self._deferred_reconcile is not None:
            claimed, self._deferred_reconcile = self._deferred_reconcile, None
            self.reconcile_state(claimed)
        self._outbox.extend(self._broadcast(StorageAllowWrites()))
        for id in sorted(self._exports, key=_id_key):  # run only now (see _run_export)
            self._outbox.extend(self._run_export(self._exports[id]))
        for kind in (SOURCE_STATISTICS, SINK_STATISTICS):
            self._outbox.extend(self._rewrite_statistics(kind))
        for id, update in sorted(self._statuses.items()):
            if id in self._collections or id in self._exports:
                kind = SINK_STATUS_HISTORY if self._is_sink(id) else SOURCE_STATUS_HISTORY
                self._outbox.extend(self._managed_write(kind, ((status_row(update), 1),)))

    def durable_shards(self) -> list[GlobalId]:
        """The shards this controller believes the store holds."""
        return sorted(self._durable_shards)

    # ------------------------------------------------------------------ StoragePort adapter

    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain] | None:
        """``(since, upper)`` of collection ``id``, ``None`` if unknown (the compute controller's port)."""
        c = self._collections.get(id)
        if c is None:
            return None
        return c.read_capabilities.frontier, c.write_frontier

    @atomic
    def update_storage_read_holds(self, changes: Mapping[GlobalId, ChangeBatch[Time]]) -> None:
        """:meth:`update_read_capabilities`, for the compute controller's port."""
        self.update_read_capabilities(changes)

    def drain(self) -> list[StorageEffect]:
        """The effects of every call since the last drain, in the order they arose."""
        return self._outbox.drain()

    # ------------------------------------------------------------------ propagation

    def _apply_capabilities(
        self, changes: Mapping[GlobalId, Iterable[tuple[Time, int]]]
    ) -> set[GlobalId]:
        """Apply hold changes and propagate frontier changes to dependencies; all or nothing.

        Returns the collections whose since moved and the exports whose
        capability change was forwarded. On a violated invariant every applied
        change is undone and the error re-raised, so state is as before.
        """
        return propagate_read_capabilities(
            changes, self._collections, self._exports, self._largest_first
        )

    def _finish(self, moved: set[GlobalId]) -> list[StorageEffect]:
        """Turn moved sinces into effects; remove collections whose since reached ``[]``."""
        effects: list[StorageEffect] = []
        for id in sorted(moved) if len(moved) > 1 else moved:
            c = self._collections.get(id)
            if c is not None:
                since = c.read_capabilities.frontier
                effects.append(DowngradeShardSince(id, since))
                effects.extend(
                    self._send_to(c.description.instance, StorageAllowCompaction(id, since))
                )
                effects.append(SinceChanged(id, since))
                if since.is_empty():
                    del self._collections[id]
                    self._graph.remove_node(id)
                    self._retired.add(id)
                    self._durable_shards.discard(id)
                    effects.append(DropShard(id))
                    effects.append(CollectionDropped(id))
                    if isinstance(c.description.data_source, Ingestion):
                        effects.extend(self._object_removed(id, sink=False))
                    held = self._remap_holds.pop(id, None)
                    if held is not None:
                        remap, hold = held
                        released = self._apply_capabilities({remap: [(t, -1) for t in hold]})
                        effects.extend(self._finish(released))
            else:
                e = self._exports.get(id)
                if e is not None:
                    cap = e.read_capability
                    if not self._read_only:  # a read-only controller runs no export
                        effects.extend(
                            self._send_to(e.description.instance, StorageAllowCompaction(id, cap))
                        )
                    effects.append(SinceChanged(id, cap))
        return effects


def _opt(id: GlobalId | None) -> tuple[GlobalId, ...]:
    return () if id is None else (id,)


def _creation_order(new: Mapping[GlobalId, CollectionDescription]) -> list[GlobalId]:
    """The new collections, dependencies first; :class:`DependencyCycle` if they form a cycle."""
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(new)
    for id, desc in new.items():
        for dep in desc.dependencies():
            if dep in new:
                graph.add_edge(dep, id)
    try:
        return list(nx.lexicographical_topological_sort(graph, key=_id_key))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        raise DependencyCycle([u for u, _ in cycle]) from None
