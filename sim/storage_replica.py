"""The storage replica in the simulated world: ``tidegate.replica``'s real ``StorageService`` on virtual time.

:class:`StorageReplicaProcess` hosts the production
:class:`~tidegate.replica.storage.service.StorageService` (the storage core,
its shard IO, sink targets and upstream readers) on a
:class:`~tidegate.sim.kernel_host.KernelHost`, over the production
:class:`~tidegate.runtime.storage.ShardStore` on the process's own simulated
Blob and Consensus clients, behind a
:class:`~tidegate.sim.transport.SimReplicaEndpoint` that serves the storage
protocol at :data:`STORAGE_ADDRESS` (the environment's ``storage_replica``
option, an unmanaged storage replica). Its upstream readers are
:class:`~tidegate.sim.upstream.SimSourceReader` s and its sink writers the
production :class:`~tidegate.runtime.sinks.IcebergSinkWriter` over a pyiceberg
catalog and FileIO on the simulated disk (:mod:`.iceberg`; or, for a scenario
whose ``sink_writer`` is ``"simulated"``, :class:`~tidegate.sim.sink_target.SimSinkWriter`
s), given to the service as its ``source_factory`` and ``sink_factory``, over
the incarnation's own Consensus and Blob clients.

Faults strike it as any process of the world: it crashes and restarts (losing
everything but the disk), dies inside a storage call (an armed crash point:
a shard write, a blob write, a sink target's commit), dies while rehydrating
(at a ``RunIngestion``, ``RunSink`` or ``InitializationComplete`` of a
protocol iteration), its connection is cut, storage fails under it. A
**zombie** is an old incarnation that keeps running -- reading upstream,
minting bindings, writing shards, committing sinks -- after a new one
started and took the controller's connection: its writes race the new
incarnation's, and only the compare-and-appends (shards) and the
conditional commits (targets) keep the two from both landing. It dies when
the fault ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.replica.storage.service import StorageService
from tidegate.replica.storage.sinks import SinkFactory
from tidegate.runtime.catalog import STORAGE_REPLICA
from tidegate.runtime.storage import ShardStore
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
from tidegate.spec.storage.commands import (
    RunIngestion,
    RunSink,
    StorageCommand,
    StorageHello,
    StorageInitializationComplete,
    StorageResponse,
)

from .kernel_host import KernelHost
from .process import SimProcess
from .replica import LEASE_MS, ReplicaWorld
from .service_log import ServiceLog, service_logger
from .storage import BlobClient, ConsensusClient
from .transport import SimReplicaEndpoint
from .upstream import Upstreams

__all__ = ["STORAGE_ADDRESS", "StorageReplicaProcess"]

STORAGE_ADDRESS = "storage:6877"
"""Where the storage replica listens on the simulated network (the ``storage_replica`` option)."""
CLOCK_NAME = "storage"
"""The storage replica's name among the processes whose clocks faults set off."""

BUG_EVENTS = frozenset(
    {"command_failed", "event_failed", "loop_crashed", "callback_rejected", "source_batch_rejected"}
)
"""The storage service's log events that mean a bug (of the service, the core, or the simulated
upstream: a batch that breaks the reader contract)."""


@dataclass(eq=False)
class _Incarnation:
    """One running incarnation: its process, host and service (a zombie's live on beside the next)."""

    process: SimProcess
    host: KernelHost
    service: StorageService
    zombie: bool = False


class _Session:
    """One accepted storage stream: the service's, behind the fault that strikes at rehydration."""

    def __init__(self, replica: StorageReplicaProcess, inc: _Incarnation, inner: Any) -> None:
        self.replica = replica
        self.inc = inc
        self.inner = inner
        self.started = False

    def on_command(self, command: StorageCommand) -> None:
        r = self.replica
        if r.current is not self.inc or not self.inc.process.alive:
            return  # a dead incarnation's leftover
        rehydrating = isinstance(command, RunIngestion | RunSink | StorageInitializationComplete)
        if rehydrating and r.crash_on_rehydration is not None:
            back, r.crash_on_rehydration = r.crash_on_rehydration, None
            r.world.count("crash_storage_replica_in")  # the armed fault fired
            r.world.record("storage_crash_rehydrating", command=type(command).__name__)
            r.crash()
            r.world.kernel.call_later(back, r.restart)
            return
        self.inner.on_command(command)  # a typed refusal cuts the stream
        if isinstance(command, StorageHello):
            self.started = True

    def on_close(self) -> None:
        if self.replica.current is self.inc and self.inc.process.alive:
            self.inner.on_close()


