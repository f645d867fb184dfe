"""The client-visible history of a run, as JSON-able data, and its offline checker.

Clients see: append acknowledgements (with the write time), dataflow
installs and drops, peeks (time, target, result, or the typed refusal), and
subscribe batches. :class:`ClientHistory` records exactly that;
:func:`check_history` validates it against the reference evaluator using
nothing but the history and the scenario, so a history recorded by the real
runtime can be checked by the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.frontier import Antichain, Row, Update, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Collection, evaluate, reference_peek
from tidegate.spec.protocol.responses import PeekCanceled, PeekError, PeekResult, PeekRows
from tidegate.spec.protocol.types import ColumnOrder, RowSetFinishing

from .scenario import DataflowSpec, Scenario

__all__ = [
    "OFFLINE_PREFIX",
    "ClientHistory",
    "ReferenceModel",
    "Violation",
    "check_history",
    "finishing_from_json",
    "finishing_to_json",
    "result_from_json",
    "result_to_json",
    "results_agree",
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


def _row_out(row: Row) -> list[Any]:
    return list(row)


def _row_in(row: Iterable[Any]) -> Row:
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


def result_to_json(r: PeekResult) -> dict[str, Any]:
    if isinstance(r, PeekRows):
        return {"rows": [[_row_out(row), n] for row, n in r.rows]}
    if isinstance(r, PeekError):
        return {"error": r.message}
    return {"canceled": True}


def result_from_json(d: Mapping[str, Any]) -> PeekResult:
    if "rows" in d:
        return PeekRows(tuple((_row_in(row), int(n)) for row, n in d["rows"]))
    if "error" in d:
        return PeekError(str(d["error"]))
    return PeekCanceled()


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

    ``tables`` maps each table id to its updates (a live list may grow). Results
    are cached per (collection, time): callers only ask about times every input
    has passed, where the contents are final.
    """

    def __init__(self, tables: Mapping[GlobalId, list[Update]] | None = None) -> None:
        self.tables: dict[GlobalId, list[Update]] = dict(tables or {})
        self.plans: dict[GlobalId, DataflowSpec] = {}
        self._cache: dict[tuple[GlobalId, int], Collection] = {}

    def install(self, id: GlobalId, spec: DataflowSpec) -> None:
        self.plans[id] = spec

    def contents(self, id: GlobalId, time: int) -> Collection:
        key = (id, time)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        spec = self.plans.get(id)
        if spec is None:
            out = Collection(accumulate(self.tables.get(id, []), time))
        else:
            out = evaluate(spec.plan, self.tables, time)
        self._cache[key] = out
        return out

    def peek(self, id: GlobalId, time: int, finishing: RowSetFinishing) -> PeekResult:
        return reference_peek(self.contents(id, time), finishing)

    def forget_cache(self) -> None:
        self._cache.clear()


# -- the history ------------------------------------------------------------------------------


