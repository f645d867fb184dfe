"""The step that takes a SparkExecutor index past ``index_memory_rows``
(``python bench/index_move.py [--rows 300000]``).

An index of ROWS rows is built in one step, once with the history kept in the
driver (``index_memory_rows=None``) and once with ``index_memory_rows`` at half
of ROWS, so that step starts moving the history into Spark. Printed: that
step's wall time in both cases (the difference is what the move costs the
step: the snapshot of the driver's history; the load itself runs in the
background), the point-peek latency during the move (from the driver) and
after it (a Spark job), and how long the background load took after the step.
Then the steady state of an index held in Spark: the wall time of each apply
of a large batch, with shipments and merges inside apply and in the background.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tidegate.replica.spark import SparkExecutor, spark_session
from tidegate.replica.spark.index_history import SparkIndexHistory
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Get, Schema
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

SRC, OBJ, IDX = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
SCHEMA = Schema.of(("k", "int64", False), ("v", "int64", False))


def _peek_ms(ex: SparkExecutor, t: int, n: int = 20) -> float:
    times = []
    for k in range(n):
        t0 = time.perf_counter()
        ex.peek(IDX, t, None, ((k * 7,),))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def run(spark: object, rows: int, memory_rows: int | None) -> None:
    ex = SparkExecutor(spark, index_memory_rows=memory_rows)  # type: ignore[arg-type]
    h = ex.install(
        DataflowDescription(
            "move",
            source_imports=(SourceImport(SRC),),
            objects_to_build=(BuildDesc(OBJ, Get(SRC, SCHEMA)),),
            index_exports=(IndexExport(IDX, OBJ, (0,)),),
            as_of=Antichain([0]),
        )
    )
    ex.feed(h, SRC, [((i, i * 7), 0, 1) for i in range(rows)], Antichain([1]))
    t0 = time.perf_counter()
    ex.step()
    step_ms = (time.perf_counter() - t0) * 1000
    during = _peek_ms(ex, 0)
    t0 = time.perf_counter()
    ex.wait_for_index_moves()
    ex.allow_compaction(IDX, Antichain([0]))  # adopts a finished move
    load_s = time.perf_counter() - t0
    where = "in Spark" if ex.index_in_spark(IDX) else "in the driver"
    label = "never moves" if memory_rows is None else f"index_memory_rows={memory_rows:,}"
    print(f"  {label:<28} building step {step_ms:7.0f} ms; point peek {during:6.2f} ms", end="")
    if memory_rows is not None:
        after = _peek_ms(ex, 0, 5)
        print(f" during the move, {after:6.1f} ms after; load done {load_s:.1f} s after the step")
    else:
        print()
    assert len(ex.peek(IDX, 0).rows) == rows, "the index lost rows"  # type: ignore[union-attr]
    print(f"  {'':<28} the history is now {where}")


def steady(spark: object, steps: int, size: int) -> None:
    """Apply ``steps`` batches of ``size`` updates to a Spark-resident history (each batch
    fills the 65,536-update buffer, so each ships a run, and every fourth merges)."""
    for background in (False, True):
        history = SparkIndexHistory(spark, SCHEMA, (0,), background=background)  # type: ignore[arg-type]
        history.load([((i, i), 0, 1) for i in range(size)])
        times = []
        for t in range(1, steps + 1):
            batch = [((i, i * t), t, 1) for i in range(size)]
            t0 = time.perf_counter()
            history.apply(batch)
            times.append((time.perf_counter() - t0) * 1000)
        history.settle()
        rows, _ = history.read(steps, [(7,)])
        assert sum(rows.values()) == steps + 1, "the history lost updates"
        where = "in the background" if background else "inside apply"
        print(
            f"  shipments and merges {where:<18} apply median {statistics.median(times):6.0f} ms,"
            f" max {max(times):6.0f} ms"
        )
        history.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--step-size", type=int, default=70_000)
    args = ap.parse_args()
    spark = spark_session("local[2]")
    print(f"an index of {args.rows:,} rows built in one step (local[2]):")
    run(spark, args.rows, None)
    run(spark, args.rows, args.rows // 2)
    print(f"{args.steps} applies of {args.step_size:,} updates to an index history in Spark:")
    steady(spark, args.steps, args.step_size)


if __name__ == "__main__":
    main()
