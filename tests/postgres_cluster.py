"""Throw-away PostgreSQL clusters for the tests: a pytest plugin (``tests/conftest.py`` loads it).

``postgres_url`` is the session's cluster: ``initdb`` in a temporary directory,
``postgres`` on a free loopback port (run as the ``postgres`` user when the
tests run as root), started with ``wal_level=logical`` and room for 20
replication slots and WAL senders, so any test can use logical replication.
:func:`postgres_cluster` starts one more (with other settings) as a context
manager; ``bench/`` scripts use it too. Needs the Debian ``postgresql``
package: if its binaries are missing the fixture FAILS with the install command.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

__all__ = [
    "LOGICAL_REPLICATION",
    "ClusterUnavailable",
    "free_port",
    "postgres_cluster",
    "postgres_url",
    "stop_process",
]

LOGICAL_REPLICATION = {
    "wal_level": "logical",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
}
"""Server settings that let every test create logical replication slots and stream from them."""


class ClusterUnavailable(RuntimeError):
    """A cluster could not be started (binaries missing, or the server did not come up)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to ``proc``'s process group and wait (SIGKILL after 30 s)."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _as_postgres_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ClusterUnavailable(
            "running as root, PostgreSQL must run as another user, and runuser is missing"
        )
    return [runuser, "-u", "postgres", "--", *cmd]


@contextmanager
def postgres_cluster(settings: dict[str, str] | None = None) -> Iterator[str]:
    """Start a fresh cluster with these server ``settings``; yield its URL; stop and delete it."""
    import psycopg

    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        raise ClusterUnavailable(
            "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: "
            "install them with `apt-get install -y postgresql` (make test's set-up does)"
        )
    bindir = os.path.dirname(bins[-1])
    tmp = tempfile.mkdtemp(prefix="tidegate-pg-")
    data, sock = os.path.join(tmp, "data"), os.path.join(tmp, "sock")
    os.mkdir(sock)
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
        shutil.chown(sock, "postgres")
    try:
        subprocess.run(
            _as_postgres_user(
                [
                    f"{bindir}/initdb",
                    *("-D", data, "-A", "trust", "-U", "tidegate", "-E", "UTF8"),
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
        )
        port = free_port()
        options = [f"-c{k}={v}" for k, v in (settings or {}).items()]
        log = os.path.join(tmp, "server.log")
        with open(log, "wb") as log_file:
            proc = subprocess.Popen(
                _as_postgres_user(
                    [
                        f"{bindir}/postgres",
                        *("-D", data, "-p", str(port), "-k", sock),
                        "-clisten_addresses=127.0.0.1",
                        *options,
                    ]
                ),
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                start_new_session=True,
            )
        url = f"postgresql://tidegate@127.0.0.1:{port}/postgres"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    psycopg.connect(url, connect_timeout=2).close()
                    break
                except psycopg.OperationalError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        with open(log) as f:
                            raise ClusterUnavailable(
                                f"PostgreSQL did not start on port {port}:\n{f.read()}"
                            ) from None
                    time.sleep(0.1)
            yield url
        finally:
            stop_process(proc, signal.SIGINT)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The session's throw-away cluster, ready for logical replication."""
    try:
        with postgres_cluster(LOGICAL_REPLICATION) as url:
            yield url
    except ClusterUnavailable as e:
        pytest.fail(str(e))
