"""Reclocking laws: bindings encode and decode, every offset gets exactly one time, monotonically."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import InvalidBindings
from tidegate.spec.frontier import Antichain, Update, accumulate, consolidate
from tidegate.spec.storage import (
    REMAP_SCHEMA,
    Bindings,
    decode_bindings,
    mint_binding,
    reclock,
    remap_as_of,
    resume_offset,
)


@st.composite
def bindings(draw: st.DrawFn) -> Bindings:
    """Bindings minted one tick at a time: the clock and the offsets only move forward."""
    b = Bindings()
    t = 0
    for _ in range(draw(st.integers(0, 8))):
        t += draw(st.integers(0, 5))
        offset = b.latest + draw(st.integers(0, 6))
        b = b.minted(t, offset)
        t += 1
    return b


def _contents(updates: list[Update], t: int) -> dict[tuple[int, ...], int]:
    return accumulate(updates, t)


@given(bindings())
def test_the_remap_collection_holds_one_binding_at_every_time(b: Bindings) -> None:
    updates = b.updates()
    upper = b.upper or 0
    for t in range(upper):
        contents = _contents(updates, t)
        if b.at(t) == 0:
            assert contents == {}
        else:
            assert contents == {(b.at(t),): 1}
    for row, _, _ in updates:
        assert len(row) == REMAP_SCHEMA.arity and type(row[0]) is int


@given(bindings())
def test_bindings_round_trip_through_their_updates(b: Bindings) -> None:
    assert decode_bindings(b.updates(), 0, Antichain([b.upper or 0])) == b


@given(bindings(), st.data())
def test_a_read_as_of_a_later_time_decodes_to_the_advanced_bindings(
    b: Bindings, data: st.DataObject
) -> None:
    upper = b.upper or 0
    if upper == 0:
        return
    as_of = data.draw(st.integers(0, upper - 1))
    read = consolidate((row, max(t, as_of), d) for row, t, d in b.updates())
    decoded = decode_bindings(read, as_of, Antichain([upper]))
    assert decoded == b.advanced(as_of)
    for t in range(as_of, upper):
        assert decoded.at(t) == b.at(t)


@given(bindings(), st.lists(st.integers(0, 60), max_size=12))
def test_every_bound_offset_gets_exactly_one_time_and_reclocking_is_monotone(
    b: Bindings, offsets: list[int]
) -> None:
    upper = b.upper or 0
    for o in sorted(offsets):
        t = b.time_of(o)
        if o >= b.latest:
            assert t is None  # not bound yet
            continue
        assert t is not None
        # t is the least time whose binding is beyond o: o is in [binding(t - 1), binding(t)).
        assert b.at(t) > o
        assert t == 0 or b.at(t - 1) <= o
        assert t < upper
    times = [b.time_of(o) for o in sorted(offsets) if o < b.latest]
    assert times == sorted(times)


@given(
    bindings(),
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 50), st.sampled_from([1, -1])), max_size=15
    ),
)
def test_the_data_of_a_time_are_the_updates_between_two_bindings(
    b: Bindings, raw: list[tuple[int, int, int]]
) -> None:
    updates = [((v,), o, d) for v, o, d in raw]
    timed, rest = reclock(updates, b)
    assert len(timed) + len(rest) == len(updates)
    assert all(o >= b.latest for _, o, _ in rest)
    for t in range(b.upper or 0):
        lo = b.at(t - 1) if t > 0 else 0
        want = consolidate((row, t, d) for row, o, d in updates if lo <= o < b.at(t))
        assert consolidate(u for u in timed if u[1] == t) == want


def test_minting_and_resuming() -> None:
    assert mint_binding(0, 0, 5) == ()
    assert mint_binding(0, 3, 5) == (((3,), 5, 1),)
    assert mint_binding(3, 7, 6) == (((7,), 6, 1), ((3,), 6, -1))
    with pytest.raises(InvalidBindings):
        mint_binding(7, 3, 6)
    b = Bindings().minted(2, 3).minted(5, 7)
    assert b.upper == 6 and b.latest == 7
    with pytest.raises(InvalidBindings):
        b.minted(4, 9)  # before the upper
    with pytest.raises(InvalidBindings):
        b.minted(6, 6)  # going back
    assert b.minted(6, 7).changes == b.changes  # the source did not move: only the upper does
    assert resume_offset(b, 0) == 0
    assert [resume_offset(b, d) for d in (1, 3, 5, 6)] == [0, 3, 3, 7]
    assert [remap_as_of(d) for d in (0, 1, 6)] == [0, 0, 5]
    with pytest.raises(InvalidBindings):
        b.at(6)  # not known yet


@pytest.mark.parametrize(
    ("updates", "as_of", "upper"),
    [
        ([((3,), 1, 1), ((4,), 1, 1)], 0, 5),  # two rows at once
        ([((3,), 1, 2)], 0, 5),  # a row twice
        ([((3,), 1, 1), ((3,), 2, -1)], 0, 5),  # empty after a binding
        ([((5,), 1, 1), ((3,), 2, 1), ((5,), 2, -1)], 0, 5),  # going back
        ([((3,), 6, 1)], 0, 5),  # at or beyond the upper
        ([((3,), 1, 1)], 2, 5),  # before the as_of
        ([(("x",), 1, 1)], 0, 5),  # not an int offset
        ([((3, 4), 1, 1)], 0, 5),  # not one column
        ([((-1,), 1, 1)], 0, 5),  # a negative offset
    ],
)
def test_malformed_remap_contents_are_refused(
    updates: list[Update], as_of: int, upper: int
) -> None:
    with pytest.raises(InvalidBindings):
        decode_bindings(updates, as_of, Antichain([upper]))
