"""The compute controller: the public, synchronous API over all compute instances.

A sans-IO state machine (docs/reference/compute.md section 9): each call validates
its arguments, then changes state and records in its outbox the effects the
driver must carry out (commands to named replicas, results and notifications
for clients, connect/disconnect requests, replica status events), which the
driver takes with :meth:`ComputeController.drain`. A call that raises has
changed nothing, outbox included. Storage is reached through a
:class:`StoragePort`: its frontiers and the holds compute takes on it, which
must be checked in the same step as the call that takes them.

Replica responses come in through :meth:`ComputeController.handle_response`
tagged with the connection epoch they arrived on; a connection failure is
reported with :meth:`ComputeController.replica_failed`, which rehydrates the
replica on epoch + 1 by replaying the reduced command history.

>>> from tidegate.spec.compute import ComputeController, InMemoryStorage
>>> ctl = ComputeController(InMemoryStorage())
>>> ctl.create_instance("c1")
>>> ctl.drain()
[]
>>> ctl.add_replica("c1", "r1")
>>> [type(e).__name__ for e in ctl.drain()][:3]
['ConnectReplica', 'ReplicaStatusEvent', 'SendCommand']
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..errors import InstanceExists, InstanceMissing, ReadHoldMissing
from ..errors.frontier import HoldRegression
from ..frontier import Antichain, Row, Time
from ..frontier.read_policy import ReadPolicy
from ..ids import GlobalId, InstanceId, ReplicaId
from ..outbox import Outbox, atomic
from ..protocol.responses import ComputeResponse
from ..protocol.types import (
    ComputeParameters,
    DataflowDescription,
    PeekTargetKind,
    RowSetFinishing,
)
from .config import ReplicaConfig
from .effects import Effect, ReplicaStatusEvent
from .instance import Instance
from .storage_port import StoragePort
from .uuids import UuidFactory, counter_uuids
from .view import InstanceView

__all__ = ["CollectionFrontiers", "ComputeController", "ComputeReadHold"]


@dataclass(frozen=True, slots=True)
class CollectionFrontiers:
    """A compute collection's read frontier (since) and global write frontier (upper)."""

    read_frontier: Antichain
    write_frontier: Antichain


@dataclass(frozen=True, slots=True)
class ComputeReadHold:
    """A client's read hold on a compute collection, issued by :meth:`ComputeController.acquire_read_hold`.

    The hold's current frontier is kept by the controller; this is only its name.
    """

    hold_id: int
    instance: InstanceId
    id: GlobalId


