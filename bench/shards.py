"""Shard store throughput on the local defaults (file blob + SQLite consensus).

    python bench/shards.py [--rows 1000000] [--batch 100000] [--repeat 3]

Appends ROWS updates of a 4-column schema in batches of BATCH, snapshots all of
it, and prints updates/s next to a raw pyarrow.parquet write and read of the
same data in the same run (targets: >= 50% of raw for both). Also prints SQLite
compare-and-set ops/s (target >= 2,000), the batch count of a shard after
1,000 small appends before and after compaction, with snapshot times, and what
an append of 16 rows costs with automatic maintenance (time, CPU, consensus and
blob writes per append).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidegate.runtime.storage import (
    CompactionPolicy,
    ShardStore,
    SqliteConsensus,
    VersionedData,
    default_urls,
)
from tidegate.runtime.storage.arrow_batches import PARQUET_COMPRESSION
from tidegate.runtime.storage.urls import open_blob, open_consensus

SCHEMA = pa.schema(
    [("id", pa.int64()), ("k", pa.int64()), ("name", pa.string()), ("v", pa.float64())]
)


def make_batches(rows: int, batch: int) -> list[pa.Table]:
    rng = random.Random(0)
    out = []
    for b in range(rows // batch):
        lo = b * batch
        out.append(
            pa.table(
                {
                    "id": pa.array(range(lo, lo + batch), pa.int64()),
                    "k": pa.array([rng.randrange(1000) for _ in range(batch)], pa.int64()),
                    "name": pa.array([f"name-{i % 5000}" for i in range(lo, lo + batch)]),
                    "v": pa.array([rng.random() for _ in range(batch)], pa.float64()),
                    "__time": pa.array([b] * batch, pa.int64()),
                    "__diff": pa.array([1] * batch, pa.int64()),
                }
            )
        )
    return out


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f} updates/s ({seconds:.3f} s)"


def raw_parquet(batches: list[pa.Table], root: Path) -> tuple[float, float]:
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    for i, t in enumerate(batches):
        pq.write_table(t, root / f"{i}.parquet", compression=PARQUET_COMPRESSION)
    t1 = time.perf_counter()
    n = sum(pq.read_table(root / f"{i}.parquet").num_rows for i in range(len(batches)))
    t2 = time.perf_counter()
    assert n == sum(t.num_rows for t in batches)
    return t1 - t0, t2 - t1


def store_rates(batches: list[pa.Table], root: Path) -> tuple[float, float]:
    root.mkdir(parents=True)
    store = ShardStore.open(*default_urls(root), auto_compact=False)
    store.create_shard("bench", SCHEMA)
    t0 = time.perf_counter()
    for i, t in enumerate(batches):
        store.compare_and_append("bench", t, i, i + 1, f"tok-{i}")
    t1 = time.perf_counter()
    snap = store.snapshot("bench", len(batches) - 1)
    t2 = time.perf_counter()
    assert snap.num_rows == sum(t.num_rows for t in batches)
    return t1 - t0, t2 - t1


def fsync_rate(root: Path, ops: int = 500) -> float:
    fd = os.open(root / "fsync.bin", os.O_WRONLY | os.O_CREAT)
    t0 = time.perf_counter()
    for _ in range(ops):
        os.write(fd, b"x" * 100)
        os.fsync(fd)
    os.close(fd)
    return ops / (time.perf_counter() - t0)


def cas_rate(root: Path, synchronous: str, ops: int = 2000) -> float:
    c = SqliteConsensus(root / f"cas-{synchronous}.db", synchronous=synchronous)
    payload = b"x" * 200
    c.compare_and_set("k", None, VersionedData(0, payload))
    t0 = time.perf_counter()
    for s in range(ops):
        if not c.compare_and_set("k", s, VersionedData(s + 1, payload)):
            raise RuntimeError("unexpected CAS mismatch")
    return ops / (time.perf_counter() - t0)


def small_appends(root: Path, n: int = 1000) -> None:
    store = ShardStore.open(*default_urls(root), auto_compact=False)
    store.create_shard("small", SCHEMA)
    t0 = time.perf_counter()
    for i in range(n):
        rows = [((i * 10 + j, j, f"n{j}", 0.5), i, 1) for j in range(10)]
        store.compare_and_append("small", rows, i, i + 1)
    t1 = time.perf_counter()
    store.register_critical_reader("small", "bench")
    store.downgrade_since("small", "bench", n - 1)
    before = len(store.state("small").batches)
    t2 = time.perf_counter()
    snap_before = store.snapshot("small", n - 1)
    t3 = time.perf_counter()
    report = store.compact("small", CompactionPolicy(max_batches=1, small_len=100_000))
    t4 = time.perf_counter()
    snap_after = store.snapshot("small", n - 1)
    t5 = time.perf_counter()
    assert snap_after.sort_by("id").equals(snap_before.sort_by("id"))
    blobs = len(store.blob.list_keys("small/"))
    print(f"{n} small appends (10 updates each): {n / (t1 - t0):,.0f} appends/s")
    print(
        f"  batches before compaction: {before}, after: {report.batches_after} "
        f"({report.merges} merge(s), {t4 - t3:.3f} s); live blobs after GC: {blobs}"
    )
    print(
        f"  snapshot of {snap_after.num_rows} rows: {t3 - t2:.3f} s from {before} batches, "
        f"{t5 - t4:.3f} s from {report.batches_after} compacted batch(es)"
    )


class _Counted:
    """A backend that counts its writes and their bytes (the fsync'd operations)."""

    def __init__(self, inner: Any, write: str) -> None:
        self._inner, self._write = inner, write
        self.writes = self.bytes = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._write:
            return attr

        def counted(*args: Any) -> Any:
            self.writes += 1
            self.bytes += len(getattr(args[-1], "data", args[-1]))
            return attr(*args)

        return counted


def maintained_appends(root: Path, n: int = 1500, rows: int = 16) -> None:
    """Single-writer appends of ``rows`` rows each with automatic maintenance (the default
    policy, in the appending thread): what each append costs in time, CPU and writes."""
    blob_url, consensus_url = default_urls(root)
    blob = _Counted(open_blob(blob_url), "set")
    consensus = _Counted(open_consensus(consensus_url), "compare_and_set")
    store = ShardStore(blob, consensus, owns_backends=True)
    store.create_shard("m", SCHEMA)

    def run(first: int, count: int) -> list[float]:
        took = []
        for i in range(first, first + count):
            batch = [((i * rows + j, j, "n", 0.5), i, 1) for j in range(rows)]
            t0 = time.perf_counter()
            store.compare_and_append("m", batch, i, i + 1)
            took.append(time.perf_counter() - t0)
        return took

    run(0, 300)  # past the first merges
    for c in (blob, consensus):
        c.writes = c.bytes = 0
    cpu0 = time.process_time()
    took = run(300, n)
    cpu = time.process_time() - cpu0
    state = store.state("m")
    store.close()
    print(
        f"{n} appends of {rows} rows with automatic maintenance: "
        f"{n / sum(took):,.0f} appends/s, mean {statistics.mean(took) * 1e3:.2f} ms, "
        f"p50 {statistics.median(took) * 1e3:.2f} ms, CPU {cpu / n * 1e3:.2f} ms per append"
    )
    print(
        f"  per append: {consensus.writes / n:.2f} consensus writes "
        f"({consensus.bytes / max(1, consensus.writes) / 1024:.1f} KiB each), "
        f"{blob.writes / n:.2f} blob writes; now {len(state.batches)} batches, "
        f"{state.inline_bytes:,} inline bytes"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    batches = make_batches(args.rows, args.batch)
    n = args.rows
    with tempfile.TemporaryDirectory(prefix="tidegate-bench-") as d:
        root = Path(d)
        raws = [raw_parquet(batches, root / f"raw{i}") for i in range(args.repeat)]
        stores = [store_rates(batches, root / f"store{i}") for i in range(args.repeat)]
        raw_w, raw_r = min(w for w, _ in raws), min(r for _, r in raws)
        st_w, st_r = min(w for w, _ in stores), min(r for _, r in stores)
        print(
            f"{n:,} updates, 4 columns, batches of {args.batch:,}; best of {args.repeat} runs "
            f"(pid {os.getpid()})"
        )
        print(f"raw parquet write:    {rate(n, raw_w)}")
        print(f"shard append:         {rate(n, st_w)}  = {raw_w / st_w:.0%} of raw (target >= 50%)")
        print(f"raw parquet read:     {rate(n, raw_r)}")
        print(f"shard snapshot:       {rate(n, st_r)}  = {raw_r / st_r:.0%} of raw (target >= 50%)")
        print(
            f"disk fsync:           {fsync_rate(root):>12,.0f} fsyncs/s (the bound for durable commits)"
        )
        print(
            f"sqlite compare-and-set, synchronous=FULL (default): {cas_rate(root, 'FULL'):,.0f} ops/s (target >= 2,000)"
        )
        print(
            f"sqlite compare-and-set, synchronous=NORMAL:         {cas_rate(root, 'NORMAL'):,.0f} ops/s"
        )
        small_appends(root / "small")
        maintained_appends(root / "maintained")


if __name__ == "__main__":
    main()
