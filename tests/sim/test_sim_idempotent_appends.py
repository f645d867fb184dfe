"""Appends with request ids in the simulator: a retry after an unknown outcome never duplicates.

Every other one-table append of the simulated clients carries a request id; an
append whose outcome is unknown (its controller died in the call) is retried
with the same id before the client's next append. The checker
(``idempotent_appends``) holds appends sharing an id to one effect at one time.
With storage slowed and the controller restarted (the plan of
``test_sim_controller_restart``), some seeds have an append that landed while its
controller died: the retry answers the time it landed at, before the restart.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tidegate.sim import RunOptions, run_simulation, small
from tidegate.sim.faults import Fault, FaultKind, FaultPlan

SCENARIO = dataclasses.replace(small(), duration_ms=5_000)
IN_DOUBT = FaultPlan(
    (
        Fault(1_500, FaultKind.DELAY_STORAGE_WRITE, "", 900, factor=30),
        Fault(1_900, FaultKind.RESTART_CONTROLLER, "", 300),
        Fault(3_000, FaultKind.DELAY_STORAGE_WRITE, "", 900, factor=30),
        Fault(3_400, FaultKind.RESTART_CONTROLLER, "", 200),
    ),
)


RESTARTS = tuple(f.at_ms for f in IN_DOUBT.faults if f.kind is FaultKind.RESTART_CONTROLLER)


def _landed_before_a_restart(e: dict[str, Any]) -> bool:
    """A retry that answers a time before a restart it was made after: its first try landed."""
    return e["status"] == "ok" and any(e["time"] < t < e["invoke_ms"] for t in RESTARTS)


def test_a_retry_with_a_request_id_answers_the_original_time_and_never_duplicates() -> None:
    """Which seeds have an append land while its controller dies moves with the runs' timings
    (seed 6 was pinned first): the first of seeds 1-12 that has one is judged, and every seed
    run on the way must pass."""
    for seed in range(1, 13):
        r = run_simulation(RunOptions(seed=seed, scenario=SCENARIO, plan=IN_DOUBT))
        assert r.ok, r.summary()
        appends = [e for e in r.history.ops("append") if e.get("request_id")]
        retries = [e for e in appends if e.get("retry")]
        # One landed before its controller died: its retry, made after the restart, answers
        # that time, and its rows are there once (the checker's idempotent_appends and
        # no_phantom_writes hold, or r.ok would not).
        if any(_landed_before_a_restart(e) for e in retries):
            break
    else:
        raise AssertionError("no seed in 1-12 had an append land while its controller died")
    assert r.sometimes["append_retried_with_request_id"] == len(retries) >= 1
    for e in retries:
        (first,) = [o for o in appends if o["request_id"] == e["request_id"] and not o.get("retry")]
        assert first["status"] == "info"  # its controller died in the call
