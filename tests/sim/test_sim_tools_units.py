"""Unit laws of the simulator tools that need no simulation: seeds, campaign reports, plans,
shrinking (against a pure stand-in for the simulator), mutant patches, file names, what
a campaign counts (the pictures' tests are in ``test_sim_plot.py``)."""

from __future__ import annotations

import gc
import importlib
import json
import multiprocessing
import os
import pkgutil
import sys
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.sim.campaign import (
    CampaignReport,
    SeedOutcome,
    _import_time_lines,
    _pool,
    fired_kinds,
    parse_seeds,
    rerun_command,
)
from tidegate.sim.choices import stream
from tidegate.sim.cli import _shrunk_path
from tidegate.sim.coverage import merge_reports, render_report
from tidegate.sim.faults import Action, Fault, FaultKind, FaultPlan, FaultPlanError
from tidegate.sim.mutants import MUTANTS, mutant_names
from tidegate.sim.plot import plot_paths
from tidegate.sim.replay import ReplayError, load_replayable
from tidegate.sim.scenario import Scenario, small
from tidegate.sim.shrink import NotFailing, describe, min_quiet_ms, replay_command, shrink

# -- seeds and campaign reports -------------------------------------------------------------


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


def test_report_lists_enabled_kinds_that_never_fired_and_how_to_rerun_each_failure() -> None:
    outcomes = [
        SeedOutcome(1, True, sometimes={"crash_replica": 1}, enabled=("crash_replica",), faults=1),
        SeedOutcome(2, False, "p", "m", enabled=("slow_replica", "crash_replica"), faults=2),
        SeedOutcome(3, False, "q", "n", at_ms=70),
    ]
    report = CampaignReport("small", "peek_before_upper", 1, outcomes, 0.5, "small --replicas 3")
    assert report.never_fired() == ["slow_replica"]
    assert report.failing_seeds == [2, 3]
    lines = report.table().splitlines()
    assert "failed     2" in lines and "enabled but never fired: slow_replica" in lines
    for seed, line in ((2, "  seed 2: p at 0ms: m"), (3, "  seed 3: q at 70ms: n")):
        command = lines[lines.index(line) + 1].strip()
        assert command == rerun_command(seed, "small --replicas 3", "peek_before_upper")
        assert command == (
            f"tidegate sim run --seed {seed} --scenario small --replicas 3 "
            "--mutant peek_before_upper"
        )


def test_a_rerun_command_names_seed_scenario_and_mutant() -> None:
    assert rerun_command(4, "small") == "tidegate sim run --seed 4 --scenario small"
    assert (
        rerun_command(4, "s.json", "m") == "tidegate sim run --seed 4 --scenario s.json --mutant m"
    )


def test_failing_traces_are_saved_under_their_seed(tmp_path: Path) -> None:
    trace = {"seed": 2, "plan": FaultPlan().to_json(), "scenario": small().to_json()}
    outcomes = [SeedOutcome(1, True), SeedOutcome(2, False, "p", trace=trace)]
    report = CampaignReport("small", None, 1, outcomes, 0.1)
    assert report.save_failures(tmp_path / "out") == [tmp_path / "out" / "seed-2.json"]
    assert json.loads((tmp_path / "out" / "seed-2.json").read_text()) == trace


def test_a_run_s_knobs_are_drawn_from_its_seed_saved_and_replayed(tmp_path: Path) -> None:
    """A seed sets the production knobs from a stream of its own (each setting is reached
    by some seeds); a saved run replays with the knobs it had, given or drawn."""
    from tidegate.sim.knobs import FRAME_SIZES, SHARD_POLICIES, Knobs, draw_knobs
    from tidegate.sim.replay import replay, save_result
    from tidegate.sim.run import RunOptions, run_simulation

    knobs = [draw_knobs(stream(seed, "knobs")) for seed in range(20)]
    assert {k.shard_policy_name for k in knobs} == {name for name, _ in SHARD_POLICIES}
    assert {k.frame_size_name for k in knobs} == {name for name, _ in FRAME_SIZES}
    scenario = replace(small(), duration_ms=1_500, quiet_ms=1_000)
    options = RunOptions(seed=3, scenario=scenario, knobs=Knobs("blob_merges", "frames_128"))
    result = run_simulation(options)
    assert result.expanded_options["knobs"] == {
        "shard_policy": "blob_merges",
        "frame_size": "frames_128",
    }
    # Small frames: the plans of CreateDataflow travel as fragments, and arrive whole.
    assert result.ok and result.sometimes["wire_fragmented_message"] > 0
    save_result(result, tmp_path / "run.json", options)
    again = load_replayable(tmp_path / "run.json")
    assert again.knobs == Knobs("blob_merges", "frames_128")
    assert replay(again).matches
    with pytest.raises(ValueError, match="unknown shard policy"):
        Knobs("fastest")
    with pytest.raises(ValueError, match="unknown frame size"):
        Knobs("inline_merges", "huge")
    # A file from before the frame-size knob replays with the product's frame size.
    assert Knobs.from_json({"shard_policy": "blob_merges"}).max_frame_bytes is None


