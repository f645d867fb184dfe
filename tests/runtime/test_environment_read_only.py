"""Zero-downtime upgrades: an environment opened read-only beside the writer, then promoted.

Two environments on one data directory, each with its own replicas: the
first writes; the second (``read_only=True``) restores everything, serves
peeks and subscribes of what the first appended and writes nothing (the
catalog, the oracle and every shard's data are as they were; no
``AllowWrites`` is sent). ``promote()`` fences the first: its next append and
its next DDL raise ``EnvironmentFenced``, the second writes and its
materialized views' outputs advance, and no acknowledged append is lost.
Replicas run in-process (python executor) except in the managed-replica test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from retention import keep_history

from tidegate.dsl import Schema, col, constant
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.catalog import DEFAULT_CATALOG_KEY
from tidegate.runtime.controller.storage_io import CONTROLLER_READER
from tidegate.runtime.errors import (
    AppendOutcomeUnknown,
    EnvironmentFenced,
    InvalidEnvironmentOptions,
    ReadOnlyEnvironment,
)
from tidegate.runtime.oracle import DEFAULT_ORACLE_KEY
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.spec.compute import SendCommand
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.protocol.commands import AllowWrites

pytestmark = pytest.mark.timeout(180)

BACKENDS = ["asyncio", "trio"]
SCHEMA = Schema.of(("x", "int64", False))


def run(backend: str, main: Callable[[], Any]) -> None:
    anyio.run(main, backend=backend)


def shards(store: ShardStore) -> list[str]:
    """The collections' shards (the catalog and the oracle have consensus keys of their own)."""
    return [s for s in store.list_shards() if not s.startswith("tidegate/")]


def durable(data_dir: Path) -> dict[str, Any]:
    """What a writer writes: the catalog and oracle versions, every shard's upper and batches."""
    store = ShardStore.open(*default_urls(data_dir))
    try:
        out: dict[str, Any] = {}
        for key in (DEFAULT_CATALOG_KEY, DEFAULT_ORACLE_KEY):
            head = store.consensus.head(key)
            out[key] = None if head is None else (head.seqno, head.data)
        for shard in shards(store):
            state = store.state(shard)
            out[shard] = (state.upper, state.batch_keys)
        return out
    finally:
        store.close()


def critical_readers(data_dir: Path) -> dict[str, dict[str, int]]:
    """Every shard's critical readers with their opaques."""
    store = ShardStore.open(*default_urls(data_dir))
    try:
        return {
            s: {r: c.opaque for r, c in store.state(s).critical_readers.items()}
            for s in shards(store)
        }
    finally:
        store.close()


