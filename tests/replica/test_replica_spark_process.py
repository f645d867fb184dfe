"""The replica process on Spark: ``--executor spark`` on ``local[2]``, and against a Spark
standalone master and worker started on loopback from the pyspark package (the
``standalone_cluster`` fixture of ``tests/spark_cluster.py``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
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
from spark_cluster import LOOPBACK_ENV

from tidegate.spec.protocol import (
    CreateDataflow,
    Frontiers,
    Peek,
    PeekDescription,
    PeekResponse,
    PeekRows,
    Schedule,
)

pytestmark = [pytest.mark.processes, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(420)]


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
