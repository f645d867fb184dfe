"""``tidegate sim``: run, campaign, replay, shrink and plot deterministic simulations; show
scenarios; explore a small configuration's every interleaving (``explore``).

A run's verdict is the online checkers' and, when they pass, the offline
history checker's (``tidegate.sim.campaign.verdict``).

Exit codes: 0 the run(s) passed; 1 a property was violated (or a shrink found
a reproducer); 2 a replay's digest differs from the saved one, or bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .faults import FaultPlan
from .scenario import SCENARIOS, Scenario

__all__ = ["build_parser", "main"]

EXIT_OK, EXIT_VIOLATION, EXIT_MISMATCH = 0, 1, 2


def _scenario(args: argparse.Namespace, saved: Scenario | None = None) -> Scenario:
    from .replay import resolve_scenario

    sc = saved if saved is not None and args.scenario is None else resolve_scenario(args.scenario)
    if getattr(args, "replicas", None) is not None:
        sc = replace(sc, replicas=args.replicas)
    if getattr(args, "virtual_seconds", None) is not None:
        sc = replace(sc, duration_ms=int(args.virtual_seconds * 1000))
    return sc


def _print_options(result: Any, out: Any) -> None:
    print("options:", file=out)
    for key, value in result.expanded_options.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        print(f"  {key}: {text}", file=out)


def _verdict(result: Any, v: Any) -> str:
    s = result.stats
    # Trace events: a replay of a saved run records the same trace, so the same count (the
    # kernel's events are not: a generated run also schedules the workload draws that did
    # nothing, which its saved plan leaves out).
    figures = (
        f"{s.trace_events} events, {s.messages} messages, {s.peeks} peeks, {s.appends} appends, "
        f"{s.virtual_ms} virtual ms in {s.wall_s:.2f}s"
    )
    if v is None:
        return f"PASS seed {result.seed} ({result.scenario_name}): {figures}"
    return (
        f"FAIL seed {result.seed} ({result.scenario_name}): {v.property} at {v.at_ms}ms: "
        f"{v.message}\n  {figures}"
    )


def _report_violation(result: Any, v: Any, tail: int, out: Any) -> None:
    print(f"seed: {result.seed}", file=out)
    plan = result.plan
    print(f"faults ({len(plan.faults)}):", file=out)
    for f in plan.faults:
        print("  " + f.text(), file=out)
    print(f"client actions: {len(plan.actions or ())}", file=out)
    lines = result.trace_tail[-tail:] if tail > 0 else []
    print(f"last {len(lines)} trace events:", file=out)
    for line in lines:
        print("  " + line, file=out)
    print(f"broken property: {v.property}: {v.message} (at {v.at_ms}ms)", file=out)


def _cmd_run(args: argparse.Namespace) -> int:
    from .campaign import verdict
    from .replay import save_result
    from .run import RunOptions, run_simulation

    plan = FaultPlan.load(Path(args.plan)) if args.plan else None
    options = RunOptions(
        seed=args.seed,
        scenario=_scenario(args),
        plan=plan,
        mutant=args.mutant,
        trace_tail=max(args.tail, 1),
        keep_trace=args.save_trace is not None,
    )
    result = run_simulation(options)
    v = verdict(result, options.scenario)
    out = sys.stdout
    _print_options(result, out)
    print(_verdict(result, v), file=out)
    if args.save_trace:
        save_result(result, args.save_trace, options)
        print(f"trace saved to {args.save_trace}", file=out)
    if v is not None:
        _report_violation(result, v, args.tail, out)
        saved = args.save_plan or (None if args.plan else f"sim-seed-{args.seed}.plan.json")
        if saved:
            result.plan.save(Path(saved))
            print(f"plan (faults and client actions) saved to {saved}; it reruns this very run:")
            again = f"tidegate sim run --seed {args.seed} --scenario {_scenario_arg(args)}"
            again += f" --plan {shlex.quote(saved)}"
            again += f" --mutant {args.mutant}" if args.mutant else ""
            print("  " + again, file=out)
        return EXIT_VIOLATION
    if args.save_plan:
        result.plan.save(Path(args.save_plan))
        print(f"plan (faults and client actions) saved to {args.save_plan}", file=out)
    return EXIT_OK


def _scenario_arg(args: argparse.Namespace) -> str:
    """How the command line named the scenario, overrides included (for the commands it prints)."""
    text = shlex.quote(str(args.scenario or "small"))
    if getattr(args, "replicas", None) is not None:
        text += f" --replicas {args.replicas}"
    if getattr(args, "virtual_seconds", None) is not None:
        text += f" --virtual-seconds {args.virtual_seconds:g}"
    return text


def _cmd_campaign(args: argparse.Namespace) -> int:
    from .campaign import ProgressBar, parse_seeds, run_campaign
    from .shrink import replay_command

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as e:
        print(f"tidegate sim campaign: {e}", file=sys.stderr)
        return EXIT_MISMATCH
    scenario = _scenario(args)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    where = f"Spark ({args.spark_master})" if args.spark_master else f"{jobs} process(es)"
    print(
        f"campaign: seeds {seeds.start}..{seeds.stop - 1} of scenario {scenario.name}"
        + (f" with mutant {args.mutant}" if args.mutant else "")
        + f" on {where}"
    )
    bar = ProgressBar(len(seeds), sys.stderr)
    report = run_campaign(
        seeds,
        scenario,
        mutant=args.mutant,
        jobs=jobs,
        on_outcome=bar.update,
        stop_after=args.stop_after,
        spark_master=args.spark_master,
        rules=args.coverage or args.lines,
        lines=args.lines,
        scenario_arg=_scenario_arg(args),
    )
    print(report.table())
    if args.save_failures and report.failures:
        for path in report.save_failures(args.save_failures):
            print(f"saved {path} (replay it with: {replay_command(str(path))})")
    if report.failures:
        return EXIT_VIOLATION
    if args.require_fired and report.never_fired():
        print("some enabled fault kinds never fired", file=sys.stderr)
        return EXIT_VIOLATION
    return EXIT_OK


def _load(args: argparse.Namespace) -> Any:
    from .replay import load_replayable, resolve_scenario

    scenario = None if args.scenario is None else resolve_scenario(args.scenario)
    rep = load_replayable(args.file, seed=args.seed, scenario=scenario, mutant=args.mutant)
    return rep


def _cmd_replay(args: argparse.Namespace) -> int:
    from .campaign import verdict
    from .replay import replay

    outcome = replay(_load(args))
    result = outcome.result
    v = verdict(result, outcome.replayable.scenario)
    _print_options(result, sys.stdout)
    print(_verdict(result, v))
    expected = outcome.replayable.expected_digest
    if outcome.matches is None:
        print(f"digest {result.trace_digest} (the file has none to compare)")
    elif outcome.matches:
        print(f"digest matches: {result.trace_digest}")
    else:
        print(f"DIGEST MISMATCH: saved {expected}, replayed {result.trace_digest}")
        return EXIT_MISMATCH
    if v is not None:
        _report_violation(result, v, args.tail, sys.stdout)
        return EXIT_VIOLATION
    return EXIT_OK


def _cmd_shrink(args: argparse.Namespace) -> int:
    from .replay import Replayable, resolve_scenario, save_result
    from .shrink import NotFailing, describe, replay_command, shrink

    if args.file is not None:
        rep = _load(args)
    elif args.seed is not None:
        rep = Replayable(args.seed, resolve_scenario(args.scenario), None, args.mutant, None)
    else:
        print("shrink needs a plan or trace file, or --seed", file=sys.stderr)
        return EXIT_MISMATCH
    options = rep.options(trace_tail=max(args.tail, 1))
    out = Path(args.out) if args.out else _shrunk_path(args.file, rep.seed)

    def keep(best_options: Any, best: Any) -> None:
        """Save every better reproducer at once (whole, by rename): a shrink that is killed
        or runs out of budget leaves the best one so far."""
        partial = out.with_name(out.name + ".partial")
        save_result(best, partial, best_options)
        partial.replace(out)

    try:
        result = shrink(
            options,
            max_runs=args.max_runs,
            max_seconds=args.max_seconds,
            workload=not args.faults_only,
            log=lambda line: print(line, file=sys.stderr),
            on_better=keep,
            jobs=args.jobs,
        )
    except NotFailing as e:
        print(str(e))
        return EXIT_OK
    except KeyboardInterrupt:
        if out.exists():
            print(f"interrupted; the best reproducer so far is in {out}; replay it with:")
            print("  " + replay_command(str(out)))
        raise
    print(describe(result))
    print(f"reproducer saved to {out}; replay it with:")
    print("  " + replay_command(str(out)))
    return EXIT_VIOLATION


def _shrunk_path(original: str | None, seed: int) -> Path:
    """Where a reproducer goes: beside the original, under a name no other file has.

    The original trace (and its plot, ``<name>.png``) are never overwritten.
    """
    base = Path(original) if original else Path(f"sim-seed-{seed}.json")
    stem = base.name.removesuffix(".json")
    candidate = base.with_name(f"{stem}.shrunk.json")
    n = 2
    while candidate.exists() or candidate == base:
        candidate = base.with_name(f"{stem}.shrunk{n}.json")
        n += 1
    return candidate


def _cmd_plot(args: argparse.Namespace) -> int:
    from .plot import plot_file

    written = [str(p) for p in plot_file(args.file, args.out)]
    text = written[0] if len(written) == 1 else ", ".join(written[:-1]) + " and " + written[-1]
    print(f"wrote {text}")
    return EXIT_OK


def _cmd_scenario_list(args: argparse.Namespace) -> int:
    for name, make in SCENARIOS.items():
        doc = (make.__doc__ or "").strip().split("\n\n")[0]
        print(f"{name:<10} {' '.join(doc.split())}")
    return EXIT_OK


def _cmd_scenario_show(args: argparse.Namespace) -> int:
    from .replay import resolve_scenario

    print(json.dumps(resolve_scenario(args.name).to_json(), indent=2))
    return EXIT_OK


def _cmd_scenario_check(args: argparse.Namespace) -> int:
    sc = Scenario.load(args.file)
    print(
        f"{args.file}: scenario {sc.name}: {sc.replicas} replica(s), {len(sc.tables)} table(s), "
        f"{len(sc.dataflows)} dataflow(s), {sc.duration_ms} + {sc.quiet_ms} virtual ms, "
        f"{sc.faults} fault(s)"
    )
    return EXIT_OK


def _cmd_scenario_schema(args: argparse.Namespace) -> int:
    from .scenario_schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    from .mutants import mutant_names

    parser = argparse.ArgumentParser(
        prog="tidegate sim",
        description="Run, campaign, replay, shrink and plot deterministic simulations; show scenarios.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    scenario_help = f"built-in name ({', '.join(SCENARIOS)}) or a JSON scenario file"

    def common(p: argparse.ArgumentParser, *, default_scenario: str | None) -> None:
        p.add_argument("--scenario", default=default_scenario, help=scenario_help)
        p.add_argument(
            "--mutant",
            choices=mutant_names(),
            metavar="NAME",
            help="switch on a deliberate bug: " + ", ".join(mutant_names()),
        )
        p.add_argument("--tail", type=int, default=30, help="trace events shown on a violation")

    def shape(p: argparse.ArgumentParser) -> None:
        p.add_argument("--replicas", type=int, help="override the scenario's replica count")
        p.add_argument("--virtual-seconds", type=float, help="override the scenario's duration")

    run = sub.add_parser("run", help="run one seed and check every property")
    run.add_argument("--seed", type=int, required=True)
    common(run, default_scenario="standard")
    shape(run)
    run.add_argument(
        "--plan", help="a plan file (faults, and client actions) to use instead of the seed's"
    )
    run.add_argument("--save-trace", metavar="PATH", help="save options, plan and trace here")
    run.add_argument(
        "--save-plan",
        metavar="PATH",
        help="save the plan as run here (on a failure, by default to sim-seed-N.plan.json)",
    )
    run.set_defaults(func=_cmd_run)

    camp = sub.add_parser("campaign", help="run many seeds in parallel and summarise")
    camp.add_argument("--seeds", required=True, help="A..B (inclusive)")
    camp.add_argument("--jobs", type=int, help="worker processes (default: CPU count)")
    common(camp, default_scenario="standard")
    shape(camp)
    camp.add_argument("--stop-after", type=int, help="stop after this many failing seeds")
    camp.add_argument(
        "--require-fired",
        action="store_true",
        help="fail if a fault kind was enabled but never fired",
    )
    camp.add_argument(
        "--spark-master",
        metavar="URL",
        help="run the seeds as tasks on this Spark master (local[2], spark://host:7077)",
    )
    camp.add_argument(
        "--coverage",
        action="store_true",
        help="report the protocol rules, error types and effect kinds the runs reached",
    )
    camp.add_argument(
        "--lines",
        action="store_true",
        help="also measure which lines of the runtime, the replicas and the spec ran, by "
        "package (coverage.py; slower; sim/reach.py says what is left out)",
    )
    camp.add_argument("--save-failures", metavar="DIR", help="save failing seeds' traces here")
    camp.set_defaults(func=_cmd_campaign)

    rep = sub.add_parser("replay", help="re-run a saved trace or plan and compare digests")
    rep.add_argument("file", metavar="TRACE_OR_PLAN")
    rep.add_argument("--seed", type=int, help="the seed (needed for a bare plan file)")
    common(rep, default_scenario=None)
    rep.set_defaults(func=_cmd_replay)

    shr = sub.add_parser("shrink", help="minimise a failing plan and workload to a reproducer")
    shr.add_argument("file", nargs="?", metavar="PLAN_OR_TRACE")
    shr.add_argument("--seed", type=int, help="the seed (for a bare plan, or instead of a file)")
    common(shr, default_scenario=None)
    shr.add_argument("--max-runs", type=int, default=200, help="budget of simulation runs")
    shr.add_argument("--max-seconds", type=float, help="budget of wall time")
    shr.add_argument("--faults-only", action="store_true", help="do not shrink the workload")
    shr.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes running candidates side by side (the reproducer is the same)",
    )
    shr.add_argument("--out", help="where to save the reproducer (a trace file)")
    shr.set_defaults(func=_cmd_shrink)

    plot = sub.add_parser(
        "plot", help="draw a run: PNG or SVG (matplotlib) and interactive HTML (plotly)"
    )
    plot.add_argument("file", metavar="TRACE")
    plot.add_argument(
        "-o",
        "--out",
        action="append",
        metavar="PATH",
        help="a file to draw, its format by suffix (.png, .svg, .html), or a path prefix "
        "for PREFIX.png and PREFIX.html (default: next to the trace); repeatable",
    )
    plot.set_defaults(func=_cmd_plot)

    from .explore.cli import add_explore_parser

    add_explore_parser(sub)

    scen = sub.add_parser("scenario", help="the built-in scenarios, and scenario files")
    scen_sub = scen.add_subparsers(dest="scenario_command", required=True)
    scen_sub.add_parser("list", help="the built-in scenarios").set_defaults(func=_cmd_scenario_list)
    show = scen_sub.add_parser(
        "show", help="print a scenario as a JSON file (a starting point for your own)"
    )
    show.add_argument("name", metavar="NAME_OR_FILE", help=scenario_help)
    show.set_defaults(func=_cmd_scenario_show)
    check = scen_sub.add_parser("check", help="validate a scenario file against the schema")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(func=_cmd_scenario_check)
    scen_sub.add_parser("schema", help="print the JSON Schema of scenario files").set_defaults(
        func=_cmd_scenario_schema
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tidegate sim``; returns the exit code."""
    args = build_parser().parse_args(argv)
    from .faults import FaultPlanError
    from .plot import PlotError
    from .replay import ReplayError
    from .scenario import ScenarioError

    try:
        code: int = args.func(args)
    except (ReplayError, ScenarioError, FaultPlanError, PlotError, OSError) as e:
        print(f"tidegate sim: {e}", file=sys.stderr)
        return EXIT_MISMATCH
    return code


if __name__ == "__main__":
    sys.exit(main())
