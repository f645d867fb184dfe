"""One compute instance (cluster): its replicas, collections, peeks, subscribes and command history.

This is the state machine behind :class:`~tidegate.spec.compute.ComputeController`
(docs/reference/compute.md section 9). Every public method validates its arguments
first and mutates after, so a call that raises leaves the instance as it was;
it emits the effects it causes into its owner's :class:`~tidegate.spec.outbox.Outbox`
(an instance is a part of the compute controller, not a machine of its own).

Read holds follow section 9.3: a collection's read frontier is the frontier of
its read-capability multiset, and the *only* place an ``AllowCompaction`` is
sent is when that frontier changes (:meth:`Instance._update_read_caps`).
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from ..errors import (
    CollectionExists,
    CollectionMissing,
    EmptyAsOfForCopyTo,
    EmptyAsOfForSubscribe,
    HydrationCheckBadTarget,
    InvalidDataflow,
    MissingAsOf,
    PeekMissing,
    ReplicaExists,
    ReplicaMissing,
    SinceViolation,
    TargetedIndexExport,
    WriteOnlyCollection,
)
from ..frontier import Antichain, ChangeBatch, Row, Time
from ..frontier.read_policy import ReadPolicy, ValidFrom
from ..history import CommandHistory
from ..ids import GlobalId, InstanceId, ReplicaId
from ..outbox import Outbox
from ..protocol.commands import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from ..protocol.controller_session import ControllerSession
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
    SubscribeResponse,
)
from ..protocol.types import (
    ComputeParameters,
    CopyToConnection,
    DataflowDescription,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    PeekDescription,
    PeekTargetKind,
    RowSetFinishing,
)
from .capabilities import ReadCapabilities
from .config import ReplicaConfig
from .effects import (
    ConnectReplica,
    CopyToOut,
    DisconnectReplica,
    Effect,
    FrontierUpper,
    PeekNotification,
    PeekResultOut,
    ReplicaStatus,
    ReplicaStatusEvent,
    SendCommand,
    SubscribeBatchOut,
)
from .state import (
    ActiveCopyTo,
    ActiveSubscribe,
    ComputeCollectionKind,
    ComputeCollectionState,
    PendingPeek,
    ReplicaCollectionState,
    ReplicaState,
)
from .storage_port import StoragePort
from .uuids import UuidFactory

__all__ = ["ERROR_TARGET_REPLICA_FAILED", "Instance"]

ERROR_TARGET_REPLICA_FAILED = "target replica failed or was dropped"
"""The error text of targeted peeks and subscribes whose replica went away."""

_EMPTY = Antichain.empty()
_NIL_UUID = _uuid.UUID(int=0)


def _advances(old: Antichain, new: Antichain) -> bool:
    """Whether ``new`` is strictly beyond ``old`` in the antichain order."""
    a, b = old.elements, new.elements
    if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
        return a[0] < b[0]
    return old <= new and old != new


def _move(old: Antichain, new: Antichain) -> list[tuple[Time, int]]:
    """Count changes replacing one hold at ``old`` by one at ``new``."""
    return [*((t, 1) for t in new.elements), *((t, -1) for t in old.elements)]


def _step_back(frontier: Antichain) -> Antichain:
    """``[u]`` -> ``[u - 1]`` for ints (``[0]`` stays); ``[]`` and other kinds unchanged."""
    els = frontier.elements
    if len(els) == 1 and type(els[0]) is int and els[0] > 0:
        return Antichain.from_elem(els[0] - 1)
    return frontier


@dataclass(slots=True)
class _CheckedDataflow:
    """What validating a dataflow learned: its as_of and its inputs' and outputs' frontiers."""

    as_of: Antichain
    storage_since: dict[GlobalId, Antichain] = field(default_factory=dict)
    storage_upper: dict[GlobalId, Antichain] = field(default_factory=dict)
    mv_uppers: dict[GlobalId, Antichain] = field(default_factory=dict)


class Instance:
    """The controller's state for one compute instance (see the module docstring)."""

    def __init__(
        self,
        id: InstanceId,
        storage: StoragePort,
        uuids: UuidFactory,
        arranged_logs: Iterable[tuple[str, GlobalId]] = (),
        params: ComputeParameters | None = None,
        initialized: bool = False,
        check_protocol: bool = False,
        outbox: Outbox[Effect] | None = None,
        read_only: bool = False,
    ) -> None:
        self.id = id
        self.read_only = read_only
        """Send no ``AllowWrites`` (seed 001: a controller warming up beside the one that writes)."""
        self._outbox: Outbox[Effect] = outbox if outbox is not None else Outbox()
        # One protocol session per replica connection, when commands and responses are checked.
        self.sessions: dict[ReplicaId, ControllerSession] | None = {} if check_protocol else None
        self.storage = storage
        self.uuids = uuids
        self.arranged_logs: tuple[tuple[str, GlobalId], ...] = tuple(arranged_logs)
        self.replicas: dict[ReplicaId, ReplicaState] = {}
        self.collections: dict[GlobalId, ComputeCollectionState] = {}
        self.peeks: dict[_uuid.UUID, PendingPeek] = {}
        self.subscribes: dict[GlobalId, ActiveSubscribe] = {}
        self.copy_tos: dict[GlobalId, ActiveCopyTo] = {}
        self.history = CommandHistory()
        self.initialized = False
        # Which collections read a compute collection / a storage collection (for scheduling).
        self.compute_dependents: dict[GlobalId, set[GlobalId]] = {}
        self.storage_dependents: dict[GlobalId, set[GlobalId]] = {}
        # Replica-targeted ids, kept for replay even after the collection is gone.
        self.targets: dict[GlobalId, ReplicaId] = {}
        self.unscheduled: set[GlobalId] = set()
        self.epochs: dict[ReplicaId, int] = {}
        self.epoch = 0
        """The controller's writer epoch, sent in each replica's ``Hello``."""

        self._send(Hello(_NIL_UUID))
        self._send(
            CreateInstance(InstanceConfig(logging=LoggingConfig(index_logs=self.arranged_logs))),
        )
        if initialized:
            self.initialization_complete()
        if params is not None and not params.all_unset():
            self._send(UpdateConfiguration(params))
        zero = Antichain.bottom(0)
        for _, log_id in self.arranged_logs:
            if log_id in self.collections:
                raise CollectionExists(log_id)
            self.collections[log_id] = ComputeCollectionState(
                id=log_id,
                kind="log",
                as_of=zero,
                read_capabilities=ReadCapabilities([0, 0]),
                implied=zero,
                warmup=zero,
                write_frontier=zero,
                read_policy=ValidFrom(zero),
                scheduled=True,
            )

    # -- sending -------------------------------------------------------------------
    def _send(self, cmd: ComputeCommand, target: ReplicaId | None = None) -> None:
        """Record ``cmd`` in the history and send it to every replica (or only ``target``)."""
        self.history.push(cmd)
        sessions = self.sessions
        if target is None:
            for r in self.replicas.values():
                if sessions is not None:
                    sessions[r.id].on_command(cmd)
                self._outbox.emit(SendCommand(self.id, r.id, r.epoch, cmd))
        else:
            one = self.replicas.get(target)
            if one is not None:
                if sessions is not None:
                    sessions[one.id].on_command(cmd)
                self._outbox.emit(SendCommand(self.id, one.id, one.epoch, cmd))

    def _specialize(self, cmd: ComputeCommand, replica: ReplicaState) -> ComputeCommand:
        """``Hello`` gets a fresh nonce; ``CreateInstance`` gets the replica's logging config."""
        if isinstance(cmd, Hello):
            return Hello(self.uuids(), self.epoch)
        if isinstance(cmd, CreateInstance):
            logging = replica.config.logging.logging_config(self.arranged_logs)
            return CreateInstance(replace(cmd.config, logging=logging))
        return cmd

    def _command_target(self, cmd: ComputeCommand) -> ReplicaId | None:
        if isinstance(cmd, CreateDataflow):
            for eid in cmd.dataflow.export_ids:
                target = self.targets.get(eid)
                if target is not None:
                    return target
            return None
        if isinstance(cmd, Schedule | AllowWrites | AllowCompaction):
            return self.targets.get(cmd.id)
        return None

    # -- configuration ---------------------------------------------------------------
    def initialization_complete(self) -> None:
        """Send ``InitializationComplete`` unless already sent."""
        if not self.initialized:
            self.initialized = True
            self._send(InitializationComplete())

    def update_configuration(self, params: ComputeParameters) -> None:
        self._send(UpdateConfiguration(params))

    # -- read capabilities -------------------------------------------------------------
    def _update_read_caps(self, id: GlobalId, changes: list[tuple[Time, int]]) -> None:
        """Apply hold changes to ``id``; if its read frontier moves, cascade and send AllowCompaction."""
        c = self.collections.get(id)
        if c is None:
            return  # the collection is gone; releases of its holds are moot
        self._update_caps_of(c, changes)

    def _update_caps_of(self, c: ComputeCollectionState, changes: list[tuple[Time, int]]) -> None:
        if not c.read_capabilities.update(changes):
            return
        id = c.id
        new = c.read_capabilities.frontier
        for dep, held in c.compute_dependencies.items():
            moved = held.join(new)
            if moved != held:
                c.compute_dependencies[dep] = moved
                self._update_read_caps(dep, _move(held, moved))
        if c.storage_dependencies:
            storage_changes: dict[GlobalId, ChangeBatch[Time]] = {}
            for dep, held in c.storage_dependencies.items():
                moved = held.join(new)
                if moved != held:
                    c.storage_dependencies[dep] = moved
                    storage_changes[dep] = ChangeBatch(_move(held, moved))
            if storage_changes:
                self.storage.update_storage_read_holds(storage_changes)
        self._send(AllowCompaction(id, new), target=c.target_replica)
        if not new.elements and c.dropped:
            self._maybe_cleanup(id)

    def _downgrade_implied(self, c: ComputeCollectionState, new: Antichain) -> None:
        """Move the implied hold to ``new`` if that is forward; otherwise leave it."""
        old = c.implied
        if old != new and old <= new:
            c.implied = new
            self._update_caps_of(c, _move(old, new))

    def _maybe_update_global_write_frontier(
        self, c: ComputeCollectionState, frontier: Antichain
    ) -> None:
        """The global upper is the maximum over replicas; the implied hold follows it."""
        if not _advances(c.write_frontier, frontier):
            return
        c.write_frontier = frontier
        if c.read_policy is not None:
            self._downgrade_implied(c, c.read_policy.frontier(frontier))
        else:
            self._downgrade_implied(c, _step_back(frontier))
        self._outbox.emit(FrontierUpper(self.id, c.id, frontier))
        if self.unscheduled:
            dependents = self.compute_dependents.get(c.id)
            if dependents:
                for d in sorted(dependents & self.unscheduled):
                    self._maybe_schedule(d)

    # -- replicas ----------------------------------------------------------------------
    def check_add_replica(self, replica: ReplicaId) -> None:
        if replica in self.replicas:
            raise ReplicaExists(self.id, replica)

    def add_replica(
        self,
        replica: ReplicaId,
        config: ReplicaConfig,
        epoch: int,
        status: ReplicaStatus = "connecting",
    ) -> None:
        """Add a replica on connection ``epoch`` and replay the reduced history to it."""
        self.check_add_replica(replica)
        r = ReplicaState(replica, config, epoch, status)
        self.replicas[replica] = r
        self.epochs[replica] = epoch
        self._outbox.emit(ConnectReplica(self.id, replica, config, epoch))
        self._outbox.emit(ReplicaStatusEvent(self.id, replica, status, epoch))
        self.history.reduce()
        uppers: dict[GlobalId, Antichain] = {}
        for sid in self.storage_dependents:
            fr = self.storage.storage_frontiers(sid)
            if fr is not None:
                uppers[sid] = fr[1]
        self.history.update_source_uppers(uppers)
        session = None
        if self.sessions is not None:
            session = self.sessions[replica] = ControllerSession()
        for cmd in self.history:
            target = self._command_target(cmd)
            if target is None or target == replica:
                sent = self._specialize(cmd, r)
                if session is not None:
                    session.on_command(sent)
                self._outbox.emit(SendCommand(self.id, replica, epoch, sent))
        storage_changes: dict[GlobalId, ChangeBatch[Time]] = {}
        for c in self.collections.values():
            if c.target_replica is not None and c.target_replica != replica:
                continue
            as_of = Antichain.bottom(0) if c.kind == "log" else c.read_frontier
            rc = ReplicaCollectionState.starting_at(as_of)
            if as_of.elements:
                for sid, held in c.storage_dependencies.items():
                    rc.input_holds[sid] = held
                    storage_changes.setdefault(sid, ChangeBatch()).extend((t, 1) for t in held)
            r.collections[c.id] = rc
        if storage_changes:
            self.storage.update_storage_read_holds(storage_changes)

    def check_replica(self, replica: ReplicaId) -> ReplicaState:
        r = self.replicas.get(replica)
        if r is None:
            raise ReplicaMissing(self.id, replica)
        return r

    def remove_replica(self, replica: ReplicaId, dropped: bool) -> ReplicaState:
        """Remove a replica: release its input holds, fail what targeted it (section 9.2)."""
        r = self.check_replica(replica)
        del self.replicas[replica]
        if self.sessions is not None:
            del self.sessions[replica]
        self._outbox.emit(DisconnectReplica(self.id, replica, r.epoch, dropped))
        storage_changes: dict[GlobalId, ChangeBatch[Time]] = {}
        for rc in r.collections.values():
            for sid, held in rc.input_holds.items():
                storage_changes.setdefault(sid, ChangeBatch()).extend((t, -1) for t in held)
            rc.input_holds.clear()
        if storage_changes:
            self.storage.update_storage_read_holds(storage_changes)
        for sid_ in sorted(self.subscribes):
            sub = self.subscribes[sid_]
            if sub.target_replica == replica:
                del self.subscribes[sid_]
                self._outbox.emit(
                    SubscribeBatchOut(
                        self.id, sid_, sub.frontier, sub.frontier, (), ERROR_TARGET_REPLICA_FAILED
                    )
                )
        for cid in sorted(g for g, a in self.copy_tos.items() if a.target_replica == replica):
            self._finish_copy_to(cid, None, ERROR_TARGET_REPLICA_FAILED)
        for uuid in sorted(u for u, p in self.peeks.items() if p.target_replica == replica):
            self._finish_peek(uuid, PeekError(ERROR_TARGET_REPLICA_FAILED))
        if not self.replicas:
            self._forward_implied_capabilities()
        for id in sorted(c.id for c in self.collections.values() if c.dropped):
            self._maybe_cleanup(id)
        return r

    def replica_connected(self, replica: ReplicaId, epoch: int) -> None:
        r = self.replicas.get(replica)
        if r is None or r.epoch != epoch or r.status == "connected":
            return
        r.status = "connected"
        self._outbox.emit(ReplicaStatusEvent(self.id, replica, "connected", epoch))

    def set_epoch(self, epoch: int) -> None:
        """A new writer epoch: every replica is rehydrated on a new connection that brings it."""
        self.epoch = epoch
        for rid in sorted(self.replicas):
            self.replica_failed(rid, self.replicas[rid].epoch, "the controller's epoch changed")

    def replica_failed(self, replica: ReplicaId, epoch: int, reason: str) -> None:
        """Rehydrate a failed replica: remove it, then add it back on epoch + 1 with a full replay."""
        r = self.replicas.get(replica)
        if r is None or r.epoch != epoch:
            return  # a stale report about a connection we already replaced
        self._outbox.emit(ReplicaStatusEvent(self.id, replica, "failed", epoch, reason))
        self.remove_replica(replica, dropped=False)
        self.add_replica(replica, r.config, epoch + 1, status="rehydrating")

    # -- dataflows ---------------------------------------------------------------------
    def live(self, id: GlobalId) -> ComputeCollectionState:
        """The collection ``id`` as clients see it (dropped collections are gone)."""
        c = self.collections.get(id)
        if c is None or c.dropped:
            raise CollectionMissing(id)
        return c

    def create_dataflow(
        self, dataflow: DataflowDescription, target_replica: ReplicaId | None
    ) -> None:
        """Validate (section 9.4, in its order), then hold the inputs and install the exports.

        A dataflow without exports has nothing to maintain or read: it is
        validated and then neither installed nor held (its compaction frontier,
        the meet over no exports, is ``[]`` from the start).
        """
        checked = self._check_dataflow(dataflow, target_replica)
        as_of, exports = checked.as_of, dataflow.export_ids
        if not exports:
            return
        replicas = [
            r for r in self.replicas.values() if target_replica is None or r.id == target_replica
        ]
        main_storage, compute_deps = self._hold_inputs(dataflow, checked, len(replicas))
        subscribe_ids = set(dataflow.subscribe_ids)
        copy_tos = {
            s.id: s.connection
            for s in dataflow.sink_exports
            if isinstance(s.connection, CopyToConnection)
        }
        for e in exports:
            kind: ComputeCollectionKind
            if e in subscribe_ids:
                kind = "subscribe"
            elif e in copy_tos:
                kind = "copy_to"
            elif e in checked.mv_uppers:
                kind = "materialized_view"
            else:
                kind = "index"
            c = ComputeCollectionState(
                id=e,
                kind=kind,
                as_of=as_of,
                read_capabilities=ReadCapabilities([*as_of.elements, *as_of.elements]),
                implied=as_of,
                warmup=as_of,
                write_frontier=as_of,
                read_policy=None if kind != "index" else ValidFrom(as_of),
                storage_dependencies=dict(main_storage),
                compute_dependencies=dict(compute_deps),
                target_replica=target_replica,
            )
            self._register(c, replicas, checked.storage_since)
            if e in subscribe_ids:
                self.subscribes[e] = ActiveSubscribe(as_of, target_replica)
            if e in copy_tos:
                self.copy_tos[e] = ActiveCopyTo(copy_tos[e].url, target_replica)
            if e in checked.mv_uppers:
                self._maybe_update_global_write_frontier(c, checked.mv_uppers[e])
            self.unscheduled.add(e)
        if not as_of.elements:
            for e in exports:
                self.unscheduled.discard(e)
            return
        self._send(
            CreateDataflow(dataflow.with_source_uppers(checked.storage_upper)), target_replica
        )
        for e in exports:
            self._maybe_schedule(e)

    def _check_dataflow(
        self, dataflow: DataflowDescription, target_replica: ReplicaId | None
    ) -> _CheckedDataflow:
        """Every refusal of :meth:`create_dataflow`, in the order of section 9.4; mutates nothing."""
        if target_replica is not None:
            self.check_replica(target_replica)
            if dataflow.index_exports:
                raise TargetedIndexExport(dataflow.index_exports[0].id)
        as_of = dataflow.as_of
        if as_of is None:
            raise MissingAsOf(dataflow.debug_name)
        if not as_of.elements and dataflow.subscribe_ids:
            raise EmptyAsOfForSubscribe(dataflow.subscribe_ids[0])
        if not as_of.elements and dataflow.copy_to_ids:
            raise EmptyAsOfForCopyTo(dataflow.copy_to_ids[0])
        checked = _CheckedDataflow(as_of)
        for s in dataflow.source_imports:
            fr = self.storage.storage_frontiers(s.id)
            if fr is None:
                raise CollectionMissing(s.id)
            checked.storage_since[s.id], checked.storage_upper[s.id] = fr
        for ii in dataflow.index_imports:
            self.live(ii.id)
        for sid, since in checked.storage_since.items():
            if not since <= as_of:
                raise SinceViolation(sid, since, as_of)
        for ii in dataflow.index_imports:
            since = self.collections[ii.id].read_frontier
            if not since <= as_of:
                raise SinceViolation(ii.id, since, as_of)
        for sink in dataflow.sink_exports:
            if isinstance(sink.connection, MaterializedViewConnection):
                fr = self.storage.storage_frontiers(sink.id)
                if fr is None:
                    raise CollectionMissing(sink.id)
                checked.mv_uppers[sink.id] = fr[1]
        exports = dataflow.export_ids
        if len(set(exports)) != len(exports):
            raise CollectionExists(next(e for e in exports if exports.count(e) > 1))
        for e in exports:
            if e in self.collections:
                raise CollectionExists(e)
        built = {b.id for b in dataflow.objects_to_build} | set(dataflow.import_ids)
        for ie in dataflow.index_exports:
            if ie.on_id not in built:
                raise InvalidDataflow(f"index {ie.id} arranges unknown object {ie.on_id}")
        for sink in dataflow.sink_exports:
            if sink.from_id not in built:
                raise InvalidDataflow(f"sink {sink.id} reads unknown object {sink.from_id}")
        return checked

    def _hold_inputs(
        self, dataflow: DataflowDescription, checked: _CheckedDataflow, replicas: int
    ) -> tuple[dict[GlobalId, Antichain], dict[GlobalId, Antichain]]:
        """Hold every input at the as_of; returns the storage and compute dependencies' holds.

        Each replica also holds a storage input at its since until it reports
        progress (section 9.3), so a rehydrating replica can still read it.
        """
        as_of = checked.as_of
        storage_changes: dict[GlobalId, ChangeBatch[Time]] = {}
        main_storage: dict[GlobalId, Antichain] = {}
        for sid, since in checked.storage_since.items():
            held = since.join(as_of) if as_of.elements else _EMPTY
            main_storage[sid] = held
            batch = storage_changes.setdefault(sid, ChangeBatch())
            batch.extend((t, 1) for t in held)
            if as_of.elements:
                for _ in range(replicas):
                    batch.extend((t, 1) for t in since)
        if storage_changes:
            self.storage.update_storage_read_holds(storage_changes)
        compute_deps: dict[GlobalId, Antichain] = {}
        for ii in dataflow.index_imports:
            if ii.id not in compute_deps:
                compute_deps[ii.id] = as_of
                if as_of.elements:
                    self._update_read_caps(ii.id, _move(_EMPTY, as_of))
        return main_storage, compute_deps

    def _register(
        self,
        c: ComputeCollectionState,
        replicas: list[ReplicaState],
        storage_since: dict[GlobalId, Antichain],
    ) -> None:
        """Add a new export to the instance, its dependency indexes and every replica's view."""
        e = c.id
        if c.target_replica is not None:
            self.targets[e] = c.target_replica
        self.collections[e] = c
        for dep in c.compute_dependencies:
            self.compute_dependents.setdefault(dep, set()).add(e)
        for sid in c.storage_dependencies:
            self.storage_dependents.setdefault(sid, set()).add(e)
        for r in replicas:
            rc = ReplicaCollectionState.starting_at(c.as_of)
            if c.as_of.elements:
                rc.input_holds = dict(storage_since)
            r.collections[e] = rc

    def _maybe_schedule(self, id: GlobalId) -> None:
        """Send ``Schedule(id)`` once every input can serve the collection's read frontier."""
        c = self.collections.get(id)
        if c is None or c.scheduled:
            self.unscheduled.discard(id)
            return
        since = c.read_frontier
        if not since.elements:
            self.unscheduled.discard(id)
            return
        if not id.is_transient:
            for dep in c.compute_dependencies:
                d = self.collections.get(dep)
                if d is not None and not _advances(since, d.write_frontier):
                    return
            for dep in c.storage_dependencies:
                fr = self.storage.storage_frontiers(dep)
                if fr is not None and not _advances(since, fr[1]):
                    return
        c.scheduled = True
        self.unscheduled.discard(id)
        self._send(Schedule(id), target=c.target_replica)

    def storage_uppers_advanced(self, ids: Iterable[GlobalId]) -> None:
        """Storage collections ``ids`` have new write frontiers: schedule what waited on them."""
        waiting: set[GlobalId] = set()
        for sid in ids:
            deps = self.storage_dependents.get(sid)
            if deps:
                waiting |= deps & self.unscheduled
        for id in sorted(waiting):
            self._maybe_schedule(id)

    # -- policies, holds, drops -------------------------------------------------------
    def set_read_policy(self, policies: Iterable[tuple[GlobalId, ReadPolicy]]) -> None:
        """Validate every id (section 9.6), then apply the policies in order."""
        items = list(policies)
        for id, _ in items:
            c = self.live(id)
            if c.write_only:
                raise WriteOnlyCollection(id)
        for id, policy in items:
            c = self.collections[id]
            c.read_policy = policy
            self._downgrade_implied(c, policy.frontier(c.write_frontier))

    def drop_collections(self, ids: Iterable[GlobalId]) -> None:
        """Validate all ids, then release each collection's implied and warmup holds (section 9.7)."""
        items = list(dict.fromkeys(ids))
        for id in items:
            self.live(id)
        for id in items:
            c = self.collections[id]
            c.dropped = True
            self.subscribes.pop(id, None)
            self.copy_tos.pop(id, None)
            # An unscheduled collection stays waiting for its inputs: a pending peek may still
            # hold it, and only a scheduled dataflow can answer that peek. ``_maybe_schedule``
            # and ``_maybe_cleanup`` forget it once nothing holds it.
            changes = _move(c.implied, _EMPTY) + _move(c.warmup, _EMPTY)
            c.implied = c.warmup = _EMPTY
            self._update_read_caps(id, changes)
        for id in items:
            self._maybe_cleanup(id)

    def _maybe_cleanup(self, id: GlobalId) -> None:
        """Forget a dropped collection once nothing holds it and every replica reported ``[]``."""
        c = self.collections.get(id)
        if c is None or not c.dropped or c.read_frontier.elements:
            return
        for r in self.replicas.values():
            rc = r.collections.get(id)
            if rc is not None and not rc.all_empty():
                return
        del self.collections[id]
        self.unscheduled.discard(id)
        for r in self.replicas.values():
            rc = r.collections.pop(id, None)
            if rc is not None and rc.input_holds:
                self.storage.update_storage_read_holds(
                    {s: ChangeBatch((t, -1) for t in h) for s, h in rc.input_holds.items()}
                )
        for dep in c.compute_dependencies:
            self.compute_dependents.get(dep, set()).discard(id)
        for sid in c.storage_dependencies:
            deps = self.storage_dependents.get(sid)
            if deps is not None:
                deps.discard(id)
                if not deps:
                    del self.storage_dependents[sid]
        storage_release = {
            s: ChangeBatch((t, -1) for t in h)
            for s, h in c.storage_dependencies.items()
            if h.elements
        }
        if storage_release:
            self.storage.update_storage_read_holds(storage_release)
        for dep, held in sorted(c.compute_dependencies.items()):
            self._update_read_caps(dep, _move(held, _EMPTY))

    def allow_writes(self, id: GlobalId) -> None:
        """Let ``id`` write; in a read-only controller only remembered until :meth:`read_write`."""
        c = self.live(id)
        c.writes_requested = True
        if not self.read_only:
            self._send_allow_writes(c)

    def remember_writes(self, id: GlobalId) -> None:
        """A read-only controller's ``allow_writes``: remember it for a live ``id``, else nothing."""
        c = self.collections.get(id)
        if c is not None and not c.dropped:
            c.writes_requested = True

    def read_write(self) -> None:
        """Leave read-only mode: every live collection allowed to write gets its ``AllowWrites``."""
        self.read_only = False
        for c in list(self.collections.values()):
            if c.writes_requested and not c.dropped:
                self._send_allow_writes(c)

    def _send_allow_writes(self, c: ComputeCollectionState) -> None:
        if c.read_only and c.read_frontier.elements:
            c.read_only = False
            self._send(AllowWrites(c.id), target=c.target_replica)

    # -- peeks ---------------------------------------------------------------------------
    def peek(
        self,
        id: GlobalId,
        timestamp: Time,
        finishing: RowSetFinishing,
        target_replica: ReplicaId | None,
        target: PeekTargetKind,
        literal_constraints: tuple[Row, ...] | None,
        uuid: _uuid.UUID | None,
    ) -> _uuid.UUID:
        """Validate (section 9.8), hold the collection at ``timestamp``, send the Peek to every replica."""
        if target_replica is not None:
            self.check_replica(target_replica)
        if target == "index":
            c = self.live(id)
            if c.write_only:
                raise WriteOnlyCollection(id)
            since = c.read_frontier
        else:
            fr = self.storage.storage_frontiers(id)
            if fr is None:
                raise CollectionMissing(id)
            since = fr[0]
        if not since.less_equal(timestamp):
            raise SinceViolation(id, since, timestamp)
        if uuid is not None and uuid in self.peeks:
            raise ValueError(f"peek uuid {uuid} is already pending")
        uid = uuid if uuid is not None else self.uuids()
        if target == "index":
            self._update_read_caps(id, [(timestamp, 1)])
        else:
            self.storage.update_storage_read_holds({id: ChangeBatch([(timestamp, 1)])})
        self.peeks[uid] = PendingPeek(
            uid, id, timestamp, finishing, target_replica, target != "index"
        )
        desc = PeekDescription(
            uuid=uid,
            id=id,
            timestamp=timestamp,
            finishing=finishing,
            target=target,
            literal_constraints=literal_constraints,
        )
        self._send(Peek(desc))
        return uid

    def _finish_peek(self, uuid: _uuid.UUID, result: PeekResult) -> None:
        """Answer the client once, cancel on every replica, and only then release the hold."""
        p = self.peeks.pop(uuid)
        if isinstance(result, PeekRows):
            note = PeekNotification(self.id, uuid, "success", rows=sum(n for _, n in result.rows))
        elif isinstance(result, PeekError):
            note = PeekNotification(self.id, uuid, "error", message=result.message)
        else:
            note = PeekNotification(self.id, uuid, "canceled")
        self._outbox.emit(note)
        self._outbox.emit(PeekResultOut(self.id, uuid, result))
        self._send(CancelPeek(uuid))
        if p.on_storage:
            self.storage.update_storage_read_holds({p.id: ChangeBatch([(p.timestamp, -1)])})
        else:
            self._update_read_caps(p.id, [(p.timestamp, -1)])

    def cancel_peek(self, uuid: _uuid.UUID) -> None:
        if uuid not in self.peeks:
            raise PeekMissing(uuid)
        self._finish_peek(uuid, PeekCanceled())

    # -- responses -----------------------------------------------------------------------
    def handle_response(self, replica: ReplicaId, epoch: int, response: ComputeResponse) -> None:
        """Merge one replica's response (section 9.13); stale epochs and unknown replicas are dropped."""
        r = self.replicas.get(replica)
        if r is None or r.epoch != epoch:
            return
        if self.sessions is not None:
            # Rejects (raises on) responses no correct replica could send, before any state changes.
            self.sessions[replica].on_response(response)
        if isinstance(response, Frontiers):
            self._on_frontiers(r, response)
        elif isinstance(response, PeekResponse):
            p = self.peeks.get(response.uuid)
            if p is None or (p.target_replica is not None and p.target_replica != replica):
                return
            self._finish_peek(response.uuid, response.result)
        elif isinstance(response, SubscribeResponse):
            self._on_subscribe(r, response)
        elif isinstance(response, CopyToResponse):
            self._on_copy_to(r, response)
        # Status responses carry no lifecycle information.

    def _on_frontiers(self, r: ReplicaState, resp: Frontiers) -> None:
        id = resp.id
        rc = r.collections.get(id)
        c = self.collections.get(id)
        if rc is None or c is None:
            return
        if resp.write is not None and _advances(rc.write_frontier, resp.write):
            rc.write_frontier = resp.write
            self._maybe_update_global_write_frontier(c, resp.write)
        if resp.input is not None and rc.input_frontier <= resp.input:
            # Not strict: the first report may equal the as_of, while the holds sit at the storage since.
            rc.input_frontier = resp.input
            self._downgrade_input_holds(rc, resp.input)
        if resp.output is not None and _advances(rc.output_frontier, resp.output):
            rc.output_frontier = resp.output
        if c.dropped:
            self._maybe_cleanup(id)

    def _downgrade_input_holds(self, rc: ReplicaCollectionState, frontier: Antichain) -> None:
        if not rc.input_holds:
            return
        changes: dict[GlobalId, ChangeBatch[Time]] = {}
        for sid, held in rc.input_holds.items():
            moved = held.join(frontier)
            if moved != held:
                rc.input_holds[sid] = moved
                changes[sid] = ChangeBatch(_move(held, moved))
        if changes:
            self.storage.update_storage_read_holds(changes)

    def _on_subscribe(self, r: ReplicaState, resp: SubscribeResponse) -> None:
        id = resp.id
        rc = r.collections.get(id)
        c = self.collections.get(id)
        if rc is None or c is None:
            return
        result = resp.result
        upper = result.upper if isinstance(result, SubscribeBatch) else _EMPTY
        if _advances(rc.write_frontier, upper):
            rc.write_frontier = upper
        if _advances(rc.output_frontier, upper):
            rc.output_frontier = upper
        if rc.input_frontier <= upper:
            rc.input_frontier = upper
            self._downgrade_input_holds(rc, upper)
        sub = self.subscribes.get(id)
        if sub is not None:
            self._maybe_update_global_write_frontier(c, upper)
            if isinstance(result, SubscribeBatch):
                if _advances(sub.frontier, upper):
                    lower = sub.frontier
                    sub.frontier = upper
                    if result.error is None:
                        updates = tuple(u for u in result.updates if lower.less_equal(u[0]))
                    else:
                        updates = ()
                    self._outbox.emit(
                        SubscribeBatchOut(self.id, id, lower, upper, updates, result.error)
                    )
                    if not upper.elements:
                        del self.subscribes[id]
            else:
                del self.subscribes[id]
        if c.dropped:
            self._maybe_cleanup(id)

    def _on_copy_to(self, r: ReplicaState, resp: CopyToResponse) -> None:
        """The first replica's answer goes to the client, and the copy-to is dropped (section 9.10).

        Every answer marks the replica done with the copy-to (all its frontiers
        ``[]``), which cleanup waits for; later replicas' answers (rows, errors,
        ``CopyToDropped`` after the drop) reach no client.
        """
        id = resp.id
        rc = r.collections.get(id)
        c = self.collections.get(id)
        if rc is None or c is None:
            return
        rc.write_frontier = rc.input_frontier = rc.output_frontier = _EMPTY
        self._downgrade_input_holds(rc, _EMPTY)
        result = resp.result
        if id in self.copy_tos and not isinstance(result, CopyToDropped):
            if isinstance(result, CopyToRowCount):
                self._finish_copy_to(id, result.count, None)
            elif isinstance(result, CopyToError):
                self._finish_copy_to(id, None, result.message)
        if c.dropped:
            self._maybe_cleanup(id)

    def _finish_copy_to(self, id: GlobalId, rows: int | None, error: str | None) -> None:
        """Answer copy-to ``id``'s client once, then drop it (its holds go, the replicas drop it)."""
        del self.copy_tos[id]
        self._outbox.emit(CopyToOut(self.id, id, rows, error))
        c = self.collections.get(id)
        if c is not None and not c.dropped:
            self.drop_collections([id])

    # -- maintenance -------------------------------------------------------------------
    def maintain(self) -> None:
        """Periodic work: warmup holds, paused-cluster forwarding, scheduling, cleanup."""
        self._downgrade_warmup()
        if not self.replicas:
            self._forward_implied_capabilities()
        for id in sorted(self.unscheduled):
            self._maybe_schedule(id)
        for id in sorted(c.id for c in self.collections.values() if c.dropped):
            self._maybe_cleanup(id)

    def _dependency_upper(self, dep: GlobalId, storage: bool) -> Antichain:
        if storage:
            fr = self.storage.storage_frontiers(dep)
            return _EMPTY if fr is None else fr[1]
        d = self.collections.get(dep)
        return _EMPTY if d is None else d.write_frontier

    def _downgrade_warmup(self) -> None:
        for id in sorted(self.collections):
            c = self.collections.get(id)
            if c is None or not c.warmup.elements:
                continue
            if c.write_only and not c.write_frontier.elements:
                new = _EMPTY
            else:
                new = Antichain.meet_all(
                    [
                        *(
                            _step_back(self._dependency_upper(d, False))
                            for d in c.compute_dependencies
                        ),
                        *(
                            _step_back(self._dependency_upper(d, True))
                            for d in c.storage_dependencies
                        ),
                    ]
                )
            old = c.warmup
            if old != new and old <= new:
                c.warmup = new
                self._update_read_caps(id, _move(old, new))

    def _transitive_storage_uppers(self, c: ComputeCollectionState) -> Antichain:
        seen: set[GlobalId] = set()
        stack = [c]
        result = _EMPTY
        while stack:
            cur = stack.pop()
            for sid in cur.storage_dependencies:
                result = result.meet(self._dependency_upper(sid, True))
            for dep in cur.compute_dependencies:
                d = self.collections.get(dep)
                if d is not None and dep not in seen:
                    seen.add(dep)
                    stack.append(d)
        return result

    def _forward_implied_capabilities(self) -> None:
        """With no replicas, nothing can advance write frontiers: let policies follow the inputs."""
        for id in sorted(self.collections):
            c = self.collections.get(id)
            if c is None or c.dropped or c.read_policy is None or c.kind == "log":
                continue
            new = c.read_policy.frontier(self._transitive_storage_uppers(c))
            if _advances(c.implied, new):
                self._downgrade_implied(c, new)

    # -- queries -------------------------------------------------------------------------
    def collection_hydrated(self, id: GlobalId) -> bool:
        self.live(id)
        if not self.replicas:
            return True
        for r in self.replicas.values():
            rc = r.collections.get(id)
            if rc is not None and rc.hydrated():
                return True
        return False

    def collections_hydrated_on_replicas(
        self, targets: Iterable[ReplicaId] | None, exclude: Iterable[GlobalId]
    ) -> bool:
        excluded = set(exclude)
        if targets is None:
            replicas = list(self.replicas.values())
        else:
            names = list(targets)
            replicas = [self.replicas[t] for t in names if t in self.replicas]
            if not replicas:
                raise HydrationCheckBadTarget(names)
        if not replicas:
            return True
        for c in self.collections.values():
            if c.dropped or c.id.is_transient or c.id in excluded:
                continue
            if not any(
                (rc := r.collections.get(c.id)) is not None and rc.hydrated() for r in replicas
            ):
                return False
        return True
