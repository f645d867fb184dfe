"""The controller process dies -- anywhere, or inside a storage call -- and a new one restores.

A "restart" fault is ``kill -9`` of the process hosting the runtime's
``Environment``: nothing it had in flight reaches the disk afterwards, its
clients' pending operations end with their outcome unknown, and after the
fault's duration ``Environment.open`` restores everything from the catalog,
the shards and the oracle. Crash points kill it inside a particular storage
call (an append's commit, a catalog write, an oracle reservation, a blob
write -- torn --, or anything while it restores). Every checker must hold.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest

from tidegate.sim import RunOptions, RunResult, check_history, run_simulation, small
from tidegate.sim.faults import CONTROLLER_CRASH_TARGETS, Fault, FaultKind, FaultPlan
from tidegate.sim.scenario import WorkloadMix

SCENARIO = dataclasses.replace(small(), duration_ms=5_000)

RESTART_MID_STREAM = FaultPlan((Fault(2_500, FaultKind.RESTART_CONTROLLER, "", 400),))
"""One restart in the middle of the run, while clients append, peek and subscribe."""

IN_DOUBT = FaultPlan(
    (
        Fault(1_500, FaultKind.DELAY_STORAGE_WRITE, "", 900, factor=30),
        Fault(1_900, FaultKind.RESTART_CONTROLLER, "", 300),
        Fault(3_000, FaultKind.DELAY_STORAGE_WRITE, "", 900, factor=30),
        Fault(3_400, FaultKind.RESTART_CONTROLLER, "", 200),
        Fault(3_500, FaultKind.CRASH_REPLICA, "r1", 300),
    ),
)
"""Restarts while storage is slow, so that appends are in flight when the controller dies."""


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps()[:2000], *r.trace_tail[-30:], r.error or ""])


def _ops(r: RunResult, op: str) -> list[dict[str, Any]]:
    return r.history.ops(op)


def test_a_restart_mid_stream_passes_every_checker_and_clients_go_on() -> None:
    r = run_simulation(RunOptions(seed=1, scenario=SCENARIO, plan=RESTART_MID_STREAM))
    assert r.ok, _explain(r)
    assert r.sometimes["restart_controller"] == 1 and r.stats.controller_restarts == 1
    assert check_history(r.history, SCENARIO) == []
    (restart,) = _ops(r, "restart")
    assert restart["generation"] == 2 and 2_900 <= restart["at_ms"] < 3_200
    died = [e for e in r.history.events if e.get("status") == "info"]
    assert all(e["error"] == "the controller died" and e["complete_ms"] == 2_500 for e in died)
    later = [e for e in _ops(r, "peek") if e["invoke_ms"] > 3_000 and e["status"] == "ok"]
    assert len(later) > 5
    acked = [e for e in _ops(r, "append") if e["status"] == "ok" and e["invoke_ms"] > 3_000]
    assert acked


def test_appends_in_flight_land_or_not_as_the_disk_decided() -> None:
    landed: set[bool] = set()
    for seed in (1, 2, 3, 4):
        r = run_simulation(RunOptions(seed=seed, scenario=SCENARIO, plan=IN_DOUBT))
        assert r.ok, _explain(r)
        assert r.sometimes["restart_controller"] == 2
        for e in _ops(r, "append"):
            assert e["status"] != "pending"
            if e["status"] == "info":
                landed.add(bool(e["landed"]))
    assert landed == {True, False}, "the disk should have decided both ways across the seeds"


@pytest.mark.parametrize("target", CONTROLLER_CRASH_TARGETS)
def test_the_controller_dies_inside_a_storage_call_and_recovers(target: str) -> None:
    """A crash point of each kind fires (for ``restore``, inside the restore that follows a
    restart), the controller comes back, and every checker holds."""
    faults = [Fault(1_200, FaultKind.CRASH_CONTROLLER_IN, target, 250)]
    if target == "restore":  # armed while the controller is down: it strikes the restore
        faults = [
            Fault(1_000, FaultKind.RESTART_CONTROLLER, "", 400),
            Fault(1_200, FaultKind.CRASH_CONTROLLER_IN, target, 250),
        ]
    r = run_simulation(RunOptions(seed=3, scenario=SCENARIO, plan=FaultPlan(tuple(faults))))
    assert r.ok, _explain(r)
    assert r.sometimes.get("crash_controller_in") == 1, r.sometimes
    assert r.sometimes[f"crash_point_{target}"] == 1
    assert r.stats.controller_restarts >= 1


def test_a_torn_blob_write_leaves_an_orphan_nobody_reads() -> None:
    plan = FaultPlan((Fault(1_000, FaultKind.TORN_BLOB_WRITE, "", 200),))
    r = run_simulation(RunOptions(seed=2, scenario=SCENARIO, plan=plan))
    assert r.ok, _explain(r)
    assert r.sometimes.get("torn_blob_write") == 1 and r.stats.controller_restarts == 1


def test_storage_failures_are_retried_and_nothing_is_lost() -> None:
    plan = FaultPlan(
        (
            Fault(800, FaultKind.CONSENSUS_FAILURES, "", 1_500),
            Fault(2_800, FaultKind.BLOB_FAILURES, "", 1_000),
        )
    )
    # Which seed meets all four failures (a consensus and a blob failure, each before and
    # after its operation took effect) depends on the interleaving, which every change to
    # the messages or the kernel's events moves (seeds 4, 3 and 2 were pinned in turn): the
    # first of seeds 1-30 that meets them is judged, and every seed run on the way must pass.
    # About 12 of the 30 meet them.
    wanted = [
        f"storage_{what}_failed_{outcome}"
        for what in ("consensus", "blob")
        for outcome in ("before", "after")
    ]
    for seed in range(1, 31):
        r = run_simulation(RunOptions(seed=seed, scenario=SCENARIO, plan=plan))
        assert r.ok, _explain(r)
        if all(r.sometimes.get(name, 0) > 0 for name in wanted):
            break
    else:
        raise AssertionError(f"none of seeds 1-30 met all of {wanted}")
    assert any(line for line in r.trace_tail) and r.stats.appends > 10


def test_a_materialized_view_sealed_before_a_restart_counts_as_hydrated() -> None:
    """A constant materialized view's shard is complete (upper ``[]``) moments after it is
    created; a controller restarted before it released the view restores it with an empty
    as_of and installs it nowhere. That view is hydrated: the checkers learn it from the shard
    on the disk (generated scenario, shrunk: hydration_matches_trace failed here)."""
    fixed = next(d for d in small().dataflows if d.name == "fixed_mv")
    scenario = dataclasses.replace(
        small(),
        name="sealed",
        replicas=1,
        tables=small().tables[:1],
        dataflows=(fixed,),
        duration_ms=500,
        faults=2,
        tick_ms=40,
        replica_step_ms=(10, 50),
        workload=WorkloadMix(append=33, peek=14, hydration=10, ms_between_actions=(10, 95)),
    )
    plan = FaultPlan(
        (
            Fault(0, FaultKind.RESTART_CONTROLLER, "", 10),
            Fault(85, FaultKind.RESTART_CONTROLLER, "", 10),
        )
    )
    r = run_simulation(RunOptions(seed=0, scenario=scenario, plan=plan))
    assert r.ok, _explain(r)
    assert any('"k":"replica_reconciled","rebuilt":0' in line for line in r.trace_tail)
    assert '"dropped":1' in "".join(r.trace_tail), "the restored view was not left out"


@pytest.mark.processes
def test_two_processes_produce_the_same_trace_digest_with_restarts() -> None:
    script = f"""
import dataclasses
from tidegate.sim import RunOptions, run_simulation, small
from tidegate.sim.faults import FaultPlan
plan = FaultPlan.loads({IN_DOUBT.dumps()!r})
scenario = dataclasses.replace(small(), duration_ms=5_000)
r = run_simulation(RunOptions(seed=2, scenario=scenario, plan=plan))
print(r.trace_digest, r.ok, r.sometimes["restart_controller"])
"""

    def digest() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
        )
        return done.stdout.strip()

    first, second = digest(), digest()
    assert first == second
    d, ok, restarts = first.split()
    assert len(d) == 64 and ok == "True" and restarts == "2"
