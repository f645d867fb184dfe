"""Protobuf <-> spec dataclasses for every storage command and response.

The storage protocol's counterpart of :mod:`.codec` (same conventions):
``encode_*`` take spec objects (:mod:`tidegate.spec.storage`) and return
generated Protobuf messages of ``proto/tidegate_storage.proto``; ``decode_*``
do the reverse and raise :class:`~.errors.WireError` subclasses for anything
malformed (bad ids, unset oneofs, unknown enum values, integers out of range),
never a bare exception. Encoding raises :class:`~.errors.MalformedMessage` for
a value the wire cannot carry (a negative count, a load generator kind the
protocol does not know). ``*_to_bytes``/``*_from_bytes`` add serialisation;
:data:`STORAGE_COMMANDS` and :data:`STORAGE_RESPONSES` frame large messages
as fragments (:mod:`.frames`).

Frontiers, schemas and configuration values travel as the compute protocol's
messages, through the same helpers.
"""

from __future__ import annotations

from typing import Any, Literal

from google.protobuf.message import DecodeError

from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.commands import (
    DroppedId,
    RunIngestion,
    RunSink,
    SinkStatistics,
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
    StorageResponse,
    StorageUpdateConfiguration,
)
from tidegate.spec.storage.connections import (
    SINK_COMMIT_INTERVAL_MS,
    SINK_PROGRESS_INTERVAL_MS,
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
    SourceConnection,
    StorageSinkConnection,
    sink_pacing_problem,
)
from tidegate.spec.storage.descriptions import (
    CollectionDescription,
    DataSource,
    ExportDescription,
    Ingestion,
    Introspection,
    MaterializedView,
    Other,
    Progress,
    StorageParameters,
    Table,
    Webhook,
)

from .codec import (
    _dec_config_value,
    _dec_frontier,
    _enc_config_value,
    _enc_frontier,
    _id,
    _uuid_from,
)
from .errors import MalformedMessage, UnknownMessageKind
from .frames import MessageCodec
from .gen import tidegate_compute_pb2 as cpb
from .gen import tidegate_storage_pb2 as pb
from .plans import _schema, _schema_into

__all__ = [
    "STORAGE_COMMANDS",
    "STORAGE_RESPONSES",
    "decode_storage_command",
    "decode_storage_response",
    "encode_storage_command",
    "encode_storage_response",
    "storage_command_from_bytes",
    "storage_command_to_bytes",
    "storage_response_from_bytes",
    "storage_response_to_bytes",
]

_UINT64_END = 2**64


def _u64(n: Any, what: str) -> int:
    if type(n) is not int or not 0 <= n < _UINT64_END:
        raise MalformedMessage(f"cannot encode {what} {n!r}: not an integer in 0..2**64-1")
    return n


def _text(s: Any, what: str) -> str:
    if not isinstance(s, str):
        raise MalformedMessage(f"cannot encode {what} {s!r}: not a string")
    return s


# ---- connections -------------------------------------------------------------------

_KINDS: dict[str, int] = {
    "counter": pb.PROTO_LOAD_GENERATOR_KIND_COUNTER,
    "auction": pb.PROTO_LOAD_GENERATOR_KIND_AUCTION,
}
_KIND_NAMES: dict[int, Literal["counter", "auction"]] = {
    pb.PROTO_LOAD_GENERATOR_KIND_COUNTER: "counter",
    pb.PROTO_LOAD_GENERATOR_KIND_AUCTION: "auction",
}


def _enc_source(c: SourceConnection) -> pb.ProtoSourceConnection:
    m = pb.ProtoSourceConnection()
    if isinstance(c, LoadGenerator):
        kind = _KINDS.get(c.kind)
        if kind is None:
            raise MalformedMessage(f"cannot encode load generator kind {c.kind!r}")
        g = m.load_generator
        g.kind = kind  # type: ignore[assignment]
        g.tick_ms = _u64(c.tick_ms, "tick_ms")
        g.seed = _u64(c.seed, "seed")
        g.rows_per_tick = _u64(c.rows_per_tick, "rows_per_tick")
        if c.max_cardinality is not None:
            g.max_cardinality = _u64(c.max_cardinality, "max_cardinality")
    elif isinstance(c, PostgresSource):
        p = m.postgres
        p.url, p.table = _text(c.url, "url"), _text(c.table, "table")
        p.publication, p.slot = _text(c.publication, "publication"), _text(c.slot, "slot")
    elif isinstance(c, SimulatedSource):
        m.simulated.name = _text(c.name, "simulated source name")
    else:
        raise MalformedMessage(f"cannot encode source connection {c!r}")
    return m


