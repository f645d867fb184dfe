"""The stages of a protocol iteration, and the vocabulary the two sessions share.

A protocol iteration (one connection) passes through its stages in order
(docs/reference/compute.md §5)::

    AWAITING_HELLO --Hello--> CREATION --CreateInstance--> INITIALIZATION
        --InitializationComplete--> READ_ONLY --AllowWrites--> READ_WRITE

``READ_ONLY`` and ``READ_WRITE`` are the computation stage; the read-write stage
is entered by the first ``AllowWrites`` (during initialization an ``AllowWrites``
makes ``InitializationComplete`` lead straight to it) and is never left within
the iteration. A ``Hello`` in any stage starts a new iteration at ``CREATION``.
"""

from __future__ import annotations

from enum import Enum

from .commands import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)

__all__ = ["CollectionKind", "FrontierKind", "Stage", "allowed_stages"]


class Stage(Enum):
    """Where a protocol iteration is; decides which commands may be sent and whether replicas may answer."""

    AWAITING_HELLO = "awaiting-hello"
    CREATION = "creation"
    INITIALIZATION = "initialization"
    READ_ONLY = "computation-read-only"
    READ_WRITE = "computation-read-write"

    @property
    def is_computation(self) -> bool:
        """Whether this is the computation stage, the only one in which a replica sends responses."""
        return self in (Stage.READ_ONLY, Stage.READ_WRITE)


class CollectionKind(Enum):
    """What a compute collection is; decides which responses it gets."""

    INDEX = "index"
    LOG_INDEX = "log-index"
    MATERIALIZED_VIEW = "materialized-view"
    SUBSCRIBE = "subscribe"
    COPY_TO = "copy-to"

    @property
    def is_index(self) -> bool:
        """Indexes (including log indexes) can be peeked and imported by other dataflows."""
        return self in (CollectionKind.INDEX, CollectionKind.LOG_INDEX)

    @property
    def reports_frontiers(self) -> bool:
        """Everything but subscribes and copy-tos gets ``Frontiers`` reports.

        Subscribes report through their batches, a copy-to through its one ``CopyToResponse``.
        """
        return self is not CollectionKind.SUBSCRIBE and self is not CollectionKind.COPY_TO


class FrontierKind(Enum):
    """The three frontiers of a ``Frontiers`` report; values are the field names."""

    WRITE = "write"
    INPUT = "input"
    OUTPUT = "output"


_SETUP = frozenset({Stage.INITIALIZATION, Stage.READ_ONLY, Stage.READ_WRITE})
_ALLOWED: dict[type, frozenset[Stage]] = {
    Hello: frozenset(Stage),
    CreateInstance: frozenset({Stage.CREATION}),
    InitializationComplete: frozenset({Stage.INITIALIZATION}),
    UpdateConfiguration: _SETUP,
    CreateDataflow: _SETUP,
    Schedule: _SETUP,
    AllowWrites: _SETUP,
    AllowCompaction: _SETUP,
    Peek: _SETUP,
    CancelPeek: _SETUP,
}


def allowed_stages(command: ComputeCommand) -> frozenset[Stage]:
    """The stages in which ``command`` may be sent (the legality matrix of reference §5)."""
    return _ALLOWED[type(command)]
