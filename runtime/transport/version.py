"""The compute protocol's version and the call metadata that carries it.

A replica refuses a stream whose version differs from its own (or is missing),
naming both versions; bump :data:`PROTOCOL_VERSION` whenever ``proto/`` or the
meaning of a message changes incompatibly.
"""

from __future__ import annotations

__all__ = ["AUTH_HEADER", "PROTOCOL_VERSION", "VERSION_HEADER", "bearer"]

PROTOCOL_VERSION = "2"
"""The protocol version this build speaks (2: plans as typed messages, no longer JSON)."""

VERSION_HEADER = "x-tidegate-version"
"""Call metadata key carrying the protocol version (both directions)."""

AUTH_HEADER = "authorization"
"""Call metadata key carrying ``Bearer <token>`` when a shared token is configured."""


def bearer(token: str) -> str:
    """The ``authorization`` header value for ``token``."""
    return f"Bearer {token}"
