"""The pure model of a durable shard (persist): state, transitions, reads, compaction.

A shard is a log of ``(row, time, diff)`` updates with a ``since`` and an
``upper``; timestamps are non-negative ``int`` s. :class:`ShardState` is the
versioned record kept in a Consensus store; the functions of
:mod:`.transitions`, :mod:`.reads` and :mod:`.compaction` validate and return
successor states (never mutating); :mod:`.codec` encodes states durably and
:mod:`.location` defines the Blob/Consensus contracts with in-memory stores.
``tidegate.runtime.storage`` drives all of this against real backends.
"""

from .codec import blob_digest, decode_state, encode_state
from .compaction import (
    CompactionPlan,
    CompactionPolicy,
    apply_compaction,
    compact_updates,
    plan_compaction,
    plan_maintenance,
)
from .location import (
    MAX_SEQNO,
    Blob,
    BlobMeta,
    Consensus,
    MemoryBlob,
    MemoryConsensus,
    VersionedData,
    Watchable,
    check_cas_arguments,
)
from .reads import (
    check_snapshot,
    listen_batches,
    listen_updates,
    snapshot_batches,
    snapshot_updates,
)
from .since_limit import SinceDowngradeLimiter
from .state import (
    FORMAT_VERSION,
    INLINE_PREFIX,
    REQUEST_IDS_MAX,
    REQUEST_RETENTION,
    BatchMeta,
    CriticalReader,
    LeasedReader,
    ShardState,
    WriterState,
)
from .transitions import (
    AppendOutcome,
    append,
    append_lower,
    check_append_times,
    compare_and_append,
    compare_and_downgrade_since,
    downgrade_since,
    expire_reader,
    expire_readers,
    finalize,
    heartbeat_reader,
    recorded_requests,
    register_critical_reader,
    register_leased_reader,
    register_schema,
)

__all__ = [
    "FORMAT_VERSION",
    "INLINE_PREFIX",
    "MAX_SEQNO",
    "REQUEST_IDS_MAX",
    "REQUEST_RETENTION",
    "AppendOutcome",
    "BatchMeta",
    "Blob",
    "BlobMeta",
    "CompactionPlan",
    "CompactionPolicy",
    "Consensus",
    "CriticalReader",
    "LeasedReader",
    "MemoryBlob",
    "MemoryConsensus",
    "ShardState",
    "SinceDowngradeLimiter",
    "VersionedData",
    "Watchable",
    "WriterState",
    "append",
    "append_lower",
    "apply_compaction",
    "blob_digest",
    "check_append_times",
    "check_cas_arguments",
    "check_snapshot",
    "compact_updates",
    "compare_and_append",
    "compare_and_downgrade_since",
    "decode_state",
    "downgrade_since",
    "encode_state",
    "expire_reader",
    "expire_readers",
    "finalize",
    "heartbeat_reader",
    "listen_batches",
    "listen_updates",
    "plan_compaction",
    "plan_maintenance",
    "recorded_requests",
    "register_critical_reader",
    "register_leased_reader",
    "register_schema",
    "snapshot_batches",
    "snapshot_updates",
]
