"""An unreadable table answers peeks with an error instead of leaving them hanging.

A real replica process (managed by the environment, python executor) follows a table
whose only batch is then corrupted on disk. A new index on it must read the batch: the
replica reports the collection unreadable (a log event and a metric) and the peek
fails with a ``PeekFailed`` naming ``BlobCorrupt``, while the replica stays connected.
Once the batch is repaired, the same peek answers the rows.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import PeekFailed

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]


def _flip(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x01  # one bit, in the middle of the column data
    return bytes(bad)


@pytest.mark.parametrize("backend", ["asyncio"])
def test_a_corrupt_table_fails_peeks_and_recovers_once_repaired(
    tmp_path: Path, backend: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas=1, executor="python", tick_ms=50) as env:
                await env.wait_connected(timeout_s=60)
                await env.create_table("t", Schema.of(("x", "int64", False)))
                rows = [(i * 7919,) for i in range(3000)]  # past the inline limit: a blob
                await env.append("t", rows)
                shard_dir = tmp_path / "blob" / str(env.resolve("t"))
                originals = {
                    p: p.read_bytes()
                    for p in shard_dir.iterdir()
                    if p.suffix in (".arrow", ".parquet")
                }
                assert len(originals) == 1
                for p, data in originals.items():
                    p.write_bytes(_flip(data))
                idx = await env.create_index(env.table("t"), ["x"])
                started = time.monotonic()
                with pytest.raises(PeekFailed, match="BlobCorrupt") as e:
                    await env.peek(idx)
                assert "is unreadable" in str(e.value)
                assert time.monotonic() - started < 30  # answered, not hanging
                assert {r.replica: r.status for r in env.replicas()} == {"r1": "connected"}
                logs = "".join(p.read_text() for p in tmp_path.rglob("*.log"))
                assert "storage_unreadable" in logs and "BlobCorrupt" in logs
                for p, data in originals.items():  # repaired
                    p.write_bytes(data)
                deadline = time.monotonic() + 30
                while True:
                    try:
                        assert sorted(await env.peek(idx)) == [(r, 1) for r in rows]
                        break
                    except PeekFailed:
                        if time.monotonic() > deadline:
                            raise
                        await anyio.sleep(0.2)

    anyio.run(main, backend=backend)
