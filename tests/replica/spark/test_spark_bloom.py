"""The driver-built Bloom filter: byte-identical to Spark's own, and a lookup (of operator
state, or of an index held in Spark) through it answers exactly what the semi-join answers:
its false positives are dropped."""

from __future__ import annotations

import weakref
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tidegate.replica.spark import bloom
from tidegate.replica.spark.arrangement import Acc, SparkAccumulators, SparkArrangement, Spine
from tidegate.replica.spark.index_history import SparkIndexHistory
from tidegate.spec.executor import IndexHistory
from tidegate.spec.plan import Schema

pytestmark = pytest.mark.spark

INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=25, deadline=None)
@given(st.lists(INT64, min_size=1, max_size=40), st.sampled_from([0.3, 0.03, 0.01, 0.001]))
def test_the_filter_bytes_are_the_ones_spark_builds(
    spark: SparkSession, keys: list[int], fpp: float
) -> None:
    jvm = spark._jvm
    assert jvm is not None
    theirs = jvm.org.apache.spark.util.sketch.BloomFilter.create(len(keys), fpp)
    for k in keys:
        theirs.putLong(k)
    out = jvm.java.io.ByteArrayOutputStream()
    theirs.writeTo(out)
    assert bloom.bloom_filter_bytes(pa.array(keys, pa.int64()), fpp) == bytes(out.toByteArray())


def test_a_null_key_is_refused() -> None:
    with pytest.raises(ValueError, match="NULL"):
        bloom.bloom_filter_bytes(pa.array([1, None], pa.int64()))


def _materialised(spine: Spine) -> None:
    for r in spine.runs:
        if r.pending is not None:
            r.pending.result()


def _lookups(spine: Any, keys: list[Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, int]:
    """``spine.lookup(keys)`` through the Bloom filter and through the semi-join, and how
    many filters the first lookup used."""
    built = []
    real = bloom.might_contain

    def counting(*args: Any) -> Any:
        test = real(*args)
        if test is not None:
            built.append(1)
        return test

    monkeypatch.setattr("tidegate.replica.spark.arrangement.might_contain", counting)
    through_bloom = spine.lookup(keys)
    monkeypatch.setattr(Spine, "_bloom", lambda self, keys: None)
    through_join = spine.lookup(keys)
    return through_bloom, through_join, len(built)


def test_an_accumulator_lookup_through_the_filter_equals_the_semi_join(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), [Acc.COUNT, Acc.SUM])
    held = range(-2000, 2000, 3)
    for i in range(4):
        acc.append({(k,): [1, k * i] for k in held})
    _materialised(acc)
    # every key is asked for, held or not: false positives must not show
    asked = [(k,) for k in range(-100, 100)] + [(2**63 - 1,), (-(2**63),)]
    got, want, built = _lookups(acc, asked, monkeypatch)
    assert built == 1
    assert got == want == {(k,): [4, 6 * k] for k in held if -100 <= k < 100}


def test_an_arrangement_lookup_through_the_filter_equals_the_semi_join(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = Schema.of(("a", "string"), ("k", "int64"))
    arr = SparkArrangement(spark, schema, (1,))
    for i in range(4):
        arr.append({(f"r{i}", k): 1 for k in range(1000)})
    _materialised(arr)
    asked = [(k,) for k in range(990, 1010)]
    got, want, built = _lookups(arr, asked, monkeypatch)
    assert built == 1
    assert got == want == {(k,): {(f"r{i}", k): 1 for i in range(4)} for k in range(990, 1000)}


def test_a_null_or_composite_key_takes_the_semi_join(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), [Acc.COUNT])
    for _ in range(4):
        acc.append({(k,): [1] for k in [*range(200), None]})
    _materialised(acc)
    got, want, built = _lookups(acc, [(None,), (5,), (500,)], monkeypatch)
    assert built == 0 and got == want == {(None,): [4], (5,): [4]}

    monkeypatch.undo()
    pair = SparkAccumulators(spark, Schema.of(("k", "int64"), ("j", "int64")), [Acc.COUNT])
    for _ in range(4):
        pair.append({(k, k): [1] for k in range(200)})
    _materialised(pair)
    got, want, built = _lookups(pair, [(5, 5), (5, 6)], monkeypatch)
    assert built == 0 and got == want == {(5, 5): [4]}


def test_a_spark_that_builds_other_bytes_gets_the_semi_join(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first use checks the bytes against the JVM's; a mismatch (another Spark's format
    or hashing) turns the filter off rather than losing keys."""
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), [Acc.COUNT])
    for _ in range(4):
        acc.append({(k,): [1] for k in range(200)})
    _materialised(acc)
    monkeypatch.setattr(bloom, "_classes", weakref.WeakKeyDictionary())
    monkeypatch.setattr(bloom, "bloom_filter_bytes", lambda keys, fpp=0.01: b"\x00" * 20)
    assert bloom.might_contain(spark, F.col("k"), pa.array([1], pa.int64())) is None
    assert acc.lookup([(5,), (500,)]) == {(5,): [4]}


def test_an_index_read_of_many_keys_goes_through_the_filter_exactly(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = Schema.of(("k", "int64", False), ("s", "string"))
    history = SparkIndexHistory(spark, schema, (0,), buffer_rows=64, fanout=2, background=False)
    mirror = IndexHistory((0,))
    try:
        for t in range(4):
            batch = [((k, f"s{t}"), t, 1) for k in range(0, 2000, 2)]
            history.apply(batch)
            mirror.apply(batch, [])
        assert history.levels, "the history is in Spark"
        built = []
        real = bloom.might_contain
        monkeypatch.setattr(
            "tidegate.replica.spark.index_history.might_contain",
            lambda *a: built.append(1) or real(*a),
        )
        asked = [(k,) for k in range(500, 900)]  # half of them held
        assert history.read(2, asked) == mirror.read(2, asked)
        assert built == [1]
    finally:
        history.close()


def test_keys_the_filter_cannot_hold_get_none(spark: SparkSession) -> None:
    col = F.col("k")
    assert bloom.might_contain(spark, col, pa.array([1, None], pa.int64())) is None
    assert bloom.might_contain(spark, col, pa.array(["a"])) is None
    assert bloom.might_contain(spark, col, pa.array([1], pa.int32())) is None
    assert bloom.might_contain(spark, col, pa.array([1], pa.int64())) is not None
