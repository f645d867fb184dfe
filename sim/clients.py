"""The clients of a simulation: a workload carried out through the public ``Environment`` API.

Clients act the way an application embedding tidegate acts: they create the
scenario's tables (and set their read policies), append rows (to one table,
or several batches to several tables at one timestamp), peek (at the freshest
time, at a valid time, below the since or beyond the upper -- the last two
must be refused with a typed error --, by index key, on one replica), cancel
pending peeks, create and drop the scenario's indexes and materialized views,
subscribe and unsubscribe, change read policies, and ask whether objects are
hydrated. With sources in the scenario they also create sources over the
simulated upstreams (``SimulatedSource``), read them (peeks, indexes,
materialized views, subscribes, joins with tables), create sinks of tables,
materialized views and sources into simulated targets (``SimulatedSink``),
and drop both; meanwhile the upstreams keep changing (``upstream`` actions,
performed by the world whether or not a controller is up). Each action runs
as its own task of the controller process, so
actions overlap in time as real clients' do; what each saw goes to the
:class:`~tidegate.sim.history.ClientHistory`.

The workload is a list of :class:`~tidegate.sim.faults.Action` s: drawn from
the seed's workload stream as the run goes (each draw may look at what the
clients know now), or replayed from a plan. Actions name tables and
dataflows by name and say *how* to choose a time (``fresh``, ``valid`` with a
pick, ``below`` the since, ``future``), not which: a plan from which the
shrinker removed earlier actions still means something. Times of actions are
drawn up front, so a replayed plan schedules its events exactly as the run
that recorded it did.

A controller crash kills the clients' tasks with it: their operations end as
``info`` (outcome unknown) in the history, and the clients learn from the
catalog, once a controller is back, which of their objects exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import trio

from tidegate.runtime.environment import Environment
from tidegate.runtime.errors import (
    AppendOutcomeUnknown,
    ClusterNotEmpty,
    DuplicateCatalogName,
    HasDependents,
    UnknownCatalogObject,
    WrongCluster,
)
from tidegate.spec.errors import ReadBeyondUpper, SinceViolation, TidegateError
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, plan_to_dict, replace_gets, typecheck
from tidegate.spec.protocol.types import ColumnOrder, RowSetFinishing
from tidegate.spec.storage.connections import SimulatedSink, SimulatedSource

from .choices import ChoiceSource, chance, pick
from .controller import ZOMBIE, ZOMBIE_DDL_FACTOR, ControllerProcess
from .copy_to import clear, copy_to_url
from .faults import Action
from .history import ClientHistory, finishing_to_json, row_out
from .process import ProcessKilled
from .scenario import DEFAULT_CLUSTER, DataflowSpec, Scenario, SinkSpec, SourceSpec, WorkloadMix
from .sql_clients import SQL_ACTIONS, SqlClients
from .world_port import WorldPort

__all__ = ["ACTION_KINDS", "DIED", "Clients", "ClientsWorld"]


class ClientsWorld(WorldPort, Protocol):
    """What the clients use of the world: its services, and the controller they act through."""

    @property
    def controller(self) -> ControllerProcess: ...

    def hydration_answered(
        self, env: Environment, ev: dict[str, Any], replicas: list[str] | None
    ) -> None:
        """A hydration question was answered (the checkers judge the answer at once)."""

    def storage_damaged(self) -> bool:
        """Whether the storage is damaged (rot, a lost record, a full disk) or was a moment ago."""
        ...

    def disk_was_full(self, since_ms: int) -> bool:
        """Whether the disk was full at some moment since ``since_ms``."""
        ...

    def peek_answered(self, ev: dict[str, Any]) -> None:
        """A peek meant for a cluster was answered (the checkers judge by whom, at once)."""


MAX_CLUSTER_REPLICAS = 4
"""How many replicas the clients let a cluster grow to."""


def created_cluster(n: int) -> str:
    """The name of the ``n``-th cluster the clients create while the run goes (its one replica
    is ``<name>.r1``)."""
    return f"c{n}"


FAULTED_CREATED_CLUSTERS = 3
"""Faults are drawn over the replicas of the first this many clusters the clients create too
(a fault on one that does not exist at that moment is skipped)."""
DIED = "the controller died"
"""Why an operation's outcome is unknown: its controller was killed before it answered."""
_WORDS = ("ann", "bob", "cy", "dee", "eve", "fay")
_REGIONS = ("north", "south", "east")
_DDL = ("create_dataflow", "drop_dataflow")
"""The client actions that change the catalog (weighted up for a zombie's clients)."""
TABLE_LAG_MS = 300
INDEX_LAG_MS = 200
GRANULARITY_MS = 1000
"""Read policies round sinces to ``min(lag, 1 s)``, as Materialize's do (the granularity of the
compaction window): a since then moves every ``lag`` ms, not at every commit."""
ACTION_KINDS = WorkloadMix.ACTIONS


@dataclass(eq=False)
class _Sub:
    """A live subscription of the clients."""

    n: int
    spec: DataflowSpec
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    upper: Antichain | None = None
    stream_id: GlobalId | None = None
    """The runtime's id of the subscribe, while its client reads it."""


