"""``POST /sql`` streamed (``"stream": true``): Materialize's WebSocket messages over NDJSON, a
``SUBSCRIBE``'s rows as they come, ``WITH (PROGRESS)``, and a subscribe dropped when its
client goes away; served in this process over real HTTP, against an in-process replica."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.control import ControlClient, ControlError, ControllerInfo, serve_control
from tidegate.commands.service import ControlService
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment

pytestmark = pytest.mark.timeout(180)


def served(
    tmp_path: Path, body: Callable[[ControlClient, Any], Awaitable[None]], *, tick_ms: Any = None
) -> None:
    """Run ``body(client, env)`` against a served environment (ticking only when it appends)."""

    async def main() -> None:
        with in_process_replica(tmp_path) as address, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=tick_ms) as env:
                service = ControlService(env, wait_s=30)
                async with anyio.create_task_group() as tg:
                    at = await tg.start(serve_control, service.handle, "tok")
                    info = ControllerInfo(at, "tok", os.getpid(), str(tmp_path))
                    await body(ControlClient(info, timeout=30), env)
                    tg.cancel_scope.cancel()

    anyio.run(main)


async def _next(lines: Generator[Any, None, None]) -> Any:
    return await anyio.to_thread.run_sync(next, lines)


async def _all(client: ControlClient, sql: str) -> list[dict[str, Any]]:
    def run() -> list[dict[str, Any]]:
        return list(client.stream("POST", "/sql", {"sql": sql, "stream": True}))

    return await anyio.to_thread.run_sync(run)


def _transient(env: Any) -> list[Any]:
    view = env.driver.ctl.compute.instance("default")
    return [g for g in view.collection_ids() if g.namespace == "t"]


def test_a_script_answers_each_statement_as_materialize_s_websocket_does(tmp_path: Path) -> None:
    async def body(client: ControlClient, env: Any) -> None:
        got = await _all(
            client,
            "CREATE TABLE t (x int NOT NULL, s text); INSERT INTO t VALUES (1, 'a'), (2, NULL);"
            "SELECT x, s FROM t ORDER BY x; SELECT nothing FROM t; SELECT 1",
        )
        kinds = [m["type"] for m in got]
        assert kinds == [
            *("CommandStarting", "CommandComplete"),  # CREATE TABLE
            *("CommandStarting", "CommandComplete"),  # INSERT
            *("CommandStarting", "Rows", "Row", "Row", "CommandComplete"),
            *("Error", "ReadyForQuery"),  # the script stops at its first error
        ]
        assert [m["payload"] for m in got if m["type"] == "CommandComplete"] == [
            "CREATE TABLE",
            "INSERT 0 2",
            "SELECT 2",
        ]
        rows = next(m for m in got if m["type"] == "Rows")["payload"]["columns"]
        assert [(c["name"], c["type"], c["type_oid"]) for c in rows] == [
            ("x", "bigint", 20),
            ("s", "text", 25),
        ]
        assert [m["payload"] for m in got if m["type"] == "Row"] == [[1, "a"], [2, None]]
        error = next(m for m in got if m["type"] == "Error")["payload"]
        assert error["code"] == "42703" and 'column "nothing" does not exist' in error["message"]
        assert got[-1] == {"type": "ReadyForQuery", "payload": "I"}
        # bad requests are refused before anything streams, as other requests are
        with pytest.raises(ControlError, match="BadRequest"):
            await _next(client.stream("POST", "/sql", {"sql": 1, "stream": True}))
        with pytest.raises(ControlError, match="request_id"):
            await _next(
                client.stream(
                    "POST", "/sql", {"sql": "SELECT 1", "stream": True, "request_id": "r"}
                )
            )

    served(tmp_path, body)


def test_subscribe_streams_rows_and_progress_until_its_client_goes_away(tmp_path: Path) -> None:
    async def body(client: ControlClient, env: Any) -> None:
        await env.execute("CREATE TABLE t (x int NOT NULL)")
        await env.execute("INSERT INTO t VALUES (1)")
        lines = client.stream(
            "POST", "/sql", {"sql": "SUBSCRIBE t WITH (PROGRESS)", "stream": True}
        )
        try:
            assert await _next(lines) == {
                "type": "CommandStarting",
                "payload": {"has_rows": True, "is_streaming": True},
            }
            columns = (await _next(lines))["payload"]["columns"]
            assert [(c["name"], c["type"]) for c in columns] == [
                ("mz_timestamp", "numeric"),
                ("mz_progressed", "boolean"),
                ("mz_diff", "bigint"),
                ("x", "bigint"),
            ]
            # Materialize: the first row is a progress row at the as_of, then the snapshot
            as_of, *rest = (await _next(lines))["payload"]
            assert rest == [True, None, None]
            assert (await _next(lines))["payload"] == [as_of, False, 1, 1]
            progress = (await _next(lines))["payload"]
            assert progress[1:] == [True, None, None] and int(progress[0]) > int(as_of)
            assert len(_transient(env)) == 1  # the subscribe's dataflow
            ts = await env.append("t", [((2,), 1)])
            while True:  # progress rows may come first: each says how far the stream is
                row = (await _next(lines))["payload"]
                if row[1] is False:
                    break
                assert row[1:] == [True, None, None]
            assert row == [ts, False, 1, 2]
        finally:
            lines.close()
        with anyio.fail_after(60):
            while _transient(env):  # closing the stream dropped the subscribe
                await anyio.sleep(0.05)
        # the environment goes on serving
        got = await _all(client, "SELECT count(*) FROM t")
        assert [m["payload"] for m in got if m["type"] == "Row"] == [[2]]

    served(tmp_path, body)


def test_a_subscribe_that_cannot_start_is_an_error_message(tmp_path: Path) -> None:
    async def body(client: ControlClient, env: Any) -> None:
        got = await _all(client, "SUBSCRIBE nothing")
        assert [m["type"] for m in got] == ["Error", "ReadyForQuery"]
        assert got[0]["payload"]["code"] == "42P01"
        assert not _transient(env)

    served(tmp_path, body)
