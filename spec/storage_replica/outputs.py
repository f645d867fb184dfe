"""What :class:`~tidegate.spec.storage_replica.StorageReplica` asks of its driver.

The driver drains these after every call, in order, and carries each out:
:class:`Reply` goes to the controller (already accepted by the replica's
session); the others are IO, whose outcomes come back through the replica's
callbacks. Every ``id`` is the ingestion's or sink's ``GlobalId``, except
:class:`WriteShard`'s, which names the collection (shard) written: an
ingestion's data collection (its own id) or its remap collection.

A new :class:`StartSource`, :class:`ReadRemap` or :class:`ReadSinkInput` for
an id replaces the previous one: from then on the driver delivers nothing
from the previous reader (it tells them apart by identity, as the compute
replica's driver does with ``ReadSource``). After :class:`StopSource`,
:class:`StopSinkInput` or :class:`CloseSink` it delivers nothing more for the
id; outcomes of a write or commit already under way may still be reported
(the replica ignores those of objects it tore down).

The driver reports only definite outcomes: a shard write or sink commit whose
outcome it cannot tell is resolved by reading the shard's upper or the sink
target's covered upper (it landed iff that is the write's upper) before
reporting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..frontier import Antichain, Update
from ..ids import GlobalId
from ..plan.schema import Schema
from ..storage.commands import StorageResponse
from ..storage.connections import SourceConnection, StorageSinkConnection

__all__ = [
    "AckSource",
    "CloseSink",
    "CommitSink",
    "OpenSink",
    "ReadRemap",
    "ReadSinkInput",
    "Reply",
    "StartSource",
    "StopSinkInput",
    "StopSource",
    "StorageReplicaOutput",
    "WriteShard",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """Send ``response`` to the controller (the replica's session has accepted it)."""

    response: StorageResponse


# -- ingestions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartSource:
    """(Re)start reading upstream ``connection`` for ingestion ``id`` at ``resume_offset``.

    Deliver :class:`~tidegate.spec.storage.SourceBatch` es through
    ``feed_source``: updates at offsets ``>= resume_offset`` (the reader may
    omit those below the offset it was last acknowledged at: they are
    durable), each batch with the reader's new offset upper. Report
    ``source_started`` once connected and ``source_failed`` on an error (the
    replica says when to try again, with another ``StartSource``).
    ``schema`` types the rows; a reader whose upstream has another shape fails.
    """

    id: GlobalId
    connection: SourceConnection
    schema: Schema
    resume_offset: int


@dataclass(frozen=True, slots=True)
class StopSource:
    """Stop ingestion ``id``'s upstream reader."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class AckSource:
    """Upstream may forget ingestion ``id``'s updates below ``offset``: they are durable in its data shard."""

    id: GlobalId
    offset: int


@dataclass(frozen=True, slots=True)
class ReadRemap:
    """Load the state ingestion ``id`` resumes from.

    Read the current upper ``D`` of shard ``data_id``; then read shard
    ``remap_id`` as of ``max(D - 1, 0)``: its snapshot there (times advanced
    to the as_of) and every update after it, up to its current upper ``R``
    (if ``R`` is not beyond the as_of -- a fresh ingestion -- no updates).
    Report ``remap_loaded(id, D, updates, R)``, or ``remap_failed`` if the
    shards cannot be read. The controller holds the remap collection at
    ``step_back`` of the data upper, so the read is never below its since.
    """

    id: GlobalId
    data_id: GlobalId
    remap_id: GlobalId


@dataclass(frozen=True, slots=True)
class WriteShard:
    """Compare-and-append ``updates`` to shard ``id``: expect upper ``expected_upper``, advance to ``new_upper``.

    ``id`` is an ingestion's remap or data collection. At most one write per
    ingestion is in flight. Report ``write_completed(id, new_upper)``, or
    ``write_failed(id, actual_upper)`` if the shard's upper was not
    ``expected_upper`` (another incarnation wrote). Only issued after
    ``AllowWrites``. ``updates`` may be empty (the write only advances the upper).
    """

    id: GlobalId
    updates: tuple[Update, ...]
    expected_upper: Antichain
    new_upper: Antichain


# -- sinks ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenSink:
    """Open sink ``id``'s target ``connection`` (rows typed by ``schema``; creating it if needed).

    Report ``sink_opened(id, covered_upper)`` with the upper the target
    already covers for this sink (``None``: nothing committed yet), or
    ``sink_failed``. Opening writes no data.
    """

    id: GlobalId
    connection: StorageSinkConnection
    schema: Schema


@dataclass(frozen=True, slots=True)
class ReadSinkInput:
    """Follow collection ``from_id`` for sink ``id`` from ``as_of``.

    Deliver through ``feed_sink_input``: first the snapshot as of ``as_of``
    (times advanced to ``as_of``), then every later change, each delivery
    with the collection's new upper (an ``int``), as the compute replica's
    ``ReadSource`` does.
    """

    id: GlobalId
    from_id: GlobalId
    as_of: int


@dataclass(frozen=True, slots=True)
class StopSinkInput:
    """Stop following sink ``id``'s input."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class CommitSink:
    """Commit ``updates`` (times in ``[lower, upper)``) to sink ``id``'s target, covering it up to ``upper``.

    Exactly once: commit only if the target covers ``expected_covered`` for
    this sink (``None``: it has no commit of this sink yet), which is then
    ``lower``. Report ``sink_committed(id, upper)``;
    ``sink_conflict(id, covered_upper)`` if the target covers something
    else (another incarnation committed); ``sink_failed`` if nothing was
    committed for another reason. At most one commit per sink is in flight;
    only issued after ``AllowWrites``. ``updates`` may be empty (the commit
    only moves the covered upper).
    """

    id: GlobalId
    updates: tuple[Update, ...]
    expected_covered: int | None
    lower: int
    upper: int


@dataclass(frozen=True, slots=True)
class CloseSink:
    """Close sink ``id``'s target (release its connections)."""

    id: GlobalId


StorageReplicaOutput: TypeAlias = (
    Reply
    | StartSource
    | StopSource
    | AckSource
    | ReadRemap
    | WriteShard
    | OpenSink
    | ReadSinkInput
    | StopSinkInput
    | CommitSink
    | CloseSink
)
