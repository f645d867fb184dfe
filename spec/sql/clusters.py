"""Cluster statements and ``ALTER SINK``: parsed here, by a small scanner of our own.

sqlglot does not know Materialize's cluster statements, so they get a
recursive-descent parser with PostgreSQL-style errors that carry a position
(1-based, into the statement's text). The syntax is Materialize's:

.. code-block:: sql

    CREATE CLUSTER [IF NOT EXISTS] name (SIZE = 'small', REPLICATION FACTOR = 2)
    CREATE CLUSTER name SIZE 'small', REPLICATION FACTOR 2        -- the older spelling
    CREATE CLUSTER name REPLICAS (r1 (SIZE = 'small'), r2 (SIZE = 'large'))  -- unmanaged
    CREATE CLUSTER REPLICA name.replica (SIZE = 'medium')
    ALTER CLUSTER name SET (SIZE = 'medium', REPLICATION FACTOR = 3)
    DROP CLUSTER [IF EXISTS] name [, ...] [CASCADE | RESTRICT]
    DROP CLUSTER REPLICA [IF EXISTS] name.replica [, ...]
    ALTER SINK name SET FROM relation

Option names are case-insensitive, an ``=`` between a name and its value is
optional, each option may be given once. Identifiers fold to lower case
unless double-quoted. Materialize's other cluster options (``INTROSPECTION
INTERVAL``, ``SCHEDULE``, ``AVAILABILITY ZONES``, ...) are refused as
unsupported, naming the option.

>>> parse_cluster_statement("CREATE CLUSTER c (SIZE = 'small', REPLICATION FACTOR = 2)")
CreateClusterStmt(sql="CREATE CLUSTER c (SIZE = 'small', REPLICATION FACTOR = 2)", name='c', size='small', replication_factor=2, replicas=None, if_not_exists=False)
"""

from __future__ import annotations

import re
from typing import NoReturn

from ..errors import SqlSyntaxError, UnsupportedSql
from ._tokens import Token, tokens
from .ast import (
    AlterClusterStmt,
    AlterSinkStmt,
    CreateClusterReplicaStmt,
    CreateClusterStmt,
    DropClusterReplicaStmt,
    DropClusterStmt,
)

__all__ = ["ClusterStatement", "is_cluster_statement", "parse_cluster_statement"]

ClusterStatement = (
    CreateClusterStmt
    | CreateClusterReplicaStmt
    | AlterClusterStmt
    | DropClusterStmt
    | DropClusterReplicaStmt
    | AlterSinkStmt
)

_START = re.compile(
    r"^\s*(?:(?:CREATE|ALTER|DROP)\s+CLUSTER\b|ALTER\s+SINK\s+\S+\s+SET\s+FROM\b)", re.IGNORECASE
)
_UNSUPPORTED_OPTIONS = frozenset(
    {"INTROSPECTION", "SCHEDULE", "AVAILABILITY", "DISK", "WORKLOAD", "MANAGED", "REPLICAS"}
)


