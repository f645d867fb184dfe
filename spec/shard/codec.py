"""The durable encoding of a shard's state: checksummed, versioned JSON bytes.

A record of format 2 (the current one) is an envelope and a payload::

    tidegate-shard sha256=<64 hex digits>\\n<JSON payload>

The digest is the SHA-256 of the payload, so every byte of the record is
covered: a changed payload byte fails the digest, a changed envelope byte makes
the envelope unreadable or the digest wrong. Either raises
:class:`ConsensusCorrupt` (naming the shard, the seqno and the two digests)
before anything is decoded. The payload carries ``"format"``; an intact record
of a newer format (or one that is not a shard's state at all) raises
:class:`UnsupportedStateVersion`, so an old binary never misreads state
written by a newer one. The envelope stays the same across formats.

Each batch in the payload records the SHA-256 of its blob's bytes
(:func:`blob_digest`), which the store checks on every read of the blob. An
inline batch carries its bytes in the payload (base64, a ninth field), where
the record's checksum covers them too. ``requests`` (client request ids of
recent appends, with their times) is present only when there are some.

Records of format 1 (plain JSON, no checksum, batches without digests) are
still read: they come from stores written before checksums, and the next
write of the shard replaces them with a format 2 record. Their old batches
keep no digest (they are read unchecked) until compaction rewrites them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from ..errors import ConsensusCorrupt, UnsupportedStateVersion
from ..frontier import Antichain
from .state import (
    FORMAT_VERSION,
    BatchMeta,
    CriticalReader,
    LeasedReader,
    ShardState,
    WriterState,
)

__all__ = ["ENVELOPE", "blob_digest", "decode_state", "encode_state"]

ENVELOPE = b"tidegate-shard sha256="
"""The first bytes of every checksummed state record (format 2 and later)."""
_HEX = 64  # hex digits of a SHA-256
_HEADER = len(ENVELOPE) + _HEX + 1  # the envelope, the digest, "\n"
_HEXDIGITS = frozenset(b"0123456789abcdef")


def blob_digest(data: bytes) -> str:
    """The digest a batch records for its blob: the SHA-256 of ``data``, as hex."""
    return hashlib.sha256(data).hexdigest()


def _f(a: Antichain) -> list[int]:
    return list(a.elements)


def _batch(b: BatchMeta) -> list[Any]:
    fields = [
        b.key,
        _f(b.lower),
        _f(b.upper),
        _f(b.since),
        b.length,
        b.min_time,
        b.max_time,
        b.digest,
    ]
    if b.inline is not None:
        fields.append(base64.b64encode(b.inline).decode("ascii"))
    return fields


def _encoded_batch(b: BatchMeta) -> str:
    text = b.encoded
    if text is None:
        text = _dumps(_batch(b))
        object.__setattr__(b, "encoded", text)  # a cache of b's own fields, see BatchMeta
    return text


def _dumps(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"))


def encode_state(state: ShardState) -> bytes:
    """Encode ``state`` (its seqno travels beside it, in the consensus record).

    The bytes are ``json.dumps`` of the whole document; each batch's part is encoded
    once per batch (see :attr:`BatchMeta.encoded`) and spliced in.
    """
    head = {
        "format": FORMAT_VERSION,
        "shard": state.shard,
        "since": _f(state.since),
        "upper": _f(state.upper),
    }
    tail = {
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
    if state.requests:  # absent when empty: records without requests read the same everywhere
        tail["requests"] = dict(sorted(state.requests.items()))
    batches = ",".join([_encoded_batch(b) for b in state.batches])
    payload = f'{_dumps(head)[:-1]},"batches":[{batches}],{_dumps(tail)[1:]}'.encode()
    return b"%s%s\n%s" % (ENVELOPE, blob_digest(payload).encode("ascii"), payload)


def _open_envelope(shard: str, seqno: int, data: bytes) -> bytes:
    """The verified payload of a format-2 record ([ConsensusCorrupt] if damaged)."""
    recorded = data[len(ENVELOPE) : len(ENVELOPE) + _HEX]
    if (
        len(data) < _HEADER
        or data[_HEADER - 1 : _HEADER] != b"\n"
        or not _HEXDIGITS.issuperset(recorded)
    ):
        raise ConsensusCorrupt(shard, seqno, "its checksum envelope is damaged")
    payload = data[_HEADER:]
    expected, actual = recorded.decode("ascii"), blob_digest(payload)
    if expected != actual:
        raise ConsensusCorrupt(
            shard,
            seqno,
            f"checksum mismatch: recorded sha256 {expected[:12]}…, computed {actual[:12]}…",
            expected=expected,
            actual=actual,
        )
    return payload


def decode_state(shard: str, seqno: int, data: bytes) -> ShardState:
    """Decode a record of ``shard`` stored at ``seqno``.

    Raises :class:`ConsensusCorrupt` for a damaged record (checksum mismatch, not
    a state record) and :class:`UnsupportedStateVersion` for an intact record of
    a format this build cannot read.
    """
    data = bytes(data)
    if data.startswith(ENVELOPE):
        payload, legacy = _open_envelope(shard, seqno, data), False
    elif data.startswith(b"{"):
        payload, legacy = data, True  # format 1: no checksum to verify
    else:
        raise ConsensusCorrupt(shard, seqno, "it is not a shard state record")
    try:
        doc = json.loads(payload)
    except ValueError as e:
        raise ConsensusCorrupt(shard, seqno, f"its payload is not JSON ({e})") from e
    version = doc.get("format") if isinstance(doc, dict) else None
    if (legacy and version != 1) or type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise UnsupportedStateVersion(
            shard,
            f"state record at seqno {seqno} has format {version!r}; "
            f"this build reads formats up to {FORMAT_VERSION}",
        )
    try:
        state = ShardState(
            shard=doc["shard"],
            seqno=seqno,
            since=Antichain(doc["since"]),
            upper=Antichain(doc["upper"]),
            batches=tuple(_decode_batch(b, version) for b in doc["batches"]),
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
            requests=_requests(doc.get("requests", {})),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise UnsupportedStateVersion(
            shard, f"state record at seqno {seqno} is malformed: {e!r}"
        ) from e
    if state.shard != shard:
        raise ConsensusCorrupt(shard, seqno, f"it is the state of shard {state.shard!r}")
    return state


def _requests(doc: Any) -> dict[str, int]:
    if not isinstance(doc, dict) or not all(
        type(k) is str and type(t) is int for k, t in doc.items()
    ):
        raise TypeError(f"requests must map ids to times, got {doc!r}")
    return doc


def _decode_batch(b: list[Any], version: int) -> BatchMeta:
    if version == 1:
        k, lo, up, si, n, tmin, tmax = b
        digest = None
    else:
        k, lo, up, si, n, tmin, tmax, digest, *rest = b
        if digest is not None and type(digest) is not str:
            raise TypeError(f"batch {k!r} has a digest that is not text: {digest!r}")
        if len(rest) > 1 or (rest and type(rest[0]) is not str):
            raise TypeError(f"batch {k!r} has malformed inline data")
        if rest:
            inline = base64.b64decode(rest[0], validate=True)
            return BatchMeta(
                k, Antichain(lo), Antichain(up), Antichain(si), n, tmin, tmax, digest, inline
            )
    return BatchMeta(k, Antichain(lo), Antichain(up), Antichain(si), n, tmin, tmax, digest)
