"""Clusters in the simulator: several compute instances, their replicas under faults, reads
sent to a named cluster, and the checks that know which cluster answered."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import pytest

from tidegate.sim import RunOptions, run_simulation
from tidegate.sim.faults import Action, Fault, FaultKind, FaultPlan
from tidegate.sim.history import finishing_to_json
from tidegate.sim.scenario import (
    DEFAULT_CLUSTER,
    SCENARIOS,
    ClusterSpec,
    Scenario,
    ScenarioError,
    clusters,
    small,
)
from tidegate.sim.sql_gen import symbol
from tidegate.spec.plan import Get, plan_to_dict
from tidegate.spec.protocol.types import RowSetFinishing


def _peek(at_ms: int, target: str, cluster: str) -> Action:
    return Action(
        at_ms,
        "peek_cluster",
        {
            "target": target,
            "at": {"mode": "fresh", "k": 0},
            "finishing": finishing_to_json(RowSetFinishing()),
            "cluster": cluster,
        },
    )


READS = (
    # an index of analytics read in default: refused (WrongCluster), as Materialize refuses it
    _peek(1_000, "per_customer", DEFAULT_CLUSTER),
    # an index of default read in analytics: refused too
    _peek(1_100, "orders", "analytics"),
    # an index read in its own cluster, a materialized view and a table in either: answered
    _peek(1_200, "per_customer", "analytics"),
    _peek(1_300, "event_totals_mv", DEFAULT_CLUSTER),
    _peek(1_400, "fixed_mv", "analytics"),
    _peek(1_500, "u1", "analytics"),
    _peek(1_600, "orders", DEFAULT_CLUSTER),
)
"""A fixed plan of reads in named clusters, without faults."""


def _reads_plan() -> FaultPlan:
    appends = tuple(
        Action(at, "append", {"batches": [["u1", [[["ann", at], 1]]]]}) for at in (500, 900)
    )
    return FaultPlan(faults=(), enabled=(), actions=appends + READS)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_clusters_scenario_holds_every_property(seed: int) -> None:
    result = run_simulation(RunOptions(seed=seed, scenario=clusters()))
    assert result.ok, (result.violation, result.trace_tail[-10:])
    assert result.sometimes["scenario_cluster_created"] == 1


def test_the_clusters_scenario_reaches_what_it_is_for() -> None:
    """Over a few seeds: reads answered on both clusters and judged by which one answered,
    refused across clusters, replicas added and dropped, clusters created and dropped (with
    CASCADE taking dataflows placed on them), indexes and views placed on clusters created
    during the run, the SQL clients in clusters (refused in a dropped one), and faults on
    analytics' replicas and on those of clusters created during the run."""
    reached: Counter[str] = Counter()
    targets: set[str] = set()
    for seed in (1, 2, 3, 7, 9):
        result = run_simulation(RunOptions(seed=seed, scenario=clusters()))
        assert result.ok, (seed, result.violation)
        reached.update(result.sometimes)
        targets |= {f.target for f in result.plan.faults}
    for name in (
        "peek_answered_in_cluster_default",
        "peek_answered_in_cluster_other",
        "peek_refused_wrong_cluster",
        "create_cluster_replica",
        "drop_cluster_replica",
        "create_cluster",
        "drop_cluster",
        "drop_cluster_cascaded",
        "cluster_dataflow_index",
        "cluster_dataflow_materialized_view",
        "sql_cluster_query",
        "sql_cluster_index",
        "sql_cluster_materialized_view",
        "sql_cluster_unknown_refused",
        "fault_on_created_cluster",
        "create_managed_cluster",
        "alter_cluster",
    ):
        assert reached[name] > 0, name
    assert reached["peek_answer_not_on_wire"] == 0
    assert any(t.startswith("analytics.") for t in targets)


