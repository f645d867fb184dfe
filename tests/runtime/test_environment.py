"""The embedding API: :class:`Environment` over gRPC to in-process replicas, on asyncio and trio.

Replicas are :class:`ReplicaService` (python executor) behind
:class:`ReplicaServer`, reading and writing the environment's own data
directory; answers are checked against the reference evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from retention import keep_history

from tidegate.dsl import Schema, col, constant, count, table
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment, SyncEnvironment
from tidegate.runtime.controller.schemas import shard_name
from tidegate.runtime.errors import (
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from tidegate.spec.errors import ArityMismatch, ReadBeyondUpper, SinceViolation, TypeMismatch
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.reference import evaluate
from tidegate.spec.plan.relation import Get, Plan
from tidegate.spec.storage import WriteToShard

pytestmark = pytest.mark.timeout(180)

BACKENDS = ["asyncio", "trio"]
ORDERS = Schema.of(("id", "int64", False), ("customer", "string", False), ("amount", "int64"))


def reference(plan: Plan, inputs: dict[GlobalId, list[Update]], at: int) -> list[tuple[Row, int]]:
    return sorted(evaluate(plan, inputs, at).rows.items())


def run(backend: str, main: Callable[[], Any]) -> None:
    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tables_indexes_views_and_peeks(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            # No tick: the index's as_of (the freshest complete time) is the first append's.
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                orders = await env.create_table("orders", ORDERS)
                log: list[Update] = []
                t0 = await env.append("orders", [(1, "ann", 10), (2, "bob", 25), (3, "ann", 40)])
                log += [((1, "ann", 10), t0, 1), ((2, "bob", 25), t0, 1), ((3, "ann", 40), t0, 1)]
                big = env.table("orders").filter(col("amount") > 20)
                idx = await env.create_index(big, ["id"], name="big_orders")
                per_customer = env.table("orders").group_by("customer").agg(count())
                mv = await env.create_materialized_view("per_customer", per_customer)
                t1 = await env.append("orders", [((2, "bob", 25), -1), (4, "cy", 70)])
                log += [((2, "bob", 25), t1, -1), ((4, "cy", 70), t1, 1)]
                inputs = {orders: log}
                for at in (t0, t1):
                    assert sorted(await env.peek(idx, at)) == reference(big.plan, inputs, at)
                    assert sorted(await env.peek("orders", at)) == reference(
                        env.table("orders").plan, inputs, at
                    )
                await env.wait_for(mv, t1, timeout_s=30)
                assert sorted(await env.peek("per_customer", t1)) == reference(
                    per_customer.plan, inputs, t1
                )
                # The default time is the freshest complete one; key lookups use the index.
                assert sorted(await env.peek("big_orders")) == reference(big.plan, inputs, t1)
                assert await env.peek(idx, key=(3,)) == [((3, "ann", 40), 1)]
                since, upper = env.frontiers(idx)
                assert since.less_equal(t0) and not upper.less_equal(t1)
                (info,) = env.replicas()
                assert info.replica == "r1" and info.status == "connected"
                assert await env.drop("big_orders") == [idx]
                with pytest.raises(UnknownCatalogObject):
                    await env.peek("big_orders")

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_typed_errors_leave_state_unchanged(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                t0 = await env.append("t", [(1,), (2,)])
                idx = await env.create_index(env.table("t"), ["x"])
                state, frontiers = env.state, env.frontiers("t")
                with pytest.raises(UnknownCatalogObject):
                    await env.append("nope", [(1,)])
                with pytest.raises(TypeMismatch):
                    await env.append("t", [(3,), ("four",)])
                with pytest.raises(ArityMismatch):
                    await env.append("t", [(3, 4)])
                for not_rows in (None, 5, "34", {(3,): 1}):
                    with pytest.raises(TypeMismatch, match="iterable of tuples"):
                        await env.append("t", not_rows)  # type: ignore[arg-type]
                # A diff outside int64 (it was sent to the store and answered InvalidUppers).
                for diff in (2**63, -(2**63) - 1, 1.5, True):
                    with pytest.raises(TypeMismatch, match="diff must be an int64"):
                        await env.append("t", [((3,), diff)])
                with pytest.raises(DuplicateCatalogName):
                    await env.create_table("t", Schema.of(("y", "int64")))
                with pytest.raises(InvalidCatalogOp, match="the limit is 255"):
                    await env.create_table("é" * 128, Schema.of(("y", "int64")))
                # A key of the wrong type was a silent empty answer; not a tuple, a TypeError.
                for bad_key, error in (
                    (("1",), TypeMismatch),
                    (1, TypeMismatch),
                    ([1], TypeMismatch),
                    ((1, 2), ArityMismatch),
                ):
                    with pytest.raises(error):
                        await env.peek(idx, t0, key=bad_key)  # type: ignore[arg-type]
                assert await env.peek(idx, t0, key=(None,)) == []  # NULL matches nothing
                with pytest.raises(ReadBeyondUpper):
                    await env.peek("t", t0 + 1)
                with pytest.raises(SinceViolation):
                    await env.peek(idx, env.frontiers(idx)[0].elements[0] - 1)
                # A plan whose Get declares a schema that is not the collection's (a string
                # column for an int64 one, another name, nullability or arity) was accepted and
                # left the subscribe waiting for a replica that rejected it; refused typed now,
                # before any dataflow is made, as in a view or an index.
                tid = env.table("t").plan.id  # type: ignore[union-attr]
                for wrong in (
                    Schema.of(("x", "string", False)),
                    Schema.of(("y", "int64", False)),
                    Schema.of(("x", "int64", True)),
                    Schema.of(("x", "int64", False), ("z", "int64")),
                ):
                    with anyio.fail_after(30), pytest.raises(TypeMismatch, match="differs from"):
                        await env.subscribe(Get(tid, wrong))
                with pytest.raises(UnknownCatalogObject):
                    await env.subscribe(Get(GlobalId.user(999), Schema.of(("x", "int64"))))
                assert env.state == state and env.frontiers("t") == frontiers
                assert env.driver.ctl.compute.instance("default").pending_peeks() == []
                assert sorted(await env.peek("t", t0)) == [((1,), 1), ((2,), 1)]

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reopening_restores_the_catalog_and_every_acknowledged_append(
    tmp_path: Path, backend: str
) -> None:
    plan = table("u1", ORDERS).filter(col("amount") >= 20).plan

    async def main() -> None:
        with anyio.fail_after(120):
            with replica(tmp_path) as address:
                async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                    t = await env.create_table("orders", ORDERS)
                    assert t == GlobalId.user(1)
                    await env.create_index(plan, ["id"], name="big")
                    await env.create_materialized_view("big_mv", plan)
                    await keep_history(env, "big", "big_mv")  # read at `last` after a wait below
                    acked = [await env.append("orders", [(i, "ann", 10 * i)]) for i in range(1, 5)]
                    await env.set_read_policy("orders", LagWriteFrontier(100, 10))
            # A new controller and a new replica process over the same data directory.
            with replica(tmp_path) as address:
                async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                    assert [e.name for e in env.state.entries()] == ["orders", "big", "big_mv"]
                    assert env.state.read_policy(t) == LagWriteFrontier(100, 10)
                    log = [((i, "ann", 10 * i), ts, 1) for i, ts in enumerate(acked, 1)]
                    last = await env.append("orders", [(9, "bob", 90)])
                    log.append(((9, "bob", 90), last, 1))
                    assert last > acked[-1]
                    want = reference(plan, {t: log}, last)
                    assert sorted(await env.peek("big", last)) == want
                    await env.wait_for("big_mv", last, timeout_s=30)
                    assert sorted(await env.peek("big_mv", last)) == want
                    new = await env.create_table("more", Schema.of(("x", "int64")))
                    assert new == GlobalId.user(4)

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subscribe_from_the_freshest_time_and_close(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                t0 = await env.append("t", [(1,), (2,)])
                sub = await env.subscribe(env.table("t").filter(col("x") > 1))
                updates: list[tuple[int, Row, int]] = []
                sent = False
                async with sub:
                    async for batch in sub:
                        updates.extend(batch.updates)
                        if not sent:
                            # The snapshot, at the as_of: the freshest time, at or after the
                            # append (a tick may come first: the read confirms its leadership).
                            (as_of,) = batch.lower.elements
                            assert as_of >= t0
                            t1 = await env.append("t", [(3,), ((2,), -1), (0,)])
                            sent = True
                        elif not batch.upper.less_equal(t1):
                            break
                assert updates == [(as_of, (2,), 1), (t1, (2,), -1), (t1, (3,), 1)]
                view = env.driver.ctl.compute.instance("default")
                assert view.active_subscribes() == []

    run(backend, main)


def test_sync_environment(tmp_path: Path) -> None:
    with (
        replica(tmp_path) as address,
        SyncEnvironment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env,
    ):
        env.create_table("t", Schema.of(("x", "int64", False)))
        ts = env.append("t", [(5,), ((6,), 2)])
        assert sorted(env.peek("t", ts)) == [((5,), 1), ((6,), 2)]
        idx = env.create_index(env.table("t"), ["x"])
        assert env.peek(idx, key=(6,)) == [((6,), 2)]
        assert not env.frontiers("t")[1].less_equal(ts)
        with env.subscribe("t") as sub:
            first = next(sub)
            assert sorted((r, d) for _, r, d in first.updates) == [((5,), 1), ((6,), 2)]
        assert [(r.replica, r.status) for r in env.replicas()] == [("r1", "connected")]
        events = env.events()
        events.close()
        assert list(events) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_drop_refuses_dependents_and_cascade_releases_the_shards(
    tmp_path: Path, backend: str
) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                t = await env.create_table("t", Schema.of(("x", "int64", False)))
                await env.append("t", [(1,)])
                idx = await env.create_index(env.table("t"), ["x"])
                mv = await env.create_materialized_view("m", env.table("t"))
                await env.wait_for(mv, await env.append("t", [(2,)]), timeout_s=30)
                state = env.state
                with pytest.raises(HasDependents):
                    await env.drop("t")
                assert env.state == state
                assert await env.drop("t", cascade=True) == [mv, idx, t]
                assert env.state.entries() == []
                # With every hold released, the shards of the table and the view are finalized.
                while not all(env.store.state(str(g)).finalized for g in (t, mv)):
                    await anyio.sleep(0.05)
                assert env.driver.ctl.compute.instance("default").collection_ids() == []

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subscribe_to_an_index_from_the_freshest_time(tmp_path: Path, backend: str) -> None:
    """Regression: a subscribe reading only an index had an empty as_of (no storage inputs)."""

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                t0 = await env.append("t", [(1,), (2,)])
                await env.create_index(env.table("t"), ["x"], name="i")
                await env.wait_for("i", t0, timeout_s=30)
                sub = await env.subscribe("i")
                async with sub:
                    async for batch in sub:
                        assert not batch.lower.is_empty()
                        assert sorted((r, d) for _, r, d in batch.updates) == [((1,), 1), ((2,), 1)]
                        break

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_peek_of_a_view_at_the_default_time_sees_every_acknowledged_append(
    tmp_path: Path, backend: str
) -> None:
    """Regression: the default time of a view's peek came from the view's own (lagging) upper."""

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(90):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                await env.create_materialized_view("v", env.table("t").filter(col("x") > 0))
                seen: list[tuple[Row, int]] = []
                for i in range(1, 6):
                    await env.append("t", [(i,)])
                    seen.append(((i,), 1))
                    assert sorted(await env.peek("v")) == seen

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_group_commit_gives_concurrent_appends_one_timestamp_and_moves_every_table(
    tmp_path: Path, backend: str
) -> None:
    """Appends that arrive while a commit is in flight join the next one; every table's upper
    passes every acknowledged timestamp, so a read of any table sees every acknowledged write."""

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                schema = Schema.of(("x", "int64", False))
                for name in ("a", "b", "c"):
                    await env.create_table(name, schema)
                stamps: list[int] = []

                async def write(name: str, x: int) -> None:
                    stamps.append(await env.append(name, [(x,)]))

                async with anyio.create_task_group() as tg:
                    for i in range(12):
                        tg.start_soon(write, "ab"[i % 2], i)
                assert len(set(stamps)) < len(stamps)  # some appends shared a commit
                assert env.driver.commits < 12
                top = max(stamps)
                for name in ("a", "b", "c"):
                    assert not env.frontiers(name)[1].less_equal(top)
                assert await env.freshest("c") >= top
                ts = await env.append_many([("a", [(100,)]), ("c", [(200,)]), ("a", [(101,)])])
                assert sorted(await env.peek("a", ts)) == sorted(
                    [((i,), 1) for i in range(0, 12, 2)] + [((100,), 1), ((101,), 1)]
                )
                assert await env.peek("c", ts) == [((200,), 1)]
                with pytest.raises(UnknownCatalogObject):
                    await env.append_many([("a", [(7,)]), ("nope", [(8,)])])
                assert ((7,), 1) not in await env.peek("a")

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clients_a_commit_releases_append_again_into_one_commit(
    tmp_path: Path, backend: str
) -> None:
    """Closed-loop clients (each appends again as soon as its append is acknowledged) share
    one commit per round, even when another append queued while the last commit was in
    flight: the next commit waits a turn or two for the clients the last one released,
    rather than taking the lone early append and leaving them a whole commit behind."""
    clients, rounds = 8, 6

    async def main() -> None:
        with anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                before = env.driver.commits
                interloped: list[int] = []
                spawned = [0]

                async def client(c: int) -> None:
                    for r in range(rounds):
                        await env.append("t", [(c * rounds + r,)])

                async def interloper() -> None:
                    interloped.append(await env.append("t", [(-1,)]))

                async with anyio.create_task_group() as tg:

                    def observe(effect: object) -> None:  # an append while a write is in flight
                        if isinstance(effect, WriteToShard) and spawned[0] < rounds - 1:
                            spawned[0] += 1
                            tg.start_soon(interloper)

                    env.driver.observers.append(observe)
                    for c in range(clients):
                        tg.start_soon(client, c)
                assert len(interloped) == rounds - 1
                assert env.driver.commits - before <= rounds + 1

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_appends_of_no_rows_advance_every_table_past_a_fresh_timestamp(
    tmp_path: Path, backend: str
) -> None:
    """Issue 16 asked whether the environment can send the store an empty append expecting the
    upper it sets (a no-op, refused before the fix). It cannot: a commit stamps one fresh
    timestamp from the oracle, strictly after every table's upper, and moves every table past
    it, so a table with no rows (an append of zero rows, or a group commit where its batch is
    empty, or across a reopen) still advances its upper. This pins that down."""

    async def main() -> None:
        with anyio.fail_after(60):
            schema = Schema.of(("x", "int64", False))
            async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
                await env.create_table("a", schema)
                await env.create_table("b", schema)
                for batches in ([("a", [])], [("a", [(1,)]), ("b", [])], [("b", [])]):
                    uppers = [env.frontiers(t)[1] for t in ("a", "b")]
                    ts = await env.append_many(batches)
                    for t, before in zip(("a", "b"), uppers, strict=True):
                        assert before < env.frontiers(t)[1] == Antichain([ts + 1])
                assert env.driver.storage.errors == []
            async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
                before = env.frontiers("a")[1]
                ts = await env.append("a", [])
                assert before < env.frontiers("a")[1] == Antichain([ts + 1])
                assert await env.driver.snapshot(env.resolve("a"), ts) == [((1,), ts, 1)]
                assert env.driver.storage.errors == []

    run(backend, main)


def test_objects_without_a_read_policy_compact_by_the_default(tmp_path: Path) -> None:
    """Found by the simulator: an index created without a read policy held its since (and its
    input's) at its as_of for ever. Every object now compacts by ``DEFAULT_READ_POLICY``."""
    from tidegate.runtime.environment import DEFAULT_READ_POLICY

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                idx = await env.create_index(env.table("t"), ["x"], name="t_x")
                assert env.read_policy(idx) == DEFAULT_READ_POLICY == env.read_policy("t")
                first = await env.append("t", [(1,)])
                await env.wait_for(idx, first + 2_500, timeout_s=30)
                for ref in (idx, "t"):
                    since = env.frontiers(ref)[0]
                    assert not since.less_equal(first), (ref, since)
                await env.set_read_policy(idx, LagWriteFrontier(100, 10))
                assert env.read_policy(idx) == LagWriteFrontier(100, 10)

    run("trio", main)


def test_replicas_added_and_dropped_while_running_and_targeted_reads(tmp_path: Path) -> None:
    """``add_replica``/``drop_replica`` (recorded in the catalog); a peek or subscribe targeted at
    one replica; a subscribe whose replica is dropped ends with an error and is dropped itself
    (the simulator found such subscribes holding their inputs for ever)."""
    from tidegate.runtime.errors import DuplicateCatalogName as Duplicate
    from tidegate.spec.errors import ReplicaMissing

    async def main() -> None:
        with replica(tmp_path) as a1, replica(tmp_path) as a2, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": a1}, tick_ms=20) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                idx = await env.create_index(env.table("t"), ["x"], name="t_x")
                await env.append("t", [(1,), (2,)])
                await env.add_replica("r2", a2)
                with pytest.raises(Duplicate):
                    await env.add_replica("r2", a2)
                await env.wait_connected(timeout_s=30)
                assert {r.name for r in env.state.replicas} == {"r1", "r2"}
                assert sorted(await env.peek(idx, replica="r2")) == [((1,), 1), ((2,), 1)]
                sub = await env.subscribe(env.table("t"), replica="r2")
                first = await sub.__anext__()
                assert sorted((r, d) for _t, r, d in first.updates) == [((1,), 1), ((2,), 1)]
                assert env.hydrated() and env.hydrated(idx, replicas=["r2"])
                await env.drop_replica("r2")
                with pytest.raises(ReplicaMissing):
                    await env.peek(idx, replica="r2")
                errors = [b.error async for b in sub if b.error is not None]
                assert errors, "the subscribe should end with its replica's failure"
                ctl = env.driver.ctl
                assert sub.id not in {c.id for c in ctl.compute.instance("default").collections()}
                assert {r.name for r in env.state.replicas} == {"r1"}
            async with Environment.open(tmp_path, tick_ms=20) as env:  # the catalog kept r1 only
                assert [r.replica for r in env.replicas()] == ["r1"]

    run("trio", main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropping_what_a_pending_peek_or_subscribe_reads_ends_it(
    tmp_path: Path, backend: str
) -> None:
    """Regression (found by the simulator): a peek waiting on a view that was dropped waited for
    ever, as the view's shard stops advancing. It fails with ``DependencyDropped`` and a subscribe
    reading the view ends with an error batch (Materialize's ``ConcurrentDependencyDrop``)."""
    from tidegate.runtime.controller import DependencyDropped, PeekFailed

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=20) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                v = await env.create_materialized_view("v", env.table("t").filter(col("x") > 0))
                t0 = await env.append("t", [(1,)])
                await env.wait_for(v, t0, timeout_s=30)
                sub = await env.subscribe("v")
                first = await sub.__anext__()
                assert [(r, d) for _t, r, d in first.updates] == [((1,), 1)]
                await env.drop_replica("r1")  # nothing answers reads of v any more
                failure: list[BaseException] = []

                async def pending_peek() -> None:
                    try:
                        await env.peek(v)
                    except PeekFailed as e:
                        failure.append(e)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(pending_peek)
                    instance = env.driver.ctl.compute.instance("default")
                    while not instance.pending_peeks():
                        await anyio.sleep(0.01)
                    assert await env.drop("v") == [v]
                (e,) = failure
                assert isinstance(e, DependencyDropped) and e.dropped == v
                assert not instance.pending_peeks()
                last = [b async for b in sub][-1]
                assert last.error == f"{v} was dropped while the subscribe ran"
                assert sub.id not in {c.id for c in instance.collections()}
                assert v not in {c.id for c in env.driver.ctl.storage.collections()}

    run(backend, main)


def test_dropping_what_a_pending_copy_to_reads_ends_it(tmp_path: Path) -> None:
    """Regression (the simulator's copy-to action, sources seed 9, where a cascade took the
    view): a copy-to of a materialized view dropped while the copy-to ran waited for ever, as
    the view's shard stops advancing. It fails with ``CopyToFailed`` naming the drop, and is
    dropped from the controller."""
    from tidegate.runtime.controller.errors import CopyToFailed

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=20) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                v = await env.create_materialized_view("v", env.table("t").filter(col("x") > 0))
                t0 = await env.append("t", [(1,)])
                await env.wait_for(v, t0, timeout_s=30)
                await env.drop_replica("r1")  # nothing answers the copy-to any more
                failure: list[BaseException] = []

                async def pending_copy_to() -> None:
                    try:
                        await env.copy_to(v, f"file://{tmp_path / 'out'}", at=t0)
                    except CopyToFailed as e:
                        failure.append(e)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(pending_copy_to)
                    instance = env.driver.ctl.compute.instance("default")
                    while not instance.active_copy_tos():
                        await anyio.sleep(0.01)
                    assert await env.drop("v") == [v]
                (e,) = failure
                assert isinstance(e, CopyToFailed)
                assert e.message == f"{v} was dropped while the copy-to ran"
                assert not instance.active_copy_tos()
                assert not [c for c in instance.collections() if c.id.is_transient]

    run("trio", main)


