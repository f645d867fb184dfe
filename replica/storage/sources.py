"""Upstream readers of the storage service: what a ``StartSource`` runs.

A :class:`SourceReader` is the interface of
:class:`~tidegate.runtime.sources.postgres.PostgresReader`: ``start`` at a
resume offset, ``poll`` for the next :class:`~tidegate.spec.storage.SourceBatch`,
``ack`` what is durable downstream, ``close``. A :data:`SourceFactory` makes
one for a connection (the simulator's factory makes readers of
``SimulatedSource``); without one, or when it returns ``None``, the service
reads ``PostgresSource`` through ``PostgresReader``. Each reader runs as a
:class:`ReaderWork` on the service's host (in production, a thread of its
own: ``poll`` may block for up to ``source_poll_s``).

A ``LoadGenerator`` needs no reader: :class:`LoadGeneratorWork` produces its
batches on the host's clock, one offset every ``tick_ms`` from the start (the
updates of an offset depend only on the generator and the offset,
:mod:`tidegate.spec.storage.loadgen`, so a restart re-emits the same ones).

Backpressure: a reader pauses while more than ``max_unacked_updates``
updates it delivered are not yet acknowledged (durable in the data shard),
so a source faster than the shard writes never grows the ingestion's buffer
without bound (PostgreSQL keeps what is not read in its WAL; a load
generator falls behind its clock and catches up later).

A reader that raises stops and lets go of its upstream (logged as a warning when the error is
news, at DEBUG when a retry fails as the previous reader did and nothing was ingested in
between); the service reports
``source_failed`` (the error class and message; retryable or not) once every
update the reader delivered before the error is durable (or after
:data:`FAILURE_HOLD_S`), and the core starts a new reader when its back-off
says so. Until then the ingestion counts as running, so the core still mints
the binding that covers those updates: a failing ingestion mints nothing, and
an error no restart gets past (an upstream schema change) would otherwise keep
changes committed upstream before it out of the source for good.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tidegate.spec.errors import InvalidUsage, SourceConfigurationInvalid, SourceError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import (
    LoadGenerator,
    PostgresSource,
    SourceBatch,
    SourceConnection,
)
from tidegate.spec.storage.loadgen import loadgen_batch, loadgen_schema, loadgen_upper

from .._logs import log_event
from ..host import Task
from ._io import IOContext, describe
from .events import SourceBatchArrived, SourceFailed, SourceStarted

__all__ = [
    "LoadGeneratorWork",
    "ReaderWork",
    "SourceFactory",
    "SourceReader",
    "builtin_reader",
]

MAX_UPDATES_PER_BATCH = 100_000
"""A load generator behind its clock catches up in batches of about this many updates (at least
one offset each)."""


class SourceReader(Protocol):
    """An upstream reader (the interface of ``PostgresReader``); one thread calls all its methods."""

    def start(self, resume_offset: int) -> None:
        """Connect and start reading at ``resume_offset`` (everything below it is durable)."""
        ...

    def poll(self, timeout_s: float) -> SourceBatch | None:
        """The next batch, waiting up to ``timeout_s`` for one; ``None`` if none came."""
        ...

    def ack(self, offset: int) -> None:
        """Everything below ``offset`` is durable downstream (never beyond the delivered upper)."""
        ...

    def close(self) -> None:
        """Release the connections (idempotent)."""
        ...


SourceFactory = Callable[[GlobalId, SourceConnection, Schema], SourceReader | None]
"""Makes the reader of ingestion ``id``'s connection (rows typed by the schema); ``None``: not mine.

