"""Read-only and promotion: following the writer's catalog, then taking over from it.

An environment opened with ``read_only=True`` writes nothing: every
``period_ms`` it loads the writer's catalog and brings its controller up to it
(:meth:`Promotion.catch_up`: drops, creations, changed read policies), so its
replicas hydrate what the writer runs. :meth:`Promotion.promote` fences the
writer (a new oracle epoch, a catalog write), switches the controller to
read-write and takes over the writer's read holds. Closed without promotion, it
releases the holds of its own reader.
"""

from __future__ import annotations

import anyio

from tidegate.spec.errors import InvalidUppers

from ..catalog import (
    DEFAULT_CLUSTER,
    Catalog,
    CatalogState,
    IndexEntry,
    MaterializedViewEntry,
    SourceEntry,
    SystemCollectionEntry,
    TableEntry,
)
from ..controller.errors import RuntimeControllerError
from ..controller.storage_io import CONTROLLER_READER
from ..controller.timestamps import default_oracle
from ..errors import CatalogConflict
from ._core import Core, log
from ._ddl import Ddl
from ._replicas import ReplicasAndHydration, replica_ops, storage_replica_ops
from ._sources import SourcesAndSinks, storage_wanted

__all__ = ["Promotion"]


class Promotion:
    """A read-only environment following the writer, and its promotion (see the module docstring)."""

    def __init__(
        self, core: Core, ddl: Ddl, sources: SourcesAndSinks, replicas: ReplicasAndHydration
    ) -> None:
        self.core = core
        self.ddl = ddl
        self.sources = sources
        self.replicas = replicas

    async def promote(self) -> None:
        """Take over writing from the environment that writes this data (a read-only one only)."""
        async with self.core.lock:
            if not self.core.read_only:
                raise RuntimeControllerError("promote: this environment is not read-only")
            retry, options = self.core.io.retrying, self.core.options
            oracle = await retry(
                "timestamp oracle",
                default_oracle,
                self.core.store.consensus,
                self.core.platform.clock_ms,
                self.core.platform.new_id(),
            )
            before = self.core.state
            # The new catalog is swapped in once the controller has caught up with it, so
            # that no name resolves to an object the controller does not have yet.
            catalog = Catalog(self.core.store.consensus, key=self.core.catalog.key)
            while True:  # the old writer may commit DDL up to our catalog write: reload, retry
                latest = await retry("catalog read", catalog.load)
                ops = replica_ops(
                    latest,
                    options.replicas,
                    executor=options.executor,
                    spark_master=options.spark_master,
                    sizes=options.sizes(),
                )
                ops += storage_replica_ops(latest, options.storage_replica)
                try:
                    if ops:
                        await retry("catalog write", catalog.apply, ops)
                    else:
                        await retry("catalog fence", catalog.touch)
                    break
                except CatalogConflict:
                    continue
            self.core.oracle = oracle
            self.core.driver.oracle = oracle
            self.core.driver.fence_check = self.core.fence_check
            self.core.driver.ctl.set_epoch(oracle.epoch)  # replicas refuse the old writer now
            self.core.driver.apply()
            await self.catch_up(before, catalog.state)
            self.core.catalog = catalog
            await self.core.driver.poll_uppers()  # the old writer's last uppers
            self.core.driver.read_write()
            self.core.read_only = False
            for _ in range(100):  # each failure means the old writer wrote first: it is adopted
                try:
                    await self.core.driver.tick()
                    break
                except InvalidUppers:
                    continue
            ids = [c.id for c in self.core.driver.ctl.storage.collections() if not c.is_dropped]
            await self.core.io.take_over(ids, CONTROLLER_READER, oracle.epoch)
            if storage_wanted(self.core.state):  # sources and sinks run from now on
                await self.sources.connect_storage_replica(self.core.state)
            self.sources.drop_replication_slots(self.core.state)  # those the writer left

    async def release_read_only_holds(self) -> None:
        """At close, unless promoted: release the read-only reader's holds on every shard.

        Not shielded: a close that is cancelled (the process is going away) skips it.
        """
        if self.core.read_only:
            ids = [c.id for c in self.core.driver.ctl.storage.collections()]
            await self.core.io.release_holds(ids)

    async def catch_up(self, before: CatalogState, after: CatalogState) -> None:
        """Bring the controller from catalog ``before`` to ``after`` (another environment's DDL).

        Dropped objects are dropped, new ones created (by id: dependencies
        first), changed read policies set. Clusters created meanwhile are created
        here, with their replicas (run by this environment's orchestrator), and
        dropped ones dropped; the ``default`` cluster's replicas are this
        environment's own.
        """
        old = {e.id: e for e in (*before.entries(), *before.sinks)}
        new = {e.id for e in (*after.entries(), *after.sinks)}
        gone = sorted(set(old) - new, reverse=True)
        if gone:
            self.ddl.uninstall(old, gone)
        await self._catch_up_clusters(before, after)
        for e in after.entries():
            if e.id in old:
                if after.read_policy(e.id) != before.read_policy(e.id):
                    policy = [(e.id, self.core.effective_policy(after, e.id))]
                    if isinstance(e, IndexEntry):
                        self.core.driver.set_read_policy(policy, e.cluster)
                    else:
                        self.core.driver.set_storage_read_policy(policy)
            elif isinstance(e, TableEntry):
                await self.ddl.install_table(after, e.id)
            elif isinstance(e, MaterializedViewEntry):
                await self.ddl.install_materialized_view(after, e.id)
            elif isinstance(e, IndexEntry):
                self.ddl.install_index(after, e.id)
            elif isinstance(e, SystemCollectionEntry):
                await self.sources.install_system_collections(after, [e.id])
            elif isinstance(e, SourceEntry):
                await self.sources.install_source(after, e.id)  # its progress collection too
        for sink in after.sinks:
            if sink.id not in old:
                self.sources.install_sink(after, sink.id)

    async def _catch_up_clusters(self, before: CatalogState, after: CatalogState) -> None:
        """Instances and replicas of the clusters other than ``default``, as ``after`` has them."""
        ctl = self.core.driver.ctl
        for c in after.clusters:
            if c.name not in ctl.compute.instance_ids():
                ctl.compute.create_instance(c.name)
                self.core.driver.apply()
        old = {r.id: r for r in before.replicas if r.cluster != DEFAULT_CLUSTER}
        new = {r.id: r for r in after.replicas if r.cluster != DEFAULT_CLUSTER}
        gone = [r for rid, r in sorted(old.items()) if new.get(rid) != r]
        await self.replicas.disconnect([r for r in gone if r.cluster in ctl.compute.instance_ids()])
        fresh = [r for rid, r in sorted(new.items()) if old.get(rid) != r]
        if fresh and (self.core.orchestrator is not None or all(not r.managed for r in fresh)):
            await self.replicas.start(fresh)
            self.replicas.connect(fresh)
        for name in ctl.compute.instance_ids():
            if not after.has_cluster(name):
                ctl.compute.drop_instance(name)
                self.core.driver.apply()

    async def follow_catalog(self, period_ms: int) -> None:
        """While read-only: pick up the writer's DDL every ``period_ms`` (so it hydrates too)."""
        while self.core.read_only:
            await anyio.sleep(period_ms / 1000)
            async with self.core.lock:
                if not self.core.read_only:
                    return
                before, catalog = (
                    self.core.state,
                    Catalog(self.core.store.consensus, key=self.core.catalog.key),
                )
                try:
                    after = await self.core.io.retrying("catalog read", catalog.load)
                    if after != before:
                        await self.catch_up(before, after)
                        self.core.catalog = catalog  # once the controller has it all
                except Exception as e:  # a background step never takes the environment down
                    log.warning("following the catalog failed: %r", e)
