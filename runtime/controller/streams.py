"""Client-facing async iterators of the driver: subscribe batches and status events.

Both are fed synchronously by the driver's effect loop and read by clients at
their own pace through a bounded buffer. A subscriber that falls a full
buffer behind loses its subscribe (:class:`SubscribeLagged` after the
buffered batches); an event listener that falls behind loses the oldest
events it has not read (``dropped`` counts them), never the driver's progress.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

import anyio

from tidegate.spec.compute import SubscribeBatchOut
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema

from .errors import SubscribeLagged

__all__ = ["EventStream", "Subscription"]

T = TypeVar("T")


class _Buffer(Generic[T]):
    """A bounded FIFO with one waiting reader."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: deque[T] = deque()
        self.ended = False
        self._wake = anyio.Event()

    def full(self) -> bool:
        return len(self.items) >= self.size

    def put(self, item: T) -> None:
        self.items.append(item)
        self._wake.set()

    def end(self) -> None:
        self.ended = True
        self._wake.set()

    async def get(self) -> T | None:
        """The next item; ``None`` once ended and drained."""
        while not self.items:
            if self.ended:
                return None
            await self._wake.wait()
            self._wake = anyio.Event()
        return self.items.popleft()


class Subscription:
    """The batches of subscribe ``id``, as an async iterator; closing it drops the subscribe.

    Batches are :class:`~tidegate.spec.compute.SubscribeBatchOut`: gap-free
    ``[lower, upper)`` ranges of ``(time, row, diff)`` updates. Iteration ends
    after the batch whose upper is empty or which carries an ``error``.
    """

    def __init__(
        self,
        id: GlobalId,
        buffer: int,
        on_close: Callable[[Subscription], None],
        *,
        reads: frozenset[GlobalId] = frozenset(),
        as_of: Antichain | None = None,
    ) -> None:
        self.id = id
        self.reads = reads
        """The collections the subscribe imports."""
        self.as_of = as_of
        """The time it reads from (the dataflow's as_of)."""
        self.upper = as_of if as_of is not None else Antichain.empty()
        """The upper of the last batch delivered (at first the as_of)."""
        self._buffer: _Buffer[SubscribeBatchOut] = _Buffer(max(1, buffer))
        self._on_close = on_close
        self.lagged = False
        self.finished = False
        """The controller sent the last batch (empty upper or error)."""
        self.closed = False
        self.schema: Schema | None = None
        """The schema of the subscribed rows, if known: batches are then
        :class:`~tidegate.runtime.frames.SubscribeChanges` batches (``to_arrow()``, ``to_pandas()``)."""

    def deliver(self, batch: SubscribeBatchOut) -> bool:
        """Called by the driver; False when the buffer overflowed (the subscribe must be dropped)."""
        if self._buffer.ended:
            return True
        if self._buffer.full():
            self.lagged = True
            self._buffer.end()
            return False
        self._buffer.put(batch)
        self.upper = batch.upper
        if batch.error is not None or not batch.upper.elements:
            self.finished = True
            self._buffer.end()
        return True

    def abort(self) -> None:
        """End the iteration after the buffered batches (the driver is shutting down)."""
        self._buffer.end()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> SubscribeBatchOut:
        batch = await self._buffer.get()
        if batch is None:
            if self.lagged:
                raise SubscribeLagged(self.id, self._buffer.size)
            raise StopAsyncIteration
        if self.schema is not None:
            from tidegate.runtime.frames import SubscribeChanges

            return SubscribeChanges.of(batch, self.schema)
        return batch

    async def aclose(self) -> None:
        """Stop the subscribe (if it still runs) and end the iteration."""
        if self.closed:
            return
        self.closed = True
        self._buffer.end()
        self._on_close(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class EventStream(Generic[T]):
    """Events published after it was opened, as an async iterator (see the module docstring)."""

    def __init__(self, buffer: int, on_close: Callable[[EventStream[T]], None]) -> None:
        self._buffer: _Buffer[T] = _Buffer(max(1, buffer))
        self._on_close = on_close
        self.dropped = 0

    def publish(self, event: T) -> None:
        if self._buffer.ended:
            return
        if self._buffer.full():
            self._buffer.items.popleft()
            self.dropped += 1
        self._buffer.put(event)

    def end(self) -> None:
        self._buffer.end()

    def __aiter__(self) -> EventStream[T]:
        return self

    async def __anext__(self) -> T:
        event = await self._buffer.get()
        if event is None:
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        self._buffer.end()
        self._on_close(self)

    async def __aenter__(self) -> EventStream[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
