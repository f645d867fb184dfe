"""The controller's Prometheus metrics: what an :class:`~tidegate.runtime.Environment` holds, at scrape time.

:class:`ControllerMetrics` is a *custom collector* in a registry of its own
(never the global one): nothing updates gauges in the background; every
scrape reads the environment's current state and turns it into metric
families. :meth:`ControllerMetrics.serve` exposes them on ``/metrics``::

    async with Environment.open(data_dir) as env:
        metrics = ControllerMetrics(env)
        host, port = metrics.serve("127.0.0.1", 9464)
        ...
        metrics.close()

Prometheus conventions: base units (times as seconds: frontiers, which are
the oracle's epoch milliseconds, become ``*_timestamp_seconds``, lags
``*_seconds``), counters named ``*_total`` with a ``kind`` label where they count
several kinds (commands, responses). A closed frontier (``[]``) reads
``+Inf``. Every family of ours is named ``tidegate_controller_*`` (``describe()``
lists them, see the help texts); the registry also holds the default
``process_*`` and ``python_*`` collectors and ``tidegate_build_info``
(:func:`register_defaults`, which the replicas' registries use as well).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidegate.runtime.hydration import catalog_hydration
from tidegate.runtime.platform import wall_ms
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)

if TYPE_CHECKING:
    from .environment import Environment
    from .sync import SyncEnvironment

__all__ = [
    "REPLICA_STATUSES",
    "STORAGE_STATUSES",
    "ControllerMetrics",
    "frontier_seconds",
    "frontier_value",
    "lag_ms",
    "policy_kind",
    "register_defaults",
]

REPLICA_STATUSES = ("connecting", "connected", "failed", "rehydrating", "dropped")
"""The replica states of ``tidegate_controller_replica_status`` (the spec's, see ``ReplicaInfo``)."""

_COLLECTION = ["name", "id", "kind"]
_REPLICA = ["replica"]
_STORAGE = ["name", "id", "kind", "type"]
_SINK_COUNTERS = ("updates_staged", "updates_committed", "bytes_staged", "bytes_committed")
_SOURCE_COUNTERS = ("messages_received", "bytes_received", "updates_staged", "updates_committed")
_SOURCE_GAUGES = ("offset_known", "offset_committed")
STORAGE_STATUSES = ("starting", "running", "paused", "stalled", "ceased", "dropped")
"""The states of ``tidegate_controller_storage_status`` (``SourceStatus``: sources and sinks)."""
_READ_ATTEMPTS = 5


def frontier_value(f: Antichain) -> float:
    """A frontier as one sample: its least element, ``+Inf`` when closed (``[]``)."""
    return float("inf") if f.is_empty() else float(min(f.elements))


def frontier_seconds(f: Antichain) -> float:
    """A frontier of epoch-ms timestamps in seconds (Prometheus' base unit); ``+Inf`` when closed."""
    return frontier_value(f) / 1000


def register_defaults(registry: CollectorRegistry, component: str) -> None:
    """Register the default collectors and ``tidegate_build_info`` in ``registry``.

    The ``process_*`` family (CPU seconds, resident memory bytes, open file
    descriptors, start time), ``python_info`` and the ``python_gc_*`` families:
    prometheus_client's ``ProcessCollector``, ``PlatformCollector`` and
    ``GCCollector``, which it registers only in its global registry by default.
    ``tidegate_build_info{version, component}`` is 1 (``component``: ``controller``
    or ``replica``).
    """
    from tidegate import __version__

    if registry is not REGISTRY:  # the global one has them from prometheus_client's import
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
    info = Gauge(
        "tidegate_build_info",
        "tidegate's version (always 1), by the component serving these metrics",
        ["version", "component"],
        registry=registry,
    )
    info.labels(__version__, component).set(1)


def lag_ms(upper: Antichain, now_ms: int) -> int | None:
    """How far ``upper`` trails the wall clock ``now_ms``, as ``tidegate status`` says; ``None`` if closed.

    A collection complete up to ``now_ms`` (its upper is ``now_ms + 1``) lags by 0.
    """
    if upper.is_empty():
        return None
    return max(0, now_ms - (int(min(upper.elements)) - 1))


def policy_kind(policy: ReadPolicy | None) -> str:
    """The kind of a read policy, as ``tidegate status`` names it; ``default`` if none is set."""
    if policy is None:
        return "default"
    kinds: dict[type[ReadPolicy], str] = {
        LagWriteFrontier: "lag",
        ValidFrom: "valid-from",
        StepBack: "step-back",
        NoPolicy: "none",
        Multiple: "multiple",
    }
    return kinds.get(type(policy), type(policy).__name__)


_KINDS = {
    "TableEntry": "table",
    "IndexEntry": "index",
    "MaterializedViewEntry": "materialized-view",
    "ViewEntry": "view",
    "SourceEntry": "source",
    "ProgressEntry": "progress",
    "SystemCollectionEntry": "system",
    "SinkEntry": "sink",
}


def _kind(entry: Any) -> str:
    return _KINDS.get(type(entry).__name__, type(entry).__name__)


class ControllerMetrics(Collector):
    """The metrics of one environment, read at scrape time (see the module docstring).

    ``env`` is an :class:`~tidegate.runtime.Environment` (or a
    :class:`~tidegate.runtime.SyncEnvironment`); ``registry`` defaults to a
    fresh :class:`CollectorRegistry`, in which this collector registers itself;
    ``clock_ms`` is the wall clock of the lag figures.

    **Thread safety.** ``collect()`` runs on whichever thread scrapes
    (prometheus-client's HTTP server thread), while the environment mutates its
    state on its event loop. It never calls into the loop (nothing async, no
    locks the loop holds); it reads only what is safe to read from another
    thread under the GIL:

    * the catalog state (``env.state``): an immutable value, swapped whole;
    * frontiers: immutable :class:`Antichain` objects the controller replaces
      whole (a since and an upper read a moment apart may come from two steps
      of the loop; each is a frontier the controller did hold);
    * frozen snapshots (``ReplicaInfo``, the orchestrator's process status),
      plain integers (history lengths, the driver's counters) and ``len`` of
      containers (pending peeks, subscribes).

    Building those snapshots iterates the controller's dicts in Python; if
    the loop resizes one meanwhile, Python raises ``RuntimeError`` and the
    scrape reads everything again (up to a few times). An object dropped
    between listing and reading is left out of that scrape. Families are
    built completely before any is returned, so one scrape never mixes two
    reads.
    """

    def __init__(
        self,
        env: Environment | SyncEnvironment,
        registry: CollectorRegistry | None = None,
        *,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        from .sync import SyncEnvironment

        self.env: Environment = env.env if isinstance(env, SyncEnvironment) else env
        self.clock_ms = clock_ms
        self.registry = registry if registry is not None else CollectorRegistry()
        register_defaults(self.registry, "controller")
        self.registry.register(self)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    # -- the collector protocol ----------------------------------------------------------------
    def describe(self) -> Iterator[Metric]:
        """The families :meth:`collect` yields, without samples (so registering reads nothing)."""
        yield from self._families().values()

    def collect(self) -> Iterator[Metric]:
        """The environment's metrics as of now (safe from any thread; see the class docstring)."""
        for attempt in range(_READ_ATTEMPTS):
            try:
                scrape = self._read()
            except RuntimeError:  # a dict of the controller changed size while we read it
                if attempt + 1 == _READ_ATTEMPTS:
                    raise
                continue
            yield from scrape
            return

    # -- serving ---------------------------------------------------------------------------------
    def serve(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Serve ``/metrics`` on ``host:port`` (0 picks a port) in a daemon thread; the bound address."""
        if self._server is not None:
            raise RuntimeError("ControllerMetrics is already serving; close() it first")
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        bound = server.server_address
        return str(bound[0]), int(bound[1])

    def close(self) -> None:
        """Stop serving (if serving); the collector stays usable for :func:`generate_latest`."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)

    # -- reading ---------------------------------------------------------------------------------
    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
        """Every family, empty, by its name without the ``tidegate_controller_`` prefix."""
        out: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for name, kind, doc, labels in _FAMILIES:
            cls = GaugeMetricFamily if kind == "gauge" else CounterMetricFamily
            out[name] = cls(f"tidegate_controller_{name}", doc, labels=labels)
        return out

    def _read(self) -> list[Metric]:
        """One scrape: every family filled from the environment (may raise ``RuntimeError``)."""
        f = self._families()
        env = self.env
        driver = env.driver
        now = self.clock_ms()
        state = env.state
        for entry in state.entries():
            try:
                since, upper = env.frontiers(entry.id)
            except (TidegateError, LookupError):  # dropped (or not yet created) meanwhile
                continue
            labels = [entry.name, str(entry.id), _kind(entry)]
            f["collection_since_timestamp_seconds"].add_metric(labels, frontier_seconds(since))
            f["collection_upper_timestamp_seconds"].add_metric(labels, frontier_seconds(upper))
            lag = lag_ms(upper, now)
            if lag is not None:
                f["collection_lag_seconds"].add_metric(labels, lag / 1000)
            kind = policy_kind(state.read_policy(entry.id))
            f["collection_read_policy"].add_metric([*labels, kind], 1)
        for info in driver.replicas():
            name = [info.replica]
            f["replica_connected"].add_metric(name, 1 if info.connected else 0)
            statuses: tuple[str, ...] = REPLICA_STATUSES
            if info.status not in statuses:
                statuses = (*statuses, info.status)
            for s in statuses:
                f["replica_status"].add_metric([*name, s], 1 if s == info.status else 0)
            f["replica_epoch"].add_metric(name, info.epoch)
            f["replica_refused_attempts"].add_metric(name, info.attempts)
        kinds = {e.id: _kind(e) for e in state.entries()}
        for h in catalog_hydration(env):
            labels = [h.name or str(h.id), str(h.id), kinds.get(h.id, ""), h.replica]
            f["collection_hydrated"].add_metric(labels, 1 if h.hydrated else 0)
            if h.seconds is not None:
                f["collection_hydration_seconds"].add_metric(labels, h.seconds)
        orchestrator = env.orchestrator
        if orchestrator is not None:
            for replica, process in orchestrator.status().items():
                f["replica_process_restarts"].add_metric([replica], process.restarts)
                running = 1 if process.state == "running" else 0
                f["replica_process_running"].add_metric([replica], running)
        views = [driver.ctl.compute.instance(i) for i in driver.ctl.compute.instance_ids()]
        f["pending_peeks"].add_metric([], sum(len(v.pending_peeks()) for v in views))
        f["live_subscribes"].add_metric([], sum(len(v.active_subscribes()) for v in views))
        f["command_history_length"].add_metric([], sum(v.history_len() for v in views))
        f["command_history_reduced_length"].add_metric(
            [], sum(v.history_reduced_count() for v in views)
        )
        for kind, n in sorted(dict(driver.commands_by_kind).items()):
            f["commands_sent"].add_metric([kind], n)
        for kind, n in sorted(dict(driver.responses_by_kind).items()):
            f["responses"].add_metric([kind], n)
        f["table_appends_acknowledged"].add_metric([], driver.appends_acknowledged)
        self._read_storage(f, now)
        return list(f.values())

    def _read_storage(self, f: dict[str, Any], now: int) -> None:
        """Sources' and sinks' status, statistics (the controller's merged ones, as
        ``mz_source_statistics`` / ``mz_sink_statistics`` hold them) and sinks' frontiers."""
        for s in self.env.storage_status():
            labels = [s.name, str(s.id), s.kind, s.type]
            for state in STORAGE_STATUSES:
                f["storage_status"].add_metric([*labels, state], 1 if s.status == state else 0)
            stats = s.statistics or {}
            if s.kind == "sink":
                f["sink_upper_timestamp_seconds"].add_metric(labels, frontier_seconds(s.upper))
                lag = lag_ms(s.upper, now)
                if lag is not None:
                    f["sink_lag_seconds"].add_metric(labels, lag / 1000)
                for key in _SINK_COUNTERS:
                    f[f"sink_{key}"].add_metric(labels, stats.get(key) or 0)
                continue
            for key in _SOURCE_COUNTERS:
                f[f"source_{key}"].add_metric(labels, stats.get(key) or 0)
            for key in _SOURCE_GAUGES:
                value = stats.get(key)
                if value is not None:
                    f[f"source_{key}"].add_metric(labels, value)


_FAMILIES: tuple[tuple[str, str, str, list[str]], ...] = (
    (
        "collection_since_timestamp_seconds",
        "gauge",
        "A collection's since: the least time it is readable at (Unix time, seconds)",
        _COLLECTION,
    ),
    (
        "collection_upper_timestamp_seconds",
        "gauge",
        "A collection's upper (write frontier): complete before it (Unix time, seconds)",
        _COLLECTION,
    ),
    (
        "collection_lag_seconds",
        "gauge",
        "How far a collection's upper trails the wall clock, in seconds (open uppers only)",
        _COLLECTION,
    ),
    (
        "collection_hydrated",
        "gauge",
        "1 once an index or materialized view is hydrated on the replica (computed up to its as_of)",
        [*_COLLECTION, "replica"],
    ),
    (
        "collection_hydration_seconds",
        "gauge",
        "How long the collection's last hydration on the replica took, in seconds (from the "
        "dataflow's creation there to its frontier passing the as_of)",
        [*_COLLECTION, "replica"],
    ),
    (
        "collection_read_policy",
        "gauge",
        "A collection's read policy kind (1 for the kind it has)",
        [*_COLLECTION, "policy"],
    ),
    ("replica_connected", "gauge", "1 while the replica's connection is up", _REPLICA),
    (
        "replica_status",
        "gauge",
        "The replica's status (1 for the one it is in)",
        [*_REPLICA, "status"],
    ),
    ("replica_epoch", "gauge", "The replica's connection epoch (+1 per reconnect)", _REPLICA),
    (
        "replica_refused_attempts",
        "gauge",
        "Connection attempts refused since the replica's current epoch began",
        _REPLICA,
    ),
    (
        "replica_process_restarts",
        "counter",
        "Restarts of a managed replica's process by the orchestrator",
        _REPLICA,
    ),
    ("replica_process_running", "gauge", "1 while a managed replica's process runs", _REPLICA),
    ("pending_peeks", "gauge", "Peeks the controller waits on", []),
    ("live_subscribes", "gauge", "Subscribes whose stream is open", []),
    ("command_history_length", "gauge", "Commands in the compute command history", []),
    (
        "command_history_reduced_length",
        "gauge",
        "The compute command history's length after its last reduction",
        [],
    ),
    (
        "commands_sent",
        "counter",
        "Compute commands sent to replicas, by kind (CreateDataflow, Peek, ...)",
        ["kind"],
    ),
    (
        "responses",
        "counter",
        "Compute responses received from replicas, by kind (Frontiers, PeekResponse, ...)",
        ["kind"],
    ),
    ("table_appends_acknowledged", "counter", "Client table appends made durable", []),
    (
        "storage_status",
        "gauge",
        "A source's or sink's status as its storage replica last reported it (1 for the one "
        "it is in; all 0 before its first report)",
        [*_STORAGE, "status"],
    ),
    (
        "sink_upper_timestamp_seconds",
        "gauge",
        "The frontier a sink's target covers: every update before it is written out (Unix "
        "time, seconds)",
        _STORAGE,
    ),
    (
        "sink_lag_seconds",
        "gauge",
        "How far what a sink's target covers trails the wall clock, in seconds",
        _STORAGE,
    ),
    ("sink_updates_staged", "counter", "Updates a sink staged for its target", _STORAGE),
    ("sink_updates_committed", "counter", "Updates a sink committed to its target", _STORAGE),
    ("sink_bytes_staged", "counter", "Bytes a sink staged for its target", _STORAGE),
    ("sink_bytes_committed", "counter", "Bytes a sink committed to its target", _STORAGE),
    (
        "source_messages_received",
        "counter",
        "Messages a source read from its upstream",
        _STORAGE,
    ),
    ("source_bytes_received", "counter", "Bytes a source read from its upstream", _STORAGE),
    ("source_updates_staged", "counter", "Updates a source staged for its shard", _STORAGE),
    ("source_updates_committed", "counter", "Updates a source committed to its shard", _STORAGE),
    (
        "source_offset_known",
        "gauge",
        "The greatest upstream offset a source knows of (its upstream's position)",
        _STORAGE,
    ),
    (
        "source_offset_committed",
        "gauge",
        "The upstream offset up to which a source has committed what it read",
        _STORAGE,
    ),
)
"""Every family: ``(name, gauge|counter, help, labels)``."""
