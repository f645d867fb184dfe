"""Shrinking a failing run to a small reproducer, by delta debugging over faults *and* client actions.

Given options whose run breaks a property, :func:`shrink` keeps the seed and
looks for a smaller run that breaks the *same* property. Every candidate is a
full, deterministic run of an explicit plan (faults and client actions), so
the result replays byte for byte (:mod:`.replay`). The steps, repeated until a
whole pass removes nothing or the budget of runs is spent:

1. what happens after a safety violation goes: later faults and actions, the
   rest of the run's duration, and the quiet phase (it serves liveness checks);
2. whole kinds removed at once (every ``peek``, every ``cut_connection``, ...),
   the largest kind first: most of a workload is usually beside the point, and
   one run shows it;
3. (a liveness violation) the active phase ended just after the last fault or
   action left, so that every later candidate is shorter; again after step 4;
4. delta debugging (ddmin) over the faults, then over the client actions;
5. each remaining fault made shorter (its duration halved while it still fails);
6. the scenario made smaller: the quiet phase halved (never below
   :func:`min_quiet_ms`), dataflows, sinks and sources nothing needs removed, fewer
   replicas.

The size of a reproducer is its number of steps: faults plus client actions.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from tidegate.spec.plan import gets

from .faults import Action, Fault, FaultPlan
from .scenario import Scenario

__all__ = ["NotFailing", "ShrinkResult", "describe", "min_quiet_ms", "replay_command", "shrink"]

Runner = Callable[[Any], Any]
T = TypeVar("T")


class NotFailing(ValueError):
    """The run to shrink does not fail: there is nothing to minimise."""


@dataclass
class ShrinkResult:
    """The smallest failing run found, and how it got there."""

    options: Any
    result: Any
    violation: Any
    original_steps: int
    original_faults: int
    original_duration_ms: int
    runs: int
    wall_s: float = 0.0
    steps: list[str] = field(default_factory=list)

    @property
    def plan(self) -> FaultPlan:
        """The reproducer's plan (faults and client actions)."""
        plan: FaultPlan = self.result.plan
        return plan

    @property
    def size(self) -> int:
        """Faults plus client actions."""
        return self.plan.steps

    @property
    def scenario(self) -> Scenario:
        scenario: Scenario = self.options.scenario
        return scenario


class _Search:
    """The current smallest failing options, and a budgeted way to try a candidate."""

    def __init__(
        self,
        options: Any,
        result: Any,
        run: Runner,
        max_runs: int,
        on_better: Callable[[Any, Any], None] | None = None,
    ) -> None:
        self.on_better = on_better
        self.jobs = 1
        self.pool: Any = None
        self.deadline: float | None = None
        self.options = options
        self.result = result
        self.violation = result.violation
        self.property = self.violation.property
        self._run = run
        self.runs = 0
        self.max_runs = max_runs
        self.steps: list[str] = []

    @property
    def exhausted(self) -> bool:
        return self.runs >= self.max_runs

    @property
    def plan(self) -> FaultPlan:
        plan: FaultPlan = self.options.plan
        return plan

    def out_of_time(self) -> bool:
        """Past the deadline (then the budget of runs ends here)."""
        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.max_runs = min(self.max_runs, self.runs)
        return self.exhausted

    def attempt(self, options: Any, step: str) -> bool:
        """Run ``options``; adopt them if they break the same property."""
        return self.attempt_first([(options, step)]) == 0

    def attempt_first(self, candidates: Sequence[tuple[Any, str]]) -> int | None:
        """Try ``candidates`` in order and adopt the first that breaks the same property
        (its index; ``None`` if none does). With a pool, ``jobs`` of them run at a time: the
        one adopted is the one a run in order would have adopted, so the reproducer does not
        depend on the number of processes (only the runs spent do)."""
        i = 0
        while i < len(candidates) and not self.out_of_time():
            batch = candidates[i : i + min(self.jobs, self.max_runs - self.runs)]
            results = self._results([options for options, _ in batch])
            self.runs += len(batch)
            for j, result in enumerate(results):
                if self._adopt(batch[j][0], batch[j][1], result):
                    return i + j
            i += len(batch)
        return None

    def _results(self, batch: Sequence[Any]) -> list[Any]:
        if self.pool is None or len(batch) == 1:
            return [_run_safely(self._run, options) for options in batch]
        return list(self.pool.map(_run_safely, [self._run] * len(batch), batch))

    def _adopt(self, options: Any, step: str, result: Any) -> bool:
        if result is None:  # a candidate that crashes the simulator is not a reproducer
            return False
        v = result.violation
        if v is None or v.property != self.property:
            return False
        # The plan as run: the actions that were performed (others were no-ops).
        self.options = replace(options, plan=result.plan)
        self.result, self.violation = result, v
        self.steps.append(step)
        if self.on_better is not None:
            self.on_better(self.options, result)
        return True


