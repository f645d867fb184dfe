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

It is a thin driver: the protocol logic (decoding, transaction assembly, the
LSN bookkeeping, the snapshot's rewind, the checks of ``Relation`` messages,
when to send status) is :class:`~._core.ReplicationCore`, which does no IO and
which the simulator drives over a simulated upstream's bytes. The reader does
the IO around it: the catalog checks, the slot, the snapshot's ``COPY``, the
replication connection's frames and status updates, and the clock.
"""

from __future__ import annotations

import importlib.util
import re
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tidegate.spec.errors import (
    ReplicationSlotInUse,
    SourceConfigurationInvalid,
    SourceError,
    SourceReaderMisused,
    UpstreamSchemaChanged,
    UpstreamTableMissing,
)
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import PostgresSource, SourceBatch

from . import _catalog
from ._catalog import UpstreamTable, upstream_errors
from ._core import ReplicationCore, ServerRefused, differences, plan_start
from ._replication import ReplicationStream

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresReader"]

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


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
        self._core: ReplicationCore | None = None
        self._state = "new"
        self._last_check = 0.0

    # -- the source's shape -------------------------------------------------------------

    def schema(self) -> Schema:
        """The table's rows as tidegate sees them; checks everything :meth:`start` needs first."""
        return self._describe().schema()

    @property
    def upper(self) -> int:
        """The upper of the last batch returned (the resume offset right after :meth:`start`)."""
        return self._core.reported if self._core is not None else 0

    @property
    def consistent_point(self) -> int | None:
        """The snapshot's offset ``C``, if :meth:`start` took a snapshot."""
        return self._core.consistent_point if self._core is not None else None

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
        if self._expected is not None:
            table = table.as_created(self._expected)
        if self._expected is not None and table.schema() != self._expected:
            raise UpstreamSchemaChanged(
                table.qualified,
                differences(
                    [(c.name, str(c.type)) for c in self._expected.columns],
                    [(c.name, str(c.type)) for c in table.schema().columns],
                ),
            )
        return table

    def _type_names(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], str]:
        """The server's names of types (only to word a changed relation's error)."""
        import psycopg

        names: dict[tuple[int, int], str] = {}
        try:
            meta = self._meta_conn()
            for key in keys:
                row = meta.execute("SELECT format_type(%s, %s)", key).fetchone()
                if row:
                    names[key] = str(row[0])
        except (SourceError, psycopg.Error):  # the names only decorate the message
            pass
        return names

    # -- start ---------------------------------------------------------------------------

    def start(self, resume_offset: int) -> None:
        """Start reading at ``resume_offset`` (everything below it is durable downstream; 0: nothing)."""
        if self._state != "new":
            raise SourceReaderMisused(f"start() on a reader that is {self._state}")
        if type(resume_offset) is not int or resume_offset < 0:  # before any IO
            raise SourceReaderMisused(f"resume offset {resume_offset!r} is not a non-negative int")
        table = self._describe()
        core = self._core = ReplicationCore(
            table,
            slot=self._source.slot,
            publication=self._source.publication,
            server=_catalog.server_name(self._source.url),
            max_batch_updates=self._max_batch,
            status_interval_s=self._status_interval_s,
            type_names=self._type_names,
        )
        meta = self._meta_conn()
        with upstream_errors(self._source.url):
            slot = _catalog.find_slot(meta, self._source.slot)
        plan = plan_start(self._source.slot, resume_offset, slot)
        stream = ReplicationStream(self._source.url, self._connect_timeout_s)
        try:
            if plan.kind == "resume":
                start_lsn = core.resume(resume_offset, plan.confirmed)
            elif plan.kind == "fresh":
                if plan.drop_lost:
                    self.drop_slot()
                start_lsn = self._fresh_snapshot(stream, table, resume_offset)
            else:
                start_lsn = self._rewound_snapshot(plan.confirmed, table, resume_offset)
            self._start_streaming(stream, start_lsn)
        except BaseException:
            stream.close()
            raise
        self._stream = stream
        now = time.monotonic()
        core.started(start_lsn, now)
        self._last_check = now
        self._state = "started"

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

    def _fresh_snapshot(
        self, stream: ReplicationStream, table: UpstreamTable, resume_offset: int
    ) -> int:
        """Create the slot and read the table in its exported snapshot; the consistent point ``C``."""
        core = self._core
        assert core is not None
        try:
            point, name = stream.create_slot(self._source.slot)
        except ServerRefused as e:
            raise core.refusal(e) from e
        rows, size = self._read_snapshot(name, table)
        return core.fresh_snapshot(resume_offset, point, rows, size)

    def _rewound_snapshot(self, point: int, table: UpstreamTable, resume_offset: int) -> int:
        """Snapshot the table now (at ``S``), to be rewound to the slot's position ``C``.

        The slot cannot export a snapshot again, so a temporary slot exports one
        at its own consistent point ``S > C``. Streaming the slot from ``C``
        then yields every transaction in the snapshot but not at ``C``: those
        whose commit record starts before ``S``. The batch at ``C`` is the
        snapshot less their changes, which is the table at ``C``, exactly what
        a snapshot taken when the slot was created held.
        """
        core = self._core
        assert core is not None
        temporary = ReplicationStream(self._source.url, self._connect_timeout_s)
        try:
            try:
                later, name = temporary.create_slot(
                    f"tidegate_rewind_{uuid.uuid4().hex[:16]}", temporary=True
                )
            except ServerRefused as e:
                raise core.refusal(e) from e
            rows, size = self._read_snapshot(name, table)
        finally:
            temporary.close()  # drops the temporary slot
        return core.rewound_snapshot(resume_offset, point, later, rows, size)

    def _read_snapshot(self, name: str, table: UpstreamTable) -> tuple[Counter[Row], int]:
        """The table's rows (and their text's size) in exported snapshot ``name``."""
        from psycopg import sql

        core = self._core
        assert core is not None
        meta = self._meta_conn()
        rows: Counter[Row] = Counter()
        size = 0
        with upstream_errors(self._source.url), meta.transaction():
            meta.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            meta.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))
            now = _catalog.describe_table(meta, self._source.table)
            if self._expected is not None:
                now = now.as_created(self._expected)
            if now != table:
                raise UpstreamSchemaChanged(table.qualified, _column_differences(table, now))
            query = sql.SQL("COPY (SELECT {} FROM ONLY {}) TO STDOUT").format(
                sql.SQL(", ").join(sql.Identifier(c.name) for c in table.columns),
                sql.Identifier(table.namespace, table.name),
            )
            with meta.cursor().copy(query) as copy:
                copy.set_types(["text"] * len(table.columns))
                for values in copy.rows():
                    rows[core.row(values)] += 1
                    size += sum(2 if v is None else len(v) for v in values) + len(values)
        return rows, size

    def _start_streaming(self, stream: ReplicationStream, start_lsn: int) -> None:
        core = self._core
        assert core is not None
        deadline = time.monotonic() + self._slot_busy_timeout_s
        while True:
            try:
                stream.start(self._source.slot, start_lsn, self._source.publication)
                return
            except ServerRefused as e:
                if e.sqlstate != "55006" or time.monotonic() >= deadline:
                    raise core.refusal(e) from e
                time.sleep(0.1)

    # -- poll ----------------------------------------------------------------------------

    def poll(self, timeout_s: float) -> SourceBatch | None:
        """The next batch, waiting up to ``timeout_s`` for one; ``None`` if nothing new came.

        A batch holds whole transactions and an upper past them (or only a
        higher upper). Raises the typed error of a broken source, after first
        returning what was complete before it broke.
        """
        if self._state != "started":
            raise SourceReaderMisused(f"poll() on a reader that is {self._state}")
        core = self._core
        assert core is not None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            now = time.monotonic()
            if core.error is None:
                self._housekeeping(now)
            batch = core.deliverable()
            if batch is not None:
                return batch
            if core.error is not None:
                raise core.error
            self._read_available()
            if core.has_news():
                continue
            if now >= deadline:
                return None
            assert self._stream is not None
            try:
                self._stream.wait(min(deadline - now, self._status_interval_s))
            except SourceError as e:
                core.fail(e)

    def _housekeeping(self, now: float) -> None:
        """Tell the server the reader is alive; check the table is still there, when due."""
        core = self._core
        assert core is not None
        try:
            core.tick(now)
            self._send_status()
            if now - self._last_check >= self._table_check_interval_s:
                self._last_check = now
                self._check_table()
        except SourceError as e:
            core.fail(e)

    def _read_available(self) -> None:
        """Take in every frame already received (until a batch is full); an error is kept for later."""
        stream, core = self._stream, self._core
        assert stream is not None and core is not None
        try:
            while core.wants_frames():
                frame = stream.read_frame()
                if frame is None:
                    break
                core.receive(frame, time.monotonic())
            self._send_status()  # a keepalive may have asked for one
        except ServerRefused as e:
            core.fail(core.refusal(e))
        except SourceError as e:
            core.fail(e)

    def _send_status(self) -> None:
        """Send the status updates the core has queued."""
        core, stream = self._core, self._stream
        assert core is not None and stream is not None
        for status in core.take_status():
            stream.send_status(status.written, status.flushed)

    def _check_table(self) -> None:
        """The table and its publication are still there (the stream says nothing of a drop)."""
        assert self._core is not None
        table = self._core.table
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
        assert self._core is not None
        self._core.ack(offset, time.monotonic())
        self._send_status()

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


def _column_differences(before: UpstreamTable, now: UpstreamTable) -> tuple[str, ...]:
    return differences(
        [(c.name, c.type_name) for c in before.columns],
        [(c.name, c.type_name) for c in now.columns],
    ) or ("the table was replaced",)
