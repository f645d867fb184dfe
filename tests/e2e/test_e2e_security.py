"""What docs/security.md promises, checked against a real ``tidegate up``.

* Compute replicas require the controller's token, whoever built the
  orchestrator: ``tidegate up`` builds its own, and before, its replicas took
  any client (an unauthenticated local one preempted the controller's stream).
* Everything in the data directory is its owner's only (directories 0700,
  files 0600): the shards, the catalog, the replicas' logs and pid files.
* A PostgreSQL password is a secret (``CREATE SECRET``, ``PASSWORD SECRET``): it
  was stored in clear in the catalog, and ``SHOW CREATE SOURCE`` and
  ``/describe`` printed it.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from tidegate.commands.control import ControlClient, ControlError

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, e2e: Any) -> Iterator[tuple[Path, ControlClient]]:
    root = tmp_path_factory.mktemp("security")
    data = root / "data"
    with e2e.up_process(data, root / "up.log"), ControlClient.for_data_dir(data) as client:
        yield data, client


def _sql(client: ControlClient, text: str) -> Any:
    return client.call("POST", "/sql", {"sql": text})


def test_replicas_of_up_refuse_a_client_without_the_token(
    up: tuple[Path, ControlClient],
) -> None:
    data, client = up
    port = int((data / "replicas" / "r1.port").read_text())

    async def connect(token: str | None) -> None:
        from tidegate.runtime.transport.grpc_client import GrpcTransport

        async with GrpcTransport(token=token) as transport:
            stream = await transport.connect(f"127.0.0.1:{port}")
            await stream.aclose()

    from tidegate.runtime.transport import Unauthenticated

    for token in (None, "guessed"):
        with pytest.raises(Unauthenticated):
            anyio.run(connect, token)
    # The controller's own stream was never preempted: it still answers.
    assert _sql(client, "SELECT 1 AS one")["rows"] == [[1]]
    statuses = {r["name"]: r["status"] for r in client.call("GET", "/replicas")["replicas"]}
    assert statuses == {"r1": "connected"}


def test_the_data_directory_is_its_owners_only(up: tuple[Path, ControlClient]) -> None:
    data, client = up
    _sql(client, "CREATE TABLE private_t (x bigint)")
    _sql(client, "CREATE MATERIALIZED VIEW private_mv AS SELECT x FROM private_t")
    values = ", ".join(f"({i})" for i in range(100))
    _sql(client, f"INSERT INTO private_t VALUES {values}")
    assert _sql(client, "SELECT count(*) FROM private_mv")["rows"] == [[100]]
    found = {"dirs": 0, "files": 0}
    loose = []
    for path in [data, *data.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        found["dirs" if path.is_dir() else "files"] += 1
        if mode & 0o077:
            loose.append(f"{path.relative_to(data)}: {mode:o}")
    assert not loose, loose
    # It looked at something: the shards' blobs, consensus.db, the replica's log.
    assert found["files"] >= 5 and found["dirs"] >= 3, found
    assert (data / "consensus.db").exists() and (data / "replicas" / "r1.log").exists()


@pytest.mark.postgres
def test_a_postgres_password_is_a_secret_shown_nowhere(
    up: tuple[Path, ControlClient], postgres_url: str
) -> None:
    """``CREATE SECRET`` and ``PASSWORD SECRET``: the source authenticates with the password
    (the upstream requires it, SCRAM), which is kept in an owner-only file and appears in no
    catalog record, definition, ``SHOW CREATE``, ``describe``, status or log; a URL that holds
    a password itself is refused."""
    import psycopg

    data, client = up
    password = "s3cr3t-Pw:/@?x"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        hba = conn.execute("SHOW hba_file").fetchone()[0]  # type: ignore[index]
        lines = Path(hba).read_text()
        rule = "host all tg_secret 127.0.0.1/32 scram-sha-256\n"
        if rule not in lines:
            Path(hba).write_text(rule + lines)
            conn.execute("SELECT pg_reload_conf()")
        conn.execute("DROP ROLE IF EXISTS tg_secret")
        conn.execute(f"CREATE ROLE tg_secret LOGIN REPLICATION PASSWORD '{password}'")
        conn.execute("CREATE TABLE sec_t (id int PRIMARY KEY, v text)")
        conn.execute("ALTER TABLE sec_t REPLICA IDENTITY FULL")
        conn.execute("GRANT SELECT ON sec_t TO tg_secret")
        conn.execute("CREATE PUBLICATION sec_pub FOR TABLE sec_t")
        conn.execute("INSERT INTO sec_t VALUES (1, 'one')")
    base = postgres_url.replace("tidegate@", "tg_secret@")
    with pytest.raises(psycopg.OperationalError):  # the upstream does want the password
        psycopg.connect(base, connect_timeout=5).close()
    options = "PUBLICATION 'sec_pub', TABLE 'public.sec_t', SLOT 'sec_slot'"

    def refused(sql: str) -> str:
        with pytest.raises(ControlError) as e:
            _sql(client, sql)
        return f"{e.value.type}: {e.value.message}"

    # In the URL: refused, typed, saying what to do instead; nothing is created.
    inline = base.replace("tg_secret@", f"tg_secret:{quote(password, safe='')}@")
    why = refused(f"CREATE SOURCE s FROM POSTGRES CONNECTION '{inline}' ({options})")
    assert "CREATE SECRET" in why
    _sql(client, "CREATE SECRET pgpass AS 'wrong'")
    why = refused(
        f"CREATE SOURCE s FROM POSTGRES CONNECTION '{base}' ({options}, PASSWORD SECRET pgpass)"
    )
    assert "password authentication failed" in why and "wrong" not in why
    _sql(client, f"ALTER SECRET pgpass AS '{password}'")
    _sql(
        client,
        f"CREATE SOURCE s FROM POSTGRES CONNECTION '{base}' ({options}, PASSWORD SECRET pgpass)",
    )
    deadline = time.monotonic() + 120
    while _sql(client, "SELECT id, v FROM s")["rows"] != [[1, "one"]]:
        assert time.monotonic() < deadline, "the source did not ingest"
        time.sleep(0.2)
    assert _sql(client, "SHOW SECRETS")["rows"] == [["pgpass"]]
    shown = [
        json.dumps(_sql(client, "SHOW CREATE SOURCE s")),
        json.dumps(client.call("POST", "/describe", {"name": "s"})),
        json.dumps(client.call("GET", "/status", {"describe": True})),
    ]
    assert "PASSWORD SECRET pgpass" in shown[0]
    assert not [s for s in shown if password in s]
    why = refused("DROP SECRET pgpass")  # the source uses it
    assert "depend" in why
    # Stored: only in the secrets file, the owner's alone; nowhere in the catalog or a log.
    (secret_file,) = (data / "secrets").iterdir()
    assert secret_file.read_text() == password
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "secrets").stat().st_mode) == 0o700
    needle = password.encode()
    leaks = [
        str(p.relative_to(data))
        for p in data.rglob("*")
        if p.is_file() and p != secret_file and needle in p.read_bytes()
    ]
    assert not leaks, leaks
    _sql(client, "DROP SECRET pgpass CASCADE")  # drops the source, and its slot upstream
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        deadline = time.monotonic() + 60
        while conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'sec_slot'"
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the dropped source's slot stayed"
            time.sleep(0.2)
    # The password's value stays until the slot it drops is dropped upstream, then goes.
    deadline = time.monotonic() + 60
    while (data / "secrets" / secret_file.name).exists():
        assert time.monotonic() < deadline, "the dropped secret's value stayed"
        time.sleep(0.2)
