"""Replica sizes: what a size allocates, as the managed replica's arguments.

A size names a replica allocation (the seeds' "resource allocations for a
replica"): Spark cores (``local[N]``, or ``spark.cores.max`` on a standalone
master), executor and driver memory, ``state_memory_rows`` and the memory
limit. Arguments after the environment's (the orchestrator's), so a size's
memory limit wins and one without a limit keeps the environment's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidegate.replica.main import build_parser
from tidegate.runtime.catalog import ReplicaEntry
from tidegate.runtime.environment._replicas import launch_of
from tidegate.runtime.errors import InvalidEnvironmentOptions
from tidegate.runtime.options import EnvironmentOptions, ReplicaSpec
from tidegate.runtime.sizes import BUILTIN_SIZES, ReplicaSize


def test_the_builtin_sizes_grow() -> None:
    small, medium, large = (BUILTIN_SIZES[n] for n in ("small", "medium", "large"))
    assert small.cores < medium.cores < large.cores
    assert small.memory_limit and medium.memory_limit and large.memory_limit
    assert small.memory_limit < medium.memory_limit < large.memory_limit
    assert [s.master() for s in (small, medium, large)] == ["local[1]", "local[2]", "local[4]"]


def test_a_size_becomes_replica_arguments_the_replica_understands() -> None:
    size = ReplicaSize(
        cores=2,
        executor_memory="2g",
        driver_memory="1g",
        state_memory_rows=5000,
        memory_limit=3 * 2**30,
        spark_master="spark://10.0.0.1:7077",
    )
    entry = ReplicaEntry("r1", True, None, size.master(), "spark", "big", "x")
    options = EnvironmentOptions(replica_sizes={"x": size})
    launch = launch_of(entry, options, base=("--memory-limit", "1024"))
    assert launch.spark_master == "spark://10.0.0.1:7077"
    assert launch.extra_args is not None
    argv = ["--listen", "127.0.0.1:0", *launch.extra_args]
    parsed = build_parser().parse_args(argv)
    assert parsed.memory_limit == 3 * 2**30  # the size's, after the environment's
    assert parsed.state_memory_rows == 5000
    assert dict(parsed.spark_conf) == {
        "spark.executor.memory": "2g",
        "spark.driver.memory": "1g",
        "spark.cores.max": "2",
    }
    unsized = ReplicaEntry("r1", True, None, "local[1]", "spark")
    assert launch_of(unsized, options).extra_args is None  # the orchestrator's own


def test_a_size_without_a_limit_keeps_the_environments() -> None:
    options = EnvironmentOptions(replica_sizes={"cores": ReplicaSize(cores=3)})
    entry = ReplicaEntry("r1", True, None, "local[3]", "spark", "c", "cores")
    launch = launch_of(entry, options, base=("--memory-limit", "1024"))
    assert launch.extra_args is not None
    assert build_parser().parse_args(["--listen", "x:0", *launch.extra_args]).memory_limit == 1024


def test_bad_sizes_are_refused_when_the_options_are_built() -> None:
    with pytest.raises(InvalidEnvironmentOptions):
        ReplicaSize(cores=0)
    with pytest.raises(InvalidEnvironmentOptions):
        ReplicaSize(memory_limit=-1)
    with pytest.raises(InvalidEnvironmentOptions, match="replica_sizes"):
        EnvironmentOptions(replica_sizes={"x": "big"})  # type: ignore[dict-item]
    with pytest.raises(InvalidEnvironmentOptions, match="default_replica_size"):
        EnvironmentOptions(default_replica_size="enormous")
    with pytest.raises(InvalidEnvironmentOptions, match="unknown size"):
        EnvironmentOptions(replicas=[ReplicaSpec("r1", size="enormous")])
    assert (
        EnvironmentOptions(default_replica_size="large").sizes()["large"] == BUILTIN_SIZES["large"]
    )


def test_tidegate_up_reads_sizes_from_a_file(tmp_path: Path) -> None:
    from tidegate.commands.up import _replica_sizes

    path = tmp_path / "sizes.json"
    path.write_text(json.dumps({"xl": {"cores": 8, "memory_limit": "16GiB"}}))
    assert _replica_sizes(str(path)) == {"xl": ReplicaSize(cores=8, memory_limit=16 * 2**30)}
    path.write_text(json.dumps({"xl": {"cores": 0}}))
    with pytest.raises(Exception, match="cores"):
        _replica_sizes(str(path))
