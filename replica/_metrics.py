"""The replica's Prometheus metrics, in a registry of their own (one per service, never the global one).

:meth:`ReplicaMetrics.serve` exposes them in the text format on ``/metrics``.
Prometheus conventions: base units (the controller's timestamps are epoch
milliseconds: a frontier is a ``*_timestamp_seconds``, a lag ``*_seconds``;
memory in ``*_bytes``), counters ``*_total``, commands and responses counted
by ``kind``; the registry also holds the default ``process_*``/``python_*``
collectors and ``tidegate_build_info{component="replica"}``
(:func:`tidegate.runtime.metrics.register_defaults`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from tidegate.runtime.metrics import register_defaults

__all__ = ["ReplicaMetrics"]

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class ReplicaMetrics:
    """Every metric of one replica service (see each attribute's help text)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        register_defaults(r, "replica")
        self.connections = Counter(
            "tidegate_replica_connections_accepted", "Controller streams accepted", registry=r
        )
        self.commands = Counter(
            "tidegate_replica_commands", "Commands received, by kind", ["kind"], registry=r
        )
        self.command_errors = Counter(
            "tidegate_replica_command_errors",
            "Commands rejected with a typed error, by error class",
            ["error"],
            registry=r,
        )
        self.responses = Counter(
            "tidegate_replica_responses", "Responses sent, by kind", ["kind"], registry=r
        )
        self.peek_latency = Histogram(
            "tidegate_replica_peek_latency_seconds",
            "From a Peek's arrival to its answer, by result",
            ["result"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.step_latency = Histogram(
            "tidegate_replica_step_latency_seconds",
            "Duration of one replica step (executor step, reports, answers)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.step_errors = Counter(
            "tidegate_replica_step_errors", "Steps that failed in the executor", registry=r
        )
        self.frontier_lag = Gauge(
            "tidegate_replica_frontier_lag_seconds",
            "How far a collection's output frontier trails the storage uppers of its inputs, "
            "in seconds",
            ["collection"],
            registry=r,
        )
        self.output_frontier = Gauge(
            "tidegate_replica_output_frontier_timestamp_seconds",
            "A collection's last reported output frontier (its least time, Unix time in seconds)",
            ["collection"],
            registry=r,
        )
        self.arrangement_records = Gauge(
            "tidegate_replica_arrangement_records",
            "Records (with multiplicity) in an export's arrangement at its upper",
            ["collection"],
            registry=r,
        )
        self.index_in_spark = Gauge(
            "tidegate_replica_index_in_spark",
            "1 when an index keeps its history in Spark, 0.5 while it moves there, 0 in the driver",
            ["collection"],
            registry=r,
        )
        self.index_storage_failures = Gauge(
            "tidegate_replica_index_storage_failures",
            "Failed moves into Spark and failed shipments of an index's history (rows kept, retried)",
            ["collection"],
            registry=r,
        )
        self.dataflows = Gauge(
            "tidegate_replica_dataflows", "Dataflows installed (log dataflows included)", registry=r
        )
        self.reconciled = Counter(
            "tidegate_replica_reconciled_dataflows",
            "Dataflows after a reconnect's reconciliation, by outcome (reused, rebuilt, dropped)",
            ["outcome"],
            registry=r,
        )
        self.storage_reads = Gauge(
            "tidegate_replica_storage_reads", "Storage collections being followed", registry=r
        )
        self.writes = Counter(
            "tidegate_replica_writes",
            "Materialized-view appends, by outcome (ok, upper_mismatch, finalized, retry)",
            ["outcome"],
            registry=r,
        )
        self.storage_read_errors = Counter(
            "tidegate_replica_storage_read_errors",
            "Distinct failures reading a storage collection, by error class (BlobCorrupt, ...)",
            ["error"],
            registry=r,
        )
        self.memory_bytes = Gauge(
            "tidegate_replica_memory_bytes",
            "Resident memory of the replica process and its children (the JVM), in bytes, "
            "measured after each step when a memory limit is set",
            registry=r,
        )
        self.memory_limit_bytes = Gauge(
            "tidegate_replica_memory_limit_bytes",
            "The replica's memory limit in bytes (0: none)",
            registry=r,
        )
        self.dataflows_failed = Counter(
            "tidegate_replica_dataflows_failed",
            "Dataflows the replica gave up on, by reason (memory_limit)",
            ["reason"],
            registry=r,
        )
        self.unreadable_sources = Gauge(
            "tidegate_replica_unreadable_source",
            "1 while a storage collection the replica reads is unreadable (corrupt or missing "
            "data; peeks waiting on it answer an error), 0 once it is read again",
            ["collection"],
            registry=r,
        )
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._set: dict[tuple[int, str], tuple[Any, float]] = {}
        """Per (gauge, collection): its labelled child and the value last set."""

    def set_collection(self, gauge: Gauge, collection: str, value: float) -> None:
        """``gauge.labels(collection).set(value)``, skipped when the series has that value.

        A replica sets every collection's gauges after every step (many a second); most
        values did not change, and looking a labelled child up takes a lock and a tuple
        of label values each time.
        """
        key = (id(gauge), collection)
        known = self._set.get(key)
        if known is not None:
            child, last = known
            if last == value:
                return
        else:
            child = gauge.labels(collection)
        child.set(value)
        self._set[key] = (child, value)

    def remove_collection(self, gauge: Gauge, collection: str) -> None:
        """Remove ``collection``'s series of ``gauge`` (if it has one)."""
        self._set.pop((id(gauge), collection), None)
        with contextlib.suppress(KeyError):
            gauge.remove(collection)

    def forget(self, collection: str) -> None:
        """Remove the frontier series of a dropped collection."""
        for g in (
            self.frontier_lag,
            self.output_frontier,
            self.index_in_spark,
            self.index_storage_failures,
        ):
            self.remove_collection(g, collection)

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (0 picks a port) in a daemon thread; the bound port."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        return int(server.server_port)

    def close(self) -> None:
        """Stop serving (if serving)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
