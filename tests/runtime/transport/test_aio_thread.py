"""The anyio-to-asyncio-thread bridge: results, errors, cancellation, bounded and
coalesced item delivery, shutdown; from trio and from asyncio callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.transport.aio_thread import AioThread, CallerInbox, caller_post

pytestmark = pytest.mark.timeout(60)

BACKENDS = ["trio", "asyncio"]


@pytest.fixture(scope="module")
def aio() -> Iterator[AioThread]:
    thread = AioThread("test-aio").start()
    yield thread
    thread.stop()


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_returns_the_result_from_the_loop_thread(aio: AioThread, backend: str):
    async def on_loop() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    async def main() -> str:
        return await aio.call(on_loop())

    assert anyio.run(main, backend=backend) == "test-aio"


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_raises_the_coroutines_error(aio: AioThread, backend: str):
    async def fails() -> None:
        raise KeyError("boom")

    async def main() -> None:
        with pytest.raises(KeyError, match="boom"):
            await aio.call(fails())

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelling_the_caller_cancels_the_coroutine(aio: AioThread, backend: str):
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main() -> None:
        with anyio.move_on_after(0.05):
            await aio.call(forever())

    anyio.run(main, backend=backend)
    assert cancelled.wait(5)


def test_an_abandoned_call_can_be_left_to_finish(aio: AioThread):
    finished = threading.Event()

    async def slow() -> None:
        await asyncio.sleep(0.1)
        finished.set()

    async def main() -> None:
        with anyio.move_on_after(0.01):
            await aio.call(slow(), cancel_on_abandon=False)

    anyio.run(main, backend="trio")
    assert finished.wait(5)


def produce(aio: AioThread, inbox: CallerInbox[int], items: list[int], end: Exception) -> None:
    async def producer() -> None:
        for item in items:
            await inbox.put(item)
        inbox.finish(end)

    aio.submit(producer())


@pytest.mark.parametrize("backend", BACKENDS)
def test_inbox_is_bounded_by_credits(aio: AioThread, backend: str):
    seen_unconsumed: list[int] = []

    async def main() -> None:
        inbox: CallerInbox[int] = CallerInbox(aio.loop, caller_post(), capacity=8)
        produce(aio, inbox, list(range(500)), EOFError("done"))
        got = []
        for _ in range(500):
            await anyio.sleep(0)
            # Credits not yet returned bound what is queued on both sides together.
            seen_unconsumed.append(len(inbox._ready) + len(inbox._pending))
            got.append(await inbox.get())
        assert got == list(range(500))
        with pytest.raises(EOFError):
            await inbox.get()

    anyio.run(main, backend=backend)
    assert max(seen_unconsumed) <= 8


@pytest.mark.parametrize("backend", BACKENDS)
def test_items_produced_during_a_pending_hop_ride_on_it(aio: AioThread, backend: str):
    async def main() -> None:
        inbox: CallerInbox[int] = CallerInbox(aio.loop, caller_post(), capacity=1000)

        async def burst() -> None:
            for i in range(1000):
                await inbox.put(i)
            inbox.finish(EOFError())

        # Block the caller's loop while the producer runs: every item rides few hops.
        aio.run_sync(burst())
        got = [await inbox.get() for _ in range(1000)]
        assert got == list(range(1000))
        assert inbox.hops <= 2

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelled_get_loses_nothing(aio: AioThread, backend: str):
    async def main() -> None:
        inbox: CallerInbox[int] = CallerInbox(aio.loop, caller_post(), capacity=4)
        with anyio.move_on_after(0.02):
            await inbox.get()
        produce(aio, inbox, [1, 2, 3], EOFError())
        assert [await inbox.get() for _ in range(3)] == [1, 2, 3]

    anyio.run(main, backend=backend)


@given(
    items=st.lists(st.integers(), max_size=60),
    capacity=st.integers(1, 9),
    backend=st.sampled_from(BACKENDS),
)
def test_inbox_delivers_everything_in_order_then_the_end(
    aio: AioThread, items: list[int], capacity: int, backend: str
):
    async def main() -> list[int]:
        inbox: CallerInbox[int] = CallerInbox(aio.loop, caller_post(), capacity=capacity)
        produce(aio, inbox, items, EOFError("end"))
        got = []
        while True:
            try:
                got.append(await inbox.get())
            except EOFError:
                return got

    assert anyio.run(main, backend=backend) == items


def test_close_locally_drops_the_queue_and_ends_every_get(aio: AioThread):
    async def main() -> None:
        inbox: CallerInbox[int] = CallerInbox(aio.loop, caller_post(), capacity=4)
        produce(aio, inbox, [1, 2], EOFError())
        assert await inbox.get() == 1
        inbox.close_locally(RuntimeError("closed"))
        with pytest.raises(RuntimeError, match="closed"):
            await inbox.get()

    anyio.run(main, backend="trio")


def test_stop_cancels_running_tasks_and_joins_the_thread():
    thread = AioThread("short-lived").start()
    cleaned = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    thread.submit(forever())
    loop = thread.loop
    thread.stop()
    assert cleaned.is_set()
    assert not thread.running
    assert loop.is_closed()
    thread.stop()  # idempotent
    assert thread.start().running  # and restartable
    thread.stop()


def test_results_for_a_finished_caller_are_dropped(aio: AioThread):
    inbox: list[CallerInbox[int]] = []

    async def main() -> None:
        inbox.append(CallerInbox(aio.loop, caller_post(), capacity=2))

    anyio.run(main, backend="trio")
    produce(aio, inbox[0], [1], EOFError())  # posts a hop to a trio run that has ended
    assert aio.run_sync(asyncio.sleep(0, "alive"), timeout=5) == "alive"


def test_caller_post_outside_an_event_loop_is_an_error():
    with pytest.raises(RuntimeError, match="trio or asyncio"):
        caller_post()
