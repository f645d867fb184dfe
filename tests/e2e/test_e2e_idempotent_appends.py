"""Idempotent appends and indeterminate outcomes, with the controller in a process of its own.

A write the controller cannot know the outcome of is answered
``AppendOutcomeUnknown`` (FoundationDB's ``commit_unknown_result``), never a
refusal: during a read-only environment's promotion, appends the old writer
answered ``EnvironmentFenced`` were durable in the new writer's table, and a
client that trusted the refusal and retried wrote them twice. An append may
carry a request id, recorded with its rows in the same compare-and-append; a
retry with the same id gets the original outcome (its time) and is never
applied twice: here across a promotion, and after a SIGKILL of the controller
in the middle of a commit whose write had landed.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.runtime import Environment
from tidegate.runtime.storage.store import ShardStore
from tidegate.runtime.storage.urls import default_urls

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

CHILD = Path(__file__).with_name("idempotent_child.py")


def start(data: Path, *args: str) -> tuple[subprocess.Popen[str], Any]:
    log = open(data.parent / f"child-{args[0]}.log", "w")  # noqa: SIM115
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(data), *args],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    return child, log


def line(child: subprocess.Popen[str], timeout: float) -> dict[str, Any] | None:
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    text = child.stdout.readline() if ready else ""
    return json.loads(text) if text else None


async def ids_in(env: Environment) -> list[int]:
    """The ids in table ``ledger`` now, each as often as it is there (read from its shard)."""
    gid = env.resolve("ledger")
    ts = await env.freshest(gid)
    counts: dict[int, int] = {}
    for row, _t, diff in await env.driver.snapshot(gid, ts):
        counts[row[0]] = counts.get(row[0], 0) + diff
    return sorted(i for i, n in counts.items() for _ in range(n))


def test_a_retry_after_a_sigkill_mid_commit_gets_the_original_outcome(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    child, log = start(data, "stall", "7")
    acks: dict[int, int] = {}
    try:
        assert line(child, 120) == {"ready": True}, (data.parent / "child-stall.log").read_text()
        while True:
            ev = line(child, 60)
            assert ev is not None, "the child stopped before its write of req-7 landed"
            if "ack" in ev:
                acks[ev["n"]] = ev["ack"]
            if ev.get("landed") == 7:
                break
        child.send_signal(signal.SIGKILL)  # in the middle of request 7's commit
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()
    assert sorted(acks) == list(range(7))
    store = ShardStore.open(*default_urls(data))
    try:
        shard = next(s for s in store.list_shards() if s.startswith("u"))
        landed_at = store.state(shard).requests["req-7"]  # landed, never acknowledged
    finally:
        store.close()

    async def retry() -> None:
        async with Environment.open(data, replicas={}, tick_ms=None) as env:
            assert await ids_in(env) == list(range(8))
            # The unknown one: its original time, and it is not applied again.
            assert await env.append("ledger", [(7, 21)], request_id="req-7") == landed_at
            # Acknowledged ones: their own times.
            for n, ts in acks.items():
                assert await env.append("ledger", [(n, n * 3)], request_id=f"req-{n}") == ts
            # One never sent: applied, once.
            first = await env.append("ledger", [(8, 24)], request_id="req-8")
            assert await env.append("ledger", [(8, 24)], request_id="req-8") == first
            assert await ids_in(env) == list(range(9))
            # Through SQL too (the same id space).
            r = await env.execute("INSERT INTO ledger VALUES (9, 27)", request_id="req-9")
            again = await env.execute("INSERT INTO ledger VALUES (9, 27)", request_id="req-9")
            assert r.time == again.time and await ids_in(env) == list(range(10))

    anyio.run(retry)


@pytest.mark.parametrize("run", range(3))
def test_no_refusal_wrote_and_retries_apply_once_across_a_promotion(
    tmp_path: Path, run: int
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    child, log = start(data, "until-fenced")
    outcomes: dict[int, Any] = {}
    try:
        assert line(child, 120) == {"ready": True}

        async def promote() -> list[int]:
            async with Environment.open(data, replicas={}, read_only=True, tick_ms=100) as new:
                while len(outcomes) < 40 + 10 * run:  # the old writer is appending
                    ev = await anyio.to_thread.run_sync(line, child, 60)
                    assert ev is not None
                    if "ack" in ev:
                        outcomes[ev["n"]] = ev["ack"]
                await new.promote()
                while (ev := await anyio.to_thread.run_sync(line, child, 30)) is not None:
                    if "ack" in ev:
                        outcomes[ev["n"]] = ev["ack"]
                    elif "error" in ev:
                        outcomes[ev["n"]] = ev["error"]
                    elif "fenced" in ev:
                        outcomes[ev["fenced"]] = "EnvironmentFenced"
                    elif "sent" in ev:
                        outcomes.setdefault(ev["sent"], "unanswered")
                before = await ids_in(new)
                acked = {n for n, o in outcomes.items() if isinstance(o, int)}
                refused = {n for n, o in outcomes.items() if o == "EnvironmentFenced"}
                unknown = {n for n, o in outcomes.items() if o == "AppendOutcomeUnknown"}
                assert refused, outcomes
                assert set(outcomes.values()) - {
                    "EnvironmentFenced",
                    "AppendOutcomeUnknown",
                    "unanswered",
                } <= {o for o in outcomes.values() if isinstance(o, int)}
                assert acked <= set(before), "an acknowledged append was lost"
                assert not refused & set(before), "a refusal wrote"
                assert len(before) == len(set(before)), "an append is there twice"
                # Every client retries what it did not get acknowledged, with its request id.
                for n, o in sorted(outcomes.items()):
                    ts = await new.append("ledger", [(n, n * 3)], request_id=f"req-{n}")
                    if isinstance(o, int):
                        assert ts == o  # the original outcome
                after = await ids_in(new)
                assert after == sorted(outcomes), "each append applied exactly once"
                return sorted(unknown)

        anyio.run(promote)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()


def test_the_control_endpoint_takes_an_idempotency_key(tmp_path: Path) -> None:
    """``Idempotency-Key`` on ``POST /append`` and ``POST /sql``: a retry answers the first
    one's time and is not applied again; an unknown outcome is its own answer (504)."""
    import http.client
    import time as _time

    from tidegate.commands.control import ControlClient, ControllerInfo

    data = tmp_path / "data"
    up = subprocess.Popen(
        [sys.executable, "-m", "tidegate", "up", "--data-dir", str(data), "--executor", "python"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = _time.monotonic() + 120
        while not ControllerInfo.path(data).exists():
            assert up.poll() is None and _time.monotonic() < deadline
            _time.sleep(0.1)
        info = ControllerInfo.read(data)
        with ControlClient(info) as client:
            client.call("POST", "/sql", {"sql": "CREATE TABLE t (x bigint)"})

            def post(path: str, body: dict[str, Any], key: str | None) -> tuple[int, Any]:
                host, _, port = info.address.rpartition(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                headers = {"Authorization": f"Bearer {info.token}"}
                if key is not None:
                    headers["Idempotency-Key"] = key
                conn.request("POST", path, body=json.dumps(body), headers=headers)
                response = conn.getresponse()
                answer = json.loads(response.read())
                conn.close()
                return response.status, answer

            first = post("/append", {"table": "t", "rows": [[1]]}, "k1")
            again = post("/append", {"table": "t", "rows": [[1]]}, "k1")
            assert first[0] == again[0] == 200
            assert first[1]["result"]["time"] == again[1]["result"]["time"]
            s1 = post("/sql", {"sql": "INSERT INTO t VALUES (2)"}, "k2")
            s2 = post("/sql", {"sql": "INSERT INTO t VALUES (2)"}, "k2")
            assert s1[0] == s2[0] == 200 and s1[1]["result"]["time"] == s2[1]["result"]["time"]
            rows = client.call("POST", "/sql", {"sql": "SELECT x FROM t ORDER BY x"})["rows"]
            assert rows == [[1], [2]]
            # A header that disagrees with the body, or on a route that writes nothing: refused.
            status, answer = post("/append", {"table": "t", "rows": [[3]], "request_id": "x"}, "y")
            assert status == 400 and answer["error"]["type"] == "BadRequest"
            status, answer = post("/peek", {"name": "t"}, "k3")
            assert status == 400 and answer["error"]["type"] == "BadRequest"
            status, answer = post("/append", {"table": "t", "rows": [[3]]}, "\t")
            assert status == 400 and answer["error"]["type"] == "InvalidRequestId"
    finally:
        up.terminate()
        up.wait(60)
