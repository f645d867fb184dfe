"""The shard store's documented behaviour, on the in-memory, the local (file + SQLite) and the
networked (S3 + PostgreSQL, started by the tests) backends.

Every store here writes each batch to a blob (``inline_max_bytes=0``): these tests look at
blobs; batches stored inline in the state are tested in ``test_shard_inline.py``."""

from __future__ import annotations

import random
import threading
import uuid

import pyarrow as pa
import pytest

from tidegate.runtime.storage import (
    MemoryBlob,
    MemoryConsensus,
    ShardStore,
    VersionedData,
    default_urls,
)
from tidegate.spec.errors import (
    AppendGap,
    BlobCorrupt,
    BlobMissing,
    FinalizationNotReady,
    Indeterminate,
    InvalidShardBounds,
    InvalidUpdates,
    SchemaMismatch,
    ShardFinalized,
    SinceRegression,
    SnapshotBeforeSince,
    SnapshotNotReady,
    UnknownShard,
    UnsupportedStateVersion,
    UpperMismatch,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import CompactionPolicy, snapshot_updates

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


class _Namespaced:
    """A consensus view that prefixes keys, so tests can share one server."""

    def __init__(self, inner, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def head(self, key):
        return self.inner.head(self.prefix + key)

    def compare_and_set(self, key, expected, new):
        return self.inner.compare_and_set(self.prefix + key, expected, new)

    def scan(self, key, from_seqno, limit):
        return self.inner.scan(self.prefix + key, from_seqno, limit)

    def truncate(self, key, seqno):
        return self.inner.truncate(self.prefix + key, seqno)

    def list_keys(self):
        n = len(self.prefix)
        return [k[n:] for k in self.inner.list_keys() if k.startswith(self.prefix)]


@pytest.fixture(
    params=[
        "mem",
        "local",
        pytest.param("s3+postgres", marks=[pytest.mark.processes, pytest.mark.postgres]),
    ]
)
def store(request, tmp_path) -> ShardStore:
    if request.param == "mem":
        s = ShardStore(MemoryBlob(), MemoryConsensus(), auto_compact=False, inline_max_bytes=0)
    elif request.param == "local":
        s = ShardStore.open(*default_urls(tmp_path), auto_compact=False, inline_max_bytes=0)
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        pg = request.getfixturevalue("postgres_url")
        prefix = uuid.uuid4().hex
        s = ShardStore.open(
            f"s3://tidegate/{prefix}?endpoint={endpoint}",
            pg,
            auto_compact=False,
            inline_max_bytes=0,
        )
        # One PostgreSQL database serves every test: give each its own shard namespace.
        s.consensus = _Namespaced(s.consensus, prefix)
    s.create_shard("u1", SCHEMA)
    return s


def heads(store: ShardStore) -> VersionedData | None:
    return store.consensus.head("u1")


def test_append_snapshot_and_rows(store):
    assert store.compare_and_append("u1", [((1, "a"), 0, 1), ((2, "b"), 1, 1)], 0, 2) == Antichain(
        [2]
    )
    store.compare_and_append("u1", [((1, "a"), 2, -1), ((1, "a"), 2, 1), ((3, None), 3, 2)], 2, 5)
    assert store.snapshot_rows("u1", 0) == [((1, "a"), 0, 1)]
    assert store.snapshot_rows("u1", 4) == [((1, "a"), 4, 1), ((2, "b"), 4, 1), ((3, None), 4, 2)]
    t = store.snapshot("u1", 4)
    assert t.schema.names == ["id", "name", "__time", "__diff"] and t.num_rows == 3
    assert sum(b.num_rows for b in store.snapshot_batches("u1", 4)) == 3


def test_arrow_append(store):
    t = pa.table({"name": ["x", "y"], "id": [1, 2], "__time": [0, 0], "__diff": [1, 1]})
    store.compare_and_append("u1", t, 0, 1)
    assert store.snapshot_rows("u1", 0) == [((1, "x"), 0, 1), ((2, "y"), 0, 1)]


def test_upper_mismatch_changes_nothing(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 3)
    before = heads(store)
    blobs = store.blob.list_keys()
    with pytest.raises(UpperMismatch) as e:
        store.compare_and_append("u1", [((1, "a"), 1, 1)], 1, 4)
    assert e.value.actual_upper == Antichain([3])
    assert heads(store) == before and store.blob.list_keys() == blobs


@pytest.mark.parametrize(
    "updates,lo,hi,err",
    [
        ([((1, "a"), 5, 1)], 0, 3, InvalidUpdates),
        ([((1, "a"), 0, 1)], 0, 0, InvalidShardBounds),
        ([((1, "a"), -1, 1)], 0, 3, InvalidUpdates),
        ([((1,), 0, 1)], 0, 3, SchemaMismatch),
        ([(("one", "a"), 0, 1)], 0, 3, SchemaMismatch),
        (pa.table({"id": [1], "__time": [0], "__diff": [1]}), 0, 3, SchemaMismatch),
        (pa.table({"id": [1], "name": [2], "__time": [0], "__diff": [1]}), 0, 3, SchemaMismatch),
    ],
)
def test_bad_appends_are_rejected_and_change_nothing(store, updates, lo, hi, err):
    before = heads(store)
    with pytest.raises(err) as e:
        store.compare_and_append("u1", updates, lo, hi)
    assert e.value.shard == "u1"
    assert heads(store) == before and store.blob.list_keys() == []


def test_create_shard_is_idempotent_and_checks_schema(store):
    assert store.create_shard("u1", SCHEMA).schema is not None
    with pytest.raises(SchemaMismatch):
        store.create_shard("u1", pa.schema([("id", pa.int32())]))
    with pytest.raises(UnknownShard):
        store.upper("nope")


def test_idempotent_retry_after_unknown_outcome(store):
    class CommitThenFail:
        def __init__(self, inner):
            self.inner, self.fail = inner, True

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def compare_and_set(self, key, expected, new):
            ok = self.inner.compare_and_set(key, expected, new)
            if self.fail:
                self.fail = False
                raise ConnectionError("lost the reply")
            return ok

    flaky = ShardStore(
        store.blob,
        CommitThenFail(store.consensus),
        writer_id="w1",
        auto_compact=False,
        inline_max_bytes=0,
    )
    with pytest.raises(Indeterminate):
        flaky.compare_and_append("u1", [((7, "z"), 0, 1)], 0, 1, "tok-1")
    assert flaky.compare_and_append("u1", [((7, "z"), 0, 1)], 0, 1, "tok-1") == Antichain([1])
    assert store.snapshot_rows("u1", 0) == [((7, "z"), 0, 1)]
    assert len(store.blob.list_keys("u1/")) == 1  # the retry's blob was removed


def test_readers_and_since(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1), ((1, "a"), 3, 1)], 0, 5)
    r = store.register_leased_reader("u1")
    assert store.register_critical_reader("u1", "controller") == Antichain([0])
    assert store.downgrade_since("u1", r, 3) == Antichain([0])
    assert store.downgrade_since("u1", "controller", 2) == Antichain([2])
    with pytest.raises(SinceRegression):
        store.downgrade_since("u1", "controller", 1)
    with pytest.raises(SnapshotBeforeSince):
        store.snapshot("u1", 1)
    with pytest.raises(SnapshotNotReady):
        store.snapshot("u1", 5)
    assert store.release_reader("u1", "controller") == Antichain([3])


