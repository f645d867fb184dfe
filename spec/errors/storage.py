"""Errors of the storage controller (docs/reference/storage-and-frontiers.md section 2.13).

The variant names follow the reference's ``StorageError``. Each error carries
the ids (and frontiers) it names as attributes, so callers can react without
parsing messages. A call that raises one of these has changed nothing.

Where the reference panics ("fatal"), the port raises a subclass of
:class:`StorageInvariantViolation` instead, also before mutating anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .base import TidegateError

__all__ = [
    "DependencyCycle",
    "ExportInstanceMissing",
    "IdentifierInvalid",
    "IdentifierMissing",
    "IngestionInstanceMissing",
    "InvalidAppendBounds",
    "InvalidUpper",
    "InvalidUppers",
    "InvalidUsage",
    "NegativeReadCapability",
    "ReadBeforeSince",
    "ReadBeyondUpper",
    "ReadCapabilityBeforeSince",
    "ReadOnlyController",
    "SinkIdReused",
    "SourceIdReused",
    "StorageError",
    "StorageInstanceExists",
    "StorageInstanceMissing",
    "StorageInvariantViolation",
    "StorageReplicaMissing",
    "UpdateBeyondUpper",
    "UpdateNotBeyondLower",
]


class StorageError(TidegateError):
    """Base class of the storage controller's errors."""


class SourceIdReused(StorageError):
    """A collection id used twice in one call, re-used with another description, or re-used after a drop.

    Also raised by ``prepare_export`` for an id that already names an export.
    """

    def __init__(self, id: Any) -> None:
        super().__init__(f"collection id is already in use: {id}")
        self.id = id


class SinkIdReused(StorageError):
    """An export id used twice in one ``create_exports`` call, or re-used with another description."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"export id is already in use: {id}")
        self.id = id


class IdentifierMissing(StorageError, LookupError):
    """No live collection (or export) has this id."""

    def __init__(self, id: Any) -> None:
        super().__init__(f"storage collection or export does not exist: {id}")
        self.id = id


class IdentifierInvalid(StorageError):
    """The id exists but names the wrong kind of object for this call (e.g. a read policy on an export)."""

    def __init__(self, id: Any, reason: str = "") -> None:
        super().__init__(f"invalid identifier {id}{': ' + reason if reason else ''}")
        self.id = id
        self.reason = reason


class ReadOnlyController(StorageError):
    """A write (a table append) asked of a controller in read-only mode: it writes nothing."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: the controller is read-only (it writes nothing to storage)")


class UpdateBeyondUpper(StorageError):
    """An appended update's time is not strictly before the batch's new upper."""

    def __init__(self, id: Any, time: Any = None, upper: Any = None) -> None:
        super().__init__(f"update for {id} at {time!r} is not before the new upper {upper!r}")
        self.id = id
        self.time = time
        self.upper = upper


class UpdateNotBeyondLower(StorageError):
    """An appended update's time is before the upper the write will start from (persist's lower)."""

    def __init__(self, id: Any, time: Any, lower: Any) -> None:
        super().__init__(f"update for {id} at {time!r} is before the current upper {lower!r}")
        self.id = id
        self.time = time
        self.lower = lower


class InvalidAppendBounds(StorageError):
    """An append's new upper is behind the upper the write starts from (persist's ``InvalidBounds``)."""

    def __init__(self, id: Any, lower: Any, upper: Any) -> None:
        super().__init__(
            f"append to {id}: new upper {upper!r} is behind the current upper {lower!r}"
        )
        self.id = id
        self.lower = lower
        self.upper = upper


class ReadBeforeSince(StorageError):
    """A snapshot ``as_of`` that is not at or beyond the collection's since."""

    def __init__(self, id: Any, as_of: Any = None, since: Any = None) -> None:
        super().__init__(f"read of {id} at {as_of!r} is before its since {since!r}")
        self.id = id
        self.as_of = as_of
        self.since = since


