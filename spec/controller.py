"""The composed controller: compute with a live connection to storage (seed 000).

:class:`Controller` owns a :class:`~tidegate.spec.storage.StorageController`
and a :class:`~tidegate.spec.compute.ComputeController` wired to it:

* compute's read holds on storage collections (dataflow inputs, replica
  input holds, persist peeks) are storage read capabilities, so storage never
  compacts what a dataflow or replica still reads;
* storage write frontiers flow into compute scheduling: a dataflow waiting
  for its storage inputs is scheduled as soon as their uppers pass its as_of.

Every call returns the effects of both layers, compute's first, in the order
they arose. ``sim/`` and ``runtime/`` drive this one object.

>>> from tidegate.spec.controller import Controller
>>> from tidegate.spec.storage import CollectionDescription, Table
>>> from tidegate.spec.ids import GlobalId
>>> ctl = Controller()
>>> _ = ctl.create_collections([(GlobalId.user(1), CollectionDescription(Table()))])
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
    Effect,
    InstanceView,
    ReadHold,
    ReplicaConfig,
    UuidFactory,
)
from .frontier import Antichain, Row, Time
from .frontier.read_policy import ReadPolicy
from .ids import GlobalId, InstanceId, ReplicaId
from .protocol.responses import ComputeResponse
from .protocol.types import ComputeParameters, DataflowDescription, PeekTargetKind, RowSetFinishing
from .storage import (
    AppendCommand,
    CollectionDescription,
    PendingAppend,
    PendingSnapshot,
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
    controller); a caller that mutates ``storage`` directly
    should pass its uppers on with :meth:`storage_uppers_changed`.
    """

    def __init__(
        self,
        storage: StorageController | None = None,
        uuid_factory: UuidFactory | None = None,
        *,
        check_protocol: bool = False,
    ) -> None:
        self.storage = storage if storage is not None else StorageController()
        self.compute = ComputeController(self.storage, uuid_factory, check_protocol=check_protocol)

    # -- plumbing ------------------------------------------------------------------------
    def _with_storage(self, effects: Sequence[ControllerEffect]) -> list[ControllerEffect]:
        """Append the storage effects that compute's hold changes caused, then follow new uppers."""
        out: list[ControllerEffect] = [*effects, *self.storage.take_effects()]
        advanced = [e.id for e in out if isinstance(e, UpperChanged)]
        if advanced:
            out.extend(self.compute.storage_frontiers_advanced(advanced))
            out.extend(self.storage.take_effects())
        return out

    def storage_uppers_changed(self, ids: Iterable[GlobalId]) -> list[ControllerEffect]:
        """Tell compute that storage collections ``ids`` have new uppers (schedules waiting dataflows)."""
        return self._with_storage(self.compute.storage_frontiers_advanced(ids))

    # -- lifecycle -------------------------------------------------------------------------
    def initialization_complete(self) -> list[ControllerEffect]:
        """Both layers leave their initialization stage."""
        return self._with_storage(
            [*self.storage.initialization_complete(), *self.compute.initialization_complete()]
        )

    def update_compute_configuration(self, params: ComputeParameters) -> list[ControllerEffect]:
        return self._with_storage(self.compute.update_configuration(params))

    def maintain(self) -> list[ControllerEffect]:
        """Compute's periodic maintenance (warmup holds, scheduling, cleanup)."""
        return self._with_storage(self.compute.maintain())

    # -- storage ---------------------------------------------------------------------------
    def create_collections(
        self,
        descriptions: Sequence[tuple[GlobalId, CollectionDescription]],
        shards: Mapping[GlobalId, ShardFrontiers] | None = None,
    ) -> list[ControllerEffect]:
        return self._with_storage(self.storage.create_collections(descriptions, shards))

    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain] | None:
        """``(since, upper)`` of storage collection ``id`` (``None`` if there is none)."""
        return self.storage.storage_frontiers(id)

    def update_write_frontiers(
        self, updates: Iterable[tuple[GlobalId, Antichain]]
    ) -> list[ControllerEffect]:
        """New storage uppers (from the shard store): storage policies move, waiting dataflows start."""
        return self._with_storage(self.storage.update_write_frontiers(updates))

    def append(self, commands: Sequence[AppendCommand]) -> PendingAppend:
        """Table appends; their completion arrives through :meth:`complete_write`."""
        return self.storage.append(commands)

    def complete_write(
        self, ticket: int, id: GlobalId, success: bool, current_upper: Antichain
    ) -> list[ControllerEffect]:
        """The shard store finished one write of an append; a new upper may start waiting dataflows."""
        return self._with_storage(self.storage.complete_write(ticket, id, success, current_upper))

    def snapshot(self, id: GlobalId, as_of: Time) -> PendingSnapshot:
        """Read ``id`` as of ``as_of`` (held there until :meth:`complete_snapshot`)."""
        return self.storage.snapshot(id, as_of)

    def complete_snapshot(self, request: int) -> list[ControllerEffect]:
        return self._with_storage(self.storage.complete_snapshot(request))

    def set_storage_read_policy(
        self, policies: Sequence[tuple[GlobalId, ReadPolicy]]
    ) -> list[ControllerEffect]:
        return self._with_storage(self.storage.set_read_policy(policies))

    def drop_sources(self, ids: Iterable[GlobalId]) -> list[ControllerEffect]:
        return self._with_storage(self.storage.drop_sources(ids))

    # -- compute ---------------------------------------------------------------------------
    def instance(self, instance: InstanceId) -> InstanceView:
        """A read-only handle on a compute instance."""
        return self.compute.instance(instance)

    def create_instance(
        self,
        instance: InstanceId,
        arranged_logs: Mapping[str, GlobalId] | Iterable[tuple[str, GlobalId]] = (),
        workload_class: str | None = None,
    ) -> list[ControllerEffect]:
        return self._with_storage(
            self.compute.create_instance(instance, arranged_logs, workload_class)
        )

    def drop_instance(self, instance: InstanceId) -> list[ControllerEffect]:
        return self._with_storage(self.compute.drop_instance(instance))

    def add_replica(
        self, instance: InstanceId, replica: ReplicaId, config: ReplicaConfig | None = None
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.add_replica(instance, replica, config))

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> list[ControllerEffect]:
        return self._with_storage(self.compute.drop_replica(instance, replica))

    def replica_connected(
        self, instance: InstanceId, replica: ReplicaId, epoch: int
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.replica_connected(instance, replica, epoch))

    def replica_failed(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, reason: str = ""
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.replica_failed(instance, replica, epoch, reason))

    def handle_response(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, response: ComputeResponse
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.handle_response(instance, replica, epoch, response))

    def create_dataflow(
        self,
        instance: InstanceId,
        dataflow: DataflowDescription,
        target_replica: ReplicaId | None = None,
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.create_dataflow(instance, dataflow, target_replica))

    def drop_collections(
        self, instance: InstanceId, ids: Iterable[GlobalId]
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.drop_collections(instance, ids))

    def set_read_policy(
        self, instance: InstanceId, policies: Iterable[tuple[GlobalId, ReadPolicy]]
    ) -> list[ControllerEffect]:
        return self._with_storage(self.compute.set_read_policy(instance, policies))

    def allow_writes(self, instance: InstanceId, id: GlobalId) -> list[ControllerEffect]:
        return self._with_storage(self.compute.allow_writes(instance, id))

    def collection_frontiers(self, instance: InstanceId, id: GlobalId) -> CollectionFrontiers:
        return self.compute.collection_frontiers(instance, id)

    def collection_hydrated(self, instance: InstanceId, id: GlobalId) -> bool:
        return self.compute.collection_hydrated(instance, id)

    def acquire_read_hold(self, instance: InstanceId, id: GlobalId) -> ReadHold:
        return self.compute.acquire_read_hold(instance, id)

    def downgrade_read_hold(self, hold: ReadHold, frontier: Antichain) -> list[ControllerEffect]:
        return self._with_storage(self.compute.downgrade_read_hold(hold, frontier))

    def release_read_hold(self, hold: ReadHold) -> list[ControllerEffect]:
        return self._with_storage(self.compute.release_read_hold(hold))

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
    ) -> tuple[_uuid.UUID, list[ControllerEffect]]:
        uid, effects = self.compute.peek(
            instance,
            id,
            timestamp,
            finishing,
            target_replica,
            target=target,
            literal_constraints=literal_constraints,
            uuid=uuid,
        )
        return uid, self._with_storage(effects)

    def cancel_peek(self, instance: InstanceId, uuid: _uuid.UUID) -> list[ControllerEffect]:
        return self._with_storage(self.compute.cancel_peek(instance, uuid))
