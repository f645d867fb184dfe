"""Bugs the second round of fault kinds found, each pinned by its seed and shrunk plan.

Each file in ``regressions/`` is a reproducer that :func:`tidegate.sim.shrink.shrink` made
from the first seed of the mutant's scenario that caught the mutant (the product with the fix
reverted, :mod:`tidegate.sim.mutants`): its scenario, seed and plan, and the property it
breaks. With the mutant it must still break that property; without it (the product as it
is) every checker must hold. The unit tests beside the fixes are in ``tests/runtime`` and
``tests/spec`` (``test_damaged_storage.py``, ``test_storage_io.py``,
``test_environment_read_only.py``, the replica cores' examples).

The same folder holds the SQL clients' reproducers (``tidegate sim shrink`` files: seed,
scenario, mutant and plan, without the property): ``test_sim_sql_reach.py`` names the
property each breaks and judges them; here they are only counted.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tidegate.sim import RunOptions, run_simulation
from tidegate.sim.faults import FaultPlan
from tidegate.sim.scenario import SCENARIOS, Scenario

HERE = Path(__file__).parent / "regressions"
ALL = sorted(p.stem for p in HERE.glob("*.json"))


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text())
    return data


CASES = [name for name in ALL if "property" in _load(name)]
"""The fault rounds' reproducers: each names the property it breaks."""

SQL_CASES = {
    "pgwire_portal_skips_row",
    "sql_subquery_drops_offset",
    "sql_in_subquery_ignores_nulls",
    "sql_temporal_ignores_lower_bound",
}
"""The SQL clients' reproducers (judged in ``test_sim_sql_reach.py``)."""


@pytest.mark.parametrize("name", CASES)
def test_the_reproducer_fails_with_the_bug_and_passes_without(name: str) -> None:
    case = _load(name)
    scenario = Scenario.from_json(case["scenario"])
    plan = FaultPlan.from_json(case["plan"])
    broken = run_simulation(RunOptions(case["seed"], scenario, plan=plan, mutant=case["mutant"]))
    assert broken.violation is not None, f"{name}: the reproducer no longer fails with the bug"
    assert broken.violation.property == case["property"], broken.violation
    # The shrinker cut the run short after the violation; the product as it is must hold every
    # property, the liveness ones included, so it runs for the built-in scenario's length.
    built_in = SCENARIOS[scenario.name]()
    whole = replace(
        scenario,
        duration_ms=max(scenario.duration_ms, built_in.duration_ms),
        quiet_ms=max(scenario.quiet_ms, built_in.quiet_ms),
    )
    fixed = run_simulation(RunOptions(case["seed"], whole, plan=plan, trace_tail=30))
    assert fixed.ok, "\n".join([fixed.summary(), *fixed.trace_tail])


def test_every_bug_of_the_second_round_has_a_reproducer() -> None:
    assert set(CASES) == {
        "fenced_write_refused",
        "open_leaves_catalog",
        "hello_without_epoch",
        "full_disk_not_waited_out",
        "records_unsealed",
        "catalog_missing_ignored",
        "ceased_read_waits",
    }
    assert set(ALL) - set(CASES) == SQL_CASES  # every other file is one of the SQL clients'
    for name in ALL:
        case = _load(name)
        plan = FaultPlan.from_json(case["plan"])
        assert case["mutant"] == name and plan.steps <= 40, (name, plan.steps)
