"""The statements a SQL *session* handles itself, and the text it hands on to :mod:`.parse`.

A session (``tidegate.runtime.sql_session``) holds what one client's
connection holds: variables, a transaction, cursors. :func:`classify` reads a
statement's text and says what it is:

* a :class:`SessionStatement` the session runs itself: ``BEGIN``/``START
  TRANSACTION``, ``COMMIT``/``END``, ``ROLLBACK``/``ABORT``, ``SET``/``RESET``/
  ``SHOW`` of a variable, ``SET TRANSACTION ...``, ``DECLARE ... CURSOR FOR``,
  ``FETCH``, ``CLOSE``, ``COPY ... TO STDOUT`` / ``FROM STDIN``, ``DISCARD``,
  ``DEALLOCATE``, ``CREATE SCHEMA``, ``SHOW CLUSTERS`` and kin;
* a :class:`CatalogQuery`: a query of the system catalog (``pg_catalog``,
  ``information_schema``, ``mz_catalog``, ``mz_internal``; see
  :mod:`.system_catalog`), or one that reads no relation and calls the
  session's functions (``version()``, ``current_schema()``, ...);
* otherwise :class:`Passthrough`: text for :func:`.parse.parse_one`, with
  Materialize's spellings brought to what it reads: names qualified with the
  one database and schema (``materialize.public.t``, ``public.t``) lose their
  qualifier (blanked with spaces, so error positions stay right), ``IN CLUSTER
  c`` and ``USING arrangement`` go (the cluster is checked), ``CREATE DEFAULT
  INDEX`` is an index on every column, and the session's constant functions
  (``current_database()``, ``version()``, ``now()``, ...) become literals.

Everything here is pure; names of the one database, schema and cluster are
arguments of the caller (:class:`Names`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from sqlglot import Token, TokenType
from sqlglot.errors import TokenError

from ..errors import SqlError, SqlSyntaxError, UndefinedObject, UnsupportedSql
from .ast import (
    CreateViewStmt,
    DeleteStmt,
    ExplainStmt,
    InsertStmt,
    SelectStmt,
    SubscribeStmt,
    UpdateStmt,
)

__all__ = [
    "SYSTEM_SCHEMAS",
    "Begin",
    "CatalogQuery",
    "CloseCursor",
    "Commit",
    "CopyFrom",
    "CopyOptions",
    "CopyTo",
    "Declare",
    "Discard",
    "Fetch",
    "Names",
    "Noop",
    "Passthrough",
    "Reset",
    "Rollback",
    "SessionStatement",
    "SetTransaction",
    "SetVariable",
    "Show",
    "classify",
    "quote_ident",
    "substitute_functions",
]

SYSTEM_SCHEMAS = frozenset(
    {"pg_catalog", "information_schema", "mz_catalog", "mz_internal", "mz_introspection"}
)
"""Schemas whose relations the system catalog generates."""


@dataclass(frozen=True)
class Names:
    """The environment's one database, schema and the clusters it has."""

    database: str = "materialize"
    schema: str = "public"
    clusters: tuple[str, ...] = ("default",)
    system_relations: frozenset[str] = frozenset()
    """Unqualified names that are system relations (``mz_tables``, ``pg_class``, ...)."""


@dataclass(frozen=True)
class Begin:
    read_only: bool = False
    isolation: str | None = None


@dataclass(frozen=True)
class Commit:
    pass


@dataclass(frozen=True)
class Rollback:
    pass


@dataclass(frozen=True)
class SetVariable:
    """``SET [SESSION|LOCAL] name = value`` (``value`` None: ``DEFAULT``)."""

    name: str
    value: str | None
    local: bool = False


@dataclass(frozen=True)
class SetTransaction:
    """``SET TRANSACTION`` / ``SET SESSION CHARACTERISTICS AS TRANSACTION`` ``ISOLATION LEVEL``."""

    isolation: str | None
    read_only: bool | None
    session: bool = False


@dataclass(frozen=True)
class Reset:
    """``RESET name`` (``None``: ``RESET ALL``)."""

    name: str | None


@dataclass(frozen=True)
class Show:
    """``SHOW name`` (``all`` for ``SHOW ALL``)."""

    name: str


@dataclass(frozen=True)
class Declare:
    """``DECLARE name CURSOR FOR <query | SUBSCRIBE ...>``: ``body`` is the inner statement."""

    name: str
    body: str
    body_offset: int


@dataclass(frozen=True)
class Fetch:
    """``FETCH [n | ALL | NEXT] [FROM] name [WITH (timeout = '1s')]`` (``count`` None: all)."""

    name: str
    count: int | None
    timeout_ms: int | None = None


