"""Hypothesis strategies for every compute command, response and payload type.

The values are *well-typed* but not necessarily *legal* in a session (ids and
uuids are arbitrary): use them for codec round trips and for fuzzing error
paths. Every field of every message varies, including edge values (``u64``
extremes, empty frontiers, NULLs, empty strings), so a codec round-trip test
generated from :func:`commands` and :func:`responses` covers the whole wire
contract. Legal command sequences come from the state machines in
:mod:`tidegate.spec.testing.protocol`.

Times are ``int`` (the wire type is ``u64``). Plans inside ``BuildDesc`` come
from the ``plans`` argument of :func:`build_descs` / :func:`dataflow_descriptions`
(a placeholder string by default).
"""

from __future__ import annotations

import uuid as _uuid
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from ..frontier import Antichain
from ..ids import GlobalId
from ..plan.numeric import reduce as reduce_numeric
from ..protocol import (
    AllowCompaction,
    AllowWrites,
    BuildDesc,
    CancelPeek,
    ColumnOrder,
    ComputeCommand,
    ComputeParameters,
    ComputeResponse,
    CopyToConnection,
    CopyToDropped,
    CopyToError,
    CopyToResponse,
    CopyToRowCount,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekResult,
    PeekRows,
    RowSetFinishing,
    Schedule,
    SinkConnection,
    SinkExport,
    SourceImport,
    Status,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
    SubscribeResult,
    UpdateConfiguration,
)

__all__ = [
    "allow_compactions",
    "allow_writes",
    "build_descs",
    "cancel_peeks",
    "column_orders",
    "commands",
    "compute_parameters",
    "config_values",
    "copy_to_responses",
    "create_dataflows",
    "create_instances",
    "dataflow_descriptions",
    "frontiers_responses",
    "global_ids",
    "hellos",
    "index_exports",
    "index_imports",
    "instance_configs",
    "logging_configs",
    "peek_descriptions",
    "peek_responses",
    "peek_results",
    "peeks",
    "protocol_frontiers",
    "protocol_times",
    "responses",
    "row_batches",
    "row_set_finishings",
    "schedules",
    "sink_connections",
    "sink_exports",
    "source_imports",
    "statuses",
    "subscribe_batches",
    "subscribe_responses",
    "subscribe_results",
    "update_configurations",
    "uuids",
    "wire_row_values",
    "wire_rows",
]

U64_MAX = 2**64 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

_names = st.text(max_size=12)


def protocol_times() -> st.SearchStrategy[int]:
    """``u64`` timestamps: mostly small (so they collide and order interestingly), sometimes extreme."""
    return st.one_of(
        st.integers(0, 20),
        st.sampled_from([0, 1, 2**32, 2**63, U64_MAX]),
        st.integers(0, U64_MAX),
    )


def protocol_frontiers() -> st.SearchStrategy[Antichain]:
    """Frontiers over ``u64`` times: ``[t]`` or the empty frontier ``[]``."""
    return st.one_of(st.just(Antichain()), protocol_times().map(Antichain.from_elem))


def global_ids() -> st.SearchStrategy[GlobalId]:
    """GlobalIds in every namespace (``s``, ``u``, ``t``), small and ``u64``-large numbers."""
    return st.builds(
        GlobalId,
        st.sampled_from(["s", "u", "t"]),
        st.one_of(st.integers(0, 20), st.integers(0, U64_MAX)),
    )


def uuids() -> st.SearchStrategy[_uuid.UUID]:
    """Deterministic (Hypothesis-drawn) UUIDs, including the nil and max UUID."""
    return st.one_of(
        st.sampled_from([_uuid.UUID(int=0), _uuid.UUID(int=2**128 - 1)]),
        st.integers(0, 2**128 - 1).map(lambda n: _uuid.UUID(int=n)),
    )


def _numerics() -> st.SearchStrategy[Decimal]:
    """Numerics (reduced, as values are) of up to 40 digits before the point and 40 after."""
    return st.builds(
        lambda i, e: reduce_numeric(Decimal(i).scaleb(-e)),
        st.integers(-(10**40), 10**40),
        st.integers(-3, 40),
    )


