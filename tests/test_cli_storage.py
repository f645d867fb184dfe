"""Sources and sinks from the command line: ``create-source``, ``create-sink``, ``status``,
``describe``, ``peek`` and ``drop`` over loopback HTTP against a real ``Environment`` (an
in-process python-executor compute replica, a managed storage replica process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.cli import main
from tidegate.commands.control import ControllerInfo, Refusal, serve_control
from tidegate.commands.ddl import DdlError, sink_connection_from_json, source_connection_from_json
from tidegate.commands.render import status_table
from tidegate.commands.service import ControlService
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.runtime.sinks.iceberg import read_changelog
from tidegate.spec.storage import IcebergSink, LoadGenerator, PostgresSource

pytestmark = pytest.mark.timeout(180)


def _cli(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["create-source", "s"],
        ["create-source", "s", "--load-generator", "tpch"],
        ["create-source", "s", "--load-generator", "counter", "--postgres", "postgres://x"],
        ["create-source", "s", "--load-generator", "counter", "--tick-ms", "0"],
        ["create-sink", "k", "--from", "t"],
        ["create-sink", "k", "--iceberg-catalog", "sqlite:///c", "--warehouse", "file:///w"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(*argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_mixed_up_source_options_exit_2_before_calling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = ["--data-dir", str(tmp_path)]  # no controller: a call would exit 3
    assert _cli("create-source", "s", "--load-generator", "counter", "--slot", "x", *d) == 2
    assert "go with --postgres" in capsys.readouterr().err
    assert _cli("create-source", "s", "--postgres", "postgres://h/db", "--table", "t", *d) == 2
    assert "--postgres needs --publication, --slot" in capsys.readouterr().err
    assert _cli("create-source", "s", "--postgres", "postgres://h/db", "--seed", "1", *d) == 2
    assert _cli("create-source", "s", "--load-generator", "counter", *d) == 3
    sink = ["create-sink", "k", "--from", "t", "--iceberg-catalog", "c", "--warehouse", "w"]
    assert _cli(*sink, "--table", "n.t", "--commit-interval", "often", *d) == 2
    assert "--commit-interval" in capsys.readouterr().err


def test_connection_json_is_checked() -> None:
    assert source_connection_from_json({"type": "load_generator"}) == LoadGenerator()
    assert source_connection_from_json(
        {"type": "load_generator", "kind": "auction", "tick_ms": 5, "seed": 2}
    ) == LoadGenerator("auction", 5, 2)
    pg = {"type": "postgres", "url": "u", "table": "t", "publication": "p", "slot": "s"}
    assert source_connection_from_json(pg) == PostgresSource("u", "t", "p", "s")
    ice = {"type": "iceberg", "catalog_url": "c", "warehouse": "w", "table": "n.t"}
    assert sink_connection_from_json(ice) == IcebergSink("c", "w", "n.t")
    paced = sink_connection_from_json({**ice, "commit_interval_ms": 5_000})
    assert paced == IcebergSink("c", "w", "n.t", commit_interval_ms=5_000)
    for bad in (
        None,
        {"type": "kafka"},
        {"type": "load_generator", "kind": "tpch"},
        {"type": "load_generator", "tick_ms": 0},
        {"type": "load_generator", "seed": "1"},
        {"type": "load_generator", "extra": 1},
        {**pg, "slot": ""},
        {"type": "postgres", "url": "u"},
    ):
        with pytest.raises(DdlError) as e:
            source_connection_from_json(bad)
        assert e.value.type == "BadConnection"
    for bad in (
        None,
        pg,
        {**ice, "table": 3},
        {**ice, "commit_interval_ms": 999},  # below 1 s, as Materialize refuses
        {**ice, "commit_interval_ms": "5s"},
        {**ice, "progress_interval_ms": 1},
    ):
        with pytest.raises(DdlError):
            sink_connection_from_json(bad)


@pytest.mark.processes
def test_sources_and_sinks_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    d = ["--data-dir", str(tmp_path)]
    catalog, warehouse = f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/warehouse"

    async def main_() -> None:
        with in_process_replica(data) as compute, anyio.fail_after(150):
            async with Environment.open(
                data, replicas={"r1": compute}, tick_ms=100, storage_tick_ms=50
            ) as env:
                service = ControlService(env, wait_s=30)
                async with anyio.create_task_group() as tg:
                    address = await tg.start(serve_control, service.handle, "t0ken")
                    ControllerInfo(address, "t0ken", os.getpid(), str(tmp_path)).write()
                    await body(service, env)
                    tg.cancel_scope.cancel()

    async def body(service: ControlService, env: Any) -> None:
        cli = anyio.to_thread.run_sync
        argv = ["create-source", "ticks", "--load-generator", "counter", "--tick-ms", "20", *d]
        assert await cli(_cli, *argv) == 0
        out = capsys.readouterr().out
        assert "created source ticks (u1): load generator counter (tick 20 ms, seed 0)" in out
        assert "columns counter int64 not null" in out
        assert await cli(_cli, *argv) == 1
        assert "DuplicateCatalogName" in capsys.readouterr().err
        with pytest.raises(Refusal) as refused:
            await service.handle(
                "POST", "/create-source", {"name": "x", "connection": {"type": "kafka"}}
            )
        assert refused.value.type == "BadConnection"

        await env.create_table("t", env.schema("ticks"))
        await env.append("t", [(1,), (2,)])
        sink = [
            "create-sink",
            "out",
            "--from",
            "t",
            "--iceberg-catalog",
            catalog,
            "--warehouse",
            warehouse,
            "--table",
            "tidegate.out",
            *d,
        ]
        assert await cli(_cli, *sink) == 0
        assert "created sink out (u4) of t: iceberg tidegate.out" in capsys.readouterr().out
        assert await cli(_cli, "create-sink", "bad", *sink[2:8], "--table", "x", *d) == 1
        assert "SinkDescriptionInvalid" in capsys.readouterr().err

        with anyio.fail_after(60):  # both running, the sink caught up with the table
            while True:
                status = await service.status()
                states = [x["status"] for x in (*status["sources"], *status["sinks"])]
                upper = status["sinks"][0]["upper"]
                if states == ["running", "running"] and upper and upper[0] > 1:
                    try:
                        if read_changelog(IcebergSink(catalog, warehouse, "tidegate.out")):
                            break
                    except Exception:
                        pass
                await anyio.sleep(0.1)
        assert await cli(_cli, "status", "--json", *d) == 0
        shown = json.loads(capsys.readouterr().out)
        [src] = shown["sources"]
        assert (src["name"], src["type"], src["status"], src["progress"]["name"]) == (
            "ticks",
            "load-generator",
            "running",
            "ticks_progress",
        )
        assert src["statistics"]["updates_committed"] >= 0 and src["upper"]
        [snk] = shown["sinks"]
        assert (snk["name"], snk["type"], snk["reads"]["name"]) == ("out", "iceberg", "t")
        kinds = {c["name"]: c["kind"] for c in shown["collections"]}
        assert kinds["ticks"] == "source" and kinds["ticks_progress"] == "progress"
        assert kinds["mz_source_status_history"] == "system"
        roles = {r["name"]: r["role"] for r in shown["replicas"]}
        assert roles == {"r1": "compute", "storage": "storage"}
        assert await cli(_cli, "status", *d) == 0
        text = capsys.readouterr().out
        assert "SOURCE/SINK" in text and "load-generator" in text and "iceberg" in text
        assert "storage" in status_table(shown)

        assert await cli(_cli, "describe", "ticks", *d) == 0
        text = capsys.readouterr().out
        assert "source ticks (u1)" in text and "status: running" in text
        assert "progress: ticks_progress" in text
        assert await cli(_cli, "describe", "out", "--json", *d) == 0
        described = json.loads(capsys.readouterr().out)
        assert described["kind"] == "sink" and described["storage"]["status"] == "running"
        assert described["dependencies"] == [{"name": "t", "id": "u3", "kind": "table"}]

        assert await cli(_cli, "peek", "ticks_progress", *d) == 0
        assert "ticks_progress (u2) at" in capsys.readouterr().out
        assert await cli(_cli, "peek", "out", *d) == 1
        assert "NotReadable" in capsys.readouterr().err
        assert await cli(_cli, "drop", "out", *d) == 0
        assert "dropped sink out (u4)" in capsys.readouterr().out
        assert await cli(_cli, "drop", "ticks", *d) == 0
        out = capsys.readouterr().out
        assert "dropped source ticks (u1)" in out and "dropped progress ticks_progress" in out
        assert env.storage_status() == []

    anyio.run(main_)
