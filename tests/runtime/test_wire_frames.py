"""Framing: large messages as fragments, reassembled exactly; malformed streams refused typed."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.runtime.wire import frames
from tidegate.runtime.wire.errors import MalformedMessage
from tidegate.runtime.wire.frames import FrameAssembler, command_frames, response_frames
from tidegate.runtime.wire.gen import tidegate_compute_pb2 as pb
from tidegate.spec import strategies
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import Hello
from tidegate.spec.protocol.responses import PeekResponse, PeekRows, Status
from tidegate.spec.strategies.protocol import commands, responses


@settings(max_examples=60)
@given(
    messages=st.lists(responses(), max_size=6),
    frame_bytes=st.integers(1, 64),
)
def test_any_responses_reassemble_exactly_whatever_the_frame_size(
    messages: list,
    frame_bytes: int,  # type: ignore[type-arg]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frames, "MAX_FRAME_BYTES", frame_bytes)
        assembler = FrameAssembler("response")
        out = [m for r in messages for f in response_frames(r) if (m := assembler.feed(f))]
    assert out == messages and assembler.pending_bytes == 0


_PLANS = strategies.schemas().flatmap(lambda schema: strategies.plans({GlobalId.user(1): schema}))


@settings(max_examples=60)
@given(messages=st.lists(commands(plans=_PLANS), max_size=6), frame_bytes=st.integers(1, 64))
def test_any_commands_reassemble_exactly_whatever_the_frame_size(
    messages: list,
    frame_bytes: int,  # type: ignore[type-arg]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frames, "MAX_FRAME_BYTES", frame_bytes)
        assembler = FrameAssembler("command")
        out = [m for c in messages for f in command_frames(c) if (m := assembler.feed(f))]
    assert out == messages


@settings(max_examples=40)
@given(messages=st.lists(responses(), max_size=6), frame_bytes=st.integers(1, 64))
def test_a_sender_chooses_its_frame_size_and_the_receiver_reassembles_any(
    messages: list,
    frame_bytes: int,  # type: ignore[type-arg]
) -> None:
    """``max_frame_bytes`` is the sender's choice (the module default unchanged); a receiver
    reassembles fragments of any size."""
    codec = frames.COMPUTE_RESPONSES
    assembler = codec.assembler()
    sent = [codec.frames(r, max_frame_bytes=frame_bytes) for r in messages]
    out = [m for fs in sent for f in fs if (m := assembler.feed(f))]
    assert out == messages and assembler.pending_bytes == 0
    for r, fs in zip(messages, sent, strict=True):
        whole = len(codec.to_bytes(r))
        assert len(fs) == (1 if whole <= frame_bytes else -(-whole // frame_bytes))


def test_a_frame_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        frames.COMPUTE_RESPONSES.frames(Status("u1", "ok"), max_frame_bytes=0)


def test_small_messages_travel_whole_and_large_ones_in_bounded_frames() -> None:
    assert len(response_frames(Status("u1", "ok"))) == 1
    big = PeekResponse(uuid.UUID(int=1), PeekRows(tuple(((i, "x" * 1000), 1) for i in range(5000))))
    out = response_frames(big)
    assert len(out) > 4 and all(len(f) <= frames.MAX_FRAME_BYTES + 16 for f in out)
    assembler = FrameAssembler("response")
    assert [m for f in out if (m := assembler.feed(f))] == [big]


def _fragment(data: bytes, more: bool) -> bytes:
    return pb.ProtoComputeResponse(
        fragment=pb.ProtoFragment(data=data, more=more)
    ).SerializeToString()


def test_malformed_fragment_streams_are_refused_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = response_frames(Status("u1", "ok"))[0]
    # A whole message between the fragments of another.
    a = FrameAssembler("response")
    assert a.feed(_fragment(whole[:3], True)) is None
    with pytest.raises(MalformedMessage, match="between the fragments"):
        a.feed(whole)
    # Fragments whose whole is itself a fragment.
    with pytest.raises(MalformedMessage, match="itself a fragment"):
        FrameAssembler("response").feed(_fragment(_fragment(b"x", False), False))
    # More than the receiver reassembles.
    monkeypatch.setattr(frames, "MAX_MESSAGE_BYTES", 10)
    b = FrameAssembler("response")
    b.feed(_fragment(b"x" * 6, True))
    with pytest.raises(MalformedMessage, match="more than 10 bytes"):
        b.feed(_fragment(b"x" * 6, True))
    # Bytes that are no message at all, and a fragment of a command sent as a response.
    with pytest.raises(MalformedMessage):
        FrameAssembler("command").feed(b"\xff\xff\xff")
    with pytest.raises(MalformedMessage):
        FrameAssembler("response").feed(
            _fragment(command_frames(Hello(uuid.UUID(int=1)))[0], False)
        )
