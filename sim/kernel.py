"""Virtual time: a discrete-event queue for the simulated world, interleaved with trio tasks.

The world (network deliveries, replica steps, storage latencies of replicas,
faults, checks) runs as callbacks on a :class:`Kernel`, ordered by virtual
time and then by the order they were scheduled. The product (the runtime's
driver, ``Environment`` and clients) runs as ordinary trio tasks that sleep,
wait and time out on trio's clock. :meth:`Kernel.run` steps both on one
virtual clock (a :class:`trio.testing.MockClock` it jumps by hand):

1. while any task can run, let the tasks run (``wait_all_tasks_blocked``);
2. once every task waits, the next thing to happen is either the kernel's
   next event or the earliest trio deadline (a sleep or timeout of some
   task); jump the clock there and run it;
3. a kernel event never runs after a task deadline it follows, and a task
   never waits on an event the kernel has already passed.

With trio's scheduler made deterministic (:func:`deterministic_scheduling`),
the same seed therefore gives the same interleaving, byte for byte. Virtual
time is an integer number of milliseconds since the run started.
"""

from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
import trio.lowlevel
import trio.testing

__all__ = ["EventHandle", "Kernel", "deterministic_scheduling", "run_virtual"]

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
    """An event queue over virtual milliseconds (see the module docstring)."""

    def __init__(self) -> None:
        self.now_ms = 0
        # (at_ms, seq, handle): tuples compare in C, and seq is unique, so handles never compare.
        self._queue: list[tuple[int, int, EventHandle]] = []
        self._seq = 0
        self.events_run = 0
        self.task_wakeups = 0
        """How many times the kernel let trio tasks run (a cost figure)."""
        self._origin: float | None = None
        self._closed = False

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

    # -- on trio's clock ---------------------------------------------------------------------
    async def sleep(self, delay_ms: int) -> None:
        """Wait ``delay_ms`` virtual ms as a kernel event (a trio task only; cancellable).

        Cheaper than ``trio.sleep``, whose deadline ends in a cancellation (a cancel scope
        and an exception per sleep); the wait is a kernel event like any other.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        task = trio.lowlevel.current_task()
        handle = self.call_later(delay_ms, trio.lowlevel.reschedule, task)

        def abort(_: Any) -> trio.lowlevel.Abort:
            handle.cancel()
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def close(self) -> None:
        """The run is over and nothing drives the kernel any more: wake every task sleeping on
        it now, and let later sleeps return at once.

        A task shielded from the run's cancellation (a DDL carried out to its end, waiting out
        a full disk) would otherwise wait for ever on an event no one runs, and the run would
        never end; woken, it finds its process dead and unwinds."""
        self._closed = True
        for _, _, handle in sorted(self._queue):
            if not handle.cancelled and handle.callback is trio.lowlevel.reschedule:
                handle.cancel()
                handle.callback(*handle.args)

    def _ms(self, t: float) -> int:
        assert self._origin is not None
        return round((t - self._origin) * 1_000_000) // 1000

    async def run(self, until_ms: int) -> None:
        """Run tasks and events until virtual time ``until_ms`` (see the module docstring).

        The run's clock must be a :class:`trio.testing.MockClock`.
        """
        clock = trio.lowlevel.current_clock()
        if not isinstance(clock, trio.testing.MockClock):
            raise TypeError("Kernel.run needs trio's MockClock (see run_virtual)")
        if self._origin is None:
            self._origin = clock.current_time() - self.now_ms / 1000
        origin = self._origin
        # trio's run queue and deadlines, read directly: current_statistics() builds an I/O
        # statistics object (an epoll call) every time, and this loop asks once per event.
        runner = _runner()
        runq, deadlines = runner.runq, runner.deadlines
        idle = trio.testing.wait_all_tasks_blocked
        end = origin + until_ms / 1000
        while True:
            if runq:
                self.task_wakeups += 1
                await idle()
                continue
            now = clock.current_time()
            task_at = deadlines.next_deadline()
            if task_at < now:
                task_at = now
            at = self.next_time()
            event_at = math.inf if at is None else origin + at / 1000
            if event_at < task_at and event_at <= end:
                assert at is not None
                if event_at > now:
                    clock.jump(event_at - now)
                self.now_ms = at
                # Every event of this millisecond before the tasks it wakes (they run at the
                # same virtual time either way; one scheduling round instead of one per event).
                while self.next_time() == at:
                    self.run_next()
                continue
            if task_at > end:
                if end > now:
                    clock.jump(end - now)
                self.now_ms = max(self.now_ms, until_ms)
                await trio.lowlevel.checkpoint()  # a caller looping on run() stays cancellable
                return
            if task_at > now:
                clock.jump(task_at - now)
            self.now_ms = max(self.now_ms, self._ms(task_at))
            self.task_wakeups += 1
            await idle()


def _runner() -> Any:
    """trio's running ``Runner`` (its ``runq`` and ``deadlines``; no public API has them)."""
    try:
        from trio._core._run import GLOBAL_RUN_CONTEXT

        runner = GLOBAL_RUN_CONTEXT.runner
        runner.runq, runner.deadlines.next_deadline  # noqa: B018 - fail here if renamed
    except (ImportError, AttributeError) as e:  # pragma: no cover - a trio without them
        raise RuntimeError(
            f"trio {trio.__version__} has no Runner.runq / Runner.deadlines: the simulator's "
            "kernel cannot interleave its events with trio's tasks"
        ) from e
    return runner


@contextlib.contextmanager
def deterministic_scheduling(seed: int) -> Iterator[None]:
    """Make trio's scheduler deterministic for ``seed`` (inside the block; restored after).

    trio shuffles each batch of runnable tasks with a module-level RNG, and its
    deterministic mode (the one its Hypothesis plugin switches on) first sorts
    the batch by task creation order. Both live in ``trio._core._run``: there
    is no public switch, so this sets them and restores them afterwards.
    """
    try:
        from trio._core import _run as run_module

        rng = run_module._r
        flag = run_module._ALLOW_DETERMINISTIC_SCHEDULING
    except (ImportError, AttributeError) as e:  # pragma: no cover - a trio without them
        raise RuntimeError(
            f"trio {trio.__version__} has no deterministic scheduling switch "
            "(trio._core._run._r / _ALLOW_DETERMINISTIC_SCHEDULING): the simulator cannot "
            "make runs reproducible with it"
        ) from e
    state = rng.getstate()
    run_module._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    rng.seed(seed)
    try:
        yield
    finally:
        run_module._ALLOW_DETERMINISTIC_SCHEDULING = flag  # type: ignore[misc]
        rng.setstate(state)


def run_virtual(main: Callable[[], Awaitable[T]], *, seed: int = 0) -> T:
    """Run ``main`` under trio on a virtual clock, with the scheduler made deterministic by ``seed``.

    Time moves only when something drives it: :meth:`Kernel.run`, or trio's
    autojump when nothing else runs (tests that need no kernel).
    """
    clock = trio.testing.MockClock(autojump_threshold=0)
    with deterministic_scheduling(seed):
        return trio.run(main, clock=clock)
