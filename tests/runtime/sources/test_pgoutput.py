"""The pgoutput decoder and the text parsers, against an encoder written here from the protocol docs.

Laws: every message decodes to what was encoded; any strict prefix, any
trailing byte and any byte string at all either decode or raise
``UpstreamProtocolViolation`` (never another exception); the text parsers
invert PostgreSQL's text output for every value a tidegate type holds and
refuse the rest.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.sources.postgres._pgoutput import (
    UNCHANGED,
    Begin,
    ColumnValue,
    Commit,
    Delete,
    Insert,
    Keepalive,
    LogicalMessage,
    Message,
    Origin,
    Relation,
    RelationColumn,
    Truncate,
    TypeInfo,
    Update,
    XLogData,
    decode_frame,
    decode_insert,
    decode_message,
    standby_status_update,
)
from tidegate.runtime.sources.postgres._types import PARSERS, Unrepresentable
from tidegate.spec.errors import UpstreamProtocolViolation
from tidegate.spec.plan.scalar_eval import NAN
from tidegate.spec.plan.schema import INT64_MAX, INT64_MIN, ScalarType

# -- an encoder, from "Logical Replication Message Formats" ---------------------------------


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def _tuple(values: tuple[ColumnValue, ...]) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is UNCHANGED:
            out += b"u"
        elif isinstance(v, str):
            raw = v.encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
        else:
            assert isinstance(v, bytes)
            out += b"b" + struct.pack(">i", len(v)) + v
    return out


def encode(m: Message) -> bytes:
    if isinstance(m, Begin):
        return b"B" + struct.pack(">QqI", m.final_lsn, m.commit_time, m.xid)
    if isinstance(m, Commit):
        return b"C" + struct.pack(">BQQq", m.flags, m.commit_lsn, m.end_lsn, m.commit_time)
    if isinstance(m, Origin):
        return b"O" + struct.pack(">Q", m.lsn) + _s(m.name)
    if isinstance(m, Relation):
        out = b"R" + struct.pack(">I", m.relation_id) + _s(m.namespace) + _s(m.name)
        out += m.replica_identity.encode() + struct.pack(">h", len(m.columns))
        for c in m.columns:
            out += bytes([c.flags]) + _s(c.name) + struct.pack(">Ii", c.type_oid, c.type_modifier)
        return out
    if isinstance(m, TypeInfo):
        return b"Y" + struct.pack(">I", m.type_oid) + _s(m.namespace) + _s(m.name)
    if isinstance(m, Insert):
        return b"I" + struct.pack(">I", m.relation_id) + b"N" + _tuple(m.new)
    if isinstance(m, Update):
        out = b"U" + struct.pack(">I", m.relation_id)
        if m.old_kind is not None:
            assert m.old is not None
            out += m.old_kind.encode() + _tuple(m.old)
        return out + b"N" + _tuple(m.new)
    if isinstance(m, Delete):
        return b"D" + struct.pack(">I", m.relation_id) + m.old_kind.encode() + _tuple(m.old)
    if isinstance(m, Truncate):
        out = b"T" + struct.pack(">iB", len(m.relation_ids), m.options)
        return out + b"".join(struct.pack(">I", r) for r in m.relation_ids)
    assert isinstance(m, LogicalMessage)
    out = b"M" + struct.pack(">BQ", m.flags, m.lsn) + _s(m.prefix)
    return out + struct.pack(">i", len(m.content)) + m.content


# -- strategies -----------------------------------------------------------------------------

u8 = st.integers(0, 255)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
names = st.text(st.characters(exclude_characters="\0", exclude_categories=["Cs"]), max_size=12)
values: st.SearchStrategy[ColumnValue] = st.one_of(
    st.none(),
    st.just(UNCHANGED),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=20),
    st.binary(max_size=20),
)
tuples = st.lists(values, max_size=6).map(tuple)

messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Begin, u64, i64, u32),
    st.builds(Commit, u8, u64, u64, i64),
    st.builds(Origin, u64, names),
    st.builds(
        Relation,
        u32,
        names,
        names,
        st.sampled_from("dnfi"),
        st.lists(st.builds(RelationColumn, u8, names, u32, i32), max_size=5).map(tuple),
    ),
    st.builds(TypeInfo, u32, names, names),
    st.builds(Insert, u32, tuples),
    st.builds(Update, u32, st.just(None), st.none(), tuples),
    st.builds(Update, u32, st.sampled_from("KO"), tuples, tuples),
    st.builds(Delete, u32, st.sampled_from("KO"), tuples),
    st.builds(Truncate, u8, st.lists(u32, max_size=4).map(tuple)),
    st.builds(LogicalMessage, u8, u64, names, st.binary(max_size=20)),
)


# -- laws -----------------------------------------------------------------------------------


@given(messages)
def test_every_message_decodes_to_what_was_encoded(m: Message) -> None:
    assert decode_message(encode(m)) == m


@given(messages)
def test_the_insert_fast_path_agrees_with_the_decoder(m: Message) -> None:
    fast = decode_insert(encode(m))
    if isinstance(m, Insert):
        assert fast == (m.relation_id, m.new)
    else:
        assert fast is None


@given(messages, st.data())
def test_a_cut_message_is_a_protocol_violation(m: Message, data: st.DataObject) -> None:
    raw = encode(m)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(UpstreamProtocolViolation):
        decode_message(raw[:cut])


@given(messages, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_are_a_protocol_violation(m: Message, tail: bytes) -> None:
    with pytest.raises(UpstreamProtocolViolation):
        decode_message(encode(m) + tail)


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_only_a_protocol_violation(raw: bytes) -> None:
    with contextlib.suppress(UpstreamProtocolViolation):
        decode_message(raw)


@given(u64, u64, i64, st.binary(max_size=40))
def test_xlogdata_frames(start: int, end: int, ts: int, payload: bytes) -> None:
    frame = b"w" + struct.pack(">QQq", start, end, ts) + payload
    assert decode_frame(frame) == XLogData(start, end, ts, payload)


@given(u64, i64, st.booleans())
def test_keepalive_frames(end: int, ts: int, reply: bool) -> None:
    frame = b"k" + struct.pack(">Qq?", end, ts, reply)
    assert decode_frame(frame) == Keepalive(end, ts, reply)
    with pytest.raises(UpstreamProtocolViolation):
        decode_frame(frame[:-1])


@given(st.binary(max_size=40))
def test_any_frame_decodes_or_raises_only_a_protocol_violation(raw: bytes) -> None:
    with contextlib.suppress(UpstreamProtocolViolation):
        decode_frame(raw)


def test_standby_status_update_layout() -> None:
    frame = standby_status_update(1, 2, 3, 4, reply=True)
    assert frame == b"r" + struct.pack(">QQQqB", 1, 2, 3, 4, 1)


def test_a_message_with_invalid_utf8_is_a_protocol_violation() -> None:
    with pytest.raises(UpstreamProtocolViolation, match="UTF-8"):
        decode_message(b"I" + struct.pack(">I", 1) + b"N" + b"\0\1t\0\0\0\1\xff")


# -- text parsers ---------------------------------------------------------------------------


@given(st.integers(INT64_MIN, INT64_MAX))
def test_int64_text(n: int) -> None:
    assert PARSERS[ScalarType.INT64](str(n)) == n


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float64_text_is_exact(x: float) -> None:
    # PostgreSQL 12+ writes the shortest text that reads back exactly (extra_float_digits=1),
    # as repr does; the values are the same.
    parsed = PARSERS[ScalarType.FLOAT64](repr(x))
    assert parsed == x and math.copysign(1, parsed) == math.copysign(1, x)


def test_non_finite_floats_are_float64_values() -> None:
    assert PARSERS[ScalarType.FLOAT64]("Infinity") == math.inf
    assert PARSERS[ScalarType.FLOAT64]("-Infinity") == -math.inf
    assert PARSERS[ScalarType.FLOAT64]("NaN") is NAN  # the one NaN object rows share


@given(st.dates())
def test_date_text(d: dt.date) -> None:
    assert PARSERS[ScalarType.DATE](d.isoformat()) == d


@given(st.datetimes())
def test_timestamp_text(t: dt.datetime) -> None:
    # ISO DateStyle: "YYYY-MM-DD HH:MM:SS" and ".ffffff" only when there are microseconds.
    text = t.isoformat(sep=" ", timespec="microseconds" if t.microsecond else "seconds")
    assert PARSERS[ScalarType.TIMESTAMP](text) == t


@pytest.mark.parametrize(
    ("scalar", "text"),
    [
        (ScalarType.DATE, "infinity"),
        (ScalarType.DATE, "-infinity"),
        (ScalarType.DATE, "0044-03-15 BC"),
        (ScalarType.DATE, "10000-01-01"),
        (ScalarType.TIMESTAMP, "infinity"),
        (ScalarType.TIMESTAMP, "0044-03-15 12:00:00 BC"),
        (ScalarType.TIMESTAMP, "10000-01-01 00:00:00"),
        (ScalarType.BOOL, "true"),
    ],
)
def test_values_outside_tidegate_types_are_unrepresentable(scalar: ScalarType, text: str) -> None:
    with pytest.raises(Unrepresentable):
        PARSERS[scalar](text)


def test_bool_text() -> None:
    assert PARSERS[ScalarType.BOOL]("t") is True
    assert PARSERS[ScalarType.BOOL]("f") is False
