"""The server side of one PostgreSQL connection, as a sans-IO state machine (h11's shape).

Bytes go in with :meth:`ServerConnection.receive_data`; messages come out of
:meth:`~ServerConnection.next_event` (a :mod:`.messages` frontend message,
:data:`NEED_DATA`, or :class:`ConnectionClosed`); backend messages go in to
:meth:`~ServerConnection.send`, which answers their bytes. No sockets, clocks or
threads: the driver (:mod:`.server`) moves the bytes.

What the machine knows of the protocol:

* **Phases.** ``STARTUP`` (the untyped first packet: ``SSLRequest``,
  ``GSSENCRequest``, ``CancelRequest`` or ``StartupMessage``; at most one
  ``SSLRequest`` and one ``GSSENCRequest`` before it); ``AUTHENTICATING``
  (only ``PasswordMessage`` until the server sends ``ReadyForQuery``);
  ``READY`` (typed messages); ``COPY_IN`` (after the server sends
  ``CopyInResponse``: ``CopyData``, ``CopyDone`` and ``CopyFail``; ``Flush`` and
  ``Sync`` are ignored there, as PostgreSQL does); ``CLOSED`` (after
  ``Terminate``, a ``CancelRequest``, end of input, a FATAL error sent, or a
  fatal protocol violation).
* **Framing.** A startup packet is 8 to ``max_startup`` bytes, a typed message
  at most ``max_message`` bytes, checked from its header before its body is
  buffered: a length out of bounds is a fatal
  :class:`~tidegate.spec.errors.ProtocolViolation` (the bytes after it cannot
  be trusted), and so is an unknown message type.
* **Extended-protocol error recovery.** Once the server has sent an
  ``ErrorResponse`` while handling an extended-protocol message (``Parse``,
  ``Bind``, ``Describe``, ``Execute``, ``Close``, ``Flush``), every message up
  to the next ``Sync`` is discarded here, so the session layer never sees them.
* **Transaction status**: the last ``ReadyForQuery``'s (``I``/``T``/``E``).

A message that is well framed but cannot be decoded, or one the phase does not
take, is a non-fatal violation when the connection can go on (the server answers
an ``ErrorResponse`` and keeps reading) and fatal otherwise; either way the
machine's state is unchanged by it.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from tidegate.spec.errors import ProtocolViolation

from . import messages as m
from ._codec import decode_frontend, decode_startup, encode_backend

__all__ = ["NEED_DATA", "ConnectionClosed", "Phase", "ServerConnection"]

_I32 = struct.Struct(">i")


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()
"""What :meth:`ServerConnection.next_event` answers when it needs more bytes."""


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The client closed its side (``truncated``: in the middle of a message)."""

    truncated: bool = False


class Phase(enum.Enum):
    STARTUP = "startup"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    COPY_IN = "copy-in"
    CLOSED = "closed"


_EXTENDED = (m.Parse, m.Bind, m.Describe, m.Execute, m.Close, m.Flush)
_COPY_MESSAGES = (m.CopyData, m.CopyDone, m.CopyFail)


