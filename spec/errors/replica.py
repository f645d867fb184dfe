"""Errors of the compute replica core (:mod:`tidegate.spec.compute_replica`).

Every error is a :class:`ReplicaError` whose class attribute ``rule`` names the
broken rule in a short, stable form; the message names the offending id.
Protocol violations by the controller surface as the session's own
:class:`~tidegate.spec.errors.ProtocolError`; these cover what lies beyond the
protocol: a reconnect the replica cannot accept, a dataflow it cannot run, and
driver callbacks (storage data, write completions, persist peeks) that name
nothing the replica asked for. Raised *before* any state changes.
"""

from __future__ import annotations

from typing import ClassVar

from .base import TidegateError

__all__ = [
    "CommandRejected",
    "DataflowRejected",
    "IncompatibleInstance",
    "ReplicaError",
    "SourceFeedRejected",
    "UnknownCopyTo",
    "UnknownPersistPeek",
    "UnknownSink",
    "UnknownSource",
    "WriteNotInFlight",
]


class ReplicaError(TidegateError, ValueError):
    """Base class: something the replica core cannot accept. ``rule`` names the rule."""

    rule: ClassVar[str] = "replica"

    def __str__(self) -> str:
        return f"[{self.rule}] {super().__str__()}"


class IncompatibleInstance(ReplicaError):
    """A reconnecting controller sent a ``CreateInstance`` incompatible with the running one.

    The replica cannot reconcile its state with it: the driver must halt the
    process (docs/reference/compute.md §6.2 step 6); a fresh process can start over.
    """

    rule = "halt-on-incompatible-instance"


class DataflowRejected(ReplicaError):
    """A ``CreateDataflow`` the replica cannot run (an ill-typed plan, non-int times, an unknown input)."""

    rule = "dataflow-runnable"


class CommandRejected(ReplicaError):
    """A ``Peek`` or ``AllowCompaction`` whose time is not an int: the replica runs on int times only.

    (Found by a probe: a ``Peek`` at a ``Product`` time was recorded as pending,
    then failed every later command that tried to serve it.)
    """

    rule = "int-times"


class UnknownSource(ReplicaError):
    """Storage data delivered for a collection the replica never asked to read."""

    rule = "read-before-feed"


class SourceFeedRejected(ReplicaError):
    """Storage data that cannot be right: an upper going back, an update outside ``[upper, new upper)``."""

    rule = "source-feed-monotone"


class UnknownSink(ReplicaError):
    """A write completion for a sink the replica never ran."""

    rule = "sink-known"


class WriteNotInFlight(ReplicaError):
    """``write_completed`` when no write of that sink is in flight, or with another upper than requested."""

    rule = "write-completion-matches"


class UnknownPersistPeek(ReplicaError):
    """A persist-peek result for a uuid the replica never handed to the driver."""

    rule = "persist-peek-known"


class UnknownCopyTo(ReplicaError):
    """A copy-to outcome for a sink the replica never handed to the driver to write."""

    rule = "copy-to-known"
