"""The replica process on Spark: ``--executor spark`` on ``local[2]``, and against a Spark
standalone master and worker started on loopback from the pyspark package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pyspark
import pytest
from replica_harness import (
    Client,
    ReplicaProcess,
    Tables,
    at,
    fresh_id,
    index_dataflow,
    replica_process,
)

from tidegate.spec.protocol import (
    CreateDataflow,
    Frontiers,
    Peek,
    PeekDescription,
    PeekResponse,
    PeekRows,
    Schedule,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SPARK_HOME = str(Path(pyspark.__file__).parent)
LOOPBACK_ENV = {
    "SPARK_HOME": SPARK_HOME,
    "SPARK_LOCAL_IP": "127.0.0.1",
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
}


def _peek(idx: object, t: int) -> Peek:
    return Peek(PeekDescription(uuid.uuid4(), idx, t))  # type: ignore[arg-type]


def index_append_peek(replica: ReplicaProcess, tables: Tables) -> None:
    """Install an index, peek it, append, peek again at a time that waits for the append."""
    t = tables.create()
    tables.append(t, [((1, "a"), 0, 1), ((2, "b"), 1, 1)], 2)
    idx = fresh_id()

    async def main() -> None:
        c = await Client.connect(replica.address)
        await c.initialized(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
        await c.until(
            lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == at(2),
            timeout=180,
        )
        first, waiting = _peek(idx, 1), _peek(idx, 4)
        await c.send(first, waiting)
        r = await c.until(lambda r: isinstance(r, PeekResponse) and r.uuid == first.peek.uuid, 120)
        assert isinstance(r, PeekResponse) and r.result == PeekRows((((1, "a"), 1), ((2, "b"), 1)))
        tables.append(t, [((1, "a"), 3, -1), ((3, "c"), 4, 1)], 5)
        r = await c.until(
            lambda r: isinstance(r, PeekResponse) and r.uuid == waiting.peek.uuid, 180
        )
        assert isinstance(r, PeekResponse) and r.result == PeekRows((((2, "b"), 1), ((3, "c"), 1)))
        await c.close()

    anyio.run(main)


def test_a_replica_process_on_local_spark(tmp_path: Path) -> None:
    tables = Tables(tmp_path)
    with replica_process(
        tmp_path,
        "--spark-master",
        "local[2]",
        executor="spark",
        env=LOOPBACK_ENV,
        ready_timeout=180,
    ) as replica:
        index_append_peek(replica, tables)
        assert replica.terminate(60) == 0


# -- a standalone cluster on loopback ---------------------------------------------------------


def _daemon(log: Path, cls: str, *args: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **LOOPBACK_ENV,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_WORKER_DIR": str(log.parent / "work"),
        "SPARK_LOG_DIR": str(log.parent),
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_in_log(
    log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float
) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, log.read_text(errors="replace"))
        if m is not None:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not in {log}:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[str]:
    """A master and one worker (2 cores, 1 GiB) on 127.0.0.1; yields the master URL."""
    logs = tmp_path / "spark"
    logs.mkdir()
    master = _daemon(
        logs / "master.out",
        "org.apache.spark.deploy.master.Master",
        *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
    )
    worker = None
    try:
        m = _wait_in_log(
            logs / "master.out", r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master, 120
        )
        url = m.group(1)
        worker = _daemon(
            logs / "worker.out",
            "org.apache.spark.deploy.worker.Worker",
            url,
            *("--host", "127.0.0.1", "--webui-port", "0", "--cores", "2", "--memory", "1g"),
        )
        _wait_in_log(logs / "worker.out", r"Successfully registered with master", worker, 120)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def test_a_replica_process_on_a_standalone_spark_cluster(
    tmp_path: Path, standalone_cluster: str
) -> None:
    tables = Tables(tmp_path)
    with replica_process(
        tmp_path,
        *("--spark-master", standalone_cluster),
        executor="spark",
        env=LOOPBACK_ENV,
        ready_timeout=180,
    ) as replica:
        index_append_peek(replica, tables)
        assert replica.terminate(60) == 0
