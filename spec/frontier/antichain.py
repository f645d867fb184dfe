"""Antichains: finite sets of mutually incomparable times, used as frontiers.

An antichain ``A`` stands for the up-set ``{t : some a in A has a <= t}``. As a
*write frontier* (upper) it says which times may still change; as a *read
frontier* (since) it says which times can still be read. The empty antichain
``[]`` is the top element ("closed" / "nothing readable"); ``[minimum]`` is the
bottom.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import MixedTimestampKinds
from .order import Time, check_time, join, less_equal, less_than, sort_key, time_kind

__all__ = ["Antichain", "minimal_elements"]


def minimal_elements(times: Iterable[Time]) -> tuple[Time, ...]:
    """The minimal elements of ``times``, validated, deduplicated and sorted by sort key."""
    items = list(times)
    if not items:
        return ()
    first = items[0]
    if all(type(t) is int for t in items):
        low = min(items)
        check_time(low)
        return (low,)
    for t in items:
        check_time(t)
    kind = time_kind(first)
    for t in items:
        if time_kind(t) != kind:
            raise MixedTimestampKinds(f"antichain mixes timestamp kinds: {first!r} and {t!r}")
    # Scan in sort order: an element can only be dominated by one sorted before
    # it or by one with an equal sort key (keys need not be injective).
    result: list[Time] = []
    keys: list[Any] = []
    for t in sorted(set(items), key=sort_key):
        if any(less_equal(r, t) for r in result):
            continue
        k = sort_key(t)
        i = len(result)
        while i and keys[i - 1] == k:
            i -= 1
            if less_equal(t, result[i]):
                del result[i], keys[i]
        result.append(t)
        keys.append(k)
    return tuple(result)


class Antichain:
    """An immutable, hashable antichain of timestamps (minimal elements only).

    >>> Antichain([3, 5, 7])
    Antichain([3])
    >>> Antichain([3]).less_equal(4), Antichain([3]).less_than(3)
    (True, False)
    >>> Antichain([2]) <= Antichain([5]) <= Antichain()
    True
    """

    __slots__ = ("_elements", "_hash")

    _elements: tuple[Time, ...]
    _hash: int | None

    def __init__(self, elements: Iterable[Time] = ()) -> None:
        self._elements = minimal_elements(elements)
        self._hash = None

    @classmethod
    def _trusted(cls, elements: tuple[Time, ...]) -> Antichain:
        """Wrap elements already known to be a sorted antichain (internal fast path)."""
        obj = object.__new__(cls)
        obj._elements = elements
        obj._hash = None
        return obj

    @classmethod
    def from_elem(cls, t: Time) -> Antichain:
        """The antichain ``[t]``."""
        if type(t) is not int or t < 0:
            check_time(t)
        obj = object.__new__(cls)
        obj._elements = (t,)
        obj._hash = None
        return obj

    @classmethod
    def empty(cls) -> Antichain:
        """The empty antichain ``[]``: the top element."""
        return _EMPTY

    @classmethod
    def bottom(cls, minimum: Time = 0) -> Antichain:
        """The bottom antichain ``[minimum]`` (``[0]`` for ints)."""
        return cls.from_elem(minimum)

    # -- inspection -----------------------------------------------------------------

    @property
    def elements(self) -> tuple[Time, ...]:
        """The elements, sorted by sort key."""
        return self._elements

    def is_empty(self) -> bool:
        return not self._elements

    def as_option(self) -> Time | None:
        """For totally ordered times: the single element, or ``None`` for ``[]`` (= +infinity)."""
        if not self._elements:
            return None
        if len(self._elements) != 1:
            raise ValueError(f"{self!r} has several elements; as_option is for total orders")
        return self._elements[0]

    def __iter__(self) -> Iterator[Time]:
        return iter(self._elements)

    def __len__(self) -> int:
        return len(self._elements)

    def __contains__(self, t: object) -> bool:
        return t in self._elements

    # -- times against the frontier ---------------------------------------------------

    def less_equal(self, t: Time) -> bool:
        """Whether ``t`` is at or beyond the frontier: some element ``a <= t``."""
        els = self._elements
        if len(els) == 1 and type(els[0]) is int and type(t) is int:
            return els[0] <= t
        return any(less_equal(a, t) for a in els)

    def less_than(self, t: Time) -> bool:
        """Whether ``t`` is strictly beyond the frontier: some element ``a < t``."""
        els = self._elements
        if len(els) == 1 and type(els[0]) is int and type(t) is int:
            return els[0] < t
        return any(less_than(a, t) for a in els)

    def insert(self, t: Time) -> tuple[Antichain, bool]:
        """Insert ``t``: returns the new antichain and whether ``t`` was added.

        ``t`` is rejected (``False``) if some element is ``<= t``; otherwise every
        element ``>= t`` is removed and ``t`` added.
        """
        check_time(t)
        if self.less_equal(t):
            return self, False
        return Antichain([*(a for a in self._elements if not less_equal(t, a)), t]), True

    # -- antichain order -------------------------------------------------------------

    def le(self, other: Antichain) -> bool:
        """``self <= other``: every element of ``other`` is beyond ``self`` (``other`` is at or past ``self``)."""
        a, b = self._elements, other._elements
        if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
            return a[0] <= b[0]
        return all(self.less_equal(t) for t in b)

    def __le__(self, other: Antichain) -> bool:
        a, b = self._elements, other._elements
        if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
            return a[0] <= b[0]
        return all(self.less_equal(t) for t in b)

    def __lt__(self, other: Antichain) -> bool:
        a, b = self._elements, other._elements
        if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
            return a[0] < b[0]
        return self.le(other) and self != other

    def __ge__(self, other: Antichain) -> bool:
        return other.le(self)

    def __gt__(self, other: Antichain) -> bool:
        return other.le(self) and self != other

    def dominates(self, other: Antichain) -> bool:
        """Timely's old name for ``self <= other``."""
        return self.le(other)

    # -- lattice -------------------------------------------------------------------

    def join(self, other: Antichain) -> Antichain:
        """The least upper bound: minimal elements of ``{a v b}`` (the later frontier). ``A v [] = []``."""
        a, b = self._elements, other._elements
        if not a or not b:
            return _EMPTY
        if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
            return self if a[0] >= b[0] else other
        return Antichain(join(x, y) for x in a for y in b)

    def meet(self, other: Antichain) -> Antichain:
        """The greatest lower bound: minimal elements of ``A u B`` (the earlier frontier). ``A ^ [] = A``."""
        a, b = self._elements, other._elements
        if not a:
            return other
        if not b:
            return self
        if len(a) == 1 and len(b) == 1 and type(a[0]) is int and type(b[0]) is int:
            return self if a[0] <= b[0] else other
        return Antichain((*a, *b))

    @staticmethod
    def meet_all(frontiers: Iterable[Antichain]) -> Antichain:
        """The meet of many antichains (``[]`` for none)."""
        result = _EMPTY
        for f in frontiers:
            result = result.meet(f)
        return result

    @staticmethod
    def join_all(frontiers: Iterable[Antichain], minimum: Time = 0) -> Antichain:
        """The join of many antichains (``[minimum]`` for none)."""
        result: Antichain | None = None
        for f in frontiers:
            result = f if result is None else result.join(f)
        return Antichain.bottom(minimum) if result is None else result

    # -- identity ------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Antichain):
            return NotImplemented
        a, b = self._elements, other._elements
        if a == b:
            return True
        # Elements with equal sort keys may be stored in either order.
        return len(a) == len(b) > 1 and set(a) == set(b)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self._elements))
        return h

    def __repr__(self) -> str:
        return f"Antichain([{', '.join(repr(t) for t in self._elements)}])"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Antichain, (list(self._elements),))


_EMPTY = Antichain._trusted(())
