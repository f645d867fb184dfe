"""The controller's driver in the simulated world: a thin interpreter of the controller's effects.

Nothing here decides protocol or controller behaviour; it only maps effects
onto the world: ``SendCommand`` goes on the replica's current connection (or
waits in a queue until that epoch's connection is up), ``ConnectReplica``
opens a connection (retrying with capped backoff while the process is down or
the link is cut), a broken connection becomes ``replica_failed``, storage
effects go to :class:`~tidegate.sim.storage.SimStorage` and their outcomes
come back as ``complete_write`` / ``complete_snapshot``, and client-facing
effects go to the world's observers (clients, checkers, history).

A driver lives and dies with its controller: :meth:`Driver.shutdown` is the
controller process dying. Its connections are cut, its retries stop, and
whatever was still on its way to it (responses, storage completions) is
dropped, except that the fate of each of its table writes is reported to
``orphan_write`` once the storage has decided it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidegate.spec.compute import (
    ConnectReplica,
    DisconnectReplica,
    FrontierUpper,
    PeekNotification,
    PeekResultOut,
    ReplicaStatusEvent,
    SendCommand,
    SubscribeBatchOut,
)
from tidegate.spec.controller import Controller
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowCompaction, ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse, Frontiers
from tidegate.spec.storage import (
    AppendCompleted,
    CollectionDropped,
    DowngradeShardSince,
    DropShard,
    ReadSnapshot,
    RegisterShard,
    SinceChanged,
    UpperChanged,
    WriteToShard,
)

from .kernel import EventHandle, Kernel
from .network import Connection, SimNetwork
from .replica import SimReplica
from .storage import SimStorage

__all__ = ["Driver", "Observer"]

BACKOFF_MS = (10, 1_000)


def summarize(message: Any) -> str:
    """A short, deterministic rendering of a command or response for the trace."""
    cls = type(message)
    if cls is Frontiers:  # the most frequent messages, rendered exactly as below but directly
        text = f"Frontiers {message.id}"
        if message.write is not None:
            text += f" w={list(message.write.elements)}"
        if message.input is not None:
            text += f" i={list(message.input.elements)}"
        if message.output is not None:
            text += f" o={list(message.output.elements)}"
        return text
    if cls is AllowCompaction:
        return f"AllowCompaction {message.id} {list(message.frontier.elements)}"
    name = cls.__name__
    parts = [name]
    for attr in ("id", "uuid"):
        v = getattr(message, attr, None)
        if v is not None:
            parts.append(str(v))
    if name == "Frontiers":
        for attr in ("write", "input", "output"):
            v = getattr(message, attr)
            if v is not None:
                parts.append(f"{attr[0]}={list(v.elements)}")
    elif name == "CreateDataflow":
        parts.append(",".join(str(e) for e in message.dataflow.export_ids))
        parts.append(f"as_of={list(message.dataflow.as_of.elements)}")
    elif name == "AllowCompaction":
        parts.append(str(list(message.frontier.elements)))
    elif name == "Peek":
        parts.append(f"{message.peek.uuid} {message.peek.id}@{message.peek.timestamp}")
    elif name in ("PeekResponse", "SubscribeResponse"):
        inner = message.result
        parts.append(type(inner).__name__)
        if hasattr(inner, "lower"):
            parts.append(f"{list(inner.lower.elements)}..{list(inner.upper.elements)}")
    return " ".join(parts)


class Observer:
    """What the world wants to hear about; the default ignores everything."""

    def on_effect(self, effect: Any) -> None:
        """Every client-facing or bookkeeping effect (peek results, batches, frontiers, acks...)."""

    def on_stale_response(self, replica: str, epoch: int, effects: Sequence[Any]) -> None:
        """A response arrived on a connection the controller has moved past."""


@dataclass(eq=False)
class _Link:
    instance: str
    replica: str
    epoch: int
    conn: Connection | None = None
    queue: list[ComputeCommand] = field(default_factory=list)
    retry: EventHandle | None = None
    attempts: int = 0
    blocked_until: int = 0


class Driver:
    """Interprets :class:`Controller` effects in the simulated world (see the module docstring)."""

    def __init__(
        self,
        controller: Controller,
        kernel: Kernel,
        network: SimNetwork,
        storage: SimStorage,
        processes: Callable[[str], SimReplica | None],
        observer: Observer,
        record: Callable[..., None],
        inbox_ms: Callable[[], int] = lambda: 0,
    ) -> None:
        self.ctl = controller
        self._kernel = kernel
        self._network = network
        self._storage = storage
        self._processes = processes
        self._observer = observer
        self._record = record
        self.links: dict[tuple[str, str], _Link] = {}
        """Each replica's current connection state, by ``(instance, replica)``."""
        self._conn_epoch: dict[int, tuple[str, str, int]] = {}
        self._inbox_ms = inbox_ms
        self._inbox_last: dict[int, int] = {}
        self.commands_sent = 0
        self.responses = 0
        self.alive = True
        self.orphan_write: Callable[[int, bool], None] = lambda ticket, ok: None
        """Told ``(ticket, landed)`` for each write of this driver decided after :meth:`shutdown`."""

    def shutdown(self) -> None:
        """The controller process dies: cut every connection; later deliveries go nowhere."""
        self.alive = False
        for key in sorted(self.links):
            self._drop_link(self.links[key])
        self.links.clear()

    # -- effects ------------------------------------------------------------------------------
    def apply(self, effects: Sequence[Any]) -> None:
        if not self.alive:
            return
        for e in effects:
            self._apply_one(e)

    def _apply_one(self, e: Any) -> None:
        if isinstance(e, SendCommand):
            self._send(e)
        elif isinstance(e, ConnectReplica):
            self._connect_request(e)
        elif isinstance(e, DisconnectReplica):
            self._disconnect(e)
        elif isinstance(e, WriteToShard):
            self._write(e)
        elif isinstance(e, ReadSnapshot):
            self._snapshot(e)
        elif isinstance(e, RegisterShard):
            self._storage.register(e.id)
        elif isinstance(e, DowngradeShardSince):
            self._storage.downgrade_since(e.id, e.frontier)
            self._observer.on_effect(e)
        elif isinstance(e, DropShard):
            self._storage.drop(e.id)
            self._record("drop_shard", id=e.id)
        elif isinstance(
            e,
            PeekResultOut
            | PeekNotification
            | SubscribeBatchOut
            | FrontierUpper
            | ReplicaStatusEvent
            | AppendCompleted
            | UpperChanged
            | SinceChanged
            | CollectionDropped,
        ):
            self._observer.on_effect(e)
        else:
            self._record("effect_ignored", effect=type(e).__name__)

    # -- compute connections ------------------------------------------------------------------
    def link(self, instance: str, replica: str) -> _Link | None:
        """The link to ``replica`` of ``instance``, if the controller wants it connected."""
        return self.links.get((instance, replica))

    def _send(self, e: SendCommand) -> None:
        link = self.links.get((e.instance, e.replica))
        if link is None or link.epoch != e.epoch:
            self._record("command_stale", replica=e.replica, epoch=e.epoch)
            return
        if link.conn is not None and link.conn.up:
            self.commands_sent += 1
            self._record("cmd", r=e.replica, e=e.epoch, m=summarize(e.command))
            self._network.send_to_replica(link.conn, e.command)
        else:
            link.queue.append(e.command)

    def _connect_request(self, e: ConnectReplica) -> None:
        key = (e.instance, e.replica)
        link = self.links.get(key)
        blocked = 0
        if link is not None:
            blocked = link.blocked_until
            self._drop_link(link)
        link = _Link(e.instance, e.replica, e.epoch, blocked_until=blocked)
        self.links[key] = link
        self._record("connect_request", replica=e.replica, epoch=e.epoch)
        self._try_connect(link)

    def _drop_link(self, link: _Link) -> None:
        if link.retry is not None:
            link.retry.cancel()
        conn, link.conn = link.conn, None
        if conn is not None:
            self._network.cut(conn)

    def _try_connect(self, link: _Link) -> None:
        link.retry = None
        if not self.alive or self.links.get((link.instance, link.replica)) is not link:
            return
        proc = self._processes(link.replica)
        if proc is None or not proc.alive or self._kernel.now_ms < link.blocked_until:
            link.attempts += 1
            low, cap = BACKOFF_MS
            delay = min(cap, low * 2 ** min(link.attempts, 10))
            link.retry = self._kernel.call_later(delay, self._try_connect, link)
            return
        conn = self._network.connect(
            link.replica, proc.on_command, self._on_response, self._on_closed
        )
        self._conn_epoch[conn.number] = (link.instance, link.replica, link.epoch)
        link.conn = conn
        link.attempts = 0
        proc.attach(conn)
        self._record("connected", replica=link.replica, epoch=link.epoch, conn=conn.number)
        queued, link.queue = link.queue, []
        for cmd in queued:
            self.commands_sent += 1
            self._record("cmd", r=link.replica, e=link.epoch, m=summarize(cmd))
            self._network.send_to_replica(conn, cmd)
        self.apply(self.ctl.replica_connected(link.instance, link.replica, link.epoch))

    def _disconnect(self, e: DisconnectReplica) -> None:
        link = self.links.get((e.instance, e.replica))
        self._record("disconnect", replica=e.replica, epoch=e.epoch, dropped=e.dropped)
        if link is not None and link.epoch == e.epoch:
            self._drop_link(link)
            del self.links[(e.instance, e.replica)]

    def _on_response(self, conn: Connection, response: ComputeResponse) -> None:
        """A response arrived; the controller task reads it from its inbox a moment later.

        The inbox keeps each connection's order; responses still in it when the
        connection fails reach the controller with their old epoch, as they would
        from a real channel (the controller must ignore them).
        """
        instance, replica, epoch = self._conn_epoch[conn.number]
        at = self._kernel.now_ms + self._inbox_ms()
        at = max(at, self._inbox_last.get(conn.number, 0))
        self._inbox_last[conn.number] = at
        self._kernel.call_at(at, self._handle_response, instance, replica, epoch, response)

    def _handle_response(
        self, instance: str, replica: str, epoch: int, response: ComputeResponse
    ) -> None:
        if not self.alive:
            return  # still in the dead controller's inbox
        self.responses += 1
        self._record("resp", r=replica, e=epoch, m=summarize(response))
        effects = self.ctl.handle_response(instance, replica, epoch, response)
        link = self.links.get((instance, replica))
        if link is None or link.epoch != epoch:
            self._observer.on_stale_response(replica, epoch, effects)
        self.apply(effects)

    def _on_closed(self, conn: Connection) -> None:
        instance, replica, epoch = self._conn_epoch.pop(conn.number)
        self._inbox_last.pop(conn.number, None)
        proc = self._processes(replica)
        if proc is not None:
            proc.detach(conn)
        link = self.links.get((instance, replica))
        if not self.alive or link is None or link.conn is not conn:
            return
        link.conn = None
        self._record("connection_lost", replica=replica, epoch=epoch)
        self.apply(self.ctl.replica_failed(instance, replica, epoch, "connection lost"))

    def cut(self, instance: str, replica: str, until_ms: int) -> bool:
        """Break the connection to ``replica`` of ``instance``; new ones fail until ``until_ms``.

        False if none was up.
        """
        link = self.links.get((instance, replica))
        if link is None:
            return False
        link.blocked_until = max(link.blocked_until, until_ms)
        if link.conn is None or not link.conn.up:
            return False
        self._network.cut(link.conn)
        return True

    # -- storage ---------------------------------------------------------------------------------
    def _write(self, e: WriteToShard) -> None:
        def done(ok: bool, upper: Antichain) -> None:
            if self.alive:
                self.apply(self.ctl.complete_write(e.ticket, e.id, ok, upper))
            else:
                self.orphan_write(e.ticket, ok)

        self._storage.write(e.id, e.updates, e.expected_upper, e.new_upper, "controller", done)

    def _snapshot(self, e: ReadSnapshot) -> None:
        def done(rows: Any, error: str | None) -> None:
            if self.alive:
                self.apply(self.ctl.complete_snapshot(e.request))

        self._storage.snapshot_when_ready(e.id, e.as_of, done)

    def storage_upper(self, id: GlobalId, upper: Antichain, tables: frozenset[GlobalId]) -> None:
        """A shard written by compute (a materialized view) advanced: tell the controller."""
        if self.alive and id not in tables:
            self.apply(self.ctl.update_write_frontiers([(id, upper)]))
