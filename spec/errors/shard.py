"""Errors of the shard store (persist): appends, reads, readers, compaction, backends.

Every error names the shard it concerns (``.shard``) and, where one is involved,
the frontier or blob key that broke the rule, so a caller can react without
parsing messages.
"""

from __future__ import annotations

import errno as _errno
from typing import Any

from .base import TidegateError

__all__ = [
    "AppendGap",
    "BlobCorrupt",
    "BlobMissing",
    "CompactionConflict",
    "ConsensusCorrupt",
    "ConsensusError",
    "ConsensusStoreCorrupt",
    "FinalizationNotReady",
    "FinalizationRefused",
    "Indeterminate",
    "InvalidShardBounds",
    "InvalidUpdates",
    "ListenCompactedPast",
    "OpaqueMismatch",
    "RequestsApplied",
    "SchemaMismatch",
    "ShardError",
    "ShardFinalized",
    "SinceRegression",
    "SnapshotBeforeSince",
    "SnapshotNotReady",
    "StorageUnavailable",
    "UnknownReader",
    "UnknownShard",
    "UnsupportedStateVersion",
    "UpperMismatch",
]


class ShardError(TidegateError):
    """Base class of shard-store errors; ``shard`` is the shard's id (or ``""``)."""

    def __init__(self, shard: str, message: str) -> None:
        super().__init__(f"shard {shard!r}: {message}" if shard else message)
        self.shard = shard


class UpperMismatch(ShardError):
    """compare_and_append's expected upper is not the shard's upper; ``actual_upper`` is."""

    def __init__(self, shard: str, expected: Any, actual_upper: Any) -> None:
        super().__init__(shard, f"expected upper {expected!r} but the upper is {actual_upper!r}")
        self.expected = expected
        self.actual_upper = actual_upper


class RequestsApplied(ShardError):
    """A compare-and-append carrying client request ids the shard has recorded already: those
    appends were applied before (``applied`` maps each id to the time it was written at), so
    nothing is appended again. The shard is unchanged."""

    def __init__(self, shard: str, applied: dict[str, int]) -> None:
        shown = ", ".join(f"{r!r} at {t}" for r, t in sorted(applied.items())[:4])
        super().__init__(shard, f"requests already applied: {shown}")
        self.applied = applied


class AppendGap(ShardError):
    """A truncating append whose ``lower`` is beyond the shard's upper (``actual_upper``).

    Appending would leave the times in ``[actual_upper, lower)`` unwritten, so
    nothing is appended; the writer must first write what comes before ``lower``.
    """

    def __init__(self, shard: str, lower: Any, actual_upper: Any) -> None:
        super().__init__(
            shard, f"an append from {lower!r} would leave a gap after the upper {actual_upper!r}"
        )
        self.lower = lower
        self.actual_upper = actual_upper


class InvalidShardBounds(ShardError, ValueError):
    """An append whose new upper is behind its expected upper (or lower), or whose interval is
    empty (``expected_upper == new_upper``) although it carries updates."""


class InvalidUpdates(ShardError, ValueError):
    """Updates that cannot be appended: a time outside ``[expected_upper, new_upper)``, a bad diff."""


class SchemaMismatch(ShardError, ValueError):
    """Rows whose Arrow schema differs from the shard's registered schema."""


class SinceRegression(ShardError, ValueError):
    """A reader asked to move its since backwards (sinces only move forward)."""


class SnapshotBeforeSince(ShardError):
    """A read at a time the shard has compacted away: ``as_of`` is not beyond ``since``."""

    def __init__(self, shard: str, as_of: Any, since: Any) -> None:
        super().__init__(shard, f"as_of {as_of!r} is not beyond the since {since!r}")
        self.as_of = as_of
        self.since = since


class SnapshotNotReady(ShardError):
    """A read at a time that is not complete yet: ``as_of`` is not before ``upper``."""

    def __init__(self, shard: str, as_of: Any, upper: Any) -> None:
        super().__init__(shard, f"as_of {as_of!r} is not before the upper {upper!r}")
        self.as_of = as_of
        self.upper = upper


class ListenCompactedPast(ShardError):
    """A listen found a batch compacted beyond its frontier (its read hold was not kept)."""


class UnknownReader(ShardError, KeyError):
    """A reader id that is not registered (never was, released, or its lease expired)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OpaqueMismatch(ShardError):
    """A critical reader's compare-and-downgrade with a stale opaque; ``actual`` is the stored one."""

    def __init__(self, shard: str, expected: int, actual: int) -> None:
        super().__init__(shard, f"expected opaque {expected} but it is {actual}")
        self.expected = expected
        self.actual = actual


class ShardFinalized(ShardError):
    """The shard was finalized (dropped): no reads, writes or readers any more."""


class FinalizationNotReady(ShardError):
    """Finalization requires ``since = upper = []`` (or ``force``)."""


