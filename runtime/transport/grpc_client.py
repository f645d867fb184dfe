"""The transport port over gRPC: grpc.aio on the process's one loop thread, bridged to anyio.

Every channel and call lives on :func:`~.aio_thread.shared_aio_thread` (or the
:class:`~.aio_thread.AioThread` given); the anyio side only submits coroutines
and drains an :class:`~.aio_thread.CallerInbox`. Each :meth:`GrpcTransport.connect`
opens a channel and one ``CommandResponseStream`` call of its protocol's
service (:mod:`.protocols`: ``protocol=COMPUTE``, the default, or ``STORAGE``)
carrying the version header (and ``authorization: Bearer <token>`` when a token
is set), then waits for the replica's initial metadata, so a refused version or
token surfaces from ``connect`` itself. Messages travel as the protocol's codec
bytes (:mod:`tidegate.runtime.wire.frames`). A replica that does not serve the
protocol refuses the call (``UNIMPLEMENTED``): :class:`~.errors.ConnectionRefused`.

Sending does not wait for the write: commands are encoded on the caller's
thread and queued in a :class:`~.aio_thread.CallerOutbox` that one writer task on
the loop thread drains in order, so a send costs no thread hop back. A send
waits only while ``send_buffer`` commands are queued and unwritten
(backpressure), and raises :class:`~.errors.ConnectionLost` once the stream is
known to be broken (by the reader or by a failed write). Closing a stream
first lets the writer finish what is queued (briefly), then cancels the call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic

import anyio
import grpc
import grpc.aio
from typing_extensions import TypeVar

from tidegate.runtime.wire.errors import WireError
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

from .aio_thread import AioThread, CallerInbox, CallerOutbox, caller_post, shared_aio_thread
from .errors import (
    ConnectionLost,
    ConnectionRefused,
    StreamClosed,
    TransportError,
    Unauthenticated,
    VersionMismatch,
)
from .port import ReplicaStream, Transport
from .protocols import COMPUTE, WireProtocol
from .version import AUTH_HEADER, OWN_VERSION, VERSION_HEADER, Own, bearer

__all__ = ["METHOD", "ClientTls", "GrpcReplicaStream", "GrpcTransport"]

METHOD = COMPUTE.method
"""The full gRPC method name of the compute protocol's stream (``STORAGE.method``: the storage one's)."""

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


@dataclass(frozen=True)
class ClientTls:
    """TLS for the controller's channels: the CA to trust, and a client certificate for mTLS."""

    root_certificates: bytes
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str | None = None
    """Expected name in the replica's certificate, if not the address's host."""

    @classmethod
    def from_files(
        cls,
        ca: str | Path,
        cert: str | Path | None = None,
        key: str | Path | None = None,
        server_name: str | None = None,
    ) -> ClientTls:
        """Read PEM files: the CA bundle, and optionally the client's certificate and key."""
        return cls(
            Path(ca).read_bytes(),
            Path(cert).read_bytes() if cert else None,
            Path(key).read_bytes() if key else None,
            server_name,
        )

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            self.root_certificates, self.private_key, self.certificate_chain
        )


