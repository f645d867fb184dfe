"""The stages of a storage protocol iteration (reference section 2.12).

A protocol iteration (one connection) passes through its stages in order::

    AWAITING_HELLO --Hello--> INITIALIZATION --InitializationComplete--> READ_ONLY
        --AllowWrites--> READ_WRITE

An ``AllowWrites`` during initialization makes ``InitializationComplete``
lead straight to ``READ_WRITE``; the read-write stage is never left within
the iteration. A ``Hello`` in any stage starts a new iteration. Replicas answer
only in ``READ_ONLY`` and ``READ_WRITE`` (after they reconciled).
"""

from __future__ import annotations

from enum import Enum

from .commands import (
    RunIngestion,
    RunSink,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageHello,
    StorageInitializationComplete,
    StorageUpdateConfiguration,
)

__all__ = ["StorageStage", "storage_allowed_stages"]


class StorageStage(Enum):
    """Where a storage protocol iteration is; decides which commands may be sent and whether the replica may answer."""

    AWAITING_HELLO = "awaiting-hello"
    INITIALIZATION = "initialization"
    READ_ONLY = "running-read-only"
    READ_WRITE = "running-read-write"

    @property
    def is_running(self) -> bool:
        """Whether the replica has reconciled and may send responses."""
        return self in (StorageStage.READ_ONLY, StorageStage.READ_WRITE)


_SETUP = frozenset({StorageStage.INITIALIZATION, StorageStage.READ_ONLY, StorageStage.READ_WRITE})
_ALLOWED: dict[type, frozenset[StorageStage]] = {
    StorageHello: frozenset(StorageStage),
    StorageInitializationComplete: frozenset({StorageStage.INITIALIZATION}),
    StorageAllowWrites: _SETUP,  # at most once per iteration (DuplicateStorageAllowWrites)
    StorageUpdateConfiguration: _SETUP,
    RunIngestion: _SETUP,
    RunSink: _SETUP,
    StorageAllowCompaction: _SETUP,
}


def storage_allowed_stages(command: StorageCommand) -> frozenset[StorageStage]:
    """The stages in which ``command`` may be sent."""
    return _ALLOWED[type(command)]
