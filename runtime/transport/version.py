"""The protocols' versions and the call metadata that carries them.

A replica refuses a stream whose version differs from its own (or is missing),
naming both versions. Each protocol has its own: bump :data:`PROTOCOL_VERSION`
whenever ``proto/tidegate_compute.proto`` or the meaning of a compute message
changes incompatibly, :data:`STORAGE_PROTOCOL_VERSION` for the storage protocol.
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "AUTH_HEADER",
    "OWN_VERSION",
    "PROTOCOL_VERSION",
    "STORAGE_PROTOCOL_VERSION",
    "VERSION_HEADER",
    "Own",
    "bearer",
]

PROTOCOL_VERSION = "2"
"""The compute protocol version this build speaks (2: plans as typed messages, no longer JSON)."""

STORAGE_PROTOCOL_VERSION = "1"
"""The storage protocol version this build speaks (``proto/tidegate_storage.proto``)."""


class Own(Enum):
    """The type of :data:`OWN_VERSION`."""

    VERSION = "the protocol's own version"


OWN_VERSION = Own.VERSION
"""A transport's or server's default ``version``: each protocol's own (``WireProtocol.version``)."""

VERSION_HEADER = "x-tidegate-version"
"""Call metadata key carrying the protocol version (both directions)."""

AUTH_HEADER = "authorization"
"""Call metadata key carrying ``Bearer <token>`` when a shared token is configured."""


def bearer(token: str) -> str:
    """The ``authorization`` header value for ``token``."""
    return f"Bearer {token}"