def test_a_read_crossing_clusters_is_refused_and_the_others_answered() -> None:
    """Regression: an index is readable only on its own cluster (WrongCluster, typed); a
    materialized view and a table from any; each answer came from the cluster it was meant for."""
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=_reads_plan()))
    assert result.ok, result.violation
    peeks = [e for e in result.history.events if e["op"] == "peek"]
    assert len(peeks) == len(READS)
    crossing = [e for e in peeks if e.get("crossing")]
    assert [(e["name"], e["crossing"]) for e in crossing] == [
        ("per_customer", DEFAULT_CLUSTER),
        ("orders", "analytics"),
    ]
    for e in crossing:
        assert e["status"] == "fail" and str(e["error"]).startswith("WrongCluster"), e
    answered = [e for e in peeks if not e.get("crossing")]
    assert all(e["status"] == "ok" for e in answered), answered
    assert [e["cluster"] for e in answered] == [
        "analytics",
        DEFAULT_CLUSTER,
        "analytics",
        "analytics",
        DEFAULT_CLUSTER,
    ]
    assert result.sometimes["peek_answered_in_cluster_other"] == 3
    assert result.sometimes["peek_answered_in_cluster_default"] == 2


def test_a_read_sent_to_the_wrong_cluster_is_caught_by_who_answered() -> None:
    """The mutant runs a named cluster's reads of tables and views elsewhere: the answers are
    right, and only the check of which cluster answered (from the trace) sees it."""
    result = run_simulation(
        RunOptions(
            seed=1,
            scenario=clusters(),
            plan=_reads_plan(),
            mutant="peek_ignores_named_cluster",
        )
    )
    assert result.violation is not None
    assert result.violation.property == "peeks_answered_in_their_cluster", result.violation
    assert "event_totals_mv on cluster default" in result.violation.message


def test_a_cluster_created_while_running_answers_reads_until_it_is_dropped() -> None:
    plan = FaultPlan(
        faults=(),
        enabled=(),
        actions=(
            Action(500, "create_cluster", {"cluster": "c9"}),
            _peek(1_000, "fixed_mv", "c9"),
            _peek(1_100, "u1", "c9"),
            _peek(1_200, "per_customer", "c9"),  # an index of analytics: refused
            Action(1_500, "drop_cluster", {"cluster": "c9"}),
            _peek(2_000, "u1", "c9"),  # no such cluster any more
        ),
    )
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=plan))
    assert result.ok, result.violation
    ops = [e for e in result.history.events if e["op"] in ("create_cluster", "drop_cluster")]
    assert [(e["op"], e["status"]) for e in ops] == [
        ("create_cluster", "ok"),
        ("drop_cluster", "ok"),
    ]
    peeks = [e for e in result.history.events if e["op"] == "peek"]
    assert [e["status"] for e in peeks] == ["ok", "ok", "fail", "fail"]
    assert str(peeks[2]["error"]).startswith("WrongCluster")
    assert str(peeks[3]["error"]).startswith("UnknownCatalogObject")
    assert result.sometimes["peek_answered_in_cluster_other"] == 2


def _placed_plan(*, cascade: bool = True, faults: tuple[Fault, ...] = ()) -> FaultPlan:
    """A cluster created, an index and a materialized view placed on it, then dropped."""
    return FaultPlan(
        faults=faults,
        enabled=tuple(sorted({f.kind for f in faults}, key=lambda k: k.value)),
        actions=(
            Action(300, "append", {"batches": [["u1", [[["ann", 300], 1]]]]}),
            Action(500, "create_cluster", {"cluster": "c1"}),
            Action(1_000, "cluster_dataflow", {"dataflow": "per_customer", "cluster": "c1"}),
            Action(1_200, "cluster_dataflow", {"dataflow": "event_totals_mv", "cluster": "c1"}),
            Action(1_300, "append", {"batches": [["u1", [[["bob", 1_300], 1]]]]}),
            _peek(1_800, "event_totals_mv_c1", "analytics"),
            Action(2_000, "drop_cluster", {"cluster": "c1", "cascade": cascade}),
            _peek(2_500, "per_customer_c1", "c1"),  # forgotten by then: not even asked
        ),
    )


