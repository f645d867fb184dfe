"""The transport port over the simulated network, so the runtime's driver runs in the simulator.

:class:`SimTransport` implements :class:`~tidegate.runtime.transport.port.Transport`
with :class:`~tidegate.sim.network.SimNetwork` connections. What travels is
what travels over gRPC: each command and response is encoded by the
protocol's codec and framed (:class:`~tidegate.runtime.wire.frames.MessageCodec`;
a message larger than the network's ``max_frame_bytes`` goes as fragments),
and the other end reassembles and decodes the frames
(:class:`~tidegate.runtime.wire.frames.FrameAssembler`), so the codec and the
framing run in every simulation. The frames of one message travel as one
network message (a stream delivers them in order, and a cut loses the rest of
the stream anyway), delayed by the network's latency and delivered in order
while the connection is up. Bytes that do not decode
cut the stream, as the gRPC server and client do, and the endpoint's
``on_cut`` hears of it (in a simulation both ends are ours: a finding). Replicas are :class:`SimReplicaEndpoint` s,
which serve a :class:`~tidegate.runtime.transport.handler.ReplicaHandler` per
protocol (compute, storage, or both; :mod:`tidegate.runtime.transport.protocols`)
with the same rules as the gRPC server, per protocol: token, then version, are
checked at ``connect``; the newest stream of a protocol preempts the previous
one of that protocol; ``crash`` cuts every stream and refuses new ones until
``restart``. A cut reaches the controller as
:class:`~tidegate.runtime.transport.errors.ConnectionLost` (after the responses
already delivered), and the session's ``on_close``. A :class:`SimTransport`
talks one protocol (``protocol=COMPUTE`` by default, or ``STORAGE``); an
endpoint without a handler for it refuses the connection.

Deliveries happen in kernel events, so something must run the
:class:`~tidegate.sim.kernel.Kernel` (as the simulator does) for messages to
move; ``connect`` itself completes at once. Streams are unbounded (the
simulated network has no flow control).
"""

from __future__ import annotations

import contextlib
import hmac
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic

import trio
import trio.lowlevel
from typing_extensions import TypeVar

from tidegate.runtime.transport.errors import (
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
    Unauthenticated,
    VersionMismatch,
)
from tidegate.runtime.transport.handler import ReplicaConnection, ReplicaHandler
from tidegate.runtime.transport.port import ReplicaStream, Transport
from tidegate.runtime.transport.protocols import COMPUTE, STORAGE, WireProtocol
from tidegate.runtime.transport.version import (
    AUTH_HEADER,
    OWN_VERSION,
    VERSION_HEADER,
    Own,
    bearer,
)
from tidegate.runtime.wire.errors import WireError
from tidegate.spec.errors import TidegateError
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse
from tidegate.spec.storage.commands import StorageCommand, StorageResponse

from .network import Connection, SimNetwork

__all__ = ["SimReplicaEndpoint", "SimReplicaStream", "SimTransport"]

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


class _Link:
    """Both ends of one simulated stream, and why it ended (if it did)."""

    def __init__(
        self,
        endpoint: SimReplicaEndpoint,
        stream: SimReplicaStream[Any, Any],
        protocol: WireProtocol[Any, Any],
    ) -> None:
        self.endpoint = endpoint
        self.stream = stream
        self.protocol = protocol.name
        self.responses = protocol.responses
        self.commands = protocol.commands.assembler()
        """The replica's end: frames in, commands out."""
        self.session: ReplicaConnection[Any] | None = None
        self.conn: Connection | None = None
        self.reason = "the network connection was cut"

    # ResponseSink, used by the session.
    def send(self, response: Any) -> None:
        conn = self.conn
        if conn is not None and conn.up:
            endpoint = self.endpoint
            if endpoint.observe is not None:
                endpoint.observe("resp", endpoint.name, response)
            network = endpoint.network
            frames = self.responses.frames(response, network.max_frame_bytes)
            if len(frames) > 1:
                network.fragmented += 1
            network.send_to_controller(conn, frames)

    def send_many(self, responses: Sequence[Any]) -> None:
        for response in responses:
            self.send(response)

    def to_replica(self, conn: Connection, frames: Sequence[bytes]) -> None:
        for frame in frames:
            if self.session is None or not conn.up:
                return
            try:
                command = self.commands.feed(frame)
            except WireError as e:  # the gRPC server ends the stream (INVALID_ARGUMENT)
                self.cut(f"malformed command: {type(e).__name__}: {e}")
                return
            if command is None:
                continue  # a fragment of a large command
            if self.endpoint.observe is not None:
                self.endpoint.observe("cmd", self.endpoint.name, command)
            try:
                self.session.on_command(command)
            except TidegateError as e:
                self.cut(f"command rejected: {type(e).__name__}: {e}")

    def to_controller(self, conn: Connection, frames: Sequence[bytes]) -> None:
        for frame in frames:
            self.stream._deliver(frame)

    def closed(self, conn: Connection) -> None:
        self.stream._lost(f"{self.stream.address}: stream ended: {self.reason}")
        session, self.session = self.session, None
        if session is not None:
            session.on_close()
        self.endpoint._forget(self)
        if self.endpoint.on_cut is not None and self.reason.startswith(_FINDINGS):
            self.endpoint.on_cut(self.endpoint.name, self.reason)

    def cut(self, reason: str) -> None:
        if self.conn is not None and self.conn.up:
            self.reason = reason
            self.endpoint.network.cut(self.conn)


