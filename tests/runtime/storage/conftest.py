"""Live servers for the storage backends, started by the tests themselves.

* ``postgres_url``: a throw-away PostgreSQL cluster (``initdb`` in a temporary
  directory, ``postgres`` on a free loopback port; run as the ``postgres`` user
  when the tests run as root). Needs the Debian ``postgresql`` package; if its
  binaries are missing the fixture FAILS with the install command.
* ``s3_endpoint``: moto's S3-compatible server (``moto[server]``) on a free
  loopback port, with a bucket ``tidegate``.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.fail("running as root, PostgreSQL must run as another user, and runuser is missing")
    return [runuser, "-u", "postgres", "--", *cmd]


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins:
        pytest.fail(
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
    subprocess.run(
        _as_postgres_user(
            [
                f"{bindir}/initdb",
                "-D",
                data,
                "-A",
                "trust",
                "-U",
                "tidegate",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        ),
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        _as_postgres_user(
            [
                f"{bindir}/postgres",
                "-D",
                data,
                "-p",
                str(port),
                "-k",
                sock,
                "-c",
                "listen_addresses=127.0.0.1",
            ]
        ),
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(tmp, "server.log"), "wb"),  # noqa: SIM115
        start_new_session=True,
    )
    url = f"postgresql://tidegate@127.0.0.1:{port}/postgres"
    try:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = open(os.path.join(tmp, "server.log")).read()  # noqa: SIM115
                    pytest.fail(f"PostgreSQL did not start on port {port}:\n{log}")
                time.sleep(0.2)
        yield url
    finally:
        _stop(proc, signal.SIGINT)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(k, v)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server did not start on port {port}")
                time.sleep(0.2)
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket="tidegate"
        )
        yield endpoint
    finally:
        _stop(proc, signal.SIGTERM)
