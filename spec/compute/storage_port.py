"""The compute controller's view of storage: frontiers of storage collections and holds on them.

Dataflows read storage collections (tables, sources, materialized-view
outputs); the compute controller must keep them readable at the times its
dataflows and replicas still need. It does so through this small port, so it
can run alone (with :class:`InMemoryStorage`) or on the real storage
controller (see :mod:`tidegate.spec.controller`).

Hold changes are applied synchronously, in the order the controller makes
them; that stands in for Materialize's asynchronous hold-change channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..errors import CollectionMissing
from ..errors.frontier import HoldBeforeSince, HoldRegression
from ..frontier import Antichain, ChangeBatch, Time
from ..ids import GlobalId
from .capabilities import ReadCapabilities

__all__ = ["InMemoryStorage", "StoragePort"]


class StoragePort(Protocol):
    """What the compute controller needs from storage."""

    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain] | None:
        """``(since, upper)`` of storage collection ``id``, or ``None`` if there is no such collection."""
        ...

    def update_storage_read_holds(self, changes: Mapping[GlobalId, ChangeBatch[Time]]) -> None:
        """Apply hold changes: ``+1`` at ``t`` takes a hold at ``t``, ``-1`` releases one.

        The compute controller only adds holds at or beyond the current since.
        """
        ...


class InMemoryStorage:
    """A minimal storage layer for running the compute controller alone.

    Each collection has a write frontier the caller advances and a since that
    is the meet of all holds, including the collection's own hold (its
    "implied" hold), which the caller moves with :meth:`set_implied`.
    """

    def __init__(self) -> None:
        self._holds: dict[GlobalId, ReadCapabilities] = {}
        self._implied: dict[GlobalId, Antichain] = {}
        self._upper: dict[GlobalId, Antichain] = {}

    def add_collection(self, id: GlobalId, since: Time = 0, upper: Time | None = None) -> None:
        """Create collection ``id`` readable from ``since`` with write frontier ``upper`` (default: ``since``)."""
        if id in self._holds:
            raise ValueError(f"storage collection exists already: {id}")
        s = Antichain.from_elem(since)
        self._holds[id] = ReadCapabilities(s.elements)
        self._implied[id] = s
        self._upper[id] = Antichain.from_elem(since if upper is None else upper)

    def collections(self) -> list[GlobalId]:
        return sorted(self._holds)

    def advance_upper(self, id: GlobalId, upper: Antichain) -> None:
        """Move the write frontier of ``id`` forward (a regression is ignored)."""
        if id not in self._upper:
            raise CollectionMissing(id)
        if self._upper[id] <= upper:
            self._upper[id] = upper

    def set_implied(self, id: GlobalId, frontier: Antichain) -> None:
        """Move the collection's own hold forward to ``frontier`` (``[]`` releases it)."""
        if id not in self._implied:
            raise CollectionMissing(id)
        old = self._implied[id]
        if not old <= frontier:
            raise HoldRegression(f"hold on {id} cannot move from {old!r} back to {frontier!r}")
        changes: ChangeBatch[Time] = ChangeBatch((t, 1) for t in frontier)
        changes.extend((t, -1) for t in old)
        self._holds[id].update(changes)
        self._implied[id] = frontier

    def since(self, id: GlobalId) -> Antichain:
        return self._holds[id].frontier

    def upper(self, id: GlobalId) -> Antichain:
        return self._upper[id]

    def hold_count(self, id: GlobalId) -> int:
        """The total count of holds on ``id`` (the collection's own hold included)."""
        return sum(c for _, c in self._holds[id].updates())

    # -- StoragePort ---------------------------------------------------------------
    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain] | None:
        holds = self._holds.get(id)
        if holds is None:
            return None
        return holds.frontier, self._upper[id]

    def update_storage_read_holds(self, changes: Mapping[GlobalId, ChangeBatch[Time]]) -> None:
        for id, batch in changes.items():
            holds = self._holds.get(id)
            if holds is None:
                raise CollectionMissing(id)
            for t, d in batch:
                if d > 0 and not holds.frontier.less_equal(t):
                    raise HoldBeforeSince(
                        f"hold on {id} at {t!r} is before its since {holds.frontier!r}"
                    )
                if holds.count_for(t) + d < 0:
                    raise HoldRegression(f"releasing a hold on {id} at {t!r} that was never taken")
        for id, batch in changes.items():
            self._holds[id].update(batch)

    def apply(self, id: GlobalId, changes: Iterable[tuple[Time, int]]) -> None:
        """Shorthand for one collection's hold changes."""
        self.update_storage_read_holds({id: ChangeBatch(changes)})
