"""Managed replicas as real processes: ``spark_conf``/``spark_ui`` reach them, plain-integer
pidfiles, JSON-lines logs, and hydration (timed again after a crash's rehydration)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.orchestrator import read_pidfile

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().rstrip("\0").split("\0")


def _json_lines(path: Path) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert all(isinstance(r, dict) for r in records)
    return records


def test_spark_options_pidfiles_logs_and_hydration(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with Environment.open(
                tmp_path,
                replicas=1,
                executor="python",
                tick_ms=50,
                spark_conf={"spark.sql.shuffle.partitions": "3", "spark.executor.memory": "1g"},
                spark_ui=True,
            ) as env:
                assert env.orchestrator is not None
                await env.wait_connected(timeout_s=60)
                pidfile = tmp_path / "replicas" / "r1.pid"
                text = pidfile.read_text()
                pid = env.orchestrator.status()["r1"].pid
                assert text == f"{pid}\n" and read_pidfile(pidfile) == pid
                argv = _cmdline(int(text))
                for flag in (
                    "spark.sql.shuffle.partitions=3",
                    "spark.executor.memory=1g",
                    "--spark-ui",
                ):
                    assert flag in argv, argv
                assert argv.count("--spark-conf") == 2

                await env.create_table("t", Schema.of(("x", "int64", False)))
                await env.append("t", [(1,), (2,)])
                idx = await env.create_index(env.table("t"), ["x"], name="by_x")
                assert await env.peek(idx) == [((1,), 1), ((2,), 1)]
                (h,) = env.hydration()
                assert (h.name, h.id, h.replica, h.hydrated) == ("by_x", idx, "r1", True)
                assert h.seconds is not None and 0 <= h.seconds < 60
                assert env.hydration("t") == []  # tables are not computed

                # A crash: the replay rebuilds the dataflow and hydration is timed again.
                await env.orchestrator.kill("r1")
                async for e in env.events():
                    if (e.replica, e.status) == ("r1", "connected") and e.epoch >= 2:
                        break
                ts = await env.append("t", [(3,)])
                assert len(await env.peek(idx, ts)) == 3
                (again,) = env.hydration(idx)
                assert again.hydrated and again.seconds is not None
                assert read_pidfile(pidfile) == env.orchestrator.status()["r1"].pid != pid

        records = _json_lines(tmp_path / "replicas" / "r1.log")  # the whole log: JSON lines
        events = [r["event"] for r in records]
        assert events.count("replica_starting") == 2  # the orchestrator's, before each start
        assert events.count("listening") >= 2
        # each start froze what startup made, out of the collector's full collections (the
        # logged event says how much; the stdout line the orchestrator reads does not)
        logged = [r for r in records if r["event"] == "listening" and "level" in r]
        assert len(logged) == 2 and all(r["frozen_objects"] > 10_000 for r in logged)

    anyio.run(main)


@pytest.mark.slow
def test_spark_conf_and_the_ui_reach_a_managed_spark_replica(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(240):
            async with Environment.open(
                tmp_path,
                replicas=1,
                executor="spark",
                spark_master="local[1]",
                spark_conf={"spark.sql.shuffle.partitions": "5"},
                spark_ui=True,
            ) as env:
                await env.wait_connected(timeout_s=200)

    anyio.run(main)
    records = _json_lines(tmp_path / "replicas" / "r1.log")
    (conf,) = (r for r in records if r["event"] == "spark_conf")
    assert conf["conf"] == {"spark.sql.shuffle.partitions": "5"}
    (ui,) = (r for r in records if r["event"] == "spark_ui")
    assert str(ui["url"]).startswith("http://")
    assert any(r.get("stream") == "stderr" for r in records)  # the JVM's lines, wrapped
