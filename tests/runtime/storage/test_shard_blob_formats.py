"""Blob formats: a small blob is an Arrow IPC message, a large one Parquet; reads take both.

Small blobs (fewer rows than the policy's ``small_len``, at most ``blob_ipc_max_bytes``)
are the ones maintenance merges again soon, and Parquet's fixed costs dominate them;
the others stay and are written compactly. The format is told by the bytes, not the
key, so stores with different settings share a shard.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.controller.schemas import arrow_schema
from tidegate.runtime.storage import MemoryBlob, MemoryConsensus, ShardStore, default_urls
from tidegate.runtime.storage.arrow_batches import (
    IPC_SUFFIX,
    PARQUET_SUFFIX,
    batch_schema,
    decode_batch,
    encode_blob,
    table_from_updates,
)
from tidegate.spec.frontier import consolidate
from tidegate.spec.plan import Schema
from tidegate.spec.plan.numeric import reduce
from tidegate.spec.shard import CompactionPolicy

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("x", pa.float64())])
IPC_MAGIC, PARQUET_MAGIC = b"\xff\xff\xff\xff", b"PAR1"


def _rows(first: int, n: int, t: int) -> list[tuple[tuple[int, str, float], int, int]]:
    return [((i, f"name-{i}", i / 4), t, 1) for i in range(first, first + n)]


def _store(**kwargs: object) -> ShardStore:
    store = ShardStore(
        MemoryBlob(),
        MemoryConsensus(),
        auto_compact=False,
        inline_max_bytes=0,  # every batch a blob
        **kwargs,  # type: ignore[arg-type]
    )
    store.create_shard("s", SCHEMA)
    return store


def test_a_small_blob_is_an_ipc_message_and_a_large_one_parquet() -> None:
    store = _store(blob_ipc_max_bytes=4_096)
    store.compare_and_append("s", _rows(0, 10, 0), 0, 1)
    store.compare_and_append("s", _rows(10, 1_000, 1), 1, 2)
    small, large = store.state("s").batches
    assert small.key.endswith(IPC_SUFFIX) and large.key.endswith(PARQUET_SUFFIX)
    assert store.blob.get(small.key)[:4] == IPC_MAGIC
    assert store.blob.get(large.key)[:4] == PARQUET_MAGIC
    assert sorted(store.snapshot_rows("s", 1)) == _rows(0, 1_010, 1)


def test_a_blob_maintenance_leaves_alone_is_parquet_however_few_its_bytes() -> None:
    """At least ``small_len`` rows: maintenance will not merge it again, so it is compact."""
    store = _store(policy=CompactionPolicy(small_len=100))
    store.compare_and_append("s", _rows(0, 99, 0), 0, 1)
    store.compare_and_append("s", _rows(99, 100, 1), 1, 2)
    merged_again, stays = store.state("s").batches
    assert merged_again.key.endswith(IPC_SUFFIX) and stays.key.endswith(PARQUET_SUFFIX)


def test_zero_writes_parquet_only() -> None:
    store = _store(blob_ipc_max_bytes=0)
    store.compare_and_append("s", _rows(0, 3, 0), 0, 1)
    (batch,) = store.state("s").batches
    assert batch.key.endswith(PARQUET_SUFFIX)
    assert store.blob.get(batch.key)[:4] == PARQUET_MAGIC


def test_stores_with_either_setting_share_a_shard_and_merge_across_formats(tmp_path: Path) -> None:
    """A shard written by a Parquet-only store and by one writing IPC blobs: each reads,
    listens to and compacts the other's batches, and the merged contents stay exact."""
    urls = default_urls(tmp_path)
    parquet = ShardStore.open(*urls, auto_compact=False, inline_max_bytes=0, blob_ipc_max_bytes=0)
    ipc = ShardStore.open(*urls, auto_compact=False, inline_max_bytes=0)
    try:
        parquet.create_shard("s", SCHEMA)
        listener = ipc.listen("s", 0)
        written = []
        for t in range(6):
            writer = parquet if t % 2 else ipc
            rows = _rows(t * 5, 5, t)
            if t == 3:  # retracts a row another format holds: consolidation spans both
                rows.append(((0, "name-0", 0.0), t, -1))
            writer.compare_and_append("s", rows, t, t + 1)
            written += rows
        suffixes = {b.key[b.key.rindex(".") :] for b in ipc.state("s").batches}
        assert suffixes == {IPC_SUFFIX, PARQUET_SUFFIX}
        event = listener.poll()
        assert event is not None
        assert consolidate(event.updates) == consolidate([u for u in written if u[1] > 0])
        expected = consolidate([(row, 5, d) for row, _, d in written])
        assert sorted(parquet.snapshot_rows("s", 5)) == sorted(expected)
        ipc.compact("s", CompactionPolicy(max_batches=1))  # one IPC blob from both formats
        (merged,) = ipc.state("s").batches
        assert merged.key.endswith(IPC_SUFFIX)
        assert sorted(parquet.snapshot_rows("s", 5)) == sorted(expected)
    finally:
        parquet.close()
        ipc.close()


