"""Each simulated process's wall clock: the virtual clock, set off by the clock faults.

Real machines' clocks are not the true time: NTP steps them back and forth,
a VM resumed from a snapshot is behind, and between corrections they drift
apart. :class:`Clocks` gives every process of the world (``controller``, each
replica by name, ``storage``) a wall clock of its own: the kernel's virtual
milliseconds plus an *offset*, which the fault plan sets

* by a **jump** (:meth:`Clocks.jump`): off by ``skew_ms`` from a time on, for a
  while, then stepped back to the true time;
* by a **drift** (:meth:`Clocks.drift`): off by a growing amount, reaching
  ``skew_ms`` at the end, then stepped back.

Only wall clocks are set off: what the product reads as *the time* (the
oracle's clock, leases and heartbeats, the storage replica's binding times,
a replica's clock). Elapsed time -- sleeps, timeouts, a replica's tick --
follows the virtual clock (a monotonic clock does not jump). A clock never
reads below 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .kernel import Kernel

__all__ = ["Clocks"]


@dataclass(frozen=True, slots=True)
class _Skew:
    start_ms: int
    end_ms: int
    skew_ms: int
    drift: bool

    def at(self, now_ms: int) -> int:
        if not self.start_ms <= now_ms < self.end_ms:
            return 0
        if not self.drift:
            return self.skew_ms
        span = max(1, self.end_ms - self.start_ms)
        return self.skew_ms * (now_ms - self.start_ms) // span


class Clocks:
    """The world's per-process wall clocks (see the module docstring)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._skews: dict[str, list[_Skew]] = {}
        self.reads_off = 0
        """How many clock reads were off the true time (a cost-free "it mattered" figure)."""

    def jump(self, process: str, skew_ms: int, for_ms: int) -> None:
        """``process``'s clock is ``skew_ms`` off from now for ``for_ms``."""
        now = self.kernel.now_ms
        self._skews.setdefault(process, []).append(_Skew(now, now + for_ms, skew_ms, False))

    def drift(self, process: str, skew_ms: int, for_ms: int) -> None:
        """``process``'s clock drifts to ``skew_ms`` off over the next ``for_ms``."""
        now = self.kernel.now_ms
        self._skews.setdefault(process, []).append(_Skew(now, now + for_ms, skew_ms, True))

    def offset(self, process: str) -> int:
        """How far ``process``'s clock is off now (ms; negative: behind)."""
        skews = self._skews.get(process)
        if not skews:
            return 0
        now = self.kernel.now_ms
        live = [s for s in skews if s.end_ms > now]
        if len(live) != len(skews):
            if live:
                self._skews[process] = live
            else:
                del self._skews[process]
        return sum(s.at(now) for s in live)

    def now_ms(self, process: str) -> int:
        """``process``'s wall clock now."""
        if not self._skews:
            return self.kernel.now_ms
        off = self.offset(process)
        if off:
            self.reads_off += 1
        return max(0, self.kernel.now_ms + off)

    def clock(self, process: str) -> Callable[[], int]:
        """``process``'s wall clock, as a function."""
        return lambda: self.now_ms(process)

    def heal(self) -> None:
        """Every clock shows the true time again (the quiet phase)."""
        self._skews.clear()
