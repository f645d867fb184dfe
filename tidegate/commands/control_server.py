"""The control endpoint's server: an ASGI app served by uvicorn (httptools), with its limits.

:func:`.control.serve_control` starts it; nothing else imports this module, so
the CLI's clients never pay for starlette and uvicorn. What each layer keeps:

* :class:`_ControlProtocol` (uvicorn's httptools protocol, per connection): at most
  ``max_connections`` connections at once, of which connections still waiting for a
  request's head give way to new ones (at most ``max_waiting_per_client`` of them per
  peer address; one more is answered 503 ``Busy`` only when every connection has a
  request in hand); a request's head must arrive within ``read_timeout_s``
  of the connection (or of the previous answer on a kept-alive connection),
  else 408 ``RequestTimeout``; a head is at most 64 KiB; a malformed request is
  answered 400 ``BadRequest``, as JSON like every other refusal.
* :class:`_Endpoint` (the ASGI app, per request): the bearer token is checked
  from the head alone, before ``receive()`` is ever called (401
  ``Unauthenticated``); a ``Content-Length`` over the limit is refused before
  reading (413 ``BodyTooLarge``), and a body streamed without one is counted
  as it arrives and refused once it passes the limit; the whole body must
  arrive within ``read_timeout_s`` of its head (else 408). Every refusal that
  leaves a body unread closes the connection. Then the body's JSON nesting is
  counted before parsing (at most ``max_nesting``, else 400), and the handler
  answers (Starlette's responses); a :class:`~.control_handler.Refusal` keeps its
  status and type, any other error is a 500 naming its type, and the server
  keeps serving. A :class:`~.control_handler.Stream` answer is sent as it comes, one
  JSON object per line (``application/x-ndjson``); an error while streaming
  becomes a last ``{"error": ...}`` line, and the stream is closed when it
  ends, fails or the client disconnects.

On asyncio (what ``tidegate up`` runs on) uvicorn runs in the caller's event
loop. On trio it runs on its own asyncio loop in a worker thread and calls the
handler back in the caller's loop through a blocking portal.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import http
import itertools
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import sniffio
import uvicorn
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tidegate.spec.errors import InvalidText
from tidegate.spec.text import find_invalid_text, surrogate_at, surrogate_text

from .control_handler import Handler, Refusal, Stream
from .values import dumps

__all__ = ["Limits", "serve"]

_MAX_HEAD = 64 * 1024
_HEAD_TOO_LARGE = f"the request head is over {_MAX_HEAD} bytes"
_KEEP_ALIVE_S = 5
"""How long an idle kept-alive connection stays open (the client reuses one for less)."""
_GRACE_S = 3
"""On shutdown, how long requests in flight may take to finish before they are cancelled."""


@dataclass(frozen=True)
class Limits:
    """The endpoint's bounds (see :mod:`.control`)."""

    max_body: int
    max_nesting: int
    read_timeout_s: float
    max_connections: int
    max_waiting_per_client: int
    """Connections of one peer address waiting for their request's head (see
    :class:`_ControlProtocol`)."""


def _error(status: int, type: str, message: str, *, close: bool = False) -> Response:
    headers = {"connection": "close"} if close else None
    return _json(status, {"error": {"type": type, "message": message}}, headers)


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    body = dumps(payload).encode()  # strict JSON: a NaN travels as "NaN"
    return Response(body, status, headers=headers, media_type="application/json")


def _error_bytes(status: int, type: str, message: str) -> bytes:
    return json.dumps({"error": {"type": type, "message": message}}).encode()


# -- the body's nesting, counted before it is parsed ---------------------------------------------

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nesting(raw: bytes) -> int:
    """How deeply the JSON text ``raw`` nests (brackets outside strings), without parsing it.

    Strings are cut out and everything but brackets dropped at C speed; only
    the brackets are walked. An unterminated string's brackets count (the body
    is refused either way).
    """
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for b in brackets:
        if b in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


