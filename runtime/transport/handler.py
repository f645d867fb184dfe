"""The replica side of the transport: what a replica implements to serve streams.

Both the gRPC server (:mod:`.grpc_server`) and the simulator's endpoint
(:mod:`tidegate.sim.transport`) accept a stream after checking version and
token, then ask the :class:`ReplicaHandler` for a :class:`ReplicaConnection`, feed
it the commands in order and forward whatever it puts into its
:class:`ResponseSink`. Sessions are synchronous: the gRPC server calls them
from one reader thread per stream, the simulator from its event loop.

Generic over the protocol (commands ``C``, responses ``R``); unparameterized,
the compute protocol's. A replica process serving both protocols has one
handler per protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from typing_extensions import TypeVar

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

__all__ = ["ReplicaConnection", "ReplicaHandler", "ResponseSink"]

C_contra = TypeVar("C_contra", contravariant=True, default=ComputeCommand)
R_contra = TypeVar("R_contra", contravariant=True, default=ComputeResponse)
R_co = TypeVar("R_co", covariant=True, default=ComputeResponse)


class ResponseSink(Protocol[R_contra]):
    """Where a session puts its responses; thread-safe, never blocks, ordered."""

    def send(self, response: R_contra) -> None:
        """Queue ``response`` for the controller (dropped if the stream has ended)."""
        ...

    def send_many(self, responses: Sequence[R_contra]) -> None:
        """Queue ``responses`` in order."""
        ...


class ReplicaConnection(Protocol[C_contra]):
    """One accepted stream's replica-side state (one protocol iteration)."""

    def on_command(self, command: C_contra) -> None:
        """Handle the next command; may send responses now or later through the sink."""
        ...

    def on_close(self) -> None:
        """The stream ended (controller left, preempted, network broken); called once."""
        ...


class ReplicaHandler(Protocol[C_contra, R_co]):
    """Creates a session per accepted stream; the newest stream preempts the previous one."""

    def on_connect(
        self, metadata: Mapping[str, str], responses: ResponseSink[R_co]
    ) -> ReplicaConnection[C_contra]:
        """A controller connected with call ``metadata``; return its session."""
        ...
