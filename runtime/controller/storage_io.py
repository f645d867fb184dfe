"""The storage controller's effects carried out against a :class:`ShardStore`.

:class:`ShardStorageIO` performs ``RegisterShard``, ``WriteToShard``,
``ReadSnapshot``, ``DowngradeShardSince`` and ``DropShard`` on the shard
``str(id)`` of each collection. Work on one shard runs in the order the
effects arrived (one worker task per busy shard; consecutive since
downgrades collapse into the last one), different shards proceed in
parallel. Blocking store calls run where the :class:`~tidegate.runtime.platform.Platform`
puts them: worker threads in production, except a small write to a local
store (:data:`BRIEF_WRITE_ROWS`), which runs on the event loop. Outcomes go back to the controller
through the ``report`` callback given to :meth:`start`: a function of the
controller that returns its effects (``complete_write``, ``complete_snapshot``).

A failure that may be transient (the backend unreachable, an outcome left
unknown: :class:`~tidegate.spec.errors.Indeterminate`) is retried with capped
backoff until the store answers definitely; writes carry an idempotency token,
so a retry after an unknown outcome never appends twice and a write is never
reported failed when it in fact landed. Definite refusals (typed errors such
as :class:`~tidegate.spec.errors.UpperMismatch`) are reported at once.

The controller holds each shard with one critical reader (``reader_id``):
the compute and storage read holds reach the shard through its since
downgrades, so shard compaction follows the read policies. Downgrades
compare the reader's *opaque* (learned when the shard is opened): once a
promoted controller took the reader over (:meth:`ShardStorageIO.take_over`,
with its own opaque), the fenced controller's downgrades are refused
(``OpaqueMismatch``) and cannot move the new controller's holds. A controller
that opens read-write claims the reader the same way (:attr:`ShardStorageIO.writer_epoch`:
its writer epoch becomes the opaque of every shard it opens), so a predecessor
that still runs -- stopped, taken for dead, resumed -- cannot move its holds either.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import pyarrow as pa

from tidegate.runtime.platform import REAL, Platform
from tidegate.runtime.storage.store import ShardStore
from tidegate.spec.controller import Controller
from tidegate.spec.errors import (
    ConsensusCorrupt,
    FinalizationRefused,
    Indeterminate,
    OpaqueMismatch,
    RequestsApplied,
    ShardFinalized,
    StorageUnavailable,
    TidegateError,
    UnsupportedStateVersion,
    UpperMismatch,
)
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.shard import SinceDowngradeLimiter
from tidegate.spec.storage import (
    DowngradeShardSince,
    DropShard,
    ReadSnapshot,
    RegisterShard,
    ShardFrontiers,
    WriteToShard,
)

from .schemas import arrow_schema, shard_name

__all__ = ["CONTROLLER_READER", "Report", "ShardStorageIO", "StorageEffectIO", "is_transient"]

log = logging.getLogger(__name__)

T = TypeVar("T")

CONTROLLER_READER = "controller"
"""The id of the controller's critical reader on every shard."""

Report: TypeAlias = Callable[[Callable[[Controller], object]], None]
"""How outcomes reach the controller: ``report(lambda ctl: ctl.storage.complete_write(...))``."""

StorageEffectIO: TypeAlias = (
    RegisterShard | WriteToShard | ReadSnapshot | DowngradeShardSince | DropShard
)

RETRY_FIRST_S = 0.01
RETRY_CAP_S = 1.0

BRIEF_WRITE_ROWS = 256
"""A write of at most this many rows to a local store (:attr:`ShardStore.local`) runs where the
platform runs brief calls (:meth:`~tidegate.runtime.platform.Platform.run_brief`): a group
commit of single-row appends, about a millisecond of CPU and one fsync."""


def is_transient(error: BaseException) -> bool:
    """Whether a storage call that raised ``error`` may succeed when retried.

    Typed errors are definite answers (the store refused), except
    :class:`Indeterminate`; anything else (OS, network, driver errors) is the
    backend being unavailable.
    """
    return isinstance(error, Indeterminate) or not isinstance(error, TidegateError)


@dataclass(frozen=True)
class _DueDowngrade:
    """A since downgrade the limiter held back and now lets through (see ``flush_downgrades``)."""

    id: GlobalId
    frontier: Antichain


