"""The thin server: TCP (and TLS) streams in, :mod:`.protocol` and :mod:`.session` do the rest.

:class:`PgwireServer` listens with anyio (so it runs under asyncio and trio),
and for each connection feeds the bytes it reads to a
:class:`~.protocol.ServerConnection`, hands the messages to a
:class:`~.session.WireSession` and writes what comes back. It does IO and
nothing else: TLS after an ``SSLRequest`` (``S`` when it has a certificate,
``N`` otherwise), ``N`` to a ``GSSENCRequest``, a ``CancelRequest`` passed to
the :class:`~.session.Registry`, the time a connection has to start up and
authenticate (``startup_timeout_s``), the connection limit (``53300``), the idle
timeouts (``idle_session_timeout``, ``idle_in_transaction_session_timeout``:
FATAL, then the connection closes), and a protocol violation answered with an
``ErrorResponse`` (FATAL when the framing cannot be trusted any more).
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from tidegate.spec.errors import ProtocolViolation

from ..sql import SqlEnvironment
from . import messages as m
from .auth import AuthConfig
from .protocol import NEED_DATA, ConnectionClosed, Phase, ServerConnection
from .session import Closed, Raw, Registry, WireSession, _error, _fatal

if TYPE_CHECKING:
    from ..catalog_queries import CatalogEngine

__all__ = ["PgwireOptions", "PgwireServer", "serve_pgwire", "tls_context"]

_READ_AHEAD = 1024 * 1024
"""Bytes read ahead of the session (a client pipelining more waits)."""

_log = logging.getLogger("tidegate.pgwire")


@dataclass(frozen=True)
class PgwireOptions:
    """How a wire server runs: ``auth`` (who may connect), ``tls`` (an ``ssl.SSLContext``
    for ``sslmode=require``; None: TLS refused), ``max_connections`` (more are turned away
    with SQLSTATE 53300), ``max_message`` (the largest message accepted, bytes),
    ``startup_timeout_s`` (how long a connection may take from its first byte to the end of
    its authentication: the startup packet, TLS, the password exchange; PostgreSQL's
    ``authentication_timeout``, one minute by default there too)."""

    auth: AuthConfig
    tls: ssl.SSLContext | None = None
    max_connections: int = 1000
    max_message: int = 256 * 1024 * 1024
    startup_timeout_s: float = 60.0


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """A server TLS context from a certificate chain and its key (PEM files)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


