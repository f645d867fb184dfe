"""Runs a replica service (``tidegate.replica``'s compute or storage service) on virtual time.

A service's loop and IO work are step functions (see :mod:`tidegate.replica.host`);
:class:`KernelHost` runs them as kernel events:

* the loop's turn runs at once when an event is posted (so a command's
  typed rejection reaches the endpoint synchronously, as a gRPC reader sees
  it), and at the deadline the turn returns;
* each step of a piece of IO work (a follower, a writer, a persist peek, a
  source reader) runs a storage latency after it was asked for, and its
  ``close`` a latency after it is stopped;
* time is the kernel's (``monotonic``; the core's clock is the process's wall
  clock, which clock faults set off: :mod:`.clocks`); no thread, no sleep,
  no wall clock;
* a stopped host (:meth:`KernelHost.pause`, SIGSTOP) runs nothing: turns and
  steps that fall due meanwhile wait, and run when it resumes.

One host per incarnation: a crash kills it, and nothing it scheduled runs
again. A :class:`~tidegate.sim.process.ProcessKilled` raised inside a step
crashes the process (``on_killed``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from tidegate.replica.host import IDLE, Work

from .kernel import EventHandle, Kernel
from .process import ProcessKilled

__all__ = ["KernelHost"]

T = TypeVar("T")


class KernelHost:
    """Runs a replica service (compute or storage) on a :class:`Kernel` (see the module docstring).

    ``latency()`` is the delay of one storage step; ``on_killed()`` is called
    when a step dies of a :class:`ProcessKilled`. One host per incarnation:
    after :meth:`kill` nothing it scheduled runs.
    """

    def __init__(
        self,
        kernel: Kernel,
        latency: Callable[[], int],
        on_killed: Callable[[], None],
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.kernel = kernel
        self.latency = latency
        self.on_killed = on_killed
        self.alive = True
        self.stopped = False
        self._clock = clock_ms
        self._deferred: list[Callable[[], None]] = []

    def kill(self) -> None:
        self.alive = False

    def pause(self) -> None:
        """SIGSTOP: nothing runs until :meth:`resume`."""
        self.stopped = True

    def resume(self) -> None:
        """SIGCONT: whatever fell due meanwhile runs now, in order."""
        self.stopped = False
        deferred, self._deferred = self._deferred, []
        for fn in deferred:
            if self.stopped or not self.alive:
                break
            fn()

    def defer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the stopped host resumes."""
        self._deferred.append(fn)

    def monotonic(self) -> float:
        return self.kernel.now_ms / 1000

    def wall_ms(self) -> int:
        return self.kernel.now_ms if self._clock is None else self._clock()

    def run_loop(self, turn: Callable[[], float | None]) -> _KernelLoop:
        loop = _KernelLoop(self, turn)
        loop.wake()
        return loop

    def spawn(self, name: str, work: Work) -> _KernelTask:
        return _KernelTask(self, work)

    def wait(self, done: Future[T]) -> T:
        if not done.done():  # the turn ran inline when the command was posted: never here
            raise RuntimeError("the replica loop did not handle a command at once")
        return done.result()

    def at_ms(self, deadline_s: float) -> int:
        """The first virtual millisecond at which :meth:`monotonic` reaches ``deadline_s``
        (and never now: a turn that asks for now again would spin)."""
        ms = math.ceil(deadline_s * 1000)
        if ms / 1000 < deadline_s:
            ms += 1
        return max(ms, self.kernel.now_ms + 1)

    def call(self, fn: Callable[[], T]) -> T | None:
        """``fn()``, unless the process dies in it (then the replica crashes)."""
        try:
            return fn()
        except ProcessKilled:
            if self.alive:
                self.kill()
                self.on_killed()
            return None


class _KernelLoop:
    """The service's loop: turns run inline when woken, and at the deadline they return."""

    def __init__(self, host: KernelHost, turn: Callable[[], float | None]) -> None:
        self.host = host
        self.turn = turn
        self.timer: EventHandle | None = None
        self.running = False
        self.again = False
        self.ended = False

    def wake(self) -> None:
        if self.ended or not self.host.alive:
            return
        if self.host.stopped:
            self.host.defer(self.wake)
            return
        if self.running:  # posted from inside a turn: one more turn after this one
            self.again = True
            return
        self.running = True
        try:
            deadline: float | None = None
            self.again = True
            while self.again and self.host.alive:
                self.again = False
                deadline = self.host.call(self.turn)
                if deadline is None:
                    self.ended = True
                    break
        finally:
            self.running = False
        at = None if deadline is None or not self.host.alive else self.host.at_ms(deadline)
        if self.timer is not None:
            if self.timer.at_ms == at:
                return  # the next turn is due then already
            self.timer.cancel()
            self.timer = None
        if at is not None and not self.ended:
            self.timer = self.host.kernel.call_at(at, self._due)

    def _due(self) -> None:
        self.timer = None
        self.wake()

    def stop(self) -> None:
        self.ended = True
        if self.timer is not None:
            self.timer.cancel()

    def join(self, timeout: float) -> None:
        pass


class _KernelTask:
    """One piece of the service's IO work: each step a storage latency after it was asked for."""

    def __init__(self, host: KernelHost, work: Work) -> None:
        self.host = host
        self.work = work
        self.timer: EventHandle | None = None
        self.stopped = False
        self._schedule(0)

    def _schedule(self, delay_ms: int) -> None:
        kernel = self.host.kernel
        at = kernel.now_ms + delay_ms + self.host.latency()
        if self.timer is not None and not self.timer.cancelled:
            if self.timer.at_ms <= at:
                return  # a step is due sooner anyway
            self.timer.cancel()
        self.timer = kernel.call_at(at, self._run)

    def wake(self) -> None:
        if not self.stopped and self.host.alive:
            self._schedule(0)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.host.alive:
            self.host.kernel.call_later(self.host.latency(), self._close)

    def join(self, timeout: float) -> None:
        pass

    def _run(self) -> None:
        self.timer = None
        if self.stopped or not self.host.alive:
            return
        if self.host.stopped:
            self.host.defer(self.wake)
            return
        delay = self.host.call(self.work.step)
        if self.stopped or not self.host.alive:
            return
        if delay is None:
            self.stopped = True
            self._close()
        elif delay != IDLE:
            self._schedule(math.ceil(delay * 1000))

    def _close(self) -> None:
        if self.host.stopped:
            self.host.defer(self._close)
        elif self.host.alive:
            self.host.call(self.work.close)
