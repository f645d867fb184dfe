"""Bugs found by the checks that share no code with what they judge, each pinned by its seed and
shrunk plan (see docs/simulator.md, "What is checked")."""

from __future__ import annotations

from typing import Any

from tidegate.sim import FaultPlan, RunOptions, run_simulation
from tidegate.sim.scenario import Scenario

_ORDERS = {
    "columns": [
        {"name": "customer", "type": "string", "nullable": False},
        {"name": "amount", "type": "int64", "nullable": True},
    ]
}
_EVENTS = {
    "columns": [
        {"name": "kind", "type": "string", "nullable": False},
        {"name": "n", "type": "int64", "nullable": True},
    ]
}
_TABLES = [{"id": "u1", "schema": _ORDERS}, {"id": "u3", "schema": _EVENTS}]
_FIXED_MV = {
    "name": "fixed_mv",
    "kind": "materialized_view",
    "plan": {
        "op": "constant",
        "schema": {
            "columns": [
                {"name": "n", "type": "int64", "nullable": False},
                {"name": "word", "type": "string", "nullable": True},
            ]
        },
        "rows": [[[1, "one"], 1], [[2, None], 2]],
    },
    "key": [],
}


def _scenario(name: str, dataflows: list[dict[str, Any]], **fields: Any) -> Scenario:
    return Scenario.from_json(
        {"name": name, "replicas": 1, "tables": _TABLES, "dataflows": dataflows, **fields}
    )


def test_a_restored_index_without_a_policy_keeps_the_default_policys_history() -> None:
    """Churn seed 5 (``restore_keeps_promised_history``): an index whose client never got to set
    its policy (the controller died first) compacts by the default one, a second of history.
    Restored, its as-of was chosen without any policy, at its inputs' upper (since 1020 at
    upper 1021; created at 211): a restart lost the history the default policy kept. Shrunk:
    the index dropped and created again around two controller deaths, in 4 steps."""
    orders = {
        "name": "orders",
        "kind": "index",
        "plan": {"op": "get", "id": "u1", "schema": _ORDERS},
    }
    sc = _scenario(
        "churn",
        [{**orders, "key": [0]}],
        duration_ms=900,
        faults=8,
        fault_kinds=["crash_controller_in"],
        quiet_ms=6_000,  # the shrunk run ended at the violation; the fixed one must settle
    )
    plan = FaultPlan.from_json(
        {
            "version": 2,
            "enabled": ["crash_controller_in"],
            "faults": [
                {
                    "at_ms": 255,
                    "kind": "crash_controller_in",
                    "target": "catalog",
                    "duration_ms": 11,
                },
                {"at_ms": 761, "kind": "crash_controller_in", "target": "cas", "duration_ms": 13},
            ],
            "actions": [
                {"at_ms": 230, "kind": "drop_dataflow", "args": {"dataflow": "orders"}},
                {"at_ms": 257, "kind": "create_dataflow", "args": {"dataflow": "orders"}},
            ],
        }
    )
    result = run_simulation(RunOptions(seed=5, scenario=sc, plan=plan))
    assert result.ok, result.summary()
    assert result.stats.controller_restarts >= 1


def test_a_fresh_copy_to_of_a_constant_comes_after_acknowledged_writes() -> None:
    """Small seed 4 (``strict_serializable``, by the copy-to check): a fresh copy-to of a
    materialized view without inputs wrote its contents at the view's since (2290), before an
    append acknowledged before it began (4839): a fresh read of an object without durable
    inputs took its own since, not the oracle's read timestamp. Shrunk to 2 actions."""
    per_customer = {
        "name": "per_customer",
        "kind": "index",
        "plan": {
            "op": "reduce",
            "input": {"op": "get", "id": "u1", "schema": _ORDERS},
            "group_key": [0],
            "aggregates": [{"func": "count", "column": None, "distinct": False}],
        },
        "key": [0],
    }
    sc = _scenario("small", [per_customer, _FIXED_MV], duration_ms=5100, faults=3, quiet_ms=6_000)
    plan = FaultPlan.from_json(
        {
            "version": 2,
            "enabled": ["crash_replica"],
            "faults": [],
            "actions": [
                {
                    "at_ms": 3648,
                    "kind": "append_peek",
                    "args": {
                        "batches": [["u1", [[["ann", 1], 1], [["eve", 0], 1], [["eve", None], 1]]]],
                        "target": "per_customer",
                        "finishing": {"order_by": [], "limit": None, "offset": 0, "project": None},
                    },
                },
                {
                    "at_ms": 4955,
                    "kind": "copy_to",
                    "args": {"target": "fixed_mv", "at": {"mode": "fresh", "k": 328}},
                },
            ],
        }
    )
    result = run_simulation(RunOptions(seed=4, scenario=sc, plan=plan))
    assert result.ok, result.summary()
    (copy,) = [e for e in result.history.events if e["op"] == "copy_to"]
    (append,) = [e for e in result.history.events if e["op"] == "append"]
    assert copy["status"] == "ok" and copy["time"] >= append["time"]


