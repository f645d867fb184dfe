"""Whole runs: seeds of ``small()`` and one of ``standard()`` pass every checker; faults fire."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tidegate.sim import RunOptions, RunResult, check_history, run_simulation, small, standard
from tidegate.sim.faults import Fault, FaultKind, FaultPlan

SMALL_SEEDS = range(8)


@pytest.fixture(scope="module")
def small_runs() -> list[RunResult]:
    return [run_simulation(RunOptions(seed=s, scenario=small())) for s in SMALL_SEEDS]


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps(), *r.trace_tail[-30:], r.error or ""])


def test_small_seeds_pass_every_checker(small_runs: list[RunResult]) -> None:
    for r in small_runs:
        assert r.ok, _explain(r)
        assert r.stats.virtual_ms == 12_000
        assert r.stats.peeks > 10 and r.stats.appends > 10 and r.stats.messages > 1_000


def test_every_planned_fault_kind_fired_across_the_seeds(small_runs: list[RunResult]) -> None:
    planned: set[str] = set()
    fired: Counter[str] = Counter()
    for r in small_runs:
        planned |= {f.kind.value for f in r.plan.faults}
        for kind in FaultKind:
            fired[kind.value] += r.sometimes.get(kind.value, 0)
    assert planned, "the seeds planned no faults at all"
    never = sorted(k for k in planned if fired[k] == 0)
    assert not never, f"fault kinds planned but never fired: {never}"


def test_rare_paths_are_reached_across_the_seeds(small_runs: list[RunResult]) -> None:
    total: Counter[str] = Counter()
    for r in small_runs:
        total.update(r.sometimes)
    for path in (
        "peek_refused_below_since",
        "peek_future_time",
        "persist_peek",
        "drop_dataflow",
        "compaction_during_peek",
        "peek_cancelled_while_pending",
    ):
        assert total[path] > 0, f"{path} never happened: {dict(total)}"


def test_the_offline_checker_agrees_with_the_online_one(small_runs: list[RunResult]) -> None:
    for r in small_runs[:3]:
        assert check_history(r.history, small()) == []


def test_one_standard_seed_passes() -> None:
    r = run_simulation(RunOptions(seed=2, scenario=standard()))
    assert r.ok, _explain(r)
    assert r.expanded_options["replicas"] == 3 and r.expanded_options["dataflows"] == 10
    assert r.stats.virtual_ms == 70_000


def test_a_given_plan_is_used_as_is_and_the_result_saves_as_json() -> None:
    plan = FaultPlan(
        (
            Fault(500, FaultKind.CRASH_REPLICA, "r1", 400),
            Fault(900, FaultKind.CUT_CONNECTION, "r2", 100),
            Fault(1500, FaultKind.REPLACE_REPLICA, "r2", 300),
            Fault(2000, FaultKind.SLOW_REPLICA, "r1", 500, factor=8),
            Fault(2500, FaultKind.DELAY_STORAGE_WRITE, "", 400),
        ),
        tuple(FaultKind),
    )
    import dataclasses

    scenario = dataclasses.replace(small(), duration_ms=4_000, quiet_ms=3_000)
    r = run_simulation(RunOptions(seed=5, scenario=scenario, plan=plan))
    assert r.ok, _explain(r)
    assert r.plan == plan
    for kind in (
        "crash_replica",
        "cut_connection",
        "replace_replica",
        "slow_replica",
        "delay_storage_write",
    ):
        assert r.sometimes[kind] == 1, r.sometimes
    saved = json.loads(json.dumps(r.to_json()))
    assert saved["seed"] == 5 and saved["trace_digest"] == r.trace_digest
    assert FaultPlan.from_json(saved["plan"]) == plan
