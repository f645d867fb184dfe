"""Fixtures for the controller driver tests: in-process replica servers over one shard store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tidegate.replica.service import ReplicaService
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.spec.executor.python import PythonExecutor


class Cluster:
    """A shard store (in memory, unique to the test) and named replicas served over gRPC.

    Each replica is a :class:`ReplicaService` (python executor) behind a
    :class:`ReplicaServer` on a free loopback port; :meth:`restart` replaces
    both (a fresh process: no state) on a new port, so the controller must
    resolve the address again.
    """

    def __init__(self) -> None:
        name = uuid.uuid4().hex
        self.urls = (f"mem://{name}", f"mem://{name}")
        self.store = ShardStore.open(*self.urls)
        self.replicas: dict[str, tuple[ReplicaService, ReplicaServer]] = {}
        self.moves = 0

    def start(self, name: str) -> str:
        store = ShardStore.open(*self.urls)
        service = ReplicaService(PythonExecutor(), store, tick_s=0.01).start()
        server = ReplicaServer(service).start()
        self.replicas[name] = (service, server)
        return server.address

    def stop(self, name: str) -> None:
        service, server = self.replicas.pop(name)
        server.stop(0)
        service.stop()

    def restart(self, name: str) -> str:
        self.stop(name)
        self.moves += 1
        return self.start(name)

    def address_of(self, name: str) -> str:
        if name not in self.replicas:
            raise LookupError(f"replica {name} is down")
        return self.replicas[name][1].address

    def close(self) -> None:
        for name in list(self.replicas):
            self.stop(name)
        self.store.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.close()
