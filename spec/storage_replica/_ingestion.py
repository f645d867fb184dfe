"""One running ingestion of a :class:`~tidegate.spec.storage_replica.StorageReplica` (internal).

Its methods validate, then mutate, and return the outputs the replica
appends to its outbox. Statuses and uppers are read by the replica, which
decides when they may be reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import (
    InvalidBindings,
    ShardWriteNotInFlight,
    SourceBatchRejected,
    UnrequestedStorageCallback,
)
from ..frontier import Antichain, Update
from ..ids import GlobalId
from ..plan.schema import Schema
from ..storage.commands import RunIngestion, SourceStatistics, SourceStatus, StatusUpdate
from ..storage.connections import SourceBatch, SourceConnection, SourceUpdate
from ..storage.descriptions import Ingestion
from ..storage.reclock import (
    Bindings,
    decode_bindings,
    mint_binding,
    reclock,
    remap_as_of,
    resume_offset,
)
from ._updates import consolidated, offset_bounds, well_formed
from .outputs import (
    AckSource,
    ReadRemap,
    StartSource,
    StopSource,
    StorageReplicaOutput,
    WriteShard,
)

__all__ = ["Backoff", "IngestionRun"]


@dataclass
class Backoff:
    """When to try a failed step again: ``base_ms`` doubling per failure, at most ``max_ms``."""

    base_ms: int
    max_ms: int
    failures: int = 0
    retry_at: int | None = None

    def failed(self, now: int) -> None:
        self.failures += 1
        delay = min(self.base_ms * 2 ** min(self.failures - 1, 30), self.max_ms)
        self.retry_at = now + delay

    def due(self, now: int) -> bool:
        return self.retry_at is not None and self.retry_at <= now

    def succeeded(self) -> None:
        self.failures = 0
        self.retry_at = None


@dataclass
class _Write:
    shard: GlobalId
    expected: int
    new: int
    updates: tuple[Update, ...]
    minted: Bindings | None = None


@dataclass
class _Stats:
    """Counters not yet reported, and the gauges as last reported."""

    messages: int = 0
    bytes: int = 0
    staged: int = 0
    committed: int = 0
    # The gauges start at 0 (nothing known, nothing committed): reported once they move.
    reported: SourceStatistics = field(
        default_factory=lambda: SourceStatistics(offset_known=0, offset_committed=0)
    )


class _Buffer:
    """An ingestion's upstream updates, kept as the batches they came in.

    Each chunk is ``(least offset, greatest offset, updates)``. A reader's
    batches end at the offsets bindings are minted at, so taking or dropping
    a range of offsets moves whole chunks; only a chunk that straddles a bound
    is split update by update. Order is upstream's.
    """

    __slots__ = ("chunks", "count")

    def __init__(self) -> None:
        self.chunks: list[tuple[int, int, Sequence[SourceUpdate]]] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, updates: Sequence[SourceUpdate], at_least: int) -> None:
        """Keep ``updates`` at offsets ``>= at_least``."""
        bounds = offset_bounds(updates)
        if bounds is None:
            return
        lo, hi = bounds
        if hi < at_least:
            return
        if lo < at_least:
            updates = [u for u in updates if u[1] >= at_least]
            lo = at_least
        self.chunks.append((lo, hi, updates))
        self.count += len(updates)

    def take(self, lo: int, hi: int) -> list[SourceUpdate]:
        """The updates at offsets in ``[lo, hi)``, in order."""
        out: list[SourceUpdate] = []
        for first, last, updates in self.chunks:
            if last < lo or first >= hi:
                continue
            if lo <= first and last < hi:
                out.extend(updates)
            else:
                out.extend(u for u in updates if lo <= u[1] < hi)
        return out

    def drop_below(self, offset: int) -> None:
        kept: list[tuple[int, int, Sequence[SourceUpdate]]] = []
        count = 0
        for first, last, updates in self.chunks:
            if last < offset:
                continue
            if first < offset:
                updates = [u for u in updates if u[1] >= offset]
                first = offset
            kept.append((first, last, updates))
            count += len(updates)
        self.chunks, self.count = kept, count


def _int_upper(f: Antichain, what: str) -> int | None:
    if not isinstance(f, Antichain):
        raise InvalidBindings(f"{what} {f!r} is not an Antichain")
    if f.is_empty():
        return None
    els = f.elements
    if len(els) != 1 or type(els[0]) is not int or els[0] < 0:
        raise InvalidBindings(f"{what} {f!r} is not a frontier of one int")
    return els[0]


class IngestionRun:
    """The state of one ingestion: its bindings, source reader, buffered updates and write in flight.

    Phases: ``loading`` (a :class:`ReadRemap` is out), ``ready`` (bindings and
    uppers known), ``closed`` (its data collection is closed), ``ceased``
    (it cannot run: its description lacks a connection, schema or remap
    collection). The source is ``stopped``, ``starting``, ``running``,
    ``failed`` (retried) or ``ceased`` (failed for good); the buffer holds every upstream update at offsets in
    ``[src_lower, src_upper)``.
    """

    def __init__(self, run: RunIngestion, now: int, backoff: tuple[int, int]) -> None:
        self.id = run.id
        self.run = run
        src = run.description.data_source
        self.remap_id: GlobalId | None = None
        self.connection: SourceConnection | None = None
        self.schema: Schema | None = None
        problem = None
        if not isinstance(src, Ingestion):
            problem = "its description is not an ingestion"
        else:
            self.remap_id, self.connection, self.schema = (
                src.remap_collection,
                src.connection,
                src.schema,
            )
            missing = [
                name
                for name, value in (
                    ("remap collection", src.remap_collection),
                    ("connection", src.connection),
                    ("schema", src.schema),
                )
                if value is None
            ]
            if missing:
                problem = f"its description has no {', '.join(missing)}"
        self.phase = "ceased" if problem else "new"
        self.status = (
            StatusUpdate(self.id, SourceStatus.CEASED, f"ingestion {self.id} cannot run: {problem}")
            if problem
            else StatusUpdate(self.id, SourceStatus.STARTING)
        )
        self.bindings = Bindings()
        self.data_upper: int | None = None
        self.remap_upper: int | None = None
        self.source = "stopped"
        self.src_lower = 0
        self.src_upper = 0
        self.buffer = _Buffer()
        self.inflight: _Write | None = None
        self.acked = 0
        self.source_retry = Backoff(*backoff)
        self.started_at = 0
        """The delivered upper when the current reader started (progress is beyond it)."""
        self.load_retry = Backoff(*backoff)
        self.started_ms = now
        self.rehydrated_ms: int | None = None
        self.stats = _Stats()

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> list[StorageReplicaOutput]:
        """Begin: load the bindings (nothing for an ingestion that cannot run)."""
        if self.phase != "new":
            return []
        return self._load()

    def _load(self) -> list[StorageReplicaOutput]:
        assert self.remap_id is not None
        self.phase = "loading"
        return [ReadRemap(self.id, self.id, self.remap_id)]

    def stop(self) -> list[StorageReplicaOutput]:
        """Tear down: stop the reader. (The replica retires a write in flight.)"""
        out: list[StorageReplicaOutput] = []
        if self.source != "stopped":
            out.append(StopSource(self.id))
        self.source = "stopped"
        self.phase = "stopped"
        return out

    # -- loading --------------------------------------------------------------------

    def check_remap_loaded(
        self, data_upper: Antichain, updates: tuple[Update, ...], remap_upper: Antichain
    ) -> tuple[int | None, Bindings | None]:
        if self.phase != "loading":
            raise UnrequestedStorageCallback(
                f"remap_loaded for {self.id}, whose remap is not being read"
            )
        d = _int_upper(data_upper, "data upper")
        r = _int_upper(remap_upper, "remap upper")
        if d is None:
            return None, None
        if r is None or r < d:
            raise InvalidBindings(
                f"ingestion {self.id}: the remap upper {remap_upper!r} is behind the data upper "
                f"{data_upper!r} (the remap collection is written first)"
            )
        return d, decode_bindings(updates, remap_as_of(d), remap_upper)

    def remap_loaded(
        self, d: int | None, bindings: Bindings | None, remap_upper: Antichain
    ) -> list[StorageReplicaOutput]:
        """The driver read the shards (already checked by :meth:`check_remap_loaded`)."""
        self.load_retry.succeeded()
        out: list[StorageReplicaOutput] = []
        if d is None or bindings is None:
            self.phase = "closed"
            self.data_upper = None
            out.extend(self.stop())
            self.phase = "closed"
            self.status = StatusUpdate(
                self.id, SourceStatus.CEASED, f"the data collection of {self.id} is closed"
            )
            return out
        self.phase = "ready"
        self.data_upper = d
        self.remap_upper = bindings.upper
        self.bindings = bindings
        resume = resume_offset(bindings, d)
        keep = self.source != "stopped" and self.src_lower <= resume
        if keep:
            self._drop_below(resume)
        else:
            out.extend(self._start_source(resume, restart=True))
        out.extend(self._ack(resume))
        return out

    def remap_failed(self, error: str, now: int) -> None:
        if self.phase != "loading":
            raise UnrequestedStorageCallback(
                f"remap_failed for {self.id}, whose remap is not being read"
            )
        self.phase = "load-failed"
        self.load_retry.failed(now)
        self.status = StatusUpdate(self.id, SourceStatus.STALLED, error)

    # -- the source -----------------------------------------------------------------

    def _start_source(self, offset: int, *, restart: bool) -> list[StorageReplicaOutput]:
        assert self.connection is not None and self.schema is not None
        if restart:
            self.buffer = _Buffer()
            self.src_lower = self.src_upper = offset
        self.source = "starting"
        return [StartSource(self.id, self.connection, self.schema, offset)]

    def _drop_below(self, offset: int) -> None:
        if offset > self.src_lower:
            self.buffer.drop_below(offset)
            self.src_lower = offset

    def source_started(self) -> None:
        if self.source != "starting":
            raise UnrequestedStorageCallback(
                f"source_started for {self.id}, whose source is not starting"
            )
        self.source = "running"
        # Connecting is not yet success: a reader that connects and fails again at once (the
        # same upstream trouble) would otherwise be retried every base interval for ever, its
        # status flapping; the backoff is forgiven once the source makes progress (:meth:`feed`).
        self.started_at = self.src_upper
        if self.status.status is not SourceStatus.CEASED:
            self.status = StatusUpdate(self.id, SourceStatus.RUNNING)

    def source_failed(self, error: str, now: int, *, retryable: bool = True) -> None:
        if self.source not in ("starting", "running"):
            raise UnrequestedStorageCallback(
                f"source_failed for {self.id}, whose source is not reading"
            )
        if not retryable:  # no restart gets past it: the source stops for good, and says why
            self.source = "ceased"
            self.status = StatusUpdate(
                self.id,
                SourceStatus.CEASED,
                error,
                "the upstream changed so that the source cannot go on: drop and re-create it",
            )
            return
        self.source = "failed"
        self.source_retry.failed(now)
        self.status = StatusUpdate(self.id, SourceStatus.STALLED, error)

    def check_batch(self, batch: SourceBatch) -> None:
        if self.source not in ("starting", "running"):
            raise UnrequestedStorageCallback(
                f"feed_source for {self.id}, whose source is not reading"
            )
        if not isinstance(batch, SourceBatch):
            raise SourceBatchRejected(f"feed_source for {self.id}: not a SourceBatch: {batch!r}")
        upper = batch.upper
        if type(upper) is not int or upper < self.src_upper:
            raise SourceBatchRejected(
                f"source batch of {self.id} has upper {upper!r}, behind the upper {self.src_upper} "
                "already delivered"
            )
        updates = batch.updates
        if well_formed(updates):  # the common case, checked in bulk
            bounds = offset_bounds(updates)
            if bounds is None or (self.src_upper <= bounds[0] and bounds[1] < upper):
                return
        for u in updates:
            if type(u) is not tuple or len(u) != 3:
                raise SourceBatchRejected(
                    f"source update of {self.id} is not (row, offset, diff): {u!r}"
                )
            row, offset, diff = u
            if type(row) is not tuple or type(diff) is not int:
                raise SourceBatchRejected(f"source update of {self.id} is malformed: {u!r}")
            if type(offset) is not int or not self.src_upper <= offset < upper:
                raise SourceBatchRejected(
                    f"source update of {self.id} at offset {offset!r} is outside "
                    f"[{self.src_upper}, {upper}) (the delivered upper, the batch's upper)"
                )

    def feed(self, batch: SourceBatch) -> None:
        """Take a batch (already checked by :meth:`check_batch`)."""
        if self.source == "starting":
            self.source_started()
        if batch.updates or batch.upper > self.started_at:  # progress: the retries worked
            self.source_retry.succeeded()
        self.buffer.add(batch.updates, self.src_lower)
        self.src_upper = batch.upper
        self.stats.messages += len(batch.updates)
        self.stats.bytes += max(0, int(batch.size_bytes))

    # -- time -----------------------------------------------------------------------

    def tick(self, now: int, writes_allowed: bool) -> list[StorageReplicaOutput]:
        """Retries that are due; with writes allowed and nothing in flight, mint the next binding."""
        out: list[StorageReplicaOutput] = []
        if self.source == "failed" and self.source_retry.due(now):
            # The buffer still holds [src_lower, src_upper): read on from there.
            self.source_retry.retry_at = None
            self.src_upper = max(self.src_upper, self.src_lower)
            out.extend(self._start_source(self.src_upper, restart=False))
        if self.phase == "load-failed" and self.load_retry.due(now):
            self.load_retry.retry_at = None
            out.extend(self._load())
        if not (writes_allowed and self.phase == "ready" and self.inflight is None):
            return out
        assert self.remap_upper is not None and self.data_upper is not None
        if self.remap_upper > self.data_upper:
            return out + self.progress(writes_allowed)
        if self.source != "running":
            # A source that is not reading (starting, failed) mints nothing: its frontier
            # stalls, as a stalled source's does in Materialize, rather than claim that
            # upstream had nothing new up to a time it cannot vouch for.
            return out
        t = max(now, self.remap_upper)
        offset = max(self.src_upper, self.bindings.latest)
        updates = mint_binding(self.bindings.latest, offset, t)
        minted = self.bindings.minted(t, offset)
        self.inflight = _Write(self.remap_id_checked, self.remap_upper, t + 1, updates, minted)
        out.append(
            WriteShard(
                self.remap_id_checked, updates, Antichain([self.remap_upper]), Antichain([t + 1])
            )
        )
        return out

    @property
    def remap_id_checked(self) -> GlobalId:
        assert self.remap_id is not None
        return self.remap_id

    def progress(self, writes_allowed: bool) -> list[StorageReplicaOutput]:
        """Write the data of bindings beyond the data upper, once upstream has delivered it."""
        if not (writes_allowed and self.phase == "ready" and self.inflight is None):
            return []
        d, r = self.data_upper, self.remap_upper
        assert d is not None and r is not None
        if r <= d:
            return []
        lo = resume_offset(self.bindings, d)
        hi = self.bindings.at(r - 1)
        if self.src_upper < hi:
            return []  # upstream has not delivered the bound offsets yet
        timed, rest = reclock(self.buffer.take(lo, hi), self.bindings)
        assert not rest, "every offset below the latest binding has a time"
        updates = consolidated(timed)
        self.inflight = _Write(self.id, d, r, updates)
        self.stats.staged += len(updates)
        return [WriteShard(self.id, updates, Antichain([d]), Antichain([r]))]

    # -- writes ---------------------------------------------------------------------

    def check_write(self, shard: GlobalId, upper: Antichain, completed: bool) -> None:
        w = self.inflight
        if w is None or w.shard != shard:
            raise ShardWriteNotInFlight(f"no write of {shard} is in flight")
        if not isinstance(upper, Antichain):
            raise ShardWriteNotInFlight(f"the upper of {shard} must be an Antichain, got {upper!r}")
        if completed and upper != Antichain([w.new]):
            raise ShardWriteNotInFlight(
                f"the write of {shard} in flight ends at [{w.new}], not at {upper!r}"
            )
        if not completed and upper == Antichain([w.expected]):
            raise ShardWriteNotInFlight(
                f"a mismatch of {shard} at its expected upper [{w.expected}] is not a mismatch"
            )

    def write_completed(self, now: int, writes_allowed: bool) -> list[StorageReplicaOutput]:
        w = self.inflight
        assert w is not None
        self.inflight = None
        if w.minted is not None:
            self.bindings = w.minted
            self.remap_upper = w.new
            return self.progress(writes_allowed)
        self.data_upper = w.new
        self.stats.committed += len(w.updates)
        if self.rehydrated_ms is None:
            self.rehydrated_ms = max(0, now - self.started_ms)
        lo = resume_offset(self.bindings, w.new)
        self._drop_below(lo)
        self.bindings = self.bindings.advanced(remap_as_of(w.new))
        out = self._ack(lo)
        return out + self.progress(writes_allowed)

    def write_failed(self) -> list[StorageReplicaOutput]:
        """Another incarnation moved the shard: reload and resume from what is durable."""
        self.inflight = None
        return self._load()

    def _ack(self, offset: int) -> list[StorageReplicaOutput]:
        if offset <= self.acked:
            return []
        self.acked = offset
        return [AckSource(self.id, offset)]

    # -- reports --------------------------------------------------------------------

    def statistics(self) -> SourceStatistics | None:
        """What changed since the last call (counters as increments), or ``None`` if nothing did."""
        s = self.stats
        rep = s.reported
        gauges = {
            "offset_known": self.src_upper if self.source != "stopped" else rep.offset_known,
            "offset_committed": self.acked,
            "rehydration_latency_ms": self.rehydrated_ms,
        }
        changed = {k: v for k, v in gauges.items() if v is not None and v != getattr(rep, k)}
        if not (s.messages or s.bytes or s.staged or s.committed or changed):
            return None
        update = SourceStatistics(
            messages_received=s.messages,
            bytes_received=s.bytes,
            updates_staged=s.staged,
            updates_committed=s.committed,
            **changed,
        )
        s.reported = rep.merged(update)
        s.messages = s.bytes = s.staged = s.committed = 0
        return update
