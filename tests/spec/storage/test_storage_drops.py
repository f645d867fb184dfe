"""Dropping collections: holds cascade, state and shards go when the since reaches [] (section 2.11)."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import IdentifierMissing
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    CollectionDropped,
    DowngradeShardSince,
    DropShard,
    ExportDescription,
    Ingestion,
    MaterializedView,
    SendStorageCommand,
    SinceChanged,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageController,
    Table,
)
from tidegate.spec.testing import controller_fingerprint

u1, u2, u3, u4 = (GlobalId.user(i) for i in range(1, 5))
TABLE = CollectionDescription(Table())
EMPTY = Antichain.empty()


def A(*ts: int) -> Antichain:
    return Antichain(ts)


def test_drop_of_an_unheld_collection_removes_it(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.drain()
    ctl.drop_sources([u1])
    assert ctl.drain() == [
        DowngradeShardSince(u1, EMPTY),
        SinceChanged(u1, EMPTY),
        DropShard(u1),
        CollectionDropped(u1),
    ]
    assert ctl.collections() == [] and ctl.durable_shards() == []


def test_drop_sources_validates_every_id_first(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierMissing) as err:
        ctl.drop_sources([u1, u2])
    assert err.value.id == u2
    assert controller_fingerprint(ctl) == before
    ctl.drain()
    ctl.drop_sources_unvalidated([u2])
    assert ctl.drain() == []
    assert ctl.collection(u1).is_dropped is False


def test_dropping_twice_is_harmless(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE), (u2, CollectionDescription(MaterializedView((u1,))))])
    ctl.drop_sources([u1])
    ctl.drain()
    ctl.drop_sources([u1])
    assert ctl.drain() == []


def test_a_dropped_dependency_lives_as_long_as_its_dependents(ctl: StorageController) -> None:
    ctl.create_collections(
        [
            (u1, TABLE),
            (u2, CollectionDescription(MaterializedView((u1,)))),
            (u3, CollectionDescription(MaterializedView((u2,)))),
        ]
    )
    ctl.update_write_frontiers([(u1, A(10)), (u2, A(10)), (u3, A(10))])
    ctl.set_read_policy([(u3, LagWriteFrontier(0, 1))])
    ctl.drain()
    ctl.drop_sources([u1, u2])
    assert [e for e in ctl.drain() if isinstance(e, SinceChanged)] == [
        SinceChanged(u1, A(10)),
        SinceChanged(u2, A(10)),
    ]
    # Both are dropped but u3 holds u2, which holds u1: their state stays, readable at 10.
    assert [v.id for v in ctl.collections()] == [u1, u2, u3]
    assert ctl.collection(u1).is_dropped and ctl.collection(u1).since == A(10)
    ctl.update_write_frontiers([(u3, A(15))])
    assert ctl.collection(u1).since == A(15)
    ctl.drain()
    ctl.drop_sources([u3])
    effects = ctl.drain()
    assert [e for e in effects if isinstance(e, CollectionDropped)] == [
        CollectionDropped(u1),
        CollectionDropped(u2),
        CollectionDropped(u3),
    ]
    assert ctl.collections() == []


def test_read_holds_and_exports_keep_a_dropped_collection(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.create_collections([(u1, TABLE)])
    (hold,) = ctl.acquire_read_holds([u1])
    ctl.create_exports([(ctl.prepare_export(u4, u1), ExportDescription(u1, "i"))])
    ctl.drop_sources([u1])
    ctl.drain()
    hold.release()
    assert ctl.drain() == []  # the export still holds it
    assert ctl.collection(u1).is_dropped
    ctl.drain()
    ctl.drop_sinks([u4])
    effects = ctl.drain()
    assert CollectionDropped(u1) in effects and CollectionDropped(u4) in effects


def test_dropping_an_ingestion_tells_its_instance_and_shrinks_history(
    ctl: StorageController,
) -> None:
    ctl.create_instance("i")
    ctl.connect_replica("i", "r")
    ctl.create_collections(
        [(u1, TABLE), (u2, CollectionDescription(Ingestion("i", remap_collection=u1)))]
    )
    ctl.set_read_policy([(u2, LagWriteFrontier(0, 1))])
    ctl.update_write_frontiers([(u2, A(5))])
    # The ingestion, its last compaction and AllowWrites (the controller is read-write).
    assert len(ctl.history("i")) == 3
    ctl.drain()
    ctl.drop_sources([u2])
    effects = ctl.drain()
    assert SendStorageCommand("i", "r", StorageAllowCompaction(u2, EMPTY)) in effects
    assert SinceChanged(u1, A(0)) not in effects  # the remap collection's own policy still holds it
    assert ctl.collection(u1).read_capabilities == ((0, 1),)  # dependency and remap holds gone
    assert ctl.history("i") == [StorageAllowWrites()]


def test_set_policy_on_a_dropped_collection_keeps_it_dropped(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    (hold,) = ctl.acquire_read_holds([u1])
    ctl.drop_sources([u1])
    ctl.drain()
    ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])
    assert ctl.drain() == []
    assert ctl.collection(u1).implied_capability == EMPTY
    hold.release()
    with pytest.raises(IdentifierMissing):
        ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])


def test_reconcile_drops_unclaimed_shards() -> None:
    ctl = StorageController(durable_shards=[u1, u2, u3])
    ctl.create_collections([(u1, TABLE)])
    ctl.drain()
    ctl.reconcile_state(claimed=[u3])
    assert ctl.drain() == [DropShard(u2)]
    assert ctl.durable_shards() == [u1, u3]
    ctl.reconcile_state(claimed=[u3])
    assert ctl.drain() == []


def test_a_read_only_controller_reconciles_once_read_write() -> None:
    """Read-only, it drops nothing (the writer may own the shards); promoted, the writer fenced,
    it drops the shards no live collection owns (the simulator's upgrade run, small seed 4: the
    deposed writer died in the catalog write of a view's drop, and the view's shard outlived
    every controller)."""
    ctl = StorageController(durable_shards=[u1, u2, u3], read_only=True)
    ctl.create_collections([(u1, TABLE)])
    ctl.drain()
    ctl.reconcile_state(claimed=[u3])
    assert ctl.drain() == [] and ctl.durable_shards() == [u1, u2, u3]
    ctl.read_write()
    assert DropShard(u2) in ctl.drain()
    assert ctl.durable_shards() == [u1, u3]
