"""Laws of ``IndexHistory``, the index output that int-time executors answer peeks from."""

from __future__ import annotations

import gc
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.executor import IndexHistory, PythonExecutor
from tidegate.spec.frontier import Antichain, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Get, Schema
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    SourceImport,
)

rows = st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]))
updates = st.lists(st.tuples(rows, st.integers(0, 8), st.integers(-2, 2)), max_size=12)
errors = st.lists(
    st.tuples(st.sampled_from(["boom", "overflow"]), st.integers(0, 8), st.integers(-1, 1)),
    max_size=3,
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), updates, errors),
        st.tuples(st.just("compact"), st.integers(0, 3)),
    ),
    max_size=8,
)
keysets = st.none() | st.lists(st.tuples(st.integers(0, 4)), max_size=4)


@given(ops, st.integers(0, 10), keysets)
def test_reads_after_compaction_are_the_accumulation_of_the_raw_updates(
    script: list[tuple[Any, ...]], offset: int, keys: list[Any] | None
) -> None:
    history = IndexHistory((0,))
    raw: list[Any] = []
    raw_errs: list[Any] = []
    since = 0
    for op in script:
        if op[0] == "apply":
            history.apply(op[1], op[2])
            raw += op[1]
            raw_errs += op[2]
        else:
            since += op[1]
            history.compact(since)
    t = since + offset
    wanted = None if keys is None else set(keys)
    got_rows, got_errs = history.read(t, keys)
    assert got_rows == accumulate([u for u in raw if wanted is None or (u[0][0],) in wanted], t)
    assert got_errs == accumulate(raw_errs, t)


@given(ops)
def test_compaction_leaves_each_row_at_most_one_time_up_to_the_since(
    script: list[tuple[Any, ...]],
) -> None:
    history = IndexHistory((1,))
    since = 0
    for op in script:
        if op[0] == "apply":
            history.apply(op[1], op[2])
        else:
            since += op[1]
            history.compact(since)
            early: dict[Any, int] = {}
            for r, t, d in history.updates():
                assert d != 0
                if t <= since:
                    early[r] = early.get(r, 0) + 1
            assert all(n == 1 for n in early.values())
            merged = [m for m, t, _ in history.error_updates() if t <= since]
            assert len(merged) == len(set(merged))
        held = {r for r, _, _ in history.updates()}
        assert history.rows == len(history) == len(held)


def test_a_compacted_unique_index_leaves_the_garbage_collector_nothing_to_walk() -> None:
    """Every full collection walks every tracked object: an index holding a dict per key made
    the replica's pauses grow with the index (a freshness tail in ``bench/appends.py``)."""
    history = IndexHistory((0,))
    n = 5_000
    history.apply([((i, 2 * i), 1, 1) for i in range(n)], [])
    history.apply(  # half the keys change their row: two rows, then one again once compacted
        [u for i in range(0, n, 2) for u in (((i, 2 * i), 2, -1), ((i, 3 * i), 2, 1))], []
    )
    history.compact(2)
    gc.collect()
    gc.collect()  # tuples of untracked values stop being tracked when a collection sees them
    # What a collection walks of the history itself (counting every object of the process
    # also counted what other threads of a test worker allocated meanwhile).
    walked = sum(_tracked_under(c) for c in (history._by_key, history.errs, history._multi))
    assert walked < 50
    assert history.read(2, [(0,), (1,)]) == ({(0, 0): 1, (1, 2): 1}, {})
    assert len(history) == n


def test_a_key_looked_up_twice_counts_once() -> None:
    history = IndexHistory((0,))
    history.apply([((1, "a"), 0, 1), ((2, "b"), 0, 2)], [])
    assert history.read(0, [(1,), (1,), (3,)]) == ({(1, "a"): 1}, {})


def test_python_executor_peeks_a_repeated_lookup_key_once() -> None:
    u1, obj, ix = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
    schema = Schema.of(("k", "int64", False), ("v", "string"))
    ex = PythonExecutor()
    h = ex.install(
        DataflowDescription(
            "t",
            source_imports=(SourceImport(u1),),
            objects_to_build=(BuildDesc(obj, Get(u1, schema)),),
            index_exports=(IndexExport(ix, obj, (0,)),),
            as_of=Antichain([0]),
        )
    )
    ex.feed(h, u1, [((1, "a"), 0, 1), ((2, "b"), 0, 1)], Antichain([1]))
    ex.step()
    assert ex.peek(ix, 0, key_lookup=((1,), (1,))) == PeekRows((((1, "a"), 1),))


def _tracked_under(root: object) -> int:
    """How many objects the garbage collector tracks below ``root`` (a container of rows)."""
    n, stack, seen = 0, list(gc.get_referents(root)), set()
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if gc.is_tracked(o):
            n += 1
            stack.extend(gc.get_referents(o))
    return n
