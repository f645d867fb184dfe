"""``IndexHistory``: an index export's output since its compaction frontier, for peeks.

Executors keep each index's output (not operator state) arranged by key, then
row, then time, so a peek with a key lookup touches only those keys and a peek
at any time in ``[since, upper)`` sums each row's times up to it. Compaction
only has to visit rows holding more than one time, which are tracked apart.
"""

from __future__ import annotations

from collections.abc import Iterable

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


class IndexHistory:
    """An index's consolidated updates and errors since its compaction frontier, arranged by ``key``.

    ``rows`` is the number of distinct rows held, kept current (a free size for
    deciding where an index should live).
    """

    def __init__(self, key: tuple[int, ...]) -> None:
        self.key = key
        self._keyfn = key_function(key)
        self.by_key: dict[Row, dict[Row, dict[int, int]]] = {}
        self.errs: dict[str, dict[int, int]] = {}
        # (key, row) of every row holding more than one time: all that compaction visits
        self._multi: set[tuple[Row, Row]] = set()
        self.rows = 0

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add updates and errors (diffs of equal ``(row, time)`` sum; zeros vanish)."""
        keyfn = self._keyfn
        by_key = self.by_key
        multi = self._multi
        for row, t, d in updates:
            k = keyfn(row)
            rows = by_key.get(k)
            if rows is None:
                if d:
                    by_key[k] = {row: {t: d}}
                    self.rows += 1
                continue
            times = rows.get(row)
            if times is None:
                if d:
                    rows[row] = {t: d}
                    self.rows += 1
                continue
            n = times.get(t, 0) + d
            if n:
                times[t] = n
            else:
                times.pop(t, None)
            if len(times) > 1:
                multi.add((k, row))
            elif not times:
                del rows[row]
                self.rows -= 1
                multi.discard((k, row))
                if not rows:
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
        by_key = self.by_key
        keep: set[tuple[Row, Row]] = set()
        for k, row in self._multi:
            rows = by_key[k]
            times = rows[row]
            if max(times) <= since:  # the usual case: every time merges into one
                total = sum(times.values())
                if total:
                    rows[row] = {since: total}
                else:
                    del rows[row]
                    self.rows -= 1
                    if not rows:
                        del by_key[k]
                continue
            rest = _compact_times(times, since)
            rows[row] = rest
            if len(rest) > 1:
                keep.add((k, row))
        self._multi = keep
        for msg in list(self.errs):
            rest = _compact_times(self.errs[msg], since)
            if rest:
                self.errs[msg] = rest
            else:
                del self.errs[msg]

    def updates(self) -> list[Update]:
        """Every held update: what a dataflow importing the index starts from."""
        return [
            (r, t, d)
            for rows in self.by_key.values()
            for r, ts in rows.items()
            for t, d in ts.items()
        ]

    def error_updates(self) -> list[ErrorUpdate]:
        """Every held error update."""
        return [(m, t, d) for m, ts in self.errs.items() for t, d in ts.items()]

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, restricted to the rows whose key is in ``keys``.

        ``keys`` is a set: a key given twice counts once.
        """
        by_key = self.by_key
        groups = (
            by_key.values() if keys is None else [by_key.get(k, {}) for k in dict.fromkeys(keys)]
        )
        rows: dict[Row, int] = {}
        for group in groups:
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
