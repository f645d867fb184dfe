"""Sources in the Environment: a load generator ingested by a managed storage replica process.

The storage replica is a real ``tidegate replica --services storage`` child
process of the orchestrator; the compute replica runs in this process. What a
source holds at a time is checked against the load generator itself: the
source's progress collection says up to which offset its data is reflected at
that time, and a counter's offsets ``[0, b)`` are exactly the rows
``1 .. b``. So a peek that matches at every time read has lost nothing and
duplicated nothing -- also across a SIGKILL of the storage replica and a
restart of the controller.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import anyio
import pytest
from retention import keep_history

from tidegate.dsl import col
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import SourceSchemaMismatch
from tidegate.runtime.errors import (
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from tidegate.spec.errors import IdentifierInvalid, InvalidUsage, WrongObjectType
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import LoadGenerator, loadgen_updates

pytestmark = pytest.mark.timeout(180)

COUNTER = LoadGenerator("counter", tick_ms=20)
OPTIONS: dict[str, Any] = {"tick_ms": 100, "storage_tick_ms": 50}


def counter_rows(binding: int) -> list[tuple[tuple[int], int]]:
    """What a counter source holds once offsets ``[0, binding)`` are in: rows 1..binding."""
    return [((n,), 1) for n in range(1, binding + 1)]


async def binding_at(env: Environment, source: str, t: int) -> int:
    rows = await env.peek(f"{source}_progress", t)
    assert all(n == 1 for _, n in rows), rows
    return int(rows[0][0][0]) if rows else 0


async def check_consistent(env: Environment, source: str, index: str | None = None) -> int:
    """Read ``source`` (and its index) at the freshest time; both match the load generator
    at the binding of that time. Returns the binding."""
    t = await env.freshest(source)
    b = await binding_at(env, source, t)
    assert sorted(await env.peek(source, t)) == counter_rows(b)
    if index is not None:
        assert sorted(await env.peek(index, t)) == counter_rows(b)
    return b


async def until_binding_passes(env: Environment, source: str, at_least: int) -> int:
    with anyio.fail_after(30):
        while True:
            b = await check_consistent(env, source)
            if b > at_least:
                return b
            await anyio.sleep(0.05)


@pytest.mark.processes
def test_a_load_generator_source_reads_like_a_table_and_survives_a_storage_replica_kill(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                gid = await env.create_source("c", COUNTER)
                await keep_history(env, "c", "c_progress")  # read at remembered times
                assert env.schema("c") == Schema.of(("counter", "int64", False))
                assert env.schema("c_progress") == Schema.of(("offset_upper", "int64", False))
                assert env.orchestrator is not None  # started for the storage replica
                assert env.orchestrator.status()["storage"].services == ("storage",)
                idx = await env.create_index("c", ["counter"], name="c_idx")
                await keep_history(env, idx)
                await env.wait_storage_connected(timeout_s=60)
                b = await until_binding_passes(env, "c", 3)
                await check_consistent(env, "c", "c_idx")

                # an index, a materialized view and SQL read it like a table
                mv = await env.create_materialized_view(
                    "c_big", env.table("c").filter(col("counter") > 2)
                )
                await keep_history(env, mv)
                t = await env.freshest("c_big")
                bound = await binding_at(env, "c", t)
                assert sorted(await env.peek(mv, t)) == counter_rows(bound)[2:]
                result = await env.execute(f"SELECT count(*) FROM c AS OF {t}")
                assert result.rows == [(bound,)]

                # a subscribe's updates are the generator's, each at the time its offset got
                sub = await env.subscribe("c")
                async with sub:
                    await sub.__anext__()  # the snapshot
                    second = await sub.__anext__()
                lo, hi = int(second.lower.elements[0]), int(second.upper.elements[0])
                b_lo, b_hi = await binding_at(env, "c", lo - 1), await binding_at(env, "c", hi - 1)
                later = [(row, d) for _t, row, d in second.updates]
                expected = [
                    (row, d)
                    for o in range(b_lo, b_hi)
                    for row, _o, d in loadgen_updates(COUNTER, o)
                ]
                assert sorted(later) == sorted(expected)

                # SIGKILL the storage replica: it is restarted, the source resumes, nothing lost
                events = env.events()
                await env.orchestrator.kill("storage")
                seen = []
                with anyio.fail_after(60):
                    async for e in events:
                        if e.instance == "storage":
                            seen.append((e.status, e.epoch))
                            if e.status == "connected":
                                break
                assert ("failed", 1) in seen and ("rehydrating", 2) in seen
                assert seen[-1] == ("connected", 2)
                assert env.orchestrator.status()["storage"].restarts == 1
                assert env.storage_replica() is not None
                after = await until_binding_passes(env, "c", b + 5)
                await check_consistent(env, "c", "c_idx")

                # statistics come a replica tick after the data they count
                with anyio.fail_after(30):
                    while True:
                        [status] = env.storage_status("c")
                        stats = status.statistics or {}
                        if (stats.get("offset_committed") or 0) >= after:
                            break
                        await anyio.sleep(0.05)
                assert (status.kind, status.type, status.status) == (
                    "source",
                    "load-generator",
                    "running",
                )
                assert status.progress == env.resolve("c_progress")
                assert gid == env.resolve("c") and idx == env.resolve("c_idx")

    anyio.run(main)


@pytest.mark.processes
def test_sources_resume_after_a_controller_restart(tmp_path: Path) -> None:
    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.create_source("c", COUNTER)
                await keep_history(env, "c", "c_progress")  # read at remembered times
                await env.create_index("c", [], name="c_idx")
                await keep_history(env, "c_idx")
                before = await until_binding_passes(env, "c", 2)
                pid = env.orchestrator.status()["storage"].pid
            # closed: the storage replica stopped with the controller
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                assert {s.name for s in env.storage_status()} == {"c"}
                assert env.orchestrator.status()["storage"].pid != pid
                t = await env.freshest("c")
                assert await binding_at(env, "c", t) >= before  # nothing went back
                await until_binding_passes(env, "c", before + 3)
                await check_consistent(env, "c", "c_idx")
                # the status history kept the first run's rows and gets the second's
                with anyio.fail_after(30):
                    while True:
                        history = await env.execute(
                            "SELECT status, count(*) FROM mz_source_status_history GROUP BY status"
                        )
                        counts = dict(history.rows)
                        if counts.get("running", 0) >= 2:
                            break
                        await anyio.sleep(0.05)
                assert counts["starting"] >= 2

    anyio.run(main)


@pytest.mark.processes
def test_the_managed_collections_show_status_history_and_statistics(tmp_path: Path) -> None:
    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.execute(
                    "CREATE SOURCE ticks FROM LOAD GENERATOR COUNTER (TICK INTERVAL '20ms')"
                )
                for name in ("ticks", "ticks_progress"):  # read at remembered times below
                    await env.execute(f"ALTER SOURCE {name} SET (RETAIN HISTORY FOR '10m')")
                assert (await env.execute("SHOW SOURCES")).rows == [
                    ("ticks", "load-generator"),
                    ("ticks_progress", "progress"),
                ]
                # the system collections exist, and no SHOW lists them (as Materialize's)
                assert {e.name for e in env.state.entries()} >= {"mz_source_status_history"}
                assert (await env.execute("SHOW OBJECTS")).rows == [
                    ("ticks", "source"),
                    ("ticks_progress", "source"),
                ]
                b = await until_binding_passes(env, "ticks", 2)
                gid = str(env.resolve("ticks"))
                with anyio.fail_after(30):
                    while True:
                        rows = (
                            await env.execute(
                                "SELECT id, status FROM mz_source_status_history "
                                "WHERE status = 'running'"
                            )
                        ).rows
                        if rows:
                            break
                        await anyio.sleep(0.05)
                assert rows[0] == (gid, "running")
                # occurred_at, as Materialize's: when each change was recorded (UTC)
                history = await env.execute(
                    "SELECT occurred_at, status FROM mz_source_status_history "
                    f"WHERE id = '{gid}' ORDER BY occurred_at"
                )
                assert history.columns == ("occurred_at", "status")
                assert history.rows[-1][1] == "running"
                now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
                for at, _status in history.rows:
                    assert now - dt.timedelta(minutes=5) < at <= now + dt.timedelta(seconds=5)
                # one statistics row per live source, at every time; its
                # offset_committed is NULL until the replica reports its first ack
                with anyio.fail_after(30):
                    while True:
                        stats = await env.execute(
                            "SELECT id, offset_committed, updates_committed FROM mz_source_statistics"
                        )
                        assert len(stats.rows) <= 1
                        if stats.rows and (stats.rows[0][1] or 0) >= b:
                            break
                        await anyio.sleep(0.05)
                [(sid, committed, updates)] = stats.rows
                assert sid == gid and updates >= committed  # a counter: one update per offset
                # an index on a managed collection
                await env.create_index("mz_source_status_history", ["id"], name="hist_idx")
                assert any(
                    r[1:] == (gid, "running", None, None) for r, _ in await env.peek("hist_idx")
                )
                # SHOW CREATE keeps the statement; DROP SOURCE drops it and its progress
                shown = await env.execute("SHOW CREATE SOURCE ticks")
                assert "LOAD GENERATOR COUNTER" in shown.rows[0][1]
                await env.execute("DROP SOURCE ticks")
                assert (await env.execute("SHOW SOURCES")).rows == []
                with anyio.fail_after(30):
                    while True:
                        dropped = await env.execute(
                            f"SELECT count(*) FROM mz_source_status_history "
                            f"WHERE id = '{gid}' AND status = 'dropped'"
                        )
                        if dropped.rows == [(1,)]:
                            break
                        await anyio.sleep(0.05)
                stats = await env.execute("SELECT count(*) FROM mz_source_statistics")
                assert stats.rows == [(0,)]

    anyio.run(main)


@pytest.mark.processes
def test_bad_input_is_typed_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                before = env.state
                with pytest.raises(SourceSchemaMismatch):
                    await env.create_source("c", COUNTER, schema=Schema.of(("x", "string")))
                with pytest.raises(InvalidUsage):
                    await env.create_source("c", LoadGenerator("counter", tick_ms=0))
                with pytest.raises(DuplicateCatalogName):
                    await env.create_source("t", COUNTER)
                with pytest.raises(InvalidCatalogOp):
                    await env.create_source("c", "counter")  # type: ignore[arg-type]
                assert env.state == before  # nothing recorded
                assert env.orchestrator is None  # and no storage replica was started

                await env.create_source("c", COUNTER)
                after = env.state
                with pytest.raises(DuplicateCatalogName):  # its progress collection's name
                    await env.create_table("c_progress", Schema.of(("x", "int64", False)))
                with pytest.raises(IdentifierInvalid):
                    await env.append("c", [(1,)])
                with pytest.raises(InvalidCatalogOp):  # drop the source, not its progress
                    await env.drop("c_progress")
                with pytest.raises(InvalidCatalogOp):
                    await env.drop("mz_source_status_history")
                with pytest.raises(WrongObjectType):
                    await env.execute("INSERT INTO c VALUES (1)")
                await env.create_index("c", [], name="c_idx")
                with pytest.raises(HasDependents):
                    await env.drop("c")
                with pytest.raises(UnknownCatalogObject):
                    env.storage_status("t")
                assert env.state.sources == after.sources
                ids = [env.resolve(n) for n in ("c", "c_progress", "c_idx")]
                assert await env.drop("c", cascade=True) == sorted(ids, reverse=True)
                assert env.storage_status() == []

    anyio.run(main)


def test_an_unmanaged_storage_replica_at_an_address(tmp_path: Path) -> None:
    """``storage_replica=`` names a storage replica someone else runs (here in this process):
    no orchestrator is started for it, and a reopen without the option keeps using it."""
    from tidegate.replica.testing import in_process_storage_replica

    async def main() -> None:
        with (
            in_process_replica(tmp_path) as compute,
            in_process_storage_replica(tmp_path, token="s3cret") as storage,
            anyio.fail_after(120),
        ):
            options = {**OPTIONS, "replicas": {"r1": compute}, "token": "s3cret"}
            async with Environment.open(tmp_path, storage_replica=storage, **options) as env:
                assert env.state.storage_replica is not None
                assert env.state.storage_replica.address == storage
                await env.create_source("c", COUNTER)
                await keep_history(env, "c", "c_progress")  # read at remembered times
                await env.wait_storage_connected(timeout_s=30)
                info = env.storage_replica()
                assert info is not None and info.address == storage
                b = await until_binding_passes(env, "c", 2)
                assert env.orchestrator is None
            async with Environment.open(tmp_path, **options) as env:  # recorded in the catalog
                await env.wait_storage_connected(timeout_s=30)
                await until_binding_passes(env, "c", b + 2)
                assert env.orchestrator is None

    anyio.run(main)


@pytest.mark.processes
def test_status_histories_written_without_occurred_at_are_left_for_shards_of_their_own(
    tmp_path: Path,
) -> None:
    """A data directory written before the status histories had ``occurred_at`` holds their
    four-column shards ``s1`` and ``s2``: the histories go on in shards of their own
    (``s1.v2``, as Materialize's builtin migrations give a changed collection a new shard),
    so such a directory opens and records statuses again."""
    from tidegate.runtime.controller.schemas import arrow_schema, shard_name
    from tidegate.runtime.storage import ShardStore
    from tidegate.runtime.storage.urls import default_urls, open_blob, open_consensus
    from tidegate.spec.ids import GlobalId
    from tidegate.spec.plan import Schema

    assert shard_name(GlobalId.system(1)) == "s1.v2"

    async def running(env: Any) -> list[Any]:
        with anyio.fail_after(60):
            while True:
                rows = (
                    await env.execute("SELECT occurred_at, status FROM mz_source_status_history")
                ).rows
                if any(status == "running" for _at, status in rows):
                    return rows
                await anyio.sleep(0.05)

    async def first() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.execute("CREATE SOURCE ticks FROM LOAD GENERATOR COUNTER")
                await running(env)

    anyio.run(first)
    # what the data directory of an earlier version held besides: the four-column histories
    old = Schema.of(
        ("id", "string", False),
        ("status", "string", False),
        ("error", "string"),
        ("hint", "string"),
    )
    blob, consensus = default_urls(str(tmp_path))
    store = ShardStore(open_blob(blob), open_consensus(consensus), owns_backends=True)
    for old_shard in ("s1", "s2"):
        store.create_shard(old_shard, arrow_schema(old))
        store.compare_and_append(old_shard, [(("u1", "running", None, None), 0, 1)], 0, 1)
    store.close()

    async def again() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                rows = await running(env)
                assert all(isinstance(at, dt.datetime) for at, _status in rows)

    anyio.run(again)
    # the earlier shards are left as they were: no collection's, never taken for garbage
    store = ShardStore(open_blob(blob), open_consensus(consensus), owns_backends=True)
    try:
        assert {"s1", "s2", "s1.v2", "s2.v2"} <= set(store.list_shards())
        assert not store.state("s1").finalized
        assert [(r, d) for r, _t, d in store.snapshot_rows("s1", 0)] == [
            (("u1", "running", None, None), 1)
        ]
    finally:
        store.close()


@pytest.mark.processes
def test_the_demo_shows_a_source_s_status_once_it_holds_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tidegate demo`` showed ``UPPER 0 (1970-01-01...)`` when it read the status as soon as
    the replica said ``running``, which it says before its first commit: it waits for that
    commit, so the upper it shows is that data's time."""
    from tidegate.commands.demo import SOURCE, Demo, DemoOptions
    from tidegate.runtime.platform import wall_ms

    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                before = wall_ms() - 60_000  # times follow the wall clock
                # a slow generator: its first data comes a while after it runs
                await env.execute(
                    f"CREATE SOURCE {SOURCE} FROM LOAD GENERATOR AUCTION (TICK INTERVAL '2s')"
                )
                demo = Demo(DemoOptions(timeout_s=60), tmp_path)
                status = await demo.source_running(env)
                demo.show_source_status(status)
                assert not demo.tally.failures
                assert status.status == "running" and int(status.upper.elements[0]) >= before

    anyio.run(main)
    shown = capsys.readouterr().out
    assert "running" in shown and "1970-01-01" not in shown
