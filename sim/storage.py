"""The simulated shard store: tables and materialized-view outputs over the pure shard state machine.

Each collection is a :class:`~tidegate.spec.shard.ShardState` advanced by the
spec's own transitions (``compare_and_append`` with its real validation,
``downgrade_since`` of the controller's critical reader, ``finalize``); the
data of every batch is kept in memory under its batch key. Writes to one
shard are applied in order, each after a storage latency drawn from the
run's choices (plus the delay of an active "delay storage write" fault).
Listens deliver the snapshot at the listener's as_of and then every new
batch to a replica after a latency; snapshots wait until the upper passes
their time. When a writer process dies, :meth:`SimStorage.abandon` decides
the fate of its writes still in flight: per shard, a drawn prefix of them
lands later as planned and the rest never does (the storage decides, as a
real store would for requests whose sender vanished).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tidegate.spec.errors import TidegateError, UpperMismatch
from tidegate.spec.frontier import Antichain, Row, Update, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.shard import (
    BatchMeta,
    ShardState,
    compare_and_append,
    downgrade_since,
    finalize,
    register_critical_reader,
)

from .choices import ChoiceSource
from .kernel import EventHandle, Kernel

__all__ = ["Listener", "SimStorage", "StorageViolation"]

CONTROLLER_READER = "controller"

WriteDone = Callable[[bool, Antichain], None]
Deliver = Callable[[list[Update], Antichain], None]
SnapshotDone = Callable[[dict[Row, int] | None, str | None], None]


class StorageViolation(Exception):
    """The storage model saw something the contract forbids (e.g. a read below the since)."""

    def __init__(self, property: str, message: str) -> None:
        super().__init__(message)
        self.property = property
        self.message = message


@dataclass(eq=False)
class Listener:
    """A replica following a shard from ``as_of``; ``delivered`` is the upper handed out so far."""

    id: GlobalId
    as_of: int
    deliver: Deliver
    delivered: Antichain | None = None
    last_at: int = 0
    active: bool = True

    def cancel(self) -> None:
        self.active = False


@dataclass(eq=False)
class _Shard:
    state: ShardState
    data: dict[str, list[Update]] = field(default_factory=dict)
    next_write_at: int = 0
    listeners: list[Listener] = field(default_factory=list)
    waiting: list[tuple[int, SnapshotDone]] = field(default_factory=list)
    next_batch: int = 0


class SimStorage:
    """Shards in memory; see the module docstring.

    ``on_upper(id, upper)`` is called whenever a shard's upper advances (after
    the write is applied, before the writer hears of it).
    """

    def __init__(
        self,
        kernel: Kernel,
        source: ChoiceSource,
        on_upper: Callable[[GlobalId, Antichain], None] | None = None,
        latency_ms: tuple[int, int] = (1, 8),
    ) -> None:
        self._kernel = kernel
        self._source = source
        self._latency = latency_ms
        self._on_upper = on_upper
        self._shards: dict[GlobalId, _Shard] = {}
        self.write_delay_ms = 0
        """Extra latency of every write while a "delay storage write" fault lasts."""
        self.writes_applied = 0
        self.writes_rejected = 0
        self.snapshots_refused = 0
        self.writes_abandoned = 0
        self._inflight: dict[int, tuple[str, EventHandle, GlobalId, WriteDone]] = {}
        """Writes not yet applied, by serial: ``(writer, event, shard, done)``."""
        self._write_serial = 0

    # -- queries ----------------------------------------------------------------------
    def has(self, id: GlobalId) -> bool:
        return id in self._shards

    def shard_ids(self) -> list[GlobalId]:
        """Every live (not finalized) shard, in id order."""
        return sorted(g for g, sh in self._shards.items() if not sh.state.finalized)

    def state(self, id: GlobalId) -> ShardState:
        return self._shards[id].state

    def updates(self, id: GlobalId) -> list[Update]:
        """Every update stored in shard ``id``, batch by batch."""
        shard = self._shards.get(id)
        if shard is None:
            return []
        return [u for b in shard.state.batches for u in shard.data[b.key]]

    def contents(self, id: GlobalId, time: int) -> dict[Row, int]:
        return accumulate(self.updates(id), time)

    def _latency_ms(self) -> int:
        low, high = self._latency
        return self._source.integer(low, high)

    # -- lifecycle ---------------------------------------------------------------------
    def register(self, id: GlobalId) -> None:
        """Open shard ``id`` (creating it at since = upper = [0]); idempotent."""
        if id not in self._shards:
            state = register_critical_reader(ShardState(shard=str(id)), CONTROLLER_READER)
            self._shards[id] = _Shard(state)

    def downgrade_since(self, id: GlobalId, frontier: Antichain) -> None:
        """The controller's hold moved: downgrade its critical reader (regressions raise)."""
        shard = self._shards.get(id)
        if shard is None or shard.state.finalized:
            return
        current = shard.state.reader_since(CONTROLLER_READER)
        if current == frontier:
            return
        shard.state = downgrade_since(
            shard.state, CONTROLLER_READER, frontier, now_ms=self._kernel.now_ms
        )

    def drop(self, id: GlobalId) -> None:
        """Finalize shard ``id``: listeners stop, its data is deleted."""
        shard = self._shards.get(id)
        if shard is None:
            return
        shard.state = finalize(shard.state, force=True)
        shard.data.clear()
        for listener in shard.listeners:
            listener.active = False
        shard.listeners.clear()
        for _, done in shard.waiting:
            done(None, f"shard {id} was dropped")
        shard.waiting.clear()

    # -- writes ------------------------------------------------------------------------
    def write(
        self,
        id: GlobalId,
        updates: tuple[Update, ...] | list[Update],
        expected_upper: Antichain,
        new_upper: Antichain,
        writer: str,
        done: WriteDone,
    ) -> None:
        """Compare-and-append, applied after a latency and after earlier writes to ``id``."""
        shard = self._shards.get(id)
        if shard is None:
            raise StorageViolation("storage_contract", f"write to unregistered shard {id}")
        at = max(
            self._kernel.now_ms + self._latency_ms() + self.write_delay_ms, shard.next_write_at
        )
        shard.next_write_at = at
        serial = self._write_serial
        self._write_serial += 1
        handle = self._kernel.call_at(
            at,
            self._apply_write,
            id,
            tuple(updates),
            expected_upper,
            new_upper,
            writer,
            done,
            serial,
        )
        self._inflight[serial] = (writer, handle, id, done)

    def abandon(self, writer: str, source: ChoiceSource) -> list[GlobalId]:
        """``writer`` died: of its writes in flight to each shard, a prefix (drawn) still lands.

        Writes to one shard apply in order, so what a dead writer leaves behind is
        some prefix of its queue; the rest never happens and is reported failed to
        its ``done`` at once (a dead writer ignores it). Returns the shard of each
        dropped write.
        """
        queues: dict[GlobalId, list[int]] = {}
        for serial in sorted(self._inflight):
            who, _, id, _ = self._inflight[serial]
            if who == writer:
                queues.setdefault(id, []).append(serial)
        dropped: list[GlobalId] = []
        for id in sorted(queues):
            serials = queues[id]
            for serial in serials[source.integer(0, len(serials)) :]:
                _, handle, _, done = self._inflight.pop(serial)
                handle.cancel()
                self.writes_abandoned += 1
                dropped.append(id)
                done(False, self._shards[id].state.upper)
        return dropped

    def _apply_write(
        self,
        id: GlobalId,
        updates: tuple[Update, ...],
        expected_upper: Antichain,
        new_upper: Antichain,
        writer: str,
        done: WriteDone,
        serial: int = -1,
    ) -> None:
        self._inflight.pop(serial, None)
        shard = self._shards[id]
        if shard.state.finalized:
            self.writes_rejected += 1
            done(False, shard.state.upper)
            return
        batch = None
        if updates:
            times = [t for _, t, _ in updates]
            key = f"{id}/{shard.next_batch}"
            batch = BatchMeta(
                key, expected_upper, new_upper, expected_upper, len(updates), min(times), max(times)
            )
        try:
            outcome = compare_and_append(
                shard.state,
                batch,
                expected_upper,
                new_upper,
                writer_id=writer,
                token=None,
                now_ms=self._kernel.now_ms,
            )
        except UpperMismatch:
            self.writes_rejected += 1
            done(False, shard.state.upper)
            return
        except TidegateError as e:
            raise StorageViolation("storage_contract", f"{writer} wrote {id}: {e}") from e
        shard.state = outcome.state
        if batch is not None:
            shard.data[batch.key] = list(updates)
            shard.next_batch += 1
        self.writes_applied += 1
        if self._on_upper is not None:
            self._on_upper(id, shard.state.upper)
        self._progress(id)
        done(True, shard.state.upper)

    # -- reads -------------------------------------------------------------------------
    def listen(self, id: GlobalId, as_of: Antichain, deliver: Deliver) -> Listener:
        """Follow shard ``id`` from ``as_of``: the snapshot first, then each new batch."""
        shard = self._shards.get(id)
        if shard is None:
            raise StorageViolation("storage_contract", f"listen to unregistered shard {id}")
        (t,) = as_of.elements
        listener = Listener(id, t, deliver)
        shard.listeners.append(listener)
        self._pump(shard, listener)
        return listener

    def snapshot_when_ready(self, id: GlobalId, time: int, done: SnapshotDone) -> None:
        """Read ``id`` as of ``time`` once its upper passes it (``done(rows, None)``)."""
        shard = self._shards.get(id)
        if shard is None or shard.state.finalized:
            self._kernel.call_later(self._latency_ms(), done, None, f"shard {id} is gone")
            return
        shard.waiting.append((time, done))
        self._serve_snapshots(id, shard)

    def _progress(self, id: GlobalId) -> None:
        shard = self._shards[id]
        shard.listeners = [li for li in shard.listeners if li.active]
        for listener in shard.listeners:
            self._pump(shard, listener)
        self._serve_snapshots(id, shard)

    def _serve_snapshots(self, id: GlobalId, shard: _Shard) -> None:
        upper = shard.state.upper
        ready = [(t, d) for t, d in shard.waiting if not upper.less_equal(t)]
        if not ready:
            return
        shard.waiting = [(t, d) for t, d in shard.waiting if upper.less_equal(t)]
        for t, done in ready:
            if not shard.state.since.less_equal(t):
                # As persist does: the reader learns that it asked too late (nobody held it).
                self.snapshots_refused += 1
                error = f"snapshot of {id} at {t} is before its since {shard.state.since}"
                self._kernel.call_later(self._latency_ms(), done, None, error)
                continue
            rows = self.contents(id, t)
            self._kernel.call_later(self._latency_ms(), done, rows, None)

    def _pump(self, shard: _Shard, listener: Listener) -> None:
        upper = shard.state.upper
        if not listener.active or upper.less_equal(listener.as_of):
            return
        if listener.delivered == upper:
            return
        if listener.delivered is None:
            all_updates = [u for b in shard.state.batches for u in shard.data[b.key]]
            if not shard.state.since.less_equal(listener.as_of):
                raise StorageViolation(
                    "read_below_since",
                    f"listen on {listener.id} from {listener.as_of} below its since {shard.state.since}",
                )
            a = listener.as_of
            batch = [(r, t if t > a else a, d) for r, t, d in all_updates]
        else:
            lo = listener.delivered
            batch = []
            for b in reversed(shard.state.batches):  # only the batches past what was delivered
                if b.upper <= lo:
                    break
                batch.extend(u for u in shard.data[b.key] if lo.less_equal(u[1]))
        listener.delivered = upper
        at = max(self._kernel.now_ms + self._latency_ms(), listener.last_at)
        listener.last_at = at
        self._kernel.call_at(at, self._deliver, listener, batch, upper)

    @staticmethod
    def _deliver(listener: Listener, batch: list[Update], upper: Antichain) -> None:
        if listener.active:
            listener.deliver(batch, upper)
