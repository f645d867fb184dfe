"""The simulated compute replica process (``sim/replica.py``): the real replica service.

Every run's replicas are ``tidegate.replica.service.ReplicaService`` on virtual time;
replica crashes (at any point, and in a rehydration) and cut connections fire and are
survived. (Seeds passing every checker, and the same seed giving the same trace, are
``test_sim_runs.py``'s and ``test_sim_determinism.py``'s.)
"""

from __future__ import annotations

import dataclasses

from tidegate.replica.service import ReplicaService
from tidegate.sim import RunOptions, RunResult, Scenario, run_simulation, small
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.sql_clients import SQL_ACTIONS


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps(), *r.trace_tail[-40:], r.error or ""])


def test_replica_crashes_and_cut_connections_are_survived() -> None:
    plan = FaultPlan(
        (
            Fault(1_500, FaultKind.CRASH_REPLICA, "r1", 400),
            Fault(2_500, FaultKind.CUT_CONNECTION, "r2", 200),
            Fault(4_000, FaultKind.CRASH_REPLICA, "r2", 300),
            Fault(5_000, FaultKind.CRASH_REPLICA_REHYDRATING, "r1", 300),
            Fault(5_100, FaultKind.CUT_CONNECTION, "r1", 100),
        ),
        (
            FaultKind.CRASH_REPLICA,
            FaultKind.CUT_CONNECTION,
            FaultKind.CRASH_REPLICA_REHYDRATING,
        ),
    )
    # Without the SQL clients: which of these faults meets its replica up depends on the
    # interleaving, which the SQL generator's draws would move whenever it learns a construct.
    base = small()
    quiet = dict.fromkeys(SQL_ACTIONS, 0)
    scenario = dataclasses.replace(base, workload=dataclasses.replace(base.workload, **quiet))
    r = run_simulation(RunOptions(seed=5, scenario=scenario, plan=plan, keep_trace=True))
    assert r.ok, _explain(r)
    assert r.sometimes["crash_replica"] == 2 and r.sometimes["cut_connection"] == 2
    assert r.sometimes["crash_replica_rehydrating"] == 1
    assert r.trace_lines is not None
    starts = [line for line in r.trace_lines if '"k":"replica_start"' in line]
    assert len(starts) == 5, starts  # two first starts, three restarts


def test_the_world_hosts_the_real_replica_service() -> None:
    from tidegate.sim.run import _streams
    from tidegate.sim.trace import Trace
    from tidegate.sim.world import World

    _plan, streams, _sched = _streams(0, None)
    world = World(small(), FaultPlan(), streams, Trace())
    replica = world._new_replica("r1")
    assert type(replica.state) is ReplicaService
    assert replica.state.store is not None and replica.alive


def test_older_scenario_files_naming_a_replica_kind_still_load() -> None:
    """Versions that also drove the replica core with a simulator-only driver wrote which
    ran (``"replica": "spec"`` by default); the key is accepted and no longer written."""
    current = small().to_json()
    assert "replica" not in current
    for kind in ("spec", "service"):
        assert Scenario.from_json({**current, "replica": kind}) == small()
