"""Generated SQL over generated data histories, on DuckDB and through tidegate, at every time.

Hypothesis draws the contents of two tables as a history (rows inserted and
deleted at times 0, 1 and 2) and a query from the supported subset
(projections, predicates, joins, grouping with aggregates, DISTINCT, set
operations). At every time, tidegate's answers must be DuckDB's over the
tables accumulated up to that time (as bags; floats with a tolerance): the
reference evaluator of the lowered plan over the updates, and the plan
maintained incrementally by the ``PythonExecutor`` (installed as a dataflow
with an index, fed one time per step): what its index emitted up to the time
and what a peek of the index at the time answers. Values are small, so nothing overflows; no
integer division (DuckDB's ``/`` makes a float).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from bags import same_bag
from hypothesis import given
from sql_gen import CATALOG, DDL, IDS, TIMES, histories, queries, r_rows, s_rows

from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, evaluate
from tidegate.spec.plan.ordering import RowSetFinishing, apply_finishing
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.sql import SelectStmt, lower_query, parse_one

OUT, INDEX = GlobalId.transient(1), GlobalId.transient(2)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    yield con
    con.close()


def _load(con: Any, name: str, updates: list[tuple[Any, int, int]], t: int) -> None:
    acc: dict[Any, int] = {}
    for row, time, diff in updates:
        if time <= t:
            acc[row] = acc.get(row, 0) + diff
    con.execute(f"CREATE OR REPLACE TABLE {name} ({DDL[name]})")
    rows = [r for r, n in acc.items() for _ in range(n)]
    if rows:
        marks = ", ".join("?" for _ in rows[0])
        con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)


def _finished(rows: Any, finishing: RowSetFinishing) -> list[tuple[Any, ...]]:
    got: list[tuple[Any, ...]] = []
    for row, c in apply_finishing(rows, finishing):
        got.extend([row] * c)
    return got


def _maintained(
    plan: Plan, inputs: dict[GlobalId, list[tuple[Any, int, int]]]
) -> dict[int, tuple[dict[Any, int], dict[Any, int]]]:
    """The plan on the ``PythonExecutor``, fed a time per step: per time, what its index
    emitted up to then (accumulated) and what a peek at that time answered."""
    ex = PythonExecutor()
    handle = ex.install(
        DataflowDescription(
            "duckdb-random",
            source_imports=tuple(SourceImport(g) for g in inputs),
            objects_to_build=(BuildDesc(OUT, plan),),
            index_exports=(IndexExport(INDEX, OUT, ()),),
            as_of=Antichain([TIMES[0]]),
        )
    )
    fed = set(ex.source_inputs(handle))
    emitted: list[Any] = []
    out: dict[int, tuple[dict[Any, int], dict[Any, int]]] = {}
    for t in TIMES:
        for gid, updates in inputs.items():
            if gid in fed:
                ex.feed(handle, gid, [u for u in updates if u[1] == t], Antichain([t + 1]))
        for batch in ex.step():
            if batch.id == INDEX:
                assert not batch.errors, batch.errors
                emitted.extend(batch.updates)
        peeked = ex.peek(INDEX, t)
        assert isinstance(peeked, PeekRows), peeked
        out[t] = (dict(accumulate(emitted, t)), dict(peeked.rows))
    return out


@given(histories(r_rows), histories(s_rows), queries())
def test_generated_queries_agree_with_duckdb_at_every_time(
    duck: Any, r: list[tuple[Any, int, int]], s: list[tuple[Any, int, int]], sql: str
) -> None:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, CATALOG, (), stmt.sql)
    inputs = {IDS["r"]: r, IDS["s"]: s}
    maintained = _maintained(low.plan, inputs)
    for t in TIMES:
        _load(duck, "r", r, t)
        _load(duck, "s", s, t)
        want = [tuple(x) for x in duck.execute(sql).fetchall()]
        res = evaluate(low.plan, inputs, t)
        assert not res.errors, (sql, t, res.errors)
        emitted, peeked = maintained[t]
        for engine, rows in (("reference", res.rows), ("index", emitted), ("peek", peeked)):
            got = _finished(rows, low.finishing())
            assert same_bag(got, want), (
                engine,
                sql,
                t,
                sorted(got, key=repr),
                sorted(want, key=repr),
            )
