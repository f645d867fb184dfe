"""Example tests: instances, replicas, dataflow validation, frontiers, policies, drops (reference/compute.md §9)."""

from __future__ import annotations

import copy

import pytest

from tidegate.spec.compute import (
    ComputeController,
    ConnectReplica,
    DisconnectReplica,
    FrontierUpper,
    InMemoryStorage,
    ReplicaConfig,
    ReplicaLogging,
    ReplicaStatusEvent,
    SendCommand,
    UnmanagedLocation,
)
from tidegate.spec.errors import (
    CollectionExists,
    CollectionMissing,
    EmptyAsOfForSubscribe,
    HydrationCheckBadTarget,
    InstanceExists,
    InstanceMissing,
    InvalidDataflow,
    MissingAsOf,
    ProtocolError,
    ReplicaExists,
    ReplicaMissing,
    SinceViolation,
    TargetedIndexExport,
    WriteOnlyCollection,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    AllowCompaction,
    AllowWrites,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Schedule,
    UpdateConfiguration,
)
from tidegate.spec.protocol.responses import Frontiers
from tidegate.spec.protocol.types import ComputeParameters
from tidegate.spec.testing.controller import (
    commands_to,
    index_dataflow,
    mv_dataflow,
    of_type,
    subscribe_dataflow,
)

S1, S2, MV = GlobalId.user(1), GlobalId.user(2), GlobalId.user(50)
I1, I2, I3 = GlobalId.user(10), GlobalId.user(11), GlobalId.user(12)
A = Antichain


def f(t: int | None) -> Antichain:
    return A() if t is None else A([t])


@pytest.fixture
def storage() -> InMemoryStorage:
    st = InMemoryStorage()
    st.add_collection(S1, since=0, upper=10)
    st.add_collection(S2, since=5, upper=10)
    st.add_collection(MV, since=0, upper=0)
    return st


@pytest.fixture
def ctl(storage: InMemoryStorage) -> ComputeController:
    c = ComputeController(storage, check_protocol=True)
    c.initialization_complete()
    c.create_instance("c1")
    return c


def frontiers(ctl: ComputeController, id: GlobalId) -> tuple[Antichain, Antichain]:
    fr = ctl.collection_frontiers("c1", id)
    return fr.read_frontier, fr.write_frontier


def report(ctl, replica, id, t, epoch=1, *, write=True, input=True, output=True):
    fr = f(t)
    ctl.drain()
    ctl.handle_response(
        "c1",
        replica,
        epoch,
        Frontiers(id, fr if write else None, fr if input else None, fr if output else None),
    )
    return ctl.drain()


# -- instances ---------------------------------------------------------------------------


def test_instance_exists_and_missing(ctl: ComputeController) -> None:
    with pytest.raises(InstanceExists) as e:
        ctl.create_instance("c1")
    assert e.value.instance == "c1"
    with pytest.raises(InstanceMissing) as m:
        ctl.add_replica("nope", "r1")
    assert m.value.instance == "nope"
    for call in (
        lambda: ctl.drop_instance("nope"),
        lambda: ctl.create_dataflow("nope", index_dataflow(I1)),
        lambda: ctl.peek("nope", I1, 0),
        lambda: ctl.drop_collections("nope", [I1]),
        lambda: ctl.set_read_policy("nope", []),
        lambda: ctl.collection_frontiers("nope", I1),
    ):
        with pytest.raises(InstanceMissing):
            call()


