"""Queries of the system catalog, answered by DuckDB over relations generated from the catalog.

What clients send to learn about a database (``psql``'s ``\\d``, SQLAlchemy's
reflection, dbt's relation listing) is PostgreSQL's full SQL over
``pg_catalog`` and ``information_schema`` (regular-expression operators,
``::regclass`` casts, scalar subqueries, ``pg_catalog.format_type(...)``),
which tidegate's own front end, built for incremental views, does not take.
Those queries do not need one: the catalog is small and read at one moment.
So a :class:`CatalogEngine` loads the relations
:func:`tidegate.spec.sql.system_catalog.generate_rows` makes from one catalog
snapshot into an in-memory DuckDB database (once per catalog state: the next
DDL makes a new one), rewrites the query's PostgreSQL-isms into DuckDB's
(system relations to their tables, ``OPERATOR(pg_catalog.~)`` to a regular
expression match, ``COLLATE`` dropped, casts to ``regclass``/``regtype`` to
name lookups, PostgreSQL's catalog functions to macros, the session's
functions to its constants) and runs it. Result columns get PostgreSQL types
from DuckDB's (``UINTEGER`` is ``oid``, ``VARCHAR[]`` is ``text[]``, ...).

A query that mixes system relations with user relations is refused
(``UnsupportedSql``); an unknown system relation is an ``UndefinedObject``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from tidegate.spec.errors import SqlError, SqlSyntaxError, UndefinedObject, UnsupportedSql
from tidegate.spec.sql import pgtypes as T
from tidegate.spec.sql.session import SYSTEM_SCHEMAS
from tidegate.spec.sql.system_catalog import (
    PUBLIC_OID,
    RELATIONS,
    SCHEMA_OIDS,
    Relation,
    Snapshot,
    find,
    generate_rows,
)

__all__ = ["CatalogEngine", "CatalogResult", "SessionConstants", "param_types"]


@dataclass(frozen=True)
class CatalogResult:
    """A catalog query's answer: column names, their PostgreSQL types, rows."""

    columns: tuple[str, ...]
    types: tuple[T.PgType, ...]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class SessionConstants:
    """What the session's functions answer in a catalog query."""

    user: str
    database: str
    schema: str
    version: str
    mz_version: str
    pid: int
    settings: Mapping[str, str]
    now_ms: int

    def setting(self, name: str) -> str | None:
        return self.settings.get(name.lower())


def _physical(rel: Relation) -> str:
    return f"{rel.schema}__{rel.name}"


_DUCK_TYPES = {
    T.OID.oid: "UINTEGER",
    T.INT2.oid: "SMALLINT",
    T.INT4.oid: "INTEGER",
    T.INT8.oid: "BIGINT",
    T.FLOAT4.oid: "FLOAT",
    T.FLOAT8.oid: "DOUBLE",
    T.BOOL.oid: "BOOLEAN",
    T.TIMESTAMPTZ.oid: "TIMESTAMP",
    T.NUMERIC.oid: "DOUBLE",
}


def _duck_type(t: T.PgType) -> str:
    if t.element:
        inner = T.by_oid(t.element)
        assert inner is not None
        return _duck_type(inner) + "[]"
    return _DUCK_TYPES.get(t.oid, "VARCHAR")


_BACK = {
    "UINTEGER": T.OID,
    "SMALLINT": T.INT2,
    "INTEGER": T.INT4,
    "BIGINT": T.INT8,
    "HUGEINT": T.NUMERIC,
    "UBIGINT": T.NUMERIC,
    "USMALLINT": T.INT4,
    "UTINYINT": T.INT2,
    "TINYINT": T.INT2,
    "DOUBLE": T.FLOAT8,
    "FLOAT": T.FLOAT4,
    "BOOLEAN": T.BOOL,
    "VARCHAR": T.TEXT,
    "DATE": T.DATE,
    "TIMESTAMP": T.TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": T.TIMESTAMPTZ,
    "INTERVAL": T.INTERVAL,
}


