"""The storage controller's effects carried out against a :class:`ShardStore`, in worker threads.

:class:`ShardStorageIO` performs ``RegisterShard``, ``WriteToShard``,
``ReadSnapshot``, ``DowngradeShardSince`` and ``DropShard`` on the shard
``str(id)`` of each collection. Work on one shard runs in the order the
effects arrived (one worker task per busy shard; consecutive since
downgrades collapse into the last one), different shards proceed in
parallel. Blocking store calls run in ``anyio.to_thread``. Outcomes go back
to the controller through the ``report`` callback given to :meth:`start`: a
function of the controller that returns its effects (``complete_write``,
``complete_snapshot``).

The controller holds each shard with one critical reader (``reader_id``):
the compute and storage read holds reach the shard through its since
downgrades, so shard compaction follows the read policies.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import pyarrow as pa

from tidegate.runtime.storage.store import ShardStore
from tidegate.spec.controller import Controller, ControllerEffect
from tidegate.spec.errors import ShardFinalized, TidegateError, UnknownShard, UpperMismatch
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    DowngradeShardSince,
    DropShard,
    ReadSnapshot,
    RegisterShard,
    ShardFrontiers,
    WriteToShard,
)

from .schemas import arrow_schema, shard_name

__all__ = ["CONTROLLER_READER", "Report", "ShardStorageIO", "StorageEffectIO"]

log = logging.getLogger(__name__)

T = TypeVar("T")

CONTROLLER_READER = "controller"
"""The id of the controller's critical reader on every shard."""

Report: TypeAlias = Callable[[Callable[[Controller], Sequence[ControllerEffect]]], None]
"""How outcomes reach the controller: ``report(lambda ctl: ctl.complete_write(...))``."""

StorageEffectIO: TypeAlias = (
    RegisterShard | WriteToShard | ReadSnapshot | DowngradeShardSince | DropShard
)


@dataclass
class _SnapshotWaiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    rows: list[Update] | None = None
    error: BaseException | None = None


class ShardStorageIO:
    """Storage effects against ``store`` (see the module docstring)."""

    def __init__(
        self, store: ShardStore, *, reader_id: str = CONTROLLER_READER, threads: bool = True
    ) -> None:
        self.store = store
        self.reader_id = reader_id
        self.threads = threads
        """Whether blocking store calls run in worker threads (else inline: for an
        in-memory store under a virtual clock, where threads would race the clock)."""
        self._schemas: dict[GlobalId, pa.Schema] = {}
        self._queues: dict[GlobalId, deque[StorageEffectIO]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._report: Report | None = None
        self._snapshots: dict[int, _SnapshotWaiter] = {}
        self.errors: list[tuple[str, BaseException]] = []
        """Failures of best-effort work (since downgrades, drops), newest last, for operators and tests."""

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking ``fn(*args)`` as configured (a worker thread, or inline)."""
        if self.threads:
            return await anyio.to_thread.run_sync(fn, *args)
        await anyio.lowlevel.checkpoint()
        return fn(*args)

    # -- setup ---------------------------------------------------------------------------
    def start(self, task_group: anyio.abc.TaskGroup, report: Report) -> None:
        """Run shard work in ``task_group``; report outcomes through ``report``."""
        self._tg = task_group
        self._report = report

    def set_schema(self, id: GlobalId, schema: Schema | pa.Schema) -> None:
        """The row schema of ``id``'s shard (needed before its ``RegisterShard`` creates it)."""
        self._schemas[id] = arrow_schema(schema) if isinstance(schema, Schema) else schema

    async def ensure_shard(self, id: GlobalId, schema: Schema | pa.Schema) -> ShardFrontiers:
        """Create (or find) ``id``'s shard with ``schema`` and the controller's reader; its frontiers."""
        self.set_schema(id, schema)
        return await self.run_sync(self._ensure, id)

    def _ensure(self, id: GlobalId) -> ShardFrontiers:
        name = shard_name(id)
        self.store.create_shard(name, self._schemas[id])
        self.store.register_critical_reader(name, self.reader_id)
        state = self.store.state(name)
        return ShardFrontiers(state.since, state.upper)

    async def shard_frontiers(self, id: GlobalId) -> ShardFrontiers | None:
        """The shard's durable ``since`` and ``upper`` (``None`` if it does not exist)."""

        def read() -> ShardFrontiers | None:
            try:
                state = self.store.state(shard_name(id))
            except UnknownShard:
                return None
            return ShardFrontiers(state.since, state.upper)

        return await self.run_sync(read)

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
    def handle(self, effect: StorageEffectIO) -> None:
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

    async def _perform(self, effect: StorageEffectIO) -> None:
        if isinstance(effect, WriteToShard):
            await self._write(effect)
        elif isinstance(effect, ReadSnapshot):
            await self._snapshot(effect)
        elif isinstance(effect, RegisterShard):
            await self._best_effort("register", self._register, effect.id)
        elif isinstance(effect, DowngradeShardSince):
            await self._best_effort("downgrade", self._downgrade, effect.id, effect.frontier)
        else:
            await self._best_effort("drop", self._drop, effect.id)

    async def _best_effort(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            await self.run_sync(fn, *args)
        except Exception as e:
            log.warning("shard %s of %s failed: %r", what, args[0], e)
            self.errors.append((f"{what} {args[0]}", e))

    def _register(self, id: GlobalId) -> None:
        name = shard_name(id)
        schema = self._schemas.get(id)
        if schema is not None:
            self.store.create_shard(name, schema)
        self.store.register_critical_reader(name, self.reader_id)

    def _downgrade(self, id: GlobalId, frontier: Antichain) -> None:
        name = shard_name(id)
        current = self.store.state(name).critical_readers.get(self.reader_id)
        if current is not None and frontier <= current.since:
            return  # the shard is already there (e.g. it was restored ahead of the controller)
        self.store.downgrade_since(name, self.reader_id, frontier)

    def _drop(self, id: GlobalId) -> None:
        self._schemas.pop(id, None)
        with contextlib.suppress(ShardFinalized):  # dropped before (e.g. by an earlier controller)
            self.store.finalize_shard(shard_name(id), force=True)

    async def _write(self, e: WriteToShard) -> None:
        def write() -> tuple[bool, Antichain]:
            name = shard_name(e.id)
            try:
                return True, self.store.compare_and_append(
                    name, list(e.updates), e.expected_upper, e.new_upper
                )
            except UpperMismatch as m:
                upper = m.actual_upper
                return False, upper if isinstance(upper, Antichain) else self.store.upper(name)

        try:
            ok, upper = await self.run_sync(write)
        except Exception as err:
            log.warning("write to shard %s failed: %r", e.id, err)
            self.errors.append((f"write {e.id}", err))
            ok, upper = False, e.expected_upper
        self._emit(lambda ctl: ctl.complete_write(e.ticket, e.id, ok, upper))

    async def _snapshot(self, e: ReadSnapshot) -> None:
        waiter = self._snapshots.pop(e.request, None)
        try:
            rows = await self.run_sync(self.store.snapshot_rows, shard_name(e.id), e.as_of)
        except Exception as err:
            if waiter is not None:
                waiter.error = err
        else:
            if waiter is not None:
                waiter.rows = rows
        if waiter is not None:
            waiter.done.set()
        self._emit(lambda ctl: ctl.complete_snapshot(e.request))

    def _emit(self, fn: Callable[[Controller], Sequence[ControllerEffect]]) -> None:
        if self._report is not None:
            self._report(fn)
