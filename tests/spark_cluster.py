"""Spark for the tests: the session every in-process Spark test shares, and a standalone cluster.

A pytest plugin (``tests/conftest.py`` loads it), so its fixtures are there for every test
package: ``spark`` -- the one ``local[2]`` SparkSession of the test session -- and
``standalone_cluster`` -- a Spark standalone master and worker started on loopback from the
pyspark package, yielding the master URL. ``LOOPBACK_ENV`` is the environment that keeps a
Spark process on 127.0.0.1 with this interpreter as its Python. pyspark is imported only
when a fixture is used.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LOOPBACK_ENV", "SPARK_HOME", "spark", "standalone_cluster"]


def _spark_home() -> str:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return str(next(iter(spec.submodule_search_locations)))


SPARK_HOME = _spark_home()
LOOPBACK_ENV = {
    "SPARK_HOME": SPARK_HOME,
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One SparkSession (local[2], 2 shuffle partitions) shared by every Spark test of the session."""
    from tidegate.replica.spark import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


# -- a standalone cluster on loopback ---------------------------------------------------------


def _daemon(log: Path, cls: str, *args: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **LOOPBACK_ENV,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_WORKER_DIR": str(log.parent / "work"),
        "SPARK_LOG_DIR": str(log.parent),
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_in_log(
    log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float
) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text(errors="replace"))
        if m is not None:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """A master and one worker (2 cores, 1 GiB) on 127.0.0.1; yields the master URL.

    Their logs are in ``tmp_path / "spark"``, and the executors' work directories (one
    ``app-*`` directory per application that ran on the cluster) in ``tmp_path / "spark" / "work"``.
    """
    logs = tmp_path / "spark"
    logs.mkdir()
    master = _daemon(
        logs / "master.out",
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
    )
    worker = None
    try:
        m = _wait_in_log(
            logs / "master.out", r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master, 120
        )
        url = m.group(1)
        worker = _daemon(
            logs / "worker.out",
            "org.apache.spark.deploy.worker.Worker",
            url,
            *("--host", "127.0.0.1", "--webui-port", "0", "--cores", "2", "--memory", "1g"),
        )
        _wait_in_log(logs / "worker.out", r"Successfully registered with master", worker, 120)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
