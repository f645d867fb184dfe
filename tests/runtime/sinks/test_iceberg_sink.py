"""The Iceberg sink writer against real pyiceberg, a real SQLite catalog and real files.

What must hold: every committed update is in the table exactly once, across
restarts, zombies, lost commit races and SIGKILLs at any point of a commit;
the covered upper recorded in the snapshots is where a restarted sink resumes;
bad input and unusable tables get typed errors. DuckDB's ``iceberg`` extension
reads the tables too, as a reader that shares no code with pyiceberg.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.types import LongType, NestedField, StringType

from tidegate.runtime.sinks import IcebergSinkWriter, read_changelog
from tidegate.runtime.sinks._iceberg_schema import NUMERIC_DOC
from tidegate.runtime.sinks._iceberg_schema import arrow_schema as _arrow_schema
from tidegate.runtime.sinks.iceberg import (
    CATALOG_NAME,
    DIFF_COLUMN,
    LOWER_PROPERTY,
    METADATA_VERSIONS_KEPT,
    SINK_PROPERTY,
    TIME_COLUMN,
    UPPER_PROPERTY,
)
from tidegate.spec.errors import (
    SinkConflict,
    SinkDescriptionInvalid,
    SinkFrontierInvalid,
    SinkTableIncompatible,
    SinkUnreachable,
    SinkUpdateInvalid,
)
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import IcebergSink

HERE = Path(__file__).parent
REPO = HERE.parents[2]


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


worker = _load(HERE / "iceberg_kill_worker.py", "tidegate_tests_iceberg_kill_worker")

ALL_TYPES = Schema.of(
    ("id", "int64", False),
    ("x", "float64"),
    ("name", "string"),
    ("flag", "bool"),
    ("day", "date"),
    ("at", "timestamp"),
)
KV = Schema.of(("k", "int64", False), ("v", "string"))

Update = tuple[Row, int, int]


def _sink(root: Path, table: str = "tidegate.changes") -> IcebergSink:
    return IcebergSink(f"sqlite:///{root}/catalog.db", f"file://{root}/warehouse", table)


@pytest.fixture
def sink(tmp_path: Path) -> IcebergSink:
    return _sink(tmp_path)


def _catalog(sink: IcebergSink) -> SqlCatalog:
    return SqlCatalog(CATALOG_NAME, uri=sink.catalog_url, warehouse=sink.warehouse)


@pytest.fixture(scope="session")
def duckdb_iceberg() -> Path:
    """DuckDB 1.5.5 with its iceberg and avro extensions from PyPI, installed apart from the venv."""
    path = Path(os.environ.get("TIDEGATE_DUCKDB_ICEBERG", REPO / "build" / "duckdb-iceberg"))
    if not (path / "duckdb_extension_iceberg").is_dir():
        pytest.fail(
            f"DuckDB's iceberg reader is not installed at {path}: run `{sys.executable} -m pip "
            f"install --require-hashes --target {path} -r requirements/iceberg-reader.txt` "
            "(make setup does)"
        )
    return path


def _duckdb_read(duckdb_iceberg: Path, sink: IcebergSink) -> list[list[Any]]:
    catalog = _catalog(sink)
    try:
        location = catalog.load_table(sink.table).metadata_location
    finally:
        catalog.engine.dispose()
    done = subprocess.run(
        [sys.executable, str(HERE / "duckdb_iceberg_reader.py"), location],
        env={**os.environ, "PYTHONPATH": str(duckdb_iceberg)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _as_json(updates: list[Update]) -> Counter[str]:
    def value(v: Any) -> Any:
        return v.isoformat() if isinstance(v, dt.date | dt.datetime) else v

    return Counter(json.dumps([*(value(v) for v in row), t, d]) for row, t, d in updates)


def _snapshot_summaries(sink: IcebergSink) -> list[dict[str, str]]:
    catalog = _catalog(sink)
    try:
        table = catalog.load_table(sink.table)
        return [
            {**(s.summary.additional_properties if s.summary else {})}
            for s in sorted(table.snapshots(), key=lambda s: s.sequence_number or 0)
        ]
    finally:
        catalog.engine.dispose()


EVERY_VALUE: list[Update] = [
    ((1, 1.5, "a", True, dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 23, 59, 59, 999999)), 0, 1),
    ((2, -0.0, "", False, dt.date(1, 1, 1), dt.datetime(1970, 1, 1)), 0, 3),
    ((3, None, None, None, None, None), 1, -1),
    ((-(2**63), 1e308, "ünïcødé ✓", True, dt.date(9999, 12, 31), None), 2, 2**62),
    ((2**63 - 1, -1e-308, "x" * 1000, None, None, dt.datetime(2262, 4, 11)), 2, -(2**63)),
]


# -- round trips ---------------------------------------------------------------


@pytest.mark.processes
def test_every_type_and_null_round_trips(sink: IcebergSink, duckdb_iceberg: Path) -> None:
    with IcebergSinkWriter(sink, ALL_TYPES) as writer:
        assert writer.open() is None
        writer.commit(EVERY_VALUE, 0, 3)
        assert Counter(writer.read_back()) == Counter(EVERY_VALUE)
    assert Counter(read_changelog(sink)) == Counter(EVERY_VALUE)
    assert Counter(json.dumps(r) for r in _duckdb_read(duckdb_iceberg, sink)) == _as_json(
        EVERY_VALUE
    )


def test_the_table_is_the_schema_then_time_and_diff(sink: IcebergSink) -> None:
    with IcebergSinkWriter(sink, ALL_TYPES) as writer:
        writer.open()
    catalog = _catalog(sink)
    fields = catalog.load_table(sink.table).schema().fields
    catalog.engine.dispose()
    assert [(f.name, str(f.field_type), f.required) for f in fields] == [
        ("id", "long", True),
        ("x", "double", False),
        ("name", "string", False),
        ("flag", "boolean", False),
        ("day", "date", False),
        ("at", "timestamp", False),
        (TIME_COLUMN, "long", True),
        (DIFF_COLUMN, "long", True),
    ]


def test_numerics_round_trip_as_documented_exact_text(sink: IcebergSink) -> None:
    """A numeric column is an Iceberg string of the exact text, its field documented as a
    numeric, and reads back as the numerics written (any digits, any scale)."""
    schema = Schema.of(("id", "int64", False), ("n", "numeric"))
    values = [Decimal("-123456789012345678901234567890123456789.000000000001"), Decimal("1E-30")]
    updates = [((i, v), 0, 1) for i, v in enumerate([*values, Decimal(0), None])]
    with IcebergSinkWriter(sink, schema) as writer:
        writer.open()
        writer.commit(updates, 0, 1)
        assert Counter(writer.read_back()) == Counter(updates)
    catalog = _catalog(sink)
    field = catalog.load_table(sink.table).schema().find_field("n")
    catalog.engine.dispose()
    assert (str(field.field_type), field.doc) == ("string", NUMERIC_DOC)
    assert Counter(read_changelog(sink)) == Counter(updates)


def test_smallints_integers_and_reals_round_trip(sink: IcebergSink) -> None:
    """An integer column is an Iceberg ``int`` (a smallint too: Iceberg has no 16-bit integer)
    and a real a ``float``; they read back as the values written."""
    schema = Schema.of(("id", "int64", False), ("a", "int16"), ("b", "int32"), ("c", "float32"))
    rows = [(0, -32768, 2**31 - 1, 0.10000000149011612), (1, None, -(2**31), float("-inf"))]
    updates = [(r, 0, 1) for r in rows]
    with IcebergSinkWriter(sink, schema) as writer:
        writer.open()
        writer.commit(updates, 0, 1)
        assert Counter(writer.read_back()) == Counter(updates)
    catalog = _catalog(sink)
    fields = catalog.load_table(sink.table).schema()
    shown = [str(fields.find_field(n).field_type) for n in ("a", "b", "c")]
    catalog.engine.dispose()
    assert shown == ["int", "int", "float"]
    assert Counter(read_changelog(sink)) == Counter(updates)


_rows = st.tuples(st.integers(-(2**63), 2**63 - 1), st.none() | st.text(max_size=5))


@settings(max_examples=15, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.integers(1, 4),
            st.lists(st.tuples(_rows, st.integers(0, 3), st.integers(-3, 3)), max_size=8),
        ),
        max_size=5,
    )
)
def test_the_table_holds_every_committed_update_once(
    tmp_path_factory: pytest.TempPathFactory, batches: list[tuple[int, list[tuple[Row, int, int]]]]
) -> None:
    """Law: after any commits, the table is the multiset of committed updates; open() is the last upper."""
    sink = _sink(tmp_path_factory.mktemp("law"))
    committed: list[Update] = []
    lower = 0
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
        for span, raw in batches:
            upper = lower + span
            updates = [(row, lower + dt_ % span, diff) for row, dt_, diff in raw]
            writer.commit(updates, lower, upper)
            committed += updates
            lower = upper
    with IcebergSinkWriter(sink, KV) as fresh:
        assert fresh.open() == (lower if batches else None)
        back = fresh.read_back()
    assert Counter(back) == Counter(committed)
    assert [t for _, t, _ in back] == sorted(t for _, t, _ in back)


# -- progress ----------------------------------------------------------------


def test_a_restarted_writer_resumes_from_the_covered_upper(sink: IcebergSink) -> None:
    with IcebergSinkWriter(sink, KV, sink_id="u7") as first:
        assert first.open() is None
        first.commit([((1, "a"), 5, 1)], 5, 8)
        first.commit([((1, "a"), 8, -1), ((1, "b"), 9, 1)], 8, 10)
    with IcebergSinkWriter(sink, KV, sink_id="u7") as second:
        assert second.open() == 10
        second.commit([((2, "c"), 10, 1)], 10, 11)
        assert second.covered_upper() == 11
        assert Counter(second.read_back()) == Counter(
            [((1, "a"), 5, 1), ((1, "a"), 8, -1), ((1, "b"), 9, 1), ((2, "c"), 10, 1)]
        )
    summaries = _snapshot_summaries(sink)
    assert [(s[SINK_PROPERTY], s[LOWER_PROPERTY], s[UPPER_PROPERTY]) for s in summaries] == [
        ("u7", "5", "8"),
        ("u7", "8", "10"),
        ("u7", "10", "11"),
    ]


def test_an_empty_commit_moves_the_covered_upper_without_data(sink: IcebergSink) -> None:
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
        writer.commit([((1, "a"), 0, 1)], 0, 1)
        writer.commit([], 1, 100)
        writer.commit([], 100, 101)
        assert writer.covered_upper() == 101
        assert writer.read_back() == [((1, "a"), 0, 1)]
    summaries = _snapshot_summaries(sink)
    assert [s[UPPER_PROPERTY] for s in summaries] == ["1", "100", "101"]
    assert [s["total-data-files"] for s in summaries] == ["1", "1", "1"]


def test_a_rolled_back_table_makes_the_sink_resend_what_the_rollback_removed(
    sink: IcebergSink,
) -> None:
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
        writer.commit([((1, "a"), 0, 1)], 0, 1)
        writer.commit([((2, "b"), 1, 1)], 1, 2)
    catalog = _catalog(sink)
    table = catalog.load_table(sink.table)
    [first] = [s for s in table.snapshots() if s.parent_snapshot_id is None]
    table.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
    catalog.engine.dispose()
    with IcebergSinkWriter(sink, KV) as resumed:
        assert resumed.open() == 1
        resumed.commit([((2, "b"), 1, 1)], 1, 2)
        assert Counter(resumed.read_back()) == Counter([((1, "a"), 0, 1), ((2, "b"), 1, 1)])


def test_two_sinks_on_one_table_keep_their_own_progress(sink: IcebergSink) -> None:
    a = IcebergSinkWriter(sink, KV, sink_id="u1")
    b = IcebergSinkWriter(sink, KV, sink_id="u2")
    assert a.open() is None and b.open() is None
    a.commit([((1, "a"), 0, 1)], 0, 5)
    b.commit([((2, "b"), 3, 1)], 3, 4)
    a.commit([], 5, 6)
    assert (a.covered_upper(), b.covered_upper()) == (6, 4)
    assert IcebergSinkWriter(sink, KV, sink_id="u2").open() == 4
    assert IcebergSinkWriter(sink, KV, sink_id="u3").open() is None
    with pytest.raises(SinkConflict):
        b.commit([], 5, 6)
    a.close()
    b.close()


# -- exactly once against other writers --------------------------------------------


def test_a_zombie_committing_the_same_lower_gets_a_conflict(sink: IcebergSink) -> None:
    zombie = IcebergSinkWriter(sink, KV, sink_id="u1")
    assert zombie.open() is None
    zombie.commit([((1, "a"), 0, 1)], 0, 2)
    successor = IcebergSinkWriter(sink, KV, sink_id="u1")
    assert successor.open() == 2
    successor.commit([((2, "b"), 2, 1)], 2, 4)
    with pytest.raises(SinkConflict) as refused:
        zombie.commit([((2, "b"), 2, 1), ((3, "z"), 3, 1)], 2, 4)
    assert (refused.value.expected, refused.value.actual) == (2, 4)
    # a zombie that opened before the first commit is refused too
    late = IcebergSinkWriter(sink, KV, sink_id="u1")
    with pytest.raises(SinkConflict):
        late.commit([((1, "a"), 0, 1)], 0, 2)
    assert Counter(successor.read_back()) == Counter([((1, "a"), 0, 1), ((2, "b"), 2, 1)])
    zombie.close()
    successor.close()
    late.close()


def test_a_lost_commit_race_is_a_conflict_not_a_rebased_append(
    sink: IcebergSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both writers read covered upper 2; the successor's commit lands between the zombie's read and its CAS.

    pyiceberg on its own would retry the zombie's append on top of the
    successor's snapshot; the writer must surface the lost race instead.
    """
    zombie = IcebergSinkWriter(sink, KV, sink_id="u1")
    zombie.open()
    zombie.commit([((1, "a"), 0, 1)], 0, 2)
    successor = IcebergSinkWriter(sink, KV, sink_id="u1")
    assert successor.open() == 2

    real_commit_table = SqlCatalog.commit_table
    interleaved: list[str] = []

    def commit_table(self: SqlCatalog, *args: Any, **kwargs: Any) -> Any:
        if self is zombie._catalog and not interleaved:
            interleaved.append("successor")
            successor.commit([((2, "b"), 2, 1)], 2, 3)
        return real_commit_table(self, *args, **kwargs)

    monkeypatch.setattr(SqlCatalog, "commit_table", commit_table)
    with pytest.raises(SinkConflict) as refused:
        zombie.commit([((9, "zombie"), 2, 1)], 2, 3)
    assert interleaved == ["successor"]
    assert (refused.value.expected, refused.value.actual) == (2, 3)
    assert Counter(successor.read_back()) == Counter([((1, "a"), 0, 1), ((2, "b"), 2, 1)])
    assert [s[UPPER_PROPERTY] for s in _snapshot_summaries(sink)] == ["2", "3"]
    zombie.close()
    successor.close()