_FINDINGS = ("command rejected", "malformed command", "malformed response")
"""Why a stream ended, when that is a finding: a replica refused a command, or bytes on the
wire did not decode (both ends are the product's own code)."""


class SimReplicaEndpoint:
    """A replica's listening end on the simulated network.

    ``handler`` (or ``compute``) serves the compute protocol, ``storage`` the
    storage protocol; at least one. ``version``: what every protocol claims
    (each its own by default).
    """

    def __init__(
        self,
        network: SimNetwork,
        name: str,
        handler: ReplicaHandler[ComputeCommand, ComputeResponse] | None = None,
        *,
        compute: ReplicaHandler[ComputeCommand, ComputeResponse] | None = None,
        storage: ReplicaHandler[StorageCommand, StorageResponse] | None = None,
        version: str | Own = OWN_VERSION,
        token: str | None = None,
    ) -> None:
        if handler is not None and compute is not None:
            raise TypeError("the compute handler was given twice")
        compute = handler if handler is not None else compute
        if compute is None and storage is None:
            raise TypeError("an endpoint needs a compute or a storage handler (or both)")
        self.network = network
        self.name = name
        self.handler = compute
        self.handlers: dict[str, ReplicaHandler[Any, Any]] = {}
        self.versions: dict[str, str] = {}
        for protocol, h in ((COMPUTE, compute), (STORAGE, storage)):
            if h is not None:
                self.handlers[protocol.name] = h
                self.versions[protocol.name] = (
                    protocol.version if version is OWN_VERSION else version
                )
        self.version = next(iter(self.versions.values()))
        """The version of the compute protocol (of the storage one if it serves only that)."""
        self.token = token
        self.up = True
        self.accepted = 0
        self.refuse_until_ms = 0
        """Connections are refused before this virtual time (a cut that lasts)."""
        self.now_ms: Any = None
        """A callable giving the virtual time (needed for ``refuse_until_ms``)."""
        self.observe: Any = None
        """Called ``(direction, replica, message)`` for every command delivered and response sent."""
        self.on_cut: Any = None
        """Called ``(replica, reason)`` when the replica rejected a command and cut the stream."""
        self._current: dict[str, _Link] = {}

    def crash(self) -> None:
        """The replica goes away: its streams are cut and new connections are refused."""
        self.up = False
        for link in list(self._current.values()):
            link.cut("the replica went away")

    def restart(self) -> None:
        """Accept connections again (state is the handler's business)."""
        self.up = True

    def cut(self, until_ms: int = 0) -> bool:
        """Cut the current streams and refuse new ones until ``until_ms`` (a network fault).

        The replica stays up. False if no stream was up.
        """
        self.refuse_until_ms = max(self.refuse_until_ms, until_ms)
        cut = False
        for link in list(self._current.values()):
            if link.conn is not None and link.conn.up:
                link.cut("the network connection was cut")
                cut = True
        return cut

    def ghost(
        self, metadata: Mapping[str, str], protocol: WireProtocol[Any, Any] = COMPUTE
    ) -> None:
        """A stale duplicate of a connection attempt arrives now and preempts the current stream
        of ``protocol``.

        The ghost stream has no reader: it never sends ``Hello``; the next real
        connection preempts it in turn.
        """
        if not self.up:
            return
        # Refused like any attempt while the network is cut: a lost duplicate does nothing.
        with contextlib.suppress(ConnectionRefused):
            self._accept(
                metadata, SimReplicaStream(f"{self.name} (ghost)", protocol=protocol), protocol
            )

    def _accept(
        self,
        metadata: Mapping[str, str],
        stream: SimReplicaStream[Any, Any],
        protocol: WireProtocol[Any, Any] = COMPUTE,
    ) -> _Link:
        address = stream.address
        handler = self.handlers.get(protocol.name)
        if handler is None:
            raise ConnectionRefused(
                f"{address}: UNIMPLEMENTED: the replica does not serve the {protocol.name} protocol"
            )
        ours = self.versions[protocol.name]
        if not self.up:
            raise ConnectionRefused(f"{address}: the replica is down")
        if self.now_ms is not None and self.now_ms() < self.refuse_until_ms:
            raise ConnectionRefused(f"{address}: the network is cut")
        if self.token is not None:
            given = metadata.get(AUTH_HEADER)
            if given is None or not hmac.compare_digest(given, bearer(self.token)):
                what = "missing" if given is None else "wrong"
                raise Unauthenticated(f"{address}: UNAUTHENTICATED: {what} bearer token")
        theirs = metadata.get(VERSION_HEADER)
        if theirs != ours:
            raise VersionMismatch(
                f"{address}: {protocol.name} protocol version mismatch: replica speaks {ours}, "
                f"controller sent {theirs if theirs is not None else 'no version'}",
                ours=theirs or "none",
                theirs=ours,
            )
        current = self._current.get(protocol.name)
        if current is not None:
            current.cut("preempted by a newer controller connection")
        link = _Link(self, stream, protocol)
        link.conn = self.network.connect(
            self.name, link.to_replica, link.to_controller, link.closed
        )
        self.accepted += 1
        self._current[protocol.name] = link
        link.session = handler.on_connect(dict(metadata), link)
        return link

    def _forget(self, link: _Link) -> None:
        if self._current.get(link.protocol) is link:
            del self._current[link.protocol]


