"""Protobuf <-> spec dataclasses for every compute command and response.

``encode_*`` take spec objects and return generated Protobuf messages;
``decode_*`` do the reverse and raise :class:`~.errors.WireError` subclasses
for anything malformed (bad ids, unset oneofs, corrupt row payloads), never a
bare exception. ``*_to_bytes``/``*_from_bytes`` add the serialisation step.
Plans travel as typed messages, one per IR node and scalar expression (see
:mod:`.plans`).
"""

from __future__ import annotations

import functools
import uuid as _uuid
from typing import Any

from google.protobuf.message import DecodeError

from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain, Product, Row, Time
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
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
    PeekRows,
    PeekTargetKind,
    RowSetFinishing,
    Schedule,
    SinkExport,
    SourceImport,
    Status,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)

from ._rows import decode_table, encode_table
from .errors import MalformedMessage, UnknownMessageKind, WireError
from .gen import tidegate_compute_pb2 as pb
from .plans import decode_plan, encode_plan

__all__ = [
    "command_from_bytes",
    "command_to_bytes",
    "decode_command",
    "decode_response",
    "encode_command",
    "encode_response",
    "response_from_bytes",
    "response_to_bytes",
]

# ---- scalars ---------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _parse_id(text: str) -> GlobalId:
    """:meth:`GlobalId.parse`, remembered: the same few ids are in nearly every response, and
    parsing one (a regular expression) cost more than decoding the rest of a frontier report."""
    return GlobalId.parse(text)


def _id(text: str, what: str) -> GlobalId:
    try:
        return _parse_id(text)
    except TidegateError as e:
        raise MalformedMessage(f"{what}: {e}") from e


def _uuid_from(data: bytes, what: str) -> _uuid.UUID:
    if len(data) != 16:
        raise MalformedMessage(f"{what}: a UUID has 16 bytes, got {len(data)}")
    return _uuid.UUID(bytes=data)


def _enc_time(t: Time) -> pb.ProtoTimestamp:
    if type(t) is int:
        return pb.ProtoTimestamp(int=t)
    if isinstance(t, Product):
        return pb.ProtoTimestamp(
            product=pb.ProtoProduct(outer=_enc_time(t.outer), inner=_enc_time(t.inner))
        )
    raise MalformedMessage(f"cannot encode timestamp {t!r}")


def _dec_time(m: pb.ProtoTimestamp) -> Time:
    kind = m.WhichOneof("kind")
    if kind == "int":
        return m.int
    if kind == "product":
        try:
            return Product(_dec_time(m.product.outer), _dec_time(m.product.inner))
        except TidegateError as e:
            raise MalformedMessage(str(e)) from e
    raise UnknownMessageKind("timestamp without a kind")


def _enc_frontier(a: Antichain) -> pb.ProtoAntichain:
    m = pb.ProtoAntichain()
    for t in a.elements:
        if type(t) is int:  # most times: added in place, without a message to copy
            m.elements.add(int=t)
        else:
            m.elements.append(_enc_time(t))
    return m


def _dec_frontier(m: pb.ProtoAntichain) -> Antichain:
    # The common frontiers first: every response carries some, and nearly all are empty or
    # one integer time (no antichain to reduce; a u64 is a valid time).
    elements = m.elements
    if not elements:
        return Antichain.empty()
    if len(elements) == 1 and elements[0].WhichOneof("kind") == "int":
        return Antichain.from_elem(elements[0].int)
    try:
        return Antichain(_dec_time(t) for t in m.elements)
    except TidegateError as e:
        if isinstance(e, MalformedMessage | UnknownMessageKind):
            raise
        raise MalformedMessage(f"invalid frontier: {e}") from e


def _opt_frontier(msg: Any, field: str) -> Antichain | None:
    return _dec_frontier(getattr(msg, field)) if msg.HasField(field) else None


# ---- rows ------------------------------------------------------------------------


def _arity(rows: list[Row] | tuple[Row, ...]) -> int:
    return len(rows[0]) if rows else 0


def _enc_rows(rows: list[Row], extra: dict[str, list[int]]) -> pb.ProtoRows:
    arity = _arity(rows)
    return pb.ProtoRows(arrow_ipc=encode_table(rows, arity, extra), arity=arity)


def _dec_rows(m: pb.ProtoRows, extra: tuple[str, ...]) -> tuple[list[Row], dict[str, list[Any]]]:
    return decode_table(m.arrow_ipc, m.arity, extra)


