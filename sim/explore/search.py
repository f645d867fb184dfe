"""Breadth-first search of a :class:`~tidegate.sim.explore.model.World`'s interleavings.

Every state is stored as a pickle (one ``pickle.loads`` clones it, about twice as fast as
``copy.deepcopy`` on these objects, and the queue holds compact bytes); the visited set holds 16-byte
fingerprints (:mod:`~tidegate.sim.explore.fingerprint`), with replicas taken up to renaming
when ``symmetry`` is on. Breadth-first order makes the first violation found one of the
shortest paths to it; the path is kept as parent links, so it can be printed and replayed.

Bounds: the model's own budgets (commands, faults, ticks) make the space finite; ``depth``
cuts paths longer than it; ``time_budget`` stops the search between two levels' states
and reports the last depth explored completely.
"""

from __future__ import annotations

import resource
import time
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field

from ._clone import dumps, loads
from .fingerprint import Fingerprinter
from .model import Action, Bounds, Violation, World, describe

__all__ = ["ExploreResult", "Finding", "explore", "replay"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass(frozen=True)
class Finding:
    """A violation and the shortest path (from the initial state) that leads to it."""

    violation: Violation
    path: tuple[Action, ...]

    def trace(self) -> str:
        steps = [f"  {i + 1:3}. {describe(a)}" for i, a in enumerate(self.path)]
        if not self.path:
            steps = ["  (while settling the initial state)"]
        return "\n".join([f"{self.violation.property}: {self.violation.message}", "path:", *steps])


@dataclass
class ExploreResult:
    """What a search covered and found."""

    bounds: Bounds
    symmetry: bool
    depth_limit: int | None
    states: int = 0
    """States expanded (their successors computed)."""
    distinct: int = 0
    """Distinct fingerprints seen (expanded or waiting)."""
    transitions: int = 0
    reduced: int = 0
    """States expanded by one replica's local actions only (partial-order reduction)."""
    reduction_fallbacks: int = 0
    quiescent: int = 0
    """States at rest (no replica or channel can move) on which the quiescence checks ran."""
    complete_depth: int = 0
    """Every path up to this many actions was explored."""
    max_depth: int = 0
    complete: bool = False
    """The whole space within the bounds was explored (no cut by time or depth)."""
    cut_by: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def states_per_s(self) -> float:
        return self.states / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "bounds": self.bounds.__dict__,
            "symmetry": self.symmetry,
            "depth_limit": self.depth_limit,
            "states": self.states,
            "distinct": self.distinct,
            "transitions": self.transitions,
            "quiescent": self.quiescent,
            "reduced": self.reduced,
            "complete_depth": self.complete_depth,
            "max_depth": self.max_depth,
            "complete": self.complete,
            "cut_by": self.cut_by,
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "states_per_s": round(self.states_per_s, 1),
            "violations": [
                {
                    "property": f.violation.property,
                    "message": f.violation.message,
                    "path": [describe(a) for a in f.path],
                }
                for f in self.findings
            ],
        }

    def summary(self) -> str:
        reach = (
            f"complete: every interleaving within the bounds ({self.max_depth} actions deep)"
            if self.complete
            else f"cut by {self.cut_by}: complete to depth {self.complete_depth}, "
            f"reached depth {self.max_depth}"
        )
        b = self.bounds
        lines = [
            f"bounds: {b.replicas} replicas, {b.collections} collections, {b.commands} commands, "
            f"{b.faults} faults, {b.ticks} ticks, depth {self.depth_limit or 'unbounded'}, "
            f"symmetry {'on' if self.symmetry else 'off'}",
            f"{self.states} states explored, {self.distinct} distinct, {self.transitions} "
            f"transitions, {self.quiescent} at rest, {self.reduced} reduced",
            reach,
            f"{self.wall_s:.1f}s wall, {self.cpu_s:.1f}s CPU, {self.states_per_s:.0f} states/s",
        ]
        if self.findings:
            lines += ["VIOLATION " + f.trace() for f in self.findings]
        else:
            lines.append("no violation")
        return "\n".join(lines)


def explore(
    bounds: Bounds,
    *,
    depth: int | None = None,
    time_budget: float | None = None,
    symmetry: bool = True,
    reduce: bool = True,
    stop_at_first: bool = True,
    mutant: str | None = None,
) -> ExploreResult:
    """Explore every interleaving within ``bounds`` breadth first (see the module docstring)."""
    from ..mutants import explorer_mutant

    patch = explorer_mutant(mutant).patch() if mutant else nullcontext()
    with patch:
        return _explore(bounds, depth, time_budget, symmetry, reduce, stop_at_first)


