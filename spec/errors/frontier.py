"""Errors of the frontier algebra: timestamps, antichains, read policies and holds."""

from __future__ import annotations

from .base import TidegateError

__all__ = [
    "FrontierError",
    "HoldRegression",
    "InvalidReadPolicy",
    "InvalidTimestamp",
    "MixedTimestampKinds",
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
