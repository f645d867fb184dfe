"""Per-phase timers of the Spark executor, for ``bench/replica.py --phases``.

Off by default (one attribute test per phase); enabled by setting the
environment variable ``TIDEGATE_SPARK_PHASES=1`` before import, or
``PHASES.enabled = True``. Each phase accumulates wall time and the CPU time of
the thread that ran it (driver threads only: the JVM's CPU is not visible
here), so the figures say where a step's time goes, including the background
jobs that compete with it for the cores.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PHASES", "Phases"]


class Phases:
    """Accumulated ``(calls, wall seconds, thread CPU seconds)`` per phase name."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.totals: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the ``with`` body as phase ``name`` (nothing when disabled)."""
        if not self.enabled:
            yield
            return
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            w, c = time.perf_counter() - w0, time.thread_time() - c0
            with self._lock:
                tot = self.totals.setdefault(name, [0.0, 0.0, 0.0])
                tot[0] += 1
                tot[1] += w
                tot[2] += c

    def reset(self) -> None:
        """Forget the accumulated figures."""
        with self._lock:
            self.totals.clear()

    def report(self, per: int = 1) -> str:
        """One line per phase: calls, wall ms and CPU ms, each divided by ``per`` (e.g. steps)."""
        with self._lock:
            items = sorted(self.totals.items(), key=lambda kv: -kv[1][1])
        lines = [f"{'phase':<28}{'calls':>8}{'wall ms':>10}{'cpu ms':>10}"]
        for name, (n, w, c) in items:
            lines.append(f"{name:<28}{n / per:>8.1f}{w * 1000 / per:>10.1f}{c * 1000 / per:>10.1f}")
        return "\n".join(lines)


PHASES = Phases(os.environ.get("TIDEGATE_SPARK_PHASES", "") not in ("", "0"))
"""The process's timers (one executor's phases are usually all there is to see)."""
