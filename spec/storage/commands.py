"""The storage controller <-> storage instance protocol (reference section 2.12, newest shape).

Commands go to the one replica of a storage instance; responses come back
from it. A protocol iteration (one connection) starts with
:class:`StorageHello`; its stages and rules are in :mod:`.stages`,
:mod:`.ledger` and :mod:`.sessions`. Only ingestions and sinks run on
instances: tables and other controller-managed collections have none.

Responses: :class:`StorageFrontierUpper` (an ingestion's data or remap upper,
or a sink's covered upper), :class:`DroppedId` (after the object was compacted
to ``[]``), :class:`StatusUpdate` (the object's health, Materialize's
``StatusUpdate``) and :class:`StatisticsUpdate` (counters the controller
merges, Materialize's ``StatisticsUpdates``).
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from ..frontier import Antichain
from ..ids import GlobalId
from .descriptions import CollectionDescription, ExportDescription, StorageParameters

__all__ = [
    "DroppedId",
    "RunIngestion",
    "RunSink",
    "SinkStatistics",
    "SourceStatistics",
    "SourceStatus",
    "StatisticsUpdate",
    "StatusUpdate",
    "StorageAllowCompaction",
    "StorageAllowWrites",
    "StorageCommand",
    "StorageFrontierUpper",
    "StorageHello",
    "StorageInitializationComplete",
    "StorageResponse",
    "StorageUpdateConfiguration",
]


# -- commands ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StorageHello:
    """The first command of every protocol iteration; a Hello in any stage starts a new one.

    ``epoch``: the controller's writer epoch, as in the compute protocol's ``Hello`` (a
    replica refuses an iteration from an epoch below the highest it has served).
    """

    nonce: _uuid.UUID
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class StorageInitializationComplete:
    """The controller has sent everything it knew at startup (the replica reconciles now)."""


@dataclass(frozen=True, slots=True)
class StorageAllowWrites:
    """The replica may write its output shards and sinks (until now it ran read-only).

    Before it, ingestions read upstream and sinks read their input, but
    nothing is written: a new version warms up beside the old one. Global for
    the instance, sent at most once per iteration.
    """


@dataclass(frozen=True, slots=True)
class StorageUpdateConfiguration:
    """New (merged) storage parameters."""

    params: StorageParameters


@dataclass(frozen=True, slots=True)
class RunIngestion:
    """Run the ingestion of collection ``id``, resuming from ``resume_upper``.

    ``description.data_source`` is an :class:`~.descriptions.Ingestion`: its
    connection, output schema and remap collection. ``resume_upper`` is the
    controller's resumption frontier (:func:`~.resumption.resumption_frontier`);
    the replica resumes from the shards' actual uppers, which are never behind it.
    """

    id: GlobalId
    description: CollectionDescription
    resume_upper: Antichain


@dataclass(frozen=True, slots=True)
class RunSink:
    """Run sink ``id`` from ``as_of`` (``strict``: the as_of was advanced to the held since).

    For a sink the iteration already runs it is an alter (the controller's
    ``alter_export``): the replica replaces the running sink with this one.
    """

    id: GlobalId
    description: ExportDescription
    as_of: Antichain
    strict: bool


@dataclass(frozen=True, slots=True)
class StorageAllowCompaction:
    """The instance may compact ``id`` up to ``frontier``; ``[]`` tears the object down."""

    id: GlobalId
    frontier: Antichain


StorageCommand: TypeAlias = (
    StorageHello
    | StorageInitializationComplete
    | StorageAllowWrites
    | StorageUpdateConfiguration
    | RunIngestion
    | RunSink
    | StorageAllowCompaction
)


# -- responses --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StorageFrontierUpper:
    """The write frontier of ``id`` advanced to ``upper``.

    ``id`` is an ingestion (its data shard), an ingestion's remap collection,
    or a sink (the upper its target covers).
    """

    id: GlobalId
    upper: Antichain


@dataclass(frozen=True, slots=True)
class DroppedId:
    """The instance has torn down ``id`` (after ``StorageAllowCompaction(id, [])``)."""

    id: GlobalId


class SourceStatus(StrEnum):
    """The health of a source or sink (Materialize's ``Status``; used for sinks too).

    ``starting``: run but not yet working; ``running``: working; ``paused``:
    not scheduled anywhere; ``stalled``: failing, retried (the update carries
    the error); ``ceased``: failed for good; ``dropped``: torn down.
    """

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STALLED = "stalled"
    CEASED = "ceased"
    DROPPED = "dropped"


_FAILS_READS = frozenset({SourceStatus.STALLED, SourceStatus.CEASED})
"""The statuses that carry an error: a read waiting on the source fails with it."""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """Object ``id`` is now in ``status``; ``error`` says why it is stalled or ceased, ``hint`` what to do."""

    id: GlobalId
    status: SourceStatus
    error: str | None = None
    hint: str | None = None

    @property
    def fails_reads(self) -> bool:
        """Whether a read that needs this source's data beyond what it has ingested fails now
        rather than waits: the status reports an error (``stalled``, ``ceased``).

        Materialize answers such a read with the source's error instead of leaving it waiting
        for data that is not coming; a source that is merely slow (``starting``, ``running``)
        is waited for, as a strict-serializable read waits for its inputs' frontiers.
        """
        return self.status in _FAILS_READS


@dataclass(frozen=True, slots=True)
class SourceStatistics:
    """A source's statistics (Materialize's ``SourceStatisticsUpdate``), plain ints.

    Counters (``messages_received``, ``bytes_received``, ``updates_staged``,
    ``updates_committed``) are increments since the replica's previous
    update and are summed by :meth:`merged`; gauges (the others) are current
    values, ``None`` when the update does not say, and replace the old value.
    """

    messages_received: int = 0
    bytes_received: int = 0
    updates_staged: int = 0
    updates_committed: int = 0
    snapshot_records_known: int | None = None
    snapshot_records_staged: int | None = None
    offset_known: int | None = None
    offset_committed: int | None = None
    rehydration_latency_ms: int | None = None

    def merged(self, update: SourceStatistics) -> SourceStatistics:
        """``self`` with ``update`` folded in: counters added, gauges replaced where ``update`` has them."""
        return SourceStatistics(
            self.messages_received + update.messages_received,
            self.bytes_received + update.bytes_received,
            self.updates_staged + update.updates_staged,
            self.updates_committed + update.updates_committed,
            _gauge(self.snapshot_records_known, update.snapshot_records_known),
            _gauge(self.snapshot_records_staged, update.snapshot_records_staged),
            _gauge(self.offset_known, update.offset_known),
            _gauge(self.offset_committed, update.offset_committed),
            _gauge(self.rehydration_latency_ms, update.rehydration_latency_ms),
        )


@dataclass(frozen=True, slots=True)
class SinkStatistics:
    """A sink's statistics (Materialize's ``SinkStatisticsUpdate``): counters only, summed by :meth:`merged`."""

    updates_staged: int = 0
    updates_committed: int = 0
    bytes_staged: int = 0
    bytes_committed: int = 0

    def merged(self, update: SinkStatistics) -> SinkStatistics:
        return SinkStatistics(
            self.updates_staged + update.updates_staged,
            self.updates_committed + update.updates_committed,
            self.bytes_staged + update.bytes_staged,
            self.bytes_committed + update.bytes_committed,
        )


def _gauge(old: int | None, new: int | None) -> int | None:
    return old if new is None else new


@dataclass(frozen=True, slots=True)
class StatisticsUpdate:
    """New statistics of ingestion or sink ``id`` (source statistics for an ingestion, sink ones for a sink)."""

    id: GlobalId
    statistics: SourceStatistics | SinkStatistics


StorageResponse: TypeAlias = StorageFrontierUpper | DroppedId | StatusUpdate | StatisticsUpdate