def is_cluster_statement(text: str) -> bool:
    """Whether ``text`` is a cluster statement or ``ALTER SINK ... SET FROM``."""
    return _START.match(text) is not None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokens(text)
        self.i = 0

    # -- tokens ---------------------------------------------------------------------------
    def _peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def _fail(self, message: str, tok: Token | None = None) -> NoReturn:
        at = tok if tok is not None else self._peek()
        position = at.position if at is not None else len(self.text) + 1
        raise SqlSyntaxError(message, position=position, sql=self.text)

    def _near(self) -> str:
        tok = self._peek()
        return f'syntax error at or near "{tok.text}"' if tok else "syntax error at end of input"

    def _is(self, *words: str) -> bool:
        for k, w in enumerate(words):
            tok = self._peek(k)
            if tok is None or (tok.upper if tok.kind == "word" else tok.text) != w:
                return False
        return True

    def _accept(self, *words: str) -> bool:
        if self._is(*words):
            self.i += len(words)
            return True
        return False

    def _expect(self, *words: str) -> None:
        if not self._accept(*words):
            self._fail(f"{self._near()}: expected {' '.join(words)}")

    def _name(self, what: str) -> str:
        tok = self._peek()
        if tok is None or tok.kind not in ("word", "quoted"):
            self._fail(f"{self._near()}: expected {what}")
        self.i += 1
        if tok.kind == "quoted":
            return tok.text[1:-1].replace('""', '"')
        return tok.text.lower()

    def _qualified(self, what: str) -> tuple[str, str]:
        cluster = self._name(f"the cluster of the {what}")
        self._expect(".")
        return cluster, self._name(what)

    def _string(self, what: str) -> str:
        tok = self._peek()
        if tok is None or tok.kind != "string":
            self._fail(f"{self._near()}: {what} is a string literal ('...')")
        self.i += 1
        return tok.text[1:-1].replace("''", "'")

    def _int(self, what: str) -> int:
        tok = self._peek()
        if tok is None or tok.kind != "number":
            self._fail(f"{self._near()}: {what} is an integer")
        self.i += 1
        return int(tok.text)

    def _end(self) -> None:
        if self._peek() is not None:
            self._fail(self._near())

    # -- options --------------------------------------------------------------------------
    def _options(self, allowed: tuple[str, ...]) -> dict[str, str | int]:
        """``SIZE [=] 'x'`` and ``REPLICATION FACTOR [=] n``, comma-separated, in parentheses
        or not (the older spelling)."""
        parens = self._accept("(")
        opts: dict[str, str | int] = {}
        while True:
            tok = self._peek()
            if tok is None or (parens and tok.text == ")"):
                break
            if self._accept("SIZE"):
                key = "size"
            elif self._accept("REPLICATION", "FACTOR"):
                key = "replication_factor"
            elif tok.upper in _UNSUPPORTED_OPTIONS:
                raise UnsupportedSql(f"cluster option {tok.upper}", position=tok.position)
            else:
                self._fail(f"{self._near()}: expected SIZE or REPLICATION FACTOR")
            if key not in allowed:
                raise UnsupportedSql(f"{key.replace('_', ' ').upper()} here", position=tok.position)
            if key in opts:
                self._fail(f"option {key.replace('_', ' ').upper()} given twice", tok)
            self._accept("=")
            opts[key] = self._string("SIZE") if key == "size" else self._int("REPLICATION FACTOR")
            if not self._accept(","):
                break
        if parens:
            self._expect(")")
        return opts

    # -- statements -----------------------------------------------------------------------
    def statement(self) -> ClusterStatement:
        if self._accept("CREATE", "CLUSTER", "REPLICA"):
            cluster, name = self._qualified("replica")
            opts = self._options(("size",))
            self._end()
            return CreateClusterReplicaStmt(self.text, cluster, name, _size(opts))
        if self._accept("CREATE", "CLUSTER"):
            return self._create_cluster()
        if self._accept("ALTER", "CLUSTER"):
            name = self._name("a cluster name")
            self._expect("SET")
            if not self._is("("):
                self._fail(f"{self._near()}: expected SET (option = value, ...)")
            opts = self._options(("size", "replication_factor"))
            self._end()
            if not opts:
                self._fail("ALTER CLUSTER ... SET needs SIZE or REPLICATION FACTOR")
            return AlterClusterStmt(self.text, name, _size(opts), _factor(opts))
        if self._accept("DROP", "CLUSTER", "REPLICA"):
            if_exists = self._accept("IF", "EXISTS")
            replicas = [self._qualified("replica")]
            while self._accept(","):
                replicas.append(self._qualified("replica"))
            self._end()
            return DropClusterReplicaStmt(self.text, tuple(replicas), if_exists)
        if self._accept("DROP", "CLUSTER"):
            if_exists = self._accept("IF", "EXISTS")
            names = [self._name("a cluster name")]
            while self._accept(","):
                names.append(self._name("a cluster name"))
            cascade = self._accept("CASCADE")
            if not cascade:
                self._accept("RESTRICT")
            self._end()
            return DropClusterStmt(self.text, tuple(names), cascade, if_exists)
        self._expect("ALTER", "SINK")
        name = self._name("a sink name")
        self._expect("SET", "FROM")
        from_name = self._name("a relation")
        while self._accept("."):  # materialize.public.t: the last part names it
            from_name = self._name("a relation")
        self._end()
        return AlterSinkStmt(self.text, name, from_name)

    def _create_cluster(self) -> CreateClusterStmt:
        if_not_exists = self._accept("IF", "NOT", "EXISTS")
        name = self._name("a cluster name")
        if self._accept("REPLICAS"):
            self._expect("(")
            replicas: list[tuple[str, str | None]] = []
            while not self._is(")"):
                rname = self._name("a replica name")
                opts = self._options(("size",)) if self._is("(") else {}
                if any(r == rname for r, _ in replicas):
                    self._fail(f"replica {rname!r} is given twice")
                replicas.append((rname, _size(opts)))
                if not self._accept(","):
                    break
            self._expect(")")
            self._end()
            return CreateClusterStmt(
                self.text, name, replicas=tuple(replicas), if_not_exists=if_not_exists
            )
        opts = self._options(("size", "replication_factor"))
        self._end()
        factor = _factor(opts)
        return CreateClusterStmt(
            self.text, name, _size(opts), 1 if factor is None else factor, None, if_not_exists
        )


def _size(opts: dict[str, str | int]) -> str | None:
    value = opts.get("size")
    return value if isinstance(value, str) else None


def _factor(opts: dict[str, str | int]) -> int | None:
    value = opts.get("replication_factor")
    return value if isinstance(value, int) else None


def parse_cluster_statement(text: str) -> ClusterStatement:
    """A cluster statement or ``ALTER SINK`` (see the module docstring) [SqlSyntaxError,
    UnsupportedSql]."""
    return _Parser(text).statement()
