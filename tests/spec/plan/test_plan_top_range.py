"""``top_range`` selects exactly what sorting every row and slicing would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.plan.ordering import select_range, sort_rows, top_range
from tidegate.spec.protocol.types import ColumnOrder

_values = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=2))
_rows = st.dictionaries(st.tuples(_values, _values), st.integers(-2, 3), max_size=25)
_orders = st.lists(
    st.builds(ColumnOrder, st.integers(0, 1), st.booleans(), st.booleans()), max_size=2
)


@given(
    rows=_rows,
    order_by=_orders,
    offset=st.integers(0, 5),
    limit=st.none() | st.integers(0, 8),
)
def test_top_range_is_select_range_of_the_sorted_rows(
    rows: dict[tuple[object, object], int],
    order_by: list[ColumnOrder],
    offset: int,
    limit: int | None,
) -> None:
    order = tuple(order_by)
    want = select_range(sort_rows(rows.items(), order), offset, limit)
    assert top_range(rows.items(), order, offset, limit) == want
