"""Parsing: SQL text to :mod:`.ast` statements.

The text is split into statements at top-level semicolons (sqlglot's
tokenizer, so a ``;`` inside a string does not split). Materialize's own
statements (``SUBSCRIBE``, ``SHOW ...``, ``EXPLAIN``, ``ALTER ... SET
(RETAIN HISTORY ...)``, ``DROP SOURCE``/``SINK``) and the ``AS OF`` suffix of
a ``SELECT`` are recognised here, ``CREATE SOURCE``/``SINK`` by
:mod:`.storage`; everything else is parsed by sqlglot (PostgreSQL dialect)
and mapped onto our statements. A prefix handled here is blanked out with
spaces before sqlglot sees the rest, so positions stay those of the
statement's text.
"""

from __future__ import annotations

import re
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..errors import (
    CharacterNotInRepertoire,
    DuplicateColumn,
    SqlError,
    SqlSyntaxError,
    UndefinedColumn,
    UnsupportedSql,
)
from ..text import surrogate_at, surrogate_text
from ._common import ident, position_of, sql_type_of
from ._dialect import DIALECT, tokenize
from ._limits import (
    MAX_ARRAY_DIMENSIONS,
    MAX_SQL_BYTES,
    MAX_SQL_NESTING,
    MAX_STATEMENT_TOKENS,
    MAX_TARGET_LIST,
    check_nesting,
    check_sql_size,
    check_tokens,
    with_enough_frames,
)
from .ast import (
    AlterRetainHistoryStmt,
    ColumnDef,
    CopyToStmt,
    CreateIndexStmt,
    CreateTableStmt,
    CreateViewStmt,
    DeleteStmt,
    DropKind,
    DropStmt,
    ExplainStmt,
    InsertStmt,
    SelectStmt,
    ShowColumnsStmt,
    ShowCreateStmt,
    ShowKind,
    ShowStmt,
    Statement,
    SubscribeStmt,
    UpdateStmt,
)
from .clusters import is_cluster_statement, parse_cluster_statement
from .interval import parse_interval_ms
from .storage import is_storage_statement, parse_storage_statement
from .subscribe import parse_subscribe_tail

__all__ = [
    "MAX_ARRAY_DIMENSIONS",
    "MAX_SQL_BYTES",
    "MAX_SQL_NESTING",
    "MAX_STATEMENT_TOKENS",
    "MAX_TARGET_LIST",
    "check_sql_text",
    "parse",
    "parse_interval_ms",
    "parse_one",
    "split_statements",
]

_DIALECT = "postgres"  # for printing nodes back as SQL


def check_sql_text(text: str) -> None:
    """[CharacterNotInRepertoire] unless ``text`` is Unicode scalar values only: the whole
    text, comments included, as PostgreSQL checks a query's bytes before it parses them."""
    at = surrogate_at(text)
    if at is not None:
        raise CharacterNotInRepertoire(
            f'invalid byte sequence for encoding "UTF8": {surrogate_text(text, at)}',
            position=at + 1,
            sql=text,
        )


def split_statements(text: str) -> list[tuple[str, int]]:
    """The statements of ``text`` as ``(statement text, offset in text)``, empty ones left out
    [ProgramLimitExceeded: ``text`` over :data:`MAX_SQL_BYTES`; StatementTooComplex: a statement
    over :data:`MAX_STATEMENT_TOKENS`, both before anything is parsed]."""

    check_sql_size(text)
    check_sql_text(text)

    try:
        tokens = tokenize(text)
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql=text) from None
    out: list[tuple[str, int]] = []
    start = 0
    first = 0  # the index of the statement's first token
    for k, t in enumerate(tokens):
        if t.token_type == sqlglot.TokenType.SEMICOLON:
            check_tokens(k - first)
            out.append((text[start : t.start], start))
            start, first = t.end + 1, k + 1
    check_tokens(len(tokens) - first)
    out.append((text[start:], start))
    return [(s, o) for s, o in out if s.strip()]


def parse(text: str) -> list[Statement]:
    """Every statement of ``text`` (each error carries its statement's text and a position in it)."""
    return [parse_one(s) for s, _ in split_statements(text)]


def _blank(text: str, upto: int) -> str:
    """``text`` with its first ``upto`` characters replaced by spaces (newlines kept)."""
    head = "".join("\n" if ch == "\n" else " " for ch in text[:upto])
    return head + text[upto:]