def test_new_replica_gets_the_replayed_prefix_and_its_own_logging(ctl: ComputeController) -> None:
    ctl.initialization_complete()
    ctl.create_instance("c2", {"arrangements": GlobalId.system(7)})
    cfg = ReplicaConfig(UnmanagedLocation(("127.0.0.1:2100",)), ReplicaLogging(interval_ms=250))
    ctl.drain()
    ctl.add_replica("c2", "r1", cfg)
    effects = ctl.drain()
    assert effects[0] == ConnectReplica("c2", "r1", cfg, 1)
    assert of_type(effects, ReplicaStatusEvent)[0].status == "connecting"
    cmds = commands_to(effects, "r1")
    assert isinstance(cmds[0], Hello) and isinstance(cmds[1], CreateInstance)
    assert isinstance(cmds[-1], InitializationComplete)
    logging = cmds[1].config.logging
    assert logging.enable_logging and logging.interval_ms == 250
    assert logging.index_logs == (("arrangements", GlobalId.system(7)),)
    # Every connection gets a fresh nonce.
    ctl.add_replica("c2", "r2")
    other = commands_to(ctl.drain(), "r2")[0]
    assert isinstance(other, Hello) and other.nonce != cmds[0].nonce


def test_initialization_complete_sent_once_per_instance(storage: InMemoryStorage) -> None:
    ctl = ComputeController(storage, check_protocol=True)
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.drain()
    ctl.initialization_complete()
    first = commands_to(ctl.drain())
    assert first == [InitializationComplete()]
    ctl.initialization_complete()
    assert commands_to(ctl.drain()) == []


def test_update_configuration_merges_and_reaches_every_replica(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.add_replica("c1", "r2")
    ctl.drain()
    ctl.update_configuration(ComputeParameters(max_result_size=10))
    sent = ctl.drain()
    assert {e.replica for e in of_type(sent, SendCommand)} == {"r1", "r2"}
    ctl.update_configuration(ComputeParameters(dyncfg_updates=(("x", 1),)))
    ctl.drain()
    ctl.add_replica("c1", "r3")
    replay = commands_to(ctl.drain())
    confs = [c for c in replay if isinstance(c, UpdateConfiguration)]
    assert confs == [
        UpdateConfiguration(ComputeParameters(max_result_size=10, dyncfg_updates=(("x", 1),)))
    ]


def test_each_instance_sends_its_own_workload_class_and_no_other(storage: InMemoryStorage) -> None:
    """Issue 16: an instance created without a class inherited the caller's, and a later
    update_configuration leaked one instance's class into the others."""
    ctl = ComputeController(storage)
    ctl.update_configuration(ComputeParameters(workload_class="prod", max_result_size=7))
    ctl.create_instance("a", workload_class="analytics")
    ctl.create_instance("b")
    for instance in ("a", "b"):
        ctl.add_replica(instance, "r1")
    ctl.drain()

    def classes(effects: list[object], instance: str) -> list[str | None]:
        return [
            e.command.params.workload_class
            for e in of_type(effects, SendCommand)
            if e.instance == instance and isinstance(e.command, UpdateConfiguration)
        ]

    ctl.update_configuration(ComputeParameters(workload_class="batch", dyncfg_updates=(("x", 1),)))
    sent = ctl.drain()
    assert classes(sent, "a") == ["analytics"]
    assert classes(sent, "b") == [None]
    # A replica added later gets the instance's own class in the replayed history, and the
    # controller's other parameters.
    ctl.add_replica("b", "r2")
    replay = [c for c in commands_to(ctl.drain(), "r2") if isinstance(c, UpdateConfiguration)]
    assert [c.params.workload_class for c in replay] == [None]
    assert replay[0].params.max_result_size == 7


def test_replica_exists_and_missing(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    with pytest.raises(ReplicaExists) as e:
        ctl.add_replica("c1", "r1")
    assert (e.value.instance, e.value.replica) == ("c1", "r1")
    with pytest.raises(ReplicaMissing):
        ctl.drop_replica("c1", "r9")
    ctl.drain()
    ctl.drop_replica("c1", "r1")
    effects = ctl.drain()
    assert of_type(effects, DisconnectReplica) == [DisconnectReplica("c1", "r1", 1, True)]
    assert of_type(effects, ReplicaStatusEvent)[-1].status == "dropped"
    assert ctl.instance("c1").replica_ids() == []


# -- dataflow validation ---------------------------------------------------------------


def test_create_dataflow_validations(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    with pytest.raises(MissingAsOf):
        ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=None))
    with pytest.raises(EmptyAsOfForSubscribe):
        ctl.create_dataflow("c1", subscribe_dataflow(I1, sources=[S1], as_of=A()))
    with pytest.raises(CollectionMissing) as missing:
        ctl.create_dataflow("c1", index_dataflow(I1, sources=[GlobalId.user(99)]))
    assert missing.value.id == GlobalId.user(99)
    with pytest.raises(CollectionMissing):
        ctl.create_dataflow("c1", index_dataflow(I2, indexes=[I1]))
    with pytest.raises(SinceViolation) as since:
        ctl.create_dataflow("c1", index_dataflow(I1, sources=[S2], as_of=4))
    assert since.value.id == S2
    with pytest.raises(CollectionMissing):
        ctl.create_dataflow("c1", mv_dataflow(GlobalId.user(77), sources=[S1]))
    with pytest.raises(ReplicaMissing):
        ctl.create_dataflow("c1", subscribe_dataflow(I1, sources=[S1]), target_replica="r9")
    with pytest.raises(TargetedIndexExport):
        ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1]), target_replica="r1")
    bad = index_dataflow(I1, sources=[S1])
    bad = type(bad)(
        debug_name="bad",
        source_imports=bad.source_imports,
        index_exports=bad.index_exports,
        as_of=A([0]),
    )
    with pytest.raises(InvalidDataflow):
        ctl.create_dataflow("c1", bad)
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1]))
    with pytest.raises(CollectionExists):
        ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1]))
    assert ctl.instance("c1").collection_ids() == [I1]


