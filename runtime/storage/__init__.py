"""The durable shard store (persist): Parquet batches in a Blob store, state in a Consensus store.

``ShardStore.open("file:///dir", "sqlite:///dir/consensus.db")`` (see
:func:`default_urls`) gives the embedded defaults; ``s3://`` and
``postgresql://`` URLs select the networked backends. The semantics (pure
transitions, typed errors) come from :mod:`tidegate.spec.shard`.

The backends are :class:`FileBlob`, :class:`SqliteConsensus`, :class:`S3Blob`
and :class:`PostgresConsensus` (the last two import boto3 or psycopg only
when built); their modules are private, so import them from here.
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
    Watchable,
)

from ._file_blob import FileBlob
from ._postgres_consensus import PostgresConsensus
from ._s3_blob import S3Blob
from ._sqlite_consensus import SqliteConsensus
from .arrow_batches import DIFF, TIME, batch_schema
from .store import (
    CompactionReport,
    FrontierLike,
    Listener,
    ListenEvent,
    ShardStore,
    open_shard_store,
)
from .urls import default_urls, open_blob, open_consensus

__all__ = [
    "DIFF",
    "TIME",
    "Blob",
    "BlobMeta",
    "CompactionPolicy",
    "CompactionReport",
    "Consensus",
    "FileBlob",
    "FrontierLike",
    "ListenEvent",
    "Listener",
    "MemoryBlob",
    "MemoryConsensus",
    "PostgresConsensus",
    "S3Blob",
    "ShardState",
    "ShardStore",
    "SqliteConsensus",
    "VersionedData",
    "Watchable",
    "batch_schema",
    "default_urls",
    "open_blob",
    "open_consensus",
    "open_shard_store",
]