def test_leased_readers_expire_on_the_clock(store):
    now = [0]
    s = ShardStore(
        store.blob, store.consensus, clock_ms=lambda: now[0], auto_compact=False, inline_max_bytes=0
    )
    r = s.register_leased_reader("u1", lease_ms=100)
    s.register_leased_reader("u1", "other", lease_ms=1_000)
    s.downgrade_since("u1", "other", 4)
    now[0] = 500
    assert s.expire_readers("u1") == Antichain([4])
    assert r not in s.state("u1").leased_readers
    s.compare_and_append("u1", [], 0, 1, "tok")
    assert set(s.state("u1").writers) == {s.writer_id}
    now[0] = 500 + 3_600_001
    s.expire_readers("u1")
    assert dict(s.state("u1").writers) == {}
    with pytest.raises(UpperMismatch):  # the forgotten token cannot append twice
        s.compare_and_append("u1", [], 0, 1, "tok")


def test_listen_follows_appends(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 1)
    with store.listen("u1", 0) as listener:
        assert listener.poll() is None
        store.compare_and_append("u1", [((2, "b"), 1, 1), ((3, "c"), 2, 1)], 1, 3)
        ev = listener.poll()
        assert sorted(ev.updates) == [((2, "b"), 1, 1), ((3, "c"), 2, 1)]
        assert ev.progress == Antichain([3])
        store.compare_and_append("u1", [], 3, 4)
        ev = listener.next(timeout_s=1)
        assert ev.updates == [] and ev.progress == Antichain([4])
        store.compare_and_append("u1", [((4, "d"), 4, -1)], 4, Antichain())
        ev = listener.next(timeout_s=1)
        assert ev.updates == [((4, "d"), 4, -1)] and ev.progress == Antichain()
        assert list(listener) == []
    assert store.state("u1").leased_readers == {}


