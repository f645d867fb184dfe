"""Campaigns: many seeds of one scenario, in parallel processes or on Spark, summarised.

Each seed is an independent, deterministic run; a campaign farms seeds out to
``jobs`` worker processes (``multiprocessing``) or, given a Spark master, runs
each as a Spark task on that cluster (the project's own distributed engine),
as many at once as it has task slots. It ends with a summary: passes,
failures, wall time, the failing seeds with their broken property and the
command that reruns each, the totals of the
"sometimes" counters, the fault kinds that were enabled but never fired (a
fault hook that is never installed makes a campaign falsely green), and, on
request, what the runs reached: protocol rules, error types and effect kinds
(:mod:`.coverage`), and the runtime's own lines (coverage.py). Failing runs'
trace files come back with their outcomes, to save and replay.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from .faults import FaultKind
from .scenario import Scenario

__all__ = [
    "CampaignReport",
    "ProgressBar",
    "SeedOutcome",
    "fired_kinds",
    "parse_seeds",
    "rerun_command",
    "run_campaign",
    "run_seed",
    "verdict",
]

"""Prefix of the properties that only the offline history checker found broken."""


def verdict(result: Any, scenario: Scenario | None = None) -> Any:
    """The run's broken property, or ``None``.

    Every run already includes the offline history checker
    (:func:`tidegate.sim.history.check_history`, reported as ``history:<property>``)
    after its online checkers, so this is the run's own violation; ``scenario``
    is accepted for callers that pass it.
    """
    del scenario
    return result.violation


def parse_seeds(text: str) -> range:
    """``"A..B"`` (inclusive) or ``"N"`` as a range of seeds."""
    try:
        if ".." in text:
            a, b = text.split("..", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
    except ValueError as e:
        raise ValueError(f"seeds must look like A..B or N, got {text!r}") from e
    if hi < lo or lo < 0:
        raise ValueError(f"empty or negative seed range {text!r}")
    return range(lo, hi + 1)


def fired_kinds(sometimes: dict[str, int]) -> set[str]:
    """Fault kinds with a positive counter (keys named after the kind, possibly prefixed)."""
    out: set[str] = set()
    for kind in FaultKind:
        for key, n in sometimes.items():
            if n > 0 and (key == kind.value or key.endswith((":" + kind.value, "." + kind.value))):
                out.add(kind.value)
    return out


@dataclass(frozen=True)
class SeedOutcome:
    """What a campaign keeps of one run (small and picklable)."""

    seed: int
    ok: bool
    property: str = ""
    message: str = ""
    at_ms: int = 0
    wall_s: float = 0.0
    messages: int = 0
    sometimes: dict[str, int] = field(default_factory=dict)
    enabled: tuple[str, ...] = ()
    faults: int = 0
    crashed: bool = False
    """The run raised instead of returning a verdict (counted as a failure)."""
    digest: str = ""
    """The trace digest: equal across processes and machines for the same seed."""
    trace: dict[str, Any] | None = None
    """A failing run's trace file (``RunResult.to_json()``), to save and replay."""
    rules: dict[str, dict[str, int]] | None = None
    """What the run reached (:mod:`.coverage`), when the campaign counts it."""
    lines: dict[str, list[int]] | None = None
    """The runtime, replica and spec lines the run executed, when the campaign measures them."""

    def line(self) -> str:
        if self.ok:
            return f"seed {self.seed}: ok"
        return f"seed {self.seed}: {self.property} at {self.at_ms}ms: {self.message}"


def rerun_command(seed: int, scenario: str, mutant: str | None = None) -> str:
    """The command that runs one seed of a campaign again, on its own."""
    cmd = f"tidegate sim run --seed {seed} --scenario {scenario}"
    return cmd + (f" --mutant {mutant}" if mutant else "")


def _options(seed: int, scenario: Scenario, mutant: str | None, rules: bool = False) -> Any:
    from .run import RunOptions

    return RunOptions(seed=seed, scenario=scenario, mutant=mutant, trace_tail=50, coverage=rules)


def outcome_of(
    seed: int, result: Any, wall_s: float, scenario: Scenario | None = None
) -> SeedOutcome:
    """The :class:`SeedOutcome` of a ``RunResult`` (judged by :func:`verdict`)."""
    v = verdict(result, scenario)
    return SeedOutcome(
        seed=seed,
        ok=v is None,
        property="" if v is None else v.property,
        message="" if v is None else v.message,
        at_ms=0 if v is None else v.at_ms,
        wall_s=wall_s,
        messages=result.stats.messages,
        sometimes=dict(result.sometimes),
        enabled=tuple(k.value for k in result.plan.enabled),
        faults=len(result.plan.faults),
        digest=result.trace_digest,
        trace=None if v is None else result.to_json(),
        rules=result.coverage,
    )