class GrpcTransport(Transport[C, R]):
    """Opens ``CommandResponseStream`` calls of ``protocol`` to replicas at ``host:port`` addresses.

    ``version`` is the protocol's own by default; ``None`` sends no version
    header (only useful to test replicas).
    ``buffer`` bounds the responses received but not yet consumed per stream;
    ``send_buffer`` the commands sent but not yet written to the call.
    """

    def __init__(
        self,
        *,
        protocol: WireProtocol[C, R] = COMPUTE,  # type: ignore[assignment]
        aio: AioThread | None = None,
        version: str | Own | None = OWN_VERSION,
        token: str | None = None,
        tls: ClientTls | None = None,
        connect_timeout: float = 10.0,
        buffer: int = 256,
        send_buffer: int = 256,
        channel_options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.protocol = protocol
        self._aio = aio
        self.version: str | None = protocol.version if version is OWN_VERSION else version
        self.token = token
        self.tls = tls
        self.connect_timeout = connect_timeout
        self.buffer = buffer
        self.send_buffer = send_buffer
        # A channel of its own per stream: closing it really closes the connection.
        options = [("grpc.use_local_subchannel_pool", 1), *channel_options]
        if tls is not None and tls.server_name:
            options.append(("grpc.ssl_target_name_override", tls.server_name))
        self._options = tuple(options)
        self._open: set[GrpcReplicaStream[C, R]] = set()

    @property
    def aio(self) -> AioThread:
        if self._aio is None:
            self._aio = shared_aio_thread()
        return self._aio

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata every stream carries."""
        md: list[tuple[str, str]] = []
        if self.version is not None:
            md.append((VERSION_HEADER, self.version))
        if self.token is not None:
            md.append((AUTH_HEADER, bearer(self.token)))
        return tuple(md)

    async def connect(self, address: str) -> GrpcReplicaStream[C, R]:
        aio = self.aio
        post = caller_post()
        inbox: CallerInbox[R] = CallerInbox(aio.loop, post, self.buffer)
        outbox: CallerOutbox[bytes] = CallerOutbox(
            aio.loop,
            post,
            self.send_buffer,
            lambda: ConnectionLost(f"{address}: the transport's loop thread has stopped"),
        )
        call: _AioCall[C, R] = _AioCall(self, address, inbox, outbox)
        await aio.call(call.open())
        stream = GrpcReplicaStream(aio, call, inbox, outbox, self._open.discard)
        self._open.add(stream)
        return stream

    async def aclose(self) -> None:
        """Close every stream still open (cancelling its call and channel)."""
        for stream in list(self._open):
            await stream.aclose()


class GrpcReplicaStream(ReplicaStream[C, R]):
    """An open gRPC stream to one replica; see :class:`~.port.ReplicaStream`."""

    def __init__(
        self,
        aio: AioThread,
        call: _AioCall[C, R],
        inbox: CallerInbox[R],
        outbox: CallerOutbox[bytes],
        on_close: Callable[[GrpcReplicaStream[C, R]], None] = lambda _: None,
    ) -> None:
        self.address = call.address
        self._on_close = on_close
        self._aio = aio
        self._call = call
        self._commands = call.transport.protocol.commands
        self._inbox = inbox
        self._outbox = outbox
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosed(f"{self.address}: stream closed by this side")

    async def send(self, command: C) -> None:
        await self.send_many((command,))

    async def send_many(self, commands: Sequence[C]) -> None:
        self._check_open()
        if not commands:
            return
        frames = self._commands.frames
        await self._outbox.put_many([f for c in commands for f in frames(c)])

    async def receive(self) -> R:
        self._check_open()
        return await self._inbox.get()

    def receive_nowait_all(self) -> list[R]:
        """Every response that has already arrived (possibly none), without waiting."""
        self._check_open()
        return self._inbox.get_nowait_all()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._on_close(self)
        self._inbox.close_locally(StreamClosed(f"{self.address}: stream closed by this side"))
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self._aio.call(self._call.close())


class _AioCall(Generic[C, R]):
    """The loop-thread half of a stream: channel, call, reader task, ordered writes."""

    def __init__(
        self,
        transport: GrpcTransport[C, R],
        address: str,
        inbox: CallerInbox[R],
        outbox: CallerOutbox[bytes],
    ):
        self.transport = transport
        self.address = address
        self.inbox = inbox
        self.outbox = outbox
        self.channel: grpc.aio.Channel | None = None
        self.call: Any = None
        self.reader: asyncio.Task[None] | None = None
        self.writer: asyncio.Task[None] | None = None

    async def open(self) -> None:
        t = self.transport
        if t.tls is not None:
            self.channel = grpc.aio.secure_channel(self.address, t.tls.credentials(), t._options)
        else:
            self.channel = grpc.aio.insecure_channel(self.address, t._options)
        try:
            multi = self.channel.stream_stream(t.protocol.method)
            self.call = multi(metadata=t.metadata())
            try:
                md = await asyncio.wait_for(self.call.initial_metadata(), t.connect_timeout)
            except TimeoutError:
                raise ConnectionRefused(
                    f"{self.address}: no answer within {t.connect_timeout}s"
                ) from None
            except grpc.aio.AioRpcError as e:
                raise self._refusal(e.code(), e.details(), e.trailing_metadata()) from None
            theirs = _get(md, VERSION_HEADER)
            if theirs is None:
                # The call ended without accepting: a trailers-only answer.
                code = await self.call.code()
                details = await self.call.details()
                trailing = await self.call.trailing_metadata()
                raise self._refusal(code, details, trailing)
            if t.version is not None and theirs != t.version:
                raise VersionMismatch(
                    f"{self.address}: protocol version mismatch: replica speaks {theirs}, "
                    f"controller speaks {t.version}",
                    ours=t.version,
                    theirs=theirs,
                )
        except BaseException:
            await self._shutdown()
            raise
        loop = asyncio.get_running_loop()
        self.reader = loop.create_task(self._read())
        self.writer = loop.create_task(self._write())

    def _refusal(self, code: grpc.StatusCode, details: str | None, trailing: Any) -> TransportError:
        what = f"{self.address}: {code.name}: {details or ''}".rstrip(": ")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return Unauthenticated(what)
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            ours = self.transport.version or "none"
            return VersionMismatch(what, ours=ours, theirs=_get(trailing, VERSION_HEADER))
        return ConnectionRefused(what)

    def _break(self, end: BaseException) -> None:
        """The stream is over: sends fail from now on, receives after what has arrived."""
        lost = isinstance(end, ConnectionLost | StreamClosed)
        self.outbox.fail(end if lost else ConnectionLost(f"{self.address}: {end}"))
        self.inbox.finish(end)

    async def _read(self) -> None:
        assembler = self.transport.protocol.responses.assembler()
        try:
            while True:
                raw = await self.call.read()
                if raw is grpc.aio.EOF:
                    code = await self.call.code()
                    details = await self.call.details()
                    self._break(
                        ConnectionLost(f"{self.address}: stream ended: {code.name}: {details}")
                    )
                    return
                try:
                    response = assembler.feed(raw)
                except WireError as e:
                    self.call.cancel()
                    self._break(e)
                    return
                if response is not None:  # else a fragment of a large response
                    await self.inbox.put(response)
        except grpc.aio.AioRpcError as e:
            self._break(
                ConnectionLost(f"{self.address}: stream broken: {e.code().name}: {e.details()}")
            )
        except asyncio.CancelledError:
            self._break(StreamClosed(f"{self.address}: stream closed by this side"))
            raise

    async def _write(self) -> None:
        """Drain the outbox into the call, in order, until it is closed or fails."""
        try:
            while items := await self.outbox.take():
                for raw in items:
                    await self.call.write(raw)
                    self.outbox.done(1)  # a held-back sender may refill while the rest go
        # Only sending fails here: the reader sees the break itself, after what has arrived.
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as e:
            self.outbox.fail(ConnectionLost(f"{self.address}: stream broken while sending: {e}"))
        except grpc.aio.UsageError as e:
            self.outbox.fail(ConnectionLost(f"{self.address}: stream already ended: {e}"))
        except Exception as e:  # never leave senders queueing into a dead writer
            self.outbox.fail(ConnectionLost(f"{self.address}: writer failed: {e!r}"))
            raise

    async def close(self) -> None:
        """Let the writer finish what is queued (for at most a second), then shut down."""
        self.outbox.close()
        if self.writer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.writer), 1.0)
        await self._shutdown()

    async def _shutdown(self) -> None:
        for task in (self.writer, self.reader):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.call is not None:
            self.call.cancel()
        if self.channel is not None:
            await self.channel.close()


def _get(metadata: Any, key: str) -> str | None:
    """The value of ``key`` in gRPC metadata (``None`` if absent or no metadata)."""
    if not metadata:
        return None
    for k, v in metadata:
        if k == key:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None
