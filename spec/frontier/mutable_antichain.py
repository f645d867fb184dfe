"""MutableAntichain: counted times whose frontier is the minimal positive-count times."""

from __future__ import annotations

from collections.abc import Iterable

from .antichain import Antichain, minimal_elements
from .change_batch import ChangeBatch
from .order import Time, check_time, same_kind

__all__ = ["MutableAntichain"]


class MutableAntichain:
    """A multiset of times with a frontier: the minimal times whose count is positive.

    Counts may go negative (they never contribute to the frontier). This is
    how read holds accumulate: each hold adds +1 at its time, releasing it adds
    -1, and the collection's since is the frontier.

    >>> m = MutableAntichain()
    >>> list(m.update_iter([(3, 1), (5, 1)]))
    [(3, 1)]
    >>> list(m.update_iter([(3, -1)]))
    [(3, -1), (5, 1)]
    >>> m.frontier
    Antichain([5])
    """

    __slots__ = ("_counts", "_frontier")

    def __init__(self, times: Iterable[Time] = ()) -> None:
        self._counts: dict[Time, int] = {}
        self._frontier = Antichain.empty()
        self.update_iter((t, 1) for t in times)

    @classmethod
    def from_antichain(cls, frontier: Antichain) -> MutableAntichain:
        """Count 1 at each element of ``frontier``."""
        return cls(frontier)

    @property
    def frontier(self) -> Antichain:
        return self._frontier

    def count_for(self, t: Time) -> int:
        """The net count at exactly ``t``."""
        return self._counts.get(t, 0)

    def is_empty(self) -> bool:
        """Whether the frontier is empty."""
        return self._frontier.is_empty()

    def less_equal(self, t: Time) -> bool:
        return self._frontier.less_equal(t)

    def less_than(self, t: Time) -> bool:
        return self._frontier.less_than(t)

    def updates(self) -> list[tuple[Time, int]]:
        """All non-zero counts, sorted by time."""
        return list(ChangeBatch(self._counts.items()))

    def update_iter(self, changes: Iterable[tuple[Time, int]]) -> ChangeBatch[Time]:
        """Apply ``(time, delta)`` changes; return the frontier's change (+1 entered, -1 left).

        Validates every time before applying anything.
        """
        changes = list(changes)
        counts = self._counts
        if all(type(t) is int for t, _ in changes) and (
            not counts or type(next(iter(counts))) is int
        ):
            return self._update_ints(changes)
        for t, _ in changes:
            check_time(t)
        changes = [(t, d) for t, d in changes if d]
        if not changes:
            return ChangeBatch()
        reference = next(iter(self._counts), None)
        for t, _ in changes:
            if reference is not None:
                same_kind(reference, t)
            else:
                reference = t
        counts = self._counts
        frontier = self._frontier
        rebuild = False
        for t, d in changes:
            total = counts.get(t, 0) + d
            if total:
                counts[t] = total
            else:
                del counts[t]
            # A change matters only if it is not strictly beyond the frontier and
            # is not a decrement at a time the frontier does not cover.
            if not frontier.less_than(t) and (d > 0 or frontier.less_equal(t)):
                rebuild = True
        if not rebuild:
            return ChangeBatch()
        new = Antichain._trusted(minimal_elements(t for t, c in counts.items() if c > 0))
        if new == frontier:
            return ChangeBatch()
        self._frontier = new
        out: ChangeBatch[Time] = ChangeBatch()
        for t in new.elements:
            if t not in frontier.elements:
                out.update(t, 1)
        for t in frontier.elements:
            if t not in new.elements:
                out.update(t, -1)
        return out

    def _update_ints(self, changes: list[tuple[int, int]]) -> ChangeBatch[Time]:
        """:meth:`update_iter` when every time (held and changed) is an ``int``: the frontier has at most one element."""
        for t, _ in changes:
            if t < 0:
                check_time(t)  # raises
        counts = self._counts
        old = self._frontier
        f = old._elements[0] if old._elements else None
        rebuild = False
        for t, d in changes:
            if not d:
                continue
            total = counts.get(t, 0) + d
            if total:
                counts[t] = total
            else:
                del counts[t]
            # As in the general case: only changes at or below the frontier's element matter.
            if f is None:
                rebuild = rebuild or d > 0
            elif t == f or (t < f and d > 0):
                rebuild = True
        if not rebuild:
            return ChangeBatch()
        low = min((t for t, c in counts.items() if c > 0), default=None)
        if low == f:
            return ChangeBatch()
        out: ChangeBatch[Time] = ChangeBatch()
        if low is None:
            self._frontier = Antichain.empty()
        else:
            self._frontier = Antichain._trusted((low,))
            out.update(low, 1)
        if f is not None:
            out.update(f, -1)
        return out

    def __repr__(self) -> str:
        return f"MutableAntichain({self.updates()!r})"
