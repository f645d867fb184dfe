"""Simulated sink targets: what ``SimulatedSink(name)`` sinks commit to in scenarios whose
``sink_writer`` is ``"simulated"``, durable on the simulated disk.

By default the storage replica's sinks run the production
:class:`~tidegate.runtime.sinks.IcebergSinkWriter` over a pyiceberg catalog on the
simulated disk (:mod:`.iceberg`); this module's writer is the cheaper stand-in of the same
contract (no pyiceberg: one consensus key per target, one compare-and-set per commit), for
scenarios and tests that judge the storage replica rather than the writer. No built-in
scenario uses it.

A target stands for an Iceberg table. It lives on the simulated disk as the
consensus key ``sinks/<name>``: each committed version is one commit (the
sink's id, the range ``[lower, upper)`` it covers, its updates) and carries
every sink's **covered upper** forward, so a commit is a compare-and-set of
the key, as an Iceberg commit is a compare-and-swap of the catalog's metadata
pointer. The disk keeps every version, so the checkers read each target's
whole history (:func:`read_target`).

:class:`SimSinkWriter` has the contract of
:class:`~tidegate.runtime.sinks.IcebergSinkWriter` (the storage service's
:class:`~tidegate.replica.storage.sinks.SinkWriter`): ``open`` and
``covered_upper`` answer the upper the target covers for this sink (``None``:
nothing yet); ``commit(updates, lower, upper)`` lands only if the target
covers ``lower`` (or nothing), else raises
:class:`~tidegate.spec.errors.SinkConflict`; a commit that lost a race to
another writer decides again on the new state. It reaches the disk through
the storage replica's own consensus client, so the process's death, storage
outages and crash points (``sink_commit``: before or after the
compare-and-set applies) strike it; an outage of the compare-and-set leaves
its outcome unknown (:class:`~tidegate.spec.errors.SinkOutcomeUnknown`). The
target's own fault (:class:`SinkFaults`) fails commits for a while: before
anything is written (``SinkUnreachable``: nothing committed), or after the
commit landed with the answer lost (``SinkOutcomeUnknown``); and other writers may
commit to it meanwhile (an Iceberg catalog's concurrent commits: :attr:`SinkFaults.foreign`),
right between a writer's read of the head and its compare-and-set, so that the writer loses
the race and must decide again on the new state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.errors import SinkConflict, SinkOutcomeUnknown, SinkUnreachable
from tidegate.spec.frontier import Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.shard import VersionedData
from tidegate.spec.storage.connections import SimulatedSink, StorageSinkConnection

from .choices import ChoiceSource
from .storage import ConsensusClient, SimDisk

__all__ = [
    "SINK_KEY_PREFIX",
    "SimSinkWriter",
    "SinkCommit",
    "SinkFaults",
    "read_target",
    "sink_factory",
    "target_key",
]

SINK_KEY_PREFIX = "sinks/"
FOREIGN_WRITER = "foreign-writer"
"""The sink name another writer's commits carry (no sink of the run's)."""
_RACES = 5


def target_key(name: str) -> str:
    """The consensus key of target ``name``."""
    return SINK_KEY_PREFIX + name


@dataclass(frozen=True)
class SinkCommit:
    """One commit that landed in a target: sink ``sink`` covers ``[lower, upper)`` with ``updates``."""

    sink: str
    lower: int
    upper: int
    updates: tuple[Update, ...]


def _encode(commit: SinkCommit, covered: dict[str, int]) -> bytes:
    body = {
        "sink": commit.sink,
        "lower": commit.lower,
        "upper": commit.upper,
        "updates": [[list(r), t, d] for r, t, d in commit.updates],
        "covered": covered,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes) -> tuple[SinkCommit, dict[str, int]]:
    body = json.loads(data)
    updates = tuple((tuple(r), int(t), int(d)) for r, t, d in body["updates"])
    covered = {str(k): int(v) for k, v in body["covered"].items()}
    return SinkCommit(str(body["sink"]), int(body["lower"]), int(body["upper"]), updates), covered


def read_target(disk: SimDisk, name: str) -> list[SinkCommit]:
    """Every commit that ever landed in target ``name``, in order (the checkers' view)."""
    return [_decode(v.data)[0] for v in disk.versions.get(target_key(name), ())]


@dataclass
class SinkFaults:
    """Commit failures of the targets, in force now (the world opens and closes them)."""

    choices: ChoiceSource
    failing: dict[str, int] = field(default_factory=dict)
    """Open failure windows per target name (``""``: every target)."""
    foreign: int = 0
    """Open windows of another writer's commits (to every target)."""
    foreign_commits: int = 0

    def foreign_commit(self, disk: SimDisk, key: str) -> None:
        """Maybe another writer commits to ``key`` now (with nothing of any sink's)."""
        if not self.foreign or self.choices.integer(0, 1):
            return
        head = disk.consensus.head(key)
        covered = {} if head is None else _decode(head.data)[1]
        self.foreign_commits += 1
        commit = SinkCommit(FOREIGN_WRITER, self.foreign_commits, self.foreign_commits + 1, ())
        new = VersionedData(0 if head is None else head.seqno + 1, _encode(commit, covered))
        disk.compare_and_set(key, None if head is None else head.seqno, new)

    def strikes(self, name: str) -> str | None:
        """``"before"``, ``"after"`` or ``None``: whether (and when) this commit fails."""
        if not (self.failing.get(name) or self.failing.get("")):
            return None
        if self.choices.integer(0, 1):
            return None
        return "after" if self.choices.integer(0, 1) else "before"


class SimSinkWriter:
    """The writer of sink ``sink_id`` into target ``name`` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        sink_id: GlobalId,
        consensus: ConsensusClient,
        faults: SinkFaults,
        count: Callable[[str], None],
    ) -> None:
        self.name = name
        self.sink_id = str(sink_id)
        self.key = target_key(name)
        self.consensus = consensus
        self.faults = faults
        self.count = count

    def _head(self, what: str) -> tuple[VersionedData | None, dict[str, int]]:
        try:
            head = self.consensus.head(self.key)
        except OSError as e:
            raise SinkUnreachable(f"target {self.name!r}: {what}: {e}") from e
        self.faults.foreign_commit(self.consensus.disk, self.key)  # it may race this writer
        return head, ({} if head is None else _decode(head.data)[1])

    def open(self) -> int | None:
        return self.covered_upper()

    def covered_upper(self) -> int | None:
        return self._head("read the covered upper")[1].get(self.sink_id)

    def commit(self, updates: Sequence[Update], lower: int, upper: int) -> None:
        fault = self.faults.strikes(self.name)
        if fault == "before":
            self.count("sink_commit_failed_before")
            raise SinkUnreachable(f"target {self.name!r}: simulated failure; nothing committed")
        for _ in range(_RACES):
            head, covered = self._head("read before a commit")
            have = covered.get(self.sink_id)
            if have is not None and have != lower:
                raise SinkConflict(self.name, lower, have)
            commit = SinkCommit(self.sink_id, lower, upper, tuple(updates))
            after = {**covered, self.sink_id: upper}
            seqno = 0 if head is None else head.seqno + 1
            try:
                ok = self.consensus.compare_and_set(
                    self.key,
                    None if head is None else head.seqno,
                    VersionedData(seqno, _encode(commit, after)),
                )
            except OSError as e:
                raise SinkOutcomeUnknown(
                    f"target {self.name!r}: the commit of [{lower}, {upper}) may or may not have "
                    f"landed ({e})"
                ) from e
            if not ok:
                self.count("sink_commit_lost_race")
                continue  # another writer committed first: decide on the new state
            if fault == "after":
                self.count("sink_commit_failed_after")
                raise SinkOutcomeUnknown(
                    f"target {self.name!r}: simulated failure after the commit of "
                    f"[{lower}, {upper}) landed"
                )
            return
        raise SinkUnreachable(f"target {self.name!r}: lost {_RACES} commit races in a row")

    def close(self) -> None:
        pass


def sink_factory(
    consensus: ConsensusClient, faults: SinkFaults, count: Callable[[str], None]
) -> Callable[[GlobalId, StorageSinkConnection, Schema], SimSinkWriter | None]:
    """The storage service's ``sink_factory``: writers of :class:`SimulatedSink` targets over
    ``consensus`` (one process's client)."""

    def make(id: GlobalId, connection: StorageSinkConnection, schema: Schema) -> Any:
        if not isinstance(connection, SimulatedSink):
            return None
        return SimSinkWriter(connection.name, id, consensus, faults, count)

    return make
