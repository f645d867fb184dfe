""":class:`PostgresReader`: one upstream table's changes as :class:`SourceBatch` es.

**Offsets** are PostgreSQL LSNs as ints. A fresh source creates its slot with
an exported snapshot and reads the table in that snapshot: every row is an
update ``(row, C, +1)`` at the slot's consistent point ``C``, all in one batch
with upper ``C + 1`` (a batch's updates are all below its upper, so the
snapshot cannot be split). Each later transaction that touches the table is
delivered whole, once its COMMIT arrives: inserts ``+1`` the new row, deletes
``-1`` the old row, updates ``-1`` the old and ``+1`` the new, all at the
transaction's commit end LSN ``E``, with upper ``E + 1``. Between
transactions, a keepalive saying the server has decoded everything up to
``W`` advances the upper to ``W + 1``: every transaction not yet delivered
commits in a WAL record starting at or after ``W``, so ends past it.

**Snapshot and stream meet exactly**: the exported snapshot holds precisely
the transactions whose commit record starts before ``C``, and the slot streams
precisely those whose commit record starts at or after it.

**Acks and resumption.** ``ack(offset)`` says everything below ``offset`` is
durable downstream: the reader reports ``offset - 1`` as flushed, so the slot's
confirmed position moves there and PostgreSQL may recycle older WAL. The
server skips, on a later ``START_REPLICATION``, exactly the transactions whose
commit record starts before the confirmed position -- those ending at or
before it (every upper is one past the end of a WAL record). So
``start(resume_offset)``:

* ``resume_offset == 0`` (nothing durable), or at most the slot's confirmed
  position (which, with acks as specified, means the snapshot was never
  durable): without a slot, create it and take its snapshot; with one, keep
  it and deliver the snapshot it was created with again, at the same ``C``:
  the table is snapshotted now (a temporary slot exports the snapshot, at
  ``S``) and *rewound* to ``C`` by subtracting the changes the slot streams
  between ``C`` and ``S`` (Materialize does the same). So a restart before the
  snapshot was durable re-derives the same updates at the same offsets, and
  bindings already minted for ``C + 1`` stay true;
* otherwise stream from ``resume_offset - 1`` and deliver only transactions
  ending at or after ``resume_offset`` -- exactly the suffix, the same updates
  at the same offsets as the first time;
* no slot but ``resume_offset > 0``: :class:`ReplicationSlotMissing`
  (re-creating it would lose the changes in between).

The snapshot batch is consolidated (one update per distinct row, its count
as the diff), so it is the same however it was derived.

**Refusals.** The table needs ``REPLICA IDENTITY FULL`` (updates and deletes
then carry the whole old row, so retractions are exact without the reader
keeping state), supported column types (:mod:`._types`), and a publication
that publishes all of its rows, columns and operations; the server needs
``wal_level = logical`` and a role with ``REPLICATION``. Each is a typed error
raised by :meth:`~PostgresReader.schema` or :meth:`~PostgresReader.start`
before anything is read. While streaming: a changed table (a new ``Relation``
message of another shape, or a NULL in a NOT NULL column) raises
:class:`UpstreamSchemaChanged` before any update of the new shape is returned;
a ``TRUNCATE`` raises :class:`UpstreamTruncated` (the reader keeps no state to
retract); a dropped table or publication, or a table taken out of the
publication, is noticed by a catalog check every ``table_check_interval_s``
(or by the server) -- the stream itself says nothing of them, so the upper may
pass a few transactions the publication no longer sent before the error.
Updates completed before an error are still returned; the error comes from the
next ``poll``, and from every one after it.

The snapshot (and each transaction) is one batch, held in memory whole.

The reader is synchronous and not thread-safe: one thread calls all its methods.
"""

from __future__ import annotations

import importlib.util
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

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
    UpstreamTableMissing,
    UpstreamTruncated,
    UpstreamUnreachable,
    UpstreamValueUnrepresentable,
)
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import PostgresSource, SourceBatch, SourceUpdate

from . import _catalog
from ._catalog import UpstreamTable, upstream_errors
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
)
from ._replication import ReplicationStream, ServerRefused
from ._types import PARSERS, TextParser, Unrepresentable

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresReader"]

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")
_XLOGDATA, _KEEPALIVE = 0x77, 0x6B
_XLOGDATA_HEADER = 25
_IDENTITIES = {"d": "default", "n": "nothing", "i": "using index", "f": "full"}


