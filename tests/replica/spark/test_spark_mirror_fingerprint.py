"""Laws of the driver-side pieces: the index mirror reads what was applied; fingerprints detect
non-empty multisets and cancel exactly on empty ones."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tidegate.replica.spark._fingerprint import PRIME, Fingerprinter
from tidegate.spec.executor import IndexHistory
from tidegate.spec.frontier import accumulate

rows = st.tuples(
    st.integers(-2, 2), st.sampled_from(["a", "b", None]), st.sampled_from([0.0, -0.0, 1.5])
)
updates = st.lists(st.tuples(rows, st.integers(0, 5), st.integers(-2, 2).filter(bool)), max_size=25)


@given(updates, st.integers(0, 5), st.integers(0, 5), st.booleans())
def test_mirror_reads_the_accumulation_at_any_time_since_compaction(
    ups: list[Any], since: int, offset: int, by_key: bool
) -> None:
    mirror = IndexHistory((0,))
    half = len(ups) // 2
    mirror.apply(ups[:half], [("boom", t, d) for _, t, d in ups[:half]])
    mirror.compact(since)
    mirror.apply(ups[half:], [])
    t = since + offset
    keys = sorted({(r[0],) for r, _, _ in ups})[:1] if by_key else None
    got_rows, got_errs = mirror.read(t, keys)
    want = accumulate([u for u in ups if keys is None or (u[0][0],) in keys], t)
    assert got_rows == want
    assert got_errs == accumulate([("boom", t2, d) for _, t2, d in ups[:half]], t)


@given(st.lists(st.tuples(rows, st.integers(-3, 3)), max_size=12))
def test_fingerprints_vanish_exactly_on_empty_multisets(changes: list[Any]) -> None:
    fp = Fingerprinter(b"k" * 16)
    counts: dict[Any, int] = {}
    s1 = s2 = 0
    for row, d in changes:
        counts[row] = counts.get(row, 0) + d  # -0.0 and 0.0 are one row, as in Python
        f1, f2 = fp(row)
        s1, s2 = (s1 + d * f1) % PRIME, (s2 + d * f2) % PRIME
    empty = not any(counts.values())
    assert ((s1, s2) == (0, 0)) == empty
