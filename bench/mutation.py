"""Mutation score of the simulator: how many bugs nobody hand-picked its campaign finds.

A standard mutation tool, cosmic-ray (its core operators: arithmetic, comparison,
boolean and unary operators swapped, keywords and constants replaced, loops and
exception handlers changed), generates every mutant of the chosen modules of
``spec/`` and ``runtime/`` into a cosmic-ray session (SQLite, under ``build/``;
``cr-report`` reads it). This harness then runs, for each mutant of a
deterministic sample, the simulator's campaign alone -- no test suite::

    tidegate sim campaign --seeds 1..N --scenario small --jobs 1 --stop-after 1

in a copy of the package tree (one per parallel worker, under a temporary folder;
the repository's own files are never written), with the mutant's module replaced by
its mutated source, under a CPU budget (``RLIMIT_CPU``, 60 s by default) and a wall
limit (a multiple of it, for a loaded machine). A mutant is

* **killed** when the campaign reports a violation (exit 1) or the process crashes
  (an import error, an uncaught exception);
* a **timeout** when it is still running at the budget with no violation (a hang or
  a slowdown the mutant caused; mutation tools count these as detected, and so does
  the report's ``+t/o`` score);
* **survived** when every seed passes: either the mutant is *equivalent* (no
  behaviour changed) or the campaign misses a bug -- the list of survivors, with
  their diffs, is what a developer reads to tell which and to add a check.

Mutants inside annotations a module never evaluates (``from __future__ import
annotations``) are left out: they are equivalent by construction. The sample is drawn
only from mutants on lines the unmutated campaign executes
(coverage.py, the same measurement as ``tidegate sim campaign --lines``): a mutant
on a line no seed runs survives trivially, which the reach report
(``bench/sim.py --reach-seeds``) already measures; their number is reported per
package as ``unreached``. ``--unreached`` samples from every mutant instead.

The unmutated campaign runs first (the baseline): if it fails, or does not fit in
the budget, the benchmark stops. CPU time (``wait4``'s rusage of each campaign)
is printed beside wall time, since the machine is shared.

    python bench/mutation.py [--per-package 2] [--seeds 1..6] [--budget 60] [--jobs 2]
                             [--packages spec/compute,runtime/controller,...] [--all]
                             [--unreached] [--sample-seed 0] [--max-minutes M]
                             [--out build/mutation/report.json]

``make bench`` runs the bounded default (a few mutants per package); ``--per-package
N`` or ``--all`` measures more. The JSON report (``--out``) lists every mutant run.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import difflib
import io
import itertools
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

LAYOUT: dict[str, str] = {
    "tidegate": "tidegate",
    "spec": "tidegate/spec",
    "sim": "tidegate/sim",
    "runtime": "tidegate/runtime",
    "replica": "tidegate/replica",
}
"""Repository folder -> its place in a worker's import tree (as ``setup.py`` installs it)."""

DEFAULT_PACKAGES = (
    "spec/compute",
    "spec/compute_replica",
    "spec/frontier",
    "spec/protocol",
    "spec/storage",
    "runtime/catalog",
    "runtime/controller",
    "runtime/storage",
)
"""Folders whose modules the simulation executes (the reach report's most-run parts)."""

KILLED, SURVIVED, TIMEOUT = "killed", "survived", "timeout"
_FAILED = re.compile(r"^failed\s+[1-9]", re.MULTILINE)
"""The campaign's summary line of a run where some seed violated a property."""
TARGET_SCORE = 0.80


@dataclass(frozen=True)
class Mutant:
    """One cosmic-ray mutation: ``occurrence`` of ``operator`` in the module at ``path``."""

    job_id: str
    path: str
    """Relative to the repository (``spec/compute/controller.py``)."""
    operator: str
    occurrence: int
    line: int
    column: int = 0
    definition: str | None = None

    @property
    def package(self) -> str:
        """``spec.compute`` for ``spec/compute/x.py``; ``runtime`` for ``runtime/oracle.py``."""
        parts = Path(self.path).parts
        return ".".join(parts[:2] if len(parts) > 2 else parts[:1])


