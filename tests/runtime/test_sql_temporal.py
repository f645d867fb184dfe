"""Temporal filters end to end: ``mz_now()`` in views, indexes, materialized views and
SELECTs over a real Environment (an in-process replica over gRPC). A view over "the last
three seconds" loses its rows as time passes, with no new input; every answer is checked
against the rows valid at the very time it was read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.spec.errors import UnsupportedSql
from tidegate.spec.frontier import accumulate

pytestmark = pytest.mark.timeout(180)

WINDOW_MS = 3000


def _valid(rows: dict[int, int], t: int) -> list[tuple[int]]:
    """The ids whose window ``[ms, ms + WINDOW_MS)`` holds ``t``."""
    return sorted((i,) for i, ms in rows.items() if ms <= t < ms + WINDOW_MS)


def test_a_view_over_the_last_seconds_forgets_rows_as_time_passes(tmp_path: Path) -> None:
    async def body(env: Any) -> None:
        await env.execute("CREATE TABLE ev (id BIGINT NOT NULL, ms BIGINT)")
        await env.execute("CREATE TABLE clock (x BIGINT)")
        now = (await env.execute("INSERT INTO clock VALUES (1)")).time
        assert now is not None
        # 1: valid now; 2: from two seconds on; 3: long expired; 4: NULL never valid
        rows = {1: now, 2: now + 2000, 3: now - 60_000}
        await env.execute(
            f"INSERT INTO ev VALUES (1, {rows[1]}), (2, {rows[2]}), (3, {rows[3]}), (4, NULL)"
        )
        window = f"mz_now() >= ms AND mz_now() < ms + {WINDOW_MS}"
        await env.execute(f"CREATE VIEW recent AS SELECT id FROM ev WHERE {window}")
        await env.execute("CREATE INDEX recent_idx ON recent (id)")
        await env.execute(
            "CREATE MATERIALIZED VIEW recent_count AS "
            f"SELECT count(*) AS n FROM ev WHERE mz_now() BETWEEN ms AND ms + {WINDOW_MS - 1}"
        )
        explained = (await env.execute("EXPLAIN SELECT * FROM recent")).rows
        assert any("TemporalFilter mz_now() >= " in str(r) for r in explained), explained
        # the view, subscribed: every time's contents are exactly the rows valid then
        end = rows[2] + WINDOW_MS
        sub = await env.subscribe_sql("SUBSCRIBE TO recent")
        updates: list[tuple[tuple[int], int, int]] = []
        lower: int | None = None
        with anyio.fail_after(60):
            async for batch in sub:  # no writes from here on: only time passes
                lower = int(batch.lower.elements[0]) if lower is None else lower
                updates.extend((row, t, d) for t, row, d in batch.updates)
                upper = int(batch.upper.elements[0])
                if upper > end:
                    break
        await sub.aclose()
        assert lower is not None
        for t in range(lower, end + 1):
            assert sorted(accumulate(updates, t)) == _valid(rows, t), t - now
        assert any(t == rows[1] + WINDOW_MS and d == -1 for _r, t, d in updates)
        # reads once: each answer is the state before or the next, until the empty one
        states = [[(1,)], [(1,), (2,)], [(2,)], []]
        reached = {"view": 0, "direct": 0}
        count = 1
        with anyio.fail_after(60):
            while min(reached.values()) < len(states) - 1 or count:
                got = {
                    "view": await env.execute("SELECT id FROM recent ORDER BY id"),
                    "direct": await env.execute(f"SELECT id FROM ev WHERE {window} ORDER BY id"),
                }
                for what, answer in got.items():
                    assert answer.rows in states, (what, answer.rows)
                    k = states.index(answer.rows)
                    assert k >= reached[what], (what, answer.rows, states[reached[what]])
                    reached[what] = k
                (count,) = (await env.execute("SELECT n FROM recent_count")).rows[0]
                assert count in (0, 1, 2)
                await anyio.sleep(0.05)
        with pytest.raises(UnsupportedSql, match="mz_now"):
            await env.execute("CREATE MATERIALIZED VIEW bad AS SELECT mz_now(), id FROM ev")
        with pytest.raises(UnsupportedSql, match="temporal predicate"):
            await env.execute("CREATE VIEW bad AS SELECT id FROM ev WHERE mz_now() > ms OR id = 1")
        with pytest.raises(UnsupportedSql, match="write statements"):
            await env.execute(f"INSERT INTO clock SELECT id FROM ev WHERE {window}")
        assert "bad" not in str((await env.execute("SHOW OBJECTS")).rows)

    async def go() -> None:
        with replica(tmp_path) as r1, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r1}) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)
