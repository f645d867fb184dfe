"""``IndexHistory``: an index export's output since its compaction frontier, for peeks.

Executors keep each index's output (not operator state) arranged by key, then
row, then time, so a peek with a key lookup touches only those keys and a peek
at any time in ``[since, upper)`` sums each row's times up to it. Compaction
only has to visit rows holding more than one time, which are tracked apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

from ..frontier import Row, Update
from .contract import ErrorUpdate
from .operators import key_function

__all__ = ["IndexHistory"]


def _compact_times(times: dict[int, int], since: int) -> dict[int, int]:
    """``times`` with every time at or before ``since`` merged into ``since`` (zeros dropped)."""
    merged = sum(d for t, d in times.items() if t <= since)
    rest = {t: d for t, d in times.items() if t > since}
    if merged:
        rest[since] = merged
    return rest


_One: TypeAlias = tuple[Row, int, int]
"""A key's only row, at its only time, with its diff."""
_Rows: TypeAlias = dict[Row, dict[int, int]]
"""A key's rows, each with its diffs by time."""


class IndexHistory:
    """An index's consolidated updates and errors since its compaction frontier, arranged by ``key``.

    ``rows`` is the number of distinct rows held, kept current (a free size for
    deciding where an index should live).

    A key holding one row at one time (each key of a unique index, once compacted)
    is held as a ``(row, time, diff)`` tuple, which the garbage collector stops
    tracking; a dict per key would be walked by every full collection of the
    process, a pause that grows with the index (about 0.5 ms per thousand keys).
    """

    def __init__(self, key: tuple[int, ...]) -> None:
        self.key = key
        self._keyfn = key_function(key)
        self._by_key: dict[Row, _One | _Rows] = {}
        self.errs: dict[str, dict[int, int]] = {}
        # (key, row) of every row holding more than one time: all that compaction visits
        self._multi: set[tuple[Row, Row]] = set()
        self.rows = 0

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add updates and errors (diffs of equal ``(row, time)`` sum; zeros vanish)."""
        keyfn = self._keyfn
        by_key = self._by_key
        multi = self._multi
        for row, t, d in updates:
            if not d:
                continue
            k = keyfn(row)
            held = by_key.get(k)
            if held is None:
                by_key[k] = (row, t, d)
                self.rows += 1
            elif isinstance(held, tuple):
                r0, t0, d0 = held
                if r0 != row:
                    by_key[k] = {r0: {t0: d0}, row: {t: d}}
                    self.rows += 1
                elif t0 != t:
                    by_key[k] = {row: {t0: d0, t: d}}
                    multi.add((k, row))
                elif n := d0 + d:
                    by_key[k] = (row, t, n)
                else:
                    del by_key[k]
                    self.rows -= 1
            else:
                times = held.get(row)
                if times is None:
                    held[row] = {t: d}
                    self.rows += 1
                    continue
                n = times.get(t, 0) + d
                if n:
                    times[t] = n
                else:
                    del times[t]
                if len(times) > 1:
                    multi.add((k, row))
                elif not times:
                    del held[row]
                    self.rows -= 1
                    multi.discard((k, row))
                    if not held:
                        del by_key[k]
        errs = self.errs
        for msg, t, d in errors:
            etimes = errs.setdefault(msg, {})
            n = etimes.get(t, 0) + d
            if n:
                etimes[t] = n
            else:
                etimes.pop(t, None)
                if not etimes:
                    del errs[msg]

    def compact(self, since: int) -> None:
        """Merge each row's times at or before ``since`` into ``since``; accumulations at ``>= since`` are unchanged."""
        by_key = self._by_key
        multi = self._multi
        keep: set[tuple[Row, Row]] = set()
        for k, row in multi:
            rows = by_key[k]
            assert isinstance(rows, dict)  # a row at several times is in a key's dict
            times = rows[row]
            if max(times) > since:
                rest = _compact_times(times, since)
                rows[row] = rest
                if len(rest) > 1:
                    keep.add((k, row))
                continue
            # The usual case: every time merges into one.
            total = sum(times.values())
            if total and len(rows) == 1:
                by_key[k] = (row, since, total)  # the key's only row, now at one time
            elif total:
                rows[row] = {since: total}
            else:
                del rows[row]
                self.rows -= 1
                if not rows:
                    del by_key[k]
                elif len(rows) == 1:  # the row that replaced it, alone at one time: a tuple
                    ((other, ts),) = rows.items()
                    if len(ts) == 1 and (k, other) not in multi:
                        ((t, d),) = ts.items()
                        by_key[k] = (other, t, d)
        self._multi = keep
        for msg in list(self.errs):
            rest = _compact_times(self.errs[msg], since)
            if rest:
                self.errs[msg] = rest
            else:
                del self.errs[msg]

    def updates(self) -> list[Update]:
        """Every held update: what a dataflow importing the index starts from."""
        out: list[Update] = []
        for held in self._by_key.values():
            if isinstance(held, tuple):
                out.append(held)
            else:
                out.extend((r, t, d) for r, ts in held.items() for t, d in ts.items())
        return out

    def error_updates(self) -> list[ErrorUpdate]:
        """Every held error update."""
        return [(m, t, d) for m, ts in self.errs.items() for t, d in ts.items()]

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, restricted to the rows whose key is in ``keys``.

        ``keys`` is a set: a key given twice counts once.
        """
        by_key = self._by_key
        groups = (
            by_key.values()
            if keys is None
            else [g for k in dict.fromkeys(keys) if (g := by_key.get(k)) is not None]
        )
        rows: dict[Row, int] = {}
        for group in groups:
            if isinstance(group, tuple):
                r, t, d = group
                if t <= time:
                    rows[r] = rows.get(r, 0) + d
                continue
            for r, ts in group.items():
                c = sum(d for t, d in ts.items() if t <= time)
                if c:
                    rows[r] = rows.get(r, 0) + c
        errors = {
            m: c for m, ts in self.errs.items() if (c := sum(d for t, d in ts.items() if t <= time))
        }
        return rows, errors

    def __len__(self) -> int:
        return self.rows
