"""What the runtime takes from the world: time, a place for blocking work, fresh identifiers.

Every wall-clock read, worker thread and random identifier of the controller
side of the runtime goes through one :class:`Platform`, so that the same code
runs in production and inside the simulator (FoundationDB's rule: the product
runs unmodified, only the world around it is simulated):

* :data:`REAL` -- the wall clock, ``anyio.to_thread`` for blocking calls
  (SQLite, PostgreSQL, S3, files) except brief ones (see ``run_brief``),
  ``uuid4`` identifiers, background threads allowed (the shard store's
  compaction worker);
* ``tidegate.sim.platform.SimPlatform`` -- the virtual clock, blocking calls
  run inline after a simulated latency (and refused once the simulated
  process has died), identifiers from the run's seed, no threads.

Timing *between* steps (sleeps, timeouts, backoff) is not here: the runtime
uses anyio for it, and anyio follows the event loop's clock (trio's
``MockClock`` in the simulator).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

__all__ = ["REAL", "InlinePlatform", "Platform", "RealPlatform", "wall_ms"]

T = TypeVar("T")


def wall_ms() -> int:
    """The wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


class Platform(Protocol):
    """The runtime's view of the world (see the module docstring)."""

    threads: bool
    """Whether components may start threads of their own (background compaction)."""

    def clock_ms(self) -> int:
        """The current time in milliseconds (the oracle's clock; leases and heartbeats)."""
        ...

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` (storage IO) without blocking the event loop; its result."""
        ...

    async def run_brief(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` that is brief: about a millisecond, mostly CPU, on this
        machine's disk (a small group commit's write to a local store); its result.

        Where :meth:`run_blocking` would hand it to a worker thread, the hop can
        cost more than the call: both threads need the GIL, so nothing overlaps
        but the fsync.
        """
        ...

    def new_id(self) -> str:
        """A fresh identifier, 32 lowercase hex digits (writer ids, blob keys, peek uuids)."""
        ...


class RealPlatform:
    """The production platform: wall clock, worker threads, random identifiers."""

    threads = True

    def clock_ms(self) -> int:
        return wall_ms()

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args)

    async def run_brief(self, fn: Callable[..., T], *args: Any) -> T:
        """Inline on the event loop (which waits out the call, fsync included): with 16 clients
        appending single rows, 0.31 ms of CPU per append against 0.43 ms through a worker
        thread (``bench/appends.py``)."""
        return fn(*args)

    def new_id(self) -> str:
        return uuid.uuid4().hex

    def __repr__(self) -> str:
        return "REAL"


REAL: Platform = RealPlatform()
"""The production platform."""


class InlinePlatform:
    """Blocking calls run inline on the event loop, on the clock given.

    For in-memory stores under a virtual clock (tests of the driver under
    trio's ``MockClock``), where a worker thread would race the clock.
    """

    threads = False

    def __init__(self, clock_ms: Callable[[], int] = wall_ms) -> None:
        self._clock_ms = clock_ms

    def clock_ms(self) -> int:
        return self._clock_ms()

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        await anyio.lowlevel.checkpoint()
        return fn(*args)

    run_brief = run_blocking

    def new_id(self) -> str:
        return uuid.uuid4().hex
