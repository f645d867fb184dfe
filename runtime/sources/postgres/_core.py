"""The reader's protocol logic without IO: replication frames in, source batches and status out.

:class:`ReplicationCore` is everything :class:`~.reader.PostgresReader` knows
about a replication stream once it has a table description, a start position
and (for a snapshot) the snapshot's rows: it takes the CopyData payloads of the
stream one at a time (:meth:`~ReplicationCore.receive`: ``XLogData`` frames
carrying ``pgoutput`` messages, and primary keepalives), assembles whole
transactions, keeps the LSN bookkeeping (the upper, what was written, what is
flushed), rewinds a late snapshot to the slot's position, checks every
``Relation`` message against the table, and hands out

* :class:`~tidegate.spec.storage.connections.SourceBatch` es
  (:meth:`~ReplicationCore.deliverable`),
* standby status updates to send (:meth:`~ReplicationCore.take_status`, each a
  :class:`StatusUpdate` whose :meth:`~StatusUpdate.encode` is the frame's bytes),
* and typed errors (:attr:`~ReplicationCore.error`): a broken stream's error
  is kept, and raised by the driver after what was complete before it.

It has no sockets, no clocks (every method that needs the time is given it,
in seconds of the driver's monotonic clock), no threads and no psycopg, so the
simulator drives the same code over a simulated upstream's bytes
(:mod:`tidegate.sim.pg_upstream`), as FoundationDB runs its real code over
simulated IO. The driver's only protocol decisions are the IO it does: which
start (:meth:`~ReplicationCore.resume`, :meth:`~ReplicationCore.fresh_snapshot`,
:meth:`~ReplicationCore.rewound_snapshot`), when to read frames
(:meth:`~ReplicationCore.wants_frames`), and what the server refused
(:meth:`~ReplicationCore.refusal` maps it to a typed error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tidegate.spec.errors import (
    PublicationMissing,
    ReplicaIdentityNotFull,
    ReplicationSlotInUse,
    ReplicationSlotMissing,
    SourceConfigurationInvalid,
    SourceError,
    SourceReaderMisused,
    UpstreamProtocolViolation,
    UpstreamSchemaChanged,
    UpstreamTruncated,
    UpstreamUnreachable,
    UpstreamValueUnrepresentable,
)
from tidegate.spec.frontier import Row
from tidegate.spec.storage.connections import SourceBatch, SourceUpdate

from ._catalog import SlotInfo, UpstreamTable
from ._pgoutput import (
    UNCHANGED,
    Begin,
    ColumnValue,
    Commit,
    Delete,
    Insert,
    Keepalive,
    Relation,
    Truncate,
    Update,
    decode_frame,
    decode_insert,
    decode_message,
    standby_status_update,
)
from ._types import PARSERS, TextParser, Unrepresentable

__all__ = [
    "ReplicationCore",
    "ServerRefused",
    "StartPlan",
    "StatusUpdate",
    "differences",
    "plan_start",
]

_XLOGDATA, _KEEPALIVE = 0x77, 0x6B
_XLOGDATA_HEADER = 25
_IDENTITIES = {"d": "default", "n": "nothing", "i": "using index", "f": "full"}

TypeNames = Callable[[Sequence[tuple[int, int]]], dict[tuple[int, int], str]]
"""The driver's names of ``(type OID, modifier)`` pairs (only to word an error; may be partial)."""


class ServerRefused(Exception):
    """The server refused a replication command, or ended the stream with an error."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(f"{message} (SQLSTATE {sqlstate})")
        self.sqlstate = sqlstate
        self.message = message


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A standby status update to send: received up to ``written``, durable (and applied) up to
    ``flushed`` (LSNs)."""

    written: int
    flushed: int

    def encode(self, now_us: int) -> bytes:
        """The CopyData payload (``r``), ``now_us`` in µs since 2000-01-01."""
        return standby_status_update(self.written, self.flushed, self.flushed, now_us)


@dataclass(frozen=True, slots=True)
class StartPlan:
    """How a reader starts, given what the slot says: ``resume`` the stream past what is
    durable; take a ``fresh`` snapshot with a new slot (dropping a lost one first, if
    ``drop_lost``); or deliver the slot's snapshot again, ``rewind`` ing a later one to the
    slot's ``confirmed`` position."""

    kind: Literal["resume", "fresh", "rewind"]
    confirmed: int
    drop_lost: bool = False


