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


def test_a_retry_with_a_request_id_answers_the_original_time_and_never_duplicates() -> None:
    """Judged on the first seed of a range whose run has the case (an append that landed as
    its controller died at 1,900 ms, retried after the restart); every run before it must pass
    every check too. A pinned seed stops reaching the case whenever the interleaving moves."""
    for seed in range(1, 25):
        r = run_simulation(RunOptions(seed=seed, scenario=SCENARIO, plan=IN_DOUBT))
        assert r.ok, r.summary()
        appends = [e for e in r.history.ops("append") if e.get("request_id")]
        retries = [e for e in appends if e.get("retry")]
        assert r.sometimes.get("append_retried_with_request_id", 0) == len(retries)
        for e in retries:
            (first,) = [
                o for o in appends if o["request_id"] == e["request_id"] and not o.get("retry")
            ]
            assert first["status"] == "info"  # its controller died in the call
        # Its retry, made after the restart, answers the time it landed at, and its rows are
        # there once (the checker's idempotent_appends and no_phantom_writes hold, or r.ok
        # would not).
        if any(e["status"] == "ok" and e["time"] < 1_900 < e["invoke_ms"] for e in retries):
            return
    raise AssertionError("no seed in 1..24 retried an append that landed as its controller died")
