"""``Environment.copy_to``: a collection's contents at one time, written once as Parquet files.

Real replica processes (python executor) under the orchestrator write the
files through the shard store's Blob layer; the test reads them back with
pyarrow and compares them with a peek at the same time.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest
from retention import keep_history

from tidegate.dsl import Schema, col
from tidegate.runtime import Environment, SyncEnvironment
from tidegate.runtime.controller import CopyToFailed

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]

SCHEMA = Schema.of(("k", "int64", False), ("name", "string"), ("score", "float64"))


def read_back(directory: Path) -> Counter[tuple[Any, ...]]:
    files = sorted(directory.glob("*.parquet"))
    assert files, f"no parquet files under {directory}"
    out: Counter[tuple[Any, ...]] = Counter()
    for f in files:
        table = pq.read_table(f)
        assert table.column_names == ["k", "name", "score"]
        for row in table.to_pylist():
            out[(row["k"], row["name"], row["score"])] += 1
    return out


def expand(rows: list[tuple[tuple[Any, ...], int]]) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for row, n in rows:
        out[row] += n
    return out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_copy_to_writes_what_a_peek_at_the_same_time_sees(tmp_path: Path, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(150):
            async with Environment.open(
                tmp_path / "env", replicas=2, executor="python", tick_ms=50
            ) as env:
                await env.wait_connected(timeout_s=60)
                await env.create_table("t", SCHEMA)
                await env.append(
                    "t", [(1, "a", 1.5), (2, "b", None), (2, "b", None), (3, None, 0.0)]
                )
                # Retractions: one of the two (2, "b") rows, and (3, None) entirely.
                await env.append(
                    "t", [((2, "b", None), -1), ((3, None, 0.0), -1), ((4, "d", 4.0), 1)]
                )
                await keep_history(env, "t")  # copied, then peeked, at one remembered time
                at = await env.freshest("t")
                out = tmp_path / "out"
                written = await env.copy_to("t", f"file://{out}", at=at)
                peeked = await env.peek("t", at)
                assert written == sum(n for _, n in peeked) == 3
                assert read_back(out) == expand(peeked)
                # A later change is not in the copy; a copy of an index at a later time has it.
                await env.append("t", [(5, "e", 5.0)])
                assert read_back(out) == expand(peeked)
                idx = await env.create_index(env.table("t").filter(col("k") > 1), ["k"])
                await keep_history(env, idx)
                later = await env.freshest(idx)
                out2 = tmp_path / "out2"
                assert await env.copy_to(idx, f"file://{out2}", at=later) == 3
                assert read_back(out2) == expand(await env.peek(idx, later))
                # The copy-tos were dropped once answered: nothing of them stays installed.
                instance = env.driver.ctl.compute.instance("default")
                assert instance.active_copy_tos() == []
                assert [c.id for c in instance.collections() if c.id.is_transient] == []

    anyio.run(main, backend=backend)


def test_a_url_that_cannot_be_written_is_a_typed_error(tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(150):
            async with Environment.open(
                tmp_path / "env", replicas=1, executor="python", tick_ms=50
            ) as env:
                await env.wait_connected(timeout_s=60)
                await env.create_table("t", SCHEMA)
                await env.append("t", [(1, "a", 1.0)])
                blocker = tmp_path / "a-file"
                blocker.write_text("not a directory")
                url = f"file://{blocker}/out"
                with pytest.raises(CopyToFailed) as e:
                    await env.copy_to("t", url)
                assert e.value.url == url
                assert "not writable" in e.value.message
                with pytest.raises(CopyToFailed, match="unsupported URL scheme"):
                    await env.copy_to("t", "ftp://example.com/out")
                # The environment goes on: a good URL works after a bad one.
                assert await env.copy_to("t", f"file://{tmp_path / 'good'}") == 1

    anyio.run(main)


def test_the_sync_environment_copies_too(tmp_path: Path) -> None:
    with SyncEnvironment.open(tmp_path / "env", replicas=1, executor="python", tick_ms=50) as env:
        env.wait_connected(timeout_s=60)
        env.create_table("t", SCHEMA)
        env.append("t", [(1, "a", 1.0), (2, "b", 2.0)])
        assert env.copy_to("t", f"file://{tmp_path / 'out'}") == 2
        assert read_back(tmp_path / "out") == Counter({(1, "a", 1.0): 1, (2, "b", 2.0): 1})


def test_copy_to_an_s3_url_writes_the_objects_there(tmp_path: Path, s3_endpoint: str) -> None:
    """``s3://bucket/prefix`` through the Blob layer (moto's S3 server; the replica process
    inherits the test's credentials), read back with boto3 and pyarrow."""
    import io

    import boto3

    url = f"s3://tidegate/copies/run1?endpoint={s3_endpoint}&region=us-east-1"
    with SyncEnvironment.open(tmp_path / "env", replicas=1, executor="python", tick_ms=50) as env:
        env.wait_connected(timeout_s=60)
        env.create_table("t", SCHEMA)
        env.append("t", [(1, "a", 1.0), (2, None, 2.5), (2, None, 2.5)])
        assert env.copy_to("t", url) == 3
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket="tidegate", Prefix="copies/run1/")["Contents"]
    ]
    assert keys and all(k.endswith(".parquet") for k in keys)
    got: Counter[tuple[Any, ...]] = Counter()
    for key in keys:
        body = s3.get_object(Bucket="tidegate", Key=key)["Body"].read()
        for row in pq.read_table(io.BytesIO(body)).to_pylist():
            got[(row["k"], row["name"], row["score"])] += 1
    assert got == Counter({(1, "a", 1.0): 1, (2, None, 2.5): 2})
