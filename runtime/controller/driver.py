"""The production controller driver: the spec :class:`Controller` driven over real IO, with anyio.

:class:`ControllerDriver` is the one driver of the spec controller, in
production and inside the simulator (:mod:`tidegate.sim` runs it unmodified):
nothing here decides protocol or controller behaviour, it maps the
controller's effects onto IO and feeds the outcomes back.

* ``ConnectReplica`` starts a :class:`~.links.ReplicaLink` (resolver asked on
  every attempt, capped backoff; each refused attempt is published as a
  ``failed`` status event with its reason, the link keeps trying);
  ``SendCommand`` queues on the link of that
  epoch; a broken stream becomes ``replica_failed`` (the spec replays the
  reduced history on epoch + 1); every response goes to ``handle_response``;
* storage effects go to :class:`~.storage_io.ShardStorageIO` (blocking calls
  on the :class:`~tidegate.runtime.platform.Platform`: worker threads, or
  inline for a small commit to a local store, or inline on the simulator's
  virtual clock);
* storage replicas: :meth:`ControllerDriver.connect_storage_replica` opens a
  link to a storage instance's replica over the storage protocol
  (:mod:`.storage_links`); ``SendStorageCommand`` queues on it,
  ``DisconnectStorageReplica`` closes it, a broken stream is connected again
  (the spec replays its reduced history) and every response goes to the
  storage controller's ``handle_response``;
* client effects resolve the waiting client calls (appends, peeks,
  snapshots), feed subscriptions, and publish replica status events;
* table writes are group-committed: appends that arrive while a commit is in
  flight join the next one (which waits a few turns of the event loop for the
  clients the last commit released, so a closed loop of clients shares one
  commit a round), which takes one timestamp from the oracle and
  advances *every* table's upper to just past it (tables without updates get
  an empty append), so the uppers move together; each append is acknowledged
  once its commit is durable, and the oracle's read timestamp then covers it,
  so a read that starts afterwards sees it (strict serializability). The
  storage-managed collections (status history, statistics) are written in the
  same commits: each ``ManagedWrite`` joins the next commit at its timestamp
  (an append's or the next tick's, so statistics reported many times a second
  cost no commits of their own; without ticks it asks for one), a
  ``truncate`` first retracting the collection's contents at ``upper - 1``
  (reference section 2.14); they advance with the tables;
* background tasks: an empty commit every ``tick_ms`` (frontiers progress
  without data), ``maintain()`` every ``maintain_ms``, and a poll of
  materialized-view shard uppers every ``poll_ms`` (replicas write them; the
  uppers come back as write frontiers);
* read-only mode (the spec controller's ``read_only``): no commits and no
  ticks; the poll learns the uppers of the tables, sources and managed
  collections too (another controller writes them) until
  :meth:`ControllerDriver.read_write`;
* fencing: ``fence_check`` (if set) says whether another controller took
  over. It runs when a commit fails, and after every commit that carries
  client appends, before they are acknowledged (Materialize's group commit
  confirms leadership the same way): a promotion that raced the commit either
  saw the write (it read the uppers after the write landed) or fenced it, and
  then the appends fail with the fencing error, unacknowledged. Once fenced,
  that error fails every later append at once (ticks stop).

All controller calls happen on the driver's event loop, one at a time; effects
are applied in the order produced (effects produced while applying are
queued behind). Runs on asyncio and trio, and under trio's ``MockClock``.
Reads of an object that is dropped meanwhile end (:meth:`ControllerDriver.end_reads_of`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import uuid as _uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from tidegate.runtime.errors import AppendOutcomeUnknown, EnvironmentFenced
from tidegate.runtime.transport import Transport
from tidegate.spec.compute import (
    ERROR_TARGET_REPLICA_FAILED,
    ConnectReplica,
    CopyToOut,
    DisconnectReplica,
    FrontierUpper,
    PeekNotification,
    PeekResultOut,
    ReplicaStatusEvent,
    SendCommand,
    SubscribeBatchOut,
)
from tidegate.spec.compute_replica import RESULT_TOO_LARGE
from tidegate.spec.controller import Controller, ControllerEffect
from tidegate.spec.errors import (
    CollectionMissing,
    InvalidText,
    InvalidUppers,
    RemoteProtocolError,
    ReplicaMissing,
    TidegateError,
    UnhandledEffect,
)
from tidegate.spec.frontier import Antichain, Row, Time, Update
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId, InstanceId, ReplicaId
from tidegate.spec.protocol.responses import (
    ComputeResponse,
    PeekCanceled,
    PeekError,
    PeekResult,
    PeekRows,
)
from tidegate.spec.protocol.types import (
    CopyToConnection,
    DataflowDescription,
    PeekTargetKind,
    RowSetFinishing,
)
from tidegate.spec.storage import (
    AppendCommand,
    AppendCompleted,
    CollectionDropped,
    DisconnectStorageReplica,
    DowngradeShardSince,
    DropShard,
    Ingestion,
    Introspection,
    ManagedWrite,
    MaterializedView,
    Progress,
    ReadSnapshot,
    RegisterShard,
    SendStorageCommand,
    SinceChanged,
    StorageCommand,
    StorageResponse,
    Table,
    UpperChanged,
    WriteToShard,
)
from tidegate.spec.text import find_invalid_text, is_scalar_text, surrogate_at, surrogate_text

from .errors import (
    CopyToFailed,
    DependencyDropped,
    DriverNotRunning,
    PeekFailed,
    ReplicasNotConnected,
    ResultTooLarge,
    dropped_while_subscribed,
)
from .links import Backoff, ReplicaInfo, ReplicaLink
from .monotonic import MonotonicHandle
from .storage_io import ShardStorageIO
from .storage_links import StorageLinks
from .streams import EventStream, Subscription
from .timestamps import MemoryOracle, Oracle

__all__ = ["CollectionError", "ControllerDriver", "ReplicaInfo", "sendable"]

log = logging.getLogger(__name__)

_EPOCH = _dt.datetime(1970, 1, 1)
"""Time 0: timestamps are milliseconds since then (UTC); a status row's ``occurred_at``."""

DEFAULT_BACKOFF = Backoff()


@dataclass(frozen=True, slots=True)
class CollectionError:
    """An error a collection answered with, as the controller last saw it.

    ``message`` is the replica's (e.g. a dataflow failed over the replica's
    memory limit, or an input it cannot read); ``source`` says how the
    controller learned it: ``"peek"``, a peek at time ``at`` answered it (the
    only way today: replicas report no errors of their own accord).
    ``seen_ms`` is the controller's wall-clock time then.
    """

    id: GlobalId
    message: str
    source: str
    seen_ms: int
    at: int | None = None


@dataclass
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    value: Any = None
    reads: tuple[InstanceId, GlobalId, Time] | None = None
    """For a peek: the instance, the collection it reads and its time."""
    imports: tuple[InstanceId, frozenset[GlobalId]] | None = None
    """For a copy-to: the instance, and the collections its dataflow reads."""
    error: TidegateError | None = None
    """Raised instead of the result (the peek was cancelled on the client's behalf)."""


