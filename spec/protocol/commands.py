"""Compute commands: what a controller sends to a replica (docs/reference/compute.md section 3)."""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import TypeAlias

from ..frontier import Antichain
from ..ids import GlobalId
from .types import ComputeParameters, DataflowDescription, InstanceConfig, PeekDescription

__all__ = [
    "AllowCompaction",
    "AllowWrites",
    "CancelPeek",
    "ComputeCommand",
    "CreateDataflow",
    "CreateInstance",
    "Hello",
    "InitializationComplete",
    "Peek",
    "Schedule",
    "UpdateConfiguration",
]


@dataclass(frozen=True, slots=True)
class Hello:
    """Opens a protocol iteration; always the first command on a connection.

    ``epoch`` is the controller's writer epoch (the durable timestamp oracle's
    incarnation; ``0`` without one): a replica refuses an iteration from an
    epoch below the highest it has served (:class:`~tidegate.spec.errors.DeposedController`),
    so a controller that a newer one took over from cannot take its replicas back.
    """

    nonce: _uuid.UUID
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class CreateInstance:
    """The second command: configures the replica's instance state and log indexes."""

    config: InstanceConfig


@dataclass(frozen=True, slots=True)
class InitializationComplete:
    """Ends the initialization stage; the replica reconciles and starts answering."""


@dataclass(frozen=True, slots=True)
class AllowWrites:
    """Collection ``id`` may now write to storage (read-write mode, never left)."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class UpdateConfiguration:
    """New parameters, applied to all existing state."""

    params: ComputeParameters


@dataclass(frozen=True, slots=True)
class CreateDataflow:
    """Build a dataflow (suspended until every export is scheduled)."""

    dataflow: DataflowDescription


@dataclass(frozen=True, slots=True)
class Schedule:
    """Allow collection ``id``'s dataflow to run."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class AllowCompaction:
    """Readers no longer need times before ``frontier``; ``[]`` drops the collection."""

    id: GlobalId
    frontier: Antichain


@dataclass(frozen=True, slots=True)
class Peek:
    """Read a collection at one timestamp (see :class:`PeekDescription`)."""

    peek: PeekDescription

    @property
    def uuid(self) -> _uuid.UUID:
        return self.peek.uuid


@dataclass(frozen=True, slots=True)
class CancelPeek:
    """Stop work on a pending peek; ignored by the replica if it already answered."""

    uuid: _uuid.UUID


ComputeCommand: TypeAlias = (
    Hello
    | CreateInstance
    | InitializationComplete
    | AllowWrites
    | UpdateConfiguration
    | CreateDataflow
    | Schedule
    | AllowCompaction
    | Peek
    | CancelPeek
)
