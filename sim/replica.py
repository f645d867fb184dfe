"""A simulated compute replica process: ``tidegate.replica.service`` on virtual time.

Each replica process of a run hosts the production
:class:`~tidegate.replica.service.ReplicaService` over the ``PythonExecutor``,
served as the :class:`~tidegate.runtime.transport.handler.ReplicaHandler` of a
:class:`~tidegate.sim.transport.SimReplicaEndpoint`, so the production
controller driver reaches it through :class:`~tidegate.sim.transport.SimTransport`
exactly as it reaches a gRPC replica. Its storage is the production
:class:`~tidegate.runtime.storage.ShardStore` over the process's own simulated
Blob and Consensus clients; its loop and IO work run as kernel events on a
:class:`~tidegate.sim.kernel_host.KernelHost` (no thread, no wall clock).

A crash kills the host (its pending events become no-ops: nothing of the dead
incarnation runs again) and the process; a restart builds a fresh service. A
:class:`~tidegate.sim.process.ProcessKilled` raised inside a storage call
crashes the replica, and so does the ``crash_replica_rehydrating`` fault at a
rehydration's first command. The service's warnings go into the trace; the log
events that mean a bug (a failed command, step or event, a crashed loop) or a
read below the since become violations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidegate.replica.service import ReplicaService
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.protocol.commands import (
    ComputeCommand,
    CreateDataflow,
    Hello,
    InitializationComplete,
)
from tidegate.spec.shard import CompactionPolicy

from .choices import ChoiceSource
from .clocks import Clocks
from .kernel import Kernel
from .kernel_host import KernelHost
from .network import SimNetwork
from .process import SimProcess
from .service_log import ServiceLog, service_logger
from .storage import BlobClient, ConsensusClient, SimDisk, StorageFaults
from .transport import SimReplicaEndpoint

__all__ = ["LEASE_MS", "ReplicaProcess", "ReplicaWorld"]

STEP_SOON_MS = 3
"""After an input the replica steps this soon (inputs arriving meanwhile share the step)."""
LEASE_MS = 5_000
"""The lease of a follower's reader: a crashed replica's hold on a shard lapses after it."""


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
    clocks: Clocks | None = None
    """The processes' wall clocks (``None``: the virtual clock)."""

    def clock(self, process: str) -> Callable[[], int]:
        """``process``'s wall clock."""
        if self.clocks is None:
            kernel = self.kernel
            return lambda: kernel.now_ms
        return self.clocks.clock(process)


BUG_EVENTS = frozenset({"command_failed", "event_failed", "loop_crashed", "step_failed"})
"""The service's log events that mean a bug (with the reference executor, nothing fails)."""


class _Session:
    """One accepted stream: the service's session, behind the fault that strikes at rehydration."""

    def __init__(
        self, replica: ReplicaProcess, number: int, incarnation: int, inner: ReplicaConnection
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


class ReplicaProcess:
    """One compute replica process running the real replica service (see the module
    docstring); ``name`` is its replica id.
    """

    def __init__(self, name: str, world: ReplicaWorld) -> None:
        self.name = name
        self.world = world
        self.process = SimProcess(name)
        self.endpoint = SimReplicaEndpoint(world.network, name, self)
        self.endpoint.now_ms = lambda: world.kernel.now_ms
        self.step_ms = world.latencies.integer(*world.step_ms)
        self.crash_on_rehydration: int | None = None
        """Set by a fault: die at the next rehydration, restarting this many ms later."""
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
                traced=frozenset({"reconciled"}),
            ),
        )

    @property
    def alive(self) -> bool:
        return self.process.alive

    @property
    def incarnation(self) -> int:
        return self.process.incarnation

    @property
    def state(self) -> ReplicaService | None:
        """The live service (``state.core`` is its ``ComputeReplica``); ``None`` while dead."""
        return self.service if self.process.alive else None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.process.start()
        w = self.world
        store = self._store()
        self._host = KernelHost(w.kernel, self._latency, self.crash, clock_ms=w.clock(self.name))
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
        faults = self.world.faults
        return self.world.latencies.integer(low, high) * faults.slow_factor + faults.take_stall(
            self.name
        )

    def pause(self) -> Callable[[], None] | None:
        """SIGSTOP now; returns the SIGCONT (its clock moves on meanwhile); ``None`` if down."""
        host = self._host
        if host is None or not self.alive or host.stopped:
            return None
        host.pause()
        self.world.network.hold(self.name)
        self.world.record("replica_paused", replica=self.name)

        def resume() -> None:
            host.resume()  # first: a command delivered now is handled at once
            self.world.network.release(self.name)

        return resume

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
            clock_ms=w.clock(self.name),
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
