"""Errors of the compute controller (docs/reference/compute.md section 9.14).

Each error carries the ids it names as attributes, so callers can react
without parsing messages. A call that raises one of these has changed nothing.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Iterable
from typing import Any

from .base import TidegateError

__all__ = [
    "CollectionExists",
    "CollectionMissing",
    "ComputeError",
    "EmptyAsOfForCopyTo",
    "EmptyAsOfForSubscribe",
    "HydrationCheckBadTarget",
    "InstanceExists",
    "InstanceMissing",
    "InvalidDataflow",
    "MissingAsOf",
    "PeekMissing",
    "ReadHoldMissing",
    "ReplicaExists",
    "ReplicaMissing",
    "SinceViolation",
    "TargetedIndexExport",
    "WriteOnlyCollection",
]


class ComputeError(TidegateError):
    """Base class of the compute controller's errors."""


class InstanceMissing(ComputeError, LookupError):
    """The named compute instance does not exist."""

    def __init__(self, instance: str) -> None:
        super().__init__(f"instance does not exist: {instance}")
        self.instance = instance


class InstanceExists(ComputeError):
    """``create_instance`` with an id that is already in use."""

    def __init__(self, instance: str) -> None:
        super().__init__(f"instance exists already: {instance}")
        self.instance = instance


class ReplicaExists(ComputeError):
    """``add_replica`` with a replica id already in use on the instance."""

    def __init__(self, instance: str, replica: str) -> None:
        super().__init__(f"replica exists already: {replica} on instance {instance}")
        self.instance = instance
        self.replica = replica


class ReplicaMissing(ComputeError, LookupError):
    """The named replica is not part of the instance."""

    def __init__(self, instance: str, replica: str) -> None:
        super().__init__(f"replica does not exist: {replica} on instance {instance}")
        self.instance = instance
        self.replica = replica


class CollectionMissing(ComputeError, LookupError):
    """The named collection (compute collection or storage input) does not exist, or was dropped."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"collection does not exist: {id}")
        self.id = id


class CollectionExists(ComputeError):
    """A dataflow exports an id that is already a collection of the instance (or exports it twice)."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"collection exists already: {id}")
        self.id = id


class MissingAsOf(ComputeError):
    """``create_dataflow`` with a dataflow whose ``as_of`` is not set."""

    def __init__(self, debug_name: str = "") -> None:
        super().__init__(f"dataflow has no as_of: {debug_name!r}")
        self.debug_name = debug_name


class EmptyAsOfForSubscribe(ComputeError):
    """A dataflow exporting a subscribe has ``as_of = []`` (it would never produce anything)."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"subscribe dataflow has an empty as_of: {id}")
        self.id = id


class EmptyAsOfForCopyTo(ComputeError):
    """A dataflow exporting a copy-to has ``as_of = []`` (there would be no time to copy)."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"copy-to dataflow has an empty as_of: {id}")
        self.id = id


class SinceViolation(ComputeError):
    """A read (dataflow as_of or peek timestamp) is not beyond the since of collection ``id``."""

    def __init__(self, id: Any, since: Any, requested: Any) -> None:
        super().__init__(f"{requested!r} is not beyond the since {since!r} of collection {id}")
        self.id = id
        self.since = since
        self.requested = requested


class WriteOnlyCollection(ComputeError):
    """A read policy or peek on a sink, which has no read frontier of its own."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"collection is write-only: {id}")
        self.id = id


class TargetedIndexExport(ComputeError):
    """A replica-targeted dataflow exports an index (indexes must exist on every replica)."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"replica-targeted dataflows may not export indexes: {id}")
        self.id = id


class InvalidDataflow(ComputeError, ValueError):
    """A dataflow description breaks a structural rule (e.g. a sink reading an unknown object)."""


class PeekMissing(ComputeError, LookupError):
    """``cancel_peek`` names a uuid that is not pending (never issued, or already answered)."""

    def __init__(self, uuid: _uuid.UUID) -> None:
        super().__init__(f"no pending peek {uuid}")
        self.uuid = uuid


class ReadHoldMissing(ComputeError, LookupError):
    """A read hold that this controller never issued, or that was already released."""

    def __init__(self, hold: Any) -> None:
        super().__init__(f"unknown or released read hold: {hold!r}")
        self.hold = hold


class HydrationCheckBadTarget(ComputeError):
    """None of the replicas named in a hydration check exist in the instance."""

    def __init__(self, replicas: Iterable[str]) -> None:
        self.replicas = tuple(replicas)
        super().__init__(f"No replicas found in cluster for target list: {list(self.replicas)}")