def plan_start(slot_name: str, resume_offset: int, slot: SlotInfo | None) -> StartPlan:
    """How to start at ``resume_offset`` with ``slot`` (``None``: there is none).

    Raises :class:`SourceConfigurationInvalid` for a slot that is not a ``pgoutput``
    slot of the table's database, and :class:`ReplicationSlotMissing` when data was
    durable (``resume_offset`` past the slot's snapshot) but the slot is gone: a new
    one would lose the changes in between.
    """
    if type(resume_offset) is not int or resume_offset < 0:
        raise SourceReaderMisused(f"resume offset {resume_offset!r} is not a non-negative int")
    if slot is not None and not (slot.logical and slot.plugin == "pgoutput" and slot.this_database):
        raise SourceConfigurationInvalid(
            "replication slot",
            f"{slot_name} ({'logical' if slot.logical else 'physical'}, plugin "
            f"{slot.plugin}, {'this' if slot.this_database else 'another'} database)",
            "the source needs a pgoutput slot of its own in the table's database: "
            "choose another slot name, or drop that slot",
        )
    confirmed = (slot.confirmed_flush or 0) if slot is not None else 0
    snapshot = resume_offset == 0 or (slot is not None and resume_offset <= confirmed)
    if not snapshot and (slot is None or slot.lost):
        raise ReplicationSlotMissing(slot_name, resume_offset)
    if not snapshot:
        return StartPlan("resume", confirmed)
    if slot is None or slot.lost:
        return StartPlan("fresh", 0, drop_lost=slot is not None)
    return StartPlan("rewind", confirmed)


