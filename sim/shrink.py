"""Shrinking a failing run to a smallest reproducer, by delta debugging.

Given options whose run violates a property, :func:`shrink` keeps the seed
and looks for a smaller run that still violates the *same* property:

0. nothing after a safety violation -- the faults that strike later, and the
   rest of the run's duration;
1. fewer faults -- delta debugging (ddmin) over the plan's faults, built from
   :meth:`FaultPlan.without`;
2. shorter faults -- each fault's ``duration_ms`` halved while it still fails;
3. a smaller workload -- the scenario's ``duration_ms`` and ``quiet_ms``
   halved, client actions switched off one kind at a time, unused dataflows
   removed, fewer replicas.

A candidate reproduces if its verdict (the online checkers', else the offline
history checker's, see :func:`tidegate.sim.campaign.verdict`) names the same
property. Every candidate is a full deterministic run, so the result is a reproducer
that :mod:`.replay` re-runs byte for byte. The number of runs is bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .faults import Fault, FaultPlan
from .scenario import Scenario

__all__ = ["NotFailing", "ShrinkResult", "describe", "shrink"]

Runner = Callable[[Any], Any]


class NotFailing(ValueError):
    """The run to shrink does not fail: there is nothing to minimise."""


@dataclass
class ShrinkResult:
    """The smallest failing run found, and how it got there."""

    options: Any
    result: Any
    violation: Any
    """The broken property of ``result`` (online checkers', else the offline history checker's)."""
    original_faults: int
    original_duration_ms: int
    runs: int
    steps: list[str] = field(default_factory=list)

    @property
    def plan(self) -> FaultPlan:
        """The reproducer's faults (the plan its run used)."""
        plan: FaultPlan = self.result.plan
        return plan

    @property
    def scenario(self) -> Scenario:
        scenario: Scenario = self.options.scenario
        return scenario


class _Search:
    """The current smallest failing options, and a budgeted way to try a candidate."""

    def __init__(self, options: Any, result: Any, run: Runner, max_runs: int) -> None:
        self.options = options
        self.result = result
        self.violation = _verdict(result, options)
        self.property = self.violation.property
        self._run = run
        self.runs = 0
        self.max_runs = max_runs
        self.steps: list[str] = []

    @property
    def exhausted(self) -> bool:
        return self.runs >= self.max_runs

    def fails(self, options: Any) -> tuple[Any, Any] | None:
        """The failing result of ``options`` and its violation if it breaks the same property."""
        if self.exhausted:
            return None
        self.runs += 1
        try:
            result = self._run(options)
        except Exception:  # a candidate that crashes the simulator is not a reproducer
            return None
        v = _verdict(result, options)
        if v is None or v.property != self.property:
            return None
        return result, v

    def attempt(self, options: Any, step: str) -> bool:
        found = self.fails(options)
        if found is None:
            return False
        self.options, (self.result, self.violation) = options, found
        self.steps.append(step)
        return True


def _verdict(result: Any, options: Any) -> Any:
    from .campaign import verdict

    return verdict(result, getattr(options, "scenario", None))


def _with_plan(options: Any, faults: Iterable[Fault]) -> Any:
    plan: FaultPlan = options.plan
    return replace(options, plan=FaultPlan(tuple(faults), plan.enabled))


