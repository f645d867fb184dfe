"""What :meth:`ReplicaSession.on_command` tells a replica to do, and what it now owes.

Each effect is a frozen dataclass. A replica implementation performs them in
order; the ones that create obligations say so (``owed_*`` fields, or the
docstring), and :class:`~tidegate.spec.protocol.ReplicaSession` checks that the
replica's responses discharge them.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import TypeAlias

from ..frontier import Antichain
from ..ids import GlobalId
from .stages import CollectionKind, FrontierKind
from .types import ComputeParameters, DataflowDescription, InstanceConfig, PeekDescription

__all__ = [
    "BeginComputation",
    "BuildDataflow",
    "CancelPendingPeek",
    "CompactCollection",
    "DropCollection",
    "EnableWrites",
    "InitializeInstance",
    "ReleaseDataflow",
    "ReplicaEffect",
    "RunDataflow",
    "ScheduleExport",
    "ServePeek",
    "SetConfiguration",
    "StartIteration",
]


@dataclass(frozen=True, slots=True)
class StartIteration:
    """A new ``Hello``: a new controller connected.

    The peeks in ``abandoned_peeks`` belonged to the old iteration: drop them
    *without answering*. Reported-frontier bookkeeping restarts from scratch;
    reconciling the old dataflows with the new commands is the replica's business.
    """

    nonce: _uuid.UUID
    abandoned_peeks: tuple[_uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class InitializeInstance:
    """``CreateInstance``: configure the instance and build the log indexes (as_of ``[0]``, never scheduled)."""

    config: InstanceConfig
    log_indexes: tuple[GlobalId, ...] = ()


@dataclass(frozen=True, slots=True)
class BeginComputation:
    """``InitializationComplete``: start answering, including everything owed for earlier commands."""


@dataclass(frozen=True, slots=True)
class SetConfiguration:
    """``UpdateConfiguration``: ``effective`` is every update so far, merged; apply it to all state."""

    update: ComputeParameters
    effective: ComputeParameters


@dataclass(frozen=True, slots=True)
class BuildDataflow:
    """``CreateDataflow``: build it suspended (it runs after :class:`RunDataflow`).

    Every export now owes frontier reports (indexes, materialized views), a
    batch stream (subscribes) starting from the dataflow's as_of, or exactly one
    ``CopyToResponse`` (copy-tos: the contents at the as_of written once).
    """

    dataflow: DataflowDescription


@dataclass(frozen=True, slots=True)
class ScheduleExport:
    """``Schedule``: export ``id`` may run (its dataflow waits until every export is scheduled)."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class RunDataflow:
    """Every export of this dataflow is scheduled (and none dropped first): start computing."""

    export_ids: tuple[GlobalId, ...]


@dataclass(frozen=True, slots=True)
class EnableWrites:
    """``AllowWrites``: collection ``id`` may write to storage from now on (never revoked)."""

    id: GlobalId


@dataclass(frozen=True, slots=True)
class CompactCollection:
    """``AllowCompaction`` to a non-empty frontier: the index may compact to ``frontier``."""

    id: GlobalId
    frontier: Antichain


@dataclass(frozen=True, slots=True)
class DropCollection:
    """``AllowCompaction`` to ``[]``: drop collection ``id``.

    The replica now owes ``Frontiers`` with ``[]`` for each kind in
    ``owed_empty_frontiers``, a ``DroppedAt`` if ``owes_dropped_at`` (a
    subscribe that had not completed), and a ``CopyToDropped`` if
    ``owes_copy_to_dropped`` (a copy-to that had not answered); nothing else for ``id``.
    """

    id: GlobalId
    kind: CollectionKind
    owed_empty_frontiers: tuple[FrontierKind, ...] = ()
    owes_dropped_at: bool = False
    owes_copy_to_dropped: bool = False


@dataclass(frozen=True, slots=True)
class ReleaseDataflow:
    """Every export of this dataflow is dropped: release the dataflow itself."""

    export_ids: tuple[GlobalId, ...]


@dataclass(frozen=True, slots=True)
class ServePeek:
    """``Peek``: exactly one ``PeekResponse`` is now owed for ``peek.uuid`` (once ``upper > timestamp``)."""

    peek: PeekDescription


@dataclass(frozen=True, slots=True)
class CancelPendingPeek:
    """``CancelPeek`` for an unanswered peek: stop work and answer it, normally with ``PeekCanceled``.

    (An answer computed before the cancel arrived may still be sent instead.)
    A ``CancelPeek`` for an answered peek yields no effect at all.
    """

    uuid: _uuid.UUID


ReplicaEffect: TypeAlias = (
    StartIteration
    | InitializeInstance
    | BeginComputation
    | SetConfiguration
    | BuildDataflow
    | ScheduleExport
    | RunDataflow
    | EnableWrites
    | CompactCollection
    | DropCollection
    | ReleaseDataflow
    | ServePeek
    | CancelPendingPeek
)
