"""The orchestrator of managed replicas in a simulation: the world starts their processes.

A managed cluster's replicas (``CREATE CLUSTER c (SIZE = ..., REPLICATION FACTOR
= n)``, ``ALTER CLUSTER c SET (REPLICATION FACTOR = m)``) are processes the
environment's orchestrator starts and stops
(:class:`tidegate.runtime.orchestrator.Orchestrator`, operating-system processes
in production). In a simulation they are the world's replica processes: the
environment asks this stand-in (passed as ``EnvironmentOptions.orchestrator``)
to ensure replica ``c.rN`` runs, and the world starts a simulated replica
process for cluster ``c`` at that address, recorded in its own record of which
process serves which cluster; stopping one stops the process. The checkers judge
the world's record, never this class's nor the environment's. A size's
allocation (Spark cores, memory) means nothing to a simulated replica.
"""

from __future__ import annotations

from typing import Protocol

import anyio.lowlevel

__all__ = ["SimOrchestrator"]


class _World(Protocol):
    def start_cluster_replica(self, cluster: str, name: str) -> str: ...

    def stop_cluster_replica(self, process: str) -> None: ...


class SimOrchestrator:
    """Starts and stops managed replicas as the world's processes (see the module docstring)."""

    token: str | None = None
    """The simulated replicas take no token (as the scenario's unmanaged ones)."""
    extra_args: tuple[str, ...] = ()

    def __init__(self, world: _World) -> None:
        self._world = world

    async def ensure(
        self,
        name: str,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> str:
        """Make sure managed replica ``name`` (``cluster.replica``) runs; its address."""
        await anyio.lowlevel.checkpoint()
        cluster, _, replica = name.rpartition(".")
        if not cluster:
            raise ValueError(f"a simulated managed replica is a cluster's: {name!r}")
        return self._world.start_cluster_replica(cluster, replica)

    def address(self, name: str) -> str:
        """Where replica ``name`` listens: its process's name."""
        return name

    async def stop(self, name: str) -> None:
        """Stop replica ``name``'s process for good."""
        await anyio.lowlevel.checkpoint()
        self._world.stop_cluster_replica(name)
