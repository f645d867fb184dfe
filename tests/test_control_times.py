"""Times in control requests: a JSON integer in [0, 2^63) or a typed 400, never a 500 or a
silently truncated time (``POST /peek``, ``/copy-to`` and ``/subscribe`` alike)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.commands.control import Refusal
from tidegate.commands.service import ControlService
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment

pytestmark = pytest.mark.timeout(180)

BAD_TIMES: list[Any] = [1.5, math.nan, math.inf, "abc", "5", [1], {"t": 1}, True, -1, 2**63]


def test_bad_times_are_refused_typed_and_good_ones_answer(tmp_path: Path) -> None:
    async def go() -> None:
        with in_process_replica(tmp_path) as r, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r}, tick_ms=None) as env:
                await env.wait_connected(timeout_s=60)
                await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
                service = ControlService(env, clock_ms=lambda: 1_000)
                requests = {
                    "/peek": {"name": "t"},
                    "/copy-to": {"name": "t", "url": (tmp_path / "out").as_uri()},
                    "/subscribe": {"name": "t"},
                }
                for path, body in requests.items():
                    field = "as_of" if path == "/subscribe" else "at"
                    for bad in BAD_TIMES:
                        with pytest.raises(Refusal) as info:
                            await service.handle("POST", path, {**body, field: bad})
                        refusal = info.value
                        assert (refusal.status, refusal.type) == (400, "BadRequest"), (path, bad)
                        assert f"{field} must be a time in milliseconds" in refusal.message
                at = await env.freshest("t")
                answer = await service.handle("POST", "/peek", {"name": "t", "at": at})
                assert answer["rows"] == [[[1], 1]] and answer["time"] == at

    anyio.run(go)


def test_subscribe_bounds_are_checked_and_a_bounded_one_ends(tmp_path: Path) -> None:
    """``POST /subscribe`` with ``up_to`` and ``snapshot`` (``tidegate subscribe --up-to
    --no-snapshot``): bad values are typed 400s, ``up_to`` before the as_of is
    ``AbsurdSubscribeBounds``, and a bounded subscribe's stream ends by itself."""

    async def go() -> None:
        with in_process_replica(tmp_path) as r, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r}, tick_ms=None) as env:
                await env.wait_connected(timeout_s=60)
                await env.execute("CREATE TABLE t (a BIGINT)")
                await env.execute("ALTER TABLE t SET (RETAIN HISTORY FOR '10m')")
                t1 = (await env.execute("INSERT INTO t VALUES (1)")).time
                t2 = (await env.execute("INSERT INTO t VALUES (2)")).time
                service = ControlService(env, clock_ms=lambda: 1_000)
                for body in ({"up_to": 1.5}, {"up_to": -1}, {"snapshot": "no"}):
                    with pytest.raises(Refusal) as info:
                        await service.handle("POST", "/subscribe", {"name": "t", **body})
                    assert (info.value.status, info.value.type) == (400, "BadRequest"), body
                with pytest.raises(Refusal) as info:
                    await service.handle(
                        "POST", "/subscribe", {"name": "t", "as_of": t2, "up_to": t1}
                    )
                assert (info.value.status, info.value.type) == (400, "AbsurdSubscribeBounds")
                stream = await service.handle(
                    "POST",
                    "/subscribe",
                    {"name": "t", "as_of": t1, "up_to": t2 + 1, "snapshot": False},
                )
                try:
                    lines = [line async for line in stream.items]
                finally:
                    await stream.aclose()
                assert lines[0]["as_of"] == t1
                updates = [
                    (u["time"], u["row"], u["diff"]) for x in lines[1:] for u in x["updates"]
                ]
                assert updates == [(t2, [2], 1)]
                assert lines[-1]["upper"] == [] and "error" not in lines[-1]

    anyio.run(go)
