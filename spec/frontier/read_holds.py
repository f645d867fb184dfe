"""Read holds: counted claims on collections' sinces, shared by both controllers.

Each tracked collection keeps a :class:`MutableAntichain` of the frontiers of
all its outstanding holds; its *since* (the earliest time still readable) is
that antichain's frontier -- the meet of every hold. A hold is a
:class:`ReadHold` token: it can move forward (:meth:`ReadHold.downgrade`), be
released (downgraded to ``[]``), cloned and merged, never moved back. Because
no hold may be taken behind the current since, a since only ever advances.

The structure records which sinces changed; :meth:`ReadHolds.drain_changes`
hands them to the controller, which sends ``AllowCompaction`` for exactly those.

>>> holds = ReadHolds()
>>> implied = holds.add_collection("u1", Antichain([0]))
>>> peek = holds.acquire("u1")
>>> implied.downgrade(Antichain([5]))
>>> holds.since("u1"), holds.drain_changes()
(Antichain([0]), {})
>>> peek.release()
>>> holds.since("u1"), holds.drain_changes()
(Antichain([5]), {'u1': Antichain([5])})
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

from ..errors.frontier import (
    DuplicateHoldCollection,
    HoldBeforeSince,
    HoldMismatch,
    HoldRegression,
    InvalidFrontier,
    UnknownHoldCollection,
)
from .antichain import Antichain
from .change_batch import ChangeBatch
from .mutable_antichain import MutableAntichain
from .order import Time

__all__ = ["ReadHold", "ReadHolds"]

K = TypeVar("K", bound=Hashable)


class _Entry:
    """One registration of a collection: the counted holds on it.

    Holds point at the entry, not at the id, so a hold that outlives its
    collection's removal can never touch a later collection with the same id.
    """

    __slots__ = ("counts", "live")

    def __init__(self) -> None:
        self.counts = MutableAntichain()
        self.live = True


def _as_antichain(value: object, what: str) -> Antichain:
    if not isinstance(value, Antichain):
        raise InvalidFrontier(f"{what} must be an Antichain, got {value!r}")
    return value


def _diff(old: Antichain, new: Antichain) -> ChangeBatch[Time]:
    """The count changes that replace one hold at ``old`` by one at ``new``."""
    cb: ChangeBatch[Time] = ChangeBatch((t, -1) for t in old)
    cb.extend((t, 1) for t in new)
    return cb


class ReadHold(Generic[K]):
    """A claim that keeps collection ``id`` readable from ``frontier`` on.

    Obtained from :meth:`ReadHolds.acquire` (or :meth:`ReadHolds.add_collection`).
    Its frontier only moves forward; ``[]`` means released. Holds are compared
    by identity: two holds at the same frontier are still two holds.
    """

    __slots__ = ("_entry", "_frontier", "_id", "_owner")

    def __init__(self, owner: ReadHolds[K], entry: _Entry, id: K, frontier: Antichain) -> None:
        self._owner = owner
        self._entry = entry
        self._id = id
        self._frontier = frontier

    @property
    def id(self) -> K:
        """The collection this hold is on."""
        return self._id

    @property
    def frontier(self) -> Antichain:
        """The hold's frontier: the collection stays readable at times beyond it."""
        return self._frontier

    def is_released(self) -> bool:
        """Whether the hold no longer holds anything (its frontier is ``[]``)."""
        return self._frontier.is_empty()

    def downgrade(self, new: Antichain) -> None:
        """Move the hold forward to ``new`` (``[]`` releases it).

        Raises :class:`HoldRegression` unless ``frontier <= new``; on a removed
        collection only a release is allowed (:class:`UnknownHoldCollection`).
        """
        _as_antichain(new, "new hold frontier")
        if not self._frontier <= new:
            raise HoldRegression(
                f"hold on {self._id!r} cannot move from {self._frontier!r} back to {new!r}"
            )
        self._owner._apply(self._entry, self._id, _diff(self._frontier, new))
        self._frontier = new

    def release(self) -> None:
        """Release the hold (downgrade to ``[]``); releasing twice is a no-op."""
        self.downgrade(Antichain.empty())

    def clone(self) -> ReadHold[K]:
        """Another, independent hold on the same collection at the same frontier.

        Raises :class:`UnknownHoldCollection` if the collection was removed
        (unless this hold is already released: its clone holds nothing).
        """
        self._owner._apply(self._entry, self._id, ChangeBatch((t, 1) for t in self._frontier))
        return ReadHold(self._owner, self._entry, self._id, self._frontier)

    def merge(self, other: ReadHold[K]) -> None:
        """Absorb ``other``: this hold moves to the meet of both frontiers and ``other`` is released.

        Both must be distinct holds on the same registration of the same
        collection (:class:`HoldMismatch` otherwise).
        """
        if other is self or other._owner is not self._owner or other._entry is not self._entry:
            raise HoldMismatch(f"cannot merge {other!r} into {self!r}")
        merged = self._frontier.meet(other._frontier)
        cb = _diff(self._frontier, merged)
        cb.extend((t, -1) for t in other._frontier)
        self._owner._apply(self._entry, self._id, cb)
        self._frontier = merged
        other._frontier = Antichain.empty()

    def __repr__(self) -> str:
        return f"ReadHold({self._id!r}, {self._frontier!r})"


