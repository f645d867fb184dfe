"""Generated SQL over generated data histories, on DuckDB and through tidegate, at every time.

Hypothesis draws the contents of two tables as a history (rows inserted and
deleted at times 0, 1 and 2) and a query from the supported subset
(projections, predicates, joins, grouping with aggregates, DISTINCT, set
operations). At every time, tidegate's answer -- the reference evaluator of
the lowered plan over the updates, i.e. the maintained view at that time --
must be DuckDB's answer over the tables accumulated up to that time (as
bags; floats with a tolerance). Values are small, so nothing overflows; no
integer division (DuckDB's ``/`` makes a float).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from bags import same_bag
from hypothesis import given
from sql_gen import CATALOG, DDL, IDS, TIMES, histories, queries, r_rows, s_rows

from tidegate.spec.plan import evaluate
from tidegate.spec.plan.ordering import apply_finishing
from tidegate.spec.sql import SelectStmt, lower_query, parse_one


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


@given(histories(r_rows), histories(s_rows), queries())
def test_generated_queries_agree_with_duckdb_at_every_time(
    duck: Any, r: list[tuple[Any, int, int]], s: list[tuple[Any, int, int]], sql: str
) -> None:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, CATALOG, (), stmt.sql)
    inputs = {IDS["r"]: r, IDS["s"]: s}
    for t in TIMES:
        _load(duck, "r", r, t)
        _load(duck, "s", s, t)
        want = [tuple(x) for x in duck.execute(sql).fetchall()]
        res = evaluate(low.plan, inputs, t)
        assert not res.errors, (sql, t, res.errors)
        got: list[tuple[Any, ...]] = []
        for row, c in apply_finishing(res.rows, low.finishing()):
            got.extend([row] * c)
        assert same_bag(got, want), (sql, t, sorted(got, key=repr), sorted(want, key=repr))
