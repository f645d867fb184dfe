"""gRPC sends are queued, not awaited: a stalled replica holds senders back once the
send buffer (and the connection's flow-control window) is full, and nothing is lost
or reordered when it resumes; from trio and from asyncio callers. (That sends alone
notice a break is part of the transport contract, test_transport_contract.py.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import anyio
import pytest

from tidegate.runtime.transport import StreamClosed
from tidegate.runtime.transport.echo import EchoReplica
from tidegate.runtime.transport.grpc_client import GrpcReplicaStream, GrpcTransport
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.runtime.transport.handler import ReplicaConnection, ResponseSink
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import ComputeCommand, CreateDataflow, Schedule
from tidegate.spec.protocol.types import DataflowDescription

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["trio", "asyncio"]


class StalledSession:
    """An echo session that handles nothing until :attr:`release` is set."""

    def __init__(self, inner: ReplicaConnection, release: threading.Event) -> None:
        self.inner = inner
        self.release = release

    def on_command(self, command: ComputeCommand) -> None:
        self.release.wait(60)
        self.inner.on_command(command)

    def on_close(self) -> None:
        self.inner.on_close()


class StalledReplica:
    def __init__(self) -> None:
        self.echo = EchoReplica()
        self.release = threading.Event()

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> ReplicaConnection:
        return StalledSession(self.echo.on_connect(metadata, responses), self.release)


BULKY = CreateDataflow(DataflowDescription("x" * 32_000))  # unanswered, 32 kB on the wire


async def held_back(s: object, progress: Callable[[], int]) -> int:
    """Wait until the sender is held back for good: ``progress()`` still for 0.5 s while held.

    Polled, not slept for a fixed time: on a loaded machine filling the flow-control
    window can take longer than any fixed guess. Returns ``progress()`` at that point.
    """
    assert isinstance(s, GrpcReplicaStream)
    with anyio.fail_after(60):
        while True:
            before = progress()
            await anyio.sleep(0.5)
            if progress() == before and s._outbox._space is not None:
                return before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stalled_replica_holds_senders_back_and_loses_nothing(backend: str) -> None:
    replica = StalledReplica()
    server = ReplicaServer(replica).start()
    n = 600  # ~19 MB: beyond any flow-control window

    async def main() -> None:
        transport = GrpcTransport(send_buffer=4)
        async with await transport.connect(server.address) as s:
            sent = 0

            async def send_all() -> None:
                nonlocal sent
                for i in range(n):
                    await s.send_many([BULKY, Schedule(GlobalId.user(i))])
                    sent += 1

            async with anyio.create_task_group() as tg:
                tg.start_soon(send_all)
                held_at = await held_back(s, lambda: sent)
                await anyio.sleep(0.3)
                assert sent == held_at < n, "sends must wait while the replica reads nothing"
                # ... but only once the send buffer is full: those sends returned unwritten.
                assert isinstance(s, GrpcReplicaStream)
                assert s._outbox._unconsumed >= 4
                replica.release.set()
                got = [await s.receive() for _ in range(n)]
            assert [r.id for r in got] == [GlobalId.user(i) for i in range(n)]

    try:
        anyio.run(main, backend=backend)
    finally:
        replica.release.set()
        server.stop(0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_the_stream_releases_a_held_back_sender(backend: str) -> None:
    replica = StalledReplica()
    server = ReplicaServer(replica).start()

    async def main() -> None:
        s = await GrpcTransport(send_buffer=2).connect(server.address)
        outcome: list[BaseException] = []
        sent = 0

        async def send_forever() -> None:
            nonlocal sent
            try:
                while True:
                    await s.send(BULKY)
                    sent += 1
            except StreamClosed as e:
                outcome.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_forever)
            await held_back(s, lambda: sent)  # the window and the buffer are full
            assert not outcome
            with anyio.fail_after(10):
                await s.aclose()
        assert len(outcome) == 1

    try:
        anyio.run(main, backend=backend)
    finally:
        replica.release.set()
        server.stop(0)
