"""`EnvironmentOptions`: the defaults `Environment.open` always had, validation, and both call styles."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.runtime import Environment, EnvironmentOptions, ReplicaSpec, SyncEnvironment
from tidegate.runtime.errors import InvalidEnvironmentOptions
from tidegate.runtime.options import EnvironmentOverrides
from tidegate.runtime.platform import REAL
from tidegate.spec.errors import TidegateError

QUIET = EnvironmentOptions(replicas={}, tick_ms=None, maintain_ms=None, poll_ms=None)
"""No replicas and no background tasks: opens in a moment, needs no process."""


def test_defaults_are_those_open_always_had() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(EnvironmentOptions)}
    assert defaults == {
        "blob_url": None,
        "consensus_url": None,
        "replicas": None,
        "spark_master": "local[1]",
        "executor": "spark",
        "token": None,
        "tls": None,
        "replica_tls": None,
        "transport": None,
        "tick_ms": 1000,
        "maintain_ms": 1000,
        "poll_ms": 100,
        "oracle": None,
        "orchestrator": None,
        "blob": None,
        "consensus": None,
        "shard_policy": None,
        "platform": REAL,
        "since_downgrade_interval_ms": 1000,
        "check_protocol": True,
        "max_result_size": None,
        "replica_sizes": None,
        "default_replica_size": None,
        "replica_memory_limit": None,
        "spark_conf": None,
        "spark_ui": False,
        "replica_metrics": False,
        "storage_replica": None,
        "storage_transport": None,
        "storage_tick_ms": None,
        "read_only": False,
    }


def test_the_keyword_form_has_exactly_the_fields_with_their_types() -> None:
    fields = {f.name: f.type for f in dataclasses.fields(EnvironmentOptions)}
    keywords = {k: v.__forward_arg__ for k, v in EnvironmentOverrides.__annotations__.items()}
    assert keywords == fields
    assert EnvironmentOverrides.__total__ is False


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("replicas", -1),
        ("replicas", True),
        ("replicas", "r1"),
        ("replicas", 1.5),
        ("replicas", {"r1": ""}),
        ("replicas", {"": "127.0.0.1:1"}),
        ("replicas", ["r1"]),
        ("replicas", [ReplicaSpec("r1"), ReplicaSpec("r1", spark_master="local[2]")]),
        ("spark_master", ""),
        ("executor", "flink"),
        ("token", ""),
        ("blob_url", ""),
        ("consensus_url", 7),
        ("tick_ms", 0),
        ("maintain_ms", -5),
        ("poll_ms", 1.5),
        ("poll_ms", True),
        ("storage_tick_ms", 0),
        ("storage_replica", ""),
        ("storage_replica", "host :1"),
        ("storage_replica", 7000),
        ("check_protocol", 1),
        ("max_result_size", 0),
        ("max_result_size", 1.5),
        ("read_only", 1),
        ("spark_conf", {"spark.sql.shuffle.partitions": 4}),
        ("spark_conf", {"a b": "1"}),
        ("spark_conf", {"a=b": "1"}),
        ("spark_conf", ["spark.ui.enabled=true"]),
        ("spark_ui", "yes"),
        ("replica_metrics", 1),
    ],
)
def test_bad_values_are_typed_errors_naming_the_option(option: str, value: Any) -> None:
    with pytest.raises(InvalidEnvironmentOptions) as info:
        EnvironmentOptions(**{option: value})
    assert info.value.option == option
    assert isinstance(info.value, TidegateError)
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidEnvironmentOptions):
        EnvironmentOptions().replace(**{option: value})


def test_a_store_given_twice_is_refused() -> None:
    with pytest.raises(InvalidEnvironmentOptions, match="blob or blob_url"):
        EnvironmentOptions(blob_url="file:///tmp/x", blob=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidEnvironmentOptions, match="consensus or consensus_url"):
        EnvironmentOptions(consensus_url="sqlite:///x", consensus=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "replicas",
    [None, 0, 3, {}, {"a": "127.0.0.1:6876"}, [ReplicaSpec("a"), ReplicaSpec("b", "h:1")], ()],
)
def test_every_form_of_replicas_is_accepted(replicas: Any) -> None:
    assert EnvironmentOptions(replicas=replicas).replicas == replicas


def test_replace_returns_a_new_value_and_rejects_unknown_names() -> None:
    base = EnvironmentOptions(replicas=2)
    changed = base.replace(executor="python", tick_ms=None)
    assert (changed.replicas, changed.executor, changed.tick_ms) == (2, "python", None)
    assert base.executor == "spark"
    with pytest.raises(TypeError, match="tick"):
        base.replace(tick=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.executor = "python"  # type: ignore[misc]


def test_open_validates_before_opening_anything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(InvalidEnvironmentOptions):
        Environment.open(data, replicas=-1)
    with pytest.raises(TypeError):
        Environment.open(data, replica=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="EnvironmentOptions"):
        Environment.open(data, {"replicas": 2})  # type: ignore[arg-type]
    assert not data.exists()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_options_and_keywords_combine_keywords_winning(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with Environment.open(tmp_path, QUIET, poll_ms=50) as env:
                assert (env.driver.tick_ms, env.driver.poll_ms) == (None, 50)
                assert env.replicas() == []
            async with Environment.open(tmp_path, QUIET) as env:
                assert env.driver.poll_ms is None

    anyio.run(main, backend=backend)


def test_the_blocking_twin_takes_options_too(tmp_path: Path) -> None:
    with SyncEnvironment.open(tmp_path, QUIET, tick_ms=25) as env:
        assert env.env.driver.tick_ms == 25
