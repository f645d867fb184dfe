"""Replicas following shards over PostgreSQL consensus: polled, or woken by notifications.

    python bench/follow.py [--followers 8] [--appends 200] [--idle-s 3] [--url URL]

``FOLLOWERS`` shard followers (a replica's ``ReadSource``, with the replica service's
default intervals: polling every 5 ms, backing off to 50 ms, or, where the store can say when
a shard changed, woken by PostgreSQL's ``LISTEN``/``NOTIFY`` and polling every second) follow
one shard each through a store of their own (another connection, as another process's),
while a writer's store appends. Each way, with the same workload:

* **idle**: consensus reads per follower per second while nothing is written;
* **latency**: from a writer's ``compare_and_append`` returning to the follower delivering
  the upper it set (0 if it came first) (median, p99), over ``APPENDS`` appends to the shards in turn, 10-40 ms apart;
* the CPU time of this process (followers and writer) over both phases, and the
  consensus reads per append.

"Polled" hides the Consensus' ``watch`` from the store, so the followers poll as they do over
SQLite. Starts a throw-away cluster (``tests/postgres_cluster.py``) unless ``--url`` names one.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from tidegate.replica._follow import ShardFollower
from tidegate.replica.host import ThreadHost
from tidegate.runtime.storage import FileBlob, ShardStore, open_consensus
from tidegate.spec.frontier import Antichain, Update

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])


class _Counted:
    """A Consensus that counts its reads, and hides ``watch`` unless ``watching``."""

    def __init__(self, inner: Any, watching: bool) -> None:
        self.inner = inner
        self.watching = watching
        self.reads = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name == "watch" and not self.watching:
            raise AttributeError(name)
        return getattr(self.inner, name)

    def head(self, key: str) -> Any:
        with self._lock:
            self.reads += 1
        return self.inner.head(key)


def run(url: str, followers: int, appends: int, idle_s: float, watching: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        blob = Path(tmp) / "blob"
        writer = ShardStore(FileBlob(blob), open_consensus(url), owns_backends=True)
        counted = _Counted(open_consensus(url), watching)
        reader = ShardStore(FileBlob(blob), counted)  # type: ignore[arg-type]
        shards = [f"s{i}-{random.getrandbits(32):x}" for i in range(followers)]
        delivered: dict[tuple[str, int], float] = {}
        cond = threading.Condition()

        def on_delivery(f: ShardFollower, _rows: list[Update], upper: Antichain) -> None:
            now = time.perf_counter()
            with cond:
                for t in upper.elements:
                    delivered[(f.shard, t)] = now
                cond.notify_all()

        for s in shards:
            writer.create_shard(s, SCHEMA)
            writer.compare_and_append(s, [((0,), 0, 1)], Antichain([0]), Antichain([1]))
        host = ThreadHost()
        running = [
            ShardFollower(
                host=host,
                store=reader,
                shard=s,
                as_of=0,
                lease_ms=15 * 60 * 1000,
                poll_s=0.005,
                poll_max_s=0.05,
                watch_poll_s=1.0,
                log=logging.getLogger("bench.follow"),
                on_delivery=on_delivery,
                on_unreadable=lambda f, what: None,
            )
            for s in shards
        ]
        cpu = time.process_time()
        for f in running:
            f.start()
        with cond:
            assert cond.wait_for(lambda: all((s, 1) in delivered for s in shards), 60)
        time.sleep(0.5)  # backed off (or waiting) by now
        reads = counted.reads
        time.sleep(idle_s)
        idle = (counted.reads - reads) / idle_s / followers
        reads = counted.reads
        latencies: list[float] = []
        append_s: list[float] = []
        uppers = dict.fromkeys(shards, 1)
        for i in range(appends):
            s = shards[i % followers]
            up = uppers[s]
            start = time.perf_counter()
            writer.compare_and_append(s, [((i,), up, 1)], Antichain([up]), Antichain([up + 1]))
            sent = time.perf_counter()
            append_s.append(sent - start)
            uppers[s] = up + 1
            want = (s, up + 1)
            with cond:
                assert cond.wait_for(lambda want=want: want in delivered, 60)
                # Its notification may wake the follower before the call returns.
                latencies.append(max(0.0, delivered[want] - sent))
            time.sleep(random.uniform(0.01, 0.04))
        per_append = (counted.reads - reads) / appends
        for f in running:
            f.stop()
        for f in running:
            if f.task is not None:
                f.task.join(5)
        cpu = time.process_time() - cpu
        writer.close()
        reader.close()
        counted.inner.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"  {'notified' if watching else 'polled':9s} idle: {idle:6.1f} consensus reads per "
        f"follower-s   latency: median {statistics.median(latencies) * 1000:6.1f} ms, "
        f"p99 {p99 * 1000:6.1f} ms (the append itself: median "
        f"{statistics.median(append_s) * 1000:5.1f} ms)   reads per append {per_append:5.1f}   CPU {cpu:5.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--followers", type=int, default=8)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--idle-s", type=float, default=3.0)
    ap.add_argument("--url", help="a PostgreSQL server (default: start one)")
    args = ap.parse_args()
    print(
        f"{args.followers} followers over PostgreSQL consensus, {args.appends} appends "
        f"(wall-clock latencies; CPU of this process beside them):"
    )

    def both(url: str) -> None:
        for watching in (False, True):
            run(url, args.followers, args.appends, args.idle_s, watching)

    if args.url:
        both(args.url)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_cluster import postgres_cluster

    with postgres_cluster() as url:
        both(url)


if __name__ == "__main__":
    main()
