"""One running sink of a :class:`~tidegate.spec.storage_replica.StorageReplica` (internal).

Its methods validate, then mutate, and return the outputs the replica
appends to its outbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from ..errors import SinkCommitNotInFlight, SinkInputRejected, UnrequestedStorageCallback
from ..frontier import Update
from ..ids import GlobalId
from ..plan.schema import Schema
from ..storage.commands import RunSink, SinkStatistics, SourceStatus, StatusUpdate
from ..storage.connections import StorageSinkConnection, sink_pacing_problem
from ._ingestion import Backoff
from ._updates import consolidated, offset_bounds, updates_size, well_formed
from .outputs import (
    CloseSink,
    CommitSink,
    OpenSink,
    ReadSinkInput,
    StopSinkInput,
    StorageReplicaOutput,
)

__all__ = ["SinkRun"]

_time = itemgetter(1)


@dataclass
class _Commit:
    expected: int | None
    lower: int
    upper: int
    count: int
    size: int


class SinkRun:
    """The state of one sink: its target's covered upper, its input read, buffered updates, commit in flight.

    Phases: ``opening`` (an :class:`OpenSink` is out), ``open-failed``
    (retried), ``open``, ``ceased`` (its description lacks a connection or
    schema). The buffer holds the input's updates at times in
    ``[next_lower, input_upper)``; ``first`` while the next commit starts the
    sink's history in the target (it carries the snapshot at the as_of).
    """

    def __init__(self, run: RunSink, backoff: tuple[int, int]) -> None:
        self.id = run.id
        self.run = run
        desc = run.description
        self.from_id: GlobalId = desc.from_id
        self.connection: StorageSinkConnection | None = desc.connection
        self.schema: Schema | None = desc.schema
        els = run.as_of.elements
        self.as_of = int(els[0]) if els else 0
        missing = [
            n for n, v in (("connection", self.connection), ("schema", self.schema)) if v is None
        ]
        problem = f"its description has no {', '.join(missing)}" if missing else None
        if self.connection is not None and not missing:
            problem = sink_pacing_problem(self.connection)
        if not els:
            problem = "its as_of is [] (nothing to read)"
        self.phase = "ceased" if problem else "new"
        self.status = (
            StatusUpdate(self.id, SourceStatus.CEASED, f"sink {self.id} cannot run: {problem}")
            if problem
            else StatusUpdate(self.id, SourceStatus.STARTING)
        )
        self.covered: int | None = None
        self.first = True
        self.reading = False
        self.read_as_of = self.as_of
        self.input_upper = 0
        self.next_lower = self.as_of
        self.buffer: list[Update] = []
        self.inflight: _Commit | None = None
        self.last_commit_at: int | None = None
        """When the last commit went out (or, before one, when the sink could first commit)."""
        self.retry = Backoff(*backoff)
        self.staged = 0
        self.committed = 0
        self.bytes_committed = 0
        self.bytes_staged = 0

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> list[StorageReplicaOutput]:
        if self.phase != "new":
            return []
        return self._open()

    def _open(self) -> list[StorageReplicaOutput]:
        assert self.connection is not None and self.schema is not None
        self.phase = "opening"
        return [OpenSink(self.id, self.connection, self.schema)]

    def stop(self) -> list[StorageReplicaOutput]:
        out: list[StorageReplicaOutput] = []
        if self.reading:
            out.append(StopSinkInput(self.id))
        if self.phase in ("opening", "open", "open-failed"):
            out.append(CloseSink(self.id))
        self.reading = False
        self.phase = "stopped"
        return out

    def opened(self, covered: int | None) -> list[StorageReplicaOutput]:
        if self.phase != "opening":
            raise UnrequestedStorageCallback(f"sink_opened for {self.id}, which is not opening")
        if covered is not None and (type(covered) is not int or covered < 0):
            raise SinkInputRejected(f"sink {self.id}: covered upper {covered!r} is not an int >= 0")
        self.phase = "open"
        self.retry.succeeded()
        self.status = StatusUpdate(self.id, SourceStatus.RUNNING)
        return self._resync(covered)

    def _resync(self, covered: int | None) -> list[StorageReplicaOutput]:
        """Continue from what the target covers: after it if beyond the as_of, else from the snapshot."""
        self.covered = covered
        if covered is not None and covered > self.as_of:
            first, lower, needed = False, covered, covered - 1
        else:
            first, lower, needed = True, self.as_of, self.as_of
        self.first = first
        # The read going on serves if it started early enough and nothing at or after the new
        # lower was dropped (a first commit needs the snapshot at the as_of itself: reads are
        # never below the as_of, so then read_as_of == as_of).
        if self.reading and self.read_as_of <= needed and self.next_lower <= lower:
            self.next_lower = lower
            self.buffer = [u for u in self.buffer if u[1] >= lower]
            return []
        self.reading = True
        self.read_as_of = needed
        self.input_upper = 0
        self.next_lower = lower
        self.buffer = []
        return [ReadSinkInput(self.id, self.from_id, needed)]

    # -- input ----------------------------------------------------------------------

    def check_input(self, updates: tuple[Update, ...], upper: int) -> None:
        if not self.reading:
            raise UnrequestedStorageCallback(
                f"feed_sink_input for {self.id}, whose input is not read"
            )
        if type(upper) is not int or upper < self.input_upper:
            raise SinkInputRejected(
                f"input of sink {self.id} has upper {upper!r}, behind {self.input_upper}"
            )
        low = max(self.read_as_of, self.input_upper)
        if well_formed(updates):  # the common case, checked in bulk
            bounds = offset_bounds(updates)
            if bounds is None or (low <= bounds[0] and bounds[1] < upper):
                return
        for u in updates:
            if type(u) is not tuple or len(u) != 3 or type(u[2]) is not int:
                raise SinkInputRejected(f"input update of sink {self.id} is malformed: {u!r}")
            t = u[1]
            if type(t) is not int or not low <= t < upper:
                raise SinkInputRejected(
                    f"input update of sink {self.id} at {t!r} is outside [{low}, {upper})"
                )

    def feed(self, updates: tuple[Update, ...], upper: int) -> None:
        lower = self.next_lower
        self.buffer.extend(u for u in updates if u[1] >= lower)
        self.input_upper = upper

    # -- commits --------------------------------------------------------------------

    def tick(self, now: int, writes_allowed: bool) -> list[StorageReplicaOutput]:
        if self.retry.retry_at is not None:
            if not self.retry.due(now):
                return []
            self.retry.retry_at = None
            if self.phase == "open-failed":
                return self._open()
        if not (writes_allowed and self.phase == "open" and self.inflight is None):
            return []
        if self.input_upper <= self.next_lower:
            return []
        assert self.connection is not None
        last = self.last_commit_at
        if self.first or last is None:
            # The first commit (it starts the sink's history in the target and carries the
            # snapshot at the as_of) goes out at once, whatever it holds; so does the first of
            # a resumed sink if it has updates.
            changes = consolidated(self.buffer)
            if not (self.first or changes):
                self.last_commit_at = now  # only progress: paced from here
                self.buffer = []
                return []
        else:
            elapsed = now - last
            if elapsed < self.connection.commit_interval_ms:
                return []
            changes = consolidated(self.buffer)
            self.buffer = list(changes)  # what cancelled out need not be held
            # Only progress: nothing a reader of the target can see changed. Recorded only
            # after the progress interval (the covered upper is where a restart resumes, and
            # the sink's read hold on its input stays there until it moves).
            if not changes and elapsed < self.connection.progress_interval_ms:
                return []
        expected = self.covered
        lower = expected if expected is not None else self.next_lower
        upper = self.input_upper
        updates = tuple(sorted(changes, key=_time))  # a changelog in time order
        self.last_commit_at = now
        size = updates_size(updates)
        self.inflight = _Commit(expected, lower, upper, len(updates), size)
        self.staged += len(updates)
        self.bytes_staged += size
        return [CommitSink(self.id, updates, expected, lower, upper)]

    def check_outcome(self, upper: int | None, committed: bool) -> None:
        c = self.inflight
        if c is None:
            raise SinkCommitNotInFlight(f"no commit of sink {self.id} is in flight")
        if committed and upper != c.upper:
            raise SinkCommitNotInFlight(
                f"the commit of sink {self.id} in flight ends at {c.upper}, not at {upper!r}"
            )
        if not committed:
            if upper is not None and (type(upper) is not int or upper < 0):
                raise SinkCommitNotInFlight(
                    f"sink {self.id}: covered upper {upper!r} is not an int"
                )
            if upper == c.expected:
                raise SinkCommitNotInFlight(
                    f"a conflict of sink {self.id} at its expected covered upper {upper!r} is none"
                )

    def commit_landed(self, size_bytes: int) -> None:
        c = self.inflight
        assert c is not None
        self.inflight = None
        self.covered = c.upper
        self.first = False
        self.next_lower = c.upper
        self.buffer = [u for u in self.buffer if u[1] >= c.upper]
        self.committed += c.count
        self.bytes_committed += max(0, int(size_bytes)) or c.size
        self.retry.succeeded()
        self.status = StatusUpdate(self.id, SourceStatus.RUNNING)

    def conflict(self, covered: int | None) -> list[StorageReplicaOutput]:
        self.inflight = None
        return self._resync(covered)

    def failed(self, error: str, now: int) -> None:
        if self.phase == "opening":
            self.phase = "open-failed"
        elif self.inflight is not None:
            self.inflight = None
        else:
            raise UnrequestedStorageCallback(
                f"sink_failed for {self.id}, which has no open or commit under way"
            )
        self.retry.failed(now)
        self.status = StatusUpdate(self.id, SourceStatus.STALLED, error)

    def statistics(self) -> SinkStatistics | None:
        if not (self.staged or self.committed or self.bytes_committed or self.bytes_staged):
            return None
        update = SinkStatistics(
            self.staged, self.committed, self.bytes_staged, self.bytes_committed
        )
        self.staged = self.committed = self.bytes_committed = self.bytes_staged = 0
        return update
