"""A PostgreSQL wire-protocol client of the simulator's own, and the byte pipe it talks over.

The simulated SQL clients (:mod:`.sql_clients`) that go through the wire
protocol talk to the product's server (:class:`tidegate.runtime.pgwire.server.PgwireServer`,
its per-connection handling over a byte stream, with the sans-IO
:mod:`~tidegate.runtime.pgwire.protocol` and :mod:`~tidegate.runtime.pgwire.session`
underneath) through :class:`WireClient`. The client side -- encoding frontend
messages, decoding backend ones, SCRAM-SHA-256, text and binary values -- is
written here from the protocol's documentation and shares no code with the
product's codec, so a bug there (a field off by one, a wrong length, a
misencoded value) shows up as bytes this client cannot read or values that
differ from the reference.

:class:`BytePipe` is the connection: two directions of bytes, each chunk of a
write delivered after a latency drawn from the run's choices, in order, split
at points the choices pick (a message arrives in pieces, several in one
piece), as TCP delivers them. Nothing here is a thread or a socket: it runs
on the simulation's kernel.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import anyio
import anyio.abc
import trio

from .choices import ChoiceSource
from .kernel import Kernel

__all__ = [
    "BytePipe",
    "PgError",
    "PgProtocolBroken",
    "PgResult",
    "WireClient",
    "copy_text_row",
    "copy_text_rows",
    "encode_param",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PROTOCOL_3 = 196608


class PgProtocolBroken(Exception):
    """The server's bytes do not read as the protocol says (a finding)."""


