"""Timestamps and their partial orders.

A timestamp is either a non-negative ``int`` (totally ordered) or an object
implementing :class:`PartialOrder` -- :class:`Product` is the one tidegate
ships. The functions here (:func:`less_equal`, :func:`join`, ...) work on both,
with a fast path for ints; everything else in the algebra goes through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import InvalidTimestamp, MixedTimestampKinds

__all__ = [
    "PartialOrder",
    "Product",
    "Time",
    "check_time",
    "join",
    "less_equal",
    "less_than",
    "meet",
    "minimum",
    "same_kind",
    "sort_key",
    "time_kind",
]


@runtime_checkable
class PartialOrder(Protocol):
    """What a user-defined timestamp type must provide.

    ``less_equal`` must be a partial order that agrees with ``==``;
    ``sort_key`` must be compatible with it (``a <= b`` implies
    ``a.sort_key() <= b.sort_key()``), because frontiers are rebuilt by
    scanning times in sorted order. ``join``/``meet`` are the least upper and
    greatest lower bounds; ``minimum`` is the least element of the type.
    """

    def less_equal(self, other: Any) -> bool: ...

    def join(self, other: Any) -> Any: ...

    def meet(self, other: Any) -> Any: ...

    def sort_key(self) -> Any: ...

    def minimum(self) -> Any: ...

    def kind(self) -> Any: ...


Time: TypeAlias = Any
"""A timestamp: a non-negative ``int`` or a :class:`PartialOrder` object."""


def check_time(t: object) -> None:
    """Raise :class:`InvalidTimestamp` unless ``t`` is a valid timestamp."""
    if type(t) is int:
        if t < 0:
            raise InvalidTimestamp(f"timestamps are non-negative, got {t}")
        return
    if isinstance(t, bool) or not isinstance(t, PartialOrder):
        raise InvalidTimestamp(f"not a timestamp: {t!r} ({type(t).__name__})")


def time_kind(t: Time) -> Any:
    """An equality-comparable description of ``t``'s kind; mixing kinds is an error."""
    if type(t) is int:
        return int
    try:
        return t.kind()
    except AttributeError:
        raise InvalidTimestamp(f"not a timestamp: {t!r} ({type(t).__name__})") from None


def same_kind(a: Time, b: Time) -> None:
    """Raise :class:`MixedTimestampKinds` if ``a`` and ``b`` are of different kinds."""
    if type(a) is int and type(b) is int:
        return
    if time_kind(a) != time_kind(b):
        raise MixedTimestampKinds(f"cannot compare {a!r} with {b!r}: different timestamp kinds")


def less_equal(a: Time, b: Time) -> bool:
    """``a <= b`` in the timestamps' partial order."""
    if type(a) is int and type(b) is int:
        return a <= b
    same_kind(a, b)
    return bool(a.less_equal(b))


def less_than(a: Time, b: Time) -> bool:
    """``a < b``: ``a <= b`` and ``a != b``."""
    if type(a) is int and type(b) is int:
        return a < b
    return less_equal(a, b) and a != b


def join(a: Time, b: Time) -> Time:
    """The least upper bound of two times (``max`` for ints)."""
    if type(a) is int and type(b) is int:
        return a if a >= b else b
    same_kind(a, b)
    return a.join(b)


def meet(a: Time, b: Time) -> Time:
    """The greatest lower bound of two times (``min`` for ints)."""
    if type(a) is int and type(b) is int:
        return a if a <= b else b
    same_kind(a, b)
    return a.meet(b)


def sort_key(t: Time) -> Any:
    """A total sort key compatible with the partial order."""
    if type(t) is int:
        return t
    return t.sort_key()


def minimum(t: Time) -> Time:
    """The least timestamp of ``t``'s kind (``0`` for ints)."""
    if type(t) is int:
        return 0
    return t.minimum()


@dataclass(frozen=True, slots=True)
class Product:
    """A pair of timestamps ordered component-wise (the product order).

    ``Product(1, 5) <= Product(2, 5)`` but ``Product(0, 5)`` and ``Product(1, 0)``
    are incomparable. Its sort key is lexicographic, which is compatible with
    the product order. Components are themselves timestamps (ints or Products).
    Python's ``<=`` is deliberately not defined: use :func:`less_equal`.
    """

    outer: Time
    inner: Time

    def __post_init__(self) -> None:
        check_time(self.outer)
        check_time(self.inner)

    def less_equal(self, other: Product) -> bool:
        return less_equal(self.outer, other.outer) and less_equal(self.inner, other.inner)

    def join(self, other: Product) -> Product:
        return Product(join(self.outer, other.outer), join(self.inner, other.inner))

    def meet(self, other: Product) -> Product:
        return Product(meet(self.outer, other.outer), meet(self.inner, other.inner))

    def sort_key(self) -> tuple[Any, Any]:
        return (sort_key(self.outer), sort_key(self.inner))

    def minimum(self) -> Product:
        return Product(minimum(self.outer), minimum(self.inner))

    def kind(self) -> tuple[str, Any, Any]:
        return ("Product", time_kind(self.outer), time_kind(self.inner))

    def __repr__(self) -> str:
        return f"Product({self.outer!r}, {self.inner!r})"
