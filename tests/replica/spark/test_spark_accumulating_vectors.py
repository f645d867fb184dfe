"""The accumulating Reduce's vectorised step (numpy, ``operators._vectors``): its running
sums agree with a per-key replay in Python integers, and the whole operator agrees with the
PythonExecutor over random steps (many times per step, retractions, NULLs, two key columns,
sums that leave int64 and averages beyond 2**53)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.replica.spark._fingerprint import PRIME
from tidegate.replica.spark.arrangement import Acc
from tidegate.replica.spark.operators import AccumulatingReduceNode
from tidegate.replica.spark.operators._vectors import (
    Grouping,
    Layout,
    add_checked,
    fold,
    halves,
)
from tidegate.spec.executor import Executor, PythonExecutor
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import AggFunc, Aggregate, Get, Reduce, Schema
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

pytestmark = pytest.mark.spark

INT64 = range(-(2**63), 2**63)
# a nullable column's four slots after count(*) and its fingerprints, then a NOT NULL one's sum
KINDS = [Acc.COUNT, Acc.FINGERPRINT, Acc.FINGERPRINT]
KINDS += [Acc.COUNT, Acc.SUM, Acc.FINGERPRINT, Acc.FINGERPRINT, Acc.SUM]
PLAIN = [j for j, k in enumerate(KINDS) if k is not Acc.FINGERPRINT]
MAX_CHANGES = 16
# at most 16 changes of at most 2**59: every partial sum fits int64, as the operator checks
change_values = st.one_of(st.integers(-5, 5), st.integers(-(2**59), 2**59))
old_values = st.one_of(st.integers(-5, 5), st.integers(-(2**63), 2**63 - 1))
fingerprints = st.integers(0, PRIME - 1)


def _vector(plain: st.SearchStrategy[int]) -> st.SearchStrategy[list[int]]:
    return st.tuples(*(fingerprints if k is Acc.FINGERPRINT else plain for k in KINDS)).map(list)


keys = st.tuples(st.integers(0, 2), st.integers(0, 1))
change_lists = st.lists(
    st.tuples(keys, st.integers(0, 3), _vector(change_values)), min_size=1, max_size=MAX_CHANGES
)


def _python_replay(
    changes: list[tuple[tuple[int, int], int, list[int]]], old: dict[tuple[int, int], list[int]]
) -> list[tuple[tuple[int, int], int, list[int], list[int]]] | None:
    """Per key and time in order: the key's vector before and after the time's changes, in
    Python integers (fingerprints modulo PRIME); ``None`` if a count or sum leaves int64."""
    by_group: dict[tuple[tuple[int, int], int], list[int]] = {}
    for k, t, v in changes:
        acc = by_group.setdefault((k, t), [0] * len(KINDS))
        by_group[(k, t)] = [a + b for a, b in zip(acc, v, strict=True)]
    out = []
    cur: dict[tuple[int, int], list[int]] = {}
    for k, t in sorted(by_group):
        before = cur.get(k, old[k])
        after = [a + b for a, b in zip(before, by_group[(k, t)], strict=True)]
        for j, kind in enumerate(KINDS):
            if kind is Acc.FINGERPRINT:
                after[j] %= PRIME
        if any(after[j] not in INT64 for j in PLAIN):
            return None
        cur[k] = after
        out.append((k, t, before, after))
    return out


@given(changes=change_lists, olds=st.lists(_vector(old_values), min_size=6, max_size=6))
def test_vectorised_running_sums_agree_with_a_per_key_python_replay(
    changes: list[tuple[tuple[int, int], int, list[int]]], olds: list[list[int]]
) -> None:
    old = {(a, b): olds[2 * a + b] for a in range(3) for b in range(2)}
    layout = Layout(KINDS)
    x = np.zeros((len(changes), layout.matrix_width), np.int64)
    for i, (_, _, v) in enumerate(changes):
        for j, kind in enumerate(KINDS):
            c = layout.columns[j]
            if kind is Acc.FINGERPRINT:
                high, low = halves(np.array([v[j]], np.int64))
                x[i, c], x[i, c + 1] = high[0], low[0]
            else:
                x[i, c] = v[j]
    codes = [np.array([k[i] for k, _, _ in changes], np.int64) for i in range(2)]
    times = np.array([t for _, t, _ in changes], np.int64)
    groups = Grouping(codes, times)
    group_keys = [(int(codes[0][r]), int(codes[1][r])) for r in groups.rows]
    olds_np = np.array([old[k] for k in group_keys], np.int64)
    got = layout.replay(olds_np, groups.sums(x), groups.segments)
    want = _python_replay(changes, old)
    if want is None:
        assert got is None
        return
    assert got is not None
    before, after = got
    assert list(
        zip(group_keys, groups.times.tolist(), before.tolist(), after.tolist(), strict=True)
    ) == [(k, t, b, a) for k, t, b, a in want]
    # the run pushed to the state: per key, the sum of its changes, keys in segment order
    totals = layout.vectors(groups.segments.totals(groups.sums(x))).tolist()
    key_order = [(int(codes[0][r]), int(codes[1][r])) for r in groups.key_rows]
    assert key_order == sorted({k for k, _, _ in changes})
    for k, total in zip(key_order, totals, strict=True):
        want_total = [sum(v[j] for kk, _, v in changes if kk == k) for j in range(len(KINDS))]
        for j, kind in enumerate(KINDS):
            if kind is Acc.FINGERPRINT:
                want_total[j] %= PRIME
        assert total == want_total


@given(st.integers(0, 2**62 - 1), st.integers(0, 2**62 - 1))
def test_fold_is_the_exact_residue(high: int, low: int) -> None:
    got = fold(np.array([high], np.int64), np.array([low], np.int64))
    assert got.tolist() == [(high * 2**30 + low) % PRIME]


@given(st.integers(0, PRIME - 1))
def test_halves_fold_back_to_the_fingerprint(f: int) -> None:
    high, low = halves(np.array([f], np.int64))
    assert fold(high, low).tolist() == [f]


@given(st.lists(st.tuples(old_values, old_values), min_size=1, max_size=8))
def test_add_checked_is_exact_or_none(pairs: list[tuple[int, int]]) -> None:
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    got = add_checked(a, b)
    sums = [p + q for p, q in pairs]
    assert (got is None) == any(s not in INT64 for s in sums)
    if got is not None:
        assert got.tolist() == sums


# -- the operator against the PythonExecutor --------------------------------------------------

A, OBJ, IDX = GlobalId.user(1), GlobalId.user(10), GlobalId.user(20)
SCHEMA = Schema.of(("k", "int64"), ("s", "string"), ("v", "int64"), ("w", "int64", False))
AGGS = (
    Aggregate(AggFunc.COUNT),
    Aggregate(AggFunc.SUM, 2),
    Aggregate(AggFunc.AVG, 2),
    Aggregate(AggFunc.COUNT, 2),
    Aggregate(AggFunc.SUM, 3),
    Aggregate(AggFunc.AVG, 3),
)
BIG = 2**60  # a few of them per step pass the operator's check; summed over steps they overflow

rows = st.tuples(
    st.sampled_from([0, 1, 2, 3, None]),
    st.sampled_from(["a", "b"]),
    st.sampled_from([None, 0, 1, -3, 7, 2**53 + 1, BIG, -BIG]),
    st.sampled_from([0, 5, -2, 2**53 + 1, BIG]),
)
step_updates = st.lists(
    st.tuples(rows, st.integers(0, 1), st.sampled_from([1, 1, 1, -1, 2])), max_size=7
)


def _install(ex: Executor, keys: tuple[int, ...]) -> int:
    handle: int = ex.install(
        DataflowDescription(
            "acc",
            source_imports=(SourceImport(A),),
            objects_to_build=(BuildDesc(OBJ, Reduce(Get(A, SCHEMA), keys, AGGS)),),
            index_exports=(IndexExport(IDX, OBJ, (0,)),),
            as_of=Antichain([0]),
        )
    )
    return handle


def _assert_agrees(
    spark: SparkSession,
    keys: tuple[int, ...],
    steps: list[list[tuple[Any, int, int]]],
    watch: Callable[[AccumulatingReduceNode], None] = lambda node: None,
) -> None:
    """Step ``i`` at times ``2i`` and ``2i + 1``: the SparkExecutor's batches and peeks
    equal the PythonExecutor's."""
    sx, px = SparkExecutor(spark), PythonExecutor()
    hs, hp = _install(sx, keys), _install(px, keys)
    watch(next(n for n in sx._dataflows[hs].nodes if isinstance(n, AccumulatingReduceNode)))
    for i, step in enumerate(steps):
        batch: list[Update] = [(row, 2 * i + dt, d) for row, dt, d in step]
        upper = Antichain([2 * i + 2])
        sx.feed(hs, A, batch, upper)
        px.feed(hp, A, batch, upper)
        got = [(b.id, sorted(map(repr, b.updates)), sorted(b.errors)) for b in sx.step()]
        want = [(b.id, sorted(map(repr, b.updates)), sorted(b.errors)) for b in px.step()]
        assert sorted(got) == sorted(want)
    for t in range(2 * len(steps)):
        assert sx.peek(IDX, t) == px.peek(IDX, t)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.sampled_from([(0,), (1,), (0, 1), ()]), steps=st.lists(step_updates, max_size=4))
