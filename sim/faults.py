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
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .choices import ChoiceSource, pick, subset

__all__ = [
    "BASE_KINDS",
    "CONTROLLER_CRASH_TARGETS",
    "STORAGE_CRASH_TARGETS",
    "STORAGE_KINDS",
    "Action",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FaultPlanError",
    "generate_plan",
]

FORMAT_VERSION = 2


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
    }
)
"""Faults of the storage world, drawn only for scenarios with sources or sinks (so that seeds
of the others keep their plans)."""
UPSTREAM_KINDS = frozenset({FaultKind.UPSTREAM_UNREACHABLE, FaultKind.SLOW_UPSTREAM})
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
    {FaultKind.SLOW_REPLICA, FaultKind.DELAY_STORAGE_WRITE, FaultKind.SLOW_UPSTREAM}
)


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``kind`` strikes ``target`` (a replica, a storage call kind, or ``""``) at ``at_ms``."""

    at_ms: int
    kind: FaultKind
    target: str = ""
    duration_ms: int = 0
    factor: int = 1

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

    def text(self) -> str:
        """A one-line rendering (``crash_replica r1@1200ms+300ms``)."""
        target = f" {self.target}" if self.target else ""
        extra = f" x{self.factor}" if self.factor != 1 else ""
        return f"{self.kind.value}{target}@{self.at_ms}ms+{self.duration_ms}ms{extra}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.value
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
    a run's :attr:`~tidegate.sim.run.RunResult.plan` always has them.
    """

    faults: tuple[Fault, ...] = ()
    enabled: tuple[FaultKind, ...] = field(default_factory=tuple)
    actions: tuple[Action, ...] | None = None

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.faults, key=lambda f: (f.at_ms, f.kind.value, f.target)))
        object.__setattr__(self, "faults", ordered)
        if self.actions is not None:
            times = [a.at_ms for a in self.actions]
            if times != sorted(times):
                raise FaultPlanError("actions must be in time order")

    def without(self, index: int) -> FaultPlan:
        """The plan with fault ``index`` removed (a shrinking step)."""
        return FaultPlan(self.faults[:index] + self.faults[index + 1 :], self.enabled, self.actions)

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
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=2)

    @classmethod
    def from_json(cls, data: Any) -> FaultPlan:
        if not isinstance(data, dict) or data.get("version") not in (1, FORMAT_VERSION):
            raise FaultPlanError(f"not a version-{FORMAT_VERSION} (or 1) plan")
        try:
            enabled = tuple(FaultKind(k) for k in data.get("enabled", []))
        except ValueError as e:
            raise FaultPlanError(str(e)) from e
        actions = data.get("actions")
        return cls(
            tuple(Fault.from_json(f) for f in data.get("faults", [])),
            enabled,
            None if actions is None else tuple(Action.from_json(a) for a in actions),
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
) -> FaultPlan:
    """Draw ``count`` faults within ``[0, horizon_ms)`` over ``replicas`` and the simulated
    ``upstreams`` (actions: generated).

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
        else:
            target = ""
        at = source.integer(0, max(0, horizon_ms - 1))
        duration = source.integer(10, max(10, horizon_ms // 6))
        factor = source.integer(2, 20) if kind in FACTOR_KINDS else 1
        faults.append(Fault(at, kind, target, duration, factor))
    return FaultPlan(tuple(faults), tuple(enabled))
