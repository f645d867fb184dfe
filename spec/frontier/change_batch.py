"""ChangeBatch: a compacting multiset of ``(key, delta)`` updates."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from .order import PartialOrder
from .rows import value_sort_key

__all__ = ["ChangeBatch"]

K = TypeVar("K", bound=Hashable)


def _key_order(k: Any) -> Any:
    if type(k) is int:
        return (0, k)
    if isinstance(k, PartialOrder):
        return (0, k.sort_key())
    return (1, value_sort_key(k))


class ChangeBatch(Generic[K]):
    """A bag of ``(key, delta)`` pairs where equal keys sum and zero sums vanish.

    Observing it (iteration, ``len``, ``drain``, equality) always shows the
    compacted form: each key once, sorted by key, with a non-zero delta.

    >>> cb = ChangeBatch([(3, 1), (1, 2), (3, -1)])
    >>> list(cb)
    [(1, 2)]
    """

    __slots__ = ("_counts",)

    def __init__(self, updates: Iterable[tuple[K, int]] = ()) -> None:
        self._counts: dict[K, int] = {}
        self.extend(updates)

    def update(self, key: K, delta: int) -> None:
        """Add ``delta`` to ``key``'s count."""
        if delta == 0:
            return
        counts = self._counts
        total = counts.get(key, 0) + delta
        if total:
            counts[key] = total
        else:
            del counts[key]

    def extend(self, updates: Iterable[tuple[K, int]]) -> None:
        for key, delta in updates:
            self.update(key, delta)

    def is_empty(self) -> bool:
        return not self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[tuple[K, int]]:
        counts = self._counts
        if len(counts) < 2:
            return iter(list(counts.items()))
        if all(type(k) is int for k in counts):
            return iter(sorted(counts.items()))  # keys are distinct: pairs order by key alone
        return iter(sorted(counts.items(), key=lambda kv: _key_order(kv[0])))

    def get(self, key: K) -> int:
        """The net delta of ``key`` (0 if absent)."""
        return self._counts.get(key, 0)

    def drain(self) -> list[tuple[K, int]]:
        """Return the compacted contents (sorted by key) and empty the batch."""
        out = list(self)
        self._counts.clear()
        return out

    def as_dict(self) -> dict[K, int]:
        return dict(self._counts)

    def negated(self) -> ChangeBatch[K]:
        return ChangeBatch((k, -d) for k, d in self._counts.items())

    def copy(self) -> ChangeBatch[K]:
        out: ChangeBatch[K] = ChangeBatch()
        out._counts = dict(self._counts)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChangeBatch):
            return NotImplemented
        return self._counts == other._counts

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChangeBatch({list(self)!r})"
