"""The explored system: the spec's compute controller, its replicas' cores and the network between.

One :class:`World` holds everything that can differ between two interleavings:

* the :class:`~tidegate.spec.compute.ComputeController` (with ``check_protocol``: a
  :class:`~tidegate.spec.protocol.ControllerSession` judges every command it sends and
  every response it takes) over an in-memory storage layer of 2-3 tables;
* per replica a :class:`~tidegate.spec.compute_replica.ComputeReplica` on the Python
  executor, run by :class:`~tidegate.spec.testing.compute_replica.ReplicaDriver` (which
  feeds it the tables' data and checks each response with a
  :class:`~tidegate.spec.protocol.ReplicaSession` of its own);
* per replica two FIFO channels: the commands of its open connection (controller to
  replica) and the responses in flight (replica to controller), each tagged with the
  connection's epoch;
* the client's record of what it asked and what it was told (its peeks, their answers,
  the read policies it set), which the invariants judge the answers against.

:meth:`World.actions` lists the enabled actions; :meth:`World.apply` performs one and
returns the violations it saw. Actions are plain tuples, so a path prints as a trace.
Nothing here reads a clock or draws randomness: one action from one state always leads to
the same state (the explorer relies on it when it replays a path).
"""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.compute import (
    ComputeController,
    ConnectReplica,
    DisconnectReplica,
    InMemoryStorage,
    PeekResultOut,
    SendCommand,
)
from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.errors.protocol import ProtocolError
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Get, Union
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol.commands import (
    AllowCompaction,
    ComputeCommand,
    CreateInstance,
    Hello,
    InitializationComplete,
)
from tidegate.spec.protocol.responses import (
    ComputeResponse,
    PeekCanceled,
    PeekError,
    PeekRows,
)
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.testing.compute_replica import ReplicaDriver, ReplicaStorageModel

__all__ = ["Action", "Bounds", "Violation", "World", "describe"]

INSTANCE = "c"
SCHEMA = Schema.of(("k", "int64", False))
TABLES = (GlobalId.user(1), GlobalId.user(2), GlobalId.user(3))

Action = tuple[Any, ...]
"""An action: its kind, then its arguments (``("deliver_command", "r1")``)."""


@dataclass(frozen=True)
class Bounds:
    """How far the exploration goes: sizes of the configuration and budgets of each action kind."""

    replicas: int = 2
    collections: int = 2
    commands: int = 2
    """Client commands (create an index, peek, cancel, allow compaction, drop), in all."""
    faults: int = 1
    """Replica crashes and connection losses, in all."""
    ticks: int = 1
    """Times the tables advance (each appends one row per table)."""
    max_indexes: int = 3
    """Live indexes at most (one per table exists from the start)."""
    stale_responses: bool = True
    """Whether a response in flight on a closed connection may still reach the controller
    (tagged with its old epoch, which the controller must ignore); otherwise it is dropped
    on arrival, as the production driver drops it."""


@dataclass(frozen=True)
class Violation:
    """A property that failed, with what was seen."""

    property: str
    message: str


