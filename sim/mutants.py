"""Deliberately broken variants of the spec and the runtime, to measure the simulator's power.

Each :class:`Mutant` is a realistic bug behind a test-only switch: ``patch()``
returns a context manager that monkeypatches one function of ``tidegate.spec``
or ``tidegate.runtime`` for the duration of a run and restores it afterwards,
so the product itself stays correct. ``run_simulation`` enters ``MUTANTS[options.mutant].patch()`` around
the run; a campaign over a handful of seeds must then report a violation.

The patches are process-global while active: run mutated simulations one at a
time per process (campaigns use one process per job).
"""

from __future__ import annotations

import dataclasses
import uuid as _uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from tidegate.spec import history as _history
from tidegate.spec.compute import instance as _instance
from tidegate.spec.compute.effects import (
    FrontierUpper,
    PeekNotification,
    PeekResultOut,
    SubscribeBatchOut,
)
from tidegate.spec.compute_replica import replica as _replica
from tidegate.spec.compute_replica.outputs import Respond
from tidegate.spec.frontier import Antichain, ChangeBatch
from tidegate.spec.outbox import Outbox
from tidegate.spec.protocol.commands import AllowCompaction, CancelPeek, CreateDataflow, Peek
from tidegate.spec.protocol.responses import (
    Frontiers,
    PeekCanceled,
    PeekError,
    PeekResult,
    PeekRows,
    SubscribeBatch,
)

__all__ = ["MUTANTS", "Mutant", "iceberg_covered_forgets_property_patch", "mutant_names"]

_EMPTY = Antichain.empty()

Patch = Callable[[], AbstractContextManager[None]]


@dataclass(frozen=True)
class Mutant:
    """A named bug: ``patch()`` switches it on for the ``with`` block.

    ``undetectable`` is ``None`` for bugs the default campaign must find; otherwise it
    says why the simulator cannot observe this bug yet (a known gap, tested as such).
    ``scenario`` names the built-in scenario whose campaign is expected to find it.
    """

    name: str
    description: str
    patch: Patch
    undetectable: str | None = None
    scenario: str = "small"


