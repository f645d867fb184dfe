"""Errors of the frontier algebra: timestamps, antichains, read policies and holds."""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "DuplicateHoldCollection",
    "FrontierError",
    "HoldBeforeSince",
    "HoldMismatch",
    "HoldRegression",
    "InvalidFrontier",
    "InvalidReadPolicy",
    "InvalidTimestamp",
    "MixedTimestampKinds",
    "UnknownHoldCollection",
]


class FrontierError(TidegateError, ValueError):
    """Base class of frontier-algebra errors."""


class InvalidTimestamp(FrontierError):
    """A value that is not a timestamp: a negative int, a bool, or an unknown type."""


class MixedTimestampKinds(FrontierError):
    """Timestamps of different kinds (e.g. ``int`` and ``Product``) in one antichain or comparison."""


class InvalidReadPolicy(FrontierError):
    """A read policy that cannot be evaluated (e.g. a lag granularity of 0)."""


class HoldRegression(FrontierError):
    """An attempt to move a read hold backwards (holds only move forward)."""


class HoldBeforeSince(FrontierError):
    """A read hold requested at a frontier not at or beyond the collection's current since."""


class UnknownHoldCollection(FrontierError):
    """A read-hold operation on a collection id that is not (or no longer) tracked."""


class DuplicateHoldCollection(FrontierError):
    """Registering a collection id for read holds twice."""


class HoldMismatch(FrontierError):
    """Merging read holds that are the same hold, or of different collections or issuers."""


class InvalidFrontier(FrontierError, TypeError):
    """A value used as a frontier that is not an :class:`~tidegate.spec.frontier.Antichain`."""
