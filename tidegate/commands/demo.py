"""``tidegate demo``: the product end to end, in about two minutes (what ``make run`` runs).

An ``Environment`` with two managed replica processes on local Spark and a
storage replica process: two tables, a load-generator source (auction bids),
three views, two indexes, a materialized view (all defined in SQL, the
:data:`DEFINITIONS` a user would type into ``tidegate sql``) and a
subscribe; a stream of appends
with a progress bar; peeks at several times, each compared with the reference
evaluator; the source read twice as it ingests, each read checked against the
load generator itself; one replica SIGKILLed while the other keeps answering, and the
killed one restarted and rehydrated (then the other killed, and the first
answering alone); the controller closed and reopened on the same data
directory -- the replica processes keep running and reconcile with it -- with
its catalog and every acknowledged append back, and the source resuming where
it was; the client-visible history checked by the simulator's offline
checker; a summary. Exit 0 only if every check held.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import tempfile
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.runtime.defaults import DATA_DIR_ENV

from .times import format_time

if TYPE_CHECKING:  # the demo's modules are imported when it runs, not to build the CLI's parser
    from tidegate.spec.frontier import Row
    from tidegate.spec.ids import GlobalId

__all__ = ["DemoOptions", "add_parser", "run_demo"]

CUSTOMERS = ["ann", "bob", "cyd", "dee", "eve", "fay", "gus", "hal"]
REGIONS = {"ann": "north", "bob": "south", "cyd": "north", "dee": "east",
           "eve": "west", "fay": "south", "gus": "east", "hal": "west"}  # fmt: skip


DEFINITIONS = (
    "CREATE TABLE orders (customer text NOT NULL, amount bigint NOT NULL)",
    "CREATE TABLE customers (customer text NOT NULL, region text NOT NULL)",
    # Ten minutes of history stay readable, so the demo can peek at earlier times.
    "ALTER TABLE orders SET (RETAIN HISTORY FOR '10m')",
    "ALTER TABLE customers SET (RETAIN HISTORY FOR '10m')",
    "CREATE VIEW totals AS "
    "SELECT customer, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY customer",
    "CREATE INDEX totals_by_customer ON totals (customer)",
    "ALTER INDEX totals_by_customer SET (RETAIN HISTORY FOR '10m')",
    "CREATE MATERIALIZED VIEW sales_by_region AS "
    "SELECT region, sum(amount) AS total FROM orders JOIN customers USING (customer) "
    "GROUP BY region",
    "ALTER MATERIALIZED VIEW sales_by_region SET (RETAIN HISTORY FOR '10m')",
    "CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount >= 100",
    # A source: the storage replica ingests a bid every 200 ms; a view and an index over it.
    "CREATE SOURCE bids FROM LOAD GENERATOR AUCTION (TICK INTERVAL '200ms', SEED 7)",
    "CREATE VIEW bids_by_item AS "
    "SELECT item, count(*) AS bids, max(amount) AS top_bid FROM bids GROUP BY item",
    "CREATE INDEX bids_by_item_idx ON bids_by_item (item)",
)
"""What the demo creates, in the SQL a Materialize user would type in ``tidegate sql``."""

SOURCE, SOURCE_INDEX = "bids", "bids_by_item_idx"
"""The demo's source and the index over it."""


class _EventLines:
    """The demo's side of :class:`~.events.Reporter`: event lines, indented, while shown."""

    def __init__(self, demo: Any) -> None:
        self.demo = demo

    def event(self, replica: str, text: str, kind: str = "") -> None:
        if self.demo.show_events:
            self.demo.say(f"     event: {replica} {text}")


@dataclass
class DemoOptions:
    """What ``tidegate demo`` runs on, and how much it streams."""

    data_dir: str | None = None
    batches: int = 20
    rows_per_batch: int = 50
    executor: str = "spark"
    spark_master: str = "local[1]"
    seed: int = 7
    timeout_s: float = 120.0
    """Longest wait for any one thing (a replica, a frontier); the whole demo gets three times it."""


