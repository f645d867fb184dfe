"""Scenario files (their schema, ``tidegate sim scenario``, the documented example) and the
Hypothesis strategy for whole scenarios."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.sim import SCENARIOS, Scenario, check_history, scenarios
from tidegate.sim.scenario import ScenarioError, WorkloadMix
from tidegate.sim.scenario_schema import json_schema
from tidegate.sim.strategies import run_scenario

TIDEGATE = [sys.executable, "-m", "tidegate"]


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
        15,
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


# -- the schema ---------------------------------------------------------------------------------


def _small() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(SCENARIOS["small"]().to_json()))
    return data


def _problems(data: Any) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_json(data)
    assert caught.value.problems, str(caught.value)
    for path, message in caught.value.problems:
        assert f"{path}: {message}" in str(caught.value)
    return dict(caught.value.problems)


def test_an_unknown_key_is_refused_with_its_path_and_the_fields_expected() -> None:
    data = _small()
    data["dataflows"][1]["kindd"] = "index"
    data["tables"][0]["schema"]["columns"][1]["nulable"] = True
    data["workload"]["appends"] = 3
    data["colour"] = "blue"
    assert _problems(data) == {
        "dataflows.1.kindd": "unknown field; expected one of: name, kind, plan, key, cluster",
        "tables.0.schema.columns.1.nulable": "unknown field; expected one of: name, type, nullable",
        "workload.appends": "unknown field; expected one of: "
        + ", ".join(
            [*WorkloadMix.ACTIONS, "rows_per_append", "ms_between_actions", "null_per_mille"]
        ),
        "colour": "unknown field; expected one of: name, replicas, tables, dataflows, workload, "
        "duration_ms, faults, fault_kinds, quiet_ms, tick_ms, replica_step_ms, replica, upgrade, "
        "sources, sinks, upstream_ms, storage_tick_ms, sink_writer, clusters",
    }


def test_a_value_of_the_wrong_type_names_its_field_and_what_was_expected() -> None:
    data = _small()
    data["replicas"] = "2"
    data["duration_ms"] = 1.5
    data["tables"][0]["schema"]["columns"][0]["type"] = "text"
    data["dataflows"][0]["kind"] = "view"
    data["workload"]["rows_per_append"] = [4, 1]
    data["fault_kinds"] = ["meteor"]
    found = _problems(data)
    assert set(found) == {
        "replicas",
        "duration_ms",
        "tables.0.schema.columns.0.type",
        "dataflows.0.kind",
        "workload.rows_per_append",
        "fault_kinds.0",
    }
    assert found["replicas"] == "Input should be a valid integer; got '2'"
    assert "valid integer" in found["duration_ms"] and "got 1.5" in found["duration_ms"]
    assert "'int64', 'float64', 'string'" in found["tables.0.schema.columns.0.type"]
    assert "'index', 'materialized_view' or 'subscribe'" in found["dataflows.0.kind"]
    assert found["workload.rows_per_append"] == "expected [low, high] with low <= high, got [4, 1]"
    assert "'crash_replica'" in found["fault_kinds.0"] and "got 'meteor'" in found["fault_kinds.0"]


def test_a_missing_field_is_named() -> None:
    data = _small()
    del data["name"]
    del data["dataflows"][0]["plan"]
    del data["tables"][1]["schema"]["columns"][0]["type"]
    assert _problems(data) == {
        "name": "missing; this field is required",
        "dataflows.0.plan": "missing; this field is required",
        "tables.1.schema.columns.0.type": "missing; this field is required",
    }


def test_ranges_plans_and_repeated_names_are_checked_field_by_field() -> None:
    data = _small()
    data["replicas"] = 6
    data["dataflows"][0]["plan"] = {"op": "teleport"}
    data["tables"][0]["id"] = "orders"
    found = _problems(data)
    assert found["replicas"] == "Input should be less than or equal to 5; got 6"
    assert found["dataflows.0.plan"].startswith("expected a plan in plan_to_dict's JSON form")
    assert found["tables.0.id"] == "expected a table id like 'u1', got 'orders'"
    again = _small()
    again["dataflows"].append(again["dataflows"][0])
    assert _problems(again) == {
        "(the file)": "dataflow names must be unique; repeated: orders",
    }
    assert _problems([1, 2]) == {"(the file)": "expected a JSON object, got list"}


def test_sources_and_sinks_are_checked_against_the_scenario() -> None:
    base = SCENARIOS["sources"]().to_json()
    bad_input = json.loads(json.dumps(base))
    bad_input["sinks"][0]["input"] = "u99"
    assert _problems(bad_input) == {
        "(the file)": "sink 'orders_sink': input 'u99' is not a table, a source or a "
        "materialized view of the scenario"
    }
    clash = json.loads(json.dumps(base))
    clash["sources"][0]["id"] = "u1"  # the table's id
    assert _problems(clash) == {"(the file)": "table and source ids must be unique; repeated: u1"}
    named = json.loads(json.dumps(base))
    named["sinks"][0]["name"] = "orders"  # a dataflow's name
    assert _problems(named) == {
        "(the file)": "dataflow, source and sink names must be unique; repeated: orders"
    }
    missing = json.loads(json.dumps(base))
    del missing["sources"][0]["upstream"]
    missing["upstream_ms"] = [0, 10]
    assert _problems(missing) == {
        "sources.0.upstream": "missing; this field is required",
        "upstream_ms.0": "Input should be greater than 0; got 0",
    }


def test_a_scenario_without_sources_writes_no_storage_fields() -> None:
    """Files of scenarios without sources or sinks stay as they were before sources existed."""
    for name in ("standard", "small", "churn"):
        data = SCENARIOS[name]().to_json()
        assert not {"sources", "sinks", "upstream_ms", "storage_tick_ms"} & set(data)
        assert not {"create_source", "drop_source", "create_sink", "drop_sink"} & set(
            data["workload"]
        )
        assert not SCENARIOS[name]().storage
    assert SCENARIOS["sources"]().storage


@pytest.mark.processes
def test_a_bad_file_names_itself_and_the_cli_prints_no_traceback(tmp_path: Path) -> None:
    data = _small()
    data["faults"] = -1
    data["tables"][0]["schema"]["columns"][0]["extra"] = 1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ScenarioError, match=r"^.*bad\.json: bad scenario \(2 problems\)"):
        Scenario.load(path)
    for args in (["run", "--seed", "1", "--scenario", str(path)], ["scenario", "check", str(path)]):
        done = subprocess.run(
            [*TIDEGATE, "sim", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr == (
            f"tidegate sim: {path}: bad scenario (2 problems):\n"
            "  tables.0.schema.columns.0.extra: unknown field; expected one of: "
            "name, type, nullable\n"
            "  faults: Input should be greater than or equal to 0; got -1\n"
        )


def test_the_json_schema_refuses_unknown_keys_everywhere() -> None:
    schema = json_schema()
    assert schema["additionalProperties"] is False
    objects = [d for d in schema["$defs"].values() if d.get("type") == "object"]
    # a column, a schema, a table, a dataflow, the workload, a source, a sink, a cluster
    assert len(objects) == 8
    assert all(d["additionalProperties"] is False for d in objects)
    assert set(schema["required"]) == {"name", "tables"}


# -- the CLI ---------------------------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_show_writes_a_file_that_loads_back_unchanged(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [*TIDEGATE, "sim", "scenario", "show", name], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    path = tmp_path / "my.json"
    path.write_text(done.stdout)
    assert Scenario.load(path) == SCENARIOS[name]()
    assert next(iter(json.loads(done.stdout))) == "name"  # in the order a reader wants
    # and again through the file: show FILE prints the same file
    again = subprocess.run(
        [*TIDEGATE, "sim", "scenario", "show", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.stdout == done.stdout


@pytest.mark.processes
def test_scenario_list_check_and_schema(tmp_path: Path) -> None:
    listed = subprocess.run(
        [*TIDEGATE, "sim", "scenario", "list"], capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(SCENARIOS)
    assert "3 replicas, 15 dataflows" in listed.stdout
    path = tmp_path / "s.json"
    path.write_text(SCENARIOS["small"]().dumps())
    checked = subprocess.run(
        [*TIDEGATE, "sim", "scenario", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0 and checked.stdout.startswith(f"{path}: scenario small: 2 ")
    schema = subprocess.run(
        [*TIDEGATE, "sim", "scenario", "schema"], capture_output=True, text=True, timeout=120
    )
    assert json.loads(schema.stdout) == json_schema()


# -- the documentation's example -------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


@pytest.mark.processes
def test_the_documented_scenario_file_loads_and_runs(tmp_path: Path) -> None:
    blocks = re.findall(
        r"<!-- scenario-example:[^\n]*-->\n```json\n(.*?)^```", DOCS.read_text(), re.S | re.M
    )
    assert len(blocks) == 1
    path = tmp_path / "mine.json"
    path.write_text(blocks[0])
    scenario = Scenario.load(path)
    assert (scenario.name, scenario.replicas, [d.name for d in scenario.dataflows]) == (
        "mine",
        2,
        ["orders"],
    )
    assert scenario.workload.peek == 10 and scenario.workload.subscribe == WorkloadMix().subscribe
    done = subprocess.run(
        [*TIDEGATE, "sim", "run", "--seed", "1", "--scenario", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS seed 1 (mine)" in done.stdout