def _pg_type(duck: str) -> T.PgType:
    duck = duck.upper()
    if duck.endswith("[]"):
        inner = _pg_type(duck[:-2])
        found = T.by_oid(inner.array_oid) if inner.array_oid else None
        return found or T.by_oid(T.TEXT.array_oid) or T.TEXT
    if duck.startswith("DECIMAL"):
        return T.NUMERIC
    return _BACK.get(duck, T.TEXT)


# Functions of PostgreSQL's catalog, as DuckDB macros (prefixed: DuckDB has some of its own).
_MACROS = [
    "CREATE MACRO tg_regclass_name(x) AS coalesce("
    "(SELECT max(relname) FROM pg_catalog__pg_class WHERE oid = x), CAST(x AS VARCHAR))",
    "CREATE MACRO tg_regclass_oid(x) AS "
    "(SELECT max(oid) FROM pg_catalog__pg_class WHERE relname = x)",
    "CREATE MACRO tg_regtype_name(x) AS coalesce("
    "(SELECT max(sql_name) FROM tg_types WHERE oid = x), CAST(x AS VARCHAR))",
    "CREATE MACRO tg_regtype_oid(x) AS "
    "(SELECT max(oid) FROM tg_types WHERE name = lower(x) OR sql_name = lower(x))",
    "CREATE MACRO tg_regnamespace_name(x) AS "
    "(SELECT max(nspname) FROM pg_catalog__pg_namespace WHERE oid = x)",
    "CREATE MACRO tg_format_type(t, m) AS coalesce("
    "(SELECT max(sql_name) FROM tg_types WHERE oid = t), '???')",
    "CREATE MACRO tg_pg_get_userbyid(x) AS coalesce("
    "(SELECT max(rolname) FROM pg_catalog__pg_roles WHERE oid = x), "
    "'unknown (OID=' || CAST(x AS VARCHAR) || ')')",
    "CREATE MACRO tg_true(a) AS true, (a, b) AS true, (a, b, c) AS true",
    "CREATE MACRO tg_table_is_visible(x) AS coalesce((SELECT max(relnamespace) IN "
    f"({PUBLIC_OID}, {SCHEMA_OIDS['pg_catalog']}) FROM pg_catalog__pg_class WHERE oid = x), false)",
    "CREATE MACRO tg_false(a) AS false, (a, b) AS false",
    "CREATE MACRO tg_null(a) AS NULL, (a, b) AS NULL, (a, b, c) AS NULL",
    "CREATE MACRO tg_pg_get_indexdef(x) AS "
    "(SELECT max(i.indexdef) FROM pg_catalog__pg_indexes i JOIN pg_catalog__pg_class c "
    "ON c.relname = i.indexname WHERE c.oid = x), "
    "(x, col, pretty) AS (SELECT max(i.indexdef) FROM pg_catalog__pg_indexes i "
    "JOIN pg_catalog__pg_class c ON c.relname = i.indexname WHERE c.oid = x)",
    "CREATE MACRO tg_pg_get_viewdef(x) AS "
    "(SELECT max(v.definition) FROM pg_catalog__pg_views v JOIN pg_catalog__pg_class c "
    "ON c.relname = v.viewname WHERE c.oid = x), "
    "(x, pretty) AS (SELECT max(v.definition) FROM pg_catalog__pg_views v "
    "JOIN pg_catalog__pg_class c ON c.relname = v.viewname WHERE c.oid = x)",
    "CREATE MACRO tg_pg_encoding_to_char(x) AS 'UTF8'",
    "CREATE MACRO tg_array_upper(a, d) AS len(a)",
    "CREATE MACRO tg_array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END",
    "CREATE MACRO tg_quote_ident(x) AS CASE WHEN regexp_full_match(x, '[a-z_][a-z0-9_$]*') "
    "THEN x ELSE '\"' || replace(x, '\"', '\"\"') || '\"' END",
    "CREATE MACRO tg_zero(a) AS 0, (a, b) AS 0",
]

