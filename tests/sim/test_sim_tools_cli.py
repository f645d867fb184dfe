"""The simulator's user tools end to end, on the real simulator: run, campaign, replay, shrink, plot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tidegate.cli import main as tidegate_main
from tidegate.sim.campaign import run_campaign
from tidegate.sim.cli import EXIT_MISMATCH, EXIT_OK, EXIT_VIOLATION, main
from tidegate.sim.plot import plot_file
from tidegate.sim.replay import load_replayable, replay
from tidegate.sim.run import RunOptions, run_simulation
from tidegate.sim.scenario import Scenario, small
from tidegate.sim.shrink import shrink

QUICK = replace(small(), name="quick", duration_ms=2_000, quiet_ms=1_500)


@pytest.fixture
def quick_file(tmp_path: Path) -> Path:
    path = tmp_path / "quick.json"
    path.write_text(QUICK.dumps())
    return path


def test_run_prints_the_expanded_options_first_then_a_verdict(
    quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tidegate_main(["sim", "run", "--seed", "3", "--scenario", str(quick_file)])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "options:"
    assert "  seed: 3" in out and "  scenario: quick" in out
    verdict = next(line for line in out if line.startswith(("PASS", "FAIL")))
    assert out.index(verdict) > out.index("  seed: 3")
    result = run_simulation(RunOptions(3, QUICK))
    assert code == (EXIT_OK if result.ok else EXIT_VIOLATION)
    assert verdict.startswith("PASS" if result.ok else "FAIL")


def test_a_violation_reports_seed_plan_trace_tail_and_property(
    quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--seed", "3", "--scenario", str(quick_file), "--tail", "5"]
    code = main([*args, "--mutant", "global_frontier_regresses", "--replicas", "3"])
    out = capsys.readouterr().out
    assert code == EXIT_VIOLATION
    assert "FAIL seed 3" in out and "\nseed: 3\n" in out and '"faults": [' in out
    assert "last 5 trace events:" in out
    assert "broken property: " in out


def test_saved_trace_replays_with_the_same_digest(
    tmp_path: Path, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    run_code = main(
        ["run", "--seed", "2", "--scenario", str(quick_file), "--save-trace", str(trace)]
    )
    saved = json.loads(trace.read_text())
    assert saved["seed"] == 2 and saved["lines"] and saved["trace_digest"]
    capsys.readouterr()
    assert main(["replay", str(trace)]) == run_code
    assert "digest matches" in capsys.readouterr().out
    # A tampered digest is a determinism failure in the field.
    saved["trace_digest"] = "0" * 64
    trace.write_text(json.dumps(saved))
    assert main(["replay", str(trace)]) == EXIT_MISMATCH
    assert "DIGEST MISMATCH" in capsys.readouterr().out


def test_a_bare_plan_file_replays_with_a_seed(tmp_path: Path, quick_file: Path) -> None:
    generated = run_simulation(RunOptions(4, QUICK)).plan
    plan = tmp_path / "plan.json"
    plan.write_text(generated.dumps())
    rep = load_replayable(plan, seed=4, scenario=str(quick_file))
    again = replay(rep)
    assert again.matches is None
    assert again.result.plan == generated
    explicit = run_simulation(RunOptions(4, QUICK, plan=generated))
    assert again.result.trace_digest == explicit.trace_digest
    assert main(["replay", str(plan)]) == EXIT_MISMATCH  # no seed: a usage error


def test_campaign_outcomes_do_not_depend_on_the_number_of_processes() -> None:
    seeds = range(5, 8)
    one = run_campaign(seeds, QUICK, jobs=1)
    two = run_campaign(seeds, QUICK, jobs=2)
    key = [(o.seed, o.ok, o.property, o.digest) for o in one.outcomes]
    assert key == [(o.seed, o.ok, o.property, o.digest) for o in two.outcomes]
    assert [o.seed for o in one.outcomes] == list(seeds)
    assert all(o.digest for o in one.outcomes)


def test_campaign_cli_prints_a_summary_table(
    quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["campaign", "--seeds", "1..2", "--jobs", "1", "--scenario", str(quick_file)])
    captured = capsys.readouterr()
    assert "passed" in captured.out and "failed" in captured.out
    assert "enabled but never fired:" in captured.out
    assert "2/2" in captured.err  # the progress bar
    assert code in (EXIT_OK, EXIT_VIOLATION)
    assert main(["campaign", "--seeds", "9..3"]) == EXIT_MISMATCH


def test_shrink_produces_a_smaller_reproducer_that_replays(
    tmp_path: Path, quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "fail.json"
    scenario_args = ["--scenario", str(quick_file), "--mutant", "global_frontier_regresses"]
    assert (
        main(["run", "--seed", "3", *scenario_args, "--save-trace", str(trace)]) == EXIT_VIOLATION
    )
    capsys.readouterr()
    out_path = tmp_path / "repro.json"
    code = main(["shrink", str(trace), "--max-runs", "12", "--out", str(out_path)])
    out = capsys.readouterr().out
    assert code == EXIT_VIOLATION
    assert out.startswith("reproducer: seed 3") and "broken property:" in out
    repro = json.loads(out_path.read_text())
    original = json.loads(trace.read_text())
    assert repro["violation"]["property"] == original["violation"]["property"]
    assert repro["mutant"] == "global_frontier_regresses"

    def size(trace: dict[str, Any]) -> list[int]:
        sc, faults = trace["scenario"], trace["plan"]["faults"]
        actions = sum(1 for k, v in sc["workload"].items() if isinstance(v, int) and v > 0)
        return [
            len(faults),
            sum(f["duration_ms"] for f in faults),
            sc["duration_ms"],
            sc["quiet_ms"],
            actions,
            len(sc["dataflows"]),
            sc["replicas"],
        ]

    before, after = size(original), size(repro)
    assert all(a <= b for a, b in zip(after, before, strict=True)) and after != before
    # The reproducer is a trace file: it replays to the same digest.
    outcome = replay(load_replayable(out_path))
    assert outcome.matches is True


def test_shrink_of_a_passing_run_says_so(
    quick_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passing = next(s for s in range(1, 30) if run_simulation(RunOptions(s, QUICK)).ok)
    assert main(["shrink", "--seed", str(passing), "--scenario", str(quick_file)]) == EXIT_OK
    assert "passes: nothing to shrink" in capsys.readouterr().out


def test_shrink_api_keeps_the_seed_and_property() -> None:
    options = RunOptions(3, QUICK, mutant="global_frontier_regresses")
    first = run_simulation(options)
    assert not first.ok
    result = shrink(options, max_runs=8, workload=False)
    assert result.options.seed == 3
    assert result.result.violation.property == first.violation.property
    assert len(result.plan.faults) <= len(first.plan.faults)


def test_plot_writes_a_png_and_a_standalone_html(tmp_path: Path, quick_file: Path) -> None:
    trace = tmp_path / "p.json"
    main(["run", "--seed", "2", "--scenario", str(quick_file), "--save-trace", str(trace)])
    png, html = plot_file(trace, tmp_path / "picture")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "replica r1" in page and "collection " in page
    assert "digest differs" not in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")


def test_a_scenario_file_round_trips_through_the_tools(quick_file: Path) -> None:
    assert Scenario.load(quick_file) == QUICK
