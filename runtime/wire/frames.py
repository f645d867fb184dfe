"""Framing: a message too large for one gRPC message travels as fragments.

gRPC refuses a message over 4 MiB by default, and a peek of a big index can
answer far more (issue 17: a 50 MiB answer broke the replica's stream, and the
controller reconnected about three times a second, for ever). The sender cuts
the serialized message into slices of at most :data:`MAX_FRAME_BYTES`, each
sent as a :class:`ProtoFragment` frame (``more`` on all but the last); the
receiver's :class:`FrameAssembler` concatenates them and decodes the whole.
A message that fits travels as it is, so small messages cost nothing.

The protocol never sees fragments: commands and responses are the same
values, in the same order (a stream carries one message at a time, so
fragments of two messages never interleave). A peer that sends more than
:data:`MAX_MESSAGE_BYTES` in fragments of one message, or a fragment where a
message is expected, is refused with a :class:`MalformedMessage`.

>>> from tidegate.spec.protocol.commands import InitializationComplete
>>> frames = command_frames(InitializationComplete())
>>> assembler = FrameAssembler("command")
>>> [assembler.feed(f) for f in frames]
[InitializationComplete()]
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar, overload

from google.protobuf.message import DecodeError

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

from .codec import decode_command, decode_response, encode_command, encode_response
from .errors import MalformedMessage
from .gen import tidegate_compute_pb2 as pb

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_MESSAGE_BYTES",
    "FrameAssembler",
    "command_frames",
    "response_frames",
]

MAX_FRAME_BYTES = 1 << 20
"""The largest slice of a message in one frame (gRPC's default limit is 4 MiB a message)."""

MAX_MESSAGE_BYTES = 1 << 30
"""The largest message a receiver reassembles (1 GiB): more is a malformed stream."""

M = TypeVar("M", ComputeCommand, ComputeResponse)
_Proto = pb.ProtoComputeCommand | pb.ProtoComputeResponse


def _frames(whole: _Proto, cls: type[_Proto]) -> list[bytes]:
    data = whole.SerializeToString()
    if len(data) <= MAX_FRAME_BYTES:
        return [data]
    out = []
    for start in range(0, len(data), MAX_FRAME_BYTES):
        end = start + MAX_FRAME_BYTES
        frame = cls(fragment=pb.ProtoFragment(data=data[start:end], more=end < len(data)))
        out.append(frame.SerializeToString())
    return out


def command_frames(cmd: ComputeCommand) -> list[bytes]:
    """``cmd`` as the frames to send, in order (one, unless it is large)."""
    return _frames(encode_command(cmd), pb.ProtoComputeCommand)


def response_frames(resp: ComputeResponse) -> list[bytes]:
    """``resp`` as the frames to send, in order (one, unless it is large)."""
    return _frames(encode_response(resp), pb.ProtoComputeResponse)


class FrameAssembler(Generic[M]):
    """The receiving side of one stream: frames in, whole messages out.

    ``feed`` returns the message a frame completes, or ``None`` while the
    fragments of a large one arrive. It raises :class:`MalformedMessage` for
    bytes that are no message, a message bigger than :data:`MAX_MESSAGE_BYTES`,
    or a fragment inside a reassembled message; after that the stream is
    unusable (the caller ends it).
    """

    @overload
    def __init__(self: FrameAssembler[ComputeCommand], kind: Literal["command"]) -> None: ...
    @overload
    def __init__(self: FrameAssembler[ComputeResponse], kind: Literal["response"]) -> None: ...
    def __init__(self, kind: Literal["command", "response"]) -> None:
        self._kind = kind
        self._cls: type[_Proto] = (
            pb.ProtoComputeCommand if kind == "command" else pb.ProtoComputeResponse
        )
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def pending_bytes(self) -> int:
        """The bytes of a message still being reassembled."""
        return self._size

    def feed(self, raw: bytes) -> M | None:
        msg = self._parse(raw)
        if msg.WhichOneof("kind") == "fragment":
            part = msg.fragment
            self._size += len(part.data)
            if self._size > MAX_MESSAGE_BYTES:
                raise MalformedMessage(
                    f"a {self._kind} of more than {MAX_MESSAGE_BYTES} bytes in fragments"
                )
            self._parts.append(part.data)
            if part.more:
                return None
            whole, self._parts, self._size = b"".join(self._parts), [], 0
            msg = self._parse(whole)
            if msg.WhichOneof("kind") == "fragment":
                raise MalformedMessage(f"a reassembled {self._kind} is itself a fragment")
        elif self._parts:
            raise MalformedMessage(f"a whole {self._kind} between the fragments of another")
        if isinstance(msg, pb.ProtoComputeCommand):
            return decode_command(msg)  # type: ignore[return-value]
        return decode_response(msg)  # type: ignore[return-value]

    def _parse(self, raw: bytes) -> _Proto:
        try:
            return self._cls.FromString(raw)
        except DecodeError as e:
            raise MalformedMessage(f"not a {self._cls.__name__}: {e}") from e
