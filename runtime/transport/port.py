"""The transport port: what the controller driver needs to talk to one replica.

Written against anyio, so one driver runs on trio, on asyncio, and under the
simulator's virtual clock. Two implementations exist:
:class:`~tidegate.runtime.transport.grpc_client.GrpcTransport` (gRPC over the
network) and :class:`~tidegate.sim.transport.SimTransport` (the simulator's
network); ``tests/runtime/transport/test_transport_contract.py`` holds both to
the same contract:

* a stream is reliable and ordered in each direction while it is up;
* once it breaks (replica gone, network cut, preempted by a newer connection
  to the same replica) every ``receive`` and ``send`` raises
  :class:`~.errors.ConnectionLost`, after any responses that had already arrived;
* cancelling a ``receive`` loses nothing: the stream stays usable;
* a new ``connect`` gives a fresh stream (a new protocol iteration);
* ``connect`` raises :class:`~.errors.ConnectionRefused`,
  :class:`~.errors.VersionMismatch` or :class:`~.errors.Unauthenticated`.

Messages are the spec's dataclasses; encoding, if any, is the implementation's.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

from .errors import StreamClosed

__all__ = ["ReplicaStream", "Transport"]


class ReplicaStream(abc.ABC):
    """One open, ordered, bidirectional command/response stream to a replica.

    Async iteration yields responses until the stream is closed locally; a broken
    stream raises :class:`~.errors.ConnectionLost` from the iteration.
    """

    address: str

    @abc.abstractmethod
    async def send(self, command: ComputeCommand) -> None:
        """Queue ``command`` for the replica, after every command sent before it."""

    @abc.abstractmethod
    async def send_many(self, commands: Sequence[ComputeCommand]) -> None:
        """Send ``commands`` in order, as one batch (one hop, one wakeup)."""

    @abc.abstractmethod
    async def receive(self) -> ComputeResponse:
        """The next response; waits for one. Cancelling the wait loses nothing."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """End the stream (idempotent); later calls raise :class:`~.errors.StreamClosed`."""

    def __aiter__(self) -> ReplicaStream:
        return self

    async def __anext__(self) -> ComputeResponse:
        try:
            return await self.receive()
        except StreamClosed:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> ReplicaStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Transport(abc.ABC):
    """Opens streams to replicas by address; one open stream per replica at a time."""

    @abc.abstractmethod
    async def connect(self, address: str) -> ReplicaStream:
        """Open a fresh stream to the replica at ``address``.

        The replica has accepted the stream when this returns (version and token
        checked); a previous stream to the same replica is preempted by it.
        """

    async def aclose(self) -> None:  # noqa: B027 -- optional hook, nothing to release by default
        """Release what the transport holds (channels, threads); streams must be closed first."""

    async def __aenter__(self) -> Transport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
