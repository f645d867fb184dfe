"""Scenario files and the Hypothesis strategy for whole scenarios."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.sim import SCENARIOS, Scenario, check_history, scenarios
from tidegate.sim.scenario import ScenarioError
from tidegate.sim.strategies import run_scenario


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_built_in_scenarios_round_trip_through_json_files(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]()
    path = tmp_path / f"{name}.json"
    path.write_text(scenario.dumps())
    assert Scenario.load(path) == scenario
    assert Scenario.from_json(json.loads(json.dumps(scenario.to_json()))) == scenario


def test_standard_has_the_documented_shape() -> None:
    s = SCENARIOS["standard"]()
    assert (s.replicas, len(s.dataflows), len(s.tables), s.duration_ms, s.faults) == (
        3,
        13,
        3,
        60_000,
        5,
    )
    assert {d.kind for d in s.dataflows} == {"index", "materialized_view", "subscribe"}


@pytest.mark.parametrize(
    "change",
    [
        {"replicas": 0},
        {"replicas": 6},
        {"tables": []},
        {"duration_ms": 0},
        {"workload": {"bogus": 1}},
        {"fault_kinds": ["meteor"]},
    ],
)
def test_bad_scenarios_are_refused_with_a_typed_error(change: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    data = {**SCENARIOS["small"]().to_json(), **change}
    with pytest.raises(ScenarioError):
        Scenario.from_json(data)


def test_a_non_json_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("{ not json")
    with pytest.raises(ScenarioError):
        Scenario.load(path)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios(max_duration_ms=1_500, max_replicas=2), data=st.data())
def test_generated_scenarios_pass_every_checker(scenario: Scenario, data: st.DataObject) -> None:
    short = dataclasses.replace(scenario, quiet_ms=6_000)
    result = run_scenario(short, data)
    assert result.ok, "\n".join([result.summary(), *result.trace_tail[-20:], result.error or ""])
    assert check_history(result.history, short) == []
