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
from typing import Any

import anyio

from tidegate.spec.errors import TidegateError

from ..catalog import (
    AlterReplica,
    CatalogOp,
    CatalogState,
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
from ..options import Replicas, ReplicaSpec
from ._core import INSTANCE, Core, Ref

__all__ = [
    "ReplicasAndHydration",
    "memory_limit_args",
    "metrics_host",
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
) -> list[CatalogOp]:
    """The catalog ops that make ``state``'s replicas those ``replicas`` asks for.

    ``None`` keeps the recorded replicas (creating managed ``r1`` if there are
    none); otherwise unknown names are created, known ones altered to the given
    spec (a no-op when equal) and the others dropped. Managed replicas without
    their own ``executor``/``spark_master`` take the given defaults.
    """
    if replicas is None:
        if state.replicas:
            return []
        specs = [ReplicaSpec("r1")]
    else:
        specs = _replica_specs(replicas)
    known = {r.name for r in state.replicas}
    wanted = {s.name for s in specs}
    ops: list[CatalogOp] = []
    for s in specs:
        managed = s.address is None
        master = s.spark_master or (spark_master if managed else None)
        op = AlterReplica if s.name in known else CreateReplica
        ops.append(op(s.name, managed, s.address, master, s.executor or executor))
    ops.extend(DropReplica(r.name) for r in state.replicas if r.name not in wanted)
    return ops


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


async def start_all(orchestrator: Any, replicas: Sequence[ReplicaEntry]) -> None:
    """Start managed ``replicas`` concurrently; the first failure (by name) is raised, typed.

    Every start is awaited to its end (a failing one does not cancel the
    others); a failure's :class:`ReplicaStartFailed` is raised as it is, with
    the other failures noted on it.
    """
    failures: dict[str, BaseException] = {}

    async def start(r: ReplicaEntry) -> None:
        try:
            await orchestrator.ensure(r.name, executor=r.executor, spark_master=r.spark_master)
        except Exception as e:
            failures[r.name] = e

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


class ReplicasAndHydration:
    """The replicas of one environment and their hydration (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    async def wait_connected(
        self, replicas: Iterable[str] | None = None, *, timeout_s: float | None = None
    ) -> None:
        """Wait until ``replicas`` (default: all) are connected [ReplicasNotConnected on timeout]."""
        await self.core.driver.wait_connected(replicas, timeout_s=timeout_s)

    def replicas(self) -> list[ReplicaInfo]:
        """Every replica with its status and connection."""
        return self.core.driver.replicas()

    def hydrated(self, ref: Ref | None = None, *, replicas: Iterable[str] | None = None) -> bool:
        """Whether ``ref`` (or, without it, every index and view) is hydrated."""
        ctl = self.core.driver.ctl
        if ref is None:
            return ctl.compute.collections_hydrated_on_replicas(INSTANCE, replicas, ())
        gid = self.core.resolve(ref)
        if not isinstance(self.core.state.get(gid), IndexEntry | MaterializedViewEntry):
            return True  # tables are always readable
        if replicas is None:
            return ctl.compute.collection_hydrated(INSTANCE, gid)
        others = [c.id for c in ctl.compute.instance(INSTANCE).collections() if c.id != gid]
        return ctl.compute.collections_hydrated_on_replicas(INSTANCE, replicas, others)

    def hydration(self, ref: Ref | None = None) -> list[HydrationInfo]:
        """Per index and materialized view (or only ``ref``) and replica: whether it is hydrated
        and how long hydration took in seconds (from the dataflow's creation on the replica to
        its frontier first passing the as_of; a reconnect's rehydration starts the clock again).
        See :mod:`tidegate.runtime.hydration`."""
        return catalog_hydration(self.core, None if ref is None else self.core.resolve(ref))

    async def add_replica(
        self,
        name: str,
        address: str | None = None,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
    ) -> None:
        """Add replica ``name`` while running (Materialize's ``CREATE CLUSTER REPLICA``)."""
        async with self.core.lock:
            _not_staged(self.core, "add_replica")
            managed = address is None
            if managed and self.core.orchestrator is None:
                raise RuntimeControllerError(
                    f"replica {name!r} needs an address: this environment manages no replicas"
                )
            if managed:
                from ..orchestrator import check_replica_name

                check_replica_name(name)  # before anything is recorded
            op = CreateReplica(
                name,
                managed,
                address,
                spark_master or (self.core.options.spark_master if managed else None),
                executor or self.core.options.executor,
            )
            state = await self.core.apply([op])
            entry = state.replica(name)
            if managed:
                try:
                    await start_all(self.core.orchestrator, [entry])
                except Exception:
                    with anyio.CancelScope(shield=True):
                        with contextlib.suppress(TidegateError):  # it never ran
                            await self.core.orchestrator.stop(name)  # no retrying behind the error
                        await self.core.apply([DropReplica(name)])
                    raise
            elif address is not None:
                self.core.addresses[name] = address
            self.core.driver.ctl.compute.add_replica(INSTANCE, name)
            self.core.driver.apply()

    async def drop_replica(self, name: str) -> None:
        """Drop replica ``name`` (Materialize's ``DROP CLUSTER REPLICA``); a managed one is stopped."""
        async with self.core.lock:
            _not_staged(self.core, "drop_replica")
            entry = self.core.state.replica(name)
            await self.core.apply([DropReplica(name)])
            self.core.driver.ctl.compute.drop_replica(INSTANCE, name)
            self.core.driver.apply()
            self.core.addresses.pop(name, None)
            if entry.managed and self.core.orchestrator is not None:
                await self.core.orchestrator.stop(name)

    def events(self, buffer: int | None = None) -> EventStream[Any]:
        """Replica status events from now on, as an async iterator."""
        return self.core.driver.events(buffer)


def _not_staged(core: Core, what: str) -> None:
    """[RuntimeControllerError] in a DDL transaction: a replica starts or stops at once, so
    it cannot wait for the transaction's commit (nor be undone by its failure)."""
    if core.staged:
        raise RuntimeControllerError(f"{what} cannot run inside a DDL transaction")
