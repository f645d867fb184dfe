"""One contract for every implementation of the transport port (runtime/transport/port.py), in both protocols.

Each test runs against: the simulated transport (trio, virtual clock); gRPC with
the replica server in this process (trio and asyncio callers); and gRPC with the
replica server in another process over loopback (trio and asyncio callers) --
each in the compute and in the storage protocol. The replica is the scripted
:class:`~tidegate.runtime.transport.echo.EchoReplica` and
:class:`~tidegate.runtime.transport.echo.StorageEchoReplica`, both served on
one port (one endpoint in the simulator): a stream of one protocol never
disturbs the other's.
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
    COMPUTE,
    STORAGE,
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
    Transport,
    Unauthenticated,
    VersionMismatch,
    WireProtocol,
)
from tidegate.runtime.transport.echo import EchoReplica, StorageEchoReplica
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
from tidegate.spec.storage import (
    CollectionDescription,
    DroppedId,
    RunIngestion,
    StatusUpdate,
    StorageAllowCompaction,
    StorageFrontierUpper,
    StorageHello,
)

pytestmark = pytest.mark.timeout(120)

TOKEN = "s3cret"


def u(n: int) -> GlobalId:
    return GlobalId.user(n)


def peek(n: int, t: int) -> Peek:
    return Peek(PeekDescription(uuid.UUID(int=n), u(n), t))


class Script:
    """What the contract sends in one protocol, and what the echo replica answers.

    ``ping(i)`` is a command the echo answers at once with a response naming
    ``u(i)`` and carrying ``"conn=<n> seq=<k>"`` (:meth:`note`); ``batch`` a
    few commands of other kinds and the answers they get, in order.
    """

    protocol: WireProtocol[Any, Any]

    def hello(self, n: int) -> Any:
        raise NotImplementedError

    def ping(self, i: int) -> Any:
        raise NotImplementedError

    def pinged(self, response: Any) -> GlobalId:
        raise NotImplementedError

    def note(self, response: Any) -> str:
        raise NotImplementedError

    def batch(self) -> tuple[list[Any], list[Any]]:
        raise NotImplementedError


class ComputeScript(Script):
    protocol = COMPUTE

    def hello(self, n: int) -> Any:
        return Hello(uuid.UUID(int=n))

    def ping(self, i: int) -> Any:
        return Schedule(u(i))

    def pinged(self, response: Any) -> GlobalId:
        assert isinstance(response, Status)
        return response.id

    def note(self, response: Any) -> str:
        assert isinstance(response, Status)
        return response.message

    def batch(self) -> tuple[list[Any], list[Any]]:
        f = Antichain([5])
        commands = [peek(3, 10), AllowCompaction(u(4), f), CancelPeek(uuid.UUID(int=9))]
        answers = [
            PeekResponse(uuid.UUID(int=3), PeekRows((((3, 10), 1),))),
            Frontiers(u(4), write=f, input=f, output=f),
            PeekResponse(uuid.UUID(int=9), PeekCanceled()),
        ]
        return commands, answers


class StorageScript(Script):
    protocol = STORAGE

    def hello(self, n: int) -> Any:
        return StorageHello(uuid.UUID(int=n))

    def ping(self, i: int) -> Any:
        return RunIngestion(u(i), CollectionDescription(), Antichain([0]))

    def pinged(self, response: Any) -> GlobalId:
        assert isinstance(response, StatusUpdate)
        return response.id

    def note(self, response: Any) -> str:
        assert isinstance(response, StatusUpdate) and response.hint is not None
        return response.hint

    def batch(self) -> tuple[list[Any], list[Any]]:
        f = Antichain([5])
        commands = [
            StorageAllowCompaction(u(4), f),
            StorageAllowCompaction(u(7), Antichain()),
            StorageAllowCompaction(u(8), Antichain([9])),
        ]
        answers = [
            StorageFrontierUpper(u(4), f),
            DroppedId(u(7)),
            StorageFrontierUpper(u(8), at(9)),
        ]
        return commands, answers


def at(t: int) -> Antichain:
    return Antichain([t])


SCRIPTS: dict[str, Script] = {"compute": ComputeScript(), "storage": StorageScript()}


@dataclass(frozen=True)
class Case:
    kind: str  # "sim" | "grpc" (server in this process) | "grpc-proc" (server in another process)
    backend: str
    protocol: str = "compute"

    def __str__(self) -> str:
        return f"{self.protocol}-{self.kind}-{self.backend}"

    @property
    def script(self) -> Script:
        return SCRIPTS[self.protocol]


CASES = [
    Case(kind, backend, protocol)
    for protocol in ("compute", "storage")
    for kind, backend in (
        ("sim", "trio"),
        ("grpc", "trio"),
        ("grpc", "asyncio"),
        ("grpc-proc", "trio"),
        ("grpc-proc", "asyncio"),
    )
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
        self.script = case.script
        self.address = address
        self._goes_away = goes_away
        self.endpoints: dict[str, SimReplicaEndpoint] = {}

    def transport(
        self, *, version: str | None = "own", token: str | None = TOKEN
    ) -> Transport[Any, Any]:
        protocol = self.script.protocol
        v = protocol.version if version == "own" else version
        if self.case.kind == "sim":
            return SimTransport(self.endpoints, protocol=protocol, version=v, token=token)
        return GrpcTransport(protocol=protocol, version=v, token=token)

    def other_transport(self) -> Transport[Any, Any]:
        """A transport of the other protocol to the same replica."""
        other = STORAGE if self.script.protocol is COMPUTE else COMPUTE
        if self.case.kind == "sim":
            return SimTransport(self.endpoints, protocol=other, token=TOKEN)
        return GrpcTransport(protocol=other, token=TOKEN)

    async def replica_goes_away(self) -> None:
        await self._goes_away()

    def unreachable_address(self) -> str:
        return "nobody" if self.case.kind == "sim" else "127.0.0.1:1"


@asynccontextmanager
async def open_harness(case: Case, proc: ProcServer) -> AsyncIterator[Harness]:
    if case.kind == "sim":
        kernel = Kernel()
        network = SimNetwork(kernel, SeededChoices(7), latency_ms=(1, 5))
        endpoint = SimReplicaEndpoint(
            network, "r1", EchoReplica(), storage=StorageEchoReplica(), token=TOKEN
        )

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
        server = ReplicaServer(
            compute=EchoReplica(), storage=StorageEchoReplica(), token=TOKEN
        ).start()

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


@pytest.fixture(
    params=[
        pytest.param(c, id=str(c), marks=[pytest.mark.processes] if c.kind == "grpc-proc" else [])
        for c in CASES
    ]
)
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


# -- the contract ---------------------------------------------------------------------------


def test_order_is_preserved_both_ways(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        async with await h.transport().connect(h.address) as s:
            await s.send(sc.hello(1))
            for i in range(1, 21):
                await s.send(sc.ping(i))
            got = [await s.receive() for _ in range(20)]
            assert [sc.pinged(r) for r in got] == [u(i) for i in range(1, 21)]
            assert [sc.note(r).split()[1] for r in got] == [f"seq={i + 1}" for i in range(1, 21)]

    run(body)


def test_many_messages_flow_concurrently_in_order(run: Callable[[Body], None]) -> None:
    n = 2000

    async def body(h: Harness) -> None:
        sc = h.script
        async with await h.transport().connect(h.address) as s:
            got: list[Any] = []

            async def consume() -> None:
                for _ in range(n):
                    got.append(await s.receive())

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                for start in range(0, n, 100):
                    await s.send_many([sc.ping(i) for i in range(start, start + 100)])
            assert [sc.pinged(r) for r in got] == [u(i) for i in range(n)]

    run(body)


def test_a_batch_is_sent_in_order_and_each_command_answered(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        commands, answers = sc.batch()
        async with await h.transport().connect(h.address) as s:
            await s.send_many([])
            await s.send_many([*commands, sc.ping(6)])
            got = [await s.receive() for _ in range(len(commands) + 1)]
            assert got[:-1] == answers
            assert sc.pinged(got[-1]) == u(6)

    run(body)


def test_cancelling_a_receive_loses_nothing(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        async with await h.transport().connect(h.address) as s:
            with anyio.move_on_after(0.05) as scope:
                await s.receive()
            assert scope.cancelled_caught
            await s.send(sc.ping(1))
            early = []
            with anyio.move_on_after(0):  # cancelled while the answer is in flight
                early.append(await s.receive())
            await s.send(sc.ping(2))
            got = early + [await s.receive() for _ in range(2 - len(early))]
            assert [sc.pinged(r) for r in got] == [u(1), u(2)]

    run(body)


def test_replica_going_away_is_connection_lost(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        s = await h.transport().connect(h.address)
        await s.send(sc.ping(1))
        assert sc.pinged(await s.receive()) == u(1)
        await h.replica_goes_away()
        with pytest.raises(ConnectionLost):
            await s.receive()
        with pytest.raises(ConnectionLost):
            await s.receive()  # and stays lost
        with pytest.raises(ConnectionLost):
            await s.send(sc.ping(2))
        await s.aclose()
        with pytest.raises(ConnectionRefused):
            await h.transport().connect(h.address)

    run(body)


def test_sends_alone_notice_a_break(run: Callable[[Body], None]) -> None:
    """A sender that never receives still learns of the break: sends raise ConnectionLost."""

    async def body(h: Harness) -> None:
        sc = h.script
        s = await h.transport().connect(h.address)
        await s.send(sc.ping(1))
        assert sc.pinged(await s.receive()) == u(1)
        await h.replica_goes_away()
        with anyio.fail_after(10), pytest.raises(ConnectionLost):
            while True:
                await s.send(sc.ping(2))
                await anyio.sleep(0.01)
        with pytest.raises(ConnectionLost):
            await s.send_many([sc.ping(3), sc.ping(4)])
        await s.aclose()

    run(body)


def test_reconnect_gives_a_fresh_stream(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        transport = h.transport()
        first = await transport.connect(h.address)
        await first.send(sc.ping(1))
        one = await first.receive()
        await first.aclose()
        await first.aclose()  # idempotent
        with pytest.raises(StreamClosed):
            await first.receive()
        with pytest.raises(StreamClosed):
            await first.send(sc.ping(1))
        assert [r async for r in first] == []
        async with await transport.connect(h.address) as second:
            await second.send_many([sc.ping(2), sc.ping(3)])
            answers = []
            async for response in second:
                answers.append(response)
                if len(answers) == 2:
                    break
        conn_one = int(sc.note(one).split()[0].removeprefix("conn="))
        assert [sc.note(a) for a in answers] == [
            f"conn={conn_one + 1} seq=1",
            f"conn={conn_one + 1} seq=2",
        ]

    run(body)


def test_newest_connection_wins(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc = h.script
        transport = h.transport()
        old = await transport.connect(h.address)
        await old.send(sc.ping(1))
        assert sc.pinged(await old.receive()) == u(1)
        async with await transport.connect(h.address) as new:
            with pytest.raises(ConnectionLost, match="preempted"):
                await old.receive()
            await new.send(sc.ping(2))
            assert sc.pinged(await new.receive()) == u(2)
        await old.aclose()

    run(body)


def test_a_stream_of_the_other_protocol_preempts_nothing(run: Callable[[Body], None]) -> None:
    """Both protocols are served side by side: each keeps its own newest stream."""

    async def body(h: Harness) -> None:
        sc = h.script
        async with await h.transport().connect(h.address) as mine:
            await mine.send(sc.ping(1))
            assert sc.pinged(await mine.receive()) == u(1)
            other = h.other_transport()
            async with await other.connect(h.address), await other.connect(h.address):
                await mine.send(sc.ping(2))
                assert sc.pinged(await mine.receive()) == u(2)

    run(body)


def test_version_mismatch_is_refused_without_preempting(run: Callable[[Body], None]) -> None:
    async def body(h: Harness) -> None:
        sc, ours = h.script, h.script.protocol.version
        async with await h.transport().connect(h.address) as current:
            with pytest.raises(VersionMismatch, match=f"speaks {ours}") as info:
                await h.transport(version="999").connect(h.address)
            assert (info.value.ours, info.value.theirs) == ("999", ours)
            with pytest.raises(VersionMismatch, match="no version"):
                await h.transport(version=None).connect(h.address)
            await current.send(sc.ping(1))
            assert sc.pinged(await current.receive()) == u(1)

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
