"""The compute controller as a pure state machine (docs/reference/compute.md sections 9 and 10).

:class:`ComputeController` is the API; calls return :mod:`effects` for a
driver (the simulator or the runtime) to carry out. Storage is reached through
a :class:`StoragePort`; :class:`InMemoryStorage` stands in for it when the
compute controller runs alone. :mod:`as_of_selection` chooses dataflow as_ofs
at bootstrap.
"""

from .as_of_selection import AsOfSelection, select_as_ofs
from .config import (
    ManagedLocation,
    ReplicaConfig,
    ReplicaLocation,
    ReplicaLogging,
    UnmanagedLocation,
)
from .controller import CollectionFrontiers, ComputeController, ComputeReadHold
from .effects import (
    ConnectReplica,
    CopyToOut,
    DisconnectReplica,
    Effect,
    FrontierUpper,
    PeekNotification,
    PeekResultOut,
    ReplicaStatus,
    ReplicaStatusEvent,
    SendCommand,
    SubscribeBatchOut,
)
from .instance import ERROR_TARGET_REPLICA_FAILED
from .storage_port import InMemoryStorage, StoragePort
from .uuids import UuidFactory, counter_uuids
from .view import CollectionSnapshot, InstanceView, ReplicaCollectionSnapshot, ReplicaSnapshot

__all__ = [
    "ERROR_TARGET_REPLICA_FAILED",
    "AsOfSelection",
    "CollectionFrontiers",
    "CollectionSnapshot",
    "ComputeController",
    "ComputeReadHold",
    "ConnectReplica",
    "CopyToOut",
    "DisconnectReplica",
    "Effect",
    "FrontierUpper",
    "InMemoryStorage",
    "InstanceView",
    "ManagedLocation",
    "PeekNotification",
    "PeekResultOut",
    "ReplicaCollectionSnapshot",
    "ReplicaConfig",
    "ReplicaLocation",
    "ReplicaLogging",
    "ReplicaSnapshot",
    "ReplicaStatus",
    "ReplicaStatusEvent",
    "SendCommand",
    "StoragePort",
    "SubscribeBatchOut",
    "UnmanagedLocation",
    "UuidFactory",
    "counter_uuids",
    "select_as_ofs",
]
