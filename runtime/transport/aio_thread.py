"""A bridge from anyio code (trio or asyncio) to one dedicated asyncio thread.

grpc.aio only runs on an asyncio loop, and wants exactly one such loop per
process with every channel created on it (docs/reference/simulation-and-style.md
§3). :class:`AioThread` owns that loop in a thread of its own. Callers on any
anyio backend submit coroutines to it (:meth:`AioThread.call`) and receive
streams of items from it (:class:`CallerInbox`); results cross back by scheduling a
callback on the caller's own loop (``TrioToken.run_sync_soon`` on trio,
``loop.call_soon_threadsafe`` on asyncio), so no thread is spent per call and
the caller never touches asyncio objects of the other loop.

* Cancelling the caller cancels the submitted coroutine (unless told not to).
* :class:`CallerInbox` is bounded by credits: the producer waits when the consumer
  is ``capacity`` items behind, and items produced while a hop is pending ride
  on that hop (coalescing).
* :class:`CallerOutbox` is the other direction: callers queue items without waiting
  for the loop thread (only while ``capacity`` items are still unconsumed),
  and one drainer on the loop takes them in order; a drainer already awake
  needs no wakeup (coalescing).
* :meth:`AioThread.stop` cancels what still runs, stops the loop and joins the
  thread; :func:`shared_aio_thread` is the process-wide instance.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel

__all__ = ["AioThread", "CallerInbox", "CallerOutbox", "Post", "caller_post", "shared_aio_thread"]

T = TypeVar("T")

Post = Callable[[Callable[[], None]], None]
"""Runs a callback soon on the caller's event loop thread; callable from any thread."""


def caller_post() -> Post:
    """A :data:`Post` onto the event loop of the calling task (trio or asyncio).

    Callbacks posted after that loop has finished are dropped silently: nobody
    is left to receive them.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        running = loop

        def post_asyncio(callback: Callable[[], None]) -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                running.call_soon_threadsafe(callback)

        return post_asyncio
    import trio

    try:
        token = trio.lowlevel.current_trio_token()
    except RuntimeError:
        raise RuntimeError("caller_post() needs a running trio or asyncio event loop") from None

    def post_trio(callback: Callable[[], None]) -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(callback)

    return post_trio


class AioThread:
    """One asyncio event loop running in a dedicated daemon thread."""

    def __init__(self, name: str = "tidegate-aio") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The thread's loop; starts the thread if needed."""
        self.start()
        if self._loop is None:  # stopped concurrently
            raise RuntimeError(f"{self._name}: the loop thread is stopped")
        return self._loop

    def start(self) -> AioThread:
        """Start the loop thread (idempotent) and wait until the loop runs."""
        with self._lock:
            if self.running:
                return self
            loop = asyncio.new_event_loop()
            started = threading.Event()
            loop.call_soon(started.set)
            thread = threading.Thread(target=self._run, args=(loop,), name=self._name, daemon=True)
            thread.start()
            started.wait()
            self._loop, self._thread = loop, thread
            return self

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every task on the loop, let them finish, stop the loop, join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None or not thread.is_alive():
                return
            future = asyncio.run_coroutine_threadsafe(_cancel_all_then_stop(), loop)
            try:
                future.result(timeout)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            self._loop = self._thread = None

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop; for synchronous callers."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block this (non-loop) thread for its result."""
        return self.submit(coro).result(timeout)

    async def call(self, coro: Coroutine[Any, Any, T], *, cancel_on_abandon: bool = True) -> T:
        """Run ``coro`` on the loop and await its result from an anyio task.

        If the calling task is cancelled, the coroutine is cancelled too, unless
        ``cancel_on_abandon`` is false (then it runs to completion unobserved).
        """
        post = caller_post()
        done = anyio.Event()
        future = self.submit(coro)
        future.add_done_callback(lambda _: post(done.set))
        try:
            await done.wait()
        except BaseException:
            if cancel_on_abandon:
                future.cancel()
            raise
        return future.result()


