"""Text that is not Unicode scalar values never stops an environment (one python replica process).

The reproducer: ``Environment.execute("SELECT '\\udc80'")`` on an environment with
one replica reached the protobuf encoder in the replica link's sender task and
ended the environment's task group. Now every boundary refuses such text with
a typed error and nothing changes (SQL text: SQLSTATE 22021; names, row values,
keys, frames, connections: :class:`InvalidText`), the driver checks what a
client hands the controller, and a command the wire still cannot encode ends
only its link's stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.controller.driver import sendable
from tidegate.spec.errors import (
    CharacterNotInRepertoire,
    InvalidText,
    SqlError,
    TidegateError,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.plan import Get
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.storage import PostgresSource

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]

BAD = "a\udc80b"


async def _answers(env: Any) -> None:
    """A normal query still answers."""
    result = await env.execute("SELECT k, v FROM t ORDER BY k")
    assert result.rows == [("a", "b")]


def test_no_text_that_is_not_unicode_stops_the_environment(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(180):
            async with Environment.open(tmp_path, replicas=1, executor="python") as env:
                await env.wait_connected(timeout_s=60)
                await env.execute("CREATE TABLE t (k text NOT NULL, v text)")
                await env.execute("CREATE INDEX t_k ON t (k)")
                await env.execute("INSERT INTO t VALUES ('a', 'b')")
                before = env.state

                # SQL: in a literal, an identifier, a comment, a parameter: 22021, typed.
                for sql in (
                    f"SELECT '{BAD}'",
                    f'SELECT 1 AS "{BAD}"',
                    f"SELECT 1 -- {BAD}",
                    f"INSERT INTO t VALUES ('{BAD}', 'x')",
                    f"CREATE TABLE {BAD} (x bigint)",
                ):
                    with pytest.raises(CharacterNotInRepertoire) as e:
                        await env.execute(sql)
                    assert e.value.sqlstate == "22021" and "U+DC80" in e.value.render()
                with pytest.raises(CharacterNotInRepertoire):
                    await env.execute("INSERT INTO t VALUES ($1, 'x')", [BAD])
                with pytest.raises(CharacterNotInRepertoire):
                    await env.subscribe_sql("SELECT $1::text", [BAD])

                # Appends, as tuples, pairs and frames; a key peek; names.
                with pytest.raises(InvalidText):
                    await env.append("t", [(BAD, "x")])
                with pytest.raises(InvalidText):
                    await env.append("t", [(("x", BAD), 1)])
                import pandas as pd

                with pytest.raises(InvalidText):
                    frame = pd.DataFrame(
                        {"k": pd.Series([BAD], dtype=object), "v": pd.Series(["x"], dtype=object)}
                    )
                    await env.append("t", frame)
                with pytest.raises(InvalidText):
                    await env.peek("t_k", key=(BAD,))
                with pytest.raises(TidegateError):
                    await env.create_table(BAD, Schema.of(("x", "int64")))
                with pytest.raises(InvalidText):
                    await env.create_table("u", Schema.of((BAD, "int64")))
                with pytest.raises(InvalidText):
                    await env.create_source(
                        "s", PostgresSource(f"postgresql://{BAD}@localhost/x", "t", "p", "slot")
                    )
                with pytest.raises(TidegateError):
                    await env.add_replica(BAD, "127.0.0.1:1")
                assert env.state == before
                await _answers(env)

    anyio.run(main)


def test_a_command_the_wire_cannot_encode_ends_only_its_stream(tmp_path: Path) -> None:
    """Defence in depth: a dataflow that reaches the controller past every check (here: put in
    by hand, with a debug name no encoder takes) fails its link's stream, never the driver;
    dropped, the replica reconnects and everything answers."""

    async def main() -> None:
        with anyio.fail_after(180):
            async with Environment.open(tmp_path, replicas=1, executor="python") as env:
                await env.wait_connected(timeout_s=60)
                await env.execute("CREATE TABLE t (k text NOT NULL, v text)")
                await env.execute("INSERT INTO t VALUES ('a', 'b')")
                gid = env.resolve("t")
                schema = env.schema("t")
                exported = env.driver.new_transient_id()
                df = DataflowDescription(
                    BAD,
                    source_imports=(SourceImport(gid),),
                    objects_to_build=(BuildDesc(exported, Get(gid, schema)),),
                    index_exports=(IndexExport(exported, exported, (0,)),),
                    as_of=Antichain([(await env.freshest("t"))]),
                )
                with pytest.raises(InvalidText):  # the driver's own check
                    env.driver.create_dataflow(df)
                with pytest.raises(InvalidText):
                    sendable(df, "dataflow")
                events = env.events()
                env.driver.ctl.compute.create_dataflow("default", df, None)  # past the check
                env.driver.apply()
                async for e in events:
                    if e.replica == "r1" and e.status == "failed":
                        assert "could not be encoded" in (e.reason or "")
                        break
                env.driver.drop_collections([exported])
                await env.wait_connected(timeout_s=60)
                await _answers(env)

    anyio.run(main)


def test_sql_errors_render_a_lone_surrogate_printably() -> None:
    error = CharacterNotInRepertoire("bad", position=9, sql=f"SELECT '{BAD}'")
    rendered = error.render()
    assert rendered.encode("utf-8") and "\ufffd" in rendered
    assert isinstance(error, SqlError) and isinstance(error, InvalidText)
