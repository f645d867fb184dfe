"""Inline batches: a small append is stored in the shard's state, not in a blob.

Persist's inline writes: a batch whose encoding is at most ``inline_max_bytes``
travels in the consensus record (one durable write per append instead of a blob
write and a consensus write), while the state's inline bytes stay within
``inline_total_max_bytes``; compaction moves them into blobs.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pyarrow as pa
import pytest

from tidegate.runtime.storage import MemoryBlob, MemoryConsensus, ShardStore, default_urls
from tidegate.runtime.storage.arrow_batches import decode_batch
from tidegate.spec.errors import BlobCorrupt, ConsensusCorrupt, Indeterminate
from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import INLINE_PREFIX, CompactionPolicy

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _store(**kwargs: object) -> ShardStore:
    store = ShardStore(MemoryBlob(), MemoryConsensus(), auto_compact=False, **kwargs)  # type: ignore[arg-type]
    store.create_shard("s", SCHEMA)
    return store


def test_a_small_append_is_inline_and_writes_no_blob() -> None:
    store = _store()
    store.compare_and_append("s", [((1, "a"), 0, 1), ((2, "b"), 0, 1)], 0, 1)
    (batch,) = store.state("s").batches
    assert batch.is_inline and batch.key.startswith(INLINE_PREFIX)
    assert batch.digest is not None and batch.length == 2
    assert store.blob.list_keys() == []
    assert sorted(store.snapshot_rows("s", 0)) == [((1, "a"), 0, 1), ((2, "b"), 0, 1)]


def test_a_large_append_goes_to_a_blob() -> None:
    store = _store(inline_max_bytes=4096)
    rows = [((i, f"name-{i:06d}-" + "x" * 40), 0, 1) for i in range(2_000)]
    store.compare_and_append("s", rows, 0, 1)
    (batch,) = store.state("s").batches
    assert not batch.is_inline
    assert [m.key for m in store.blob.list_keys("s/")] == [batch.key]
    assert len(store.snapshot_rows("s", 0)) == 2_000


def test_inline_batches_stop_at_the_total_cap_and_blobs_take_over() -> None:
    store = _store(inline_max_bytes=4096, inline_total_max_bytes=2_000)  # room for a few
    for t in range(12):
        store.compare_and_append("s", [((t, "r"), t, 1)], t, t + 1)
    state = store.state("s")
    inline = [b for b in state.batches if b.is_inline]
    assert inline and len(inline) < 12  # some inline, then blobs
    assert state.inline_bytes <= 2_000
    assert len(store.blob.list_keys("s/")) == 12 - len(inline)
    assert sorted(r for r, _t, _d in store.snapshot_rows("s", 11)) == [(t, "r") for t in range(12)]


def test_zero_turns_inline_writes_off() -> None:
    store = _store(inline_max_bytes=0)
    store.compare_and_append("s", [((1, "a"), 0, 1)], 0, 1)
    assert not store.state("s").batches[0].is_inline
    assert len(store.blob.list_keys("s/")) == 1


def test_compaction_moves_inline_batches_into_a_blob() -> None:
    store = _store()
    for t in range(6):
        store.compare_and_append("s", [((t, "r"), t, 1)], t, t + 1)
    before = sorted(store.snapshot_rows("s", 5))
    assert store.state("s").inline_bytes > 0
    store.compact("s", CompactionPolicy(max_batches=1))
    state = store.state("s")
    assert state.inline_bytes == 0 and len(state.batches) == 1
    assert len(store.blob.list_keys("s/")) == 1
    assert sorted(store.snapshot_rows("s", 5)) == before
    assert store.collect_garbage("s", min_age_s=0) == 0  # nothing orphaned


def test_inline_batches_survive_a_reopen(tmp_path: Path) -> None:
    store = ShardStore.open(*default_urls(tmp_path), auto_compact=False)
    store.create_shard("s", SCHEMA)
    store.compare_and_append("s", [((1, "a"), 0, 1)], 0, 1)
    store.append("s", [((2, "b"), 1, 1)], 1, 2)
    store.close()
    again = ShardStore.open(*default_urls(tmp_path), auto_compact=False)
    assert all(b.is_inline for b in again.state("s").batches)
    assert sorted(again.snapshot_rows("s", 1)) == [((1, "a"), 1, 1), ((2, "b"), 1, 1)]
    again.close()


def test_a_changed_byte_of_inline_data_is_consensus_corrupt() -> None:
    store = _store()
    store.compare_and_append("s", [((1, "a"), 0, 1)], 0, 1)
    head = store.consensus.head("s")
    assert head is not None
    data = bytearray(head.data)
    inline = store.state("s").batches[0].inline
    assert inline is not None
    where = data.index(base64.b64encode(inline)) + 10  # inside the inline batch's base64
    data[where] ^= 0x01
    records = store.consensus._log["s"]  # type: ignore[attr-defined]
    records[-1] = type(head)(head.seqno, bytes(data))
    with pytest.raises(ConsensusCorrupt):
        store.snapshot_rows("s", 0)


def test_an_inline_append_retried_after_an_unknown_outcome_lands_once() -> None:
    class CommitThenFail:
        def __init__(self, inner: MemoryConsensus) -> None:
            self.inner, self.fail = inner, True

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def compare_and_set(self, key: str, expected: int | None, new: object) -> bool:
            ok = self.inner.compare_and_set(key, expected, new)  # type: ignore[arg-type]
            if self.fail:
                self.fail = False
                raise ConnectionError("lost the reply")
            return ok

    store = _store()
    flaky = ShardStore(store.blob, CommitThenFail(store.consensus), auto_compact=False)  # type: ignore[arg-type]
    with pytest.raises(Indeterminate):
        flaky.compare_and_append("s", [((7, "z"), 0, 1)], 0, 1, "tok-1")
    assert flaky.compare_and_append("s", [((7, "z"), 0, 1)], 0, 1, "tok-1") == Antichain([1])
    assert store.snapshot_rows("s", 0) == [((7, "z"), 0, 1)]
    assert len(store.state("s").batches) == 1


def test_an_inline_batch_is_an_arrow_ipc_message_and_garbage_in_one_is_blob_corrupt() -> None:
    """Inline batches are Arrow IPC record-batch messages (the shard records the schema):
    a one-row batch is a few hundred bytes, and a mangled message is a typed error."""
    store = _store()
    store.compare_and_append("s", [((1, "a"), 0, 1)], 0, 1)
    (batch,) = store.state("s").batches
    assert batch.inline is not None and batch.inline[:4] == b"\xff\xff\xff\xff"
    assert len(batch.inline) < 1_000
    table = decode_batch("s", batch.key, batch.inline, SCHEMA)
    assert table.to_pylist() == [{"id": 1, "name": "a", "__time": 0, "__diff": 1}]
    with pytest.raises(BlobCorrupt):
        decode_batch("s", batch.key, batch.inline[:40], SCHEMA)


class _CountingConsensus:
    """A consensus that counts its writes (the fsync'd operation of a real one)."""

    def __init__(self) -> None:
        self.inner, self.writes = MemoryConsensus(), 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def compare_and_set(self, key: str, expected: int | None, new: object) -> bool:
        self.writes += 1
        return self.inner.compare_and_set(key, expected, new)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["compare_and_append", "append"])
