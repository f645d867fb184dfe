"""The replica's gRPC server: ``ProtoCompute`` and ``ProtoStorage`` served by a plain sync ``grpc.server``.

Thin on purpose: it checks each new stream's metadata, keeps one controller at
a time per protocol, and moves bytes between the call and a
:class:`~.handler.ReplicaConnection` (the replica's logic, e.g. the Spark
replica) through the protocol's codec. One server serves a handler per
protocol (:mod:`.protocols`: ``compute=``, ``storage=``, or both) on one port;
each service enforces the same rules, on its own:

* a wrong or missing ``authorization: Bearer <token>`` (when a token is
  configured) ends the call with ``UNAUTHENTICATED``;
* a missing or different ``x-tidegate-version`` ends it with
  ``FAILED_PRECONDITION``, naming both versions (the replica's version also in
  the trailing metadata);
* a new accepted stream preempts the current one of the same protocol, which
  ends with ``ABORTED`` (a storage stream never preempts a compute one);
* bytes that do not decode to a command end that stream with
  ``INVALID_ARGUMENT`` naming the problem; the server keeps serving;
* a session raising a :class:`~tidegate.spec.errors.TidegateError` ends the
  stream with ``FAILED_PRECONDITION`` and the error's name and message.

Threads: the pool runs one response loop per stream (plus unary health
checks); each stream has one more thread reading commands and calling the
session, so a session is never called concurrently with itself. The standard
``grpc.health.v1.Health`` service reports ``SERVING`` (for ``""`` and each
served protocol's service name) while the server runs. A protocol the server
does not serve is answered ``UNIMPLEMENTED`` by gRPC itself.
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
from typing import Any, Generic

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from typing_extensions import TypeVar

from tidegate.runtime.wire.errors import WireError
from tidegate.spec.errors import TidegateError
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse
from tidegate.spec.storage.commands import StorageCommand, StorageResponse

from .handler import ReplicaConnection, ReplicaHandler
from .protocols import COMPUTE, STORAGE, WireProtocol
from .version import AUTH_HEADER, OWN_VERSION, VERSION_HEADER, Own, bearer

__all__ = ["SERVICE", "STORAGE_SERVICE", "ReplicaServer", "ServerTls"]

SERVICE = COMPUTE.service
"""The compute protocol's gRPC service name (also its health-check service name)."""

STORAGE_SERVICE = STORAGE.service
"""The storage protocol's gRPC service name (also its health-check service name)."""

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


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


class _Connection(Generic[C, R]):
    """One accepted stream: its outgoing queue and its session's lifecycle."""

    def __init__(self, number: int, protocol: WireProtocol[C, R]) -> None:
        self.number = number
        self.protocol = protocol
        self.outgoing: queue.SimpleQueue[bytes | _End] = queue.SimpleQueue()
        self.lock = threading.RLock()  # serialises on_command with end()
        self.ended = False
        self.session: ReplicaConnection[C] | None = None

    # ResponseSink
    def send(self, response: R) -> None:
        if not self.ended:
            for frame in self.protocol.responses.frames(response):  # one, unless it is large
                self.outgoing.put(frame)

    def send_many(self, responses: Sequence[R]) -> None:
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
        assembler = self.protocol.commands.assembler()
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


