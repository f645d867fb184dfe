"""Consensus in SQLite: WAL journal, fsync'd commits, compare-and-set in one transaction."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tidegate.spec.errors import ConsensusError, ConsensusStoreCorrupt, StorageUnavailable
from tidegate.spec.shard import VersionedData, check_cas_arguments

from ..files import PRIVATE_FILE, mkdir_private
from ._file_blob import refused_by_os

__all__ = ["SqliteConsensus"]

_REFUSALS = (
    "SQLITE_FULL",
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_PERM",
    "SQLITE_IOERR_WRITE",
)
"""SQLite errors (by name prefix) that refuse a statement outright: the disk or the file's size
limit is full, the file or its directory is read-only or cannot be opened. SQLite rolls back a
transaction that fails so, so nothing was applied. Other IO errors (an fsync that failed, say)
leave the outcome unknown and pass through."""

_REFUSAL_SQLSTATES = (
    ("SQLITE_FULL", "53100"),  # disk_full
    ("SQLITE_READONLY", "42501"),  # insufficient_privilege
    ("SQLITE_PERM", "42501"),
    ("SQLITE_CANTOPEN", "58030"),  # io_error
    ("SQLITE_IOERR_WRITE", "58030"),
)
"""PostgreSQL's SQLSTATE for each refusal of :data:`_REFUSALS`."""

_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
"""SQLite errors (by name prefix) that say the database file itself is damaged."""


@contextlib.contextmanager
def _refusals(
    key: str, operation: str, shard: str | None = None, location: str = "(sqlite)"
) -> Iterator[None]:
    """Raise :class:`StorageUnavailable` for an SQLite refusal inside the block (about consensus
    key ``key``, which is the shard's id unless ``shard`` says otherwise), and
    :class:`ConsensusStoreCorrupt` if the database file at ``location`` is damaged."""
    shard = key if shard is None else shard
    try:
        yield
    except sqlite3.Error as e:
        name = getattr(e, "sqlite_errorname", "") or ""
        if name.startswith(_DAMAGED):
            raise ConsensusStoreCorrupt(location, f"{e} ({name})") from e
        if not name.startswith(_REFUSALS):
            raise
        state = next((c for n, c in _REFUSAL_SQLSTATES if name.startswith(n)), None)
        raise StorageUnavailable(
            shard, "consensus", key, operation, f"{e} ({name})", sqlstate=state
        ) from e
    except OSError as e:
        if not refused_by_os(e):
            raise
        raise StorageUnavailable(shard, "consensus", key, operation, str(e), errno=e.errno) from e


_SCHEMA = """
CREATE TABLE IF NOT EXISTS consensus (
    shard TEXT NOT NULL,
    sequence_number INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (shard, sequence_number)
)
"""


_CAS = (
    "INSERT INTO consensus (shard, sequence_number, data) SELECT ?, ?, ? "
    "WHERE (SELECT max(sequence_number) FROM consensus WHERE shard = ?) IS ?"
)
"""Compare-and-set: insert the new version if the key's head seqno is the expected one
(``IS`` compares NULL, a key with no data, too)."""


