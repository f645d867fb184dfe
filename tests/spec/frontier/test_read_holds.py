"""ReadHolds: counting, since = meet of holds, forward only, release, clone/merge, drain_changes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from tidegate.spec.errors import (
    DuplicateHoldCollection,
    HoldBeforeSince,
    HoldMismatch,
    HoldRegression,
    InvalidFrontier,
    UnknownHoldCollection,
)
from tidegate.spec.frontier import Antichain, Product, ReadHold, ReadHolds
from tidegate.spec.ids import GlobalId

U1, U2 = GlobalId.user(1), GlobalId.user(2)


def fresh() -> tuple[ReadHolds[GlobalId], ReadHold[GlobalId]]:
    holds: ReadHolds[GlobalId] = ReadHolds()
    return holds, holds.add_collection(U1, Antichain([2]))


def test_add_collection_returns_the_hold_at_the_initial_since() -> None:
    holds, implied = fresh()
    assert implied.id == U1 and implied.frontier == Antichain([2])
    assert holds.since(U1) == Antichain([2])
    assert U1 in holds and U2 not in holds and list(holds) == [U1] and len(holds) == 1
    assert holds.drain_changes() == {}


def test_holds_are_counted() -> None:
    holds, implied = fresh()
    a = holds.acquire(U1)
    b = holds.acquire(U1, Antichain([2]))
    assert holds.count_for(U1, 2) == 3
    implied.downgrade(Antichain([9]))
    a.release()
    assert holds.since(U1) == Antichain([2])  # b still holds it
    b.release()
    assert holds.since(U1) == Antichain([9])
    assert holds.holds(U1) == [(9, 1)]


def test_since_is_the_meet_of_holds() -> None:
    holds: ReadHolds[str] = ReadHolds()
    root = holds.add_collection("p", Antichain([Product(0, 0)]))
    x = holds.acquire("p", Antichain([Product(0, 3)]))
    y = holds.acquire("p", Antichain([Product(3, 0)]))
    root.release()
    assert holds.since("p") == Antichain([Product(0, 3), Product(3, 0)])
    x.downgrade(Antichain([Product(4, 4)]))
    assert holds.since("p") == Antichain([Product(3, 0)])
    assert y.frontier == Antichain([Product(3, 0)])


def test_acquire_defaults_to_the_current_since() -> None:
    holds, implied = fresh()
    implied.downgrade(Antichain([4]))
    assert holds.acquire(U1).frontier == Antichain([4])


def test_holds_only_move_forward() -> None:
    holds, implied = fresh()
    implied.downgrade(Antichain([5]))
    implied.downgrade(Antichain([5]))  # staying put is fine
    with pytest.raises(HoldRegression):
        implied.downgrade(Antichain([4]))
    implied.release()
    with pytest.raises(HoldRegression):
        implied.downgrade(Antichain([6]))
    implied.release()  # releasing twice is a no-op
    assert implied.is_released() and holds.since(U1) == Antichain()


def test_incomparable_downgrade_is_a_regression() -> None:
    holds: ReadHolds[str] = ReadHolds()
    h = holds.add_collection("p", Antichain([Product(0, 3)]))
    with pytest.raises(HoldRegression):
        h.downgrade(Antichain([Product(3, 0)]))
    assert h.frontier == Antichain([Product(0, 3)])


def test_new_holds_cannot_precede_the_since() -> None:
    holds, implied = fresh()
    implied.downgrade(Antichain([5]))
    with pytest.raises(HoldBeforeSince):
        holds.acquire(U1, Antichain([3]))
    # An empty since admits only empty holds.
    implied.release()
    assert holds.acquire(U1).frontier == Antichain()
    with pytest.raises(HoldBeforeSince):
        holds.acquire(U1, Antichain([7]))
    assert holds.holds(U1) == []


def test_clone_is_an_independent_hold() -> None:
    holds, implied = fresh()
    twin = implied.clone()
    assert twin is not implied and twin.frontier == implied.frontier
    assert holds.count_for(U1, 2) == 2
    implied.release()
    assert holds.since(U1) == Antichain([2])
    twin.downgrade(Antichain([3]))
    assert holds.since(U1) == Antichain([3])
    assert implied.clone().frontier == Antichain()  # cloning a released hold holds nothing
    assert holds.holds(U1) == [(3, 1)]


def test_merge_keeps_the_meet_and_releases_the_other() -> None:
    holds, implied = fresh()
    late = holds.acquire(U1, Antichain([7]))
    implied.downgrade(Antichain([4]))
    late.merge(implied)
    assert late.frontier == Antichain([4]) and implied.is_released()
    assert holds.holds(U1) == [(4, 1)]
    same = late.clone()
    late.merge(same)
    assert holds.holds(U1) == [(4, 1)] and same.is_released()


def test_merge_mismatches_are_rejected() -> None:
    holds, implied = fresh()
    other = holds.add_collection(U2, Antichain([2]))
    stranger = ReadHolds[GlobalId]().add_collection(U1, Antichain([2]))
    for bad in (implied, other, stranger):
        with pytest.raises(HoldMismatch):
            implied.merge(bad)
    assert holds.holds(U1) == [(2, 1)] and holds.holds(U2) == [(2, 1)]


def test_drain_changes_reports_each_changed_since_once() -> None:
    holds, implied = fresh()
    other = holds.add_collection(U2, Antichain([0]))
    extra = holds.acquire(U1)
    implied.downgrade(Antichain([3]))
    assert holds.drain_changes() == {}  # extra still holds 2
    extra.downgrade(Antichain([4]))
    other.downgrade(Antichain([1]))
    other.downgrade(Antichain([2]))
    assert holds.drain_changes() == {U1: Antichain([3]), U2: Antichain([2])}
    assert holds.drain_changes() == {}
    implied.release()
    extra.release()
    assert holds.drain_changes() == {U1: Antichain()}


def test_remove_reports_release_and_makes_old_holds_inert() -> None:
    holds, implied = fresh()
    holds.remove(U1)
    assert holds.drain_changes() == {U1: Antichain()}
    assert U1 not in holds
    with pytest.raises(UnknownHoldCollection):
        holds.since(U1)
    with pytest.raises(UnknownHoldCollection):
        implied.downgrade(Antichain([3]))
    with pytest.raises(UnknownHoldCollection):
        implied.clone()
    # A new registration of the same id is not affected by the old holds.
    fresh_hold = holds.add_collection(U1, Antichain([2]))
    implied.release()
    assert holds.holds(U1) == [(2, 1)] and implied.is_released()
    with pytest.raises(HoldMismatch):
        fresh_hold.merge(implied)


def test_unknown_and_duplicate_collections() -> None:
    holds, _ = fresh()
    with pytest.raises(DuplicateHoldCollection):
        holds.add_collection(U1, Antichain([0]))
    assert holds.holds(U1) == [(2, 1)]
    for call in (
        lambda: holds.acquire(U2),
        lambda: holds.remove(U2),
        lambda: holds.count_for(U2, 0),
    ):
        with pytest.raises(UnknownHoldCollection):
            call()


def test_acquire_all_is_all_or_nothing() -> None:
    holds, _ = fresh()
    holds.add_collection(U2, Antichain([5]))
    with pytest.raises(UnknownHoldCollection):
        holds.acquire_all([U1, GlobalId.user(3)])
    assert holds.holds(U1) == [(2, 1)]
    got = holds.acquire_all([U1, U2, U1])
    assert {i: h.frontier for i, h in got.items()} == {U1: Antichain([2]), U2: Antichain([5])}
    assert holds.count_for(U1, 2) == 2


def test_non_antichain_frontiers_are_rejected() -> None:
    holds, implied = fresh()
    with pytest.raises(InvalidFrontier):
        holds.acquire(U1, [3])  # type: ignore[arg-type]
    with pytest.raises(InvalidFrontier):
        implied.downgrade(3)  # type: ignore[arg-type]
    assert holds.holds(U1) == [(2, 1)]


def test_hold_repr() -> None:
    _, implied = fresh()
    assert repr(implied) == f"ReadHold({U1!r}, Antichain([2]))"


# -- model-based -----------------------------------------------------------------


TIMES = st.builds(Product, st.integers(0, 4), st.integers(0, 4))
IDS = ("a", "b")


class ReadHoldsMachine(RuleBasedStateMachine):
    """Random hold operations, checked against a list of live (id, frontier) pairs."""

    holds_bundle = Bundle("holds")

    def __init__(self) -> None:
        super().__init__()
        self.holds: ReadHolds[str] = ReadHolds()
        self.model: dict[int, tuple[str, Antichain]] = {}  # id(hold) -> (collection, frontier)
        self.objects: dict[int, ReadHold[str]] = {}
        self.reported: dict[str, Antichain] = {}

    def model_since(self, cid: str) -> Antichain:
        return Antichain.meet_all(f for c, f in self.model.values() if c == cid)

    def track(self, hold: ReadHold[str]) -> ReadHold[str]:
        self.model[id(hold)] = (hold.id, hold.frontier)
        self.objects[id(hold)] = hold
        return hold

    @precondition(lambda self: len(self.holds) < len(IDS))
    @rule(target=holds_bundle, data=st.data())
    def add(self, data: Any) -> ReadHold[str]:
        cid = data.draw(st.sampled_from([i for i in IDS if i not in self.holds]))
        since = Antichain(data.draw(st.lists(TIMES, min_size=1, max_size=2)))
        self.reported[cid] = since
        return self.track(self.holds.add_collection(cid, since))

    @rule(target=holds_bundle, hold=holds_bundle, data=st.data())
    def acquire(self, hold: ReadHold[str], data: Any) -> ReadHold[str]:
        cid = hold.id
        if cid not in self.holds:
            return hold
        f = data.draw(st.one_of(st.none(), st.lists(TIMES, max_size=2).map(Antichain)))
        since = self.holds.since(cid)
        if f is not None and not since <= f:
            with pytest.raises(HoldBeforeSince):
                self.holds.acquire(cid, f)
            return hold
        return self.track(self.holds.acquire(cid, f))

    @rule(hold=holds_bundle, data=st.data())
    def downgrade(self, hold: ReadHold[str], data: Any) -> None:
        new = Antichain(data.draw(st.lists(TIMES, max_size=2)))
        before = hold.frontier
        if not before <= new:
            with pytest.raises(HoldRegression):
                hold.downgrade(new)
            assert hold.frontier == before
            return
        if hold.id not in self.holds or self.objects.get(id(hold)) is not hold:
            return
        hold.downgrade(new)
        self.model[id(hold)] = (hold.id, new)

    @rule(target=holds_bundle, hold=holds_bundle)
    def clone(self, hold: ReadHold[str]) -> ReadHold[str]:
        if hold.id not in self.holds or self.objects.get(id(hold)) is not hold:
            return hold
        return self.track(hold.clone())

    @rule(hold=consumes(holds_bundle), other=holds_bundle)
    def merge(self, hold: ReadHold[str], other: ReadHold[str]) -> None:
        live = self.objects.get(id(hold)) is hold and self.objects.get(id(other)) is other
        if other is hold or other.id != hold.id or not live or hold.id not in self.holds:
            return
        expected = hold.frontier.meet(other.frontier)
        hold.merge(other)
        assert hold.frontier == expected and other.is_released()
        self.model[id(hold)] = (hold.id, expected)
        self.model[id(other)] = (other.id, Antichain())

    @rule(data=st.data())
    def remove(self, data: Any) -> None:
        present = [i for i in IDS if i in self.holds]
        if not present:
            return
        cid = data.draw(st.sampled_from(present))
        self.holds.remove(cid)
        for key in [k for k, (c, _) in self.model.items() if c == cid]:
            del self.model[key]
            del self.objects[key]
        changes = self.holds.drain_changes()
        self.check_changes(changes, removed=cid)

    def check_changes(self, changes: dict[str, Antichain], removed: str | None = None) -> None:
        for cid in IDS:
            if cid == removed:
                if not self.reported[cid].is_empty():
                    assert changes.pop(cid) == Antichain()
                continue
            if cid not in self.holds:
                assert cid not in changes
                continue
            now = self.holds.since(cid)
            if now != self.reported[cid]:
                assert changes.pop(cid) == now
                self.reported[cid] = now
            else:
                assert cid not in changes
        assert not changes

    @invariant()
    def since_is_meet_of_live_holds_and_monotone(self) -> None:
        for cid in IDS:
            if cid in self.holds:
                assert self.holds.since(cid) == self.model_since(cid)
                assert self.reported[cid] <= self.holds.since(cid)

    @invariant()
    def drained_changes_match_since_changes(self) -> None:
        self.check_changes(self.holds.drain_changes())


TestReadHoldsMachine = ReadHoldsMachine.TestCase