def test_a_race_lost_to_another_sink_is_retried(
    sink: IcebergSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = IcebergSinkWriter(sink, KV, sink_id="u1")
    other = IcebergSinkWriter(sink, KV, sink_id="u2")
    mine.open()
    other.open()
    real_commit_table = SqlCatalog.commit_table
    interleaved: list[str] = []

    def commit_table(self: SqlCatalog, *args: Any, **kwargs: Any) -> Any:
        if self is mine._catalog and not interleaved:
            interleaved.append("other")
            other.commit([((7, "other"), 0, 1)], 0, 1)
        return real_commit_table(self, *args, **kwargs)

    monkeypatch.setattr(SqlCatalog, "commit_table", commit_table)
    mine.commit([((1, "mine"), 0, 1)], 0, 1)
    assert interleaved == ["other"]
    assert (mine.covered_upper(), other.covered_upper()) == (1, 1)
    assert Counter(mine.read_back()) == Counter([((1, "mine"), 0, 1), ((7, "other"), 0, 1)])
    mine.close()
    other.close()


def _expected_below(upper: int) -> Counter[Update]:
    return Counter(u for t in range(upper) for u in worker.updates_at(t))


@pytest.mark.processes
def test_sigkill_during_commits_loses_and_duplicates_nothing(
    tmp_path: Path, duckdb_iceberg: Path
) -> None:
    """A committing process is SIGKILLed at random points 10 times; each resume is exact."""
    sink = _sink(tmp_path)
    rng = random.Random(20251128)
    errors = (tmp_path / "worker.err").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "iceberg_kill_worker.py"),
            sink.catalog_url,
            sink.warehouse,
            sink.table,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    uppers: list[int] = []
    try:
        for _ in range(10):
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            assert line.strip().isdigit(), (
                f"worker said {line!r}; stderr: {(tmp_path / 'worker.err').read_text()}"
            )
            time.sleep(rng.uniform(0.0, 0.5))  # the child commits all the while
            os.kill(int(line), signal.SIGKILL)
            assert proc.stdout.readline().strip() == "reaped"
            with IcebergSinkWriter(sink, worker.SCHEMA, sink_id="u1") as fresh:
                covered = fresh.open() or 0  # None: killed before its first commit landed
                assert Counter(fresh.read_back()) == _expected_below(covered)
            uppers.append(covered)
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        errors.close()
    assert uppers == sorted(uppers) and uppers[-1] > 0
    duck = _duckdb_read(duckdb_iceberg, sink)
    assert Counter(json.dumps(r) for r in duck) == _as_json(
        list(_expected_below(uppers[-1]).elements())
    )


