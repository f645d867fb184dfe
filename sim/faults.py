"""The plan of a run: its faults and its client actions, as data -- printable, saveable, replayable.

A :class:`FaultPlan` lists :class:`Fault` records ordered by virtual time
and, once known, the run's client :class:`Action` s. A run generates both from
its seed (:func:`generate_plan` for the faults, swarm-style: each seed also
picks which fault kinds are enabled; the workload as the run goes) and
reports the plan it used with every action filled in; passed back
(``tidegate sim run --plan``), that plan drives an identical run, and the
shrinker removes faults and actions from it. Each kind of choice comes from
its own stream of the seed, so replacing the generated faults or actions by
explicit ones changes nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from .choices import ChoiceSource, pick, subset

__all__ = [
    "BASE_KINDS",
    "CONTROLLER_CRASH_TARGETS",
    "CORE_ACTIONS",
    "STORAGE_CRASH_TARGETS",
    "STORAGE_KINDS",
    "Action",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FaultPlanError",
    "draw_workload",
    "generate_plan",
]

FORMAT_VERSION = 3
"""Version 3 added clock skews, the enabled workload features and the second round of fault
kinds; versions 1 and 2 (a subset of it) are still read."""
READABLE_VERSIONS = (1, 2, FORMAT_VERSION)


class FaultPlanError(ValueError):
    """A plan that cannot be read or is inconsistent."""


class FaultKind(StrEnum):
    """What a fault does. ``duration_ms`` says when it heals (restart, restore, speed back)."""

    CRASH_REPLICA = "crash_replica"
    """The replica process dies (loses all state) and restarts after ``duration_ms``."""
    CUT_CONNECTION = "cut_connection"
    """The controller-replica connection breaks; it can be re-established after ``duration_ms``."""
    SLOW_REPLICA = "slow_replica"
    """Messages to and from the replica take ``factor`` times longer for ``duration_ms``."""
    REPLACE_REPLICA = "replace_replica"
    """The replica is dropped (``Environment.drop_replica``) and a new one with a fresh name
    added after ``duration_ms``."""
    RESTART_CONTROLLER = "restart_controller"
    """The controller process is killed wherever it is and restarts after ``duration_ms``."""
    DELAY_STORAGE_WRITE = "delay_storage_write"
    """Every storage call takes ``factor`` times longer while the fault lasts."""
    CRASH_CONTROLLER_IN = "crash_controller_in"
    """The controller dies inside its next storage call of kind ``target`` (one of
    :data:`CONTROLLER_CRASH_TARGETS`), before or after the call applies; it restarts
    ``duration_ms`` later."""
    CONSENSUS_FAILURES = "consensus_failures"
    """Consensus calls fail (a third of them, half after applying) for ``duration_ms``."""
    BLOB_FAILURES = "blob_failures"
    """Blob calls fail (a third of them, half after applying) for ``duration_ms``."""
    TORN_BLOB_WRITE = "torn_blob_write"
    """The controller dies in the middle of its next blob write, leaving a truncated object;
    it restarts ``duration_ms`` later."""
    CRASH_REPLICA_REHYDRATING = "crash_replica_rehydrating"
    """The replica dies in the middle of its next rehydration (a reconnect's history replay)
    and restarts ``duration_ms`` later."""
    GHOST_CONNECTION = "ghost_connection"
    """A stale duplicate of a controller connection attempt reaches the replica
    ``duration_ms`` later and preempts the stream that is current then."""
    # The storage world (scenarios with sources or sinks only: see STORAGE_KINDS).
    CRASH_STORAGE_REPLICA = "crash_storage_replica"
    """The storage replica process dies and restarts after ``duration_ms``."""
    CRASH_STORAGE_REPLICA_IN = "crash_storage_replica_in"
    """The storage replica dies inside its next storage call of kind ``target`` (one of
    :data:`STORAGE_CRASH_TARGETS`: a bindings or data write, a blob write, a sink target's
    commit, before or after it applies), or at its next rehydration (``rehydration``: a replayed
    ``RunIngestion``, ``RunSink`` or ``InitializationComplete``); it restarts ``duration_ms`` later."""
    CUT_STORAGE_CONNECTION = "cut_storage_connection"
    """The controller's connection to the storage replica breaks; it can be re-established
    after ``duration_ms``."""
    ZOMBIE_STORAGE_REPLICA = "zombie_storage_replica"
    """A new storage replica incarnation starts while the old one lives on, ingesting and
    committing, for ``duration_ms`` (a zombie: only compare-and-append stops its writes)."""
    UPSTREAM_UNREACHABLE = "upstream_unreachable"
    """The simulated upstream ``target`` refuses connections for ``duration_ms`` (its source
    goes stalled and recovers)."""
    SLOW_UPSTREAM = "slow_upstream"
    """The simulated upstream ``target`` delivers each change ``20 * factor`` ms late for
    ``duration_ms``."""
    SINK_COMMIT_FAILURES = "sink_commit_failures"
    """Half of the sink targets' commits fail for ``duration_ms``: before anything is written, or
    after the commit landed with its answer lost."""
    UPSTREAM_FAILS_AFTER_DELIVERY = "upstream_fails_after_delivery"
    """The simulated upstream ``target``'s connection breaks right after its next delivery of
    changes, before the source has written them (or their binding), and refuses connections for
    ``duration_ms``."""
    UPSTREAM_SCHEMA_CHANGE = "upstream_schema_change"
    """The simulated upstream ``target``'s table changes its schema (a column's type), as an
    ``ALTER TABLE`` upstream would: every source reading it must stop with a typed, definite error
    (``ceased``), having written nothing of the new shape. Lasts for good."""
    SLOT_LOST = "slot_lost"
    """The replication slot of every source reading upstream ``target`` is lost (dropped, or
    invalidated as PostgreSQL does past ``max_slot_wal_keep_size``): the changes since what each
    acknowledged are gone, so its source must stop typed (``ceased``) rather than skip them."""
    FOREIGN_SINK_COMMITS = "foreign_sink_commits"
    """Another writer commits to every sink target every few ms for ``duration_ms`` (an Iceberg
    catalog's concurrent commits): a sink's commit loses the catalog's compare-and-swap and must
    decide again on the new state."""
    # Faults of every scenario added with the second round of fault kinds (after the storage
    # world's in this enum, so that the order of BASE_KINDS before them is unchanged).
    ZOMBIE_CONTROLLER = "zombie_controller"
    """The controller process stops (SIGSTOP, a long GC, a partition from its orchestrator) and is
    taken for dead: a new incarnation starts at once (as a restart, or an upgrade's new version,
    would) while the old one, paused for ``duration_ms``, then resumes for as long again as a
    zombie -- still appending, ticking, writing its catalog and answering its clients -- until it
    is killed. Only fencing keeps what it acknowledges from being lost or conflicting. With
    ``target`` ``commit`` it stops at its next append's commit, after the write landed and before
    its answer (so that, resumed, it acknowledges it)."""
    PAUSE_PROCESS = "pause_process"
    """Process ``target`` (``controller``, a replica, or ``storage``: the storage replica) stops
    for ``duration_ms`` (SIGSTOP, a GC pause) and then runs on, its clock having moved on."""
    CLOCK_JUMP = "clock_jump"
    """The wall clock of process ``target`` is off by ``skew_ms`` (a jump back or forward) for
    ``duration_ms``, then stepped back to the true time (as NTP steps a clock)."""
    CLOCK_DRIFT = "clock_drift"
    """The wall clock of process ``target`` drifts linearly to ``skew_ms`` off over
    ``duration_ms``, then is stepped back to the true time."""
    CLOCK_BACK_RESTART = "clock_back_restart"
    """The controller's clock steps back by ``-skew_ms`` (more than ``duration_ms``) and the
    controller restarts ``duration_ms`` later: its oracle reopens with the clock behind the last
    timestamp it handed out."""
    BIT_ROT = "bit_rot"
    """A bit of a committed object flips (``target``: a ``blob``, or the head row of a ``shard``'s
    state, of the ``catalog`` or of the ``oracle``) and reads of it return the rotten bytes for
    ``duration_ms`` (then a redundant copy repairs it): reads must fail typed, never return
    other data."""
    FULL_DISK = "full_disk"
    """Every write (a blob, a consensus compare-and-set) is refused for ``duration_ms`` as by a
    full disk (``StorageUnavailable``, ``ENOSPC``: nothing applied)."""
    SLOW_FSYNC = "slow_fsync"
    """For ``duration_ms``, a quarter of the writes stall ``factor * 50`` ms in their fsync."""
    LOSE_CATALOG = "lose_catalog"
    """The catalog's consensus record vanishes (a wrong data directory mounted, a bad restore)
    for ``duration_ms``, and the controller restarts meanwhile: it must refuse to start (typed),
    never take the shards it finds for garbage. The record comes back when the fault ends."""


CONTROLLER_CRASH_TARGETS = ("append", "cas", "catalog", "oracle", "blob", "restore")
"""Where a :attr:`FaultKind.CRASH_CONTROLLER_IN` strikes: a shard append's commit, any
consensus compare-and-set, a catalog write, an oracle reservation, a blob write, or any
storage call while the controller restores its state."""

STORAGE_CRASH_TARGETS = ("remap_write", "data_write", "blob", "sink_commit", "rehydration")
"""Where a :attr:`FaultKind.CRASH_STORAGE_REPLICA_IN` strikes: the commit of a source's remap
(bindings) or data compare-and-append, a blob write, a sink target's commit, or a rehydration."""

STORAGE_KINDS = frozenset(
    {
        FaultKind.CRASH_STORAGE_REPLICA,
        FaultKind.CRASH_STORAGE_REPLICA_IN,
        FaultKind.CUT_STORAGE_CONNECTION,
        FaultKind.ZOMBIE_STORAGE_REPLICA,
        FaultKind.UPSTREAM_UNREACHABLE,
        FaultKind.SLOW_UPSTREAM,
        FaultKind.SINK_COMMIT_FAILURES,
        FaultKind.UPSTREAM_FAILS_AFTER_DELIVERY,
        FaultKind.UPSTREAM_SCHEMA_CHANGE,
        FaultKind.SLOT_LOST,
        FaultKind.FOREIGN_SINK_COMMITS,
    }
)
"""Faults of the storage world, drawn only for scenarios with sources or sinks (so that seeds
of the others keep their plans)."""
UPSTREAM_KINDS = frozenset(
    {
        FaultKind.UPSTREAM_UNREACHABLE,
        FaultKind.SLOW_UPSTREAM,
        FaultKind.UPSTREAM_FAILS_AFTER_DELIVERY,
        FaultKind.UPSTREAM_SCHEMA_CHANGE,
        FaultKind.SLOT_LOST,
    }
)
"""Faults that target a simulated upstream by name."""
BASE_KINDS = tuple(k for k in FaultKind if k not in STORAGE_KINDS)
"""The fault kinds of every scenario, in their order."""

REPLICA_KINDS = frozenset(
    {
        FaultKind.CRASH_REPLICA,
        FaultKind.CUT_CONNECTION,
        FaultKind.SLOW_REPLICA,
        FaultKind.REPLACE_REPLICA,
        FaultKind.CRASH_REPLICA_REHYDRATING,
        FaultKind.GHOST_CONNECTION,
    }
)
FACTOR_KINDS = frozenset(
    {
        FaultKind.SLOW_REPLICA,
        FaultKind.DELAY_STORAGE_WRITE,
        FaultKind.SLOW_UPSTREAM,
        FaultKind.SLOW_FSYNC,
    }
)
PROCESS_KINDS = frozenset({FaultKind.PAUSE_PROCESS, FaultKind.CLOCK_JUMP, FaultKind.CLOCK_DRIFT})
"""Faults that target a process by name: ``controller``, a replica, or ``storage``."""
CLOCK_KINDS = frozenset({FaultKind.CLOCK_JUMP, FaultKind.CLOCK_DRIFT, FaultKind.CLOCK_BACK_RESTART})
"""Faults that set a process's clock off by ``skew_ms``."""
ZOMBIE_TARGETS = ("", "commit")
"""Where a :attr:`FaultKind.ZOMBIE_CONTROLLER` stops the controller: anywhere (at once), or at its
next append's commit, between the write and its answer."""
FULL_DISK_TARGETS = ("", "catalog")
"""When a :attr:`FaultKind.FULL_DISK` fills the disk: at once, or right after the next catalog
commit lands, between a DDL's catalog change and the shard work the catalog committed to."""
ROT_TARGETS = ("blob", "shard", "catalog", "oracle")
"""What a :attr:`FaultKind.BIT_ROT` rots: a blob, or the consensus row of a shard's state, of
the catalog or of the timestamp oracle."""
CONTROLLER = "controller"
"""The controller process, as a fault's target."""
STORAGE_REPLICA = "storage"
"""The storage replica process, as a fault's target."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``kind`` strikes ``target`` (a replica, a storage call kind, or ``""``) at ``at_ms``."""

    at_ms: int
    kind: FaultKind
    target: str = ""
    duration_ms: int = 0
    factor: int = 1
    skew_ms: int = 0
    """How far off a clock fault sets its process's clock (negative: behind)."""

    def __post_init__(self) -> None:
        if self.at_ms < 0 or self.duration_ms < 0:
            raise FaultPlanError(f"fault times must be non-negative: {self}")
        if self.kind in REPLICA_KINDS and not self.target:
            raise FaultPlanError(f"{self.kind.value} needs a target replica")
        if self.kind is FaultKind.CRASH_CONTROLLER_IN and self.target not in (
            CONTROLLER_CRASH_TARGETS
        ):
            raise FaultPlanError(
                f"crash_controller_in needs a target among {', '.join(CONTROLLER_CRASH_TARGETS)}, "
                f"got {self.target!r}"
            )
        if self.kind is FaultKind.CRASH_STORAGE_REPLICA_IN and self.target not in (
            STORAGE_CRASH_TARGETS
        ):
            raise FaultPlanError(
                "crash_storage_replica_in needs a target among "
                f"{', '.join(STORAGE_CRASH_TARGETS)}, got {self.target!r}"
            )
        if self.kind in UPSTREAM_KINDS and not self.target:
            raise FaultPlanError(f"{self.kind.value} needs a target upstream")
        if self.factor < 1:
            raise FaultPlanError(f"slow-down factor must be >= 1: {self}")
        if self.kind in PROCESS_KINDS and not self.target:
            raise FaultPlanError(f"{self.kind.value} needs a target process")
        if self.kind is FaultKind.ZOMBIE_CONTROLLER and self.target not in ZOMBIE_TARGETS:
            raise FaultPlanError(
                f"zombie_controller's target is '' or 'commit', got {self.target!r}"
            )
        if self.kind is FaultKind.FULL_DISK and self.target not in FULL_DISK_TARGETS:
            raise FaultPlanError(f"full_disk's target is '' or 'catalog', got {self.target!r}")
        if self.kind is FaultKind.BIT_ROT and self.target not in ROT_TARGETS:
            raise FaultPlanError(
                f"bit_rot needs a target among {', '.join(ROT_TARGETS)}, got {self.target!r}"
            )
        if self.kind is FaultKind.CLOCK_BACK_RESTART and -self.skew_ms <= self.duration_ms:
            raise FaultPlanError(
                f"clock_back_restart steps the clock back further than it waits to restart "
                f"(-skew_ms > duration_ms): {self}"
            )
        if self.skew_ms and self.kind not in CLOCK_KINDS:
            raise FaultPlanError(f"only clock faults have a skew: {self}")

    def text(self) -> str:
        """A one-line rendering (``crash_replica r1@1200ms+300ms``)."""
        target = f" {self.target}" if self.target else ""
        extra = f" x{self.factor}" if self.factor != 1 else ""
        if self.skew_ms:
            extra += f" {self.skew_ms:+d}ms"
        return f"{self.kind.value}{target}@{self.at_ms}ms+{self.duration_ms}ms{extra}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.value
        if not self.skew_ms:
            del out["skew_ms"]  # as plans before clock faults wrote them
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        try:
            return cls(
                at_ms=int(data["at_ms"]),
                kind=FaultKind(data["kind"]),
                target=str(data.get("target", "")),
                duration_ms=int(data.get("duration_ms", 0)),
                factor=int(data.get("factor", 1)),
                skew_ms=int(data.get("skew_ms", 0)),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise FaultPlanError(f"bad fault record {data!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class Action:
    """One client action: ``kind`` (a :class:`~tidegate.sim.scenario.WorkloadMix` action) at ``at_ms``.

    ``args`` are JSON values naming what it acts on by name (a table, a
    dataflow of the scenario) and how, so that it still means something when
    the shrinker removes earlier actions; see :mod:`tidegate.sim.clients`.
    """

    at_ms: int
    kind: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        args = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in self.args.items())
        return f"{self.kind}@{self.at_ms}ms" + (f" {args}" if args else "")

    def to_json(self) -> dict[str, Any]:
        return {"at_ms": self.at_ms, "kind": self.kind, "args": dict(self.args)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Action:
        try:
            args = data.get("args", {})
            if not isinstance(args, Mapping):
                raise TypeError("args must be an object")
            return cls(int(data["at_ms"]), str(data["kind"]), dict(args))
        except (KeyError, ValueError, TypeError) as e:
            raise FaultPlanError(f"bad action record {data!r}: {e}") from e


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The faults of a run, sorted by time, which kinds were enabled, and its client actions.

    ``actions`` is ``None`` when the workload is to be generated from the seed;
    a run's :attr:`~tidegate.sim.run.RunResult.plan` always has them. ``workload``
    names the client action kinds a generated workload draws from (swarm testing:
    each seed leaves some out); ``None``: every kind the scenario's mix weighs.
    """

    faults: tuple[Fault, ...] = ()
    enabled: tuple[FaultKind, ...] = field(default_factory=tuple)
    actions: tuple[Action, ...] | None = None
    workload: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.faults, key=lambda f: (f.at_ms, f.kind.value, f.target)))
        object.__setattr__(self, "faults", ordered)
        if self.actions is not None:
            times = [a.at_ms for a in self.actions]
            if times != sorted(times):
                raise FaultPlanError("actions must be in time order")

    def without(self, index: int) -> FaultPlan:
        """The plan with fault ``index`` removed (a shrinking step)."""
        return replace(self, faults=self.faults[:index] + self.faults[index + 1 :])

    @property
    def steps(self) -> int:
        """Faults plus client actions: the size of a reproducer."""
        return len(self.faults) + len(self.actions or ())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "enabled": [k.value for k in self.enabled],
            "faults": [f.to_json() for f in self.faults],
        }
        if self.actions is not None:
            out["actions"] = [a.to_json() for a in self.actions]
        if self.workload is not None:
            out["workload"] = list(self.workload)
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=2)

    @classmethod
    def from_json(cls, data: Any) -> FaultPlan:
        if not isinstance(data, dict):
            raise FaultPlanError("a plan is a JSON object")
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise FaultPlanError(
                f"a version-{version!r} plan: this simulator reads plans of versions "
                f"{', '.join(map(str, READABLE_VERSIONS))} (written by `tidegate sim run`); "
                "a newer one needs a newer tidegate"
            )
        try:
            enabled = tuple(FaultKind(k) for k in data.get("enabled", []))
        except ValueError as e:
            raise FaultPlanError(str(e)) from e
        actions = data.get("actions")
        workload = data.get("workload")
        if workload is not None and not (
            isinstance(workload, list) and all(isinstance(k, str) for k in workload)
        ):
            raise FaultPlanError(f"workload must be a list of action kinds, got {workload!r}")
        return cls(
            tuple(Fault.from_json(f) for f in data.get("faults", [])),
            enabled,
            None if actions is None else tuple(Action.from_json(a) for a in actions),
            None if workload is None else tuple(workload),
        )

    @classmethod
    def loads(cls, text: str) -> FaultPlan:
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise FaultPlanError(f"plan is not JSON: {e}") from e

    def save(self, path: Path) -> None:
        path.write_text(self.dumps() + "\n")

    @classmethod
    def load(cls, path: Path) -> FaultPlan:
        return cls.loads(path.read_text())


def generate_plan(
    source: ChoiceSource,
    replicas: Sequence[str],
    horizon_ms: int,
    count: int,
    kinds: Sequence[FaultKind] | None = None,
    upstreams: Sequence[str] = (),
    *,
    storage: bool = False,
) -> FaultPlan:
    """Draw ``count`` faults within ``[0, horizon_ms)`` over ``replicas``, the simulated
    ``upstreams`` and, with ``storage``, the storage replica (actions: generated).

    Unless ``kinds`` is given, a random non-empty subset of the :data:`BASE_KINDS` is enabled
    (swarm testing: different seeds stress different combinations).
    """
    all_kinds = list(BASE_KINDS)
    enabled = (
        list(kinds) if kinds is not None else subset(source, all_kinds) or [pick(source, all_kinds)]
    )
    if not replicas:
        enabled = [k for k in enabled if k not in REPLICA_KINDS]
    if not upstreams:
        enabled = [k for k in enabled if k not in UPSTREAM_KINDS]
    processes = [CONTROLLER, *replicas] + ([STORAGE_REPLICA] if storage else [])
    faults: list[Fault] = []
    for _ in range(count if enabled else 0):
        kind = pick(source, enabled)
        if kind in REPLICA_KINDS:
            target = pick(source, list(replicas))
        elif kind is FaultKind.CRASH_CONTROLLER_IN:
            target = pick(source, CONTROLLER_CRASH_TARGETS)
        elif kind is FaultKind.CRASH_STORAGE_REPLICA_IN:
            target = pick(source, STORAGE_CRASH_TARGETS)
        elif kind in UPSTREAM_KINDS:
            target = pick(source, list(upstreams))
        elif kind in PROCESS_KINDS:
            target = pick(source, processes)
        elif kind is FaultKind.BIT_ROT:
            target = pick(source, ROT_TARGETS)
        elif kind is FaultKind.ZOMBIE_CONTROLLER:
            target = pick(source, ZOMBIE_TARGETS)
        elif kind is FaultKind.FULL_DISK:
            target = pick(source, FULL_DISK_TARGETS)
        else:
            target = ""
        at = source.integer(0, max(0, horizon_ms - 1))
        duration = source.integer(10, max(10, horizon_ms // 6))
        factor = source.integer(2, 20) if kind in FACTOR_KINDS else 1
        skew = 0
        if kind is FaultKind.CLOCK_JUMP:  # back or forward, up to past a replica's lease
            skew = source.integer(100, 8_000) * (1 if source.integer(0, 1) else -1)
        elif kind is FaultKind.CLOCK_DRIFT:
            skew = source.integer(50, 2_000) * (1 if source.integer(0, 1) else -1)
        elif kind is FaultKind.CLOCK_BACK_RESTART:
            duration = source.integer(10, 1_000)
            skew = -(duration + source.integer(100, 3_000))
        faults.append(Fault(at, kind, target, duration, factor, skew))
    return FaultPlan(tuple(faults), tuple(enabled))


def draw_workload(source: ChoiceSource, kinds: Sequence[str]) -> tuple[str, ...]:
    """The client action kinds a seed's workload draws from: each of ``kinds`` but the core ones
    (appends and fresh peeks, which every check needs) left out with probability 1/4 (swarm
    testing: rare combinations of features come up without hand-tuned mixes)."""
    kept = CORE_ACTIONS | KEPT_ACTIONS
    return tuple(k for k in kinds if k in kept or source.integer(0, 3) != 0)


CORE_ACTIONS = frozenset({"append", "peek"})
"""Client action kinds every generated workload keeps (appends and fresh peeks, which every
check needs)."""

KEPT_ACTIONS = frozenset({"create_cluster", "drop_cluster"})
"""Client action kinds a generated workload keeps where the scenario weighs them: creating and
dropping clusters, which the other actions on clusters created during the run need and whose
drops (``CASCADE``) the cleanup checks judge (scenarios that do not weigh them draw as before)."""
