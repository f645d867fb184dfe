"""The storage service's Prometheus metrics (``tidegate_storage_*``).

In a registry of its own, or in the compute service's (``registry=``, with
``defaults=False``) when one replica process serves both protocols, so one
``/metrics`` endpoint shows both. Conventions as :mod:`tidegate.replica._metrics`:
base units, counters ``*_total``, frontiers as ``*_timestamp_seconds``.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge

from tidegate.runtime.metrics import register_defaults

__all__ = ["StorageMetrics"]


class StorageMetrics:
    """Every metric of one storage service (see each attribute's help text)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, defaults: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        if defaults:
            register_defaults(r, "replica")
        self.connections = Counter(
            "tidegate_storage_connections_accepted",
            "Storage controller streams accepted",
            registry=r,
        )
        self.commands = Counter(
            "tidegate_storage_commands", "Storage commands received, by kind", ["kind"], registry=r
        )
        self.command_errors = Counter(
            "tidegate_storage_command_errors",
            "Storage commands rejected with a typed error, by error class",
            ["error"],
            registry=r,
        )
        self.responses = Counter(
            "tidegate_storage_responses", "Storage responses sent, by kind", ["kind"], registry=r
        )
        self.ingested_updates = Counter(
            "tidegate_storage_ingested_updates",
            "Upstream updates received by an ingestion (rows inserted or retracted)",
            ["source"],
            registry=r,
        )
        self.ingested_bytes = Counter(
            "tidegate_storage_ingested_bytes",
            "Bytes an ingestion's reader received upstream (as the reader counts them)",
            ["source"],
            registry=r,
        )
        self.source_errors = Counter(
            "tidegate_storage_source_errors",
            "Failures of an upstream reader, by error class (each makes the ingestion stall "
            "until the replica restarts the reader)",
            ["error"],
            registry=r,
        )
        self.shard_writes = Counter(
            "tidegate_storage_shard_writes",
            "Compare-and-appends to data and remap shards, by outcome (ok, upper_mismatch, "
            "finalized, retry)",
            ["outcome"],
            registry=r,
        )
        self.written_updates = Counter(
            "tidegate_storage_written_updates",
            "Updates committed to data and remap shards",
            registry=r,
        )
        self.sink_commits = Counter(
            "tidegate_storage_sink_commits",
            "Commits to sink targets, by outcome (ok, conflict, failed)",
            ["outcome"],
            registry=r,
        )
        self.sink_updates = Counter(
            "tidegate_storage_sink_committed_updates",
            "Updates committed to sink targets",
            registry=r,
        )
        self.ingestions = Gauge(
            "tidegate_storage_ingestions", "Ingestions the replica runs", registry=r
        )
        self.sinks = Gauge("tidegate_storage_sinks", "Sinks the replica runs", registry=r)
        self.upper = Gauge(
            "tidegate_storage_upper_timestamp_seconds",
            "The last reported upper of an ingestion's data or remap collection, or of a sink "
            "(its least time, Unix time in seconds)",
            ["collection"],
            registry=r,
        )

    def forget(self, collection: str) -> None:
        """Remove the series of a dropped object."""
        with contextlib.suppress(KeyError):
            self.upper.remove(collection)
        for counter in (self.ingested_updates, self.ingested_bytes):
            with contextlib.suppress(KeyError):
                counter.remove(collection)
