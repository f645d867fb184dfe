"""Bytes to messages and back: the framing and layout of every message in :mod:`.messages`.

Pure functions, both directions for both sides (the server decodes frontend messages and
encodes backend ones; tests and the fuzzer do the converse, so every message round-trips).
A payload that does not decode as its tag says is a
:class:`~tidegate.spec.errors.ProtocolViolation`: never an ``IndexError`` or a
``struct.error``. Framing (the length prefix, its bounds) is :mod:`.protocol`'s.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from tidegate.spec.errors import ProtocolViolation

from . import messages as m

__all__ = [
    "CANCEL_REQUEST_CODE",
    "GSSENC_REQUEST_CODE",
    "PROTOCOL_3_0",
    "SSL_REQUEST_CODE",
    "decode_backend",
    "decode_frontend",
    "decode_startup",
    "encode_backend",
    "encode_data_row",
    "encode_frontend",
]

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_HEAD = struct.Struct(">ci")


class _Reader:
    """Reads a payload field by field; running off its end is a ProtocolViolation."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _fail(self, why: str) -> ProtocolViolation:
        return ProtocolViolation(f"invalid {self.what} message: {why}", fatal=False)

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise self._fail("too short")
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def uint32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise self._fail("too short")
        (v,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def int16(self) -> int:
        if self.pos + 2 > len(self.data):
            raise self._fail("too short")
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def byte(self) -> str:
        if self.pos >= len(self.data):
            raise self._fail("too short")
        b = self.data[self.pos : self.pos + 1]
        self.pos += 1
        return b.decode("latin-1")

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self._fail(f"a field of {n} bytes runs past the message's end")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def rest(self) -> bytes:
        b = self.data[self.pos :]
        self.pos = len(self.data)
        return b

    def cstring(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise self._fail("a string is not terminated")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation(
                f"invalid byte sequence for encoding UTF8 in a {self.what} message",
                fatal=False,
                sqlstate="22021",
            ) from None

    def count(self, size: int) -> int:
        """A count of items of at least ``size`` bytes each, checked against what is left."""
        n = self.int16()
        if n < 0 or n * size > len(self.data) - self.pos:
            raise self._fail(f"a count of {n} is more than the message holds")
        return n

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self._fail(f"{len(self.data) - self.pos} bytes left over")


def _kind(r: _Reader) -> Any:
    k = r.byte()
    if k not in ("S", "P"):
        raise r._fail(f"kind {k!r} is neither S nor P")
    return k


# -- frontend ---------------------------------------------------------------------------------


def decode_startup(payload: bytes) -> m.FrontendMessage:
    """The packet a connection starts with (its length prefix removed)."""
    r = _Reader(payload, "startup")
    code = r.int32()
    if code == SSL_REQUEST_CODE:
        r.end()
        return m.SSLRequest()
    if code == GSSENC_REQUEST_CODE:
        r.end()
        return m.GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        pid, secret = r.int32(), r.int32()
        r.end()
        return m.CancelRequest(pid, secret)
    if code >> 16 != 3:
        raise ProtocolViolation(
            f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: server supports 3.0",
            sqlstate="0A000",
        )
    params: list[tuple[str, str]] = []
    while True:
        key = r.cstring()
        if not key:
            break
        params.append((key, r.cstring()))
    r.end()
    return m.StartupMessage(code, tuple(params))


def _parse(r: _Reader) -> m.Parse:
    name, sql = r.cstring(), r.cstring()
    n = r.count(4)
    types = tuple(r.uint32() for _ in range(n))
    return m.Parse(name, sql, types)


def _bind(r: _Reader) -> m.Bind:
    portal, statement = r.cstring(), r.cstring()
    formats = tuple(r.int16() for _ in range(r.count(2)))
    values: list[bytes | None] = []
    for _ in range(r.count(4)):
        size = r.int32()
        values.append(None if size == -1 else r.raw(size))
    results = tuple(r.int16() for _ in range(r.count(2)))
    return m.Bind(portal, statement, formats, tuple(values), results)


_FRONTEND: dict[bytes, tuple[str, Callable[[_Reader], m.FrontendMessage]]] = {
    b"Q": ("Query", lambda r: m.Query(r.cstring())),
    b"P": ("Parse", _parse),
    b"B": ("Bind", _bind),
    b"D": ("Describe", lambda r: m.Describe(_kind(r), r.cstring())),
    b"E": ("Execute", lambda r: m.Execute(r.cstring(), r.int32())),
    b"C": ("Close", lambda r: m.Close(_kind(r), r.cstring())),
    b"S": ("Sync", lambda r: m.Sync()),
    b"H": ("Flush", lambda r: m.Flush()),
    b"X": ("Terminate", lambda r: m.Terminate()),
    b"d": ("CopyData", lambda r: m.CopyData(r.rest())),
    b"c": ("CopyDone", lambda r: m.CopyDone()),
    b"f": ("CopyFail", lambda r: m.CopyFail(r.cstring())),
    b"p": ("PasswordMessage", lambda r: m.PasswordMessage(r.rest())),
    b"F": ("FunctionCall", lambda r: _function_call(r)),
}


def _function_call(r: _Reader) -> m.FunctionCall:
    oid = r.uint32()
    r.rest()  # the arguments: the call is refused whatever they are
    return m.FunctionCall(oid)


def decode_frontend(tag: bytes, payload: bytes) -> m.FrontendMessage:
    """A typed frontend message (``tag`` its type byte, ``payload`` after the length)."""
    entry = _FRONTEND.get(tag)
    if entry is None:
        raise ProtocolViolation(f"invalid frontend message type {tag!r}")
    name, decode = entry
    r = _Reader(payload, name)
    msg = decode(r)
    r.end()
    return msg


def _frame(tag: bytes, payload: bytes) -> bytes:
    return tag + _I32.pack(len(payload) + 4) + payload


def _cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def _i16s(values: Sequence[int]) -> bytes:
    return _I16.pack(len(values)) + b"".join(_I16.pack(v) for v in values)


def encode_frontend(msg: m.FrontendMessage) -> bytes:
    """The bytes a client sends for ``msg``."""
    if isinstance(msg, m.StartupMessage):
        body = _I32.pack(msg.version) + b"".join(_cstr(k) + _cstr(v) for k, v in msg.parameters)
        body += b"\0"
        return _I32.pack(len(body) + 4) + body
    if isinstance(msg, m.SSLRequest):
        return _I32.pack(8) + _I32.pack(SSL_REQUEST_CODE)
    if isinstance(msg, m.GSSENCRequest):
        return _I32.pack(8) + _I32.pack(GSSENC_REQUEST_CODE)
    if isinstance(msg, m.CancelRequest):
        return (
            _I32.pack(16)
            + _I32.pack(CANCEL_REQUEST_CODE)
            + _I32.pack(msg.process_id)
            + (_I32.pack(msg.secret_key))
        )
    if isinstance(msg, m.Query):
        return _frame(b"Q", _cstr(msg.sql))
    if isinstance(msg, m.Parse):
        types = _I16.pack(len(msg.param_types)) + b"".join(_U32.pack(t) for t in msg.param_types)
        return _frame(b"P", _cstr(msg.name) + _cstr(msg.sql) + types)
    if isinstance(msg, m.Bind):
        values = _I16.pack(len(msg.params)) + b"".join(
            _I32.pack(-1) if v is None else _I32.pack(len(v)) + v for v in msg.params
        )
        body = _cstr(msg.portal) + _cstr(msg.statement) + _i16s(msg.param_formats) + values
        return _frame(b"B", body + _i16s(msg.result_formats))
    if isinstance(msg, m.Describe):
        return _frame(b"D", msg.kind.encode() + _cstr(msg.name))
    if isinstance(msg, m.Execute):
        return _frame(b"E", _cstr(msg.portal) + _I32.pack(msg.max_rows))
    if isinstance(msg, m.Close):
        return _frame(b"C", msg.kind.encode() + _cstr(msg.name))
    if isinstance(msg, m.Sync):
        return _frame(b"S", b"")
    if isinstance(msg, m.Flush):
        return _frame(b"H", b"")
    if isinstance(msg, m.Terminate):
        return _frame(b"X", b"")
    if isinstance(msg, m.CopyData):
        return _frame(b"d", msg.data)
    if isinstance(msg, m.CopyDone):
        return _frame(b"c", b"")
    if isinstance(msg, m.CopyFail):
        return _frame(b"f", _cstr(msg.message))
    if isinstance(msg, m.PasswordMessage):
        return _frame(b"p", msg.data)
    if isinstance(msg, m.FunctionCall):
        return _frame(b"F", _I32.pack(msg.function_oid) + b"\0\0\0\0\0\0\0\0")
    raise TypeError(f"not a frontend message: {msg!r}")


# -- backend ----------------------------------------------------------------------------------

_STATIC = {
    m.ParseComplete: b"1\0\0\0\x04",
    m.BindComplete: b"2\0\0\0\x04",
    m.CloseComplete: b"3\0\0\0\x04",
    m.NoData: b"n\0\0\0\x04",
    m.PortalSuspended: b"s\0\0\0\x04",
    m.EmptyQueryResponse: b"I\0\0\0\x04",
    m.CopyDone: b"c\0\0\0\x04",
    m.AuthenticationOk: b"R\0\0\0\x08\0\0\0\0",
    m.AuthenticationCleartextPassword: b"R\0\0\0\x08\0\0\0\x03",
}
_READY = {s: b"Z\0\0\0\x05" + s.encode() for s in ("I", "T", "E")}


def encode_data_row(values: Sequence[bytes | None]) -> bytes:
    """A DataRow of already-encoded values (the hot path: one join, no dataclass)."""
    parts = [b"", _I16.pack(len(values))]
    size = 6
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
            size += 4
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
            size += 4 + len(v)
    parts[0] = _HEAD.pack(b"D", size)
    return b"".join(parts)


def _fields(fields: Sequence[tuple[str, str]]) -> bytes:
    return b"".join(code.encode() + _cstr(value) for code, value in fields) + b"\0"


def encode_backend(msg: m.BackendMessage) -> bytes:
    """The bytes the server sends for ``msg``."""
    static = _STATIC.get(type(msg))
    if static is not None:
        return static
    if isinstance(msg, m.DataRow):
        return encode_data_row(msg.values)
    if isinstance(msg, m.ReadyForQuery):
        return _READY[msg.status]
    if isinstance(msg, m.CommandComplete):
        return _frame(b"C", _cstr(msg.tag))
    if isinstance(msg, m.RowDescription):
        body = [_I16.pack(len(msg.fields))]
        for f in msg.fields:
            body.append(_cstr(f.name))
            body.append(
                struct.pack(
                    ">IhIhih",
                    f.table_oid,
                    f.column,
                    f.type_oid,
                    f.type_size,
                    f.type_modifier,
                    f.format,
                )
            )
        return _frame(b"T", b"".join(body))
    if isinstance(msg, m.ParameterStatus):
        return _frame(b"S", _cstr(msg.name) + _cstr(msg.value))
    if isinstance(msg, m.BackendKeyData):
        return _frame(b"K", _I32.pack(msg.process_id) + _I32.pack(msg.secret_key))
    if isinstance(msg, m.ErrorResponse):
        return _frame(b"E", _fields(msg.fields))
    if isinstance(msg, m.NoticeResponse):
        return _frame(b"N", _fields(msg.fields))
    if isinstance(msg, m.ParameterDescription):
        oids = b"".join(_U32.pack(t) for t in msg.type_oids)
        return _frame(b"t", _I16.pack(len(msg.type_oids)) + oids)
    if isinstance(msg, m.CopyData):
        return _frame(b"d", msg.data)
    if isinstance(msg, m.CopyInResponse | m.CopyOutResponse):
        tag = b"G" if isinstance(msg, m.CopyInResponse) else b"H"
        return _frame(tag, bytes([msg.format]) + _i16s(msg.column_formats))
    if isinstance(msg, m.AuthenticationSASL):
        mechanisms = _I32.pack(10) + b"".join(_cstr(x) for x in msg.mechanisms) + b"\0"
        return _frame(b"R", mechanisms)
    if isinstance(msg, m.AuthenticationSASLContinue):
        return _frame(b"R", _I32.pack(11) + msg.data)
    if isinstance(msg, m.AuthenticationSASLFinal):
        return _frame(b"R", _I32.pack(12) + msg.data)
    if isinstance(msg, m.NegotiateProtocolVersion):
        head = _I32.pack(PROTOCOL_3_0 | msg.newest_minor) + _I32.pack(len(msg.unrecognized))
        return _frame(b"v", head + b"".join(_cstr(x) for x in msg.unrecognized))
    raise TypeError(f"not a backend message: {msg!r}")


def _auth(r: _Reader) -> m.BackendMessage:
    code = r.int32()
    if code == 0:
        return m.AuthenticationOk()
    if code == 3:
        return m.AuthenticationCleartextPassword()
    if code == 10:
        mechs = []
        while True:
            s = r.cstring()
            if not s:
                break
            mechs.append(s)
        return m.AuthenticationSASL(tuple(mechs))
    if code == 11:
        return m.AuthenticationSASLContinue(r.rest())
    if code == 12:
        return m.AuthenticationSASLFinal(r.rest())
    raise r._fail(f"authentication code {code}")


def _row_description(r: _Reader) -> m.RowDescription:
    fields = []
    for _ in range(r.count(19)):
        name = r.cstring()
        table, column = r.uint32(), r.int16()
        oid, size, mod, fmt = r.uint32(), r.int16(), r.int32(), r.int16()
        fields.append(m.FieldDescription(name, oid, size, mod, fmt, table, column))
    return m.RowDescription(tuple(fields))


def _data_row(r: _Reader) -> m.DataRow:
    values: list[bytes | None] = []
    for _ in range(r.count(4)):
        size = r.int32()
        values.append(None if size == -1 else r.raw(size))
    return m.DataRow(tuple(values))


def _error_fields(r: _Reader) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    while True:
        code = r.byte()
        if code == "\0":
            return tuple(out)
        out.append((code, r.cstring()))


def _copy_response(r: _Reader, cls: Any) -> m.BackendMessage:
    fmt = ord(r.byte())
    msg: m.BackendMessage = cls(fmt, tuple(r.int16() for _ in range(r.count(2))))
    return msg


def _negotiate(r: _Reader) -> m.NegotiateProtocolVersion:
    minor = r.int32() & 0xFFFF
    n = r.int32()
    return m.NegotiateProtocolVersion(minor, tuple(r.cstring() for _ in range(n)))


_BACKEND: dict[bytes, tuple[str, Callable[[_Reader], m.BackendMessage]]] = {
    b"R": ("Authentication", _auth),
    b"S": ("ParameterStatus", lambda r: m.ParameterStatus(r.cstring(), r.cstring())),
    b"K": ("BackendKeyData", lambda r: m.BackendKeyData(r.int32(), r.int32())),
    b"Z": ("ReadyForQuery", lambda r: m.ReadyForQuery(r.byte())),  # type: ignore[arg-type]
    b"T": ("RowDescription", _row_description),
    b"D": ("DataRow", _data_row),
    b"C": ("CommandComplete", lambda r: m.CommandComplete(r.cstring())),
    b"I": ("EmptyQueryResponse", lambda r: m.EmptyQueryResponse()),
    b"E": ("ErrorResponse", lambda r: m.ErrorResponse(_error_fields(r))),
    b"N": ("NoticeResponse", lambda r: m.NoticeResponse(_error_fields(r))),
    b"1": ("ParseComplete", lambda r: m.ParseComplete()),
    b"2": ("BindComplete", lambda r: m.BindComplete()),
    b"3": ("CloseComplete", lambda r: m.CloseComplete()),
    b"t": (
        "ParameterDescription",
        lambda r: m.ParameterDescription(tuple(r.uint32() for _ in range(r.count(4)))),
    ),
    b"n": ("NoData", lambda r: m.NoData()),
    b"s": ("PortalSuspended", lambda r: m.PortalSuspended()),
    b"G": ("CopyInResponse", lambda r: _copy_response(r, m.CopyInResponse)),
    b"H": ("CopyOutResponse", lambda r: _copy_response(r, m.CopyOutResponse)),
    b"d": ("CopyData", lambda r: m.CopyData(r.rest())),
    b"c": ("CopyDone", lambda r: m.CopyDone()),
    b"v": ("NegotiateProtocolVersion", _negotiate),
}


def decode_backend(tag: bytes, payload: bytes) -> m.BackendMessage:
    """A backend message (for clients and tests)."""
    entry = _BACKEND.get(tag)
    if entry is None:
        raise ProtocolViolation(f"invalid backend message type {tag!r}")
    name, decode = entry
    r = _Reader(payload, name)
    msg = decode(r)
    r.end()
    return msg
