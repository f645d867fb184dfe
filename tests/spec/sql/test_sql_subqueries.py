"""Subqueries in expressions and ``LATERAL`` (spec/sql/_subquery.py), checked two ways.

* Against DuckDB, over random histories of two tables with many NULLs: every generated query
  (correlated and uncorrelated scalar subqueries, ``EXISTS``, ``IN``/``NOT IN``,
  ``op ANY/ALL``, in ``SELECT``, ``WHERE``, ``HAVING``, ``CASE``, nested; ``[LEFT] JOIN
  LATERAL``) is lowered once and
  compared at every time with DuckDB's answer, through the reference evaluator, and through
  the ``PythonExecutor`` maintaining it incrementally (what its index emitted, and a peek).
  A scalar subquery with a second row must be an error on both sides: DuckDB's, and
  tidegate's dataflow error ``more than one record produced in subquery``.
* The law that decorrelation preserves results: a correlated subquery's answer equals the
  subquery evaluated once per outer row, with that row's values written into its text as
  literals (an uncorrelated query, so no decorrelation), combined in the test by SQL's rules.
"""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pytest
from bags import same_bag
from hypothesis import given
from hypothesis import strategies as st
from sql_gen import CATALOG, IDS, TIMES, histories, r_rows, s_rows
from test_sql_duckdb_random import _finished, _load

from tidegate.spec.errors import SqlDataError
from tidegate.spec.executor import Executor, PythonExecutor
from tidegate.spec.frontier import Antichain, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, evaluate
from tidegate.spec.plan.scalar_eval import MORE_THAN_ONE_RECORD
from tidegate.spec.protocol.responses import PeekError, PeekRows
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.sql import SelectStmt, lower_query, parse_one

OUT, INDEX = GlobalId.transient(1), GlobalId.transient(2)

CORR = ["s.a = r.a", "s.d = r.b", "s.d < r.a", "s.a = r.a AND s.d IS NOT DISTINCT FROM r.b"]
AGG = ["count(*)", "sum(s.d)", "max(s.d)", "min(s.a)", "count(s.d)"]
LHS = ["r.b", "r.a", "r.f", "NULL", "r.b + 1"]
OPS = ["<", "<=", ">", ">=", "=", "<>"]


