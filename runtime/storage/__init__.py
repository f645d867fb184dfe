"""The durable shard store (persist): Parquet batches in a Blob store, state in a Consensus store.

``ShardStore.open("file:///dir", "sqlite:///dir/consensus.db")`` (see
:func:`default_urls`) gives the embedded defaults; ``s3://`` and
``postgresql://`` URLs select the networked backends. The semantics (pure
transitions, typed errors) come from :mod:`tidegate.spec.shard`.
"""

from tidegate.spec.shard import (
    Blob,
    BlobMeta,
    CompactionPolicy,
    Consensus,
    MemoryBlob,
    MemoryConsensus,
    ShardState,
    VersionedData,
)

from .arrow_batches import DIFF, TIME, batch_schema
from .file_blob import FileBlob
from .sqlite_consensus import SqliteConsensus
from .store import CompactionReport, Frontier, Listener, ListenEvent, ShardStore
from .urls import default_urls, open_blob, open_consensus, open_shard_store

__all__ = [
    "DIFF",
    "TIME",
    "Blob",
    "BlobMeta",
    "CompactionPolicy",
    "CompactionReport",
    "Consensus",
    "FileBlob",
    "Frontier",
    "ListenEvent",
    "Listener",
    "MemoryBlob",
    "MemoryConsensus",
    "ShardState",
    "ShardStore",
    "SqliteConsensus",
    "VersionedData",
    "batch_schema",
    "default_urls",
    "open_blob",
    "open_consensus",
    "open_shard_store",
]
