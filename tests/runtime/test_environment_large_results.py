"""Large peek answers: delivered in fragments, or refused by a configured limit.

A peek answer larger than gRPC's 4 MiB message limit used to break the
replica's stream; the controller reconnected about three times a second, for
ever, and the peek never finished. Now large messages travel as fragments
(``tidegate.runtime.wire.frames``) and ``max_result_size`` turns a too-large
answer into :class:`ResultTooLarge`. Over real gRPC to an in-process replica.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tidegate.dsl import Schema
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.controller import ResultTooLarge

pytestmark = pytest.mark.timeout(300)

ROW_BYTES = 1_000
ROWS = 52_000  # about 52 MB of answer
SCHEMA = Schema.of(("id", "int64", False), ("payload", "string", False))


def rows(n: int) -> list[tuple[int, str]]:
    return [(i, f"{i:08d}" + "x" * (ROW_BYTES - 8)) for i in range(n)]


def test_a_50_mib_answer_arrives_intact_and_a_limit_is_a_typed_error(tmp_path: Path) -> None:
    async def main() -> None:
        with replica(tmp_path) as address, anyio.fail_after(240):
            async with Environment.open(tmp_path, replicas={"r1": address}, tick_ms=None) as env:
                await env.create_table("blobs", SCHEMA)
                idx = await env.create_index(env.table("blobs"), ["id"], name="by_id")
                t = await env.append("blobs", rows(ROWS))
                answer = await env.peek(idx, t)
                assert len(answer) == ROWS
                assert sorted(answer) == [(r, 1) for r in rows(ROWS)]
                # The stream carried it: the replica never failed or reconnected.
                (info,) = env.replicas()
                assert (info.status, info.epoch, info.attempts) == ("connected", 1, 0)
            async with Environment.open(
                tmp_path, replicas={"r1": address}, tick_ms=None, max_result_size=1 << 20
            ) as env:
                await env.wait_connected(timeout_s=60)
                with pytest.raises(ResultTooLarge, match="result exceeds max size of 1048576"):
                    await env.peek("by_id", t)
                small = await env.peek("by_id", t, key=(7,))  # under the limit: answered
                assert small == [((7, rows(8)[7][1]), 1)]

    anyio.run(main)
