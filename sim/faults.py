"""Fault plans: the faults of a run as data, printable, saveable, replayable and shrinkable.

A plan is a list of :class:`Fault` records ordered by virtual time. Plans come
from a seed (:func:`generate_plan`, swarm-style: each seed also picks which
fault kinds are enabled) or from a JSON file (:meth:`FaultPlan.load`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .choices import ChoiceSource, pick, subset

__all__ = ["Fault", "FaultKind", "FaultPlan", "FaultPlanError", "generate_plan"]

FORMAT_VERSION = 1


class FaultPlanError(ValueError):
    """A fault plan that cannot be read or is inconsistent."""


class FaultKind(StrEnum):
    """What a fault does. ``duration_ms`` says when it heals (restart, restore, speed back)."""

    CRASH_REPLICA = "crash_replica"
    """The replica process dies (loses all state) and restarts after ``duration_ms``."""
    CUT_CONNECTION = "cut_connection"
    """The controller-replica connection breaks; it can be re-established after ``duration_ms``."""
    SLOW_REPLICA = "slow_replica"
    """Messages to and from the replica take ``factor`` times longer for ``duration_ms``."""
    REPLACE_REPLICA = "replace_replica"
    """The replica is dropped and a new one (a fresh name) is added after ``duration_ms``."""
    RESTART_CONTROLLER = "restart_controller"
    """The controller restarts from its durable state after ``duration_ms``."""
    DELAY_STORAGE_WRITE = "delay_storage_write"
    """Storage writes complete ``duration_ms`` late while the fault lasts."""


REPLICA_KINDS = frozenset(
    {
        FaultKind.CRASH_REPLICA,
        FaultKind.CUT_CONNECTION,
        FaultKind.SLOW_REPLICA,
        FaultKind.REPLACE_REPLICA,
    }
)


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: ``kind`` strikes ``target`` (a replica name, or ``""``) at ``at_ms`` virtual time."""

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
        if self.factor < 1:
            raise FaultPlanError(f"slow-down factor must be >= 1: {self}")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
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
class FaultPlan:
    """The faults of one run, sorted by time, plus which kinds were enabled (for reporting)."""

    faults: tuple[Fault, ...] = ()
    enabled: tuple[FaultKind, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.faults, key=lambda f: (f.at_ms, f.kind.value, f.target)))
        object.__setattr__(self, "faults", ordered)

    def without(self, index: int) -> FaultPlan:
        """The plan with fault ``index`` removed (a shrinking step)."""
        return FaultPlan(self.faults[:index] + self.faults[index + 1 :], self.enabled)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "enabled": [k.value for k in self.enabled],
            "faults": [f.to_json() for f in self.faults],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=2)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultPlan:
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise FaultPlanError(f"not a version-{FORMAT_VERSION} fault plan")
        try:
            enabled = tuple(FaultKind(k) for k in data.get("enabled", []))
        except ValueError as e:
            raise FaultPlanError(str(e)) from e
        return cls(tuple(Fault.from_json(f) for f in data.get("faults", [])), enabled)

    @classmethod
    def loads(cls, text: str) -> FaultPlan:
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise FaultPlanError(f"fault plan is not JSON: {e}") from e

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
) -> FaultPlan:
    """Draw ``count`` faults within ``[0, horizon_ms)`` over ``replicas``.

    Unless ``kinds`` is given, a random non-empty subset of all kinds is enabled
    (swarm testing: different seeds stress different combinations).
    """
    all_kinds = list(FaultKind)
    enabled = (
        list(kinds) if kinds is not None else subset(source, all_kinds) or [pick(source, all_kinds)]
    )
    if not replicas:
        enabled = [k for k in enabled if k not in REPLICA_KINDS]
    faults: list[Fault] = []
    for _ in range(count if enabled else 0):
        kind = pick(source, enabled)
        target = pick(source, list(replicas)) if kind in REPLICA_KINDS else ""
        at = source.integer(0, max(0, horizon_ms - 1))
        duration = source.integer(10, max(10, horizon_ms // 6))
        factor = source.integer(2, 20) if kind is FaultKind.SLOW_REPLICA else 1
        faults.append(Fault(at, kind, target, duration, factor))
    return FaultPlan(tuple(faults), tuple(enabled))