async def _cancel_all_then_stop() -> None:
    current = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    loop = asyncio.get_running_loop()
    await loop.shutdown_asyncgens()
    loop.call_soon(loop.stop)


_shared: AioThread | None = None
_shared_lock = threading.Lock()


def shared_aio_thread() -> AioThread:
    """The process-wide loop thread (started on first use, stopped at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = AioThread()
            atexit.register(_shared.stop)
        return _shared.start()


class CallerInbox(Generic[T]):
    """Items produced on the loop thread, consumed by anyio tasks on one caller loop.

    The producer calls :meth:`put` (awaits a credit) and finally :meth:`finish`
    with the exception every later :meth:`get` raises once the items before it
    are consumed. Consumers call :meth:`get`; cancelling it loses nothing.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, post: Post, capacity: int = 256) -> None:
        if capacity < 1:
            raise ValueError(f"inbox capacity must be positive, got {capacity}")
        self._loop = loop
        self._post = post
        self.capacity = capacity
        # Shared between the threads, under the lock.
        self._lock = threading.Lock()
        self._pending: list[T] = []
        self._pending_end: BaseException | None = None
        self._hop_scheduled = False
        self.hops = 0
        # Loop thread only.
        self._credits = capacity
        self._credit_event: asyncio.Event | None = None
        # Caller thread only.
        self._ready: deque[T] = deque()
        self._end: BaseException | None = None
        self._waiter: anyio.Event | None = None
        self._consumed = 0

    # -- producer side (loop thread) ----------------------------------------------

    async def put(self, item: T) -> None:
        """Hand ``item`` to the consumer; waits while ``capacity`` items are unconsumed."""
        while self._credits <= 0:
            if self._credit_event is None:
                self._credit_event = asyncio.Event()
            self._credit_event.clear()
            await self._credit_event.wait()
        self._credits -= 1
        with self._lock:
            self._pending.append(item)
            self._schedule_hop()

    def finish(self, end: BaseException) -> None:
        """No more items: after the queued ones, :meth:`get` raises ``end`` (first call wins)."""
        with self._lock:
            if self._pending_end is None:
                self._pending_end = end
                self._schedule_hop()

    def _schedule_hop(self) -> None:
        if not self._hop_scheduled:
            self._hop_scheduled = True
            self.hops += 1
            self._post(self._hop)

    def _add_credits(self, n: int) -> None:
        self._credits += n
        if self._credit_event is not None:
            self._credit_event.set()

    # -- consumer side (caller thread) --------------------------------------------

    def _return_credits(self, n: int) -> None:
        with contextlib.suppress(RuntimeError):  # the loop thread has stopped: nothing to credit
            self._loop.call_soon_threadsafe(self._add_credits, n)

    def _hop(self) -> None:
        with self._lock:
            items, self._pending = self._pending, []
            self._hop_scheduled = False
            end = self._pending_end
        self._ready.extend(items)
        if end is not None and self._end is None:
            self._end = end
        if self._waiter is not None:
            self._waiter.set()
            self._waiter = None

    def close_locally(self, end: BaseException) -> None:
        """Consumer side: drop what is queued; every later :meth:`get` raises ``end``."""
        self._ready.clear()
        self._end = end
        if self._waiter is not None:
            self._waiter.set()
            self._waiter = None

    async def get(self) -> T:
        """The next item, waiting for one; raises the end once the items are consumed."""
        await anyio.lowlevel.checkpoint()  # a cancelled caller takes nothing
        while not self._ready:
            if self._end is not None:
                raise self._end
            if self._waiter is None:
                self._waiter = anyio.Event()
            await self._waiter.wait()
        item = self._ready.popleft()
        self._consumed += 1
        if not self._ready or self._consumed * 2 >= self.capacity:
            n, self._consumed = self._consumed, 0
            self._return_credits(n)
        return item

    def get_nowait_all(self) -> list[T]:
        """Every item already on this side, without waiting (may be empty)."""
        items = list(self._ready)
        self._ready.clear()
        if items:
            n, self._consumed = self._consumed + len(items), 0
            self._return_credits(n)
        return items


