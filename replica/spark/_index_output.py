"""``IndexOutput``: where an index export keeps its output -- the driver while small, Spark after.

An index answers peeks at any time in ``[since, upper)``. While it holds at
most ``memory_rows`` distinct rows its history is an
:class:`~tidegate.spec.executor.IndexHistory` in the driver (a point peek
costs microseconds, never a Spark job). The step that takes it past that size
starts moving the history, once and for good, into a
:class:`~.index_history.SparkIndexHistory`: from then on the driver holds only
a bounded buffer of recent updates, and every peek is one Spark job (about
100 ms for a key lookup, seconds for a scan of millions of rows), so a large
index costs the cluster's memory, not the driver's.

The move runs in the background (one thread, :data:`_MOVER`, its jobs in the
background scheduler pool): loading a million rows into Spark takes seconds,
and a replica whose step waited for it would stop reporting frontiers and
answering peeks meanwhile. Until the load is done the driver's history goes
on serving reads and taking the steps' updates and compactions; the updates
that arrived meanwhile are then applied to the Spark history and the driver's
copy is dropped (at the next :meth:`IndexOutput.apply` or
:meth:`IndexOutput.compact` after the load finished). Small moves (at most
``inline_move_rows`` updates) happen inline. A move that fails leaves the
history in the driver, counts in :attr:`IndexOutput.move_failures`, and is
tried again after 2, 4, 8, ... steps (at most 1,024).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import SparkSession

from tidegate.spec.executor import ErrorUpdate, IndexHistory
from tidegate.spec.frontier import Row, Update

from .arrangement import BACKGROUND_POOL
from .index_history import SparkIndexHistory
from .phases import PHASES

__all__ = ["DEFAULT_INDEX_MEMORY_ROWS", "DEFAULT_INLINE_MOVE_ROWS", "IndexOutput", "IndexStatus"]

DEFAULT_INDEX_MEMORY_ROWS = 1_000_000
"""Indexes with more distinct rows than this keep their history in Spark (see the module docstring)."""

DEFAULT_INLINE_MOVE_ROWS = 10_000
"""Moves of at most this many updates run inside the step (a few tens of ms); larger ones in
the background."""

_MAX_RETRY_STEPS = 1024
"""After ``n`` failed moves the next is tried ``min(2**n, _MAX_RETRY_STEPS)`` steps later."""

_MOVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-index-move")
"""Loads the histories of indexes moving to Spark, one at a time."""


@dataclass(frozen=True)
class IndexStatus:
    """Where an index keeps its history, and what went wrong keeping it there.

    ``failures`` counts failed moves into Spark and failed shipments of a
    Spark-resident history (both keep their rows in the driver and are retried);
    ``error`` is the last one's text.
    """

    location: Literal["driver", "moving", "spark"]
    failures: int = 0
    error: str | None = None


class IndexOutput:
    """An index's output history: an ``IndexHistory`` up to ``memory_rows`` rows, then in Spark.

    ``open_history`` makes the empty Spark history to move into (``memory_rows``
    ``None``: never move); ``inline_move_rows`` is the largest move done inside the
    step rather than in the background. The methods are those of ``IndexHistory``.
    """

    def __init__(
        self,
        key: tuple[int, ...],
        open_history: Callable[[], SparkIndexHistory],
        memory_rows: int | None = DEFAULT_INDEX_MEMORY_ROWS,
        *,
        inline_move_rows: int = DEFAULT_INLINE_MOVE_ROWS,
        spark: SparkSession | None = None,
    ) -> None:
        self.key = key
        self.memory_rows = memory_rows
        self.inline_move_rows = inline_move_rows
        self._open = open_history
        self._spark = spark
        self._mirror: IndexHistory | None = IndexHistory(key)
        self._history: SparkIndexHistory | None = None
        self._since: int | None = None
        self._moving: Future[SparkIndexHistory] | None = None
        self._arrived: tuple[list[Update], list[ErrorUpdate]] = ([], [])
        """What the steps applied to the driver's history since the moving load's snapshot."""
        self.move_failures = 0
        """Moves that failed (the history stayed in the driver; the next step tries again)."""
        self.move_error: BaseException | None = None
        """The last failed move's error."""
        self._retry_in = 0
        """Steps to let pass before the next try after a failed move (doubling, capped)."""

    def records(self) -> int:
        """The distinct rows the index holds in the driver (a history in Spark counts 0 here:
        it lives in the executors' memory, not the replica process's)."""
        return self._mirror.rows if self._mirror is not None else 0

    @property
    def in_spark(self) -> bool:
        """Whether the history has moved to Spark (peeks are Spark jobs from then on)."""
        return self._history is not None

    @property
    def moving(self) -> bool:
        """Whether a background move is under way (reads are still answered from the driver)."""
        return self._moving is not None

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add a step's consolidated updates and errors; move to Spark if the index outgrew memory."""
        with PHASES("mirror.apply"):
            if self._history is not None:
                self._history.apply(updates, errors)
                return
            mirror = self._mirror
            assert mirror is not None
            if self._moving is None:
                mirror.apply(updates, errors)
                if self.memory_rows is not None and mirror.rows > self.memory_rows:
                    self._start_move(mirror)
                return
            ups, errs = list(updates), list(errors)
            mirror.apply(ups, errs)
            self._arrived[0].extend(ups)
            self._arrived[1].extend(errs)
            self._adopt(wait=False)

    def compact(self, since: int) -> None:
        """Times at or before ``since`` merge into ``since``; later accumulations are unchanged."""
        with PHASES("mirror.compact"):
            self._since = since
            if self._history is not None:
                self._history.compact(since)
                return
            assert self._mirror is not None
            self._mirror.compact(since)
            self._adopt(wait=False)

    def settle(self) -> None:
        """Wait for a background move to finish and adopt (or drop) its result."""
        self._adopt(wait=True)

    def status(self) -> IndexStatus:
        """Where the history is and how often keeping it there failed."""
        history = self._history
        failures = self.move_failures
        error = self.move_error
        if history is not None:
            failures += history.ship_failures
            error = history.ship_error or error
        location: Literal["driver", "moving", "spark"] = (
            "spark" if history is not None else "moving" if self._moving is not None else "driver"
        )
        return IndexStatus(location, failures, None if error is None else repr(error))

    def _start_move(self, mirror: IndexHistory) -> None:
        if self._retry_in > 0:
            self._retry_in -= 1
            return
        ups, errs, since = mirror.updates(), mirror.error_updates(), self._since
        if len(ups) > self.inline_move_rows:
            self._moving = _MOVER.submit(self._load_in_background, ups, errs, since)
            return
        try:
            history = self._load(ups, errs, since)
        except Exception as e:
            self._failed(e)
            return
        self._history, self._mirror = history, None

    def _load_in_background(
        self, ups: list[Update], errs: list[ErrorUpdate], since: int | None
    ) -> SparkIndexHistory:
        if self._spark is not None:
            self._spark.sparkContext.setLocalProperty("spark.scheduler.pool", BACKGROUND_POOL)
        return self._load(ups, errs, since)

    def _load(
        self, ups: list[Update], errs: list[ErrorUpdate], since: int | None
    ) -> SparkIndexHistory:
        with PHASES("bg.index_move"):
            history = self._open()
            try:
                if since is not None:
                    history.compact(since)
                history.load(ups, errs)
            except BaseException:
                history.close()
                raise
            return history

    def _adopt(self, *, wait: bool) -> None:
        """Take a finished move's history, with what arrived since its snapshot, in place of the
        driver's; after a failed one, stay in the driver."""
        moving = self._moving
        if moving is None or (not wait and not moving.done()):
            return
        self._moving = None
        arrived, self._arrived = self._arrived, ([], [])
        try:
            history = moving.result()
        except Exception as e:
            self._failed(e)
            return
        try:
            history.apply(*arrived)
            if self._since is not None and history.since != self._since:
                history.compact(self._since)
        except Exception as e:
            history.close()
            self._failed(e)
            return
        self._history, self._mirror = history, None

    def _failed(self, error: BaseException) -> None:
        self.move_failures += 1
        self.move_error = error
        self._retry_in = min(2**self.move_failures, _MAX_RETRY_STEPS)

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
        """Release the Spark history, if any (the index was dropped); a move under way releases
        its history when it finishes."""
        if self._history is not None:
            self._history.close()
            self._history = None
        moving, self._moving = self._moving, None
        if moving is not None:
            moving.add_done_callback(_close_result)


def _close_result(moving: Future[SparkIndexHistory]) -> None:
    if not moving.cancelled() and moving.exception() is None:
        moving.result().close()
