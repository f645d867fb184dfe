"""The accumulating Reduce's step arithmetic in numpy: grouping and per-key running sums.

A step's change is an int64 matrix (:class:`Layout`): a row per change, a
column per count or sum slot and two per fingerprint slot (its 30-bit high
part and low half, so that sums of many cannot overflow). Sorting it by key
and time and summing runs (:class:`Grouping`), then one cumulative sum over
the grouped matrix (:class:`Segments`), gives every slot's running value per
key at once. A numpy call costs a small fraction of an Arrow kernel call
(about 2 against 16 us), and one call now covers every slot, where the Arrow
replay made one per slot and quantity: on a step of a thousand changes that
overhead was most of the work.

int64 arithmetic here wraps silently, so exactness rests on two facts. The
caller checks that every partial sum of a column's changes fits int64
(``sum_fits``), so a difference of wrapped cumulative sums, exact modulo
2**64, is exact. And a sum of two exact values is checked by its signs
(:func:`add_checked`), as Arrow's checked kernels did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._fingerprint import PRIME
from ..arrangement import Acc

__all__ = [
    "Bools",
    "Grouping",
    "Ints",
    "Layout",
    "Segments",
    "add_checked",
    "column_matrix",
    "fold",
    "halves",
    "mod_prime",
]

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_M30 = 2**30 - 1
_M31 = 2**31 - 1


def mod_prime(x: Ints) -> Ints:
    """``x mod PRIME`` for int64 values ``0 <= x < 2**63`` (as ``arrangement.mod_prime``)."""
    y = (x >> 61) + (x & PRIME)
    y -= PRIME * (y >= PRIME)
    return y


def fold(high: Ints, low: Ints) -> Ints:
    """``(high * 2**30 + low) mod PRIME`` for int64 values ``0 <= high, low < 2**62`` (as
    ``arrangement.fold_mod_prime``)."""
    a = mod_prime(high)
    # a * 2**30 = a1 * 2**61 + a0 * 2**30 with a = a1 * 2**31 + a0, and 2**61 = 1 (mod PRIME)
    return mod_prime((a >> 31) + ((a & _M31) << 30) + mod_prime(low))


def halves(f: Ints) -> tuple[Ints, Ints]:
    """Fingerprints ``0 <= f < 2**61`` as the two parts :func:`fold` puts together."""
    return f >> 30, f & _M30


def add_checked(a: Ints, b: Ints) -> Ints | None:
    """``a + b`` element-wise, or ``None`` if a sum does not fit int64 (a sum overflowed
    iff its wrapped result's sign differs from both operands')."""
    c = a + b
    if ((a ^ c) & (b ^ c)).min(initial=0) < 0:
        return None
    return c


class Segments:
    """The runs of equal keys in a sequence of groups sorted by key, from ``first``
    (whether each group starts its key's run)."""

    def __init__(self, first: Bools) -> None:
        self.starts = np.flatnonzero(first)
        self.single = len(self.starts) == len(first)  # every key has one group
        self._first = first

    def running(self, x: Ints) -> tuple[Ints, Ints]:
        """Per key, the cumulative sums of every column of ``x`` (a row per group): the
        sums over the key's earlier groups, and with the group's own."""
        excl = np.cumsum(x, axis=0) - x
        earlier = excl - excl[self.starts][np.cumsum(self._first) - 1]
        return earlier, earlier + x

    def totals(self, x: Ints) -> Ints:
        """Per key, the sums of every column of ``x`` (a row per group) over its groups."""
        if self.single or not len(x):
            return x
        return np.add.reduceat(x, self.starts, axis=0)


class Grouping:
    """A change's rows grouped by key and time: sorted by key (``codes``: an integer
    array per key column, equal where the keys are equal) then time, one group per run
    of equal key and time, and the groups' runs of equal keys (:attr:`segments`)."""

    def __init__(self, codes: Sequence[npt.NDArray[Any]], times: Ints) -> None:
        order = np.lexsort((times, *reversed(codes)))
        new_key = np.zeros(len(times), np.bool_)
        new_key[:1] = True
        for c in codes:
            sorted_codes = c[order]
            new_key[1:] |= sorted_codes[1:] != sorted_codes[:-1]
        sorted_times = times[order]
        new_group = new_key.copy()
        new_group[1:] |= sorted_times[1:] != sorted_times[:-1]
        self._order = order
        self._starts = np.flatnonzero(new_group)
        self.rows = order[self._starts]
        """Each group's first row."""
        self.key_rows = order[new_key]
        """Each key's first row, in key order (the order of the segments)."""
        self.times = sorted_times[self._starts]
        """Each group's time."""
        self.segments = Segments(new_key[self._starts])

    def sums(self, x: Ints) -> Ints:
        """Per group, the sums of every column of ``x`` (a row per change)."""
        if not len(x):
            return x
        return np.add.reduceat(x[self._order], self._starts, axis=0)


class Layout:
    """Where each slot of a vector of accumulators of ``kinds`` sits in a change matrix:
    a count or sum in one column, a fingerprint in two (:func:`halves`)."""

    def __init__(self, kinds: Sequence[Acc]) -> None:
        self.kinds = list(kinds)
        self.width = len(self.kinds)
        self.columns: list[int] = []
        """The matrix column of each slot (a fingerprint's first)."""
        m = 0
        for kind in self.kinds:
            self.columns.append(m)
            m += 2 if kind is Acc.FINGERPRINT else 1
        self.matrix_width = m
        self._plain = [j for j, k in enumerate(self.kinds) if k is not Acc.FINGERPRINT]
        self._fps = [j for j, k in enumerate(self.kinds) if k is Acc.FINGERPRINT]
        self._plain_cols = [self.columns[j] for j in self._plain]
        self._high_cols = [self.columns[j] for j in self._fps]
        self._low_cols = [c + 1 for c in self._high_cols]

    def vectors(self, x: Ints) -> Ints:
        """The slot values of change matrix ``x``: a column per slot, fingerprints folded
        into ``[0, PRIME)``."""
        out = np.empty((len(x), self.width), np.int64)
        out[:, self._plain] = x[:, self._plain_cols]
        out[:, self._fps] = fold(x[:, self._high_cols], x[:, self._low_cols])
        return out

    def add(self, old: Ints, x: Ints) -> Ints | None:
        """Vectors ``old`` (a column per slot) plus change matrix ``x``: counts and sums
        exactly (``None`` if one does not fit int64), fingerprints modulo PRIME."""
        plain = add_checked(old[:, self._plain], x[:, self._plain_cols])
        if plain is None:
            return None
        out = np.empty_like(old)
        out[:, self._plain] = plain
        folded = fold(x[:, self._high_cols], x[:, self._low_cols])
        out[:, self._fps] = mod_prime(old[:, self._fps] + folded)
        return out

    def replay(self, old: Ints, x: Ints, segments: Segments) -> tuple[Ints, Ints] | None:
        """Each group's vector before and after its change: its key's ``old`` vector (a
        row per group) plus the key's running sums of change matrix ``x`` (a row per
        group, sorted by key and time); ``None`` if a count or sum does not fit int64."""
        if segments.single:  # a key's running sum is its one group's change
            after = self.add(old, x)
            return None if after is None else (old, after)
        earlier, through = segments.running(x)
        before, after = self.add(old, earlier), self.add(old, through)
        if before is None or after is None:
            return None
        return before, after


def column_matrix(columns: Sequence[Any], n: int) -> Ints:
    """An ``n``-row int64 matrix of Arrow int64 columns without NULLs."""
    out = np.empty((n, len(columns)), np.int64)
    for i, c in enumerate(columns):
        out[:, i] = c.to_numpy()
    return out
