"""A lost or damaged catalog never deletes data: ``tidegate up`` refuses to start, typed.

Before, with every catalog record gone (a wrong ``--data-dir`` copy, a restored
backup, a bad edit), ``tidegate up`` started as an empty environment, finalized
the existing table's shard and deleted its blobs. Now it refuses to start when
shards or blobs exist without a catalog, saying what it found and how to
proceed; catalog and oracle records are checksummed as shard records are; a
damaged ``consensus.db`` is a typed error (it was an untyped
``sqlite3.DatabaseError``); and a shard is finalized only once the catalog
recorded its object as dropped (a shard the catalog does not know is left alone).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.errors import CatalogDecodeError, CatalogMissing, OracleError
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.spec.errors import ConsensusCorrupt, ConsensusStoreCorrupt, ShardFinalized

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

TIDEGATE = [sys.executable, "-m", "tidegate"]
SCHEMA = Schema.of(("k", "int64", False), ("v", "string"))


def _make(data: Path) -> str:
    """An environment with one table of three rows (written to blobs), closed; the table's id."""

    async def main() -> str:
        async with Environment.open(data, replicas={}, tick_ms=None) as env:
            gid = await env.create_table("t", SCHEMA)
            for i in range(3):
                await env.append("t", [((i, "x" * 5000), 1)])  # big enough for a blob
            return str(gid)

    return anyio.run(main)


def _blobs(data: Path) -> list[str]:
    return sorted(str(p.relative_to(data)) for p in (data / "blob").rglob("*") if p.is_file())


