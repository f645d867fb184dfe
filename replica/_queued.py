"""What the compute and the storage replica services share: one event queue and its loop.

Each service owns a core that is not thread-safe. Everything reaches the core
as an event on one queue: commands from the stream a gRPC server thread
reads (:class:`Connection` posts a :class:`Command` and waits for its
answer), the stream closing, and whatever the service's IO work reports. A
loop turn (:meth:`QueuedService._turn`, run by a :class:`~.host.ServiceHost`)
takes every event posted so far, has the service handle each, and asks the
service what else is due. A :class:`Stop` ends the loop: the commands queued
behind it, and those posted once it is stopped, are refused with
:class:`ServiceStopped`, never left waiting.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tidegate.runtime.transport.handler import ResponseSink
from tidegate.spec.errors import TidegateError
from tidegate.spec.errors.protocol import ProtocolError, RemoteProtocolError, blamed

from ._logs import log_event
from .host import ServiceHost, Task

__all__ = ["Closed", "Command", "Connection", "QueuedService", "ServiceStopped", "Stop"]

C = TypeVar("C")
"""The commands a service's streams carry."""


class ServiceStopped(TidegateError):
    """The replica service stopped before it could handle a command."""


@dataclass(eq=False)
class Command(Generic[C]):
    """A command a stream read; ``done`` answers the stream's reader (an exception: refused)."""

    conn: Connection[C]
    command: C
    done: Future[None]


@dataclass(eq=False)
class Closed:
    """The stream of ``conn`` ended."""

    conn: Connection[Any]


class Stop:
    """The service is stopping: the loop ends at this event."""


class _Counter(Protocol):
    def inc(self) -> None: ...


class _Labelled(Protocol):
    def labels(self, *values: str) -> _Counter: ...


class _Metrics(Protocol):
    """What the loop counts in a service's metrics."""

    @property
    def connections(self) -> _Counter: ...
    @property
    def commands(self) -> _Labelled: ...
    @property
    def command_errors(self) -> _Labelled: ...


class Connection(Generic[C]):
    """One accepted stream (a :class:`~tidegate.runtime.transport.handler.ReplicaConnection`)."""

    def __init__(self, service: QueuedService, number: int, sink: ResponseSink[Any]) -> None:
        self.service = service
        self.number = number
        self.sink = sink
        self.started = False  # its first command (Hello) has been handled

    def on_command(self, command: C) -> None:
        done: Future[None] = Future()
        self.service._post(Command(self, command, done))
        self.service.host.wait(done)  # re-raises the core's typed error in the stream's reader

    def on_close(self) -> None:
        self.service._post(Closed(self))


def _refuse(event: object) -> None:
    if isinstance(event, Command):
        event.done.set_exception(ServiceStopped("the replica is shutting down"))


