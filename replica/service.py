"""``ReplicaService``: the spec's ``ComputeReplica`` driven with real IO, served over gRPC.

It is the :class:`~tidegate.runtime.transport.handler.ReplicaHandler` that
:class:`~tidegate.runtime.transport.grpc_server.ReplicaServer` serves. A loop
owns the core (which is not thread-safe); everything reaches it as an event
on one queue: commands from the current stream, storage deliveries (one
follower per collection read), write completions (one writer) and
persist-peek results (one per persist peek). The loop performs the core's
outputs (as :mod:`tidegate.sim.replica` does in the simulator):

* ``Respond``: to the current stream's response sink;
* ``ReadSource``: a follower on shard ``shard_name(id)``: once its upper passes the
  as_of, the snapshot at the as_of (delivered with upper ``as_of + 1``), then
  every change of a :meth:`~tidegate.runtime.storage.ShardStore.listen`;
* ``StopReading``: stop that follower (releasing its lease);
* ``WriteOutput``: ``compare_and_append`` expecting ``lower`` with an
  idempotency token, reported with ``write_completed`` or, on a mismatch (or
  a finalized shard), ``write_failed``; other failures are retried;
* ``PeekPersist``: a snapshot once the shard's upper passes the peek's time;
* ``WriteCopyTo``: the rows written as Parquet under the copy-to's blob URL
  (:func:`~tidegate.replica._copy_to.write_copy_to`), one copy-to at a time
  and in order, reported with ``copy_to_completed`` (rows written) or
  ``copy_to_failed`` (why not: the answer the client gets);
* ``Reconciled``: a log line and the reconciliation metrics.

The loop steps shortly after inputs (those arriving within ``step_delay_s``
share one step), at once for a peek that its command could not answer (it
waits for a step), and on a periodic tick. A new stream starts a new protocol
iteration of the same core when its first command (which must be ``Hello``) arrives;
until then, responses belong to the old stream and are dropped with it.
A command the core rejects raises its typed error in the stream's reader, so
the server ends the stream with ``FAILED_PRECONDITION`` naming the rule; the
core is unchanged and the next stream starts over with ``Hello``. Executor
failures become typed answers (see :class:`~tidegate.replica.GuardedExecutor`) or
a logged failed step; the service keeps serving.

Nothing here blocks, sleeps or reads a clock: the loop is one step function
(:meth:`ReplicaService._turn`: drain the events, step if due, say when to be
called next) and each piece of IO work (``_Follower``, ``_Writer``,
``_PersistPeek``) is a :class:`~.host.Work` whose ``step()`` polls once and
says when to poll again. A :class:`~.host.ServiceHost` runs them and gives the
time: :class:`~.host.ThreadHost` in production (the loop in one thread, each
piece of work in a thread of its own, as before), or the simulator's kernel
host (``tidegate.sim.kernel_host``), where they are events on virtual
time. The service's behaviour is the same on both.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import queue
import uuid as _uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from tidegate.runtime.controller.schemas import shard_name
from tidegate.runtime.storage import ShardStore
from tidegate.runtime.storage.store import DEFAULT_LEASE_MS
from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.compute_replica.outputs import (
    PeekPersist,
    ReadSource,
    Reconciled,
    Respond,
    StopReading,
    WriteCopyTo,
    WriteOutput,
)
from tidegate.spec.errors import (
    ShardFinalized,
    StageViolation,
    TidegateError,
    UnhandledEffect,
    UpperMismatch,
)
from tidegate.spec.errors.replica import IncompatibleInstance
from tidegate.spec.executor.contract import Executor
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    Hello,
    Peek,
)
from tidegate.spec.protocol.responses import (
    ComputeResponse,
    Frontiers,
    PeekCanceled,
    PeekError,
    PeekResponse,
)

from ._copy_to import write_copy_to
from ._executors import GuardedExecutor
from ._follow import ShardFollower
from ._logs import LOGGER_NAME, log_event
from ._metrics import ReplicaMetrics
from ._queued import Closed, Command, QueuedService, ServiceStopped
from .host import IDLE, ServiceHost, Task, ThreadHost

__all__ = ["ReplicaService", "ServiceStopped"]


def _least(f: Antichain) -> int | None:
    return int(f.elements[0]) if f.elements else None


# -- events on the loop's queue ------------------------------------------------------------


_Command = Command[ComputeCommand]


@dataclass(eq=False)
class _Delivery:
    follower: _Follower
    updates: list[Update]
    upper: Antichain


@dataclass(eq=False)
class _WriteDone:
    sink_id: GlobalId
    ok: bool
    upper: Antichain


@dataclass(eq=False)
class _PersistDone:
    uuid: _uuid.UUID
    rows: dict[Row, int] | None
    error: str | None


@dataclass(eq=False)
class _CopyToDone:
    sink_id: GlobalId
    rows: int | None
    error: str | None


@dataclass(eq=False)
class _SourceFailed:
    follower: _Follower
    error: str


_Event = _Command | Closed | _Delivery | _WriteDone | _PersistDone | _CopyToDone | _SourceFailed


# -- IO work (steps that a host calls; see :mod:`.host`) -----------------------------------


class _Follower(ShardFollower):
    """Follows collection ``id`` (its shard: ``shard_name(id)``) from ``as_of`` for the core's ``ReadSource``."""

    def __init__(self, service: ReplicaService, id: GlobalId, as_of: int) -> None:
        super().__init__(
            host=service.host,
            store=service.store,
            shard=shard_name(id),
            as_of=as_of,
            lease_ms=service.lease_ms,
            poll_s=service.poll_s,
            poll_max_s=service.poll_max_s,
            watch_poll_s=service.watch_poll_s,
            log=service.log,
            on_delivery=lambda f, rows, upper: service._post(_Delivery(self, rows, upper)),
            on_unreadable=lambda f, what: service._post(_SourceFailed(self, what)),
            on_error=lambda name: service.metrics.storage_read_errors.labels(name).inc(),
        )
        self.service = service
        self.id = id


