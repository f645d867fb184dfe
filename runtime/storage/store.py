"""The shard store: durable shards of ``(row, time, diff)`` over a Blob and a Consensus store.

Every operation reads the shard's state from Consensus, applies a pure
transition from :mod:`tidegate.spec.shard`, and commits the successor with a
compare-and-set on the sequence number (retrying on a race). Batch data goes
to Blob as Parquet *before* the commit that makes it visible, so a crash in
between leaves only an unreferenced (orphan) blob, never a half-visible batch.
Timestamps are non-negative ints.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from tidegate.runtime.platform import wall_ms as _wall_ms
from tidegate.spec.errors import (
    BlobCorrupt,
    BlobMissing,
    CompactionConflict,
    ConsensusError,
    Indeterminate,
    SchemaMismatch,
    ShardError,
    ShardFinalized,
    SnapshotBeforeSince,
    UnknownShard,
    UpperMismatch,
)
from tidegate.spec.frontier import Antichain, Update, consolidate
from tidegate.spec.shard import (
    INLINE_PREFIX,
    BatchMeta,
    Blob,
    CompactionPlan,
    CompactionPolicy,
    Consensus,
    ShardState,
    VersionedData,
    Watchable,
    apply_compaction,
    blob_digest,
    check_append_times,
    decode_state,
    encode_state,
    listen_batches,
    plan_compaction,
    plan_maintenance,
    snapshot_batches,
)
from tidegate.spec.shard import transitions as tr

from .arrow_batches import (
    TIME,
    batch_schema,
    consolidate_table,
    decode_batch,
    encode_blob,
    encode_inline,
    schema_from_text,
    schema_text,
    table_and_bounds,
    table_to_updates,
    time_bounds,
    validate_append_table,
)

__all__ = [
    "CompactionReport",
    "FrontierLike",
    "ListenEvent",
    "Listener",
    "ShardStore",
    "open_shard_store",
]

FrontierLike: TypeAlias = Antichain | int
"""A frontier argument: an :class:`Antichain`, or an ``int`` ``t`` meaning ``[t]``."""

Updates: TypeAlias = pa.Table | pa.RecordBatch | Iterable[Update]

_SHARD_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
DEFAULT_LEASE_MS = 15 * 60 * 1000
DEFAULT_DOWNGRADE_MS = 1000
"""How often a :class:`Listener` moves its read hold forward at most."""
INLINE_MAX_BYTES = 4096
"""A batch whose encoding is at most this many bytes is stored inline (persist's default)."""
INLINE_TOTAL_MAX_BYTES = 64 * 1024
"""Inline batches stop once a shard's state carries this many bytes of them (every commit
rewrites the state, so it stays small); compaction moves them into blobs."""
BLOB_IPC_MAX_BYTES = 4 * 1024 * 1024
"""A blob that maintenance will merge again and that holds at most this many bytes (in
memory) is an Arrow IPC message; others are Parquet (see :class:`ShardStore`)."""
EXPIRY_EVERY = 64
"""Maintenance after every this many appends also expires lapsed readers and idle writers."""


def _frontier(f: FrontierLike) -> Antichain:
    if isinstance(f, Antichain):
        return f
    return Antichain.from_elem(f)


def _uuid_hex() -> str:
    return uuid.uuid4().hex


def _truncated(table: pa.Table, start: Antichain) -> pa.Table:
    """The rows of ``table`` at times not before ``start`` (the table itself if none is before it)."""
    (t,) = start.elements
    if not table.num_rows or pc.min(table.column(TIME)).as_py() >= t:
        return table
    return table.filter(pc.greater_equal(table.column(TIME), t))


def _at_or_after(table: pa.Table, t: int) -> pa.Table:
    """The rows of ``table`` at times not before ``t``."""
    return table.filter(pc.greater_equal(table.column(TIME), t))


_DECODED: dict[tuple[str, int], tuple[bytes, ShardState]] = {}
"""Decoded shard states by (shard, seqno), shared by the stores of a process: every reader of a
shard (a controller, replicas, listeners) decodes each version once, not once each. Entries are
checked against the bytes they came from; past the bound the oldest entry goes."""
_DECODED_MAX = 256
"""Readers read near a shard's head, so a few hundred versions serve them all. Each entry is a
state's bytes and its objects, which every full collection of the process walks: 1,024 entries
(emptied all at once when full) held up to 100,000 objects in a replica under
``bench/appends.py``, more than its whole startup heap."""


def decoded_state(shard: str, seqno: int, data: bytes) -> ShardState:
    """:func:`~tidegate.spec.shard.decode_state`, through the process's shared cache."""
    return _decode(shard, seqno, data)


def _decode(shard: str, seqno: int, data: bytes) -> ShardState:
    key = (shard, seqno)
    hit = _DECODED.get(key)
    if hit is not None and hit[0] == data:
        return hit[1]
    state = decode_state(shard, seqno, data)
    _remember(key, data, state)
    return state


def _remember(key: tuple[str, int], data: bytes, state: ShardState) -> None:
    if len(_DECODED) >= _DECODED_MAX:
        with contextlib.suppress(StopIteration, KeyError):  # another thread evicted it first
            del _DECODED[next(iter(_DECODED))]
    _DECODED[key] = (data, state)


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What :meth:`ShardStore.compact` did: batch counts before/after and merges committed."""

    batches_before: int
    batches_after: int
    merges: int


@dataclass(frozen=True, slots=True)
class ListenEvent:
    """Updates at times in ``[previous progress, progress)`` beyond the as_of, then ``progress``."""

    table: pa.Table
    progress: Antichain

    @property
    def updates(self) -> list[Update]:
        """The updates as ``(row, time, diff)`` tuples (unconsolidated, in no particular order)."""
        return table_to_updates(self.table)


class ShardStore:
    """Durable shards in ``blob`` + ``consensus``; safe to use from several processes at once.

    ``writer_id`` names this store's writes for idempotency (pass a stable one
    to retry across restarts); ``clock_ms`` supplies wall time for leases;
    ``new_id`` fresh hex identifiers (blob keys, writer and reader ids; the
    simulator passes a seeded one); ``auto_compact`` merges small batches
    after appends per ``policy``: in the appending thread, or with
    ``background=True`` in a worker thread of this store (call :meth:`close`
    to wait for it). ``owns_backends``: :meth:`close` also closes ``blob`` and
    ``consensus`` (their database connections); :meth:`open` sets it, as the
    store opened them. ``inline_max_bytes`` / ``inline_total_max_bytes``: a
    batch whose encoding is at most the first is stored inline, in the shard's
    state, while the state's inline batches stay within the second (persist's
    inline writes; ``0`` turns them off); compaction moves them into blobs.
    ``blob_ipc_max_bytes``: a blob of fewer rows than the policy's ``small_len``
    (one that maintenance merges again) and at most this many bytes is written
    as an Arrow IPC message, cheap to write and read; others as Parquet,
    compact (``0``: always Parquet). Reads take either.
    """

    def __init__(
        self,
        blob: Blob,
        consensus: Consensus,
        *,
        writer_id: str | None = None,
        clock_ms: Callable[[], int] = _wall_ms,
        new_id: Callable[[], str] = _uuid_hex,
        policy: CompactionPolicy | None = None,
        auto_compact: bool = True,
        background: bool = False,
        truncate_every: int = 32,
        owns_backends: bool = False,
        inline_max_bytes: int = INLINE_MAX_BYTES,
        inline_total_max_bytes: int = INLINE_TOTAL_MAX_BYTES,
        blob_ipc_max_bytes: int = BLOB_IPC_MAX_BYTES,
    ) -> None:
        self.blob = blob
        self.consensus = consensus
        self.new_id = new_id
        self.writer_id = writer_id or f"w-{new_id()}"
        self.clock_ms = clock_ms
        self.policy = policy or CompactionPolicy()
        self.auto_compact = auto_compact
        self.truncate_every = truncate_every
        self.last_maintenance_error: Exception | None = None
        self._schemas: dict[str, pa.Schema] = {}
        self._schema_texts: dict[str, str] = {}
        """The text each schema in ``_schemas`` was parsed from (a shard's schema is set once,
        but a shard dropped and created again under its name may differ)."""
        self._worker: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-compaction")
            if background
            else None
        )
        self._pending: set[str] = set()
        self._appends_since_expiry = 0
        self._pending_lock = threading.Lock()
        self._owns_backends = owns_backends
        self.inline_max_bytes = inline_max_bytes
        self.inline_total_max_bytes = inline_total_max_bytes
        self.blob_ipc_max_bytes = blob_ipc_max_bytes

    def close(self) -> None:
        """Wait for background compaction to finish and stop its thread; close the backends
        the store owns (``owns_backends``), ending their database connections. Idempotent."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        if self._owns_backends:
            self._owns_backends = False
            for backend in (self.consensus, self.blob):
                closer = getattr(backend, "close", None)
                if callable(closer):
                    closer()

    @classmethod
    def open(cls, blob_url: str, consensus_url: str, **kwargs: Any) -> ShardStore:
        """A store over the backends the URLs name (see :mod:`.urls`); :meth:`close` closes them."""
        from .urls import open_blob, open_consensus

        kwargs.setdefault("owns_backends", True)
        return cls(open_blob(blob_url), open_consensus(consensus_url), **kwargs)

    @property
    def local(self) -> bool:
        """Whether both backends are on this machine (a file blob, SQLite, or memory): a
        small write is then brief enough to run on the caller's event loop, where a remote
        backend's round trip may hang. Backends that do not say are taken as remote."""
        return bool(getattr(self.blob, "local", False) and getattr(self.consensus, "local", False))

    # -- state -----------------------------------------------------------------------

    def _fetch(self, shard: str) -> ShardState:
        head = self.consensus.head(shard)
        if head is None:
            raise UnknownShard(shard, f"no shard {shard!r}")
        # Decoding is most of a read's cost, and most reads find a version read before.
        return _decode(shard, head.seqno, head.data)

    def state(self, shard: str) -> ShardState:
        """The shard's current state (a fresh read from Consensus)."""
        return self._fetch(shard)

    def upper(self, shard: str) -> Antichain:
        return self._fetch(shard).upper

    def watch(self, shard: str, callback: Callable[[str], None]) -> Callable[[], None] | None:
        """Call ``callback(shard)`` soon after each commit to ``shard`` (an append, a reader's
        since moving, ...), if the Consensus backend can say so (:class:`Watchable`: the
        PostgreSQL and in-memory ones); returns the function that stops it, or ``None`` when
        the backend cannot (then the caller polls).

        A hint, never a guarantee: a notification may be late, spurious or lost (while the
        backend's channel is down), so a reader that waits for one still polls now and then.
        """
        consensus = self.consensus
        if not isinstance(consensus, Watchable):
            return None
        return consensus.watch(shard, callback)

    def since(self, shard: str) -> Antichain:
        return self._fetch(shard).since

    def wait_for_upper(
        self, shard: str, beyond: int, *, timeout_s: float = 10.0, poll_interval_s: float = 0.01
    ) -> Antichain:
        """Wait until the upper is past ``beyond`` (so a snapshot at ``beyond`` is ready); returns
        the upper, which may still be at or before ``beyond`` if ``timeout_s`` ran out."""
        deadline = time.monotonic() + timeout_s
        delay = poll_interval_s
        while True:
            upper = self.upper(shard)
            if not upper.less_equal(beyond) or time.monotonic() >= deadline:
                return upper
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def list_shards(self) -> list[str]:
        return self.consensus.list_keys()

    def schema(self, shard: str) -> pa.Schema:
        """The shard's row schema (without ``__time``/``__diff``)."""
        cached = self._schemas.get(shard)
        if cached is not None:
            return cached
        state = self._fetch(shard)
        return self._schema_of(state)

    def _schema_of(self, state: ShardState) -> pa.Schema:
        if state.finalized:
            raise ShardFinalized(state.shard, "the shard is finalized")
        if state.schema is None:
            raise SchemaMismatch(state.shard, "the shard has no schema")
        cached = self._schemas.get(state.shard)
        if cached is not None and self._schema_texts.get(state.shard) == state.schema:
            return cached
        schema = schema_from_text(state.schema)
        self._schemas[state.shard] = schema
        self._schema_texts[state.shard] = state.schema
        return schema

    def _commit(
        self,
        shard: str,
        step: Callable[[ShardState], ShardState],
        latest: ShardState | None = None,
    ) -> ShardState:
        """Apply ``step`` to the latest state and commit it; retry on a lost race.

        ``latest``: a state just read, tried first (a lost race reads again).
        """
        while True:
            state, latest = (self._fetch(shard) if latest is None else latest), None
            new = step(state)
            if new is state:
                return state
            data = VersionedData(new.seqno, encode_state(new))
            try:
                ok = self.consensus.compare_and_set(shard, state.seqno, data)
            except (ConsensusError, ShardError):
                raise
            except Exception as e:
                raise Indeterminate(shard, f"consensus write failed: {e!r}") from e
            if ok:
                _remember((shard, new.seqno), data.data, new)
                if self.truncate_every and new.seqno % self.truncate_every == 0:
                    self._truncate(shard, new.seqno)
                return new

    def _truncate(self, shard: str, seqno: int) -> None:
        # Housekeeping after a commit: someone truncated further already, or the store is
        # unavailable (the commit stands either way; a later commit truncates again).
        with contextlib.suppress(Exception):
            self.consensus.truncate(shard, seqno)

    def create_shard(self, shard: str, schema: pa.Schema) -> ShardState:
        """Create ``shard`` with row ``schema``; idempotent for the same schema.

        A shard that exists with another schema raises :class:`SchemaMismatch`.
        """
        if not _SHARD_ID.match(shard):
            raise ValueError(f"invalid shard id {shard!r}")
        text = schema_text(schema)
        initial = ShardState(shard=shard, schema=text)
        if self.consensus.compare_and_set(shard, None, VersionedData(0, encode_state(initial))):
            return initial
        return self._commit(shard, lambda s: tr.register_schema(s, text))

    # -- writes ----------------------------------------------------------------------

    def _to_table(self, shard: str, updates: Updates, schema: pa.Schema) -> pa.Table:
        return self._to_table_and_bounds(shard, updates, schema)[0]

    def _to_table_and_bounds(
        self, shard: str, updates: Updates, schema: pa.Schema
    ) -> tuple[pa.Table, int | None, int | None]:
        if isinstance(updates, pa.RecordBatch):
            updates = pa.Table.from_batches([updates])
        if isinstance(updates, pa.Table):
            table = validate_append_table(shard, updates, schema)
            return (table, *time_bounds(table))
        return table_and_bounds(shard, updates, schema)

    def _stage(
        self,
        state: ShardState,
        table: pa.Table,
        lower: Antichain,
        upper: Antichain,
        tmin: int | None,
        tmax: int | None,
    ) -> tuple[BatchMeta, str | None]:
        """The batch of ``table`` and the blob written for it (``None``: stored inline).

        Small batches go inline (as Arrow IPC, see :func:`encode_inline`) while
        the state's inline bytes stay under their cap: one consensus write per
        append instead of a blob write (with its fsyncs) and a consensus write.
        """
        room = min(self.inline_max_bytes, self.inline_total_max_bytes - state.inline_bytes)
        inline = encode_inline(table, room) if room > 0 else None
        if inline is not None:
            key = f"{INLINE_PREFIX}{self.new_id()}"
            digest = blob_digest(inline)
            meta = BatchMeta(key, lower, upper, lower, table.num_rows, tmin, tmax, digest, inline)
            return meta, None
        data, suffix = self._encode_blob(table)
        digest = blob_digest(data)
        key = f"{state.shard}/{self.new_id()}{suffix}"
        self.blob.set(key, data)
        return BatchMeta(key, lower, upper, lower, table.num_rows, tmin, tmax, digest), key

    def _encode_blob(self, table: pa.Table) -> tuple[bytes, str]:
        """A blob's bytes and key suffix: an Arrow IPC message while maintenance will merge
        the batch again (fewer rows than ``small_len``) and it is small, else Parquet."""
        small = (
            table.num_rows < self.policy.small_len
            and table.get_total_buffer_size() <= self.blob_ipc_max_bytes
        )
        return encode_blob(table, ipc=small)

    def compare_and_append(
        self,
        shard: str,
        updates: Updates,
        expected_upper: FrontierLike,
        new_upper: FrontierLike,
        idempotency_token: str | None = None,
        *,
        writer_id: str | None = None,
        requests: Mapping[str, int] | None = None,
    ) -> Antichain:
        """Atomically append ``updates`` if the shard's upper is ``expected_upper``; returns the new upper.

        ``updates`` is an Arrow table (the row columns plus int64 ``__time`` and
        ``__diff``) or ``(row, time, diff)`` tuples. Raises :class:`UpperMismatch`
        (with ``actual_upper``), :class:`InvalidUpdates`, :class:`InvalidShardBounds`,
        :class:`SchemaMismatch` or :class:`ShardFinalized`, changing nothing. With
        an ``idempotency_token``, retrying the same append after an unknown
        outcome never appends twice. No updates with ``new_upper ==
        expected_upper`` is a no-op that succeeds if the upper is that (persist's
        semantics): it writes nothing, neither blob nor consensus. ``requests``
        (client request id -> the time its updates are at) are recorded in the
        same commit as the updates; one recorded already raises
        :class:`RequestsApplied` (with the times they were written at), changing
        nothing (see :func:`tidegate.spec.shard.transitions.compare_and_append`).
        """
        expected, new = _frontier(expected_upper), _frontier(new_upper)
        writer = writer_id or self.writer_id
        state = self._fetch(shard)
        schema = self._schema_of(state)
        table, tmin, tmax = self._to_table_and_bounds(shard, updates, schema)
        check_append_times(shard, tmin, tmax, expected, new)
        meta: BatchMeta | None = None
        if table.num_rows:
            meta = BatchMeta("", expected, new, expected, table.num_rows, tmin, tmax)
        # Dry run on the state we have: fail fast (before writing a blob) on a stale upper.
        outcome = tr.compare_and_append(
            state,
            meta,
            expected,
            new,
            writer_id=writer,
            token=idempotency_token,
            now_ms=0,
            requests=requests,
        )
        if outcome.already_committed or outcome.state is state:
            # A retry of a committed append, or a no-op (no updates, an empty interval):
            # the upper just read, checked, is the linearization point. Nothing to commit.
            return outcome.upper
        key = None
        if meta is not None:
            meta, key = self._stage(state, table, expected, new, tmin, tmax)
        result: list[tr.AppendOutcome] = []

        def step(s: ShardState) -> ShardState:
            out = tr.compare_and_append(
                s,
                meta,
                expected,
                new,
                writer_id=writer,
                token=idempotency_token,
                now_ms=self.clock_ms(),
                requests=requests,
            )
            result[:] = [out]
            return out.state if out.already_committed else self._with_inline_merge(s, out.state)

        try:
            committed = self._commit(shard, step, state)
        except Indeterminate:
            raise  # the blob may be referenced now: keep it
        except BaseException:
            if key is not None:
                self.blob.delete(key)
            raise
        if result[0].already_committed and key is not None:
            self.blob.delete(key)
        if self.auto_compact and not result[0].already_committed:
            self._maybe_compact(shard, committed)
        return result[0].upper

    def _with_inline_merge(self, before: ShardState, after: ShardState) -> ShardState:
        """``after`` (what an append turns ``before`` into) with the merge maintenance would
        do next among the batches that were there before, when its output stays inline
        (see :func:`plan_maintenance`).

        The append's own consensus write commits the merge too, where maintenance
        after it would pay a write of its own and race with the next append. Only
        inline bytes are read, so this stays a transition without IO. A merge that
        would not fit inline, or inputs that do not read back (a corrupt state),
        are left to maintenance.
        """
        if not self.auto_compact or after is before:
            return after
        fresh = len(after.batches) - len(before.batches)  # the append's own batch, if any
        plan = plan_maintenance(after, self.policy, fresh=fresh)
        if plan is None or not plan.inline:
            return after
        try:
            table = self._merged_table(after, plan)
        except ShardError:
            return after
        output = None  # everything cancelled out
        if table.num_rows:
            data = encode_inline(table, self.policy.inline_merge_max_bytes)
            if data is None:
                return after
            tmin, tmax = time_bounds(table)
            key = f"{INLINE_PREFIX}{self.new_id()}"
            output = plan.output(key, table.num_rows, tmin, tmax, blob_digest(data), data)
        return apply_compaction(after, plan, output)

    def append(
        self,
        shard: str,
        updates: Updates,
        lower: FrontierLike,
        upper: FrontierLike,
        *,
        writer_id: str | None = None,
    ) -> Antichain:
        """Persist's non-CAS ``append``: add the updates of ``[lower, upper)`` the shard lacks; returns its upper.

        For a writer that owns the shard, or several that write the same definite
        updates (replicas of one dataflow): the part of ``updates`` before the
        shard's upper is already there and is truncated away, the rest is
        appended and the upper advances to ``upper``; if the upper is already at
        or beyond ``upper`` nothing is written. An upper before ``lower`` (a gap)
        raises :class:`~tidegate.spec.errors.AppendGap`, changing nothing; bad
        bounds or updates raise as :meth:`compare_and_append` does.

        It is linearizable as compare-and-append is: each attempt commits with a
        compare-and-set on the state it read. If the upper moves while the
        batch is being written, it truncates again at the new upper (rewriting
        the blob only if rows must go) and retries, so racing writers store each
        update exactly once. An unknown outcome raises
        :class:`~tidegate.spec.errors.Indeterminate`; calling again is always
        safe (if the attempt landed, the retry is a no-op).
        """
        lo, up = _frontier(lower), _frontier(upper)
        writer = writer_id or self.writer_id
        state = self._fetch(shard)
        schema = self._schema_of(state)
        table = self._to_table(shard, updates, schema)
        check_append_times(shard, *time_bounds(table), lo, up)
        result: list[tr.AppendOutcome] = []
        while True:
            start = tr.append_lower(state, lo, up)
            if start is None:  # the shard has every update already
                return state.upper
            table = _truncated(table, start)
            meta, key = None, None
            if table.num_rows:
                meta, key = self._stage(state, table, start, up, *time_bounds(table))

            def step(s: ShardState, meta: BatchMeta | None = meta) -> ShardState:
                out = tr.append(s, meta, lo, up, writer_id=writer, now_ms=self.clock_ms())
                result[:] = [out]
                return self._with_inline_merge(s, out.state)

            try:
                committed = self._commit(shard, step)
            except UpperMismatch:
                # The upper moved past ``start`` and the batch holds rows before it: cut again.
                if key is not None:
                    self.blob.delete(key)
                state = self._fetch(shard)
                continue
            except Indeterminate:
                raise  # the blob may be referenced now: keep it
            except BaseException:
                if key is not None:
                    self.blob.delete(key)
                raise
            outcome = result[0]
            if key is not None and key not in outcome.state.batch_keys:
                self.blob.delete(key)  # the shard reached ``upper`` meanwhile: a no-op
            elif self.auto_compact:
                self._maybe_compact(shard, committed)
            return outcome.upper

    # -- readers ---------------------------------------------------------------------

    def register_leased_reader(
        self, shard: str, reader_id: str | None = None, *, lease_ms: int = DEFAULT_LEASE_MS
    ) -> str:
        """Register a leased reader at the shard's since; returns its id. It expires unless heartbeated."""
        rid = reader_id or f"r-{self.new_id()}"
        self._commit(
            shard,
            lambda s: tr.register_leased_reader(s, rid, now_ms=self.clock_ms(), lease_ms=lease_ms),
        )
        return rid

    def register_critical_reader(self, shard: str, reader_id: str, *, opaque: int = 0) -> Antichain:
        """Register (or find) a critical reader; returns its since. It holds until released."""
        state = self._commit(
            shard, lambda s: tr.register_critical_reader(s, reader_id, opaque=opaque)
        )
        since = state.reader_since(reader_id)
        return state.since if since is None else since

    def heartbeat_reader(self, shard: str, reader_id: str) -> None:
        self._commit(shard, lambda s: tr.heartbeat_reader(s, reader_id, now_ms=self.clock_ms()))

    def downgrade_since(self, shard: str, reader_id: str, new_since: FrontierLike) -> Antichain:
        """Move a reader's since forward; returns the shard's since afterwards."""
        f = _frontier(new_since)
        state = self._commit(
            shard, lambda s: tr.downgrade_since(s, reader_id, f, now_ms=self.clock_ms())
        )
        return state.since

    def compare_and_downgrade_since(
        self,
        shard: str,
        reader_id: str,
        expected_opaque: int,
        new_opaque: int,
        new_since: FrontierLike,
    ) -> Antichain:
        """Downgrade a critical reader's since if its opaque matches; returns the shard's since."""
        f = _frontier(new_since)
        state = self._commit(
            shard,
            lambda s: tr.compare_and_downgrade_since(s, reader_id, expected_opaque, new_opaque, f),
        )
        return state.since

    def release_reader(self, shard: str, reader_id: str) -> Antichain:
        """Drop a reader's hold; returns the shard's since afterwards."""
        return self._commit(shard, lambda s: tr.expire_reader(s, reader_id)).since

    def expire_readers(self, shard: str) -> Antichain:
        """Drop leased readers whose lease ran out (by ``clock_ms``) and writers idle for an hour
        (a later retry of their token then gets :class:`UpperMismatch`, never a second copy);
        returns the shard's since."""
        return self._commit(shard, lambda s: tr.expire_readers(s, now_ms=self.clock_ms())).since

    # -- reads -----------------------------------------------------------------------

    def _read_batch(self, state: ShardState, schema: pa.Schema, b: BatchMeta) -> pa.Table:
        data = b.inline if b.inline is not None else self.blob.get(b.key)
        if data is None:
            raise BlobMissing(state.shard, b.key)
        if b.digest is not None:  # None only for batches written before digests (format 1)
            actual = blob_digest(data)
            if actual != b.digest:
                raise BlobCorrupt(
                    state.shard,
                    b.key,
                    f"sha256 of its {len(data)} bytes is {actual[:12]}…, "
                    f"the state recorded {b.digest[:12]}…",
                    expected=b.digest,
                    actual=actual,
                )
        table = decode_batch(state.shard, b.key, data, schema)
        if table.num_rows != b.length:
            raise BlobCorrupt(
                state.shard, b.key, f"{table.num_rows} updates where the state records {b.length}"
            )
        return table

    def _read(
        self,
        shard: str,
        choose: Callable[[ShardState], tuple[BatchMeta, ...]],
        latest: ShardState | None = None,
    ) -> tuple[ShardState, pa.Schema, list[tuple[BatchMeta, pa.Table]]]:
        """Read the chosen batches of the latest state (``latest``, if just read), retrying
        if compaction retired one meanwhile."""
        while True:
            state, latest = (self._fetch(shard) if latest is None else latest), None
            batches = choose(state)
            schema = self._schema_of(state)
            try:
                return state, schema, [(b, self._read_batch(state, schema, b)) for b in batches]
            except BlobMissing as e:
                if e.key in self._fetch(shard).batch_keys:
                    raise

    def snapshot(self, shard: str, as_of: int) -> pa.Table:
        """The consolidated contents as of ``as_of`` (``__time`` = ``as_of``), as one Arrow table.

        Valid for ``since <= as_of < upper``: :class:`SnapshotBeforeSince` or
        :class:`SnapshotNotReady` otherwise.
        """
        _state, schema, parts = self._read(shard, lambda s: snapshot_batches(s, as_of))
        tables = []
        for b, t in parts:
            if b.max_time is not None and b.max_time > as_of:
                t = t.filter(pc.less_equal(t.column(TIME), as_of))
            tables.append(t)
        full = batch_schema(schema)
        if not tables:
            return full.empty_table()
        table = pa.concat_tables(tables)
        # Every remaining time is <= as_of, so this moves them all to as_of.
        times = pc.max_element_wise(table.column(TIME), pa.scalar(as_of, pa.int64()))
        table = table.set_column(table.schema.get_field_index(TIME), full.field(TIME), times)
        return consolidate_table(table)

    def snapshot_batches(self, shard: str, as_of: int) -> list[pa.RecordBatch]:
        """:meth:`snapshot` as Arrow record batches."""
        return list(self.snapshot(shard, as_of).to_batches())

    def snapshot_rows(self, shard: str, as_of: int) -> list[Update]:
        """:meth:`snapshot` as canonical ``(row, as_of, diff)`` tuples (for small reads)."""
        return consolidate(table_to_updates(self.snapshot(shard, as_of)))

    def listen(
        self,
        shard: str,
        as_of: int,
        *,
        reader_id: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        downgrade_ms: int = DEFAULT_DOWNGRADE_MS,
    ) -> Listener:
        """Follow the updates after ``as_of``, batch by batch, with progress (see :class:`Listener`)."""
        return Listener(
            self, shard, as_of, reader_id=reader_id, lease_ms=lease_ms, downgrade_ms=downgrade_ms
        )

    # -- compaction and garbage ------------------------------------------------------

    def _maybe_compact(self, shard: str, state: ShardState) -> None:
        """Maintenance after an append that committed ``state``: merge batches if the policy
        asks for it, and every :data:`EXPIRY_EVERY` appends expire lapsed readers. Nothing
        is read or started when neither is due (the common case)."""
        with self._pending_lock:
            self._appends_since_expiry += 1
            expire = self._appends_since_expiry >= EXPIRY_EVERY
            if expire:
                self._appends_since_expiry = 0
        if not expire and plan_maintenance(state, self.policy) is None:
            return
        if self._worker is None:
            self._compact_quietly(shard, expire)
            return
        with self._pending_lock:
            if shard in self._pending:
                return
            self._pending.add(shard)
        self._worker.submit(self._compact_in_background, shard, expire)

    def _compact_in_background(self, shard: str, expire: bool) -> None:
        with self._pending_lock:
            self._pending.discard(shard)
        self._compact_quietly(shard, expire)

    def _compact_quietly(self, shard: str, expire: bool) -> None:
        try:
            self._compact(shard, self.policy, 4, plan_maintenance)
            if expire:
                self.expire_readers(shard)  # also forgets idle writers: the state stays small
        except Exception as e:  # maintenance is best-effort: appends stay acknowledged
            self.last_maintenance_error = e

    def _merged_table(self, state: ShardState, plan: CompactionPlan) -> pa.Table:
        """The plan's inputs read, their times advanced to its since, consolidated."""
        schema = self._schema_of(state)
        table = pa.concat_tables([self._read_batch(state, schema, b) for b in plan.inputs])
        if not plan.since.is_empty() and table.num_rows:
            (s,) = plan.since.elements
            times = pc.max_element_wise(table.column(TIME), pa.scalar(s, pa.int64()))
            table = table.set_column(
                table.schema.get_field_index(TIME), batch_schema(schema).field(TIME), times
            )
        return consolidate_table(table)

    def _merge(self, shard: str, plan: CompactionPlan) -> bool:
        """Merge ``plan`` into a blob (an inline plan's output stays inline when an append
        commits it: see :meth:`_with_inline_merge`)."""
        state = self._fetch(shard)
        by_key = {b.key: b for b in state.batches}
        if any(k not in by_key for k in plan.input_keys):
            return False
        table = self._merged_table(state, plan)
        tmin, tmax = time_bounds(table)
        data, suffix = self._encode_blob(table) if table.num_rows else (b"", "")
        key = f"{shard}/{self.new_id()}{suffix}"
        output = plan.output(key, table.num_rows, tmin, tmax, blob_digest(data))
        if output is not None:
            self.blob.set(key, data)
        try:
            self._commit(shard, lambda s: apply_compaction(s, plan, output))
        except CompactionConflict:
            if output is not None:
                self.blob.delete(key)
            return False
        for b in plan.inputs:
            if not b.is_inline:
                self.blob.delete(b.key)
        return True

    def compact(
        self, shard: str, policy: CompactionPolicy | None = None, *, max_merges: int = 1_000
    ) -> CompactionReport:
        """Merge batches as ``policy`` asks (default: the store's) until it is satisfied.

        Merged batches have their times advanced to the since and are
        consolidated; retired blobs are deleted once the merge is committed.
        """
        return self._compact(shard, policy or self.policy, max_merges, plan_compaction)

    def _compact(
        self,
        shard: str,
        policy: CompactionPolicy,
        max_merges: int,
        plan: Callable[[ShardState, CompactionPolicy], CompactionPlan | None],
    ) -> CompactionReport:
        before = len(self._fetch(shard).batches)
        merges = 0
        while merges < max_merges:
            step = plan(self._fetch(shard), policy)
            if step is None:
                break
            if self._merge(shard, step):
                merges += 1
        return CompactionReport(before, len(self._fetch(shard).batches), merges)

    def collect_garbage(self, shard: str, *, min_age_s: float = 600.0) -> int:
        """Delete the shard's blobs that no state refers to and that are older than ``min_age_s``.

        Such orphans come from crashes between a blob write and its commit (and
        from lost races); the age guard spares blobs of appends still in flight.
        Returns the number deleted.
        """
        state = self._fetch(shard)
        live = set(state.batch_keys)
        now = time.time()
        deleted = 0
        for m in self.blob.list_keys(f"{shard}/"):
            if m.key in live:
                continue
            if not state.finalized and m.mtime is not None and now - m.mtime < min_age_s:
                continue
            if not state.finalized and m.mtime is None and min_age_s > 0:
                continue
            if self.blob.delete(m.key) is not None:
                deleted += 1
        return deleted

    def finalize_shard(self, shard: str, *, force: bool = False) -> None:
        """Seal a dropped shard (``since = upper = []``) and delete its blobs.

        Without ``force`` the shard must already be closed and released
        (``since = upper = []``). Afterwards every call raises :class:`ShardFinalized`.
        """
        self._commit(shard, lambda s: tr.finalize(s, force=force))
        self.collect_garbage(shard, min_age_s=0)