def wire_row_values() -> st.SearchStrategy[Any]:
    """One column value: NULL, bool, int64, finite float, text or numeric."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(I64_MIN, I64_MAX),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        _numerics(),
    )


def wire_rows(max_arity: int = 4) -> st.SearchStrategy[tuple[Any, ...]]:
    """A row: a tuple of up to ``max_arity`` column values (possibly empty)."""
    return st.lists(wire_row_values(), max_size=max_arity).map(tuple)


_COLUMN_TYPES: tuple[st.SearchStrategy[Any], ...] = (
    st.booleans(),
    st.integers(I64_MIN, I64_MAX),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    _numerics(),
)


def row_batches(
    min_size: int = 0, max_size: int = 4, max_arity: int = 4
) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Rows that could come from one collection: one arity, one type per column, NULLs allowed."""

    @st.composite
    def build(draw: st.DrawFn) -> list[tuple[Any, ...]]:
        arity = draw(st.integers(0, max_arity))
        columns = [
            draw(st.sampled_from(_COLUMN_TYPES))
            | (st.none() if draw(st.booleans()) else st.nothing())
            for _ in range(arity)
        ]
        return draw(st.lists(st.tuples(*columns), min_size=min_size, max_size=max_size))

    return build()


def config_values() -> st.SearchStrategy[bool | int | float | str]:
    """A dyncfg value: bool, int64, finite float or text."""
    return st.one_of(
        st.booleans(),
        st.integers(I64_MIN, I64_MAX),
        st.floats(allow_nan=False),
        st.text(max_size=8),
    )


# -- payloads -----------------------------------------------------------------------


def logging_configs(
    index_ids: st.SearchStrategy[GlobalId] | None = None,
) -> st.SearchStrategy[LoggingConfig]:
    """Logging configs; ``index_logs`` names distinct log indexes (ids from ``index_ids``)."""
    ids = index_ids if index_ids is not None else global_ids()
    logs = st.lists(st.tuples(_names, ids), max_size=3, unique_by=lambda p: p[1]).map(tuple)
    return st.builds(
        LoggingConfig,
        interval_ms=st.integers(0, U64_MAX),
        enable_logging=st.booleans(),
        log_logging=st.booleans(),
        index_logs=logs,
    )


def instance_configs(
    index_ids: st.SearchStrategy[GlobalId] | None = None,
) -> st.SearchStrategy[InstanceConfig]:
    """Instance configs: logging, optional expiration offset, optional peek-stash location."""
    return st.builds(
        InstanceConfig,
        logging=logging_configs(index_ids),
        expiration_offset_ms=st.none() | st.integers(0, U64_MAX),
        peek_stash_location=st.none() | st.text(max_size=16),
    )


def compute_parameters() -> st.SearchStrategy[ComputeParameters]:
    """Parameters with every field independently set or unset; dyncfg names may repeat."""
    return st.builds(
        ComputeParameters,
        max_result_size=st.none() | st.integers(0, U64_MAX),
        workload_class=st.none() | st.text(max_size=8),
        dyncfg_updates=st.lists(st.tuples(_names, config_values()), max_size=4).map(tuple),
    )


def column_orders() -> st.SearchStrategy[ColumnOrder]:
    return st.builds(
        ColumnOrder, column=st.integers(0, 2**32 - 1), desc=st.booleans(), nulls_last=st.booleans()
    )


def row_set_finishings() -> st.SearchStrategy[RowSetFinishing]:
    """ORDER BY / LIMIT / OFFSET / projection, each present or absent."""
    return st.builds(
        RowSetFinishing,
        order_by=st.lists(column_orders(), max_size=3).map(tuple),
        limit=st.none() | st.integers(0, U64_MAX),
        offset=st.integers(0, U64_MAX),
        project=st.none() | st.lists(st.integers(0, 2**32 - 1), max_size=4).map(tuple),
    )


