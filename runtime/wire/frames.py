"""Framing: a message too large for one gRPC message travels as fragments.

gRPC refuses a message over 4 MiB by default, and a peek of a big index can
answer far more (a 50 MiB answer once broke the replica's stream, and the
controller reconnected about three times a second, for ever). The sender cuts
the serialized message into slices of at most :data:`MAX_FRAME_BYTES`, each
sent as a :class:`ProtoFragment` frame (``more`` on all but the last); the
receiver's :class:`FrameAssembler` concatenates them and decodes the whole.
A message that fits travels as it is, so small messages cost nothing.

Both protocols frame alike: a :class:`MessageCodec` describes one direction
of one protocol (its Protobuf envelope, whose ``kind`` oneof has a
``fragment`` member, and the codec of its values); :data:`COMPUTE_COMMANDS`
and :data:`COMPUTE_RESPONSES` are the compute protocol's, the storage
protocol's are in :mod:`.storage_codec`.

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

from collections.abc import Callable
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

from google.protobuf.message import DecodeError, Message

from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

from .codec import decode_command, decode_response, encode_command, encode_response
from .errors import MalformedMessage, WireError
from .gen import tidegate_compute_pb2 as pb

__all__ = [
    "COMPUTE_COMMANDS",
    "COMPUTE_RESPONSES",
    "MAX_FRAME_BYTES",
    "MAX_MESSAGE_BYTES",
    "FrameAssembler",
    "MessageCodec",
    "command_frames",
    "response_frames",
]

MAX_FRAME_BYTES = 1 << 20
"""The largest slice of a message in one frame (gRPC's default limit is 4 MiB a message)."""

MAX_MESSAGE_BYTES = 1 << 30
"""The largest message a receiver reassembles (1 GiB): more is a malformed stream."""

M = TypeVar("M")


class Envelope(Protocol):
    """What framing needs of a protocol's Protobuf envelope class.

    The class itself (``pb.ProtoComputeCommand``, ``ProtoStorageResponse``, ...)
    satisfies it: it builds an envelope around a fragment and parses one from
    bytes. Typing the constructor this narrowly, rather than as
    ``type[Message]`` (whose constructor takes no fields), is what lets mypy
    check the ``fragment=`` call.
    """

    def __call__(self, *, fragment: pb.ProtoFragment) -> Message: ...

    def FromString(self, s: bytes, /) -> Message: ...


class MessageCodec(Generic[M]):
    """One direction of one wire protocol: its Protobuf ``envelope`` and the codec of its values.

    ``kind`` names the messages in errors (``"command"``, ``"response"``);
    ``envelope`` is the Protobuf envelope class (an :class:`Envelope`);
    ``encode`` turns a value into an envelope, ``decode`` an envelope into a
    value (raising :class:`~.errors.WireError`). The envelope's ``kind``
    oneof must have a ``fragment`` member of type ``ProtoFragment``.
    """

    def __init__(
        self,
        kind: str,
        envelope: Envelope,
        encode: Callable[[M], Message],
        decode: Callable[[Any], M],
    ) -> None:
        self.kind = kind
        self.envelope = envelope
        # The envelope's Protobuf name, for errors (a class's __name__ is no protocol member).
        self.envelope_name: str = envelope(fragment=pb.ProtoFragment()).DESCRIPTOR.name
        self.encode = encode
        self.decode = decode

    def frames(self, value: M, max_frame_bytes: int | None = None) -> list[bytes]:
        """``value`` as the frames to send, in order (one, unless it is large) [WireError if
        it cannot be encoded: protobuf's own refusals, such as text no UTF-8 encoder takes,
        are wrapped].

        ``max_frame_bytes`` is the largest slice of the message in one frame
        (:data:`MAX_FRAME_BYTES` by default): a sender whose channel carries
        smaller messages chooses less. Receivers reassemble fragments of any
        size, so it is the sender's choice alone.
        """
        try:
            data = self.encode(value).SerializeToString()
        except WireError:
            raise
        except (ValueError, TypeError, OverflowError) as e:  # UnicodeEncodeError is a ValueError
            raise MalformedMessage(
                f"cannot encode {self.kind} {type(value).__name__}: {type(e).__name__}: {e}"
            ) from e
        limit = MAX_FRAME_BYTES if max_frame_bytes is None else max_frame_bytes
        if limit < 1:
            raise ValueError(f"max_frame_bytes must be positive, got {limit}")
        if len(data) <= limit:
            return [data]
        out = []
        for start in range(0, len(data), limit):
            end = start + limit
            fragment = pb.ProtoFragment(data=data[start:end], more=end < len(data))
            out.append(self.envelope(fragment=fragment).SerializeToString())
        return out

    def to_bytes(self, value: M) -> bytes:
        """``value`` serialized whole (no framing)."""
        return bytes(self.encode(value).SerializeToString())

    def from_bytes(self, data: bytes) -> M:
        """The value ``data`` (one whole message) denotes; :class:`MalformedMessage` if none."""
        try:
            msg = self.envelope.FromString(data)
        except DecodeError as e:
            raise MalformedMessage(f"not a {self.envelope_name}: {e}") from e
        return self.decode(msg)

    def assembler(self) -> FrameAssembler[M]:
        """A receiver for one stream of these messages."""
        return FrameAssembler(self)


COMPUTE_COMMANDS: MessageCodec[ComputeCommand] = MessageCodec(
    "command", pb.ProtoComputeCommand, encode_command, decode_command
)
"""The compute protocol's commands on the wire."""

COMPUTE_RESPONSES: MessageCodec[ComputeResponse] = MessageCodec(
    "response", pb.ProtoComputeResponse, encode_response, decode_response
)
"""The compute protocol's responses on the wire."""


def command_frames(cmd: ComputeCommand) -> list[bytes]:
    """``cmd`` as the frames to send, in order (one, unless it is large)."""
    return COMPUTE_COMMANDS.frames(cmd)


def response_frames(resp: ComputeResponse) -> list[bytes]:
    """``resp`` as the frames to send, in order (one, unless it is large)."""
    return COMPUTE_RESPONSES.frames(resp)


class FrameAssembler(Generic[M]):
    """The receiving side of one stream: frames in, whole messages out.

    Built from a :class:`MessageCodec`, or ``"command"``/``"response"`` for
    the compute protocol's. ``feed`` returns the message a frame completes,
    or ``None`` while the fragments of a large one arrive. It raises
    :class:`MalformedMessage` for bytes that are no message, a message bigger
    than :data:`MAX_MESSAGE_BYTES`, or a fragment inside a reassembled
    message; after that the stream is unusable (the caller ends it).
    """

    @overload
    def __init__(self: FrameAssembler[ComputeCommand], codec: Literal["command"]) -> None: ...
    @overload
    def __init__(self: FrameAssembler[ComputeResponse], codec: Literal["response"]) -> None: ...
    @overload
    def __init__(self, codec: MessageCodec[M]) -> None: ...
    def __init__(self, codec: MessageCodec[Any] | Literal["command", "response"]) -> None:
        if codec == "command":
            codec = COMPUTE_COMMANDS
        elif codec == "response":
            codec = COMPUTE_RESPONSES
        assert isinstance(codec, MessageCodec)
        self._codec: MessageCodec[Any] = codec
        self._kind = codec.kind
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def pending_bytes(self) -> int:
        """The bytes of a message still being reassembled."""
        return self._size

    def feed(self, raw: bytes) -> M | None:
        msg: Any = self._parse(raw)
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
        value: M = self._codec.decode(msg)
        return value

    def _parse(self, raw: bytes) -> Message:
        try:
            return self._codec.envelope.FromString(raw)
        except DecodeError as e:
            raise MalformedMessage(f"not a {self._codec.envelope_name}: {e}") from e