def _dec_source(m: pb.ProtoSourceConnection) -> SourceConnection:
    kind = m.WhichOneof("kind")
    if kind == "load_generator":
        g = m.load_generator
        name = _KIND_NAMES.get(g.kind)
        if name is None:
            raise UnknownMessageKind(f"unknown load generator kind {g.kind} (unspecified or newer)")
        return LoadGenerator(
            kind=name,
            tick_ms=g.tick_ms,
            seed=g.seed,
            max_cardinality=g.max_cardinality if g.HasField("max_cardinality") else None,
            rows_per_tick=g.rows_per_tick,
        )
    if kind == "postgres":
        p = m.postgres
        return PostgresSource(p.url, p.table, p.publication, p.slot)
    if kind == "simulated":
        return SimulatedSource(m.simulated.name)
    raise UnknownMessageKind("source connection without a kind")


def _enc_sink(c: StorageSinkConnection) -> pb.ProtoSinkConnection:
    m = pb.ProtoSinkConnection()
    if isinstance(c, IcebergSink):
        i = m.iceberg
        i.catalog_url = _text(c.catalog_url, "catalog_url")
        i.warehouse, i.table = _text(c.warehouse, "warehouse"), _text(c.table, "table")
        i.commit_interval_ms, i.progress_interval_ms = _pacing_out(c)
    elif isinstance(c, SimulatedSink):
        m.simulated.name = _text(c.name, "simulated sink name")
        m.simulated.commit_interval_ms, m.simulated.progress_interval_ms = _pacing_out(c)
    else:
        raise MalformedMessage(f"cannot encode sink connection {c!r}")
    return m


def _dec_sink(m: pb.ProtoSinkConnection) -> StorageSinkConnection:
    kind = m.WhichOneof("kind")
    if kind == "iceberg":
        i = m.iceberg
        commit, progress = _pacing_in(i)
        return IcebergSink(
            i.catalog_url,
            i.warehouse,
            i.table,
            commit_interval_ms=commit,
            progress_interval_ms=progress,
        )
    if kind == "simulated":
        commit, progress = _pacing_in(m.simulated)
        return SimulatedSink(
            m.simulated.name, commit_interval_ms=commit, progress_interval_ms=progress
        )
    raise UnknownMessageKind("sink connection without a kind")


def _pacing_out(c: StorageSinkConnection) -> tuple[int, int]:
    problem = sink_pacing_problem(c)
    if problem is not None:
        raise MalformedMessage(f"sink connection {c!r}: {problem}")
    return c.commit_interval_ms, c.progress_interval_ms


def _pacing_in(m: pb.ProtoIcebergSink | pb.ProtoSimulatedSink) -> tuple[int, int]:
    """The intervals of a sink connection (0, as an older sender leaves them: the default)."""
    return (
        m.commit_interval_ms or SINK_COMMIT_INTERVAL_MS,
        m.progress_interval_ms or SINK_PROGRESS_INTERVAL_MS,
    )


# ---- descriptions ------------------------------------------------------------------


def _enc_schema(s: Schema, into: cpb.ProtoSchema) -> None:
    if not isinstance(s, Schema):
        raise MalformedMessage(f"cannot encode schema {s!r}")
    into.SetInParent()
    _schema_into(into, s)


