"""Checksummed records: the controller's own Consensus records (catalog, oracle), sealed.

A record is an envelope and a payload, as a shard's state record is
(:mod:`tidegate.spec.shard.codec`)::

    tidegate-<kind> sha256=<64 hex digits>\\n<payload>

The digest is the SHA-256 of the payload, so any changed byte -- bit rot on
the disk, an edit by hand that still parses -- makes :func:`unseal` raise
instead of returning other data. A record without an envelope (written
before records were sealed) is returned as it is, for the caller to decode:
its next write seals it.
"""

from __future__ import annotations

import hashlib

__all__ = ["RecordCorrupt", "seal", "unseal"]

_HEX = 64


class RecordCorrupt(ValueError):
    """A sealed record whose envelope or digest does not match its bytes (``reason`` says how)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind} record is corrupt: {reason}")
        self.kind = kind
        self.reason = reason


def _envelope(kind: str) -> bytes:
    return b"tidegate-" + kind.encode("ascii") + b" sha256="


def seal(kind: str, payload: bytes) -> bytes:
    """``payload`` in the envelope of a ``kind`` record (``catalog``, ``oracle``...)."""
    digest = hashlib.sha256(payload).hexdigest().encode("ascii")
    return b"%s%s\n%s" % (_envelope(kind), digest, payload)


def unseal(kind: str, data: bytes) -> bytes:
    """The payload of a sealed ``kind`` record [RecordCorrupt]; ``data`` itself if it carries no
    envelope at all (a record written before sealing: its payload is JSON, so it starts with
    ``{``; anything else that is not a whole envelope is corrupt)."""
    data = bytes(data)
    if data[:1] == b"{":
        return data
    envelope = _envelope(kind)
    header = len(envelope) + _HEX + 1
    if not data.startswith(envelope) or len(data) < header or data[header - 1 : header] != b"\n":
        raise RecordCorrupt(kind, "its envelope is damaged (not a sealed record)")
    recorded = data[len(envelope) : header - 1]
    payload = data[header:]
    computed = hashlib.sha256(payload).hexdigest().encode("ascii")
    if recorded != computed:
        raise RecordCorrupt(
            kind,
            f"checksum mismatch: recorded sha256 {recorded[:12].decode('ascii', 'replace')}…, "
            f"computed {computed[:12].decode('ascii')}…",
        )
    return payload
