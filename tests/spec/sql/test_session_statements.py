"""What a session makes of a statement's text (``tidegate.spec.sql.session.classify``)."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import SqlError, SqlSyntaxError, UndefinedObject
from tidegate.spec.sql import SubscribeStmt, parse_one
from tidegate.spec.sql import session as S

NAMES = S.Names(system_relations=frozenset({"mz_tables", "pg_class", "pg_namespace"}))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BEGIN", S.Begin()),
        ("start transaction read only", S.Begin(read_only=True)),
        ("BEGIN ISOLATION LEVEL SERIALIZABLE", S.Begin(isolation="serializable")),
        ("COMMIT", S.Commit()),
        ("end", S.Commit()),
        ("ROLLBACK WORK", S.Rollback()),
        ("abort", S.Rollback()),
        ("SET search_path TO public", S.SetVariable("search_path", "public")),
        ("SET application_name = 'it''s'", S.SetVariable("application_name", "it's")),
        ("SET SESSION extra_float_digits = 3", S.SetVariable("extra_float_digits", "3")),
        ("SET LOCAL cluster = analytics", S.SetVariable("cluster", "analytics", local=True)),
        ("SET TIME ZONE 'UTC'", S.SetVariable("timezone", "UTC")),
        ("SET statement_timeout TO DEFAULT", S.SetVariable("statement_timeout", None)),
        ("SET NAMES 'UTF8'", S.SetVariable("client_encoding", "UTF8")),
        (
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            S.SetTransaction("serializable", None, True),
        ),
        ("RESET ALL", S.Reset(None)),
        ("RESET application_name", S.Reset("application_name")),
        ("SHOW server_version", S.Show("server_version")),
        ("SHOW TRANSACTION ISOLATION LEVEL", S.Show("transaction_isolation")),
        ("SHOW ALL", S.Show("all")),
        ("FETCH 10 c", S.Fetch("c", 10)),
        ("FETCH ALL FROM c WITH (timeout = '1s')", S.Fetch("c", None, 1000)),
        ("FETCH FORWARD 2 IN c WITH (timeout='0s')", S.Fetch("c", 2, 0)),
        ("CLOSE c", S.CloseCursor("c")),
        ("CLOSE ALL", S.CloseCursor(None)),
        ("DISCARD ALL", S.Discard("all")),
        ("DEALLOCATE ALL", S.Discard("deallocate")),
        (
            "CREATE SCHEMA IF NOT EXISTS materialize.public",
            S.Noop("CREATE SCHEMA", 'schema "public" already exists, skipping'),
        ),
        ('/* {"app": "dbt"} */ BEGIN', S.Begin()),
    ],
)
def test_session_statements(text: str, expected: object) -> None:
    assert S.classify(text, NAMES) == expected


def test_copy_statements() -> None:
    c = S.classify("COPY t (a, b) FROM STDIN WITH (FORMAT csv, HEADER, DELIMITER ';')", NAMES)
    assert c == S.CopyFrom("t", ("a", "b"), S.CopyOptions("csv", ";", None, True))
    old = S.classify("COPY public.t FROM STDIN WITH CSV HEADER NULL 'x'", NAMES)
    assert old == S.CopyFrom("t", None, S.CopyOptions("csv", None, "x", True))
    out = S.classify("COPY (SELECT 1) TO STDOUT", NAMES)
    assert isinstance(out, S.CopyTo) and out.body == "SELECT 1" and out.body_offset == 6
    named = S.classify('COPY "T" (a) TO STDOUT (FORMAT binary)', NAMES)
    assert named == S.CopyTo('SELECT a FROM "T"', -1, S.CopyOptions("binary"))
    assert S.classify("COPY t TO 'file:///x'", NAMES) == S.Passthrough("COPY t TO 'file:///x'")
    with pytest.raises(SqlError):
        S.classify("COPY t FROM STDIN WITH (FORMAT avro)", NAMES)


def test_declare_keeps_the_body_and_where_it_starts() -> None:
    text = "DECLARE c CURSOR FOR SUBSCRIBE t WITH (PROGRESS)"
    d = S.classify(text, NAMES)
    assert isinstance(d, S.Declare) and d.name == "c"
    assert text[d.body_offset :] == d.body == "SUBSCRIBE t WITH (PROGRESS)"
    sub = S.classify(d.body, NAMES)
    assert isinstance(sub, S.Passthrough) and sub.sql == d.body  # its options are the parser's
    stmt = parse_one(sub.sql)
    assert isinstance(stmt, SubscribeStmt) and stmt.progress and stmt.snapshot


def test_qualified_names_lose_their_qualifier_and_keep_positions() -> None:
    text = 'SELECT x FROM "materialize"."public"."t" JOIN public.u ON t.a = u.a'
    p = S.classify(text, NAMES)
    assert isinstance(p, S.Passthrough)
    assert len(p.sql) == len(text) and p.sql.index('"t"') == text.index('"t"')
    assert " ".join(p.sql.split()) == 'SELECT x FROM "t" JOIN u ON t.a = u.a'
    with pytest.raises(UndefinedObject) as e:
        S.classify("SELECT * FROM other.public.t", NAMES)
    assert e.value.sqlstate == "3D000"
    with pytest.raises(UndefinedObject) as e:
        S.classify("SELECT * FROM elsewhere.t", NAMES)
    assert e.value.sqlstate == "3F000"
    with pytest.raises(UndefinedObject) as e:
        S.classify("SELECT 1 FROM t JOIN elsewhere.u ON true", NAMES)
    assert e.value.sqlstate == "3F000"


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1 FROM t AS a WHERE 1 IS NOT DISTINCT FROM a.x",
        "SELECT extract(year FROM a.d) FROM t AS a",
        "SELECT substring(a.s FROM 2) FROM t AS a",
        "SELECT a.x FROM t AS a, u AS b GROUP BY 1, a.x",
        "SELECT a.x, b.y FROM t AS a, u AS b",
    ],
)
def test_a_qualified_column_is_never_taken_for_a_relation(text: str) -> None:
    """Wherever ``a.x`` stands after a FROM keyword that is not a FROM clause's, or after a
    comma that follows one, it names a column of ``a``, not a relation of a schema ``a``."""
    p = S.classify(text, NAMES)
    assert isinstance(p, S.Passthrough) and p.sql == text


@pytest.mark.parametrize(
    "text",
    [
        "SELECT n, t1.kind FROM u3 AS t1 GROUP BY n, t1.kind",
        "SELECT n FROM u3 AS t1 GROUP BY n, t1.kind ORDER BY n, t1.kind",
        "SELECT a.x, b.y FROM a JOIN b ON a.x = b.x ORDER BY 1, b.y",
    ],
)
def test_a_qualified_column_after_a_comma_of_a_list_is_a_column(text: str) -> None:
    """The comma of a GROUP BY or ORDER BY list does not continue the FROM list: ``t1.kind``
    there names a column of ``t1``, not a relation in schema ``t1`` (found by the simulator's
    SQL clients: refused with 3F000, "unknown schema 't1'")."""
    p = S.classify(text, NAMES)
    assert isinstance(p, S.Passthrough) and p.sql == text


def test_materialize_spellings() -> None:
    idx = S.classify("CREATE DEFAULT INDEX IN CLUSTER default ON materialize.public.v", NAMES)
    assert isinstance(idx, S.Passthrough)
    assert " ".join(idx.sql.split()) == "CREATE INDEX ON v ()"
    assert idx.cluster == "default"  # the index goes there
    names = S.Names(clusters=("default", "analytics"))
    mv = S.classify("CREATE MATERIALIZED VIEW m IN CLUSTER analytics AS (SELECT 1)", names)
    assert isinstance(mv, S.Passthrough) and "CLUSTER" not in mv.sql
    assert mv.cluster == "analytics"
    plain = S.classify("CREATE MATERIALIZED VIEW m AS (SELECT 1)", names)
    assert isinstance(plain, S.Passthrough) and plain.cluster is None  # the session's
    replica = S.classify("CREATE CLUSTER REPLICA analytics.r2 (SIZE = 'small')", names)
    assert isinstance(replica, S.Passthrough)  # c.r2 is not a relation of schema c
    with pytest.raises(UndefinedObject) as e:
        S.classify("CREATE MATERIALIZED VIEW m IN CLUSTER prod AS SELECT 1", NAMES)
    assert e.value.sqlstate == "42704"


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM mz_tables",
        "select c.relname from pg_catalog.pg_class c",
        "SELECT pg_catalog.pg_class.oid FROM pg_catalog.pg_class",
        "SELECT version()",
        "SELECT current_schema(), current_database()",
        "SHOW CLUSTERS",
        "  /* dbt */ select distinct nspname from pg_namespace",
    ],
)
def test_catalog_queries(text: str) -> None:
    assert isinstance(S.classify(text, NAMES), S.CatalogQuery)


def test_a_user_query_calling_session_functions_gets_constants() -> None:
    p = S.classify("SELECT now(), current_user, count(*) FROM t", NAMES)
    assert isinstance(p, S.Passthrough) and set(p.functions) == {"now", "current_user"}
    out = S.substitute_functions(p.sql, {"now": "NOW_LIT", "current_user": "'me'"})
    assert out == "SELECT NOW_LIT, 'me', count(*) FROM t"
    assert S.substitute_functions("SELECT now(1)", {"now": "x"}) == "SELECT now(1)"


def test_bad_transaction_modes_are_syntax_errors() -> None:
    with pytest.raises(SqlSyntaxError):
        S.classify("BEGIN ISOLATION LEVEL SOMETIMES", NAMES)