def _enc_data_source(d: DataSource, m: pb.ProtoDataSource) -> None:
    if isinstance(d, Ingestion):
        i = m.ingestion
        i.instance = _text(d.instance, "instance")
        if d.remap_collection is not None:
            i.remap_collection = str(d.remap_collection)
        if d.connection is not None:
            i.connection.CopyFrom(_enc_source(d.connection))
        if d.schema is not None:
            _enc_schema(d.schema, i.schema)
    elif isinstance(d, Table):
        m.table.SetInParent()
    elif isinstance(d, Webhook):
        m.webhook.SetInParent()
    elif isinstance(d, Introspection):
        m.introspection.kind = _text(d.kind, "introspection kind")
    elif isinstance(d, Progress):
        m.progress.SetInParent()
    elif isinstance(d, MaterializedView):
        m.materialized_view.SetInParent()
        m.materialized_view.inputs.extend(str(g) for g in d.inputs)
    elif isinstance(d, Other):
        m.other.SetInParent()
    else:
        raise MalformedMessage(f"cannot encode data source {d!r}")


def _dec_data_source(m: pb.ProtoDataSource) -> DataSource:
    kind = m.WhichOneof("kind")
    if kind == "ingestion":
        i = m.ingestion
        return Ingestion(
            instance=i.instance,
            remap_collection=(
                _id(i.remap_collection, "remap collection")
                if i.HasField("remap_collection")
                else None
            ),
            connection=_dec_source(i.connection) if i.HasField("connection") else None,
            schema=_schema(i.schema) if i.HasField("schema") else None,
        )
    if kind == "table":
        return Table()
    if kind == "webhook":
        return Webhook()
    if kind == "introspection":
        return Introspection(m.introspection.kind)
    if kind == "progress":
        return Progress()
    if kind == "materialized_view":
        inputs = tuple(_id(g, "materialized view input") for g in m.materialized_view.inputs)
        return MaterializedView(inputs)
    if kind == "other":
        return Other()
    raise UnknownMessageKind("data source without a kind")


def _enc_collection(d: CollectionDescription) -> pb.ProtoCollectionDescription:
    m = pb.ProtoCollectionDescription(schema=[_text(s, "schema entry") for s in d.schema])
    _enc_data_source(d.data_source, m.data_source)
    if d.since is not None:
        m.since.CopyFrom(_enc_frontier(d.since))
    if d.status_collection is not None:
        m.status_collection = str(d.status_collection)
    return m


def _dec_collection(m: pb.ProtoCollectionDescription) -> CollectionDescription:
    if not m.HasField("data_source"):
        raise MalformedMessage("collection description without a data source")
    return CollectionDescription(
        data_source=_dec_data_source(m.data_source),
        since=_dec_frontier(m.since) if m.HasField("since") else None,
        status_collection=(
            _id(m.status_collection, "status collection")
            if m.HasField("status_collection")
            else None
        ),
        schema=tuple(m.schema),
    )


def _enc_export(d: ExportDescription) -> pb.ProtoExportDescription:
    m = pb.ProtoExportDescription(
        from_id=str(d.from_id),
        instance=_text(d.instance, "instance"),
        as_of=_enc_frontier(d.as_of),
    )
    if d.connection is not None:
        m.connection.CopyFrom(_enc_sink(d.connection))
    if d.schema is not None:
        _enc_schema(d.schema, m.schema)
    return m


def _dec_export(m: pb.ProtoExportDescription) -> ExportDescription:
    return ExportDescription(
        from_id=_id(m.from_id, "sink input"),
        instance=m.instance,
        as_of=_dec_frontier(m.as_of),
        connection=_dec_sink(m.connection) if m.HasField("connection") else None,
        schema=_schema(m.schema) if m.HasField("schema") else None,
    )


def _enc_params(p: StorageParameters) -> pb.ProtoStorageParameters:
    return pb.ProtoStorageParameters(
        values=[
            cpb.ProtoConfigEntry(name=_text(k, "parameter name"), value=_enc_config_value(v))
            for k, v in p.values
        ]
    )


def _dec_params(m: pb.ProtoStorageParameters) -> StorageParameters:
    return StorageParameters(tuple((e.name, _dec_config_value(e.value)) for e in m.values))


# ---- commands ----------------------------------------------------------------------