@dataclass(frozen=True)
class CloseCursor:
    """``CLOSE name`` (``None``: ``CLOSE ALL``)."""

    name: str | None


@dataclass(frozen=True)
class CopyOptions:
    """``FORMAT text | csv | binary``, ``DELIMITER``, ``NULL``, ``HEADER``, ``QUOTE``,
    ``ESCAPE`` (PostgreSQL's defaults per format)."""

    format: Literal["text", "csv", "binary"] = "text"
    delimiter: str | None = None
    null: str | None = None
    header: bool = False
    quote: str = '"'
    escape: str | None = None

    @property
    def sep(self) -> str:
        return (
            self.delimiter
            if self.delimiter is not None
            else ("," if self.format == "csv" else "\t")
        )

    @property
    def null_text(self) -> str:
        return self.null if self.null is not None else ("" if self.format == "csv" else "\\N")


@dataclass(frozen=True)
class CopyTo:
    """``COPY (query | SUBSCRIBE ...) TO STDOUT`` or ``COPY name [(cols)] TO STDOUT``: ``body``
    is the query (a ``SELECT`` made of a bare name) for the session to run."""

    body: str
    body_offset: int
    options: CopyOptions


@dataclass(frozen=True)
class CopyFrom:
    """``COPY name [(cols)] FROM STDIN``."""

    table: str
    columns: tuple[str, ...] | None
    options: CopyOptions


@dataclass(frozen=True)
class Discard:
    """``DISCARD ALL | PLANS | SEQUENCES | TEMP``, ``DEALLOCATE``: what to forget."""

    what: str
    name: str | None = None


@dataclass(frozen=True)
class Noop:
    """A statement with nothing to do but answer ``tag`` (and ``notice``)."""

    tag: str
    notice: str | None = None


SessionStatement: TypeAlias = (
    Noop
    | Begin
    | Commit
    | Rollback
    | SetVariable
    | SetTransaction
    | Reset
    | Show
    | Declare
    | Fetch
    | CloseCursor
    | CopyTo
    | CopyFrom
    | Discard
)


@dataclass(frozen=True)
class CatalogQuery:
    """A query for the system catalog: the statement's text as written."""

    sql: str


@dataclass(frozen=True)
class Passthrough:
    """A statement for :func:`.parse.parse_one`: ``sql`` rewritten as the module docstring says;
    ``notice`` is a message for the client (``CREATE SCHEMA IF NOT EXISTS public``)."""

    sql: str
    notice: str | None = None
    reads_catalog: bool = False
    functions: tuple[str, ...] = field(default=())
    cluster: str | None = None
    """The cluster an ``IN CLUSTER c`` clause named (the clause is blanked out of ``sql``):
    where the index or materialized view it creates is placed, instead of the session's."""


Classified: TypeAlias = SessionStatement | CatalogQuery | Passthrough


