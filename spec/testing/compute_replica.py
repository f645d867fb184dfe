"""A conformance harness for compute replicas: point it at any :class:`ComputeReplicaLike`.

* :class:`ReplicaStorageModel` -- a tiny storage model (collections of
  ``(row, time, diff)`` with an int upper, compare-and-append);
* :class:`ReplicaDriver` -- performs a replica's outputs against that storage
  (follows reads, appends writes, answers persist peeks) and checks every
  response with an independent :class:`~tidegate.spec.protocol.ReplicaSession`
  fed the same commands;
* :class:`ComputeReplicaMachine` -- a Hypothesis state machine playing a
  controller: random tables and appends, dataflows with real plans (indexes,
  subscribes, materialized views, index imports), schedules, writes,
  compaction, drops, peeks and cancels, reconnects that replay the reduced
  history. It checks that every peek answer equals the reference evaluation
  at its time, that every subscribe stream accumulates to the reference at
  each upper, that materialized views hold the reference contents, that a
  reconnect keeps exactly the reusable dataflows, and that after
  cancelling and dropping everything the replica owes nothing.

Use as ``TestX = MyMachine.TestCase`` after overriding
:meth:`ComputeReplicaMachine.make_replica`.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ..compute_replica import (
    ComputeReplica,
    PeekPersist,
    ReadSource,
    Reconciled,
    ReplicaOutput,
    Respond,
    StopReading,
    WriteCopyTo,
    WriteOutput,
)
from ..executor import PythonExecutor
from ..frontier import Antichain, Row, Update, accumulate
from ..history import CommandHistory
from ..ids import GlobalId
from ..plan.reference import Collection, evaluate_dataflow, reference_peek
from ..plan.schema import Schema
from ..plan.typecheck import gets, typecheck
from ..protocol import (
    AllowCompaction,
    AllowWrites,
    BuildDesc,
    CancelPeek,
    ComputeCommand,
    ComputeResponse,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekResponse,
    ReplicaSession,
    Schedule,
    SinkExport,
    SourceImport,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeResponse,
    UpdateConfiguration,
)
from ..protocol.types import ComputeParameters
from ..strategies.plan import peek_finishings, plans, schema_rows

__all__ = [
    "ComputeReplicaConformanceFailure",
    "ComputeReplicaLike",
    "ComputeReplicaMachine",
    "ReplicaDriver",
    "ReplicaStorageModel",
    "StoredCollection",
]

_EMPTY = Antichain()


class ComputeReplicaLike(Protocol):
    """What the harness drives: the interface of :class:`~tidegate.spec.compute_replica.ComputeReplica`."""

    def handle_command(self, cmd: ComputeCommand) -> None: ...

    def feed_source(
        self, collection_id: GlobalId, updates: Iterable[Update], upper: Antichain
    ) -> None: ...

    def step(self) -> None: ...

    def write_completed(self, sink_id: GlobalId, upper: Antichain) -> None: ...

    def write_failed(self, sink_id: GlobalId, actual_upper: Antichain) -> None: ...

    def complete_persist_peek(
        self,
        uuid: _uuid.UUID,
        rows: Mapping[Row, int] | None = None,
        *,
        error: str | None = None,
    ) -> None: ...

    def drain(self) -> list[ReplicaOutput]: ...


class ComputeReplicaConformanceFailure(AssertionError):
    """A replica's answer differs from the reference, or it did not pay what it owed."""


def _fail(msg: str) -> None:
    raise ComputeReplicaConformanceFailure(msg)


def _at(upper: int | None) -> Antichain:
    return _EMPTY if upper is None else Antichain([upper])


def _int(f: Antichain) -> int | None:
    return None if f.is_empty() else int(f.elements[0])


@dataclass
class StoredCollection:
    """A storage collection: its updates and its upper (``None`` = closed)."""

    updates: list[Update] = field(default_factory=list)
    upper: int | None = 0


