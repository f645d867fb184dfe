"""Errors of source readers: an upstream system an ingestion reads from (PostgreSQL today).

Every error is a :class:`SourceError`. ``retryable`` says whether the same
call may succeed later with nothing changed upstream (a server that is down, a
slot another reader still holds): the storage replica retries those with
back-off and reports the others as the ingestion's status, since they need
someone to change the upstream's configuration or the source's definition.
Each error carries what it names as attributes; messages say how to fix it.
"""

from __future__ import annotations

from typing import ClassVar

from .base import TidegateError

__all__ = [
    "PublicationMissing",
    "ReplicaIdentityNotFull",
    "ReplicationSlotInUse",
    "ReplicationSlotMissing",
    "SourceConfigurationInvalid",
    "SourceError",
    "SourceReaderMisused",
    "TableNotPublished",
    "UnsupportedUpstreamType",
    "UpstreamProtocolViolation",
    "UpstreamSchemaChanged",
    "UpstreamTableMissing",
    "UpstreamTruncated",
    "UpstreamUnreachable",
    "UpstreamValueUnrepresentable",
]


class SourceError(TidegateError):
    """Base class: a source reader cannot (now, or ever) read its upstream."""

    retryable: ClassVar[bool] = False


class UpstreamUnreachable(SourceError):
    """The upstream server could not be reached within the connect timeout, or the connection broke.

    ``where`` names the server (host, port, database; never a password).
    """

    retryable = True

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"upstream {where} is unreachable: {reason}")
        self.where = where
        self.reason = reason


class SourceConfigurationInvalid(SourceError):
    """The upstream, or the source's definition, is set up so that the source cannot be served.

    E.g. ``wal_level`` is not ``logical``, the role may not replicate, all
    replication slots are taken, or the slot's name belongs to another kind of slot.
    """

    def __init__(self, setting: str, value: str, fix: str) -> None:
        super().__init__(f"upstream setting {setting} is {value!r}: {fix}")
        self.setting = setting
        self.value = value
        self.fix = fix


class UpstreamTableMissing(SourceError):
    """The source's upstream table does not exist (or was dropped), or is not an ordinary table."""

    def __init__(self, table: str, detail: str = "does not exist") -> None:
        super().__init__(f"upstream table {table} {detail}")
        self.table = table
        self.detail = detail


class PublicationMissing(SourceError):
    """The source's publication does not exist (or was dropped)."""

    def __init__(self, publication: str) -> None:
        super().__init__(
            f"publication {publication!r} does not exist upstream: "
            f"CREATE PUBLICATION {publication} FOR TABLE <table>"
        )
        self.publication = publication


class TableNotPublished(SourceError):
    """The publication exists but does not publish the table, or not all of its changes.

    ``missing`` names what is left out: the table itself, or operations
    (``insert``, ``update``, ``delete``, ``truncate``) the publication does not publish.
    """

    def __init__(self, table: str, publication: str, missing: str) -> None:
        super().__init__(
            f"publication {publication!r} does not publish {missing} of {table}: "
            f"ALTER PUBLICATION {publication} ADD TABLE {table}, and publish every operation"
        )
        self.table = table
        self.publication = publication
        self.missing = missing


class ReplicaIdentityNotFull(SourceError):
    """The table's updates and deletes would not carry the whole old row.

    Retractions must be exact, so the reader needs ``REPLICA IDENTITY FULL``.
    """

    def __init__(self, table: str, identity: str) -> None:
        super().__init__(
            f"upstream table {table} has REPLICA IDENTITY {identity.upper()}; "
            f"the source needs the whole old row of every update and delete: "
            f"ALTER TABLE {table} REPLICA IDENTITY FULL"
        )
        self.table = table
        self.identity = identity


class UnsupportedUpstreamType(SourceError):
    """An upstream column whose type has no tidegate type. Raised before anything is read."""

    def __init__(self, table: str, column: str, type_name: str) -> None:
        super().__init__(
            f"column {column!r} of upstream table {table} has type {type_name}, which tidegate "
            "cannot ingest (supported: smallint, integer, bigint, real, double precision, text, "
            "varchar, char, boolean, date, timestamp without time zone)"
        )
        self.table = table
        self.column = column
        self.type_name = type_name


class UpstreamValueUnrepresentable(SourceError):
    """An upstream value outside its tidegate type's domain (an ``infinity`` or BC date, a year
    beyond 9999; a ``double``'s NaN and infinities are values)."""

    def __init__(self, table: str, column: str, type_name: str, text: str) -> None:
        super().__init__(
            f"column {column!r} of upstream table {table} holds the {type_name} {text!r}, "
            "which tidegate cannot represent"
        )
        self.table = table
        self.column = column
        self.type_name = type_name
        self.text = text


class UpstreamSchemaChanged(SourceError):
    """The upstream table's columns changed (added, dropped, renamed, retyped) after the source began.

    Raised before any update of the new shape is returned; ``changes`` describes
    each difference. The source must be dropped and created again.
    """

    def __init__(self, table: str, changes: tuple[str, ...]) -> None:
        super().__init__(f"upstream table {table} changed: {'; '.join(changes)}")
        self.table = table
        self.changes = changes


class UpstreamTruncated(SourceError):
    """The upstream table was truncated at ``offset``.

    A reader keeps no state, so it cannot retract what the table held; the
    source must be dropped and created again.
    """

    def __init__(self, table: str, offset: int) -> None:
        super().__init__(f"upstream table {table} was truncated at offset {offset}")
        self.table = table
        self.offset = offset


class ReplicationSlotMissing(SourceError):
    """The source's replication slot is gone although data read through it is durable.

    Re-creating the slot would lose every change between the durable offset
    and the new slot's snapshot, so the reader refuses: drop and re-create the source.
    """

    def __init__(self, slot: str, resume_offset: int) -> None:
        super().__init__(
            f"replication slot {slot!r} does not exist, but the source resumes at offset "
            f"{resume_offset}: changes since then are lost; drop and re-create the source"
        )
        self.slot = slot
        self.resume_offset = resume_offset


class ReplicationSlotInUse(SourceError):
    """Another connection is streaming from the source's slot (``detail`` says which).

    Usually a previous reader whose connection the server has not noticed is
    gone yet: retry.
    """

    retryable = True

    def __init__(self, slot: str, detail: str) -> None:
        super().__init__(f"replication slot {slot!r} is in use: {detail}")
        self.slot = slot
        self.detail = detail


class UpstreamProtocolViolation(SourceError):
    """The upstream sent something the reader's protocol decoder cannot accept."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed replication message: {detail}")
        self.detail = detail


class SourceReaderMisused(SourceError):
    """A reader called out of order (``poll`` before ``start``, after ``close``) or acked past its upper."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