def quote_ident(name: str) -> str:
    """``name`` as an identifier: bare when it reads back the same, else double-quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name.upper() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


_RESERVED = frozenset(
    [
        "ALL",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "BETWEEN",
        "BY",
        "CASE",
        "CAST",
        "CHECK",
        "COLUMN",
        "CREATE",
        "CROSS",
        "CURRENT_DATE",
        "DEFAULT",
        "DESC",
        "DISTINCT",
        "DO",
        "ELSE",
        "END",
        "EXCEPT",
        "FALSE",
        "FETCH",
        "FOR",
        "FROM",
        "FULL",
        "GRANT",
        "GROUP",
        "HAVING",
        "IN",
        "INNER",
        "INTERSECT",
        "INTO",
        "IS",
        "JOIN",
        "LEFT",
        "LIKE",
        "LIMIT",
        "NATURAL",
        "NOT",
        "NULL",
        "OFFSET",
        "ON",
        "OR",
        "ORDER",
        "OUTER",
        "RIGHT",
        "SELECT",
        "TABLE",
        "THEN",
        "TO",
        "TRUE",
        "UNION",
        "UNIQUE",
        "USING",
        "WHEN",
        "WHERE",
        "WITH",
    ]
)

_WS = r"\s+"
_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)'
_QUALIFIED = rf"{_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}}"


def _unquote(text: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


def _value(text: str) -> str:
    """A SET value: a string literal unquoted, a list joined with ``, ``."""
    parts = []
    for raw in _split_commas(text):
        raw = raw.strip()
        if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
            parts.append(raw[1:-1].replace("''", "'"))
        elif raw.upper().startswith("E'") and raw.endswith("'"):
            parts.append(raw[2:-1].replace("''", "'").replace("\\\\", "\\"))
        elif raw.startswith('"') and raw.endswith('"'):
            parts.append(raw[1:-1].replace('""', '"'))
        else:
            parts.append(raw)
    return ", ".join(parts)


def _split_commas(text: str) -> list[str]:
    out, cur, quote = [], "", ""
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            cur += ch
        elif ch == ",":
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


_BEGIN = re.compile(
    r"^\s*(?:BEGIN|START\s+TRANSACTION)(?:\s+(?:WORK|TRANSACTION))?(?P<modes>[\s\S]*?);?\s*$",
    re.IGNORECASE,
)
_COMMIT = re.compile(r"^\s*(?:COMMIT|END)(?:\s+(?:WORK|TRANSACTION))?\s*;?\s*$", re.IGNORECASE)
_ROLLBACK = re.compile(
    r"^\s*(?:ROLLBACK|ABORT)(?:\s+(?:WORK|TRANSACTION))?\s*;?\s*$", re.IGNORECASE
)
_SET_TX = re.compile(
    r"^\s*SET\s+(?P<session>SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\s+(?P<modes>[\s\S]+?)\s*$",
    re.IGNORECASE,
)
_SET = re.compile(
    rf"^\s*SET\s+(?:(?P<scope>SESSION|LOCAL)\s+)?(?P<name>{_IDENT}(?:\.{_IDENT})?)\s*(?:=|\s+TO\s+|\s)\s*(?P<value>[\s\S]*?)\s*$",
    re.IGNORECASE,
)
_SET_TIME_ZONE = re.compile(
    r"^\s*SET\s+(?:(?:SESSION|LOCAL)\s+)?TIME\s+ZONE\s+(?P<value>[\s\S]+?)\s*$", re.IGNORECASE
)
_SET_NAMES = re.compile(r"^\s*SET\s+NAMES\s+(?P<value>[\s\S]+?)\s*$", re.IGNORECASE)
_RESET = re.compile(rf"^\s*RESET\s+(?P<name>{_IDENT}(?:\.{_IDENT})?)\s*$", re.IGNORECASE)
_SHOW_VAR = re.compile(rf"^\s*SHOW\s+(?P<name>{_IDENT}(?:\.{_IDENT})?)\s*$", re.IGNORECASE)
_SHOW_MULTI = re.compile(
    r"^\s*SHOW\s+(?P<name>TRANSACTION\s+ISOLATION\s+LEVEL|TIME\s+ZONE|SESSION\s+AUTHORIZATION)\s*$",
    re.IGNORECASE,
)
_DECLARE = re.compile(
    rf"^\s*DECLARE\s+(?P<name>{_IDENT})\s+(?:BINARY\s+)?(?:(?:NO\s+)?SCROLL\s+)?CURSOR\s+"
    r"(?:(?:WITH|WITHOUT)\s+HOLD\s+)?FOR\s+",
    re.IGNORECASE,
)
_FETCH = re.compile(
    rf"^\s*FETCH\s+(?:(?P<dir>FORWARD\s+)?(?P<count>ALL|NEXT|\d+)\s+)?(?:(?:FROM|IN)\s+)?(?P<name>{_IDENT})"
    r"(?:\s+WITH\s*\(\s*TIMEOUT\s*=?\s*'?(?P<timeout>[^')]*)'?\s*\))?\s*$",
    re.IGNORECASE,
)
_CLOSE = re.compile(rf"^\s*CLOSE\s+(?P<name>ALL|{_IDENT})\s*$", re.IGNORECASE)
_DISCARD = re.compile(r"^\s*DISCARD\s+(ALL|PLANS|SEQUENCES|TEMP|TEMPORARY)\s*$", re.IGNORECASE)
_DEALLOCATE = re.compile(
    rf"^\s*DEALLOCATE\s+(?:PREPARE\s+)?(?P<name>ALL|{_IDENT})\s*$", re.IGNORECASE
)
_COPY = re.compile(r"^\s*COPY\b", re.IGNORECASE)
_COPY_STD = re.compile(
    r"\b(?P<dir>TO\s+STDOUT|FROM\s+STDIN)\b(?P<opts>[\s\S]*)$",
    re.IGNORECASE,
)
_CREATE_SCHEMA = re.compile(
    rf"^\s*CREATE\s+SCHEMA\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_QUALIFIED})\s*$",
    re.IGNORECASE,
)
_SHOW_CATALOG = re.compile(
    r"^\s*SHOW\s+(?P<what>CLUSTERS|CLUSTER\s+REPLICAS|SCHEMAS|DATABASES|SECRETS|CONNECTIONS|ROLES|TYPES)"
    rf"(?:\s+(?:FROM|IN)\s+(?P<from>{_QUALIFIED}))?\s*$",
    re.IGNORECASE,
)
_DEFAULT_INDEX = re.compile(r"^(?P<head>\s*CREATE\s+)DEFAULT\s+INDEX\b", re.IGNORECASE)
_CLUSTER_DDL = re.compile(r"^\s*(?:CREATE|ALTER|DROP)\s+CLUSTER\b", re.IGNORECASE)
_IN_CLUSTER = re.compile(rf"\bIN\s+CLUSTER\s+(?P<name>{_IDENT})", re.IGNORECASE)
_USING_ARRANGEMENT = re.compile(r"\bUSING\s+ARRANGEMENT\b", re.IGNORECASE)


def _tx_modes(text: str) -> tuple[str | None, bool | None]:
    isolation: str | None = None
    read_only: bool | None = None
    t = " ".join(text.replace(",", " ").split()).lower()
    m = re.search(
        r"isolation level (strict serializable|serializable|repeatable read|read committed|"
        r"read uncommitted|strong session serializable)",
        t,
    )
    if m:
        isolation = m.group(1)
    elif "isolation level" in t:
        raise SqlSyntaxError(f"unknown isolation level in {text.strip()!r}", position=1)
    if "read only" in t:
        read_only = True
    elif "read write" in t:
        read_only = False
    rest = re.sub(
        r"isolation level [a-z ]+?(?=( read| not|$))|read only|read write|not deferrable|deferrable",
        "",
        t,
    ).strip()
    if rest:
        raise SqlSyntaxError(f'syntax error at or near "{rest.split()[0]}"', position=1)
    return isolation, read_only


def _copy_options(text: str) -> CopyOptions:
    """``WITH (FORMAT csv, HEADER)``, the old ``WITH CSV HEADER`` or ``(FORMAT csv)``."""
    t = text.strip().rstrip(";").strip()
    if not t:
        return CopyOptions()
    m = re.match(r"^(?:WITH\s*)?\((?P<inner>[\s\S]*)\)$", t, re.IGNORECASE)
    opts: dict[str, str | None] = {}
    if m:
        for part in _split_commas(m.group("inner")):
            words = part.strip().split(None, 1)
            if not words:
                continue
            key = words[0].lower()
            value = words[1].strip() if len(words) > 1 else None
            if value is not None and value.startswith("="):
                value = value[1:].strip()
            opts[key] = _value(value) if value is not None else None
    else:
        rest = re.sub(r"^WITH\s+", "", t, flags=re.IGNORECASE)
        tokens = re.findall(r"'(?:[^']|'')*'|\S+", rest)
        i = 0
        while i < len(tokens):
            word = tokens[i].lower()
            if word in ("csv", "binary"):
                opts["format"] = word
            elif word == "header":
                opts["header"] = None
            elif word in ("delimiter", "null", "quote", "escape") and i + 1 < len(tokens):
                i += 1
                if tokens[i].lower() == "as" and i + 1 < len(tokens):
                    i += 1
                opts[word] = _value(tokens[i])
            else:
                raise SqlSyntaxError(f'syntax error at or near "{tokens[i]}"', position=1)
            i += 1
    fmt = (opts.pop("format", None) or "text").lower()
    if fmt not in ("text", "csv", "binary"):
        raise UnsupportedSql(f"COPY format {fmt}", position=1)
    header_raw = opts.pop("header", "false" if "header" not in opts else None)
    header = header_raw is None or str(header_raw).lower() in ("true", "on", "1", "match")
    delimiter = opts.pop("delimiter", None)
    null = opts.pop("null", None)
    quote = opts.pop("quote", None) or '"'
    escape = opts.pop("escape", None)
    if opts:
        raise UnsupportedSql(f"COPY option {next(iter(opts)).upper()}", position=1)
    if delimiter is not None and len(delimiter) != 1:
        raise UnsupportedSql("COPY delimiter must be a single one-byte character", position=1)
    return CopyOptions(fmt, delimiter, null, header, quote, escape)  # type: ignore[arg-type]


def _copy(text: str, names: Names) -> CopyTo | CopyFrom | None:
    m = _COPY_STD.search(text)
    if m is None:
        return None  # COPY ... TO 'url': the front end's
    direction = m.group("dir").split()[0].upper()
    options = _copy_options(m.group("opts"))
    start = _COPY.match(text)
    assert start is not None
    body = text[start.end() : m.start()]
    stripped = body.strip()
    offset = start.end() + (len(body) - len(body.lstrip()))
    if direction == "TO":
        if stripped.startswith("("):
            if not stripped.endswith(")"):
                raise SqlSyntaxError("COPY needs a name or a (query)", position=start.end() + 1)
            inner_start = offset + 1
            inner = text[inner_start : offset + len(stripped) - 1]
            return CopyTo(inner, inner_start, options)
        target = re.fullmatch(rf"(?P<name>{_QUALIFIED})\s*(?:\((?P<cols>[^)]*)\))?", stripped)
        if target is None:
            raise SqlSyntaxError("COPY needs a name or a (query)", position=start.end() + 1)
        name = _user_name(target.group("name"), names)
        cols = target.group("cols")
        select = ", ".join(quote_ident(_unquote(c)) for c in cols.split(",")) if cols else "*"
        return CopyTo(f"SELECT {select} FROM {quote_ident(name)}", -1, options)
    target = re.fullmatch(rf"(?P<name>{_QUALIFIED})\s*(?:\((?P<cols>[^)]*)\))?", stripped)
    if target is None:
        raise SqlSyntaxError("COPY FROM STDIN needs a table name", position=start.end() + 1)
    if options.format == "binary":
        raise UnsupportedSql("COPY FROM STDIN in the binary format", position=1)
    cols = target.group("cols")
    columns = tuple(_unquote(c) for c in cols.split(",")) if cols else None
    return CopyFrom(_user_name(target.group("name"), names), columns, options)


def _parts(qualified: str) -> list[str]:
    return [_unquote(p) for p in re.findall(_IDENT, qualified)]


def _user_name(qualified: str, names: Names) -> str:
    """The object name of a possibly qualified user name [UndefinedObject]."""
    parts = _parts(qualified)
    if len(parts) == 3:
        if parts[0] != names.database:
            raise _undefined(f"unknown database '{parts[0]}'", "3D000")
        parts = parts[1:]
    if len(parts) == 2:
        if parts[0] != names.schema:
            raise _undefined(f"unknown schema '{parts[0]}'", "3F000")
        parts = parts[1:]
    return parts[0]


def _session_statement(text: str, names: Names) -> SessionStatement | None:
    m = _COMMIT.match(text)
    if m:
        return Commit()
    m = _ROLLBACK.match(text)
    if m:
        return Rollback()
    m = _BEGIN.match(text)
    if m:
        isolation, read_only = _tx_modes(m.group("modes"))
        return Begin(bool(read_only), isolation)
    m = _SET_TX.match(text)
    if m:
        isolation, read_only = _tx_modes(m.group("modes"))
        return SetTransaction(isolation, read_only, bool(m.group("session")))
    m = _SET_TIME_ZONE.match(text)
    if m:
        value = m.group("value")
        return SetVariable(
            "timezone", None if value.upper() in ("DEFAULT", "LOCAL") else _value(value)
        )
    m = _SET_NAMES.match(text)
    if m:
        return SetVariable("client_encoding", _value(m.group("value")))
    m = _SET.match(text)
    if m:
        value = m.group("value")
        if not value:
            raise SqlSyntaxError("SET needs a value", position=len(text.rstrip()) + 1)
        default = value.strip().upper() == "DEFAULT"
        scope = (m.group("scope") or "").upper()
        return SetVariable(
            _unquote(m.group("name")), None if default else _value(value), scope == "LOCAL"
        )
    m = _RESET.match(text)
    if m:
        name = _unquote(m.group("name"))
        return Reset(None if name == "all" else name)
    m = _SHOW_MULTI.match(text)
    if m:
        word = " ".join(m.group("name").lower().split())
        return Show(
            {
                "transaction isolation level": "transaction_isolation",
                "time zone": "timezone",
                "session authorization": "session_authorization",
            }[word]
        )
    m = _DECLARE.match(text)
    if m:
        return Declare(_unquote(m.group("name")), text[m.end() :], m.end())
    m = _FETCH.match(text)
    if m:
        count_word = (m.group("count") or "NEXT").upper()
        count = None if count_word == "ALL" else 1 if count_word == "NEXT" else int(count_word)
        timeout = m.group("timeout")
        ms = None
        if timeout is not None:
            from .parse import parse_interval_ms

            t = timeout.strip()
            try:
                ms = (
                    int(float(t) * 1000)
                    if re.fullmatch(r"\d+(\.\d+)?", t)
                    else parse_interval_ms(t)
                )
            except ValueError as e:
                raise SqlSyntaxError(str(e), position=1) from None
        return Fetch(_unquote(m.group("name")), count, ms)
    m = _CLOSE.match(text)
    if m:
        name = m.group("name")
        return CloseCursor(None if name.upper() == "ALL" else _unquote(name))
    m = _DISCARD.match(text)
    if m:
        return Discard(m.group(1).lower())
    m = _DEALLOCATE.match(text)
    if m:
        name = m.group("name")
        return Discard("deallocate", None if name.upper() == "ALL" else _unquote(name))
    if _COPY.match(text):
        return _copy(text, names)
    m = _SHOW_VAR.match(text)
    if m and not _is_catalog_show(m.group("name")):
        return Show(_unquote(m.group("name")))
    return None


_CATALOG_SHOWS = frozenset(
    {"objects", "tables", "views", "indexes", "indices", "sources", "sinks", "columns", "create"}
    | {"clusters", "cluster", "schemas", "databases", "secrets", "connections", "roles", "types"}
)


def _is_catalog_show(word: str) -> bool:
    return word.lower() in _CATALOG_SHOWS or word.lower() == "materialized"


_SHOW_QUERIES = {
    "clusters": "SELECT name, replicas FROM mz_internal.mz_show_clusters ORDER BY name",
    "cluster replicas": (
        "SELECT cluster, replica, size, ready FROM mz_internal.mz_show_cluster_replicas "
        "ORDER BY cluster, replica"
    ),
    "schemas": "SELECT name FROM mz_catalog.mz_schemas ORDER BY name",
    "databases": "SELECT name FROM mz_catalog.mz_databases ORDER BY name",
    "secrets": "SELECT name FROM mz_catalog.mz_secrets ORDER BY name",
    "connections": "SELECT name, type FROM mz_catalog.mz_connections ORDER BY name",
    "roles": "SELECT name FROM mz_catalog.mz_roles ORDER BY name",
    "types": "SELECT name FROM mz_catalog.mz_types WHERE id LIKE 'u%' ORDER BY name",
}


def _tokens(text: str) -> list[Token]:
    from ._dialect import tokenize

    try:
        return tokenize(text)
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql=text) from None


_FUNCTIONS = frozenset(
    {
        "version",
        "current_database",
        "current_schema",
        "current_schemas",
        "current_user",
        "session_user",
        "current_role",
        "user",
        "pg_backend_pid",
        "now",
        "current_timestamp",
        "mz_now",
        "mz_version",
        "mz_version_num",
        "current_setting",
        "pg_postmaster_start_time",
        "current_catalog",
        "has_table_privilege",
        "has_schema_privilege",
        "has_database_privilege",
        "pg_typeof",
        "format_type",
        "obj_description",
        "col_description",
        "pg_get_userbyid",
        "pg_table_is_visible",
        "pg_encoding_to_char",
        "inet_server_addr",
        "inet_server_port",
        "txid_current",
        "mz_environment_id",
    }
)
"""Functions that make a query with no relation of its own a catalog query."""


def _blank_leading_comments(text: str) -> str:
    """``text`` with the comments before its first word blanked (newlines kept), so
    positions stay those of the text: dbt puts a ``/* {...} */`` before every statement."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = ["\n" if ch == "\n" else " " for ch in text[i:end]]
            i = end
        else:
            break
    return "".join(out)