def allow_writes_sent(env: Environment) -> list[Any]:
    """Record every ``AllowWrites`` the environment's controller sends (a list that grows)."""
    sent: list[Any] = []

    def observe(effect: Any) -> None:
        if isinstance(effect, SendCommand) and isinstance(effect.command, AllowWrites):
            sent.append(effect.command.id)

    env.driver.observers.append(observe)
    return sent


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_serves_writes_nothing_then_promotion_fences_the_writer(
    tmp_path: Path, backend: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(120), replica(tmp_path) as a, replica(tmp_path) as b:
            # The writer ticks rarely, so that nothing moves while the read-only one is checked.
            async with Environment.open(
                tmp_path, replicas={"r1": a}, executor="python", tick_ms=3_600_000
            ) as old:
                await old.wait_connected(timeout_s=30)
                await old.create_table("t", SCHEMA)
                idx = await old.create_index(old.table("t"), ["x"], name="t_idx")
                await old.create_materialized_view("big", old.table("t").filter(col("x") > 1))
                await keep_history(old, "big", "t_idx")  # read at remembered times after waits
                t1 = await old.append("t", [(1,), (2,)])
                await old.wait_for("big", t1, timeout_s=30)
                before = durable(tmp_path)

                async with Environment.open(
                    tmp_path, replicas={"r1": b}, read_only=True, tick_ms=50, poll_ms=20
                ) as new:
                    assert new.read_only
                    sent = allow_writes_sent(new)
                    await new.wait_connected(timeout_s=30)
                    # It serves peeks (an index and a view) and subscribes of the writer's data.
                    assert sorted(await new.peek("t_idx")) == [((1,), 1), ((2,), 1)]
                    assert await new.peek("big") == [((2,), 1)]
                    assert await new.peek(idx, at=t1) == [((1,), 1), ((2,), 1)]
                    sub = await new.subscribe(new.table("t"))
                    async with sub:
                        first = await sub.__anext__()
                        assert sorted(r for _t, r, _d in first.updates) == [(1,), (2,)]
                    # Every write is refused, typed, and changes nothing.
                    with pytest.raises(ReadOnlyEnvironment):
                        await new.append("t", [(9,)])
                    with pytest.raises(ReadOnlyEnvironment):
                        await new.create_table("u", SCHEMA)
                    with pytest.raises(ReadOnlyEnvironment):
                        await new.create_index(new.table("t"), ["x"])
                    with pytest.raises(ReadOnlyEnvironment):
                        await new.drop("t_idx")
                    with pytest.raises(ReadOnlyEnvironment):
                        await new.set_read_policy("t", LagWriteFrontier(5000, 1000))
                    assert durable(tmp_path) == before  # no catalog, oracle or shard write
                    assert sent == []  # the spec sent no AllowWrites

                    # A read on the read-only side that starts after the writer acknowledged
                    # an append sees it (it reads the tables' uppers from their shards).
                    t2 = await old.append("t", [(3,)])
                    assert sorted(await new.peek("t_idx")) == [((1,), 1), ((2,), 1), ((3,), 1)]
                    assert (await new.freshest("t")) >= t2

                    await new.promote()
                    assert not new.read_only
                    assert sent == [new.resolve("big")]  # once, for the live view

                    # The old writer is fenced: every write fails typed, nothing is written.
                    with pytest.raises(EnvironmentFenced):
                        await old.append("t", [(4,)])
                    with pytest.raises(EnvironmentFenced):
                        await old.append("t", [(4,)])
                    with pytest.raises(EnvironmentFenced):
                        await old.create_table("v", SCHEMA)
                    # So is a fresh read: the new writer may acknowledge writes its read
                    # timestamp does not cover (found with the simulator's zombie controller).
                    with pytest.raises(EnvironmentFenced):
                        await old.peek("t_idx")
                    # A subscribe of inputs that are all complete (a constant) is a fresh read
                    # too: its start time comes from the deposed read timestamp (found with
                    # the simulator: a zombie started one before its successor's writes).
                    with pytest.raises(EnvironmentFenced):
                        await old.subscribe(constant([(1,)], SCHEMA))
                    assert await old.peek("t_idx", at=t1) == [((1,), 1), ((2,), 1)]

                    # The new one writes; its view's output advances.
                    t3 = await new.append("t", [(5,)])
                    assert t3 > t2
                    want = [((1,), 1), ((2,), 1), ((3,), 1), ((5,), 1)]
                    assert sorted(await new.peek("t_idx")) == want
                    await new.wait_for("big", t3, timeout_s=30)
                    assert sorted(await new.peek("big", at=t3)) == [((2,), 1), ((3,), 1), ((5,), 1)]
                    await new.create_table("u", SCHEMA)  # DDL too
                    # The old one does not know "u": fenced, not a stale "unknown" (found with
                    # the simulator's zombie controller, which peeked its successor's view).
                    with pytest.raises(EnvironmentFenced):
                        await old.peek("u")
                    readers = critical_readers(tmp_path)
                    epoch = new.oracle.epoch  # type: ignore[attr-defined]
                    for shard, held in readers.items():  # its holds moved to the controller's
                        if shard in (str(new.resolve("t")), str(new.resolve("big"))):
                            assert held == {CONTROLLER_READER: epoch}, (shard, held)

            # Reopened (read-write) after both closed: everything acknowledged is there.
            async with Environment.open(tmp_path, replicas={"r1": a}, tick_ms=50) as again:
                assert sorted(await again.peek("t")) == want

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_acknowledged_append_is_lost_across_a_promotion(tmp_path: Path, backend: str) -> None:
    """The old writer keeps appending while the new one is promoted: every append it got an
    answer for either failed typed (fenced: then it is not there), was answered unknown
    (there or not), or shows up on the new writer; nothing shows twice."""

    async def main() -> None:
        with anyio.fail_after(120), replica(tmp_path) as a, replica(tmp_path) as b:
            async with Environment.open(
                tmp_path, replicas={"r1": a}, executor="python", tick_ms=20
            ) as old:
                await old.create_table("t", SCHEMA)
                await old.append("t", [(0,)])
                acked: list[int] = []
                refused: list[int] = []
                unknown: list[int] = []

                async def keep_appending() -> None:
                    i = 1
                    while True:
                        try:
                            await old.append("t", [(i,)])
                        except AppendOutcomeUnknown:
                            unknown.append(i)
                        except EnvironmentFenced:
                            refused.append(i)
                            return
                        else:
                            acked.append(i)
                        i += 1

                async with Environment.open(
                    tmp_path, replicas={"r1": b}, read_only=True, tick_ms=20, poll_ms=10
                ) as new:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(keep_appending)
                        while len(acked) < 3:  # the old writer is in full swing
                            await anyio.sleep(0.02)
                        await new.promote()
                    assert refused and acked
                    rows = sorted(r[0] for (r, _d) in await new.peek("t"))
                    assert {0, *acked} <= set(rows)
                    assert not set(refused) & set(rows)  # a refusal never wrote
                    assert len(rows) == len(set(rows))  # nothing twice

    run(backend, main)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_append_that_lands_after_a_promotion_is_not_acknowledged(
    tmp_path: Path, backend: str
) -> None:
    """The promotion has fenced the oracle but the new writer has not committed yet, so the
    old writer's compare-and-append still lands. It must not be acknowledged: the new writer
    may already serve reads without it. (Under load the old writer won this race and
    acknowledged; the leadership check after every commit closes it.) Nor may it be refused:
    it landed, and a client that trusts a refusal and retries writes it twice,
    so the answer is ``AppendOutcomeUnknown``. The interleaving is forced by holding the new
    writer's first commit until the old append has answered."""

    async def main() -> None:
        with anyio.fail_after(60):
            async with Environment.open(tmp_path, executor="python", tick_ms=3_600_000) as old:
                await old.create_table("t", SCHEMA)
                # A reservation window long enough that the old oracle hands out its next
                # timestamp without touching Consensus, so it does not notice the fencing.
                # Reserved now: a reservation left from the open may run out while the new
                # writer opens on a loaded machine, and then the old oracle would notice.
                oracle: Any = old.oracle
                oracle._window_ms = 600_000
                with oracle._lock:
                    oracle._reserve(oracle.reserved_upper + 600_000)
                await old.append("t", [(1,)])
                async with Environment.open(
                    tmp_path, executor="python", read_only=True, tick_ms=3_600_000
                ) as new:
                    reached, release = anyio.Event(), anyio.Event()
                    first_tick = new.driver.tick

                    async def held_tick() -> None:
                        reached.set()
                        await release.wait()
                        await first_tick()

                    new.driver.tick = held_tick  # type: ignore[method-assign]
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(new.promote)
                        await reached.wait()
                        with pytest.raises(AppendOutcomeUnknown) as unknown:
                            await old.append("t", [(2,)])
                        assert isinstance(unknown.value.cause, EnvironmentFenced)
                        release.set()
                    rows = sorted(r for (r, _d) in await new.peek("t"))
                    assert (1,) in rows and (2,) in rows  # it landed: the new writer adopted it
                    with pytest.raises(EnvironmentFenced):  # from now on: refused, not applied
                        await old.append("t", [(3,)])
                    assert (3,) not in [r for (r, _d) in await new.peek("t")]

    run(backend, main)


@pytest.mark.processes
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_append_after_another_writer_moved_the_uppers_commits_again(
    tmp_path: Path, backend: str
) -> None:
    """A deposed writer's last commit may land after the new writer took over (its oracle
    had not noticed the promotion yet). The new writer's next commit then finds the uppers
    moved; nothing of it landed and nobody newer fenced it, so it commits again at a new
    time instead of failing the appends with ``InvalidUppers``. (Seen about once in six runs
    of ``test_managed_replicas_of_a_read_only_environment_run_apart``: the promotion's tick
    and the first append shared a commit that lost to the old writer's tick.) The late
    commit is made here directly on the shard."""
    from tidegate.runtime.controller.schemas import shard_name

    async def main() -> None:
        with anyio.fail_after(60):
            async with Environment.open(tmp_path, executor="python", tick_ms=None) as env:
                gid = await env.create_table("t", SCHEMA)
                await env.append("t", [(1,)])
                shard = shard_name(gid)
                (u,) = env.store.upper(shard).elements
                env.store.compare_and_append(shard, [((9,), u, 1)], u, u + 1)
                t = await env.append("t", [(2,)])
                assert sorted(r for (r, _d) in await env.peek("t", at=t)) == [(1,), (2,), (9,)]

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_read_only_environment_follows_the_writers_ddl(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(120), replica(tmp_path) as a, replica(tmp_path) as b:
            async with Environment.open(
                tmp_path, replicas={"r1": a}, executor="python", tick_ms=50
            ) as old:
                await old.create_table("t", SCHEMA)
                await old.create_index(old.table("t"), ["x"], name="gone")
                async with Environment.open(
                    tmp_path, replicas={"r1": b}, read_only=True, tick_ms=50, poll_ms=20
                ) as new:
                    await old.create_table("u", SCHEMA)
                    await old.create_index(old.table("u").filter(col("x") > 0), ["x"], name="pos")
                    await old.drop("gone")
                    await old.append("u", [(-1,), (1,)])
                    with anyio.fail_after(30):  # a reload may fall between the create and drop
                        while not {"pos"} <= (names := {e.name for e in new.state.entries()}) or (
                            "gone" in names
                        ):
                            await anyio.sleep(0.02)
                    assert await new.peek("pos") == [((1,), 1)]  # it was acknowledged before
                    # DDL between its last look and the promotion is caught up by promote().
                    await old.create_table("w", SCHEMA)
                    await new.promote()
                    assert "w" in {e.name for e in new.state.entries()}
                    await new.append("w", [(7,)])
                    assert await new.peek("w") == [((7,), 1)]

    run(backend, main)


def test_a_read_only_environment_takes_no_oracle() -> None:
    from tidegate.runtime import EnvironmentOptions
    from tidegate.runtime.controller.timestamps import MemoryOracle

    with pytest.raises(InvalidEnvironmentOptions) as e:
        EnvironmentOptions(read_only=True, oracle=MemoryOracle())
    assert e.value.option == "read_only"
    with pytest.raises(InvalidEnvironmentOptions):
        EnvironmentOptions(read_only=1)  # type: ignore[arg-type]


def test_promote_refuses_a_read_write_environment(tmp_path: Path) -> None:
    from tidegate.runtime.controller.errors import RuntimeControllerError

    async def main() -> None:
        async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
            with pytest.raises(RuntimeControllerError):
                await env.promote()

    run("asyncio", main)


@pytest.mark.processes
def test_managed_replicas_of_a_read_only_environment_run_apart(tmp_path: Path) -> None:
    """Real replica processes: the read-only environment's orchestrator has its own directory
    (the writer's would otherwise reap them), and both sets serve until the promotion."""

    async def main() -> None:
        with anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas=1, executor="python", tick_ms=50) as old:
                await old.create_table("t", SCHEMA)
                await old.create_index(old.table("t"), ["x"], name="t_idx")
                await old.append("t", [(1,)])
                async with Environment.open(
                    tmp_path, executor="python", read_only=True, tick_ms=50
                ) as new:
                    assert old.orchestrator is not None and new.orchestrator is not None
                    assert new.orchestrator.replicas_dir != old.orchestrator.replicas_dir
                    await new.wait_connected(timeout_s=90)
                    assert await new.peek("t_idx") == [((1,), 1)]  # acknowledged before
                    assert old.orchestrator.status()["r1"].restarts == 0  # not reaped
                    assert await old.peek("t_idx") == [((1,), 1)]
                    await new.promote()
                    with pytest.raises(EnvironmentFenced):
                        await old.append("t", [(2,)])
                    t2 = await new.append("t", [(3,)])
                    assert sorted(await new.peek("t_idx", at=t2)) == [((1,), 1), ((3,), 1)]

    run("asyncio", main)
