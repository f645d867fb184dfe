"""``StorageReplica``: what a storage replica does with each command, as one sans-IO state machine.

The replica feeds every command to its :class:`~tidegate.spec.storage.StorageReplicaSession`
(a command that breaks the protocol is refused, blamed on the controller, and
changes nothing), runs ingestions and sinks, and records in its outbox the
:mod:`outputs <.outputs>` its driver takes with :meth:`StorageReplica.drain`:
replies for the controller (each checked by the session) and IO -- upstream
readers, shard reads and compare-and-appends, sink targets. The driver
reports IO outcomes through the callbacks and calls :meth:`tick` with its
clock (tidegate timestamp units: epoch milliseconds in production, virtual
milliseconds in the simulator). Nothing here does IO or reads a clock.

**Iterations.** Commands of an iteration are collected until
``InitializationComplete`` and then reconciled with what the replica runs:
an ingestion or sink run again with the same description keeps running
(reads, buffers and writes under way included), everything else is torn down
or started. Nothing is written until the iteration's ``AllowWrites``: before
it, ingestions read upstream and sinks read their input (warming up beside
another version that writes).

**Ingestion, and why it is exactly once.** An ingestion loads its state
(:class:`~.outputs.ReadRemap`: the data shard's upper ``D`` and the bindings
of its remap collection as of ``D - 1``), starts upstream at
``binding(D - 1)`` and buffers what arrives. On each tick (writes allowed,
nothing in flight) it first writes the data of bindings that exist beyond
``D`` (once upstream has delivered their offsets); otherwise, while its
source is reading, it mints one binding at ``max(now, remap upper)`` -- the
source's offset upper, or the previous binding if the source did not move --
and writes it to the remap shard, then the data it assigns to the data shard.
A source that is starting or failed mints nothing: its frontier stalls. Both writes are
compare-and-appends at the upper the replica believes, remap first. So:

1. a binding is durable before any data it assigns, and the data written for
   times ``[D, R)`` are exactly the upstream updates with offsets in
   ``[binding(D - 1), binding(R - 1))``, each at its reclocked time
   (:mod:`tidegate.spec.storage.reclock`) -- a function of durable bindings
   and of upstream, whose update at an offset never changes;
2. a write whose expected upper is not the shard's fails and changes nothing;
   the replica then reloads from the shards and resumes from what is durable:
   it never writes a time twice, and re-derives identical updates for the
   times it still has to write;
3. a crash loses only what was not durable; a restart resumes from
   ``binding(D - 1)`` and re-derives the same updates for every time from
   ``D`` on. Upstream is acknowledged (:class:`~.outputs.AckSource`) only up
   to ``binding(D - 1)`` of a durable ``D``.

Several incarnations racing (a zombie, a restarted replica) each write only
times whose bindings they have seen durable, with the same updates; the
compare-and-append lets one write each time. Hence the data shard holds, at
every time, exactly the updates the bindings assign to it: the same
collection as one uninterrupted run with those bindings.

**Sinks, and why they are exactly once.** A sink opens its target, which
reports the upper it covers for this sink. If that is beyond the as_of, the
sink reads its input as of ``covered - 1`` and commits only changes at times
from ``covered`` on; otherwise its first commit is the input's snapshot at
the as_of (times advanced to it) and what followed. Each commit covers
``[lower, upper)`` of the input and is conditional on the target still
covering ``lower`` (nothing, for the first): a conflict means another
incarnation committed, and the sink continues from the covered upper it
reports. Commits are in time order, one in flight. So every input update is
committed once, at its time (the snapshot's at the as_of). The controller
holds the input at ``step_back`` of the reported covered upper, so
``covered - 1`` stays readable. (``RunSink.strict`` is not needed for this:
the target's covered upper says exactly what was committed.)

**Commit pacing.** A sink commits on :meth:`tick`, at most once per its
connection's ``commit_interval_ms`` (everything its input brought in the
interval, one commit), and only when the updates of the interval do not
cancel out; when they do (the input only advanced), the covered upper is
recorded only once ``progress_interval_ms`` passed since the last commit.
The first commit (which starts the sink's history in the target) goes out at
once. Pacing changes when commits happen, never what they cover: each still
covers ``[covered, input upper)``.

**Reports.** Uppers (an ingestion's data and remap collections, a sink's
covered upper) are reported when they advance; statuses when they change
(``starting``, ``running``, ``stalled`` with the error, ``ceased`` for an
object that cannot run, ``dropped``); statistics on :meth:`tick`.
``AllowCompaction(id, [])`` tears the object down and answers ``dropped``
and ``DroppedId``. Failed readers and sink targets are retried with
exponential backoff (``backoff_ms`` doubling up to ``backoff_max_ms``): the
replica says when, on a tick.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ..errors import (
    DeposedController,
    ShardWriteNotInFlight,
    SinkCommitNotInFlight,
    StorageCommandRejected,
    UnknownIngestion,
    UnknownStorageSink,
)
from ..frontier import Antichain, Update
from ..ids import GlobalId
from ..outbox import Outbox, atomic
from ..storage.commands import (
    DroppedId,
    RunIngestion,
    RunSink,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageResponse,
    StorageUpdateConfiguration,
)
from ..storage.connections import SourceBatch
from ..storage.descriptions import StorageParameters
from ..storage.sessions import StorageReplicaSession
from ..storage.stages import StorageStage
from ._ingestion import IngestionRun
from ._sink import SinkRun
from .outputs import Reply, StorageReplicaOutput

__all__ = ["StorageReplica"]


def _int_frontier(f: object) -> bool:
    return isinstance(f, Antichain) and all(type(t) is int and t >= 0 for t in f.elements)


class StorageReplica:
    """One storage replica's behaviour (see the module docstring).

    Every public method validates first: a call that raises a typed error
    leaves the replica (and its outbox) unchanged. ``backoff_ms`` and
    ``backoff_max_ms`` pace retries of failed readers, remap loads and sink
    targets.
    """

    def __init__(self, *, backoff_ms: int = 1_000, backoff_max_ms: int = 60_000) -> None:
        if backoff_ms <= 0 or backoff_max_ms < backoff_ms:
            raise ValueError("need 0 < backoff_ms <= backoff_max_ms")
        self._backoff = (backoff_ms, backoff_max_ms)
        self._session = StorageReplicaSession()
        self._outbox: Outbox[StorageReplicaOutput] = Outbox()
        self._now = 0
        self.epoch = 0
        """The highest controller epoch a ``StorageHello`` brought (a lower one is refused)."""
        self._params = StorageParameters()
        self._ingestions: dict[GlobalId, IngestionRun] = {}
        self._sinks: dict[GlobalId, SinkRun] = {}
        # Shard (data or remap collection) -> its ingestion.
        self._shards: dict[GlobalId, GlobalId] = {}
        # This iteration's Run/AllowCompaction commands until InitializationComplete.
        self._pending: list[StorageCommand] = []
        # Statuses reported in this iteration.
        self._reported_status: dict[GlobalId, StatusUpdate] = {}
        # Outcomes still to come of writes, remap loads, opens and commits of torn-down objects.
        self._retired: Counter[tuple[str, GlobalId]] = Counter()

    def drain(self) -> list[StorageReplicaOutput]:
        """The outputs of every call since the last drain, in the order they arose."""
        return self._outbox.drain()

    # -- queries --------------------------------------------------------------------

    @property
    def session(self) -> StorageReplicaSession:
        """The protocol session (read it; do not feed it)."""
        return self._session

    @property
    def stage(self) -> StorageStage:
        return self._session.stage

    @property
    def parameters(self) -> StorageParameters:
        return self._params

    @property
    def writes_allowed(self) -> bool:
        return self._session.writes_allowed

    def ingestions(self) -> tuple[GlobalId, ...]:
        """The ingestions running now."""
        return tuple(sorted(self._ingestions))

    def sinks(self) -> tuple[GlobalId, ...]:
        """The sinks running now."""
        return tuple(sorted(self._sinks))

    def status(self, id: GlobalId) -> StatusUpdate | None:
        """The current status of ingestion or sink ``id`` (``None`` if it does not run here)."""
        obj = self._ingestions.get(id) or self._sinks.get(id)
        return None if obj is None else obj.status

    def uppers(self, id: GlobalId) -> tuple[int | None, int | None]:
        """Ingestion ``id``'s data and remap uppers as the replica knows them (``None``: not yet)."""
        ing = self._ingestions.get(id)
        if ing is None:
            raise UnknownIngestion(f"{id} is not an ingestion of this replica")
        return ing.data_upper, ing.remap_upper

    def buffered(self) -> Mapping[GlobalId, int]:
        """Upstream updates (ingestions) and input updates (sinks) held in memory, per object."""
        out = {i: len(r.buffer) for i, r in self._ingestions.items()}
        out.update({i: len(s.buffer) for i, s in self._sinks.items()})
        return dict(sorted(out.items()))

    # -- commands -------------------------------------------------------------------

    @atomic
    def handle_command(self, cmd: StorageCommand) -> None:
        """Take one command from the controller."""
        if isinstance(cmd, StorageHello) and cmd.epoch < self.epoch:
            raise DeposedController(cmd.epoch, self.epoch)
        self._session.check_command(cmd)
        if isinstance(cmd, StorageHello):
            self.epoch = cmd.epoch
        if isinstance(cmd, RunIngestion) and not _int_frontier(cmd.resume_upper):
            raise StorageCommandRejected(f"RunIngestion({cmd.id}): resume upper of non-int times")
        if isinstance(cmd, RunSink) and not (_int_frontier(cmd.as_of) and len(cmd.as_of) <= 1):
            raise StorageCommandRejected(f"RunSink({cmd.id}): as_of is not an int frontier")
        if isinstance(cmd, StorageAllowCompaction) and not _int_frontier(cmd.frontier):
            raise StorageCommandRejected(f"AllowCompaction({cmd.id}): not an int frontier")
        self._session.on_command(cmd)
        out: list[StorageReplicaOutput] = []
        if isinstance(cmd, StorageHello):
            self._pending = []
            self._reported_status = {}
        elif isinstance(cmd, StorageUpdateConfiguration):
            self._params = self._params.update(cmd.params)
        elif isinstance(cmd, StorageInitializationComplete):
            out.extend(self._reconcile())
        elif isinstance(cmd, RunIngestion | RunSink | StorageAllowCompaction):
            if not self.stage.is_running:
                self._pending.append(cmd)
            elif isinstance(cmd, StorageAllowCompaction):
                if cmd.frontier.is_empty():
                    out.extend(self._drop(cmd.id))
            else:
                out.extend(self._start(cmd))
        elif isinstance(cmd, StorageAllowWrites) and self.stage.is_running:
            out.extend(self._progress_all())
        self._outbox.extend(out)
        self._publish()

    def _start(self, cmd: RunIngestion | RunSink) -> list[StorageReplicaOutput]:
        if isinstance(cmd, RunIngestion):
            ing = IngestionRun(cmd, self._now, self._backoff)
            self._ingestions[cmd.id] = ing
            self._shards[cmd.id] = cmd.id
            if ing.remap_id is not None:
                self._shards[ing.remap_id] = cmd.id
            return ing.start()
        # A sink already running is being altered: the old run stops, outcomes still to come
        # for it are ignored, and the new one resumes from what its target covers.
        out = self._teardown(cmd.id) if cmd.id in self._sinks else []
        sink = SinkRun(cmd, self._backoff)
        self._sinks[cmd.id] = sink
        out.extend(sink.start())
        return out

    def _teardown(self, id: GlobalId) -> list[StorageReplicaOutput]:
        """Stop object ``id`` without a word to the controller; outcomes still to come are ignored."""
        ing = self._ingestions.pop(id, None)
        if ing is not None:
            if ing.inflight is not None:
                self._retired[("write", ing.inflight.shard)] += 1
            if ing.phase == "loading":
                self._retired[("remap", id)] += 1
            self._shards = {s: i for s, i in self._shards.items() if i != id}
            return ing.stop()
        sink = self._sinks.pop(id, None)
        if sink is not None:
            if sink.inflight is not None:
                self._retired[("commit", id)] += 1
            if sink.phase == "opening":
                self._retired[("open", id)] += 1
            return sink.stop()
        return []

    def _drop(self, id: GlobalId) -> list[StorageReplicaOutput]:
        out = self._teardown(id)
        out.append(self._reply(StatusUpdate(id, SourceStatus.DROPPED)))
        out.append(self._reply(DroppedId(id)))
        return out

    def _reconcile(self) -> list[StorageReplicaOutput]:
        """Reconcile this iteration's commands with what runs (see the module docstring)."""
        pending, self._pending = self._pending, []
        desired: dict[GlobalId, RunIngestion | RunSink] = {}
        dropped: set[GlobalId] = set()
        for cmd in pending:
            if isinstance(cmd, RunIngestion | RunSink):
                desired[cmd.id] = cmd
            elif isinstance(cmd, StorageAllowCompaction) and cmd.frontier.is_empty():
                dropped.add(cmd.id)
        out: list[StorageReplicaOutput] = []
        running: dict[GlobalId, IngestionRun | SinkRun] = {**self._ingestions, **self._sinks}
        for id, obj in sorted(running.items()):
            want = desired.get(id)
            if (
                want is None
                or type(want) is not type(obj.run)
                or want.description != obj.run.description
            ):
                out.extend(self._teardown(id))
        for id, cmd in sorted(desired.items()):
            if id in dropped:
                out.extend(self._drop(id))
            elif id not in self._ingestions and id not in self._sinks:
                out.extend(self._start(cmd))
        out.extend(self._progress_all())
        return out

    # -- replies --------------------------------------------------------------------

    def _reply(self, response: StorageResponse) -> Reply:
        self._session.on_response(response)
        return Reply(response)

    def _publish(self) -> None:
        """Report what advanced or changed, if the replica may answer now."""
        if not self.stage.is_running:
            return
        out: list[StorageReplicaOutput] = []
        session = self._session
        for id, ing in sorted(self._ingestions.items()):
            for shard, upper in ((id, ing.data_upper), (ing.remap_id, ing.remap_upper)):
                if shard is None or upper is None or upper == 0:
                    continue
                f = Antichain([upper])
                last = session.last_reported(shard)
                if last is None or last < f:
                    out.append(self._reply(StorageFrontierUpper(shard, f)))
            out.extend(self._status(ing.status))
        for id, sink in sorted(self._sinks.items()):
            if sink.covered is not None and sink.covered > 0:
                f = Antichain([sink.covered])
                last = session.last_reported(id)
                if last is None or last < f:
                    out.append(self._reply(StorageFrontierUpper(id, f)))
            out.extend(self._status(sink.status))
        self._outbox.extend(out)

    def _status(self, status: StatusUpdate) -> list[StorageReplicaOutput]:
        if self._reported_status.get(status.id) == status:
            return []
        self._reported_status[status.id] = status
        return [self._reply(status)]

    def _statistics(self) -> list[StorageReplicaOutput]:
        out: list[StorageReplicaOutput] = []
        for id, ing in sorted(self._ingestions.items()):
            stats = ing.statistics()
            if stats is not None:
                out.append(self._reply(StatisticsUpdate(id, stats)))
        for id, sink in sorted(self._sinks.items()):
            sink_stats = sink.statistics()
            if sink_stats is not None:
                out.append(self._reply(StatisticsUpdate(id, sink_stats)))
        return out

    def _progress_all(self) -> list[StorageReplicaOutput]:
        allowed = self.writes_allowed
        out: list[StorageReplicaOutput] = []
        for _, ing in sorted(self._ingestions.items()):
            out.extend(ing.progress(allowed))
        return out

    # -- time -----------------------------------------------------------------------

    @atomic
    def tick(self, now: int) -> None:
        """The driver's clock says ``now`` (ms): retries that are due, the next binding of each
        ingestion and the next commit of each sink (writes allowed), statistics."""
        if type(now) is not int or now < 0:
            raise StorageCommandRejected(f"tick: now must be an int >= 0, got {now!r}")
        self._now = max(self._now, now)
        if not self.stage.is_running:
            return
        allowed = self.writes_allowed
        out: list[StorageReplicaOutput] = []
        for _, ing in sorted(self._ingestions.items()):
            out.extend(ing.tick(self._now, allowed))
        for _, sink in sorted(self._sinks.items()):
            out.extend(sink.tick(self._now, allowed))
        self._outbox.extend(out)
        self._publish()
        self._outbox.extend(self._statistics())

    # -- ingestion callbacks --------------------------------------------------------

    def _ingestion(self, id: GlobalId, what: str) -> IngestionRun:
        ing = self._ingestions.get(id)
        if ing is None:
            raise UnknownIngestion(f"{what} for {id}, which is not an ingestion of this replica")
        return ing

    def _retired_outcome(self, kind: str, id: GlobalId) -> bool:
        """Whether an outcome for ``id`` belongs to a torn-down object (then it is consumed)."""
        key = (kind, id)
        if self._retired[key] > 0:
            self._retired[key] -= 1
            if not self._retired[key]:
                del self._retired[key]
            return True
        return False

    @atomic
    def remap_loaded(
        self,
        id: GlobalId,
        data_upper: Antichain,
        updates: tuple[Update, ...] | list[Update],
        remap_upper: Antichain,
    ) -> None:
        """The driver read ingestion ``id``'s shards for a :class:`~.outputs.ReadRemap`.

        ``data_upper`` is the data shard's upper; ``updates`` the remap
        collection's snapshot as of ``max(data_upper - 1, 0)`` and its updates
        after, up to ``remap_upper``. [InvalidBindings] if they are not bindings
        or the data shard is ahead of the remap shard.
        """
        ing = self._ingestions.get(id)
        if (ing is None or ing.phase != "loading") and self._retired_outcome("remap", id):
            return
        ing = self._ingestion(id, "remap_loaded")
        d, bindings = ing.check_remap_loaded(data_upper, tuple(updates), remap_upper)
        self._outbox.extend(ing.remap_loaded(d, bindings, remap_upper))
        self._outbox.extend(ing.progress(self.writes_allowed))
        self._publish()

    @atomic
    def remap_failed(self, id: GlobalId, error: str) -> None:
        """The shards of ingestion ``id`` could not be read: it stalls and the read is retried later."""
        ing = self._ingestions.get(id)
        if (ing is None or ing.phase != "loading") and self._retired_outcome("remap", id):
            return
        self._ingestion(id, "remap_failed").remap_failed(str(error), self._now)
        self._publish()

    @atomic
    def source_started(self, id: GlobalId) -> None:
        """Ingestion ``id``'s reader connected upstream: it is running."""
        self._ingestion(id, "source_started").source_started()
        self._publish()

    @atomic
    def feed_source(self, id: GlobalId, batch: SourceBatch) -> None:
        """Upstream updates for ingestion ``id`` and the reader's new offset upper.

        [SourceBatchRejected] if the upper goes back or an update is at an
        offset outside ``[delivered upper, batch upper)``.
        """
        ing = self._ingestion(id, "feed_source")
        ing.check_batch(batch)
        ing.feed(batch)
        self._outbox.extend(ing.progress(self.writes_allowed))
        self._publish()

    @atomic
    def source_failed(self, id: GlobalId, error: str, *, retryable: bool = True) -> None:
        """Ingestion ``id``'s reader failed: it stalls with ``error`` and a later tick restarts
        it; an error no retry gets past (``retryable`` false: the upstream's schema changed, its
        slot is gone) makes it ``ceased`` for good instead."""
        self._ingestion(id, "source_failed").source_failed(
            str(error), self._now, retryable=retryable
        )
        self._publish()

    def _shard_write(
        self, shard: GlobalId, upper: Antichain, completed: bool
    ) -> IngestionRun | None:
        """The ingestion whose write in flight this outcome is, or ``None`` if it is the outcome
        of a torn-down object's write (consumed). An outcome that fits the write in flight is
        its; one that does not, but a torn-down object's write of that shard is still owed,
        is that one's."""
        owner = self._shards.get(shard)
        ing = self._ingestions.get(owner) if owner is not None else None
        if ing is not None and ing.inflight is not None and ing.inflight.shard == shard:
            try:
                ing.check_write(shard, upper, completed)
            except ShardWriteNotInFlight:
                if self._retired_outcome("write", shard):
                    return None
                raise
            return ing
        if self._retired_outcome("write", shard):
            return None
        if ing is None:
            raise UnknownIngestion(f"a write outcome for {shard}, which no ingestion here writes")
        ing.check_write(shard, upper, completed)  # raises: nothing is in flight
        return None

    @atomic
    def write_completed(self, id: GlobalId, new_upper: Antichain) -> None:
        """The :class:`~.outputs.WriteShard` to shard ``id`` landed: its upper is ``new_upper``."""
        ing = self._shard_write(id, new_upper, True)
        if ing is None:
            return
        self._outbox.extend(ing.write_completed(self._now, self.writes_allowed))
        self._publish()

    @atomic
    def write_failed(self, id: GlobalId, actual_upper: Antichain) -> None:
        """The :class:`~.outputs.WriteShard` to shard ``id`` found the upper at ``actual_upper``:
        another incarnation wrote. The ingestion reloads and resumes from what is durable."""
        ing = self._shard_write(id, actual_upper, False)
        if ing is None:
            return
        self._outbox.extend(ing.write_failed())
        self._publish()

    # -- sink callbacks -------------------------------------------------------------

    def _sink(self, id: GlobalId, what: str) -> SinkRun:
        sink = self._sinks.get(id)
        if sink is None:
            raise UnknownStorageSink(f"{what} for {id}, which is not a sink of this replica")
        return sink

    @atomic
    def sink_opened(self, id: GlobalId, covered_upper: int | None) -> None:
        """Sink ``id``'s target is open and covers ``covered_upper`` for it (``None``: nothing yet)."""
        sink = self._sinks.get(id)
        if (sink is None or sink.phase != "opening") and self._retired_outcome("open", id):
            return
        self._outbox.extend(self._sink(id, "sink_opened").opened(covered_upper))
        self._publish()

    @atomic
    def feed_sink_input(
        self, id: GlobalId, updates: tuple[Update, ...] | list[Update], upper: int
    ) -> None:
        """Input updates of sink ``id`` (the snapshot at the read's as_of first) and the input's new upper."""
        sink = self._sink(id, "feed_sink_input")
        batch = tuple(updates)
        sink.check_input(batch, upper)
        sink.feed(batch, upper)

    def _commit_outcome(
        self, id: GlobalId, upper: int | None, committed: bool, what: str
    ) -> SinkRun | None:
        """The sink whose commit in flight this outcome is (``None``: a torn-down one's, consumed)."""
        sink = self._sinks.get(id)
        if sink is not None and sink.inflight is not None:
            try:
                sink.check_outcome(upper, committed)
            except SinkCommitNotInFlight:
                if self._retired_outcome("commit", id):
                    return None
                raise
            return sink
        if self._retired_outcome("commit", id):
            return None
        self._sink(id, what).check_outcome(upper, committed)  # raises: nothing is in flight
        return None

    @atomic
    def sink_committed(self, id: GlobalId, upper: int, size_bytes: int = 0) -> None:
        """The :class:`~.outputs.CommitSink` of sink ``id`` landed: the target covers ``upper``.

        ``size_bytes``: what the target stored for it, where the driver knows (0: the bytes
        staged for it count as committed)."""
        sink = self._commit_outcome(id, upper, True, "sink_committed")
        if sink is None:
            return
        sink.commit_landed(size_bytes)
        self._publish()

    @atomic
    def sink_conflict(self, id: GlobalId, covered_upper: int | None) -> None:
        """The commit of sink ``id`` was refused: the target covers ``covered_upper`` (another
        incarnation committed). The sink continues from there."""
        sink = self._commit_outcome(id, covered_upper, False, "sink_conflict")
        if sink is None:
            return
        self._outbox.extend(sink.conflict(covered_upper))
        self._publish()

    @atomic
    def sink_failed(self, id: GlobalId, error: str) -> None:
        """Sink ``id``'s open or commit failed and nothing was committed: it stalls; a later tick retries."""
        sink = self._sinks.get(id)
        idle = sink is None or (sink.phase != "opening" and sink.inflight is None)
        if idle and (self._retired_outcome("open", id) or self._retired_outcome("commit", id)):
            return
        self._sink(id, "sink_failed").failed(str(error), self._now)
        self._publish()
