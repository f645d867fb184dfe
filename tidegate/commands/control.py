"""The control endpoint of a running ``tidegate up``: JSON over HTTP on loopback.

``tidegate up`` serves it and writes where it listens, with a fresh bearer
token, to ``DATA_DIR/controller.json`` (mode 0600); ``tidegate status``,
``peek``, ``append`` and the DDL commands read that file and call it. The
controller is the one process that owns the data directory, so the other
commands never open the store themselves: no second writer, no second
timestamp oracle.

Routes (all but ``/health`` need ``Authorization: Bearer <token>``):
``GET /health``, ``GET /status`` ``{"describe"?}``, ``POST /describe`` ``{"name"}``,
``POST /subscribe`` ``{"name", "as_of"?}`` (streamed: one JSON object per line),
``GET /replicas``, ``POST /replica-add`` ``{"name", "address"?, "executor"?,
"spark_master"?}``, ``POST /replica-drop`` ``{"name"}``, ``POST /peek`` ``{"name", "at"?, "key"?}``,
``POST /append`` ``{"table", "rows"}``, ``POST /copy-to`` ``{"name", "url", "at"?}``; DDL (see :mod:`.ddl` and :mod:`.service`):
``POST /create-table`` ``{"name", "columns"}``, ``POST /create-index``
``{"on", "keys", "name"?}``, ``POST /create-view`` ``{"name", "plan"}`` or
``{"name", "from", "columns"?}``, ``POST /drop`` ``{"name", "cascade"?}``,
``POST /read-policy`` ``{"name", "policy"}``; ``POST /sql`` ``{"sql", "params"?}`` (see
:mod:`.sql`), or ``{"sql", "params"?, "stream": true}`` (streamed: Materialize's WebSocket
messages, a ``SUBSCRIBE``'s rows as they come; see :mod:`.service`). Answers are ``{"result": ...}``
or, on a refusal, ``{"error": {"type": <error class>, "message": ...}}`` with a
4xx status (``503 Starting`` while ``tidegate up`` starts, when only ``/status``
and ``/health`` answer; see :mod:`.gate`).

The server is an ASGI app (Starlette's responses) on uvicorn with httptools
(:mod:`.control_server`, imported only by :func:`serve_control`). Connections
are kept alive between requests. The
bearer token is checked before the body is read (else 401); a request's head
must arrive within 30 s, and its body within 30 s of the head (else 408); a
body is at most 64 MiB, counted as it streams in (else 413), and nests at most
600 levels, checked before parsing (else 400); at most 64 connections are
served at once, those waiting for a request's head giving way to new ones (at
most 16 of them per client address; a new connection gets 503 only when all
64 have a request in hand). :class:`ControlClient` keeps its connections
open between calls.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .control_handler import Handler, Refusal, Stream

if TYPE_CHECKING:
    import http.client

    import anyio.abc

__all__ = [
    "CONTROLLER_FILE",
    "TOKEN_FILE",
    "ControlClient",
    "ControlError",
    "ControllerInfo",
    "Handler",
    "NoController",
    "Refusal",
    "Stream",
    "new_token",
    "serve_control",
    "stored_token",
]

CONTROLLER_FILE = "controller.json"
"""Name, inside the data directory, of the file that says where the controller listens."""

_MAX_BODY = 64 * 1024 * 1024
"""The largest request body accepted."""
_MAX_NESTING = 600
"""The deepest JSON body accepted: a plan at its own limit (256 levels) fits, twice over."""
_READ_TIMEOUT_S = 30.0
"""How long a client may take to send a request's head, and then its body."""
_MAX_CONNECTIONS = 64
"""Connections served at once; one more takes the place of the one that has waited longest for
its request's head, or is answered 503 if every one has a request in hand."""
_MAX_WAITING_PER_CLIENT = 16
"""Connections of one peer address waiting for their request's head (one more closes its
oldest): a client sending heads slowly cannot hold every place."""
_STARTING_RETRY_S = 0.25
"""How often :class:`ControlClient` retries a call while the controller is starting."""
_CLIENT_IDLE_S = 3.0
"""How long :class:`ControlClient` reuses an idle connection (the server keeps one for 5 s)."""


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
    sql: str | None = None
    """``HOST:PORT`` of the PostgreSQL wire protocol, when ``tidegate up`` serves it."""

    @staticmethod
    def path(data_dir: str | Path) -> Path:
        return Path(data_dir) / CONTROLLER_FILE

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object; ``metrics`` only when served."""
        d = asdict(self)
        for optional in ("metrics", "sql"):
            if d[optional] is None:
                del d[optional]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ControllerInfo:
        """Read :meth:`to_json`'s object (``metrics`` optional); ``KeyError``/``TypeError`` if malformed."""
        metrics, sql = d.get("metrics"), d.get("sql")
        for name, value in (("metrics", metrics), ("sql", sql)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be HOST:PORT or null, got {value!r}")
        return cls(
            str(d["address"]), str(d["token"]), int(d["pid"]), str(d["data_dir"]), metrics, sql
        )

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


TOKEN_FILE = "control-token"
"""The control endpoint's token, kept across restarts of ``tidegate up`` (mode 0600)."""

_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,256}")