class ReplicationCore:
    """The protocol state of one reader of ``table`` (see the module docstring).

    ``slot``, ``publication`` and ``server`` only name things in errors;
    ``max_batch_updates`` is where a batch stops taking more transactions;
    ``status_interval_s`` how often the server hears from the reader;
    ``type_names`` the driver's lookup of type names for a changed relation's
    error (``None``: the types are named by OID).
    """

    def __init__(
        self,
        table: UpstreamTable,
        *,
        slot: str,
        publication: str,
        server: str,
        max_batch_updates: int = 100_000,
        status_interval_s: float = 1.0,
        type_names: TypeNames | None = None,
    ) -> None:
        self.table = table
        self._slot = slot
        self._publication = publication
        self._server = server
        self._max_batch = max_batch_updates
        self._status_interval_s = status_interval_s
        self._type_names = type_names
        self._parsers: list[TextParser] = [PARSERS[c.scalar] for c in table.columns]
        self._not_null = [i for i, c in enumerate(table.columns) if c.not_null]
        self.error: SourceError | None = None
        """The stream's error, once it broke (raised by the driver after what was complete)."""
        # What has been delivered and acked, as offsets / LSNs.
        self._resume = 0
        self._upper = 0
        self._reported = 0
        self._flushed = 0
        self._written = 0
        self.consistent_point: int | None = None
        """The snapshot's offset ``C``, if the reader took a snapshot."""
        # Work in progress.
        self._pending: SourceBatch | None = None
        self._rewind: _Rewind | None = None
        self._bytes = 0
        self._batch: list[SourceUpdate] = []
        self._txn: list[tuple[Row, int]] | None = None
        self._txn_truncated = False
        self._outbox: list[StatusUpdate] = []
        self._last_status = 0.0

    # -- where to start (the driver chose by what the slot says) --------------------------

    def resume(self, resume_offset: int, confirmed: int) -> int:
        """Stream from ``resume_offset - 1`` (a slot confirmed up to ``confirmed`` exists and
        ``resume_offset`` is past it): only transactions ending at or after ``resume_offset``
        are delivered. The LSN to start the stream at."""
        self._reported = resume_offset
        self._flushed = confirmed
        self._resume = self._upper = resume_offset
        return resume_offset - 1

    def fresh_snapshot(self, resume_offset: int, point: int, rows: Counter[Row], size: int) -> int:
        """A new slot's snapshot ``rows`` (``size`` bytes of text) at its consistent point
        ``point``: delivered first, at ``point``. The LSN to start the stream at."""
        self._reported = resume_offset
        self._pending = SourceBatch(_at(rows, point), point + 1, size)
        self._begin_at(point)
        return point

    def rewound_snapshot(
        self, resume_offset: int, point: int, later: int, rows: Counter[Row], size: int
    ) -> int:
        """A snapshot ``rows`` taken at ``later``, to be rewound to the slot's position ``point``
        by the changes the stream brings between them (the transactions whose commit record
        starts before ``later``), then delivered at ``point``. The LSN to start the stream at."""
        self._reported = resume_offset
        self._rewind = _Rewind(point, later, rows, size)
        self._begin_at(point)
        return point

    def _begin_at(self, point: int) -> None:
        self.consistent_point = point
        self._resume = self._upper = point + 1
        self._flushed = point

    def started(self, start_lsn: int, now: float) -> None:
        """The stream started at ``start_lsn`` at time ``now``."""
        self._written = max(self._flushed, start_lsn)
        self._last_status = now

    @property
    def reported(self) -> int:
        """The upper of the last batch handed out (the resume offset before any)."""
        return self._reported

    # -- the stream ----------------------------------------------------------------------

    def wants_frames(self) -> bool:
        """Whether to read more frames now: the batch is not full, or a transaction (or a
        snapshot's rewind) is still open, and the stream is not broken."""
        return self.error is None and (
            len(self._batch) < self._max_batch or self._txn is not None or self._rewind is not None
        )

    def receive(self, frame: bytes, now: float) -> None:
        """Take in one CopyData frame of the stream; an error is kept in :attr:`error`."""
        if self.error is not None:
            return
        try:
            self._bytes += len(frame)
            tag = frame[0] if frame else -1
            if tag == _XLOGDATA:
                self._message(frame[_XLOGDATA_HEADER:])
            elif tag == _KEEPALIVE:
                self._keepalive(frame, now)
            else:
                decode_frame(frame)  # raises UpstreamProtocolViolation
        except SourceError as e:
            self.fail(e)

    def fail(self, error: SourceError) -> None:
        """The stream broke (the driver's IO failed, or the server ended it): ``error`` is raised
        once what was complete before it is delivered."""
        if self.error is None:
            self.error = error
        self._txn = None

    def refusal(self, e: ServerRefused) -> SourceError:
        """The typed error for a refused replication command (or a stream the server ended)."""
        slot = self._slot
        if e.sqlstate == "55006":
            return ReplicationSlotInUse(slot, e.message)
        if e.sqlstate == "53400":
            return SourceConfigurationInvalid(
                "max_replication_slots / max_wal_senders",
                "exhausted",
                f"{e.message}: raise the setting or drop unused slots",
            )
        if e.sqlstate == "42501":
            return SourceConfigurationInvalid("role privileges", "insufficient", e.message)
        if e.sqlstate == "42704":
            if "publication" in e.message:
                return PublicationMissing(self._publication)
            if "slot" in e.message:
                return ReplicationSlotMissing(slot, self._resume)
        if e.sqlstate == "55000" and "wal_level" in e.message:
            return SourceConfigurationInvalid("wal_level", "not logical", e.message)
        if e.sqlstate.startswith(("08", "57")):  # connection failures, a server shutting down
            return UpstreamUnreachable(self._server, e.message)
        return SourceConfigurationInvalid("replication", f"refused ({e.sqlstate})", e.message)

    def tick(self, now: float) -> None:
        """Queue a status update if the server has not heard from the reader for an interval."""
        if now - self._last_status >= self._status_interval_s:
            self._status(now)

    def take_status(self) -> list[StatusUpdate]:
        """The status updates to send, oldest first (the driver sends them in order)."""
        out, self._outbox = self._outbox, []
        return out

    def _status(self, now: float) -> None:
        self._outbox.append(StatusUpdate(max(self._written, self._flushed), self._flushed))
        self._last_status = now

    # -- what to hand out -----------------------------------------------------------------

    def deliverable(self) -> SourceBatch | None:
        """The batch to return now, if any: a snapshot first, then completed transactions."""
        if self._pending is not None:
            batch, self._pending = self._pending, None
            self._reported = batch.upper
            return batch
        if self._rewind is not None or not (self._batch or self._upper > self._reported):
            return None
        batch = SourceBatch(tuple(self._batch), self._upper, self._bytes)
        self._batch, self._bytes = [], 0
        self._reported = self._upper
        return batch

    def has_news(self) -> bool:
        """Whether :meth:`deliverable` has something now (or the error is due)."""
        return (
            self.error is not None
            or self._pending is not None
            or (self._rewind is None and (bool(self._batch) or self._upper > self._reported))
        )

    def ack(self, offset: int, now: float) -> None:
        """Everything below ``offset`` is durable downstream: report ``offset - 1`` as flushed."""
        if type(offset) is not int or offset > self._reported:
            raise SourceReaderMisused(
                f"ack({offset!r}) beyond the upper delivered so far ({self._reported})"
            )
        if offset - 1 > self._flushed:
            self._flushed = offset - 1
            self._status(now)

    # -- frames and messages --------------------------------------------------------------

    def _keepalive(self, frame: bytes, now: float) -> None:
        keepalive = decode_frame(frame)
        assert isinstance(keepalive, Keepalive)
        self._written = max(self._written, keepalive.wal_end)
        if self._txn is None:
            # Every transaction not yet received commits in a record starting at or after wal_end.
            self._upper = max(self._upper, keepalive.wal_end + 1)
            if self._rewind is not None and keepalive.wal_end >= self._rewind.later:
                self._pending, self._rewind = self._rewind.batch(), None
        if keepalive.reply:
            self._status(now)

    def _message(self, payload: bytes) -> None:
        table = self.table
        insert = decode_insert(payload)  # the common case, first
        if insert is not None and insert[0] == table.oid and self._txn is not None:
            self._txn.append((self.row(insert[1]), 1))
            return
        msg = decode_message(payload)
        if isinstance(msg, Insert | Update | Delete):
            if msg.relation_id != table.oid:
                return
            txn = self._txn
            if txn is None:
                raise UpstreamProtocolViolation(f"a change outside a transaction: {msg!r}")
            if isinstance(msg, Insert):
                txn.append((self.row(msg.new), 1))
            elif isinstance(msg, Delete):
                txn.append((self.row(self._full_old(msg.old_kind, msg.old)), -1))
            else:
                old = self.row(self._full_old(msg.old_kind, msg.old))
                txn.append((old, -1))
                txn.append((self.row(msg.new, old), 1))
        elif isinstance(msg, Begin):
            self._txn = []
            self._txn_truncated = False
        elif isinstance(msg, Commit):
            self._commit(msg)
        elif isinstance(msg, Relation):
            if msg.relation_id == table.oid:
                self._check_relation(msg)
        elif isinstance(msg, Truncate) and table.oid in msg.relation_ids:
            self._txn_truncated = True
        # Origin, TypeInfo and LogicalMessage say nothing about the table's rows.

    def _commit(self, commit: Commit) -> None:
        """A transaction is complete: its updates join the batch at its end LSN (unless durable)."""
        txn = self._txn
        if txn is None:
            raise UpstreamProtocolViolation("a COMMIT without its BEGIN")
        self._txn = None
        end = commit.end_lsn
        self._written = max(self._written, end)
        if end >= self._resume:
            if self._txn_truncated:
                raise UpstreamTruncated(self.table.qualified, end)
            rewind = self._rewind
            if rewind is not None:
                if commit.commit_lsn < rewind.later:
                    rewind.undo(txn)
                else:
                    self._pending, self._rewind = rewind.batch(), None
            self._batch.extend([(row, end, diff) for row, diff in txn])
        self._upper = max(self._upper, end + 1)

    def _full_old(
        self, kind: str | None, old: tuple[ColumnValue, ...] | None
    ) -> Sequence[ColumnValue]:
        if kind != "O" or old is None:
            raise ReplicaIdentityNotFull(self.table.qualified, "without the old row")
        return old

    # -- rows ----------------------------------------------------------------------------

    def row(self, values: Sequence[Any], old: Row | None = None) -> Row:
        """A tidegate row from upstream text values (``old`` fills unchanged TOASTed columns);
        the snapshot's rows (``COPY`` text, ``None`` for NULL) come this way too."""
        parsers = self._parsers
        if len(values) != len(parsers) or UNCHANGED in values:
            return self._row_slowly(values, old)
        try:
            row = tuple([None if v is None else p(v) for p, v in zip(parsers, values, strict=True)])
        except (Unrepresentable, ValueError, TypeError):
            return self._row_slowly(values, old)
        for i in self._not_null:
            if row[i] is None:
                self._null_in_not_null(i)
        return row

    def _row_slowly(self, values: Sequence[Any], old: Row | None) -> Row:
        """:meth:`row` for the unusual: unchanged columns, or a value that does not parse."""
        table = self.table
        if len(values) != len(table.columns):
            raise UpstreamProtocolViolation(
                f"a row of {len(values)} columns for {table.qualified} of {len(table.columns)}"
            )
        row: list[Any] = []
        for i, (value, column, parse) in enumerate(
            zip(values, table.columns, self._parsers, strict=True)
        ):
            if value is UNCHANGED:
                if old is None:
                    raise UpstreamProtocolViolation(
                        f"an unchanged column {column.name!r} with no old row"
                    )
                row.append(old[i])
            elif value is None:
                if column.not_null:
                    self._null_in_not_null(i)
                row.append(None)
            elif not isinstance(value, str):
                raise UpstreamProtocolViolation(f"a binary value for column {column.name!r}")
            else:
                try:
                    row.append(parse(value))
                except (Unrepresentable, ValueError):
                    raise UpstreamValueUnrepresentable(
                        table.qualified, column.name, column.type_name, value
                    ) from None
        return tuple(row)

    def _null_in_not_null(self, i: int) -> None:
        name = self.table.columns[i].name
        raise UpstreamSchemaChanged(
            self.table.qualified, (f"column {name!r} holds NULL but was NOT NULL",)
        )

    def _check_relation(self, rel: Relation) -> None:
        table = self.table
        if rel.replica_identity != "f":
            raise ReplicaIdentityNotFull(
                table.qualified, _IDENTITIES.get(rel.replica_identity, rel.replica_identity)
            )
        same = [(c.name, c.type_oid, c.type_modifier) for c in table.columns] == [
            (c.name, c.type_oid, c.type_modifier) for c in rel.columns
        ]
        if same and (rel.namespace, rel.name) == (table.namespace, table.name):
            return
        changes: list[str] = []
        if (rel.namespace, rel.name) != (table.namespace, table.name):
            changes.append(f"renamed to {rel.namespace}.{rel.name}")
        if not same:
            changes.extend(self._relation_differences(rel))
        raise UpstreamSchemaChanged(table.qualified, tuple(changes))

    def _relation_differences(self, rel: Relation) -> tuple[str, ...]:
        names = {(c.type_oid, c.type_modifier): c.type_name for c in self.table.columns}
        unknown = [
            (c.type_oid, c.type_modifier)
            for c in rel.columns
            if (c.type_oid, c.type_modifier) not in names
        ]
        if unknown and self._type_names is not None:
            names.update(self._type_names(unknown))
        return differences(
            [(c.name, c.type_name) for c in self.table.columns],
            [
                (c.name, names.get((c.type_oid, c.type_modifier), f"type {c.type_oid}"))
                for c in rel.columns
            ],
        )


