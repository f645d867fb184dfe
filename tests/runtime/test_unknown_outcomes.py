"""Storage calls whose answer is lost: the catalog, the oracle and the shard store find out what happened.

Each case is a bug the simulator found (``tidegate sim``): a compare-and-set
that applied but whose answer never came back, or housekeeping after a commit
that failed, was reported to the caller as a failure -- so the caller retried
into a conflict (the catalog stuck on ``CatalogConflict``, the oracle fenced
for ever) or told a client its DDL failed when it had landed. The backend here
is the simulator's disk (``tidegate.sim.storage``), scripted to fail once.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from tidegate.runtime.catalog import Catalog, CreateTable
from tidegate.runtime.errors import CatalogConflict
from tidegate.runtime.oracle import TimestampOracle
from tidegate.runtime.storage.store import ShardStore
from tidegate.sim.choices import SeededChoices
from tidegate.sim.process import SimProcess
from tidegate.sim.storage import (
    BlobClient,
    ConsensusClient,
    SimDisk,
    StorageFaults,
    StorageOutage,
)
from tidegate.spec.errors import Indeterminate
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema

CAS = "consensus compare-and-set"
TRUNCATE = "consensus truncate"


def backend() -> tuple[SimDisk, StorageFaults, ConsensusClient, BlobClient]:
    disk = SimDisk()
    faults = StorageFaults(SeededChoices(1))
    process = SimProcess("test")
    process.start()
    return disk, faults, ConsensusClient(disk, process, faults), BlobClient(disk, process, faults)


def create(name: str, n: int) -> CreateTable:
    return CreateTable(name, GlobalId.user(n), Schema.of(("x", "int64", False)))


def test_a_catalog_write_that_landed_without_an_answer_counts_as_done() -> None:
    _, faults, consensus, _ = backend()
    catalog = Catalog(consensus)
    faults.scripted[CAS] = ["after"]
    state = catalog.apply([create("t", 1)])  # the answer is lost; the catalog looks and sees it
    assert state.by_name("t").id == GlobalId.user(1)
    assert Catalog(consensus).load() == state
    assert catalog.apply([create("u", 2)]).by_name("u").id == GlobalId.user(2)


def test_a_catalog_write_that_did_not_land_raises_and_a_retry_succeeds() -> None:
    _, faults, consensus, _ = backend()
    catalog = Catalog(consensus)
    faults.scripted[CAS] = ["before"]
    with pytest.raises(StorageOutage):
        catalog.apply([create("t", 1)])
    assert Catalog(consensus).load().entries() == []
    assert catalog.apply([create("t", 1)]).by_name("t").id == GlobalId.user(1)


def test_a_retry_after_a_lost_answer_finds_its_own_write_not_a_conflict() -> None:
    """The lost answer and the look both fail; the retry then sees its own state at its seqno."""
    _, faults, consensus, _ = backend()
    catalog = Catalog(consensus)
    faults.scripted[CAS] = ["after"]
    faults.scripted["consensus head"] = ["before"]
    with pytest.raises(StorageOutage):
        catalog.apply([create("t", 1)])
    assert catalog.apply([create("t", 1)]).by_name("t").id == GlobalId.user(1)
    other = Catalog(consensus)
    other.load()
    other.apply([create("u", 2)])
    with pytest.raises(CatalogConflict):  # a real conflict is still one
        catalog.apply([create("v", 3)])


def test_failed_housekeeping_after_a_catalog_commit_does_not_fail_the_write() -> None:
    _, faults, consensus, _ = backend()
    catalog = Catalog(consensus)
    faults.scripted[TRUNCATE] = ["before"]
    assert catalog.apply([create("t", 1)]).by_name("t").id == GlobalId.user(1)


def test_an_oracle_reservation_that_landed_without_an_answer_is_not_a_fencing() -> None:
    _, faults, consensus, _ = backend()
    clock = [1_000]
    oracle = TimestampOracle(consensus, clock_ms=lambda: clock[0], window_ms=10)
    faults.scripted[CAS] = ["after"]
    clock[0] = 5_000
    assert oracle.write_ts() == 5_000  # a new window was reserved; its answer was lost
    clock[0] = 9_000
    assert oracle.write_ts() == 9_000  # not OracleFenced


def test_a_shard_append_retried_with_its_token_after_a_lost_answer_lands_once() -> None:
    _, faults, consensus, blob = backend()
    store = ShardStore(blob, consensus)
    schema = pa.schema([pa.field("c0", pa.int64(), nullable=False)])
    store.create_shard("s", schema)
    faults.scripted[CAS] = ["after"]
    with pytest.raises(Indeterminate):
        store.compare_and_append("s", [((1,), 0, 1)], 0, 1, "token-1")
    assert store.compare_and_append("s", [((1,), 0, 1)], 0, 1, "token-1") == Antichain([1])
    assert store.snapshot_rows("s", 0) == [((1,), 0, 1)]


def test_failed_housekeeping_after_a_shard_commit_does_not_fail_the_append() -> None:
    _, faults, consensus, blob = backend()
    store = ShardStore(blob, consensus, truncate_every=1)
    schema = pa.schema([pa.field("c0", pa.int64(), nullable=False)])
    store.create_shard("s", schema)
    faults.scripted[TRUNCATE] = ["before", "before"]
    assert store.compare_and_append("s", [((1,), 0, 1)], 0, 1) == Antichain([1])
