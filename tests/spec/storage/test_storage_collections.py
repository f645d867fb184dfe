"""create_collections, migrate_collections and inspection (reference sections 2.2, 2.6, 2.7 #3-#10)."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    DependencyCycle,
    IdentifierMissing,
    IngestionInstanceMissing,
    SourceIdReused,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import NoPolicy, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    DowngradeShardSince,
    Ingestion,
    MaterializedView,
    Progress,
    RegisterShard,
    RunIngestion,
    SendStorageCommand,
    ShardFrontiers,
    StorageAllowWrites,
    StorageController,
    Table,
)
from tidegate.spec.testing import controller_fingerprint

u1, u2, u3, u4 = (GlobalId.user(i) for i in range(1, 5))
TABLE = CollectionDescription(Table())


def A(*ts: int) -> Antichain:
    return Antichain(ts)


def test_new_collection_starts_at_bottom_with_no_policy(ctl: StorageController) -> None:
    ctl.drain()
    ctl.create_collections([(u1, TABLE)])
    assert ctl.drain() == [RegisterShard(u1)]
    v = ctl.collection(u1)
    assert (v.since, v.upper, v.implied_capability) == (A(0), A(0), A(0))
    assert v.read_policy == NoPolicy(A(0))
    assert v.read_capabilities == ((0, 1),)
    assert not v.is_dropped
    assert ctl.collection_frontiers(u1) == (A(0), A(0))


def test_initial_since_joins_shard_and_description(ctl: StorageController) -> None:
    desc = CollectionDescription(Table(), since=A(7))
    ctl.drain()
    ctl.create_collections([(u1, desc)], shards={u1: ShardFrontiers(A(3), A(9))})
    effects = ctl.drain()
    assert effects == [RegisterShard(u1), DowngradeShardSince(u1, A(7))]
    v = ctl.collection(u1)
    assert (v.since, v.upper) == (A(7), A(9))


def test_dependent_since_is_raised_to_dependency_implied_and_holds_it(
    ctl: StorageController,
) -> None:
    ctl.create_collections([(u1, TABLE)], shards={u1: ShardFrontiers(A(5), A(8))})
    ctl.create_collections([(u2, CollectionDescription(MaterializedView((u1,))))])
    assert ctl.collection(u2).since == A(5)
    assert ctl.collection(u1).read_capabilities == ((5, 2),)
    assert ctl.dependencies(u2) == [u1]
    assert ctl.dependents(u1) == [u2]


def test_dependencies_in_one_call_are_created_first(ctl: StorageController) -> None:
    ctl.create_instance("i")
    descs = [
        (u1, CollectionDescription(Ingestion("i", remap_collection=u2))),
        (u2, CollectionDescription(Progress())),
    ]
    ctl.create_collections(descs, shards={u2: ShardFrontiers(A(4), A(4))})
    assert ctl.collection(u1).since == A(4)
    assert ctl.history("i") == [RunIngestion(u1, descs[0][1], A(0)), StorageAllowWrites()]


def test_ingestion_is_sent_to_connected_replicas(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.connect_replica("i", "r")
    desc = CollectionDescription(Ingestion("i"))
    ctl.drain()
    ctl.create_collections([(u1, desc)], shards={u1: ShardFrontiers(A(0), A(6))})
    effects = ctl.drain()
    assert effects == [
        RegisterShard(u1),
        SendStorageCommand("i", "r", RunIngestion(u1, desc, A(6))),
    ]


def test_same_description_again_is_a_no_op(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    before = controller_fingerprint(ctl)
    ctl.drain()
    ctl.create_collections([(u1, TABLE), (u1, TABLE)])
    assert ctl.drain() == []
    assert controller_fingerprint(ctl) == before


@pytest.mark.parametrize(
    "descs",
    [
        [(u1, TABLE), (u1, CollectionDescription(Progress()))],  # repeated id, other description
        [(u2, CollectionDescription(Progress()))],  # existing id, other description
    ],
)
def test_source_id_reused(
    ctl: StorageController, descs: list[tuple[GlobalId, CollectionDescription]]
) -> None:
    ctl.create_collections([(u2, TABLE)])
    before = controller_fingerprint(ctl)
    with pytest.raises(SourceIdReused) as err:
        ctl.create_collections(descs)
    assert err.value.id in (u1, u2)
    assert controller_fingerprint(ctl) == before


def test_dropped_id_cannot_be_reused(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.drop_sources([u1])
    with pytest.raises(SourceIdReused):
        ctl.create_collections([(u1, TABLE)])


def test_missing_dependency_or_status_collection(ctl: StorageController) -> None:
    with pytest.raises(IdentifierMissing) as err:
        ctl.create_collections([(u1, TABLE), (u2, CollectionDescription(MaterializedView((u3,))))])
    assert err.value.id == u3
    with pytest.raises(IdentifierMissing) as err:
        ctl.create_collections([(u1, CollectionDescription(Table(), status_collection=u4))])
    assert err.value.id == u4
    assert ctl.collections() == []


def test_dependency_on_a_dropped_collection_is_missing(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.acquire_read_holds([u1])  # keeps the dropped collection's state alive
    ctl.drop_sources([u1])
    with pytest.raises(IdentifierMissing):
        ctl.create_collections([(u2, CollectionDescription(MaterializedView((u1,))))])


def test_ingestion_instance_missing(ctl: StorageController) -> None:
    with pytest.raises(IngestionInstanceMissing) as err:
        ctl.create_collections([(u1, CollectionDescription(Ingestion("nowhere")))])
    assert (err.value.id, err.value.instance) == (u1, "nowhere")
    assert ctl.collections() == []


def test_dependency_cycles_are_rejected(ctl: StorageController) -> None:
    cyc = [
        (u1, CollectionDescription(MaterializedView((u2,)))),
        (u2, CollectionDescription(MaterializedView((u3,)))),
        (u3, CollectionDescription(MaterializedView((u1,)))),
    ]
    with pytest.raises(DependencyCycle) as err:
        ctl.create_collections(cyc)
    assert set(err.value.ids) == {u1, u2, u3}
    with pytest.raises(DependencyCycle):
        ctl.create_collections([(u1, CollectionDescription(MaterializedView((u1,))))])
    assert ctl.collections() == []


def test_lookups_of_unknown_ids(ctl: StorageController) -> None:
    for call in (
        ctl.collection,
        ctl.collection_frontiers,
        ctl.export,
        ctl.dependencies,
        ctl.dependents,
    ):
        with pytest.raises(IdentifierMissing):
            call(u1)
    assert ctl.storage_frontiers(u1) is None


def test_collections_lists_dropped_but_held(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE), (u2, TABLE)])
    (hold,) = ctl.acquire_read_holds([u1])
    ctl.drop_sources([u1, u2])
    views = ctl.collections()
    assert [v.id for v in views] == [u1]
    assert views[0].is_dropped and views[0].read_policy == ValidFrom(Antichain.empty())
    assert ctl.collection_frontiers(u1) == (Antichain.empty(), A(0))
    hold.release()
    assert ctl.collections() == []


def test_migrate_collections_only_validates(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    before = controller_fingerprint(ctl)
    ctl.drain()
    ctl.migrate_collections([(u1, TABLE)])
    assert ctl.drain() == []
    assert controller_fingerprint(ctl) == before
    with pytest.raises(IdentifierMissing):
        ctl.migrate_collections([(u2, TABLE)])


def test_views_are_snapshots(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    v = ctl.collection(u1)
    ctl.update_write_frontiers([(u1, A(5))])
    assert v.upper == A(0)
    with pytest.raises(AttributeError):
        v.since = A(3)  # type: ignore[misc]
