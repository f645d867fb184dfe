"""Driving a controller and a replica session in lockstep, judged by the model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from ...errors import (
    AllowCompactionRegression,
    CommandAfterDrop,
    CompactionPastPendingPeek,
    DataflowAsOfUnset,
    DroppedAtMismatch,
    DuplicateAllowWrites,
    DuplicateCollection,
    DuplicatePeek,
    DuplicatePeekResponse,
    DuplicateSchedule,
    FrontierBeforeAsOf,
    FrontierRegression,
    FrontiersForSubscribe,
    ImportSinceViolation,
    InvalidPeekRows,
    LocalProtocolError,
    NotAnIndex,
    NotASubscribe,
    ProtocolError,
    RemoteProtocolError,
    ResponseAfterClose,
    ResponseAfterDrop,
    StageViolation,
    SubscribeGap,
    SubscribeNotConsolidated,
    SubscribeUpdateOutOfRange,
    UnknownCollection,
    UnknownPeek,
    UnrequestedCancel,
    UnrequestedDroppedAt,
    blamed,
)
from ...frontier import Antichain
from ...ids import GlobalId
from ...protocol import (
    AllowCompaction,
    AllowWrites,
    BeginComputation,
    CancelPeek,
    CancelPendingPeek,
    CollectionKind,
    ComputeCommand,
    ComputeParameters,
    ComputeResponse,
    ControllerSession,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    DropCollection,
    FrontierKind,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    ReleaseDataflow,
    ReplicaEffect,
    ReplicaSession,
    RunDataflow,
    Schedule,
    ServePeek,
    Stage,
    StartIteration,
    Status,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)
from ._model import _EMPTY, ProtocolCommandModel, _at, _frontiers, _succ


class ProtocolSessionsMachine(ProtocolCommandModel):
    """Both sessions in lockstep; legal steps accepted, illegal steps rejected with the right error.

    Every legal command also checks the replica session's effects against the
    model (abandoned peeks on ``Hello``, owed reports on a drop, ``RunDataflow``
    once all exports are scheduled, ``CancelPendingPeek`` only for pending peeks).
    """

    def __init__(self) -> None:
        super().__init__()
        self.controller = self.make_controller_session()
        self.replica = self.make_replica_session()
        self._ready_before: set[tuple[GlobalId, ...]] = set()

    def make_controller_session(self) -> ControllerSession:
        """The controller session under test (override to check another implementation)."""
        return ControllerSession()

    def make_replica_session(self) -> ReplicaSession:
        """The replica session under test (override to check another implementation)."""
        return ReplicaSession()

    # -- delivery -------------------------------------------------------------------

    def deliver(self, cmd: ComputeCommand) -> list[ReplicaEffect]:
        m = self.model
        ready_before = self._ready_before
        stage = self.controller.on_command(cmd)
        effects = self.replica.on_command(cmd)
        if stage is not m.stage:
            raise AssertionError(f"controller stage {stage} after {cmd}, model says {m.stage}")
        self._check_effects(cmd, effects, ready_before)
        return effects

    def send(self, cmd: ComputeCommand) -> list[ReplicaEffect] | None:
        self._ready_before = self.model.ready() if not isinstance(cmd, Hello) else set()
        return super().send(cmd)

    def _check_effects(
        self,
        cmd: ComputeCommand,
        effects: list[ReplicaEffect],
        ready_before: set[tuple[GlobalId, ...]],
    ) -> None:
        m = self.model
        kinds = [type(e) for e in effects]
        if isinstance(cmd, Hello):
            if effects != [StartIteration(cmd.nonce, tuple(self.abandoned))]:
                raise AssertionError(f"Hello effects {effects}, abandoned {self.abandoned}")
        elif isinstance(cmd, InitializationComplete):
            if effects != [BeginComputation()]:
                raise AssertionError(f"InitializationComplete effects {effects}")
        elif isinstance(cmd, CancelPeek):
            expect = [CancelPendingPeek(cmd.uuid)] if self.cancel_was_new else []
            if effects != expect:
                raise AssertionError(f"CancelPeek effects {effects}, expected {expect}")
        elif isinstance(cmd, Peek):
            if effects != [ServePeek(cmd.peek)]:
                raise AssertionError(f"Peek effects {effects}")
        elif isinstance(cmd, AllowCompaction) and cmd.frontier.is_empty():
            c = m.cols[cmd.id]
            drop = DropCollection(cmd.id, c.kind, m.owed_empty(cmd.id), m.owes_dropped_at(cmd.id))
            if effects[0] != drop:
                raise AssertionError(f"drop effect {effects[0]}, expected {drop}")
            released = all(m.cols[g].dropped for g in c.exports) and bool(c.exports)
            if (ReleaseDataflow(c.exports) in effects) != released:
                raise AssertionError(f"drop effects {effects}: release expected {released}")
        if isinstance(cmd, Schedule | AllowCompaction):
            runs = sorted(e.export_ids for e in effects if isinstance(e, RunDataflow))
            expect_runs = sorted(m.ready() - ready_before)
            if runs != expect_runs:
                raise AssertionError(f"{cmd}: RunDataflow {runs}, expected {expect_runs}")
        elif RunDataflow in kinds:
            raise AssertionError(f"{cmd}: unexpected RunDataflow in {effects}")

    # -- illegal commands -----------------------------------------------------------

    def expect_command_error(self, cmd: ComputeCommand, error: type[ProtocolError]) -> None:
        """Both sessions reject ``cmd`` with ``error`` and stay unchanged."""
        for session in (self.controller, self.replica):
            before = session.snapshot()
            # A controller sending it is a local bug; a replica receiving it blames the controller.
            side = LocalProtocolError if session is self.controller else RemoteProtocolError
            try:
                session.on_command(cmd)
            except ProtocolError as e:
                if type(e) is not type(blamed(error("probe"), side)):
                    raise AssertionError(f"{cmd}: expected {error.__name__}, got {e!r}") from e
            else:
                raise AssertionError(f"{type(session).__name__} accepted illegal {cmd}")
            if session.snapshot() != before:
                raise AssertionError(f"{type(session).__name__} changed on rejected {cmd}")

    @staticmethod
    def pick(data: st.DataObject, options: list[Any]) -> Any:
        """One of ``options`` (tuples whose second item is the expected error): first a rule, uniformly,
        then an option breaking it, so that rare rules get as many turns as common ones."""
        errors = sorted({o[1] for o in options}, key=lambda e: e.__name__)
        error = data.draw(st.sampled_from(errors))
        return data.draw(st.sampled_from([o for o in options if o[1] is error]))

    @staticmethod
    def some(data: st.DataObject, items: list[Any]) -> list[Any]:
        """A few of ``items`` (at most 4), drawn, so that every one gets its turn."""
        if not items:
            return []
        return data.draw(st.lists(st.sampled_from(items), unique=True, max_size=4))

    def unknown_id(self) -> GlobalId:
        return GlobalId.user(1_000_000 + self._ids)

    @rule(data=st.data())
    def illegal_command(self, data: st.DataObject) -> None:
        """A command breaking one rule (the rule drawn first, among those breakable now)."""
        options = self.stage_command_options(data)
        if self.setup_stage:
            options += self.dataflow_options(data) + self.collection_command_options(data)
        cmd, error = self.pick(data, options)
        self.expect_command_error(cmd, error)

    def stage_command_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Commands the current stage does not allow."""
        stage = self.model.stage
        options: list[ComputeCommand]
        if stage is Stage.AWAITING_HELLO:
            options = [
                CreateInstance(InstanceConfig()),
                InitializationComplete(),
                UpdateConfiguration(ComputeParameters()),
                Schedule(self.unknown_id()),
            ]
        elif stage is Stage.CREATION:
            options = [
                InitializationComplete(),
                UpdateConfiguration(ComputeParameters()),
                CancelPeek(self.fresh_uuid()),
            ]
        elif stage is Stage.INITIALIZATION:
            options = [CreateInstance(InstanceConfig())]
        else:
            options = [CreateInstance(InstanceConfig()), InitializationComplete()]
        return [(cmd, StageViolation) for cmd in options]

    def dataflow_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Dataflows breaking one rule each: no as_of, reused id, bad index import."""
        m = self.model
        df = self.legal_dataflow(data)
        options: list[tuple[DataflowDescription, type[ProtocolError]]] = [
            (replace(df, as_of=None), DataflowAsOfUnset),
            (
                replace(df, index_imports=(IndexImport(self.unknown_id(), self.unknown_id()),)),
                UnknownCollection,
            ),
        ]
        if m.cols:
            gid = data.draw(st.sampled_from(sorted(m.cols)))
            options.append(
                (replace(df, index_exports=(IndexExport(gid, gid),)), DuplicateCollection)
            )
        twice = df.export_ids[0]
        options.append(
            (
                replace(df, index_exports=(IndexExport(twice, twice), *df.index_exports)),
                DuplicateCollection,
            )
        )
        if m.dropped():
            gid = data.draw(st.sampled_from(m.dropped()))
            options.append((replace(df, index_imports=(IndexImport(gid, gid),)), CommandAfterDrop))
        sinks = m.live([CollectionKind.SUBSCRIBE, CollectionKind.MATERIALIZED_VIEW])
        if sinks:
            gid = data.draw(st.sampled_from(sinks))
            options.append((replace(df, index_imports=(IndexImport(gid, gid),)), NotAnIndex))
        compacted = [
            g
            for g in m.live([CollectionKind.INDEX, CollectionKind.LOG_INDEX])
            if m.cols[g].since not in (_at(0), _EMPTY)
        ]
        if compacted:
            gid = data.draw(st.sampled_from(compacted))
            early = _at(m.cols[gid].since.elements[0] - 1)
            options.append(
                (
                    replace(df, index_imports=(IndexImport(gid, gid),), as_of=early),
                    ImportSinceViolation,
                )
            )
        return [(CreateDataflow(bad), error) for bad, error in options]

    def collection_command_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeCommand, type[ProtocolError]]]:
        """Schedule / AllowWrites / AllowCompaction / Peek breaking a dependency rule."""
        m = self.model
        unknown = self.unknown_id()
        options: list[tuple[ComputeCommand, type[ProtocolError]]] = [
            (Schedule(unknown), UnknownCollection),
            (AllowWrites(unknown), UnknownCollection),
            (AllowCompaction(unknown, _at(3)), UnknownCollection),
            (Peek(PeekDescription(self.fresh_uuid(), unknown, 0)), UnknownCollection),
            (CancelPeek(self.fresh_uuid()), UnknownPeek),
        ]
        for gid in self.some(data, m.dropped()):
            options += [
                (Schedule(gid), CommandAfterDrop),
                (AllowWrites(gid), CommandAfterDrop),
                (AllowCompaction(gid, _EMPTY), CommandAfterDrop),
                (Peek(PeekDescription(self.fresh_uuid(), gid, 0)), CommandAfterDrop),
            ]
        for gid in self.some(data, m.live()):
            c = m.cols[gid]
            if c.scheduled:
                options.append((Schedule(gid), DuplicateSchedule))
            if c.writable:
                options.append((AllowWrites(gid), DuplicateAllowWrites))
            if c.since not in (_at(0), _EMPTY):
                options.append(
                    (AllowCompaction(gid, _at(c.since.elements[0] - 1)), AllowCompactionRegression)
                )
            if not c.kind.is_index:
                options.append((Peek(PeekDescription(self.fresh_uuid(), gid, 0)), NotAnIndex))
        if m.peeks:
            u = data.draw(st.sampled_from(sorted(m.peeks)))
            p = m.peeks[u].peek
            options.append((Peek(p), DuplicatePeek))
            pending = m.peeks[u]
            target = m.cols.get(p.id)
            if (
                not pending.cancelled
                and not pending.answered
                and p.target == "index"
                and target is not None
                and not target.dropped
                and target.since <= _at(p.timestamp + 1)
            ):
                options.append(
                    (AllowCompaction(p.id, _at(p.timestamp + 1)), CompactionPastPendingPeek)
                )
        return options

    # -- legal responses ------------------------------------------------------------

    def accept_response(self, resp: ComputeResponse) -> None:
        self.controller.on_response(resp)
        self.replica.on_response(resp)

    @property
    def computing(self) -> bool:
        return self.model.stage.is_computation

    @precondition(
        lambda self: (
            self.computing
            and any(
                c.kind.reports_frontiers and not self.model.closed(g)
                for g, c in self.model.cols.items()
            )
        )
    )
    @rule(data=st.data())
    def report_frontiers(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(
            st.sampled_from(
                sorted(g for g, c in m.cols.items() if c.kind.reports_frontiers and not m.closed(g))
            )
        )
        c = m.cols[gid]
        values: dict[FrontierKind, Antichain] = {}
        for kind in data.draw(
            st.lists(st.sampled_from(list(FrontierKind)), unique=True, max_size=3)
        ):
            last = m.reported.get((gid, kind))
            if last == _EMPTY:
                continue
            if c.dropped or data.draw(st.integers(0, 5)) == 0:
                value = _EMPTY
            elif last is None:
                value = _succ(c.as_of, data.draw(st.integers(0, 2)))
            else:
                value = _succ(last, data.draw(st.integers(1, 3)))
            values[kind] = value
        self.accept_response(_frontiers(gid, values))
        for kind, value in values.items():
            m.reported[(gid, kind)] = value

    @precondition(lambda self: self.computing and bool(self.model.pending()))
    @rule(data=st.data())
    def answer_peek(self, data: st.DataObject) -> None:
        m = self.model
        u = data.draw(st.sampled_from(m.pending()))
        results: list[Any] = [PeekRows(((("a", 1), 2),)), PeekRows(()), PeekError("no")]
        if m.peeks[u].cancelled:
            results.append(PeekCanceled())
        self.accept_response(PeekResponse(u, data.draw(st.sampled_from(results))))
        m.peeks[u].answered = True

    def _open_subscribes(self, *, dropped: bool) -> list[GlobalId]:
        m = self.model
        return sorted(
            g
            for g, c in m.cols.items()
            if c.kind is CollectionKind.SUBSCRIBE and c.dropped == dropped and g not in m.sub_ended
        )

    def legal_batch(self, gid: GlobalId, data: st.DataObject) -> SubscribeBatch:
        """The next batch of subscribe ``gid``: contiguous, first upper past the as_of, consolidated."""
        m = self.model
        c = m.cols[gid]
        lower = m.next_lower(gid)
        t0 = lower.elements[0]
        if c.as_of.is_empty():
            return SubscribeBatch(lower, _EMPTY)
        a = c.as_of.elements[0]
        least = max(t0 + 1, a) if gid not in m.sub_upper else t0 + 1
        if data.draw(st.integers(0, 6)) == 0:
            upper, end = _EMPTY, least + 2
        else:
            upper = _at(least + data.draw(st.integers(0, 2)))
            end = upper.elements[0]
        times = list(range(max(t0, a), end))
        updates: tuple[tuple[int, tuple[Any, ...], int], ...] = ()
        if times:
            picks = data.draw(
                st.lists(
                    st.tuples(st.sampled_from(times), st.integers(0, 2)), unique=True, max_size=3
                )
            )
            updates = tuple((t, (r,), data.draw(st.sampled_from([-1, 1, 2]))) for t, r in picks)
        return SubscribeBatch(lower, upper, updates)

    @precondition(lambda self: self.computing and bool(self._open_subscribes(dropped=False)))
    @rule(data=st.data())
    def subscribe_batch(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(self._open_subscribes(dropped=False)))
        batch = self.legal_batch(gid, data)
        self.accept_response(SubscribeResponse(gid, batch))
        m.sub_upper[gid] = batch.upper
        if batch.upper.is_empty():
            m.sub_ended.add(gid)

    @precondition(lambda self: self.computing and bool(self._open_subscribes(dropped=True)))
    @rule(data=st.data())
    def subscribe_dropped_at(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(self._open_subscribes(dropped=True)))
        self.accept_response(SubscribeResponse(gid, SubscribeDroppedAt(m.next_lower(gid))))
        m.sub_ended.add(gid)

    @precondition(
        lambda self: self.computing and any(not self.model.closed(g) for g in self.model.cols)
    )
    @rule(data=st.data())
    def status(self, data: st.DataObject) -> None:
        m = self.model
        gid = data.draw(st.sampled_from(sorted(g for g in m.cols if not m.closed(g))))
        self.accept_response(Status(gid, "ok"))

    # -- illegal responses ----------------------------------------------------------

    def expect_response_error(
        self, resp: ComputeResponse, error: type[ProtocolError], *, controller_knows: bool = True
    ) -> None:
        """The replica session rejects ``resp`` with ``error``; so does the controller session,
        unless the rule depends on the replica having seen a command (``controller_knows=False``),
        in which case the controller must accept it (checked without recording it)."""
        sessions: list[Any] = [self.replica]
        if controller_knows:
            sessions.append(self.controller)
        else:
            self.controller.check_response(resp)
        for session in sessions:
            before = session.snapshot()
            # A replica sending it is a local bug; a controller receiving it blames the replica.
            side = LocalProtocolError if session is self.replica else RemoteProtocolError
            try:
                session.on_response(resp)
            except ProtocolError as e:
                if type(e) is not type(blamed(error("probe"), side)):
                    raise AssertionError(f"{resp}: expected {error.__name__}, got {e!r}") from e
            else:
                raise AssertionError(f"{type(session).__name__} accepted illegal {resp}")
            if session.snapshot() != before:
                raise AssertionError(f"{type(session).__name__} changed on rejected {resp}")

    @rule(data=st.data())
    def illegal_response(self, data: st.DataObject) -> None:
        """A response breaking one rule (the rule drawn first, among those breakable now)."""
        if self.computing:
            options = (
                self.frontiers_options(data)
                + self.peek_response_options(data)
                + self.subscribe_response_options(data)
            )
        else:
            options = self.early_response_options(data)
        resp, error, knows = self.pick(data, options)
        self.expect_response_error(resp, error, controller_knows=knows)

    def early_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        """Responses before ``InitializationComplete``."""
        m = self.model
        options: list[ComputeResponse] = [Status(self.unknown_id())]
        if m.cols:
            gid = data.draw(st.sampled_from(sorted(m.cols)))
            options.append(Frontiers(gid, write=_EMPTY))
        if m.peeks:
            options.append(PeekResponse(data.draw(st.sampled_from(sorted(m.peeks))), PeekRows(())))
        return [(resp, StageViolation, True) for resp in options]

    def frontiers_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError], bool]] = [
            (Frontiers(self.unknown_id(), write=_at(1)), UnknownCollection, True),
            (Status(self.unknown_id()), UnknownCollection, True),
        ]
        for gid in self.some(data, sorted(m.cols)):
            c = m.cols[gid]
            if c.kind is CollectionKind.SUBSCRIBE:
                options.append((Frontiers(gid, output=_EMPTY), FrontiersForSubscribe, True))
                continue
            if m.closed(gid):
                options.append((Status(gid), ResponseAfterClose, True))
            for kind in FrontierKind:
                last = m.reported.get((gid, kind))
                if last == _EMPTY:
                    options.append((_frontiers(gid, {kind: _at(99)}), ResponseAfterClose, True))
                elif c.dropped:
                    bad = _succ(last) if last is not None else _succ(c.as_of)
                    if not bad.is_empty():
                        options.append((_frontiers(gid, {kind: bad}), ResponseAfterDrop, False))
                elif last is not None:
                    options.append((_frontiers(gid, {kind: last}), FrontierRegression, True))
                elif c.as_of != _at(0):
                    before = _at(c.as_of.elements[0] - 1) if c.as_of.elements else _at(7)
                    options.append((_frontiers(gid, {kind: before}), FrontierBeforeAsOf, True))
        return options

    def peek_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError]]] = [
            (PeekResponse(self.fresh_uuid(), PeekRows(())), UnknownPeek)
        ]
        for u in self.some(data, sorted(m.peeks)):
            p = m.peeks[u]
            if p.answered:
                options.append((PeekResponse(u, PeekError("again")), DuplicatePeekResponse))
                continue
            if not p.cancelled:
                options.append((PeekResponse(u, PeekCanceled()), UnrequestedCancel))
            options.append((PeekResponse(u, PeekRows(((("x",), 0),))), InvalidPeekRows))
            options.append((PeekResponse(u, PeekRows(((("x",), -2),))), InvalidPeekRows))
        return [(resp, error, True) for resp, error in options]

    def subscribe_response_options(
        self, data: st.DataObject
    ) -> list[tuple[ComputeResponse, type[ProtocolError], bool]]:
        m = self.model
        options: list[tuple[ComputeResponse, type[ProtocolError], bool]] = [
            (
                SubscribeResponse(self.unknown_id(), SubscribeDroppedAt(_at(0))),
                UnknownCollection,
                True,
            )
        ]
        subscribes = sorted(g for g, c in m.cols.items() if c.kind is CollectionKind.SUBSCRIBE)
        others = sorted(g for g, c in m.cols.items() if c.kind is not CollectionKind.SUBSCRIBE)
        for gid in self.some(data, subscribes) + self.some(data, others)[:1]:
            c = m.cols[gid]
            if c.kind is not CollectionKind.SUBSCRIBE:
                batch = SubscribeBatch(_at(0), _EMPTY)
                options.append((SubscribeResponse(gid, batch), NotASubscribe, True))
                continue
            lower = m.next_lower(gid)
            if gid in m.sub_ended:
                options.append(
                    (SubscribeResponse(gid, SubscribeDroppedAt(lower)), ResponseAfterClose, True)
                )
                continue
            if c.dropped:
                good = self.legal_batch(gid, data)
                options.append((SubscribeResponse(gid, good), ResponseAfterDrop, False))
                if not lower.is_empty():
                    wrong = SubscribeDroppedAt(_succ(lower))
                    options.append((SubscribeResponse(gid, wrong), DroppedAtMismatch, True))
                continue
            options.append(
                (SubscribeResponse(gid, SubscribeDroppedAt(lower)), UnrequestedDroppedAt, True)
            )
            t0 = lower.elements[0]
            gap = SubscribeBatch(_at(t0 + 1), _EMPTY)
            options.append((SubscribeResponse(gid, gap), SubscribeGap, True))
            options.append(
                (SubscribeResponse(gid, SubscribeBatch(lower, lower)), SubscribeGap, True)
            )
            if gid not in m.sub_upper and c.as_of.elements and c.as_of.elements[0] > t0 + 1:
                short = SubscribeBatch(lower, _at(c.as_of.elements[0] - 1))
                options.append((SubscribeResponse(gid, short), FrontierBeforeAsOf, True))
            if not c.as_of.is_empty():
                upper = _at(max(t0, c.as_of.elements[0]) + 2)
                out = SubscribeBatch(lower, upper, ((upper.elements[0], ("r",), 1),))
                options.append((SubscribeResponse(gid, out), SubscribeUpdateOutOfRange, True))
                t = upper.elements[0] - 1
                twice = SubscribeBatch(lower, upper, ((t, ("r",), 1), (t, ("r",), 1)))
                options.append((SubscribeResponse(gid, twice), SubscribeNotConsolidated, True))
                zero = SubscribeBatch(lower, upper, ((t, ("r",), 0),))
                options.append((SubscribeResponse(gid, zero), SubscribeNotConsolidated, True))
                if c.as_of.elements[0] > t0:
                    early = SubscribeBatch(lower, upper, ((c.as_of.elements[0] - 1, ("r",), 1),))
                    options.append((SubscribeResponse(gid, early), SubscribeUpdateOutOfRange, True))
        return options

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def sessions_agree_with_model(self) -> None:
        m = self.model
        for session in (self.controller, self.replica):
            if session.stage is not m.stage:
                raise AssertionError(
                    f"{type(session).__name__} stage {session.stage}, model {m.stage}"
                )
        if list(self.replica.pending_peeks) != m.pending():
            raise AssertionError(
                f"pending peeks {list(self.replica.pending_peeks)} vs {m.pending()}"
            )
        if list(self.controller.unanswered_peeks) != m.pending():
            raise AssertionError("controller's unanswered peeks differ from the model")
        owed = {g: m.owed_empty(g) for g in sorted(m.cols) if m.owed_empty(g)}
        if self.replica.owed_frontier_reports() != owed:
            raise AssertionError(f"owed reports {self.replica.owed_frontier_reports()} vs {owed}")
        dropped_at = tuple(g for g in sorted(m.cols) if m.owes_dropped_at(g))
        if self.replica.owed_dropped_at() != dropped_at:
            raise AssertionError(f"owed DroppedAt {self.replica.owed_dropped_at()} vs {dropped_at}")
        live = {g for g, c in m.cols.items() if not c.dropped}
        if {g for g in self.controller.collections if self.controller.is_live(g)} != live:
            raise AssertionError("controller's live collections differ from the model")
