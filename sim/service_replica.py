"""The real replica service in the simulated world: ``tidegate.replica.service`` on virtual time.

:class:`ServiceReplica` is the option beside :class:`~tidegate.sim.replica.SimReplica`
(``Scenario.replica == "service"``): a simulated process that runs the
production :class:`~tidegate.replica.service.ReplicaService` over the
``PythonExecutor``, served as the
:class:`~tidegate.runtime.transport.handler.ReplicaHandler` of a
:class:`~tidegate.sim.transport.SimReplicaEndpoint`, so the controller reaches
it through the same transport. Its storage is the production
:class:`~tidegate.runtime.storage.ShardStore` over the process's own
simulated Blob and Consensus clients.

The service's loop and IO work are step functions (see
:mod:`tidegate.replica.host`); :class:`KernelHost` runs them as kernel events:

* the loop's turn runs at once when an event is posted (so a command's
  typed rejection reaches the endpoint synchronously, as a gRPC reader sees
  it), and at the deadline the turn returns;
* each step of a follower, the writer or a persist peek runs a storage
  latency (drawn from the world's latencies, times the slow-storage factor)
  after it was asked for, and its ``close`` a latency after it is stopped;
* time is the kernel's (``monotonic`` and the core's clock); no thread, no
  sleep, no wall clock.

A crash kills the host (its pending events become no-ops: nothing of the
dead incarnation runs again) and the process; a restart builds a fresh
service. A :class:`~tidegate.sim.process.ProcessKilled` raised inside a
storage call crashes the replica. The service's warnings go into the trace;
the log events that mean a bug (a failed command, step or event, a crashed
loop) or a read below the since become violations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TypeVar

from tidegate.replica.host import IDLE, Work
from tidegate.replica.service import ReplicaService
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.protocol.commands import (
    ComputeCommand,
    Hello,
)

from .kernel import EventHandle, Kernel
from .process import ProcessKilled
from .replica import LEASE_MS, STEP_SOON_MS, ReplicaProcess, ReplicaWorld
from .service_log import ServiceLog, service_logger

__all__ = ["KernelHost", "ServiceReplica"]

T = TypeVar("T")

BUG_EVENTS = frozenset({"command_failed", "event_failed", "loop_crashed", "step_failed"})
"""The service's log events that mean a bug (with the reference executor, nothing fails)."""


class KernelHost:
    """Runs a :class:`ReplicaService` on a :class:`Kernel` (see the module docstring).

    ``latency()`` is the delay of one storage step; ``on_killed()`` is called
    when a step dies of a :class:`ProcessKilled`. One host per incarnation:
    after :meth:`kill` nothing it scheduled runs.
    """

    def __init__(
        self, kernel: Kernel, latency: Callable[[], int], on_killed: Callable[[], None]
    ) -> None:
        self.kernel = kernel
        self.latency = latency
        self.on_killed = on_killed
        self.alive = True

    def kill(self) -> None:
        self.alive = False

    def monotonic(self) -> float:
        return self.kernel.now_ms / 1000

    def wall_ms(self) -> int:
        return self.kernel.now_ms

    def run_loop(self, turn: Callable[[], float | None]) -> _KernelLoop:
        loop = _KernelLoop(self, turn)
        loop.wake()
        return loop

    def spawn(self, name: str, work: Work) -> _KernelTask:
        return _KernelTask(self, work)

    def wait(self, done: Future[T]) -> T:
        if not done.done():  # the turn ran inline when the command was posted: never here
            raise RuntimeError("the replica loop did not handle a command at once")
        return done.result()

    def at_ms(self, deadline_s: float) -> int:
        """The first virtual millisecond at which :meth:`monotonic` reaches ``deadline_s``
        (and never now: a turn that asks for now again would spin)."""
        ms = math.ceil(deadline_s * 1000)
        if ms / 1000 < deadline_s:
            ms += 1
        return max(ms, self.kernel.now_ms + 1)

    def call(self, fn: Callable[[], T]) -> T | None:
        """``fn()``, unless the process dies in it (then the replica crashes)."""
        try:
            return fn()
        except ProcessKilled:
            if self.alive:
                self.kill()
                self.on_killed()
            return None


class _KernelLoop:
    """The service's loop: turns run inline when woken, and at the deadline they return."""

    def __init__(self, host: KernelHost, turn: Callable[[], float | None]) -> None:
        self.host = host
        self.turn = turn
        self.timer: EventHandle | None = None
        self.running = False
        self.again = False
        self.ended = False

    def wake(self) -> None:
        if self.ended or not self.host.alive:
            return
        if self.running:  # posted from inside a turn: one more turn after this one
            self.again = True
            return
        self.running = True
        try:
            deadline: float | None = None
            self.again = True
            while self.again and self.host.alive:
                self.again = False
                deadline = self.host.call(self.turn)
                if deadline is None:
                    self.ended = True
                    break
        finally:
            self.running = False
        at = None if deadline is None or not self.host.alive else self.host.at_ms(deadline)
        if self.timer is not None:
            if self.timer.at_ms == at:
                return  # the next turn is due then already
            self.timer.cancel()
            self.timer = None
        if at is not None and not self.ended:
            self.timer = self.host.kernel.call_at(at, self._due)

    def _due(self) -> None:
        self.timer = None
        self.wake()

    def stop(self) -> None:
        self.ended = True
        if self.timer is not None:
            self.timer.cancel()

    def join(self, timeout: float) -> None:
        pass


