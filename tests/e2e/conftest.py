"""Shared machinery of the end-to-end tests: real processes, one environment per module.

* :class:`Live` -- an ``Environment`` opened on a blocking portal (asyncio), so
  plain test functions of one module share it (Spark start costs 5-9 s per
  process); every client action goes through it and is recorded by a
  :class:`~tidegate.commands.recording.RunRecorder` for the offline history checker;
* :func:`start_replica` -- an unmanaged ``tidegate replica`` process;
* :func:`up_process` -- ``tidegate up`` on a data directory, once its replicas are ready;
* :class:`CuttableProxy` -- a TCP proxy whose connections can be cut and restored;
* :func:`make_certs` -- a CA, a server certificate for ``localhost`` and a client one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from retention import HISTORY

from tidegate.commands.recording import RunRecorder
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId

T = TypeVar("T")


# -- an environment on a portal ------------------------------------------------------------------


@dataclass
class Live:
    """One open ``Environment`` driven from synchronous test code, with its recorded history."""

    portal: BlockingPortal
    env: Any
    rec: RunRecorder
    data_dir: Path
    ids: dict[str, GlobalId] = field(default_factory=dict)
    orchestrator: Any = None
    _exit: Callable[[], None] | None = None

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float = 60.0) -> T:
        """Run ``await fn(*args)`` on the environment's loop, failing after ``timeout`` seconds."""

        async def bounded() -> T:
            with anyio.fail_after(timeout):
                return await fn(*args)

        return self.portal.call(bounded)

    def sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain call on the environment's loop thread."""
        return self.portal.call(lambda: fn(*args))

    def append(self, table: str, rows: list[tuple[Row, int]]) -> int:
        ts: int = self.call(lambda: self.env.append(table, rows))
        self.rec.appended(self.ids[table], ts, rows)
        return ts

    def peek(self, name: str, at: int, timeout: float = 60.0) -> dict[Row, int]:
        """A whole-collection peek at ``at`` once complete there, recorded, as ``{row: count}``."""
        gid = self.ids[name]

        async def complete_then_peek() -> Any:
            await self.env.wait_for(gid, at)
            return await self.env.peek(gid, at=at)

        got = self.call(complete_then_peek, timeout=timeout)
        rows = rows_of(got)
        self.rec.peeked(gid, at, list(rows.items()))
        return rows

    def expected(self, name: str, at: int) -> dict[Row, int]:
        return self.rec.expected(self.ids[name], at)

    def replicas(self) -> dict[str, str]:
        """Replica name -> the controller's status for it."""
        return {r.replica: str(r.status) for r in self.sync(self.env.replicas)}

    def wait_connected(self, names: list[str] | None = None, timeout: float = 90.0) -> float:
        """Wait until replicas ``names`` (default: all) are connected; the seconds it took.

        ``Environment.wait_connected`` on the loop: ``ReplicasNotConnected`` (a
        ``TimeoutError`` naming each replica's status) after ``timeout``.
        """
        t0 = time.monotonic()
        self.call(lambda: self.env.wait_connected(names, timeout_s=timeout), timeout=timeout + 10)
        return time.monotonic() - t0

    def keep_history(self, *names: str) -> None:
        """Keep :data:`retention.HISTORY` of each named object: :meth:`peek` reads at times
        the test remembered, after waiting for them to be complete."""
        for name in names:
            self.call(lambda name=name: self.env.set_read_policy(name, HISTORY))

    def wait_for(self, what: str, ok: Callable[[], bool], timeout: float = 90.0) -> float:
        t0 = time.monotonic()
        while not ok():
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def close(self) -> None:
        if self._exit is not None:
            self._exit()
            self._exit = None


def rows_of(got: Any) -> dict[Row, int]:
    out: dict[Row, int] = {}
    for r, n in getattr(got, "rows", got):
        out[tuple(r)] = out.get(tuple(r), 0) + int(n)
    return {r: n for r, n in out.items() if n}


