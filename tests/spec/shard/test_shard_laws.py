"""Properties of the pure shard: snapshots agree with a reference log, through appends,
reader moves and compactions; frontiers never regress; the codec round-trips; racing
truncating appends of one definite collection store each update exactly once."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from shard_pure_model import PureShard

from tidegate.spec.errors import (
    AppendGap,
    ConsensusCorrupt,
    TidegateError,
    UnsupportedStateVersion,
    UpperMismatch,
)
from tidegate.spec.frontier import Antichain, Update, advance_updates, consolidate
from tidegate.spec.shard import (
    AppendOutcome,
    BatchMeta,
    CompactionPolicy,
    ShardState,
    append,
    append_lower,
    blob_digest,
    compare_and_append,
    decode_state,
    downgrade_since,
    encode_state,
    listen_batches,
    listen_updates,
    register_critical_reader,
    register_leased_reader,
    snapshot_updates,
)
from tidegate.spec.shard.codec import ENVELOPE

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

    @rule()
    def empty_append_at_the_upper_is_a_no_op(self) -> None:
        before = self.p.state
        self.p.append([], self.upper, self.upper)
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
        data = encode_state(s)
        assert decode_state(s.shard, s.seqno, data) == s
        # the same bytes whatever was encoded before (batches keep their encoding), and
        # the payload is compact JSON
        fresh = dataclasses.replace(s, batches=tuple(dataclasses.replace(b) for b in s.batches))
        assert encode_state(fresh) == data
        payload = data.split(b"\n", 1)[1]
        assert json.dumps(json.loads(payload), separators=(",", ":")).encode() == payload


TestShardMachine = ShardMachine.TestCase


# -- the truncating append ------------------------------------------------------------------------

HORIZON = 14
"""Every time of the definite collections below is before this."""


def _outcome(call: Callable[[], AppendOutcome]) -> tuple[object, ...]:
    try:
        out = call()
    except TidegateError as e:
        return ("error", type(e))
    return ("ok", out.state, out.upper, out.already_committed)


@given(st.integers(0, 4), st.data())
def test_append_at_the_upper_agrees_with_compare_and_append(u: int, data: st.DataObject) -> None:
    """With ``lower`` the shard's upper, the truncating append is compare-and-append (bad input too)."""
    s = register_critical_reader(ShardState(shard="s", schema="x"), "c")
    if u:
        s = compare_and_append(
            s, None, Antichain([0]), Antichain([u]), writer_id="w0", token=None, now_ms=0
        ).state
    lower = Antichain([u])
    hi = data.draw(st.integers(max(0, u - 1), u + 3) | st.none())
    upper = Antichain.empty() if hi is None else Antichain([hi])
    times = data.draw(st.lists(st.integers(max(0, u - 1), u + 4), max_size=3))
    batch = None
    if times or data.draw(st.booleans()):
        batch = BatchMeta(
            "k", lower, upper, lower, len(times), min(times, default=None), max(times, default=None)
        )
    got = _outcome(lambda: append(s, batch, lower, upper, writer_id="w", now_ms=3))
    want = _outcome(
        lambda: compare_and_append(s, batch, lower, upper, writer_id="w", token=None, now_ms=3)
    )
    assert got == want


DEFINITE = st.dictionaries(
    st.integers(0, HORIZON - 1),
    st.lists(st.tuples(ROWS, st.sampled_from([-1, 1, 2])), min_size=1, max_size=2),
    min_size=3,
    max_size=10,
)