class StorageReplicaProcess:
    """The storage instance's replica process (see the module docstring).

    ``tick_ms`` is the service's tick (its binding and commit cadence);
    ``sinks(consensus, blob)`` makes an incarnation's ``sink_factory`` over its clients.
    """

    def __init__(
        self,
        world: ReplicaWorld,
        upstreams: Upstreams,
        sinks: Callable[[ConsensusClient, BlobClient], SinkFactory],
        tick_ms: int,
        defer: Callable[[str, str], None],
    ) -> None:
        self.name = STORAGE_REPLICA
        self.world = world
        self.upstreams = upstreams
        self.sinks = sinks
        self.tick_ms = tick_ms
        self._defer = defer
        self.process = SimProcess(self.name)
        self.endpoint = SimReplicaEndpoint(world.network, STORAGE_ADDRESS, storage=self)
        self.endpoint.now_ms = lambda: world.kernel.now_ms
        self.current: _Incarnation | None = None
        self.zombies: list[_Incarnation] = []
        self.crash_on_rehydration: int | None = None
        """Set by a fault: die at the next rehydration, restarting this many ms later."""
        self.restart_after_ms = 100
        """How soon it restarts after dying inside a storage call."""
        self._log = service_logger(
            "tidegate.replica.storage.sim",
            ServiceLog(
                self,
                kind="storage",
                who="storage replica",
                bug_events=BUG_EVENTS,
                works="storage_replica_works",
            ),
        )

    @property
    def alive(self) -> bool:
        return self.current is not None and self.process.alive

    @property
    def service(self) -> StorageService | None:
        """The live incarnation's service (``None`` while down)."""
        return self.current.service if self.alive and self.current is not None else None

    def defer_violation(self, property: str, message: str) -> None:
        self._defer(property, message)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start a fresh incarnation (its state is only what the disk holds)."""
        w = self.world
        proc = self.process
        proc.start()
        consensus = ConsensusClient(w.disk, proc, w.faults)
        blob = BlobClient(w.disk, proc, w.faults)
        store = ShardStore(
            blob,
            consensus,
            writer_id=f"storage-{proc.incarnation}",
            clock_ms=w.clock(CLOCK_NAME),
            new_id=proc.new_id,
            policy=w.shard_policy,
        )
        inc: _Incarnation
        host = KernelHost(
            w.kernel, self._latency, lambda: self._died(inc), clock_ms=w.clock(CLOCK_NAME)
        )
        service = StorageService(
            store,
            tick_s=self.tick_ms / 1000,
            poll_s=0.02,
            poll_max_s=0.2,
            lease_ms=LEASE_MS,
            retry_s=0.02,
            retry_max_s=0.5,
            source_idle_s=0.03,
            backoff_ms=100,
            backoff_max_ms=1_000,
            source_factory=self.upstreams.source_factory,
            sink_factory=self.sinks(consensus, blob),
            logger=self._log,
            host=host,
        )
        inc = _Incarnation(proc, host, service)
        self.current = inc
        self.endpoint.restart()
        w.record("storage_start", incarnation=proc.incarnation)
        service.start()

    def restart(self) -> None:
        """Start again if down (a restart after a crash; the quiet phase)."""
        if not self.alive:
            self.start()

    def crash(self) -> None:
        """The live incarnation dies (no graceful stop: its streams and IO simply end)."""
        inc, self.current = self.current, None
        if inc is None:
            return
        inc.host.kill()
        inc.process.die()
        self.endpoint.crash()
        self.world.record("storage_crash", incarnation=inc.process.incarnation)

    def _died(self, inc: _Incarnation) -> None:
        """An incarnation died inside a storage call (a crash point): the live one restarts."""
        inc.process.die()
        if inc.zombie:
            self.world.record("storage_zombie_died", incarnation=inc.process.incarnation)
            return
        if self.current is inc:
            self.crash()
            self.world.kernel.call_later(self.restart_after_ms, self.restart)

    def zombie(self, lives_ms: int) -> bool:
        """The live incarnation becomes a zombie for ``lives_ms``; a new one starts at once.

        False if none was running.
        """
        old = self.current
        if old is None or not self.alive:
            return False
        old.zombie = True
        self.zombies.append(old)
        self.current = None
        self.endpoint.crash()  # its streams end; the controller reconnects to the new one
        self.process = SimProcess(self.name)
        self.process.incarnation = old.process.incarnation
        self.world.record("storage_zombie", incarnation=old.process.incarnation)
        self.world.kernel.call_later(lives_ms, self._bury, old)
        self.start()
        return True

    def _bury(self, inc: _Incarnation) -> None:
        if inc in self.zombies:
            self.zombies.remove(inc)
            inc.host.kill()
            inc.process.die()
            self.world.record("storage_zombie_ends", incarnation=inc.process.incarnation)

    def bury_zombies(self) -> None:
        for inc in list(self.zombies):
            self._bury(inc)

    def _latency(self) -> int:
        low, high = self.world.storage_latency_ms
        faults = self.world.faults
        return self.world.latencies.integer(low, high) * faults.slow_factor + faults.take_stall(
            self.name
        )

    def pause(self) -> Callable[[], None] | None:
        """The live incarnation stops now (SIGSTOP); returns its SIGCONT; ``None`` if down."""
        inc = self.current
        if inc is None or not self.alive or inc.host.stopped:
            return None
        inc.host.pause()
        network = self.world.network
        network.hold(STORAGE_ADDRESS)
        self.world.record("storage_paused", incarnation=inc.process.incarnation)

        def resume() -> None:
            inc.host.resume()
            network.release(STORAGE_ADDRESS)

        return resume

    # -- the transport's handler --------------------------------------------------------------
    def on_connect(
        self, metadata: Mapping[str, str], responses: ResponseSink[StorageResponse]
    ) -> ReplicaConnection[StorageCommand]:
        inc = self.current
        assert inc is not None, "the endpoint refuses connections while the replica is down"
        return _Session(self, inc, inc.service.on_connect(metadata, responses))
