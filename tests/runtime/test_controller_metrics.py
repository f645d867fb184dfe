"""ControllerMetrics: an Environment's state as Prometheus metrics, read at scrape time.

The environment runs over an in-process python-executor replica (as in
``test_environment.py``); scrapes go through ``generate_latest`` and through
the served ``/metrics`` endpoint, from other threads while the loop works.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tidegate
from tidegate.dsl import Schema, col
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.metrics import (
    ControllerMetrics,
    frontier_seconds,
    frontier_value,
    lag_ms,
    policy_kind,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    StepBack,
    ValidFrom,
)

pytestmark = pytest.mark.timeout(120)

T = Schema.of(("id", "int64", False), ("amount", "int64"))
NOW_MS = 4_000_000_000_000  # a fixed wall clock, after every timestamp the oracle hands out

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str | bytes) -> Samples:
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scrape: Samples, metric: str, /, **labels: str) -> float:
    return scrape[(f"tidegate_controller_{metric}", frozenset(labels.items()))]


def scrape(metrics: ControllerMetrics) -> Samples:
    return samples(generate_latest(metrics.registry))


def test_the_environment_as_metrics_and_a_stopped_replica(tmp_path: Path) -> None:
    async def main() -> None:
        with ExitStack() as running, anyio.fail_after(90):
            address = running.enter_context(replica(tmp_path))
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                await env.wait_connected(timeout_s=30)
                t = await env.create_table("orders", T)
                await env.append("orders", [(1, 10), (2, 25)])
                idx = await env.create_index(env.table("orders").filter(col("amount") > 5), ["id"])
                await env.set_read_policy(idx, LagWriteFrontier(1000, 1))
                t1 = await env.append("orders", [(3, 40)])
                assert len(await env.peek(idx, t1)) == 3
                metrics = ControllerMetrics(env, clock_ms=lambda: NOW_MS)

                got = scrape(metrics)
                families = {name for name, _ in got}
                for name in (
                    "collection_since_timestamp_seconds",
                    "collection_upper_timestamp_seconds",
                    "collection_lag_seconds",
                    "collection_read_policy",
                    "collection_hydrated",
                    "collection_hydration_seconds",
                    "replica_connected",
                    "replica_status",
                    "replica_epoch",
                    "replica_refused_attempts",
                    "pending_peeks",
                    "live_subscribes",
                    "command_history_length",
                    "command_history_reduced_length",
                    "commands_sent_total",
                    "responses_total",
                    "table_appends_acknowledged_total",
                ):
                    assert f"tidegate_controller_{name}" in families, name
                # The defaults: process and Python collectors, and the build info.
                assert got[("process_resident_memory_bytes", frozenset())] > 0
                assert (
                    "python_gc_objects_collected_total",
                    frozenset({("generation", "0")}),
                ) in got
                info = frozenset({("version", tidegate.__version__), ("component", "controller")})
                assert got[("tidegate_build_info", info)] == 1
                for gid, name, kind, policy in (
                    (t, "orders", "table", "default"),
                    (idx, f"index_{idx}", "index", "lag"),
                ):
                    labels = dict(name=name, id=str(gid), kind=kind)
                    since, upper = env.frontiers(gid)
                    since_s = value(got, "collection_since_timestamp_seconds", **labels)
                    upper_s = value(got, "collection_upper_timestamp_seconds", **labels)
                    assert since_s == frontier_value(since) / 1000 == frontier_seconds(since)
                    assert upper_s == frontier_value(upper) / 1000
                    assert frontier_value(since) <= frontier_value(upper)
                    lag_s = value(got, "collection_lag_seconds", **labels)
                    assert lag_s == (lag_ms(upper, NOW_MS) or 0) / 1000
                    assert value(got, "collection_read_policy", **labels, policy=policy) == 1
                assert value(got, "replica_connected", replica="r1") == 1
                assert value(got, "replica_status", replica="r1", status="connected") == 1
                assert value(got, "replica_status", replica="r1", status="failed") == 0
                assert value(got, "pending_peeks") == 0
                assert value(got, "live_subscribes") == 0
                assert value(got, "command_history_length") > 0
                assert value(got, "command_history_reduced_length") > 0
                assert value(got, "commands_sent_total", kind="CreateDataflow") >= 1
                assert value(got, "commands_sent_total", kind="Peek") >= 1
                assert value(got, "responses_total", kind="Frontiers") > 0
                assert value(got, "responses_total", kind="PeekResponse") >= 1
                # Hydration, per index (tables are not computed) and replica.
                hydration = dict(name=f"index_{idx}", id=str(idx), kind="index", replica="r1")
                assert value(got, "collection_hydrated", **hydration) == 1
                assert 0 <= value(got, "collection_hydration_seconds", **hydration) < 60
                (h,) = env.hydration(idx)
                assert (h.id, h.replica, h.hydrated, h.name) == (idx, "r1", True, f"index_{idx}")
                assert h.seconds == value(got, "collection_hydration_seconds", **hydration)
                assert env.hydration() == [h]
                assert value(got, "table_appends_acknowledged_total") == 2

                # A subscribe shows while open.
                sub = await env.subscribe("orders")
                async with sub:
                    await sub.__anext__()
                    assert value(scrape(metrics), "live_subscribes") == 1
                assert value(scrape(metrics), "live_subscribes") == 0

                # The served endpoint, scraped from another thread while the loop runs.
                host, port = metrics.serve("127.0.0.1", 0)
                try:
                    url = f"http://{host}:{port}/metrics"
                    body = await anyio.to_thread.run_sync(
                        lambda: urllib.request.urlopen(url, timeout=10).read()
                    )
                    served = samples(body)
                    assert value(served, "replica_connected", replica="r1") == 1
                    assert value(served, "table_appends_acknowledged_total") == 2
                finally:
                    metrics.close()

                # The replica goes away: it shows as not connected (its epoch moves on).
                epoch = value(got, "replica_epoch", replica="r1")
                running.close()
                while value(now := scrape(metrics), "replica_connected", replica="r1") != 0:
                    await anyio.sleep(0.05)
                assert value(now, "replica_status", replica="r1", status="connected") == 0
                while value(now := scrape(metrics), "replica_epoch", replica="r1") == epoch:
                    await anyio.sleep(0.05)
                assert value(now, "replica_connected", replica="r1") == 0
                while value(now := scrape(metrics), "replica_refused_attempts", replica="r1") < 1:
                    await anyio.sleep(0.05)
                assert value(now, "replica_connected", replica="r1") == 0

    anyio.run(main, backend="asyncio")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_scraping_from_another_thread_while_the_environment_works(
    tmp_path: Path, backend: str
) -> None:
    """Scrapes in a thread during DDL, appends and peeks: none fails, and each is whole."""

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=20) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                metrics = ControllerMetrics(env)
                stop = threading.Event()
                errors: list[BaseException] = []
                scrapes = [0]

                def scraper() -> None:
                    while not stop.wait(0.002):  # pauses let the loop and the replica have the GIL
                        try:
                            text = generate_latest(metrics.registry)
                            assert b"tidegate_controller_table_appends_acknowledged_total" in text
                            scrapes[0] += 1
                        except BaseException as e:
                            errors.append(e)
                            return

                thread = threading.Thread(target=scraper, daemon=True)
                thread.start()
                try:
                    for i in range(12):
                        await env.append("t", [(i,)])
                        idx = await env.create_index(env.table("t"), ["x"], name=f"i{i}")
                        assert len(await env.peek(idx)) == i + 1
                        await env.drop(idx)
                finally:
                    stop.set()
                    await anyio.to_thread.run_sync(thread.join)
                assert errors == []
                assert scrapes[0] > 0
                assert value(scrape(metrics), "table_appends_acknowledged_total") == 12

    anyio.run(main, backend=backend)


@pytest.mark.processes
def test_up_serves_metrics(tmp_path: Path) -> None:
    """``tidegate up --metrics``: the address is printed, scraped, and served until SIGTERM."""
    up = subprocess.Popen(
        [
            *(sys.executable, "-m", "tidegate", "up", "--data-dir", str(tmp_path / "data")),
            *("--executor", "python", "--metrics", "127.0.0.1:0"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        url = None
        for line in up.stdout:  # the metrics line comes before the control endpoint's
            if m := re.search(r"metrics on (http://\S+/metrics)", line):
                url = m.group(1)
            if "control endpoint" in line:
                break
        assert url is not None, "tidegate up printed no metrics address"
        got = samples(urllib.request.urlopen(url, timeout=10).read())
        assert ("tidegate_controller_replica_epoch", frozenset({("replica", "r1")})) in got
        assert value(got, "replica_process_running", replica="r1") == 1
    finally:
        up.send_signal(signal.SIGTERM)
        rest, _ = up.communicate(timeout=60)
    assert up.returncode == 0, rest


class _Untouchable:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"registering read env.{name}")


def test_a_private_registry_and_registering_reads_nothing() -> None:
    env: Any = _Untouchable()
    metrics = ControllerMetrics(env)
    other = CollectorRegistry()
    ControllerMetrics(env, other)
    names = {m.name for m in metrics.describe()}
    assert "tidegate_controller_replica_connected" in names
    assert metrics.registry is not REGISTRY and metrics not in REGISTRY._collector_to_names


def test_a_scrape_that_meets_a_resizing_dict_reads_again(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics = ControllerMetrics(_Untouchable())
    families = list(metrics.describe())
    failures = [2]

    def read() -> list[Any]:
        if failures[0]:
            failures[0] -= 1
            raise RuntimeError("dictionary changed size during iteration")
        return families

    monkeypatch.setattr(metrics, "_read", read)
    assert list(metrics.collect()) == families
    failures[0] = 100
    with pytest.raises(RuntimeError):
        list(metrics.collect())
    assert failures[0] == 95  # five reads, then the error shows


def test_lag_and_frontier_values() -> None:
    # complete up to now (upper now + 1): no lag; an upper at t: times from t on are missing
    assert lag_ms(Antichain([1_001]), 1_000) == 0
    assert lag_ms(Antichain([5_000]), 1_000) == 0
    assert lag_ms(Antichain([1]), 1_000) == 1_000
    assert lag_ms(Antichain(), 1_000) is None
    assert frontier_value(Antichain([7])) == 7.0
    assert frontier_value(Antichain()) == float("inf")


def test_policy_kinds() -> None:
    since = Antichain([5])
    assert policy_kind(None) == "default"
    assert policy_kind(LagWriteFrontier(10, 1)) == "lag"
    assert policy_kind(ValidFrom(since)) == "valid-from"
    assert policy_kind(StepBack()) == "step-back"
    assert policy_kind(NoPolicy(since)) == "none"
    assert policy_kind(Multiple((StepBack(), LagWriteFrontier(1, 1)))) == "multiple"