def test_listen_holds_since_against_compaction(store):
    for i in range(6):
        store.compare_and_append("u1", [((i, "x"), i, 1)], i, i + 1)
    listener = store.listen("u1", 2)
    store.register_critical_reader("u1", "c")
    store.downgrade_since("u1", "c", 6)
    store.compact("u1", CompactionPolicy(max_batches=1, small_len=100))
    assert store.since("u1") == Antichain([2])
    ev = listener.poll()
    assert sorted(ev.updates) == [((3, "x"), 3, 1), ((4, "x"), 4, 1), ((5, "x"), 5, 1)]
    listener.close()


def test_compaction_preserves_snapshots_and_collects_blobs(store):
    log = []
    for i in range(60):
        ups = [((i % 7, "n"), i, 1 if i % 3 else -1), ((i, "m"), i, 1)]
        store.compare_and_append("u1", ups, i, i + 1)
        log.extend(ups)
    store.register_critical_reader("u1", "c")
    store.downgrade_since("u1", "c", 20)
    report = store.compact("u1", CompactionPolicy(max_batches=4, small_len=1_000))
    assert report.batches_before == 60 and report.batches_after <= 4 and report.merges >= 1
    for as_of in (20, 35, 59):
        assert store.snapshot_rows("u1", as_of) == snapshot_updates(log, as_of)
    live = set(store.state("u1").batch_keys)
    assert {m.key for m in store.blob.list_keys("u1/")} == live


def test_auto_compaction_bounds_batch_count(store):
    s = ShardStore(
        store.blob,
        store.consensus,
        policy=CompactionPolicy(max_batches=5, small_len=10),
        inline_max_bytes=0,
    )
    for i in range(30):
        s.compare_and_append("u1", [((i, "a"), i, 1)], i, i + 1)
    assert len(s.state("u1").batches) <= 6
    assert len(s.snapshot_rows("u1", 29)) == 30


def test_automatic_maintenance_merges_the_recent_small_batches_not_the_oldest_large_one(store):
    """Under a stream of small appends, maintenance merges small batches among themselves
    (size tiers) instead of rewriting the large first batch on every merge, as merging the
    earliest run did."""
    s = ShardStore(
        store.blob,
        store.consensus,
        policy=CompactionPolicy(max_batches=5, small_len=50_000),
        inline_max_bytes=0,
    )
    s.compare_and_append("u1", [((i, "big"), 0, 1) for i in range(20_000)], 0, 1)
    (big,) = s.state("u1").batch_keys
    for t in range(1, 40):
        s.compare_and_append("u1", [((-t, "a"), t, 1)], t, t + 1)
    state = s.state("u1")
    assert len(state.batches) <= 6
    assert state.batch_keys[0] == big  # never rewritten
    assert len(s.snapshot_rows("u1", 39)) == 20_039


