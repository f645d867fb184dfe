"""``PostgresReader`` against a real PostgreSQL server (the ``postgres_url`` cluster, wal_level=logical).

Every test gets its own table, publication and slot. The reader's status
interval is short so keepalives (which move a quiet source's upper) come often.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from postgres_cluster import free_port, postgres_cluster

from tidegate.runtime.sources.postgres import PostgresReader
from tidegate.spec.errors import (
    PublicationMissing,
    ReplicaIdentityNotFull,
    ReplicationSlotInUse,
    ReplicationSlotMissing,
    SourceConfigurationInvalid,
    SourceReaderMisused,
    TableNotPublished,
    UnsupportedUpstreamType,
    UpstreamSchemaChanged,
    UpstreamTableMissing,
    UpstreamTruncated,
    UpstreamUnreachable,
    UpstreamValueUnrepresentable,
)
from tidegate.spec.plan.schema import ColumnType, Schema
from tidegate.spec.storage.connections import PostgresSource, SourceBatch, SourceUpdate

pytestmark = pytest.mark.postgres

COLUMNS = (
    "id bigint NOT NULL, i2 smallint, i4 integer, f4 real, f8 double precision, "
    "t text, vc varchar(10), ch char(3), b boolean, d date, ts timestamp, n numeric, "
    "n2 numeric(12,3)"
)
SCHEMA = Schema.of(
    ("id", "int64", False),
    ("i2", "int16"),
    ("i4", "int32"),
    ("f4", "float32"),
    ("f8", "float64"),
    ("t", "string"),
    ("vc", "string"),
    ("ch", "string"),
    ("b", "bool"),
    ("d", "date"),
    ("ts", "timestamp"),
    ("n", "numeric"),
    ("n2", "numeric"),
)
_names = itertools.count()


@dataclass
class Upstream:
    """One test's table, publication and slot on the session's cluster."""

    url: str
    conn: psycopg.Connection[Any]
    table: str
    publication: str
    slot: str

    @property
    def source(self) -> PostgresSource:
        return PostgresSource(self.url, self.table, self.publication, self.slot)

    def reader(self, **options: Any) -> PostgresReader:
        options.setdefault("status_interval_s", 0.05)
        options.setdefault("table_check_interval_s", 0.2)
        options.setdefault("slot_busy_timeout_s", 5.0)
        return PostgresReader(self.source, **options)

    def sql(self, *statements: str) -> None:
        """Run the statements in one transaction."""
        with self.conn.transaction():
            for s in statements:
                self.conn.execute(s)

    def drop_slot(self) -> None:
        """Drop the slot once the server has noticed its last reader is gone."""
        for _ in range(100):
            try:
                self.conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    (self.slot,),
                )
                return
            except psycopg.errors.ObjectInUse:
                time.sleep(0.05)
        raise AssertionError(f"slot {self.slot} stayed in use")

    def confirmed_flush(self) -> int | None:
        row = self.conn.execute(
            "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
            (self.slot,),
        ).fetchone()
        return None if row is None else int(row[0])

    def wal_position(self) -> int:
        row = self.conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
def upstream(postgres_url: str) -> Iterator[Upstream]:
    n = next(_names)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        up = Upstream(postgres_url, conn, f"src_{n}", f"pub_{n}", f"slot_{n}")
        conn.execute(f"CREATE TABLE {up.table} ({COLUMNS})")
        conn.execute(f"ALTER TABLE {up.table} REPLICA IDENTITY FULL")
        conn.execute(f"CREATE PUBLICATION {up.publication} FOR TABLE {up.table}")
        yield up
        up.drop_slot()
        conn.execute(f"DROP PUBLICATION IF EXISTS {up.publication}")
        conn.execute(f"DROP TABLE IF EXISTS {up.table}")


def _row(id: int, **values: Any) -> tuple[Any, ...]:
    return (id, *(values.get(c.name) for c in SCHEMA.columns[1:]))


def _read_until(
    reader: PostgresReader, done: Callable[[list[SourceUpdate], int], bool], timeout_s: float = 10
) -> tuple[list[SourceUpdate], list[SourceBatch]]:
    """Poll until ``done(updates so far, upper)``; the updates and the batches."""
    updates: list[SourceUpdate] = []
    batches: list[SourceBatch] = []
    deadline = time.monotonic() + timeout_s
    while not done(updates, reader.upper):
        assert time.monotonic() < deadline, f"timed out with {len(updates)} updates"
        batch = reader.poll(0.2)
        if batch is not None:
            assert batch.upper >= (batches[-1].upper if batches else 0)
            assert all(offset < batch.upper for _, offset, _ in batch.updates)
            batches.append(batch)
            updates.extend(batch.updates)
    return updates, batches


def _upper_past(position: int) -> Callable[[list[SourceUpdate], int], bool]:
    return lambda _updates, upper: upper > position


def _count(n: int) -> Callable[[list[SourceUpdate], int], bool]:
    return lambda updates, _upper: len(updates) >= n


# -- shape ----------------------------------------------------------------------------------


def test_schema_maps_every_supported_type(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        assert reader.schema() == SCHEMA


@pytest.mark.parametrize(
    ("column", "type_name"),
    [
        ("u uuid", "uuid"),
        ("j jsonb", "jsonb"),
        ("tz timestamp with time zone", "timestamp with time zone"),
        ("a integer[]", "integer[]"),
    ],
)
def test_an_unsupported_type_is_refused_before_anything_is_read(
    upstream: Upstream, column: str, type_name: str
) -> None:
    upstream.sql(f"ALTER TABLE {upstream.table} ADD COLUMN {column}")
    with upstream.reader() as reader, pytest.raises(UnsupportedUpstreamType) as e:
        reader.start(0)
    assert (e.value.column, e.value.type_name) == (column.split()[0], type_name)
    assert upstream.confirmed_flush() is None  # no slot was created


def test_replica_identity_must_be_full(upstream: Upstream) -> None:
    upstream.sql(f"ALTER TABLE {upstream.table} REPLICA IDENTITY DEFAULT")
    with upstream.reader() as reader, pytest.raises(ReplicaIdentityNotFull, match="FULL"):
        reader.schema()


def test_a_missing_table_is_a_typed_error(upstream: Upstream) -> None:
    missing = PostgresSource(upstream.url, "no_such_table", upstream.publication, upstream.slot)
    with PostgresReader(missing) as reader, pytest.raises(UpstreamTableMissing):
        reader.start(0)


def test_a_missing_publication_is_a_typed_error(upstream: Upstream) -> None:
    upstream.sql(f"DROP PUBLICATION {upstream.publication}")
    with upstream.reader() as reader, pytest.raises(PublicationMissing):
        reader.start(0)


@pytest.mark.parametrize(
    ("alter", "missing"),
    [
        ("DROP TABLE {table}", "the table"),
        ("SET (publish = 'insert, update')", "delete, truncate"),
        ("SET TABLE {table} WHERE (id > 0)", "row filter"),
        ("SET TABLE {table} (id, t)", "i2"),
    ],
)
def test_a_publication_must_publish_the_whole_table(
    upstream: Upstream, alter: str, missing: str
) -> None:
    upstream.sql(f"ALTER PUBLICATION {upstream.publication} " + alter.format(table=upstream.table))
    with upstream.reader() as reader, pytest.raises(TableNotPublished, match=missing):
        reader.start(0)


def test_an_unreachable_server_is_a_retryable_typed_error() -> None:
    source = PostgresSource(
        f"postgresql://tidegate@127.0.0.1:{free_port()}/postgres", "t", "p", "s"
    )
    with PostgresReader(source, connect_timeout_s=2) as reader:
        t0 = time.monotonic()
        with pytest.raises(UpstreamUnreachable) as e:
            reader.start(0)
    assert e.value.retryable and time.monotonic() - t0 < 5
    assert "127.0.0.1" in e.value.where


def test_wal_level_must_be_logical() -> None:
    with (
        postgres_cluster({"wal_level": "replica"}) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        conn.execute("CREATE TABLE t (id bigint)")
        conn.execute("ALTER TABLE t REPLICA IDENTITY FULL")
        conn.execute("CREATE PUBLICATION p FOR TABLE t")
        with (
            PostgresReader(PostgresSource(url, "t", "p", "s")) as reader,
            pytest.raises(SourceConfigurationInvalid) as e,
        ):
            reader.start(0)
        assert (e.value.setting, e.value.value) == ("wal_level", "replica")


def test_a_bad_slot_name_is_refused_up_front(upstream: Upstream) -> None:
    bad = PostgresSource(upstream.url, upstream.table, upstream.publication, "Bad-Slot")
    with pytest.raises(SourceConfigurationInvalid, match="slot"):
        PostgresReader(bad)


# -- snapshot and stream --------------------------------------------------------------------

EVERY_TYPE = _row(
    1,
    i2=-32768,
    i4=2147483647,
    f4=1.100000023841858,  # 1.1 as a real: the single the reader reads back
    f8=-0.0,
    t="tab\tnewline\nback\\slash 'quote' ünïcødé",
    vc="ten chars!",
    ch="ab ",
    b=True,
    d=dt.date(1, 1, 1),
    ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    n=Decimal("-123456789012345678901234567890.000000000000000000001"),
    n2=Decimal("1.5"),  # PostgreSQL writes 1.500: the value is the number
)
EDGES = [
    EVERY_TYPE,
    _row(2),  # every nullable column NULL
    _row(-(2**63), f8=5e-324, d=dt.date(9999, 12, 31), ts=dt.datetime(2000, 1, 1), b=False),
    _row(2**63 - 1, f8=1.7976931348623157e308, t="", ch="x", n=Decimal("1E-30"), n2=Decimal(0)),
]


def _insert(up: Upstream, rows: list[tuple[Any, ...]]) -> None:
    with up.conn.transaction(), up.conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {up.table} VALUES ({', '.join(['%s'] * len(SCHEMA.columns))})", rows
        )


def _pad(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``char(3)`` pads with blanks."""
    i = SCHEMA.index("ch")
    return row if row[i] is None else (*row[:i], row[i].ljust(3), *row[i + 1 :])


