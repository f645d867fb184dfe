"""CLI start-up: how long each command takes to answer, against a 0.3 s target.

    python bench/cli.py [--runs 5]

Each command runs ``--runs`` times as a fresh process (the ``tidegate``
script beside this Python, else ``python -m tidegate``); the median wall time
is printed beside the target. The commands answer without a controller:
``status`` and ``peek`` on a data directory where none runs (their answer is
the error saying how to start one, exit status 3), the others print help.
``sim --help`` is shown for information: it builds the simulator's parser,
which imports the simulator.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3


def _tidegate() -> list[str]:
    script = Path(sys.executable).with_name("tidegate")
    return [str(script)] if os.access(script, os.X_OK) else [sys.executable, "-m", "tidegate"]


def time_command(argv: list[str], runs: int) -> tuple[float, int]:
    """The median wall time of ``runs`` runs of ``argv``, and its exit status."""
    times = []
    code = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        code = done.returncode
    return statistics.median(times), code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    base = _tidegate()
    with tempfile.TemporaryDirectory(prefix="tidegate-cli-") as nothing:
        commands: list[tuple[str, list[str], bool]] = [
            ("tidegate --help", ["--help"], True),
            ("tidegate status (no controller)", ["status", "--data-dir", nothing], True),
            ("tidegate peek (no controller)", ["peek", "t", "--data-dir", nothing], True),
            ("tidegate sql --help", ["sql", "--help"], True),
            (
                "tidegate sql -c (no controller)",
                ["sql", "-c", "SELECT 1", "--data-dir", nothing],
                True,
            ),
            ("tidegate sim --help", ["sim", "--help"], False),
        ]
        print(f"CLI start-up, median of {args.runs} runs ({' '.join(base)})")
        worst = 0.0
        for label, argv, targeted in commands:
            median, code = time_command([*base, *argv], args.runs)
            if targeted:
                worst = max(worst, median)
            mark = f"target <= {TARGET_S:g} s" if targeted else "(information)"
            ok = "" if not targeted else ("  ok" if median <= TARGET_S else "  OVER")
            print(f"  {label:34s} {median:6.3f} s  exit {code}   {mark}{ok}", flush=True)
    print(f"worst targeted command: {worst:.3f} s (target {TARGET_S:g} s)")


if __name__ == "__main__":
    main()
