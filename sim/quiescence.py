"""Quiescence: once the faults stopped and the quiet phase settled, nothing is left half-done.

Run at the end of a run (after the quiet phase), by :class:`~tidegate.sim.checkers.Checker`:

* ``no_pending_peeks`` -- no peek is pending anywhere: not in the compute
  controller, not among the driver's waiters, not on a replica (every client
  peek ended, so every product record of one must have ended too); no storage
  snapshot, append or export token is outstanding either;
* ``holds_have_owners`` -- every read hold on every collection, compute and
  storage, belongs to something that exists: the collection's own (implied
  and warmup) holds, a live dependent (a dataflow reading it, a materialized
  view's storage collection, an export, an ingestion's remap hold), a replica's
  input hold, a pending peek or snapshot. The holds are counted per time, so a
  hold left behind (a peek's, after its peek ended) is one count too many at its
  time; and no read hold taken for a read (a fresh read's, a read-only
  transaction's) is left once every client read ended;
* ``subscribes_finish`` -- no subscribe whose output is complete (its write
  frontier ``[]``) still exists in the controller or the driver: a complete
  subscribe is over, and its holds must go.

The accounting reads the controllers' state directly (the simulator may look
inside the product it runs); what it expects is derived from the owners it
finds, never from the controllers' own bookkeeping of the totals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

if TYPE_CHECKING:
    from tidegate.runtime.environment import Environment

    from .world_port import WorldPort

__all__ = ["check_quiescence", "unowned_holds"]

Violate = Callable[[str, str], None]


def _add(
    into: dict[GlobalId, Counter[int]], id: GlobalId, frontier: Antichain | Iterable[int]
) -> None:
    times = frontier.elements if isinstance(frontier, Antichain) else frontier
    bucket = into.setdefault(id, Counter())
    for t in times:
        bucket[int(t)] += 1


def _extra(got: Iterable[tuple[Any, int]], want: Counter[int]) -> dict[int, int]:
    """Holds counted in ``got`` beyond what the owners explain (``-n``: owners' holds missing)."""
    diff: Counter[int] = Counter()
    for t, n in got:
        diff[int(t)] += n
    diff.subtract(want)
    return {t: n for t, n in sorted(diff.items()) if n}


def unowned_holds(env: Environment) -> list[str]:
    """Collections whose read holds differ from what their owners hold (see the module docstring)."""
    ctl = env.driver.ctl
    instances = [inst for _, inst in sorted(ctl.compute._instances.items())]  # every cluster
    out: list[str] = []
    compute: dict[GlobalId, Counter[int]] = {}
    storage: dict[GlobalId, Counter[int]] = {}
    for inst in instances:
        for c in inst.collections.values():
            _add(compute, c.id, c.implied)
            _add(compute, c.id, c.warmup)
            for dep, held in c.compute_dependencies.items():
                _add(compute, dep, held)
        for c in inst.collections.values():
            for dep, held in c.storage_dependencies.items():
                _add(storage, dep, held)
        for r in inst.replicas.values():
            for rc in r.collections.values():
                for dep, held in rc.input_holds.items():
                    _add(storage, dep, held)
        for p in inst.peeks.values():
            _add(storage if p.on_storage else compute, p.id, [int(p.timestamp)])
    for _instance, id, frontier in ctl.compute._holds.values():
        _add(compute, id, frontier)
    for c in (c for inst in instances for c in inst.collections.values()):
        extra = _extra(c.read_capabilities.updates(), compute.get(c.id, Counter()))
        if extra:
            out.append(
                f"compute collection {c.id} ({c.kind}{', dropped' if c.dropped else ''}) holds "
                f"{dict(c.read_capabilities.updates())}; its owners explain "
                f"{dict(compute.get(c.id, {}))} (off by {extra})"
            )
    st = ctl.storage
    for sc in st.collections():
        _add(storage, sc.id, sc.implied_capability)
        for dep in sc.dependencies:
            _add(storage, dep, sc.since)
    for e in st.exports():
        _add(storage, e.description.from_id, e.read_capability)
    for token in st.outstanding_tokens():
        _add(storage, token.from_id, token.acquired_since)
    for remap, hold in st.remap_holds().values():
        _add(storage, remap, hold)
    for id, as_of in st._snapshots.values():
        _add(storage, id, [int(as_of)])
    for sc in st.collections():
        extra = _extra(sc.read_capabilities, storage.get(sc.id, Counter()))
        if extra:
            out.append(
                f"storage collection {sc.id}{' (dropped)' if sc.is_dropped else ''} holds "
                f"{dict(sc.read_capabilities)}; its owners explain "
                f"{dict(storage.get(sc.id, {}))} (off by {extra})"
            )
    return out


def check_quiescence(world: WorldPort, env: Environment, violate: Violate) -> None:
    """The checks of the module docstring, on the environment up at the end of a run."""
    ctl, driver = env.driver.ctl, env.driver
    instances = [inst for _, inst in sorted(ctl.compute._instances.items())]  # every cluster
    pending = sorted(
        (str(p.id), int(p.timestamp)) for inst in instances for p in inst.peeks.values()
    )
    if pending:
        violate(
            "no_pending_peeks",
            f"{len(pending)} peek(s) still pending in the compute controller after the quiet "
            f"phase, though every client peek ended: (collection, time) {pending[:4]}",
        )
    if driver._peeks:
        violate(
            "no_pending_peeks",
            f"the controller driver still waits for {len(driver._peeks)} peek answer(s) after the "
            "quiet phase, though every client peek ended",
        )
    for name, replica in sorted(world.replicas.items()):
        service = replica.state
        if service is not None and service.core.pending_peeks():
            violate(
                "no_pending_peeks",
                f"replica {name} still has {len(service.core.pending_peeks())} pending peek(s) "
                "after the quiet phase, which its controller no longer waits for",
            )
    st = ctl.storage
    if st.pending_snapshots() or st.outstanding_tokens():
        violate(
            "no_pending_peeks",
            f"storage snapshot reads {st.pending_snapshots()} or export tokens "
            f"{st.outstanding_tokens()} are still outstanding after the quiet phase",
        )
    problems = unowned_holds(env)
    if problems:
        violate("holds_have_owners", f"a read hold without an owner: {problems[0]}")
    held = sorted((str(id), str(frontier)) for _, id, frontier in ctl.compute._holds.values())
    if held:  # a read's, or a read transaction's: every one of them ended
        violate(
            "holds_have_owners",
            f"{len(held)} read hold(s) taken for reads are still held after every client read "
            f"ended: (collection, frontier) {held[:4]}",
        )
    for c in (c for inst in instances for c in inst.collections.values()):
        if c.id.is_transient and c.kind == "subscribe" and not c.write_frontier.elements:
            violate(
                "subscribes_finish",
                f"subscribe {c.id} is complete (its write frontier is []) but still exists in the "
                f"controller (since {c.read_frontier}, holding its inputs)",
            )
    for id, sub in sorted(driver._subscriptions.items()):
        if sub.finished:
            violate(
                "subscribes_finish",
                f"subscribe {id} finished (its last batch was delivered) but the driver still "
                "keeps it",
            )
