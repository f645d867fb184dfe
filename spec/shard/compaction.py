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
]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When to merge: once a shard has more than ``max_batches`` batches, merge the
    earliest run of consecutive batches each shorter than ``small_len``, of at most
    ``max_inputs`` batches and ``max_len`` updates in total.
    """

    max_batches: int = 8
    small_len: int = 100_000
    max_inputs: int = 1_024
    max_len: int = 2_000_000


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Merge the batches ``inputs`` (consecutive) into one batch ``[lower, upper)`` at ``since``."""

    shard: str
    inputs: tuple[BatchMeta, ...]
    since: Antichain

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
    ) -> BatchMeta | None:
        """The merged batch's description (``None`` if everything cancelled out); ``digest``
        is its blob's (see :func:`~.codec.blob_digest`)."""
        if length == 0:
            return None
        return BatchMeta(
            key, self.lower, self.upper, self.since, length, min_time, max_time, digest
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