def _run_safely(run: Runner, options: Any) -> Any:
    """``run(options)``, or ``None`` if the simulator itself crashed on it."""
    try:
        return run(options)
    except Exception:
        return None


def _with(
    options: Any, *, faults: Sequence[Fault] | None = None, actions: Sequence[Action] | None = None
) -> Any:
    plan: FaultPlan = options.plan
    return replace(
        options,
        plan=FaultPlan(
            tuple(plan.faults if faults is None else faults),
            plan.enabled,
            tuple(plan.actions or () if actions is None else actions),
        ),
    )


def _ddmin(
    search: _Search,
    items: Callable[[], Sequence[T]],
    rebuild: Callable[[Sequence[T]], Any],
    what: str,
    text: Callable[[T], str],
) -> None:
    """Delta debugging: remove chunks of ``items()`` while the failure persists."""
    n = 2
    while not search.exhausted:
        current = list(items())
        if not current:
            return
        if len(current) == 1:
            search.attempt(rebuild([]), f"removed the last {what}: {text(current[0])}")
            return
        n = min(n, len(current))
        size = -(-len(current) // n)
        chunks = [current[i : i + size] for i in range(0, len(current), size)]
        candidates = []
        for i, chunk in enumerate(chunks):
            rest = [x for j, c in enumerate(chunks) if j != i for x in c]
            shown = ", ".join(text(x) for x in chunk[:3]) + (", ..." if len(chunk) > 3 else "")
            candidates.append((rebuild(rest), f"removed {len(chunk)} {what}(s): {shown}"))
        reduced = search.attempt_first(candidates) is not None
        if reduced:
            n = max(n - 1, 2)
        else:
            if n >= len(current):
                return
            n = min(2 * n, len(current))


def _drop_kinds(search: _Search, actions: bool) -> None:
    """Remove every fault (then, with ``actions``, every client action) of one kind at a time,
    the commonest kind first."""
    kinds = _kinds_by_count(f.kind.value for f in search.plan.faults)
    while kinds and not search.exhausted:
        # Each candidate from the plan as it is now; after one is adopted, the kinds after
        # it are tried on the new plan (as one run after another would).
        candidates = [
            (
                _with(search.options, faults=[f for f in search.plan.faults if f.kind.value != k]),
                f"removed every {k} fault",
            )
            for k in kinds
        ]
        taken = search.attempt_first(candidates)
        kinds = [] if taken is None else kinds[taken + 1 :]
    if not actions:
        return
    kinds = _kinds_by_count(a.kind for a in search.plan.actions or ())
    while kinds and not search.exhausted:
        candidates = [
            (
                _with(
                    search.options, actions=[a for a in search.plan.actions or () if a.kind != k]
                ),
                f"removed every {k} action",
            )
            for k in kinds
        ]
        taken = search.attempt_first(candidates)
        kinds = [] if taken is None else kinds[taken + 1 :]


def _kinds_by_count(kinds: Iterable[str]) -> list[str]:
    counts: dict[str, int] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    return sorted(counts, key=lambda k: (-counts[k], k))


def _cut_at_violation(search: _Search) -> None:
    """Drop what happens after a safety violation: later faults and actions, and the duration."""
    at = int(search.violation.at_ms)
    sc: Scenario = search.options.scenario
    if at >= sc.duration_ms:
        return  # a liveness violation: the whole run matters
    plan = search.plan
    faults = [f for f in plan.faults if f.at_ms <= at]
    actions = [a for a in plan.actions or () if a.at_ms <= at]
    if len(faults) < len(plan.faults) or len(actions) < len(plan.actions or ()):
        search.attempt(
            _with(search.options, faults=faults, actions=actions),
            f"removed {len(plan.faults) - len(faults)} fault(s) and "
            f"{len(plan.actions or ()) - len(actions)} action(s) after the violation at {at}ms",
        )
    cut = max(200, -(-(at + 1) // 100) * 100)
    sc = search.options.scenario
    if cut < sc.duration_ms:
        search.attempt(
            replace(search.options, scenario=replace(sc, duration_ms=cut)),
            f"duration_ms {sc.duration_ms} -> {cut} (just past the violation)",
        )
    # No quiet phase either: it is there for liveness checks. Every candidate that no longer
    # fails then ends at once, which is most of what shrinking spends its time on.
    sc = search.options.scenario
    if sc.quiet_ms:
        search.attempt(
            replace(search.options, scenario=replace(sc, quiet_ms=0)),
            f"quiet_ms {sc.quiet_ms} -> 0 (a safety violation)",
        )


def _cut_duration(search: _Search) -> None:
    """End the active phase just after the last remaining fault or action (the quiet phase
    follows as before): every later candidate runs that much less."""
    sc: Scenario = search.options.scenario
    plan = search.plan
    last = max(
        [f.at_ms + f.duration_ms for f in plan.faults] + [a.at_ms for a in plan.actions or ()],
        default=0,
    )
    cut = max(200, -(-(last + 1) // 100) * 100)
    if cut < sc.duration_ms and int(search.violation.at_ms) >= sc.duration_ms:
        search.attempt(
            replace(search.options, scenario=replace(sc, duration_ms=cut)),
            f"duration_ms {sc.duration_ms} -> {cut} (just past the last fault or action)",
        )


def _shorten_faults(search: _Search) -> None:
    i = 0
    while i < len(search.plan.faults) and not search.exhausted:
        f = search.plan.faults[i]
        shorter = f.duration_ms // 2
        if shorter < 10 or shorter == f.duration_ms:
            i += 1
            continue
        faults = list(search.plan.faults)
        faults[i] = replace(f, duration_ms=shorter)
        if not search.attempt(
            _with(search.options, faults=faults), f"shortened {f.text()} to {shorter}ms"
        ):
            i += 1


def min_quiet_ms() -> int:
    """The shortest quiet phase a reproducer may have: the runtime's longest reconnect backoff
    plus a second. A shorter one can leave a replica that failed often unconnected when the
    liveness checks run, which breaks the same liveness property for another reason than the
    bug being shrunk (a false reproducer)."""
    from tidegate.runtime.controller.driver import DEFAULT_BACKOFF

    return int(DEFAULT_BACKOFF.cap_s * 1000) + 1000


def _smaller_scenario(search: _Search) -> None:
    floor = min_quiet_ms()
    while not search.exhausted:
        sc: Scenario = search.options.scenario
        half = max(sc.quiet_ms // 2, floor)
        if half >= sc.quiet_ms or not search.attempt(
            replace(search.options, scenario=replace(sc, quiet_ms=half)),
            f"quiet_ms {sc.quiet_ms} -> {half}",
        ):
            break
    named = {
        str(a.args.get(key, ""))
        for a in search.plan.actions or ()
        for key in ("dataflow", "target", "sink", "source", "upstream")
    }
    for d in list(search.options.scenario.dataflows):
        sinks_read = {k.input for k in search.options.scenario.sinks}
        if search.exhausted or d.name in named or d.name in sinks_read:
            continue
        sc = search.options.scenario
        kept = tuple(x for x in sc.dataflows if x.name != d.name)
        search.attempt(
            replace(search.options, scenario=replace(sc, dataflows=kept)),
            f"without dataflow {d.name}",
        )
    for k in list(search.options.scenario.sinks):
        if search.exhausted or k.name in named:
            continue
        sc = search.options.scenario
        search.attempt(
            replace(
                search.options, scenario=replace(sc, sinks=tuple(x for x in sc.sinks if x != k))
            ),
            f"without sink {k.name}",
        )
    for src in list(search.options.scenario.sources):
        sc = search.options.scenario
        read = {str(g) for d in sc.dataflows for g in gets(d.plan)} | {k.input for k in sc.sinks}
        if search.exhausted or src.id in named or src.upstream in named or src.id in read:
            continue
        search.attempt(
            replace(
                search.options,
                scenario=replace(sc, sources=tuple(x for x in sc.sources if x != src)),
            ),
            f"without source {src.name}",
        )
    while not search.exhausted and search.options.scenario.replicas > 1:
        sc = search.options.scenario
        if not search.attempt(
            replace(search.options, scenario=replace(sc, replicas=sc.replicas - 1)),
            f"replicas {sc.replicas} -> {sc.replicas - 1}",
        ):
            break


def shrink(
    options: Any,
    *,
    run: Runner | None = None,
    max_runs: int = 200,
    max_seconds: float | None = None,
    workload: bool = True,
    log: Callable[[str], None] | None = None,
    on_better: Callable[[Any, Any], None] | None = None,
    jobs: int = 1,
) -> ShrinkResult:
    """Minimise a failing run (see the module docstring); raises :class:`NotFailing` if it passes.

    ``options.plan`` may be ``None`` (generated from the seed): the plan the
    run used, client actions included, is made explicit first (it drives the
    same run). ``workload=False`` keeps the client actions and the scenario.
    ``max_seconds`` bounds the wall time as ``max_runs`` bounds the runs.
    ``on_better(options, result)`` is called with the failing run first and then
    with every smaller reproducer found, as soon as it is found: a caller that
    saves it keeps the best reproducer so far if the shrink is killed. ``jobs``
    processes run candidates side by side (with the default ``run`` only); the
    reproducer is the one a single process finds.
    """
    parallel = jobs > 1 and run is None
    if run is None:
        from .run import run_simulation

        run = run_simulation
    start = time.perf_counter()
    first = run(options)
    if first.violation is None:
        raise NotFailing(f"seed {options.seed} passes: nothing to shrink")
    explicit = replace(options, plan=first.plan)
    if on_better is not None:
        on_better(explicit, first)
    search = _Search(explicit, first, run, max_runs, on_better)
    if max_seconds is not None:
        search.deadline = start + max_seconds
    with _processes(jobs if parallel else 1) as pool:
        search.pool, search.jobs = pool, jobs if pool is not None else 1
        _search(search, workload, log)
    return ShrinkResult(
        search.options,
        search.result,
        search.violation,
        first.plan.steps,
        len(first.plan.faults),
        options.scenario.duration_ms,
        search.runs + 1,
        time.perf_counter() - start,
        search.steps,
    )


@contextlib.contextmanager
def _processes(jobs: int) -> Iterator[Any]:
    """A pool of ``jobs`` worker processes (forked where the platform can), or ``None``."""
    if jobs <= 1:
        yield None
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        yield pool


def _search(search: _Search, workload: bool, log: Callable[[str], None] | None) -> None:
    """The phases of the module docstring, repeated while a pass finds something."""
    phases: list[tuple[str, Callable[[_Search], None]]] = [
        ("after the violation", _cut_at_violation),
        ("whole kinds", lambda s: _drop_kinds(s, actions=workload)),
        ("duration", _cut_duration),
        (
            "faults",
            lambda s: _ddmin(
                s,
                lambda: s.plan.faults,
                lambda kept: _with(s.options, faults=kept),
                "fault",
                lambda f: f.text(),
            ),
        ),
    ]
    if workload:
        phases.append(
            (
                "client actions",
                lambda s: _ddmin(
                    s,
                    lambda: s.plan.actions or (),
                    lambda kept: _with(s.options, actions=kept),
                    "action",
                    lambda a: a.text(),
                ),
            )
        )
    phases.append(("duration", _cut_duration))
    phases.append(("fault durations", _shorten_faults))
    if workload:
        phases.append(("scenario", _smaller_scenario))
    # Repeat until a whole pass removes nothing (a smaller workload can make faults
    # removable, and the other way round), within the budget.
    progress = True
    while progress and not search.exhausted:
        before = len(search.steps)
        for name, phase in phases:
            done = len(search.steps)
            phase(search)
            if log is not None:
                log(
                    f"shrink {name}: {len(search.steps) - done} step(s), {search.runs} run(s), "
                    f"{search.plan.steps} steps left"
                )
        progress = len(search.steps) > before


def replay_command(path: str) -> str:
    """The command that replays a saved reproducer."""
    return f"tidegate sim replay {shlex.quote(path)}"


def describe(result: ShrinkResult) -> str:
    """A human-readable reproducer: what is left, and what was removed."""
    opts = result.options
    sc: Scenario = opts.scenario
    v = result.violation
    plan = result.plan
    lines = [
        f"reproducer: seed {opts.seed}, scenario {sc.name}"
        + (f", mutant {opts.mutant}" if getattr(opts, "mutant", None) else ""),
        f"  broken property: {v.property} at {v.at_ms}ms: {v.message}",
        f"  size: {plan.steps} steps (was {result.original_steps}): "
        f"{len(plan.faults)} fault(s) (was {result.original_faults}), "
        f"{len(plan.actions or ())} client action(s)",
    ]
    lines.extend(f"    fault  {f.text()}" for f in plan.faults)
    lines.extend(f"    action {a.text()}" for a in plan.actions or ())
    lines.append(
        f"  scenario: {sc.replicas} replica(s), {len(sc.dataflows)} dataflow(s), "
        f"duration {sc.duration_ms}ms (was {result.original_duration_ms}ms), quiet {sc.quiet_ms}ms"
    )
    lines.append(f"  {result.runs} run(s) in {result.wall_s:.1f}s; steps:")
    lines.extend(f"    - {s}" for s in result.steps or ["(nothing could be removed)"])
    return "\n".join(lines)