def test_rule_reports_add_up_and_render_what_was_never_reached() -> None:
    merged = merge_reports(
        [{"errors": {"A": 1, "B": 0}}, {"errors": {"A": 2, "C": 0}, "effects": {"E": 1}}]
    )
    assert merged == {"effects": {"E": 1}, "errors": {"A": 3, "B": 0, "C": 0}}
    text = render_report(merged)
    assert "errors: 1 of 3 reached" in text and "never:   B, C" in text


def test_import_time_lines_are_module_and_class_bodies_and_function_headers(
    tmp_path: Path,
) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "\n".join(
            [
                "import os",  # 1
                "from typing import TYPE_CHECKING",  # 2
                "if TYPE_CHECKING:",  # 3
                "    import json",  # 4
                "X = (",  # 5
                "    1,",  # 6
                ")",  # 7
                "@staticmethod",  # 8
                "def f(a):",  # 9
                "    return a",  # 10
                "class C:",  # 11
                "    y = 2",  # 12
                "    def g(self):",  # 13
                "        return 3",  # 14
                "try:",  # 15
                "    Z = 1",  # 16
                "except ImportError:",  # 17
                "    Z = 2",  # 18
            ]
        )
    )
    assert _import_time_lines(str(source)) == {1, 2, 3, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 18}
    assert _import_time_lines(str(tmp_path / "missing.py")) == set()


@pytest.mark.processes
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_forked_campaign_workers_never_finalize_the_parents_objects(tmp_path: Path) -> None:
    """Garbage of the campaign's process is collected there before the workers fork, and its
    live objects are frozen in them: a worker's collections leave the parent's objects alone
    (finalizing, say, a leftover gRPC call in a worker waits for threads it does not have)."""

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            (tmp_path / f"finalized-in-{os.getpid()}").touch()

    gc.disable()  # keep the garbage until the pool is made
    try:
        Cycle()
        with _pool(multiprocessing.get_context("fork"), 1) as pool:
            assert pool.apply(gc.get_freeze_count) > 0
            pool.apply(gc.collect)
    finally:
        gc.enable()
    assert [p.name for p in tmp_path.iterdir()] == [f"finalized-in-{os.getpid()}"]


# -- plans ------------------------------------------------------------------------------------


def _faults(n: int) -> tuple[Fault, ...]:
    return tuple(Fault(100 * i, FaultKind.CRASH_REPLICA, f"r{i % 2 + 1}", 80 + i) for i in range(n))


def _actions(n: int, at: int = 10) -> tuple[Action, ...]:
    return tuple(Action(at + 100 * i, "append", {"table": "u1", "n": i}) for i in range(n))


def test_a_plan_with_actions_round_trips_and_counts_its_steps() -> None:
    plan = FaultPlan(_faults(2), (FaultKind.CRASH_REPLICA,), _actions(3))
    assert plan.steps == 5
    assert FaultPlan.loads(plan.dumps()) == plan
    assert plan.without(0).actions == plan.actions and plan.without(0).steps == 4
    assert FaultPlan(_faults(2)).steps == 2  # actions not known yet: generated from the seed
    assert _actions(1)[0].text() == 'append@10ms table="u1" n=0'


def test_a_version_one_plan_has_generated_actions_and_actions_must_be_in_time_order() -> None:
    old = FaultPlan.loads('{"version": 1, "faults": [], "enabled": ["crash_replica"]}')
    assert old.actions is None and old.enabled == (FaultKind.CRASH_REPLICA,)
    with pytest.raises(FaultPlanError, match="time order"):
        FaultPlan(actions=(Action(20, "append"), Action(10, "peek")))
    with pytest.raises(FaultPlanError, match="bad action record"):
        FaultPlan.loads('{"version": 2, "faults": [], "actions": [{"kind": "append"}]}')


