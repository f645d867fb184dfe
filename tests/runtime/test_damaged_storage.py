"""Damaged storage fails typed and deletes nothing: sealed catalog and oracle records, a lost catalog.

Found by the simulator's ``bit_rot`` and ``lose_catalog`` faults (and issue 37 #3): a catalog
or oracle record with a flipped byte that still parsed was read as other data, and an open that
found no catalog record started an empty environment that finalized every shard it found.
Catalog and oracle records are now sealed (:mod:`tidegate.runtime.sealed`); an open without a
catalog record over existing shards raises :class:`~tidegate.runtime.errors.CatalogMissing`.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.catalog import (
    DEFAULT_CATALOG_KEY,
    CatalogState,
    CreateTable,
    apply_ops,
    decode_catalog,
    encode_catalog,
)
from tidegate.runtime.errors import CatalogDecodeError, CatalogMissing, OracleError
from tidegate.runtime.oracle import TimestampOracle, decode_oracle_state
from tidegate.runtime.sealed import RecordCorrupt, seal, unseal
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.spec.ids import GlobalId
from tidegate.spec.shard import MemoryConsensus, VersionedData

SCHEMA = Schema.of(("x", "int64", False))


def _catalog() -> CatalogState:
    return apply_ops(CatalogState(), [CreateTable("orders", GlobalId.user(1), SCHEMA)])


def test_a_sealed_record_round_trips_and_an_unsealed_one_is_read_as_it_is() -> None:
    assert unseal("catalog", seal("catalog", b'{"a":1}')) == b'{"a":1}'
    assert unseal("catalog", b'{"a":1}') == b'{"a":1}'  # written before records were sealed
    with pytest.raises(RecordCorrupt):
        unseal("oracle", seal("catalog", b"{}"))  # another kind's record


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_flipped_bit_of_a_catalog_record_fails_typed(data: st.DataObject) -> None:
    record = encode_catalog(_catalog())
    at = data.draw(st.integers(0, len(record) - 1))
    bit = data.draw(st.integers(0, 7))
    rotten = bytearray(record)
    rotten[at] ^= 1 << bit
    with pytest.raises(CatalogDecodeError):
        decode_catalog(bytes(rotten))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**12), st.integers(0, 10**6), st.data())
def test_every_flipped_bit_of_an_oracle_record_fails_typed(
    upper: int, epoch: int, data: st.DataObject
) -> None:
    consensus = MemoryConsensus()
    payload = json.dumps({"epoch": epoch, "upper": upper, "version": 1}, sort_keys=True)
    record = seal("oracle", payload.encode())
    assert decode_oracle_state(record) == (upper, epoch)
    at = data.draw(st.integers(0, len(record) - 1))
    rotten = bytearray(record)
    rotten[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(OracleError):
        decode_oracle_state(bytes(rotten))
    consensus.compare_and_set("tidegate/oracle", None, VersionedData(0, bytes(rotten)))
    with pytest.raises(OracleError):  # an oracle never opens over a damaged record
        TimestampOracle(consensus, clock_ms=lambda: 5)


def test_catalog_and_oracle_records_written_before_sealing_are_still_read() -> None:
    legacy = unseal("catalog", encode_catalog(_catalog()))
    assert decode_catalog(legacy) == _catalog()
    consensus = MemoryConsensus()
    old = json.dumps({"epoch": 3, "upper": 1_000, "version": 1}, sort_keys=True).encode()
    consensus.compare_and_set("tidegate/oracle", None, VersionedData(0, old))
    oracle = TimestampOracle(consensus, clock_ms=lambda: 5)
    assert oracle.epoch == 4 and oracle.write_ts() > 1_000
    head = consensus.head("tidegate/oracle")
    assert head is not None and head.data.startswith(b"tidegate-oracle sha256=")  # sealed now


def _remove_catalog(data_dir: Path) -> list[tuple[int, bytes]]:
    """Delete every version of the catalog record (a wrong copy, a bad restore); what it held."""
    with sqlite3.connect(data_dir / "consensus.db") as db:
        rows = db.execute(
            "SELECT sequence_number, data FROM consensus WHERE shard = ?", (DEFAULT_CATALOG_KEY,)
        ).fetchall()
        db.execute("DELETE FROM consensus WHERE shard = ?", (DEFAULT_CATALOG_KEY,))
    return [(int(n), bytes(d)) for n, d in rows]


def _restore_catalog(data_dir: Path, rows: list[tuple[int, bytes]]) -> None:
    with sqlite3.connect(data_dir / "consensus.db") as db:
        db.executemany(
            "INSERT INTO consensus (shard, sequence_number, data) VALUES (?, ?, ?)",
            [(DEFAULT_CATALOG_KEY, n, d) for n, d in rows],
        )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_open_without_its_catalog_refuses_typed_and_deletes_nothing(
    tmp_path: Path, backend: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
                await env.create_table("orders", SCHEMA)
                await env.append("orders", [(1,), (2,)])
            rows = _remove_catalog(tmp_path)
            assert rows
            for read_only in (False, True):
                with pytest.raises(CatalogMissing) as refused:
                    async with Environment.open(tmp_path, replicas={}, read_only=read_only):
                        pass
                assert refused.value.shards == ("u1",)
                assert "refusing to start" in str(refused.value)
            _restore_catalog(tmp_path, rows)  # an operator restores it: everything is there
            async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
                assert env.resolve("orders") == GlobalId.user(1)
            store = ShardStore.open(*default_urls(tmp_path))
            try:
                state = store.state("u1")
                assert not state.finalized
                (upper,) = state.upper.elements
                rows_now = sorted(r for r, _t, d in store.snapshot_rows("u1", upper - 1))
                assert rows_now == [(1,), (2,)]
            finally:
                store.close()

    anyio.run(main, backend=backend)
