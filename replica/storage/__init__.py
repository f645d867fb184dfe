"""The storage service of the replica process: the spec's ``StorageReplica`` driven with real IO.

* :mod:`.service` -- :class:`StorageService`, the storage protocol's ``ReplicaHandler``;
* :mod:`.sources` -- upstream readers (:class:`SourceReader`, PostgreSQL, load generators);
* :mod:`.shards` -- remap reads and compare-and-appends;
* :mod:`.sinks` -- sink targets (:class:`SinkWriter`, Iceberg);
* :mod:`.events` -- what the IO work reports to the service's loop;
* :mod:`.metrics` -- :class:`StorageMetrics` (``tidegate_storage_*``).

The names below load on first use (they pull in the shard store and gRPC).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .metrics import StorageMetrics
    from .service import StorageService
    from .sinks import SinkFactory, SinkWriter
    from .sources import SourceFactory, SourceReader

__all__ = [
    "SinkFactory",
    "SinkWriter",
    "SourceFactory",
    "SourceReader",
    "StorageMetrics",
    "StorageService",
]

_EXPORTS = {
    "SinkFactory": "tidegate.replica.storage.sinks",
    "SinkWriter": "tidegate.replica.storage.sinks",
    "SourceFactory": "tidegate.replica.storage.sources",
    "SourceReader": "tidegate.replica.storage.sources",
    "StorageMetrics": "tidegate.replica.storage.metrics",
    "StorageService": "tidegate.replica.storage.service",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