def test_dataflows_on_a_cluster_created_while_running_are_read_there_and_go_with_it() -> None:
    """An index and a materialized view placed on a cluster made during the run: read there
    (answers judged against the reference), the index refused from ``default``
    (WrongCluster), the view answered from any cluster; ``DROP CLUSTER ... CASCADE`` takes
    both, and the end's cleanup checks find nothing of them left."""
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=_placed_plan()))
    assert result.ok, result.violation
    events = result.history.events
    installs = {e["name"]: e for e in events if e["op"] == "install" and "cluster" in e}
    assert {n: (e["kind"], e["cluster"]) for n, e in installs.items()} == {
        "per_customer_c1": ("index", "c1"),
        "event_totals_mv_c1": ("materialized_view", "c1"),
    }
    assert all("plan" in e for e in installs.values())  # what the reference computes
    ids = {n: e["id"] for n, e in installs.items()}
    peeks = [
        (e["name"], e.get("crossing") or e["cluster"], e["status"])
        for e in events
        if e["op"] == "peek" and e["name"] in ids
    ]
    assert peeks == [
        ("per_customer_c1", "c1", "ok"),
        ("per_customer_c1", DEFAULT_CLUSTER, "fail"),
        ("event_totals_mv_c1", "c1", "ok"),
        ("event_totals_mv_c1", DEFAULT_CLUSTER, "ok"),
        ("event_totals_mv_c1", "analytics", "ok"),
    ]
    refused = next(e for e in events if e["op"] == "peek" and e.get("crossing"))
    assert str(refused["error"]).startswith("WrongCluster")
    (drop,) = [e for e in events if e["op"] == "drop_cluster"]
    assert drop["status"] == "ok" and sorted(drop["gone"]) == sorted(ids.values())
    assert result.sometimes["cluster_dataflow_index"] == 1
    assert result.sometimes["cluster_dataflow_materialized_view"] == 1
    assert result.sometimes["drop_cluster_cascaded"] == 1
    assert result.sometimes["peek_refused_wrong_cluster"] == 1


def test_a_cluster_that_maintains_dataflows_is_not_dropped_without_cascade() -> None:
    result = run_simulation(
        RunOptions(seed=1, scenario=clusters(), plan=_placed_plan(cascade=False))
    )
    assert result.ok, result.violation
    (drop,) = [e for e in result.history.events if e["op"] == "drop_cluster"]
    assert drop["status"] == "fail" and str(drop["error"]).startswith("ClusterNotEmpty"), drop
    assert result.sometimes["drop_cluster_refused_not_empty"] == 1
    # still there, so the last read of the index in its cluster is answered
    last = [e for e in result.history.events if e["op"] == "peek"][-1]
    assert (last["name"], last["status"]) == ("per_customer_c1", "ok")


def test_a_dropped_cluster_that_leaves_its_dataflows_behind_is_caught_by_the_cleanup() -> None:
    """The mutant's ``DROP CLUSTER ... CASCADE`` answers right but leaves the materialized view
    it placed there a storage collection: the end's cleanup check (shards on the simulated
    disk, the clients' own record of what they dropped) sees it."""
    result = run_simulation(
        RunOptions(
            seed=1,
            scenario=clusters(),
            plan=_placed_plan(),
            mutant="drop_cluster_keeps_dataflows",
        )
    )
    assert result.violation is not None
    assert result.violation.property == "drops_clean_up", result.violation
    mv = next(
        e["id"]
        for e in result.history.events
        if e.get("name") == "event_totals_mv_c1" and e["op"] == "install"
    )
    assert mv in result.violation.message


def test_faults_strike_the_replicas_of_clusters_created_while_running() -> None:
    plan = _placed_plan(
        faults=(
            Fault(1_100, FaultKind.CRASH_REPLICA, "c1.r1", 300),
            Fault(1_600, FaultKind.CUT_CONNECTION, "c1.r1", 200),
        )
    )
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=plan))
    assert result.ok, result.violation
    assert result.sometimes["fault_on_created_cluster"] == 2
    assert result.sometimes.get("fault_skipped", 0) == 0