class ReadBeyondUpper(StorageError):
    """A snapshot ``as_of`` that is not yet complete (``upper <= as_of``); the answer would be partial."""

    def __init__(self, id: Any, as_of: Any, upper: Any) -> None:
        super().__init__(f"read of {id} at {as_of!r} is not before its upper {upper!r}")
        self.id = id
        self.as_of = as_of
        self.upper = upper


@dataclass(frozen=True, slots=True)
class InvalidUpper:
    """One failed compare-and-append: collection ``id`` was at ``current_upper``, not the expected upper."""

    id: Any
    current_upper: Any


class InvalidUppers(StorageError):
    """Compare-and-append upper mismatches: the appends to these collections did not happen."""

    def __init__(self, uppers: Iterable[InvalidUpper]) -> None:
        self.uppers: tuple[InvalidUpper, ...] = tuple(uppers)
        super().__init__(
            "expected upper mismatch: "
            + ", ".join(f"{u.id} is at {u.current_upper!r}" for u in self.uppers)
        )

    @property
    def ids(self) -> tuple[Any, ...]:
        """The collections whose append failed."""
        return tuple(u.id for u in self.uppers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InvalidUppers) and self.uppers == other.uppers

    def __hash__(self) -> int:
        return hash(self.uppers)


class InvalidUsage(StorageError):
    """API misuse, e.g. an export token whose ``from_id`` differs from the export's input."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IngestionInstanceMissing(StorageError, LookupError):
    """An ingestion names a storage instance that does not exist."""

    def __init__(self, id: Any, instance: str) -> None:
        super().__init__(f"ingestion {id} names a missing storage instance {instance}")
        self.id = id
        self.instance = instance


class ExportInstanceMissing(StorageError, LookupError):
    """An export names a storage instance that does not exist."""

    def __init__(self, id: Any, instance: str) -> None:
        super().__init__(f"export {id} names a missing storage instance {instance}")
        self.id = id
        self.instance = instance


class StorageInvariantViolation(StorageError):
    """A call the reference treats as fatal (a panic there); here it is rejected with no effect."""


class StorageInstanceExists(StorageInvariantViolation):
    """``create_instance`` with an id that is already a storage instance."""

    def __init__(self, instance: str) -> None:
        super().__init__(f"storage instance exists already: {instance}")
        self.instance = instance


class StorageInstanceMissing(StorageInvariantViolation, LookupError):
    """The named storage instance does not exist."""

    def __init__(self, instance: str) -> None:
        super().__init__(f"storage instance does not exist: {instance}")
        self.instance = instance


class StorageReplicaMissing(StorageInvariantViolation, LookupError):
    """The named replica is not connected to the storage instance."""

    def __init__(self, instance: str, replica: str) -> None:
        super().__init__(f"replica {replica} is not connected to storage instance {instance}")
        self.instance = instance
        self.replica = replica


class NegativeReadCapability(StorageInvariantViolation):
    """A read-capability change would drive a count below zero (a hold released that was never taken)."""

    def __init__(self, id: Any, time: Any, count: int) -> None:
        super().__init__(f"read capability of {id} at {time!r} would become {count}")
        self.id = id
        self.time = time
        self.count = count


class ReadCapabilityBeforeSince(StorageInvariantViolation):
    """A hold added at a time that is not at or beyond the collection's since (it may be compacted)."""

    def __init__(self, id: Any, time: Any, since: Any) -> None:
        super().__init__(f"cannot hold {id} at {time!r}: its since is {since!r}")
        self.id = id
        self.time = time
        self.since = since


class DependencyCycle(StorageError):
    """Collections whose dependencies would form a cycle."""

    def __init__(self, ids: Iterable[Any]) -> None:
        self.ids = tuple(ids)
        super().__init__("storage dependencies form a cycle: " + " -> ".join(map(str, self.ids)))
