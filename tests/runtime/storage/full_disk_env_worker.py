"""An environment appending to a table on a full disk, in a process of its own.

    python full_disk_env_worker.py DATA_DIR

Opens an environment without replicas, creates a table and appends to it; then
limits every file it writes to one byte (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored:
writes fail with ``EFBIG``, as on a full disk) and appends again, which must
fail with ``StorageUnavailable`` (not ``InvalidUppers``, not an untyped error)
and leave the table as it was, and so must an SQL ``INSERT`` (with a typed SQLSTATE
a PostgreSQL client is answered with, never ``XX000``); then it lifts the limit and
appends once more.
Prints one JSON line of what it saw.
"""

from __future__ import annotations

import json
import resource
import signal
import sys

import anyio

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.pgwire.session import sqlstate_of
from tidegate.runtime.sql_session import SqlSession
from tidegate.runtime.storage import ShardStore
from tidegate.spec.errors import StorageUnavailable


async def main(data_dir: str) -> None:
    seen: dict[str, object] = {}
    async with Environment.open(data_dir, replicas=0, tick_ms=None) as env:
        await env.create_table("t", Schema.of(("x", "int64", False)))
        await env.append("t", [(1,)])
        store: ShardStore = env.store
        shard = str(env.resolve("t"))
        rows = store.snapshot_rows(shard, store.upper(shard).elements[0] - 1)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
        for attempt in range(2):
            try:
                with anyio.fail_after(30):
                    await env.append("t", [(2 + attempt,)])
                seen[f"append{attempt}"] = "applied"
            except StorageUnavailable as e:
                seen[f"append{attempt}"] = {"type": type(e).__name__, "store": e.store}
            except Exception as e:
                seen[f"append{attempt}"] = f"untyped {type(e).__name__}: {e}"
        try:
            with anyio.fail_after(30):
                await SqlSession(env).run_script("INSERT INTO t VALUES (5)")
            seen["sql_insert"] = "applied"
        except StorageUnavailable as e:
            seen["sql_insert"] = {"type": type(e).__name__, "sqlstate": sqlstate_of(e)}
        except Exception as e:
            seen["sql_insert"] = f"untyped {type(e).__name__}: {e}"
        upper = store.upper(shard).elements[0]
        seen["unchanged"] = store.snapshot_rows(shard, upper - 1) == [
            (r, upper - 1, d) for r, _t, d in rows
        ]
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        await env.append("t", [(9,)])
        upper = store.upper(shard).elements[0]
        seen["after"] = sorted(r for r, _t, _d in store.snapshot_rows(shard, upper - 1))
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
