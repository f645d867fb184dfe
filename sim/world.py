"""The simulated world: controller, replicas, storage, clients, faults and checkers on one kernel.

:class:`World` wires the pieces together and schedules the run's recurring
events: the timestamp oracle's table ticks, the controller's ``maintain()``,
client actions (until ``duration_ms``), the fault plan, and the periodic
checks. At ``duration_ms`` every fault heals and the quiet (liveness) phase
starts; at ``duration_ms + quiet_ms`` the end checks run.

A "restart the controller" fault kills the controller process (the spec
``Controller`` and its driver are discarded) and, after the fault's
duration, starts a new one from durable state only (see
:meth:`World._restart_controller` and :meth:`Clients.restore`).
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import trio

from tidegate.spec.compute.uuids import counter_uuids
from tidegate.spec.controller import Controller
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

from .checkers import Checker, StopRun
from .choices import ChoiceSource
from .clients import INSTANCE, Clients
from .driver import Driver
from .faults import Fault, FaultKind, FaultPlan
from .history import ClientHistory
from .kernel import EventHandle, Kernel
from .network import SimNetwork
from .replica import SimReplica
from .scenario import Scenario
from .storage import SimStorage, StorageViolation
from .trace import Trace

__all__ = ["SUPPORTED_FAULTS", "World"]

MAINTAIN_MS = 100
CHECK_MS = 50
SLEEP_EVERY_MS = 100

SUPPORTED_FAULTS = (
    FaultKind.CRASH_REPLICA,
    FaultKind.CUT_CONNECTION,
    FaultKind.SLOW_REPLICA,
    FaultKind.REPLACE_REPLICA,
    FaultKind.DELAY_STORAGE_WRITE,
    FaultKind.RESTART_CONTROLLER,
)
"""Fault kinds the world can inject (all of them)."""


class World:
    """One run's world (see the module docstring)."""

    def __init__(
        self,
        scenario: Scenario,
        plan: FaultPlan,
        choices: ChoiceSource,
        latencies: ChoiceSource,
        trace: Trace,
    ) -> None:
        self.scenario = scenario
        self.plan = plan
        self.trace = trace
        self.kernel = Kernel()
        self.sometimes: Counter[str] = Counter()
        self.network = SimNetwork(self.kernel, latencies)
        self.tables = frozenset(GlobalId.parse(t.id) for t in scenario.tables)
        self.storage = SimStorage(self.kernel, latencies, on_upper=self._storage_upper)
        self.controller = Controller(check_protocol=True)
        self.history = ClientHistory()
        self.checker = Checker(self.kernel, self.storage, self.history, self.record, self.count)
        self.processes: dict[str, SimReplica] = {}
        self.alias: dict[str, str] = {}
        self._latencies = latencies
        self.generation = 1
        """The controller process's incarnation (a restart starts the next)."""
        self.driver = self._new_driver()
        self.clients = Clients(
            scenario,
            self.controller,
            self.driver,
            self.kernel,
            choices,
            self.history,
            self.record,
            self.count,
            self.checker.violate,
        )
        self.checker.attach(self.clients)
        self._choices = choices
        self.end_ms = scenario.duration_ms + scenario.quiet_ms
        self.quiet = False
        self._pending_replace: dict[str, tuple[str, str]] = {}
        self._replacements = 0
        self.input_uppers: dict[GlobalId, Antichain] = {}
        self._controller_back: EventHandle | None = None

    # -- bookkeeping -----------------------------------------------------------------------
    def record(self, event: str, /, **fields: Any) -> None:
        for k, v in fields.items():
            if isinstance(v, GlobalId):
                fields[k] = str(v)
        self.trace.record_fields(self.kernel.now_ms, event, fields)

    def count(self, name: str) -> None:
        self.sometimes[name] += 1

    def _storage_upper(self, id: GlobalId, upper: Antichain) -> None:
        self.driver.storage_upper(id, upper, self.tables)

    # -- setup -------------------------------------------------------------------------------
    def _new_process(self, name: str) -> SimReplica:
        proc = SimReplica(
            name,
            self.kernel,
            self.network,
            self.storage,
            self._latencies,
            self.record,
            self.scenario.replica_step_ms,
        )
        self.processes[name] = proc
        proc.start()
        return proc

    def start(self) -> None:
        names = [f"r{i + 1}" for i in range(self.scenario.replicas)]
        for n in names:
            self.alias[n] = n
            self._new_process(n)
        self.clients.setup(names)
        k = self.kernel
        k.call_at(self.scenario.tick_ms, self._tick)
        k.call_at(MAINTAIN_MS, self._maintain)
        k.call_at(CHECK_MS, self._check)
        k.call_at(self._gap(), self._act)
        for fault in self.plan.faults:
            if fault.at_ms < self.scenario.duration_ms:
                k.call_at(fault.at_ms, self._fault, fault)
        k.call_at(self.scenario.duration_ms, self._quiet)

    def _gap(self) -> int:
        low, high = self.scenario.workload.ms_between_actions
        return self.kernel.now_ms + self._choices.integer(low, high)

    # -- recurring events -----------------------------------------------------------------------
    def _tick(self) -> None:
        self.clients.tick()
        self.kernel.call_later(self.scenario.tick_ms, self._tick)

    def _maintain(self) -> None:
        if self.clients.controller_up:
            self.driver.apply(self.controller.maintain())
        self.kernel.call_later(MAINTAIN_MS, self._maintain)

    def _check(self) -> None:
        self.checker.check_state()
        self.kernel.call_later(CHECK_MS, self._check)

    def _act(self) -> None:
        if self.quiet:
            return
        self.clients.act()
        self.kernel.call_at(self._gap(), self._act)

    # -- faults ---------------------------------------------------------------------------------
    def _fault(self, f: Fault) -> None:
        if self.quiet:
            return
        name = self.alias.get(f.target, f.target)
        proc = self.processes.get(name)
        self.record("fault", fault=f.kind, target=name, duration=f.duration_ms, factor=f.factor)
        k = self.kernel
        if f.kind is FaultKind.CRASH_REPLICA:
            if proc is None or not proc.alive:
                self.count("fault_skipped")
                return
            proc.crash()
            k.call_later(f.duration_ms, self._restart, name)
        elif f.kind is FaultKind.CUT_CONNECTION:
            link = self.driver.link(INSTANCE, name)
            conn = None if link is None else link.conn
            if conn is not None and (proc is None or proc.initialized_on != conn.number):
                self.count("reconnect_mid_replay")
            if not self.driver.cut(INSTANCE, name, k.now_ms + f.duration_ms):
                self.count("fault_skipped")
                return
        elif f.kind is FaultKind.SLOW_REPLICA:
            if proc is None:
                self.count("fault_skipped")
                return
            self.network.slow[name] = f.factor
            k.call_later(f.duration_ms, self._unslow, name)
        elif f.kind is FaultKind.REPLACE_REPLICA:
            if proc is None or f.target in self._pending_replace:
                self.count("fault_skipped")
                return
            self._replacements += 1
            new = f"{f.target}x{self._replacements}"
            self._pending_replace[f.target] = (name, new)
            self.clients.replica_dropped(name)
            if self.clients.controller_up:
                self.driver.apply(self.controller.drop_replica(INSTANCE, name))
            proc.crash()
            del self.processes[name]
            k.call_later(f.duration_ms, self._add_replacement, f.target)
        elif f.kind is FaultKind.RESTART_CONTROLLER:
            self._restart_controller(f.duration_ms)
        elif f.kind is FaultKind.DELAY_STORAGE_WRITE:
            self.storage.write_delay_ms = min(f.duration_ms, 1_000)
            k.call_later(f.duration_ms, self._undelay)
        else:
            self.count("fault_unsupported")
            return
        self.count(f.kind.value)

    def _restart(self, name: str) -> None:
        proc = self.processes.get(name)
        if proc is not None and not proc.alive:
            proc.start()

    def _unslow(self, name: str) -> None:
        self.network.slow.pop(name, None)

    def _undelay(self) -> None:
        self.storage.write_delay_ms = 0

    def _add_replacement(self, target: str) -> None:
        entry = self._pending_replace.pop(target, None)
        if entry is None:
            return
        _, new = entry
        self.alias[target] = new
        self._new_process(new)
        self.clients.replica_added(new)
        if self.clients.controller_up:
            self.driver.apply(self.controller.add_replica(INSTANCE, new))

    def _quiet(self) -> None:
        """Faults stop and heal; clients stop acting; the liveness clock starts."""
        self.quiet = True
        self.record("quiet")
        if self._controller_back is not None:
            self._controller_back.cancel()
            self._restore_controller()
        for target in sorted(self._pending_replace):
            self._add_replacement(target)
        for name in sorted(self.processes):
            self._restart(name)
        self.network.slow.clear()
        self.storage.write_delay_ms = 0
        for link in self.driver.links.values():
            link.blocked_until = self.kernel.now_ms
        for t in sorted(self.tables):
            self.input_uppers[t] = Antichain([self.clients.last_upper[t]])

    # -- the controller process -------------------------------------------------------------
    def _new_driver(self) -> Driver:
        latencies = self._latencies
        driver = Driver(
            self.controller,
            self.kernel,
            self.network,
            self.storage,
            self.processes.get,
            self.checker,
            self.record,
            lambda: latencies.integer(0, 2),
        )
        driver.orphan_write = partial(self._orphan_write, self.generation)
        return driver

    def _orphan_write(self, generation: int, ticket: int, landed: bool) -> None:
        self.clients.on_orphan_write(generation, ticket, landed)

    def _restart_controller(self, down_ms: int) -> None:
        """The controller process dies now and a new one starts from durable state after ``down_ms``.

        The dead process's state is gone: its driver cuts every replica
        connection and hears nothing more; clients' pending peeks and subscribes
        fail; each of its table writes still in flight lands or not, as the
        storage decides. A restart fault while it is down extends the outage.
        """
        if not self.clients.controller_up:
            self.count("restart_while_down")
            assert self._controller_back is not None
            if self._controller_back.at_ms < self.kernel.now_ms + down_ms:
                self._controller_back.cancel()
                self._controller_back = self.kernel.call_later(down_ms, self._restore_controller)
            return
        self.record("controller_down", generation=self.generation)
        self.driver.shutdown()
        self.checker.controller_died()
        self.clients.controller_died()
        dropped = self.storage.abandon("controller", self._choices)
        self.record("writes_abandoned", shards=",".join(str(g) for g in dropped))
        self._controller_back = self.kernel.call_later(down_ms, self._restore_controller)

    def _restore_controller(self) -> None:
        """A new controller process: a fresh spec ``Controller`` built from durable state only."""
        self._controller_back = None
        self.generation += 1
        # Peek ids and Hello nonces must not repeat the dead incarnations' (a real driver would use
        # uuid4); the first controller keeps the default counter, seed 0.
        uuids = counter_uuids(self.generation - 1)
        self.controller = Controller(uuid_factory=uuids, check_protocol=True)
        self.driver = self._new_driver()
        shards = {
            gid: (self.storage.state(gid).since, self.storage.state(gid).upper)
            for gid in self.storage.shard_ids()
        }
        self.record("controller_restore", generation=self.generation)
        self.clients.restore(self.controller, self.driver, shards)

    # -- running ---------------------------------------------------------------------------------
    def step_all(self) -> None:
        """Run every event up to the end synchronously (the trio loop calls this in slices)."""
        k = self.kernel
        while (at := k.next_time()) is not None and at <= self.end_ms:
            k.step()

    async def run(self) -> None:
        """Run the world on trio's virtual clock; violations propagate as :class:`StopRun`."""
        self.start()
        k = self.kernel
        origin = trio.current_time()
        slept = 0
        try:
            while (at := k.next_time()) is not None and at <= self.end_ms:
                if at - slept >= SLEEP_EVERY_MS:
                    await trio.sleep_until(origin + at / 1000)
                    slept = at
                k.run_next()
            if k.now_ms < self.end_ms:
                k.now_ms = self.end_ms
            await trio.sleep_until(origin + self.end_ms / 1000)
            self.record("end")
            self.checker.check_end(self.input_uppers)
        except StorageViolation as e:
            raise StopRun(self._violation(e.property, e.message)) from e

    def _violation(self, prop: str, message: str) -> Any:
        from .history import Violation

        return Violation(prop, message, self.kernel.now_ms)
