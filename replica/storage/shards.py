"""The storage service's shard IO: remap reads and compare-and-appends, one :class:`~..host.Work` each.

* :class:`RemapRead` carries out a ``ReadRemap``: the data shard's upper ``D``
  first, then the remap shard as of ``max(D - 1, 0)`` -- its snapshot and, with
  a listener (which holds the since meanwhile), every update after it up to
  the upper it read. Reading ``D`` first makes the remap upper it reports
  never behind ``D`` (the remap shard is written first). Any failure is a
  ``remap_failed``: the core retries after its back-off.
* :class:`ShardWrite` carries out a ``WriteShard`` with an idempotency token.
  An upper mismatch is the core's ``write_failed`` with the actual upper; a
  finalized shard, a failure with upper ``[]``. Anything else (storage
  unavailable, an indeterminate consensus write) is retried with the same
  token until it lands or is refused: a retry of a write that had landed
  succeeds without writing again, so the outcome reported is always definite.
"""

from __future__ import annotations

import logging

from tidegate.runtime.controller.schemas import shard_name
from tidegate.spec.errors import ShardFinalized, UpperMismatch
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.storage.reclock import remap_as_of
from tidegate.spec.storage_replica import ReadRemap, WriteShard

from .._logs import log_event
from ..host import Task
from ._io import IOContext, describe
from .events import RemapFailed, RemapLoaded, WriteDone

__all__ = ["RemapRead", "ShardWrite"]


class RemapRead:
    """One ``ReadRemap`` (see the module docstring)."""

    def __init__(self, ctx: IOContext, out: ReadRemap) -> None:
        self.ctx = ctx
        self.out = out
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.ctx.host.spawn(f"remap-{self.out.id}", self)

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def step(self) -> float | None:
        ctx, out = self.ctx, self.out
        try:
            data_upper, updates, remap_upper = self._read()
        except Exception as e:
            log_event(
                ctx.log,
                "remap_read_failed",
                level=logging.WARNING,
                id=str(out.id),
                error=describe(e),
            )
            ctx.post(RemapFailed(self, out.id, describe(e)))
        else:
            ctx.post(RemapLoaded(self, out.id, data_upper, updates, remap_upper))
        return None

    def _read(self) -> tuple[Antichain, list[Update], Antichain]:
        store, out = self.ctx.store, self.out
        data, remap = shard_name(out.data_id), shard_name(out.remap_id)
        data_upper = store.upper(data)
        remap_upper = store.upper(remap)
        if data_upper.is_empty():
            return data_upper, [], remap_upper
        (d,) = data_upper.elements
        as_of = remap_as_of(int(d))
        if remap_upper.less_equal(as_of):
            return data_upper, [], remap_upper  # nothing beyond the as_of: a fresh ingestion
        listener = store.listen(remap, as_of, lease_ms=self.ctx.lease_ms)
        try:
            updates = store.snapshot_rows(remap, as_of)
            event = listener.poll()
            if event is not None:
                updates.extend(event.updates)
                remap_upper = event.progress
        finally:
            listener.close()
        return data_upper, updates, remap_upper

    def close(self) -> None:
        pass


class ShardWrite:
    """One ``WriteShard`` (see the module docstring)."""

    def __init__(self, ctx: IOContext, out: WriteShard) -> None:
        self.ctx = ctx
        self.out = out
        store = ctx.store
        self.token = f"{store.writer_id}-{store.new_id()}"
        self.delay = ctx.retry_s
        self.complained = ""
        self.task: Task | None = None

    def start(self) -> None:
        self.task = self.ctx.host.spawn(f"write-{self.out.id}", self)

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def step(self) -> float | None:
        ctx, out = self.ctx, self.out
        m = ctx.metrics
        try:
            new = ctx.store.compare_and_append(
                shard_name(out.id), list(out.updates), out.expected_upper, out.new_upper, self.token
            )
        except UpperMismatch as e:
            actual = e.actual_upper
            if not isinstance(actual, Antichain):
                actual = Antichain([actual])
            m.shard_writes.labels("upper_mismatch").inc()
            log_event(
                ctx.log,
                "shard_write_lost_race",
                id=str(out.id),
                expected=str(out.expected_upper),
                actual=str(actual),
            )
            ctx.post(WriteDone(self, out.id, False, actual))
            return None
        except ShardFinalized:
            m.shard_writes.labels("finalized").inc()
            ctx.post(WriteDone(self, out.id, False, Antichain.empty()))
            return None
        except Exception as e:
            m.shard_writes.labels("retry").inc()
            what = describe(e)
            if what != self.complained:  # once per distinct problem, not per retry
                self.complained = what
                log_event(
                    ctx.log,
                    "shard_write_failed",
                    level=logging.WARNING,
                    id=str(out.id),
                    error=what,
                    retry_in_s=self.delay,
                )
            delay, self.delay = self.delay, min(self.delay * 2, ctx.retry_max_s)
            return delay
        m.shard_writes.labels("ok").inc()
        m.written_updates.inc(len(out.updates))
        ctx.post(WriteDone(self, out.id, True, new))
        return None

    def close(self) -> None:
        pass