# -- the body's text: Unicode scalar values only ----------------------------------------------------

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def invalid_text(raw: bytes, body: Any) -> None:
    """[InvalidText] unless every string of the parsed ``body`` is Unicode scalar values.

    JSON may spell a lone UTF-16 surrogate (``"\\udc80"``), and Python's parser also
    takes the bytes of one (CESU-8); such text can be neither stored nor sent (see
    :mod:`tidegate.spec.text`), so the request is refused before its handler runs.
    Both checks of the raw bytes run at C speed; the parsed body is looked through only
    when an escape of a surrogate occurs in it (a pair of them is one valid character).
    """
    try:
        raw.decode("utf-8")  # strict: refuses encoded surrogates
    except UnicodeDecodeError as e:
        raise InvalidText(f"the body is not valid UTF-8: {e.reason} at byte {e.start}") from None
    if _SURROGATE_ESCAPE.search(raw) is None:
        return
    bad = find_invalid_text(body)
    if bad is not None:
        at = surrogate_at(bad)
        assert at is not None
        raise InvalidText(
            f"the body holds text that is not valid Unicode: {surrogate_text(bad, at)}"
        )


_IDEMPOTENT = frozenset({"/append", "/sql"})
"""The routes that take an ``Idempotency-Key`` header: their one write is applied once."""


def _idempotency_key(path: str, headers: dict[bytes, bytes], body: dict[str, Any]) -> None:
    """An ``Idempotency-Key`` header becomes the body's ``request_id`` on :data:`_IDEMPOTENT`
    routes [ValueError elsewhere, or if the body names another one, or it is not UTF-8]."""
    raw = headers.get(b"idempotency-key")
    if raw is None:
        return
    if path not in _IDEMPOTENT:
        raise ValueError(f"{path} takes no Idempotency-Key (only {sorted(_IDEMPOTENT)} do)")
    try:
        key = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidText("the Idempotency-Key header is not valid UTF-8") from None
    if body.setdefault("request_id", key) != key:
        raise ValueError("the Idempotency-Key header and the body's request_id differ")


# -- per request: the token, the body's size and time, then the handler -------------------------


class _TooLarge(Exception):
    pass


_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


class _Endpoint:
    """The ASGI app: authenticates from the head alone, reads the body within its size and
    time limits, parses it and answers with the handler's result.

    One catch-all route has no use for a router or middleware: each layer of them cost
    more per request than the rest of an append's way through the endpoint.
    """

    def __init__(self, handler: Handler, token: str, limits: Limits) -> None:
        self.handler = handler
        self.expected = f"Bearer {token}".encode()
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - lifespan is off, websockets too
            return
        response = await self._respond(scope, receive)
        if response is not None:
            await response(scope, receive, send)

    async def _respond(self, scope: Scope, receive: Receive) -> Response | None:
        """The answer to the request of ``scope`` (``None`` if the client went away)."""
        method, path = scope["method"], scope["path"]
        headers = dict(scope["headers"])
        if path != "/health" and not hmac.compare_digest(
            headers.get(b"authorization", b""), self.expected
        ):
            return _error(401, "Unauthenticated", "missing or wrong bearer token", close=True)
        limit = self.limits.max_body
        length = headers.get(b"content-length")
        if length is not None and int(length) > limit:  # the parser has checked it is a number
            told = f"body of {int(length)} bytes (at most {limit})"
            return _error(413, "BodyTooLarge", told, close=True)
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.limits.read_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _TooLarge
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            return _error(408, "RequestTimeout", "too slow", close=True)
        except _TooLarge:
            return _error(413, "BodyTooLarge", f"body of more than {limit} bytes", close=True)
        if method not in _METHODS:
            return _error(405, "BadRequest", f"method {method} is not allowed")
        raw = b"".join(chunks)
        try:
            if nesting(raw) > self.limits.max_nesting:
                raise ValueError(f"the body nests deeper than {self.limits.max_nesting} levels")
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            invalid_text(raw, body)
            _idempotency_key(path, headers, body)
        except InvalidText as e:
            return _error(400, "InvalidText", str(e))
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            return _error(400, "BadRequest", str(e))
        try:
            result = await self.handler(method, path, body)
        except Refusal as r:
            return _error(r.status, r.type, r.message)
        except Exception as e:  # one bad request must not take the controller down
            return _error(500, type(e).__name__, str(e))
        if isinstance(result, Stream):
            return _StreamResponse(result)
        return _json(200, {"result": result})


class _StreamResponse(StreamingResponse):
    """A :class:`~.control_handler.Stream` as NDJSON; the stream is closed however the response ends."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        super().__init__(_lines(stream), media_type="application/x-ndjson")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()


async def _lines(stream: Stream) -> AsyncIterator[bytes]:
    try:
        async for item in stream.items:
            yield dumps(item).encode() + b"\n"
    except Exception as e:  # the stream broke: say why, as its last line
        error = {"error": {"type": type(e).__name__, "message": str(e)}}
        yield json.dumps(error).encode() + b"\n"


# -- per connection: the connection limit and the head's time ------------------------------------


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head the endpoint refuses (400)."""


