"""The production Iceberg sink writer over the simulator's pyiceberg catalog and FileIO.

The pieces against the contract the writer relies on (pyiceberg's SQL catalog:
a commit is a compare-and-swap of the metadata pointer, a lost one raises
``CommitFailedException``), with the simulated disk's faults striking the
writer's own storage calls; the checkers' reader, which reads what landed
back with pyiceberg's parsers and scan and shares no code with the writer;
and determinism (the same seed writes the same files and snapshot ids).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import SetPropertiesUpdate

from tidegate.runtime.sinks import IcebergSinkWriter
from tidegate.runtime.sinks.iceberg import committed_property
from tidegate.sim import RunOptions, run_simulation
from tidegate.sim.choices import SeededChoices
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.iceberg import (
    BLOB_PREFIX,
    DiskAccess,
    ForeignWriter,
    IcebergReader,
    SimCatalog,
    SimFileIO,
    iceberg_sink_factory,
    pointer_key,
    pyiceberg_in_simulation,
    table_identifier,
)
from tidegate.sim.mutants import iceberg_covered_forgets_property_patch
from tidegate.sim.process import ProcessKilled, SimProcess
from tidegate.sim.scenario import sources
from tidegate.sim.sink_target import SinkFaults
from tidegate.sim.storage import BlobClient, ConsensusClient, CrashPoint, SimDisk, StorageFaults
from tidegate.spec.errors import SinkConflict, SinkOutcomeUnknown, SinkUnreachable
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import SimulatedSink

SCHEMA = Schema.of(("k", "string", False), ("n", "int64", True))


@pytest.fixture(autouse=True)
def clock() -> Iterator[list[int]]:
    """pyiceberg's clock (ms), as the simulator sets it; a test moves it on by hand."""
    now = [1_000]
    with pyiceberg_in_simulation(lambda: now[0], seed=7):
        yield now


