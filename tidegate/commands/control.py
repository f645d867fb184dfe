"""The control endpoint of a running ``tidegate up``: JSON over HTTP on loopback.

``tidegate up`` serves it and writes where it listens, with a fresh bearer
token, to ``DATA_DIR/controller.json`` (mode 0600); ``tidegate status``,
``peek``, ``append`` and the DDL commands read that file and call it. The
controller is the one process that owns the data directory, so the other
commands never open the store themselves: no second writer, no second
timestamp oracle.

Routes (all but ``/health`` need ``Authorization: Bearer <token>``):
``GET /health``, ``GET /status``, ``POST /peek`` ``{"name", "at"?, "key"?}``,
``POST /append`` ``{"table", "rows"}``; DDL (see :mod:`.ddl` and :mod:`.service`):
``POST /create-table`` ``{"name", "columns"}``, ``POST /create-index``
``{"on", "keys", "name"?}``, ``POST /create-view`` ``{"name", "plan"}`` or
``{"name", "from", "columns"?}``, ``POST /drop`` ``{"name", "cascade"?}``,
``POST /read-policy`` ``{"name", "policy"}``. Answers are ``{"result": ...}``
or, on a refusal, ``{"error": {"type": <error class>, "message": ...}}`` with a
4xx status.

A request is one connection. The bearer token is checked before the body is
read; a request must arrive within 30 s (else 408), its body is at most
64 MiB and nests at most 600 levels (checked before parsing; else 400); at
most 64 requests are served at once (more get 503).
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = [
    "CONTROLLER_FILE",
    "ControlClient",
    "ControlError",
    "ControllerInfo",
    "Handler",
    "NoController",
    "Refusal",
    "new_token",
    "serve_control",
]

CONTROLLER_FILE = "controller.json"
"""Name, inside the data directory, of the file that says where the controller listens."""

_MAX_HEADER = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_MAX_NESTING = 600
"""The deepest JSON body accepted: a plan at its own limit (256 levels) fits, twice over."""
_READ_TIMEOUT_S = 30.0
"""How long a client may take to send its request, head and body."""
_MAX_CONNECTIONS = 64
"""Requests served at once; more are answered 503 at once."""


def _nesting(raw: bytes) -> int:
    """How deeply the JSON text ``raw`` nests (brackets outside strings), without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for b in raw:
        if in_string:
            if escaped:
                escaped = False
            elif b == 0x5C:  # backslash
                escaped = True
            elif b == 0x22:  # quote
                in_string = False
        elif b == 0x22:
            in_string = True
        elif b in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif b in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


class ControlError(Exception):
    """A call to the control endpoint that did not succeed; ``type`` names the server's error."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


class NoController(ControlError):
    """No ``tidegate up`` is serving this data directory."""

    def __init__(self, message: str) -> None:
        super().__init__("NoController", message)


class Refusal(Exception):
    """Raised by a handler for a request it refuses: an HTTP status, an error type and a message."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


