"""What automatic maintenance merges (:func:`plan_maintenance`): laws over random shards of
blob and inline batches, and the size tiers and inline merges it was written for."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import (
    INLINE_PREFIX,
    BatchMeta,
    CompactionPolicy,
    ShardState,
    plan_maintenance,
)

# A batch: (length, inline bytes or None for a blob).
BATCHES = st.lists(
    st.tuples(st.integers(0, 3_000), st.none() | st.integers(100, 3_000)), max_size=20
)
POLICIES = st.builds(
    CompactionPolicy,
    max_batches=st.integers(0, 10),
    small_len=st.integers(1, 4_000),
    max_inputs=st.integers(2, 12),
    max_len=st.integers(1, 20_000),
    inline_merge_max_bytes=st.integers(0, 8_000),
    inline_held_max_bytes=st.integers(0, 20_000),
)


def _shard(batches: list[tuple[int, int | None]]) -> ShardState:
    metas = []
    for i, (length, inline) in enumerate(batches):
        key = f"{INLINE_PREFIX}{i}" if inline is not None else f"s/{i}.parquet"
        data = None if inline is None else b"x" * inline
        lower, upper = Antichain([i]), Antichain([i + 1])
        metas.append(BatchMeta(key, lower, upper, lower, length, i, i, None, data))
    n = len(batches)
    return ShardState(shard="s", schema="x", upper=Antichain([n]), batches=tuple(metas))


@given(BATCHES, POLICIES, st.integers(0, 2))
def test_a_plan_is_due_and_merges_a_run_within_the_policy(batches, policy, fresh):
    state = _shard(batches)
    plan = plan_maintenance(state, policy, fresh=fresh)
    count_due = len(state.batches) > policy.max_batches
    bytes_due = state.inline_bytes > policy.inline_held_max_bytes > 0
    if not (count_due or bytes_due):
        assert plan is None
        return
    if plan is None:
        return  # no run of two small batches within the bounds
    keys = state.batch_keys
    i = keys.index(plan.inputs[0].key)
    assert keys[i : i + len(plan.inputs)] == plan.input_keys  # consecutive
    assert len(plan.inputs) >= 2
    assert i + len(plan.inputs) <= len(keys) - fresh  # the fresh batches are left whole
    if len(state.batches) <= 64:  # beyond, maintenance takes plan_compaction's run
        assert len(plan.inputs) <= policy.max_inputs
        assert all(b.length < policy.small_len for b in plan.inputs)
        assert sum(b.length for b in plan.inputs) <= policy.max_len
    if plan.inline:
        assert not bytes_due
        assert all(b.is_inline for b in plan.inputs)
        assert sum(len(b.inline or b"") for b in plan.inputs) <= policy.inline_merge_max_bytes
    if bytes_due:
        assert any(b.is_inline for b in plan.inputs)  # it relieves the inline bytes


def test_recent_inline_batches_merge_inline_and_leave_the_large_blob_alone():
    state = _shard([(50_000, None), (900, None), *[(16, 800)] * 5])
    plan = plan_maintenance(state, CompactionPolicy(max_batches=6))
    assert plan is not None and plan.inline
    assert plan.input_keys == state.batch_keys[2:]


def test_inline_bytes_past_the_limit_go_to_a_blob():
    state = _shard([(50_000, None), *[(100, 3_000)] * 3])
    policy = CompactionPolicy(inline_held_max_bytes=8 * 1024)
    plan = plan_maintenance(state, policy)
    assert plan is not None and not plan.inline
    assert plan.input_keys == state.batch_keys[1:]  # the inline batches, not the large blob
    assert plan_maintenance(state, dataclasses.replace(policy, inline_held_max_bytes=0)) is None


def test_an_inline_run_too_large_to_stay_inline_is_costed_as_a_blob_merge():
    state = _shard([(100, None), (100, 3_000), (100, 3_000)])
    plan = plan_maintenance(state, CompactionPolicy(max_batches=2, inline_merge_max_bytes=4_096))
    assert plan is not None and not plan.inline
    assert len(plan.inputs) == 3  # a blob merge's fixed cost is shared by all three
