"""Storage instances, replicas, configuration and history replay (reference sections 2.7 #1-#8, 2.12)."""

from __future__ import annotations

import uuid

import pytest

from tidegate.spec.errors import (
    InvalidUsage,
    StorageInstanceExists,
    StorageInstanceMissing,
    StorageReplicaMissing,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    DisconnectStorageReplica,
    DroppedId,
    ExportDescription,
    Ingestion,
    RunIngestion,
    RunSink,
    SendStorageCommand,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageController,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageParameters,
    StorageUpdateConfiguration,
    Table,
    UpperChanged,
)

u1, u2, u5 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(5)


def A(*ts: int) -> Antichain:
    return Antichain(ts)


def test_instance_lifecycle_errors(ctl: StorageController) -> None:
    ctl.create_instance("i")
    with pytest.raises(StorageInstanceExists):
        ctl.create_instance("i")
    with pytest.raises(StorageInstanceMissing):
        ctl.drop_instance("j")
    with pytest.raises(StorageInstanceMissing):
        ctl.connect_replica("j", "r")
    with pytest.raises(StorageReplicaMissing):
        ctl.drop_replica("i", "r")
    ctl.drop_instance("i")
    assert ctl.instances() == []


def test_initialization_and_configuration_are_broadcast(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.create_instance("j")
    ctl.connect_replica("i", "r1")
    ctl.connect_replica("j", "r2")
    ctl.drain()
    ctl.initialization_complete()
    effects = ctl.drain()
    assert effects == [
        SendStorageCommand("i", "r1", StorageInitializationComplete()),
        SendStorageCommand("j", "r2", StorageInitializationComplete()),
    ]
    ctl.initialization_complete()
    assert ctl.drain() == []
    ctl.update_configuration(StorageParameters.of(a=1, b="x"))
    ctl.drain()
    ctl.update_configuration(StorageParameters.of(a=2))
    effects = ctl.drain()
    merged = StorageParameters.of(a=2, b="x")
    assert effects[0] == SendStorageCommand("i", "r1", StorageUpdateConfiguration(merged))
    assert ctl.configuration == merged
    with pytest.raises(InvalidUsage):
        ctl.update_configuration({"a": 1})  # type: ignore[arg-type]


def test_a_connecting_replica_gets_the_reduced_history(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.update_configuration(StorageParameters.of(a=1))
    ingestion = CollectionDescription(Ingestion("i"))
    ctl.create_collections([(u1, ingestion), (u2, CollectionDescription(Table()))])
    ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])
    sink = ExportDescription(u1, "i")
    ctl.create_exports([(ctl.prepare_export(u5, u1), sink)])
    ctl.initialization_complete()
    ctl.update_write_frontiers([(u1, A(6)), (u5, A(4))])
    ctl.drain()
    ctl.connect_replica("i", "r")
    effects = ctl.drain()
    assert [e.command for e in effects if isinstance(e, SendStorageCommand)] == [
        StorageHello(uuid.UUID(int=1)),
        StorageUpdateConfiguration(StorageParameters.of(a=1)),
        RunIngestion(u1, ingestion, A(6)),  # resumes from the current upper
        RunSink(u5, sink, A(3), True),  # as_of advanced by its last compaction
        StorageAllowCompaction(u1, A(3)),
        StorageAllowCompaction(u5, A(3)),
        StorageInitializationComplete(),
        StorageAllowWrites(),  # the controller is read-write
    ]
    assert len(effects) == 1 + len(ctl.history("i"))
    # Reconnecting replays the same history again, in a new iteration.
    ctl.connect_replica("i", "r")
    again = ctl.drain()
    assert again[0] == SendStorageCommand("i", "r", StorageHello(uuid.UUID(int=2)))
    assert again[1:] == effects[1:]
    assert ctl.replicas("i") == ["r"]


def test_one_replica_per_instance_a_new_one_severs_the_old(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.create_collections([(u1, CollectionDescription(Ingestion("i")))])
    ctl.connect_replica("i", "r1")
    ctl.drain()
    ctl.connect_replica("i", "r2", "host:2")
    effects = ctl.drain()
    assert effects[0] == DisconnectStorageReplica("i", "r1")
    assert [type(e.command).__name__ for e in effects[1:] if isinstance(e, SendStorageCommand)] == [
        "StorageHello",
        "RunIngestion",
        "StorageAllowWrites",
    ]
    assert all(e.replica == "r2" for e in effects[1:] if isinstance(e, SendStorageCommand))
    assert ctl.replicas("i") == ["r2"]
    # The severed replica's responses are refused; the new one's are taken.
    with pytest.raises(StorageReplicaMissing):
        ctl.handle_response("i", "r1", StorageFrontierUpper(u1, A(3)))
    ctl.handle_response("i", "r2", StorageFrontierUpper(u1, A(3)))
    assert ctl.collection(u1).upper == A(3)
    with pytest.raises(StorageReplicaMissing):
        ctl.drop_replica("i", "r1")


def test_a_read_only_controller_sends_allow_writes_once_it_is_read_write() -> None:
    ctl = StorageController(read_only=True)
    ctl.create_instance("i")
    ctl.create_instance("j")
    ctl.connect_replica("i", "r")
    ctl.initialization_complete()
    sent = [e.command for e in ctl.drain() if isinstance(e, SendStorageCommand)]
    assert StorageAllowWrites() not in sent
    assert StorageAllowWrites() not in ctl.history("i")
    ctl.read_write()
    assert ctl.drain() == [SendStorageCommand("i", "r", StorageAllowWrites())]
    assert ctl.history("i")[-1] == StorageAllowWrites()
    ctl.read_write()
    assert ctl.drain() == []  # once
    ctl.connect_replica("j", "s")
    assert [e.command for e in ctl.drain()][-2:] == [
        StorageInitializationComplete(),
        StorageAllowWrites(),
    ]


def test_responses_advance_only_the_instance_objects(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.connect_replica("i", "r")
    ctl.create_collections(
        [(u1, CollectionDescription(Ingestion("i"))), (u2, CollectionDescription(Table()))]
    )
    ctl.drain()
    ctl.handle_response("i", "r", StorageFrontierUpper(u1, A(3)))
    assert ctl.drain() == [UpperChanged(u1, A(3))]
    ctl.handle_response("i", "r", StorageFrontierUpper(u1, A(2)))
    assert ctl.drain() == []  # replays never regress
    ctl.handle_response("i", "r", StorageFrontierUpper(u2, A(9)))
    assert ctl.drain() == []  # not this instance's
    ctl.handle_response("i", "r", DroppedId(u1))
    assert ctl.drain() == []
    with pytest.raises(StorageReplicaMissing):
        ctl.handle_response("i", "other", StorageFrontierUpper(u1, A(5)))
    ctl.drop_replica("i", "r")
    assert ctl.replicas("i") == []