@dataclass
class Tally:
    """What the demo did and checked, for its summary."""

    peeks: int = 0
    batches: int = 0
    subscribe_updates: int = 0
    appends: int = 0
    rows: int = 0
    source_reads: int = 0
    offsets: int = 0
    """The load generator's offsets (bids) in the source at the last read."""
    failures: list[str] = field(default_factory=list)
    phases: list[tuple[str, float]] = field(default_factory=list)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="run the end-to-end demo (two Spark replicas, a kill, a controller restart)",
        description=__doc__,
    )
    p.add_argument(
        "--data-dir",
        default=os.environ.get(DATA_DIR_ENV) or None,
        help="keep the data here (default: $TIDEGATE_DATA_DIR, else a temporary directory)",
    )
    p.add_argument("--batches", type=int, default=20, help="appends to stream (default 20)")
    p.add_argument("--rows", type=int, default=50, help="rows per append (default 50)")
    p.add_argument("--executor", default="spark", choices=["spark", "python"])
    p.add_argument("--spark-master", default="local[1]")
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    opts = DemoOptions(
        data_dir=args.data_dir,
        batches=args.batches,
        rows_per_batch=args.rows,
        executor=args.executor,
        spark_master=args.spark_master,
        seed=args.seed,
    )
    import anyio

    return anyio.run(demo, opts)


# -- the environment -------------------------------------------------------------------------


@asynccontextmanager
async def replica_processes(
    data_dir: Path, opts: DemoOptions, names: list[str], token: str
) -> AsyncIterator[Any]:
    """An orchestrator running compute replicas ``names`` and the storage replica (started in
    parallel, all requiring ``token``); stops them at exit."""
    import anyio

    from tidegate.runtime.catalog import STORAGE_REPLICA
    from tidegate.runtime.orchestrator import Orchestrator

    async with Orchestrator(
        data_dir, executor=opts.executor, spark_master=opts.spark_master, token=token
    ) as orchestrator:
        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(orchestrator.ensure, name)
            # The environment runs it with the first source; started now, it starts beside the JVMs.
            tg.start_soon(partial(orchestrator.ensure, STORAGE_REPLICA, services=("storage",)))
        yield orchestrator


@asynccontextmanager
async def open_environment(
    data_dir: Path, opts: DemoOptions, orchestrator: Any, replicas: int, token: str
) -> AsyncIterator[Any]:
    """The controller, with managed replicas ``r1..rN`` run by ``orchestrator``.

    ``token`` is the one the orchestrator gave its replicas: a controller
    reopened later reaches the storage replica still running with it (a
    managed storage replica otherwise gets a fresh token at each open).
    """
    from tidegate.runtime.environment import Environment

    async with Environment.open(
        data_dir,
        replicas=replicas,
        spark_master=opts.spark_master,
        executor=opts.executor,
        orchestrator=orchestrator,
        token=token,
    ) as env:
        yield env


def replica_names(env: Any) -> list[str]:
    return sorted(str(r.replica) for r in env.replicas())


async def wait_connected(env: Any, timeout_s: float, names: list[str] | None = None) -> float:
    """Wait until replicas ``names`` (default: all) are connected; the seconds it took.

    ``Environment.wait_connected`` raises ``ReplicasNotConnected`` (a
    ``TimeoutError`` naming each replica's status) after ``timeout_s``.
    """
    t0 = time.monotonic()
    await env.wait_connected(names, timeout_s=timeout_s)
    return time.monotonic() - t0


# -- the demo --------------------------------------------------------------------------------


