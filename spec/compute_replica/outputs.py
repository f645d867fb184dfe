"""What :class:`~tidegate.spec.compute_replica.ComputeReplica` asks of its driver.

Every call into the replica returns a list of these, in order. The driver
sends each :class:`Respond` to the controller (it is already validated by the
replica's :class:`~tidegate.spec.protocol.ReplicaSession`), performs the
storage work (:class:`ReadSource`, :class:`StopReading`, :class:`WriteOutput`,
:class:`WriteCopyTo`, :class:`PeekPersist`) and reports back through the replica's callbacks.
:class:`Reconciled` only informs (reconnect bookkeeping, for logs and tests).
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..frontier import Antichain, Row, Time, Update
from ..ids import GlobalId
from ..protocol.responses import ComputeResponse
from ..protocol.types import RowSetFinishing

__all__ = [
    "PeekPersist",
    "ReadSource",
    "Reconciled",
    "ReplicaOutput",
    "Respond",
    "StopReading",
    "WriteCopyTo",
    "WriteOutput",
]


@dataclass(frozen=True, slots=True)
class Respond:
    """Send ``response`` to the controller (already accepted by the replica's session)."""

    response: ComputeResponse


@dataclass(frozen=True, slots=True)
class ReadSource:
    """(Re)start following storage collection ``collection_id`` from ``as_of``.

    Deliver through :meth:`ComputeReplica.feed_source`: first the snapshot as of
    ``as_of`` (times may be advanced to ``as_of``), then every later change, each
    delivery with the collection's new upper. A ``ReadSource`` for a collection
    already being read replaces that read: start again from the snapshot.
    """

    collection_id: GlobalId
    as_of: Antichain


@dataclass(frozen=True, slots=True)
class StopReading:
    """No dataflow needs ``collection_id`` any more: stop following it."""

    collection_id: GlobalId


@dataclass(frozen=True, slots=True)
class WriteOutput:
    """Compare-and-append ``updates`` to materialized view ``sink_id``'s storage collection.

    The append expects the collection's upper to be ``lower`` and moves it to
    ``upper``. Report the outcome with :meth:`ComputeReplica.write_completed`
    or, if the upper was not ``lower`` (another replica wrote first),
    :meth:`ComputeReplica.write_failed` with the actual upper. At most one write
    per sink is in flight. Only issued after ``AllowWrites(sink_id)``.
    """

    sink_id: GlobalId
    updates: tuple[Update, ...]
    lower: Antichain
    upper: Antichain


@dataclass(frozen=True, slots=True)
class WriteCopyTo:
    """Write copy-to ``sink_id``'s contents at its as_of, once, as Parquet under blob URL ``url``.

    ``rows`` are the collection's ``(row, count)`` pairs at ``as_of`` (counts
    positive; a row is written ``count`` times), typed by ``schema`` (a plan
    :class:`~tidegate.spec.plan.Schema`). Report the outcome with
    :meth:`ComputeReplica.copy_to_completed` (rows written) or
    :meth:`ComputeReplica.copy_to_failed` (why not); the replica answers the
    controller with its one ``CopyToResponse``. An outcome for a copy-to
    dropped meanwhile is ignored.
    """

    sink_id: GlobalId
    url: str
    as_of: Time
    schema: Any
    rows: tuple[tuple[Row, int], ...]


@dataclass(frozen=True, slots=True)
class PeekPersist:
    """Read storage collection ``collection_id`` as of ``timestamp`` (once its upper passes it).

    Report the contents with :meth:`ComputeReplica.complete_persist_peek`; the
    replica applies ``finishing`` and the result-size limit.
    """

    uuid: _uuid.UUID
    collection_id: GlobalId
    timestamp: Time
    finishing: RowSetFinishing


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A reconnect's reconciliation is done (docs/reference/compute.md §6.2).

    ``reused``: dataflows kept running (by export ids), ``rebuilt``: new
    dataflows installed from their new as_of, ``dropped``: old dataflows removed.
    """

    reused: tuple[tuple[GlobalId, ...], ...]
    rebuilt: tuple[tuple[GlobalId, ...], ...]
    dropped: tuple[tuple[GlobalId, ...], ...]


ReplicaOutput: TypeAlias = (
    Respond | ReadSource | StopReading | WriteOutput | WriteCopyTo | PeekPersist | Reconciled
)
