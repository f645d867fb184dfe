"""Decoding of PostgreSQL's ``pgoutput`` logical replication messages, protocol version 1.

The layouts are PostgreSQL's "Logical Replication Message Formats" (protocol
chapter 55.9): one message per ``XLogData`` payload, big-endian integers,
NUL-terminated strings. :func:`decode_message` turns one payload into a
frozen dataclass; anything malformed (short, trailing bytes, an unknown tag,
bad UTF-8) raises :class:`~tidegate.spec.errors.UpstreamProtocolViolation`
and nothing else. Column values stay as the upstream's text (``str``), raw
bytes (``bytes``, the ``binary`` option), ``None`` for NULL, or
:data:`UNCHANGED` for an unchanged TOASTed value the upstream did not resend;
:mod:`._types` turns text into tidegate values.

Also the replication protocol's own frames around them: the server's
``XLogData`` and keepalive headers (:func:`decode_frame`) and the client's
standby status update (:func:`standby_status_update`).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final, TypeAlias

from tidegate.spec.errors import UpstreamProtocolViolation

__all__ = [
    "PG_EPOCH_OFFSET_US",
    "UNCHANGED",
    "Begin",
    "ColumnValue",
    "Commit",
    "Delete",
    "Insert",
    "Keepalive",
    "LogicalMessage",
    "Message",
    "Origin",
    "Relation",
    "RelationColumn",
    "Truncate",
    "TypeInfo",
    "Unchanged",
    "Update",
    "XLogData",
    "decode_frame",
    "decode_insert",
    "decode_message",
    "standby_status_update",
]

PG_EPOCH_OFFSET_US: Final = 946_684_800_000_000
"""Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC), the zero of its timestamps."""


class Unchanged(enum.Enum):
    """The type of :data:`UNCHANGED`."""

    TOAST = "u"


UNCHANGED: Final = Unchanged.TOAST
"""An unchanged TOASTed column of an update's new row: its value is the old row's."""

ColumnValue: TypeAlias = str | bytes | Unchanged | None
"""One column of a tuple: text, binary, unchanged TOAST, or NULL."""


@dataclass(frozen=True, slots=True)
class Begin:
    """A transaction starts; ``final_lsn`` is its commit record's LSN, ``commit_time`` in µs since 2000."""

    final_lsn: int
    commit_time: int
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    """A transaction ends: its commit record at ``commit_lsn``, which ends at ``end_lsn``."""

    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: int


@dataclass(frozen=True, slots=True)
class Origin:
    """The replication origin a transaction came from (for cascaded replication)."""

    lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class RelationColumn:
    """One column of a :class:`Relation`: ``flags`` bit 1 marks a replica-identity key column."""

    flags: int
    name: str
    type_oid: int
    type_modifier: int


@dataclass(frozen=True, slots=True)
class Relation:
    """A table's shape, sent before its first change and again after any change to it.

    ``replica_identity`` is ``pg_class.relreplident``: ``d`` default, ``n``
    nothing, ``f`` full, ``i`` index.
    """

    relation_id: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """The name of a non-built-in type some relation uses."""

    type_oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    """A row inserted into relation ``relation_id``."""

    relation_id: int
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Update:
    """A row updated: ``old`` is the old row (``old_kind`` ``O``), its key (``K``), or absent (``None``)."""

    relation_id: int
    old_kind: str | None
    old: tuple[ColumnValue, ...] | None
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    """A row deleted: ``old`` is the old row (``old_kind`` ``O``) or its key (``K``)."""

    relation_id: int
    old_kind: str
    old: tuple[ColumnValue, ...]


@dataclass(frozen=True, slots=True)
class Truncate:
    """Relations truncated; ``options`` bit 1 is ``CASCADE``, bit 2 ``RESTART IDENTITY``."""

    options: int
    relation_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    """A ``pg_logical_emit_message`` message (sent only with the ``messages`` option)."""

    flags: int
    lsn: int
    prefix: str
    content: bytes


Message: TypeAlias = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeInfo
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
)


@dataclass(frozen=True, slots=True)
class XLogData:
    """A frame of WAL data: ``payload`` (one pgoutput message) starting at ``data_start``."""

    data_start: int
    wal_end: int
    send_time: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Keepalive:
    """The server's keepalive: it has sent everything up to ``wal_end``; ``reply`` asks for a status update."""

    wal_end: int
    send_time: int
    reply: bool


