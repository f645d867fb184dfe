"""The wire codec: every command and response survives encode -> bytes -> decode unchanged."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given

from tidegate.runtime.wire import MalformedMessage, UnknownMessageKind
from tidegate.runtime.wire.codec import (
    command_from_bytes,
    command_to_bytes,
    response_from_bytes,
    response_to_bytes,
)
from tidegate.runtime.wire.gen import tidegate_compute_pb2 as pb
from tidegate.spec import strategies
from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    ComputeCommand,
    ComputeResponse,
    Frontiers,
    PeekResponse,
    PeekRows,
    SubscribeBatch,
    SubscribeResponse,
)

_PLANS = strategies.schemas().flatmap(lambda schema: strategies.plans({GlobalId.user(1): schema}))


@given(strategies.commands(plans=_PLANS))
def test_every_command_round_trips(cmd: ComputeCommand) -> None:
    assert command_from_bytes(command_to_bytes(cmd)) == cmd


@given(strategies.responses())
def test_every_response_round_trips(resp: ComputeResponse) -> None:
    assert response_from_bytes(response_to_bytes(resp)) == resp


def test_rows_of_many_types_and_nulls_travel_as_arrow() -> None:
    import datetime
    import decimal

    rows = (
        ((1, 2.5, "a", True, datetime.date(2026, 1, 2), decimal.Decimal("1.50"), None), 3),
        ((None, None, None, None, None, None, None), 1),
    )
    resp = PeekResponse(uuid.UUID(int=7), PeekRows(rows))
    assert response_from_bytes(response_to_bytes(resp)) == resp


def test_product_times_in_subscribe_batches_round_trip() -> None:
    batch = SubscribeBatch(
        Antichain([Product(0, 0)]),
        Antichain([Product(1, 0), Product(0, 1)]),
        ((Product(0, 0), ("x",), 2),),
    )
    resp = SubscribeResponse(GlobalId.user(1), batch)
    assert response_from_bytes(response_to_bytes(resp)) == resp


def test_garbage_bytes_are_a_malformed_message() -> None:
    with pytest.raises(MalformedMessage):
        command_from_bytes(b"\xff\xff\xff\xff")


def test_an_empty_oneof_is_an_unknown_kind() -> None:
    with pytest.raises(UnknownMessageKind):
        command_from_bytes(b"")
    with pytest.raises(UnknownMessageKind):
        response_from_bytes(b"")


def test_bad_ids_uuids_and_row_payloads_are_malformed() -> None:
    with pytest.raises(MalformedMessage, match="schedule"):
        command_from_bytes(pb.ProtoComputeCommand(schedule="x9").SerializeToString())
    with pytest.raises(MalformedMessage, match="16 bytes"):
        command_from_bytes(pb.ProtoComputeCommand(cancel_peek=b"short").SerializeToString())
    bad_rows = pb.ProtoComputeResponse(
        peek_response=pb.ProtoPeekResponse(
            uuid=bytes(16), rows=pb.ProtoRows(arrow_ipc=b"nope", arity=1)
        )
    )
    with pytest.raises(MalformedMessage, match="Arrow"):
        response_from_bytes(bad_rows.SerializeToString())


def test_invalid_frontier_elements_are_malformed() -> None:
    mixed = pb.ProtoAntichain(
        elements=[pb.ProtoTimestamp(int=1), pb.ProtoTimestamp(product=pb.ProtoProduct())]
    )
    msg = pb.ProtoComputeCommand(allow_compaction=pb.ProtoAllowCompaction(id="u1", frontier=mixed))
    with pytest.raises(MalformedMessage):
        command_from_bytes(msg.SerializeToString())
    ok = command_from_bytes(
        pb.ProtoComputeCommand(
            allow_compaction=pb.ProtoAllowCompaction(id="u1", frontier=pb.ProtoAntichain())
        ).SerializeToString()
    )
    assert ok == AllowCompaction(GlobalId.user(1), Antichain())
    assert response_from_bytes(response_to_bytes(Frontiers(GlobalId.user(1)))) == Frontiers(
        GlobalId.user(1)
    )