def encode_storage_command(cmd: StorageCommand) -> pb.ProtoStorageCommand:
    """The Protobuf form of a storage command."""
    m = pb.ProtoStorageCommand()
    match cmd:
        case StorageHello(nonce, epoch):
            m.hello = nonce.bytes
            m.hello_epoch = epoch
        case StorageInitializationComplete():
            m.initialization_complete.SetInParent()
        case StorageAllowWrites():
            m.allow_writes.SetInParent()
        case StorageUpdateConfiguration(params):
            m.update_configuration.CopyFrom(_enc_params(params))
            m.update_configuration.SetInParent()
        case RunIngestion(id, description, resume_upper):
            r = m.run_ingestion
            r.id = str(id)
            r.description.CopyFrom(_enc_collection(description))
            r.resume_upper.CopyFrom(_enc_frontier(resume_upper))
        case RunSink(id, description, as_of, strict):
            s = m.run_sink
            s.id = str(id)
            s.description.CopyFrom(_enc_export(description))
            s.as_of.CopyFrom(_enc_frontier(as_of))
            s.strict = strict
        case StorageAllowCompaction(id, frontier):
            m.allow_compaction.CopyFrom(
                cpb.ProtoAllowCompaction(id=str(id), frontier=_enc_frontier(frontier))
            )
        case _:
            raise UnknownMessageKind(f"not a storage command: {cmd!r}")
    return m


def decode_storage_command(m: pb.ProtoStorageCommand) -> StorageCommand:
    """The spec command a Protobuf message denotes; :class:`WireError` if it denotes none."""
    kind = m.WhichOneof("kind")
    if kind == "hello":
        return StorageHello(_uuid_from(m.hello, "hello nonce"), m.hello_epoch)
    if kind == "initialization_complete":
        return StorageInitializationComplete()
    if kind == "allow_writes":
        return StorageAllowWrites()
    if kind == "update_configuration":
        return StorageUpdateConfiguration(_dec_params(m.update_configuration))
    if kind == "run_ingestion":
        r = m.run_ingestion
        if not r.HasField("description"):
            raise MalformedMessage(f"RunIngestion {r.id!r} without a description")
        return RunIngestion(
            _id(r.id, "run_ingestion"),
            _dec_collection(r.description),
            _dec_frontier(r.resume_upper),
        )
    if kind == "run_sink":
        s = m.run_sink
        if not s.HasField("description"):
            raise MalformedMessage(f"RunSink {s.id!r} without a description")
        return RunSink(
            _id(s.id, "run_sink"), _dec_export(s.description), _dec_frontier(s.as_of), s.strict
        )
    if kind == "allow_compaction":
        ac = m.allow_compaction
        return StorageAllowCompaction(_id(ac.id, "allow_compaction"), _dec_frontier(ac.frontier))
    raise UnknownMessageKind("storage command without a known kind (an empty or newer oneof)")


# ---- responses ---------------------------------------------------------------------

_STATUSES: dict[SourceStatus, int] = {
    s: getattr(pb, f"PROTO_SOURCE_STATUS_{s.name}") for s in SourceStatus
}
_STATUS_NAMES: dict[int, SourceStatus] = {v: k for k, v in _STATUSES.items()}
_SOURCE_COUNTERS = ("messages_received", "bytes_received", "updates_staged", "updates_committed")
_SOURCE_GAUGES = (
    "snapshot_records_known",
    "snapshot_records_staged",
    "offset_known",
    "offset_committed",
    "rehydration_latency_ms",
)
_SINK_COUNTERS = ("updates_staged", "updates_committed", "bytes_staged", "bytes_committed")


def _enc_statistics(s: SourceStatistics | SinkStatistics, m: pb.ProtoStatisticsUpdate) -> None:
    if isinstance(s, SourceStatistics):
        src = m.source
        src.SetInParent()
        for name in _SOURCE_COUNTERS:
            setattr(src, name, _u64(getattr(s, name), name))
        for name in _SOURCE_GAUGES:
            value = getattr(s, name)
            if value is not None:
                setattr(src, name, _u64(value, name))
    elif isinstance(s, SinkStatistics):
        sink = m.sink
        sink.SetInParent()
        for name in _SINK_COUNTERS:
            setattr(sink, name, _u64(getattr(s, name), name))
    else:
        raise MalformedMessage(f"cannot encode statistics {s!r}")