def test_corrupt_and_missing_blobs_name_shard_and_key(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 1)
    store.compare_and_append("u1", [((2, "b"), 1, 1)], 1, 2)
    store.compare_and_append("u1", [((3, "c"), 2, 1)], 2, 3)
    _k0, k1, k2 = store.state("u1").batch_keys
    original = store.blob.get(k1)
    store.blob.set(k1, b"garbage")
    store.blob.delete(k2)
    with pytest.raises(BlobCorrupt) as e:
        store.snapshot("u1", 1)
    assert e.value.shard == "u1" and e.value.key == k1 and k1 in str(e.value)
    assert store.snapshot_rows("u1", 0) == [((1, "a"), 0, 1)]  # intact part still readable
    store.blob.set(k1, store.blob.get(_k0))  # another batch's file is not k1's: still corrupt
    with pytest.raises(BlobCorrupt):
        store.snapshot("u1", 1)
    store.blob.set(k1, original)  # repair k1 with its own bytes; k2 stays missing
    with pytest.raises(BlobMissing) as m:
        store.snapshot("u1", 2)
    assert m.value.key == k2 and k2 in str(m.value)
    store.compare_and_append("u1", [((4, "d"), 3, 1)], 3, 4)  # and writable
    assert store.upper("u1") == Antichain([4])


def test_newer_format_state_is_rejected(store):
    head = store.consensus.head("u1")
    store.consensus.compare_and_set(
        "u1", head.seqno, VersionedData(head.seqno + 1, b'{"format": 99}')
    )
    with pytest.raises(UnsupportedStateVersion) as e:
        store.compare_and_append("u1", [], 0, 1)
    assert "u1" in str(e.value) and "99" in str(e.value)


def test_finalize(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 2)
    store.register_critical_reader("u1", "c")
    with pytest.raises(FinalizationNotReady):
        store.finalize_shard("u1")
    store.compare_and_append("u1", [], 2, Antichain())
    store.downgrade_since("u1", "c", Antichain())
    store.finalize_shard("u1")
    assert store.state("u1").finalized and store.blob.list_keys("u1/") == []
    for call in (
        lambda: store.compare_and_append("u1", [], 2, 3),
        lambda: store.snapshot("u1", 0),
        lambda: store.register_leased_reader("u1"),
        lambda: store.downgrade_since("u1", "c", 3),
    ):
        with pytest.raises(ShardFinalized):
            call()


def test_force_finalize_and_orphan_collection(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 2)
    store.blob.set("u1/orphan.parquet", b"left by a crash")
    assert store.collect_garbage("u1", min_age_s=0) == 1
    store.finalize_shard("u1", force=True)
    assert store.blob.list_keys() == []


def test_background_compaction(store):
    policy = CompactionPolicy(max_batches=3, small_len=10)
    s = ShardStore(store.blob, store.consensus, background=True, policy=policy, inline_max_bytes=0)
    for i in range(25):
        s.compare_and_append("u1", [((i, "a"), i, 1)], i, i + 1)
    s.close()
    assert s.last_maintenance_error is None
    assert len(s.state("u1").batches) <= 4
    assert len(s.snapshot_rows("u1", 24)) == 25


def test_wait_for_upper(store):
    import threading

    timer = threading.Timer(0.05, lambda: store.compare_and_append("u1", [], 0, 3))
    timer.start()
    assert store.wait_for_upper("u1", 1, timeout_s=10) == Antichain([3])
    timer.join()
    assert store.wait_for_upper("u1", 5, timeout_s=0.05) == Antichain([3])


def test_listen_before_since_is_refused_and_holds_nothing(store):
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 5)
    store.register_critical_reader("u1", "c")
    store.downgrade_since("u1", "c", 3)
    with pytest.raises(SnapshotBeforeSince):
        store.listen("u1", 2)
    assert set(store.state("u1").leased_readers) == set()


def test_urls_pick_backends(tmp_path):
    from tidegate.runtime.storage import FileBlob, SqliteConsensus, open_blob, open_consensus

    blob_url, consensus_url = default_urls(tmp_path)
    assert isinstance(open_blob(blob_url), FileBlob)
    assert isinstance(open_consensus(consensus_url), SqliteConsensus)
    assert open_blob("mem://x") is open_blob("mem://x")
    assert open_consensus("mem://x") is open_consensus("mem://x")
    for bad in ("ftp://x", "file://host/x"):
        with pytest.raises(ValueError):
            open_blob(bad)
    with pytest.raises(ValueError):
        open_consensus("mysql://x")


# -- empty appends -------------------------------------------------------------------------------

EMPTY = pa.table(
    {
        "id": pa.array([], pa.int64()),
        "name": pa.array([], pa.string()),
        "__time": pa.array([], pa.int64()),
        "__diff": pa.array([], pa.int64()),
    }
)


