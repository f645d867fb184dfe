"""Generators shared by the SQL tests: two tables, data histories, queries of the supported subset."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.sql import CatalogItem, DictCatalog

__all__ = ["CATALOG", "DDL", "IDS", "TIMES", "R", "S", "histories", "queries", "r_rows", "s_rows"]

R = Schema.of(("a", "int64", False), ("b", "int64"), ("c", "string"), ("f", "float64"))
S = Schema.of(("a", "int64", False), ("d", "int64"))
IDS = {"r": GlobalId.user(1), "s": GlobalId.user(2)}
CATALOG = DictCatalog(
    [CatalogItem("r", IDS["r"], R, "table"), CatalogItem("s", IDS["s"], S, "table")]
)
DDL = {
    "r": "a BIGINT NOT NULL, b BIGINT, c TEXT, f DOUBLE",
    "s": "a BIGINT NOT NULL, d BIGINT",
}
TIMES = (0, 1, 2)

small = st.integers(-3, 5)
r_rows = st.tuples(
    small,
    st.one_of(st.none(), small),
    st.one_of(st.none(), st.sampled_from(["x", "xy", "y", "zz"])),
    st.one_of(st.none(), st.integers(-20, 20).map(lambda n: n / 4)),
)
s_rows = st.tuples(small, st.one_of(st.none(), small))


@st.composite
def histories(draw: st.DrawFn, rows: st.SearchStrategy[Any]) -> list[tuple[Any, int, int]]:
    """Updates ``(row, time, diff)``: inserts, and deletes of rows present at the time."""
    present: list[Any] = []
    out: list[tuple[Any, int, int]] = []
    for t in TIMES:
        for row in draw(st.lists(rows, max_size=5)):
            out.append((row, t, 1))
            present.append(row)
        if present:
            for i in sorted(
                set(draw(st.lists(st.integers(0, len(present) - 1), max_size=2))), reverse=True
            ):
                out.append((present.pop(i), t, -1))
    return out


INT_EXPR = st.sampled_from(
    [
        "a",
        "b",
        "a + b",
        "a * 2",
        "coalesce(b, 0)",
        "-a",
        "a - 1",
        "CASE WHEN b > 1 THEN a ELSE 0 END",
    ]
)
PRED = st.sampled_from(
    [
        "a > 1",
        "b IS NULL",
        "b IS NOT NULL AND b < a",
        "c LIKE 'x%'",
        "NOT (a = 2)",
        "a BETWEEN 0 AND 3 OR c = 'zz'",
        "f > 0.5",
        "a IN (1, 2, 5)",
        "coalesce(c, 'none') <> 'y'",
        "length(c) = 2",
    ]
)
AGG = st.sampled_from(
    [
        "count(*)",
        "count(b)",
        "sum(b)",
        "min(c)",
        "max(a)",
        "sum(f)",
        "avg(b)",
        "count(DISTINCT b)",
        "sum(DISTINCT a)",
    ]
)
KEY = st.sampled_from(["a", "b", "c", "a % 2"])


@st.composite
def queries(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["project", "group", "join", "setop", "distinct", "global"]))
    where = f" WHERE {draw(PRED)}" if draw(st.booleans()) else ""
    if kind == "project":
        items = draw(st.lists(INT_EXPR, min_size=1, max_size=3))
        return f"SELECT {', '.join(items)}, c FROM r{where}"
    if kind == "group":
        key = draw(KEY)
        aggs = draw(st.lists(AGG, min_size=1, max_size=3))
        having = " HAVING count(*) > 1" if draw(st.booleans()) else ""
        return f"SELECT {key}, {', '.join(aggs)} FROM r{where} GROUP BY {key}{having}"
    if kind == "global":
        aggs = draw(st.lists(AGG, min_size=1, max_size=3))
        return f"SELECT {', '.join(aggs)} FROM r{where}"
    if kind == "join":
        side = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN"]))
        w = " WHERE r.b IS NULL OR s.d > 0" if draw(st.booleans()) else ""
        return f"SELECT r.a, r.b, s.d FROM r {side} s ON r.a = s.a{w}"
    if kind == "distinct":
        return f"SELECT DISTINCT {draw(KEY)} FROM r{where}"
    op = draw(
        st.sampled_from(
            ["UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL"]
        )
    )
    return f"SELECT a FROM r{where} {op} SELECT d FROM s WHERE d IS NOT NULL"
