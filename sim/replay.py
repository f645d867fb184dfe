"""Replaying saved runs: a trace file (options + plan + digest) or a bare plan file.

A trace file is what ``RunResult.to_json()`` writes (``tidegate sim run
--save-trace``, ``tidegate sim shrink``): it names the seed, the scenario, the
plan as run (faults and client actions), the mutant if any, and the trace
digest. Replaying runs the same options again and checks that the digest
matches -- determinism in the field. A bare plan file (``FaultPlan.dumps()``)
carries no seed or scenario; the caller supplies them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .faults import FaultPlan, FaultPlanError
from .knobs import Knobs
from .scenario import SCENARIOS, Scenario, ScenarioError

__all__ = [
    "ReplayError",
    "ReplayOutcome",
    "Replayable",
    "load_replayable",
    "replay",
    "resolve_scenario",
    "save_result",
]


class ReplayError(ValueError):
    """A file that is neither a trace nor a fault plan, or lacks what a replay needs."""


def resolve_scenario(spec: str | dict[str, Any] | Scenario | None) -> Scenario:
    """A scenario from a built-in name, a JSON file path, a JSON dict, or ``None`` (``small``)."""
    if isinstance(spec, Scenario):
        return spec
    if spec is None:
        return SCENARIOS["small"]()
    if isinstance(spec, dict):
        return Scenario.from_json(spec)
    if spec in SCENARIOS:
        return SCENARIOS[spec]()
    path = Path(spec)
    if not path.exists():
        raise ScenarioError(
            f"no built-in scenario or file named {spec!r} (built-ins: {', '.join(SCENARIOS)})"
        )
    return Scenario.load(path)


@dataclass(frozen=True)
class Replayable:
    """What a saved file says to run: seed, scenario, plan, mutant, and the digest to expect."""

    seed: int
    scenario: Scenario
    plan: FaultPlan | None
    """``None``: the plan the seed generates. A saved run's plan has its client actions
    too, and drives exactly the run that recorded it."""
    mutant: str | None
    expected_digest: str | None
    knobs: Knobs | None = None
    """The knobs the run set (files from before knobs: drawn from the seed, as then)."""

    def options(self, *, keep_trace: bool = False, trace_tail: int = 200) -> Any:
        """The :class:`~tidegate.sim.run.RunOptions` of this run."""
        from .run import RunOptions

        return RunOptions(
            seed=self.seed,
            scenario=self.scenario,
            plan=self.plan,
            mutant=self.mutant,
            trace_tail=trace_tail,
            keep_trace=keep_trace,
            knobs=self.knobs,
        )


def _pick(data: dict[str, Any], *names: str) -> Any:
    for scope in (data, data.get("options") or {}):
        if isinstance(scope, dict):
            for name in names:
                if scope.get(name) is not None:
                    return scope[name]
    return None


def load_replayable(
    path: str | Path,
    *,
    seed: int | None = None,
    scenario: str | dict[str, Any] | Scenario | None = None,
    mutant: str | None = None,
) -> Replayable:
    """Read a trace or plan file; ``seed``/``scenario``/``mutant`` override or complete it."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ReplayError(f"{p}: cannot read a trace or plan: {e}") from e
    if not isinstance(data, dict):
        raise ReplayError(f"{p}: expected a JSON object")
    if "faults" in data and "version" in data and "plan" not in data:
        try:
            plan = FaultPlan.from_json(data)
        except FaultPlanError as e:
            raise ReplayError(f"{p}: {e}") from e
        if seed is None:
            raise ReplayError(f"{p} is a bare fault plan: give the seed (--seed) to replay it")
        return Replayable(seed, resolve_scenario(scenario), plan, mutant, None)
    raw_plan = _pick(data, "plan")
    raw_seed = _pick(data, "seed")
    if raw_plan is None or (raw_seed is None and seed is None):
        raise ReplayError(f"{p}: a trace file needs 'seed' and 'plan'")
    try:
        plan = FaultPlan.from_json(raw_plan)
    except FaultPlanError as e:
        raise ReplayError(f"{p}: {e}") from e
    saved_scenario = _pick(data, "scenario", "scenario_name")
    raw_knobs = _pick(data, "knobs")
    try:
        knobs = Knobs.from_json(raw_knobs) if isinstance(raw_knobs, dict) else None
    except ValueError as e:
        raise ReplayError(f"{p}: {e}") from e
    return Replayable(
        seed=int(raw_seed) if seed is None else seed,
        scenario=resolve_scenario(scenario if scenario is not None else saved_scenario),
        plan=plan,
        mutant=mutant if mutant is not None else _pick(data, "mutant"),
        expected_digest=_pick(data, "trace_digest", "digest"),
        knobs=knobs,
    )


@dataclass(frozen=True)
class ReplayOutcome:
    """The re-run and whether its digest equals the saved one (``None``: nothing to compare)."""

    replayable: Replayable
    result: Any
    matches: bool | None


def replay(replayable: Replayable, *, keep_trace: bool = False) -> ReplayOutcome:
    """Run the saved options again and compare digests."""
    from .run import run_simulation

    result = run_simulation(replayable.options(keep_trace=keep_trace))
    expected = replayable.expected_digest
    return ReplayOutcome(
        replayable, result, None if expected is None else result.trace_digest == expected
    )


def save_result(result: Any, path: str | Path, options: Any = None) -> None:
    """Write ``result.to_json()`` as a trace file that :func:`load_replayable` reads.

    With ``options``, the full scenario and the mutant are written too, so that
    a shrunk or hand-made scenario replays without its original file.
    """
    data = dict(result.to_json())
    if options is not None:
        data["seed"] = options.seed
        data["scenario"] = options.scenario.to_json()
        data["mutant"] = options.mutant
    Path(path).write_text(json.dumps(data, sort_keys=True, indent=1) + "\n")
