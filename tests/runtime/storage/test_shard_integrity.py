"""Integrity and bad inputs of the shard store.

Every blob's SHA-256 is recorded in the shard's state when it is written and checked on
every read; every consensus record carries a SHA-256 of itself. Corrupting any byte of a
real written blob, or of a real consensus row, is detected as a typed error, never a wrong
snapshot. A full disk or a read-only data directory is a typed ``StorageUnavailable`` with
the state unchanged; a failed blob write leaves no temporary file; ``close`` ends the
database connection.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tidegate.runtime.storage import FileBlob, ShardStore, SqliteConsensus, default_urls
from tidegate.runtime.storage.arrow_batches import encode_parquet, schema_text
from tidegate.spec.errors import (
    BlobCorrupt,
    ConsensusCorrupt,
    StorageUnavailable,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import CompactionPolicy, VersionedData
from tidegate.spec.shard.codec import ENVELOPE

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
ROWS = [((i, f"name-{i}"), i % 3, 1) for i in range(40)]
WORKER = str(Path(__file__).with_name("full_disk_worker.py"))


@pytest.fixture
def local(tmp_path: Path) -> Iterator[ShardStore]:
    store = ShardStore.open(*default_urls(tmp_path), auto_compact=False, inline_max_bytes=0)
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", ROWS, 0, 3)
    yield store
    store.close()


def _blob_path(store: ShardStore, key: str) -> Path:
    assert isinstance(store.blob, FileBlob)
    return store.blob.root / key


# -- blobs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
def test_every_flipped_byte_of_a_written_blob_is_blob_corrupt(tmp_path: Path, suffix: str) -> None:
    """Both blob formats: an Arrow IPC message (a small blob) and Parquet."""
    local = ShardStore.open(
        *default_urls(tmp_path),
        auto_compact=False,
        inline_max_bytes=0,
        blob_ipc_max_bytes=0 if suffix == ".parquet" else 1 << 20,
    )
    local.create_shard("s", SCHEMA)
    local.compare_and_append("s", ROWS, 0, 3)
    (batch,) = local.state("s").batches
    assert batch.digest is not None and len(batch.digest) == 64
    assert batch.key.endswith(suffix)
    path = _blob_path(local, batch.key)
    original = path.read_bytes()
    good = local.snapshot_rows("s", 2)
    rng = random.Random(17)
    detected = 0
    for i in range(len(original)):  # every byte, each changed by a random non-zero mask
        bad = bytearray(original)
        bad[i] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(bad))  # the file on disk, not through the store
        with pytest.raises(BlobCorrupt) as e:
            local.snapshot_rows("s", 2)
        assert e.value.shard == "s" and e.value.key == batch.key
        assert e.value.expected == batch.digest and e.value.actual != batch.digest
        assert batch.digest[:12] in str(e.value) and e.value.actual[:12] in str(e.value)
        detected += 1
    assert detected == len(original) >= 500
    path.write_bytes(original[:-1])  # torn: a prefix
    with pytest.raises(BlobCorrupt):
        local.snapshot_rows("s", 2)
    path.write_bytes(original)  # repaired: readable again, the same contents
    assert local.snapshot_rows("s", 2) == good
    local.close()


def test_a_corrupt_blob_fails_listen_and_compaction_and_changes_nothing(tmp_path: Path) -> None:
    store = ShardStore.open(
        *default_urls(tmp_path),
        policy=CompactionPolicy(max_batches=1),
        auto_compact=False,
        inline_max_bytes=0,
    )
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", ROWS[:10], 0, 3)
    listener = store.listen("s", 2)
    store.compare_and_append("s", [((99, "x"), 3, 1)], 3, 4)
    key = store.state("s").batches[-1].key
    _blob_path(store, key).write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    with pytest.raises(BlobCorrupt):
        listener.poll()
    before = store.state("s")
    with pytest.raises(BlobCorrupt):
        store.compact("s")
    assert store.state("s") == before
    listener.close()
    store.close()


def test_a_store_of_format_1_is_read_and_upgraded_on_write(tmp_path: Path) -> None:
    store = ShardStore.open(*default_urls(tmp_path), auto_compact=False)
    data = encode_parquet(
        pa.table(
            {"id": [1], "name": ["a"], "__time": [0], "__diff": [1]},
            schema=SCHEMA.append(pa.field("__time", pa.int64(), False)).append(
                pa.field("__diff", pa.int64(), False)
            ),
        )
    )
    store.blob.set("old/b0.parquet", data)
    legacy = {
        "format": 1,
        "shard": "old",
        "since": [0],
        "upper": [1],
        "batches": [["old/b0.parquet", [0], [1], [0], 1, 0, 0]],
        "leased": {},
        "critical": {},
        "writers": {},
        "schema": schema_text(SCHEMA),
        "finalized": False,
    }
    store.consensus.compare_and_set("old", None, VersionedData(0, json.dumps(legacy).encode()))
    assert store.snapshot_rows("old", 0) == [((1, "a"), 0, 1)]  # read, unchecked
    store.compare_and_append("old", [((2, "b"), 1, 1)], 1, 2)
    head = store.consensus.head("old")
    assert head is not None and head.data.startswith(ENVELOPE)  # rewritten as format 2
    old, new = store.state("old").batches
    assert old.digest is None and new.digest is not None
    store.compact("old", CompactionPolicy(max_batches=1))
    (merged,) = store.state("old").batches
    assert merged.digest is not None  # compaction rewrote the old batch: checked from now on
    assert store.snapshot_rows("old", 1) == [((1, "a"), 1, 1), ((2, "b"), 1, 1)]
    store.close()


# -- consensus ---------------------------------------------------------------------------------


def test_every_flipped_byte_of_a_consensus_row_is_consensus_corrupt(local: ShardStore) -> None:
    assert isinstance(local.consensus, SqliteConsensus)
    head = local.consensus.head("s")
    assert head is not None and head.data.startswith(ENVELOPE)
    good = local.snapshot_rows("s", 2)
    db = sqlite3.connect(local.consensus.path, isolation_level=None)

    def put(data: bytes) -> None:
        db.execute(
            "UPDATE consensus SET data = ? WHERE shard = ? AND sequence_number = ?",
            (data, "s", head.seqno),
        )

    rng = random.Random(4)
    for i in range(len(head.data)):  # the row in the database file, every byte
        bad = bytearray(head.data)
        bad[i] ^= rng.randrange(1, 256)
        put(bytes(bad))
        with pytest.raises(ConsensusCorrupt) as e:
            local.state("s")
        assert e.value.shard == "s" and e.value.seqno == head.seqno
        with pytest.raises(ConsensusCorrupt):  # a write reads the state first: refused too
            local.compare_and_append("s", [((1000, "z"), 3, 1)], 3, 4)
    assert len(head.data) >= 500
    put(head.data[: len(head.data) // 2])  # torn
    with pytest.raises(ConsensusCorrupt):
        local.snapshot_rows("s", 2)
    put(head.data)
    assert local.snapshot_rows("s", 2) == good
    assert local.upper("s") == Antichain([3])  # no refused write landed
    db.close()


# -- full disk, read-only directory, temporary files, close ------------------------------------


@pytest.mark.processes
def test_a_full_disk_is_storage_unavailable_and_changes_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE in a child process: every write past one byte fails with EFBIG."""
    out = subprocess.run(
        [sys.executable, WORKER, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    for attempt, store in (
        ("blob", "blob"),
        ("consensus", "consensus"),
        ("reader", "consensus"),
        ("compaction", "blob"),
    ):
        assert isinstance(seen[attempt], dict), seen[attempt]  # typed, not "applied"/untyped
        assert seen[attempt]["store"] == store, seen[attempt]
        assert "shard 's'" in seen[attempt]["message"]
        for what in ("state", "snapshot", "blob_files"):
            assert seen[f"{attempt}_{what}_unchanged"], (attempt, what)
    assert seen["blob"]["errno"] == 27  # EFBIG
    assert seen["after"] == "Antichain([3])" and seen["after_rows"] == 102


@pytest.mark.processes
def test_an_append_on_a_full_disk_is_storage_unavailable_for_the_client(tmp_path: Path) -> None:
    """Through the environment (group commit, storage IO, controller): the client gets the
    store's ``StorageUnavailable``, not ``InvalidUppers``, an SQL client a typed SQLSTATE; the
    table is unchanged and takes appends again once there is room."""
    worker = str(Path(__file__).with_name("full_disk_env_worker.py"))
    out = subprocess.run(
        [sys.executable, worker, str(tmp_path)], capture_output=True, text=True, timeout=150
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    for attempt in ("append0", "append1"):  # a one-row batch is stored inline: consensus fails
        assert seen[attempt] == {"type": "StorageUnavailable", "store": "consensus"}, seen[attempt]
    # SQL answers it with a typed SQLSTATE (SQLite reports the file size limit as a failed
    # write: io_error), never XX000, the code of an internal error
    assert seen["sql_insert"] == {"type": "StorageUnavailable", "sqlstate": "58030"}, seen
    assert seen["unchanged"] and seen["after"] == [[1], [9]]


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs (1 MiB) at a fresh mount point, if this process may mount one."""
    point = tmp_path / "mnt"
    point.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)):
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


@pytest.mark.processes
def test_a_full_tmpfs_is_storage_unavailable_and_changes_nothing(tmpfs: Path) -> None:
    store = ShardStore.open(*default_urls(tmpfs / "data"), auto_compact=False, inline_max_bytes=0)
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", ROWS, 0, 3)
    before, rows = store.state("s"), store.snapshot_rows("s", 2)
    big = [((i, os.urandom(64).hex()), 3, 1) for i in range(20_000)]  # > 1 MiB of Parquet
    with pytest.raises(StorageUnavailable) as e:
        store.compare_and_append("s", big, 3, 4)
    assert e.value.store == "blob" and e.value.errno == 28  # ENOSPC
    filler = tmpfs / "filler"
    with open(filler, "wb") as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    with pytest.raises(StorageUnavailable) as e:
        for i in range(200):  # the WAL has some room left in its pages: fill it
            store.register_leased_reader("s", f"r{i}")
    assert e.value.store == "consensus" and "SQLITE_FULL" in str(e.value)
    assert store.snapshot_rows("s", 2) == rows and store.state("s").upper == before.upper
    assert not [p for p in (tmpfs / "data" / "blob").rglob("*") if p.name.endswith(".tmp")]
    filler.unlink()
    assert store.compare_and_append("s", [((1, "x"), 3, 1)], 3, 4) == Antichain([4])
    store.close()


@pytest.mark.processes
def test_a_read_only_data_directory_is_storage_unavailable(tmpfs: Path) -> None:
    data = tmpfs / "data"
    store = ShardStore.open(*default_urls(data), inline_max_bytes=0)
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", ROWS, 0, 3)
    rows = store.snapshot_rows("s", 2)
    store.close()
    assert _mount("-o", "remount,ro", str(tmpfs))
    try:
        with pytest.raises(StorageUnavailable) as e:  # SQLite in WAL mode needs to write
            ShardStore.open(*default_urls(data))
        assert e.value.store == "consensus" and "SQLITE_CANTOPEN" in str(e.value)
        blob = FileBlob(data / "blob")  # the blob directory opens, reads, refuses writes
        assert blob.list_keys("s/")
        with pytest.raises(StorageUnavailable) as b:
            blob.set("s/new.parquet", b"x")
        assert b.value.errno == 30 and b.value.shard == "s"  # EROFS
        with pytest.raises(StorageUnavailable):
            blob.delete(blob.list_keys("s/")[0].key)
    finally:
        assert _mount("-o", "remount,rw", str(tmpfs))
    store = ShardStore.open(*default_urls(data))
    assert store.snapshot_rows("s", 2) == rows  # nothing changed
    store.close()


def test_stale_temporary_files_are_removed_on_open(tmp_path: Path) -> None:
    root = tmp_path / "blob"
    (root / "s").mkdir(parents=True)
    stale = root / "s" / ".k.parquet.0123.tmp"
    fresh = root / "s" / ".k.parquet.4567.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    blob = FileBlob(root)
    assert blob.removed_tmp == 1
    assert not stale.exists() and fresh.exists()  # a young one may be a live writer's
    assert blob.list_keys() == []


def test_close_closes_the_sqlite_connection(tmp_path: Path) -> None:
    store = ShardStore.open(*default_urls(tmp_path))
    store.create_shard("s", SCHEMA)
    consensus = store.consensus
    assert isinstance(consensus, SqliteConsensus)
    store.close()
    assert consensus.closed
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        consensus.head("s")
    store.close()  # idempotent
    shared = SqliteConsensus(tmp_path / "consensus.db")
    borrowed = ShardStore(FileBlob(tmp_path / "blob"), shared)  # not opened by the store
    borrowed.close()
    assert not shared.closed and shared.head("s") is not None
    shared.close()


@pytest.mark.postgres
def test_close_ends_the_postgres_connection(postgres_url: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from tidegate.runtime.storage import MemoryBlob, PostgresConsensus

    def alive(pid: int) -> bool:
        with psycopg.connect(postgres_url, autocommit=True) as c:
            row = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            return row is not None and int(row[0]) == 1

    # The store's own connection, by its backend's pid: other tests of this server's session
    # may have connections of their own coming and going meanwhile.
    consensus = PostgresConsensus(postgres_url)
    pid = int(consensus._conn.info.backend_pid)
    store = ShardStore(MemoryBlob(), consensus, owns_backends=True)
    assert alive(pid)
    store.close()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
