"""Opening an environment: concurrent replica starts, replicas restored from the catalog,
refused connections reported as ``failed`` events, ``wait_connected``, and ``await open()``.

Managed replicas are a stand-in process (it only prints the ready line) so
the orchestrator's part is cheap; connections go to in-process replicas
(:class:`ReplicaService` with the python executor behind :class:`ReplicaServer`).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment, ReplicaSpec, SyncEnvironment
from tidegate.runtime.catalog import (
    AlterReplica,
    CatalogState,
    CreateReplica,
    DropReplica,
    ReplicaEntry,
    apply_ops,
)
from tidegate.runtime.controller import DriverNotRunning, ReplicasNotConnected
from tidegate.runtime.environment import replica_ops
from tidegate.runtime.errors import ReplicaStartFailed
from tidegate.runtime.orchestrator import Orchestrator
from tidegate.spec.errors import ReplicaMissing

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["asyncio", "trio"]

# A stand-in for ``tidegate replica``: ready once every replica of the test has
# started (a rendezvous in a directory), so replicas started one after the
# other never get ready. ``--spark-master fail`` exits before it is ready.
STAND_IN = textwrap.dedent(
    """
    import json, os, socket, sys, time
    args = sys.argv[1:]
    def opt(name):
        return args[args.index(name) + 1]
    if opt("--spark-master") == "fail":
        sys.exit(3)
    meet, peers = opt("--meet"), int(opt("--peers"))
    open(os.path.join(meet, str(os.getpid())), "w").close()
    deadline = time.monotonic() + 4
    while len(os.listdir(meet)) < peers:
        if time.monotonic() > deadline:
            sys.exit(4)
        time.sleep(0.02)
    host, _, port = opt("--listen").rpartition(":")
    server = socket.socket()
    server.bind((host, int(port)))
    server.listen()
    print(json.dumps({"event": "listening", "address": f"{host}:{server.getsockname()[1]}"}))
    sys.stdout.flush()
    while True:
        time.sleep(1)
    """
)


def stand_in_orchestrator(tmp_path: Path, peers: int) -> Orchestrator:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    meet = tmp_path / "meet"
    meet.mkdir(exist_ok=True)
    return Orchestrator(
        tmp_path,
        executor="python",
        command=[sys.executable, str(script)],
        extra_args=["--meet", str(meet), "--peers", str(peers)],
        ready_timeout_s=10,
        backoff_initial_s=30,  # a failed start is not retried within a test
        stop_grace_s=5,
    )


def run(backend: str, main: Callable[[], Any]) -> None:
    anyio.run(main, backend=backend)


QUIET = {"tick_ms": None, "maintain_ms": None, "poll_ms": None}


# -- 1. managed replicas start concurrently -------------------------------------------------------


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_managed_replicas_start_concurrently(tmp_path: Path, backend: str) -> None:
    """Regression: replicas were started one after the other (each waited for the last)."""

    async def main() -> None:
        with anyio.fail_after(60):
            async with (
                stand_in_orchestrator(tmp_path, peers=3) as orch,
                Environment.open(tmp_path, replicas=3, orchestrator=orch, **QUIET) as env,
            ):
                assert {n: s.state for n, s in orch.status().items()} == {
                    "r1": "running",
                    "r2": "running",
                    "r3": "running",
                }
                assert [r.replica for r in env.replicas()] == ["r1", "r2", "r3"]

    run(backend, main)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_failed_starts_raise_replica_start_failed_not_a_group(tmp_path: Path, backend: str) -> None:
    specs = [ReplicaSpec("r1", spark_master="fail"), ReplicaSpec("r2", spark_master="fail")]

    async def main() -> None:
        with anyio.fail_after(60):
            async with stand_in_orchestrator(tmp_path, peers=2) as orch:
                with pytest.raises(ReplicaStartFailed) as info:
                    async with Environment.open(tmp_path, replicas=specs, orchestrator=orch):
                        pass
                assert info.value.name == "r1"
                assert any("'r2' failed too" in note for note in info.value.__notes__)

    run(backend, main)


# -- 2. replicas are restored from the catalog ---------------------------------------------------


def test_replica_ops_create_alter_and_drop_to_match() -> None:
    state = apply_ops(CatalogState(), [CreateReplica("r1"), CreateReplica("old")])
    assert replica_ops(state, None) == []
    assert replica_ops(CatalogState(), None) == [CreateReplica("r1", spark_master="local[1]")]
    ops = replica_ops(state, [ReplicaSpec("r1", executor="python"), ReplicaSpec("x", "h:1")])
    assert ops == [
        AlterReplica("r1", True, None, "local[1]", "python"),
        CreateReplica("x", False, "h:1", None, "spark"),
        DropReplica("old"),
    ]
    after = apply_ops(state, ops)
    assert after.replicas == (
        ReplicaEntry("r1", True, None, "local[1]", "python"),
        ReplicaEntry("x", False, "h:1", None, "spark"),
    )
    assert apply_ops(after, replica_ops(after, {"x": "h:1", "r1": "h:2"})) != after
    same = [ReplicaSpec("r1", executor="python"), ReplicaSpec("x", "h:1")]
    assert apply_ops(after, replica_ops(after, same)) == after  # nothing to write


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fresh_data_dir_gets_one_managed_replica_by_default(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with (
                stand_in_orchestrator(tmp_path, peers=1) as orch,
                Environment.open(tmp_path, orchestrator=orch, **QUIET) as env,
            ):
                assert env.state.replicas == (ReplicaEntry("r1", True, None, "local[1]", "spark"),)
                assert list(orch.status()) == ["r1"]

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reopening_restores_the_recorded_replicas_and_explicit_ones_replace_them(
    tmp_path: Path, backend: str
) -> None:
    """Regression: a reopen ignored the catalog's replicas, and never wrote a changed spec back."""

    async def main() -> None:
        with anyio.fail_after(90), replica(tmp_path) as a, replica(tmp_path) as b:
            async with Environment.open(tmp_path, replicas={"ext": a}, **QUIET) as env:
                await env.wait_connected(timeout_s=30)
            # No replicas= : the recorded unmanaged replica, at its recorded address.
            async with Environment.open(tmp_path, **QUIET) as env:
                assert env.state.replicas == (ReplicaEntry("ext", False, a, None, "spark"),)
                await env.wait_connected(timeout_s=30)
                assert [(r.replica, r.address) for r in env.replicas()] == [("ext", a)]
            # A new address for a known name is written back; a name not given is dropped.
            async with Environment.open(tmp_path, replicas={"ext": b, "two": a}, **QUIET) as env:
                await env.wait_connected(timeout_s=30)
            async with Environment.open(tmp_path, **QUIET) as env:
                assert [(r.name, r.address) for r in env.state.replicas] == [("ext", b), ("two", a)]
                await env.wait_connected(timeout_s=30)
                assert {r.replica: r.address for r in env.replicas()} == {"ext": b, "two": a}
            async with Environment.open(tmp_path, replicas={"two": a}, **QUIET) as env:
                assert [r.name for r in env.state.replicas] == ["two"]
                assert [r.replica for r in env.replicas()] == ["two"]

    run(backend, main)