# PostgreSQL function names (lower case) to the macro answering them
_FUNCTION_MACROS: dict[str, str] = {
    "format_type": "tg_format_type",
    "to_regtype": "tg_regtype_oid",
    "to_regclass": "tg_regclass_oid",
    "pg_get_userbyid": "tg_pg_get_userbyid",
    "pg_table_is_visible": "tg_table_is_visible",
    "pg_type_is_visible": "tg_true",
    "pg_collation_is_visible": "tg_true",
    "pg_opclass_is_visible": "tg_true",
    "json_build_object": "json_object",
    "pg_function_is_visible": "tg_true",
    "has_table_privilege": "tg_true",
    "has_schema_privilege": "tg_true",
    "has_database_privilege": "tg_true",
    "has_column_privilege": "tg_true",
    "has_any_column_privilege": "tg_true",
    "pg_has_role": "tg_true",
    "pg_relation_is_publishable": "tg_false",
    "pg_get_expr": "tg_null",
    "pg_get_constraintdef": "tg_null",
    "pg_get_statisticsobjdef_columns": "tg_null",
    "pg_get_partkeydef": "tg_null",
    "pg_get_serial_sequence": "tg_null",
    "obj_description": "tg_null",
    "col_description": "tg_null",
    "shobj_description": "tg_null",
    "pg_tablespace_location": "tg_null",
    "pg_get_function_identity_arguments": "tg_null",
    "pg_get_function_result": "tg_null",
    "pg_get_function_arguments": "tg_null",
    "pg_get_triggerdef": "tg_null",
    "pg_get_ruledef": "tg_null",
    "pg_get_userbyid_or_null": "tg_null",
    "array_to_string": "array_to_string",
    "pg_get_indexdef": "tg_pg_get_indexdef",
    "pg_get_viewdef": "tg_pg_get_viewdef",
    "pg_encoding_to_char": "tg_pg_encoding_to_char",
    "array_upper": "tg_array_upper",
    "array_lower": "tg_array_lower",
    "quote_ident": "tg_quote_ident",
    "pg_relation_size": "tg_zero",
    "pg_total_relation_size": "tg_zero",
    "pg_table_size": "tg_zero",
    "pg_indexes_size": "tg_zero",
}


