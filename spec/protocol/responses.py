"""Compute responses: what a replica sends back (docs/reference/compute.md section 4)."""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import TypeAlias

from ..frontier import Antichain, Row, Time
from ..ids import GlobalId

__all__ = [
    "ComputeResponse",
    "CopyToDropped",
    "CopyToError",
    "CopyToResponse",
    "CopyToResult",
    "CopyToRowCount",
    "Frontiers",
    "PeekCanceled",
    "PeekError",
    "PeekResponse",
    "PeekResult",
    "PeekRows",
    "Status",
    "SubscribeBatch",
    "SubscribeDroppedAt",
    "SubscribeResponse",
    "SubscribeResult",
]


@dataclass(frozen=True, slots=True)
class Frontiers:
    """New frontiers of collection ``id`` on one replica; ``None`` means "unchanged".

    ``write``: contents final below it. ``input``: inputs no longer read below
    it. ``output``: processing finished below it (hydrated once ``> as_of``).
    """

    id: GlobalId
    write: Antichain | None = None
    input: Antichain | None = None
    output: Antichain | None = None


@dataclass(frozen=True, slots=True)
class PeekRows:
    """A peek's answer: rows with positive multiplicities, after finishing."""

    rows: tuple[tuple[Row, int], ...]


@dataclass(frozen=True, slots=True)
class PeekError:
    """A peek failed (e.g. read below the compaction frontier, result too large)."""

    message: str


@dataclass(frozen=True, slots=True)
class PeekCanceled:
    """The peek was cancelled before it was answered."""


PeekResult: TypeAlias = PeekRows | PeekError | PeekCanceled


@dataclass(frozen=True, slots=True)
class PeekResponse:
    """The one answer a replica owes for a ``Peek``."""

    uuid: _uuid.UUID
    result: PeekResult


@dataclass(frozen=True, slots=True)
class SubscribeBatch:
    """The updates of a subscribe in ``[lower, upper)``, consolidated; or an error (``error`` set).

    Updates are ``(time, row, diff)`` in Materialize's order.
    """

    lower: Antichain
    upper: Antichain
    updates: tuple[tuple[Time, Row, int], ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SubscribeDroppedAt:
    """The subscribe was dropped before completing; ``frontier`` is the last batch's upper."""

    frontier: Antichain


SubscribeResult: TypeAlias = SubscribeBatch | SubscribeDroppedAt


@dataclass(frozen=True, slots=True)
class SubscribeResponse:
    """One message of subscribe ``id``'s stream."""

    id: GlobalId
    result: SubscribeResult


@dataclass(frozen=True, slots=True)
class Status:
    """Informational status about collection ``id``; no effect on any lifecycle."""

    id: GlobalId
    message: str = ""


@dataclass(frozen=True, slots=True)
class CopyToRowCount:
    """A copy-to finished: ``count`` rows (with multiplicity) were written."""

    count: int


@dataclass(frozen=True, slots=True)
class CopyToError:
    """A copy-to failed (e.g. the URL is not writable, or the collection has an error)."""

    message: str


@dataclass(frozen=True, slots=True)
class CopyToDropped:
    """The copy-to was dropped (``AllowCompaction(id, [])``) before it finished."""


CopyToResult: TypeAlias = CopyToRowCount | CopyToError | CopyToDropped


@dataclass(frozen=True, slots=True)
class CopyToResponse:
    """The one answer a replica gives a copy-to sink ``id`` (docs/reference/compute.md section 4)."""

    id: GlobalId
    result: CopyToResult


ComputeResponse: TypeAlias = Frontiers | PeekResponse | SubscribeResponse | CopyToResponse | Status
