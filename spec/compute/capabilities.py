"""Read capabilities: the counted holds on one collection, whose frontier is its since.

The same algebra as :class:`~tidegate.spec.frontier.MutableAntichain`, with a
fast path for int timestamps (a collection has holds at a handful of distinct
times, so the frontier is a ``min`` over a tiny dict). Other timestamp kinds
fall back to a ``MutableAntichain``. Frontier responses hit this on every
step, which is why it is worth having.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..frontier import Antichain, MutableAntichain, Time

__all__ = ["ReadCapabilities"]

_EMPTY = Antichain.empty()


class ReadCapabilities:
    """A multiset of hold times; :attr:`frontier` is the minimal times with a positive count."""

    __slots__ = ("_counts", "_frontier", "_general")

    def __init__(self, times: Iterable[Time] = ()) -> None:
        self._counts: dict[int, int] = {}
        self._frontier = _EMPTY
        self._general: MutableAntichain | None = None
        self.update([(t, 1) for t in times])

    @property
    def frontier(self) -> Antichain:
        return self._general.frontier if self._general is not None else self._frontier

    def count_for(self, t: Time) -> int:
        if self._general is not None:
            return self._general.count_for(t)
        return self._counts.get(t, 0) if type(t) is int else 0

    def updates(self) -> list[tuple[Time, int]]:
        """All non-zero counts, sorted by time."""
        if self._general is not None:
            return self._general.updates()
        return sorted(self._counts.items())

    def update(self, changes: Iterable[tuple[Time, int]]) -> bool:
        """Apply ``(time, delta)`` changes; return whether the frontier changed."""
        general = self._general
        if general is not None:
            return not general.update_iter(changes).is_empty()
        items = changes if isinstance(changes, list) else list(changes)
        for t, _ in items:
            if type(t) is not int:
                return self._generalize(items)
        counts = self._counts
        for t, d in items:
            n = counts.get(t, 0) + d
            if n:
                counts[t] = n
            else:
                del counts[t]
        old = self._frontier
        low = min((t for t, n in counts.items() if n > 0), default=None)
        if low is None:
            if not old.elements:
                return False
            self._frontier = _EMPTY
            return True
        if old.elements and old.elements[0] == low:
            return False
        self._frontier = Antichain.from_elem(low)
        return True

    def _generalize(self, items: list[tuple[Time, int]]) -> bool:
        """Switch to a ``MutableAntichain`` for timestamps that are not ints."""
        general = MutableAntichain()
        general.update_iter(self._counts.items())
        self._general = general
        general.update_iter(items)
        return general.frontier != self._frontier

    def __repr__(self) -> str:
        return f"ReadCapabilities({self.updates()!r})"
