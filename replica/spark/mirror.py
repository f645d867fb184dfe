"""``IndexMirror``: the in-driver copy of an index's contents, for peeks from memory.

It holds the index's *output* (not operator state) since its compaction
frontier, arranged by key, then row, then time, so a peek with a key lookup
touches only those keys and a peek at any time in ``[since, upper)`` sums the
row's times up to it. A peek is never a Spark job.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidegate.spec.executor import ErrorUpdate
from tidegate.spec.executor.operators import key_function
from tidegate.spec.frontier import Row, Update

__all__ = ["IndexMirror"]


def _add(times: dict[int, int], t: int, d: int) -> None:
    n = times.get(t, 0) + d
    if n:
        times[t] = n
    else:
        times.pop(t, None)


def _compact_times(times: dict[int, int], since: int) -> dict[int, int]:
    merged = sum(d for t, d in times.items() if t <= since)
    rest = {t: d for t, d in times.items() if t > since}
    if merged:
        rest[since] = merged
    return rest


class IndexMirror:
    """An index's updates and errors since its compaction frontier, arranged by ``key``."""

    def __init__(self, key: tuple[int, ...]) -> None:
        self.key = key
        self._keyfn = key_function(key)
        self.by_key: dict[Row, dict[Row, dict[int, int]]] = {}
        self.errs: dict[str, dict[int, int]] = {}
        self._multi: set[tuple[Row, Row]] = set()  # rows holding more than one time
        self.rows = 0
        """The distinct rows held (kept current: a free size for deciding where an index lives)."""

    def apply(self, updates: Iterable[Update], errors: Iterable[ErrorUpdate]) -> None:
        """Add consolidated updates and errors."""
        keyfn = self._keyfn
        by_key = self.by_key
        multi = self._multi
        for row, t, d in updates:
            k = keyfn(row)
            rows = by_key.get(k)
            if rows is None:
                by_key[k] = {row: {t: d}}
                self.rows += 1
                continue
            times = rows.get(row)
            if times is None:
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
        for msg, t, d in errors:
            etimes = self.errs.setdefault(msg, {})
            _add(etimes, t, d)
            if not etimes:
                del self.errs[msg]

    def compact(self, since: int) -> None:
        """Merge each row's times at or before ``since`` into ``since``; later accumulations unchanged."""
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
        """Every held update (the index's history since its since)."""
        return [
            (r, t, d)
            for rows in self.by_key.values()
            for r, ts in rows.items()
            for t, d in ts.items()
        ]

    def error_updates(self) -> list[ErrorUpdate]:
        return [(m, t, d) for m, ts in self.errs.items() for t, d in ts.items()]

    def read(self, time: int, keys: Iterable[Row] | None) -> tuple[dict[Row, int], dict[str, int]]:
        """Rows and errors accumulated at ``time``, restricted to ``keys`` if given."""
        groups = (
            self.by_key.values()
            if keys is None
            else [
                self.by_key.get(k, {}) for k in dict.fromkeys(keys)
            ]  # a key asked twice counts once
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