Task = tuple[int, dict[str, Any], "str | None", bool, bool]
"""``(seed, scenario as JSON, mutant, count rules, measure lines)``: plain data, for any worker."""


def run_seed(task: Task) -> SeedOutcome:
    """Run one seed (a worker's entry point, in a process or a Spark task: arguments are data)."""
    from .run import run_simulation

    seed, scenario_json, mutant, rules, lines = task
    scenario = Scenario.from_json(scenario_json)
    start = time.perf_counter()
    measure = _line_coverage() if lines else None
    try:
        if measure is not None:
            measure.start()
        try:
            result = run_simulation(_options(seed, scenario, mutant, rules))
        finally:
            if measure is not None:
                measure.stop()
        outcome = outcome_of(seed, result, time.perf_counter() - start, scenario)
    except Exception as e:  # a crash of the simulator is a finding too, not an abort
        return SeedOutcome(
            seed,
            False,
            property="simulator crashed",
            message=f"{type(e).__name__}: {e}",
            wall_s=time.perf_counter() - start,
            crashed=True,
        )
    if measure is not None:
        data = measure.get_data()
        imported = _imported_files()
        measured: dict[str, list[int]] = {}
        for f in data.measured_files():
            ran = set(data.lines(f) or ())
            if os.path.realpath(f) in imported:
                ran |= _import_time_lines(f)
            measured[f] = sorted(ran)
        outcome = replace(outcome, lines=measured)
    return outcome


def _line_coverage() -> Any:
    """A coverage.py measurement of the runtime, the replicas and the spec (not the simulator
    itself).

    The modules are imported before the measurement starts (in this process or the
    parent a worker was forked from), so coverage.py sees none of their import-time
    lines and says so; :func:`run_seed` adds those lines itself (:func:`_import_time_lines`).
    """
    import coverage

    cov = coverage.Coverage(
        data_file=None,
        source_pkgs=["tidegate.runtime", "tidegate.replica", "tidegate.spec"],
        branch=False,
    )
    cov.set_option("run:disable_warnings", ["module-not-measured", "no-data-collected"])
    return cov


def _imported_files() -> set[str]:
    """The real paths of the tidegate modules this process has imported."""
    out: set[str] = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name.startswith("tidegate.") and path:
            out.add(os.path.realpath(path))
    return out


def _import_time_lines(path: str) -> set[int]:
    """The lines of a module that run when it is imported (approximately).

    Module and class bodies, and the headers (decorators and ``def`` line) of
    functions, but not function bodies, nor ``if TYPE_CHECKING:`` blocks.
    """
    import ast

    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return set()
    lines: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines.update(range(first, node.lineno + 1))
            elif isinstance(node, ast.ClassDef):
                lines.update(range(first, node.lineno + 1))
                visit(node.body)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                lines.add(node.lineno)
                visit(node.orelse)
            elif isinstance(node, ast.If | ast.For | ast.While | ast.With | ast.Try):
                lines.add(node.lineno)
                for name in ("body", "orelse", "finalbody"):
                    visit(getattr(node, name, []))
                for handler in getattr(node, "handlers", []):
                    lines.add(handler.lineno)
                    visit(handler.body)
            else:
                lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))

    visit(tree.body)
    return lines