class SimTransport(Transport[C, R]):
    """Connects to :class:`SimReplicaEndpoint` s by name over a :class:`SimNetwork`, in ``protocol``.

    ``endpoints`` is read at each ``connect`` (a live mapping: add replicas to it
    at any time); an unknown name is refused like an address nobody listens on.
    ``version`` is the protocol's own by default (``None``: send none).
    """

    def __init__(
        self,
        endpoints: Mapping[str, SimReplicaEndpoint],
        *,
        protocol: WireProtocol[C, R] = COMPUTE,  # type: ignore[assignment]
        version: str | Own | None = OWN_VERSION,
        token: str | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.protocol = protocol
        self.version: str | None = protocol.version if version is OWN_VERSION else version
        self.token = token
        self.alive = alive
        """Whether the process using this transport lives (a dead one's sends never leave it)."""

    def metadata(self) -> dict[str, str]:
        md: dict[str, str] = {}
        if self.version is not None:
            md[VERSION_HEADER] = self.version
        if self.token is not None:
            md[AUTH_HEADER] = bearer(self.token)
        return md

    async def connect(self, address: str) -> SimReplicaStream[C, R]:
        await trio.lowlevel.checkpoint()
        if self.alive is not None and not self.alive():
            await trio.sleep_forever()  # a dead process: its task is being cancelled
        endpoint = self.endpoints.get(address)
        if endpoint is None:
            raise ConnectionRefused(f"{address}: no such replica")
        stream: SimReplicaStream[C, R] = SimReplicaStream(address, self.alive, self.protocol)
        stream._link = endpoint._accept(self.metadata(), stream, self.protocol)
        return stream


class SimReplicaStream(ReplicaStream[C, R], Generic[C, R]):
    """A stream over one simulated connection; see :class:`~tidegate.runtime.transport.port.ReplicaStream`."""

    def __init__(
        self,
        address: str,
        alive: Callable[[], bool] | None = None,
        protocol: WireProtocol[C, R] = COMPUTE,  # type: ignore[assignment]
    ) -> None:
        self.address = address
        self._alive = alive
        self._commands = protocol.commands
        self._responses = protocol.responses.assembler()
        self._link: _Link | None = None
        self._ready: deque[R] = deque()
        self._end: Exception | None = None
        self._closed = False
        self._waiter: trio.lowlevel.Task | None = None

    def _deliver(self, frame: bytes) -> None:
        if self._end is not None:
            return
        try:
            response = self._responses.feed(frame)
        except WireError as e:  # the gRPC client cancels the call and ends the stream
            if self._link is not None:
                self._link.cut(f"malformed response: {type(e).__name__}: {e}")
            return
        if response is not None:  # else a fragment of a large response
            self._ready.append(response)
            self._wake()

    def _lost(self, why: str) -> None:
        if self._end is None:
            self._end = ConnectionLost(why)
            self._wake()

    def _wake(self) -> None:
        task, self._waiter = self._waiter, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def _check(self) -> _Link:
        if self._closed or self._link is None:
            raise StreamClosed(f"{self.address}: stream closed by this side")
        return self._link

    async def send(self, command: C) -> None:
        await self.send_many((command,))

    async def send_many(self, commands: Sequence[C]) -> None:
        link = self._check()
        # Only a cancellation point: sending never blocks here, and a yield per message would
        # cost a scheduling round each.
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._end is not None:
            raise self._end
        if self._alive is not None and not self._alive():
            return  # a dead process's messages never leave it
        conn = link.conn
        if conn is not None:
            network = link.endpoint.network
            codec, limit = self._commands, network.max_frame_bytes
            for command in commands:
                frames = codec.frames(command, limit)
                if len(frames) > 1:
                    network.fragmented += 1
                network.send_to_replica(conn, frames)

    async def receive(self) -> R:
        self._check()
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._ready:
            if self._closed:
                raise StreamClosed(f"{self.address}: stream closed by this side")
            if self._end is not None:
                raise self._end
            self._waiter = task = trio.lowlevel.current_task()

            def abort(_: Any, task: trio.lowlevel.Task = task) -> trio.lowlevel.Abort:
                if self._waiter is task:
                    self._waiter = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        return self._ready.popleft()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ready.clear()
        self._wake()
        if self._link is not None:
            self._link.cut("the controller closed the stream")
