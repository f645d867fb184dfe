"""The sqllogictest runner's engines: tidegate (an environment with an in-process
``PythonExecutor`` replica) and PostgreSQL (a fresh database per file, C collation, so the
files themselves are checked against PostgreSQL)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from runner import EngineError

from tidegate.replica.testing import in_process_replica
from tidegate.runtime import SyncEnvironment
from tidegate.spec.errors import SqlError


class TidegateEngine:
    name = "tidegate"

    def __init__(self, env: SyncEnvironment) -> None:
        self.env = env

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        try:
            res = self.env.execute(sql)
        except SqlError as e:
            raise EngineError(e.sqlstate, e.message) from None
        return list(res.rows) if res.columns else None


class PostgresEngine:
    name = "postgresql"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        import psycopg

        try:
            with self.conn.cursor() as cur:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()] if cur.description else None
        except psycopg.Error as e:
            raise EngineError(e.sqlstate or "XX000", str(e).splitlines()[0]) from None


@pytest.fixture
def tidegate_engine(tmp_path: Path) -> Iterator[TidegateEngine]:
    with (
        in_process_replica(tmp_path) as r,
        SyncEnvironment.open(tmp_path, replicas={"r1": r}, tick_ms=None) as env,
    ):
        env.wait_connected(timeout_s=60)
        yield TidegateEngine(env)


@pytest.fixture
def postgres_engine(postgres_url: str, request: pytest.FixtureRequest) -> Iterator[PostgresEngine]:
    import psycopg

    name = "slt_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:50].lower()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")  # type: ignore[arg-type]
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "  # type: ignore[arg-type]
            "LC_COLLATE 'C' LC_CTYPE 'C.UTF-8'"
        )
    try:
        with psycopg.connect(postgres_url.rsplit("/", 1)[0] + f"/{name}", autocommit=True) as c:
            c.execute("SET TimeZone = 'UTC'")
            yield PostgresEngine(c)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")  # type: ignore[arg-type]
