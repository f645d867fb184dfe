"""What really reached the disk: every append batch of every table, read back from the simulated disk.

The checkers judge answers against what *landed*, not against what the
clients believe they wrote. :class:`TruthLog` follows the consensus history
of each table shard (every version ever committed, truncated ones included,
see :class:`~tidegate.sim.storage.SimDisk`): a version that moves the upper
appended the batch that is new in it, whose blob (kept even after
compaction deleted it) holds the updates at their original times. Along the
way it checks that no shard's since or upper ever moved back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tidegate.runtime.storage.arrow_batches import (
    decode_batch,
    schema_from_text,
    table_to_updates,
)
from tidegate.runtime.storage.store import decoded_state
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.shard import ShardState

from .storage import SimDisk

__all__ = ["LandedBatch", "TruthLog"]


@dataclass(frozen=True, slots=True)
class LandedBatch:
    """An append that landed in a table shard: ``[lower, upper)`` and its updates."""

    lower: Antichain
    upper: Antichain
    updates: tuple[Update, ...]
    seq: int = 0
    """Its place in the order of every commit to the disk (:attr:`~.storage.SimDisk.commit_seq`)."""


@dataclass
class _Shard:
    table: GlobalId
    seen: int = 0
    last: ShardState | None = None
    updates: list[Update] = field(default_factory=list)
    batches: list[LandedBatch] = field(default_factory=list)
    times: list[int] = field(default_factory=list)


class TruthLog:
    """The landed appends of the tables it tracks (see the module docstring).

    ``violate(property, message)`` is called when a shard's frontier regresses
    or a referenced batch is unreadable.
    """

    def __init__(self, disk: SimDisk, violate: Callable[[str, str], None]) -> None:
        self._disk = disk
        self._violate = violate
        self._shards: dict[str, _Shard] = {}
        self._tables: set[GlobalId] = set()
        self.frontiers: dict[str, tuple[Antichain, Antichain]] = {}
        """Every watched shard's latest ``(since, upper)``."""

    def track(self, table: GlobalId) -> None:
        """Follow table ``table`` (its shard is named by its id)."""
        self._shards.setdefault(str(table), _Shard(table))
        self._tables.add(table)

    def watch(self, shard: str) -> None:
        """Check the frontiers of shard ``shard`` too (a materialized view's output)."""
        self._shards.setdefault(shard, _Shard(GlobalId.parse(shard)))

    def tables(self) -> list[GlobalId]:
        """The tables tracked (not the shards only watched)."""
        return sorted(self._tables)

    def refresh(self, only: Iterable[str] | None = None) -> None:
        """Read every version committed since the last refresh (of the shards ``only``, if given)."""
        keys = self._shards if only is None else [k for k in only if k in self._shards]
        for key in keys:
            shard = self._shards[key]
            versions = self._disk.versions.get(key, ())
            seqs = self._disk.commit_seq.get(key, ())
            while shard.seen < len(versions):
                v = versions[shard.seen]
                seq = seqs[shard.seen] if shard.seen < len(seqs) else 0
                shard.seen += 1
                state = decoded_state(key, v.seqno, v.data)
                self._step(key, shard, state, seq)

    def _step(self, key: str, shard: _Shard, state: ShardState, seq: int = 0) -> None:
        prev = shard.last
        shard.last = state
        if state.finalized:
            self.frontiers[key] = (Antichain.empty(), Antichain.empty())
            return
        self.frontiers[key] = (state.since, state.upper)
        if prev is None or prev.finalized:
            return
        if not prev.upper <= state.upper:
            self._violate(
                "shard_frontiers_monotone",
                f"shard {key} upper went back {prev.upper} -> {state.upper}",
            )
        if not prev.since <= state.since:
            self._violate(
                "shard_frontiers_monotone",
                f"shard {key} since went back {prev.since} -> {state.since}",
            )
        if state.upper == prev.upper:
            return  # readers, writers or compaction: no new data
        known = set(prev.batch_keys)
        fresh = [b for b in state.batches if b.key not in known and b.lower == prev.upper]
        updates: tuple[Update, ...] = ()
        for b in fresh:
            data = b.inline if b.inline is not None else self._disk.blob(b.key)
            if data is None or state.schema is None:
                self._violate("batches_readable", f"shard {key}: batch {b.key} has no blob")
                continue
            try:
                table = decode_batch(key, b.key, data, schema_from_text(state.schema))
            except Exception as e:
                self._violate("batches_readable", f"shard {key}: batch {b.key}: {e}")
                continue
            updates += tuple(table_to_updates(table))
        shard.batches.append(LandedBatch(prev.upper, state.upper, updates, seq))
        if updates:
            shard.updates.extend(updates)
            shard.times.extend(sorted({t for _, t, _ in updates}))

    def updates(self, table: GlobalId) -> list[Update]:
        """Every landed update of ``table`` at its original time (a live list)."""
        return self._shards[str(table)].updates

    def batches(self, table: GlobalId) -> list[LandedBatch]:
        return self._shards[str(table)].batches

    def watching(self, shard: str) -> bool:
        """Whether shard ``shard`` is tracked or watched."""
        return shard in self._shards

    def change_times(self, table: GlobalId) -> list[int]:
        """The times at which ``table`` has landed updates, ascending."""
        shard = self._shards.get(str(table))
        return [] if shard is None else shard.times
