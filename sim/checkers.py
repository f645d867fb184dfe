"""The online checkers: safety after every step, liveness at the end, "sometimes" counters.

:class:`Checker` observes every effect the driver hands out and the world's
state at regular virtual intervals. A broken property raises
:class:`StopRun` with a :class:`~tidegate.sim.history.Violation` (a one-line
statement); the run then reports the seed, the plan and the trace tail.

Safety: peek answers equal the reference evaluation at the peek's time over
the storage model's data; one result per peek; subscribe streams are
gap-free and accumulate to the reference; controller-reported frontiers
(compute read/write per collection, storage since/upper) never regress; no
since passes a pending peek's hold and no shard since passes the
controller's; a read below a since is refused (see the clients); a response
from an old epoch has no effect; acknowledged appends are in storage.
Liveness (after the quiet phase): every peek answered, every live
collection's write frontier caught up with its inputs' uppers at the start
of the quiet phase.

Across a controller restart ("never regress", precisely): durable
collections -- tables and materialized-view outputs, whose since and upper
live in their shards -- keep one monotone since and upper across every
controller incarnation (the storage ``SinceChanged``/``UpperChanged`` checks
are never reset). Compute frontiers (an index's or a dataflow's since and
write frontier) are in-memory controller state: they are monotone within an
incarnation, and a restored dataflow restarts at its as_of, which must be at
or after the durable since of every input it reads (checked at the restore:
``restored_as_of_readable``) and, for a materialized view, at or after its
output's durable since; so the per-incarnation checks start afresh. A peek
pending at the restart is answered exactly once, by the failure "controller
restarted"; a result for it afterwards is a second result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tidegate.spec.compute import (
    FrontierUpper,
    PeekResultOut,
    ReplicaStatusEvent,
    SubscribeBatchOut,
)
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.responses import PeekCanceled, PeekError, PeekRows
from tidegate.spec.storage import AppendCompleted, CollectionDropped, SinceChanged, UpperChanged

from .clients import INSTANCE, RESTARTED, Clients, Installed
from .driver import Observer
from .history import ClientHistory, ReferenceModel, Violation, results_agree
from .kernel import Kernel
from .storage import SimStorage

__all__ = ["Checker", "StopRun", "frontier_text"]


def frontier_text(f: Antichain) -> str:
    """A frontier as the trace writes it: ``[3]``, ``[]`` (a plain string keeps trace lines cheap)."""
    return "[" + ", ".join(map(str, f.elements)) + "]"


class StopRun(Exception):
    """Raised to stop a run at a violation."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


class _Stream:
    __slots__ = ("acc", "closed", "next_lower")

    def __init__(self, as_of: int) -> None:
        self.next_lower = Antichain([as_of])
        self.acc: dict[Any, int] = {}
        self.closed = False


