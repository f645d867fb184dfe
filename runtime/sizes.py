"""Replica sizes: what a size name allocates to a replica (the seed's "resource allocations").

A Materialize replica has a size (``SIZE = 'small'``): its CPU and memory. A
tidegate replica is one process whose dataflows run on Spark, so a size says
how many Spark cores it gets (``local[N]``, or a Spark master of its own:
``spark://...`` scales a large cluster out on a Spark standalone cluster of
several workers), how much memory Spark's executors and driver get, how many
arrangement entries an index keeps in the driver before keeping its history in
Spark (``state_memory_rows``), and the replica's memory limit (above it the
replica fails the dataflow holding the most state: :mod:`tidegate.replica`).
:data:`BUILTIN_SIZES` are ``small``, ``medium`` and ``large``; an environment's
``replica_sizes`` option adds or overrides sizes.

A size becomes the managed replica's process arguments (:meth:`ReplicaSize.args`)
and Spark master (:meth:`ReplicaSize.master`); ``mz_cluster_replicas`` and
``tidegate status`` show it.

>>> BUILTIN_SIZES["medium"].master()
'local[2]'
>>> ReplicaSize(cores=8, spark_master="spark://spark:7077").args()[-2:]
('--spark-conf', 'spark.cores.max=8')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidEnvironmentOptions

__all__ = ["BUILTIN_SIZES", "ReplicaSize", "size_json"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSize:
    """One size: a replica's allocation (see the module docstring).

    ``cores``: Spark cores (``local[cores]``, or ``spark.cores.max`` on a Spark
    standalone master); ``executor_memory`` / ``driver_memory``: Spark's
    ``spark.executor.memory`` / ``spark.driver.memory`` (``"2g"``);
    ``state_memory_rows``: arrangement entries kept in the driver (the
    replica's ``--state-memory-rows``); ``memory_limit``: bytes of resident
    memory, process and JVM (``--memory-limit``); ``spark_master``: a master of
    its own (``spark://host:7077``) instead of ``local[cores]``.
    """

    cores: int = 1
    executor_memory: str | None = None
    driver_memory: str | None = None
    state_memory_rows: int | None = None
    memory_limit: int | None = None
    spark_master: str | None = None

    def __post_init__(self) -> None:
        if type(self.cores) is not int or self.cores < 1:
            raise InvalidEnvironmentOptions(
                "replica_sizes", f"cores must be >= 1, got {self.cores!r}"
            )
        for name in ("executor_memory", "driver_memory", "spark_master"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, str) or not value or any(c.isspace() for c in value)
            ):
                raise InvalidEnvironmentOptions(
                    "replica_sizes", f"{name} must be a non-empty word or None, got {value!r}"
                )
        for name in ("state_memory_rows", "memory_limit"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value <= 0):
                raise InvalidEnvironmentOptions(
                    "replica_sizes", f"{name} must be a positive int or None, got {value!r}"
                )

    def master(self) -> str:
        """The replica's Spark master: its own, else ``local[cores]``."""
        return self.spark_master or f"local[{self.cores}]"

    def args(self) -> tuple[str, ...]:
        """The managed replica process's arguments for this size (after the environment's)."""
        out: list[str] = []
        if self.memory_limit is not None:
            out += ["--memory-limit", str(self.memory_limit)]
        if self.state_memory_rows is not None:
            out += ["--state-memory-rows", str(self.state_memory_rows)]
        if self.executor_memory is not None:
            out += ["--spark-conf", f"spark.executor.memory={self.executor_memory}"]
        if self.driver_memory is not None:
            out += ["--spark-conf", f"spark.driver.memory={self.driver_memory}"]
        if self.spark_master is not None and not self.spark_master.startswith("local"):
            out += ["--spark-conf", f"spark.cores.max={self.cores}"]
        return tuple(out)


_GIB = 2**30

BUILTIN_SIZES: Mapping[str, ReplicaSize] = {
    "small": ReplicaSize(
        cores=1,
        executor_memory="1g",
        driver_memory="1g",
        state_memory_rows=250_000,
        memory_limit=2 * _GIB,
    ),
    "medium": ReplicaSize(
        cores=2,
        executor_memory="2g",
        driver_memory="2g",
        state_memory_rows=1_000_000,
        memory_limit=4 * _GIB,
    ),
    "large": ReplicaSize(
        cores=4,
        executor_memory="4g",
        driver_memory="4g",
        state_memory_rows=4_000_000,
        memory_limit=8 * _GIB,
    ),
}
"""The sizes every environment knows (``replica_sizes`` adds to them or replaces them)."""


def size_json(size: ReplicaSize) -> dict[str, Any]:
    """A size as JSON-ready data (``status``, ``tidegate cluster sizes``)."""
    return {
        "cores": size.cores,
        "executor_memory": size.executor_memory,
        "driver_memory": size.driver_memory,
        "state_memory_rows": size.state_memory_rows,
        "memory_limit": size.memory_limit,
        "spark_master": size.master(),
    }
