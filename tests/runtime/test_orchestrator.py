"""The orchestrator with real child processes: a stand-in replica, and once the real one.

The stand-in (written to a temp dir) behaves like ``tidegate replica`` where the
orchestrator can see it: it listens on ``--listen``, prints the ready line,
honours ``--exit-with-parent`` with a parent-death signal, exits on SIGTERM.
Knobs: ``--fail-with CODE`` (exit before ready), ``--ready-delay S``, ``--ignore-term``,
``--chatter N`` (once ready, a line of N bytes on stderr every 10 ms). With ``--metrics
HOST:PORT`` it serves ``stand_in_up 1`` over HTTP there and reports the address in its ready
line, as the replica does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.runtime.errors import (
    OrchestratorError,
    ReplicaStartFailed,
    UnknownManagedReplica,
)
from tidegate.runtime.orchestrator import (
    Orchestrator,
    ReplicaProcessStatus,
    check_replica_name,
)

pytestmark = pytest.mark.timeout(180)

STAND_IN = textwrap.dedent(
    """
    import ctypes, http.server, json, os, signal, socket, sys, threading, time
    args = sys.argv[1:]
    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default
    if "--exit-with-parent" in args:
        parent = os.getppid()
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            sys.exit(0)
    if opt("--fail-with") is not None:
        print("failing on purpose", file=sys.stderr, flush=True)
        sys.exit(int(opt("--fail-with")))
    time.sleep(float(opt("--ready-delay", "0")))
    if "--ignore-term" in args:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host, _, port = opt("--listen").rpartition(":")
    server = socket.socket()
    server.bind((host, int(port)))
    server.listen()
    print("starting up", file=sys.stderr, flush=True)
    address = f"{host}:{server.getsockname()[1]}"
    metrics = None
    if opt("--metrics") is not None:
        class Metrics(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"stand_in_up 1\\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        m_host, _, m_port = opt("--metrics").rpartition(":")
        served = http.server.HTTPServer((m_host, int(m_port)), Metrics)
        threading.Thread(target=served.serve_forever, daemon=True).start()
        metrics = f"{m_host}:{served.server_port}"
    ready = {"event": "listening", "address": address, "metrics": metrics, "pid": os.getpid()}
    print(json.dumps(ready), flush=True)
    chatter = int(opt("--chatter", "0"))
    while True:
        if chatter:
            print("x" * chatter, file=sys.stderr, flush=True)
        time.sleep(0.01 if chatter else 1)
    """
)

BACKENDS = ["asyncio", "trio"]


@pytest.fixture
def stand_in(tmp_path: Path) -> list[str]:
    path = tmp_path / "stand_in_replica.py"
    path.write_text(STAND_IN)
    return [sys.executable, str(path)]


def run(backend: str, fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn, backend=backend)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_gone(pids: list[int], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"still alive: {[p for p in pids if alive(p)]}")
        time.sleep(0.05)


def connectable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return True
    except OSError:
        return False


async def until(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not pred():
            await anyio.sleep(0.02)


def orch(data: Path, command: list[str], **kw: Any) -> Orchestrator:
    kw.setdefault("backoff_initial_s", 0.05)
    kw.setdefault("backoff_max_s", 0.2)
    kw.setdefault("stop_grace_s", 5.0)
    kw.setdefault("ready_timeout_s", 30.0)
    return Orchestrator(data, command=command, **kw)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_ensure_status_and_stop(backend: str, tmp_path: Path, stand_in: list[str]) -> None:
    seen: list[ReplicaProcessStatus] = []

    async def main() -> None:
        async with orch(tmp_path, stand_in, token="s3cret", on_status=seen.append) as o:
            address = await o.ensure("r1")
            assert address == o.address("r1")
            assert connectable(address)
            assert await o.ensure("r1") == address  # already running: nothing new
            st = o.status()["r1"]
            assert (st.state, st.restarts, st.last_exit_code) == ("running", 0, None)
            assert st.pid is not None and alive(st.pid)
            pidfile = (tmp_path / "replicas" / "r1.pid").read_text()
            assert pidfile == f"{st.pid}\n"  # a plain integer: kill $(cat r1.pid)
            argv = Path(f"/proc/{st.pid}/cmdline").read_bytes().decode().split("\0")
            assert argv[:2] == stand_in
            for flag in ("--listen", "--storage", "--executor", "--spark-master"):
                assert flag in argv
            assert "--exit-with-parent" in argv
            assert "--metrics" not in argv and st.metrics is None  # no metrics_host: none served
            assert not (tmp_path / "replicas" / "r1.metrics-port").exists()
            assert "s3cret" not in argv  # the token goes by environment
            environ = Path(f"/proc/{st.pid}/environ").read_bytes().split(b"\0")
            assert b"TIDEGATE_TOKEN=s3cret" in environ
            log = Path(st.log_path).read_text()
            assert '"event": "listening"' in log and "starting up" in log
            await o.stop("r1")
            assert not alive(st.pid)
            st2 = o.status()["r1"]
            assert (st2.state, st2.pid, st2.last_exit_code) == ("stopped", None, 0)
            assert not (tmp_path / "replicas" / "r1.pid").exists()
            assert o.address("r1") == address  # still where it will listen next time
            assert await o.ensure("r1") == address  # start again, same port

    run(backend, main)
    states = [s.state for s in seen if s.name == "r1"]
    assert states[:2] == ["starting", "running"]
    assert "stopping" in states and states[-1] == "stopped"


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_crashed_replica_is_restarted_on_the_same_address(
    backend: str, tmp_path: Path, stand_in: list[str]
) -> None:
    async def main() -> None:
        async with orch(tmp_path, stand_in) as o:
            address = await o.ensure("r1")
            first = o.status()["r1"].pid
            assert first is not None
            os.kill(first, signal.SIGKILL)  # a crash from outside
            await until(lambda: o.status()["r1"].pid not in (None, first))
            await until(lambda: o.status()["r1"].state == "running")
            st = o.status()["r1"]
            assert (st.restarts, st.last_exit_code, st.address) == (1, -9, address)
            assert connectable(address)
            second = st.pid
            assert second is not None
            await o.kill("r1")  # the same through the API
            assert not alive(second)
            assert await o.ensure("r1") == address
            assert o.status()["r1"].restarts == 2

    run(backend, main)


@pytest.mark.processes
def test_a_replica_failing_to_start_is_retried_with_backoff(
    tmp_path: Path, stand_in: list[str]
) -> None:
    async def main() -> None:
        async with orch(tmp_path, stand_in, extra_args=["--fail-with", "3"]) as o:
            with pytest.raises(ReplicaStartFailed) as info:
                await o.ensure("bad")
            assert "status 3" in str(info.value)
            assert info.value.log_path == str(tmp_path / "replicas" / "bad.log")
            await until(lambda: o.status()["bad"].restarts >= 3)
            st = o.status()["bad"]
            assert st.last_exit_code == 3
            assert st.state in ("starting", "restarting")
            assert "failing on purpose" in (tmp_path / "replicas" / "bad.log").read_text()
            with pytest.raises(UnknownManagedReplica):
                o.address("bad")  # never listened anywhere
            await o.stop("bad")
            assert o.status()["bad"].state == "stopped"

    run("asyncio", main)


@pytest.mark.processes
def test_stop_escalates_to_sigkill_after_the_grace(tmp_path: Path, stand_in: list[str]) -> None:
    async def main() -> None:
        async with orch(tmp_path, stand_in, extra_args=["--ignore-term"], stop_grace_s=0.3) as o:
            await o.ensure("stubborn")
            pid = o.status()["stubborn"].pid
            assert pid is not None
            with anyio.fail_after(10):
                await o.stop("stubborn")
            assert not alive(pid)
            assert o.status()["stubborn"].last_exit_code == -signal.SIGKILL

    run("asyncio", main)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_while_starting(backend: str, tmp_path: Path, stand_in: list[str]) -> None:
    async def main() -> None:
        async with orch(tmp_path, stand_in, extra_args=["--ready-delay", "30"]) as o:
            failures: list[BaseException] = []

            async def ensure() -> None:
                try:
                    await o.ensure("slow")
                except ReplicaStartFailed as e:
                    failures.append(e)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ensure)
                await until(lambda: "slow" in o.status() and o.status()["slow"].pid is not None)
                pid = o.status()["slow"].pid
                assert pid is not None and o.status()["slow"].state == "starting"
                await o.stop("slow")
            assert len(failures) == 1
            assert pid is not None and not alive(pid)
            assert o.status()["slow"].state == "stopped"

    run(backend, main)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_aclose_leaves_no_process(backend: str, tmp_path: Path, stand_in: list[str]) -> None:
    pids: list[int] = []

    async def main() -> None:
        o = orch(tmp_path, stand_in)
        await o.start()
        for name in ("a", "b", "c"):
            await o.ensure(name)
        pids.extend(s.pid for s in o.status().values() if s.pid is not None)
        await o.aclose()
        assert {s.state for s in o.status().values()} == {"stopped"}
        with pytest.raises(OrchestratorError):
            await o.ensure("a")

    run(backend, main)
    assert len(pids) == 3
    assert not any(alive(p) for p in pids)
    assert list((tmp_path / "replicas").glob("*.pid")) == []


def test_usage_errors(tmp_path: Path, stand_in: list[str]) -> None:
    async def main() -> None:
        o = orch(tmp_path, stand_in)
        with pytest.raises(OrchestratorError, match="not started"):
            await o.ensure("a")
        async with o:
            with pytest.raises(OrchestratorError, match="names"):
                await o.ensure("../etc")
            with pytest.raises(UnknownManagedReplica):
                await o.stop("nope")
            with pytest.raises(UnknownManagedReplica):
                await o.kill("nope")
            with pytest.raises(UnknownManagedReplica):
                o.address("nope")
            with pytest.raises(OrchestratorError, match="already started"):
                await o.start()

    run("asyncio", main)
    for bad in ("", "127.0.0.1:9100", "a b", 7):
        with pytest.raises(OrchestratorError, match="metrics_host"):
            orch(tmp_path, stand_in, metrics_host=bad)


@pytest.mark.parametrize("name", ["r1", "replica-2.a_b", "R9"])
def test_replica_names_the_orchestrator_runs(name: str) -> None:
    check_replica_name(name)  # the environment checks before it records a replica


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "../etc", "r/1", "é", 7, None])
def test_replica_names_it_refuses(name: Any) -> None:
    with pytest.raises(OrchestratorError, match=r"\[A-Za-z0-9._-\]\+"):
        check_replica_name(name)


@pytest.mark.processes
def test_a_chatty_replica_log_is_rotated_and_stays_bounded(
    tmp_path: Path, stand_in: list[str]
) -> None:
    limit = 20_000

    async def main() -> None:
        async with orch(
            tmp_path, [*stand_in, "--chatter", "500"], log_max_bytes=limit, log_backups=2
        ) as o:
            await o.ensure("r1")
            log = Path(o.status()["r1"].log_path)
            await until(lambda: log.with_name("r1.log.2").exists(), timeout=30)
            # ~50 KB/s against a check about once a second: the live log stays within a few limits.
            assert log.stat().st_size < 5 * limit
            assert not log.with_name("r1.log.3").exists()
            assert "x" * 500 in log.with_name("r1.log.1").read_text()
            assert o.status()["r1"].state == "running"

    run("trio", main)


def test_log_rotation_settings_are_checked(tmp_path: Path, stand_in: list[str]) -> None:
    with pytest.raises(OrchestratorError, match="log_max_bytes"):
        orch(tmp_path, stand_in, log_max_bytes=0)
    with pytest.raises(OrchestratorError, match="log_backups"):
        orch(tmp_path, stand_in, log_backups=0)


@pytest.mark.processes
def test_a_busy_recorded_port_is_replaced(tmp_path: Path, stand_in: list[str]) -> None:
    async def main() -> None:
        async with orch(tmp_path, stand_in) as o:
            first = await o.ensure("r1")
            await o.stop("r1")
        port = int(first.rpartition(":")[2])
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            async with orch(tmp_path, stand_in) as o:
                assert o.address("r1") == first  # recorded by the earlier orchestrator
                second = await o.ensure("r1")
                assert second != first
                assert o.address("r1") == second
        assert (tmp_path / "replicas" / "r1.port").read_text().strip() == second.rpartition(":")[2]

    run("asyncio", main)


def scrape(address: str) -> str:
    """GET ``http://ADDRESS/metrics``: the body as text."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        return str(r.read().decode())


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_replicas_serve_metrics_on_ports_of_their_own_that_follow_restarts(
    backend: str, tmp_path: Path, stand_in: list[str]
) -> None:
    replicas = tmp_path / "replicas"

    async def main() -> None:
        async with orch(tmp_path, stand_in, metrics_host="127.0.0.1") as o:
            address = await o.ensure("r1")
            await o.ensure("s", services=["storage"])  # a storage-only replica too
            status = o.status()
            served = {name: st.metrics for name, st in status.items()}
            assert served["r1"] is not None and served["s"] is not None
            assert len({address, o.address("s"), served["r1"], served["s"]}) == 4
            for name in ("r1", "s"):
                metrics = served[name]
                assert metrics is not None and metrics.startswith("127.0.0.1:")
                assert scrape(metrics) == "stand_in_up 1\n"
                recorded = (replicas / f"{name}.metrics-port").read_text()
                assert recorded == f"{metrics.rpartition(':')[2]}\n"
                pid = status[name].pid
                assert pid is not None
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
                assert argv[argv.index("--metrics") + 1] in ("127.0.0.1:0", metrics)
            first = o.status()["r1"].pid
            await o.kill("r1")  # restarted on the same ports: both were free
            await until(lambda: o.status()["r1"].pid not in (None, first))
            assert await o.ensure("r1") == address
            assert o.status()["r1"].metrics == served["r1"]
            assert scrape(served["r1"] or "") == "stand_in_up 1\n"
            await o.stop("r1")
            old = int((served["r1"] or "").rpartition(":")[2])
            with socket.socket() as squatter:  # the metrics port is taken: a new one is found
                squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
                squatter.bind(("127.0.0.1", old))
                squatter.listen()
                assert await o.ensure("r1") == address
                moved = o.status()["r1"].metrics
                assert moved is not None and moved != served["r1"]
                assert scrape(moved) == "stand_in_up 1\n"
                recorded = (replicas / "r1.metrics-port").read_text()
                assert recorded == f"{moved.rpartition(':')[2]}\n"

    run(backend, main)


_CONTROLLER = textwrap.dedent(
    """
    import anyio, json, sys
    from tidegate.runtime.orchestrator import Orchestrator

    async def main():
        o = Orchestrator(sys.argv[1], command=json.loads(sys.argv[2]))
        await o.start()
        for name in ("a", "b"):
            await o.ensure(name)
        status = o.status()
        print(json.dumps({n: [s.pid, s.address] for n, s in status.items()}), flush=True)
        await anyio.sleep(3600)

    anyio.run(main, backend=sys.argv[3])
    """
)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_children_exit_when_the_controller_is_killed(
    backend: str, tmp_path: Path, stand_in: list[str]
) -> None:
    data = tmp_path / "data"
    controller = subprocess.Popen(
        [sys.executable, "-c", _CONTROLLER, str(data), json.dumps(stand_in), backend],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert controller.stdout is not None
        line = controller.stdout.readline()
        children = json.loads(line)
        pids = [pid for pid, _ in children.values()]
        assert all(alive(p) for p in pids)
        if backend == "trio":
            time.sleep(11)  # trio's idle worker threads exit after 10 s: children must survive
            assert all(alive(p) for p in pids)
        controller.kill()
        controller.wait()
        wait_gone(pids)  # the parent-death signal took them down
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()

    async def restart() -> None:
        async with orch(data, stand_in) as o:
            assert o.reaped == []  # nothing was left to reap
            assert list((data / "replicas").glob("*.pid")) == []  # stale pidfiles cleared
            assert await o.ensure("a") == children["a"][1]  # same address as before

    run("asyncio", restart)


@pytest.mark.processes
def test_start_reaps_leftover_replicas_named_by_pidfiles(
    tmp_path: Path, stand_in: list[str]
) -> None:
    replicas = tmp_path / "replicas"
    replicas.mkdir()
    argv = [*stand_in, "--listen", "127.0.0.1:0", "--storage", str(tmp_path)]
    orphan = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert orphan.stdout is not None
        assert b"listening" in orphan.stdout.readline()
        (replicas / "old.pid").write_text(f"{orphan.pid}\n")
        # a recycled pid: the pidfile names a live process that is not a replica of this data dir
        (replicas / "recycled.pid").write_text(f"{unrelated.pid}\n")
        (replicas / "garbage.pid").write_text("not a pid")

        async def main() -> None:
            async with orch(tmp_path, stand_in) as o:
                assert o.reaped == [orphan.pid]

        run("asyncio", main)
        assert orphan.wait(timeout=10) == 0  # SIGTERM: a clean exit
        assert unrelated.poll() is None
        assert list(replicas.glob("*.pid")) == []
    finally:
        for p in (orphan, unrelated):
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.processes
def test_real_replicas_serve_their_metrics(tmp_path: Path) -> None:
    """``tidegate replica`` (python executor, and storage-only) with ``metrics_host``: each
    serves its own Prometheus metrics where its status says, also after a restart."""

    async def main() -> None:
        async with Orchestrator(
            tmp_path,
            executor="python",
            stop_grace_s=10.0,
            backoff_initial_s=0.1,
            metrics_host="127.0.0.1",
        ) as o:
            await o.ensure("r1")
            await o.ensure("storage", services=["storage"])
            for name, metric in [
                ("r1", "tidegate_replica_connections_accepted_total"),
                ("storage", "tidegate_storage_connections_accepted_total"),
            ]:
                metrics = o.status()[name].metrics
                assert metrics is not None
                text = await anyio.to_thread.run_sync(scrape, metrics)
                assert metric in text and 'tidegate_build_info{component="replica"' in text
            await o.kill("r1")
            await o.ensure("r1")
            metrics = o.status()["r1"].metrics
            assert metrics is not None and o.status()["r1"].restarts == 1
            text = await anyio.to_thread.run_sync(scrape, metrics)
            assert "tidegate_replica_connections_accepted_total" in text

    run("asyncio", main)


@pytest.mark.processes
def test_the_real_replica_process(tmp_path: Path) -> None:
    """``tidegate replica --executor python`` under the orchestrator: up, crash, restart, close."""

    async def main() -> None:
        async with Orchestrator(
            tmp_path, executor="python", stop_grace_s=10.0, backoff_initial_s=0.1
        ) as o:
            address = await o.ensure("r1")
            assert connectable(address)
            pid = o.status()["r1"].pid
            assert pid is not None
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert b"replica" in cmdline and b"--exit-with-parent" in cmdline
            await o.kill("r1")
            assert await o.ensure("r1") == address
            assert connectable(address)
            pids.append(o.status()["r1"].pid or 0)

    pids: list[int] = []
    run("asyncio", main)
    assert pids and not alive(pids[0])
