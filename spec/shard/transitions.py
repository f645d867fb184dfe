"""Pure transitions of a shard's state: each validates, then returns a new state.

Every function takes a :class:`ShardState` (plus explicit arguments such as
``now_ms``; nothing here reads a clock) and either raises a typed error from
:mod:`tidegate.spec.errors` — leaving nothing changed, as states are immutable —
or returns the successor state with ``seqno + 1``. The shard store commits the
successor with a compare-and-set on the sequence number and retries on a race.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import (
    AppendGap,
    FinalizationNotReady,
    InvalidShardBounds,
    InvalidUpdates,
    OpaqueMismatch,
    RequestsApplied,
    SchemaMismatch,
    ShardFinalized,
    SinceRegression,
    UnknownReader,
    UpperMismatch,
)
from ..frontier import Antichain
from .state import (
    REQUEST_IDS_MAX,
    REQUEST_RETENTION,
    BatchMeta,
    CriticalReader,
    LeasedReader,
    ShardState,
    WriterState,
)

__all__ = [
    "AppendOutcome",
    "append",
    "append_lower",
    "check_append_times",
    "compare_and_append",
    "compare_and_downgrade_since",
    "downgrade_since",
    "expire_reader",
    "expire_readers",
    "finalize",
    "heartbeat_reader",
    "recorded_requests",
    "register_critical_reader",
    "register_leased_reader",
    "register_schema",
]

V = TypeVar("V")


def _with(m: Mapping[str, V], key: str, value: V) -> dict[str, V]:
    out = dict(m)
    out[key] = value
    return out


def _without(m: Mapping[str, V], key: str) -> dict[str, V]:
    return {k: v for k, v in m.items() if k != key}


def _next(state: ShardState, **changes: object) -> ShardState:
    return dataclasses.replace(state, seqno=state.seqno + 1, **changes)  # type: ignore[arg-type]


def _check_live(state: ShardState) -> None:
    if state.finalized:
        raise ShardFinalized(state.shard, "the shard is finalized")


def _recomputed_since(
    state: ShardState,
    leased: Mapping[str, LeasedReader],
    critical: Mapping[str, CriticalReader],
) -> Antichain:
    """The meet of all readers' sinces, never behind the current since; unchanged with no readers."""
    sinces = [r.since for r in leased.values()] + [c.since for c in critical.values()]
    if not sinces:
        return state.since
    return state.since.join(Antichain.meet_all(sinces))


# -- schema ---------------------------------------------------------------------------


def register_schema(state: ShardState, schema: str) -> ShardState:
    """Record the shard's row schema on first use; the same schema again is a no-op (same state)."""
    _check_live(state)
    if state.schema is None:
        return _next(state, schema=schema)
    if state.schema != schema:
        raise SchemaMismatch(state.shard, "the shard was created with another schema")
    return state


