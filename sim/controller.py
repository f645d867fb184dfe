"""The controller process of a simulation: the production ``Environment``, killed and restarted.

Each incarnation is an application that opens
:meth:`tidegate.runtime.Environment.open` -- the runtime's own restore path:
durable catalog, shard store, timestamp oracle, as-of selection, the
production ``ControllerDriver`` -- over the simulated disk (its own
:class:`~tidegate.sim.storage.ConsensusClient` and
:class:`~tidegate.sim.storage.BlobClient`), the simulated network
(:class:`~tidegate.sim.transport.SimTransport`) and the simulated platform
(virtual clock, storage latency, no threads). Its clients' tasks run inside
it. Killing it (a fault, or a crash point inside a storage call) is
``kill -9``: the process is marked dead first, so nothing it still has in
flight reaches the disk, then its tasks are cancelled wherever they are. A
new incarnation starts later from durable state only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from tidegate.runtime.environment import Environment
from tidegate.runtime.transport.protocols import STORAGE

from .platform import SimPlatform
from .process import ProcessKilled, SimProcess
from .storage import BlobClient, ConsensusClient
from .storage_replica import STORAGE_ADDRESS
from .transport import SimTransport
from .world_port import WorldPort

__all__ = ["MAINTAIN_MS", "POLL_MS", "ControllerProcess", "ControllerWorld"]


class _Checker(Protocol):
    def on_effect(self, e: Any) -> None: ...

    def controller_restored(self, env: Environment) -> None: ...


class _Clients(Protocol):
    async def come_up(self, env: Environment, generation: int) -> None: ...


class ControllerWorld(WorldPort, Protocol):
    """What the controller process uses of the world: its services, and the checker and
    clients it tells about each new incarnation."""

    @property
    def checker(self) -> _Checker: ...

    @property
    def clients(self) -> _Clients: ...


MAINTAIN_MS = 100
POLL_MS = 100


class ControllerProcess:
    """The application hosting the controller (see the module docstring)."""

    def __init__(self, world: ControllerWorld) -> None:
        self.world = world
        self.process = SimProcess("controller")
        self.env: Environment | None = None
        """The running incarnation's environment, once it opened (``None`` while down)."""
        self.ready = False
        """The environment is open and the clients have caught up with it."""
        self.generation = 0
        self.dying = False
        """The current incarnation is being killed (its operations end as outcome unknown)."""
        self.platform: SimPlatform | None = None
        self._scope: trio.CancelScope | None = None
        self._tasks: trio.Nursery | None = None
        self._back: Any = None
        self.restores = 0

    @property
    def up(self) -> bool:
        return self.process.alive

    def start(self) -> None:
        """Start a new incarnation (from a kernel event or the world's start)."""
        self._back = None
        if self.process.alive:
            return
        self.world.nursery.start_soon(self._incarnation)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run a client task inside this process (dropped if it is down)."""
        if self._tasks is not None and self.process.alive:
            self._tasks.start_soon(fn, *args)

    def kill(self, why: str, restart_after_ms: int | None) -> None:
        """``kill -9`` now; start again ``restart_after_ms`` later (never if ``None``)."""
        scope = self._scope
        if self.process.alive or (scope is not None and not scope.cancel_called):
            self.process.die()  # first: nothing it has in flight reaches the disk or the network
            self.dying = True
            self.ready = False
            self.env = None
            self.world.record("controller_down", generation=self.generation, why=why)
            self.world.count("controller_killed")
            if scope is not None:
                scope.cancel()
        if restart_after_ms is not None:
            at = self.world.kernel.now_ms + restart_after_ms
            if self._back is not None:
                if self._back.at_ms >= at:
                    return
                self._back.cancel()
            self._back = self.world.kernel.call_at(at, self.start)

    def restart_pending(self) -> bool:
        return self._back is not None

    def restart_now(self) -> None:
        """Bring a dead controller back at once (the quiet phase)."""
        if self._back is not None:
            self._back.cancel()
            self._back = None
        if not self.process.alive:
            self.start()

    async def _incarnation(self) -> None:
        w = self.world
        proc = self.process
        proc.start()
        self.generation += 1
        self.dying = False
        generation = self.generation
        self.platform = SimPlatform(
            w.kernel,
            proc,
            w.streams.latencies,
            w.faults,
            lambda p: self.kill("crash point", w.crash_restart_ms),
        )
        w.faults.restoring.add(proc.name)
        w.record("controller_start", generation=generation)
        # The replicas are given until the catalog records them (an incarnation may die first);
        # afterwards each incarnation runs the ones the catalog names.
        initial = None if w.catalog_has_replicas() else {n: n for n in sorted(w.replicas)}
        # An upgrade: a restarted controller is the new version, opened read-only and promoted.
        upgrade = w.scenario.upgrade and generation > 1
        storage: dict[str, Any] = {}
        if w.storage is not None:  # the storage replica runs at a given address (unmanaged)
            storage = {
                "storage_replica": STORAGE_ADDRESS,
                "storage_transport": SimTransport(
                    w.storage_endpoints, protocol=STORAGE, alive=lambda: proc.alive
                ),
            }
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                async with Environment.open(
                    None,
                    blob=BlobClient(w.disk, proc, w.faults),
                    consensus=ConsensusClient(w.disk, proc, w.faults),
                    shard_policy=w.knobs.shard_policy,
                    replicas=initial,
                    transport=SimTransport(w.endpoints, alive=lambda: proc.alive),
                    tick_ms=w.scenario.tick_ms,
                    maintain_ms=MAINTAIN_MS,
                    poll_ms=POLL_MS,
                    platform=self.platform,
                    check_protocol=True,
                    read_only=upgrade,
                    **storage,
                ) as env:
                    if upgrade:
                        w.record("controller_read_only", generation=generation)
                        await env.promote()
                        w.count("controller_promoted")
                    w.faults.restoring.discard(proc.name)
                    env.driver.observers.append(w.checker.on_effect)
                    if generation > 1:
                        self.restores += 1
                        w.count("controller_restored")
                    async with trio.open_nursery() as tasks:
                        self._tasks = tasks
                        self.env = env
                        w.record("controller_up", generation=generation)
                        tasks.start_soon(self._watch, env)
                        await w.clients.come_up(env, generation)
                        if generation > 1:
                            w.checker.controller_restored(env)
                        self.ready = True
                        await trio.sleep_forever()
            except* ProcessKilled:
                if proc.alive:
                    self.kill("killed in a storage call", w.crash_restart_ms)
            except* Exception as group:
                if not self.dying and not w.ending:
                    w.controller_crashed(group)
            finally:
                self._tasks = None
                self._scope = None
                self.env = None
                self.ready = False
                w.faults.restoring.discard(proc.name)

    async def _watch(self, env: Environment) -> None:
        """Replica status events: into the trace; a replica that broke a protocol rule is a finding."""
        async with env.events() as events:
            async for e in events:
                self.world.record(
                    "replica_status", replica=e.replica, status=e.status, epoch=e.epoch
                )
                if e.status == "failed" and e.reason.startswith("illegal response"):
                    self.world.violate("replica_protocol", f"replica {e.replica}: {e.reason}")
