"""A durable timestamp oracle: epoch-millisecond write timestamps that never repeat or go back.

Tables' appends are stamped by :meth:`TimestampOracle.write_ts`; once an
append is durable the controller calls :meth:`TimestampOracle.apply_write`, and
reads at :meth:`TimestampOracle.read_ts` see every applied write (Materialize's
"strict serializable" read timestamp).

Durability without a write per call: the oracle keeps, in a Consensus key, an
*upper bound* on every timestamp it may hand out. When a new timestamp would
pass that bound, it first reserves a window (``window_ms`` past the new
timestamp) with compare-and-set, then hands it out. A restarted oracle starts
at the persisted bound, so it is strictly ahead of everything an earlier
incarnation handed out or applied -- even if the wall clock went backwards.
(So a restarted oracle's ``read_ts`` may lie up to ``window_ms`` ahead of the
clock: every time up to the old bound counts as complete, since no write the
old incarnation handed out can still be applied.)

The record is sealed with its SHA-256 (:mod:`tidegate.runtime.sealed`): a
damaged or edited one is an :class:`OracleError`, never a wrong bound.

Opening an oracle writes a new version (bumping an *epoch*), which fences any
older oracle on the same key: its next reservation fails with
:class:`OracleFenced`. Within an already reserved window a fenced oracle does
not notice; set ``window_ms=0`` to make every call durable (and linearizable
against concurrent oracles) at the price of one Consensus write per timestamp.
Opening beside a predecessor that is still reserving is a race the newcomer
wins by looking again; of two oracles opening at once, the one whose write
lands first wins and the other is fenced. Each record names the incarnation
that wrote it, so an oracle never takes another's record for its own.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable

from tidegate.runtime.platform import wall_ms
from tidegate.spec.shard import Consensus, VersionedData

from .errors import OracleError, OracleFenced
from .sealed import seal, unseal

__all__ = ["DEFAULT_ORACLE_KEY", "TimestampOracle", "decode_oracle_state", "durable_epoch"]

DEFAULT_ORACLE_KEY = "tidegate/oracle"
_FORMAT_VERSION = 1
_TRUNCATE_EVERY = 16
# A takeover loses its compare-and-set only to a predecessor reserving at that moment (at most
# once a window); after this many losses in a row something else is wrong.
_TAKE_OVER_TRIES = 64


def _encode(upper: int, epoch: int, incarnation: str) -> bytes:
    record: dict[str, int | str] = {"version": _FORMAT_VERSION, "upper": upper, "epoch": epoch}
    if incarnation:
        record["incarnation"] = incarnation
    return seal("oracle", json.dumps(record, sort_keys=True).encode())


def _incarnation(data: bytes) -> str:
    """The incarnation that wrote a record :func:`_decode` read (``""``: an older record)."""
    obj = json.loads(unseal("oracle", data))
    value = obj.get("incarnation", "")
    return value if isinstance(value, str) else ""


def _decode(key: str, data: bytes) -> tuple[int, int]:
    try:
        obj = json.loads(unseal("oracle", data))
        if obj.get("version") != _FORMAT_VERSION:
            raise OracleError(f"oracle {key!r}: unsupported state version {obj.get('version')!r}")
        upper, epoch = obj["upper"], obj["epoch"]
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise OracleError(f"oracle {key!r}: unreadable durable state: {e}") from e
    if type(upper) is not int or type(epoch) is not int or upper < 0 or epoch < 0:
        raise OracleError(f"oracle {key!r}: malformed durable state {obj!r}")
    return upper, epoch


def decode_oracle_state(data: bytes, key: str = DEFAULT_ORACLE_KEY) -> tuple[int, int]:
    """A durable oracle record's ``(upper, epoch)`` [OracleError if it is damaged or foreign]."""
    return _decode(key, data)


