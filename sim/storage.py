"""The simulated disk: durable Consensus and Blob stores, reached through faulty per-process clients.

:class:`SimDisk` is the world's durable storage: one versioned log per
consensus key and one blob namespace, with the semantics of the spec's
in-memory stores. It also keeps everything ever written (deleted blobs and
truncated versions included), so the checkers can read what really landed
(:mod:`.truth`), and it tells watchers when a key changes (the consensus
clients' notifications, as PostgreSQL's ``LISTEN``/``NOTIFY`` gives them).

Processes reach it only through a :class:`ConsensusClient` and a
:class:`BlobClient` of their own, which implement the runtime's
``Consensus`` and ``Blob`` contracts -- so the production shard store,
catalog and timestamp oracle run over them unmodified -- and inject the
faults of :class:`StorageFaults`:

* a dead process's calls raise :class:`~.process.ProcessKilled`;
* while a failure window is open, a call raises :class:`StorageOutage`
  (an ``OSError``) either before it applies or *after* (its outcome is then
  unknown to the caller, as with a timed-out request);
* an armed crash point kills the process at its next matching call, before
  or after the call applies; a torn blob write leaves a truncated object
  under the key before the process dies;
* a full disk refuses every write (``StorageUnavailable``, ``ENOSPC``, as
  the file and SQLite backends raise it), nothing applied;
* a slow fsync stalls some writes: the stall is charged to the process's
  next answer (:meth:`StorageFaults.take_stall`);
* bit rot: a committed blob or consensus row reads back with a byte flipped
  (:meth:`SimDisk.rot_blob`, :meth:`SimDisk.rot_row`) until it is repaired or
  overwritten; the disk's own record (what the checkers read) stays whole;
* a lost record: a consensus key vanishes (:meth:`SimDisk.lose`) and may come
  back (:meth:`SimDisk.recover`) unless something was written there since;
* a consensus client is ``Watchable`` (the production shard store then waits
  for notifications rather than polling): a commit to a key notifies the
  live watchers of every process at once (their hosts add the latency of
  the step it wakes); while a consensus failure window is open,
  notifications are lost (the product must still notice, by its fallback
  polls), and a dead incarnation's watches end with it.

Latency is not here: the controller's platform and the replicas' IO add it
around whole calls (:mod:`.platform`, :mod:`.replica`).
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field

from tidegate.spec.errors import StorageUnavailable
from tidegate.spec.shard import (
    BlobMeta,
    MemoryBlob,
    MemoryConsensus,
    ShardState,
    VersionedData,
    decode_state,
)

from .choices import ChoiceSource
from .process import ProcessKilled, SimProcess

__all__ = [
    "CRASH_TARGETS",
    "BlobClient",
    "ConsensusClient",
    "CrashPoint",
    "SimDisk",
    "StorageFaults",
    "StorageOutage",
]

CATALOG_KEY = "tidegate/catalog"
ORACLE_KEY = "tidegate/oracle"

CRASH_TARGETS = ("append", "cas", "catalog", "oracle", "blob", "restore")
"""Where an armed controller crash point fires: a shard append (its commit), any consensus
compare-and-set, a catalog write, an oracle reservation, a blob write, or any storage call
while the controller restores its state. (A storage replica's crash points may also name
``sink_commit``, the compare-and-set of a simulated sink target (:mod:`.sink_target`), and
``remap_write`` or ``data_write``, the commit of a source's bindings or data.)"""


class StorageOutage(OSError):
    """A simulated storage failure: the backend did not answer (the call may have applied)."""


Watcher = Callable[[str], None]


class SimDisk:
    """Durable storage shared by every process (see the module docstring)."""

    def __init__(self) -> None:
        self.consensus = MemoryConsensus()
        self.blobs = MemoryBlob()
        self.versions: dict[str, list[VersionedData]] = {}
        """Every version ever committed per key, truncated ones included (for the checkers)."""
        self.deleted: dict[str, bytes] = {}
        """Deleted blobs' last contents by key (for the checkers)."""
        self.commit_seq: dict[str, list[int]] = {}
        """For each version in :attr:`versions`, its place in the order of every commit to any
        key (for the checkers: which of two shards' writes landed first)."""
        self._commits = 0
        self._watchers: dict[str, list[Watcher]] = {}
        self.cas_ok = 0
        self.cas_lost = 0
        self.rotten_blobs: dict[str, bytes] = {}
        """What a rotten blob reads back as, by key (until repaired or overwritten)."""
        self.rotten_rows: dict[tuple[str, int], bytes] = {}
        """What a rotten consensus row reads back as, by (key, seqno)."""
        self.lost: dict[str, list[VersionedData]] = {}
        """Consensus keys that vanished, with the versions they held (see :meth:`lose`)."""
        self.rot_reads: Callable[[str, str, bytes], None] = lambda what, key, data: None
        """Told ``("blob" | "consensus", key, bytes)`` whenever a process reads rotten bytes."""

    def blob(self, key: str) -> bytes | None:
        """A blob's bytes, even if deleted since (for the checkers)."""
        data = self.blobs.get(key)
        return data if data is not None else self.deleted.get(key)

    def watch(self, key: str, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher(key)`` after every commit to ``key``; returns the cancel function."""
        watchers = self._watchers.setdefault(key, [])
        watchers.append(watcher)

        def cancel() -> None:
            if watcher in watchers:
                watchers.remove(watcher)

        return cancel

    # -- the operations a client forwards ------------------------------------------------
    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        ok = self.consensus.compare_and_set(key, expected, new)
        if not ok:
            self.cas_lost += 1
            return False
        self.cas_ok += 1
        self.versions.setdefault(key, []).append(VersionedData(new.seqno, bytes(new.data)))
        self._commits += 1
        self.commit_seq.setdefault(key, []).append(self._commits)
        for watcher in list(self._watchers.get(key, ())):
            watcher(key)
        return True

    def delete_blob(self, key: str) -> int | None:
        data = self.blobs.get(key)
        if data is not None:
            self.deleted[key] = data
        self.rotten_blobs.pop(key, None)
        return self.blobs.delete(key)

    def set_blob(self, key: str, value: bytes) -> None:
        self.rotten_blobs.pop(key, None)  # a new object under the key: whole again
        self.blobs.set(key, bytes(value))

    # -- what processes read (bit rot in the way) -------------------------------------------
    def read_blob(self, key: str) -> bytes | None:
        rotten = self.rotten_blobs.get(key)
        if rotten is not None:
            self.rot_reads("blob", key, rotten)
            return rotten
        return self.blobs.get(key)

    def _row(self, key: str, v: VersionedData | None) -> VersionedData | None:
        if v is None or not self.rotten_rows:
            return v
        rotten = self.rotten_rows.get((key, v.seqno))
        if rotten is None:
            return v
        self.rot_reads("consensus", key, rotten)
        return VersionedData(v.seqno, rotten)

    def read_head(self, key: str) -> VersionedData | None:
        return self._row(key, self.consensus.head(key))

    def read_scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        out = self.consensus.scan(key, from_seqno, limit)
        if not self.rotten_rows:
            return out
        return [v for v in (self._row(key, v) for v in out) if v is not None]

    # -- faults of the medium ----------------------------------------------------------------
    @staticmethod
    def _flip(data: bytes, at: int, bit: int) -> bytes:
        out = bytearray(data)
        out[at % len(out)] ^= 1 << (bit % 8)
        return bytes(out)

    def rot_blob(self, key: str, at: int, bit: int) -> bool:
        """Blob ``key`` reads back with bit ``bit`` of byte ``at`` flipped; False if it is gone."""
        data = self.blobs.get(key)
        if not data:
            return False
        self.rotten_blobs[key] = self._flip(data, at, bit)
        return True

    def rot_row(self, key: str, at: int, bit: int) -> bool:
        """Consensus ``key``'s head row reads back with a bit flipped; False if it has none."""
        head = self.consensus.head(key)
        if head is None or not head.data:
            return False
        self.rotten_rows[(key, head.seqno)] = self._flip(head.data, at, bit)
        return True

    def repair(self) -> None:
        """Every rotten object and row reads back whole again (a redundant copy restored it)."""
        self.rotten_blobs.clear()
        self.rotten_rows.clear()

    def lose(self, key: str) -> bool:
        """Consensus ``key`` vanishes with every version it held; False if it held none."""
        versions = self.consensus._log.pop(key, None)
        if not versions:
            return False
        self.lost[key] = versions
        return True

    def recover(self, key: str) -> bool:
        """A lost key comes back -- unless something was written under it meanwhile (then what
        it held stays lost, and False)."""
        versions = self.lost.pop(key, None)
        if versions is None or self.consensus.head(key) is not None:
            return False
        self.consensus._log[key] = versions
        return True


@dataclass
class CrashPoint:
    """An armed crash: ``process`` dies at its next call matching ``target``.

    ``after``: the call applies first; ``torn``: a blob write leaves a prefix
    of its bytes behind.
    """

    process: str
    target: str
    after: bool
    torn: bool = False


@dataclass
class StorageFaults:
    """The storage faults in force now (the world opens and closes them as the plan says)."""

    source: ChoiceSource
    consensus_failing: int = 0
    """Open consensus failure windows (a call then fails with probability 1/3)."""
    blob_failing: int = 0
    slow_factor: int = 1
    """Storage latency multiplier (a "slow storage" fault)."""
    crash_points: list[CrashPoint] = field(default_factory=list)
    restoring: set[str] = field(default_factory=set)
    """Processes restoring their state now (for ``restore`` crash points)."""
    count: Callable[[str], None] = lambda name: None
    on_crash: Callable[[CrashPoint], None] = lambda point: None
    shard_kind: Callable[[str], str] = lambda key: ""
    """What shard ``key`` is to the storage world: ``"remap"``, ``"data"`` (a source's) or ``""``
    (for the ``remap_write`` and ``data_write`` crash points)."""
    scripted: dict[str, list[str | None]] = field(default_factory=dict)
    """Outcomes forced on the next calls, by operation (``"consensus compare-and-set"``,
    ``"blob set"``...): ``"before"``, ``"after"`` or ``None``, consumed in order (for tests)."""
    disk_full: int = 0
    """Open full-disk windows: every write is refused (``ENOSPC``) while any is open."""
    fill_at_catalog: list[int] = field(default_factory=list)
    """Armed full-disk windows (their durations, ms) that open once the next catalog commit
    lands (a full disk's ``catalog`` target): :attr:`on_fill` opens one."""
    on_fill: Callable[[int], None] = lambda duration_ms: None
    fsync_stall_ms: int = 0
    """While non-zero, a quarter of the writes stall this long (a slow fsync)."""
    stalls: dict[str, int] = field(default_factory=dict)
    """Stall owed by each process (by name), charged to its next answer."""
    stop_points: list[CrashPoint] = field(default_factory=list)
    """Armed stops: ``process`` is stopped once its blocking call in which a write matching
    ``target`` applied returns, before the answer is back (its platform calls :meth:`take_stop`)."""
    stopping: dict[str, CrashPoint] = field(default_factory=dict)
    """Stops that struck inside a call, by process: taken when the call returns."""
    on_stop: Callable[[CrashPoint], None] = lambda point: None

    def take_stop(self, process: str) -> None:
        """``process``'s blocking call returns: an armed stop that struck inside it stops it now."""
        point = self.stopping.pop(process, None) if self.stopping else None
        if point is not None:
            self.on_stop(point)

    def refuse_full(self, kind: str, key: str, op: str) -> None:
        """Raise the full disk's refusal of a write, if the disk is full."""
        if self.disk_full:
            self.count("full_disk_refused")
            raise StorageUnavailable(
                key, kind, key, op, "No space left on device (errno 28)", errno=errno.ENOSPC
            )

    def fsync(self, process: str) -> None:
        """A write of ``process`` went to disk: maybe it stalls (a slow fsync)."""
        if self.fsync_stall_ms and self.source.integer(0, 3) == 0:
            self.stalls[process] = self.stalls.get(process, 0) + self.fsync_stall_ms
            self.count("slow_fsync_stalled")

    def take_stall(self, process: str) -> int:
        """The stall ``process`` owes (ms), now paid."""
        return self.stalls.pop(process, 0) if self.stalls else 0

    def _fail(self, kind: str, op: str = "") -> str | None:
        """``"before"``, ``"after"`` or ``None``: whether (and when) this call fails."""
        script = self.scripted.get(op)
        if script:
            return script.pop(0)
        open_windows = self.consensus_failing if kind == "consensus" else self.blob_failing
        if not open_windows or self.source.integer(0, 2) != 0:
            return None
        when = "after" if self.source.integer(0, 1) else "before"
        self.count(f"storage_{kind}_failed_{when}")
        return when

    def _crash(
        self, process: SimProcess, op: str, key: str, matches: Callable[[str], bool]
    ) -> CrashPoint | None:
        for point in self.crash_points:
            if point.process != process.name:
                continue
            target = point.target
            hit = (target == "restore" and process.name in self.restoring) or (
                target != "restore" and matches(target)
            )
            if hit:
                self.crash_points.remove(point)
                self.count(f"crash_point_{target}")
                self.on_crash(point)
                return point
        return None


def _states(
    key: str, new: VersionedData, previous: VersionedData | None
) -> tuple[ShardState, ShardState] | None:
    """The shard states before and after a commit to shard ``key`` (``None``: not a shard's
    state commit that follows another, or undecodable)."""
    if previous is None or "/" in key:
        return None
    try:
        return decode_state(key, previous.seqno, previous.data), decode_state(
            key, new.seqno, new.data
        )
    except Exception:
        return None


def _is_append(key: str, new: VersionedData, previous: VersionedData | None) -> bool:
    """Whether a commit to shard ``key`` moves its upper (an append, not a reader's bookkeeping)."""
    states = _states(key, new, previous)
    return states is not None and states[1].upper != states[0].upper


def _appends_data(key: str, new: VersionedData, previous: VersionedData | None) -> bool:
    """Whether a commit to shard ``key`` appends updates (a client's append, not a tick)."""
    states = _states(key, new, previous)
    if states is None:
        return False
    before, after = states
    return after.upper != before.upper and any(
        b.length and b.lower == before.upper for b in after.batches
    )


class _Client:
    local = True
    """The simulated disk stands for the controller's own disk (SQLite and files), so the
    runtime's small commits go through the platform's brief calls here too
    (``ShardStore.local``; the simulator runs those as it runs every call)."""

    def __init__(
        self, disk: SimDisk, process: SimProcess, faults: StorageFaults, kind: str
    ) -> None:
        self.disk = disk
        self.process = process
        self.faults = faults
        self._kind = kind

    def _enter(self, op: str) -> str | None:
        self.process.check(op)
        when = self.faults._fail(self._kind, op)
        if when == "before":
            raise StorageOutage(f"simulated {self._kind} outage: {op} was not applied")
        return when

    def _leave(self, op: str, when: str | None) -> None:
        if when == "after":
            raise StorageOutage(f"simulated {self._kind} outage: no answer to {op}")

    def _killed(self, op: str) -> ProcessKilled:
        self.process.die()
        return ProcessKilled(self.process.name, op)


class ConsensusClient(_Client):
    """One process's view of the disk's consensus (the runtime's ``Consensus`` contract)."""

    def __init__(self, disk: SimDisk, process: SimProcess, faults: StorageFaults) -> None:
        super().__init__(disk, process, faults, "consensus")

    def head(self, key: str) -> VersionedData | None:
        when = self._enter("consensus head")
        head = self.disk.read_head(key)
        self._leave("consensus head", when)
        return head

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        when = self._enter("consensus compare-and-set")

        def matches(target: str) -> bool:
            if target == "cas":
                return True
            if target == "catalog":
                return key == CATALOG_KEY
            if target == "oracle":
                return key == ORACLE_KEY
            if target == "append":
                return _is_append(key, new, self.disk.consensus.head(key))
            if target == "sink_commit":
                return key.startswith("sinks/")
            if target in ("remap_write", "data_write"):
                return self.faults.shard_kind(key) == target[:-6] and _is_append(
                    key, new, self.disk.consensus.head(key)
                )
            return False

        point = self.faults._crash(self.process, "cas", key, matches)
        if point is not None and not point.after:
            raise self._killed(f"compare-and-set of {key}")
        self.faults.refuse_full("consensus", key, "compare-and-set")
        previous = self.disk.consensus.head(key) if self.faults.stop_points else None
        ok = self.disk.compare_and_set(key, expected, new)
        if ok:
            self.faults.fsync(self.process.name)
            if key == CATALOG_KEY and self.faults.fill_at_catalog:
                self.faults.on_fill(self.faults.fill_at_catalog.pop(0))
            if self.faults.stop_points:
                self._stop_after(key, new, previous)
        if point is not None:
            raise self._killed(f"compare-and-set of {key} (applied: {ok})")
        self._leave("consensus compare-and-set", when)
        return ok

    def _stop_after(self, key: str, new: VersionedData, previous: VersionedData | None) -> None:
        """An armed stop of this process at an append's commit strikes now (it just applied)."""
        faults = self.faults
        for point in faults.stop_points:
            if point.process == self.process.name and point.target == "commit":
                if _appends_data(key, new, previous):
                    faults.stop_points.remove(point)
                    faults.stopping[self.process.name] = point
                return

    def watch(self, key: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Notifications of commits to ``key`` (see the module docstring); never fails."""
        process, incarnation = self.process, self.process.incarnation
        faults = self.faults

        def notify(k: str) -> None:
            if not process.alive or process.incarnation != incarnation:
                cancel()  # the watching incarnation is gone
            elif not faults.consensus_failing:  # else lost, as on a broken LISTEN connection
                callback(k)

        cancel = self.disk.watch(key, notify)
        return cancel

    def scan(self, key: str, from_seqno: int, limit: int) -> list[VersionedData]:
        when = self._enter("consensus scan")
        out = self.disk.read_scan(key, from_seqno, limit)
        self._leave("consensus scan", when)
        return out

    def truncate(self, key: str, seqno: int) -> int:
        when = self._enter("consensus truncate")
        n = self.disk.consensus.truncate(key, seqno)
        self._leave("consensus truncate", when)
        return n

    def list_keys(self) -> list[str]:
        when = self._enter("consensus list")
        keys = self.disk.consensus.list_keys()
        self._leave("consensus list", when)
        return keys


class BlobClient(_Client):
    """One process's view of the disk's blobs (the runtime's ``Blob`` contract)."""

    def __init__(self, disk: SimDisk, process: SimProcess, faults: StorageFaults) -> None:
        super().__init__(disk, process, faults, "blob")

    def get(self, key: str) -> bytes | None:
        when = self._enter("blob get")
        data = self.disk.read_blob(key)
        self._leave("blob get", when)
        return data

    def set(self, key: str, value: bytes) -> None:
        when = self._enter("blob set")
        point = self.faults._crash(self.process, "blob", key, lambda t: t == "blob")
        if point is not None:
            if point.torn and len(value) > 1:
                cut = self.faults.source.integer(1, len(value) - 1)
                self.disk.set_blob(key, bytes(value[:cut]))
            elif point.after:
                self.disk.set_blob(key, bytes(value))
            raise self._killed(f"blob write of {key}")
        self.faults.refuse_full("blob", key, "set")
        self.disk.set_blob(key, bytes(value))
        self.faults.fsync(self.process.name)
        self._leave("blob set", when)

    def delete(self, key: str) -> int | None:
        when = self._enter("blob delete")
        n = self.disk.delete_blob(key)
        self._leave("blob delete", when)
        return n

    def list_keys(self, prefix: str = "") -> list[BlobMeta]:
        when = self._enter("blob list")
        keys = self.disk.blobs.list_keys(prefix)
        self._leave("blob list", when)
        return keys
