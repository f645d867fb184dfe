"""``tidegate spark``: a standalone master and worker started and stopped from the CLI, and
``tidegate up --spark-master URL --spark-ui`` on it: each replica's Spark application named
after the environment and the replica in the master's UI, each one's own UI in ``status``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.processes, pytest.mark.slow, pytest.mark.timeout(600)]

TIDEGATE = [sys.executable, "-m", "tidegate"]


def _run(*argv: str, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDEGATE, *argv], capture_output=True, text=True, timeout=timeout)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())


def _until(what: str, check: Callable[[], Any], timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return got


def _spark_daemons(spark_dir: Path) -> list[int]:
    """Pids of the Spark daemons whose log directory is ``spark_dir``, by their command lines."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.deploy." in cmdline and str(spark_dir).encode() in environ:
            out.append(int(proc.name))
    return out


def test_a_local_standalone_cluster_runs_up_s_replicas_named_apart(tmp_path: Path) -> None:
    data = tmp_path / "env"
    d = ["--data-dir", str(data)]
    spark_dir = data / "spark"
    master = _run("spark", "start-master", "--port", "0", "--webui-port", "0", "--json", *d)
    try:
        assert master.returncode == 0, master.stderr
        [m] = json.loads(master.stdout)
        assert re.fullmatch(r"spark://127\.0\.0\.1:\d+", m["url"])
        assert m["web_ui"].startswith("http://127.0.0.1:")
        assert json.loads((spark_dir / "master.json").read_text())["pid"] == m["pid"]
        worker = _run("spark", "start-worker", "--cores", "2", "--memory", "1g", *d)
        assert worker.returncode == 0, worker.stderr
        assert f"started Spark worker worker-1 of {m['url']}" in worker.stdout
        status = _run("spark", "status", "--json", *d)
        assert [x["name"] for x in json.loads(status.stdout)] == ["master", "worker-1"]
        workers = json.loads(_get(m["web_ui"] + "/json/"))["workers"]
        assert [w["state"] for w in workers] == ["ALIVE"]

        up = subprocess.Popen(
            [*TIDEGATE, "up", *d, "--replicas", "2", "--spark-master", m["url"], "--spark-ui"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ready = _run("status", "--wait", "--timeout", "300", *d, timeout=360)
            assert ready.returncode == 0, ready.stdout + ready.stderr
            shown = json.loads(_run("status", "--json", *d).stdout)
            uis = {r["name"]: r["spark_ui"] for r in shown["replicas"] if r["role"] == "compute"}
            assert set(uis) == {"r1", "r2"}
            assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+", u) for u in uis.values()), uis
            assert len(set(uis.values())) == 2
            names = {"r1": "tidegate env r1", "r2": "tidegate env r2"}
            for name, url in uis.items():  # each UI is its own replica's application
                assert names[name] in _get(url + "/environment/")
            text = _run("status", *d).stdout
            assert f"Spark UI of replica r1: {uis['r1']}" in text

            def both_apps() -> set[str] | None:
                apps = json.loads(_get(m["web_ui"] + "/json/"))["activeapps"]
                got = {a["name"] for a in apps}
                return got if got == set(names.values()) else None

            assert _until("both applications in the master's UI", both_apps)
        finally:
            up.send_signal(signal.SIGTERM)
            assert up.wait(120) == 0, (up.stderr.read() if up.stderr else "")[-3000:]
    finally:
        stopped = _run("spark", "stop", *d)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped Spark worker worker-1" in stopped.stdout
    assert "stopped Spark master" in stopped.stdout
    assert _spark_daemons(spark_dir) == []
    again = _run("spark", "stop", *d)
    assert again.returncode == 0 and "no Spark daemon recorded" in again.stdout
    missing = _run("spark", "start-worker", "--data-dir", str(tmp_path / "nothing"))
    assert missing.returncode == 1 and "no master recorded" in missing.stderr
    assert os.path.exists(spark_dir / "master.log")