class FinalizationRefused(ShardError):
    """A shard the durable catalog has not recorded as dropped is never finalized (its data would
    be deleted): the catalog still has its object, or never recorded it (a newer or a foreign
    catalog's shard). ``reason`` says which; the shard is left as it is."""

    def __init__(self, shard: str, reason: str) -> None:
        super().__init__(shard, f"not finalized: {reason}")
        self.reason = reason


class CompactionConflict(ShardError):
    """A compaction result whose input batches are no longer in the shard (someone else won)."""


class UnknownShard(ShardError, KeyError):
    """A shard id that has no state in the consensus store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsupportedStateVersion(ShardError):
    """A consensus record, intact (its checksum verifies), in a format this build cannot read:
    a newer format version, or an unknown one."""


class ConsensusCorrupt(ShardError):
    """A consensus record of the shard that is damaged: its checksum does not match its bytes, or
    it is not a state record at all (a torn or overwritten row). Nothing was decoded from it.

    ``seqno`` is the record's sequence number; ``expected`` and ``actual`` are the recorded
    and the computed digest (hex, ``None`` when the record is too damaged to carry one).
    """

    def __init__(
        self,
        shard: str,
        seqno: int,
        reason: str,
        *,
        expected: str | None = None,
        actual: str | None = None,
    ) -> None:
        super().__init__(shard, f"consensus record at seqno {seqno} is corrupt: {reason}")
        self.seqno = seqno
        self.expected = expected
        self.actual = actual


class BlobMissing(ShardError):
    """A batch the shard's state refers to has no blob under ``key``."""

    def __init__(self, shard: str, key: str) -> None:
        super().__init__(shard, f"blob {key!r} is missing")
        self.key = key


class BlobCorrupt(ShardError):
    """A batch blob under ``key`` is damaged: its bytes do not match the digest the shard's state
    recorded when it was written, or (for a batch written before digests) it is not a readable
    Parquet batch of the shard's schema.

    ``expected`` and ``actual`` are the recorded and the computed digest (hex), or ``None``
    when the blob was refused for another reason.
    """

    def __init__(
        self,
        shard: str,
        key: str,
        reason: str,
        *,
        expected: str | None = None,
        actual: str | None = None,
    ) -> None:
        super().__init__(shard, f"blob {key!r} is corrupt: {reason}")
        self.key = key
        self.expected = expected
        self.actual = actual


_FILE_SQLSTATES = {
    _errno.ENOSPC: "53100",  # disk_full, as PostgreSQL answers a write the disk has no room for
    _errno.EDQUOT: "53100",
    _errno.EFBIG: "54000",  # program_limit_exceeded: a file past its size limit
    _errno.EROFS: "42501",  # insufficient_privilege, as PostgreSQL's errcode_for_file_access
    _errno.EACCES: "42501",
    _errno.EPERM: "42501",
}
"""PostgreSQL's SQLSTATE for an OS error that refuses a write outright."""


class StorageUnavailable(ShardError):
    """The Blob or Consensus store refused a write for good reason of its own (a full disk, a
    file too large, a read-only or inaccessible data directory), and nothing was applied.

    ``store`` is ``"blob"`` or ``"consensus"``; ``key`` the blob key or consensus key;
    ``operation`` what was attempted; ``errno`` the OS error number when one is known. Unlike
    :class:`Indeterminate`, the outcome is known: the call did not take effect (the state is
    unchanged), and retrying helps only once an operator made room or access.

    :attr:`sqlstate` is the code a PostgreSQL client is answered with: the store's own when it
    said one (``sqlstate=``), else PostgreSQL's for the OS error (``53100 disk_full`` for a
    full disk or quota, ``42501`` for a read-only or inaccessible directory, ``54000`` for a
    file too large), else ``58030 io_error``: never ``XX000``, since the refusal is expected
    and typed, and its outcome (nothing applied) is known.
    """

    def __init__(
        self,
        shard: str,
        store: str,
        key: str,
        operation: str,
        reason: str,
        *,
        errno: int | None = None,
        sqlstate: str | None = None,
    ) -> None:
        super().__init__(shard, f"{store} {operation} of {key!r} failed: {reason}")
        self.store = store
        self.key = key
        self.operation = operation
        self.errno = errno
        self.sqlstate = sqlstate or _FILE_SQLSTATES.get(errno or 0, "58030")


class ConsensusStoreCorrupt(ShardError):
    """The Consensus store itself is damaged, not one record of it: a SQLite file that is not a
    database, or whose pages are corrupt. ``location`` names it; ``reason`` is what the
    backend said. Nothing can be read from it: restore it from a backup."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(
            "",
            f"the consensus store {location} is damaged ({reason}): nothing can be read from "
            "it; restore it from a backup",
        )
        self.location = location
        self.reason = reason


class ConsensusError(ShardError, ValueError):
    """Misuse of a consensus store: a sequence number out of range or not increasing."""


class Indeterminate(ShardError):
    """A storage call whose outcome is unknown (it may or may not have taken effect)."""
