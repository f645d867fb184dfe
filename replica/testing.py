"""Test helpers: a replica served in-process, for tests of code that drives replicas over gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.spec.executor import Executor

from .service import ReplicaService

__all__ = ["in_process_replica"]


@contextmanager
def in_process_replica(
    data_dir: str | Path,
    executor: Executor | None = None,
    *,
    tick_s: float = 0.01,
    **server: Any,
) -> Iterator[str]:
    """A replica over ``data_dir``'s shard store, served on loopback in this process; yields its address.

    ``executor`` defaults to the ``PythonExecutor``; ``server`` goes to
    :class:`~tidegate.runtime.transport.grpc_server.ReplicaServer` (``token``,
    ``tls``, ...). Everything is stopped when the block ends.
    """
    if executor is None:
        from tidegate.spec.executor.python import PythonExecutor

        executor = PythonExecutor()
    store = ShardStore.open(*default_urls(data_dir))
    service = ReplicaService(executor, store, tick_s=tick_s).start()
    srv = ReplicaServer(service, **server).start()
    try:
        yield srv.address
    finally:
        srv.stop(0)
        service.stop()
        store.close()
