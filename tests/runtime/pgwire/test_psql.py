"""psql (Debian's postgresql-client) against ``tidegate up``: what a person types.

``tidegate up --sql-listen 127.0.0.1:0`` runs as a process; psql reads the
password from the ``pgpass`` file ``up`` writes. Scripted sessions with ``-c``
and ``-f``, the ``\\d`` family, ``\\copy`` both ways, errors as psql prints
them (with ``LINE``, the caret and ``HINT``), ``ON_ERROR_STOP`` and its exit
status, a statement run again and again (``\\g`` in a loop, as ``\\watch``
would), TLS with ``sslmode=require``, and ``tidegate sql`` over ``POST /sql``
seeing what psql made (one session semantics).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tidegate.commands.control import ControllerInfo

pytestmark = [pytest.mark.processes, pytest.mark.timeout(240)]

TIDEGATE = [sys.executable, "-m", "tidegate.cli"]
PSQL = shutil.which("psql")


@dataclass
class Up:
    data: Path
    host: str
    port: int
    proc: subprocess.Popen[str]

    def psql(
        self, *args: str, stdin: str | None = None, sslmode: str = "disable"
    ) -> subprocess.CompletedProcess[str]:
        assert PSQL is not None, "psql is missing: apt-get install postgresql-client"
        env = {
            **os.environ,
            "PGPASSFILE": str(self.data / "pgpass"),
            "PGSSLMODE": sslmode,
            "PGCONNECT_TIMEOUT": "30",
        }
        cmd = [
            PSQL,
            "-X",
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-U",
            "materialize",
            "materialize",
        ]
        return subprocess.run(
            [*cmd, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
        )


def _start(tmp: Path, *extra: str) -> Up:
    data = tmp / "data"
    log = open(tmp / "up.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            *TIDEGATE,
            "up",
            "--data-dir",
            str(data),
            "--executor",
            "python",
            "--sql-listen",
            "127.0.0.1:0",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, (tmp / "up.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "tidegate up did not serve SQL"
        try:
            info = ControllerInfo.read(data)
        except Exception:
            info = None
        if info is not None and info.sql is not None:
            host, _, port = info.sql.rpartition(":")
            return Up(data, host, int(port), proc)
        time.sleep(0.2)


def _stop(up: Up) -> None:
    up.proc.send_signal(signal.SIGTERM)
    up.proc.wait(60)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    served = _start(tmp_path_factory.mktemp("psql"))
    try:
        yield served
    finally:
        _stop(served)


def test_scripted_session_with_c_and_f(up: Up, tmp_path: Path) -> None:
    r = up.psql(
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        "CREATE TABLE orders (id bigint NOT NULL, customer text NOT NULL, amount double precision)",
        "-c",
        "INSERT INTO orders VALUES (1, 'ann', 10), (2, 'bob', 25.5), (3, 'ann', 7)",
        "-c",
        "SELECT customer, sum(amount) AS total FROM orders GROUP BY customer ORDER BY total DESC",
    )
    assert r.returncode == 0, r.stderr
    assert "CREATE TABLE" in r.stdout and "INSERT 0 3" in r.stdout
    assert r.stdout.index(" bob ") < r.stdout.index(" ann ") and "(2 rows)" in r.stdout
    script = tmp_path / "setup.sql"
    script.write_text(
        "CREATE MATERIALIZED VIEW totals AS\n"
        "  SELECT customer, count(*) AS n FROM orders GROUP BY customer;\n"
        "CREATE VIEW big AS SELECT id FROM orders WHERE amount > 8;\n"
        "CREATE DEFAULT INDEX ON big;\n"
        "SELECT * FROM materialize.public.totals ORDER BY customer;\n"
    )
    r = up.psql("-v", "ON_ERROR_STOP=1", "-A", "-t", "-f", str(script))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == ["ann|2", "bob|1"]


def test_describe_family(up: Up) -> None:
    up.psql(
        "-c",
        "CREATE TABLE d_t (k bigint NOT NULL, v text)",
        "-c",
        "CREATE VIEW d_v AS SELECT k FROM d_t",
        "-c",
        "CREATE MATERIALIZED VIEW d_m AS SELECT count(*) AS n FROM d_t",
        "-c",
        "CREATE INDEX d_idx ON d_t (k)",
    )
    listed = up.psql("-c", "\\d")
    assert listed.returncode == 0, listed.stderr
    for name, kind in (("d_t", "table"), ("d_v", "view"), ("d_m", "materialized view")):
        assert any(name in line and kind in line for line in listed.stdout.splitlines()), (
            listed.stdout
        )
    assert "d_t " in up.psql("-c", "\\dt").stdout
    assert "d_v " in up.psql("-c", "\\dv").stdout
    assert "d_m " in up.psql("-c", "\\dm").stdout
    indexes = up.psql("-c", "\\di").stdout
    assert "d_idx" in indexes and "d_t" in indexes
    table = up.psql("-c", "\\d d_t")
    assert table.returncode == 0, table.stderr
    assert 'Table "public.d_t"' in table.stdout
    assert any(
        line.split("|")[0].strip() == "k" and "bigint" in line and "not null" in line
        for line in table.stdout.splitlines()
    )
    assert '"d_idx"' in table.stdout
    view = up.psql("-c", "\\d d_m").stdout
    assert 'Materialized view "public.d_m"' in view and "bigint" in view
    for cmd in (
        "\\d+ d_t",
        "\\dt+",
        "\\di+",
        "\\dv+",
        "\\dm+",
        "\\dn",
        "\\l",
        "\\du",
        "\\df",
        "\\dT",
        "\\dx",
        "\\dp",
        "\\d mz_catalog.mz_tables",
    ):
        shown = up.psql("-c", cmd)
        assert shown.returncode == 0 and "ERROR" not in shown.stderr, (cmd, shown.stderr)
    missing = up.psql("-c", "\\dt nothing_like_this")
    assert 'Did not find any relation named "nothing_like_this"' in missing.stderr


def test_copy_both_ways_with_backslash_copy(up: Up, tmp_path: Path) -> None:
    up.psql("-c", "CREATE TABLE c_t (id bigint NOT NULL, note text, d date)")
    src = tmp_path / "in.csv"
    src.write_text('id,note,d\n1,hello,2024-01-02\n2,,2024-03-04\n3,"a,b",\n')
    r = up.psql("-c", f"\\copy c_t FROM '{src}' WITH (FORMAT csv, HEADER)")
    assert r.returncode == 0 and "COPY 3" in r.stdout, r.stderr
    out = tmp_path / "out.csv"
    r = up.psql("-c", f"\\copy (SELECT * FROM c_t ORDER BY id) TO '{out}' WITH (FORMAT csv)")
    assert r.returncode == 0, r.stderr
    assert out.read_text().splitlines() == ["1,hello,2024-01-02", "2,,2024-03-04", '3,"a,b",']


def test_errors_and_on_error_stop(up: Up) -> None:
    up.psql("-c", "CREATE TABLE e_t (amount bigint)")
    r = up.psql("-c", "SELECT amonut FROM e_t")
    assert r.returncode == 1
    assert 'ERROR:  column "amonut" does not exist' in r.stderr
    assert "LINE 1: SELECT amonut FROM e_t" in r.stderr and "^" in r.stderr
    assert 'HINT:  Perhaps you meant to reference the column "amount".' in r.stderr
    script = "SELECT 1 FROM e_t;\nSELECT nope;\nSELECT 2 AS after FROM e_t;\n"
    stopped = up.psql("-v", "ON_ERROR_STOP=1", stdin=script)
    assert stopped.returncode == 3 and "after" not in stopped.stdout
    goes_on = up.psql(stdin=script)
    assert goes_on.returncode == 0 and "after" in goes_on.stdout
    assert (
        "ERROR:  division by zero"
        in up.psql("-c", "INSERT INTO e_t VALUES (1)", "-c", "SELECT amount / 0 FROM e_t").stderr
    )


def test_repetition_like_watch(up: Up) -> None:
    up.psql("-c", "CREATE TABLE w_t (n bigint)")
    script = "".join(
        f"INSERT INTO w_t VALUES ({i});\nSELECT count(*) FROM w_t;\n\\g\n" for i in range(5)
    )
    r = up.psql("-A", "-t", stdin=script)
    assert r.returncode == 0, r.stderr
    counts = [line for line in r.stdout.splitlines() if line.isdigit()]
    assert counts == ["1", "1", "2", "2", "3", "3", "4", "4", "5", "5"]


def test_tidegate_sql_sees_what_psql_made(up: Up) -> None:
    up.psql("-c", "CREATE TABLE s_t (a bigint)", "-c", "INSERT INTO s_t VALUES (41), (1)")
    r = subprocess.run(
        [
            *TIDEGATE,
            "sql",
            "--data-dir",
            str(up.data),
            "--csv",
            "-c",
            "SELECT sum(a) AS s FROM s_t",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["s", "42"]
    shown = up.psql("-A", "-t", "-c", "SHOW TABLES")
    assert "s_t" in shown.stdout.split()


def test_wrong_password_and_trust(up: Up, tmp_path: Path) -> None:
    env = {**os.environ, "PGPASSWORD": "wrong", "PGSSLMODE": "disable"}
    assert PSQL is not None
    r = subprocess.run(
        [PSQL, "-X", "-h", up.host, "-p", str(up.port), "-U", "materialize", "-c", "SELECT 1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2 and 'password authentication failed for user "materialize"' in r.stderr
    r = subprocess.run(
        [
            PSQL,
            "-X",
            "-h",
            up.host,
            "-p",
            str(up.port),
            "-U",
            "materialize",
            "-d",
            "elsewhere",
            "-c",
            "SELECT 1",
        ],
        capture_output=True,
        text=True,
        env={**env, "PGPASSFILE": str(up.data / "pgpass")},
        timeout=60,
    )
    assert r.returncode == 2 and 'database "elsewhere" does not exist' in r.stderr


def test_tls_with_sslmode_require(tmp_path: Path) -> None:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    up = _start(
        tmp_path,
        "--tls-cert",
        str(tmp_path / "cert.pem"),
        "--tls-key",
        str(tmp_path / "key.pem"),
        "--sql-auth",
        "password",
    )
    try:
        plain = up.psql("-A", "-t", "-c", "SELECT 1", sslmode="require")
        assert plain.returncode == 0 and plain.stdout.strip() == "1", plain.stderr
        r = up.psql("-A", "-t", "-c", "SHOW server_version", sslmode="disable")
        assert r.returncode == 0 and r.stdout.strip() == "9.5.0", r.stderr  # SCRAM without TLS
    finally:
        _stop(up)
