"""Clusters: many compute instances, each with replicas and sizes of its own.

A cluster is a compute instance of the spec controller (Materialize's
``CREATE CLUSTER``): its replicas run the dataflows of the indexes and
materialized views placed on it, and answer the peeks and subscribes sent to it.
Every catalog starts with the cluster ``default``. A *managed* cluster has a
size and a replication factor, and the environment keeps its replicas
``r1``..``rN`` of that size: ``alter_cluster`` replaces them (a new size),
adds or drops them (a new factor); an *unmanaged* one has the replicas created
for it one by one (``create_cluster_replica``, Materialize's ``CREATE CLUSTER
REPLICA``, refused for a managed cluster as Materialize refuses it). A replica's
id is ``cluster.name`` (its name alone in ``default``): the orchestrator runs it
as a process of that name, restarts it if it dies, and stops it when it is
dropped, so each cluster's workload has processes, and memory limits, of its
own.

Everything is recorded in the catalog first (a restart restores clusters,
replicas, sizes and what runs where), then carried out: instances created or
dropped in the controller, managed replicas started (their records withdrawn if
they do not start) and added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.spec.ids import GlobalId

from ..catalog import (
    AlterCluster,
    AlterReplica,
    CatalogOp,
    ClusterEntry,
    CreateCluster,
    CreateReplica,
    DropCluster,
    DropReplica,
    ReplicaEntry,
)
from ..controller.driver import ReplicaInfo
from ..errors import InvalidCatalogOp, ManagedClusterChange
from ..options import Replicas, ReplicaSpec
from ..sizes import ReplicaSize, size_json
from ._core import Core
from ._ddl import Ddl
from ._replicas import ReplicasAndHydration, launch_of, not_staged

__all__ = ["ClusterReplicaStatus", "ClusterStatus", "Clusters"]


@dataclass(frozen=True, slots=True)
class ClusterReplicaStatus:
    """One replica of a cluster: its name and id, size (and what it allocates), whether the
    orchestrator manages it, and the controller's view of it (``status``, ``connected``)."""

    name: str
    id: str
    size: str | None
    allocation: dict[str, Any] | None
    managed: bool
    status: str
    connected: bool
    address: str | None


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """One cluster (:meth:`Clusters.clusters`): managed or not, size and replication factor
    (managed ones), its replicas, and the indexes and materialized views it maintains."""

    name: str
    id: str
    managed: bool
    size: str | None
    replication_factor: int | None
    replicas: tuple[ClusterReplicaStatus, ...]
    objects: tuple[GlobalId, ...]


