"""The SQL front end without a runtime: parsing to statements, binding errors with positions,
lowering to plans that typecheck, and properties over generated queries."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sql_gen as gen
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import (
    AmbiguousColumn,
    InvalidTextRepresentation,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    TidegateError,
    UndefinedColumn,
    UndefinedObject,
    UnsupportedSql,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import ScalarType, Schema, evaluate, typecheck
from tidegate.spec.sql import (
    AlterRetainHistoryStmt,
    CatalogItem,
    CopyToStmt,
    CreateIndexStmt,
    CreateTableStmt,
    CreateViewStmt,
    DeleteStmt,
    DictCatalog,
    DropStmt,
    ExplainStmt,
    InsertStmt,
    SelectStmt,
    ShowColumnsStmt,
    ShowCreateStmt,
    ShowStmt,
    SubscribeStmt,
    UpdateStmt,
    lower_query,
    parse,
    parse_interval_ms,
    parse_one,
    plan_delete,
    plan_insert,
    plan_update,
    split_statements,
)

T = Schema.of(("id", "int64", False), ("name", "string"), ("amount", "float64"), ("d", "date"))
U = Schema.of(("id", "int64", False), ("city", "string"))
CAT = DictCatalog(
    [
        CatalogItem("t", GlobalId.user(1), T, "table"),
        CatalogItem("u", GlobalId.user(2), U, "table"),
    ]
)


def _lower(sql: str, params: tuple[Any, ...] = ()) -> Any:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt | SubscribeStmt)
    return lower_query(stmt.query, CAT, params, stmt.sql)


def _error(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        _lower(sql)
    return info.value


# -- statements ----------------------------------------------------------------------------------


def test_statements_parse_to_our_ast() -> None:
    ct = parse_one(
        "CREATE TABLE t (a BIGINT NOT NULL, b TEXT, c DOUBLE PRECISION, d DATE, "
        "e TIMESTAMP, f BOOLEAN, g INT, h VARCHAR(3))"
    )
    assert isinstance(ct, CreateTableStmt)
    assert [(c.name, c.type, c.nullable) for c in ct.columns] == [
        ("a", ScalarType.INT64, False),
        ("b", ScalarType.STRING, True),
        ("c", ScalarType.FLOAT64, True),
        ("d", ScalarType.DATE, True),
        ("e", ScalarType.TIMESTAMP, True),
        ("f", ScalarType.BOOL, True),
        ("g", ScalarType.INT32, True),
        ("h", ScalarType.STRING, True),
    ]
    assert isinstance(parse_one("INSERT INTO t VALUES (1)"), InsertStmt)
    assert isinstance(parse_one("INSERT INTO t (id) SELECT id FROM u"), InsertStmt)
    assert isinstance(parse_one("DELETE FROM t WHERE id = 1"), DeleteStmt)
    assert isinstance(parse_one("UPDATE t SET name = 'x' WHERE id = 1"), UpdateStmt)
    ci = parse_one("CREATE INDEX i ON t (id, name)")
    assert isinstance(ci, CreateIndexStmt) and ci.name == "i" and ci.on == "t" and len(ci.keys) == 2
    mv = parse_one("CREATE MATERIALIZED VIEW v AS SELECT 1")
    assert isinstance(mv, CreateViewStmt) and mv.materialized
    v = parse_one("CREATE VIEW v AS SELECT 1")
    assert isinstance(v, CreateViewStmt) and not v.materialized
    s = parse_one("SELECT * FROM t AS OF 42")
    assert isinstance(s, SelectStmt) and s.as_of == 42
    sub = parse_one("SUBSCRIBE TO t AS OF 5")
    assert isinstance(sub, SubscribeStmt) and sub.as_of == 5
    sub2 = parse_one("SUBSCRIBE (SELECT id FROM t)")
    assert isinstance(sub2, SubscribeStmt) and sub2.as_of is None
    ex = parse_one("EXPLAIN PLAN FOR SELECT * FROM t")
    assert isinstance(ex, ExplainStmt) and isinstance(ex.statement, SelectStmt)
    assert parse_one("SHOW TABLES") == ShowStmt("SHOW TABLES", "tables")
    assert parse_one("show materialized views").kind == "materialized-views"  # type: ignore[union-attr]
    assert isinstance(parse_one("SHOW COLUMNS FROM t"), ShowColumnsStmt)
    sc = parse_one("SHOW CREATE MATERIALIZED VIEW v")
    assert isinstance(sc, ShowCreateStmt) and sc.kind == "materialized-view"
    d = parse_one("DROP TABLE IF EXISTS a, b CASCADE")
    assert isinstance(d, DropStmt) and d.names == ("a", "b") and d.cascade and d.if_exists
    assert parse_one("DROP MATERIALIZED VIEW v").kind == "materialized-view"  # type: ignore[union-attr]
    cp = parse_one("COPY (SELECT * FROM t) TO 's3://bucket/p' WITH (FORMAT = 'parquet')")
    assert isinstance(cp, CopyToStmt) and cp.url == "s3://bucket/p"
    al = parse_one("ALTER TABLE t SET (RETAIN HISTORY FOR '1h')")
    assert isinstance(al, AlterRetainHistoryStmt) and al.ms == 3_600_000
    assert parse_one("ALTER INDEX i RESET (RETAIN HISTORY)").ms is None  # type: ignore[union-attr]


def test_statements_split_at_top_level_semicolons_only() -> None:
    parts = split_statements("SELECT 'a;b'; ; SELECT 2;\n")
    assert [p for p, _ in parts] == ["SELECT 'a;b'", " SELECT 2"]
    assert len(parse("CREATE TABLE x (a INT); INSERT INTO x VALUES (1)")) == 2


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1h", 3_600_000), ("30 seconds", 30_000), ("500ms", 500), ("1 day 2 hours", 93_600_000)],
)
def test_intervals(text: str, ms: int) -> None:
    assert parse_interval_ms(text) == ms


# -- errors read like PostgreSQL's ---------------------------------------------------------------


def test_unknown_column_suggests_and_points_at_it() -> None:
    e = _error("SELECT nmae FROM t")
    assert isinstance(e, UndefinedColumn)
    assert e.position == 8 and e.hint == 'Perhaps you meant to reference the column "name".'
    assert e.render() == (
        'ERROR:  column "nmae" does not exist\n'
        "LINE 1: SELECT nmae FROM t\n"
        "               ^\n"
        'HINT:  Perhaps you meant to reference the column "name".'
    )


def test_positions_count_lines() -> None:
    e = _error("SELECT id,\n  bogus\nFROM t")
    assert e.line_col() == (2, 3)
    assert "LINE 2:   bogus" in e.render()


def test_ambiguous_column() -> None:
    e = _error("SELECT id FROM t, u")
    assert isinstance(e, AmbiguousColumn) and e.position == 8
    assert 'column reference "id" is ambiguous' in str(e)


def test_type_mismatch_names_both_types() -> None:
    e = _error("SELECT name + 1 FROM t")
    assert isinstance(e, SqlTypeError) and e.position == 8
    assert e.message == "operator does not exist: text + integer"
    e = _error("SELECT * FROM t WHERE d = 'not a date'")
    assert isinstance(e, InvalidTextRepresentation) and e.sqlstate == "22P02"
    assert "invalid input syntax for type date" in e.message
    e = _error("SELECT id FROM t UNION SELECT city FROM u")
    assert "bigint and text cannot be matched" in e.message


def test_unknown_relation_suggests() -> None:
    e = _error("SELECT * FROM tt")
    assert (
        isinstance(e, UndefinedObject) and e.position == 15 and e.hint == 'Perhaps you meant "t".'
    )


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT id FROM t GROUP BY id IN (SELECT id FROM u)", "subqueries in GROUP BY"),
        ("SELECT ntile(2) OVER (ORDER BY id) FROM t", "ntile"),
        ("SELECT sum((SELECT 1)) FROM t", "subqueries in aggregate function calls"),
        ("SELECT stddev(amount) FROM t", "stddev"),
        ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", "WITH RECURSIVE"),
        ("SELECT rank() OVER w FROM t WINDOW w AS (ORDER BY id)", "WINDOW"),
    ],
)
def test_unsupported_sql_names_the_construct_and_its_position(sql: str, construct: str) -> None:
    e = _error(sql)
    assert isinstance(e, UnsupportedSql), e
    assert construct in str(e) and e.position is not None


def test_syntax_errors_have_positions() -> None:
    with pytest.raises(SqlSyntaxError) as info:
        parse_one("SELECT FROM WHERE")
    assert info.value.position is not None and "syntax error" in str(info.value)


def test_grouping_errors() -> None:
    e = _error("SELECT name, count(*) FROM t")
    assert "must appear in the GROUP BY clause" in e.message and e.position == 8
    e = _error("SELECT id FROM t WHERE sum(id) > 1")
    assert "aggregate functions are not allowed in WHERE" in e.message


# -- lowering ------------------------------------------------------------------------------------

ROWS = {
    GlobalId.user(1): [
        ((1, "a", 1.5, dt.date(2020, 1, 1)), 0, 1),
        ((2, "b", None, None), 0, 1),
        ((3, "a", 4.0, dt.date(2021, 1, 1)), 0, 1),
    ],
    GlobalId.user(2): [((1, "x"), 0, 1), ((3, "y"), 0, 1), ((4, "z"), 0, 1)],
}


def _run(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    from tidegate.spec.plan.ordering import apply_finishing

    low = _lower(sql, params)
    res = evaluate(low.plan, ROWS, 0)
    out: list[tuple[Any, ...]] = []
    for r, c in apply_finishing(res.rows, low.finishing()):
        out.extend([r] * c)
    return out


def test_global_aggregates_answer_one_row_over_nothing() -> None:
    assert _run("SELECT count(*), sum(amount) FROM t WHERE id > 10") == [(0, None)]


def test_order_by_hidden_columns_and_names() -> None:
    low = _lower("SELECT name AS n FROM t ORDER BY amount DESC NULLS LAST, id LIMIT 2")
    assert low.names == ("n",)
    assert _run("SELECT name AS n FROM t ORDER BY amount DESC NULLS LAST, id LIMIT 2") == [
        ("a",),
        ("a",),
    ]
    view = low.relation()
    assert typecheck(view).names == ("n",)


def test_parameters() -> None:
    assert _run("SELECT id FROM t WHERE name = $1 AND id > $2", ("a", 1)) == [(3,)]


def test_a_parameter_then_an_empty_string_at_the_end_parses() -> None:
    """sqlglot's tokenizer alone refuses this text (an empty literal last, after a ``$n``);
    drivers send it (the simulator's SQL clients found it)."""
    assert _run("SELECT id FROM t WHERE name <> $1 AND name <> ''", ("b",)) == _run(
        "SELECT id FROM t WHERE name <> 'b'", ()
    )
    assert split_statements("SELECT $1 = '';SELECT $1 = ''") == [
        ("SELECT $1 = ''", 0),
        ("SELECT $1 = ''", 15),
    ]


def test_views_inline_their_plans() -> None:
    base = _lower("SELECT id, name FROM t WHERE id > 1").relation()
    cat = DictCatalog(
        [*CAT.items(), CatalogItem("v", GlobalId.transient(1 << 40), typecheck(base), "view", base)]
    )
    stmt = parse_one("SELECT name FROM v")
    low = lower_query(stmt.query, cat)  # type: ignore[union-attr]
    assert sorted(evaluate(low.plan, ROWS, 0).rows) == [(("a",)), ("b",)]


def test_writes() -> None:
    ins = plan_insert(parse_one("INSERT INTO t (id, amount) VALUES (7, 2), (8, NULL)"), CAT)  # type: ignore[arg-type]
    assert ins.rows == ((7, None, 2.0, None), (8, None, None, None))
    with pytest.raises(SqlError, match="violates not-null constraint"):
        plan_insert(parse_one("INSERT INTO t (name) VALUES ('x')"), CAT)  # type: ignore[arg-type]
    with pytest.raises(InvalidTextRepresentation):  # as PostgreSQL: 22P02
        plan_insert(parse_one("INSERT INTO t VALUES ('x', 'y', 1, NULL)"), CAT)  # type: ignore[arg-type]
    d = plan_delete(parse_one("DELETE FROM t WHERE name = 'a'"), CAT)  # type: ignore[arg-type]
    assert d.plan is not None and len(evaluate(d.plan, ROWS, 0).rows) == 2
    u = plan_update(parse_one("UPDATE t SET amount = amount * 2 WHERE id = 1"), CAT)  # type: ignore[arg-type]
    assert u.plan is not None
    assert list(evaluate(u.plan, ROWS, 0).rows) == [
        (1, "a", 1.5, dt.date(2020, 1, 1), 1, "a", 3.0, dt.date(2020, 1, 1))
    ]


# -- properties ----------------------------------------------------------------------------------

_COLS = ["id", "name", "amount", "d", "t.id", "nope"]
_OPS = ["=", "<", ">", "<>", "+", "*", "AND", "OR", "||"]
_ATOMS = st.sampled_from(
    ["id", "name", "amount", "d", "1", "2.5", "'a'", "NULL", "TRUE", "nope", "t.id"]
)


@st.composite
def _exprs(draw: st.DrawFn, depth: int = 0) -> str:
    if depth > 2 or draw(st.booleans()):
        return draw(_ATOMS)
    op = draw(st.sampled_from(_OPS))
    return f"({draw(_exprs(depth + 1))} {op} {draw(_exprs(depth + 1))})"


@given(st.lists(_exprs(), min_size=1, max_size=3), st.one_of(st.none(), _exprs()))
def test_any_query_either_lowers_to_a_typechecked_plan_or_is_a_typed_sql_error(
    items: list[str], where: str | None
) -> None:
    sql = f"SELECT {', '.join(items)} FROM t" + (f" WHERE {where}" if where else "")
    try:
        low = _lower(sql)
    except SqlError as e:
        assert e.sql == sql
        assert e.position is None or 1 <= e.position <= len(sql)
        return
    schema = typecheck(low.plan)
    assert schema.types[: low.arity] == low.types
    res = evaluate(low.plan, ROWS, 0)  # runs, rows or evaluation errors
    assert isinstance(res.rows, dict)


@given(st.text(alphabet=st.sampled_from(list("SELECT FROMWHERt(),;'*1=ab\n")), max_size=40))
def test_garbage_is_refused_typed(text: str) -> None:
    try:
        for stmt in parse(text):
            if isinstance(stmt, SelectStmt):
                lower_query(stmt.query, CAT)
    except TidegateError:
        pass


# -- round trips ---------------------------------------------------------------------------------


@given(gen.histories(gen.r_rows), gen.histories(gen.s_rows), gen.queries())
def test_lowering_round_trips_through_sql_text_subqueries_and_views(
    r: list[Any], s: list[Any], sql: str
) -> None:
    """The same answer, at every time, from: the query; the query as sqlglot prints it back;
    ``SELECT * FROM (query)``; and a view defined by the query."""
    inputs = {gen.IDS["r"]: r, gen.IDS["s"]: s}
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    low = lower_query(stmt.query, gen.CATALOG)
    printed = parse_one(stmt.query.sql(dialect="postgres"))
    again = lower_query(printed.query, gen.CATALOG)  # type: ignore[union-attr]
    assert again.plan == low.plan and again.names == low.names
    sub = parse_one(f"SELECT * FROM ({sql}) AS sub")
    nested = lower_query(sub.query, gen.CATALOG)  # type: ignore[union-attr]
    view_plan = low.relation()
    cat = DictCatalog(
        [
            *gen.CATALOG.items(),
            CatalogItem("v", GlobalId.transient(1 << 40), typecheck(view_plan), "view", view_plan),
        ]
    )
    via_view = lower_query(parse_one("SELECT * FROM v").query, cat)  # type: ignore[union-attr]
    assert nested.names == low.names == via_view.names
    for t in gen.TIMES:
        want = evaluate(view_plan, inputs, t)
        for other in (nested, via_view):
            got = evaluate(other.plan, inputs, t)
            assert got.rows == want.rows and got.errors == want.errors, (sql, t)