def test_failed_validation_changes_nothing(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    inst = ctl.instance("c1")._inst  # white-box: compare the whole state
    before = copy.deepcopy((inst.collections, inst.replicas, storage._holds, len(inst.history)))
    for call in (
        lambda: ctl.create_dataflow(
            "c1", index_dataflow(I2, sources=[S1, S2], indexes=[I1], as_of=3)
        ),
        lambda: ctl.set_read_policy(
            "c1", [(I1, ValidFrom(A([5]))), (GlobalId.user(99), ValidFrom(A([5])))]
        ),
        lambda: ctl.drop_collections("c1", [I1, GlobalId.user(99)]),
        lambda: ctl.peek("c1", I1, 1),
    ):
        with pytest.raises((SinceViolation, CollectionMissing)):
            call()
        after = (inst.collections, inst.replicas, storage._holds, len(inst.history))
        assert repr(after) == repr(before)


def test_exports_start_with_read_and_write_frontier_at_as_of(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=3))
    assert frontiers(ctl, I1) == (A([3]), A([3]))


def test_empty_as_of_sends_nothing(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.drain()
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=A()))
    effects = ctl.drain()
    assert commands_to(effects) == []
    assert frontiers(ctl, I1) == (A(), A())


def test_dataflow_holds_storage_input_at_as_of(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    storage.set_implied(S1, A([8]))  # only the dataflow can keep S1 readable now
    storage.set_implied(S1, A([8]))
    assert storage.since(S1) == A([8])
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=8))
    storage.set_implied(S1, A())
    assert storage.since(S1) == A([8])
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([9])))])
    ctl.handle_response("c1", "r1", 1, Frontiers(I1, A([9])))  # unknown replica: ignored
    ctl.maintain()  # warmup follows the inputs: S1's upper 10 - 1
    assert storage.since(S1) == A([9])


# -- scheduling --------------------------------------------------------------------------


def test_schedule_waits_for_inputs_to_pass_the_as_of(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.add_replica("c1", "r1")
    ctl.drain()
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=10))
    effects = ctl.drain()
    assert Schedule(I1) not in commands_to(effects)
    assert CreateDataflow in [type(c) for c in commands_to(effects)]
    storage.advance_upper(S1, A([11]))
    ctl.storage_frontiers_advanced([S1])
    assert commands_to(ctl.drain()) == [Schedule(I1)]
    ctl.maintain()
    assert commands_to(ctl.drain()) == []  # scheduled once only
    # A dependent index waits for its compute input's write frontier.
    ctl.create_dataflow("c1", index_dataflow(I2, indexes=[I1], as_of=10))
    effects = ctl.drain()
    assert Schedule(I2) not in commands_to(effects)
    effects = report(ctl, "r1", I1, 11)
    assert Schedule(I2) in commands_to(effects)