@dataclass
class Outcome:
    """What the campaign did with one mutant."""

    mutant: Mutant
    status: str
    """``killed``, ``survived`` or ``timeout``."""
    how: str
    """Why: ``violation``, ``crash (exit N)``, ``cpu budget``, ``wall limit``, ``all seeds passed``."""
    cpu_s: float
    wall_s: float
    diff: list[str] = field(default_factory=list)
    """The changed lines (``-`` original, ``+`` mutated)."""
    evidence: str = ""
    """The campaign's last lines of output (the violation or the traceback)."""


def classify(
    exit_code: int, stdout: str, stderr: str, *, wall_expired: bool, cpu_s: float, budget_s: float
) -> tuple[str, str]:
    """``(status, how)`` of a finished campaign run (``exit_code`` < 0: killed by that signal).

    ``tidegate sim campaign`` exits 0 when every seed passed and 1 when one violated a
    property (a crash inside a seed is reported as the violation ``simulator crashed``);
    anything else -- an uncaught exception, another exit code, a signal that is not the
    budget's -- is a crash of the process, which kills the mutant too.
    """
    if wall_expired:
        return TIMEOUT, "wall limit"
    # RLIMIT_CPU sends SIGXCPU at the budget and SIGKILL at the hard limit just past it
    # (the kernel's tick accounting runs a little ahead of the rusage reported here).
    if exit_code == -signal.SIGXCPU or (exit_code == -signal.SIGKILL and cpu_s >= 0.8 * budget_s):
        return TIMEOUT, "cpu budget"
    if exit_code == 0:
        return SURVIVED, "all seeds passed"
    if (
        exit_code == 1
        and "Traceback (most recent call last)" not in stderr
        and _FAILED.search(stdout)
    ):
        return KILLED, "violation"
    return KILLED, f"crash (exit {exit_code})"


def changed_lines(original: str, mutated: str) -> list[str]:
    """The lines a mutation changed, as ``-old`` / ``+new`` (stripped)."""
    out = []
    for line in difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(line[0] + line[1:].strip())
    return out


# -- generating mutants (cosmic-ray) ----------------------------------------------------------


def modules_of(root: Path, packages: Sequence[str]) -> list[str]:
    """The ``.py`` files (relative to ``root``) of each folder or module in ``packages``."""
    found: list[str] = []
    for pkg in packages:
        p = root / pkg
        files = [p] if p.is_file() else sorted(p.rglob("*.py"))
        for f in files:
            if "__pycache__" in f.parts:
                continue
            found.append(f.relative_to(root).as_posix())
    return found


def generate(root: Path, modules: Sequence[str], session: Path) -> list[Mutant]:
    """Every mutant cosmic-ray's operators make of ``modules``, recorded in the session."""
    from cosmic_ray.commands.init import init
    from cosmic_ray.work_db import WorkDB, use_db

    session.parent.mkdir(parents=True, exist_ok=True)
    if session.exists():
        session.unlink()
    cwd = os.getcwd()
    os.chdir(root)  # the session names modules relative to the repository, as cr-report shows
    try:
        with use_db(str(session), WorkDB.Mode.create) as db:
            init([Path(m) for m in modules], db, {})
            items = list(db.work_items)
    finally:
        os.chdir(cwd)
    mutants = []
    for item in items:
        for m in item.mutations:
            mutants.append(
                Mutant(
                    job_id=item.job_id,
                    path=Path(m.module_path).as_posix(),
                    operator=m.operator_name,
                    occurrence=m.occurrence,
                    line=m.start_pos[0],
                    column=m.start_pos[1],
                    definition=m.definition_name,
                )
            )
    mutants.sort(key=lambda m: (m.path, m.operator, m.occurrence))
    return mutants


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where a module's annotations are, when it never evaluates them.

    Under ``from __future__ import annotations`` an annotation is a string nobody runs,
    so cosmic-ray's operators make only equivalent mutants there (``int | None`` to
    ``int & None``); :func:`main` leaves them out. A module without that import
    evaluates its annotations, and keeps them.
    """
    tree = ast.parse(source)
    future = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    if not future:
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found: ast.expr | None = node.annotation
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found = node.returns
        else:
            continue
        if found is not None and found.end_lineno is not None and found.end_col_offset is not None:
            spans.append(
                ((found.lineno, found.col_offset), (found.end_lineno, found.end_col_offset))
            )
    return spans


def drop_annotations(root: Path, mutants: Sequence[Mutant]) -> list[Mutant]:
    """``mutants`` less those inside annotations that are never evaluated."""
    spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    kept = []
    for m in mutants:
        if m.path not in spans:
            spans[m.path] = annotation_spans((root / m.path).read_text())
        at = (m.line, m.column)
        if not any(start <= at < end for start, end in spans[m.path]):
            kept.append(m)
    return kept


def mutate(source: str, mutant: Mutant) -> str | None:
    """The mutated source (``None``: the operator found no such occurrence)."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    operator = get_operator(mutant.operator)()
    result: str | None = mutate_code(source, operator, mutant.occurrence)
    return result


