"""Errors of the sink writers of a storage replica (``tidegate.replica.storage.sinks``).

A sink writer commits a collection's updates to an external system exactly
once: every commit names the frontier range ``[lower, upper)`` it covers, and
the external system keeps the upper it has covered. The errors say which rule
a call broke and carry the frontiers involved, so a caller can react (resume,
give up, report) without parsing messages. A call that raises one of these has
committed nothing, except :class:`SinkOutcomeUnknown`, which says exactly that
it cannot tell.
"""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "SinkConflict",
    "SinkDescriptionInvalid",
    "SinkError",
    "SinkFrontierInvalid",
    "SinkOutcomeUnknown",
    "SinkTableIncompatible",
    "SinkUnreachable",
    "SinkUpdateInvalid",
]


class SinkError(TidegateError):
    """Base class of the sink writers' errors."""


class SinkDescriptionInvalid(SinkError, ValueError):
    """The sink's connection or schema cannot be written (e.g. a table name without namespace).

    Raised when the writer is built, before it touches the external system.
    """


class SinkUnreachable(SinkError):
    """The external system (catalog, warehouse) could not be reached or failed; nothing was committed."""


class SinkOutcomeUnknown(SinkUnreachable):
    """The commit failed in a way that leaves unknown whether it landed.

    The writer's ``open()`` tells: the covered upper is the commit's ``upper``
    if it landed, its ``lower`` if not.
    """


class SinkTableIncompatible(SinkError):
    """The existing table cannot be this sink's: another schema, or a history the writer cannot read.

    ``table`` is the table's identifier.
    """

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(f"table {table!r} cannot hold this sink: {reason}")
        self.table = table
        self.reason = reason


class SinkConflict(SinkError):
    """The table's covered upper is not the commit's ``lower``: another writer committed.

    ``expected`` is the commit's ``lower``; ``actual`` the upper the table covers
    for this sink now (``None``: nothing, or the table is gone). A restarted
    sink resumes from its writer's ``open()``; a zombie's commit ends here.
    """

    def __init__(self, table: str, expected: int, actual: int | None) -> None:
        super().__init__(
            f"table {table!r}: expected the covered upper to be {expected}, but it is {actual}"
        )
        self.table = table
        self.expected = expected
        self.actual = actual


class SinkFrontierInvalid(SinkError, ValueError):
    """A commit's ``lower``/``upper`` are not timestamps with ``lower < upper``."""

    def __init__(self, lower: object, upper: object, reason: str) -> None:
        super().__init__(f"invalid commit frontiers [{lower!r}, {upper!r}): {reason}")
        self.lower = lower
        self.upper = upper


class SinkUpdateInvalid(SinkError, ValueError):
    """An update of a commit is malformed: not a row of the schema, a time outside ``[lower, upper)``, a bad diff.

    ``index`` is the update's position in the commit.
    """

    def __init__(self, index: int, update: object, reason: str) -> None:
        super().__init__(f"update #{index} {update!r}: {reason}")
        self.index = index
        self.update = update
        self.reason = reason