class ReadHolds(Generic[K]):
    """Counted read holds per collection; each collection's since is the meet of its holds.

    Generic over the id type (``GlobalId`` in the controllers). Every method
    validates before it mutates: one that raises changes nothing.
    """

    __slots__ = ("_changes", "_entries")

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}
        self._changes: dict[K, Antichain] = {}

    # -- collections -----------------------------------------------------------------

    def add_collection(self, id: K, initial_since: Antichain) -> ReadHold[K]:
        """Track ``id`` with since ``initial_since``; returns the hold that keeps it there.

        The returned hold is usually the collection's implied capability (the
        one its read policy moves forward). Dropping the token without
        releasing it leaves the since where it is.
        """
        _as_antichain(initial_since, "initial since")
        if id in self._entries:
            raise DuplicateHoldCollection(f"collection {id!r} already has read holds")
        entry = _Entry()
        entry.counts.update_iter((t, 1) for t in initial_since)
        self._entries[id] = entry
        return ReadHold(self, entry, id, initial_since)

    def remove(self, id: K) -> None:
        """Stop tracking ``id``. Outstanding holds on it become inert (releasing them is a no-op).

        If its since was not already ``[]`` the change to ``[]`` is recorded.
        """
        entry = self._entry(id)
        if not entry.counts.frontier.is_empty():
            self._changes[id] = Antichain.empty()
        entry.live = False
        del self._entries[id]

    def __contains__(self, id: object) -> bool:
        return id in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    # -- reading ---------------------------------------------------------------------

    def since(self, id: K) -> Antichain:
        """The collection's since: the meet of all its holds (``[]`` when none are left)."""
        return self._entry(id).counts.frontier

    def count_for(self, id: K, t: Time) -> int:
        """How many holds on ``id`` have ``t`` as an element of their frontier."""
        return self._entry(id).counts.count_for(t)

    def holds(self, id: K) -> list[tuple[Time, int]]:
        """All ``(time, count)`` of ``id``'s holds, sorted by time."""
        return self._entry(id).counts.updates()

    # -- holds -----------------------------------------------------------------------

    def acquire(self, id: K, frontier: Antichain | None = None) -> ReadHold[K]:
        """A new hold on ``id`` at ``frontier`` (default: the current since).

        Raises :class:`HoldBeforeSince` if ``frontier`` is not at or beyond the
        since -- those times may already be compacted away.
        """
        entry = self._entry(id)
        if frontier is None:
            frontier = entry.counts.frontier
        _as_antichain(frontier, "hold frontier")
        self._apply(entry, id, ChangeBatch((t, 1) for t in frontier))
        return ReadHold(self, entry, id, frontier)

    def acquire_all(self, ids: Iterable[K]) -> dict[K, ReadHold[K]]:
        """One hold per id at its current since; if any id is unknown, no hold is taken."""
        wanted = list(dict.fromkeys(ids))
        for id in wanted:
            self._entry(id)
        return {id: self.acquire(id) for id in wanted}

    def drain_changes(self) -> dict[K, Antichain]:
        """The ids whose since changed since the last drain, each with its new since."""
        out = self._changes
        self._changes = {}
        return out

    # -- internals -------------------------------------------------------------------

    def _entry(self, id: K) -> _Entry:
        entry = self._entries.get(id)
        if entry is None:
            raise UnknownHoldCollection(f"no read holds are tracked for collection {id!r}")
        return entry

    def _apply(self, entry: _Entry, id: K, changes: ChangeBatch[Time]) -> None:
        """Validate and apply count changes for one collection; record a since change."""
        if changes.is_empty():
            return
        additions = [t for t, d in changes if d > 0]
        if not entry.live:
            if additions:
                raise UnknownHoldCollection(f"collection {id!r} was removed; cannot hold it")
            return
        since = entry.counts.frontier
        for t in additions:
            if not since.less_equal(t):
                raise HoldBeforeSince(
                    f"cannot hold {id!r} at {t!r}: not at or beyond its since {since!r}"
                )
        if not entry.counts.update_iter(changes).is_empty():
            self._changes[id] = entry.counts.frontier