@st.composite
def subqueries(draw: st.DrawFn) -> str:
    """A query over r(a, b, c, f) with a subquery over s(a, d) (or r)."""
    corr = draw(st.sampled_from([*CORR, ""]))
    w = f" WHERE {corr}" if corr else ""
    kind = draw(
        st.sampled_from(
            [
                "scalar",
                "scalar_rows",
                "exists",
                "in",
                "quantified",
                "having",
                "case",
                "nested",
                "lateral",
            ]
        )
    )
    if kind == "lateral":
        join = draw(st.sampled_from([", LATERAL", " CROSS JOIN LATERAL", " LEFT JOIN LATERAL"]))
        body = draw(
            st.sampled_from(
                [
                    f"SELECT count(*) AS n FROM s{w}",
                    f"SELECT s.d AS n FROM s{w} ORDER BY s.d DESC NULLS LAST, s.a LIMIT 2",
                    f"SELECT s.d + r.a AS n FROM s{w}",
                ]
            )
        )
        on = " ON true" if "LEFT" in join else ""
        return f"SELECT r.a, r.b, x.n FROM r{join} ({body}) AS x{on}"
    if kind == "scalar":
        return f"SELECT r.a, r.b, (SELECT {draw(st.sampled_from(AGG))} FROM s{w}) FROM r"
    if kind == "scalar_rows":  # a second row is an error
        col = draw(st.sampled_from(["s.d", "s.a"]))
        limit = " ORDER BY 1 DESC NULLS LAST LIMIT 1" if draw(st.booleans()) else ""
        return f"SELECT r.a, (SELECT {col} FROM s{w}{limit}) FROM r"
    if kind == "exists":
        neg = draw(st.sampled_from(["", "NOT "]))
        extra = draw(st.sampled_from(["", " AND s.d > 0", " AND r.c IS NULL"]))
        cond = f"{corr}{extra}" if corr else extra.removeprefix(" AND ")
        body = f"SELECT 1 FROM s WHERE {cond}" if cond else "SELECT 1 FROM s"
        where = draw(st.booleans())
        if where:
            return f"SELECT r.a, r.b FROM r WHERE {neg}EXISTS ({body})"
        return f"SELECT r.a, {neg}EXISTS ({body}) FROM r"
    if kind == "in":
        neg = draw(st.sampled_from(["", "NOT "]))
        lhs = draw(st.sampled_from(LHS))
        col = draw(st.sampled_from(["s.d", "s.a", "s.d + 1"]))
        if draw(st.booleans()):
            return f"SELECT r.a, r.b FROM r WHERE {lhs} {neg}IN (SELECT {col} FROM s{w})"
        return f"SELECT r.a, r.b, {lhs} {neg}IN (SELECT {col} FROM s{w}) FROM r"
    if kind == "quantified":
        lhs = draw(st.sampled_from(LHS))
        op, q = draw(st.sampled_from(OPS)), draw(st.sampled_from(["ANY", "ALL"]))
        return f"SELECT r.a, r.b, {lhs} {op} {q} (SELECT s.d FROM s{w}) FROM r"
    if kind == "having":
        if draw(st.booleans()):  # an aggregate of the outer query left of IN / ALL
            pred = draw(st.sampled_from(["IN", "NOT IN", "> ALL", "<= ANY"]))
            return (
                f"SELECT r.b, max(r.a) FROM r GROUP BY r.b HAVING max(r.a) {pred} "
                f"(SELECT s.d FROM s WHERE s.d IS NOT DISTINCT FROM r.b OR s.a = 0)"
            )
        agg = draw(st.sampled_from(["count(*)", "max(s.d)"]))
        return (
            f"SELECT r.b, count(*) FROM r GROUP BY r.b "
            f"HAVING count(*) >= (SELECT {agg} FROM s WHERE s.d = r.b)"
        )
    if kind == "case":
        return (
            f"SELECT r.a, CASE WHEN r.b IS NULL THEN (SELECT count(*) FROM s{w}) "
            "ELSE r.b END FROM r"
        )
    return (
        "SELECT r.a, r.c FROM r WHERE EXISTS (SELECT 1 FROM s WHERE s.a = r.a AND s.d IN "
        "(SELECT r2.b FROM r AS r2 WHERE r2.c = r.c))"
    )


def _maintained(
    plan: Plan, inputs: dict[GlobalId, list[tuple[Any, int, int]]], ex: Executor | None = None
) -> dict[int, tuple[dict[Any, int], dict[str, int], PeekRows | PeekError]]:
    """The plan on an executor (the ``PythonExecutor`` by default), a time per step: per time,
    the rows and errors its index emitted up to then (accumulated) and what a peek at that
    time answered."""
    ex = ex or PythonExecutor()
    handle = ex.install(
        DataflowDescription(
            "subqueries",
            source_imports=tuple(SourceImport(g) for g in inputs),
            objects_to_build=(BuildDesc(OUT, plan),),
            index_exports=(IndexExport(INDEX, OUT, ()),),
            as_of=Antichain([TIMES[0]]),
        )
    )
    fed = set(ex.source_inputs(handle))
    rows: list[Any] = []
    errors: list[Any] = []
    out: dict[int, tuple[dict[Any, int], dict[str, int], PeekRows | PeekError]] = {}
    for t in TIMES:
        for gid, updates in inputs.items():
            if gid in fed:
                ex.feed(handle, gid, [u for u in updates if u[1] == t], Antichain([t + 1]))
        for batch in ex.step():
            if batch.id == INDEX:
                rows.extend(batch.updates)
                errors.extend(batch.errors)
        peeked = ex.peek(INDEX, t)
        assert isinstance(peeked, PeekRows | PeekError), peeked
        out[t] = (dict(accumulate(rows, t)), dict(accumulate(errors, t)), peeked)
    return out


@pytest.fixture(scope="module")
def duck() -> Any:
    con = duckdb.connect()
    yield con
    con.close()