# -- writes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """The result of :func:`compare_and_append` and :func:`append`.

    ``upper`` is the shard's upper after the append. ``already_committed`` is
    true when the idempotency token shows that this very append was committed
    before (a retry after an unknown outcome); then ``state`` is the input
    state unchanged and the caller's batch is unused. A no-op (an empty
    interval without updates; a truncating append the shard already covers)
    also returns the input state itself, with ``already_committed`` false.
    """

    state: ShardState
    upper: Antichain
    already_committed: bool


def _check_batch_shape(state: ShardState, batch: BatchMeta, has_updates: bool) -> None:
    """[InvalidUpdates] for a negative length, or a non-empty batch without time bounds."""
    if batch.length < 0:
        raise InvalidUpdates(state.shard, f"batch length {batch.length} is negative")
    if has_updates and (batch.min_time is None or batch.max_time is None):
        raise InvalidUpdates(state.shard, "a non-empty batch needs its time bounds")


def check_append_times(
    shard: str,
    min_time: int | None,
    max_time: int | None,
    expected_upper: Antichain,
    new_upper: Antichain,
) -> None:
    """Raise unless ``expected_upper <= new_upper`` and every time lies in ``[expected_upper, new_upper)``.

    ``min_time``/``max_time`` bound the appended times (``None`` for no updates).
    An empty interval (``expected_upper == new_upper``) holds no time, so only an
    append without updates may have one (it moves nothing: persist's empty
    append, reference §3.2 rule 4); with updates it is :class:`InvalidShardBounds`,
    as is a new upper behind (or incomparable to) the expected one.
    """
    if not expected_upper <= new_upper:
        raise InvalidShardBounds(
            shard, f"new upper {new_upper!r} is behind the expected upper {expected_upper!r}"
        )
    if min_time is None or max_time is None:
        return
    if expected_upper == new_upper:
        raise InvalidShardBounds(
            shard,
            f"updates need a new upper beyond the expected upper {expected_upper!r}: "
            "the interval between them is empty",
        )
    for t in (min_time, max_time):
        if type(t) is not int or t < 0:
            raise InvalidUpdates(shard, f"time {t!r} is not a non-negative int")
    if not expected_upper.less_equal(min_time):
        raise InvalidUpdates(
            shard, f"update at time {min_time} is before the expected upper {expected_upper!r}"
        )
    if new_upper.less_equal(max_time):
        raise InvalidUpdates(
            shard, f"update at time {max_time} is not before the new upper {new_upper!r}"
        )


def compare_and_append(
    state: ShardState,
    batch: BatchMeta | None,
    expected_upper: Antichain,
    new_upper: Antichain,
    *,
    writer_id: str,
    token: str | None,
    now_ms: int,
    requests: Mapping[str, int] | None = None,
) -> AppendOutcome:
    """Append ``batch`` (``None`` or length 0: no updates) if the upper is ``expected_upper``.

    Checks, in order: the shard is live; ``new_upper`` is not behind
    ``expected_upper`` (:func:`check_append_times`); the batch's bounds and
    times lie in ``[expected_upper, new_upper)``; a retry of the writer's last
    committed token succeeds without appending again; no request id of
    ``requests`` is recorded already (else :class:`RequestsApplied`, whatever
    the upper); the upper must equal ``expected_upper`` (else
    :class:`UpperMismatch` with the actual one).

    ``requests`` maps client request ids to the time their updates are written
    at: they are recorded in the new state with the batch, in the same
    transition, so the record and the data land together or not at all (the
    newest :data:`~.state.REQUEST_IDS_MAX` within
    :data:`~.state.REQUEST_RETENTION` are kept).

    An append without updates whose ``new_upper`` is its ``expected_upper``
    succeeds as a no-op when the upper is that (persist's semantics): it
    returns ``state`` itself, so the store commits nothing, and the check of
    the upper against the version read is what linearizes it.
    """
    _check_live(state)
    has_updates = batch is not None and batch.length > 0
    if batch is not None:
        if batch.lower != expected_upper or batch.upper != new_upper:
            raise InvalidUpdates(
                state.shard,
                f"batch bounds [{batch.lower!r}, {batch.upper!r}) differ from the append's "
                f"[{expected_upper!r}, {new_upper!r})",
            )
        _check_batch_shape(state, batch, has_updates)
        check_append_times(
            state.shard,
            batch.min_time if has_updates else None,
            batch.max_time if has_updates else None,
            expected_upper,
            new_upper,
        )
    else:
        check_append_times(state.shard, None, None, expected_upper, new_upper)
    if token is not None:
        w = state.writers.get(writer_id)
        if w is not None and w.last_token == token and w.last_upper == new_upper:
            return AppendOutcome(state, new_upper, already_committed=True)
    if requests:
        applied = {r: state.requests[r] for r in requests if r in state.requests}
        if applied:
            raise RequestsApplied(state.shard, applied)
    if state.upper != expected_upper:
        raise UpperMismatch(state.shard, expected_upper, state.upper)
    if expected_upper == new_upper and not requests:
        return AppendOutcome(state, new_upper, already_committed=False)
    batches = state.batches
    if batch is not None and has_updates:
        # A fresh batch is exact: nothing in it has been advanced.
        batches = (*batches, dataclasses.replace(batch, since=batch.lower))
    writer = WriterState(last_token=token, last_upper=new_upper, last_heartbeat_ms=now_ms)
    changes: dict[str, object] = {}
    if requests:
        changes["requests"] = recorded_requests(state.requests, requests)
    new = _next(
        state,
        upper=new_upper,
        batches=batches,
        writers=_with(state.writers, writer_id, writer),
        **changes,
    )
    return AppendOutcome(new, new_upper, already_committed=False)


def recorded_requests(old: Mapping[str, int], new: Mapping[str, int]) -> dict[str, int]:
    """``old`` with ``new`` added, keeping the newest :data:`~.state.REQUEST_IDS_MAX` entries
    whose time is within :data:`~.state.REQUEST_RETENTION` of the newest (ties by id)."""
    merged = {**old, **new}
    newest = max(merged.values())
    kept = [(t, r) for r, t in merged.items() if t >= newest - REQUEST_RETENTION]
    kept.sort(reverse=True)
    return {r: t for t, r in kept[:REQUEST_IDS_MAX]}


def append_lower(state: ShardState, lower: Antichain, upper: Antichain) -> Antichain | None:
    """Where a truncating append of ``[lower, upper)`` starts against ``state`` (see :func:`append`).

    The shard's upper ``c`` when ``lower <= c < upper`` (the updates before ``c``
    are there already), ``None`` when ``upper <= c`` (all of them are: nothing
    to append). Raises :class:`AppendGap` when ``c`` is before (or incomparable
    to) ``lower``, and :class:`ShardFinalized` for a finalized shard.
    """
    _check_live(state)
    c = state.upper
    if upper <= c:
        return None
    if not lower <= c:
        raise AppendGap(state.shard, lower, c)
    return c


def append(
    state: ShardState,
    batch: BatchMeta | None,
    lower: Antichain,
    upper: Antichain,
    *,
    writer_id: str,
    now_ms: int,
) -> AppendOutcome:
    """Persist's ``append`` (reference §3.2): add the updates of ``[lower, upper)`` the shard lacks.

    For a writer that owns the shard, or for several that write the same
    definite updates (replicas of one dataflow): racing, they store each update
    exactly once. ``batch`` (``None`` or length 0: no updates) holds the
    updates at times in ``[batch.lower, upper)``, where ``batch.lower`` is
    ``lower``, or a later shard upper the caller truncated them to. Against the
    shard's upper ``c`` (:func:`append_lower`):

    * ``upper <= c``: the shard has them all: a no-op returning ``state`` itself;
    * ``lower <= c < upper``: the updates before ``c`` are there already; the
      rest is appended as the batch ``[c, upper)`` and the upper becomes
      ``upper``. The batch must then start at or before ``c`` and hold nothing
      before ``c``; if it does not, :class:`UpperMismatch` (``actual_upper = c``)
      asks the caller to truncate its updates to ``c`` and call again;
    * ``c`` before ``lower``: :class:`AppendGap`, nothing changes.

    With ``lower == c`` it is :func:`compare_and_append` without a token,
    exactly. A retry after an unknown outcome is safe without a token: if the
    first attempt landed, the shard's upper is at or beyond ``upper`` and the
    retry is a no-op.
    """
    _check_live(state)
    has_updates = batch is not None and batch.length > 0
    if not lower <= upper:
        raise InvalidShardBounds(
            state.shard, f"upper {upper!r} is behind the append's lower {lower!r}"
        )
    start = lower
    if batch is not None:
        if batch.upper != upper or not lower <= batch.lower:
            raise InvalidUpdates(
                state.shard,
                f"batch bounds [{batch.lower!r}, {batch.upper!r}) are not within the append's "
                f"[{lower!r}, {upper!r})",
            )
        _check_batch_shape(state, batch, has_updates)
        start = batch.lower
    min_time = batch.min_time if batch is not None and has_updates else None
    max_time = batch.max_time if batch is not None and has_updates else None
    check_append_times(state.shard, min_time, max_time, start, upper)
    c = append_lower(state, lower, upper)
    if c is None:
        return AppendOutcome(state, state.upper, already_committed=False)
    if not start <= c or (min_time is not None and not c.less_equal(min_time)):
        # The batch holds updates the shard has (before c), or lacks some it needs
        # (between c and the batch's start): the caller truncates at c and retries.
        raise UpperMismatch(state.shard, start, c)
    moved = None if batch is None or not has_updates else dataclasses.replace(batch, lower=c)
    return compare_and_append(
        state, moved, c, upper, writer_id=writer_id, token=None, now_ms=now_ms
    )


# -- readers --------------------------------------------------------------------------


def register_leased_reader(
    state: ShardState, reader_id: str, *, now_ms: int, lease_ms: int
) -> ShardState:
    """Register a leased reader holding the shard's current since (re-registering renews it)."""
    _check_live(state)
    if lease_ms <= 0:
        raise ValueError(f"lease_ms must be positive, got {lease_ms}")
    old = state.leased_readers.get(reader_id)
    since = state.since if old is None else old.since
    reader = LeasedReader(since=since, last_heartbeat_ms=now_ms, lease_ms=lease_ms)
    return _next(state, leased_readers=_with(state.leased_readers, reader_id, reader))


