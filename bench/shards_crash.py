"""Soak: a shard writer killed with SIGKILL at random points, 50 times (the long crash test).

    python bench/shards_crash.py [--kills 50] [--seed 7]

Runs ``tests/runtime/storage/test_shard_processes.py::test_writer_killed_at_random_points``
with ``TIDEGATE_SHARD_KILLS`` set; it checks that every acknowledged append is
present exactly once and that no append is partially present. Prints the time taken.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/runtime/storage/test_shard_processes.py::test_writer_killed_at_random_points"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    env = dict(os.environ, TIDEGATE_SHARD_KILLS=str(args.kills), TIDEGATE_SHARD_SEED=str(args.seed))
    t0 = time.perf_counter()
    rc = subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", TEST],
        cwd=ROOT,
        env=env,
    )
    print(
        f"crash soak: {args.kills} SIGKILLs (seed {args.seed}) in {time.perf_counter() - t0:.1f} s: "
        f"{'passed' if rc == 0 else 'FAILED'}"
    )
    sys.exit(rc)


if __name__ == "__main__":
    main()
