"""What the storage service's IO work reports to its loop: one event per outcome.

Every event names the work that produced it, so the loop can drop what a
replaced reader, remap read or sink target still delivers (the core's
outputs say a new ``StartSource``/``ReadRemap``/``ReadSinkInput``/``OpenSink``
for an id replaces the previous one). Write and commit outcomes are always
delivered: the core ignores those of objects it tore down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage.connections import SourceBatch

__all__ = [
    "IOEvent",
    "RemapFailed",
    "RemapLoaded",
    "SinkClosed",
    "SinkCommitted",
    "SinkConflicted",
    "SinkFailed",
    "SinkInput",
    "SinkOpened",
    "SourceBatchArrived",
    "SourceFailed",
    "SourceStarted",
    "WriteDone",
]


@dataclass(eq=False)
class SourceStarted:
    """The reader of ingestion ``id`` connected upstream."""

    work: Any
    id: GlobalId


@dataclass(eq=False)
class SourceBatchArrived:
    """The reader of ingestion ``id`` delivered ``batch``."""

    work: Any
    id: GlobalId
    batch: SourceBatch


@dataclass(eq=False)
class SourceFailed:
    """The reader of ingestion ``id`` failed (it has stopped); ``error`` names the error class;
    ``retryable``: whether a new reader may get past it (see ``SourceError.retryable``)."""

    work: Any
    id: GlobalId
    error: str
    retryable: bool = True


@dataclass(eq=False)
class RemapLoaded:
    """A ``ReadRemap`` of ingestion ``id`` read the data upper and the remap collection."""

    work: Any
    id: GlobalId
    data_upper: Antichain
    updates: list[Update]
    remap_upper: Antichain


@dataclass(eq=False)
class RemapFailed:
    """A ``ReadRemap`` of ingestion ``id`` could not read the shards."""

    work: Any
    id: GlobalId
    error: str


@dataclass(eq=False)
class WriteDone:
    """A ``WriteShard`` to shard ``shard`` landed (``ok``: its upper is ``upper``) or found ``upper``."""

    work: Any
    shard: GlobalId
    ok: bool
    upper: Antichain


@dataclass(eq=False)
class SinkOpened:
    """Sink ``id``'s target is open and covers ``covered`` for it."""

    work: Any
    id: GlobalId
    covered: int | None


@dataclass(eq=False)
class SinkInput:
    """Input updates of sink ``id`` and the input's new upper."""

    work: Any
    id: GlobalId
    updates: list[Update]
    upper: Antichain


@dataclass(eq=False)
class SinkCommitted:
    """The commit of sink ``id`` landed: the target covers ``upper``."""

    work: Any
    id: GlobalId
    upper: int
    updates: int


@dataclass(eq=False)
class SinkConflicted:
    """The commit of sink ``id`` was refused: the target covers ``covered`` (another incarnation)."""

    work: Any
    id: GlobalId
    covered: int | None


@dataclass(eq=False)
class SinkFailed:
    """Sink ``id``'s open (``during="open"``) or commit failed and nothing was committed."""

    work: Any
    id: GlobalId
    error: str
    during: str


@dataclass(eq=False)
class SinkClosed:
    """A sink target has closed (its last operation's outcome was posted before)."""

    work: Any


IOEvent = (
    SourceStarted
    | SourceBatchArrived
    | SourceFailed
    | RemapLoaded
    | RemapFailed
    | WriteDone
    | SinkOpened
    | SinkInput
    | SinkCommitted
    | SinkConflicted
    | SinkFailed
    | SinkClosed
)
"""Every event the storage service's IO work posts."""
