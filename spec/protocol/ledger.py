"""The one place where compute-protocol legality lives.

A :class:`ProtocolLedger` records one protocol iteration as seen on a
connection: the commands sent (stage, collections with their kind, as_of and
since, peeks) and the responses received (reported frontiers, subscribe
progress, answered peeks). ``check_command``/``check_response`` raise a
:class:`~tidegate.spec.errors.ProtocolError` naming the broken rule and never
mutate; ``apply_command``/``apply_response`` record an already-checked message.
Both sessions are thin layers over a ledger.

The ledger is *exact* on the replica side: the replica has seen every command
when it sends a response. On the controller side it is not: a response may have
been produced before the replica saw the latest commands, so the rules that
depend on a command having arrived (nothing but ``[]`` after a drop) are only
checked in exact mode.
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AllowCompactionRegression,
    CommandAfterDrop,
    CompactionPastPendingPeek,
    DataflowAsOfUnset,
    DroppedAtMismatch,
    DuplicateAllowWrites,
    DuplicateCollection,
    DuplicateCopyToResponse,
    DuplicatePeek,
    DuplicatePeekResponse,
    DuplicateSchedule,
    FrontierBeforeAsOf,
    FrontierRegression,
    FrontiersForCopyTo,
    FrontiersForSubscribe,
    ImportSinceViolation,
    InvalidPeekRows,
    NotACopyTo,
    NotAnIndex,
    NotASubscribe,
    ProtocolError,
    ResponseAfterClose,
    ResponseAfterDrop,
    StageViolation,
    SubscribeGap,
    SubscribeNotConsolidated,
    SubscribeUpdateOutOfRange,
    UnknownCollection,
    UnknownPeek,
    UnrequestedCancel,
    UnrequestedCopyToDropped,
    UnrequestedDroppedAt,
)
from ..frontier import Antichain, minimum
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
from .responses import (
    ComputeResponse,
    CopyToDropped,
    CopyToResponse,
    Frontiers,
    PeekCanceled,
    PeekResponse,
    PeekRows,
    Status,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from .stages import CollectionKind, FrontierKind, Stage, allowed_stages
from .types import (
    ComputeParameters,
    CopyToConnection,
    DataflowDescription,
    InstanceConfig,
    PeekDescription,
    SubscribeConnection,
)

__all__ = ["CollectionRecord", "PeekRecord", "ProtocolLedger"]

_BOTTOM = Antichain([0])


@dataclass(frozen=True, slots=True)
class CollectionRecord:
    """What one iteration's commands said about a collection.

    ``since`` is the as_of, advanced by ``AllowCompaction``; ``dataflow`` lists
    the export ids of the dataflow that created it (empty for log indexes).
    """

    id: GlobalId
    kind: CollectionKind
    as_of: Antichain
    since: Antichain
    dataflow: tuple[GlobalId, ...] = ()
    scheduled: bool = False
    writable: bool = False
    dropped: bool = False


@dataclass(frozen=True, slots=True)
class PeekRecord:
    """A peek of this iteration; ``cancel_requested`` once a ``CancelPeek`` named it."""

    peek: PeekDescription
    cancel_requested: bool = False


def _fmt(f: Antichain) -> str:
    return "[" + ", ".join(map(str, f.elements)) + "]"


def _export_kinds(df: DataflowDescription) -> list[tuple[GlobalId, CollectionKind]]:
    out = [(e.id, CollectionKind.INDEX) for e in df.index_exports]
    for s in df.sink_exports:
        if isinstance(s.connection, SubscribeConnection):
            kind = CollectionKind.SUBSCRIBE
        elif isinstance(s.connection, CopyToConnection):
            kind = CollectionKind.COPY_TO
        else:
            kind = CollectionKind.MATERIALIZED_VIEW
        out.append((s.id, kind))
    return out


class ProtocolLedger:
    """The legality rules of one connection's protocol iterations (see the module docstring).

    ``exact`` is true on the replica side (every command is known when a
    response is checked) and false on the controller side.
    """

    def __init__(self, *, exact: bool) -> None:
        self.exact = exact
        self._reset()

    def _reset(self) -> None:
        """Forget the iteration (a new ``Hello``)."""
        self.nonce: _uuid.UUID | None = None
        self._phase = Stage.AWAITING_HELLO
        self._read_write = False
        self.config: InstanceConfig | None = None
        self.parameters = ComputeParameters()
        self.collections: dict[GlobalId, CollectionRecord] = {}
        self.dataflows: dict[tuple[GlobalId, ...], DataflowDescription] = {}
        self.peeks: dict[_uuid.UUID, PeekRecord] = {}
        self.answered: set[_uuid.UUID] = set()
        self.reported: dict[tuple[GlobalId, FrontierKind], Antichain] = {}
        self.subscribe_uppers: dict[GlobalId, Antichain] = {}
        self.subscribes_ended: set[GlobalId] = set()
        # Copy-tos of this iteration that got their one ``CopyToResponse``.
        self.copy_tos_answered: set[GlobalId] = set()
        # Dropped collections that still owe ``[]`` reports, a ``DroppedAt`` or a ``CopyToDropped``.
        self.owing: set[GlobalId] = set()
        # Index peeks neither answered nor cancelled, by collection: they pin its compaction.
        self.holding_peeks: dict[GlobalId, set[_uuid.UUID]] = {}

    # -- queries --------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        if self._phase is Stage.READ_ONLY and self._read_write:
            return Stage.READ_WRITE
        return self._phase

    def live(self, gid: GlobalId) -> bool:
        rec = self.collections.get(gid)
        return rec is not None and not rec.dropped

    def pending_peeks(self) -> dict[_uuid.UUID, PeekRecord]:
        """Peeks of this iteration that have no response yet."""
        return {u: p for u, p in self.peeks.items() if u not in self.answered}

    def closed(self, gid: GlobalId) -> bool:
        """Whether ``gid`` may get no more responses: its subscribe ended, its copy-to was
        answered, or every kind reported ``[]``."""
        rec = self.collections[gid]
        if rec.kind is CollectionKind.SUBSCRIBE:
            return gid in self.subscribes_ended
        if rec.kind is CollectionKind.COPY_TO:
            return gid in self.copy_tos_answered
        return all(self.reported_empty(gid, k) for k in FrontierKind)

    def owed_empty_frontiers(self, gid: GlobalId) -> tuple[FrontierKind, ...]:
        """The kinds a dropped collection must still report as ``[]`` (none if not dropped)."""
        rec = self.collections[gid]
        if not rec.dropped or not rec.kind.reports_frontiers:
            return ()
        return tuple(k for k in FrontierKind if not self.reported_empty(gid, k))

    def owes_dropped_at(self, gid: GlobalId) -> bool:
        """Whether a dropped subscribe must still send ``DroppedAt``."""
        rec = self.collections[gid]
        return (
            rec.dropped
            and rec.kind is CollectionKind.SUBSCRIBE
            and gid not in self.subscribes_ended
        )

    def owes_copy_to_dropped(self, gid: GlobalId) -> bool:
        """Whether a dropped copy-to must still send ``CopyToDropped`` (it was not answered)."""
        rec = self.collections[gid]
        return (
            rec.dropped and rec.kind is CollectionKind.COPY_TO and gid not in self.copy_tos_answered
        )

    def pending_copy_tos(self) -> tuple[GlobalId, ...]:
        """Copy-tos of this iteration owed their one ``CopyToResponse`` (dropped ones included)."""
        return tuple(
            sorted(
                g
                for g, rec in self.collections.items()
                if rec.kind is CollectionKind.COPY_TO and g not in self.copy_tos_answered
            )
        )

    def subscribe_next_lower(self, gid: GlobalId) -> Antichain:
        """The lower the next batch of subscribe ``gid`` must have."""
        return self.subscribe_uppers.get(gid, self._bottom_for(self.collections[gid].as_of))

    def snapshot(self) -> tuple[Any, ...]:
        """An immutable, comparable image of the whole state (for "unchanged after an error" checks)."""
        return (
            self.nonce,
            self._phase,
            self._read_write,
            self.config,
            self.parameters,
            tuple(sorted(self.collections.items())),
            tuple(sorted(self.dataflows.items())),
            tuple(sorted(self.peeks.items())),
            tuple(sorted(self.answered)),
            tuple(sorted(self.reported.items(), key=lambda kv: (kv[0][0], kv[0][1].value))),
            tuple(sorted(self.subscribe_uppers.items())),
            tuple(sorted(self.subscribes_ended)),
            tuple(sorted(self.copy_tos_answered)),
        )

    # -- commands -------------------------------------------------------------------

    def check_command(self, cmd: ComputeCommand) -> None:
        """Raise the :class:`ProtocolError` that sending ``cmd`` now would break; never mutates."""
        stage = self.stage
        if stage not in allowed_stages(cmd):
            raise StageViolation(self._stage_message(cmd, stage))
        if isinstance(cmd, CreateInstance):
            seen: set[GlobalId] = set()
            for _name, gid in cmd.config.logging.index_logs:
                if gid in seen:
                    raise DuplicateCollection(f"log index {gid} is named twice in CreateInstance")
                seen.add(gid)
        elif isinstance(cmd, CreateDataflow):
            self._check_dataflow(cmd.dataflow)
        elif isinstance(cmd, Schedule):
            rec = self._require_live(cmd.id, "Schedule")
            if rec.scheduled:
                raise DuplicateSchedule(f"Schedule({cmd.id}) was already sent in this iteration")
        elif isinstance(cmd, AllowWrites):
            rec = self._require_live(cmd.id, "AllowWrites")
            if rec.writable:
                raise DuplicateAllowWrites(
                    f"AllowWrites({cmd.id}) was already sent in this iteration"
                )
        elif isinstance(cmd, AllowCompaction):
            rec = self._require_live(cmd.id, "AllowCompaction")
            if not rec.since <= cmd.frontier:
                raise AllowCompactionRegression(
                    f"AllowCompaction({cmd.id}, {_fmt(cmd.frontier)}) is not at least "
                    f"its since {_fmt(rec.since)}"
                )
            for uuid in sorted(self.holding_peeks.get(cmd.id, ())):
                p = self.peeks[uuid].peek
                if not cmd.frontier.less_equal(p.timestamp):
                    raise CompactionPastPendingPeek(
                        f"AllowCompaction({cmd.id}, {_fmt(cmd.frontier)}) passes the time "
                        f"{p.timestamp} of peek {uuid}, which is still pending"
                    )
        elif isinstance(cmd, Peek):
            p = cmd.peek
            if p.uuid in self.peeks:
                raise DuplicatePeek(f"peek uuid {p.uuid} was already used in this iteration")
            if p.target == "index":
                rec = self._require_live(p.id, f"Peek {p.uuid}")
                if not rec.kind.is_index:
                    raise NotAnIndex(
                        f"Peek {p.uuid} targets {p.id}, a {rec.kind.value}, not an index"
                    )
        elif isinstance(cmd, CancelPeek) and cmd.uuid not in self.peeks:
            raise UnknownPeek(f"CancelPeek({cmd.uuid}) names no peek of this iteration")

    def apply_command(self, cmd: ComputeCommand) -> None:
        """Record an already-checked ``cmd``."""
        if isinstance(cmd, Hello):
            self._reset()
            self.nonce = cmd.nonce
            self._phase = Stage.CREATION
        elif isinstance(cmd, CreateInstance):
            self.config = cmd.config
            self._phase = Stage.INITIALIZATION
            for _name, gid in cmd.config.logging.index_logs:
                self.collections[gid] = CollectionRecord(
                    gid, CollectionKind.LOG_INDEX, _BOTTOM, _BOTTOM
                )
        elif isinstance(cmd, InitializationComplete):
            self._phase = Stage.READ_ONLY
        elif isinstance(cmd, UpdateConfiguration):
            self.parameters = self.parameters.update(cmd.params)
        elif isinstance(cmd, CreateDataflow):
            df = cmd.dataflow
            as_of = df.as_of if df.as_of is not None else Antichain()  # never None once checked
            exports = df.export_ids
            self.dataflows[exports] = df
            for gid, kind in _export_kinds(df):
                self.collections[gid] = CollectionRecord(gid, kind, as_of, as_of, exports)
        elif isinstance(cmd, Schedule):
            r = self.collections[cmd.id]
            self.collections[cmd.id] = CollectionRecord(
                r.id, r.kind, r.as_of, r.since, r.dataflow, True, r.writable, r.dropped
            )
        elif isinstance(cmd, AllowWrites):
            r = self.collections[cmd.id]
            self.collections[cmd.id] = CollectionRecord(
                r.id, r.kind, r.as_of, r.since, r.dataflow, r.scheduled, True, r.dropped
            )
            self._read_write = True
        elif isinstance(cmd, AllowCompaction):
            # Records are immutable (snapshots share them); the constructor beats ``replace``.
            r = self.collections[cmd.id]
            dropped = cmd.frontier.is_empty()
            self.collections[cmd.id] = CollectionRecord(
                r.id, r.kind, r.as_of, cmd.frontier, r.dataflow, r.scheduled, r.writable, dropped
            )
            if dropped:
                self.owing.add(cmd.id)
                self._settle(cmd.id)
        elif isinstance(cmd, Peek):
            self.peeks[cmd.uuid] = PeekRecord(cmd.peek)
            if cmd.peek.target == "index":
                self.holding_peeks.setdefault(cmd.peek.id, set()).add(cmd.uuid)
        elif isinstance(cmd, CancelPeek):
            self.peeks[cmd.uuid] = PeekRecord(self.peeks[cmd.uuid].peek, True)
            self._release_peek(cmd.uuid)

    def _stage_message(self, cmd: ComputeCommand, stage: Stage) -> str:
        name = type(cmd).__name__
        if stage is Stage.AWAITING_HELLO:
            return f"{name} before Hello: every iteration starts with Hello"
        if isinstance(cmd, CreateInstance):
            return f"CreateInstance in stage {stage.value}: it is sent once, right after Hello"
        if isinstance(cmd, InitializationComplete):
            return f"InitializationComplete in stage {stage.value}: it is sent once, after CreateInstance"
        return f"{name} in stage {stage.value}: it needs CreateInstance first"

    def _require_live(self, gid: GlobalId, what: str) -> CollectionRecord:
        rec = self.collections.get(gid)
        if rec is None:
            raise UnknownCollection(f"{what} names {gid}, which was not created in this iteration")
        if rec.dropped:
            raise CommandAfterDrop(f"{what} names {gid}, which was dropped (AllowCompaction to [])")
        return rec

    def _check_dataflow(self, df: DataflowDescription) -> None:
        name = f"CreateDataflow {df.debug_name!r}"
        if df.as_of is None:
            raise DataflowAsOfUnset(f"{name} has no as_of")
        seen: set[GlobalId] = set()
        for gid in df.export_ids:
            if gid in seen:
                raise DuplicateCollection(f"{name} exports {gid} twice")
            if gid in self.collections:
                raise DuplicateCollection(
                    f"{name} exports {gid}, which already exists in this iteration"
                )
            seen.add(gid)
        for imp in df.index_imports:
            rec = self._require_live(imp.id, f"{name} (index import)")
            if not rec.kind.is_index:
                raise NotAnIndex(
                    f"{name} imports {imp.id} as an index, but it is a {rec.kind.value}"
                )
            if not rec.since <= df.as_of:
                raise ImportSinceViolation(
                    f"{name} has as_of {_fmt(df.as_of)}, before the since {_fmt(rec.since)} "
                    f"of its index import {imp.id}"
                )

    # -- responses ------------------------------------------------------------------

    def check_response(self, resp: ComputeResponse) -> None:
        """Raise the :class:`ProtocolError` that ``resp`` breaks; never mutates."""
        if not self.stage.is_computation:
            raise StageViolation(
                f"{type(resp).__name__} in stage {self.stage.value}: "
                "replicas answer only after InitializationComplete"
            )
        if isinstance(resp, Frontiers):
            self._check_frontiers(resp)
        elif isinstance(resp, PeekResponse):
            self._check_peek_response(resp)
        elif isinstance(resp, SubscribeResponse):
            self._check_subscribe(resp)
        elif isinstance(resp, CopyToResponse):
            self._check_copy_to(resp)
        elif isinstance(resp, Status):
            rec = self._require_known(resp.id, "Status")
            if self.closed(rec.id):
                raise ResponseAfterClose(f"Status for {resp.id}, which has no more responses")

    def apply_response(self, resp: ComputeResponse) -> None:
        """Record an already-checked ``resp``."""
        if isinstance(resp, Frontiers):
            for kind, value in self._values(resp):
                self.reported[(resp.id, kind)] = value
            self._settle(resp.id)
        elif isinstance(resp, PeekResponse):
            self.answered.add(resp.uuid)
            self._release_peek(resp.uuid)
        elif isinstance(resp, SubscribeResponse):
            r = resp.result
            if isinstance(r, SubscribeBatch):
                self.subscribe_uppers[resp.id] = r.upper
                if r.upper.is_empty():
                    self.subscribes_ended.add(resp.id)
            else:
                self.subscribes_ended.add(resp.id)
            self._settle(resp.id)
        elif isinstance(resp, CopyToResponse):
            self.copy_tos_answered.add(resp.id)
            self._settle(resp.id)

    def _release_peek(self, uuid: _uuid.UUID) -> None:
        """Peek ``uuid`` no longer pins its collection's compaction (answered or cancelled)."""
        gid = self.peeks[uuid].peek.id
        holding = self.holding_peeks.get(gid)
        if holding is not None:
            holding.discard(uuid)
            if not holding:
                del self.holding_peeks[gid]

    def _settle(self, gid: GlobalId) -> None:
        """Forget ``gid`` from :attr:`owing` once it owes nothing more."""
        if (
            gid in self.owing
            and not self.owed_empty_frontiers(gid)
            and not self.owes_dropped_at(gid)
            and not self.owes_copy_to_dropped(gid)
        ):
            self.owing.discard(gid)

    @staticmethod
    def _values(resp: Frontiers) -> list[tuple[FrontierKind, Antichain]]:
        pairs = [
            (FrontierKind.WRITE, resp.write),
            (FrontierKind.INPUT, resp.input),
            (FrontierKind.OUTPUT, resp.output),
        ]
        return [(k, v) for k, v in pairs if v is not None]

    def reported_empty(self, gid: GlobalId, kind: FrontierKind) -> bool:
        """Whether ``gid`` has reported ``[]`` for ``kind`` (so nothing more may follow)."""
        last = self.reported.get((gid, kind))
        return last is not None and last.is_empty()

    @staticmethod
    def _bottom_for(as_of: Antichain) -> Antichain:
        if as_of.is_empty():
            return _BOTTOM
        return Antichain.bottom(minimum(as_of.elements[0]))

    def _require_known(self, gid: GlobalId, what: str) -> CollectionRecord:
        rec = self.collections.get(gid)
        if rec is None:
            raise UnknownCollection(f"{what} for {gid}, which was not created in this iteration")
        return rec

    def _check_frontiers(self, resp: Frontiers) -> None:
        rec = self._require_known(resp.id, "Frontiers")
        if rec.kind is CollectionKind.COPY_TO:
            raise FrontiersForCopyTo(f"Frontiers for copy-to {resp.id}")
        if not rec.kind.reports_frontiers:
            raise FrontiersForSubscribe(f"Frontiers for subscribe {resp.id}")
        for kind, value in self._values(resp):
            problem = self.frontier_problem(rec, kind, value)
            if problem is not None:
                error, template = problem
                what = f"{kind.value} frontier {_fmt(value)} of {resp.id}"
                raise error(template.replace("{what}", what))

    def frontier_problem(
        self, rec: CollectionRecord, kind: FrontierKind, value: Antichain
    ) -> tuple[type[ProtocolError], str] | None:
        """Why reporting ``value`` for ``rec``'s ``kind`` now breaks a rule, or ``None`` if it does not.

        The one statement of the frontier-report rules. The message template
        names the report as ``{what}``; it is only filled in when a rule is
        broken (this runs for every report on hot paths).
        """
        last = self.reported.get((rec.id, kind))
        if last is not None and last.is_empty():
            return ResponseAfterClose, "{what} after it was reported []"
        if self.exact and rec.dropped and not value.is_empty():
            return ResponseAfterDrop, "{what} after the drop: only [] may follow"
        if last is None:
            if not rec.as_of <= value:
                return (
                    FrontierBeforeAsOf,
                    f"first {{what}} is not at least the as_of {_fmt(rec.as_of)}",
                )
        elif not last < value:
            return (
                FrontierRegression,
                f"{{what}} is not strictly greater than the last report {_fmt(last)}",
            )
        return None

    def _check_peek_response(self, resp: PeekResponse) -> None:
        rec = self.peeks.get(resp.uuid)
        if rec is None:
            raise UnknownPeek(
                f"PeekResponse for {resp.uuid}, which no Peek of this iteration carried"
            )
        if resp.uuid in self.answered:
            raise DuplicatePeekResponse(f"second PeekResponse for peek {resp.uuid}")
        r = resp.result
        if isinstance(r, PeekCanceled) and not rec.cancel_requested:
            raise UnrequestedCancel(f"PeekCanceled for peek {resp.uuid}, which no CancelPeek named")
        if isinstance(r, PeekRows):
            for row, count in r.rows:
                if type(count) is not int or count <= 0:
                    raise InvalidPeekRows(
                        f"peek {resp.uuid} answers row {row!r} with multiplicity {count!r}"
                    )

    def _check_subscribe(self, resp: SubscribeResponse) -> None:
        gid = resp.id
        rec = self._require_known(gid, "SubscribeResponse")
        if rec.kind is not CollectionKind.SUBSCRIBE:
            raise NotASubscribe(f"SubscribeResponse for {gid}, a {rec.kind.value}")
        if gid in self.subscribes_ended:
            raise ResponseAfterClose(f"SubscribeResponse for {gid} after its stream ended")
        expected = self.subscribe_next_lower(gid)
        r = resp.result
        if isinstance(r, SubscribeDroppedAt):
            if not rec.dropped:
                raise UnrequestedDroppedAt(f"DroppedAt for subscribe {gid}, which was not dropped")
            if r.frontier != expected:
                raise DroppedAtMismatch(
                    f"DroppedAt({_fmt(r.frontier)}) for subscribe {gid}: "
                    f"its last upper is {_fmt(expected)}"
                )
            return
        if self.exact and rec.dropped:
            raise ResponseAfterDrop(
                f"batch for subscribe {gid} after its drop: only DroppedAt may follow"
            )
        lower, upper = r.lower, r.upper
        span = f"batch [{_fmt(lower)}, {_fmt(upper)}) of subscribe {gid}"
        if lower != expected:
            raise SubscribeGap(f"{span} does not start at {_fmt(expected)}")
        if not lower < upper:
            raise SubscribeGap(f"{span} is empty: its lower must be strictly less than its upper")
        if gid not in self.subscribe_uppers and not rec.as_of <= upper:
            raise FrontierBeforeAsOf(f"first {span} ends before the as_of {_fmt(rec.as_of)}")
        seen: set[tuple[Any, Any]] = set()
        for t, row, diff in r.updates:
            if not (lower.less_equal(t) and not upper.less_equal(t) and rec.as_of.less_equal(t)):
                raise SubscribeUpdateOutOfRange(
                    f"{span} has an update at time {t}, outside the batch or before the as_of "
                    f"{_fmt(rec.as_of)}"
                )
            if diff == 0 or (t, row) in seen:
                raise SubscribeNotConsolidated(
                    f"{span} is not consolidated at time {t}, row {row!r}"
                )
            seen.add((t, row))

    def _check_copy_to(self, resp: CopyToResponse) -> None:
        gid = resp.id
        rec = self._require_known(gid, "CopyToResponse")
        if rec.kind is not CollectionKind.COPY_TO:
            raise NotACopyTo(f"CopyToResponse for {gid}, a {rec.kind.value}")
        if gid in self.copy_tos_answered:
            raise DuplicateCopyToResponse(f"second CopyToResponse for copy-to {gid}")
        if isinstance(resp.result, CopyToDropped):
            if not rec.dropped:
                raise UnrequestedCopyToDropped(
                    f"CopyToDropped for copy-to {gid}, which was not dropped"
                )
        elif self.exact and rec.dropped:
            raise ResponseAfterDrop(
                f"{type(resp.result).__name__} for copy-to {gid} after its drop: "
                "only CopyToDropped may follow"
            )