class Listener:
    """Follows a shard from ``as_of``: each event carries the updates beyond the previous
    progress (and beyond ``as_of``) and the new progress (the shard's upper then).

    It registers a leased reader holding the since at (or behind) the previous
    progress, so compaction never merges away what it has yet to read;
    :meth:`close` releases it. The hold moves forward at most every
    ``downgrade_ms`` (each move is a consensus write; lagging only delays
    compaction), and the lease is renewed every quarter lease.
    """

    def __init__(
        self,
        store: ShardStore,
        shard: str,
        as_of: int,
        *,
        reader_id: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        downgrade_ms: int = DEFAULT_DOWNGRADE_MS,
    ) -> None:
        self.store = store
        self.shard = shard
        self.as_of = as_of
        # Progress: every update before the frontier was emitted; start just past as_of.
        self.frontier = Antichain.from_elem(as_of + 1)
        self.reader_id = store.register_leased_reader(shard, reader_id, lease_ms=lease_ms)
        try:
            since = store.state(shard).reader_since(self.reader_id) or Antichain.empty()
            if not since.less_equal(as_of):
                raise SnapshotBeforeSince(shard, as_of, since)
            store.downgrade_since(shard, self.reader_id, as_of)
        except BaseException:
            store.release_reader(shard, self.reader_id)
            raise
        self._lease_ms = lease_ms
        self._downgrade_ms = downgrade_ms
        self._last_beat = self._last_downgrade = store.clock_ms()
        self.closed = False

    def poll(self) -> ListenEvent | None:
        """The next event if the shard's upper moved past the progress so far, else ``None``."""
        if self.frontier.is_empty():
            return None
        state = self.store.state(self.shard)
        if state.finalized:
            raise ShardFinalized(self.shard, "the shard is finalized")
        if state.upper <= self.frontier:
            now = self.store.clock_ms()
            if now - self._last_beat > self._lease_ms // 4:
                self.store.heartbeat_reader(self.shard, self.reader_id)
                self._last_beat = now
            return None
        frontier = self.frontier
        _s, schema, parts = self.store._read(
            self.shard, lambda s: listen_batches(s, frontier), state
        )
        progress = _s.upper
        (f,) = frontier.elements
        tables = [
            t if b.min_time is not None and b.min_time >= f else _at_or_after(t, f)
            for b, t in parts
        ]
        table = pa.concat_tables(tables) if tables else batch_schema(schema).empty_table()
        # Hold the since at the previous progress: still strictly before the new one,
        # so a merge can never move an emitted update to a time not yet emitted.
        now = self.store.clock_ms()
        if now - self._last_downgrade >= self._downgrade_ms:
            self.store.downgrade_since(self.shard, self.reader_id, frontier)
            self._last_beat = self._last_downgrade = now
        elif now - self._last_beat > self._lease_ms // 4:
            self.store.heartbeat_reader(self.shard, self.reader_id)
            self._last_beat = now
        self.frontier = progress
        return ListenEvent(table, progress)

    def next(self, timeout_s: float = 10.0, poll_interval_s: float = 0.01) -> ListenEvent | None:
        """Wait (polling with backoff) up to ``timeout_s`` for the next event."""
        deadline = time.monotonic() + timeout_s
        delay = poll_interval_s
        while True:
            ev = self.poll()
            if ev is not None or self.frontier.is_empty():
                return ev
            if time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def __iter__(self) -> Iterator[ListenEvent]:
        """Events until the shard closes (upper ``[]``); blocks between them."""
        while not self.frontier.is_empty():
            ev = self.next(timeout_s=3600.0)
            if ev is not None:
                yield ev

    def close(self) -> None:
        """Release the listener's read hold."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(ShardFinalized):
                self.store.release_reader(self.shard, self.reader_id)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_shard_store(blob_url: str, consensus_url: str, **kwargs: Any) -> ShardStore:
    """A :class:`ShardStore` over the backends the URLs name (its ``close`` closes them)."""
    return ShardStore.open(blob_url, consensus_url, **kwargs)
