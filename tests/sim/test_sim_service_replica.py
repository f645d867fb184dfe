"""The real replica service in the simulation (``Scenario.replica == "service"``).

Seeds pass every checker, a seed gives the same trace twice, and replica
crashes (at any point, and in a rehydration) and cut connections fire and
are survived.
"""

from __future__ import annotations

import dataclasses

import pytest

from tidegate.sim import RunOptions, RunResult, Scenario, run_simulation, small
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.service_replica import ServiceReplica

SERVICE = dataclasses.replace(small(), replica="service")


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps(), *r.trace_tail[-40:], r.error or ""])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeds_pass_every_checker_with_the_real_replica_service(seed: int) -> None:
    r = run_simulation(RunOptions(seed=seed, scenario=SERVICE))
    assert r.ok, _explain(r)
    assert r.stats.peeks > 10 and r.stats.appends > 10


def test_the_same_seed_gives_the_same_trace() -> None:
    short = dataclasses.replace(SERVICE, duration_ms=4_000, quiet_ms=3_000)
    first = run_simulation(RunOptions(seed=4, scenario=short))
    second = run_simulation(RunOptions(seed=4, scenario=short))
    assert first.trace_digest == second.trace_digest
    assert first.stats.events == second.stats.events


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
    r = run_simulation(RunOptions(seed=5, scenario=SERVICE, plan=plan, keep_trace=True))
    assert r.ok, _explain(r)
    assert r.sometimes["crash_replica"] == 2 and r.sometimes["cut_connection"] == 2
    assert r.sometimes["crash_replica_rehydrating"] == 1
    assert r.trace_lines is not None
    starts = [line for line in r.trace_lines if '"k":"replica_start"' in line]
    assert len(starts) == 5, starts  # two first starts, three restarts


def test_the_world_hosts_service_replicas_only_when_asked() -> None:
    from tidegate.sim.replica import SimReplica
    from tidegate.sim.run import _streams
    from tidegate.sim.trace import Trace
    from tidegate.sim.world import World

    def replica(scenario: Scenario) -> type:
        _plan, streams, _sched = _streams(0, None)
        world = World(scenario, FaultPlan(), streams, Trace())
        return type(world._new_replica("r1"))

    assert replica(SERVICE) is ServiceReplica
    assert replica(small()) is SimReplica


def test_the_replica_kind_is_part_of_the_scenario_file() -> None:
    assert Scenario.from_json(SERVICE.to_json()).replica == "service"
    old = small().to_json()
    del old["replica"]
    assert Scenario.from_json(old).replica == "spec"
    with pytest.raises(ValueError, match="replica must be one of"):
        dataclasses.replace(small(), replica="spark")  # type: ignore[arg-type]
