"""A simulated network: one ordered connection per controller-replica pair.

While a connection is up it is reliable and in order in each direction, as
the compute protocol assumes; each message takes a latency drawn from the
run's :class:`~tidegate.sim.choices.ChoiceSource` (times a replica's current
slow-down factor). Cutting a connection drops everything in flight and tells
both ends; a new connection is a new :class:`Connection` with a new number.
What reaches a stopped replica (:meth:`SimNetwork.hold`) waits in its socket
buffer until it runs again (:meth:`SimNetwork.release`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .choices import ChoiceSource
from .kernel import Kernel

__all__ = ["Connection", "SimNetwork"]

Deliver = Callable[["Connection", Any], None]
Closed = Callable[["Connection"], None]


@dataclass(eq=False)
class Connection:
    """A controller-replica connection; ``number`` increases with every new connection."""

    number: int
    replica: str
    to_replica: Deliver
    to_controller: Deliver
    on_closed: Closed
    up: bool = True
    _last_ms: dict[str, int] = field(default_factory=lambda: {"down": 0, "up": 0})
    sent: int = 0


class SimNetwork:
    """Connections with latency, per-replica slow-downs, cuts and message counting."""

    def __init__(
        self, kernel: Kernel, source: ChoiceSource, latency_ms: tuple[int, int] = (1, 5)
    ) -> None:
        self._kernel = kernel
        self._source = source
        self._latency = latency_ms
        self._next = 1
        self.slow: dict[str, int] = {}
        self.messages_delivered = 0
        self.max_frame_bytes: int | None = None
        """The largest slice of a message in one frame (``None``: the product's default)."""
        self.fragmented = 0
        """Messages sent as several fragments."""
        self._held: dict[str, list[tuple[Connection, Any]]] = {}
        """Messages that reached a stopped replica, by replica, in order."""

    def hold(self, replica: str) -> None:
        """``replica`` is stopped: what reaches it waits (see :meth:`release`)."""
        self._held.setdefault(replica, [])

    def release(self, replica: str) -> None:
        """``replica`` runs again: what waited for it is delivered now, in order."""
        for conn, message in self._held.pop(replica, ()):
            if conn.up:
                conn.to_replica(conn, message)

    def connect(
        self, replica: str, to_replica: Deliver, to_controller: Deliver, on_closed: Closed
    ) -> Connection:
        conn = Connection(self._next, replica, to_replica, to_controller, on_closed)
        self._next += 1
        return conn

    def _delay(self, replica: str) -> int:
        low, high = self._latency
        return self._source.integer(low, high) * self.slow.get(replica, 1)

    def send_to_replica(self, conn: Connection, message: Any) -> None:
        self._send(conn, "down", message)

    def send_to_controller(self, conn: Connection, message: Any) -> None:
        self._send(conn, "up", message)

    def _send(self, conn: Connection, direction: str, message: Any) -> None:
        if not conn.up:
            return
        # In order per direction: never deliver before the previous message.
        at = max(self._kernel.now_ms + self._delay(conn.replica), conn._last_ms[direction])
        conn._last_ms[direction] = at
        conn.sent += 1
        self._kernel.call_at(at, self._deliver, conn, direction, message)

    def _deliver(self, conn: Connection, direction: str, message: Any) -> None:
        if not conn.up:
            return
        self.messages_delivered += 1
        if self._held and direction == "down" and conn.replica in self._held:
            self._held[conn.replica].append((conn, message))
            return
        (conn.to_replica if direction == "down" else conn.to_controller)(conn, message)

    def cut(self, conn: Connection) -> None:
        """Break ``conn``: in-flight messages are lost and both ends learn of it."""
        if not conn.up:
            return
        conn.up = False
        self._kernel.call_later(0, conn.on_closed, conn)
