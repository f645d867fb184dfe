"""The versioned state record of one shard: frontiers, batches, readers, writers.

Timestamps in shards are non-negative ``int`` s (as in Materialize's storage
layer); frontiers are :class:`Antichain` s of them. A state is immutable: each
transition (see :mod:`.transitions`) returns a new state with ``seqno + 1``,
which the shard store commits with a compare-and-set on the sequence number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..frontier import Antichain

__all__ = [
    "FORMAT_VERSION",
    "INLINE_PREFIX",
    "REQUEST_IDS_MAX",
    "REQUEST_RETENTION",
    "BatchMeta",
    "CriticalReader",
    "LeasedReader",
    "ShardState",
    "WriterState",
]

FORMAT_VERSION = 2
"""The version of the state record's encoding (see :mod:`.codec`): 2 adds a checksum of every
record, a digest of every batch and inline batches; records of format 1 are still read."""

_EMPTY_MAP: Mapping[str, object] = MappingProxyType({})

REQUEST_IDS_MAX = 4096
"""The most client request ids a shard's state remembers (the newest; every commit rewrites
the state, so it stays small)."""
REQUEST_RETENTION = 600_000
"""How far behind the newest recorded request's time an id is remembered at least (in the
shard's time unit: ten minutes of a table's epoch milliseconds), while the count allows."""


@dataclass(frozen=True, slots=True)
class BatchMeta:
    """One immutable batch of updates stored as a blob under ``key``.

    It holds exactly the updates with ``lower <= time < upper``; if ``since`` is
    beyond ``lower`` their times may have been advanced to ``since`` (only
    accumulations at times beyond ``since`` are exact). ``length`` counts the
    stored updates; ``min_time``/``max_time`` bound the stored times (``None``
    when empty). ``digest`` is the SHA-256 (hex) of the blob's bytes, recorded
    when it was written and checked on every read (``None`` only for a batch
    written before format 2, which is read unchecked).

    ``inline``, when set, holds the batch's bytes in the state itself and no
    blob exists (persist's inline writes: a small append costs one consensus
    write instead of a blob write and a consensus write); ``key`` then starts
    with :data:`INLINE_PREFIX`, outside every shard's blob prefix.
    """

    key: str
    lower: Antichain
    upper: Antichain
    since: Antichain
    length: int
    min_time: int | None = None
    max_time: int | None = None
    digest: str | None = None
    inline: bytes | None = None
    encoded: str | None = field(default=None, init=False, repr=False, compare=False)
    """The batch's JSON in a state record, kept by :func:`~.codec.encode_state` the first
    time it encodes the batch: a batch is immutable and lives through many commits of its
    shard, and each commit re-encodes every batch (its inline bytes in base64)."""

    @property
    def is_inline(self) -> bool:
        """Whether the batch's bytes live in the state (no blob to read, write or delete)."""
        return self.inline is not None


INLINE_PREFIX = "inline:"
"""How the key of an inline batch starts (see :class:`BatchMeta`)."""


@dataclass(frozen=True, slots=True)
class LeasedReader:
    """A reader that holds ``since`` while it heartbeats; it expires after ``lease_ms``."""

    since: Antichain
    last_heartbeat_ms: int
    lease_ms: int

    def expired(self, now_ms: int) -> bool:
        """Whether the lease ran out strictly before ``now_ms``."""
        return self.last_heartbeat_ms + self.lease_ms < now_ms


@dataclass(frozen=True, slots=True)
class CriticalReader:
    """A reader that holds ``since`` until explicitly released; ``opaque`` fences old holders."""

    since: Antichain
    opaque: int = 0


@dataclass(frozen=True, slots=True)
class WriterState:
    """What a writer last committed: its idempotency token and the upper it wrote."""

    last_token: str | None
    last_upper: Antichain
    last_heartbeat_ms: int


def _frozen(m: Mapping[str, object] | None) -> Mapping[str, object]:
    return MappingProxyType(dict(m)) if m else _EMPTY_MAP


@dataclass(frozen=True, slots=True)
class ShardState:
    """The durable state of one shard at sequence number ``seqno``.

    ``since`` is the meet of the readers' sinces (never regressing); ``upper``
    is the write frontier; ``batches`` are ordered by ``lower`` and pairwise
    disjoint; ``schema`` is an opaque text naming the rows' schema (the store
    puts the serialized Arrow schema there); ``finalized`` marks a dropped
    shard (``since = upper = []`` and no batches).
    """

    shard: str
    seqno: int = 0
    since: Antichain = field(default_factory=Antichain.bottom)
    upper: Antichain = field(default_factory=Antichain.bottom)
    batches: tuple[BatchMeta, ...] = ()
    leased_readers: Mapping[str, LeasedReader] = field(default_factory=dict)
    critical_readers: Mapping[str, CriticalReader] = field(default_factory=dict)
    writers: Mapping[str, WriterState] = field(default_factory=dict)
    schema: str | None = None
    finalized: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)
    """Client request ids of recent appends, each with the time its updates were written at
    (recorded by the same compare-and-append as the updates: see
    :func:`~.transitions.compare_and_append`), so a retry is recognised and never applied
    twice; the newest :data:`REQUEST_IDS_MAX` within :data:`REQUEST_RETENTION` of time."""

    def __post_init__(self) -> None:
        # Freeze the maps so a state can never change behind a committed seqno.
        object.__setattr__(self, "leased_readers", _frozen(self.leased_readers))
        object.__setattr__(self, "critical_readers", _frozen(self.critical_readers))
        object.__setattr__(self, "writers", _frozen(self.writers))
        object.__setattr__(self, "requests", _frozen(self.requests))

    @property
    def batch_keys(self) -> tuple[str, ...]:
        """The blob keys of every live batch, in order."""
        return tuple(b.key for b in self.batches)

    @property
    def inline_bytes(self) -> int:
        """The bytes of the inline batches the state carries (see :class:`BatchMeta`)."""
        return sum(len(b.inline) for b in self.batches if b.inline is not None)

    @property
    def length(self) -> int:
        """The number of stored updates (before consolidation)."""
        return sum(b.length for b in self.batches)

    def reader_since(self, reader_id: str) -> Antichain | None:
        """The since held by ``reader_id`` (leased or critical), or ``None`` if unknown."""
        r = self.leased_readers.get(reader_id)
        if r is not None:
            return r.since
        c = self.critical_readers.get(reader_id)
        return None if c is None else c.since

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardState):
            return NotImplemented
        return (
            self.shard == other.shard
            and self.seqno == other.seqno
            and self.since == other.since
            and self.upper == other.upper
            and self.batches == other.batches
            and dict(self.leased_readers) == dict(other.leased_readers)
            and dict(self.critical_readers) == dict(other.critical_readers)
            and dict(self.writers) == dict(other.writers)
            and self.schema == other.schema
            and self.finalized == other.finalized
            and dict(self.requests) == dict(other.requests)
        )

    __hash__ = None  # type: ignore[assignment]
