"""The statements the SQL clients plant one defect in (:mod:`tidegate.sim.sql_bad`).

What the simulator expects of each -- PostgreSQL's SQLSTATE, and that none of the rows it
carries lands -- is the template's word, written when the defect is planted; here that word is
held to a real PostgreSQL, statement by statement, so the simulator's expectation is
PostgreSQL's and not the product's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tidegate.sim.choices import SeededChoices
from tidegate.sim.scenario import SCENARIOS
from tidegate.sim.sql_bad import (
    WRAPS,
    BadStatement,
    draw_bad_read,
    draw_bad_write,
    read_kinds,
    write_kinds,
)
from tidegate.sim.sql_clients import POOL
from tidegate.sim.sql_gen import QueryInput, symbol
from tidegate.spec.plan import Get, Schema

_PG_TYPES = {"int64": "bigint", "string": "text", "bool": "boolean"}


def _relations() -> list[QueryInput]:
    """The SQL clients' base tables in the ``sql`` scenario (its tables and the pool's)."""
    tables = [(t.id, t.schema) for t in SCENARIOS["sql"]().tables]
    tables += [(p.name, p.schema) for p in POOL]
    return [
        QueryInput(name, schema, Get(symbol(k), schema)) for k, (name, schema) in enumerate(tables)
    ]


def _draws(seeds: range) -> Iterator[BadStatement]:
    relations = _relations()
    writable = [(r.name, r.schema) for r in relations]
    markers = itertools.count(1_000)
    for seed in seeds:
        source = SeededChoices(seed)
        for _ in range(3):
            bad = draw_bad_read(source, relations)
            if bad is not None:
                yield bad
        for wrap in WRAPS:
            bad = draw_bad_write(source, writable, lambda: next(markers), wrap=wrap)
            if bad is not None:
                yield bad


def _kinds() -> set[str]:
    writes = {f"{k}_in_{w}" if w != "alone" else k for k in write_kinds() for w in WRAPS}
    return set(read_kinds()) | writes


def test_every_kind_of_defect_is_drawn_and_survives_a_trace() -> None:
    drawn = list(_draws(range(200)))
    assert {b.kind for b in drawn} == _kinds()
    for b in drawn:
        assert BadStatement.from_json(b.to_json()) == b
    assert [b.sql for b in _draws(range(20))] == [b.sql for b in _draws(range(20))]


def _ddl(name: str, schema: Schema) -> str:
    cols = ", ".join(
        f"{c.name} {_PG_TYPES[c.type.scalar.value]}{'' if c.type.nullable else ' NOT NULL'}"
        for c in schema.columns
    )
    return f"CREATE TABLE {name} ({cols})"


@pytest.fixture
def pg(postgres_url: str) -> Iterator[Any]:
    import psycopg

    name = "tidegate_sim_bad"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")  # type: ignore[arg-type]
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    with psycopg.connect(postgres_url.rsplit("/", 1)[0] + f"/{name}", autocommit=True) as conn:
        for r in _relations():
            conn.execute(_ddl(r.name, r.schema))  # type: ignore[arg-type]
            # a row in each: the errors PostgreSQL raises per row are raised
            values = ", ".join(
                {"int64": "1", "string": "'a'", "bool": "true"}[c.type.scalar.value]
                for c in r.schema.columns
            )
            conn.execute(f"INSERT INTO {r.name} VALUES ({values})")  # type: ignore[arg-type]
        yield conn


@pytest.mark.postgres
def test_postgresql_refuses_every_planted_defect_as_its_template_says(pg: Any) -> None:
    import psycopg

    def count(table: str) -> int:
        row = pg.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0])

    seen: set[str] = set()
    for bad in _draws(range(60)):
        before = count(bad.table) if bad.table is not None else 0
        try:
            pg.execute(bad.sql)  # several statements: the simple query protocol
        except psycopg.Error as e:
            state = e.sqlstate
        else:
            state = None
        if bad.block:
            pg.execute("ROLLBACK")
        assert state == bad.sqlstate, (bad.kind, bad.sql, state)
        if bad.table is not None:
            assert count(bad.table) == before, f"{bad.sql}: rows landed"
        seen.add(bad.kind)
    assert seen == _kinds()


@pytest.mark.postgres
def test_the_copy_clients_text_format_and_refusals_are_postgresqls(pg: Any) -> None:
    """``sql_copy``'s side of ``COPY``, held to PostgreSQL: rows written by
    :func:`copy_text_row` read back as written (escapes included), PostgreSQL's ``COPY TO``
    text reads back through :func:`copy_text_rows`, a ``CopyFail`` is ``57014`` and a short
    line ``22P04``, and neither lands a row."""
    import psycopg

    from tidegate.sim.pg_client import copy_text_row, copy_text_rows

    pg.execute("CREATE TABLE c (k bigint NOT NULL, s text, b boolean)")
    rows = [(1, "tab\there", True), (2, "back\\slash\nnew\rline", None), (3, None, False)]
    with pg.cursor().copy("COPY c FROM STDIN") as copy:
        copy.write(b"".join(copy_text_row(r) for r in rows))
    assert sorted(pg.execute("SELECT * FROM c").fetchall()) == rows
    with pg.cursor().copy("COPY (SELECT * FROM c) TO STDOUT") as copy:
        out = b"".join(bytes(b) for b in copy)
    assert sorted(copy_text_rows(out, [20, 25, 16])) == rows

    # CopyFail by hand (psycopg sends one when its copy block raises, and re-raises that)
    conn = pg.pgconn
    conn.send_query(b"COPY c FROM STDIN")
    assert conn.get_result().status == psycopg.pq.ExecStatus.COPY_IN
    conn.put_copy_data(copy_text_row((4, "x", True)))
    conn.put_copy_end(b"the client gave up")
    failed = conn.get_result()
    assert failed.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"57014"
    while conn.get_result() is not None:
        pass
    with pytest.raises(psycopg.Error) as short, pg.cursor().copy("COPY c FROM STDIN") as copy:
        copy.write(copy_text_row((5, "y", True)) + copy_text_row((6, "z")))
    assert short.value.sqlstate == "22P04"
    assert pg.execute("SELECT count(*) FROM c").fetchone() == (3,)