_KEYWORD_FUNCTIONS = frozenset(
    {
        "current_user",
        "session_user",
        "current_role",
        "current_catalog",
        "current_schema",
        "current_timestamp",
    }
)
"""PostgreSQL's functions called without parentheses."""


def classify(text: str, names: Names) -> Classified:
    """What the statement ``text`` is (see the module docstring) [SqlSyntaxError,
    UnsupportedSql, UndefinedObject]."""
    text = _blank_leading_comments(text)
    session = _session_statement(text, names)
    if session is not None:
        return session
    m = _SHOW_CATALOG.match(text)
    if m:
        what = " ".join(m.group("what").lower().split())
        return CatalogQuery(_SHOW_QUERIES[what])
    m = _CREATE_SCHEMA.match(text)
    if m:
        target = _parts(m.group("name"))
        if target[-1] == names.schema and (len(target) == 1 or target[0] == names.database):
            if m.group("ine"):
                return Noop("CREATE SCHEMA", f'schema "{names.schema}" already exists, skipping')
            raise _undefined(f'schema "{names.schema}" already exists', "42P06")
        raise UnsupportedSql(
            f"CREATE SCHEMA (tidegate has one schema, {names.database}.{names.schema})",
            position=1,
        )
    if _CLUSTER_DDL.match(text):  # c.r1 names a replica, not a relation of schema c
        return Passthrough(text)
    return _rewrite(text, names)