class ComputeController:
    """All compute instances, their replicas and collections (see the module docstring).

    ``uuid_factory`` supplies Hello nonces and peek ids; it defaults to a
    deterministic counter (:func:`counter_uuids`) so that the controller, like
    everything in ``spec``, is deterministic. With ``check_protocol`` every
    command sent and every response received is checked against the protocol
    (:class:`~tidegate.spec.protocol.controller_session.ControllerSession`, one
    per replica connection): an illegal response raises a ``ProtocolError``
    from :meth:`handle_response` and changes nothing.
    """

    def __init__(
        self,
        storage: StoragePort,
        uuid_factory: UuidFactory | None = None,
        *,
        check_protocol: bool = False,
        read_only: bool = False,
    ) -> None:
        self.storage = storage
        self._read_only = read_only
        self.epoch = 0
        """The controller's writer epoch, sent in every replica's ``Hello`` (:meth:`set_epoch`)."""
        self.check_protocol = check_protocol
        self._uuids = uuid_factory if uuid_factory is not None else counter_uuids(0)
        self._instances: dict[InstanceId, Instance] = {}
        self._params = ComputeParameters()
        self._workload_classes: dict[InstanceId, str | None] = {}
        self._initialized = False
        self._holds: dict[int, tuple[InstanceId, GlobalId, Antichain]] = {}
        self._next_hold = 0
        self._outbox: Outbox[Effect] = Outbox()

    # -- lookup ---------------------------------------------------------------------------
    def _instance(self, instance: InstanceId) -> Instance:
        inst = self._instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        return inst

    def instance_ids(self) -> list[InstanceId]:
        return sorted(self._instances)

    def instance(self, instance: InstanceId) -> InstanceView:
        """A read-only handle on ``instance`` for inspection."""
        return InstanceView(self._instance(instance))

    def drain(self) -> list[Effect]:
        """The effects of every call since the last drain, in the order they arose."""
        return self._outbox.drain()

    # -- instances -----------------------------------------------------------------------
    @atomic
    def create_instance(
        self,
        instance: InstanceId,
        arranged_logs: Mapping[str, GlobalId] | Iterable[tuple[str, GlobalId]] = (),
        workload_class: str | None = None,
    ) -> None:
        """Create an instance with its arranged log collections (readable from time 0 on every replica).

        ``workload_class`` is the instance's own: every ``UpdateConfiguration``
        it sends carries it (or none), never another instance's.
        """
        if instance in self._instances:
            raise InstanceExists(instance)
        logs = tuple(arranged_logs.items() if isinstance(arranged_logs, Mapping) else arranged_logs)
        params = replace(self._params, workload_class=workload_class)
        inst = Instance(
            instance,
            self.storage,
            self._uuids,
            logs,
            params,
            self._initialized,
            self.check_protocol,
            self._outbox,
            self._read_only,
        )
        inst.epoch = self.epoch
        self._instances[instance] = inst
        self._workload_classes[instance] = workload_class

    @atomic
    def drop_instance(self, instance: InstanceId) -> None:
        """Remove an instance: its replicas are disconnected and all its holds released."""
        inst = self._instance(instance)
        for rid in sorted(inst.replicas):
            inst.remove_replica(rid, dropped=True)
        for uuid in sorted(inst.peeks):
            inst.cancel_peek(uuid)
        live = sorted(c.id for c in inst.collections.values() if not c.dropped)
        if live:
            inst.drop_collections(live)
        for hold_id in sorted(h for h, (i, _, _) in self._holds.items() if i == instance):
            self._release(hold_id)
        del self._instances[instance]
        del self._workload_classes[instance]

    @atomic
    def update_configuration(self, params: ComputeParameters) -> None:
        """Merge ``params`` into the controller's configuration and send them to every instance.

        A workload class in ``params`` is not the controller's to set: each
        instance keeps the one it was created with (Materialize's instances
        overwrite the field with their own), so it never leaks between them.
        """
        self._params = replace(self._params.update(params), workload_class=None)
        for name in sorted(self._instances):
            p = replace(params, workload_class=self._workload_classes[name])
            self._instances[name].update_configuration(p)

    @atomic
    def initialization_complete(self) -> None:
        """Mark the controller initialized; every instance sends ``InitializationComplete`` once."""
        self._initialized = True
        for name in sorted(self._instances):
            self._instances[name].initialization_complete()

    # -- replicas --------------------------------------------------------------------------
    @atomic
    def add_replica(
        self, instance: InstanceId, replica: ReplicaId, config: ReplicaConfig | None = None
    ) -> None:
        """Add a replica (epoch 1 for a new id) and replay the instance's reduced history to it."""
        inst = self._instance(instance)
        inst.check_add_replica(replica)
        epoch = inst.epochs.get(replica, 0) + 1
        inst.add_replica(replica, config if config is not None else ReplicaConfig(), epoch)

    @atomic
    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        """Remove a replica; peeks, subscribes and copy-tos targeted at it fail with the documented error."""
        inst = self._instance(instance)
        inst.check_replica(replica)
        r = inst.remove_replica(replica, dropped=True)
        self._outbox.emit(ReplicaStatusEvent(instance, replica, "dropped", r.epoch))

    @atomic
    def replica_connected(self, instance: InstanceId, replica: ReplicaId, epoch: int) -> None:
        """The driver's connection of ``epoch`` is up (a status event for clients)."""
        self._instance(instance).replica_connected(replica, epoch)

    @atomic
    def replica_failed(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, reason: str = ""
    ) -> None:
        """The connection of ``epoch`` failed: rehydrate on epoch + 1 (stale epochs are ignored)."""
        self._instance(instance).replica_failed(replica, epoch, reason)

    @atomic
    def handle_response(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, response: ComputeResponse
    ) -> None:
        """Merge a response from ``replica`` received on its connection of ``epoch``."""
        inst = self._instances.get(instance)
        if inst is not None:
            inst.handle_response(replica, epoch, response)

    # -- dataflows and collections -----------------------------------------------------------
    @atomic
    def create_dataflow(
        self,
        instance: InstanceId,
        dataflow: DataflowDescription,
        target_replica: ReplicaId | None = None,
    ) -> None:
        """Install a dataflow; its exports get read and write frontier ``{as_of}`` at once."""
        self._instance(instance).create_dataflow(dataflow, target_replica)

    @atomic
    def drop_collections(self, instance: InstanceId, ids: Iterable[GlobalId]) -> None:
        """Drop collections (all ids validated first); replicas are told once nothing holds them."""
        self._instance(instance).drop_collections(ids)

    @atomic
    def set_read_policy(
        self, instance: InstanceId, policies: Iterable[tuple[GlobalId, ReadPolicy]]
    ) -> None:
        """Set read policies; an unknown or write-only id rejects the whole batch."""
        self._instance(instance).set_read_policy(policies)

    @atomic
    def allow_writes(self, instance: InstanceId, id: GlobalId) -> None:
        """Let collection ``id`` write to storage (sends ``AllowWrites`` once).

        In read-only mode this answers at once, before validating anything, as
        Materialize's does (the adapter replays such calls during a takeover, for
        collections that may be gone): nothing is sent, and a live collection of
        a known instance is remembered so that :meth:`read_write` sends it then;
        an unknown instance or collection is not an error. In read-write mode
        [InstanceMissing, CollectionMissing].
        """
        if self._read_only:
            inst = self._instances.get(instance)
            if inst is not None:
                inst.remember_writes(id)
            return
        self._instance(instance).allow_writes(id)

    @property
    def read_only(self) -> bool:
        """Whether the controller keeps its collections from writing (seed 001's read-only mode)."""
        return self._read_only

    @atomic
    @atomic
    def set_epoch(self, epoch: int) -> None:
        """The controller's writer epoch is now ``epoch`` (a promotion took over writing): every
        replica starts a new protocol iteration with it, so none accepts an older controller
        again. Lower or equal epochs change nothing."""
        if epoch <= self.epoch:
            return
        self.epoch = epoch
        for name in sorted(self._instances):
            self._instances[name].set_epoch(epoch)

    def read_write(self) -> None:
        """Leave read-only mode: ``AllowWrites`` for every live collection allowed to write, once.

        How a controller that warmed up beside another (a zero-downtime
        upgrade) takes over writing, once the other is fenced out.
        """
        self._read_only = False
        for name in sorted(self._instances):
            self._instances[name].read_write()

    def collection_frontiers(self, instance: InstanceId, id: GlobalId) -> CollectionFrontiers:
        c = self._instance(instance).live(id)
        return CollectionFrontiers(c.read_frontier, c.write_frontier)

    def collection_hydrated(self, instance: InstanceId, id: GlobalId) -> bool:
        """Whether some replica has computed ``id`` beyond its as_of (true with no replicas)."""
        return self._instance(instance).collection_hydrated(id)

    def collections_hydrated_on_replicas(
        self,
        instance: InstanceId,
        targets: Iterable[ReplicaId] | None = None,
        exclude: Iterable[GlobalId] = (),
    ) -> bool:
        return self._instance(instance).collections_hydrated_on_replicas(targets, exclude)

    @atomic
    def storage_frontiers_advanced(self, ids: Iterable[GlobalId]) -> None:
        """Storage write frontiers moved: schedule dataflows that were waiting on them."""
        items = list(ids)
        for name in sorted(self._instances):
            self._instances[name].storage_uppers_advanced(items)

    @atomic
    def maintain(self) -> None:
        """Periodic work on every instance: warmup holds, paused-cluster forwarding, scheduling, cleanup."""
        for name in sorted(self._instances):
            self._instances[name].maintain()

    # -- read holds ------------------------------------------------------------------------
    @atomic
    def acquire_read_hold(self, instance: InstanceId, id: GlobalId) -> ComputeReadHold:
        """A hold on ``id`` at its current read frontier; it keeps the since there until moved."""
        inst = self._instance(instance)
        c = inst.live(id)
        since = c.read_frontier
        inst._update_read_caps(id, [(t, 1) for t in since.elements])
        hold_id = self._next_hold
        self._next_hold += 1
        self._holds[hold_id] = (instance, id, since)
        return ComputeReadHold(hold_id, instance, id)

    def read_hold_frontier(self, hold: ComputeReadHold) -> Antichain:
        entry = self._holds.get(hold.hold_id)
        if entry is None:
            raise ReadHoldMissing(hold)
        return entry[2]

    @atomic
    def downgrade_read_hold(self, hold: ComputeReadHold, frontier: Antichain) -> None:
        """Move a hold forward to ``frontier`` (``[]`` releases it); moving back raises."""
        entry = self._holds.get(hold.hold_id)
        if entry is None:
            raise ReadHoldMissing(hold)
        instance, id, old = entry
        if not old <= frontier:
            raise HoldRegression(f"read hold on {id} cannot move from {old!r} back to {frontier!r}")
        if frontier == old:
            return
        inst = self._instances[instance]
        changes = [*((t, 1) for t in frontier.elements), *((t, -1) for t in old.elements)]
        if frontier.elements:
            self._holds[hold.hold_id] = (instance, id, frontier)
        else:
            del self._holds[hold.hold_id]
        inst._update_read_caps(id, changes)

    @atomic
    def release_read_hold(self, hold: ComputeReadHold) -> None:
        if hold.hold_id not in self._holds:
            raise ReadHoldMissing(hold)
        self._release(hold.hold_id)

    def _release(self, hold_id: int) -> None:
        instance, id, old = self._holds.pop(hold_id)
        inst = self._instances[instance]
        inst._update_read_caps(id, [(t, -1) for t in old.elements])

    # -- peeks ---------------------------------------------------------------------------
    @atomic
    def peek(
        self,
        instance: InstanceId,
        id: GlobalId,
        timestamp: Time,
        finishing: RowSetFinishing | None = None,
        target_replica: ReplicaId | None = None,
        *,
        target: PeekTargetKind = "index",
        literal_constraints: tuple[Row, ...] | None = None,
        uuid: _uuid.UUID | None = None,
    ) -> _uuid.UUID:
        """Read ``id`` at ``timestamp``; returns the peek's uuid.

        The collection is held at ``timestamp`` until the peek is answered or
        cancelled; the client then gets exactly one :class:`PeekResultOut`
        and one :class:`PeekNotification`.
        """
        uid = self._instance(instance).peek(
            id,
            timestamp,
            finishing if finishing is not None else RowSetFinishing(),
            target_replica,
            target,
            literal_constraints,
            uuid,
        )
        return uid

    @atomic
    def cancel_peek(self, instance: InstanceId, uuid: _uuid.UUID) -> None:
        """Cancel a pending peek: the client gets a ``PeekCanceled`` result (``PeekMissing`` if none pending)."""
        self._instance(instance).cancel_peek(uuid)
