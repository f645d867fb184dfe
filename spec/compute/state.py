"""The mutable records a compute instance keeps: collections, replicas, peeks, subscribes.

These are the controller's internal bookkeeping (docs/reference/compute.md section
9.3). Nothing outside :mod:`tidegate.spec.compute` should mutate them; the
read-only :class:`~tidegate.spec.compute.view.InstanceView` exposes frozen
snapshots instead.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..frontier import Antichain, Time
from ..frontier.read_policy import ReadPolicy
from ..ids import GlobalId, ReplicaId
from ..protocol.types import RowSetFinishing
from .capabilities import ReadCapabilities
from .config import ReplicaConfig
from .effects import ReplicaStatus

__all__ = [
    "ActiveCopyTo",
    "ActiveSubscribe",
    "ComputeCollectionKind",
    "ComputeCollectionState",
    "PendingPeek",
    "ReplicaCollectionState",
    "ReplicaState",
]

ComputeCollectionKind: TypeAlias = Literal[
    "log", "index", "materialized_view", "subscribe", "copy_to"
]

_EMPTY = Antichain.empty()


@dataclass(slots=True)
class ComputeCollectionState:
    """Global state of one compute collection on an instance.

    ``read_capabilities`` accumulates every hold: the implied hold (tracks the
    read policy), the warmup hold (tracks what the inputs can serve), and
    external holds (peeks, dependent dataflows, ``acquire_read_hold``). Its
    frontier is the collection's read frontier (since).
    """

    id: GlobalId
    kind: ComputeCollectionKind
    as_of: Antichain
    read_capabilities: ReadCapabilities
    implied: Antichain
    warmup: Antichain
    write_frontier: Antichain
    read_policy: ReadPolicy | None
    storage_dependencies: dict[GlobalId, Antichain] = field(default_factory=dict)
    compute_dependencies: dict[GlobalId, Antichain] = field(default_factory=dict)
    target_replica: ReplicaId | None = None
    scheduled: bool = False
    dropped: bool = False
    read_only: bool = True
    writes_requested: bool = False
    """``allow_writes`` was called: the collection writes once the controller is read-write."""

    @property
    def write_only(self) -> bool:
        """Sinks (materialized views, subscribes, copy-tos) have no read policy and cannot be read."""
        return self.kind in ("materialized_view", "subscribe", "copy_to")

    @property
    def read_frontier(self) -> Antichain:
        return self.read_capabilities.frontier


@dataclass(slots=True)
class ReplicaCollectionState:
    """One replica's progress on one collection, and its holds on the collection's storage inputs."""

    as_of: Antichain
    write_frontier: Antichain
    input_frontier: Antichain
    output_frontier: Antichain
    input_holds: dict[GlobalId, Antichain] = field(default_factory=dict)

    @classmethod
    def starting_at(cls, as_of: Antichain) -> ReplicaCollectionState:
        return cls(as_of, as_of, as_of, as_of)

    def all_empty(self) -> bool:
        return (
            not self.write_frontier.elements
            and not self.input_frontier.elements
            and not self.output_frontier.elements
        )

    def hydrated(self) -> bool:
        """Hydrated once the output frontier is beyond the as_of (or nothing was ever to be computed)."""
        return not self.as_of.elements or (
            self.as_of <= self.output_frontier and self.as_of != self.output_frontier
        )


@dataclass(slots=True)
class ReplicaState:
    """A replica of the instance, on its connection of ``epoch``."""

    id: ReplicaId
    config: ReplicaConfig
    epoch: int
    status: ReplicaStatus
    collections: dict[GlobalId, ReplicaCollectionState] = field(default_factory=dict)


@dataclass(slots=True)
class PendingPeek:
    """A peek that has not been answered: it holds its collection at ``timestamp``."""

    uuid: _uuid.UUID
    id: GlobalId
    timestamp: Time
    finishing: RowSetFinishing
    target_replica: ReplicaId | None
    on_storage: bool


@dataclass(slots=True)
class ActiveSubscribe:
    """A subscribe whose client stream is still open; ``frontier`` is the last emitted upper."""

    frontier: Antichain
    target_replica: ReplicaId | None = None


@dataclass(slots=True)
class ActiveCopyTo:
    """A copy-to whose client has not had its answer: the first replica's answer goes to it."""

    url: str
    target_replica: ReplicaId | None = None


EMPTY_FRONTIER = _EMPTY