Called on the service's loop: it must not block (a reader connects in ``start``).
"""


def builtin_reader(
    connection: SourceConnection, schema: Schema, postgres_options: Mapping[str, Any]
) -> SourceReader:
    """The service's own reader for ``connection`` (a ``PostgresReader``).

    :class:`~tidegate.spec.errors.SourceConfigurationInvalid` if there is none
    (e.g. a simulated source outside the simulator).
    """
    if isinstance(connection, PostgresSource):
        from tidegate.runtime.sources.postgres import PostgresReader

        return PostgresReader(connection, expected_schema=schema, **postgres_options)
    raise SourceConfigurationInvalid(
        "source connection",
        type(connection).__name__,
        "this replica has no reader for it (a simulated source needs the simulator's factory)",
    )


PAUSED_S = 0.05
"""How often a paused reader looks whether acknowledgements have made room."""

FAILURE_HOLD_S = 10.0
"""How long a failed reader's error waits for the updates it delivered to become durable before
the service reports it anyway (e.g. when the replica may not write)."""


class _Unacked:
    """The updates delivered beyond the acknowledged offset, by batch upper (for backpressure)."""

    def __init__(self) -> None:
        self.batches: deque[tuple[int, int]] = deque()
        self.count = 0

    def delivered(self, batch: SourceBatch) -> None:
        if batch.updates:
            self.batches.append((batch.upper, len(batch.updates)))
            self.count += len(batch.updates)

    def acked(self, offset: int) -> None:
        """Every update below ``offset`` is durable: a batch whose upper is at most it is done."""
        while self.batches and self.batches[0][0] <= offset:
            self.count -= self.batches.popleft()[1]


class ReaderWork:
    """Runs one :class:`SourceReader` for ingestion ``id`` from ``resume_offset`` (see the module docstring).

    ``make`` builds the reader (in the work's thread: building may connect).
    :meth:`ack` may be called from the loop at any time; the work passes the
    highest acknowledged offset to the reader at its next step, never beyond
    the upper the reader has delivered.
    """

    def __init__(
        self,
        ctx: IOContext,
        id: GlobalId,
        make: Callable[[], SourceReader],
        resume_offset: int,
        failed_with: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.id = id
        self.make = make
        self.resume_offset = resume_offset
        self.failed_with = failed_with
        """The previous reader's error, if this one is a retry after it: the same error again is
        not news (logged at DEBUG; a different one is a warning)."""
        self.reader: SourceReader | None = None
        self.delivered = resume_offset
        self.acked = 0
        self._ack_wanted = 0
        self.unacked = _Unacked()
        self.task: Task | None = None
        self._failure: str | None = None
        """The reader's error, held until what it delivered is durable."""
        self._retryable = True
        self._failure_deadline = 0.0

    def start(self) -> None:
        self.task = self.ctx.host.spawn(f"source-{self.id}", self)

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def ack(self, offset: int) -> None:
        """Let upstream forget what is below ``offset`` (applied at the next step)."""
        if offset > self._ack_wanted:
            self._ack_wanted = offset
            if self.task is not None:
                self.task.wake()

    def _apply_ack(self, reader: SourceReader) -> None:
        offset = min(self._ack_wanted, self.delivered)
        if offset > self.acked:
            reader.ack(offset)
            self.acked = offset
        self.unacked.acked(self._ack_wanted)

    def step(self) -> float | None:
        ctx = self.ctx
        if self._failure is not None:
            return self._report_failure()
        try:
            if self.reader is None:
                reader = self.make()
                self.reader = reader
                reader.start(self.resume_offset)
                ctx.post(SourceStarted(self, self.id))
                return 0.0
            reader = self.reader
            self._apply_ack(reader)
            if self.unacked.count > ctx.max_unacked_updates:
                return PAUSED_S  # backpressure: wait for acknowledgements (woken by one)
            batch = reader.poll(ctx.source_poll_s)
            if batch is not None:
                self.delivered = max(self.delivered, batch.upper)
                self.unacked.delivered(batch)
                ctx.post(SourceBatchArrived(self, self.id, batch))
                return 0.0
            self._apply_ack(reader)
            return ctx.source_idle_s
        except Exception as e:
            # A source error says whether a new reader may get past it; anything else (a
            # bug, an OS error) is retried, as a stalled source is.
            retryable = e.retryable if isinstance(e, SourceError) else True
            error = describe(e)
            news = error != self.failed_with  # a retry failing as the last one did is not
            log_event(
                ctx.log,
                "source_failed",
                level=logging.WARNING if news else logging.DEBUG,
                id=str(self.id),
                error=error,
                retryable=retryable,
                exc_info=news and not isinstance(e, SourceError),
            )
            ctx.metrics.source_errors.labels(type(e).__name__).inc()
            self._failure = error
            self._retryable = retryable
            self._failure_deadline = ctx.host.monotonic() + FAILURE_HOLD_S
            self.close()  # let go of the upstream now (a retry may need the slot)
            return self._report_failure()

    def _report_failure(self) -> float | None:
        """Post the held error once every delivered update is durable, or its wait is over."""
        assert self._failure is not None
        self.unacked.acked(self._ack_wanted)
        left = self._failure_deadline - self.ctx.host.monotonic()
        if self.unacked.count and left > 0:
            return left  # an acknowledgement wakes it sooner
        self.ctx.post(SourceFailed(self, self.id, self._failure, self._retryable))
        return None

    def close(self) -> None:
        reader, self.reader = self.reader, None
        if reader is None:
            return
        try:
            reader.close()
        except Exception as e:
            log_event(
                self.ctx.log,
                "source_close_failed",
                level=logging.WARNING,
                id=str(self.id),
                error=describe(e),
            )


class LoadGeneratorWork:
    """Produces load generator ``generator``'s batches for ingestion ``id`` on the host's clock."""

    def __init__(
        self,
        ctx: IOContext,
        id: GlobalId,
        generator: LoadGenerator,
        schema: Schema,
        resume_offset: int,
    ) -> None:
        self.ctx = ctx
        self.id = id
        self.generator = generator
        self.schema = schema
        self.resume_offset = resume_offset
        self.delivered = resume_offset
        self.started_ms: int | None = None
        self.unacked = _Unacked()
        self._ack_wanted = 0
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.ctx.host.spawn(f"loadgen-{self.id}", self)

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def ack(self, offset: int) -> None:
        """Updates below ``offset`` are durable (nothing to forget upstream: they are computed)."""
        if offset > self._ack_wanted:
            self._ack_wanted = offset
            if self.task is not None:
                self.task.wake()

    def step(self) -> float | None:
        ctx, gen = self.ctx, self.generator
        now = ctx.host.wall_ms()
        if self.started_ms is None:
            try:
                produced = loadgen_schema(gen)
                if produced.types != self.schema.types:
                    raise InvalidUsage(
                        f"the load generator produces rows of {list(map(str, produced.types))}, "
                        f"the ingestion's schema has {list(map(str, self.schema.types))}"
                    )
            except InvalidUsage as e:
                ctx.metrics.source_errors.labels(type(e).__name__).inc()
                log_event(
                    ctx.log, "source_failed", level=logging.WARNING, id=str(self.id), error=str(e)
                )
                ctx.post(SourceFailed(self, self.id, describe(e), retryable=False))
                return None
            self.started_ms = now
            ctx.post(SourceStarted(self, self.id))
        self.unacked.acked(self._ack_wanted)
        if self.unacked.count > ctx.max_unacked_updates:
            return PAUSED_S  # backpressure: it falls behind its clock and catches up later
        upper = loadgen_upper(gen, self.resume_offset, self.started_ms, now)
        if upper > self.delivered:
            per_offset = gen.rows_per_tick * (1 if gen.max_cardinality is None else 2)
            hi = min(upper, self.delivered + max(1, MAX_UPDATES_PER_BATCH // per_offset))
            batch = loadgen_batch(gen, self.delivered, hi)
            self.unacked.delivered(batch)
            ctx.post(SourceBatchArrived(self, self.id, batch))
            self.delivered = hi
            if hi < upper:
                return 0.0
        tick = gen.tick_ms
        next_ms = self.started_ms + ((now - self.started_ms) // tick + 1) * tick
        return (next_ms - now) / 1000

    def close(self) -> None:
        pass