class ReplicatedWriters(RuleBasedStateMachine):
    """Writers of one definite collection (say, replicas of one dataflow) append overlapping
    ranges of it with the truncating append, from anywhere at or before the upper, some of
    them truncating against a state that is stale by the time they commit (as the store does
    when another writer wins the race meanwhile), amid compactions. The shard must hold
    every update before its upper exactly once, and nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.p = PureShard(register_critical_reader(ShardState(shard="s", schema="x"), "c"))
        self.updates: list[Update] = []
        self.prepared: dict[int, tuple[BatchMeta | None, int, int]] = {}
        self.compacted = False
        self.prev_upper = self.p.state.upper

    @initialize(definite=DEFINITE)
    def collection(self, definite: dict[int, list[tuple[tuple[object, ...], int]]]) -> None:
        self.updates = [(row, t, d) for t, ups in sorted(definite.items()) for row, d in ups]

    @property
    def upper(self) -> int:
        return self.p.state.upper.elements[0]

    def between(self, lo: int, hi: int) -> list[Update]:
        return [u for u in self.updates if lo <= u[1] < hi]

    @rule(data=st.data(), width=st.integers(0, 4))
    def write(self, data: st.DataObject, width: int) -> None:
        lo = data.draw(st.integers(0, self.upper))
        hi = min(lo + width, HORIZON)
        before = self.p.state
        out = self.p.truncating_append(self.between(lo, hi), lo, hi)
        assert out.upper == Antichain([max(hi, before.upper.elements[0])])
        if hi <= before.upper.elements[0]:
            assert out.state is before  # covered already: a no-op

    @rule(gap=st.integers(1, 3), width=st.integers(0, 3))
    def write_after_a_gap(self, gap: int, width: int) -> None:
        lo = self.upper + gap
        before = self.p.state
        with pytest.raises(AppendGap):
            self.p.truncating_append(self.between(lo, lo + width), lo, lo + width)
        assert self.p.state is before

    @rule(w=st.integers(0, 1), data=st.data(), width=st.integers(2, 6))
    def prepare(self, w: int, data: st.DataObject, width: int) -> None:
        """Truncate against the current upper and write the batch, but do not commit yet."""
        self.abandon(w)
        lo = data.draw(st.integers(0, self.upper))
        hi = min(lo + width, HORIZON)
        start = append_lower(self.p.state, Antichain([lo]), Antichain([hi]))
        if start is None:
            return
        (c,) = start.elements
        self.prepared[w] = (self.p.batch(self.between(c, hi), c, hi), lo, hi)

    @precondition(lambda self: bool(self.prepared))
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        """Commit a prepared batch against today's state: the upper may have moved since."""
        w = data.draw(st.sampled_from(sorted(self.prepared)))
        batch, lo, hi = self.prepared.pop(w)
        try:
            self.p.commit_append(batch, lo, hi)
        except UpperMismatch as e:
            # The shard moved past the cut and the batch holds updates before it: the
            # store cuts again; the shard's upper is where to cut.
            assert e.actual_upper == self.p.state.upper
            assert batch is not None and batch.min_time is not None
            assert batch.min_time < self.upper < hi

    def abandon(self, w: int) -> None:
        old = self.prepared.pop(w, None)
        if old is not None and old[0] is not None:
            del self.p.data[old[0].key]

    @rule(step=st.integers(0, 3))
    def move_since(self, step: int) -> None:
        target = min(self.p.state.since.elements[0] + step, self.upper)
        self.p.state = downgrade_since(self.p.state, "c", Antichain([target]), now_ms=0)

    @rule(max_batches=st.integers(0, 3))
    def compact(self, max_batches: int) -> None:
        self.compacted |= self.p.compact(CompactionPolicy(max_batches=max_batches, small_len=100))

    @invariant()
    def every_update_before_the_upper_exactly_once(self) -> None:
        s = self.p.state
        stored = [u for b in s.batches for u in self.p.data[b.key]]
        want = self.between(0, self.upper)
        if not self.compacted:
            assert sorted(stored, key=repr) == sorted(want, key=repr)
        assert advance_updates(stored, s.since) == advance_updates(want, s.since)
        for as_of in range(s.since.elements[0], self.upper):
            assert self.p.snapshot(as_of) == snapshot_updates(want, as_of)

    @invariant()
    def batches_are_ordered_disjoint_and_before_the_upper(self) -> None:
        s = self.p.state
        for a, b in itertools.pairwise(s.batches):
            assert a.upper <= b.lower
        assert all(b.upper <= s.upper for b in s.batches)
        pending = {p[0].key for p in self.prepared.values() if p[0] is not None}
        assert set(self.p.data) == set(s.batch_keys) | pending

    @invariant()
    def upper_never_regresses(self) -> None:
        assert self.prev_upper <= self.p.state.upper
        self.prev_upper = self.p.state.upper


TestReplicatedWriters = ReplicatedWriters.TestCase


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


@pytest.mark.parametrize("doc", [b'{"format": 2}', b'{"format": "1"}', b'{"format": 1}'])
def test_unknown_or_malformed_state_records_are_rejected(doc):
    with pytest.raises(UnsupportedStateVersion) as e:
        decode_state("s9", 4, doc)
    assert "s9" in str(e.value)


@pytest.mark.parametrize("doc", [b"not json", b"[1]", b"", b"{not json", ENVELOPE + b"00"])
def test_records_that_are_not_state_records_are_corrupt(doc):
    with pytest.raises(ConsensusCorrupt) as e:
        decode_state("s9", 4, doc)
    assert "s9" in str(e.value) and e.value.seqno == 4


def _a_state() -> ShardState:
    batch = BatchMeta(
        "s9/b.parquet", Antichain([0]), Antichain([3]), Antichain([0]), 2, 0, 2, "ab" * 32
    )
    return ShardState(shard="s9", seqno=4, upper=Antichain([3]), batches=(batch,), schema="x")


def test_a_record_is_checksummed_and_every_changed_byte_is_detected():
    state = _a_state()
    data = encode_state(state)
    assert data.startswith(ENVELOPE) and decode_state("s9", 4, data) == state
    for i in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[i] ^= flip
            with pytest.raises(ConsensusCorrupt) as e:
                decode_state("s9", 4, bytes(bad))
            assert e.value.shard == "s9"
    with pytest.raises(ConsensusCorrupt):  # torn: a prefix of the record
        decode_state("s9", 4, data[: len(data) // 2])


def test_a_record_of_another_shard_is_corrupt():
    with pytest.raises(ConsensusCorrupt, match="state of shard 's9'"):
        decode_state("s8", 4, encode_state(_a_state()))


def test_an_intact_record_of_a_newer_format_is_unsupported():
    payload = b'{"format":3}'
    data = ENVELOPE + blob_digest(payload).encode() + b"\n" + payload
    with pytest.raises(UnsupportedStateVersion, match="format 3"):
        decode_state("s9", 4, data)


def test_format_1_records_are_still_read_without_digests():
    legacy = (
        b'{"format":1,"shard":"s9","since":[0],"upper":[3],'
        b'"batches":[["s9/b.parquet",[0],[3],[0],2,0,2]],"leased":{},"critical":{},'
        b'"writers":{},"schema":"x","finalized":false}'
    )
    state = decode_state("s9", 4, legacy)
    assert state.upper == Antichain([3]) and state.batches[0].digest is None
    assert decode_state("s9", 4, encode_state(state)) == state  # re-encoded as format 2
