"""The simulator's user tools end to end, on the real simulator: run, campaign, replay, shrink, plot.

Every run here is a short scenario (2 virtual seconds of workload, then the 6-second quiet
phase that outlasts the runtime's reconnect backoff); failing runs switch on the mutant
``subscribe_loses_retractions`` and stop at their violation, so they are cheaper still.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from sim_quick import MUTANT, QUICK

import tidegate.runtime.environment as environment
import tidegate.runtime.errors as runtime_errors
from tidegate.cli import main as tidegate_main
from tidegate.sim.campaign import run_campaign
from tidegate.sim.cli import EXIT_MISMATCH, EXIT_OK, EXIT_VIOLATION, main
from tidegate.sim.faults import FaultPlan
from tidegate.sim.plot import plot_file
from tidegate.sim.replay import load_replayable, replay
from tidegate.sim.run import RunOptions, RunResult, run_simulation
from tidegate.sim.scenario import Scenario
from tidegate.sim.shrink import shrink


@dataclass(frozen=True)
class Runs:
    """A passing seed of ``QUICK``, and a seed that fails with ``MUTANT`` (with room to shrink)."""

    passing: RunResult
    failing: RunResult

    @property
    def bad_seed(self) -> int:
        return self.failing.seed


SEEDS = range(1, 41)
"""Where the fixture looks: about one seed in five of ``QUICK`` subscribes while the clients
retract rows, which the mutant gets wrong; which ones moves with every change of the runs."""


@pytest.fixture(scope="module")
def runs() -> Runs:
    """The first seed the mutant breaks (with faults, and actions to shrink) and the passing
    seed just before it."""
    passing: RunResult | None = None
    for seed in SEEDS:
        result = run_simulation(RunOptions(seed, QUICK, mutant=MUTANT))
        if result.ok:
            passing = result
        elif result.plan.faults and len(result.plan.actions or ()) >= 8 and passing is not None:
            # The mutant is silent without the failure it causes: a passing run with it
            # switched on is a passing run of the plain scenario too.
            plain = run_simulation(RunOptions(passing.seed, QUICK))
            assert plain.ok, plain.summary()
            return Runs(plain, result)
    raise AssertionError(f"no seed in {SEEDS} of {QUICK.name} both passes and fails with {MUTANT}")


@pytest.fixture(scope="module")
def quick_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "quick.json"
    path.write_text(QUICK.dumps())
    return path


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failing runs save their plan in the working directory: keep it out of the repository."""
    monkeypatch.chdir(tmp_path)


