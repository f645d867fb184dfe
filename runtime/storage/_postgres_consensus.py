"""Consensus in PostgreSQL (psycopg 3): a table ``(shard, sequence_number, data)``.

``compare_and_set`` runs in one transaction that takes a per-shard advisory
lock, checks the head and inserts, so racing writers (in any process or host)
serialize on the shard and exactly one commits.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from tidegate.spec.errors import ConsensusError, StorageUnavailable
from tidegate.spec.shard import VersionedData, check_cas_arguments

__all__ = ["PostgresConsensus"]

_REFUSED_SQLSTATES = ("53", "25006", "42501")
"""SQLSTATEs that refuse a statement outright, its transaction rolled back: insufficient
resources (class 53: a full disk, out of memory), a read-only transaction (a standby, or
``default_transaction_read_only``), insufficient privilege."""


@contextlib.contextmanager
def _refusals(key: str, operation: str) -> Iterator[None]:
    """Raise :class:`StorageUnavailable` for a refusal of the server inside the block."""
    import psycopg

    try:
        yield
    except psycopg.Error as e:
        state = getattr(e, "sqlstate", None) or ""
        if not state.startswith(_REFUSED_SQLSTATES):
            raise
        raise StorageUnavailable(key, "consensus", key, operation, f"{e} (SQLSTATE {state})") from e


_SCHEMA = """
CREATE TABLE IF NOT EXISTS consensus (
    shard TEXT NOT NULL,
    sequence_number BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (shard, sequence_number)
)
"""


class PostgresConsensus:
    """Consensus on the PostgreSQL server at ``url`` (a libpq connection URL)."""

    local = False
    """Calls are network round trips, which may hang: never run on an event loop (see
    :attr:`~tidegate.runtime.storage.ShardStore.local`)."""

    def __init__(self, url: str, *, connect_timeout_s: int = 10) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise ModuleNotFoundError(
                "the PostgreSQL consensus backend needs psycopg: pip install 'tidegate[postgres]'"
            ) from e

        self._lock = threading.Lock()
        self._conn: Any = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s)
        with self._conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(727274)")  # serialize concurrent table creation
            try:
                cur.execute(_SCHEMA)
            finally:
                cur.execute("SELECT pg_advisory_unlock(727274)")

    def close(self) -> None:
        """Close the connection to the server (idempotent); the store is unusable afterwards."""
        with self._lock:
            self._conn.close()
            self.closed = True

    closed = False
    """Whether :meth:`close` was called."""

    def _head(self, cur: Any, key: str) -> VersionedData | None:
        cur.execute(
            "SELECT sequence_number, data FROM consensus WHERE shard = %s "
            "ORDER BY sequence_number DESC LIMIT 1",
            (key,),
        )
        row = cur.fetchone()
        return None if row is None else VersionedData(row[0], bytes(row[1]))

    def head(self, key: str) -> VersionedData | None:
        with self._lock, self._conn.cursor() as cur:
            return self._head(cur, key)

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_cas_arguments(key, expected, new)
        with (
            self._lock,
            _refusals(key, "compare-and-set"),
            self._conn.transaction(),
            self._conn.cursor() as cur,
        ):
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            head = self._head(cur, key)
            if (None if head is None else head.seqno) != expected:
                return False
            cur.execute(
                "INSERT INTO consensus (shard, sequence_number, data) VALUES (%s, %s, %s)",
                (key, new.seqno, bytes(new.data)),
            )
            return True

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        with self._lock, self._conn.cursor() as cur:
            cur.execute(
                "SELECT sequence_number, data FROM consensus WHERE shard = %s AND "
                "sequence_number >= %s ORDER BY sequence_number LIMIT %s",
                (key, from_seqno, limit),
            )
            return [VersionedData(s, bytes(d)) for s, d in cur.fetchall()]

    def truncate(self, key: str, seqno: int) -> int:
        with (
            self._lock,
            _refusals(key, "truncate"),
            self._conn.transaction(),
            self._conn.cursor() as cur,
        ):
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            head = self._head(cur, key)
            if head is None:
                raise ConsensusError(key, "cannot truncate a key with no data")
            if seqno > head.seqno:
                raise ConsensusError(key, f"cannot truncate past the head {head.seqno}")
            cur.execute(
                "DELETE FROM consensus WHERE shard = %s AND sequence_number < %s", (key, seqno)
            )
            n: int = cur.rowcount
            return n

    def list_keys(self) -> list[str]:
        with self._lock, self._conn.cursor() as cur:
            cur.execute("SELECT DISTINCT shard FROM consensus ORDER BY shard")
            return [r[0] for r in cur.fetchall()]
