"""A simulated replica process: the spec ``ComputeReplica`` over the ``PythonExecutor``.

The process receives commands on its current network connection, performs
the replica's outputs (responses go back on the connection; storage reads,
writes and persist peeks go to :class:`~tidegate.sim.storage.SimStorage`;
their outcomes come back through the replica's callbacks), and steps its
executor every few virtual milliseconds and soon after any input. A crash
loses everything: the process restarts later with a fresh ``ComputeReplica``.
Callbacks that arrive for an earlier incarnation are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.compute_replica.outputs import (
    PeekPersist,
    ReadSource,
    Reconciled,
    ReplicaOutput,
    Respond,
    StopReading,
    WriteOutput,
)
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import ComputeCommand, InitializationComplete

from .choices import ChoiceSource
from .kernel import EventHandle, Kernel
from .network import Connection, SimNetwork
from .storage import Listener, SimStorage

__all__ = ["SimReplica"]

STEP_SOON_MS = 3
"""After an input the replica steps this soon (inputs arriving meanwhile share the step)."""


class SimReplica:
    """One replica process (see the module docstring); ``name`` is its replica id."""

    def __init__(
        self,
        name: str,
        kernel: Kernel,
        network: SimNetwork,
        storage: SimStorage,
        source: ChoiceSource,
        record: Callable[..., None],
        step_ms: tuple[int, int] = (10, 50),
    ) -> None:
        self.name = name
        self._kernel = kernel
        self._network = network
        self._storage = storage
        self._record = record
        self.step_ms = source.integer(*step_ms)
        self.alive = False
        self.incarnation = 0
        self.core: ComputeReplica | None = None
        self.conn: Connection | None = None
        self._accepting: Connection | None = None
        self._listeners: dict[GlobalId, Listener] = {}
        self._tick: EventHandle | None = None
        self._soon: EventHandle | None = None
        self.commands_seen = 0
        self.initialized_on: int | None = None
        """The connection number on which ``InitializationComplete`` last arrived."""

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.alive = True
        self.incarnation += 1
        self.core = ComputeReplica(PythonExecutor(), clock=lambda: self._kernel.now_ms)
        self._record("replica_start", replica=self.name, incarnation=self.incarnation)
        self._tick = self._kernel.call_later(self.step_ms, self._periodic, self.incarnation)

    def crash(self) -> None:
        """The process dies: state, reads and the connection are gone."""
        if not self.alive:
            return
        self.alive = False
        self.core = None
        for listener in self._listeners.values():
            listener.cancel()
        self._listeners.clear()
        for h in (self._tick, self._soon):
            if h is not None:
                h.cancel()
        self._tick = self._soon = None
        conn, self.conn = self.conn, None
        accepting, self._accepting = self._accepting, None
        if accepting is not None:
            self._network.cut(accepting)
        self._record("replica_crash", replica=self.name, incarnation=self.incarnation)
        if conn is not None:
            self._network.cut(conn)

    def attach(self, conn: Connection) -> None:
        """A new controller connection: it replaces the old one when its first command arrives.

        Until then the replica's responses belong to the previous iteration and must not
        reach the new connection (the first response on it must follow its ``Hello``).
        """
        self._accepting = conn

    def detach(self, conn: Connection) -> None:
        if self.conn is conn:
            self.conn = None
        if self._accepting is conn:
            self._accepting = None

    # -- input ------------------------------------------------------------------------------
    def on_command(self, conn: Connection, cmd: ComputeCommand) -> None:
        if conn is self._accepting:
            self.conn, self._accepting = conn, None
        if not self.alive or conn is not self.conn or self.core is None:
            return
        self.commands_seen += 1
        if isinstance(cmd, InitializationComplete):
            self.initialized_on = conn.number
        self._perform(self.core.handle_command(cmd))
        self._step_soon()

    def _periodic(self, incarnation: int) -> None:
        if incarnation != self.incarnation or not self.alive:
            return
        self._do_step()
        self._tick = self._kernel.call_later(self.step_ms, self._periodic, incarnation)

    def _step_soon(self) -> None:
        if self._soon is None or self._soon.cancelled:
            self._soon = self._kernel.call_later(STEP_SOON_MS, self._soon_step, self.incarnation)

    def _soon_step(self, incarnation: int) -> None:
        self._soon = None
        if incarnation == self.incarnation and self.alive:
            self._do_step()

    def _do_step(self) -> None:
        assert self.core is not None
        self._perform(self.core.step())

    def _guard(self, incarnation: int) -> ComputeReplica | None:
        if incarnation != self.incarnation or not self.alive:
            return None
        return self.core

    # -- outputs ----------------------------------------------------------------------------
    def _perform(self, outputs: list[ReplicaOutput]) -> None:
        for out in outputs:
            if isinstance(out, Respond):
                if self.conn is not None and self.conn.up:
                    self._network.send_to_controller(self.conn, out.response)
            elif isinstance(out, ReadSource):
                self._read(out.collection_id, out.as_of)
            elif isinstance(out, StopReading):
                old = self._listeners.pop(out.collection_id, None)
                if old is not None:
                    old.cancel()
            elif isinstance(out, WriteOutput):
                self._write(out)
            elif isinstance(out, PeekPersist):
                self._persist_peek(out)
            elif isinstance(out, Reconciled):
                self._record(
                    "replica_reconciled",
                    replica=self.name,
                    reused=len(out.reused),
                    rebuilt=len(out.rebuilt),
                    dropped=len(out.dropped),
                )

    def _read(self, id: GlobalId, as_of: Antichain) -> None:
        old = self._listeners.pop(id, None)
        if old is not None:
            old.cancel()
        inc = self.incarnation

        def deliver(updates: list[Update], upper: Antichain) -> None:
            core = self._guard(inc)
            if core is not None:
                self._perform(core.feed_source(id, updates, upper))
                self._step_soon()

        self._listeners[id] = self._storage.listen(id, as_of, deliver)

    def _write(self, out: WriteOutput) -> None:
        inc = self.incarnation

        def done(ok: bool, upper: Antichain) -> None:
            core = self._guard(inc)
            if core is None:
                return
            if ok:
                self._perform(core.write_completed(out.sink_id, upper))
            else:
                self._record("mv_write_failed", replica=self.name, id=out.sink_id)
                self._perform(core.write_failed(out.sink_id, upper))
            self._step_soon()

        self._storage.write(
            out.sink_id, out.updates, out.lower, out.upper, f"replica-{self.name}", done
        )

    def _persist_peek(self, out: PeekPersist) -> None:
        inc = self.incarnation

        def done(rows: dict[Any, int] | None, error: str | None) -> None:
            core = self._guard(inc)
            if core is not None:
                self._perform(core.complete_persist_peek(out.uuid, rows, error=error))

        self._storage.snapshot_when_ready(out.collection_id, out.timestamp, done)