class _Coalescing:
    """A transport whose writes made in one step of the event loop go out as one ``send``.

    uvicorn writes a response's head and body separately: two system calls (and, with
    ``TCP_NODELAY``, two segments) per answer, where one does. The writes are joined
    and handed to the socket's transport from a callback run right after the step.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        data, self._pending = b"".join(self._pending), []
        if data and not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _ControlProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the connection limits and the head's size and time.

    A head is awaited from the connection (or the previous answer on a kept-alive
    connection) until its last header line: the timer armed then fires 408
    ``RequestTimeout`` unless the head is in, and the bytes received meanwhile
    are bounded by :data:`_MAX_HEAD`. HTTP/1.1 requires a ``Host`` header
    (RFC 9112, 3.2): a request without one is answered 400.

    A connection still waiting for its head (a new one, a kept-alive one between
    requests, or a client sending its head slowly) holds a place that a client with a
    request ready could use, so such connections give way: a client (a peer address)
    keeps at most :attr:`Limits.max_waiting_per_client` of them (its oldest is closed
    when it opens one more), and when the endpoint is full a new connection takes the
    place of the one that has waited longest. Only when every connection has a request
    in hand is a new one turned away (503 ``Busy``). So 64 half-sent heads (a
    slowloris) cannot keep ``/health`` or anyone else out.
    """

    limits: Limits  # set on the subclass made for each server

    _head_timer: asyncio.TimerHandle | None = None
    _awaiting_head = True
    _waiting_since = 0
    """When it began to wait for a head: a count of the heads awaited, endpoint-wide."""
    _head_bytes = 0
    _refusal: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Coalescing(transport, self.loop))  # type: ignore[arg-type]
        self._arm()
        open_ = [c for c in self.connections if not c.transport.is_closing()]
        waiting = [c for c in open_ if isinstance(c, _ControlProtocol) and c._awaiting_head]
        mine = [c for c in waiting if c.client is not None and c.client[0] == _host(self.client)]
        if len(mine) > self.limits.max_waiting_per_client:
            _oldest(mine).make_room()
            return
        if len(open_) > self.limits.max_connections:
            others = [c for c in waiting if c is not self]
            if not others:
                self._refuse(503, "Busy", "too many requests")
                return
            _oldest(others).make_room()

    def make_room(self) -> None:
        """Close this connection, which waits for a head, for a newer one: quietly if nothing
        of a head came (as an idle kept-alive connection is closed), else 503."""
        if self._head_bytes == 0:
            self._disarm()
            self.transport.close()
        else:
            self._refuse(503, "Busy", "the request's head was too slow to come; closed for another")

    def _arm(self) -> None:
        self._disarm()
        self._awaiting_head, self._head_bytes = True, 0
        self._waiting_since = next(_WAITS)
        self._head_timer = self.loop.call_later(self.limits.read_timeout_s, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def data_received(self, data: bytes) -> None:
        if self._awaiting_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._awaiting_head and self._head_bytes > _MAX_HEAD and not self.transport.is_closing():
            self._refuse(400, "BadRequest", _HEAD_TOO_LARGE)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False  # the head is in: the guard times the body
        self._disarm()
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > _MAX_HEAD:  # it came in one piece: data_received could not tell
            self._refusal = _HEAD_TOO_LARGE
        elif self.parser.get_http_version() == "1.1" and not any(
            name == b"host" for name, _ in self.headers
        ):
            self._refusal = "an HTTP/1.1 request must name its Host"
        if self._refusal is not None:
            raise _HeadRefused  # the parser stops; uvicorn answers through send_400_response
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle.response_complete:
            # The next head (uvicorn's keep-alive timer closes an idle connection); a
            # pipelined request already in has its head, and is being answered now.
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing() and self._awaiting_head:
            self._refuse(408, "RequestTimeout", "too slow")

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "BadRequest", self._refusal or msg)

    def _refuse(self, status: int, type: str, message: str) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        body = _error_bytes(status, type, message)
        reason = http.HTTPStatus(status).phrase.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()


