"""One replica server (or simulated endpoint), two protocols: what each serves, and what it refuses.

The transport contract (``test_transport_contract.py``) runs in both protocols;
these pin what only concerns serving them side by side: a protocol nobody
serves is refused at ``connect``, health reports each service, ``stop`` ends
the streams of both, streams are counted per protocol, and the constructors
refuse a replica serving nothing.
"""

from __future__ import annotations

import anyio
import grpc
import pytest
import trio.testing
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidegate.runtime.transport import (
    COMPUTE,
    STORAGE,
    ConnectionLost,
    ConnectionRefused,
)
from tidegate.runtime.transport.echo import EchoReplica, StorageEchoReplica
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.runtime.transport.grpc_server import SERVICE, STORAGE_SERVICE, ReplicaServer
from tidegate.sim.choices import SeededChoices
from tidegate.sim.kernel import Kernel
from tidegate.sim.network import SimNetwork
from tidegate.sim.transport import SimReplicaEndpoint, SimTransport
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import Schedule
from tidegate.spec.storage import StorageAllowCompaction, StorageFrontierUpper

pytestmark = pytest.mark.timeout(60)

U1 = GlobalId.user(1)


def test_a_server_needs_a_handler_and_takes_its_address_first_or_by_name() -> None:
    with pytest.raises(TypeError, match="compute or a storage handler"):
        ReplicaServer()
    with pytest.raises(TypeError, match="twice"):
        ReplicaServer(EchoReplica(), compute=EchoReplica())
    with pytest.raises(TypeError, match="twice"):
        ReplicaServer("127.0.0.1:0", address="127.0.0.1:0", storage=StorageEchoReplica())
    with ReplicaServer("127.0.0.1:0", storage=StorageEchoReplica()) as server:
        assert server.protocols == ("storage",) and server.port > 0
    with ReplicaServer(EchoReplica(), address="127.0.0.1:0") as server:  # the compute handler
        assert server.protocols == ("compute",)


@pytest.mark.parametrize("served", ["compute", "storage"])
def test_a_protocol_the_server_does_not_serve_is_refused(served: str) -> None:
    handlers = {"compute": EchoReplica()} if served == "compute" else {}
    storage = StorageEchoReplica() if served == "storage" else None
    other = STORAGE if served == "compute" else COMPUTE
    with ReplicaServer(storage=storage, **handlers) as server:

        async def main() -> None:
            with pytest.raises(ConnectionRefused, match="UNIMPLEMENTED"):
                await GrpcTransport(protocol=other).connect(server.address)

        anyio.run(main)


def test_health_reports_each_service_and_stop_ends_the_streams_of_both() -> None:
    server = ReplicaServer(compute=EchoReplica(), storage=StorageEchoReplica()).start()
    with grpc.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE, STORAGE_SERVICE):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

    async def main() -> None:
        compute = await GrpcTransport().connect(server.address)
        storage = await GrpcTransport(protocol=STORAGE).connect(server.address)
        await compute.send(Schedule(U1))
        await storage.send(StorageAllowCompaction(U1, Antichain([3])))
        await compute.receive()
        assert await storage.receive() == StorageFrontierUpper(U1, Antichain([3]))
        assert (server.accepted_by(COMPUTE), server.accepted_by("storage")) == (1, 1)
        assert server.accepted == 2
        await anyio.to_thread.run_sync(server.stop, 0)
        for stream in (compute, storage):
            with pytest.raises(ConnectionLost, match="UNAVAILABLE"):
                await stream.receive()
            await stream.aclose()

    anyio.run(main)


def test_a_simulated_endpoint_serves_a_handler_per_protocol() -> None:
    kernel = Kernel()
    network = SimNetwork(kernel, SeededChoices(3), latency_ms=(1, 2))
    with pytest.raises(TypeError, match="compute or a storage handler"):
        SimReplicaEndpoint(network, "r0")
    compute_only = SimReplicaEndpoint(network, "r1", EchoReplica())
    storage_only = SimReplicaEndpoint(network, "r2", storage=StorageEchoReplica())
    endpoints = {"r1": compute_only, "r2": storage_only}

    async def main() -> None:
        async def drive() -> None:
            while True:
                await kernel.run(kernel.now_ms + 10)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            with pytest.raises(ConnectionRefused, match="does not serve the storage protocol"):
                await SimTransport(endpoints, protocol=STORAGE).connect("r1")
            with pytest.raises(ConnectionRefused, match="does not serve the compute protocol"):
                await SimTransport(endpoints).connect("r2")
            async with await SimTransport(endpoints, protocol=STORAGE).connect("r2") as s:
                await s.send(StorageAllowCompaction(U1, Antichain([4])))
                assert await s.receive() == StorageFrontierUpper(U1, Antichain([4]))
            tg.cancel_scope.cancel()

    anyio.run(main, backend="trio", backend_options={"clock": trio.testing.MockClock(0)})
