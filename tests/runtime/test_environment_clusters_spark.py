"""A cluster whose size names a Spark master runs its dataflows on that Spark cluster.

Scale-out stays on Spark: a replica is one process whose parallelism is Spark's
(Materialize's multi-process replicas are deliberately not rebuilt). A size with
``spark_master="spark://..."`` starts the cluster's replicas as drivers of a
Spark standalone cluster (here a master and one worker on loopback), with the
size's cores (``spark.cores.max``) and executor memory; the index's answers are
the reference's, and the application ran on the worker (it has a work directory).
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from spark_cluster import LOOPBACK_ENV

from tidegate.dsl import Schema, col, count
from tidegate.runtime import Environment
from tidegate.runtime.sizes import ReplicaSize

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(600)]

T = Schema.of(("id", "int64", False), ("k", "string", False))


def test_a_size_naming_a_spark_master_runs_the_clusters_dataflows_there(
    standalone_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in LOOPBACK_ENV.items():
        monkeypatch.setenv(key, value)
    sizes = {
        "spread": ReplicaSize(cores=2, executor_memory="512m", spark_master=standalone_cluster)
    }

    async def main() -> None:
        with anyio.fail_after(540):
            data = tmp_path / "data"
            async with Environment.open(data, replicas={}, replica_sizes=sizes) as env:
                await env.create_cluster("big", replicas=1, size="spread")
                await env.wait_connected(timeout_s=300)
                (cluster,) = [c for c in env.clusters() if c.name == "big"]
                assert cluster.replicas[0].allocation is not None
                assert cluster.replicas[0].allocation["spark_master"] == standalone_cluster
                await env.create_table("t", T)
                rows = [(i, f"k{i % 3}") for i in range(30)]
                await env.append("t", rows)
                per_k = env.table("t").filter(col("id") >= 3).group_by("k").agg(count())
                idx = await env.create_index(per_k, ["k"], name="per_k", cluster="big")
                with anyio.fail_after(300):
                    while not env.hydrated(idx):
                        await anyio.sleep(0.5)
                got = sorted(await env.peek(idx))
                assert got == [(("k0", 9), 1), (("k1", 9), 1), (("k2", 9), 1)]

    anyio.run(main)
    work = tmp_path / "spark" / "work"
    assert [p.name for p in work.iterdir() if re.fullmatch(r"app-[\d-]+", p.name)]