class Demo:
    """The demo's state: its recorder (history and reference), the live rows, what it printed."""

    def __init__(self, opts: DemoOptions, data_dir: Path) -> None:
        self.opts = opts
        self.data_dir = data_dir
        from .recording import RunRecorder

        self.rec = RunRecorder("demo", replicas=2)
        self.tally = Tally()
        self.rng = random.Random(opts.seed)
        self.token = secrets.token_hex(16)
        """The bearer token every replica process of the demo requires."""
        self.ids: dict[str, GlobalId] = {}
        self.live: dict[tuple[str, int], int] = {}  # (customer, amount) -> multiplicity
        self.last_ts = 0
        self.t0 = time.monotonic()
        self.events: list[Any] = []
        self.show_events = False
        from .events import ReplicaEvents

        self.replica_events = ReplicaEvents(_EventLines(self))
        """Replica events as ``tidegate up`` reports them: once per change, an outage once."""

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def phase(self, title: str) -> None:
        self.tally.phases.append((title, time.monotonic() - self.t0))
        self.say(f"\n== {title}  (t+{time.monotonic() - self.t0:.1f} s)")

    def fail(self, what: str) -> None:
        self.tally.failures.append(what)
        self.say(f"   FAILED: {what}")

    # -- steps -----------------------------------------------------------------------------

    async def define(self, env: Any) -> None:
        """The demo's objects, in SQL (:data:`DEFINITIONS`), as a Materialize user writes them."""
        for statement in DEFINITIONS:
            self.say(f"   sql> {statement};")
            await env.execute(statement)
        state = env.state
        orders, customers = env.resolve("orders"), env.resolve("customers")
        self.ids.update(orders=orders, customers=customers)
        self.rec.table(orders, env.schema("orders"))
        self.rec.table(customers, env.schema("customers"))
        self.say(f"   tables: orders ({orders}), customers ({customers})")

        idx = env.resolve("totals_by_customer")
        self.ids["totals_by_customer"] = idx
        entry = state.get(idx)
        self.rec.installed(idx, "index", entry.plan, entry.keys)
        self.say(
            f"   index totals_by_customer ({idx}) on view totals: orders grouped by customer, "
            "count and sum"
        )

        mv = env.resolve("sales_by_region")
        self.ids["sales_by_region"] = mv
        self.rec.installed(mv, "materialized_view", state.get(mv).plan)
        self.say(f"   materialized view sales_by_region ({mv}): orders ⋈ customers, sum by region")

        self.big = env.table("big_orders")
        self.say("   subscribe: view big_orders, orders with amount >= 100")
        self.ids.update(bids=env.resolve(SOURCE), bids_by_item_idx=env.resolve(SOURCE_INDEX))
        self.say(
            f"   source bids ({self.ids['bids']}): auction bids from a load generator, ingested "
            f"by the storage replica; index {SOURCE_INDEX} on view bids_by_item: bids per item"
        )

        ts = await env.append("customers", [(c_, r) for c_, r in REGIONS.items()])
        self.rec.appended(customers, ts, [((c_, r), 1) for c_, r in REGIONS.items()])
        self.last_ts = max(self.last_ts, ts)
        self.tally.appends += 1
        self.tally.rows += len(REGIONS)

    def next_batch(self) -> list[tuple[Row, int]]:
        out: list[tuple[Row, int]] = []
        for _ in range(self.opts.rows_per_batch):
            if self.live and self.rng.random() < 0.2:  # retract an earlier order
                row = self.rng.choice(sorted(self.live))
                out.append((row, -1))
                self.live[row] -= 1
                if not self.live[row]:
                    del self.live[row]
            else:
                row = (self.rng.choice(CUSTOMERS), self.rng.randrange(1, 200))
                out.append((row, 1))
                self.live[row] = self.live.get(row, 0) + 1
        return out

    async def append_batch(self, env: Any) -> int:
        batch = self.next_batch()
        ts: int = await env.append("orders", batch)
        self.rec.appended(self.ids["orders"], ts, batch)
        self.last_ts = max(self.last_ts, ts)
        self.tally.appends += 1
        self.tally.rows += len(batch)
        return ts

    async def subscriber(self, env: Any, task_status: Any = None) -> None:
        """Consume the subscribe and record its batches (checked by the history checker).

        Not checked on arrival: a batch may show an append before its ``append``
        call has returned here, so the reference is only complete at the end.
        """
        async with await env.subscribe(self.big) as stream:
            if task_status is not None:
                task_status.started()
            async for batch in stream:
                if not self.tally.batches:
                    as_of = batch.lower.elements[0]
                    self.rec.installed(stream.id, "subscribe", self.big.plan, as_of=as_of)
                self.rec.subscribe_batch(
                    stream.id, batch.lower, batch.upper, batch.updates, batch.error
                )
                self.tally.batches += 1
                self.tally.subscribe_updates += len(batch.updates)

    async def watch_events(self, env: Any, task_status: Any = None) -> None:
        """Print replica status events while :attr:`show_events` is set."""
        async with env.events() as events:
            if task_status is not None:
                task_status.started()
            async for e in events:
                self.events.append(e)
                self.replica_events.on_event(e)

    async def peek_checked(
        self, env: Any, name: str, at: int, show: bool = False
    ) -> dict[Row, int]:
        gid = self.ids[name]
        await env.wait_for(gid, at, timeout_s=self.opts.timeout_s)
        result = await env.peek(gid, at=at)
        rows = _rows(result)
        self.rec.peeked(gid, at, list(rows.items()))
        want = self.rec.expected(gid, at)
        self.tally.peeks += 1
        ok = rows == want
        if not ok:
            self.fail(f"peek {name} at {format_time(at)}: {len(rows)} rows, reference {len(want)}")
        if show:
            from .render import format_table

            body = sorted(rows.items())
            self.say(
                f"   peek {name} at {format_time(at)}: {len(rows)} rows "
                f"{'= reference ✓' if ok else '!= reference ✗'}"
            )
            self.say(
                _indent(
                    format_table([*_columns(env, name), "DIFF"], [[*r, n] for r, n in body[:8]])
                )
            )
        return rows

    async def source_checked(self, env: Any, show: bool = False) -> tuple[int, int]:
        """Read the source and its index at the freshest time ``t``; ``(t, offsets)``.

        ``bids_progress`` says which of the load generator's offsets the source
        holds at ``t`` (``[0, b)``); the generator is a function of its offset,
        so the source must hold exactly their bids, and the index what the
        reference evaluator makes of them: nothing lost, nothing doubled.
        """
        from tidegate.spec.plan.reference import evaluate
        from tidegate.spec.storage import loadgen_updates

        src, idx = self.ids["bids"], self.ids["bids_by_item_idx"]
        # held while it is read three ways (waits until the source has ingested up to it)
        held = await env.hold_fresh([idx, src, f"{SOURCE}_progress"])
        try:
            at = held.time
            await env.wait_for(idx, at, timeout_s=self.opts.timeout_s)
            progress = _rows(await env.peek(f"{SOURCE}_progress", at))
            bids = _rows(await env.peek(src, at))
            by_item = _rows(await env.peek(idx, at))
        finally:
            held.release()
        offsets = int(next(iter(progress))[0]) if progress else 0
        want: dict[Row, int] = {}
        for offset in range(offsets):
            for row, _offset, diff in loadgen_updates(env.state.source(src).connection, offset):
                want[row] = want.get(row, 0) + diff
        plan = env.state.get(idx).plan
        want_by_item = dict(evaluate(plan, {src: [(r, at, n) for r, n in want.items()]}, at).rows)
        self.tally.source_reads += 1
        self.tally.offsets = offsets
        ok = bids == {r: n for r, n in want.items() if n} and by_item == want_by_item
        if not ok:
            self.fail(
                f"source {SOURCE} at {format_time(at)}: {len(bids)} bids and {len(by_item)} "
                f"items, the load generator's offsets [0, {offsets}) make {len(want)} and "
                f"{len(want_by_item)}"
            )
        if show:
            from .render import format_table

            self.say(
                f"   peek {SOURCE_INDEX} at {format_time(at)}: {_bids(sum(bids.values()))} "
                f"(offsets [0, {offsets})) "
                f"{'= load generator ✓' if ok else '!= load generator ✗'}"
            )
            rows = sorted(by_item.items())
            self.say(
                _indent(
                    format_table(
                        [*_columns(env, "bids_by_item"), "DIFF"], [[*r, n] for r, n in rows]
                    )
                )
            )
        return at, offsets

    async def source_running(self, env: Any) -> Any:
        """The source's status once the storage replica reports it ``running`` and its first
        data is committed (a failure if not within the timeout).

        The replica says ``running`` as its ingestion starts, before it has written
        anything: the source's upper is then still its initial ``0``, which says nothing
        (shown as a time, it read ``1970-01-01``). Its first commit moves it to that
        data's time."""
        import anyio

        def ingested(status: Any) -> bool:
            upper = status.upper.elements
            return status.status == "running" and (not upper or int(upper[0]) > 0)

        with anyio.move_on_after(self.opts.timeout_s):
            while True:
                [status] = env.storage_status(SOURCE)
                if ingested(status):
                    break
                await anyio.sleep(0.05)
        if status.status != "running":
            self.fail(f"source {SOURCE} is {status.status} ({status.error})")
        elif not ingested(status):
            self.fail(f"source {SOURCE} is running but committed nothing")
        return status

    def show_source_status(self, status: Any) -> None:
        from .render import format_table

        stats = status.statistics or {}
        upper = status.upper.elements
        self.say(
            _indent(
                format_table(
                    ["SOURCE", "TYPE", "STATUS", "UPPER", "OFFSET COMMITTED", "UPDATES COMMITTED"],
                    [
                        [
                            status.name,
                            status.type,
                            status.status,
                            format_time(int(upper[0])) if upper else "-",
                            stats.get("offset_committed"),
                            stats.get("updates_committed"),
                        ]
                    ],
                )
            )
        )


