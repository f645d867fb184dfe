"""The controller-replica transport: one port, a gRPC and a simulated implementation, two protocols.

* :mod:`.port` -- :class:`Transport` and :class:`ReplicaStream`, the port the controller driver uses
  (generic over the protocol; the compute protocol's by default);
* :mod:`.protocols` -- :class:`WireProtocol`: :data:`COMPUTE` and :data:`STORAGE`, each transport
  talks either (``GrpcTransport(protocol=STORAGE)``);
* :mod:`.handler` -- what a replica implements to serve streams (sessions, response sink);
* :mod:`.errors` -- :class:`ConnectionLost`, :class:`ConnectionRefused`, :class:`VersionMismatch`, ...;
* :mod:`.version` -- the protocol version and its metadata header;
* :mod:`.aio_thread` -- the bridge from anyio to the one asyncio loop thread grpc.aio runs on;
* :mod:`.grpc_client` -- :class:`GrpcTransport` (import it explicitly: it loads grpc);
* :mod:`.grpc_server` -- :class:`ReplicaServer`, the replica's sync gRPC server (both protocols
  on one port);
* :mod:`.echo` -- scripted replicas (compute, storage) for tests and benchmarks.

:data:`COMPUTE`, :data:`STORAGE` and :class:`WireProtocol` load the wire codecs
(Protobuf, Arrow) on first use, so importing this package stays light.

The simulated implementation is :class:`tidegate.sim.transport.SimTransport`.
"""

from typing import TYPE_CHECKING, Any

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
from .version import (
    AUTH_HEADER,
    OWN_VERSION,
    PROTOCOL_VERSION,
    STORAGE_PROTOCOL_VERSION,
    VERSION_HEADER,
)

if TYPE_CHECKING:  # type checkers see the real objects; at run time they load on first use
    from .protocols import COMPUTE, STORAGE, WireProtocol

__all__ = [
    "AUTH_HEADER",
    "COMPUTE",
    "OWN_VERSION",
    "PROTOCOL_VERSION",
    "STORAGE",
    "STORAGE_PROTOCOL_VERSION",
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
    "WireProtocol",
]

_LAZY = frozenset({"COMPUTE", "STORAGE", "WireProtocol"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import protocols

        return getattr(protocols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