def _enc_updates(updates: tuple[tuple[Time, Row, int], ...]) -> pb.ProtoRows:
    rows = [row for _, row, _ in updates]
    diffs = [d for _, _, d in updates]
    times = [t for t, _, _ in updates]
    if all(type(t) is int for t in times):
        return _enc_rows(rows, {"__time": times, "__diff": diffs})
    msg = _enc_rows(rows, {"__diff": diffs})
    msg.times.extend(_enc_time(t) for t in times)
    return msg


def _dec_updates(m: pb.ProtoRows) -> tuple[tuple[Time, Row, int], ...]:
    if m.times:
        rows, extra = _dec_rows(m, ("__diff",))
        times: list[Time] = [_dec_time(t) for t in m.times]
        if len(times) != len(rows):
            raise MalformedMessage("subscribe batch: times and rows differ in number")
    else:
        rows, extra = _dec_rows(m, ("__time", "__diff"))
        times = extra["__time"]
    return tuple(zip(times, rows, extra["__diff"], strict=True))


# ---- payloads --------------------------------------------------------------------


def _enc_instance_config(c: InstanceConfig) -> pb.ProtoInstanceConfig:
    logging = pb.ProtoLoggingConfig(
        interval_ms=c.logging.interval_ms,
        enable_logging=c.logging.enable_logging,
        log_logging=c.logging.log_logging,
        index_logs=[pb.ProtoLogIndex(variant=v, id=str(i)) for v, i in c.logging.index_logs],
    )
    m = pb.ProtoInstanceConfig(logging=logging)
    if c.expiration_offset_ms is not None:
        m.expiration_offset_ms = c.expiration_offset_ms
    if c.peek_stash_location is not None:
        m.peek_stash_location = c.peek_stash_location
    return m


def _dec_instance_config(m: pb.ProtoInstanceConfig) -> InstanceConfig:
    lg = m.logging
    logging = LoggingConfig(
        interval_ms=lg.interval_ms,
        enable_logging=lg.enable_logging,
        log_logging=lg.log_logging,
        index_logs=tuple((x.variant, _id(x.id, "log index")) for x in lg.index_logs),
    )
    return InstanceConfig(
        logging=logging,
        expiration_offset_ms=m.expiration_offset_ms if m.HasField("expiration_offset_ms") else None,
        peek_stash_location=m.peek_stash_location if m.HasField("peek_stash_location") else None,
    )


def _enc_config_value(v: bool | int | float | str) -> pb.ProtoConfigValue:
    if isinstance(v, bool):
        return pb.ProtoConfigValue(bool_value=v)
    if isinstance(v, int):
        return pb.ProtoConfigValue(int_value=v)
    if isinstance(v, float):
        return pb.ProtoConfigValue(float_value=v)
    return pb.ProtoConfigValue(string_value=v)


def _dec_config_value(m: pb.ProtoConfigValue) -> bool | int | float | str:
    kind = m.WhichOneof("kind")
    if kind is None:
        raise UnknownMessageKind("configuration value without a kind")
    value: bool | int | float | str = getattr(m, kind)
    return value


def _enc_params(p: ComputeParameters) -> pb.ProtoComputeParameters:
    m = pb.ProtoComputeParameters(
        dyncfg_updates=[
            pb.ProtoConfigEntry(name=k, value=_enc_config_value(v)) for k, v in p.dyncfg_updates
        ]
    )
    if p.max_result_size is not None:
        m.max_result_size = p.max_result_size
    if p.workload_class is not None:
        m.workload_class = p.workload_class
    return m


def _dec_params(m: pb.ProtoComputeParameters) -> ComputeParameters:
    return ComputeParameters(
        max_result_size=m.max_result_size if m.HasField("max_result_size") else None,
        workload_class=m.workload_class if m.HasField("workload_class") else None,
        dyncfg_updates=tuple((e.name, _dec_config_value(e.value)) for e in m.dyncfg_updates),
    )


def _enc_finishing(f: RowSetFinishing) -> pb.ProtoRowSetFinishing:
    m = pb.ProtoRowSetFinishing(
        order_by=[
            pb.ProtoColumnOrder(column=o.column, desc=o.desc, nulls_last=o.nulls_last)
            for o in f.order_by
        ],
        offset=f.offset,
    )
    if f.limit is not None:
        m.limit = f.limit
    if f.project is not None:
        m.project.CopyFrom(pb.ProtoProjection(columns=f.project))
    return m


