"""Following a shard: its snapshot at an as_of, then every change, as a :class:`~.host.Work`.

Both services of the replica process read storage collections this way: the
compute service's ``ReadSource`` (a dataflow's input) and the storage
service's ``ReadSinkInput`` (a sink's input). A :class:`ShardFollower` waits
until the shard's upper passes the as_of, delivers the snapshot there (times
advanced to the as_of, with upper ``as_of + 1``), then every event of a
:meth:`~tidegate.runtime.storage.ShardStore.listen` (its updates and the
shard's new upper). Its listener holds the shard's since at the as_of from the
start, and is released when the follower closes.

Where the store's Consensus can say when the shard changed
(:meth:`~tidegate.runtime.storage.ShardStore.watch`: PostgreSQL's notifications),
the follower waits for that rather than polling: a commit to the shard wakes
it, and it polls by itself only every ``watch_poll_s`` (a notification is a
hint that may be lost, so correctness never rests on it). Elsewhere it polls
every ``poll_s``, backing off to ``poll_max_s`` while nothing changes.

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
    ``poll_max_s`` while nothing changes; ``watch_poll_s``, the interval while
    the store's notifications wake the follower (see the module docstring).
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
        watch_poll_s: float = 1.0,
    ) -> None:
        self.host = host
        self.store = store
        self.shard = shard
        self.as_of = as_of
        self.lease_ms = lease_ms
        self.poll_s = poll_s
        self.poll_max_s = poll_max_s
        # Polled at least every quarter lease all the same, so the lease is renewed.
        self.watch_poll_s = max(poll_max_s, min(watch_poll_s, lease_ms / 4000))
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
        self._unwatch: Callable[[], None] | None = None

    def start(self, name: str | None = None) -> None:
        # Watching before the first step: no commit falls between that step's read and it.
        self._unwatch = self.store.watch(self.shard, self._changed)
        self.task = self.host.spawn(name or f"follow-{self.shard}", self)

    def _changed(self, shard: str) -> None:
        """The store says the shard changed: step soon (from the backend's thread)."""
        task = self.task
        if task is not None:
            task.wake()

    def stop(self) -> None:
        self._stop_watching()
        if self.task is not None:
            self.task.stop()

    def _stop_watching(self) -> None:
        unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()

    def _wait(self) -> float:
        """How long to wait for a change: until woken (at most ``watch_poll_s``) if the store
        says when the shard changes, else the polling interval, backing off."""
        if self._unwatch is not None:
            return self.watch_poll_s
        return self._backoff()

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
                    return self._wait()
                rows = store.snapshot_rows(shard, self.as_of)
                self._on_delivery(self, rows, Antichain([self.as_of + 1]))
                self.snapshotted = True
                self.delay = self.poll_s
            event = self.listener.poll()
            if event is not None:
                self._on_delivery(self, event.updates, event.progress)
                self.delay = self.poll_s
                if event.progress.is_empty():
                    return None
                # Polled again at once for what may have come meanwhile, unless the store
                # says when something comes.
                return 0.0 if self._unwatch is None else self.watch_poll_s
            return self._wait()
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
        self._stop_watching()
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
