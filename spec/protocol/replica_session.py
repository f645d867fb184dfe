"""The replica's side of a connection: what each command asks of it, and what it owes back.

A replica feeds every command it receives to :meth:`ReplicaSession.on_command`
and performs the returned :mod:`effects <tidegate.spec.protocol.replica_effects>`;
it passes every response it is about to send through
:meth:`ReplicaSession.on_response`, which rejects a response the protocol
forbids. The queries say what is still owed.

>>> import uuid
>>> from tidegate.spec.frontier import Antichain
>>> from tidegate.spec.ids import GlobalId
>>> from tidegate.spec.protocol import *
>>> s = ReplicaSession()
>>> u1 = GlobalId.user(1)
>>> config = InstanceConfig(LoggingConfig(index_logs=(("arrangements", u1),)))
>>> for cmd in (Hello(uuid.UUID(int=1)), CreateInstance(config), InitializationComplete()):
...     _ = s.on_command(cmd)
>>> [drop] = s.on_command(AllowCompaction(u1, Antichain()))
>>> type(drop).__name__, [kind.value for kind in drop.owed_empty_frontiers]
('DropCollection', ['write', 'input', 'output'])
>>> s.on_response(Frontiers(u1, write=Antichain(), input=Antichain(), output=Antichain()))
>>> s.owes_nothing()
True
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Mapping
from typing import Any

from ..errors.protocol import LocalProtocolError, ProtocolError, RemoteProtocolError, blamed
from ..frontier import Antichain
from ..ids import GlobalId
from .commands import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from .ledger import CollectionRecord, ProtocolLedger
from .replica_effects import (
    BeginComputation,
    BuildDataflow,
    CancelPendingPeek,
    CompactCollection,
    DropCollection,
    EnableWrites,
    InitializeInstance,
    ReleaseDataflow,
    ReplicaEffect,
    RunDataflow,
    ScheduleExport,
    ServePeek,
    SetConfiguration,
    StartIteration,
)
from .responses import ComputeResponse
from .stages import CollectionKind, FrontierKind, Stage
from .types import PeekDescription

__all__ = ["ReplicaSession"]


class ReplicaSession:
    """What a replica owes on one connection (docs/reference/compute.md §4, §6).

    Rules checked on responses: nothing before ``InitializationComplete``;
    exactly one ``PeekResponse`` per ``Peek``, ``PeekCanceled`` only after a
    ``CancelPeek``; frontier reports strictly increasing per kind, the first at
    least the as_of, none for subscribes, only ``[]`` after a drop and nothing
    after ``[]``; subscribe batches contiguous from the minimum time, the first
    upper at least the as_of, updates consolidated and inside their batch;
    ``DroppedAt`` only after a drop, at the last upper, and nothing after it or
    after upper ``[]``; at most one ``CopyToResponse`` per copy-to (none after
    a drop but ``CopyToDropped``, which only a drop allows), and no
    ``Frontiers`` for a copy-to. Incoming commands are checked by the same rules as
    :class:`~tidegate.spec.protocol.ControllerSession`. A ``Hello`` starts a new
    iteration: pending peeks are abandoned unanswered and all bookkeeping
    restarts. A call that raises leaves the session unchanged.
    """

    def __init__(self) -> None:
        self._ledger = ProtocolLedger(exact=True)

    # -- commands -------------------------------------------------------------------

    def check_command(self, cmd: ComputeCommand) -> None:
        """Raise (a :class:`RemoteProtocolError`: the controller's fault) if ``cmd`` is illegal now."""
        try:
            self._ledger.check_command(cmd)
        except ProtocolError as e:
            raise blamed(e, RemoteProtocolError) from None

    def on_command(self, cmd: ComputeCommand, *, checked: bool = False) -> list[ReplicaEffect]:
        """Validate and record a received command; return what the replica must do and now owes.

        ``checked=True`` skips the validation when the caller has just passed
        ``cmd`` to :meth:`check_command` and changed nothing since.
        """
        ledger = self._ledger
        if not checked:
            self.check_command(cmd)
        # Only Schedule and AllowCompaction change readiness, and only of their own dataflow.
        touched: tuple[GlobalId, ...] = ()
        if isinstance(cmd, Schedule | AllowCompaction) and cmd.id in ledger.collections:
            touched = ledger.collections[cmd.id].dataflow
        was_ready = bool(touched) and self._ready(touched)
        effects: list[ReplicaEffect] = []
        if isinstance(cmd, Hello):
            effects.append(StartIteration(cmd.nonce, tuple(sorted(ledger.pending_peeks()))))
        elif isinstance(cmd, CreateInstance):
            logs = tuple(gid for _name, gid in cmd.config.logging.index_logs)
            effects.append(InitializeInstance(cmd.config, logs))
        elif isinstance(cmd, InitializationComplete):
            effects.append(BeginComputation())
        elif isinstance(cmd, UpdateConfiguration):
            effects.append(SetConfiguration(cmd.params, ledger.parameters.update(cmd.params)))
        elif isinstance(cmd, CreateDataflow):
            effects.append(BuildDataflow(cmd.dataflow))
        elif isinstance(cmd, Schedule):
            effects.append(ScheduleExport(cmd.id))
        elif isinstance(cmd, AllowWrites):
            effects.append(EnableWrites(cmd.id))
        elif isinstance(cmd, AllowCompaction):
            if cmd.frontier.is_empty():
                rec = ledger.collections[cmd.id]
                kinds = tuple(
                    k
                    for k in FrontierKind
                    if rec.kind.reports_frontiers and not ledger.reported_empty(cmd.id, k)
                )
                owes_dropped_at = rec.kind is CollectionKind.SUBSCRIBE and not ledger.closed(cmd.id)
                owes_copy_to_dropped = rec.kind is CollectionKind.COPY_TO and not ledger.closed(
                    cmd.id
                )
                effects.append(
                    DropCollection(cmd.id, rec.kind, kinds, owes_dropped_at, owes_copy_to_dropped)
                )
            else:
                effects.append(CompactCollection(cmd.id, cmd.frontier))
        elif isinstance(cmd, Peek):
            effects.append(ServePeek(cmd.peek))
        elif (
            isinstance(cmd, CancelPeek)
            and cmd.uuid in ledger.pending_peeks()
            and not ledger.peeks[cmd.uuid].cancel_requested
        ):
            effects.append(CancelPendingPeek(cmd.uuid))
        ledger.apply_command(cmd)
        if touched and not was_ready and self._ready(touched):
            effects.append(RunDataflow(touched))
        if isinstance(cmd, AllowCompaction) and cmd.frontier.is_empty():
            exports = ledger.collections[cmd.id].dataflow
            if exports and all(ledger.collections[g].dropped for g in exports):
                effects.append(ReleaseDataflow(exports))
        return effects

    def _ready(self, exports: tuple[GlobalId, ...]) -> bool:
        """Whether the dataflow's exports are all scheduled or dropped, at least one live."""
        cols = self._ledger.collections
        return all(cols[g].scheduled or cols[g].dropped for g in exports) and any(
            not cols[g].dropped for g in exports
        )

    # -- responses ------------------------------------------------------------------

    def check_response(self, resp: ComputeResponse) -> None:
        """Raise (a :class:`LocalProtocolError`: the replica's own bug) if sending ``resp`` now breaks the protocol."""
        try:
            self._ledger.check_response(resp)
        except ProtocolError as e:
            raise blamed(e, LocalProtocolError) from None

    def on_response(self, resp: ComputeResponse, *, checked: bool = False) -> None:
        """Validate and record a response the replica is about to send.

        ``checked=True`` skips the validation: for a ``Frontiers`` whose every
        value :meth:`frontier_report_allowed` has just accepted.
        """
        if not checked:
            self.check_response(resp)
        self._ledger.apply_response(resp)

    # -- queries --------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        return self._ledger.stage

    @property
    def nonce(self) -> _uuid.UUID | None:
        return self._ledger.nonce

    @property
    def collections(self) -> Mapping[GlobalId, CollectionRecord]:
        """Every collection of this iteration (log indexes and dataflow exports; dropped ones marked)."""
        return dict(self._ledger.collections)

    def collection(self, gid: GlobalId) -> CollectionRecord | None:
        """The record of ``gid`` in this iteration (``None`` if not created); no copy, unlike :attr:`collections`."""
        return self._ledger.collections.get(gid)

    @property
    def pending_peeks(self) -> Mapping[_uuid.UUID, PeekDescription]:
        """Peeks owed a response, by uuid."""
        return {u: r.peek for u, r in sorted(self._ledger.pending_peeks().items())}

    def cancel_requested(self, uuid: _uuid.UUID) -> bool:
        """Whether a ``CancelPeek`` named this (pending) peek, so ``PeekCanceled`` may answer it."""
        rec = self._ledger.peeks.get(uuid)
        return rec is not None and rec.cancel_requested

    def last_reported(self, gid: GlobalId, kind: FrontierKind) -> Antichain | None:
        """The last ``kind`` frontier reported for ``gid`` in this iteration (``None`` if none)."""
        return self._ledger.reported.get((gid, kind))

    def frontier_report_allowed(
        self, gid: GlobalId, kind: FrontierKind, frontier: Antichain
    ) -> bool:
        """Whether reporting ``frontier`` for ``gid``'s ``kind`` now is legal (a replica reports only these)."""
        rec = self._ledger.collections.get(gid)
        if rec is None or not rec.kind.reports_frontiers or not self.stage.is_computation:
            return False
        return self._ledger.frontier_problem(rec, kind, frontier) is None

    def owed_frontier_reports(self) -> dict[GlobalId, tuple[FrontierKind, ...]]:
        """Dropped collections and the kinds they must still report as ``[]``."""
        out = {}
        for gid in sorted(self._ledger.owing):
            kinds = self._ledger.owed_empty_frontiers(gid)
            if kinds:
                out[gid] = kinds
        return out

    def owed_dropped_at(self) -> tuple[GlobalId, ...]:
        """Dropped subscribes that must still send ``DroppedAt``."""
        return tuple(g for g in sorted(self._ledger.owing) if self._ledger.owes_dropped_at(g))

    def owed_copy_to_dropped(self) -> tuple[GlobalId, ...]:
        """Dropped copy-tos that were not answered: each must still send ``CopyToDropped``."""
        return tuple(g for g in sorted(self._ledger.owing) if self._ledger.owes_copy_to_dropped(g))

    def pending_copy_tos(self) -> tuple[GlobalId, ...]:
        """Copy-tos owed their one ``CopyToResponse`` (rows or error; ``CopyToDropped`` once dropped)."""
        return self._ledger.pending_copy_tos()

    def copy_to_answered(self, gid: GlobalId) -> bool:
        """Whether copy-to ``gid`` got its ``CopyToResponse`` in this iteration (none may follow)."""
        return gid in self._ledger.copy_tos_answered

    def subscribe_next_lower(self, gid: GlobalId) -> Antichain:
        """The lower that subscribe ``gid``'s next batch (or ``DroppedAt`` frontier) must have."""
        return self._ledger.subscribe_next_lower(gid)

    def subscribe_ended(self, gid: GlobalId) -> bool:
        """Whether subscribe ``gid``'s stream is over (upper ``[]`` or ``DroppedAt`` sent)."""
        return gid in self._ledger.subscribes_ended

    def owes_nothing(self) -> bool:
        """No pending peek, no owed ``[]`` report, no owed ``DroppedAt``, no unanswered copy-to."""
        return (
            not self._ledger.pending_peeks()
            and not self.owed_frontier_reports()
            and not self.owed_dropped_at()
            and not self._ledger.pending_copy_tos()
        )

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable, comparable image of the session (equal before and after a rejected event)."""
        return self._ledger.snapshot()
