"""The storage world of the simulator: simulated upstreams and sink targets, the real storage
service as the storage replica, its faults, and whole ``sources`` runs.

The pieces first, against the contracts the storage service relies on (the
reader contract of ``SourceReader``, the writer contract of
``IcebergSinkWriter``); then runs: a seed passes every checker and replays
byte for byte, and every fault of the storage world fires in one planned run
that still passes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from tidegate.sim import RunOptions, RunResult, check_history, run_simulation
from tidegate.sim.choices import SeededChoices
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.process import ProcessKilled, SimProcess
from tidegate.sim.scenario import sources
from tidegate.sim.sink_target import SimSinkWriter, SinkFaults, read_target
from tidegate.sim.storage import ConsensusClient, CrashPoint, SimDisk, StorageFaults
from tidegate.sim.upstream import SimSourceReader, UpstreamLog, Upstreams
from tidegate.spec.errors import (
    ReplicationSlotMissing,
    SinkConflict,
    SinkOutcomeUnknown,
    SinkUnreachable,
    SourceConfigurationInvalid,
    UpstreamSchemaChanged,
    UpstreamUnreachable,
)
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.shard import VersionedData, Watchable
from tidegate.spec.storage.connections import LoadGenerator, SimulatedSource

SCHEMA = Schema.of(("k", "string", False), ("n", "int64", True))
SOURCE = GlobalId.user(5)
SHORT = dataclasses.replace(sources(), duration_ms=4_000, quiet_ms=7_000)


def _explain(r: RunResult) -> str:
    return "\n".join([r.summary(), r.plan.dumps()[:3000], *r.trace_tail[-40:], r.error or ""])


# -- the upstream log and its reader ---------------------------------------------------------


def _log() -> UpstreamLog:
    log = UpstreamLog("log", SCHEMA)
    log.write([(("a", 1), 1), (("b", 2), 1)], gap=0, now_ms=10)  # offset 1
    log.write([(("a", 1), -1)], gap=2, now_ms=20)  # offset 4
    log.write([(("c", None), 1)], gap=1, now_ms=30)  # offset 6
    return log


def _reader(log: UpstreamLog, now: list[int], acks: list[tuple[GlobalId, int]]) -> SimSourceReader:
    return SimSourceReader(
        log,
        SOURCE,
        SeededChoices(3),
        lambda: now[0],
        lambda s, o: acks.append((s, o)),
        lambda n: None,
    )


def _drain(reader: SimSourceReader, upper: int = 0) -> tuple[list[tuple[Row, int, int]], int]:
    """Every batch the reader has (the stream may come in pieces: a poll finding only part of a
    transaction returns nothing), checked against the reader contract; the updates and the last
    upper."""
    got: list[tuple[Row, int, int]] = []
    for _ in range(50):
        batch = reader.poll(0.0)
        if batch is None:
            continue
        assert batch.upper > upper and all(upper <= o < batch.upper for _, o, _ in batch.updates)
        got.extend(batch.updates)
        upper = batch.upper
    return got, upper


def _consolidated(updates: list[tuple[Row, int, int]]) -> Counter[Row]:
    rows: Counter[Row] = Counter()
    for row, _, diff in updates:
        rows[row] += diff
    return +rows


def test_the_log_keeps_every_change_at_its_offset_and_the_rows_upstream_holds() -> None:
    log = _log()
    assert log.upper == 7 and log.offsets == [1, 4, 6]
    assert log.between(0, 7) == [
        (("a", 1), 1, 1),
        (("b", 2), 1, 1),
        (("a", 1), 4, -1),
        (("c", None), 6, 1),
    ]
    assert log.between(2, 6) == [(("a", 1), 4, -1)]
    assert sorted(log.present, key=repr) == [("b", 2), ("c", None)]


def test_a_reader_delivers_a_snapshot_then_every_change_once_through_the_production_core() -> None:
    """A fresh source snapshots the table at its slot's consistent point, then streams every
    later transaction at its offset (the walsender's bytes decoded by the production core),
    whatever the drawn fragmentation of the stream."""
    for k in range(20):
        log, now, acks = _log(), [100], []
        reader = _reader(log, now, acks)
        reader.choices = SeededChoices(k)
        reader.start(0)
        assert reader.core is not None and reader.core.consistent_point == 6
        snapshot, upper = _drain(reader)
        assert upper == 7 and {o for _, o, _ in snapshot} == {6}
        assert _consolidated(snapshot) == _consolidated(log.between(0, 7))
        for n in range(6):  # deletes and inserts (an update, when in one transaction)
            row = log.present[0]
            log.write([(row, -1), ((f"x{n}", n), 1)], gap=n % 3, now_ms=100 + n)
            if n % 2:
                log.write([((f"y{n}", None), 1)], gap=0, now_ms=100 + n)
        got, upper = _drain(reader, upper)
        assert upper == log.upper and sorted(got, key=repr) == sorted(
            log.between(7, log.upper), key=repr
        )


def test_a_slot_forgets_what_was_acknowledged_and_a_reader_starts_there() -> None:
    log, now, acks = _log(), [100], []
    first = _reader(log, now, acks)
    first.start(0)
    _, upper = _drain(first)
    log.write([(("d", 4), 1)], gap=0, now_ms=50)  # offset 7
    log.write([(("e", 5), 1)], gap=0, now_ms=50)  # offset 8
    _, upper = _drain(first, upper)
    assert upper == 9
    first.ack(8)  # the standby status update says offset 7 is flushed: the slot confirms it
    assert acks == [(SOURCE, 8)] and log.acknowledged(SOURCE) == 8 and log.slots[SOURCE] == 7
    again = _reader(log, now, acks)
    again.start(8)
    updates, _ = _drain(again)
    assert updates == [(("e", 5), 8, 1)]
    assert log.acknowledged(GlobalId.user(6)) == 0  # another source has a slot of its own


def test_a_restart_before_the_snapshot_was_durable_rewinds_a_later_snapshot() -> None:
    """The slot exists but nothing is durable: the core rewinds a snapshot taken now to the
    slot's consistent point by the changes streamed since, so the same updates come back at the
    same offsets."""
    log, now, acks = _log(), [100], []
    first = _reader(log, now, acks)
    first.start(0)
    snapshot, _ = _drain(first)
    log.write([(("b", 2), -1)], gap=1, now_ms=50)  # offset 8
    log.write([(("f", 6), 1)], gap=0, now_ms=50)  # offset 9
    again = _reader(log, now, acks)
    again.start(0)
    updates, upper = _drain(again)
    assert upper == log.upper
    assert sorted(u for u in updates if u[1] == 6) == sorted(snapshot)
    assert sorted(u for u in updates if u[1] > 6) == sorted(log.between(7, log.upper))


def test_an_unreachable_upstream_refuses_with_a_typed_retryable_error_and_recovers() -> None:
    log, now, acks = _log(), [100], []
    log.unreachable_until_ms = 200
    reader = _reader(log, now, acks)
    with pytest.raises(UpstreamUnreachable) as info:
        reader.start(0)
    assert info.value.retryable
    now[0] = 200
    reader = _reader(log, now, acks)
    reader.start(0)
    assert reader.poll(0.0) is not None
    log.unreachable_until_ms = 300
    with pytest.raises(UpstreamUnreachable):
        reader.poll(0.0)


def test_a_schema_change_upstream_is_the_cores_typed_error_after_what_came_before() -> None:
    """The walsender sends a RELATION of the new shape before the first change at the schema
    change's offset: the core returns the transactions before it, then raises; a reader
    starting later finds the table changed."""
    log, now, acks = _log(), [100], []
    reader = _reader(log, now, acks)
    reader.start(0)
    _, upper = _drain(reader)
    log.write([(("g", 7), 1)], gap=0, now_ms=50)  # offset 7, the old shape
    log.schema_changed_at = log.upper
    log.write([(("h", 8), 1)], gap=0, now_ms=50)  # offset 8, the new shape
    batch = reader.poll(0.0)
    assert batch is not None and batch.updates == ((("g", 7), 7, 1),)
    with pytest.raises(UpstreamSchemaChanged, match="note"):
        reader.poll(0.0)
    with pytest.raises(UpstreamSchemaChanged):
        _reader(log, now, acks).start(upper)


def test_a_lost_slot_ends_the_stream_and_a_restart_with_durable_data_is_refused_typed() -> None:
    log, now, acks = _log(), [100], []
    reader = _reader(log, now, acks)
    reader.start(0)
    _, upper = _drain(reader)
    reader.ack(upper)
    log.lost_slots.add(SOURCE)
    with pytest.raises(UpstreamUnreachable):  # the server terminated the walsender
        reader.poll(0.0)
    with pytest.raises(ReplicationSlotMissing):
        _reader(log, now, acks).start(upper)
    fresh = _reader(log, now, acks)
    fresh.start(0)  # nothing durable: a new slot and its snapshot
    assert SOURCE not in log.lost_slots and fresh.poll(0.0) is not None


def test_slow_delivery_shows_only_changes_written_long_enough_ago() -> None:
    log, now = _log(), [35]
    log.lag_ms = 10
    assert log.visible_upper(now[0]) == 6  # offset 6 was written at 30: not yet
    now[0] = 40
    assert log.visible_upper(now[0]) == log.upper
    log.lag_ms = 100
    assert log.visible_upper(now[0]) == 1


def test_the_factory_reads_simulated_sources_only_and_refuses_unknown_upstreams() -> None:
    ups = Upstreams(SeededChoices(1), lambda: 0, lambda s, o: None, lambda n: None)
    ups.add("log", SCHEMA)
    assert ups.source_factory(SOURCE, LoadGenerator(), SCHEMA) is None
    assert isinstance(ups.source_factory(SOURCE, SimulatedSource("log"), SCHEMA), SimSourceReader)
    with pytest.raises(SourceConfigurationInvalid):
        ups.source_factory(SOURCE, SimulatedSource("nope"), SCHEMA)
    with pytest.raises(SourceConfigurationInvalid):
        ups.source_factory(SOURCE, SimulatedSource("log"), Schema.of(("k", "string", False)))


# -- consensus notifications -----------------------------------------------------------------


def test_a_process_hears_of_commits_except_in_an_outage_and_not_after_it_died() -> None:
    """A consensus client is watchable as PostgreSQL's is: a commit by any process reaches the
    watchers of its key at once; while a consensus outage is open its notification is lost
    (the product must notice the commit by polling); a dead incarnation's watch ends."""
    disk, faults = SimDisk(), StorageFaults(SeededChoices(1))
    replica, controller = SimProcess("replica-1"), SimProcess("controller")
    replica.start()
    controller.start()
    reader = ConsensusClient(disk, replica, faults)
    writer = ConsensusClient(disk, controller, faults)
    assert isinstance(reader, Watchable)
    heard: list[str] = []
    reader.watch("s", heard.append)
    reader.watch("other", heard.append)
    assert writer.compare_and_set("s", None, VersionedData(0, b"a"))
    assert not writer.compare_and_set("s", None, VersionedData(0, b"b"))  # no commit, no news
    assert heard == ["s"]
    faults.consensus_failing += 1
    faults.scripted["consensus compare-and-set"] = [None]  # this commit goes through
    assert writer.compare_and_set("s", 0, VersionedData(1, b"c"))
    assert heard == ["s"]  # its notification was lost
    faults.consensus_failing -= 1
    assert writer.compare_and_set("s", 1, VersionedData(2, b"d"))
    assert heard == ["s", "s"]
    replica.die()
    replica.start()  # a new incarnation: nothing of the old one runs
    assert writer.compare_and_set("s", 2, VersionedData(3, b"e"))
    assert heard == ["s", "s"]


# -- the sink target ---------------------------------------------------------------------------


def _writer(
    disk: SimDisk,
    sink: int = 9,
    *,
    process: SimProcess | None = None,
    faults: StorageFaults | None = None,
) -> SimSinkWriter:
    proc = process or SimProcess("storage")
    if not proc.alive:
        proc.start()
    client = ConsensusClient(disk, proc, faults or StorageFaults(SeededChoices(1)))
    return SimSinkWriter(
        "t", GlobalId.user(sink), client, SinkFaults(SeededChoices(1)), lambda n: None
    )


def test_commits_are_conditional_on_the_covered_upper_as_an_iceberg_writers_are() -> None:
    disk = SimDisk()
    w = _writer(disk)
    assert w.open() is None
    w.commit([(("a",), 3, 1)], 3, 5)  # the first commit starts the history
    assert w.covered_upper() == 5
    w.commit([], 5, 8)
    with pytest.raises(SinkConflict) as info:
        w.commit([(("b",), 6, 1)], 5, 9)  # a zombie's commit at an old lower
    assert info.value.actual == 8
    other = _writer(disk, sink=10)  # another sink in the same target is independent
    assert other.open() is None
    other.commit([(("z",), 1, 1)], 1, 2)
    assert w.covered_upper() == 8 and other.covered_upper() == 2
    commits = read_target(disk, "t")
    assert [(c.sink, c.lower, c.upper) for c in commits] == [
        ("u9", 3, 5),
        ("u9", 5, 8),
        ("u10", 1, 2),
    ]
    assert commits[0].updates == ((("a",), 3, 1),)


def test_a_commit_whose_answer_is_lost_has_an_unknown_outcome_and_open_tells() -> None:
    disk = SimDisk()
    faults = StorageFaults(SeededChoices(1))
    w = _writer(disk, faults=faults)
    faults.scripted["consensus compare-and-set"] = ["after"]
    with pytest.raises(SinkOutcomeUnknown):
        w.commit([(("a",), 0, 1)], 0, 4)
    assert w.open() == 4  # it landed
    faults.scripted["consensus compare-and-set"] = ["before"]
    with pytest.raises(SinkOutcomeUnknown):
        w.commit([], 4, 6)
    assert w.open() == 4  # it did not
    faults.scripted["consensus head"] = ["before"]
    with pytest.raises(SinkUnreachable):
        w.open()


def test_the_target_fault_fails_commits_before_or_after_they_land() -> None:
    disk = SimDisk()
    w = _writer(disk)
    w.faults.failing[""] = 1
    outcomes: Counter[str] = Counter()
    lower = 0
    for _ in range(40):
        try:
            w.commit([], lower, lower + 1)
            outcomes["ok"] += 1
        except SinkOutcomeUnknown:
            outcomes["unknown"] += 1
        except SinkUnreachable:
            outcomes["failed"] += 1
        lower = w.covered_upper() or 0
    assert set(outcomes) == {"ok", "unknown", "failed"}
    assert lower == outcomes["ok"] + outcomes["unknown"]  # an unknown outcome had landed


def test_a_crash_point_in_a_sink_commit_kills_the_process_before_or_after_it_applies() -> None:
    for after in (False, True):
        disk = SimDisk()
        proc = SimProcess("storage")
        proc.start()
        faults = StorageFaults(SeededChoices(1))
        faults.crash_points.append(CrashPoint("storage", "sink_commit", after))
        w = _writer(disk, process=proc, faults=faults)
        with pytest.raises(ProcessKilled):
            w.commit([(("a",), 0, 1)], 0, 2)
        assert not proc.alive
        assert len(read_target(disk, "t")) == (1 if after else 0)


# -- whole runs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seed_run() -> RunResult:
    return run_simulation(RunOptions(seed=2, scenario=SHORT))


def test_a_sources_seed_passes_every_checker_and_the_checks_had_material(
    seed_run: RunResult,
) -> None:
    r = seed_run
    assert r.ok, _explain(r)
    for counter in (
        "create_source",
        "create_sink",
        "source_batch_checked",
        "sink_target_checked",
        "upstream_ack_checked",
        "source_read_checked",
        "upstream_batch_split",
    ):
        assert r.sometimes.get(counter, 0) > 0, (counter, r.sometimes)
    assert any(e["op"] == "source_data" and e["updates"] for e in r.history.events)
    assert any(a.kind == "upstream" for a in r.plan.actions or ())
    assert check_history(r.history, SHORT) == []  # the offline checker judges source reads too


def test_the_same_sources_seed_gives_the_same_trace(seed_run: RunResult) -> None:
    """Run again from the plan the first run reported (its upstream writes included): the
    second run draws nothing the first drew, and still every event is the same. (Only the
    kernel's event count may differ: a draw that found nothing to do is not in the plan.)"""
    replayed = run_simulation(RunOptions(seed=2, scenario=SHORT, plan=seed_run.plan))
    assert replayed.trace_digest == seed_run.trace_digest
    assert dataclasses.replace(replayed.stats, events=0, wall_s=0) == dataclasses.replace(
        seed_run.stats, events=0, wall_s=0
    )


STORAGE_PLAN = FaultPlan(
    (
        Fault(500, FaultKind.ZOMBIE_STORAGE_REPLICA, duration_ms=700),
        Fault(800, FaultKind.UPSTREAM_UNREACHABLE, "orders_log", 500),
        Fault(1_000, FaultKind.SLOW_UPSTREAM, "events_log", 600, factor=5),
        Fault(1_200, FaultKind.SINK_COMMIT_FAILURES, duration_ms=900),
        Fault(1_500, FaultKind.CRASH_STORAGE_REPLICA_IN, "rehydration", 200),
        Fault(1_600, FaultKind.CUT_STORAGE_CONNECTION, duration_ms=100),
        Fault(2_300, FaultKind.CRASH_STORAGE_REPLICA_IN, "data_write", 150),
        Fault(2_800, FaultKind.CRASH_STORAGE_REPLICA_IN, "sink_commit", 150),
        Fault(3_200, FaultKind.CRASH_STORAGE_REPLICA, duration_ms=200),
        Fault(3_300, FaultKind.CONSENSUS_FAILURES, duration_ms=300),
    ),
    enabled=(
        FaultKind.ZOMBIE_STORAGE_REPLICA,
        FaultKind.UPSTREAM_UNREACHABLE,
        FaultKind.SLOW_UPSTREAM,
        FaultKind.SINK_COMMIT_FAILURES,
        FaultKind.CRASH_STORAGE_REPLICA_IN,
        FaultKind.CUT_STORAGE_CONNECTION,
        FaultKind.CRASH_STORAGE_REPLICA,
        FaultKind.CONSENSUS_FAILURES,
    ),
)


def test_every_fault_of_the_storage_world_fires_and_is_survived() -> None:
    r = run_simulation(RunOptions(seed=1, scenario=SHORT, plan=STORAGE_PLAN, coverage=True))
    assert r.ok, _explain(r)
    assert r.coverage is not None
    outputs = r.coverage["storage_outputs"]  # what the storage core asked the service for
    for kind in ("StartSource", "ReadRemap", "WriteShard", "AckSource", "OpenSink", "CommitSink"):
        assert outputs[kind] > 0, outputs
    assert r.coverage["errors"]["SinkConflict"] > 0  # the zombie's commits were refused
    fired = {k: r.sometimes.get(k.value, 0) for k in STORAGE_PLAN.enabled}
    assert fired[FaultKind.CRASH_STORAGE_REPLICA_IN] == 3, fired
    assert all(n > 0 for n in fired.values()), fired
    assert r.sometimes.get("upstream_unreachable_met", 0) > 0
    assert r.sometimes.get("storage_service_source_failed", 0) > 0  # stalled, then recovered
