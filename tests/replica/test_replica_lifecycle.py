"""The replica process's life: graceful shutdown on SIGTERM, the halt on an incompatible
reconnect, exiting with its parent, the CLI's storage options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest
from replica_harness import Client, Tables, fresh_id, index_dataflow, replica_process

from tidegate.replica.main import HALT_EXIT_CODE
from tidegate.spec.protocol import (
    CreateDataflow,
    CreateInstance,
    Frontiers,
    Hello,
    InstanceConfig,
    LoggingConfig,
    Schedule,
)

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


def test_sigterm_ends_the_stream_with_unavailable_and_exits_zero(tmp_path: Path) -> None:
    tables = Tables(tmp_path)
    t = tables.create()
    tables.append(t, [((1, "a"), 0, 1)], 2)
    idx = fresh_id()
    with replica_process(tmp_path) as replica:

        async def main() -> str:
            c = await Client.connect(replica.address)
            await c.initialized(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
            await c.until(lambda r: isinstance(r, Frontiers) and r.id == idx)
            replica.proc.send_signal(15)
            return str(await c.ended())

        ended = anyio.run(main)
        assert "UNAVAILABLE" in ended and "shutting down" in ended
        assert replica.proc.wait(30) == 0
        assert [e["exit_code"] for e in replica.log_events("stopped")] == [0]
        # The follower released its read lease: only the controller's hold is left.
        state = tables.store.state(str(t))
        assert not state.leased_readers and set(state.critical_readers) == {"controller"}


def test_a_burst_of_termination_signals_still_exits_zero(tmp_path: Path) -> None:
    """Regression: the SIGTERM handler set a threading.Event, so a signal arriving while the
    main thread held that event's lock (waiting on it, or in an earlier handler) deadlocked the
    process; a parent death (PDEATHSIG and the watchdog at once) left a replica running."""
    with replica_process(tmp_path) as replica:
        for _ in range(200):
            replica.proc.send_signal(15)
        assert replica.proc.wait(30) == 0


def test_an_incompatible_instance_on_reconnect_halts_the_process(tmp_path: Path) -> None:
    with replica_process(tmp_path) as replica:

        async def main() -> None:
            first = await Client.connect(replica.address)
            await first.initialized()
            await first.drain(0.1)
            second = await Client.connect(replica.address, start=False)
            other = InstanceConfig(LoggingConfig(interval_ms=7, enable_logging=True))
            await second.send(Hello(uuid.uuid4()), CreateInstance(other))
            lost = await second.ended()
            assert "halt-on-incompatible-instance" in str(lost)

        anyio.run(main)
        assert replica.proc.wait(30) == HALT_EXIT_CODE
        assert replica.log_events("halt")


def test_exit_with_parent(tmp_path: Path) -> None:
    """The replica's parent dies: the replica shuts down (prctl / the watchdog)."""
    launcher = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-m', 'tidegate', 'replica', '--listen', "
        "'127.0.0.1:0', '--executor', 'python', '--exit-with-parent', '--storage', sys.argv[1]])\n"
        "p.wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", launcher, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert parent.stdout is not None
    ready = json.loads(parent.stdout.readline())
    child = int(ready["pid"])
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(child, 9)
    raise AssertionError("the replica outlived its parent")


def test_the_cli_needs_a_store_and_names_the_problem(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tidegate", "replica", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "--storage" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "tidegate", "replica", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "--spark-master" in out.stdout


def test_explicit_blob_and_consensus_urls(tmp_path: Path) -> None:
    """``--blob``/``--consensus`` instead of ``--storage``; ``--storage`` as a file:// URL."""
    from tidegate.runtime.storage import default_urls

    blob, consensus = default_urls(tmp_path)
    for extra in (["--blob", blob, "--consensus", consensus], ["--storage", f"file://{tmp_path}"]):
        with replica_process(tmp_path, *extra, with_storage=False, with_metrics=False) as replica:
            assert replica.metrics_address is None
            assert replica.terminate() == 0, replica.logs_text()


def _pem_pair(tmp: Path) -> tuple[Path, Path, bytes]:
    """A CA-signed certificate for 127.0.0.1: (cert file, key file, CA PEM)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def build(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            b = b.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        return b.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test ca")])
    ca = build("test ca", ca_key, ca_name, ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = build("replica", key, ca_name, ca_key, False)
    cert_file, key_file = tmp / "replica.pem", tmp / "replica.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file, ca.public_bytes(serialization.Encoding.PEM)


def test_token_and_tls(tmp_path: Path) -> None:
    from tidegate.runtime.transport import Unauthenticated
    from tidegate.runtime.transport.grpc_client import ClientTls, GrpcTransport

    cert, key, ca = _pem_pair(tmp_path)
    flags = ("--token", "s3cret", "--tls-cert", str(cert), "--tls-key", str(key))
    with replica_process(tmp_path, *flags) as replica:

        async def main() -> None:
            tls = ClientTls(ca)
            with pytest.raises(Unauthenticated):
                await GrpcTransport(tls=tls).connect(replica.address)
            stream = await GrpcTransport(tls=tls, token="s3cret").connect(replica.address)
            c = Client(stream)
            await c.send(Hello(uuid.uuid4()), CreateInstance(InstanceConfig()))
            await c.initialized()
            assert await c.drain(0.2) == []
            await c.close()

        anyio.run(main)


def test_introspection_logs_are_indexes_the_controller_can_peek(tmp_path: Path) -> None:
    from tidegate.spec.protocol import Peek, PeekDescription, PeekResponse, PeekRows

    steps = fresh_id()
    config = InstanceConfig(
        LoggingConfig(enable_logging=True, index_logs=(("dataflow_steps", steps),))
    )
    with replica_process(tmp_path) as replica:

        async def main() -> None:
            c = await Client.connect(replica.address, start=False)
            await c.send(Hello(uuid.uuid4()), CreateInstance(config))
            await c.initialized()
            first = await c.until(lambda r: isinstance(r, Frontiers) and r.id == steps)
            assert isinstance(first, Frontiers) and first.output is not None
            seen = int(first.output.elements[0])
            # Log times are wall-clock milliseconds: wait for a few more steps, then read.
            await c.until(
                lambda r: (
                    isinstance(r, Frontiers)
                    and r.id == steps
                    and r.output is not None
                    and int(r.output.elements[0]) > seen + 50
                )
            )
            p = Peek(PeekDescription(uuid.uuid4(), steps, seen + 50))
            await c.send(p)
            r = await c.answer(p.peek.uuid)
            assert isinstance(r, PeekResponse) and isinstance(r.result, PeekRows)
            assert r.result.rows, "no step was logged"
            await c.close()

        anyio.run(main)


def test_exit_with_the_process_named_by_tidegate_parent_pid(tmp_path: Path) -> None:
    named = subprocess.Popen(["sleep", "60"])
    try:
        env = {"TIDEGATE_PARENT_PID": str(named.pid)}
        with replica_process(tmp_path, "--exit-with-parent", env=env) as replica:
            named.kill()
            named.wait(10)
            assert replica.proc.wait(20) == 0, replica.logs_text()
    finally:
        if named.poll() is None:
            named.kill()


def test_a_taken_address_fails_startup_with_a_log_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [
                *(sys.executable, "-m", "tidegate", "replica", "--executor", "python"),
                *("--listen", f"127.0.0.1:{port}", "--storage", str(tmp_path)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1 and out.stdout == ""
    events = [json.loads(line)["event"] for line in out.stderr.splitlines() if line.startswith("{")]
    assert "startup_failed" in events
