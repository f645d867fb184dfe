"""The client-visible history of a real run, checked like a simulation's.

:class:`RunRecorder` writes what a client of an ``Environment`` saw (acknowledged
appends with their write times, installed dataflows, peeks with their answers,
subscribe batches) into the simulator's :class:`~tidegate.sim.history.ClientHistory`
format, and builds the :class:`~tidegate.sim.scenario.Scenario` that names the
tables and plans, so :func:`~tidegate.sim.history.check_history` validates a
real run with the same code that validates simulated ones. It also answers
"what should this hold at ``t``" for on-the-spot checks (the demo's ✓ marks).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from tidegate.sim.history import (
    ClientHistory,
    ReferenceModel,
    Violation,
    check_history,
    finishing_to_json,
)
from tidegate.sim.scenario import DataflowKind, DataflowSpec, Scenario, TableSpec
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, evaluate
from tidegate.spec.protocol.types import RowSetFinishing

__all__ = ["RunRecorder"]


class RunRecorder:
    """Records a real run's client-visible history and holds its reference model."""

    def __init__(self, name: str = "runtime", replicas: int = 1) -> None:
        self.name = name
        self.replicas = replicas
        self.history = ClientHistory()
        self.tables: dict[GlobalId, Schema] = {}
        self.dataflows: dict[GlobalId, DataflowSpec] = {}
        self.updates: dict[GlobalId, list[Update]] = {}
        self._subs: dict[GlobalId, int] = {}
        self._t0 = time.monotonic()

    def now_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    # -- what happened -------------------------------------------------------------------------
    # Each call records an operation that already completed: invoked and completed at once,
    # in the order the calls come (a real client records after it got its answer).

    def table(self, id: GlobalId, schema: Schema) -> None:
        self.tables[id] = schema
        self.updates.setdefault(id, [])
        self.history.note("table", self.now_ms(), name=str(id), id=str(id))

    def appended(self, table: GlobalId, time: int, updates: Iterable[tuple[Row, int]]) -> None:
        """An append acknowledged at write time ``time``."""
        ups = list(updates)
        now = self.now_ms()
        ev = self.history.invoke(
            "append", now, batches=[[str(table), [[list(r), d] for r, d in ups]]]
        )
        self.history.ok(ev, now, time=time)
        self.updates.setdefault(table, []).extend((r, time, d) for r, d in ups)

    def installed(
        self,
        id: GlobalId,
        kind: DataflowKind,
        plan: Plan,
        key: tuple[int, ...] = (),
        as_of: int = 0,
    ) -> None:
        """A dataflow exporting ``id``; for a subscribe, ``as_of`` is where its first batch starts."""
        spec = DataflowSpec(str(id), kind, plan, key)
        self.dataflows[id] = spec
        now = self.now_ms()
        if kind == "subscribe":
            ev = self.history.invoke("subscribe", now, target=spec.name, as_of=as_of)
            self.history.ok(ev, now, id=str(id))
            self._subs[id] = int(ev["n"])
        else:
            self.history.note("install", now, id=str(id), name=spec.name, kind=kind)

    def peeked(
        self,
        id: GlobalId,
        at: int,
        rows: Iterable[tuple[Row, int]],
        finishing: RowSetFinishing | None = None,
    ) -> None:
        """A whole-collection peek of ``id`` at ``at`` and its answer."""
        fin = finishing or RowSetFinishing()
        now = self.now_ms()
        ev = self.history.invoke(
            "peek", now, target=str(id), name=str(id), at=at, finishing=finishing_to_json(fin)
        )
        self.history.ok(ev, now, rows=[[list(r), n] for r, n in rows])

    def subscribe_batch(
        self,
        id: GlobalId,
        lower: Antichain,
        upper: Antichain,
        updates: Iterable[tuple[int, Row, int]],
        error: str | None = None,
    ) -> None:
        self.history.batch(self._subs[id], lower, upper, updates, error, self.now_ms())

    # -- the reference -------------------------------------------------------------------------

    def expected(self, id: GlobalId, at: int) -> dict[Row, int]:
        """What ``id`` (a table or a recorded dataflow) holds at ``at``, by the reference evaluator."""
        model = ReferenceModel({t: list(u) for t, u in self.updates.items()})
        spec = self.dataflows.get(id)
        if spec is not None:
            model.install(id, spec.plan)
        return dict(model.contents(id, at).rows)

    def expected_plan(self, plan: Plan, at: int) -> dict[Row, int]:
        """What ``plan`` over the recorded tables holds at ``at``."""
        return dict(evaluate(plan, self.updates, at).rows)

    def scenario(self) -> Scenario:
        """The tables and plans of this run, as the history checker wants them."""
        return Scenario(
            name=self.name,
            replicas=max(1, min(5, self.replicas)),
            tables=tuple(TableSpec(str(t), s) for t, s in sorted(self.tables.items())),
            dataflows=tuple(self.dataflows[i] for i in sorted(self.dataflows)),
        )

    def check(self) -> list[Violation]:
        """The offline history checker's verdict on everything recorded so far."""
        return check_history(self.history, self.scenario())

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario().to_json(), "history": self.history.to_json()}
