"""Spark for the tests: the session every in-process Spark test shares, and a standalone cluster.

A pytest plugin (``tests/conftest.py`` loads it), so its fixtures are there for every test
package: ``spark`` -- the one ``local[2]`` SparkSession of the test session -- and
``standalone_cluster`` -- a Spark standalone master and worker on loopback, started by
``tidegate spark``'s functions from the pyspark package, yielding the master URL. ``LOOPBACK_ENV`` is the environment that keeps a
Spark process on 127.0.0.1 with this interpreter as its Python. pyspark is imported only
when a fixture is used.
"""

from __future__ import annotations

import importlib.util
import sys
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
    from pyspark.errors import PySparkRuntimeError

    from tidegate.replica.spark import spark_session

    try:
        session = spark_session("local[2]", shuffle_partitions=2)
    except PySparkRuntimeError:
        # Launching the JVM forks this process; a worker that earlier tests left with gRPC
        # threads running saw the gateway exit before it answered (once in a full run, on a
        # loaded machine), which failed every Spark test of that worker. One more launch.
        session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


# -- a standalone cluster on loopback ---------------------------------------------------------


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """A master and one worker (2 cores, 1 GiB) on 127.0.0.1, started as ``tidegate spark
    start-master`` and ``start-worker`` start them; yields the master URL.

    Their logs are in ``tmp_path / "spark"``, and the executors' work directories (one
    ``app-*`` directory per application that ran on the cluster) in ``tmp_path / "spark" / "work"``.
    """
    from tidegate.commands.spark import start_master, start_worker, stop

    spark_dir = tmp_path / "spark"
    try:
        master = start_master(spark_dir, port=0, webui_port=0)
        start_worker(spark_dir, master.url, cores=2, memory="1g")
        yield master.url
    finally:
        stop(spark_dir)
