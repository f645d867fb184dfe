"""Campaigns: many seeds of one scenario, in parallel processes, summarised.

Each seed is an independent, deterministic run; a campaign farms seeds out to
``jobs`` worker processes (``multiprocessing``), reports progress as a plain
text bar, and ends with a summary: passes, failures, wall time, the failing
seeds with their broken property, the totals of the "sometimes" counters, and
the fault kinds that were enabled but never fired (a fault hook that is never
installed makes a campaign falsely green).
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from .faults import FaultKind
from .scenario import Scenario

__all__ = [
    "CampaignReport",
    "ProgressBar",
    "SeedOutcome",
    "fired_kinds",
    "parse_seeds",
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

    def line(self) -> str:
        if self.ok:
            return f"seed {self.seed}: ok"
        return f"seed {self.seed}: {self.property} at {self.at_ms}ms: {self.message}"


def _options(seed: int, scenario: Scenario, mutant: str | None) -> Any:
    from .run import RunOptions

    return RunOptions(seed=seed, scenario=scenario, mutant=mutant, trace_tail=50)


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
    )


def run_seed(task: tuple[int, dict[str, Any], str | None]) -> SeedOutcome:
    """Run one seed (a worker-process entry point: arguments are plain data)."""
    from .run import run_simulation

    seed, scenario_json, mutant = task
    scenario = Scenario.from_json(scenario_json)
    start = time.perf_counter()
    try:
        result = run_simulation(_options(seed, scenario, mutant))
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
    return outcome


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
    """The outcomes of a campaign, in seed order, and how long it took."""

    scenario: str
    mutant: str | None
    jobs: int
    outcomes: list[SeedOutcome]
    wall_s: float

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
            ("seeds", f"{n} on {self.jobs} process(es)"),
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
            out.append("failing seeds:")
            out.extend("  " + o.line() for o in self.failures[:50])
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
        return "\n".join(out)


def _imap(tasks: list[tuple[int, dict[str, Any], str | None]], jobs: int) -> Iterator[SeedOutcome]:
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield run_seed(task)
        return
    # fork: workers inherit the loaded modules and never re-import ``__main__`` (a CLI
    # entry point without a main guard would otherwise run again in every worker).
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ctx.Pool(min(jobs, len(tasks))) as pool:
        yield from pool.imap_unordered(run_seed, tasks, chunksize=1)


def run_campaign(
    seeds: Sequence[int],
    scenario: Scenario,
    *,
    mutant: str | None = None,
    jobs: int = 1,
    on_outcome: Callable[[SeedOutcome], None] | None = None,
    stop_after: int | None = None,
) -> CampaignReport:
    """Run every seed (``jobs`` processes); ``stop_after`` failures end the campaign early."""
    start = time.perf_counter()
    tasks = [(s, scenario.to_json(), mutant) for s in seeds]
    outcomes: list[SeedOutcome] = []
    failed = 0
    runs = _imap(tasks, jobs)
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
    return CampaignReport(
        scenario.name, mutant, max(1, jobs), outcomes, time.perf_counter() - start
    )
