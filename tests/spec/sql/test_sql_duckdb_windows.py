"""Window functions, ``DISTINCT ON`` and the Top-K idiom against DuckDB, over a history of changes.

A table gets a history of inserts, deletes and updates at times 0..5. Every
query of the corpus is lowered by tidegate (:func:`~tidegate.spec.sql.lower_query`)
and, at every time, compared with DuckDB's answer over the table as it is
then (DuckDB recomputes it from scratch): through the reference evaluator,
then through the ``PythonExecutor`` (and, in the ``spark``-marked test, the
``SparkExecutor``) fed one time per step, so the maintained answer is checked
after every change (:func:`~tidegate.spec.testing.executor.check_sql_case`).

What SQL leaves open, and how the corpus stays clear of it: an order-sensitive
function (``row_number``, ``lag``/``lead``, ``ROWS`` frames, ``first_value``/
``last_value``) orders by a unique key last, so no two rows tie; ``rank``,
``dense_rank``, ``RANGE`` frames and aggregates over peers are the same for
any order of peers, so those order by columns with ties. DuckDB is set to
PostgreSQL's NULL order (NULLs last ascending, first descending).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import duckdb
import pytest

from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema, explain
from tidegate.spec.sql import CatalogItem, DictCatalog, SelectStmt, lower_query, parse_one
from tidegate.spec.testing.executor import check_sql_case
from tidegate.spec.testing.sql_cases import SqlCase

T = GlobalId.user(1)
SCHEMA = Schema.of(("k", "int64", False), ("g", "string"), ("x", "int64"), ("y", "int64", False))
CATALOG = DictCatalog([CatalogItem("t", T, SCHEMA, "table")])
TIMES = 6


def _history(seed: int = 11) -> list[tuple[Row, int, int]]:
    """Inserts at time 0, then per time a few inserts, deletes and updates (delete + insert)."""
    r = random.Random(seed)
    live: dict[int, Row] = {}
    out: list[tuple[Row, int, int]] = []
    next_k = 0

    def row(k: int) -> Row:
        g = r.choice(["a", "b", "c", "d", None])
        x = None if r.random() < 0.15 else r.randrange(-3, 4)
        return (k, g, x, r.randrange(0, 20))

    for t in range(TIMES):
        for _ in range(25 if t == 0 else 3):
            live[next_k] = row(next_k)
            out.append((live[next_k], t, 1))
            next_k += 1
        if t:
            for k in r.sample(sorted(live), 2):  # deletes
                out.append((live.pop(k), t, -1))
            for k in r.sample(sorted(live), 2):  # updates
                out.append((live[k], t, -1))
                live[k] = row(k)
                out.append((live[k], t, 1))
    return out


HISTORY = _history()

CORPUS = [
    # ranking
    "SELECT k, row_number() OVER (PARTITION BY g ORDER BY x DESC, k) FROM t",
    "SELECT k, rank() OVER (PARTITION BY g ORDER BY x), "
    "dense_rank() OVER (PARTITION BY g ORDER BY x NULLS FIRST) FROM t",
    "SELECT k, rank() OVER (ORDER BY g DESC, x), row_number() OVER (ORDER BY k DESC) FROM t",
    # lag / lead with offsets and defaults
    "SELECT k, lag(x) OVER (PARTITION BY g ORDER BY k), lead(x, 2, -100) OVER "
    "(PARTITION BY g ORDER BY k), lag(g, 3, 'none') OVER (ORDER BY y, k) FROM t",
    "SELECT k, x - lag(x, 1, 0) OVER (PARTITION BY g ORDER BY k) AS d FROM t",
    # first / last value
    "SELECT k, first_value(k) OVER (PARTITION BY g ORDER BY x, k), "
    "last_value(k) OVER (PARTITION BY g ORDER BY x, k), "
    "last_value(y) OVER (PARTITION BY g ORDER BY x, k "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM t",
    # aggregates: the default frame (peers included), the whole partition, ROWS and RANGE
    "SELECT k, sum(y) OVER (PARTITION BY g ORDER BY x), count(*) OVER (PARTITION BY g), "
    "count(x) OVER () FROM t",
    "SELECT k, sum(x) OVER (PARTITION BY g ORDER BY k ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), "
    "max(x) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), "
    "min(y) OVER (PARTITION BY g ORDER BY k ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) FROM t",
    "SELECT k, sum(y) OVER (PARTITION BY g ORDER BY x RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING), "
    "count(*) OVER (ORDER BY x DESC RANGE BETWEEN 2 PRECEDING AND CURRENT ROW), "
    "max(k) OVER (ORDER BY y RANGE BETWEEN CURRENT ROW AND 3 FOLLOWING) FROM t",
    "SELECT k, avg(y) OVER (PARTITION BY g ORDER BY k ROWS 2 PRECEDING), "
    "sum(x) OVER (ORDER BY k ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) FROM t",
    # after GROUP BY, and in ORDER BY ... LIMIT
    "SELECT g, sum(y), rank() OVER (ORDER BY sum(y) DESC) FROM t GROUP BY g",
    "SELECT k, g FROM t ORDER BY row_number() OVER (PARTITION BY g ORDER BY y DESC, k), k LIMIT 6",
    # Top-K: the ROW_NUMBER idiom and DISTINCT ON
    "SELECT k, g FROM (SELECT k, g, row_number() OVER (PARTITION BY g ORDER BY x DESC, k) AS rn "
    "FROM t) s WHERE rn <= 2",
    "SELECT * FROM (SELECT g, k, y, row_number() OVER (PARTITION BY g ORDER BY y, k) AS rn "
    "FROM t) s WHERE rn < 4 AND y > 2",
    "SELECT DISTINCT ON (g) g, k, x FROM t ORDER BY g, x DESC, k",
    "SELECT DISTINCT ON (x, g) x, g, y FROM t ORDER BY g, x, y DESC, k",
]


def _plan(sql: str) -> Any:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, CATALOG, (), stmt.sql)
    return low.relation()


def _case(sql: str, con: Any) -> SqlCase:
    expected: dict[int, tuple[dict[Row, int], dict[str, int]]] = {}
    state: Counter[Row] = Counter()
    con.execute("DELETE FROM t")
    for t in range(TIMES):
        for row, time, d in HISTORY:
            if time == t:
                state[row] += d
        con.execute("DELETE FROM t")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", list(state.elements()))
        rows = Counter(tuple(r) for r in con.execute(sql).fetchall())
        expected[t] = (dict(rows), {})
    return SqlCase(sql, _plan(sql), {T: tuple(HISTORY)}, expected)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    con.execute("SET default_null_order = 'nulls_last_on_asc_first_on_desc'")  # PostgreSQL's
    con.execute("CREATE TABLE t (k BIGINT NOT NULL, g TEXT, x BIGINT, y BIGINT NOT NULL)")
    yield con
    con.close()


@pytest.mark.parametrize("sql", CORPUS)
def test_window_queries_answer_as_duckdb_at_every_time(duck: Any, sql: str) -> None:
    check_sql_case(_case(sql, duck), PythonExecutor())


@pytest.mark.parametrize(
    ("sql", "k"),
    [
        (CORPUS[-4], 2),  # rn <= 2
        (CORPUS[-3], 3),  # rn < 4
    ],
)
def test_the_top_k_idiom_lowers_to_a_top_k(sql: str, k: int) -> None:
    text = explain(_plan(sql))
    assert f"limit={k}" in text and "TopK group=[#1{g}]" in text, text


def test_distinct_on_lowers_to_a_top_k_of_one() -> None:
    text = explain(_plan(CORPUS[-2]))
    assert "TopK" in text and "limit=1" in text and "Distinct" not in text, text


SPARK_CORPUS = [CORPUS[i] for i in (0, 3, 6, 8, 12, 14)]


@pytest.mark.spark
@pytest.mark.timeout(900)
@pytest.mark.parametrize("sql", SPARK_CORPUS)
def test_spark_executor_maintains_window_queries_as_duckdb_answers(
    duck: Any, spark: Any, sql: str
) -> None:
    from tidegate.replica.spark import SparkExecutor

    # index_memory_rows=0: the index's history in Spark, so its peeks are Spark jobs too
    check_sql_case(_case(sql, duck), SparkExecutor(spark, index_memory_rows=0))
