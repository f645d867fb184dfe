"""The simulated world: controller, replicas, storage, clients, faults and checkers on one kernel.

:class:`World` wires the pieces together and schedules the run's recurring
events: the timestamp oracle's table ticks, the controller's ``maintain()``,
client actions (until ``duration_ms``), the fault plan, and the periodic
checks. At ``duration_ms`` every fault heals and the quiet (liveness) phase
starts; at ``duration_ms + quiet_ms`` the end checks run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio

from tidegate.spec.controller import Controller
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

from .checkers import Checker, StopRun
from .choices import ChoiceSource
from .clients import INSTANCE, Clients
from .driver import Driver
from .faults import Fault, FaultKind, FaultPlan
from .history import ClientHistory
from .kernel import Kernel
from .network import SimNetwork
from .replica import SimReplica
from .scenario import Scenario
from .storage import SimStorage, StorageViolation
from .trace import Trace

__all__ = ["SUPPORTED_FAULTS", "World"]

TICK_MS = 40
MAINTAIN_MS = 100
CHECK_MS = 50
SLEEP_EVERY_MS = 100

SUPPORTED_FAULTS = (
    FaultKind.CRASH_REPLICA,
    FaultKind.CUT_CONNECTION,
    FaultKind.SLOW_REPLICA,
    FaultKind.REPLACE_REPLICA,
    FaultKind.DELAY_STORAGE_WRITE,
)
"""Fault kinds the world can inject (controller restarts need durable controller state)."""


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
        self.driver = Driver(
            self.controller,
            self.kernel,
            self.network,
            self.storage,
            self.processes.get,
            self.checker,
            self.record,
            lambda: latencies.integer(0, 2),
        )
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
            name, self.kernel, self.network, self.storage, self._latencies, self.record
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
        k.call_at(TICK_MS, self._tick)
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
        self.kernel.call_later(TICK_MS, self._tick)

    def _maintain(self) -> None:
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
            self.driver.apply(self.controller.drop_replica(INSTANCE, name))
            proc.crash()
            del self.processes[name]
            k.call_later(f.duration_ms, self._add_replacement, f.target)
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
        self.driver.apply(self.controller.add_replica(INSTANCE, new))

    def _quiet(self) -> None:
        """Faults stop and heal; clients stop acting; the liveness clock starts."""
        self.quiet = True
        self.record("quiet")
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