class CallerOutbox(Generic[T]):
    """Items queued by anyio tasks on one caller loop, drained in order on the loop thread.

    Callers :meth:`put_many`: the items are queued and the call returns
    without waiting for them to be consumed, unless ``capacity`` items are
    still unconsumed (backpressure). One drainer task on the loop thread
    :meth:`take` s everything queued and reports it consumed with :meth:`done`.
    :meth:`fail` (from either thread) drops what is queued: every later
    :meth:`put_many` raises its exception. :meth:`close` lets the drainer
    finish the queued items, then :meth:`take` returns ``[]``.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        post: Post,
        capacity: int = 256,
        loop_gone: Callable[[], BaseException] = lambda: RuntimeError(
            "the loop thread has stopped"
        ),
    ) -> None:
        if capacity < 1:
            raise ValueError(f"outbox capacity must be positive, got {capacity}")
        self._loop = loop
        self._post = post
        self.capacity = capacity
        self._loop_gone = loop_gone
        self.wakeups = 0
        # Shared between the threads, under the lock.
        self._lock = threading.Lock()
        self._queue: list[T] = []
        self._unconsumed = 0
        self._error: BaseException | None = None
        self._closing = False
        self._drainer_idle = False
        self._space: anyio.Event | None = None
        # Loop thread only.
        self._wake = asyncio.Event()

    # -- producer side (caller thread) --------------------------------------------

    async def put_many(self, items: list[T]) -> None:
        """Queue ``items`` (in order, after everything queued before); raise if failed.

        Waits only while ``capacity`` items are unconsumed; a batch is queued
        whole, so one larger than ``capacity`` still goes (after the queue
        falls below it). Cancelled while waiting, nothing of it is queued.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            with self._lock:
                if self._error is not None:
                    raise self._error
                if not items:
                    return
                if self._unconsumed < self.capacity:
                    self._queue.extend(items)
                    self._unconsumed += len(items)
                    wake, self._drainer_idle = self._drainer_idle, False
                    break
                if self._space is None:
                    self._space = anyio.Event()
                space = self._space
            await space.wait()
        if wake:
            self.wakeups += 1
            try:
                self._loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the loop is closed: nobody will ever drain
                self.fail(self._loop_gone())
                raise self._loop_gone() from None
        await anyio.lowlevel.cancel_shielded_checkpoint()

    def fail(self, error: BaseException) -> None:
        """Drop what is queued; every later :meth:`put_many` raises ``error`` (first call wins)."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            self._queue.clear()
            space, self._space = self._space, None
        if space is not None:
            self._post(space.set)
        self._wake_drainer()

    def close(self) -> None:
        """No more items: the drainer gets what is queued, then ``[]``."""
        with self._lock:
            self._closing = True
        self._wake_drainer()

    def _wake_drainer(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: no drainer to wake
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- consumer side (loop thread) -----------------------------------------------

    async def take(self) -> list[T]:
        """Everything queued, in order; waits for at least one item. ``[]``: closed or failed."""
        while True:
            with self._lock:
                if self._error is not None:
                    return []
                if self._queue:
                    items, self._queue = self._queue, []
                    return items
                if self._closing:
                    return []
                self._drainer_idle = True
            # A producer's wakeup can only run at the await below, so clearing here loses none.
            self._wake.clear()
            await self._wake.wait()

    def done(self, n: int) -> None:
        """``n`` items taken have been consumed: room for ``n`` more."""
        with self._lock:
            self._unconsumed -= n
            space = None
            if self._unconsumed < self.capacity:
                space, self._space = self._space, None
        if space is not None:
            self._post(space.set)
