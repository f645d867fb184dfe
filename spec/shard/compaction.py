"""Compaction: choosing runs of batches to merge, and committing a merge.

Merging is physical (fewer, larger batches) and logical (times advanced to the
shard's since, then consolidated), so every snapshot valid after the merge
(``as_of`` beyond the since) reads the same contents as before it. A merge is
planned against one state and applied to a later one only if its inputs are
still there; otherwise :class:`CompactionConflict` and the result is discarded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import CompactionConflict, ShardFinalized
from ..frontier import Antichain, Update, advance_updates
from .state import BatchMeta, ShardState

__all__ = [
    "CompactionPlan",
    "CompactionPolicy",
    "apply_compaction",
    "compact_updates",
    "plan_compaction",
    "plan_maintenance",
]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When to merge: once a shard has more than ``max_batches`` batches, merge a run of
    consecutive batches each shorter than ``small_len``, of at most ``max_inputs``
    batches and ``max_len`` updates in total: the earliest (:func:`plan_compaction`), or
    the cheapest (:func:`plan_maintenance`, which also heeds the inline limits below).
    Raises ``ValueError`` for a bound that admits no merge or a negative one.
    """

    max_batches: int = 16
    small_len: int = 100_000
    max_inputs: int = 1_024
    max_len: int = 2_000_000
    inline_merge_max_bytes: int = 4 * 1024
    """A merge of inline batches only, of at most this many inline bytes, keeps its output
    inline: no blob, and no consensus write of its own (see :func:`plan_maintenance`);
    ``0``: never."""
    inline_held_max_bytes: int = 8 * 1024
    """Once a shard's inline batches hold more than this, maintenance merges them into a
    blob: every commit rewrites the state that carries them (``0``: no such limit)."""

    def __post_init__(self) -> None:
        for name, least in (
            ("max_batches", 0),
            ("small_len", 1),
            ("max_inputs", 2),
            ("max_len", 1),
            ("inline_merge_max_bytes", 0),
            ("inline_held_max_bytes", 0),
        ):
            value = getattr(self, name)
            if type(value) is not int or value < least:
                raise ValueError(
                    f"CompactionPolicy.{name} must be an int >= {least}, got {value!r}"
                )


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Merge the batches ``inputs`` (consecutive) into one batch ``[lower, upper)`` at ``since``.

    ``inline``: all inputs are inline, few enough bytes for the merged batch to stay
    inline too (see :func:`plan_maintenance`).
    """

    shard: str
    inputs: tuple[BatchMeta, ...]
    since: Antichain
    inline: bool = False

    @property
    def lower(self) -> Antichain:
        return self.inputs[0].lower

    @property
    def upper(self) -> Antichain:
        return self.inputs[-1].upper

    @property
    def input_keys(self) -> tuple[str, ...]:
        return tuple(b.key for b in self.inputs)

    def output(
        self,
        key: str,
        length: int,
        min_time: int | None,
        max_time: int | None,
        digest: str | None = None,
        inline: bytes | None = None,
    ) -> BatchMeta | None:
        """The merged batch's description (``None`` if everything cancelled out); ``digest``
        is its bytes' (see :func:`~.codec.blob_digest`), ``inline`` those bytes when the
        batch is stored inline."""
        if length == 0:
            return None
        return BatchMeta(
            key, self.lower, self.upper, self.since, length, min_time, max_time, digest, inline
        )


def plan_compaction(
    state: ShardState, policy: CompactionPolicy | None = None
) -> CompactionPlan | None:
    """The next merge the policy asks for, or ``None`` when the shard is compact enough."""
    policy = policy or CompactionPolicy()
    if state.finalized or len(state.batches) <= policy.max_batches:
        return None
    run: list[BatchMeta] = []
    total = 0
    for b in state.batches:
        fits = (
            b.length < policy.small_len
            and len(run) < policy.max_inputs
            and total + b.length <= policy.max_len
        )
        if fits:
            run.append(b)
            total += b.length
            continue
        if len(run) >= 2:
            break
        run, total = ([b], b.length) if b.length < policy.small_len else ([], 0)
    if len(run) < 2:
        return None
    return CompactionPlan(state.shard, tuple(run), state.since)


MERGE_FIXED_ROWS = 10_000
"""What a merge into a blob costs besides rewriting its rows (a blob write and a consensus
write, each fsync'd), in rows: :func:`plan_maintenance` picks the merge that costs least per
batch removed."""
INLINE_MERGE_FIXED_ROWS = 100
"""Likewise for a merge whose output stays inline: no blob, and the consensus write is one
the shard makes anyway (the store folds such a merge into the append that calls for it)."""
_PLAN_SCAN_MAX = 64
"""Past this many batches, maintenance takes :func:`plan_compaction` (a linear scan) instead."""


def plan_maintenance(
    state: ShardState, policy: CompactionPolicy, *, fresh: int = 0
) -> CompactionPlan | None:
    """The merge automatic maintenance does next, or ``None`` when none is due.

    One is due once the shard has more than ``policy.max_batches`` batches, or its
    inline batches hold more than ``policy.inline_held_max_bytes``. The plan is the
    run of consecutive small batches (within the policy's bounds) that removes
    batches most cheaply: ``MERGE_FIXED_ROWS`` plus the run's rows, over its length
    minus one. So recent small batches merge among themselves and a large batch is
    rewritten only once enough has gathered beside it (size tiers), where merging the
    earliest run (:func:`plan_compaction`) rewrote the whole shard under a stream of
    small appends. A run of inline batches only, within ``policy.inline_merge_max_bytes``,
    costs ``INLINE_MERGE_FIXED_ROWS`` and stays inline, unless the inline bytes are
    what is due: then only runs holding an inline batch qualify, merged into a blob.

    The last ``fresh`` batches are left out of every run: an append that commits the
    merge with its own batch keeps that batch whole, so followers read just what it
    added (and see it land as a batch starting at the previous upper).
    """
    batches = state.batches
    n = len(batches)
    if state.finalized:
        return None
    bytes_due = state.inline_bytes > policy.inline_held_max_bytes > 0
    if n <= policy.max_batches and not bytes_due:
        return None
    if n > _PLAN_SCAN_MAX:
        return None if fresh else plan_compaction(state, policy)
    best: tuple[int, int, bool] | None = None
    best_cost = 0.0
    settled = n - fresh
    for i in range(settled):
        total = inline_total = 0
        all_inline, any_inline = True, False
        for j in range(i, min(settled, i + policy.max_inputs)):
            b = batches[j]
            if b.length >= policy.small_len or total + b.length > policy.max_len:
                break
            total += b.length
            if b.inline is None:
                all_inline = False
            else:
                any_inline = True
                inline_total += len(b.inline)
            if j == i or (bytes_due and not any_inline):
                continue
            inline = all_inline and not bytes_due and inline_total <= policy.inline_merge_max_bytes
            fixed = INLINE_MERGE_FIXED_ROWS if inline else MERGE_FIXED_ROWS
            cost = (fixed + total) / (j - i)
            if best is None or cost < best_cost:
                best, best_cost = (i, j, inline), cost
    if best is None:
        return None
    i, j, inline = best
    return CompactionPlan(state.shard, batches[i : j + 1], state.since, inline)


def compact_updates(updates: Iterable[Update], since: Antichain) -> list[Update]:
    """What a merge stores: times advanced to ``since``, consolidated."""
    return advance_updates(updates, since)


def apply_compaction(
    state: ShardState, plan: CompactionPlan, output: BatchMeta | None
) -> ShardState:
    """Replace the plan's inputs by ``output`` (``None``: by nothing) if they are still in ``state``."""
    if state.finalized:
        raise ShardFinalized(state.shard, "the shard is finalized")
    keys = state.batch_keys
    inputs = plan.input_keys
    n = len(inputs)
    starts = [i for i, k in enumerate(keys) if k == inputs[0]]
    if not starts or keys[starts[0] : starts[0] + n] != inputs:
        raise CompactionConflict(state.shard, "the batches to merge are no longer in the shard")
    if output is not None and (output.lower != plan.lower or output.upper != plan.upper):
        raise CompactionConflict(state.shard, "the merged batch's bounds differ from its inputs'")
    i = starts[0]
    replacement = () if output is None else (dataclasses.replace(output, since=plan.since),)
    batches = (*state.batches[:i], *replacement, *state.batches[i + n :])
    return dataclasses.replace(state, seqno=state.seqno + 1, batches=batches)