class PostgresReader:
    """Reads the table of ``connection`` through its publication and replication slot.

    ``expected_schema``: the schema the source was created with; if given, a
    table whose schema differs by now raises :class:`UpstreamSchemaChanged`
    from :meth:`schema`/:meth:`start`. ``connect_timeout_s`` bounds every
    connection attempt; ``status_interval_s`` is how often the server hears
    from the reader (its ``wal_sender_timeout`` must be longer);
    ``max_batch_updates`` where a batch stops taking more transactions (a
    snapshot or one transaction is never split); ``slot_busy_timeout_s`` how
    long :meth:`start` waits for a slot a previous connection still holds.
    """

    def __init__(
        self,
        connection: PostgresSource,
        *,
        expected_schema: Schema | None = None,
        connect_timeout_s: float = 10.0,
        status_interval_s: float = 1.0,
        table_check_interval_s: float = 5.0,
        max_batch_updates: int = 100_000,
        slot_busy_timeout_s: float = 10.0,
    ) -> None:
        if importlib.util.find_spec("psycopg") is None:
            raise ModuleNotFoundError(
                "the PostgreSQL source needs psycopg: pip install 'tidegate[postgres]'"
            )
        if not _SLOT_NAME.fullmatch(connection.slot):
            raise SourceConfigurationInvalid(
                "replication slot name",
                connection.slot,
                "slot names are 1 to 63 lower-case letters, digits and underscores",
            )
        self._source = connection
        self._expected = expected_schema
        self._connect_timeout_s = connect_timeout_s
        self._status_interval_s = status_interval_s
        self._table_check_interval_s = table_check_interval_s
        self._max_batch = max_batch_updates
        self._slot_busy_timeout_s = slot_busy_timeout_s
        self._meta: psycopg.Connection[Any] | None = None
        self._stream: ReplicationStream | None = None
        self._table: UpstreamTable | None = None
        self._state = "new"
        self._error: SourceError | None = None
        # What has been delivered and acked, as offsets / LSNs.
        self._resume = 0
        self._upper = 0
        self._reported = 0
        self._flushed = 0
        self._written = 0
        self._consistent_point: int | None = None
        # Work in progress.
        self._pending: SourceBatch | None = None
        self._rewind: _Rewind | None = None
        self._bytes = 0
        self._batch: list[SourceUpdate] = []
        self._txn: list[tuple[Row, int]] | None = None
        self._txn_truncated = False
        self._last_status = 0.0
        self._last_check = 0.0

    # -- the source's shape -------------------------------------------------------------

    def schema(self) -> Schema:
        """The table's rows as tidegate sees them; checks everything :meth:`start` needs first."""
        return self._describe().schema()

    @property
    def upper(self) -> int:
        """The upper of the last batch returned (the resume offset right after :meth:`start`)."""
        return self._reported

    @property
    def consistent_point(self) -> int | None:
        """The snapshot's offset ``C``, if :meth:`start` took a snapshot."""
        return self._consistent_point

    def _meta_conn(self) -> psycopg.Connection[Any]:
        if self._meta is None or self._meta.closed:
            self._meta = _catalog.connect(self._source.url, self._connect_timeout_s)
        return self._meta

    def _describe(self) -> UpstreamTable:
        if self._state == "closed":
            raise SourceReaderMisused("the reader is closed")
        meta = self._meta_conn()
        with upstream_errors(self._source.url):
            _catalog.check_server(meta)
            table = _catalog.describe_table(meta, self._source.table)
            _catalog.check_publication(meta, self._source.publication, table)
        if self._expected is not None and table.schema() != self._expected:
            raise UpstreamSchemaChanged(
                table.qualified,
                _differences(
                    [(c.name, str(c.type)) for c in self._expected.columns],
                    [(c.name, str(c.type)) for c in table.schema().columns],
                ),
            )
        return table

    # -- start ---------------------------------------------------------------------------

    def start(self, resume_offset: int) -> None:
        """Start reading at ``resume_offset`` (everything below it is durable downstream; 0: nothing)."""
        if self._state != "new":
            raise SourceReaderMisused(f"start() on a reader that is {self._state}")
        if type(resume_offset) is not int or resume_offset < 0:
            raise SourceReaderMisused(f"resume offset {resume_offset!r} is not a non-negative int")
        table = self._describe()
        self._use_table(table)
        self._pending, self._rewind, self._consistent_point = None, None, None
        meta = self._meta_conn()
        slot_name = self._source.slot
        with upstream_errors(self._source.url):
            slot = _catalog.find_slot(meta, slot_name)
        if slot is not None and not (
            slot.logical and slot.plugin == "pgoutput" and slot.this_database
        ):
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
        self._reported = resume_offset
        stream = ReplicationStream(self._source.url, self._connect_timeout_s)
        try:
            if not snapshot:
                start_lsn, self._flushed = resume_offset - 1, confirmed
                self._resume = self._upper = resume_offset
            elif slot is None or slot.lost:
                if slot is not None:
                    self.drop_slot()
                start_lsn = self._fresh_snapshot(stream, table)
            else:
                start_lsn = self._rewound_snapshot(confirmed, table)
            self._start_streaming(stream, start_lsn)
        except BaseException:
            stream.close()
            raise
        self._stream = stream
        self._written = max(self._flushed, start_lsn)
        self._last_status = self._last_check = time.monotonic()
        self._state = "started"

    def _use_table(self, table: UpstreamTable) -> None:
        self._table = table
        self._parsers: list[TextParser] = [PARSERS[c.scalar] for c in table.columns]
        self._not_null = [i for i, c in enumerate(table.columns) if c.not_null]

    def drop_slot(self) -> None:
        """Drop the source's replication slot, if there is one: the upstream keeps WAL for a
        slot until it is dropped. Waits up to ``slot_busy_timeout_s`` while another
        connection still streams from it (a reader being stopped), then raises
        :class:`ReplicationSlotInUse`."""
        import psycopg

        meta = self._meta_conn()
        deadline = time.monotonic() + self._slot_busy_timeout_s
        with upstream_errors(self._source.url):
            while True:
                try:
                    meta.execute("SELECT pg_drop_replication_slot(%s)", (self._source.slot,))
                    return
                except psycopg.errors.UndefinedObject:
                    return
                except psycopg.errors.ObjectInUse as e:
                    if time.monotonic() >= deadline:
                        raise ReplicationSlotInUse(self._source.slot, str(e).strip()) from e
                time.sleep(0.1)

    def _fresh_snapshot(self, stream: ReplicationStream, table: UpstreamTable) -> int:
        """Create the slot and read the table in its exported snapshot; the consistent point ``C``."""
        try:
            point, name = stream.create_slot(self._source.slot)
        except ServerRefused as e:
            raise self._refusal(e) from e
        rows, size = self._read_snapshot(name, table)
        self._pending = SourceBatch(_at(rows, point), point + 1, size)
        self._begin_at(point)
        return point

    def _rewound_snapshot(self, point: int, table: UpstreamTable) -> int:
        """Snapshot the table now (at ``S``), to be rewound to the slot's position ``C``.

        The slot cannot export a snapshot again, so a temporary slot exports one
        at its own consistent point ``S > C``. Streaming the slot from ``C``
        then yields every transaction in the snapshot but not at ``C``: those
        whose commit record starts before ``S``. The batch at ``C`` is the
        snapshot less their changes, which is the table at ``C``, exactly what
        a snapshot taken when the slot was created held.
        """
        temporary = ReplicationStream(self._source.url, self._connect_timeout_s)
        try:
            try:
                later, name = temporary.create_slot(
                    f"tidegate_rewind_{uuid.uuid4().hex[:16]}", temporary=True
                )
            except ServerRefused as e:
                raise self._refusal(e) from e
            rows, size = self._read_snapshot(name, table)
        finally:
            temporary.close()  # drops the temporary slot
        self._rewind = _Rewind(point, later, rows, size)
        self._begin_at(point)
        return point

    def _begin_at(self, point: int) -> None:
        self._consistent_point = point
        self._resume = self._upper = point + 1
        self._flushed = point

    def _read_snapshot(self, name: str, table: UpstreamTable) -> tuple[Counter[Row], int]:
        """The table's rows (and their text's size) in exported snapshot ``name``."""
        from psycopg import sql

        meta = self._meta_conn()
        rows: Counter[Row] = Counter()
        size = 0
        with upstream_errors(self._source.url), meta.transaction():
            meta.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            meta.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))
            now = _catalog.describe_table(meta, self._source.table)
            if now != table:
                raise UpstreamSchemaChanged(table.qualified, self._column_differences(now))
            query = sql.SQL("COPY (SELECT {} FROM ONLY {}) TO STDOUT").format(
                sql.SQL(", ").join(sql.Identifier(c.name) for c in table.columns),
                sql.Identifier(table.namespace, table.name),
            )
            with meta.cursor().copy(query) as copy:
                copy.set_types(["text"] * len(table.columns))
                for values in copy.rows():
                    rows[self._row(values)] += 1
                    size += sum(2 if v is None else len(v) for v in values) + len(values)
        return rows, size

    def _start_streaming(self, stream: ReplicationStream, start_lsn: int) -> None:
        deadline = time.monotonic() + self._slot_busy_timeout_s
        while True:
            try:
                stream.start(self._source.slot, start_lsn, self._source.publication)
                return
            except ServerRefused as e:
                if e.sqlstate != "55006" or time.monotonic() >= deadline:
                    raise self._refusal(e) from e
                time.sleep(0.1)

    def _refusal(self, e: ServerRefused) -> SourceError:
        """The typed error for a refused replication command (or a stream the server ended)."""
        slot = self._source.slot
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
                return PublicationMissing(self._source.publication)
            if "slot" in e.message:
                return ReplicationSlotMissing(slot, self._resume)
        if e.sqlstate == "55000" and "wal_level" in e.message:
            return SourceConfigurationInvalid("wal_level", "not logical", e.message)
        if e.sqlstate.startswith(("08", "57")):  # connection failures, a server shutting down
            return UpstreamUnreachable(_catalog.server_name(self._source.url), e.message)
        return SourceConfigurationInvalid("replication", f"refused ({e.sqlstate})", e.message)

    # -- poll ----------------------------------------------------------------------------

    def poll(self, timeout_s: float) -> SourceBatch | None:
        """The next batch, waiting up to ``timeout_s`` for one; ``None`` if nothing new came.

        A batch holds whole transactions and an upper past them (or only a
        higher upper). Raises the typed error of a broken source, after first
        returning what was complete before it broke.
        """
        if self._state != "started":
            raise SourceReaderMisused(f"poll() on a reader that is {self._state}")
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            now = time.monotonic()
            if self._error is None:
                self._housekeeping(now)
            batch = self._deliverable()
            if batch is not None:
                return batch
            if self._error is not None:
                raise self._error
            self._read_available()
            if self._error is not None or self._pending is not None:
                continue
            if self._rewind is None and (self._batch or self._upper > self._reported):
                continue
            if now >= deadline:
                return None
            assert self._stream is not None
            try:
                self._stream.wait(min(deadline - now, self._status_interval_s))
            except SourceError as e:
                self._error = e

    def _housekeeping(self, now: float) -> None:
        """Tell the server the reader is alive; check the table is still there, when due."""
        try:
            if now - self._last_status >= self._status_interval_s:
                self._send_status(now)
            if now - self._last_check >= self._table_check_interval_s:
                self._last_check = now
                self._check_table()
        except SourceError as e:
            self._error = e

    def _deliverable(self) -> SourceBatch | None:
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

    def _read_available(self) -> None:
        """Take in every frame already received (until a batch is full); an error is kept for later."""
        stream = self._stream
        assert stream is not None
        try:
            while (
                len(self._batch) < self._max_batch
                or self._txn is not None
                or self._rewind is not None
            ):
                frame = stream.read_frame()
                if frame is None:
                    return
                self._bytes += len(frame)
                tag = frame[0]
                if tag == _XLOGDATA:
                    self._message(frame[_XLOGDATA_HEADER:])
                elif tag == _KEEPALIVE:
                    self._keepalive(frame)
                else:
                    decode_frame(frame)  # raises UpstreamProtocolViolation
        except ServerRefused as e:
            self._error = self._refusal(e)
        except SourceError as e:
            self._error = e
        if self._error is not None:
            self._txn = None

    def _keepalive(self, frame: bytes) -> None:
        keepalive = decode_frame(frame)
        assert isinstance(keepalive, Keepalive)
        self._written = max(self._written, keepalive.wal_end)
        if self._txn is None:
            # Every transaction not yet received commits in a record starting at or after wal_end.
            self._upper = max(self._upper, keepalive.wal_end + 1)
            if self._rewind is not None and keepalive.wal_end >= self._rewind.later:
                self._pending, self._rewind = self._rewind.batch(), None
        if keepalive.reply:
            self._send_status(time.monotonic())

    def _message(self, payload: bytes) -> None:
        table = self._table
        assert table is not None
        insert = decode_insert(payload)  # the common case, first
        if insert is not None and insert[0] == table.oid and self._txn is not None:
            self._txn.append((self._row(insert[1]), 1))
            return
        msg = decode_message(payload)
        if isinstance(msg, Insert | Update | Delete):
            if msg.relation_id != table.oid:
                return
            txn = self._txn
            if txn is None:
                raise UpstreamProtocolViolation(f"a change outside a transaction: {msg!r}")
            if isinstance(msg, Insert):
                txn.append((self._row(msg.new), 1))
            elif isinstance(msg, Delete):
                txn.append((self._row(self._full_old(msg.old_kind, msg.old)), -1))
            else:
                old = self._row(self._full_old(msg.old_kind, msg.old))
                txn.append((old, -1))
                txn.append((self._row(msg.new, old), 1))
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
                assert self._table is not None
                raise UpstreamTruncated(self._table.qualified, end)
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
            assert self._table is not None
            raise ReplicaIdentityNotFull(self._table.qualified, "without the old row")
        return old

    def _row(self, values: Sequence[ColumnValue], old: Row | None = None) -> Row:
        """A tidegate row from upstream text values (``old`` fills unchanged TOASTed columns)."""
        parsers = self._parsers
        if len(values) != len(parsers) or UNCHANGED in values:
            return self._row_slowly(values, old)
        try:
            row = tuple([None if v is None else p(v) for p, v in zip(parsers, values, strict=True)])  # type: ignore[arg-type]
        except (Unrepresentable, ValueError, TypeError):
            return self._row_slowly(values, old)
        for i in self._not_null:
            if row[i] is None:
                self._null_in_not_null(i)
        return row

    def _row_slowly(self, values: Sequence[ColumnValue], old: Row | None) -> Row:
        """:meth:`_row` for the unusual: unchanged columns, or a value that does not parse."""
        table = self._table
        assert table is not None
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
        assert self._table is not None
        name = self._table.columns[i].name
        raise UpstreamSchemaChanged(
            self._table.qualified, (f"column {name!r} holds NULL but was NOT NULL",)
        )

    def _check_relation(self, rel: Relation) -> None:
        table = self._table
        assert table is not None
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
        import psycopg

        assert self._table is not None
        names = {(c.type_oid, c.type_modifier): c.type_name for c in self._table.columns}
        try:
            meta = self._meta_conn()
            for c in rel.columns:
                key = (c.type_oid, c.type_modifier)
                if key not in names:
                    row = meta.execute("SELECT format_type(%s, %s)", key).fetchone()
                    names[key] = str(row[0]) if row else f"type {c.type_oid}"
        except (SourceError, psycopg.Error):  # the names only decorate the message
            pass
        return _differences(
            [(c.name, c.type_name) for c in self._table.columns],
            [
                (c.name, names.get((c.type_oid, c.type_modifier), f"type {c.type_oid}"))
                for c in rel.columns
            ],
        )

    def _column_differences(self, now: UpstreamTable) -> tuple[str, ...]:
        assert self._table is not None
        return _differences(
            [(c.name, c.type_name) for c in self._table.columns],
            [(c.name, c.type_name) for c in now.columns],
        ) or ("the table was replaced",)

    def _check_table(self) -> None:
        """The table and its publication are still there (the stream says nothing of a drop)."""
        table = self._table
        assert table is not None
        meta = self._meta_conn()
        with upstream_errors(self._source.url):
            found = meta.execute("SELECT 1 FROM pg_class WHERE oid = %s", (table.oid,)).fetchone()
            if found is None:
                raise UpstreamTableMissing(table.qualified, "was dropped")
            _catalog.check_publication(meta, self._source.publication, table)

    # -- ack and close -------------------------------------------------------------------

    def ack(self, offset: int) -> None:
        """Everything below ``offset`` is durable downstream: let the slot's confirmed position move there."""
        if self._state != "started":
            raise SourceReaderMisused(f"ack() on a reader that is {self._state}")
        if type(offset) is not int or offset > self._reported:
            raise SourceReaderMisused(
                f"ack({offset!r}) beyond the upper delivered so far ({self._reported})"
            )
        if offset - 1 > self._flushed:
            self._flushed = offset - 1
            self._send_status(time.monotonic())

    def _send_status(self, now: float) -> None:
        assert self._stream is not None
        self._stream.send_status(max(self._written, self._flushed), self._flushed)
        self._last_status = now

    def close(self) -> None:
        """Close the connections (without acking anything more). Idempotent."""
        self._state = "closed"
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._meta is not None:
            self._meta.close()
            self._meta = None

    def __enter__(self) -> PostgresReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _differences(
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
