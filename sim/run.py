"""Running one simulation: options in, a :class:`RunResult` out (deterministic, prints nothing).

``run_simulation(RunOptions(seed, scenario))`` builds the world, draws the
fault plan from the seed (unless one is given), runs it on trio's virtual
clock with trio's scheduler made deterministic, and returns the verdict, the
trace digest and tail, the "sometimes" counters, statistics, the client
history and the plan *as run* (its client actions filled in): passed back as
``RunOptions(plan=...)`` it drives the very same run. Each kind of choice
comes from its own stream of the seed (:func:`~tidegate.sim.choices.stream`),
so an explicit plan replaces exactly the draws it stands for. With a
Hypothesis ``choices`` source the fault plan and the workload come from
Hypothesis (so they shrink); the other streams from a seed drawn from it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .checkers import StopRun
from .choices import ChoiceSource, pick, stream, subset
from .clients import FAULTED_CREATED_CLUSTERS, created_cluster
from .faults import FaultPlan, draw_workload, generate_plan
from .history import OFFLINE_PREFIX, ClientHistory, Violation, check_history
from .kernel import run_virtual
from .knobs import Knobs
from .scenario import Scenario
from .trace import Trace
from .world import STORAGE_FAULTS, SUPPORTED_FAULTS, Streams, World

__all__ = ["RunOptions", "RunResult", "RunStats", "Violation", "run_simulation"]


@dataclass
class RunOptions:
    """What to run: the seed, the scenario, optionally a fixed plan and a mutant."""

    seed: int
    scenario: Scenario
    plan: FaultPlan | None = None
    mutant: str | None = None
    trace_tail: int = 200
    keep_trace: bool = False
    coverage: bool = False
    """Count the spec's error types and the driver's effect kinds (see :mod:`.coverage`)."""
    knobs: Knobs | None = None
    """The production knobs to set (see :mod:`.knobs`); ``None``: drawn from the seed."""


@dataclass
class RunStats:
    """Counts and timings of one run."""

    messages: int = 0
    """Messages delivered by the simulated network (the frames of one travel together)."""
    events: int = 0
    """Kernel events run (a replay of a saved plan runs fewer: no workload draws)."""
    trace_events: int = 0
    """Events in the trace (the same in a replay, whose trace is the same)."""
    task_wakeups: int = 0
    virtual_ms: int = 0
    wall_s: float = 0.0
    peeks: int = 0
    appends: int = 0
    subscribe_batches: int = 0
    storage_calls: int = 0
    controller_restarts: int = 0

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
    coverage: dict[str, dict[str, int]] | None = None

    def summary(self) -> str:
        """One line: seed, verdict, and the broken property if any."""
        verdict = "ok" if self.ok else f"FAIL {self.violation}"
        return f"seed {self.seed} [{self.scenario_name}] {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "tidegate-sim-trace",
            "version": 2,
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
            "history": self.history.to_json(),
        }


def _plan_for(options: RunOptions, source: ChoiceSource) -> FaultPlan:
    scenario = options.scenario
    if options.plan is not None:
        return options.plan
    if scenario.fault_kinds is not None:
        enabled = list(scenario.fault_kinds)
    elif scenario.storage:  # swarm over both, with at least one kind of the storage world's
        enabled = subset(source, SUPPORTED_FAULTS)
        enabled += subset(source, STORAGE_FAULTS) or [pick(source, STORAGE_FAULTS)]
    else:
        enabled = subset(source, SUPPORTED_FAULTS) or [pick(source, SUPPORTED_FAULTS)]
    replicas = list(scenario.cluster_replicas())  # faults strike the replicas of every cluster
    if scenario.workload.create_cluster > 0:  # and of the clusters the clients create
        replicas += [f"{created_cluster(n)}.r1" for n in range(1, FAULTED_CREATED_CLUSTERS + 1)]
    horizon = max(1, scenario.duration_ms * 4 // 5)
    upstreams = sorted({s.upstream for s in scenario.sources})
    plan = generate_plan(
        source,
        replicas,
        horizon,
        scenario.faults,
        enabled,
        upstreams,
        storage=bool(scenario.storage),
    )
    if scenario.fault_kinds is None:  # swarm over the workload's features too
        kinds = [kind for kind, _ in scenario.workload.weights()]
        plan = replace(plan, workload=draw_workload(source, kinds))
    return plan


@contextlib.contextmanager
def _mutant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    from .mutants import MUTANTS

    if name not in MUTANTS:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}")
    with MUTANTS[name].patch():
        yield


def _streams(seed: int, choices: ChoiceSource | None) -> tuple[ChoiceSource, Streams, int]:
    """The plan's source, the other streams, and the scheduler's seed."""
    if choices is None:
        return (
            stream(seed, "plan"),
            Streams(
                workload=stream(seed, "workload"),
                times=stream(seed, "workload times"),
                latencies=stream(seed, "latencies"),
                network=stream(seed, "network"),
                storage=stream(seed, "storage"),
                upstream=stream(seed, "upstream"),
                upstream_io=stream(seed, "upstream io"),
                knobs=stream(seed, "knobs"),
                faults=stream(seed, "faults"),
                sql_io=stream(seed, "sql io"),
                sql_temporal=stream(seed, "sql temporal"),
            ),
            stream(seed, "scheduler").integer(0, 2**63 - 1),
        )
    base = choices.integer(0, 2**31 - 1)
    return (
        choices,
        Streams(
            workload=choices,
            times=choices,
            latencies=stream(base, "latencies"),
            network=stream(base, "network"),
            storage=stream(base, "storage"),
            upstream=choices,
            upstream_io=stream(base, "upstream io"),
            knobs=stream(base, "knobs"),
            faults=stream(base, "faults"),
            sql_io=stream(base, "sql io"),
            sql_temporal=stream(base, "sql temporal"),
        ),
        base,
    )


def run_simulation(options: RunOptions, choices: ChoiceSource | None = None) -> RunResult:
    """Run one simulation (see the module docstring)."""
    plan_source, streams, scheduler = _streams(options.seed, choices)
    plan = _plan_for(options, plan_source)
    scenario = options.scenario
    expanded = {
        "seed": options.seed,
        "scenario": scenario.name,
        "replicas": scenario.replicas,
        **(
            {"clusters": {c.name: c.replicas for c in scenario.clusters}}
            if scenario.clusters
            else {}
        ),
        "tables": len(scenario.tables),
        "dataflows": len(scenario.dataflows),
        "duration_ms": scenario.duration_ms,
        "quiet_ms": scenario.quiet_ms,
        "faults": len(plan.faults),
        "enabled_faults": [k.value for k in plan.enabled],
        "actions": "generated" if plan.actions is None else len(plan.actions),
        "workload": scenario.workload.to_json(),
        "mutant": options.mutant,
        "choices": "seeded" if choices is None else type(choices).__name__,
    }
    trace = Trace(tail=options.trace_tail, keep_all=options.keep_trace)
    world = World(scenario, plan, streams, trace, knobs=options.knobs)
    expanded["knobs"] = world.knobs.to_json()
    world.record(
        "options", **{k: v for k, v in expanded.items() if k not in ("choices", "actions")}
    )
    violation: Violation | None = None
    error: str | None = None
    start = time.perf_counter()
    counting = _coverage(options.coverage)
    with (
        _pyiceberg(world, options.seed),
        _mutant(options.mutant),
        counting as counts,
        _logs_into(world),
    ):
        try:
            run_virtual(world.run, seed=scheduler)
        except BaseException as e:
            stop, rest = _split(e)
            if stop is not None:
                violation = stop.violation
            elif rest is not None:
                if not isinstance(rest, Exception | BaseExceptionGroup):
                    raise
                first = _first(rest)
                violation = Violation(
                    "no_unexpected_error",
                    f"{type(first).__name__}: {first}".splitlines()[0],
                    world.kernel.now_ms,
                )
                error = "".join(traceback.format_exception(rest))
    if world.violation is not None:
        violation = world.violation
    if getattr(world, "error", None):
        error = world.error
    if violation is None:
        # The offline checker re-judges every answer with the whole history: real-time windows
        # bounded from above too, and appends in doubt decided from the disk.
        found = check_history(world.history, scenario)
        if found:
            first_v = found[0]
            violation = Violation(OFFLINE_PREFIX + first_v.property, first_v.message, first_v.at_ms)
    wall = time.perf_counter() - start
    if violation is not None:
        violation = replace(violation, message=named_in(violation.message, world.history))
        trace.record(
            world.kernel.now_ms, "violation", property=violation.property, message=violation.message
        )
    stats = RunStats(
        messages=world.network.messages_delivered,
        events=world.kernel.events_run,
        trace_events=trace.count,
        task_wakeups=world.kernel.task_wakeups,
        virtual_ms=world.kernel.now_ms,
        wall_s=wall,
        peeks=world.clients.peek_count,
        appends=world.clients.append_count,
        subscribe_batches=world.checker.subscribe_batches,
        storage_calls=world.disk.cas_ok + world.disk.cas_lost,
        controller_restarts=world.controller.restores,
    )
    world.sometimes["wire_fragmented_message"] = world.network.fragmented
    sometimes = dict(sorted(world.sometimes.items()))
    for fault in plan.faults:  # a planned kind that never fired shows up as 0
        sometimes.setdefault(fault.kind.value, 0)
    ran = replace(plan, actions=tuple(world.clients.recorded))
    return RunResult(
        seed=options.seed,
        scenario_name=scenario.name,
        plan=ran,
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
        coverage=counts.report() if counts is not None else None,
    )


_CLIENT_OP = re.compile(r"\b(subscribe|append) (\d+)\b(?! \()")


def named_in(message: str, history: ClientHistory) -> str:
    """``message`` with each client operation it names (``subscribe 99``, ``append 12``)
    followed by the objects it worked on, as the plot labels them: a subscription's object
    and collection (``subscribe 99 (orders_sub, t12)``), an append's tables. (A peek is
    named with its object already: ``peek 50 of orders``.)"""
    if _CLIENT_OP.search(message) is None:
        return message
    names = {str(ev["id"]): str(ev["name"]) for ev in history.events if ev["op"] == "table"}
    ops = {(ev["op"], int(ev["n"])): ev for ev in history.events if "n" in ev}

    def name(m: re.Match[str]) -> str:
        ev = ops.get((m[1], int(m[2])))
        if ev is None:
            return m[0]
        if m[1] == "subscribe":
            parts = [str(ev.get("target"))] + ([str(ev["id"])] if ev.get("id") else [])
        else:
            parts = [names.get(str(t), str(t)) for t, _rows in ev.get("batches", ())]
        return f"{m[0]} ({', '.join(parts)})"

    return _CLIENT_OP.sub(name, message)


def _split(e: BaseException) -> tuple[StopRun | None, BaseException | None]:
    """The :class:`StopRun` inside ``e`` (a group, maybe), and whatever else it holds."""
    if isinstance(e, StopRun):
        return e, None
    if isinstance(e, BaseExceptionGroup):
        stops, rest = e.split(StopRun)
        stop: StopRun | None = None
        if stops is not None:
            first = _first(stops)
            assert isinstance(first, StopRun)
            stop = first
        return stop, rest
    return None, e


def _first(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


class _TraceHandler(logging.Handler):
    """The runtime's warnings go into the run's trace (and nowhere else while it runs)."""

    def __init__(self, world: World) -> None:
        super().__init__(logging.WARNING)
        self.world = world

    def emit(self, record: logging.LogRecord) -> None:
        self.world.record("log", logger=record.name, message=record.getMessage()[:300])


def _pyiceberg(world: World, seed: int) -> contextlib.AbstractContextManager[None]:
    """pyiceberg deterministic for the run, if its sinks write Iceberg tables
    (:func:`~tidegate.sim.iceberg.pyiceberg_in_simulation`)."""
    scenario = world.scenario
    if not scenario.sinks or scenario.sink_writer != "iceberg":
        return contextlib.nullcontext()
    from .iceberg import pyiceberg_in_simulation
    from .storage_replica import CLOCK_NAME

    return pyiceberg_in_simulation(world.process_clock(CLOCK_NAME), seed)


@contextlib.contextmanager
def _logs_into(world: World) -> Iterator[None]:
    logger = logging.getLogger("tidegate")
    handler = _TraceHandler(world)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _coverage(on: bool) -> Any:
    if not on:
        return contextlib.nullcontext(None)
    from .coverage import RuleCounter

    return RuleCounter()
