"""What docs/security.md promises, checked against a real ``tidegate up``.

* Compute replicas require the controller's token, whoever built the
  orchestrator: ``tidegate up`` builds its own, and before, its replicas took
  any client (an unauthenticated local one preempted the controller's stream).
* Everything in the data directory is its owner's only (directories 0700,
  files 0600): the shards, the catalog, the replicas' logs and pid files.
"""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.control import ControlClient, ControllerInfo

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

TIDEGATE = [sys.executable, "-m", "tidegate"]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ControlClient]]:
    root = tmp_path_factory.mktemp("security")
    data, log = root / "data", root / "up.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*TIDEGATE, "up", "--data-dir", str(data), "--executor", "python"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not ControllerInfo.path(data).exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        ready = subprocess.run(
            [*TIDEGATE, "status", "--data-dir", str(data), "--wait", "--timeout", "120"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ready.returncode == 0, ready.stdout + ready.stderr
        with ControlClient.for_data_dir(data) as client:
            yield data, client
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


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