@dataclass
class ClientHistory:
    """Everything clients observed, in order, as JSON-able events (see :func:`check_history`).

    Event shapes (``"op"`` says which):
    ``append`` {ticket, table, time, updates: [[row, diff]], status, at_ms}, where status is
    ok|failed|pending, or, for an append its controller died before acknowledging,
    in_doubt until the storage decides it and then landed|lost;
    ``install`` {id, dataflow, kind, as_of, at_ms}; ``drop`` {id, at_ms};
    ``peek`` {uuid, id, time, target, finishing, at_ms, result?} (``result`` filled in when
    it arrives: {rows}|{error}|{canceled}|{refused}|{aborted}, the last when the controller
    restarted before answering: a failure, not an answer); ``subscribe`` {id, lower, upper,
    updates: [[time, row, diff]], error, at_ms} (a subscribe ended by a controller restart
    gets a last event with an empty upper and the error "controller restarted");
    ``restart`` {generation, at_ms}: a new controller was restored from durable state.
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    _appends: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _in_doubt: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict, repr=False)
    _peeks: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def append_issued(
        self, ticket: int, table: GlobalId, time: int, updates: list[tuple[Row, int]], at_ms: int
    ) -> None:
        ev = {
            "op": "append",
            "ticket": ticket,
            "table": str(table),
            "time": time,
            "updates": [[_row_out(r), d] for r, d in updates],
            "status": "pending",
            "at_ms": at_ms,
        }
        self.events.append(ev)
        self._appends[ticket] = ev

    def append_done(self, ticket: int, ok: bool, at_ms: int) -> None:
        ev = self._appends.pop(ticket, None)
        if ev is not None:
            ev["status"] = "ok" if ok else "failed"
            ev["acked_ms"] = at_ms

    def append_in_doubt(self, generation: int, ticket: int, at_ms: int) -> None:
        """Controller ``generation`` died before acknowledging append ``ticket``."""
        ev = self._appends.pop(ticket, None)
        if ev is not None:
            ev["status"] = "in_doubt"
            ev["in_doubt_ms"] = at_ms
            self._in_doubt[(generation, ticket)] = ev

    def append_resolved(self, generation: int, ticket: int, landed: bool, at_ms: int) -> None:
        """The storage decided an in-doubt append: it ``landed`` (wholly) or was lost."""
        ev = self._in_doubt.pop((generation, ticket), None)
        if ev is not None:
            ev["status"] = "landed" if landed else "lost"
            ev["resolved_ms"] = at_ms

    def restarted(self, generation: int, at_ms: int) -> None:
        self.events.append({"op": "restart", "generation": generation, "at_ms": at_ms})

    def installed(self, id: GlobalId, dataflow: str, kind: str, as_of: int, at_ms: int) -> None:
        self.events.append(
            {
                "op": "install",
                "id": str(id),
                "dataflow": dataflow,
                "kind": kind,
                "as_of": as_of,
                "at_ms": at_ms,
            }
        )

    def dropped(self, id: GlobalId, at_ms: int) -> None:
        self.events.append({"op": "drop", "id": str(id), "at_ms": at_ms})

    def peek_issued(
        self,
        uuid: str,
        id: GlobalId,
        time: int,
        target: str,
        finishing: RowSetFinishing,
        at_ms: int,
        refused: str | None = None,
    ) -> None:
        ev: dict[str, Any] = {
            "op": "peek",
            "uuid": uuid,
            "id": str(id),
            "time": time,
            "target": target,
            "finishing": finishing_to_json(finishing),
            "at_ms": at_ms,
        }
        if refused is not None:
            ev["result"] = {"refused": refused}
        else:
            self._peeks[uuid] = ev
        self.events.append(ev)

    def peek_result(self, uuid: str, result: PeekResult, at_ms: int) -> None:
        ev = self._peeks.get(uuid)
        if ev is None:
            self.events.append({"op": "stray_result", "uuid": uuid, "at_ms": at_ms})
            return
        if "result" in ev:
            ev.setdefault("extra_results", 0)
            ev["extra_results"] += 1
            return
        ev["result"] = result_to_json(result)
        ev["answered_ms"] = at_ms

    def peek_aborted(self, uuid: str, reason: str, at_ms: int) -> None:
        """Peek ``uuid`` failed without an answer (its controller died): it counts as answered."""
        ev = self._peeks.get(uuid)
        if ev is None:
            return
        if "result" in ev:
            ev["extra_results"] = ev.get("extra_results", 0) + 1
            return
        ev["result"] = {"aborted": reason}
        ev["answered_ms"] = at_ms

    def subscribe_batch(
        self,
        id: GlobalId,
        lower: Antichain,
        upper: Antichain,
        updates: Iterable[tuple[int, Row, int]],
        error: str | None,
        at_ms: int,
    ) -> None:
        self.events.append(
            {
                "op": "subscribe",
                "id": str(id),
                "lower": list(lower.elements),
                "upper": list(upper.elements),
                "updates": [[t, _row_out(r), d] for t, r, d in updates],
                "error": error,
                "at_ms": at_ms,
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {"events": self.events}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientHistory:
        h = cls()
        h.events = [dict(e) for e in data["events"]]
        return h


# -- the offline checker -------------------------------------------------------------------------


def _model_of(history: ClientHistory, scenario: Scenario) -> ReferenceModel:
    tables: dict[GlobalId, list[Update]] = {GlobalId.parse(t.id): [] for t in scenario.tables}
    specs = {d.name: d for d in scenario.dataflows}
    model = ReferenceModel(tables)
    for ev in history.events:
        if ev["op"] == "append" and ev["status"] not in ("failed", "lost"):
            tid = GlobalId.parse(ev["table"])
            tables.setdefault(tid, []).extend(
                (_row_in(r), int(ev["time"]), int(d)) for r, d in ev["updates"]
            )
        elif ev["op"] == "install" and ev["dataflow"] in specs:
            model.install(GlobalId.parse(ev["id"]), specs[ev["dataflow"]])
    return model


def check_history(history: ClientHistory, scenario: Scenario) -> list[Violation]:
    """Validate a client history against the reference evaluation of the scenario's plans.

    Checks: every peek answer equals the reference at its time (over the
    appends that were not reported failed, nor lost when in doubt; an append
    still in doubt at the end counts as landed); a peek has at most one
    result, and one aborted by a controller restart has that as its result;
    refused peeks carry their reason; every subscribe stream is gap-free,
    starts at its as_of and accumulates to the reference at every upper that
    follows a batch with updates and at its last upper.
    """
    out: list[Violation] = []
    model = _model_of(history, scenario)
    installs: dict[str, dict[str, Any]] = {}
    streams: dict[str, dict[str, Any]] = {}
    for ev in history.events:
        op = ev["op"]
        at = int(ev.get("at_ms", 0))
        if op == "install":
            installs[ev["id"]] = ev
            if ev["kind"] == "subscribe":
                streams[ev["id"]] = {
                    "next": [ev["as_of"]],
                    "acc": {},
                    "closed": False,
                    "dirty": False,
                    "last": None,
                }
        elif op == "peek":
            res = ev.get("result")
            if ev.get("extra_results"):
                out.append(
                    Violation(
                        "one_result_per_peek", f"peek {ev['uuid']} got more than one result", at
                    )
                )
            if res is None or "refused" in res or "canceled" in res or "error" in res:
                continue
            if "aborted" in res:
                continue
            fin = finishing_from_json(ev["finishing"])
            gid = GlobalId.parse(ev["id"])
            want = model.peek(gid, int(ev["time"]), fin)
            got = result_from_json(res)
            if not results_agree(got, want, fin):
                out.append(
                    Violation(
                        "peek_matches_reference",
                        f"peek {ev['uuid']} of {ev['id']} at {ev['time']} returned {got} but the reference is {want}",
                        int(ev.get("answered_ms", at)),
                    )
                )
        elif op == "stray_result":
            out.append(
                Violation("one_result_per_peek", f"result for unknown peek {ev['uuid']}", at)
            )
        elif op == "subscribe":
            s = streams.get(ev["id"])
            if s is None:
                out.append(
                    Violation("subscribe_gap_free", f"batch for unknown subscribe {ev['id']}", at)
                )
                continue
            if s["closed"]:
                out.append(
                    Violation(
                        "subscribe_gap_free", f"subscribe {ev['id']} emitted after it ended", at
                    )
                )
                continue
            if ev["lower"] != s["next"]:
                out.append(
                    Violation(
                        "subscribe_gap_free",
                        f"subscribe {ev['id']} batch starts at {ev['lower']}, expected {s['next']}",
                        at,
                    )
                )
                s["closed"] = True
                continue
            s["next"] = ev["upper"]
            if ev["error"] is not None or not ev["upper"]:
                s["closed"] = True
                continue
            for t, r, d in ev["updates"]:
                row = _row_in(r)
                n = s["acc"].get(row, 0) + d
                if n:
                    s["acc"][row] = n
                else:
                    s["acc"].pop(row, None)
                if not ev["lower"][0] <= t < ev["upper"][0]:
                    out.append(
                        Violation(
                            "subscribe_gap_free",
                            f"subscribe {ev['id']} update at {t} outside its batch",
                            at,
                        )
                    )
            s["dirty"] = s["dirty"] or bool(ev["updates"])
            s["last"] = (ev["upper"][0], at)
            if ev["updates"]:
                v = _check_accumulation(model, ev["id"], s, ev["upper"][0], at)
                if v is not None:
                    out.append(v)
                    s["closed"] = True
    for sid, s in streams.items():
        if not s["closed"] and s["last"] is not None:
            v = _check_accumulation(model, sid, s, s["last"][0], s["last"][1])
            if v is not None:
                out.append(v)
    return out


def _check_accumulation(
    model: ReferenceModel, sid: str, s: dict[str, Any], upper: int, at: int
) -> Violation | None:
    want = model.contents(GlobalId.parse(sid), upper - 1).rows
    if dict(s["acc"]) != dict(want):
        return Violation(
            "subscribe_matches_reference",
            f"subscribe {sid} accumulates to {sorted(s['acc'].items(), key=repr)[:6]} at upper {upper}, "
            f"reference {sorted(want.items(), key=repr)[:6]}",
            at,
        )
    return None
