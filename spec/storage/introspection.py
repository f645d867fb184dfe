"""Storage-managed collections: the status history and the statistics of sources and sinks (reference section 2.14).

They are collections like any other, created with ``create_collections``
and an :class:`~.descriptions.Introspection` data source whose ``kind`` is
one of :data:`MANAGED_KINDS`; that is how the controller learns which ids
they are. The controller writes them (through
:class:`~.effects.ManagedWrite`, which the driver folds into its group
commits, so each row gets a commit's timestamp):

* ``source_status_history`` / ``sink_status_history`` are **append-only**: one
  row per status change, ``(occurred_at, id, status, error, hint)``; the time
  of the row is the time of the change, and ``occurred_at`` is that time as a
  ``TIMESTAMP`` (UTC), as Materialize's column: the controller emits
  :func:`status_row` (without it) and the driver puts the commit's time before
  it (a ``stamped`` :class:`~.effects.ManagedWrite`), so compaction, which
  advances a row's time, never moves it;
* ``source_statistics`` / ``sink_statistics`` are **differential**: at every
  time they hold one row per live object, its merged statistics; a change
  retracts the old row and inserts the new one. On registration (and when a
  read-only controller starts writing) the collection is truncated and
  rewritten from the controller's state, so rows a previous controller left
  do not linger.

In read-only mode nothing is written; statistics are kept and written when
writes are allowed, and the latest status of each live object is recorded then.
"""

from __future__ import annotations

from typing import Final

from ..errors import InvalidUsage
from ..frontier import Row
from ..ids import GlobalId
from ..plan.schema import Schema
from .commands import SinkStatistics, SourceStatistics, StatusUpdate

__all__ = [
    "MANAGED_KINDS",
    "SINK_STATISTICS_SCHEMA",
    "SOURCE_STATISTICS_SCHEMA",
    "STATUS_HISTORY_SCHEMA",
    "managed_schema",
    "statistics_row",
    "status_row",
]

SOURCE_STATUS_HISTORY: Final = "source_status_history"
SINK_STATUS_HISTORY: Final = "sink_status_history"
SOURCE_STATISTICS: Final = "source_statistics"
SINK_STATISTICS: Final = "sink_statistics"

MANAGED_KINDS: Final = frozenset(
    {SOURCE_STATUS_HISTORY, SINK_STATUS_HISTORY, SOURCE_STATISTICS, SINK_STATISTICS}
)
"""The :class:`~.descriptions.Introspection` kinds whose collections the storage controller writes."""

STATUS_HISTORY_SCHEMA = Schema.of(
    ("occurred_at", "timestamp", False),
    ("id", "string", False),
    ("status", "string", False),
    ("error", "string"),
    ("hint", "string"),
)
SOURCE_STATISTICS_SCHEMA = Schema.of(
    ("id", "string", False),
    ("messages_received", "int64", False),
    ("bytes_received", "int64", False),
    ("updates_staged", "int64", False),
    ("updates_committed", "int64", False),
    ("snapshot_records_known", "int64"),
    ("snapshot_records_staged", "int64"),
    ("offset_known", "int64"),
    ("offset_committed", "int64"),
    ("rehydration_latency_ms", "int64"),
)
SINK_STATISTICS_SCHEMA = Schema.of(
    ("id", "string", False),
    ("updates_staged", "int64", False),
    ("updates_committed", "int64", False),
    ("bytes_staged", "int64", False),
    ("bytes_committed", "int64", False),
)


def managed_schema(kind: str) -> Schema:
    """The row schema of a managed collection of ``kind`` (one of :data:`MANAGED_KINDS`)."""
    if kind in (SOURCE_STATUS_HISTORY, SINK_STATUS_HISTORY):
        return STATUS_HISTORY_SCHEMA
    if kind == SOURCE_STATISTICS:
        return SOURCE_STATISTICS_SCHEMA
    if kind == SINK_STATISTICS:
        return SINK_STATISTICS_SCHEMA
    raise InvalidUsage(f"not a managed collection kind: {kind!r}")


def status_row(update: StatusUpdate) -> Row:
    """The status-history row of ``update`` without its ``occurred_at``, which the driver puts
    first: the time of the write that records it."""
    return (str(update.id), update.status.value, update.error, update.hint)


def statistics_row(id: GlobalId, stats: SourceStatistics | SinkStatistics) -> Row:
    """The statistics row of object ``id``."""
    if isinstance(stats, SourceStatistics):
        return (
            str(id),
            stats.messages_received,
            stats.bytes_received,
            stats.updates_staged,
            stats.updates_committed,
            stats.snapshot_records_known,
            stats.snapshot_records_staged,
            stats.offset_known,
            stats.offset_committed,
            stats.rehydration_latency_ms,
        )
    return (
        str(id),
        stats.updates_staged,
        stats.updates_committed,
        stats.bytes_staged,
        stats.bytes_committed,
    )