class Uuids:
    """A deterministic uuid counter that copies with the state (unlike a closure's cell)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> _uuid.UUID:
        self.n += 1
        return _uuid.UUID(int=self.n)


@dataclass
class Node:
    """One replica process and its two channels."""

    driver: ReplicaDriver
    incarnation: int = 1
    connection: int = 0
    """The epoch of the connection the controller opened last (0: none open)."""
    serving: int = 0
    """The epoch of the connection the replica last heard from (its responses go there)."""
    commands: list[tuple[int, list[ComputeCommand]]] = field(default_factory=list)
    """The commands in flight to the replica: one batch per controller call, as the driver
    flushes them, with the epoch of the connection they were sent on."""
    idle: bool = False
    """Nothing arrived since the replica last stepped (commands or table data), so a step
    would do nothing (``ComputeReplica.step``'s contract)."""
    responses: list[tuple[int, ComputeResponse]] = field(default_factory=list)
    stage: str = "closed"
    """The stage of the open connection by the explorer's own count (``hello``, ``instance``,
    ``initialized``), from the commands sent on it."""
    compaction: dict[GlobalId, Antichain] = field(default_factory=dict)
    """The last ``AllowCompaction`` frontier sent per collection on the open connection."""
    late_report: int = 0
    """The epoch of a failed connection whose failure may be reported once more, late (both
    directions of a broken connection notice it); 0 if none."""


@dataclass
class Index:
    """An index the client created: over which tables, from which as_of, with which lag."""

    tables: tuple[GlobalId, ...]
    as_of: int
    lag: int
    dropped: bool = False


@dataclass
class Client:
    """What the client asked for and was told."""

    indexes: dict[GlobalId, Index] = field(default_factory=dict)
    pending: dict[_uuid.UUID, tuple[GlobalId, int]] = field(default_factory=dict)
    cancelled: set[_uuid.UUID] = field(default_factory=set)
    answered: set[_uuid.UUID] = field(default_factory=set)
    commands: int = 0
    faults: int = 0
    ticks: int = 0
    next_id: int = 10


def _replica_name(i: int) -> str:
    return f"r{i + 1}"


def _rows(table_index: int, upper: int) -> dict[tuple[Any, ...], int]:
    """The rows of table ``table_index`` readable at a time before ``upper``: one per time."""
    return {(100 * (table_index + 1) + t,): 1 for t in range(upper)}


def describe(action: Action) -> str:
    """An action as one line of a trace."""
    kind, *args = action
    return str(kind) + ("(" + ", ".join(str(a) for a in args) + ")" if args else "")


class _SetupFailed(Exception):
    def __init__(self, violations: list[Violation]) -> None:
        super().__init__(violations)
        self.violations = violations


class World:
    """The whole explored system (see the module docstring)."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.tables = TABLES[: bounds.collections]
        self.storage = InMemoryStorage()
        self.data = ReplicaStorageModel()
        for i, t in enumerate(self.tables):
            self.storage.add_collection(t, since=0, upper=1)
            self.data.create(t)
            self.data.append(t, [(row, 0, d) for row, d in _rows(i, 1).items()], 1)
        self.ctl = ComputeController(self.storage, Uuids(), check_protocol=True)
        self.nodes: dict[str, Node] = {}
        self.client = Client()
        self.replica_names = [_replica_name(i) for i in range(bounds.replicas)]
        self._violations: list[Violation] = []
        self._opened: set[str] = set()
        self.setup_violations: list[Violation] = []
        """What went wrong while setting up (a planted bug may break the first handshake)."""
        self.ctl.create_instance(INSTANCE)
        self.ctl.initialization_complete()
        for name in self.replica_names:
            self.nodes[name] = Node(ReplicaDriver(ComputeReplica(PythonExecutor()), self.data))
            self.ctl.add_replica(INSTANCE, name)
        self._absorb()
        for t in self.tables:
            self._create_index((t,))
        self._absorb()
        try:
            self._settle()
        except _SetupFailed as e:
            self.setup_violations = e.violations

    def _settle(self) -> None:
        """Run every replica and channel until nothing moves, in one fixed order.

        The explored space starts here: the replicas connected and hydrated, one index per
        table readable. How the first handshakes interleave is left out on purpose; a fault
        replays them, and those interleavings are explored.
        """
        for _ in range(100):
            moved = False
            for name in self.replica_names:
                n = self.nodes[name]
                steps: list[Action] = [("deliver_command", name)] * len(n.commands)
                steps.append(("replica_step", name))
                for action in steps:
                    if action[0] == "replica_step" and n.idle:
                        continue
                    before = len(n.responses)
                    if self.apply(action):
                        raise _SetupFailed(self._violations)
                    moved = moved or action[0] == "deliver_command" or len(n.responses) > before
                while n.responses:
                    moved = True
                    if self.apply(("deliver_response", name)):
                        raise _SetupFailed(self._violations)
            moved = moved or any(n.commands for n in self.nodes.values())
            if not moved:
                return
        raise _SetupFailed([Violation("quiescence", "the first handshakes never settle")])

    # -- the enabled actions ---------------------------------------------------------------

    def actions(self) -> list[Action]:
        """Every action enabled now, in a fixed order."""
        b, c = self.bounds, self.client
        out: list[Action] = []
        live = sorted(i for i, x in c.indexes.items() if not x.dropped)
        if c.commands < b.commands:
            if len(live) < b.max_indexes:
                if len(self.tables) >= 2:
                    out.append(("create_index", *self.tables[:2]))
                else:
                    out.append(("create_index", *self.tables))
            for i in live:
                out.append(("peek", i))
                if c.indexes[i].lag > 0:
                    out.append(("allow_compaction", i))
                out.append(("drop", i))
            for u in sorted(c.pending):
                if u not in c.cancelled:
                    out.append(("cancel_peek", u.int))
        if c.ticks < b.ticks:
            out.append(("tick",))
        for name in self.replica_names:
            n = self.nodes[name]
            if n.commands:
                out.append(("deliver_command", name))
            if not n.idle:
                out.append(("replica_step", name))
            if n.responses:
                out.append(("deliver_response", name))
            if c.faults < b.faults:
                out.append(("disconnect", name))
                out.append(("crash", name))
            if n.late_report:
                out.append(("late_failure_report", name))
        return out

    def ample(self) -> list[Action] | None:
        """A subset of the enabled actions that is enough to explore (partial-order
        reduction), or ``None`` when every enabled action must be tried.

        A replica's local actions (deliver its next batch of commands, step it) touch only
        that replica and its channels: with the faults (late reports included) and the ticks
        used up, nothing else
        can reach its state but appends at the far ends of its channels, which commute with
        them. So once its command channel is not empty (a later delivery would otherwise be
        enabled from outside), exploring its local actions alone loses no behaviour of the
        others (the ample-set conditions C0-C2; the explorer checks C3 by expanding fully
        whenever a local action leads back to a state already seen).
        """
        b, c = self.bounds, self.client
        if c.faults < b.faults or c.ticks < b.ticks:
            return None
        if any(n.late_report for n in self.nodes.values()):
            return None
        for name in self.replica_names:
            n = self.nodes[name]
            if n.commands:
                out: list[Action] = [("deliver_command", name)]
                if not n.idle:
                    out.append(("replica_step", name))
                return out
        return None

    def environment_actions(self) -> list[Action]:
        """The enabled actions that are not the client's (the system making progress alone)."""
        client = {"create_index", "peek", "allow_compaction", "drop", "cancel_peek", "tick"}
        faults = {"disconnect", "crash", "late_failure_report"}
        return [a for a in self.actions() if a[0] not in client and a[0] not in faults]

    # -- performing one ----------------------------------------------------------------------

    def apply(self, action: Action) -> list[Violation]:
        """Perform ``action``; return the violations seen (an exception is one too)."""
        self._violations = []
        before = self._frontiers()
        try:
            getattr(self, "_do_" + action[0])(*action[1:])
            self._absorb()
        except AssertionError:
            raise
        except ProtocolError as e:  # a session refused what the other side sent
            self._flag("protocol", f"{type(e).__name__}: {e}")
        except Exception as e:  # any crash of the model is a finding, not an explorer error
            self._flag("no_crash", f"{type(e).__name__}: {e}")
        self._check_transition(before)
        self._check_state()
        return self._violations

    def _flag(self, prop: str, message: str) -> None:
        self._violations.append(Violation(prop, message))

    def _do_create_index(self, *tables: GlobalId) -> None:
        self.client.commands += 1
        self._create_index(tables)

    def _create_index(self, tables: tuple[GlobalId, ...]) -> None:
        c = self.client
        obj, idx = GlobalId.user(c.next_id), GlobalId.user(c.next_id + 1)
        c.next_id += 2
        as_of = max(int(self.storage.since(t).elements[0]) for t in tables)
        gets = tuple(Get(t, SCHEMA) for t in tables)
        plan = gets[0] if len(gets) == 1 else Union(gets)
        df = DataflowDescription(
            f"index-{idx}",
            source_imports=tuple(SourceImport(t) for t in tables),
            objects_to_build=(BuildDesc(obj, plan),),
            index_exports=(IndexExport(idx, obj, (0,)),),
            as_of=Antichain([as_of]),
        )
        self.ctl.create_dataflow(INSTANCE, df)
        self.ctl.set_read_policy(INSTANCE, [(idx, LagWriteFrontier(1, 1))])
        c.indexes[idx] = Index(tables, as_of, 1)

    def _do_peek(self, idx: GlobalId) -> None:
        self.client.commands += 1
        since = self.ctl.collection_frontiers(INSTANCE, idx).read_frontier
        ts = int(since.elements[0])
        uuid = self.ctl.peek(INSTANCE, idx, ts)
        self.client.pending[uuid] = (idx, ts)

    def _do_cancel_peek(self, n: int) -> None:
        self.client.commands += 1
        uuid = _uuid.UUID(int=n)
        self.client.cancelled.add(uuid)
        self.ctl.cancel_peek(INSTANCE, uuid)

    def _do_allow_compaction(self, idx: GlobalId) -> None:
        self.client.commands += 1
        self.client.indexes[idx].lag = 0
        self.ctl.set_read_policy(INSTANCE, [(idx, LagWriteFrontier(0, 1))])

    def _do_drop(self, idx: GlobalId) -> None:
        self.client.commands += 1
        self.client.indexes[idx].dropped = True
        self.ctl.drop_collections(INSTANCE, [idx])

    def _do_tick(self) -> None:
        """Every table gets one row at its upper and advances by one; storage's own hold
        follows one time behind (compute's holds keep what it needs)."""
        self.client.ticks += 1
        for i, t in enumerate(self.tables):
            upper = int(self.storage.upper(t).elements[0])
            self.data.append(t, [((100 * (i + 1) + upper,), upper, 1)], upper + 1)
            self.storage.advance_upper(t, Antichain([upper + 1]))
            self.storage.set_implied(t, Antichain([upper]))
        for n in self.nodes.values():
            n.idle = False
        self.ctl.storage_frontiers_advanced(self.tables)
        self.ctl.maintain()

    def _do_deliver_command(self, name: str) -> None:
        n = self.nodes[name]
        epoch, batch = n.commands.pop(0)
        n.idle = False
        for cmd in batch:
            if isinstance(cmd, Hello):
                n.serving = epoch
            self._route(name, n.driver.command(cmd))

    def _do_replica_step(self, name: str) -> None:
        n = self.nodes[name]
        n.idle = True
        self._route(name, n.driver.step())

    def _do_deliver_response(self, name: str) -> None:
        n = self.nodes[name]
        epoch, resp = n.responses.pop(0)
        if epoch != n.connection and not self.bounds.stale_responses:
            return  # the driver drops what arrives on a closed connection
        self.ctl.handle_response(INSTANCE, name, epoch, resp)
        self.ctl.maintain()

    def _do_disconnect(self, name: str) -> None:
        """The connection breaks; the replica process lives on (and reconciles on the next)."""
        self.client.faults += 1
        n = self.nodes[name]
        n.commands.clear()
        n.late_report = n.connection
        self.ctl.replica_failed(INSTANCE, name, n.connection, "connection lost")

    def _do_late_failure_report(self, name: str) -> None:
        """A second report of a failure the controller has already handled (it must ignore it)."""
        n = self.nodes[name]
        epoch, n.late_report = n.late_report, 0
        self.ctl.replica_failed(INSTANCE, name, epoch, "connection lost (reported again)")

    def _do_crash(self, name: str) -> None:
        """The replica process dies and restarts empty; its connection breaks with it."""
        self.client.faults += 1
        n = self.nodes[name]
        n.commands.clear()
        n.driver = ReplicaDriver(ComputeReplica(PythonExecutor()), self.data)
        n.idle = False
        n.incarnation += 1
        n.serving = 0
        n.late_report = n.connection
        self.ctl.replica_failed(INSTANCE, name, n.connection, "replica crashed")

    def _route(self, name: str, responses: list[ComputeResponse]) -> None:
        n = self.nodes[name]
        if n.stage != "initialized" and responses:
            self._flag("stages", f"{name} answered before InitializationComplete: {responses}")
        for r in responses:
            n.responses.append((n.serving, r))

    # -- the controller's effects ----------------------------------------------------------

    def _absorb(self) -> None:
        self._opened = set()  # the replicas whose batch of this call is open
        for e in self.ctl.drain():
            if isinstance(e, ConnectReplica):
                n = self.nodes[e.replica]
                n.connection = e.epoch
                n.commands = []
                n.stage = "open"
                n.compaction = {}
            elif isinstance(e, DisconnectReplica):
                n = self.nodes[e.replica]
                if n.connection == e.epoch:
                    n.commands = []
                    n.stage = "closed"
            elif isinstance(e, SendCommand):
                self._send(e)
            elif isinstance(e, PeekResultOut):
                self._judge_peek(e)

    def _send(self, e: SendCommand) -> None:
        n = self.nodes[e.replica]
        if e.epoch != n.connection:
            self._flag(
                "epochs", f"a command for {e.replica} on epoch {e.epoch}, open {n.connection}"
            )
            return
        cmd = e.command
        # The protocol's stage order, counted here from the commands sent (reference §5).
        if isinstance(cmd, Hello):
            ok, n.stage = n.stage in ("open", "hello", "instance", "initialized"), "hello"
        elif isinstance(cmd, CreateInstance):
            ok, n.stage = n.stage == "hello", "instance"
        elif isinstance(cmd, InitializationComplete):
            ok, n.stage = n.stage == "instance", "initialized"
        else:
            ok = n.stage in ("instance", "initialized")
        if not ok:
            self._flag("stages", f"{type(cmd).__name__} sent to {e.replica} in stage {n.stage}")
        if isinstance(cmd, AllowCompaction):
            prev = n.compaction.get(cmd.id)
            if prev is not None and not prev <= cmd.frontier:
                self._flag(
                    "compaction_monotone",
                    f"AllowCompaction({cmd.id}) to {e.replica} went back: {prev} -> {cmd.frontier}",
                )
            n.compaction[cmd.id] = cmd.frontier
        if e.replica in self._opened and n.commands and n.commands[-1][0] == e.epoch:
            n.commands[-1][1].append(cmd)
        else:
            n.commands.append((e.epoch, [cmd]))
            self._opened.add(e.replica)

    def _judge_peek(self, e: PeekResultOut) -> None:
        c = self.client
        if e.uuid in c.answered:
            self._flag("peek_answered_once", f"peek {e.uuid.int} answered twice: {e.result}")
            return
        asked = c.pending.pop(e.uuid, None)
        if asked is None:
            self._flag("peek_answered_once", f"an answer for peek {e.uuid.int} nobody asked")
            return
        c.answered.add(e.uuid)
        idx, ts = asked
        index = c.indexes[idx]
        result = e.result
        if isinstance(result, PeekCanceled):
            if e.uuid not in c.cancelled:
                self._flag("peek_result", f"peek {e.uuid.int} of {idx} cancelled by nobody")
        elif isinstance(result, PeekError):
            if not index.dropped:
                self._flag("peek_result", f"peek {e.uuid.int} of {idx} at {ts}: {result.message}")
        elif isinstance(result, PeekRows):
            expected: dict[tuple[Any, ...], int] = {}
            for t in index.tables:
                expected.update(_rows(self.tables.index(t), ts + 1))
            got = {tuple(row): d for row, d in result.rows}
            if got != expected:
                self._flag(
                    "peek_result",
                    f"peek {e.uuid.int} of {idx} at {ts}: got {sorted(got)}, "
                    f"expected {sorted(expected)}",
                )

    # -- invariants ------------------------------------------------------------------------

    def _frontiers(self) -> dict[GlobalId, tuple[Antichain, Antichain]]:
        out = {}
        for idx, x in self.client.indexes.items():
            if not x.dropped:
                f = self.ctl.collection_frontiers(INSTANCE, idx)
                out[idx] = (f.read_frontier, f.write_frontier)
        return out

    def _check_transition(self, before: dict[GlobalId, tuple[Antichain, Antichain]]) -> None:
        """Frontiers only move forward (reference §3: a since or upper never goes back)."""
        after = self._frontiers()
        for idx, (since, upper) in before.items():
            if idx not in after:
                continue
            since2, upper2 = after[idx]
            if not since <= since2:
                self._flag("frontiers_monotone", f"since of {idx} went back: {since} -> {since2}")
            if not upper <= upper2:
                self._flag("frontiers_monotone", f"upper of {idx} went back: {upper} -> {upper2}")

    def _check_state(self) -> None:
        c = self.client
        try:
            frontiers = self._frontiers()
        except Exception as e:
            self._flag("no_crash", f"{type(e).__name__}: {e}")
            return
        for uuid, (idx, ts) in sorted(c.pending.items()):
            if idx in frontiers and not frontiers[idx][0].less_equal(ts):
                self._flag(
                    "read_holds",
                    f"pending peek {uuid.int} at {ts} lost its hold: since of {idx} is "
                    f"{frontiers[idx][0]}",
                )
        for idx, (since, _upper) in sorted(frontiers.items()):
            if not Antichain([c.indexes[idx].as_of]) <= since:
                self._flag("read_holds", f"since of {idx} is {since}, before its as_of")
            for t in c.indexes[idx].tables:
                if not self.storage.since(t) <= since:
                    self._flag(
                        "read_holds",
                        f"table {t} compacted to {self.storage.since(t)}, past the since "
                        f"{since} of {idx} that reads it",
                    )

    def check_quiescent(self) -> list[Violation]:
        """At rest (nothing in flight, no replica can move): what every finished run owes.

        Every peek that some connected replica could answer is answered; each index's since
        is where the client's policy puts it (its tables' upper less its lag, and at least
        one time behind that upper: the warmup hold; never before its as_of), held back only
        by the client's own pending peeks; every live index's upper is its tables' upper.
        """
        self._violations = []
        c = self.client
        connected = any(n.stage == "initialized" for n in self.nodes.values())
        if not connected:
            return []
        frontiers = self._frontiers()
        for idx, (since, upper) in sorted(frontiers.items()):
            index = c.indexes[idx]
            table_upper = min(int(self.storage.upper(t).elements[0]) for t in index.tables)
            if upper != Antichain([table_upper]):
                self._flag("quiescence", f"upper of {idx} is {upper}, its tables' is {table_upper}")
                continue
            # The policy's lag, and the warmup hold one time behind the inputs' uppers (which
            # keeps a rehydrating replica's first read of its inputs possible).
            want = max(index.as_of, min(table_upper - index.lag, table_upper - 1))
            held = [ts for (i, ts) in c.pending.values() if i == idx]
            if held:
                want = min(want, *held)
            want = max(want, index.as_of)
            if since != Antichain([want]):
                self._flag(
                    "quiescence",
                    f"since of {idx} is {since}, the client's policy (lag {index.lag}, upper "
                    f"{table_upper}, as_of {index.as_of}, peeks at {sorted(held)}) wants [{want}]",
                )
        for uuid, (idx, ts) in sorted(c.pending.items()):
            tables = c.indexes[idx].tables
            if all(int(self.storage.upper(t).elements[0]) > ts for t in tables):
                self._flag("quiescence", f"peek {uuid.int} of {idx} at {ts} never answered")
        return self._violations
