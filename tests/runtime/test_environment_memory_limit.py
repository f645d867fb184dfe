"""A replica over its memory limit fails the dataflow holding the most state, not itself.

A real managed replica (Python executor) with ``replica_memory_limit``: an index
whose state grows past the limit is failed -- its peeks answer the error, typed --
while a small index on the same replica keeps answering, the replica stays
connected, and its log and metrics say what happened.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import PeekFailed
from tidegate.spec.compute_replica import MEMORY_LIMIT_EXCEEDED

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

ROWS = Schema.of(("id", "int64", False), ("label", "string", False))


def _replica_rss(data_dir: Path) -> int:
    (pidfile,) = (data_dir / "replicas").glob("*.pid")
    pid = int(pidfile.read_text())
    return int(psutil.Process(pid).memory_info().rss)


def test_the_dataflow_holding_the_most_state_fails_and_the_replica_serves_on(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        with anyio.fail_after(240):
            # Measure an idle replica first: the limit is that plus 120 MB.
            async with Environment.open(tmp_path / "probe", replicas=1, executor="python") as env:
                await env.wait_connected(timeout_s=60)
                idle = _replica_rss(tmp_path / "probe")
            limit = idle + 120 * 2**20
            data = tmp_path / "data"
            async with Environment.open(
                data, replicas=1, executor="python", replica_memory_limit=limit
            ) as env:
                await env.wait_connected(timeout_s=60)
                await env.create_table("small", ROWS)
                await env.create_table("big", ROWS)
                await env.append("small", [(1, "one"), (2, "two")])
                small = await env.create_index("small", ["id"], name="small_by_id")
                big = await env.create_index("big", ["id"], name="big_by_id")
                assert sorted(await env.peek(small)) == [((1, "one"), 1), ((2, "two"), 1)]
                failed = None
                for batch in range(60):  # about 600 bytes of state per row: enough in ~1M rows
                    rows = [(batch * 20_000 + i, f"label-{i:08d}" * 4) for i in range(20_000)]
                    await env.append("big", rows)
                    try:
                        await env.peek(big, key=(batch * 20_000,))
                    except PeekFailed as e:
                        failed = e
                        break
                assert failed is not None, "the big index never hit the limit"
                assert MEMORY_LIMIT_EXCEEDED in str(failed) and "big_by_id" not in str(failed)
                assert str(big) in str(failed)
                with pytest.raises(PeekFailed, match="memory limit"):  # it stays failed
                    await env.peek(big)
                await env.append("small", [(3, "three")])
                assert len(await env.peek(small)) == 3  # the small index serves on
                assert {r.replica: r.status for r in env.replicas()} == {"r1": "connected"}
            log = "".join(p.read_text() for p in (data / "replicas").glob("*.log"))
            assert "memory_limit_exceeded" in log

    anyio.run(main)