class QueuedService:
    """The queue, the loop's turn and the streams' bookkeeping; a service says how it handles
    an event (:meth:`_handle`), what is due after a turn's events (:meth:`_after`) and how
    its IO work stops (:meth:`_end`). Its commands go through :meth:`_admit`, which keeps
    the streams' rules, on to the core (:meth:`_to_core`).

    ``metrics``: where streams and commands are counted; ``hello``: the command every
    stream starts with, ``violation``: the error of a stream that does not (blamed on
    the controller); ``log_prefix`` starts the names of the streams' log events.
    """

    def __init__(
        self,
        host: ServiceHost,
        log: logging.Logger,
        metrics: _Metrics,
        *,
        hello: type,
        violation: Callable[[str], ProtocolError],
        log_prefix: str = "",
    ) -> None:
        self.host = host
        self.log = log
        self._metrics = metrics
        self._hello = hello
        self._violation = violation
        self._log_prefix = log_prefix
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._loop: Task | None = None
        self._lock = threading.Lock()
        self._connections = 0
        self._stopped = False
        # Loop state (touched only in turns).
        self._conn: Connection[Any] | None = None
        """The stream responses go to: the newest that said hello, until it closes."""
        self._newest = 0
        """The number of that stream: the commands of older ones are refused."""

    # -- for the subclass -----------------------------------------------------------------

    def _handle(self, event: Any) -> bool | None:
        """Handle one event; whether it is an input worth a step (``None``: no)."""
        raise NotImplementedError

    def _after(self, events: Sequence[object], inputs: bool) -> float:
        """After a turn's ``events`` (``inputs``: one asked for a step): do what is due, and
        return the host time of the next turn at the latest."""
        raise NotImplementedError

    def _end(self) -> None:
        """The loop ends: stop the IO work (then :meth:`_refuse_queued`)."""
        raise NotImplementedError

    def _to_core(self, command: Any) -> None:
        """Hand ``command`` to the core; a :class:`TidegateError` refuses it."""
        raise NotImplementedError

    def _began(self) -> None:
        """A stream said hello: the protocol's new iteration begins (nothing by default)."""

    def _refused(self, event: Command[Any], error: TidegateError) -> None:
        """``event``'s command was refused: counted, logged and answered with ``error``."""
        self._metrics.command_errors.labels(type(error).__name__).inc()
        log_event(
            self.log,
            "command_rejected",
            level=logging.WARNING,
            connection=event.conn.number,
            command=type(event.command).__name__,
            error=type(error).__name__,
            rule=getattr(error, "rule", None),
            message=str(error),
        )
        event.done.set_exception(error)

    # -- commands and streams ---------------------------------------------------------------

    def _admit(self, event: Command[Any]) -> bool:
        """Hand ``event``'s command to the core under the streams' rules; whether it went
        through (if not, ``event`` is answered here).

        A command of a stream older than the newest is refused (that stream was
        preempted) and never reaches the core; a stream's first command must be
        ``hello`` (else the controller broke the protocol); once the core takes a
        stream's hello, that stream is the one responses go to.
        """
        conn, cmd = event.conn, event.command
        if conn.number < self._newest:
            event.done.set_exception(ServiceStopped("preempted by a newer controller connection"))
            return False
        self._metrics.commands.labels(type(cmd).__name__).inc()
        try:
            if not conn.started and not isinstance(cmd, self._hello):
                raise blamed(
                    self._violation(
                        f"{type(cmd).__name__} as the first command of a new connection: "
                        f"every connection starts with {self._hello.__name__}"
                    ),
                    RemoteProtocolError,
                )
            self._to_core(cmd)
        except TidegateError as e:
            self._refused(event, e)
            return False
        except Exception as e:
            log_event(
                self.log,
                "command_failed",
                level=logging.ERROR,
                command=type(cmd).__name__,
                exc_info=True,
            )
            event.done.set_exception(e)
            return False
        if not conn.started:
            conn.started = True
            self._newest = conn.number
            self._conn = conn
            self._began()
        return True

    def _closed(self, event: Closed) -> None:
        """A stream closed: if it was the current one, responses have nowhere to go."""
        if self._conn is event.conn:
            self._conn = None
        log_event(self.log, f"{self._log_prefix}connection_closed", connection=event.conn.number)

    # -- lifecycle --------------------------------------------------------------------------

    def _run_loop(self) -> None:
        self._loop = self.host.run_loop(self._turn)

    def _stop_loop(self, timeout: float) -> None:
        """Refuse new commands, end the loop at its next turn and wait for it."""
        self._mark_stopped()
        self._events.put(Stop())
        if self._loop is not None:
            self._loop.wake()
            self._loop.join(timeout)

    def _mark_stopped(self) -> None:
        with self._lock:
            self._stopped = True

    @property
    def connections(self) -> int:
        """How many streams were accepted so far."""
        return self._connections

    def _post(self, event: object) -> None:
        if isinstance(event, Command):
            # Under the lock: a command is either queued before the loop's final drain
            # (which answers it) or refused here; never left waiting.
            with self._lock:
                if self._stopped:
                    _refuse(event)
                    return
                self._events.put(event)
        else:
            self._events.put(event)
        if self._loop is not None:  # outside the lock: a host may run the turn right here
            self._loop.wake()

    # -- ReplicaHandler ---------------------------------------------------------------------

    def on_connect(
        self, metadata: Mapping[str, str], responses: ResponseSink[Any]
    ) -> Connection[Any]:
        with self._lock:
            self._connections += 1
            number = self._connections
        self._metrics.connections.inc()
        log_event(
            self.log,
            f"{self._log_prefix}connection_accepted",
            connection=number,
            peer=metadata.get("user-agent"),
        )
        return Connection(self, number, responses)

    # -- the loop ---------------------------------------------------------------------------

    def _turn(self) -> float | None:
        """One turn: handle the events posted so far, then what is due; when to turn next
        (an event posted meanwhile brings it forward), or ``None`` once stopped."""
        try:
            events: list[object] = []
            while True:
                try:
                    events.append(self._events.get_nowait())
                except queue.Empty:
                    break
            inputs = False
            for i, event in enumerate(events):
                if isinstance(event, Stop):
                    for rest in events[i + 1 :]:
                        _refuse(rest)
                    self._end()
                    return None
                inputs = self._guarded(self._handle, event) or inputs
            return self._after(events, inputs)
        except BaseException:
            log_event(self.log, "loop_crashed", level=logging.CRITICAL, exc_info=True)
            self._end()
            raise

    def _guarded(self, fn: Callable[..., bool | None], *args: Any) -> bool:
        """``fn(*args)``; a bug in handling one event is logged, and the loop goes on."""
        try:
            return bool(fn(*args))
        except Exception as e:
            log_event(self.log, "event_failed", level=logging.ERROR, exc_info=True)
            for event in args:
                if isinstance(event, Command) and not event.done.done():
                    event.done.set_exception(e)
            return False

    def _refuse_queued(self) -> None:
        """Answer the commands still queued (the loop has ended): refused."""
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            _refuse(event)