# -- shrinking, against a pure stand-in for the simulator -------------------------------------


@dataclass
class _Options:
    seed: int
    scenario: Scenario
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


Verdict = Callable[[FaultPlan, Scenario], "str | None"]


def _fake(
    verdict: Verdict,
    generated: FaultPlan | None = None,
    at_ms: int | None = None,
    log: list[FaultPlan] | None = None,
) -> Callable[[_Options], _Result]:
    """A stand-in for ``run_simulation``: ``verdict`` judges the plan (a broken property or
    ``None``), the plan as run has its actions filled in (from ``generated`` when the options
    leave them to the seed) minus those marked ``noop``, and a violation happens at ``at_ms``
    (default: the end of the run, as a liveness violation does)."""
    default = generated or FaultPlan()

    def run(options: _Options) -> _Result:
        plan = options.plan or default
        if plan.actions is None:
            plan = replace(plan, actions=default.actions or ())
        plan = replace(plan, actions=tuple(a for a in plan.actions or () if not a.args.get("noop")))
        if log is not None:
            log.append(plan)
        prop = verdict(plan, options.scenario)
        when = options.scenario.duration_ms if at_ms is None else at_ms
        return _Result(plan, None if prop is None else _Violation(prop, at_ms=when))

    return run


def _needs(faults: Set[int] = frozenset(), actions: Set[int] = frozenset()) -> Verdict:
    """Fails (property ``p``) iff every culprit fault (by ``at_ms // 100``) and action (by ``n``) is there."""

    def verdict(plan: FaultPlan, _sc: Scenario) -> str | None:
        have_f = {f.at_ms // 100 for f in plan.faults}
        have_a = {a.args["n"] for a in plan.actions or ()}
        return "p" if faults <= have_f and actions <= have_a else None

    return verdict


def _culprits(n: int) -> st.SearchStrategy[tuple[int, set[int]]]:
    return st.tuples(st.just(n), st.sets(st.integers(0, n - 1)) if n else st.just(set()))


@given(st.integers(1, 12).flatmap(_culprits))
def test_ddmin_over_faults_finds_exactly_the_culprit_faults(case: tuple[int, set[int]]) -> None:
    n, culprits = case
    options = _Options(7, small(), FaultPlan(_faults(n), (FaultKind.CRASH_REPLICA,), _actions(4)))
    result = shrink(options, run=_fake(_needs(faults=culprits)), workload=False, max_runs=500)
    assert {f.at_ms // 100 for f in result.plan.faults} == culprits
    assert result.plan.actions == _actions(4)  # workload=False keeps the client actions
    assert result.violation.property == "p" and result.options.seed == 7
    assert result.original_steps == n + 4 and result.size == len(culprits) + 4


@given(st.integers(1, 16).flatmap(_culprits), st.integers(0, 5).flatmap(_culprits))
def test_ddmin_over_actions_and_faults_finds_exactly_the_culprits(
    actions: tuple[int, set[int]], faults: tuple[int, set[int]]
) -> None:
    (m, bad_actions), (n, bad_faults) = actions, faults
    plan = FaultPlan(_faults(n), (FaultKind.CRASH_REPLICA,), _actions(m))
    run = _fake(_needs(bad_faults, bad_actions))
    result = shrink(_Options(3, small(), plan), run=run, max_runs=1_000)
    assert {a.args["n"] for a in result.plan.actions or ()} == bad_actions
    assert {f.at_ms // 100 for f in result.plan.faults} == bad_faults
    assert result.size == len(bad_actions) + len(bad_faults) <= result.original_steps


def test_a_generated_plan_is_made_explicit_and_shrinks_as_run() -> None:
    """Options without a plan (a seed) shrink the plan the run reports, client actions included;
    actions the run did not perform (no-ops) are not part of it."""
    noop = Action(15, "peek", {"n": 99, "noop": True})
    generated = FaultPlan(_faults(3), (FaultKind.CRASH_REPLICA,), (noop, *_actions(5, at=20)))
    result = shrink(
        _Options(5, small()), run=_fake(_needs({1}, {2}), generated), workload=False, max_runs=50
    )
    assert result.original_steps == 3 + 5  # the no-op is not in the plan as run
    assert [f.at_ms for f in result.plan.faults] == [100]
    assert result.plan.actions == _actions(5, at=20)


def test_what_follows_a_safety_violation_goes_first() -> None:
    plan = FaultPlan(_faults(8), (FaultKind.CRASH_REPLICA,), _actions(8))
    run = _fake(_needs({3}), at_ms=350)
    result = shrink(_Options(1, small(), plan), run=run, workload=False, max_runs=3)
    assert result.steps[:2] == [
        "removed 4 fault(s) and 4 action(s) after the violation at 350ms",
        "duration_ms 8000 -> 400 (just past the violation)",
    ]
    assert all(f.at_ms <= 350 for f in result.plan.faults)
    assert all(a.at_ms <= 350 for a in result.plan.actions or ())
    assert result.scenario.duration_ms == 400


def test_shrink_keeps_the_same_broken_property() -> None:
    def verdict(plan: FaultPlan, _sc: Scenario) -> str:
        # Fewer than 3 faults still fails, but with another property: not a reproducer.
        return "p" if len(plan.faults) >= 3 else "q"

    result = shrink(_Options(1, small(), FaultPlan(_faults(5))), run=_fake(verdict), workload=False)
    assert len(result.plan.faults) == 3 and result.violation.property == "p"


def test_shrink_shortens_faults_and_the_scenario_but_keeps_a_quiet_phase_past_reconnection() -> (
    None
):
    def verdict(plan: FaultPlan, _sc: Scenario) -> str | None:
        return "p" if any(f.duration_ms >= 20 for f in plan.faults) else None

    scenario = replace(small(), quiet_ms=40_000)
    result = shrink(_Options(1, scenario, FaultPlan(_faults(3))), run=_fake(verdict), max_runs=300)
    assert len(result.plan.faults) == 1
    assert 20 <= result.plan.faults[0].duration_ms < 40
    assert result.scenario.replicas == 1 and result.scenario.dataflows == ()
    # Halved while it still fails, but never below the runtime's longest reconnect backoff.
    assert result.scenario.quiet_ms == min_quiet_ms() == 6_000
    text = describe(result)
    assert "size: 1 steps (was 3): 1 fault(s) (was 3), 0 client action(s)" in text
    assert "broken property: p" in text and "quiet_ms 40000 -> 20000" in text


def test_shrink_respects_its_run_budget() -> None:
    runs: list[FaultPlan] = []
    run = _fake(lambda _p, _s: "p", log=runs)
    result = shrink(
        _Options(1, small(), FaultPlan(_faults(10), actions=_actions(10))), run=run, max_runs=5
    )
    assert len(runs) == 1 + 5 == result.runs


def test_shrink_respects_its_time_budget() -> None:
    runs: list[FaultPlan] = []
    run = _fake(lambda _p, _s: "p", log=runs)
    result = shrink(_Options(1, small(), FaultPlan(_faults(10))), run=run, max_seconds=0)
    assert len(runs) == 1 == result.runs and result.steps == []


def test_a_candidate_that_crashes_the_simulator_is_not_a_reproducer() -> None:
    def verdict(plan: FaultPlan, _sc: Scenario) -> str:
        if not any(f.at_ms == 0 for f in plan.faults):
            raise RuntimeError("simulator crashed")
        return "p"

    result = shrink(_Options(1, small(), FaultPlan(_faults(4))), run=_fake(verdict), workload=False)
    assert [f.at_ms for f in result.plan.faults] == [0]


def test_shrink_refuses_a_passing_run() -> None:
    with pytest.raises(NotFailing, match="seed 1 passes"):
        shrink(_Options(1, small(), FaultPlan(_faults(2))), run=_fake(_needs({99})))


# -- where reproducers and pictures go ---------------------------------------------------------


def test_a_reproducer_gets_a_fresh_name_beside_its_original(tmp_path: Path) -> None:
    original = tmp_path / "run.json"
    original.write_text("{}")
    first = _shrunk_path(str(original), 1)
    assert first == tmp_path / "run.shrunk.json"
    first.write_text("{}")
    second = _shrunk_path(str(original), 1)
    assert second == tmp_path / "run.shrunk2.json"
    second.write_text("{}")
    assert _shrunk_path(str(original), 1) == tmp_path / "run.shrunk3.json"
    assert _shrunk_path(str(tmp_path / "plan"), 1) == tmp_path / "plan.shrunk.json"
    assert _shrunk_path(None, 4) == Path("sim-seed-4.shrunk.json")
    assert replay_command("a b.json") == "tidegate sim replay 'a b.json'"


def test_a_picture_is_named_after_its_whole_trace_name(tmp_path: Path) -> None:
    assert plot_paths(tmp_path / "run.json") == (tmp_path / "run.png", tmp_path / "run.html")
    # A reproducer beside its original never draws onto the original's picture.
    assert plot_paths(tmp_path / "run.shrunk.json")[0] == tmp_path / "run.shrunk.png"
    assert plot_paths("t.json", tmp_path / "p.v2") == (
        tmp_path / "p.v2.png",
        tmp_path / "p.v2.html",
    )
    # A named picture is that one file, in the format its suffix says.
    assert plot_paths("t.json", tmp_path / "p.svg") == (tmp_path / "p.svg",)
    assert plot_paths("t.json", "p.HTML") == (Path("p.HTML"),)


# -- replay files ----------------------------------------------------------------------------


def test_files_that_cannot_be_replayed_say_why(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ReplayError, match="cannot read"):
        load_replayable(bad)
    plan = tmp_path / "plan.json"
    FaultPlan(_faults(1), actions=_actions(1)).save(plan)
    with pytest.raises(ReplayError, match="give the seed"):
        load_replayable(plan)
    rep = load_replayable(plan, seed=3, scenario="small")
    assert rep.seed == 3 and rep.plan is not None and rep.plan.steps == 2
    assert rep.expected_digest is None and rep.scenario == small()
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"seed": 1}))
    with pytest.raises(ReplayError, match="needs 'seed' and 'plan'"):
        load_replayable(trace)


