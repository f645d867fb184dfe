"""Churn benchmark: memory under constant live data, with the default compaction.

    python bench/churn.py [--minutes 10] [--executor python|spark] [--keys 1000]

Appends and retractions over a constant live set: ``--keys`` rows exist at
all times; every round retracts a random tenth and inserts them again with new
values (one append, one timestamp), as fast as the environment takes them.
An index and a keyed aggregate view are maintained. No object sets a read
policy: everything compacts by the default (one second of history, as
Materialize keeps). Every minute it prints the controller's RSS (this
process), the managed replica's RSS (its process), the rounds so far and the
live rows (peeked). Without compaction, history grows without bound; the
target is flat within 10 % from the second minute to the last.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import anyio

from tidegate.dsl import Schema, count, sum_
from tidegate.runtime import Environment


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of process ``pid`` in MB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(minutes: float, executor: str, keys: int) -> list[tuple[float, float]]:
    schema = Schema.of(("k", "int64", False), ("v", "int64", False))
    rng = random.Random(7)
    values = {k: rng.randrange(1_000_000) for k in range(keys)}
    samples: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="tidegate-churn-") as data:
        async with Environment.open(data, replicas=1, executor=executor, tick_ms=100) as env:
            await env.wait_connected(timeout_s=120)
            await env.create_table("t", schema)
            idx = await env.create_index(env.table("t"), ["k"], name="by_k")
            buckets = await env.create_index(
                env.table("t").group_by("k").agg(count(), sum_("v")), ["k"], name="per_key"
            )
            await env.append("t", list(values.items()))
            assert env.orchestrator is not None
            pid = env.orchestrator.status()["r1"].pid
            assert pid is not None
            start = time.monotonic()
            rounds = 0
            next_report = 60.0
            print(
                f"{'minute':>6} {'controller MB':>14} {'replica MB':>11} {'rounds':>7} {'live rows':>10}"
            )
            while (elapsed := time.monotonic() - start) < minutes * 60:
                changed = rng.sample(range(keys), max(1, keys // 10))
                batch: list[tuple[tuple[int, int], int]] = []
                for k in changed:
                    batch.append(((k, values[k]), -1))
                    values[k] = rng.randrange(1_000_000)
                    batch.append(((k, values[k]), 1))
                await env.append("t", batch)
                rounds += 1
                if elapsed >= next_report:
                    live = len(await env.peek(idx))
                    assert live == keys and len(await env.peek(buckets)) == keys
                    c, r = rss_mb(), rss_mb(pid)
                    samples.append((c, r))
                    print(
                        f"{len(samples):>6} {c:>14.1f} {r:>11.1f} {rounds:>7} {live:>10}",
                        flush=True,
                    )
                    next_report += 60.0
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--executor", choices=("python", "spark"), default="python")
    parser.add_argument("--keys", type=int, default=1_000)
    args = parser.parse_args()
    samples = anyio.run(run, args.minutes, args.executor, args.keys)
    if len(samples) >= 3:
        for who, i in (("controller", 0), ("replica", 1)):
            base, last = samples[1][i], samples[-1][i]
            growth = (last - base) / base * 100
            verdict = "flat" if abs(growth) <= 10 else "GROWS"
            print(
                f"{who}: {base:.1f} -> {last:.1f} MB from minute 2 to {len(samples)}: "
                f"{growth:+.1f} % ({verdict}; target within 10 %)"
            )


if __name__ == "__main__":
    main()
