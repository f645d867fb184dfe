"""``CREATE SOURCE`` and ``CREATE SINK``: parsed here, by a small scanner of our own.

sqlglot reads these statements as opaque commands, so they get a
recursive-descent parser of their own, with PostgreSQL-style errors that
carry a position (1-based, into the statement's text). The syntax follows
Materialize's where it can:

.. code-block:: sql

    CREATE SOURCE [IF NOT EXISTS] name
        FROM LOAD GENERATOR COUNTER | AUCTION
        [(TICK INTERVAL '100ms', SEED 7, MAX CARDINALITY 1000, ROWS PER TICK 2)]

    CREATE SOURCE [IF NOT EXISTS] name
        FROM POSTGRES CONNECTION 'postgresql://user@host/db'
        (PUBLICATION 'pub', TABLE 'public.orders', SLOT 'orders_slot'
         [, PASSWORD SECRET pgpass])

    CREATE SINK [IF NOT EXISTS] name FROM object
        INTO ICEBERG CATALOG 'sqlite:////path/catalog.db'
        (WAREHOUSE 'file:///path/warehouse', TABLE 'namespace.table'
         [, PASSWORD SECRET catalog_password])
        [WITH (COMMIT INTERVAL = '5s')]

A password is given as a secret (:mod:`.secrets`), never in the URL.
``COMMIT INTERVAL`` (default ``'1s'``, at least ``'1s'`` as in Materialize):
the sink commits at most once per interval, and only when there are updates
(see :class:`~tidegate.spec.storage.connections.IcebergSink`).

Option names are case-insensitive, an ``=`` between a name and its value is
optional, each option may be given once. Materialize's named ``CONNECTION``
objects and subsources (``FOR TABLES``, ``FOR ALL TABLES``) are not
supported: a PostgreSQL source replicates one table, named in its options.

>>> stmt = parse_storage_statement("CREATE SOURCE c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '50ms')")
>>> stmt.name, stmt.connection.kind, stmt.connection.tick_ms
('c', 'counter', 50)
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import NoReturn

from ..errors import SqlSyntaxError, UnsupportedSql
from ..storage.connections import (
    SINK_COMMIT_INTERVAL_MS,
    IcebergSink,
    LoadGenerator,
    PostgresSource,
)
from ._tokens import Token, tokens
from .ast import CreateSinkStmt, CreateSourceStmt

__all__ = ["is_storage_statement", "parse_storage_statement"]

_START = re.compile(r"^\s*CREATE\s+(SOURCE|SINK)\b", re.IGNORECASE)


def is_storage_statement(text: str) -> bool:
    """Whether ``text`` is a ``CREATE SOURCE`` or ``CREATE SINK`` (for :func:`parse_storage_statement`)."""
    return _START.match(text) is not None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokens(text)
        self.i = 0

    # -- the token stream --------------------------------------------------------------------
    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def next(self, expected: str) -> Token:
        t = self.peek()
        if t is None:
            self.fail(expected)
        self.i += 1
        return t

    def fail(self, expected: str, at: Token | None = None) -> NoReturn:
        t = at if at is not None else self.peek()
        if t is None:
            raise SqlSyntaxError(
                f"syntax error at end of input: expected {expected}",
                position=len(self.text.rstrip()) or None,
                sql=self.text,
            )
        raise SqlSyntaxError(
            f'syntax error at or near "{t.text}": expected {expected}',
            position=t.position,
            sql=self.text,
        )

    def at_word(self, *words: str) -> bool:
        """Whether the next tokens are ``words`` (keywords, case-insensitive)."""
        for k, w in enumerate(words):
            j = self.i + k
            if j >= len(self.tokens) or self.tokens[j].upper != w:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.at_word(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        for w in words:
            t = self.peek()
            if t is None or t.upper != w:
                self.fail(" ".join(words))
            self.i += 1

    def punct(self, p: str) -> bool:
        t = self.peek()
        if t is not None and t.kind == "punct" and t.text == p:
            self.i += 1
            return True
        return False

    def end(self) -> None:
        t = self.peek()
        if t is not None:
            self.fail("the end of the statement", t)

    # -- values -------------------------------------------------------------------------------
    def name(self, what: str) -> str:
        t = self.next(what)
        if t.kind == "quoted":
            return t.text[1:-1].replace('""', '"')
        if t.kind == "word":
            after = self.peek()
            if after is not None and after.text == ".":
                raise UnsupportedSql("schema-qualified names", position=t.position, sql=self.text)
            return t.text.lower()
        self.fail(what, t)

    def string(self, what: str) -> str:
        t = self.next(what)
        if t.kind != "string":
            self.fail(what, t)
        return t.text[1:-1].replace("''", "'")

    def integer(self, what: str, minimum: int) -> int:
        t = self.next(what)
        if t.kind != "number":
            self.fail(what, t)
        value = int(t.text)
        if value < minimum:
            raise SqlSyntaxError(
                f"{what} must be at least {minimum}, got {value}",
                position=t.position,
                sql=self.text,
            )
        return value

    def options(
        self, names: dict[str, tuple[str, ...]], what: str, secrets: frozenset[str] = frozenset()
    ) -> dict[str, tuple[Token, Token]]:
        """``(NAME [=] value, ...)``: each option's name token and value token, by key.

        ``names`` maps each option's key to its words (``("TICK", "INTERVAL")``);
        the options of ``secrets`` take ``SECRET name`` as their value (the name's token).
        """
        out: dict[str, tuple[Token, Token]] = {}
        if not self.punct("("):
            self.fail(f"({what})")
        while True:
            start = self.peek()
            key = next((k for k, words in names.items() if self.accept(*words)), None)
            if key is None:
                listed = ", ".join(" ".join(w) for w in names.values())
                self.fail(f"an option of {what} ({listed})")
            assert start is not None
            if key in out:
                raise SqlSyntaxError(
                    f'option "{" ".join(names[key])}" specified more than once',
                    position=start.position,
                    sql=self.text,
                )
            self.punct("=")
            if key in secrets:
                self.expect("SECRET")
            value = self.next(f"a value for {' '.join(names[key])}")
            if key in secrets and value.kind not in ("word", "quoted"):
                self.fail("the name of a secret", value)
            out[key] = (start, value)
            if self.punct(")"):
                return out
            if not self.punct(","):
                self.fail('"," or ")"')

    def value_string(self, option: tuple[Token, Token], what: str) -> str:
        _, value = option
        if value.kind != "string":
            self.fail(f"a quoted string for {what}", value)
        text = value.text[1:-1].replace("''", "'")
        if not text:
            raise SqlSyntaxError(
                f"{what} must not be empty", position=value.position, sql=self.text
            )
        return text

    def value_int(self, option: tuple[Token, Token], what: str, minimum: int) -> int:
        _, value = option
        if value.kind != "number":
            self.fail(f"an integer for {what}", value)
        n = int(value.text)
        if n < minimum:
            raise SqlSyntaxError(
                f"{what} must be at least {minimum}, got {n}",
                position=value.position,
                sql=self.text,
            )
        return n

    def missing(self, option: str, what: str, start: Token) -> NoReturn:
        raise SqlSyntaxError(
            f"{what} needs the option {option}", position=start.position, sql=self.text
        )

    # -- statements ---------------------------------------------------------------------------
    def statement(self) -> CreateSourceStmt | CreateSinkStmt:
        first = self.peek()
        self.expect("CREATE")
        if self.accept("SOURCE"):
            exists = self.accept("IF", "NOT", "EXISTS")
            name = self.name("a source name")
            self.expect("FROM")
            if self.accept("LOAD", "GENERATOR"):
                return CreateSourceStmt(self.text, name, self.load_generator(), exists)
            if self.at_word("POSTGRES"):
                return CreateSourceStmt(self.text, name, self.postgres(), exists)
            t = self.peek()
            if t is not None and t.kind == "word":
                raise UnsupportedSql(
                    f"sources FROM {t.text.upper()}",
                    position=t.position,
                    sql=self.text,
                    hint="sources read FROM LOAD GENERATOR or FROM POSTGRES",
                )
            self.fail("LOAD GENERATOR or POSTGRES")
        if self.accept("SINK"):
            exists = self.accept("IF", "NOT", "EXISTS")
            name = self.name("a sink name")
            self.expect("FROM")
            source = self.name("the object the sink writes out")
            self.expect("INTO")
            t = self.peek()
            if not self.at_word("ICEBERG"):
                if t is not None and t.kind == "word":
                    raise UnsupportedSql(
                        f"sinks INTO {t.text.upper()}",
                        position=t.position,
                        sql=self.text,
                        hint="sinks write INTO ICEBERG CATALOG",
                    )
                self.fail("ICEBERG")
            return CreateSinkStmt(self.text, name, source, self.iceberg(), exists)
        self.fail("SOURCE or SINK", first)

    def load_generator(self) -> LoadGenerator:
        t = self.next("COUNTER or AUCTION")
        kind = t.upper
        if kind not in ("COUNTER", "AUCTION"):
            if t.kind == "word":
                raise UnsupportedSql(
                    f"LOAD GENERATOR {kind}",
                    position=t.position,
                    sql=self.text,
                    hint="the load generators are COUNTER and AUCTION",
                )
            self.fail("COUNTER or AUCTION", t)
        gen = LoadGenerator("counter" if kind == "COUNTER" else "auction")
        if self.at_word("FOR"):
            at = self.peek()
            assert at is not None
            raise UnsupportedSql(
                "subsources (FOR TABLES, FOR ALL TABLES)",
                position=at.position,
                sql=self.text,
                hint="a load generator source is one collection: leave FOR ... out",
            )
        if self.peek() is not None:
            opts = self.options(
                {
                    "tick": ("TICK", "INTERVAL"),
                    "seed": ("SEED",),
                    "max": ("MAX", "CARDINALITY"),
                    "rows": ("ROWS", "PER", "TICK"),
                },
                "LOAD GENERATOR",
            )
            tick_ms, seed, cardinality, rows = gen.tick_ms, gen.seed, None, gen.rows_per_tick
            if "tick" in opts:
                text = self.value_string(opts["tick"], "TICK INTERVAL")
                from .interval import parse_interval_ms

                try:
                    tick_ms = parse_interval_ms(text)
                except ValueError as e:
                    raise SqlSyntaxError(
                        str(e), position=opts["tick"][1].position, sql=self.text
                    ) from None
                if tick_ms < 1:
                    raise SqlSyntaxError(
                        "TICK INTERVAL must be at least 1ms",
                        position=opts["tick"][1].position,
                        sql=self.text,
                    )
            if "seed" in opts:
                seed = self.value_int(opts["seed"], "SEED", 0)
            if "max" in opts:
                cardinality = self.value_int(opts["max"], "MAX CARDINALITY", 1)
            if "rows" in opts:
                rows = self.value_int(opts["rows"], "ROWS PER TICK", 1)
            gen = LoadGenerator(gen.kind, tick_ms, seed, cardinality, rows)
        self.end()
        return gen

    def postgres(self) -> PostgresSource:
        start = self.peek()
        assert start is not None
        self.expect("POSTGRES", "CONNECTION")
        t = self.peek()
        if t is not None and t.kind != "string":
            raise UnsupportedSql(
                "named connections (CREATE CONNECTION)",
                position=t.position,
                sql=self.text,
                hint="give the connection URL as a quoted string: CONNECTION 'postgresql://...'",
            )
        url = self.string("the connection URL (a quoted string)")
        if self.at_word("FOR"):
            at = self.peek()
            assert at is not None
            raise UnsupportedSql(
                "subsources (FOR TABLES, FOR ALL TABLES)",
                position=at.position,
                sql=self.text,
                hint="a PostgreSQL source replicates one table: name it in its options (TABLE 't')",
            )
        opts = self.options(
            {
                "publication": ("PUBLICATION",),
                "table": ("TABLE",),
                "slot": ("SLOT",),
                "password": ("PASSWORD",),
            },
            "POSTGRES",
            frozenset({"password"}),
        )
        for key in ("publication", "table", "slot"):
            if key not in opts:
                self.missing(key.upper(), "a PostgreSQL source", start)
        self.end()
        return PostgresSource(
            url,
            self.value_string(opts["table"], "TABLE"),
            self.value_string(opts["publication"], "PUBLICATION"),
            self.value_string(opts["slot"], "SLOT"),
            self.secret_name(opts.get("password")),
        )

    def secret_name(self, option: tuple[Token, Token] | None) -> str | None:
        """The secret an option names (``PASSWORD SECRET name``), if given."""
        if option is None:
            return None
        _, t = option
        return t.text[1:-1].replace('""', '"') if t.kind == "quoted" else t.text.lower()

    def iceberg(self) -> IcebergSink:
        start = self.peek()
        assert start is not None
        self.expect("ICEBERG", "CATALOG")
        catalog = self.string("the catalog URL (a quoted string)")
        opts = self.options(
            {"warehouse": ("WAREHOUSE",), "table": ("TABLE",), "password": ("PASSWORD",)},
            "ICEBERG",
            frozenset({"password"}),
        )
        for key in ("warehouse", "table"):
            if key not in opts:
                self.missing(key.upper(), "an Iceberg sink", start)
        sink = IcebergSink(
            catalog,
            self.value_string(opts["warehouse"], "WAREHOUSE"),
            self.value_string(opts["table"], "TABLE"),
            self.secret_name(opts.get("password")),
        )
        if self.accept("WITH"):
            sink = self.sink_with(sink)
        self.end()
        return sink

    def sink_with(self, sink: IcebergSink) -> IcebergSink:
        """``WITH (COMMIT INTERVAL [=] 'interval')``: at least 1s, as Materialize plans it."""
        opts = self.options({"commit": ("COMMIT", "INTERVAL")}, "CREATE SINK ... WITH")
        text = self.value_string(opts["commit"], "COMMIT INTERVAL")
        position = opts["commit"][1].position
        from .interval import parse_interval_ms

        try:
            ms = parse_interval_ms(text)
        except ValueError as e:
            raise SqlSyntaxError(str(e), position=position, sql=self.text) from None
        if not SINK_COMMIT_INTERVAL_MS <= ms <= 2**53:
            raise SqlSyntaxError(
                f"COMMIT INTERVAL must be at least 1s (and at most 2^53 ms), got {text!r}",
                position=position,
                sql=self.text,
            )
        return replace(sink, commit_interval_ms=ms)


def parse_storage_statement(text: str) -> CreateSourceStmt | CreateSinkStmt:
    """``CREATE SOURCE`` or ``CREATE SINK`` (see the module docstring) [SqlSyntaxError, UnsupportedSql]."""
    return _Parser(text).statement()
