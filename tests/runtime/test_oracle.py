"""The durable timestamp oracle: monotonic across restarts and clock regressions, fenced on races."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.controller.timestamps import MemoryOracle, UpperOracle
from tidegate.runtime.errors import OracleError, OracleFenced
from tidegate.runtime.oracle import TimestampOracle
from tidegate.runtime.platform import wall_ms
from tidegate.runtime.storage import SqliteConsensus
from tidegate.spec.shard import MemoryConsensus, VersionedData


class Clock:
    """A settable millisecond clock."""

    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class CountingConsensus(MemoryConsensus):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        self.writes += 1
        return super().compare_and_set(key, expected, new)


def test_write_ts_follows_the_clock_and_strictly_increases() -> None:
    clock = Clock(5_000)
    o = TimestampOracle(MemoryConsensus(), clock_ms=clock)
    first = o.write_ts()
    assert first == 5_001  # the open point (the clock) is taken; the next is one past it
    assert o.write_ts() == 5_002  # same millisecond: last + 1
    clock.now = 9_000
    assert o.write_ts() == 9_000
    clock.now = 100  # the clock goes back: timestamps do not
    assert o.write_ts() == 9_001
    assert o.peek_write_ts() == 9_001


def test_default_clock_is_epoch_milliseconds() -> None:
    o = TimestampOracle(MemoryConsensus())
    before = wall_ms()
    ts = o.write_ts()
    assert before - 5_000 < ts < before + 5_000
    assert before > 1_600_000_000_000


def test_read_ts_is_the_latest_applied_write_and_never_decreases() -> None:
    clock = Clock(1_000)
    o = TimestampOracle(MemoryConsensus(), clock_ms=clock)
    r0 = o.read_ts()
    a, b = o.write_ts(), o.write_ts()
    assert o.read_ts() == r0
    o.apply_write(b)
    assert o.read_ts() == b
    o.apply_write(a)  # applying an older write does not move the read timestamp back
    assert o.read_ts() == b
    assert o.write_ts() > o.read_ts()


def test_apply_write_of_a_future_time_moves_the_write_timestamp() -> None:
    o = TimestampOracle(MemoryConsensus(), clock_ms=Clock(1_000), window_ms=10)
    o.apply_write(50_000)
    assert o.read_ts() == 50_000
    assert o.peek_write_ts() == 50_000
    assert o.reserved_upper >= 50_000
    assert o.write_ts() == 50_001


def test_apply_write_rejects_non_timestamps() -> None:
    o = TimestampOracle(MemoryConsensus(), clock_ms=Clock())
    with pytest.raises(OracleError):
        o.apply_write(-1)
    with pytest.raises(OracleError):
        o.apply_write("7")  # type: ignore[arg-type]


def test_windows_spare_consensus_writes() -> None:
    consensus = CountingConsensus()
    clock = Clock(1_000)
    o = TimestampOracle(consensus, clock_ms=clock, window_ms=1_000)
    assert consensus.writes == 1  # opening reserves (and fences)
    for _ in range(500):
        o.write_ts()
    assert consensus.writes == 1  # 1001..1500 lie inside the first window
    clock.now = 2_500
    o.write_ts()
    assert consensus.writes == 2


def test_the_nowait_paths_never_touch_consensus() -> None:
    """``write_ts_nowait``/``apply_write_nowait`` serve from the reserved window or decline."""
    consensus = CountingConsensus()
    clock = Clock(1_000)
    o = TimestampOracle(consensus, clock_ms=clock, window_ms=1_000)
    assert [o.write_ts_nowait() for _ in range(3)] == [1_001, 1_002, 1_003]
    assert o.apply_write_nowait(1_500) and o.read_ts() == 1_500
    clock.now = 2_500  # past the window: a reservation is due
    assert o.write_ts_nowait() is None
    assert not o.apply_write_nowait(2_600) and o.read_ts() == 1_500
    assert consensus.writes == 1  # only the opening reservation
    with pytest.raises(OracleError):
        o.apply_write_nowait(-1)


def test_window_zero_writes_every_timestamp() -> None:
    consensus = CountingConsensus()
    o = TimestampOracle(consensus, clock_ms=Clock(), window_ms=0)
    for _ in range(5):
        o.write_ts()
    assert consensus.writes == 6


def test_monotonic_across_restarts_over_a_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "consensus.db"
    clock = Clock(10_000)
    handed: list[int] = []
    reads: list[int] = []
    for incarnation in range(4):
        consensus = SqliteConsensus(db)
        o = TimestampOracle(consensus, clock_ms=clock, window_ms=500)
        reads.append(o.read_ts())
        for _ in range(3):
            handed.append(o.write_ts())
        o.apply_write(handed[-2])
        reads.append(o.read_ts())
        consensus.close()
        clock.now -= 3_000 * (incarnation + 1)  # the clock jumps back between runs
    assert handed == sorted(set(handed))
    assert reads == sorted(reads)
    # every read timestamp after a restart is at or beyond every earlier write
    for i in range(1, 4):
        assert reads[2 * i] >= max(handed[: 3 * i])


def test_a_new_oracle_fences_the_old_one_at_its_next_reservation(tmp_path: Path) -> None:
    db = tmp_path / "consensus.db"
    clock = Clock(1_000)
    old = TimestampOracle(SqliteConsensus(db), clock_ms=clock, window_ms=100)
    new = TimestampOracle(SqliteConsensus(db), clock_ms=clock, window_ms=100)
    assert new.epoch == old.epoch + 1
    assert old.write_ts() == 1_001  # still inside its own window
    clock.now = 5_000
    before = (old.peek_write_ts(), old.read_ts(), old.reserved_upper)
    with pytest.raises(OracleFenced) as info:
        old.write_ts()
    assert info.value.key == "tidegate/oracle"
    assert (old.peek_write_ts(), old.read_ts(), old.reserved_upper) == before
    with pytest.raises(OracleFenced):
        old.apply_write(10_000)
    assert old.read_ts() == before[1]
    assert new.write_ts() == 5_000  # the winner carries on


class RacingConsensus(MemoryConsensus):
    """Consensus where ``before_set`` runs once just before the next compare-and-set: another
    oracle's write lands between a caller's read of the head and its write."""

    def __init__(self) -> None:
        super().__init__()
        self.before_set: list[Callable[[], object]] = []

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        if self.before_set:
            self.before_set.pop()()
        return super().compare_and_set(key, expected, new)


def test_a_takeover_looks_again_when_the_oracle_it_fences_reserves_meanwhile() -> None:
    """Found by CI (a promotion beside a live writer ticking every 50 ms): the writer's oracle
    reserved between the new oracle's read of the head and its first write, and the new oracle
    took itself for fenced. Losing to the *older* epoch it is taking over only means looking
    again; the old oracle is fenced all the same, and no timestamp goes backwards."""
    clock = Clock(1_000)
    consensus = RacingConsensus()
    old = TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    clock.now = 2_000
    consensus.before_set.append(old.write_ts)  # reserves up to 2_100 under the newcomer
    new = TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    assert new.epoch == old.epoch + 1
    assert new.write_ts() > 2_000  # above what the old one handed out meanwhile
    clock.now = 3_000
    with pytest.raises(OracleFenced):
        old.write_ts()


def test_of_two_oracles_opening_at_once_the_one_that_lost_is_fenced() -> None:
    clock = Clock(1_000)
    consensus = RacingConsensus()
    TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    rival: list[TimestampOracle] = []
    # Same clock, same head, same epoch: only the incarnation each record names tells the
    # rival's record from the loser's own.
    consensus.before_set.append(
        lambda: rival.append(TimestampOracle(consensus, clock_ms=clock, window_ms=100))
    )
    with pytest.raises(OracleFenced):  # the rival read the same head and wrote the same epoch
        TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    assert rival[0].write_ts() == 1_101


class OutageConsensus(MemoryConsensus):
    """Consensus in an outage: with ``lost`` set, a compare-and-set applies and then its answer
    is lost, and reading the head fails too."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = False

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        lost, self.lost = self.lost, False  # (the base class reads the head itself)
        try:
            ok = super().compare_and_set(key, expected, new)
        finally:
            self.lost = lost
        if lost:
            raise ConnectionError("the answer was lost")
        return ok

    def head(self, key: str) -> VersionedData | None:
        if self.lost:
            raise ConnectionError("consensus is unreachable")
        return super().head(key)