class CatalogEngine:
    """Answers catalog queries over one DuckDB database per catalog snapshot (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: object = None
        self._con: Any = None
        self._rows: dict[str, list[tuple[Any, ...]]] = {}
        self._loaded: set[str] = set()

    def _database(self, key: object, snapshot: Callable[[], Snapshot], relations: set[str]) -> Any:
        """The database of snapshot ``key``, with the tables of ``relations`` in it."""
        with self._lock:
            if self._con is None or self._key != key:
                if self._con is not None:
                    self._con.close()
                self._con, self._key = _empty_database(), key
                self._rows = generate_rows(snapshot())
                self._loaded = set()
                for name in sorted(_MACRO_TABLES):  # the macros bind to these as they are made
                    _load(self._con, _BY_QUALIFIED[name], self._rows[name])
                    self._loaded.add(name)
                for macro in _MACROS:
                    self._con.execute(macro)
            wanted = (relations | _MACRO_TABLES) - self._loaded - _SESSION_RELATIONS
            for name in sorted(wanted):
                _load(self._con, _BY_QUALIFIED[name], self._rows[name])
                self._loaded.add(name)
            return self._con

    def describe(
        self,
        sql: str,
        key: object,
        snapshot: Callable[[], Snapshot],
        constants: SessionConstants,
        count: int,
    ) -> CatalogResult:
        """The columns a catalog query answers, without running it (its ``$n`` unknown)."""
        tree = _parse(sql)
        rewriter = _Rewriter(constants, [None] * count)
        duck_sql = rewriter.rewrite(tree)
        con = self._database(key, snapshot, rewriter.relations)
        with self._lock:
            cur = con.cursor()
        try:
            _session_relations(cur, snapshot, constants)
            try:
                described = cur.execute(f"DESCRIBE ({duck_sql})").fetchall()
            except Exception as e:
                raise _duck_error(e, sql) from None
        finally:
            cur.close()
        names = tuple(str(r[0]) for r in described)
        types = tuple(_pg_type(str(r[1])) for r in described)
        return CatalogResult(names, types, [])

    def query(
        self,
        sql: str,
        key: object,
        snapshot: Callable[[], Snapshot],
        constants: SessionConstants,
        params: Sequence[Any] = (),
    ) -> CatalogResult:
        """Run the catalog query ``sql`` against the snapshot ``key`` names (built by
        ``snapshot()`` when it is not the one loaded)."""
        tree = _parse(sql)
        rewriter = _Rewriter(constants, params)
        duck_sql = rewriter.rewrite(tree)
        con = self._database(key, snapshot, rewriter.relations)
        with self._lock:
            cur = con.cursor()
        try:
            _session_relations(cur, snapshot, constants)
            try:
                result = cur.execute(duck_sql)
                rows = result.fetchall()
                desc = result.description or []
            except Exception as e:  # DuckDB's errors: one type per kind, none of them ours
                raise _duck_error(e, sql) from None
        finally:
            cur.close()
        names = tuple(str(d[0]) for d in desc)
        types = tuple(_pg_type(str(d[1])) for d in desc)
        return CatalogResult(names, types, [tuple(r) for r in rows])


def _session_relations(cur: Any, snapshot: Callable[[], Snapshot], c: SessionConstants) -> None:
    """``pg_settings`` and ``pg_stat_activity``: the session's own, per query."""
    import pyarrow as pa

    for name, rows in (
        (
            "pg_catalog.pg_settings",
            [
                (
                    k,
                    v,
                    None,
                    "Client Connection Defaults",
                    "",
                    None,
                    "user",
                    "string",
                    "session",
                    None,
                    None,
                    None,
                    v,
                    v,
                    None,
                    None,
                    False,
                )
                for k, v in sorted(c.settings.items())
            ],
        ),
        (
            "pg_catalog.pg_stat_activity",
            [
                (
                    16384,
                    c.database,
                    c.pid,
                    16386,
                    c.user,
                    c.settings.get("application_name", ""),
                    None,
                    None,
                    None,
                    "active",
                    None,
                )
            ],
        ),
    ):
        rel = next(r for r in RELATIONS if r.qualified == name)
        cur.register(_physical(rel), _arrow(rel, rows, pa))


def _arrow(rel: Relation, rows: list[tuple[Any, ...]], pa: Any) -> Any:
    fields = [pa.field(n, _arrow_type(t, pa)) for n, t in rel.columns]
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in fields]
    return pa.table(
        [pa.array(list(c), type=f.type) for c, f in zip(cols, fields, strict=True)],
        schema=pa.schema(fields),
    )


def _arrow_type(t: T.PgType, pa: Any) -> Any:
    if t.element:
        inner = T.by_oid(t.element)
        assert inner is not None
        return pa.list_(_arrow_type(inner, pa))
    duck = _DUCK_TYPES.get(t.oid, "VARCHAR")
    return {
        "UINTEGER": pa.uint32(),
        "SMALLINT": pa.int16(),
        "INTEGER": pa.int32(),
        "BIGINT": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us"),
    }.get(duck, pa.string())


_BY_QUALIFIED = {r.qualified: r for r in RELATIONS}
_SESSION_RELATIONS = frozenset({"pg_catalog.pg_settings", "pg_catalog.pg_stat_activity"})
_MACRO_TABLES = frozenset(
    {
        "pg_catalog.pg_class",
        "pg_catalog.pg_roles",
        "pg_catalog.pg_namespace",
        "pg_catalog.pg_indexes",
        "pg_catalog.pg_views",
    }
)
"""The relations the macros read: loaded with every snapshot."""


