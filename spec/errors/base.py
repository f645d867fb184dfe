"""The root of tidegate's error hierarchy."""

from __future__ import annotations

__all__ = ["InvalidId", "TidegateError"]


class TidegateError(Exception):
    """Base class of every error tidegate raises on purpose."""


class InvalidId(TidegateError, ValueError):
    """A malformed identifier (GlobalId text, replica or instance name)."""