class _Conn:
    """One connection's bytes: the stream, the protocol machine, the send buffer."""

    def __init__(self, stream: anyio.abc.ByteStream, max_message: int) -> None:
        self.stream: anyio.abc.ByteStream = stream
        self.machine = ServerConnection(max_message=max_message)
        self._pumping = False
        self._arrived = anyio.Event()
        self._consumed = anyio.Event()
        self.on_eof: Any = None
        """Called when the client's side closes while the pump reads (cancels a statement)."""
        self.starting: WireSession | None = None
        """The session being started, until the startup ends."""

    async def _read(self) -> bytes:
        try:
            return await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError):
            return b""
        except anyio.ClosedResourceError:
            return b""

    def start_pumping(self) -> None:
        """From now on :meth:`pump` reads (before it starts: two readers are one too many)."""
        self._pumping = True

    async def pump(self) -> None:
        """Read ahead while statements run, so that a client that goes away is seen at once
        (its running statement -- a subscription streaming, a FETCH waiting -- is cancelled)
        instead of when the next answer fails to send. Reading pauses while more than
        :data:`_READ_AHEAD` bytes wait to be handled."""
        machine = self.machine
        while True:
            while machine.buffered() > _READ_AHEAD:
                self._consumed = anyio.Event()
                await self._consumed.wait()
            data = await self._read()
            machine.receive_data(data)
            self._arrived.set()
            if not data:
                if self.on_eof is not None:
                    self.on_eof()
                return

    async def receive(self) -> m.FrontendMessage:
        """The next message [Closed at the end of input; ProtocolViolation]."""
        machine = self.machine
        while True:
            ev = machine.next_event()
            self._consumed.set()
            if ev is NEED_DATA:
                if self._pumping:
                    self._arrived = anyio.Event()
                    if machine.next_event_ready():
                        continue
                    await self._arrived.wait()
                else:
                    machine.receive_data(await self._read())
                continue
            if isinstance(ev, ConnectionClosed):
                raise Closed
            assert not isinstance(ev, type(NEED_DATA))
            return ev  # type: ignore[return-value]

    async def send(self, msgs: Sequence[Any]) -> None:
        parts = []
        machine = self.machine
        for msg in msgs:
            if isinstance(msg, Raw):
                parts.append(msg.data)
            else:
                parts.append(machine.send(msg))
        data = b"".join(parts)
        if data:
            try:
                await self.stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
                raise Closed from e

    async def send_raw(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
            raise Closed from e


class PgwireServer:
    """Serves ``env`` over the PostgreSQL wire protocol (see the module docstring)."""

    def __init__(
        self, env: SqlEnvironment, options: PgwireOptions, engine: CatalogEngine | None = None
    ) -> None:
        self.env = env
        self.options = options
        self.engine = engine
        self.registry = Registry()
        self._connections = 0
        self.address: tuple[str, int] | None = None

    @property
    def connections(self) -> int:
        """Connections open now."""
        return self._connections

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 6875,
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0: a free port) until cancelled; reports the address."""
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        async with listener:
            sock = listener.extra(anyio.abc.SocketAttribute.raw_socket)
            bound = sock.getsockname()
            self.address = (str(bound[0]), int(bound[1]))
            task_status.started(self.address)
            await listener.serve(self.handle_stream)

    async def handle_stream(self, stream: anyio.abc.ByteStream) -> None:
        """Serve one connection over ``stream`` until it closes: any anyio byte stream (a TCP
        stream of :meth:`serve`'s listener, or an in-memory one: the simulator's)."""
        await self._connection(stream)

    async def _connection(self, stream: anyio.abc.ByteStream) -> None:
        self._connections += 1
        conn = _Conn(stream, self.options.max_message)
        session: WireSession | None = None
        try:
            with anyio.move_on_after(self.options.startup_timeout_s) as startup:
                session = await self._startup(conn)
            if startup.cancelled_caught:
                # A client that never finishes its startup (a slowloris) holds a connection
                # for at most this long. PostgreSQL closes such a connection without a word
                # (its client may be in the middle of a packet); so does this server.
                _log.info("pgwire_startup_timeout")
                if conn.starting is not None:  # registered for cancel requests, maybe
                    conn.starting.close()
                return
            if session is not None:
                await self._query_phase(conn, session)
        except Closed:
            pass
        except ProtocolViolation as e:
            with contextlib.suppress(Closed):
                await conn.send([_error(e, "FATAL")])
        except Exception as e:  # a bug of ours must cost one connection, never the server
            _log.exception("pgwire_connection_failed")
            with contextlib.suppress(Exception):
                await conn.send([_error(e, "FATAL")])
        finally:
            self._connections -= 1
            if session is not None:
                session.close()
                if session.sql is not None:  # an open transaction ends with its connection
                    with contextlib.suppress(Exception):
                        await session.sql.aclose()
            with contextlib.suppress(Exception):
                await conn.stream.aclose()

    async def _startup(self, conn: _Conn) -> WireSession | None:
        tls = False
        while True:
            msg = await conn.receive()
            if isinstance(msg, m.SSLRequest):
                context = self.options.tls
                await conn.send_raw(conn.machine.ssl_response(context is not None))
                if context is not None:
                    try:
                        conn.stream = await TLSStream.wrap(
                            conn.stream, ssl_context=context, server_side=True
                        )
                    except (ssl.SSLError, OSError, anyio.BrokenResourceError):
                        raise Closed from None
                    tls = True
                continue
            if isinstance(msg, m.GSSENCRequest):
                await conn.send_raw(conn.machine.ssl_response(False))
                continue
            if isinstance(msg, m.CancelRequest):
                self.registry.cancel(msg.process_id, msg.secret_key)
                return None
            if not isinstance(msg, m.StartupMessage):
                raise ProtocolViolation(f"unexpected {type(msg).__name__} before startup")
            break
        if self._connections > self.options.max_connections:
            await conn.send([_fatal("53300", "sorry, too many clients already")])
            return None
        session = WireSession(
            self.env,
            auth=self.options.auth,
            tls=tls,
            registry=self.registry,
            engine=self.engine,
        )
        conn.starting = session
        if not await session.start(msg, conn.receive, conn.send):
            return None
        return session

    async def _query_phase(self, conn: _Conn, session: WireSession) -> None:
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:
            conn.on_eof = session.cancel
            conn.start_pumping()
            tg.start_soon(conn.pump)
            try:
                await self._messages(conn, session)
            except Exception as e:  # raised below, unwrapped from the task group's group
                failed = e
            finally:
                tg.cancel_scope.cancel()
        if failed is not None:
            raise failed

    async def _messages(self, conn: _Conn, session: WireSession) -> None:
        sql = session.sql
        assert sql is not None
        while True:
            idle = self._idle_timeout(session)
            try:
                if idle:
                    with anyio.fail_after(idle / 1000):
                        msg = await conn.receive()
                else:
                    msg = await conn.receive()
            except TimeoutError:
                in_tx = sql.transaction_status != "I"
                await conn.send(
                    [
                        _fatal(
                            "25P03" if in_tx else "57P05",
                            "terminating connection due to idle-in-transaction timeout"
                            if in_tx
                            else "terminating connection due to idle-session timeout",
                        )
                    ]
                )
                return
            except ProtocolViolation as e:
                if e.fatal:
                    raise
                sql.fail()
                out: list[Any] = [_error(e)]
                if not conn.machine.skipping and conn.machine.phase is Phase.READY:
                    out.append(m.ReadyForQuery(sql.transaction_status))  # type: ignore[arg-type]
                await conn.send(out)
                continue
            await session.handle(msg, conn.receive, conn.send)

    def _idle_timeout(self, session: WireSession) -> int:
        sql = session.sql
        assert sql is not None
        if sql.transaction_status != "I":
            return sql.timeout_ms("idle_in_transaction_session_timeout")
        return sql.timeout_ms("idle_session_timeout")


async def serve_pgwire(
    env: SqlEnvironment,
    host: str = "127.0.0.1",
    port: int = 6875,
    *,
    auth: AuthConfig,
    tls: ssl.SSLContext | None = None,
    max_connections: int = 1000,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``env`` over the wire protocol on ``host:port`` until cancelled (``port`` 0: a
    free one; ``task_status`` reports where). Authentication is ``auth``'s: give it users and
    passwords, or ``AuthConfig.trust()`` to let anyone in."""
    server = PgwireServer(env, PgwireOptions(auth, tls, max_connections))
    await server.serve(host, port, task_status=task_status)
