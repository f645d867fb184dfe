"""Test machinery for the command history: a model replica and a churn workload.

* :class:`ModelReplica` applies compute commands the way a replica's state
  changes under them -- live collections with their compaction frontiers,
  scheduled and writable collections, peeks still pending, the configuration
  -- and rejects commands that break a dependency rule of
  docs/reference/compute.md section 3 (:class:`~tidegate.spec.errors.IllegalReplay`).
  Replaying a reduced history into a fresh model must give the same
  :meth:`ModelReplica.state` as replaying the full history (law H7).
* :class:`ChurnWorkload` generates a legal controller command stream that
  creates, compacts and drops dataflows, peeks and cancels, and updates the
  configuration, with replica-side :class:`Answered` events interleaved. Its
  choices come from a ``choose(n) -> int in range(n)`` function, so
  Hypothesis (``data.draw``) and benchmarks (``random.Random.randrange``)
  drive the same generator.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeAlias, TypeVar

from ..errors import IllegalReplay
from ..frontier import Antichain
from ..ids import GlobalId
from ..protocol.commands import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    Hello,
    InitializationComplete,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from ..protocol.types import (
    BuildDesc,
    ComputeParameters,
    DataflowDescription,
    IndexExport,
    IndexImport,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    PeekDescription,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)

__all__ = [
    "DATAFLOW_KINDS",
    "Answered",
    "ChurnWorkload",
    "DataflowShape",
    "HistoryEvent",
    "ModelReplica",
    "ReplicaModelState",
    "replay_to_model",
]


@dataclass(frozen=True, slots=True)
class Answered:
    """The replica answered peek ``uuid`` (a replica-side event, not a command)."""

    uuid: _uuid.UUID


HistoryEvent: TypeAlias = ComputeCommand | Answered
"""What a :class:`ChurnWorkload` step yields: commands the controller sends, and answers."""


@dataclass(frozen=True, slots=True)
class ReplicaModelState:
    """A snapshot of a :class:`ModelReplica`: what H7 compares.

    ``collections`` maps each live collection to its compaction frontier;
    ``pending_peeks`` are peeks neither answered nor cancelled;
    ``answered_peeks`` were answered but the controller has not cancelled them yet.
    """

    collections: dict[GlobalId, Antichain]
    scheduled: frozenset[GlobalId]
    writable: frozenset[GlobalId]
    pending_peeks: dict[_uuid.UUID, PeekDescription]
    answered_peeks: frozenset[_uuid.UUID]
    config: ComputeParameters
    instance: InstanceConfig | None
    initialized: bool

    @property
    def outstanding_peeks(self) -> frozenset[_uuid.UUID]:
        """Peeks the controller still considers live: pending or answered, not cancelled."""
        return frozenset(self.pending_peeks) | self.answered_peeks


class ModelReplica:
    """A minimal replica: applies commands to its live state and checks dependency rules.

    Compaction frontiers only move forward (an ``AllowCompaction`` behind the
    current frontier changes nothing); ``AllowCompaction(id, [])`` drops the
    collection. A raised :class:`IllegalReplay` leaves the model unchanged.
    """

    def __init__(self) -> None:
        self._collections: dict[GlobalId, Antichain] = {}
        self._created: set[GlobalId] = set()
        self._scheduled: set[GlobalId] = set()
        self._writable: set[GlobalId] = set()
        self._pending: dict[_uuid.UUID, PeekDescription] = {}
        self._answered: set[_uuid.UUID] = set()
        self._seen_peeks: set[_uuid.UUID] = set()
        self._config = ComputeParameters()
        self._instance: InstanceConfig | None = None
        self._hello = False
        self._initialized = False

    def apply(self, cmd: ComputeCommand) -> None:
        """Apply one command."""
        if type(cmd) is Hello:
            if self._hello:
                raise IllegalReplay("one-hello", "a second Hello in one iteration")
            self._hello = True
        elif type(cmd) is CreateInstance:
            if self._instance is not None:
                raise IllegalReplay("one-create-instance", "a second CreateInstance")
            logs = [gid for _, gid in cmd.config.logging.index_logs]
            self._require_new(logs)
            self._instance = cmd.config
            for gid in logs:
                self._collections[gid] = Antichain.from_elem(0)
                self._created.add(gid)
        elif type(cmd) is InitializationComplete:
            if self._initialized:
                raise IllegalReplay(
                    "one-initialization-complete", "a second InitializationComplete"
                )
            self._initialized = True
        elif type(cmd) is UpdateConfiguration:
            self._config = self._config.update(cmd.params)
        elif type(cmd) is CreateDataflow:
            self._create(cmd.dataflow)
        elif type(cmd) is Schedule:
            self._require_live(cmd.id, "schedule-after-create")
            self._scheduled.add(cmd.id)
        elif type(cmd) is AllowWrites:
            self._require_live(cmd.id, "allow-writes-after-create")
            self._writable.add(cmd.id)
        elif type(cmd) is AllowCompaction:
            self._require_live(cmd.id, "compaction-after-create")
            if cmd.frontier.is_empty():
                del self._collections[cmd.id]
                self._scheduled.discard(cmd.id)
                self._writable.discard(cmd.id)
            else:
                self._collections[cmd.id] = self._collections[cmd.id].join(cmd.frontier)
        elif type(cmd) is Peek:
            self._peek(cmd.peek)
        elif type(cmd) is CancelPeek:
            if cmd.uuid not in self._seen_peeks:
                raise IllegalReplay("cancel-after-peek", f"CancelPeek for unknown peek {cmd.uuid}")
            self._pending.pop(cmd.uuid, None)
            self._answered.discard(cmd.uuid)
        else:
            raise IllegalReplay("known-command", f"not a compute command: {cmd!r}")

    def answer(self, uuid: _uuid.UUID) -> None:
        """The replica answers pending peek ``uuid``."""
        if uuid not in self._pending:
            raise IllegalReplay("answer-pending-peek", f"peek {uuid} is not pending")
        del self._pending[uuid]
        self._answered.add(uuid)

    def state(self) -> ReplicaModelState:
        return ReplicaModelState(
            collections=dict(self._collections),
            scheduled=frozenset(self._scheduled),
            writable=frozenset(self._writable),
            pending_peeks=dict(self._pending),
            answered_peeks=frozenset(self._answered),
            config=self._config,
            instance=self._instance,
            initialized=self._initialized,
        )

    # -- rules ---------------------------------------------------------------------

    def _require_live(self, gid: GlobalId, rule: str) -> None:
        if gid not in self._collections:
            raise IllegalReplay(rule, f"collection {gid} does not exist (never created or dropped)")

    def _require_new(self, ids: Iterable[GlobalId]) -> None:
        seen: set[GlobalId] = set()
        for gid in ids:
            if gid in self._created or gid in seen:
                raise IllegalReplay("exports-unique", f"collection {gid} created twice")
            seen.add(gid)

    def _create(self, dataflow: DataflowDescription) -> None:
        as_of = dataflow.as_of
        if as_of is None:
            raise IllegalReplay("as-of-set", f"dataflow {dataflow.debug_name!r} has no as_of")
        for imp in dataflow.index_imports:
            self._require_live(imp.id, "index-imports-exist")
            since = self._collections[imp.id]
            if not since.le(as_of):
                raise IllegalReplay(
                    "import-since-at-most-as-of",
                    f"dataflow {dataflow.debug_name!r} imports {imp.id} at since {since} > as_of {as_of}",
                )
        exports = dataflow.export_ids
        self._require_new(exports)
        for gid in exports:
            self._created.add(gid)
            if not as_of.is_empty():
                self._collections[gid] = as_of

    def _peek(self, peek: PeekDescription) -> None:
        if peek.uuid in self._seen_peeks:
            raise IllegalReplay("peek-uuid-unique", f"peek {peek.uuid} sent twice")
        if peek.target == "index":
            self._require_live(peek.id, "peek-after-create")
            since = self._collections[peek.id]
            if not since.less_equal(peek.timestamp):
                raise IllegalReplay(
                    "peek-at-readable-time",
                    f"peek {peek.uuid} reads {peek.id} at {peek.timestamp}, before its compaction frontier {since}",
                )
        self._seen_peeks.add(peek.uuid)
        self._pending[peek.uuid] = peek


def replay_to_model(
    events: Iterable[HistoryEvent | ComputeCommand], replica: ModelReplica | None = None
) -> ModelReplica:
    """Apply commands (and :class:`Answered` events) to ``replica`` (a fresh one by default)."""
    model = ModelReplica() if replica is None else replica
    for event in events:
        if type(event) is Answered:
            model.answer(event.uuid)
        else:
            model.apply(event)  # type: ignore[arg-type]
    return model


# -- the churn workload ----------------------------------------------------------------

Choose: TypeAlias = Callable[[int], int]
"""``choose(n)`` returns an int in ``range(n)`` (``n >= 1``)."""

_T = TypeVar("_T")


class _Bag(Generic[_T]):
    """A set with O(1) add, remove and uniform pick."""

    __slots__ = ("_items", "_pos")

    def __init__(self) -> None:
        self._items: list[_T] = []
        self._pos: dict[_T, int] = {}

    def add(self, item: _T) -> None:
        if item not in self._pos:
            self._pos[item] = len(self._items)
            self._items.append(item)

    def remove(self, item: _T) -> None:
        pos = self._pos.pop(item)
        last = self._items.pop()
        if pos < len(self._items):
            self._items[pos] = last
            self._pos[last] = pos

    def pick(self, choose: Choose) -> _T:
        return self._items[choose(len(self._items))]

    def __contains__(self, item: object) -> bool:
        return item in self._pos

    def __len__(self) -> int:
        return len(self._items)


@dataclass(slots=True)
class _Dataflow:
    key: int
    exports: list[GlobalId]
    imports: tuple[GlobalId, ...]


@dataclass(slots=True)
class _Export:
    since: int
    is_index: bool
    is_mv: bool
    peeks: dict[_uuid.UUID, int] = field(default_factory=dict)
    dependents: set[int] = field(default_factory=set)


DataflowShape: TypeAlias = Literal["index", "index_on_index", "index_subscribe", "mv", "index_mv"]
DATAFLOW_KINDS: tuple[DataflowShape, ...] = (
    "index",
    "index_on_index",
    "index_subscribe",
    "mv",
    "index_mv",
)
"""The dataflow shapes a :class:`ChurnWorkload` creates: one index on a source, an index on
another index, an index plus a subscribe, a materialized view, an index plus a materialized view."""

_SOURCES = tuple(GlobalId.user(i) for i in range(1, 4))
_PLAN = "get"  # plans are opaque to the history


class ChurnWorkload:
    """A legal, endless controller command stream over a bounded live state.

    Keeps about ``target_dataflows`` dataflows alive, of the given ``kinds``
    (:data:`DATAFLOW_KINDS`), compacts their exports within the
    holds that peeks and dependent dataflows place on them, peeks at readable
    times, answers and cancels peeks, and updates the configuration. Every
    command respects docs/reference/compute.md section 3, so a :class:`ModelReplica`
    accepts the stream.
    """

    def __init__(
        self,
        choose: Choose,
        *,
        target_dataflows: int = 6,
        log_indexes: int = 2,
        kinds: Sequence[DataflowShape] = DATAFLOW_KINDS,
    ) -> None:
        if not kinds or any(k not in DATAFLOW_KINDS for k in kinds):
            raise ValueError(
                f"kinds must be a non-empty selection of {DATAFLOW_KINDS}, got {kinds!r}"
            )
        self._kinds = tuple(kinds)
        self._choose = choose
        self._target = max(1, target_dataflows)
        self._now = 0
        self._next_id = 100
        self._next_uuid = 1
        self._next_key = 0
        self._exports: dict[GlobalId, _Export] = {}
        self._dataflows: dict[int, _Dataflow] = {}
        self._dataflow_bag: _Bag[int] = _Bag()
        self._indexes: _Bag[GlobalId] = _Bag()
        self._mvs: _Bag[GlobalId] = _Bag()
        self._peek_target: dict[_uuid.UUID, GlobalId | None] = {}
        self._uncancelled: _Bag[_uuid.UUID] = _Bag()
        self._unanswered: _Bag[_uuid.UUID] = _Bag()
        self._initialized = False
        self._logs = tuple(GlobalId.system(i) for i in range(1, log_indexes + 1))
        for gid in self._logs:
            self._exports[gid] = _Export(since=0, is_index=True, is_mv=False)
            self._indexes.add(gid)

    # -- what is live ----------------------------------------------------------------

    @property
    def live_dataflow_count(self) -> int:
        return len(self._dataflows)

    @property
    def live_collection_count(self) -> int:
        """Live exports of live dataflows, plus the log indexes."""
        return len(self._exports)

    @property
    def live_peek_count(self) -> int:
        """Peeks the controller has not cancelled yet."""
        return len(self._uncancelled)

    # -- generation ------------------------------------------------------------------

    def preamble(self) -> list[ComputeCommand]:
        """``Hello`` and ``CreateInstance`` (with this workload's log indexes)."""
        logging = LoggingConfig(
            index_logs=tuple((f"log{i}", gid) for i, gid in enumerate(self._logs))
        )
        return [Hello(_uuid.UUID(int=0)), CreateInstance(InstanceConfig(logging=logging))]

    def step(self) -> list[HistoryEvent]:
        """One random operation's events (possibly none, when the chosen operation is impossible)."""
        live = len(self._dataflows)
        below = live < self._target
        weights = (
            (self._create, 4 if below else 1),
            (self._drop, 1 if below else 4),
            (self._compact, 6),
            (self._peek, 3),
            (self._answer, 2),
            (self._cancel, 3),
            (self._configure, 1),
            (self._tick, 2),
            (self._initialization_complete, 0 if self._initialized else 1),
        )
        pick = self._choose(sum(w for _, w in weights))
        for op, weight in weights:
            if pick < weight:
                return op()
            pick -= weight
        return []  # not reached: pick < the total weight

    def events(self, steps: int) -> list[HistoryEvent]:
        """The preamble followed by ``steps`` steps."""
        out: list[HistoryEvent] = [*self.preamble()]
        for _ in range(steps):
            out.extend(self.step())
        return out

    # -- operations ------------------------------------------------------------------

    def _fresh_id(self, transient: bool = False) -> GlobalId:
        n = self._next_id
        self._next_id = n + 1
        return GlobalId.transient(n) if transient else GlobalId.user(n)

    def _create(self) -> list[HistoryEvent]:
        choose = self._choose
        kind = self._kinds[choose(len(self._kinds))]
        source = _SOURCES[choose(len(_SOURCES))]
        key = self._next_key
        self._next_key += 1
        as_of = self._now
        obj = self._fresh_id()
        source_imports: tuple[SourceImport, ...] = ()
        index_imports: tuple[IndexImport, ...] = ()
        index_exports: tuple[IndexExport, ...] = ()
        sink_exports: tuple[SinkExport, ...] = ()
        if kind == "index_on_index" and len(self._indexes):
            imported = self._indexes.pick(choose)
            index_imports = (IndexImport(imported, imported),)
            index_exports = (IndexExport(self._fresh_id(), obj),)
        else:
            source_imports = (SourceImport(source, Antichain.from_elem(self._now)),)
            if kind in ("mv", "index_mv"):
                sink_exports = (SinkExport(self._fresh_id(), obj, MaterializedViewConnection()),)
                if kind == "index_mv":
                    index_exports = (IndexExport(self._fresh_id(), obj),)
            else:
                index_exports = (IndexExport(self._fresh_id(), obj),)
                if kind == "index_subscribe":
                    sink_exports = (SinkExport(self._fresh_id(True), obj, SubscribeConnection()),)
        desc = DataflowDescription(
            debug_name=f"df{key}",
            source_imports=source_imports,
            index_imports=index_imports,
            objects_to_build=(BuildDesc(obj, _PLAN),),
            index_exports=index_exports,
            sink_exports=sink_exports,
            as_of=Antichain.from_elem(as_of),
        )
        imports = tuple(i.id for i in index_imports)
        record = _Dataflow(key, list(desc.export_ids), imports)
        self._dataflows[key] = record
        self._dataflow_bag.add(key)
        for gid in imports:
            self._exports[gid].dependents.add(key)
        events: list[HistoryEvent] = [CreateDataflow(desc)]
        for e in index_exports:
            self._exports[e.id] = _Export(since=as_of, is_index=True, is_mv=False)
            self._indexes.add(e.id)
        for s in sink_exports:
            is_mv = isinstance(s.connection, MaterializedViewConnection)
            self._exports[s.id] = _Export(since=as_of, is_index=False, is_mv=is_mv)
            if is_mv:
                self._mvs.add(s.id)
        events.extend(Schedule(gid) for gid in record.exports)
        events.extend(AllowWrites(s.id) for s in sink_exports if s.id in self._mvs)
        return events

    def _hold(self, gid: GlobalId) -> int:
        """How far ``gid`` may compact: now, capped by its peeks and its dependents' sinces."""
        export = self._exports[gid]
        bound = self._now
        for t in export.peeks.values():
            bound = min(bound, t)
        for key in export.dependents:
            for dep in self._dataflows[key].exports:
                bound = min(bound, self._exports[dep].since)
        return bound

    def _compact(self) -> list[HistoryEvent]:
        choose = self._choose
        if choose(4) == 0 or not self._dataflows:
            gid = self._logs[choose(len(self._logs))] if self._logs else None
            if gid is None:
                return []
        else:
            record = self._dataflows[self._dataflow_bag.pick(choose)]
            gid = record.exports[choose(len(record.exports))]
        export = self._exports[gid]
        bound = self._hold(gid)
        if bound <= export.since:
            return []
        export.since += 1 + choose(bound - export.since)
        return [AllowCompaction(gid, Antichain.from_elem(export.since))]

    def _drop(self) -> list[HistoryEvent]:
        if not self._dataflows:
            return []
        choose = self._choose
        key = self._dataflow_bag.pick(choose)
        record = self._dataflows[key]
        exports = record.exports
        # Drop the whole dataflow, or (sometimes) one export of a multi-export one.
        victims = (
            [exports[choose(len(exports))]]
            if len(exports) > 1 and choose(3) == 0
            else list(exports)
        )
        if any(self._exports[g].peeks or self._exports[g].dependents for g in victims):
            return []
        events: list[HistoryEvent] = []
        for gid in victims:
            export = self._exports.pop(gid)
            exports.remove(gid)
            if export.is_index:
                self._indexes.remove(gid)
            if export.is_mv:
                self._mvs.remove(gid)
            events.append(AllowCompaction(gid, Antichain.empty()))
        if not exports:
            del self._dataflows[key]
            self._dataflow_bag.remove(key)
            for gid in record.imports:
                if gid in self._exports:
                    self._exports[gid].dependents.discard(key)
        return events

    def _peek(self) -> list[HistoryEvent]:
        choose = self._choose
        uuid = _uuid.UUID(int=self._next_uuid)
        if choose(8) == 0 and len(self._mvs):
            # A persist peek: reads the storage collection, holds nothing on the compute side.
            gid = self._mvs.pick(choose)
            target: GlobalId | None = None
            desc = PeekDescription(uuid, gid, self._now, target="persist")
        elif not len(self._indexes):
            return []
        else:
            gid = self._indexes.pick(choose)
            export = self._exports[gid]
            time = export.since + choose(self._now - export.since + 1)
            export.peeks[uuid] = time
            target = gid
            desc = PeekDescription(uuid, gid, time)
        self._next_uuid += 1
        self._peek_target[uuid] = target
        self._uncancelled.add(uuid)
        self._unanswered.add(uuid)
        return [Peek(desc)]

    def _answer(self) -> list[HistoryEvent]:
        if not len(self._unanswered):
            return []
        uuid = self._unanswered.pick(self._choose)
        self._unanswered.remove(uuid)
        return [Answered(uuid)]

    def _cancel(self) -> list[HistoryEvent]:
        if not len(self._uncancelled):
            return []
        uuid = self._uncancelled.pick(self._choose)
        self._uncancelled.remove(uuid)
        if uuid in self._unanswered:
            self._unanswered.remove(uuid)
        target = self._peek_target.pop(uuid)
        if target is not None:
            del self._exports[target].peeks[uuid]
        return [CancelPeek(uuid)]

    def _configure(self) -> list[HistoryEvent]:
        choose = self._choose
        which = choose(3)
        if which == 0:
            params = ComputeParameters(max_result_size=1 + choose(1000))
        elif which == 1:
            params = ComputeParameters(workload_class=("production", "staging")[choose(2)])
        else:
            params = ComputeParameters(dyncfg_updates=((f"knob{choose(4)}", choose(100)),))
        return [UpdateConfiguration(params)]

    def _tick(self) -> list[HistoryEvent]:
        self._now += 1 + self._choose(3)
        return []

    def _initialization_complete(self) -> list[HistoryEvent]:
        self._initialized = True
        return [InitializationComplete()]