@dataclass(frozen=True)
class ControllerInfo:
    """What ``controller.json`` holds: where the controller listens, its token and pid.

    ``metrics`` is ``HOST:PORT`` of the Prometheus metrics endpoint when ``tidegate
    up --metrics`` serves one, else ``None`` (and the key is left out of the file,
    so files written before the field existed read the same).
    """

    address: str
    token: str
    pid: int
    data_dir: str
    metrics: str | None = None

    @staticmethod
    def path(data_dir: str | Path) -> Path:
        return Path(data_dir) / CONTROLLER_FILE

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object; ``metrics`` only when served."""
        d = asdict(self)
        if self.metrics is None:
            del d["metrics"]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ControllerInfo:
        """Read :meth:`to_json`'s object (``metrics`` optional); ``KeyError``/``TypeError`` if malformed."""
        metrics = d.get("metrics")
        if metrics is not None and not isinstance(metrics, str):
            raise TypeError(f"metrics must be HOST:PORT or null, got {metrics!r}")
        return cls(str(d["address"]), str(d["token"]), int(d["pid"]), str(d["data_dir"]), metrics)

    def write(self) -> None:
        """Write the file atomically, readable by its owner only."""
        target = self.path(self.data_dir)
        tmp = target.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_json(), f)
        os.replace(tmp, target)

    def remove(self) -> None:
        """Remove the file if it is still this controller's."""
        try:
            if ControllerInfo.read(self.data_dir) == self:
                self.path(self.data_dir).unlink()
        except (NoController, FileNotFoundError):
            pass

    @classmethod
    def read(cls, data_dir: str | Path) -> ControllerInfo:
        p = cls.path(data_dir)
        try:
            d = json.loads(p.read_text())
            if not isinstance(d, dict):
                raise TypeError(f"expected a JSON object, got {type(d).__name__}")
            return cls.from_json(d)
        except FileNotFoundError:
            raise NoController(
                f"no controller is running on {Path(data_dir).resolve()} "
                f"(no {CONTROLLER_FILE}); start one with: tidegate up --data-dir {data_dir}"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise NoController(f"{p} is unreadable: {e}") from None

    def alive(self) -> bool:
        """Whether the process that wrote the file still exists."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def new_token() -> str:
    """A fresh bearer token for one controller's lifetime."""
    return secrets.token_urlsafe(24)


Handler = Callable[[str, str, Mapping[str, Any]], Awaitable[Any]]
"""``(method, path, body) -> result``; raises :class:`Refusal` to refuse."""


async def _respond(stream: anyio.abc.ByteStream, status: int, payload: Any) -> None:
    body = json.dumps(payload, default=str).encode()
    reason = http.client.responses.get(status, "")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    await stream.send(head + body)


async def _serve_one(stream: anyio.abc.ByteStream, handler: Handler, token: str) -> None:
    """One request: its head within the read timeout, the token checked before the body is read."""
    reader = BufferedByteReceiveStream(stream)
    try:
        with anyio.fail_after(_READ_TIMEOUT_S):
            head = await reader.receive_until(b"\r\n\r\n", _MAX_HEADER)
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if not 0 <= length <= _MAX_BODY:
            raise ValueError(f"body of {length} bytes (at most {_MAX_BODY})")
    except TimeoutError:
        await _respond(stream, 408, {"error": {"type": "RequestTimeout", "message": "too slow"}})
        return
    except (anyio.IncompleteRead, anyio.DelimiterNotFound, ValueError, UnicodeDecodeError) as e:
        await _respond(stream, 400, {"error": {"type": "BadRequest", "message": str(e)}})
        return
    path = target.split("?", 1)[0]
    if path != "/health":
        given = headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            await _respond(
                stream,
                401,
                {"error": {"type": "Unauthenticated", "message": "missing or wrong bearer token"}},
            )
            return
    try:
        with anyio.fail_after(_READ_TIMEOUT_S):
            raw = await reader.receive_exactly(length) if length else b""
        if _nesting(raw) > _MAX_NESTING:
            raise ValueError(f"the body nests deeper than {_MAX_NESTING} levels")
        body = json.loads(raw) if raw else {}
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
    except TimeoutError:
        await _respond(stream, 408, {"error": {"type": "RequestTimeout", "message": "too slow"}})
        return
    except (anyio.IncompleteRead, ValueError, RecursionError) as e:
        await _respond(stream, 400, {"error": {"type": "BadRequest", "message": str(e)}})
        return
    try:
        result = await handler(method, path, body)
    except Refusal as r:
        await _respond(stream, r.status, {"error": {"type": r.type, "message": r.message}})
        return
    await _respond(stream, 200, {"result": result})


async def serve_control(
    handler: Handler,
    token: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the control endpoint until cancelled; reports ``host:port`` through ``task_status``.

    Each connection carries one request. A handler error other than
    :class:`Refusal` is answered 500 with its type and message, and the
    server keeps serving.
    """
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    limiter = anyio.CapacityLimiter(_MAX_CONNECTIONS)

    async def connection(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                limiter.acquire_nowait()
            except anyio.WouldBlock:
                with contextlib.suppress(
                    anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
                ):
                    await _respond(
                        stream, 503, {"error": {"type": "Busy", "message": "too many requests"}}
                    )
                return
            try:
                await _serve_one(stream, handler, token)
            except anyio.get_cancelled_exc_class():
                raise
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the client went away
            except Exception as e:  # one bad request must not take the controller down
                with contextlib.suppress(
                    anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
                ):
                    await _respond(
                        stream, 500, {"error": {"type": type(e).__name__, "message": str(e)}}
                    )
            finally:
                limiter.release()

    async with listener:
        local = listener.extra(SocketAttribute.local_address)
        assert isinstance(local, tuple)  # an IP listener's (host, port, ...)
        task_status.started(f"{local[0]}:{local[1]}")
        await listener.serve(connection)


class ControlClient:
    """A blocking client of the control endpoint (``http.client``; one connection per call)."""

    def __init__(self, info: ControllerInfo, *, timeout: float = 60.0) -> None:
        self.info = info
        self.timeout = timeout

    @classmethod
    def for_data_dir(cls, data_dir: str | Path, *, timeout: float = 60.0) -> ControlClient:
        """The client of the controller serving ``data_dir``; :class:`NoController` if none."""
        info = ControllerInfo.read(data_dir)
        if not info.alive():
            raise NoController(
                f"the controller that served {info.data_dir} (pid {info.pid}) is gone; "
                f"start one with: tidegate up --data-dir {data_dir}"
            )
        return cls(info, timeout=timeout)

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One request; the result, or :class:`ControlError` with the server's error type."""
        host, _, port = self.info.address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=self.timeout)
        payload = json.dumps(body or {}).encode()
        try:
            conn.request(
                method,
                path,
                body=payload,
                headers={
                    "Authorization": f"Bearer {self.info.token}",
                    "Content-Type": "application/json",
                },
            )
            response = conn.getresponse()
            data = json.loads(response.read() or b"{}")
        except ConnectionRefusedError:
            raise NoController(
                f"the controller at {self.info.address} (pid {self.info.pid}) refuses connections"
            ) from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise ControlError(
                type(e).__name__, f"control endpoint {self.info.address}: {e}"
            ) from None
        finally:
            conn.close()
        if "error" in data:
            err = data["error"]
            raise ControlError(str(err.get("type")), str(err.get("message")))
        return data.get("result")
