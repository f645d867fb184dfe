"""Window functions and DISTINCT ON in the SQL front end: what is refused, and with which error.

Answers are checked against DuckDB in ``test_sql_duckdb_windows.py`` and against PostgreSQL
in ``tests/slt/windows.slt``.
"""

from __future__ import annotations

import pytest

from tidegate.spec.errors import InvalidColumnReference, SqlError, UnsupportedSql
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.sql import CatalogItem, DictCatalog, SelectStmt, lower_query, parse_one

CATALOG = DictCatalog(
    [
        CatalogItem(
            "t",
            GlobalId.user(1),
            Schema.of(("id", "int64", False), ("g", "string"), ("x", "float64"), ("d", "date")),
            "table",
        )
    ]
)


def _error(sql: str) -> SqlError:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    with pytest.raises(SqlError) as info:
        lower_query(stmt.query, CATALOG, (), stmt.sql)
    return info.value


@pytest.mark.parametrize(
    ("sql", "construct"),
    [
        ("SELECT ntile(2) OVER (ORDER BY id) FROM t", "ntile"),
        ("SELECT nth_value(x, 2) OVER (ORDER BY id) FROM t", "nth_value"),
        ("SELECT rank() OVER w FROM t WINDOW w AS (ORDER BY id)", "WINDOW"),
        ("SELECT count(*) OVER (ORDER BY id GROUPS 1 PRECEDING) FROM t", "GROUPS"),
        (
            "SELECT count(*) OVER (ORDER BY id ROWS 1 PRECEDING EXCLUDE CURRENT ROW) FROM t",
            "EXCLUDE",
        ),
        ("SELECT count(DISTINCT g) OVER (PARTITION BY id) FROM t", "DISTINCT"),
        ("SELECT count(*) OVER (ORDER BY d RANGE 1 PRECEDING) FROM t", "RANGE offsets"),
    ],
)
def test_unsupported_window_constructs_are_named(sql: str, construct: str) -> None:
    e = _error(sql)
    assert isinstance(e, UnsupportedSql) and construct in str(e), e
    assert e.position is not None


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT id FROM t WHERE rank() OVER (ORDER BY id) > 1", "not allowed in WHERE"),
        ("SELECT count(*) FROM t GROUP BY rank() OVER ()", "not allowed in GROUP BY"),
        (
            "SELECT count(*) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM t",
            "frame starting from current row cannot have preceding rows",
        ),
        (
            "SELECT count(*) OVER (ORDER BY id, g RANGE 1 PRECEDING) FROM t",
            "requires exactly one ORDER BY column",
        ),
        ("SELECT upper(g) OVER () FROM t", "is not a window function"),
    ],
)
def test_windowing_errors_are_postgresql_s(sql: str, message: str) -> None:
    e = _error(sql)
    assert message in str(e) and e.sqlstate == "42P20", (e, e.sqlstate)


def test_distinct_on_must_lead_the_order_by() -> None:
    e = _error("SELECT DISTINCT ON (g) g, id FROM t ORDER BY id, g")
    assert isinstance(e, InvalidColumnReference)
    assert "must match initial ORDER BY" in str(e) and e.sqlstate == "42P10"
    e = _error("SELECT DISTINCT ON (3) g, id FROM t")
    assert "DISTINCT ON position 3 is not in select list" in str(e)
