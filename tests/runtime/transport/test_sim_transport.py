"""What only the simulated transport has: virtual latency, network cuts, determinism."""

from __future__ import annotations

import anyio
import pytest

from tidegate.runtime.transport import ConnectionLost, ConnectionRefused
from tidegate.runtime.transport.echo import EchoReplica
from tidegate.sim.choices import SeededChoices
from tidegate.sim.kernel import Kernel, run_virtual
from tidegate.sim.network import SimNetwork
from tidegate.sim.transport import SimReplicaEndpoint, SimReplicaStream, SimTransport
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import Schedule
from tidegate.spec.protocol.responses import Status

pytestmark = pytest.mark.timeout(60)


def world(seed: int) -> tuple[Kernel, SimReplicaEndpoint, SimTransport, EchoReplica]:
    kernel = Kernel()
    network = SimNetwork(kernel, SeededChoices(seed), latency_ms=(1, 20))
    replica = EchoReplica()
    endpoint = SimReplicaEndpoint(network, "r1", replica)
    return kernel, endpoint, SimTransport({"r1": endpoint}), replica


async def drive(kernel: Kernel) -> None:
    while True:
        await kernel.run(kernel.now_ms + 10)


def trace(seed: int) -> list[tuple[int, str]]:
    kernel, _, transport, _ = world(seed)

    async def stamped(s: SimReplicaStream) -> tuple[int, str]:
        response = await s.receive()
        return kernel.now_ms, str(response)

    async def main() -> list[tuple[int, str]]:
        out = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, kernel)
            s = await transport.connect("r1")
            for i in range(30):
                await s.send(Schedule(GlobalId.user(i)))
                if i % 3 == 0:
                    out.append(await stamped(s))
            out.extend([await stamped(s) for _ in range(20)])
            tg.cancel_scope.cancel()
        return out

    return run_virtual(main)


def test_same_seed_same_delivery_times_and_latency_is_virtual():
    one = trace(11)
    assert one == trace(11)
    assert one != trace(12)
    assert one[0][0] >= 2  # at least one millisecond each way
    assert [r for _, r in one] == [
        str(Status(GlobalId.user(i), f"conn=1 seq={i + 1}")) for i in range(30)
    ]


def test_a_cut_loses_in_flight_messages_and_closes_the_session():
    kernel, endpoint, transport, replica = world(3)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, kernel)
            s = await transport.connect("r1")
            await s.send(Schedule(GlobalId.user(1)))
            endpoint.cut()  # before the command arrives
            with pytest.raises(ConnectionLost, match="cut"):
                await s.receive()
            assert replica.sessions[0].commands == []
            assert replica.sessions[0].closed
            again = await transport.connect("r1")
            await again.send(Schedule(GlobalId.user(2)))
            assert (await again.receive()).id == GlobalId.user(2)
            endpoint.crash()
            with pytest.raises(ConnectionLost, match="went away"):
                await again.receive()
            with pytest.raises(ConnectionRefused):
                await transport.connect("r1")
            endpoint.restart()
            await (await transport.connect("r1")).aclose()
            tg.cancel_scope.cancel()

    run_virtual(main)
    assert len(replica.sessions) == 3


def test_the_network_carries_encoded_frames_and_large_messages_as_fragments():
    """What travels is the codec's bytes, framed: with small frames a message is several
    network messages, reassembled whole; an echoed status arrives equal to what was sent."""
    kernel, endpoint, transport, replica = world(5)
    endpoint.network.max_frame_bytes = 3

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, kernel)
            s = await transport.connect("r1")
            for i in range(3):
                await s.send(Schedule(GlobalId.user(100 + i)))
            got = [await s.receive() for _ in range(3)]
            assert [r.id for r in got] == [GlobalId.user(100 + i) for i in range(3)]
            assert replica.sessions[0].commands == [
                Schedule(GlobalId.user(100 + i)) for i in range(3)
            ]
            tg.cancel_scope.cancel()

    run_virtual(main)
    assert endpoint.network.fragmented >= 6  # every command and every status
    assert endpoint.network.messages_delivered == 6  # the frames of a message travel together


def test_bytes_that_do_not_decode_cut_the_stream_and_are_reported():
    """As the gRPC server does (INVALID_ARGUMENT), a frame that is no command ends the
    stream; in a simulation both ends are the product's, so the endpoint reports it."""
    kernel, endpoint, transport, replica = world(6)
    cuts: list[tuple[str, str]] = []
    endpoint.on_cut = lambda name, reason: cuts.append((name, reason))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drive, kernel)
            s = await transport.connect("r1")
            link = s._link
            assert link is not None and link.conn is not None
            endpoint.network.send_to_replica(link.conn, [b"\xff\xff\xff"])
            with pytest.raises(ConnectionLost, match="malformed command"):
                await s.receive()
            tg.cancel_scope.cancel()

    run_virtual(main)
    assert cuts and cuts[0][0] == "r1" and cuts[0][1].startswith("malformed command")
    assert replica.sessions[0].closed
