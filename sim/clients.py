"""Clients of the simulated controller: a workload drawn from the choice source per ``WorkloadMix``.

Clients append rows to tables (acknowledged with their write time), peek at
valid times, at future times and below the since (a typed refusal must come
back), cancel peeks, install and drop the scenario's indexes, materialized
views and subscribes, change read policies, and let time pass. Independently
of the workload, a timestamp oracle ticks every table forward (an append of
no updates) so that frontiers progress. Every call goes through the spec
:class:`~tidegate.spec.controller.Controller`; its effects go to the driver.

What the controller must survive a restart with is kept durably, as the
runtime keeps it: tables, indexes, materialized views, replicas and read
policies in a :class:`~tidegate.runtime.catalog.Catalog` over a
:class:`~tidegate.spec.shard.MemoryConsensus` (every change is committed
before the controller hears of it), and the timestamp oracle
(``last_upper``), which never goes back. :meth:`Clients.controller_died`
ends what the dead controller owed the clients (pending peeks and subscribes
fail with "controller restarted"; unacknowledged appends become in doubt
until the storage decides them); :meth:`Clients.restore` builds a new
controller from the catalog and the shards' frontiers alone.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tidegate.runtime.catalog import (
    Catalog,
    CatalogOp,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateTable,
    Drop,
    DropReplica,
    MaterializedViewEntry,
    SetReadPolicy,
    TableEntry,
    restore_plan,
)
from tidegate.spec.controller import Controller
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema, gets, typecheck
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    MaterializedViewConnection,
    PeekTargetKind,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from tidegate.spec.shard import MemoryConsensus
from tidegate.spec.storage import (
    AppendCommand,
    CollectionDescription,
    MaterializedView,
    ShardFrontiers,
    Table,
)

from .choices import ChoiceSource, chance, pick
from .driver import Driver
from .history import ClientHistory
from .kernel import Kernel
from .scenario import DataflowSpec, Scenario

__all__ = ["RESTARTED", "Clients", "Installed", "PendingPeek", "dataflow_description"]

INSTANCE = "c1"
RESTARTED = "controller restarted"
"""The failure clients see for requests the dead controller owed them."""
_WORDS = ("ann", "bob", "cy", "dee", "eve", "fay")


def dataflow_description(spec: DataflowSpec, export: GlobalId, as_of: int) -> DataflowDescription:
    """The dataflow that installs ``spec`` as collection ``export`` from ``as_of``."""
    sources = tuple(SourceImport(g) for g in sorted(set(gets(spec.plan))))
    build = (BuildDesc(export, spec.plan),)
    index_exports: tuple[IndexExport, ...] = ()
    sinks: tuple[SinkExport, ...] = ()
    if spec.kind == "index":
        index_exports = (IndexExport(export, export, spec.key),)
    elif spec.kind == "materialized_view":
        sinks = (SinkExport(export, export, MaterializedViewConnection()),)
    else:
        sinks = (SinkExport(export, export, SubscribeConnection()),)
    return DataflowDescription(
        debug_name=spec.name,
        source_imports=sources,
        objects_to_build=build,
        index_exports=index_exports,
        sink_exports=sinks,
        as_of=Antichain([as_of]),
    )


@dataclass
class Installed:
    """A dataflow the clients installed: its export id, spec and as_of."""

    id: GlobalId
    spec: DataflowSpec
    as_of: int
    inputs: tuple[GlobalId, ...]


@dataclass
class PendingPeek:
    uuid: _uuid.UUID
    id: GlobalId
    time: int
    target: PeekTargetKind
    issued_ms: int
    cancelled: bool = False


class Clients:
    """The workload (see the module docstring)."""

    def __init__(
        self,
        scenario: Scenario,
        controller: Controller,
        driver: Driver,
        kernel: Kernel,
        source: ChoiceSource,
        history: ClientHistory,
        record: Callable[..., None],
        count: Callable[[str], None],
        violate: Callable[[str, str], None],
    ) -> None:
        self.scenario = scenario
        self.ctl = controller
        self.driver = driver
        self.kernel = kernel
        self.source = source
        self.history = history
        self._record = record
        self._count = count
        self._violate = violate
        self.peek_finishing: dict[_uuid.UUID, RowSetFinishing] = {}
        self.tables = tuple(GlobalId.parse(t.id) for t in scenario.tables)
        self.schemas: dict[GlobalId, Schema] = {
            GlobalId.parse(t.id): t.schema for t in scenario.tables
        }
        self.last_upper: dict[GlobalId, int] = {t: 0 for t in self.tables}
        self.installed: dict[GlobalId, Installed] = {}
        self.peeks: dict[_uuid.UUID, PendingPeek] = {}
        self.appends: dict[int, tuple[GlobalId, int, list[tuple[Row, int]]]] = {}
        self.acked: list[tuple[GlobalId, int, list[tuple[Row, int]]]] = []
        self.present: dict[GlobalId, list[Row]] = {t: [] for t in self.tables}
        self.next_user = 1000
        self.next_transient = 1
        self.active = True
        self.on_install: Callable[[Installed], None] = lambda inst: None
        self.on_restore: Callable[[dict[GlobalId, tuple[Antichain, Antichain]]], None] = (
            lambda shards: None
        )
        """Called by :meth:`restore` once the as-ofs are chosen, before anything is created."""
        self.peek_count = 0
        self.append_count = 0
        self.catalog = Catalog(MemoryConsensus())
        """The durable catalog: what a restarted controller is rebuilt from."""
        self.in_doubt: dict[tuple[int, int], tuple[GlobalId, int, list[tuple[Row, int]]]] = {}
        """Appends a dead controller never acknowledged, by ``(generation, ticket)``."""
        self.generation = 1
        """Which controller incarnation the clients talk to (1 for the first)."""
        self.controller_up = True
        """False while the controller process is down: clients and the oracle wait."""
        self.restored: dict[GlobalId, int] = {}
        """The as_of of each dataflow the last restore re-created."""
        self._resubscribe: list[DataflowSpec] = []
        """Subscribes a restart ended, to start again when a controller is back."""

    def _durably(self, *ops: CatalogOp) -> None:
        """Commit ``ops`` to the catalog (before the controller is told, as the runtime does)."""
        self.catalog.apply(ops)

    # -- setup ------------------------------------------------------------------------------
    def setup(self, replicas: list[str]) -> None:
        ctl = self.ctl
        apply = self.driver.apply
        self._durably(
            *(CreateTable(f"table {t}", t, self.schemas[t]) for t in self.tables),
            *(CreateReplica(r, executor="python") for r in replicas),
            *(SetReadPolicy(t, LagWriteFrontier(300, 50)) for t in self.tables),
        )
        apply(ctl.create_collections([(t, CollectionDescription(Table())) for t in self.tables]))
        apply(ctl.initialization_complete())
        apply(ctl.create_instance(INSTANCE))
        for r in replicas:
            apply(ctl.add_replica(INSTANCE, r))
        apply(ctl.set_storage_read_policy([(t, LagWriteFrontier(300, 50)) for t in self.tables]))
        for spec in self.scenario.dataflows:
            self.install(spec)

    # -- time ---------------------------------------------------------------------------------
    def tick(self) -> None:
        """The timestamp oracle: advance every table to now + 1 with an empty append."""
        if not self.controller_up:
            return
        now = self.kernel.now_ms
        cmds = []
        for t in self.tables:
            if self.last_upper[t] <= now:
                cmds.append(AppendCommand(t, [], Antichain([now + 1])))
                self.last_upper[t] = now + 1
        if cmds:
            pending = self.ctl.append(cmds)
            self.driver.apply(pending.effects)

    # -- the workload ---------------------------------------------------------------------------
    def act(self) -> None:
        """One client action, drawn by weight (none while the controller is down)."""
        if not self.controller_up:
            self._count("client_waits_for_controller")
            return
        weights = self.scenario.workload.weights()
        total = sum(w for _, w in weights)
        roll = self.source.integer(0, total - 1)
        chosen = weights[-1][0]
        for action, w in weights:
            if roll < w:
                chosen = action
                break
            roll -= w
        getattr(self, f"_do_{chosen}")()

    def _do_append(self) -> None:
        table = pick(self.source, self.tables)
        low, high = self.scenario.workload.rows_per_append
        n = self.source.integer(low, high)
        updates: list[tuple[Row, int]] = []
        present = self.present[table]
        for _ in range(n):
            if present and chance(self.source, 250):
                row = present.pop(self.source.integer(0, len(present) - 1))
                updates.append((row, -1))
            else:
                row = self._row(self.schemas[table])
                present.append(row)
                updates.append((row, 1))
        ts = max(self.kernel.now_ms, self.last_upper[table])
        self.last_upper[table] = ts + 1
        pending = self.ctl.append(
            [AppendCommand(table, [(r, ts, d) for r, d in updates], Antichain([ts + 1]))]
        )
        self.appends[pending.ticket] = (table, ts, updates)
        self.history.append_issued(pending.ticket, table, ts, updates, self.kernel.now_ms)
        self.append_count += 1
        self.driver.apply(pending.effects)

    def _row(self, schema: Schema) -> Row:
        out: list[object] = []
        for c in schema.columns:
            if c.type.scalar.value == "string":
                out.append(pick(self.source, _WORDS))
            else:
                out.append(self.source.integer(0, 9))
        return tuple(out)

    def on_append_completed(self, ticket: int, ok: bool) -> None:
        entry = self.appends.pop(ticket, None)
        if entry is None:
            return  # a tick
        self.history.append_done(ticket, ok, self.kernel.now_ms)
        if ok:
            self.acked.append(entry)
        else:
            self._count("append_failed")

    # peeks
    def _readable(self) -> list[tuple[GlobalId, PeekTargetKind]]:
        out: list[tuple[GlobalId, PeekTargetKind]] = [(t, "persist") for t in self.tables]
        for gid in sorted(self.installed):
            kind = self.installed[gid].spec.kind
            if kind == "index":
                out.append((gid, "index"))
            elif kind == "materialized_view":
                out.append((gid, "persist"))
        return out

    def frontiers(
        self, gid: GlobalId, target: PeekTargetKind
    ) -> tuple[Antichain, Antichain] | None:
        if target == "persist":
            return self.ctl.storage_frontiers(gid)
        try:
            f = self.ctl.collection_frontiers(INSTANCE, gid)
        except TidegateError:
            return None
        return f.read_frontier, f.write_frontier

    def _arity(self, gid: GlobalId) -> int:
        if gid in self.schemas:
            return self.schemas[gid].arity
        return typecheck(self.installed[gid].spec.plan).arity

    def _finishing(self, gid: GlobalId) -> RowSetFinishing:
        if chance(self.source, 700):
            return RowSetFinishing()
        order = tuple(
            ColumnOrder(c, desc=chance(self.source, 500)) for c in range(self._arity(gid))
        )
        return RowSetFinishing(order_by=order, limit=self.source.integer(1, 3))

    def _do_peek(self, invalid: bool = False) -> None:
        gid, target = pick(self.source, self._readable())
        fr = self.frontiers(gid, target)
        if fr is None or not fr[0].elements:
            return
        since = fr[0].elements[0]
        if invalid:
            if since == 0:
                return
            ts = since - 1
        else:
            upper = fr[1].elements[0] if fr[1].elements else since
            ts = self.source.integer(since, max(since, upper + 200))
            if fr[1].less_equal(ts):
                self._count("peek_future_time")
        finishing = self._finishing(gid)
        try:
            uuid, effects = self.ctl.peek(INSTANCE, gid, ts, finishing, target=target)
        except TidegateError as e:
            self.history.peek_issued(
                f"refused-{self.peek_count}",
                gid,
                ts,
                target,
                finishing,
                self.kernel.now_ms,
                refused=f"{type(e).__name__}: {e}",
            )
            self.peek_count += 1
            self._record("peek_refused", id=gid, time=ts)
            self._count("peek_refused_below_since" if invalid else "peek_refused")
            if not invalid:
                self._violate(
                    "valid_peek_accepted", f"peek of {gid} at {ts} (since {since}) refused: {e}"
                )
            return
        self.peek_count += 1
        if invalid:
            self._violate(
                "read_below_since_refused", f"peek of {gid} at {ts} below since {since} accepted"
            )
        if target == "persist":
            self._count("persist_peek")
        self._record("peek", id=gid, uuid=str(uuid), time=ts)
        self.peeks[uuid] = PendingPeek(uuid, gid, ts, target, self.kernel.now_ms)
        self.history.peek_issued(str(uuid), gid, ts, target, finishing, self.kernel.now_ms)
        self.peek_finishing[uuid] = finishing
        self.driver.apply(effects)

    def _do_peek_invalid(self) -> None:
        self._do_peek(invalid=True)

    def _do_cancel_peek(self) -> None:
        live = [u for u in sorted(self.peeks) if not self.peeks[u].cancelled]
        if not live:
            return
        uuid = pick(self.source, live)
        self.peeks[uuid].cancelled = True
        self._record("cancel_peek", uuid=str(uuid))
        self._count("peek_cancelled_while_pending")
        self.driver.apply(self.ctl.cancel_peek(INSTANCE, uuid))

    # dataflows
    def _new_id(self, kind: str) -> GlobalId:
        if kind == "subscribe":
            self.next_transient += 1
            return GlobalId.transient(self.next_transient)
        self.next_user += 1
        return GlobalId.user(self.next_user)

    def install(self, spec: DataflowSpec) -> None:
        inputs = tuple(sorted(set(gets(spec.plan))))
        as_of = 0
        for g in inputs:
            fr = self.ctl.storage_frontiers(g)
            assert fr is not None
            if fr[0].elements:
                as_of = max(as_of, fr[0].elements[0])
        gid = self._new_id(spec.kind)
        if spec.kind == "index":
            self._durably(
                CreateIndex(spec.name, gid, spec.plan, spec.key),
                SetReadPolicy(gid, LagWriteFrontier(200, 20)),
            )
        elif spec.kind == "materialized_view":
            self._durably(CreateMaterializedView(spec.name, gid, spec.plan))
        if spec.kind == "materialized_view":
            desc = CollectionDescription(MaterializedView(inputs=inputs), since=Antichain([as_of]))
            self.driver.apply(self.ctl.create_collections([(gid, desc)]))
        df = dataflow_description(spec, gid, as_of)
        self.driver.apply(self.ctl.create_dataflow(INSTANCE, df))
        inst = Installed(gid, spec, as_of, inputs)
        self.installed[gid] = inst
        self.history.installed(gid, spec.name, spec.kind, as_of, self.kernel.now_ms)
        self.on_install(inst)
        if spec.kind == "materialized_view":
            self.driver.apply(self.ctl.allow_writes(INSTANCE, gid))
        elif spec.kind == "index":
            self.driver.apply(
                self.ctl.set_read_policy(INSTANCE, [(gid, LagWriteFrontier(200, 20))])
            )
        self._record("install", id=gid, dataflow=spec.name, as_of=as_of)

    def _do_create_dataflow(self) -> None:
        running = {i.spec.name for i in self.installed.values()}
        choices = [
            d for d in self.scenario.dataflows if d.kind != "subscribe" and d.name not in running
        ]
        if choices:
            self.install(pick(self.source, choices))

    def _do_subscribe(self) -> None:
        subs = [d for d in self.scenario.dataflows if d.kind == "subscribe"]
        live = sum(1 for i in self.installed.values() if i.spec.kind == "subscribe")
        if subs and live < 4:
            self.install(pick(self.source, subs))

    def _do_drop_dataflow(self) -> None:
        live = [
            g for g in sorted(self.installed) if self.installed[g].spec.kind != "materialized_view"
        ]
        if not live:
            return
        gid = pick(self.source, live)
        if self.installed[gid].spec.kind != "subscribe":
            self._durably(Drop(gid))
        del self.installed[gid]
        self.history.dropped(gid, self.kernel.now_ms)
        self._record("drop", id=gid)
        self._count("drop_dataflow")
        self.driver.apply(self.ctl.drop_collections(INSTANCE, [gid]))

    def _do_set_read_policy(self) -> None:
        indexes = [g for g in sorted(self.installed) if self.installed[g].spec.kind == "index"]
        lag = self.source.integer(0, 600)
        if indexes and chance(self.source, 500):
            gid = pick(self.source, indexes)
            self._durably(SetReadPolicy(gid, LagWriteFrontier(lag, 10)))
            self.driver.apply(
                self.ctl.set_read_policy(INSTANCE, [(gid, LagWriteFrontier(lag, 10))])
            )
        else:
            t = pick(self.source, self.tables)
            self._durably(SetReadPolicy(t, LagWriteFrontier(lag, 10)))
            self.driver.apply(self.ctl.set_storage_read_policy([(t, LagWriteFrontier(lag, 10))]))
        self._record("read_policy", lag=lag)

    # -- replicas (the world adds and drops them; the catalog records them) ---------------------
    def replica_added(self, name: str) -> None:
        self._durably(CreateReplica(name, executor="python"))

    def replica_dropped(self, name: str) -> None:
        self._durably(DropReplica(name))

    # -- controller restarts ----------------------------------------------------------------------
    def controller_died(self) -> None:
        """End what the dead controller owed: peeks and subscribes fail, appends are in doubt.

        Pending peeks are answered by failure (recorded as ``aborted`` in the
        history, once); subscribes end (they are transient: the catalog does
        not hold them, and their clients subscribe again once a controller is
        back); each unacknowledged append is in doubt until the storage decides
        it (:meth:`on_orphan_write`).
        """
        self.controller_up = False
        now = self.kernel.now_ms
        for uid in sorted(self.peeks):
            self.history.peek_aborted(str(uid), RESTARTED, now)
            self._count("peek_aborted_by_restart")
        self.peeks.clear()
        self.peek_finishing.clear()
        for ticket in sorted(self.appends):
            self.in_doubt[(self.generation, ticket)] = self.appends[ticket]
            self.history.append_in_doubt(self.generation, ticket, now)
            self._count("append_in_doubt")
        self.appends.clear()
        for gid in sorted(self.installed):
            if self.installed[gid].spec.kind == "subscribe":
                self._resubscribe.append(self.installed.pop(gid).spec)
                self._count("subscribe_ended_by_restart")

    def on_orphan_write(self, generation: int, ticket: int, landed: bool) -> None:
        """The storage decided a write of a dead controller (``generation``)."""
        entry = self.in_doubt.pop((generation, ticket), None)
        if entry is None:
            return  # a tick
        self.history.append_resolved(generation, ticket, landed, self.kernel.now_ms)
        self._count("append_in_doubt_landed" if landed else "append_in_doubt_lost")

    def restore(
        self,
        controller: Controller,
        driver: Driver,
        shards: Mapping[GlobalId, tuple[Antichain, Antichain]],
    ) -> None:
        """Build ``controller`` up from durable state only: the catalog and the shards' frontiers.

        Storage collections come back at their shards' ``(since, upper)``; the
        oracle moves past every table's upper (it never goes back); dataflows
        are re-created with as-ofs from the spec's as-of selection (the
        catalog's restore plan), in dependency order; read policies follow
        (not before: a table's policy could otherwise compact it past an
        as_of before the dataflow holds it); replicas are added on new
        connections and reconcile.
        """
        self.ctl, self.driver = controller, driver
        self.generation += 1
        state = self.catalog.load()
        frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        for gid in [t.id for t in state.tables] + [m.id for m in state.materialized_views]:
            frontiers[gid] = shards[gid]
        for t in state.tables:
            upper = frontiers[t.id][1].elements
            if upper:
                self.last_upper[t.id] = max(self.last_upper[t.id], int(upper[0]))
        now = self.kernel.now_ms
        plan = restore_plan(state, frontiers, current_time=now)
        apply = driver.apply
        descriptions: list[tuple[GlobalId, CollectionDescription]] = []
        for c in plan.storage_collections:
            entry = state.get(c.id)
            if isinstance(entry, TableEntry):
                descriptions.append((c.id, CollectionDescription(Table())))
            else:
                assert isinstance(entry, MaterializedViewEntry)
                inputs = tuple(sorted(set(gets(entry.plan))))
                descriptions.append((c.id, CollectionDescription(MaterializedView(inputs=inputs))))
        apply(
            controller.create_collections(
                descriptions, {g: ShardFrontiers(*frontiers[g]) for g, _ in descriptions}
            )
        )
        apply(controller.create_instance(INSTANCE))
        specs = {d.name: d for d in self.scenario.dataflows}
        self.restored = {}
        for df in plan.dataflows:
            (gid,) = df.export_ids
            selected = df.as_of.elements if df.as_of is not None else ()
            self.restored[gid] = self._restore_as_of(gid, int(selected[0]) if selected else now)
        self.on_restore(frontiers)
        for df in plan.dataflows:
            (gid,) = df.export_ids
            spec = specs[state.get(gid).name]
            as_of = self.restored[gid]
            inst = self.installed.get(gid)
            if inst is not None:
                inst.as_of = as_of
            self._record("restore_dataflow", id=gid, dataflow=spec.name, as_of=as_of)
            apply(controller.create_dataflow(INSTANCE, dataflow_description(spec, gid, as_of)))
            if spec.kind == "materialized_view":
                apply(controller.allow_writes(INSTANCE, gid))
        # Read policies only now: until the dataflows hold their inputs at their as-ofs, a
        # storage policy could move an input's since past them (the selection's storage holds).
        policies: dict[GlobalId, ReadPolicy] = dict(plan.read_policies)
        storage = [(g, policies[g]) for g, _ in descriptions if g in policies]
        if storage:
            apply(controller.set_storage_read_policy(storage))
        compute = [(g, p) for g, p in sorted(policies.items()) if g not in frontiers]
        if compute:
            apply(controller.set_read_policy(INSTANCE, compute))
        for r in state.replicas:
            apply(controller.add_replica(INSTANCE, r.name))
        apply(controller.initialization_complete())
        self.history.restarted(self.generation, now)
        specs_again, self._resubscribe = self._resubscribe, []
        for spec in specs_again:  # their clients subscribe again, from the present
            self.install(spec)
        self.controller_up = True

    def _restore_as_of(self, id: GlobalId, selected: int) -> int:
        """The as_of a restored dataflow gets: the one the as-of selection chose."""
        return selected
