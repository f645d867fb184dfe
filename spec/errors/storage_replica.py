"""Errors of the storage replica core and of reclocking (:mod:`tidegate.spec.storage_replica`, :mod:`tidegate.spec.storage.reclock`).

Protocol violations by the controller surface as the session's own
:class:`~tidegate.spec.errors.StorageProtocolError`; these cover the rest:
driver callbacks that name nothing the replica asked for or that cannot be
right (a source batch whose upper goes back, a write completion with no write
in flight) -- bugs of the driver, never asserts -- and remap contents that are
not a valid sequence of bindings. Every error is a :class:`StorageReplicaError`
whose ``rule`` names the broken rule; each is raised *before* any state changes.
"""

from __future__ import annotations

from typing import ClassVar

from .base import TidegateError

__all__ = [
    "InvalidBindings",
    "ShardWriteNotInFlight",
    "SinkCommitNotInFlight",
    "SinkInputRejected",
    "SourceBatchRejected",
    "StorageCommandRejected",
    "StorageReplicaError",
    "UnknownIngestion",
    "UnknownStorageSink",
    "UnrequestedStorageCallback",
]


class StorageReplicaError(TidegateError, ValueError):
    """Base class: something the storage replica core (or reclocking) cannot accept. ``rule`` names the rule."""

    rule: ClassVar[str] = "storage-replica"

    def __str__(self) -> str:
        return f"[{self.rule}] {super().__str__()}"


class StorageCommandRejected(StorageReplicaError):
    """A protocol-legal command the replica cannot take: frontiers that are not of ``int`` times."""

    rule = "storage-int-times"


class UnknownIngestion(StorageReplicaError):
    """A source, remap or shard callback for an ingestion (or shard) the replica does not run."""

    rule = "ingestion-known"


class UnknownStorageSink(StorageReplicaError):
    """A sink callback for a sink the replica does not run."""

    rule = "storage-sink-known"


class UnrequestedStorageCallback(StorageReplicaError):
    """A callback nothing asked for: a remap load, source start or sink open that is not pending."""

    rule = "callback-requested"


class SourceBatchRejected(StorageReplicaError):
    """A source batch that cannot be right: its upper goes back, or an update's offset is
    negative, not below the batch's upper, or below what the reader delivered before."""

    rule = "source-batch-monotone"


class SinkInputRejected(StorageReplicaError):
    """Sink input that cannot be right: its upper goes back, or an update's time is not in
    ``[as_of, upper)`` (times before the read's as_of come advanced to it)."""

    rule = "sink-input-monotone"


class ShardWriteNotInFlight(StorageReplicaError):
    """A shard write outcome with no write of that shard in flight, with another upper than
    requested, or a "mismatch" that reports the expected upper itself."""

    rule = "shard-write-in-flight"


class SinkCommitNotInFlight(StorageReplicaError):
    """A sink commit outcome with no commit in flight, with another upper than requested,
    or a conflict that reports the expected covered upper itself."""

    rule = "sink-commit-in-flight"


class InvalidBindings(StorageReplicaError):
    """Remap contents that are not bindings: at some time not exactly one row ``(offset,)``
    with count 1, an offset going back, a time outside the read, or a data shard ahead of
    its remap shard."""

    rule = "remap-well-formed"
