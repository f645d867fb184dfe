"""Scripted replicas for transport tests and benchmarks (no dataflows, fixed answers).

For each compute command an :class:`EchoReplica` session answers at once:

* ``Schedule(id)`` -> ``Status(id, "conn=<n> seq=<k>")``: ``n`` numbers the
  accepted streams (a reconnect is a fresh one), ``k`` the commands on it;
* ``Peek`` -> ``PeekResponse(uuid, PeekRows(((id number, timestamp), 1)))``;
* ``CancelPeek`` -> ``PeekResponse(uuid, PeekCanceled())``;
* ``AllowCompaction(id, f)`` -> ``Frontiers(id, write=f, input=f, output=f)``;
* anything else: nothing.

For each storage command a :class:`StorageEchoReplica` session answers at once:

* ``RunIngestion(id, ...)`` or ``RunSink(id, ...)`` ->
  ``StatusUpdate(id, RUNNING, hint="conn=<n> seq=<k>")`` (numbered as above);
* ``StorageAllowCompaction(id, [])`` -> ``DroppedId(id)``;
* ``StorageAllowCompaction(id, f)`` -> ``StorageFrontierUpper(id, f)``;
* anything else: nothing.

``python -m tidegate.runtime.transport.echo [--token T] [--version V]
[--tls CERT KEY [CLIENT_CA]]`` serves both on one free loopback port, prints
``ready <port>`` and serves until its stdin closes.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Mapping

from tidegate.spec.protocol.commands import (
    AllowCompaction,
    CancelPeek,
    ComputeCommand,
    Peek,
    Schedule,
)
from tidegate.spec.protocol.responses import (
    ComputeResponse,
    Frontiers,
    PeekCanceled,
    PeekResponse,
    PeekRows,
    Status,
)
from tidegate.spec.storage.commands import (
    DroppedId,
    RunIngestion,
    RunSink,
    SourceStatus,
    StatusUpdate,
    StorageAllowCompaction,
    StorageCommand,
    StorageFrontierUpper,
    StorageResponse,
)

from .handler import ReplicaConnection, ResponseSink

__all__ = ["EchoReplica", "EchoSession", "StorageEchoReplica", "StorageEchoSession", "main"]


class EchoSession:
    """One stream's scripted answers; records the commands it saw."""

    def __init__(self, number: int, responses: ResponseSink[ComputeResponse]) -> None:
        self.number = number
        self.responses = responses
        self.commands: list[ComputeCommand] = []
        self.closed = False

    def on_command(self, command: ComputeCommand) -> None:
        self.commands.append(command)
        match command:
            case Schedule(id=gid):
                self.responses.send(Status(gid, f"conn={self.number} seq={len(self.commands)}"))
            case Peek(peek=desc):
                row = (desc.id.value, desc.timestamp)
                self.responses.send(PeekResponse(desc.uuid, PeekRows(((row, 1),))))
            case CancelPeek(uuid=uuid):
                self.responses.send(PeekResponse(uuid, PeekCanceled()))
            case AllowCompaction(id=gid, frontier=f):
                self.responses.send(Frontiers(gid, write=f, input=f, output=f))
            case _:
                pass

    def on_close(self) -> None:
        self.closed = True


class EchoReplica:
    """A :class:`~.handler.ReplicaHandler` creating :class:`EchoSession` s, numbered from 1."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions: list[EchoSession] = []
        self.metadata: list[Mapping[str, str]] = []

    def on_connect(
        self, metadata: Mapping[str, str], responses: ResponseSink[ComputeResponse]
    ) -> ReplicaConnection[ComputeCommand]:
        with self._lock:
            session = EchoSession(len(self.sessions) + 1, responses)
            self.sessions.append(session)
            self.metadata.append(dict(metadata))
        return session


class StorageEchoSession:
    """One storage stream's scripted answers; records the commands it saw."""

    def __init__(self, number: int, responses: ResponseSink[StorageResponse]) -> None:
        self.number = number
        self.responses = responses
        self.commands: list[StorageCommand] = []
        self.closed = False

    def on_command(self, command: StorageCommand) -> None:
        self.commands.append(command)
        match command:
            case RunIngestion(id=gid) | RunSink(id=gid):
                note = f"conn={self.number} seq={len(self.commands)}"
                self.responses.send(StatusUpdate(gid, SourceStatus.RUNNING, hint=note))
            case StorageAllowCompaction(id=gid, frontier=f):
                if f.is_empty():
                    self.responses.send(DroppedId(gid))
                else:
                    self.responses.send(StorageFrontierUpper(gid, f))
            case _:
                pass

    def on_close(self) -> None:
        self.closed = True


class StorageEchoReplica:
    """A storage :class:`~.handler.ReplicaHandler` creating :class:`StorageEchoSession` s, numbered from 1."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions: list[StorageEchoSession] = []
        self.metadata: list[Mapping[str, str]] = []

    def on_connect(
        self, metadata: Mapping[str, str], responses: ResponseSink[StorageResponse]
    ) -> ReplicaConnection[StorageCommand]:
        with self._lock:
            session = StorageEchoSession(len(self.sessions) + 1, responses)
            self.sessions.append(session)
            self.metadata.append(dict(metadata))
        return session


def main(argv: list[str] | None = None) -> None:
    """Serve an :class:`EchoReplica` and a :class:`StorageEchoReplica` until stdin closes
    (for tests in another process)."""
    from .grpc_server import ReplicaServer, ServerTls
    from .version import OWN_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token")
    parser.add_argument("--version", default=None, help="claim this version (default: each own)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls", nargs="+", metavar="PEM")
    args = parser.parse_args(argv)
    tls = ServerTls.from_files(*args.tls) if args.tls else None
    server = ReplicaServer(
        f"127.0.0.1:{args.port}",
        compute=EchoReplica(),
        storage=StorageEchoReplica(),
        version=args.version if args.version is not None else OWN_VERSION,
        token=args.token,
        tls=tls,
    ).start()
    print(f"ready {server.port}", flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop(0)


if __name__ == "__main__":
    main()
