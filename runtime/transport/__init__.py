"""The controller-replica transport: one port, a gRPC and a simulated implementation.

* :mod:`.port` -- :class:`Transport` and :class:`ReplicaStream`, the port the controller driver uses;
* :mod:`.handler` -- what a replica implements to serve streams (sessions, response sink);
* :mod:`.errors` -- :class:`ConnectionLost`, :class:`ConnectionRefused`, :class:`VersionMismatch`, ...;
* :mod:`.version` -- the protocol version and its metadata header;
* :mod:`.aio_thread` -- the bridge from anyio to the one asyncio loop thread grpc.aio runs on;
* :mod:`.grpc_client` -- :class:`GrpcTransport` (import it explicitly: it loads grpc);
* :mod:`.grpc_server` -- :class:`ReplicaServer`, the replica's sync gRPC server;
* :mod:`.echo` -- a scripted replica for tests and benchmarks.

The simulated implementation is :class:`tidegate.sim.transport.SimTransport`.
"""

from .errors import (
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
    TransportError,
    Unauthenticated,
    VersionMismatch,
)
from .handler import ReplicaConnection, ReplicaHandler, ResponseSink
from .port import ReplicaStream, Transport
from .version import AUTH_HEADER, PROTOCOL_VERSION, VERSION_HEADER

__all__ = [
    "AUTH_HEADER",
    "PROTOCOL_VERSION",
    "VERSION_HEADER",
    "ConnectionLost",
    "ConnectionRefused",
    "ReplicaConnection",
    "ReplicaHandler",
    "ReplicaStream",
    "ResponseSink",
    "StreamClosed",
    "Transport",
    "TransportError",
    "Unauthenticated",
    "VersionMismatch",
]