class Clusters:
    """The clusters of one environment (see the module docstring)."""

    def __init__(self, core: Core, replicas: ReplicasAndHydration, ddl: Ddl) -> None:
        self.core = core
        self.replicas = replicas
        self.ddl = ddl

    # -- reading --------------------------------------------------------------------------------
    def clusters(self) -> list[ClusterStatus]:
        """Every cluster, by name, with its replicas' sizes and status."""
        state = self.core.state
        infos: dict[str, ReplicaInfo] = {}
        for instance in self.core.driver.ctl.compute.instance_ids():
            infos.update((i.replica, i) for i in self.core.driver.replicas(instance))
        sizes = self.core.options.sizes()
        out: list[ClusterStatus] = []
        for c in state.clusters:
            reps = []
            for r in state.cluster_replicas(c.name):
                info = infos.get(r.id)
                size = sizes.get(r.size) if r.size is not None else None
                reps.append(
                    ClusterReplicaStatus(
                        r.name,
                        r.id,
                        r.size,
                        None if size is None else size_json(size),
                        r.managed,
                        "unknown" if info is None else info.status,
                        info is not None and info.connected,
                        None if info is None else info.address,
                    )
                )
            out.append(
                ClusterStatus(
                    c.name,
                    c.id,
                    c.managed,
                    c.size,
                    c.replication_factor,
                    tuple(reps),
                    state.cluster_objects(c.name),
                )
            )
        return out

    # -- creating and dropping clusters ---------------------------------------------------------
    async def create_cluster(
        self, name: str, *, replicas: Replicas = 1, size: str | None = None
    ) -> None:
        """Create cluster ``name`` (see :meth:`Environment.create_cluster`)."""
        async with self.core.lock:
            not_staged(self.core, "create_cluster")
            ops = self._creation_ops(name, replicas, size)
            state = await self.core.apply(ops)
            entries = state.cluster_replicas(name)
            ctl = self.core.driver.ctl
            ctl.compute.create_instance(name)
            self.core.driver.apply()
            try:
                await self.replicas.start(entries)
            except Exception:
                ctl.compute.drop_instance(name)
                self.core.driver.apply()
                await self.replicas.withdraw(entries, [DropCluster(name)])
                raise
            self.replicas.connect(entries)

    def _creation_ops(self, name: str, replicas: Replicas, size: str | None) -> list[CatalogOp]:
        """The ops of a new cluster and its replicas [InvalidCatalogOp for a bad spec]."""
        options = self.core.options
        size = size if size is not None else options.default_replica_size
        if size is not None:
            self.replicas.size_of(size)
        if isinstance(replicas, bool) or not isinstance(replicas, int | Mapping | Sequence):
            raise InvalidCatalogOp(
                f"cluster {name!r}: replicas is a count (a managed cluster), a "
                f"{{name: 'host:port'}} mapping or ReplicaSpecs, got {replicas!r}"
            )
        if isinstance(replicas, int):
            if replicas < 0:
                raise InvalidCatalogOp(
                    f"cluster {name!r}: the replication factor is an int >= 0, got {replicas}"
                )
            self._managed_allowed(name, replicas)
            ops: list[CatalogOp] = [CreateCluster(name, True, size, replicas)]
            ops += [self._managed_replica(name, f"r{i}", size) for i in range(1, replicas + 1)]
            return ops
        specs = (
            [ReplicaSpec(n, a) for n, a in replicas.items()]
            if isinstance(replicas, Mapping)
            else list(replicas)
        )
        ops = [CreateCluster(name, False, None, None)]
        for spec in specs:
            if not isinstance(spec, ReplicaSpec):
                raise InvalidCatalogOp(f"cluster {name!r}: not a ReplicaSpec: {spec!r}")
            self.replicas.check_replica(spec.name, name, spec.address)
            rsize = spec.size if spec.size is not None else (size if spec.address is None else None)
            master = spec.spark_master
            if spec.address is None and master is None:
                master = self._master(rsize)
            ops.append(
                CreateReplica(
                    spec.name,
                    spec.address is None,
                    spec.address,
                    master,
                    spec.executor or options.executor,
                    name,
                    rsize,
                )
            )
        return ops

    def _managed_allowed(self, name: str, count: int) -> None:
        if count:
            self.replicas.check_replica("r1", name, None)

    def _master(self, size: str | None) -> str:
        if size is None:
            return self.core.options.spark_master
        return self.replicas.size_of(size).master()

    def _managed_replica(self, cluster: str, name: str, size: str | None) -> CreateReplica:
        return CreateReplica(
            name, True, None, self._master(size), self.core.options.executor, cluster, size
        )

    async def drop_cluster(self, name: str, *, cascade: bool = False) -> list[GlobalId]:
        """Drop cluster ``name``, its replicas and (``cascade``) what it maintains; the ids dropped."""
        async with self.core.lock:
            not_staged(self.core, "drop_cluster")
            state = self.core.state
            state.cluster(name)  # UnknownCatalogObject
            before = {e.id: e for e in (*state.entries(), *state.views, *state.sinks)}
            replicas = state.cluster_replicas(name)
            after = await self.core.apply([DropCluster(name, cascade)])
            left = {e.id for e in (*after.entries(), *after.views, *after.sinks)}
            gone = sorted(set(before) - left, reverse=True)
            self.ddl.uninstall(before, gone)
            await self.replicas.disconnect(replicas)
            ctl = self.core.driver.ctl
            if name in ctl.compute.instance_ids():
                ctl.compute.drop_instance(name)
                self.core.driver.apply()
            self.ddl.sources.drop_replication_slots(after)
            return gone

    # -- changing clusters ----------------------------------------------------------------------
    async def alter_cluster(
        self, name: str, *, size: str | None = None, replication_factor: int | None = None
    ) -> None:
        """Resize managed cluster ``name`` or change its replication factor (its replicas are
        replaced with ones of the new size, added or dropped) [InvalidCatalogOp if unmanaged]."""
        async with self.core.lock:
            not_staged(self.core, "alter_cluster")
            state = self.core.state
            c = state.cluster(name)
            if not c.managed:
                raise InvalidCatalogOp(
                    f"cluster {name!r} is unmanaged: it has no size or replication factor "
                    "(create and drop its replicas one by one)"
                )
            new_size = size if size is not None else c.size
            if new_size is not None:
                self.replicas.size_of(new_size)
            factor = replication_factor if replication_factor is not None else c.replication_factor
            if type(factor) is not int or factor < 0:
                raise InvalidCatalogOp(
                    f"cluster {name!r}: the replication factor is an int >= 0, got {factor!r}"
                )
            self._managed_allowed(name, factor)
            old = {r.name: r for r in state.cluster_replicas(name)}
            wanted = [f"r{i}" for i in range(1, factor + 1)]
            ops: list[CatalogOp] = [AlterCluster(name, new_size, factor)]
            replaced: list[ReplicaEntry] = []
            for rname in wanted:
                r = old.get(rname)
                spec = self._managed_replica(name, rname, new_size)
                if r is None:
                    ops.append(spec)
                elif r.size != new_size or r.spark_master != spec.spark_master:
                    ops.append(AlterReplica(*_fields(spec)))
                    replaced.append(r)
            dropped = [r for n, r in sorted(old.items()) if n not in wanted]
            ops += [DropReplica(r.name, name) for r in dropped]
            after = await self.core.apply(ops)
            await self.replicas.disconnect([*replaced, *dropped])
            started = [after.replica(n, name) for n in wanted if n not in old or old[n] in replaced]
            await self.replicas.start(started)
            self.replicas.connect(started)

    async def create_cluster_replica(
        self,
        cluster: str,
        name: str,
        *,
        size: str | None = None,
        address: str | None = None,
        executor: str | None = None,
        spark_master: str | None = None,
    ) -> None:
        """Add replica ``name`` to unmanaged ``cluster`` [ManagedClusterChange if managed]."""
        async with self.core.lock:
            not_staged(self.core, "create_cluster_replica")
            c = self.core.state.cluster(cluster)
            _unmanaged(c)
            size = size if size is not None else self.core.options.default_replica_size
            if size is not None:
                self.replicas.size_of(size)
            await self.replicas.add_replica_locked(
                name, address, executor, spark_master, cluster, size
            )

    async def drop_cluster_replica(self, cluster: str, name: str) -> None:
        """Drop replica ``name`` of unmanaged ``cluster`` [ManagedClusterChange if managed]."""
        async with self.core.lock:
            not_staged(self.core, "drop_cluster_replica")
            state = self.core.state
            _unmanaged(state.cluster(cluster))
            entry = state.replica(name, cluster)
            await self.core.apply([DropReplica(name, cluster)])
            await self.replicas.disconnect([entry])

    def size(self, name: str) -> ReplicaSize:
        """What size ``name`` allocates [InvalidCatalogOp if unknown]."""
        return self.replicas.size_of(name)

    def launch(self, entry: ReplicaEntry) -> Any:
        """How the orchestrator starts ``entry`` (see :func:`._replicas.launch_of`)."""
        base = tuple(getattr(self.core.orchestrator, "extra_args", ()))
        return launch_of(entry, self.core.options, base)


def _unmanaged(c: ClusterEntry) -> None:
    if c.managed:
        raise ManagedClusterChange(c.name)


def _fields(op: CreateReplica) -> tuple[Any, ...]:
    return (
        op.name,
        op.managed,
        op.address,
        op.spark_master,
        op.executor,
        op.cluster,
        op.size,
    )