def new_token() -> str:
    """A fresh bearer token."""
    return secrets.token_urlsafe(24)


def stored_token(data_dir: str | Path, *, rotate: bool = False) -> str:
    """The control endpoint's token for ``data_dir``: the one kept in ``DATA_DIR/control-token``
    by the last ``tidegate up``, so clients (and psql, whose default password it is) keep
    working across a restart; a fresh one, written there, if there is none, if it is not a
    token this function wrote (a damaged file), or if ``rotate``."""
    path = Path(data_dir) / TOKEN_FILE
    if not rotate:
        try:
            kept = path.read_text().strip()
        except (FileNotFoundError, UnicodeDecodeError):
            kept = ""
        if _TOKEN.fullmatch(kept):
            return kept
    token = new_token()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)
    return token


async def serve_control(
    handler: Handler,
    token: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: anyio.abc.TaskStatus[str] | None = None,
) -> None:
    """Serve the control endpoint until cancelled; reports ``host:port`` through ``task_status``.

    A handler error other than :class:`Refusal` is answered 500 with its type
    and message, and the server keeps serving. On cancellation the server stops
    accepting, lets requests in flight finish (for up to 3 s) and returns.
    """
    import anyio

    from .control_server import Limits, serve

    limits = Limits(
        _MAX_BODY, _MAX_NESTING, _READ_TIMEOUT_S, _MAX_CONNECTIONS, _MAX_WAITING_PER_CLIENT
    )
    status = anyio.TASK_STATUS_IGNORED if task_status is None else task_status
    await serve(handler, token, host, port, limits, status)


