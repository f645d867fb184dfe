"""One contract for every implementation of the transport port (runtime/transport/port.py).

Each test runs against: the simulated transport (trio, virtual clock); gRPC with
the replica server in this process (trio and asyncio callers); and gRPC with the
replica server in another process over loopback (trio and asyncio callers). The
replica is the scripted :class:`~tidegate.runtime.transport.echo.EchoReplica`.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import trio.testing

from tidegate.runtime.transport import (
    PROTOCOL_VERSION,
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
    Transport,
    Unauthenticated,
    VersionMismatch,
)
from tidegate.runtime.transport.echo import EchoReplica
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.sim.choices import SeededChoices
from tidegate.sim.kernel import Kernel
from tidegate.sim.network import SimNetwork
from tidegate.sim.transport import SimReplicaEndpoint, SimTransport
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    AllowCompaction,
    CancelPeek,
    Hello,
    Peek,
    Schedule,
)
from tidegate.spec.protocol.responses import (
    Frontiers,
    PeekCanceled,
    PeekResponse,
    PeekRows,
    Status,
)
from tidegate.spec.protocol.types import PeekDescription

pytestmark = pytest.mark.timeout(120)

TOKEN = "s3cret"


@dataclass(frozen=True)
class Case:
    kind: str  # "sim" | "grpc" (server in this process) | "grpc-proc" (server in another process)
    backend: str

    def __str__(self) -> str:
        return f"{self.kind}-{self.backend}"


CASES = [
    Case("sim", "trio"),
    Case("grpc", "trio"),
    Case("grpc", "asyncio"),
    Case("grpc-proc", "trio"),
    Case("grpc-proc", "asyncio"),
]


class ProcServer:
    """An echo replica server in a child process, (re)started on demand."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0

    def address(self) -> str:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tidegate.runtime.transport.echo", "--token", TOKEN],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline().split()
            assert line[:1] == ["ready"], f"replica process failed to start: {line!r}"
            self.port = int(line[1])
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Harness:
    """A replica at :attr:`address` and a way to make transports to it."""

    def __init__(self, case: Case, address: str, goes_away: Callable[[], Awaitable[None]]):
        self.case = case
        self.address = address
        self._goes_away = goes_away
        self.endpoints: dict[str, SimReplicaEndpoint] = {}

    def transport(
        self, *, version: str | None = PROTOCOL_VERSION, token: str | None = TOKEN
    ) -> Transport:
        if self.case.kind == "sim":
            return SimTransport(self.endpoints, version=version, token=token)
        return GrpcTransport(version=version, token=token)

    async def replica_goes_away(self) -> None:
        await self._goes_away()

    def unreachable_address(self) -> str:
        return "nobody" if self.case.kind == "sim" else "127.0.0.1:1"


@asynccontextmanager
async def open_harness(case: Case, proc: ProcServer) -> AsyncIterator[Harness]:
    if case.kind == "sim":
        kernel = Kernel()
        network = SimNetwork(kernel, SeededChoices(7), latency_ms=(1, 5))
        endpoint = SimReplicaEndpoint(network, "r1", EchoReplica(), token=TOKEN)

        async def crash() -> None:
            endpoint.crash()

        harness = Harness(case, "r1", crash)
        harness.endpoints["r1"] = endpoint

        async def drive() -> None:
            while True:
                await kernel.run(kernel.now_ms + 10)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            yield harness
            tg.cancel_scope.cancel()
    elif case.kind == "grpc":
        server = ReplicaServer(EchoReplica(), token=TOKEN).start()

        async def stop() -> None:
            await anyio.to_thread.run_sync(server.stop, 0)

        try:
            yield Harness(case, server.address, stop)
        finally:
            server.stop(0)
    else:

        async def kill() -> None:
            proc.kill()

        yield Harness(case, proc.address(), kill)


@pytest.fixture(scope="module")
def proc_server() -> Any:
    server = ProcServer()
    yield server
    server.stop()


Body = Callable[[Harness], Awaitable[None]]


@pytest.fixture(params=CASES, ids=str)
def run(request: Any, proc_server: ProcServer) -> Callable[[Body], None]:
    case: Case = request.param

    def runner(body: Body) -> None:
        async def main() -> None:
            async with open_harness(case, proc_server) as harness:
                with anyio.fail_after(30):
                    await body(harness)

        options = (
            {"clock": trio.testing.MockClock(autojump_threshold=0)} if case.kind == "sim" else {}
        )
        anyio.run(main, backend=case.backend, backend_options=options)

    return runner


def u(n: int) -> GlobalId:
    return GlobalId.user(n)


def peek(n: int, t: int) -> Peek:
    return Peek(PeekDescription(uuid.UUID(int=n), u(n), t))


# -- the contract ---------------------------------------------------------------------------