class Clients:
    """The workload (see the module docstring)."""

    def __init__(
        self,
        world: ClientsWorld,
        scenario: Scenario,
        history: ClientHistory,
        source: ChoiceSource,
        times: ChoiceSource,
        actions: Sequence[Action] | None,
    ) -> None:
        self.world = world
        self.scenario = scenario
        self.history = history
        self.source = source
        self._times = times
        self._given = None if actions is None else list(actions)
        self.recorded: list[Action] = []
        """The actions performed so far (the plan's ``actions`` once the run ends)."""
        self.schemas: dict[str, Schema] = {t.id: t.schema for t in scenario.tables}
        self.schemas.update({src.id: src.schema for src in scenario.sources})
        self.specs: dict[str, DataflowSpec] = {d.name: d for d in scenario.dataflows}
        self.source_specs: dict[str, SourceSpec] = {src.id: src for src in scenario.sources}
        self.sink_specs: dict[str, SinkSpec] = {k.name: k for k in scenario.sinks}
        self.table_ids: dict[str, GlobalId] = {}
        """Each scenario table's id in the catalog (known once created)."""
        self.source_ids: dict[str, GlobalId] = {}
        """The scenario's sources that exist, by their scenario id (``"u9"``)."""
        self.sinks: dict[str, GlobalId] = {}
        """The scenario's sinks that exist, by name."""
        self.objects: dict[str, GlobalId] = {}
        """The scenario dataflows (indexes, materialized views) that exist, by name."""
        self.present: dict[str, list[Row]] = {t.id: [] for t in scenario.tables}
        """Rows the clients appended and may retract, per table."""
        self.peeks: list[tuple[dict[str, Any], trio.CancelScope]] = []
        self.subs: list[_Sub] = []
        self.ready = False
        """The scenario's tables exist (set up by the first controller that came up)."""
        self.setting_up = False
        self.peek_count = 0
        self.append_count = 0
        self.unsettled: dict[str, list[tuple[str, list[tuple[Row, int]]]]] = {}
        """Appends with a request id whose outcome is unknown, by id: retried, with the same
        id, before the next append (an idempotent retry is never applied twice)."""
        self.untyped: list[str] = []
        self.sql_marker = 0
        """A counter for the SQL clients' unique names and row markers (drawn into actions)."""
        self.sql = SqlClients(self)
        """The clients that act in SQL (:mod:`.sql_clients`)."""
        self.cluster_replicas = 0
        """A counter for the names of the replicas the clients add (drawn into actions)."""
        self.clusters: set[str] = set()
        """The clusters the clients created while the run goes (besides the scenario's), that
        exist as far as they know."""
        self.created_clusters = 0
        """A counter for the names of the clusters the clients create (``c1``, ``c2``, ...)."""
        self.managed: set[str] = set()
        """The managed clusters (a size, a replication factor) the clients created."""
        self.placed: set[str] = set()
        """The dataflows the clients placed on clusters they created (:meth:`_do_cluster_dataflow`):
        their names, each a scenario dataflow's ``<name>_<cluster>``."""
        self._replicas_in_doubt: set[str] = set()
        """Replica processes whose adding or dropping had an unknown outcome (the controller
        died): the next controller's catalog decides whether they run."""

    # -- schedule -----------------------------------------------------------------------------
    def schedule(self, start_ms: int, end_ms: int) -> None:
        """Put the action events on the kernel: the plan's, or the drawn times (see the module doc)."""
        kernel = self.world.kernel
        if self._given is not None:
            for action in self._given:
                if action.at_ms < end_ms:
                    kernel.call_at(action.at_ms, self._replay, action)
            return
        low, high = self.scenario.workload.ms_between_actions
        at = start_ms + self._times.integer(low, high)
        while at < end_ms:
            kernel.call_at(at, self._draw)
            at += self._times.integer(low, high)
        upstream = self.world.streams.upstream
        if upstream is not None:
            low, high = self.scenario.upstream_ms
            for name in sorted({src.upstream for src in self.scenario.sources}):
                at = start_ms + upstream.integer(low, high)
                while at < end_ms:
                    kernel.call_at(at, self._draw_upstream, name)
                    at += upstream.integer(low, high)

    def _replay(self, action: Action) -> None:
        if action.kind == "upstream":
            self._upstream(action)
        elif self._can_act():
            self._perform(action)

    def _draw(self) -> None:
        if not self._can_act():
            self.world.count("client_waits_for_controller")
            return
        zombie = self.world.controller.to_zombie()  # a client of a zombie controller, sometimes
        weights = self.scenario.workload.weights()
        if zombie:  # what a deposed controller can still get wrong, more often: its DDL
            weights = [(k, w * ZOMBIE_DDL_FACTOR if k in _DDL else w) for k, w in weights]
        total = sum(w for _, w in weights)
        if total <= 0:
            return
        roll = self.source.integer(0, total - 1)
        chosen = weights[-1][0]
        for kind, w in weights:
            if roll < w:
                chosen = kind
                break
            roll -= w
        if chosen in SQL_ACTIONS:
            args = self.sql.draw(chosen)
        else:
            args = getattr(self, f"_draw_{chosen}")()
        if args is None:
            self.world.count(f"action_not_applicable:{chosen}")
            return
        if zombie:
            args = {**args, "via": ZOMBIE}
        self._perform(Action(self.world.kernel.now_ms, chosen, args))

    def _can_act(self) -> bool:
        return self.ready and self.world.controller.env is not None and not self.world.quiet

    def _perform(self, action: Action) -> None:
        self.recorded.append(action)
        self.world.record("action", kind=action.kind)
        self.world.controller.spawn(self._run, action, via=action.args.get("via"))

    # -- the upstreams (not a client's: the world changes them, controller or not) -------------
    def _draw_upstream(self, name: str) -> None:
        """A transaction of upstream ``name``: 1-3 inserts or deletes, some offsets on."""
        source = self.world.streams.upstream
        upstreams = self.world.upstreams
        assert source is not None and upstreams is not None
        log = upstreams.logs[name]
        present = list(log.present)
        changes: list[list[Any]] = []
        for _ in range(source.integer(1, 3)):
            if present and chance(source, 300):
                row = present.pop(source.integer(0, len(present) - 1))
                changes.append([row_out(row), -1])
            else:
                changes.append([row_out(self._row(log.schema, source)), 1])
        args = {"upstream": name, "changes": changes, "gap": source.integer(0, 2)}
        self._upstream(Action(self.world.kernel.now_ms, "upstream", args))

    def _upstream(self, action: Action) -> None:
        upstreams = self.world.upstreams
        name = str(action.args["upstream"])
        if upstreams is None or name not in upstreams.logs:
            return
        self.recorded.append(action)
        changes = [(tuple(r), int(d)) for r, d in action.args["changes"]]
        offset = upstreams.logs[name].write(changes, int(action.args["gap"]), action.at_ms)
        self.world.record("upstream", upstream=name, offset=offset, changes=len(changes))

    # -- setup --------------------------------------------------------------------------------
    async def come_up(self, env: Environment, generation: int) -> None:
        """A controller is up: learn what exists (after a restart) or create the scenario's tables."""
        now = self.world.kernel.now_ms
        if generation > 1:
            self.history.note("restart", now, generation=generation)
        state = env.state
        for t in self.scenario.tables:
            with contextlib.suppress(UnknownCatalogObject):
                self.table_ids[t.id] = env.resolve(t.id)
        for src in self.scenario.sources:
            try:
                gid = env.resolve(src.name)
            except UnknownCatalogObject:
                self.source_ids.pop(src.id, None)
                continue
            if self.source_ids.get(src.id) != gid:
                self.source_ids[src.id] = gid
                self._note_source(src, gid)
        for name in sorted(self.specs):
            spec = self.specs[name]
            if spec.kind == "subscribe":
                continue
            try:
                gid = env.resolve(name)
            except UnknownCatalogObject:
                self.objects.pop(name, None)
                continue
            if self.objects.get(name) != gid:
                self.objects[name] = gid
                self._note_install(gid, name, spec)
        for sink in self.scenario.sinks:
            try:
                self.sinks[sink.name] = env.resolve(sink.name)
            except UnknownCatalogObject:
                self.sinks.pop(sink.name, None)
        self._reconcile_cluster_replicas(env)
        del state
        self.sql.come_up(env)
        if not self.ready and not self.setting_up:
            self.setting_up = True
            try:
                await self._setup(env)
            finally:
                self.setting_up = False

    async def _setup(self, env: Environment) -> None:
        """Create the scenario's tables, their read policies and its first dataflows."""
        for t in self.scenario.tables:
            if t.id not in self.table_ids:
                ev = self.history.invoke(
                    "create", self.world.kernel.now_ms, name=t.id, kind="table"
                )
                try:
                    gid = await env.create_table(t.id, t.schema)
                except DuplicateCatalogName:  # created by a call whose answer was lost
                    gid = env.resolve(t.id)
                except (trio.Cancelled, ProcessKilled):
                    self._died(ev)  # the controller died mid-call: created or not, unknown
                    raise
                except TidegateError as e:
                    self.history.fail(ev, self.world.kernel.now_ms, e)
                    raise
                self.table_ids[t.id] = gid
                self.history.ok(ev, self.world.kernel.now_ms, id=str(gid))
            self.history.note(
                "table", self.world.kernel.now_ms, name=t.id, id=str(self.table_ids[t.id])
            )
        for t in self.scenario.tables:
            await self._set_policy(env, self.table_ids[t.id], TABLE_LAG_MS, strict=True)
        await self._create_clusters(env)
        self.ready = True
        for src in self.scenario.sources:
            await self._create_source(env, src.id)
        for spec in self.scenario.dataflows:
            if spec.kind != "subscribe" and spec.name not in self.objects:
                await self._create(env, spec.name)
        for sink in self.scenario.sinks:
            await self._create_sink(env, sink.name)

    async def _create_clusters(self, env: Environment) -> None:
        """Create the scenario's clusters other than ``default`` (unless an earlier incarnation
        did), each with the replica processes the world started for it."""
        exists = {c.name for c in env.clusters()}
        for c in self.scenario.clusters:
            if c.name in exists:
                continue
            replicas = {
                process.removeprefix(f"{c.name}."): process
                for process, cluster in sorted(self.world.cluster_of.items())
                if cluster == c.name and process in self.world.replicas
            }
            await env.create_cluster(c.name, replicas=replicas)
            self.world.record("cluster_created", cluster=c.name, replicas=sorted(replicas))
            self.world.count("scenario_cluster_created")

    def _reconcile_cluster_replicas(self, env: Environment) -> None:
        """A replica (or a cluster) added or dropped by a call whose answer was lost (the
        controller died): the new controller's catalog says whether it is there; a process it
        does not know stops."""
        known = {c.name: {r.name for r in c.replicas} for c in env.clusters()}
        declared = {DEFAULT_CLUSTER, *(c.name for c in self.scenario.clusters)}
        self.clusters = set(known) - declared
        for process, cluster in sorted(self.world.cluster_of.items()):
            if cluster not in declared and cluster not in known and process in self.world.replicas:
                self.world.record("cluster_replica_gone", replica=process)
                self.world.stop_cluster_replica(process)
        for process in sorted(self._replicas_in_doubt):
            cluster = self.world.cluster_of[process]
            if cluster not in known:
                continue
            self._replicas_in_doubt.discard(process)
            if process.removeprefix(f"{cluster}.") not in known[cluster]:
                self.world.record("cluster_replica_gone", replica=process)
                self.world.stop_cluster_replica(process)

    def _cluster_processes(self, cluster: str) -> list[str]:
        """The replica processes the world runs for ``cluster`` (its own record), sorted."""
        return sorted(
            p for p in self.world.replica_names() if self.world.cluster_of.get(p) == cluster
        )

    def _cluster_of(self, target: str) -> str:
        """The cluster a read of ``target`` goes to when the client names none: its index's or
        materialized view's, as the client created it, else ``default``."""
        spec = self.specs.get(target)
        return DEFAULT_CLUSTER if spec is None else spec.cluster

    def _pick_replica(self, cluster: str) -> str | None:
        """A replica of ``cluster``, by its name there, or ``None`` if it has none."""
        processes = self._cluster_processes(cluster)
        if not processes:
            return None
        return pick(self.source, processes).removeprefix(f"{cluster}.")

    # -- running an action --------------------------------------------------------------------
    async def _run(self, action: Action) -> None:
        env = self.world.controller.env
        if env is None:
            return
        if action.kind in SQL_ACTIONS:
            await self.sql.run(env, action.kind, action.args)
            return
        await getattr(self, f"_do_{action.kind}")(env, action.args)

    def _died(self, ev: dict[str, Any]) -> None:
        """Op ``ev`` was cut short: by the controller's death, its outcome is unknown.

        A client's own cancellation is settled by the caller.
        """
        if ev["status"] == "pending" and self.world.controller.dying:
            self.history.info(ev, self.world.kernel.now_ms, DIED)

    async def _call(
        self, ev: dict[str, Any], call: Callable[[], Any], **on_ok: Any
    ) -> tuple[bool, Any]:
        """Await ``call()`` for op ``ev``; record its outcome. ``(True, value)`` on success."""
        h = self.history

        def now() -> int:
            return self.world.kernel.now_ms

        try:
            value = await call()
            await self.world.controller.gate_here()  # a stopped controller answers nobody
        except (trio.Cancelled, ProcessKilled):
            self._died(ev)
            raise
        except AppendOutcomeUnknown as e:  # a typed "maybe": decided from the disk at the end
            h.info(ev, now(), str(e))
            self.world.count("append_outcome_unknown")
            return False, e
        except TidegateError as e:
            h.fail(ev, now(), e)
            return False, e
        except Exception as e:  # an untyped error escaped the API: a finding
            h.fail(ev, now(), e)
            self.untyped.append(f"{ev['op']} {ev['n']}: {type(e).__name__}: {e}")
            self.world.violate(
                "typed_errors", f"{ev['op']} raised an untyped {type(e).__name__}: {e}"
            )
            return False, e
        h.ok(ev, now(), **on_ok)
        self.world.controller.answered(ev)
        return True, value

    # appends
    def _draw_append(self) -> dict[str, Any] | None:
        table = pick(self.source, [t.id for t in self.scenario.tables])
        return {"batches": [[table, self._draw_rows(table)]]}

    def _draw_append_many(self) -> dict[str, Any] | None:
        names = [t.id for t in self.scenario.tables]
        batches = []
        for _ in range(self.source.integer(2, 4)):
            table = pick(self.source, names)
            batches.append([table, self._draw_rows(table)])
        return {"batches": batches}

    def _draw_rows(self, table: str) -> list[list[Any]]:
        low, high = self.scenario.workload.rows_per_append
        rows: list[list[Any]] = []
        present = self.present[table]
        for _ in range(self.source.integer(low, high)):
            if present and chance(self.source, 250):
                row = present.pop(self.source.integer(0, len(present) - 1))
                rows.append([row_out(row), -1])
            else:
                rows.append([row_out(self._row(self.schemas[table])), 1])
        return rows

    def _row(self, schema: Schema, source: ChoiceSource | None = None) -> Row:
        choices = self.source if source is None else source
        out: list[object] = []
        nulls = self.scenario.workload.null_per_mille
        for i, c in enumerate(schema.columns):
            if c.type.nullable and chance(choices, nulls):
                out.append(None)
            elif c.type.scalar.value == "string":
                out.append(pick(choices, _REGIONS if i and c.name == "region" else _WORDS))
            else:
                out.append(choices.integer(0, 9))
        return tuple(out)

    async def _do_append(self, env: Environment, args: Mapping[str, Any]) -> None:
        for unknown, earlier in list(self.unsettled.items()):  # settle unknown outcomes first
            await self._append(env, earlier, unknown, retry=True)
        batches = [(str(t), [(tuple(r), int(d)) for r, d in rows]) for t, rows in args["batches"]]
        known = [(t, rows) for t, rows in batches if t in self.table_ids]
        if not known:
            return
        # Every other one-table append carries a request id (no draw: plans replay as before).
        rid = f"a{self.append_count}" if len(known) == 1 and self.append_count % 2 == 0 else None
        await self._append(env, known, rid)

    async def _append(
        self,
        env: Environment,
        known: list[tuple[str, list[tuple[Row, int]]]],
        rid: str | None,
        retry: bool = False,
    ) -> None:
        """One append (or, ``retry``, an unknown one again, with its request id ``rid``)."""
        fields: dict[str, Any] = {} if rid is None else {"request_id": rid, "retry": retry}
        ev = self.history.invoke(
            "append",
            self.world.kernel.now_ms,
            batches=[
                [str(self.table_ids[t]), [[row_out(r), d] for r, d in rows]] for t, rows in known
            ],
            **fields,
        )
        if not retry:
            self.append_count += 1
        if rid is None:
            ok, ts = await self._call(ev, lambda: env.append_many(known))
        else:
            if retry:
                self.world.count("append_retried_with_request_id")
            try:
                ok, ts = await self._call(ev, lambda: env.append_many(known, request_id=rid))
            finally:  # the controller may have died in the call: then its outcome is unknown
                if ev["status"] == "info":
                    self.unsettled[rid] = known
                else:
                    self.unsettled.pop(rid, None)
        if ok:
            ev["time"] = ts
            for t, rows in known:
                self.present[t].extend(r for r, d in rows if d > 0)
        elif ev["status"] == "fail":
            for t, rows in known:  # nothing happened: the retracted rows are still there
                self.present[t].extend(r for r, d in rows if d < 0)

    _do_append_many = _do_append

    def _draw_append_peek(self) -> dict[str, Any] | None:
        """Read your own write: append to a table, then at once read something that reads it."""
        args = self._draw_append()
        assert args is not None
        table = args["batches"][0][0]
        readers = [table] + [
            n
            for n in sorted(self.objects)
            if GlobalId.parse(table) in set(gets(self.specs[n].plan))
        ]
        args["target"] = pick(self.source, readers)
        args["finishing"] = finishing_to_json(RowSetFinishing())
        return args

    async def _do_append_peek(self, env: Environment, args: Mapping[str, Any]) -> None:
        await self._do_append(env, args)
        await self._do_peek(
            env, {"target": args["target"], "at": {"mode": "fresh"}, "finishing": args["finishing"]}
        )

    # peeks
    def _readable(self) -> list[str]:
        return [t.id for t in self.scenario.tables] + sorted(self.source_ids) + sorted(self.objects)

    def _finishing(self, target: str) -> dict[str, Any]:
        if chance(self.source, 700):
            return finishing_to_json(RowSetFinishing())
        arity = self._schema(target).arity
        order = tuple(ColumnOrder(c, desc=chance(self.source, 500)) for c in range(arity))
        return finishing_to_json(RowSetFinishing(order_by=order, limit=self.source.integer(1, 3)))

    def _schema(self, target: str) -> Schema:
        if target in self.schemas:
            return self.schemas[target]
        return typecheck(self.specs[target].plan)

    def _draw_peek(self, mode: str = "fresh") -> dict[str, Any] | None:
        target = pick(self.source, self._readable())
        args: dict[str, Any] = {
            "target": target,
            "at": {"mode": mode, "k": self.source.integer(0, 999)},
            "finishing": self._finishing(target),
        }
        if chance(self.source, 150):
            replica = self._pick_replica(self._cluster_of(target))
            if replica is not None:
                args["replica"] = replica
        return args

    def _draw_peek_cluster(self) -> dict[str, Any] | None:
        """A peek in a cluster the client names (``SET cluster``): any of the scenario's, so an
        index is sometimes asked for on a cluster that does not maintain it (refused)."""
        target = pick(self.source, self._readable())
        clusters = [DEFAULT_CLUSTER, *(c.name for c in self.scenario.clusters)]
        clusters += sorted(self.clusters)
        return {
            "target": target,
            "at": {"mode": pick(self.source, ("fresh", "valid")), "k": self.source.integer(0, 999)},
            "finishing": self._finishing(target),
            "cluster": pick(self.source, clusters),
        }

    def _draw_peek_at(self) -> dict[str, Any] | None:
        return self._draw_peek("valid")

    def _draw_peek_invalid(self) -> dict[str, Any] | None:
        return self._draw_peek("below")

    def _draw_peek_future(self) -> dict[str, Any] | None:
        return self._draw_peek("future")

    def _draw_peek_key(self) -> dict[str, Any] | None:
        keyed = [
            n for n in sorted(self.objects) if self.specs[n].kind == "index" and self.specs[n].key
        ]
        if not keyed:
            return None
        target = pick(self.source, keyed)
        schema = self._schema(target)
        key = [row_out(self._row(schema))[c] for c in self.specs[target].key]
        return {
            "target": target,
            "at": {"mode": "fresh", "k": 0},
            "finishing": finishing_to_json(RowSetFinishing()),
            "key": key,
        }

    def _ref(self, target: str) -> GlobalId | None:
        if target in self.table_ids:
            return self.table_ids[target]
        if target in self.source_ids:
            return self.source_ids[target]
        return self.objects.get(target)

    def _input_upper(self, env: Environment, target: str) -> Antichain:
        """The upper of the tables and sources ``target`` reads, as clients see it (public
        frontiers)."""
        if target in self.table_ids:
            return env.frontiers(self.table_ids[target])[1]
        if target in self.source_ids:
            return env.frontiers(self.source_ids[target])[1]
        reads = set(gets(self.specs[target].plan))
        uppers = [
            env.frontiers(self.table_ids[t.id])[1]
            for t in self.scenario.tables
            if GlobalId.parse(t.id) in reads and t.id in self.table_ids
        ]
        uppers += [
            env.frontiers(gid)[1]
            for sid, gid in sorted(self.source_ids.items())
            if GlobalId.parse(sid) in reads
        ]
        return Antichain.meet_all(uppers) if uppers else Antichain.empty()

    def _time(self, env: Environment, target: str, at: Mapping[str, Any]) -> int | str | None:
        """The explicit time a peek asks for (``None``: fresh; ``"skip"``: none exists)."""
        mode, k = at["mode"], int(at.get("k", 0))
        if mode == "fresh":
            return None
        gid = self._ref(target)
        assert gid is not None
        since = env.frontiers(gid)[0]
        upper = self._input_upper(env, target)
        if not since.elements:
            return "skip"
        lo = int(since.elements[0])
        if not upper.elements:  # complete (no inputs): readable at every time from its since on
            if mode == "future":
                return "skip"
            upper = Antichain([lo + 1000])
        hi = int(upper.elements[0])
        if mode == "below":  # (a since past the upper, as over a ceased source: no such time)
            return lo - 1 if 0 < lo <= hi else "skip"
        if mode == "future":
            return hi + k % 200
        if hi <= lo:
            return "skip"
        return lo + k % (hi - lo)

    async def _do_peek(
        self,
        env: Environment,
        args: Mapping[str, Any],
        issued: Callable[[tuple[dict[str, Any], trio.CancelScope]], None] | None = None,
    ) -> None:
        target = str(args["target"])
        gid = self._ref(target)
        if gid is None:
            return  # dropped meanwhile (or never created in this run)
        try:
            t = self._time(env, target, args["at"])
        except TidegateError:
            return
        if t == "skip":
            return
        assert t is None or isinstance(t, int)
        mode = args["at"]["mode"]
        key = args.get("key")
        spec = self.specs.get(target)
        fields: dict[str, Any] = {
            "target": str(gid),
            "name": target,
            "at": t,
            "finishing": dict(args["finishing"]),
            "expect": "refusal" if mode in ("below", "future") else "answer",
        }
        if key is not None and spec is not None:
            fields["key"] = list(key)
            fields["key_columns"] = list(spec.key)
        if args.get("replica"):
            fields["replica"] = args["replica"]
        asked = args.get("cluster")
        crossing = False
        if self.scenario.clusters:  # (histories of scenarios without clusters stay as they were)
            own = self._cluster_of(target)
            crossing = (
                asked is not None and spec is not None and spec.kind == "index" and asked != own
            )
            fields["cluster"] = own if asked is None or crossing else asked
            if crossing:  # an index is readable only on its own cluster
                fields["expect"] = "refusal"
                fields["crossing"] = asked
        ev = self.history.invoke("peek", self.world.kernel.now_ms, **fields)
        ev["controller"] = self.world.controller.generation_here()  # whose holds it takes
        self.peek_count += 1
        uuid = f"peek-{ev['n']}"
        if t is not None:
            self.world.record("peek", id=str(gid), uuid=uuid, time=t)
        from .history import finishing_from_json

        fin = finishing_from_json(args["finishing"])
        scope = trio.CancelScope()
        entry = (ev, scope)
        self.peeks.append(entry)
        if issued is not None:
            issued(entry)
        try:
            with scope:
                ok, value = await self._call(
                    ev,
                    lambda: env.peek(
                        gid,
                        t,
                        None if key is None else tuple(key),
                        fin,
                        replica=args.get("replica"),
                        cluster=asked,
                    ),
                )
                if ok:
                    ev["rows"] = [[row_out(r), n] for r, n in value]
                    if "cluster" in ev and not crossing:
                        self.world.peek_answered(ev)
            if scope.cancelled_caught and ev["status"] == "pending":
                self.history.fail(ev, self.world.kernel.now_ms, "cancelled by the client")
        finally:
            self.peeks.remove(entry)
            if t is not None and ev["status"] != "pending":
                result = {"ok": "PeekRows", "fail": "PeekError"}.get(ev["status"], "PeekCanceled")
                if str(ev.get("error", "")).startswith("cancelled"):
                    result = "PeekCanceled"
                self.world.record("peek_result", uuid=uuid, result=result)
        if "cluster" in ev:
            self._judge_cluster_refusal(ev, crossing)
        self._judge_refusal(ev, mode)

    _do_peek_at = _do_peek
    _do_peek_cluster = _do_peek

    def _judge_cluster_refusal(self, ev: Mapping[str, Any], crossing: bool) -> None:
        """An index read on a cluster other than its own is refused (:class:`WrongCluster`), as
        Materialize refuses it; every other read (its own cluster's index, a table or a
        materialized view on any cluster) is not refused so."""
        error = str(ev.get("error", ""))
        if crossing:
            if ev["status"] == "ok":
                self.world.violate(
                    "cluster_reads_refused",
                    f"peek {ev['n']} of index {ev['name']} (on cluster {ev['cluster']}) in "
                    f"cluster {ev['crossing']} was answered",
                )
            accepted = (WrongCluster.__name__, "UnknownCatalogObject", "cancelled")
            if ev["status"] == "fail" and not error.startswith(accepted):
                self.world.violate(
                    "cluster_reads_refused",
                    f"peek {ev['n']} of index {ev['name']} (on cluster {ev['cluster']}) in "
                    f"cluster {ev['crossing']} failed with {error}, not WrongCluster",
                )
            self.world.count("peek_refused_wrong_cluster" if ev["status"] == "fail" else "peek_x")
        elif ev["status"] == "fail" and error.startswith(WrongCluster.__name__):
            self.world.violate(
                "cluster_reads_answered",
                f"peek {ev['n']} of {ev['name']} on cluster {ev['cluster']} was refused: {error}",
            )

    _do_peek_key = _do_peek
    _do_peek_invalid = _do_peek
    _do_peek_future = _do_peek

    def _judge_refusal(self, ev: Mapping[str, Any], mode: str) -> None:
        error = str(ev.get("error", ""))
        asked = ev.get("crossing") or ev.get("cluster")
        if ev["status"] == "fail" and any(
            d["cluster"] == asked for d in self.history.ops("drop_cluster")
        ):
            self.world.count("peek_ended_by_cluster_drop")  # its cluster went (or may have)
            return
        if mode in ("below", "future"):
            want = SinceViolation if mode == "below" else ReadBeyondUpper
            if ev["status"] == "ok":
                self.world.violate(
                    "reads_outside_bounds_refused",
                    f"{ev['op']} {ev['n']} of {ev['name']} at {ev['at']} ({mode} its bounds) was "
                    "answered",
                )
            accepted: tuple[str, ...] = (
                want.__name__,
                "UnknownCatalogObject",
                "CollectionMissing",
                "cancelled",
            )
            if ev.get("replica"):  # a targeted replica is checked first; it may have been replaced
                accepted += ("ReplicaMissing",)
            if ev["status"] == "fail" and not error.startswith(accepted):
                self.world.violate(
                    "reads_outside_bounds_refused",
                    f"{ev['op']} {ev['n']} of {ev['name']} at {ev['at']} ({mode}) failed with "
                    f"{error}, not {want.__name__}",
                )
            self.world.count(f"peek_refused_{mode}" if ev["status"] == "fail" else "peek_answered")
        elif ev["status"] == "fail" and error.startswith(("SinceViolation", "ReadBeyondUpper")):
            self.world.violate(
                "valid_reads_answered",
                f"{ev['op']} {ev['n']} of {ev['name']} at {ev['at']} within its bounds was "
                f"refused: {error}",
            )
        gone = error.startswith(("CollectionMissing", "UnknownCatalogObject"))
        ended = error.startswith("DependencyDropped") or (
            error.startswith("CopyToFailed") and "was dropped while the copy-to ran" in error
        )
        if ended or (gone and mode not in ("below", "future")):
            # A read of an object that exists is answered: only a drop ends it (or makes it
            # unknown). A drop in doubt or a cascade may have taken it too.
            self.world.count("peek_ended_by_drop")
            if not any(
                d["id"] == ev["target"]
                or ev["target"] in d.get("gone", ())
                or (d.get("cascade") and d["status"] != "ok")
                for d in self._drops()
            ):
                self.world.violate(
                    "valid_reads_answered",
                    f"{ev['op']} {ev['n']} of {ev['name']} failed with {error}, "
                    f"but no client dropped {ev['target']}",
                )

    def _drops(self) -> list[dict[str, Any]]:
        """The drops so far: of objects, and of clusters (whose ``gone`` lists what went)."""
        return [*self.history.ops("drop"), *self.history.ops("drop_cluster")]

    def _draw_cancel_peek(self) -> dict[str, Any] | None:
        """A peek that its client gives up on after ``after_ms`` (answered by then or not)."""
        args = self._draw_peek(pick(self.source, ("fresh", "valid")))
        assert args is not None
        args["after_ms"] = self.source.integer(0, 12)
        return args

    async def _do_cancel_peek(self, env: Environment, args: Mapping[str, Any]) -> None:
        mine: list[tuple[dict[str, Any], trio.CancelScope]] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._do_peek, env, args, mine.append)
            await trio.sleep(int(args["after_ms"]) / 1000)
            for ev, scope in mine:
                if ev["status"] == "pending":
                    self.world.count("peek_cancelled_while_pending")
                    self.world.record("cancel_peek", n=ev["n"])
                    scope.cancel()

    # dataflows
    def _ids(self) -> dict[GlobalId, GlobalId]:
        """The scenario's ids of tables and existing sources -> their catalog ids."""
        ids = {GlobalId.parse(t): gid for t, gid in self.table_ids.items()}
        ids.update({GlobalId.parse(s): gid for s, gid in self.source_ids.items()})
        return ids

    def _plan(self, spec: DataflowSpec) -> Plan:
        return replace_gets(spec.plan, self._ids())

    def _inputs_exist(self, spec: DataflowSpec) -> bool:
        """Whether every source ``spec`` reads exists (tables always do, once set up)."""
        return all(
            str(g) in self.source_ids for g in gets(spec.plan) if str(g) in self.source_specs
        )

    def _source_inputs(self, spec: DataflowSpec) -> dict[str, str]:
        """The sources ``spec`` reads: scenario id -> catalog id (for the history)."""
        reads = {str(g) for g in gets(spec.plan)}
        return {s: str(g) for s, g in sorted(self.source_ids.items()) if s in reads}

    def _note_install(self, gid: GlobalId, name: str, spec: DataflowSpec) -> None:
        inputs = self._source_inputs(spec)
        extra: dict[str, Any] = {"inputs": inputs} if inputs else {}
        if name in self.placed:  # not the scenario's: the checkers learn its plan and cluster here
            extra.update(plan=plan_to_dict(self._plan(spec)), cluster=spec.cluster)
        self.history.note(
            "install", self.world.kernel.now_ms, id=str(gid), name=name, kind=spec.kind, **extra
        )

    def _draw_create_dataflow(self) -> dict[str, Any] | None:
        names = [
            d.name
            for d in self.scenario.dataflows
            if d.kind != "subscribe" and d.name not in self.objects and self._inputs_exist(d)
        ]
        return {"dataflow": pick(self.source, names)} if names else None

    async def _do_create_dataflow(self, env: Environment, args: Mapping[str, Any]) -> None:
        await self._create(env, str(args["dataflow"]))

    async def _create(self, env: Environment, name: str) -> None:
        spec = self.specs.get(name)
        if spec is None or name in self.objects or spec.kind == "subscribe":
            return
        if not self._inputs_exist(spec):
            return
        ev = self.history.invoke("create", self.world.kernel.now_ms, name=name, kind=spec.kind)
        plan = self._plan(spec)

        def call() -> Any:
            if spec.kind == "index":
                return env.create_index(plan, spec.key, name=name, cluster=spec.cluster)
            return env.create_materialized_view(name, plan, cluster=spec.cluster)

        ok, gid = await self._call(ev, call)
        if (
            not ok
            and ev["status"] == "fail"
            and not str(ev["error"]).startswith(DuplicateCatalogName.__name__)
        ):
            self._check_no_effect(env, ev, name)
        if ok:
            ev["id"] = str(gid)
            self.objects[name] = gid
            self._note_install(gid, name, spec)
            self.world.count(f"create_{spec.kind}")
            # Hydrated already? Asked at once, before any replica can have computed it.
            await self._do_hydration(env, {"target": name})
            if spec.kind == "index":
                await self._set_policy(env, gid, INDEX_LAG_MS, strict=True)

    def _check_no_effect(self, env: Environment, ev: Mapping[str, Any], name: str) -> None:
        """A refused create left nothing behind. A deposed controller's fencing refusal is judged
        by its catalog write having failed (its own view of the catalog is stale: the name may
        have been created or dropped by the newer controller's clients since)."""
        if self.world.controller.zombie_here() and str(ev["error"]).startswith("EnvironmentFenced"):
            return
        try:
            gid = env.resolve(name)
        except UnknownCatalogObject:
            return
        self.world.violate(
            "refusals_have_no_effect",
            f"create {ev['n']} of {name} failed ({ev['error']}), yet {name} exists as {gid}",
        )

    def _draw_drop_dataflow(self) -> dict[str, Any] | None:
        names = sorted(self.objects)
        return {"dataflow": pick(self.source, names)} if names else None

    async def _do_drop_dataflow(self, env: Environment, args: Mapping[str, Any]) -> None:
        name = str(args["dataflow"])
        gid = self.objects.get(name)
        if gid is None:
            return
        await self._drop(env, gid, name, "drop_dataflow")

    async def _drop(
        self, env: Environment, gid: GlobalId, name: str, what: str, cascade: bool = False
    ) -> None:
        """Drop ``gid`` (with ``cascade``, its dependents too) and forget what went."""
        extra: dict[str, Any] = {"cascade": True} if cascade else {}
        ev = self.history.invoke("drop", self.world.kernel.now_ms, id=str(gid), name=name, **extra)

        def call() -> Any:
            return env.drop(gid, cascade=True) if cascade else env.drop(gid)

        ok, gone = await self._call(ev, call)
        if not ok and ev["status"] == "fail":
            try:
                env.resolve(gid)
            except UnknownCatalogObject:
                if not str(ev["error"]).startswith(UnknownCatalogObject.__name__):
                    self.world.violate(
                        "refusals_have_no_effect",
                        f"drop {ev['n']} of {name} failed ({ev['error']}), yet {gid} is gone",
                    )
            if str(ev["error"]).startswith(HasDependents.__name__):
                self.world.count(f"{what}_has_dependents")
        if ok:
            went = set(gone) | {gid}
            if len(went) > 1:
                ev["gone"] = sorted(str(g) for g in went)
            for table in (self.objects, self.source_ids, self.sinks):
                for key in [k for k, v in table.items() if v in went]:
                    del table[key]
            self.world.count(what)
            for g in sorted(went):
                self.world.dropped(g)

    def _draw_set_read_policy(self) -> dict[str, Any] | None:
        targets = [t.id for t in self.scenario.tables] + sorted(self.source_ids)
        targets += sorted(n for n in self.objects if self.specs[n].kind == "index")
        return {"target": pick(self.source, targets), "lag": self.source.integer(0, 600)}

    async def _do_set_read_policy(self, env: Environment, args: Mapping[str, Any]) -> None:
        target = str(args["target"])
        gid = self._ref(target)
        if gid is None:
            return
        await self._set_policy(env, gid, int(args["lag"]))

    async def _set_policy(
        self, env: Environment, gid: GlobalId, lag: int, *, strict: bool = False
    ) -> None:
        """Set ``gid``'s read policy, recorded in the history (what compaction is judged by);
        ``strict``: a refusal is raised (the clients' own setup must not be refused)."""
        ev = self.history.invoke(
            "policy",
            self.world.kernel.now_ms,
            target=str(gid),
            lag_ms=lag,
            granularity_ms=GRANULARITY_MS,
        )
        policy = LagWriteFrontier(lag, GRANULARITY_MS)
        ok, value = await self._call(ev, lambda: env.set_read_policy(gid, policy))
        if strict and not ok:
            raise value

    # subscribes
    def _draw_subscribe(self) -> dict[str, Any] | None:
        subs = [
            d.name
            for d in self.scenario.dataflows
            if d.kind == "subscribe" and self._inputs_exist(d)
        ]
        if not subs or len(self.subs) >= 4:
            return None
        args: dict[str, Any] = {"dataflow": pick(self.source, subs)}
        if chance(self.source, 350):
            replica = self._pick_replica(self.specs[args["dataflow"]].cluster)
            if replica is not None:
                args["replica"] = replica
        return args

    async def _do_subscribe(self, env: Environment, args: Mapping[str, Any]) -> None:
        spec = self.specs.get(str(args["dataflow"]))
        if spec is None or spec.kind != "subscribe" or len(self.subs) >= 4:
            return
        if not self._inputs_exist(spec):
            return
        inputs = self._source_inputs(spec)
        ev = self.history.invoke(
            "subscribe",
            self.world.kernel.now_ms,
            target=spec.name,
            replica=args.get("replica"),
            **({"inputs": inputs} if inputs else {}),
        )
        sub = _Sub(int(ev["n"]), spec)
        self.subs.append(sub)
        try:
            ok, stream = await self._call(
                ev,
                lambda: env.subscribe(
                    self._plan(spec),
                    replica=args.get("replica"),
                    cluster=None if spec.cluster == DEFAULT_CLUSTER else spec.cluster,
                ),
            )
            if not ok:
                return
            ev["id"] = str(stream.id)
            sub.stream_id = stream.id
            self.world.count("subscribe")
            with sub.scope:
                async with stream:
                    async for batch in stream:
                        sub.upper = batch.upper
                        self.history.batch(
                            sub.n,
                            batch.lower,
                            batch.upper,
                            batch.updates,
                            batch.error,
                            self.world.kernel.now_ms,
                        )
                        if batch.error is not None:
                            self.world.count("subscribe_error")
                            self._judge_subscribe_error(sub, batch.error)
        except (trio.Cancelled, ProcessKilled):
            if ev.get("id") is not None and sub.upper is not None and self.world.controller.dying:
                self.history.batch(
                    sub.n, sub.upper, Antichain.empty(), (), DIED, self.world.kernel.now_ms
                )
            raise
        finally:
            self.subs.remove(sub)

    def _judge_subscribe_error(self, sub: _Sub, error: str) -> None:
        """A subscribe may end with an error only if its target replica went or an input was dropped."""
        dropped = {d["id"] for d in self.history.ops("drop")}
        dropped.update(g for d in self._drops() for g in d.get("gone", ()))
        if error.endswith("was dropped while the subscribe ran"):
            self.world.count("subscribe_ended_by_drop")
            if error.split()[0] not in dropped:
                self.world.violate(
                    "valid_reads_answered",
                    f"subscribe {sub.n} ended with {error!r}, but no client dropped that",
                )

    def _draw_unsubscribe(self) -> dict[str, Any] | None:
        return {"k": self.source.integer(0, 999)} if self.subs else None

    async def _do_unsubscribe(self, env: Environment, args: Mapping[str, Any]) -> None:
        if self.subs:
            sub = self.subs[int(args["k"]) % len(self.subs)]
            self.world.count("unsubscribe")
            sub.scope.cancel()

    # hydration
    def _draw_hydration(self) -> dict[str, Any] | None:
        targets = sorted(self.objects)
        args: dict[str, Any] = {"target": pick(self.source, targets) if targets else None}
        if chance(self.source, 400):
            replicas = sorted(self.world.replica_names())
            if replicas:
                args["replicas"] = [pick(self.source, replicas)]
        return args

    async def _do_hydration(self, env: Environment, args: Mapping[str, Any]) -> None:
        target = args.get("target")
        gid = None if target is None else self._ref(str(target))
        if target is not None and gid is None:
            return
        ev = self.history.invoke(
            "hydration", self.world.kernel.now_ms, target=None if gid is None else str(gid)
        )
        replicas = args.get("replicas")

        async def ask() -> bool:
            await trio.lowlevel.checkpoint()
            return env.hydrated(gid, replicas=replicas)

        ok, value = await self._call(ev, ask)
        if ok:
            ev["hydrated"] = bool(value)
            self.world.count("hydrated" if value else "not_hydrated")
            self.world.hydration_answered(env, ev, replicas)  # judged against the trace, now

    # copy-to
    def _draw_copy_to(self) -> dict[str, Any] | None:
        target = pick(self.source, self._readable())
        mode = pick(self.source, ("fresh", "valid"))
        return {"target": target, "at": {"mode": mode, "k": self.source.integer(0, 999)}}

    async def _do_copy_to(self, env: Environment, args: Mapping[str, Any]) -> None:
        """Write ``target``'s contents at a time once, as Parquet files (judged by
        :mod:`.copy_to`)."""
        target = str(args["target"])
        gid = self._ref(target)
        if gid is None:
            return
        try:
            t = self._time(env, target, args["at"])
        except TidegateError:
            return
        if t == "skip":
            return
        assert t is None or isinstance(t, int)
        ev = self.history.invoke(
            "copy_to", self.world.kernel.now_ms, target=str(gid), name=target, at=t
        )
        url = ev["url"] = copy_to_url(int(ev["n"]))
        clear(url)
        ok, rows = await self._call(ev, lambda: env.copy_to(gid, url, at=t))
        if ok:
            ev["rows_written"] = int(rows)
            self.world.count("copy_to")
        self._judge_refusal(ev, str(args["at"]["mode"]))

    # cluster replicas
    def _draw_create_cluster_replica(self) -> dict[str, Any] | None:
        """A replica added to one of the scenario's clusters (at most 4 each)."""
        room = [
            c.name
            for c in self.scenario.clusters
            if len(self._cluster_processes(c.name)) < MAX_CLUSTER_REPLICAS
        ]
        if not room:
            return None
        self.cluster_replicas += 1
        return {"cluster": pick(self.source, room), "name": f"a{self.cluster_replicas}"}

    async def _do_create_cluster_replica(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster, name = str(args["cluster"]), str(args["name"])
        if f"{cluster}.{name}" in self.world.replicas:
            return
        address = self.world.start_cluster_replica(cluster, name)
        ev = self.history.invoke(
            "create_replica", self.world.kernel.now_ms, cluster=cluster, replica=name
        )
        try:
            ok, _ = await self._call(
                ev, lambda: env.create_cluster_replica(cluster, name, address=address)
            )
        finally:
            if ev["status"] in ("info", "pending"):  # the controller died, or the client left
                self._replicas_in_doubt.add(address)
        if ok:
            self.world.count("create_cluster_replica")
        elif ev["status"] == "fail":  # refused: nobody will connect to it
            self.world.stop_cluster_replica(address)

    def _draw_drop_cluster_replica(self) -> dict[str, Any] | None:
        """A replica dropped from one of the scenario's clusters (one is always left)."""
        some = [c.name for c in self.scenario.clusters if len(self._cluster_processes(c.name)) > 1]
        if not some:
            return None
        cluster = pick(self.source, some)
        process = pick(self.source, self._cluster_processes(cluster))
        return {"cluster": cluster, "name": process.removeprefix(f"{cluster}.")}

    async def _do_drop_cluster_replica(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster, name = str(args["cluster"]), str(args["name"])
        process = f"{cluster}.{name}"
        if process not in self.world.replicas or len(self._cluster_processes(cluster)) <= 1:
            return
        ev = self.history.invoke(
            "drop_replica", self.world.kernel.now_ms, cluster=cluster, replica=name
        )
        try:
            ok, _ = await self._call(ev, lambda: env.drop_cluster_replica(cluster, name))
        finally:
            if ev["status"] in ("info", "pending"):
                self._replicas_in_doubt.add(process)
        if ok:
            self.world.count("drop_cluster_replica")
            self.world.stop_cluster_replica(process)

    # clusters
    def _draw_create_cluster(self) -> dict[str, Any] | None:
        """A cluster of one replica (at most two such at a time)."""
        if len(self.clusters) >= 2:
            return None
        self.created_clusters += 1
        return {"cluster": created_cluster(self.created_clusters)}

    async def _do_create_cluster(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster = str(args["cluster"])
        if cluster in self.clusters or cluster in self.world.cluster_of.values():
            return  # (a replayed plan's name already used)
        address = self.world.start_cluster_replica(cluster, "r1")
        ev = self.history.invoke("create_cluster", self.world.kernel.now_ms, cluster=cluster)
        ok, _ = await self._call(ev, lambda: env.create_cluster(cluster, replicas={"r1": address}))
        if ok:
            self.clusters.add(cluster)
            self.world.count("create_cluster")
        elif ev["status"] == "fail":  # refused: nobody will connect to it
            self.world.stop_cluster_replica(address)

    def _draw_create_managed_cluster(self) -> dict[str, Any] | None:
        """A managed cluster of 1-3 replicas of a built-in size (at most two clusters of the
        clients' at a time)."""
        if len(self.clusters) >= 2:
            return None
        self.created_clusters += 1
        return {
            "cluster": created_cluster(self.created_clusters),
            "replicas": self.source.integer(1, 3),
            "size": pick(self.source, ("small", "medium", "large")),
        }

    async def _do_create_managed_cluster(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster, n, size = str(args["cluster"]), int(args["replicas"]), str(args["size"])
        if cluster in self.clusters or cluster in self.world.cluster_of.values():
            return  # (a replayed plan's name already used)
        ev = self.history.invoke(
            "create_cluster",
            self.world.kernel.now_ms,
            cluster=cluster,
            managed=True,
            replicas=n,
            size=size,
        )
        ok, _ = await self._call(ev, lambda: env.create_cluster(cluster, replicas=n, size=size))
        if ok:
            self.clusters.add(cluster)
            self.managed.add(cluster)
            self.world.count("create_managed_cluster")
            self._judge_managed(ev, cluster, n)

    def _draw_alter_cluster(self) -> dict[str, Any] | None:
        """A managed cluster's replication factor changed to 1-3."""
        managed = sorted(self.managed & self.clusters)
        if not managed:
            return None
        return {"cluster": pick(self.source, managed), "replicas": self.source.integer(1, 3)}

    async def _do_alter_cluster(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster, m = str(args["cluster"]), int(args["replicas"])
        if cluster not in self.managed or cluster not in self.clusters:
            return
        ev = self.history.invoke(
            "alter_cluster", self.world.kernel.now_ms, cluster=cluster, replicas=m
        )
        ok, _ = await self._call(ev, lambda: env.alter_cluster(cluster, replication_factor=m))
        if ok:
            self.world.count("alter_cluster")
            self._judge_managed(ev, cluster, m)

    def _judge_managed(self, ev: Mapping[str, Any], cluster: str, n: int) -> None:
        """Once ``CREATE CLUSTER`` / ``ALTER CLUSTER ... SET (REPLICATION FACTOR = n)`` is
        answered, the world runs exactly ``n`` replica processes of ``cluster``, ``r1``..``rN``
        (its own record of the processes it started for the cluster, not the product's); once
        its ``DROP CLUSTER`` is answered, none (``n`` 0)."""
        running = self._cluster_processes(cluster)
        want = [f"{cluster}.r{i}" for i in range(1, n + 1)]
        if running != want:
            self.world.violate(
                "managed_replicas_match",
                f"{ev['op']} {ev['n']} of {cluster} to {n} replicas was answered, but the "
                f"world runs {running} for it",
            )

    def _draw_drop_cluster(self) -> dict[str, Any] | None:
        """A cluster the clients created dropped, mostly with ``CASCADE`` (without, one that
        maintains dataflows must be refused)."""
        if not self.clusters:
            return None
        return {
            "cluster": pick(self.source, sorted(self.clusters)),
            "cascade": chance(self.source, 750),
        }

    def _on_cluster(self, cluster: str) -> dict[str, GlobalId]:
        """The dataflows the clients know exist on ``cluster`` (their own record), by name."""
        return {n: g for n, g in sorted(self.objects.items()) if self.specs[n].cluster == cluster}

    async def _do_drop_cluster(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster = str(args["cluster"])
        if cluster not in self.clusters:
            return
        cascade = bool(args.get("cascade"))
        mine = self._on_cluster(cluster)
        mine.update(self.sql.on_cluster(cluster))
        ev = self.history.invoke(
            "drop_cluster",
            self.world.kernel.now_ms,
            cluster=cluster,
            **({"cascade": True} if cascade else {}),
        )
        ok, gone = await self._call(ev, lambda: env.drop_cluster(cluster, cascade=cascade))
        if ok:
            self.clusters.discard(cluster)
            self.world.count("drop_cluster")
            if mine:
                self.world.count("drop_cluster_cascaded")
                if not cascade:
                    self.world.violate(
                        "clusters_not_empty_refused",
                        f"drop_cluster {ev['n']} of {cluster} without CASCADE was done, though "
                        f"it maintained {sorted(mine)}",
                    )
            # What went: the client's own record of what it placed there (what the end's
            # cleanup checks judge), and what the product says went with it.
            went = set(mine.values()) | set(gone)
            if went:
                ev["gone"] = sorted(str(g) for g in went)
            for table in (self.objects, self.source_ids, self.sinks):
                for key in [k for k, v in table.items() if v in went]:
                    del table[key]
            self.sql.forget(went)
            for g in sorted(went):
                self.world.dropped(g)
            if cluster in self.managed:  # the orchestrator's to stop: none may run now
                self._judge_managed(ev, cluster, 0)
            for process, c in sorted(self.world.cluster_of.items()):
                if c == cluster:
                    self.world.stop_cluster_replica(process)
        elif ev["status"] == "fail" and str(ev["error"]).startswith(ClusterNotEmpty.__name__):
            self.world.count("drop_cluster_refused_not_empty")
            if cascade:
                self.world.violate(
                    "clusters_not_empty_refused",
                    f"drop_cluster {ev['n']} of {cluster} with CASCADE was refused: {ev['error']}",
                )

    def _draw_cluster_dataflow(self) -> dict[str, Any] | None:
        """One of the scenario's indexes or materialized views created anew on a cluster the
        clients created while the run goes (``IN CLUSTER``), under a name of its own."""
        if not self.clusters:
            return None
        cluster = pick(self.source, sorted(self.clusters))
        free = [
            d
            for d in self.scenario.dataflows
            if d.kind != "subscribe"
            and self._inputs_exist(d)
            and f"{d.name}_{cluster}" not in self.objects
        ]
        if not free:
            return None
        kind = pick(self.source, sorted({d.kind for d in free}))  # views as often as indexes
        names = [d.name for d in free if d.kind == kind]
        return {"dataflow": pick(self.source, names), "cluster": cluster}

    async def _do_cluster_dataflow(self, env: Environment, args: Mapping[str, Any]) -> None:
        """Create it, then read it on its cluster (answered, judged against the reference as
        every read) and from ``default`` (an index: refused, :class:`WrongCluster`; a
        materialized view: answered, through storage)."""
        base, cluster = self.specs.get(str(args["dataflow"])), str(args["cluster"])
        if base is None or base.name in self.placed or cluster not in self.clusters:
            return
        name = f"{base.name}_{cluster}"
        self.specs.setdefault(name, replace(base, name=name, cluster=cluster))
        self.placed.add(name)
        await self._create(env, name)
        if name not in self.objects:
            return
        self.world.count(f"cluster_dataflow_{base.kind}")
        for asked in (cluster, DEFAULT_CLUSTER):
            read = {"mode": "fresh", "k": 0}
            fin = finishing_to_json(RowSetFinishing())
            await self._do_peek(
                env, {"target": name, "at": read, "finishing": fin, "cluster": asked}
            )

    # sources
    def _note_source(self, src: SourceSpec, gid: GlobalId) -> None:
        self.history.note(
            "source",
            self.world.kernel.now_ms,
            name=src.id,
            id=str(gid),
            source=src.name,
            upstream=src.upstream,
        )

    def _draw_create_source(self) -> dict[str, Any] | None:
        ids = [s.id for s in self.scenario.sources if s.id not in self.source_ids]
        return {"source": pick(self.source, ids)} if ids else None

    async def _do_create_source(self, env: Environment, args: Mapping[str, Any]) -> None:
        await self._create_source(env, str(args["source"]))

    async def _create_source(self, env: Environment, sid: str) -> None:
        src = self.source_specs.get(sid)
        if src is None or sid in self.source_ids:
            return
        ev = self.history.invoke("create", self.world.kernel.now_ms, name=src.name, kind="source")
        ok, gid = await self._call(
            ev,
            lambda: env.create_source(src.name, SimulatedSource(src.upstream), schema=src.schema),
        )
        if (
            not ok
            and ev["status"] == "fail"
            and not str(ev["error"]).startswith(DuplicateCatalogName.__name__)
        ):
            self._check_no_effect(env, ev, src.name)
        if ok:
            ev["id"] = str(gid)
            self.source_ids[sid] = gid
            self._note_source(src, gid)
            self.world.count("create_source")

    def _draw_drop_source(self) -> dict[str, Any] | None:
        ids = sorted(self.source_ids)
        if not ids:
            return None
        return {"source": pick(self.source, ids), "cascade": chance(self.source, 600)}

    async def _do_drop_source(self, env: Environment, args: Mapping[str, Any]) -> None:
        sid = str(args["source"])
        gid = self.source_ids.get(sid)
        if gid is None:
            return
        name = self.source_specs[sid].name
        await self._drop(env, gid, name, "drop_source", cascade=bool(args.get("cascade")))

    # sinks
    def _sink_input(self, sink: SinkSpec) -> GlobalId | None:
        """The catalog id of what ``sink`` writes out, if it exists."""
        if sink.input in self.table_ids:
            return self.table_ids[sink.input]
        if sink.input in self.source_ids:
            return self.source_ids[sink.input]
        return self.objects.get(sink.input)

    def _draw_create_sink(self) -> dict[str, Any] | None:
        names = [
            k.name
            for k in self.scenario.sinks
            if k.name not in self.sinks and self._sink_input(k) is not None
        ]
        return {"sink": pick(self.source, names)} if names else None

    async def _do_create_sink(self, env: Environment, args: Mapping[str, Any]) -> None:
        await self._create_sink(env, str(args["sink"]))

    async def _create_sink(self, env: Environment, name: str) -> None:
        sink = self.sink_specs.get(name)
        if sink is None or name in self.sinks:
            return
        input_id = self._sink_input(sink)
        if input_id is None:
            return
        ev = self.history.invoke(
            "create", self.world.kernel.now_ms, name=name, kind="sink", input=str(input_id)
        )
        ok, gid = await self._call(
            ev,
            lambda: env.create_sink(
                name,
                input_id,
                SimulatedSink(sink.target, sink.commit_interval_ms, sink.progress_interval_ms),
            ),
        )
        if (
            not ok
            and ev["status"] == "fail"
            and not str(ev["error"]).startswith(DuplicateCatalogName.__name__)
        ):
            self._check_no_effect(env, ev, name)
        if ok:
            ev["id"] = str(gid)
            self.sinks[name] = gid
            self.history.note(
                "sink",
                self.world.kernel.now_ms,
                name=name,
                id=str(gid),
                input=str(input_id),
                target=sink.target,
            )
            self.world.count("create_sink")

    def _draw_drop_sink(self) -> dict[str, Any] | None:
        names = sorted(self.sinks)
        return {"sink": pick(self.source, names)} if names else None

    async def _do_drop_sink(self, env: Environment, args: Mapping[str, Any]) -> None:
        name = str(args["sink"])
        gid = self.sinks.get(name)
        if gid is not None:
            await self._drop(env, gid, name, "drop_sink")
