"""The PostgreSQL oracle's fixtures: a database with PostgreSQL's C collation (tidegate orders
text by code point, as Materialize does), and helper-module imports (importlib mode)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def oracle_db_url(postgres_url: str) -> Iterator[str]:
    """A database of the session's PostgreSQL cluster for the oracle: C collation, UTC."""
    import psycopg

    name = "tidegate_oracle"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")  # type: ignore[arg-type]
        admin.execute(
            f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' "  # type: ignore[arg-type]
            "LC_COLLATE 'C' LC_CTYPE 'C.UTF-8'"
        )
    yield postgres_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def oracle_conn(oracle_db_url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(oracle_db_url, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET extra_float_digits = 1")  # the shortest text that reads back
        yield conn
