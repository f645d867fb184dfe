"""``SparkIndexHistory`` answers every read like an ``IndexHistory`` fed the same operations,
keeps its rows as typed Spark columns, and rejects bad input with typed errors, unchanged."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from tidegate.replica.spark.index_history import SparkIndexHistory
from tidegate.spec.errors import (
    ArityMismatch,
    CompactionRegression,
    ExecutorError,
    InvalidInputRow,
    PeekOutOfRange,
    UnsupportedTimestamp,
)
from tidegate.spec.executor import IndexHistory
from tidegate.spec.frontier import Update
from tidegate.spec.plan.schema import Schema

pytestmark = pytest.mark.spark

SCHEMA = Schema.of(("k", "int64", False), ("s", "string"), ("f", "float64"))
FLOATS = [0.0, -0.0, 1.5, -2.25, math.nan, math.inf, -math.inf]
"""NaN is always the one object :data:`math.nan`: the mirror tells NaN objects apart."""

rows = st.tuples(st.integers(0, 3), st.sampled_from([None, "a", "b"]), st.sampled_from(FLOATS))
updates = st.lists(st.tuples(rows, st.integers(0, 12), st.integers(-2, 2).filter(bool)), max_size=4)
errors = st.lists(
    st.tuples(st.sampled_from(["div by zero", "overflow"]), st.integers(0, 12), st.integers(-1, 1)),
    max_size=1,
)
keysets = st.none() | st.sets(st.tuples(st.integers(0, 4)), max_size=3)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("apply"), updates, errors),
        st.tuples(st.just("compact"), st.integers(0, 4)),
        st.tuples(st.just("read"), st.integers(0, 6), keysets),
    ),
    max_size=8,
)


def _fed(spark: SparkSession, **kw: Any) -> tuple[SparkIndexHistory, IndexHistory]:
    """A history and its reference; shipments on the caller's thread unless ``background``
    (so that tests of the layout see each shipment's effect at once)."""
    kw.setdefault("background", False)
    return SparkIndexHistory(spark, SCHEMA, (0,), **kw), IndexHistory((0,))


@settings(max_examples=15, deadline=None)
@given(ops, st.booleans())
def test_reads_agree_with_the_mirror(
    spark: SparkSession, script: list[tuple[Any, ...]], background: bool
) -> None:
    history, mirror = _fed(spark, buffer_rows=2, fanout=2, background=background)
    since = 0
    try:
        for op in script:
            if op[0] == "apply":
                history.apply(op[1], op[2])
                mirror.apply(op[1], op[2])
                assert history.buffered < (8 if background else 2)
            elif op[0] == "compact":
                since += op[1]
                history.compact(since)
                mirror.compact(since)
            else:
                t, keys = since + op[1], op[2]
                assert history.read(t, keys) == mirror.read(t, keys)
        for t in (since, since + 6, since + 13):
            assert history.read(t, None) == mirror.read(t, None)
    finally:
        history.close()


def _mixed(n: int) -> list[Update]:
    return [
        (
            (i % 50, None if i % 7 == 0 else f"s{i % 5}", FLOATS[i % len(FLOATS)]),
            i % 9,
            1 - 2 * (i % 3 == 0),
        )
        for i in range(n)
    ]


def test_load_then_reads(spark: SparkSession) -> None:
    history, mirror = _fed(spark, buffer_rows=16, fanout=2)
    content = _mixed(400)
    history.load(content, [("overflow", 2, 1)])
    mirror.apply(content, [("overflow", 2, 1)])
    assert history.buffered == 0 and len(history.levels) == 1
    assert history.levels[0] > 0  # a large load enters above the shipments' level
    later = [((1, "late", 0.5), 9, 1), ((2, None, math.nan), 10, -1)]
    history.apply(later)
    mirror.apply(later, [])
    for t in (0, 4, 8, 9, 10, 11):
        assert history.read(t, None) == mirror.read(t, None)
    history.close()


def test_key_lookups(spark: SparkSession) -> None:
    history, mirror = _fed(spark, buffer_rows=8, fanout=2)
    content = _mixed(120)
    tail = [((3, "tail", 1.0), 2, 1), ((7, None, -0.0), 8, -1)]
    for batch in (content, tail):
        history.apply(batch)
        mirror.apply(batch, [])
    assert history.levels, "some runs are in Spark"
    assert history.buffered, "and some are buffered"
    for keys in ([(3,)], [(3,), (49,), (1000,)], [(k,) for k in range(0, 100, 1)], []):
        assert history.read(8, keys) == mirror.read(8, keys)
    rows, _ = history.read(8, [(3,)])
    assert rows and all(r[0] == 3 for r in rows)
    history.close()


def test_float_keys(spark: SparkSession) -> None:
    history = SparkIndexHistory(spark, SCHEMA, (2,), buffer_rows=8, fanout=2, background=False)
    mirror = IndexHistory((2,))
    for batch in (_mixed(100), [((1, "b", -0.0), 3, 1), ((1, "b", math.nan), 3, 2)]):
        history.apply(batch)
        mirror.apply(batch, [])
    assert history.levels and history.buffered
    many = [(float(x),) for x in range(100)]
    for keys in ([(math.nan,)], [(0.0,)], [(-0.0,), (math.inf,)], many, [("not a float",)]):
        assert history.read(6, keys) == mirror.read(6, keys)
    history.close()


def test_numeric_keys_and_values(spark: SparkSession) -> None:
    """Numerics (as their text in Spark) are keys and values, read back exactly; equal
    numbers are one key; a key of another type matches nothing."""
    schema = Schema.of(("n", "numeric"), ("v", "numeric"))
    big = Decimal("-123456789012345678901234567890123456789.000000000000000000001")
    content: list[Update] = [
        ((Decimal("1.5"), big), 1, 1),
        ((Decimal("1.5"), Decimal("1E-30")), 1, 2),
        ((big, None), 2, 1),
        ((None, Decimal(0)), 2, 1),
        ((Decimal("1.5"), big), 3, -1),
    ]
    history = SparkIndexHistory(spark, schema, (0,), buffer_rows=1, fanout=2, background=False)
    mirror = IndexHistory((0,))
    history.apply(content)
    mirror.apply(content, [])
    for t in (1, 2, 3):
        for keys in ([(Decimal("1.5"),)], [(big,), (None,)], [(Decimal(2),)], [("1.5",)], None):
            assert history.read(t, keys) == mirror.read(t, keys)
    assert history.read(1, [(Decimal("1.5"),)]) == mirror.read(1, [(Decimal("1.5"),)]) != []
    history.close()


def test_nullable_and_composite_keys(spark: SparkSession) -> None:
    schema = Schema.of(("s", "string"), ("d", "date"), ("ts", "timestamp"), ("b", "bool"))
    day = dt.date(2024, 2, 29)
    noon = dt.datetime(2024, 2, 29, 12, 0, 0, 123456)
    content: list[Update] = [
        ((None, day, noon, True), 1, 1),
        (("x", day, None, False), 1, 2),
        (("x", None, noon, None), 2, -1),
        ((None, day, noon, True), 3, 1),
    ]
    for key, lookups in (((0,), [(None,)]), ((0, 1), [("x", day), (None, day)])):
        history = SparkIndexHistory(spark, schema, key, buffer_rows=1, fanout=3, background=False)
        mirror = IndexHistory(key)
        history.apply(content)
        mirror.apply(content, [])
        for t in (1, 2, 3):
            assert history.read(t, lookups) == mirror.read(t, lookups)
            assert history.read(t, None) == mirror.read(t, None)
        history.close()


def test_compaction_preserves_reads_at_and_after_the_since(spark: SparkSession) -> None:
    history, mirror = _fed(spark, buffer_rows=4, fanout=2)
    content = _mixed(60)
    history.apply(content, [("overflow", 1, 1), ("overflow", 6, -1)])
    mirror.apply(content, [("overflow", 1, 1), ("overflow", 6, -1)])
    before = {t: mirror.read(t, None) for t in range(5, 12)}
    history.compact(5)
    mirror.compact(5)
    more = _mixed(40)  # times 0..8: some before the since, merged with advanced runs
    history.apply(more)
    mirror.apply(more, [])
    history.flush()
    assert history.buffered == 0
    for t in range(5, 12):
        assert history.read(t, None) == mirror.read(t, None)
    history.compact(8)
    assert history.read(8, None)[1] == before[8][1]
    with pytest.raises(PeekOutOfRange):
        history.read(7, None)
    history.close()


def test_merges_advance_times_to_the_since(spark: SparkSession) -> None:
    history = SparkIndexHistory(spark, SCHEMA, (0,), buffer_rows=2, fanout=2, background=False)
    history.compact(10)
    for t in range(1, 5):  # four shipments, merged pairwise, then the pairs
        history.apply([((1, "a", 0.5), t, 1), ((2, None, math.nan), t + 20, 1)])
    assert history.levels == [2]
    # row 1's four times advanced to 10 and summed; row 2's stay apart (after the since)
    assert history.count_entries() == 1 + 4
    assert history.read(10, None) == ({(1, "a", 0.5): 4}, {})
    history.close()


def test_load_after_compaction(spark: SparkSession) -> None:
    history, mirror = _fed(spark, fanout=2)
    history.compact(9)
    mirror.compact(9)
    content = _mixed(300)  # times 0..8, rows repeated and cancelled
    history.load(content, [])
    mirror.apply(content, [])
    assert history.count_entries() == len(mirror.read(9, None)[0])  # one time per row
    assert history.read(9, None) == mirror.read(9, None)
    assert history.read(12, [(4,), (5,)]) == mirror.read(12, [(4,), (5,)])
    more = [((4, "s4", 1.5), 12, -1), ((4, "new", 0.0), 12, 1)]
    history.load(more, [])
    mirror.apply(more, [])
    assert history.read(12, None) == mirror.read(12, None)
    history.close()


def test_rows_are_typed_spark_columns(spark: SparkSession) -> None:
    history = SparkIndexHistory(spark, SCHEMA, (0,), buffer_rows=1, background=False)
    history.apply([((1, None, 2.5), 0, 1)])
    assert history.buffered == 0
    (run,) = history._runs
    fields = {f.name: (f.dataType, f.nullable) for f in run.frame.schema.fields}
    assert fields["c0"][0] == T.LongType()
    assert fields["c1"] == (T.StringType(), True)
    assert fields["c2"][0] == T.DoubleType()
    assert fields["time"][0] == T.LongType() and fields["diff"][0] == T.LongType()
    rdd = run.frame._jdf.queryExecution().logical().rdd().id()
    assert spark.sparkContext._jsc.getPersistentRDDs().containsKey(rdd)
    history.close()
    assert not spark.sparkContext._jsc.getPersistentRDDs().containsKey(rdd)
    assert history.read(0, None) == ({}, {}) and history.rows_bound == 0


def test_bad_input_is_rejected_unchanged(spark: SparkSession) -> None:
    history = SparkIndexHistory(spark, SCHEMA, (0,), buffer_rows=4)
    history.apply([((1, "a", 1.0), 1, 1)], [("boom", 1, 1)])
    state = history.read(1, None)
    bad: list[tuple[type[Exception], list[Any], list[Any]]] = [
        (UnsupportedTimestamp, [((1, "a", 1.0), 1.5, 1)], []),
        (UnsupportedTimestamp, [], [("boom", "1", 1)]),
        (InvalidInputRow, [((1, "a"), 1, 1)], []),
        (InvalidInputRow, [((None, "a", 1.0), 1, 1)], []),  # k is NOT NULL
        (InvalidInputRow, [(("one", "a", 1.0), 1, 1)], []),
        (InvalidInputRow, [((1, "a", 1.0), 1, 1.0)], []),
        (InvalidInputRow, [((1, "a", 1.0), 1)], []),
    ]
    for err, ups, errs in bad:
        with pytest.raises(err):
            history.apply([((2, "b", 2.0), 1, 1), *ups], errs)
        with pytest.raises(err):
            history.load([((2, "b", 2.0), 1, 1), *ups], errs)
    with pytest.raises(ArityMismatch):
        history.read(1, [(1, "a")])
    with pytest.raises(UnsupportedTimestamp):
        history.read(1.0, None)  # type: ignore[arg-type]
    history.compact(1)
    with pytest.raises(CompactionRegression):
        history.compact(0)
    assert history.read(1, None) == state
    with pytest.raises(ArityMismatch):
        SparkIndexHistory(spark, SCHEMA, (3,))
    with pytest.raises(ExecutorError):
        SparkIndexHistory(spark, SCHEMA, (0,), fanout=1)
    history.close()


class _Gate:
    """Holds a history's background shipments until opened; ``fail`` fails the next ones."""

    def __init__(self, history: SparkIndexHistory) -> None:
        self.open = threading.Event()
        self.fail = 0
        self.started = 0
        ship = history._ship_and_merge

        def gated(runs: Any, table: Any) -> Any:
            self.started += 1
            assert self.open.wait(60)
            if self.fail:
                self.fail -= 1
                raise RuntimeError("Spark is away")
            return ship(runs, table)

        history._ship_and_merge = gated  # type: ignore[method-assign]


def test_background_shipments_are_read_from_the_driver_until_adopted(
    spark: SparkSession,
) -> None:
    history, mirror = _fed(spark, buffer_rows=4, fanout=2, background=True)
    gate = _Gate(history)
    content = _mixed(10)
    history.apply(content, [("overflow", 3, 1)])
    mirror.apply(content, [("overflow", 3, 1)])
    assert history.shipping and history.buffered == 0 and history.levels == []
    more = _mixed(3)  # buffered behind the shipment under way
    history.apply(more)
    mirror.apply(more, [])
    history.compact(2)
    mirror.compact(2)
    for t in (2, 5, 8):
        assert history.read(t, None) == mirror.read(t, None)
        assert history.read(t, [(3,), (4,)]) == mirror.read(t, [(3,), (4,)])
    assert len(history.updates()) == 13  # the shipment's 10 (from the driver) and the buffer's 3
    gate.open.set()
    history.settle()
    assert not history.shipping and len(history.levels) == 1 and history.buffered == 3
    for t in (2, 5, 8):
        assert history.read(t, None) == mirror.read(t, None)
    history.close()


def test_a_failed_shipment_keeps_its_updates_and_is_tried_again_later(
    spark: SparkSession,
) -> None:
    history, mirror = _fed(spark, buffer_rows=2, fanout=4, background=True)
    gate = _Gate(history)
    gate.fail = 1
    gate.open.set()
    first = [((1, "a", 0.5), 1, 1), ((2, "b", 1.5), 1, 1)]
    history.apply(first)
    mirror.apply(first, [])
    history.settle()
    assert history.ship_failures == 1 and isinstance(history.ship_error, RuntimeError)
    assert history.levels == [] and history.buffered == 2
    assert history.read(1, None) == mirror.read(1, None)
    for t in (2, 3):  # backing off: two applies
        history.apply([((t, "c", 2.5), t, 1)])
        mirror.apply([((t, "c", 2.5), t, 1)], [])
        assert not history.shipping and gate.started == 1
    history.apply([((4, "d", 3.5), 4, 1)])
    mirror.apply([((4, "d", 3.5), 4, 1)], [])
    history.settle()
    assert gate.started == 2 and len(history.levels) == 1 and history.buffered == 0
    assert history.read(4, None) == mirror.read(4, None)
    history.close()


def test_a_full_buffer_waits_for_the_shipment_under_way(spark: SparkSession) -> None:
    history, mirror = _fed(spark, buffer_rows=2, fanout=4, background=True)
    gate = _Gate(history)
    history.apply(_mixed(2))
    assert history.shipping
    history.apply(_mixed(7))  # 7 < 4 * 2: keeps buffering
    assert history.buffered == 7 and history.shipping
    threading.Timer(0.5, gate.open.set).start()
    history.apply(_mixed(1))  # 8: waits for the first, then ships the rest
    assert history.buffered == 0 and history._inflight
    history.settle()
    assert gate.started == 2
    mirror.apply(_mixed(2) + _mixed(7) + _mixed(1), [])
    assert history.buffered == 0 and history.read(8, None) == mirror.read(8, None)
    history.close()


def test_clearing_during_a_shipment_releases_what_it_read_and_made(spark: SparkSession) -> None:
    history = SparkIndexHistory(spark, SCHEMA, (0,), buffer_rows=1, fanout=2)
    history.apply([((1, None, 2.5), 0, 1)])
    history.settle()
    (run,) = history._runs
    held = run.frame._jdf.queryExecution().logical().rdd().id()
    gate = _Gate(history)
    history.apply([((2, None, 2.5), 0, 1)])  # merges with the held run once let through
    shipping = history._shipping
    assert shipping is not None
    history.close()
    persistent = spark.sparkContext._jsc.getPersistentRDDs()
    assert persistent.containsKey(held), "the shipment under way still reads it"
    gate.open.set()
    runs, merged_away, _ = shipping.result(timeout=60)
    made = {r.frame._jdf.queryExecution().logical().rdd().id() for r in runs + merged_away} - {held}
    assert made, "the shipment made runs"

    def released() -> bool:
        now = spark.sparkContext._jsc.getPersistentRDDs()
        return not now.containsKey(held) and not any(now.containsKey(i) for i in made)

    for _ in range(600):  # the done-callback may still be releasing
        if released():
            break
        time.sleep(0.1)
    assert released()
    assert history.read(0, None) == ({}, {})