class _Writer:
    """Appends materialized-view outputs, one at a time and in order; retries what may succeed later."""

    def __init__(self, service: ReplicaService) -> None:
        self.service = service
        self.jobs: queue.SimpleQueue[tuple[WriteOutput, str]] = queue.SimpleQueue()
        self.job: tuple[WriteOutput, str] | None = None
        self.delay = 0.05
        self.retry_at = 0.0
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.service.host.spawn("mv-writer", self)

    def submit(self, out: WriteOutput) -> None:
        store = self.service.store
        self.jobs.put((out, f"{store.writer_id}-{store.new_id()}"))
        if self.task is not None:
            self.task.wake()

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def step(self) -> float | None:
        svc = self.service
        if self.job is None:
            try:
                self.job = self.jobs.get_nowait()
            except queue.Empty:
                return IDLE
            self.delay = 0.05
        elif (left := self.retry_at - svc.host.monotonic()) > 0:
            return left  # woken by a new job while backing off
        out, token = self.job
        try:
            new = svc.store.compare_and_append(
                str(out.sink_id), list(out.updates), out.lower, out.upper, token
            )
        except UpperMismatch as e:
            actual = e.actual_upper
            if not isinstance(actual, Antichain):
                actual = Antichain([actual])
            svc.metrics.writes.labels("upper_mismatch").inc()
            svc._post(_WriteDone(out.sink_id, False, actual))
        except ShardFinalized:
            # The view was dropped and its shard closed for good: no retry can succeed, and
            # retrying would hold up every write queued behind this one.
            svc.metrics.writes.labels("finalized").inc()
            svc._post(_WriteDone(out.sink_id, False, Antichain.empty()))
        except Exception as e:
            svc.metrics.writes.labels("retry").inc()
            log_event(
                svc.log,
                "write_failed",
                level=logging.WARNING,
                id=str(out.sink_id),
                error=f"{type(e).__name__}: {e}",
                retry_in_s=self.delay,
            )
            delay, self.delay = self.delay, min(self.delay * 2, 5.0)
            self.retry_at = svc.host.monotonic() + delay
            return delay
        else:
            svc.metrics.writes.labels("ok").inc()
            svc._post(_WriteDone(out.sink_id, True, new))
        self.job = None
        return 0.0

    def close(self) -> None:
        pass


