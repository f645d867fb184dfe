"""What the storage controller asks its driver to do, as data.

Every public call of :class:`~tidegate.spec.storage.StorageController` records
these in its outbox. The driver (``sim`` or ``runtime``) executes the shard-store
requests and reports their outcomes back (``complete_write``,
``complete_snapshot``), sends commands to instances (and severs replaced
replicas), folds managed-collection writes into its group commits, and hands
the notifications to clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..errors import InvalidUppers
from ..frontier import Antichain, Row, Time, Update
from ..ids import GlobalId, InstanceId, ReplicaId
from .commands import StorageCommand

__all__ = [
    "AppendCompleted",
    "CollectionDropped",
    "DisconnectStorageReplica",
    "DowngradeShardSince",
    "DropShard",
    "ManagedWrite",
    "ReadSnapshot",
    "RegisterShard",
    "SendStorageCommand",
    "SinceChanged",
    "StorageEffect",
    "UpperChanged",
    "WriteToShard",
]


@dataclass(frozen=True, slots=True)
class SendStorageCommand:
    """Send ``command`` to ``replica`` of storage ``instance``."""

    instance: InstanceId
    replica: ReplicaId
    command: StorageCommand


@dataclass(frozen=True, slots=True)
class DisconnectStorageReplica:
    """Sever ``replica`` from storage ``instance``: another replica replaced it (one per instance).

    Close the connection and stop the process if the driver owns it; nothing
    it sends afterwards may reach the controller. Its writes can still land
    (a zombie): they are compare-and-appends, which the new replica's
    identical writes make harmless.
    """

    instance: InstanceId
    replica: ReplicaId


@dataclass(frozen=True, slots=True)
class ManagedWrite:
    """Append ``updates`` (``(row, diff)`` pairs, no time) to storage-managed collection ``collection_id``.

    The driver folds them into its next group commit: they get the commit's
    timestamp, like the tables written in it. ``truncate`` asks to first
    retract everything the collection holds (its contents at ``upper - 1``)
    in the same commit: a differential collection (statistics) starts over
    from the controller's desired state. Effects for one collection are
    applied in the order emitted. ``stamped`` asks the driver to put the
    commit's timestamp, as a ``TIMESTAMP`` (UTC), before each row's columns: a
    status history's ``occurred_at``, which only the driver knows (the rows of
    one commit a microsecond apart, in order, so it orders them as they happened).
    """

    collection_id: GlobalId
    updates: tuple[tuple[Row, int], ...]
    truncate: bool = False
    stamped: bool = False


@dataclass(frozen=True, slots=True)
class RegisterShard:
    """Open (creating if needed) the shard of collection ``id``; it is claimed by a live collection."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class DowngradeShardSince:
    """Advance the shard's since of ``id`` to ``frontier`` (it may lag the controller's since)."""

    id: GlobalId
    frontier: Antichain


@dataclass(frozen=True, slots=True)
class WriteToShard:
    """Compare-and-append ``updates`` to shard ``id``: expect ``expected_upper``, then advance to ``new_upper``.

    The driver reports the outcome with
    ``StorageController.complete_write(ticket, id, current_upper)``.
    """

    ticket: int
    id: GlobalId
    updates: tuple[Update, ...]
    expected_upper: Antichain
    new_upper: Antichain


@dataclass(frozen=True, slots=True)
class ReadSnapshot:
    """Read shard ``id`` as of ``as_of``; the controller holds ``as_of`` until ``complete_snapshot(request)``."""

    request: int
    id: GlobalId
    as_of: Time


@dataclass(frozen=True, slots=True)
class DropShard:
    """Finalize and delete shard ``id``: no live collection claims it any more."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class AppendCompleted:
    """The append with ``ticket`` finished: ``error`` is ``None`` on success."""

    ticket: int
    error: InvalidUppers | None


@dataclass(frozen=True, slots=True)
class UpperChanged:
    """Collection or export ``id``'s write frontier advanced to ``upper``."""

    id: GlobalId
    upper: Antichain


@dataclass(frozen=True, slots=True)
class SinceChanged:
    """Collection or export ``id``'s read frontier advanced to ``since`` (``[]``: fully released)."""

    id: GlobalId
    since: Antichain


@dataclass(frozen=True, slots=True)
class CollectionDropped:
    """Collection or export ``id`` is gone: no hold is left on it and its state was removed."""

    id: GlobalId


StorageEffect: TypeAlias = (
    SendStorageCommand
    | DisconnectStorageReplica
    | ManagedWrite
    | RegisterShard
    | DowngradeShardSince
    | WriteToShard
    | ReadSnapshot
    | DropShard
    | AppendCompleted
    | UpperChanged
    | SinceChanged
    | CollectionDropped
)
