"""Whole runs: the production runtime runs inside them, seeds pass every checker, faults fire."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import pytest

from tidegate.sim import RunOptions, RunResult, check_history, run_simulation, small, standard
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.knobs import Knobs

SMALL_SEEDS = range(6)


@pytest.fixture(scope="module")
def small_runs() -> list[RunResult]:
    return [run_simulation(RunOptions(seed=s, scenario=small())) for s in SMALL_SEEDS]


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps()[:3000], *r.trace_tail[-30:], r.error or ""])


def test_small_seeds_pass_every_checker(small_runs: list[RunResult]) -> None:
    for r in small_runs:
        assert r.ok, _explain(r)
        assert r.stats.virtual_ms == 14_000
        assert r.stats.peeks > 10 and r.stats.appends > 10 and r.stats.messages > 1_000


def test_the_offline_checker_agrees_with_the_online_one(small_runs: list[RunResult]) -> None:
    for r in small_runs:
        assert check_history(r.history, small()) == []


def test_rare_paths_are_reached_across_the_seeds(small_runs: list[RunResult]) -> None:
    total: Counter[str] = Counter()
    for r in small_runs:
        total.update(r.sometimes)
    for path in (
        "peek_refused_below",
        "peek_refused_future",
        "drop_dataflow",
        "create_index",
        "create_materialized_view",
        "peek_cancelled_while_pending",
        "subscribe",
        "hydrated",
    ):
        assert total[path] > 0, f"{path} never happened: {dict(total)}"
    ops: Counter[str] = Counter()
    for r in small_runs:
        ops.update(e["op"] for e in r.history.events)
        ops.update(
            "multi-table append"
            for e in r.history.ops("append")
            if len({t for t, _ in e["batches"]}) > 1
        )
        ops.update("key lookup" for e in r.history.ops("peek") if e.get("key") is not None)
        ops.update("targeted peek" for e in r.history.ops("peek") if e.get("replica"))
        ops.update(
            "null"
            for e in r.history.ops("append")
            for _t, rows in e["batches"]
            for row, _d in rows
            if None in row
        )
    for what in ("multi-table append", "key lookup", "targeted peek", "null", "policy", "batch"):
        assert ops[what] > 0, f"{what} never happened: {dict(ops)}"


def test_the_production_runtime_runs_in_a_standard_simulation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FoundationDB's rule: the runtime's driver, catalog, oracle, storage IO and restore path run
    inside the simulation, unmodified (the simulator has no driver or restart sequence of its own)."""
    from tidegate.runtime.catalog import Catalog
    from tidegate.runtime.controller.driver import ControllerDriver
    from tidegate.runtime.controller.storage_io import ShardStorageIO
    from tidegate.runtime.environment._opening import Opening
    from tidegate.runtime.oracle import TimestampOracle
    from tidegate.runtime.storage.store import ShardStore

    calls: Counter[str] = Counter()

    def counting(owner: type, name: str) -> None:
        original = getattr(owner, name)
        key = f"{owner.__name__}.{name}"
        if (
            name.startswith("_")
            and hasattr(original, "__code__")
            and original.__code__.co_flags & 0x80
        ):

            async def wrapped_async(*args: Any, **kw: Any) -> Any:
                calls[key] += 1
                return await original(*args, **kw)

            monkeypatch.setattr(owner, name, wrapped_async)
            return

        def wrapped(*args: Any, **kw: Any) -> Any:
            calls[key] += 1
            return original(*args, **kw)

        monkeypatch.setattr(owner, name, wrapped)

    counting(ControllerDriver, "_commit")
    counting(ControllerDriver, "_on_response")
    counting(Catalog, "apply")
    counting(TimestampOracle, "write_ts")
    counting(ShardStorageIO, "_write")
    counting(ShardStore, "compare_and_append")
    counting(Opening, "restore")
    plan = FaultPlan((Fault(20_000, FaultKind.RESTART_CONTROLLER, "", 500),))
    r = run_simulation(RunOptions(seed=2, scenario=standard(), plan=plan))
    assert r.ok, _explain(r)
    assert r.expanded_options["replicas"] == 3 and r.expanded_options["dataflows"] == 15
    assert r.stats.virtual_ms == 70_000 and r.stats.controller_restarts == 1
    for key in (
        "ControllerDriver._commit",
        "ControllerDriver._on_response",
        "Catalog.apply",
        "TimestampOracle.write_ts",
        "ShardStorageIO._write",
        "ShardStore.compare_and_append",
    ):
        assert calls[key] > 10, (key, dict(calls))
    assert calls["Opening.restore"] == 2  # the first open, and the restart's