_KIND = r"(table|view|materialized\s+view|index|source|sink)"
_NAME = r'("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$.]*)'
_AS_OF = re.compile(r"\bAS\s+OF\s+(AT\s+LEAST\s+)?(\S+?)\s*$", re.IGNORECASE)
_EXPLAIN = re.compile(
    r"^\s*EXPLAIN\b(?:\s+(?:OPTIMIZED\s+|RAW\s+|DECORRELATED\s+)?PLAN(?:\s+AS\s+TEXT)?\s+FOR\b)?",
    re.IGNORECASE,
)
_SUBSCRIBE = re.compile(r"^\s*SUBSCRIBE\b(?:\s+TO\b)?", re.IGNORECASE)
_SHOW = re.compile(r"^\s*SHOW\b", re.IGNORECASE)
_COPY = re.compile(r"^\s*COPY\b", re.IGNORECASE)
_COPY_TAIL = re.compile(
    r"\bTO\s+'([^']*)'\s*(?:WITH\s*\(\s*FORMAT\s*=?\s*'?(\w+)'?\s*\)\s*)?$", re.IGNORECASE
)
_SHOW_LIST = re.compile(
    r"^\s*SHOW\s+(objects|tables|views|materialized\s+views|indexes|indices|sources|sinks)"
    rf"(?:\s+(?:on|from|in)\s+{_NAME})?\s*$",
    re.IGNORECASE,
)
_SHOW_COLUMNS = re.compile(rf"^\s*SHOW\s+COLUMNS\s+(?:FROM|IN)\s+{_NAME}\s*$", re.IGNORECASE)
_SHOW_CREATE = re.compile(rf"^\s*SHOW\s+CREATE\s+{_KIND}\s+{_NAME}\s*$", re.IGNORECASE)
_ALTER = re.compile(
    rf"^\s*ALTER\s+{_KIND}\s+{_NAME}\s+(SET|RESET)\s*\(\s*RETAIN\s+HISTORY"
    r"(?:\s*=?\s*FOR\s+'([^']*)')?\s*\)\s*$",
    re.IGNORECASE,
)


def _name(text: str) -> str:
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    return text.lower()


_DROP_STORAGE = re.compile(
    rf"^\s*DROP\s+(SOURCE|SINK)\s+(IF\s+EXISTS\s+)?({_NAME}(?:\s*,\s*{_NAME})*)"
    r"\s*(?P<mode>CASCADE|RESTRICT)?\s*$",
    re.IGNORECASE,
)


def _kind(text: str) -> DropKind:
    k = " ".join(text.lower().split())
    return "materialized-view" if k == "materialized view" else k  # type: ignore[return-value]


def _drop_storage(text: str) -> DropStmt:
    m = _DROP_STORAGE.match(text)
    if m is None:
        raise SqlSyntaxError(
            "syntax error: expected DROP SOURCE | SINK [IF EXISTS] name [, ...] [CASCADE | RESTRICT]",
            position=1,
        )
    names = tuple(_name(n) for n in re.findall(_NAME, m.group(3)))
    cascade = (m.group("mode") or "").upper() == "CASCADE"
    return DropStmt(text, _kind(m.group(1)), names, cascade, m.group(2) is not None)


@with_enough_frames
def parse_one(text: str) -> Statement:
    """One statement (``text`` holds exactly one) [SqlSyntaxError, UnsupportedSql,
    CharacterNotInRepertoire, ProgramLimitExceeded, StatementTooComplex]."""
    check_sql_size(text)
    check_sql_text(text)
    try:
        return _parse(text)
    except SqlError as e:
        raise e.located(text) from None


def _syntax(e: ParseError, text: str) -> SqlSyntaxError:
    """PostgreSQL's ``syntax error at or near "X"`` at the token sqlglot stopped at (never
    sqlglot's own description, which names its classes)."""
    errs = e.errors or [{}]
    first = errs[0]
    highlight = first.get("highlight")
    line, col = first.get("line"), first.get("col")
    pos: int | None = None
    if isinstance(line, int) and isinstance(col, int):
        lines = text.split("\n")
        before = sum(len(x) + 1 for x in lines[: line - 1])
        pos = max(1, before + col - len(str(highlight or "")) + 1)
    if not highlight or pos is None or pos > len(text.rstrip()):
        return SqlSyntaxError(
            "syntax error at end of input", position=len(text.rstrip()) + 1 or None, sql=text
        )
    return SqlSyntaxError(f'syntax error at or near "{highlight}"', position=pos, sql=text)


