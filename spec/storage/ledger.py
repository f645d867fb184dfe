"""The one place where storage-protocol legality lives.

A :class:`StorageProtocolLedger` records one protocol iteration as seen on a
connection: the commands sent (stage, the ingestions and sinks run, their
compaction frontiers) and the responses received (reported uppers, dropped
ids). ``check_command``/``check_response`` raise a
:class:`~tidegate.spec.errors.StorageProtocolError` naming the broken rule
and never mutate; ``apply_command``/``apply_response`` record an
already-checked message. Both sessions (:mod:`.sessions`) are thin layers over
a ledger.

The ledger is *exact* on the replica side: the replica has seen every command
when it sends a response. On the controller side it is not: a response may
have been produced before the replica saw the latest commands, so the rules
that depend on a command having arrived (after ``AllowCompaction(id, [])``
only ``dropped`` and ``DroppedId``) are only checked in exact mode.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import (
    DuplicateDroppedId,
    DuplicateStorageAllowWrites,
    DuplicateStorageObject,
    ResponseAfterDroppedId,
    StatisticsKindMismatch,
    StorageCommandAfterDrop,
    StorageCompactionRegression,
    StorageFrontierRegression,
    StorageResponseAfterDrop,
    StorageStageViolation,
    UnknownStorageObject,
    UnrequestedDroppedId,
)
from ..frontier import Antichain
from ..ids import GlobalId
from .commands import (
    DroppedId,
    RunIngestion,
    RunSink,
    SinkStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageResponse,
    StorageUpdateConfiguration,
)
from .descriptions import Ingestion, StorageParameters
from .stages import StorageStage, storage_allowed_stages

__all__ = ["StorageObjectRecord", "StorageProtocolLedger"]


@dataclass(frozen=True, slots=True)
class StorageObjectRecord:
    """What one iteration said about an ingestion or sink.

    ``since`` is its last ``AllowCompaction`` frontier (``None`` before one);
    ``dropped`` once compacted to ``[]``; ``dropped_reported`` once the
    replica answered ``DroppedId``.
    """

    id: GlobalId
    kind: Literal["ingestion", "sink"]
    remap_id: GlobalId | None = None
    since: Antichain | None = None
    dropped: bool = False
    dropped_reported: bool = False


def _fmt(f: Antichain) -> str:
    return "[" + ", ".join(map(str, f.elements)) + "]"


class StorageProtocolLedger:
    """The legality rules of one connection's storage protocol iterations (see the module docstring)."""

    def __init__(self, *, exact: bool) -> None:
        self.exact = exact
        self._reset()

    def _reset(self) -> None:
        self.nonce: _uuid.UUID | None = None
        self._phase = StorageStage.AWAITING_HELLO
        self.read_write = False
        self.parameters = StorageParameters()
        self.objects: dict[GlobalId, StorageObjectRecord] = {}
        # Every id a response may name (objects and remap collections) -> its object.
        self.owners: dict[GlobalId, GlobalId] = {}
        self.reported: dict[GlobalId, Antichain] = {}

    # -- queries --------------------------------------------------------------------

    @property
    def stage(self) -> StorageStage:
        if self._phase is StorageStage.READ_ONLY and self.read_write:
            return StorageStage.READ_WRITE
        return self._phase

    def live(self, id: GlobalId) -> bool:
        rec = self.objects.get(id)
        return rec is not None and not rec.dropped

    def owes_dropped_id(self) -> tuple[GlobalId, ...]:
        """Objects compacted to ``[]`` whose ``DroppedId`` has not been sent."""
        return tuple(
            sorted(i for i, r in self.objects.items() if r.dropped and not r.dropped_reported)
        )

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable, comparable image of the whole state (for "unchanged after an error" checks)."""
        return (
            self.nonce,
            self._phase,
            self.read_write,
            self.parameters,
            tuple(sorted(self.objects.items())),
            tuple(sorted(self.owners.items())),
            tuple(sorted(self.reported.items())),
        )

    # -- commands -------------------------------------------------------------------

    def check_command(self, cmd: StorageCommand) -> None:
        """Raise the :class:`StorageProtocolError` that sending ``cmd`` now would break; never mutates."""
        stage = self.stage
        if stage not in storage_allowed_stages(cmd):
            raise StorageStageViolation(self._stage_message(cmd, stage))
        if isinstance(cmd, StorageAllowWrites):
            if self.read_write:
                raise DuplicateStorageAllowWrites("AllowWrites was already sent in this iteration")
        elif isinstance(cmd, RunIngestion | RunSink):
            name = type(cmd).__name__
            if self._alters(cmd):
                return
            for gid in (cmd.id, *self._remap_of(cmd)):
                if gid in self.owners:
                    raise DuplicateStorageObject(
                        f"{name}({cmd.id}) uses {gid}, which is already used in this iteration"
                    )
            remap = self._remap_of(cmd)
            if remap and remap[0] == cmd.id:
                raise DuplicateStorageObject(f"{name}({cmd.id}) is its own remap collection")
        elif isinstance(cmd, StorageAllowCompaction):
            rec = self.objects.get(cmd.id)
            if rec is None:
                raise UnknownStorageObject(
                    f"AllowCompaction({cmd.id}) names no ingestion or sink run in this iteration"
                )
            if rec.dropped:
                raise StorageCommandAfterDrop(
                    f"AllowCompaction({cmd.id}) after it was compacted to []"
                )
            if rec.since is not None and not rec.since <= cmd.frontier:
                raise StorageCompactionRegression(
                    f"AllowCompaction({cmd.id}, {_fmt(cmd.frontier)}) is behind its previous "
                    f"frontier {_fmt(rec.since)}"
                )

    def _alters(self, cmd: RunIngestion | RunSink) -> bool:
        """Whether ``cmd`` is a ``RunSink`` for a live sink of this iteration: an alter (the
        controller's ``alter_export``), which replaces the running sink."""
        if not isinstance(cmd, RunSink):
            return False
        rec = self.objects.get(cmd.id)
        return rec is not None and rec.kind == "sink" and not rec.dropped

    @staticmethod
    def _remap_of(cmd: RunIngestion | RunSink) -> tuple[GlobalId, ...]:
        if isinstance(cmd, RunIngestion):
            src = cmd.description.data_source
            if isinstance(src, Ingestion) and src.remap_collection is not None:
                return (src.remap_collection,)
        return ()

    def apply_command(self, cmd: StorageCommand) -> None:
        """Record an already-checked ``cmd``."""
        if isinstance(cmd, StorageHello):
            self._reset()
            self.nonce = cmd.nonce
            self._phase = StorageStage.INITIALIZATION
        elif isinstance(cmd, StorageInitializationComplete):
            self._phase = StorageStage.READ_ONLY
        elif isinstance(cmd, StorageAllowWrites):
            self.read_write = True
        elif isinstance(cmd, StorageUpdateConfiguration):
            self.parameters = self.parameters.update(cmd.params)
        elif isinstance(cmd, RunIngestion):
            remap = self._remap_of(cmd)
            self.objects[cmd.id] = StorageObjectRecord(
                cmd.id, "ingestion", remap[0] if remap else None
            )
            for gid in (cmd.id, *remap):
                self.owners[gid] = cmd.id
        elif isinstance(cmd, RunSink):
            # A new record also for an alter: the new run's compaction starts afresh; what was
            # reported stays (its uppers never go back: the replica reports only advances).
            self.objects[cmd.id] = StorageObjectRecord(cmd.id, "sink")
            self.owners[cmd.id] = cmd.id
        elif isinstance(cmd, StorageAllowCompaction):
            rec = self.objects[cmd.id]
            self.objects[cmd.id] = replace(rec, since=cmd.frontier, dropped=cmd.frontier.is_empty())

    def _stage_message(self, cmd: StorageCommand, stage: StorageStage) -> str:
        name = type(cmd).__name__
        if stage is StorageStage.AWAITING_HELLO:
            return f"{name} before Hello: every iteration starts with Hello"
        if isinstance(cmd, StorageInitializationComplete):
            return f"InitializationComplete in stage {stage.value}: it is sent once per iteration"
        return f"{name} in stage {stage.value}"

    # -- responses ------------------------------------------------------------------

    def check_response(self, resp: StorageResponse) -> None:
        """Raise the :class:`StorageProtocolError` that ``resp`` breaks; never mutates."""
        if not self.stage.is_running:
            raise StorageStageViolation(
                f"{type(resp).__name__} in stage {self.stage.value}: "
                "replicas answer only after InitializationComplete"
            )
        name = type(resp).__name__
        if isinstance(resp, StorageFrontierUpper):
            owner = self.owners.get(resp.id)
            if owner is None:
                raise UnknownStorageObject(
                    f"FrontierUpper for {resp.id}, which no ingestion or sink of this iteration writes"
                )
            rec = self._alive_for_response(owner, f"FrontierUpper for {resp.id}")
            if self.exact and rec.dropped:
                raise StorageResponseAfterDrop(
                    f"FrontierUpper for {resp.id} after {owner} was compacted to []"
                )
            last = self.reported.get(resp.id)
            if last is not None and not last < resp.upper:
                raise StorageFrontierRegression(
                    f"FrontierUpper({resp.id}, {_fmt(resp.upper)}) is not strictly beyond the "
                    f"last report {_fmt(last)}"
                )
        elif isinstance(resp, DroppedId):
            rec = self._known_object(resp.id, name)
            if rec.dropped_reported:
                raise DuplicateDroppedId(f"second DroppedId({resp.id})")
            if not rec.dropped:
                raise UnrequestedDroppedId(f"DroppedId({resp.id}), which was not compacted to []")
        elif isinstance(resp, StatusUpdate):
            rec = self._known_object(resp.id, name)
            self._alive_for_response(resp.id, name)
            dropped_status = resp.status is SourceStatus.DROPPED
            if dropped_status and not rec.dropped:
                raise StorageResponseAfterDrop(
                    f"status dropped for {resp.id}, which was not compacted to []"
                )
            if self.exact and rec.dropped and not dropped_status:
                raise StorageResponseAfterDrop(
                    f"status {resp.status.value} for {resp.id} after it was compacted to []"
                )
        elif isinstance(resp, StatisticsUpdate):
            rec = self._known_object(resp.id, name)
            self._alive_for_response(resp.id, name)
            if self.exact and rec.dropped:
                raise StorageResponseAfterDrop(
                    f"statistics for {resp.id} after it was compacted to []"
                )
            is_sink = isinstance(resp.statistics, SinkStatistics)
            if is_sink != (rec.kind == "sink"):
                raise StatisticsKindMismatch(
                    f"{type(resp.statistics).__name__} for {rec.kind} {resp.id}"
                )

    def _known_object(self, id: GlobalId, what: str) -> StorageObjectRecord:
        rec = self.objects.get(id)
        if rec is None:
            raise UnknownStorageObject(
                f"{what} for {id}, which is no ingestion or sink of this iteration"
            )
        return rec

    def _alive_for_response(self, owner: GlobalId, what: str) -> StorageObjectRecord:
        rec = self.objects[owner]
        if rec.dropped_reported:
            raise ResponseAfterDroppedId(f"{what} after DroppedId({owner})")
        return rec

    def apply_response(self, resp: StorageResponse) -> None:
        """Record an already-checked ``resp``."""
        if isinstance(resp, StorageFrontierUpper):
            self.reported[resp.id] = resp.upper
        elif isinstance(resp, DroppedId):
            self.objects[resp.id] = replace(self.objects[resp.id], dropped_reported=True)