def peek_descriptions(
    ids: st.SearchStrategy[GlobalId] | None = None,
    times: st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[PeekDescription]:
    """Peeks of either target kind; ``literal_constraints`` is ``None`` or a non-empty tuple of rows."""
    return st.builds(
        PeekDescription,
        uuid=uuids(),
        id=ids if ids is not None else global_ids(),
        timestamp=times if times is not None else protocol_times(),
        finishing=row_set_finishings(),
        target=st.sampled_from(["index", "persist"]),
        literal_constraints=st.none() | row_batches(min_size=1, max_size=3).map(tuple),
    )


def source_imports(
    ids: st.SearchStrategy[GlobalId] | None = None,
) -> st.SearchStrategy[SourceImport]:
    return st.builds(
        SourceImport,
        id=ids if ids is not None else global_ids(),
        upper=protocol_frontiers(),
        monotonic=st.booleans(),
        with_snapshot=st.booleans(),
    )


def _keys() -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(0, 2**32 - 1), max_size=3).map(tuple)


def index_imports(ids: st.SearchStrategy[GlobalId] | None = None) -> st.SearchStrategy[IndexImport]:
    return st.builds(
        IndexImport,
        id=ids if ids is not None else global_ids(),
        on_id=global_ids(),
        key=_keys(),
        monotonic=st.booleans(),
    )


