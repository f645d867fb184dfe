"""The append and snapshot requests of the storage controller and their pending handles (section 2.9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..errors import InvalidUpper
from ..frontier import Antichain, Update
from ..ids import GlobalId
from .effects import StorageEffect, WriteToShard

__all__ = ["AppendCommand", "PendingAppend", "PendingSnapshot"]


class AppendCommand(NamedTuple):
    """Append ``updates`` to collection ``id`` and advance its upper to ``upper``."""

    id: GlobalId
    updates: Sequence[Update]
    upper: Antichain


class PendingAppend(NamedTuple):
    """An accepted append: ``ticket`` resolves with an :class:`AppendCompleted` effect."""

    ticket: int
    effects: list[StorageEffect]


class PendingSnapshot(NamedTuple):
    """An accepted snapshot: ``request`` names the :class:`ReadSnapshot` effect in ``effects``."""

    request: int
    effects: list[StorageEffect]


class AppendBatch:
    """Internal book-keeping of one append call: the writes still outstanding and the failures so far."""

    __slots__ = ("failures", "outstanding", "writes")

    def __init__(self, writes: dict[GlobalId, WriteToShard]) -> None:
        self.writes = writes
        self.outstanding = set(writes)
        self.failures: list[InvalidUpper] = []