class _KernelTask:
    """One piece of the service's IO work: each step a storage latency after it was asked for."""

    def __init__(self, host: KernelHost, work: Work) -> None:
        self.host = host
        self.work = work
        self.timer: EventHandle | None = None
        self.stopped = False
        self._schedule(0)

    def _schedule(self, delay_ms: int) -> None:
        kernel = self.host.kernel
        at = kernel.now_ms + delay_ms + self.host.latency()
        if self.timer is not None and not self.timer.cancelled:
            if self.timer.at_ms <= at:
                return  # a step is due sooner anyway
            self.timer.cancel()
        self.timer = kernel.call_at(at, self._run)

    def wake(self) -> None:
        if not self.stopped and self.host.alive:
            self._schedule(0)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.host.alive:
            self.host.kernel.call_later(self.host.latency(), self._close)

    def join(self, timeout: float) -> None:
        pass

    def _run(self) -> None:
        self.timer = None
        if self.stopped or not self.host.alive:
            return
        delay = self.host.call(self.work.step)
        if self.stopped or not self.host.alive:
            return
        if delay is None:
            self.stopped = True
            self._close()
        elif delay != IDLE:
            self._schedule(math.ceil(delay * 1000))

    def _close(self) -> None:
        if self.host.alive:
            self.host.call(self.work.close)


class _Session:
    """One accepted stream: the service's session, behind the fault that strikes at rehydration."""

    def __init__(
        self, replica: ServiceReplica, number: int, incarnation: int, inner: ReplicaConnection
    ) -> None:
        self.replica = replica
        self.number = number
        self.incarnation = incarnation
        self.inner = inner
        self.started = False

    def on_command(self, command: ComputeCommand) -> None:
        r = self.replica
        if self.incarnation != r.incarnation or not r.alive:
            return  # a dead incarnation's leftover
        current = self.started and self.number >= r._newest
        if current and r._crashes_rehydrating(r._iterations, command):
            return
        self.inner.on_command(command)  # a typed refusal cuts the stream
        if not self.started and isinstance(command, Hello):
            self.started = True
            r._newest = self.number
            r._iterations += 1

    def on_close(self) -> None:
        if self.incarnation == self.replica.incarnation and self.replica.alive:
            self.inner.on_close()


class ServiceReplica(ReplicaProcess):
    """One replica process running the real replica service (see the module docstring).

    It offers what the world and the checkers use of a
    :class:`~tidegate.sim.replica.SimReplica`; ``state`` is the live service
    (``state.core`` is its ``ComputeReplica``), ``None`` while dead.
    """

    def __init__(self, name: str, world: ReplicaWorld) -> None:
        super().__init__(name, world)
        self.service: ReplicaService | None = None
        self._host: KernelHost | None = None
        self._sessions = 0
        self._newest = 0
        self._iterations = 0
        self._log = service_logger(
            f"tidegate.replica.{name}",
            ServiceLog(
                self,
                kind="replica",
                who=f"replica {name}",
                bug_events=BUG_EVENTS,
                works="replica_service_works",
                fields={"replica": name},
            ),
        )

    @property
    def state(self) -> ReplicaService | None:
        return self.service if self.process.alive else None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.process.start()
        w = self.world
        store = self._store()
        self._host = KernelHost(w.kernel, self._latency, self.crash)
        self._newest = self._iterations = 0
        self.service = ReplicaService(
            PythonExecutor(),
            store,
            tick_s=self.step_ms / 1000,
            step_delay_s=STEP_SOON_MS / 1000,
            lease_ms=LEASE_MS,
            logger=self._log,
            on_halt=self._halt,
            host=self._host,
        )
        self.endpoint.restart()
        w.record("replica_start", replica=self.name, incarnation=self.process.incarnation)
        self.service.start()

    def crash(self) -> None:
        """The process dies: its service, reads and stream are gone (no graceful stop)."""
        if self._host is not None:
            self._host.kill()
        if self.service is None:
            return  # dead already (a storage client may have marked the process dead first)
        self.process.die()
        self.service = None
        self.endpoint.crash()
        self.world.record("replica_crash", replica=self.name, incarnation=self.incarnation)

    def _halt(self, reason: str) -> None:
        """The core demands a halt: the process exits, and is restarted (as an orchestrator would)."""
        self.world.record("replica_halt", replica=self.name, reason=reason[:200])
        self.world.kernel.call_later(0, self.crash)
        self.world.kernel.call_later(100, self._restart_after_crash)

    def _latency(self) -> int:
        low, high = self.world.storage_latency_ms
        return self.world.latencies.integer(low, high) * self.world.faults.slow_factor

    def defer_violation(self, property: str, message: str) -> None:
        """Report a broken property from the next kernel event (not from inside the service)."""
        self.world.kernel.call_later(0, self.world.violate, property, message)

    # -- the transport's handler --------------------------------------------------------------
    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> _Session:
        assert self.service is not None, (
            "the endpoint refuses connections while the replica is down"
        )
        self._sessions += 1
        inner = self.service.on_connect(metadata, responses)
        return _Session(self, self._sessions, self.incarnation, inner)
