"""A replication connection: a slot created with an exported snapshot, then its CopyBoth stream.

Spoken over libpq through psycopg 3's binding (``psycopg.pq``) on a
``replication=database`` connection: ``CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT``
and ``START_REPLICATION`` are simple-protocol commands, then the server sends
CopyData frames (``XLogData`` and keepalives) and the client sends standby
status updates. Reads never block (:meth:`ReplicationStream.read_frame`);
:meth:`ReplicationStream.wait` sleeps until the socket has data.

A connection that fails or breaks raises
:class:`~tidegate.spec.errors.UpstreamUnreachable`; a command the server
refuses raises :class:`ServerRefused` with its SQLSTATE, which the reader maps
to a typed error (it knows what the command was about).
"""

from __future__ import annotations

import select
import time
from typing import TYPE_CHECKING

from ._catalog import format_lsn, parse_lsn, session_conninfo, unreachable
from ._core import ServerRefused
from ._pgoutput import PG_EPOCH_OFFSET_US, standby_status_update

if TYPE_CHECKING:
    from psycopg import pq

__all__ = ["ReplicationStream", "ServerRefused"]


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class ReplicationStream:
    """One ``replication=database`` connection to ``url`` (psycopg's libpq binding)."""

    def __init__(self, url: str, connect_timeout_s: float) -> None:
        from psycopg import OperationalError, pq

        self._url = url
        self._pq = pq
        self._lost = OperationalError
        conninfo = session_conninfo(url, connect_timeout_s, replication="database")
        try:
            conn = pq.PGconn.connect(conninfo.encode())
        except OperationalError as e:
            raise unreachable(url, e) from e
        if conn.status != pq.ConnStatus.OK:
            error = conn.get_error_message()
            conn.finish()
            raise unreachable(url, RuntimeError(error))
        self._conn: pq.abc.PGconn = conn
        self._socket = conn.socket

    def _run(self, command: str, expect: pq.ExecStatus) -> pq.abc.PGresult:
        try:
            res = self._conn.exec_(command.encode())
        except self._lost as e:
            raise unreachable(self._url, e) from e
        if res.status == expect:
            return res
        if self._conn.status != self._pq.ConnStatus.OK:
            raise unreachable(self._url, RuntimeError(self._conn.get_error_message()))
        raise self._refusal(res)

    def _refusal(self, res: pq.abc.PGresult) -> ServerRefused:
        field = self._pq.DiagnosticField
        sqlstate = (res.error_field(field.SQLSTATE) or b"").decode()
        message = (res.error_field(field.MESSAGE_PRIMARY) or res.error_message or b"").decode(
            errors="replace"
        )
        return ServerRefused(sqlstate, message.strip())

    def create_slot(self, slot: str, *, temporary: bool = False) -> tuple[int, str]:
        """Create logical slot ``slot`` (``pgoutput``); its consistent point and exported snapshot.

        The snapshot stays importable (``SET TRANSACTION SNAPSHOT``) until this
        connection runs its next command. A ``temporary`` slot goes with the connection.
        """
        kind = "TEMPORARY LOGICAL" if temporary else "LOGICAL"
        res = self._run(
            f"CREATE_REPLICATION_SLOT {_quote_ident(slot)} {kind} pgoutput EXPORT_SNAPSHOT",
            self._pq.ExecStatus.TUPLES_OK,
        )
        point, snapshot = res.get_value(0, 1), res.get_value(0, 2)
        if point is None or snapshot is None:
            raise ServerRefused("XX000", "CREATE_REPLICATION_SLOT returned no snapshot")
        lsn = parse_lsn(bytes(point).decode())
        assert lsn is not None
        return lsn, bytes(snapshot).decode()

    def start(self, slot: str, start_lsn: int, publication: str) -> None:
        """Stream slot ``slot`` from ``start_lsn`` (or its confirmed position, if later), protocol 1."""
        options = (
            f"proto_version '1', publication_names {_quote_literal(_quote_ident(publication))}"
        )
        self._run(
            f"START_REPLICATION SLOT {_quote_ident(slot)} LOGICAL {format_lsn(start_lsn)} "
            f"({options})",
            self._pq.ExecStatus.COPY_BOTH,
        )

    def read_frame(self) -> bytes | None:
        """The next CopyData frame already received, or ``None`` if none is complete yet."""
        try:
            n, data = self._conn.get_copy_data(1)
        except self._lost as e:
            raise unreachable(self._url, e) from e
        if n > 0:
            return bytes(data)
        if n == 0:
            return None
        # The server ended the stream: an error (or a shutdown) follows as the result.
        res = self._conn.get_result()
        if res is None or self._conn.status != self._pq.ConnStatus.OK:
            raise unreachable(self._url, RuntimeError(self._conn.get_error_message()))
        if res.status == self._pq.ExecStatus.FATAL_ERROR:
            raise self._refusal(res)
        raise unreachable(self._url, RuntimeError("the server ended the replication stream"))

    def wait(self, timeout_s: float) -> None:
        """Sleep until the socket has data (then take it in) or ``timeout_s`` passes."""
        from psycopg import OperationalError

        readable, _, _ = select.select([self._socket], [], [], max(0.0, timeout_s))
        if readable:
            try:
                self._conn.consume_input()
            except OperationalError as e:
                raise unreachable(self._url, e) from e

    def send_status(self, written: int, flushed: int) -> None:
        """A standby status update: received up to ``written``; durable (and applied) up to ``flushed``."""
        from psycopg import OperationalError

        now_us = int(time.time() * 1_000_000) - PG_EPOCH_OFFSET_US
        try:
            self._conn.put_copy_data(standby_status_update(written, flushed, flushed, now_us))
            self._conn.flush()
        except OperationalError as e:
            raise unreachable(self._url, e) from e

    def close(self) -> None:
        self._conn.finish()