_STATEMENT_WORDS = frozenset(
    {"CREATE", "INSERT", "DROP", "ALTER", "SUBSCRIBE", "EXPLAIN", "COPY", "SHOW", "GRANT"}
)
"""Words that start a statement and never occur inside one we parse: meeting one after the
start means a ``;`` is missing."""


def _command(tree: Any, text: str) -> SqlError:
    """Why a statement sqlglot could only keep as text (a ``Command``) is refused: a second
    statement where a ``;`` is missing is a syntax error there, anything else unsupported."""

    tokens = tokenize(text)
    depth = 0
    for k, t in enumerate(tokens):
        if t.token_type in (sqlglot.TokenType.L_PAREN, sqlglot.TokenType.L_BRACKET):
            depth += 1
        elif t.token_type in (sqlglot.TokenType.R_PAREN, sqlglot.TokenType.R_BRACKET):
            depth -= 1
        elif k and depth == 0 and t.text.upper() in _STATEMENT_WORDS:
            return SqlSyntaxError(
                f'syntax error at or near "{t.text}"', position=t.start + 1, sql=text
            )
    words = [t.text.upper() for t in tokens[:3] if t.token_type != sqlglot.TokenType.STRING]
    head = " ".join(words[:2]) if words[:1] in (["CREATE"], ["DROP"], ["ALTER"]) else words[0]
    return UnsupportedSql(f"{head} statements", position=1, sql=text)


def _sqlglot(text: str) -> Any:
    dialect = DIALECT
    try:
        tokens = tokenize(text)
        check_nesting(tokens, text)
        trees = [t for t in dialect.parser().parse(tokens, text) if t is not None]
    except ParseError as e:
        raise _syntax(e, text) from None
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql=text) from None
    if len(trees) != 1:
        raise SqlSyntaxError("expected exactly one statement", sql=text)
    tree = trees[0]
    if isinstance(tree, exp.Command):
        raise _command(tree, text)
    return tree


def _as_of(text: str) -> tuple[str, int | None, bool]:
    """``text`` without a trailing ``AS OF [AT LEAST] t`` (blanked), ``t``, and whether it
    said ``AT LEAST``."""
    m = _AS_OF.search(text)
    if m is None:
        return text, None, False
    raw = m.group(2)
    if not raw.isdigit():
        raise SqlSyntaxError(
            f'AS OF needs a timestamp (an integer), got "{raw}"', position=m.start(2) + 1
        )
    blanked = text[: m.start()] + " " * (len(text) - m.start())
    return blanked, int(raw), m.group(1) is not None


def _parse(text: str) -> Statement:
    if is_cluster_statement(text):
        return parse_cluster_statement(text)
    if is_storage_statement(text):
        return parse_storage_statement(text)
    if re.match(r"^\s*DROP\s+(SOURCE|SINK)\b", text, re.IGNORECASE):
        return _drop_storage(text)
    m = _EXPLAIN.match(text)
    if m:
        inner = _parse(_blank(text, m.end()))
        if not isinstance(inner, SelectStmt | CreateViewStmt | CreateIndexStmt):
            raise UnsupportedSql("EXPLAIN of this statement", position=m.end() + 1)
        return ExplainStmt(text, inner)
    m = _SUBSCRIBE.match(text)
    if m:
        return _subscribe(text, m.end())
    if _SHOW.match(text):
        return _show(text)
    m = _COPY.match(text)
    if m:
        return _copy(text, m.end())
    m = _ALTER.match(text)
    if m:
        kind = _kind(m.group(1))
        name = _name(m.group(2))
        if m.group(3).upper() == "RESET":
            return AlterRetainHistoryStmt(text, kind, name, None)
        if m.group(4) is None:
            raise SqlSyntaxError("RETAIN HISTORY needs FOR '<interval>'", sql=text)
        try:
            ms = parse_interval_ms(m.group(4))
        except ValueError as e:
            raise SqlSyntaxError(str(e), position=m.start(4), sql=text) from None
        return AlterRetainHistoryStmt(text, kind, name, ms)
    if re.match(r"^\s*ALTER\b", text, re.IGNORECASE):
        raise UnsupportedSql("ALTER other than SET/RESET (RETAIN HISTORY ...)", position=1)
    is_query = (
        re.match(r"^\s*(?:(?:SELECT|WITH|VALUES|TABLE)\b|\()", text, re.IGNORECASE) is not None
    )
    stripped, as_of, at_least = _as_of(text) if is_query else (text, None, False)
    if as_of is not None:
        tree = _sqlglot(stripped)
        if not isinstance(tree, exp.Query):
            raise UnsupportedSql("AS OF on this statement", position=1)
        return SelectStmt(text, tree, as_of, at_least)
    return _from_tree(_sqlglot(text), text)


