"""Regression tests for bugs found while reviewing the frontier core.

Each concerns a user-defined timestamp (the ``PartialOrder`` protocol) or a
non-timestamp value reaching the algebra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import InvalidTimestamp
from tidegate.spec.frontier import Antichain, MutableAntichain, less_equal


@dataclass(frozen=True)
class Coarse:
    """Pairs in the product order with a compatible but coarse sort key.

    ``a <= b`` implies ``key(a) <= key(b)``, but distinct (even comparable)
    times share keys. The constant hash makes set iteration follow insertion
    order, which is what exposed the order-dependence.
    """

    a: int
    b: int

    def less_equal(self, other: Coarse) -> bool:
        return self.a <= other.a and self.b <= other.b

    def join(self, other: Coarse) -> Coarse:
        return Coarse(max(self.a, other.a), max(self.b, other.b))

    def meet(self, other: Coarse) -> Coarse:
        return Coarse(min(self.a, other.a), min(self.b, other.b))

    def sort_key(self) -> int:
        return (self.a + self.b) // 4

    def minimum(self) -> Coarse:
        return Coarse(0, 0)

    def kind(self) -> str:
        return "Coarse"

    def __hash__(self) -> int:
        return 1


coarse = st.builds(Coarse, st.integers(0, 5), st.integers(0, 5))


def test_antichain_equality_ignores_storage_order_of_equal_sort_keys() -> None:
    # Bug: equality compared the stored tuples, whose order for equal sort keys
    # followed the input order; the hash likewise depended on it.
    x, y = Coarse(0, 1), Coarse(1, 0)
    assert Antichain([x, y]) == Antichain([y, x])
    assert hash(Antichain([x, y])) == hash(Antichain([y, x]))


def test_antichain_drops_dominated_element_with_equal_sort_key() -> None:
    # Bug: an element sorted before a smaller one of equal key survived, so
    # the "antichain" held two comparable elements.
    small, big = Coarse(0, 0), Coarse(1, 1)
    assert small.sort_key() == big.sort_key()
    assert Antichain([big, small]).elements == (small,)
    assert Antichain([small, big]).elements == (small,)


@given(st.lists(coarse, max_size=8), st.randoms(use_true_random=False))
def test_coarse_keys_give_minimal_elements_in_any_order(xs: list[Coarse], rnd: Any) -> None:
    shuffled = list(xs)
    rnd.shuffle(shuffled)
    a = Antichain(xs)
    minimal = {x for x in xs if not any(less_equal(y, x) and y != x for y in xs)}
    assert set(a.elements) == minimal
    assert a == Antichain(shuffled)
    assert hash(a) == hash(Antichain(shuffled))


@pytest.mark.parametrize("bad", [True, 1.5, "3", None])
def test_probing_with_a_non_timestamp_is_a_typed_error(bad: object) -> None:
    # Bug: comparing an int frontier with e.g. a bool raised AttributeError.
    with pytest.raises(InvalidTimestamp):
        Antichain([3]).less_equal(bad)


def test_zero_delta_with_invalid_time_is_rejected() -> None:
    # Bug: zero deltas were dropped before validation, so a negative time passed silently.
    m = MutableAntichain([2])
    with pytest.raises(InvalidTimestamp):
        m.update_iter([(-1, 0)])
    assert m.frontier == Antichain([2]) and m.updates() == [(2, 1)]
