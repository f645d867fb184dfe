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

from tidegate.cli import main
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
        setup = "CREATE TABLE t (x int NOT NULL, s text); INSERT INTO t VALUES (1, 'a'), (2, NULL)"
        # One implicit transaction (Materialize's simple mode): a read after a write in it is
        # refused, and the write does not land.
        refused = await _all(client, f"{setup}; SELECT x FROM t")
        assert [m["payload"]["code"] for m in refused if m["type"] == "Error"] == ["25000"]
        got = await _all(client, "INSERT INTO t VALUES (1, 'a'), (2, NULL)")
        assert [m["payload"] for m in got if m["type"] == "CommandComplete"] == ["INSERT 0 2"]
        got = await _all(client, "SELECT x, s FROM t ORDER BY x; SELECT nothing FROM t; SELECT 1")
        kinds = [m["type"] for m in got]
        assert kinds == [
            *("CommandStarting", "Rows", "Row", "Row", "CommandComplete"),
            *("Error", "ReadyForQuery"),  # the script stops at its first error
        ]
        assert [m["payload"] for m in got if m["type"] == "CommandComplete"] == ["SELECT 2"]
        rows = next(m for m in got if m["type"] == "Rows")["payload"]["columns"]
        assert [(c["name"], c["type"], c["type_oid"]) for c in rows] == [
            ("x", "integer", 23),
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
                ("x", "integer"),
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


def test_bounded_subscribes_end_cleanly_and_the_script_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``UP TO`` over HTTP, in ``tidegate sql`` and ``tidegate subscribe``: the stream ends by itself with its
    ``CommandComplete`` (the replica ended it), the next statement runs; ``ENVELOPE UPSERT``'s
    columns, a notice when ``AS OF`` is ``UP TO``, and refusals as typed error messages."""

    async def body(client: ControlClient, env: Any) -> None:
        await env.execute("CREATE TABLE t (k int NOT NULL, v text)")
        await env.execute("ALTER TABLE t SET (RETAIN HISTORY FOR '10m')")
        t1 = (await env.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")).time
        t2 = (await env.execute("UPDATE t SET v = 'c' WHERE k = 1")).time
        got = await _all(
            client,
            f"SUBSCRIBE t ENVELOPE UPSERT (KEY (k)) WITH (PROGRESS) AS OF {t1} UP TO {t2 + 1};"
            "SELECT 7 AS seven",
        )
        kinds = [m["type"] for m in got]
        assert kinds[:2] == ["CommandStarting", "Rows"] and kinds[-1] == "ReadyForQuery"
        columns = got[1]["payload"]["columns"]
        assert [(c["name"], c["type"]) for c in columns] == [
            ("mz_timestamp", "numeric"),
            ("mz_progressed", "boolean"),
            ("mz_state", "text"),
            ("k", "integer"),
            ("v", "text"),
        ]
        first_complete = kinds.index("CommandComplete")
        rows = [m["payload"] for m in got[2:first_complete]]
        assert all(m == "Row" for m in kinds[2:first_complete])
        assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows)
        assert [r for r in rows if r[1] is False] == [
            [t1, False, "upsert", 1, "a"],
            [t1, False, "upsert", 2, "b"],
            [t2, False, "upsert", 1, "c"],
        ]
        assert got[first_complete]["payload"] == f"SUBSCRIBE {len(rows)}"
        assert [m["payload"] for m in got if m["type"] == "Row"][-1] == [7]
        with anyio.fail_after(60):
            while _transient(env):  # the complete subscribe was dropped
                await anyio.sleep(0.05)

        equal = await _all(client, f"SUBSCRIBE t AS OF {t2} UP TO {t2}")
        assert [m["type"] for m in equal] == [
            *("Notice", "CommandStarting", "Rows", "CommandComplete", "ReadyForQuery")
        ]
        assert equal[-2]["payload"] == "SUBSCRIBE 0"
        for sql, code in [
            ("SUBSCRIBE t WITH (SNAPSHOT = maybe)", "22023"),
            ("SUBSCRIBE t WITH (FAST)", "42601"),
            (f"SUBSCRIBE t AS OF {t2} UP TO {t1}", "22000"),
            ("SUBSCRIBE t ENVELOPE UPSERT (KEY (nope))", "42703"),
        ]:
            refused = await _all(client, sql)
            assert [m["type"] for m in refused] == ["Error", "ReadyForQuery"], sql
            assert refused[0]["payload"]["code"] == code, sql
        assert not _transient(env)

        # the shell: a bounded SUBSCRIBE prints its rows and its tag, then the script goes on
        ControllerInfo(client.info.address, "tok", os.getpid(), str(tmp_path)).write()
        script = [
            *("-c", f"SUBSCRIBE t WITH (SNAPSHOT = false) AS OF {t1} UP TO {t2 + 1}"),
            *("-c", "SELECT 7 AS seven"),
        ]
        code = await anyio.to_thread.run_sync(main, ["sql", *script, "--data-dir", str(tmp_path)])
        assert code == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split("\t") == ["mz_timestamp", "mz_diff", "k", "v"]
        assert sorted(out[1:3]) == [f"{t2}\t-1\t1\ta", f"{t2}\t1\t1\tc"]
        assert out[3] == "SUBSCRIBE 2" and "seven" in out[4]

        # tidegate subscribe --up-to ends by itself (status 0), --no-snapshot leaves t1 out
        args = ["subscribe", "t", "--as-of", str(t1), "--up-to", str(t2 + 1), "--no-snapshot"]
        code = await anyio.to_thread.run_sync(main, [*args, "--data-dir", str(tmp_path)])
        assert code == 0
        shown = capsys.readouterr().out.splitlines()
        assert shown[0].split() == ["TIME", "DIFF", "k", "v"]
        assert sorted(line.split()[-3:] for line in shown[1:]) == [
            ["+1", "1", "c"],
            ["-1", "1", "a"],
        ]

    served(tmp_path, body)