def _rows(result: Any) -> dict[Row, int]:
    rows = getattr(result, "rows", result)
    out: dict[Row, int] = {}
    for r, n in rows:
        out[tuple(r)] = out.get(tuple(r), 0) + int(n)
    return {r: n for r, n in out.items() if n}


def _bids(n: int) -> str:
    return f"{n} bid" if n == 1 else f"{n} bids"


def _columns(env: Any, name: str) -> list[str]:
    return list(env.schema(name).names)


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())


async def demo(opts: DemoOptions) -> int:
    """Run the demo; 0 if every check held."""
    tmp = None
    if opts.data_dir is None:
        tmp = tempfile.mkdtemp(prefix="tidegate-demo-")
        data_dir = Path(tmp)
    else:
        data_dir = Path(opts.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
    d = Demo(opts, data_dir)
    try:
        import anyio

        with anyio.fail_after(opts.timeout_s * 3):
            await _script(d)
    except Exception as e:
        traceback.print_exc()
        d.fail(f"{type(e).__name__}: {e}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return _summary(d)


async def _script(d: Demo) -> None:
    opts = d.opts
    d.say(f"tidegate demo: data in {d.data_dir}, 2 replicas ({opts.executor}, {opts.spark_master})")
    d.phase("1. start two managed replica processes, a storage replica and the controller")
    async with replica_processes(d.data_dir, opts, ["r1", "r2"], d.token) as orchestrator:
        d.say(
            f"   replica processes r1, r2 (compute) and storage (sources) listening after "
            f"{time.monotonic() - d.t0:.1f} s"
        )
        await _phases(d, orchestrator)


async def _phases(d: Demo, orchestrator: Any) -> None:
    import anyio

    from .render import ProgressBar

    opts = d.opts
    async with open_environment(d.data_dir, opts, orchestrator, 2, d.token) as env:
        names = await _wait_online(d, env)

        d.phase("2. tables, a source, indexes, a materialized view and a subscribe")
        await d.define(env)
        async with anyio.create_task_group() as tg:
            await tg.start(d.subscriber, env)
            await tg.start(d.watch_events, env)

            d.phase(f"3. stream {opts.batches} appends of {opts.rows_per_batch} rows")
            bar = ProgressBar(opts.batches, "   appending")
            times: list[int] = []
            for _ in range(opts.batches):
                times.append(await d.append_batch(env))
                bar.advance(note=f"ts {times[-1]}")
            bar.finish(note=f"{d.tally.rows} rows, last ts {d.last_ts}")

            d.phase("4. peeks at several times, checked against the reference evaluator")
            picks = sorted(
                {times[0], times[len(times) // 3], times[2 * len(times) // 3], times[-1]}
            )
            for t in picks:
                await d.peek_checked(env, "totals_by_customer", t, show=t == picks[-1])
            await d.peek_checked(env, "sales_by_region", d.last_ts, show=True)
            await d.peek_checked(env, "orders", d.last_ts)
            d.say(f"   {d.tally.peeks} peeks so far, all equal to tidegate.spec.plan.reference")

            d.phase("5. the source ingests: read it twice, each read checked against the generator")
            d.show_source_status(await d.source_running(env))
            t1, b1 = await d.source_checked(env, show=True)
            await anyio.sleep(1.0)
            t2, b2 = await d.source_checked(env, show=True)
            d.show_source_status(await d.source_running(env))
            if t2 > t1 and b2 > b1:
                d.say(f"   {_bids(b2 - b1)} more {(t2 - t1) / 1000:.1f} s later ✓")
            else:
                d.fail(f"source {SOURCE} did not advance: offsets {b1} at {t1}, {b2} at {t2}")

            first, second = names[0], names[1]
            d.phase(f"6. SIGKILL replica {first}: {second} keeps answering")
            d.show_events = True
            d.say(f"   SIGKILL to {first}")
            await orchestrator.kill(first)
            for _ in range(3):
                ts = await d.append_batch(env)
                await d.peek_checked(env, "totals_by_customer", ts)
            d.say(f"   3 appends, 3 peeks answered while {first} was down")
            took = await wait_connected(env, opts.timeout_s, [first])
            d.say(f"   {first} restarted by the orchestrator and reconnected after {took:.1f} s")

            d.phase(f"7. SIGKILL {second}: the rehydrated {first} answers alone")
            d.say(f"   SIGKILL to {second}")
            await orchestrator.kill(second)
            ts = await d.append_batch(env)
            await d.peek_checked(env, "totals_by_customer", ts, show=True)
            await d.peek_checked(env, "sales_by_region", ts)
            d.say(f"   {first} rebuilt its dataflows from the replayed history and storage ✓")
            took = await wait_connected(env, opts.timeout_s)
            d.say(f"   {second} back after {took:.1f} s")
            d.show_events = False
            tg.cancel_scope.cancel()

    d.phase("8. restart the controller on the same data directory (replicas keep running)")
    before = d.tally.offsets
    async with open_environment(d.data_dir, opts, orchestrator, 2, d.token) as env:
        await _wait_online(d, env)
        restored = {e.name for e in env.state.entries()}
        want = {
            "orders",
            "customers",
            "totals_by_customer",
            "sales_by_region",
            SOURCE,
            SOURCE_INDEX,
        }
        if not want <= restored:
            d.fail(f"catalog after restart lacks {sorted(want - restored)}")
        d.say(f"   catalog restored: {', '.join(sorted(restored))}")
        rows = await d.peek_checked(env, "orders", d.last_ts)
        d.say(
            f"   orders at {d.last_ts}, the last acknowledged write: {sum(rows.values())} rows, "
            f"as acknowledged ✓"
        )
        await d.peek_checked(env, "totals_by_customer", d.last_ts, show=True)
        await d.peek_checked(env, "sales_by_region", d.last_ts)
        ts = await d.append_batch(env)
        await d.peek_checked(env, "totals_by_customer", ts)
        d.say(f"   an append after the restart (at {format_time(ts)}) is visible in the index ✓")
        status = await d.source_running(env)
        failures = len(d.tally.failures)
        _, offsets = await d.source_checked(env)
        if offsets < before:
            d.fail(f"source {SOURCE} went back from offset {before} to {offsets}")
        if len(d.tally.failures) == failures:
            d.say(
                f"   source {SOURCE} {status.status} again: offsets [0, {offsets}) (were "
                f"[0, {before})), = load generator ✓"
            )

    d.phase("9. the offline history checker on the recorded client history")
    violations = d.rec.check()
    for v in violations:
        d.fail(str(v))
    d.say(f"   {len(d.rec.history.events)} events checked: {len(violations)} violation(s)")
    if opts.data_dir is not None:
        saved = d.data_dir / "demo-history.json"
        saved.write_text(json.dumps(d.rec.to_json(), default=str))
        d.say(f"   history and scenario saved to {saved}")


async def _wait_online(d: Demo, env: Any) -> list[str]:
    took = await wait_connected(env, d.opts.timeout_s)
    names = replica_names(env)
    d.say(f"   replicas {', '.join(names)} connected after {took:.1f} s")
    return names


def _summary(d: Demo) -> int:
    from .render import format_table

    elapsed = time.monotonic() - d.t0
    d.say("\n== summary")
    d.say(
        format_table(
            ["WHAT", "COUNT"],
            [
                ["appends acknowledged", d.tally.appends],
                ["rows appended", d.tally.rows],
                ["peeks checked against the reference", d.tally.peeks],
                ["subscribe batches checked", d.tally.batches],
                ["subscribe updates", d.tally.subscribe_updates],
                ["source reads checked against the load generator", d.tally.source_reads],
                ["bids ingested (load generator offsets)", d.tally.offsets],
                ["history events checked", len(d.rec.history.events)],
                ["failures", len(d.tally.failures)],
            ],
        )
    )
    d.say(f"total {elapsed:.1f} s")
    if d.tally.failures:
        d.say("FAIL: " + "; ".join(d.tally.failures))
        return 1
    d.say("PASS: every answer matched the reference; no acknowledged append was lost")
    return 0