def test_order_is_preserved_both_ways(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        async with await h.transport().connect(h.address) as s:
            await s.send(Hello(uuid.UUID(int=1)))
            for i in range(1, 21):
                await s.send(Schedule(u(i)))
            got = [await s.receive() for _ in range(20)]
            assert [r.id for r in got if isinstance(r, Status)] == [u(i) for i in range(1, 21)]
            assert [r.message.split()[1] for r in got if isinstance(r, Status)] == [
                f"seq={i + 1}" for i in range(1, 21)
            ]

    run(body)


def test_many_messages_flow_concurrently_in_order(run: Callable[[Body], None]) -> None:
    n = 2000

    async def body(h: Harness) -> None:
        async with await h.transport().connect(h.address) as s:
            got: list[Any] = []

            async def consume() -> None:
                for _ in range(n):
                    got.append(await s.receive())

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                for start in range(0, n, 100):
                    await s.send_many([Schedule(u(i)) for i in range(start, start + 100)])
            assert [r.id for r in got] == [u(i) for i in range(n)]

    run(body)


def test_a_batch_is_sent_in_order_and_each_command_answered(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        async with await h.transport().connect(h.address) as s:
            await s.send_many([])
            await s.send_many(
                [
                    peek(3, 10),
                    AllowCompaction(u(4), Antichain([5])),
                    CancelPeek(uuid.UUID(int=9)),
                    Schedule(u(6)),
                ]
            )
            got = [await s.receive() for _ in range(4)]
            assert got[0] == PeekResponse(uuid.UUID(int=3), PeekRows((((3, 10), 1),)))
            f = Antichain([5])
            assert got[1] == Frontiers(u(4), write=f, input=f, output=f)
            assert got[2] == PeekResponse(uuid.UUID(int=9), PeekCanceled())
            assert isinstance(got[3], Status)
            assert got[3].id == u(6)

    run(body)


def test_cancelling_a_receive_loses_nothing(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        async with await h.transport().connect(h.address) as s:
            with anyio.move_on_after(0.05) as scope:
                await s.receive()
            assert scope.cancelled_caught
            await s.send(Schedule(u(1)))
            early = []
            with anyio.move_on_after(0):  # cancelled while the answer is in flight
                early.append(await s.receive())
            await s.send(Schedule(u(2)))
            got = early + [await s.receive() for _ in range(2 - len(early))]
            assert [r.id for r in got] == [u(1), u(2)]

    run(body)


def test_replica_going_away_is_connection_lost(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        s = await h.transport().connect(h.address)
        await s.send(Schedule(u(1)))
        assert (await s.receive()).id == u(1)
        await h.replica_goes_away()
        with pytest.raises(ConnectionLost):
            await s.receive()
        with pytest.raises(ConnectionLost):
            await s.receive()  # and stays lost
        with pytest.raises(ConnectionLost):
            await s.send(Schedule(u(2)))
        await s.aclose()
        with pytest.raises(ConnectionRefused):
            await h.transport().connect(h.address)

    run(body)


def test_sends_alone_notice_a_break(run: Callable[[Body], None]) -> None:
    """A sender that never receives still learns of the break: sends raise ConnectionLost."""

    async def body(h: Harness) -> None:
        s = await h.transport().connect(h.address)
        await s.send(Schedule(u(1)))
        assert (await s.receive()).id == u(1)
        await h.replica_goes_away()
        with anyio.fail_after(10), pytest.raises(ConnectionLost):
            while True:
                await s.send(Schedule(u(2)))
                await anyio.sleep(0.01)
        with pytest.raises(ConnectionLost):
            await s.send_many([Schedule(u(3)), Schedule(u(4))])
        await s.aclose()

    run(body)


def test_reconnect_gives_a_fresh_stream(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        transport = h.transport()
        first = await transport.connect(h.address)
        await first.send(Schedule(u(1)))
        one = await first.receive()
        await first.aclose()
        await first.aclose()  # idempotent
        with pytest.raises(StreamClosed):
            await first.receive()
        with pytest.raises(StreamClosed):
            await first.send(Schedule(u(1)))
        assert [r async for r in first] == []
        async with await transport.connect(h.address) as second:
            await second.send_many([Schedule(u(2)), Schedule(u(3))])
            answers = []
            async for response in second:
                answers.append(response)
                if len(answers) == 2:
                    break
        conn_one = int(one.message.split()[0].removeprefix("conn="))
        assert [a.message for a in answers] == [
            f"conn={conn_one + 1} seq=1",
            f"conn={conn_one + 1} seq=2",
        ]

    run(body)


def test_newest_connection_wins(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        transport = h.transport()
        old = await transport.connect(h.address)
        await old.send(Schedule(u(1)))
        assert (await old.receive()).id == u(1)
        async with await transport.connect(h.address) as new:
            with pytest.raises(ConnectionLost, match="preempted"):
                await old.receive()
            await new.send(Schedule(u(2)))
            assert (await new.receive()).id == u(2)
        await old.aclose()

    run(body)


def test_version_mismatch_is_refused_without_preempting(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        async with await h.transport().connect(h.address) as current:
            with pytest.raises(VersionMismatch, match=f"speaks {PROTOCOL_VERSION}") as info:
                await h.transport(version="999").connect(h.address)
            assert (info.value.ours, info.value.theirs) == ("999", PROTOCOL_VERSION)
            with pytest.raises(VersionMismatch, match="no version"):
                await h.transport(version=None).connect(h.address)
            await current.send(Schedule(u(1)))
            assert (await current.receive()).id == u(1)

    run(body)


def test_wrong_or_missing_token_is_unauthenticated(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        with pytest.raises(Unauthenticated, match="wrong"):
            await h.transport(token="guess").connect(h.address)
        with pytest.raises(Unauthenticated, match="missing"):
            await h.transport(token=None).connect(h.address)

    run(body)


def test_nobody_listening_is_connection_refused(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        with pytest.raises(ConnectionRefused):
            await h.transport().connect(h.unreachable_address())

    run(body)
