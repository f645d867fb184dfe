"""As-of selection at bootstrap (docs/reference/compute.md section 10).

When a controller restarts it must choose an ``as_of`` for every catalog
dataflow. The choice must be *correct* (a durable output never skips or
rewrites times, every input is readable at the as_of) and should be
*desirable* (hydration can start at once, indexes are readable where their
read policy wants them).

Each dataflow gets bounds ``[lower, upper]`` (shared by its exports).
Constraints move a bound toward a frontier; a constraint outside the other
bound *fails*: the bound moves onto the other one and the bounds are sealed,
so later constraints are no-ops. Hard failures mean the inputs are
inconsistent; soft failures only cost hydration time. Both are reported in
:attr:`AsOfSelection.failures`; nothing raises. Between an input ``A`` and a
dependent ``B`` the bounds keep ``A.lower <= B.lower`` and ``A.upper <=
B.upper``: lower bounds flow downstream, upper bounds upstream. The chosen
as_of is the upper bound, the latest correct time; a dataflow whose inputs are
all complete (or that has none) has no upper bound and starts at the current
time (or its lower bound, if later), never at the empty frontier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..frontier import Antichain, Time
from ..frontier.read_policy import ReadPolicy
from ..ids import GlobalId
from ..protocol.types import DataflowDescription

__all__ = ["AsOfSelection", "select_as_ofs"]

_EMPTY = Antichain.empty()


def _step_back(f: Antichain) -> Antichain:
    els = f.elements
    if len(els) == 1 and type(els[0]) is int and els[0] > 0:
        return Antichain.from_elem(els[0] - 1)
    return f


@dataclass(slots=True)
class _Bounds:
    lower: Antichain
    upper: Antichain
    sealed: bool = False


@dataclass(frozen=True, slots=True)
class AsOfSelection:
    """The outcome of :func:`select_as_ofs`.

    ``dataflows`` are the inputs with ``as_of`` set, in the same order.
    ``storage_holds`` names, for every storage input, the since at which the
    caller must hold it until the dataflows are installed. ``failures`` lists
    the constraints that could not be met, as ``(hardness, dataflow, text)``.
    """

    dataflows: tuple[DataflowDescription, ...]
    as_ofs: Mapping[str, Antichain]
    storage_holds: Mapping[GlobalId, Antichain]
    failures: tuple[tuple[Literal["hard", "soft"], str, str], ...] = field(default=())


def select_as_ofs(
    dataflows: Sequence[DataflowDescription],
    storage: Mapping[GlobalId, tuple[Antichain, Antichain]],
    read_policies: Mapping[GlobalId, ReadPolicy],
    current_time: Time,
    read_only: bool = False,
) -> AsOfSelection:
    """Choose an as_of for each dataflow (see the module docstring).

    ``storage`` maps every storage collection the dataflows read or write to
    its ``(read frontier, write frontier)``; ``read_policies`` holds the
    policies of index exports. Dataflows are identified by ``debug_name`` in
    :attr:`AsOfSelection.as_ofs`, which must therefore be unique.
    """
    names = [d.debug_name for d in dataflows]
    if len(set(names)) != len(names):
        raise ValueError("dataflow debug names must be unique for as-of selection")
    owner: dict[GlobalId, int] = {}
    for i, d in enumerate(dataflows):
        for e in d.export_ids:
            owner[e] = i
    bounds = [
        _Bounds(d.as_of, d.as_of, True)
        if d.as_of is not None
        else _Bounds(Antichain.bottom(0), _EMPTY)
        for d in dataflows
    ]
    inputs: list[list[int]] = [
        sorted({owner[ii.id] for ii in d.index_imports if ii.id in owner and owner[ii.id] != i})
        for i, d in enumerate(dataflows)
    ]
    dependents: list[list[int]] = [[] for _ in dataflows]
    for i, ins in enumerate(inputs):
        for j in ins:
            dependents[j].append(i)
    failures: list[tuple[Literal["hard", "soft"], str, str]] = []
    pruned: set[int] = set()

    def constrain(
        i: int, hard: bool, side: Literal["lower", "upper"], frontier: Antichain, why: str
    ) -> None:
        b = bounds[i]
        if b.sealed or i in pruned:
            return
        if side == "lower":
            new = b.lower.join(frontier)
            if new <= b.upper:
                b.lower = new
                return
            b.lower = b.upper
        else:
            new = b.upper.meet(frontier)
            if b.lower <= new:
                b.upper = new
                return
            b.upper = b.lower
        b.sealed = True
        failures.append(
            ("hard" if hard else "soft", names[i], f"{why}: {side} {frontier!r} failed")
        )

    def propagate() -> None:
        changed = True
        while changed:
            changed = False
            for i in range(len(dataflows)):
                for j in inputs[i]:  # j is an input of i: lower flows j -> i, upper flows i -> j
                    before = (bounds[i].lower, bounds[j].upper, bounds[i].sealed, bounds[j].sealed)
                    constrain(i, True, "lower", bounds[j].lower, f"lower bound of input {names[j]}")
                    constrain(
                        j, True, "upper", bounds[i].upper, f"upper bound of dependent {names[i]}"
                    )
                    if before != (
                        bounds[i].lower,
                        bounds[j].upper,
                        bounds[i].sealed,
                        bounds[j].sealed,
                    ):
                        changed = True

    def transitive_storage(i: int) -> set[GlobalId]:
        seen, stack = {i}, [i]
        out: set[GlobalId] = set()
        while stack:
            k = stack.pop()
            out.update(s.id for s in dataflows[k].source_imports)
            for j in inputs[k]:
                if j not in seen:
                    seen.add(j)
                    stack.append(j)
        return out

    def prune(i: int) -> None:
        stack = [i]
        while stack:
            k = stack.pop()
            if k not in pruned:
                pruned.add(k)
                stack.extend(dependents[k])

    # 1. Persist sinks whose output is sealed need never run again.
    for i, d in enumerate(dataflows):
        for sid in d.persist_sink_ids:
            if sid in storage and not storage[sid][1].elements:
                pruned.add(i)
    # 2. In read-only mode, inputs dropped by the leader take their dependents with them.
    if read_only:
        for i, d in enumerate(dataflows):
            if any(s.id in storage and not storage[s.id][0].elements for s in d.source_imports):
                prune(i)
    live = [i for i in range(len(dataflows)) if i not in pruned]
    # 3. Inputs must be readable at the as_of.
    for i in live:
        for s in dataflows[i].source_imports:
            if s.id in storage:
                constrain(i, True, "lower", storage[s.id][0], f"since of input {s.id}")
    propagate()
    # 4. A durable output continues where it left off (or at its since, if still empty).
    for i in live:
        for sid in dataflows[i].persist_sink_ids:
            if sid in storage:
                since, upper = storage[sid]
                bound = since if upper <= since else _step_back(upper)
                constrain(i, True, "upper", bound, f"write frontier of output {sid}")
    propagate()
    # 5. Warmup: start where every storage input can already serve.
    for i in live:
        ids = [s for s in transitive_storage(i) if s in storage]
        if ids:
            warm = _step_back(Antichain.meet_all(storage[s][1] for s in ids))
            constrain(i, False, "upper", warm, "warmup")
    propagate()
    # 6-7. Indexes: as readable as their policy wants, and not beyond now.
    for i in live:
        d = dataflows[i]
        ids = [s for s in transitive_storage(i) if s in storage]
        write = (
            Antichain.meet_all(storage[s][1] for s in ids)
            if ids
            else Antichain.from_elem(current_time)
        )
        for ie in d.index_exports:
            policy = read_policies.get(ie.id)
            if policy is not None:
                constrain(i, False, "upper", policy.frontier(write), f"read policy of {ie.id}")
    propagate()
    for i in live:
        if dataflows[i].index_exports:
            constrain(i, False, "upper", Antichain.from_elem(current_time), "current time")
    propagate()
    # 8. Choose the latest correct time. A dataflow nothing bounds from above (a constant, or
    #    every input complete: their uppers are empty) has no latest one; it starts now (or at
    #    its inputs' since, if later), as a new dataflow does: an empty as_of would compute nothing.
    now = Antichain.from_elem(current_time)
    chosen: dict[str, Antichain] = {}
    out: list[DataflowDescription] = []
    for i, d in enumerate(dataflows):
        if i in pruned or not d.export_ids:
            as_of = _EMPTY
        elif bounds[i].upper.elements:
            as_of = bounds[i].upper
        else:
            as_of = bounds[i].lower.join(now)
        chosen[names[i]] = as_of
        out.append(d.with_as_of(as_of))
    holds: dict[GlobalId, Antichain] = {}
    for d in dataflows:
        for s in d.source_imports:
            if s.id in storage:
                holds[s.id] = storage[s.id][0]
    return AsOfSelection(tuple(out), chosen, holds, tuple(failures))
