"""Errors of the controller-replica transport: why a stream could not be opened or ended.

Each derives from :class:`~tidegate.spec.errors.TidegateError` through
:class:`TransportError`; the message names the replica address and the cause.
"""

from __future__ import annotations

from tidegate.spec.errors import TidegateError

__all__ = [
    "ConnectionLost",
    "ConnectionRefused",
    "StreamClosed",
    "TransportError",
    "Unauthenticated",
    "VersionMismatch",
]


class TransportError(TidegateError):
    """A controller-replica stream failed or could not be opened."""


class ConnectionRefused(TransportError):
    """The replica could not be reached (nothing listening, replica down)."""


class ConnectionLost(TransportError):
    """An open stream ended: the replica went away, the network broke, or a newer
    connection to the same replica preempted this one."""


class VersionMismatch(TransportError):
    """The replica speaks a different protocol version (or the controller sent none)."""

    def __init__(self, message: str, *, ours: str, theirs: str | None) -> None:
        super().__init__(message)
        self.ours = ours
        self.theirs = theirs


class Unauthenticated(TransportError):
    """The replica rejected the controller's shared token (wrong or missing)."""


class StreamClosed(TransportError):
    """The stream was closed by this side (``aclose``) and cannot be used any more."""