def _load(con: Any, rel: Relation, rows: list[tuple[Any, ...]]) -> None:
    import pyarrow as pa

    con.register("tg_load", _arrow(rel, rows, pa))
    con.execute(f'CREATE TABLE "{_physical(rel)}" AS SELECT * FROM tg_load')
    con.unregister("tg_load")


def _empty_database() -> Any:
    """An in-memory DuckDB with the type table and the macros; relations come on demand."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect(":memory:")
    types = pa.table(
        {
            "oid": pa.array([t.oid for t in T.TYPES], pa.uint32()),
            "name": [t.name for t in T.TYPES],
            "sql_name": [t.sql_name for t in T.TYPES],
        }
    )
    con.register("tg_load", types)
    con.execute("CREATE TABLE tg_types AS SELECT * FROM tg_load")
    con.unregister("tg_load")
    return con


_OID_ARRAY = re.compile(r"::\s*(?:pg_catalog\.)?oid\s*\[\s*\]", re.IGNORECASE)


def _parse(sql: str) -> Any:
    sql = _OID_ARRAY.sub("::_oid", sql)  # sqlglot cannot parse ::oid[]: its typname instead
    try:
        trees = [t for t in sqlglot.parse(sql, read="postgres") if t is not None]
    except (ParseError, TokenError) as e:
        raise SqlSyntaxError(f"syntax error: {str(e).splitlines()[0]}", sql=sql) from None
    if len(trees) != 1:
        raise SqlSyntaxError("expected exactly one statement", sql=sql)
    return trees[0]


def _duck_error(e: Exception, sql: str) -> SqlError:
    text = str(e).splitlines()[0]
    kind = type(e).__name__
    if kind == "CatalogException":
        err: SqlError = UndefinedObject(f"system catalog: {text}", sql=sql)
    elif kind in ("ParserException", "BinderException"):
        err = UnsupportedSql(f"this query of the system catalog ({text})", sql=sql)
    else:
        err = SqlError(f"system catalog query failed: {text}", sql=sql)
    return err


_TYPE_WORDS = {
    "text": "VARCHAR",
    "name": "VARCHAR",
    "varchar": "VARCHAR",
    "char": "VARCHAR",
    "bpchar": "VARCHAR",
    '"char"': "VARCHAR",
    "oid": "UINTEGER",
    "regproc": "VARCHAR",
    "regprocedure": "VARCHAR",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "integer": "INTEGER",
    "smallint": "SMALLINT",
    "bigint": "BIGINT",
    "bool": "BOOLEAN",
    "boolean": "BOOLEAN",
    "float8": "DOUBLE",
    "float4": "FLOAT",
    "int2vector": "SMALLINT[]",
    "oidvector": "UINTEGER[]",
    "_oid": "UINTEGER[]",
    "_int2": "SMALLINT[]",
    "_int4": "INTEGER[]",
    "_int8": "BIGINT[]",
    "_text": "VARCHAR[]",
}


def _cast_to(inner: Any, duck_type: str) -> Any:
    """``CAST(inner AS duck_type)`` with a DuckDB type name (``UINTEGER[]``)."""
    return exp.Cast(this=inner, to=exp.DataType.build(duck_type, dialect="duckdb"))


def _type_name(to: Any) -> str | None:
    """The PostgreSQL type name a cast targets, lower case, schema dropped (None: DuckDB's)."""
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType):
        if to.this == exp.DataType.Type.USERDEFINED:
            kind = to.args.get("kind")
            if isinstance(kind, exp.Dot):
                return str(kind.expression.name).lower()
            return str(kind if isinstance(kind, str) else getattr(kind, "name", kind)).lower()
        text = to.sql(dialect="postgres").lower()
        return text
    return None


_PG_SETTINGS = {
    "default_table_access_method": "heap",
    "jit": "off",
    "max_index_keys": "32",
    "block_size": "8192",
    "lc_collate": "C",
    "lc_ctype": "C",
}
"""PostgreSQL settings clients read with ``current_setting`` that tidegate has no variable for."""