class ControlClient:
    """A blocking client of the control endpoint (``http.client``), safe to share between threads.

    Connections are kept alive and reused across calls (one per concurrent
    caller); a connection the server has closed while idle is replaced before
    it is used, or, if the server closed it just as it was reused, the call is
    retried once on a fresh one (the server closes only idle connections, so
    the request was not seen). :meth:`close` (or ``with``) closes them.

    While the controller is still starting (``503 Starting``, see :mod:`.gate`) a
    call is retried every 0.25 s until ``timeout`` has passed since it began;
    ``on_starting`` (if given) is called before the first retry of each call.
    """

    def __init__(
        self,
        info: ControllerInfo,
        *,
        timeout: float = 60.0,
        on_starting: Callable[[], None] | None = None,
    ) -> None:
        self.info = info
        self.timeout = timeout
        self.on_starting = on_starting
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    @classmethod
    def for_data_dir(
        cls,
        data_dir: str | Path,
        *,
        timeout: float = 60.0,
        on_starting: Callable[[], None] | None = None,
    ) -> ControlClient:
        """The client of the controller serving ``data_dir``; :class:`NoController` if none."""
        info = ControllerInfo.read(data_dir)
        if not info.alive():
            raise NoController(
                f"the controller that served {info.data_dir} (pid {info.pid}) is gone; "
                f"start one with: tidegate up --data-dir {data_dir}"
            )
        return cls(info, timeout=timeout, on_starting=on_starting)

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections (a later call opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An open idle connection that is still good (and True), else a new one (and False)."""
        import http.client  # here: a command that finds no controller never needs it

        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if now - since < _CLIENT_IDLE_S and not _dropped(conn):
                return conn, True
            conn.close()
        host, _, port = self.info.address.rpartition(":")
        return http.client.HTTPConnection(host, int(port), timeout=self.timeout), False

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """One request; the result, or :class:`ControlError` with the server's error type
        (waiting while the controller starts: see the class docstring)."""
        deadline = time.monotonic() + self.timeout
        told = False
        while True:
            try:
                return self._call(method, path, body)
            except ControlError as e:
                if e.type != "Starting" or time.monotonic() >= deadline:
                    raise
            if not told and self.on_starting is not None:
                self.on_starting()
            told = True
            time.sleep(_STARTING_RETRY_S)

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None) -> Any:
        import http.client

        payload = json.dumps(body or {}).encode()
        headers = {
            "Authorization": f"Bearer {self.info.token}",
            "Content-Type": "application/json",
        }
        for attempt in range(2):
            conn, reused = self._connection()
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except ConnectionRefusedError:
                conn.close()
                raise NoController(
                    f"the controller at {self.info.address} (pid {self.info.pid}) refuses "
                    "connections"
                ) from None
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if reused and attempt == 0:
                    continue  # closed by the server while idle: the request was not read
                raise ControlError(
                    type(e).__name__, f"control endpoint {self.info.address}: {e}"
                ) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ControlError(
                    type(e).__name__, f"control endpoint {self.info.address}: {e}"
                ) from None
            if response.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append((conn, time.monotonic()))
            break
        return _answer(response.status, raw, self.info.address)

    def stream(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> Generator[Any, None, None]:
        """A streamed request (a :class:`Stream` answer): each line's JSON as it arrives.

        A refusal is a :class:`ControlError`, raised before anything is yielded. The
        connection is the call's own, waits as long as the stream is quiet, and is closed
        when the iteration ends or is abandoned (closing the generator: on Ctrl-C, say),
        which ends the stream on the server.
        """
        import http.client

        host, _, port = self.info.address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=self.timeout)
        headers = {
            "Authorization": f"Bearer {self.info.token}",
            "Content-Type": "application/json",
        }
        try:
            try:
                conn.request(method, path, body=json.dumps(body or {}).encode(), headers=headers)
                response = conn.getresponse()
            except ConnectionRefusedError:
                raise NoController(
                    f"the controller at {self.info.address} (pid {self.info.pid}) refuses "
                    "connections"
                ) from None
            except (OSError, http.client.HTTPException) as e:
                raise ControlError(
                    type(e).__name__, f"control endpoint {self.info.address}: {e}"
                ) from None
            if not response.getheader("content-type", "").startswith("application/x-ndjson"):
                _answer(response.status, response.read(), self.info.address)  # raises if refused
                raise ControlError(f"HTTP{response.status}", f"{path} answered without streaming")
            if conn.sock is not None:
                conn.sock.settimeout(None)  # a stream may be quiet for a long while
            while True:
                try:
                    line = response.readline()
                except (OSError, http.client.HTTPException) as e:
                    raise ControlError(
                        type(e).__name__, f"control endpoint {self.info.address}: {e}"
                    ) from None
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


def _answer(status: int, raw: bytes, address: str) -> Any:
    """A response body's ``result``; :class:`ControlError` for an error or a malformed body."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError as e:
        raise ControlError(f"HTTP{status}", f"control endpoint {address}: {e}") from None
    if not isinstance(data, dict):
        raise ControlError(f"HTTP{status}", f"control endpoint {address}: {data!r}")
    if "error" in data:
        err = data["error"]
        raise ControlError(str(err.get("type")), str(err.get("message")))
    return data.get("result")


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed by the server (it is readable: EOF, or stray bytes)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
