"""pg8000, a pure-Python implementation of the protocol (its own SCRAM, its own codecs)."""

from __future__ import annotations

import datetime as dt

import pg8000.native
import pytest

from .conftest import PASSWORD, Server

pytestmark = pytest.mark.timeout(120)


def _connect(pg: Server) -> pg8000.native.Connection:
    return pg8000.native.Connection(
        "materialize", host=pg.host, port=pg.port, password=PASSWORD, database="materialize"
    )


def test_queries_parameters_and_errors(pg_server: Server, name: str) -> None:
    c = _connect(pg_server)
    try:
        c.run(f"CREATE TABLE {name} (id bigint NOT NULL, s text, d date)")
        c.run(f"INSERT INTO {name} VALUES (:a, :b, :c)", a=1, b="x", c=dt.date(2020, 2, 29))
        c.run(f"INSERT INTO {name} VALUES (:a, :b, :c)", a=2, b=None, c=None)
        assert c.run(f"SELECT * FROM {name} ORDER BY id") == [
            [1, "x", dt.date(2020, 2, 29)],
            [2, None, None],
        ]
        assert c.run(f"SELECT s FROM {name} WHERE id = :i", i=1) == [["x"]]
        assert [col["name"] for col in c.columns] == ["s"]
        with pytest.raises(pg8000.native.DatabaseError) as e:
            c.run(f"SELECT nope FROM {name}")
        assert e.value.args[0]["C"] == "42703"
        assert c.run("SELECT current_database()") == [["materialize"]]
        assert c.run("SHOW server_version") == [["9.5.0"]]
    finally:
        c.close()


def test_wrong_password_is_refused(pg_server: Server) -> None:
    with pytest.raises(pg8000.native.DatabaseError) as e:
        pg8000.native.Connection(
            "materialize", host=pg_server.host, port=pg_server.port, password="wrong"
        )
    assert e.value.args[0]["C"] == "28P01"
