"""The simulated upstream's side of PostgreSQL's logical replication, as bytes.

A simulated upstream (:class:`~.upstream.UpstreamLog`) is served to a reader
the way a PostgreSQL walsender serves a ``pgoutput`` slot, so that the
production reader's protocol core
(:class:`~tidegate.runtime.sources.postgres._core.ReplicationCore`: decoding,
transaction assembly, LSN bookkeeping, acknowledgements) runs in every
``sources`` seed. The encoding here is the world's own, written from
PostgreSQL's documentation ("Streaming Replication Protocol": ``XLogData``
``w``, primary keepalive ``k``, standby status update ``r``; "Logical
Replication Message Formats", protocol version 1: ``B``egin, ``C``ommit,
``R``elation, ``I``nsert, ``U``pdate, ``D``elete, TupleData), never by calling
the decoder it tests.

**LSNs.** A log transaction at offset ``o`` is a WAL commit record starting at
``o - 1`` and ending at ``o``: the reader places its changes at the commit's end
LSN, which is the log's offset, so the checkers judge the reader's output
against the log directly. A slot's ``confirmed_flush_lsn`` ``F`` means the
changes at offsets up to ``F`` are forgotten (the stream skips transactions
whose commit record starts before it).

**The stream** (:class:`Walsender`, one per replication connection) sends,
in WAL order, every transaction the slot has not confirmed: ``BEGIN``, a
``RELATION`` before the table's first change on the connection (and again now
and then, as after a relcache invalidation, and with the new shape after a
schema change), the changes (a delete and an insert of one transaction are
sent as an ``UPDATE`` with the whole old row, ``REPLICA IDENTITY FULL``; an
unchanged text column of an update's new row sometimes as "unchanged TOAST"),
``COMMIT``; transactions of another published table in the gaps between the
log's offsets (the reader must ignore them); and keepalives saying how far the
WAL was sent, some asking for a reply, some in the middle of a transaction.
What one read takes is drawn, so transactions arrive fragmented across reads.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import struct
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import ScalarType, Schema
from tidegate.spec.storage import SourceUpdate

from .choices import ChoiceSource, chance


class UpstreamLog(Protocol):
    """What the walsender reads of an upstream's log (:class:`~.upstream.UpstreamLog`; typed by
    what it offers, so that neither module needs the other)."""

    name: str
    schema: Schema
    offsets: list[int]
    changes: list[tuple[SourceUpdate, ...]]
    schema_changed_at: int | None

    def visible_upper(self, now_ms: int) -> int: ...


__all__ = [
    "PG_TYPES",
    "Walsender",
    "column_types",
    "keepalive",
    "parse_standby_status",
    "xlogdata",
]

PG_TYPES: Final[dict[ScalarType, tuple[int, str]]] = {
    # pg_type OIDs of the types a simulated table's columns have (PostgreSQL's catalog)
    ScalarType.INT64: (20, "bigint"),
    ScalarType.FLOAT64: (701, "double precision"),
    ScalarType.STRING: (25, "text"),
    ScalarType.BOOL: (16, "boolean"),
    ScalarType.DATE: (1082, "date"),
    ScalarType.TIMESTAMP: (1114, "timestamp without time zone"),
}
"""The PostgreSQL type (OID and name) of each simulated column type."""

ADDED_COLUMN: Final = ("note", 25)
"""The column a simulated schema change adds at the end (``ALTER TABLE ... ADD COLUMN note text``)."""

_UNCHANGED: Final = object()


def column_types(schema: Schema) -> list[tuple[str, int, str]]:
    """Each column's name, type OID and type name."""
    return [(c.name, *PG_TYPES[c.type.scalar]) for c in schema.columns]


# -- encoding (big-endian integers, NUL-terminated strings) -------------------------------------


def _string(s: str) -> bytes:
    return s.encode() + b"\0"