class ReplicaStorageModel:
    """Storage collections in memory, keyed by id; int times."""

    def __init__(self) -> None:
        self.collections: dict[GlobalId, StoredCollection] = {}

    def create(self, gid: GlobalId, upper: int = 0) -> None:
        self.collections.setdefault(gid, StoredCollection(upper=upper))

    def upper(self, gid: GlobalId) -> int | None:
        return self.collections[gid].upper

    def append(self, gid: GlobalId, updates: Iterable[Update], new_upper: int | None) -> None:
        """Add updates at times in ``[upper, new_upper)`` and advance the upper."""
        c = self.collections[gid]
        batch = list(updates)
        for _r, t, _d in batch:
            if c.upper is None or t < c.upper or (new_upper is not None and t >= new_upper):
                raise ValueError(f"append to {gid}: time {t} outside [{c.upper}, {new_upper})")
        c.updates.extend(batch)
        c.upper = new_upper

    def compare_and_append(
        self, gid: GlobalId, updates: Iterable[Update], lower: int | None, upper: int | None
    ) -> int | None:
        """Append if the upper is ``lower``; return ``None`` on success, else the actual upper's int (-1 if closed)."""
        c = self.collections[gid]
        if c.upper != lower:
            return -1 if c.upper is None else c.upper
        self.append(gid, updates, upper)
        return None

    def contents(self, gid: GlobalId, time: int) -> dict[Row, int]:
        return accumulate(self.collections[gid].updates, time)


class ReplicaDriver:
    """Runs a replica against :class:`ReplicaStorageModel`, checking each response with its own session.

    ``auto_write``: perform every :class:`WriteOutput` at once (otherwise they
    wait in :attr:`writes` until :meth:`complete_writes`).
    """

    def __init__(
        self, replica: ComputeReplicaLike, storage: ReplicaStorageModel, *, auto_write: bool = True
    ) -> None:
        self.replica = replica
        self.storage = storage
        self.auto_write = auto_write
        self.checker = ReplicaSession()
        self.responses: list[ComputeResponse] = []
        self.reads: dict[GlobalId, tuple[int, int | None]] = {}
        self.writes: dict[GlobalId, WriteOutput] = {}
        self.copy_tos: dict[GlobalId, WriteCopyTo] = {}
        """Copy-to writes handed out, for the test to complete (``copy_to_completed``/``failed``)."""
        self.persist_peeks: dict[_uuid.UUID, PeekPersist] = {}
        self.reconciled: list[Reconciled] = []
        self.write_log: list[WriteOutput] = []

    def command(self, cmd: ComputeCommand) -> list[ComputeResponse]:
        """Send one command; return the responses it produced."""
        self.checker.on_command(cmd)
        if isinstance(cmd, Hello):
            self.persist_peeks.clear()
        self.replica.handle_command(cmd)
        return self.perform()

    def step(self) -> list[ComputeResponse]:
        """Deliver storage data, then step the replica."""
        out = self.pump()
        self.replica.step()
        out.extend(self.perform())
        return out

    def pump(self) -> list[ComputeResponse]:
        """Deliver new storage data to every read, and answer persist peeks that are ready."""
        out: list[ComputeResponse] = []
        for gid, (as_of, delivered) in sorted(self.reads.items()):
            upper = self.storage.upper(gid)
            updates = self.storage.collections[gid].updates
            if delivered is None:
                if upper is not None and upper <= as_of:
                    continue
                acc: dict[tuple[Row, int], int] = {}
                for r, t, d in updates:
                    k = (r, max(t, as_of))
                    acc[k] = acc.get(k, 0) + d
                batch = [(r, t, d) for (r, t), d in acc.items() if d]
            else:
                if delivered == upper or (delivered is None):
                    continue
                batch = [u for u in updates if u[1] >= delivered]
            self.reads[gid] = (as_of, upper)
            self.replica.feed_source(gid, batch, _at(upper))
            out.extend(self.perform())
        for uuid, pp in sorted(self.persist_peeks.items()):
            if pp.collection_id not in self.storage.collections:
                del self.persist_peeks[uuid]
                self.replica.complete_persist_peek(
                    uuid, error=f"unknown storage collection {pp.collection_id}"
                )
                out.extend(self.perform())
                continue
            upper = self.storage.upper(pp.collection_id)
            if upper is not None and upper <= pp.timestamp:
                continue
            del self.persist_peeks[uuid]
            rows = self.storage.contents(pp.collection_id, pp.timestamp)
            self.replica.complete_persist_peek(uuid, rows)
            out.extend(self.perform())
        return out

    def complete_writes(self) -> list[ComputeResponse]:
        out: list[ComputeResponse] = []
        for gid in sorted(self.writes):
            out.extend(self._write(self.writes.pop(gid)))
        return out

    def _write(self, w: WriteOutput) -> list[ComputeResponse]:
        self.write_log.append(w)
        actual = self.storage.compare_and_append(w.sink_id, w.updates, _int(w.lower), _int(w.upper))
        if actual is None:
            self.replica.write_completed(w.sink_id, w.upper)
        else:
            self.replica.write_failed(w.sink_id, _EMPTY if actual < 0 else Antichain([actual]))
        return self.perform()

    def perform(self, taken: Sequence[ReplicaOutput] = ()) -> list[ComputeResponse]:
        """Carry out ``taken`` (outputs already drained) and the replica's outputs.

        Returns the responses among them (and among their consequences).
        """
        out: list[ComputeResponse] = []
        for o in [*taken, *self.replica.drain()]:
            if isinstance(o, Respond):
                self.checker.on_response(o.response)
                self.responses.append(o.response)
                out.append(o.response)
            elif isinstance(o, ReadSource):
                self.reads[o.collection_id] = (_int(o.as_of) or 0, None)
            elif isinstance(o, StopReading):
                self.reads.pop(o.collection_id, None)
            elif isinstance(o, WriteOutput):
                if o.sink_id in self.writes:
                    _fail(f"second write in flight for {o.sink_id}")
                if self.auto_write:
                    out.extend(self._write(o))
                else:
                    self.writes[o.sink_id] = o
            elif isinstance(o, PeekPersist):
                self.persist_peeks[o.uuid] = o
            elif isinstance(o, WriteCopyTo):
                self.copy_tos[o.sink_id] = o
            elif isinstance(o, Reconciled):
                self.reconciled.append(o)
        return out