# -- mutants ------------------------------------------------------------------------------


def test_there_are_at_least_eight_mutants_with_descriptions() -> None:
    assert len(MUTANTS) >= 8
    assert mutant_names() == list(MUTANTS)
    for m in MUTANTS.values():
        assert m.description and m.name


@pytest.fixture(scope="module")
def everything_imported() -> None:
    """Every module a mutant may patch is imported before the snapshots (a patch that imports
    a module lazily must not look like a change that was not undone)."""
    import tidegate.runtime
    import tidegate.sim
    import tidegate.spec

    for package in (tidegate.spec, tidegate.runtime, tidegate.sim):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)


def _namespaces() -> Iterator[tuple[str, Any]]:
    """Every tidegate module, and every class defined at the top of one."""
    for name, module in list(sys.modules.items()):
        if name.startswith("tidegate.") and module is not None:
            yield name, module
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and value.__module__ == name:
                    yield f"{name}.{attr}", value


def _snapshot() -> dict[str, dict[str, Any]]:
    return {label: dict(vars(ns)) for label, ns in _namespaces()}


def _changes(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Names whose value is another object (new modules and submodule attributes aside)."""
    gone = object()
    out = []
    for label in before.keys() & after.keys():
        b, a = before[label], after[label]
        for key in b.keys() | a.keys():
            old, new = b.get(key, gone), a.get(key, gone)
            if old is not new and not (old is gone and type(new).__name__ == "module"):
                out.append(f"{label}.{key}")
    return sorted(out)


@pytest.mark.usefixtures("everything_imported")
@pytest.mark.parametrize("name", mutant_names())
def test_a_mutant_patch_is_undone_when_its_block_ends(name: str) -> None:
    before = _snapshot()
    with MUTANTS[name].patch():
        assert _changes(before, _snapshot()), f"mutant {name} changes nothing while active"
    assert _changes(before, _snapshot()) == []
    with pytest.raises(KeyError), MUTANTS[name].patch():
        raise KeyError("the block fails")
    assert _changes(before, _snapshot()) == []


@pytest.mark.usefixtures("everything_imported")
def test_the_undo_check_sees_a_patch_left_behind() -> None:
    from tidegate.spec.compute import instance

    before = _snapshot()
    original = instance.Instance.__dict__["peek"]
    instance.Instance.peek = lambda self, *args: None  # type: ignore[method-assign]
    try:
        assert _changes(before, _snapshot()) == ["tidegate.spec.compute.instance.Instance.peek"]
    finally:
        instance.Instance.peek = original  # type: ignore[method-assign]
    assert _changes(before, _snapshot()) == []
