"""The Arrow/Parquet read path agrees with the pure semantics on random histories."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.storage import CompactionPolicy, MemoryBlob, MemoryConsensus, ShardStore
from tidegate.spec.frontier import Antichain, consolidate
from tidegate.spec.shard import listen_updates, snapshot_updates

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("f", pa.float64())])
ROW = st.tuples(
    st.integers(0, 3) | st.none(), st.sampled_from(["a", "b", None]), st.sampled_from([0.5, None])
)

appends = st.lists(
    st.tuples(
        st.integers(1, 3),
        st.lists(st.tuples(ROW, st.integers(0, 2), st.sampled_from([-1, 1, 3])), max_size=5),
    ),
    min_size=1,
    max_size=8,
)


@given(appends, st.integers(0, 30), st.booleans(), st.data())
def test_snapshots_and_listens_match_the_reference(history, since_step, compact, data):
    store = ShardStore(MemoryBlob(), MemoryConsensus(), auto_compact=False)
    store.create_shard("s", SCHEMA)
    store.register_critical_reader("s", "c")
    log = []
    upper = 0
    for width, ups in history:
        ups = [(row, upper + min(dt, width - 1), d) for row, dt, d in ups]
        store.compare_and_append("s", ups, upper, upper + width)
        log.extend(ups)
        upper += width
    since = min(since_step, upper - 1)
    store.downgrade_since("s", "c", since)
    if compact:
        store.compact("s", CompactionPolicy(max_batches=0, small_len=1_000))
        assert len(store.state("s").batches) <= 1
    as_of = data.draw(st.integers(since, upper - 1))
    assert store.snapshot_rows("s", as_of) == snapshot_updates(log, as_of)
    with store.listen("s", since) as listener:
        ev = listener.poll()
    got = [] if ev is None else ev.updates
    assert consolidate(got) == consolidate(listen_updates(log, since, Antichain([since + 1])))


@given(
    appends,
    st.lists(st.integers(0, 4), min_size=8, max_size=8),
    st.integers(1, 4),
    st.integers(0, 3_000),
    st.data(),
)
def test_automatic_maintenance_keeps_every_read_and_a_following_listen_exact(
    history, since_lags, max_batches, inline_merge_max_bytes, data
):
    """Appends with maintenance after each (inline merges committed by the appends, blob
    merges after them), the since moving behind the upper: every snapshot in [since,
    upper) and what a listener following along received match the reference log."""
    policy = CompactionPolicy(
        max_batches=max_batches,
        small_len=1_000,
        inline_merge_max_bytes=inline_merge_max_bytes,
        inline_held_max_bytes=4_000,
    )
    store = ShardStore(MemoryBlob(), MemoryConsensus(), policy=policy)
    store.create_shard("s", SCHEMA)
    store.register_critical_reader("s", "c")
    log, heard = [], []
    upper = since = 0
    with store.listen("s", 0) as listener:
        for (width, ups), lag in zip(history, since_lags, strict=False):
            ups = [(row, upper + min(dt, width - 1), d) for row, dt, d in ups]
            store.compare_and_append("s", ups, upper, upper + width)
            log.extend(ups)
            upper += width
            since = max(since, upper - 1 - lag)
            store.downgrade_since("s", "c", since)
            ev = listener.poll()
            heard.extend([] if ev is None else ev.updates)
            as_of = data.draw(st.integers(max(since, listener.frontier.elements[0] - 1), upper - 1))
            assert store.snapshot_rows("s", as_of) == snapshot_updates(log, as_of)
    assert store.last_maintenance_error is None
    expected = listen_updates(log, 0, Antichain([1]))  # all after the as_of
    assert consolidate(heard) == consolidate(expected)
