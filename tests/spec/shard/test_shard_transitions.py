"""Example tests pinning the documented behaviour of the shard transitions."""

from __future__ import annotations

import pytest
from shard_pure_model import PureShard

from tidegate.spec.errors import (
    AppendGap,
    CompactionConflict,
    FinalizationNotReady,
    InvalidShardBounds,
    InvalidUpdates,
    ListenCompactedPast,
    OpaqueMismatch,
    RequestsApplied,
    SchemaMismatch,
    ShardFinalized,
    SinceRegression,
    SnapshotBeforeSince,
    SnapshotNotReady,
    UnknownReader,
    UpperMismatch,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import (
    REQUEST_IDS_MAX,
    REQUEST_RETENTION,
    BatchMeta,
    CompactionPolicy,
    ShardState,
    append,
    append_lower,
    apply_compaction,
    compare_and_append,
    compare_and_downgrade_since,
    decode_state,
    downgrade_since,
    encode_state,
    expire_reader,
    expire_readers,
    finalize,
    heartbeat_reader,
    listen_batches,
    listen_updates,
    plan_compaction,
    recorded_requests,
    register_critical_reader,
    register_leased_reader,
    register_schema,
    snapshot_batches,
)

A = Antichain


def meta(key: str, lo: int, up: int, times: list[int]) -> BatchMeta:
    return BatchMeta(key, A([lo]), A([up]), A([lo]), len(times), min(times), max(times))


def fresh() -> ShardState:
    return ShardState(shard="s1", schema="x")


def test_append_advances_upper_and_seqno():
    s = fresh()
    out = compare_and_append(
        s, meta("k", 0, 3, [0, 2]), A([0]), A([3]), writer_id="w", token="t", now_ms=5
    )
    assert out.state.upper == A([3]) and out.state.seqno == 1 and not out.already_committed
    assert out.state.batch_keys == ("k",)
    assert s.upper == A([0]) and s.seqno == 0  # the input state is untouched


def test_upper_mismatch_reports_actual_upper():
    s = compare_and_append(fresh(), None, A([0]), A([4]), writer_id="w", token=None, now_ms=0).state
    with pytest.raises(UpperMismatch) as e:
        compare_and_append(s, None, A([0]), A([5]), writer_id="w", token=None, now_ms=0)
    assert e.value.actual_upper == A([4]) and e.value.shard == "s1"


def test_new_upper_must_not_be_behind_expected():
    with pytest.raises(InvalidShardBounds):
        compare_and_append(fresh(), None, A([3]), A([2]), writer_id="w", token=None, now_ms=0)


def test_updates_need_a_non_empty_interval():
    with pytest.raises(InvalidShardBounds):
        compare_and_append(
            fresh(), meta("k", 0, 0, [0]), A([0]), A([0]), writer_id="w", token=None, now_ms=0
        )


@pytest.mark.parametrize("empty_batch", [False, True])
def test_an_empty_append_at_the_upper_is_a_no_op(empty_batch):
    """Issue 16: no updates and ``expected == new == upper`` succeeds, changing nothing.

    Before the fix this raised InvalidShardBounds (persist: a successful no-op).
    """
    s = compare_and_append(fresh(), None, A([0]), A([4]), writer_id="w", token=None, now_ms=0).state
    batch = BatchMeta("k", A([4]), A([4]), A([4]), 0) if empty_batch else None
    out = compare_and_append(s, batch, A([4]), A([4]), writer_id="w2", token="t", now_ms=9)
    assert out.state is s and out.upper == A([4]) and not out.already_committed
    # Not at the upper: an ordinary mismatch, reporting the actual upper.
    with pytest.raises(UpperMismatch) as e:
        compare_and_append(s, None, A([2]), A([2]), writer_id="w", token=None, now_ms=0)
    assert e.value.actual_upper == A([4])
    closed = compare_and_append(s, None, A([4]), A([]), writer_id="w", token=None, now_ms=0).state
    assert (
        compare_and_append(closed, None, A([]), A([]), writer_id="w", token=None, now_ms=0).state
        is closed
    )


# -- the truncating append (persist's non-CAS ``append``) -----------------------------------------


def at_upper(n: int) -> ShardState:
    """A shard whose updates ``(i,)`` at time ``i`` fill ``[0, n)``."""
    p = PureShard(fresh())
    p.append([((i,), i, 1) for i in range(n)], 0, n)
    return p.state


def test_append_at_the_upper_is_compare_and_append():
    s = at_upper(3)
    out = append(s, meta("k", 3, 5, [3, 4]), A([3]), A([5]), writer_id="w", now_ms=1)
    cas = compare_and_append(
        s, meta("k", 3, 5, [3, 4]), A([3]), A([5]), writer_id="w", token=None, now_ms=1
    )
    assert out == cas and out.state.upper == A([5])


def test_an_overlapping_append_must_be_truncated_at_the_upper():
    s = at_upper(3)
    whole = meta("k", 1, 5, [1, 2, 3, 4])
    with pytest.raises(UpperMismatch) as e:  # it holds updates the shard has
        append(s, whole, A([1]), A([5]), writer_id="w", now_ms=0)
    assert e.value.actual_upper == A([3])
    out = append(s, meta("k", 3, 5, [3, 4]), A([1]), A([5]), writer_id="w", now_ms=0)
    assert out.state.upper == A([5]) and out.upper == A([5])
    (b,) = out.state.batches[-1:]
    assert (b.lower, b.upper, b.since) == (A([3]), A([5]), A([3]))


def test_an_overlapping_append_with_nothing_before_the_upper_needs_no_truncation():
    s = at_upper(3)
    out = append(s, meta("k", 1, 6, [4, 5]), A([1]), A([6]), writer_id="w", now_ms=0)
    assert out.state.batches[-1].lower == A([3]) and out.state.upper == A([6])
    # Without updates, only the upper moves.
    assert append(s, None, A([0]), A([6]), writer_id="w", now_ms=0).state.upper == A([6])


@pytest.mark.parametrize("lo,up", [(0, 3), (1, 2), (3, 3), (0, 0)])
def test_an_append_the_shard_already_covers_is_a_no_op(lo, up):
    s = at_upper(3)
    times = list(range(lo, up))
    batch = meta("k", lo, up, times) if times else None
    out = append(s, batch, A([lo]), A([up]), writer_id="w", now_ms=0)
    assert out.state is s and out.upper == A([3]) and not out.already_committed


def test_an_append_after_a_gap_is_refused():
    s = at_upper(3)
    with pytest.raises(AppendGap) as e:
        append(s, meta("k", 4, 6, [4]), A([4]), A([6]), writer_id="w", now_ms=0)
    assert (e.value.lower, e.value.actual_upper, e.value.shard) == (A([4]), A([3]), "s1")
    with pytest.raises(AppendGap):
        append_lower(s, A([5]), A([5]))


def test_a_batch_cut_past_the_upper_is_refused():
    """A batch that starts after the shard's upper would skip updates: cut it again at the upper."""
    s = at_upper(3)
    with pytest.raises(UpperMismatch) as e:
        append(s, meta("k", 4, 6, [4]), A([1]), A([6]), writer_id="w", now_ms=0)
    assert e.value.actual_upper == A([3])


@pytest.mark.parametrize(
    "batch,lo,up,err",
    [
        (None, 4, 2, InvalidShardBounds),
        (meta("k", 2, 2, [2]), 2, 2, InvalidShardBounds),
        (meta("k", 0, 5, [0]), 1, 5, InvalidUpdates),  # the batch starts before lower
        (meta("k", 1, 4, [1]), 1, 5, InvalidUpdates),  # the batch ends elsewhere
        (meta("k", 1, 5, [5]), 1, 5, InvalidUpdates),  # a time not before upper
    ],
)
def test_bad_truncating_appends_are_rejected(batch, lo, up, err):
    with pytest.raises(err):
        append(at_upper(3), batch, A([lo]), A([up]), writer_id="w", now_ms=0)


def test_truncating_append_on_a_finalized_shard():
    with pytest.raises(ShardFinalized):
        append(finalize(at_upper(3), force=True), None, A([3]), A([4]), writer_id="w", now_ms=0)


@pytest.mark.parametrize("times", [[3], [0, 2], [1, 5]])
def test_times_outside_the_window_are_rejected(times):
    s = compare_and_append(fresh(), None, A([0]), A([1]), writer_id="w", token=None, now_ms=0).state
    with pytest.raises(InvalidUpdates):
        compare_and_append(
            s, meta("k", 1, 3, times), A([1]), A([3]), writer_id="w", token=None, now_ms=0
        )


def test_retry_with_same_token_is_already_committed():
    s = fresh()
    m = meta("k", 0, 2, [0])
    first = compare_and_append(s, m, A([0]), A([2]), writer_id="w", token="t1", now_ms=0)
    again = compare_and_append(first.state, m, A([0]), A([2]), writer_id="w", token="t1", now_ms=0)
    assert again.already_committed and again.state is first.state
    with pytest.raises(UpperMismatch):  # another writer's token does not count
        compare_and_append(first.state, m, A([0]), A([2]), writer_id="w2", token="t1", now_ms=0)


def test_since_is_meet_of_readers_and_never_regresses():
    s = register_leased_reader(fresh(), "r1", now_ms=0, lease_ms=100)
    s = register_critical_reader(s, "c1")
    s = downgrade_since(s, "r1", A([5]), now_ms=1)
    assert s.since == A([0])
    s = downgrade_since(s, "c1", A([3]), now_ms=1)
    assert s.since == A([3])
    with pytest.raises(SinceRegression):
        downgrade_since(s, "r1", A([4]), now_ms=2)
    s = expire_reader(s, "c1")
    assert s.since == A([5])
    s = expire_reader(s, "r1")
    assert s.since == A([5])  # no readers: unchanged


def test_leases_expire_and_heartbeats_renew():
    s = register_leased_reader(fresh(), "r1", now_ms=0, lease_ms=100)
    s = register_leased_reader(s, "r2", now_ms=0, lease_ms=100)
    s = downgrade_since(s, "r2", A([7]), now_ms=0)
    s = heartbeat_reader(s, "r2", now_ms=90)
    assert expire_readers(s, now_ms=100) is s
    s = expire_readers(s, now_ms=150)
    assert set(s.leased_readers) == {"r2"} and s.since == A([7])
    with pytest.raises(UnknownReader):
        downgrade_since(s, "r1", A([9]), now_ms=150)


def test_critical_reader_opaque_fences():
    s = register_critical_reader(fresh(), "c", opaque=1)
    assert register_critical_reader(s, "c", opaque=9) is s
    with pytest.raises(OpaqueMismatch) as e:
        compare_and_downgrade_since(s, "c", 2, 3, A([1]))
    assert e.value.actual == 1
    s = compare_and_downgrade_since(s, "c", 1, 2, A([1]))
    assert s.critical_readers["c"].opaque == 2 and s.since == A([1])


def test_schema_registration():
    s = ShardState(shard="s1")
    s = register_schema(s, "abc")
    assert register_schema(s, "abc") is s
    with pytest.raises(SchemaMismatch):
        register_schema(s, "other")


def test_snapshot_validity():
    s = compare_and_append(
        fresh(), meta("k", 0, 3, [1]), A([0]), A([3]), writer_id="w", token=None, now_ms=0
    ).state
    s = register_critical_reader(s, "c")
    s = downgrade_since(s, "c", A([1]), now_ms=0)
    with pytest.raises(SnapshotBeforeSince):
        snapshot_batches(s, 0)
    with pytest.raises(SnapshotNotReady):
        snapshot_batches(s, 3)
    assert [b.key for b in snapshot_batches(s, 2)] == ["k"]


def test_finalize():
    s = compare_and_append(
        fresh(), meta("k", 0, 3, [1]), A([0]), A([3]), writer_id="w", token=None, now_ms=0
    ).state
    with pytest.raises(FinalizationNotReady):
        finalize(s)
    closed = compare_and_append(s, None, A([3]), A([]), writer_id="w", token=None, now_ms=0).state
    closed = register_critical_reader(closed, "c")
    closed = downgrade_since(closed, "c", A([]), now_ms=0)
    done = finalize(closed)
    assert done.finalized and done.since == A([]) == done.upper and done.batches == ()
    forced = finalize(s, force=True)
    assert forced.finalized
    assert finalize(forced) is forced
    for call in (
        lambda: compare_and_append(
            forced, None, A([3]), A([4]), writer_id="w", token=None, now_ms=0
        ),
        lambda: register_leased_reader(forced, "r", now_ms=0, lease_ms=1),
        lambda: snapshot_batches(forced, 0),
        lambda: listen_batches(forced, A([0])),
    ):
        with pytest.raises(ShardFinalized):
            call()


def test_compaction_plan_and_conflict():
    p = PureShard(fresh())
    for i in range(10):
        p.append([((i,), i, 1)], i, i + 1)
    policy = CompactionPolicy(max_batches=2, small_len=10)
    plan = plan_compaction(p.state, policy)
    assert plan is not None and len(plan.inputs) == 10
    stale = p.state
    assert p.compact(policy)
    assert len(p.state.batches) == 1
    with pytest.raises(CompactionConflict):
        apply_compaction(p.state, plan, None)
    assert plan_compaction(stale, CompactionPolicy(max_batches=100)) is None


def test_listen_refuses_batches_compacted_past_its_frontier():
    p = PureShard(fresh())
    for i in range(4):
        p.append([((i,), i, 1)], i, i + 1)
    p.state = downgrade_since(register_critical_reader(p.state, "c"), "c", A([3]), now_ms=0)
    p.compact(CompactionPolicy(max_batches=1, small_len=10))
    with pytest.raises(ListenCompactedPast):
        listen_batches(p.state, A([2]))
    assert listen_batches(p.state, A([4])) == ()


def test_listen_updates_filters_by_as_of_and_frontier():
    ups = [((1,), 1, 1), ((2,), 3, 1), ((3,), 5, 1)]
    assert listen_updates(ups, 1, A([3])) == [((2,), 3, 1), ((3,), 5, 1)]
    assert listen_updates(ups, 3, A([2])) == [((3,), 5, 1)]


# -- client request ids ----------------------------------------------------------------------


def test_request_ids_land_with_the_batch_and_a_retry_is_refused_whatever_the_upper():
    s = compare_and_append(
        fresh(),
        meta("b1", 0, 5, [3]),
        A([0]),
        A([5]),
        writer_id="w",
        token=None,
        now_ms=0,
        requests={"r1": 3},
    ).state
    assert dict(s.requests) == {"r1": 3}
    for expected in (0, 5):  # a stale upper or the current one: the id answers first
        with pytest.raises(RequestsApplied) as e:
            compare_and_append(
                s,
                meta("b2", expected, 9, [expected]),
                A([expected]),
                A([9]),
                writer_id="w",
                token=None,
                now_ms=0,
                requests={"r1": expected, "r2": expected},
            )
        assert e.value.applied == {"r1": 3}
    assert decode_state("s1", s.seqno, encode_state(s)) == s  # recorded durably with the state


def test_a_retry_of_the_same_write_by_its_token_is_not_refused_by_its_own_ids():
    b = meta("b1", 0, 5, [3])
    s = compare_and_append(
        fresh(), b, A([0]), A([5]), writer_id="w", token="t", now_ms=0, requests={"r1": 3}
    ).state
    again = compare_and_append(
        s, b, A([0]), A([5]), writer_id="w", token="t", now_ms=0, requests={"r1": 3}
    )
    assert again.already_committed and again.state is s


def test_request_ids_are_kept_within_their_retention_and_count():
    kept = recorded_requests({"old": 0, "mid": 1_000}, {"new": REQUEST_RETENTION + 500})
    assert kept == {"mid": 1_000, "new": REQUEST_RETENTION + 500}
    many = recorded_requests({f"r{i}": 1_000 + i for i in range(REQUEST_IDS_MAX)}, {"last": 9_999})
    assert len(many) == REQUEST_IDS_MAX and "last" in many and "r0" not in many and "r1" in many