def _subscribe(text: str, start: int) -> SubscribeStmt:
    """``SUBSCRIBE [TO]`` (ending at ``start``), its relation, then its clauses
    (:func:`.subscribe.parse_subscribe_tail`)."""
    body_at = start + len(text[start:]) - len(text[start:].lstrip())
    body = text[body_at:]
    if not body.strip():
        raise SqlSyntaxError("SUBSCRIBE needs an object or a (query)", position=start + 1)
    if body.startswith("("):
        end = _closing_paren(text, body_at)
        q = _sqlglot(_blank(text[:end], body_at))
        if isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Query):
            raise SqlSyntaxError("SUBSCRIBE needs a query in parentheses", position=body_at + 1)
    else:
        name = re.match(_NAME, body)
        if name is None:
            raise SqlSyntaxError("SUBSCRIBE needs an object or a (query)", position=body_at + 1)
        end = body_at + name.end()
        q = exp.select("*").from_(exp.to_table(_quoted(name.group(0))))
    tail = parse_subscribe_tail(text, end)
    return SubscribeStmt(
        text,
        q,
        tail.as_of,
        tail.at_least,
        tail.up_to,
        tail.snapshot,
        tail.progress,
        tail.envelope,
    )


def _closing_paren(text: str, at: int) -> int:
    """The index just after the ``)`` closing the ``(`` at ``text[at]`` [SqlSyntaxError]."""
    try:
        toks = DIALECT.tokenize(text[at:])
    except TokenError as e:
        raise SqlSyntaxError(f"syntax error: {e}", sql=text) from None
    depth = 0
    for t in toks:
        if t.token_type == sqlglot.TokenType.L_PAREN:
            depth += 1
        elif t.token_type == sqlglot.TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return at + t.end + 1
    raise SqlSyntaxError("SUBSCRIBE's (query) has no closing parenthesis", position=at + 1)


def _copy(text: str, start: int) -> CopyToStmt:
    tail = _COPY_TAIL.search(text)
    if tail is None:
        raise UnsupportedSql("COPY other than COPY ... TO '<url>'", position=1)
    if tail.group(2) is not None and tail.group(2).lower() != "parquet":
        raise UnsupportedSql(f"COPY ... FORMAT {tail.group(2)}", position=tail.start(2) + 1)
    body = text[start : tail.start()].strip()
    blanked = _blank(text, start)[: tail.start()] + " " * (len(text) - tail.start())
    if body.startswith("("):
        q = _sqlglot(blanked)
        if isinstance(q, exp.Subquery):
            q = q.this
        if not isinstance(q, exp.Query):
            raise SqlSyntaxError("COPY needs a name or a (query)", position=start + 1)
    elif re.fullmatch(_NAME, body):
        q = exp.select("*").from_(exp.to_table(_quoted(body)))
    else:
        raise SqlSyntaxError("COPY needs a name or a (query)", position=start + 1)
    return CopyToStmt(text, q, tail.group(1))


def _quoted(name: str) -> str:
    return name if name.startswith('"') else name.lower()


def _show(text: str) -> Statement:
    m = _SHOW_LIST.match(text)
    if m:
        word = " ".join(m.group(1).lower().split())
        kind: ShowKind = {
            "objects": "objects",
            "tables": "tables",
            "views": "views",
            "materialized views": "materialized-views",
            "indexes": "indexes",
            "indices": "indexes",
            "sources": "sources",
            "sinks": "sinks",
        }[word]  # type: ignore[assignment]
        on = _name(m.group(2)) if m.group(2) else None
        if on is not None and kind in ("sources", "sinks"):
            raise UnsupportedSql(
                f"SHOW {kind.upper()} FROM/ON/IN (there are no schemas)", position=1
            )
        return ShowStmt(text, kind, on)
    m = _SHOW_COLUMNS.match(text)
    if m:
        return ShowColumnsStmt(text, _name(m.group(1)))
    m = _SHOW_CREATE.match(text)
    if m:
        return ShowCreateStmt(text, _kind(m.group(1)), _name(m.group(2)))
    raise UnsupportedSql(
        "this SHOW (supported: SHOW OBJECTS | TABLES | VIEWS | MATERIALIZED VIEWS | INDEXES | "
        "SOURCES | SINKS, SHOW COLUMNS FROM, SHOW CREATE)",
        position=1,
    )


