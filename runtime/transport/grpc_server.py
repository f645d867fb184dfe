"""The replica's gRPC server: ``ProtoCompute`` served by a plain sync ``grpc.server``.

Thin on purpose: it checks each new stream's metadata, keeps one controller at
a time, and moves bytes between the call and a :class:`~.handler.ReplicaConnection`
(the replica's logic, e.g. the Spark replica) through the codec. Rules it enforces:

* a wrong or missing ``authorization: Bearer <token>`` (when a token is
  configured) ends the call with ``UNAUTHENTICATED``;
* a missing or different ``x-tidegate-version`` ends it with
  ``FAILED_PRECONDITION``, naming both versions (the replica's version also in
  the trailing metadata);
* a new accepted stream preempts the current one, which ends with ``ABORTED``;
* bytes that do not decode to a command end that stream with
  ``INVALID_ARGUMENT`` naming the problem; the server keeps serving;
* a session raising a :class:`~tidegate.spec.errors.TidegateError` ends the
  stream with ``FAILED_PRECONDITION`` and the error's name and message.

Threads: the pool runs one response loop per stream (plus unary health
checks); each stream has one more thread reading commands and calling the
session, so a session is never called concurrently with itself. The standard
``grpc.health.v1.Health`` service reports ``SERVING`` while the server runs.
"""

from __future__ import annotations

import hmac
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tidegate.runtime.wire.errors import WireError
from tidegate.runtime.wire.frames import FrameAssembler, response_frames
from tidegate.spec.errors import TidegateError
from tidegate.spec.protocol.responses import ComputeResponse

from .handler import ReplicaConnection, ReplicaHandler
from .version import AUTH_HEADER, PROTOCOL_VERSION, VERSION_HEADER, bearer

__all__ = ["SERVICE", "ReplicaServer", "ServerTls"]

SERVICE = "tidegate.compute.ProtoCompute"
"""The gRPC service name (also the health-check service name)."""


@dataclass(frozen=True)
class ServerTls:
    """TLS for the replica: its certificate and key; ``client_ca`` set = mutual TLS required."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    @classmethod
    def from_files(
        cls, cert: str | Path, key: str | Path, client_ca: str | Path | None = None
    ) -> ServerTls:
        """Read PEM files: certificate chain, private key, and optionally the client CA."""
        return cls(
            Path(cert).read_bytes(),
            Path(key).read_bytes(),
            Path(client_ca).read_bytes() if client_ca else None,
        )

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


@dataclass(frozen=True)
class _End:
    """The end of a stream: ``code`` None ends it normally, otherwise with that status."""

    code: grpc.StatusCode | None
    details: str


class _Connection:
    """One accepted stream: its outgoing queue and its session's lifecycle."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.outgoing: queue.SimpleQueue[bytes | _End] = queue.SimpleQueue()
        self.lock = threading.RLock()  # serialises on_command with end()
        self.ended = False
        self.session: ReplicaConnection | None = None

    # ResponseSink
    def send(self, response: ComputeResponse) -> None:
        if not self.ended:
            for frame in response_frames(response):  # one, unless the response is large
                self.outgoing.put(frame)

    def send_many(self, responses: Sequence[ComputeResponse]) -> None:
        for response in responses:
            self.send(response)

    def end(self, code: grpc.StatusCode | None, details: str) -> None:
        """End the stream once: wake the response loop and close the session."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
            self.outgoing.put(_End(code, details))
            session, self.session = self.session, None
        if session is not None:
            session.on_close()

    def read(self, requests: Iterator[bytes]) -> None:
        """The stream's reader thread: decode each command and hand it to the session."""
        assembler = FrameAssembler("command")
        try:
            for raw in requests:
                try:
                    command = assembler.feed(raw)
                except WireError as e:
                    self.end(grpc.StatusCode.INVALID_ARGUMENT, f"malformed command: {e}")
                    return
                if command is None:
                    continue  # a fragment of a large command
                with self.lock:
                    if self.ended or self.session is None:
                        return
                    try:
                        self.session.on_command(command)
                    except TidegateError as e:
                        self.end(
                            grpc.StatusCode.FAILED_PRECONDITION,
                            f"command rejected: {type(e).__name__}: {e}",
                        )
                        return
                    except Exception as e:
                        self.end(grpc.StatusCode.INTERNAL, f"replica failed: {e!r}")
                        return
        except Exception:  # the call was cancelled or broke while reading
            pass
        self.end(None, "the controller closed the stream")