# -- the machine ----------------------------------------------------------------------------

_TABLES = {
    GlobalId.user(1): Schema.of(("k", "int64", False), ("s", "string")),
    GlobalId.user(2): Schema.of(("k", "int64", False), ("v", "int64")),
}


@dataclass
class _Col:
    desc: DataflowDescription
    kind: str  # "index" | "subscribe" | "mv"
    on: GlobalId  # the object it exports
    since: int
    dropped: bool = False
    scheduled: bool = False
    writable: bool = False


class ComputeReplicaMachine(RuleBasedStateMachine):
    """A controller driving one replica against the reference (see the module docstring).

    Override :meth:`make_replica` to test another implementation.
    """

    quiesce_steps = 20

    def __init__(self) -> None:
        super().__init__()
        self.storage = ReplicaStorageModel()
        for gid in _TABLES:
            self.storage.create(gid)
        self.driver = ReplicaDriver(self.make_replica(), self.storage)
        self.history = CommandHistory()
        self.cols: dict[GlobalId, _Col] = {}
        self.objects: dict[GlobalId, tuple[DataflowDescription, Schema]] = {}
        self.peeks: dict[_uuid.UUID, PeekDescription] = {}
        self.cancelled: set[_uuid.UUID] = set()
        self.streams: dict[GlobalId, list[tuple[Any, Row, int]]] = {}
        # Per dataflow (its export ids): the as_of the replica built it at, and whether it has
        # read its snapshot (fed past that as_of), without which a reconnect rebuilds it.
        self.built_as_of: dict[tuple[GlobalId, ...], int] = {}
        self.snapshot_read: set[tuple[GlobalId, ...]] = set()
        self._next = 100
        self._nonce = 0
        self._busy = False

    def make_replica(self) -> ComputeReplicaLike:
        """The replica under test (override this)."""
        return ComputeReplica(PythonExecutor())

    # -- plumbing -------------------------------------------------------------------

    def fresh(self) -> int:
        self._next += 1
        return self._next

    def send(self, cmd: ComputeCommand, *, record: bool = True) -> None:
        if record:
            self.history.push(cmd)
        self.absorb(self.driver.command(cmd))

    def absorb(self, responses: Iterable[ComputeResponse]) -> None:
        for resp in responses:
            if isinstance(resp, PeekResponse):
                self.check_peek(resp)
            elif isinstance(resp, SubscribeResponse) and isinstance(resp.result, SubscribeBatch):
                self.check_subscribe(resp.id, resp.result)

    def live(self, kind: str | None = None) -> list[GlobalId]:
        return sorted(
            g for g, c in self.cols.items() if not c.dropped and (kind is None or c.kind == kind)
        )

    def dependents(self, gid: GlobalId) -> list[_Col]:
        return [
            c
            for c in self.cols.values()
            if not c.dropped and any(i.id == gid for i in c.desc.index_imports)
        ]

    # -- the reference --------------------------------------------------------------

    def reference(self, obj: GlobalId, time: int) -> Collection:
        desc, _schema = self.objects[obj]
        inputs = {s.id: self.storage.collections[s.id].updates for s in desc.source_imports}
        imported = {i.on_id: self.reference(i.on_id, time) for i in desc.index_imports}
        return evaluate_dataflow(desc, inputs, time, imported)[obj]

    def check_peek(self, resp: PeekResponse) -> None:
        peek = self.peeks.pop(resp.uuid, None)
        if peek is None:
            _fail(f"answer for a peek that is not pending: {resp}")
            return
        if isinstance(resp.result, PeekCanceled):
            if resp.uuid not in self.cancelled:
                _fail(f"peek {resp.uuid} answered Canceled without a CancelPeek")
            return
        if peek.target == "persist":
            expected = reference_peek(
                Collection(self.storage.contents(peek.id, int(peek.timestamp))), peek.finishing
            )
        else:
            col = self.cols[peek.id]
            expected = reference_peek(self.reference(col.on, int(peek.timestamp)), peek.finishing)
        if resp.result != expected:
            _fail(f"peek of {peek.id} at {peek.timestamp}: got {resp.result}, expected {expected}")
        # The controller cancels every finished peek so that its history can forget it.
        if resp.uuid not in self.cancelled:
            self.cancelled.add(resp.uuid)
            self.send(CancelPeek(resp.uuid))

    def check_subscribe(self, gid: GlobalId, batch: SubscribeBatch) -> None:
        col = self.cols[gid]
        stream = self.streams.setdefault(gid, [])
        stream.extend(batch.updates)
        upper = _int(batch.upper)
        as_of = _int(col.desc.as_of or _EMPTY)
        if upper is None or as_of is None or upper - 1 < as_of or batch.error is not None:
            return
        expected = self.reference(col.on, upper - 1)
        if expected.errors:
            return
        got = accumulate([(r, t, d) for t, r, d in stream], upper - 1)
        if got != expected.rows:
            _fail(f"subscribe {gid} at {upper - 1}: accumulates to {got}, expected {expected.rows}")

    def check_views(self) -> None:
        for gid in self.live("mv"):
            col = self.cols[gid]
            upper = self.storage.upper(gid)
            as_of = _int(col.desc.as_of or _EMPTY)
            if upper is None or as_of is None or upper - 1 < as_of:
                continue
            expected = self.reference(col.on, upper - 1)
            if not expected.errors and self.storage.contents(gid, upper - 1) != expected.rows:
                _fail(f"materialized view {gid} at {upper - 1} differs from the reference")

    # -- rules ----------------------------------------------------------------------

    @initialize(logging=st.booleans())
    def connect(self, logging: bool) -> None:
        logs = (("peek_durations", GlobalId.system(1)), ("dataflow_steps", GlobalId.system(2)))
        config = InstanceConfig(LoggingConfig(enable_logging=logging, index_logs=logs))
        self._nonce += 1
        self.send(Hello(_uuid.UUID(int=self._nonce)))
        self.send(CreateInstance(config))
        self.send(InitializationComplete())

    @rule(
        table=st.sampled_from(sorted(_TABLES)),
        data=st.data(),
        advance=st.integers(1, 3),
    )
    def append(self, table: GlobalId, data: st.DataObject, advance: int) -> None:
        upper = self.storage.upper(table)
        assert upper is not None
        rows = data.draw(
            st.lists(
                st.tuples(
                    schema_rows(_TABLES[table]),
                    st.integers(upper, upper + advance - 1),
                    st.sampled_from([-1, 1, 1, 2]),
                ),
                max_size=4,
            )
        )
        self.storage.append(table, rows, upper + advance)
        if data.draw(st.booleans()):
            self.step()

    @rule(data=st.data(), kind=st.sampled_from(["index", "index", "subscribe", "mv", "both"]))
    def create_dataflow(self, data: st.DataObject, kind: str) -> None:
        inputs: dict[GlobalId, Schema] = dict(_TABLES)
        imports = [g for g in self.live("index") if g.namespace == "u"]
        chosen = data.draw(st.lists(st.sampled_from(imports), max_size=1)) if imports else []
        for ix in chosen:
            on = self.cols[ix].on
            inputs[on] = self.objects[on][1]
        plan = data.draw(plans(inputs, max_depth=2))
        schema = typecheck(plan)
        floor = max((self.cols[ix].since for ix in chosen), default=0)
        as_of = floor + data.draw(st.integers(0, 3))
        obj = GlobalId.user(self.fresh())
        read = set(gets(plan))
        key = (
            tuple(data.draw(st.lists(st.integers(0, schema.arity - 1), max_size=1)))
            if schema.arity
            else ()
        )
        index_exports: list[IndexExport] = []
        sink_exports: list[SinkExport] = []
        if kind in ("index", "both"):
            index_exports.append(IndexExport(GlobalId.user(self.fresh()), obj, key))
        if kind in ("subscribe", "both"):
            sink_exports.append(
                SinkExport(GlobalId.transient(self.fresh()), obj, SubscribeConnection())
            )
        if kind == "mv":
            sink_exports.append(
                SinkExport(GlobalId.user(self.fresh()), obj, MaterializedViewConnection())
            )
        desc = DataflowDescription(
            f"df{obj}",
            source_imports=tuple(
                SourceImport(g, _at(self.storage.upper(g))) for g in sorted(_TABLES) if g in read
            ),
            index_imports=tuple(
                IndexImport(ix, self.cols[ix].on, self.cols[ix].desc.index_exports[0].key)
                for ix in chosen
                if self.cols[ix].on in read
            ),
            objects_to_build=(BuildDesc(obj, plan),),
            index_exports=tuple(index_exports),
            sink_exports=tuple(sink_exports),
            as_of=Antichain([as_of]),
        )
        self.objects[obj] = (desc, schema)
        self.built_as_of[desc.export_ids] = as_of
        for e in index_exports:
            self.cols[e.id] = _Col(desc, "index", obj, as_of)
        for s in sink_exports:
            is_mv = isinstance(s.connection, MaterializedViewConnection)
            self.cols[s.id] = _Col(desc, "mv" if is_mv else "subscribe", obj, as_of)
            if is_mv:
                self.storage.create(s.id)
        self.send(CreateDataflow(desc))
        if data.draw(st.integers(0, 3)):
            for gid in desc.export_ids:
                self.schedule_one(gid)
        for gid in desc.persist_sink_ids:
            if data.draw(st.booleans()):
                self.cols[gid].writable = True
                self.send(AllowWrites(gid))

    def schedule_one(self, gid: GlobalId) -> None:
        self.cols[gid].scheduled = True
        self.send(Schedule(gid))

    @precondition(lambda self: any(not c.scheduled and not c.dropped for c in self.cols.values()))
    @rule(data=st.data())
    def schedule(self, data: st.DataObject) -> None:
        gid = data.draw(st.sampled_from([g for g in self.live() if not self.cols[g].scheduled]))
        self.schedule_one(gid)

    @precondition(lambda self: any(not self.cols[g].writable for g in self.live("mv")))
    @rule(data=st.data())
    def allow_writes(self, data: st.DataObject) -> None:
        gid = data.draw(st.sampled_from([g for g in self.live("mv") if not self.cols[g].writable]))
        self.cols[gid].writable = True
        self.send(AllowWrites(gid))

    @precondition(lambda self: bool(self.live("index")))
    @rule(data=st.data(), by=st.integers(1, 3))
    def allow_compaction(self, data: st.DataObject, by: int) -> None:
        gid = data.draw(st.sampled_from(self.live("index")))
        col = self.cols[gid]
        cap = min(
            [col.since + by]
            + [int(p.timestamp) for p in self.peeks.values() if p.id == gid]
            + [_int(c.desc.as_of or _EMPTY) or 0 for c in self.dependents(gid)]
        )
        if cap > col.since:
            col.since = cap
            self.send(AllowCompaction(gid, Antichain([cap])))

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        candidates = [
            g
            for g in self.live()
            if not self.dependents(g) and not any(p.id == g for p in self.peeks.values())
        ]
        if candidates:
            gid = data.draw(st.sampled_from(candidates))
            self.cols[gid].dropped = True
            self.send(AllowCompaction(gid, _EMPTY))

    @precondition(lambda self: bool(self.live("index")))
    @rule(data=st.data(), ahead=st.integers(0, 2))
    def peek(self, data: st.DataObject, ahead: int) -> None:
        gid = data.draw(st.sampled_from(self.live("index")))
        col = self.cols[gid]
        arity = self.objects[col.on][1].arity
        finishing = data.draw(peek_finishings(arity))
        p = PeekDescription(_uuid.UUID(int=self.fresh()), gid, col.since + ahead, finishing)
        self.peeks[p.uuid] = p
        self.send(Peek(p))

    @rule(table=st.sampled_from(sorted(_TABLES)), ts=st.integers(0, 6))
    def persist_peek(self, table: GlobalId, ts: int) -> None:
        p = PeekDescription(_uuid.UUID(int=self.fresh()), table, ts, target="persist")
        self.peeks[p.uuid] = p
        self.send(Peek(p))

    @precondition(lambda self: bool(self.peeks))
    @rule(data=st.data())
    def cancel_peek(self, data: st.DataObject) -> None:
        uuid = data.draw(st.sampled_from(sorted(self.peeks)))
        if uuid not in self.cancelled:
            self.cancelled.add(uuid)
            self.send(CancelPeek(uuid))

    @rule(limit=st.booleans())
    def update_configuration(self, limit: bool) -> None:
        # A generous limit keeps the reference comparison exact; a tiny one is checked in examples.
        self.send(UpdateConfiguration(ComputeParameters(max_result_size=10**6 if limit else None)))

    @rule()
    def step(self) -> None:
        self._busy = True
        self.absorb(self.driver.step())
        self.note_snapshots()
        self.check_views()
        self._busy = False

    def note_snapshots(self) -> None:
        """After a step: running dataflows whose every source's upper is past their as_of were fed
        their snapshot."""
        for key, as_of in self.built_as_of.items():
            cols = [self.cols[g] for g in key]
            running = all(c.scheduled or c.dropped for c in cols) and any(
                not c.dropped for c in cols
            )
            uppers = [self.storage.upper(s.id) for s in cols[0].desc.source_imports]
            if running and all(u is None or u > as_of for u in uppers):
                self.snapshot_read.add(key)

    @rule(often=st.integers(0, 3))
    def reconnect(self, often: int) -> None:
        """A new connection: replay the reduced history, as a controller rehydrating a replica does."""
        if often:
            return
        self._busy = True
        self.history.reduce()
        self.history.update_source_uppers(
            {g: _at(self.storage.upper(g)) for g in self.storage.collections}
        )
        replay = list(self.history)
        before = len(self.driver.reconciled)
        self._nonce += 1
        self.streams.clear()
        for cmd in replay:
            if isinstance(cmd, Hello):
                cmd = Hello(_uuid.UUID(int=self._nonce))
            self.send(cmd, record=False)
        for uuid in sorted(self.peeks):
            if (
                uuid in self.cancelled
            ):  # cancelled and unanswered: abandoned with the old connection
                del self.peeks[uuid]
        new = self.driver.reconciled[before:]
        if len(new) != 1:
            _fail(f"a reconnect produced {len(new)} Reconciled outputs, expected one")
        expected = {
            c.desc.export_ids for c in self.cols.values() if not c.dropped and self.reusable(c.desc)
        }
        if set(new[0].reused) != expected:
            _fail(f"reconnect reused {sorted(new[0].reused)}, expected {sorted(expected)}")
        for cmd in replay:
            if not isinstance(cmd, CreateDataflow):
                continue
            key = cmd.dataflow.export_ids
            as_of = _int(cmd.dataflow.as_of or _EMPTY)
            if key not in new[0].reused and as_of is not None:
                self.built_as_of[key] = as_of  # rebuilt from the replayed command
                self.snapshot_read.discard(key)
        self._busy = False

    def reusable(self, desc: DataflowDescription) -> bool:
        if desc.subscribe_ids or any(self.cols[g].dropped for g in desc.export_ids):
            return False
        if desc.source_imports and desc.export_ids not in self.snapshot_read:
            return False  # its as_of may be compacted away in storage: rebuilt at the new one
        return all(self.reusable(self.cols[i.id].desc) for i in desc.index_imports)

    def teardown(self) -> None:
        if self._busy:
            return  # a rule failed mid-way: do not mask it
        for uuid in sorted(self.peeks):
            if uuid not in self.cancelled:
                self.cancelled.add(uuid)
                self.send(CancelPeek(uuid))
        order = sorted(self.live(), key=lambda g: -len(self.dependents(g)))
        while order:
            gid = next(g for g in order if not self.dependents(g))
            order.remove(gid)
            self.cols[gid].dropped = True
            self.send(AllowCompaction(gid, _EMPTY))
        for _ in range(self.quiesce_steps):
            if self.driver.checker.owes_nothing():
                break
            self.absorb(self.driver.step())
        if not self.driver.checker.owes_nothing():
            _fail(
                f"after {self.quiesce_steps} steps the replica still owes: peeks "
                f"{list(self.driver.checker.pending_peeks)}, "
                f"[] reports {self.driver.checker.owed_frontier_reports()}, "
                f"DroppedAt {self.driver.checker.owed_dropped_at()}"
            )
