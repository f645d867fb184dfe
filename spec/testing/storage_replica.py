"""A pure, in-memory world for storage replicas: crash them anywhere and check nothing is lost or doubled.

Everything here stands in for the world a storage replica lives in (fakes
belong in ``spec/testing``); the replica and the controller are the real spec
state machines:

* :class:`DeterministicUpstream` -- an upstream log whose updates at an offset
  are a pure function of the offset (a load generator, thinned out so that
  some offsets carry nothing); it grows when told to, and forgets what was
  acknowledged;
* :class:`MemoryShard` -- a shard whose compare-and-append is the spec shard's
  own transition (:func:`tidegate.spec.shard.compare_and_append`), with a since
  the controller downgrades and reads that must not go below it;
* :class:`FakeSinkTarget` -- a sink target with a covered upper and
  conditional commits;
* :class:`IngestionHarness` -- one storage instance of a real
  :class:`~tidegate.spec.storage.StorageController` running one ingestion
  (remap and data collections) and optionally a sink of its data, on
  :class:`~tidegate.spec.storage_replica.StorageReplica` incarnations. A test
  (Hypothesis) chooses every step: the clock, upstream growth, source
  deliveries in any batching, which pending IO completes (or fails), ticks,
  reconnects, crashes (in-flight writes landing or not, the old incarnation
  living on as a zombie whose writes race), controller restarts (read-only,
  then promoted). :meth:`IngestionHarness.heal` then lets the live replica
  catch up and :meth:`IngestionHarness.check` checks the laws:

  - the remap collection is a valid sequence of bindings;
  - the data collection holds exactly the upstream updates the bindings
    assign to each time -- and equals the data and remap collections of one
    uninterrupted run with those bindings (:func:`uninterrupted_run`);
  - every data write any incarnation attempted (landed or not) carried exactly
    those updates for its time range: restarts re-emit the same updates;
  - upstream was never acknowledged beyond what was durable;
  - no shard was read below its since (the controller's holds suffice);
  - the sink target holds every update of its input exactly once, at its time
    (the snapshot at the as_of), up to its covered upper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UpperMismatch
from ..frontier import Antichain, Update, consolidate
from ..frontier.read_policy import LagWriteFrontier, ReadPolicy
from ..ids import GlobalId
from ..plan.schema import Schema
from ..shard import BatchMeta, ShardState, compare_and_append
from ..storage import (
    CollectionDescription,
    DowngradeShardSince,
    ExportDescription,
    Ingestion,
    LoadGenerator,
    Progress,
    RegisterShard,
    RunIngestion,
    SendStorageCommand,
    ShardFrontiers,
    SimulatedSink,
    SimulatedSource,
    SourceBatch,
    SourceUpdate,
    StorageAllowWrites,
    StorageController,
    StorageHello,
    StorageInitializationComplete,
    loadgen_schema,
    loadgen_updates,
)
from ..storage.reclock import Bindings, decode_bindings, resume_offset
from ..storage_replica import (
    AckSource,
    CloseSink,
    CommitSink,
    OpenSink,
    ReadRemap,
    ReadSinkInput,
    Reply,
    StartSource,
    StopSinkInput,
    StopSource,
    StorageReplica,
    StorageReplicaOutput,
    WriteShard,
)

__all__ = [
    "DeterministicUpstream",
    "FakeSinkTarget",
    "IngestionHarness",
    "MemoryShard",
    "uninterrupted_run",
]


class DeterministicUpstream:
    """An upstream log: offset ``o`` carries the load generator's updates at ``o`` if ``o % density == 0``.

    Offsets below :attr:`available` exist; those below :attr:`forgotten` were
    acknowledged and are gone (a reader asked to start below it starts there).
    """

    def __init__(self, generator: LoadGenerator | None = None, density: int = 1) -> None:
        self.generator = (
            generator if generator is not None else LoadGenerator("counter", max_cardinality=3)
        )
        self.density = max(1, density)
        self.schema: Schema = loadgen_schema(self.generator)
        self.available = 0
        self.forgotten = 0

    def updates_at(self, offset: int) -> tuple[SourceUpdate, ...]:
        if offset % self.density:
            return ()
        return loadgen_updates(self.generator, offset)

    def between(self, lower: int, upper: int) -> list[SourceUpdate]:
        return [u for o in range(lower, upper) for u in self.updates_at(o)]

    def produce(self, n: int) -> None:
        self.available += max(0, n)

    def forget_below(self, offset: int) -> None:
        self.forgotten = max(self.forgotten, offset)


class MemoryShard:
    """One shard: the spec shard's state and compare-and-append, with the batches' updates kept beside it."""

    def __init__(self, name: str, since: int = 0, upper: int = 0) -> None:
        self.name = name
        self.state = ShardState(shard=name, since=Antichain([since]), upper=Antichain([upper]))
        self.since = Antichain([since])
        self._updates: list[Update] = []
        self._serial = 0

    @property
    def upper(self) -> Antichain:
        return self.state.upper

    @property
    def upper_int(self) -> int:
        u = self.state.upper.as_option()
        assert u is not None
        return int(u)

    def compare_and_append(
        self, updates: Sequence[Update], expected: Antichain, new: Antichain
    ) -> Antichain | None:
        """Append if the upper is ``expected``: ``None`` on success, else the actual upper."""
        batch = None
        if updates:
            times = [int(t) for _, t, _ in updates]
            self._serial += 1
            batch = BatchMeta(
                f"{self.name}/{self._serial}",
                expected,
                new,
                expected,
                len(times),
                min(times),
                max(times),
            )
        try:
            out = compare_and_append(
                self.state, batch, expected, new, writer_id="replica", token=None, now_ms=0
            )
        except UpperMismatch as e:
            actual: Antichain = e.actual_upper
            return actual
        self.state = out.state
        self._updates.extend(updates)
        return None

    def updates(self) -> list[Update]:
        """Every update ever appended (uncompacted: reads below the since are refused instead)."""
        return list(self._updates)

    def read(self, as_of: int) -> list[Update]:
        """The snapshot as of ``as_of`` (times advanced) and every update after it, up to the upper."""
        return consolidate((row, max(t, as_of), d) for row, t, d in self._updates)

    def downgrade_since(self, frontier: Antichain) -> str | None:
        """Move the since; a violation message if it would go back."""
        if not self.since <= frontier:
            return f"the since of {self.name} would go back from {self.since!r} to {frontier!r}"
        self.since = frontier
        return None

    def readable_at(self, as_of: int) -> bool:
        return self.since.less_equal(as_of)


@dataclass
class FakeSinkTarget:
    """A sink target: the changelog committed and the upper it covers for the sink (``None``: nothing)."""

    covered: int | None = None
    changelog: list[Update] = field(default_factory=list)
    commits: int = 0

    def commit(
        self, updates: Sequence[Update], expected: int | None, lower: int, upper: int
    ) -> int | bool | None:
        """``True`` if committed, else the covered upper it found (conflict)."""
        if self.covered != expected:
            return self.covered
        self.changelog.extend(updates)
        self.covered = upper
        self.commits += 1
        return True


@dataclass
class _Incarnation:
    """One storage replica process and the IO its driver has under way."""

    name: str
    replica: StorageReplica
    pending: list[StorageReplicaOutput] = field(default_factory=list)
    source_pos: int | None = None
    source_connected: bool = False
    sink_read: list[int] | None = None  # [as_of, delivered upper]
    zombie: bool = False


class IngestionHarness:
    """One ingestion (and optionally a sink of it) on a real controller and replica, in a pure world.

    See the module docstring. Every action method is safe to call at any
    time (it does nothing when it does not apply); :meth:`check` collects
    every broken law in :attr:`violations` and raises ``AssertionError``.
    """

    INSTANCE = "storage"
    REMAP = GlobalId.user(1)
    DATA = GlobalId.user(2)
    SINK = GlobalId.user(3)

    def __init__(
        self,
        upstream: DeterministicUpstream | None = None,
        *,
        sink: bool = True,
        sink_as_of: int = 0,
        read_only: bool = False,
        remap_policy: ReadPolicy | None = None,
        data_policy: ReadPolicy | None = None,
        backoff_ms: int = 10,
    ) -> None:
        self.upstream = upstream if upstream is not None else DeterministicUpstream()
        self.with_sink = sink
        self.sink_as_of = sink_as_of
        self.remap_policy = remap_policy if remap_policy is not None else LagWriteFrontier(0, 1)
        self.data_policy = data_policy if data_policy is not None else LagWriteFrontier(1, 1)
        self.backoff_ms = backoff_ms
        self.now = 0
        self.shards = {self.REMAP: MemoryShard("remap"), self.DATA: MemoryShard("data")}
        self.target = FakeSinkTarget()
        self.incarnations: dict[str, _Incarnation] = {}
        self.live: str | None = None
        self.violations: list[str] = []
        # Every data write issued: (lower, upper, updates, what upstream had forgotten then).
        self.data_attempts: list[tuple[int, int, tuple[Update, ...], int]] = []
        self.landed: list[tuple[int, int, tuple[Update, ...]]] = []
        self.acks: list[tuple[int, int]] = []
        self._serial = 0
        self._queue: list[Any] = []
        self._pumping = False
        self._new_controller(read_only)
        self._connect_new()

    # -- setup --------------------------------------------------------------------------

    def _descriptions(self) -> list[tuple[GlobalId, CollectionDescription]]:
        ingestion = Ingestion(
            self.INSTANCE,
            remap_collection=self.REMAP,
            connection=SimulatedSource("upstream"),
            schema=self.upstream.schema,
        )
        return [
            (self.REMAP, CollectionDescription(Progress())),
            (self.DATA, CollectionDescription(ingestion)),
        ]

    def _new_controller(self, read_only: bool) -> None:
        ctl = StorageController(read_only=read_only, check_protocol=True)
        self.controller = ctl
        self._queue = []
        ctl.create_instance(self.INSTANCE)
        frontiers = {
            id: ShardFrontiers(shard.since, shard.upper) for id, shard in self.shards.items()
        }
        ctl.create_collections(self._descriptions(), frontiers)
        if self.with_sink:
            token = ctl.prepare_export(self.SINK, self.DATA)
            desc = ExportDescription(
                self.DATA,
                self.INSTANCE,
                Antichain([self.sink_as_of]),
                # paced commits, on the scale of the run's clock (heal advances 8 backoffs)
                SimulatedSink(
                    "target",
                    commit_interval_ms=self.backoff_ms,
                    progress_interval_ms=self.backoff_ms * 4,
                ),
                self.upstream.schema,
            )
            ctl.create_exports([(token, desc)])
        ctl.set_read_policy([(self.REMAP, self.remap_policy), (self.DATA, self.data_policy)])
        ctl.initialization_complete()
        self._pump()

    def _connect_new(self) -> None:
        self._serial += 1
        name = f"r{self._serial}"
        replica = StorageReplica(backoff_ms=self.backoff_ms, backoff_max_ms=self.backoff_ms * 8)
        self.incarnations[name] = _Incarnation(name, replica)
        self.live = name
        self.controller.connect_replica(self.INSTANCE, name)
        self._pump()

    # -- plumbing -----------------------------------------------------------------------

    def _pump(self) -> None:
        """Carry out the controller's effects, in order, to a fixed point (commands reach the live replica)."""
        if self._pumping:
            return  # the outer call goes on with what was added
        self._pumping = True
        try:
            while True:
                self._queue.extend(self.controller.drain())
                if not self._queue:
                    return
                self._effect(self._queue.pop(0))
        finally:
            self._pumping = False

    def _effect(self, effect: Any) -> None:
        if isinstance(effect, SendStorageCommand):
            inc = self.incarnations.get(effect.replica)
            if inc is None or inc.zombie or effect.replica != self.live:
                self.violations.append(f"a command reached {effect.replica}, not the live replica")
            else:
                inc.replica.handle_command(effect.command)
                self._run_outputs(inc)
        elif isinstance(effect, DowngradeShardSince):
            shard = self.shards.get(effect.id)
            if shard is not None:
                problem = shard.downgrade_since(effect.frontier)
                if problem:
                    self.violations.append(problem)
        elif isinstance(effect, RegisterShard):
            self.shards.setdefault(effect.id, MemoryShard(str(effect.id)))

    def _run_outputs(self, inc: _Incarnation) -> None:
        """Carry out what ``inc``'s replica asked: replies, readers and acks at once; IO goes pending."""
        for out in inc.replica.drain():
            if isinstance(out, Reply):
                if not inc.zombie and inc.name == self.live:
                    self.controller.handle_response(self.INSTANCE, inc.name, out.response)
            elif isinstance(out, StartSource):
                inc.source_pos = max(out.resume_offset, self.upstream.forgotten)
                inc.source_connected = False
            elif isinstance(out, StopSource):
                inc.source_pos = None
            elif isinstance(out, AckSource):
                self._check_ack(out.offset)
                self.upstream.forget_below(out.offset)
            elif isinstance(out, ReadSinkInput):
                if not self.shards[out.from_id].readable_at(out.as_of):
                    self.violations.append(
                        f"sink input {out.from_id} read at {out.as_of}, below its since "
                        f"{self.shards[out.from_id].since!r}"
                    )
                inc.sink_read = [out.as_of, 0]
            elif isinstance(out, StopSinkInput):
                inc.sink_read = None
            elif isinstance(out, CloseSink):
                pass
            else:
                if isinstance(out, WriteShard) and out.id == self.DATA:
                    lo, hi = out.expected_upper.as_option(), out.new_upper.as_option()
                    assert lo is not None and hi is not None
                    self.data_attempts.append(
                        (int(lo), int(hi), tuple(consolidate(out.updates)), self.upstream.forgotten)
                    )
                inc.pending.append(out)
        self._pump()

    def _check_ack(self, offset: int) -> None:
        bindings = self.bindings()
        durable = self.shards[self.DATA].upper_int
        limit = resume_offset(bindings, durable)
        self.acks.append((offset, durable))
        if offset > limit:
            self.violations.append(
                f"upstream acknowledged up to {offset}, beyond binding(D - 1) = {limit} of the "
                f"durable data upper {durable}"
            )

    def _inc(self, name: str | None) -> _Incarnation | None:
        if name is None:
            return None
        return self.incarnations.get(name)

    # -- actions ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The incarnations still alive (the live one and zombies)."""
        return sorted(self.incarnations)

    def advance(self, ms: int) -> None:
        self.now += max(0, ms)

    def produce(self, n: int) -> None:
        self.upstream.produce(n)

    def tick(self, name: str | None = None) -> None:
        inc = self._inc(name or self.live)
        if inc is None:
            return
        inc.replica.tick(self.now)
        self._run_outputs(inc)

    def connect_source(self, name: str | None = None) -> None:
        inc = self._inc(name or self.live)
        if inc is None or inc.source_pos is None or inc.source_connected:
            return
        inc.source_connected = True
        inc.replica.source_started(self.DATA)
        self._run_outputs(inc)

    def deliver_source(self, name: str | None, upto: int) -> None:
        """The reader delivers one batch, up to ``upto`` (at most what upstream has)."""
        inc = self._inc(name or self.live)
        if inc is None or inc.source_pos is None:
            return
        start = max(inc.source_pos, self.upstream.forgotten)
        hi = max(start, min(upto, self.upstream.available))
        if hi <= inc.source_pos:
            return
        updates = tuple(self.upstream.between(start, hi))
        inc.source_connected = True
        inc.source_pos = hi
        inc.replica.feed_source(self.DATA, SourceBatch(updates, hi, 8 * len(updates)))
        self._run_outputs(inc)

    def fail_source(self, name: str | None = None) -> None:
        inc = self._inc(name or self.live)
        if inc is None or inc.source_pos is None:
            return
        inc.source_pos = None
        inc.replica.source_failed(self.DATA, "upstream went away")
        self._run_outputs(inc)

    def deliver_sink_input(self, name: str | None, upto: int) -> None:
        """The input follower delivers up to ``upto`` (at most the data shard's upper)."""
        inc = self._inc(name or self.live)
        if inc is None or inc.sink_read is None:
            return
        as_of, delivered = inc.sink_read
        data = self.shards[self.DATA]
        hi = min(upto, data.upper_int)
        if hi <= delivered:
            return
        if delivered <= as_of < hi:
            chosen = [(r, max(t, as_of), d) for r, t, d in data.updates() if t < hi]
        elif hi <= as_of:
            chosen = []
        else:
            chosen = [(r, t, d) for r, t, d in data.updates() if delivered <= t < hi]
        inc.sink_read = [as_of, hi]
        inc.replica.feed_sink_input(self.SINK, tuple(consolidate(chosen)), hi)
        self._run_outputs(inc)

    def pending(self, name: str | None = None) -> list[StorageReplicaOutput]:
        inc = self._inc(name or self.live)
        return [] if inc is None else list(inc.pending)

    def complete(self, name: str | None, index: int, fail: bool = False) -> None:
        """Carry out pending IO number ``index`` of ``name``; ``fail``: it fails (reads, opens, commits)."""
        inc = self._inc(name or self.live)
        if inc is None or not inc.pending:
            return
        out = inc.pending.pop(index % len(inc.pending))
        r = inc.replica
        if isinstance(out, ReadRemap):
            if fail:
                r.remap_failed(out.id, "shard store unavailable")
            else:
                data = self.shards[out.data_id]
                remap = self.shards[out.remap_id]
                d = data.upper_int
                as_of = max(d - 1, 0)
                if not remap.readable_at(as_of):
                    self.violations.append(
                        f"remap read at {as_of}, below its since {remap.since!r} (data upper {d})"
                    )
                updates = remap.read(as_of) if remap.upper_int > as_of else []
                r.remap_loaded(out.id, data.upper, updates, remap.upper)
        elif isinstance(out, WriteShard):
            actual = self.shards[out.id].compare_and_append(
                out.updates, out.expected_upper, out.new_upper
            )
            if actual is None and out.id == self.DATA:
                lo, hi = out.expected_upper.as_option(), out.new_upper.as_option()
                assert lo is not None and hi is not None
                self.landed.append((int(lo), int(hi), tuple(consolidate(out.updates))))
            if actual is None:
                r.write_completed(out.id, out.new_upper)
            else:
                r.write_failed(out.id, actual)
        elif isinstance(out, OpenSink):
            if fail:
                r.sink_failed(out.id, "sink target unavailable")
            else:
                r.sink_opened(out.id, self.target.covered)
        elif isinstance(out, CommitSink):
            if fail:
                r.sink_failed(out.id, "sink target unavailable")
            else:
                self._check_commit(out)
                result = self.target.commit(out.updates, out.expected_covered, out.lower, out.upper)
                if result is True:
                    r.sink_committed(out.id, out.upper, 8 * len(out.updates))
                else:
                    assert result is not False
                    r.sink_conflict(out.id, result)
        self._run_outputs(inc)

    def _check_commit(self, out: CommitSink) -> None:
        if out.expected_covered is not None and out.lower != out.expected_covered:
            self.violations.append(
                f"a commit of [{out.lower}, {out.upper}) expects the target to cover "
                f"{out.expected_covered}, not its lower"
            )
        for _, t, _ in out.updates:
            if not out.lower <= t < out.upper:
                self.violations.append(f"commit [{out.lower}, {out.upper}) holds an update at {t}")

    def _land(self, out: StorageReplicaOutput) -> None:
        """An in-flight write of a crashed process that reached storage (its outcome is lost)."""
        if isinstance(out, WriteShard):
            self.shards[out.id].compare_and_append(out.updates, out.expected_upper, out.new_upper)
        elif isinstance(out, CommitSink):
            self.target.commit(out.updates, out.expected_covered, out.lower, out.upper)

    def reconnect(self) -> None:
        """The connection breaks and comes back: a new protocol iteration with the same replica."""
        if self.live is not None:
            self.controller.connect_replica(self.INSTANCE, self.live)
            self._pump()

    def crash(self, landed: Sequence[bool] = (), zombie: bool = False) -> None:
        """The live replica dies (or lives on as a zombie); a new one is connected.

        ``landed[i]`` says whether the i-th write or commit in flight reached
        storage before the crash (a zombie keeps its IO under way instead).
        """
        old = self._inc(self.live)
        if old is not None:
            self._retire(old, landed, zombie)
        self._connect_new()

    def _retire(self, inc: _Incarnation, landed: Sequence[bool], zombie: bool) -> None:
        if zombie:
            inc.zombie = True
            return
        writes = [o for o in inc.pending if isinstance(o, WriteShard | CommitSink)]
        for out, land in zip(writes, landed, strict=False):
            if land:
                self._land(out)
        del self.incarnations[inc.name]

    def restart_controller(
        self, read_only: bool, landed: Sequence[bool] = (), zombie: bool = False
    ) -> None:
        """The environment restarts: a new controller, from the shards' frontiers, with a new replica."""
        old = self._inc(self.live)
        if old is not None:
            self._retire(old, landed, zombie)
        self.live = None
        self._new_controller(read_only)
        self._connect_new()

    def promote(self) -> None:
        self.controller.read_write()
        self._pump()

    def kill_zombies(self) -> None:
        for name in [n for n, i in self.incarnations.items() if i.zombie]:
            del self.incarnations[name]

    # -- the laws -----------------------------------------------------------------------

    def bindings(self) -> Bindings:
        """The bindings of the remap shard (every update kept, so readable from 0)."""
        remap = self.shards[self.REMAP]
        return decode_bindings(remap.updates(), 0, remap.upper)

    def expected_data(
        self, lower: int, upper: int, bindings: Bindings | None = None
    ) -> list[Update]:
        """The data the bindings assign to times ``[lower, upper)``."""
        b = bindings if bindings is not None else self.bindings()
        lo = resume_offset(b, lower)
        hi = resume_offset(b, upper)
        out: list[Update] = []
        for row, offset, diff in self.upstream.between(lo, hi):
            t = b.time_of(offset)
            assert t is not None
            out.append((row, t, diff))
        return consolidate(out)

    def run(self, name: str | None = None, rounds: int = 1, advance_ms: int = 10) -> None:
        """Let incarnation ``name`` make progress for ``rounds`` rounds: its IO succeeds, upstream
        and the sink input deliver everything there is, the clock moves and it ticks."""
        for _ in range(rounds):
            inc = self._inc(name or self.live)
            if inc is None:
                return
            while inc.pending:
                self.complete(inc.name, 0)
            self.connect_source(inc.name)
            self.deliver_source(inc.name, self.upstream.available)
            self.deliver_sink_input(inc.name, self.shards[self.DATA].upper_int)
            self.advance(advance_ms)
            self.tick(inc.name)

    def heal(self, rounds: int = 60) -> None:
        """Zombies die; the live replica (promoted, every IO succeeding) catches up with upstream,
        and the sink with everything the ingestion had written by then."""
        self.kill_zombies()
        if self.controller.read_only:
            self.promote()
        inc = self._inc(self.live)
        assert inc is not None
        target: int | None = None
        for _ in range(rounds):
            while inc.pending:
                self.complete(inc.name, 0)
            self.connect_source()
            self.deliver_source(None, self.upstream.available)
            self.deliver_sink_input(None, self.shards[self.DATA].upper_int)
            if target is None and self._caught_up(inc):
                target = self.shards[self.DATA].upper_int
            if target is not None and (not self.with_sink or (self.target.covered or 0) >= target):
                return
            self.advance(max(self.backoff_ms * 8, 1))
            self.tick()
        self.violations.append(
            f"no progress: after {rounds} rounds the ingestion has data upper "
            f"{self.shards[self.DATA].upper!r}, remap upper {self.shards[self.REMAP].upper!r}, "
            f"upstream {self.upstream.available}, sink covered {self.target.covered}"
        )

    def _caught_up(self, inc: _Incarnation) -> bool:
        if inc.pending:
            return False
        data, remap = self.shards[self.DATA], self.shards[self.REMAP]
        if data.upper != remap.upper or data.upper_int == 0:
            return False
        return resume_offset(self.bindings(), data.upper_int) == self.upstream.available

    def check(self) -> None:
        """Check every law; raise ``AssertionError`` listing the broken ones."""
        problems = list(self.violations)
        try:
            bindings = self.bindings()
        except Exception as e:  # a malformed remap collection breaks everything else
            raise AssertionError(f"the remap collection is not bindings: {e}") from e
        data = self.shards[self.DATA]
        d = data.upper_int
        actual = consolidate(data.updates())
        expected = self.expected_data(0, d, bindings)
        if actual != expected:
            problems.append(f"data shard holds {actual}, the bindings assign {expected}")
        remap_upper = self.shards[self.REMAP].upper_int
        for lo, hi, updates, forgotten in self.data_attempts:
            if hi > remap_upper:
                continue
            want = self.expected_data(lo, hi, bindings)
            if list(updates) == want:
                continue
            # Only an incarnation behind the durable state may miss updates: upstream forgot
            # offsets it needed (acknowledged by a newer one). Such a write can never land.
            if forgotten <= resume_offset(bindings, lo) or (lo, hi, updates) in self.landed:
                problems.append(f"a write of [{lo}, {hi}) carried {updates}, not {want}")
        if self.with_sink and self.target.covered is not None:
            covered = self.target.covered
            if covered > d:
                problems.append(f"the sink covers {covered}, beyond its input's upper {d}")
            want = consolidate(
                (row, max(t, self.sink_as_of), diff) for row, t, diff in actual if t < covered
            )
            got = consolidate(self.target.changelog)
            if got != want:
                problems.append(f"the sink target holds {got}, its input up to {covered} is {want}")
        remap_ref, data_ref = uninterrupted_run(self.upstream, bindings)
        if data_ref != actual:
            problems.append(f"an uninterrupted run writes data {data_ref}, this one {actual}")
        if remap_ref != consolidate(self.shards[self.REMAP].updates()):
            problems.append("an uninterrupted run writes other remap contents")
        if problems:
            raise AssertionError("\n".join(problems))


