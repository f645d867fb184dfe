"""``SUBSCRIBE``'s options through a real Environment (an in-process python-executor replica over
gRPC): ``AS OF``/``UP TO`` bounds (inclusive, exclusive) and completion, ``WITH (SNAPSHOT =
false)``, ``ENVELOPE UPSERT``/``DEBEZIUM`` with ``PROGRESS``, and the refusals, judged against
the times the writes were acknowledged at and Materialize's documented semantics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.spec.errors import (
    AbsurdSubscribeBounds,
    InvalidAsOf,
    UndefinedColumn,
    UnsupportedSql,
)

pytestmark = pytest.mark.timeout(180)


def _run(body: Any, tmp_path: Path) -> None:
    async def go() -> None:
        with replica(tmp_path) as r1, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r1}) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)


def _transient(env: Any) -> list[Any]:
    view = env.driver.ctl.compute.instance("default")
    return [g for g in view.collection_ids() if g.namespace == "t"]


async def _gone(env: Any) -> None:
    """Wait until no subscribe dataflow is left (a complete one is dropped)."""
    with anyio.fail_after(60):
        while _transient(env):
            await anyio.sleep(0.05)


async def _history(env: Any) -> list[int]:
    """Table t with rows 1, 2, 3 written at three times (returned), history kept."""
    await env.execute("CREATE TABLE t (x bigint NOT NULL)")
    await env.execute("ALTER TABLE t SET (RETAIN HISTORY FOR '10m')")
    times = []
    for x in (1, 2, 3):
        times.append((await env.execute(f"INSERT INTO t VALUES ({x})")).time)
    assert times == sorted(set(times))
    return times


def test_as_of_and_up_to_bound_the_changes_and_the_subscribe_ends(tmp_path: Path) -> None:
    async def body(env: Any) -> None:
        t1, t2, t3 = await _history(env)
        res = await env.execute(f"SUBSCRIBE t AS OF {t1} UP TO {t3}")
        # AS OF inclusive (row 1, as the snapshot at t1), UP TO exclusive (row 3 left out)
        assert res.columns == ("mz_timestamp", "mz_diff", "x")
        assert res.rows == [(t1, 1, 1), (t2, 1, 2)]
        assert res.status == "SUBSCRIBE 2"
        await _gone(env)
        no_snap = await env.execute(f"SUBSCRIBE t WITH (SNAPSHOT = false) AS OF {t1} UP TO {t3}")
        assert no_snap.rows == [(t2, 1, 2)]
        later = await env.execute(f"SUBSCRIBE t WITH (SNAPSHOT = false) AS OF {t1} UP TO {t3 + 1}")
        assert later.rows == [(t2, 1, 2), (t3, 1, 3)]
        snap_later = await env.execute(f"SUBSCRIBE t AS OF {t2} UP TO {t3 + 1}")
        assert snap_later.rows == [(t2, 1, 1), (t2, 1, 2), (t3, 1, 3)]
        # AS OF = UP TO: Materialize ends it at once, with nothing
        assert (await env.execute(f"SUBSCRIBE t AS OF {t2} UP TO {t2}")).rows == []
        await _gone(env)

    _run(body, tmp_path)


def test_progress_with_bounds_starts_at_the_as_of_and_says_how_far_it_got(tmp_path: Path) -> None:
    async def body(env: Any) -> None:
        t1, t2, t3 = await _history(env)
        res = await env.execute(f"SUBSCRIBE t WITH (PROGRESS) AS OF {t1} UP TO {t3}")
        assert res.columns == ("mz_timestamp", "mz_progressed", "mz_diff", "x")
        assert res.rows[0] == (t1, True, None, None)
        assert [r for r in res.rows if not r[1]] == [(t1, False, 1, 1), (t2, False, 1, 2)]
        progress = [r[0] for r in res.rows if r[1]]
        assert progress == sorted(progress) and all(t1 <= p <= t3 for p in progress)
        stamps = [r[0] for r in res.rows]
        assert stamps == sorted(stamps)  # never backwards

    _run(body, tmp_path)


def test_a_subscribe_up_to_a_later_time_ends_when_the_frontier_gets_there(
    tmp_path: Path,
) -> None:
    """Nothing is written: the replica ends the stream when the table's frontier (ticking with
    the clock) passes UP TO; the dataflow is then dropped."""

    async def body(env: Any) -> None:
        await env.execute("CREATE TABLE t (x bigint NOT NULL)")
        at = (await env.execute("INSERT INTO t VALUES (7)")).time
        up_to = at + 1500
        sub = await env.subscribe_sql(f"SUBSCRIBE t UP TO {up_to}")
        seen: list[tuple[int, tuple[Any, ...], int]] = []
        uppers = []
        with anyio.fail_after(60):
            async for batch in sub:
                seen.extend(batch.updates)
                uppers.append(batch.upper)
        assert [(r, d) for _t, r, d in seen] == [((7,), 1)]
        assert not uppers[-1].elements  # the last batch ends at []
        assert all(int(u.elements[0]) <= up_to for u in uppers[:-1])
        await _gone(env)
        # a write after UP TO is not seen by a bounded subscribe that ended
        await env.execute("INSERT INTO t VALUES (8)")
        assert len(seen) == 1

    _run(body, tmp_path)


def test_envelope_upsert_and_debezium_show_each_key_s_state(tmp_path: Path) -> None:
    """Materialize's kv_store example: keys 1 and 2 in, key 3 in, key 1 updated, all deleted."""

    async def body(env: Any) -> None:
        await env.execute("CREATE TABLE kv (value bigint, key bigint NOT NULL)")
        await env.execute("ALTER TABLE kv SET (RETAIN HISTORY FOR '10m')")
        w = [(await env.execute("INSERT INTO kv VALUES (2, 1), (4, 2)")).time]
        w.append((await env.execute("INSERT INTO kv VALUES (6, 3)")).time)
        w.append((await env.execute("UPDATE kv SET value = 10 WHERE key = 1")).time)
        w.append((await env.execute("DELETE FROM kv")).time)
        res = await env.execute(
            f"SUBSCRIBE kv ENVELOPE UPSERT (KEY (key)) WITH (PROGRESS) AS OF {w[0]} "
            f"UP TO {w[-1] + 1}"
        )
        assert res.columns == ("mz_timestamp", "mz_progressed", "mz_state", "key", "value")
        assert res.rows[0] == (w[0], True, None, None, None)
        assert [r for r in res.rows if r[1]][1:] == [
            r for r in res.rows[1:] if r[1] and r[2:] == (None, None, None)
        ]
        assert [r for r in res.rows if not r[1]] == [
            (w[0], False, "upsert", 1, 2),
            (w[0], False, "upsert", 2, 4),
            (w[1], False, "upsert", 3, 6),
            (w[2], False, "upsert", 1, 10),
            (w[3], False, "delete", 1, None),
            (w[3], False, "delete", 2, None),
            (w[3], False, "delete", 3, None),
        ]
        deb = await env.execute(
            f"SUBSCRIBE (SELECT key, value FROM kv) ENVELOPE DEBEZIUM (KEY (key)) "
            f"AS OF {w[0]} UP TO {w[-1] + 1}"
        )
        assert deb.columns == ("mz_timestamp", "mz_state", "key", "before_value", "after_value")
        assert deb.rows == [
            (w[0], "insert", 1, None, 2),
            (w[0], "insert", 2, None, 4),
            (w[1], "insert", 3, None, 6),
            (w[2], "upsert", 1, 2, 10),
            (w[3], "delete", 1, 10, None),
            (w[3], "delete", 2, 4, None),
            (w[3], "delete", 3, 6, None),
        ]

    _run(body, tmp_path)


