"""Test helpers: replicas served in-process, for tests of code that drives replicas over gRPC.

:func:`in_process_replica` serves the compute protocol, :func:`in_process_storage_replica`
the storage protocol (a storage replica starts no executor).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.spec.executor import Executor

from .service import ReplicaService

__all__ = ["in_process_replica", "in_process_storage_replica"]


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


@contextmanager
def in_process_storage_replica(
    data_dir: str | Path,
    *,
    tick_s: float = 0.05,
    service: Mapping[str, Any] | None = None,
    **server: Any,
) -> Iterator[str]:
    """A storage replica over ``data_dir``'s shard store, served on loopback in this process; yields its address.

    ``tick_s`` is the storage service's tick; ``service`` more of its options
    (``source_factory``, ``sink_factory``, ``postgres_options``, ...);
    ``server`` goes to :class:`~tidegate.runtime.transport.grpc_server.ReplicaServer`
    (``token``, ``tls``, ...). Everything is stopped when the block ends.
    """
    from .storage.service import StorageService

    store = ShardStore.open(*default_urls(data_dir))
    storage = StorageService(store, tick_s=tick_s, **dict(service or {})).start()
    srv = ReplicaServer(storage=storage, **server).start()
    try:
        yield srv.address
    finally:
        srv.stop(0)
        storage.stop()
        store.close()
