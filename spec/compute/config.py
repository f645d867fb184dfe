"""Replica configuration: where a replica runs, how big it is, and its introspection logging."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..ids import GlobalId
from ..protocol.types import LoggingConfig

__all__ = [
    "ManagedLocation",
    "ReplicaConfig",
    "ReplicaLocation",
    "ReplicaLogging",
    "UnmanagedLocation",
]


@dataclass(frozen=True, slots=True)
class ManagedLocation:
    """A replica the orchestrator starts: ``scale`` processes of ``workers`` threads each.

    ``size`` names the allocation (e.g. ``"small"``); memory and CPU are limits
    the orchestrator enforces (``None`` = unlimited).
    """

    size: str = "default"
    scale: int = 1
    workers: int = 1
    memory_bytes: int | None = None
    cpu_limit: float | None = None


@dataclass(frozen=True, slots=True)
class UnmanagedLocation:
    """A replica that already runs elsewhere: the controller connects to ``addresses`` (one per process)."""

    addresses: tuple[str, ...]


ReplicaLocation: TypeAlias = ManagedLocation | UnmanagedLocation


@dataclass(frozen=True, slots=True)
class ReplicaLogging:
    """A replica's introspection settings: logging runs when ``interval_ms`` is set."""

    interval_ms: int | None = None
    log_logging: bool = False

    @property
    def enabled(self) -> bool:
        return self.interval_ms is not None

    def logging_config(self, index_logs: tuple[tuple[str, GlobalId], ...]) -> LoggingConfig:
        """The ``LoggingConfig`` a replica receives in its ``CreateInstance`` (1 s interval when disabled)."""
        return LoggingConfig(
            interval_ms=self.interval_ms if self.interval_ms is not None else 1000,
            enable_logging=self.enabled,
            log_logging=self.log_logging,
            index_logs=index_logs,
        )


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Everything needed to run and talk to one replica."""

    location: ReplicaLocation = ManagedLocation()
    logging: ReplicaLogging = ReplicaLogging()