def _sim(args: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``tidegate sim ARGS`` (through the top-level CLI): exit code and standard output."""
    capsys.readouterr()
    code = tidegate_main(["sim", *args])
    return code, capsys.readouterr().out


def _command(line: str) -> list[str]:
    """The ``tidegate sim`` arguments of a printed command line."""
    words = shlex.split(line)
    assert words[:2] == ["tidegate", "sim"], line
    return words[2:]


def _digest(trace: Path) -> str:
    digest: str = json.loads(trace.read_text())["trace_digest"]
    return digest


def _steps(trace: dict[str, Any]) -> tuple[int, int]:
    plan = trace["plan"]
    return len(plan["faults"]), len(plan["actions"])


# -- run --------------------------------------------------------------------------------------


def test_run_prints_the_expanded_options_first_then_a_verdict(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = runs.passing.seed
    code, out = _sim(["run", "--seed", str(seed), "--scenario", str(quick_file)], capsys)
    lines = out.splitlines()
    assert lines[0] == "options:"
    assert f"  seed: {seed}" in lines and "  scenario: quick" in lines
    assert "  actions: generated" in lines
    verdict = next(line for line in lines if line.startswith(("PASS", "FAIL")))
    assert lines.index(verdict) > lines.index(f"  seed: {seed}")
    assert code == EXIT_OK and verdict.startswith(f"PASS seed {seed} (quick)")
    assert not list(Path().iterdir()), "a passing run saves nothing unless asked"


def test_a_failing_run_saves_its_plan_and_prints_the_command_that_reruns_it_exactly(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = runs.bad_seed
    args = ["run", "--seed", str(seed), "--scenario", str(quick_file), "--mutant", MUTANT]
    code, out = _sim([*args, "--tail", "5", "--save-trace", "first.json"], capsys)
    assert code == EXIT_VIOLATION
    v = runs.failing.violation
    assert v is not None
    assert f"FAIL seed {seed} (quick): {v.property} at {v.at_ms}ms" in out
    assert f"\nseed: {seed}\n" in out and f"faults ({len(runs.failing.plan.faults)}):" in out
    assert f"client actions: {len(runs.failing.plan.actions or ())}" in out
    assert "last 5 trace events:" in out
    assert f"broken property: {v.property}: {v.message} (at {v.at_ms}ms)" in out
    # The plan as run, client actions included, is saved where the printed command finds it.
    plan_file = Path(f"sim-seed-{seed}.plan.json")
    assert FaultPlan.load(plan_file) == runs.failing.plan
    lines = out.splitlines()
    again = lines[lines.index(next(x for x in lines if "it reruns this very run" in x)) + 1]
    assert _command(again) == [
        *("run", "--seed", str(seed), "--scenario", str(quick_file)),
        *("--plan", str(plan_file), "--mutant", MUTANT),
    ]
    code, rerun = _sim([*_command(again), "--save-trace", "again.json"], capsys)
    assert code == EXIT_VIOLATION
    assert f"broken property: {v.property}: {v.message} (at {v.at_ms}ms)" in rerun
    assert "  actions: " + str(len(runs.failing.plan.actions or ())) in rerun.splitlines()
    # The very same run: the same trace, byte for byte, as the API's run of the seed.
    assert _digest(Path("again.json")) == _digest(Path("first.json"))
    assert _digest(Path("first.json")) == runs.failing.trace_digest


def test_a_passing_runs_saved_plan_drives_the_identical_run(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = str(runs.passing.seed)
    base = ["run", "--seed", seed, "--scenario", str(quick_file)]
    assert _sim([*base, "--save-plan", "p.json", "--save-trace", "a.json"], capsys)[0] == EXIT_OK
    assert FaultPlan.load(Path("p.json")) == runs.passing.plan
    assert _sim([*base, "--plan", "p.json", "--save-trace", "b.json"], capsys)[0] == EXIT_OK
    assert _digest(Path("a.json")) == _digest(Path("b.json")) == runs.passing.trace_digest


def test_a_generated_plan_passed_back_drives_the_identical_run(runs: Runs) -> None:
    """Through the API: the plan as run (faults and client actions), as is or through JSON, and
    the faults alone (the workload then drawn from the seed again) replay the identical run."""
    for first, mutant in ((runs.failing, MUTANT), (runs.passing, None)):
        plan = first.plan
        assert plan.actions is not None and plan.steps > len(plan.faults)
        for given in (plan, FaultPlan.loads(plan.dumps()), replace(plan, actions=None)):
            again = run_simulation(RunOptions(first.seed, QUICK, plan=given, mutant=mutant))
            assert again.trace_digest == first.trace_digest, given.dumps()
            assert again.plan == plan
            if mutant is None:
                break  # one passing rerun is enough (they take the whole quiet phase)


def test_a_different_plan_drives_a_different_run(runs: Runs) -> None:
    plan = runs.failing.plan
    fewer = replace(plan, actions=(plan.actions or ())[:3])
    again = run_simulation(RunOptions(runs.bad_seed, QUICK, plan=fewer, mutant=MUTANT))
    assert again.trace_digest != runs.failing.trace_digest
    assert again.plan.actions == fewer.actions


# -- replay -----------------------------------------------------------------------------------


@pytest.fixture
def failing_trace(runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``run.json``: the failing run's trace file, saved by ``tidegate sim run``."""
    args = ["run", "--seed", str(runs.bad_seed), "--scenario", str(quick_file)]
    assert _sim([*args, "--mutant", MUTANT, "--save-trace", "run.json"], capsys)[0] == 1
    return Path("run.json").resolve()


def test_a_saved_trace_replays_with_the_same_digest(
    failing_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = json.loads(failing_trace.read_text())
    assert saved["lines"] and saved["mutant"] == MUTANT and saved["scenario"]["name"] == "quick"
    code, out = _sim(["replay", str(failing_trace)], capsys)
    assert code == EXIT_VIOLATION and f"digest matches: {saved['trace_digest']}" in out
    # The replay reports the run's event count (its trace's), though its kernel schedules
    # none of the workload draws that did nothing.
    events = saved["stats"]["trace_events"]
    assert events == len(saved["lines"]) and f"\n  {events} events, " in out
    # A tampered digest is a determinism failure in the field.
    saved["trace_digest"] = "0" * 64
    failing_trace.write_text(json.dumps(saved))
    code, out = _sim(["replay", str(failing_trace)], capsys)
    assert code == EXIT_MISMATCH and "DIGEST MISMATCH" in out


def test_a_bare_plan_file_replays_with_a_seed(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = Path("plan.json")
    runs.failing.plan.save(plan)
    rep = load_replayable(plan, seed=runs.bad_seed, scenario=str(quick_file), mutant=MUTANT)
    again = replay(rep)
    assert again.matches is None
    assert again.result.trace_digest == runs.failing.trace_digest
    assert _sim(["replay", str(plan)], capsys)[0] == EXIT_MISMATCH  # no seed: a usage error


# -- campaign ---------------------------------------------------------------------------------


@pytest.mark.processes
def test_campaign_outcomes_do_not_depend_on_the_number_of_processes(runs: Runs) -> None:
    seeds = sorted({runs.passing.seed, runs.bad_seed, runs.bad_seed + 1})
    one = run_campaign(seeds, QUICK, mutant=MUTANT, jobs=1)
    two = run_campaign(seeds, QUICK, mutant=MUTANT, jobs=2)
    key = [(o.seed, o.ok, o.property, o.at_ms, o.digest) for o in one.outcomes]
    assert key == [(o.seed, o.ok, o.property, o.at_ms, o.digest) for o in two.outcomes]
    assert [o.seed for o in one.outcomes] == seeds
    by_seed = {o.seed: o for o in two.outcomes}
    assert by_seed[runs.passing.seed].ok and by_seed[runs.passing.seed].trace is None
    bad = by_seed[runs.bad_seed]
    assert not bad.ok and bad.digest == runs.failing.trace_digest
    assert bad.trace is not None and bad.trace["trace_digest"] == bad.digest


@pytest.mark.processes
def test_campaign_prints_for_each_failing_seed_the_command_that_reruns_it(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seeds = f"{runs.passing.seed}..{runs.bad_seed}"
    args = ["campaign", "--seeds", seeds, "--jobs", "2", "--scenario", str(quick_file)]
    args += ["--virtual-seconds", "2", "--mutant", MUTANT, "--save-failures", "fails"]
    capsys.readouterr()
    code = main(args)
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert code == EXIT_VIOLATION
    assert "passed" in captured.out and "enabled but never fired:" in captured.out
    total = runs.bad_seed - runs.passing.seed + 1
    assert f"{total}/{total}" in captured.err  # the progress bar
    failing = [line for line in out if line.startswith("  seed ")]
    assert failing and f"  seed {runs.bad_seed}: " in "\n".join(failing)
    for line in failing:
        seed = int(line.split()[1].rstrip(":"))
        command = out[out.index(line) + 1].strip()
        assert _command(command) == [
            *("run", "--seed", str(seed), "--scenario", str(quick_file)),
            *("--virtual-seconds", "2", "--mutant", MUTANT),
        ]
        rerun_code, rerun = _sim([*_command(command), "--save-trace", f"rerun-{seed}.json"], capsys)
        # It fails the same way: the same property, time and message, the same trace.
        assert rerun_code == EXIT_VIOLATION
        assert f"FAIL seed {seed} (quick): " + line.split(": ", 1)[1] in rerun
        saved = Path("fails", f"seed-{seed}.json")
        assert f"saved {saved} (replay it with: tidegate sim replay {saved})" in out
        assert _digest(Path(f"rerun-{seed}.json")) == _digest(saved)
    assert _sim(["campaign", "--seeds", "9..3"], capsys)[0] == EXIT_MISMATCH


def test_campaign_counts_the_rules_effects_and_lines_its_runs_reached(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_campaign([runs.bad_seed], QUICK, mutant=MUTANT, rules=True, lines=True)
    rules = report.rules()
    assert rules is not None and set(rules) == {"errors", "rules", "effects"}
    assert rules["effects"]["WriteToShard"] > 0 and rules["effects"]["SendCommand"] > 0
    lines = report.lines()
    assert lines is not None
    ran = {os.path.realpath(f): n for f, n in lines.items()}
    package = Path(os.path.realpath(environment.__file__)).parent  # the Environment's parts
    assert sum(len(lines) for f, lines in ran.items() if Path(f).parent == package) > 100
    # Import-time lines count as run in every module the run imported: a module of class
    # definitions only is not reported unrun.
    assert ran[os.path.realpath(runtime_errors.__file__)]
    table = report.table()
    assert "lines of the product run" in table
    for package in ("runtime", "replica", "spec", "in scope", "left out"):
        assert f"\n  {package} " in table, table
    args = ["campaign", "--seeds", str(runs.bad_seed), "--jobs", "1", "--scenario", str(quick_file)]
    code, out = _sim([*args, "--mutant", MUTANT, "--coverage"], capsys)
    assert code == EXIT_VIOLATION
    assert "reached (errors raised, protocol rules broken, effects carried out):" in out
    assert "  effects: " in out and "lines of the product run" not in out


# -- shrink -----------------------------------------------------------------------------------


def test_shrink_saves_a_smaller_reproducer_under_a_new_name_and_overwrites_nothing(
    failing_trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sim(["plot", str(failing_trace)], capsys)[0] == EXIT_OK
    here = failing_trace.parent
    originals = [failing_trace, here / "run.png", here / "run.html"]
    before = [p.read_bytes() for p in originals]

    code, out = _sim(["shrink", str(failing_trace), "--max-runs", "8"], capsys)
    assert code == EXIT_VIOLATION
    repro = here / "run.shrunk.json"
    assert out.startswith(f"reproducer: seed {json.loads(before[0])['seed']}, scenario quick")
    lines = out.splitlines()
    assert lines[-2:] == [
        f"reproducer saved to {repro}; replay it with:",
        f"  tidegate sim replay {repro}",
    ]
    assert [p.read_bytes() for p in originals] == before
    original, shrunk = json.loads(before[0]), json.loads(repro.read_text())
    assert shrunk["violation"]["property"] == original["violation"]["property"]
    assert shrunk["mutant"] == MUTANT and shrunk["seed"] == original["seed"]
    # Faults and client actions both shrank.
    (faults, actions), (faults_0, actions_0) = _steps(shrunk), _steps(original)
    assert faults < faults_0 and actions < actions_0
    # The printed command replays the reproducer, to the same failure and the same trace.
    code, replayed = _sim(_command(lines[-1]), capsys)
    assert code == EXIT_VIOLATION and f"digest matches: {shrunk['trace_digest']}" in replayed

    # Shrinking again never overwrites the first reproducer either.
    first = repro.read_bytes()
    code, out = _sim(["shrink", str(failing_trace), "--max-runs", "1"], capsys)
    assert code == EXIT_VIOLATION and out.splitlines()[-1].endswith("run.shrunk2.json")
    assert repro.read_bytes() == first and (here / "run.shrunk2.json").exists()
    assert [p.read_bytes() for p in originals] == before
    # Nor does the reproducer's picture overwrite the original's.
    assert _sim(["plot", str(repro)], capsys)[1] == (
        f"wrote {here / 'run.shrunk.png'} and {here / 'run.shrunk.html'}\n"
    )
    assert [p.read_bytes() for p in originals] == before


def test_shrink_of_a_seed_saves_its_reproducer_in_the_working_directory(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["shrink", "--seed", str(runs.bad_seed), "--scenario", str(quick_file)]
    code, out = _sim([*args, "--mutant", MUTANT, "--max-runs", "2"], capsys)
    assert code == EXIT_VIOLATION
    assert out.splitlines()[-1] == f"  tidegate sim replay sim-seed-{runs.bad_seed}.shrunk.json"
    assert load_replayable(f"sim-seed-{runs.bad_seed}.shrunk.json").mutant == MUTANT


def test_shrink_of_a_passing_run_says_so(
    runs: Runs, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["shrink", "--seed", str(runs.passing.seed), "--scenario", str(quick_file)]
    code, out = _sim(args, capsys)
    assert code == EXIT_OK and "passes: nothing to shrink" in out
    assert not list(Path().iterdir())


def test_shrink_api_keeps_the_seed_and_property_and_its_options_replay_the_reproducer(
    runs: Runs,
) -> None:
    options = RunOptions(runs.bad_seed, QUICK, mutant=MUTANT)
    result = shrink(options, max_runs=6)
    assert result.options.seed == runs.bad_seed and result.options.mutant == MUTANT
    assert runs.failing.violation is not None
    assert result.violation.property == runs.failing.violation.property
    assert result.size < result.original_steps == runs.failing.plan.steps
    again = run_simulation(result.options)
    assert again.trace_digest == result.result.trace_digest
    assert again.plan == result.plan


def test_shrink_reports_every_better_reproducer_as_it_finds_it(runs: Runs) -> None:
    """``on_better`` hears of the failing run first, then of each smaller reproducer, each
    failing the same way: a caller that saves them keeps the best one if the shrink dies."""
    seen: list[tuple[int, str]] = []

    def better(options: RunOptions, result: Any) -> None:
        assert options.plan == result.plan
        seen.append((result.plan.steps, result.violation.property))

    result = shrink(RunOptions(runs.bad_seed, QUICK, mutant=MUTANT), max_runs=6, on_better=better)
    assert seen[0][0] == result.original_steps and seen[-1][0] == result.size
    assert len(seen) == len(result.steps) + 1
    assert {p for _, p in seen} == {result.violation.property}


@pytest.mark.processes
def test_a_shrink_on_two_processes_finds_the_reproducer_one_process_finds(runs: Runs) -> None:
    """Candidates run side by side, and the one adopted is the first in order that fails:
    the same reproducer, step for step."""
    options = RunOptions(runs.bad_seed, QUICK, mutant=MUTANT)
    one, two = shrink(options), shrink(options, jobs=2)
    assert two.plan == one.plan and two.steps == one.steps
    assert two.result.trace_digest == one.result.trace_digest


def test_an_interrupted_shrink_leaves_the_best_reproducer_so_far(
    failing_trace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed (here: interrupted at its fourth candidate), a shrink has already saved the
    best reproducer it had, which replays to the same failure."""
    from tidegate.sim import run as run_module

    calls = 0
    real = run_module.run_simulation

    def interrupted(options: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise KeyboardInterrupt
        return real(options, *args)

    monkeypatch.setattr(run_module, "run_simulation", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _sim(["shrink", str(failing_trace)], capsys)
    repro = failing_trace.parent / "run.shrunk.json"
    assert "interrupted; the best reproducer so far is in" in capsys.readouterr().out
    saved = json.loads(repro.read_text())
    original = json.loads(failing_trace.read_text())
    assert saved["violation"]["property"] == original["violation"]["property"]
    assert sum(_steps(saved)) <= sum(_steps(original))
    monkeypatch.setattr(run_module, "run_simulation", real)
    code, replayed = _sim(["replay", str(repro)], capsys)
    assert code == EXIT_VIOLATION and f"digest matches: {saved['trace_digest']}" in replayed


# -- plot -------------------------------------------------------------------------------------


def test_plot_writes_a_png_and_a_standalone_html(failing_trace: Path) -> None:
    png, html = plot_file(failing_trace, failing_trace.parent / "picture")
    assert (png.name, html.name) == ("picture.png", "picture.html")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert "Plotly.newPlot" in page and "r1" in page
    assert "digest differs" not in page and f"mutant {MUTANT}" in page
    assert '<script src="http' not in page  # standalone: plotly.js is inlined


def test_a_scenario_file_round_trips_through_the_tools(quick_file: Path) -> None:
    assert Scenario.load(quick_file) == QUICK
