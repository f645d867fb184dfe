"""Errors raised when bytes on the wire do not decode to a valid protocol message."""

from __future__ import annotations

from tidegate.spec.errors import TidegateError

__all__ = ["MalformedMessage", "UnknownMessageKind", "WireError"]


class WireError(TidegateError, ValueError):
    """A message could not be encoded or decoded."""


class MalformedMessage(WireError):
    """Bytes that are not a valid message, or a message whose fields are invalid."""


class UnknownMessageKind(WireError):
    """A message whose oneof is unset or names a kind this version does not know."""