def test_generated_plans_draw_faults_over_the_clusters_the_clients_create() -> None:
    from tidegate.sim.choices import stream
    from tidegate.sim.run import _plan_for

    targets = {
        f.target
        for seed in range(1, 11)
        for f in _plan_for(RunOptions(seed, clusters()), stream(seed, "plan")).faults
    }
    assert targets & {"c1.r1", "c2.r1", "c3.r1"}
    plain = {
        f.target
        for seed in range(1, 11)
        for f in _plan_for(RunOptions(seed, small()), stream(seed, "plan")).faults
    }
    assert not {t for t in plain if t.endswith(".r1")}  # (no clients' clusters there)


def test_a_hydration_answer_is_judged_on_the_replicas_of_the_index_cluster() -> None:
    """Regression (clusters seed 34): with its last replica replaced, analytics has none for a
    moment, and "is per_customer hydrated?" is answered yes, vacuously, as documented; the
    checker judged that answer by the default cluster's replicas, which never compute it."""
    plan = FaultPlan(
        faults=(Fault(2_000, FaultKind.REPLACE_REPLICA, "analytics.r1", 600),),
        enabled=(FaultKind.REPLACE_REPLICA,),
        actions=(
            Action(1_000, "drop_cluster_replica", {"cluster": "analytics", "name": "r2"}),
            Action(2_100, "hydration", {"target": "per_customer"}),
        ),
    )
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=plan))
    assert result.ok, result.violation
    asked = [e for e in result.history.events if e["op"] == "hydration" and e["invoke_ms"] == 2_100]
    assert [e["hydrated"] for e in asked] == [True]
    assert result.sometimes["replica_added"] == 1  # the replacement came afterwards


def _managed_plan() -> FaultPlan:
    """A managed cluster of 2 replicas, an index on it, its replication factor raised to 3 and
    lowered to 2 (a replica crashing meanwhile), a read there, then its drop."""
    return FaultPlan(
        faults=(Fault(2_600, FaultKind.CRASH_REPLICA, "c1.r2", 300),),
        enabled=(FaultKind.CRASH_REPLICA,),
        actions=(
            Action(300, "append", {"batches": [["u1", [[["ann", 300], 1]]]]}),
            Action(
                500, "create_managed_cluster", {"cluster": "c1", "replicas": 2, "size": "small"}
            ),
            Action(1_000, "cluster_dataflow", {"dataflow": "per_customer", "cluster": "c1"}),
            Action(1_500, "alter_cluster", {"cluster": "c1", "replicas": 3}),
            Action(2_000, "alter_cluster", {"cluster": "c1", "replicas": 2}),
            _peek(2_500, "per_customer_c1", "c1"),
            Action(3_000, "drop_cluster", {"cluster": "c1", "cascade": True}),
        ),
    )


def test_a_managed_cluster_runs_exactly_its_replication_factor_of_replicas() -> None:
    """``CREATE CLUSTER c1 (SIZE = 'small', REPLICATION FACTOR = 2)`` and ``ALTER CLUSTER c1
    SET (REPLICATION FACTOR = m)``: the environment's orchestrator is the world's stand-in, and
    once each is answered the world runs exactly ``c1.r1``..``c1.rM`` (its own record of
    processes); a replica's crash is restarted, reads on the cluster are answered there."""
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=_managed_plan()))
    assert result.ok, result.violation
    ops = [e for e in result.history.events if e["op"] in ("create_cluster", "alter_cluster")]
    assert [(e["op"], e["replicas"], e["status"]) for e in ops] == [
        ("create_cluster", 2, "ok"),
        ("alter_cluster", 3, "ok"),
        ("alter_cluster", 2, "ok"),
    ]
    assert result.sometimes["create_managed_cluster"] == 1
    assert result.sometimes["alter_cluster"] == 2
    assert result.sometimes["fault_on_created_cluster"] == 1
    last = [e for e in result.history.events if e["op"] == "peek"][-1]
    assert (last["name"], last["cluster"], last["status"]) == ("per_customer_c1", "c1", "ok")


