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
The port is generic over the protocol: ``Transport[C, R]`` and
``ReplicaStream[C, R]`` carry commands ``C`` and responses ``R``; unparameterized
they are the compute protocol's (a transport of the storage protocol is
``Transport[StorageCommand, StorageResponse]``, see :mod:`.protocols`).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from types import TracebackType
from typing import Generic, Self

from typing_extensions import TypeVar

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

from .errors import StreamClosed

__all__ = ["ReplicaStream", "Transport"]

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


class ReplicaStream(abc.ABC, Generic[C, R]):
    """One open, ordered, bidirectional command/response stream to a replica.

    Async iteration yields responses until the stream is closed locally; a broken
    stream raises :class:`~.errors.ConnectionLost` from the iteration.
    """

    address: str

    @abc.abstractmethod
    async def send(self, command: C) -> None:
        """Queue ``command`` for the replica, after every command sent before it."""

    @abc.abstractmethod
    async def send_many(self, commands: Sequence[C]) -> None:
        """Send ``commands`` in order, as one batch (one hop, one wakeup)."""

    @abc.abstractmethod
    async def receive(self) -> R:
        """The next response; waits for one. Cancelling the wait loses nothing."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """End the stream (idempotent); later calls raise :class:`~.errors.StreamClosed`."""

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> R:
        try:
            return await self.receive()
        except StreamClosed:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Transport(abc.ABC, Generic[C, R]):
    """Opens streams to replicas by address; one open stream per replica at a time."""

    @abc.abstractmethod
    async def connect(self, address: str) -> ReplicaStream[C, R]:
        """Open a fresh stream to the replica at ``address``.

        The replica has accepted the stream when this returns (version and token
        checked); a previous stream to the same replica is preempted by it.
        """

    async def aclose(self) -> None:
        """Release what the transport holds (channels, threads); streams must be closed first."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