def _at(rows: Counter[Row], offset: int) -> tuple[SourceUpdate, ...]:
    return tuple((row, offset, n) for row, n in rows.items() if n)


class _Rewind:
    """A snapshot taken at ``later`` waiting to be rewound to ``point`` by the stream's changes."""

    __slots__ = ("later", "point", "rows", "size")

    def __init__(self, point: int, later: int, rows: Counter[Row], size: int) -> None:
        self.point = point
        self.later = later
        self.rows = rows
        self.size = size

    def undo(self, txn: Iterable[tuple[Row, int]]) -> None:
        """Take back a transaction the snapshot holds but the table at ``point`` did not."""
        for row, diff in txn:
            self.rows[row] -= diff

    def batch(self) -> SourceBatch:
        if any(n < 0 for n in self.rows.values()):
            raise UpstreamProtocolViolation(
                "the snapshot rewound by the stream holds a row a negative number of times"
            )
        return SourceBatch(_at(self.rows, self.point), self.point + 1, self.size)


def differences(
    before: Iterable[tuple[str, str]], after: Iterable[tuple[str, str]]
) -> tuple[str, ...]:
    """What changed between two column lists of ``(name, type)``: added, dropped, retyped, moved."""
    old, new = dict(before), dict(after)
    changes = [f"column {n!r} added ({t})" for n, t in new.items() if n not in old]
    changes += [f"column {n!r} dropped" for n in old if n not in new]
    changes += [
        f"column {n!r} changed from {t} to {new[n]}"
        for n, t in old.items()
        if n in new and new[n] != t
    ]
    if not changes and list(old) != list(new):
        changes.append(f"columns reordered from {list(old)} to {list(new)}")
    return tuple(changes)