def test_surplus_replicas_left_running_by_an_alter_are_caught_by_the_worlds_record() -> None:
    result = run_simulation(
        RunOptions(
            seed=1,
            scenario=clusters(),
            plan=_managed_plan(),
            mutant="alter_cluster_leaves_surplus_running",
        )
    )
    assert result.violation is not None
    assert result.violation.property == "managed_replicas_match", result.violation
    assert "c1.r3" in result.violation.message


def _sql_query_in(at_ms: int, cluster: str, session: int = 0) -> Action:
    table = clusters().tables[0]
    return Action(
        at_ms,
        "sql_cluster",
        {
            "sql": f"SELECT * FROM {table.id}",
            "params": [],
            "plan": plan_to_dict(Get(symbol(0), table.schema)),
            "finishing": finishing_to_json(RowSetFinishing()),
            "session": session,
            "mode": "script",
            "constructs": [],
            "cluster": cluster,
        },
    )


def _sql_index_in(at_ms: int, cluster: str, name: str, session: int = 0) -> Action:
    table = clusters().tables[0]
    column = table.schema.columns[0].name
    return Action(
        at_ms,
        "sql_cluster",
        {
            "ddl": "create_index",
            "name": name,
            "on": table.id,
            "sql": f"CREATE INDEX {name} IN CLUSTER {cluster} ON {table.id} ({column})",
            "session": session,
            "cluster": cluster,
        },
    )


def test_the_sql_clients_place_dataflows_in_clusters_and_read_in_them() -> None:
    """``CREATE INDEX ... IN CLUSTER c`` places it on ``c`` (judged by where the dataflow runs,
    from the clients' record); a query after ``SET cluster = c`` (over a session and over the
    wire) is answered and judged against the reference; once ``c`` is dropped (``CASCADE``,
    taking the index), the same query is refused ``unknown cluster`` (42704), as Materialize
    refuses it, and the session's other statements still run in ``default``."""
    plan = FaultPlan(
        faults=(),
        enabled=(),
        actions=(
            Action(300, "append", {"batches": [["u1", [[["ann", 300], 1]]]]}),
            Action(500, "create_cluster", {"cluster": "c1"}),
            _sql_index_in(800, "c1", "si900"),
            _sql_index_in(850, "analytics", "si901", session=1),
            _sql_query_in(1_000, "c1"),
            _sql_query_in(1_100, "c1", session=1),
            _sql_query_in(1_200, "analytics", session=1),
            Action(2_000, "drop_cluster", {"cluster": "c1", "cascade": True}),
            _sql_query_in(2_500, "c1"),
            _sql_query_in(2_600, DEFAULT_CLUSTER),
        ),
    )
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=plan))
    assert result.ok, result.violation
    events = result.history.events
    installs = {e["name"]: e.get("cluster") for e in events if e["op"] == "install"}
    assert installs["si900"] == "c1" and installs["si901"] == "analytics"
    reads = [(e.get("sql_cluster"), e["status"]) for e in events if e.get("sql_cluster")]
    assert reads == [
        ("c1", "ok"),
        ("c1", "ok"),
        ("analytics", "ok"),
        ("c1", "fail"),
        (DEFAULT_CLUSTER, "ok"),
    ]
    refused = [e for e in events if e.get("sql_cluster") and e["status"] == "fail"]
    assert str(refused[0]["error"]).startswith("42704"), refused
    (drop,) = [e for e in events if e["op"] == "drop_cluster"]
    si900 = next(e["id"] for e in events if e["op"] == "install" and e["name"] == "si900")
    assert si900 in drop["gone"]
    assert result.sometimes["sql_cluster_index"] == 2
    assert result.sometimes["sql_cluster_query"] == 4
    assert result.sometimes["sql_cluster_unknown_refused"] == 1