def test_snapshot_then_stream_every_type_and_null(upstream: Upstream) -> None:
    _insert(upstream, EDGES)
    with upstream.reader() as reader:
        reader.start(0)
        snapshot = reader.poll(5)
        assert snapshot is not None
        c = reader.consistent_point
        assert c is not None and snapshot.upper == c + 1
        assert Counter(snapshot.updates) == Counter((_pad(r), c, 1) for r in EDGES)
        # The same values inserted after the snapshot stream as the same rows.
        streamed = [(-r[0] if r[0] > 0 else r[0] + 10, *r[1:]) for r in EDGES]
        _insert(upstream, streamed)
        updates, _ = _read_until(reader, _count(len(EDGES)))
    (offset,) = {o for _, o, _ in updates}
    assert offset > c
    assert Counter((row, d) for row, _, d in updates) == Counter((_pad(r), 1) for r in streamed)


def test_inserts_updates_deletes_and_transactions(upstream: Upstream) -> None:
    t = upstream.table
    with upstream.reader() as reader:
        reader.start(0)
        assert reader.poll(5) == SourceBatch((), reader.consistent_point + 1)  # type: ignore[operator]
        upstream.sql(f"INSERT INTO {t} (id, t) VALUES (1, 'one'), (2, 'two')")
        upstream.sql(f"UPDATE {t} SET t = 'uno' WHERE id = 1")
        upstream.sql(f"DELETE FROM {t} WHERE id = 2")
        upstream.sql(
            f"INSERT INTO {t} (id) VALUES (3)",
            f"UPDATE {t} SET id = 4 WHERE id = 3",
            f"DELETE FROM {t} WHERE id = 1",
        )
        updates, batches = _read_until(reader, _count(9))
    offsets = sorted({o for _, o, _ in updates})
    assert len(offsets) == 4  # one offset per transaction
    by_offset = [[(r[0], r[5], d) for r, o, d in updates if o == off] for off in offsets]
    assert by_offset == [
        [(1, "one", 1), (2, "two", 1)],
        [(1, "one", -1), (1, "uno", 1)],
        [(2, "two", -1)],
        [(3, None, 1), (3, None, -1), (4, None, 1), (1, "uno", -1)],
    ]
    assert batches[-1].upper == offsets[-1] + 1


