"""Several real processes on one shard (file blob + SQLite consensus): racing appends,
concurrent readers, a writer killed with SIGKILL at random points, and replicas of one
dataflow writing the same output with truncating appends.

``TIDEGATE_SHARD_KILLS`` sets the number of kills (default 8; ``bench/shards_crash.py``
runs 50).
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tidegate.runtime.storage import ShardStore, default_urls
from tidegate.spec.shard import snapshot_updates

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

WORKER = str(Path(__file__).with_name("shard_proc_worker.py"))
SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int64())])


def start(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, *map(str, args)], stdout=subprocess.PIPE, text=True
    )


def ready(p: subprocess.Popen[str]) -> subprocess.Popen[str]:
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", f"worker failed to start: {line!r}"
    return p


def spawn(*args: object) -> subprocess.Popen[str]:
    return ready(start(*args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ShardStore.open(*default_urls(tmp_path)).create_shard("s1", SCHEMA)
    return tmp_path


def test_racing_appends_exactly_one_wins(root: Path):
    store = ShardStore.open(*default_urls(root))
    rounds = 10
    go = root / "go"
    procs = [ready(p) for p in [start("race", root, "s1", rounds, go) for _ in range(2)]]
    for r in range(rounds):
        Path(f"{go}{r}").touch()
        outs = [p.stdout.readline().split() for p in procs if p.stdout]
        assert sorted(o[0] for o in outs) == ["mismatch", "ok"], outs
        assert all(int(o[1]) == r + 1 for o in outs)  # the loser sees the winner's upper
        assert len(store.snapshot_rows("s1", r)) == r + 1
    for p in procs:
        p.communicate(timeout=60)
        assert p.returncode == 0


def test_replicas_writing_one_output_store_each_update_exactly_once(root: Path):
    spec = importlib.util.spec_from_file_location("shard_proc_worker", WORKER)
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    horizon = 60
    procs = [spawn("replica", root, "s1", horizon, seed) for seed in range(3)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs == [["ok", str(horizon)]] * 3, outs
    store = ShardStore.open(*default_urls(root))
    updates = worker.definite(horizon)
    assert store.state("s1").length == len(updates)  # none twice
    for at in range(horizon):
        assert store.snapshot_rows("s1", at) == snapshot_updates(updates, at)


def test_readers_never_see_partial_appends(root: Path):
    store = ShardStore.open(*default_urls(root), auto_compact=False)
    store.compare_and_append("s1", [((0, j), 0, 1) for j in range(200)], 0, 1)
    readers = [ready(p) for p in [start("reader", root, "s1", 200, 2.0) for _ in range(2)]]
    ack = root / "acks"
    w = spawn("writer", root, "s1", 200, ack)
    outs = [r.communicate(timeout=60)[0].split() for r in readers]
    w.kill()
    w.wait()
    assert [o[0] for o in outs] == ["ok", "ok"], outs
    assert all(int(o[1]) > 0 for o in outs)


def test_writer_killed_at_random_points(root: Path):
    kills = int(os.environ.get("TIDEGATE_SHARD_KILLS", "8"))
    rng = random.Random(int(os.environ.get("TIDEGATE_SHARD_SEED", "7")))
    ack = root / "acks"
    rows = 100
    for _ in range(kills):
        w = spawn("writer", root, "s1", rows, ack)
        time.sleep(rng.uniform(0.0, 0.3))
        w.send_signal(signal.SIGKILL)
        w.wait()
    acked = [int(x) for x in ack.read_text().split()] if ack.exists() else []
    assert len(acked) == len(set(acked))
    store = ShardStore.open(*default_urls(root))
    (upper,) = store.upper("s1").elements
    counts: dict[int, int] = {}
    for (a, _j), _t, d in store.snapshot_rows("s1", upper - 1) if upper else []:
        counts[a] = counts.get(a, 0) + d
    assert set(acked) <= set(counts), "an acknowledged append is missing"
    assert set(counts) == set(range(upper)), "a gap in the appended sequence"
    assert all(c == rows for c in counts.values()), "an append is present partially or twice"
    assert len(acked) > 0
    # Orphans from the kills are collectable, and collecting them loses nothing.
    orphans = store.collect_garbage("s1", min_age_s=0)
    print(
        f"{kills} kills: {upper} appends committed, {len(acked)} acknowledged, "
        f"{orphans} orphan blob(s) collected"
    )
    assert len(store.snapshot_rows("s1", upper - 1)) == rows * upper


_OPEN_AT_ONCE = """
import multiprocessing as mp
import sys

from tidegate.runtime.storage import SqliteConsensus


def worker(path, barrier, results):
    barrier.wait()
    try:
        SqliteConsensus(path).close()
        results.put("ok")
    except Exception as e:
        results.put(repr(e))


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    bad = []
    for trial in range(int(sys.argv[2])):
        path = f"{sys.argv[1]}/consensus-{trial}.db"
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=worker, args=(path, barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        bad += [r for r in (results.get() for _ in procs) if r != "ok"]
    print(bad)
"""


def test_processes_opening_a_new_consensus_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Six processes open one new SQLite consensus file at the same instant, 25 times over.

    The losers of the race to switch a new file to WAL got "database is locked"
    at once (3 trials in 20 before the fix): a replica started together with its
    siblings on a fresh data directory exited at startup (found by ``tidegate demo``).
    """
    script = tmp_path / "open_at_once.py"
    script.write_text(_OPEN_AT_ONCE)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "25"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
