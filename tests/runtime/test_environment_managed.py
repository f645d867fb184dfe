"""The environment with managed replicas: real replica processes (python executor) under the orchestrator.

Two replicas run as child processes; one is SIGKILLed while clients keep
peeking: the other answers, the orchestrator restarts the killed one and the
driver reconnects to it and replays the history (epoch + 1). With ``replica_metrics`` each
managed replica, the storage replica too, serves its Prometheus metrics where ``status`` says.
"""

from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.overview import replicas_json
from tidegate.commands.render import status_table
from tidegate.commands.service import ControlService
from tidegate.dsl import Schema, col
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.spec.storage import LoadGenerator

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_managed_replicas_survive_a_sigkill(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas=2, executor="python", tick_ms=50) as env:
                assert env.orchestrator is not None
                await env.wait_connected(timeout_s=60)  # open returns once the processes run
                await env.create_table("t", Schema.of(("x", "int64", False)))
                idx = await env.create_index(env.table("t").filter(col("x") > 1), ["x"])
                events = env.events()
                await env.append("t", [(1,), (2,)])
                assert await env.peek(idx) == [((2,), 1)]
                await env.orchestrator.kill("r1")
                # Service continues on r2 while r1 is down and rehydrating.
                ts = await env.append("t", [(3,)])
                assert sorted(await env.peek(idx, ts)) == [((2,), 1), ((3,), 1)]
                seen = []
                async for e in events:
                    seen.append((e.replica, e.status, e.epoch))
                    if (e.replica, e.status, e.epoch) == ("r1", "connected", 2):
                        break
                assert ("r1", "failed", 1) in seen and ("r1", "rehydrating", 2) in seen
                statuses = {r.replica: (r.status, r.epoch) for r in env.replicas()}
                assert statuses == {"r1": ("connected", 2), "r2": ("connected", 1)}
                assert env.orchestrator.status()["r1"].restarts == 1
                ts = await env.append("t", [(4,)])
                assert sorted(await env.peek(idx, ts)) == [((2,), 1), ((3,), 1), ((4,), 1)]

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_read_after_an_acknowledged_append_sees_it_through_a_join(
    tmp_path: Path, backend: str
) -> None:
    """Regression: with tables ``a`` and ``b`` and an index on ``a.join(b)``, a peek
    that started after ``append("a")`` returned missed the append (5 of 5 tries) and a peek at
    its timestamp failed with ``ReadBeyondUpper``: only ``a``'s upper had moved, ``b``'s waited
    for the next tick. Group commit now advances every table together and a fresh read takes
    the oracle's read timestamp. The tick is an hour, so nothing else moves ``b``."""

    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(
                tmp_path, replicas=1, executor="python", tick_ms=3_600_000
            ) as env:
                await env.wait_connected(timeout_s=60)
                schema = Schema.of(("k", "int64", False), ("v", "int64", False))
                await env.create_table("a", schema)
                await env.create_table("b", schema)
                joined = env.table("a").join(env.table("b"), on="k")
                idx = await env.create_index(joined, name="a_join_b")
                await env.append("b", [(1, 10), (2, 20)])
                want: list[tuple[tuple[int, ...], int]] = []
                for i, k in enumerate((1, 2, 1, 2, 1)):
                    t = await env.append("a", [(k, 100 + i)])
                    want.append(((k, 100 + i, k, 10 * k), 1))
                    assert sorted(await env.peek(idx)) == sorted(want), f"try {i}"
                    assert sorted(await env.peek(idx, at=t)) == sorted(want), f"try {i}"

    anyio.run(main, backend=backend)


