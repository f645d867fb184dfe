"""Managed clusters under real processes: sizes, replication factors, restarts and isolation.

Each managed replica is a process of its own (``tidegate replica``, Python
executor), named ``cluster.replica`` by the orchestrator and started with its
size's allocation. Pinned: a dataflow that exhausts one cluster's replica
memory fails there (its peeks answer the memory-limit error) while another
cluster maintaining the same data answers every row and never notices;
``ALTER CLUSTER ... SET (REPLICATION FACTOR = n)`` starts and stops replicas;
a restart runs every cluster's replicas again.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import PeekFailed
from tidegate.runtime.sizes import ReplicaSize
from tidegate.runtime.transport import Unauthenticated
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.spec.compute_replica import MEMORY_LIMIT_EXCEEDED

pytestmark = [pytest.mark.processes, pytest.mark.timeout(420)]

ROWS = Schema.of(("id", "int64", False), ("label", "string", False))


def _rss(data_dir: Path, name: str) -> int:
    pid = int((data_dir / "replicas" / f"{name}.pid").read_text())
    return int(psutil.Process(pid).memory_info().rss)


def test_a_cluster_that_runs_out_of_memory_fails_alone(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(360):
            async with Environment.open(tmp_path / "probe", replicas=1, executor="python") as env:
                await env.wait_connected(timeout_s=60)
                idle = _rss(tmp_path / "probe", "r1")
            sizes = {"tiny": ReplicaSize(memory_limit=idle + 120 * 2**20), "roomy": ReplicaSize()}
            data = tmp_path / "data"
            async with Environment.open(
                data, replicas=1, executor="python", replica_sizes=sizes
            ) as env:
                await env.create_cluster("tiny", replicas=1, size="tiny")
                await env.execute("CREATE CLUSTER roomy (SIZE = 'roomy', REPLICATION FACTOR = 1)")
                await env.wait_connected(timeout_s=90)
                assert sorted(r.replica for r in env.replicas()) == ["r1", "roomy.r1", "tiny.r1"]
                status = env.orchestrator.status()
                assert status["tiny.r1"].state == "running" and status["roomy.r1"].state
                await env.create_table("big", ROWS)
                small = await env.create_index("big", ["id"], name="on_default")
                doomed = await env.create_index("big", ["id"], name="on_tiny", cluster="tiny")
                spared = await env.create_index("big", ["id"], name="on_roomy", cluster="roomy")
                failed = None
                appended = 0
                for batch in range(60):  # about 600 bytes of state per row
                    rows = [(batch * 20_000 + i, f"label-{i:08d}" * 4) for i in range(20_000)]
                    await env.append("big", rows)
                    appended += len(rows)
                    try:
                        await env.peek(doomed, key=(batch * 20_000,))
                    except PeekFailed as e:
                        failed = e
                        break
                assert failed is not None, "the tiny cluster's index never hit its limit"
                assert MEMORY_LIMIT_EXCEEDED in str(failed)
                # The other clusters never noticed: every row, replicas connected.
                assert len(await env.peek(spared)) == appended
                assert await env.peek(spared, key=(0,)) == [((0, "label-00000000" * 4), 1)]
                assert len(await env.peek(small, key=(1,))) == 1
                assert {r.replica: r.status for r in env.replicas()} == {
                    "r1": "connected",
                    "roomy.r1": "connected",
                    "tiny.r1": "connected",
                }
                log = (data / "replicas" / "tiny.r1.log").read_text()
                assert "memory_limit_exceeded" in log
                assert (
                    "memory_limit_exceeded" not in (data / "replicas" / "roomy.r1.log").read_text()
                )
                # A replication factor of 2 starts roomy.r2, which hydrates what roomy runs.
                await env.execute("ALTER CLUSTER roomy SET (REPLICATION FACTOR = 2)")
                await env.wait_connected(["roomy.r2"], timeout_s=90)
                with anyio.fail_after(120):
                    while not env.hydrated(spared, replicas=["roomy.r2"]):
                        await anyio.sleep(0.2)
                await env.drop(doomed)
                await env.drop_cluster("tiny")
                assert "tiny.r1" not in {
                    n for n, p in env.orchestrator.status().items() if p.state == "running"
                }
            # A restart runs the clusters' replicas again.
            async with Environment.open(data, executor="python", replica_sizes=sizes) as env:
                await env.wait_connected(timeout_s=90)
                assert sorted(r.replica for r in env.replicas()) == ["r1", "roomy.r1", "roomy.r2"]
                assert len(await env.peek(spared)) == appended
                shown = await env.execute("SHOW CLUSTER REPLICAS")
                assert [(r[0], r[1], r[2]) for r in shown.rows] == [
                    ("default", "r1", None),
                    ("roomy", "r1", "roomy"),
                    ("roomy", "r2", "roomy"),
                ]

    anyio.run(main)


def test_an_environment_opened_without_managed_replicas_starts_them_for_a_cluster(
    tmp_path: Path,
) -> None:
    """No orchestrator at opening (``replicas={}``): the first managed cluster starts one, in
    the data directory, and the controller reaches its replica there, authenticated with the
    environment's token (as an orchestrator built at opening)."""

    async def main() -> None:
        with anyio.fail_after(180):
            data = tmp_path / "data"
            async with Environment.open(data, replicas={}, executor="python") as env:
                assert env.orchestrator is None
                await env.create_cluster("c", replicas=1)
                await env.wait_connected(timeout_s=90)
                assert [r.replica for r in env.replicas()] == ["c.r1"]
                assert (data / "replicas" / "c.r1.pid").exists()
                # Authenticated although started after opening: the replica refuses a client
                # without the environment's token, and the controller's stream goes on.
                port = int((data / "replicas" / "c.r1.port").read_text())
                for token in (None, "guessed"):
                    with pytest.raises(Unauthenticated):
                        async with GrpcTransport(token=token) as transport:
                            stream = await transport.connect(f"127.0.0.1:{port}")
                            await stream.aclose()
                await env.create_table("t", ROWS)
                await env.append("t", [(1, "a"), (2, "b")])
                idx = await env.create_index("t", ["id"], name="t_idx", cluster="c")
                assert sorted(await env.peek(idx)) == [((1, "a"), 1), ((2, "b"), 1)]
            # Reopened, the catalog's managed replica is started with the environment.
            async with Environment.open(data, replicas={}, executor="python") as env:
                await env.wait_connected(timeout_s=90)
                assert [r.replica for r in env.replicas()] == ["c.r1"]
                assert sorted(await env.peek("t_idx")) == [((1, "a"), 1), ((2, "b"), 1)]

    anyio.run(main)
