"""The SQL generator's reference plans mean what its SQL text means: DuckDB is the judge.

The simulator's SQL clients (:mod:`tidegate.sim.sql_clients`) judge the product's
answers to drawn queries by the reference plan :mod:`tidegate.sim.sql_gen` builds
beside each query's text -- built with the plan IR's constructors, sharing no code
with the SQL front end under test (``tidegate.spec.sql``). Those plans are only as
good as the generator's reading of SQL, so here an engine we did not write reads
the same text: for many draws, over random table contents, DuckDB's answer to the
SQL (with PostgreSQL's NULL ordering) must be the reference evaluator's answer to
the plan, row for row where the query orders them, as bags otherwise.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import duckdb
import pytest

from tidegate.sim.choices import SeededChoices, chance, pick
from tidegate.sim.scenario import small
from tidegate.sim.sql_clients import POOL
from tidegate.sim.sql_gen import CONSTRUCTS, DISABLED, WORDS, Query, QueryInput, SqlGen, symbol
from tidegate.spec.plan import Get, Schema, evaluate, reference_peek
from tidegate.spec.plan.ordering import apply_finishing
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.sql import CatalogItem, DictCatalog, SelectStmt, lower_query, parse_one

_TABLES: list[tuple[str, Schema]] = [(t.id, t.schema) for t in small().tables]
_TABLES += [(p.name, p.schema) for p in POOL]
_DUCK_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "bool": "BOOLEAN"}


def _relations() -> list[QueryInput]:
    return [QueryInput(n, s, Get(symbol(k), s)) for k, (n, s) in enumerate(_TABLES)]


def _contents(choices: SeededChoices) -> dict[str, list[tuple[Any, ...]]]:
    """A few rows per table, NULLs where a column allows them, duplicates possible."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for name, schema in _TABLES:
        rows = []
        for _ in range(choices.integer(0, 6)):
            row: list[Any] = []
            for c in schema.columns:
                if c.type.nullable and chance(choices, 200):
                    row.append(None)
                elif c.type.scalar.value == "string":
                    row.append(pick(choices, WORDS))
                elif c.type.scalar.value == "bool":
                    row.append(bool(choices.integer(0, 1)))
                else:
                    row.append(choices.integer(0, 9))
            rows.append(tuple(row))
        out[name] = rows
    return out


def _load(con: Any, contents: dict[str, list[tuple[Any, ...]]]) -> None:
    for name, schema in _TABLES:
        cols = ", ".join(f"{c.name} {_DUCK_TYPES[c.type.scalar.value]}" for c in schema.columns)
        con.execute(f"CREATE OR REPLACE TABLE {name} ({cols})")
        rows = contents[name]
        if rows:
            marks = ", ".join("?" for _ in schema.columns)
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", [list(r) for r in rows])