def test_small_inline_batches_merge_inline_in_the_appends_own_writes(how: str) -> None:
    """Maintenance keeps the batch count within the policy, and while the inline bytes stay
    small it merges earlier inline batches into an inline batch that the append itself
    commits: one consensus write per append, no blob, every update still there, and the
    append's own batch left whole."""
    consensus = _CountingConsensus()
    policy = CompactionPolicy(max_batches=4)
    store = ShardStore(MemoryBlob(), consensus, policy=policy)  # type: ignore[arg-type]
    store.create_shard("s", SCHEMA)
    log = []
    for t in range(40):
        before = consensus.writes
        update = ((t, "r"), t, 1)
        getattr(store, how)("s", [update], t, t + 1)
        log.append(update)
        state = store.state("s")
        assert consensus.writes == before + 1
        last = state.batches[-1]  # the append's own batch, whole: followers read just it
        assert (last.lower, last.length, last.is_inline) == (Antichain([t]), 1, True)
        assert len(state.batches) <= policy.max_batches + 1
        assert state.inline_bytes <= policy.inline_held_max_bytes
        assert sorted(store.snapshot_rows("s", t)) == [((r, "r"), t, 1) for r in range(t + 1)]
    assert store.blob.list_keys() == []
    assert len(store.state("s").batches) < 40  # merged, all inline
    assert store.last_maintenance_error is None


def test_inline_bytes_past_the_policy_s_limit_are_merged_into_a_blob() -> None:
    policy = CompactionPolicy(max_batches=4, inline_held_max_bytes=3_000)
    store = ShardStore(MemoryBlob(), MemoryConsensus(), policy=policy)
    store.create_shard("s", SCHEMA)
    for t in range(60):
        store.compare_and_append("s", [((t, "name-" + "x" * 30), t, 1)], t, t + 1)
        assert store.state("s").inline_bytes <= 3_000 + 1_000  # at most one append over
    state = store.state("s")
    assert any(not b.is_inline for b in state.batches)
    assert len(store.snapshot_rows("s", 59)) == 60
    assert store.last_maintenance_error is None