def _explore(
    bounds: Bounds,
    depth: int | None,
    time_budget: float | None,
    symmetry: bool,
    reduce: bool,
    stop_at_first: bool,
) -> ExploreResult:
    res = ExploreResult(bounds, symmetry, depth)
    wall0, cpu0 = time.perf_counter(), _cpu()
    world = World(bounds)
    if world.setup_violations:
        res.findings.extend(Finding(v, ()) for v in world.setup_violations)
        return _finish(res, wall0, cpu0)
    fingerprinter = Fingerprinter(world.replica_names if symmetry else (), dumps)

    def fp(w: World) -> bytes:
        return fingerprinter((w.data, w.client), w.nodes, (w.ctl, w.storage))

    # Parent links: node i was reached from parents[i][0] by parents[i][1].
    parents: list[tuple[int, Action | None]] = [(-1, None)]

    def path_to(i: int) -> tuple[Action, ...]:
        out: list[Action] = []
        while i > 0:
            i, a = parents[i][0], parents[i][1]
            assert a is not None
            out.append(a)
        return tuple(reversed(out))

    first = fp(world)
    seen = {first}
    queue: deque[tuple[int, int, bytes, bytes]] = deque([(0, 0, dumps(world), first)])
    res.distinct = 1
    level = 0
    while queue:
        node, d, blob, here = queue.popleft()
        if d > level:
            level = d
            res.complete_depth = d - 1 if d > 0 else 0
        if time_budget is not None and time.perf_counter() - wall0 > time_budget:
            res.cut_by = "time budget"
            res.complete_depth = d - 1 if d > 0 else 0
            break
        res.states += 1
        res.max_depth = max(res.max_depth, d)
        state = loads(blob)
        environment = set(state.environment_actions())
        at_rest = True
        ample = state.ample() if reduce else None
        successors: list[tuple[Action, World, bytes]] = []
        for actions in ([ample] if ample else []) + [None]:
            todo = state.actions() if actions is None else actions
            successors = []
            found = False
            for action in todo:
                succ = loads(blob)
                violations = succ.apply(action)
                res.transitions += 1
                if violations:
                    child = len(parents)
                    parents.append((node, action))
                    for v in violations:
                        res.findings.append(Finding(v, path_to(child)))
                    found = True
                    continue
                successors.append((action, succ, fp(succ)))
            if found and stop_at_first:
                return _finish(res, wall0, cpu0)
            if actions is None or all(key not in seen for _, _, key in successors):
                break
            res.reduction_fallbacks += 1  # C3: a local action closes a cycle; expand all
        if ample and len(successors) == len(ample):
            res.reduced += 1
        for action, succ, key in successors:
            if action in environment and key != here:
                at_rest = False
            if key in seen:
                continue
            seen.add(key)
            res.distinct += 1
            if depth is not None and d + 1 > depth:
                res.cut_by = res.cut_by or "depth"
                continue
            parents.append((node, action))
            queue.append((len(parents) - 1, d + 1, dumps(succ), key))
        if at_rest:
            res.quiescent += 1
            for v in state.check_quiescent():
                res.findings.append(Finding(v, path_to(node)))
                if stop_at_first:
                    return _finish(res, wall0, cpu0)
    else:
        res.complete_depth = res.max_depth
        res.complete = res.cut_by is None
    return _finish(res, wall0, cpu0)


def _hashed(w: World) -> object:
    """The part of a world that decides its future (the bounds are the same for all)."""
    return (w.ctl, w.storage, w.data, w.nodes, w.client)


def _finish(res: ExploreResult, wall0: float, cpu0: float) -> ExploreResult:
    res.wall_s = time.perf_counter() - wall0
    res.cpu_s = _cpu() - cpu0
    return res


def replay(bounds: Bounds, path: tuple[Action, ...]) -> list[Violation]:
    """Perform ``path`` from the initial state; the violations of the first step that has any.

    Raises ``ValueError`` if an action of the path is not enabled when its turn comes (the
    path belongs to another model: another mutant, other bounds).
    """
    world = World(bounds)
    if world.setup_violations:
        return world.setup_violations
    for i, action in enumerate(path):
        if action not in world.actions():
            raise ValueError(f"step {i + 1}, {describe(action)}, is not enabled")
        violations = world.apply(action)
        if violations:
            return violations
    return []
