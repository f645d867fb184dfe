"""The composed controller: compute with a live connection to storage (seed 000).

:class:`Controller` owns a :class:`~tidegate.spec.storage.StorageController`
and a :class:`~tidegate.spec.compute.ComputeController` wired to it:

* compute's read holds on storage collections (dataflow inputs, replica
  input holds, persist peeks) are storage read capabilities, so storage never
  compacts what a dataflow or replica still reads;
* storage write frontiers flow into compute scheduling: a dataflow waiting
  for its storage inputs is scheduled as soon as their uppers pass its as_of.

Every call records the effects of both layers, compute's first, in the order
they arose, in the controller's outbox; the owner takes them with
:meth:`Controller.drain`. Storage's new uppers reach compute as explicit
events (:class:`~tidegate.spec.storage.UpperChanged`, routed by the controller
after each call); compute's holds on storage collections go through the
synchronous :class:`~tidegate.spec.compute.StoragePort`, because a hold must be
checked against the since in the same step that takes it. ``runtime/`` drives
this one object, and ``sim/`` runs the runtime.

>>> from tidegate.spec.controller import Controller
>>> from tidegate.spec.storage import CollectionDescription, Table
>>> from tidegate.spec.ids import GlobalId
>>> ctl = Controller()
>>> ctl.create_collections([(GlobalId.user(1), CollectionDescription(Table()))])
>>> [type(e).__name__ for e in ctl.drain()]
['RegisterShard']
>>> ctl.storage_frontiers(GlobalId.user(1))
(Antichain([0]), Antichain([0]))
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from .compute import (
    CollectionFrontiers,
    ComputeController,
    ComputeReadHold,
    Effect,
    InstanceView,
    ReplicaConfig,
    UuidFactory,
)
from .frontier import Antichain, Row, Time
from .frontier.read_policy import ReadPolicy
from .ids import GlobalId, InstanceId, ReplicaId
from .outbox import Outbox
from .protocol.responses import ComputeResponse
from .protocol.types import ComputeParameters, DataflowDescription, PeekTargetKind, RowSetFinishing
from .storage import (
    AppendCommand,
    CollectionDescription,
    ShardFrontiers,
    StorageController,
    StorageEffect,
    UpperChanged,
)

__all__ = ["Controller", "ControllerEffect"]

ControllerEffect: TypeAlias = Effect | StorageEffect
"""An effect of either layer."""


class Controller:
    """Compute and storage controllers, connected (see the module docstring).

    ``compute`` and ``storage`` are exposed for inspection and for the
    operations not wrapped here (``check_protocol`` is passed to the compute
    controller, and to the storage controller built when none is given):
    their effects, too, are taken by :meth:`drain`, which first routes
    storage's new uppers to compute.
    """

    def __init__(
        self,
        storage: StorageController | None = None,
        uuid_factory: UuidFactory | None = None,
        *,
        check_protocol: bool = False,
        read_only: bool = False,
    ) -> None:
        self.storage = (
            storage
            if storage is not None
            else StorageController(read_only=read_only, check_protocol=check_protocol)
        )
        self.compute = ComputeController(
            self.storage, uuid_factory, check_protocol=check_protocol, read_only=read_only
        )
        self._outbox: Outbox[ControllerEffect] = Outbox()

    # -- plumbing ------------------------------------------------------------------------
    def _settle(self) -> None:
        """Take both layers' effects, compute's first; storage's new uppers go to compute as events.

        Runs after every call, so the composed outbox holds each call's
        effects in the order they arose, and a dataflow waiting on a storage
        upper is scheduled in the same call that advanced it.
        """
        while fresh := [*self.compute.drain(), *self.storage.drain()]:
            self._outbox.extend(fresh)
            advanced = [e.id for e in fresh if isinstance(e, UpperChanged)]
            if advanced:
                self.compute.storage_frontiers_advanced(advanced)

    def drain(self) -> list[ControllerEffect]:
        """The effects of every call since the last drain (both layers), in the order they arose.

        Calls made on ``compute`` or ``storage`` directly are settled here too,
        so an operation of either layer needs no wrapper on this class.
        """
        self._settle()
        return self._outbox.drain()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """Read-only mode (seed 001): no ``AllowWrites``, no table appends, no shard dropped."""
        return self.compute.read_only

    def read_write(self) -> None:
        """Leave read-only mode: appends are accepted and every MV allowed to write gets
        ``AllowWrites`` once. The caller fences out the controller that wrote until now."""
        self.storage.read_write()
        self.compute.read_write()
        self._settle()

    def initialization_complete(self) -> None:
        """Both layers leave their initialization stage."""
        self.storage.initialization_complete()
        self.compute.initialization_complete()
        self._settle()

    def update_compute_configuration(self, params: ComputeParameters) -> None:
        self.compute.update_configuration(params)
        self._settle()

    def maintain(self) -> None:
        """Compute's periodic maintenance (warmup holds, scheduling, cleanup)."""
        self.compute.maintain()
        self._settle()

    # -- storage ---------------------------------------------------------------------------
    def create_collections(
        self,
        descriptions: Sequence[tuple[GlobalId, CollectionDescription]],
        shards: Mapping[GlobalId, ShardFrontiers] | None = None,
    ) -> None:
        self.storage.create_collections(descriptions, shards)
        self._settle()

    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain] | None:
        """``(since, upper)`` of storage collection ``id`` (``None`` if there is none)."""
        return self.storage.storage_frontiers(id)

    def update_write_frontiers(self, updates: Iterable[tuple[GlobalId, Antichain]]) -> None:
        """New storage uppers (from the shard store): storage policies move, waiting dataflows start."""
        self.storage.update_write_frontiers(updates)
        self._settle()

    def append(self, commands: Sequence[AppendCommand]) -> int:
        """Table appends; returns the ticket whose completion arrives through :meth:`complete_write`."""
        ticket = self.storage.append(commands)
        self._settle()
        return ticket

    def complete_write(
        self, ticket: int, id: GlobalId, success: bool, current_upper: Antichain
    ) -> None:
        """The shard store finished one write of an append; a new upper may start waiting dataflows."""
        self.storage.complete_write(ticket, id, success, current_upper)
        self._settle()

    def snapshot(self, id: GlobalId, as_of: Time) -> int:
        """Read ``id`` as of ``as_of`` (held there until :meth:`complete_snapshot`); the request number."""
        request = self.storage.snapshot(id, as_of)
        self._settle()
        return request

    def complete_snapshot(self, request: int) -> None:
        self.storage.complete_snapshot(request)
        self._settle()

    def set_storage_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        self.storage.set_read_policy(policies)
        self._settle()

    def reconcile_state(self, claimed: Iterable[GlobalId] = ()) -> None:
        """After a restart: drop the durable shards no live collection (nor ``claimed``) owns."""
        self.storage.reconcile_state(claimed)
        self._settle()

    def drop_sources(self, ids: Iterable[GlobalId]) -> None:
        self.storage.drop_sources(ids)
        self._settle()

    # -- compute ---------------------------------------------------------------------------
    def instance(self, instance: InstanceId) -> InstanceView:
        """A read-only handle on a compute instance."""
        return self.compute.instance(instance)

    def create_instance(
        self,
        instance: InstanceId,
        arranged_logs: Mapping[str, GlobalId] | Iterable[tuple[str, GlobalId]] = (),
        workload_class: str | None = None,
    ) -> None:
        self.compute.create_instance(instance, arranged_logs, workload_class)
        self._settle()

    def drop_instance(self, instance: InstanceId) -> None:
        self.compute.drop_instance(instance)
        self._settle()

    def add_replica(
        self, instance: InstanceId, replica: ReplicaId, config: ReplicaConfig | None = None
    ) -> None:
        self.compute.add_replica(instance, replica, config)
        self._settle()

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        self.compute.drop_replica(instance, replica)
        self._settle()

    def replica_connected(self, instance: InstanceId, replica: ReplicaId, epoch: int) -> None:
        self.compute.replica_connected(instance, replica, epoch)
        self._settle()

    def replica_failed(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, reason: str = ""
    ) -> None:
        self.compute.replica_failed(instance, replica, epoch, reason)
        self._settle()

    def handle_response(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, response: ComputeResponse
    ) -> None:
        self.compute.handle_response(instance, replica, epoch, response)
        self._settle()

    def create_dataflow(
        self,
        instance: InstanceId,
        dataflow: DataflowDescription,
        target_replica: ReplicaId | None = None,
    ) -> None:
        self.compute.create_dataflow(instance, dataflow, target_replica)
        self._settle()

    def drop_collections(self, instance: InstanceId, ids: Iterable[GlobalId]) -> None:
        self.compute.drop_collections(instance, ids)
        self._settle()

    def set_read_policy(
        self, instance: InstanceId, policies: Iterable[tuple[GlobalId, ReadPolicy]]
    ) -> None:
        self.compute.set_read_policy(instance, policies)
        self._settle()

    def allow_writes(self, instance: InstanceId, id: GlobalId) -> None:
        self.compute.allow_writes(instance, id)
        self._settle()

    def collection_frontiers(self, instance: InstanceId, id: GlobalId) -> CollectionFrontiers:
        return self.compute.collection_frontiers(instance, id)

    def collection_hydrated(self, instance: InstanceId, id: GlobalId) -> bool:
        return self.compute.collection_hydrated(instance, id)

    def acquire_read_hold(self, instance: InstanceId, id: GlobalId) -> ComputeReadHold:
        hold = self.compute.acquire_read_hold(instance, id)
        self._settle()
        return hold

    def downgrade_read_hold(self, hold: ComputeReadHold, frontier: Antichain) -> None:
        self.compute.downgrade_read_hold(hold, frontier)
        self._settle()

    def release_read_hold(self, hold: ComputeReadHold) -> None:
        self.compute.release_read_hold(hold)
        self._settle()

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
        """Read ``id`` at ``timestamp`` (see :meth:`ComputeController.peek`); the peek's uuid."""
        uid = self.compute.peek(
            instance,
            id,
            timestamp,
            finishing,
            target_replica,
            target=target,
            literal_constraints=literal_constraints,
            uuid=uuid,
        )
        self._settle()
        return uid

    def cancel_peek(self, instance: InstanceId, uuid: _uuid.UUID) -> None:
        self.compute.cancel_peek(instance, uuid)
        self._settle()
