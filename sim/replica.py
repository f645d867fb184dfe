"""A simulated replica process: the spec ``ComputeReplica`` over the ``PythonExecutor``.

It serves the compute protocol as a
:class:`~tidegate.runtime.transport.handler.ReplicaHandler` behind a
:class:`~tidegate.sim.transport.SimReplicaEndpoint`, so the production
controller driver reaches it through :class:`~tidegate.sim.transport.SimTransport`
exactly as it reaches a gRPC replica. Like the real replica service
(``tidegate.replica.service``) it starts a new protocol iteration when a new
stream's ``Hello`` arrives (responses go to the newest started stream) and
performs the core's outputs against the production
:class:`~tidegate.runtime.storage.ShardStore`, here over the simulated disk:

* ``ReadSource``: a follower that, once the shard's upper passes the as_of,
  delivers the snapshot there and then every change of a
  :meth:`~tidegate.runtime.storage.ShardStore.listen` (polled when the
  shard's consensus key changes, and periodically for the lease);
* ``WriteOutput``: ``compare_and_append`` with an idempotency token, one
  write at a time, retried while storage fails transiently;
* ``PeekPersist``: a snapshot once the shard's upper passes the peek's time;
* ``WriteCopyTo``: the simulated world has no external blob store: a copy-to
  is reported written (its row count) a storage latency later, in order.

Everything happens in kernel events, each storage result a latency later. A
crash loses everything; the process restarts later with a fresh core.
Callbacks of an earlier incarnation are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidegate.runtime.controller.storage_io import is_transient
from tidegate.runtime.storage.store import Listener, ShardStore
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
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
    SnapshotBeforeSince,
    StageViolation,
    TidegateError,
    UnhandledEffect,
    UpperMismatch,
)
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    ComputeCommand,
    CreateDataflow,
    Hello,
    InitializationComplete,
)
from tidegate.spec.shard import CompactionPolicy

from .choices import ChoiceSource
from .kernel import EventHandle, Kernel
from .network import SimNetwork
from .process import ProcessKilled, SimProcess
from .storage import BlobClient, ConsensusClient, SimDisk, StorageFaults
from .transport import SimReplicaEndpoint

__all__ = ["LEASE_MS", "ReplicaWorld", "SimReplica"]

STEP_SOON_MS = 3
"""After an input the replica steps this soon (inputs arriving meanwhile share the step)."""
POLL_MS = 500
"""A follower polls at least this often (its lease heartbeat), besides on every change."""
LEASE_MS = 5_000
"""The lease of a follower's reader: a crashed replica's hold on a shard lapses after it."""
RETRY_MS = (20, 1_000)


@dataclass
class ReplicaWorld:
    """What a simulated replica needs from its world."""

    kernel: Kernel
    network: SimNetwork
    disk: SimDisk
    faults: StorageFaults
    latencies: ChoiceSource
    record: Callable[..., None]
    count: Callable[[str], None]
    violate: Callable[[str, str], None]
    step_ms: tuple[int, int] = (10, 50)
    storage_latency_ms: tuple[int, int] = (1, 4)
    shard_policy: CompactionPolicy | None = None
    """The maintenance policy of the replica's shard store (the run's knob)."""


@dataclass(eq=False)
class _Follower:
    id: GlobalId
    as_of: int
    listener: Listener | None = None
    snapshotted: bool = False
    poll: EventHandle | None = None
    unwatch: Callable[[], None] | None = None
    last_at: int = 0
    failures: int = 0
    stopped: bool = False


@dataclass(eq=False)
class _PersistPeek:
    out: PeekPersist
    poll: EventHandle | None = None
    unwatch: Callable[[], None] | None = None
    failures: int = 0


@dataclass(eq=False)
class _Write:
    out: WriteOutput
    token: str
    failures: int = 0


@dataclass(eq=False)
class _Session:
    """One accepted stream (the transport's ``ReplicaConnection``)."""

    replica: SimReplica
    number: int
    incarnation: int
    sink: ResponseSink
    started: bool = False

    def on_command(self, command: ComputeCommand) -> None:
        self.replica._on_command(self, command)

    def on_close(self) -> None:
        self.replica._on_close(self)


@dataclass(eq=False)
class _State:
    """One incarnation's state (lost in a crash)."""

    core: ComputeReplica
    store: ShardStore
    followers: dict[GlobalId, _Follower] = field(default_factory=dict)
    persist: dict[Any, _PersistPeek] = field(default_factory=dict)
    writes: list[_Write] = field(default_factory=list)
    writing: bool = False
    copy_tos: list[WriteCopyTo] = field(default_factory=list)
    copying: bool = False
    sink: ResponseSink | None = None
    newest: int = 0
    iterations: int = 0
    tick: EventHandle | None = None
    soon: EventHandle | None = None


class ReplicaProcess:
    """What every simulated replica process has, whatever it runs: a name, a process that
    dies and restarts, an endpoint on the network, a step interval and a storage client of
    its own; and the ``crash_replica_rehydrating`` fault."""

    def __init__(self, name: str, world: ReplicaWorld) -> None:
        self.name = name
        self.world = world
        self.process = SimProcess(name)
        self.endpoint = SimReplicaEndpoint(world.network, name, self)
        self.endpoint.now_ms = lambda: world.kernel.now_ms
        self.step_ms = world.latencies.integer(*world.step_ms)
        self.crash_on_rehydration: int | None = None
        """Set by a fault: die at the next rehydration, restarting this many ms later."""

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def incarnation(self) -> int:
        return self.process.incarnation

    def start(self) -> None:
        """Start (or restart) the process with fresh state."""
        raise NotImplementedError

    def crash(self) -> None:
        """The process dies, losing everything but what is on the disk."""
        raise NotImplementedError

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> ReplicaConnection:
        """The transport's handler: a controller connected."""
        raise NotImplementedError

    def _restart_after_crash(self) -> None:
        if not self.process.alive:
            self.start()

    def _store(self) -> ShardStore:
        """The production shard store over this incarnation's simulated Blob and Consensus."""
        w = self.world
        return ShardStore(
            BlobClient(w.disk, self.process, w.faults),
            ConsensusClient(w.disk, self.process, w.faults),
            writer_id=f"replica-{self.name}-{self.process.incarnation}",
            clock_ms=lambda: w.kernel.now_ms,
            new_id=self.process.new_id,
            policy=w.shard_policy,
        )

    def _crashes_rehydrating(self, iterations: int, command: ComputeCommand) -> bool:
        """Whether a pending ``crash_replica_rehydrating`` fault strikes at ``command`` (a
        rehydration's ``CreateDataflow`` or ``InitializationComplete``, once a protocol
        iteration ran); if so the replica has died, and restarts later."""
        if (
            self.crash_on_rehydration is None
            or iterations < 1
            or not isinstance(command, CreateDataflow | InitializationComplete)
        ):
            return False
        back, self.crash_on_rehydration = self.crash_on_rehydration, None
        self.world.count("crash_replica_rehydrating")
        self.world.record("replica_crash_rehydrating", replica=self.name)
        self.crash()
        self.world.kernel.call_later(back, self._restart_after_crash)
        return True


class SimReplica(ReplicaProcess):
    """One replica process (see the module docstring); ``name`` is its replica id."""

    def __init__(self, name: str, world: ReplicaWorld) -> None:
        super().__init__(name, world)
        self.state: _State | None = None
        self._sessions = 0
        self.commands_seen = 0

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.process.start()
        w = self.world
        store = self._store()
        core = ComputeReplica(PythonExecutor(), clock=lambda: w.kernel.now_ms)
        self.state = _State(core, store)
        self.endpoint.restart()
        w.record("replica_start", replica=self.name, incarnation=self.process.incarnation)
        self.state.tick = w.kernel.call_later(self.step_ms, self._periodic, self.incarnation)

    def crash(self) -> None:
        """The process dies: its state, reads and stream are gone."""
        if not self.process.alive:
            return
        self.process.die()
        state, self.state = self.state, None
        if state is not None:
            for f in state.followers.values():
                self._stop_follower(f, release=False)
            for p in state.persist.values():
                self._stop_persist(p)
            for h in (state.tick, state.soon):
                if h is not None:
                    h.cancel()
        self.endpoint.crash()
        self.world.record("replica_crash", replica=self.name, incarnation=self.incarnation)

    def _guard(self, incarnation: int) -> _State | None:
        if incarnation != self.incarnation or not self.process.alive:
            return None
        return self.state

    def _io(self, fn: Callable[[], None]) -> None:
        """Run storage IO; a crash point inside it kills this replica."""
        try:
            fn()
        except ProcessKilled:
            self.crash()

    # -- the transport's handler --------------------------------------------------------------
    def on_connect(self, metadata: Any, responses: ResponseSink) -> _Session:
        self._sessions += 1
        return _Session(self, self._sessions, self.incarnation, responses)

    def _on_command(self, session: _Session, command: ComputeCommand) -> None:
        state = self._guard(session.incarnation)
        if state is None or session.number < state.newest:
            return  # a dead incarnation's or a preempted stream's leftover
        self.commands_seen += 1
        if not session.started and not isinstance(command, Hello):
            raise StageViolation(
                f"{type(command).__name__} as the first command of a new connection: "
                "every connection starts with Hello"
            )
        if self._crashes_rehydrating(state.iterations, command):
            return
        state.core.handle_command(command)  # a typed refusal cuts the stream
        if not session.started:
            session.started = True
            state.newest = session.number
            state.sink = session.sink
            state.iterations += 1
            self._new_iteration(state)
        self._perform(state)
        self._step_soon(state)

    def _on_close(self, session: _Session) -> None:
        state = self._guard(session.incarnation)
        if state is not None and state.sink is session.sink:
            state.sink = None

    def _new_iteration(self, state: _State) -> None:
        """Forget what the previous iteration's persist peeks were waiting for."""
        pending = set(state.core.pending_peeks())
        for uuid in [u for u in state.persist if u not in pending]:
            self._stop_persist(state.persist.pop(uuid))

    # -- stepping -----------------------------------------------------------------------------
    def _periodic(self, incarnation: int) -> None:
        state = self._guard(incarnation)
        if state is None:
            return
        self._step(state)
        state.tick = self.world.kernel.call_later(self.step_ms, self._periodic, incarnation)

    def _step_soon(self, state: _State) -> None:
        if state.soon is None:
            state.soon = self.world.kernel.call_later(
                STEP_SOON_MS, self._soon_step, self.incarnation
            )

    def _soon_step(self, incarnation: int) -> None:
        state = self._guard(incarnation)
        if state is not None:
            state.soon = None
            self._step(state)

    def _step(self, state: _State) -> None:
        if state.core.stage.is_computation:
            state.core.step()
            self._perform(state)

    # -- outputs ------------------------------------------------------------------------------
    def _perform(self, state: _State) -> None:
        """Carry out what the replica core asked for since the last call."""
        for out in state.core.drain():
            if isinstance(out, Respond):
                if state.sink is not None:
                    state.sink.send(out.response)
            elif isinstance(out, ReadSource):
                self._read(state, out.collection_id, out.as_of)
            elif isinstance(out, StopReading):
                f = state.followers.pop(out.collection_id, None)
                if f is not None:
                    self._stop_follower(f, release=True)
            elif isinstance(out, WriteOutput):
                state.writes.append(_Write(out, self.process.new_id()))
                self._write_next(state)
            elif isinstance(out, PeekPersist):
                p = _PersistPeek(out)
                state.persist[out.uuid] = p
                self._watch_persist(state, p)
            elif isinstance(out, WriteCopyTo):
                state.copy_tos.append(out)
                self._copy_to_next(state)
            elif isinstance(out, Reconciled):
                self.world.record(
                    "replica_reconciled",
                    replica=self.name,
                    reused=len(out.reused),
                    rebuilt=len(out.rebuilt),
                    dropped=len(out.dropped),
                )
            else:
                raise UnhandledEffect("the simulated replica", out)

    def _latency(self) -> int:
        low, high = self.world.storage_latency_ms
        return self.world.latencies.integer(low, high) * self.world.faults.slow_factor

    def _backoff(self, failures: int) -> int:
        low, cap = RETRY_MS
        return int(min(cap, low * 2 ** min(failures, 10)))

    # -- reads --------------------------------------------------------------------------------
    def _read(self, state: _State, id: GlobalId, as_of: Antichain) -> None:
        old = state.followers.pop(id, None)
        if old is not None:
            self._stop_follower(old, release=True)
        if as_of.is_empty():
            return
        (t,) = as_of.elements
        f = _Follower(id, int(t))
        state.followers[id] = f
        inc = self.incarnation
        f.unwatch = self.world.disk.watch(str(id), lambda key: self._poll_soon(inc, f))
        self._poll_soon(inc, f)

    def _stop_follower(self, f: _Follower, *, release: bool) -> None:
        f.stopped = True
        if f.poll is not None:
            f.poll.cancel()
        if f.unwatch is not None:
            f.unwatch()
        listener, f.listener = f.listener, None
        if release and listener is not None:
            # Best effort, as the real replica: an unreleased lease lapses after LEASE_MS.
            try:
                listener.close()
            except ProcessKilled:
                raise
            except Exception:
                self.world.count("replica_release_failed")

    def _poll_soon(self, incarnation: int, f: _Follower) -> None:
        """Poll a storage latency from now, unless a poll is due sooner anyway."""
        if f.stopped:
            return
        kernel = self.world.kernel
        at = kernel.now_ms + self._latency()
        if f.poll is not None and not f.poll.cancelled:
            if f.poll.at_ms <= at:
                return
            f.poll.cancel()
        f.poll = kernel.call_at(at, self._poll, incarnation, f)

    def _poll(self, incarnation: int, f: _Follower) -> None:
        f.poll = None
        state = self._guard(incarnation)
        if state is None or f.stopped:
            return
        self._io(lambda: self._poll_io(state, incarnation, f))
        if not f.stopped and self._guard(incarnation) is not None and f.poll is None:
            f.poll = self.world.kernel.call_later(POLL_MS, self._poll, incarnation, f)

    def _poll_io(self, state: _State, incarnation: int, f: _Follower) -> None:
        store, shard = state.store, str(f.id)
        try:
            if f.listener is None:  # holds the since at the as_of from now on
                f.listener = store.listen(shard, f.as_of, lease_ms=LEASE_MS)
            if not f.snapshotted:
                if store.upper(shard).less_equal(f.as_of):
                    return  # polled again when the shard moves
                rows = store.snapshot_rows(shard, f.as_of)
                f.snapshotted = True
                self._deliver(state, incarnation, f, rows, Antichain([f.as_of + 1]))
            while (event := f.listener.poll()) is not None:
                self._deliver(state, incarnation, f, event.updates, event.progress)
                if event.progress.is_empty():
                    self._stop_follower(f, release=True)
                    return
            f.failures = 0
        except SnapshotBeforeSince as e:
            self.world.violate(
                "read_below_since", f"replica {self.name} reads {f.id} from {f.as_of}: {e}"
            )
        except ShardFinalized:
            self._stop_follower(f, release=False)  # the collection was dropped
        except (ProcessKilled, StageViolation):
            raise
        except Exception as e:
            if not is_transient(e) and not isinstance(e, TidegateError):
                raise
            f.failures += 1
            self.world.count("replica_read_retried")
            f.poll = self.world.kernel.call_later(
                self._backoff(f.failures), self._poll, incarnation, f
            )

    def _deliver(
        self,
        state: _State,
        incarnation: int,
        f: _Follower,
        updates: list[Update],
        upper: Antichain,
    ) -> None:
        at = max(self.world.kernel.now_ms + self._latency(), f.last_at)
        f.last_at = at
        self.world.kernel.call_at(at, self._delivered, incarnation, f, updates, upper)

    def _delivered(
        self, incarnation: int, f: _Follower, updates: list[Update], upper: Antichain
    ) -> None:
        state = self._guard(incarnation)
        if state is None or f.stopped or state.followers.get(f.id) is not f:
            return
        state.core.feed_source(f.id, updates, upper)
        self._perform(state)
        self._step_soon(state)

    # -- writes -------------------------------------------------------------------------------
    def _write_next(self, state: _State) -> None:
        if state.writing or not state.writes:
            return
        state.writing = True
        w = state.writes[0]
        delay = self._latency() if not w.failures else self._backoff(w.failures)
        self.world.kernel.call_later(delay, self._write, self.incarnation, w)

    def _write(self, incarnation: int, w: _Write) -> None:
        state = self._guard(incarnation)
        if state is None:
            return
        out = w.out
        result: list[tuple[bool, Antichain]] = []

        def io() -> None:
            try:
                upper = state.store.compare_and_append(
                    str(out.sink_id), list(out.updates), out.lower, out.upper, w.token
                )
                result.append((True, upper))
            except UpperMismatch as e:
                actual = e.actual_upper
                result.append((False, actual if isinstance(actual, Antichain) else out.lower))
            except ShardFinalized:
                result.append((False, Antichain.empty()))
            except ProcessKilled:
                raise
            except Exception as e:
                if not is_transient(e):
                    raise
                w.failures += 1
                self.world.count("replica_write_retried")

        self._io(io)
        if self._guard(incarnation) is None:
            return
        state.writing = False
        if result:
            state.writes.pop(0)
            ok, upper = result[0]
            self.world.kernel.call_later(
                self._latency(), self._written, incarnation, out.sink_id, ok, upper
            )
        self._write_next(state)

    def _copy_to_next(self, state: _State) -> None:
        if state.copying or not state.copy_tos:
            return
        state.copying = True
        self.world.kernel.call_later(self._latency(), self._copied, self.incarnation)

    def _copied(self, incarnation: int) -> None:
        state = self._guard(incarnation)
        if state is None:
            return
        state.copying = False
        out = state.copy_tos.pop(0)
        state.core.copy_to_completed(out.sink_id, sum(n for _, n in out.rows))
        self._perform(state)
        self._copy_to_next(state)

    def _written(self, incarnation: int, sink: GlobalId, ok: bool, upper: Antichain) -> None:
        state = self._guard(incarnation)
        if state is None:
            return
        try:
            if ok:
                state.core.write_completed(sink, upper)
            else:
                self.world.record("mv_write_lost", replica=self.name, id=str(sink))
                state.core.write_failed(sink, upper)
        except TidegateError as e:  # the sink was dropped meanwhile
            self.world.record("mv_write_ignored", replica=self.name, error=type(e).__name__)
            return
        self._perform(state)
        self._step_soon(state)

    # -- persist peeks ------------------------------------------------------------------------
    def _watch_persist(self, state: _State, p: _PersistPeek) -> None:
        inc = self.incarnation
        key = str(p.out.collection_id)
        p.unwatch = self.world.disk.watch(key, lambda k: self._persist_soon(inc, p))
        self._persist_soon(inc, p)

    def _stop_persist(self, p: _PersistPeek) -> None:
        if p.poll is not None:
            p.poll.cancel()
        if p.unwatch is not None:
            p.unwatch()

    def _persist_soon(self, incarnation: int, p: _PersistPeek) -> None:
        """Look at the shard a storage latency from now, unless a look is due sooner anyway."""
        kernel = self.world.kernel
        at = kernel.now_ms + self._latency()
        if p.poll is not None and not p.poll.cancelled:
            if p.poll.at_ms <= at:
                return
            p.poll.cancel()
        p.poll = kernel.call_at(at, self._persist_poll, incarnation, p)

    def _persist_poll(self, incarnation: int, p: _PersistPeek) -> None:
        p.poll = None
        state = self._guard(incarnation)
        if state is None or state.persist.get(p.out.uuid) is not p:
            return
        out = p.out
        shard, t = str(out.collection_id), int(out.timestamp)
        answer: list[tuple[dict[Row, int] | None, str | None]] = []

        def io() -> None:
            try:
                if state.store.upper(shard).less_equal(t):
                    return
                rows: dict[Row, int] = {}
                for row, _t, d in state.store.snapshot_rows(shard, t):
                    rows[row] = rows.get(row, 0) + d
                answer.append((rows, None))
            except ProcessKilled:
                raise
            except Exception as e:
                if is_transient(e):
                    p.failures += 1
                    self.world.count("replica_persist_peek_retried")
                    p.poll = self.world.kernel.call_later(
                        self._backoff(p.failures), self._persist_poll, incarnation, p
                    )
                elif isinstance(e, TidegateError):  # unknown shard, compacted past t, finalized
                    answer.append((None, f"{type(e).__name__}: {e}"))
                else:
                    raise

        self._io(io)
        if not answer or self._guard(incarnation) is None:
            return
        self._stop_persist(state.persist.pop(out.uuid))
        rows, error = answer[0]
        self.world.kernel.call_later(
            self._latency(), self._persist_done, incarnation, out.uuid, rows, error
        )

    def _persist_done(
        self, incarnation: int, uuid: Any, rows: dict[Row, int] | None, error: str | None
    ) -> None:
        state = self._guard(incarnation)
        if state is None:
            return
        try:
            state.core.complete_persist_peek(uuid, rows, error=error)
        except TidegateError:
            return  # the peek was cancelled or its iteration replaced meanwhile
        self._perform(state)