class Checker(Observer):
    """See the module docstring."""

    def __init__(
        self,
        kernel: Kernel,
        storage: SimStorage,
        history: ClientHistory,
        record: Callable[..., None],
        count: Callable[[str], None],
    ) -> None:
        self._kernel = kernel
        self._storage = storage
        self._history = history
        self._record = record
        self._count = count
        self.clients: Clients | None = None
        self.model = ReferenceModel()
        self.results: Counter[Any] = Counter()
        self.streams: dict[GlobalId, _Stream] = {}
        self.compute_frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        self.reported_upper: dict[GlobalId, Antichain] = {}
        self.storage_upper: dict[GlobalId, Antichain] = {}
        self.storage_since: dict[GlobalId, Antichain] = {}
        self.peek_since: dict[Any, Antichain] = {}
        self.dropped: set[GlobalId] = set()
        self.subscribe_batches = 0

    def violate(self, property: str, message: str) -> None:
        raise StopRun(Violation(property, message, self._kernel.now_ms))

    def controller_died(self) -> None:
        """Before the clients forget them: the dead controller's peeks count as answered, its
        subscribes end with a failure that closes their streams (gap-free: from where they were)."""
        assert self.clients is not None
        now = self._kernel.now_ms
        for uid in sorted(self.clients.peeks):
            self.results[uid] += 1
            self.peek_since.pop(uid, None)
        for gid in sorted(self.streams):
            s = self.streams[gid]
            if not s.closed and gid in self.clients.installed:
                s.closed = True
                self._history.subscribe_batch(
                    gid, s.next_lower, Antichain.empty(), (), RESTARTED, now
                )
                s.next_lower = Antichain.empty()

    def controller_restored(self, shards: dict[GlobalId, tuple[Antichain, Antichain]]) -> None:
        """A new incarnation: compute frontiers start afresh, but every restored dataflow must
        start where all of its inputs (and a materialized view's output) are readable."""
        assert self.clients is not None
        self.compute_frontiers.clear()
        self.reported_upper = {g: u for g, u in self.reported_upper.items() if g in shards}
        for gid in sorted(self.clients.restored):
            as_of = self.clients.restored[gid]
            inst = self.clients.installed.get(gid)
            reads = list(inst.inputs) if inst is not None else []
            if inst is not None and inst.spec.kind == "materialized_view":
                reads.append(gid)
            for i in reads:
                since = shards[i][0]
                if not since.less_equal(as_of):
                    self.violate(
                        "restored_as_of_readable",
                        f"{gid} restored at as_of {as_of}, before the durable since {since} of {i}",
                    )

    def attach(self, clients: Clients) -> None:
        self.clients = clients
        for t in clients.tables:
            self.model.tables[t] = []
        clients.on_install = self.on_install
        clients.on_restore = self.controller_restored

    def on_install(self, inst: Installed) -> None:
        self.model.install(inst.id, inst.spec)
        if inst.spec.kind == "subscribe":
            self.streams[inst.id] = _Stream(inst.as_of)

    def _refresh(self) -> None:
        for t in list(self.model.tables):
            self.model.tables[t] = self._storage.updates(t)

    # -- effects -------------------------------------------------------------------------------
    def on_effect(self, e: Any) -> None:
        if isinstance(e, PeekResultOut):
            self._peek_result(e)
        elif isinstance(e, SubscribeBatchOut):
            self._subscribe_batch(e)
        elif isinstance(e, FrontierUpper):
            prev = self.reported_upper.get(e.id)
            if prev is not None and not prev <= e.upper:
                self.violate(
                    "frontiers_monotone", f"write frontier of {e.id} regressed {prev} -> {e.upper}"
                )
            self.reported_upper[e.id] = e.upper
            self._record("upper", id=e.id, upper=frontier_text(e.upper))
        elif isinstance(e, UpperChanged):
            prev = self.storage_upper.get(e.id)
            if prev is not None and not prev <= e.upper:
                self.violate(
                    "frontiers_monotone", f"storage upper of {e.id} regressed {prev} -> {e.upper}"
                )
            self.storage_upper[e.id] = e.upper
            self._record("storage_upper", id=e.id, upper=frontier_text(e.upper))
        elif isinstance(e, SinceChanged):
            prev = self.storage_since.get(e.id)
            if prev is not None and not prev <= e.since:
                self.violate(
                    "frontiers_monotone", f"storage since of {e.id} regressed {prev} -> {e.since}"
                )
            self.storage_since[e.id] = e.since
            self._record("since", id=e.id, since=frontier_text(e.since))
        elif isinstance(e, AppendCompleted):
            assert self.clients is not None
            self.clients.on_append_completed(e.ticket, e.error is None)
        elif isinstance(e, ReplicaStatusEvent):
            self._record("replica_status", replica=e.replica, status=e.status, epoch=e.epoch)
        elif isinstance(e, CollectionDropped):
            self.dropped.add(e.id)
            self._record("collection_dropped", id=e.id)

    def on_stale_response(self, replica: str, epoch: int, effects: Sequence[Any]) -> None:
        self._count("stale_response")
        if effects:
            self.violate(
                "old_epoch_no_effect",
                f"a response on {replica}'s old epoch {epoch} caused {[type(e).__name__ for e in effects]}",
            )

    def _peek_result(self, e: PeekResultOut) -> None:
        assert self.clients is not None
        uid = e.uuid
        self.results[uid] += 1
        self._record("peek_result", uuid=str(uid), result=type(e.result).__name__)
        if self.results[uid] > 1:
            self.violate("one_result_per_peek", f"peek {uid} got {self.results[uid]} results")
        pending = self.clients.peeks.pop(uid, None)
        if pending is None:
            self.violate("one_result_per_peek", f"result for a peek no client issued: {uid}")
            return
        self._history.peek_result(str(uid), e.result, self._kernel.now_ms)
        finishing = self.clients.peek_finishing.pop(uid)
        r = e.result
        if isinstance(r, PeekRows):
            self._refresh()
            want = self.model.peek(pending.id, pending.time, finishing)
            if not results_agree(r, want, finishing):
                self.violate(
                    "peek_matches_reference",
                    f"peek of {pending.id} at {pending.time} returned {_short(r)}, reference {_short(want)}",
                )
        elif isinstance(r, PeekCanceled):
            if not pending.cancelled and pending.id in self.clients.installed:
                self.violate(
                    "peek_answered",
                    f"peek {uid} of {pending.id} was canceled but no client canceled it",
                )
        elif isinstance(r, PeekError):
            if pending.id in self.clients.installed or pending.id in self.clients.tables:
                self._refresh()
                want = self.model.peek(pending.id, pending.time, finishing)
                if want != r:
                    self.violate(
                        "peek_matches_reference",
                        f"peek of {pending.id} at {pending.time} failed: {r.message}",
                    )
            else:
                self._count("peek_error_after_drop")

    def _subscribe_batch(self, e: SubscribeBatchOut) -> None:
        self.subscribe_batches += 1
        self._history.subscribe_batch(
            e.id, e.lower, e.upper, e.updates, e.error, self._kernel.now_ms
        )
        s = self.streams.get(e.id)
        if s is None:
            self.violate("subscribe_gap_free", f"batch for unknown subscribe {e.id}")
            return
        if s.closed:
            self.violate(
                "subscribe_gap_free",
                f"subscribe {e.id} emitted after its end: {e.lower}..{e.upper}",
            )
        if e.lower != s.next_lower:
            self.violate(
                "subscribe_gap_free",
                f"subscribe {e.id}: batch {e.lower}..{e.upper} after {s.next_lower}",
            )
        s.next_lower = e.upper
        if e.error is not None or not e.upper.elements:
            s.closed = True
            if e.error is not None:
                self._count("subscribe_error")
            return
        for t, row, d in e.updates:
            if not e.lower.less_equal(t) or e.upper.less_equal(t):
                self.violate(
                    "subscribe_gap_free",
                    f"subscribe {e.id}: update at {t} outside {e.lower}..{e.upper}",
                )
            n = s.acc.get(row, 0) + d
            if n:
                s.acc[row] = n
            else:
                s.acc.pop(row, None)
        if e.updates:
            self._check_stream(e.id, s, e.upper.elements[0])

    def _check_stream(self, id: GlobalId, s: _Stream, upper: int) -> None:
        self._refresh()
        want = self.model.contents(id, upper - 1).rows
        if s.acc != want:
            self.violate(
                "subscribe_matches_reference",
                f"subscribe {id} accumulates to {_rows(s.acc)} at upper {upper}, reference {_rows(want)}",
            )

    # -- periodic invariants ---------------------------------------------------------------------
    def check_state(self) -> None:
        """Frontiers never regress; no since passes a pending peek's hold or the controller's since."""
        assert self.clients is not None
        if not self.clients.controller_up:
            return
        ctl = self.clients.ctl
        for gid in sorted(self.clients.installed):
            try:
                f = ctl.collection_frontiers(INSTANCE, gid)
            except TidegateError:
                continue
            prev = self.compute_frontiers.get(gid)
            if prev is not None:
                if not prev[0] <= f.read_frontier:
                    self.violate(
                        "frontiers_monotone",
                        f"since of {gid} regressed {prev[0]} -> {f.read_frontier}",
                    )
                if not prev[1] <= f.write_frontier:
                    self.violate(
                        "frontiers_monotone",
                        f"upper of {gid} regressed {prev[1]} -> {f.write_frontier}",
                    )
            self.compute_frontiers[gid] = (f.read_frontier, f.write_frontier)
        for uid in sorted(self.clients.peeks):
            p = self.clients.peeks[uid]
            fr = self.clients.frontiers(p.id, p.target)
            if fr is None:
                continue
            since = fr[0]
            if not since.less_equal(p.time) and p.id in self.clients.installed:
                self.violate(
                    "since_respects_holds",
                    f"since {since} of {p.id} passed pending peek {uid} at {p.time}",
                )
            first = self.peek_since.setdefault(uid, since)
            if first != since:
                self._count("compaction_during_peek")
                self.peek_since[uid] = since
        for t in self.clients.tables:
            fr = ctl.storage_frontiers(t)
            if fr is None or not self._storage.has(t):
                continue
            shard_since = self._storage.state(t).since
            if not shard_since <= fr[0]:
                self.violate(
                    "since_respects_holds",
                    f"shard since {shard_since} of {t} passed the controller's {fr[0]}",
                )

    # -- the end ----------------------------------------------------------------------------------
    def check_end(self, input_uppers: dict[GlobalId, Antichain]) -> None:
        """Liveness after the quiet phase, and acknowledged appends are durable."""
        assert self.clients is not None
        if self.clients.peeks:
            uid = sorted(self.clients.peeks)[0]
            p = self.clients.peeks[uid]
            self.violate(
                "liveness_peeks_answered",
                f"{len(self.clients.peeks)} peek(s) unanswered after the quiet phase, e.g. {p.id} at {p.time}",
            )
        ctl = self.clients.ctl
        for gid in sorted(self.clients.installed):
            inst = self.clients.installed[gid]
            target = Antichain.meet_all([input_uppers[i] for i in inst.inputs])
            try:
                f = ctl.collection_frontiers(INSTANCE, gid)
            except TidegateError:
                continue
            if not target <= f.write_frontier:
                self.violate(
                    "liveness_frontiers_catch_up",
                    f"{inst.spec.name} ({gid}) is at {f.write_frontier}, inputs were at {target} when faults stopped",
                )
        for table, ts, updates in self.clients.acked:
            stored = Counter((r, t, d) for r, t, d in self._storage.updates(table) if t == ts)
            for r, d in updates:
                if stored[(r, ts, d)] <= 0:
                    self.violate(
                        "acknowledged_appends_durable",
                        f"acknowledged {r} at {ts} in {table} is lost",
                    )
                stored[(r, ts, d)] -= 1
        for gid in sorted(self.streams):
            s = self.streams[gid]
            if not s.closed and gid in self.clients.installed and s.next_lower.elements:
                upper = s.next_lower.elements[0]
                if upper > self.clients.installed[gid].as_of:
                    self._check_stream(gid, s, upper)


def _rows(rows: dict[Any, int]) -> str:
    items = sorted(rows.items(), key=repr)
    more = f" (+{len(items) - 5} more)" if len(items) > 5 else ""
    return repr(items[:5]) + more


def _short(r: Any) -> str:
    if isinstance(r, PeekRows):
        return _rows(dict(r.rows)) if len(r.rows) > 5 else repr(list(r.rows))
    return repr(r)