@pytest.mark.parametrize(
    ("mutant", "prop"),
    [
        ("sql_ignores_in_cluster", "dataflows_on_their_cluster"),
        ("sql_unknown_cluster_runs_in_default", "sql_cluster_refusals"),
    ],
)
def test_the_sql_clients_catch_a_cluster_clause_ignored(mutant: str, prop: str) -> None:
    plan = FaultPlan(
        faults=(),
        enabled=(),
        actions=(
            Action(500, "create_cluster", {"cluster": "c1"}),
            _sql_index_in(800, "c1", "si900"),
            Action(2_000, "drop_cluster", {"cluster": "c1", "cascade": True}),
            _sql_query_in(2_500, "c1"),
        ),
    )
    result = run_simulation(RunOptions(seed=1, scenario=clusters(), plan=plan, mutant=mutant))
    assert result.violation is not None
    assert result.violation.property == prop, result.violation


def test_a_clusters_run_is_deterministic() -> None:
    first = run_simulation(RunOptions(seed=2, scenario=clusters()))
    second = run_simulation(RunOptions(seed=2, scenario=clusters()))
    assert first.ok and second.ok
    assert first.trace_digest == second.trace_digest
    assert first.stats.events == second.stats.events


def test_scenarios_without_clusters_write_no_cluster_fields() -> None:
    """Files of scenarios without clusters stay as they were before clusters existed."""
    for name in sorted(SCENARIOS):
        if name == "clusters":
            continue
        data = SCENARIOS[name]().to_json()
        assert "clusters" not in data
        assert all("cluster" not in d for d in data["dataflows"])
        assert not {
            "peek_cluster",
            "create_cluster_replica",
            "drop_cluster_replica",
            "create_cluster",
            "drop_cluster",
            "cluster_dataflow",
            "sql_cluster",
            "create_managed_cluster",
            "alter_cluster",
        } & set(data["workload"])
    data = clusters().to_json()
    assert data["clusters"] == [{"name": "analytics", "replicas": 2}]
    assert {d["name"]: d.get("cluster") for d in data["dataflows"]}["per_customer"] == "analytics"


def _problems(data: Any) -> dict[str, str]:
    with pytest.raises(ScenarioError) as e:
        Scenario.from_json(data)
    return dict(e.value.problems)


def test_clusters_in_files_are_checked() -> None:
    base = clusters().to_json()
    undeclared = json.loads(json.dumps(base))
    undeclared["dataflows"][1]["cluster"] = "nowhere"
    assert _problems(undeclared) == {
        "(the file)": "dataflow 'per_customer': cluster 'nowhere' is not declared in clusters"
    }
    twice = json.loads(json.dumps(base))
    twice["clusters"].append({"name": "analytics"})
    assert _problems(twice) == {"(the file)": "cluster names must be unique; repeated: analytics"}
    bad = json.loads(json.dumps(base))
    bad["clusters"] = [{"name": "default", "replicas": 0}, {"name": "a.b"}]
    found = _problems(bad)
    assert set(found) == {"clusters.0.name", "clusters.0.replicas", "clusters.1.name"}
    assert found["clusters.0.replicas"].startswith("Input should be greater than or equal to 1")


def test_scenario_values_with_bad_clusters_are_refused() -> None:
    with pytest.raises(ScenarioError, match="not declared"):
        dataclasses.replace(
            small(), dataflows=(dataclasses.replace(small().dataflows[0], cluster="x"),)
        )
    with pytest.raises(ScenarioError, match="unique"):
        dataclasses.replace(small(), clusters=(ClusterSpec("a"), ClusterSpec("a")))
    with pytest.raises(ScenarioError, match=r"1\.\.5"):
        dataclasses.replace(small(), clusters=(ClusterSpec("a", 0),))
    assert clusters().cluster_replicas() == {
        "r1": DEFAULT_CLUSTER,
        "r2": DEFAULT_CLUSTER,
        "analytics.r1": "analytics",
        "analytics.r2": "analytics",
    }