class ReplicaServer:
    """Serves ``ProtoCompute`` on ``address`` (``host:port``; port 0 picks a free one)."""

    def __init__(
        self,
        handler: ReplicaHandler,
        *,
        address: str = "127.0.0.1:0",
        version: str = PROTOCOL_VERSION,
        token: str | None = None,
        tls: ServerTls | None = None,
        max_workers: int = 8,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.handler = handler
        self.version = version
        self.token = token
        self._address = address
        self._tls = tls
        self._lock = threading.Lock()
        self._current: _Connection | None = None
        self._accepted = 0
        self.health = health.HealthServicer()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers, thread_name_prefix="tidegate-replica"),
            options=list(options),
        )
        rpc = grpc.stream_stream_rpc_method_handler(self._serve_stream)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"CommandResponseStream": rpc}),)
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        self.port = 0

    @property
    def address(self) -> str:
        """``host:port`` as bound (valid after :meth:`start`)."""
        host = self._address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def accepted(self) -> int:
        """How many streams were accepted so far."""
        return self._accepted

    def start(self) -> ReplicaServer:
        if self._tls is not None:
            port = self._server.add_secure_port(self._address, self._tls.credentials())
        else:
            port = self._server.add_insecure_port(self._address)
        if port == 0:
            raise OSError(f"cannot bind the replica server to {self._address}")
        self.port = port
        self._server.start()
        for service in ("", SERVICE):
            self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, end the current stream, stop serving (after ``grace`` seconds)."""
        self.health.enter_graceful_shutdown()
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            current.end(grpc.StatusCode.UNAVAILABLE, "the replica is shutting down")
        self._server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self._server.wait_for_termination(timeout))

    def __enter__(self) -> ReplicaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(0)

    # -- one stream -----------------------------------------------------------------

    def _refusal(self, metadata: Mapping[str, str]) -> tuple[grpc.StatusCode, str] | None:
        if self.token is not None:
            given = metadata.get(AUTH_HEADER)
            if given is None or not hmac.compare_digest(
                given.encode(), bearer(self.token).encode()
            ):
                what = "missing" if given is None else "wrong"
                return grpc.StatusCode.UNAUTHENTICATED, f"{what} bearer token"
        theirs = metadata.get(VERSION_HEADER)
        if theirs != self.version:
            return (
                grpc.StatusCode.FAILED_PRECONDITION,
                f"protocol version mismatch: replica speaks {self.version}, "
                f"controller sent {theirs if theirs is not None else 'no version'}",
            )
        return None

    def _serve_stream(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        metadata = {
            k: v.decode() if isinstance(v, bytes) else v for k, v in context.invocation_metadata()
        }
        refusal = self._refusal(metadata)
        if refusal is not None:
            context.set_trailing_metadata(((VERSION_HEADER, self.version),))
            context.abort(*refusal)
        with self._lock:
            self._accepted += 1
            conn = _Connection(self._accepted)
            previous, self._current = self._current, conn
        if previous is not None:
            previous.end(grpc.StatusCode.ABORTED, "preempted by a newer controller connection")
        context.add_callback(lambda: conn.end(None, "the call ended"))
        try:
            session = self.handler.on_connect(metadata, conn)
        except Exception as e:
            conn.end(grpc.StatusCode.INTERNAL, f"replica refused the session: {e!r}")
        else:
            with conn.lock:
                if conn.ended:
                    session.on_close()
                else:
                    conn.session = session
        context.send_initial_metadata(((VERSION_HEADER, self.version),))
        threading.Thread(
            target=conn.read, args=(requests,), name=f"tidegate-stream-{conn.number}", daemon=True
        ).start()
        try:
            while True:
                item = conn.outgoing.get()
                if isinstance(item, _End):
                    if item.code is not None:
                        context.abort(item.code, item.details)
                    return
                yield item
        finally:
            conn.end(None, "the call ended")
            with self._lock:
                if self._current is conn:
                    self._current = None
