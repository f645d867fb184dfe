"""An environment served over the wire protocol, for the client tests.

``pg_server`` is one per test session (per xdist worker): an in-process
python-executor replica, an :class:`Environment` over it and a
:class:`~tidegate.runtime.pgwire.PgwireServer` on a free loopback port, all on
an event loop of their own in a background thread (so blocking clients --
psycopg, pg8000, SQLAlchemy -- and subprocesses such as psql and dbt can talk
to it from the test). Nothing here starts a process. Tests name their tables
after themselves, so they share the server without seeing each other's
objects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest

from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.runtime.pgwire import AuthConfig, PgwireOptions, PgwireServer

PASSWORD = "wire-secret"


@dataclass
class Server:
    host: str
    port: int
    password: str
    env: Environment
    server: PgwireServer
    portal: anyio.from_thread.BlockingPortal

    @property
    def url(self) -> str:
        return f"postgresql://materialize:{self.password}@{self.host}:{self.port}/materialize"

    def dsn(self, **extra: Any) -> str:
        words = [
            f"host={self.host}",
            f"port={self.port}",
            "user=materialize",
            f"password={self.password}",
            "dbname=materialize",
            *(f"{k}={v}" for k, v in extra.items()),
        ]
        return " ".join(words)

    def run(self, fn: Any, *args: Any) -> Any:
        """Call the async ``fn(*args)`` on the server's event loop."""
        return self.portal.call(fn, *args)


_names = itertools.count()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A table name of this test's own."""
    base = request.node.name.split("[")[0].removeprefix("test_")[:40]
    return f"{base}_{next(_names)}"


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("pgwire")
    with ExitStack() as stack:
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        address = stack.enter_context(in_process_replica(data))
        env = stack.enter_context(
            portal.wrap_async_context_manager(
                Environment.open(data, replicas={"r1": address})  # type: ignore[arg-type]
            )
        )
        portal.call(lambda: env.wait_connected(timeout_s=60))
        server = PgwireServer(env, PgwireOptions(AuthConfig(PASSWORD)))
        _future, (host, port) = portal.start_task(server.serve, "127.0.0.1", 0)
        yield Server(host, port, PASSWORD, env, server, portal)
        _future.cancel()