def test_transient_dataflows_schedule_at_once(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    t = GlobalId.transient(1)
    ctl.drain()
    ctl.create_dataflow("c1", index_dataflow(t, sources=[S1], as_of=10))
    effects = ctl.drain()
    assert Schedule(t) in commands_to(effects)


# -- write frontiers, policies, compaction -------------------------------------------------


def test_global_write_frontier_is_the_max_over_replicas(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.add_replica("c1", "r2")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=0))
    assert of_type(report(ctl, "r1", I1, 5), FrontierUpper) == [FrontierUpper("c1", I1, A([5]))]
    assert of_type(report(ctl, "r2", I1, 3), FrontierUpper) == []
    assert frontiers(ctl, I1)[1] == A([5])
    assert of_type(report(ctl, "r2", I1, 6), FrontierUpper) == [FrontierUpper("c1", I1, A([6]))]
    # A regression is a protocol error: rejected when checking, changing nothing ...
    with pytest.raises(ProtocolError):
        report(ctl, "r2", I1, 2)
    assert frontiers(ctl, I1)[1] == A([6])


def test_regressing_report_is_ignored_without_protocol_checks(storage: InMemoryStorage) -> None:
    ctl = ComputeController(storage)  # ... and tolerated (ignored) otherwise
    ctl.create_instance("c1")
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=0))
    report(ctl, "r1", I1, 6)
    assert report(ctl, "r1", I1, 2) == []
    assert frontiers(ctl, I1)[1] == A([6])
    assert ctl.instance("c1").replica_collection("r1", I1).write_frontier == A([6])


def test_read_policy_moves_since_and_allow_compaction_once(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=0))
    ctl.maintain()  # release warmup past the inputs
    report(ctl, "r1", I1, 20)
    ctl.drain()
    ctl.set_read_policy("c1", [(I1, LagWriteFrontier(5, 1))])
    effects = ctl.drain()
    assert commands_to(effects) == [AllowCompaction(I1, A([9]))]  # warmup: S1 upper 10 - 1
    assert frontiers(ctl, I1)[0] == A([9])
    # Never regresses: a policy behind the current implied hold has no effect.
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([1])))])
    assert commands_to(ctl.drain()) == []
    assert frontiers(ctl, I1)[0] == A([9])


def test_set_read_policy_rejects_unknown_and_write_only(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", mv_dataflow(MV, sources=[S1]))
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1]))
    with pytest.raises(WriteOnlyCollection) as e:
        ctl.set_read_policy("c1", [(I1, ValidFrom(A([1]))), (MV, ValidFrom(A([1])))])
    assert e.value.id == MV
    assert ctl.instance("c1").collection(I1).read_policy == ValidFrom(A([0]))
    with pytest.raises(CollectionMissing):
        ctl.set_read_policy("c1", [(GlobalId.user(99), ValidFrom(A([1])))])


def test_dependent_dataflow_holds_its_input_index(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=0))
    ctl.create_dataflow("c1", index_dataflow(I2, indexes=[I1], as_of=0))
    report(ctl, "r1", I1, 8)
    report(ctl, "r1", I2, 8)
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([6])))])
    ctl.maintain()
    assert frontiers(ctl, I1)[0] == A([0])  # I2 holds I1 at its own since
    ctl.drain()
    ctl.set_read_policy("c1", [(I2, ValidFrom(A([4])))])
    effects = ctl.drain()
    ctl.maintain()
    assert frontiers(ctl, I2)[0] == A([4])
    assert frontiers(ctl, I1)[0] == A([4])
    assert AllowCompaction(I1, A([4])) in commands_to(effects)