def _dec_statistics(m: pb.ProtoStatisticsUpdate) -> SourceStatistics | SinkStatistics:
    which = m.WhichOneof("statistics")
    if which == "source":
        src = m.source

        def gauge(name: str) -> int | None:
            return int(getattr(src, name)) if src.HasField(name) else None

        return SourceStatistics(
            src.messages_received,
            src.bytes_received,
            src.updates_staged,
            src.updates_committed,
            *(gauge(n) for n in _SOURCE_GAUGES),
        )
    if which == "sink":
        return SinkStatistics(**{n: getattr(m.sink, n) for n in _SINK_COUNTERS})
    raise UnknownMessageKind("statistics update without source or sink statistics")


def encode_storage_response(resp: StorageResponse) -> pb.ProtoStorageResponse:
    """The Protobuf form of a storage response."""
    m = pb.ProtoStorageResponse()
    match resp:
        case StorageFrontierUpper(id, upper):
            m.frontier_upper.id = str(id)
            m.frontier_upper.upper.CopyFrom(_enc_frontier(upper))
        case DroppedId(id):
            m.dropped_id = str(id)
        case StatusUpdate(id, status, error, hint):
            s = m.status_update
            s.id = str(id)
            try:
                s.status = _STATUSES[status]  # type: ignore[assignment]
            except (KeyError, TypeError):
                raise MalformedMessage(f"cannot encode status {status!r}") from None
            if error is not None:
                s.error = _text(error, "status error")
            if hint is not None:
                s.hint = _text(hint, "status hint")
        case StatisticsUpdate(id, statistics):
            m.statistics_update.id = str(id)
            _enc_statistics(statistics, m.statistics_update)
        case _:
            raise UnknownMessageKind(f"not a storage response: {resp!r}")
    return m


def decode_storage_response(m: pb.ProtoStorageResponse) -> StorageResponse:
    """The spec response a Protobuf message denotes; :class:`WireError` if it denotes none."""
    kind = m.WhichOneof("kind")
    if kind == "frontier_upper":
        f = m.frontier_upper
        return StorageFrontierUpper(_id(f.id, "frontier upper"), _dec_frontier(f.upper))
    if kind == "dropped_id":
        return DroppedId(_id(m.dropped_id, "dropped id"))
    if kind == "status_update":
        s = m.status_update
        status = _STATUS_NAMES.get(s.status)
        if status is None:
            raise UnknownMessageKind(f"unknown source status {s.status} (unspecified or newer)")
        return StatusUpdate(
            _id(s.id, "status update"),
            status,
            s.error if s.HasField("error") else None,
            s.hint if s.HasField("hint") else None,
        )
    if kind == "statistics_update":
        u = m.statistics_update
        return StatisticsUpdate(_id(u.id, "statistics update"), _dec_statistics(u))
    raise UnknownMessageKind("storage response without a known kind (an empty or newer oneof)")


def storage_command_to_bytes(cmd: StorageCommand) -> bytes:
    return bytes(encode_storage_command(cmd).SerializeToString())


def storage_command_from_bytes(data: bytes) -> StorageCommand:
    try:
        msg = pb.ProtoStorageCommand.FromString(data)
    except DecodeError as e:
        raise MalformedMessage(f"not a ProtoStorageCommand: {e}") from e
    return decode_storage_command(msg)


def storage_response_to_bytes(resp: StorageResponse) -> bytes:
    return bytes(encode_storage_response(resp).SerializeToString())


def storage_response_from_bytes(data: bytes) -> StorageResponse:
    try:
        msg = pb.ProtoStorageResponse.FromString(data)
    except DecodeError as e:
        raise MalformedMessage(f"not a ProtoStorageResponse: {e}") from e
    return decode_storage_response(msg)


STORAGE_COMMANDS: MessageCodec[StorageCommand] = MessageCodec(
    "command", pb.ProtoStorageCommand, encode_storage_command, decode_storage_command
)
"""The storage protocol's commands on the wire (framed as :mod:`.frames` describes)."""

STORAGE_RESPONSES: MessageCodec[StorageResponse] = MessageCodec(
    "response", pb.ProtoStorageResponse, encode_storage_response, decode_storage_response
)
"""The storage protocol's responses on the wire (framed as :mod:`.frames` describes)."""