def _table_name(node: Any) -> str:
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table):
        raise UnsupportedSql(f"{type(node).__name__} as a table name", position=position_of(node))
    if node.args.get("db") or node.args.get("catalog"):
        raise UnsupportedSql("schema-qualified names", position=position_of(node))
    return ident(node.this)


def _key_columns(node: Any) -> tuple[str, ...]:
    cols = node.expressions if not isinstance(node.this, exp.Schema) else node.this.expressions
    return tuple(ident(c.this if isinstance(c, exp.Ordered) else c) for c in cols)


def _create_table(tree: Any, schema: Any, text: str, exists: bool) -> CreateTableStmt:
    """``CREATE TABLE``: columns with ``NOT NULL``/``NULL``, ``PRIMARY KEY`` and ``UNIQUE``
    (declarations: a primary key's columns are ``NOT NULL``), and table-level key lists."""
    cols: list[ColumnDef] = []
    keys: list[tuple[str, ...]] = []
    primary: tuple[str, ...] | None = None
    for c in schema.expressions:
        if isinstance(c, exp.PrimaryKey):
            if primary is not None:
                raise SqlError(
                    "multiple primary keys for table are not allowed", position=position_of(c)
                )
            primary = _key_columns(c)
            continue
        if isinstance(c, exp.UniqueColumnConstraint):
            keys.append(_key_columns(c))
            continue
        if not isinstance(c, exp.ColumnDef):
            raise UnsupportedSql(
                f"table constraint {c.sql(dialect=_DIALECT)}", position=position_of(c)
            )
        name = ident(c.this)
        nullable = True
        for con in c.args.get("constraints") or []:
            k = con.args.get("kind")
            if isinstance(k, exp.NotNullColumnConstraint):
                nullable = bool(k.args.get("allow_null"))
            elif isinstance(k, exp.PrimaryKeyColumnConstraint):
                if primary is not None:
                    raise SqlError(
                        "multiple primary keys for table are not allowed",
                        position=position_of(con),
                    )
                primary = (name,)
            elif isinstance(k, exp.UniqueColumnConstraint):
                keys.append((name,))
            else:
                raise UnsupportedSql(
                    f"column constraint {con.sql(dialect=_DIALECT)}", position=position_of(con)
                )
        if c.args.get("kind") is None:
            raise SqlSyntaxError(f'column "{name}" needs a type', position=position_of(c))
        t = sql_type_of(c.args["kind"])
        cols.append(ColumnDef(name, t.scalar, nullable, t.max_length, t.typmod))
    names = [c.name for c in cols]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise DuplicateColumn(f'column "{dup}" specified more than once', position=1)
    if primary is not None:
        keys.insert(0, primary)
        cols = [
            ColumnDef(c.name, c.type, False, c.max_length, c.typmod) if c.name in primary else c
            for c in cols
        ]
    for key in keys:
        for k in key:
            if k not in names:
                raise UndefinedColumn(
                    f'column "{k}" named in key does not exist', position=position_of(schema)
                )
    return CreateTableStmt(text, _table_name(schema), tuple(cols), exists, tuple(keys))


def _table_alias(node: Any) -> str | None:
    alias = node.args.get("alias") if isinstance(node, exp.Table) else None
    if alias is None or alias.this is None:
        return None
    if alias.columns:
        raise SqlSyntaxError('syntax error at or near "("', position=position_of(alias))
    return ident(alias.this)