@dataclass(eq=False)
class _TakeOver:
    """Queued behind a shard's earlier work: move its hold to another critical reader."""

    id: GlobalId
    from_reader: str
    reader_id: str
    opaque: int
    done: anyio.Event = field(default_factory=anyio.Event)


REMEMBERED_REQUESTS = 65_536
"""How many client request ids a controller remembers the outcome of (the newest), besides
what the shards record (see :data:`~tidegate.spec.shard.REQUEST_IDS_MAX`)."""

_STORE_REFUSALS = (StorageUnavailable, ConsensusCorrupt, UnsupportedStateVersion)
"""Refusals of a write by the store itself (not by the shard's rules): the append's callers get
them rather than a misleading ``InvalidUppers``."""


@dataclass
class _SnapshotWaiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    rows: list[Update] | None = None
    error: BaseException | None = None


class ShardStorageIO:
    """Storage effects against ``store`` (see the module docstring)."""

    def __init__(
        self,
        store: ShardStore,
        *,
        reader_id: str = CONTROLLER_READER,
        platform: Platform = REAL,
        since_interval_ms: int = 0,
    ) -> None:
        self.store = store
        self.since_limiter: SinceDowngradeLimiter[GlobalId] = SinceDowngradeLimiter(
            since_interval_ms
        )
        """Which since downgrades go to the store now: at most one per shard per
        ``since_interval_ms`` (persist's ``maybe_compare_and_downgrade_since``; see
        :mod:`tidegate.spec.shard.since_limit`); the others wait for :meth:`flush_downgrades`."""
        self.reader_id = reader_id
        self.platform = platform
        self._schemas: dict[GlobalId, pa.Schema] = {}
        self._queues: dict[GlobalId, deque[StorageEffectIO | _TakeOver | _DueDowngrade]] = {}
        self._opaque: dict[GlobalId, int] = {}
        """The opaque of this controller's critical reader on each shard (compared on downgrades)."""
        self.writer_epoch: int | None = None
        """A read-write controller's writer epoch: the opaque it claims its critical reader with
        on every shard it opens (``None``: whatever opaque the reader has)."""
        self._requests: dict[int, dict[GlobalId, dict[str, int]]] = {}
        """Client request ids each append ticket's writes carry, by collection."""
        self._applied: dict[int, dict[GlobalId, dict[str, int]]] = {}
        """Request ids each ticket's writes found recorded already, by collection."""
        self._recorded: dict[str, dict[GlobalId, int]] = {}
        """Request ids known to be recorded, by id: the tables and times (oldest first)."""
        self._opened_requests: dict[GlobalId, dict[str, int]] = {}
        self.finalize_check: Callable[[GlobalId], str | None] | None = None
        """Blocking; asked before a shard is finalized (``DropShard``): why the shard must not
        be, or ``None``. An environment checks its durable catalog recorded the object as
        dropped (see :meth:`~tidegate.runtime.environment._core.Core.finalize_check`)."""
        self._reader: dict[GlobalId, str] = {}
        """Shards held by a reader other than ``reader_id`` (taken over, see :meth:`take_over`)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._report: Report | None = None
        self._snapshots: dict[int, _SnapshotWaiter] = {}
        self._refusals: dict[int, dict[GlobalId, BaseException]] = {}
        self._checks: dict[int, Callable[[], TidegateError | None]] = {}
        self._confirmed: dict[int, dict[GlobalId, TidegateError | None]] = {}
        self.errors: list[tuple[str, BaseException]] = []
        """Failures of best-effort work (since downgrades, drops), newest last, for operators and tests."""
        self.retries = 0
        """Storage calls retried after a transient failure (a metric; see the module docstring)."""

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` where the platform runs blocking work (once, no retry)."""
        return await self.platform.run_blocking(fn, *args)

    async def retrying(
        self,
        what: str,
        fn: Callable[..., T],
        *args: Any,
        brief: bool = False,
        patient: bool = False,
    ) -> T:
        """``fn(*args)`` retried with capped backoff while it fails transiently (:func:`is_transient`);
        ``brief``: each try is a brief call (:meth:`~tidegate.runtime.platform.Platform.run_brief`);
        ``patient``: a store's refusal (:class:`StorageUnavailable`: a full disk) is waited out
        too, for work that must happen because the catalog already committed to it."""
        run = self.platform.run_brief if brief else self.platform.run_blocking
        delay = RETRY_FIRST_S
        complained = ""
        while True:
            try:
                return await run(fn, *args)
            except Exception as e:
                if not (is_transient(e) or (patient and isinstance(e, StorageUnavailable))):
                    raise
                self.retries += 1
                text = f"{type(e).__name__}: {e}"
                if text != complained:  # once per distinct problem, not per retry
                    complained = text
                    log.warning("storage %s failed, retrying: %s", what, text)
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_CAP_S)

    # -- setup ---------------------------------------------------------------------------
    def start(self, task_group: anyio.abc.TaskGroup, report: Report) -> None:
        """Run shard work in ``task_group``; report outcomes through ``report``."""
        self._tg = task_group
        self._report = report

    def set_schema(self, id: GlobalId, schema: Schema | pa.Schema) -> None:
        """The row schema of ``id``'s shard (needed before its ``RegisterShard`` creates it)."""
        self._schemas[id] = arrow_schema(schema) if isinstance(schema, Schema) else schema

    async def ensure_shard(self, id: GlobalId, schema: Schema | pa.Schema) -> ShardFrontiers:
        """Create (or find) ``id``'s shard with ``schema`` and the controller's reader; its frontiers.

        Called once the catalog records ``id``: a full disk is waited out, never reported as
        the DDL's refusal (it did happen; a refusal that wrote is worse than a slow answer). The
        client request ids the shard records are remembered (see :meth:`recorded`)."""
        self.set_schema(id, schema)
        frontiers = await self.retrying(f"create shard {id}", self._ensure, id, patient=True)
        opened = self._opened_requests.pop(id, None)
        if opened:
            self.remember_requests(id, opened)
        return frontiers

    async def advance_since(self, id: GlobalId, since: Antichain) -> None:
        """Move the controller's reader on ``id``'s shard to ``since`` now, durably (past the
        limiter that paces downgrades).

        For a new materialized view's shard, before its dataflow writes: its since is then its
        as_of on the disk, so a controller that restores it refuses reads before the as_of
        instead of answering them from a shard that has no data there. Best effort, as every
        downgrade: a deposed controller is refused (a restore then takes the as_of it chooses
        for a view whose shard is empty)."""
        await self._best_effort("downgrade", self._downgrade, id, since, patient=True)

    def _ensure(self, id: GlobalId) -> ShardFrontiers:
        """The since is the controller's own reader's: the shard's since (the meet over every
        reader) can be held back by a replica's leased reader, which may let go at any time, so
        a time below the controller's since is not one it can keep readable."""
        name = shard_name(id)
        reader = self._reader_of(id)
        self.store.create_shard(name, self._schemas[id])
        self._claim(id, name, reader)
        state = self.store.state(name)
        held = state.reader_since(reader)
        since = state.since if held is None else state.since.join(held)
        if state.requests:
            self._opened_requests[id] = dict(state.requests)  # remembered on the event loop
        return ShardFrontiers(since, state.upper)

    def _claim(self, id: GlobalId, name: str, reader: str) -> None:
        """Register (or find) the controller's reader on shard ``name`` and learn its opaque;
        with a :attr:`writer_epoch`, claim the reader with it first [OpaqueMismatch if a newer
        controller claimed it: this one is deposed]."""
        epoch = self.writer_epoch
        self.store.register_critical_reader(
            name, reader, opaque=self._opaque.get(id, 0 if epoch is None else epoch)
        )
        mine = self.store.state(name).critical_readers.get(reader)
        if mine is None:
            return
        opaque = mine.opaque
        if epoch is not None and opaque != epoch:
            if opaque > epoch:
                raise OpaqueMismatch(name, epoch, opaque)
            self.store.compare_and_downgrade_since(name, reader, opaque, epoch, mine.since)
            opaque = epoch
        self._opaque[id] = opaque

    def _reader_of(self, id: GlobalId) -> str:
        return self._reader.get(id, self.reader_id)

    async def uppers(self, ids: Iterable[GlobalId]) -> dict[GlobalId, Antichain]:
        """The current uppers of the shards of ``ids`` (missing shards are left out)."""
        wanted = list(ids)

        def read() -> dict[GlobalId, Antichain]:
            out: dict[GlobalId, Antichain] = {}
            for id in wanted:
                try:
                    out[id] = self.store.upper(shard_name(id))
                except TidegateError:
                    continue
            return out

        return await self.run_sync(read)

    # -- effects -------------------------------------------------------------------------
    def flush_downgrades(self) -> None:
        """Issue the since downgrades the limiter held back whose interval has passed (the
        driver calls it on its maintenance tick)."""
        for id, frontier in self.since_limiter.due(self.platform.clock_ms()):
            self.handle(_DueDowngrade(id, frontier))

    def handle(self, effect: StorageEffectIO | _TakeOver | _DueDowngrade) -> None:
        """Queue ``effect`` behind earlier work on the same shard (never blocks)."""
        if self._tg is None:
            raise RuntimeError("ShardStorageIO.start() was not called")
        queue = self._queues.get(effect.id)
        if queue is not None:
            queue.append(effect)
            return
        self._queues[effect.id] = deque([effect])
        self._tg.start_soon(self._drain, effect.id)

    @property
    def idle(self) -> bool:
        """No shard work is queued or running."""
        return not self._queues

    def expect_snapshot(self, request: int) -> _SnapshotWaiter:
        """Register interest in the rows of snapshot ``request`` (before its effect is handled)."""
        waiter = _SnapshotWaiter()
        self._snapshots[request] = waiter
        return waiter

    async def _drain(self, id: GlobalId) -> None:
        queue = self._queues[id]
        try:
            while queue:
                effect = queue.popleft()
                if (
                    isinstance(effect, DowngradeShardSince)
                    and queue
                    and isinstance(queue[0], DowngradeShardSince)
                ):
                    continue  # a later downgrade supersedes this one
                await self._perform(effect)
        finally:
            del self._queues[id]

    async def _perform(self, effect: StorageEffectIO | _TakeOver | _DueDowngrade) -> None:
        if isinstance(effect, _TakeOver):
            try:
                await self._best_effort(
                    "take over",
                    self._take_over,
                    effect.id,
                    effect.from_reader,
                    effect.reader_id,
                    effect.opaque,
                )
            finally:
                effect.done.set()
        elif isinstance(effect, WriteToShard):
            await self._write(effect)
        elif isinstance(effect, ReadSnapshot):
            await self._snapshot(effect)
        elif isinstance(effect, RegisterShard):
            await self._best_effort("register", self._register, effect.id, patient=True)
        elif isinstance(effect, DowngradeShardSince):
            now = self.since_limiter.offer(effect.id, effect.frontier, self.platform.clock_ms())
            if now is not None:  # else held back: flush_downgrades issues it later
                await self._best_effort("downgrade", self._downgrade, effect.id, now)
        elif isinstance(effect, _DueDowngrade):
            await self._best_effort("downgrade", self._downgrade, effect.id, effect.frontier)
        else:  # the catalog dropped it: a full disk is waited out, the shard must go
            self.since_limiter.forget(effect.id)
            await self._best_effort("drop", self._drop, effect.id, patient=True)

    async def _best_effort(
        self, what: str, fn: Callable[..., Any], *args: Any, patient: bool = False
    ) -> None:
        try:
            await self.retrying(f"{what} {args[0]}", fn, *args, patient=patient)
        except Exception as e:
            log.warning("shard %s of %s failed: %r", what, args[0], e)
            self.errors.append((f"{what} {args[0]}", e))

    def _register(self, id: GlobalId) -> None:
        name = shard_name(id)
        schema = self._schemas.get(id)
        if schema is not None:
            self.store.create_shard(name, schema)
        self._claim(id, name, self._reader_of(id))

    def _downgrade(self, id: GlobalId, frontier: Antichain) -> None:
        name, reader = shard_name(id), self._reader_of(id)
        current = self.store.state(name).critical_readers.get(reader)
        if current is not None and frontier <= current.since:
            return  # the shard is already there (e.g. it was restored ahead of the controller)
        opaque = self._opaque.get(id)
        if opaque is None:
            self.store.downgrade_since(name, reader, frontier)
        else:  # refused (OpaqueMismatch) if a promoted controller took the reader over
            self.store.compare_and_downgrade_since(name, reader, opaque, opaque, frontier)

    async def take_over(self, ids: Iterable[GlobalId], reader_id: str, opaque: int) -> None:
        """Move this controller's holds on the shards of ``ids`` to critical reader ``reader_id``.

        For a promoted controller: ``reader_id`` is the one every controller
        uses, held until now by the controller it fenced. On each shard (after
        its earlier work) that reader is released and registered afresh with
        ``opaque`` (so the fenced controller's downgrades are refused) at this
        controller's since, and this controller's own reader is released.
        Best effort per shard (failures are logged in :attr:`errors`).
        """
        moves = [
            _TakeOver(id, self._reader_of(id), reader_id, opaque)
            for id in ids
            if self._reader_of(id) != reader_id
        ]
        for move in moves:
            self.handle(move)
        for move in moves:
            await move.done.wait()
        self.reader_id = reader_id
        self._reader.clear()

    async def release_holds(self, ids: Iterable[GlobalId]) -> None:
        """Release this controller's reader on the shards of ``ids`` (once each, failures logged).

        A read-only controller that closes without being promoted does this:
        its critical reader would otherwise hold the shards' sinces for ever.
        """
        wanted = [(shard_name(id), self._reader_of(id)) for id in ids]

        def release() -> None:
            for name, reader in wanted:
                try:
                    self.store.release_reader(name, reader)
                except Exception as e:
                    log.warning("releasing reader %s of shard %s failed: %r", reader, name, e)
                    self.errors.append((f"release {name}", e))

        await self.run_sync(release)

    def _take_over(self, id: GlobalId, mine: str, reader_id: str, opaque: int) -> None:
        name = shard_name(id)
        state = self.store.state(name)
        held = state.critical_readers.get(mine)
        if held is not None:  # else: done before (a retry after an unknown outcome)
            if reader_id in state.critical_readers:
                self.store.release_reader(name, reader_id)
            self.store.register_critical_reader(name, reader_id, opaque=opaque)
            self.store.compare_and_downgrade_since(name, reader_id, opaque, opaque, held.since)
        self._reader[id], self._opaque[id] = reader_id, opaque
        if held is not None:
            self.store.release_reader(name, mine)

    def _drop(self, id: GlobalId) -> None:
        if self.finalize_check is not None:
            refused = self.finalize_check(id)
            if refused is not None:
                raise FinalizationRefused(shard_name(id), refused)
        self._schemas.pop(id, None)
        with contextlib.suppress(ShardFinalized):  # dropped before (e.g. by an earlier controller)
            self.store.finalize_shard(shard_name(id), force=True)

    def check_after_writes(self, ticket: int, check: Callable[[], TidegateError | None]) -> None:
        """Call blocking ``check`` right after each write of append ``ticket`` lands, in the
        same blocking call (no hop of its own); :meth:`take_checks` gives the answers.

        The controller driver confirms its leadership so before acknowledging
        appends: a check that passes after a shard's write landed shows that no
        newer controller had fenced this one then, so one that fences it later
        reads that shard's upper after the write.
        """
        self._checks[ticket] = check

    def record_requests(self, ticket: int, requests: dict[GlobalId, dict[str, int]]) -> None:
        """Record client request ids with the writes of append ``ticket``: each table's write
        carries ``requests[table]`` (id -> the time of its updates) into the same
        compare-and-append (see :meth:`ShardStore.compare_and_append`). A write whose shard
        recorded one of them already is refused, and :meth:`take_applied` says when each was
        applied."""
        self._requests[ticket] = requests

    def take_applied(self, ticket: int) -> dict[GlobalId, dict[str, int]]:
        """The request ids the writes of append ``ticket`` found recorded already (a retry of
        an append that was applied), by collection, with the times they were written at."""
        self._requests.pop(ticket, None)
        return self._applied.pop(ticket, {})

    def remember_requests(self, id: GlobalId, requests: Mapping[str, int]) -> None:
        """Remember that shard ``id`` recorded ``requests`` (id -> time): see :meth:`recorded`."""
        for rid, t in requests.items():
            seen = self._recorded.pop(rid, {})
            seen[id] = t
            self._recorded[rid] = seen  # now the newest
        while len(self._recorded) > REMEMBERED_REQUESTS:
            del self._recorded[next(iter(self._recorded))]

    def recorded(self, request_id: str) -> dict[GlobalId, int]:
        """The tables known to have recorded ``request_id`` (by this controller's writes, by the
        shards' states it read when it opened them or took them over), with the times."""
        return dict(self._recorded.get(request_id, {}))

    async def refresh_requests(self, ids: Iterable[GlobalId]) -> None:
        """Read the request ids the shards of ``ids`` record now (a promoted controller: the
        previous writer's appends), and remember them."""
        for id in ids:
            state = await self.retrying(f"read shard {id}", self.store.state, shard_name(id))
            self.remember_requests(id, state.requests)

    def take_checks(self, ticket: int) -> dict[GlobalId, TidegateError | None]:
        """What the check of :meth:`check_after_writes` answered after each landed write of
        ``ticket``, by collection (a write that failed, or whose check raised, is missing)."""
        self._checks.pop(ticket, None)
        return self._confirmed.pop(ticket, {})

    async def _write(self, e: WriteToShard) -> None:
        name = shard_name(e.id)
        token = self.platform.new_id()  # the same on every retry: a landed write is not repeated
        check = self._checks.get(e.ticket)
        requests = self._requests.get(e.ticket, {}).get(e.id)

        def write() -> tuple[bool, Antichain]:
            try:
                upper = self.store.compare_and_append(
                    name, list(e.updates), e.expected_upper, e.new_upper, token, requests=requests
                )
            except UpperMismatch as m:
                upper = m.actual_upper
                return False, upper if isinstance(upper, Antichain) else self.store.upper(name)
            except RequestsApplied as r:  # retries of appends that were applied: nothing written
                self._applied.setdefault(e.ticket, {})[e.id] = dict(r.applied)
                return False, self.store.upper(name)
            if check is not None:
                try:
                    self._confirmed.setdefault(e.ticket, {})[e.id] = check()
                except Exception as err:  # unknown: the caller checks again on its own
                    log.info("check after the write to %s failed: %r", e.id, err)
            return True, upper

        brief = self.store.local and len(e.updates) <= BRIEF_WRITE_ROWS
        try:
            ok, upper = await self.retrying(f"write {e.id}", write, brief=brief)
        except Exception as err:  # a definite refusal (the shard is gone, the rows do not fit)
            log.warning("write to shard %s refused: %r", e.id, err)
            self.errors.append((f"write {e.id}", err))
            if isinstance(err, _STORE_REFUSALS):  # the cause, for the append's callers
                self._refusals.setdefault(e.ticket, {})[e.id] = err
            try:
                ok, upper = False, await self.retrying(f"read shard {e.id}", self.store.upper, name)
            except Exception:
                ok, upper = False, e.expected_upper
        if ok and requests:
            self.remember_requests(e.id, requests)
        applied = self._applied.get(e.ticket, {}).get(e.id)
        if applied:
            self.remember_requests(e.id, applied)
        self._emit(lambda ctl: ctl.storage.complete_write(e.ticket, e.id, ok, upper))

    def take_refusals(self, ticket: int) -> dict[GlobalId, BaseException]:
        """Why writes of append ``ticket`` were refused when the store could not take them
        (:data:`_STORE_REFUSALS`: a full disk, a corrupt shard state), by collection; the
        controller only learns that they failed (an ``InvalidUppers``)."""
        return self._refusals.pop(ticket, {})

    async def _snapshot(self, e: ReadSnapshot) -> None:
        waiter = self._snapshots.pop(e.request, None)
        try:
            rows = await self.retrying(
                f"snapshot {e.id}", self.store.snapshot_rows, shard_name(e.id), e.as_of
            )
        except Exception as err:
            if waiter is not None:
                waiter.error = err
        else:
            if waiter is not None:
                waiter.rows = rows
        if waiter is not None:
            waiter.done.set()
        self._emit(lambda ctl: ctl.storage.complete_snapshot(e.request))

    def _emit(self, fn: Callable[[Controller], object]) -> None:
        if self._report is not None:
            self._report(fn)