def test_a_reservation_that_landed_unseen_in_an_outage_does_not_fence_its_own_oracle() -> None:
    """Found by the simulator (``standard``, seed 1, with the SQL clients): in a consensus
    outage a reservation landed, its answer was lost and looking failed too; the oracle's
    next reservation, for a later bound, found a version it did not recognise and took itself
    for fenced -- for ever: every later group commit and tick failed with ``OracleFenced``."""
    clock = Clock(1_000)
    consensus = OutageConsensus()
    o = TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    clock.now = 2_000
    consensus.lost = True
    with pytest.raises(ConnectionError):
        o.write_ts()  # the reservation landed; the oracle cannot know
    consensus.lost = False
    clock.now = 3_000
    assert o.write_ts() == 3_000  # a later bound: reserved on top of the one that landed
    assert o.reserved_upper == 3_100
    newer = TimestampOracle(consensus, clock_ms=clock, window_ms=100)
    clock.now = 4_000
    with pytest.raises(OracleFenced):  # a newer oracle still fences it
        o.write_ts()
    assert newer.write_ts() == 4_000


def test_an_oracle_knows_it_was_superseded_before_its_next_reservation() -> None:
    """What an environment asks before acknowledging a commit (the writer epoch): a newer
    oracle on the same key supersedes this one at once, with one read and no write."""
    consensus = CountingConsensus()
    old = TimestampOracle(consensus)
    assert old.superseded_by() is None
    new = TimestampOracle(consensus)
    writes = consensus.writes
    assert old.superseded_by() == new.epoch == old.epoch + 1
    assert new.superseded_by() is None
    assert consensus.writes == writes
    assert MemoryOracle().superseded_by() is None and MemoryOracle().epoch == 0
    assert UpperOracle(lambda: None).superseded_by() is None