def _rewrite(text: str, names: Names) -> Classified:
    """Qualified names, clusters, default indexes and constant functions (module docstring)."""
    m = _DEFAULT_INDEX.match(text)
    if m:
        text = _default_index(text, m)
    in_cluster: str | None = None
    for c in list(_IN_CLUSTER.finditer(text)):
        cluster = _unquote(c.group("name"))
        if cluster not in names.clusters:
            raise _undefined(f"unknown cluster '{cluster}'", "42704")
        in_cluster = cluster
        text = text[: c.start()] + " " * (c.end() - c.start()) + text[c.end() :]
    text = _USING_ARRANGEMENT.sub(lambda x: " " * len(x.group(0)), text)
    tokens = _tokens(text)
    out = list(text)
    qualifiers: frozenset[str] | None = None

    def relation_qualifiers(text: str) -> frozenset[str]:
        nonlocal qualifiers
        if qualifiers is None:
            qualifiers = _relation_qualifiers(text)
        return qualifiers

    system = False
    user_relation = False
    functions: list[str] = []
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i]
        if t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or t.text.isidentifier():
            chain = [t]
            j = i
            while (
                j + 2 < n
                and tokens[j + 1].token_type == TokenType.DOT
                and (
                    tokens[j + 2].token_type in (TokenType.VAR, TokenType.IDENTIFIER)
                    or tokens[j + 2].text.isidentifier()
                )
            ):
                chain.append(tokens[j + 2])
                j += 2
            words = [_token_name(x) for x in chain]
            followed_by_paren = j + 1 < n and tokens[j + 1].token_type == TokenType.L_PAREN
            if len(chain) >= 2 and any(w in SYSTEM_SCHEMAS for w in words[:-1]):
                system = True  # pg_catalog.pg_class, pg_catalog.pg_class.oid, a function
                if followed_by_paren:
                    functions.append(words[-1])
            elif len(chain) >= 2:
                qualifier = words[:-1]
                if len(qualifier) == 2:
                    if qualifier[0] != names.database and qualifier[1] in SYSTEM_SCHEMAS:
                        pass  # another database's catalog: the catalog engine says it is unknown
                    elif qualifier[0] != names.database and not followed_by_paren:
                        raise _undefined(f"unknown database '{qualifier[0]}'", "3D000")
                    qualifier = qualifier[1:]
                schema = qualifier[0]
                if schema in SYSTEM_SCHEMAS:
                    system = True
                    if followed_by_paren:
                        functions.append(words[-1])
                elif schema == names.schema:
                    user_relation = user_relation or not followed_by_paren
                    start = chain[0].start
                    end = chain[-1].start
                    for k in range(start, end):
                        if out[k] != "\n":
                            out[k] = " "
                elif (
                    len(chain) == 2
                    and not followed_by_paren
                    and schema not in relation_qualifiers(text)
                ):
                    pass  # t.col: a column of a relation (alias) in scope
                elif not followed_by_paren:
                    raise _undefined(f"unknown schema '{schema}'", "3F000")
            elif followed_by_paren and words[0] in _FUNCTIONS:
                functions.append(words[0])
            elif (
                not followed_by_paren
                and words[0] in _KEYWORD_FUNCTIONS
                and not t.text.startswith('"')
            ):
                functions.append(words[0])  # current_user: a function without parentheses
            elif (
                not followed_by_paren
                and words[0] in names.system_relations
                and _after_from(tokens, i)
            ):
                system = True
            i = j + 1
            continue
        if t.token_type in (TokenType.CURRENT_USER, TokenType.CURRENT_TIMESTAMP):
            functions.append(t.text.lower())
        i += 1
    rewritten = "".join(out)
    is_query = re.match(r"^\s*(SELECT|WITH|\(|VALUES|TABLE)\b", rewritten, re.IGNORECASE)
    if system and is_query:
        return CatalogQuery(text)
    if is_query and functions and not _has_from(tokens):
        return CatalogQuery(text)
    return Passthrough(
        rewritten,
        reads_catalog=system,
        functions=tuple(functions),
        cluster=in_cluster,
    )