class _Service(Generic[C, R]):
    """One protocol served by the server: its handler, version and current stream."""

    def __init__(
        self,
        server: ReplicaServer,
        protocol: WireProtocol[C, R],
        handler: ReplicaHandler[C, R],
        version: str,
    ) -> None:
        self.server = server
        self.protocol = protocol
        self.handler = handler
        self.version = version
        self.lock = threading.Lock()
        self.current: _Connection[C, R] | None = None
        self.accepted = 0

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        rpc = grpc.stream_stream_rpc_method_handler(self.serve)
        return grpc.method_handlers_generic_handler(
            self.protocol.service, {"CommandResponseStream": rpc}
        )

    def end_current(self, code: grpc.StatusCode, details: str) -> None:
        with self.lock:
            current, self.current = self.current, None
        if current is not None:
            current.end(code, details)

    def _refusal(self, metadata: Mapping[str, str]) -> tuple[grpc.StatusCode, str] | None:
        token = self.server.token
        if token is not None:
            given = metadata.get(AUTH_HEADER)
            if given is None or not hmac.compare_digest(given.encode(), bearer(token).encode()):
                what = "missing" if given is None else "wrong"
                return grpc.StatusCode.UNAUTHENTICATED, f"{what} bearer token"
        theirs = metadata.get(VERSION_HEADER)
        if theirs != self.version:
            return (
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{self.protocol.name} protocol version mismatch: replica speaks {self.version}, "
                f"controller sent {theirs if theirs is not None else 'no version'}",
            )
        return None

    def serve(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        metadata = {
            k: v.decode() if isinstance(v, bytes) else v for k, v in context.invocation_metadata()
        }
        refusal = self._refusal(metadata)
        if refusal is not None:
            context.set_trailing_metadata(((VERSION_HEADER, self.version),))
            context.abort(*refusal)
        with self.lock:
            self.accepted += 1
            conn: _Connection[C, R] = _Connection(self.accepted, self.protocol)
            previous, self.current = self.current, conn
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
            target=conn.read,
            args=(requests,),
            name=f"tidegate-{self.protocol.name}-stream-{conn.number}",
            daemon=True,
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
            with self.lock:
                if self.current is conn:
                    self.current = None


class ReplicaServer:
    """Serves the compute and/or storage protocol on ``address`` (``host:port``; port 0 picks a free one).

    ``compute`` and ``storage`` are the handlers of the protocols served (at
    least one). The first positional argument, if given, is the address (a
    ``str``) or, as before both protocols existed, the compute handler.
    ``version``: the version every served protocol claims (each protocol's own
    by default; a test may make a replica speak another one).
    """

    def __init__(
        self,
        target: str | ReplicaHandler[ComputeCommand, ComputeResponse] | None = None,
        /,
        *,
        compute: ReplicaHandler[ComputeCommand, ComputeResponse] | None = None,
        storage: ReplicaHandler[StorageCommand, StorageResponse] | None = None,
        address: str | None = None,
        version: str | Own = OWN_VERSION,
        token: str | None = None,
        tls: ServerTls | None = None,
        max_workers: int = 8,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if isinstance(target, str):
            if address is not None:
                raise TypeError("the address was given twice")
            address = target
        elif target is not None:
            if compute is not None:
                raise TypeError("the compute handler was given twice")
            compute = target
        if compute is None and storage is None:
            raise TypeError("a replica server needs a compute or a storage handler (or both)")
        self.handler = compute
        self.token = token
        self._address = address if address is not None else "127.0.0.1:0"
        self._tls = tls
        self.services: dict[str, _Service[Any, Any]] = {}
        if compute is not None:
            v = COMPUTE.version if version is OWN_VERSION else version
            self.services[COMPUTE.name] = _Service(self, COMPUTE, compute, v)
        if storage is not None:
            v = STORAGE.version if version is OWN_VERSION else version
            self.services[STORAGE.name] = _Service(self, STORAGE, storage, v)
        self.version = next(iter(self.services.values())).version
        self.health = health.HealthServicer()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers, thread_name_prefix="tidegate-replica"),
            options=list(options),
        )
        self._server.add_generic_rpc_handlers(
            tuple(service.rpc_handler() for service in self.services.values())
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        self.port = 0

    @property
    def address(self) -> str:
        """``host:port`` as bound (valid after :meth:`start`)."""
        host = self._address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def protocols(self) -> tuple[str, ...]:
        """The names of the protocols served (``"compute"``, ``"storage"``)."""
        return tuple(self.services)

    @property
    def accepted(self) -> int:
        """How many streams were accepted so far (of every protocol)."""
        return sum(service.accepted for service in self.services.values())

    def accepted_by(self, protocol: WireProtocol[Any, Any] | str) -> int:
        """How many streams of ``protocol`` were accepted so far."""
        name = protocol if isinstance(protocol, str) else protocol.name
        service = self.services.get(name)
        return 0 if service is None else service.accepted

    def start(self) -> ReplicaServer:
        if self._tls is not None:
            port = self._server.add_secure_port(self._address, self._tls.credentials())
        else:
            port = self._server.add_insecure_port(self._address)
        if port == 0:
            raise OSError(f"cannot bind the replica server to {self._address}")
        self.port = port
        self._server.start()
        for name in ("", *(s.protocol.service for s in self.services.values())):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, end the current streams, stop serving (after ``grace`` seconds)."""
        self.health.enter_graceful_shutdown()
        for service in self.services.values():
            service.end_current(grpc.StatusCode.UNAVAILABLE, "the replica is shutting down")
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
