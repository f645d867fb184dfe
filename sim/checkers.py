"""The online checkers: safety as the run goes, liveness and cleanup once the faults stop.

:class:`Checker` judges what the clients saw against what really landed on
the simulated disk (:class:`~tidegate.sim.truth.TruthLog`), every
``CHECK_MS`` of virtual time and at the end. A broken property raises
:class:`StopRun` with a :class:`~tidegate.sim.history.Violation`.

Safety, as the run goes:

* every answered peek equals the reference at its time, or -- a fresh read
  -- at some time no earlier than every write acknowledged before it began
  (strict serializability; the offline checker also bounds it from above);
* every acknowledged append is on disk at the time it was given;
* subscribe batches are gap-free and accumulate to the reference;
* frontiers never move back: a storage collection's upper across every controller
  incarnation (its since within one: a restored since is the shard's durable one), a
  compute collection's frontiers within one, every shard's on disk;
* no collection's since passes a pending peek's time, nor a hold of a
  collection that depends on it;
* no since passes what the read policies the *clients* set promised
  (:mod:`.promises`, the checker's own formula over the client history);
* a restored controller keeps every history a policy promised before the
  crash, its storage collections start at their shards' sinces, its dataflows
  where every input is readable;
* an answer "hydrated" means a replica reported, on the network, an output
  frontier beyond the as_of it was given (:mod:`.progress`);
* a copy-to's files hold the reference's contents at one valid time
  (:mod:`.copy_to`).

Liveness and cleanup, after the quiet phase (faults healed, clients idle):

* every operation completed (a subscribe of a complete collection ended),
  every replica is connected and hydrated every dataflow, by the trace, and
  caught up with the controller;
* nothing is left half-done (:mod:`.quiescence`): no pending peek, no read
  hold without an owner, no complete subscribe still there;
* every collection's write frontier caught up with its inputs' uppers as of
  the quiet phase's start;
* every since advanced exactly as far as its read policy (the client's) and
  the holds on it allowed -- at least as far as they allowed shortly before
  the end -- and never beyond what the collections reading it hold;
* every dropped collection is forgotten by the controller, run by no replica,
  and its shard (a materialized view's) finalized;
* every append whose outcome was unknown landed at one time or not at all (each
  table's part whole), and nothing landed that no append wrote.

Sources and sinks (scenarios with a storage replica) have checks of their own,
run from here (:mod:`.storage_checks`): every upstream change lands exactly
once at the time its offset's binding gives it, bindings are durable before
their data, nothing is acknowledged upstream before it is durable, every sink
commits its input exactly once, and sources and sinks catch up once the
faults stop. Reads of sources (and of what is computed from them) are judged
like reads of tables, against what landed in the source's shard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from tidegate.runtime.controller.schemas import shard_name
from tidegate.runtime.environment import Environment
from tidegate.runtime.storage.store import decoded_state
from tidegate.spec.compute import FrontierUpper
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import plan_from_dict, replace_gets
from tidegate.spec.storage import SinceChanged, UpperChanged

from .clients import Clients
from .controller import ControllerProcess
from .copy_to import CopyToChecker
from .history import (
    ReferenceModel,
    Violation,
    Windows,
    appended,
    judge_peek,
    row_in,
    subscription_id,
)
from .progress import ReplicaProgress, time_of
from .promises import Promises
from .quiescence import check_quiescence
from .scenario import DEFAULT_CLUSTER
from .storage_checks import StorageChecker
from .truth import TruthLog
from .world_port import WorldPort

__all__ = ["CHECK_MS", "CheckedWorld", "Checker", "StopRun", "frontier_text"]


class CheckedWorld(WorldPort, Protocol):
    """What the checker uses of the world: its services, the controller and the clients."""

    @property
    def controller(self) -> ControllerProcess: ...

    @property
    def clients(self) -> Clients: ...


CHECK_MS = 50


def frontier_text(f: Antichain) -> str:
    """A frontier as the trace writes it: ``[3]``, ``[]``."""
    return "[" + ", ".join(map(str, f.elements)) + "]"


class StopRun(BaseException):
    """Stops a run at a violation (a ``BaseException``: the product's handlers must not eat it)."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


def placed_collections(ctl: Any, *, include_dropped: bool = False) -> list[tuple[str, Any]]:
    """``(instance, collection)`` for the compute collections of every instance (cluster) of
    controller ``ctl``."""
    compute = ctl.compute
    return [
        (instance, c)
        for instance in compute.instance_ids()
        for c in compute.instance(instance).collections(include_dropped=include_dropped)
    ]


def compute_collections(ctl: Any, *, include_dropped: bool = False) -> list[Any]:
    """The compute collections of every instance (cluster) of controller ``ctl``."""
    return [c for _, c in placed_collections(ctl, include_dropped=include_dropped)]


def _step_back(f: Antichain) -> Antichain:
    if len(f.elements) == 1 and f.elements[0] > 0:
        return Antichain([f.elements[0] - 1])
    return f


def _difference(got: Mapping[Any, int], want: Mapping[Any, int]) -> str:
    """What ``got`` has too much and too little, as a short text."""
    extra = {r: n - want.get(r, 0) for r, n in got.items() if n != want.get(r, 0)}
    extra.update({r: -n for r, n in want.items() if r not in got})
    over = sorted(((r, n) for r, n in extra.items() if n > 0), key=repr)
    under = sorted(((r, -n) for r, n in extra.items() if n < 0), key=repr)
    return f"extra {over[:4]}, missing {under[:4]}"


class Checker:
    """See the module docstring."""

    def __init__(self, world: CheckedWorld) -> None:
        self.world = world
        self.history = world.history
        self.truth = TruthLog(world.disk, self.violate)
        self.model = ReferenceModel()
        self.windows = Windows()
        self._completed = 0
        self._events = 0
        self._streams: dict[int, dict[str, Any]] = {}
        self._table_ids: dict[str, GlobalId] = {}
        self._plans = {d.name: d for d in world.scenario.dataflows}
        self._scenario_tables = {t.id for t in world.scenario.tables}
        self.storage_frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        self.compute_frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        self._claimed: Counter[tuple[str, int, Any, int]] = Counter()
        self._landed_models = 0
        self.subscribe_batches = 0
        self._reported: dict[GlobalId, Antichain] = {}
        self._storage_reported: dict[tuple[str, GlobalId], Antichain] = {}
        self.quiet_start: dict[tuple[str, GlobalId], tuple[Antichain, Antichain]] = {}
        """Every live collection's ``(since, upper)`` when the faults stopped, by (layer, id)."""
        self.storage = (
            StorageChecker(world, self.truth, self.violate) if world.scenario.storage else None
        )
        """The checks of sources and sinks (scenarios with a storage replica)."""
        self._sources: set[GlobalId] = set()
        """Sources in the reference model (their landed data, like a table's)."""
        self.settled_at: dict[tuple[str, GlobalId], tuple[Antichain, Antichain]] = {}
        """Every collection's ``(since, upper)`` shortly before the end (see :meth:`settled`)."""
        self.promises = Promises()
        """The read policies the clients set (what compaction is judged by)."""
        self.progress = ReplicaProgress(lambda: world.kernel.now_ms)
        """What each replica reported on the network (what hydration is judged by)."""
        self.copy_tos = CopyToChecker(
            self.model, self.windows, self.violate, self._refresh, world.count
        )
        self._indexes: set[GlobalId] = set()
        self._views: set[GlobalId] = set()
        """The clients' indexes and materialized views, by the history's ``install`` events."""
        self._first_since: dict[tuple[str, GlobalId], int | None] = {}
        """Each collection's since when the checker first saw it (its since at creation)."""
        self._max_upper: dict[tuple[str, GlobalId], int | None] = {}
        """The greatest upper each collection ever had (across controller incarnations)."""
        self._judged: dict[tuple[str, GlobalId], tuple[int, tuple[int, int]]] = {}
        """The since last found within its policies, and the policy calls it was judged by."""
        self._index_inputs: dict[GlobalId, list[GlobalId]] = {}
        self._placed: dict[GlobalId, str] = {}
        """The cluster the clients created each scenario dataflow on (its spec's): where it must
        run, judged against the world's record of which replicas it started for which cluster."""

    def violate(self, property: str, message: str) -> None:
        self.world.violate(property, message)

    # -- the periodic check -----------------------------------------------------------------
    def check(self) -> None:
        """Judge everything new since the last check (see the module docstring)."""
        self._refresh()
        if self.storage is not None:
            self.storage.check()
        self._judge_new()
        env = self.world.controller.env
        if env is not None and self.world.controller.ready:
            self._check_frontiers(env)
            self._check_holds(env)

    def storage_acknowledged(self, source: GlobalId, offset: int) -> None:
        """An ingestion acknowledged ``offset`` of ``source`` upstream (see :mod:`.storage_checks`)."""
        if self.storage is not None:
            self.storage.acknowledged(source, offset)

    def _refresh(self) -> None:
        before = {t: len(self.truth.updates(t)) for t in (*self.truth.tables(), *self._sources)}
        self.truth.refresh()
        earliest: int | None = None
        for t, n in before.items():
            fresh = self.truth.updates(t)[n:]
            if fresh:
                first = min(u[1] for u in fresh)
                earliest = first if earliest is None else min(earliest, first)
        if earliest is not None:
            self.model.forget_cache(earliest)

    def _judge_new(self) -> None:
        events = self.history.events
        while self._events < len(events):
            ev = events[self._events]
            self._events += 1
            op = ev["op"]
            if op == "table":
                gid = GlobalId.parse(ev["id"])
                if ev["name"] in self._scenario_tables:  # (the SQL clients' tables have names)
                    self._table_ids[ev["name"]] = gid
                if gid not in self.model.tables:
                    self.truth.track(gid)
                    self.truth.refresh()
                    self.model.tables[gid] = self.truth.updates(gid)
            elif op == "source":
                gid = GlobalId.parse(ev["id"])
                self._table_ids[ev["name"]] = gid
                if gid not in self.model.tables:
                    self.truth.watch(str(gid))
                    self.truth.refresh(only=(str(gid),))
                    self.model.tables[gid] = self.truth.updates(gid)
                    self._sources.add(gid)
            elif op == "install" and "plan" in ev:  # an object the SQL clients created
                gid = GlobalId.parse(ev["id"])
                self.model.install(gid, plan_from_dict(ev["plan"]))
                if ev.get("kind") == "index":  # its since follows a read policy (the default)
                    self._indexes.add(gid)
                if "cluster" in ev:  # placed on a cluster the clients created during the run
                    self._placed[gid] = str(ev["cluster"])
                    if ev.get("kind") == "materialized_view":
                        self.truth.watch(ev["id"])
                        self._views.add(gid)
            elif op == "install":
                spec = self._plans.get(ev["name"])
                if spec is not None:
                    gid = GlobalId.parse(ev["id"])
                    self.model.install(gid, self._plan(spec.plan, ev.get("inputs")))
                    self._placed[gid] = spec.cluster
                    if spec.kind == "materialized_view":
                        self.truth.watch(ev["id"])
                        self._views.add(gid)
                    elif spec.kind == "index":
                        self._indexes.add(gid)
            elif op == "policy":
                self.promises.invoked(ev)
            elif op == "subscribe":
                self._streams[int(ev["n"])] = {"ev": ev, "next": None, "acc": {}, "closed": False}
            elif op == "batch":
                self._batch(ev)
        done = self.history.completed
        while self._completed < len(done):
            ev = done[self._completed]
            self._completed += 1
            if ev["op"] == "append" and ev["status"] == "ok":
                self.windows.ack(int(ev["complete"]), int(ev["time"]))
                self._check_durable(ev)
            elif ev["op"] == "peek" and ev["status"] == "ok" and "rows" in ev:
                if "plan" in ev:  # a SQL query: its reference plan comes with it
                    self.model.install(GlobalId.parse(ev["target"]), plan_from_dict(ev["plan"]))
                v = judge_peek(self.model, self.truth.change_times, self.windows, ev, hi=False)
                if v is not None:
                    self.violate(v.property, v.message)
                target = GlobalId.parse(ev["target"])
                known = target in self.model.plans or target in self.model.tables
                if self._sources and known and self.model.inputs(target) & self._sources:
                    self.world.count("source_read_checked")
            elif ev["op"] == "copy_to":
                self.copy_tos.judge(ev)

    def _plan(self, plan: Any, inputs: Mapping[str, str] | None = None) -> Any:
        ids = {GlobalId.parse(name): gid for name, gid in self._table_ids.items()}
        ids.update({GlobalId.parse(k): GlobalId.parse(v) for k, v in (inputs or {}).items()})
        return replace_gets(plan, ids)

    def _check_durable(self, ev: Mapping[str, Any]) -> None:
        """An acknowledged append's updates are on disk at its time."""
        ts = int(ev["time"])
        for table, rows in ev["batches"]:
            tid = GlobalId.parse(table)
            if tid not in self.model.tables:
                continue
            landed: Counter[tuple[Row, int]] = Counter(
                (row, d) for row, t, d in self.truth.updates(tid) if t == ts
            )
            for r, d in rows:
                key = (table, ts, row_in(r), int(d))
                self._claimed[key] += 1
                if landed[(row_in(r), int(d))] < self._claimed[key]:
                    self.violate(
                        "acknowledged_appends_durable",
                        f"append {ev['n']} was acknowledged at {ts}, but {row_in(r)} x{d} is "
                        f"not in {table}'s shard at that time",
                    )

    def _batch(self, ev: Mapping[str, Any]) -> None:
        self.subscribe_batches += 1
        s = self._streams.get(int(ev["sub"]))
        if s is None or s["closed"]:
            if s is not None:
                self.violate("subscribe_gap_free", f"subscribe {ev['sub']} emitted after it ended")
            return
        if s["next"] is not None and ev["lower"] != s["next"]:
            self.violate(
                "subscribe_gap_free",
                f"subscribe {ev['sub']}: batch {ev['lower']}..{ev['upper']} after {s['next']}",
            )
        s["next"] = ev["upper"]
        if ev["error"] is not None:
            s["closed"] = True
            return
        if not ev["upper"]:  # complete: its last batch, judged like the others
            s["closed"] = True
            self.world.count("subscribe_completed")
        gid = subscription_id(s["ev"])
        if gid not in self.model.plans:
            spec = self._plans.get(s["ev"]["target"])
            if spec is None:
                return
            self.model.install(gid, self._plan(spec.plan, s["ev"].get("inputs")))
        acc = s["acc"]
        end = ev["upper"][0] if ev["upper"] else None
        for t, r, d in ev["updates"]:
            if not (ev["lower"][0] <= t and (end is None or t < end)):
                self.violate(
                    "subscribe_gap_free",
                    f"subscribe {ev['sub']}: update at {t} outside {ev['lower']}..{ev['upper']}",
                )
            row = row_in(r)
            n = acc.get(row, 0) + d
            if n:
                acc[row] = n
            else:
                acc.pop(row, None)
        if ev["updates"] or end is None:
            self._refresh()
            # Complete: what it holds at its last change, and for ever after.
            last = max([int(ev["lower"][0]), *(int(u[0]) for u in ev["updates"])])
            at = last if end is None else int(end) - 1
            want = self.model.contents(gid, at).rows
            if acc != want:
                self.violate(
                    "subscribe_matches_reference",
                    f"subscribe {ev['sub']} ({s['ev']['target']}) at upper {ev['upper']} "
                    f"differs from the reference: {_difference(acc, want)}",
                )

    # -- frontiers and holds ------------------------------------------------------------------
    def on_effect(self, e: Any) -> None:
        """Every effect the driver carries out: reported frontiers never move back."""
        kind = type(e)
        if kind is FrontierUpper:
            prev = self._reported.get(e.id)
            if prev is not None and not prev <= e.upper:
                self.violate(
                    "frontiers_monotone",
                    f"the controller reported the write frontier of {e.id} going back "
                    f"{prev} -> {e.upper}",
                )
            self._reported[e.id] = e.upper
            self.world.record("upper", id=str(e.id), upper=frontier_text(e.upper))
        elif kind is UpperChanged or kind is SinceChanged:
            frontier = e.upper if kind is UpperChanged else e.since
            self.world.record(
                "storage_upper" if kind is UpperChanged else "since",
                id=str(e.id),
                **{"upper" if kind is UpperChanged else "since": frontier_text(frontier)},
            )
            key = (kind.__name__, e.id)
            prev = self._storage_reported.get(key)
            if prev is not None and not prev <= frontier:
                self.violate(
                    "frontiers_monotone",
                    f"the {'upper' if kind is UpperChanged else 'since'} of storage collection "
                    f"{e.id} went back {prev} -> {frontier} (across controller incarnations too)",
                )
            self._storage_reported[key] = frontier

    def _check_frontiers(self, env: Environment) -> None:
        ctl = env.driver.ctl
        judged = self.model.tables.keys() | self._views
        for c in ctl.storage.collections():
            if c.is_dropped:
                continue
            if c.id in judged:
                self._within_policy(env, "storage", c.id, c.since, c.upper)
            prev = self.storage_frontiers.get(c.id)
            if prev is not None and not (prev[0] <= c.since and prev[1] <= c.upper):
                self.violate(
                    "frontiers_monotone",
                    f"storage collection {c.id} went from since {prev[0]}, upper {prev[1]} to "
                    f"since {c.since}, upper {c.upper} (across controller incarnations too)",
                )
            self.storage_frontiers[c.id] = (c.since, c.upper)
        for cc in compute_collections(ctl):
            if cc.id in self._indexes:
                self._within_policy(env, "compute", cc.id, cc.read_frontier, cc.write_frontier)
            prev = self.compute_frontiers.get(cc.id)
            now = (cc.read_frontier, cc.write_frontier)
            if prev is not None and not (prev[0] <= now[0] and prev[1] <= now[1]):
                self.violate(
                    "frontiers_monotone",
                    f"compute collection {cc.id} went from since {prev[0]}, upper {prev[1]} to "
                    f"since {now[0]}, upper {now[1]}",
                )
            self.compute_frontiers[cc.id] = now

    def _within_policy(
        self,
        env: Environment,
        layer: str,
        id: GlobalId,
        since: Antichain,
        upper: Antichain,
        property: str = "compaction_within_policy",
    ) -> None:
        """A since never passes what the read policies the client set promise (see
        :mod:`.promises`): readable from ``lag_since(upper)`` on, or from where the collection
        started (its since when first seen), whichever is later.

        ``upper`` is the greatest the collection ever had (a restored index starts over from
        its as_of; the promise was made at the upper it had before); for an index, also its
        inputs' (a restored index may start where its inputs' uppers allow).
        """
        key = (layer, id)
        s, u = time_of(since), time_of(upper)
        first = self._first_since.setdefault(key, s)
        if u is not None:
            seen = self._max_upper.get(key, u)
            u = None if seen is None else max(u, seen)
        self._max_upper[key] = u
        if s is None or u is None or first is None or s <= first:
            return  # released (dropped), complete, never readable, or where it started
        target = str(id)
        # Incremental: the bound only grows (uppers and policies accumulate) unless a policy
        # call turns out refused; a since already judged against the same policies passes.
        memo = (s, self.promises.revision(target))
        if self._judged.get(key) == memo:
            return
        if layer == "compute":
            inputs = self._index_inputs.get(id)
            if inputs is None:
                inputs = self._index_inputs[id] = sorted(self.model.inputs(id))
            uppers = [env.driver.ctl.storage.storage_frontiers(t) for t in inputs]
            if uppers and all(fr is not None and fr[1].elements for fr in uppers):
                u = max(u, min(int(fr[1].elements[0]) for fr in uppers if fr is not None))
        bound = max(first, self.promises.most(target, u))
        if s <= bound:
            self._judged[key] = memo
        else:
            self.violate(
                property,
                f"the since of {layer} collection {id} is [{s}], beyond what its read policy "
                f"promised readable at upper [{u}] (from [{bound}] on; policies "
                f"{sorted(self.promises.ever(str(id)))} as (lag, granularity) ms)",
            )

    def _check_holds(self, env: Environment) -> None:
        ctl = env.driver.ctl
        generation = self.world.controller.generation_here()
        for ev, _scope in self.world.clients.peeks:
            if ev.get("controller", generation) != generation:
                continue  # another incarnation's peek (a zombie's): its holds are there
            at = ev.get("at")
            if at is None or ev.get("expect") != "answer" or ev["status"] != "pending":
                continue
            try:
                since = env.frontiers(GlobalId.parse(ev["target"]))[0]
            except TidegateError:
                continue
            if not since.less_equal(int(at)):
                self.violate(
                    "since_respects_holds",
                    f"the since {since} of {ev['name']} passed pending peek {ev['n']} at {at}",
                )
        for instance, c in placed_collections(ctl):
            if c.dropped:
                continue
            for dep, _held in c.storage_dependencies:
                fr = ctl.storage.storage_frontiers(dep)
                if fr is not None and not fr[0] <= c.read_frontier:
                    self.violate(
                        "dependency_holds",
                        f"the since {fr[0]} of {dep} passed the since {c.read_frontier} of "
                        f"{c.id}, which reads it",
                    )
            for dep, _held in c.compute_dependencies:
                try:
                    d = ctl.compute.collection_frontiers(instance, dep)
                except TidegateError:
                    continue
                if not d.read_frontier <= c.read_frontier:
                    self.violate(
                        "dependency_holds",
                        f"the since {d.read_frontier} of {dep} passed the since "
                        f"{c.read_frontier} of {c.id}, which reads it",
                    )

    # -- a restored controller ------------------------------------------------------------------
    def controller_restored(
        self, env: Environment, restored: frozenset[GlobalId] | None = None
    ) -> None:
        """No promised history lost; storage sinces the shards'; as-ofs readable; compute anew.

        ``restored``: the compute collections the restore brought back (``None``: all there
        are). The clients came up since, and a first setup (every earlier incarnation died
        before it) may have created dataflows: their as-ofs were chosen over the sinces of
        then, which later policies moved, so only the restored ones are judged here.

        A storage collection's since starts again from its shard's durable since,
        which may lag what the dead controller held in memory (its last since
        downgrades may not have reached the disk): only the upper, and the shard's
        own since, are monotone across incarnations.

        What the restored controller holds is judged against what was acknowledged
        before the crash, not against the catalog it restored from: every since
        (an index's as_of, too) is within what the read policies the clients set
        promised at the greatest upper seen before (``restore_keeps_promised_history``,
        see :meth:`_within_policy`): a restart never loses readable history.
        """
        self._refresh()
        self._judge_new()  # every policy the clients set before the crash
        self.compute_frontiers.clear()
        self._reported.clear()
        self.storage_frontiers = {
            id: (Antichain([0]), upper) for id, (_since, upper) in self.storage_frontiers.items()
        }
        self._storage_reported = {
            k: v for k, v in self._storage_reported.items() if k[0] != "SinceChanged"
        }
        self.truth.refresh()
        ctl = env.driver.ctl
        judged = self.model.tables.keys() | self._views
        promise = "restore_keeps_promised_history"
        for c in ctl.storage.collections():
            if not c.is_dropped and c.id in judged:
                self._within_policy(env, "storage", c.id, c.since, c.upper, promise)
        for cc in compute_collections(ctl):
            if not cc.dropped and cc.id in self._indexes:
                self._within_policy(
                    env, "compute", cc.id, cc.read_frontier, cc.write_frontier, promise
                )
        for c in ctl.storage.collections():
            durable = self.truth.frontiers.get(str(c.id))
            if durable is None or c.is_dropped:
                continue
            if not durable[0] <= c.since:
                self.violate(
                    "restore_keeps_sinces",
                    f"{c.id} was restored at since {c.since}, before its shard's since {durable[0]}",
                )
        for cc in compute_collections(ctl):
            if restored is not None and cc.id not in restored:
                continue
            for dep, _ in cc.storage_dependencies:
                durable = self.truth.frontiers.get(str(dep))
                if durable is not None and not durable[0] <= cc.as_of:
                    self.violate(
                        "restored_as_of_readable",
                        f"{cc.id} restored at as_of {cc.as_of}, before the durable since "
                        f"{durable[0]} of its input {dep}",
                    )

    # -- the quiet phase and the end --------------------------------------------------------------
    def quiet_started(self) -> None:
        """Remember every frontier now: by the end, everything must have caught up with them."""
        env = self.world.controller.env
        if env is None:
            return
        ctl = env.driver.ctl
        for c in ctl.storage.collections():
            if not c.is_dropped:
                self.quiet_start[("storage", c.id)] = (c.since, c.upper)
        for cc in compute_collections(ctl):
            if not cc.dropped:
                self.quiet_start[("compute", cc.id)] = (cc.read_frontier, cc.write_frontier)
        for e in ctl.storage.exports():
            self.quiet_start[("export", e.id)] = (e.read_capability, e.upper)
        if self.storage is not None:
            self.storage.quiet_started()

    def settled(self) -> None:
        """Shortly before the end (``SETTLED_MS``): where every since must have come by the end.

        Compaction is judged from here rather than from the quiet phase's middle, so
        that a since lagging its policy by more than this is seen."""
        env = self.world.controller.env
        if env is None:
            return
        ctl = env.driver.ctl
        self.settled_at = {("storage", c.id): (c.since, c.upper) for c in ctl.storage.collections()}
        for cc in compute_collections(ctl):
            self.settled_at[("compute", cc.id)] = (cc.read_frontier, cc.write_frontier)
        for e in ctl.storage.exports():
            self.settled_at[("export", e.id)] = (e.read_capability, e.upper)

    def check_end(self) -> None:
        """The liveness and cleanup checks (see the module docstring)."""
        self._refresh()
        self._judge_new()
        self.resolve_in_doubt()
        # A drop whose controller died in the call may have happened (its outcome is unknown).
        in_doubt = {ev.get("id") for ev in self.history.ops("drop") if ev["status"] == "info"}
        for tid in self.truth.tables():  # a lost catalog must never cost the data
            fr = self.truth.frontiers.get(str(tid))
            dropped = tid in self.world.dropped_ids or str(tid) in in_doubt
            if fr is not None and not fr[1].elements and not dropped:
                self.violate(
                    "nothing_deleted_undropped",
                    f"table {tid}'s shard was finalized, but no client dropped it",
                )
        for ev in self.history.events:
            if ev.get("status") == "pending" and ev["op"] != "subscribe":
                self.violate(
                    "operations_complete",
                    f"{ev['op']} {ev['n']} (invoked at {ev['invoke_ms']} ms) never completed",
                )
        env = self.world.controller.env
        self._check_subscribes_complete()
        if env is None or not self.world.controller.ready:
            self.violate("controller_recovers", "no controller is up at the end of the run")
            return
        self._check_frontiers(env)
        self._check_holds(env)
        for info in env.replicas():
            if info.status != "connected":
                self.violate(
                    "replicas_recover",
                    f"replica {info.replica} is {info.status} at the end ({info.last_error})",
                )
        check_quiescence(self.world, env, self.violate)
        self._check_hydrated_at_rest(env)
        self._check_replicas(env)
        self._check_caught_up(env)
        self._check_compaction(env)
        self._check_cleanup(env)
        if self.storage is not None:
            self.storage.check_end()

    def _check_subscribes_complete(self) -> None:
        """A subscribe of a collection that becomes complete ends: its last batch's upper is []."""
        for sub in self.world.clients.subs:
            if sub.stream_id is None:
                continue
            ev = next((e for e in reversed(self.history.events) if e.get("n") == sub.n), None)
            if ev is None:
                continue
            gid = subscription_id(ev)
            if gid not in self.model.plans:
                self.model.install(gid, self._plan(sub.spec.plan, ev.get("inputs")))
            if not self.model.inputs(gid):
                self.violate(
                    "subscribes_complete",
                    f"subscribe {sub.n} ({sub.spec.name}) reads a collection that is complete "
                    f"(it has no inputs), yet it never ended: its upper is {sub.upper}",
                )

    def _check_replicas(self, env: Environment) -> None:
        """Every replica hydrated every dataflow, and caught up with where the controller was.

        From the trace alone (:mod:`.progress`): on its current connection, every
        replica reported for every live index and materialized view an output
        frontier beyond the as_of it was given (``hydration_completes``) and a
        write frontier at least the one the controller had when the quiet phase
        was judged from (``replicas_agree``: with active replication a lagging
        replica is otherwise invisible, the controller takes the greatest).
        """
        ctl = env.driver.ctl
        # Which cluster each replica serves is the world's record (it started the process for
        # that cluster), never the controller's: a replica the controller put in another
        # cluster, or a dataflow placed on another cluster, is a finding.
        clusters = self.world.cluster_of
        members: dict[str, list[str]] = {}
        for info in env.replicas():
            process = info.address or info.replica
            mine = clusters.get(process)
            if mine != info.instance:
                self.violate(
                    "replicas_in_their_cluster",
                    f"replica {info.replica} (process {process}) serves cluster {info.instance}, "
                    f"but was started for cluster {mine}",
                )
            members.setdefault(info.instance, []).append(process)
        # What reads a source that stopped for good (its upstream changed schema, its slot is
        # gone) can never hydrate past it.
        stopped = set() if self.storage is None else self.storage.stopped_for_good()
        for instance, c in placed_collections(ctl):
            if c.dropped or c.id.is_transient or c.kind == "log":
                continue
            placed = self.placement(c.id)
            if instance != placed:
                self.violate(
                    "dataflows_on_their_cluster",
                    f"{c.id} runs on cluster {instance}, but its client created it on {placed}",
                )
            names = members.get(placed, [])
            start = self.quiet_start.get(("compute", c.id))
            stuck = (
                bool(stopped)
                and c.id in self.model.plans
                and bool(stopped & self.model.inputs(c.id))
            )
            written = self._written(c.id)
            for r in names:
                if not stuck and not self.progress.hydrated(r, c.id, written=written):
                    self.violate(
                        "hydration_completes",
                        f"replica {r} never reported an output frontier of {c.id} beyond the "
                        "as_of it was given, on its current connection",
                    )
                want = None if start is None else time_of(start[1])
                got = self.progress.write(r, c.id, written=written)
                if start is not None and not (got is None or (want is not None and got >= want)):
                    self.violate(
                        "replicas_agree",
                        f"replica {r} reported {c.id} complete only to [{got}] by the end, behind "
                        f"the controller's write frontier [{want}] when the faults had stopped",
                    )

    def _written(self, id: GlobalId) -> bool:
        """Whether materialized view ``id``'s shard is complete on the simulated disk (upper
        ``[]``): read off the disk, not from the controller's bookkeeping."""
        if id not in self._views:
            return False
        self.truth.refresh(only=(str(id),))
        durable = self.truth.frontiers.get(str(id))
        return durable is not None and not durable[1].elements

    def judge_hydration(
        self, env: Environment, ev: dict[str, Any], replicas: list[str] | None
    ) -> None:
        """A hydration answer is judged against the trace: ``hydrated`` on ``r`` => ``r``
        reported an output frontier beyond the as_of (for every live index and view, when the
        question named none)."""
        if not ev.get("hydrated"):
            return
        ctl = env.driver.ctl
        live = [info.address or info.replica for info in env.replicas()]
        if ev["target"] is not None:
            ids = [GlobalId.parse(ev["target"])]
        else:
            ids = [
                c.id
                for c in compute_collections(ctl)
                if not c.dropped and not c.id.is_transient and c.kind != "log"
            ]
        for id in ids:
            # Only the replicas of the cluster that computes it can have: the world's record
            # of which cluster it started each replica for, and where the client created it.
            cluster = self.placement(id)
            asked = [r for r in live if self.world.cluster_of.get(r) == cluster]
            if replicas is not None:
                asked = [r for r in asked if r in replicas]
            if not asked:
                continue  # no replica to ask: vacuously hydrated, as documented
            written = self._written(id)
            if not any(self.progress.hydrated(r, id, written=written) for r in asked):
                self.violate(
                    "hydration_matches_trace",
                    f"hydration {ev['n']} answered that {id} is hydrated (on {asked}), but no "
                    "such replica reported an output frontier beyond its as_of on its "
                    "current connection",
                )
        self.world.count("hydration_judged")

    def _check_hydrated_at_rest(self, env: Environment) -> None:
        """At rest, the converse of :meth:`judge_hydration`: a dataflow that some replica of its
        cluster computed beyond its as_of on its current connection (the trace says so) is
        answered hydrated."""
        live = [info.address or info.replica for info in env.replicas()]
        for c in compute_collections(env.driver.ctl):
            if c.dropped or c.id.is_transient or c.kind == "log":
                continue
            cluster = self.placement(c.id)
            written = self._written(c.id)
            done = [
                r
                for r in live
                if self.world.cluster_of.get(r) == cluster
                and self.progress.hydrated(r, c.id, written=written)
            ]
            if not done:
                continue
            try:
                ok, why = env.hydrated(c.id), "not hydrated"
            except TidegateError as e:
                ok, why = False, f"refused: {e}"
            if not ok:
                self.violate(
                    "hydration_matches_trace",
                    f"at rest, {done} reported {c.id}'s output frontier beyond its as_of, yet "
                    f"the environment answers that it is {why}",
                )
            self.world.count("hydration_judged_at_rest")

    def placement(self, id: GlobalId) -> str:
        """The cluster the clients created dataflow ``id`` on (its spec's), ``default`` for
        anything else: their own record, not the catalog's."""
        placed = self._placed.get(id)
        if placed is None:  # created a moment ago: not judged from the history yet
            clients = self.world.clients
            names = [n for n, g in clients.objects.items() if g == id]
            spec = clients.specs.get(names[0]) if names else None
            placed = DEFAULT_CLUSTER if spec is None else spec.cluster
        return placed

    def judge_peek_cluster(self, ev: Mapping[str, Any]) -> None:
        """An answered peek was answered by a replica of the cluster it was meant for
        (``ev["cluster"]``: the one its client named, else its index's or view's, as the client
        created it, else ``default``).

        From the trace (:mod:`.progress`): some replica answered, with rows, a ``Peek`` of the
        collection sent after the client asked and answered before the client heard back; the
        client's own ``Peek`` is among them. Each replica's cluster is the world's record of
        what it started the process for. If none of them is of the cluster, the controller sent
        the read elsewhere."""
        cluster = ev.get("cluster")
        if cluster is None or ev["status"] != "ok":
            return
        by = self.progress.answered_by(
            GlobalId.parse(ev["target"]), int(ev["invoke_ms"]), int(ev["complete_ms"])
        )
        if not by:
            self.world.count("peek_answer_not_on_wire")
            return
        mine = {r for r in by if self.world.cluster_of.get(r) == cluster}
        if not mine:
            self.violate(
                "peeks_answered_in_their_cluster",
                f"peek {ev['n']} of {ev['name']} on cluster {cluster} was answered by "
                f"{sorted(by)} (of {sorted({self.world.cluster_of.get(r, '?') for r in by})}), "
                f"no replica of {cluster}",
            )
        self.world.count(
            f"peek_answered_in_cluster_{'default' if cluster == DEFAULT_CLUSTER else 'other'}"
        )

    def _check_caught_up(self, env: Environment) -> None:
        ctl = env.driver.ctl
        tables = [c for c in ctl.storage.collections() if c.id in self.model.tables]
        for cc in compute_collections(ctl):
            if cc.dropped or ("compute", cc.id) not in self.quiet_start:
                continue
            inputs = self.model.inputs(cc.id) if cc.id in self.model.plans else set()
            wanted = [
                self.quiet_start[("storage", t.id)][1]
                for t in tables
                if t.id in inputs and ("storage", t.id) in self.quiet_start
            ]
            if not wanted:
                continue
            need = Antichain.meet_all(wanted)
            if not need <= cc.write_frontier:
                self.violate(
                    "frontiers_catch_up",
                    f"{cc.id} is complete to {cc.write_frontier} at the end, behind its inputs' "
                    f"uppers {need} when the faults stopped",
                )

    def _check_compaction(self, env: Environment) -> None:
        """Every since is where its policy and the holds of its dependents put it (see the doc).

        A collection's own hold is its read policy applied to its upper: the
        policy the client set (or the runtime's documented default), by the
        checker's own formula (:mod:`.promises`); a materialized view's or
        subscribe's dataflow steps back from its write frontier. Dependents hold
        their inputs at their own sinces: compute collections their storage
        and compute dependencies, storage collections (a materialized view's
        output) their storage dependencies, and a sink its input, one step back
        from what it has written (its upper), as Materialize's sinks do.
        """
        ctl = env.driver.ctl
        compute = {c.id: c for c in compute_collections(ctl) if not c.dropped}
        storage = {c.id: c for c in ctl.storage.collections() if not c.is_dropped}
        exports = {e.id: e for e in ctl.storage.exports()}
        Key = tuple[str, GlobalId]
        holders: dict[Key, list[Key]] = {}
        for c in compute.values():
            for dep, _ in c.storage_dependencies:
                holders.setdefault(("storage", dep), []).append(("compute", c.id))
            for dep, _ in c.compute_dependencies:
                holders.setdefault(("compute", dep), []).append(("compute", c.id))
        for sc in storage.values():
            for dep in sc.dependencies:
                holders.setdefault(("storage", dep), []).append(("storage", sc.id))
        for e in exports.values():
            holders.setdefault(("storage", e.description.from_id), []).append(("export", e.id))

        def frontiers(key: Key) -> tuple[Antichain, Antichain] | None:
            layer, id = key
            if layer == "compute":
                c = compute.get(id)
                return None if c is None else (c.read_frontier, c.write_frontier)
            if layer == "export":
                e = exports.get(id)
                return None if e is None else (e.read_capability, e.upper)
            sc = storage.get(id)
            return None if sc is None else (sc.since, sc.upper)

        def own(key: Key, since: Antichain, upper: Antichain) -> Antichain:
            layer, id = key
            if layer == "storage" or id in self._indexes:
                u = time_of(upper)
                if u is None:  # complete: a policy keeps what it had
                    return Antichain([0])
                return Antichain([self.promises.least(str(id), u)])
            return _step_back(upper)  # a materialized view's, subscribe's or sink's dataflow

        baseline = self.settled_at if self.settled_at else self.quiet_start

        def lower(key: Key, seen: frozenset[Key] = frozenset()) -> Antichain:
            start = baseline.get(key) if key in self.quiet_start else None
            if start is None or key in seen:
                return Antichain([0])
            deps = [lower(d, seen | {key}) for d in holders.get(key, ())]
            return Antichain.meet_all([own(key, *start), *deps])

        for key in sorted(self.quiet_start, key=lambda k: (k[0], k[1].sort_key)):
            fr = frontiers(key)
            if fr is None:
                continue
            since = fr[0]
            low = lower(key)
            if not low <= since:
                self.violate(
                    "compaction_progresses",
                    f"the since of {key[0]} collection {key[1]} is {since} at the end; its read "
                    f"policy (as the client set it) and the holds on it allowed {low} already "
                    f"{'shortly before the end' if self.settled_at else 'when the faults stopped'}",
                )
            held = [dfr[0] for d in holders.get(key, ()) if (dfr := frontiers(d)) is not None]
            if held and not since <= Antichain.meet_all(held):
                self.violate(
                    "compaction_respects_holds",
                    f"the since of {key[0]} collection {key[1]} is {since}, beyond what the "
                    f"collections reading it hold ({Antichain.meet_all(held)})",
                )

    def _check_cleanup(self, env: Environment) -> None:
        ctl = env.driver.ctl
        # A subscribe lives as long as a client reads it: one that ended (its replica failed,
        # its client left) is dropped, so its holds go.
        reading = {str(s.stream_id) for s in self.world.clients.subs if s.stream_id is not None}
        for c in compute_collections(ctl):
            if c.id.is_transient and not c.dropped and str(c.id) not in reading:
                self.violate(
                    "drops_clean_up",
                    f"subscribe {c.id} has no client any more but still exists (since "
                    f"{c.read_frontier}, holding its inputs)",
                )
        # Every shard on disk belongs to a live catalog object or is finalized: a collection
        # dropped around a controller's death is cleaned up by the next one.
        live = {shard_name(e.id) for e in env.state.entries()}
        for key in self.world.disk.consensus.list_keys():
            if "/" in key or key in live:
                continue
            head = self.world.disk.consensus.head(key)
            if head is None:
                continue
            state = decoded_state(key, head.seqno, head.data)
            if not state.finalized:
                self.violate(
                    "drops_clean_up",
                    f"shard {key} belongs to no catalog object but was never finalized",
                )
        # A dropped cluster's instance goes, and with it every dataflow it ran (the ids its
        # client placed there are among the dropped ones judged below).
        gone = {str(d["cluster"]) for d in self.history.ops("drop_cluster") if d["status"] == "ok"}
        for name in sorted(gone & set(ctl.compute.instance_ids())):
            self.violate(
                "drops_clean_up",
                f"cluster {name} was dropped, but the compute controller still has its instance",
            )
        known = {c.id for c in compute_collections(ctl, include_dropped=True)}
        storage = {c.id: c for c in ctl.storage.collections()}
        self.truth.refresh()
        for gid in sorted(self.world.dropped_ids):
            if gid in known:
                self.violate(
                    "drops_clean_up",
                    f"dropped {gid} is still known to the compute controller at the end",
                )
            sc = storage.get(gid)
            if sc is not None and not sc.is_dropped:
                self.violate("drops_clean_up", f"dropped {gid} is still a storage collection")
            shard = self.truth.frontiers.get(str(gid))
            if shard is not None and (shard[0].elements or shard[1].elements):
                self.violate("drops_clean_up", f"the shard of dropped {gid} was never finalized")
            for name, replica in sorted(self.world.replicas.items()):
                if replica.state is None:
                    continue
                running = {g for key in replica.state.core.installed_dataflows() for g in key}
                if gid in running:
                    self.violate(
                        "drops_clean_up", f"replica {name} still runs dropped {gid} at the end"
                    )

    def _check_request_ids(self) -> None:
        """Appends that share a request id (an unknown outcome and its retries) are one append:
        it took effect at most once, at one time (the retry answers the original's)."""
        times: dict[str, set[int]] = {}
        for ev in self.history.ops("append"):
            rid = ev.get("request_id")
            if rid is not None and ev.get("time") is not None and appended(ev):
                times.setdefault(rid, set()).add(int(ev["time"]))
        for rid, at in sorted(times.items()):
            if len(at) > 1:
                self.violate(
                    "idempotent_appends",
                    f"the append with request id {rid!r} was applied {len(at)} times: at "
                    f"{sorted(at)}",
                )

    # -- appends whose outcome was unknown ----------------------------------------------------------
    def resolve_in_doubt(self) -> None:
        """Decide each ``info`` append from the disk: landed whole at one time, or not at all."""
        self.truth.refresh()
        leftover: dict[tuple[str, int], Counter[tuple[Row, int]]] = {}
        for tid in self.truth.tables():
            for b in self.truth.batches(tid):
                for row, t, d in b.updates:
                    leftover.setdefault((str(tid), t), Counter())[(row, d)] += 1
        for ev in self.history.ops("append"):
            if ev["status"] != "ok":
                continue
            for table, rows in ev["batches"]:
                bucket = leftover.get((table, int(ev["time"])), Counter())
                for r, d in rows:
                    bucket[(row_in(r), int(d))] -= 1
        infos = [ev for ev in self.history.ops("append") if ev["status"] == "info"]
        wants: list[dict[str, Counter[tuple[Row, int]]]] = []
        for ev in infos:
            wanted: dict[str, Counter[tuple[Row, int]]] = {}
            for table, rows in ev["batches"]:
                wanted.setdefault(table, Counter()).update((row_in(r), int(d)) for r, d in rows)
            wants.append(wanted)
        # Each table's part is one shard write: it lands whole or not at all, at the commit's
        # one timestamp. Parts of one call land together unless the controller died between
        # its shard writes (documented: multi-table appends are atomic except across a
        # controller crash). Which landed batch an append in doubt wrote is sought as a whole:
        # taking each append's first fit in turn could hand one append's rows to another with
        # the same rows (an earlier one, lost), and call the rest of the batch a phantom.
        chosen = _explain_in_doubt(leftover, wants, [bool(ev.get("acked")) for ev in infos])
        for ev, wanted, (at, landed) in zip(infos, wants, chosen, strict=True):
            if at is not None and not all(landed.values()):
                self.world.count("append_in_doubt_partly_landed")
            ev["landed_tables"] = landed
            ev["landed"] = any(landed.values())
            if ev.get("acked") and not all(landed.values()):
                self.violate(
                    "acknowledged_appends_durable",
                    f"append {ev['n']} ({ev.get('sql', '')[:80]}) was acknowledged, but its rows "
                    f"are not in the shards at any one time",
                )
            if not ev["landed"]:
                self.world.count("append_in_doubt_lost")
                continue
            assert at is not None
            ev["time"] = at
            self.world.count("append_in_doubt_landed")
            if ev.get("acked"):  # acknowledged, its time now known: judged as any append
                ev["status"] = "ok"
            for table, want in wanted.items():
                if landed[table]:
                    bucket = leftover[(table, at)]
                    for k, n in want.items():
                        bucket[k] -= n
        self._check_request_ids()
        for (table, t), bucket in sorted(leftover.items()):
            extra = +bucket
            if extra:
                self.violate(
                    "no_phantom_writes",
                    f"{sum(extra.values())} update(s) landed in {table} at {t} that no "
                    f"acknowledged or unacknowledged append wrote (e.g. "
                    f"{sorted(extra.items(), key=repr)[:3]}): an append reported failed landed",
                )
            if any(v < 0 for v in bucket.values()):
                self.violate(
                    "acknowledged_appends_durable",
                    f"acknowledged updates at {t} are missing from {table}'s shard",
                )


_EXPLAIN_BUDGET = 50_000
"""How many choices :func:`_explain_in_doubt` tries before it settles for first fits."""

_Choice = tuple[int | None, dict[str, bool]]


def _explain_in_doubt(
    leftover: Mapping[tuple[str, int], Counter[tuple[Row, int]]],
    wants: list[dict[str, Counter[tuple[Row, int]]]],
    acked: list[bool],
) -> list[_Choice]:
    """Where each append in doubt landed: a time and which of its tables' parts landed there
    (``None``: nowhere), so that together they explain every update in ``leftover`` (what
    the shards hold beyond the acknowledged appends), if any choice does.

    Each append's options, in order of preference: the earliest time every part fits, then
    the earliest time some part fits (a multi-table append torn by a crash), then nowhere; an
    acknowledged one (its time unknown) only its whole fits. The first choice that leaves no
    update unexplained is taken (a backtracking search within :data:`_EXPLAIN_BUDGET`); if
    none does, every append takes its first option in turn and what is left over is a phantom.
    ``leftover`` is not changed.
    """
    left = {k: Counter(v) for k, v in leftover.items()}
    last: dict[tuple[str, int], int] = {}  # the last append that could explain a bucket
    for i, wanted in enumerate(wants):
        for key in left:
            if key[0] in wanted:
                last[key] = i
    closes: dict[int, list[tuple[str, int]]] = {}
    for key, bucket in left.items():
        if +bucket:
            if key not in last:
                return _first_fits(left, wants, acked)  # nothing in doubt wrote it: a phantom
            closes.setdefault(last[key], []).append(key)

    def options(i: int) -> list[_Choice]:
        wanted = wants[i]

        def fits(table: str, t: int) -> bool:
            have = left.get((table, t), Counter())
            return all(have[k] >= n for k, n in wanted[table].items())

        times = sorted({t for (table, t), c in left.items() if table in wanted and +c})
        whole = [t for t in times if all(fits(table, t) for table in wanted)]
        out: list[_Choice] = [(t, dict.fromkeys(wanted, True)) for t in whole]
        if acked[i]:
            return out
        for t in times:
            if t not in whole and any(fits(table, t) for table in wanted):
                out.append((t, {table: fits(table, t) for table in wanted}))
        out.append((None, dict.fromkeys(wanted, False)))
        return out

    def take(i: int, choice: _Choice, sign: int) -> None:
        at, landed = choice
        for table, want in wants[i].items():
            if at is not None and landed[table]:
                bucket = left[(table, at)]
                for k, n in want.items():
                    bucket[k] -= sign * n

    chosen: list[_Choice] = []
    budget = [_EXPLAIN_BUDGET]

    def search(i: int) -> bool:
        if i == len(wants):
            return True
        for choice in options(i):
            budget[0] -= 1
            if budget[0] < 0:
                return False
            take(i, choice, 1)
            chosen.append(choice)
            if all(not +left[key] for key in closes.get(i, ())) and search(i + 1):
                return True
            chosen.pop()
            take(i, choice, -1)
        return False

    if search(0):
        return chosen
    return _first_fits({k: Counter(v) for k, v in leftover.items()}, wants, acked)


def _first_fits(
    left: dict[tuple[str, int], Counter[tuple[Row, int]]],
    wants: list[dict[str, Counter[tuple[Row, int]]]],
    acked: list[bool],
) -> list[_Choice]:
    """Each append in doubt in turn at its first fit (whole, else in part, else nowhere)."""
    out: list[_Choice] = []
    for wanted in wants:

        def fits(table: str, t: int, wanted: dict[str, Counter[tuple[Row, int]]] = wanted) -> bool:
            have = left.get((table, t), Counter())
            return all(have[k] >= n for k, n in wanted[table].items())

        times = sorted({t for (table, t), c in left.items() if table in wanted and +c})
        at = next((t for t in times if all(fits(table, t) for table in wanted)), None)
        if at is None:
            at = next((t for t in times if any(fits(table, t) for table in wanted)), None)
        landed = {table: at is not None and fits(table, at) for table in wanted}
        out.append((at, landed))
        if at is not None:
            for table, want in wanted.items():
                if landed[table]:
                    bucket = left[(table, at)]
                    for k, n in want.items():
                        bucket[k] -= n
    return out
