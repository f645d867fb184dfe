"""The headline law: an ingestion (and a sink of it) crashed at any point yields the collections of an uninterrupted run.

Hypothesis drives :class:`~tidegate.spec.testing.storage_replica.IngestionHarness`
through arbitrary interleavings: upstream growth and deliveries in any
batching, IO completing in any order (reads and sink IO sometimes failing),
ticks, reconnects, crashes between any two outputs (between the remap write
and the data write included; writes in flight landing or not), zombie
incarnations that keep writing, and restarts of the controller (read-only,
then promoted). Then the live replica heals and every law is checked
(:meth:`IngestionHarness.check`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, StepBack, ValidFrom
from tidegate.spec.storage import LoadGenerator
from tidegate.spec.storage_replica import CommitSink, ReadRemap, WriteShard
from tidegate.spec.testing.storage_replica import DeterministicUpstream, IngestionHarness

_ACTIONS = st.sampled_from(
    [
        "advance",
        "produce",
        "tick",
        "tick",
        "connect",
        "deliver",
        "deliver",
        "fail_source",
        "complete",
        "complete",
        "complete",
        "fail_io",
        "deliver_sink",
        "reconnect",
        "crash",
        "crash",
        "restart",
        "promote",
        "run",
        "run",
    ]
)


def _run(h: IngestionHarness, data: st.DataObject, steps: int) -> None:
    for _ in range(steps):
        action = data.draw(_ACTIONS)
        name = data.draw(st.sampled_from(h.names()))
        if action == "advance":
            h.advance(data.draw(st.integers(0, 40)))
        elif action == "produce":
            h.produce(data.draw(st.integers(0, 4)))
        elif action == "tick":
            h.tick(name)
        elif action == "connect":
            h.connect_source(name)
        elif action == "deliver":
            h.deliver_source(name, data.draw(st.integers(0, h.upstream.available)))
        elif action == "fail_source":
            h.fail_source(name)
        elif action in ("complete", "fail_io"):
            pending = h.pending(name)
            if pending:
                h.complete(name, data.draw(st.integers(0, len(pending) - 1)), action == "fail_io")
        elif action == "deliver_sink":
            h.deliver_sink_input(name, data.draw(st.integers(0, h.shards[h.DATA].upper_int)))
        elif action == "reconnect":
            h.reconnect()
        elif action in ("crash", "restart"):
            landed = data.draw(st.lists(st.booleans(), max_size=3))
            zombie = data.draw(st.booleans())
            if action == "crash":
                h.crash(landed, zombie)
            else:
                h.restart_controller(data.draw(st.booleans()), landed, zombie)
        elif action == "promote":
            h.promote()
        elif action == "run":
            h.run(name, data.draw(st.integers(1, 3)), data.draw(st.integers(0, 20)))


_POLICIES = st.sampled_from(
    [LagWriteFrontier(0, 1), LagWriteFrontier(2, 1), StepBack(), ValidFrom(Antichain([10**9]))]
)


@settings(
    # Cheap examples (about 20 ms each): twice the profile's count, for the headline law.
    max_examples=2 * settings.default.max_examples,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    deadline=None,
)
@given(
    data=st.data(),
    kind=st.sampled_from(["counter", "auction"]),
    seed=st.integers(0, 2**32),
    density=st.integers(1, 3),
    sink=st.booleans(),
    read_only=st.booleans(),
    remap_policy=_POLICIES,
    data_policy=_POLICIES,
    steps=st.integers(5, 60),
)
def test_a_crash_at_any_point_yields_the_collections_of_an_uninterrupted_run(
    data: st.DataObject,
    kind: Any,
    seed: int,
    density: int,
    sink: bool,
    read_only: bool,
    remap_policy: Any,
    data_policy: Any,
    steps: int,
) -> None:
    upstream = DeterministicUpstream(
        LoadGenerator(kind, seed=seed, max_cardinality=4, rows_per_tick=2), density
    )
    h = IngestionHarness(
        upstream,
        sink=sink,
        read_only=read_only,
        remap_policy=remap_policy,
        data_policy=data_policy,
        sink_as_of=data.draw(st.integers(0, 30)),
    )
    _run(h, data, steps)
    h.produce(data.draw(st.integers(0, 3)))
    h.heal()
    h.check()


def _drain_to(h: IngestionHarness, kind: type) -> Any:
    """Complete pending IO of the live replica until the next pending one is of ``kind``; return it."""
    for _ in range(20):
        pending = h.pending()
        for i, out in enumerate(pending):
            if isinstance(out, kind):
                return i, out
        if not pending:
            h.advance(5)
            h.tick()
            continue
        h.complete(None, 0)
    raise AssertionError(f"no {kind.__name__} came")


def test_crash_between_the_remap_write_and_the_data_write() -> None:
    h = IngestionHarness(DeterministicUpstream(), sink=False)
    h.produce(5)
    _drain_to(h, ReadRemap)
    h.complete(None, 0)
    h.deliver_source(None, 5)
    h.advance(100)
    h.tick()
    i, remap_write = _drain_to(h, WriteShard)
    assert remap_write.id == h.REMAP
    h.complete(None, i)  # the binding is durable ...
    (data_write,) = [o for o in h.pending() if isinstance(o, WriteShard)]
    assert data_write.id == h.DATA
    h.crash(landed=[False])  # ... the data of it is not
    assert h.shards[h.DATA].upper_int == 0 and h.shards[h.REMAP].upper_int == 101
    h.heal()
    h.check()
    # The new incarnation wrote the data of the orphaned binding, the same updates.
    assert [a[:3] for a in h.data_attempts].count((0, 101, data_write.updates)) == 2


def test_a_zombie_whose_writes_lose_the_race_rederives_the_same_updates() -> None:
    h = IngestionHarness(DeterministicUpstream(density=2), sink=True)
    h.produce(6)
    h.heal()
    zombie = h.live
    h.crash(zombie=True)
    new = h.live
    h.produce(4)
    # Both incarnations read upstream and mint; only one can write each time.
    for name in (zombie, new, zombie, new):
        for _ in range(6):
            h.complete(name, 0)
            h.connect_source(name)
            h.deliver_source(name, h.upstream.available)
            h.deliver_sink_input(name, h.shards[h.DATA].upper_int)
            h.advance(3)
            h.tick(name)
    h.heal()
    h.check()


@pytest.mark.parametrize("land", [False, True])
def test_a_sink_crashed_with_a_commit_in_flight_commits_each_update_once(land: bool) -> None:
    h = IngestionHarness(DeterministicUpstream(), sink=True, sink_as_of=0)
    h.produce(4)
    h.heal()
    h.produce(3)
    for _ in range(30):
        if any(isinstance(o, CommitSink) for o in h.pending()):
            break
        for i, o in enumerate(h.pending()):
            if not isinstance(o, CommitSink):
                h.complete(None, i)
                break
        h.connect_source()
        h.deliver_source(None, h.upstream.available)
        h.deliver_sink_input(None, h.shards[h.DATA].upper_int)
        h.advance(10)
        h.tick()
    commits = [o for o in h.pending() if isinstance(o, CommitSink)]
    assert commits
    writes = [o for o in h.pending() if isinstance(o, WriteShard | CommitSink)]
    h.crash(landed=[land] * len(writes))
    h.heal()
    h.check()


def test_the_live_replica_reloads_after_a_zombie_write_lands() -> None:
    h = IngestionHarness(DeterministicUpstream(), sink=False)
    h.produce(3)
    h.heal()
    old = h.live
    h.produce(2)
    h.deliver_source(old, h.upstream.available)
    h.advance(50)
    h.tick(old)
    (stale,) = h.pending(old)
    assert isinstance(stale, WriteShard) and stale.id == h.REMAP
    h.crash(zombie=True)
    new = h.live
    h.complete(new, 0)  # the new incarnation loads the shards ...
    h.complete(old, 0)  # ... then the zombie's binding lands
    h.connect_source(new)
    h.deliver_source(new, h.upstream.available)
    h.advance(50)
    h.tick(new)
    (write,) = h.pending(new)
    assert isinstance(write, WriteShard) and write.id == h.REMAP
    h.complete(new, 0)  # the upper moved: the write fails, the replica reloads
    assert isinstance(h.pending(new)[0], ReadRemap)
    h.heal()
    h.check()
    # The new incarnation wrote the data of the zombie's binding.
    assert h.shards[h.DATA].upper_int >= stale.new_upper.as_option()


def test_the_remap_hold_keeps_the_resume_binding_readable() -> None:
    # The data collection keeps no history (since = upper) and neither does the remap
    # collection's own policy: only the remap hold keeps binding(D - 1) readable.
    lag0 = LagWriteFrontier(0, 1)
    h = IngestionHarness(DeterministicUpstream(), sink=False, data_policy=lag0, remap_policy=lag0)
    h.produce(5)
    h.heal()
    d = h.shards[h.DATA].upper_int
    assert h.shards[h.REMAP].since == Antichain([d - 1])
    h.crash()
    h.heal()
    h.check()


def test_a_sink_conflict_drops_what_the_other_incarnation_committed() -> None:
    h = IngestionHarness(DeterministicUpstream(), sink=True)
    h.produce(3)
    h.heal()
    covered = h.target.covered
    old = h.live
    h.crash(zombie=True)
    new = h.live
    h.run(new, 2)  # the new incarnation opens the sink at `covered` and reads its input
    h.produce(3)
    h.run(old, 3)  # the zombie ingests and commits beyond `covered` first
    assert h.target.covered is not None and covered is not None and h.target.covered > covered
    h.run(new, 4)  # the new one's commit from `covered` conflicts; it goes on from the zombie's
    h.heal()
    h.check()