_values = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.none() | st.text(max_size=12),
    st.none() | st.floats(allow_nan=False),
)


@given(
    rows=st.lists(st.tuples(_values, st.integers(0, 2**40), st.integers(-3, 3)), min_size=1),
    ipc=st.booleans(),
)
def test_a_blob_decodes_to_the_table_it_was_encoded_from(
    rows: list[tuple[tuple[int, str | None, float | None], int, int]], ipc: bool
) -> None:
    table = table_from_updates("s", rows, SCHEMA)
    data, suffix = encode_blob(table, ipc=ipc)
    assert suffix == (IPC_SUFFIX if ipc else PARQUET_SUFFIX)
    assert data[:4] == (IPC_MAGIC if ipc else PARQUET_MAGIC)
    decoded = decode_batch("s", f"s/k{suffix}", data, SCHEMA)
    assert decoded.schema.equals(batch_schema(SCHEMA))
    assert decoded.equals(table)


@pytest.mark.parametrize("ipc", [False, True])
def test_an_empty_table_is_parquet(ipc: bool) -> None:
    """No rows have no IPC message: such a blob is Parquet, whatever was asked."""
    empty = table_from_updates("s", [], SCHEMA)
    data, suffix = encode_blob(empty, ipc=ipc)
    assert suffix == PARQUET_SUFFIX
    assert decode_batch("s", "s/k.parquet", data, SCHEMA).num_rows == 0


NUMERIC_SCHEMA = arrow_schema(Schema.of(("k", "int64", False), ("n", "numeric")))
_NUMERICS = st.builds(
    lambda i, e: reduce(Decimal(i).scaleb(-e)), st.integers(-(10**45), 10**45), st.integers(-3, 40)
)


@given(
    st.lists(st.tuples(st.none() | _NUMERICS, st.integers(-2, 2)), min_size=1, max_size=20),
    st.sampled_from([0, 4_096]),
    st.sampled_from([0, 1 << 20]),
)
def test_numerics_round_trip_the_shard_store_in_every_format(
    values: list[tuple[Decimal | None, int]], ipc_max: int, inline_max: int
) -> None:
    """Numerics of any digits and scale (beyond float64 and Arrow's decimal128) come back
    exactly from inline batches, IPC and Parquet blobs, and a compaction of them."""
    store = ShardStore(
        MemoryBlob(),
        MemoryConsensus(),
        auto_compact=False,
        inline_max_bytes=inline_max,
        blob_ipc_max_bytes=ipc_max,
    )
    store.create_shard("n", NUMERIC_SCHEMA)
    updates = [((k, v), k % 3, d or 1) for k, (v, d) in enumerate(values)]
    for t in range(3):
        store.compare_and_append("n", [u for u in updates if u[1] == t], t, t + 1)
    expected = consolidate([(row, 2, d) for row, _, d in updates])
    assert sorted(store.snapshot_rows("n", 2), key=repr) == sorted(expected, key=repr)
    store.compact("n", CompactionPolicy(max_batches=1))
    got = store.snapshot_rows("n", 2)
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert all(type(row[1]) is Decimal for row, _, _ in got if row[1] is not None)


NARROW_SCHEMA = arrow_schema(
    Schema.of(("k", "int64", False), ("a", "int16"), ("b", "int32"), ("c", "float32"))
)
_SINGLES = st.floats(width=32, allow_nan=False)


@given(
    st.lists(
        st.tuples(
            st.none() | st.integers(-(2**15), 2**15 - 1),
            st.none() | st.integers(-(2**31), 2**31 - 1),
            st.none() | _SINGLES,
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([0, 4_096]),
    st.sampled_from([0, 1 << 20]),
)
def test_smallints_integers_and_reals_round_trip_the_shard_store_in_every_format(
    values: list[tuple[int | None, int | None, float | None]], ipc_max: int, inline_max: int
) -> None:
    """Columns of int16, int32 and float32 (Arrow's own types) come back as the same values
    from inline batches, IPC and Parquet blobs, and a compaction: a real keeps its single."""
    store = ShardStore(
        MemoryBlob(),
        MemoryConsensus(),
        auto_compact=False,
        inline_max_bytes=inline_max,
        blob_ipc_max_bytes=ipc_max,
    )
    store.create_shard("n", NARROW_SCHEMA)
    updates = [((k, *v), k % 3, 1) for k, v in enumerate(values)]
    for t in range(3):
        store.compare_and_append("n", [u for u in updates if u[1] == t], t, t + 1)
    expected = consolidate([(row, 2, d) for row, _, d in updates])
    store.compact("n", CompactionPolicy(max_batches=1))
    got = store.snapshot_rows("n", 2)
    assert sorted(got, key=repr) == sorted(expected, key=repr)