def _dec_finishing(m: pb.ProtoRowSetFinishing) -> RowSetFinishing:
    return RowSetFinishing(
        order_by=tuple(ColumnOrder(o.column, o.desc, o.nulls_last) for o in m.order_by),
        limit=m.limit if m.HasField("limit") else None,
        offset=m.offset,
        project=tuple(m.project.columns) if m.HasField("project") else None,
    )


_TARGETS: dict[PeekTargetKind, pb.ProtoPeekTarget] = {
    "index": pb.PROTO_PEEK_TARGET_INDEX,
    "persist": pb.PROTO_PEEK_TARGET_PERSIST,
}
_TARGET_NAMES: dict[int, PeekTargetKind] = {v: k for k, v in _TARGETS.items()}


def _enc_peek(p: PeekDescription) -> pb.ProtoPeekDescription:
    m = pb.ProtoPeekDescription(
        uuid=p.uuid.bytes,
        id=str(p.id),
        timestamp=_enc_time(p.timestamp),
        finishing=_enc_finishing(p.finishing),
        target=_TARGETS[p.target],
    )
    if p.literal_constraints is not None:
        keys = list(p.literal_constraints)
        m.literal_constraints.CopyFrom(_enc_rows(keys, {"__count": [1] * len(keys)}))
    return m


def _dec_peek(m: pb.ProtoPeekDescription) -> PeekDescription:
    if m.target not in _TARGET_NAMES:
        raise UnknownMessageKind(f"unknown peek target {m.target}")
    constraints = None
    if m.HasField("literal_constraints"):
        rows, _ = _dec_rows(m.literal_constraints, ("__count",))
        constraints = tuple(rows)
    if not m.HasField("timestamp"):
        raise MalformedMessage("peek without a timestamp")
    return PeekDescription(
        uuid=_uuid_from(m.uuid, "peek uuid"),
        id=_id(m.id, "peek target"),
        timestamp=_dec_time(m.timestamp),
        finishing=_dec_finishing(m.finishing),
        target=_TARGET_NAMES[m.target],
        literal_constraints=constraints,
    )


def _enc_dataflow(d: DataflowDescription) -> pb.ProtoDataflowDescription:
    m = pb.ProtoDataflowDescription(
        debug_name=d.debug_name,
        source_imports=[
            pb.ProtoSourceImport(
                id=str(s.id),
                upper=_enc_frontier(s.upper),
                monotonic=s.monotonic,
                with_snapshot=s.with_snapshot,
            )
            for s in d.source_imports
        ],
        index_imports=[
            pb.ProtoIndexImport(id=str(i.id), on_id=str(i.on_id), key=i.key, monotonic=i.monotonic)
            for i in d.index_imports
        ],
        index_exports=[
            pb.ProtoIndexExport(id=str(e.id), on_id=str(e.on_id), key=e.key)
            for e in d.index_exports
        ],
        sink_exports=[_enc_sink(s) for s in d.sink_exports],
        until=_enc_frontier(d.until),
    )
    for b in d.objects_to_build:
        build = m.objects_to_build.add()
        build.id = str(b.id)
        encode_plan(b.plan, into=build.plan)
    if d.as_of is not None:
        m.as_of.CopyFrom(_enc_frontier(d.as_of))
    return m


def _enc_sink(s: SinkExport) -> pb.ProtoSinkExport:
    m = pb.ProtoSinkExport(
        id=str(s.id),
        from_id=str(s.from_id),
        with_snapshot=s.with_snapshot,
        up_to=_enc_frontier(s.up_to),
    )
    if isinstance(s.connection, SubscribeConnection):
        m.subscribe.SetInParent()
    elif isinstance(s.connection, CopyToConnection):
        m.copy_to.url = s.connection.url
    else:
        m.materialized_view.SetInParent()
    return m


def _dec_sink(m: pb.ProtoSinkExport) -> SinkExport:
    kind = m.WhichOneof("connection")
    if kind == "subscribe":
        connection: SubscribeConnection | MaterializedViewConnection | CopyToConnection = (
            SubscribeConnection()
        )
    elif kind == "materialized_view":
        connection = MaterializedViewConnection()
    elif kind == "copy_to":
        connection = CopyToConnection(m.copy_to.url)
    else:
        raise UnknownMessageKind(f"sink {m.id!r} without a connection kind")
    return SinkExport(
        id=_id(m.id, "sink export"),
        from_id=_id(m.from_id, "sink input"),
        connection=connection,
        with_snapshot=m.with_snapshot,
        up_to=_dec_frontier(m.up_to),
    )


