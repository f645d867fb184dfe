"""Laws 1-5 of reference §1.7: orders and timestamps."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Product, less_equal, less_than, minimum, sort_key
from tidegate.spec.strategies import TIME_KINDS, TimeKind, int_times, times

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


@dataclass(frozen=True)
class Unit:
    """The one-element timestamp ``()``: a user-supplied PartialOrder."""

    def less_equal(self, other: Any) -> bool:
        return True

    def join(self, other: Any) -> Unit:
        return self

    def meet(self, other: Any) -> Unit:
        return self

    def sort_key(self) -> tuple[()]:
        return ()

    def minimum(self) -> Unit:
        return self

    def kind(self) -> str:
        return "Unit"


@KINDS
@given(data=st.data())
def test_law_01_partial_order_axioms(kind: TimeKind, data: st.DataObject) -> None:
    a, b, c = (data.draw(times(kind)) for _ in range(3))
    assert less_equal(a, a)
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)
    assert less_than(a, b) == (less_equal(a, b) and a != b)


@KINDS
@given(data=st.data())
def test_law_02_sort_compatibility(kind: TimeKind, data: st.DataObject) -> None:
    a, b = data.draw(times(kind)), data.draw(times(kind))
    if less_equal(a, b):
        assert sort_key(a) <= sort_key(b)


@KINDS
@given(data=st.data())
def test_law_03_minimum_is_least(kind: TimeKind, data: st.DataObject) -> None:
    t = data.draw(times(kind))
    assert less_equal(minimum(t), t)
    assert minimum(t) == (0 if kind == "int" else Product(0, 0))


@given(a1=int_times(), b1=int_times(), a2=int_times(), b2=int_times())
def test_law_04_product_order_is_componentwise(a1: int, b1: int, a2: int, b2: int) -> None:
    assert less_equal(Product(a1, b1), Product(a2, b2)) == (a1 <= a2 and b1 <= b2)
    # ints are total ...
    assert less_equal(a1, a2) or less_equal(a2, a1)
    # ... and so is Product((), total) ...
    x, y = Product(Unit(), a1), Product(Unit(), a2)
    assert less_equal(x, y) or less_equal(y, x)
    # ... but Product of two totals is not: an incomparable pair exists.
    assert not less_equal(Product(0, 1), Product(1, 0))
    assert not less_equal(Product(1, 0), Product(0, 1))


@given(
    st.tuples(int_times(), int_times()),
    st.tuples(int_times(), int_times()),
)
def test_law_05_lexicographic_order_is_total_and_not_product(
    x: tuple[int, int], y: tuple[int, int]
) -> None:
    assert x <= y or y <= x
    # Lexicographic order extends the product order (it is its sort key) ...
    if less_equal(Product(*x), Product(*y)):
        assert x <= y
    # ... and differs from it.
    assert (0, 5) <= (1, 0)
    assert not less_equal(Product(0, 5), Product(1, 0))


def test_product_grid_has_incomparable_pairs() -> None:
    """Exhaustive form of law 4's witness over a small grid."""
    grid = [Product(a, b) for a, b in itertools.product(range(3), repeat=2)]
    incomparable = [
        (x, y) for x in grid for y in grid if not less_equal(x, y) and not less_equal(y, x)
    ]
    assert (Product(0, 1), Product(1, 0)) in incomparable