@pytest.mark.parametrize("updates", [[], EMPTY], ids=["tuples", "arrow"])
def test_an_empty_append_at_the_upper_is_a_no_op(store, updates):
    """No updates with ``expected == new ==`` the upper succeeds and writes nothing (persist's
    no-op); the store used to refuse it with InvalidShardBounds."""
    store.compare_and_append("u1", [((1, "a"), 0, 1)], 0, 3)
    before, blobs = heads(store), store.blob.list_keys()
    assert store.compare_and_append("u1", updates, 3, 3) == Antichain([3])
    assert store.compare_and_append(
        "u1", updates, Antichain([3]), Antichain([3]), "t"
    ) == Antichain([3])
    assert heads(store) == before and store.blob.list_keys() == blobs
    with pytest.raises(UpperMismatch) as e:  # not at the upper: a mismatch, as usual
        store.compare_and_append("u1", updates, 2, 2)
    assert e.value.actual_upper == Antichain([3])
    store.compare_and_append("u1", [], 3, Antichain())
    assert store.compare_and_append("u1", updates, Antichain(), Antichain()) == Antichain()


# -- the truncating append (persist's non-CAS ``append``) ----------------------------------------


def rows(*times: int) -> list[tuple[tuple[int, str], int, int]]:
    """One update per time: row ``(t, "r<t>")`` at ``t``."""
    return [((t, f"r{t}"), t, 1) for t in times]


def blob_keys(store: ShardStore) -> set[str]:
    return {m.key for m in store.blob.list_keys("u1/")}


def test_truncating_append_stores_only_what_the_shard_lacks(store):
    store.compare_and_append("u1", rows(0, 1, 2), 0, 3)
    assert store.append("u1", rows(1, 2, 3, 4), 1, 5) == Antichain([5])
    assert store.snapshot_rows("u1", 4) == [(r, 4, 1) for r, _t, _d in rows(0, 1, 2, 3, 4)]
    last = store.state("u1").batches[-1]
    assert (last.lower, last.upper, last.length) == (Antichain([3]), Antichain([5]), 2)
    assert blob_keys(store) == set(store.state("u1").batch_keys)  # cut before writing


def test_truncating_append_at_the_upper_is_compare_and_append(store):
    store.append("u1", rows(0, 1), 0, 2)
    store.compare_and_append("u1", rows(2), 2, 3)
    s = store.state("u1")
    assert [(b.lower, b.upper, b.length) for b in s.batches] == [
        (Antichain([0]), Antichain([2]), 2),
        (Antichain([2]), Antichain([3]), 1),
    ]
    assert store.append("u1", [], 3, 7) == Antichain([7]) == store.upper("u1")


def test_truncating_append_the_shard_covers_writes_nothing(store):
    store.compare_and_append("u1", rows(0, 1, 2), 0, 3)
    store.compare_and_append("u1", [], 3, Antichain([4]))
    before, blobs = heads(store), store.blob.list_keys()
    assert store.append("u1", rows(0, 1), 0, 2) == Antichain([4])
    assert store.append("u1", rows(1, 2, 3), 1, 4) == Antichain([4])
    assert store.append("u1", [], 4, 4) == Antichain([4])
    assert heads(store) == before and store.blob.list_keys() == blobs


def test_truncating_append_after_a_gap_is_refused(store):
    store.compare_and_append("u1", [], 0, 3)
    before = heads(store)
    with pytest.raises(AppendGap) as e:
        store.append("u1", rows(4, 5), 4, 6)
    assert (e.value.shard, e.value.lower, e.value.actual_upper) == (
        "u1",
        Antichain([4]),
        Antichain([3]),
    )
    assert heads(store) == before and store.blob.list_keys() == []


@pytest.mark.parametrize(
    "updates,lo,hi,err",
    [
        (rows(5), 0, 3, InvalidUpdates),
        (rows(0), 1, 3, InvalidUpdates),
        (rows(0), 0, 0, InvalidShardBounds),
        ([], 3, 2, InvalidShardBounds),
        ([((1,), 0, 1)], 0, 3, SchemaMismatch),
    ],
)
def test_bad_truncating_appends_are_rejected_and_change_nothing(store, updates, lo, hi, err):
    store.compare_and_append("u1", [], 0, 1)
    before = heads(store)
    with pytest.raises(err):
        store.append("u1", updates, lo, hi)
    assert heads(store) == before and store.blob.list_keys() == []