def sample(
    mutants: Sequence[Mutant], per_package: int | None, seed: int
) -> dict[str, list[Mutant]]:
    """Per package, ``per_package`` mutants drawn deterministically (``None``: all of them)."""
    by_package: dict[str, list[Mutant]] = {}
    for m in mutants:
        by_package.setdefault(m.package, []).append(m)
    chosen = {}
    for pkg, ms in sorted(by_package.items()):
        if per_package is None or per_package >= len(ms):
            chosen[pkg] = list(ms)
        else:
            rng = random.Random(f"{seed}:{pkg}")
            chosen[pkg] = sorted(
                rng.sample(ms, per_package), key=lambda m: (m.path, m.operator, m.occurrence)
            )
    return chosen


# -- running a campaign in a worker's copy of the tree -----------------------------------------


@dataclass(frozen=True)
class Run:
    """One finished command: its exit code (negative: a signal), output, CPU and wall time."""

    exit_code: int
    stdout: str
    stderr: str
    cpu_s: float
    wall_s: float
    wall_expired: bool


def run_bounded(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    cpu_budget_s: float,
    wall_limit_s: float,
    niceness: int = 10,
) -> Run:
    """Run ``command`` under ``RLIMIT_CPU`` and a wall limit; its CPU time from ``wait4``.

    The command runs in a session of its own, so the wall limit kills it and anything
    it started. ``wait4`` reports this child's CPU alone, which the process-wide
    ``RUSAGE_CHILDREN`` would not while other workers run beside it.
    """
    soft = max(1, int(cpu_budget_s + 0.5))

    def limits() -> None:
        os.nice(niceness)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            preexec_fn=limits,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(wall_limit_s, kill)
        timer.start()
        # Wait for the end without reaping (the pid stays this child's while it is a
        # zombie), so the timer and the cleanup below can only ever signal its group.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        timer.cancel()
        timer.join()
        wall = time.perf_counter() - start
        with contextlib.suppress(ProcessLookupError):  # a stray grandchild does not outlive it
            os.killpg(proc.pid, signal.SIGKILL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Run(
            exit_code=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            cpu_s=usage.ru_utime + usage.ru_stime,
            wall_s=wall,
            wall_expired=expired.is_set(),
        )


class Trees:
    """One private copy of the package tree per worker, so mutants never meet.

    Each copy lays the repository's folders out as ``layout`` says (for tidegate, as
    ``setup.py`` installs them), and the campaign runs with ``PYTHONPATH`` at the copy,
    which Python searches before the editable install's finder. A mutant's module is
    written into one copy, run, and restored with its bytecode removed (a mutant of
    the same size written in the same second would otherwise load the stale ``.pyc``).
    """

    def __init__(self, root: Path, layout: Mapping[str, str], count: int, base: Path) -> None:
        self.root = root
        self.layout = dict(layout)
        self.dirs: list[Path] = []
        self._free: Queue[Path] = Queue()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for i in range(count):
            tree = base / f"worker-{i}"
            for src, dst in sorted(self.layout.items(), key=lambda kv: kv[1]):
                shutil.copytree(root / src, tree / dst, ignore=ignore, dirs_exist_ok=True)
            self.dirs.append(tree)
            self._free.put(tree)

    def env(self, tree: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(tree)
        env.pop("COVERAGE_PROCESS_START", None)
        return env

    def place(self, tree: Path, path: str) -> Path:
        """Where the repository file ``path`` is in ``tree``."""
        best = max((s for s in self.layout if path == s or path.startswith(s + "/")), key=len)
        return tree / self.layout[best] / path[len(best) :].lstrip("/")

    def run_mutant(
        self, mutant: Mutant, mutated: str, run: Callable[[Path, dict[str, str]], Run]
    ) -> Run:
        tree = self._free.get()
        target = self.place(tree, mutant.path)
        original = target.read_text()
        try:
            target.write_text(mutated)
            _drop_bytecode(target)
            return run(tree, self.env(tree))
        finally:
            target.write_text(original)
            _drop_bytecode(target)
            self._free.put(tree)


def _evidence(how: str, stdout: str, stderr: str) -> str:
    """What killed the mutant: the campaign's first failing seed, or the crash's last lines."""
    if how == "violation":
        lines = stdout.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("failing seeds"):
                return "\n".join(x.strip() for x in lines[i + 1 : i + 3])
    return "\n".join((stderr or stdout).strip().splitlines()[-6:])


def _drop_bytecode(module: Path) -> None:
    for pyc in (module.parent / "__pycache__").glob(module.stem + ".*.pyc"):
        pyc.unlink(missing_ok=True)


def run_mutants(
    chosen: Iterable[Mutant],
    trees: Trees,
    command: Sequence[str],
    *,
    budget_s: float,
    wall_factor: float,
    jobs: int,
    on_outcome: Callable[[Outcome], None] | None = None,
    deadline: float | None = None,
) -> list[Outcome]:
    """Run ``command`` once per mutant, ``jobs`` at a time, each in a tree of its own;
    mutants not started by ``deadline`` (``time.perf_counter``) are not run."""

    def one(mutant: Mutant) -> Outcome | None:
        if deadline is not None and time.perf_counter() > deadline:
            return None
        original = (trees.root / mutant.path).read_text()
        mutated = mutate(original, mutant)
        if mutated is None:  # cosmic-ray's "no-test": nothing to run
            return Outcome(mutant, SURVIVED, "not applicable", 0.0, 0.0)

        def go(tree: Path, env: dict[str, str]) -> Run:
            return run_bounded(
                command,
                cwd=tree,
                env=env,
                cpu_budget_s=budget_s,
                wall_limit_s=budget_s * wall_factor,
            )

        r = trees.run_mutant(mutant, mutated, go)
        status, how = classify(
            r.exit_code,
            r.stdout,
            r.stderr,
            wall_expired=r.wall_expired,
            cpu_s=r.cpu_s,
            budget_s=budget_s,
        )
        tail = _evidence(how, r.stdout, r.stderr)
        outcome = Outcome(
            mutant,
            status,
            how,
            r.cpu_s,
            r.wall_s,
            diff=changed_lines(original, mutated),
            evidence=tail if status == KILLED else "",
        )
        if on_outcome is not None:
            on_outcome(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [o for o in pool.map(one, chosen) if o is not None]


# -- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackageScore:
    package: str
    killed: int
    survived: int
    timeout: int
    total: int
    generated: int
    """Mutants cosmic-ray made of the package (before sampling)."""
    unreached: int
    """Of those, on lines the unmutated campaign never ran (left out of the sample)."""

    @property
    def score(self) -> float:
        """Killed over run: the campaign's verdict caught the mutant."""
        return self.killed / self.total if self.total else 0.0

    @property
    def score_with_timeouts(self) -> float:
        """As mutation tools count it: a timeout is detected too."""
        return (self.killed + self.timeout) / self.total if self.total else 0.0


def scores(
    outcomes: Sequence[Outcome],
    generated: Mapping[str, int] | None = None,
    unreached: Mapping[str, int] | None = None,
) -> list[PackageScore]:
    """Per package (and ``all``), the counts of each status and the score."""
    packages = sorted({o.mutant.package for o in outcomes} | set(generated or {}))
    rows = []
    for pkg in [*packages, "all"]:
        mine = [o for o in outcomes if pkg == "all" or o.mutant.package == pkg]
        gen = sum((generated or {}).values()) if pkg == "all" else (generated or {}).get(pkg, 0)
        unr = sum((unreached or {}).values()) if pkg == "all" else (unreached or {}).get(pkg, 0)
        rows.append(
            PackageScore(
                pkg,
                killed=sum(o.status == KILLED for o in mine),
                survived=sum(o.status == SURVIVED for o in mine),
                timeout=sum(o.status == TIMEOUT for o in mine),
                total=len(mine),
                generated=gen,
                unreached=unr,
            )
        )
    return rows


def render(rows: Sequence[PackageScore], outcomes: Sequence[Outcome]) -> str:
    """The score table and the surviving mutants, for a developer to judge."""
    out = [
        f"{'package':24s} {'killed':>6s} {'surv.':>6s} {'t/o':>4s} {'run':>5s} "
        f"{'score':>6s} {'+t/o':>6s} {'generated':>9s} {'unreached':>9s}"
    ]
    for r in rows:
        out.append(
            f"{r.package:24s} {r.killed:6d} {r.survived:6d} {r.timeout:4d} {r.total:5d} "
            f"{r.score:6.0%} {r.score_with_timeouts:6.0%} {r.generated:9d} {r.unreached:9d}"
        )
    survivors = [o for o in outcomes if o.status == SURVIVED]
    out.append(
        f"surviving mutants ({len(survivors)}; each equivalent or a bug the campaign misses):"
    )
    for o in sorted(survivors, key=lambda o: (o.mutant.path, o.mutant.line)):
        m = o.mutant
        where = f"{m.path}:{m.line}" + (f" ({m.definition})" if m.definition else "")
        out.append(f"  {where}  {m.operator}#{m.occurrence}")
        out.extend(f"      {d}" for d in o.diff[:4])
    timeouts = [o for o in outcomes if o.status == TIMEOUT]
    if timeouts:
        out.append(f"timeouts ({len(timeouts)}):")
        for o in timeouts:
            m = o.mutant
            out.append(f"  {m.path}:{m.line}  {m.operator}#{m.occurrence}  ({o.how})")
    return "\n".join(out)


def to_json(
    rows: Sequence[PackageScore], outcomes: Sequence[Outcome], meta: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "meta": dict(meta),
        "packages": [
            {
                **dataclasses.asdict(r),
                "score": r.score,
                "score_with_timeouts": r.score_with_timeouts,
            }
            for r in rows
        ],
        "mutants": [
            {
                **dataclasses.asdict(o.mutant),
                "package": o.mutant.package,
                "status": o.status,
                "how": o.how,
                "cpu_s": round(o.cpu_s, 2),
                "wall_s": round(o.wall_s, 2),
                "diff": o.diff,
                "evidence": o.evidence,
            }
            for o in outcomes
        ],
    }


def record(session: Path, outcomes: Sequence[Outcome]) -> None:
    """The outcomes into the cosmic-ray session, so ``cr-report`` shows them too."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        for o in outcomes:
            test = TestOutcome.SURVIVED if o.status == SURVIVED else TestOutcome.KILLED
            db.set_result(
                o.mutant.job_id,
                WorkResult(
                    worker_outcome=WorkerOutcome.NORMAL,
                    test_outcome=test,
                    output=f"{o.status}: {o.how}\n{o.evidence}",
                    diff="\n".join(o.diff),
                ),
            )


# -- the benchmark --------------------------------------------------------------------------------


def campaign_command(seeds: str, scenario: str) -> list[str]:
    """The campaign every mutant meets: one process, stopping at the first violation."""
    return [
        sys.executable,
        "-m",
        "tidegate",
        "sim",
        "campaign",
        "--seeds",
        seeds,
        "--scenario",
        scenario,
        "--jobs",
        "1",
        "--stop-after",
        "1",
    ]


def executed_lines(seeds: str, scenario: str, jobs: int) -> dict[str, set[int]]:
    """Lines of each repository module (relative path) the unmutated campaign runs."""
    from tidegate.sim.campaign import parse_seeds, run_campaign
    from tidegate.sim.scenario import SCENARIOS

    report = run_campaign(parse_seeds(seeds), SCENARIOS[scenario](), jobs=jobs, lines=True)
    if report.failures:
        raise SystemExit(f"baseline: the unmutated campaign fails: {report.table()}")
    ran: dict[str, set[int]] = {}
    pkg_root = Path(sys.modules["tidegate"].__file__ or "").resolve().parent
    for f, lines in (report.lines() or {}).items():
        real = Path(os.path.realpath(f))
        try:
            rel = real.relative_to(ROOT).as_posix()
        except ValueError:
            try:
                rel = real.relative_to(pkg_root).as_posix()
            except ValueError:
                continue
        ran.setdefault(rel, set()).update(lines)
    return ran


def _cpu_with_children() -> float:
    """CPU of this process and its reaped children (the coverage run's forked workers)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--packages",
        default=",".join(DEFAULT_PACKAGES),
        help="comma-separated folders or modules of the repository to mutate",
    )
    ap.add_argument(
        "--per-package", type=int, default=2, help="mutants sampled per package (default 2)"
    )
    ap.add_argument("--all", action="store_true", help="every mutant, not a sample")
    ap.add_argument("--sample-seed", type=int, default=0, help="seed of the deterministic sample")
    ap.add_argument(
        "--unreached",
        action="store_true",
        help="sample from every mutant, also those on lines the campaign never runs",
    )
    ap.add_argument("--seeds", default="1..6", help="the campaign's seeds per mutant (A..B)")
    ap.add_argument("--scenario", default="small")
    ap.add_argument("--budget", type=float, default=60.0, help="CPU seconds per mutant")
    ap.add_argument(
        "--wall-factor", type=float, default=5.0, help="wall limit = budget x this (busy machines)"
    )
    ap.add_argument("--jobs", type=int, default=2, help="mutants run in parallel")
    ap.add_argument(
        "--max-minutes",
        type=float,
        help="start no mutant after this many minutes (the report covers those run)",
    )
    ap.add_argument("--out", default=str(ROOT / "build" / "mutation" / "report.json"))
    ap.add_argument("--session", default=str(ROOT / "build" / "mutation" / "session.sqlite"))
    args = ap.parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows in a log file too

    start_wall, start_cpu = time.perf_counter(), time.process_time()
    modules = modules_of(ROOT, [p.strip() for p in args.packages.split(",") if p.strip()])
    session = Path(args.session)
    mutants = generate(ROOT, modules, session)
    made = len(mutants)
    mutants = drop_annotations(ROOT, mutants)
    generated: dict[str, int] = {}
    for m in mutants:
        generated[m.package] = generated.get(m.package, 0) + 1
    print(
        f"mutation: cosmic-ray made {made} mutants of {len(modules)} modules "
        f"({time.perf_counter() - start_wall:.0f} s; session {session}); "
        f"{made - len(mutants)} in annotations never evaluated left out"
    )

    unreached: dict[str, int] = {}
    population = mutants
    if not args.unreached:
        t0, c0 = time.perf_counter(), _cpu_with_children()
        ran = executed_lines(args.seeds, args.scenario, args.jobs)
        population = [m for m in mutants if m.line in ran.get(m.path, ())]
        for m in mutants:
            if m.line not in ran.get(m.path, ()):
                unreached[m.package] = unreached.get(m.package, 0) + 1
        print(
            f"  lines the campaign runs (coverage.py, seeds {args.seeds} of {args.scenario}): "
            f"{len(population)} mutants on them, {len(mutants) - len(population)} on lines it "
            f"never runs ({time.perf_counter() - t0:.0f} s wall, "
            f"{_cpu_with_children() - c0:.0f} s CPU)"
        )
    chosen = sample(population, None if args.all else args.per_package, args.sample_seed)
    # Round robin over the packages, so a run cut short by --max-minutes still covers each.
    todo = [m for row in itertools.zip_longest(*chosen.values()) for m in row if m is not None]
    command = campaign_command(args.seeds, args.scenario)
    print(f"  campaign per mutant: {' '.join(command[1:])}")
    print(
        f"  {len(todo)} mutants ({'all' if args.all else f'{args.per_package} per package'}, "
        f"sample seed {args.sample_seed}) on {args.jobs} workers; budget {args.budget:.0f} s "
        f"CPU, wall limit {args.budget * args.wall_factor:.0f} s"
    )

    with tempfile.TemporaryDirectory(prefix="tidegate-mutation-") as tmp:
        trees = Trees(ROOT, LAYOUT, max(1, args.jobs), Path(tmp))
        base = run_bounded(
            command,
            cwd=trees.dirs[0],
            env=trees.env(trees.dirs[0]),
            cpu_budget_s=args.budget,
            wall_limit_s=args.budget * args.wall_factor,
        )
        status, how = classify(
            base.exit_code,
            base.stdout,
            base.stderr,
            wall_expired=base.wall_expired,
            cpu_s=base.cpu_s,
            budget_s=args.budget,
        )
        print(f"  baseline (unmutated): {how}, {base.cpu_s:.1f} s CPU, {base.wall_s:.1f} s wall")
        if status != SURVIVED:
            print(base.stdout[-2000:], base.stderr[-2000:], sep="\n", file=sys.stderr)
            print(
                "mutation: the unmutated campaign does not pass in budget; stopping",
                file=sys.stderr,
            )
            return 1
        if base.cpu_s > 0.8 * args.budget:
            print(
                "mutation: the unmutated campaign takes more than 80% of the budget; "
                "give fewer --seeds or a larger --budget",
                file=sys.stderr,
            )
            return 1
        done = [0]

        def progress(o: Outcome) -> None:
            done[0] += 1
            m = o.mutant
            print(
                f"  [{done[0]:3d}/{len(todo)}] {o.status:8s} {m.path}:{m.line} "
                f"{m.operator}#{m.occurrence} ({o.how}; {o.cpu_s:.1f} s CPU, {o.wall_s:.1f} s wall)",
                flush=True,
            )

        outcomes = run_mutants(
            todo,
            trees,
            command,
            budget_s=args.budget,
            wall_factor=args.wall_factor,
            jobs=args.jobs,
            on_outcome=progress,
            deadline=None if args.max_minutes is None else start_wall + 60 * args.max_minutes,
        )

    rows = scores(outcomes, generated, unreached)
    record(session, outcomes)
    print(render(rows, outcomes))
    cpus = [o.cpu_s for o in outcomes] or [0.0]
    total = next(r for r in rows if r.package == "all")
    print(
        f"mutation score {total.score:.0%} killed, {total.score_with_timeouts:.0%} with timeouts "
        f"(target >= {TARGET_SCORE:.0%} of non-equivalent mutants); {len(outcomes)} mutants "
        f"({len(todo) - len(outcomes)} sampled but not started by --max-minutes) in "
        f"{time.perf_counter() - start_wall:.0f} s wall, campaign CPU per mutant median "
        f"{statistics.median(cpus):.1f} s (total {sum(cpus):.0f} s; "
        f"{time.process_time() - start_cpu:.0f} s CPU in this process)"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": command[1:],
        "argv": list(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "baseline_cpu_s": round(base.cpu_s, 2),
        "budget_s": args.budget,
        "jobs": args.jobs,
    }
    out.write_text(json.dumps(to_json(rows, outcomes, meta), indent=1))
    print(f"  report: {out}   (cr-report {session})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
