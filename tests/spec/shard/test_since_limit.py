"""Rate-limited since downgrades (persist's ``maybe_compare_and_downgrade_since``).

Pinned behaviour (``src/persist-client/src/critical.rs``): a critical reader's
``maybe_compare_and_downgrade_since`` downgrades only if at least
``critical_downgrade_interval`` has passed since its last downgrade, else
answers ``None``; the storage controller uses it for every non-empty since and
the unlimited ``compare_and_downgrade_since`` for the empty one (a dropped
collection must reach ``[]`` to be finalized).
"""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import InvalidUsage
from tidegate.spec.frontier import Antichain
from tidegate.spec.shard import SinceDowngradeLimiter


def test_a_second_downgrade_within_the_interval_waits_for_due() -> None:
    lim: SinceDowngradeLimiter[str] = SinceDowngradeLimiter(1000)
    assert lim.offer("s", Antichain([1]), 0) == Antichain([1])
    assert lim.offer("s", Antichain([2]), 10) is None
    assert lim.offer("s", Antichain([3]), 20) is None  # the newest is kept
    assert lim.pending("s") == Antichain([3])
    assert lim.due(999) == []
    assert lim.due(1000) == [("s", Antichain([3]))]
    assert lim.pending("s") is None and lim.due(5000) == []
    assert lim.offer("s", Antichain([4]), 1500) is None  # 500 ms after the last one issued
    assert lim.offer("other", Antichain([1]), 1500) == Antichain([1])  # shards are independent


def test_the_empty_frontier_is_never_limited() -> None:
    lim: SinceDowngradeLimiter[str] = SinceDowngradeLimiter(1000)
    lim.offer("s", Antichain([1]), 0)
    lim.offer("s", Antichain([2]), 1)
    assert lim.offer("s", Antichain.empty(), 2) == Antichain.empty()
    assert lim.due(10_000) == []  # the drop ended the shard's entry


def test_no_interval_issues_everything() -> None:
    lim: SinceDowngradeLimiter[str] = SinceDowngradeLimiter(0)
    assert [lim.offer("s", Antichain([t]), 0) for t in range(3)] == [
        Antichain([t]) for t in range(3)
    ]


def test_a_bad_interval_is_refused() -> None:
    with pytest.raises(InvalidUsage):
        SinceDowngradeLimiter(-1)


@given(
    interval=st.integers(1, 50),
    steps=st.lists(st.tuples(st.integers(0, 30), st.booleans()), max_size=40),
)
def test_issued_downgrades_are_spaced_and_the_last_is_issued_eventually(
    interval: int, steps: list[tuple[int, bool]]
) -> None:
    """Laws: a shard's non-empty downgrades are issued at least ``interval`` apart, in the
    order asked (never an older frontier after a newer one), and once asking stops the
    newest one asked is issued by ``due`` within one interval."""
    lim: SinceDowngradeLimiter[str] = SinceDowngradeLimiter(interval)
    now, since, issued = 0, 0, []
    for gap, tick in steps:
        now += gap
        since += 1
        got = lim.offer("s", Antichain([since]), now)
        if got is not None:
            issued.append((now, got))
        if tick:
            issued.extend((now, f) for _, f in lim.due(now))
    issued.extend((now + interval, f) for _, f in lim.due(now + interval))
    times = [t for t, _ in issued]
    assert all(b - a >= interval for a, b in pairwise(times))
    values = [f.elements[0] for _, f in issued]
    assert values == sorted(values)
    if steps:
        assert values[-1] == since