# -- outside readers --------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.slow
def test_twenty_outside_readers_never_meet_a_dangling_metadata_pointer(tmp_path: Path) -> None:
    """20 pyiceberg readers (threads of another process, the documented catalog name) read the
    table in a loop, half of them opening the metadata file seconds after reading the pointer,
    while the writer commits data as fast as it can (far more often than a paced sink does)
    past the metadata files the table keeps: every read succeeds. (With the 16 files kept
    before, reads failed with FileNotFoundError here.)"""
    sink = _sink(tmp_path)
    commits = METADATA_VERSIONS_KEPT + 40  # old metadata files get deleted during the reads
    stop = tmp_path / "stop"
    with IcebergSinkWriter(sink, KV, sink_id="u1") as writer:
        writer.open()
        writer.commit([((0, "first"), 0, 1)], 0, 1)
        errors = (tmp_path / "readers.err").open("w")
        readers = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "iceberg_loop_readers.py"),
                sink.catalog_url,
                sink.warehouse,
                sink.table,
                "20",
                str(stop),
                "3",  # seconds a reader may take from the pointer to the file
            ],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        assert readers.stdout is not None
        try:
            ready = readers.stdout.readline()
            assert ready.strip() == "ready", (tmp_path / "readers.err").read_text()
            for t in range(1, commits):
                writer.commit([((t, f"v{t}"), t, 1)], t, t + 1)
            stop.touch()
            out, _ = readers.communicate(timeout=120)
        finally:
            if readers.poll() is None:
                readers.kill()
                readers.wait()
            errors.close()
        assert Counter(writer.read_back()) == Counter(
            [((0, "first"), 0, 1)] + [((t, f"v{t}"), t, 1) for t in range(1, commits)]
        )
    report = json.loads(out.splitlines()[-1])
    assert report["failures"] == []
    assert report["reads"] >= 20 and report["metadata_locations"] > 1
    # the writer did delete old metadata files meanwhile: the readers were exposed to it
    metadata = list((tmp_path / "warehouse").rglob("*.metadata.json"))
    assert len(metadata) <= METADATA_VERSIONS_KEPT + 1
    assert not any(p.name.startswith("00000-") for p in metadata)


