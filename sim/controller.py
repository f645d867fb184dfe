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

An incarnation can also be *stopped* (SIGSTOP: :class:`~tidegate.sim.pause.Pause`)
and resumed, and can become a **zombie**: stopped and taken for dead, while a
new incarnation starts (a restart, or an upgrade's new version) -- then
resumed beside it, still appending, ticking, writing its catalog and
answering the clients that talk to it, until it is killed. A client task
belongs to the incarnation it runs in (a context variable says which), so
``env`` and ``dying`` answer for that one; elsewhere, for the current one.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from tidegate.runtime.environment import Environment
from tidegate.runtime.transport.protocols import STORAGE
from tidegate.spec.errors import InvalidUppers
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import AppendCompleted

from .choices import chance
from .orchestrator import SimOrchestrator
from .pause import PausableTransport, Pause
from .platform import SimPlatform
from .process import ProcessKilled, SimProcess
from .scenario import DEFAULT_CLUSTER
from .storage import BlobClient, ConsensusClient
from .storage_replica import STORAGE_ADDRESS
from .transport import SimTransport
from .world_port import WorldPort

__all__ = ["CLOCK_NAME", "MAINTAIN_MS", "POLL_MS", "ZOMBIE", "ControllerProcess", "ControllerWorld"]


class _Checker(Protocol):
    def on_effect(self, e: Any) -> None: ...

    def controller_restored(
        self, env: Environment, restored: frozenset[GlobalId] | None = None
    ) -> None: ...


class _Clients(Protocol):
    async def come_up(self, env: Environment, generation: int) -> None: ...


class ControllerWorld(WorldPort, Protocol):
    """What the controller process uses of the world: its services, and the checker and
    clients it tells about each new incarnation."""

    @property
    def checker(self) -> _Checker: ...

    @property
    def clients(self) -> _Clients: ...

    def controller_starting(self, platform: Any) -> None: ...

    def refusal_expected(self, group: BaseException) -> bool: ...


MAINTAIN_MS = 100
POLL_MS = 100
CLOCK_NAME = "controller"
"""The controller's name among the processes whose clocks faults set off (every incarnation
runs on one machine's clock)."""


REFUSED_RESTART_MS = 300
"""How soon a controller that refused to start (typed, over damaged storage) is started again."""


def _first(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


ZOMBIE = "zombie"
"""An action's ``via`` when its client talks to a zombie controller."""
ZOMBIE_CLIENTS_PER_MILLE = 350
"""How often a client action drawn while a zombie runs goes to the zombie (clients that have
not noticed the takeover)."""
ZOMBIE_DDL_FACTOR = 6
"""How much more often a zombie's clients create and drop dataflows than the workload says:
DDL is what a deposed controller can still get wrong for its successor (its catalog is
stale), and a dataflow dropped by a zombie is otherwise too rare to meet within a campaign."""


@dataclass(eq=False)
class _Incarnation:
    """One controller incarnation: its process, platform and environment."""

    generation: int
    process: SimProcess
    platform: SimPlatform
    pause: Pause
    scope: trio.CancelScope | None = None
    tasks: trio.Nursery | None = None
    env: Environment | None = None
    ready: bool = False
    dying: bool = False
    zombie: bool = False


_TASK_OF: contextvars.ContextVar[_Incarnation | None] = contextvars.ContextVar(
    "tidegate_sim_controller_incarnation", default=None
)
"""The incarnation a client task runs in (unset outside them)."""


class ControllerProcess:
    """The application hosting the controller (see the module docstring)."""

    def __init__(self, world: ControllerWorld) -> None:
        self.world = world
        self.current: _Incarnation | None = None
        """The incarnation the world takes for the controller (``None`` while none runs)."""
        self.zombies: list[_Incarnation] = []
        """Old incarnations still running beside the current one (until killed)."""
        self.generation = 0
        self._back: Any = None
        self.restores = 0

    # -- the incarnation a caller means -----------------------------------------------------
    def _mine(self) -> _Incarnation | None:
        inc = _TASK_OF.get()
        return inc if inc is not None else self.current

    @property
    def env(self) -> Environment | None:
        """The environment of the caller's incarnation (a client task's), else the current one's,
        once it opened (``None`` while down)."""
        inc = self._mine()
        return None if inc is None else inc.env

    def zombie_here(self) -> bool:
        """Whether the caller runs in a zombie (a deposed incarnation)."""
        inc = _TASK_OF.get()
        return inc is not None and inc.zombie

    def generation_here(self) -> int:
        """The generation of the caller's incarnation (a client task's), else the current one's
        (``0`` while none runs)."""
        inc = self._mine()
        return 0 if inc is None else inc.generation

    async def gate_here(self) -> None:
        """Wait while the caller's incarnation is stopped (its answers leave it once it runs)."""
        inc = _TASK_OF.get()
        if inc is not None:
            await inc.pause.gate()

    def answered(self, ev: Mapping[str, Any]) -> None:
        """A client's operation succeeded: counted if a zombie (a deposed controller) answered."""
        inc = _TASK_OF.get()
        if inc is not None and inc.zombie:
            self.world.count(f"zombie_acknowledged_{ev['op']}")

    def _observe(self, inc: _Incarnation, effect: Any) -> None:
        """Every effect of every incarnation: appends that lost a race are counted."""
        if type(effect) is AppendCompleted and isinstance(effect.error, InvalidUppers):
            env = inc.env
            tables = len(env.driver.tables()) if env is not None else 0
            partial = len(effect.error.ids) < tables
            self.world.count("table_append_invalid_uppers" + ("_partial" if partial else ""))
            if inc.zombie:
                self.world.count("zombie_append_invalid_uppers")

    @property
    def ready(self) -> bool:
        """The current environment is open and the clients have caught up with it."""
        return self.current is not None and self.current.ready

    @property
    def dying(self) -> bool:
        """The caller's incarnation is being killed (its operations end as outcome unknown)."""
        inc = self._mine()
        return inc is not None and inc.dying

    @property
    def platform(self) -> SimPlatform | None:
        return None if self.current is None else self.current.platform

    @property
    def up(self) -> bool:
        return self.current is not None and self.current.process.alive

    def start(self) -> None:
        """Start a new incarnation (from a kernel event or the world's start)."""
        self._back = None
        if self.up:
            return
        self.world.nursery.start_soon(self._incarnation)

    def to_zombie(self) -> bool:
        """Whether the client action drawn now goes to a running zombie (its ``via``): sometimes,
        while one runs (drawn only then, so that seeds without zombies keep their draws)."""
        running = any(
            not z.dying and not z.pause.stopped and z.env is not None for z in self.zombies
        )
        source = self.world.streams.faults or self.world.streams.workload
        return running and chance(source, ZOMBIE_CLIENTS_PER_MILLE)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, via: str | None = None) -> None:
        """Run a client task inside this process (dropped if it is down); ``via`` ``"zombie"``:
        inside the newest running zombie (dropped if none runs)."""
        inc = self.current
        if via == ZOMBIE:
            live = [z for z in self.zombies if not z.dying and z.env is not None]
            inc = live[-1] if live else None
            if inc is None:
                self.world.count("zombie_client_found_none")
                return
            self.world.count("zombie_client_action")
        if inc is not None and inc.tasks is not None and inc.process.alive:
            inc.tasks.start_soon(self._in, inc, fn, *args)

    @staticmethod
    async def _in(inc: _Incarnation, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        _TASK_OF.set(inc)
        await fn(*args)

    def kill(self, why: str, restart_after_ms: int | None) -> None:
        """``kill -9`` the current incarnation now; start again ``restart_after_ms`` later (never
        if ``None``)."""
        inc = self.current
        if inc is not None:
            self._kill(inc, why)
        if restart_after_ms is not None:
            at = self.world.kernel.now_ms + restart_after_ms
            if self._back is not None:
                if self._back.at_ms >= at:
                    return
                self._back.cancel()
            self._back = self.world.kernel.call_at(at, self.start)

    def _kill(self, inc: _Incarnation, why: str) -> None:
        scope = inc.scope
        if inc.process.alive or (scope is not None and not scope.cancel_called):
            inc.process.die()  # first: nothing it has in flight reaches the disk or the network
            inc.dying = True
            inc.ready = False
            inc.env = None
            inc.pause.resume()  # a stopped process dies too (its tasks unwind)
            what = "zombie_down" if inc.zombie else "controller_down"
            self.world.record(what, generation=inc.generation, why=why)
            self.world.count("zombie_killed" if inc.zombie else "controller_killed")
            if scope is not None:
                scope.cancel()

    def end_all(self) -> None:
        """The run is over: every incarnation's process dies (unrecorded: nothing happens after
        the end) and a stopped one resumes, so that what it has in flight unwinds."""
        for inc in (self.current, *self.zombies):
            if inc is not None:
                inc.process.die()
                inc.pause.resume()

    def restart_pending(self) -> bool:
        return self._back is not None

    def restart_now(self) -> None:
        """Bring a dead controller back at once, and end every zombie (the quiet phase)."""
        for z in list(self.zombies):
            self._kill(z, "the quiet phase")
        if self.current is not None:
            self.current.pause.resume()
        if self._back is not None:
            self._back.cancel()
            self._back = None
        if not self.up:
            self.start()

    # -- stops and zombies --------------------------------------------------------------------
    def pause(self) -> Callable[[], None] | None:
        """Stop the current incarnation now; returns its SIGCONT; ``None`` if none runs."""
        inc = self.current
        if inc is None or not inc.process.alive or inc.pause.stopped:
            return None
        inc.pause.stop()
        self.world.record("controller_paused", generation=inc.generation)
        return lambda: self._resume(inc)

    def _resume(self, inc: _Incarnation) -> None:
        if inc.process.alive and inc.pause.stopped:
            inc.pause.resume()
            self.world.record(
                "zombie_resumed" if inc.zombie else "controller_resumed", generation=inc.generation
            )

    def zombify(self, paused_ms: int) -> bool:
        """The current incarnation is stopped and taken for dead; a new one starts at once. The
        old one resumes ``paused_ms`` later as a zombie, and is killed as long again after that.
        False if none runs."""
        inc = self.current
        if inc is None or not inc.process.alive or inc.pause.stopped:
            return False
        inc.pause.stop()
        inc.zombie = True
        inc.ready = False
        # Its crash points, restore window and fsync stalls are no longer the controller's.
        inc.process.name = f"controller-zombie-{inc.generation}"
        if inc.env is not None:
            observers = inc.env.driver.observers
            if self.world.checker.on_effect in observers:  # the checkers follow the current one
                observers.remove(self.world.checker.on_effect)
        self.zombies.append(inc)
        self.current = None
        self.world.record("controller_zombie", generation=inc.generation, ms=paused_ms)
        k = self.world.kernel
        k.call_later(paused_ms, self._resume, inc)
        k.call_later(2 * paused_ms, self._kill, inc, "the zombie's time is up")
        if self._back is not None:
            self._back.cancel()
            self._back = None
        self.start()
        return True

    async def _incarnation(self) -> None:
        w = self.world
        self.generation += 1
        generation = self.generation
        proc = SimProcess("controller")
        proc.incarnation = generation - 1
        proc.start()
        pause = Pause()
        inc: _Incarnation
        platform = SimPlatform(
            w.kernel,
            proc,
            w.streams.latencies,
            w.faults,
            lambda p: self._died_in_call(inc),
            pause=pause,
            clock_ms=w.clocks.clock(CLOCK_NAME),
            count=lambda name: w.count(("zombie_" if inc.zombie else "") + name),
        )
        inc = _Incarnation(generation, proc, platform, pause)
        self.current = inc
        _TASK_OF.set(inc)
        w.faults.restoring.add(proc.name)
        w.record("controller_start", generation=generation)
        w.controller_starting(inc.platform)
        # The replicas are given until the catalog records them (an incarnation may die first);
        # afterwards each incarnation runs the ones the catalog names.
        # (The default cluster's: the clients' setup creates the scenario's other clusters.)
        initial = (
            None
            if w.catalog_has_replicas()
            else {n: n for n in sorted(w.replicas) if w.cluster_of.get(n) == DEFAULT_CLUSTER}
        )
        # An upgrade: a restarted controller is the new version, opened read-only and promoted.
        upgrade = w.scenario.upgrade and generation > 1
        storage: dict[str, Any] = {}
        if w.storage is not None:  # the storage replica runs at a given address (unmanaged)
            storage = {
                "storage_replica": STORAGE_ADDRESS,
                "storage_transport": PausableTransport(
                    SimTransport(w.storage_endpoints, protocol=STORAGE, alive=lambda: proc.alive),
                    pause,
                ),
            }
        managed: dict[str, Any] = {}
        if w.scenario.workload.create_managed_cluster:  # the world runs managed replicas
            managed = {"orchestrator": SimOrchestrator(w)}
        with trio.CancelScope() as scope:
            inc.scope = scope
            try:
                async with Environment.open(
                    None,
                    blob=BlobClient(w.disk, proc, w.faults),
                    consensus=ConsensusClient(w.disk, proc, w.faults),
                    shard_policy=w.knobs.shard_policy,
                    replicas=initial,
                    transport=PausableTransport(
                        SimTransport(w.endpoints, alive=lambda: proc.alive), pause
                    ),
                    tick_ms=w.scenario.tick_ms,
                    maintain_ms=MAINTAIN_MS,
                    poll_ms=POLL_MS,
                    platform=inc.platform,
                    check_protocol=True,
                    read_only=upgrade,
                    **storage,
                    **managed,
                ) as env:
                    if upgrade:
                        w.record("controller_read_only", generation=generation)
                        await env.promote()
                        w.count("zombie_promoted" if inc.zombie else "controller_promoted")
                    w.faults.restoring.discard(proc.name)
                    env.driver.observers.append(functools.partial(self._observe, inc))
                    if not inc.zombie:
                        env.driver.observers.append(w.checker.on_effect)
                        if generation > 1:
                            self.restores += 1
                            w.count("controller_restored")
                    async with trio.open_nursery() as tasks:
                        inc.tasks = tasks
                        inc.env = env
                        w.record("controller_up", generation=generation, zombie=inc.zombie)
                        tasks.start_soon(self._watch, env)
                        # What the restore brought back, before the clients come up: a
                        # first setup (every earlier incarnation died before it) creates more.
                        compute = env.driver.ctl.compute
                        restored = frozenset(
                            cc.id
                            for instance in compute.instance_ids()
                            for cc in compute.instance(instance).collections()
                        )
                        if not inc.zombie:
                            await w.clients.come_up(env, generation)
                        if generation > 1 and not inc.zombie:
                            w.checker.controller_restored(env, restored)
                        inc.ready = not inc.zombie
                        await trio.sleep_forever()
            except* ProcessKilled:
                if proc.alive:
                    self._died_in_call(inc)
            except* Exception as group:
                if inc.dying or w.ending:
                    pass
                elif not inc.ready and inc is self.current and w.refusal_expected(group):
                    # A typed refusal to start over damaged storage: the process exits and its
                    # orchestrator starts it again later (by then the damage may be repaired).
                    w.count("controller_refused_to_start")
                    self.kill(f"refused to start: {_first(group)!r}"[:200], REFUSED_RESTART_MS)
                else:
                    w.controller_crashed(group)
            finally:
                inc.tasks = None
                inc.scope = None
                inc.env = None
                inc.ready = False
                w.faults.restoring.discard(proc.name)
                if inc in self.zombies:
                    self.zombies.remove(inc)

    def _died_in_call(self, inc: _Incarnation) -> None:
        """``inc`` died inside a storage call (a crash point): the current one restarts."""
        if inc is self.current:
            self.kill("killed in a storage call", self.world.crash_restart_ms)
        else:
            self._kill(inc, "killed in a storage call")

    async def _watch(self, env: Environment) -> None:
        """Replica status events: into the trace; a replica that broke a protocol rule is a finding."""
        async with env.events() as events:
            async for e in events:
                self.world.record(
                    "replica_status", replica=e.replica, status=e.status, epoch=e.epoch
                )
                if e.status == "failed" and e.reason.startswith("illegal response"):
                    self.world.violate("replica_protocol", f"replica {e.replica}: {e.reason}")