@dataclass(eq=False, slots=True)
class _AppendRequest:
    """One client's appends, waiting for a group commit (``taken`` once a commit holds it).

    ``done`` is its group's event, shared by every request of the group (one event per
    commit, not per append): it is set once all of them are finished.
    """

    batches: Sequence[tuple[GlobalId, Sequence[tuple[Row, int]]]]
    done: anyio.Event | None = None
    ts: int | None = None
    error: BaseException | None = None
    taken: bool = False
    finished: bool = False
    retries: int = 0
    """Commits it went back to the queue from (see ``_MISMATCH_RETRIES``)."""
    request_id: str | None = None
    """The client's request id: recorded with the writes, so a retry is never applied twice."""
    applied_at: int | None = None
    """The latest time a share of it was found recorded already (a retry of an applied append)."""

    def finish(self, ts: int | None = None, error: BaseException | None = None) -> None:
        self.ts, self.error, self.finished = ts, error, True

    @property
    def tables(self) -> set[GlobalId]:
        return {id for id, _ in self.batches}


_GATHER_TURNS = 3
"""How many turns of the event loop a commit waits at most for the clients the last one
released (see :meth:`ControllerDriver._gather`)."""

_MISMATCH_RETRIES = 3
"""How many times an append whose commit found every upper moved by another writer (and
nothing of it landed) goes back to the queue before the mismatch is its answer."""


def check_request_id(request_id: object) -> str:
    """``request_id`` itself if it is 1 to 255 bytes of Unicode text without control
    characters, else [InvalidRequestId]."""
    from tidegate.runtime.errors import InvalidRequestId

    if (
        not isinstance(request_id, str)
        or not request_id
        or not is_scalar_text(request_id)
        or len(request_id.encode()) > 255
        or not request_id.isprintable()
    ):
        raise InvalidRequestId(
            f"a request id is 1 to 255 bytes of printable Unicode text, got {request_id!r}"
        )
    return request_id


def _shares(
    req: _AppendRequest, failed: set[GlobalId], applied: dict[GlobalId, dict[str, int]]
) -> tuple[set[GlobalId], dict[GlobalId, int], set[GlobalId]]:
    """What a commit did with each share (table) of ``req``: written now, applied before (its
    id was recorded already, with the time), lost (not written)."""
    tables = req.tables
    landed = tables - failed
    before: dict[GlobalId, int] = {}
    if req.request_id is not None:
        for t in tables & failed:
            when = applied.get(t, {}).get(req.request_id)
            if when is not None:
                before[t] = when
    return landed, before, tables - landed - set(before)


def _unknown(deposed: BaseException | None, lost: Iterable[GlobalId]) -> BaseException:
    """The :class:`AppendOutcomeUnknown` of an append written (in part or whole) but not
    acknowledgeable: ``deposed`` says why, else the tables of ``lost`` lost a race."""
    if isinstance(deposed, EnvironmentFenced):
        why = f"a newer controller took over while it was written ({deposed})"
    elif deposed is not None:
        why = f"it was written, but could not be confirmed: {deposed}"
    else:
        why = (
            f"the write to {sorted(map(str, lost))} lost a race with another writer while the "
            "rest landed"
        )
    return AppendOutcomeUnknown(why, deposed if isinstance(deposed, TidegateError) else None)


def sendable(value: object, what: str) -> None:
    """[InvalidText] if ``value`` holds text no wire can carry (not Unicode scalar values).

    A client call checks what it hands the controller before the controller
    changes: a command the transport cannot encode would otherwise fail only
    in a link's sender, after the controller recorded it (see
    :mod:`tidegate.spec.text`). Every boundary refuses such text earlier; this
    is the last check before the controller.
    """
    bad = find_invalid_text(value)
    if bad is not None:
        at = surrogate_at(bad)
        where = "" if at is None else f": {surrogate_text(bad, at)}"
        raise InvalidText(f"{what} holds text that is not valid Unicode{where}")


