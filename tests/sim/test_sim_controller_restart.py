"""The "restart the controller" fault: the controller dies, a new one is rebuilt from durable state.

A restart discards the spec ``Controller`` and its driver; pending peeks and
subscribes fail with "controller restarted"; unacknowledged appends are in
doubt until the storage decides them; after the fault's duration a new
controller comes back from the catalog, the shards' frontiers and the
oracle, and every checker still holds. See ``sim/world.py`` and
``Clients.restore``.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

from tidegate.sim import RunOptions, RunResult, check_history, run_simulation, small
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.history import ClientHistory
from tidegate.sim.world import SUPPORTED_FAULTS
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import RowSetFinishing

RESTART_MID_STREAM = FaultPlan(
    (Fault(2_500, FaultKind.RESTART_CONTROLLER, "", 400),), (FaultKind.RESTART_CONTROLLER,)
)
"""One restart in the middle of the run, while clients append, peek and subscribe."""

IN_DOUBT = FaultPlan(
    (
        Fault(1_500, FaultKind.DELAY_STORAGE_WRITE, "", 900),
        Fault(1_900, FaultKind.RESTART_CONTROLLER, "", 300),
        Fault(3_000, FaultKind.DELAY_STORAGE_WRITE, "", 900),
        Fault(3_400, FaultKind.RESTART_CONTROLLER, "", 200),
        Fault(3_500, FaultKind.CRASH_REPLICA, "r1", 300),
    ),
    (FaultKind.RESTART_CONTROLLER, FaultKind.DELAY_STORAGE_WRITE, FaultKind.CRASH_REPLICA),
)
"""Restarts while storage writes are slow, so that appends are in flight when the controller dies."""


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps(), *r.trace_tail[-30:], r.error or ""])


def _ops(r: RunResult, op: str) -> list[dict[str, Any]]:
    return [e for e in r.history.events if e["op"] == op]


def test_a_restart_mid_stream_passes_every_checker() -> None:
    scenario = dataclasses.replace(small(), duration_ms=5_000, quiet_ms=3_000)
    r = run_simulation(RunOptions(seed=1, scenario=scenario, plan=RESTART_MID_STREAM))
    assert r.ok, _explain(r)
    assert r.sometimes["restart_controller"] == 1
    assert check_history(r.history, scenario) == []
    (restart,) = _ops(r, "restart")
    assert restart["generation"] == 2 and restart["at_ms"] == 2_900
    # Subscribes running at the restart ended with the failure, gap-free, and new ones started.
    ended = [e for e in _ops(r, "subscribe") if e["error"] == "controller restarted"]
    assert ended and all(e["upper"] == [] and e["at_ms"] == 2_500 for e in ended)
    again = {
        e["id"] for e in _ops(r, "install") if e["kind"] == "subscribe" and e["at_ms"] == 2_900
    }
    assert again and not again & {e["id"] for e in ended}
    assert any(e["id"] in again and e["updates"] for e in _ops(r, "subscribe"))
    # Clients went on: peeks issued after the restart were answered with rows.
    later = [e for e in _ops(r, "peek") if e["at_ms"] > 2_900 and "rows" in e.get("result", {})]
    assert len(later) > 5
    acked_after = [e for e in _ops(r, "append") if e["status"] == "ok" and e["at_ms"] > 2_900]
    assert acked_after


def test_in_flight_appends_land_or_not_and_pending_peeks_are_aborted_once() -> None:
    scenario = dataclasses.replace(small(), duration_ms=5_000, quiet_ms=3_000)
    results = [
        run_simulation(RunOptions(seed=s, scenario=scenario, plan=IN_DOUBT)) for s in (1, 2, 3)
    ]
    statuses: set[str] = set()
    aborted = 0
    for r in results:
        assert r.ok, _explain(r)
        assert r.sometimes["restart_controller"] == 2
        statuses |= {e["status"] for e in _ops(r, "append")}
        for e in _ops(r, "peek"):
            if e.get("result", {}).get("aborted") is not None:
                aborted += 1
                assert "extra_results" not in e
    # The storage decided both ways, and nothing stayed undecided.
    assert {"landed", "lost"} <= statuses and "in_doubt" not in statuses
    assert aborted > 0


def test_two_processes_produce_the_same_trace_digest_with_a_restart() -> None:
    script = f"""
import dataclasses
from tidegate.sim import RunOptions, run_simulation, small
from tidegate.sim.faults import FaultPlan
plan = FaultPlan.loads({IN_DOUBT.dumps()!r})
scenario = dataclasses.replace(small(), duration_ms=5_000, quiet_ms=2_000)
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


def test_swarm_plans_may_enable_restarts_and_a_seed_that_does_passes() -> None:
    assert FaultKind.RESTART_CONTROLLER in SUPPORTED_FAULTS
    r = run_simulation(RunOptions(seed=1, scenario=small()))
    assert FaultKind.RESTART_CONTROLLER in r.plan.enabled
    assert r.sometimes.get("restart_controller", 0) >= 1
    assert r.ok, _explain(r)


def test_a_restart_fault_round_trips_as_json() -> None:
    assert FaultPlan.loads(IN_DOUBT.dumps()) == IN_DOUBT
    assert '"restart_controller"' in IN_DOUBT.dumps()


# -- the offline history checker's view of a restart ------------------------------------------


def _history_with_one_peek(*results: str) -> tuple[ClientHistory, Any]:
    scenario = small()
    t = GlobalId.parse(scenario.tables[0].id)
    h = ClientHistory()
    h.append_issued(1, t, 5, [(("ann", 3), 1)], at_ms=5)
    h.append_in_doubt(1, 1, at_ms=6)
    h.peek_issued("p", t, 5, "persist", RowSetFinishing(), at_ms=7)
    for res in results:
        if res == "aborted":
            h.peek_aborted("p", "controller restarted", at_ms=8)
        else:
            h.peek_result("p", PeekRows(((("ann", 3), 1),)), at_ms=9)
    return h, scenario


def test_an_aborted_peek_counts_as_answered_exactly_once() -> None:
    h, scenario = _history_with_one_peek("aborted")
    h.append_resolved(1, 1, landed=True, at_ms=10)
    assert check_history(h, scenario) == []
    h, scenario = _history_with_one_peek("aborted", "rows")
    assert [v.property for v in check_history(h, scenario)] == ["one_result_per_peek"]


def test_an_in_doubt_append_counts_as_the_storage_decided() -> None:
    h, scenario = _history_with_one_peek("rows")
    h.append_resolved(1, 1, landed=True, at_ms=10)
    assert check_history(h, scenario) == []  # it landed: the answer that includes it is right
    h, scenario = _history_with_one_peek("rows")
    h.append_resolved(1, 1, landed=False, at_ms=10)
    assert [v.property for v in check_history(h, scenario)] == ["peek_matches_reference"]


def test_a_subscribe_ended_by_a_restart_is_gap_free_and_closed() -> None:
    scenario = small()
    sub = next(d for d in scenario.dataflows if d.kind == "subscribe")
    h = ClientHistory()
    gid = GlobalId.transient(2)
    h.installed(gid, sub.name, "subscribe", 0, at_ms=0)
    h.subscribe_batch(gid, Antichain([0]), Antichain([10]), [], None, at_ms=10)
    h.subscribe_batch(gid, Antichain([10]), Antichain.empty(), [], "controller restarted", 11)
    assert check_history(h, scenario) == []
    h.subscribe_batch(gid, Antichain([10]), Antichain([20]), [], None, at_ms=12)
    assert [v.property for v in check_history(h, scenario)] == ["subscribe_gap_free"]
