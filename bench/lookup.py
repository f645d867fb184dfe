"""Benchmark of a state lookup in Spark: whole read, broadcast semi-join, Bloom filter.

The design choice behind ``replica/spark/bloom.py`` (for state ten times
the memory): a step looks up the ~8,600 keys its change touches. The state is
``SparkAccumulators`` with one int64 key and three runs of ``--keys`` entries
each, materialised in Spark (cached, key-partitioned) the way a replica's are.
Each way of reading is timed through ``Spine._fetch_job`` (one Spark job plus
the transfer to Arrow), median of ``--repeat`` after warm-up, on local[2]:

* ``all``: every entry (what a lookup does when the keys are much of the state);
* ``semi``: the keys as a DataFrame, broadcast, semi-joined;
* ``bloom``: the keys as a Bloom filter tested inside the scan, then filtered
  exactly in Arrow.

    python bench/lookup.py [--keys 10000 100000] [--asked 8600] [--repeat 15]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from tidegate.replica.spark import spark_session
from tidegate.replica.spark.arrangement import Acc, SparkAccumulators
from tidegate.spec.plan import Schema

KINDS = [Acc.COUNT, Acc.FINGERPRINT, Acc.FINGERPRINT, Acc.SUM]


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _state(spark: SparkSession, keys: int, rng: random.Random) -> SparkAccumulators:
    """Three materialised runs of ``keys`` entries each (12 appends: 4 make a run)."""
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), KINDS)
    for _ in range(12):
        acc.append({(k,): [1, rng.randrange(2**40), rng.randrange(2**40), k] for k in range(keys)})
    for r in acc.runs:
        if r.pending is not None:
            r.pending.result()
        r.settle()
    assert acc.levels == [1, 1, 1], acc.levels
    return acc


def _measure(
    spark: SparkSession, keys: int, asked_n: int, repeat: int, rng: random.Random
) -> tuple[float, float, float, int]:
    """Median ms of the three reads of ``asked_n`` keys in a state of ``keys`` keys, and
    how many entries the Bloom-filtered read returns."""
    acc = _state(spark, keys, rng)
    frames = [f for r in acc.runs for f in r.frames()]
    asked = acc.keys_table((k,) for k in rng.sample(range(keys), min(asked_n, keys)))
    assert asked is not None
    real_bloom = acc._bloom
    assert real_bloom(asked) is not None, "this Spark did not take the Bloom filter"
    rows = acc._fetch_job(frames, asked).num_rows
    ms_all = _median_ms(lambda: acc._fetch_job(frames, None), repeat)
    ms_bloom = _median_ms(lambda: acc._fetch_job(frames, asked), repeat)
    acc._bloom = lambda keys: None  # type: ignore[method-assign]
    ms_semi = _median_ms(lambda: acc._fetch_job(frames, asked), repeat)
    acc._bloom = real_bloom  # type: ignore[method-assign]
    acc.clear()
    return ms_all, ms_semi, ms_bloom, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--asked", type=int, default=8_600)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    spark = spark_session("local[2]")
    rng = random.Random(1)
    print(f"lookup of {args.asked:,} int64 keys in 3 cached runs (local[2]), median ms")
    print(f"  {'entries':>9} {'all':>8} {'semi':>8} {'bloom':>8}  entries returned (bloom)")
    for keys in args.keys:
        ms_all, ms_semi, ms_bloom, rows = _measure(spark, keys, args.asked, args.repeat, rng)
        print(f"  {3 * keys:>9,} {ms_all:>8.1f} {ms_semi:>8.1f} {ms_bloom:>8.1f}  {rows:,}")


if __name__ == "__main__":
    main()
