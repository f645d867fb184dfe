"""The replica side of the transport: what a replica implements to serve streams.

Both the gRPC server (:mod:`.grpc_server`) and the simulator's endpoint
(:mod:`tidegate.sim.transport`) accept a stream after checking version and
token, then ask the :class:`ReplicaHandler` for a :class:`ReplicaConnection`, feed
it the commands in order and forward whatever it puts into its
:class:`ResponseSink`. Sessions are synchronous: the gRPC server calls them
from one reader thread per stream, the simulator from its event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

__all__ = ["ReplicaConnection", "ReplicaHandler", "ResponseSink"]


class ResponseSink(Protocol):
    """Where a session puts its responses; thread-safe, never blocks, ordered."""

    def send(self, response: ComputeResponse) -> None:
        """Queue ``response`` for the controller (dropped if the stream has ended)."""
        ...

    def send_many(self, responses: Sequence[ComputeResponse]) -> None:
        """Queue ``responses`` in order."""
        ...


class ReplicaConnection(Protocol):
    """One accepted stream's replica-side state (one protocol iteration)."""

    def on_command(self, command: ComputeCommand) -> None:
        """Handle the next command; may send responses now or later through the sink."""
        ...

    def on_close(self) -> None:
        """The stream ended (controller left, preempted, network broken); called once."""
        ...


class ReplicaHandler(Protocol):
    """Creates a session per accepted stream; the newest stream preempts the previous one."""

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> ReplicaConnection:
        """A controller connected with call ``metadata``; return its session."""
        ...
