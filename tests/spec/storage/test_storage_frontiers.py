"""Read policies, write frontiers, read capabilities and read holds (reference sections 2.3-2.5)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import (
    HoldRegression,
    IdentifierInvalid,
    IdentifierMissing,
    NegativeReadCapability,
    ReadCapabilityBeforeSince,
)
from tidegate.spec.frontier import Antichain, ChangeBatch
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    StepBack,
    ValidFrom,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    DowngradeShardSince,
    ExportDescription,
    Ingestion,
    MaterializedView,
    SendStorageCommand,
    SinceChanged,
    StorageAllowCompaction,
    StorageController,
    Table,
    UpperChanged,
)
from tidegate.spec.testing import controller_fingerprint

u1, u2, u3, u4 = (GlobalId.user(i) for i in range(1, 5))
TABLE = CollectionDescription(Table())


def A(*ts: int) -> Antichain:
    return Antichain(ts)


def mv(*inputs: GlobalId) -> CollectionDescription:
    return CollectionDescription(MaterializedView(inputs))


def chain(ctl: StorageController) -> None:
    """u1 <- u2 <- u3: u3 holds u2, which holds u1."""
    ctl.create_collections([(u1, TABLE), (u2, mv(u1)), (u3, mv(u2))])


# -- read policies -----------------------------------------------------------------------


def test_lag_policy_follows_the_upper(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.update_write_frontiers([(u1, A(10))])
    assert ctl.collection(u1).since == A(0)  # NoPolicy keeps the initial since
    ctl.drain()
    ctl.set_read_policy([(u1, LagWriteFrontier(3, 1))])
    effects = ctl.drain()
    assert effects == [DowngradeShardSince(u1, A(7)), SinceChanged(u1, A(7))]
    ctl.update_write_frontiers([(u1, A(12))])
    effects = ctl.drain()
    assert effects == [
        UpperChanged(u1, A(12)),
        DowngradeShardSince(u1, A(9)),
        SinceChanged(u1, A(9)),
    ]
    assert ctl.collection(u1).implied_capability == A(9)


def test_a_policy_behind_the_implied_capability_does_not_recover(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.update_write_frontiers([(u1, A(10))])
    ctl.set_read_policy([(u1, ValidFrom(A(8)))])
    ctl.drain()
    ctl.set_read_policy([(u1, LagWriteFrontier(5, 1))])
    assert ctl.drain() == []
    v = ctl.collection(u1)
    assert (v.since, v.read_policy) == (A(8), LagWriteFrontier(5, 1))
    ctl.update_write_frontiers([(u1, A(20))])  # the stored policy applies from now on
    assert ctl.collection(u1).since == A(15)


def test_multiple_takes_the_least_restrictive(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.update_write_frontiers([(u1, A(10))])
    ctl.set_read_policy([(u1, Multiple([ValidFrom(A(4)), StepBack()]))])
    assert ctl.collection(u1).since == A(4)


def test_last_policy_for_an_id_wins(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.update_write_frontiers([(u1, A(10))])
    ctl.set_read_policy([(u1, ValidFrom(A(2))), (u1, ValidFrom(A(6)))])
    assert ctl.collection(u1).since == A(6)
    assert ctl.collection(u1).read_policy == ValidFrom(A(6))


def test_set_read_policy_rejects_the_whole_batch(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.create_collections([(u1, TABLE)])
    token = ctl.prepare_export(u4, u1)
    ctl.create_exports([(token, ExportDescription(u1, "i"))])
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierMissing):
        ctl.set_read_policy([(u1, ValidFrom(A(3))), (u2, ValidFrom(A(3)))])
    with pytest.raises(IdentifierInvalid):
        ctl.set_read_policy([(u1, ValidFrom(A(3))), (u4, ValidFrom(A(3)))])
    assert controller_fingerprint(ctl) == before


# -- write frontiers ------------------------------------------------------------------------


def test_only_strictly_advancing_uppers_are_taken(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.drain()
    ctl.update_write_frontiers([(u1, A(5))])
    assert ctl.drain() == [UpperChanged(u1, A(5))]
    ctl.update_write_frontiers([(u1, A(5)), (u1, A(3))])
    assert ctl.drain() == []
    assert ctl.collection(u1).upper == A(5)
    ctl.update_write_frontiers([(u1, Antichain.empty())])
    assert ctl.drain() == [UpperChanged(u1, Antichain.empty())]


def test_unknown_ids_are_skipped(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.drain()
    ctl.update_write_frontiers([(u2, A(5)), (u1, A(2))])
    assert ctl.drain() == [UpperChanged(u1, A(2))]


def test_closing_a_collection_never_frees_its_since(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.set_read_policy([(u1, LagWriteFrontier(1, 1))])
    ctl.update_write_frontiers([(u1, A(5))])
    ctl.update_write_frontiers([(u1, Antichain.empty())])
    assert ctl.collection(u1).since == A(4)


def test_ingestion_compaction_goes_to_its_instance(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.connect_replica("i", "r")
    ctl.create_collections([(u1, CollectionDescription(Ingestion("i")))])
    ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])
    ctl.drain()
    ctl.update_write_frontiers([(u1, A(4))])
    effects = ctl.drain()
    assert SendStorageCommand("i", "r", StorageAllowCompaction(u1, A(4))) in effects


# -- read capabilities -----------------------------------------------------------------------


def test_dependents_hold_back_their_dependencies(ctl: StorageController) -> None:
    chain(ctl)
    ctl.update_write_frontiers([(u1, A(10)), (u2, A(10)), (u3, A(10))])
    ctl.set_read_policy([(u1, ValidFrom(A(9))), (u2, ValidFrom(A(6)))])
    # u3 still holds u2 at 0, and u2's since (0) holds u1.
    assert [ctl.collection(i).since for i in (u1, u2, u3)] == [A(0), A(0), A(0)]
    ctl.drain()
    ctl.set_read_policy([(u3, ValidFrom(A(8)))])
    effects = ctl.drain()
    assert [ctl.collection(i).since for i in (u1, u2, u3)] == [A(6), A(6), A(8)]
    assert [e for e in effects if isinstance(e, SinceChanged)] == [
        SinceChanged(u1, A(6)),
        SinceChanged(u2, A(6)),
        SinceChanged(u3, A(8)),
    ]


def test_update_read_capabilities_adds_and_releases_holds(ctl: StorageController) -> None:
    chain(ctl)
    ctl.update_write_frontiers([(u3, A(10))])
    ctl.update_read_capabilities({u3: [(2, 1)]})
    ctl.set_read_policy([(u3, ValidFrom(A(5)))])
    assert ctl.collection(u3).since == A(2)
    ctl.drain()
    ctl.update_read_capabilities({u3: ChangeBatch([(2, -1)])})
    effects = ctl.drain()
    assert SinceChanged(u3, A(5)) in effects
    assert ctl.collection(u2).read_capabilities == ((0, 1), (5, 1))


def test_negative_counts_are_rejected_and_undone(ctl: StorageController) -> None:
    chain(ctl)
    before = controller_fingerprint(ctl)
    # u3's valid change is applied first (largest id), then u1's fails: all undone.
    with pytest.raises(NegativeReadCapability) as err:
        ctl.update_read_capabilities({u3: [(0, 1), (4, 1)], u1: [(7, -1)]})
    assert (err.value.id, err.value.time, err.value.count) == (u1, 7, -1)
    assert controller_fingerprint(ctl) == before


def test_a_hold_behind_the_since_is_rejected(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.set_read_policy([(u1, ValidFrom(A(5)))])
    with pytest.raises(ReadCapabilityBeforeSince) as err:
        ctl.update_read_capabilities({u1: [(3, 1)]})
    assert (err.value.id, err.value.time, err.value.since) == (u1, 3, A(5))


def test_unknown_ids_release_silently_but_cannot_be_held(ctl: StorageController) -> None:
    ctl.drain()
    ctl.update_read_capabilities({u1: [(3, -1)]})
    assert ctl.drain() == []
    with pytest.raises(IdentifierMissing):
        ctl.update_read_capabilities({u1: [(3, 1)]})


# -- read holds (2024 API) -------------------------------------------------------------------


def test_acquire_read_holds_at_the_since(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE), (u2, TABLE)])
    ctl.set_read_policy([(u1, ValidFrom(A(3)))])
    h1, h2 = ctl.acquire_read_holds([u1, u2])
    assert (h1.id, h1.frontier, h2.frontier) == (u1, A(3), A(0))
    ctl.set_read_policy([(u1, ValidFrom(A(9)))])
    assert ctl.collection(u1).since == A(3)
    ctl.drain()
    h1.downgrade(A(5))
    assert ctl.drain() == [DowngradeShardSince(u1, A(5)), SinceChanged(u1, A(5))]
    with pytest.raises(HoldRegression):
        h1.downgrade(A(4))
    h1.release()
    assert h1.is_released() and ctl.collection(u1).since == A(9)
    ctl.drain()
    h1.release()
    assert ctl.drain() == []


def test_acquire_read_holds_is_all_or_nothing(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierMissing):
        ctl.acquire_read_holds([u1, u2])
    assert controller_fingerprint(ctl) == before


def test_storage_port_adapter(ctl: StorageController) -> None:
    ctl.create_collections([(u1, TABLE)])
    ctl.update_write_frontiers([(u1, A(6))])
    ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])
    assert ctl.storage_frontiers(u1) == (A(6), A(6))
    ctl.update_write_frontiers([(u1, A(9))])
    ctl.drain()
    ctl.update_storage_read_holds({u1: ChangeBatch([(9, 1)])})
    ctl.update_write_frontiers([(u1, A(12))])
    assert ctl.drain() == [UpperChanged(u1, A(12))]  # the hold at 9 keeps the since
    ctl.update_storage_read_holds({u1: ChangeBatch([(9, -1)])})
    assert ctl.drain() == [DowngradeShardSince(u1, A(12)), SinceChanged(u1, A(12))]
    assert ctl.drain() == []


# -- the worklist's order does not matter (reference section 5) -------------------------------


@given(
    seed=st.integers(0, 2**32),
    mirrored=st.booleans(),
    uppers=st.lists(st.integers(0, 20), min_size=4, max_size=4),
    holds=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=4),
)
def test_propagation_reaches_the_same_fixed_point_in_any_order(
    seed: int, mirrored: bool, uppers: list[int], holds: list[tuple[int, int]]
) -> None:
    """Flipping the worklist's order and shuffling the calls' yields the same sinces and effects."""
    ids = [u1, u2, u3, u4]
    a, b, c, d = reversed(ids) if mirrored else ids  # a diamond: d reads b and c, which read a

    def run(order: list[GlobalId], largest_first: bool) -> tuple[object, ...]:
        ctl = StorageController()
        ctl._largest_first = largest_first
        ctl.create_collections([(a, TABLE), (b, mv(a)), (c, mv(a)), (d, mv(b, c))])
        for id in order:
            ctl.set_read_policy([(id, LagWriteFrontier(2, 1))])
        held = [ctl.acquire_read_holds([ids[i]])[0] for i, _ in holds]
        ctl.drain()
        ctl.update_write_frontiers([(id, A(uppers[ids.index(id)])) for id in order])
        effects = ctl.drain()
        for h, (_, t) in zip(held, holds, strict=True):
            h.downgrade(A(max(t, h.frontier.as_option() or 0)))
            effects += ctl.drain()
        return tuple(ctl.collections()), frozenset(map(repr, effects))

    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    assert run(ids, True) == run(shuffled, False)