def build_descs(
    ids: st.SearchStrategy[GlobalId] | None = None,
    plans: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[BuildDesc]:
    """Objects to build; ``plans`` defaults to a placeholder string (swap in real plan strategies)."""
    return st.builds(
        BuildDesc,
        id=ids if ids is not None else global_ids(),
        plan=plans if plans is not None else st.text(max_size=8).map(lambda s: f"plan:{s}"),
    )


def index_exports(ids: st.SearchStrategy[GlobalId] | None = None) -> st.SearchStrategy[IndexExport]:
    return st.builds(
        IndexExport, id=ids if ids is not None else global_ids(), on_id=global_ids(), key=_keys()
    )


def sink_connections() -> st.SearchStrategy[SinkConnection]:
    plain: st.SearchStrategy[SinkConnection] = st.sampled_from(
        [SubscribeConnection(), MaterializedViewConnection()]
    )
    copy_to: st.SearchStrategy[SinkConnection] = st.builds(
        CopyToConnection, st.sampled_from(["file:///tmp/out", "s3://bucket/prefix?region=r"])
    )
    return st.one_of(plain, copy_to)


def sink_exports(
    ids: st.SearchStrategy[GlobalId] | None = None,
    connections: st.SearchStrategy[SinkConnection] | None = None,
) -> st.SearchStrategy[SinkExport]:
    return st.builds(
        SinkExport,
        id=ids if ids is not None else global_ids(),
        from_id=global_ids(),
        connection=connections if connections is not None else sink_connections(),
        with_snapshot=st.booleans(),
        up_to=protocol_frontiers(),
    )


def dataflow_descriptions(
    plans: st.SearchStrategy[Any] | None = None,
    as_ofs: st.SearchStrategy[Antichain | None] | None = None,
) -> st.SearchStrategy[DataflowDescription]:
    """Dataflows with every part present or absent; export ids are distinct within the dataflow.

    ``as_ofs`` defaults to any frontier or ``None`` (unset, which a session rejects).
    """

    @st.composite
    def build(draw: st.DrawFn) -> DataflowDescription:
        export_ids = draw(st.lists(global_ids(), unique=True, max_size=4))
        n_index = draw(st.integers(0, len(export_ids)))
        return DataflowDescription(
            debug_name=draw(_names),
            source_imports=tuple(draw(st.lists(source_imports(), max_size=2))),
            index_imports=tuple(draw(st.lists(index_imports(), max_size=2))),
            objects_to_build=tuple(draw(st.lists(build_descs(plans=plans), max_size=2))),
            index_exports=tuple(draw(index_exports(st.just(g))) for g in export_ids[:n_index]),
            sink_exports=tuple(draw(sink_exports(st.just(g))) for g in export_ids[n_index:]),
            as_of=draw(as_ofs if as_ofs is not None else st.none() | protocol_frontiers()),
            until=draw(protocol_frontiers()),
        )

    return build()


# -- commands -----------------------------------------------------------------------


def hellos() -> st.SearchStrategy[Hello]:
    return st.builds(Hello, uuids())


def create_instances() -> st.SearchStrategy[CreateInstance]:
    return st.builds(CreateInstance, instance_configs())


def update_configurations() -> st.SearchStrategy[UpdateConfiguration]:
    return st.builds(UpdateConfiguration, compute_parameters())


def create_dataflows(
    plans: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[CreateDataflow]:
    return st.builds(CreateDataflow, dataflow_descriptions(plans))


def schedules() -> st.SearchStrategy[Schedule]:
    return st.builds(Schedule, global_ids())


def allow_writes() -> st.SearchStrategy[AllowWrites]:
    return st.builds(AllowWrites, global_ids())


def allow_compactions() -> st.SearchStrategy[AllowCompaction]:
    return st.builds(AllowCompaction, global_ids(), protocol_frontiers())


def peeks() -> st.SearchStrategy[Peek]:
    return st.builds(Peek, peek_descriptions())


def cancel_peeks() -> st.SearchStrategy[CancelPeek]:
    return st.builds(CancelPeek, uuids())


def commands(plans: st.SearchStrategy[Any] | None = None) -> st.SearchStrategy[ComputeCommand]:
    """Any compute command, every variant and field (not necessarily legal in a session)."""
    return st.one_of(
        hellos(),
        create_instances(),
        st.just(InitializationComplete()),
        allow_writes(),
        update_configurations(),
        create_dataflows(plans),
        schedules(),
        allow_compactions(),
        peeks(),
        cancel_peeks(),
    )


# -- responses ----------------------------------------------------------------------


def frontiers_responses() -> st.SearchStrategy[Frontiers]:
    """Frontier reports with each of write/input/output independently present or ``None``."""
    maybe = st.none() | protocol_frontiers()
    return st.builds(Frontiers, global_ids(), write=maybe, input=maybe, output=maybe)


def peek_results() -> st.SearchStrategy[PeekResult]:
    """Rows (positive multiplicities), an error message, or canceled."""
    rows_result = row_batches().flatmap(
        lambda rows: st.lists(st.integers(1, I64_MAX), min_size=len(rows), max_size=len(rows)).map(
            lambda counts: PeekRows(tuple(zip(rows, counts, strict=True)))
        )
    )
    return st.one_of(
        rows_result, st.builds(PeekError, st.text(max_size=16)), st.just(PeekCanceled())
    )


def peek_responses() -> st.SearchStrategy[PeekResponse]:
    return st.builds(PeekResponse, uuids(), peek_results())


def subscribe_batches() -> st.SearchStrategy[SubscribeBatch]:
    """Batches with arbitrary bounds and either ``(time, row, diff)`` updates or an error."""

    @st.composite
    def updates(draw: st.DrawFn) -> tuple[tuple[Any, Any, int], ...]:
        rows = draw(row_batches())
        n = len(rows)
        times = draw(st.lists(protocol_times(), min_size=n, max_size=n))
        diffs = draw(st.lists(st.integers(I64_MIN, I64_MAX), min_size=n, max_size=n))
        return tuple(zip(times, rows, diffs, strict=True))

    ok = st.builds(
        SubscribeBatch, lower=protocol_frontiers(), upper=protocol_frontiers(), updates=updates()
    )
    failed = st.builds(
        SubscribeBatch,
        lower=protocol_frontiers(),
        upper=protocol_frontiers(),
        error=st.text(max_size=16),
    )
    return ok | failed


def subscribe_results() -> st.SearchStrategy[SubscribeResult]:
    return st.one_of(subscribe_batches(), st.builds(SubscribeDroppedAt, protocol_frontiers()))


def subscribe_responses() -> st.SearchStrategy[SubscribeResponse]:
    return st.builds(SubscribeResponse, global_ids(), subscribe_results())


def copy_to_responses() -> st.SearchStrategy[CopyToResponse]:
    """Copy-to answers: a row count, an error or ``CopyToDropped``."""
    results = st.one_of(
        st.builds(CopyToRowCount, st.integers(0, 2**63 - 1)),
        st.builds(CopyToError, st.text(max_size=16)),
        st.just(CopyToDropped()),
    )
    return st.builds(CopyToResponse, global_ids(), results)


def statuses() -> st.SearchStrategy[Status]:
    return st.builds(Status, global_ids(), st.text(max_size=16))


def responses() -> st.SearchStrategy[ComputeResponse]:
    """Any compute response, every variant and field (not necessarily legal in a session)."""
    return st.one_of(
        frontiers_responses(),
        peek_responses(),
        subscribe_responses(),
        copy_to_responses(),
        statuses(),
    )