@given(histories(r_rows), histories(s_rows), subqueries())
def test_subqueries_agree_with_duckdb_at_every_time(
    duck: Any, r: list[tuple[Any, int, int]], s: list[tuple[Any, int, int]], sql: str
) -> None:
    _check(duck, r, s, sql, None)


def _check(
    duck: Any,
    r: list[tuple[Any, int, int]],
    s: list[tuple[Any, int, int]],
    sql: str,
    ex: Executor | None,
) -> None:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, CATALOG, (), stmt.sql)
    inputs = {IDS["r"]: r, IDS["s"]: s}
    maintained = _maintained(low.plan, inputs, ex)
    for t in TIMES:
        _load(duck, "r", r, t)
        _load(duck, "s", s, t)
        try:
            want: list[tuple[Any, ...]] | None = [tuple(x) for x in duck.execute(sql).fetchall()]
        except duckdb.InvalidInputException as e:
            assert "More than one row returned by a subquery" in str(e), e
            want = None
        res = evaluate(low.plan, inputs, t)
        emitted, emitted_errors, peeked = maintained[t]
        if want is None:  # the same error, from the reference and the maintained dataflow
            assert set(res.errors) == {MORE_THAN_ONE_RECORD}, (sql, t, res.errors)
            assert set(emitted_errors) == {MORE_THAN_ONE_RECORD}, (sql, t, emitted_errors)
            assert isinstance(peeked, PeekError), peeked
            assert peeked.message == MORE_THAN_ONE_RECORD, peeked
            continue
        assert not res.errors and not emitted_errors, (sql, t, res.errors, emitted_errors)
        assert isinstance(peeked, PeekRows), (sql, t, peeked)
        for engine, rows in (
            ("reference", res.rows),
            ("index", emitted),
            ("peek", dict(peeked.rows)),
        ):
            got = _finished(rows, low.finishing())
            assert same_bag(got, want), (
                engine,
                sql,
                t,
                sorted(got, key=repr),
                sorted(want, key=repr),
            )


SPARK_QUERIES = [
    "SELECT r.a, r.b, (SELECT count(*) FROM s WHERE s.a = r.a) FROM r",
    "SELECT r.a, (SELECT max(s.d) FROM s WHERE s.d < r.a) FROM r",
    "SELECT r.a, (SELECT s.d FROM s WHERE s.a = r.a) FROM r",
    "SELECT r.a, r.b FROM r WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.d = r.b)",
    "SELECT r.a, r.b, r.b NOT IN (SELECT s.d FROM s WHERE s.a = r.a) FROM r",
    "SELECT r.a, r.b, r.b IN (SELECT s.d FROM s) FROM r",
    "SELECT r.a, r.f, r.f >= ALL (SELECT s.d FROM s WHERE s.a = r.a) FROM r",
    "SELECT r.b, count(*) FROM r GROUP BY r.b "
    "HAVING count(*) >= (SELECT count(*) FROM s WHERE s.d = r.b)",
    "SELECT r.a, x.n FROM r LEFT JOIN LATERAL "
    "(SELECT s.d AS n FROM s WHERE s.a = r.a ORDER BY s.d DESC NULLS LAST, s.a LIMIT 1) x ON true",
]


def _history(rng: random.Random, row: Any) -> list[tuple[Any, int, int]]:
    """Inserts and deletes at each of TIMES (as :func:`sql_gen.histories`), from a seed."""
    present: list[Any] = []
    out: list[tuple[Any, int, int]] = []
    for t in TIMES:
        for _ in range(rng.randint(2, 6)):
            present.append(row(rng))
            out.append((present[-1], t, 1))
        for _ in range(rng.randint(0, 2)):
            out.append((present.pop(rng.randrange(len(present))), t, -1))
    return out


def _small(rng: random.Random) -> int | None:
    return None if rng.random() < 0.3 else rng.randint(-2, 4)


def _r_row(rng: random.Random) -> tuple[Any, ...]:
    f = _small(rng)
    b = _small(rng)
    return (rng.randint(-2, 4), b, rng.choice([None, "x", "y"]), None if f is None else f / 2)