def uninterrupted_run(
    upstream: DeterministicUpstream, bindings: Bindings
) -> tuple[list[Update], list[Update]]:
    """The remap and data contents one replica writes, never interrupted, minting ``bindings``.

    It is driven so its ticks land at the binding times with upstream
    delivered up to each binding; returns both collections consolidated.
    """
    ingestion = Ingestion(
        "storage",
        remap_collection=IngestionHarness.REMAP,
        connection=SimulatedSource("upstream"),
        schema=upstream.schema,
    )
    r = StorageReplica()
    shards = {
        IngestionHarness.REMAP: MemoryShard("remap"),
        IngestionHarness.DATA: MemoryShard("data"),
    }
    data_id = IngestionHarness.DATA

    def settle() -> None:
        pending = r.drain()
        while pending:
            out = pending.pop(0)
            if isinstance(out, ReadRemap):
                r.remap_loaded(out.id, Antichain([0]), [], Antichain([0]))
            elif isinstance(out, WriteShard):
                failed = shards[out.id].compare_and_append(
                    out.updates, out.expected_upper, out.new_upper
                )
                assert failed is None, "an uninterrupted run never loses a race"
                r.write_completed(out.id, out.new_upper)
            pending.extend(r.drain())

    from ..compute.uuids import counter_uuids

    for cmd in (
        StorageHello(counter_uuids(99)()),
        RunIngestion(data_id, CollectionDescription(ingestion), Antichain([0])),
        StorageInitializationComplete(),
        StorageAllowWrites(),
    ):
        r.handle_command(cmd)
    settle()
    delivered = 0
    for t, offset in bindings.changes:
        r.feed_source(data_id, SourceBatch(tuple(upstream.between(delivered, offset)), offset))
        delivered = offset
        settle()
        r.tick(t)
        settle()
    return (
        consolidate(shards[IngestionHarness.REMAP].updates()),
        consolidate(shards[data_id].updates()),
    )
