"""Consensus in PostgreSQL (psycopg 3): a table ``(shard, sequence_number, data)``.

``compare_and_set`` runs in one transaction that takes a per-shard advisory
lock, checks the head and inserts, so racing writers (in any process or host)
serialize on the shard and exactly one commits.

The store is :class:`~tidegate.spec.shard.Watchable`: every commit sends a
notification (``NOTIFY``, delivered when the transaction commits) on channel
:data:`CHANNEL` with the key as its payload, and :meth:`PostgresConsensus.watch`
listens on a connection of its own (``LISTEN``, opened by the first watch, in a
thread of its own). So a reader following a shard from another process or host
hears of a write at once, rather than asking the server again and again whether
one happened (persist's PubSub, with PostgreSQL's own notifications). A
notification is a hint: while the listening connection is down (it reconnects
with backoff) notifications are lost, and after a reconnection every watcher is
called once, so a reader that still polls now and then never waits long.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tidegate.spec.errors import ConsensusError, StorageUnavailable
from tidegate.spec.shard import VersionedData, check_cas_arguments

__all__ = ["CHANNEL", "PostgresConsensus"]

log = logging.getLogger(__name__)

CHANNEL = "tidegate_consensus"
"""The notification channel of consensus commits (the payload is the key)."""
_LISTEN_POLL_S = 0.5
"""How often the listening thread looks up from waiting (to notice :meth:`close`)."""
_RECONNECT_FIRST_S, _RECONNECT_MAX_S = 0.1, 5.0

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
        raise StorageUnavailable(
            key, "consensus", key, operation, f"{e} (SQLSTATE {state})", sqlstate=state
        ) from e


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

        self._url = url
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._conn: Any = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s)
        self._watchers: dict[str, list[Callable[[str], None]]] = {}
        self._watch_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()
        self._listening = threading.Event()
        """Set while the listening connection is up and its watchers were told of anything
        missed before it (for tests: a commit from now on is notified)."""
        self._listen_pid: int | None = None
        """The server process of the listening connection (for tests that break it)."""
        with self._conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(727274)")  # serialize concurrent table creation
            try:
                cur.execute(_SCHEMA)
            finally:
                cur.execute("SELECT pg_advisory_unlock(727274)")

    def close(self) -> None:
        """Close the connection to the server and stop listening (idempotent); the store is
        unusable afterwards."""
        self._stopping.set()
        listener = self._listener
        with self._lock:
            if listener is not None and not self.closed:
                with contextlib.suppress(Exception):  # wakes the listener now (payload ignored)
                    self._conn.execute("SELECT pg_notify(%s, '')", (CHANNEL,))
            self._conn.close()
            self.closed = True
        if listener is not None and listener is not threading.current_thread():
            listener.join(_LISTEN_POLL_S * 4 + self._connect_timeout_s)

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
            cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, key))  # sent at the commit
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

    # -- watching ---------------------------------------------------------------------------
    def watch(self, key: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(key)`` after each commit to ``key`` by anyone (see the module
        docstring); returns the function that stops it. Never fails: the listening
        connection is opened (and reopened) in the background."""
        with self._watch_lock:
            self._watchers.setdefault(key, []).append(callback)
            if self._listener is None and not self._stopping.is_set():
                self._listener = threading.Thread(
                    target=self._listen, name="consensus-listener", daemon=True
                )
                self._listener.start()

        def cancel() -> None:
            with self._watch_lock:
                callbacks = self._watchers.get(key)
                if callbacks is not None and callback in callbacks:
                    callbacks.remove(callback)
                    if not callbacks:
                        del self._watchers[key]

        return cancel

    def _notify(self, key: str | None) -> None:
        """Call the watchers of ``key`` (of every key if ``None``)."""
        with self._watch_lock:
            if key is None:
                callbacks = [(k, c) for k, cs in self._watchers.items() for c in cs]
            else:
                callbacks = [(key, c) for c in self._watchers.get(key, ())]
        for k, callback in callbacks:
            try:
                callback(k)
            except Exception as e:  # a watcher's bug never stops the others or the thread
                log.warning("consensus watcher of %s failed: %r", k, e)

    def _listen(self) -> None:
        """The listening thread: ``LISTEN``, hand each notification to its key's watchers;
        reconnect with backoff when the connection breaks (watchers are then called once)."""
        import psycopg

        delay = _RECONNECT_FIRST_S
        complained = ""
        missed = True  # commits before the first LISTEN (or during a break) went unheard
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, connect_timeout=self._connect_timeout_s
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if complained:
                        log.info("consensus listener reconnected")
                        complained = ""
                    self._listen_pid = conn.info.backend_pid
                    if missed:
                        missed = False
                        self._notify(None)
                    self._listening.set()
                    delay = _RECONNECT_FIRST_S
                    while not self._stopping.is_set():
                        for n in conn.notifies(timeout=_LISTEN_POLL_S):
                            if n.payload:  # an empty one only wakes the thread (close)
                                self._notify(n.payload)
            except Exception as e:
                self._listening.clear()
                missed = True
                text = f"{type(e).__name__}: {e}"
                if text != complained:  # once per distinct problem
                    log.warning("consensus listener lost its connection, reconnecting: %s", text)
                complained = text
                self._stopping.wait(delay)
                delay = min(delay * 2, _RECONNECT_MAX_S)