def test_the_vectorised_step_agrees_with_the_reference(
    spark: SparkSession, keys: tuple[int, ...], steps: list[list[tuple[Any, int, int]]]
) -> None:
    _assert_agrees(spark, keys, steps)


@pytest.mark.parametrize("keys", [(0,), (1,), (0, 1)])
def test_the_vectorised_replay_aligns_old_vectors_by_every_key_column(
    spark: SparkSession, keys: tuple[int, ...]
) -> None:
    """Keys with old vectors beside new keys, two times per step: the vectorised replay
    answers (no fallback) and agrees with the reference."""
    answered: list[bool] = []

    def watch(node: AccumulatingReduceNode) -> None:
        replay = node._replay_vectorised

        def recorded(*args: Any) -> Any:
            out = replay(*args)
            answered.append(out is not None)
            return out

        node._replay_vectorised = recorded  # type: ignore[method-assign]

    steps = [
        [((1, "a", 10, 1), 0, 1), ((2, "b", None, 2), 0, 1), ((1, "b", 3, 3), 1, 2)],
        [((1, "a", 10, 1), 0, -1), ((2, "b", 4, 2), 1, 1), ((3, "a", 5, 5), 0, 1)],
        [((2, "b", None, 2), 1, -1), ((1, "b", 3, 3), 0, -1), ((1, "a", 6, 6), 1, 1)],
    ]
    _assert_agrees(spark, keys, steps, watch)
    assert answered and all(answered)