class PgError(Exception):
    """An ErrorResponse: its fields by code (``C`` the SQLSTATE, ``M`` the message)."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__(f"{fields.get('C', '?????')}: {fields.get('M', '')}")
        self.fields = fields

    @property
    def sqlstate(self) -> str:
        return self.fields.get("C", "")

    @property
    def message(self) -> str:
        return self.fields.get("M", "")


# -- the byte pipe --------------------------------------------------------------------------------


class _End(anyio.abc.ByteStream):
    """One end of a :class:`BytePipe` (an anyio byte stream, as the server takes)."""

    def __init__(self, pipe: BytePipe, side: int) -> None:
        self._pipe = pipe
        self._side = side
        self._inbox = bytearray()
        self._eof = False
        self._arrived = trio.Event()
        self.closed = False

    def _deliver(self, data: bytes) -> None:
        if data:
            self._inbox += data
        else:
            self._eof = True
        self._arrived.set()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._inbox:
            if self._eof or self.closed:
                raise anyio.EndOfStream
            self._arrived = trio.Event()
            await self._arrived.wait()
        data = bytes(self._inbox[:max_bytes])
        del self._inbox[:max_bytes]
        return data

    async def send(self, item: bytes) -> None:
        if self.closed or self._pipe.broken:
            raise anyio.BrokenResourceError
        self._pipe.carry(1 - self._side, bytes(item))
        await trio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        self._pipe.carry(1 - self._side, b"")

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._pipe.carry(1 - self._side, b"")
        await trio.lowlevel.checkpoint()


class BytePipe:
    """A connection's two directions of bytes (see the module docstring): ``client`` and
    ``server`` ends. ``break_()`` ends both as a cut connection does."""

    def __init__(self, kernel: Kernel, choices: ChoiceSource, latency_ms: tuple[int, int]) -> None:
        self.kernel = kernel
        self.choices = choices
        self.latency_ms = latency_ms
        self.client = _End(self, 0)
        self.server = _End(self, 1)
        self.broken = False
        self._last = [0, 0]
        self.chunks = 0

    def _end(self, side: int) -> _End:
        return self.client if side == 0 else self.server

    def carry(self, to: int, data: bytes) -> None:
        """Deliver ``data`` to end ``to``, in pieces, each after a latency (never reordered)."""
        if self.broken:
            return
        low, high = self.latency_ms
        pieces = [data]
        if len(data) > 1 and self.choices.integer(0, 2) == 0:
            cut = self.choices.integer(1, len(data) - 1)
            pieces = [data[:cut], data[cut:]]
        for piece in pieces:
            at = max(self.kernel.now_ms + self.choices.integer(low, high), self._last[to])
            self._last[to] = at
            self.chunks += 1
            self.kernel.call_at(at, self._end(to)._deliver, piece)

    def break_(self) -> None:
        """The connection is gone: both ends read end of stream (what is in flight is lost)."""
        if not self.broken:
            self.broken = True
            for end in (self.client, self.server):
                end._deliver(b"")


# -- frontend messages ----------------------------------------------------------------------------


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def _msg(tag: bytes, body: bytes) -> bytes:
    return tag + _I32.pack(len(body) + 4) + body


def startup(user: str, database: str, options: Sequence[tuple[str, str]] = ()) -> bytes:
    body = _I32.pack(_PROTOCOL_3)
    for k, v in (("user", user), ("database", database), *options):
        body += _cstr(k) + _cstr(v)
    body += b"\0"
    return _I32.pack(len(body) + 4) + body


def query(sql: str) -> bytes:
    return _msg(b"Q", _cstr(sql))


def parse(name: str, sql: str, oids: Sequence[int] = ()) -> bytes:
    body = _cstr(name) + _cstr(sql) + _I16.pack(len(oids))
    body += b"".join(_I32.pack(o) for o in oids)
    return _msg(b"P", body)


def bind(
    portal: str, statement: str, params: Sequence[bytes | None], result_formats: Sequence[int]
) -> bytes:
    body = _cstr(portal) + _cstr(statement) + _I16.pack(0)  # parameters in text
    body += _I16.pack(len(params))
    for p in params:
        body += _I32.pack(-1) if p is None else _I32.pack(len(p)) + p
    body += _I16.pack(len(result_formats)) + b"".join(_I16.pack(f) for f in result_formats)
    return _msg(b"B", body)


def describe(kind: str, name: str) -> bytes:
    return _msg(b"D", kind.encode() + _cstr(name))


def execute(portal: str, max_rows: int = 0) -> bytes:
    return _msg(b"E", _cstr(portal) + _I32.pack(max_rows))


def close(kind: str, name: str) -> bytes:
    return _msg(b"C", kind.encode() + _cstr(name))


def copy_data(data: bytes) -> bytes:
    return _msg(b"d", data)


def copy_fail(why: str) -> bytes:
    return _msg(b"f", _cstr(why))


COPY_DONE = _msg(b"c", b"")
SYNC = _msg(b"S", b"")
FLUSH = _msg(b"H", b"")
TERMINATE = _msg(b"X", b"")


def sasl_initial(mechanism: str, data: bytes) -> bytes:
    return _msg(b"p", _cstr(mechanism) + _I32.pack(len(data)) + data)


def sasl_response(data: bytes) -> bytes:
    return _msg(b"p", data)


def encode_param(value: Any) -> bytes | None:
    """A parameter value in text format."""
    if value is None:
        return None
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


# -- backend messages -----------------------------------------------------------------------------


@dataclass
class _Field:
    name: str
    oid: int
    format: int


@dataclass
class PgResult:
    """One statement's answer: its columns (names and type OIDs), rows (decoded values), command
    tag, and the notices that came with it."""

    tag: str = ""
    names: tuple[str, ...] = ()
    oids: tuple[int, ...] = ()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


class _Body:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PgProtocolBroken(f"{self.what}: {n} bytes past the end of the message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def cstr(self) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise PgProtocolBroken(f"{self.what}: a string without its terminator")
        out = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return out.decode()
        except UnicodeDecodeError as e:
            raise PgProtocolBroken(f"{self.what}: a string that is not UTF-8") from e

    def done(self) -> None:
        if self.pos != len(self.data):
            raise PgProtocolBroken(f"{self.what}: {len(self.data) - self.pos} bytes left over")


def _decode_text(oid: int, raw: bytes) -> Any:
    text = raw.decode()
    if oid in (20, 21, 23, 26):
        return int(text)
    if oid == 16:
        if text not in ("t", "f"):
            raise PgProtocolBroken(f"a bool written {text!r}")
        return text == "t"
    if oid in (700, 701):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(text) or float(
            text
        )
    if oid == 1700:
        return Decimal(text)
    return text


def _decode_binary(oid: int, raw: bytes) -> Any:
    if oid == 20:
        return int.from_bytes(raw, "big", signed=True) if len(raw) == 8 else _bad(oid, raw)
    if oid == 23:
        return int.from_bytes(raw, "big", signed=True) if len(raw) == 4 else _bad(oid, raw)
    if oid == 21:
        return int.from_bytes(raw, "big", signed=True) if len(raw) == 2 else _bad(oid, raw)
    if oid == 16:
        return raw == b"\x01" if len(raw) == 1 else _bad(oid, raw)
    if oid == 701:
        return struct.unpack(">d", raw)[0] if len(raw) == 8 else _bad(oid, raw)
    if oid in (25, 1043, 19):
        return raw.decode()
    raise PgProtocolBroken(f"no binary decoding of type {oid} here")


def _bad(oid: int, raw: bytes) -> Any:
    raise PgProtocolBroken(f"a binary value of type {oid} of {len(raw)} bytes")


BINARY_OIDS = frozenset({16, 20, 21, 23, 25, 701})
"""Types this client reads in binary (it asks for binary only when every column is one)."""


# -- the client ------------------------------------------------------------------------------------


class WireClient:
    """One connection's client side over a :class:`BytePipe`'s client end (see the module
    docstring). Every call sends its messages and reads up to ``ReadyForQuery``."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._buf = bytearray()
        self.status = "I"
        self.parameters: dict[str, str] = {}
        self.pid = 0
        self.bytes_read = 0

    async def _send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def _read(self) -> tuple[bytes, _Body]:
        """The next backend message [PgProtocolBroken; anyio.EndOfStream when the server went]."""
        while True:
            if len(self._buf) >= 5:
                tag = bytes(self._buf[:1])
                (length,) = _I32.unpack_from(self._buf, 1)
                if length < 4:
                    raise PgProtocolBroken(f"message {tag!r} of length {length}")
                if len(self._buf) >= 1 + length:
                    body = bytes(self._buf[5 : 1 + length])
                    del self._buf[: 1 + length]
                    return tag, _Body(body, f"message {tag.decode(errors='replace')}")
            chunk = await self.stream.receive()
            self.bytes_read += len(chunk)
            self._buf += chunk

    # -- startup ------------------------------------------------------------------------------
    async def connect(self, user: str, password: str, client_nonce: str) -> None:
        """Start up as ``user`` and authenticate (SCRAM-SHA-256, or none if the server trusts)
        [PgError when refused]."""
        await self._send(startup(user, "materialize", (("application_name", "tidegate-sim"),)))
        scram: _Scram | None = None
        while True:
            tag, body = await self._read()
            if tag == b"R":
                code = body.i32()
                if code == 0:
                    body.done()
                elif code == 10:  # SASL: the mechanisms
                    mechanisms = []
                    while True:
                        name = body.cstr()
                        if not name:
                            break
                        mechanisms.append(name)
                    body.done()
                    if "SCRAM-SHA-256" not in mechanisms:
                        raise PgProtocolBroken(f"no SCRAM-SHA-256 among {mechanisms}")
                    scram = _Scram(user, password, client_nonce)
                    await self._send(sasl_initial("SCRAM-SHA-256", scram.first()))
                elif code == 11:
                    assert scram is not None
                    await self._send(sasl_response(scram.final(body.take(len(body.data) - 4))))
                elif code == 12:
                    assert scram is not None
                    scram.verify(body.take(len(body.data) - 4))
                else:
                    raise PgProtocolBroken(f"authentication request {code}")
            elif tag == b"S":
                k, v = body.cstr(), body.cstr()
                body.done()
                self.parameters[k] = v
            elif tag == b"K":
                self.pid = body.i32()
                body.i32()
                body.done()
            elif tag == b"E":
                raise PgError(_fields(body))
            elif tag in (b"N", b"v"):
                continue
            elif tag == b"Z":
                self.status = body.take(1).decode()
                body.done()
                return
            else:
                raise PgProtocolBroken(f"unexpected {tag!r} during startup")

    # -- queries ------------------------------------------------------------------------------
    async def simple(self, sql: str) -> list[PgResult | PgError]:
        """A simple query (several statements perhaps): each statement's result, or the error
        that ended the batch."""
        await self._send(query(sql))
        return await self._results()

    async def extended(
        self, sql: str, params: Sequence[Any] = (), *, binary: bool = False, max_rows: int = 0
    ) -> PgResult:
        """Parse, bind (``params`` in text), describe and execute an unnamed statement;
        ``binary`` asks for every column in binary; ``max_rows`` fetches in portions
        [PgError]."""
        formats = (1,) if binary else ()
        out = (
            parse("", sql)
            + bind("", "", [encode_param(p) for p in params], formats)
            + describe("P", "")
            + execute("", max_rows)
        )
        await self._send(out + (FLUSH if max_rows else SYNC))
        result = PgResult()
        fields: list[_Field] | None = None
        error: PgError | None = None
        while True:
            tag, body = await self._read()
            if tag in (b"1", b"2", b"n"):
                body.done()
            elif tag == b"T":
                fields = _description(body)
                result.names = tuple(f.name for f in fields)
                result.oids = tuple(f.oid for f in fields)
            elif tag == b"D":
                if fields is None:
                    raise PgProtocolBroken("a DataRow before its RowDescription")
                result.rows.append(_row(body, fields))
            elif tag == b"s":  # PortalSuspended: more rows to fetch
                body.done()
                await self._send(execute("", max_rows) + FLUSH)
            elif tag == b"C":
                result.tag = body.cstr()
                body.done()
                if max_rows:
                    await self._send(SYNC)
            elif tag == b"I":
                body.done()
                if max_rows:
                    await self._send(SYNC)
            elif tag == b"E":
                error = PgError(_fields(body))
                if max_rows:
                    await self._send(SYNC)
            elif tag == b"N":
                result.notices.append(_fields(body).get("M", ""))
            elif tag == b"S":
                k, v = body.cstr(), body.cstr()
                self.parameters[k] = v
            elif tag == b"Z":
                self.status = body.take(1).decode()
                body.done()
                if error is not None:
                    raise error
                return result
            else:
                raise PgProtocolBroken(f"unexpected {tag!r} in the extended protocol")

    async def _results(self) -> list[PgResult | PgError]:
        out: list[PgResult | PgError] = []
        current = PgResult()
        fields: list[_Field] | None = None
        while True:
            tag, body = await self._read()
            if tag == b"T":
                fields = _description(body)
                current.names = tuple(f.name for f in fields)
                current.oids = tuple(f.oid for f in fields)
            elif tag == b"D":
                if fields is None:
                    raise PgProtocolBroken("a DataRow before its RowDescription")
                current.rows.append(_row(body, fields))
            elif tag == b"C":
                current.tag = body.cstr()
                body.done()
                out.append(current)
                current, fields = PgResult(), None
            elif tag == b"I":
                body.done()
                out.append(current)
                current = PgResult()
            elif tag == b"E":
                out.append(PgError(_fields(body)))
                current, fields = PgResult(), None
            elif tag == b"N":
                current.notices.append(_fields(body).get("M", ""))
            elif tag == b"S":
                k, v = body.cstr(), body.cstr()
                self.parameters[k] = v
            elif tag == b"Z":
                self.status = body.take(1).decode()
                body.done()
                return out
            else:
                raise PgProtocolBroken(f"unexpected {tag!r} answering a query")

    async def copy_in(
        self, sql: str, pieces: Sequence[bytes], *, fail: str | None = None
    ) -> PgResult | PgError:
        """``COPY ... FROM STDIN`` (a simple query): ``pieces`` sent as one ``CopyData`` each,
        then ``CopyDone`` (or, with ``fail``, ``CopyFail`` saying so); its result or error.
        A server that refuses the statement before asking for data answers that error."""
        await self._send(query(sql))
        tag, body = await self._read()
        if tag == b"G":
            _copy_response(body)
            end = copy_fail(fail) if fail is not None else COPY_DONE
            await self._send(b"".join(copy_data(p) for p in pieces) + end)
        else:
            self._buf[:0] = tag + _I32.pack(len(body.data) + 4) + body.data  # read it again
        results = await self._results()
        return results[-1] if results else PgResult()

    async def copy_out(self, sql: str) -> tuple[bytes, PgResult | PgError]:
        """``COPY ... TO STDOUT`` (a simple query): the ``CopyData`` bytes, joined, and the
        statement's result or error."""
        await self._send(query(sql))
        data = bytearray()
        tag, body = await self._read()
        if tag == b"H":
            formats = _copy_response(body)
            if any(formats):
                raise PgProtocolBroken(f"COPY TO STDOUT in text answered formats {formats}")
            while True:
                tag, body = await self._read()
                if tag == b"d":
                    data += body.take(len(body.data) - body.pos)
                elif tag == b"c":
                    body.done()
                    break
                elif tag == b"E":  # failed midway: the error ends the copy
                    self._buf[:0] = tag + _I32.pack(len(body.data) + 4) + body.data
                    break
                elif tag != b"N":
                    raise PgProtocolBroken(f"unexpected {tag!r} in a COPY's data")
        else:
            self._buf[:0] = tag + _I32.pack(len(body.data) + 4) + body.data
        results = await self._results()
        return bytes(data), results[-1] if results else PgResult()

    async def terminate(self) -> None:
        await self._send(TERMINATE)
        await self.stream.aclose()