def _dec_build(m: pb.ProtoBuildDesc) -> BuildDesc:
    oid = _id(m.id, "object")
    if not m.HasField("plan"):
        raise MalformedMessage(f"object {m.id} without a plan")
    try:
        return BuildDesc(oid, decode_plan(m.plan))
    except WireError as e:
        raise type(e)(f"object {m.id}: {e}") from e


def _dec_dataflow(m: pb.ProtoDataflowDescription) -> DataflowDescription:
    return DataflowDescription(
        debug_name=m.debug_name,
        source_imports=tuple(
            SourceImport(
                _id(s.id, "source import"), _dec_frontier(s.upper), s.monotonic, s.with_snapshot
            )
            for s in m.source_imports
        ),
        index_imports=tuple(
            IndexImport(
                _id(i.id, "index import"), _id(i.on_id, "index import"), tuple(i.key), i.monotonic
            )
            for i in m.index_imports
        ),
        objects_to_build=tuple(_dec_build(b) for b in m.objects_to_build),
        index_exports=tuple(
            IndexExport(_id(e.id, "index export"), _id(e.on_id, "index export"), tuple(e.key))
            for e in m.index_exports
        ),
        sink_exports=tuple(_dec_sink(s) for s in m.sink_exports),
        as_of=_opt_frontier(m, "as_of"),
        until=_dec_frontier(m.until),
    )


# ---- commands --------------------------------------------------------------------


def encode_command(cmd: ComputeCommand) -> pb.ProtoComputeCommand:
    """The Protobuf form of a compute command."""
    m = pb.ProtoComputeCommand()
    match cmd:
        case Hello(nonce, epoch):
            m.hello = nonce.bytes
            m.hello_epoch = epoch
        case CreateInstance(config):
            m.create_instance.CopyFrom(_enc_instance_config(config))
        case InitializationComplete():
            m.initialization_complete.SetInParent()
        case AllowWrites(id):
            m.allow_writes = str(id)
        case UpdateConfiguration(params):
            m.update_configuration.CopyFrom(_enc_params(params))
        case CreateDataflow(dataflow):
            m.create_dataflow.CopyFrom(_enc_dataflow(dataflow))
        case Schedule(id):
            m.schedule = str(id)
        case AllowCompaction(id, frontier):
            m.allow_compaction.CopyFrom(
                pb.ProtoAllowCompaction(id=str(id), frontier=_enc_frontier(frontier))
            )
        case Peek(peek):
            m.peek.CopyFrom(_enc_peek(peek))
        case CancelPeek(uuid):
            m.cancel_peek = uuid.bytes
        case _:
            raise UnknownMessageKind(f"not a compute command: {cmd!r}")
    return m


def decode_command(m: pb.ProtoComputeCommand) -> ComputeCommand:
    """The spec command a Protobuf message denotes; :class:`WireError` if it denotes none."""
    kind = m.WhichOneof("kind")
    match kind:
        case "hello":
            return Hello(_uuid_from(m.hello, "hello nonce"), m.hello_epoch)
        case "create_instance":
            return CreateInstance(_dec_instance_config(m.create_instance))
        case "initialization_complete":
            return InitializationComplete()
        case "allow_writes":
            return AllowWrites(_id(m.allow_writes, "allow_writes"))
        case "update_configuration":
            return UpdateConfiguration(_dec_params(m.update_configuration))
        case "create_dataflow":
            return CreateDataflow(_dec_dataflow(m.create_dataflow))
        case "schedule":
            return Schedule(_id(m.schedule, "schedule"))
        case "allow_compaction":
            ac = m.allow_compaction
            return AllowCompaction(_id(ac.id, "allow_compaction"), _dec_frontier(ac.frontier))
        case "peek":
            return Peek(_dec_peek(m.peek))
        case "cancel_peek":
            return CancelPeek(_uuid_from(m.cancel_peek, "cancel_peek uuid"))
    raise UnknownMessageKind("command message without a known kind (an empty or newer oneof)")


# ---- responses -------------------------------------------------------------------


