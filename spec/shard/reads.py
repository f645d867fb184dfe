"""Which batches a read needs, and the read semantics on plain updates.

``snapshot(as_of)`` is valid for ``since <= as_of < upper`` and yields the
consolidated contents as of ``as_of`` (every time advanced to ``as_of``).
``listen(as_of)`` yields, batch by batch, the updates with times beyond
``as_of`` that are at or past the listener's progress frontier, each followed by
the new upper. The functions here choose batches from a state and define the
result on Python updates; the store applies the same rules to Arrow tables.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ListenCompactedPast, ShardFinalized, SnapshotBeforeSince, SnapshotNotReady
from ..frontier import Antichain, Update, consolidate
from .state import BatchMeta, ShardState

__all__ = [
    "check_snapshot",
    "listen_batches",
    "listen_updates",
    "snapshot_batches",
    "snapshot_updates",
]


def check_snapshot(state: ShardState, as_of: int) -> None:
    """Raise unless a snapshot at ``as_of`` is valid: live shard, ``since <= as_of < upper``."""
    if state.finalized:
        raise ShardFinalized(state.shard, "the shard is finalized")
    if not state.since.less_equal(as_of):
        raise SnapshotBeforeSince(state.shard, as_of, state.since)
    if state.upper.less_equal(as_of):
        raise SnapshotNotReady(state.shard, as_of, state.upper)


def snapshot_batches(state: ShardState, as_of: int) -> tuple[BatchMeta, ...]:
    """The batches a snapshot at ``as_of`` reads (those starting at or before ``as_of``)."""
    check_snapshot(state, as_of)
    return tuple(b for b in state.batches if b.lower.less_equal(as_of))


def snapshot_updates(updates: Iterable[Update], as_of: int) -> list[Update]:
    """The contents as of ``as_of``: updates at times ``<= as_of``, moved to ``as_of``, consolidated."""
    return consolidate((row, as_of, d) for row, t, d in updates if t <= as_of)


def listen_batches(state: ShardState, frontier: Antichain) -> tuple[BatchMeta, ...]:
    """The batches holding updates at or beyond ``frontier`` (a listener's progress so far).

    A batch compacted to a since not strictly before ``frontier`` could have moved
    an already-emitted update into the future; that means the listener's hold
    was not kept, and raises :class:`ListenCompactedPast`.
    """
    if state.finalized:
        raise ShardFinalized(state.shard, "the shard is finalized")
    if frontier.is_empty():
        return ()
    (f,) = frontier.elements
    chosen = []
    for b in state.batches:
        if not b.upper.less_equal(f):
            if not b.since.less_equal(b.lower.elements[0]) and not b.since.less_than(f):
                raise ListenCompactedPast(
                    state.shard,
                    f"batch {b.key!r} is compacted to {b.since!r}, not before frontier {frontier!r}",
                )
            chosen.append(b)
    return tuple(chosen)


def listen_updates(updates: Iterable[Update], as_of: int, frontier: Antichain) -> list[Update]:
    """The updates a listener at progress ``frontier`` emits: times beyond ``as_of`` and at/after ``frontier``."""
    return [(row, t, d) for row, t, d in updates if t > as_of and frontier.less_equal(t)]