def test_an_unchanged_toasted_value_is_carried_over(upstream: Upstream) -> None:
    big = "x" * 100_000  # TOASTed (compressed and out of line)
    upstream.sql(f"ALTER TABLE {upstream.table} ALTER COLUMN t SET STORAGE EXTERNAL")
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"INSERT INTO {upstream.table} (id, t) VALUES (1, '{big}')")
        upstream.sql(f"UPDATE {upstream.table} SET i2 = 7 WHERE id = 1")
        updates, _ = _read_until(reader, _count(3))
    assert [(r[0], r[1], r[5] == big, d) for r, _, d in updates] == [
        (1, None, True, 1),
        (1, None, True, -1),
        (1, 7, True, 1),
    ]


def test_snapshot_and_stream_meet_exactly_under_concurrent_commits(upstream: Upstream) -> None:
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        with psycopg.connect(upstream.url, autocommit=True) as conn:
            n = 0
            while not stop.is_set() or n < 50:
                n += 1
                conn.execute(f"INSERT INTO {upstream.table} (id) VALUES ({n})")
                written.append(n)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while len(written) < 50:
            time.sleep(0.01)
        with upstream.reader() as reader:
            reader.start(0)  # the slot is created while rows are being committed
            stop.set()
            writer.join()
            updates, _ = _read_until(reader, _count(len(written)))
    finally:
        stop.set()
        writer.join()
    c = reader.consistent_point
    assert c is not None
    ids = Counter(row[0] for row, _, d in updates for _ in range(d))
    assert ids == Counter(written)  # every row exactly once
    assert any(o == c for _, o, _ in updates) and any(o > c for _, o, _ in updates)