def _text(value: object) -> str:
    """A value in PostgreSQL's text output (``DateStyle=ISO``, ``extra_float_digits`` >= 1)."""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _tuple(values: Sequence[object]) -> bytes:
    """TupleData: Int16 count, then per column ``n`` (NULL), ``u`` (unchanged TOAST) or
    ``t`` + Int32 length + the text."""
    out = [struct.pack(">h", len(values))]
    for v in values:
        if v is None:
            out.append(b"n")
        elif v is _UNCHANGED:
            out.append(b"u")
        else:
            raw = _text(v).encode()
            out.append(b"t" + struct.pack(">i", len(raw)) + raw)
    return b"".join(out)


def _begin(final_lsn: int, time_us: int, xid: int) -> bytes:
    return b"B" + struct.pack(">QqI", final_lsn, time_us, xid)


def _commit(commit_lsn: int, end_lsn: int, time_us: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, commit_lsn, end_lsn, time_us)


def _relation(oid: int, namespace: str, name: str, columns: Sequence[tuple[str, int]]) -> bytes:
    out = [b"R", struct.pack(">I", oid), _string(namespace), _string(name), b"f"]
    out.append(struct.pack(">h", len(columns)))
    for col, type_oid in columns:
        out += [b"\0", _string(col), struct.pack(">Ii", type_oid, -1)]
    return b"".join(out)


def _insert(oid: int, new: Sequence[object]) -> bytes:
    return b"I" + struct.pack(">I", oid) + b"N" + _tuple(new)


def _update(oid: int, old: Sequence[object], new: Sequence[object]) -> bytes:
    return b"U" + struct.pack(">I", oid) + b"O" + _tuple(old) + b"N" + _tuple(new)


def _delete(oid: int, old: Sequence[object]) -> bytes:
    return b"D" + struct.pack(">I", oid) + b"O" + _tuple(old)


def xlogdata(start: int, wal_end: int, time_us: int, payload: bytes) -> bytes:
    """An ``XLogData`` CopyData payload: ``w``, the WAL start of ``payload``, the server's WAL
    end, its clock, then the message."""
    return b"w" + struct.pack(">QQq", start, wal_end, time_us) + payload


def keepalive(wal_end: int, time_us: int, reply: bool) -> bytes:
    """A primary keepalive: ``k``, the server's WAL end, its clock, whether to reply now."""
    return b"k" + struct.pack(">QqB", wal_end, time_us, int(reply))


def parse_standby_status(frame: bytes) -> tuple[int, int, int] | None:
    """A standby status update's written, flushed and applied LSNs (``None``: not one)."""
    if len(frame) != 34 or frame[0:1] != b"r":
        return None
    written, flushed, applied, _clock, _reply = struct.unpack(">QQQqB", frame[1:])
    return written, flushed, applied


# -- the walsender ----------------------------------------------------------------------------


