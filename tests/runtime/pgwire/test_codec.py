"""Laws of the wire codec and the connection state machine (no sockets).

* every message round-trips: decode(encode(m)) == m, both directions;
* any bytes at all give messages, NEED_DATA or a ProtocolViolation, never another exception;
* a message cut anywhere is NEED_DATA until its last byte arrives, then the same message;
* a length out of bounds is refused from the header, before the body is buffered;
* after an error in an extended-protocol batch, everything up to Sync is skipped.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.pgwire import messages as m
from tidegate.runtime.pgwire._codec import (
    decode_backend,
    decode_frontend,
    decode_startup,
    encode_backend,
    encode_frontend,
)
from tidegate.runtime.pgwire.protocol import NEED_DATA, ConnectionClosed, Phase, ServerConnection
from tidegate.spec.errors import ProtocolViolation

text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=20)
blob = st.binary(max_size=40)
i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
u32 = st.integers(0, 2**32 - 1)
kind = st.sampled_from(["S", "P"])
values = st.lists(st.one_of(st.none(), blob), max_size=6).map(tuple)

typed_frontend = st.one_of(
    st.builds(m.Query, text),
    st.builds(m.Parse, text, text, st.lists(u32, max_size=5).map(tuple)),
    st.builds(
        m.Bind,
        text,
        text,
        st.lists(st.sampled_from([0, 1]), max_size=4).map(tuple),
        values,
        st.lists(st.sampled_from([0, 1]), max_size=4).map(tuple),
    ),
    st.builds(m.Describe, kind, text),
    st.builds(m.Execute, text, i32),
    st.builds(m.Close, kind, text),
    st.just(m.Sync()),
    st.just(m.Flush()),
    st.just(m.Terminate()),
    st.builds(m.CopyData, blob),
    st.just(m.CopyDone()),
    st.builds(m.CopyFail, text),
    st.builds(m.PasswordMessage, blob),
)
startup = st.one_of(
    st.builds(
        m.StartupMessage,
        st.just(3 << 16),
        st.lists(st.tuples(text.filter(bool), text), max_size=4).map(tuple),
    ),
    st.just(m.SSLRequest()),
    st.just(m.GSSENCRequest()),
    st.builds(m.CancelRequest, i32, i32),
)
fields = st.lists(st.tuples(st.sampled_from("SVCMDHPWF"), text), max_size=5).map(tuple)
backend = st.one_of(
    st.just(m.AuthenticationOk()),
    st.just(m.AuthenticationCleartextPassword()),
    st.builds(m.AuthenticationSASL, st.lists(text.filter(bool), max_size=3).map(tuple)),
    st.builds(m.AuthenticationSASLContinue, blob),
    st.builds(m.AuthenticationSASLFinal, blob),
    st.builds(m.ParameterStatus, text, text),
    st.builds(m.BackendKeyData, i32, i32),
    st.builds(m.ReadyForQuery, st.sampled_from(["I", "T", "E"])),
    st.builds(
        m.RowDescription,
        st.lists(
            st.builds(m.FieldDescription, text, u32, i16, i32, st.sampled_from([0, 1]), u32, i16),
            max_size=4,
        ).map(tuple),
    ),
    st.builds(m.DataRow, values),
    st.builds(m.CommandComplete, text),
    st.just(m.EmptyQueryResponse()),
    st.builds(m.ErrorResponse, fields),
    st.builds(m.NoticeResponse, fields),
    st.just(m.ParseComplete()),
    st.just(m.BindComplete()),
    st.just(m.CloseComplete()),
    st.builds(m.ParameterDescription, st.lists(u32, max_size=5).map(tuple)),
    st.just(m.NoData()),
    st.just(m.PortalSuspended()),
    st.builds(m.CopyInResponse, st.sampled_from([0, 1]), st.lists(i16, max_size=3).map(tuple)),
    st.builds(m.CopyOutResponse, st.sampled_from([0, 1]), st.lists(i16, max_size=3).map(tuple)),
    st.builds(m.CopyData, blob),
    st.just(m.CopyDone()),
    st.builds(m.NegotiateProtocolVersion, st.integers(0, 9), st.lists(text, max_size=2).map(tuple)),
)


def _split(data: bytes) -> tuple[bytes, bytes]:
    (length,) = struct.unpack_from(">i", data, 1)
    assert length == len(data) - 1
    return data[:1], data[5:]


@given(typed_frontend)
def test_frontend_messages_round_trip(msg: m.FrontendMessage) -> None:
    tag, payload = _split(encode_frontend(msg))
    assert decode_frontend(tag, payload) == msg


@given(startup)
def test_startup_packets_round_trip(msg: m.FrontendMessage) -> None:
    data = encode_frontend(msg)
    assert struct.unpack_from(">i", data)[0] == len(data)
    assert decode_startup(data[4:]) == msg


@given(backend)
def test_backend_messages_round_trip(msg: m.BackendMessage) -> None:
    tag, payload = _split(encode_backend(msg))
    assert decode_backend(tag, payload) == msg


def _ready() -> ServerConnection:
    conn = ServerConnection(max_message=1 << 16)
    conn.receive_data(encode_frontend(m.StartupMessage(3 << 16, (("user", "u"),))))
    assert isinstance(conn.next_event(), m.StartupMessage)
    conn.send(m.AuthenticationOk())
    conn.send(m.ReadyForQuery("I"))
    assert conn.phase is Phase.READY
    return conn


def _drain(conn: ServerConnection) -> list[object]:
    out: list[object] = []
    while True:
        try:
            ev = conn.next_event()
        except ProtocolViolation as e:
            out.append(e)
            if e.fatal:
                return out
            continue
        if ev is NEED_DATA or isinstance(ev, ConnectionClosed):
            out.append(ev)
            return out
        out.append(ev)


@given(st.binary(max_size=300), st.booleans())
def test_any_bytes_give_messages_or_typed_errors(data: bytes, started: bool) -> None:
    conn = _ready() if started else ServerConnection(max_message=1 << 16)
    conn.receive_data(data)
    _drain(conn)  # never anything but messages, NEED_DATA, closed, or ProtocolViolation
    conn.receive_data(b"")
    _drain(conn)


query_phase = typed_frontend.filter(lambda x: not isinstance(x, m.Terminate | m.PasswordMessage))


@given(st.lists(query_phase, max_size=6), st.data())
def test_messages_cut_anywhere_arrive_whole(
    msgs: list[m.FrontendMessage], data: st.DataObject
) -> None:
    conn = _ready()
    wire = b"".join(encode_frontend(x) for x in msgs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    got: list[object] = []
    last = 0
    for cut in [*cuts, len(wire)]:
        if cut == last:
            continue  # b"" is the end of input
        conn.receive_data(wire[last:cut])
        last = cut
        got += [e for e in _drain(conn) if e is not NEED_DATA]
    # copy messages outside COPY are dropped, as PostgreSQL drops them
    expected = [x for x in msgs if not isinstance(x, m.CopyData | m.CopyDone | m.CopyFail)]
    assert got == expected


def test_a_huge_length_is_refused_from_the_header() -> None:
    conn = _ready()
    conn.receive_data(b"Q" + struct.pack(">i", 2**31 - 1))
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert e.value.fatal and e.value.sqlstate == "54000"
    assert conn.phase is Phase.CLOSED
    assert isinstance(conn.next_event(), ConnectionClosed)


@pytest.mark.parametrize("length", [0, 3, 7, 10_001, -5])
def test_a_startup_length_out_of_bounds_is_fatal(length: int) -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", length) + b"\0" * 8)
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert e.value.fatal


def test_an_unknown_message_type_is_fatal() -> None:
    conn = _ready()
    conn.receive_data(b"z\0\0\0\x04")
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert e.value.fatal


def test_a_malformed_bind_skips_its_batch() -> None:
    conn = _ready()
    conn.receive_data(b"B\0\0\0\x06\0\0")  # no parameter counts
    conn.receive_data(encode_frontend(m.Execute("", 0)) + encode_frontend(m.Sync()))
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert not e.value.fatal
    assert conn.next_event() == m.Sync()


def test_after_an_extended_error_the_batch_is_skipped_until_sync() -> None:
    conn = _ready()
    batch = [m.Parse("", "SELECT 1"), m.Bind("", ""), m.Execute("", 0), m.Sync()]
    conn.receive_data(b"".join(encode_frontend(x) for x in batch))
    assert conn.next_event() == m.Parse("", "SELECT 1")
    conn.send(m.ErrorResponse((("S", "ERROR"), ("C", "42601"), ("M", "boom"))))
    assert conn.next_event() == m.Sync()
    assert conn.next_event() is NEED_DATA


def test_copy_in_takes_copy_messages_only() -> None:
    conn = _ready()
    conn.receive_data(encode_frontend(m.Query("COPY t FROM STDIN")))
    conn.next_event()
    conn.send(m.CopyInResponse(0, (0,)))
    conn.receive_data(
        encode_frontend(m.CopyData(b"1\n"))
        + encode_frontend(m.Sync())
        + encode_frontend(m.CopyDone())
    )
    assert conn.next_event() == m.CopyData(b"1\n")
    assert conn.next_event() == m.CopyDone()
    assert conn.phase is Phase.READY
    conn.receive_data(encode_frontend(m.Query("COPY t FROM STDIN")))
    conn.next_event()
    conn.send(m.CopyInResponse(0, ()))
    conn.receive_data(encode_frontend(m.Query("SELECT 1")))
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert not e.value.fatal and conn.phase is Phase.READY


def test_authentication_takes_passwords_only() -> None:
    conn = ServerConnection()
    conn.receive_data(encode_frontend(m.StartupMessage(3 << 16, (("user", "u"),))))
    conn.next_event()
    conn.receive_data(encode_frontend(m.Query("SELECT 1")))
    with pytest.raises(ProtocolViolation) as e:
        conn.next_event()
    assert e.value.fatal


def test_a_second_ssl_request_is_refused() -> None:
    conn = ServerConnection()
    conn.receive_data(encode_frontend(m.SSLRequest()) * 2)
    assert conn.next_event() == m.SSLRequest()
    with pytest.raises(ProtocolViolation):
        conn.next_event()


def test_end_of_input_mid_message_is_a_truncated_close() -> None:
    conn = _ready()
    conn.receive_data(encode_frontend(m.Query("SELECT 1"))[:7])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_event() == ConnectionClosed(truncated=True)


def test_a_fatal_error_closes() -> None:
    conn = _ready()
    conn.send(m.ErrorResponse((("S", "FATAL"), ("C", "57P01"), ("M", "bye"))))
    assert conn.phase is Phase.CLOSED
    assert conn.send(m.ReadyForQuery("I")) == b""


@pytest.mark.parametrize("started", [False, True])
def test_a_length_over_the_limit_is_refused_from_the_header_and_the_fatal_still_goes_out(
    started: bool,
) -> None:
    """The machine refuses a length out of bounds before buffering the body it announces, and
    closes; the FATAL that says why is still sent (it used to be dropped by the closed machine,
    so the client saw the connection end without a word), and nothing after it."""
    conn = _ready() if started else ServerConnection(max_message=1 << 16)
    header = b"Q" + struct.pack(">i", 2**31 - 1) if started else struct.pack(">i", 2**31 - 1)
    conn.receive_data(header)
    with pytest.raises(ProtocolViolation) as info:
        conn.next_event()
    assert info.value.fatal and conn.phase is Phase.CLOSED
    fatal = m.ErrorResponse((("S", "FATAL"), ("C", info.value.sqlstate), ("M", str(info.value))))
    assert conn.send(fatal)[:1] == b"E"
    assert conn.send(fatal) == b"" and conn.send(m.ReadyForQuery("I")) == b""