class SqliteConsensus:
    """A consensus table ``(shard, sequence_number, data)`` in one SQLite file.

    Safe for several processes (SQLite file locks) and threads (a writing and a
    reading connection, each guarded by a lock: reads do not wait behind a
    commit's fsync, as WAL lets a reader see the last commit while a writer
    works). ``compare_and_set`` runs ``BEGIN IMMEDIATE`` (taking the
    write lock), checks the head and inserts, so racing writers serialize.
    ``synchronous="FULL"`` (the default) fsyncs every commit, so its rate is
    bounded by the disk's fsync rate; ``"NORMAL"`` survives process crashes
    but not power loss. A statement SQLite refuses for lack of room or of
    write access (a full disk, a read-only directory) raises
    :class:`StorageUnavailable`, with nothing applied.
    """

    local = True
    """Calls are IO on this machine's disk, or memory: a small write is brief (see
    :attr:`~tidegate.runtime.storage.ShardStore.local`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_s: float = 60.0,
        synchronous: str = "FULL",
    ) -> None:
        self.path = Path(path)
        self._where = str(self.path)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL or EXTRA, got {synchronous!r}")
        with _refusals(str(self.path), "open", shard="", location=str(self.path)):
            mkdir_private(self.path.parent)
            # Created 0600 here, before SQLite opens it: SQLite gives its journal and WAL
            # files the database file's mode, so they are private too.
            if not self.path.exists():
                with contextlib.suppress(FileExistsError):  # made meanwhile by another process
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            try:
                self._set_up(synchronous, busy_timeout_s)
                self._reader = sqlite3.connect(
                    self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
                )
            except BaseException:
                self._conn.close()
                raise

    def _set_up(self, synchronous: str, busy_timeout_s: float) -> None:
        """WAL mode, sync level and the table, retried while another process does the same.

        Several processes opening a new file at once (a controller and its
        replicas starting together) race to switch it to WAL; SQLite answers
        the losers "database is locked" at once, without waiting out the busy
        timeout, so the setup is retried (with backoff) for up to that timeout.
        """
        deadline = time.monotonic() + busy_timeout_s
        pause = 0.005
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                self._conn.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                if time.monotonic() + pause > deadline:
                    raise  # locked for the whole busy timeout, as any other statement would be
                time.sleep(pause)
                pause = min(pause * 2, 0.2)

    def close(self) -> None:
        """Close the database connection (idempotent); the store is unusable afterwards."""
        with self._lock, self._read_lock:
            self._conn.close()
            self._reader.close()
            self.closed = True

    closed = False
    """Whether :meth:`close` was called."""

    def _head(self, key: str, conn: sqlite3.Connection | None = None) -> VersionedData | None:
        row = (
            (conn or self._conn)
            .execute(
                "SELECT sequence_number, data FROM consensus WHERE shard = ? "
                "ORDER BY sequence_number DESC LIMIT 1",
                (key,),
            )
            .fetchone()
        )
        return None if row is None else VersionedData(row[0], bytes(row[1]))

    def head(self, key: str) -> VersionedData | None:
        with self._read_lock, _refusals(key, "read", location=self._where):
            return self._head(key, self._reader)

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_cas_arguments(key, expected, new)
        with self._lock, _refusals(key, "compare-and-set", location=self._where):
            # One statement, its own transaction: it takes the write lock before it reads
            # the head, so the check and the insert are atomic (as BEGIN IMMEDIATE would
            # make them), and the GIL is given up once, not once per statement.
            inserted = self._conn.execute(_CAS, (key, new.seqno, bytes(new.data), key, expected))
            return inserted.rowcount == 1

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        with self._read_lock, _refusals(key, "scan", location=self._where):
            rows = self._reader.execute(
                "SELECT sequence_number, data FROM consensus WHERE shard = ? AND "
                "sequence_number >= ? ORDER BY sequence_number LIMIT ?",
                (key, from_seqno, limit),
            ).fetchall()
        return [VersionedData(s, bytes(d)) for s, d in rows]

    def truncate(self, key: str, seqno: int) -> int:
        with self._lock, _refusals(key, "truncate", location=self._where):
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                head = self._head(key)
                if head is None:
                    raise ConsensusError(key, "cannot truncate a key with no data")
                if seqno > head.seqno:
                    raise ConsensusError(key, f"cannot truncate past the head {head.seqno}")
                n = c.execute(
                    "DELETE FROM consensus WHERE shard = ? AND sequence_number < ?", (key, seqno)
                ).rowcount
                c.execute("COMMIT")
                return n
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise

    def list_keys(self) -> list[str]:
        with self._read_lock, _refusals("", "list", shard="", location=self._where):
            rows = self._reader.execute(
                "SELECT DISTINCT shard FROM consensus ORDER BY shard"
            ).fetchall()
        return [r[0] for r in rows]