class ProgressBar:
    """A one-line text progress bar redrawn with ``\\r`` (a line per update when not a TTY)."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.failed = 0
        self._start = time.perf_counter()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_line = -1

    def render(self) -> str:
        filled = self.width * self.done // max(1, self.total)
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        return f"[{bar}] {self.done}/{self.total} failed={self.failed} {elapsed:.1f}s"

    def update(self, outcome: SeedOutcome) -> None:
        self.done += 1
        self.failed += not outcome.ok
        if self._tty:
            self.stream.write("\r" + self.render())
            if self.done == self.total:
                self.stream.write("\n")
        else:
            # Without a terminal, print about ten lines per campaign.
            step = max(1, self.total // 10)
            if self.done % step == 0 or self.done == self.total or not outcome.ok:
                self.stream.write(self.render() + "\n")
        self.stream.flush()


@dataclass
class CampaignReport:
    """The outcomes of a campaign, in seed order, and how long it took.

    ``scenario_arg`` is how the command line names the scenario (a built-in
    name or a file), for the commands that rerun failing seeds.
    """

    scenario: str
    mutant: str | None
    jobs: int
    outcomes: list[SeedOutcome]
    wall_s: float
    scenario_arg: str = ""
    where: str = ""

    @property
    def passes(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def failures(self) -> list[SeedOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def failing_seeds(self) -> list[int]:
        return [o.seed for o in self.failures]

    def sometimes_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for o in self.outcomes:
            for key, n in o.sometimes.items():
                totals[key] = totals.get(key, 0) + n
        return dict(sorted(totals.items()))

    def never_fired(self) -> list[str]:
        """Fault kinds enabled in some seed's plan that no seed ever fired."""
        enabled: set[str] = set()
        for o in self.outcomes:
            if not o.crashed and o.faults:
                enabled.update(o.enabled)
        return sorted(enabled - fired_kinds(self.sometimes_totals()))

    def table(self) -> str:
        """The summary table printed at the end of a campaign."""
        n = len(self.outcomes)
        runs = [o.wall_s for o in self.outcomes]
        mean = sum(runs) / n if n else 0.0
        rows = [
            ("scenario", self.scenario + (f" (mutant {self.mutant})" if self.mutant else "")),
            ("seeds", f"{n} on {self.where or f'{self.jobs} process(es)'}"),
            ("passed", str(self.passes)),
            ("failed", str(len(self.failures))),
            (
                "wall time",
                f"{self.wall_s:.1f}s (mean {mean:.2f}s per seed, max {max(runs, default=0):.2f}s)",
            ),
            ("messages", str(sum(o.messages for o in self.outcomes))),
        ]
        width = max(len(k) for k, _ in rows)
        out = [f"{k.ljust(width)}  {v}" for k, v in rows]
        if self.failures:
            out.append("")
            out.append("failing seeds (each with the command that reruns it):")
            for o in self.failures[:50]:
                out.append("  " + o.line())
                command = rerun_command(o.seed, self.scenario_arg or self.scenario, self.mutant)
                out.append("    " + command)
            if len(self.failures) > 50:
                out.append(f"  ... and {len(self.failures) - 50} more")
        totals = self.sometimes_totals()
        if totals:
            out.append("")
            out.append("sometimes counters (total over all seeds):")
            kw = max(len(k) for k in totals)
            out.extend(f"  {k.ljust(kw)}  {v}" for k, v in totals.items())
        never = self.never_fired()
        out.append("")
        out.append("enabled but never fired: " + (", ".join(never) if never else "(none)"))
        rules = self.rules()
        if rules is not None:
            from .coverage import render_report

            out.append("")
            out.append("reached (errors raised, protocol rules broken, effects carried out):")
            out.extend("  " + line for line in render_report(rules).splitlines())
        lines = self.lines()
        if lines is not None:
            from .reach import reach_report

            out.append("")
            out.append("lines of the product run (sim/reach.py says what is left out and why):")
            out.extend("  " + line for line in reach_report(lines).splitlines())
        return "\n".join(out)

    def rules(self) -> dict[str, dict[str, int]] | None:
        """The rule, error and effect counts summed over the seeds (``None`` if not counted)."""
        reports = [o.rules for o in self.outcomes if o.rules is not None]
        if not reports:
            return None
        from .coverage import merge_reports

        return merge_reports(reports)

    def lines(self) -> dict[str, set[int]] | None:
        """Every runtime and spec line some seed ran (``None`` if not measured)."""
        measured = [o.lines for o in self.outcomes if o.lines is not None]
        if not measured:
            return None
        merged: dict[str, set[int]] = {}
        for per_file in measured:
            for f, lines in per_file.items():
                merged.setdefault(f, set()).update(lines)
        return merged

    def save_failures(self, directory: str | Path) -> list[Path]:
        """Write each failing seed's trace file into ``directory``; the paths written."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for o in self.failures:
            if o.trace is None:
                continue
            path = out / f"seed-{o.seed}.json"
            path.write_text(json.dumps(o.trace, sort_keys=True, indent=1) + "\n")
            written.append(path)
        return written


SPARK_JOBS_IN_FLIGHT = 64
"""At most this many seeds are submitted to Spark at once (one single-task job each)."""


def _spark_context(master: str) -> Any:
    """The process's SparkContext on ``master``: the active one, or a new campaign session.

    Spark allows one context per process, so a context already running on another
    master is refused rather than silently used. A new one runs its Python workers on
    this interpreter (which has tidegate) unless ``PYSPARK_PYTHON`` says otherwise.
    """
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        if active.master != master:
            raise ValueError(
                f"this process already has a SparkContext on {active.master}: a campaign "
                f"cannot run on {master} here (Spark allows one context per process)"
            )
        return active
    from tidegate.replica.spark.session import spark_session

    unset = "PYSPARK_PYTHON" not in os.environ
    if unset:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        return spark_session(master, app_name="tidegate-sim-campaign").sparkContext
    finally:
        if unset:
            os.environ.pop("PYSPARK_PYTHON", None)


def _on_spark(tasks: list[Task], master: str) -> Iterator[SeedOutcome]:
    """Run each seed as a Spark task on ``master``; outcomes (and failing traces) come back.

    Each seed is a one-task job submitted from its own thread, so the cluster runs as
    many at once as it has task slots and outcomes stream back as seeds finish (a
    single job's ``toLocalIterator`` would run its partitions one after another). When
    the campaign ends early the jobs still queued or running are cancelled.
    """
    sc = _spark_context(master)
    group = f"tidegate-sim-campaign-{uuid.uuid4().hex}"

    def one(task: Task) -> SeedOutcome:
        sc.setJobGroup(group, f"tidegate sim seed {task[0]}", interruptOnCancel=True)
        outcomes: list[SeedOutcome] = sc.parallelize([task], 1).map(run_seed).collect()
        return outcomes[0]

    pool = ThreadPoolExecutor(min(len(tasks), SPARK_JOBS_IN_FLIGHT) or 1)
    futures = [pool.submit(one, task) for task in tasks]
    try:
        for done in as_completed(futures):
            yield done.result()
    finally:
        if not all(f.done() for f in futures):
            for f in futures:
                f.cancel()
            sc.cancelJobGroup(group)
        pool.shutdown(wait=True)


def _imap(tasks: list[Task], jobs: int, spark_master: str | None = None) -> Iterator[SeedOutcome]:
    if spark_master is not None:
        yield from _on_spark(tasks, spark_master)
        return
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield run_seed(task)
        return
    # fork: workers inherit the loaded modules and never re-import ``__main__`` (a CLI
    # entry point without a main guard would otherwise run again in every worker).
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with _pool(ctx, min(jobs, len(tasks))) as pool:
        yield from pool.imap_unordered(run_seed, tasks, chunksize=1)


def _pool(ctx: Any, processes: int) -> Any:
    """A pool of ``processes`` workers that never finalize this process's objects.

    The garbage of this process is collected before the workers fork, and what lives
    is frozen while they do: a forked worker's collections then skip the inherited
    heap, and never run the finalizers of objects whose resources it does not have.
    (A test session's leftover gRPC calls, collected in forked workers, made every
    collection there wait for threads that only exist in the parent: runs of a second
    took minutes.)
    """
    gc.collect()
    gc.freeze()
    try:
        return ctx.Pool(processes)
    finally:
        gc.unfreeze()


def run_campaign(
    seeds: Sequence[int],
    scenario: Scenario,
    *,
    mutant: str | None = None,
    jobs: int = 1,
    on_outcome: Callable[[SeedOutcome], None] | None = None,
    stop_after: int | None = None,
    spark_master: str | None = None,
    rules: bool = False,
    lines: bool = False,
    scenario_arg: str = "",
) -> CampaignReport:
    """Run every seed and summarise; ``stop_after`` failures end the campaign early.

    Seeds run in ``jobs`` processes of this machine, or, with ``spark_master``,
    as tasks on that Spark cluster (``local[2]``, ``spark://host:7077``...):
    outcomes and failing traces come back here either way. ``rules`` counts
    what the runs reached (:mod:`.coverage`); ``lines`` measures which runtime
    and spec lines ran (coverage.py; slower).
    """
    start = time.perf_counter()
    tasks: list[Task] = [(s, scenario.to_json(), mutant, rules, lines) for s in seeds]
    outcomes: list[SeedOutcome] = []
    failed = 0
    runs = _imap(tasks, jobs, spark_master)
    try:
        for outcome in runs:
            outcomes.append(outcome)
            failed += not outcome.ok
            if on_outcome is not None:
                on_outcome(outcome)
            if stop_after is not None and failed >= stop_after:
                break
    finally:
        close = getattr(runs, "close", None)
        if close is not None:
            close()
    outcomes.sort(key=lambda o: o.seed)
    where = f"Spark ({spark_master})" if spark_master else f"{max(1, jobs)} process(es)"
    return CampaignReport(
        scenario.name,
        mutant,
        max(1, jobs),
        outcomes,
        time.perf_counter() - start,
        scenario_arg,
        where,
    )
