"""Laws 46-49 of reference §1.7: read policies.

Laws 46 and 47 hold for any timestamp; 48 (``step_back``) and 49
(``lag_writes_by``) are defined for int timestamps only (reference §2.3), so
they run over ints, with uppers drawn both as single times and as ``[]``.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import (
    Antichain,
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    StepBack,
    ValidFrom,
    lag_writes_by,
    step_back,
)
from tidegate.spec.strategies import (
    TIME_KINDS,
    TimeKind,
    antichains,
    int_times,
    read_policies,
    times,
    write_frontiers,
)

KINDS = pytest.mark.parametrize("kind", TIME_KINDS)


@KINDS
@given(data=st.data())
def test_law_46_constant_policies_ignore_the_upper(kind: TimeKind, data: st.DataObject) -> None:
    f = data.draw(antichains(times(kind)))
    u = data.draw(antichains(times(kind)))
    assert ValidFrom(f).frontier(u) == f
    assert NoPolicy(f).frontier(u) == f


@KINDS
@given(data=st.data())
def test_law_47_multiple_is_the_meet(kind: TimeKind, data: st.DataObject) -> None:
    ps = data.draw(st.lists(read_policies(kind), max_size=4))
    u = data.draw(write_frontiers() if kind == "int" else antichains(times(kind)))
    expected = Antichain.empty()
    for p in ps:
        expected = expected.meet(p.frontier(u))
    assert Multiple(ps).frontier(u) == expected
    assert Multiple([]).frontier(u) == Antichain.empty()


@given(u=st.one_of(st.none(), int_times(12)))
def test_law_48_step_back(u: int | None) -> None:
    upper = Antichain() if u is None else Antichain([u])
    result = step_back().frontier(upper)
    assert result == StepBack().frontier(upper)
    if u is None:
        assert result == Antichain([0])
    else:
        assert result == Antichain([u - 1 if u > 0 else 0])
        assert result <= upper


@given(
    u=st.one_of(st.none(), st.integers(0, 200)),
    v=st.integers(0, 200),
    lag=st.integers(0, 30),
    g=st.integers(1, 15),
)
def test_law_49_lag_writes_by(u: int | None, v: int, lag: int, g: int) -> None:
    policy = lag_writes_by(lag, g)
    assert policy == LagWriteFrontier(lag, g)
    if u is None:
        assert policy.frontier(Antichain()) == Antichain([0])
        return
    upper = Antichain([u])
    result = policy.frontier(upper)
    if lag == 0:
        assert result == upper
    else:
        x = max(0, u - lag)
        assert result == Antichain([x - x % min(lag, g)])
    assert result <= upper
    # Monotone in the upper.
    if u <= v:
        assert result <= policy.frontier(Antichain([v]))
