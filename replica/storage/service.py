"""``StorageService``: the spec's ``StorageReplica`` driven with real IO, served over the storage protocol.

It is the :class:`~tidegate.runtime.transport.handler.ReplicaHandler` of the
storage protocol that :class:`~tidegate.runtime.transport.grpc_server.ReplicaServer`
serves (``storage=``), and it drives the core exactly as
:class:`~tidegate.replica.service.ReplicaService` drives the compute replica:
a loop owns the core (which is not thread-safe); everything reaches it as an
event on one queue -- commands from the current stream, and the outcomes of
the IO work -- and the loop carries out the core's outputs
(:mod:`tidegate.spec.storage_replica.outputs`), every one of them:

* ``Reply``: to the current stream's response sink;
* ``StartSource``/``StopSource``/``AckSource``: an upstream reader per
  ingestion (:mod:`.sources`: ``PostgresReader``, a load generator on the
  host's clock, or the ``source_factory``'s reader), reporting
  ``source_started``, ``feed_source`` and ``source_failed``;
* ``ReadRemap``/``WriteShard``: shard reads and compare-and-appends
  (:mod:`.shards`), reporting ``remap_loaded``/``remap_failed`` and
  ``write_completed``/``write_failed``;
* ``ReadSinkInput``/``StopSinkInput``: a follower of the sink's input shard
  (the compute service's, :class:`~tidegate.replica._follow.ShardFollower`),
  reporting ``feed_sink_input``;
* ``OpenSink``/``CommitSink``/``CloseSink``: the sink's target (:mod:`.sinks`:
  ``IcebergSinkWriter`` or the ``sink_factory``'s writer), reporting
  ``sink_opened``, ``sink_committed``, ``sink_conflict``, ``sink_failed``.

The clock: the loop calls the core's ``tick`` with the host's wall clock
(epoch milliseconds; the simulator's virtual ones) every ``tick_s``; that is
when the core mints bindings, commits sinks, retries what failed, and reports
statistics.

Streams and iterations work as in the compute service: a new stream starts a
new protocol iteration of the same core when its first command (which must
be ``Hello``) arrives; until then responses go to the old stream. A command
the core rejects raises its typed error in the stream's reader, so the
server ends the stream with ``FAILED_PRECONDITION`` naming the rule; the core
is unchanged. Ingestions and sinks keep running between streams (the next
iteration reconciles them). Nothing here blocks, sleeps or reads a clock
other than the host's: the same service runs on the simulator's kernel host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidegate.runtime.controller.schemas import shard_name
from tidegate.runtime.storage import ShardStore
from tidegate.runtime.storage.store import DEFAULT_LEASE_MS
from tidegate.spec.errors import (
    SourceBatchRejected,
    StorageStageViolation,
    TidegateError,
    UnhandledEffect,
)
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage.commands import (
    DroppedId,
    StatisticsUpdate,
    StatusUpdate,
    StorageCommand,
    StorageFrontierUpper,
    StorageHello,
    StorageResponse,
)
from tidegate.spec.storage.connections import LoadGenerator
from tidegate.spec.storage_replica import (
    AckSource,
    CloseSink,
    CommitSink,
    OpenSink,
    ReadRemap,
    ReadSinkInput,
    Reply,
    StartSource,
    StopSinkInput,
    StopSource,
    StorageReplica,
    WriteShard,
)

from .._follow import ShardFollower
from .._logs import LOGGER_NAME, log_event
from .._queued import Closed, Command, QueuedService
from ..host import ServiceHost, ThreadHost
from . import events as ev
from ._io import IOContext
from .metrics import StorageMetrics
from .shards import RemapRead, ShardWrite
from .sinks import SinkFactory, SinkTarget, make_writer
from .sources import LoadGeneratorWork, ReaderWork, SourceFactory, SourceReader, builtin_reader

__all__ = ["StorageService"]


_Command = Command[StorageCommand]
_Event = _Command | Closed | ev.IOEvent


_SourceWork = ReaderWork | LoadGeneratorWork


class StorageService(QueuedService):
    """Serves one :class:`StorageReplica` over ``store`` (see the module docstring).

    ``tick_s``: how often the core's clock ticks (binding and commit cadence);
    ``poll_s``/``poll_max_s``: how sink inputs poll their shards (backing off
    while idle); ``lease_ms``: the lease of each shard reader (a dead
    replica's read holds lapse after it); ``retry_s``/``retry_max_s``: the
    back-off of shard writes and sink resolutions that failed transiently;
    ``source_poll_s``: how long one step of an upstream reader waits for data,
    ``source_idle_s`` how long it rests after a step that brought none (0 for
    readers whose ``poll`` blocks; the simulator's do not);
    ``max_unacked_updates``: how far a reader may run ahead of what is durable
    (in updates) before it pauses, which bounds the ingestion's buffer and the
    size of its writes (PostgreSQL keeps the rest in its WAL); ``backoff_ms`` and
    ``backoff_max_ms``: the core's retry back-off of failed readers, remap
    reads and sink targets; ``source_factory``/``sink_factory``: readers and
    writers for connections the service does not know (simulated ones);
    ``postgres_options`` go to every ``PostgresReader``, ``sink_io_properties``
    to every ``IcebergSinkWriter`` (S3 endpoint and credentials); ``host``:
    where the loop and the IO work run, and the clock (:class:`ThreadHost` by
    default); ``clock_ms``: the core's clock (the host's wall clock by default).
    """

    def __init__(
        self,
        store: ShardStore,
        *,
        tick_s: float = 0.1,
        poll_s: float = 0.005,
        poll_max_s: float = 0.05,
        lease_ms: int = DEFAULT_LEASE_MS,
        retry_s: float = 0.05,
        retry_max_s: float = 5.0,
        source_poll_s: float = 0.1,
        source_idle_s: float = 0.0,
        max_unacked_updates: int = 100_000,
        backoff_ms: int = 1_000,
        backoff_max_ms: int = 60_000,
        source_factory: SourceFactory | None = None,
        sink_factory: SinkFactory | None = None,
        postgres_options: Mapping[str, Any] | None = None,
        sink_io_properties: Mapping[str, str] | None = None,
        metrics: StorageMetrics | None = None,
        logger: logging.Logger | None = None,
        host: ServiceHost | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else StorageMetrics()
        super().__init__(
            host if host is not None else ThreadHost(),
            logger if logger is not None else logging.getLogger(LOGGER_NAME),
            self.metrics,
            hello=StorageHello,
            violation=StorageStageViolation,
            log_prefix="storage_",
        )
        self.store = store
        self.tick_s = tick_s
        self.clock_ms = clock_ms if clock_ms is not None else self.host.wall_ms
        self.source_factory = source_factory
        self.sink_factory = sink_factory
        self.postgres_options = dict(postgres_options or {})
        self.sink_io_properties = dict(sink_io_properties) if sink_io_properties else None
        self.core = StorageReplica(backoff_ms=backoff_ms, backoff_max_ms=backoff_max_ms)
        self.io = IOContext(
            host=self.host,
            store=store,
            log=self.log,
            metrics=self.metrics,
            post=self._post,
            lease_ms=lease_ms,
            poll_s=poll_s,
            poll_max_s=poll_max_s,
            retry_s=retry_s,
            retry_max_s=retry_max_s,
            source_poll_s=source_poll_s,
            source_idle_s=source_idle_s,
            max_unacked_updates=max_unacked_updates,
        )
        # Loop state (touched only in turns).
        self._next_tick = 0.0
        self._sources: dict[GlobalId, _SourceWork] = {}
        self._failed_with: dict[GlobalId, str] = {}
        """The last error of each ingestion's reader, until the source makes progress again: a
        retry that fails the same way is logged at DEBUG, so a source that stays down (or keeps
        failing right after it connects) logs a warning once, on the change, not every retry."""
        self._remaps: dict[GlobalId, RemapRead] = {}
        self._writes: set[ShardWrite] = set()
        self._inputs: dict[GlobalId, ShardFollower] = {}
        self._targets: dict[GlobalId, SinkTarget] = {}
        self._closing: set[SinkTarget] = set()

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> StorageService:
        self._next_tick = self.host.monotonic()
        self._run_loop()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and every piece of IO work (readers closed, leases released)."""
        self._stop_loop(timeout)

    # -- the loop ---------------------------------------------------------------------------

    def _after(self, events: Sequence[object], inputs: bool) -> float:
        """Tick the core if due."""
        now = self.host.monotonic()
        if now >= self._next_tick:
            self._guarded(self._tick)
            self._next_tick = now + self.tick_s
        return self._next_tick

    def _end(self) -> None:
        """The loop ends: refuse new commands, stop the IO work, answer what is queued."""
        self._mark_stopped()
        work: list[Any] = [
            *self._sources.values(),
            *self._remaps.values(),
            *self._writes,
            *self._inputs.values(),
            *self._targets.values(),
            *self._closing,
        ]
        for w in work:
            w.stop()
        for w in work:  # leases released and readers closed before the store closes
            if w.task is not None:
                w.task.join(SHUTDOWN_JOIN_S)
        self._sources.clear()
        self._remaps.clear()
        self._writes.clear()
        self._inputs.clear()
        self._targets.clear()
        self._closing.clear()
        self._refuse_queued()

    def _tick(self) -> None:
        self.core.tick(self.clock_ms())
        self._perform()

    # -- events -----------------------------------------------------------------------------

    def _handle(self, event: _Event) -> None:
        if isinstance(event, Command):
            self._command(event)
            return
        if isinstance(event, Closed):
            self._closed(event)
            return
        try:
            self._outcome(event)
        except TidegateError as e:
            log_event(
                self.log,
                "callback_rejected",
                level=logging.ERROR,
                outcome=type(event).__name__,
                error=type(e).__name__,
                message=str(e),
            )
        self._perform()

    def _outcome(self, event: ev.IOEvent) -> None:
        """Report one IO outcome to the core (stale ones of replaced work are dropped)."""
        core = self.core
        if isinstance(event, ev.SourceStarted):
            if self._sources.get(event.id) is event.work:
                log_event(self.log, "source_started", id=str(event.id))
                core.source_started(event.id)
        elif isinstance(event, ev.SourceBatchArrived):
            if self._sources.get(event.id) is event.work:
                if event.batch.updates:  # progress: a later failure is news again
                    self._failed_with.pop(event.id, None)
                self._feed(event)
        elif isinstance(event, ev.SourceFailed):
            if self._sources.get(event.id) is event.work:
                del self._sources[event.id]
                self._failed_with[event.id] = event.error
                core.source_failed(event.id, event.error, retryable=event.retryable)
        elif isinstance(event, ev.RemapLoaded):
            if self._remaps.get(event.id) is event.work:
                del self._remaps[event.id]
                core.remap_loaded(event.id, event.data_upper, event.updates, event.remap_upper)
        elif isinstance(event, ev.RemapFailed):
            if self._remaps.get(event.id) is event.work:
                del self._remaps[event.id]
                core.remap_failed(event.id, event.error)
        elif isinstance(event, ev.WriteDone):
            self._writes.discard(event.work)
            if event.ok:
                core.write_completed(event.shard, event.upper)
            else:
                core.write_failed(event.shard, event.upper)
        elif isinstance(event, ev.SinkInput):
            if self._inputs.get(event.id) is event.work:
                self._feed_sink(event.id, event.updates, event.upper)
        elif isinstance(event, ev.SinkOpened):
            if self._targets.get(event.id) is event.work:
                core.sink_opened(event.id, event.covered)
        elif isinstance(event, ev.SinkCommitted):
            core.sink_committed(event.id, event.upper)
        elif isinstance(event, ev.SinkConflicted):
            core.sink_conflict(event.id, event.covered)
        elif isinstance(event, ev.SinkFailed):
            # A replaced target's failed open is stale; a commit's outcome always counts.
            if event.during != "open" or self._targets.get(event.id) is event.work:
                core.sink_failed(event.id, event.error)
        elif isinstance(event, ev.SinkClosed):
            self._closing.discard(event.work)
        else:
            raise UnhandledEffect("the storage service", event)

    def _feed(self, event: ev.SourceBatchArrived) -> None:
        batch, name = event.batch, str(event.id)
        self.metrics.ingested_updates.labels(name).inc(len(batch.updates))
        self.metrics.ingested_bytes.labels(name).inc(max(0, batch.size_bytes))
        try:
            self.core.feed_source(event.id, batch)
        except SourceBatchRejected as e:
            # A reader that breaks its contract is replaced, as a failed one is.
            work = self._sources.pop(event.id)
            work.stop()
            log_event(self.log, "source_batch_rejected", level=logging.ERROR, id=name, error=str(e))
            self.core.source_failed(event.id, f"{type(e).__name__}: {e}")

    def _feed_sink(self, id: GlobalId, updates: list[Update], upper: Antichain) -> None:
        if upper.is_empty():
            # The input collection is closed: everything is in; the last times bound its upper.
            follower = self._inputs[id]
            last = max((int(t) + 1 for _, t, _ in updates), default=follower.as_of + 1)
            log_event(self.log, "sink_input_closed", id=str(id), upper=last)
            self.core.feed_sink_input(id, updates, last)
            return
        (t,) = upper.elements
        self.core.feed_sink_input(id, updates, int(t))

    def _command(self, event: _Command) -> None:
        if not self._admit(event):
            return
        cmd = event.command
        log_event(self.log, "storage_command", level=logging.DEBUG, command=type(cmd).__name__)
        event.done.set_result(None)
        self._perform()

    def _to_core(self, command: StorageCommand) -> None:
        self.core.handle_command(command)

    # -- outputs ----------------------------------------------------------------------------

    def _perform(self) -> None:
        """Carry out what the core asked for since the last call."""
        responses: list[StorageResponse] = []
        for out in self.core.drain():
            if isinstance(out, Reply):
                responses.append(out.response)
                self._observe(out.response)
            elif isinstance(out, StartSource):
                self._start_source(out)
            elif isinstance(out, StopSource):
                work = self._sources.pop(out.id, None)
                self._failed_with.pop(out.id, None)
                if work is not None:
                    work.stop()
                log_event(self.log, "source_stopped", id=str(out.id))
            elif isinstance(out, AckSource):
                source = self._sources.get(out.id)
                if source is not None:
                    source.ack(out.offset)
            elif isinstance(out, ReadRemap):
                old = self._remaps.pop(out.id, None)
                if old is not None:
                    old.stop()
                read = RemapRead(self.io, out)
                self._remaps[out.id] = read
                read.start()
            elif isinstance(out, WriteShard):
                write = ShardWrite(self.io, out)
                self._writes.add(write)
                write.start()
            elif isinstance(out, ReadSinkInput):
                self._read_sink_input(out)
            elif isinstance(out, StopSinkInput):
                follower = self._inputs.pop(out.id, None)
                if follower is not None:
                    follower.stop()
            elif isinstance(out, OpenSink):
                self._open_sink(out)
            elif isinstance(out, CommitSink):
                target = self._targets.get(out.id)
                if target is None:  # never: a commit follows the open of the target
                    self.core.sink_failed(out.id, "the sink's target is not open")
                else:
                    target.submit(out)
            elif isinstance(out, CloseSink):
                target = self._targets.pop(out.id, None)
                if target is not None:
                    target.close_after_pending()
                    self._closing.add(target)
            else:
                raise UnhandledEffect("the storage service", out)
        if responses and self._conn is not None:
            self._conn.sink.send_many(responses)
        self.metrics.ingestions.set(len(self.core.ingestions()))
        self.metrics.sinks.set(len(self.core.sinks()))

    def _start_source(self, out: StartSource) -> None:
        old = self._sources.pop(out.id, None)
        if old is not None:
            old.stop()
        connection, schema, options = out.connection, out.schema, self.postgres_options
        made: SourceReader | None = None
        failure: Exception | None = None
        if self.source_factory is not None:
            try:
                made = self.source_factory(out.id, connection, schema)
            except Exception as e:  # reported as the reader failing, below
                failure = e

        def make() -> SourceReader:
            if failure is not None:
                raise failure
            return made if made is not None else builtin_reader(connection, schema, options)

        work: _SourceWork
        if made is None and failure is None and isinstance(connection, LoadGenerator):
            work = LoadGeneratorWork(self.io, out.id, connection, schema, out.resume_offset)
        else:
            work = ReaderWork(
                self.io, out.id, make, out.resume_offset, self._failed_with.get(out.id)
            )
        self._sources[out.id] = work
        log_event(
            self.log,
            "source_starting",
            level=logging.DEBUG if out.id in self._failed_with else logging.INFO,  # a retry
            id=str(out.id),
            connection=type(out.connection).__name__,
            resume_offset=out.resume_offset,
        )
        work.start()

    def _read_sink_input(self, out: ReadSinkInput) -> None:
        old = self._inputs.pop(out.id, None)
        if old is not None:
            old.stop()
        io, sink_id = self.io, out.id
        follower = ShardFollower(
            host=io.host,
            store=io.store,
            shard=shard_name(out.from_id),
            as_of=out.as_of,
            lease_ms=io.lease_ms,
            poll_s=io.poll_s,
            poll_max_s=io.poll_max_s,
            log=self.log,
            on_delivery=lambda f, rows, upper: self._post(ev.SinkInput(f, sink_id, rows, upper)),
            on_unreadable=lambda f, what: None,  # logged by the follower, retried until repaired
        )
        self._inputs[out.id] = follower
        log_event(
            self.log, "read_sink_input", id=str(out.id), input=str(out.from_id), as_of=out.as_of
        )
        follower.start(f"sink-input-{out.id}")

    def _open_sink(self, out: OpenSink) -> None:
        old = self._targets.pop(out.id, None)
        if old is not None:
            old.close_after_pending()
            self._closing.add(old)
        connection, schema, factory = out.connection, out.schema, self.sink_factory
        props = self.sink_io_properties

        def make() -> Any:
            return make_writer(out.id, connection, schema, factory, props)

        target = SinkTarget(self.io, out.id, make)
        self._targets[out.id] = target
        target.start()
        target.submit(out)

    def _observe(self, resp: StorageResponse) -> None:
        self.metrics.responses.labels(type(resp).__name__).inc()
        if isinstance(resp, StorageFrontierUpper):
            els = resp.upper.elements
            if els:
                self.metrics.upper.labels(str(resp.id)).set(int(els[0]) / 1000)
        elif isinstance(resp, StatusUpdate):
            log_event(
                self.log,
                "storage_status",
                level=logging.INFO,
                id=str(resp.id),
                status=resp.status.value,
                error=resp.error,
            )
        elif isinstance(resp, DroppedId):
            self.metrics.forget(str(resp.id))
            log_event(self.log, "storage_dropped", id=str(resp.id))
        elif isinstance(resp, StatisticsUpdate):
            pass


SHUTDOWN_JOIN_S = 5.0
"""How long a stopping service waits for each piece of IO work to end (readers closed, leases released)."""