# -- object stores ---------------------------------------------------------------


@pytest.mark.processes
def test_an_s3_warehouse_through_pyiceberg_file_io(tmp_path: Path, s3_endpoint: str) -> None:
    sink = IcebergSink(f"sqlite:///{tmp_path}/catalog.db", "s3://tidegate/warehouse", "ns.t")
    io = {
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    with IcebergSinkWriter(sink, ALL_TYPES, io_properties=io) as writer:
        assert writer.open() is None
        writer.commit(EVERY_VALUE, 0, 3)
        writer.commit([], 3, 4)
    with IcebergSinkWriter(sink, ALL_TYPES, io_properties=io) as resumed:
        assert resumed.open() == 4
    assert Counter(read_changelog(sink, io_properties=io)) == Counter(EVERY_VALUE)
    import boto3

    keys = [
        o["Key"]
        for o in boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
        .list_objects_v2(Bucket="tidegate", Prefix="warehouse/ns/t/data/")
        .get("Contents", [])
    ]
    assert len(keys) == 1 and keys[0].endswith(".parquet")


# -- typed errors ----------------------------------------------------------------


def test_an_existing_table_with_another_schema_is_incompatible(sink: IcebergSink) -> None:
    catalog = _catalog(sink)
    catalog.create_namespace("tidegate")
    catalog.create_table(
        sink.table,
        IcebergSchema(
            NestedField(1, "k", LongType(), required=True),
            NestedField(2, "v", StringType(), required=False),
        ),
    )
    catalog.engine.dispose()
    with pytest.raises(SinkTableIncompatible, match="schema"):
        IcebergSinkWriter(sink, KV).open()
    # nullability is part of the schema
    with pytest.raises(SinkTableIncompatible):
        IcebergSinkWriter(sink, Schema.of(("k", "int64"), ("v", "string"))).open()


def test_a_table_written_by_one_schema_refuses_a_writer_of_another(sink: IcebergSink) -> None:
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
        writer.commit([((1, "a"), 0, 1)], 0, 1)
    other = IcebergSinkWriter(sink, Schema.of(("k", "int64", False), ("v", "int64")))
    with pytest.raises(SinkTableIncompatible):
        other.open()
    with pytest.raises(SinkTableIncompatible):
        other.commit([((1, 2), 1, 1)], 1, 2)
    assert read_changelog(sink) == [((1, "a"), 0, 1)]


def test_a_sink_whose_snapshots_were_expired_resumes_from_the_table_property(
    sink: IcebergSink,
) -> None:
    with IcebergSinkWriter(sink, KV, sink_id="u1") as mine:
        mine.open()
        mine.commit([((1, "a"), 0, 1)], 0, 1)
    with IcebergSinkWriter(sink, KV, sink_id="u2") as other:
        other.open()
        other.commit([((2, "b"), 0, 1)], 0, 1)
    catalog = _catalog(sink)
    table = catalog.load_table(sink.table)
    [first] = [s for s in table.snapshots() if s.parent_snapshot_id is None]
    table.maintenance.expire_snapshots().by_id(first.snapshot_id).commit()
    catalog.engine.dispose()
    assert [s[SINK_PROPERTY] for s in _snapshot_summaries(sink)] == ["u2"]
    with IcebergSinkWriter(sink, KV, sink_id="u1") as resumed:
        assert resumed.open() == 1
        with pytest.raises(SinkConflict):
            resumed.commit([((1, "a"), 0, 1)], 0, 1)
        resumed.commit([((3, "c"), 1, 1)], 1, 2)
        assert Counter(resumed.read_back()) == Counter(
            [((1, "a"), 0, 1), ((2, "b"), 0, 1), ((3, "c"), 1, 1)]
        )


def test_a_covered_upper_that_is_not_a_number_is_incompatible(sink: IcebergSink) -> None:
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
    catalog = _catalog(sink)
    catalog.load_table(sink.table).append(
        pa.table({"k": [1], "v": ["x"], TIME_COLUMN: [0], DIFF_COLUMN: [1]}).cast(
            _arrow_schema(KV)
        ),
        snapshot_properties={SINK_PROPERTY: "u3", UPPER_PROPERTY: "soon"},
    )
    catalog.engine.dispose()
    with pytest.raises(SinkTableIncompatible, match="soon"):
        IcebergSinkWriter(sink, KV, sink_id="u3").open()


def test_the_writer_keeps_the_history_short_and_every_sinks_progress(sink: IcebergSink) -> None:
    other = IcebergSinkWriter(sink, KV, sink_id="u2", keep_snapshots=2)
    other.open()
    other.commit([((0, "other"), 0, 1)], 0, 1)
    committed: list[Update] = [((0, "other"), 0, 1)]
    with IcebergSinkWriter(sink, KV, sink_id="u1", keep_snapshots=2) as writer:
        writer.open()
        for t in range(12):
            updates = [] if t % 3 == 0 else [((t, str(t)), t, 1)]
            writer.commit(updates, t, t + 1)
            committed += updates
            assert len(_snapshot_summaries(sink)) <= 4
        assert writer.covered_upper() == 12
        assert Counter(writer.read_back()) == Counter(committed)
    # u2's only snapshot is long expired; its progress is not lost
    assert "u2" not in [s[SINK_PROPERTY] for s in _snapshot_summaries(sink)]
    assert other.covered_upper() == 1
    other.commit([((1, "other"), 1, 1)], 1, 2)
    other.close()


def test_a_table_of_an_older_writer_gets_todays_metadata_retention_at_open(
    sink: IcebergSink,
) -> None:
    catalog = _catalog(sink)
    try:
        catalog.create_namespace("tidegate")
        catalog.create_table(
            sink.table,
            IcebergSchema(
                NestedField(1, "k", LongType(), required=True),
                NestedField(2, "v", StringType(), required=False),
                NestedField(3, TIME_COLUMN, LongType(), required=True),
                NestedField(4, DIFF_COLUMN, LongType(), required=True),
            ),
            properties={"write.metadata.previous-versions-max": "16"},
        )
    finally:
        catalog.engine.dispose()
    with IcebergSinkWriter(sink, KV) as writer:
        assert writer.open() is None
        writer.commit([((1, "a"), 0, 1)], 0, 1)
    catalog = _catalog(sink)
    try:
        props = catalog.load_table(sink.table).properties
    finally:
        catalog.engine.dispose()
    assert props["write.metadata.previous-versions-max"] == str(METADATA_VERSIONS_KEPT)
    assert props["write.metadata.delete-after-commit.enabled"] == "true"


def test_committing_to_a_missing_table_is_refused(sink: IcebergSink) -> None:
    with (
        IcebergSinkWriter(sink, KV) as writer,
        pytest.raises(SinkTableIncompatible, match="does not exist"),
    ):
        writer.commit([], 0, 1)


def test_an_unreachable_catalog_is_a_typed_error(tmp_path: Path) -> None:
    sink = IcebergSink(
        f"sqlite:///{tmp_path}/no/such/dir/catalog.db", f"file://{tmp_path}/warehouse", "ns.t"
    )
    writer = IcebergSinkWriter(sink, KV)
    with pytest.raises(SinkUnreachable):
        writer.open()
    with pytest.raises(SinkUnreachable):
        writer.commit([], 0, 1)
    with pytest.raises(SinkUnreachable):
        read_changelog(sink)


def test_an_unwritable_warehouse_is_a_typed_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    sink = IcebergSink(f"sqlite:///{tmp_path}/catalog.db", f"file://{blocker}/warehouse", "ns.t")
    with pytest.raises(SinkUnreachable):
        IcebergSinkWriter(sink, KV).open()


@pytest.mark.parametrize(
    ("lower", "upper"),
    [(3, 3), (4, 3), (-1, 2), (0, 2**63), (True, 2), (0, 1.5), ("0", 1), (None, 1)],
)
def test_invalid_frontiers_are_refused_before_any_io(
    sink: IcebergSink, lower: Any, upper: Any
) -> None:
    writer = IcebergSinkWriter(sink, KV)
    with pytest.raises(SinkFrontierInvalid):
        writer.commit([], lower, upper)
    assert not (Path(sink.catalog_url.removeprefix("sqlite:///"))).exists()


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        (((1, "a"), 5, 1), "time 5 is not in"),
        (((1, "a"), 1, 1), "time 1 is not in"),
        (((1, "a"), True, 1), "time True"),
        (((1, "a"), 2, 2**63), "diff"),
        (((1, "a"), 2, 1.0), "diff"),
        (((None, "a"), 2, 1), "NULL in non-nullable"),
        (((1, 2), 2, 1), "is not a string"),
        (((1,), 2, 1), "columns"),
        ([1, "a"], "triple"),
        (((1, "a"), 2), "triple"),
    ],
)
def test_invalid_updates_are_refused_and_nothing_is_committed(
    sink: IcebergSink, update: Any, reason: str
) -> None:
    with IcebergSinkWriter(sink, KV) as writer:
        writer.open()
        writer.commit([((0, "ok"), 0, 1)], 0, 2)
        with pytest.raises(SinkUpdateInvalid, match=reason) as refused:
            writer.commit([((1, "ok"), 2, 1), update], 2, 4)
        assert refused.value.index == 1
        assert writer.covered_upper() == 2
        assert writer.read_back() == [((0, "ok"), 0, 1)]


