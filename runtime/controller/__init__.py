"""The production controller driver: the spec controller's effects carried out over real IO.

* :mod:`.driver` -- :class:`ControllerDriver` (anyio; replicas, storage, client calls);
* :mod:`.links` -- one replica connection per epoch, with backoff (either protocol);
* :mod:`.storage_links` -- the links to storage replicas (the storage protocol);
* :mod:`.storage_status` -- :class:`StorageStatus`, what a source or sink is doing;
* :mod:`.storage_io` -- :class:`ShardStorageIO`, storage effects against the shard store;
* :mod:`.monotonic` -- :class:`MonotonicHandle`, appends to append-only collections;
* :mod:`.streams` -- subscriptions and status-event streams for clients;
* :mod:`.timestamps` -- the timestamp-oracle port and an in-memory oracle;
* :mod:`.schemas` -- plan schemas as shard (Arrow) schemas, shard names;
* :mod:`.errors` -- the driver's own typed errors.
"""

from .driver import ControllerDriver, ReplicaInfo
from .errors import (
    CopyToFailed,
    DependencyDropped,
    DriverNotRunning,
    PeekFailed,
    ReplicasNotConnected,
    ResultTooLarge,
    RuntimeControllerError,
    SourceCeased,
    SourceSchemaMismatch,
    SourceStalled,
    SourceUnreadable,
    SubscribeLagged,
)
from .links import Backoff, ReplicaLink
from .monotonic import MonotonicHandle
from .storage_io import ShardStorageIO
from .storage_links import StorageLinks
from .storage_status import StorageStatus
from .streams import EventStream, Subscription
from .timestamps import MemoryOracle, Oracle, default_oracle

__all__ = [
    "Backoff",
    "ControllerDriver",
    "CopyToFailed",
    "DependencyDropped",
    "DriverNotRunning",
    "EventStream",
    "MemoryOracle",
    "MonotonicHandle",
    "Oracle",
    "PeekFailed",
    "ReplicaInfo",
    "ReplicaLink",
    "ReplicasNotConnected",
    "ResultTooLarge",
    "RuntimeControllerError",
    "ShardStorageIO",
    "SourceCeased",
    "SourceSchemaMismatch",
    "SourceStalled",
    "SourceUnreadable",
    "StorageLinks",
    "StorageStatus",
    "SubscribeLagged",
    "Subscription",
    "default_oracle",
]