def test_managed_replicas_are_authenticated_and_the_data_directory_private(
    tmp_path: Path,
) -> None:
    """Issue 17: managed replicas ran without a token, so any local user could read every table
    through them. Now each environment gives its replicas a fresh token; the data directory is
    created 0700."""
    from tidegate.runtime.transport import TransportError
    from tidegate.runtime.transport.grpc_client import GrpcTransport
    from tidegate.spec.protocol.commands import Hello

    data = tmp_path / "data"

    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(data, replicas=1, executor="python", tick_ms=50) as env:
                assert env.orchestrator is not None and env.orchestrator.token
                await env.wait_connected(timeout_s=60)  # the controller has the token
                address = str(env.orchestrator.address("r1"))
                async with GrpcTransport() as intruder:  # no token
                    with pytest.raises(TransportError, match=r"(?i)unauthenticated"):
                        stream = await intruder.connect(address)
                        await stream.send_many([Hello(uuid.UUID(int=1))])
                        await stream.receive()

    anyio.run(main)
    assert data.stat().st_mode & 0o777 == 0o700


COUNTER = LoadGenerator("counter", tick_ms=20)


def scrape(address: str) -> str:
    """GET ``http://ADDRESS/metrics``: the Prometheus text."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        return str(r.read().decode())


async def served(address: str) -> str:
    return await anyio.to_thread.run_sync(scrape, address)


def test_with_replica_metrics_each_managed_replica_serves_them_where_status_says(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(
                tmp_path,
                replicas=1,
                executor="python",
                tick_ms=50,
                storage_tick_ms=50,
                replica_metrics=True,
            ) as env:
                assert env.orchestrator is not None
                await env.wait_connected(timeout_s=60)
                await env.create_source("c", COUNTER)  # starts the managed storage replica
                await env.peek("c", await env.freshest("c"))
                processes = env.orchestrator.status()
                where = {name: p.metrics for name, p in processes.items()}
                assert set(where) == {"r1", "storage"} and None not in where.values()
                rows = {r["name"]: r["metrics"] for r in replicas_json(env, env.orchestrator, None)}
                assert rows == where
                text = status_table(
                    await ControlService(env, orchestrator=env.orchestrator).status()
                )
                for name, address in where.items():
                    assert f"metrics of replica {name}: http://{address}/metrics" in text
                compute = await served(where["r1"] or "")
                assert 'tidegate_replica_commands_total{kind="CreateInstance"}' in compute
                storage = await served(where["storage"] or "")
                assert 'tidegate_storage_commands_total{kind="RunIngestion"}' in storage
                # A restarted replica serves them again, where its status says now.
                await env.orchestrator.kill("r1")
                with anyio.fail_after(60):
                    while not any(
                        r.replica == "r1" and r.connected and r.epoch == 2 for r in env.replicas()
                    ):
                        await anyio.sleep(0.05)
                again = env.orchestrator.status()["r1"]
                assert again.restarts == 1 and again.metrics is not None
                assert "tidegate_replica_commands_total" in await served(again.metrics)

    anyio.run(main)


def test_a_storage_replica_started_later_serves_metrics_too(tmp_path: Path) -> None:
    """The compute replica runs in this process: the orchestrator is made for the storage
    replica when the first source needs it, with the environment's ``replica_metrics``."""

    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            options: dict[str, Any] = {"tick_ms": 100, "storage_tick_ms": 50}
            async with Environment.open(
                tmp_path, replicas={"r1": compute}, replica_metrics=True, **options
            ) as env:
                assert env.orchestrator is None
                await env.create_source("c", COUNTER)
                assert env.orchestrator is not None
                metrics = env.orchestrator.status()["storage"].metrics
                assert metrics is not None
                assert "tidegate_storage_commands_total" in await served(metrics)

    anyio.run(main)


def test_without_replica_metrics_no_replica_serves_or_records_them(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas=1, executor="python", tick_ms=50) as env:
                assert env.orchestrator is not None
                await env.wait_connected(timeout_s=60)
                st = env.orchestrator.status()["r1"]
                assert st.metrics is None and st.pid is not None
                argv = Path(f"/proc/{st.pid}/cmdline").read_bytes().split(b"\0")
                assert b"--metrics" not in argv
                rows = replicas_json(env, env.orchestrator, None)
                assert [r["metrics"] for r in rows] == [None]
                text = status_table(
                    await ControlService(env, orchestrator=env.orchestrator).status()
                )
                assert "metrics" not in text
        assert not list((tmp_path / "replicas").glob("*.metrics-port"))

    anyio.run(main)