class _CopyToWriter:
    """Writes copy-tos as Parquet under their blob URLs, one at a time and in order (no retries:
    a failure is the copy-to's answer)."""

    def __init__(self, service: ReplicaService) -> None:
        self.service = service
        self.jobs: queue.SimpleQueue[WriteCopyTo] = queue.SimpleQueue()
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.service.host.spawn("copy-to-writer", self)

    def submit(self, out: WriteCopyTo) -> None:
        self.jobs.put(out)
        if self.task is not None:
            self.task.wake()

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def step(self) -> float | None:
        svc = self.service
        try:
            out = self.jobs.get_nowait()
        except queue.Empty:
            return IDLE
        try:
            rows = write_copy_to(out.url, out.sink_id, int(out.as_of), out.schema, out.rows)
        except Exception as e:
            message = str(e) if isinstance(e, TidegateError) else f"{type(e).__name__}: {e}"
            log_event(
                svc.log,
                "copy_to_failed",
                level=logging.WARNING,
                id=str(out.sink_id),
                url=out.url,
                error=message,
            )
            svc._post(_CopyToDone(out.sink_id, None, message))
        else:
            log_event(svc.log, "copy_to_written", id=str(out.sink_id), url=out.url, rows=rows)
            svc._post(_CopyToDone(out.sink_id, rows, None))
        return 0.0

    def close(self) -> None:
        pass


class _PersistPeek:
    """Reads shard ``shard_name(id)`` at ``time`` once its upper passes it (woken by the store's
    notifications where it has them, like a follower)."""

    def __init__(self, service: ReplicaService, out: PeekPersist) -> None:
        self.service = service
        self.out = out
        self.delay = service.poll_s
        self.task: Task | None = None
        self._unwatch: Callable[[], None] | None = None

    def start(self) -> None:
        # Watching before the first step: no commit falls between that step's read and it.
        self._unwatch = self.service.store.watch(str(self.out.collection_id), self._changed)
        self.task = self.service.host.spawn(f"peek-{self.out.uuid}", self)

    def _changed(self, shard: str) -> None:
        if self.task is not None:
            self.task.wake()

    def stop(self) -> None:
        self._stop_watching()
        if self.task is not None:
            self.task.stop()

    def _stop_watching(self) -> None:
        unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()

    def step(self) -> float | None:
        svc, out = self.service, self.out
        shard, t = shard_name(out.collection_id), int(out.timestamp)
        try:
            if not svc.store.upper(shard).less_equal(t):
                rows: dict[Row, int] = {}
                for row, _t, d in svc.store.snapshot_rows(shard, t):
                    rows[row] = rows.get(row, 0) + d
                svc._post(_PersistDone(out.uuid, rows, None))
                return None
        except TidegateError as e:  # unknown shard, compacted past t, finalized
            svc._post(_PersistDone(out.uuid, None, f"{type(e).__name__}: {e}"))
            return None
        except Exception as e:
            log_event(svc.log, "persist_peek_retry", level=logging.WARNING, error=repr(e))
        else:
            if self._unwatch is not None:  # not there yet: a commit to the shard wakes it
                return max(svc.poll_max_s, svc.watch_poll_s)
        delay, self.delay = self.delay, min(self.delay * 2, svc.poll_max_s)
        return delay

    def close(self) -> None:
        self._stop_watching()


# -- the service ------------------------------------------------------------------------------