@contextmanager
def _replaced(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    """Set ``owner.name`` to ``replacement`` for the block, then restore the original."""
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def _together(*patches: AbstractContextManager[None]) -> Iterator[None]:
    """Several patches as one."""
    with ExitStack() as stack:
        for p in patches:
            stack.enter_context(p)
        yield


def _method(cls: type, name: str, make: Callable[[Any], Any]) -> Patch:
    """A patch that replaces ``cls.name`` by ``make(original)``."""

    def patch() -> AbstractContextManager[None]:
        return _replaced(cls, name, make(cls.__dict__[name]))

    return patch


# -- replica bugs ---------------------------------------------------------------------------


def _peek_before_upper(original: Any) -> Any:
    """Serve a peek whose time is not complete yet from the latest complete time."""

    def _try_peek(self: Any, p: Any) -> PeekResult | None:
        ex = self._executor
        if p.id in self._owner and ex.upper(p.id).less_equal(p.timestamp):
            els = ex.upper(p.id).elements
            if els and type(els[0]) is int and els[0] > 0:
                latest = els[0] - 1
                if ex.since(p.id).less_equal(latest):
                    try:
                        rows = ex.peek(p.id, latest, p.finishing, p.literal_constraints)
                    except Exception:
                        return None
                    result: PeekResult = self._limit(rows)
                    return result
        answer: PeekResult | None = original(self, p)
        return answer

    return _try_peek


def _regressing_frontier(original: Any) -> Any:
    """After reporting a write frontier ``[u]``, also report the stale ``[u - 1]`` (unchecked)."""

    def _publish(self: Any) -> list[Any]:
        out: list[Any] = original(self)
        stale: list[Any] = []
        for o in out:
            if isinstance(o, Respond) and isinstance(o.response, Frontiers):
                write = o.response.write
                if write is not None and len(write.elements) == 1:
                    (u,) = write.elements
                    if type(u) is int and u >= 2:
                        stale.append(Respond(Frontiers(o.response.id, write=Antichain([u - 1]))))
        return out + stale

    return _publish


def _persist_peek_eager(original: Any) -> Any:
    """A persist peek reads the shard at once: at its latest complete time if its own is not yet."""

    def step(self: Any) -> float | None:
        store, out = self.service.store, self.out
        shard, t = str(out.collection_id), int(out.timestamp)
        try:
            upper = store.upper(shard)
            if upper.less_equal(t) and upper.elements and upper.elements[0] > 0:
                latest = int(upper.elements[0]) - 1
                if store.since(shard).less_equal(latest):
                    self.out = dataclasses.replace(out, timestamp=latest)
        except Exception:
            pass
        answer: float | None = original(self)
        return answer

    return step


def _peek_before_upper_patch() -> AbstractContextManager[None]:
    from tidegate.replica import service as _service

    cls, persist = _replica.ComputeReplica, _service._PersistPeek
    return _together(
        _replaced(cls, "_try_peek", _peek_before_upper(cls.__dict__["_try_peek"])),
        _replaced(persist, "step", _persist_peek_eager(persist.__dict__["step"])),
    )


def _subscribe_loses_retractions(original: Any) -> Any:
    """Subscribe output drops retractions (negative multiplicities) when it consolidates."""

    def _absorb(self: Any, batch: Any) -> None:
        if batch.id in self._subscribes:
            batch = dataclasses.replace(batch, updates=tuple(u for u in batch.updates if u[2] > 0))
        original(self, batch)

    return _absorb


# -- history bugs ---------------------------------------------------------------------------


def _reduce_drops_peeks(original: Any) -> Any:
    """The reduction forgets pending peeks, so a replica that reconnects never sees them."""

    def _reduce(commands: Any) -> Any:
        reduced = original(commands)
        reduced.commands = [c for c in reduced.commands if type(c) is not Peek]
        reduced.live_peeks = set()
        return reduced

    return _reduce


def _history_drops_live_peek() -> AbstractContextManager[None]:
    return _replaced(_history, "_reduce", _reduce_drops_peeks(_history.__dict__["_reduce"]))


# -- controller bugs ------------------------------------------------------------------------


def _release_before_cancel(_original: Any) -> Any:
    """Release the peek's read hold first, so AllowCompaction overtakes the CancelPeek."""

    def _finish_peek(self: Any, uuid: _uuid.UUID, result: PeekResult) -> None:
        p = self.peeks.pop(uuid)
        if p.on_storage:
            self.storage.update_storage_read_holds({p.id: ChangeBatch([(p.timestamp, -1)])})
        else:
            self._update_read_caps(p.id, [(p.timestamp, -1)])
        if isinstance(result, PeekRows):
            note = PeekNotification(self.id, uuid, "success", rows=sum(n for _, n in result.rows))
        elif isinstance(result, PeekError):
            note = PeekNotification(self.id, uuid, "error", message=result.message)
        else:
            note = PeekNotification(self.id, uuid, "canceled")
        self._outbox.emit(note)
        self._outbox.emit(PeekResultOut(self.id, uuid, result))
        self._send(CancelPeek(uuid))

    return _finish_peek


def _peek_without_hold(original: Any) -> Any:
    """Validate the peek against the since but take no read hold (nor release one)."""

    def peek(self: Any, id: Any, timestamp: Any, *args: Any) -> Any:
        self._update_read_caps = lambda *_a: None
        try:
            return original(self, id, timestamp, *args)
        finally:
            del self._update_read_caps

    def finish(self: Any, uuid: _uuid.UUID, result: PeekResult) -> None:
        p = self.peeks[uuid]
        if not p.on_storage:
            self._update_read_caps = lambda *_a: None
        try:
            finish_original(self, uuid, result)
        finally:
            self.__dict__.pop("_update_read_caps", None)

    finish_original = _instance.Instance.__dict__["_finish_peek"]
    return peek, finish


def _peek_without_hold_patch() -> AbstractContextManager[None]:
    peek, finish = _peek_without_hold(_instance.Instance.__dict__["peek"])
    return _together(
        _replaced(_instance.Instance, "peek", peek),
        _replaced(_instance.Instance, "_finish_peek", finish),
    )


class _ReplayWithoutCompaction:
    """A history whose replay forgets compaction: dataflows at their creation as_of, no AllowCompaction."""

    def __init__(self, inner: Any, instance: Any) -> None:
        self._inner = inner
        self._instance = instance

    def __iter__(self) -> Iterator[Any]:
        collections = self._instance.collections
        for c in self._inner:
            if type(c) is AllowCompaction:
                continue
            if type(c) is CreateDataflow:
                created = [collections[e].as_of for e in c.dataflow.export_ids if e in collections]
                if created:
                    c = CreateDataflow(c.dataflow.with_as_of(Antichain.meet_all(created)))
            yield c

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _forgets_allow_compaction(original: Any) -> Any:
    """Rehydration replays dataflows as first created, forgetting every AllowCompaction since."""

    def add_replica(self: Any, *args: Any, **kwargs: Any) -> None:
        history = self.history
        self.history = _ReplayWithoutCompaction(history, self)
        try:
            original(self, *args, **kwargs)
        finally:
            self.history = history

    return add_replica


def _subscribe_duplicates(_original: Any) -> Any:
    """Forward every update of an advancing batch, even those at times already forwarded."""

    def _on_subscribe(self: Any, r: Any, resp: Any) -> None:
        id = resp.id
        rc = r.collections.get(id)
        c = self.collections.get(id)
        if rc is None or c is None:
            return
        result = resp.result
        upper = result.upper if isinstance(result, SubscribeBatch) else _EMPTY
        if _instance._advances(rc.write_frontier, upper):
            rc.write_frontier = upper
        if _instance._advances(rc.output_frontier, upper):
            rc.output_frontier = upper
        if rc.input_frontier <= upper:
            rc.input_frontier = upper
            self._downgrade_input_holds(rc, upper)
        sub = self.subscribes.get(id)
        if sub is not None:
            self._maybe_update_global_write_frontier(c, upper)
            if isinstance(result, SubscribeBatch):
                if _instance._advances(sub.frontier, upper):
                    lower = sub.frontier
                    sub.frontier = upper
                    updates = result.updates if result.error is None else ()
                    self._outbox.emit(
                        SubscribeBatchOut(self.id, id, lower, upper, updates, result.error)
                    )
                    if not upper.elements:
                        del self.subscribes[id]
            else:
                del self.subscribes[id]
        if c.dropped:
            self._maybe_cleanup(id)

    return _on_subscribe


def _peek_checks_as_of(original: Any) -> Any:
    """Validate an index peek against the collection's creation as_of, not its current since."""

    def peek(self: Any, id: Any, timestamp: Any, *args: Any) -> Any:
        c = self.collections.get(id)
        if c is None or c.dropped or c.read_frontier.less_equal(timestamp):
            return original(self, id, timestamp, *args)
        if not c.as_of.less_equal(timestamp):
            return original(self, id, timestamp, *args)
        # The since has moved past ``timestamp``, but the stale check lets the peek through.
        caps = c.read_capabilities
        c.read_capabilities = _StaleSince(caps, c.as_of)
        try:
            return original(self, id, timestamp, *args)
        finally:
            c.read_capabilities = caps

    return peek


class _StaleSince:
    """Read capabilities whose frontier reads as an old value once (for the validation only)."""

    def __init__(self, inner: Any, frontier: Antichain) -> None:
        self._inner = inner
        self._stale: Antichain | None = frontier

    @property
    def frontier(self) -> Antichain:
        stale, self._stale = self._stale, None
        return stale if stale is not None else self._inner.frontier

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _subscribe_skips_empty(original: Any) -> Any:
    """Do not forward subscribe batches without updates (but still move past them)."""

    def _on_subscribe(self: Any, r: Any, resp: Any) -> None:
        outbox = self._outbox
        self._outbox = Outbox()
        try:
            original(self, r, resp)
            mine = self._outbox.drain()
        finally:
            self._outbox = outbox
        outbox.extend(
            e
            for e in mine
            if not (
                isinstance(e, SubscribeBatchOut)
                and not e.updates
                and e.error is None
                and e.upper.elements
            )
        )

    return _on_subscribe


def _accepts_stale_epoch(original: Any) -> Any:
    """Merge responses from any connection of a replica, not only the current one."""

    def handle_response(self: Any, replica: Any, epoch: int, response: Any) -> None:
        r = self.replicas.get(replica)
        if r is not None:
            epoch = r.epoch
        original(self, replica, epoch, response)

    return handle_response


def _global_frontier_regresses(_original: Any) -> Any:
    """Take the latest replica's report as the global write frontier, even when it is behind."""

    def _maybe_update(self: Any, c: Any, frontier: Antichain) -> None:
        if frontier == c.write_frontier:
            return
        c.write_frontier = frontier
        if c.read_policy is not None:
            self._downgrade_implied(c, c.read_policy.frontier(frontier))
        else:
            self._downgrade_implied(c, _instance._step_back(frontier))
        self._outbox.emit(FrontierUpper(self.id, c.id, frontier))
        if self.unscheduled:
            dependents = self.compute_dependents.get(c.id)
            if dependents:
                for d in sorted(dependents & self.unscheduled):
                    self._maybe_schedule(d)

    return _maybe_update


# -- storage bugs ---------------------------------------------------------------------------


def _cas_without_compare(original: Any) -> Any:
    """Compare-and-append that appends even when the shard's upper is not the expected one."""

    def compare_and_append(
        state: Any, batch: Any, expected_upper: Any, new_upper: Any, **kw: Any
    ) -> Any:
        if not state.finalized and state.upper != expected_upper:
            state = dataclasses.replace(state, upper=expected_upper)
        return original(state, batch, expected_upper, new_upper, **kw)

    return compare_and_append


def _storage_patch() -> AbstractContextManager[None]:
    from tidegate.spec.shard import transitions as _transitions

    return _replaced(
        _transitions,
        "compare_and_append",
        _cas_without_compare(_transitions.__dict__["compare_and_append"]),
    )


# -- restart bugs ---------------------------------------------------------------------------


def _restore_from_zero(original: Any) -> Any:
    """The restore plan's dataflows start at time 0, as if nothing had been compacted since."""

    def restore_plan(state: Any, frontiers: Any = None, **kw: Any) -> Any:
        plan = original(state, frontiers, **kw)
        if frontiers is None:
            return plan
        return dataclasses.replace(
            plan, dataflows=tuple(d.with_as_of(Antichain([0])) for d in plan.dataflows)
        )

    return restore_plan


def _restore_patch() -> AbstractContextManager[None]:
    from tidegate.runtime.environment import _opening

    return _replaced(
        _opening, "restore_plan", _restore_from_zero(_opening.__dict__["restore_plan"])
    )


def _restore_skips_reconcile_patch() -> AbstractContextManager[None]:
    """A restarted controller never reconciles storage: shards of objects dropped while it was
    down (or whose drop it never finished) stay behind."""
    from tidegate.spec.storage import controller as _storage_controller

    cls = _storage_controller.StorageController
    return _replaced(cls, "reconcile_state", lambda self, claimed=(): [])


# -- runtime bugs ---------------------------------------------------------------------------


def _old_freshness_patch() -> AbstractContextManager[None]:
    """The runtime before group commit: a commit advances only the tables it writes, and a
    fresh read takes its inputs' latest complete time instead of the oracle's read timestamp
    (a read-your-writes bug once found: a join misses the caller's own append)."""
    from tidegate.runtime.controller import driver as _driver
    from tidegate.runtime.environment import _data

    original_tables = _driver.ControllerDriver.__dict__["tables"]

    def tables(self: Any) -> Any:
        touched = getattr(self, "_mutant_touched", None)
        every = original_tables(self)
        return every if touched is None else [t for t in every if t in touched]

    original_commit = _driver.ControllerDriver.__dict__["_commit"]

    async def _commit(self: Any, group: Any) -> None:
        touched = {id for req in group for id, _rows in req.batches}
        self._mutant_touched = touched or None
        try:
            await original_commit(self, group)
        finally:
            self._mutant_touched = None

    async def _fresh_time(self: Any, inputs: Any, since: Any, what: Any) -> int:
        def ready() -> bool:
            lower = since()
            return bool(lower.elements) and not self._input_upper(*inputs).less_equal(
                lower.elements[0]
            )

        await self.core.driver.wait_frontiers(ready)
        lower, upper = since(), self._input_upper(*inputs)
        t = int(lower.elements[0])
        return max(t, int(upper.elements[0]) - 1) if upper.elements else t

    return _together(
        _replaced(_driver.ControllerDriver, "tables", tables),
        _replaced(_driver.ControllerDriver, "_commit", _commit),
        _replaced(_data.ReadsAndWrites, "_fresh_time", _fresh_time),
    )


class _EagerAcks(dict):  # type: ignore[type-arg]
    """The driver's table of append waiters, answering each one as soon as it is registered."""

    def __setitem__(self, ticket: Any, waiter: Any) -> None:
        super().__setitem__(ticket, waiter)
        waiter.value = None
        waiter.done.set()


def _ack_before_durable_patch() -> AbstractContextManager[None]:
    """A group commit acknowledges its appends as soon as it has issued their writes."""
    from tidegate.runtime.controller import driver as _driver

    cls = _driver.ControllerDriver
    original = cls.__dict__["__init__"]

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        original(self, *args, **kw)
        self._appends = _EagerAcks()

    return _replaced(cls, "__init__", __init__)


def _blob_after_commit_patch() -> AbstractContextManager[None]:
    """The shard store commits a batch's state before writing its blob (a crash in between
    leaves the shard referring to a batch that does not exist)."""
    from tidegate.runtime.storage import store as _store

    cls = _store.ShardStore
    original_set: list[Any] = []

    def compare_and_append(self: Any, shard: str, updates: Any, *args: Any, **kw: Any) -> Any:
        blob = self.blob
        pending: list[tuple[str, bytes]] = []

        class _Later:
            def set(self, key: str, value: bytes) -> None:
                pending.append((key, value))

            def __getattr__(self, name: str) -> Any:
                return getattr(blob, name)

        self.blob = _Later()
        try:
            out = original_set[0](self, shard, updates, *args, **kw)
        finally:
            self.blob = blob
        for key, value in pending:
            blob.set(key, value)
        return out

    original_set.append(cls.__dict__["compare_and_append"])
    return _replaced(cls, "compare_and_append", compare_and_append)


def _write_retry_without_token_patch() -> AbstractContextManager[None]:
    """Storage writes are retried after an unknown outcome without their idempotency token."""
    from tidegate.runtime.storage import store as _store

    cls = _store.ShardStore
    original = cls.__dict__["compare_and_append"]

    def compare_and_append(
        self: Any, shard: str, updates: Any, expected: Any, new: Any, token: Any = None, **kw: Any
    ) -> Any:
        return original(self, shard, updates, expected, new, None, **kw)

    return _replaced(cls, "compare_and_append", compare_and_append)


def _finished_subscribe_kept_patch() -> AbstractContextManager[None]:
    """A subscribe that finished (failed, or complete) is never dropped: its holds stay."""
    from tidegate.runtime.controller import driver as _driver
    from tidegate.spec.compute import SubscribeBatchOut

    cls = _driver.ControllerDriver
    original = cls.__dict__["_apply_one"]

    def _apply_one(self: Any, e: Any) -> None:
        if isinstance(e, SubscribeBatchOut):
            sub = self._subscriptions.get(e.id)
            if sub is not None and (e.error is not None or not e.upper.elements):
                sub.deliver(e)
                del self._subscriptions[e.id]
                self._sub_instance.pop(e.id, None)
                return
        original(self, e)

    return _replaced(cls, "_apply_one", _apply_one)


def _catalog_unknown_outcome_patch() -> AbstractContextManager[None]:
    """A catalog write whose answer was lost counts as not done (though it may have landed)."""
    from tidegate.runtime import catalog as _catalog

    return _replaced(_catalog.Catalog, "_landed", lambda self, seqno, data: False)


# -- bugs only the checks that share no code with what they judge see -------------------------


def _policy_rounds_up_patch() -> AbstractContextManager[None]:
    """A lag policy rounds its since *up* to its granularity: up to a granule of the history it
    promised is compacted away."""
    from tidegate.spec.frontier import read_policy as _rp

    def frontier(self: Any, write_frontier: Antichain) -> Antichain:
        els = write_frontier.elements
        if not els:
            return Antichain.bottom(0)
        u = els[0]
        if self.lag == 0:
            return write_frontier
        x = max(0, u - self.lag)
        granule = min(self.lag, self.max_granularity)
        return Antichain.from_elem(min(u, x + (-x) % granule))

    return _replaced(_rp.LagWriteFrontier, "frontier", frontier)


def _restore_forgets_policies_patch() -> AbstractContextManager[None]:
    """A restarted controller chooses its indexes' as-ofs without their read policies: each comes
    back readable only from its inputs' upper, losing the history its policy kept."""
    from tidegate.runtime.catalog import _restore

    original = _restore.__dict__["select_as_ofs"]

    def select_as_ofs(dataflows: Any, storage: Any, policies: Any, *args: Any, **kw: Any) -> Any:
        return original(dataflows, storage, {}, *args, **kw)

    return _replaced(_restore, "select_as_ofs", select_as_ofs)


def _catalog_swaps_policy_fields_patch() -> AbstractContextManager[None]:
    """The catalog decodes a lag policy with its lag and granularity swapped: a restarted
    controller compacts by another policy than the one the client set (the old checks, which
    compared the restored policy with the catalog's decoding of it, could not see this)."""
    from tidegate.runtime.catalog import _codec
    from tidegate.spec.frontier.read_policy import LagWriteFrontier

    original = _codec.__dict__["policy_from_dict"]

    def policy_from_dict(d: Any) -> Any:
        if d["kind"] == "lag_write_frontier":
            return LagWriteFrontier(int(d["max_granularity"]), int(d["lag"]))
        return original(d)

    return _replaced(_codec, "policy_from_dict", policy_from_dict)


def _hydrated_at_as_of_patch() -> AbstractContextManager[None]:
    """A replica counts as hydrated once its output frontier reaches the as_of (not beyond it):
    at once, before it computed anything."""
    from tidegate.spec.compute import state as _state

    def hydrated(self: Any) -> bool:
        return not self.as_of.elements or self.as_of <= self.output_frontier

    return _replaced(_state.ReplicaCollectionState, "hydrated", hydrated)


def _hydrated_when_complete_patch() -> AbstractContextManager[None]:
    """A replica's collection counts as hydrated only once its output is complete (frontier
    ``[]``), "computed" read as "finished": it never claims too early, and a live dataflow is
    never hydrated."""
    from tidegate.spec.compute import state as _state

    def hydrated(self: Any) -> bool:
        return not self.as_of.elements or not self.output_frontier.elements

    return _replaced(_state.ReplicaCollectionState, "hydrated", hydrated)


def _cancelled_peek_keeps_hold(original: Any) -> Any:
    """A cancelled peek is answered and forgotten, but its read hold is never released."""

    def _finish_peek(self: Any, uuid: _uuid.UUID, result: PeekResult) -> None:
        if isinstance(result, PeekCanceled):
            p = self.peeks[uuid]
            caps = self._update_read_caps
            storage = self.storage
            keep = [(p.timestamp, -1)]
            self._update_read_caps = lambda id, changes: (
                None if (id == p.id and changes == keep) else caps(id, changes)
            )
            try:
                if p.on_storage:
                    self.storage = _KeepStorageHold(storage, p.id, p.timestamp)
                original(self, uuid, result)
            finally:
                del self._update_read_caps
                self.storage = storage
            return
        original(self, uuid, result)

    return _finish_peek


class _KeepStorageHold:
    """A storage port that ignores one hold release (the peek's)."""

    def __init__(self, inner: Any, id: Any, timestamp: Any) -> None:
        self._inner = inner
        self._id = id
        self._timestamp = timestamp

    def update_storage_read_holds(self, changes: Any) -> None:
        rest = {
            k: v
            for k, v in changes.items()
            if not (k == self._id and list(v) == [(self._timestamp, -1)])
        }
        if rest:
            self._inner.update_storage_read_holds(rest)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _driver_keeps_answered_peeks_patch() -> AbstractContextManager[None]:
    """The driver hands a peek's answer to its caller but keeps the waiter (a leak)."""
    from tidegate.runtime.controller import driver as _driver

    cls = _driver.ControllerDriver
    original = cls.__dict__["_apply_one"]

    def _apply_one(self: Any, e: Any) -> None:
        waiter = self._peeks.get(e.uuid) if isinstance(e, PeekResultOut) else None
        original(self, e)
        if waiter is not None:
            self._peeks[e.uuid] = waiter

    return _replaced(cls, "_apply_one", _apply_one)


def _complete_subscribe_kept_patch() -> AbstractContextManager[None]:
    """A subscribe whose output is complete gets its last batch but is never dropped: it stays in
    the controller, holding what it holds, though nothing is left to compute."""
    from tidegate.runtime.controller import driver as _driver
    from tidegate.spec.compute import SubscribeBatchOut

    cls = _driver.ControllerDriver
    original = cls.__dict__["_apply_one"]

    def _apply_one(self: Any, e: Any) -> None:
        if isinstance(e, SubscribeBatchOut) and e.error is None and not e.upper.elements:
            sub = self._subscriptions.pop(e.id, None)
            if sub is not None:
                sub.deliver(e)
                self._sub_instance.pop(e.id, None)
                return
        original(self, e)

    return _replaced(cls, "_apply_one", _apply_one)


def _subscribe_end_swallowed(original: Any) -> Any:
    """A subscribe's last batch (its upper the empty frontier) is never forwarded to its client."""

    def _on_subscribe(self: Any, r: Any, resp: Any) -> None:
        outbox = self._outbox
        self._outbox = Outbox()
        try:
            original(self, r, resp)
            mine = self._outbox.drain()
        finally:
            self._outbox = outbox
        outbox.extend(
            e
            for e in mine
            if not (isinstance(e, SubscribeBatchOut) and not e.upper.elements and e.error is None)
        )

    return _on_subscribe


def _copy_to_ignores_counts_patch() -> AbstractContextManager[None]:
    """A copy-to writes each distinct row once, whatever its count."""
    from tidegate.replica import service as _service

    original = _service.__dict__["write_copy_to"]

    def write_copy_to(url: str, sink_id: Any, as_of: int, schema: Any, rows: Any, **kw: Any) -> int:
        return int(original(url, sink_id, as_of, schema, [(r, 1) for r, n in rows if n > 0], **kw))

    return _replaced(_service, "write_copy_to", write_copy_to)


def _reused_dataflows_go_quiet_patch() -> AbstractContextManager[None]:
    """A replica that keeps a dataflow across a reconnect (reconciliation reuses it) never reports
    its write frontier again; the controller, taking the greatest over its replicas, does not
    notice while another replica reports."""
    from tidegate.spec.compute_replica.outputs import Reconciled

    cls = _replica.ComputeReplica
    reconcile, publish = cls.__dict__["_reconcile"], cls.__dict__["_publish"]

    def _reconcile(self: Any) -> list[Any]:
        out: list[Any] = reconcile(self)
        quiet = self.__dict__.setdefault("_mutant_quiet", set())
        for o in out:
            if isinstance(o, Reconciled):
                quiet.update(g for key in o.reused for g in key)
        return out

    def _publish(self: Any) -> list[Any]:
        out: list[Any] = publish(self)
        quiet = self.__dict__.get("_mutant_quiet")
        if not quiet:
            return out
        kept: list[Any] = []
        for o in out:
            if isinstance(o, Respond) and isinstance(o.response, Frontiers):
                f = o.response
                if f.id in quiet and f.write is not None:
                    if f.input is None and f.output is None:
                        continue
                    o = Respond(Frontiers(f.id, input=f.input, output=f.output))
            kept.append(o)
        return kept

    return _together(_replaced(cls, "_reconcile", _reconcile), _replaced(cls, "_publish", _publish))


# -- storage replica bugs (sources and sinks) ---------------------------------------------------


def _source_ack_on_delivery_patch() -> AbstractContextManager[None]:
    """An upstream reader confirms everything it delivered, not what the ingestion made durable
    (PostgreSQL's slot then forgets it: a crash before the data is written loses it)."""
    from tidegate.replica.storage import sources as _sources

    cls = _sources.ReaderWork

    def _apply_ack(self: Any, reader: Any) -> None:
        if self.delivered > self.acked:
            reader.ack(self.delivered)
            self.acked = self.delivered
        self.unacked.acked(self._ack_wanted)

    return _replaced(cls, "_apply_ack", _apply_ack)


def _pg_update_drops_old_column_patch() -> AbstractContextManager[None]:
    """The pgoutput decoder drops the last column of an UPDATE's old tuple (a bound off by one
    in the TupleData loop), so the reader cannot retract the old row."""
    from tidegate.runtime.sources.postgres import _core
    from tidegate.runtime.sources.postgres._pgoutput import Update

    original = _core.__dict__["decode_message"]

    def decode_message(payload: bytes) -> Any:
        msg = original(payload)
        if isinstance(msg, Update) and msg.old:
            return dataclasses.replace(msg, old=msg.old[:-1])
        return msg

    return _replaced(_core, "decode_message", decode_message)


def _pg_ack_off_by_one_patch() -> AbstractContextManager[None]:
    """The PostgreSQL reader reports the acknowledged offset itself as flushed (not the LSN
    below it), so the slot confirms, and forgets, the transaction at that offset too."""
    from tidegate.runtime.sources.postgres import _core

    cls = _core.ReplicationCore

    def ack(self: Any, offset: int, now: float) -> None:
        if offset > self._flushed:
            self._flushed = offset
            self._status(now)

    return _replaced(cls, "ack", ack)


def _pg_keepalive_inside_transaction_patch() -> AbstractContextManager[None]:
    """The PostgreSQL reader moves its upper to a keepalive's WAL end even while a transaction
    is open (the server's WAL is past that transaction's commit)."""
    from tidegate.runtime.sources.postgres import _core
    from tidegate.runtime.sources.postgres._pgoutput import Keepalive, decode_frame

    cls = _core.ReplicationCore
    original = cls.__dict__["_keepalive"]

    def _keepalive(self: Any, frame: bytes, now: float) -> None:
        keepalive = decode_frame(frame)
        assert isinstance(keepalive, Keepalive)
        if self._txn is not None:
            self._upper = max(self._upper, keepalive.wal_end + 1)
        original(self, frame, now)

    return _replaced(cls, "_keepalive", _keepalive)


def _data_before_binding_patch() -> AbstractContextManager[None]:
    """The service reports a binding (remap) write done as soon as it is issued, so the data
    it assigns is written while the binding may not have landed (or never will)."""
    from tidegate.replica.storage import events as _events
    from tidegate.replica.storage import shards as _shards
    from tidegate.spec.storage_replica import replica as _storage_replica

    remaps: set[Any] = set()
    write_cls, core_cls = _shards.ShardWrite, _storage_replica.StorageReplica
    original_start, original_drain = write_cls.__dict__["start"], core_cls.__dict__["drain"]

    def drain(self: Any) -> Any:
        remaps.update(run.remap_id for run in self._ingestions.values())
        return original_drain(self)

    def start(self: Any) -> None:
        if self.out.id in remaps:
            ctx = self.ctx
            ctx.post(_events.WriteDone(self, self.out.id, True, self.out.new_upper))
            self.ctx = dataclasses.replace(ctx, post=lambda event: None)
        original_start(self)

    return _together(_replaced(core_cls, "drain", drain), _replaced(write_cls, "start", start))


def _resume_from_remap_upper_patch() -> AbstractContextManager[None]:
    """A restarted ingestion resumes upstream from its latest binding (the remap shard's upper)
    rather than from the binding of its data shard's upper, skipping the offsets in between."""
    from tidegate.spec.storage_replica import _ingestion

    cls = _ingestion.IngestionRun
    original = cls.__dict__["remap_loaded"]

    def remap_loaded(self: Any, d: Any, bindings: Any, remap_upper: Any) -> Any:
        with _replaced(_ingestion, "resume_offset", lambda b, data_upper: b.latest):
            return original(self, d, bindings, remap_upper)

    return _replaced(cls, "remap_loaded", remap_loaded)


def _reclock_off_by_one_patch() -> AbstractContextManager[None]:
    """An upstream change at exactly a binding's offset is reclocked to that binding's time (the
    binding says the offsets *below* it are in)."""
    import bisect

    from tidegate.spec.storage_replica import _ingestion

    def reclock(updates: Any, bindings: Any) -> Any:
        out, rest = [], []
        offsets = [o for _, o in bindings.changes]
        times = [max(t, bindings.as_of) for t, _ in bindings.changes]
        for row, offset, diff in updates:
            i = bisect.bisect_left(offsets, offset)
            if i == len(offsets):
                rest.append((row, offset, diff))
            else:
                out.append((row, times[i], diff))
        return out, rest

    return _replaced(_ingestion, "reclock", reclock)


def _sink_commit_unconditional_patch() -> AbstractContextManager[None]:
    """A sink commits at whatever its target covers now (it re-reads the covered upper and makes
    that its commit's lower), instead of conditionally on the upper it expects."""
    from tidegate.replica.storage import sinks as _sinks

    cls = _sinks.SinkTarget
    original = cls.__dict__["_commit"]

    def _commit(self: Any, op: Any) -> None:
        writer = self.writer
        if writer is not None and op.expected_covered is not None:
            try:
                covered = writer.covered_upper()
            except Exception:
                covered = None
            if covered is not None and covered != op.lower:
                op = dataclasses.replace(op, lower=covered, expected_covered=covered)
        original(self, op)

    return _replaced(cls, "_commit", _commit)


def _iceberg_commit_unchecked_patch() -> AbstractContextManager[None]:
    """The Iceberg writer's commit lands whatever the table covers: it never compares the covered
    upper it reads with the commit's lower (so a lost race, or a zombie's commit of a range
    another incarnation already committed, lands twice)."""
    from tidegate.runtime.sinks import iceberg as _ice

    cls = _ice.IcebergSinkWriter
    original = cls.__dict__["commit"]
    covered_upper = _ice._covered_upper

    def commit(self: Any, updates: Any, lower: int, upper: int) -> None:
        _ice._covered_upper = lambda metadata, sink_id, ident: None  # the check always passes
        try:
            original(self, updates, lower, upper)
        finally:
            _ice._covered_upper = covered_upper

    return _replaced(cls, "commit", commit)


def iceberg_covered_forgets_property_patch() -> AbstractContextManager[None]:
    """The Iceberg writer's covered upper is read from the sink's snapshots alone: once another
    writer's commits and expiry pushed them all out of the table's history, the sink seems to
    have committed nothing (the table property that answers then is ignored).

    Not in :data:`MUTANTS`: the campaign needs a storage replica restart while another writer
    commits, with the controller behind what the sink committed, which no seed of ``sources``
    up to 12 met; ``tests/sim/test_sim_iceberg.py`` catches it with a plan that aims at it."""
    from tidegate.runtime.sinks import iceberg as _ice

    def covered(metadata: Any, sink_id: str, ident: str) -> int | None:
        snapshot = metadata.current_snapshot()
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        while snapshot is not None:
            summary = snapshot.summary
            if summary is not None and summary[_ice.SINK_PROPERTY] == sink_id:
                return int(str(summary[_ice.UPPER_PROPERTY]))
            parent = snapshot.parent_snapshot_id
            snapshot = by_id.get(parent) if parent is not None else None
        return None

    return _replaced(_ice, "_covered_upper", covered)


def _iceberg_covered_of_any_sink_patch() -> AbstractContextManager[None]:
    """The Iceberg writer's covered upper is the newest snapshot's, whichever sink made it: a
    second writer of the same table (another sink id) makes it take that one's progress for
    its own."""
    from tidegate.runtime.sinks import iceberg as _ice

    def covered(metadata: Any, sink_id: str, ident: str) -> int | None:
        snapshot = metadata.current_snapshot()
        if snapshot is None or snapshot.summary is None:
            return None
        return int(str(snapshot.summary[_ice.UPPER_PROPERTY]))

    return _replaced(_ice, "_covered_upper", covered)


def _iceberg_stage_drops_parent_patch() -> AbstractContextManager[None]:
    """The Iceberg writer stages each commit from a copy of the metadata without the head
    snapshot (rather than with the head alone): the append's manifest list then holds only its
    own files, and every commit drops the table's earlier data."""
    from pyiceberg.table.refs import MAIN_BRANCH

    from tidegate.runtime.sinks import iceberg as _ice

    def stage(table: Any) -> None:
        meta = table.metadata
        table.metadata = meta.model_copy(
            update={
                "properties": {**meta.properties, "commit.retry.num-retries": "0"},
                "snapshots": [],
                "snapshot_log": [],
                "refs": {name: ref for name, ref in meta.refs.items() if name == MAIN_BRANCH},
            }
        )

    return _replaced(_ice, "_stage_from_head", stage)


def _fragment_more_off_by_one_patch() -> AbstractContextManager[None]:
    from google.protobuf.message import Message

    from tidegate.runtime.wire import frames as _frames
    from tidegate.runtime.wire.gen import tidegate_compute_pb2 as pb

    def frames(self: Any, value: Any, max_frame_bytes: int | None = None) -> list[bytes]:
        data = self.encode(value).SerializeToString()
        limit = _frames.MAX_FRAME_BYTES if max_frame_bytes is None else max_frame_bytes
        if len(data) <= limit:
            return [data]
        out = []
        for start in range(0, len(data), limit):
            end = start + limit
            # the bug: the slice's start, not its end, is compared with the length, so the
            # last fragment says that more follow
            fragment = pb.ProtoFragment(data=data[start:end], more=start < len(data))
            envelope: Message = self.envelope(fragment=fragment)
            out.append(envelope.SerializeToString())
        return out

    return _replaced(_frames.MessageCodec, "frames", frames)


def _codec_drops_peek_limit_patch() -> AbstractContextManager[None]:
    from tidegate.runtime.wire import codec as _codec

    original = _codec._enc_finishing

    def _enc_finishing(f: Any) -> Any:
        m = original(f)
        m.ClearField("limit")  # the bug: the encoder forgets the optional limit
        return m

    return _replaced(_codec, "_enc_finishing", _enc_finishing)


# -- fencing a deposed controller, and damaged storage (the second round of fault kinds) --------


def _fenced_write_refused_patch() -> AbstractContextManager[None]:
    """A write that landed but cannot be acknowledged is answered with a definite refusal (the
    fencing error, or a typed failure), as if it had not applied (issue 37's "a refusal that
    wrote")."""
    from tidegate.runtime.controller import driver as _driver
    from tidegate.runtime.controller.errors import RuntimeControllerError

    def refused(reason: str, cause: Any = None) -> Any:
        return cause if cause is not None else RuntimeControllerError(reason)

    return _replaced(_driver, "AppendOutcomeUnknown", refused)


def _open_leaves_catalog_patch() -> AbstractContextManager[None]:
    """A read-write open writes the catalog only when its replicas change: a predecessor that
    still runs can go on changing it."""
    from tidegate.runtime.environment import _opening, _replicas

    async def claim(catalog: Any, options: Any, retry: Any) -> Any:
        ops = _replicas.replica_ops(
            catalog.state,
            options.replicas,
            executor=options.executor,
            spark_master=options.spark_master,
        )
        ops += _replicas.storage_replica_ops(catalog.state, options.storage_replica)
        return await retry("catalog write", catalog.apply, ops) if ops else catalog.state

    return _replaced(_opening, "claim_catalog", claim)


def _hello_without_epoch_patch() -> AbstractContextManager[None]:
    """Hellos carry no writer epoch: a replica takes any controller's protocol iteration."""
    from tidegate.spec import controller as _controller

    return _replaced(_controller.Controller, "set_epoch", lambda self, epoch: None)


def _full_disk_not_waited_out_patch() -> AbstractContextManager[None]:
    """Work the catalog already committed to (a DDL's new shard, a dropped collection's
    finalization) gives up on a full disk: the DDL is answered as refused though it happened,
    and the dropped shard stays until a restart."""
    from tidegate.runtime.controller import storage_io as _io

    cls = _io.ShardStorageIO
    original = cls.__dict__["retrying"]

    async def retrying(self: Any, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("patient", None)
        return await original(self, what, fn, *args, **kwargs)

    return _replaced(cls, "retrying", retrying)


def _records_unsealed_patch() -> AbstractContextManager[None]:
    """Catalog and oracle records are written as plain JSON, without a checksum: a flipped bit
    that still parses is taken for other data."""
    from tidegate.runtime import oracle as _oracle
    from tidegate.runtime.catalog import _codec

    def seal(kind: str, payload: bytes) -> bytes:
        return payload

    return _together(_replaced(_codec, "seal", seal), _replaced(_oracle, "seal", seal))


def _catalog_missing_ignored_patch() -> AbstractContextManager[None]:
    """An open without a catalog record starts an empty environment even though the store holds
    data: every table and view vanishes from reads (the shards themselves are kept by the second
    defence, which finalizes only what a catalog recorded as dropped)."""
    from tidegate.runtime.environment import _opening

    async def refuse(store: Any, key: str, shard_ids: Any, retry: Any) -> None:
        return None

    return _replaced(_opening, "_refuse_without_catalog", refuse)


def _ceased_read_waits_patch() -> AbstractContextManager[None]:
    """A fresh read of a source that ceased (or stalled) waits for data that will never come,
    instead of failing with the source's error."""
    from tidegate.runtime.environment import _data

    return _replaced(_data.ReadsAndWrites, "_unreadable_input", lambda self, *gids: None)


def _peek_ignores_named_cluster_patch() -> AbstractContextManager[None]:
    """A read in a cluster the client named (``SET cluster``) of a table or materialized view
    runs where it would without one (the view's own cluster, else ``default``): its ``Peek``
    goes to another instance's replicas. The answer is right (the data is in storage), so only
    a check of which cluster answered sees it; an index on another cluster is still refused."""
    from tidegate.runtime.environment import _data

    original = _data.ReadsAndWrites.__dict__["cluster_of"]

    def cluster_of(self: Any, entry: object, cluster: str | None) -> str:
        if cluster is not None:
            original(self, entry, cluster)  # its refusals (WrongCluster, an unknown cluster)
        routed: str = original(self, entry, None)
        return routed

    return _replaced(_data.ReadsAndWrites, "cluster_of", cluster_of)


def _drop_cluster_keeps_dataflows_patch() -> AbstractContextManager[None]:
    """``DROP CLUSTER ... CASCADE`` drops the cluster's compute instance and its catalog entries
    but not its objects' controller state: a materialized view placed there stays a storage
    collection whose shard is never finalized (its index goes with the instance)."""
    from tidegate.runtime.environment import _clusters

    original = _clusters.Clusters.__dict__["drop_cluster"]

    async def drop_cluster(self: Any, name: str, *, cascade: bool = False) -> Any:
        ddl = self.ddl
        self.ddl = _NoUninstall(ddl)
        try:
            return await original(self, name, cascade=cascade)
        finally:
            self.ddl = ddl

    return _replaced(_clusters.Clusters, "drop_cluster", drop_cluster)


def _alter_cluster_leaves_surplus_running_patch() -> AbstractContextManager[None]:
    """``ALTER CLUSTER c SET (REPLICATION FACTOR = m)`` to fewer replicas drops the surplus ones
    from the catalog and the controller but never has the orchestrator stop their processes."""
    from tidegate.runtime.environment import _clusters

    original = _clusters.Clusters.__dict__["alter_cluster"]

    async def alter_cluster(self: Any, name: str, **kwargs: Any) -> Any:
        core = self.core
        orchestrator = core.orchestrator
        core.orchestrator = _NoStop(orchestrator) if orchestrator is not None else None
        try:
            return await original(self, name, **kwargs)
        finally:
            core.orchestrator = orchestrator

    return _replaced(_clusters.Clusters, "alter_cluster", alter_cluster)


class _NoStop:
    """An orchestrator whose ``stop`` does nothing (everything else is ``inner``'s)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def stop(self, name: str) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _NoUninstall:
    """A DDL helper whose ``uninstall`` does nothing (everything else is ``inner``'s)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def uninstall(self, before: Any, gone: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _sql_ignores_in_cluster_patch() -> AbstractContextManager[None]:
    """A statement's ``IN CLUSTER c`` clause is ignored: ``CREATE INDEX`` / ``CREATE MATERIALIZED
    VIEW ... IN CLUSTER c`` places the dataflow on the session's cluster. Reads stay right;
    the check of where each dataflow runs (the clients' record) sees it."""
    from tidegate.runtime import sql_session

    def _cluster(self: Any, prepared: Any = None) -> str:
        cluster: str = self._values["cluster"]
        return cluster

    return _replaced(sql_session.SqlSession, "_cluster", _cluster)


def _sql_unknown_cluster_runs_in_default_patch() -> AbstractContextManager[None]:
    """A session whose cluster (``SET cluster``) does not exist (any more) runs its statements in
    ``default`` instead of refusing them (42704, as Materialize does)."""
    from tidegate.runtime import sql_session

    original = sql_session.SqlSession.__dict__["_cluster"]

    def _cluster(self: Any, prepared: Any = None) -> str:
        cluster: str = original(self, prepared)
        return cluster if cluster in self._clusters() else "default"

    return _replaced(sql_session.SqlSession, "_cluster", _cluster)


# -- SQL front end and wire protocol bugs (reached by the SQL clients) ---------------------------


def _subquery_drops_offset_patch() -> AbstractContextManager[None]:
    """A query used as a collection (a subquery, a view, a ``WITH`` query, a set operation's
    side) loses its ``OFFSET``: the lowering builds its ``TopK`` from the limit alone."""
    from tidegate.spec.sql import lower as _lower

    cls = _lower.Lowered
    original = cls.__dict__["relation"]

    def relation(self: Any) -> Any:
        return original(dataclasses.replace(self, offset=0))

    return _replaced(cls, "relation", relation)


def _in_subquery_ignores_nulls_patch() -> AbstractContextManager[None]:
    """``x IN (SELECT y ...)`` is ``false``, not NULL, when no ``y`` equals ``x`` though ``x``
    or some ``y`` is NULL: an IN lowered as a plain semi-join, so ``NOT IN`` a body with a NULL
    keeps rows that PostgreSQL drops (the classic ``NOT IN`` bug)."""
    from tidegate.spec.plan import If, Literal, ScalarType
    from tidegate.spec.sql import _subquery

    original = _subquery.__dict__["_in_equal"]

    def _in_equal(*args: Any) -> Any:
        out, texpr = original(*args)
        assert isinstance(texpr.expr, If)
        semi = If(texpr.expr.cond, texpr.expr.then, Literal(False, ScalarType.BOOL))
        return out, dataclasses.replace(texpr, expr=semi)

    return _replaced(_subquery, "_in_equal", _in_equal)


def _temporal_ignores_lower_bound_patch() -> AbstractContextManager[None]:
    """A temporal filter inserts a row at its own time even when its lower bound is later
    (``mz_now() >= ts``, ``mz_now() > ts``, ``BETWEEN``): a row not valid yet is read at
    once, instead of appearing when time reaches the bound."""
    from tidegate.spec.executor import operators as _ops

    updates = _ops.__dict__["temporal_updates"]

    def early(interval: Any, t: int, d: int) -> list[tuple[int, int]]:
        if interval is None:
            return []
        return updates((0, interval[1]), t, d)  # type: ignore[no-any-return]

    return _replaced(_ops, "temporal_updates", early)


def _portal_skips_row_patch() -> AbstractContextManager[None]:
    """A portal suspended after ``Execute`` with a row limit keeps its remaining rows from one
    past the limit (the slice's start off by one), so each portion after the first loses a
    row."""
    from tidegate.runtime.pgwire import session as _session

    cls = _session.WireSession
    original = cls.__dict__["_rows"]

    async def _rows(self: Any, *args: Any) -> None:
        await original(self, *args)
        portal, max_rows = args[-4], args[-3]
        if portal is not None and max_rows > 0 and not portal.done and portal.rows:
            portal.rows = portal.rows[1:]

    return _replaced(cls, "_rows", _rows)


def _copy_fail_ignored_patch() -> AbstractContextManager[None]:
    """The wire protocol's ``COPY ... FROM STDIN`` takes ``CopyFail`` for ``CopyDone``: the
    rows a client gave up on are appended (and the copy answered)."""
    from tidegate.runtime.pgwire import messages as m
    from tidegate.runtime.pgwire import session as _session

    cls = _session.WireSession

    async def _copy_in(self: Any, pending: Any, copy: Any, receive: Any, send: Any) -> Any:
        await send([*pending, m.CopyInResponse(0, (0,) * len(copy.columns))])
        chunks: list[bytes] = []
        while True:
            msg = await receive()
            if isinstance(msg, m.CopyData):
                chunks.append(msg.data)
            elif isinstance(msg, m.CopyDone | m.CopyFail):
                break
        data = b"".join(chunks)
        return await self._run(lambda: self.sql.copy_in(copy, data), interruptible=False)

    return _replaced(cls, "_copy_in", _copy_in)


def _script_not_atomic_patch() -> AbstractContextManager[None]:
    """A script of several statements (not DDL only) runs statement by statement, each
    committing by itself, so a statement that fails leaves the writes before it applied."""
    from tidegate.runtime import sql_session as _session

    cls = _session.SqlSession

    async def _implicit(self: Any, statements: Any) -> bool:
        return False

    return _replaced(cls, "_implicit", _implicit)


def _read_transaction_keeps_holds_patch() -> AbstractContextManager[None]:
    """A read-only transaction's end forgets its read holds instead of releasing them, so what
    it read can never compact past its time again."""
    from tidegate.runtime import sql_session as _session

    def end(self: Any) -> None:
        self.held = None

    return _replaced(_session._Transaction, "end", end)


def _read_transaction_reads_fresh_patch() -> AbstractContextManager[None]:
    """Every read of a read-only transaction chooses a fresh time of its own, so two reads of
    one transaction may see different times."""
    from tidegate.runtime import sql_session as _session

    original = _session.SqlSession._read_ts

    async def _read_ts(self: Any, stmt: Any, params: Any) -> int:
        tx = self._tx
        if tx is not None and tx.read_ts is not None:
            tx.end()
            tx.read_ts = None
        return await original(self, stmt, params)

    return _replaced(_session.SqlSession, "_read_ts", _read_ts)


_ALL = [
    Mutant(
        "peek_before_upper",
        "a replica answers a peek before its upper passes the peek's time (index peeks from the "
        "latest complete time, persist peeks by reading the shard at once)",
        _peek_before_upper_patch,
    ),
    Mutant(
        "regressing_frontier",
        "a replica reports a write frontier behind one it already reported",
        _method(_replica.ComputeReplica, "_publish", _regressing_frontier),
    ),
    Mutant(
        "history_drops_live_peek",
        "the command-history reduction drops peeks that are still pending",
        _history_drops_live_peek,
    ),
    Mutant(
        "peek_without_hold",
        "the controller validates a peek against the since but takes no read hold for it",
        _peek_without_hold_patch,
    ),
    Mutant(
        "peek_checks_as_of",
        "the controller validates an index peek against the collection's as_of, not its since",
        _method(_instance.Instance, "peek", _peek_checks_as_of),
    ),
    Mutant(
        "rehydration_forgets_allow_compaction",
        "rehydrating a replica replays dataflows at their creation as_of, without AllowCompaction",
        _method(_instance.Instance, "add_replica", _forgets_allow_compaction),
    ),
    Mutant(
        "subscribe_forwards_duplicates",
        "the subscribe merge forwards updates at times it already forwarded from another replica",
        _method(_instance.Instance, "_on_subscribe", _subscribe_duplicates),
    ),
    Mutant(
        "subscribe_skips_empty_batches",
        "the controller does not forward subscribe batches without updates, leaving gaps",
        _method(_instance.Instance, "_on_subscribe", _subscribe_skips_empty),
    ),
    Mutant(
        "subscribe_loses_retractions",
        "a replica's subscribe output drops retractions",
        _method(_replica.ComputeReplica, "_absorb", _subscribe_loses_retractions),
    ),
    Mutant(
        "global_frontier_regresses",
        "the response merge takes the latest replica's write frontier even when it is behind",
        _method(
            _instance.Instance, "_maybe_update_global_write_frontier", _global_frontier_regresses
        ),
    ),
    Mutant(
        "append_skips_upper_check",
        "a storage append does not check the shard's upper before writing (no compare in "
        "compare-and-append)",
        _storage_patch,
    ),
    Mutant(
        "release_hold_before_cancel",
        "the controller releases a peek's read hold before cancelling the peek on the other replicas",
        _method(_instance.Instance, "_finish_peek", _release_before_cancel),
    ),
    Mutant(
        "accepts_stale_epoch",
        "the controller does not ignore responses from an old connection (epoch) of a replica",
        _method(_instance.Instance, "handle_response", _accepts_stale_epoch),
        undetectable="the production driver drops every response of a replaced connection "
        "before the controller sees it, so the controller's own epoch check is a second line of "
        "defence that no run can reach",
    ),
    Mutant(
        "restore_ignores_compaction",
        "a restarted controller re-creates each dataflow from time 0, forgetting that its inputs "
        "were compacted since (not the as-of selection's choice)",
        _restore_patch,
    ),
    Mutant(
        "restore_skips_reconcile",
        "a restarted controller never reconciles storage, so shards of collections dropped "
        "around a crash are never finalized",
        _restore_skips_reconcile_patch,
        scenario="churn",
    ),
    Mutant(
        "fresh_reads_from_uppers",
        "the runtime before group commit: commits advance only the tables they write, and a "
        "fresh read takes its inputs' latest complete time, not the oracle's read timestamp",
        _old_freshness_patch,
    ),
    Mutant(
        "ack_before_durable",
        "a group commit acknowledges its appends before their writes are durable",
        _ack_before_durable_patch,
    ),
    Mutant(
        "blob_after_commit",
        "the shard store commits a batch before writing its blob",
        _blob_after_commit_patch,
    ),
    Mutant(
        "write_retry_without_token",
        "storage writes are retried after an unknown outcome without their idempotency token",
        _write_retry_without_token_patch,
    ),
    Mutant(
        "finished_subscribe_kept",
        "a finished or failed subscribe is never dropped, so its read holds stay forever",
        _finished_subscribe_kept_patch,
    ),
    Mutant(
        "catalog_unknown_outcome_lost",
        "a catalog write whose answer was lost is taken as not done, though it may have landed",
        _catalog_unknown_outcome_patch,
        scenario="standard",
    ),
    Mutant(
        "fragment_more_flag_wrong",
        "the framing flags a large message's last fragment as followed by more (it tests the "
        "slice's start against the length), so the receiver never completes the message",
        _fragment_more_off_by_one_patch,
    ),
    Mutant(
        "codec_drops_peek_limit",
        "the compute codec does not encode a peek's LIMIT, so replicas answer every row",
        _codec_drops_peek_limit_patch,
    ),
    Mutant(
        "policy_rounds_up",
        "a lag read policy rounds its since up to its granularity, compacting away history it "
        "promised",
        _policy_rounds_up_patch,
    ),
    Mutant(
        "restore_forgets_policies",
        "a restarted controller chooses its indexes' as-ofs without their read policies, so they "
        "come back without the history their policies kept",
        _restore_forgets_policies_patch,
    ),
    Mutant(
        "catalog_swaps_policy_fields",
        "the catalog decodes a lag read policy with its lag and granularity swapped",
        _catalog_swaps_policy_fields_patch,
    ),
    Mutant(
        "hydrated_at_as_of",
        "a replica counts as hydrated once its output frontier reaches the as_of, not beyond it",
        _hydrated_at_as_of_patch,
    ),
    Mutant(
        "hydrated_when_complete",
        "a replica's collection counts as hydrated only once its output is complete, so a live "
        "dataflow is never answered hydrated",
        _hydrated_when_complete_patch,
    ),
    Mutant(
        "cancelled_peek_keeps_hold",
        "a peek whose caller cancels it is answered and forgotten, but its read hold is kept",
        _method(_instance.Instance, "_finish_peek", _cancelled_peek_keeps_hold),
    ),
    Mutant(
        "driver_keeps_answered_peeks",
        "the controller driver hands a peek's answer to its caller but keeps waiting for it",
        _driver_keeps_answered_peeks_patch,
    ),
    Mutant(
        "complete_subscribe_kept",
        "a subscribe whose output is complete gets its last batch but is never dropped",
        _complete_subscribe_kept_patch,
    ),
    Mutant(
        "subscribe_end_swallowed",
        "the controller never forwards a subscribe's last batch (its upper the empty frontier)",
        _method(_instance.Instance, "_on_subscribe", _subscribe_end_swallowed),
    ),
    Mutant(
        "copy_to_ignores_counts",
        "a copy-to writes each distinct row once, whatever its count",
        _copy_to_ignores_counts_patch,
    ),
    Mutant(
        "reused_dataflows_go_quiet",
        "a replica that keeps a dataflow across a reconnect never reports its write frontier again",
        _reused_dataflows_go_quiet_patch,
    ),
    Mutant(
        "source_ack_on_delivery",
        "an upstream reader acknowledges everything it delivered, before the ingestion made it "
        "durable",
        _source_ack_on_delivery_patch,
        scenario="sources",
    ),
    Mutant(
        "data_before_binding",
        "a binding's write counts as done once issued, so the data it assigns may land first",
        _data_before_binding_patch,
        scenario="sources",
    ),
    Mutant(
        "resume_from_remap_upper",
        "a restarted ingestion resumes upstream from the remap shard's latest binding, not from "
        "the data shard's upper",
        _resume_from_remap_upper_patch,
        scenario="sources",
    ),
    Mutant(
        "reclock_off_by_one",
        "an upstream change at a binding's offset is reclocked to that binding's time",
        _reclock_off_by_one_patch,
        scenario="sources",
    ),
    Mutant(
        "pg_update_drops_old_column",
        "the PostgreSQL reader's pgoutput decoder drops the last column of an UPDATE's old tuple",
        _pg_update_drops_old_column_patch,
        scenario="sources",
    ),
    Mutant(
        "pg_ack_off_by_one",
        "the PostgreSQL reader reports an acknowledged offset itself as flushed, so its slot "
        "forgets the transaction at that offset before it is durable",
        _pg_ack_off_by_one_patch,
        scenario="sources",
    ),
    Mutant(
        "pg_keepalive_inside_transaction",
        "the PostgreSQL reader advances its upper on a keepalive in the middle of a transaction, "
        "past the transaction it has not delivered yet",
        _pg_keepalive_inside_transaction_patch,
        scenario="sources",
    ),
    Mutant(
        "sql_subquery_drops_offset",
        "the SQL lowering drops the OFFSET of a query used as a collection (a subquery, view, "
        "WITH query or set operation's side)",
        _subquery_drops_offset_patch,
    ),
    Mutant(
        "sql_in_subquery_ignores_nulls",
        "the SQL lowering answers x IN (SELECT ...) false where no value matches though x or one "
        "of the values is NULL (NULL in SQL), so NOT IN a subquery with a NULL keeps rows",
        _in_subquery_ignores_nulls_patch,
    ),
    Mutant(
        "sql_temporal_ignores_lower_bound",
        "a temporal filter inserts each row at its own time, not when time reaches its lower "
        "bound (mz_now() >= ts, mz_now() > ts, BETWEEN), so rows not valid yet are read at once",
        _temporal_ignores_lower_bound_patch,
    ),
    Mutant(
        "pgwire_portal_skips_row",
        "the wire protocol's portal keeps its rows from one past the Execute's row limit, so "
        "fetching in portions loses a row per portion",
        _portal_skips_row_patch,
    ),
    Mutant(
        "copy_fail_ignored",
        "the wire protocol's COPY FROM STDIN takes CopyFail for CopyDone, so the rows a client "
        "gave up on land",
        _copy_fail_ignored_patch,
    ),
    Mutant(
        "sql_script_not_atomic",
        "a script of several statements commits each statement by itself, so one that fails "
        "leaves the writes before it applied",
        _script_not_atomic_patch,
    ),
    Mutant(
        "read_transaction_keeps_holds",
        "a read-only transaction's end forgets its read holds instead of releasing them",
        _read_transaction_keeps_holds_patch,
    ),
    Mutant(
        "read_transaction_reads_fresh",
        "each read of a read-only transaction reads at a fresh time of its own, not the time its "
        "first read chose",
        _read_transaction_reads_fresh_patch,
    ),
    Mutant(
        "sink_commit_unconditional",
        "a sink commits at whatever its target covers now, not conditionally on the upper it "
        "expects",
        _sink_commit_unconditional_patch,
        scenario="sources",
    ),
]

_ALL += [
    Mutant(
        "fenced_write_refused",
        "a write that landed but cannot be acknowledged (its controller was deposed meanwhile, "
        "or some tables lost a race) is answered with a definite refusal",
        _fenced_write_refused_patch,
        scenario="split_brain",
    ),
    Mutant(
        "open_leaves_catalog",
        "a read-write open leaves the catalog as it found it, so a deposed predecessor can still "
        "change it",
        _open_leaves_catalog_patch,
        scenario="split_brain",
    ),
    Mutant(
        "hello_without_epoch",
        "replicas never learn the controller's writer epoch, so a deposed controller takes them "
        "back with its stale dataflows",
        _hello_without_epoch_patch,
        scenario="split_brain",
    ),
    Mutant(
        "records_unsealed",
        "catalog and oracle records carry no checksum: rot that still parses reads as other data",
        _records_unsealed_patch,
        scenario="damaged",
    ),
    Mutant(
        "full_disk_not_waited_out",
        "a DDL's shard creation, or a dropped collection's finalization, gives up on a full disk "
        "(the DDL answered as refused though it happened; the shard left behind)",
        _full_disk_not_waited_out_patch,
        scenario="damaged",
    ),
    Mutant(
        "catalog_missing_ignored",
        "an open that finds no catalog record but data starts empty: its tables vanish",
        _catalog_missing_ignored_patch,
        scenario="damaged",
    ),
    Mutant(
        "iceberg_commit_unchecked",
        "the Iceberg sink writer commits without comparing the table's covered upper with the "
        "commit's lower",
        _iceberg_commit_unchecked_patch,
        scenario="sources",
    ),
    Mutant(
        "iceberg_stage_drops_parent",
        "the Iceberg sink writer stages a commit from metadata without the head snapshot, so the "
        "commit's manifest list drops the table's earlier files",
        _iceberg_stage_drops_parent_patch,
        scenario="sources",
    ),
    Mutant(
        "iceberg_covered_of_any_sink",
        "the Iceberg sink writer takes the newest snapshot's upper for its covered upper, "
        "whichever sink wrote it",
        _iceberg_covered_of_any_sink_patch,
        scenario="sources",
    ),
    Mutant(
        "ceased_read_waits",
        "a fresh read of a source that ceased (its upstream changed schema, its slot is gone) "
        "waits for ever instead of failing typed",
        _ceased_read_waits_patch,
        scenario="sources",
    ),
]

_ALL += [
    Mutant(
        "peek_ignores_named_cluster",
        "a read of a table or materialized view in a cluster the client named runs on the "
        "view's own cluster (or default): another instance's replicas answer it",
        _peek_ignores_named_cluster_patch,
        scenario="clusters",
    ),
    Mutant(
        "drop_cluster_keeps_dataflows",
        "DROP CLUSTER ... CASCADE drops the instance and the catalog entries but leaves a "
        "materialized view placed there a storage collection, its shard never finalized",
        _drop_cluster_keeps_dataflows_patch,
        scenario="clusters",
    ),
    Mutant(
        "alter_cluster_leaves_surplus_running",
        "ALTER CLUSTER to a lower replication factor leaves the surplus replicas' processes "
        "running",
        _alter_cluster_leaves_surplus_running_patch,
        scenario="clusters",
    ),
    Mutant(
        "sql_ignores_in_cluster",
        "CREATE INDEX / MATERIALIZED VIEW ... IN CLUSTER c places the dataflow on the session's "
        "cluster",
        _sql_ignores_in_cluster_patch,
        scenario="clusters",
    ),
    Mutant(
        "sql_unknown_cluster_runs_in_default",
        "a SQL session whose cluster does not exist runs its statements in default, not "
        "refusing them (42704)",
        _sql_unknown_cluster_runs_in_default_patch,
        scenario="clusters",
    ),
]

MUTANTS: dict[str, Mutant] = {m.name: m for m in _ALL}
"""Every mutant by name."""


def mutant_names(*, detectable: bool | None = None) -> list[str]:
    """The mutants' names in definition order (only the detectable ones, or only the others)."""
    return [m.name for m in _ALL if detectable is None or (m.undetectable is None) == detectable]


# -- mutants for the exhaustive explorer (``tidegate sim explore --mutant``) -------------------


def _rehydrates_from_reported_epoch(_original: Any) -> Any:
    """Rehydrate on the reported epoch + 1 without checking that the report is about the
    current connection: a late report of an old failure reuses the current epoch's number."""

    def replica_failed(self: Any, replica: Any, epoch: int, reason: str) -> None:
        from tidegate.spec.compute.effects import ReplicaStatusEvent

        r = self.replicas.get(replica)
        if r is None:
            return
        self._outbox.emit(ReplicaStatusEvent(self.id, replica, "failed", epoch, reason))
        self.remove_replica(replica, dropped=False)
        self.add_replica(replica, r.config, epoch + 1, status="rehydrating")

    return replica_failed


EXPLORER_MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        Mutant(
            "rehydrates_from_reported_epoch",
            "a failure report about a connection already replaced rehydrates the replica again, "
            "on the reported epoch + 1: the number of the connection that is open, so two "
            "connections share an epoch and the old one's responses are taken as the new one's",
            _method(_instance.Instance, "replica_failed", _rehydrates_from_reported_epoch),
            undetectable="the simulator's driver reports each connection's failure once, "
            "before the controller replaces it; the explorer delivers a second, late report",
        ),
    ]
}
"""Bugs planted for the explorer alone: their interleavings are ones random campaigns rarely
or never produce, so the campaign's mutant tests do not list them."""


def explorer_mutant(name: str) -> Mutant:
    """A mutant by name, the explorer's own or the campaign's (``KeyError`` if neither)."""
    found = EXPLORER_MUTANTS.get(name) or MUTANTS.get(name)
    if found is None:
        raise KeyError(f"no mutant {name!r}")
    return found
