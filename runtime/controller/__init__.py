"""The production controller driver: the spec controller's effects carried out over real IO.

* :mod:`.driver` -- :class:`ControllerDriver` (anyio; replicas, storage, client calls);
* :mod:`.links` -- one replica connection per epoch, with backoff;
* :mod:`.storage_io` -- :class:`ShardStorageIO`, storage effects against the shard store;
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
    SubscribeLagged,
)
from .links import Backoff, ReplicaLink
from .storage_io import ShardStorageIO
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
    "Oracle",
    "PeekFailed",
    "ReplicaInfo",
    "ReplicaLink",
    "ReplicasNotConnected",
    "ResultTooLarge",
    "RuntimeControllerError",
    "ShardStorageIO",
    "SubscribeLagged",
    "Subscription",
    "default_oracle",
]
