"""What the compute controller asks its driver to do: the effects its calls return.

Every controller call returns a list of these, in the order they must be
carried out. Commands to one replica must be delivered in order; the driver
tags each with the replica's epoch so stale connections can be told apart.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..frontier import Antichain, Row, Time
from ..ids import GlobalId, InstanceId, ReplicaId
from ..protocol.commands import ComputeCommand
from ..protocol.responses import PeekResult
from .config import ReplicaConfig

__all__ = [
    "ConnectReplica",
    "CopyToOut",
    "DisconnectReplica",
    "Effect",
    "FrontierUpper",
    "PeekNotification",
    "PeekResultOut",
    "ReplicaStatus",
    "ReplicaStatusEvent",
    "SendCommand",
    "SubscribeBatchOut",
]

ReplicaStatus: TypeAlias = Literal["connecting", "connected", "failed", "rehydrating", "dropped"]


@dataclass(frozen=True, slots=True)
class SendCommand:
    """Send ``command`` to ``replica`` of ``instance`` on its connection of epoch ``epoch``."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    command: ComputeCommand


@dataclass(frozen=True, slots=True)
class ConnectReplica:
    """Start (or connect to) the replica described by ``config``; its connection is ``epoch``.

    The commands sent for this epoch must be queued until the connection is up.
    """

    instance: InstanceId
    replica: ReplicaId
    config: ReplicaConfig
    epoch: int


@dataclass(frozen=True, slots=True)
class DisconnectReplica:
    """Close the connection of ``epoch`` to ``replica`` (and stop a managed process if ``dropped``)."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    dropped: bool


@dataclass(frozen=True, slots=True)
class PeekResultOut:
    """The one result of peek ``uuid``, for the client that issued it."""

    instance: InstanceId
    uuid: _uuid.UUID
    result: PeekResult


@dataclass(frozen=True, slots=True)
class PeekNotification:
    """A summary of a peek's outcome, for observers (one per peek).

    ``kind`` is ``"success"`` (``rows`` is the number of rows returned, counting
    multiplicities), ``"error"`` (``message`` says why) or ``"canceled"``.
    """

    instance: InstanceId
    uuid: _uuid.UUID
    kind: Literal["success", "error", "canceled"]
    rows: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class SubscribeBatchOut:
    """One batch of subscribe ``id``'s client stream: the updates in ``[lower, upper)``.

    The stream is gap-free: the first ``lower`` is the subscribe's as_of, and
    each ``lower`` is the previous ``upper``. ``error`` replaces the updates
    when the subscribe failed; nothing follows an ``upper`` of ``[]`` or an error
    batch with ``lower == upper``.
    """

    instance: InstanceId
    id: GlobalId
    lower: Antichain
    upper: Antichain
    updates: tuple[tuple[Time, Row, int], ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CopyToOut:
    """The one outcome of copy-to ``id``, for its client: the first replica's answer.

    ``rows`` is the number of rows written (with multiplicity), or ``None``
    when the copy-to failed and ``error`` says why. Later replicas' answers are
    dropped; the controller drops the copy-to's collection right after this.
    """

    instance: InstanceId
    id: GlobalId
    rows: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class FrontierUpper:
    """Collection ``id``'s global write frontier advanced to ``upper``."""

    instance: InstanceId
    id: GlobalId
    upper: Antichain


@dataclass(frozen=True, slots=True)
class ReplicaStatusEvent:
    """A replica changed status (for clients and operators)."""

    instance: InstanceId
    replica: ReplicaId
    status: ReplicaStatus
    epoch: int
    reason: str = ""


Effect: TypeAlias = (
    SendCommand
    | ConnectReplica
    | DisconnectReplica
    | PeekResultOut
    | PeekNotification
    | SubscribeBatchOut
    | CopyToOut
    | FrontierUpper
    | ReplicaStatusEvent
)
