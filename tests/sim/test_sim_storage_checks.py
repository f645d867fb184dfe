"""The checkers of sources and sinks (:mod:`tidegate.sim.storage_checks`) on hand-made disks.

The shards are written with the production shard store over the simulated
disk, exactly as a storage replica writes them; each test lays down an
ingestion's bindings and data (or a sink's commits) right, or wrong in one
way, and checks that exactly the property that broke is reported.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from tidegate.runtime.controller.schemas import arrow_schema
from tidegate.runtime.storage import ShardStore
from tidegate.sim.choices import SeededChoices
from tidegate.sim.history import ClientHistory
from tidegate.sim.iceberg import ForeignWriter, iceberg_sink_factory, pyiceberg_in_simulation
from tidegate.sim.process import SimProcess
from tidegate.sim.sink_target import SimSinkWriter, SinkCommit, SinkFaults, _encode
from tidegate.sim.storage import BlobClient, ConsensusClient, SimDisk, StorageFaults
from tidegate.sim.storage_checks import RemapLog, StorageChecker
from tidegate.sim.truth import TruthLog
from tidegate.sim.upstream import Upstreams
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.shard import VersionedData
from tidegate.spec.storage.connections import SimulatedSink
from tidegate.spec.storage.reclock import REMAP_SCHEMA, mint_binding

SCHEMA = Schema.of(("k", "string", False))
DATA, REMAP = GlobalId.user(1), GlobalId.user(2)


class World:
    """What the checker reads of a world: the disk, the upstreams, the clock, the history."""

    def __init__(self, sink_writer: str = "simulated") -> None:
        self.disk = SimDisk()
        self.scenario = SimpleNamespace(sink_writer=sink_writer)
        self.counts: Counter[str] = Counter()
        self.upstreams = Upstreams(SeededChoices(1), lambda: 0, lambda s, o: None, self.count)
        self.log = self.upstreams.add("log", SCHEMA)
        # offset 1: +a +b, offset 4: -a, offset 6: +c
        self.log.write([(("a",), 1), (("b",), 1)], 0, 0)
        self.log.write([(("a",), -1)], 2, 0)
        self.log.write([(("c",), 1)], 1, 0)
        self.kernel = SimpleNamespace(now_ms=0)
        self.history = ClientHistory()
        self.controller = SimpleNamespace(env=None)
        self.storage = None
        proc = SimProcess("storage")
        proc.start()
        faults = StorageFaults(SeededChoices(1))
        self.consensus = ConsensusClient(self.disk, proc, faults)
        self.store = ShardStore(
            BlobClient(self.disk, proc, faults),
            self.consensus,
            writer_id="test",
            clock_ms=lambda: 0,
            new_id=proc.new_id,
        )
        self.store.create_shard(str(DATA), arrow_schema(SCHEMA))
        self.store.create_shard(str(REMAP), arrow_schema(REMAP_SCHEMA))
        self.violations: list[tuple[str, str]] = []
        self.checker = StorageChecker(self, TruthLog(self.disk, self.violate), self.violate)  # type: ignore[arg-type]
        self.checker.track_source(DATA, "src", REMAP, "log")
        self.binding = 0

    def count(self, name: str) -> None:
        self.counts[name] += 1

    def violate(self, prop: str, message: str) -> None:
        self.violations.append((prop, message))

    def properties(self) -> list[str]:
        return [p for p, _ in self.violations]

    def bind(self, t: int, offset: int) -> None:
        """Mint ``offset`` at ``t`` (the remap shard's upper becomes ``t + 1``)."""
        upper = int(self.store.upper(str(REMAP)).elements[0])
        updates = list(mint_binding(self.binding, offset, t))
        self.store.compare_and_append(str(REMAP), updates, Antichain([upper]), Antichain([t + 1]))
        self.binding = offset

    def data(self, hi: int, updates: list[Update]) -> None:
        lo = int(self.store.upper(str(DATA)).elements[0])
        self.store.compare_and_append(str(DATA), updates, Antichain([lo]), Antichain([hi]))

    def right(self) -> None:
        """The ingestion done right: bindings 5 at 10 and 7 at 20, each before its data."""
        self.bind(10, 5)
        self.data(11, [(("b",), 10, 1)])  # +a and -a both at 10: consolidated away
        self.bind(20, 7)
        self.data(21, [(("c",), 20, 1)])


def test_an_ingestion_done_right_passes_and_acknowledging_what_is_durable_is_fine() -> None:
    w = World()
    w.right()
    w.checker.check()
    assert w.violations == []
    assert w.counts["source_batch_checked"] == 2
    w.checker.acknowledged(DATA, 7)
    assert w.violations == []


def test_acknowledging_beyond_what_is_durable_is_caught() -> None:
    w = World()
    w.bind(10, 5)
    w.data(11, [(("b",), 10, 1)])
    w.bind(20, 7)  # bound, but its data is not written yet
    w.checker.acknowledged(DATA, 7)
    assert w.properties() == ["upstream_acked_only_durable"]


def test_data_landing_before_its_binding_is_caught() -> None:
    w = World()
    w.data(11, [(("b",), 10, 1)])
    w.bind(10, 5)
    w.checker.check()
    assert "binding_before_data" in w.properties()


@pytest.mark.parametrize(
    "updates",
    [
        [(("c",), 19, 1)],  # at a time its offset's binding does not give it
        [(("c",), 20, 2)],  # twice
        [],  # lost
        [(("c",), 20, 1), (("d",), 20, 1)],  # something upstream never wrote
    ],
)
def test_data_that_are_not_the_reclocked_upstream_changes_are_caught(updates: list[Update]) -> None:
    w = World()
    w.bind(10, 5)
    w.data(11, [(("b",), 10, 1)])
    w.bind(20, 7)
    w.data(21, updates)
    w.checker.check()
    assert w.properties() == ["source_exactly_once"]


def test_bindings_that_go_back_are_caught() -> None:
    w = World()
    w.bind(10, 5)
    upper = 11
    back: Any = [((2,), 15, 1), ((5,), 15, -1)]
    w.store.compare_and_append(str(REMAP), back, Antichain([upper]), Antichain([16]))
    w.checker.check()
    assert "remap_bindings_valid" in w.properties()


def test_the_checkers_own_bindings_reclock_as_the_reference_section_says() -> None:
    b = RemapLog()
    assert b.feed([((3,), 2, 1), ((7,), 5, 1), ((3,), 5, -1)], 6) is None
    assert [b.at(t) for t in (1, 2, 4, 5)] == [0, 3, 3, 7]
    assert [b.time_of(o) for o in (0, 2, 3, 6, 7)] == [2, 2, 5, 5, None]
    assert b.feed([((9,), 7, 1), ((9,), 8, 1)], 9) is not None  # two rows at a time


# -- sinks ----------------------------------------------------------------------------------


def _sink(w: World) -> SimSinkWriter:
    sink = GlobalId.user(9)
    w.checker.track_sink(sink, "snk", DATA, "target")
    return SimSinkWriter("target", sink, w.consensus, SinkFaults(SeededChoices(1)), w.count)


def test_a_sink_that_commits_its_input_once_passes() -> None:
    w = World()
    w.right()
    writer = _sink(w)
    writer.commit([(("b",), 15, 1)], 15, 16)  # the snapshot at the as_of 15
    writer.commit([(("c",), 20, 1)], 16, 21)
    w.checker.check_sinks()
    assert w.violations == [] and w.counts["sink_target_checked"] == 1


def test_a_sink_that_commits_an_update_twice_is_caught() -> None:
    w = World()
    w.right()
    writer = _sink(w)
    writer.commit([(("b",), 15, 1)], 15, 16)
    writer.commit([(("c",), 20, 1)], 16, 21)
    writer.commit([(("c",), 21, 1)], 21, 22)  # c again: the input has it once, at 20
    w.checker.check_sinks()
    assert w.properties() == ["sink_exactly_once"]


def _iceberg_sink(w: World) -> Any:
    sink = GlobalId.user(9)
    w.checker.track_sink(sink, "snk", DATA, "target")
    proc = SimProcess("storage")
    proc.start()
    faults = StorageFaults(SeededChoices(1))
    sink_faults = SinkFaults(SeededChoices(1))
    make = iceberg_sink_factory(
        ConsensusClient(w.disk, proc, faults),
        BlobClient(w.disk, proc, faults),
        ForeignWriter(w.disk, sink_faults, w.count),
        w.count,
    )
    writer = make(sink, SimulatedSink("target"), SCHEMA)
    writer.open()
    return writer


@pytest.mark.parametrize("twice", [False, True])
def test_an_iceberg_table_is_judged_from_what_it_holds(twice: bool) -> None:
    """The production Iceberg writer's table, read back from its metadata and data files: its
    input's changes once pass, an update committed twice is caught."""
    w = World(sink_writer="iceberg")
    w.right()
    with pyiceberg_in_simulation(lambda: 0, seed=1):
        writer = _iceberg_sink(w)
        writer.commit([(("b",), 15, 1)], 15, 16)
        writer.commit([(("c",), 20, 1)] * (2 if twice else 1), 16, 21)
        w.checker.check_sinks()
        w.checker.check_tables()
    assert w.properties() == (["sink_exactly_once"] if twice else [])
    assert w.counts["sink_target_checked"] == 1 and w.counts["iceberg_table_scanned"] == 1


def test_sink_commits_that_do_not_chain_are_caught() -> None:
    w = World()
    w.right()
    writer = _sink(w)
    writer.commit([(("b",), 15, 1)], 15, 16)
    head = w.disk.consensus.head("sinks/target")
    assert head is not None
    # A writer without the condition: [18, 21) lands although the target covers only 16.
    gap = SinkCommit(str(GlobalId.user(9)), 18, 21, ((("c",), 20, 1),))
    data = _encode(gap, {str(GlobalId.user(9)): 21})
    assert w.disk.compare_and_set("sinks/target", head.seqno, VersionedData(head.seqno + 1, data))
    w.checker.check_sinks()
    assert w.properties() == ["sink_commits_chain"]
