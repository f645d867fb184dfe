"""Documented behaviours of read policies and ``apply_policy`` (reference §2.3)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import (
    Antichain,
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    Product,
    ReadPolicy,
    StepBack,
    ValidFrom,
    apply_policy,
)
from tidegate.spec.strategies import TIME_KINDS, TimeKind, antichains, read_policies, times


def test_lag_examples() -> None:
    p = LagWriteFrontier(lag=1000, max_granularity=60)
    assert p.frontier(Antichain([10_000])) == Antichain([9_000])
    assert p.frontier(Antichain([10_030])) == Antichain([9_000])
    assert p.frontier(Antichain([10_061])) == Antichain([9_060])
    assert p.frontier(Antichain([500])) == Antichain([0])
    # The granularity is capped by the lag itself.
    assert LagWriteFrontier(4, 100).frontier(Antichain([11])) == Antichain([4])


def test_lag_zero_returns_the_upper_but_closed_maps_to_bottom() -> None:
    assert LagWriteFrontier(0, 7).frontier(Antichain([13])) == Antichain([13])
    assert LagWriteFrontier(0, 7).frontier(Antichain()) == Antichain([0])


def test_step_back_examples() -> None:
    assert StepBack().frontier(Antichain([1])) == Antichain([0])
    assert StepBack().frontier(Antichain([0])) == Antichain([0])
    assert StepBack().frontier(Antichain()) == Antichain([0])


def test_multiple_takes_the_least_restrictive() -> None:
    p = Multiple([ValidFrom(Antichain([7])), LagWriteFrontier(2, 1), StepBack()])
    assert p.frontier(Antichain([5])) == Antichain([3])
    assert p.frontier(Antichain([20])) == Antichain([7])
    assert Multiple([]).frontier(Antichain([5])) == Antichain()
    product = Multiple(
        [ValidFrom(Antichain([Product(0, 3)])), NoPolicy(Antichain([Product(3, 0)]))]
    )
    assert product.frontier(Antichain()) == Antichain([Product(0, 3), Product(3, 0)])


def test_policies_are_hashable_values_with_readable_reprs() -> None:
    policies: list[ReadPolicy] = [
        NoPolicy(Antichain([0])),
        ValidFrom(Antichain([3])),
        LagWriteFrontier(10, 5),
        StepBack(),
        Multiple([StepBack(), ValidFrom(Antichain())]),
    ]
    assert [repr(p) for p in policies] == [
        "NoPolicy(initial_since=Antichain([0]))",
        "ValidFrom(Antichain([3]))",
        "LagWriteFrontier(lag=10, max_granularity=5)",
        "StepBack()",
        "Multiple([StepBack(), ValidFrom(Antichain([]))])",
    ]
    assert len(set(policies)) == len(policies)
    assert ValidFrom(Antichain([3])) == ValidFrom(Antichain([3]))
    assert ValidFrom(Antichain([3])) != NoPolicy(Antichain([3]))
    assert Multiple([StepBack()]) == Multiple((StepBack(),))
    assert [pickle.loads(pickle.dumps(p)) for p in policies] == policies
    with pytest.raises(AttributeError):
        ValidFrom(Antichain([3])).valid_from = Antichain([4])  # type: ignore[misc]


def test_apply_policy_advances_only_forward() -> None:
    upper = Antichain([10])
    assert apply_policy(Antichain([5]), StepBack(), upper) == Antichain([9])
    assert apply_policy(Antichain([5]), ValidFrom(Antichain([2])), upper) == Antichain([5])
    assert apply_policy(Antichain([5]), ValidFrom(Antichain()), upper) == Antichain()
    # A closed collection under a lag policy does not release its since.
    assert apply_policy(Antichain([5]), StepBack(), Antichain()) == Antichain([5])


def test_apply_policy_keeps_implied_on_incomparable_frontier() -> None:
    implied = Antichain([Product(0, 3)])
    new = ValidFrom(Antichain([Product(3, 0)]))
    assert apply_policy(implied, new, Antichain()) == implied


@pytest.mark.parametrize("kind", TIME_KINDS)
@given(data=st.data())
def test_apply_policy_never_regresses(kind: TimeKind, data: st.DataObject) -> None:
    implied = data.draw(antichains(times(kind)))
    policy = data.draw(read_policies(kind))
    upper = data.draw(antichains(times(kind)))
    result = apply_policy(implied, policy, upper)
    assert implied <= result
    assert result in (implied, policy.frontier(upper))