class Walsender:
    """One replication connection streaming ``log``'s table from LSN ``start`` (see the module
    docstring): :meth:`read` is what the reader finds on its socket now."""

    def __init__(
        self,
        log: UpstreamLog,
        oid: int,
        start: int,
        choices: ChoiceSource,
        count: Callable[[str], None],
    ) -> None:
        self.log = log
        self.oid = oid
        self.choices = choices
        self.count = count
        self.queue: deque[bytes] = deque()
        self.sent_upto = start + 1
        """Every transaction at an offset below this is queued (those from ``start + 1`` on)."""
        self.relation_shape: bool | None = None
        """The shape last sent in a RELATION (``True``: changed), ``None``: none yet."""
        self.foreign_relation_sent = False
        self.xid = 1000

    def _now_us(self, now_ms: int) -> int:
        return now_ms * 1000  # virtual time counts from PostgreSQL's epoch

    def read(self, now_ms: int) -> list[bytes]:
        """The frames that arrive for one read: queued WAL up to what is visible now, cut at a
        drawn point (so a transaction may arrive in pieces)."""
        visible = self.log.visible_upper(now_ms)
        ts = self._now_us(now_ms)
        if visible > self.sent_upto:
            self._send_wal(self.sent_upto, visible, ts)
            self.sent_upto = visible
            self.queue.append(keepalive(visible - 1, ts, chance(self.choices, 200)))
        elif chance(self.choices, 100):  # an idle keepalive
            self.queue.append(keepalive(self.sent_upto - 1, ts, chance(self.choices, 500)))
        n = len(self.queue)
        if n > 1 and chance(self.choices, 250):
            n = self.choices.integer(1, n - 1)
            self.count("upstream_batch_split")
        return [self.queue.popleft() for _ in range(n)]

    def _send_wal(self, lower: int, upper: int, ts: int) -> None:
        """Queue every transaction at an offset in ``[lower, upper)``, in WAL order."""
        log = self.log
        offsets = log.offsets
        i = bisect.bisect_left(offsets, lower)
        previous = offsets[i - 1] if i > 0 else 0
        while i < len(offsets) and offsets[i] < upper:
            offset = offsets[i]
            if offset - previous >= 2 and offset - 1 >= lower:
                self._foreign(offset - 1, upper - 1, ts)  # another table's transaction in the gap
            self._transaction(offset, log.changes[i], upper - 1, ts)
            previous = offset
            i += 1

    def _frame(self, start: int, wal_end: int, ts: int, payload: bytes) -> None:
        self.queue.append(xlogdata(start, wal_end, ts, payload))

    def _foreign(self, offset: int, wal_end: int, ts: int) -> None:
        """A transaction of another published table (``public.audit``) committed at ``offset``."""
        self.xid += 1
        commit_lsn = offset - 1
        self._frame(commit_lsn, wal_end, ts, _begin(commit_lsn, ts, self.xid))
        if not self.foreign_relation_sent:
            self._frame(
                commit_lsn, wal_end, ts, _relation(self.oid + 1, "public", "audit", [("n", 20)])
            )
            self.foreign_relation_sent = True
        self._frame(commit_lsn, wal_end, ts, _insert(self.oid + 1, [offset]))
        self._frame(commit_lsn, wal_end, ts, _commit(commit_lsn, offset, ts))

    def _transaction(
        self, offset: int, updates: Sequence[tuple[Row, int, int]], wal_end: int, ts: int
    ) -> None:
        log, choices = self.log, self.choices
        commit_lsn = offset - 1
        changed = log.schema_changed_at is not None and offset >= log.schema_changed_at
        self.xid += 1
        self._frame(commit_lsn, wal_end, ts, _begin(commit_lsn, ts, self.xid))
        if self.relation_shape is not changed or chance(choices, 30):
            if self.relation_shape is changed:
                self.count("upstream_relation_resent")
            columns = [(name, oid) for name, oid, _ in column_types(log.schema)]
            if changed:
                columns.append(ADDED_COLUMN)
            self._frame(commit_lsn, wal_end, ts, _relation(self.oid, "public", log.name, columns))
            self.relation_shape = changed
        extra: tuple[object, ...] = (None,) if changed else ()
        deletes = [row for row, _, diff in updates if diff < 0 for _ in range(-diff)]
        inserts = [row for row, _, diff in updates if diff > 0 for _ in range(diff)]
        messages: list[bytes] = []
        while deletes and inserts:  # an UPDATE: the old row and the new
            old, new = deletes.pop(), inserts.pop()
            shown: list[object] = list(new)
            for k, (a, b) in enumerate(zip(old, new, strict=True)):
                if isinstance(b, str) and a == b and chance(choices, 300):
                    shown[k] = _UNCHANGED  # sent as "unchanged TOAST": the reader takes the old
            messages.append(_update(self.oid, (*old, *extra), (*shown, *extra)))
        messages += [_delete(self.oid, (*row, *extra)) for row in deletes]
        messages += [_insert(self.oid, (*row, *extra)) for row in inserts]
        for message in messages:
            self._frame(commit_lsn, wal_end, ts, message)
            if chance(choices, 40):  # a keepalive in the middle of a transaction: the server's
                self.queue.append(keepalive(wal_end, ts, False))  # WAL is past its commit
        self._frame(commit_lsn, wal_end, ts, _commit(commit_lsn, offset, ts))
