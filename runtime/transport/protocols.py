"""The wire protocols a replica process serves, described once for every transport.

A :class:`WireProtocol` names a protocol (``"compute"``, ``"storage"``), its
gRPC service and the one method every connection opens
(``CommandResponseStream``), its version (checked at every connect, as
:mod:`.version` describes), and how its commands and responses travel
(:class:`~tidegate.runtime.wire.frames.MessageCodec`). The gRPC client
(:class:`~.grpc_client.GrpcTransport`), the gRPC server
(:class:`~.grpc_server.ReplicaServer`) and the simulator's transport
(``tidegate.sim.transport``) take one and behave alike for both.

>>> COMPUTE.method, STORAGE.method
('/tidegate.compute.ProtoCompute/CommandResponseStream', '/tidegate.storage.ProtoStorage/CommandResponseStream')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from tidegate.runtime.wire.frames import COMPUTE_COMMANDS, COMPUTE_RESPONSES, MessageCodec
from tidegate.runtime.wire.storage_codec import STORAGE_COMMANDS, STORAGE_RESPONSES
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse
from tidegate.spec.storage.commands import StorageCommand, StorageResponse

from .version import PROTOCOL_VERSION, STORAGE_PROTOCOL_VERSION

__all__ = ["COMPUTE", "PROTOCOLS", "STORAGE", "WireProtocol"]

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


@dataclass(frozen=True, eq=False)
class WireProtocol(Generic[C, R]):
    """One command/response protocol over one bidirectional stream (see the module docstring)."""

    name: str
    """Short name: ``"compute"`` or ``"storage"`` (the replica's ``--services`` names)."""
    service: str
    """The fully qualified gRPC service (also its health-check name)."""
    version: str
    """The version this build speaks; a peer with another one is refused."""
    commands: MessageCodec[C]
    responses: MessageCodec[R]

    @property
    def method(self) -> str:
        """The full gRPC method name of the stream."""
        return f"/{self.service}/CommandResponseStream"

    def __repr__(self) -> str:
        return f"WireProtocol({self.name!r}, version {self.version!r})"


COMPUTE: WireProtocol[ComputeCommand, ComputeResponse] = WireProtocol(
    "compute",
    "tidegate.compute.ProtoCompute",
    PROTOCOL_VERSION,
    COMPUTE_COMMANDS,
    COMPUTE_RESPONSES,
)
"""The compute protocol (``proto/tidegate_compute.proto``)."""

STORAGE: WireProtocol[StorageCommand, StorageResponse] = WireProtocol(
    "storage",
    "tidegate.storage.ProtoStorage",
    STORAGE_PROTOCOL_VERSION,
    STORAGE_COMMANDS,
    STORAGE_RESPONSES,
)
"""The storage protocol (``proto/tidegate_storage.proto``)."""

PROTOCOLS: dict[str, WireProtocol[Any, Any]] = {COMPUTE.name: COMPUTE, STORAGE.name: STORAGE}
"""Every protocol by name."""
