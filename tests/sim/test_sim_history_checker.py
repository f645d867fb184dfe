"""The client history and its offline checker; the online checkers catch a broken replica."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator

import pytest

from tidegate.sim import ClientHistory, RunOptions, RunResult, check_history, run_simulation, small
from tidegate.spec.compute_replica import ComputeReplica, Respond
from tidegate.spec.protocol.responses import PeekResponse, PeekRows

SCENARIO = dataclasses.replace(small(), duration_ms=4_000, quiet_ms=2_000)


@pytest.fixture(scope="module")
def run() -> RunResult:
    r = run_simulation(RunOptions(seed=7, scenario=SCENARIO))
    assert r.ok, r.summary()
    return r


def _peeks_with_rows(h: ClientHistory) -> list[dict]:  # type: ignore[type-arg]
    return [
        e
        for e in h.events
        if e["op"] == "peek" and "rows" in e.get("result", {}) and e["result"]["rows"]
    ]


def test_the_history_is_json_and_round_trips(run: RunResult) -> None:
    data = json.loads(json.dumps(run.history.to_json()))
    again = ClientHistory.from_json(data)
    assert again.events == run.history.events
    assert check_history(again, SCENARIO) == []
    ops = {e["op"] for e in again.events}
    assert {"append", "install", "peek", "subscribe"} <= ops


def test_a_doctored_peek_answer_is_caught(run: RunResult) -> None:
    h = ClientHistory.from_json(copy.deepcopy(run.history.to_json()))
    victim = _peeks_with_rows(h)[0]
    victim["result"]["rows"][0][1] += 1
    found = check_history(h, SCENARIO)
    assert [v.property for v in found] == ["peek_matches_reference"]
    assert victim["id"] in found[0].message


def test_a_gap_in_a_subscribe_stream_is_caught(run: RunResult) -> None:
    h = ClientHistory.from_json(copy.deepcopy(run.history.to_json()))
    batches = [i for i, e in enumerate(h.events) if e["op"] == "subscribe"]
    del h.events[batches[len(batches) // 2]]
    assert "subscribe_gap_free" in {v.property for v in check_history(h, SCENARIO)}


def test_a_lost_subscribe_update_is_caught(run: RunResult) -> None:
    h = ClientHistory.from_json(copy.deepcopy(run.history.to_json()))
    with_updates = [e for e in h.events if e["op"] == "subscribe" and e["updates"]]
    with_updates[-1]["updates"].pop()
    assert "subscribe_matches_reference" in {v.property for v in check_history(h, SCENARIO)}


def test_an_unacknowledged_append_changes_the_reference(run: RunResult) -> None:
    h = ClientHistory.from_json(copy.deepcopy(run.history.to_json()))
    for e in h.events:
        if e["op"] == "append" and e["updates"]:
            e["status"] = "failed"  # as if the write never happened
    assert check_history(h, SCENARIO)


@pytest.fixture
def replica_drops_a_row() -> Iterator[None]:
    original = ComputeReplica._answer

    def wrong(self, pending, result):  # type: ignore[no-untyped-def]
        out = original(self, pending, result)
        r = out.response
        if isinstance(r, PeekResponse) and isinstance(r.result, PeekRows) and r.result.rows:
            return Respond(PeekResponse(r.uuid, PeekRows(r.result.rows[1:])))
        return out

    ComputeReplica._answer = wrong  # type: ignore[method-assign]
    try:
        yield
    finally:
        ComputeReplica._answer = original  # type: ignore[method-assign]


def test_the_online_checker_stops_a_run_at_a_wrong_answer(replica_drops_a_row: None) -> None:
    r = run_simulation(RunOptions(seed=7, scenario=SCENARIO))
    assert not r.ok and r.violation is not None
    assert r.violation.property == "peek_matches_reference"
    assert r.trace_tail[-1].startswith('{"k":"violation"')
    assert r.stats.virtual_ms < SCENARIO.duration_ms + SCENARIO.quiet_ms
