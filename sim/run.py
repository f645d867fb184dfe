"""Running one simulation: options in, a :class:`RunResult` out (deterministic, prints nothing).

``run_simulation(RunOptions(seed, scenario))`` builds the world, draws the
fault plan from the seed (unless one is given), runs it on trio's virtual
clock and returns the verdict, the trace digest and tail, the "sometimes"
counters, statistics and the client history. The same options give a
byte-identical trace. With a Hypothesis ``choices`` source the fault plan and
the workload come from Hypothesis (so they shrink); message and storage
latencies come from a seed drawn from it.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .checkers import StopRun
from .choices import ChoiceSource, SeededChoices, pick, subset
from .faults import FaultPlan, generate_plan
from .history import OFFLINE_PREFIX, ClientHistory, Violation, check_history
from .kernel import run_virtual
from .scenario import Scenario
from .trace import Trace
from .world import SUPPORTED_FAULTS, World

__all__ = ["RunOptions", "RunResult", "RunStats", "Violation", "run_simulation"]


@dataclass
class RunOptions:
    """What to run: the seed, the scenario, optionally a fixed fault plan and a mutant."""

    seed: int
    scenario: Scenario
    plan: FaultPlan | None = None
    mutant: str | None = None
    trace_tail: int = 200
    keep_trace: bool = False


@dataclass
class RunStats:
    """Counts and timings of one run."""

    messages: int = 0
    events: int = 0
    virtual_ms: int = 0
    wall_s: float = 0.0
    peeks: int = 0
    appends: int = 0
    subscribe_batches: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunResult:
    """The outcome of one run; ``to_json()`` is the trace file the tools replay."""

    seed: int
    scenario_name: str
    plan: FaultPlan
    expanded_options: dict[str, Any]
    ok: bool
    violation: Violation | None
    trace_digest: str
    trace_tail: list[str]
    trace_lines: list[str] | None
    sometimes: dict[str, int]
    stats: RunStats
    history: ClientHistory
    scenario: Scenario | None = None
    mutant: str | None = None
    error: str | None = field(default=None, repr=False)
    """The traceback when the run stopped on an unexpected exception."""

    def summary(self) -> str:
        """One line: seed, verdict, and the broken property if any."""
        verdict = "ok" if self.ok else f"FAIL {self.violation}"
        return f"seed {self.seed} [{self.scenario_name}] {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "tidegate-sim-trace",
            "version": 1,
            "seed": self.seed,
            "scenario_name": self.scenario_name,
            "scenario": None if self.scenario is None else self.scenario.to_json(),
            "mutant": self.mutant,
            "options": self.expanded_options,
            "plan": self.plan.to_json(),
            "ok": self.ok,
            "violation": None if self.violation is None else self.violation.to_json(),
            "trace_digest": self.trace_digest,
            "sometimes": dict(sorted(self.sometimes.items())),
            "stats": self.stats.to_json(),
            "trace_tail": self.trace_tail,
            "lines": self.trace_lines,
        }


def _plan_for(options: RunOptions, choices: ChoiceSource) -> FaultPlan:
    scenario = options.scenario
    if options.plan is not None:
        return options.plan
    if scenario.fault_kinds is not None:
        enabled = list(scenario.fault_kinds)
    else:
        enabled = subset(choices, SUPPORTED_FAULTS) or [pick(choices, SUPPORTED_FAULTS)]
    replicas = [f"r{i + 1}" for i in range(scenario.replicas)]
    horizon = max(1, scenario.duration_ms * 4 // 5)
    return generate_plan(choices, replicas, horizon, scenario.faults, enabled)


@contextlib.contextmanager
def _mutant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    try:
        from .mutants import MUTANTS
    except ImportError as e:  # pragma: no cover - the tools helper owns mutants
        raise ValueError(f"mutant {name!r} requested but sim.mutants is unavailable") from e
    if name not in MUTANTS:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    with MUTANTS[name].patch():
        yield


def run_simulation(options: RunOptions, choices: ChoiceSource | None = None) -> RunResult:
    """Run one simulation (see the module docstring)."""
    source: ChoiceSource = choices if choices is not None else SeededChoices(options.seed)
    latencies = SeededChoices(source.integer(0, 2**31 - 1))
    plan = _plan_for(options, source)
    scenario = options.scenario
    expanded = {
        "seed": options.seed,
        "scenario": scenario.name,
        "replicas": scenario.replicas,
        "tables": len(scenario.tables),
        "dataflows": len(scenario.dataflows),
        "duration_ms": scenario.duration_ms,
        "quiet_ms": scenario.quiet_ms,
        "faults": len(plan.faults),
        "enabled_faults": [k.value for k in plan.enabled],
        "workload": scenario.workload.to_json(),
        "mutant": options.mutant,
        "choices": "seeded" if choices is None else type(choices).__name__,
    }
    trace = Trace(tail=options.trace_tail, keep_all=options.keep_trace)
    world = World(scenario, plan, source, latencies, trace)
    world.record("options", **{k: v for k, v in expanded.items() if k != "choices"})
    violation: Violation | None = None
    error: str | None = None
    start = time.perf_counter()
    with _mutant(options.mutant):
        try:
            run_virtual(world.run)
        except StopRun as stop:
            violation = stop.violation
        except Exception as e:  # a spec object raised: that is a finding, not a crash
            violation = Violation(
                "no_unexpected_error",
                f"{type(e).__name__}: {e}".splitlines()[0],
                world.kernel.now_ms,
            )
            error = traceback.format_exc()
    if violation is None:
        # The offline checker re-judges every answer against the final data; online checks
        # judge an answer when it arrives, so only this catches an answer for an incomplete time.
        found = check_history(world.history, scenario)
        if found:
            first = found[0]
            violation = Violation(OFFLINE_PREFIX + first.property, first.message, first.at_ms)
    wall = time.perf_counter() - start
    if violation is not None:
        trace.record(
            world.kernel.now_ms, "violation", property=violation.property, message=violation.message
        )
    stats = RunStats(
        messages=world.network.messages_delivered,
        events=world.kernel.events_run,
        virtual_ms=world.kernel.now_ms,
        wall_s=wall,
        peeks=world.clients.peek_count,
        appends=world.clients.append_count,
        subscribe_batches=world.checker.subscribe_batches,
    )
    sometimes = dict(sorted(world.sometimes.items()))
    for fault in plan.faults:  # a planned kind that never fired shows up as 0
        sometimes.setdefault(fault.kind.value, 0)
    return RunResult(
        seed=options.seed,
        scenario_name=scenario.name,
        plan=plan,
        expanded_options=expanded,
        ok=violation is None,
        violation=violation,
        trace_digest=trace.digest(),
        trace_tail=trace.tail(),
        trace_lines=list(trace.lines()) if options.keep_trace else None,
        sometimes=sometimes,
        stats=stats,
        history=world.history,
        scenario=scenario,
        mutant=options.mutant,
        error=error,
    )
