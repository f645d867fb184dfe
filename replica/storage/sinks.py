"""Sink targets of the storage service: what ``OpenSink``, ``CommitSink`` and ``CloseSink`` run.

A :class:`SinkWriter` is the interface of
:class:`~tidegate.runtime.sinks.IcebergSinkWriter`: ``open`` (creating the
target if needed) answers the upper the target covers for this sink,
``commit(updates, lower, upper)`` commits conditionally and raises
:class:`~tidegate.spec.errors.SinkConflict` (with the ``actual`` covered upper)
when another writer committed, :class:`~tidegate.spec.errors.SinkOutcomeUnknown`
when it cannot tell whether the commit landed, anything else when nothing was
committed; ``covered_upper`` reads the covered upper fresh. A
:data:`SinkFactory` makes one for a connection (the simulator's, for
``SimulatedSink``); otherwise the service writes ``IcebergSink`` through
``IcebergSinkWriter``, naming the sink by the export's ``GlobalId``.

One :class:`SinkTarget` work per ``OpenSink`` runs the sink's operations in
order (one at a time: the writer is not thread-safe) and reports each
outcome. A commit whose outcome is unknown is resolved before it is reported,
by reading the covered upper until that succeeds: it landed iff the target
covers the commit's upper; if it still covers what the commit expected,
nothing was committed (``sink_failed``: the core retries); otherwise another
incarnation committed (``sink_conflict``).

A first commit (``expected_covered`` is ``None``) must only land on a target
with no commit of this sink. The writer's own condition is "covers ``lower``
or nothing", so the work first reads the covered upper and reports a conflict
if there is one; what remains is the writer's race window between that read
and its commit.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tidegate.spec.errors import SinkConflict, SinkOutcomeUnknown
from tidegate.spec.frontier import Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import IcebergSink, StorageSinkConnection
from tidegate.spec.storage_replica import CommitSink, OpenSink

from .._logs import log_event
from ..host import IDLE, Task
from ._io import IOContext, describe
from .events import SinkClosed, SinkCommitted, SinkConflicted, SinkFailed, SinkOpened

__all__ = ["SinkFactory", "SinkTarget", "SinkWriter", "make_writer"]


class SinkWriter(Protocol):
    """A sink's writer (the interface of ``IcebergSinkWriter``); one thread calls all its methods."""

    def open(self) -> int | None:
        """Create the target if needed; the upper it covers for this sink (``None``: nothing yet)."""
        ...

    def commit(self, updates: Sequence[Update], lower: int, upper: int) -> None:
        """Commit ``updates`` covering ``[lower, upper)`` if the target covers ``lower`` (or nothing)."""
        ...

    def covered_upper(self) -> int | None:
        """The upper the target covers for this sink now."""
        ...

    def close(self) -> None:
        """Release the target's connections."""
        ...


SinkFactory = Callable[[GlobalId, StorageSinkConnection, Schema], SinkWriter | None]
"""Makes the writer of sink ``id``'s connection (rows typed by the schema); ``None``: not mine."""


def make_writer(
    id: GlobalId,
    connection: StorageSinkConnection,
    schema: Schema,
    factory: SinkFactory | None,
    io_properties: Mapping[str, str] | None,
) -> SinkWriter:
    """The writer for ``connection``: the factory's, else an ``IcebergSinkWriter``.

    :class:`~tidegate.spec.errors.SinkDescriptionInvalid` if there is none
    (e.g. a simulated sink outside the simulator) or the description is bad.
    """
    if factory is not None:
        writer = factory(id, connection, schema)
        if writer is not None:
            return writer
    if isinstance(connection, IcebergSink):
        from tidegate.runtime.sinks import IcebergSinkWriter

        return IcebergSinkWriter(connection, schema, sink_id=str(id), io_properties=io_properties)
    from tidegate.spec.errors import SinkDescriptionInvalid

    raise SinkDescriptionInvalid(
        f"this replica cannot write a {type(connection).__name__} sink: no writer for it "
        "(a simulated sink needs the simulator's sink factory)"
    )


@dataclass(frozen=True)
class _Close:
    pass


_Op = OpenSink | CommitSink | _Close


