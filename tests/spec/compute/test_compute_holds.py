"""Example tests: client read holds, warmup and paused-cluster holds, dropping an instance."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tidegate.spec.compute import ComputeController, InMemoryStorage
from tidegate.spec.errors import (
    CollectionExists,
    CollectionMissing,
    HoldRegression,
    ReadHoldMissing,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowCompaction
from tidegate.spec.protocol.responses import Frontiers
from tidegate.spec.testing.controller import commands_to, index_dataflow

A = Antichain
S1 = GlobalId.user(1)
I1, I2 = GlobalId.user(10), GlobalId.user(11)


@pytest.fixture
def storage() -> InMemoryStorage:
    st = InMemoryStorage()
    st.add_collection(S1, since=0, upper=10)
    return st


@pytest.fixture
def ctl(storage: InMemoryStorage) -> ComputeController:
    c = ComputeController(storage, check_protocol=True)
    c.initialization_complete()
    c.create_instance("c1")
    c.add_replica("c1", "r1")
    c.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    return c


def since(ctl: ComputeController, id: GlobalId = I1) -> Antichain:
    return ctl.collection_frontiers("c1", id).read_frontier


def test_read_hold_pins_since_until_downgraded(ctl: ComputeController) -> None:
    hold = ctl.acquire_read_hold("c1", I1)
    assert ctl.read_hold_frontier(hold) == A([2])
    ctl.handle_response("c1", "r1", 1, Frontiers(I1, A([9]), A([9]), A([9])))
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([8])))])
    ctl.maintain()
    assert since(ctl) == A([2])
    ctl.drain()
    ctl.downgrade_read_hold(hold, A([5]))
    assert commands_to(ctl.drain(), "r1") == [AllowCompaction(I1, A([5]))]
    with pytest.raises(HoldRegression):
        ctl.downgrade_read_hold(hold, A([4]))
    ctl.drain()
    ctl.release_read_hold(hold)
    assert commands_to(ctl.drain(), "r1") == [AllowCompaction(I1, A([8]))]
    with pytest.raises(ReadHoldMissing):
        ctl.release_read_hold(hold)
    with pytest.raises(CollectionMissing):
        ctl.acquire_read_hold("c1", GlobalId.user(99))


def test_read_hold_is_taken_at_the_current_since_not_the_policy(ctl: ComputeController) -> None:
    peek_hold = ctl.acquire_read_hold("c1", I1)
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([6])))])
    ctl.maintain()
    # Something else keeps 2 readable, so a new hold (and a dependent dataflow) may start there.
    second = ctl.acquire_read_hold("c1", I1)
    assert ctl.read_hold_frontier(second) == A([2])
    ctl.create_dataflow("c1", index_dataflow(I2, indexes=[I1], as_of=2))
    ctl.release_read_hold(peek_hold)
    ctl.release_read_hold(second)
    assert since(ctl) == A([2])  # I2 holds it at its own since


def test_warmup_hold_follows_the_inputs(ctl: ComputeController, storage: InMemoryStorage) -> None:
    ctl.set_read_policy("c1", [(I1, LagWriteFrontier(0, 1))])
    ctl.handle_response("c1", "r1", 1, Frontiers(I1, A([9]), A([9]), A([9])))
    assert since(ctl) == A([2])  # warmup still at the as_of
    ctl.maintain()
    assert since(ctl) == A([9])  # warmup at S1's upper - 1 = 9; implied at 9
    snap = ctl.instance("c1").collection(I1)
    assert snap.warmup == A([9]) and snap.implied == A([9])


def test_paused_cluster_lets_policies_follow_storage(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.set_read_policy("c1", [(I1, LagWriteFrontier(1, 1))])
    ctl.drop_replica("c1", "r1")
    storage.advance_upper(S1, A([30]))
    ctl.maintain()
    assert ctl.instance("c1").collection(I1).implied == A([29])
    assert since(ctl) == A([29])


def test_drop_instance_releases_everything(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.peek("c1", I1, 3)
    ctl.acquire_read_hold("c1", I1)
    assert storage.hold_count(S1) > 1
    ctl.drop_instance("c1")
    assert storage.hold_count(S1) == 1
    assert ctl.instance_ids() == []


def test_a_dataflow_without_exports_takes_no_hold_and_installs_nothing(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    """Issue 16: such a dataflow took storage holds nothing ever released."""
    before = (storage.hold_count(S1), ctl.instance("c1").collection_ids())
    ctl.drain()
    bare = replace(index_dataflow(GlobalId.user(90), sources=[S1], as_of=2), index_exports=())
    ctl.create_dataflow("c1", bare)
    assert ctl.drain() == []
    assert (storage.hold_count(S1), ctl.instance("c1").collection_ids()) == before


def test_duplicate_log_ids_rejected(storage: InMemoryStorage) -> None:
    ctl = ComputeController(storage)
    with pytest.raises(CollectionExists):
        ctl.create_instance("c", [("a", GlobalId.system(1)), ("b", GlobalId.system(1))])
    assert ctl.instance_ids() == []
