"""The outgoing half of the bridge: callers queue without waiting for the loop thread,
in order, with backpressure, failure and close; from trio and from asyncio callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.transport.aio_thread import AioThread, CallerOutbox, caller_post

pytestmark = pytest.mark.timeout(60)

BACKENDS = ["trio", "asyncio"]


@pytest.fixture(scope="module")
def aio() -> Iterator[AioThread]:
    thread = AioThread("test-outbox").start()
    yield thread
    thread.stop()


class Drainer:
    """A consumer on the loop thread that takes batches, gated so a test can hold it back."""

    def __init__(self, aio: AioThread, outbox: CallerOutbox[int]) -> None:
        self.outbox = outbox
        self.got: list[int] = []
        self.batches = 0
        self.gate = threading.Event()
        self.gate.set()
        self.finished = threading.Event()
        aio.submit(self.run())

    async def run(self) -> None:
        try:
            while items := await self.outbox.take():
                while not self.gate.is_set():
                    await asyncio.sleep(0.001)
                self.batches += 1
                self.got.extend(items)
                self.outbox.done(len(items))
        finally:
            self.finished.set()


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.001)


@given(
    batches=st.lists(st.lists(st.integers(), max_size=12), max_size=25),
    capacity=st.integers(1, 9),
    backend=st.sampled_from(BACKENDS),
)
def test_everything_put_is_drained_in_order_then_close_ends_the_drainer(
    aio: AioThread, batches: list[list[int]], capacity: int, backend: str
) -> None:
    async def main() -> list[int]:
        outbox: CallerOutbox[int] = CallerOutbox(aio.loop, caller_post(), capacity)
        drainer = Drainer(aio, outbox)
        for batch in batches:
            await outbox.put_many(batch)
        outbox.close()
        await anyio.to_thread.run_sync(drainer.finished.wait, 5)
        return drainer.got

    assert anyio.run(main, backend=backend) == [x for b in batches for x in b]


@pytest.mark.parametrize("backend", BACKENDS)
def test_put_does_not_wait_for_the_drainer_until_capacity_is_reached(
    aio: AioThread, backend: str
) -> None:
    async def main() -> None:
        outbox: CallerOutbox[int] = CallerOutbox(aio.loop, caller_post(), capacity=4)
        drainer = Drainer(aio, outbox)
        drainer.gate.clear()  # the drainer takes a batch, then stalls before consuming it
        await outbox.put_many([1])
        await eventually(lambda: outbox._unconsumed == 1 and not outbox._queue)
        await outbox.put_many([2, 3])
        await outbox.put_many([4, 5, 6])  # 3 unconsumed < 4: queued whole, though it overfills
        blocked = anyio.Event()
        done = anyio.Event()

        async def put_more() -> None:
            blocked.set()
            await outbox.put_many([7])
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(put_more)
            await blocked.wait()
            await anyio.sleep(0.05)
            assert not done.is_set(), "a full outbox must hold the sender back"
            drainer.gate.set()
            await done.wait()
        outbox.close()
        await anyio.to_thread.run_sync(drainer.finished.wait, 5)
        assert drainer.got == [1, 2, 3, 4, 5, 6, 7]

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sender_cancelled_while_held_back_queues_nothing(aio: AioThread, backend: str) -> None:
    async def main() -> None:
        outbox: CallerOutbox[int] = CallerOutbox(aio.loop, caller_post(), capacity=1)
        drainer = Drainer(aio, outbox)
        drainer.gate.clear()
        await outbox.put_many([1])
        with anyio.move_on_after(0.05) as scope:
            await outbox.put_many([2])
        assert scope.cancelled_caught
        drainer.gate.set()
        await outbox.put_many([3])
        outbox.close()
        await anyio.to_thread.run_sync(drainer.finished.wait, 5)
        assert drainer.got == [1, 3]

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fail_wakes_held_back_senders_and_every_later_put_raises(
    aio: AioThread, backend: str
) -> None:
    async def main() -> None:
        outbox: CallerOutbox[int] = CallerOutbox(aio.loop, caller_post(), capacity=2)
        drainer = Drainer(aio, outbox)
        drainer.gate.clear()
        await outbox.put_many([1])
        await eventually(lambda: not outbox._queue)
        await outbox.put_many([2])  # 1 unconsumed: queued behind the stalled drainer

        async def fail_soon() -> None:
            await anyio.sleep(0.05)
            aio.loop.call_soon_threadsafe(outbox.fail, ConnectionError("lost"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(fail_soon)
            with pytest.raises(ConnectionError, match="lost"):
                await outbox.put_many([3])  # held back, then woken by the failure
        with pytest.raises(ConnectionError, match="lost"):
            await outbox.put_many([])
        outbox.fail(RuntimeError("second"))  # the first failure stands
        with pytest.raises(ConnectionError):
            await outbox.put_many([4])
        drainer.gate.set()
        await anyio.to_thread.run_sync(drainer.finished.wait, 5)
        assert drainer.got == [1]  # what was queued at the failure is dropped

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_awake_drainer_needs_no_wakeup(aio: AioThread, backend: str) -> None:
    async def main() -> None:
        outbox: CallerOutbox[int] = CallerOutbox(aio.loop, caller_post(), capacity=10_000)
        drainer = Drainer(aio, outbox)
        await eventually(lambda: outbox._drainer_idle)
        drainer.gate.clear()
        await outbox.put_many([0])  # wakes the idle drainer, which then stalls at the gate
        await eventually(lambda: not outbox._queue)
        for i in range(1, 1000):
            await outbox.put_many([i])
        assert outbox.wakeups == 1
        drainer.gate.set()
        outbox.close()
        await anyio.to_thread.run_sync(drainer.finished.wait, 5)
        assert drainer.got == list(range(1000))
        assert drainer.batches == 2

    anyio.run(main, backend=backend)


def test_a_put_after_the_loop_thread_stopped_raises_the_loop_gone_error() -> None:
    thread = AioThread("stops").start()

    async def main() -> None:
        outbox: CallerOutbox[int] = CallerOutbox(
            thread.loop, caller_post(), 4, lambda: ConnectionError("loop gone")
        )
        Drainer(thread, outbox)
        await eventually(lambda: outbox._drainer_idle)
        await anyio.to_thread.run_sync(thread.stop)
        with pytest.raises(ConnectionError, match="loop gone"):
            await outbox.put_many([1])
        with pytest.raises(ConnectionError, match="loop gone"):
            await outbox.put_many([2])

    anyio.run(main, backend="trio")


def test_capacity_must_be_positive(aio: AioThread) -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="positive"):
            CallerOutbox(aio.loop, caller_post(), 0)

    anyio.run(main, backend="trio")