def encode_response(resp: ComputeResponse) -> pb.ProtoComputeResponse:
    """The Protobuf form of a compute response."""
    m = pb.ProtoComputeResponse()
    match resp:
        case Frontiers(id, write, input, output):
            f = m.frontiers
            f.id = str(id)
            for name, value in (("write", write), ("input", input), ("output", output)):
                if value is not None:
                    getattr(f, name).CopyFrom(_enc_frontier(value))
        case PeekResponse(uuid, result):
            p = m.peek_response
            p.uuid = uuid.bytes
            match result:
                case PeekRows(rows):
                    p.rows.CopyFrom(
                        _enc_rows([r for r, _ in rows], {"__count": [c for _, c in rows]})
                    )
                case PeekError(message):
                    p.error = message
                case PeekCanceled():
                    p.canceled.SetInParent()
        case SubscribeResponse(id, result):
            s = m.subscribe_response
            s.id = str(id)
            match result:
                case SubscribeBatch(lower, upper, updates, error):
                    s.batch.lower.CopyFrom(_enc_frontier(lower))
                    s.batch.upper.CopyFrom(_enc_frontier(upper))
                    if error is not None:
                        s.batch.error = error
                    else:
                        s.batch.updates.CopyFrom(_enc_updates(updates))
                case SubscribeDroppedAt(frontier):
                    s.dropped_at.CopyFrom(_enc_frontier(frontier))
        case CopyToResponse(id, result):
            c = m.copy_to_response
            c.id = str(id)
            match result:
                case CopyToRowCount(count):
                    c.row_count = count
                case CopyToError(message):
                    c.error = message
                case CopyToDropped():
                    c.dropped.SetInParent()
        case Status(id, message):
            m.status.id = str(id)
            m.status.message = message
        case _:
            raise UnknownMessageKind(f"not a compute response: {resp!r}")
    return m


def decode_response(m: pb.ProtoComputeResponse) -> ComputeResponse:
    """The spec response a Protobuf message denotes; :class:`WireError` if it denotes none."""
    kind = m.WhichOneof("kind")
    if kind == "frontiers":
        f = m.frontiers
        return Frontiers(
            _id(f.id, "frontiers"),
            _opt_frontier(f, "write"),
            _opt_frontier(f, "input"),
            _opt_frontier(f, "output"),
        )
    if kind == "peek_response":
        p = m.peek_response
        uuid = _uuid_from(p.uuid, "peek response uuid")
        which = p.WhichOneof("result")
        if which == "rows":
            rows, extra = _dec_rows(p.rows, ("__count",))
            return PeekResponse(uuid, PeekRows(tuple(zip(rows, extra["__count"], strict=True))))
        if which == "error":
            return PeekResponse(uuid, PeekError(p.error))
        if which == "canceled":
            return PeekResponse(uuid, PeekCanceled())
        raise UnknownMessageKind("peek response without a result")
    if kind == "subscribe_response":
        s = m.subscribe_response
        id = _id(s.id, "subscribe response")
        which = s.WhichOneof("kind")
        if which == "batch":
            b = s.batch
            lower, upper = _dec_frontier(b.lower), _dec_frontier(b.upper)
            result = b.WhichOneof("result")
            if result == "error":
                return SubscribeResponse(id, SubscribeBatch(lower, upper, (), b.error))
            if result == "updates":
                return SubscribeResponse(id, SubscribeBatch(lower, upper, _dec_updates(b.updates)))
            raise UnknownMessageKind("subscribe batch without updates or error")
        if which == "dropped_at":
            return SubscribeResponse(id, SubscribeDroppedAt(_dec_frontier(s.dropped_at)))
        raise UnknownMessageKind("subscribe response without a kind")
    if kind == "copy_to_response":
        c = m.copy_to_response
        id = _id(c.id, "copy-to response")
        which = c.WhichOneof("result")
        if which == "row_count":
            return CopyToResponse(id, CopyToRowCount(c.row_count))
        if which == "error":
            return CopyToResponse(id, CopyToError(c.error))
        if which == "dropped":
            return CopyToResponse(id, CopyToDropped())
        raise UnknownMessageKind("copy-to response without a result")
    if kind == "status":
        return Status(_id(m.status.id, "status"), m.status.message)
    raise UnknownMessageKind("response message without a known kind (an empty or newer oneof)")


def command_to_bytes(cmd: ComputeCommand) -> bytes:
    return bytes(encode_command(cmd).SerializeToString())


def command_from_bytes(data: bytes) -> ComputeCommand:
    try:
        msg = pb.ProtoComputeCommand.FromString(data)
    except DecodeError as e:
        raise MalformedMessage(f"not a ProtoComputeCommand: {e}") from e
    return decode_command(msg)


def response_to_bytes(resp: ComputeResponse) -> bytes:
    return bytes(encode_response(resp).SerializeToString())


def response_from_bytes(data: bytes) -> ComputeResponse:
    try:
        msg = pb.ProtoComputeResponse.FromString(data)
    except DecodeError as e:
        raise MalformedMessage(f"not a ProtoComputeResponse: {e}") from e
    return decode_response(msg)
