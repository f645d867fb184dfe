"""A separate process acting on a shard store, for the concurrency and crash tests.

    python shard_proc_worker.py race   ROOT SHARD ROUNDS GO_PREFIX
    python shard_proc_worker.py writer ROOT SHARD ROWS ACK_FILE
    python shard_proc_worker.py reader ROOT SHARD ROWS SECONDS
    python shard_proc_worker.py replica ROOT SHARD HORIZON SEED

``race``, in round ``r``, waits for the file GO_PREFIX``r``, appends at upper ``r``
and prints ``ok <upper>`` or ``mismatch <actual upper>``. ``writer`` appends batch after batch (time ``u``,
rows ``(u, j)`` for ``j < ROWS``) from the shard's upper and records each
acknowledged append in ACK_FILE. ``reader`` snapshots repeatedly and checks
every append it sees is whole; prints ``ok <snapshots>`` or ``partial ...``.
``replica`` writes the definite collection :func:`definite` up to HORIZON with
truncating appends in chunks of random width (from SEED), as one replica of a
dataflow writes its output, and prints ``ok <upper>``.
"""

from __future__ import annotations

import os
import random
import sys
import time

from tidegate.runtime.storage import CompactionPolicy, ShardStore, default_urls
from tidegate.runtime.storage.arrow_batches import encode_parquet, table_from_updates
from tidegate.spec.errors import SnapshotNotReady, UpperMismatch


def store(root: str, **kw: object) -> ShardStore:
    return ShardStore.open(*default_urls(root), **kw)


def race(root: str, shard: str, rounds: int, go: str) -> None:
    s = store(root, auto_compact=False)
    s.state(shard)  # warm up: connection open, modules loaded
    print("ready", flush=True)
    for r in range(rounds):
        while not os.path.exists(f"{go}{r}"):
            time.sleep(0.0002)
        try:
            upper = s.compare_and_append(shard, [((r, os.getpid()), r, 1)], r, r + 1)
            print("ok", upper.elements[0], flush=True)
        except UpperMismatch as e:
            print("mismatch", e.actual_upper.elements[0], flush=True)


def writer(root: str, shard: str, rows: int, ack: str) -> None:
    s = store(root, writer_id="crashy", policy=CompactionPolicy(max_batches=4, small_len=10_000))
    fd = os.open(ack, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    # Warm up (the kills are to strike appends, not a slow first import): the connection
    # open, the Parquet writer loaded, and pyarrow's conversion of Python rows, which
    # imports pandas when it is installed (a second here on a loaded machine).
    s.state(shard)
    encode_parquet(table_from_updates(shard, [((0, 0), 0, 1)], s.schema(shard)))
    print("ready", flush=True)
    while True:
        (u,) = s.upper(shard).elements
        s.compare_and_append(shard, [((u, j), u, 1) for j in range(rows)], u, u + 1, f"append-{u}")
        os.write(fd, f"{u}\n".encode())


def definite(horizon: int) -> list[tuple[tuple[int, int], int, int]]:
    """The updates every replica writes: ``t % 4`` rows at each time ``t``, diffs +-1."""
    return [((t, j), t, (-1) ** j) for t in range(horizon) for j in range(t % 4)]


def replica(root: str, shard: str, horizon: int, seed: int) -> None:
    s = store(root, auto_compact=False)
    rng = random.Random(seed)
    updates = definite(horizon)
    s.state(shard)
    print("ready", flush=True)
    lo = 0
    upper = s.upper(shard)
    while lo < horizon:
        hi = min(horizon, lo + rng.randint(1, 4))
        upper = s.append(shard, [u for u in updates if lo <= u[1] < hi], lo, hi)
        lo = hi
    print("ok", upper.elements[0], flush=True)


def reader(root: str, shard: str, rows: int, seconds: float) -> None:
    s = store(root, auto_compact=False)
    deadline = time.monotonic() + seconds
    n = 0
    print("ready", flush=True)
    while time.monotonic() < deadline:
        (u,) = s.upper(shard).elements
        try:
            snap = s.snapshot_rows(shard, u - 1)
        except SnapshotNotReady:
            continue
        counts: dict[int, int] = {}
        for (a, _j), _t, d in snap:
            counts[a] = counts.get(a, 0) + d
        if any(c != rows for c in counts.values()) or len(counts) < u:
            print("partial", u, counts, flush=True)
            return
        n += 1
    print("ok", n, flush=True)


if __name__ == "__main__":
    mode, root, shard, a, b = sys.argv[1:6]
    if mode == "race":
        race(root, shard, int(a), b)
    elif mode == "writer":
        writer(root, shard, int(a), b)
    elif mode == "replica":
        replica(root, shard, int(a), int(b))
    else:
        reader(root, shard, int(a), float(b))