def test_keys_are_independent() -> None:
    consensus = MemoryConsensus()
    clock = Clock(1_000)
    a = TimestampOracle(consensus, key="a", clock_ms=clock)
    b = TimestampOracle(consensus, key="b", clock_ms=clock)
    assert a.write_ts() == b.write_ts() == 1_001
    assert a.key == "a"


def test_unreadable_durable_state_is_a_typed_error() -> None:
    consensus = MemoryConsensus()
    consensus.compare_and_set("tidegate/oracle", None, VersionedData(0, b"not json"))
    with pytest.raises(OracleError):
        TimestampOracle(consensus)
    other = MemoryConsensus()
    other.compare_and_set("tidegate/oracle", None, VersionedData(0, b'{"version": 99}'))
    with pytest.raises(OracleError, match="version"):
        TimestampOracle(other)


def test_bad_window_is_rejected() -> None:
    with pytest.raises(ValueError):
        TimestampOracle(MemoryConsensus(), window_ms=-1)


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 0)),
        st.tuples(st.just("write_nowait"), st.integers(0, 0)),
        st.tuples(st.just("read"), st.integers(0, 0)),
        st.tuples(st.just("apply"), st.integers(0, 1_000)),
        st.tuples(st.just("apply_future"), st.integers(1, 5_000)),
        st.tuples(st.just("apply_nowait"), st.integers(1, 5_000)),
        st.tuples(st.just("clock"), st.integers(-10_000, 10_000)),
        st.tuples(st.just("restart"), st.integers(0, 0)),
    ),
    max_size=60,
)


@given(_steps, st.integers(0, 2_000), st.integers(0, 10**6))
def test_laws_over_calls_and_restarts(steps: list[tuple[str, int]], window: int, t0: int) -> None:
    """Writes strictly increase and exceed every earlier read; reads never decrease and
    cover every applied write -- across restarts and a clock that jumps both ways."""
    consensus = MemoryConsensus()
    clock = Clock(t0)
    o = TimestampOracle(consensus, clock_ms=clock, window_ms=window)
    writes: list[int] = []
    last_read = o.read_ts()
    applied_max = -1
    for kind, arg in steps:
        if kind in ("write", "write_nowait"):
            # The event loop's fast path: a timestamp without IO, or None when a
            # reservation is due (the caller then takes the blocking path).
            got = o.write_ts_nowait() if kind == "write_nowait" else None
            ts = o.write_ts() if got is None else got
            assert not writes or ts > writes[-1]
            assert ts > last_read
            assert ts <= o.reserved_upper
            assert o.peek_write_ts() == ts
            writes.append(ts)
        elif kind == "read":
            r = o.read_ts()
            assert r >= last_read
            assert r >= applied_max
            last_read = r
        elif kind == "apply" and writes:
            ts = writes[arg % len(writes)]
            o.apply_write(ts)
            applied_max = max(applied_max, ts)
        elif kind in ("apply_future", "apply_nowait"):
            ts = o.peek_write_ts() + arg
            before = (o.read_ts(), o.peek_write_ts(), o.reserved_upper)
            if kind == "apply_future" or not o.apply_write_nowait(ts):
                assert (o.read_ts(), o.peek_write_ts(), o.reserved_upper) == before
                o.apply_write(ts)
            applied_max = max(applied_max, ts)
            writes.append(ts)  # a write at ts happened elsewhere: later writes must pass it
        elif kind == "clock":
            clock.now = max(0, clock.now + arg)
        elif kind == "restart":
            o = TimestampOracle(consensus, clock_ms=clock, window_ms=window)
            assert o.read_ts() >= last_read
            assert o.read_ts() >= max(writes, default=-1)
        assert o.read_ts() <= o.peek_write_ts() <= o.reserved_upper
        last_read = max(last_read, o.read_ts())