def durable_epoch(consensus: Consensus, key: str = DEFAULT_ORACLE_KEY) -> int:
    """Blocking: the epoch of the oracle that last wrote ``key`` (``0`` if none ever did): the
    writer epoch of the environment writing now, read without opening (and so fencing) it."""
    head = consensus.head(key)
    return 0 if head is None else _decode(key, head.data)[1]


class TimestampOracle:
    """Hands out strictly increasing, durable write timestamps and tracks the read timestamp.

    Thread-safe. Every method does IO only when a reservation is due (at most
    once per ``window_ms`` of handed-out time, plus once at construction).
    """

    def __init__(
        self,
        consensus: Consensus,
        *,
        key: str = DEFAULT_ORACLE_KEY,
        clock_ms: Callable[[], int] = wall_ms,
        window_ms: int = 1000,
        incarnation: str | None = None,
    ) -> None:
        if type(window_ms) is not int or window_ms < 0:
            raise ValueError(f"window_ms must be a non-negative int, got {window_ms!r}")
        # Every record names the oracle that wrote it: two oracles that open at once from
        # the same head with the same clock would write byte-identical records otherwise,
        # and each would take the other's for its own (both at one epoch: split brain).
        self._incarnation = incarnation if incarnation is not None else uuid.uuid4().hex
        self._consensus = consensus
        self._key = key
        self._clock_ms = clock_ms
        self._window_ms = window_ms
        self._lock = threading.Lock()
        self._reservations = 0
        self._seqno: int | None = None
        self._epoch = 0
        self._upper = 0
        start = self._take_over()
        self._last_write = start
        self._read = start

    def _take_over(self) -> int:
        """Fence the oracle that wrote last (one epoch more than its) and reserve a first window;
        the start point. The predecessor may still be reserving while it is taken over (a
        promotion opens its oracle beside the running writer): losing the compare-and-set to a
        reservation of an *older* epoch only means looking again. Losing to an epoch as new as
        ours means another oracle opened at the same moment and won: this one is fenced."""
        for _ in range(_TAKE_OVER_TRIES):
            head = self._consensus.head(self._key)
            if head is None:
                durable_upper, epoch, seqno = 0, 0, None
            else:
                durable_upper, epoch = _decode(self._key, head.data)
                seqno = head.seqno
            start = max(durable_upper, self._now())
            self._seqno, self._epoch, self._upper = seqno, epoch + 1, durable_upper
            try:
                self._reserve(start + self._window_ms)
            except OracleFenced:
                now = self._consensus.head(self._key)
                if now is None or _decode(self._key, now.data)[1] >= self._epoch:
                    raise
                continue
            return start
        raise OracleFenced(self._key, self._seqno, None)

    @property
    def key(self) -> str:
        """The Consensus key holding this oracle's durable state."""
        return self._key

    @property
    def epoch(self) -> int:
        """This incarnation's number (one more than the previous incarnation's)."""
        return self._epoch

    @property
    def reserved_upper(self) -> int:
        """The durable bound: no timestamp above it has been handed out."""
        return self._upper

    def durable_epoch(self) -> int | None:
        """The epoch of the oracle that last wrote the durable state (one read, no write).

        Larger than :attr:`epoch` once a newer oracle opened on the same key:
        this one is then fenced (an environment uses it as its writer epoch).
        ``None`` if nothing was ever written.
        """
        head = self._consensus.head(self._key)
        return None if head is None else _decode(self._key, head.data)[1]

    def superseded_by(self) -> int | None:
        """The :meth:`durable_epoch` if a newer oracle opened since this one, else ``None``."""
        found = self.durable_epoch()
        return found if found is not None and found > self._epoch else None

    def write_ts(self) -> int:
        """A new write timestamp: ``max(last + 1, clock)``, strictly above all earlier ones.

        Raises :class:`OracleFenced` (nothing handed out) if another oracle took over
        and a reservation was due.
        """
        with self._lock:
            ts = max(self._last_write + 1, self._now())
            if ts > self._upper:
                self._reserve(ts + self._window_ms)
            self._last_write = ts
            return ts

    def write_ts_nowait(self) -> int | None:
        """:meth:`write_ts` when it needs no IO (inside the reserved window), else ``None``.

        For callers on an event loop: the common case is a few instructions
        under a lock, cheaper than a hop to a worker thread; ``None`` means a
        reservation is due, so call :meth:`write_ts` where blocking is allowed.
        """
        with self._lock:
            ts = max(self._last_write + 1, self._now())
            if ts > self._upper:
                return None
            self._last_write = ts
            return ts

    def peek_write_ts(self) -> int:
        """The latest write timestamp handed out (or the start point), without allocating one."""
        with self._lock:
            return self._last_write

    def read_ts(self) -> int:
        """The latest applied write: reads here see every applied write. Never decreases."""
        with self._lock:
            return self._read

    def apply_write(self, ts: int) -> None:
        """Record that writes at ``ts`` are durable: ``read_ts`` moves up to ``ts``.

        A ``ts`` beyond every handed-out timestamp also moves the write timestamp
        (reserving durably first), so later writes stay above later reads.
        """
        if type(ts) is not int or ts < 0:
            raise OracleError(f"apply_write needs a non-negative int timestamp, got {ts!r}")
        with self._lock:
            if ts > self._upper:
                self._reserve(ts + self._window_ms)
            if ts > self._last_write:
                self._last_write = ts
            if ts > self._read:
                self._read = ts

    def apply_write_nowait(self, ts: int) -> bool:
        """:meth:`apply_write` when it needs no IO (``ts`` within the reserved window).

        Returns whether it was applied; ``False`` (nothing changed) means a
        reservation is due: call :meth:`apply_write` where blocking is allowed.
        """
        if type(ts) is not int or ts < 0:
            raise OracleError(f"apply_write needs a non-negative int timestamp, got {ts!r}")
        with self._lock:
            if ts > self._upper:
                return False
            if ts > self._last_write:
                self._last_write = ts
            if ts > self._read:
                self._read = ts
            return True

    def _now(self) -> int:
        now = self._clock_ms()
        if type(now) is not int:
            raise OracleError(f"clock_ms must return an int, got {now!r}")
        return max(now, 0)

    def _reserve(self, upper: int) -> None:
        """Durably raise the bound to ``upper`` (compare-and-set); state unchanged on failure."""
        new_seqno = 0 if self._seqno is None else self._seqno + 1
        data = _encode(upper, self._epoch, self._incarnation)
        try:
            ok = self._consensus.compare_and_set(
                self._key, self._seqno, VersionedData(new_seqno, data)
            )
        except Exception:
            # The outcome is unknown: look (if that fails too, nothing changed and the error stands).
            head = self._consensus.head(self._key)
            if head is None or head.seqno != new_seqno or head.data != data:
                raise
            ok = True
        if not ok:
            head = self._consensus.head(self._key)
            if head is not None and self._reservations and head.seqno == new_seqno:
                durable_upper, epoch = _decode(self._key, head.data)
                mine = _incarnation(head.data) == self._incarnation
                if epoch == self._epoch and mine and head.data != data:
                    # An earlier reservation of this oracle landed though its answer was lost
                    # and looking failed too (an outage): its epoch is ours, and a newer oracle
                    # writes a larger one. Take it as done and reserve from there.
                    self._seqno, self._upper = new_seqno, max(self._upper, durable_upper)
                    if upper > self._upper:
                        self._reserve(upper)
                    return
            if head is None or head.seqno != new_seqno or head.data != data:
                raise OracleFenced(self._key, self._seqno, None if head is None else head.seqno)
            # An earlier attempt whose answer was lost landed this very reservation.
        self._seqno, self._upper = new_seqno, upper
        self._reservations += 1
        if self._reservations % _TRUNCATE_EVERY == 0:
            # Housekeeping only: a racing oracle may have moved the head meanwhile.
            with contextlib.suppress(Exception):
                self._consensus.truncate(self._key, new_seqno)