class SinkTarget:
    """The target of sink ``id`` since one ``OpenSink``: its operations in order (see the module docstring).

    ``make`` builds the writer (at the open, in the work's thread).
    """

    def __init__(self, ctx: IOContext, id: GlobalId, make: Callable[[], SinkWriter]) -> None:
        self.ctx = ctx
        self.id = id
        self.make = make
        self.writer: SinkWriter | None = None
        self.ops: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self.resolving: CommitSink | None = None
        self.delay = ctx.retry_s
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.ctx.host.spawn(f"sink-{self.id}", self)

    def submit(self, op: OpenSink | CommitSink) -> None:
        self.ops.put(op)
        if self.task is not None:
            self.task.wake()

    def close_after_pending(self) -> None:
        """Finish the operations queued (their outcomes are still reported), then close."""
        self.ops.put(_Close())
        if self.task is not None:
            self.task.wake()

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def step(self) -> float | None:
        if self.resolving is not None:
            return self._resolve(self.resolving)
        try:
            op = self.ops.get_nowait()
        except queue.Empty:
            return IDLE
        if isinstance(op, _Close):
            return None
        if isinstance(op, OpenSink):
            self._open()
        else:
            self._commit(op)
        return 0.0 if self.resolving is None else self._resolve(self.resolving)

    def _open(self) -> None:
        ctx = self.ctx
        try:
            if self.writer is None:
                self.writer = self.make()
            covered = self.writer.open()
        except Exception as e:
            log_event(
                ctx.log,
                "sink_open_failed",
                level=logging.WARNING,
                id=str(self.id),
                error=describe(e),
            )
            ctx.post(SinkFailed(self, self.id, describe(e), "open"))
            return
        log_event(ctx.log, "sink_opened", id=str(self.id), covered_upper=covered)
        ctx.post(SinkOpened(self, self.id, covered))

    def _commit(self, op: CommitSink) -> None:
        ctx, writer = self.ctx, self.writer
        if writer is None:
            ctx.post(SinkFailed(self, self.id, "the sink's target is not open", "commit"))
            return
        try:
            if op.expected_covered is None:
                covered = writer.covered_upper()
                if covered is not None:
                    self._conflict(op, covered)
                    return
            writer.commit(op.updates, op.lower, op.upper)
        except SinkConflict as e:
            self._conflict(op, e.actual)
            return
        except SinkOutcomeUnknown as e:
            log_event(
                ctx.log, "sink_commit_unknown", level=logging.WARNING, id=str(self.id), error=str(e)
            )
            self.resolving = op
            self.delay = ctx.retry_s
            return
        except Exception as e:
            self._failed(op, describe(e))
            return
        self._landed(op)

    def _resolve(self, op: CommitSink) -> float | None:
        """Tell whether the commit in doubt landed; retried until the target answers."""
        assert self.writer is not None
        try:
            covered = self.writer.covered_upper()
        except Exception as e:
            log_event(
                self.ctx.log,
                "sink_resolve_failed",
                level=logging.WARNING,
                id=str(self.id),
                error=describe(e),
            )
            delay, self.delay = self.delay, min(self.delay * 2, self.ctx.retry_max_s)
            return delay
        self.resolving = None
        if covered == op.upper:
            self._landed(op)
        elif covered == op.expected_covered:
            self._failed(op, "the commit did not land")
        else:
            self._conflict(op, covered)
        return 0.0

    def _landed(self, op: CommitSink) -> None:
        m = self.ctx.metrics
        m.sink_commits.labels("ok").inc()
        m.sink_updates.inc(len(op.updates))
        self.ctx.post(SinkCommitted(self, self.id, op.upper, len(op.updates)))

    def _conflict(self, op: CommitSink, covered: int | None) -> None:
        self.ctx.metrics.sink_commits.labels("conflict").inc()
        log_event(
            self.ctx.log,
            "sink_conflict",
            id=str(self.id),
            expected=op.expected_covered,
            covered_upper=covered,
        )
        self.ctx.post(SinkConflicted(self, self.id, covered))

    def _failed(self, op: CommitSink, error: str) -> None:
        self.ctx.metrics.sink_commits.labels("failed").inc()
        log_event(
            self.ctx.log,
            "sink_commit_failed",
            level=logging.WARNING,
            id=str(self.id),
            lower=op.lower,
            upper=op.upper,
            error=error,
        )
        self.ctx.post(SinkFailed(self, self.id, error, "commit"))

    def close(self) -> None:
        writer, self.writer = self.writer, None
        try:
            if writer is not None:
                writer.close()
        except Exception as e:
            log_event(
                self.ctx.log,
                "sink_close_failed",
                level=logging.WARNING,
                id=str(self.id),
                error=describe(e),
            )
        self.ctx.post(SinkClosed(self))
