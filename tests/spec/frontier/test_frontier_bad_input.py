"""Bad input to the frontier algebra raises a typed error and changes nothing."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    FrontierError,
    HoldBeforeSince,
    HoldRegression,
    InvalidReadPolicy,
    InvalidTimestamp,
    MixedTimestampKinds,
    TidegateError,
)
from tidegate.spec.frontier import (
    Antichain,
    LagWriteFrontier,
    Multiple,
    MutableAntichain,
    NoPolicy,
    Product,
    ReadHolds,
    StepBack,
    ValidFrom,
    less_equal,
)


def test_errors_are_rooted_in_tidegate_error() -> None:
    for cls in (InvalidTimestamp, MixedTimestampKinds, InvalidReadPolicy, HoldRegression):
        assert issubclass(cls, FrontierError) and issubclass(cls, TidegateError)


# -- negative and non-timestamps ---------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: Antichain([-1]),
        lambda: Antichain([3, -1]),
        lambda: Antichain.from_elem(-5),
        lambda: Antichain([Product(0, 0), Product(1, -1)]),
        lambda: Product(-1, 0),
        lambda: Antichain([True]),
        lambda: Antichain([1.5]),
        lambda: Antichain(["3"]),
    ],
    ids=["neg", "neg-among-ints", "from_elem", "neg-in-product", "product", "bool", "float", "str"],
)
def test_invalid_timestamps_are_rejected(build: object) -> None:
    with pytest.raises(InvalidTimestamp):
        build()  # type: ignore[operator]


def test_insert_of_negative_time_leaves_antichain_unchanged() -> None:
    a = Antichain([3])
    with pytest.raises(InvalidTimestamp):
        a.insert(-1)
    assert a == Antichain([3])


def test_mutable_antichain_rejects_negative_time_atomically() -> None:
    m = MutableAntichain([4])
    with pytest.raises(InvalidTimestamp):
        m.update_iter([(2, 1), (-1, 1)])
    assert m.frontier == Antichain([4])
    assert m.updates() == [(4, 1)]


# -- mixing kinds ----------------------------------------------------------------


def test_antichain_mixing_kinds_is_rejected() -> None:
    with pytest.raises(MixedTimestampKinds):
        Antichain([1, Product(0, 0)])
    with pytest.raises(MixedTimestampKinds):
        Antichain([Product(0, 0), Product(Product(0, 0), 1)])


def test_comparing_kinds_is_rejected() -> None:
    with pytest.raises(MixedTimestampKinds):
        less_equal(1, Product(0, 0))
    with pytest.raises(MixedTimestampKinds):
        Antichain([1]).less_equal(Product(0, 0))
    with pytest.raises(MixedTimestampKinds):
        _ = Antichain([1]) <= Antichain([Product(0, 0)])
    with pytest.raises(MixedTimestampKinds):
        Antichain([1]).join(Antichain([Product(0, 0)]))


def test_mutable_antichain_mixing_kinds_is_rejected_atomically() -> None:
    m = MutableAntichain([4])
    with pytest.raises(MixedTimestampKinds):
        m.update_iter([(2, 1), (Product(0, 0), 1)])
    assert m.frontier == Antichain([4]) and m.updates() == [(4, 1)]
    empty = MutableAntichain()
    with pytest.raises(MixedTimestampKinds):
        empty.update_iter([(Product(0, 0), 1), (2, 1)])
    assert empty.updates() == [] and empty.is_empty()


# -- read policies ---------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: LagWriteFrontier(5, 0),
        lambda: LagWriteFrontier(0, 0),
        lambda: LagWriteFrontier(5, -1),
        lambda: LagWriteFrontier(-1, 5),
        lambda: LagWriteFrontier(True, 5),
        lambda: ValidFrom([3]),
        lambda: NoPolicy(3),
        lambda: Multiple([Antichain([3])]),
    ],
    ids=["granularity-0", "lag-0-granularity-0", "neg-granularity", "neg-lag", "bool-lag",
         "validfrom-list", "nopolicy-int", "multiple-non-policy"],
)  # fmt: skip
def test_invalid_read_policies_are_rejected(build: object) -> None:
    with pytest.raises(InvalidReadPolicy):
        build()  # type: ignore[operator]


@pytest.mark.parametrize("policy", [StepBack(), LagWriteFrontier(2, 2)])
def test_int_only_policies_reject_product_uppers(policy: object) -> None:
    with pytest.raises(InvalidReadPolicy):
        policy.frontier(Antichain([Product(1, 1)]))  # type: ignore[attr-defined]


# -- read holds ------------------------------------------------------------------


def test_upward_downgrade_raises_and_changes_nothing() -> None:
    holds: ReadHolds[str] = ReadHolds()
    h = holds.add_collection("c", Antichain([5]))
    with pytest.raises(HoldRegression):
        h.downgrade(Antichain([3]))
    assert h.frontier == Antichain([5])
    assert holds.since("c") == Antichain([5]) and holds.holds("c") == [(5, 1)]
    assert holds.drain_changes() == {}


def test_hold_before_since_raises_and_changes_nothing() -> None:
    holds: ReadHolds[str] = ReadHolds()
    holds.add_collection("c", Antichain([5]))
    with pytest.raises(HoldBeforeSince):
        holds.acquire("c", Antichain([4]))
    assert holds.holds("c") == [(5, 1)]
