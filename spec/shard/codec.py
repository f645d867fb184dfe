"""The durable encoding of a shard's state: versioned JSON bytes.

The record carries ``"format"``; a record from a newer format (or one that is not
a state record at all) raises :class:`UnsupportedStateVersion` naming the shard,
so an old binary never misreads state written by a newer one.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import UnsupportedStateVersion
from ..frontier import Antichain
from .state import (
    FORMAT_VERSION,
    BatchMeta,
    CriticalReader,
    LeasedReader,
    ShardState,
    WriterState,
)

__all__ = ["decode_state", "encode_state"]


def _f(a: Antichain) -> list[int]:
    return list(a.elements)


def _batch(b: BatchMeta) -> list[Any]:
    return [b.key, _f(b.lower), _f(b.upper), _f(b.since), b.length, b.min_time, b.max_time]


def encode_state(state: ShardState) -> bytes:
    """Encode ``state`` (its seqno travels beside it, in the consensus record)."""
    doc = {
        "format": FORMAT_VERSION,
        "shard": state.shard,
        "since": _f(state.since),
        "upper": _f(state.upper),
        "batches": [_batch(b) for b in state.batches],
        "leased": {
            k: [_f(r.since), r.last_heartbeat_ms, r.lease_ms]
            for k, r in sorted(state.leased_readers.items())
        },
        "critical": {k: [_f(r.since), r.opaque] for k, r in sorted(state.critical_readers.items())},
        "writers": {
            k: [w.last_token, _f(w.last_upper), w.last_heartbeat_ms]
            for k, w in sorted(state.writers.items())
        },
        "schema": state.schema,
        "finalized": state.finalized,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_state(shard: str, seqno: int, data: bytes) -> ShardState:
    """Decode a record of ``shard`` stored at ``seqno``; raise if its format is unknown."""
    try:
        doc = json.loads(data)
        version = doc["format"] if isinstance(doc, dict) else None
    except (ValueError, KeyError) as e:
        raise UnsupportedStateVersion(
            shard, f"state record at seqno {seqno} is unreadable: {e}"
        ) from e
    if type(version) is not int or version > FORMAT_VERSION or version < 1:
        raise UnsupportedStateVersion(
            shard,
            f"state record at seqno {seqno} has format {version!r}; "
            f"this build reads formats up to {FORMAT_VERSION}",
        )
    try:
        return ShardState(
            shard=doc["shard"],
            seqno=seqno,
            since=Antichain(doc["since"]),
            upper=Antichain(doc["upper"]),
            batches=tuple(
                BatchMeta(k, Antichain(lo), Antichain(up), Antichain(si), n, tmin, tmax)
                for k, lo, up, si, n, tmin, tmax in doc["batches"]
            ),
            leased_readers={
                k: LeasedReader(Antichain(s), hb, lease)
                for k, (s, hb, lease) in doc["leased"].items()
            },
            critical_readers={
                k: CriticalReader(Antichain(s), op) for k, (s, op) in doc["critical"].items()
            },
            writers={
                k: WriterState(tok, Antichain(up), hb)
                for k, (tok, up, hb) in doc["writers"].items()
            },
            schema=doc["schema"],
            finalized=doc["finalized"],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise UnsupportedStateVersion(
            shard, f"state record at seqno {seqno} is malformed: {e!r}"
        ) from e
