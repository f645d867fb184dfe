"""The command line with real processes: ``TIDEGATE_DATA_DIR`` as the default data directory,
``append --csv/--parquet``, ``up --spark-conf/--spark-ui`` reaching the managed replicas
(plain-integer pidfiles), and ``up``'s logs as JSON lines on stderr (beside its lines for
people)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidegate.runtime.defaults import DATA_DIR_ENV, default_data_dir

pytestmark = pytest.mark.timeout(300)

TIDEGATE = [sys.executable, "-m", "tidegate"]


def test_the_default_data_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert default_data_dir() == "./tidegate-data"
    monkeypatch.setenv(DATA_DIR_ENV, "/srv/tidegate")
    assert default_data_dir() == "/srv/tidegate"
    monkeypatch.setenv(DATA_DIR_ENV, "")
    assert default_data_dir() == "./tidegate-data"


@pytest.fixture
def up(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], Path]]:
    """``tidegate up`` (python executor) on ``$TIDEGATE_DATA_DIR``, no ``--data-dir`` given."""
    data = tmp_path / "data"
    env = {**os.environ, DATA_DIR_ENV: str(data)}
    stderr = tmp_path / "up.stderr"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [
                *(*TIDEGATE, "up", "--executor", "python"),
                *("--spark-conf", "spark.sql.shuffle.partitions=3", "--spark-ui"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=tmp_path,
        )
        try:
            # Until the controller runs and its replica is connected (it answers while it starts).
            ready = _run(env, "status", "--wait", "--timeout", "120")
            assert ready.returncode == 0, ready.stderr + stderr.read_text()[-3000:]
            yield data, env, stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(60)
    assert code == 0, stderr.read_text()[-3000:]


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDEGATE, *argv], capture_output=True, text=True, env=env, timeout=90)


@pytest.mark.processes
def test_append_files_spark_conf_pidfiles_and_json_logs(
    up: tuple[Path, dict[str, str], Path], tmp_path: Path
) -> None:
    data, env, stderr = up
    # The managed replica got the Spark options; its pidfile is a plain integer.
    pid = int((data / "replicas" / "r1.pid").read_text())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    assert "spark.sql.shuffle.partitions=3" in argv and "--spark-ui" in argv

    made = _run(env, "create-table", "orders", "id:int64", "who:string:null", "day:date")
    assert made.returncode == 0, made.stderr
    csv = tmp_path / "orders.csv"
    csv.write_text("who,id,day\nann,1,2024-01-02\n,2,2024-01-03\n")
    got = _run(env, "append", "orders", "--csv", str(csv), "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["rows"] == 2
    parquet = tmp_path / "more.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 3], pa.int64()),
                "who": ["ann", "cy"],
                "day": pa.array([dt(2024, 1, 2), dt(2024, 1, 4)], pa.date32()),
                "diff": pa.array([-1, 2], pa.int64()),
            }
        ),
        parquet,
    )
    assert _run(env, "append", "orders", "--parquet", str(parquet)).returncode == 0
    peeked = json.loads(_run(env, "peek", "orders", "--json").stdout)
    assert sorted(map(lambda rc: (tuple(rc[0]), rc[1]), peeked["rows"])) == [
        ((2, None, "2024-01-03"), 1),
        ((3, "cy", "2024-01-04"), 2),
    ]
    # A file that does not fit the table: a typed error, nothing appended.
    bad = tmp_path / "bad.csv"
    bad.write_text("id,who\n1,x\n")
    refused = _run(env, "append", "orders", "--csv", str(bad))
    assert refused.returncode == 1 and "ArityMismatch" in refused.stderr
    typo = tmp_path / "typo.csv"
    typo.write_text("id,who,dya\n1,x,2024-01-01\n")
    refused = _run(env, "append", "orders", "--csv", str(typo))
    assert refused.returncode == 1 and "TypeMismatch" in refused.stderr and "dya" in refused.stderr

    # The replica's log is JSON lines; so is every log record on up's stderr, beside the
    # lines for people (what up does, replica events), which start with "tidegate up:" or a time.
    for line in (data / "replicas" / "r1.log").read_text().splitlines():
        if line.strip():
            assert isinstance(json.loads(line), dict), line
    people = re.compile(r"(tidegate up: |\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z r1 )")
    for line in stderr.read_text().splitlines():
        if line.strip() and not people.match(line):
            assert isinstance(json.loads(line), dict), line


def dt(y: int, m: int, d: int) -> object:
    import datetime

    return datetime.date(y, m, d)
