"""A dropped PostgreSQL source's replication slot stays recorded until it is dropped upstream.

No server here: the slot's server cannot be reached (a closed port), so every
attempt fails. The environment says which slot waits and why
(``Environment.slots_to_drop``), keeps retrying for a while, and leaves the record
in the catalog for the next open when it gives up or closes first (with a real
server, ``test_environment_postgres_source.py`` checks the slot goes).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tidegate.runtime import Environment
from tidegate.runtime.catalog import Catalog, CreateSecret, CreateSource, Drop
from tidegate.runtime.environment import _sources
from tidegate.runtime.secrets import SecretStore
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import PostgresSource

pytestmark = pytest.mark.timeout(60)


def test_a_slot_that_cannot_be_dropped_stays_recorded_with_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sources, "_SLOT_DROP_RETRY_S", 0.5)
    monkeypatch.setattr(_sources, "_SLOT_DROP_WAIT_S", 0.5)
    gone = PostgresSource("postgresql://nobody@127.0.0.1:1/db", "public.t", "pub", "s_slot")
    store = ShardStore.open(*default_urls(tmp_path))
    try:
        catalog = Catalog(store.consensus)
        catalog.load()
        source = GlobalId.user(1)
        schema = Schema.of(("id", "int64", False))
        state = catalog.apply(
            [CreateSource("s", source, gone, schema, GlobalId.user(2)), Drop(source)]
        )
        (recorded,) = state.slots_to_drop
        assert (recorded.source, recorded.connection) == ("s", gone)
    finally:
        store.close()

    async def main() -> None:
        async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
            with anyio.fail_after(30):
                while not (env.slots_to_drop() and env.slots_to_drop()[0].error):
                    await anyio.sleep(0.05)
            (waiting,) = env.slots_to_drop()
            assert (waiting.source, waiting.slot) == ("s", "s_slot")
            assert "127.0.0.1:1" in waiting.server
            assert waiting.error is not None and "unreachable" in waiting.error
        async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
            assert [x.connection.slot for x in env.state.slots_to_drop] == ["s_slot"]  # next try

    anyio.run(main)


def test_a_recorded_slot_keeps_the_secret_its_password_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DROP SECRET pw CASCADE`` drops the source that uses it: the slot is recorded with the
    secret's id, and the secret's value stays in the store while the slot waits, so the next
    open still connects to drop it (here the server is unreachable: the error is the
    server's, not "no secret named 'pw'"). Materialize reads the connection's secret before
    it drops anything (the coordinator's ``catalog_transact``); the record here outlives a
    restart, so the value it needs does too."""
    monkeypatch.setattr(_sources, "_SLOT_DROP_RETRY_S", 0.5)
    monkeypatch.setattr(_sources, "_SLOT_DROP_WAIT_S", 0.5)
    gone = PostgresSource(
        "postgresql://nobody@127.0.0.1:1/db", "public.t", "pub", "s_slot", password_secret="pw"
    )
    secret = GlobalId.user(1)
    SecretStore(tmp_path / "secrets").put(secret, "hunter2")
    store = ShardStore.open(*default_urls(tmp_path))
    try:
        catalog = Catalog(store.consensus)
        catalog.load()
        source = GlobalId.user(2)
        schema = Schema.of(("id", "int64", False))
        state = catalog.apply(
            [
                CreateSecret("pw", secret),
                CreateSource("s", source, gone, schema, GlobalId.user(3)),
                Drop(secret, cascade=True),
            ]
        )
        assert state.secrets == () and state.sources == ()
        (recorded,) = state.slots_to_drop
        assert (recorded.source, recorded.secret) == ("s", secret)
    finally:
        store.close()

    async def main() -> None:
        async with Environment.open(tmp_path, replicas={}, tick_ms=None) as env:
            with anyio.fail_after(30):
                while not (env.slots_to_drop() and env.slots_to_drop()[0].error):
                    await anyio.sleep(0.05)
            (waiting,) = env.slots_to_drop()
            assert waiting.error is not None and "unreachable" in waiting.error, waiting.error
            assert "no secret" not in waiting.error and "hunter2" not in waiting.error
        assert (tmp_path / "secrets" / str(secret)).exists()  # kept for the next try

    anyio.run(main)
