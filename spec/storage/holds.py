"""Read-hold tokens on storage collections (the 2024 ``acquire_read_holds`` API, reference section 2.5)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..errors.frontier import HoldRegression, InvalidFrontier
from ..frontier import Antichain, Time
from ..ids import GlobalId

__all__ = ["HoldOwner", "StorageReadHold"]


class HoldOwner(Protocol):
    """Who issued a hold: the :class:`~tidegate.spec.storage.StorageController`, whose
    propagation each move of the hold goes through."""

    def update_read_capabilities(
        self, changes: Mapping[GlobalId, Iterable[tuple[Time, int]]]
    ) -> None: ...


class StorageReadHold:
    """A hold keeping storage collection ``id`` readable from ``frontier`` on.

    Issued by :meth:`StorageController.acquire_read_holds`. It only moves
    forward; each move goes through the controller's propagation, whose effects
    (compaction requests and since changes) wait in the controller's outbox.
    """

    __slots__ = ("_frontier", "_id", "_owner")

    def __init__(self, owner: HoldOwner, id: GlobalId, frontier: Antichain) -> None:
        self._owner = owner
        self._id = id
        self._frontier = frontier

    @property
    def id(self) -> GlobalId:
        return self._id

    @property
    def frontier(self) -> Antichain:
        return self._frontier

    def is_released(self) -> bool:
        return self._frontier.is_empty()

    def downgrade(self, new: Antichain) -> None:
        """Move the hold to ``new`` (:class:`HoldRegression` unless ``frontier <= new``)."""
        if not isinstance(new, Antichain):
            raise InvalidFrontier(f"new hold frontier must be an Antichain, got {new!r}")
        if not self._frontier <= new:
            raise HoldRegression(
                f"hold on {self._id} cannot move from {self._frontier!r} back to {new!r}"
            )
        if new == self._frontier:
            return
        changes = [(t, -1) for t in self._frontier] + [(t, 1) for t in new]
        self._owner.update_read_capabilities({self._id: changes})
        self._frontier = new

    def release(self) -> None:
        """Release the hold; releasing twice is a no-op."""
        self.downgrade(Antichain.empty())

    def __repr__(self) -> str:
        return f"StorageReadHold({self._id}, {self._frontier!r})"