def register_critical_reader(state: ShardState, reader_id: str, *, opaque: int = 0) -> ShardState:
    """Register a critical reader at the shard's since; an existing one is kept as it is."""
    _check_live(state)
    if reader_id in state.critical_readers:
        return state
    reader = CriticalReader(since=state.since, opaque=opaque)
    return _next(state, critical_readers=_with(state.critical_readers, reader_id, reader))


def heartbeat_reader(state: ShardState, reader_id: str, *, now_ms: int) -> ShardState:
    """Renew a leased reader's lease (critical readers need none)."""
    _check_live(state)
    r = state.leased_readers.get(reader_id)
    if r is None:
        if reader_id in state.critical_readers:
            return state
        raise UnknownReader(state.shard, f"no reader {reader_id!r}")
    new = dataclasses.replace(r, last_heartbeat_ms=now_ms)
    return _next(state, leased_readers=_with(state.leased_readers, reader_id, new))


def _check_downgrade(state: ShardState, reader_id: str, old: Antichain, new: Antichain) -> None:
    if not old <= new:
        raise SinceRegression(
            state.shard, f"reader {reader_id!r} cannot move its since from {old!r} to {new!r}"
        )


def downgrade_since(
    state: ShardState, reader_id: str, new_since: Antichain, *, now_ms: int
) -> ShardState:
    """Move a reader's since forward to ``new_since`` and recompute the shard's since.

    Also heartbeats a leased reader. Moving backwards raises :class:`SinceRegression`;
    an unknown (or expired) reader raises :class:`UnknownReader`.
    """
    _check_live(state)
    leased = state.leased_readers.get(reader_id)
    if leased is not None:
        _check_downgrade(state, reader_id, leased.since, new_since)
        new_leased = _with(
            state.leased_readers,
            reader_id,
            LeasedReader(since=new_since, last_heartbeat_ms=now_ms, lease_ms=leased.lease_ms),
        )
        since = _recomputed_since(state, new_leased, state.critical_readers)
        return _next(state, leased_readers=new_leased, since=since)
    critical = state.critical_readers.get(reader_id)
    if critical is None:
        raise UnknownReader(state.shard, f"no reader {reader_id!r}")
    return compare_and_downgrade_since(
        state, reader_id, critical.opaque, critical.opaque, new_since
    )


