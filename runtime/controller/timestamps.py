"""Where write and read timestamps come from: the :class:`Oracle` port and an in-memory stand-in.

The production oracle is :class:`tidegate.runtime.oracle.TimestampOracle`
(durable in the consensus store); :func:`default_oracle` uses it when given a
consensus store, and :class:`MemoryOracle` (for tests and embedded
throwaway environments) otherwise. :class:`UpperOracle` is the read-only
environment's: it hands out no write timestamps and reads where the tables'
uppers (advanced by another environment) say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tidegate.runtime.platform import wall_ms

__all__ = ["MemoryOracle", "Oracle", "UpperOracle", "default_oracle"]


class Oracle(Protocol):
    """A timestamp oracle: strictly increasing write timestamps, and the freshest readable one."""

    def write_ts(self) -> int:
        """A timestamp after every earlier write timestamp (durably so, for a real oracle)."""
        ...

    def read_ts(self) -> int:
        """A timestamp at which every applied write is visible."""
        ...

    def apply_write(self, ts: int) -> None:
        """Writes at ``ts`` are complete: later reads see them, later writes come after ``ts``."""
        ...

    def write_ts_nowait(self) -> int | None:
        """:meth:`write_ts` if it needs no IO, else ``None``: an event loop calls this first,
        and :meth:`write_ts` from a worker thread only when it must."""
        ...

    def apply_write_nowait(self, ts: int) -> bool:
        """:meth:`apply_write` if it needs no IO; whether it was applied (``False``: nothing
        changed, call :meth:`apply_write` from a worker thread)."""
        ...

    @property
    def epoch(self) -> int:
        """The writer epoch: a durable oracle's incarnation (opening one fences the writers
        of earlier ones); ``0`` for an oracle without one."""
        ...

    def superseded_by(self) -> int | None:
        """Blocking: the epoch of a newer oracle opened since this one (its writer is
        fenced then), else ``None``; never superseded without an epoch."""
        ...


class _WithoutIO:
    """What an oracle that does no IO shares: its calls never wait, and it has no epoch."""

    def write_ts(self) -> int:
        raise NotImplementedError

    def apply_write(self, ts: int) -> None:
        raise NotImplementedError

    def write_ts_nowait(self) -> int:
        return self.write_ts()

    def apply_write_nowait(self, ts: int) -> bool:
        self.apply_write(ts)
        return True

    epoch = 0
    """No epoch: nothing durable fences this oracle's writer."""

    def superseded_by(self) -> int | None:
        return None


class MemoryOracle(_WithoutIO):
    """An oracle in memory, on a millisecond clock: ``write_ts`` is ``max(now, last + 1)``.

    Not durable: after a restart, call :meth:`apply_write` with the highest
    time already written (e.g. every table's upper minus one).
    """

    def __init__(self, clock_ms: Callable[[], int] = wall_ms) -> None:
        self._clock_ms = clock_ms
        self._write = -1
        self._read = 0

    def write_ts(self) -> int:
        self._write = max(self._write + 1, self._clock_ms())
        return self._write

    def read_ts(self) -> int:
        return self._read

    def apply_write(self, ts: int) -> None:
        self._write = max(self._write, ts)
        self._read = max(self._read, ts)


class UpperOracle(_WithoutIO):
    """The oracle of a read-only environment: no writes; reads just below the tables' uppers.

    ``uppers()`` gives the tables' upper as this environment last learned it
    (the writing environment advances it); :meth:`read_ts` is one less, so
    every write the writer acknowledged before those uppers were read shows
    there. :meth:`write_ts` raises ``ReadOnlyEnvironment``; :meth:`apply_write`
    only moves the read timestamp (nothing durable).
    """

    def __init__(self, uppers: Callable[[], int | None]) -> None:
        self._uppers = uppers
        self._read = 0

    def write_ts(self) -> int:
        from tidegate.runtime.errors import ReadOnlyEnvironment

        raise ReadOnlyEnvironment("a write timestamp")

    def read_ts(self) -> int:
        upper = self._uppers()
        if upper is not None and upper - 1 > self._read:
            self._read = upper - 1
        return self._read

    def apply_write(self, ts: int) -> None:
        self._read = max(self._read, ts)


def default_oracle(
    consensus: Any | None, clock_ms: Callable[[], int] = wall_ms, incarnation: str | None = None
) -> Oracle:
    """The durable oracle over ``consensus`` when it exists, else a :class:`MemoryOracle`;
    ``incarnation`` names it in what it writes (a fresh random one by default)."""
    if consensus is not None:
        from tidegate.runtime.oracle import TimestampOracle

        oracle: Oracle = TimestampOracle(consensus, clock_ms=clock_ms, incarnation=incarnation)
        return oracle
    return MemoryOracle(clock_ms)
