"""``CREATE SECRET``, ``ALTER SECRET``, ``DROP SECRET``, ``SHOW SECRETS`` and ``PASSWORD SECRET``:
parsed apart from the rest of the front end, with the value kept out of reprs and errors."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import SqlSyntaxError
from tidegate.spec.sql.secrets import (
    AlterSecretStmt,
    CreateSecretStmt,
    DropSecretStmt,
    ShowSecretsStmt,
    is_secret_statement,
    parse_secret_statement,
    redacted,
)
from tidegate.spec.sql.storage import parse_storage_statement
from tidegate.spec.storage import IcebergSink, PostgresSource


def test_the_statements_parse() -> None:
    c = parse_secret_statement("create secret if not exists PgPass as 'it''s a secret'")
    assert isinstance(c, CreateSecretStmt)
    assert (c.name, c.value, c.if_not_exists) == ("pgpass", "it's a secret", True)
    a = parse_secret_statement("ALTER SECRET IF EXISTS \"PgPass\" AS 'new'")
    assert isinstance(a, AlterSecretStmt) and (a.name, a.value, a.if_exists) == (
        "PgPass",
        "new",
        True,
    )
    d = parse_secret_statement("DROP SECRET IF EXISTS pgpass CASCADE")
    assert isinstance(d, DropSecretStmt) and (d.if_exists, d.cascade) == (True, True)
    assert isinstance(parse_secret_statement("SHOW SECRETS"), ShowSecretsStmt)
    assert is_secret_statement("  DROP   SECRET x") and not is_secret_statement("DROP TABLE x")


def test_the_value_is_kept_out_of_reprs_errors_and_shown_text() -> None:
    c = parse_secret_statement("CREATE SECRET s AS 'hunter2'")
    assert "hunter2" not in repr(c)
    assert redacted(c.sql) == "CREATE SECRET s AS '********'"
    with pytest.raises(SqlSyntaxError) as e:
        parse_secret_statement("CREATE SECRET s AS 'hunter2' PLEASE")
    assert "hunter2" not in e.value.render() and e.value.position == 30
    with pytest.raises(SqlSyntaxError):
        parse_secret_statement("CREATE SECRET s AS 42")  # a value is a quoted string


def test_connections_name_their_password_secret() -> None:
    src = parse_storage_statement(
        "CREATE SOURCE s FROM POSTGRES CONNECTION 'postgresql://u@h/db' "
        "(PUBLICATION 'p', TABLE 't', SLOT 'sl', PASSWORD = SECRET PgPass)"
    )
    assert src.connection == PostgresSource("postgresql://u@h/db", "t", "p", "sl", "pgpass")
    sink = parse_storage_statement(
        "CREATE SINK k FROM t INTO ICEBERG CATALOG 'postgresql+psycopg://u@h/c' "
        "(WAREHOUSE 'file:///w', TABLE 'n.t', PASSWORD SECRET \"Cat\")"
    )
    assert sink.connection == IcebergSink("postgresql+psycopg://u@h/c", "file:///w", "n.t", "Cat")
    with pytest.raises(SqlSyntaxError):  # a password is a secret's, not a literal
        parse_storage_statement(
            "CREATE SOURCE s FROM POSTGRES CONNECTION 'postgresql://u@h/db' "
            "(PUBLICATION 'p', TABLE 't', SLOT 'sl', PASSWORD 'pw')"
        )
