"""Determinism: the same seed and scenario give a byte-identical trace, in any process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tidegate.sim import RunOptions, run_simulation, small

_SCRIPT = """
import dataclasses
from tidegate.sim import RunOptions, run_simulation, small
scenario = dataclasses.replace(small(), duration_ms=3_000, quiet_ms=2_000)
result = run_simulation(RunOptions(seed=11, scenario=scenario))
print(result.trace_digest, result.stats.events)
"""


def _digest_in_subprocess() -> str:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True, timeout=300
    )
    return done.stdout.strip()


@pytest.mark.processes
def test_two_processes_produce_the_same_trace_digest() -> None:
    first, second = _digest_in_subprocess(), _digest_in_subprocess()
    assert first == second
    digest, events = first.split()
    assert len(digest) == 64 and int(events) > 1_000


def test_a_kept_trace_hashes_to_the_digest_and_other_seeds_differ() -> None:
    import dataclasses
    import hashlib

    scenario = dataclasses.replace(small(), duration_ms=2_000, quiet_ms=2_000)
    a = run_simulation(RunOptions(seed=3, scenario=scenario, keep_trace=True))
    h = hashlib.sha256()
    assert a.trace_lines is not None
    for line in a.trace_lines:
        h.update(line.encode() + b"\n")
    assert h.hexdigest() == a.trace_digest
    assert a.trace_tail == a.trace_lines[-len(a.trace_tail) :]
    b = run_simulation(RunOptions(seed=4, scenario=scenario))
    assert b.trace_digest != a.trace_digest
