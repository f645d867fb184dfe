"""``ShardFollower`` over a store whose Consensus says when a shard changed: a commit wakes it
(no poll is due for ten minutes), a lost notification is made up by its fallback poll, and it
renews its reader's lease while nothing happens."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from replica_harness import ROWS, Tables, at

from tidegate.replica._follow import ShardFollower
from tidegate.replica.host import ThreadHost
from tidegate.runtime.storage import (
    FileBlob,
    MemoryBlob,
    MemoryConsensus,
    ShardStore,
    Watchable,
    open_consensus,
)
from tidegate.spec.frontier import Antichain, Update

pytestmark = pytest.mark.timeout(120)

NEVER_S = 600.0
"""A polling interval far beyond the test's patience: a delivery within it was woken."""
PATIENCE_S = 30.0


class _Deliveries:
    """What a follower delivered, waited on from the test's thread."""

    def __init__(self) -> None:
        self.got: list[tuple[list[Update], Antichain]] = []
        self._cond = threading.Condition()

    def __call__(self, _f: ShardFollower, updates: list[Update], upper: Antichain) -> None:
        with self._cond:
            self.got.append((updates, upper))
            self._cond.notify_all()

    def until_upper(self, upper: int) -> list[Update]:
        """Every update delivered once the follower reported ``upper`` (fails after a while)."""
        with self._cond:
            ok = self._cond.wait_for(lambda: any(u == at(upper) for _, u in self.got), PATIENCE_S)
            assert ok, f"no delivery up to {upper} in {PATIENCE_S} s: {self.got}"
            return [x for updates, _ in self.got for x in updates]


class _Deaf:
    """A Consensus that takes watches but, while ``deaf``, drops their notifications (as
    PostgreSQL's are lost while the listening connection is down)."""

    def __init__(self, inner: MemoryConsensus) -> None:
        self.inner = inner
        self.deaf = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def watch(self, key: str, callback: Callable[[str], None]) -> Callable[[], None]:
        return self.inner.watch(key, lambda k: None if self.deaf else callback(k))


def _follow(store: ShardStore, shard: str, deliveries: _Deliveries, **kw: Any) -> ShardFollower:
    kw.setdefault("lease_ms", 15 * 60 * 1000)
    follower = ShardFollower(
        host=ThreadHost(),
        store=store,
        shard=shard,
        as_of=2,
        log=logging.getLogger("test_follow"),
        on_delivery=deliveries,
        on_unreadable=lambda f, what: None,
        **kw,
    )
    follower.start()
    return follower


@pytest.fixture(params=["mem", pytest.param("postgres", marks=pytest.mark.postgres)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Tables, ShardStore]]:
    """A writer's tables and a reader's store over one storage: shared in-memory backends, or
    PostgreSQL consensus through two connections (two processes' stores) and one blob folder."""
    if request.param == "mem":
        blob, consensus = MemoryBlob(), MemoryConsensus()
        yield Tables(store=ShardStore(blob, consensus)), ShardStore(blob, consensus)
        return
    url = request.getfixturevalue("postgres_url")
    writer = ShardStore(FileBlob(tmp_path / "blob"), open_consensus(url), owns_backends=True)
    reader = ShardStore(FileBlob(tmp_path / "blob"), open_consensus(url), owns_backends=True)
    try:
        yield Tables(store=writer), reader
    finally:
        writer.close()
        reader.close()


def test_a_commit_wakes_a_follower_that_would_not_poll_for_minutes(
    stores: tuple[Tables, ShardStore],
) -> None:
    tables, reader = stores
    assert isinstance(reader.consensus, Watchable)
    t = tables.create()
    tables.append(t, ROWS, 3)
    deliveries = _Deliveries()
    follower = _follow(
        reader, str(t), deliveries, poll_s=NEVER_S, poll_max_s=NEVER_S, watch_poll_s=NEVER_S
    )
    try:
        deliveries.until_upper(3)  # the snapshot at the as_of: the first step reads it
        tables.append(t, [((4, "d"), 3, 1)], 5)
        assert ((4, "d"), 3, 1) in deliveries.until_upper(5)
    finally:
        follower.stop()
        follower.task.join(5)  # type: ignore[union-attr]


def test_a_lost_notification_is_made_up_by_the_fallback_poll() -> None:
    blob, consensus = MemoryBlob(), _Deaf(MemoryConsensus())
    tables = Tables(store=ShardStore(blob, consensus))  # type: ignore[arg-type]
    t = tables.create()
    tables.append(t, ROWS, 3)
    deliveries = _Deliveries()
    reader = ShardStore(blob, consensus)  # type: ignore[arg-type]
    follower = _follow(reader, str(t), deliveries, poll_s=0.01, poll_max_s=0.05, watch_poll_s=0.3)
    try:
        deliveries.until_upper(3)
        assert follower.watch_poll_s == 0.3  # watching: it waits 0.3 s, not the 0.05 s backoff
        tables.append(t, [((4, "d"), 3, 1)], 5)  # its notification is lost
        assert ((4, "d"), 3, 1) in deliveries.until_upper(5)
    finally:
        follower.stop()
        follower.task.join(5)  # type: ignore[union-attr]


def test_a_watching_follower_renews_its_lease_while_nothing_changes() -> None:
    """Nothing is committed to the shard but the follower's own renewals: it still steps, at
    least every quarter lease however long ``watch_poll_s``, and its reader's heartbeat moves."""
    blob, consensus = MemoryBlob(), MemoryConsensus()
    tables = Tables(store=ShardStore(blob, consensus))
    t = tables.create()
    tables.append(t, ROWS, 3)
    deliveries = _Deliveries()
    reader = ShardStore(blob, consensus)
    follower = _follow(
        reader, str(t), deliveries, lease_ms=800, poll_s=0.01, poll_max_s=0.05, watch_poll_s=600
    )
    try:
        deliveries.until_upper(3)
        assert follower.watch_poll_s == 0.2
        listener = follower.listener
        assert listener is not None

        def beat() -> int:
            return reader.state(str(t)).leased_readers[listener.reader_id].last_heartbeat_ms

        first = beat()
        deadline = time.monotonic() + PATIENCE_S
        while beat() == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert beat() > first
    finally:
        follower.stop()
        follower.task.join(5)  # type: ignore[union-attr]