def test_a_materialized_view_without_inputs_stays_readable() -> None:
    """Small seed 3 (``valid_reads_answered``, reads of objects nobody dropped): a copy-to of
    the constant view ``fixed_mv`` 200 ms into the run failed with ``CollectionMissing``. Once
    complete, the view's write-only dataflow released its since, and a fresh read of an object
    without durable inputs took its time from that dataflow (``CREATE MATERIALIZED
    VIEW k AS SELECT 1``). Shrunk to one action."""
    sc = _scenario("small", [_FIXED_MV], duration_ms=300, faults=3, quiet_ms=6_000)
    plan = FaultPlan.from_json(
        {
            "version": 2,
            "enabled": ["crash_replica"],
            "faults": [],
            "actions": [
                {
                    "at_ms": 207,
                    "kind": "copy_to",
                    "args": {"target": "fixed_mv", "at": {"mode": "fresh", "k": 942}},
                }
            ],
        }
    )
    result = run_simulation(RunOptions(seed=3, scenario=sc, plan=plan))
    assert result.ok, result.summary()
    (copy,) = [e for e in result.history.events if e["op"] == "copy_to"]
    assert copy["status"] == "ok" and copy["rows_written"] == 3


def test_after_an_upgrade_the_shard_of_a_half_dropped_view_is_finalized() -> None:
    """Small seed 4 with ``upgrade`` (``drops_clean_up``, the quiescence check that no shard of a
    dropped object survives): the writer died in the catalog write of a view's drop, which
    landed; the next controller opened read-only, where reconciliation drops nothing, and
    never reconciled once promoted, so the view's shard outlived every controller. Shrunk to
    the crash point and the drop."""
    events = {
        "name": "event_totals_mv",
        "kind": "materialized_view",
        "plan": {
            "op": "reduce",
            "input": {"op": "get", "id": "u3", "schema": _EVENTS},
            "group_key": [0],
            "aggregates": [{"func": "count", "column": 1, "distinct": False}],
        },
        "key": [],
    }
    sc = _scenario("small", [events], duration_ms=5_000, faults=4, quiet_ms=6_000, upgrade=True)
    plan = FaultPlan.from_json(
        {
            "version": 2,
            "enabled": ["crash_controller_in"],
            "faults": [
                {
                    "at_ms": 3322,
                    "kind": "crash_controller_in",
                    "target": "catalog",
                    "duration_ms": 18,
                }
            ],
            "actions": [
                {"at_ms": 3955, "kind": "drop_dataflow", "args": {"dataflow": "event_totals_mv"}}
            ],
        }
    )
    result = run_simulation(RunOptions(seed=4, scenario=sc, plan=plan))
    assert result.ok, result.summary()
    (drop,) = [e for e in result.history.events if e["op"] == "drop"]
    assert drop["status"] == "info"  # the controller died inside it


def test_a_copy_to_of_a_view_a_cascade_drops_ends() -> None:
    """Found on sources seed 9 (``operations_complete``, once copy-to became a client action): a
    fresh copy-to of the materialized view ``src_event_totals`` waited for the source it reads;
    a cascading drop of that source took the view, and the copy-to waited for ever. It now ends
    with ``CopyToFailed`` naming the drop. The seed's whole run no longer meets the race since
    the network carries frames, so the race is pinned as two actions of a plan: the drop a few ms
    after the copy-to starts (tests/runtime/test_environment.py has the minimal case)."""
    from tidegate.sim.scenario import sources

    def plan(gap_ms: int) -> FaultPlan:
        return FaultPlan.from_json(
            {
                "version": 2,
                "enabled": [],
                "faults": [],
                "actions": [
                    {
                        "at_ms": 1500,
                        "kind": "copy_to",
                        "args": {"target": "src_event_totals", "at": {"mode": "fresh", "k": 0}},
                    },
                    {
                        "at_ms": 1500 + gap_ms,
                        "kind": "drop_source",
                        "args": {"source": "u8", "cascade": True},
                    },
                ],
            }
        )

    # How long the copy-to waits moves with the scenario's timings (its sinks' pacing, the
    # messages): the first gap whose drop meets the running copy-to is judged, every run
    # before it must pass.
    for gap_ms in range(10, 80, 5):
        result = run_simulation(RunOptions(seed=9, scenario=sources(), plan=plan(gap_ms)))
        assert result.ok, result.summary()
        (copy_to,) = [e for e in result.history.events if e["op"] == "copy_to"]
        if "was dropped while the copy-to ran" in str(copy_to.get("error")):
            break
    else:
        raise AssertionError("no drop met a running copy-to")
