"""Soak: the whole runtime under SIGKILL -- controller and replicas, appends and peeks.

    python bench/soak.py [--kills 200] [--seed 7] [--keep DIR]

A controller (``bench/_soak_child.py``: an ``Environment`` with two managed
replicas, a table, an index and a materialized view) appends single rows and
peeks its own writes back, while this process SIGKILLs, at random moments, the
controller (then restarts it on the same data directory) or one of its replica
processes (the orchestrator restarts it). It checks, at every restart and at
the end:

- every acknowledged append is in the table exactly once (none lost, none
  doubled), and the only unacknowledged rows there are appends in flight at a
  controller kill;
- the materialized view (count and sum over the table) agrees with the table
  at the same time;
- every fresh peek the controller made saw its own acknowledged appends (the
  controller checks, and reports a violation).

Prints one line per incarnation and a summary; exits 1 on the first violation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("_soak_child.py")
ID_STRIDE = 1_000_000  # incarnation k appends ids k * ID_STRIDE, k * ID_STRIDE + 1, ...


class SoakFailed(Exception):
    """An invariant broke; the message says which and where the logs are."""


class Incarnation:
    """One controller process and the JSON lines it has printed."""

    def __init__(self, data_dir: Path, number: int, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(data_dir), str(number * ID_STRIDE)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def line(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        text = self.proc.stdout.readline() if ready else ""
        return json.loads(text) if text else None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.log.close()


def replica_pids(data_dir: Path) -> list[int]:
    pids = []
    for f in (data_dir / "replicas").glob("*.pid"):
        try:
            pids.append(int(f.read_text()))
        except (OSError, ValueError):
            continue  # being rewritten by a restart
    return pids


def check_ready(ev: dict[str, Any], acked: set[int], where: str) -> int:
    """Check a restarted controller's view of the data; the number of rows it holds."""
    rows = ev["rows"]
    have = set(rows)
    if len(have) != len(rows):
        dup = sorted(r for r in have if rows.count(r) > 1)[:5]
        raise SoakFailed(f"{where}: rows stored twice: {dup}")
    if lost := acked - have:
        raise SoakFailed(
            f"{where}: acknowledged rows lost: {sorted(lost)[:5]} ({len(lost)} in all)"
        )
    for r in have - acked:  # durable but unacknowledged: only the append in flight at a kill
        mine = [a for a in acked if a // ID_STRIDE == r // ID_STRIDE]
        if r != max(mine, default=r // ID_STRIDE * ID_STRIDE - 1) + 1:
            raise SoakFailed(f"{where}: row {r} was never appended by a live controller")
    expected_totals = [[len(rows), sum(r * 3 for r in rows)]] if rows else []
    if ev["totals"] != expected_totals:
        raise SoakFailed(
            f"{where}: the view says {ev['totals']} at {ev['at']}, the table {expected_totals}"
        )
    return len(rows)


def soak(data_dir: Path, kills: int, rng: random.Random) -> None:
    acked: set[int] = set()
    done = 0
    number = 0
    t0 = time.perf_counter()
    while True:
        number += 1
        log = data_dir.parent / f"controller-{number}.log"
        inc = Incarnation(data_dir, number, log)
        try:
            started = time.perf_counter()
            ev = inc.line(240)
            if not ev or not ev.get("ready"):
                raise SoakFailed(f"controller {number} did not start ({ev}); see {log}")
            held = check_ready(ev, acked, f"restart {number}")
            opened = time.perf_counter() - started
            if done >= kills:
                print(f"final check: {held} rows, {len(acked)} acknowledged, view agrees")
                return
            victims = []
            while done < kills:
                deadline = time.monotonic() + rng.uniform(0.3, 2.5)
                while (left := deadline - time.monotonic()) > 0:
                    ev = inc.line(left)
                    if ev is None and inc.proc.poll() is not None:
                        raise SoakFailed(
                            f"controller {number} exited {inc.proc.returncode}; see {log}"
                        )
                    if ev and "violation" in ev:
                        raise SoakFailed(f"controller {number}: {ev['violation']}; see {log}")
                    if ev and "ack" in ev:
                        acked.add(ev["id"])
                pids = replica_pids(data_dir)
                done += 1
                if pids and rng.random() < 0.5:
                    pid = rng.choice(pids)
                    try:
                        os.kill(pid, signal.SIGKILL)
                        victims.append("replica")
                    except ProcessLookupError:
                        victims.append("replica (already gone)")
                    continue
                victims.append("controller")
                break
        finally:
            inc.kill()
        while (ev := inc.line(0)) is not None:  # acknowledged just before the kill
            if "ack" in ev:
                acked.add(ev["id"])
        print(
            f"incarnation {number:3}: opened in {opened:5.1f} s holding {held:6} rows; "
            f"kills {', '.join(victims)}; {done}/{kills} kills, {time.perf_counter() - t0:6.0f} s",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="tidegate-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        soak(work / "data", args.kills, random.Random(args.seed))
    except SoakFailed as e:
        print(f"runtime soak FAILED after {time.perf_counter() - t0:.0f} s: {e}")
        print(f"(data and logs kept in {work})")
        sys.exit(1)
    print(
        f"runtime soak: {args.kills} SIGKILLs (seed {args.seed}) in "
        f"{time.perf_counter() - t0:.0f} s: passed, 0 acknowledged appends lost"
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
