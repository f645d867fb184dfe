"""Hydration per object and replica: whether it is hydrated, and how long hydration took.

Materialize reports both per collection and replica (``mz_hydration_statuses``
and the hydration time of ``mz_compute_hydration_times``). Here a
:class:`HydrationTracker` watches a :class:`~tidegate.runtime.controller.ControllerDriver`:

* the clock starts when the controller sends a replica the ``CreateDataflow``
  that exports the collection (again at each reconnect, whose replay rebuilds
  the dataflow on the replica's new connection: a *rehydration*); commands
  wait in the connection's queue until it is up, so for a replica that is not
  connected yet the clock starts again when it connects (the time a restarting
  process takes to come back is not hydration);
* it stops at the first response after which the replica's progress on the
  collection is hydrated by the spec's rule (the replica's frontier has passed
  the collection's as_of; see ``ReplicaCollectionState.hydrated``), the same
  rule :meth:`Environment.hydrated` asks.

``listeners`` are called as each hydration completes (``tidegate up`` prints a
line once a replica has hydrated everything it was sent).

:meth:`HydrationTracker.snapshot` is safe to call from another thread (the
metrics' scrape): it copies plain dicts, retried by the caller on a resize.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from tidegate.spec.compute import ReplicaStatusEvent
from tidegate.spec.compute.view import InstanceView
from tidegate.spec.errors import TidegateError
from tidegate.spec.ids import GlobalId, ReplicaId
from tidegate.spec.protocol.commands import CreateDataflow
from tidegate.spec.protocol.responses import ComputeResponse, Frontiers

if TYPE_CHECKING:
    from .catalog import CatalogState
    from .controller.driver import ControllerDriver

__all__ = ["HydrationInfo", "HydrationTracker", "Tracked", "catalog_hydration"]


@dataclass(frozen=True, slots=True)
class HydrationInfo:
    """One collection on one replica.

    ``hydrated``: the replica has computed it up to its as_of (on its current
    connection); ``seconds``: how long that took, from the ``CreateDataflow``
    sent to the replica to the response that made it hydrated (``None`` while
    hydrating, and for a collection the replica was never sent).
    """

    id: GlobalId
    replica: ReplicaId
    hydrated: bool
    seconds: float | None
    name: str | None = None
    """The catalog name of the collection (``None`` for a transient one: a subscribe, a peek's)."""


@dataclass(slots=True)
class _Timing:
    started_ms: int
    done_ms: int | None = None


class HydrationTracker:
    """Times hydrations as the driver carries out commands and receives responses."""

    def __init__(self, driver: ControllerDriver, clock_ms: Callable[[], int]) -> None:
        self.driver = driver
        self.clock_ms = clock_ms
        self._timings: dict[tuple[ReplicaId, GlobalId], _Timing] = {}
        self._prune_at = 64
        self.listeners: list[Callable[[ReplicaId, GlobalId, float], None]] = []
        """Called with ``(replica, collection, seconds)`` as each hydration completes (on the
        driver's loop; keep them cheap)."""
        driver.observers.append(self._on_effect)
        driver.response_observers.append(self._on_response)

    # -- observing --------------------------------------------------------------------------------
    def _on_effect(self, effect: Any) -> None:
        if isinstance(effect, ReplicaStatusEvent) and effect.status == "connected":
            now = self.clock_ms()  # the queued commands go out now: the clock starts here
            for (on, _), timing in self._timings.items():
                if on == effect.replica and timing.done_ms is None:
                    timing.started_ms = now
            return
        command = getattr(effect, "command", None)
        if not isinstance(command, CreateDataflow):
            return
        now = self.clock_ms()
        replica: ReplicaId = effect.replica
        if len(self._timings) >= self._prune_at:  # amortized: a replay sends many at once
            self._prune()
            self._prune_at = 2 * len(self._timings) + 64
        for gid in command.dataflow.export_ids:
            self._timings[(replica, gid)] = _Timing(now)
            self._check(replica, gid)

    def _on_response(self, replica: ReplicaId, response: ComputeResponse) -> None:
        if isinstance(response, Frontiers):
            self._check(replica, response.id)

    def _check(self, replica: ReplicaId, gid: GlobalId) -> None:
        timing = self._timings.get((replica, gid))
        if timing is None or timing.done_ms is not None:
            return
        view = self._view_of(replica)
        if view is None:
            return
        try:
            rc = view.replica_collection(replica, gid)
        except TidegateError:
            return
        if rc.hydrated:
            timing.done_ms = self.clock_ms()
            seconds = max(0, timing.done_ms - timing.started_ms) / 1000
            for listen in self.listeners:
                listen(replica, gid, seconds)

    def _prune(self) -> None:
        """Forget collections and replicas that are gone (on the loop's thread only)."""
        live = self._live()
        for key in [k for k in self._timings if k not in live]:
            del self._timings[key]

    def _views(self) -> list[InstanceView]:
        compute = self.driver.ctl.compute
        return [compute.instance(i) for i in compute.instance_ids()]

    def _view_of(self, replica: ReplicaId) -> InstanceView | None:
        """The instance (cluster) ``replica`` belongs to (replica ids are unique across them)."""
        return next((v for v in self._views() if replica in v.replica_ids()), None)

    def _live(self) -> set[tuple[ReplicaId, GlobalId]]:
        return {
            (r, gid)
            for view in self._views()
            for r in view.replica_ids()
            for gid in view.collection_ids()
        }

    # -- reading ----------------------------------------------------------------------------------
    def snapshot(self) -> list[HydrationInfo]:
        """Every collection the controller's replicas hold (and were sent here), by id and replica.

        Collections and replicas that are gone are left out. Reads only (safe from another
        thread, which may see ``RuntimeError`` if the loop resizes a dict meanwhile: read again).
        """
        live = self._live()
        out: list[HydrationInfo] = []
        for key, timing in list(self._timings.items()):
            if key not in live:
                continue
            replica, gid = key
            view = self._view_of(replica)
            if view is None:
                continue
            try:
                hydrated = view.replica_collection(replica, gid).hydrated
            except TidegateError:
                continue
            seconds = None
            if hydrated and timing.done_ms is not None:
                seconds = max(0, timing.done_ms - timing.started_ms) / 1000
            out.append(HydrationInfo(gid, replica, hydrated, seconds))
        return sorted(out, key=lambda h: (h.id, h.replica))


class Tracked(Protocol):
    """What :func:`catalog_hydration` reads: an ``Environment``, or the core of one."""

    @property
    def state(self) -> CatalogState: ...

    @property
    def hydration_tracker(self) -> HydrationTracker: ...


def catalog_hydration(env: Tracked, gid: GlobalId | None = None) -> list[HydrationInfo]:
    """:meth:`HydrationTracker.snapshot` of ``env``'s indexes and materialized views, named
    (only ``gid``'s if given); what ``Environment.hydration`` and the metrics report."""
    state = env.state
    out = []
    for info in env.hydration_tracker.snapshot():
        if gid is not None and info.id != gid:
            continue
        try:
            entry = state.get(info.id)
        except (TidegateError, LookupError):
            continue  # transient (a subscribe), or dropped meanwhile
        out.append(replace(info, name=entry.name))
    return out
