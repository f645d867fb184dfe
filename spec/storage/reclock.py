"""Reclocking: tidegate timestamps for upstream offsets, through the remap collection.

An ingestion's **remap collection** (Materialize's progress/remap shard) has
one ``int64`` column. At every time ``t`` it holds exactly one row
``(offset_upper,)``: the **binding** ``binding(t)``, the source frontier as of
``t`` -- every upstream update at an offset below it is reflected at times
``<= t`` (before the first row, the binding is 0). Bindings never go back.
Minting a binding at ``t`` is the update pair ``((new,), t, +1), ((old,), t, -1)``
(just the first for the first binding).

An upstream update at offset ``o`` is **reclocked** to the least ``t`` with
``binding(t) > o``; so the data of time ``t`` are the upstream updates with
offsets in ``[binding(t - 1), binding(t))``. Because the bindings are durable
and the upstream's update at an offset never changes, any incarnation of the
ingestion that reads the same bindings derives the same ``(data, time)``
updates: this is what makes restarts exactly once (see
:mod:`tidegate.spec.storage_replica`).

A restarted ingestion whose data shard has upper ``D`` reads the remap
collection as of ``D - 1`` (:func:`remap_as_of`; the controller holds the
remap since there, see :class:`~.StorageController`) and resumes upstream at
``binding(D - 1)`` (:func:`resume_offset`, 0 for a fresh ingestion).

>>> b = decode_bindings([((3,), 2, 1), ((7,), 5, 1), ((3,), 5, -1)], as_of=0, upper=Antichain([6]))
>>> b.at(1), b.at(2), b.at(4), b.at(5)
(0, 3, 3, 7)
>>> [b.time_of(o) for o in (0, 2, 3, 6, 7)]
[2, 2, 5, 5, None]
>>> b.minted(8, 9).updates()
[((3,), 2, 1), ((7,), 5, 1), ((3,), 5, -1), ((9,), 8, 1), ((7,), 8, -1)]
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidBindings
from ..frontier import Antichain, Update
from ..plan.schema import Schema
from .connections import SourceUpdate

__all__ = [
    "REMAP_SCHEMA",
    "Bindings",
    "decode_bindings",
    "mint_binding",
    "reclock",
    "remap_as_of",
    "resume_offset",
]

REMAP_SCHEMA = Schema.of(("offset_upper", "int64", False))
"""The remap collection's schema: one non-NULL ``int64`` column, the offset upper."""


def _int_upper(upper: Antichain, what: str) -> int | None:
    if upper.is_empty():
        return None
    els = upper.elements
    if len(els) != 1 or type(els[0]) is not int or els[0] < 0:
        raise InvalidBindings(f"{what} {upper!r} is not a frontier of one non-negative int")
    return els[0]


@dataclass(frozen=True, slots=True)
class Bindings:
    """The bindings of a remap collection, exact at times ``>= as_of`` and known below ``upper``.

    ``changes`` lists ``(time, offset_upper)`` where the binding changed, times
    and offsets strictly increasing, all times in ``[as_of, upper)`` (a change
    at ``as_of`` may stand for earlier, compacted ones). ``upper`` is ``None``
    for a closed remap collection (upper ``[]``).
    """

    as_of: int = 0
    changes: tuple[tuple[int, int], ...] = ()
    upper: int | None = 0

    def _check_known(self, t: int) -> None:
        if t < self.as_of:
            raise InvalidBindings(f"the binding at {t} is before the read's as_of {self.as_of}")
        if self.upper is not None and t >= self.upper:
            raise InvalidBindings(
                f"the binding at {t} is not known: the remap upper is {self.upper}"
            )

    def at(self, t: int) -> int:
        """``binding(t)``: the offset upper at time ``t`` (``as_of <= t < upper``)."""
        self._check_known(t)
        i = bisect.bisect_right(self.changes, (t, float("inf"))) - 1
        return self.changes[i][1] if i >= 0 else 0

    @property
    def latest(self) -> int:
        """The binding at ``upper - 1`` (the last one minted; 0 if none)."""
        return self.changes[-1][1] if self.changes else 0

    def time_of(self, offset: int) -> int | None:
        """The time of an update at ``offset``: the least ``t >= as_of`` with ``binding(t) > offset``.

        ``None`` if no known binding covers ``offset`` yet. Offsets below
        ``binding(as_of)`` come out at ``as_of`` (their true time may be earlier:
        advanced, as a compacted read would).
        """
        i = bisect.bisect_right([o for _, o in self.changes], offset)
        if i == len(self.changes):
            return None
        return max(self.changes[i][0], self.as_of)

    def minted(self, time: int, offset_upper: int) -> Bindings:
        """These bindings after minting ``offset_upper`` at ``time`` (the upper becomes ``time + 1``).

        ``time`` must be at or beyond the upper and ``offset_upper`` at least the latest binding.
        """
        if self.upper is None or time < self.upper:
            raise InvalidBindings(f"cannot mint at {time}: the remap upper is {self.upper}")
        if offset_upper < self.latest:
            raise InvalidBindings(
                f"cannot mint {offset_upper} at {time}: the latest binding is {self.latest}"
            )
        changes = self.changes
        if offset_upper != self.latest:
            changes = (*changes, (time, offset_upper))
        return Bindings(self.as_of, changes, time + 1)

    def advanced(self, as_of: int) -> Bindings:
        """The same bindings read as of a later ``as_of`` (what a compacted read returns)."""
        kept = tuple((t, o) for t, o in self.changes if t > as_of)
        base = self.at(as_of)
        head = ((as_of, base),) if base else ()
        return Bindings(as_of, head + kept, self.upper)

    def updates(self) -> list[Update]:
        """The remap updates encoding these bindings (times at or beyond ``as_of``)."""
        out: list[Update] = []
        old = 0
        for t, o in self.changes:
            out.extend(mint_binding(old, o, t))
            old = o
        return out