def _reference(q: Query, contents: dict[str, list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    inputs = {
        symbol(k): [(row, 0, 1) for row in contents[name]] for k, (name, _) in enumerate(_TABLES)
    }
    result = reference_peek(evaluate(q.plan, inputs, 0), q.finishing())
    assert isinstance(result, PeekRows), result
    return [row for row, n in result.rows for _ in range(n)]


def _norm(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Floats (averages) rounded, so the two engines' last bits do not matter."""
    return tuple(round(v, 9) if isinstance(v, float) and math.isfinite(v) else v for v in row)


_DEFAULT_ESCAPE = re.compile(r"(I?LIKE '[^']*\\[^']*')(?! ESCAPE)")


def _duck_sql(sql: str) -> str:
    """``sql`` as DuckDB reads it: a LIKE pattern relying on PostgreSQL's default escape
    (backslash; DuckDB has none) says it."""
    return _DEFAULT_ESCAPE.sub(r"\1 ESCAPE '\\'", sql)


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    con.execute("SET default_null_order = 'nulls_last_on_asc_first_on_desc'")  # PostgreSQL's
    yield con
    con.close()


@pytest.mark.parametrize("seed", range(8))
def test_drawn_queries_mean_on_duckdb_what_their_reference_plans_say(duck: Any, seed: int) -> None:
    choices = SeededChoices(seed)
    used: Counter[str] = Counter()
    for _ in range(40):
        contents = _contents(choices)
        _load(duck, contents)
        q = SqlGen(choices, _relations(), params=True).query()
        used.update(q.constructs)
        got = [_norm(tuple(r)) for r in duck.execute(_duck_sql(q.sql), list(q.params)).fetchall()]
        want = [_norm(r) for r in _reference(q, contents)]
        if q.order_by:
            assert got == want, q.sql
        else:
            assert Counter(got) == Counter(want), q.sql
    assert len(used) >= 12, used  # the draws reach much of the language


def test_every_construct_is_drawn_somewhere_unless_disabled() -> None:
    choices = SeededChoices(99)
    used: set[str] = set()
    for _ in range(600):
        used.update(SqlGen(choices, _relations(), params=True, now_ms=5000).query().constructs)
    missing = set(CONSTRUCTS) - set(DISABLED) - used
    assert not missing, missing


_NEWER = {
    # the constructs of the window, Top-K, DISTINCT ON, subquery and LIKE shapes, each of which
    # a draw below must reach
    "window_row_number",
    "window_rank",
    "window_dense_rank",
    "window_lag",
    "window_lead",
    "window_aggregate",
    "window_rows_frame",
    "topk_row_number",
    "topk_rank",
    "distinct_on",
    "scalar_subquery",
    "correlated_scalar_subquery",
    "subquery_in_where",
    "exists",
    "correlated_exists",
    "not_exists",
    "in_subquery",
    "not_in_subquery",
    "in_subquery_value",
    "ilike",
    "like_escape",
    "like_default_escape",
    "not_like",
}
_CATALOG = DictCatalog(CatalogItem(n, symbol(k), s, "table") for k, (n, s) in enumerate(_TABLES))


def _front_end(q: Query, contents: dict[str, list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """The product's answer: the text through the SQL front end, its plan evaluated."""
    stmt = parse_one(q.sql)
    assert isinstance(stmt, SelectStmt)
    lowered = lower_query(stmt.query, _CATALOG, list(q.params), stmt.sql)
    inputs = {
        symbol(k): [(row, 0, 1) for row in contents[name]] for k, (name, _) in enumerate(_TABLES)
    }
    result = evaluate(lowered.plan, inputs, 0)
    assert not result.errors, (q.sql, result.errors)
    return [row for row, n in apply_finishing(result.rows, lowered.finishing()) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_the_front_end_answers_drawn_queries_as_their_reference_plans(seed: int) -> None:
    """What the SQL clients judge under faults, without them: the front end accepts every draw
    of the window, Top-K, DISTINCT ON, subquery and LIKE shapes (among the others), and its
    plan answers what the reference plan answers (NULLs in the data: ``NOT IN``'s rule)."""
    choices = SeededChoices(1000 + seed)
    used: Counter[str] = Counter()
    for _ in range(150):
        contents = _contents(choices)
        q = SqlGen(choices, _relations(), params=True).query()
        used.update(q.constructs)
        got = [_norm(r) for r in _front_end(q, contents)]
        want = [_norm(r) for r in _reference(q, contents)]
        if q.order_by:
            assert got == want, q.sql
        else:
            assert Counter(got) == Counter(want), q.sql
    assert len(_NEWER & set(used)) >= 12, sorted(_NEWER - set(used))


def test_the_newer_shapes_are_drawn_and_mean_on_duckdb_what_their_plans_say(duck: Any) -> None:
    """Every window, Top-K, DISTINCT ON, subquery and LIKE construct is drawn, and DuckDB
    answers each such draw as its reference plan does."""
    choices = SeededChoices(7)
    used: set[str] = set()
    judged = 0
    for _ in range(900):
        contents = _contents(choices)
        q = SqlGen(choices, _relations(), params=True).query()
        if not _NEWER & set(q.constructs):
            continue
        used.update(q.constructs)
        judged += 1
        _load(duck, contents)
        got = [_norm(tuple(r)) for r in duck.execute(_duck_sql(q.sql), list(q.params)).fetchall()]
        want = [_norm(r) for r in _reference(q, contents)]
        if q.order_by:
            assert got == want, q.sql
        else:
            assert Counter(got) == Counter(want), q.sql
    assert not _NEWER - used, sorted(_NEWER - used)
    assert judged >= 100, judged


def test_temporal_filters_mean_at_each_time_what_duckdb_answers_with_that_time(duck: Any) -> None:
    """Drawn ``mz_now()`` filters, judged at times around the draw's: DuckDB answers the text
    with ``mz_now()`` replaced by the time (a plain comparison it reads as PostgreSQL does),
    and both the reference plan (its ``TemporalFilter``) and the front end's plan, evaluated
    at that time, answer the same rows."""
    choices = SeededChoices(11)
    now = 5000
    judged = 0
    for _ in range(600):
        contents = _contents(choices)
        q = SqlGen(choices, _relations(), params=True, now_ms=now).query()
        if "temporal_filter" not in q.constructs:
            continue
        judged += 1
        _load(duck, contents)
        inputs = {
            symbol(k): [(row, 0, 1) for row in contents[name]]
            for k, (name, _) in enumerate(_TABLES)
        }
        stmt = parse_one(q.sql)
        assert isinstance(stmt, SelectStmt)
        lowered = lower_query(stmt.query, _CATALOG, list(q.params), stmt.sql)
        for t in sorted({0, now - 1501, now - 1, now, now + 7, now + 1000, now + 3011}):
            text = _duck_sql(q.sql).replace("mz_now()", str(t))
            got = [_norm(tuple(r)) for r in duck.execute(text, list(q.params)).fetchall()]
            ref = reference_peek(evaluate(q.plan, inputs, t), q.finishing())
            front = reference_peek(evaluate(lowered.plan, inputs, t), lowered.finishing())
            assert isinstance(ref, PeekRows) and ref == front, (q.sql, t, ref, front)
            want = [_norm(r) for r, n in ref.rows for _ in range(n)]
            if q.order_by:
                assert got == want, (q.sql, t)
            else:
                assert Counter(got) == Counter(want), (q.sql, t)
    assert judged >= 40, judged
