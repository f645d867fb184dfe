"""``CREATE SOURCE``, ``CREATE SINK``, ``DROP SOURCE/SINK`` and ``SHOW SOURCES/SINKS`` parse to
their statements; bad input is a typed error with a position."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import SqlError, SqlSyntaxError, UnsupportedSql
from tidegate.spec.sql import (
    CreateSinkStmt,
    CreateSourceStmt,
    DropStmt,
    ShowCreateStmt,
    ShowStmt,
    parse,
    parse_one,
)
from tidegate.spec.storage import IcebergSink, LoadGenerator, PostgresSource


def test_a_load_generator_source_with_and_without_options() -> None:
    stmt = parse_one("create source counter from load generator counter")
    assert stmt == CreateSourceStmt(
        "create source counter from load generator counter", "counter", LoadGenerator()
    )
    text = (
        'CREATE SOURCE IF NOT EXISTS "Bids" FROM LOAD GENERATOR AUCTION '
        "(TICK INTERVAL = '250ms', SEED 9, max cardinality 100, ROWS PER TICK 3)"
    )
    stmt = parse_one(text)
    assert isinstance(stmt, CreateSourceStmt)
    assert (stmt.name, stmt.if_not_exists) == ("Bids", True)
    assert stmt.connection == LoadGenerator("auction", 250, 9, 100, 3)


def test_a_postgres_source_and_an_iceberg_sink() -> None:
    stmt = parse_one(
        "CREATE SOURCE orders FROM POSTGRES CONNECTION 'postgresql://u:p@h:5432/db' "
        "(PUBLICATION 'pub', TABLE 'public.orders', SLOT 'orders_slot')"
    )
    assert isinstance(stmt, CreateSourceStmt)
    assert stmt.connection == PostgresSource(
        "postgresql://u:p@h:5432/db", "public.orders", "pub", "orders_slot"
    )
    stmt = parse_one(
        "CREATE SINK out FROM orders INTO ICEBERG CATALOG 'sqlite:////tmp/c.db' "
        "(TABLE 'ns.orders', WAREHOUSE 'file:///tmp/w')"
    )
    assert isinstance(stmt, CreateSinkStmt)
    assert (stmt.name, stmt.from_name) == ("out", "orders")
    assert stmt.connection == IcebergSink("sqlite:////tmp/c.db", "file:///tmp/w", "ns.orders")
    assert stmt.connection.commit_interval_ms == 1_000  # Materialize's floor, our default
    paced = parse_one(
        "CREATE SINK out FROM orders INTO ICEBERG CATALOG 'c' (TABLE 'ns.o', WAREHOUSE 'w') "
        "with (commit interval = '5s')"
    )
    assert isinstance(paced, CreateSinkStmt)
    assert paced.connection == IcebergSink("c", "w", "ns.o", commit_interval_ms=5_000)
    minute = parse_one(
        "CREATE SINK out FROM orders INTO ICEBERG CATALOG 'c' (TABLE 'ns.o', WAREHOUSE 'w') "
        "WITH (COMMIT INTERVAL '1 minute')"
    )
    assert isinstance(minute, CreateSinkStmt)
    assert minute.connection.commit_interval_ms == 60_000
    quoted = parse_one(
        "CREATE SOURCE s FROM POSTGRES CONNECTION 'it''s' (PUBLICATION 'p', TABLE 't', SLOT 's')"
    )
    assert isinstance(quoted, CreateSourceStmt)
    assert isinstance(quoted.connection, PostgresSource) and quoted.connection.url == "it's"


def test_drop_and_show_of_sources_and_sinks() -> None:
    [a, b, c, d, e] = parse(
        'DROP SOURCE IF EXISTS a, "B" CASCADE; DROP SINK k; SHOW SOURCES; SHOW SINKS; '
        "SHOW CREATE SINK k"
    )
    assert a == DropStmt('DROP SOURCE IF EXISTS a, "B" CASCADE', "source", ("a", "B"), True, True)
    assert isinstance(b, DropStmt) and (b.kind, b.names, b.cascade) == ("sink", ("k",), False)
    assert isinstance(c, ShowStmt) and c.kind == "sources"
    assert isinstance(d, ShowStmt) and d.kind == "sinks"
    assert isinstance(e, ShowCreateStmt) and (e.kind, e.name) == ("sink", "k")


@pytest.mark.parametrize(
    ("text", "error", "at"),
    [
        ("CREATE SOURCE s FROM KAFKA BROKER 'x'", UnsupportedSql, "KAFKA"),
        ("CREATE SOURCE s FROM LOAD GENERATOR TPCH", UnsupportedSql, "TPCH"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER FOR ALL TABLES", UnsupportedSql, "FOR"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (SEED 1, SEED 2)", SqlSyntaxError, "SEED 2"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (SEED 'x')", SqlSyntaxError, "'x'"),
        (
            "CREATE SOURCE s FROM LOAD GENERATOR COUNTER (TICK INTERVAL 'soon')",
            SqlSyntaxError,
            "'soon'",
        ),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (COLOR 'red')", SqlSyntaxError, "COLOR"),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (SEED 1", SqlSyntaxError, None),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER (MAX CARDINALITY 0)", SqlSyntaxError, "0)"),
        ("CREATE SOURCE s FROM POSTGRES CONNECTION pg (PUBLICATION 'p')", UnsupportedSql, "pg"),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION 'u' (PUBLICATION 'p', TABLE 't')",
            SqlSyntaxError,
            "POSTGRES",
        ),
        (
            "CREATE SOURCE s FROM POSTGRES CONNECTION 'u' (TABLE '', SLOT 's', PUBLICATION 'p')",
            SqlSyntaxError,
            "''",
        ),
        ("CREATE SOURCE s FROM POSTGRES CONNECTION 'unterminated", SqlSyntaxError, "'unterminated"),
        ("CREATE SOURCE public.s FROM LOAD GENERATOR COUNTER", UnsupportedSql, "public"),
        ("CREATE SINK k FROM t INTO KAFKA CONNECTION k", UnsupportedSql, "KAFKA"),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG 'c' (WAREHOUSE 'w')",
            SqlSyntaxError,
            "ICEBERG",
        ),
        ("CREATE SINK k FROM t", SqlSyntaxError, None),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG 'c' (WAREHOUSE 'w', TABLE 'n.t') "
            "WITH (COMMIT INTERVAL = '500ms')",
            SqlSyntaxError,
            "'500ms'",
        ),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG 'c' (WAREHOUSE 'w', TABLE 'n.t') "
            "WITH (COMMIT INTERVAL = 'often')",
            SqlSyntaxError,
            "'often'",
        ),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG 'c' (WAREHOUSE 'w', TABLE 'n.t') "
            "WITH (COMMIT INTERVAL = 5)",
            SqlSyntaxError,
            "5)",
        ),
        (
            "CREATE SINK k FROM t INTO ICEBERG CATALOG 'c' (WAREHOUSE 'w', TABLE 'n.t') "
            "WITH (SNAPSHOT = false)",
            SqlSyntaxError,
            "SNAPSHOT",
        ),
        ("CREATE SOURCE s FROM LOAD GENERATOR COUNTER extra", SqlSyntaxError, "extra"),
        ("DROP SOURCE", SqlSyntaxError, None),
        ("SHOW SOURCES FROM x", UnsupportedSql, None),
    ],
)
def test_bad_statements_are_typed_and_located(
    text: str, error: type[SqlError], at: str | None
) -> None:
    with pytest.raises(error) as e:
        parse_one(text)
    assert e.value.sql == text
    if at is not None:
        assert e.value.position == text.index(at) + 1, e.value.render()


@given(
    kind=st.sampled_from(["counter", "auction"]),
    tick=st.one_of(st.none(), st.integers(1, 10**7)),
    seed=st.one_of(st.none(), st.integers(0, 2**40)),
    cardinality=st.one_of(st.none(), st.integers(1, 10**9)),
    rows=st.one_of(st.none(), st.integers(1, 1000)),
    case=st.sampled_from([str.upper, str.lower]),
)
def test_load_generator_options_read_back_as_written(
    kind: str,
    tick: int | None,
    seed: int | None,
    cardinality: int | None,
    rows: int | None,
    case: object,
) -> None:
    options = []
    if tick is not None:
        options.append(f"TICK INTERVAL '{tick}ms'")
    if seed is not None:
        options.append(f"SEED = {seed}")
    if cardinality is not None:
        options.append(f"MAX CARDINALITY {cardinality}")
    if rows is not None:
        options.append(f"ROWS PER TICK {rows}")
    head = case(f"CREATE SOURCE s FROM LOAD GENERATOR {kind}")  # type: ignore[operator]
    text = head + (f" ({', '.join(options)})" if options else "")
    stmt = parse_one(text)
    assert isinstance(stmt, CreateSourceStmt)
    assert stmt.connection == LoadGenerator(
        kind,  # type: ignore[arg-type]
        1000 if tick is None else tick,
        0 if seed is None else seed,
        cardinality,
        1 if rows is None else rows,
    )