def _s_row(rng: random.Random) -> tuple[Any, ...]:
    return (rng.randint(-2, 4), _small(rng))


@pytest.mark.spark
@pytest.mark.parametrize("sql", SPARK_QUERIES)
def test_subqueries_on_spark_agree_with_duckdb_at_every_time(
    spark: Any, duck: Any, sql: str
) -> None:
    from tidegate.replica.spark import SparkExecutor

    for seed in range(3):
        rng = random.Random(seed)
        r, s = _history(rng, _r_row), _history(rng, _s_row)
        _check(duck, r, s, sql, SparkExecutor(spark))


# -- the law: decorrelation preserves results ----------------------------------------------


def _lit(v: Any, sql_type: str) -> str:
    if v is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return f"CAST({v!r} AS {sql_type})"


_R_TYPES = {"a": "BIGINT", "b": "BIGINT", "c": "TEXT", "f": "DOUBLE PRECISION"}

BODIES = [
    "SELECT s.d FROM s WHERE s.a = {a}",
    "SELECT s.d FROM s WHERE s.d = {b}",
    "SELECT s.d + {a} FROM s WHERE s.d < {a}",
    "SELECT count(*) FROM s WHERE s.d IS NOT DISTINCT FROM {b}",
    "SELECT max(s.d) FROM s WHERE s.a = {a} OR {c} IS NULL",
    "SELECT s.a FROM s WHERE s.a > {a} ORDER BY s.a LIMIT 1",
    "SELECT DISTINCT s.d FROM s WHERE s.a = {a} AND {f} > 0",
    "SELECT s.d FROM s GROUP BY s.d HAVING count(*) > {a}",
]


def _per_row(body: str, row: tuple[Any, ...], s: list[tuple[Any, int, int]], t: int) -> Any:
    """The body with ``row``'s values as literals: an uncorrelated query, evaluated alone."""
    values = {k: _lit(v, _R_TYPES[k]) for k, v in zip("abcf", row, strict=True)}
    stmt = parse_one(body.format(**values))
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, CATALOG, (), stmt.sql)
    res = evaluate(low.relation(), {IDS["s"]: s, IDS["r"]: []}, t)
    return res


def _three_valued_any(x: Any, ys: list[Any], op: str) -> bool | None:
    import operator

    f = {"=": operator.eq, "<": operator.lt, ">=": operator.ge, "<>": operator.ne}[op]
    seen_null = False
    for y in ys:
        if x is None or y is None:
            seen_null = True
        elif f(x, y):
            return True
    return None if seen_null else False


@given(
    histories(r_rows),
    histories(s_rows),
    st.sampled_from(BODIES),
    st.sampled_from(["scalar", "exists", "in", "not_in", "lt_any", "ge_all"]),
)
def test_decorrelation_equals_the_subquery_per_outer_row(
    r: list[tuple[Any, int, int]], s: list[tuple[Any, int, int]], body: str, form: str
) -> None:
    correlated = body.format(a="r.a", b="r.b", c="r.c", f="r.f")
    select = {
        "scalar": f"({correlated})",
        "exists": f"EXISTS ({correlated})",
        "in": f"r.b IN ({correlated})",
        "not_in": f"r.b NOT IN ({correlated})",
        "lt_any": f"r.b < ANY ({correlated})",
        "ge_all": f"r.b >= ALL ({correlated})",
    }[form]
    stmt = parse_one(f"SELECT r.a, r.b, r.c, r.f, {select} FROM r")
    assert isinstance(stmt, SelectStmt)
    plan = lower_query(stmt.query, CATALOG, (), stmt.sql).relation()
    inputs = {IDS["r"]: r, IDS["s"]: s}
    for t in TIMES:
        got = evaluate(plan, inputs, t)
        want: dict[tuple[Any, ...], int] = {}
        error = False
        for row, m in accumulate(r, t).items():
            inner = _per_row(body, row, s, t)
            assert not inner.errors, inner.errors
            values = [v[0] for v, n in inner.rows.items() for _ in range(n)]
            answer: Any
            if form == "scalar":
                if len(values) > 1:
                    error = True
                    continue
                answer = values[0] if values else None
            elif form == "exists":
                answer = bool(values)
            elif form in ("in", "not_in"):
                answer = _three_valued_any(row[1], values, "=")
                if form == "not_in" and answer is not None:
                    answer = not answer
            elif form == "lt_any":
                answer = _three_valued_any(row[1], values, "<")
            else:  # x >= ALL (ys) is NOT (x < ANY (ys))
                neg = _three_valued_any(row[1], values, "<")
                answer = None if neg is None else not neg
            key = (*row, answer)
            want[key] = want.get(key, 0) + m
        if error:
            assert set(got.errors) == {MORE_THAN_ONE_RECORD}, (correlated, t, got.errors)
            continue
        assert not got.errors, (correlated, t, got.errors)
        assert got.rows == want, (select, t, got.rows, want)


