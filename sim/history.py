"""What clients saw, as JSON-able data, and the offline checker that judges it.

A :class:`ClientHistory` records every client operation as Jepsen does: its
invocation and its completion, each with a position in one global order
(``invoke``/``complete``: real time, as the clients experienced it) and the
virtual millisecond, and its outcome -- ``ok``, ``fail`` (a typed refusal:
nothing happened) or ``info`` (the outcome is unknown: the controller died
first). Appends carry the write timestamp the API returned; peeks their
rows; subscribes their batches.

:func:`check_history` judges a history with nothing but the history and the
scenario (so a real run's history is checked by the same code):

* every answer equals the reference evaluator's at one timestamp: a peek at
  an explicit time at that time; a fresh peek (no time given) at *some*
  time ``t`` in ``[lo, hi)``, where ``lo`` is the largest timestamp of any
  append acknowledged, or fresh read answered, before the peek started
  (a read sees every write that completed before it began), and ``hi`` the
  smallest timestamp of an append that started after the peek returned --
  Materialize's strict serializability, checked as real-time order;
* a subscribe starts (its first batch's lower) in that same window, its
  batches are gap-free and accumulate to the reference at every upper;
* an append acknowledged before another started has the smaller timestamp
  (a retry with a request id answers its original's time: it is exempt);
* a peek has one outcome; expected refusals are typed refusals.

An append whose outcome is unknown counts as landed at its ``time`` if the
simulator resolved it so (it reads what really reached the disk), and is
left out otherwise.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.errors import EvaluationError, PlanError
from tidegate.spec.frontier import Antichain, Row, Update, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    Collection,
    Get,
    Plan,
    TemporalFilter,
    evaluate,
    gets,
    plan_from_dict,
    reference_peek,
    replace_gets,
)
from tidegate.spec.plan.relation import children
from tidegate.spec.plan.scalar_eval import compile_scalar
from tidegate.spec.plan.temporal import bound_millis
from tidegate.spec.protocol.responses import PeekResult, PeekRows
from tidegate.spec.protocol.types import ColumnOrder, RowSetFinishing

from .scenario import Scenario

__all__ = [
    "OFFLINE_PREFIX",
    "ClientHistory",
    "ReferenceModel",
    "Violation",
    "Windows",
    "appended",
    "check_history",
    "finishing_from_json",
    "finishing_to_json",
    "history_model",
    "judge_peek",
    "results_agree",
    "subscription_id",
]

OFFLINE_PREFIX = "history:"
"""Prefix of a violation found by the offline history checker (:func:`check_history`)."""


@dataclass(frozen=True)
class Violation:
    """A broken property: its name, a one-line statement, and the virtual time it was seen."""

    property: str
    message: str
    at_ms: int

    def __str__(self) -> str:
        return f"[{self.property}] at {self.at_ms} ms: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"property": self.property, "message": self.message, "at_ms": self.at_ms}


# -- JSON forms ------------------------------------------------------------------------------


def row_out(row: Row) -> list[Any]:
    return list(row)


def row_in(row: Iterable[Any]) -> Row:
    return tuple(row)


def finishing_to_json(f: RowSetFinishing) -> dict[str, Any]:
    return {
        "order_by": [[o.column, o.desc, o.nulls_last] for o in f.order_by],
        "limit": f.limit,
        "offset": f.offset,
        "project": None if f.project is None else list(f.project),
    }


def finishing_from_json(d: Mapping[str, Any]) -> RowSetFinishing:
    return RowSetFinishing(
        order_by=tuple(ColumnOrder(int(c), bool(de), bool(nl)) for c, de, nl in d["order_by"]),
        limit=d["limit"],
        offset=int(d["offset"]),
        project=None if d["project"] is None else tuple(d["project"]),
    )


def results_agree(got: PeekResult, want: PeekResult, finishing: RowSetFinishing) -> bool:
    """Whether a peek answer equals the reference (row order matters only under ORDER BY)."""
    if got == want:
        return True
    unordered = not finishing.order_by and finishing.limit is None and finishing.offset == 0
    if unordered and isinstance(got, PeekRows) and isinstance(want, PeekRows):
        return dict(got.rows) == dict(want.rows)
    return False


# -- the reference -----------------------------------------------------------------------------


class ReferenceModel:
    """What a collection holds at a time, by the reference evaluator over table updates.

    ``tables`` maps each table id to its updates (a live list may grow, by appending);
    ``plans`` each derived collection's plan. Results are cached per
    (collection, time): callers only ask about times every input has passed,
    where the contents are final (:meth:`forget_cache` when they may not be).
    They are also shared between times at which the inputs held the same updates:
    a collection is evaluated again only when one of its tables changed (most reads
    come between two changes: tables tick without data) -- except a collection with a
    temporal filter, whose contents also change when a row's bound passes
    (:meth:`moments`).
    """

    def __init__(self, tables: Mapping[GlobalId, list[Update]] | None = None) -> None:
        self.tables: dict[GlobalId, list[Update]] = dict(tables or {})
        self.plans: dict[GlobalId, Plan] = {}
        self._cache: dict[tuple[GlobalId, int], Collection] = {}
        self._by_updates: dict[tuple[Hashable, tuple[tuple[int, int], ...]], Collection] = {}
        self._times: dict[GlobalId, tuple[list[Update], int, list[int]]] = {}
        self._inputs: dict[GlobalId, tuple[GlobalId, ...]] = {}
        self._moments: dict[tuple[GlobalId, int, int, int | None], list[int]] = {}
        self._filters: dict[GlobalId, list[TemporalFilter]] = {}
        self._shapes: dict[GlobalId, tuple[Plan | None, Hashable]] = {}

    def install(self, id: GlobalId, plan: Plan) -> None:
        known = id in self.plans or any(id in v for v in self._inputs.values())
        self.plans[id] = plan
        if known:  # a new id changes nothing cached (SQL queries install one each)
            self._inputs.clear()
            self._by_updates.clear()
            self._moments.clear()
        self._filters.pop(id, None)

    def inputs(self, id: GlobalId) -> set[GlobalId]:
        """The tables ``id`` reads (itself, for a table)."""
        plan = self.plans.get(id)
        if plan is None:
            return {id}
        out: set[GlobalId] = set()
        for g in gets(plan):
            out |= self.inputs(g)
        return out

    def _held(self, table: GlobalId, time: int) -> tuple[int, int]:
        """Which of ``table``'s updates count at ``time``: how many there are, and the
        greatest time among them. As updates are only appended, two (time, moment) pairs
        with the same answer see the same updates: those up to that greatest time."""
        updates = self.tables.get(table, [])
        known = self._times.get(table)
        if known is None or known[0] is not updates or known[1] > len(updates):
            known = (updates, 0, [])
        _, seen, times = known
        if seen < len(updates):
            times = sorted([*times, *(u[1] for u in updates[seen:])])
            self._times[table] = (updates, len(updates), times)
        n = bisect.bisect_right(times, time)
        return n, (times[n - 1] if n else -1)

    def contents(self, id: GlobalId, time: int) -> Collection:
        key = (id, time)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        inputs = self._inputs.get(id)
        if inputs is None:
            inputs = self._inputs[id] = tuple(sorted(self.inputs(id)))
        held = (self._shape(id), tuple(self._held(t, time) for t in inputs))
        if self._temporal_filters(id):  # its contents change with time alone
            held = (held[0], (*held[1], (time, time)))
        out = self._by_updates.get(held)
        if out is None:
            plan = self.plans.get(id)
            if plan is None:
                out = Collection(accumulate(self.tables.get(id, []), time))
            else:
                out = evaluate(plan, self.tables, time)
            self._by_updates[held] = out
        self._cache[key] = out
        return out

    def _shape(self, id: GlobalId) -> Hashable:
        """What ``id``'s contents are a function of, besides its tables' updates: its plan
        (reads of one query, by several ids, are evaluated once), else the table itself."""
        hit = self._shapes.get(id)
        if hit is None or hit[0] is not self.plans.get(id):
            plan = self.plans.get(id)
            key: Hashable = id
            if plan is not None:
                try:
                    hash(plan)
                    key = plan
                except TypeError:  # a plan holding something unhashable: by its id
                    pass
            hit = self._shapes[id] = (plan, key)
        return hit[1]

    def _temporal_filters(self, id: GlobalId) -> list[TemporalFilter]:
        hit = self._filters.get(id)
        if hit is not None:
            return hit
        plan = self.plans.get(id)
        found: list[TemporalFilter] = []
        if plan is None:
            return found
        stack = [plan]
        while stack:
            p = stack.pop()
            if isinstance(p, TemporalFilter):
                found.append(p)
            stack.extend(children(p))
        self._filters[id] = found
        return found

    def moments(
        self, id: GlobalId, change_times: ChangeTimes, lo: int = 0, hi: int | None = None
    ) -> list[int]:
        """The times in ``(lo, hi)`` at which a temporal filter of ``id`` may admit or drop a
        row with no table changing: each bound, and one past it, of every row its input holds
        at some time of ``[lo, hi)`` (found by evaluating the input at ``lo`` and at every time
        in ``(lo, hi)`` a table changes: between two changes the input stays as it was)."""
        filters = self._temporal_filters(id)
        if not filters:
            return []
        tables = sorted(self.inputs(id))
        key = (id, sum(len(self.tables.get(t, [])) for t in tables), lo, hi)
        hit = self._moments.get(key)
        if hit is not None:
            return hit
        times = sorted(
            {
                lo,
                *(
                    t
                    for table in tables
                    for t in change_times(table)
                    if lo < t and (hi is None or t < hi)
                ),
            }
        )
        out: set[int] = set()
        for f in filters:
            rows: set[Row] = set()
            if isinstance(f.input, Get) and f.input.id in self.tables:
                rows = {u[0] for u in self.tables[f.input.id]}
            else:
                for t in times:
                    try:
                        rows.update(evaluate(f.input, self.tables, t).rows)
                    except PlanError:
                        break  # an input it cannot evaluate alone: no moments of its own
            for row in rows:
                for _op, e in f.predicates:
                    try:
                        v = bound_millis(compile_scalar(e)(row))
                    except (EvaluationError, TypeError):
                        continue
                    if v is not None:
                        out.update(m for m in (v, v + 1) if lo < m and (hi is None or m < hi))
        found = sorted(out)
        self._moments[key] = found
        return found

    def peek(
        self,
        id: GlobalId,
        time: int,
        finishing: RowSetFinishing,
        key: tuple[tuple[int, ...], Row] | None = None,
    ) -> PeekResult:
        """The reference answer of a peek; ``key`` = (columns, values) of a key lookup."""
        contents = self.contents(id, time)
        if key is not None:
            cols, values = key
            contents = Collection(
                {r: n for r, n in contents.rows.items() if tuple(r[c] for c in cols) == values}
            )
        return reference_peek(contents, finishing)

    def forget_cache(self, since: int | None = None) -> None:
        """Forget cached contents (at times ``since`` and later only, if given): new data landed."""
        if since is None:
            self._cache.clear()
        else:
            self._cache = {k: v for k, v in self._cache.items() if k[1] < since}


# -- the history ------------------------------------------------------------------------------


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0]


@dataclass
class ClientHistory:
    """Every client operation, in order, as JSON-able dicts (``"op"`` says which).

    ``append`` {n, batches: [[table, [[row, diff], ...]], ...], status, time?, error?};
    ``peek`` {n, target, at (null: fresh), finishing, key?, status, rows? | error?};
    ``subscribe`` {n, id, target, status, error?} and ``batch`` {sub, lower, upper,
    updates: [[time, row, diff]], error}; ``create`` {n, name, kind, status, id?};
    ``drop`` {n, id, status}; ``policy`` {n, target, lag_ms, granularity_ms, status}: a lag
    read policy set (by an action, or by the clients' setup of tables and indexes);
    ``hydration`` {n, target, status, hydrated?}; ``copy_to`` {n, target, name, at (null:
    fresh), url, status, rows_written?, time?: the time its files were written at};
    ``table`` {name, id, schema?}: a table and its id; ``install`` {id, name, kind,
    inputs?}: a dataflow known to exist (created, or found after a restart), whose plan the
    scenario names (``inputs``: the catalog ids of the sources it reads, by scenario id);
    ``restart`` {generation}: a new controller came up; ``source`` {name, id, source,
    upstream}: a source and its id (``name`` is its scenario id); ``sink`` {name, id, input,
    target}; ``source_data`` {id, updates: [[time, row, diff]]}: what landed in a source's
    shard (noted at the end of a run: the reference of reads of sources).
    Every op has ``invoke``/``invoke_ms`` and, once done, ``complete``/``complete_ms``;
    events without an invocation have ``at``/``at_ms``.
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    completed: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """Operations in the order they completed (not saved: the positions say it)."""
    _seq: int = field(default=0, repr=False)
    _n: int = field(default=0, repr=False)

    def tick(self) -> int:
        """The next position in the global order."""
        self._seq += 1
        return self._seq

    # -- recording ------------------------------------------------------------------------------
    def invoke(self, op: str, at_ms: int, **fields: Any) -> dict[str, Any]:
        """Record the invocation of ``op``; complete it with :meth:`ok`, :meth:`fail` or :meth:`info`."""
        self._n += 1
        ev: dict[str, Any] = {"op": op, "n": self._n, **fields}
        ev["status"] = "pending"
        ev["invoke"] = self.tick()
        ev["invoke_ms"] = at_ms
        self.events.append(ev)
        return ev

    def _complete(self, ev: dict[str, Any], status: str, at_ms: int) -> None:
        ev["status"] = status
        ev["complete"] = self.tick()
        ev["complete_ms"] = at_ms
        self.completed.append(ev)

    def ok(self, ev: dict[str, Any], at_ms: int, **fields: Any) -> None:
        ev.update(fields)
        self._complete(ev, "ok", at_ms)

    def fail(self, ev: dict[str, Any], at_ms: int, error: BaseException | str) -> None:
        """The operation was refused: it had no effect."""
        ev["error"] = error if isinstance(error, str) else _error_text(error)
        self._complete(ev, "fail", at_ms)

    def info(self, ev: dict[str, Any], at_ms: int, why: str) -> None:
        """The operation's outcome is unknown (the controller died before it answered)."""
        ev["error"] = why
        self._complete(ev, "info", at_ms)

    def note(self, op: str, at_ms: int, **fields: Any) -> dict[str, Any]:
        """An event without an invocation (a table's id, a restart, a subscribe batch...)."""
        ev: dict[str, Any] = {"op": op, **fields, "at": self.tick(), "at_ms": at_ms}
        self.events.append(ev)
        return ev

    def batch(
        self,
        sub: int,
        lower: Antichain,
        upper: Antichain,
        updates: Iterable[tuple[int, Row, int]],
        error: str | None,
        at_ms: int,
    ) -> None:
        self.note(
            "batch",
            at_ms,
            sub=sub,
            lower=list(lower.elements),
            upper=list(upper.elements),
            updates=[[t, row_out(r), d] for t, r, d in updates],
            error=error,
        )

    def to_json(self) -> dict[str, Any]:
        return {"version": 2, "events": self.events}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientHistory:
        h = cls()
        h.events = [dict(e) for e in data["events"]]
        h._seq = max(
            (int(e.get("complete", e.get("invoke", e.get("at", 0)))) for e in h.events), default=0
        )
        h._n = max((int(e.get("n", 0)) for e in h.events), default=0)
        return h

    def ops(self, op: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["op"] == op]


# -- the offline checker -------------------------------------------------------------------------


def subscription_id(ev: Mapping[str, Any]) -> GlobalId:
    """The reference model's id of the subscribe op ``ev`` (unique in a history; the runtime's
    transient ids start over with each controller incarnation)."""
    return GlobalId.transient(1_000_000_000 + int(ev["n"]))


def appended(ev: Mapping[str, Any]) -> bool:
    """Whether an append op's writes count as having landed."""
    return ev["status"] == "ok" or (ev["status"] == "info" and bool(ev.get("landed")))


class Windows:
    """The real-time bounds of fresh reads (see the module docstring).

    Fed with acknowledged appends (``ack``: completion position and timestamp),
    appends that landed (``started``: invocation position and timestamp) and
    judged fresh reads (``read_done``); asked for a read's ``lo`` and ``hi``.
    """

    def __init__(self) -> None:
        self._acks: list[tuple[int, int]] = []
        self._ack_max: list[int] = []
        self._starts: list[tuple[int, int]] = []
        self._start_min: list[int] | None = []
        self._reads: list[tuple[int, int]] = []
        self._read_max: list[int] = []

    @staticmethod
    def _insert(items: list[tuple[int, int]], prefix: list[int], item: tuple[int, int]) -> None:
        pos = bisect.bisect_left(items, item)
        items.insert(pos, item)
        best = prefix[pos - 1] if pos else -1
        del prefix[pos:]
        for _, value in items[pos:]:
            best = max(best, value)
            prefix.append(best)

    def ack(self, complete: int, ts: int) -> None:
        self._insert(self._acks, self._ack_max, (complete, ts))

    def read_done(self, complete: int, t: int) -> None:
        self._insert(self._reads, self._read_max, (complete, t))

    def started(self, invoke: int, ts: int) -> None:
        bisect.insort(self._starts, (invoke, ts))
        self._start_min = None

    def lo(self, invoke: int) -> int:
        """The least time a read invoked at ``invoke`` may take."""
        lo = 0
        k = bisect.bisect_left(self._acks, (invoke, -1))
        if k:
            lo = self._ack_max[k - 1]
        j = bisect.bisect_left(self._reads, (invoke, -1))
        if j:
            lo = max(lo, self._read_max[j - 1])
        return lo

    def hi(self, complete: int | None) -> int | None:
        """The least timestamp of an append that started after ``complete`` (exclusive bound)."""
        if complete is None or not self._starts:
            return None
        if self._start_min is None:
            mins: list[int] = [0] * len(self._starts)
            least: int | None = None
            for k in range(len(self._starts) - 1, -1, -1):
                ts = self._starts[k][1]
                least = ts if least is None else min(least, ts)
                mins[k] = least
            self._start_min = mins
        k = bisect.bisect_right(self._starts, (complete, 2**63))
        return self._start_min[k] if k < len(self._starts) else None


ChangeTimes = Callable[[GlobalId], Sequence[int]]
"""The ascending times at which a table's contents change."""


def candidates(
    model: ReferenceModel, change_times: ChangeTimes, id: GlobalId, lo: int, hi: int | None
) -> list[int]:
    """``lo`` and every time in ``(lo, hi)`` at which an input of ``id`` changes, or a temporal
    filter of ``id`` admits or drops a row (:meth:`ReferenceModel.moments`)."""
    out = {lo}
    out.update(model.moments(id, change_times, lo, hi))
    for table in model.inputs(id):
        times = change_times(table)
        k = bisect.bisect_right(times, lo)
        while k < len(times) and (hi is None or times[k] < hi):
            out.add(times[k])
            k += 1
    return sorted(out)


def judge_peek(
    model: ReferenceModel,
    change_times: ChangeTimes,
    windows: Windows,
    ev: Mapping[str, Any],
    *,
    hi: bool = True,
) -> Violation | None:
    """Judge one answered peek: at its time, or (fresh) at some time of its real-time window.

    A fresh read that passes is recorded in ``windows`` at the least time it fits.
    ``hi=False`` leaves the upper bound open (online, before later appends are known).
    """
    fin = finishing_from_json(ev["finishing"])
    gid = GlobalId.parse(ev["target"])
    if gid not in model.plans and gid not in model.tables:
        return None  # not a collection the scenario knows
    got = PeekRows(tuple((row_in(r), int(n)) for r, n in ev["rows"]))
    key = _key(ev)
    at_ms = int(ev.get("complete_ms", 0))
    name = ev.get("name", ev["target"])
    if ev.get("at") is not None:
        t = int(ev["at"])
        want = model.peek(gid, t, fin, key)
        if results_agree(got, want, fin):
            return None
        return Violation(
            "peek_matches_reference",
            f"peek {ev['n']} of {name} at {t} returned {_short(got)}, reference {_short(want)}",
            at_ms,
        )
    lo = windows.lo(int(ev["invoke"]))
    top = windows.hi(int(ev["complete"])) if hi else None
    for t in candidates(model, change_times, gid, lo, top):
        if results_agree(got, model.peek(gid, t, fin, key), fin):
            windows.read_done(int(ev["complete"]), t)
            return None
    outside = [
        t
        for t in candidates(model, change_times, gid, 0, None)
        if (t < lo or (top is not None and t >= top))
        and results_agree(got, model.peek(gid, t, fin, key), fin)
    ]
    window = f"[{lo}, {top if top is not None else 'inf'})"
    if outside:
        return Violation(
            "strict_serializable",
            f"fresh peek {ev['n']} of {name} returned the contents at {outside[-1]}, outside "
            f"its real-time window {window} (it missed an acknowledged write or saw one that "
            "had not started)",
            at_ms,
        )
    return Violation(
        "peek_matches_reference",
        f"fresh peek {ev['n']} of {name} returned {_short(got)}, the reference at no time "
        f"(window {window}; at {lo}: {_short(model.peek(gid, lo, fin, key))})",
        at_ms,
    )


def history_model(history: ClientHistory, scenario: Scenario) -> tuple[ReferenceModel, ChangeTimes]:
    """The reference over the history's own appends (acknowledged, or landed when in doubt)."""
    tables: dict[GlobalId, list[Update]] = {}
    names: dict[str, GlobalId] = {}
    for ev in history.events:
        if ev["op"] == "table":
            names[ev["name"]] = GlobalId.parse(ev["id"])
            tables.setdefault(names[ev["name"]], [])  # every incarnation of a name's table
    if not names:  # a history without table events names tables by their scenario ids
        names = {t.id: GlobalId.parse(t.id) for t in scenario.tables}
    for gid in names.values():
        tables.setdefault(gid, [])
    spec_ids = {
        GlobalId.parse(t.id): names.get(t.id, GlobalId.parse(t.id)) for t in scenario.tables
    }
    model = ReferenceModel(tables)
    plans = {d.name: replace_gets(d.plan, spec_ids) for d in scenario.dataflows}
    specs = {d.name: d.plan for d in scenario.dataflows}

    def plan_of(name: str, ev: Mapping[str, Any]) -> Plan:
        inputs = ev.get("inputs")
        if not inputs:
            return plans[name]
        ids = dict(spec_ids)
        ids.update({GlobalId.parse(k): GlobalId.parse(v) for k, v in inputs.items()})
        return replace_gets(specs[name], ids)

    times: dict[GlobalId, set[int]] = {}
    for ev in history.events:
        if ev["op"] == "source_data":  # what landed in a source's shard, noted at the end
            sid = GlobalId.parse(ev["id"])
            landed = [(row_in(r), int(t), int(d)) for t, r, d in ev["updates"]]
            model.tables.setdefault(sid, []).extend(landed)
            times.setdefault(sid, set()).update(t for _, t, _ in landed)
        elif ev["op"] == "append" and appended(ev) and ev.get("time") is not None:
            ts = int(ev["time"])
            parts = ev.get("landed_tables")
            for table, rows in ev["batches"]:
                if parts is not None and not parts.get(table, True):
                    continue  # this table's part of an append in doubt did not land
                tid = GlobalId.parse(table)
                tables.setdefault(tid, []).extend((row_in(r), ts, int(d)) for r, d in rows)
                if rows:
                    times.setdefault(tid, set()).add(ts)
        elif ev["op"] == "install" and ev["name"] in plans:
            model.install(GlobalId.parse(ev["id"]), plan_of(ev["name"], ev))
        elif ev["op"] in ("install", "peek") and "plan" in ev:  # the SQL clients' plans
            model.install(
                GlobalId.parse(ev["id" if ev["op"] == "install" else "target"]),
                plan_from_dict(ev["plan"]),
            )
        elif ev["op"] == "subscribe" and ev.get("target") in plans:
            model.install(subscription_id(ev), plan_of(ev["target"], ev))
    sorted_times = {t: sorted(v) for t, v in times.items()}
    return model, lambda table: sorted_times.get(table, [])


def check_history(history: ClientHistory, scenario: Scenario) -> list[Violation]:
    """Validate a client history (see the module docstring); the violations found, in time order."""
    out: list[Violation] = []
    model, change_times = history_model(history, scenario)
    windows = Windows()
    for e in history.ops("append"):
        if e.get("time") is None:
            continue
        if e["status"] == "ok":
            windows.ack(int(e["complete"]), int(e["time"]))
        if appended(e) and not e.get("retry"):  # a retry wrote nothing new after it started
            windows.started(int(e["invoke"]), int(e["time"]))
    answered = sorted(
        (e for e in history.ops("peek") if e["status"] == "ok" and "rows" in e),
        key=lambda e: int(e["complete"]),
    )
    for ev in answered:
        v = judge_peek(model, change_times, windows, ev)
        if v is not None:
            out.append(v)
    out.extend(_check_appends(history))
    out.extend(_check_subscribes(history, model, windows))
    out.sort(key=lambda v: v.at_ms)
    return out


def _key(ev: Mapping[str, Any]) -> tuple[tuple[int, ...], Row] | None:
    """The (columns, values) of a key lookup, if the peek was one."""
    key = ev.get("key")
    if key is None:
        return None
    cols = ev.get("key_columns") or list(range(len(key)))
    return tuple(int(c) for c in cols), row_in(key)


def _check_appends(history: ClientHistory) -> list[Violation]:
    """An append acknowledged before another started has the smaller timestamp."""
    out: list[Violation] = []
    acked = sorted(
        (int(e["complete"]), int(e["time"]), int(e["n"]), int(e["complete_ms"]))
        for e in history.ops("append")
        if e["status"] == "ok"
    )
    done_at = [c for c, *_ in acked]
    best: list[tuple[int, int]] = []
    cur = (-1, 0)
    for _c, ts, n, _ms in acked:
        if ts > cur[0]:
            cur = (ts, n)
        best.append(cur)
    for e in history.ops("append"):
        if e["status"] != "ok" or e.get("retry"):  # a retry answers its original's time
            continue
        k = bisect.bisect_left(done_at, int(e["invoke"]))
        if k and best[k - 1][0] >= int(e["time"]):
            prev_ts, prev_n = best[k - 1]
            out.append(
                Violation(
                    "strict_serializable",
                    f"append {e['n']} got time {e['time']}, not after append {prev_n} "
                    f"({prev_ts}), which was acknowledged before it started",
                    int(e["complete_ms"]),
                )
            )
    return out


def _check_subscribes(
    history: ClientHistory, model: ReferenceModel, windows: Windows
) -> list[Violation]:
    out: list[Violation] = []
    subs: dict[int, dict[str, Any]] = {}
    for ev in history.events:
        if ev["op"] == "subscribe" and ev["status"] in ("ok", "info") and ev.get("id"):
            subs[int(ev["n"])] = {"ev": ev, "next": None, "acc": {}, "closed": False, "last": None}
    for ev in history.events:
        if ev["op"] != "batch":
            continue
        at = int(ev["at_ms"])
        s = subs.get(int(ev["sub"]))
        if s is None:
            out.append(
                Violation("subscribe_gap_free", f"batch for unknown subscribe {ev['sub']}", at)
            )
            continue
        sub = s["ev"]
        if s["closed"]:
            out.append(
                Violation("subscribe_gap_free", f"subscribe {sub['n']} emitted after it ended", at)
            )
            continue
        if s["next"] is None:  # the first batch: where the subscribe starts
            s["next"] = ev["lower"]
            if sub.get("as_of") is None and ev["lower"]:
                lo, hi = windows.lo(int(sub["invoke"])), windows.hi(sub.get("complete"))
                start = int(ev["lower"][0])
                if start < lo or (hi is not None and start >= hi):
                    out.append(
                        Violation(
                            "strict_serializable",
                            f"subscribe {sub['n']} starts at {start}, outside its real-time "
                            f"window [{lo}, {hi if hi is not None else 'inf'})",
                            at,
                        )
                    )
        if ev["lower"] != s["next"]:
            out.append(
                Violation(
                    "subscribe_gap_free",
                    f"subscribe {sub['n']} batch starts at {ev['lower']}, expected {s['next']}",
                    at,
                )
            )
            s["closed"] = True
            continue
        s["next"] = ev["upper"]
        if ev["error"] is not None:
            s["closed"] = True
            continue
        end = ev["upper"][0] if ev["upper"] else None
        for t, r, d in ev["updates"]:
            row = row_in(r)
            n = s["acc"].get(row, 0) + d
            if n:
                s["acc"][row] = n
            else:
                s["acc"].pop(row, None)
            if not (ev["lower"][0] <= t and (end is None or t < end)):
                out.append(
                    Violation(
                        "subscribe_gap_free",
                        f"subscribe {sub['n']} update at {t} outside its batch "
                        f"[{ev['lower']}, {ev['upper']})",
                        at,
                    )
                )
        if end is None:  # complete: what it holds at its last change, and for ever after
            s["closed"] = True
            end = max([int(ev["lower"][0]), *(int(u[0]) for u in ev["updates"])]) + 1
            v = _check_accumulation(model, sub, s, end, at)
            if v is not None:
                out.append(v)
            continue
        s["last"] = (end, at)
        if ev["updates"]:
            v = _check_accumulation(model, sub, s, end, at)
            if v is not None:
                out.append(v)
                s["closed"] = True
    for s in subs.values():
        if not s["closed"] and s["last"] is not None:
            v = _check_accumulation(model, s["ev"], s, s["last"][0], s["last"][1])
            if v is not None:
                out.append(v)
    return out


def _check_accumulation(
    model: ReferenceModel, sub: Mapping[str, Any], s: dict[str, Any], upper: int, at: int
) -> Violation | None:
    gid = subscription_id(sub)
    if gid not in model.plans:
        return None
    want = model.contents(gid, upper - 1).rows
    if dict(s["acc"]) != dict(want):
        return Violation(
            "subscribe_matches_reference",
            f"subscribe {sub['n']} ({sub.get('target')}) accumulates to "
            f"{sorted(s['acc'].items(), key=repr)[:6]} at upper {upper}, "
            f"reference {sorted(want.items(), key=repr)[:6]}",
            at,
        )
    return None


def _short(r: Any) -> str:
    if isinstance(r, PeekRows):
        rows = list(r.rows)
        text = ", ".join(f"{row}x{n}" for row, n in rows[:4])
        return f"{len(rows)} rows [{text}{', ...' if len(rows) > 4 else ''}]"
    return repr(r)
