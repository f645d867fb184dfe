"""``SUBSCRIBE``'s options and output shapes, as Materialize documents them (its ``SUBSCRIBE``
page: ``SNAPSHOT``, ``PROGRESS``, ``AS OF``, ``UP TO``, ``ENVELOPE UPSERT``/``DEBEZIUM``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import (
    DuplicateColumn,
    InvalidParameterValue,
    SqlError,
    SqlSyntaxError,
    UndefinedColumn,
    UnsupportedSql,
)
from tidegate.spec.sql import SubscribeEnvelope, SubscribeStmt, parse_one
from tidegate.spec.sql.subscribe import subscribe_output


def sub(sql: str) -> SubscribeStmt:
    stmt = parse_one(sql)
    assert isinstance(stmt, SubscribeStmt)
    return stmt


# -- parsing ---------------------------------------------------------------------------------


def test_defaults_are_materialize_s() -> None:
    s = sub("SUBSCRIBE t")
    assert (s.as_of, s.up_to, s.snapshot, s.progress, s.envelope) == (None, None, True, False, None)


@pytest.mark.parametrize(
    "sql",
    [
        # the order of Materialize's syntax page, and the orders its own clients write
        'SUBSCRIBE TO t ENVELOPE UPSERT (KEY (k, "V")) WITH (SNAPSHOT = false, PROGRESS) '
        "AS OF 5 UP TO 9",
        'SUBSCRIBE t WITH (PROGRESS, SNAPSHOT false) AS OF 5 UP TO 9 ENVELOPE UPSERT (KEY (K,"V"))',
        "SUBSCRIBE t UP TO 9 AS OF 5 WITH (progress = TRUE, snapshot = FALSE) "
        'ENVELOPE UPSERT (KEY (k, "V"));',
    ],
)
def test_every_clause_is_read_in_any_order(sql: str) -> None:
    s = sub(sql)
    assert (s.as_of, s.at_least, s.up_to, s.snapshot, s.progress) == (5, False, 9, False, True)
    assert s.envelope is not None
    assert (s.envelope.kind, s.envelope.key) == ("upsert", ("k", "V"))


def test_a_query_relation_keeps_its_parentheses_and_strings() -> None:
    s = sub("SUBSCRIBE (SELECT a, ')' AS p FROM t WHERE a > 1) AS OF AT LEAST 3")
    assert s.query.sql() == "SELECT a, ')' AS p FROM t WHERE a > 1"
    assert (s.as_of, s.at_least) == (3, True)
    d = sub("SUBSCRIBE (SELECT 1 AS x) ENVELOPE DEBEZIUM (KEY (x))").envelope
    assert d is not None and (d.kind, d.key) == ("debezium", ("x",))


@pytest.mark.parametrize(
    ("sql", "error", "position"),
    [
        ("SUBSCRIBE t WITH (FOO)", SqlSyntaxError, 19),  # Materialize: PROGRESS or SNAPSHOT
        ("SUBSCRIBE t WITH (SNAPSHOT = 3)", InvalidParameterValue, 30),
        ("SUBSCRIBE t WITH (SNAPSHOT = 'maybe')", InvalidParameterValue, 30),
        ("SUBSCRIBE t WITH (SNAPSHOT, snapshot = false)", SqlSyntaxError, 29),
        ("SUBSCRIBE t WITH (PROGRESS", SqlSyntaxError, None),
        ("SUBSCRIBE t UP TO soon", SqlSyntaxError, 19),
        ("SUBSCRIBE t UP TO -1", SqlSyntaxError, 19),
        ("SUBSCRIBE t AS OF 1 AS OF 2", SqlSyntaxError, 21),
        ("SUBSCRIBE t ENVELOPE APPEND (KEY (a))", SqlSyntaxError, 22),
        ("SUBSCRIBE t ENVELOPE UPSERT (KEY (a + 1))", SqlSyntaxError, 37),
        ("SUBSCRIBE t ENVELOPE UPSERT (KEY ())", SqlSyntaxError, 35),
        ("SUBSCRIBE t ENVELOPE UPSERT (KEY (a)) ENVELOPE DEBEZIUM (KEY (a))", SqlSyntaxError, 39),
        ("SUBSCRIBE t WITHIN TIMESTAMP ORDER BY a", UnsupportedSql, 13),
        ("SUBSCRIBE t AND MORE", SqlSyntaxError, 13),
        ("SUBSCRIBE (SELECT 1", SqlSyntaxError, 11),
    ],
)
def test_refusals_are_typed_and_point_at_the_clause(
    sql: str, error: type[SqlError], position: int | None
) -> None:
    with pytest.raises(error) as info:
        parse_one(sql)
    assert type(info.value) is error
    if position is not None:
        assert info.value.position == position


# -- output ----------------------------------------------------------------------------------


def test_diffs_with_progress_start_with_the_as_of_and_follow_each_batch_past_it() -> None:
    out = subscribe_output(("k", "v"), progress=True)
    assert out.names == ("mz_timestamp", "mz_progressed", "mz_diff", "k", "v")
    assert out.initial(100) == [(100, True, None, None, None)]
    rows = out.rows([(101, (2, "b"), 1), (100, (1, "a"), 1)], (102,), 100)
    assert rows == [
        (100, False, 1, 1, "a"),
        (101, False, 1, 2, "b"),
        (102, True, None, None, None),
    ]
    assert out.rows([], (100,), 100) == []  # already said by the first progress row
    assert out.rows([(105, (1, "a"), -1)], (), 100) == [(105, False, -1, 1, "a")]  # the end
    assert subscribe_output(("k",)).initial(5) == []


def _kv(kind: str = "upsert", progress: bool = False) -> Any:
    env = SubscribeEnvelope(kind, ("key",))  # type: ignore[arg-type]
    return subscribe_output(("value", "key"), progress=progress, envelope=env)


def test_envelope_upsert_is_materialize_s_kv_store_example() -> None:
    """The example of Materialize's page: (key, value) rows (1, 2) and (2, 4) at 100, key 3 in
    at 200, key 1 set to 10 at 300, everything deleted at 400; the key columns come first."""
    out = _kv()
    assert out.names == ("mz_timestamp", "mz_state", "key", "value")
    assert out.rows([(100, (4, 2), 1), (100, (2, 1), 1)], (101,), 100) == [
        (100, "upsert", 1, 2),
        (100, "upsert", 2, 4),
    ]
    assert out.rows([(200, (6, 3), 1)], (201,), 100) == [(200, "upsert", 3, 6)]
    assert out.rows([(300, (10, 1), 1), (300, (2, 1), -1)], (301,), 100) == [(300, "upsert", 1, 10)]
    deletes = [(400, (10, 1), -1), (400, (4, 2), -1), (400, (6, 3), -1)]
    assert out.rows(deletes, (401,), 100) == [
        (400, "delete", 1, None),
        (400, "delete", 2, None),
        (400, "delete", 3, None),
    ]
    assert out.rows([(500, (7, 1), 1), (500, (8, 1), 1)], (501,), 100) == [
        (500, "key_violation", 1, None)
    ]
    assert out.rows([(600, (7, 1), 2)], (601,), 100) == [(600, "key_violation", 1, None)]


def test_envelope_debezium_keeps_the_value_before_and_after() -> None:
    out = _kv("debezium")
    assert out.names == ("mz_timestamp", "mz_state", "key", "before_value", "after_value")
    assert out.rows([(200, (6, 3), 1)], (201,), 0) == [(200, "insert", 3, None, 6)]
    assert out.rows([(300, (10, 1), 1), (300, (2, 1), -1)], (301,), 0) == [
        (300, "upsert", 1, 2, 10)
    ]
    assert out.rows([(400, (10, 1), -1)], (401,), 0) == [(400, "delete", 1, 10, None)]
    assert out.rows([(500, (7, 1), 1), (500, (8, 1), 1)], (501,), 0) == [
        (500, "key_violation", 1, None, None)
    ]


def test_an_envelope_with_progress_nulls_key_and_values_in_progress_rows() -> None:
    out = _kv(progress=True)
    assert out.names == ("mz_timestamp", "mz_progressed", "mz_state", "key", "value")
    assert out.initial(7) == [(7, True, None, None, None)]
    assert out.rows([(8, (1, 1), 1)], (9,), 7) == [
        (8, False, "upsert", 1, 1),
        (9, True, None, None, None),
    ]


def test_key_columns_must_be_distinct_columns_of_the_relation() -> None:
    with pytest.raises(UndefinedColumn, match='column "nope" does not exist'):
        subscribe_output(("a", "b"), envelope=SubscribeEnvelope("upsert", ("nope",)))
    with pytest.raises(DuplicateColumn):
        subscribe_output(("a", "b"), envelope=SubscribeEnvelope("upsert", ("a", "a")))
    two = subscribe_output(("a", "b", "c"), envelope=SubscribeEnvelope("upsert", ("c", "a")))
    assert two.names == ("mz_timestamp", "mz_state", "c", "a", "b")
    assert two.rows([(1, ("x", "y", "z"), 1)], (2,), 0) == [(1, "upsert", "z", "x", "y")]


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 3), st.one_of(st.none(), st.integers(0, 9))),
        max_size=30,
    )
)
def test_upsert_rows_replayed_give_the_collection_at_every_time(
    writes: list[tuple[int, int, int | None]],
) -> None:
    """A collection with one row per key, changed by writes (time, key, value or None to
    delete): replaying its upsert rows into a dict gives, after each time, the same contents
    as the collection itself (the oracle: the writes applied to a dict)."""
    writes.sort(key=lambda w: w[0])
    table: dict[int, int] = {}
    updates: list[tuple[int, tuple[int, int], int]] = []
    expected: dict[int, dict[int, int]] = {}
    for t, k, v in writes:
        if k in table:
            updates.append((t, (k, table.pop(k)), -1))
        if v is not None:
            table[k] = v
            updates.append((t, (k, v), 1))
        expected[t] = dict(table)
    consolidated: dict[tuple[int, tuple[int, int]], int] = {}
    for t, row, d in updates:
        consolidated[(t, row)] = consolidated.get((t, row), 0) + d
    batch = [(t, row, d) for (t, row), d in consolidated.items() if d]
    out = subscribe_output(("k", "v"), envelope=SubscribeEnvelope("upsert", ("k",)))
    replay: dict[int, int] = {}
    seen: dict[int, dict[int, int]] = {}
    for t, state, k, v in out.rows(batch, (), 0):
        assert state in ("upsert", "delete")
        if state == "upsert":
            replay[k] = v
        else:
            assert v is None
            replay.pop(k)
        seen[t] = dict(replay)
    for t, contents in expected.items():
        before = [seen[s] for s in seen if s <= t]
        assert (before[-1] if before else {}) == contents
