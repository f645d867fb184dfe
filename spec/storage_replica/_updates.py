"""Per-update work of the storage replica core, done in bulk (internal).

An ingestion writes tens of thousands of updates a second through the core;
these helpers keep the per-update cost to C-level passes (``map``, ``zip``,
``set``) over a batch, with a Python loop only where a batch needs it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from ..frontier import Update

__all__ = ["consolidated", "offset_bounds", "updates_size", "well_formed"]

_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)


def consolidated(updates: Sequence[Update]) -> tuple[Update, ...]:
    """``updates`` summed per ``(row, time)``, zeros dropped, in the order each first occurs.

    The order is that of the input (upstream's, for an ingestion), so the same
    input gives the same tuple; unlike :func:`~tidegate.spec.frontier.consolidate`
    it is not sorted (a batch of a collection has no order, and sorting mixed
    values costs more than all the rest of an ingestion's step). Updates that
    are already consolidated -- every ``(row, time)`` once, no zero diff, the
    common case -- come back as they are.
    """
    if not updates:
        return ()
    keys = list(zip(map(_first, updates), map(_second, updates), strict=True))
    if len(set(keys)) == len(keys) and 0 not in map(_third, updates):
        return tuple(updates)
    sums: dict[tuple[Any, Any], int] = {}
    get = sums.get
    for key, (_, _, d) in zip(keys, updates, strict=True):
        sums[key] = get(key, 0) + d
    return tuple((row, t, d) for (row, t), d in sums.items() if d)


def well_formed(updates: Sequence[Any]) -> bool:
    """Whether every update is a 3-tuple ``(tuple, int, int)`` (checked in bulk; no detail)."""
    if not isinstance(updates, tuple | list):
        return False
    if not updates:
        return True
    if set(map(type, updates)) != {tuple} or set(map(len, updates)) != {3}:
        return False
    return (
        set(map(type, map(_first, updates))) == {tuple}
        and set(map(type, map(_second, updates))) == {int}
        and set(map(type, map(_third, updates))) == {int}
    )


def offset_bounds(updates: Sequence[Update]) -> tuple[int, int] | None:
    """The least and greatest offset (or time) of well-formed ``updates``; ``None`` if empty."""
    if not updates:
        return None
    return min(map(_second, updates)), max(map(_second, updates))


def updates_size(updates: Sequence[Update]) -> int:
    """The bytes of ``updates`` as a sink hands them to its target, uncompressed, as Arrow holds
    them: 8 per integer, float, timestamp, time and diff, 4 per date, 1 per boolean, a string's
    UTF-8 length, nothing for a NULL (a sink's ``bytes_staged`` and ``bytes_committed``)."""
    total = 0
    for row, _time, _diff in updates:
        total += 16
        for v in row:
            if v is None:
                continue
            if isinstance(v, str):
                total += len(v.encode("utf-8", "surrogatepass"))
            elif isinstance(v, bool):
                total += 1
            elif type(v) is _dt.date:
                total += 4
            else:
                total += 8
    return total