class _Rewriter:
    def __init__(self, c: SessionConstants, params: Sequence[Any]) -> None:
        self.c = c
        self.params = params
        self.ctes: set[str] = set()
        self.relations: set[str] = set()
        """The system relations the query reads (their tables are created on first use)."""

    def rewrite(self, tree: Any) -> str:
        if not isinstance(tree, exp.Query):
            raise UnsupportedSql(f"{type(tree).__name__} statements on the system catalog")
        for cte in tree.find_all(exp.CTE):
            self.ctes.add(str(cte.alias_or_name).lower())
        _name_columns(tree)
        out = self._bottom_up(tree)
        return str(out.sql(dialect="duckdb"))

    def _bottom_up(self, node: Any) -> Any:
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, self._bottom_up(value))
            elif isinstance(value, list):
                node.set(
                    key,
                    [self._bottom_up(v) if isinstance(v, exp.Expression) else v for v in value],
                )
        return self._node(node)

    def _literal(self, value: Any) -> Any:
        if value is None:
            return exp.Null()
        if isinstance(value, bool):
            return exp.Boolean(this=value)
        if isinstance(value, int | float):
            return exp.Literal.number(value)
        if isinstance(value, list):
            return exp.Array(expressions=[self._literal(v) for v in value])
        return exp.Literal.string(str(value))

    def _node(self, node: Any) -> Any:
        c = self.c
        if isinstance(node, exp.Table):
            return self._table(node)
        if (
            isinstance(node, exp.Dot)
            and isinstance(node.this, exp.Identifier)
            and str(node.this.name).lower() in SYSTEM_SCHEMAS
            and not isinstance(node.expression, exp.Identifier | exp.Column | exp.Star)
        ):
            return node.expression  # already rewritten: children go first
        if isinstance(node, exp.Operator):
            op = str(node.args.get("operator") or "").split(".")[-1].strip()
            left, right = node.this, node.expression
            if op == "~":
                return exp.RegexpLike(this=left, expression=right)
            if op == "!~":
                return exp.Not(this=exp.RegexpLike(this=left, expression=right))
            if op == "~*":
                return exp.RegexpILike(this=left, expression=right)
            if op == "!~*":
                return exp.Not(this=exp.RegexpILike(this=left, expression=right))
            if op in ("=", "<>", "<", ">", "<=", ">="):
                cls = {
                    "=": exp.EQ,
                    "<>": exp.NEQ,
                    "<": exp.LT,
                    ">": exp.GT,
                    "<=": exp.LTE,
                    ">=": exp.GTE,
                }[op]
                return cls(this=left, expression=right)
            raise UnsupportedSql(f"operator {op} in a query of the system catalog")
        if isinstance(node, exp.Collate):
            return node.this
        if isinstance(node, exp.Cast):
            return self._cast(node)
        if isinstance(node, exp.CurrentUser | exp.SessionUser):
            return exp.Literal.string(c.user)
        if isinstance(node, exp.CurrentSchema):
            return exp.Literal.string(c.schema)
        if isinstance(node, exp.CurrentVersion):
            return exp.Literal.string(c.version)
        if isinstance(node, exp.CurrentDatabase | exp.CurrentCatalog):
            return exp.Literal.string(c.database)
        if isinstance(node, exp.Placeholder | exp.Parameter):
            return self._param(node)
        if isinstance(node, exp.Anonymous):
            return self._function(node)
        if isinstance(node, exp.Column) and node.args.get("db") is not None:
            if str(node.args["db"].name).lower() in SYSTEM_SCHEMAS:  # pg_catalog.pg_class.oid
                node.set("db", None)
                node.set("catalog", None)
            return node
        if isinstance(node, exp.Column) and not node.table:
            word = str(node.name).lower()
            if word in ("current_user", "session_user", "user", "current_role"):
                return exp.Literal.string(c.user)
            if word == "current_catalog":
                return exp.Literal.string(c.database)
        return node

    def _param(self, node: Any) -> Any:
        text = node.sql(dialect="postgres")
        m = re.fullmatch(r"\$(\d+)", text)
        if m is None or not 1 <= int(m.group(1)) <= len(self.params):
            raise SqlError(f"there is no parameter {text}")
        return self._literal(self.params[int(m.group(1)) - 1])

    def _table(self, node: Any) -> Any:
        if not isinstance(node.this, exp.Identifier):  # a table function: generate_series(...)
            node.set("db", None)
            return node
        name = str(node.this.name)
        key = name if node.this.quoted else name.lower()
        db = node.args.get("db")
        schema = str(db.name).lower() if db is not None else None
        catalog = node.args.get("catalog")
        if catalog is not None and str(catalog.name).lower() != self.c.database:
            raise UndefinedObject(f"unknown database '{catalog.name}'")
        if schema is None and key.lower() in self.ctes:
            return node
        if schema is not None and schema not in SYSTEM_SCHEMAS:
            raise UnsupportedSql(
                f'a query that reads both the system catalog and user relations ("{schema}.{key}")'
            )
        rel = find(schema, key)
        if rel is None:
            if schema is None and key.lower() in ("generate_series", "unnest"):
                return node
            where = f"{schema}.{key}" if schema else key
            raise UndefinedObject(
                f'relation "{where}" does not exist'
                + ("" if schema else " (a query of the system catalog reads no user relation)")
            )
        alias = node.args.get("alias")
        out = exp.Table(this=exp.to_identifier(_physical(rel), quoted=True))
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(rel.name))
        out.set("alias", alias)
        self.relations.add(rel.qualified)
        return out

    def _cast(self, node: Any) -> Any:
        target = _type_name(node.args.get("to"))
        inner = node.this
        if target is None:
            return node
        if (
            target in ("regclass", "regtype", "regproc")
            and isinstance(inner, exp.Literal)
            and not inner.is_string
        ):
            return _cast_to(inner, "UINTEGER")
        if target in ("regclass",):
            if isinstance(inner, exp.Literal) and inner.is_string:
                text = str(inner.this)
                if text.isdigit():
                    return _cast_to(inner, "UINTEGER")
                return exp.Anonymous(
                    this="tg_regclass_oid",
                    expressions=[exp.Literal.string(text.split(".")[-1].strip('"'))],
                )
            return exp.Anonymous(this="tg_regclass_name", expressions=[inner])
        if target in ("regtype",):
            if isinstance(inner, exp.Literal) and inner.is_string:
                return exp.Anonymous(this="tg_regtype_oid", expressions=[inner])
            return exp.Anonymous(this="tg_regtype_name", expressions=[inner])
        if target == "regnamespace":
            return exp.Anonymous(this="tg_regnamespace_name", expressions=[inner])
        if target.endswith("[]"):
            base = _TYPE_WORDS.get(target[:-2])
            if base is not None:
                if isinstance(inner, exp.Literal) and inner.is_string:
                    items = [x for x in str(inner.this).strip("{}").split(",") if x]
                    return _cast_to(
                        exp.Array(expressions=[exp.Literal.string(x) for x in items]),
                        f"{base}[]",
                    )
                return _cast_to(inner, f"{base}[]")
        duck = _TYPE_WORDS.get(target)
        if duck is not None:
            if duck.endswith("[]") and isinstance(inner, exp.Literal) and inner.is_string:
                items = [x for x in str(inner.this).strip("{}").split(",") if x]
                inner = exp.Array(expressions=[exp.Literal.string(x) for x in items])
            return _cast_to(inner, duck)
        return node

    def _function(self, node: Any) -> Any:
        c = self.c
        name = str(node.name).lower()
        args = list(node.expressions)
        constants: dict[str, Any] = {
            "version": c.version,
            "pg_backend_pid": c.pid,
            "mz_version": c.mz_version,
            "current_database": c.database,
            "current_schema": c.schema,
            "current_user": c.user,
            "session_user": c.user,
            "pg_postmaster_start_time": None,
            "txid_current": 1,
            "mz_now": c.now_ms,
            "inet_server_addr": None,
            "inet_server_port": None,
            "mz_environment_id": "local-tidegate",
        }
        if name in constants and not args:
            return self._literal(constants[name])
        if name == "current_schemas":
            return self._literal(["pg_catalog", c.schema])
        if name == "current_setting":
            arg = args[0] if args else None
            while isinstance(arg, exp.Cast | exp.Paren):
                arg = arg.this
            if isinstance(arg, exp.Null):
                return exp.Null()
            if isinstance(arg, exp.Literal):
                setting = str(arg.this).lower()
                value = c.setting(setting)
                if value is None:
                    value = _PG_SETTINGS.get(setting)
                if value is None and len(args) < 2:
                    err = UndefinedObject(f'unrecognized configuration parameter "{arg.this}"')
                    err.sqlstate = "42704"
                    raise err
                return self._literal(value)
            raise UnsupportedSql("current_setting of a computed name")
        macro = _FUNCTION_MACROS.get(name)
        if macro is not None:
            return exp.Anonymous(this=macro, expressions=args)
        return node


