"""The one way effects leave a state machine: an outbox its owner drains.

Every state machine in ``spec`` (the compute controller and its instances,
the storage controller, the composed :class:`~tidegate.spec.controller.Controller`
and the replica core) records the effects of each call in an :class:`Outbox`;
its public methods return no effect lists. The owner -- a driver, the
simulator, a test -- takes them with ``drain()`` after each call, as dask's
``WorkerState`` hands back one list of instructions per stimulus.

A call that raises leaves the outbox as it was (:func:`atomic`), so
"a call that raises has changed nothing" holds for effects too.

>>> box: Outbox[str] = Outbox()
>>> box.emit("a"); box.extend(["b", "c"])
>>> box.drain(), box.drain()
(['a', 'b', 'c'], [])
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

__all__ = ["HasOutbox", "Outbox", "atomic"]

E = TypeVar("E")
P = ParamSpec("P")
R = TypeVar("R")


class Outbox(Generic[E]):
    """Effects caused and not yet taken, in the order they arose."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[E] = []

    def emit(self, effect: E) -> None:
        self._items.append(effect)

    def extend(self, effects: Iterable[E]) -> None:
        self._items.extend(effects)

    def drain(self) -> list[E]:
        """Every effect so far, oldest first; the outbox is empty afterwards."""
        items, self._items = self._items, []
        return items

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)


class HasOutbox(Protocol):
    """A state machine with an outbox (what :func:`atomic` needs)."""

    _outbox: Outbox[Any]


S = TypeVar("S", bound=HasOutbox)


def atomic(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Decorate a public method: if it raises, what it emitted is discarded."""

    @functools.wraps(method)
    def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        items = self._outbox._items  # plain try/except: this wraps every hot-path call
        mark = len(items)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            del items[mark:]
            raise

    return call