_WAITS = itertools.count()


def _host(address: tuple[str, int] | None) -> str | None:
    return None if address is None else address[0]


def _oldest(connections: list[_ControlProtocol]) -> _ControlProtocol:
    return min(connections, key=lambda c: c._waiting_since)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to its host (``tidegate up`` handles SIGINT/SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _server(
    handler: Callable[[str, str, Any], Awaitable[Any]],
    token: str,
    host: str,
    port: int,
    limits: Limits,
) -> _Server:
    protocol = type("ControlProtocol", (_ControlProtocol,), {"limits": limits})
    config = uvicorn.Config(
        _Endpoint(handler, token, limits),
        host=host,
        port=port,
        http=protocol,
        ws="none",
        lifespan="off",
        interface="asgi3",
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=_KEEP_ALIVE_S,
        timeout_graceful_shutdown=_GRACE_S,
    )
    return _Server(config)


def _address(server: _Server) -> str:
    sock = server.servers[0].sockets[0]
    local = sock.getsockname()
    return f"{local[0]}:{local[1]}"


async def serve(
    handler: Handler,
    token: str,
    host: str,
    port: int,
    limits: Limits,
    task_status: anyio.abc.TaskStatus[str],
) -> None:
    """Serve until cancelled; reports ``host:port`` through ``task_status`` once listening."""
    if sniffio.current_async_library() == "asyncio":
        await _serve_here(_server(handler, token, host, port, limits), task_status)
    else:
        await _serve_in_thread(handler, token, host, port, limits, task_status)


async def _serve_here(server: _Server, task_status: anyio.abc.TaskStatus[str]) -> None:
    """uvicorn in this asyncio loop; on cancellation it shuts down gracefully, then returns."""
    failed: list[BaseException] = []
    done = anyio.Event()

    async def run() -> None:
        with anyio.CancelScope(shield=True):  # cancelled, it still shuts down gracefully
            try:
                await server.serve()
            except BaseException as e:  # reported to the waiting task
                failed.append(e)
            finally:
                done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            await _wait_started(server, done, failed)
            task_status.started(_address(server))
            await done.wait()
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True):
                await done.wait()


async def _wait_started(server: _Server, done: anyio.Event, failed: list[BaseException]) -> None:
    while not server.started:
        if done.is_set():
            why = failed[0] if failed else None
            raise OSError(f"the control endpoint did not start: {why!r}") from None
        await anyio.sleep(0.005)


async def _serve_in_thread(
    handler: Handler,
    token: str,
    host: str,
    port: int,
    limits: Limits,
    task_status: anyio.abc.TaskStatus[str],
) -> None:
    """uvicorn on an asyncio loop of its own, calling ``handler`` back in this loop."""
    async with anyio.from_thread.BlockingPortal() as portal:

        async def bridged(method: str, path: str, body: Any) -> Any:
            result = await asyncio.wrap_future(portal.start_task_soon(handler, method, path, body))
            return _bridged_stream(result, portal) if isinstance(result, Stream) else result

        server = _server(bridged, token, host, port, limits)
        failed: list[BaseException] = []
        stopped = threading.Event()

        def run() -> None:
            try:
                asyncio.run(server.serve())
            except BaseException as e:  # reported to the waiting task
                failed.append(e)
            finally:
                stopped.set()

        thread = threading.Thread(target=run, name="tidegate-control", daemon=True)
        thread.start()
        try:
            while not server.started:
                if stopped.is_set():
                    why = failed[0] if failed else None
                    raise OSError(f"the control endpoint did not start: {why!r}")
                await anyio.sleep(0.005)
            task_status.started(_address(server))
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join)


_END = object()


def _bridged_stream(stream: Stream, portal: anyio.from_thread.BlockingPortal) -> Stream:
    """``stream`` (whose items come from the caller's loop) read from uvicorn's loop."""

    async def step() -> Any:
        try:
            return await anext(stream.items)
        except StopAsyncIteration:
            return _END

    async def items() -> AsyncIterator[Mapping[str, Any]]:
        while True:
            item = await asyncio.wrap_future(portal.start_task_soon(step))
            if item is _END:
                return
            yield item

    async def close() -> None:
        with contextlib.suppress(RuntimeError):  # the portal is gone: the caller's loop ended
            await asyncio.wrap_future(portal.start_task_soon(stream.aclose))

    return Stream(items(), close)