def test_a_second_row_is_sqlstate_21000() -> None:
    from tidegate.spec.errors import data_error

    err = data_error(MORE_THAN_ONE_RECORD)
    assert isinstance(err, SqlDataError) and err.sqlstate == "21000"


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        # PostgreSQL computes this max in the enclosing query: refused, never answered otherwise
        ("SELECT r.a, (SELECT max(r.b) FROM s WHERE s.a = r.a) FROM r", "an aggregate in a"),
        ("SELECT r.a FROM r LEFT JOIN s ON r.a = s.a AND EXISTS (SELECT 1 FROM s)", "LEFT JOIN"),
        ("SELECT r.a FROM r WHERE (r.a, r.b) IN (SELECT s.a, s.d FROM s)", "row constructor"),
        ("SELECT count(*) FROM r GROUP BY r.a IN (SELECT s.a FROM s)", "subqueries in GROUP BY"),
        ("SELECT sum((SELECT 1)) FROM r", "subqueries in aggregate function calls"),
        (
            "SELECT r.a FROM r LEFT JOIN LATERAL (SELECT s.d FROM s WHERE s.a = r.a) x ON x.d > 0",
            "LEFT JOIN LATERAL with an ON condition",
        ),
        ("SELECT r.a FROM r, LATERAL generate_series(1, r.a) g", "LATERAL function calls"),
    ],
)
def test_what_is_still_refused_says_so(sql: str, construct: str) -> None:
    from tidegate.spec.errors import UnsupportedSql

    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    with pytest.raises(UnsupportedSql) as info:
        lower_query(stmt.query, CATALOG, (), stmt.sql)
    assert construct in str(info.value), info.value
    assert info.value.sqlstate == "0A000" and info.value.position


def test_a_scalar_subquery_with_two_columns_is_a_syntax_error() -> None:
    from tidegate.spec.errors import SqlSyntaxError

    stmt = parse_one("SELECT (SELECT s.a, s.d FROM s) FROM r")
    assert isinstance(stmt, SelectStmt)
    with pytest.raises(SqlSyntaxError, match="subquery must return only one column"):
        lower_query(stmt.query, CATALOG, (), stmt.sql)


def test_subqueries_nested_too_deep_are_refused_before_lowering() -> None:
    """Lowering a correlated body costs more the deeper it nests: past ``MAX_DEPTH`` levels a
    statement is ``StatementTooComplex`` (54001), typed, at once; up to it, it lowers."""
    from tidegate.spec.errors import StatementTooComplex
    from tidegate.spec.sql._subquery import MAX_DEPTH

    def nested(depth: int) -> str:
        q = "r.a"
        for i in range(depth):
            q = f"(SELECT max(s{i}.d) FROM s AS s{i} WHERE s{i}.a = r.a AND s{i}.d < {q})"
        return f"SELECT r.a, {q} FROM r"

    ok = parse_one(nested(MAX_DEPTH))
    assert isinstance(ok, SelectStmt)
    lower_query(ok.query, CATALOG, (), ok.sql)
    deep = parse_one(nested(MAX_DEPTH + 1))
    assert isinstance(deep, SelectStmt)
    with pytest.raises(StatementTooComplex) as info:
        lower_query(deep.query, CATALOG, (), deep.sql)
    assert info.value.sqlstate == "54001"
