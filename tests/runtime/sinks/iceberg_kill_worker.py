"""Commits batches to an Iceberg sink until it is SIGKILLed (test_iceberg_sink's crash test).

    python iceberg_kill_worker.py CATALOG_URL WAREHOUSE TABLE

Imports once, then for every line ``go`` on stdin forks a child that resumes a
fresh :class:`IcebergSinkWriter` from ``open()`` and commits batches of
:func:`updates_at` in a loop, forever; the child's pid is printed (and flushed)
once its writer is open, so the test can kill it at a random point of its
commits. Forking from a process that has imported everything keeps each round
at the cost of a commit loop, not of an interpreter start (about 3 s here).
``quit`` ends the worker.
"""

from __future__ import annotations

import importlib
import os
import sys

from tidegate.runtime.sinks import IcebergSinkWriter
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import IcebergSink

# what pyiceberg imports on first use, imported before forking so that no child pays for it
_LAZY = (
    "pyarrow.dataset",
    "pyarrow.parquet",
    "pyiceberg.avro.decoder_fast",
    "pyiceberg.io.pyarrow",
    "rich.console",
    "rich.table",
    "sqlalchemy.dialects.sqlite",
)

SCHEMA = Schema.of(("t", "int64", False), ("i", "int64", False), ("label", "string"))


def updates_at(time: int) -> list[tuple[Row, int, int]]:
    """The collection's updates at ``time``: deterministic, some times quiet, some retractions."""
    if time % 11 in (3, 4, 5):
        return []
    out: list[tuple[Row, int, int]] = [
        ((time, i, None if i % 5 == 0 else f"v{time}.{i}"), time, 1) for i in range(1 + time % 40)
    ]
    if time % 3 == 0 and time > 0:
        out.append(((time - 1, 0, None), time, -1))
    return out


def batch_upper(lower: int) -> int:
    """The upper of the batch that starts at ``lower`` (spans of 1 to 7 times)."""
    return lower + 1 + lower % 7


def _commit_forever(catalog_url: str, warehouse: str, table: str) -> None:
    # a short history, so that kills land in snapshot expiry too
    writer = IcebergSinkWriter(
        IcebergSink(catalog_url, warehouse, table), SCHEMA, sink_id="u1", keep_snapshots=3
    )
    lower = writer.open() or 0
    print(os.getpid(), flush=True)
    while True:
        upper = batch_upper(lower)
        writer.commit([u for t in range(lower, upper) for u in updates_at(t)], lower, upper)
        lower = upper


def main() -> None:
    catalog_url, warehouse, table = sys.argv[1:4]
    for module in _LAZY:
        importlib.import_module(module)
    for line in sys.stdin:
        if line.strip() == "quit":
            return
        pid = os.fork()
        if pid == 0:
            try:
                _commit_forever(catalog_url, warehouse, table)
            finally:
                os._exit(1)
        # the child prints its own pid; reap it once the test has killed it
        os.waitpid(pid, 0)
        print("reaped", flush=True)


if __name__ == "__main__":
    main()
