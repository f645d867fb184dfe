"""The runtime's :class:`~tidegate.runtime.platform.Platform` inside a simulation.

The controller process runs the production runtime over this platform:

* ``clock_ms`` is the virtual clock (the kernel's milliseconds);
* ``run_blocking`` runs a storage call inline, after a simulated latency on
  the way there and another on the way back (each drawn from the run's
  choices, times the "slow storage" factor); a call reaches the disk only
  while the process lives, and if the process dies inside it (a crash point)
  or while waiting for its answer, the calling task never resumes: the world
  cancels the whole process, as ``kill -9`` would; ``run_brief`` is the
  same (production runs those calls on the event loop, which a simulated
  latency does not change: the caller waits either way);
* ``new_id`` comes from the process's incarnation (deterministic);
* no background threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .choices import ChoiceSource
from .kernel import Kernel
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
    ) -> None:
        self._kernel = kernel
        self._process = process
        self._latencies = latencies
        self._faults = faults
        self._kill = kill
        self.calls = 0

    def clock_ms(self) -> int:
        return self._kernel.now_ms

    def new_id(self) -> str:
        return self._process.new_id()

    def _leg_ms(self) -> int:
        low, high = STORAGE_LATENCY_MS
        return self._latencies.integer(low, high) * self._faults.slow_factor

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        proc = self._process
        await self._kernel.sleep(self._leg_ms())
        if not proc.alive:
            raise ProcessKilled(proc.name, "a storage call")  # unwinds shielded work too
        self.calls += 1
        try:
            result = fn(*args)
        except ProcessKilled:
            self._kill(proc)
            raise
        await self._kernel.sleep(self._leg_ms())
        if not proc.alive:
            raise ProcessKilled(proc.name, "a storage call")
        return result

    run_brief = run_blocking
