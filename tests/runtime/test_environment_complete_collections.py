"""Collections whose frontier is complete (the empty antichain) stay readable.

A materialized view with no inputs (``SELECT 1``) is complete as soon as its
dataflow ran once: its upper, and its dataflow's write frontier, become ``[]``.
It used to become unreadable then (a peek: ``CollectionMissing``, as the fresh
read time was taken from its write-only dataflow, whose since a complete write
frontier releases; a query over it: ``EmptyAsOfForSubscribe``, as the as-of
selection gave a dataflow whose inputs are all complete the empty as_of).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment

pytestmark = pytest.mark.timeout(180)


def _run(body: Any, tmp_path: Path) -> None:
    async def go() -> None:
        with replica(tmp_path) as r1, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r1}) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)


def test_a_materialized_view_without_inputs_stays_readable_once_complete(tmp_path: Path) -> None:
    async def body(env: Any) -> None:
        await env.execute("CREATE MATERIALIZED VIEW k AS SELECT 1 AS one")
        gid = env.resolve("k")
        # Complete: its shard's upper is empty, and its dataflow (write-only) released its
        # since once its write frontier was empty (the state the reads used to fail in).
        with anyio.fail_after(60):
            while env.frontiers(gid)[1].elements or env.driver.frontiers(gid)[0].elements:
                await anyio.sleep(0.05)
        assert env.frontiers(gid)[0].elements  # it keeps a since: it is readable
        assert (await env.execute("SELECT * FROM k")).rows == [(1,)]  # a peek of its shard
        assert (await env.execute("SELECT one + 1 AS two FROM k")).rows == [(2,)]  # a dataflow
        assert [tuple(r) for r, _ in await env.peek("k")] == [(1,)]
        # A subscribe of it ends: its batches hold the row once, the last one's upper is empty.
        sub = await env.subscribe_sql("SUBSCRIBE TO k")
        batches = [b async for b in sub]
        assert [(r, d) for b in batches for _t, r, d in b.updates] == [((1,), 1)]
        assert not batches[-1].upper.elements and batches[-1].error is None

    _run(body, tmp_path)


def test_a_fresh_read_of_a_constant_comes_after_every_acknowledged_write(tmp_path: Path) -> None:
    """A constant has no durable inputs to wait for, yet a fresh read of it still takes the
    oracle's read timestamp: it used to take the view's since, before writes acknowledged
    earlier (the simulator's copy-to check found it: a fresh copy-to wrote the contents at a
    time before an acknowledged append)."""

    async def body(env: Any) -> None:
        await env.execute("CREATE MATERIALIZED VIEW k AS SELECT 1 AS one")
        await env.execute("CREATE TABLE t (x BIGINT)")
        gid = env.resolve("k")
        with anyio.fail_after(60):
            while env.frontiers(gid)[1].elements:
                await anyio.sleep(0.05)
        since = int(env.frontiers(gid)[0].elements[0])
        for _ in range(3):
            written = await env.append("t", [(1,)])
            assert written > since
            assert await env.freshest("k") >= written
            out = tmp_path / f"copy-{written}"
            assert await env.copy_to("k", f"file://{out}") == 1
            (name,) = [p.name for p in out.iterdir()]
            assert int(name.split("-")[2]) >= written  # part-<id>-<time>-<n>.parquet

    _run(body, tmp_path)
