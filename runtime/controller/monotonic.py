"""Monotonic appends in the runtime: a handle that appends to an append-only collection.

Materialize's ``StorageController::monotonic_appender(id)`` hands out a handle
to the collection manager's one writer of an append-only collection (a status
history, a webhook source): ``append(updates)`` writes the rows at a time that
writer chooses and never shows its caller a compare-and-append race; an id that
is not a registered append-only collection is ``IdentifierMissing``. The spec
controller validates the same way (:meth:`~tidegate.spec.storage.StorageController.monotonic_appender`)
and chooses the time of such a write itself
(:meth:`~tidegate.spec.storage.StorageController.monotonic_append`: at the
collection's upper, again at the new upper after a race).

Here the group commit is the one writer of the collections the controller
advances together (tables and the storage-managed collections, the status
histories among them): an append to one of those joins the next commit, at its
timestamp, as the status rows the controller writes do, and a commit that lost
a race to another writer is committed again at a new time. Any other append-only
collection (a webhook source's) is written by the spec controller's monotonic
write. Either way the caller learns only that the rows landed, at which time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId

__all__ = ["MonotonicHandle"]


class _Writer(Protocol):
    """What a handle writes through: the :class:`~.driver.ControllerDriver`."""

    async def monotonic_append(
        self, id: GlobalId, updates: Sequence[tuple[Row, int]]
    ) -> int | None: ...


class MonotonicHandle:
    """Appends to append-only collection ``id`` without a compare-and-append race.

    Issued by :meth:`~.driver.ControllerDriver.monotonic_appender`, which checked the
    collection; it may be used many times (Materialize's handle is used once
    per batch; a handle here carries no state of its own).
    """

    __slots__ = ("_driver", "id")

    def __init__(self, driver: _Writer, id: GlobalId) -> None:
        self._driver = driver
        self.id = id

    async def append(self, updates: Sequence[tuple[Row, int]]) -> int | None:
        """Append ``(row, diff)`` pairs; once durable, the time they were written at (``None``
        when the spec controller's write chose it). Errors, with nothing written: the
        collection was dropped [IdentifierMissing]; a read-only controller
        [ReadOnlyController]; a bad pair [InvalidUsage]; a fenced controller
        [EnvironmentFenced]."""
        return await self._driver.monotonic_append(self.id, updates)

    def __repr__(self) -> str:
        return f"MonotonicHandle({self.id})"