class ServerConnection:
    """One connection's protocol state, from the server's side."""

    def __init__(self, *, max_message: int = 64 * 1024 * 1024, max_startup: int = 10_000) -> None:
        self.max_message = max_message
        self.max_startup = max_startup
        self._fatal_owed = False
        self.phase = Phase.STARTUP
        self.transaction_status: str = "I"
        self._buffer = bytearray()
        self._eof = False
        self._ssl_asked = False
        self._gss_asked = False
        self._skipping = False  # discarding until Sync after an extended-protocol error
        self._last: m.FrontendMessage | None = None

    # -- input ----------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes from the client; ``b""`` is the end of its input."""
        if self._eof:
            return
        if data:
            self._buffer += data
        else:
            self._eof = True

    def next_event(self) -> m.FrontendMessage | _NeedData | ConnectionClosed:
        """The next message from the client [ProtocolViolation: nothing was consumed then,
        unless it is fatal, which closes the connection]."""
        while True:
            if self.phase is Phase.CLOSED:
                return ConnectionClosed()
            try:
                msg = self._decode_next()
            except ProtocolViolation as e:
                if e.fatal:
                    self.phase = Phase.CLOSED
                    self._fatal_owed = True  # the FATAL that says why may still be sent
                raise
            if msg is NEED_DATA:
                if self._eof:
                    truncated = bool(self._buffer)
                    self.phase = Phase.CLOSED
                    return ConnectionClosed(truncated)
                return NEED_DATA
            assert not isinstance(msg, _NeedData | ConnectionClosed)
            out = self._accept(msg)
            if out is not None:
                self._last = out
                return out

    def _decode_next(self) -> m.FrontendMessage | _NeedData:
        buf = self._buffer
        if self.phase is Phase.STARTUP:
            if len(buf) < 4:
                return NEED_DATA
            (length,) = _I32.unpack_from(buf)
            if not 8 <= length <= self.max_startup:
                raise ProtocolViolation(f"invalid length of startup packet: {length}")
            if len(buf) < length:
                return NEED_DATA
            payload = bytes(buf[4:length])
            del buf[:length]
            return decode_startup(payload)
        if len(buf) < 5:
            return NEED_DATA
        tag = bytes(buf[:1])
        (length,) = _I32.unpack_from(buf, 1)
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > self.max_message:
            raise ProtocolViolation(
                f"message of {length} bytes is over the limit of {self.max_message}",
                sqlstate="54000",
            )
        if len(buf) < length + 1:
            return NEED_DATA
        payload = bytes(buf[5 : length + 1])
        del buf[: length + 1]
        try:
            return decode_frontend(tag, payload)
        except ProtocolViolation as e:
            if not e.fatal and self.phase is Phase.READY and tag in b"PBDECH":
                self._skipping = True  # a broken extended message: the rest of its batch goes
            raise

    def _accept(self, msg: m.FrontendMessage) -> m.FrontendMessage | None:
        """Check ``msg`` against the phase; None if it is to be skipped silently."""
        phase = self.phase
        if phase is Phase.STARTUP:
            if isinstance(msg, m.SSLRequest):
                if self._ssl_asked:
                    raise ProtocolViolation("SSLRequest sent twice")
                self._ssl_asked = True
                return msg
            if isinstance(msg, m.GSSENCRequest):
                if self._gss_asked:
                    raise ProtocolViolation("GSSENCRequest sent twice")
                self._gss_asked = True
                return msg
            if isinstance(msg, m.CancelRequest):
                self.phase = Phase.CLOSED
                return msg
            assert isinstance(msg, m.StartupMessage)
            self.phase = Phase.AUTHENTICATING
            return msg
        if phase is Phase.AUTHENTICATING:
            if isinstance(msg, m.PasswordMessage):
                return msg
            if isinstance(msg, m.Terminate):
                self.phase = Phase.CLOSED
                return msg
            raise ProtocolViolation(
                f"expected a password message during authentication, got {type(msg).__name__}"
            )
        if phase is Phase.COPY_IN:
            if isinstance(msg, m.Flush | m.Sync):
                return None
            if isinstance(msg, m.CopyDone | m.CopyFail):
                self.phase = Phase.READY
                return msg
            if isinstance(msg, m.CopyData):
                return msg
            if isinstance(msg, m.Terminate):
                self.phase = Phase.CLOSED
                return msg
            self.phase = Phase.READY
            raise ProtocolViolation(
                f"unexpected message type {type(msg).__name__} during COPY from stdin",
                fatal=False,
            )
        # READY
        if isinstance(msg, m.Terminate):
            self.phase = Phase.CLOSED
            return msg
        if self._skipping:
            if isinstance(msg, m.Sync):
                self._skipping = False
                return msg
            return None
        if isinstance(msg, m.PasswordMessage | m.StartupMessage):
            raise ProtocolViolation(f"unexpected {type(msg).__name__}", fatal=False)
        if isinstance(msg, _COPY_MESSAGES):
            # PostgreSQL ignores CopyData/CopyDone/CopyFail outside COPY (a COPY that failed
            # early leaves the client still sending them)
            return None
        return msg

    # -- output ---------------------------------------------------------------------------------

    def buffered(self) -> int:
        """Bytes received and not yet taken as messages."""
        return len(self._buffer)

    def next_event_ready(self) -> bool:
        """Whether :meth:`next_event` would answer something other than NEED_DATA now (the
        end of input counts)."""
        if self._eof or self.phase is Phase.CLOSED:
            return True
        buf = self._buffer
        if self.phase is Phase.STARTUP:
            return len(buf) >= 4 and len(buf) >= int.from_bytes(buf[:4], "big", signed=True)
        if len(buf) < 5:
            return False
        length = int.from_bytes(buf[1:5], "big", signed=True)
        return length < 4 or length > self.max_message or len(buf) >= length + 1

    def ssl_response(self, accept: bool) -> bytes:
        """The one byte answering an ``SSLRequest`` or ``GSSENCRequest`` (``S``: go on in TLS)."""
        return b"S" if accept else b"N"

    def send(self, msg: m.BackendMessage) -> bytes:
        """The bytes of ``msg``; updates the phase and the transaction status."""
        if self.phase is Phase.CLOSED:
            if self._fatal_owed and isinstance(msg, m.ErrorResponse) and msg.get("S") == "FATAL":
                self._fatal_owed = False
                return encode_backend(msg)
            return b""
        if isinstance(msg, m.ReadyForQuery):
            self.transaction_status = msg.status
            if self.phase is Phase.AUTHENTICATING:
                self.phase = Phase.READY
        elif isinstance(msg, m.ErrorResponse):
            if msg.get("S") == "FATAL":
                data = encode_backend(msg)
                self.phase = Phase.CLOSED
                return data
            if self.phase is Phase.COPY_IN:
                self.phase = Phase.READY
            if isinstance(self._last, _EXTENDED):
                self._skipping = True
        elif isinstance(msg, m.CopyInResponse):
            if self.phase is not Phase.READY:
                raise ProtocolViolation("CopyInResponse outside the query phase")
            self.phase = Phase.COPY_IN
        return encode_backend(msg)

    def send_many(self, msgs: list[m.BackendMessage]) -> bytes:
        return b"".join(self.send(x) for x in msgs)

    @property
    def skipping(self) -> bool:
        """Whether messages are being discarded until the next ``Sync``."""
        return self._skipping