_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">BQQq")
_ORIGIN_LSN = struct.Struct(">Q")
_REL_HEAD = struct.Struct(">I")
_COL_TAIL = struct.Struct(">Ii")
_MSG_HEAD = struct.Struct(">BQ")
_XLOG = struct.Struct(">QQq")
_KEEPALIVE = struct.Struct(">QqB")
_STATUS = struct.Struct(">cQQQqB")


class _Reader:
    """A cursor over one message's bytes; every read checks the bounds."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        end = self.pos + st.size
        if end > len(self.buf):
            raise UpstreamProtocolViolation(f"message ends {end - len(self.buf)} bytes early")
        out = st.unpack_from(self.buf, self.pos)
        self.pos = end
        return out

    def byte(self) -> int:
        return self.unpack(_U8)[0]

    def char(self) -> str:
        return chr(self.unpack(_U8)[0])

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise UpstreamProtocolViolation(f"a {n}-byte field runs past the message's end")
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def string(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise UpstreamProtocolViolation("a string has no terminating NUL")
        out = self.buf[self.pos : end]
        self.pos = end + 1
        return _utf8(out)

    def tuple_data(self) -> tuple[ColumnValue, ...]:
        values, self.pos = _tuple_data(self.buf, self.pos)
        return values

    def end(self, what: str) -> None:
        if self.pos != len(self.buf):
            raise UpstreamProtocolViolation(
                f"{len(self.buf) - self.pos} bytes after the end of a {what} message"
            )


def _tuple_data(buf: bytes, pos: int) -> tuple[tuple[ColumnValue, ...], int]:
    """The TupleData at ``buf[pos:]`` and the position after it (the hot path: one per row)."""
    size = len(buf)
    values: list[ColumnValue] = []
    append = values.append
    unpack_i32 = _I32.unpack_from
    try:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        for _ in range(n):
            kind = buf[pos]
            if kind == 0x74:  # 't': text
                (length,) = unpack_i32(buf, pos + 1)
                pos += 5
                end = pos + length
                if length < 0 or end > size:
                    raise UpstreamProtocolViolation(f"a {length}-byte value runs past the end")
                append(buf[pos:end].decode())
                pos = end
            elif kind == 0x6E:  # 'n': NULL
                append(None)
                pos += 1
            elif kind == 0x75:  # 'u': unchanged TOAST
                append(UNCHANGED)
                pos += 1
            elif kind == 0x62:  # 'b': binary
                (length,) = unpack_i32(buf, pos + 1)
                pos += 5
                end = pos + length
                if length < 0 or end > size:
                    raise UpstreamProtocolViolation(f"a {length}-byte value runs past the end")
                append(buf[pos:end])
                pos = end
            else:
                raise UpstreamProtocolViolation(f"unknown tuple column kind {kind:#04x}")
    except (IndexError, struct.error):
        raise UpstreamProtocolViolation("a tuple ends early") from None
    except UnicodeDecodeError as e:
        raise UpstreamProtocolViolation(f"text that is not UTF-8: {e}") from None
    if n < 0:
        raise UpstreamProtocolViolation(f"a tuple of {n} columns")
    return tuple(values), pos


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as e:
        raise UpstreamProtocolViolation(f"text that is not UTF-8: {e}") from None


def _decode_relation(r: _Reader) -> Relation:
    (rel,) = r.unpack(_REL_HEAD)
    namespace, name, ident = r.string(), r.string(), r.char()
    (ncols,) = r.unpack(_I16)
    if ncols < 0:
        raise UpstreamProtocolViolation(f"a relation of {ncols} columns")
    columns = []
    for _ in range(ncols):
        flags, col = r.byte(), r.string()
        type_oid, typmod = r.unpack(_COL_TAIL)
        columns.append(RelationColumn(flags, col, type_oid, typmod))
    return Relation(rel, namespace, name, ident, tuple(columns))


def _old_and_new(r: _Reader) -> tuple[str | None, tuple[ColumnValue, ...] | None, str]:
    kind = r.char()
    if kind in ("K", "O"):
        old = r.tuple_data()
        return kind, old, r.char()
    return None, None, kind


def decode_insert(payload: bytes) -> tuple[int, tuple[ColumnValue, ...]] | None:
    """An Insert's relation id and new row, or ``None`` for any other message.

    The same as :func:`decode_message` for inserts, without building a message
    object: inserts are most of a stream, and a reader takes them this way first.
    """
    if len(payload) < 6 or payload[0] != 0x49 or payload[5] != 0x4E:  # 'I' ... 'N'
        return None
    new, end = _tuple_data(payload, 6)
    if end != len(payload):
        raise UpstreamProtocolViolation(f"{len(payload) - end} bytes after the end of an Insert")
    return _REL_HEAD.unpack_from(payload, 1)[0], new


def decode_message(payload: bytes) -> Message:
    """One pgoutput message from its bytes (an ``XLogData`` payload)."""
    if not payload:
        raise UpstreamProtocolViolation("an empty message")
    buf = bytes(payload)
    insert = decode_insert(buf)
    if insert is not None:
        return Insert(*insert)
    r = _Reader(buf)
    tag = r.char()
    msg: Message
    if tag == "I":
        (rel,) = r.unpack(_REL_HEAD)
        if r.char() != "N":
            raise UpstreamProtocolViolation("an insert without its new tuple")
        msg = Insert(rel, r.tuple_data())
    elif tag == "B":
        final_lsn, ts, xid = r.unpack(_BEGIN)
        msg = Begin(final_lsn, ts, xid)
    elif tag == "C":
        flags, commit_lsn, end_lsn, ts = r.unpack(_COMMIT)
        msg = Commit(flags, commit_lsn, end_lsn, ts)
    elif tag == "U":
        (rel,) = r.unpack(_REL_HEAD)
        old_kind, old, new_tag = _old_and_new(r)
        if new_tag != "N":
            raise UpstreamProtocolViolation("an update without its new tuple")
        msg = Update(rel, old_kind, old, r.tuple_data())
    elif tag == "D":
        (rel,) = r.unpack(_REL_HEAD)
        old_kind = r.char()
        if old_kind not in ("K", "O"):
            raise UpstreamProtocolViolation("a delete without its old tuple or key")
        msg = Delete(rel, old_kind, r.tuple_data())
    elif tag == "R":
        msg = _decode_relation(r)
    elif tag == "Y":
        (oid,) = r.unpack(_U32)
        msg = TypeInfo(oid, r.string(), r.string())
    elif tag == "O":
        (lsn,) = r.unpack(_ORIGIN_LSN)
        msg = Origin(lsn, r.string())
    elif tag == "T":
        (n,) = r.unpack(_I32)
        options = r.byte()
        if n < 0:
            raise UpstreamProtocolViolation(f"a truncate of {n} relations")
        msg = Truncate(options, tuple(r.unpack(_U32)[0] for _ in range(n)))
    elif tag == "M":
        flags, lsn = r.unpack(_MSG_HEAD)
        prefix = r.string()
        (length,) = r.unpack(_I32)
        msg = LogicalMessage(flags, lsn, prefix, r.take(length))
    else:
        raise UpstreamProtocolViolation(f"unknown message tag {tag!r}")
    r.end(type(msg).__name__)
    return msg


def decode_frame(frame: bytes) -> XLogData | Keepalive:
    """One CopyData frame of a replication stream: ``XLogData`` (``w``) or a keepalive (``k``)."""
    if not frame:
        raise UpstreamProtocolViolation("an empty replication frame")
    tag = frame[0]
    if tag == 0x77:  # 'w'
        if len(frame) < 1 + _XLOG.size:
            raise UpstreamProtocolViolation("a short XLogData header")
        start, end, ts = _XLOG.unpack_from(frame, 1)
        return XLogData(start, end, ts, bytes(frame[1 + _XLOG.size :]))
    if tag == 0x6B:  # 'k'
        if len(frame) != 1 + _KEEPALIVE.size:
            raise UpstreamProtocolViolation(f"a keepalive of {len(frame)} bytes")
        end, ts, reply = _KEEPALIVE.unpack_from(frame, 1)
        return Keepalive(end, ts, bool(reply))
    raise UpstreamProtocolViolation(f"unknown replication frame tag {tag:#04x}")


def standby_status_update(
    written: int, flushed: int, applied: int, now_us: int, *, reply: bool = False
) -> bytes:
    """The client's status update frame (``r``): positions as LSNs, ``now_us`` in µs since 2000."""
    return _STATUS.pack(b"r", written, flushed, applied, now_us, int(reply))