EVERY_KIND = FaultPlan(
    (
        Fault(300, FaultKind.CRASH_REPLICA, "r1", 400),
        Fault(900, FaultKind.CUT_CONNECTION, "r2", 100),
        Fault(1_200, FaultKind.GHOST_CONNECTION, "r1", 30),
        Fault(1_500, FaultKind.REPLACE_REPLICA, "r2", 300),
        Fault(2_000, FaultKind.SLOW_REPLICA, "r1", 500, factor=8),
        Fault(2_200, FaultKind.DELAY_STORAGE_WRITE, "", 400, factor=5),
        Fault(2_700, FaultKind.CONSENSUS_FAILURES, "", 400),
        Fault(3_300, FaultKind.BLOB_FAILURES, "", 400),
        Fault(3_900, FaultKind.CRASH_CONTROLLER_IN, "append", 200),
        Fault(4_600, FaultKind.TORN_BLOB_WRITE, "", 200),
        Fault(5_200, FaultKind.RESTART_CONTROLLER, "", 300),
        Fault(5_000, FaultKind.CRASH_REPLICA_REHYDRATING, "r1", 200),
    ),
    tuple(FaultKind),
)


def test_a_given_plan_is_used_as_is_every_kind_fires_and_the_result_saves_as_json() -> None:
    scenario = dataclasses.replace(small(), duration_ms=7_000)
    # A torn blob write needs blob writes: maintenance merging into blobs every few appends.
    knobs = Knobs("blob_merges")
    r = run_simulation(RunOptions(seed=5, scenario=scenario, plan=EVERY_KIND, knobs=knobs))
    assert r.ok, _explain(r)
    assert r.plan.faults == EVERY_KIND.faults and r.plan.actions
    for f in EVERY_KIND.faults:
        assert r.sometimes.get(f.kind.value, 0) >= 1, (f.kind, r.sometimes)
    assert r.stats.controller_restarts >= 2
    saved = json.loads(json.dumps(r.to_json()))
    assert saved["seed"] == 5 and saved["trace_digest"] == r.trace_digest
    assert FaultPlan.from_json(saved["plan"]) == r.plan
    assert r.sometimes.get("knob_shard_policy_blob_merges") == 1


def test_a_generated_plan_passed_back_drives_the_identical_run() -> None:
    """The plan a run reports (faults and client actions) reproduces it: each kind of choice has
    its own stream of the seed, so an explicit plan replaces exactly the draws it stands for."""
    for seed in (2, 4):
        first = run_simulation(RunOptions(seed=seed, scenario=small()))
        again = run_simulation(RunOptions(seed=seed, scenario=small(), plan=first.plan))
        assert again.trace_digest == first.trace_digest
        assert again.plan == first.plan


def test_the_plan_reproduces_a_failure_of_a_mutant() -> None:
    """Issue 15: seed 4 of ``--mutant subscribe_forwards_duplicates`` used to fail while the
    same seed with its printed plan passed."""
    for seed in (1, 2, 3, 4, 5, 6, 7, 8):
        options = RunOptions(seed=seed, scenario=small(), mutant="subscribe_loses_retractions")
        first = run_simulation(options)
        if not first.ok:
            again = run_simulation(dataclasses.replace(options, plan=first.plan))
            assert again.violation == first.violation
            assert again.trace_digest == first.trace_digest
            return
    pytest.fail("the mutant survived eight seeds")
