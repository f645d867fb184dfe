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

import itertools
import time
from collections.abc import Iterable
from typing import Any

from tidegate.sim.history import ClientHistory, ReferenceModel, Violation, check_history
from tidegate.sim.scenario import DataflowKind, DataflowSpec, Scenario, TableSpec
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, evaluate
from tidegate.spec.protocol.responses import PeekRows
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
        self._tickets = itertools.count(1)
        self._peeks = itertools.count(1)
        self._t0 = time.monotonic()

    def now_ms(self) -> int:
        return int((time.monotonic() - self._t0) * 1000)

    # -- what happened -------------------------------------------------------------------------

    def table(self, id: GlobalId, schema: Schema) -> None:
        self.tables[id] = schema
        self.updates.setdefault(id, [])

    def appended(self, table: GlobalId, time: int, updates: Iterable[tuple[Row, int]]) -> None:
        """An append acknowledged at write time ``time``."""
        ups = list(updates)
        ticket = next(self._tickets)
        self.history.append_issued(ticket, table, time, ups, self.now_ms())
        self.history.append_done(ticket, True, self.now_ms())
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
        self.history.installed(id, spec.name, kind, as_of, self.now_ms())

    def peeked(
        self,
        id: GlobalId,
        at: int,
        rows: Iterable[tuple[Row, int]],
        finishing: RowSetFinishing | None = None,
    ) -> None:
        """A whole-collection peek of ``id`` at ``at`` and its answer."""
        uuid = f"peek-{next(self._peeks)}"
        fin = finishing or RowSetFinishing()
        self.history.peek_issued(uuid, id, at, "index", fin, self.now_ms())
        self.history.peek_result(uuid, PeekRows(tuple(rows)), self.now_ms())

    def subscribe_batch(
        self,
        id: GlobalId,
        lower: Antichain,
        upper: Antichain,
        updates: Iterable[tuple[int, Row, int]],
        error: str | None = None,
    ) -> None:
        self.history.subscribe_batch(id, lower, upper, updates, error, self.now_ms())

    # -- the reference -------------------------------------------------------------------------

    def expected(self, id: GlobalId, at: int) -> dict[Row, int]:
        """What ``id`` (a table or a recorded dataflow) holds at ``at``, by the reference evaluator."""
        model = ReferenceModel({t: list(u) for t, u in self.updates.items()})
        spec = self.dataflows.get(id)
        if spec is not None:
            model.install(id, spec)
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
