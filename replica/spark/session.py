"""A SparkSession configured for a replica on a small machine.

The defaults that matter (measured on 2 cores): ``spark.sql.shuffle.partitions``
sized to the cores instead of 200, no UI, Arrow transfers on, quiet logs, and
every local directory (shuffle spill, warehouse, Derby metastore) under one
temporary directory, so nothing is written to the working directory.

The JVMs run with the client JIT only (``-XX:TieredStopAtLevel=1``): a replica
runs many small jobs, each planning new queries whose generated classes the
optimising JIT kept compiling -- measured 630 ms of JIT time per executor step
(more CPU than the step's jobs), 65 ms with C1 only, and the step's JVM CPU fell
from 720 to 500 ms. Long scans lose some peak speed; ``java_options=""`` restores
the default.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping

from pyspark.sql import SparkSession

__all__ = ["JAVA_OPTIONS", "spark_session"]

JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Extra options of the driver and executor JVMs (see the module docstring)."""


def _cores(master: str) -> int:
    """The local cores ``master`` runs on (``local``, ``local[N]``, ``local[*]``); the
    driver's core count for a cluster master, whose size is not known here."""
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master)
    if m is None or m.group(1) == "*":
        return os.cpu_count() or 2
    return max(int(m.group(1)), 1)


def spark_session(
    master: str = "local[2]",
    *,
    app_name: str = "tidegate-replica",
    shuffle_partitions: int | None = None,
    java_options: str = JAVA_OPTIONS,
    conf: Mapping[str, str] | None = None,
    ui: bool = False,
) -> SparkSession:
    """Get or create the process's SparkSession on ``master`` with small-machine settings.

    ``shuffle_partitions`` defaults to the number of cores (see :func:`_cores`);
    ``java_options`` go to the driver's and executors' JVMs. Spark allows one active
    session per process: if one exists already it is returned, with only the shuffle
    partitions updated. ``conf`` sets Spark properties over these defaults (the
    replica's ``--spark-conf``); ``ui`` serves Spark's web UI (off by default).
    """
    parts = shuffle_partitions or max(_cores(master), 1)
    active = SparkSession.getActiveSession()
    if active is not None:
        active.conf.set("spark.sql.shuffle.partitions", str(parts))
        return active
    scratch = tempfile.mkdtemp(prefix="tidegate-spark-")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(parts))
        .config("spark.default.parallelism", str(parts))
        # small steps: adaptive re-planning costs more than it saves
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        # naive datetimes are the plan IR's timestamps
        .config("spark.sql.timestampType", "TIMESTAMP_NTZ")
        .config("spark.local.dir", os.path.join(scratch, "local"))
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dderby.system.home={scratch}/derby {java_options}".strip(),
        )
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.python.worker.reuse", "true")
        # cached runs are all on the one executor: never wait for a "better" locality
        .config("spark.locality.wait", "0")
        # lookups (a step's critical path) take free task slots ahead of background merges
        .config("spark.scheduler.mode", "FAIR")
    )
    if ui:
        builder = builder.config("spark.ui.enabled", "true")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
