"""Secrets: ``CREATE SECRET``, ``ALTER SECRET``, ``DROP SECRET``, ``SHOW SECRETS`` (Materialize's).

A secret is a named value (a password) that connections refer to by name
(``PASSWORD SECRET name`` in ``CREATE SOURCE ... FROM POSTGRES`` and
``CREATE SINK ... INTO ICEBERG``), so the value never appears in a connection,
a definition, ``SHOW CREATE`` or ``describe``:

.. code-block:: sql

    CREATE SECRET [IF NOT EXISTS] name AS 'value'
    ALTER SECRET [IF EXISTS] name AS 'value'
    DROP SECRET [IF EXISTS] name [CASCADE | RESTRICT]
    SHOW SECRETS

The statements are parsed here, apart from the rest of the front end, with the
small scanner of :mod:`.storage`. A statement's text holds the value, so the
node keeps it out of its ``repr`` and :func:`redacted` is the text to show or
record; an error in such a statement carries the redacted text.

>>> stmt = parse_secret_statement("CREATE SECRET pgpass AS 'it''s'")
>>> stmt.name, stmt.value, redacted(stmt.sql)
('pgpass', "it's", "CREATE SECRET pgpass AS '********'")
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import SqlError
from .storage import _Parser

__all__ = [
    "AlterSecretStmt",
    "CreateSecretStmt",
    "DropSecretStmt",
    "ShowSecretsStmt",
    "is_secret_statement",
    "parse_secret_statement",
    "redacted",
]

_START = re.compile(r"^\s*(?:(?:CREATE|ALTER|DROP)\s+SECRET\b|SHOW\s+SECRETS\b)", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")
REDACTED = "'********'"


@dataclass(frozen=True, slots=True)
class CreateSecretStmt:
    sql: str = field(repr=False)
    name: str
    value: str = field(repr=False)
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class AlterSecretStmt:
    sql: str = field(repr=False)
    name: str
    value: str = field(repr=False)
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropSecretStmt:
    sql: str
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class ShowSecretsStmt:
    sql: str


def is_secret_statement(text: str) -> bool:
    """Whether ``text`` is one of this module's statements."""
    return _START.match(text) is not None


def redacted(text: str) -> str:
    """``text`` with every quoted string replaced by ``'********'``: a secret statement as it
    may be shown or recorded."""
    return _STRING.sub(REDACTED, text)


def _masked(text: str) -> str:
    """``text`` with every quoted string's contents starred out, each character kept in place
    (an error's position still points at the same one)."""
    return _STRING.sub(lambda m: "'" + "*" * (len(m.group()) - 2) + "'", text)


def parse_secret_statement(
    text: str,
) -> CreateSecretStmt | AlterSecretStmt | DropSecretStmt | ShowSecretsStmt:
    """One secret statement (see the module docstring) [SqlSyntaxError]; an error's text has
    every quoted string starred out."""
    try:
        return _parse(text)
    except SqlError as e:
        e.sql = _masked(text)
        raise


def _parse(text: str) -> CreateSecretStmt | AlterSecretStmt | DropSecretStmt | ShowSecretsStmt:
    p = _Parser(text)
    if p.accept("SHOW", "SECRETS"):
        p.end()
        return ShowSecretsStmt(text)
    if p.accept("DROP", "SECRET"):
        exists = p.accept("IF", "EXISTS")
        name = p.name("a secret name")
        cascade = p.accept("CASCADE")
        if not cascade:
            p.accept("RESTRICT")
        p.end()
        return DropSecretStmt(text, name, exists, cascade)
    if p.accept("CREATE", "SECRET"):
        exists = p.accept("IF", "NOT", "EXISTS")
        name = p.name("a secret name")
        p.expect("AS")
        value = p.string("the secret's value (a quoted string)")
        p.end()
        return CreateSecretStmt(text, name, value, exists)
    p.expect("ALTER", "SECRET")
    exists = p.accept("IF", "EXISTS")
    name = p.name("a secret name")
    p.expect("AS")
    value = p.string("the secret's value (a quoted string)")
    p.end()
    return AlterSecretStmt(text, name, value, exists)