def _up(data: Path) -> subprocess.CompletedProcess[str]:
    """``tidegate up`` on ``data``, expected to refuse to start (it would otherwise serve)."""
    return subprocess.run(
        [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _sql(data: Path, statement: str, *args: object) -> None:
    with sqlite3.connect(data / "consensus.db") as db:
        db.execute(statement, args)


def _latest(data: Path, key: str) -> bytes:
    with sqlite3.connect(data / "consensus.db") as db:
        row = db.execute(
            "SELECT data FROM consensus WHERE shard = ? ORDER BY sequence_number DESC LIMIT 1",
            (key,),
        ).fetchone()
    return bytes(row[0])


def _edit_latest(data: Path, key: str, old: bytes, new: bytes) -> None:
    before = _latest(data, key)
    assert old in before
    _sql(
        data,
        "UPDATE consensus SET data = ? WHERE shard = ? AND sequence_number = "
        "(SELECT max(sequence_number) FROM consensus WHERE shard = ?)",
        before.replace(old, new, 1),
        key,
        key,
    )


def _intact(data: Path, shard: str, blobs: list[str]) -> None:
    """The table's shard is live with all its blobs (nothing was finalized or collected)."""
    assert _blobs(data) == blobs
    store = ShardStore.open(*default_urls(data))
    try:
        state = store.state(shard)
        assert not state.finalized
        (upper,) = state.upper.elements
        rows = store.snapshot_rows(shard, int(upper) - 1)
        assert sorted(r[0] for r, _t, _d in rows) == [0, 1, 2]
    finally:
        store.close()


def test_up_refuses_to_start_without_the_catalog_and_deletes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shard = _make(data)
    blobs = _blobs(data)
    assert blobs
    _sql(data, "DELETE FROM consensus WHERE shard = 'tidegate/catalog'")
    refused = _up(data)
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "could not start: CatalogMissing" in refused.stderr
    assert shard in refused.stderr and "backup" in refused.stderr

    async def main() -> None:
        with pytest.raises(CatalogMissing) as e:
            async with Environment.open(data, replicas={}):
                pass
        assert e.value.shards == (shard,)

    anyio.run(main)
    _intact(data, shard, blobs)


def test_up_refuses_to_start_when_only_blobs_are_left(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _make(data)
    blobs = _blobs(data)
    for f in data.glob("consensus.db*"):
        f.unlink()
    refused = _up(data)
    assert refused.returncode == 1 and "could not start: CatalogMissing" in refused.stderr
    assert f"{len(blobs)} blob(s)" in refused.stderr
    assert _blobs(data) == blobs


def test_a_damaged_consensus_store_is_typed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _make(data)
    blobs = _blobs(data)
    for f in data.glob("consensus.db-*"):
        f.unlink()
    (data / "consensus.db").write_bytes(b"not a database at all" * 1000)
    refused = _up(data)
    assert refused.returncode == 1, refused.stderr[-2000:]
    assert "could not start: ConsensusStoreCorrupt" in refused.stderr
    assert _blobs(data) == blobs

    async def main() -> None:
        with pytest.raises(ConsensusStoreCorrupt):
            async with Environment.open(data, replicas={}):
                pass

    anyio.run(main)


def test_edited_catalog_oracle_and_shard_records_are_typed_and_delete_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    shard = _make(data)
    blobs = _blobs(data)

    def refused(kind: type[Exception]) -> None:
        async def main() -> None:
            with pytest.raises(kind):
                async with Environment.open(data, replicas={}):
                    pass

        anyio.run(main)
        assert _blobs(data) == blobs

    # An edit that still parses as JSON: the checksum catches it.
    catalog = _latest(data, "tidegate/catalog")
    _edit_latest(data, "tidegate/catalog", b'"name":"t"', b'"name":"u"')
    refused(CatalogDecodeError)
    assert "checksum" in _up(data).stderr
    _edit_latest(data, "tidegate/catalog", b'"name":"u"', b'"name":"t"')
    assert _latest(data, "tidegate/catalog") == catalog

    oracle = _latest(data, "tidegate/oracle")
    _edit_latest(data, "tidegate/oracle", b'"epoch": ', b'"epoch": 9')
    refused(OracleError)
    _sql(
        data,
        "UPDATE consensus SET data = ? WHERE shard = 'tidegate/oracle' AND sequence_number = "
        "(SELECT max(sequence_number) FROM consensus WHERE shard = 'tidegate/oracle')",
        oracle,
    )

    state = _latest(data, shard)
    _edit_latest(data, shard, b'"finalized":false', b'"finalized":true ')
    with pytest.raises(ConsensusCorrupt):
        ShardStore.open(*default_urls(data)).state(shard)
    refused(ConsensusCorrupt)
    _sql(
        data,
        "UPDATE consensus SET data = ? WHERE shard = ? AND sequence_number = "
        "(SELECT max(sequence_number) FROM consensus WHERE shard = ?)",
        state,
        shard,
        shard,
    )

    async def reopen() -> None:  # with every record back as it was, it opens
        async with Environment.open(data, replicas={}, tick_ms=None):
            pass

    anyio.run(reopen)
    _intact(data, shard, blobs)


def test_only_shards_the_catalog_recorded_as_dropped_are_finalized(tmp_path: Path) -> None:
    """A shard whose object the catalog dropped (a crash before its finalization) is finalized at
    the next open; a shard the catalog never recorded (a newer catalog's, a foreign one) is
    left alone, and so is its data."""
    data = tmp_path / "data"
    shard = _make(data)

    async def drop_then_leave_a_stranger() -> str:
        async with Environment.open(data, replicas={}, tick_ms=None) as env:
            gone = await env.create_table("gone", SCHEMA)
            await env.append("gone", [((1, "a"), 1)])
            stranger = f"u{env.state.next_user_id + 100}"
            env.store.create_shard(stranger, env.store.schema(shard))
            env.store.compare_and_append(stranger, [((7, "kept"), 0, 1)], 0, 1)
            # The catalog records the drop; its finalization is lost (as in a crash).
            env.io.finalize_check = lambda _id: "not now (as if the process died here)"
            await env.drop("gone")
            return f"{gone}|{stranger}"

    gone, stranger = anyio.run(drop_then_leave_a_stranger).split("|")

    async def reopen() -> None:
        async with Environment.open(data, replicas={}, tick_ms=None) as env:
            with anyio.fail_after(30):
                while not env.store.state(gone).finalized:
                    await anyio.sleep(0.05)
            assert not env.store.state(stranger).finalized
            assert env.store.snapshot_rows(stranger, 0) == [((7, "kept"), 0, 1)]
            assert not env.store.state(shard).finalized

    anyio.run(reopen)
    store = ShardStore.open(*default_urls(data))
    try:
        with pytest.raises(ShardFinalized):
            store.snapshot_rows(gone, 0)
    finally:
        store.close()