@dataclasses.dataclass
class _World:
    disk: SimDisk
    faults: StorageFaults
    sink_faults: SinkFaults
    foreign: ForeignWriter
    counts: dict[str, int]

    def count(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def writer(self, sink: int = 9, process: SimProcess | None = None) -> IcebergSinkWriter:
        proc = process or SimProcess("storage")
        if not proc.alive:
            proc.start()
        make = iceberg_sink_factory(
            ConsensusClient(self.disk, proc, self.faults),
            BlobClient(self.disk, proc, self.faults),
            self.foreign,
            self.count,
        )
        w = make(GlobalId.user(sink), SimulatedSink("t"), SCHEMA)
        assert isinstance(w, IcebergSinkWriter)
        return w


def _world() -> _World:
    disk = SimDisk()
    sink_faults = SinkFaults(SeededChoices(1))
    counts: dict[str, int] = {}
    w = _World(disk, StorageFaults(SeededChoices(1)), sink_faults, None, counts)  # type: ignore[arg-type]
    w.foreign = ForeignWriter(disk, sink_faults, w.count)
    return w


def test_the_writer_commits_through_pyiceberg_onto_the_simulated_disk() -> None:
    w = _world()
    sink = w.writer()
    assert sink.open() is None
    sink.commit([(("a", 1), 3, 1), (("b", None), 4, 1)], 3, 5)
    sink.commit([], 5, 8)
    assert sink.covered_upper() == 8
    versions = w.disk.versions[pointer_key("t")]
    assert len(versions) == 3  # created, then two commits: each a swap of the pointer
    keys = [m.key for m in w.disk.blobs.list_keys(BLOB_PREFIX)]
    kinds = {k.rsplit(".", 1)[-1] for k in keys}
    assert {"json", "avro", "parquet"} <= kinds  # metadata, manifests and data really written
    # the checkers' reader: pyiceberg's parsers over the disk's record, not the writer's code
    reader = IcebergReader(w.disk)
    commits = reader.commits("t")
    assert [(c.sink, c.lower, c.upper) for c in commits] == [("u9", 3, 5), ("u9", 5, 8)]
    assert sorted(commits[0].updates) == [(("a", 1), 3, 1), (("b", None), 4, 1)]
    assert sorted(reader.scan("t") or []) == [(("a", 1), 3, 1), (("b", None), 4, 1)]


def test_a_commit_at_a_stale_lower_is_refused_and_another_sink_is_independent() -> None:
    w = _world()
    sink = w.writer()
    sink.open()
    sink.commit([], 0, 4)
    zombie = w.writer()  # another incarnation of the same sink
    zombie.open()
    sink.commit([], 4, 6)
    with pytest.raises(SinkConflict) as info:
        zombie.commit([(("z", 1), 4, 1)], 4, 6)
    assert info.value.actual == 6
    other = w.writer(sink=10)
    assert other.open() is None
    other.commit([(("o", 2), 1, 1)], 1, 2)
    assert sink.covered_upper() == 6 and other.covered_upper() == 2


def test_a_lost_pointer_swap_is_decided_again_on_the_new_state(clock: list[int]) -> None:
    """Another writer commits between the writer's read and its swap: pyiceberg's catalog
    raises CommitFailedException, and the writer (its own retries off) tries again."""
    w = _world()
    sink = w.writer()
    sink.open()
    w.sink_faults.foreign = 1  # another writer commits after half of the pointer reads
    for lower in range(0, 20, 2):
        clock[0] += 100  # expiry goes by snapshot timestamps
        sink.commit([(("a", lower), lower, 1)], lower, lower + 2)
    assert w.counts.get("iceberg_foreign_commit", 0) > 3
    assert sink.covered_upper() == 20
    reader = IcebergReader(w.disk)
    mine = [c for c in reader.commits("t") if c.sink == "u9"]
    assert [c.lower for c in mine] == list(range(0, 20, 2))  # every commit landed once
    # the other writer keeps one snapshot: it expired the sink's, and the property answered
    table = reader.catalog.load_table(table_identifier("t"))
    assert len(table.metadata.snapshots) < len(mine)
    assert table.properties[committed_property("u9")] == "20"


def test_the_catalog_raises_a_lost_swap_as_the_sql_catalog_does() -> None:
    """Another commit between the catalog's read of the pointer and its swap: the swap fails
    and the commit raises ``CommitFailedException`` (nothing of it is the table's)."""
    w = _world()
    w.writer().open()
    access = DiskAccess(w.disk)
    other = SimCatalog(access, SimFileIO(access))
    race: list[str] = []

    def after_read(ident: str) -> None:
        if race == ["armed"]:
            race.append("raced")
            with other.load_table(ident).transaction() as tx:
                tx.set_properties({"x": "1"})

    catalog = SimCatalog(access, SimFileIO(access), after_read=after_read)
    table = catalog.load_table(table_identifier("t"))
    race.append("armed")
    with pytest.raises(CommitFailedException):
        catalog.commit_table(table, (), (SetPropertiesUpdate(updates={"y": "2"}),))
    assert race == ["armed", "raced"]
    props = other.load_table(table_identifier("t")).properties
    assert props.get("x") == "1" and "y" not in props


def test_storage_faults_strike_the_writers_own_calls() -> None:
    w = _world()
    sink = w.writer()
    sink.open()
    w.faults.scripted["consensus compare-and-set"] = ["after"]
    with pytest.raises(SinkOutcomeUnknown):
        sink.commit([(("a", 1), 0, 1)], 0, 4)
    assert sink.covered_upper() == 4  # it landed
    w.faults.scripted["consensus compare-and-set"] = ["before"]
    with pytest.raises(SinkOutcomeUnknown):
        sink.commit([], 4, 6)
    assert sink.covered_upper() == 4  # it did not
    w.faults.scripted["blob set"] = ["before"]
    with pytest.raises(SinkUnreachable):  # a data file's write failed: nothing committed
        sink.commit([(("b", 2), 4, 1)], 4, 6)
    assert sink.covered_upper() == 4
    w.faults.scripted["consensus head"] = ["before"]
    with pytest.raises(SinkUnreachable):
        sink.open()


@pytest.mark.parametrize("after", [False, True])
def test_a_crash_point_at_the_pointer_swap_kills_the_writer_before_or_after_it(
    after: bool,
) -> None:
    w = _world()
    proc = SimProcess("storage")
    proc.start()
    sink = w.writer(process=proc)
    sink.open()
    w.faults.crash_points.append(CrashPoint("storage", "sink_commit", after))
    with pytest.raises(ProcessKilled):
        sink.commit([(("a", 1), 0, 1)], 0, 2)
    assert not proc.alive
    assert w.writer().covered_upper() == (2 if after else None)


def test_the_target_fault_fails_commits_before_or_after_the_swap() -> None:
    w = _world()
    sink = w.writer()
    sink.open()
    w.sink_faults.failing[""] = 1
    lower = 0
    for _ in range(12):
        with contextlib.suppress(SinkOutcomeUnknown):
            sink.commit([], lower, lower + 1)
        lower = sink.covered_upper() or 0
    assert w.counts.get("sink_commit_failed_before", 0) > 0
    assert w.counts.get("sink_commit_failed_after", 0) > 0
    landed = [c for c in IcebergReader(w.disk).commits("t") if c.sink == "u9"]
    assert landed[-1].upper == lower == len(landed)


def test_pyiceberg_in_the_simulation_draws_the_same_ids_for_the_same_seed() -> None:
    def files() -> tuple[list[str], list[int]]:
        w = _world()
        sink = w.writer()
        sink.open()
        for lower in range(3):
            sink.commit([(("a", lower), lower, 1)], lower, lower + 1)
        reader = IcebergReader(w.disk)
        table = reader.catalog.load_table(table_identifier("t"))
        keys = sorted(m.key for m in w.disk.blobs.list_keys())
        return keys, [s.snapshot_id for s in table.metadata.snapshots]

    clock = [5_000]
    with pyiceberg_in_simulation(lambda: clock[0], seed=3):
        first = files()
    with pyiceberg_in_simulation(lambda: clock[0], seed=3):
        assert files() == first
    table_times = set()
    with pyiceberg_in_simulation(lambda: clock[0], seed=3):
        w = _world()
        sink = w.writer()
        sink.open()
        sink.commit([], 0, 1)
        table = IcebergReader(w.disk).catalog.load_table(table_identifier("t"))
        table_times = {s.timestamp_ms for s in table.metadata.snapshots}
    assert table_times == {5_000}  # the simulated clock, not the machine's


SHORT = dataclasses.replace(sources(), duration_ms=4_000, quiet_ms=7_000)

ICEBERG_PLAN = FaultPlan(
    (
        Fault(600, FaultKind.FOREIGN_SINK_COMMITS, duration_ms=1_500),
        Fault(900, FaultKind.ZOMBIE_STORAGE_REPLICA, duration_ms=800),
        Fault(1_400, FaultKind.SINK_COMMIT_FAILURES, duration_ms=800),
        Fault(2_200, FaultKind.CRASH_STORAGE_REPLICA_IN, "sink_commit", 150),
        Fault(2_900, FaultKind.CRASH_STORAGE_REPLICA_IN, "blob", 150),
    ),
    enabled=(
        FaultKind.FOREIGN_SINK_COMMITS,
        FaultKind.ZOMBIE_STORAGE_REPLICA,
        FaultKind.SINK_COMMIT_FAILURES,
        FaultKind.CRASH_STORAGE_REPLICA_IN,
    ),
)


@pytest.mark.slow
def test_a_sources_run_with_the_sinks_faults_passes_and_judged_real_tables() -> None:
    r = run_simulation(RunOptions(seed=1, scenario=SHORT, plan=ICEBERG_PLAN))
    assert r.ok, "\n".join([r.summary(), *r.trace_tail[-30:], r.error or ""])
    s = r.sometimes
    assert s.get("iceberg_foreign_commit", 0) > 0, s
    assert s.get("iceberg_table_scanned", 0) > 0, s
    assert s.get("sink_target_checked", 0) > 0, s
    assert s.get("crash_point_sink_commit", 0) == 1, s
    again = run_simulation(RunOptions(seed=1, scenario=SHORT, plan=ICEBERG_PLAN))
    assert again.trace_digest == r.trace_digest


FOREIGN_OVER_A_RESTART = FaultPlan(
    (
        Fault(800, FaultKind.FOREIGN_SINK_COMMITS, duration_ms=2_500),
        Fault(2_000, FaultKind.CRASH_STORAGE_REPLICA, duration_ms=200),
    ),
    enabled=(FaultKind.FOREIGN_SINK_COMMITS, FaultKind.CRASH_STORAGE_REPLICA),
)


@pytest.mark.slow
def test_a_restart_while_another_writer_expires_the_sinks_snapshots_needs_the_property() -> None:
    """The storage replica restarts while another writer commits to the sinks' tables and
    expires their snapshots: the restarted sinks find their covered uppers in the table
    property. A writer that reads its own snapshots alone
    (:func:`~tidegate.sim.mutants.iceberg_covered_forgets_property_patch`) re-sends what it had
    committed, and the chain check sees it."""
    options = RunOptions(seed=1, scenario=SHORT, plan=FOREIGN_OVER_A_RESTART)
    ok = run_simulation(options)
    assert ok.ok, "\n".join([ok.summary(), *ok.trace_tail[-30:], ok.error or ""])
    assert ok.sometimes.get("iceberg_foreign_commit", 0) > 0
    with iceberg_covered_forgets_property_patch():
        broken = run_simulation(options)
    assert broken.violation is not None and broken.violation.property == "sink_commits_chain"
