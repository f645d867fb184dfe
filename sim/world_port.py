"""What the world's parts may use of the :class:`~tidegate.sim.world.World` that holds them.

The world builds its parts (the controller process, the clients, the checkers)
and each part calls back into the world: its clock, disk, faults, trace and
the other parts. The parts are typed against :class:`WorldPort` (and a
narrower protocol of their own for the other parts they use), never against
``World``, so that ``world`` imports the parts and no part imports ``world``.
``World`` satisfies every one of these protocols structurally; mypy checks that
where the world passes itself to its parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import trio

from tidegate.spec.ids import GlobalId

from .choices import ChoiceSource
from .clocks import Clocks
from .history import ClientHistory
from .kernel import Kernel
from .knobs import Knobs
from .replica import ReplicaProcess
from .scenario import Scenario
from .storage import SimDisk, StorageFaults
from .storage_replica import StorageReplicaProcess
from .transport import SimReplicaEndpoint
from .upstream import Upstreams

__all__ = ["Streams", "WorldPort"]


@dataclass(frozen=True)
class Streams:
    """The run's independent streams of choices (see :func:`tidegate.sim.choices.stream`)."""

    workload: ChoiceSource
    times: ChoiceSource
    latencies: ChoiceSource
    network: ChoiceSource
    storage: ChoiceSource
    upstream: ChoiceSource | None = None
    """What the simulated upstreams write, and when (scenarios with sources)."""
    upstream_io: ChoiceSource | None = None
    """How upstream readers split batches, and which sink commits fail."""
    knobs: ChoiceSource | None = None
    """The production knobs the run sets (see :mod:`.knobs`; ``None``: the defaults)."""
    faults: ChoiceSource | None = None
    """What faults choose when they strike (the object bit rot flips, the clients a zombie
    controller keeps); ``None``: the workload's stream."""
    sql_io: ChoiceSource | None = None
    """How the SQL clients' wire connections deliver their bytes (see :mod:`.pg_client`)."""
    sql_temporal: ChoiceSource | None = None
    """Whether and how the SQL clients' queries filter by ``mz_now()`` (apart from the
    workload's stream, so adding temporal filters moved no other draw)."""


class WorldPort(Protocol):
    """The world's own services, as its parts see them (see the module docstring)."""

    scenario: Scenario
    streams: Streams
    kernel: Kernel
    knobs: Knobs
    disk: SimDisk
    faults: StorageFaults
    history: ClientHistory
    replicas: dict[str, ReplicaProcess]
    cluster_of: dict[str, str]
    endpoints: dict[str, SimReplicaEndpoint]
    upstreams: Upstreams | None
    storage: StorageReplicaProcess | None
    storage_endpoints: dict[str, SimReplicaEndpoint]
    quiet: bool
    ending: bool
    dropped_ids: set[GlobalId]
    crash_restart_ms: int
    nursery: trio.Nursery
    clocks: Clocks

    def record(self, event: str, /, **fields: Any) -> None: ...

    def count(self, name: str) -> None: ...

    def violate(self, property: str, message: str) -> None: ...

    def controller_crashed(self, group: BaseException) -> None: ...

    def dropped(self, gid: GlobalId) -> None: ...

    def replica_names(self) -> list[str]: ...

    def start_cluster_replica(self, cluster: str, name: str) -> str: ...

    def stop_cluster_replica(self, process: str) -> None: ...

    def catalog_has_replicas(self) -> bool: ...