def test_values_outside_tidegate_types_are_typed_errors(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"INSERT INTO {upstream.table} (id) VALUES (1)")
        upstream.sql(f"INSERT INTO {upstream.table} (id, d) VALUES (2, 'infinity')")
        updates, _ = _read_until(reader, _count(1))  # the transaction before is delivered
        assert [r[0] for r, _, _ in updates] == [1]
        with pytest.raises(UpstreamValueUnrepresentable) as e:
            _read_until(reader, _count(1))
        assert (e.value.column, e.value.text) == ("d", "infinity")
        with pytest.raises(UpstreamValueUnrepresentable):  # and it stays broken
            reader.poll(0)
    upstream.sql(f"UPDATE {upstream.table} SET f8 = 0, d = 'infinity'")
    with upstream.reader() as reader, pytest.raises(UpstreamValueUnrepresentable, match="infinity"):
        reader.start(0)
    upstream.sql(f"UPDATE {upstream.table} SET d = NULL, n = 'NaN'")  # no numeric NaN here
    with upstream.reader() as reader, pytest.raises(UpstreamValueUnrepresentable, match="NaN"):
        reader.start(0)


def test_a_quiet_source_s_upper_still_advances_and_resumes_exactly(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        first = reader.poll(5)
        assert first is not None
        upstream.sql(
            "CREATE TABLE IF NOT EXISTS elsewhere (x int)", "INSERT INTO elsewhere VALUES (1)"
        )
        position = upstream.wal_position()
        updates, batches = _read_until(reader, _upper_past(position))
        quiet = batches[-1].upper  # moved by keepalives alone
        reader.ack(quiet)
    assert updates == [] and quiet > first.upper
    upstream.sql(f"INSERT INTO {upstream.table} (id) VALUES (7)")
    with upstream.reader() as reader:
        reader.start(quiet)
        after, _ = _read_until(reader, _count(1))
    assert [(r[0], d) for r, _, d in after] == [(7, 1)] and after[0][1] >= quiet


def test_a_broken_connection_is_a_retryable_typed_error(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.conn.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (upstream.slot,),
        )
        with pytest.raises(UpstreamUnreachable) as e:
            _read_until(reader, _count(1))
    assert e.value.retryable


# -- acks and resumption --------------------------------------------------------------------


def _history(up: Upstream, n: int) -> None:
    """``n`` transactions of every kind of change."""
    t = up.table
    for i in range(n):
        up.sql(f"INSERT INTO {t} (id, i4) VALUES ({i}, 0), ({i + 1000}, 0)")
        up.sql(f"UPDATE {t} SET i4 = i4 + 1 WHERE id = {i}")
        up.sql(f"DELETE FROM {t} WHERE id = {i + 1000}")


def _run(up: Upstream, resume: int, until: int) -> tuple[list[SourceUpdate], list[SourceBatch]]:
    with up.reader(max_batch_updates=4) as reader:
        reader.start(resume)
        return _read_until(reader, _upper_past(until))


def test_resuming_mid_stream_gives_exactly_the_suffix_every_time(upstream: Upstream) -> None:
    _insert(upstream, [_row(-1), _row(-2)])
    with upstream.reader(max_batch_updates=4) as reader:
        reader.start(0)
        _history(upstream, 8)
        end = upstream.wal_position()
        first, batches = _read_until(reader, _upper_past(end))
        reader.ack(batches[0].upper)  # only the snapshot is durable
    assert len(batches) > 4
    for batch in (batches[2], batches[len(batches) // 2], batches[-2]):
        resume = batch.upper
        suffix = [u for u in first if u[1] >= resume]
        for _ in range(2):
            again, again_batches = _run(upstream, resume, end)
            assert again == suffix
            assert again_batches[-1].upper == batches[-1].upper


def test_ack_advances_the_slot_s_confirmed_position(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        snapshot = reader.poll(5)
        assert snapshot is not None
        assert upstream.confirmed_flush() == snapshot.upper - 1
        _history(upstream, 2)
        _, batches = _read_until(reader, _count(6))
        reader.ack(batches[0].upper)
        deadline = time.monotonic() + 5
        while upstream.confirmed_flush() != batches[0].upper - 1:
            assert time.monotonic() < deadline
            reader.poll(0.05)
        with pytest.raises(SourceReaderMisused):
            reader.ack(reader.upper + 1)


def test_a_killed_reader_loses_and_duplicates_nothing(upstream: Upstream) -> None:
    _insert(upstream, [_row(-1)])
    reader = upstream.reader(max_batch_updates=4)
    reader.start(0)
    _history(upstream, 6)
    end = upstream.wal_position()
    everything, batches = _read_until(reader, _upper_past(end))
    durable = batches[len(batches) // 2].upper
    reader.ack(durable)
    reader.close()  # killed: nothing acked past `durable`, though more was read
    kept = [u for u in everything if u[1] < durable]
    rest, _ = _run(upstream, durable, end)
    assert kept + rest == everything
    assert Counter(r[0] for r, _, d in kept + rest for _ in range(max(d, 0))) == Counter(
        r[0] for r, _, d in everything for _ in range(max(d, 0))
    )


def test_restarting_from_zero_on_an_existing_slot_rewinds_to_its_snapshot(
    upstream: Upstream,
) -> None:
    _insert(upstream, [_row(i, i4=0) for i in range(5)])
    with upstream.reader() as reader:
        reader.start(0)
        _history(upstream, 3)
        upstream.sql(f"UPDATE {upstream.table} SET i4 = 9 WHERE id = 4")
        upstream.sql(f"DELETE FROM {upstream.table} WHERE id = 3")
        end = upstream.wal_position()
        first, first_batches = _read_until(reader, _upper_past(end))
        c = reader.consistent_point
    # Nothing was acked: the slot is still at C, and a restart from 0 must see the same
    # snapshot at C (the table has moved on since) and then the same transactions.
    upstream.sql(f"INSERT INTO {upstream.table} (id) VALUES (99)")
    with upstream.reader() as reader:
        reader.start(0)
        again, _ = _read_until(reader, _upper_past(end))
        assert reader.consistent_point == c
    assert first_batches[0].upper == c + 1  # type: ignore[operator]
    n = len(first_batches[0].updates)
    assert Counter(again[:n]) == Counter(first[:n])
    assert [u for u in again[n:] if u[1] <= end] == first[n:]
    assert [r[0] for r, o, _ in again if o > end] == [99]


def test_a_dropped_slot_with_durable_data_is_refused(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        snapshot = reader.poll(5)
        assert snapshot is not None
        reader.ack(snapshot.upper)
    upstream.drop_slot()
    with upstream.reader() as reader, pytest.raises(ReplicationSlotMissing) as e:
        reader.start(snapshot.upper)
    assert e.value.resume_offset == snapshot.upper
    assert upstream.confirmed_flush() is None  # and it did not make a new one


def test_a_slot_held_by_another_reader_is_a_retryable_error(upstream: Upstream) -> None:
    with upstream.reader() as first:
        first.start(0)
        snapshot = first.poll(5)
        assert snapshot is not None
        with (
            upstream.reader(slot_busy_timeout_s=0.3) as second,
            pytest.raises(ReplicationSlotInUse) as e,
        ):
            second.start(snapshot.upper)
        assert e.value.retryable


def test_a_reader_is_used_in_order(upstream: Upstream) -> None:
    reader = upstream.reader()
    with pytest.raises(SourceReaderMisused):
        reader.poll(0)
    with pytest.raises(SourceReaderMisused):
        reader.start(-1)
    reader.close()
    with pytest.raises(SourceReaderMisused):
        reader.start(0)


# -- the upstream changes under a running reader --------------------------------------------


@pytest.mark.parametrize(
    ("alter", "change"),
    [
        ("ADD COLUMN extra integer", "column 'extra' added (integer)"),
        ("DROP COLUMN vc", "column 'vc' dropped"),
        ("ALTER COLUMN i4 TYPE bigint", "column 'i4' changed from integer to bigint"),
        ("ALTER COLUMN vc TYPE varchar(20)", "changed from character varying(10)"),
        ("RENAME COLUMN t TO txt", "column 'txt' added"),
    ],
)
def test_a_schema_change_is_raised_before_rows_of_the_new_shape(
    upstream: Upstream, alter: str, change: str
) -> None:
    t = upstream.table
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"INSERT INTO {t} (id) VALUES (1)")
        upstream.sql(f"ALTER TABLE {t} {alter}")
        upstream.sql(f"INSERT INTO {t} (id) VALUES (2)")
        updates, _ = _read_until(reader, _count(1))
        with pytest.raises(UpstreamSchemaChanged) as e:
            _read_until(reader, _count(1))
    assert [r[0] for r, _, _ in updates] == [1]
    assert any(change in c for c in e.value.changes), e.value.changes


def test_a_dropped_not_null_shows_as_a_schema_change(upstream: Upstream) -> None:
    t = upstream.table
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"ALTER TABLE {t} ALTER COLUMN id DROP NOT NULL")
        upstream.sql(f"INSERT INTO {t} (t) VALUES ('no id')")
        with pytest.raises(UpstreamSchemaChanged, match="NULL"):
            _read_until(reader, _count(1))


def test_a_changed_table_is_refused_at_start_against_the_expected_schema(
    upstream: Upstream,
) -> None:
    upstream.sql(f"ALTER TABLE {upstream.table} DROP COLUMN ts")
    with (
        upstream.reader(expected_schema=SCHEMA) as reader,
        pytest.raises(UpstreamSchemaChanged) as e,
    ):
        reader.start(0)
    assert e.value.changes == ("column 'ts' dropped",)


def test_a_source_created_with_wide_types_keeps_them(upstream: Upstream) -> None:
    """A source created when smallint, integer and real read as bigint and double precision
    keeps its schema: its collection's rows stay of the types they were."""
    old = Schema(
        tuple(
            dataclasses.replace(c, type=ColumnType(c.type.scalar.wide, c.type.nullable))
            for c in SCHEMA.columns
        )
    )
    assert old != SCHEMA
    _insert(upstream, [EVERY_TYPE])
    with upstream.reader(expected_schema=old) as reader:
        assert reader.schema() == old
        reader.start(0)
        updates, _batches = _read_until(reader, _count(1))
    f4 = old.index("f4")
    assert [row[f4] for row, _offset, _diff in updates] == [1.1]  # its text's double, as before


def test_truncate_is_a_typed_error(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"TRUNCATE {upstream.table}")
        with pytest.raises(UpstreamTruncated) as e:
            _read_until(reader, _count(1))
    assert e.value.offset > reader.consistent_point  # type: ignore[operator]


def test_a_dropped_table_is_noticed_while_streaming(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"DROP TABLE {upstream.table}")
        with pytest.raises(UpstreamTableMissing):
            _read_until(reader, _count(1))


def test_a_dropped_publication_is_noticed_while_streaming(upstream: Upstream) -> None:
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"DROP PUBLICATION {upstream.publication}")
        upstream.sql(f"INSERT INTO {upstream.table} (id) VALUES (1)")
        with pytest.raises(PublicationMissing):
            _read_until(reader, _count(1))


def test_replica_identity_lowered_while_streaming_is_a_typed_error(upstream: Upstream) -> None:
    t = upstream.table
    with upstream.reader() as reader:
        reader.start(0)
        reader.poll(5)
        upstream.sql(f"INSERT INTO {t} (id) VALUES (1)")
        upstream.sql(f"ALTER TABLE {t} REPLICA IDENTITY DEFAULT")
        upstream.sql(f"INSERT INTO {t} (id) VALUES (2)")  # the table's new Relation comes first
        _read_until(reader, _count(1))
        with pytest.raises(ReplicaIdentityNotFull):
            _read_until(reader, _count(1))
