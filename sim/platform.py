"""The runtime's :class:`~tidegate.runtime.platform.Platform` inside a simulation.

The controller process runs the production runtime over this platform:

* ``clock_ms`` is the process's wall clock: the virtual clock (the kernel's
  milliseconds), set off by the clock faults (:mod:`.clocks`);
* ``run_blocking`` runs a storage call inline, after a simulated latency on
  the way there and another on the way back (each drawn from the run's
  choices, times the "slow storage" factor, plus any stall a slow fsync
  charged to the process); a call reaches the disk only
  while the process lives, and if the process dies inside it (a crash point)
  or while waiting for its answer, the calling task never resumes: the world
  cancels the whole process, as ``kill -9`` would; ``run_brief`` is the
  same (production runs those calls on the event loop, which a simulated
  latency does not change: the caller waits either way); while the process
  is stopped (:class:`~.pause.Pause`) a call waits before it reaches the disk
  and before its answer comes back;
* ``new_id`` comes from the process's incarnation (deterministic);
* no background threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .choices import ChoiceSource
from .kernel import Kernel
from .pause import Pause
from .process import ProcessKilled, SimProcess
from .storage import StorageFaults

__all__ = ["STORAGE_LATENCY_MS", "SimPlatform"]

T = TypeVar("T")

STORAGE_LATENCY_MS = (1, 4)
"""The range of each leg (request, answer) of a storage call, in virtual ms."""


class SimPlatform:
    """The platform of one simulated process (see the module docstring)."""

    threads = False

    def __init__(
        self,
        kernel: Kernel,
        process: SimProcess,
        latencies: ChoiceSource,
        faults: StorageFaults,
        kill: Callable[[SimProcess], None],
        *,
        pause: Pause | None = None,
        clock_ms: Callable[[], int] | None = None,
        count: Callable[[str], None] | None = None,
    ) -> None:
        self._kernel = kernel
        self._process = process
        self._latencies = latencies
        self._faults = faults
        self._kill = kill
        self.pause = pause if pause is not None else Pause()
        self._clock = clock_ms
        self._count = count
        self.calls = 0

    def clock_ms(self) -> int:
        return self._kernel.now_ms if self._clock is None else self._clock()

    def new_id(self) -> str:
        return self._process.new_id()

    def _leg_ms(self) -> int:
        low, high = STORAGE_LATENCY_MS
        return self._latencies.integer(low, high) * self._faults.slow_factor

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        proc, pause = self._process, self.pause
        await self._kernel.sleep(self._leg_ms())
        if pause.stopped:  # stopped on its way to the disk: it lands once the process runs
            await pause.gate()
            if self._count is not None and proc.alive:
                self._count("storage_call_delayed_past_a_stop")
        if not proc.alive:
            raise ProcessKilled(proc.name, "a storage call")  # unwinds shielded work too
        self.calls += 1
        try:
            result = fn(*args)
        except ProcessKilled:
            self._kill(proc)
            raise
        self._faults.take_stop(proc.name)  # an armed stop struck inside the call: it stops now
        stall = self._faults.take_stall(proc.name)
        await self._kernel.sleep(self._leg_ms() + stall)
        await pause.gate()
        if not proc.alive:
            raise ProcessKilled(proc.name, "a storage call")
        return result

    run_brief = run_blocking
