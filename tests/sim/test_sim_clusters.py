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
    refused across clusters, replicas added and dropped, clusters created and dropped, and
    faults on analytics' replicas."""
    reached: Counter[str] = Counter()
    targets: set[str] = set()
    for seed in (1, 2, 3, 7):
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
