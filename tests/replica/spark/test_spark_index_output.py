"""``IndexOutput`` moves a large index history into Spark in the background: reads, updates and
compactions go on against the driver's copy meanwhile, nothing is lost at the switch, and a
failed move leaves the history in the driver to be tried again later."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import IndexStatus
from tidegate.replica.spark._index_output import IndexOutput
from tidegate.replica.spark.index_history import SparkIndexHistory
from tidegate.spec.executor import IndexHistory
from tidegate.spec.frontier import Update
from tidegate.spec.plan.schema import Schema

pytestmark = pytest.mark.spark

SCHEMA = Schema.of(("k", "int64", False), ("v", "int64", False))
KEY = (0,)


class Opener:
    """Makes the Spark history of a move; ``gate`` holds the move until set, ``fail`` makes
    the next ``fail`` moves raise."""

    def __init__(self, spark: SparkSession, *, gate: threading.Event | None = None) -> None:
        self.spark = spark
        self.gate = gate
        self.fail = 0
        self.opened: list[SparkIndexHistory] = []
        self.closed: list[SparkIndexHistory] = []

    def __call__(self) -> SparkIndexHistory:
        if self.gate is not None:
            assert self.gate.wait(60)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("Spark is away")
        opener = self

        class Tracked(SparkIndexHistory):
            def close(self) -> None:
                opener.closed.append(self)
                super().close()

        history = Tracked(self.spark, SCHEMA, KEY, buffer_rows=4)
        self.opened.append(history)
        return history


def rows(ts: range, keys: range) -> list[Update]:
    return [((k, 10 * t + k), t, 1) for t in ts for k in keys]


def same_reads(out: IndexOutput, ref: IndexHistory, times: range) -> None:
    for t in times:
        assert out.read(t, None) == ref.read(t, None)
        assert out.read(t, [(1,), (3,)]) == ref.read(t, [(1,), (3,)])


def fed(make: Callable[[], SparkIndexHistory], **kw: int) -> tuple[IndexOutput, IndexHistory]:
    return IndexOutput(KEY, make, kw.pop("memory_rows", 5), **kw), IndexHistory(KEY)


def test_a_background_move_keeps_serving_from_the_driver_and_loses_nothing(
    spark: SparkSession,
) -> None:
    gate = threading.Event()
    opener = Opener(spark, gate=gate)
    out, ref = fed(opener, inline_move_rows=0)
    for part in (rows(range(0, 2), range(4)), [((1, 999), 2, 1)]):
        out.apply(part, [])
        ref.apply(part, [])
    assert out.moving and not out.in_spark  # 9 rows > 5: the move waits at the gate
    assert out.status() == IndexStatus("moving")

    # while it moves: updates, a retraction, an error, a compaction and reads, all from the driver
    more = [*rows(range(3, 5), range(2, 6)), ((1, 999), 4, -1)]
    out.apply(more, [("division by zero", 4, 1)])
    ref.apply(more, [("division by zero", 4, 1)])
    out.compact(2)
    ref.compact(2)
    assert out.moving and not out.in_spark
    same_reads(out, ref, range(2, 6))

    gate.set()
    out.settle()
    assert out.in_spark and not out.moving and out.move_failures == 0
    assert out.status() == IndexStatus("spark")
    same_reads(out, ref, range(2, 6))
    assert sorted(out.updates()) == sorted(ref.updates())
    assert out.error_updates() == ref.error_updates()

    # and it goes on in Spark
    last = rows(range(5, 6), range(3))
    out.apply(last, [])
    ref.apply(last, [])
    out.compact(4)
    ref.compact(4)
    same_reads(out, ref, range(4, 7))


def test_a_small_move_happens_inside_the_step(spark: SparkSession) -> None:
    out, ref = fed(Opener(spark), memory_rows=2)
    part = rows(range(0, 1), range(3))
    out.apply(part, [])
    ref.apply(part, [])
    assert out.in_spark and not out.moving
    same_reads(out, ref, range(0, 2))


def test_a_failed_move_stays_in_the_driver_and_is_tried_again_later(spark: SparkSession) -> None:
    opener = Opener(spark)
    opener.fail = 1
    out, ref = fed(opener, memory_rows=2)
    step = iter(range(100))

    def apply_step() -> None:
        t = next(step)
        part = rows(range(t, t + 1), range(3))
        out.apply(part, [])
        ref.apply(part, [])

    apply_step()
    assert not out.in_spark and out.move_failures == 1
    assert isinstance(out.move_error, RuntimeError)
    assert out.status() == IndexStatus("driver", 1, "RuntimeError('Spark is away')")
    same_reads(out, ref, range(0, 2))
    apply_step()  # backing off: 2 steps after the first failure
    assert not out.in_spark and len(opener.opened) == 0
    apply_step()
    apply_step()
    assert out.in_spark and out.move_failures == 1
    assert out.status().location == "spark" and out.status().failures == 1
    same_reads(out, ref, range(0, 5))


def test_an_index_closed_while_moving_releases_the_moved_history(spark: SparkSession) -> None:
    gate = threading.Event()
    opener = Opener(spark, gate=gate)
    out, _ = fed(opener, inline_move_rows=0)
    out.apply(rows(range(0, 2), range(4)), [])
    assert out.moving
    out.close()
    gate.set()
    for _ in range(600):
        if opener.closed:
            break
        threading.Event().wait(0.1)
    assert opener.closed == opener.opened and len(opener.opened) == 1


def test_memory_rows_none_never_moves(spark: SparkSession) -> None:
    opener = Opener(spark)
    out = IndexOutput(KEY, opener, None)
    out.apply(rows(range(0, 3), range(50)), [])
    out.settle()
    assert not out.in_spark and not opener.opened


@pytest.mark.parametrize("inline", [0, 10_000])
def test_executor_waits_for_index_moves(spark: SparkSession, inline: int) -> None:
    from tidegate.replica.spark import SparkExecutor
    from tidegate.spec.frontier import Antichain
    from tidegate.spec.ids import GlobalId
    from tidegate.spec.plan import Get
    from tidegate.spec.protocol.types import (
        BuildDesc,
        DataflowDescription,
        IndexExport,
        SourceImport,
    )

    src, obj, idx = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
    ex = SparkExecutor(spark, index_memory_rows=3)
    h = ex.install(
        DataflowDescription(
            "move",
            source_imports=(SourceImport(src),),
            objects_to_build=(BuildDesc(obj, Get(src, SCHEMA)),),
            index_exports=(IndexExport(idx, obj, KEY),),
            as_of=Antichain([0]),
        )
    )
    ex._exports[idx][1].index.inline_move_rows = inline  # type: ignore[union-attr]
    ex.feed(h, src, rows(range(0, 2), range(4)), Antichain([2]))
    ex.step()
    ex.wait_for_index_moves()
    assert ex.index_in_spark(idx) and ex.index_status() == {idx: IndexStatus("spark")}
    assert sorted(ex.peek(idx, 1).rows) == sorted((r, 1) for r, _, _ in rows(range(0, 2), range(4)))