@pytest.mark.parametrize(
    ("connection", "schema"),
    [
        (IcebergSink("sqlite:///c.db", "file:///w", "no_namespace"), KV),
        (IcebergSink("sqlite:///c.db", "file:///w", "ns."), KV),
        (IcebergSink("not a url", "file:///w", "ns.t"), KV),
        (IcebergSink("nosuch:///x", "file:///w", "ns.t"), KV),  # no such kind of catalog
        (IcebergSink("mysql://h/db", "file:///w", "ns.t"), KV),  # its driver is not installed
        (IcebergSink("sqlite:///c.db", "hdfs://w", "ns.t"), KV),
        (IcebergSink("sqlite:///c.db", "relative/path", "ns.t"), KV),
        (
            IcebergSink("sqlite:///c.db", "file:///w", "ns.t"),
            Schema.of(("a", "int64"), ("a", "string")),
        ),
        (IcebergSink("sqlite:///c.db", "file:///w", "ns.t"), Schema.of((TIME_COLUMN, "int64"))),
        (IcebergSink("sqlite:///c.db", "file:///w", "ns.t", commit_interval_ms=0), KV),
        (IcebergSink("sqlite:///c.db", "file:///w", "ns.t", progress_interval_ms=-1), KV),
    ],
)
def test_an_unusable_description_is_refused_when_the_writer_is_built(
    connection: IcebergSink, schema: Schema
) -> None:
    with pytest.raises(SinkDescriptionInvalid):
        IcebergSinkWriter(connection, schema)