def mint_binding(old: int, new: int, time: int) -> tuple[Update, ...]:
    """The remap updates that move the binding from ``old`` to ``new`` at ``time`` (none if equal)."""
    if new < old:
        raise InvalidBindings(f"a binding cannot go back from {old} to {new}")
    if new == old:
        return ()
    if old == 0:
        return (((new,), time, 1),)
    return (((new,), time, 1), ((old,), time, -1))


def decode_bindings(updates: Iterable[Update], as_of: int, upper: Antichain) -> Bindings:
    """The bindings held by remap ``updates`` read as of ``as_of`` (times advanced to it) up to ``upper``.

    [InvalidBindings] unless every time is in ``[as_of, upper)``, every row is
    ``(offset,)`` with a non-negative int, and at every time the collection is
    empty (before its first row) or exactly one row with count 1 whose offset
    never goes back.
    """
    up = _int_upper(upper, "remap upper")
    by_time: dict[int, dict[int, int]] = {}
    for row, t, d in updates:
        if type(t) is not int or t < as_of or (up is not None and t >= up):
            raise InvalidBindings(f"remap update at {t!r} is outside [{as_of}, {upper!r})")
        if type(row) is not tuple or len(row) != 1 or type(row[0]) is not int or row[0] < 0:
            raise InvalidBindings(f"remap row {row!r} is not (offset,) with an int offset >= 0")
        if type(d) is not int:
            raise InvalidBindings(f"remap update {row!r} at {t} has diff {d!r}")
        slot = by_time.setdefault(t, {})
        slot[row[0]] = slot.get(row[0], 0) + d
    contents: dict[int, int] = {}
    changes: list[tuple[int, int]] = []
    current = 0
    for t in sorted(by_time):
        moved = False
        for offset, d in by_time[t].items():
            if d:
                moved = True
                n = contents.get(offset, 0) + d
                if n:
                    contents[offset] = n
                else:
                    contents.pop(offset, None)
        if not moved:
            continue
        if not contents:
            raise InvalidBindings(f"the remap collection is empty at {t} after holding a binding")
        if len(contents) != 1 or next(iter(contents.values())) != 1:
            raise InvalidBindings(
                f"the remap collection holds {sorted(contents.items())} at {t}, not one binding"
            )
        (offset,) = contents
        if offset < current:
            raise InvalidBindings(f"the binding goes back from {current} to {offset} at {t}")
        if offset != current:
            changes.append((t, offset))
            current = offset
    return Bindings(as_of, tuple(changes), up)


def reclock(
    updates: Iterable[SourceUpdate], bindings: Bindings
) -> tuple[list[Update], list[SourceUpdate]]:
    """Reclock upstream ``(row, offset, diff)`` updates: ``(reclocked, not yet bound)``.

    Each update goes to the least time whose binding is beyond its offset
    (:meth:`Bindings.time_of`); updates at offsets no binding covers yet are
    returned as they are, in order.
    """
    out: list[Update] = []
    rest: list[SourceUpdate] = []
    offsets = [o for _, o in bindings.changes]
    times = [max(t, bindings.as_of) for t, _ in bindings.changes]
    n = len(offsets)
    ups = updates if isinstance(updates, list | tuple) else list(updates)
    if not ups:
        return out, rest
    # The common case: every update falls between the same two bindings (one time, or none).
    first = bisect.bisect_right(offsets, min(u[1] for u in ups))
    if first == bisect.bisect_right(offsets, max(u[1] for u in ups)):
        if first == n:
            return out, [(row, offset, diff) for row, offset, diff in ups]
        t = times[first]
        return [(row, t, diff) for row, _, diff in ups], rest
    for row, offset, diff in ups:
        i = bisect.bisect_right(offsets, offset)
        if i == n:
            rest.append((row, offset, diff))
        else:
            out.append((row, times[i], diff))
    return out, rest


def remap_as_of(data_upper: int) -> int:
    """The time a restarted ingestion reads its remap collection at: ``data_upper - 1`` (0 when fresh)."""
    return max(data_upper - 1, 0)


def resume_offset(bindings: Bindings, data_upper: int) -> int:
    """Where upstream resumes: ``binding(data_upper - 1)``, or 0 for a fresh ingestion (``data_upper == 0``)."""
    return 0 if data_upper == 0 else bindings.at(data_upper - 1)
