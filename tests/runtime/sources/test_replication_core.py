"""The PostgreSQL reader's protocol core without IO: frames in, batches, status and errors out.

Frames are built here from the protocol docs ("Streaming Replication Protocol",
"Logical Replication Message Formats"). Laws: however the stream is cut into
reads, the same batches come out (whole transactions at their end LSN, uppers
from commits and from keepalives between transactions only); an ack reports the
LSN below the offset as flushed, and nothing beyond what was delivered; a
RELATION of another shape is the typed error, after what was complete before
it; another table's changes are ignored; a late snapshot is rewound to the
slot's position; the start is chosen from what the slot says.
"""

from __future__ import annotations

import itertools
import struct
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.sources.postgres._catalog import SlotInfo, UpstreamColumn, UpstreamTable
from tidegate.runtime.sources.postgres._core import (
    ReplicationCore,
    ServerRefused,
    StatusUpdate,
    plan_start,
)
from tidegate.spec.errors import (
    ReplicationSlotMissing,
    SourceConfigurationInvalid,
    SourceReaderMisused,
    UpstreamProtocolViolation,
    UpstreamSchemaChanged,
    UpstreamUnreachable,
)
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import ScalarType
from tidegate.spec.storage.connections import SourceBatch

OID = 16400
TABLE = UpstreamTable(
    OID,
    "public",
    "t",
    (
        UpstreamColumn("k", 25, -1, "text", True, ScalarType.STRING),
        UpstreamColumn("n", 20, -1, "bigint", False, ScalarType.INT64),
    ),
)


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def _tuple(values: tuple[str | None, ...]) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        else:
            out += b"t" + struct.pack(">i", len(v.encode())) + v.encode()
    return out


def _w(payload: bytes) -> bytes:
    return b"w" + struct.pack(">QQq", 0, 0, 0) + payload


def _k(wal_end: int, reply: bool = False) -> bytes:
    return b"k" + struct.pack(">QqB", wal_end, 0, int(reply))


def _relation(
    oid: int = OID, columns: tuple[tuple[str, int], ...] = (("k", 25), ("n", 20))
) -> bytes:
    out = b"R" + struct.pack(">I", oid) + _s("public") + _s("t") + b"f"
    out += struct.pack(">h", len(columns))
    for name, type_oid in columns:
        out += b"\0" + _s(name) + struct.pack(">Ii", type_oid, -1)
    return _w(out)


def _txn(end: int, *changes: bytes) -> list[bytes]:
    commit = end - 1
    return [
        _w(b"B" + struct.pack(">QqI", commit, 0, 7)),
        *changes,
        _w(b"C" + struct.pack(">BQQq", 0, commit, end, 0)),
    ]


def _insert(k: str, n: str | None, oid: int = OID) -> bytes:
    return _w(b"I" + struct.pack(">I", oid) + b"N" + _tuple((k, n)))


def _update(old: tuple[str, str | None], new: tuple[str, str | None]) -> bytes:
    return _w(b"U" + struct.pack(">I", OID) + b"O" + _tuple(old) + b"N" + _tuple(new))


def _delete(k: str, n: str | None) -> bytes:
    return _w(b"D" + struct.pack(">I", OID) + b"O" + _tuple((k, n)))


def _core(resume: int = 10) -> ReplicationCore:
    core = ReplicationCore(TABLE, slot="s", publication="p", server="db")
    core.started(core.resume(resume, resume - 1), 0.0)
    return core


STREAM = [
    _relation(),
    *_txn(12, _insert("a", "1"), _insert("b", None)),
    _k(13),
    *_txn(15, _update(("a", "1"), ("a", "2")), _insert("x", "9", oid=OID + 1)),
    *_txn(16, _delete("b", None)),
    _k(20),
]
WANT = [
    (("a", 1), 12, 1),
    (("b", None), 12, 1),
    (("a", 1), 15, -1),
    (("a", 2), 15, 1),
    (("b", None), 16, -1),
]


def _run(core: ReplicationCore, frames: list[bytes], cuts: list[int]) -> list[SourceBatch]:
    """Feed ``frames`` in reads cut at ``cuts``; the batches handed out after each read."""
    out: list[SourceBatch] = []
    bounds = [0, *sorted(set(cuts)), len(frames)]
    for lo, hi in itertools.pairwise(bounds):
        for frame in frames[lo:hi]:
            core.receive(frame, 0.0)
        while (batch := core.deliverable()) is not None:
            out.append(batch)
    return out


@given(st.lists(st.integers(0, len(STREAM)), max_size=8))
def test_however_the_stream_is_cut_the_same_whole_transactions_come_out(cuts: list[int]) -> None:
    core = _core()
    batches = _run(core, STREAM, cuts)
    assert core.error is None
    assert [u for b in batches for u in b.updates] == WANT
    upper = 10
    for b in batches:  # the reader contract: uppers grow, every update below its batch's upper
        assert b.upper > upper and all(upper <= o < b.upper for _, o, _ in b.updates)
        upper = b.upper
    assert upper == 21  # the last keepalive: everything before WAL 20 was sent


