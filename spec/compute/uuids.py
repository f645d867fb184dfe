"""Deterministic UUIDs for Hello nonces and peek ids (the spec takes no randomness of its own)."""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Callable

__all__ = ["UuidFactory", "counter_uuids"]

UuidFactory = Callable[[], _uuid.UUID]


def counter_uuids(seed: int = 0) -> UuidFactory:
    """A factory of distinct UUIDs: ``seed`` in the high 64 bits, a counter from 1 in the low ones.

    Two factories with the same seed produce the same sequence; a driver that
    wants real randomness passes ``uuid.uuid4`` instead.

    >>> f = counter_uuids(7)
    >>> f().int == (7 << 64) | 1, f().int == (7 << 64) | 2
    (True, True)
    """
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must fit in 64 bits, got {seed}")
    state = [0]

    def next_uuid() -> _uuid.UUID:
        state[0] += 1
        return _uuid.UUID(int=(seed << 64) | state[0])

    return next_uuid
