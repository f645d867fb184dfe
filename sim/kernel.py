"""The discrete-event loop of a simulation, on trio's virtual clock.

Actors never run concurrently: the kernel pops the next event (ordered by
virtual time, then by the order it was scheduled), lets trio's
:class:`~trio.testing.MockClock` jump to that time, and calls the event's
callback. Determinism therefore does not depend on trio's task scheduling.
Virtual time is an integer number of milliseconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
import trio.testing

__all__ = ["EventHandle", "Kernel", "run_virtual"]

T = TypeVar("T")


@dataclass(order=True, slots=True)
class EventHandle:
    """A scheduled callback; :meth:`cancel` stops it from running."""

    at_ms: int
    seq: int
    callback: Callable[..., None] = field(compare=False)
    args: tuple[Any, ...] = field(compare=False, default=())
    cancelled: bool = field(compare=False, default=False)

    def cancel(self) -> None:
        self.cancelled = True


class Kernel:
    """An event queue over virtual milliseconds."""

    def __init__(self) -> None:
        self.now_ms = 0
        # (at_ms, seq, handle): tuples compare in C, and seq is unique, so handles never compare.
        self._queue: list[tuple[int, int, EventHandle]] = []
        self._seq = 0
        self.events_run = 0

    def call_at(self, at_ms: int, callback: Callable[..., None], *args: Any) -> EventHandle:
        """Run ``callback(*args)`` at virtual time ``at_ms`` (not before now)."""
        at = at_ms if at_ms > self.now_ms else self.now_ms
        seq = self._seq
        handle = EventHandle(at, seq, callback, args)
        self._seq = seq + 1
        heapq.heappush(self._queue, (at, seq, handle))
        return handle

    def call_later(self, delay_ms: int, callback: Callable[..., None], *args: Any) -> EventHandle:
        return self.call_at(self.now_ms + max(0, delay_ms), callback, *args)

    def next_time(self) -> int | None:
        """The time of the next live event, if any."""
        queue = self._queue
        while queue and queue[0][2].cancelled:
            heapq.heappop(queue)
        return queue[0][0] if queue else None

    def step(self) -> bool:
        """Run the next event synchronously (without trio); False if none is left."""
        if self.next_time() is None:
            return False
        self.run_next()
        return True

    def run_next(self) -> None:
        """Run the event at the head of the queue; only right after :meth:`next_time` returned a time."""
        handle = heapq.heappop(self._queue)[2]
        self.now_ms = handle.at_ms
        self.events_run += 1
        handle.callback(*handle.args)

    async def run(self, until_ms: int) -> None:
        """Run every event up to ``until_ms``, sleeping on trio's clock between them."""
        start = trio.current_time() - self.now_ms / 1000
        while (at := self.next_time()) is not None and at <= until_ms:
            await trio.sleep_until(start + at / 1000)
            self.step()
        if self.now_ms < until_ms:
            await trio.sleep_until(start + until_ms / 1000)
            self.now_ms = until_ms


def run_virtual(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` under trio with a virtual clock that jumps whenever the run is idle."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    return trio.run(main, clock=clock)