def test_a_materialized_view_is_restored_readable_from_its_as_of_never_before(
    tmp_path: Path,
) -> None:
    """Found by the simulator (seed 15 of ``split_brain``): a constant materialized view
    created just before its controller stopped was restored with its shard's since, still 0
    (the limiter paces since downgrades), while its data starts at its as_of, so a read before
    the as_of answered no rows instead of being refused. A new view's shard now takes the
    as_of for its since on the disk before the dataflow writes, and a view restored with an
    empty shard is readable from the as_of the restore chose."""
    fixed = constant([((1, "one"), 1)], Schema.of(("n", "int64", False), ("w", "string")))

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(60):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                first = await env.append("t", [(1,)])
                mv = await env.create_materialized_view("fixed", fixed.plan)
                since = env.frontiers(mv)[0]
                # its as_of: now, at or after the append (as-of selection gives a dataflow
                # without storage inputs the current read time)
                assert since.elements and int(since.elements[0]) >= first, since
                # On the disk already, before the limiter would issue a downgrade.
                assert env._core.store.state(shard_name(mv)).since == since
                await env.wait_for(mv, int(since.elements[0]), timeout_s=30)  # written
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=50) as env:
                restored = env.frontiers(mv)[0]
                assert since <= restored, (since, restored)
                with pytest.raises(SinceViolation):  # just before its as_of: no data there
                    await env.peek(mv, int(since.elements[0]) - 1)

    run("trio", main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fresh_reads_of_a_table_compacted_to_its_upper_are_answered(
    tmp_path: Path, backend: str
) -> None:
    """A read policy of lag 0 pulls a table's since up to its upper after every commit. A
    fresh read holds what it reads while it picks its time and waits for the upper to pass
    it, as Materialize's timestamp selection does; without the holds it chose a time the since
    had passed by the end of every wait, and waited for ever (found by the simulator)."""

    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=20) as env:
                await env.create_table("t", Schema.of(("x", "int64", False)))
                await env.append("t", [(0,)])
                await env.set_read_policy("t", LagWriteFrontier(0, 1))
                written = [0]
                async with anyio.create_task_group() as tg:

                    async def write() -> None:
                        while True:
                            await env.append("t", [(len(written),)])
                            written.append(len(written))
                            await anyio.sleep(0.003)

                    tg.start_soon(write)
                    for _ in range(3):
                        seen = len(written)  # acknowledged before the read started
                        with anyio.fail_after(20):
                            rows = {r[0] for r, _ in await env.peek("t")}
                        assert set(range(seen)) <= rows
                    with anyio.fail_after(20):
                        async with await env.subscribe(env.table("t")) as sub:
                            async for _ in sub:
                                break
                    tg.cancel_scope.cancel()

    run(backend, main)
