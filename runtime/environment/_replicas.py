"""Replicas and hydration: adding and dropping replicas, their status, what they hydrated.

A replica is recorded in the catalog first; a managed one is then started by
the orchestrator (its record withdrawn if it does not start), an unmanaged one
reached at its address; the controller then hydrates it with everything the
instance runs. :func:`replica_ops` and :func:`storage_replica_ops` turn the
``replicas`` and ``storage_replica`` options into catalog ops (at open and at
promotion); :func:`start_all` starts managed replicas concurrently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from tidegate.spec.errors import TidegateError

from ..catalog import (
    DEFAULT_CLUSTER,
    AlterReplica,
    CatalogOp,
    CatalogState,
    CreateCluster,
    CreateReplica,
    DropReplica,
    IndexEntry,
    MaterializedViewEntry,
    ReplicaEntry,
    SetStorageReplica,
)
from ..controller.driver import ReplicaInfo
from ..controller.errors import RuntimeControllerError
from ..controller.streams import EventStream
from ..hydration import HydrationInfo, catalog_hydration
from ..options import EnvironmentOptions, Replicas, ReplicaSpec
from ..sizes import ReplicaSize
from ._core import Core, Ref

__all__ = [
    "ReplicaLaunch",
    "ReplicasAndHydration",
    "ensure_orchestrator",
    "launch_of",
    "memory_limit_args",
    "metrics_host",
    "not_staged",
    "replica_ops",
    "start_all",
    "storage_replica_ops",
]


def _replica_specs(replicas: Replicas) -> list[ReplicaSpec]:
    if isinstance(replicas, int):
        return [ReplicaSpec(f"r{i}") for i in range(1, replicas + 1)]
    if isinstance(replicas, Mapping):
        return [ReplicaSpec(name, address) for name, address in replicas.items()]
    return list(replicas)


def replica_ops(
    state: CatalogState,
    replicas: Replicas | None,
    *,
    executor: str = "spark",
    spark_master: str = "local[1]",
    sizes: Mapping[str, ReplicaSize] | None = None,
) -> list[CatalogOp]:
    """The catalog ops that make the ``default`` cluster's replicas those ``replicas`` asks for.

    ``None`` keeps the recorded replicas (creating managed ``r1`` if the default
    cluster has none; nothing if it was dropped); otherwise unknown names are
    created, known ones altered to the given spec (a no-op when equal) and the
    others dropped (a dropped default cluster is created again). Managed
    replicas without their own ``executor``/``spark_master`` take the given
    defaults; one with a ``size`` (a name of ``sizes``) runs on its Spark master.
    Other clusters' replicas are theirs to manage (``create_cluster``...).
    """
    mine = state.cluster_replicas(DEFAULT_CLUSTER)
    ops: list[CatalogOp] = []
    if replicas is None:
        if mine or not state.has_cluster(DEFAULT_CLUSTER):
            return []
        specs = [ReplicaSpec("r1")]
    else:
        specs = _replica_specs(replicas)
        if not state.has_cluster(DEFAULT_CLUSTER):
            ops.append(CreateCluster(DEFAULT_CLUSTER, managed=False, replication_factor=None))
    known = {r.name for r in mine}
    wanted = {s.name for s in specs}
    for s in specs:
        managed = s.address is None
        size = (sizes or {}).get(s.size) if s.size is not None else None
        master = s.spark_master or (
            (size.master() if size is not None else spark_master) if managed else None
        )
        op = AlterReplica if s.name in known else CreateReplica
        ops.append(
            op(s.name, managed, s.address, master, s.executor or executor, DEFAULT_CLUSTER, s.size)
        )
    ops.extend(DropReplica(r.name) for r in mine if r.name not in wanted)
    return ops


@dataclass(frozen=True, slots=True)
class ReplicaLaunch:
    """How the orchestrator starts one managed replica: its executor, Spark master and its
    process arguments (``None``: the orchestrator's own, as for a replica without a size)."""

    executor: str
    spark_master: str
    extra_args: tuple[str, ...] | None


def launch_of(
    entry: ReplicaEntry, options: EnvironmentOptions, base: Sequence[str] = ()
) -> ReplicaLaunch:
    """How to start managed replica ``entry``: the environment's settings (``base``: the
    orchestrator's arguments), with its size's arguments after them, so a size's memory limit
    wins and a size without one keeps the environment's."""
    size = options.sizes().get(entry.size) if entry.size is not None else None
    master = entry.spark_master or options.spark_master
    if size is None:
        return ReplicaLaunch(entry.executor, master, None)
    return ReplicaLaunch(entry.executor, master, (*base, *size.args()))


def storage_replica_ops(state: CatalogState, address: str | None) -> list[CatalogOp]:
    """The catalog op that records the ``storage_replica`` option: an unmanaged storage replica
    at ``address`` (``None``: keep what is recorded)."""
    if address is None:
        return []
    wanted = SetStorageReplica(managed=False, address=address)
    recorded = state.storage_replica
    if recorded is not None and not recorded.managed and recorded.address == address:
        return []
    return [wanted]


async def start_all(
    orchestrator: Any, replicas: Sequence[ReplicaEntry], options: EnvironmentOptions
) -> None:
    """Start managed ``replicas`` concurrently (each as :func:`launch_of` says); the first
    failure (by id) is raised, typed.

    Every start is awaited to its end (a failing one does not cancel the
    others); a failure's :class:`ReplicaStartFailed` is raised as it is, with
    the other failures noted on it.
    """
    failures: dict[str, BaseException] = {}

    base = tuple(getattr(orchestrator, "extra_args", ()))

    async def start(r: ReplicaEntry) -> None:
        launch = launch_of(r, options, base)
        try:
            await orchestrator.ensure(
                r.id,
                executor=launch.executor,
                spark_master=launch.spark_master,
                extra_args=launch.extra_args,
            )
        except Exception as e:
            failures[r.id] = e

    async with anyio.create_task_group() as tg:
        for r in replicas:
            tg.start_soon(start, r)
    if failures:
        first, *rest = sorted(failures)
        error = failures[first]
        for name in rest:
            error.add_note(f"replica {name!r} failed too: {failures[name]}")
        raise error


def memory_limit_args(limit: int | None) -> tuple[str, ...]:
    """A managed replica's arguments for ``replica_memory_limit``."""
    return () if limit is None else ("--memory-limit", str(limit))


def metrics_host(replica_metrics: bool) -> str | None:
    """The orchestrator's ``metrics_host`` for ``replica_metrics``: loopback, like replicas."""
    return "127.0.0.1" if replica_metrics else None


async def ensure_orchestrator(core: Core) -> Any:
    """The orchestrator of managed replicas, started now if the environment has none yet.

    An environment opened without managed replicas starts its orchestrator with the
    first one it needs (a managed cluster's replica, or the storage replica), in the data
    directory, with the options it would have had at opening. Its replicas take the
    environment's token (:attr:`Core.token`, decided at opening as for an orchestrator
    built then): they are authenticated whoever builds the orchestrator.
    """
    if core.orchestrator is not None:
        return core.orchestrator
    from ..orchestrator import Orchestrator

    assert core.data_dir is not None  # checked before a managed replica was recorded
    options = core.options
    if core.opened_read_only and core.replicas_dir is None:  # not the writer's directory
        core.replicas_dir = core.data_dir / f"replicas-{core.platform.new_id()[:12]}"
    orchestrator = Orchestrator(
        core.data_dir,
        executor=options.executor,
        spark_master=options.spark_master,
        token=core.token,
        tls=options.replica_tls,
        extra_args=memory_limit_args(options.replica_memory_limit),
        spark_conf=options.spark_conf,
        spark_ui=options.spark_ui,
        metrics_host=metrics_host(options.replica_metrics),
        replicas_dir=core.replicas_dir,
    )
    await orchestrator.start(core.driver._task_group())
    core.later.append(orchestrator)
    core.orchestrator = orchestrator
    return orchestrator


class ReplicasAndHydration:
    """The replicas of one environment and their hydration (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    async def wait_connected(
        self,
        replicas: Iterable[str] | None = None,
        *,
        cluster: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Wait until ``replicas`` (ids; default: every replica of ``cluster``, or of every
        cluster) are connected [ReplicasNotConnected on timeout]."""
        driver = self.core.driver
        clusters = [cluster] if cluster is not None else driver.ctl.compute.instance_ids()
        if replicas is None:
            for c in clusters:
                await driver.wait_connected(None, instance=c, timeout_s=timeout_s)
            return
        wanted = list(replicas)
        by_cluster: dict[str, list[str]] = {}
        for rid in wanted:
            owner = next(
                (c for c in clusters if rid in driver.ctl.compute.instance(c).replica_ids()),
                cluster if cluster is not None else self.core.driver.instance,
            )
            by_cluster.setdefault(owner, []).append(rid)
        for c, ids in by_cluster.items():
            await driver.wait_connected(ids, instance=c, timeout_s=timeout_s)

    def replicas(self, cluster: str | None = None) -> list[ReplicaInfo]:
        """Every replica (of ``cluster``, or of every cluster) with its status and connection."""
        driver = self.core.driver
        clusters = [cluster] if cluster is not None else driver.ctl.compute.instance_ids()
        return [info for c in clusters for info in driver.replicas(c)]

    def hydrated(self, ref: Ref | None = None, *, replicas: Iterable[str] | None = None) -> bool:
        """Whether ``ref`` (or, without it, every index and view of every cluster) is hydrated."""
        ctl = self.core.driver.ctl
        targets = None if replicas is None else list(replicas)
        if ref is None:
            checked = False
            for c in ctl.compute.instance_ids():
                present = {r.id for r in ctl.compute.instance(c).replicas()}
                mine = None if targets is None else [t for t in targets if t in present]
                if mine == []:
                    continue
                checked = True
                if not ctl.compute.collections_hydrated_on_replicas(c, mine, ()):
                    return False
            if targets is not None and not checked:  # none of them exists: the spec says so
                return ctl.compute.collections_hydrated_on_replicas(
                    self.core.driver.instance, targets, ()
                )
            return True
        gid = self.core.resolve(ref)
        if not isinstance(self.core.state.get(gid), IndexEntry | MaterializedViewEntry):
            return True  # tables are always readable
        cluster = self.core.state.placement(gid) or DEFAULT_CLUSTER
        if targets is None:
            return ctl.compute.collection_hydrated(cluster, gid)
        others = [c.id for c in ctl.compute.instance(cluster).collections() if c.id != gid]
        return ctl.compute.collections_hydrated_on_replicas(cluster, targets, others)

    def hydration(self, ref: Ref | None = None) -> list[HydrationInfo]:
        """Per index and materialized view (or only ``ref``) and replica: whether it is hydrated
        and how long hydration took in seconds (from the dataflow's creation on the replica to
        its frontier first passing the as_of; a reconnect's rehydration starts the clock again).
        See :mod:`tidegate.runtime.hydration`."""
        return catalog_hydration(self.core, None if ref is None else self.core.resolve(ref))

    async def start(self, entries: Sequence[ReplicaEntry]) -> None:
        """Start managed ``entries`` (recorded already) [ReplicaStartFailed, the first one]."""
        managed = [e for e in entries if e.managed]
        if managed:
            await start_all(await ensure_orchestrator(self.core), managed, self.core.options)

    async def withdraw(self, entries: Sequence[ReplicaEntry], ops: Sequence[CatalogOp]) -> None:
        """Undo recording ``entries`` after their start failed: stop what runs, apply ``ops``."""
        with anyio.CancelScope(shield=True):
            for e in entries:
                if e.managed and self.core.orchestrator is not None:
                    with contextlib.suppress(TidegateError):  # it never ran
                        await self.core.orchestrator.stop(e.id)  # no retrying behind the error
            await self.core.apply(ops)

    def connect(self, entries: Sequence[ReplicaEntry]) -> None:
        """Add ``entries`` (running, or reachable at their addresses) to their clusters' instances."""
        for e in entries:
            if not e.managed and e.address is not None:
                self.core.addresses[e.id] = e.address
            self.core.driver.ctl.compute.add_replica(e.cluster, e.id)
        self.core.driver.apply()

    async def disconnect(self, entries: Sequence[ReplicaEntry]) -> None:
        """Drop ``entries`` (no longer recorded) from their instances; stop the managed ones."""
        ctl = self.core.driver.ctl
        for e in entries:
            if e.id in ctl.compute.instance(e.cluster).replica_ids():
                ctl.compute.drop_replica(e.cluster, e.id)
        self.core.driver.apply()
        for e in entries:
            self.core.addresses.pop(e.id, None)
            if e.managed and self.core.orchestrator is not None:
                with contextlib.suppress(TidegateError):
                    await self.core.orchestrator.stop(e.id)

    def check_replica(self, name: str, cluster: str, address: str | None) -> None:
        """Before anything is recorded: a managed replica needs an orchestrator (one this
        environment runs, or a data directory to start one in) and a name the orchestrator can
        run under."""
        if address is None:
            if self.core.orchestrator is None and self.core.data_dir is None:
                raise RuntimeControllerError(
                    f"replica {name!r} needs an address: this environment has no data "
                    "directory for managed replicas' processes"
                )
            from ..catalog import replica_id
            from ..orchestrator import check_replica_name

            check_replica_name(replica_id(cluster, name))

    async def add_replica(
        self,
        name: str,
        address: str | None = None,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
        size: str | None = None,
    ) -> None:
        """Add replica ``name`` to ``cluster`` while running (``CREATE CLUSTER REPLICA``)."""
        async with self.core.lock:
            not_staged(self.core, "add_replica")
            await self.add_replica_locked(name, address, executor, spark_master, cluster, size)

    async def add_replica_locked(
        self,
        name: str,
        address: str | None,
        executor: str | None,
        spark_master: str | None,
        cluster: str,
        size: str | None,
    ) -> ReplicaEntry:
        self.check_replica(name, cluster, address)
        managed = address is None
        master = spark_master
        if managed and master is None:
            master = (
                self.size_of(size).master() if size is not None else self.core.options.spark_master
            )
        op = CreateReplica(
            name,
            managed,
            address,
            master,
            executor or self.core.options.executor,
            cluster,
            size,
        )
        state = await self.core.apply([op])
        entry = state.replica(name, cluster)
        try:
            await self.start([entry])
        except Exception:
            await self.withdraw([entry], [DropReplica(name, cluster)])
            raise
        self.connect([entry])
        return entry

    def size_of(self, size: str) -> ReplicaSize:
        """The allocation of size ``size`` [InvalidCatalogOp if the environment has none]."""
        found = self.core.options.sizes().get(size)
        if found is None:
            from ..errors import InvalidCatalogOp

            known = ", ".join(sorted(self.core.options.sizes()))
            raise InvalidCatalogOp(f"unknown replica size {size!r} (sizes: {known})")
        return found

    async def drop_replica(self, name: str, cluster: str = DEFAULT_CLUSTER) -> None:
        """Drop replica ``name`` of ``cluster`` (``DROP CLUSTER REPLICA``); a managed one is stopped."""
        async with self.core.lock:
            not_staged(self.core, "drop_replica")
            entry = self.core.state.replica(name, cluster)
            await self.core.apply([DropReplica(name, cluster)])
            await self.disconnect([entry])

    def events(self, buffer: int | None = None) -> EventStream[Any]:
        """Replica status events from now on, as an async iterator."""
        return self.core.driver.events(buffer)


def not_staged(core: Core, what: str) -> None:
    """[RuntimeControllerError] in a DDL transaction: a replica starts or stops at once, and a
    cluster's replicas or a sink's cut-over with it, so it cannot wait for the transaction's
    commit (nor be undone by its failure); as Materialize refuses cluster DDL in a block."""
    if core.staged:
        raise RuntimeControllerError(f"{what} cannot run inside a DDL transaction")