def test_refusals_are_typed_and_leave_nothing_running(tmp_path: Path) -> None:
    async def body(env: Any) -> None:
        t1, t2, _t3 = await _history(env)
        with pytest.raises(AbsurdSubscribeBounds) as info:
            await env.execute(f"SUBSCRIBE t AS OF {t2} UP TO {t1}")
        assert info.value.sqlstate == "22000" and f"{t1} < {t2}" in str(info.value)
        with pytest.raises(AbsurdSubscribeBounds):  # before the chosen (freshest) as_of
            await env.subscribe_sql(f"SUBSCRIBE t UP TO {t1}")
        with pytest.raises(InvalidAsOf):  # before what t's history keeps
            await env.execute("SUBSCRIBE t AS OF 1 UP TO 2")
        with pytest.raises(UndefinedColumn, match='column "k" does not exist'):
            await env.execute("SUBSCRIBE t ENVELOPE UPSERT (KEY (k))")
        with pytest.raises(UnsupportedSql):
            await env.subscribe_sql("SUBSCRIBE t ENVELOPE UPSERT (KEY (x))")
        assert not _transient(env)
        # and the environment goes on serving subscribes
        res = await env.execute(f"SUBSCRIBE t AS OF {t1} UP TO {t2}")
        assert res.rows == [(t1, 1, 1)]

    _run(body, tmp_path)