class RacingBlob:
    """A blob that runs ``race`` (another writer's append) right after its first ``set``."""

    def __init__(self, inner, race) -> None:
        self.inner, self.race, self.sets = inner, race, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def set(self, key, value):
        self.inner.set(key, value)
        self.sets += 1
        race, self.race = self.race, None
        if race is not None:
            race()


@pytest.mark.parametrize(
    "ours,theirs,sets",
    [
        (rows(2, 3, 4, 5), rows(2, 3), 2),  # the upper passes rows of ours: cut again, rewrite
        (rows(2, 3, 4, 5), rows(2, 3, 4, 5), 1),  # it passes all of them: a no-op
        (rows(4, 5), [], 1),  # it passes none: the same batch, from the new upper
    ],
    ids=["cut-again", "covered", "no-rows-before"],
)
def test_truncating_append_cuts_again_when_the_upper_moves_while_it_writes(
    store, ours, theirs, sets
):
    """Another writer of the same definite updates commits between our cut and our commit."""
    store.compare_and_append("u1", rows(0, 1), 0, 2)
    other = ShardStore(store.blob, store.consensus, auto_compact=False, inline_max_bytes=0)
    their_upper = 6 if len(theirs) == 4 else 4
    blob = RacingBlob(store.blob, lambda: other.append("u1", theirs, 2, their_upper))
    racing = ShardStore(blob, store.consensus, auto_compact=False, inline_max_bytes=0)
    assert racing.append("u1", ours, 2, 6) == Antichain([6])
    want = rows(0, 1, 2, 3, 4, 5) if len(ours) == 4 else rows(0, 1, 4, 5)
    assert store.snapshot_rows("u1", 5) == [(r, 5, 1) for r, _t, _d in want]
    assert store.state("u1").length == len(want)  # each update stored exactly once
    assert blob.sets == sets
    assert blob_keys(store) == set(store.state("u1").batch_keys)  # no orphan blob left


def test_racing_truncating_appends_store_each_update_exactly_once(store):
    """Writers of one definite collection (replicas of a dataflow) append it in random chunks at
    once, each from its own store: every update lands once, whoever wins each race."""
    horizon = 30
    definite = [((t, f"r{t}-{j}"), t, (-1) ** j) for t in range(horizon) for j in range(t % 3)]
    errors: list[BaseException] = []

    def replica(seed: int) -> None:
        rng = random.Random(seed)
        writer = ShardStore(
            store.blob,
            store.consensus,
            writer_id=f"w{seed}",
            auto_compact=False,
            inline_max_bytes=0,
        )
        lo = 0
        try:
            while lo < horizon:
                hi = min(horizon, lo + rng.randint(1, 5))
                writer.append("u1", [u for u in definite if lo <= u[1] < hi], lo, hi)
                lo = hi
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=replica, args=(seed,)) for seed in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    state = store.state("u1")
    assert state.upper == Antichain([horizon])
    assert state.length == len(definite)
    for at in (*range(0, horizon, 4), horizon - 1):
        assert store.snapshot_rows("u1", at) == snapshot_updates(definite, at)
    assert blob_keys(store) == set(state.batch_keys)


def test_truncating_append_retried_after_an_unknown_outcome_lands_once(store):
    class CommitThenFail:
        def __init__(self, inner):
            self.inner, self.fail = inner, True

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def compare_and_set(self, key, expected, new):
            ok = self.inner.compare_and_set(key, expected, new)
            if self.fail:
                self.fail = False
                raise ConnectionError("lost the reply")
            return ok

    flaky = ShardStore(
        store.blob, CommitThenFail(store.consensus), auto_compact=False, inline_max_bytes=0
    )
    with pytest.raises(Indeterminate):
        flaky.append("u1", rows(0, 1), 0, 2)
    assert flaky.append("u1", rows(0, 1), 0, 2) == Antichain([2])  # landed: now a no-op
    assert store.snapshot_rows("u1", 1) == [(r, 1, 1) for r, _t, _d in rows(0, 1)]
    assert len(store.blob.list_keys("u1/")) == 1
