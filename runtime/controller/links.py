"""One replica connection of one epoch: connect with backoff, send queued commands, receive responses.

A :class:`ReplicaLink` is generic over the protocol it speaks
(``ReplicaLink[C, R]``: commands ``C``, responses ``R``; the compute
protocol's by default): the same link carries a compute replica's stream and
a storage replica's (:mod:`.storage_links`). For compute, one exists per
``ConnectReplica`` effect, and its epoch is the spec's; for storage, one per
connection the driver makes, numbered by the driver. Its commands
queue (unbounded, in order) from the moment it exists; its task asks the
resolver for the replica's address on every attempt, connects through the
:class:`~tidegate.runtime.transport.Transport` with capped exponential backoff,
then runs a sender (draining the queue in batches) and a receiver (feeding
responses to the driver) until the stream breaks or the link is closed. A
broken stream is reported once through ``on_failed``; the spec then replays
the reduced history on a new link of epoch + 1. A command the wire cannot
encode ends the stream the same way (logged as an error), never the driver. An attempt that fails to
connect (refused: nothing listening, wrong token, version mismatch, TLS) is
reported through ``on_refused`` with its reason, and the link keeps trying.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from typing_extensions import TypeVar

from tidegate.runtime.transport import ReplicaStream, Transport, TransportError
from tidegate.runtime.wire.errors import WireError
from tidegate.spec.ids import InstanceId, ReplicaId
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

__all__ = ["Backoff", "ReplicaInfo", "ReplicaLink"]

log = logging.getLogger(__name__)

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """What the driver knows of one replica: the spec's status plus its connection.

    ``status`` is the spec's, except ``"failed"`` while the current
    connection's attempts are being refused (``last_error`` says why). While
    the replica is not connected, ``last_error`` says why: the current
    connection's last refused attempt, else why the previous one broke.
    """

    instance: InstanceId
    replica: ReplicaId
    status: str
    epoch: int
    address: str | None
    connected: bool
    attempts: int
    last_error: str


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff: the n-th consecutive failure waits ``min(cap, base * 2**(n-1))`` s."""

    base_s: float = 0.05
    cap_s: float = 5.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.cap_s, self.base_s * 2.0 ** min(failures - 1, 30)))


class ReplicaLink(Generic[C, R]):
    """The connection of ``epoch`` to ``replica`` (see the module docstring)."""

    def __init__(self, instance: InstanceId, replica: ReplicaId, epoch: int) -> None:
        self.instance = instance
        self.replica = replica
        self.epoch = epoch
        self.scope = anyio.CancelScope()
        self.stream: ReplicaStream[C, R] | None = None
        self.address: str | None = None
        self.attempts = 0
        self.last_error = ""
        self.refused = False
        """The last connection attempt failed (and no stream is up since)."""
        self.closed = False
        send: MemoryObjectSendStream[C]
        receive: MemoryObjectReceiveStream[C]
        send, receive = anyio.create_memory_object_stream(math.inf)
        self._queue_in = send
        self._queue_out = receive

    @property
    def up(self) -> bool:
        return self.stream is not None

    def send(self, command: C) -> None:
        """Queue ``command`` (sent as soon as the stream is up, after everything queued before).

        Once the link's stream broke (or the link was closed) a command goes nowhere: the
        controller replays what it needs on the replica's next connection.
        """
        if self.closed:
            return
        # A closed queue: the stream ended, its failure is being reported, a new epoch replays.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._queue_in.send_nowait(command)

    def close(self) -> None:
        """Stop the link: its task ends and its stream is closed; nothing is reported."""
        self.closed = True
        self.scope.cancel()
        self._queue_in.close()  # the sender sees the end of its queue (if it runs at all)

    async def run(
        self,
        transport: Transport[C, R],
        address_of: Callable[[ReplicaId], str],
        backoff: Backoff,
        failures: Callable[[], int],
        on_connected: Callable[[ReplicaLink[C, R]], None],
        on_response: Callable[[ReplicaLink[C, R], R], str | None],
        on_failed: Callable[[ReplicaLink[C, R], str], None],
        on_refused: Callable[[ReplicaLink[C, R], str], None] | None = None,
    ) -> None:
        """Connect, then serve the stream; report a broken stream once (not a closed link).

        Every failed connection attempt goes to ``on_refused`` (if given) before the next one.
        """
        reason: str | None = None
        try:
            with self.scope:
                stream = await self._connect(transport, address_of, backoff, failures, on_refused)
                self.stream = stream
                self.refused = False
                try:
                    on_connected(self)
                    reason = await self._serve(stream, on_response)
                finally:
                    self.stream = None
                    with anyio.CancelScope(shield=True):
                        await stream.aclose()
        finally:
            self._queue_in.close()
            self._queue_out.close()
        if reason is not None and not self.closed:
            on_failed(self, reason)

    async def _connect(
        self,
        transport: Transport[C, R],
        address_of: Callable[[ReplicaId], str],
        backoff: Backoff,
        failures: Callable[[], int],
        on_refused: Callable[[ReplicaLink[C, R], str], None] | None,
    ) -> ReplicaStream[C, R]:
        first = failures()
        while True:
            await anyio.sleep(backoff.delay(first + self.attempts))
            try:
                self.address = address_of(self.replica)
                return await transport.connect(self.address)
            except (TransportError, OSError, LookupError) as e:
                self.attempts += 1
                self.last_error = f"{type(e).__name__}: {e}"
                self.refused = True
                if on_refused is not None:
                    on_refused(self, self.last_error)

    async def _serve(
        self,
        stream: ReplicaStream[C, R],
        on_response: Callable[[ReplicaLink[C, R], R], str | None],
    ) -> str | None:
        reason: list[str] = []

        async def sender() -> None:
            try:
                async for command in self._queue_out:
                    batch = [command]
                    while True:
                        try:
                            batch.append(self._queue_out.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    await stream.send_many(batch)
            except TransportError as e:
                reason.append(f"send failed: {e}")
                tg.cancel_scope.cancel()
            except WireError as e:
                # A command the wire cannot encode (client input is checked before it reaches
                # the controller, so this is a bug): it ends this stream, never the process.
                log.error("replica %s: a command could not be encoded: %s", self.replica, e)
                reason.append(f"a command could not be encoded: {e}")
                tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sender)
            try:
                while True:
                    response = await stream.receive()
                    outcome = on_response(self, response)
                    if outcome is not None:
                        reason.append(outcome)
                        break
            except TransportError as e:
                reason.append(str(e) or type(e).__name__)
            tg.cancel_scope.cancel()
        return reason[0] if reason else None
