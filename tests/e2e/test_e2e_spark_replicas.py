"""Two managed replica processes on Spark (local[1] each) behind one controller, for real.

One environment for the module (tests run in file order and build on each
other): tables, an index, a materialized view and a subscribe; appends with
every peek and subscribe batch compared with the reference evaluator; one
replica SIGKILLed mid-stream while the other keeps answering, restarted by the
orchestrator and rehydrated (then it answers alone); the whole client-visible
history checked by the simulator's offline checker.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tidegate.dsl import Schema, col, count, sum_
from tidegate.spec.frontier import Row

pytestmark = [pytest.mark.processes, pytest.mark.spark, pytest.mark.timeout(300)]

Live = Any  # tests/e2e/conftest.py: Live


@pytest.fixture(scope="module")
def live(e2e: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The environment, with table ``orders``, index ``totals`` and materialized view ``by_bucket``."""
    data_dir = tmp_path_factory.mktemp("spark-e2e")
    with e2e.open_live(data_dir, "spark-e2e", 2, executor="spark", spark_master="local[1]") as lv:
        lv.wait_connected(timeout=180)
        env = lv.env
        orders_schema = Schema.of(("customer", "string", False), ("amount", "int64", False))
        lv.ids["orders"] = lv.call(lambda: env.create_table("orders", orders_schema))
        lv.rec.table(lv.ids["orders"], orders_schema)
        orders = lv.sync(lambda: env.table("orders"))
        totals = orders.group_by("customer").agg(count(), sum_("amount"))
        lv.ids["totals"] = lv.call(lambda: env.create_index(totals, ["customer"], name="totals"))
        lv.rec.installed(lv.ids["totals"], "index", totals.plan, (0,))
        buckets = orders.with_columns(bucket=col("amount") / 25).group_by("bucket").agg(count())
        lv.ids["by_bucket"] = lv.call(lambda: env.create_materialized_view("by_bucket", buckets))
        lv.rec.installed(lv.ids["by_bucket"], "materialized_view", buckets.plan)
        lv.keep_history("orders", "totals", "by_bucket")
        yield lv


@pytest.fixture(scope="module")
def subscribed(live: Live) -> Iterator[dict[str, Any]]:
    """A subscribe to big orders, consumed on the environment's loop; its batches are recorded.

    They are checked by the history checker at the end, when every append is
    recorded (a batch may show an append before the ``append`` call returns).
    """
    big = live.sync(lambda: live.env.table("orders")).filter(col("amount") >= 50)
    state: dict[str, Any] = {"batches": 0, "upper": 0}

    async def consume(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        async with await live.env.subscribe(big) as sub:
            task_status.started()
            async for b in sub:
                if not state["batches"]:
                    live.rec.installed(sub.id, "subscribe", big.plan, as_of=b.lower.elements[0])
                live.rec.subscribe_batch(sub.id, b.lower, b.upper, b.updates, b.error)
                state["batches"] += 1
                state["upper"] = b.upper.elements[0] if b.upper.elements else 2**63

    future, _ = live.portal.start_task(consume)
    yield state
    future.cancel()


def orders_batch(rng: random.Random, live_rows: dict[Row, int], n: int) -> list[tuple[Row, int]]:
    out: list[tuple[Row, int]] = []
    for _ in range(n):
        if live_rows and rng.random() < 0.25:
            row = rng.choice(sorted(live_rows))
            live_rows[row] -= 1
            if not live_rows[row]:
                del live_rows[row]
            out.append((row, -1))
        else:
            row = (rng.choice("abcdefgh"), rng.randrange(100))
            live_rows[row] = live_rows.get(row, 0) + 1
            out.append((row, 1))
    return out


RNG = random.Random(11)
LIVE_ROWS: dict[Row, int] = {}


def test_index_view_and_subscribe_agree_with_the_reference(
    live: Live, subscribed: dict[str, Any]
) -> None:
    times = [live.append("orders", orders_batch(RNG, LIVE_ROWS, 40)) for _ in range(8)]
    for t in (times[0], times[3], times[-1]):
        assert live.peek("totals", t) == live.expected("totals", t)
        assert live.peek("by_bucket", t) == live.expected("by_bucket", t)
    assert live.peek("orders", times[-1]) == {r: n for r, n in LIVE_ROWS.items()}
    live.wait_for("the subscribe to pass the last append", lambda: subscribed["upper"] > times[-1])
    assert subscribed["batches"] > 0


def test_a_sigkilled_replica_is_replaced_while_the_other_answers(live: Live) -> None:
    first, second = sorted(live.replicas())
    before = live.sync(lambda: {r.replica: r.epoch for r in live.env.replicas()})
    live.append("orders", orders_batch(RNG, LIVE_ROWS, 20))
    live.call(live.orchestrator.kill, first)
    for _ in range(4):  # mid-stream: appends and peeks go on
        ts = live.append("orders", orders_batch(RNG, LIVE_ROWS, 20))
        assert live.peek("totals", ts, timeout=60) == live.expected("totals", ts)
    live.wait_connected([first], timeout=120)  # restarted by the orchestrator
    after = live.sync(lambda: {r.replica: r.epoch for r in live.env.replicas()})
    assert after[first] > before[first], "the reconnect is a new epoch (history replayed)"
    assert live.sync(live.orchestrator.status)[first].restarts >= 1

    # Rehydrated: with the other one gone, the restarted replica answers alone.
    live.call(live.orchestrator.kill, second)
    ts = live.append("orders", orders_batch(RNG, LIVE_ROWS, 20))
    assert live.peek("totals", ts, timeout=90) == live.expected("totals", ts)
    assert live.peek("by_bucket", ts, timeout=90) == live.expected("by_bucket", ts)
    live.wait_connected(timeout=120)  # second is back


def test_the_recorded_history_passes_the_offline_checker(
    live: Live, subscribed: dict[str, Any]
) -> None:
    ts = live.append("orders", orders_batch(RNG, LIVE_ROWS, 10))
    live.wait_for("the subscribe to catch up", lambda: subscribed["upper"] > ts)
    violations = live.rec.check()
    assert violations == [], [str(v) for v in violations]
    peeks = [e for e in live.rec.history.events if e["op"] == "peek"]
    batches = [e for e in live.rec.history.events if e["op"] == "batch"]
    assert len(peeks) >= 10 and len(batches) >= 5