@contextlib.contextmanager
def open_live(data_dir: Path, name: str, replicas: Any = 2, **options: Any) -> Iterator[Live]:
    """Open an ``Environment`` on ``data_dir`` on a fresh asyncio portal thread.

    With ``replicas=n`` the managed replicas run under an orchestrator the test
    holds (``live.orchestrator``), so it can SIGKILL them.
    """
    with start_blocking_portal("asyncio") as portal:
        cm = portal.wrap_async_context_manager(_environment(data_dir, replicas, options))
        env, orchestrator = cm.__enter__()
        n = replicas if isinstance(replicas, int) else len(replicas)
        live = Live(portal, env, RunRecorder(name, replicas=n), data_dir)
        live.orchestrator = orchestrator
        live._exit = lambda: cm.__exit__(None, None, None)
        try:
            yield live
        finally:
            live.close()


@contextlib.asynccontextmanager
async def _environment(
    data_dir: Path, replicas: Any, options: dict[str, Any]
) -> AsyncIterator[tuple[Any, Any]]:
    from tidegate.runtime.environment import Environment
    from tidegate.runtime.orchestrator import Orchestrator

    if not isinstance(replicas, int):
        async with Environment.open(data_dir, replicas=replicas, **options) as env:
            yield env, None
        return
    orchestrator = Orchestrator(
        data_dir,
        executor=options.get("executor", "spark"),
        spark_master=options.get("spark_master", "local[1]"),
        token=options.get("token"),
    )
    async with orchestrator:
        async with anyio.create_task_group() as tg:  # start the processes in parallel
            for i in range(1, replicas + 1):
                tg.start_soon(orchestrator.ensure, f"r{i}")
        async with Environment.open(
            data_dir, replicas=replicas, orchestrator=orchestrator, **options
        ) as env:
            yield env, orchestrator


# -- processes -------------------------------------------------------------------------------------


@dataclass
class ReplicaProcess:
    proc: subprocess.Popen[str]
    address: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_replica(data_dir: Path, *extra: str, executor: str = "python") -> ReplicaProcess:
    """An unmanaged ``tidegate replica`` on a free loopback port, once it says it listens."""
    log = open(data_dir / f"replica-{time.monotonic_ns()}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tidegate",
            "replica",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            str(data_dir),
            "--executor",
            executor,
            "--spark-master",
            "local[1]",
            "--exit-with-parent",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        raise AssertionError(f"replica did not start; see {log.name}")
    event = json.loads(line)
    assert event["event"] == "listening", event
    return ReplicaProcess(proc, event["address"])


@contextlib.contextmanager
def up_process(data: Path, log: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """``tidegate up --executor python`` on ``data`` (its output in ``log``), once ``tidegate
    status --wait`` says its replicas are ready; stopped when the block ends."""
    tidegate = [sys.executable, "-m", "tidegate"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*tidegate, "up", "--data-dir", str(data), "--executor", "python", *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not (data / "controller.json").exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "tidegate up did not write controller.json"
            time.sleep(0.1)
        ready = subprocess.run(
            [*tidegate, "status", "--data-dir", str(data), "--wait", "--timeout", "120"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ready.returncode == 0, ready.stdout + ready.stderr
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# -- a proxy whose connections can be cut -------------------------------------------------------------


class CuttableProxy:
    """Forwards loopback TCP to ``target``; :meth:`cut` drops every connection and refuses new ones."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.up = True
        self.cuts = 0
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up = False
        self.cuts += 1
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        self.up = True

    def close(self) -> None:
        self.cut()
        self.server.close()


# -- certificates ----------------------------------------------------------------------------------


def make_certs(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for ``localhost``/127.0.0.1 and a client certificate, as PEM files."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    ca_key = key()
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("tidegate test CA"))
        .issuer_name(name("tidegate test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, san: list[x509.GeneralName]) -> tuple[x509.Certificate, Any]:
        k = key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cert, k

    server, server_key = leaf(
        "localhost",
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client, client_key = leaf("controller", [x509.DNSName("controller")])
    out: dict[str, Path] = {}

    def write(label: str, data: bytes) -> None:
        p = directory / f"{label}.pem"
        p.write_bytes(data)
        out[label] = p

    pem = serialization.Encoding.PEM
    write("ca", ca.public_bytes(pem))
    write("server", server.public_bytes(pem))
    write("client", client.public_bytes(pem))
    for label, k in (("server-key", server_key), ("client-key", client_key)):
        write(
            label,
            k.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        )
    return out


@pytest.fixture(scope="session")
def e2e() -> Any:
    """This module, for test modules (``--import-mode=importlib`` cannot import a conftest)."""
    return sys.modules[__name__]
