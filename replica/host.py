"""Where a :class:`~tidegate.replica.service.ReplicaService` runs: its clock and its scheduling.

The service is written as step functions that never block and never read a
clock themselves: its loop is one ``turn()`` (handle the posted events, step
the core if due, return when to be called next), and each piece of IO work
(a storage follower, the materialized-view writer, a persist peek) is a
:class:`Work` whose ``step()`` polls once and says when to be called again. A
:class:`ServiceHost` calls them and supplies the time. Two hosts exist:

* :class:`ThreadHost` (production, the default): the loop in one thread and
  each piece of work in a thread of its own, waiting on wall-clock timeouts;
* the simulator's kernel host (``tidegate.sim.kernel_host``): every call
  is an event on the simulation's virtual clock, deterministically ordered.

So the same service code -- command handling, protocol iterations, the IO it
performs, metrics, logs -- runs in production and in the simulation.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, TypeVar

from tidegate.runtime.platform import wall_ms as _wall_ms

__all__ = ["IDLE", "ServiceHost", "Task", "ThreadHost", "Work"]

T = TypeVar("T")

IDLE = math.inf
"""What a :meth:`Work.step` returns to wait until its task is woken (no timeout)."""


class Work(Protocol):
    """IO work done one step at a time by a host (in production, in a thread of its own)."""

    def step(self) -> float | None:
        """Poll once; ``None`` when finished, else seconds until the next step (:data:`IDLE`: until woken).

        ``0.0`` asks to be called again at once (in the simulator: after a storage latency).
        """
        ...

    def close(self) -> None:
        """Release what the work holds; called once after its last step (finished or stopped)."""
        ...


class Task(Protocol):
    """A running loop or piece of work, as its host runs it."""

    def wake(self) -> None:
        """Call it again soon, without waiting for the delay its last step asked for."""
        ...

    def stop(self) -> None:
        """Call it no more (a step running now finishes; then :meth:`Work.close` runs)."""
        ...

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds until it ended (nothing to wait for in the simulator)."""
        ...


class ServiceHost(Protocol):
    """Runs a service's loop and its IO work, and tells it the time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines and latencies)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (the replica core's clock)."""
        ...

    def run_loop(self, turn: Callable[[], float | None]) -> Task:
        """Call ``turn()`` now, then when woken or when the :meth:`monotonic` time it returned
        passes, until it returns ``None``. Turns never overlap."""
        ...

    def spawn(self, name: str, work: Work) -> Task:
        """Start stepping ``work`` (``name`` names its thread), concurrently with the loop."""
        ...

    def wait(self, done: Future[T]) -> T:
        """The result of something the loop does for a caller (a command), once it is done."""
        ...


class _Thread:
    """A thread that calls ``body`` until told to stop, sleeping as it asks."""

    def __init__(self, name: str, body: Callable[[], float | None], end: Callable[[], None]):
        self._body = body
        self._end = end
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def wake(self) -> None:
        self._wakeup.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wakeup.set()

    def join(self, timeout: float) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stopped.is_set():
                self._wakeup.clear()  # before the step: a wake during the step is not lost
                deadline = self._body()
                if deadline is None or self._stopped.is_set():
                    return
                self._wakeup.wait(None if deadline == IDLE else max(0.0, deadline))
        finally:
            self._end()


class ThreadHost:
    """The production host: real threads, the wall clock (see the module docstring)."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return _wall_ms()

    def run_loop(self, turn: Callable[[], float | None]) -> Task:
        def body() -> float | None:
            deadline = turn()
            return None if deadline is None else deadline - time.monotonic()

        t = _Thread("replica-loop", body, lambda: None)
        t.thread.start()
        return t

    def spawn(self, name: str, work: Work) -> Task:
        t = _Thread(name, work.step, work.close)
        t.thread.start()
        return t

    def wait(self, done: Future[T]) -> T:
        return done.result()
