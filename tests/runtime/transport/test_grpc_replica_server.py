"""What only the gRPC implementation has: raw bytes on the wire, the health service,
mutual TLS, and the server's handling of a session that rejects a command."""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidegate.runtime.transport import (
    AUTH_HEADER,
    PROTOCOL_VERSION,
    VERSION_HEADER,
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
)
from tidegate.runtime.transport.echo import EchoReplica, EchoSession
from tidegate.runtime.transport.grpc_client import METHOD, ClientTls, GrpcTransport
from tidegate.runtime.transport.grpc_server import SERVICE, ReplicaServer, ServerTls
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
from tidegate.runtime.wire.codec import command_to_bytes
from tidegate.spec.errors import UnknownCollection
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import ComputeCommand, Hello, Schedule
from tidegate.spec.protocol.responses import Status

pytestmark = pytest.mark.timeout(120)

TOKEN = "s3cret"
GOOD_MD = ((VERSION_HEADER, PROTOCOL_VERSION), (AUTH_HEADER, f"Bearer {TOKEN}"))


@pytest.fixture(scope="module")
def replica_process() -> Iterator[str]:
    """An echo replica in another process; yields its address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tidegate.runtime.transport.echo", "--token", TOKEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["ready"], line
    yield f"127.0.0.1:{line[1]}"
    proc.stdin.close()
    proc.wait(10)


def raw_stream(address: str, requests: list[bytes]) -> grpc.RpcError:
    """Send ``requests`` as raw bytes on one stream; the error the server ends it with."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(METHOD)(iter(requests), metadata=GOOD_MD, timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            list(call)
        return info.value


def schedule_round_trip(address: str) -> Status:
    async def main() -> Status:
        async with await GrpcTransport(token=TOKEN).connect(address) as s:
            await s.send(Schedule(GlobalId.user(1)))
            response = await s.receive()
            assert isinstance(response, Status)
            return response

    return anyio.run(main)


@pytest.mark.processes
def test_malformed_bytes_are_invalid_argument_and_the_server_keeps_serving(replica_process: str):
    for garbage in [b"\xff\xff\xff\xff", b"\x0a\x05abc"]:
        error = raw_stream(replica_process, [command_to_bytes(Hello(uuid.UUID(int=1))), garbage])
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed command" in (error.details() or "")
        assert schedule_round_trip(replica_process).id == GlobalId.user(1)


@pytest.mark.processes
def test_an_empty_message_is_an_unknown_command(replica_process: str):
    error = raw_stream(replica_process, [b""])
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert schedule_round_trip(replica_process).id == GlobalId.user(1)


@pytest.mark.processes
def test_health_service_reports_serving(replica_process: str):
    with grpc.insecure_channel(replica_process) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", SERVICE):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_stop_reports_not_serving_and_ends_the_stream():
    server = ReplicaServer(EchoReplica()).start()

    async def main() -> None:
        stream = await GrpcTransport().connect(server.address)
        await anyio.to_thread.run_sync(server.stop, 0)
        with pytest.raises(ConnectionLost):
            await stream.receive()
        await stream.aclose()

    anyio.run(main)
    assert (
        server.health.Check(health_pb2.HealthCheckRequest(service=SERVICE), None).status
        == health_pb2.HealthCheckResponse.NOT_SERVING
    )


class Picky:
    """A handler whose sessions reject ``Schedule`` for unknown ids."""

    def __init__(self) -> None:
        self.closed: list[int] = []

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> ReplicaConnection:
        outer = self

        class Session(EchoSession):
            def on_command(self, command: ComputeCommand) -> None:
                if isinstance(command, Schedule) and command.id.value > 100:
                    raise UnknownCollection(f"no collection {command.id}")
                super().on_command(command)

            def on_close(self) -> None:
                outer.closed.append(self.number)

        return Session(len(self.closed) + 1, responses)


def test_a_rejected_command_ends_the_stream_and_closes_the_session():
    handler = Picky()
    with ReplicaServer(handler) as server:

        async def main() -> None:
            async with await GrpcTransport().connect(server.address) as s:
                await s.send_many([Schedule(GlobalId.user(1)), Schedule(GlobalId.user(101))])
                assert (await s.receive()).id == GlobalId.user(1)
                with pytest.raises(ConnectionLost, match="UnknownCollection"):
                    await s.receive()

        anyio.run(main, backend="trio")
    assert handler.closed == [1]


# -- mutual TLS --------------------------------------------------------------------------------


def _cert(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway CA with a server and a client certificate: ca.pem, server.{pem,key}, client.{pem,key}."""
    root = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tidegate test CA")])
    ca = _cert("tidegate test CA", ca_key, ca_name, ca_key, ca=True)
    _write(root / "ca", ca_key, ca)
    for who in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        _write(root / who, key, _cert(who, key, ca_name, ca_key, ca=False))
    return root


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_mutual_tls(pki: Path, backend: str):
    tls = ServerTls.from_files(pki / "server.pem", pki / "server.key", pki / "ca.pem")
    with ReplicaServer(EchoReplica(), tls=tls, token=TOKEN) as server:
        address = f"localhost:{server.port}"
        with_cert = ClientTls.from_files(pki / "ca.pem", pki / "client.pem", pki / "client.key")
        without_cert = ClientTls.from_files(pki / "ca.pem")

        async def main() -> None:
            async with await GrpcTransport(tls=with_cert, token=TOKEN).connect(address) as s:
                await s.send(Schedule(GlobalId.user(5)))
                assert (await s.receive()).id == GlobalId.user(5)
            with pytest.raises(ConnectionRefused):
                await GrpcTransport(tls=without_cert, token=TOKEN).connect(address)
            with pytest.raises(ConnectionRefused):  # plaintext against a TLS port
                await GrpcTransport(token=TOKEN, connect_timeout=5).connect(address)

        anyio.run(main, backend=backend)


class SlowToAccept(EchoReplica):
    """A replica whose ``on_connect`` says it has begun, then waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> ReplicaConnection:
        self.entered.set()
        self.release.wait(30)
        return super().on_connect(metadata, responses)


def test_cancelling_connect_cancels_the_call():
    replica = SlowToAccept()
    with ReplicaServer(replica) as server:

        async def main() -> None:
            # Cancel only once the server is inside on_connect: a cancellation that
            # beats the call to the server (a loaded machine) would test nothing.
            async with anyio.create_task_group() as tg:
                outcome: list[str] = []

                async def connect() -> None:
                    try:
                        await GrpcTransport().connect(server.address)
                    except anyio.get_cancelled_exc_class():
                        outcome.append("cancelled")
                        raise
                    outcome.append("connected")

                tg.start_soon(connect)
                assert await anyio.to_thread.run_sync(replica.entered.wait, 30)
                tg.cancel_scope.cancel()
            assert outcome == ["cancelled"]

        anyio.run(main, backend="trio")
        replica.release.set()
        deadline = time.monotonic() + 30
        while not (replica.sessions and replica.sessions[0].closed):
            assert time.monotonic() < deadline, "the server never saw the call end"
            time.sleep(0.01)


def test_closing_the_transport_closes_its_streams_and_their_sessions():
    replica = EchoReplica()
    with ReplicaServer(replica) as server:

        async def main() -> None:
            transport = GrpcTransport()
            stream = await transport.connect(server.address)
            await stream.send(Schedule(GlobalId.user(1)))
            await stream.receive()
            await transport.aclose()
            with pytest.raises(StreamClosed):
                await stream.receive()
            with anyio.fail_after(5):
                while not replica.sessions[0].closed:
                    await anyio.sleep(0.01)

        anyio.run(main, backend="asyncio")
