"""Monotonic appends: writes to an append-only collection at a time the controller chooses.

A table append (:meth:`~.controller.StorageController.append`) names the
upper it expects; a writer that lost a race learns it from an
``InvalidUppers``. An append-only collection -- a status history, a webhook
source -- does not care at which time a row lands, only that it lands once, at
or after a time its writer asks for (``at_least``). Materialize's
``StorageController::monotonic_appender`` hands out a handle for that
(:class:`MonotonicAppender`), and its collection manager writes each batch at
``max(upper, at_least)``, advancing the upper one past it, retrying at the new
upper when another writer moved it (reference section 2.9, item 7): the caller
never sees a compare-and-append race. In read-only mode such an append is
refused (``StorageError::ReadOnly``); an empty one to a closed collection is
ignored.

This module holds the handle and the controller's record of one append;
:meth:`~.controller.StorageController.monotonic_append` does the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ..frontier import Row, Time
from ..ids import GlobalId
from .introspection import SINK_STATUS_HISTORY, SOURCE_STATUS_HISTORY

__all__ = ["APPEND_ONLY_KINDS", "MonotonicAppender"]

APPEND_ONLY_KINDS: Final = frozenset({SOURCE_STATUS_HISTORY, SINK_STATUS_HISTORY})
"""The introspection kinds that are append-only (blind writes at any time); the statistics
collections are differential and are not."""


class _Appends(Protocol):
    def monotonic_append(
        self, id: GlobalId, updates: Sequence[tuple[Row, int]], at_least: Time = 0
    ) -> int: ...


class MonotonicAppender:
    """A handle that appends to one append-only collection without a compare-and-append race.

    Issued by :meth:`~.controller.StorageController.monotonic_appender` (which
    checked the collection); :meth:`append` returns the ticket that the
    controller's ``AppendCompleted`` resolves.
    """

    __slots__ = ("_controller", "id")

    def __init__(self, controller: _Appends, id: GlobalId) -> None:
        self._controller = controller
        self.id = id

    def append(self, updates: Sequence[tuple[Row, int]], at_least: Time = 0) -> int:
        """Append ``(row, diff)`` pairs at some time at or after ``at_least``; the ticket."""
        return self._controller.monotonic_append(self.id, updates, at_least)

    def __repr__(self) -> str:
        return f"MonotonicAppender({self.id})"


@dataclass(slots=True)
class MonotonicWrite:
    """The controller's record of one monotonic append, rewritten at the new upper on a race."""

    id: GlobalId
    updates: tuple[tuple[Row, int], ...]
    at_least: Time
    attempts: int = 0