def param_types(sql: str, count: int) -> list[T.PgType | None]:
    """The types of a catalog query's ``$n`` parameters where a cast says (``$1::oid[]``)."""
    out: list[T.PgType | None] = [None] * count
    try:
        tree = _parse(sql)
    except SqlError:
        return out
    for cast in tree.find_all(exp.Cast):
        inner = cast.this
        text = inner.sql(dialect="postgres") if isinstance(inner, exp.Expression) else ""
        m = re.fullmatch(r"\$(\d+)", text)
        if m is None or not 0 < int(m.group(1)) <= count:
            continue
        name = _type_name(cast.args.get("to")) or ""
        array = name.endswith("[]")
        base = T.by_name(name.removesuffix("[]").strip('"'))
        if base is None:
            continue
        out[int(m.group(1)) - 1] = T.by_oid(base.array_oid) if array else base
    return out


def _pg_name(node: Any) -> str:
    """The name PostgreSQL gives an unnamed select-list expression."""
    if isinstance(node, exp.Column):
        return str(node.name)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return _pg_name(node.expression)
    if isinstance(node, exp.Cast):
        inner = _pg_name(node.this)
        if inner != "?column?":
            return inner
        name = _type_name(node.args.get("to"))
        return (name or "?column?").split(".")[-1].replace("[]", "")
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.CurrentUser):
        return "current_user"
    if isinstance(node, exp.CurrentSchema):
        return "current_schema"
    if isinstance(node, exp.CurrentVersion):
        return "version"
    if isinstance(node, exp.CurrentDatabase):
        return "current_database"
    if isinstance(node, exp.Array):
        return "array"
    if isinstance(node, exp.Coalesce):
        return "coalesce"
    if isinstance(node, exp.Func):
        return str(node.sql_name()).lower()
    return "?column?"


def _name_columns(tree: Any) -> None:
    """Alias every unnamed select-list item of the outermost SELECT as PostgreSQL names it."""
    select = tree
    while isinstance(select, exp.Subquery):
        select = select.this
    if isinstance(select, exp.Union):
        select = select.left
        while not isinstance(select, exp.Select) and hasattr(select, "left"):
            select = select.left
    if not isinstance(select, exp.Select):
        return
    out: list[Any] = []
    for item in select.expressions:
        if isinstance(item, exp.Alias | exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            out.append(item)
        else:
            out.append(exp.alias_(item, _pg_name(item), quoted=True))
    select.set("expressions", out)


def duck_sql_for_tests(sql: str, constants: SessionConstants) -> str:
    """The DuckDB text a catalog query becomes (for tests and debugging)."""
    return _Rewriter(constants, ()).rewrite(_parse(sql))
