"""The storage protocol's wire codec: every command and response survives the wire unchanged;
malformed bytes are a typed ``WireError``, never another exception."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.runtime.wire import MalformedMessage, UnknownMessageKind, WireError, frames
from tidegate.runtime.wire.frames import FrameAssembler
from tidegate.runtime.wire.gen import tidegate_compute_pb2 as cpb
from tidegate.runtime.wire.gen import tidegate_storage_pb2 as pb
from tidegate.runtime.wire.storage_codec import (
    STORAGE_COMMANDS,
    STORAGE_RESPONSES,
    storage_command_from_bytes,
    storage_command_to_bytes,
    storage_response_from_bytes,
    storage_response_to_bytes,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    CollectionDescription,
    DroppedId,
    ExportDescription,
    IcebergSink,
    Ingestion,
    Introspection,
    LoadGenerator,
    MaterializedView,
    Other,
    Progress,
    RunIngestion,
    RunSink,
    SinkStatistics,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageCommand,
    StorageFrontierUpper,
    StorageParameters,
    StorageResponse,
    StorageUpdateConfiguration,
    Table,
    Webhook,
)
from tidegate.spec.strategies.storage import storage_commands, storage_responses

U1 = GlobalId.user(1)
SCHEMA = Schema.of(("k", "int64", False), ("s", "string"))


@settings(max_examples=300)
@given(storage_commands())
def test_every_storage_command_round_trips(cmd: StorageCommand) -> None:
    assert storage_command_from_bytes(storage_command_to_bytes(cmd)) == cmd


@settings(max_examples=300)
@given(storage_responses())
def test_every_storage_response_round_trips(resp: StorageResponse) -> None:
    assert storage_response_from_bytes(storage_response_to_bytes(resp)) == resp


@settings(max_examples=60)
@given(
    commands=st.lists(storage_commands(), max_size=5),
    responses=st.lists(storage_responses(), max_size=5),
    frame_bytes=st.integers(1, 64),
)
def test_any_storage_messages_reassemble_exactly_whatever_the_frame_size(
    commands: list[StorageCommand], responses: list[StorageResponse], frame_bytes: int
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frames, "MAX_FRAME_BYTES", frame_bytes)
        ca, ra = STORAGE_COMMANDS.assembler(), FrameAssembler(STORAGE_RESPONSES)
        got_c = [m for c in commands for f in STORAGE_COMMANDS.frames(c) if (m := ca.feed(f))]
        got_r = [m for r in responses for f in STORAGE_RESPONSES.frames(r) if (m := ra.feed(f))]
    assert got_c == commands and got_r == responses
    assert ca.pending_bytes == ra.pending_bytes == 0


def test_every_data_source_kind_travels() -> None:
    for source in (
        Table(),
        Webhook(),
        Introspection("status-history"),
        Progress(),
        MaterializedView((GlobalId.user(3), GlobalId.system(4))),
        Other(),
        Ingestion("i1", U1, LoadGenerator("auction", 5, 7, None, 2), SCHEMA),
        Ingestion("i1"),
    ):
        cmd = RunIngestion(U1, CollectionDescription(source, Antichain([3])), Antichain([0]))
        assert storage_command_from_bytes(storage_command_to_bytes(cmd)) == cmd


def test_a_large_run_sink_travels_in_fragments() -> None:
    wide = Schema.of(*((f"column_{i:05d}_{'x' * 24}", "string") for i in range(40_000)))
    cmd = RunSink(
        U1,
        ExportDescription(
            GlobalId.user(2), "i1", Antichain([4]), IcebergSink("a", "b", "c.d"), wide
        ),
        Antichain([4]),
        True,
    )
    out = STORAGE_COMMANDS.frames(cmd)
    assert len(out) > 1
    assembler = STORAGE_COMMANDS.assembler()
    assert [m for f in out if (m := assembler.feed(f))] == [cmd]


# -- malformed bytes ------------------------------------------------------------------


def test_garbage_is_malformed_and_an_empty_message_an_unknown_kind() -> None:
    with pytest.raises(MalformedMessage):
        storage_command_from_bytes(b"\xff\xff\xff\xff")
    with pytest.raises(MalformedMessage):
        storage_response_from_bytes(b"\x0a\x05abc")
    with pytest.raises(UnknownMessageKind):
        storage_command_from_bytes(b"")
    with pytest.raises(UnknownMessageKind):
        storage_response_from_bytes(b"")


def _cmd(**fields: object) -> bytes:
    return bytes(pb.ProtoStorageCommand(**fields).SerializeToString())


def _resp(**fields: object) -> bytes:
    return bytes(pb.ProtoStorageResponse(**fields).SerializeToString())


def test_bad_ids_nonces_and_missing_parts_are_malformed() -> None:
    with pytest.raises(MalformedMessage, match="16 bytes"):
        storage_command_from_bytes(_cmd(hello=b"short"))
    with pytest.raises(MalformedMessage, match="allow_compaction"):
        storage_command_from_bytes(_cmd(allow_compaction=cpb.ProtoAllowCompaction(id="x9")))
    with pytest.raises(MalformedMessage, match="without a description"):
        storage_command_from_bytes(_cmd(run_ingestion=pb.ProtoRunIngestion(id="u1")))
    with pytest.raises(MalformedMessage, match="without a description"):
        storage_command_from_bytes(_cmd(run_sink=pb.ProtoRunSink(id="u1")))
    no_source = pb.ProtoRunIngestion(id="u1", description=pb.ProtoCollectionDescription())
    with pytest.raises(MalformedMessage, match="data source"):
        storage_command_from_bytes(_cmd(run_ingestion=no_source))
    with pytest.raises(MalformedMessage, match="dropped id"):
        storage_response_from_bytes(_resp(dropped_id="nope"))
    bad_input = pb.ProtoRunSink(id="u1", description=pb.ProtoExportDescription(from_id=""))
    with pytest.raises(MalformedMessage, match="sink input"):
        storage_command_from_bytes(_cmd(run_sink=bad_input))
    mixed = cpb.ProtoAntichain(
        elements=[cpb.ProtoTimestamp(int=1), cpb.ProtoTimestamp(product=cpb.ProtoProduct())]
    )
    with pytest.raises(MalformedMessage):
        storage_response_from_bytes(
            _resp(frontier_upper=pb.ProtoStorageFrontierUpper(id="u1", upper=mixed))
        )


def test_unset_oneofs_and_unknown_enum_values_are_unknown_kinds() -> None:
    def ingestion(**fields: object) -> bytes:
        source = pb.ProtoDataSource(ingestion=pb.ProtoIngestion(instance="i", **fields))  # type: ignore[arg-type]
        desc = pb.ProtoCollectionDescription(data_source=source)
        return _cmd(run_ingestion=pb.ProtoRunIngestion(id="u1", description=desc))

    with pytest.raises(UnknownMessageKind, match="source connection"):
        storage_command_from_bytes(ingestion(connection=pb.ProtoSourceConnection()))
    unspecified = pb.ProtoSourceConnection(load_generator=pb.ProtoLoadGenerator(kind=0))
    with pytest.raises(UnknownMessageKind, match="load generator kind"):
        storage_command_from_bytes(ingestion(connection=unspecified))
    newer = pb.ProtoSourceConnection(load_generator=pb.ProtoLoadGenerator(kind=77))  # type: ignore[arg-type]
    with pytest.raises(UnknownMessageKind, match="77"):
        storage_command_from_bytes(ingestion(connection=newer))
    bad_column = cpb.ProtoSchema(
        columns=[cpb.ProtoColumn(name="c", type=cpb.ProtoColumnType(scalar=0))]
    )
    with pytest.raises(UnknownMessageKind, match="column type"):
        storage_command_from_bytes(ingestion(schema=bad_column))
    empty_data_source = pb.ProtoCollectionDescription(data_source=pb.ProtoDataSource())
    with pytest.raises(UnknownMessageKind, match="data source"):
        storage_command_from_bytes(
            _cmd(run_ingestion=pb.ProtoRunIngestion(id="u1", description=empty_data_source))
        )
    sink = pb.ProtoExportDescription(from_id="u2", connection=pb.ProtoSinkConnection())
    with pytest.raises(UnknownMessageKind, match="sink connection"):
        storage_command_from_bytes(_cmd(run_sink=pb.ProtoRunSink(id="u1", description=sink)))
    for status in (0, 42):
        with pytest.raises(UnknownMessageKind, match="source status"):
            storage_response_from_bytes(
                _resp(status_update=pb.ProtoStatusUpdate(id="u1", status=status))  # type: ignore[arg-type]
            )
    with pytest.raises(UnknownMessageKind, match="statistics"):
        storage_response_from_bytes(_resp(statistics_update=pb.ProtoStatisticsUpdate(id="u1")))
    config = pb.ProtoStorageParameters(values=[cpb.ProtoConfigEntry(name="x")])
    with pytest.raises(UnknownMessageKind, match="configuration value"):
        storage_command_from_bytes(_cmd(update_configuration=config))


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_a_wire_error(data: bytes) -> None:
    for decode in (storage_command_from_bytes, storage_response_from_bytes):
        with contextlib.suppress(WireError):
            decode(data)


@settings(max_examples=200)
@given(storage_commands(), st.data())
def test_any_corruption_of_a_command_decodes_or_raises_a_wire_error(
    cmd: StorageCommand, data: st.DataObject
) -> None:
    raw = bytearray(storage_command_to_bytes(cmd))
    if raw:
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    with contextlib.suppress(WireError):
        storage_command_from_bytes(bytes(raw))


# -- what the wire cannot carry -------------------------------------------------------


def test_values_the_wire_cannot_carry_are_refused_when_encoding() -> None:
    def run(gen: LoadGenerator) -> RunIngestion:
        return RunIngestion(U1, CollectionDescription(Ingestion("i", U1, gen)), Antichain([0]))

    with pytest.raises(MalformedMessage, match="tick_ms"):
        storage_command_to_bytes(run(LoadGenerator(tick_ms=-1)))
    with pytest.raises(MalformedMessage, match="kind"):
        storage_command_to_bytes(run(LoadGenerator(kind="tpch")))  # type: ignore[arg-type]
    with pytest.raises(MalformedMessage, match="messages_received"):
        storage_response_to_bytes(StatisticsUpdate(U1, SourceStatistics(messages_received=-3)))
    with pytest.raises(MalformedMessage, match="bytes_committed"):
        storage_response_to_bytes(StatisticsUpdate(U1, SinkStatistics(bytes_committed=2**64)))
    with pytest.raises(UnknownMessageKind):
        storage_command_to_bytes("hello")  # type: ignore[arg-type]
    with pytest.raises(UnknownMessageKind):
        storage_response_to_bytes(StorageAllowCompaction(U1, Antichain()))  # type: ignore[arg-type]


def test_examples_pin_the_documented_shapes() -> None:
    cases: list[StorageResponse] = [
        StorageFrontierUpper(U1, Antichain()),
        DroppedId(GlobalId.transient(2**64 - 1)),
        StatusUpdate(U1, SourceStatus.STALLED, "", None),
        StatisticsUpdate(U1, SourceStatistics(offset_known=0)),
    ]
    for r in cases:
        assert storage_response_from_bytes(storage_response_to_bytes(r)) == r
    params = StorageUpdateConfiguration(StorageParameters.of(a=1.5, b=False, c="x", d=-1))
    assert storage_command_from_bytes(storage_command_to_bytes(params)) == params
    nonce = uuid.UUID(int=2**128 - 1)
    from tidegate.spec.storage import StorageHello

    assert storage_command_from_bytes(storage_command_to_bytes(StorageHello(nonce))) == (
        StorageHello(nonce)
    )
