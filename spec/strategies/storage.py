"""Hypothesis strategies for every storage protocol command, response and payload type.

As :mod:`.protocol` does for compute: the values are *well-typed* but not
necessarily *legal* in a session (ids are arbitrary), so a codec round trip
generated from :func:`storage_commands` and :func:`storage_responses` covers
the whole wire contract; every field varies, edge values included (``u64``
extremes, empty frontiers, ``None`` gauges, empty strings). Legal sequences
are what :class:`~tidegate.spec.storage.StorageController` sends (see
:mod:`tidegate.spec.testing.storage_controller`).
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..storage import (
    CollectionDescription,
    DroppedId,
    ExportDescription,
    IcebergSink,
    Ingestion,
    LoadGenerator,
    PostgresSource,
    RunIngestion,
    RunSink,
    SimulatedSink,
    SimulatedSource,
    SinkStatistics,
    SourceBatch,
    SourceConnection,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageParameters,
    StorageResponse,
    StorageSinkConnection,
    StorageUpdateConfiguration,
)
from .plan import schemas
from .protocol import (
    U64_MAX,
    config_values,
    global_ids,
    protocol_frontiers,
    uuids,
    wire_rows,
)

__all__ = [
    "dropped_ids",
    "ingestion_descriptions",
    "load_generators",
    "run_ingestions",
    "run_sinks",
    "sink_descriptions",
    "source_batches",
    "source_connections",
    "statistics_updates",
    "status_updates",
    "storage_allow_compactions",
    "storage_commands",
    "storage_frontier_uppers",
    "storage_hellos",
    "storage_parameters",
    "storage_responses",
    "storage_sink_connections",
    "storage_update_configurations",
]

_text = st.text(max_size=12)
_interval_ms = st.integers(1, 2**53)
_counts = st.one_of(st.integers(0, 10), st.integers(0, U64_MAX >> 1))
_gauges = st.none() | _counts


def storage_parameters() -> st.SearchStrategy[StorageParameters]:
    """Storage parameters: up to four named values (names unique)."""
    return st.dictionaries(_text, config_values(), max_size=4).map(
        lambda d: StorageParameters(tuple(sorted(d.items())))
    )


def load_generators() -> st.SearchStrategy[LoadGenerator]:
    return st.builds(
        LoadGenerator,
        kind=st.sampled_from(["counter", "auction"]),
        tick_ms=st.integers(1, 10_000),
        seed=st.integers(0, U64_MAX),
        max_cardinality=st.none() | st.integers(1, 1000),
        rows_per_tick=st.integers(1, 100),
    )


def source_connections() -> st.SearchStrategy[SourceConnection]:
    """Every kind of source connection."""
    return st.one_of(
        load_generators(),
        st.builds(PostgresSource, url=_text, table=_text, publication=_text, slot=_text),
        st.builds(SimulatedSource, name=_text),
    )


def storage_sink_connections() -> st.SearchStrategy[StorageSinkConnection]:
    """Every kind of storage sink connection."""
    return st.one_of(
        st.builds(
            IcebergSink,
            catalog_url=_text,
            warehouse=_text,
            table=_text,
            commit_interval_ms=_interval_ms,
            progress_interval_ms=_interval_ms,
        ),
        st.builds(
            SimulatedSink,
            name=_text,
            commit_interval_ms=_interval_ms,
            progress_interval_ms=_interval_ms,
        ),
    )


def ingestion_descriptions() -> st.SearchStrategy[CollectionDescription]:
    """Collection descriptions of ingestions: instance, remap collection, connection and schema, each maybe unset."""
    ingestion = st.builds(
        Ingestion,
        instance=_text,
        remap_collection=st.none() | global_ids(),
        connection=st.none() | source_connections(),
        schema=st.none() | schemas(),
    )
    return st.builds(
        CollectionDescription,
        data_source=ingestion,
        since=st.none() | protocol_frontiers(),
        status_collection=st.none() | global_ids(),
    )


def sink_descriptions() -> st.SearchStrategy[ExportDescription]:
    return st.builds(
        ExportDescription,
        from_id=global_ids(),
        instance=_text,
        as_of=protocol_frontiers(),
        connection=st.none() | storage_sink_connections(),
        schema=st.none() | schemas(),
    )


def storage_hellos() -> st.SearchStrategy[StorageHello]:
    return st.builds(StorageHello, uuids())


def storage_update_configurations() -> st.SearchStrategy[StorageUpdateConfiguration]:
    return st.builds(StorageUpdateConfiguration, storage_parameters())


def run_ingestions() -> st.SearchStrategy[RunIngestion]:
    return st.builds(RunIngestion, global_ids(), ingestion_descriptions(), protocol_frontiers())


def run_sinks() -> st.SearchStrategy[RunSink]:
    return st.builds(
        RunSink, global_ids(), sink_descriptions(), protocol_frontiers(), st.booleans()
    )


def storage_allow_compactions() -> st.SearchStrategy[StorageAllowCompaction]:
    return st.builds(StorageAllowCompaction, global_ids(), protocol_frontiers())


def storage_commands() -> st.SearchStrategy[StorageCommand]:
    """Every storage command."""
    return st.one_of(
        storage_hellos(),
        st.just(StorageInitializationComplete()),
        st.just(StorageAllowWrites()),
        storage_update_configurations(),
        run_ingestions(),
        run_sinks(),
        storage_allow_compactions(),
    )


def storage_frontier_uppers() -> st.SearchStrategy[StorageFrontierUpper]:
    return st.builds(StorageFrontierUpper, global_ids(), protocol_frontiers())


def dropped_ids() -> st.SearchStrategy[DroppedId]:
    return st.builds(DroppedId, global_ids())


def status_updates() -> st.SearchStrategy[StatusUpdate]:
    return st.builds(
        StatusUpdate,
        global_ids(),
        st.sampled_from(SourceStatus),
        st.none() | _text,
        st.none() | _text,
    )


def statistics_updates() -> st.SearchStrategy[StatisticsUpdate]:
    source = st.builds(
        SourceStatistics,
        messages_received=_counts,
        bytes_received=_counts,
        updates_staged=_counts,
        updates_committed=_counts,
        snapshot_records_known=_gauges,
        snapshot_records_staged=_gauges,
        offset_known=_gauges,
        offset_committed=_gauges,
        rehydration_latency_ms=_gauges,
    )
    sink = st.builds(SinkStatistics, _counts, _counts, _counts, _counts)
    return st.builds(StatisticsUpdate, global_ids(), source | sink)


def storage_responses() -> st.SearchStrategy[StorageResponse]:
    """Every storage response."""
    return st.one_of(
        storage_frontier_uppers(), dropped_ids(), status_updates(), statistics_updates()
    )


def source_batches(lower: int = 0, max_span: int = 5) -> st.SearchStrategy[SourceBatch]:
    """Well-formed source batches from offset ``lower``: every update's offset below the upper."""

    @st.composite
    def build(draw: st.DrawFn) -> SourceBatch:
        upper = draw(st.integers(lower, lower + max_span))
        offsets = st.integers(lower, upper - 1) if upper > lower else st.nothing()
        updates = draw(
            st.lists(st.tuples(wire_rows(2), offsets, st.sampled_from([1, -1, 2])), max_size=4)
            if upper > lower
            else st.just([])
        )
        return SourceBatch(tuple(updates), upper, draw(st.integers(0, 1 << 20)))

    return build()
