"""Unit laws of the simulator tools that need no simulation: seeds, shrinking, the PNG writer, trace parsing."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.sim.campaign import CampaignReport, SeedOutcome, fired_kinds, parse_seeds
from tidegate.sim.faults import Fault, FaultKind, FaultPlan
from tidegate.sim.mutants import MUTANTS, mutant_names
from tidegate.sim.plot import _CLOSED, Canvas, _frontier, render, summarise
from tidegate.sim.scenario import small
from tidegate.sim.shrink import NotFailing, describe, shrink

# -- seeds --------------------------------------------------------------------------------


def test_parse_seeds_ranges_are_inclusive() -> None:
    assert parse_seeds("3..7") == range(3, 8)
    assert parse_seeds("5") == range(5, 6)


@pytest.mark.parametrize("bad", ["", "a..b", "7..3", "-1..2", "1..", "x"])
def test_parse_seeds_rejects_bad_ranges(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_seeds(bad)


def test_fired_kinds_matches_plain_and_prefixed_counter_names() -> None:
    counters = {"crash_replica": 2, "fault:cut_connection": 1, "fault.slow_replica": 0, "other": 5}
    assert fired_kinds(counters) == {"crash_replica", "cut_connection"}


def test_report_lists_enabled_kinds_that_never_fired() -> None:
    outcomes = [
        SeedOutcome(1, True, sometimes={"crash_replica": 1}, enabled=("crash_replica",), faults=1),
        SeedOutcome(2, False, "p", "m", enabled=("slow_replica", "crash_replica"), faults=2),
    ]
    report = CampaignReport("small", None, 1, outcomes, 0.5)
    assert report.never_fired() == ["slow_replica"]
    assert report.failing_seeds == [2]
    table = report.table()
    assert "failed     1" in table and "seed 2: p at 0ms: m" in table
    assert "enabled but never fired: slow_replica" in table


# -- shrinking (against a pure stand-in for the simulator) ------------------------------------


@dataclass
class _Options:
    seed: int
    scenario: Any
    plan: FaultPlan | None = None
    mutant: str | None = None


@dataclass
class _Violation:
    property: str
    message: str = "broken"
    at_ms: int = 0


@dataclass
class _Result:
    plan: FaultPlan
    violation: _Violation | None
    ok: bool = field(init=False)

    def __post_init__(self) -> None:
        self.ok = self.violation is None


def _plan(n: int) -> FaultPlan:
    faults = tuple(
        Fault(100 * i, FaultKind.CRASH_REPLICA, f"r{i % 2 + 1}", 80 + i) for i in range(n)
    )
    return FaultPlan(faults, (FaultKind.CRASH_REPLICA,))


def _runner(culprits: set[int], property: str = "p") -> Any:
    """Fails (with ``property``) iff every culprit fault (by its at_ms) is in the plan."""

    def run(options: _Options) -> _Result:
        assert options.plan is not None
        present = {f.at_ms // 100 for f in options.plan.faults}
        return _Result(options.plan, _Violation(property) if culprits <= present else None)

    return run


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_shrink_finds_exactly_the_culprit_faults(case: tuple[int, set[int]]) -> None:
    n, culprits = case
    options = _Options(7, small(), _plan(n))
    result = shrink(options, run=_runner(culprits), workload=False, max_runs=500)
    assert {f.at_ms // 100 for f in result.plan.faults} == culprits
    assert result.result.violation.property == "p"
    assert result.options.seed == 7


def test_shrink_keeps_the_same_broken_property() -> None:
    calls = []

    def run(options: _Options) -> _Result:
        assert options.plan is not None
        calls.append(len(options.plan.faults))
        # Fewer than 3 faults still fails, but with a different property: not a reproducer.
        prop = "p" if len(options.plan.faults) >= 3 else "q"
        return _Result(options.plan, _Violation(prop))

    result = shrink(_Options(1, small(), _plan(5)), run=run, workload=False)
    assert len(result.plan.faults) == 3


def test_shrink_shortens_fault_durations_and_the_workload() -> None:
    def run(options: _Options) -> _Result:
        assert options.plan is not None
        fails = any(f.duration_ms >= 20 for f in options.plan.faults)
        return _Result(options.plan, _Violation("p") if fails else None)

    result = shrink(_Options(1, small(), _plan(3)), run=run, max_runs=300)
    assert len(result.plan.faults) == 1
    assert 20 <= result.plan.faults[0].duration_ms < 40
    assert result.scenario.duration_ms < small().duration_ms
    assert result.scenario.replicas == 1
    text = describe(result)
    assert "faults: 1 (was 3)" in text and "broken property: p" in text


def test_shrink_respects_its_run_budget() -> None:
    runs = []

    def run(options: _Options) -> _Result:
        runs.append(1)
        assert options.plan is not None
        return _Result(options.plan, _Violation("p"))

    shrink(_Options(1, small(), _plan(10)), run=run, max_runs=5)
    assert len(runs) == 1 + 5


def test_shrink_refuses_a_passing_run() -> None:
    with pytest.raises(NotFailing):
        shrink(_Options(1, small(), _plan(2)), run=_runner({99}))


# -- mutants ------------------------------------------------------------------------------


def test_there_are_at_least_eight_mutants_with_descriptions() -> None:
    assert len(MUTANTS) >= 8
    assert mutant_names() == list(MUTANTS)
    for m in MUTANTS.values():
        assert m.description and m.name


@pytest.mark.parametrize("name", mutant_names())
def test_a_mutant_patch_is_undone_when_its_block_ends(name: str) -> None:
    from tidegate.sim import clients, storage
    from tidegate.sim import replica as sim_replica
    from tidegate.spec import history
    from tidegate.spec.compute import instance
    from tidegate.spec.compute_replica import replica

    def snapshot() -> dict[str, Any]:
        owners = [
            instance.Instance,
            replica.ComputeReplica,
            history,
            storage,
            sim_replica.SimReplica,
            clients.Clients,
        ]
        return {f"{id(o)}.{k}": v for o in owners for k, v in vars(o).items()}

    before = snapshot()
    with MUTANTS[name].patch():
        assert snapshot() != before
    assert snapshot() == before


# -- the picture --------------------------------------------------------------------------


def _decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + body)
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    return width, height, [raw[y * stride + 1 : (y + 1) * stride] for y in range(height)]


def test_png_has_the_canvas_size_and_its_shapes() -> None:
    c = Canvas(40, 20, background=(255, 255, 255))
    c.rect(5, 5, 10, 10, (255, 0, 0))
    c.line(0, 19, 39, 19, (0, 0, 255))
    c.circle(30, 8, 3, (0, 128, 0))
    c.text(100, 100, "off canvas is clipped")
    w, h, rows = _decode_png(c.png())
    assert (w, h) == (40, 20)

    def px(x: int, y: int) -> tuple[int, ...]:
        return tuple(rows[y][3 * x : 3 * x + 3])

    assert px(7, 7) == (255, 0, 0)
    assert px(20, 19) == (0, 0, 255)
    assert px(30, 8) == (0, 128, 0)
    assert px(1, 1) == (255, 255, 255)
    assert "<svg" in c.svg() and 'fill="rgb(255,0,0)"' in c.svg()


def test_frontiers_are_read_from_their_canonical_renderings() -> None:
    assert _frontier("Antichain([5])") == 5
    assert _frontier("Antichain([])") == _CLOSED
    assert _frontier([3]) == 3
    assert _frontier([]) == _CLOSED
    assert _frontier(7) == 7
    assert _frontier("r1") is None
    assert _frontier(True) is None


def test_summary_has_lanes_for_replicas_collections_faults_and_peeks() -> None:
    lines = [
        '{"t":10,"k":"frontier","id":"u5","replica":"r1","write":"Antichain([3])"}',
        '{"t":20,"k":"frontier_upper","id":"u5","upper":"Antichain([4])"}',
        '{"t":30,"k":"peek_result","id":"u5","timestamp":3,"result":"rows"}',
        '{"t":40,"k":"replica_crash","replica":"r2"}',
        "not json",
    ]
    plan = FaultPlan((Fault(5, FaultKind.CUT_CONNECTION, "r1", 50),)).to_json()
    s = summarise(lines, plan, "t")
    assert sorted(s.replicas) == ["r1", "r2"]
    assert s.series["u5"] == {"r1 write": [(10, 3)], "controller upper": [(20, 4)]}
    assert s.peeks["u5"] == [(30, 3, "answered", lines[2])]
    assert s.faults == [("r1", 5, 55, "cut_connection")]
    assert s.end_ms == 55
    svg = render(s).svg()
    assert "collection u5" in svg and "replica r2" in svg


def test_plan_and_scenario_stay_replaceable() -> None:
    # The shrinker rebuilds options with dataclasses.replace; the plan keeps its enabled kinds.
    plan = _plan(3)
    options = replace(_Options(1, small(), plan), plan=plan.without(0))
    assert options.plan is not None and options.plan.enabled == plan.enabled
