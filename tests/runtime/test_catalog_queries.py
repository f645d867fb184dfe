"""Queries of the system catalog on DuckDB, over relations generated from catalog snapshots."""

from __future__ import annotations

import pytest

from tidegate.runtime.catalog_queries import CatalogEngine, SessionConstants, param_types
from tidegate.spec.errors import UndefinedObject, UnsupportedSql
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Get, Schema
from tidegate.spec.sql import pgtypes as T
from tidegate.spec.sql.catalog import CatalogItem
from tidegate.spec.sql.system_catalog import ClusterInfo, Snapshot, generate_rows

SCHEMA = Schema.of(("id", "int64", False), ("name", "string"))
T1 = CatalogItem("t", GlobalId.user(1), SCHEMA, "table")
IDX = CatalogItem("t_idx", GlobalId.user(2), SCHEMA, "index", None, GlobalId.user(1), (0,))
V = CatalogItem("v", GlobalId.user(3), SCHEMA, "view", Get(GlobalId.user(1), SCHEMA))
MV = CatalogItem("m", GlobalId.user(4), SCHEMA, "materialized-view", Get(GlobalId.user(1), SCHEMA))
CONSTANTS = SessionConstants(
    "materialize",
    "materialize",
    "public",
    "PostgreSQL 9.5.0 (tidegate)",
    "v0.130.0",
    7,
    {"application_name": "psql", "server_version": "9.5.0"},
    1,
)


def _snapshot(*items: CatalogItem) -> Snapshot:
    return Snapshot(
        items,
        {"u3": "CREATE VIEW v AS SELECT * FROM t"},
        (ClusterInfo("u1", "quickstart", (("r1", "python", True),)),),
    )


def _query(
    engine: CatalogEngine, sql: str, snap: Snapshot, key: object = 1, params: tuple = ()
) -> list:
    return engine.query(sql, key, lambda: snap, CONSTANTS, params).rows


def test_psql_describe_queries() -> None:
    e = CatalogEngine()
    snap = _snapshot(T1, IDX, V, MV)
    listed = _query(
        e,
        "SELECT n.nspname, c.relname, CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' "
        "WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' END "
        "FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' "
        "AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1, 2",
        snap,
    )
    assert listed == [
        ("public", "m", "materialized view"),
        ("public", "t", "table"),
        ("public", "t_idx", "index"),
        ("public", "v", "view"),
    ]
    oid = _query(
        e,
        "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' "
        "COLLATE pg_catalog.default",
        snap,
    )
    assert oid == [(20001,)]
    cols = _query(
        e,
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull "
        "FROM pg_catalog.pg_attribute a WHERE a.attrelid = 't'::regclass AND a.attnum > 0 "
        "ORDER BY a.attnum",
        snap,
    )
    assert cols == [("id", "bigint", True), ("name", "text", False)]
    assert _query(
        e, "SELECT c.oid::regclass, 't'::regclass FROM pg_class c WHERE relname = 't'", snap
    ) == [("t", 20001)]


def test_columns_are_named_and_typed_as_postgresql_does() -> None:
    e = CatalogEngine()
    r = e.query(
        "SELECT version(), current_user, oid, 1 + 1, relname::text FROM pg_class LIMIT 1",
        1,
        lambda: _snapshot(T1),
        CONSTANTS,
    )
    assert r.columns == ("version", "current_user", "oid", "?column?", "relname")
    assert [t.name for t in r.types] == ["text", "text", "oid", "int4", "text"]


def test_each_query_sees_the_snapshot_it_is_given() -> None:
    e = CatalogEngine()
    q = "SELECT name, type FROM mz_objects WHERE id LIKE 'u%' ORDER BY id"
    assert _query(e, q, _snapshot(T1), key="a") == [("t", "table")]
    assert _query(e, q, _snapshot(T1, V), key="b") == [("t", "table"), ("v", "view")]
    assert _query(e, q, _snapshot(), key="c") == []


def test_refusals() -> None:
    e = CatalogEngine()
    snap = _snapshot(T1)
    with pytest.raises(UndefinedObject):
        _query(e, "SELECT * FROM pg_catalog.pg_nothing", snap)
    with pytest.raises(UnsupportedSql):
        _query(e, "SELECT * FROM mz_tables JOIN public.t ON true", snap)
    with pytest.raises(UndefinedObject):
        _query(e, "SELECT current_setting('no_such_setting')", snap)


def test_parameters_and_their_types() -> None:
    e = CatalogEngine()
    snap = _snapshot(T1, V)
    sql = "SELECT typname FROM pg_type WHERE oid = ANY($1::oid[]) ORDER BY 1"
    assert param_types(sql, 1) == [T.by_oid(T.OID.array_oid)]
    assert _query(e, sql, snap, params=([20, 25],)) == [("int8",), ("text",)]
    assert _query(e, "SELECT name FROM mz_views WHERE name = $1", snap, params=("v",)) == [("v",)]


def test_every_relation_has_rows_of_its_width() -> None:
    from tidegate.spec.sql.system_catalog import RELATIONS

    rows = generate_rows(_snapshot(T1, IDX, V, MV))
    for rel in RELATIONS:
        assert all(len(r) == len(rel.columns) for r in rows[rel.qualified]), rel.qualified
    assert {r[3] for r in rows["mz_catalog.mz_objects"] if str(r[0]).startswith("u")} == {
        "t",
        "t_idx",
        "v",
        "m",
    }
