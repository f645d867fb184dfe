"""A replica under test, driven with legal commands and checked by a replica session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hypothesis.stateful import rule

from ...ids import GlobalId
from ...protocol import (
    AllowCompaction,
    CancelPeek,
    CollectionKind,
    ComputeCommand,
    ComputeResponse,
    CreateInstance,
    FrontierKind,
    Frontiers,
    InitializationComplete,
    InitializeInstance,
    InstanceConfig,
    PeekCanceled,
    PeekError,
    PeekResponse,
    PeekRows,
    ReplicaSession,
    RunDataflow,
    Stage,
    StartIteration,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from ._model import _EMPTY, ProtocolCommandModel, _at, _frontiers, _succ

# -- replica conformance ------------------------------------------------------------


class ReplicaUnderTest(Protocol):
    """What :class:`ReplicaConformanceMachine` needs from a replica implementation."""

    def handle(self, command: ComputeCommand) -> Sequence[ComputeResponse]:
        """Take one command; return the responses it sends right away (often none)."""
        ...

    def step(self) -> Sequence[ComputeResponse]:
        """Do some work (time passes, data arrives); return the responses it sends."""
        ...


class ReplicaConformanceFailure(AssertionError):
    """A replica did not pay what it owed once everything was cancelled and dropped."""


class ProtocolModelReplica:
    """A minimal correct replica, built on :class:`ReplicaSession` effects.

    Its collections hold no data; each :meth:`step` moves every running
    collection's frontiers one time forward, emits an (empty) subscribe batch,
    answers peeks once the index's upper passes the peek time (``Error`` below
    the compaction frontier), answers cancelled peeks with ``PeekCanceled``,
    and pays drop obligations (``[]`` reports, ``DroppedAt``). It defers every
    answer until ``InitializationComplete``.
    """

    def __init__(self) -> None:
        self.session = ReplicaSession()
        self.running: set[GlobalId] = set()

    def handle(self, command: ComputeCommand) -> Sequence[ComputeResponse]:
        for effect in self.session.on_command(command):
            if isinstance(effect, StartIteration):
                self.running = set()
            elif isinstance(effect, InitializeInstance):
                self.running.update(effect.log_indexes)
            elif isinstance(effect, RunDataflow):
                self.running.update(effect.export_ids)
            # Everything else (drops, peeks, cancels) is read back from the session in step().
        return []

    def _send(self, out: list[ComputeResponse], resp: ComputeResponse) -> None:
        self.session.on_response(resp)
        out.append(resp)

    def step(self) -> Sequence[ComputeResponse]:
        s = self.session
        out: list[ComputeResponse] = []
        if not s.stage.is_computation:
            return out
        for gid, rec in s.collections.items():
            if rec.dropped:
                owed = s.owed_frontier_reports().get(gid, ())
                if owed:
                    self._send(out, _frontiers(gid, dict.fromkeys(owed, _EMPTY)))
                if gid in s.owed_dropped_at():
                    self._send(
                        out, SubscribeResponse(gid, SubscribeDroppedAt(s.subscribe_next_lower(gid)))
                    )
                continue
            if gid not in self.running:
                continue
            if rec.kind is CollectionKind.SUBSCRIBE:
                if s.subscribe_ended(gid):
                    continue
                lower = s.subscribe_next_lower(gid)
                if rec.as_of.is_empty():
                    upper = _EMPTY
                else:
                    upper = _at(max(lower.elements[0] + 1, rec.as_of.elements[0]))
                self._send(out, SubscribeResponse(gid, SubscribeBatch(lower, upper)))
                continue
            last = s.last_reported(gid, FrontierKind.WRITE)
            nxt = rec.as_of if last is None else _succ(last)
            if s.frontier_report_allowed(gid, FrontierKind.WRITE, nxt):
                self._send(out, Frontiers(gid, write=nxt, input=nxt, output=nxt))
        for u, peek in s.pending_peeks.items():
            if s.cancel_requested(u):
                self._send(out, PeekResponse(u, PeekCanceled()))
                continue
            if peek.target == "persist":
                self._send(out, PeekResponse(u, PeekRows(())))
                continue
            rec = s.collections[peek.id]
            index_upper = s.last_reported(peek.id, FrontierKind.WRITE)
            if index_upper is None or index_upper.less_equal(peek.timestamp):
                continue  # not ready: the index is not complete at the peek time yet
            if rec.since.less_equal(peek.timestamp):
                self._send(out, PeekResponse(u, PeekRows(())))
            else:
                self._send(out, PeekResponse(u, PeekError(f"compacted beyond {peek.timestamp}")))
        return out


class ReplicaConformanceMachine(ProtocolCommandModel):
    """Legal commands to a replica; each of its responses checked by a :class:`ReplicaSession`.

    Override :meth:`make_replica` to return your replica (a :class:`ReplicaUnderTest`).
    At teardown, every peek is cancelled, every collection dropped, and the
    replica is stepped up to :attr:`quiesce_steps` times: it must then owe nothing.
    """

    quiesce_steps = 20

    def __init__(self) -> None:
        super().__init__()
        self.replica = self.make_replica()
        self.checker = ReplicaSession()
        self._busy = False

    def make_replica(self) -> ReplicaUnderTest:
        """The replica under test (override this)."""
        return ProtocolModelReplica()

    def _absorb(self, responses: Sequence[ComputeResponse]) -> None:
        for resp in responses:
            self.checker.on_response(resp)

    def deliver(self, cmd: ComputeCommand) -> None:
        self._busy = True
        self.checker.on_command(cmd)
        self._absorb(self.replica.handle(cmd))
        self._busy = False

    @rule()
    def step(self) -> None:
        self._busy = True
        self._absorb(self.replica.step())
        self._busy = False

    def teardown(self) -> None:
        if self._busy or self.model.stage is Stage.AWAITING_HELLO:
            return  # a rule failed mid-way (or nothing happened): do not mask it
        self._busy = True
        m = self.model
        if m.stage is Stage.CREATION:
            self.send(CreateInstance(InstanceConfig()))
        if m.stage is Stage.INITIALIZATION:
            self.send(InitializationComplete())
        for u in self.model.pending():
            if not self.model.peeks[u].cancelled:
                self.send(CancelPeek(u))
        for gid in self.model.live():
            self.send(AllowCompaction(gid, _EMPTY))
        for _ in range(self.quiesce_steps):
            if self.checker.owes_nothing():
                break
            self._absorb(self.replica.step())
        if not self.checker.owes_nothing():
            raise ReplicaConformanceFailure(
                f"after {self.quiesce_steps} steps the replica still owes: peeks "
                f"{list(self.checker.pending_peeks)}, [] reports {self.checker.owed_frontier_reports()}, "
                f"DroppedAt {self.checker.owed_dropped_at()}"
            )
        self._busy = False
