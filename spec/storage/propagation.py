"""Read-capability propagation along storage dependencies (reference section 2.4).

Hold changes on a collection change its since (the frontier of its read
capabilities); every change of that frontier is in turn a change of the hold
the collection has on each of its dependencies, and so on. An export forwards
changes of its capability to its input. The worklist visits ids largest first
(dependents usually have larger ids, so each is usually visited once); the
fixed point does not depend on that order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from ..errors import (
    IdentifierMissing,
    NegativeReadCapability,
    ReadCapabilityBeforeSince,
    StorageError,
)
from ..frontier import MutableAntichain, Time
from ..ids import GlobalId
from .state import CollectionState, ExportState

__all__ = ["propagate_read_capabilities"]

_RANK = {"s": 0, "u": 1, "t": 2}


def _heap_key(id: GlobalId, sign: int) -> tuple[int, int, GlobalId]:
    # heapq pops the smallest item; sign -1 makes the largest GlobalId come first.
    return (sign * _RANK[id.namespace], sign * id.value, id)


def _single_without_dependencies(
    changes: Mapping[GlobalId, Iterable[tuple[Time, int]]],
    collections: Mapping[GlobalId, CollectionState],
) -> set[GlobalId] | None:
    """The common case of one collection with no dependencies (nothing to propagate), or ``None``.

    Same checks in the same order as the general loop; nothing is applied
    before they pass, so there is nothing to undo.
    """
    ((id, batch),) = changes.items()
    c = collections.get(id)
    if c is None or c.dependencies:
        return None
    counts: dict[Time, int] = {}
    for t, d in batch:
        counts[t] = counts.get(t, 0) + d
    items = [(t, d) for t, d in counts.items() if d]
    if not items:
        return set()
    caps = c.read_capabilities
    since = caps.frontier
    for t, d in items:
        count = caps.count_for(t) + d
        if count < 0:
            raise NegativeReadCapability(id, t, count)
        if d > 0 and not since.less_equal(t):
            raise ReadCapabilityBeforeSince(id, t, since)
    return set() if caps.update_iter(items).is_empty() else {id}


def propagate_read_capabilities(
    changes: Mapping[GlobalId, Iterable[tuple[Time, int]]],
    collections: Mapping[GlobalId, CollectionState],
    exports: Mapping[GlobalId, ExportState],
    largest_first: bool = True,
) -> set[GlobalId]:
    """Apply ``(time, delta)`` hold changes and propagate them; all or nothing.

    Returns the collections whose since moved and the exports whose
    capability change was forwarded. A count driven below zero
    [NegativeReadCapability], a hold added behind a since
    [ReadCapabilityBeforeSince] or an unknown id [IdentifierMissing] undoes
    every change already applied and raises. The cost is proportional to the
    ids the changes reach, not to the number of collections.
    """
    if len(changes) == 1:
        fast = _single_without_dependencies(changes, collections)
        if fast is not None:
            return fast
    sign = -1 if largest_first else 1
    work: dict[GlobalId, dict[Time, int]] = {}
    heap: list[tuple[int, int, GlobalId]] = []
    for id, batch in changes.items():
        counts: dict[Time, int] = {}
        for t, d in batch:
            counts[t] = counts.get(t, 0) + d
        if any(counts.values()):
            work[id] = counts
            heapq.heappush(heap, _heap_key(id, sign))
    moved_ids: set[GlobalId] = set()
    applied: list[tuple[MutableAntichain, list[tuple[Time, int]]]] = []
    try:
        while heap:
            id = heapq.heappop(heap)[2]
            pending = work.pop(id, None)
            if pending is None:
                continue
            items = [(t, d) for t, d in pending.items() if d]
            if not items:
                continue
            c = collections.get(id)
            targets: Iterable[GlobalId]
            if c is not None:
                caps = c.read_capabilities
                since = caps.frontier
                for t, d in items:
                    count = caps.count_for(t) + d
                    if count < 0:
                        raise NegativeReadCapability(id, t, count)
                    if d > 0 and not since.less_equal(t):
                        raise ReadCapabilityBeforeSince(id, t, since)
                moved = caps.update_iter(items)
                applied.append((caps, items))
                if moved.is_empty():
                    continue
                forward = list(moved)
                targets = c.dependencies
            else:
                e = exports.get(id)
                if e is None:
                    raise IdentifierMissing(id)
                forward = items
                targets = (e.description.from_id,)
            moved_ids.add(id)
            for dep in targets:
                queued = work.get(dep)
                if queued is None:
                    work[dep] = dict(forward)
                    heapq.heappush(heap, _heap_key(dep, sign))
                else:
                    for t, d in forward:
                        queued[t] = queued.get(t, 0) + d
    except StorageError:
        for caps, items in reversed(applied):
            caps.update_iter([(t, -d) for t, d in items])
        raise
    return moved_ids
