"""DDL and installation: tables, indexes, materialized views and views; drops; read policies.

Every DDL holds the core's lock, is recorded in the durable catalog first (which
validates names, ids and plans), then installed in the controller from the
catalog state it produced: ``install_*`` takes a catalog state and an id, so
that restoring and following another environment's catalog install the same
way. A new dataflow's as-of comes from the spec's as-of selection over its
inputs' frontiers (:meth:`Ddl.select_as_of`). A drop uninstalls dependents
first; a dropped PostgreSQL source's slot is left to the sources' part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from tidegate.spec.compute.as_of_selection import select_as_ofs
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, typecheck
from tidegate.spec.plan.builder import Frame
from tidegate.spec.plan.relation import Get
from tidegate.spec.protocol.types import DataflowDescription
from tidegate.spec.storage import CollectionDescription
from tidegate.spec.text import check_text

from ..catalog import (
    DEFAULT_CLUSTER,
    STORAGE_ENTRIES,
    CatalogState,
    CreateIndex,
    CreateMaterializedView,
    CreateSecret,
    CreateTable,
    CreateView,
    Drop,
    IndexEntry,
    MaterializedViewEntry,
    SecretEntry,
    SetReadPolicy,
    SinkEntry,
    TableEntry,
    apply_ops,
    dataflow_for,
)
from ..errors import HasDependents, InvalidCatalogOp, ReadOnlyEnvironment, UnknownCatalogObject
from ._core import Core, Ref, defined
from ._sources import SourcesAndSinks, kept_secrets

__all__ = ["Ddl"]


class Ddl:
    """The DDL of one environment: record in the catalog, then install (see the module docstring)."""

    def __init__(self, core: Core, sources: SourcesAndSinks) -> None:
        self.core = core
        self.sources = sources

    async def create_table(
        self, name: str, schema: Schema, *, definition: str | None = None
    ) -> GlobalId:
        """Create table ``name`` with ``schema``; returns its id."""
        async with self.core.lock:
            gid = self.core.fresh_id()
            state = await self.core.apply(
                [CreateTable(name, gid, schema), *defined(gid, definition)]
            )
            if not self.core.staged:  # (a DDL transaction installs at its commit)
                await self.install_table(state, gid)
            return gid

    async def install_table(self, state: CatalogState, gid: GlobalId) -> None:
        """Create table ``gid`` of catalog ``state`` in the controller (its shard too)."""
        entry = state.get(gid)
        assert isinstance(entry, TableEntry)
        fr = await self.core.io.ensure_shard(gid, entry.schema)
        ctl = self.core.driver.ctl
        ctl.storage.create_collections(
            [(gid, self.core.description(state, gid, "table"))], {gid: fr}
        )
        self.core.driver.apply()
        self.core.driver.set_storage_read_policy([(gid, self.core.effective_policy(state, gid))])

    async def create_index(
        self,
        plan: Frame | Plan | Ref,
        keys: Sequence[str | int] = (),
        *,
        name: str | None = None,
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId:
        """Maintain ``plan`` in an index arranged by ``keys`` (names or positions), on ``cluster``;
        returns its id."""
        async with self.core.lock:
            p = self.core.plan(plan)
            schema = typecheck(p)
            positions = tuple(k if isinstance(k, int) else schema.index(k) for k in keys)
            on = p.id if isinstance(p, Get) else None
            if (
                isinstance(plan, GlobalId | str)
                and self.core.state.view(self.core.resolve(plan)) is not None
            ):
                on = self.core.resolve(plan)
            gid = self.core.fresh_id()
            index = CreateIndex(name or f"index_{gid}", gid, p, positions, on, cluster)
            state = await self.core.apply([index, *defined(gid, definition)])
            if not self.core.staged:
                self.install_index(state, gid)
            return gid

    def install_index(self, state: CatalogState, gid: GlobalId) -> None:
        """Create index ``gid`` of catalog ``state`` in the controller."""
        df = dataflow_for(state, gid)
        current = self.core.oracle.read_ts()
        cluster = state.placement(gid)
        as_of = self.select_as_of(state, df, current, cluster=cluster)
        self.core.driver.create_dataflow(df.with_as_of(as_of), cluster)
        self.core.driver.set_read_policy([(gid, self.core.effective_policy(state, gid))], cluster)

    async def create_materialized_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId:
        """Maintain ``plan`` into durable storage collection ``name``, computed on ``cluster``;
        returns its id (``views``: the views it reads, see
        :meth:`Environment.create_materialized_view`)."""
        async with self.core.lock:
            p = self.core.plan(plan)
            on_views = tuple(self.core.resolve(v) for v in views)
            gid = self.core.fresh_id()
            mv = CreateMaterializedView(name, gid, p, on_views, cluster)
            state = await self.core.apply([mv, *defined(gid, definition)])
            if not self.core.staged:
                await self.install_materialized_view(state, gid)
            return gid

    async def install_materialized_view(self, state: CatalogState, gid: GlobalId) -> None:
        """Create materialized view ``gid`` of catalog ``state`` in the controller (its shard too)."""
        entry = state.get(gid)
        assert isinstance(entry, MaterializedViewEntry)
        fr = await self.core.io.ensure_shard(gid, typecheck(entry.plan))
        df = dataflow_for(state, gid)
        current = self.core.oracle.read_ts()
        cluster = state.placement(gid)
        as_of = self.select_as_of(state, df, current, output=(fr.since, fr.upper), cluster=cluster)
        if not self.core.read_only and fr.upper <= fr.since and not as_of <= fr.since:
            # Nothing written yet: the shard's since becomes the as_of on the disk before the
            # dataflow writes, so a restored view refuses reads before it (never answers them
            # from a shard that has no data there) however soon this controller stops.
            await self.core.io.advance_since(gid, as_of)
        desc = self.core.description(state, gid, "materialized_view")
        desc = CollectionDescription(desc.data_source, since=as_of)
        ctl = self.core.driver.ctl
        ctl.storage.create_collections([(gid, desc)], {gid: fr})
        self.core.driver.apply()
        self.core.driver.create_dataflow(df.with_as_of(as_of), cluster)
        # A read-only controller remembers it and sends it once promoted.
        ctl.compute.allow_writes(cluster or DEFAULT_CLUSTER, gid)
        self.core.driver.apply()
        self.core.driver.set_storage_read_policy([(gid, self.core.effective_policy(state, gid))])

    async def create_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
    ) -> GlobalId:
        """Name the query ``plan`` (Materialize's ``CREATE VIEW``); returns its id."""
        async with self.core.lock:
            p = self.core.plan(plan)
            on_views = tuple(self.core.resolve(v) for v in views)
            gid = self.core.fresh_id()
            await self.core.apply([CreateView(name, gid, p, on_views), *defined(gid, definition)])
            return gid

    async def drop(
        self, ref: Ref, *, cascade: bool = False, dropped: dict[GlobalId, Any] | None = None
    ) -> list[GlobalId]:
        """Drop object ``ref`` (with ``cascade``, its dependents too); returns the dropped ids."""
        return await self.drop_many([ref], cascade=cascade, dropped=dropped)

    async def drop_many(
        self,
        refs: Sequence[Ref],
        *,
        cascade: bool = False,
        dropped: dict[GlobalId, Any] | None = None,
    ) -> list[GlobalId]:
        """Drop every object of ``refs`` at once, or none (one catalog change); the dropped ids.

        Objects of ``refs`` may depend on each other (``DROP TABLE t, v`` with
        view ``v`` on ``t``); anything else that depends on one of them is
        refused (:class:`HasDependents`, nothing dropped) unless ``cascade``.
        """
        async with self.core.lock:
            gids = list(dict.fromkeys(self.core.resolve(r) for r in refs))
            state = self.core.state
            before = {
                e.id: e for e in (*state.entries(), *state.views, *state.sinks, *state.secrets)
            }
            after = await self.core.apply(_drops(state, gids, cascade))
            left = {e.id for e in (*after.entries(), *after.views, *after.sinks, *after.secrets)}
            gone = sorted(set(before) - left, reverse=True)
            if dropped is not None:
                dropped.update((g, before[g]) for g in gone)
            if self.core.staged:  # a DDL transaction: uninstalled at its commit
                return gone
            self.uninstall(before, gone)
            self.sources.drop_replication_slots(after, state)  # those the drop recorded
            kept = kept_secrets(after)  # a recorded slot's: dropped with it, later
            for g in gone:  # recorded as dropped: their values go
                if isinstance(before[g], SecretEntry) and g not in kept:
                    await self.core.platform.run_blocking(self.core.secrets.delete, g)
            return gone

    async def create_secret(
        self, name: str, value: str, *, definition: str | None = None
    ) -> GlobalId:
        """Create secret ``name`` holding ``value``; returns its id (see :mod:`tidegate.runtime.secrets`)."""
        if not isinstance(value, str):
            raise InvalidCatalogOp(f"secret {name!r}: its value must be text")
        check_text(value, f"secret {name!r}'s value")
        async with self.core.lock:
            gid = self.core.fresh_id()
            apply_ops(self.core.state, [CreateSecret(name, gid)])  # refused before any write
            run = self.core.platform.run_blocking
            await run(self.core.secrets.put, gid, value)  # the value first: then the record
            if self.core.staging is not None and self.core.staged:
                self.core.staging.secrets.append(gid)  # removed if the transaction fails
            try:
                await self.core.apply([CreateSecret(name, gid), *defined(gid, definition)])
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await run(self.core.secrets.delete, gid)
                raise
            return gid

    async def alter_secret(self, name: str, value: str) -> None:
        """Give secret ``name`` a new value [UnknownCatalogObject]; sources and sinks that use it
        read it when they next connect from a newly opened environment."""
        if not isinstance(value, str):
            raise InvalidCatalogOp(f"secret {name!r}: its value must be text")
        check_text(value, f"secret {name!r}'s value")
        async with self.core.lock:
            if self.core.read_only:
                raise ReadOnlyEnvironment("a secret change")
            secret = self.core.state.secret(name)
            if secret is None:
                raise UnknownCatalogObject(f"no secret named {name!r}")
            if self.core.staging is not None and self.core.staged:
                self.core.staging.values[secret.id] = value  # written at the commit
                return
            await self.core.platform.run_blocking(self.core.secrets.put, secret.id, value)

    def uninstall(self, before: Mapping[GlobalId, Any], gone: Sequence[GlobalId]) -> None:
        """Drop the objects ``gone`` (entries in ``before``, dependents first) from the controller."""
        ctl, driver = self.core.driver.ctl, self.core.driver
        driver.end_reads_of(gone)
        for g in gone:
            entry = before[g]
            if isinstance(entry, IndexEntry | MaterializedViewEntry):
                driver.drop_collections([g], entry.cluster)
            if isinstance(entry, SinkEntry):
                ctl.storage.drop_sinks([g])
                driver.apply()
            elif isinstance(entry, STORAGE_ENTRIES):
                ctl.storage.drop_sources([g])
                driver.apply()

    async def set_read_policy(self, ref: Ref, policy: ReadPolicy) -> None:
        """How far object ``ref`` may be compacted (its shard too, for tables and views)."""
        async with self.core.lock:
            gid = self.core.resolve(ref)
            entry = self.core.state.get(gid)
            if isinstance(entry, IndexEntry) and not self.core.staged:
                # validates first
                self.core.driver.ctl.compute.instance(entry.cluster).collection(gid)
            await self.core.apply([SetReadPolicy(gid, policy)])
            if self.core.staged:  # set at the transaction's commit
                return
            if isinstance(entry, IndexEntry):
                self.core.driver.set_read_policy([(gid, policy)], entry.cluster)
            else:
                self.core.driver.set_storage_read_policy([(gid, policy)])

    def read_policy(self, ref: Ref) -> ReadPolicy:
        """The read policy of object ``ref``: the one set, else :data:`DEFAULT_READ_POLICY`."""
        return self.core.effective_policy(self.core.state, self.core.resolve(ref))

    def select_as_of(
        self,
        state: CatalogState,
        df: DataflowDescription,
        current: int,
        output: tuple[Antichain, Antichain] | None = None,
        *,
        cluster: str | None = None,
    ) -> Antichain:
        """The as_of of a new dataflow: the spec's as-of selection over its inputs' frontiers.

        A new materialized view's empty output does not constrain it; imported
        indexes hold it at or after their sinces.
        """
        storage = {s.id: self.core.driver.storage_frontiers(s.id) for s in df.source_imports}
        if output is not None and output[1] != output[0]:
            for sid in df.persist_sink_ids:
                storage[sid] = output
        policies = {ie.id: p for ie in df.index_exports if (p := state.read_policy(ie.id))}
        df = df.with_source_uppers({g: f[1] for g, f in storage.items()})
        as_of = select_as_ofs([df], storage, policies, current).dataflows[0].as_of
        assert as_of is not None
        for ii in df.index_imports:
            as_of = as_of.join(self.core.driver.frontiers(ii.id, cluster)[0])
        return as_of


def _drops(state: CatalogState, gids: Sequence[GlobalId], cascade: bool) -> list[Drop]:
    """The ``Drop`` ops that drop all of ``gids`` in one catalog change [HasDependents]: each
    after the others of ``gids`` that depend on it, so that they do not count as dependents;
    an object an earlier one's cascade took needs no op of its own."""
    left, ops, trial = list(gids), [], state
    while left:
        failure: HasDependents | None = None
        for g in list(left):
            if not _known(trial, g):  # taken by an earlier drop's cascade
                left.remove(g)
                continue
            try:
                trial = apply_ops(trial, [Drop(g, cascade)])
            except HasDependents as e:
                if failure is None:
                    failure = e
                continue
            ops.append(Drop(g, cascade))
            left.remove(g)
            failure = None
            break
        else:
            if failure is not None:
                raise failure
    return ops


def _known(state: CatalogState, gid: GlobalId) -> bool:
    return (
        state.view(gid) is not None
        or state.sink(gid) is not None
        or state.secret(gid) is not None
        or any(e.id == gid for e in state.entries())
    )