def _from_tree(tree: Any, text: str) -> Statement:
    if isinstance(tree, exp.Query):
        return SelectStmt(text, tree)
    if isinstance(tree, exp.Create):
        kind = str(tree.args.get("kind") or "").upper()
        exists = bool(tree.args.get("exists"))
        if kind == "TABLE":
            if tree.expression is not None:
                raise UnsupportedSql("CREATE TABLE ... AS", position=position_of(tree.expression))
            schema = tree.this
            if not isinstance(schema, exp.Schema):
                raise SqlSyntaxError("CREATE TABLE needs a column list", position=1)
            return _create_table(tree, schema, text, exists)
        if kind == "VIEW":
            props = tree.args.get("properties")
            materialized = bool(
                props and any(isinstance(p, exp.MaterializedProperty) for p in props.expressions)
            )
            q = tree.expression
            if not isinstance(q, exp.Query):
                raise SqlSyntaxError("CREATE VIEW needs AS <query>", position=1)
            target = tree.this
            columns = None
            if isinstance(target, exp.Schema):
                columns = tuple(ident(c) for c in target.expressions)
                dup = next((c for c in columns if columns.count(c) > 1), None)
                if dup is not None:
                    raise DuplicateColumn(
                        f'column "{dup}" specified more than once', position=position_of(target)
                    )
            return CreateViewStmt(
                text,
                _table_name(target),
                q,
                materialized,
                exists,
                bool(tree.args.get("replace")),
                columns,
            )
        if kind == "INDEX":
            index = tree.this
            name = ident(index.this) if index.this is not None else None
            params = index.args.get("params")
            keys: list[Any] = []
            if params is not None:
                for k in params.args.get("columns") or []:
                    if isinstance(k, exp.Ordered):
                        if k.args.get("desc"):
                            raise UnsupportedSql("DESC in an index key", position=position_of(k))
                        k = k.this
                    keys.append(k)
                if params.args.get("using"):
                    raise UnsupportedSql("CREATE INDEX ... USING", position=1)
                if params.args.get("where"):
                    raise UnsupportedSql("partial indexes", position=position_of(params))
            return CreateIndexStmt(
                text, name, _table_name(index.args["table"]), tuple(keys), exists
            )
        raise UnsupportedSql(f"CREATE {kind or '?'}", position=1)
    if isinstance(tree, exp.Insert):
        target = tree.this
        columns = None
        if isinstance(target, exp.Schema):
            columns = tuple(ident(c) for c in target.expressions)
        for key in ("returning", "conflict", "overwrite"):
            if tree.args.get(key):
                raise UnsupportedSql(f"INSERT ... {key.upper()}", position=1)
        source = tree.expression
        if not isinstance(source, exp.Values | exp.Query):
            raise UnsupportedSql("INSERT without VALUES or a query", position=1)
        return InsertStmt(text, _table_name(target), columns, source)
    if isinstance(tree, exp.Delete):
        for key in ("using", "returning", "limit"):
            if tree.args.get(key):
                raise UnsupportedSql(f"DELETE ... {key.upper()}", position=1)
        where = tree.args.get("where")
        return DeleteStmt(
            text,
            _table_name(tree.this),
            where.this if where is not None else None,
            _table_alias(tree.this),
        )
    if isinstance(tree, exp.Update):
        for key in ("from_", "from", "returning", "limit"):
            if tree.args.get(key):
                raise UnsupportedSql(f"UPDATE ... {key.upper().rstrip('_')}", position=1)
        sets: list[tuple[str, Any]] = []
        for a in tree.expressions:
            if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
                raise SqlSyntaxError("SET needs column = value", position=position_of(a))
            sets.append((ident(a.this.this), a.expression))
        where = tree.args.get("where")
        return UpdateStmt(
            text,
            _table_name(tree.this),
            tuple(sets),
            where.this if where is not None else None,
            _table_alias(tree.this),
        )
    if isinstance(tree, exp.Drop):
        word = str(tree.args.get("kind") or "").upper()
        materialized = bool(tree.args.get("materialized"))
        kinds: dict[str, DropKind] = {"TABLE": "table", "VIEW": "view", "INDEX": "index"}
        if word not in kinds:
            raise UnsupportedSql(f"DROP {word or '?'}", position=1)
        kind2: DropKind = "materialized-view" if materialized else kinds[word]
        dropped = tuple(_table_name(t) for t in tree.args.get("tables") or [tree.this])
        return DropStmt(
            text, kind2, dropped, bool(tree.args.get("cascade")), bool(tree.args.get("exists"))
        )
    if isinstance(tree, exp.Command):
        word = str(tree.this).upper()
        raise UnsupportedSql(f"{word} statements", position=1)
    raise UnsupportedSql(f"{type(tree).__name__} statements", position=1)