def _token_name(t: Token) -> str:
    if t.token_type == TokenType.IDENTIFIER:
        return str(t.text)
    return str(t.text).lower()


def _after_from(tokens: list[Token], i: int) -> bool:
    """Whether the name at ``i`` stands where a relation goes (after FROM, JOIN or a comma
    in a FROM list)."""
    k = i - 1
    while k >= 0:
        tt = tokens[k].token_type
        if tt in (TokenType.FROM, TokenType.JOIN):
            return True
        if tt == TokenType.COMMA:
            k -= 1
            # skip back over the previous FROM item (name [AS] alias)
            while k >= 0 and tokens[k].token_type not in (
                TokenType.FROM,
                TokenType.JOIN,
                TokenType.SELECT,
                TokenType.WHERE,
                TokenType.L_PAREN,
                TokenType.R_PAREN,
            ):
                k -= 1
            return k >= 0 and tokens[k].token_type in (TokenType.FROM, TokenType.JOIN)
        return False
    return False


def _relation_qualifiers(text: str) -> frozenset[str]:
    """The schema names that qualify a relation (``s`` of ``FROM s.t``) in ``text``.

    Whether ``a.b`` names a column of ``a`` or a relation of schema ``a`` depends on
    where it stands (``IS DISTINCT FROM a.b``, ``extract(year FROM a.b)`` and
    ``GROUP BY 1, a.b`` are columns), so the parser decides, not the tokens around it.
    Text the parser refuses qualifies nothing here: the binder reports its error.
    """
    from sqlglot import exp
    from sqlglot.errors import ParseError

    from ._dialect import DIALECT, tokenize
    from ._limits import check_nesting, enough_frames

    try:
        tokens = tokenize(text)
        check_nesting(tokens, text)  # before the parser: past the limits, it recurses or stalls
        with enough_frames():
            trees = DIALECT.parser().parse(tokens, text)
    except (ParseError, TokenError):
        return frozenset()
    return frozenset(
        t.db for tree in trees if tree is not None for t in tree.find_all(exp.Table) if t.db
    )