def _ddmin(search: _Search) -> None:
    """Delta debugging over the plan's faults: remove chunks while the failure persists."""
    n = 2
    while not search.exhausted:
        faults = list(search.options.plan.faults)
        if not faults:
            return
        if len(faults) == 1:
            search.attempt(_with_plan(search.options, ()), "removed the last fault")
            return
        n = min(n, len(faults))
        size = -(-len(faults) // n)
        chunks = [faults[i : i + size] for i in range(0, len(faults), size)]
        reduced = False
        for i, chunk in enumerate(chunks):
            rest = [f for j, c in enumerate(chunks) if j != i for f in c]
            if search.attempt(
                _with_plan(search.options, rest),
                f"removed {len(chunk)} fault(s): {', '.join(_fault_text(f) for f in chunk)}",
            ):
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if n >= len(faults):
                return
            n = min(2 * n, len(faults))


def _cut_at_violation(search: _Search) -> None:
    """Drop what happens after a safety violation: later faults, and the rest of the run."""
    at = int(search.violation.at_ms)
    plan = search.options.plan
    if plan is not None:
        kept = [f for f in plan.faults if f.at_ms <= at]
        if len(kept) < len(plan.faults):
            search.attempt(
                _with_plan(search.options, kept),
                f"removed {len(plan.faults) - len(kept)} fault(s) after the violation at {at}ms",
            )
    sc: Scenario = search.options.scenario
    cut = max(200, -(-(at + 1) // 100) * 100)
    if cut < sc.duration_ms:
        search.attempt(
            _with_scenario(search.options, replace(sc, duration_ms=cut)),
            f"duration_ms {sc.duration_ms} -> {cut} (just past the violation)",
        )


def _shorten_faults(search: _Search) -> None:
    i = 0
    while i < len(search.options.plan.faults) and not search.exhausted:
        f = search.options.plan.faults[i]
        shorter = f.duration_ms // 2
        if shorter < 10 or shorter == f.duration_ms:
            i += 1
            continue
        faults = list(search.options.plan.faults)
        faults[i] = replace(f, duration_ms=shorter)
        if not search.attempt(
            _with_plan(search.options, faults),
            f"shortened {f.kind.value}@{f.at_ms}ms to {shorter}ms",
        ):
            i += 1


def _without_action(workload: Any, action: str) -> Any:
    return replace(workload, **{action: 0})


def _with_scenario(options: Any, scenario: Scenario) -> Any:
    return replace(options, scenario=scenario)


def _shrink_workload(search: _Search) -> None:
    # Durations: halve while it still fails.
    for attr, floor in (("duration_ms", 200), ("quiet_ms", 200)):
        while not search.exhausted:
            sc: Scenario = search.options.scenario
            value = getattr(sc, attr)
            half = value // 2
            if half < floor:
                break
            if not search.attempt(
                _with_scenario(search.options, replace(sc, **{attr: half})),
                f"{attr} {value} -> {half}",
            ):
                break
    # Client actions: switch each kind off.
    sc = search.options.scenario
    for action, weight in sc.workload.weights():
        if search.exhausted:
            return
        sc = search.options.scenario
        if len(sc.workload.weights()) <= 1:
            break
        search.attempt(
            _with_scenario(
                search.options, replace(sc, workload=_without_action(sc.workload, action))
            ),
            f"no {action} actions (weight was {weight})",
        )
    # Dataflows: drop each one.
    for d in list(search.options.scenario.dataflows):
        if search.exhausted:
            return
        sc = search.options.scenario
        kept = tuple(x for x in sc.dataflows if x.name != d.name)
        search.attempt(
            _with_scenario(search.options, replace(sc, dataflows=kept)),
            f"without dataflow {d.name}",
        )
    # Fewer replicas (faults aimed at a replica that no longer exists must go first).
    while not search.exhausted and search.options.scenario.replicas > 1:
        sc = search.options.scenario
        if not search.attempt(
            _with_scenario(search.options, replace(sc, replicas=sc.replicas - 1)),
            f"replicas {sc.replicas} -> {sc.replicas - 1}",
        ):
            break


def shrink(
    options: Any,
    *,
    run: Runner | None = None,
    max_runs: int = 150,
    workload: bool = True,
    log: Callable[[str], None] | None = None,
) -> ShrinkResult:
    """Minimise a failing run (see the module docstring); raises :class:`NotFailing` if it passes.

    ``options.plan`` may be ``None`` (generated from the seed); the plan the
    run actually used is then made explicit first.
    """
    if run is None:
        from .run import run_simulation

        run = run_simulation
    first = run(options)
    if _verdict(first, options) is None:
        raise NotFailing(f"seed {options.seed} passes: nothing to shrink")
    search = _Search(options, first, run, max_runs)
    original_faults = len(first.plan.faults)
    original_duration = options.scenario.duration_ms
    if options.plan is None:
        # Make the seed's plan explicit, if the run with it still fails the same way.
        search.attempt(replace(options, plan=first.plan), "made the seed's fault plan explicit")
    phases: list[tuple[str, Callable[[_Search], None]]] = [
        ("after the violation", _cut_at_violation)
    ]
    if search.options.plan is not None:
        phases += [("faults", _ddmin), ("fault durations", _shorten_faults)]
    elif log is not None:
        log("shrink: the run does not fail with its plan made explicit; faults kept as generated")
    if workload:
        phases.append(("workload", _shrink_workload))
    # Repeat the phases until a whole pass removes nothing (a smaller workload can make
    # faults removable, and the other way round), within the run budget.
    progress = True
    while progress and not search.exhausted:
        start = len(search.steps)
        for name, phase in phases:
            before = len(search.steps)
            phase(search)
            if log is not None:
                log(
                    f"shrink {name}: {len(search.steps) - before} step(s), "
                    f"{search.runs} run(s) so far"
                )
        progress = len(search.steps) > start
    return ShrinkResult(
        search.options,
        search.result,
        search.violation,
        original_faults,
        original_duration,
        search.runs + 1,
        search.steps,
    )


def _fault_text(f: Fault) -> str:
    target = f" {f.target}" if f.target else ""
    extra = f" x{f.factor}" if f.factor != 1 else ""
    return f"{f.kind.value}{target}@{f.at_ms}ms+{f.duration_ms}ms{extra}"


def describe(result: ShrinkResult) -> str:
    """A human-readable reproducer: what was removed and what is left."""
    opts = result.options
    sc: Scenario = opts.scenario
    v = result.violation
    lines = [
        f"reproducer: seed {opts.seed}, scenario {sc.name}"
        + (f", mutant {opts.mutant}" if getattr(opts, "mutant", None) else ""),
        f"  broken property: {v.property} at {v.at_ms}ms: {v.message}",
        f"  faults: {len(result.plan.faults)} (was {result.original_faults})",
    ]
    lines.extend(f"    {_fault_text(f)}" for f in result.plan.faults)
    lines.append(
        f"  scenario: {sc.replicas} replica(s), {len(sc.dataflows)} dataflow(s), "
        f"duration {sc.duration_ms}ms (was {result.original_duration_ms}ms), quiet {sc.quiet_ms}ms"
    )
    lines.append("  workload: " + ", ".join(f"{a}={w}" for a, w in sc.workload.weights()))
    lines.append(f"  {result.runs} run(s); steps:")
    lines.extend(f"    - {s}" for s in result.steps or ["(nothing could be removed)"])
    return "\n".join(lines)