def _copy_response(body: _Body) -> list[int]:
    """A ``CopyInResponse``/``CopyOutResponse``: each column's format (all text here)."""
    overall = body.take(1)[0]
    formats = [body.i16() for _ in range(body.i16())]
    body.done()
    if overall not in (0, 1) or any(f not in (0, 1) for f in formats):
        raise PgProtocolBroken(f"a COPY response with formats {overall}, {formats}")
    return [overall, *formats]


def copy_text_row(values: Sequence[Any]) -> bytes:
    """One row in ``COPY``'s text format: tab-separated, ``\\N`` for NULL, backslash escapes
    (PostgreSQL's documentation of ``COPY``, "Text Format")."""
    out = []
    for v in values:
        if v is None:
            out.append("\\N")
        elif isinstance(v, bool):
            out.append("t" if v else "f")
        else:
            text = str(v).replace("\\", "\\\\")
            for raw, esc in (("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
                text = text.replace(raw, esc)
            out.append(text)
    return ("\t".join(out) + "\n").encode()


_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\"}


def copy_text_rows(data: bytes, oids: Sequence[int]) -> list[tuple[Any, ...]]:
    """The rows of ``COPY ... TO STDOUT``'s text output, each value read as type ``oids[i]``
    [PgProtocolBroken: a line of another width, an escape the format has not]."""
    rows: list[tuple[Any, ...]] = []
    text = data.decode()
    if text and not text.endswith("\n"):
        raise PgProtocolBroken("COPY's text output does not end its last line")
    for line in text.split("\n")[:-1]:
        fields = line.split("\t")
        if len(fields) != len(oids):
            raise PgProtocolBroken(
                f"a COPY line of {len(fields)} fields, not {len(oids)}: {line!r}"
            )
        row: list[Any] = []
        for oid, field_ in zip(oids, fields, strict=True):
            if field_ == "\\N":
                row.append(None)
                continue
            out, i = [], 0
            while i < len(field_):
                c = field_[i]
                if c == "\\":
                    if i + 1 >= len(field_) or field_[i + 1] not in _UNESCAPE:
                        raise PgProtocolBroken(f"a COPY field with a bad escape: {field_!r}")
                    out.append(_UNESCAPE[field_[i + 1]])
                    i += 2
                else:
                    out.append(c)
                    i += 1
            row.append(_decode_text(oid, "".join(out).encode()))
        rows.append(tuple(row))
    return rows


def _fields(body: _Body) -> dict[str, str]:
    out: dict[str, str] = {}
    while True:
        code = body.take(1)
        if code == b"\0":
            break
        out[code.decode()] = body.cstr()
    body.done()
    return out


def _description(body: _Body) -> list[_Field]:
    n = body.i16()
    out = []
    for _ in range(n):
        name = body.cstr()
        body.i32()  # table oid
        body.i16()  # column number
        oid = body.i32()
        body.i16()  # type length
        body.i32()  # type modifier
        fmt = body.i16()
        if fmt not in (0, 1):
            raise PgProtocolBroken(f"column {name!r} in format {fmt}")
        out.append(_Field(name, oid, fmt))
    body.done()
    return out


def _row(body: _Body, fields: Sequence[_Field]) -> tuple[Any, ...]:
    n = body.i16()
    if n != len(fields):
        raise PgProtocolBroken(f"a DataRow of {n} values for {len(fields)} columns")
    out: list[Any] = []
    for f in fields:
        length = body.i32()
        if length == -1:
            out.append(None)
            continue
        raw = body.take(length)
        try:
            out.append(_decode_binary(f.oid, raw) if f.format else _decode_text(f.oid, raw))
        except (ValueError, UnicodeDecodeError) as e:
            raise PgProtocolBroken(f"column {f.name!r} (type {f.oid}): {raw!r}: {e}") from e
    body.done()
    return tuple(out)


# -- SCRAM-SHA-256, the client's side (RFC 5802, 7677) --------------------------------------------


class _Scram:
    def __init__(self, user: str, password: str, nonce: str) -> None:
        self.password = password
        self.nonce = nonce
        self.bare = f"n=,r={nonce}"  # PostgreSQL takes the user from the startup packet
        self.server_first = ""
        self.expected = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes) -> bytes:
        self.server_first = server_first.decode()
        attrs = dict(part.split("=", 1) for part in self.server_first.split(","))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self.nonce):
            raise PgProtocolBroken("the server's nonce does not extend the client's")
        salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        message = f"{self.bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(stored, message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        self.expected = hmac.new(server_key, message, hashlib.sha256).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode()
        if not text.startswith("v=") or base64.b64decode(text[2:]) != self.expected:
            raise PgProtocolBroken("the server's SCRAM signature is wrong")