def _has_from(tokens: list[Token]) -> bool:
    return any(t.token_type == TokenType.FROM for t in tokens)


def _default_index(text: str, m: re.Match[str]) -> str:
    """``CREATE DEFAULT INDEX [IN CLUSTER c] ON obj`` as an index on every column (``()``)."""
    rest = text[m.end() :]
    on = re.search(rf"\bON\s+(?P<obj>{_QUALIFIED})\s*(?P<cols>\([^)]*\))?\s*$", rest, re.IGNORECASE)
    if on is None:
        raise SqlSyntaxError("CREATE DEFAULT INDEX needs ON <object>", position=m.end() + 1)
    head = m.group("head") + " " * len("DEFAULT ") + "INDEX"
    tail = rest[: on.end("obj")] + " ()" if on.group("cols") is None else rest
    return head + tail


def _undefined(message: str, sqlstate: str) -> SqlError:
    """An unknown schema (3F000), database (3D000) or cluster (42704), or a duplicate (42P06)."""
    error = UndefinedObject(message) if sqlstate != "42P06" else SqlError(message)
    error.sqlstate = sqlstate
    return error


def keeps_mz_now(statement: Any) -> bool:
    """Whether the parsed ``statement``'s ``mz_now()`` calls are temporal filters for lowering,
    not the session's constant for the time it runs (see :func:`._temporal.filters_by_mz_now`):
    always in views, indexes and subscribes, in a query read once when every call is one.
    A write keeps them too, to be refused as Materialize refuses them (a write happens once,
    at one time: there is nothing to filter by time)."""
    from ._temporal import filters_by_mz_now

    inner = statement.statement if isinstance(statement, ExplainStmt) else statement
    if isinstance(inner, CreateViewStmt | SubscribeStmt):
        return filters_by_mz_now(inner.query, maintained=True)
    if isinstance(inner, SelectStmt):
        return filters_by_mz_now(inner.query, maintained=False)
    return isinstance(inner, InsertStmt | UpdateStmt | DeleteStmt)


def substitute_functions(text: str, values: dict[str, str]) -> str:
    """``text`` with each call of a function in ``values`` (``now()``, ``current_user``)
    replaced by the literal text given for it (the session's constants)."""
    tokens = _tokens(text)
    out: list[str] = []
    last = 0
    i = 0
    while i < len(tokens):
        t = tokens[i]
        name = str(t.text).lower()
        if name in values and (i == 0 or tokens[i - 1].token_type != TokenType.DOT):
            end = t.end + 1
            if (
                i + 2 < len(tokens)
                and tokens[i + 1].token_type == TokenType.L_PAREN
                and tokens[i + 2].token_type == TokenType.R_PAREN
            ):
                end = tokens[i + 2].end + 1
                i += 2
            elif i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
                i += 1
                continue  # called with arguments: not a constant
            out.append(text[last : t.start])
            out.append(values[name])
            last = end
        i += 1
    out.append(text[last:])
    return "".join(out)
