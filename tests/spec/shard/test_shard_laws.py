"""Properties of the pure shard: snapshots agree with a reference log, through appends,
reader moves and compactions; frontiers never regress; the codec round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from shard_pure_model import PureShard

from tidegate.spec.errors import UnsupportedStateVersion, UpperMismatch
from tidegate.spec.frontier import Antichain, consolidate
from tidegate.spec.shard import (
    CompactionPolicy,
    ShardState,
    decode_state,
    downgrade_since,
    encode_state,
    listen_batches,
    listen_updates,
    register_critical_reader,
    register_leased_reader,
    snapshot_updates,
)

ROWS = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]))


class ShardMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        s = register_critical_reader(ShardState(shard="s", schema="x"), "c")
        self.p = PureShard(s)
        self.log: list = []
        self.prev_since = s.since
        self.prev_upper = s.upper

    @property
    def upper(self) -> int:
        return self.p.state.upper.elements[0]

    @rule(n=st.integers(1, 3), data=st.data())
    def append(self, n: int, data: st.DataObject) -> None:
        lo = self.upper
        hi = lo + n
        ups = data.draw(
            st.lists(
                st.tuples(ROWS, st.integers(lo, hi - 1), st.sampled_from([-1, 1, 2])), max_size=4
            )
        )
        self.p.append(ups, lo, hi, token=f"t{lo}")
        self.log.extend(ups)

    @rule(lo_shift=st.integers(-2, 2))
    def stale_append_changes_nothing(self, lo_shift: int) -> None:
        lo = self.upper + lo_shift
        if lo == self.upper or lo < 0:
            return
        before = self.p.state
        with pytest.raises(UpperMismatch):
            self.p.append([], lo, lo + 1)
        assert self.p.state is before

    @rule(step=st.integers(0, 3))
    def move_since(self, step: int) -> None:
        target = min(self.p.state.since.elements[0] + step, self.upper)
        self.p.state = downgrade_since(self.p.state, "c", Antichain([target]), now_ms=0)

    @rule(max_batches=st.integers(0, 3))
    def compact(self, max_batches: int) -> None:
        self.p.compact(CompactionPolicy(max_batches=max_batches, small_len=100))

    @precondition(lambda self: self.upper > self.p.state.since.elements[0])
    @rule(data=st.data())
    def snapshot_matches_log(self, data: st.DataObject) -> None:
        as_of = data.draw(st.integers(self.p.state.since.elements[0], self.upper - 1))
        assert self.p.snapshot(as_of) == snapshot_updates(self.log, as_of)

    @rule(data=st.data())
    def listen_matches_log(self, data: st.DataObject) -> None:
        since = self.p.state.since.elements[0]
        f = data.draw(st.integers(since + 1, self.upper + 1))
        bs = listen_batches(self.p.state, Antichain([f]))
        got = listen_updates([u for b in bs for u in self.p.data[b.key]], since, Antichain([f]))
        want = [u for u in self.log if u[1] >= f]
        assert consolidate(got) == consolidate(want)

    @invariant()
    def frontiers_monotone(self) -> None:
        s = self.p.state
        assert self.prev_since <= s.since and self.prev_upper <= s.upper
        self.prev_since, self.prev_upper = s.since, s.upper

    @invariant()
    def codec_round_trips(self) -> None:
        s = self.p.state
        assert decode_state(s.shard, s.seqno, encode_state(s)) == s


TestShardMachine = ShardMachine.TestCase


@given(st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3"]), st.integers(0, 5)), max_size=12))
def test_since_is_join_of_history_and_meet_of_readers(moves):
    s = ShardState(shard="s")
    for r in ("r1", "r2", "r3"):
        s = register_leased_reader(s, r, now_ms=0, lease_ms=10)
    held = {"r1": 0, "r2": 0, "r3": 0}
    for r, t in moves:
        if t >= held[r]:
            s = downgrade_since(s, r, Antichain([t]), now_ms=0)
            held[r] = t
    assert s.since == Antichain([min(held.values())])


@pytest.mark.parametrize(
    "doc", [b'{"format": 2}', b'{"format": "1"}', b"not json", b"[1]", b'{"format": 1}']
)
def test_unknown_or_malformed_state_records_are_rejected(doc):
    with pytest.raises(UnsupportedStateVersion) as e:
        decode_state("s9", 4, doc)
    assert "s9" in str(e.value)
