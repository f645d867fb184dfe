"""Where shards live: the Blob and Consensus contracts, and in-memory implementations.

*Consensus* keeps a versioned log per key (one key per shard), advanced only by
compare-and-set on the sequence number: the single point of linearization of a
shard's transitions. *Blob* keeps immutable objects by key (batch files).
The in-memory implementations are deterministic and used by tests and the
simulator; the durable ones live in ``tidegate.runtime.storage``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from ..errors import ConsensusError

__all__ = [
    "MAX_SEQNO",
    "Blob",
    "BlobMeta",
    "Consensus",
    "MemoryBlob",
    "MemoryConsensus",
    "VersionedData",
    "Watchable",
    "check_cas_arguments",
]

MAX_SEQNO = 2**63 - 1
"""Sequence numbers lie in ``[0, MAX_SEQNO]`` (a signed 64-bit column in SQL stores)."""


class VersionedData(NamedTuple):
    """One version of a consensus key: its sequence number and bytes."""

    seqno: int
    data: bytes


@dataclass(frozen=True, slots=True)
class BlobMeta:
    """A blob's key and size in bytes (``mtime`` in seconds where the backend knows it)."""

    key: str
    size: int
    mtime: float | None = None


@runtime_checkable
class Consensus(Protocol):
    """A linearizable, versioned log per key.

    ``head`` is ``None`` before the first write. ``compare_and_set(key, expected,
    new)`` commits iff the latest seqno is exactly ``expected`` (``None``: the key
    has no data) and returns whether it did; ``new.seqno <= expected`` or a seqno
    out of range raises :class:`ConsensusError`. ``scan`` lists versions with
    seqno ``>= from_seqno``, ascending, at most ``limit``. ``truncate`` deletes
    versions below ``seqno`` and returns how many (error if ``seqno`` is past the
    head or the key is unknown).
    """

    def head(self, key: str) -> VersionedData | None: ...

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool: ...

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]: ...

    def truncate(self, key: str, seqno: int) -> int: ...

    def list_keys(self) -> list[str]: ...


@runtime_checkable
class Watchable(Protocol):
    """A Consensus that can say when a key changed, so a reader need not poll it.

    ``watch(key, callback)`` calls ``callback(key)`` soon after each commit to
    ``key`` (by any writer, in any process the backend reaches) and returns the
    function that stops it. A notification is a hint: it may come late, twice,
    for a commit that changed nothing the reader cares about, or (while the
    backend's channel is down) not at all, so a reader still polls now and then;
    it only need not poll *often*. Callbacks run on the backend's thread (or the
    writer's): they must be brief and thread-safe (wake a task, set an event).
    """

    def watch(self, key: str, callback: Callable[[str], None]) -> Callable[[], None]: ...


@runtime_checkable
class Blob(Protocol):
    """Immutable objects by key: ``set`` is atomic, ``get`` is ``None`` when absent,
    ``delete`` returns the deleted size (``None`` if absent; idempotent)."""

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> int | None: ...

    def list_keys(self, prefix: str = "") -> list[BlobMeta]: ...


def check_cas_arguments(key: str, expected: int | None, new: VersionedData) -> None:
    """Validate compare-and-set arguments the same way for every backend."""
    if not 0 <= new.seqno <= MAX_SEQNO:
        raise ConsensusError(key, f"seqno {new.seqno} is outside [0, {MAX_SEQNO}]")
    if expected is not None:
        if not 0 <= expected <= MAX_SEQNO:
            raise ConsensusError(key, f"expected seqno {expected} is outside [0, {MAX_SEQNO}]")
        if new.seqno <= expected:
            raise ConsensusError(key, f"new seqno {new.seqno} is not after expected {expected}")


class MemoryConsensus:
    """Consensus in a dict (deterministic; shared by reference between store objects).

    It is :class:`Watchable`: a commit calls the key's watchers right after it
    applies, on the writer's thread.
    """

    local = True
    """In memory: calls are brief (see ``tidegate.runtime.storage.ShardStore.local``)."""

    def __init__(self) -> None:
        self._log: dict[str, list[VersionedData]] = {}
        self._watchers: dict[str, list[Callable[[str], None]]] = {}

    def watch(self, key: str, callback: Callable[[str], None]) -> Callable[[], None]:
        callbacks = self._watchers.setdefault(key, [])
        callbacks.append(callback)

        def cancel() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return cancel

    def head(self, key: str) -> VersionedData | None:
        versions = self._log.get(key)
        return versions[-1] if versions else None

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        check_cas_arguments(key, expected, new)
        head = self.head(key)
        current = None if head is None else head.seqno
        if current != expected:
            return False
        self._log.setdefault(key, []).append(VersionedData(new.seqno, bytes(new.data)))
        for callback in list(self._watchers.get(key, ())):
            callback(key)
        return True

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        return [v for v in self._log.get(key, []) if v.seqno >= from_seqno][:limit]

    def truncate(self, key: str, seqno: int) -> int:
        head = self.head(key)
        if head is None:
            raise ConsensusError(key, "cannot truncate a key with no data")
        if seqno > head.seqno:
            raise ConsensusError(key, f"cannot truncate past the head {head.seqno}")
        versions = self._log[key]
        keep = [v for v in versions if v.seqno >= seqno]
        self._log[key] = keep
        return len(versions) - len(keep)

    def list_keys(self) -> list[str]:
        return sorted(k for k, v in self._log.items() if v)


class MemoryBlob:
    """Blob in a dict (deterministic; shared by reference between store objects)."""

    local = True
    """In memory: calls are brief (see ``tidegate.runtime.storage.ShardStore.local``)."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self._objects.get(key)

    def set(self, key: str, value: bytes) -> None:
        self._objects[key] = bytes(value)

    def delete(self, key: str) -> int | None:
        value = self._objects.pop(key, None)
        return None if value is None else len(value)

    def list_keys(self, prefix: str = "") -> list[BlobMeta]:
        return [
            BlobMeta(k, len(v)) for k, v in sorted(self._objects.items()) if k.startswith(prefix)
        ]
