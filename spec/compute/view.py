"""A read-only handle on a compute instance (seed 000): inspect it, change nothing.

Every accessor returns frozen snapshots, so holding or passing a view around
can never alter the controller.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CollectionMissing, ReplicaMissing
from ..frontier import Antichain, Time
from ..ids import GlobalId, InstanceId, ReplicaId
from ..protocol.commands import ComputeCommand
from .config import ReplicaConfig
from .effects import ReplicaStatus
from .state import ComputeCollectionKind

if TYPE_CHECKING:
    from .instance import Instance

__all__ = [
    "CollectionSnapshot",
    "InstanceView",
    "ReplicaCollectionSnapshot",
    "ReplicaSnapshot",
]


@dataclass(frozen=True, slots=True)
class CollectionSnapshot:
    """A compute collection as the controller sees it now."""

    id: GlobalId
    kind: ComputeCollectionKind
    as_of: Antichain
    read_frontier: Antichain
    write_frontier: Antichain
    implied: Antichain
    warmup: Antichain
    read_policy: object
    storage_dependencies: tuple[tuple[GlobalId, Antichain], ...]
    compute_dependencies: tuple[tuple[GlobalId, Antichain], ...]
    target_replica: ReplicaId | None
    scheduled: bool
    dropped: bool
    read_only: bool
    holds: tuple[tuple[Time, int], ...]


@dataclass(frozen=True, slots=True)
class ReplicaCollectionSnapshot:
    """One replica's reported progress on one collection."""

    as_of: Antichain
    write_frontier: Antichain
    input_frontier: Antichain
    output_frontier: Antichain
    input_holds: tuple[tuple[GlobalId, Antichain], ...]
    hydrated: bool


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """A replica: its configuration, connection epoch and status."""

    id: ReplicaId
    config: ReplicaConfig
    epoch: int
    status: ReplicaStatus


class InstanceView:
    """Inspect one instance: collections, frontiers, replicas and their status, pending peeks."""

    __slots__ = ("_inst",)

    def __init__(self, instance: Instance) -> None:
        self._inst = instance

    @property
    def id(self) -> InstanceId:
        return self._inst.id

    @property
    def initialized(self) -> bool:
        return self._inst.initialized

    @property
    def arranged_logs(self) -> tuple[tuple[str, GlobalId], ...]:
        return self._inst.arranged_logs

    def collection_ids(self, include_dropped: bool = False) -> list[GlobalId]:
        return sorted(
            c.id for c in self._inst.collections.values() if include_dropped or not c.dropped
        )

    def collection(self, id: GlobalId) -> CollectionSnapshot:
        c = self._inst.collections.get(id)
        if c is None:
            raise CollectionMissing(id)
        return CollectionSnapshot(
            id=c.id,
            kind=c.kind,
            as_of=c.as_of,
            read_frontier=c.read_frontier,
            write_frontier=c.write_frontier,
            implied=c.implied,
            warmup=c.warmup,
            read_policy=c.read_policy,
            storage_dependencies=tuple(sorted(c.storage_dependencies.items())),
            compute_dependencies=tuple(sorted(c.compute_dependencies.items())),
            target_replica=c.target_replica,
            scheduled=c.scheduled,
            dropped=c.dropped,
            read_only=c.read_only,
            holds=tuple(c.read_capabilities.updates()),
        )

    def collections(self, include_dropped: bool = False) -> list[CollectionSnapshot]:
        return [self.collection(i) for i in self.collection_ids(include_dropped)]

    def replica_ids(self) -> list[ReplicaId]:
        return sorted(self._inst.replicas)

    def replica(self, replica: ReplicaId) -> ReplicaSnapshot:
        r = self._inst.replicas.get(replica)
        if r is None:
            raise ReplicaMissing(self._inst.id, replica)
        return ReplicaSnapshot(r.id, r.config, r.epoch, r.status)

    def replicas(self) -> list[ReplicaSnapshot]:
        return [self.replica(r) for r in self.replica_ids()]

    def replica_collection(self, replica: ReplicaId, id: GlobalId) -> ReplicaCollectionSnapshot:
        r = self._inst.replicas.get(replica)
        if r is None:
            raise ReplicaMissing(self._inst.id, replica)
        rc = r.collections.get(id)
        if rc is None:
            raise CollectionMissing(id)
        return ReplicaCollectionSnapshot(
            rc.as_of,
            rc.write_frontier,
            rc.input_frontier,
            rc.output_frontier,
            tuple(sorted(rc.input_holds.items())),
            rc.hydrated(),
        )

    def pending_peeks(self) -> list[_uuid.UUID]:
        return sorted(self._inst.peeks)

    def active_copy_tos(self) -> list[GlobalId]:
        """Copy-tos whose client still waits for their one answer."""
        return sorted(self._inst.copy_tos)

    def active_subscribes(self) -> list[tuple[GlobalId, Antichain]]:
        """Subscribes whose client stream is open, with the last emitted upper."""
        return sorted((i, s.frontier) for i, s in self._inst.subscribes.items())

    def history_len(self) -> int:
        """The current length of the instance's command history."""
        return len(self._inst.history)

    def history_reduced_count(self) -> int:
        """The history's length right after its last reduction (0 before the first)."""
        return self._inst.history.reduced_count

    def history(self) -> tuple[ComputeCommand, ...]:
        """The commands of the instance's history, as they stand (a new or rehydrated replica gets them reduced)."""
        return tuple(self._inst.history)

    def __repr__(self) -> str:
        return f"InstanceView({self._inst.id!r})"
