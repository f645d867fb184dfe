"""``mz_now()`` in the SQL front end: the temporal filters Materialize accepts, lowered to a
``TemporalFilter`` (and what they select at each time), and the uses it refuses, with which
error. End to end through an Environment: ``tests/runtime/test_sql_temporal.py``."""

from __future__ import annotations

import datetime as dt

import pytest

from tidegate.spec.errors import SqlError, SqlTypeError, UnsupportedSql
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema, TemporalFilter, evaluate, explain
from tidegate.spec.plan.relation import Plan, children
from tidegate.spec.sql import CatalogItem, DictCatalog, SelectStmt, lower_query, parse_one
from tidegate.spec.sql.session import keeps_mz_now

U1 = GlobalId.user(1)
CATALOG = DictCatalog(
    [
        CatalogItem(
            "ev",
            U1,
            Schema.of(
                ("id", "int64", False), ("ts", "timestamp"), ("ms", "int64"), ("x", "float64")
            ),
            "table",
        )
    ]
)
T0 = dt.datetime(1970, 1, 1, 0, 0, 1)  # 1000 ms
ROWS = [((1, T0, 1000, 0.5), 0, 1), ((2, None, 5000, 1.5), 0, 1), ((3, T0, None, 2.5), 0, 1)]


def _plan(sql: str) -> Plan:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    return lower_query(stmt.query, CATALOG, (), stmt.sql).relation()


def _ids(sql: str, t: int) -> list[int]:
    return sorted(r[0] for r in evaluate(_plan(sql), {U1: ROWS}, t).rows)


def _temporal(plan: Plan) -> TemporalFilter:
    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, TemporalFilter):
            return p
        stack.extend(children(p))
    raise AssertionError(f"no TemporalFilter in {explain(plan)}")


@pytest.mark.parametrize(
    ("where", "ops"),
    [
        ("mz_now() >= ms AND mz_now() < ms + 1000", ["GE", "LT"]),
        ("mz_now() <= ms", ["LE"]),
        ("mz_now() > ms", ["GT"]),
        ("mz_now() = ms", ["EQ"]),
        ("ms + 10 > mz_now()", ["LT"]),  # flipped: mz_now() < ms + 10
        ("mz_now() BETWEEN ms AND ms + 5", ["GE", "LE"]),
        ("(mz_now() >= ms AND id > 1) AND mz_now() < ms + 9", ["GE", "LT"]),
        ("mz_now() <= ts + INTERVAL '1 hour'", ["LE"]),
        ("mz_now() > '1970-01-01 00:00:02'", ["GT"]),
    ],
)
def test_the_forms_materialize_accepts_lower_to_a_temporal_filter(
    where: str, ops: list[str]
) -> None:
    f = _temporal(_plan(f"SELECT id FROM ev WHERE {where}"))
    assert [op.name for op, _ in f.predicates] == ops


def test_what_a_last_window_view_holds_at_each_time() -> None:
    q = "SELECT id FROM ev WHERE mz_now() >= ms AND mz_now() < ms + 1000"
    assert [_ids(q, t) for t in (999, 1000, 1999, 2000, 5000, 5999, 6000)] == [
        [], [1], [1], [], [2], [2], [],
    ]  # fmt: skip
    between = "SELECT id FROM ev WHERE mz_now() BETWEEN ms AND ms + 1"  # both ends included
    assert [_ids(between, t) for t in (999, 1000, 1001, 1002)] == [[], [1], [1], []]
    hour = "SELECT id FROM ev WHERE mz_now() <= ts + INTERVAL '1 hour'"
    assert _ids(hour, 1000 + 3_600_000) == [1, 3] and _ids(hour, 1001 + 3_600_000) == []
    flipped = "SELECT id FROM ev WHERE ms > mz_now() AND id <> 2"  # mz_now() < ms
    assert _ids(flipped, 999) == [1] and _ids(flipped, 1000) == []


def test_having_filters_groups_by_time() -> None:
    q = "SELECT id, max(ms) FROM ev GROUP BY id HAVING mz_now() < max(ms) + 10 AND id < 3"
    plan = _plan(q)
    assert "TemporalFilter mz_now() < " in explain(plan)
    assert sorted(evaluate(plan, {U1: ROWS}, 1005).rows) == [(1, 1000), (2, 5000)]
    assert sorted(evaluate(plan, {U1: ROWS}, 1010).rows) == [(2, 5000)]


@pytest.mark.parametrize(
    ("sql", "error", "fragment"),
    [
        ("SELECT id FROM ev WHERE mz_now() <> ms", UnsupportedSql, "temporal predicate"),
        ("SELECT id FROM ev WHERE mz_now() > ms OR id = 1", UnsupportedSql, "temporal predicate"),
        ("SELECT id FROM ev WHERE NOT (mz_now() > ms)", UnsupportedSql, "temporal predicate"),
        ("SELECT id FROM ev WHERE mz_now() - 5 > ms", UnsupportedSql, "temporal predicate"),
        ("SELECT id FROM ev WHERE mz_now() > mz_now()", UnsupportedSql, "temporal predicate"),
        (
            "SELECT id FROM ev WHERE mz_now() NOT BETWEEN ms AND ms + 1",
            UnsupportedSql,
            "temporal predicate",
        ),
        ("SELECT mz_now(), id FROM ev", UnsupportedSql, "cannot be materialized"),
        ("SELECT id FROM ev ORDER BY mz_now()", UnsupportedSql, "cannot be materialized"),
        (
            "SELECT id FROM ev a JOIN ev b ON mz_now() < a.ms + b.ms",
            UnsupportedSql,
            "cannot be materialized",
        ),
        ("SELECT id FROM ev WHERE mz_now() > x", SqlTypeError, "double precision"),
        ("SELECT id FROM ev WHERE mz_now() > 'abc'", SqlError, "timestamp"),
    ],
)
def test_refused_uses_are_named(sql: str, error: type[SqlError], fragment: str) -> None:
    stmt = parse_one(sql)
    assert isinstance(stmt, SelectStmt)
    with pytest.raises(error) as info:
        lower_query(stmt.query, CATALOG, (), stmt.sql)
    assert fragment in str(info.value) and info.value.position is not None, info.value


@pytest.mark.parametrize(
    ("sql", "kept"),
    [
        ("SELECT id FROM ev WHERE mz_now() < ms", True),
        ("SELECT mz_now()", False),  # the time it runs, as Materialize answers it
        ("SELECT id FROM ev WHERE mz_now() < ms OR id = 1", False),
        ("SELECT mz_now(), id FROM ev WHERE mz_now() < ms", False),
        ("CREATE VIEW v AS SELECT mz_now() FROM ev", True),  # refused when lowered
        ("CREATE MATERIALIZED VIEW v AS SELECT id FROM ev WHERE mz_now() < ms", True),
        ("SUBSCRIBE (SELECT id FROM ev WHERE mz_now() < ms)", True),
        ("EXPLAIN SELECT id FROM ev WHERE mz_now() < ms", True),
        ("INSERT INTO ev SELECT * FROM ev WHERE mz_now() < ms", True),  # refused: a write
    ],
)
def test_which_statements_keep_mz_now_for_lowering(sql: str, kept: bool) -> None:
    assert keeps_mz_now(parse_one(sql)) is kept