def compare_and_downgrade_since(
    state: ShardState,
    reader_id: str,
    expected_opaque: int,
    new_opaque: int,
    new_since: Antichain,
) -> ShardState:
    """Downgrade a critical reader's since if its opaque is ``expected_opaque``; store ``new_opaque``."""
    _check_live(state)
    critical = state.critical_readers.get(reader_id)
    if critical is None:
        raise UnknownReader(state.shard, f"no critical reader {reader_id!r}")
    if critical.opaque != expected_opaque:
        raise OpaqueMismatch(state.shard, expected_opaque, critical.opaque)
    _check_downgrade(state, reader_id, critical.since, new_since)
    new_critical = _with(
        state.critical_readers, reader_id, CriticalReader(since=new_since, opaque=new_opaque)
    )
    since = _recomputed_since(state, state.leased_readers, new_critical)
    return _next(state, critical_readers=new_critical, since=since)


def expire_reader(state: ShardState, reader_id: str) -> ShardState:
    """Release a reader (leased or critical): its hold no longer counts. Unknown ids are a no-op."""
    _check_live(state)
    if reader_id not in state.leased_readers and reader_id not in state.critical_readers:
        return state
    leased = _without(state.leased_readers, reader_id)
    critical = _without(state.critical_readers, reader_id)
    since = _recomputed_since(state, leased, critical)
    return _next(state, leased_readers=leased, critical_readers=critical, since=since)


def expire_readers(
    state: ShardState, *, now_ms: int, writer_lease_ms: int = 3_600_000
) -> ShardState:
    """Drop leased readers whose lease ran out before ``now_ms`` and writers idle for ``writer_lease_ms``.

    Unlike persist (reference §5), the shard's since is recomputed at once.
    Returns the same state when nothing expired.
    """
    _check_live(state)
    leased = {k: r for k, r in state.leased_readers.items() if not r.expired(now_ms)}
    writers = {
        k: w for k, w in state.writers.items() if w.last_heartbeat_ms + writer_lease_ms >= now_ms
    }
    if len(leased) == len(state.leased_readers) and len(writers) == len(state.writers):
        return state
    since = _recomputed_since(state, leased, state.critical_readers)
    return _next(state, leased_readers=leased, writers=writers, since=since)


# -- finalization ---------------------------------------------------------------------


def finalize(state: ShardState, *, force: bool = False) -> ShardState:
    """Seal a dropped shard: ``since = upper = []``, no batches, readers or writers.

    Without ``force`` the shard must already have ``since = upper = []``
    (:class:`FinalizationNotReady` otherwise); ``force`` closes it regardless,
    releasing every reader. Finalizing a finalized shard returns it unchanged.
    The caller deletes the blobs of ``state.batches`` after committing.
    """
    if state.finalized:
        return state
    if not force and not (state.since.is_empty() and state.upper.is_empty()):
        raise FinalizationNotReady(
            state.shard,
            f"since {state.since!r} and upper {state.upper!r} must both be [] to finalize",
        )
    return _next(
        state,
        since=Antichain.empty(),
        upper=Antichain.empty(),
        batches=(),
        leased_readers={},
        critical_readers={},
        writers={},
        finalized=True,
    )