def test_a_keepalive_inside_a_transaction_does_not_move_the_upper() -> None:
    core = _core()
    frames = _txn(12, _insert("a", "1"))
    for frame in [frames[0], frames[1], _k(30)]:
        core.receive(frame, 0.0)
    assert core.deliverable() is None
    core.receive(frames[2], 0.0)
    batch = core.deliverable()
    assert batch is not None and batch.upper == 13


def test_transactions_already_durable_are_skipped() -> None:
    core = _core(resume=15)
    batches = _run(core, STREAM, [])
    assert [u for b in batches for u in b.updates] == WANT[2:]


def test_an_ack_reports_the_lsn_below_it_as_flushed_and_never_past_what_was_delivered() -> None:
    core = _core()
    _run(core, STREAM, [])
    core.take_status()
    with pytest.raises(SourceReaderMisused):
        core.ack(22, 1.0)
    core.ack(16, 1.0)
    assert core.take_status() == [StatusUpdate(20, 15)]
    core.ack(16, 2.0)  # nothing new to report
    assert core.take_status() == []
    assert StatusUpdate(20, 15).encode(5) == b"r" + struct.pack(">QQQqB", 20, 15, 15, 5, 0)


def test_status_goes_out_every_interval_and_when_a_keepalive_asks() -> None:
    core = _core()
    core.tick(0.5)
    assert core.take_status() == []
    core.tick(1.0)
    assert core.take_status() == [StatusUpdate(9, 9)]
    core.receive(_k(12, reply=True), 1.2)
    assert core.take_status() == [StatusUpdate(12, 9)]


def test_a_changed_relation_is_the_typed_error_after_what_was_complete_before_it() -> None:
    core = _core()
    frames = [
        *_txn(12, _relation(), _insert("a", "1")),
        *_txn(14, _relation(columns=(("k", 25), ("n", 20), ("note", 25)))),
    ]
    batches = _run(core, frames, [])
    assert [u for b in batches for u in b.updates] == [(("a", 1), 12, 1)]
    assert isinstance(core.error, UpstreamSchemaChanged)
    assert "note" in str(core.error)
    core.receive(_k(40), 0.0)  # nothing more is taken in
    assert core.deliverable() is None


def test_garbage_and_broken_streams_are_kept_as_typed_errors() -> None:
    core = _core()
    core.receive(b"z123", 0.0)
    assert isinstance(core.error, UpstreamProtocolViolation)
    core = _core()
    core.fail(core.refusal(ServerRefused("57P01", "terminating connection")))
    assert isinstance(core.error, UpstreamUnreachable)
    assert isinstance(
        _core().refusal(ServerRefused("42704", 'slot "s" does not exist')), ReplicationSlotMissing
    )


def test_a_late_snapshot_is_rewound_to_the_slots_position() -> None:
    """A snapshot at 16 of rows a, b: the stream from 11 brings the transactions at 12 and 15
    (in the snapshot, so taken back) and one at 18 (after it): the batch at 11 is the table then."""
    core = ReplicationCore(TABLE, slot="s", publication="p", server="db")
    rows: Counter[Row] = Counter({("a", 2): 1, ("z", 5): 1})
    core.started(core.rewound_snapshot(0, 11, 16, rows, 0), 0.0)
    frames = [
        _relation(),
        *_txn(12, _insert("a", "1"), _insert("b", None)),
        *_txn(15, _update(("a", "1"), ("a", "2")), _delete("b", None)),
        *_txn(18, _insert("c", "3")),
    ]
    batches = _run(core, frames, [])
    assert batches[0].upper == 12 and sorted(batches[0].updates) == [(("z", 5), 11, 1)]
    assert [u for b in batches[1:] for u in b.updates][-1] == (("c", 3), 18, 1)


def test_the_start_is_chosen_from_what_the_slot_says() -> None:
    slot = SlotInfo("s", "pgoutput", True, True, 20, None, False)
    assert plan_start("s", 0, None).kind == "fresh"
    assert plan_start("s", 0, slot).kind == "rewind"
    assert plan_start("s", 20, slot).kind == "rewind"  # the snapshot was never durable
    assert plan_start("s", 21, slot).kind == "resume"
    lost = SlotInfo("s", "pgoutput", True, True, 20, None, True)
    assert plan_start("s", 0, lost) == plan_start("s", 0, None).__class__("fresh", 0, True)
    with pytest.raises(ReplicationSlotMissing):
        plan_start("s", 21, lost)
    with pytest.raises(ReplicationSlotMissing):
        plan_start("s", 21, None)
    with pytest.raises(SourceConfigurationInvalid):
        plan_start("s", 0, SlotInfo("s", "test_decoding", True, True, 20, None, False))
