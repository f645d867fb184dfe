"""Clusters in the Environment: many compute instances, each with replicas of its own.

In-process replicas (the Python executor behind gRPC) stand for each cluster's
replicas; what is pinned is Materialize's behaviour: an index runs on, and is
readable from, its own cluster only; a materialized view is computed on its
cluster and readable from any (through storage); peeks and subscribes run on
the cluster asked for; a cluster maintaining objects is dropped only with
``CASCADE``; a managed cluster's replicas are not created or dropped by hand;
everything is restored by a restart.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema, col
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.errors import (
    ClusterNotEmpty,
    DuplicateCatalogName,
    InvalidCatalogOp,
    ManagedClusterChange,
    UnknownCatalogObject,
    WrongCluster,
)
from tidegate.runtime.options import ReplicaSpec

pytestmark = pytest.mark.timeout(180)

T = Schema.of(("id", "int64", False), ("v", "int64"))


def test_objects_run_on_their_cluster_and_are_read_where_materialize_reads_them(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        with (
            replica(tmp_path) as a,
            replica(tmp_path) as b,
            replica(tmp_path) as c,
            anyio.fail_after(120),
        ):
            async with Environment.open(tmp_path, replicas={"r1": a}, tick_ms=100) as env:
                await env.create_cluster("analytics", replicas={"r1": b, "r2": c})
                await env.wait_connected(timeout_s=60)
                assert {(r.instance, r.replica) for r in env.replicas()} == {
                    ("default", "r1"),
                    ("analytics", "analytics.r1"),
                    ("analytics", "analytics.r2"),
                }
                await env.create_table("t", T)
                t0 = await env.append("t", [(1, 10), (2, 20)])
                big = env.table("t").filter(col("v") > 15)
                idx = await env.create_index(big, ["id"], name="big", cluster="analytics")
                mv = await env.create_materialized_view("mv", "t", cluster="analytics")
                assert env.state.placement(idx) == env.state.placement(mv) == "analytics"
                assert await env.peek(idx) == [((2, 20), 1)]  # on its own cluster
                assert await env.peek(idx, cluster="analytics") == [((2, 20), 1)]
                with pytest.raises(WrongCluster):
                    await env.peek(idx, cluster="default")  # not readable elsewhere
                await env.wait_for(mv, t0, timeout_s=30)
                for where in ("default", "analytics"):  # through storage, from any cluster
                    assert sorted(await env.peek(mv, cluster=where)) == [
                        ((1, 10), 1),
                        ((2, 20), 1),
                    ]
                sub = await env.subscribe(env.table(idx))  # on the index's cluster
                batch = await sub.__anext__()
                assert [(r, d) for _t, r, d in batch.updates] == [((2, 20), 1)]
                await sub.aclose()
                with pytest.raises(WrongCluster):
                    await env.subscribe(env.table(idx), cluster="default")
                with pytest.raises(InvalidCatalogOp, match="readable only in its own cluster"):
                    await env.create_materialized_view("on_idx", idx)  # default: not its cluster
                with pytest.raises(ClusterNotEmpty):
                    await env.drop_cluster("analytics")
                info = {ci.name: ci for ci in env.clusters()}
                assert info["analytics"].objects == (idx, mv) and not info["analytics"].managed
                assert [r.name for r in info["analytics"].replicas] == ["r1", "r2"]
                hydrated = env.hydration(idx)
                assert {h.replica for h in hydrated} == {"analytics.r1", "analytics.r2"}
            # A restart restores the cluster, its replicas and what runs where.
            async with Environment.open(tmp_path, tick_ms=100) as env:
                await env.wait_connected(timeout_s=60)
                assert env.state.placement(idx) == "analytics"
                assert await env.peek(idx) == [((2, 20), 1)]
                t1 = await env.append("t", [(3, 30)])
                assert sorted(await env.peek("big", t1)) == [((2, 20), 1), ((3, 30), 1)]
                gone = await env.drop_cluster("analytics", cascade=True)
                assert sorted(gone, key=str) == sorted([idx, mv], key=str)
                assert [c.name for c in env.state.clusters] == ["default"]
                assert {r.replica for r in env.replicas()} == {"r1"}
                with pytest.raises(UnknownCatalogObject):
                    await env.peek("t", cluster="analytics")
                assert sorted(await env.peek("t")) == [((1, 10), 1), ((2, 20), 1), ((3, 30), 1)]

    anyio.run(main)


def test_managed_and_unmanaged_clusters_refuse_what_materialize_refuses(tmp_path: Path) -> None:
    async def main() -> None:
        with replica(tmp_path) as a, anyio.fail_after(60):
            async with Environment.open(
                tmp_path, replicas={"r1": a}, tick_ms=None, maintain_ms=None
            ) as env:
                # A managed cluster with no replicas starts no process.
                await env.create_cluster("paused", replicas=0, size="small")
                (paused,) = [c for c in env.clusters() if c.name == "paused"]
                assert (paused.managed, paused.size, paused.replication_factor) == (
                    True,
                    "small",
                    0,
                )
                with pytest.raises(ManagedClusterChange, match="cannot modify managed cluster"):
                    await env.create_cluster_replica("paused", "r9", address=a)
                with pytest.raises(ManagedClusterChange):
                    await env.drop_cluster_replica("paused", "r1")
                with pytest.raises(DuplicateCatalogName):
                    await env.create_cluster("paused", replicas=0)
                with pytest.raises(InvalidCatalogOp, match="unknown replica size"):
                    await env.create_cluster("huge", replicas=0, size="enormous")
                with pytest.raises(InvalidCatalogOp, match="names are"):
                    await env.create_cluster("with.dot", replicas=0)
                await env.create_cluster("hand", replicas=[])  # unmanaged, no replicas yet
                with pytest.raises(InvalidCatalogOp, match="unmanaged"):
                    await env.alter_cluster("hand", replication_factor=2)
                await env.create_cluster_replica("hand", "r1", address=a + "0")  # recorded
                with pytest.raises(DuplicateCatalogName):
                    await env.create_cluster_replica("hand", "r1", address=a)
                await env.drop_cluster_replica("hand", "r1")
                before = env.state
                with pytest.raises(UnknownCatalogObject):
                    await env.create_cluster_replica("nowhere", "r1", address=a)
                with pytest.raises(UnknownCatalogObject):
                    await env.create_index("t", cluster="nowhere")
                assert env.state == before
                await env.drop_cluster("paused")
                await env.drop_cluster("hand")
                assert [c.name for c in env.state.clusters] == ["default"]

    anyio.run(main)


def test_a_replica_spec_names_its_size(tmp_path: Path) -> None:
    """``ReplicaSpec(size=...)``: recorded with the replica, shown with what it allocates."""

    async def main() -> None:
        with replica(tmp_path) as a, anyio.fail_after(60):
            async with Environment.open(
                tmp_path, replicas={"r1": a}, tick_ms=None, maintain_ms=None
            ) as env:
                await env.create_cluster(
                    "sized", replicas=[ReplicaSpec("x", a + "1", size="large")]
                )
                (sized,) = [c for c in env.clusters() if c.name == "sized"]
                (x,) = sized.replicas
                assert (x.size, x.id, x.managed) == ("large", "sized.x", False)
                assert x.allocation is not None and x.allocation["cores"] == 4

    anyio.run(main)
