"""Sources for real: ``tidegate up``, then ``tidegate create-source``; its managed storage replica
process (``tidegate replica --services storage``) is SIGKILLed through its pidfile and comes back,
and nothing it ingested is lost or doubled; SIGTERM stops it with the controller."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tidegate.commands.control import ControllerInfo
from tidegate.runtime.orchestrator import read_pidfile

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

TIDEGATE = [sys.executable, "-m", "tidegate"]


def run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDEGATE, *argv], capture_output=True, text=True, timeout=timeout)


def _json(*argv: str) -> Any:
    done = run(*argv, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _consistent(d: list[str]) -> int:
    """Peek the source and its progress at one time: rows 1..b for the binding b; returns b."""
    t = _json("peek", "ticks", *d)["time"]
    rows = sorted(tuple(r) for r in _json("peek", "ticks", "--at", str(t), *d)["rows"])
    progress = _json("peek", "ticks_progress", "--at", str(t), *d)["rows"]
    b = progress[0][0][0] if progress else 0
    assert rows == [([n], 1) for n in range(1, b + 1)]
    return int(b)


def _until(check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_source_from_the_cli_survives_a_sigkill_of_its_storage_replica(
    e2e: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    log = open(tmp_path / "up.log", "w")  # noqa: SIM115
    up = subprocess.Popen(
        [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    d = ["--data-dir", str(data)]
    try:
        _until(lambda: ControllerInfo.path(data).exists() or up.poll() is not None, 120)
        assert run("status", *d, "--wait", "--timeout", "120", timeout=150).returncode == 0
        made = run("create-source", "ticks", "--load-generator", "counter", "--tick-ms", "50", *d)
        assert made.returncode == 0, made.stderr
        for name in ("ticks", "ticks_progress"):  # readable long enough for several CLI calls
            assert run("read-policy", name, "--lag-ms", "120000", *d).returncode == 0
        assert run("status", *d, "--wait", "--timeout", "60", timeout=90).returncode == 0
        status = _json("status", *d)
        assert [r["name"] for r in status["replicas"]] == ["r1", "storage"]
        b = _until(lambda: _consistent(d) >= 3)

        pid = read_pidfile(data / "replicas" / "storage.pid")
        assert pid is not None and e2e.pid_alive(pid)
        os.kill(pid, signal.SIGKILL)

        def restarted() -> bool:
            [storage] = [r for r in _json("status", *d)["replicas"] if r["name"] == "storage"]
            return storage["restarts"] == 1 and storage["status"] == "connected"

        _until(restarted, 120)
        _until(lambda: _consistent(d) > b + 3)

        def committed_past_b() -> bool:
            [source] = _json("status", *d)["sources"]
            committed = (source["statistics"] or {}).get("offset_committed")
            return source["status"] == "running" and committed is not None and committed > b

        _until(committed_past_b)
        sql = run("sql", "-c", "SELECT count(*) FROM ticks", *d)
        assert sql.returncode == 0, sql.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(60)
        log.close()
    assert code == 0, (tmp_path / "up.log").read_text()[-2000:]
    pids = [read_pidfile(p) for p in (data / "replicas").glob("*.pid")]
    assert not any(p is not None and e2e.pid_alive(p) for p in pids)