def test_write_only_sink_implied_hold_steps_back(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    storage.advance_upper(MV, A([7]))
    ctl.drain()
    ctl.create_dataflow("c1", mv_dataflow(MV, sources=[S1], as_of=0))
    effects = ctl.drain()
    assert FrontierUpper("c1", MV, A([7])) in effects
    snap = ctl.instance("c1").collection(MV)
    assert snap.implied == A([6]) and snap.write_frontier == A([7])


def test_allow_writes_once(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", mv_dataflow(MV, sources=[S1]))
    ctl.drain()
    ctl.allow_writes("c1", MV)
    assert commands_to(ctl.drain()) == [AllowWrites(MV)]
    ctl.allow_writes("c1", MV)
    assert commands_to(ctl.drain()) == []
    with pytest.raises(CollectionMissing):
        ctl.allow_writes("c1", GlobalId.user(99))


# -- drops -------------------------------------------------------------------------------


def test_drop_waits_for_every_replica_to_report_empty(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.add_replica("c1", "r1")
    ctl.add_replica("c1", "r2")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    ctl.drain()
    ctl.drop_collections("c1", [I1])
    effects = ctl.drain()
    assert commands_to(effects, "r1") == [AllowCompaction(I1, A())]
    with pytest.raises(CollectionMissing):
        ctl.collection_frontiers("c1", I1)
    assert ctl.instance("c1").collection_ids(include_dropped=True) == [I1]
    report(ctl, "r1", I1, None)
    assert ctl.instance("c1").collection_ids(include_dropped=True) == [I1]
    report(ctl, "r2", I1, None)
    assert ctl.instance("c1").collection_ids(include_dropped=True) == []
    assert storage.hold_count(S1) == 1  # only storage's own hold remains
    with pytest.raises(CollectionMissing):
        ctl.drop_collections("c1", [I1])


def test_drop_with_no_replicas_forgets_at_once(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    ctl.drop_collections("c1", [I1])
    assert ctl.instance("c1").collection_ids(include_dropped=True) == []
    assert storage.hold_count(S1) == 1


def test_drop_of_input_is_held_by_dependent(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    ctl.create_dataflow("c1", index_dataflow(I2, indexes=[I1], as_of=2))
    ctl.drain()
    ctl.drop_collections("c1", [I1])
    effects = ctl.drain()
    assert AllowCompaction(I1, A()) not in commands_to(effects)
    ctl.drop_collections("c1", [I2])
    effects = ctl.drain()
    assert AllowCompaction(I2, A()) in commands_to(effects)
    report(ctl, "r1", I2, None)  # I2 forgotten: releases its hold on I1
    assert ctl.instance("c1").collection(I1).read_frontier == A()


# -- hydration and the read-only view --------------------------------------------------------


def test_collection_hydrated(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=3))
    assert ctl.collection_hydrated("c1", I1)  # no replicas
    ctl.add_replica("c1", "r1")
    assert not ctl.collection_hydrated("c1", I1)
    report(ctl, "r1", I1, 3)
    assert not ctl.collection_hydrated("c1", I1)
    report(ctl, "r1", I1, 4)
    assert ctl.collection_hydrated("c1", I1)
    assert ctl.collections_hydrated_on_replicas("c1")
    with pytest.raises(HydrationCheckBadTarget):
        ctl.collections_hydrated_on_replicas("c1", ["r9"])


def test_view_shows_but_cannot_change(ctl: ComputeController) -> None:
    ctl.add_replica("c1", "r1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=3))
    view = ctl.instance("c1")
    snap = view.collection(I1)
    assert (
        snap.kind == "index"
        and snap.read_frontier == A([3])
        and snap.storage_dependencies == ((S1, A([3])),)
    )
    assert view.replica("r1").epoch == 1 and view.replica("r1").status == "connecting"
    assert view.replica_collection("r1", I1).input_holds == ((S1, A([0])),)
    with pytest.raises(AttributeError):
        snap.read_frontier = A([9])  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.x = 1  # type: ignore[attr-defined]
