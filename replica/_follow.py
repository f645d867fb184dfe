"""Following a shard: its snapshot at an as_of, then every change, as a :class:`~.host.Work`.

Both services of the replica process read storage collections this way: the
compute service's ``ReadSource`` (a dataflow's input) and the storage
service's ``ReadSinkInput`` (a sink's input). A :class:`ShardFollower` waits
until the shard's upper passes the as_of, delivers the snapshot there (times
advanced to the as_of, with upper ``as_of + 1``), then every event of a
:meth:`~tidegate.runtime.storage.ShardStore.listen` (its updates and the
shard's new upper). Its listener holds the shard's since at the as_of from the
start, and is released when the follower closes.

Errors never escape a step: each distinct one is logged once
(``storage_read_failed``, or ``storage_unreadable`` for data an operator must
repair, :data:`UNREADABLE`) and counted; an unreadable shard is reported
through ``on_unreadable`` and looked at again every :data:`UNREADABLE_RETRY_S`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tidegate.runtime.storage import Listener, ShardStore
from tidegate.spec.errors import BlobCorrupt, BlobMissing, ConsensusCorrupt, UnsupportedStateVersion
from tidegate.spec.frontier import Antichain, Update

from ._logs import log_event
from .host import ServiceHost, Task

__all__ = ["UNREADABLE", "UNREADABLE_RETRY_S", "ShardFollower"]

UNREADABLE = (BlobCorrupt, BlobMissing, ConsensusCorrupt, UnsupportedStateVersion)
"""Storage read errors that retrying will not cure until an operator repairs the data: the
collection is reported unreadable (peeks waiting on it answer an error) until a read succeeds."""
UNREADABLE_RETRY_S = 1.0
"""How often a follower retries an unreadable collection (to notice a repair)."""


class ShardFollower:
    """Follows shard ``shard`` from ``as_of``: the snapshot, then every change (see the module docstring).

    ``on_delivery(follower, updates, upper)`` and ``on_unreadable(follower,
    error)`` are called from the follower's steps (the host's work thread:
    post them to the owner's loop); ``on_error(error_class_name)`` counts a
    distinct failure. ``poll_s`` is the polling interval, backing off to
    ``poll_max_s`` while nothing changes.
    """

    def __init__(
        self,
        *,
        host: ServiceHost,
        store: ShardStore,
        shard: str,
        as_of: int,
        lease_ms: int,
        poll_s: float,
        poll_max_s: float,
        log: logging.Logger,
        on_delivery: Callable[[ShardFollower, list[Update], Antichain], None],
        on_unreadable: Callable[[ShardFollower, str], None],
        on_error: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.host = host
        self.store = store
        self.shard = shard
        self.as_of = as_of
        self.lease_ms = lease_ms
        self.poll_s = poll_s
        self.poll_max_s = poll_max_s
        self.log = log
        self._on_delivery = on_delivery
        self._on_unreadable = on_unreadable
        self._on_error = on_error
        self.listener: Listener | None = None
        self.snapshotted = False
        self.delay = poll_s
        self.complained = ""
        self.unreadable = False
        self.task: Task | None = None

    def start(self, name: str | None = None) -> None:
        self.task = self.host.spawn(name or f"follow-{self.shard}", self)

    def stop(self) -> None:
        if self.task is not None:
            self.task.stop()

    def _backoff(self) -> float:
        delay, self.delay = self.delay, min(self.delay * 2, self.poll_max_s)
        return delay

    def step(self) -> float | None:
        store, shard = self.store, self.shard
        try:
            if self.listener is None:  # holds the since at the as_of from now on
                self.listener = store.listen(shard, self.as_of, lease_ms=self.lease_ms)
            if not self.snapshotted:
                if store.upper(shard).less_equal(self.as_of):
                    return self._backoff()
                rows = store.snapshot_rows(shard, self.as_of)
                self._on_delivery(self, rows, Antichain([self.as_of + 1]))
                self.snapshotted = True
                self.delay = self.poll_s
            event = self.listener.poll()
            if event is not None:
                self._on_delivery(self, event.updates, event.progress)
                self.delay = self.poll_s
                return None if event.progress.is_empty() else 0.0
        except Exception as e:
            what = f"{type(e).__name__}: {e}"
            unreadable = isinstance(e, UNREADABLE)
            if what != self.complained:  # once per distinct problem, not per retry
                self.complained = what
                log_event(
                    self.log,
                    "storage_unreadable" if unreadable else "storage_read_failed",
                    level=logging.ERROR if unreadable else logging.WARNING,
                    id=shard,
                    error=what,
                )
                self._on_error(type(e).__name__)
            if unreadable:
                # A definite failure: say so, and look again now and then for a repair.
                self.unreadable = True
                self._on_unreadable(self, what)
                return UNREADABLE_RETRY_S
            self.delay = max(self.delay, 0.1)
        return self._backoff()

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is None:
            return
        try:
            listener.close()
        except Exception as e:
            log_event(
                self.log,
                "storage_release_failed",
                level=logging.WARNING,
                id=self.shard,
                error=repr(e),
            )
