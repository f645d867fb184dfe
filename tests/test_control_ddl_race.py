"""Regression: a ``drop --cascade`` racing a ``create-index`` through the control
endpoint was applied (the table and the new index were both dropped) but answered 400 (``missing
field``): the answer named the dropped objects from a list taken before the drop waited for the
index's DDL. The answer now matches what happened: 200, naming every dropped object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.service import ControlService
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment

pytestmark = pytest.mark.timeout(180)

COLUMNS = [{"name": "k", "type": "int64", "nullable": False}]


def test_a_cascading_drop_racing_a_create_index_answers_what_it_dropped(tmp_path: Path) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                service = ControlService(env, wait_s=30)
                await service.handle("POST", "/create-table", {"name": "t", "columns": COLUMNS})
                answers: dict[str, Any] = {}

                async def call(what: str, path: str, body: dict[str, Any]) -> None:
                    try:
                        answers[what] = await service.handle("POST", path, body)
                    except Exception as e:
                        answers[what] = e

                async with anyio.create_task_group() as tg:
                    # The index's DDL starts first and holds the DDL lock across its catalog
                    # write; the drop resolves its name meanwhile, then waits for the lock.
                    tg.start_soon(call, "index", "/create-index", {"on": "t", "keys": ["k"]})
                    tg.start_soon(call, "drop", "/drop", {"name": "t", "cascade": True})
                index, drop = answers["index"], answers["drop"]
                assert isinstance(index, dict), index  # created...
                assert isinstance(drop, dict), drop  # ...and dropped with the table: 200
                dropped = {d["name"]: d["kind"] for d in drop["dropped"]}
                assert dropped == {"t": "table", index["name"]: "index"}
                assert [e.name for e in env.state.entries()] == []

    anyio.run(main)
