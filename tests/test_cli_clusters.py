"""``tidegate cluster ...`` and ``tidegate status`` per cluster, against a real Environment.

The control endpoint serves an Environment with an in-process replica for
``default``; clusters without replicas (a managed one of replication factor 0,
an unmanaged one with no replica yet) need no process. What each command
prints, and that Materialize's refusals come back as the command's error
(exit 1).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from tidegate.cli import main
from tidegate.commands.control import ControllerInfo, serve_control
from tidegate.commands.service import ControlService
from tidegate.dsl import Schema
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment

pytestmark = pytest.mark.timeout(120)


def _cli(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return int(e.code or 0)


def test_cluster_commands_and_status_per_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def main_() -> None:
        with in_process_replica(tmp_path) as r1, anyio.fail_after(90):
            async with (
                Environment.open(tmp_path, replicas={"r1": r1}, tick_ms=None) as env,
                anyio.create_task_group() as tg,
            ):
                service = ControlService(env, clock_ms=lambda: 1_000)
                address = await tg.start(serve_control, service.handle, "t0ken")
                ControllerInfo(address, "t0ken", os.getpid(), str(tmp_path), None).write()
                d = str(tmp_path)

                async def cli(*argv: str) -> int:
                    return await anyio.to_thread.run_sync(lambda: _cli(*argv, "--data-dir", d))

                assert (
                    await cli(
                        "cluster",
                        "create",
                        "batch",
                        "--size",
                        "medium",
                        "--replication-factor",
                        "0",
                    )
                    == 0
                )
                out = capsys.readouterr().out
                assert "batch    managed medium x0" in out and "default  unmanaged" in out
                assert await cli("cluster", "add-replica", "batch", "r9") == 1
                err = capsys.readouterr().err
                assert "cannot modify managed cluster batch" in err
                assert await cli("cluster", "alter", "batch", "--size", "large") == 0
                assert "managed large x0" in capsys.readouterr().out
                assert await cli("cluster", "sizes", "--json") == 0
                sizes = json.loads(capsys.readouterr().out)
                assert sizes["large"]["spark_master"] == "local[4]"
                await env.create_table("t", Schema.of(("id", "int64", False)))
                await env.create_index("t", cluster="default", name="t_idx")
                assert await cli("status", "--json") == 0
                status = json.loads(capsys.readouterr().out)
                by_name = {c["name"]: c for c in status["clusters"]}
                assert by_name["default"]["objects"] == ["t_idx"]
                assert by_name["batch"]["size"] == "large"
                assert [r["cluster"] for r in status["replicas"]] == ["default"]
                assert await cli("cluster", "list") == 0
                listed = capsys.readouterr().out
                assert "t_idx" in listed and "r1" in listed
                assert await cli("cluster", "drop", "default") == 1
                assert "t_idx" in capsys.readouterr().err  # it maintains t_idx: refused
                assert await cli("cluster", "drop", "batch") == 0
                assert "batch" not in capsys.readouterr().out
                tg.cancel_scope.cancel()

    anyio.run(main_)
