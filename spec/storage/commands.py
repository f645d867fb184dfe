"""The storage controller <-> storage instance protocol (reference section 2.12).

Commands go to every replica of a storage instance; responses come back from
them. Only ingestions and sinks run on instances: tables and other
controller-managed collections have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..frontier import Antichain
from ..ids import GlobalId
from .descriptions import CollectionDescription, ExportDescription, StorageParameters

__all__ = [
    "DroppedId",
    "RunIngestion",
    "RunSink",
    "StorageAllowCompaction",
    "StorageCommand",
    "StorageFrontierUpper",
    "StorageInitializationComplete",
    "StorageResponse",
    "StorageUpdateConfiguration",
]


@dataclass(frozen=True, slots=True)
class StorageInitializationComplete:
    """The controller has sent everything it knew at startup."""


@dataclass(frozen=True, slots=True)
class StorageUpdateConfiguration:
    """New (merged) storage parameters."""

    params: StorageParameters


@dataclass(frozen=True, slots=True)
class RunIngestion:
    """Run the ingestion of collection ``id``, resuming from ``resume_upper``."""

    id: GlobalId
    description: CollectionDescription
    resume_upper: Antichain


@dataclass(frozen=True, slots=True)
class RunSink:
    """Run sink ``id`` from ``as_of`` (``strict``: the as_of was advanced to the held since)."""

    id: GlobalId
    description: ExportDescription
    as_of: Antichain
    strict: bool


@dataclass(frozen=True, slots=True)
class StorageAllowCompaction:
    """The instance may compact ``id`` up to ``frontier``; ``[]`` tears the object down."""

    id: GlobalId
    frontier: Antichain


StorageCommand: TypeAlias = (
    StorageInitializationComplete
    | StorageUpdateConfiguration
    | RunIngestion
    | RunSink
    | StorageAllowCompaction
)


@dataclass(frozen=True, slots=True)
class StorageFrontierUpper:
    """The write frontier of ingestion or sink ``id`` advanced to ``upper``."""

    id: GlobalId
    upper: Antichain


@dataclass(frozen=True, slots=True)
class DroppedId:
    """The instance has torn down ``id`` (after ``StorageAllowCompaction(id, [])``)."""

    id: GlobalId


StorageResponse: TypeAlias = StorageFrontierUpper | DroppedId
