"""Row fingerprints: keyed 61-bit hashes whose weighted sums detect a non-empty multiset.

For a multiset with counts ``c_r``, ``sum(c_r * h(r)) mod p`` is 0 when every
count is 0, and otherwise is 0 with probability about ``1/p`` over the hash
key (``p = 2**61 - 1``). Two independent fingerprints make a false "empty"
practically impossible (about ``2**-120``) while staying additive, so a
group's presence can be kept in per-key accumulators without per-row state.

The hash is Python's string hash (SipHash, keyed at random per process) of
the row's ``repr`` behind a random per-executor prefix -- measured about 5x
cheaper than ``hashlib.blake2b``, which matters at 20,000 rows per step.
Fingerprints therefore only make sense within one process, which is where
the state they summarise lives.
"""

from __future__ import annotations

import os

from tidegate.spec.frontier import Row

__all__ = ["PRIME", "Fingerprinter"]

PRIME = 2**61 - 1


def _normal(v: object) -> object:
    # -0.0 and 0.0 are the same row (equal and equally hashed in Python)
    return 0.0 if type(v) is float and v == 0.0 else v


class Fingerprinter:
    """Two keyed hashes of rows into ``[0, PRIME)``; the key is random unless given."""

    def __init__(self, key: bytes | None = None) -> None:
        salt = (key if key is not None else os.urandom(16)).hex()
        self._a, self._b = salt + "|", salt + "#"

    def __call__(self, row: Row) -> tuple[int, int]:
        if 0.0 in row:  # also true for 0 and False, which _normal leaves alone
            row = tuple(_normal(v) for v in row)
        text = repr(row)
        return hash(self._a + text) % PRIME, hash(self._b + text) % PRIME