# -- 3. refused connections are failed events ------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "client", "why"),
    [
        ({"token": "right"}, {"token": "wrong"}, "Unauthenticated"),
        ({"version": "999"}, {}, "VersionMismatch"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_refused_connections_publish_failed_events_and_keep_retrying(
    tmp_path: Path, backend: str, server: dict[str, Any], client: dict[str, Any], why: str
) -> None:
    """Regression: a refused replica stayed ``connecting`` with no event saying why."""

    async def main() -> None:
        with anyio.fail_after(60), replica(tmp_path, **server) as address:
            async with Environment.open(
                tmp_path, replicas={"r1": address}, **client, **QUIET
            ) as env:
                failed = []
                async with env.events() as events:
                    async for e in events:
                        if e.status == "failed":
                            failed.append(e)
                            if len(failed) == 2:
                                break
                assert all(e.replica == "r1" and why in e.reason for e in failed)
                assert [e.epoch for e in failed] == [1, 1]  # the same link keeps retrying
                (info,) = env.replicas()
                assert info.status == "failed" and why in info.last_error and info.attempts >= 2
                with pytest.raises(ReplicasNotConnected) as timeout:
                    await env.wait_connected(timeout_s=0.2)
                assert isinstance(timeout.value, TimeoutError) and why in str(timeout.value)

    run(backend, main)


# -- 4. wait_connected ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_connected_returns_once_every_replica_is_connected(
    tmp_path: Path, backend: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(60), replica(tmp_path) as a, replica(tmp_path) as b:
            async with Environment.open(tmp_path, replicas={"r1": a, "r2": b}, **QUIET) as env:
                await env.wait_connected(["r2"], timeout_s=30)
                assert {r.replica: r.connected for r in env.replicas()}["r2"]
                await env.wait_connected(timeout_s=30)
                assert all(r.connected and r.status == "connected" for r in env.replicas())
                with pytest.raises(ReplicaMissing):
                    await env.wait_connected(["nope"])

    run(backend, main)


# -- 5. env = await Environment.open(...) --------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_await_open_then_aclose(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60), replica(tmp_path) as address:
            env = await Environment.open(tmp_path, replicas={"r1": address}, **QUIET)
            try:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                ts = await env.append("t", [(1,), (2,)])
                assert sorted(await env.peek("t", ts)) == [((1,), 1), ((2,), 1)]
            finally:
                await env.aclose()
            await env.aclose()  # idempotent
            with pytest.raises(DriverNotRunning):
                await env.append("t", [(3,)])
            # The data is there for the next open.
            async with Environment.open(tmp_path, **QUIET) as again:
                assert sorted(await again.peek("t", ts)) == [((1,), 1), ((2,), 1)]

    run(backend, main)


def test_sync_environment_wait_connected(tmp_path: Path) -> None:
    with (
        replica(tmp_path) as address,
        SyncEnvironment.open(tmp_path, replicas={"r1": address}, **QUIET) as env,
    ):
        env.wait_connected(timeout_s=30)
        assert [(r.replica, r.connected) for r in env.replicas()] == [("r1", True)]