class ControllerDriver:
    """Drives ``controller`` (see the module docstring); use as ``async with driver:``.

    ``address_of(replica)`` resolves a replica's current ``host:port`` (asked on
    every connection attempt). ``oracle`` supplies write timestamps (an
    in-memory one on ``clock_ms`` by default). ``instance`` is the default
    compute instance of the client calls. Periods are in milliseconds;
    ``None`` disables a background task (tests call :meth:`tick` etc. directly).
    ``storage_transport`` speaks the storage protocol to storage replicas, found
    by ``storage_address_of`` (without them, :meth:`connect_storage_replica` is refused).
    """

    def __init__(
        self,
        controller: Controller,
        transport: Transport,
        storage: ShardStorageIO,
        *,
        address_of: Callable[[ReplicaId], str],
        storage_transport: Transport[StorageCommand, StorageResponse] | None = None,
        storage_address_of: Callable[[ReplicaId], str] | None = None,
        oracle: Oracle | None = None,
        instance: InstanceId = "default",
        tick_ms: int | None = 1000,
        maintain_ms: int | None = 1000,
        poll_ms: int | None = 100,
        backoff: Backoff = DEFAULT_BACKOFF,
        subscribe_buffer: int = 1024,
        event_buffer: int = 1024,
    ) -> None:
        self.ctl = controller
        self.transport = transport
        self.storage = storage
        self.address_of = address_of
        self.oracle: Oracle = oracle if oracle is not None else MemoryOracle()
        self.instance = instance
        self.tick_ms = tick_ms
        self.maintain_ms = maintain_ms
        self.poll_ms = poll_ms
        self.backoff = backoff
        self.subscribe_buffer = subscribe_buffer
        self.event_buffer = event_buffer
        self.links: dict[ReplicaId, ReplicaLink] = {}
        self.storage_links = StorageLinks(self, storage_transport, storage_address_of)
        """The links to storage replicas (see :mod:`.storage_links`)."""
        self._managed_writes: list[ManagedWrite] = []
        """Writes to storage-managed collections waiting for the next group commit, in order."""
        self._failures: dict[ReplicaId, int] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._queue: deque[ControllerEffect] = deque()
        self._applying = False
        self._appends: dict[int, _Waiter] = {}
        self._queued: list[_AppendRequest] = []
        self._queued_done = anyio.Event()
        """The event of the queued requests (the next group's)."""
        self._committer_stopped = False
        self._committing: list[_AppendRequest] = []
        self._committing_done: anyio.Event | None = None
        self._commit_wanted = anyio.Event()
        self._peeks: dict[_uuid.UUID, _Waiter] = {}
        self._copy_tos: dict[GlobalId, _Waiter] = {}
        self._subscriptions: dict[GlobalId, Subscription] = {}
        self._sub_instance: dict[GlobalId, InstanceId] = {}
        self._lagged: list[Subscription] = []
        self._listeners: set[EventStream[ReplicaStatusEvent]] = set()
        self._frontiers_moved = anyio.Event()
        self._replicas_changed = anyio.Event()
        self._next_transient = 0
        self.commands_sent = 0
        self.responses = 0
        self.commands_by_kind: dict[str, int] = {}
        """Commands sent, by kind (the command's class name: ``CreateDataflow``, ``Peek``...)."""
        self.responses_by_kind: dict[str, int] = {}
        """Responses received, by kind (``Frontiers``, ``PeekResponse``...)."""
        self.response_observers: list[Callable[[ReplicaId, ComputeResponse], None]] = []
        """Called with every response a replica's current connection delivers, after the
        controller handled it (hydration tracking); keep them cheap."""
        self.appends_acknowledged = 0
        """Client appends (``append``/``append_many`` calls) made durable; table ticks not counted."""
        self.commits = 0
        """Group commits made durable (each one timestamp, every table advanced)."""
        self.observers: list[Callable[[ControllerEffect], None]] = []
        """Called with every effect as it is carried out (tracing, checking); keep them cheap."""
        self.fence_check: Callable[[], TidegateError | None] | None = None
        """Blocking; called when a commit fails: the error to fence with if another controller
        took over (see the module docstring), else ``None``."""
        self.fenced: TidegateError | None = None
        """Set once fenced: every later append fails with it."""
        self._leader_checks = 0
        """Leadership checks of fresh reads started so far (see :meth:`confirm_leader`)."""
        self._leader_checked = 0
        self._leader_checking: anyio.Event | None = None
        self.clock_ms: Callable[[], int] = storage.platform.clock_ms
        self._down_reason: dict[ReplicaId, str] = {}
        """Why each replica that is not connected went down (cleared once it connects)."""
        self.collection_errors: dict[GlobalId, CollectionError] = {}
        """The last error each collection answered (a peek's ``PeekError``); cleared by a
        successful peek of it, and when it is dropped."""

    # -- lifecycle --------------------------------------------------------------------------
    async def __aenter__(self) -> ControllerDriver:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self.storage.start(tg, self.report)
        tg.start_soon(self._committer)
        for period, step in (
            (self.tick_ms, self.tick),
            (self.maintain_ms, self.maintain),
            (self.poll_ms, self.poll_uppers),
        ):
            if period is not None:
                tg.start_soon(self._every, period, step)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg, self._tg = self._tg, None
        self._fail_appends()
        for link in list(self.links.values()):
            link.close()
        self.storage_links.close_all()
        for listener in list(self._listeners):
            listener.end()
        for sub in list(self._subscriptions.values()):
            sub.abort()
        if tg is not None:
            tg.cancel_scope.cancel()
            # The body's own exception (if any) propagates as it is, not wrapped in a group.
            await tg.__aexit__(None, None, None)
        return None

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` as a background task of the driver (cancelled when it stops)."""
        self._task_group().start_soon(fn, *args)

    @property
    def running(self) -> bool:
        """Whether the driver runs (entered, and not stopping)."""
        return self._tg is not None

    def _task_group(self) -> anyio.abc.TaskGroup:
        if self._tg is None:
            raise DriverNotRunning("the controller driver is not running (use `async with`)")
        return self._tg

    def _fail_appends(self) -> None:
        """End every queued and committing append with :class:`DriverNotRunning`: nothing
        will commit them. Run when the driver stops and as soon as its committer ends (cancelled
        before the driver's own exit), so that no caller waits for a commit that cannot come
        (a caller shielded from cancellation, such as a wire session's INSERT, would wait for
        ever, and keep the task group it runs in from ever closing)."""
        stopped = DriverNotRunning("the controller driver stopped before the append committed")
        for req in [*self._queued, *self._committing]:
            if not req.finished:
                req.finish(error=stopped)
        self._queued.clear()
        self._queued_done.set()
        if self._committing_done is not None:
            self._committing_done.set()

    async def _every(self, period_ms: int, step: Callable[[], Any]) -> None:
        while True:
            await anyio.sleep(period_ms / 1000)
            try:
                result = step()
                if result is not None:
                    await result
            except Exception as e:  # a background step never takes the driver down
                if self._tg is None:
                    return  # stopping: the step was cut short, nothing to report
                log.warning("periodic %s failed: %r", getattr(step, "__name__", step), e)

    # -- the effect loop --------------------------------------------------------------------
    def apply(self) -> None:
        """Carry out the controller's effects in order; effects they cause are queued behind them.

        Every call on the controller is followed by ``apply()``: the controller
        records effects in its outbox and this loop is the one place that
        takes them (:meth:`Controller.drain`).
        """
        self._queue.extend(self.ctl.drain())
        if self._applying:
            return
        self._applying = True
        try:
            while self._queue:
                effect = self._queue.popleft()
                for observe in self.observers:
                    observe(effect)
                self._apply_one(effect)
                self._queue.extend(self.ctl.drain())
                while not self._queue and self._lagged:
                    self._drop_lagged(self._lagged.pop(0))
                    self._queue.extend(self.ctl.drain())
        finally:
            self._applying = False

    def report(self, fn: Callable[[Controller], object]) -> None:
        """An IO outcome: call ``fn`` on the controller and apply the effects it caused."""
        fn(self.ctl)
        self.apply()

    def _apply_one(self, e: ControllerEffect) -> None:
        if isinstance(e, SendCommand):
            link = self.links.get(e.replica)
            if link is not None and link.epoch == e.epoch:
                link.send(e.command)
                self.commands_sent += 1
                kind = type(e.command).__name__
                self.commands_by_kind[kind] = self.commands_by_kind.get(kind, 0) + 1
        elif isinstance(e, ConnectReplica):
            self._connect(e)
        elif isinstance(e, DisconnectReplica):
            link = self.links.get(e.replica)
            if link is not None and link.epoch == e.epoch:
                del self.links[e.replica]
                link.close()
            if e.dropped:
                self._down_reason.pop(e.replica, None)
        elif isinstance(
            e, RegisterShard | WriteToShard | ReadSnapshot | DowngradeShardSince | DropShard
        ):
            self.storage.handle(e)
        elif isinstance(e, PeekResultOut):
            waiter = self._peeks.pop(e.uuid, None)
            if waiter is not None:
                waiter.value = e.result
                waiter.done.set()
        elif isinstance(e, SubscribeBatchOut):
            sub = self._subscriptions.get(e.id)
            if sub is not None:
                if not sub.deliver(e):
                    self._lagged.append(sub)
                elif sub.finished:
                    # Over (its upper is empty, or it failed): drop it, so that its holds go.
                    del self._subscriptions[e.id]
                    instance = self._sub_instance.pop(e.id, self.instance)
                    with contextlib.suppress(TidegateError):  # already gone
                        self.ctl.compute.drop_collections(instance, [e.id])
        elif isinstance(e, CopyToOut):
            waiter = self._copy_tos.pop(e.id, None)
            if waiter is not None:
                waiter.value = e
                waiter.done.set()
        elif isinstance(e, AppendCompleted):
            self._append_completed(e)
        elif isinstance(e, FrontierUpper | UpperChanged | SinceChanged | CollectionDropped):
            self._frontiers_moved.set()
            self._frontiers_moved = anyio.Event()
        elif isinstance(e, ReplicaStatusEvent):
            self.publish_status(e)
        elif isinstance(e, SendStorageCommand):
            self.storage_links.send(e)
        elif isinstance(e, DisconnectStorageReplica):
            self.storage_links.disconnect(e)
        elif isinstance(e, ManagedWrite):
            self._managed_writes.append(e)
            # A status changed (or statistics): reads waiting on a source re-check whether it
            # has ceased (see ``Environment.freshest``).
            self._frontiers_moved.set()
            self._frontiers_moved = anyio.Event()
            if self.tick_ms is None:  # no tick to carry it: commit soon
                self.request_commit()
        elif isinstance(e, PeekNotification):
            pass  # the result itself (PeekResultOut) is what a waiting client needs
        else:
            raise UnhandledEffect("the controller driver", e)

    def _append_completed(self, e: AppendCompleted) -> None:
        waiter = self._appends.pop(e.ticket, None)
        if waiter is not None:
            waiter.value = e.error
            waiter.done.set()

    # -- replica links ----------------------------------------------------------------------
    def publish_status(self, event: ReplicaStatusEvent) -> None:
        """Give ``event`` to every listener and wake :meth:`wait_connected`."""
        for listener in list(self._listeners):
            listener.publish(event)
        self._replicas_moved()

    def _replicas_moved(self) -> None:
        self._replicas_changed.set()
        self._replicas_changed = anyio.Event()

    def _connect(self, e: ConnectReplica) -> None:
        old = self.links.pop(e.replica, None)
        if old is not None:
            old.close()
        link = ReplicaLink(e.instance, e.replica, e.epoch)
        self.links[e.replica] = link
        self._task_group().start_soon(
            link.run,
            self.transport,
            self.address_of,
            self.backoff,
            lambda: self._failures.get(e.replica, 0),
            self._on_connected,
            self._on_response,
            self._on_failed,
            self._on_refused,
        )

    def _on_connected(self, link: ReplicaLink) -> None:
        if self.links.get(link.replica) is link:
            self._down_reason.pop(link.replica, None)
            self.ctl.compute.replica_connected(link.instance, link.replica, link.epoch)
            self.apply()
            self._replicas_moved()

    def _on_refused(self, link: ReplicaLink, reason: str) -> None:
        """A connection attempt failed: a ``failed`` event with the reason (the link retries).

        The spec has no transition for an attempt (only for a broken
        connection, which replays the history on a new epoch), so the event
        keeps the link's epoch and the spec's state is untouched.
        """
        if self.links.get(link.replica) is link:
            self._down_reason[link.replica] = reason
            self.publish_status(
                ReplicaStatusEvent(link.instance, link.replica, "failed", link.epoch, reason)
            )

    def _on_response(self, link: ReplicaLink, response: ComputeResponse) -> str | None:
        if self.links.get(link.replica) is not link:
            return None
        self.responses += 1
        kind = type(response).__name__
        self.responses_by_kind[kind] = self.responses_by_kind.get(kind, 0) + 1
        self._failures[link.replica] = 0
        try:
            self.ctl.compute.handle_response(link.instance, link.replica, link.epoch, response)
        except RemoteProtocolError as e:
            # The replica broke a rule: its connection ends (and is replaced). Any other
            # error here is the controller's own bug and propagates: never blame the replica.
            return f"illegal response {type(response).__name__}: {type(e).__name__}: {e}"
        self.apply()
        for observe in self.response_observers:
            observe(link.replica, response)
        return None

    def _on_failed(self, link: ReplicaLink, reason: str) -> None:
        if self.links.get(link.replica) is not link:
            return
        self._failures[link.replica] = self._failures.get(link.replica, 0) + 1
        self._down_reason[link.replica] = reason
        self.ctl.compute.replica_failed(link.instance, link.replica, link.epoch, reason)
        self.apply()

    def replicas(self, instance: InstanceId | None = None) -> list[ReplicaInfo]:
        """Every replica of ``instance``: the spec's status and the link's state."""
        inst = self.ctl.compute.instance(instance or self.instance)
        out = []
        for r in inst.replicas():
            link = self.links.get(r.id)
            ok = link is not None and link.epoch == r.epoch
            refused = ok and link is not None and link.refused and not link.up
            up = bool(ok and link is not None and link.up)
            out.append(
                ReplicaInfo(
                    inst.id,
                    r.id,
                    "failed" if refused else r.status,
                    r.epoch,
                    link.address if ok and link is not None else None,
                    up,
                    link.attempts if ok and link is not None else 0,
                    (link.last_error if ok and link is not None else "")
                    or ("" if up else self._down_reason.get(r.id, "")),
                )
            )
        return out

    async def wait_connected(
        self,
        replicas: Iterable[ReplicaId] | None = None,
        *,
        instance: InstanceId | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Wait until ``replicas`` (default: every replica of ``instance``) are connected.

        Raises the spec's ``ReplicaMissing`` for a name the instance lacks, and
        :class:`ReplicasNotConnected` (a ``TimeoutError``, naming each
        replica's status and last error) if ``timeout_s`` passes first.
        """
        inst = self.ctl.compute.instance(instance or self.instance)
        known = {r.id for r in inst.replicas()}
        wanted = sorted(known) if replicas is None else list(replicas)
        for name in wanted:
            if name not in known:
                raise ReplicaMissing(inst.id, name)

        def waiting() -> list[ReplicaInfo]:
            infos = {i.replica: i for i in self.replicas(inst.id)}
            return [
                infos[name]
                for name in wanted
                if name in infos
                and not (infos[name].connected and infos[name].status == "connected")
            ]

        with anyio.move_on_after(timeout_s) as scope:
            while True:
                changed = self._replicas_changed
                if not waiting():
                    return
                await changed.wait()
        if scope.cancelled_caught:
            raise ReplicasNotConnected(timeout_s or 0.0, waiting())

    # -- storage replicas -------------------------------------------------------------------
    def connect_storage_replica(
        self, instance: InstanceId, replica: ReplicaId, location: str = ""
    ) -> None:
        """Connect ``replica`` (resolved by ``storage_address_of``) as storage ``instance``'s one
        replica; the spec replays its history to it (see :mod:`.storage_links`)."""
        self._task_group()
        self.storage_links.connect(instance, replica, location)

    def drop_storage_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        """Disconnect storage ``instance``'s ``replica`` for good [StorageReplicaMissing]."""
        self.storage_links.drop(instance, replica)

    def storage_replicas(self) -> list[ReplicaInfo]:
        """Every storage replica the driver connects to, with its link's state."""
        return self.storage_links.infos()

    async def wait_storage_connected(
        self, instance: InstanceId, *, timeout_s: float | None = None
    ) -> None:
        """Wait until storage ``instance`` has a connected replica [ReplicasNotConnected]."""

        def waiting() -> list[ReplicaInfo]:
            infos = [i for i in self.storage_replicas() if i.instance == instance]
            if any(i.connected for i in infos):
                return []
            return infos or [ReplicaInfo(instance, "(none)", "failed", 0, None, False, 0, "")]

        with anyio.move_on_after(timeout_s) as scope:
            while True:
                changed = self._replicas_changed
                if not waiting():
                    return
                await changed.wait()
        if scope.cancelled_caught:
            raise ReplicasNotConnected(timeout_s or 0.0, waiting())

    def events(self, buffer: int | None = None) -> EventStream[ReplicaStatusEvent]:
        """Replica status events from now on (connecting, connected, failed, rehydrating, dropped).

        Besides the spec's events, every refused connection attempt is a
        ``failed`` event (same epoch) whose ``reason`` says why.
        """
        stream: EventStream[ReplicaStatusEvent] = EventStream(
            buffer or self.event_buffer, self._listeners.discard
        )
        self._listeners.add(stream)
        return stream

    # -- background steps -------------------------------------------------------------------
    def tables(self) -> list[GlobalId]:
        """The live collections the controller writes: tables and the storage-managed
        collections (status history, statistics), advanced together by every commit."""
        return [
            c.id
            for c in self.ctl.storage.collections()
            if isinstance(c.description.data_source, Table | Introspection) and not c.is_dropped
        ]

    async def tick(self) -> int | None:
        """Advance every table's upper past a fresh timestamp (an empty commit); returns it.

        ``None`` when there are no tables.
        """
        if self.ctl.read_only or self.fenced is not None or not self.tables():
            return None
        return await self._submit(_AppendRequest(()))

    def tables_upper(self) -> int | None:
        """The least upper of the live tables as the controller knows it (``None``: no table)."""
        uppers = [self.storage_frontiers(t)[1] for t in self.tables()]
        upper = Antichain.meet_all(uppers) if uppers else Antichain.empty()
        return int(upper.elements[0]) if upper.elements else None

    def read_write(self) -> None:
        """Leave read-only mode (the spec's ``read_write``): appends, ticks and ``AllowWrites``.

        The caller has fenced the controller that wrote until now.
        """
        self.ctl.read_write()
        self.apply()

    def maintain(self) -> None:
        """The controller's periodic maintenance, and the since downgrades held back till now."""
        self.ctl.compute.maintain()
        self.apply()
        self.storage.flush_downgrades()

    async def poll_uppers(self) -> None:
        """Report materialized-view shard uppers (written by replicas) as write frontiers.

        A read-only controller reports the uppers of the tables, managed collections and
        sources too (another controller writes them, its storage replica the sources).
        """
        polled: tuple[type, ...] = (MaterializedView,)
        if (
            self.ctl.read_only
        ):  # another controller writes them, and its storage replica the sources
            polled = (MaterializedView, Table, Introspection, Ingestion, Progress)
        ids = [
            c.id
            for c in self.ctl.storage.collections()
            if isinstance(c.description.data_source, polled) and not c.is_dropped
        ]
        if not ids:
            return
        uppers = await self.storage.uppers(ids)
        moved = []
        for id, upper in uppers.items():
            fr = self.ctl.storage.storage_frontiers(id)
            if fr is not None and fr[1] < upper:
                moved.append((id, upper))
        if moved:
            self.ctl.storage.update_write_frontiers(moved)
            self.apply()

    # -- frontiers --------------------------------------------------------------------------
    def frontiers(
        self, id: GlobalId, instance: InstanceId | None = None
    ) -> tuple[Antichain, Antichain]:
        """``(since, upper)``: of the compute collection ``id`` if there is one, else of storage."""
        try:
            f = self.ctl.compute.collection_frontiers(instance or self.instance, id)
        except TidegateError:
            fr = self.ctl.storage.storage_frontiers(id)
            if fr is None:
                raise
            return fr
        return f.read_frontier, f.write_frontier

    def storage_frontiers(self, id: GlobalId) -> tuple[Antichain, Antichain]:
        """``(since, upper)`` of storage collection ``id`` [CollectionMissing]."""
        fr = self.ctl.storage.storage_frontiers(id)
        if fr is None:
            raise CollectionMissing(id)
        return fr

    async def wait_frontiers(
        self, check: Callable[[], bool], *, timeout_s: float | None = None
    ) -> None:
        """Wait until ``check()`` holds (re-evaluated whenever some frontier moves)."""
        with anyio.fail_after(timeout_s):
            while True:
                moved = self._frontiers_moved
                if check():
                    return
                await moved.wait()

    async def freshest(
        self, id: GlobalId, target: PeekTargetKind = "index", instance: InstanceId | None = None
    ) -> Time:
        """The freshest time at which ``id`` is complete and readable: ``upper - 1`` (waits for one)."""

        def current() -> tuple[Antichain, Antichain]:
            if target == "index":
                return self.frontiers(id, instance)
            return self.storage_frontiers(id)

        def readable() -> bool:
            since, upper = current()
            if not since.elements:
                return True
            return not upper.elements or not upper.less_equal(since.elements[0])

        await self.wait_frontiers(readable)
        since, upper = current()
        if not since.elements:
            raise CollectionMissing(id)
        if not upper.elements:
            return int(since.elements[0])
        return max(int(since.elements[0]), int(upper.elements[0]) - 1)

    # -- client operations ------------------------------------------------------------------
    async def append(self, id: GlobalId, updates: Sequence[tuple[Row, int]]) -> int:
        """Append ``(row, diff)`` updates to table ``id`` at a fresh timestamp; returns it once durable.

        Raises the spec's typed errors (unknown id, not a table) with nothing
        changed, or :class:`~tidegate.spec.errors.InvalidUppers` if the write lost a race.
        """
        return (await self.append_many([(id, updates)]))[0]

    async def append_many(
        self,
        batches: Sequence[tuple[GlobalId, Sequence[tuple[Row, int]]]],
        *,
        request_id: str | None = None,
    ) -> list[int]:
        """Several batches (tables may repeat) at one timestamp; returns it per batch, once durable.

        The appends join the next group commit (see the module docstring).
        Unknown or dropped tables raise the spec's typed errors at once, with
        nothing written. Cancelling the caller before its commit starts
        withdraws the appends; once the commit started they are seen through.
        A commit that landed but cannot be acknowledged (a newer controller took
        over meanwhile; some tables' writes lost a race while others landed)
        raises :class:`~tidegate.runtime.errors.AppendOutcomeUnknown`, never a refusal.

        ``request_id`` makes the append idempotent: the id is recorded in each
        table's shard by the same compare-and-append as the rows, so a retry
        with the same id (after an unknown outcome, a timeout, a restart or a
        promotion) is answered with the time it was applied at and never
        applies it twice; a share of it already applied is left out, the rest
        commits (see :meth:`_known_outcome`).
        """
        self._task_group()
        if self.fenced is not None:
            raise self.fenced
        if self.ctl.read_only:
            from tidegate.runtime.errors import ReadOnlyEnvironment

            raise ReadOnlyEnvironment("a table append")
        self.ctl.storage.check_appendable([id for id, _ in batches])
        req = _AppendRequest([(id, list(rows)) for id, rows in batches])
        if request_id is not None:
            check_request_id(request_id)
            req.request_id = request_id
            known = await self._known_outcome(req)
            if known is not None:
                return [known] * len(batches)
        ts = await self._submit(req)
        assert ts is not None
        self.appends_acknowledged += 1
        return [ts] * len(batches)

    def monotonic_appender(self, id: GlobalId) -> MonotonicHandle:
        """A handle that appends to append-only collection ``id`` (a status history, a webhook
        source) without a compare-and-append race (:mod:`.monotonic`), as Materialize's
        ``StorageController::monotonic_appender``. [IdentifierMissing] for an unknown or
        dropped id, [IdentifierInvalid] for a collection that is not append-only."""
        self.ctl.storage.monotonic_appender(id)  # the spec's check
        return MonotonicHandle(self, id)

    async def monotonic_append(
        self, id: GlobalId, updates: Sequence[tuple[Row, int]]
    ) -> int | None:
        """Append ``updates`` to append-only collection ``id`` at a time of the writer's
        choosing; the time, once durable (see :class:`MonotonicHandle`)."""
        from tidegate.spec.errors import InvalidUsage, ReadOnlyController

        self._task_group()
        if self.fenced is not None:
            raise self.fenced
        storage = self.ctl.storage
        storage.monotonic_appender(id)  # still an append-only collection (not dropped meanwhile)
        if self.ctl.read_only:
            raise ReadOnlyController("a monotonic append")
        rows: list[tuple[Row, int]] = []
        for pair in updates:
            if not (
                isinstance(pair, tuple)
                and len(pair) == 2
                and isinstance(pair[0], tuple)
                and type(pair[1]) is int
            ):
                raise InvalidUsage(f"a monotonic append takes (row, diff) pairs, got {pair!r}")
            rows.append(pair)
        if id in self.tables():  # the group commit is its one writer: join the next commit
            return await self._submit(_AppendRequest([(id, rows)]))
        ticket = storage.monotonic_append(id, rows)  # a webhook source's: the spec's write
        waiter = _Waiter()
        self._appends[ticket] = waiter
        self.apply()
        await waiter.done.wait()
        if waiter.value is not None:
            raise waiter.value
        return None

    async def _known_outcome(self, req: _AppendRequest) -> int | None:
        """For a request with an id: the time it was applied at, if every share of it was
        (shares applied already are taken out of ``req``); ``None`` while some remain.

        An append with the same id still in flight here is waited for first: its
        outcome is this one's (an error is raised as it was).
        """
        rid = req.request_id
        assert rid is not None
        for other in (*self._committing, *self._queued):
            if other.request_id == rid and not other.finished:
                while not other.finished:
                    done = other.done
                    assert done is not None
                    await done.wait()
                    if not other.finished and other.done is done:  # the driver is stopping
                        raise DriverNotRunning("the controller driver stopped")
                if other.error is not None:
                    raise other.error
                return other.ts
        recorded = self.storage.recorded(rid)
        if not recorded:
            return None
        times = [recorded[t] for t, _ in req.batches if t in recorded]
        if not times:
            return None
        left = [(t, rows) for t, rows in req.batches if t not in recorded]
        if not left:
            return max(times)
        req.batches, req.applied_at = left, max(times)
        return None

    def request_commit(self) -> None:
        """Ask for a commit soon (an empty one if nothing is queued): every table advances.

        A read-only or fenced driver commits nothing: the writing controller moves the tables.
        """
        if self.ctl.read_only or self.fenced is not None:
            return
        if not self._queued:
            self._queued.append(_AppendRequest((), self._queued_done))
        self._commit_wanted.set()

    async def _submit(self, req: _AppendRequest) -> int | None:
        self._task_group()
        if self.fenced is not None:
            raise self.fenced
        if self._committer_stopped:
            raise DriverNotRunning("the controller driver stopped before the append committed")
        req.done = self._queued_done
        self._queued.append(req)
        self._commit_wanted.set()
        while not req.finished:
            done = req.done
            assert done is not None
            try:
                await done.wait()
            except BaseException:
                if not req.taken and req in self._queued:  # never issued: withdrawn
                    self._queued.remove(req)
                raise
            if not req.finished and req.done is done:  # cut short: the driver is stopping
                raise DriverNotRunning("the controller driver stopped before the append committed")
        if req.error is not None:
            raise req.error
        return req.ts

    async def _committer(self) -> None:
        """Commit the queued appends, one group at a time (see the module docstring)."""
        try:
            await self._commit_groups()
        finally:
            self._committer_stopped = True
            self._fail_appends()

    async def _commit_groups(self) -> None:
        last = 0  # requests in the last group
        while True:
            await self._commit_wanted.wait()
            self._commit_wanted = anyio.Event()
            while True:
                await self._gather(last)
                if not self._queued:
                    break
                group, self._queued = self._queued, []
                last = len(group)
                done, self._queued_done = self._queued_done, anyio.Event()
                for req in group:
                    req.taken = True
                self._committing, self._committing_done = group, done
                try:
                    await self._commit(group)
                except Exception as e:  # a bug or a fenced oracle: the group fails, typed
                    log.warning("group commit failed: %r", e)
                    failure = await self._fencing(e)
                    for req in group:
                        if not req.finished:
                            req.finish(error=failure)
                finally:
                    self._committing, self._committing_done = [], None
                    done.set()

    async def _gather(self, expected: int) -> None:
        """Before a group is taken: up to :data:`_GATHER_TURNS` turns of the event loop while
        fewer than ``expected`` requests (the last group's) are queued.

        Clients that the last commit released often append again at once (a closed
        loop); this lets them join the group rather than wait a whole commit behind
        whoever queued first. Under trio, which runs ready tasks in random order, that
        can take a turn or two; a turn with nothing else to run costs microseconds.
        """
        for _ in range(_GATHER_TURNS):
            if len(self._queued) >= expected:
                return
            await anyio.lowlevel.checkpoint()

    async def _commit(self, group: Sequence[_AppendRequest]) -> None:
        live: list[_AppendRequest] = []
        for req in group:  # a table dropped since the request was accepted fails it alone
            try:
                self.ctl.storage.check_appendable([id for id, _ in req.batches])
            except TidegateError as e:
                req.finish(error=e)
            else:
                live.append(req)
        tables = self.tables()
        managed = self._take_managed_writes(tables)
        if not live and not managed:
            return
        if not tables:  # only ticks (requests with batches name live tables): nothing to tick
            for req in live:
                req.finish(ts=None)
            return
        try:
            extra = await self._managed_rows(managed)
            ts = self.oracle.write_ts_nowait()
            if ts is None:  # a reservation is due: the oracle writes to Consensus
                ts = await self.storage.retrying("oracle write timestamp", self.oracle.write_ts)
        except BaseException:  # nothing was written: the managed writes wait for the next commit
            self._managed_writes[:0] = managed
            raise
        updates: dict[GlobalId, list[Update]] = {t: [] for t in tables}
        requests: dict[GlobalId, dict[str, int]] = {}
        for req in live:
            for id, rows in req.batches:
                updates[id].extend((row, ts, diff) for row, diff in rows)
                if req.request_id is not None:
                    requests.setdefault(id, {})[req.request_id] = ts
        stamped = {w.collection_id for w in managed if w.stamped}
        for id, pairs in extra.items():
            if id in stamped:  # the status histories' occurred_at: the commit's time,
                # the changes of one commit a microsecond apart in the order they happened
                at = _EPOCH + _dt.timedelta(seconds=ts // 1000, microseconds=ts % 1000 * 1000)
                pairs = [
                    ((at + _dt.timedelta(microseconds=i), *row), diff)
                    for i, (row, diff) in enumerate(pairs)
                ]
            updates[id].extend((row, ts, diff) for row, diff in pairs)
        upper = Antichain([ts + 1])
        ticket = self.ctl.storage.append([AppendCommand(t, updates[t], upper) for t in tables])
        acknowledging = any(req.batches for req in live)
        if acknowledging and self.fence_check is not None:
            self.storage.check_after_writes(ticket, self.fence_check)
        if requests:
            self.storage.record_requests(ticket, requests)
        waiter = _Waiter()
        self._appends[ticket] = waiter
        self.apply()
        await waiter.done.wait()
        checked = self.storage.take_checks(ticket)
        applied = self.storage.take_applied(ticket)  # request ids recorded before: retries
        error = waiter.value
        failed = set(error.ids) if isinstance(error, InvalidUppers) else set()
        if error is not None and not failed:
            failed = set(tables)
        deposed: BaseException | None = None  # why writes that landed cannot be acknowledged
        if len(failed) < len(tables):
            self.commits += 1
            try:
                # The tables that advanced are complete at ts: later reads must see them.
                if not self.oracle.apply_write_nowait(ts):
                    await self.storage.retrying("oracle apply", self.oracle.apply_write, ts)
                if error is None and acknowledging:
                    deposed = await self._confirm_leadership(tables, checked)
            except Exception as e:  # landed, but this controller cannot vouch for it now
                log.warning("commit at %d landed but cannot be confirmed: %r", ts, e)
                deposed = e
        cause = error if error is not None else deposed
        if cause is not None:  # another controller may have taken over: say so, typed
            fencing = await self._fencing(cause)
            if error is not None:
                error = fencing
            if self.fenced is not None and len(failed) < len(tables):
                deposed = self.fenced
        if failed and self.fenced is None:  # not written: they go with the next commit
            self._managed_writes[:0] = [w for w in managed if w.collection_id in failed]
        refused = self.storage.take_refusals(ticket)  # the store's own reason, e.g. a full disk
        shares = {req: _shares(req, failed, applied) for req in live}
        if isinstance(waiter.value, InvalidUppers) and self.fenced is None and not refused:
            # Another writer moved these uppers (a deposed writer's last commit landed after
            # this one took over, or raced it), or a retry's id was recorded already: the
            # controller has adopted the uppers it found. Requests none of whose shares
            # landed (nor were applied before) commit again, at a new time.
            again = [
                req
                for req in live
                if req.retries < _MISMATCH_RETRIES and shares[req][2] == req.tables
            ]
            for req in again:
                req.retries += 1
                req.taken, req.done = False, self._queued_done
            self._queued[:0] = again
            if again:
                log.info("commit found uppers moved by another writer; again: %d", len(again))
                self._commit_wanted.set()
            live = [req for req in live if req not in again]
        for req in live:
            landed, before, lost = shares[req]
            if not lost:  # every share is in: written now, or applied before (a retry)
                if landed and deposed is not None:
                    req.finish(error=_unknown(deposed, ()))
                else:
                    times = [t for t in (req.applied_at, *before.values()) if t is not None]
                    req.finish(ts=max([ts, *times]) if landed or not times else max(times))
            elif not landed and not before and req.applied_at is None:  # definite
                cause = next((refused[t] for t in req.tables if t in refused), None)
                req.finish(error=error if cause is None or error is not waiter.value else cause)
            else:  # in part: written, but not as one append
                req.finish(error=_unknown(deposed, lost))

    def _take_managed_writes(self, live: Sequence[GlobalId]) -> list[ManagedWrite]:
        """The pending managed writes to collections among ``live`` (the others were dropped)."""
        if self.fenced is not None:
            self._managed_writes.clear()
        wanted = set(live)
        taken = [w for w in self._managed_writes if w.collection_id in wanted]
        self._managed_writes.clear()
        return taken

    async def _managed_rows(
        self, writes: Sequence[ManagedWrite]
    ) -> dict[GlobalId, list[tuple[Row, int]]]:
        """The ``(row, diff)`` pairs ``writes`` add to each managed collection, in order.

        A ``truncate`` retracts what the collection holds first: its contents at
        ``upper - 1`` and whatever earlier writes of this commit added (so those are dropped).
        """
        out: dict[GlobalId, list[tuple[Row, int]]] = {}
        for w in writes:
            if w.truncate:
                held = await self._contents(w.collection_id)
                out[w.collection_id] = [(row, -n) for row, n in held]
            out.setdefault(w.collection_id, []).extend(w.updates)
        return out

    async def _contents(self, id: GlobalId) -> list[tuple[Row, int]]:
        """What collection ``id`` holds at ``upper - 1`` (nothing if it is empty so far)."""
        since, upper = self.storage_frontiers(id)
        if not upper.elements or not since.elements or int(upper.elements[0]) == 0:
            return []
        u = int(upper.elements[0])
        as_of = max(u - 1, int(since.elements[0]))
        if as_of >= u:  # compacted to its upper: no time is readable (a policy without lag)
            log.warning("cannot truncate %s: its since %s has reached its upper", id, since)
            return []
        counts: dict[Row, int] = {}
        for row, _t, diff in await self.snapshot(id, as_of):
            counts[row] = counts.get(row, 0) + diff
        return [(row, n) for row, n in counts.items() if n != 0]

    async def _confirm_leadership(
        self, written: Sequence[GlobalId], checked: dict[GlobalId, TidegateError | None]
    ) -> BaseException | None:
        """Before acknowledging a commit's appends: the fencing error if another controller took over.

        The writes have landed; if a newer controller fenced this one meanwhile, it
        may already serve reads that do not include them, so they must not be
        acknowledged. ``checked`` holds what ``fence_check`` answered right after
        each shard's write landed, in the write's own blocking call: a newer
        controller fences before it reads the uppers, so if no check saw one,
        it will read every write. A write without an answer is checked now.
        """
        if self.fence_check is None:
            return None
        fenced = next((e for e in checked.values() if e is not None), None)
        if fenced is not None:
            return fenced
        if all(id in checked for id in written):
            return None
        return await self.storage.retrying("leadership check", self.fence_check)

    async def confirm_leader(self) -> None:
        """Before a fresh read chooses its time: raise the fencing error if another controller
        took over [EnvironmentFenced].

        A read that starts after a newer controller acknowledged a write must see it; this
        controller's read timestamp cannot, so it must not answer. A check that passes after
        the read began shows that no newer controller had opened then (and so acknowledged
        nothing yet). Reads share checks: a read waits for the next check that starts after it
        (Materialize batches its oracle's read timestamps the same way).
        """
        if self.fenced is not None:
            raise self.fenced
        if self.fence_check is None:
            return
        wanted = self._leader_checks + 1  # a check that starts from now on
        while self._leader_checked < wanted:
            running = self._leader_checking
            if running is not None:
                await running.wait()
                continue
            self._leader_checks += 1
            number, done = self._leader_checks, anyio.Event()
            self._leader_checking = done
            try:
                fenced = await self.storage.retrying("leadership check", self.fence_check)
                if fenced is not None:
                    self._become_fenced(fenced)
            finally:
                self._leader_checked = max(self._leader_checked, number)
                self._leader_checking = None
                done.set()
            if self.fenced is not None:
                raise self.fenced
        if self.fenced is not None:
            raise self.fenced

    def _become_fenced(self, fenced: TidegateError) -> None:
        """Stay fenced with ``fenced`` from now on: queued appends fail with it."""
        log.warning("fenced: %s", fenced)
        self.fenced = fenced
        for req in self._queued:
            if not req.finished:
                req.finish(error=fenced)
        self._queued.clear()
        self._queued_done.set()
        self._queued_done = anyio.Event()

    async def _fencing(self, error: BaseException) -> BaseException:
        """After a failed commit: the fencing error if another controller took over, else ``error``.

        Once fenced the driver stays fenced (:attr:`fenced`).
        """
        if self.fenced is not None:
            return self.fenced
        if self.fence_check is None:
            return error
        try:
            fenced = await self.storage.retrying("fence check", self.fence_check)
        except Exception as e:  # cannot tell: the original error stands
            log.warning("fence check failed: %r", e)
            return error
        if fenced is None:
            return error
        self._become_fenced(fenced)
        return fenced

    async def snapshot(self, id: GlobalId, as_of: Time) -> list[Update]:
        """The contents of storage collection ``id`` as of ``as_of`` (read from its shard)."""
        self._task_group()
        request = self.ctl.storage.snapshot(id, as_of)
        waiter = self.storage.expect_snapshot(request)
        self.apply()
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        return list(waiter.rows or ())

    def create_dataflow(
        self,
        dataflow: DataflowDescription,
        instance: InstanceId | None = None,
        target_replica: ReplicaId | None = None,
    ) -> None:
        """Install ``dataflow`` (its as_of set) on ``instance`` [InvalidText: see :func:`sendable`]."""
        sendable(dataflow, f"dataflow {dataflow.debug_name!r}")
        self.ctl.compute.create_dataflow(instance or self.instance, dataflow, target_replica)
        self.apply()

    def drop_collections(self, ids: Iterable[GlobalId], instance: InstanceId | None = None) -> None:
        self.ctl.compute.drop_collections(instance or self.instance, ids)
        self.apply()

    def set_read_policy(
        self, policies: Sequence[tuple[GlobalId, ReadPolicy]], instance: InstanceId | None = None
    ) -> None:
        """Read policies of compute collections of ``instance``."""
        self.ctl.compute.set_read_policy(instance or self.instance, policies)
        self.apply()

    def set_storage_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        self.ctl.storage.set_read_policy(policies)
        self.apply()

    async def peek(
        self,
        id: GlobalId,
        timestamp: Time | None = None,
        *,
        finishing: RowSetFinishing | None = None,
        target: PeekTargetKind = "index",
        literal_constraints: tuple[Row, ...] | None = None,
        instance: InstanceId | None = None,
        target_replica: ReplicaId | None = None,
        issued: Callable[[], None] | None = None,
    ) -> list[tuple[Row, int]]:
        """Read ``id`` at ``timestamp`` (default: :meth:`freshest`); returns ``(row, count)`` pairs.

        ``issued()`` is called once the peek is issued (and holds its time itself).

        Errors the spec raises (unknown id, time before the since) change
        nothing; a replica's error answer raises :class:`PeekFailed`.
        Cancelling the caller cancels the peek.
        """
        self._task_group()
        instance = instance or self.instance
        sendable((literal_constraints, finishing), f"peek of {id}")
        if timestamp is None:
            timestamp = await self.freshest(id, target, instance)
        uuid = self.ctl.compute.peek(
            instance,
            id,
            timestamp,
            finishing,
            target_replica,
            target=target,
            literal_constraints=literal_constraints,
        )
        waiter = _Waiter(reads=(instance, id, timestamp))
        self._peeks[uuid] = waiter
        self.apply()
        if issued is not None:
            issued()
        try:
            await waiter.done.wait()
        except BaseException:
            if self._peeks.pop(uuid, None) is not None:
                self.ctl.compute.cancel_peek(instance, uuid)
                self.apply()
            raise
        result: PeekResult = waiter.value
        if isinstance(result, PeekRows):
            self.collection_errors.pop(id, None)
            return list(result.rows)
        if isinstance(result, PeekError):
            if result.message.startswith(RESULT_TOO_LARGE):
                raise ResultTooLarge(id, int(timestamp), result.message)
            if result.message != ERROR_TARGET_REPLICA_FAILED:  # the replica's, not the data's
                error = CollectionError(id, result.message, "peek", self.clock_ms(), int(timestamp))
                self.collection_errors[id] = error
            raise PeekFailed(id, int(timestamp), result.message)
        assert isinstance(result, PeekCanceled)
        if waiter.error is not None:
            raise waiter.error
        raise PeekFailed(id, int(timestamp), "canceled")

    def end_reads_of(self, dropped: Iterable[GlobalId]) -> None:
        """End the pending reads of ``dropped`` collections (the client dropped them).

        A pending peek of one fails with :class:`DependencyDropped`; a
        subscribe importing one gets a last batch with that error and is
        dropped; a copy-to reading one fails with :class:`CopyToFailed` and is
        dropped. Without this they could wait forever, as a dropped
        collection's data stops advancing (Materialize ends them the same way).
        """
        gone = set(dropped)
        for g in gone:
            self.collection_errors.pop(g, None)
        for uuid, waiter in list(self._peeks.items()):
            assert waiter.reads is not None
            instance, id, at = waiter.reads
            if id in gone and not waiter.done.is_set():
                waiter.error = DependencyDropped(id, int(at), id)
                self.ctl.compute.cancel_peek(instance, uuid)
                self.apply()
        for sub in list(self._subscriptions.values()):
            hit = sorted(sub.reads & gone)
            if hit:
                instance = self._sub_instance.get(sub.id, self.instance)
                last, why = sub.upper, dropped_while_subscribed(hit[0])
                sub.deliver(SubscribeBatchOut(instance, sub.id, last, last, (), why))
                self._drop_lagged(sub)
        for id, waiter in list(self._copy_tos.items()):
            assert waiter.imports is not None
            instance, reads = waiter.imports
            hit = sorted(reads & gone)
            if hit and not waiter.done.is_set():
                del self._copy_tos[id]
                why = f"{hit[0]} was dropped while the copy-to ran"
                waiter.value = CopyToOut(instance, id, None, why)
                waiter.done.set()
                with contextlib.suppress(TidegateError):  # already gone
                    self.ctl.compute.drop_collections(instance, [id])
                    self.apply()

    def new_transient_id(self) -> GlobalId:
        self._next_transient += 1
        return GlobalId.transient(self._next_transient)

    def subscribe(
        self,
        dataflow: DataflowDescription,
        *,
        buffer: int | None = None,
        instance: InstanceId | None = None,
        target_replica: ReplicaId | None = None,
    ) -> Subscription:
        """Install ``dataflow`` (one subscribe export) and return its batches' iterator."""
        instance = instance or self.instance
        (id,) = dataflow.subscribe_ids
        sub = Subscription(
            id,
            buffer or self.subscribe_buffer,
            self._close_sub,
            reads=frozenset(dataflow.import_ids),
            as_of=dataflow.as_of,
        )
        self._subscriptions[id] = sub
        self._sub_instance[id] = instance
        try:
            self.create_dataflow(dataflow, instance, target_replica)
        except BaseException:
            del self._subscriptions[id]
            del self._sub_instance[id]
            raise
        return sub

    async def copy_to(
        self,
        dataflow: DataflowDescription,
        *,
        instance: InstanceId | None = None,
        target_replica: ReplicaId | None = None,
    ) -> int:
        """Install ``dataflow`` (one copy-to export) and wait for its one answer: rows written.

        A replica's error answer raises :class:`CopyToFailed`. The spec drops
        the copy-to once answered; cancelling the caller drops it too.
        """
        self._task_group()
        instance = instance or self.instance
        (id,) = dataflow.copy_to_ids
        waiter = _Waiter(imports=(instance, frozenset(dataflow.import_ids)))
        self._copy_tos[id] = waiter
        try:
            self.create_dataflow(dataflow, instance, target_replica)
        except BaseException:
            del self._copy_tos[id]
            raise
        try:
            await waiter.done.wait()
        except BaseException:
            if self._copy_tos.pop(id, None) is not None and self._tg is not None:
                with contextlib.suppress(TidegateError):  # already gone
                    self.ctl.compute.drop_collections(instance, [id])
                    self.apply()
            raise
        out: CopyToOut = waiter.value
        if out.error is not None:
            urls = [
                s.connection.url
                for s in dataflow.sink_exports
                if isinstance(s.connection, CopyToConnection)
            ]
            raise CopyToFailed(id, urls[0] if urls else "", out.error)
        return int(out.rows or 0)

    def _close_sub(self, sub: Subscription) -> None:
        """The client closed ``sub``: drop the subscribe unless it already ended."""
        if self._subscriptions.get(sub.id) is not sub:
            return
        self._drop_lagged(sub)

    def _drop_lagged(self, sub: Subscription) -> None:
        if self._subscriptions.get(sub.id) is not sub:
            return
        del self._subscriptions[sub.id]
        instance = self._sub_instance.pop(sub.id, self.instance)
        if self._tg is None:
            return
        with contextlib.suppress(TidegateError):  # already gone
            self.ctl.compute.drop_collections(instance, [sub.id])
            self.apply()
