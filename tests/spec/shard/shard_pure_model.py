"""A pure in-memory shard for tests: spec transitions plus a dict of batch contents."""

from __future__ import annotations

import dataclasses
import itertools

from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.shard import (
    AppendOutcome,
    BatchMeta,
    ShardState,
    append,
    append_lower,
    apply_compaction,
    check_append_times,
    compact_updates,
    compare_and_append,
    plan_compaction,
    snapshot_batches,
    snapshot_updates,
)
from tidegate.spec.shard.compaction import CompactionPolicy


@dataclasses.dataclass
class PureShard:
    state: ShardState
    data: dict[str, list[Update]] = dataclasses.field(default_factory=dict)
    counter: itertools.count = dataclasses.field(default_factory=itertools.count)

    def append(
        self, updates: list[Update], lower: int, upper: int, token: str | None = None
    ) -> None:
        meta = None
        if updates:
            times = [t for _, t, _ in updates]
            key = f"{self.state.shard}/{next(self.counter)}"
            meta = BatchMeta(
                key,
                Antichain([lower]),
                Antichain([upper]),
                Antichain([lower]),
                len(updates),
                min(times),
                max(times),
            )
        out = compare_and_append(
            self.state,
            meta,
            Antichain([lower]),
            Antichain([upper]),
            writer_id="w",
            token=token,
            now_ms=0,
        )
        if meta is not None and not out.already_committed:
            self.data[meta.key] = list(updates)
        self.state = out.state

    def batch(self, updates: list[Update], lower: int, upper: int) -> BatchMeta | None:
        """A fresh batch ``[lower, upper)`` of ``updates`` (``None`` if there are none), stored."""
        if not updates:
            return None
        times = [t for _, t, _ in updates]
        key = f"{self.state.shard}/{next(self.counter)}"
        self.data[key] = list(updates)
        return BatchMeta(
            key,
            Antichain([lower]),
            Antichain([upper]),
            Antichain([lower]),
            len(updates),
            min(times),
            max(times),
        )

    def commit_append(self, batch: BatchMeta | None, lower: int, upper: int) -> AppendOutcome:
        """Commit a truncating append of ``batch`` (made by :meth:`batch`); an unused batch is dropped."""
        try:
            out = append(
                self.state, batch, Antichain([lower]), Antichain([upper]), writer_id="w", now_ms=0
            )
        except BaseException:
            if batch is not None:
                del self.data[batch.key]
            raise
        if batch is not None and batch.key not in out.state.batch_keys:
            del self.data[batch.key]  # a no-op: the shard had these updates already
        self.state = out.state
        return out

    def truncating_append(self, updates: list[Update], lower: int, upper: int) -> AppendOutcome:
        """Persist's ``append`` the way the shard store runs it: truncate at the upper, then commit."""
        lo, up = Antichain([lower]), Antichain([upper])
        times = [t for _, t, _ in updates]
        check_append_times(
            self.state.shard, min(times, default=None), max(times, default=None), lo, up
        )
        start = append_lower(self.state, lo, up)
        if start is None:
            return self.commit_append(None, lower, upper)
        (c,) = start.elements
        kept = [u for u in updates if u[1] >= c]
        return self.commit_append(self.batch(kept, c, upper), lower, upper)

    def compact(self, policy: CompactionPolicy) -> bool:
        plan = plan_compaction(self.state, policy)
        if plan is None:
            return False
        merged = compact_updates([u for b in plan.inputs for u in self.data[b.key]], plan.since)
        key = f"{self.state.shard}/{next(self.counter)}"
        times = [t for _, t, _ in merged]
        out = plan.output(key, len(merged), min(times, default=None), max(times, default=None))
        self.state = apply_compaction(self.state, plan, out)
        for k in plan.input_keys:
            del self.data[k]
        if out is not None:
            self.data[key] = merged
        return True

    def snapshot(self, as_of: int) -> list[Update]:
        bs = snapshot_batches(self.state, as_of)
        return snapshot_updates([u for b in bs for u in self.data[b.key]], as_of)
