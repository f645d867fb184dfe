"""The append requests of the storage controller and its book-keeping of them (section 2.9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..errors import InvalidUpper
from ..frontier import Antichain, Update
from ..ids import GlobalId
from .effects import WriteToShard

__all__ = ["AppendCommand"]


class AppendCommand(NamedTuple):
    """Append ``updates`` to collection ``id`` and advance its upper to ``upper``."""

    id: GlobalId
    updates: Sequence[Update]
    upper: Antichain


class AppendBatch:
    """Internal book-keeping of one append call: the writes still outstanding and the failures so far."""

    __slots__ = ("failures", "outstanding", "writes")

    def __init__(self, writes: dict[GlobalId, WriteToShard]) -> None:
        self.writes = writes
        self.outstanding = set(writes)
        self.failures: list[InvalidUpper] = []
