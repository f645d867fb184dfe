"""``IndexOutput``: where an index export keeps its output -- the driver while small, Spark after.

An index answers peeks at any time in ``[since, upper)``. While it holds at
most ``memory_rows`` distinct rows its history is an
:class:`~tidegate.spec.executor.IndexHistory` in the driver (a point peek
costs microseconds, never a Spark job). The step that takes it past that size
moves the history, once and for good, into a
:class:`~.index_history.SparkIndexHistory`: from then on the driver holds only
a bounded buffer of recent updates, and every peek is one Spark job (about
100 ms for a key lookup, seconds for a scan of millions of rows), so a large
index costs the cluster's memory, not the driver's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tidegate.spec.executor import ErrorUpdate, IndexHistory
from tidegate.spec.frontier import Row, Update

from .index_history import SparkIndexHistory
from .phases import PHASES

__all__ = ["DEFAULT_INDEX_MEMORY_ROWS", "IndexOutput"]

DEFAULT_INDEX_MEMORY_ROWS = 1_000_000
"""Indexes with more distinct rows than this keep their history in Spark (see the module docstring)."""


class IndexOutput:
    """An index's output history: an ``IndexHistory`` up to ``memory_rows`` rows, then in Spark.

    ``open_history`` makes the empty Spark history to move into (``memory_rows``
    ``None``: never move). The methods are those of ``IndexHistory``.
    """

    def __init__(
        self,
        key: tuple[int, ...],
        open_history: Callable[[], SparkIndexHistory],
        memory_rows: int | None = DEFAULT_INDEX_MEMORY_ROWS,
    ) -> None:
        self.key = key
        self.memory_rows = memory_rows
        self._open = open_history
        self._mirror: IndexHistory | None = IndexHistory(key)
        self._history: SparkIndexHistory | None = None
        self._since: int | None = None

    @property
    def in_spark(self) -> bool:
        """Whether the history has moved to Spark (peeks are Spark jobs from then on)."""
        return self._history is not None

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add a step's consolidated updates and errors; move to Spark if the index outgrew memory."""
        with PHASES("mirror.apply"):
            if self._history is not None:
                self._history.apply(updates, errors)
                return
            assert self._mirror is not None
            self._mirror.apply(updates, errors)
            if self.memory_rows is not None and self._mirror.rows > self.memory_rows:
                self._move()

    def _move(self) -> None:
        assert self._mirror is not None
        history = self._open()
        if self._since is not None:
            history.compact(self._since)
        history.load(self._mirror.updates(), self._mirror.error_updates())
        self._history, self._mirror = history, None

    def compact(self, since: int) -> None:
        """Times at or before ``since`` merge into ``since``; later accumulations are unchanged."""
        with PHASES("mirror.compact"):
            self._since = since
            if self._history is not None:
                self._history.compact(since)
            else:
                assert self._mirror is not None
                self._mirror.compact(since)

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, restricted to ``keys`` if given."""
        if self._history is not None:
            return self._history.read(time, keys)
        assert self._mirror is not None
        return self._mirror.read(time, keys)

    def updates(self) -> list[Update]:
        """Every held update (what a dataflow importing the index starts from)."""
        if self._history is not None:
            return self._history.updates()
        assert self._mirror is not None
        return self._mirror.updates()

    def error_updates(self) -> list[ErrorUpdate]:
        """Every held error update."""
        if self._history is not None:
            return self._history.error_updates()
        assert self._mirror is not None
        return self._mirror.error_updates()

    def close(self) -> None:
        """Release the Spark history, if any (the index was dropped)."""
        if self._history is not None:
            self._history.close()