class ReplicaService(QueuedService):
    """Serves one :class:`ComputeReplica` over ``executor`` and ``store`` (see the module docstring).

    ``tick_s``: the periodic step; ``step_delay_s``: how soon after an input
    the loop steps (inputs arriving meanwhile share that step);
    ``poll_s``/``poll_max_s``: the storage polling interval (backing off
    from the first to the second while idle); ``watch_poll_s``: the interval
    instead, where the store's notifications say when a shard changed
    (:meth:`~tidegate.runtime.storage.ShardStore.watch`); ``lease_ms``: the lease of each
    storage follower's reader (a dead replica's read holds lapse after it);
    ``on_halt(reason)``: called (from the loop) when the core demands that
    the process halt (an incompatible ``CreateInstance`` on reconnect);
    ``host``: where the loop and the IO work run, and the clock
    (:class:`~.host.ThreadHost` by default); ``clock_ms``: the core's clock
    (the host's wall clock by default).
    """

    def __init__(
        self,
        executor: Executor,
        store: ShardStore,
        *,
        tick_s: float = 0.05,
        step_delay_s: float = 0.002,
        poll_s: float = 0.005,
        poll_max_s: float = 0.05,
        watch_poll_s: float = 1.0,
        lease_ms: int = DEFAULT_LEASE_MS,
        metrics: ReplicaMetrics | None = None,
        logger: logging.Logger | None = None,
        on_halt: Callable[[str], None] | None = None,
        host: ServiceHost | None = None,
        clock_ms: Callable[[], int] | None = None,
        memory_limit: int | None = None,
        memory_usage: Callable[[], int] | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else ReplicaMetrics()
        super().__init__(
            host if host is not None else ThreadHost(),
            logger if logger is not None else logging.getLogger(LOGGER_NAME),
            self.metrics,
            hello=Hello,
            violation=StageViolation,
        )
        self.memory_limit = memory_limit
        self.memory_usage = memory_usage if memory_usage is not None else process_tree_rss
        self._next_memory_check = 0.0
        self._next_gauges = 0.0
        self._state_after_failure: int | None = None
        self.executor = GuardedExecutor(executor)
        self.store = store
        self.tick_s = tick_s
        self.step_delay_s = step_delay_s
        self.poll_s = poll_s
        self.poll_max_s = poll_max_s
        self.watch_poll_s = watch_poll_s
        self.lease_ms = lease_ms
        self.metrics.memory_limit_bytes.set(memory_limit or 0)
        self.on_halt = on_halt
        self.core = ComputeReplica(
            self.executor, clock=clock_ms if clock_ms is not None else self.host.wall_ms
        )
        # Loop state (touched only in turns).
        self._next_tick = 0.0
        self._soon: float | None = None  # when to step for inputs that arrived
        self._followers: dict[GlobalId, _Follower] = {}
        self._index_failures: dict[GlobalId, int] = {}
        self._delivered: dict[GlobalId, Antichain] = {}
        self._persist: dict[_uuid.UUID, _PersistPeek] = {}
        self._peek_started: dict[_uuid.UUID, float] = {}
        self._inputs: dict[GlobalId, frozenset[GlobalId]] = {}
        self._outputs: dict[GlobalId, Antichain] = {}
        self._gauged: set[GlobalId] = set()
        self._writer = _Writer(self)
        self._copy_to_writer = _CopyToWriter(self)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> ReplicaService:
        self._writer.start()
        self._copy_to_writer.start()
        self._next_tick = self.host.monotonic() + self.tick_s
        self._run_loop()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop, the storage followers, the writer and pending persist peeks."""
        self._stop_loop(timeout)
        for writer in (self._writer, self._copy_to_writer):
            writer.stop()
            if writer.task is not None:
                writer.task.join(timeout)

    # -- the loop ---------------------------------------------------------------------------

    def _after(self, events: Sequence[object], inputs: bool) -> float:
        """Step if due: shortly after inputs, at once for a peek that waits for a step, and
        on the tick."""
        now = self.host.monotonic()
        if inputs and self._soon is None:
            self._soon = now + self.step_delay_s
        peeks = [
            e.command.peek.uuid
            for e in events
            if isinstance(e, Command) and isinstance(e.command, Peek)
        ]
        if peeks and not set(peeks).isdisjoint(self.core.pending_peeks()):
            # A peek the command could not answer waits for the index to pass its time,
            # i.e. for a step, and what it waits for may have been delivered already:
            # step now, not step_delay_s later (its latency is what its user sees).
            self._soon = now
        if (self._soon is not None and now >= self._soon) or now >= self._next_tick:
            self._guarded(self._step)
            self._soon = None
            if now >= self._next_tick:
                self._next_tick = now + self.tick_s
        return self._next_tick if self._soon is None else min(self._next_tick, self._soon)

    def _end(self) -> None:
        """The loop ends: refuse new commands, stop the IO work."""
        self._mark_stopped()
        self._shutdown_io()

    def _shutdown_io(self) -> None:
        work: list[_Follower | _PersistPeek] = [*self._followers.values(), *self._persist.values()]
        for w in work:
            w.stop()
        for w in work:  # their leases are released before the store can close
            if w.task is not None:
                w.task.join(SHUTDOWN_JOIN_S)
        self._followers.clear()
        self._persist.clear()
        self._refuse_queued()  # commands queued behind the stop get an answer

    def _handle(self, ev: _Event) -> bool:
        """Handle one event; whether it is an input worth a step."""
        if isinstance(ev, Command):
            return self._command(ev)
        if isinstance(ev, Closed):
            self._closed(ev)
            return False
        try:
            if isinstance(ev, _Delivery):
                f = ev.follower
                if self._followers.get(f.id) is not f:
                    return False  # a read that was restarted or stopped meanwhile
                self._delivered[f.id] = ev.upper
                if f.unreadable:  # repaired: readable again
                    f.unreadable = False
                    f.complained = ""
                    self.metrics.unreadable_sources.labels(str(f.id)).set(0)
                    log_event(self.log, "storage_readable", id=str(f.id))
                self.core.feed_source(f.id, ev.updates, ev.upper)
                self._perform()
            elif isinstance(ev, _WriteDone):
                if ev.ok:
                    self.core.write_completed(ev.sink_id, ev.upper)
                    self._perform()
                else:
                    log_event(self.log, "write_lost_race", id=str(ev.sink_id), upper=str(ev.upper))
                    self.core.write_failed(ev.sink_id, ev.upper)
                    self._perform()
            elif isinstance(ev, _SourceFailed):
                f = ev.follower
                if self._followers.get(f.id) is not f:
                    return False
                self.metrics.unreadable_sources.labels(str(f.id)).set(1)
                self.core.source_failed(f.id, ev.error)
                self._perform()
            elif isinstance(ev, _PersistDone):
                self._persist.pop(ev.uuid, None)
                self.core.complete_persist_peek(ev.uuid, ev.rows, error=ev.error)
                self._perform()
            elif isinstance(ev, _CopyToDone):
                if ev.error is None:
                    self.core.copy_to_completed(ev.sink_id, ev.rows or 0)
                else:
                    self.core.copy_to_failed(ev.sink_id, ev.error)
                self._perform()
        except TidegateError as e:
            log_event(
                self.log,
                "callback_rejected",
                level=logging.ERROR,
                error=type(e).__name__,
                message=str(e),
            )
        return True

    def _command(self, ev: _Command) -> bool:
        cmd = ev.command
        received = self.host.monotonic()
        if not self._admit(ev):
            return False
        if isinstance(cmd, Peek):
            self._peek_started[cmd.peek.uuid] = received
        elif isinstance(cmd, CreateDataflow):
            self._note_inputs(cmd)
        ev.done.set_result(None)
        self._perform()
        # a peek is answered (or parked until a step passes its time) by the command itself:
        # no step is due for it, and one 2 ms later only competed with the next peek's answer
        return not isinstance(cmd, (Peek, CancelPeek))

    def _to_core(self, command: ComputeCommand) -> None:
        self.core.handle_command(command)

    def _refused(self, event: Command[Any], error: TidegateError) -> None:
        super()._refused(event, error)
        if isinstance(error, IncompatibleInstance):
            log_event(self.log, "halt", level=logging.CRITICAL, reason=str(error))
            if self.on_halt is not None:
                self.on_halt(str(error))

    def _began(self) -> None:
        """A new iteration: forget what the previous one's peeks were waiting for (the core
        dropped them)."""
        pending = set(self.core.pending_peeks())
        for u in [u for u in self._persist if u not in pending]:
            self._persist.pop(u).stop()
        self._peek_started = {u: t for u, t in self._peek_started.items() if u in pending}

    def _note_inputs(self, cmd: CreateDataflow) -> None:
        df = cmd.dataflow
        sources: set[GlobalId] = {s.id for s in df.source_imports}
        for imp in df.index_imports:
            sources |= self._inputs.get(imp.id, frozenset())
        for gid in df.export_ids:
            self._inputs[gid] = frozenset(sources)

    def _step(self) -> None:
        if not self.core.stage.is_computation:
            return
        start = self.host.monotonic()
        try:
            self.core.step()
        except Exception as e:
            self.metrics.step_errors.inc()
            log_event(
                self.log,
                "step_failed",
                level=logging.ERROR,
                error=f"{type(e).__name__}: {e}",
                exc_info=not isinstance(e, TidegateError),
            )
            return
        self.metrics.step_latency.observe(self.host.monotonic() - start)
        if self.memory_limit is not None and self.host.monotonic() >= self._next_memory_check:
            self._next_memory_check = self.host.monotonic() + MEMORY_CHECK_S
            self._enforce_memory_limit(self.memory_limit)
        self._perform()
        if self.host.monotonic() >= self._next_gauges:
            self._next_gauges = self.host.monotonic() + GAUGES_S
            self._update_gauges()

    def _enforce_memory_limit(self, limit: int) -> None:
        """Over ``limit``, fail the dataflow holding the most state (the core chooses).

        Memory a failed dataflow freed may stay resident (Python's allocator keeps its
        arenas): while the state left is no larger than it was right after the last
        failure, being over the limit is that, and nothing more is failed.
        """
        used = self.memory_usage()
        self.metrics.memory_bytes.set(used)
        if used <= limit:
            self._state_after_failure = None
            return
        held = sum(self.executor.state_records().values())
        if self._state_after_failure is not None and held <= self._state_after_failure:
            return
        reason = f"the replica used {used:,} bytes of its {limit:,}"
        exports = self.core.fail_largest_dataflow(reason)
        if not exports:
            return  # nothing holds state: the memory is the process's own
        self._state_after_failure = sum(self.executor.state_records().values())
        self.metrics.dataflows_failed.labels("memory_limit").inc()
        log_event(
            self.log,
            "memory_limit_exceeded",
            level=logging.ERROR,
            exports=[str(g) for g in exports],
            used_bytes=used,
            limit_bytes=limit,
        )
        gc.collect()

    # -- outputs ----------------------------------------------------------------------------

    def _perform(self) -> None:
        """Carry out what the replica core asked for since the last call."""
        responses: list[ComputeResponse] = []
        for out in self.core.drain():
            if isinstance(out, Respond):
                responses.append(out.response)
                self._observe(out.response)
            elif isinstance(out, ReadSource):
                self._read(out.collection_id, out.as_of)
            elif isinstance(out, StopReading):
                f = self._followers.pop(out.collection_id, None)
                self._delivered.pop(out.collection_id, None)
                if f is not None:
                    f.stop()
                log_event(self.log, "stop_reading", id=str(out.collection_id))
            elif isinstance(out, WriteOutput):
                self._writer.submit(out)
            elif isinstance(out, WriteCopyTo):
                self._copy_to_writer.submit(out)
            elif isinstance(out, PeekPersist):
                p = _PersistPeek(self, out)
                self._persist[out.uuid] = p
                p.start()
            elif isinstance(out, Reconciled):
                self._reconciled(out)
            else:
                raise UnhandledEffect("the replica service", out)
        if responses and self._conn is not None:
            self._conn.sink.send_many(responses)
        self.metrics.storage_reads.set(len(self._followers))

    def _read(self, id: GlobalId, as_of: Antichain) -> None:
        old = self._followers.pop(id, None)
        if old is not None:
            old.stop()
        if as_of.is_empty():
            return
        (t,) = as_of.elements
        f = _Follower(self, id, int(t))
        self._followers[id] = f
        self._delivered.pop(id, None)
        log_event(self.log, "read_source", id=str(id), as_of=int(t))
        f.start(f"follow-{id}")

    def _reconciled(self, out: Reconciled) -> None:
        m = self.metrics.reconciled
        m.labels("reused").inc(len(out.reused))
        m.labels("rebuilt").inc(len(out.rebuilt))
        m.labels("dropped").inc(len(out.dropped))
        for key in out.dropped:  # dropped without a report: forget their series here
            for gid in key:
                self._outputs.pop(gid, None)
                self._inputs.pop(gid, None)
                self.metrics.forget(str(gid))
        log_event(
            self.log,
            "reconciled",
            reused=[[str(g) for g in k] for k in out.reused],
            rebuilt=[[str(g) for g in k] for k in out.rebuilt],
            dropped=[[str(g) for g in k] for k in out.dropped],
        )

    def _observe(self, resp: ComputeResponse) -> None:
        self.metrics.responses.labels(type(resp).__name__).inc()
        if isinstance(resp, PeekResponse):
            started = self._peek_started.pop(resp.uuid, None)
            p = self._persist.pop(resp.uuid, None)
            if p is not None:
                p.stop()
            if started is not None:
                kind = (
                    "canceled"
                    if isinstance(resp.result, PeekCanceled)
                    else "error"
                    if isinstance(resp.result, PeekError)
                    else "rows"
                )
                self.metrics.peek_latency.labels(kind).observe(self.host.monotonic() - started)
        elif isinstance(resp, Frontiers) and resp.output is not None:
            if resp.output.is_empty():
                self._outputs.pop(resp.id, None)
                self._inputs.pop(resp.id, None)
                self.metrics.forget(str(resp.id))
            else:
                self._outputs[resp.id] = resp.output

    def _gauge_indexes(self) -> None:
        """Where each index keeps its history; a warning for each new failure keeping it there."""
        m = self.metrics
        seen: dict[GlobalId, int] = {}
        for gid, st in self.executor.index_status().items():
            name = str(gid)
            where = getattr(st, "location", "driver")
            m.set_collection(m.index_in_spark, name, {"spark": 1.0, "moving": 0.5}.get(where, 0.0))
            failures = int(getattr(st, "failures", 0))
            m.set_collection(m.index_storage_failures, name, failures)
            if failures > self._index_failures.get(gid, 0):
                log_event(
                    self.log,
                    "index_storage_failed",
                    level=logging.WARNING,
                    collection=name,
                    location=where,
                    failures=failures,
                    error=getattr(st, "error", None),
                )
            seen[gid] = failures
        self._index_failures = seen

    def _update_gauges(self) -> None:
        m = self.metrics
        m.dataflows.set(len(self.core.installed_dataflows()))
        for gid, out in self._outputs.items():
            least = _least(out)
            if least is None:
                continue
            name = str(gid)
            m.set_collection(m.output_frontier, name, least / 1000)  # epoch ms: seconds
            uppers = [
                _least(self._delivered[s])
                for s in self._inputs.get(gid, ())
                if s in self._delivered
            ]
            known = [u for u in uppers if u is not None]
            if known:
                m.set_collection(m.frontier_lag, name, max(0, min(known) - least) / 1000)
        self._gauge_indexes()
        records = self.executor.records
        for gid in self._gauged - records.keys():
            m.remove_collection(m.arrangement_records, str(gid))
        for gid, n in records.items():
            m.set_collection(m.arrangement_records, str(gid), n)
        self._gauged = set(records)


SHUTDOWN_JOIN_S = 5.0
"""How long a stopping replica waits for each storage reader to release its lease."""

MEMORY_CHECK_S = 0.2

GAUGES_S = 0.1
"""How often, at most, a replica refreshes its per-collection gauges (after a step): a
replica steps every tick and after inputs, many times a second, and Prometheus scrapes every
few seconds; every collection's frontiers and arrangement sizes each time cost more than the
step itself for a small dataflow."""
"""How often, at most, a replica with a memory limit measures its memory (after a step)."""


def process_tree_rss() -> int:
    """Resident memory of this process and its descendants (a local Spark's JVM), in bytes."""
    me = psutil.Process()
    total = int(me.memory_info().rss)
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += int(child.memory_info().rss)
    return total
