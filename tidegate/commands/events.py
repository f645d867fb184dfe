"""What ``tidegate up`` tells a person on stderr: what it is doing, then one line per replica event.

:class:`Reporter` writes through ``rich``: on a terminal, a spinner says what
start-up is waiting for (which replica process, for how long) and event lines
are coloured; elsewhere (a pipe, a file) only the plain lines are written, one
per event, without colour or redrawing. Lines are
``<ISO time> <replica> <what happened>``; ``tidegate up``'s own lines start
with ``tidegate up:``. The structured JSON logs go to stderr as well; they
start with ``{``.

:class:`ReplicaEvents` turns the orchestrator's process states, the driver's
replica status events and the hydration tracker's completions into those lines:

* ``r1 starting a replica process``, ``r1 process ready on HOST:PORT (pid N, 8.1 s)``;
* ``r1 connected (epoch 1)``; after an outage ``r1 connected again (epoch 2, down 9.3 s)``;
* ``r1 failed: <reason>`` once per outage: a broken stream or a refused
  connection, not every retry (nor a process that keeps failing to start the
  same way);
* ``r1 the process was killed by SIGKILL; restarting``;
* ``r1 hydrated 2 object(s) in 0.41 s`` after it connects (``rehydrated``
  after an outage): every index and materialized view it was sent, timed by
  :mod:`tidegate.runtime.hydration`;
* ``r2 dropped``, ``r1 stopped``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.markup import escape

from .overview import exit_text
from .times import iso_ms

__all__ = ["EventLines", "ReplicaEvents", "Reporter"]

_STYLE = {
    "connected": "green",
    "hydrated": "cyan",
    "failed": "bold red",
    "restarting": "yellow",
    "starting": "blue",
    "dropped": "magenta",
    "stopped": "magenta",
}


class Reporter:
    """Lines (and, on a terminal, a start-up spinner) on ``out`` (default stderr)."""

    def __init__(self, out: TextIO | None = None, *, clock_ms: Any = None) -> None:
        self.console = Console(
            file=out if out is not None else sys.stderr,
            highlight=False,
            emoji=False,
            soft_wrap=True,
        )
        self.tty = self.console.is_terminal
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._status: Any = None

    def say(self, text: str) -> None:
        """A line of ``tidegate up``'s own: ``tidegate up: TEXT``."""
        self.console.print(f"tidegate up: {escape(text)}")

    def event(self, replica: str, text: str, kind: str = "") -> None:
        """An event line: ``<ISO time> <replica> TEXT`` (coloured by ``kind`` on a terminal)."""
        when = iso_ms(self._clock_ms())
        style = _STYLE.get(kind)
        body = escape(text) if style is None else f"[{style}]{escape(text)}[/]"
        self.console.print(f"[dim]{when}[/] [bold]{escape(replica)}[/] {body}")

    def waiting(self, text: str | None) -> None:
        """On a terminal, show (or with ``None`` remove) a spinner saying what start-up awaits."""
        if not self.tty:
            return
        if text is None:
            if self._status is not None:
                self._status.stop()
                self._status = None
            return
        if self._status is None:
            self._status = self.console.status(escape(text), spinner="dots")
            self._status.start()
        else:
            self._status.update(escape(text))


class EventLines(Protocol):
    """Where :class:`ReplicaEvents` writes its lines (:class:`Reporter`, or the demo's)."""

    def event(self, replica: str, text: str, kind: str = "") -> None: ...


class ReplicaEvents:
    """Turns replica events into :class:`Reporter` lines (see the module docstring).

    :meth:`on_process` is the orchestrator's ``on_status``; :meth:`attach`
    follows an open environment (its status events and hydrations).
    """

    def __init__(self, reporter: EventLines, monotonic: Any = time.monotonic) -> None:
        self.reporter = reporter
        self.monotonic = monotonic
        self.env: Any = None
        self._attempt_began: dict[str, float] = {}
        self._start_error: dict[str, str] = {}
        self._down_since: dict[str, float] = {}
        self._connected_epoch: dict[str, int] = {}
        self._want_hydration: dict[str, int] = {}
        self._seen_process: set[str] = set()

    # -- the orchestrator: processes ------------------------------------------------------------
    def on_process(self, status: Any) -> None:
        """A managed replica's process changed state (a ``ReplicaProcessStatus``)."""
        name, state, say = status.name, status.state, self.reporter.event
        now = self.monotonic()
        if state == "starting":
            self._attempt_began[name] = now
            if name not in self._seen_process:
                self._seen_process.add(name)
                say(name, "starting a replica process", "starting")
        elif state == "running":
            self._start_error.pop(name, None)
            took = now - self._attempt_began.get(name, now)
            say(name, f"process ready on {status.address} (pid {status.pid}, {took:.1f} s)")
        elif state == "restarting":
            self._down_since.setdefault(name, now)
            if status.last_error:  # this attempt did not start: say so once per reason
                if self._start_error.get(name) != status.last_error:
                    self._start_error[name] = status.last_error
                    say(
                        name,
                        f"failed to start: {status.last_error}; retrying (log: {status.log_path})",
                        "failed",
                    )
            else:
                exit = exit_text(status.last_exit_code) or "the process exited"
                say(name, f"{exit}; restarting", "restarting")
        elif state == "stopped":
            self._seen_process.discard(name)
            say(name, "stopped", "stopped")

    # -- the driver: connections ---------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        """A ``ReplicaStatusEvent`` of the driver."""
        name, status, say = event.replica, event.status, self.reporter.event
        now = self.monotonic()
        if status == "connected":
            if self._connected_epoch.get(name) == event.epoch:
                return
            self._connected_epoch[name] = event.epoch
            down = self._down_since.pop(name, None)
            if down is None:
                say(name, f"connected (epoch {event.epoch})", "connected")
            else:
                say(
                    name,
                    f"connected again (epoch {event.epoch}, down {now - down:.1f} s)",
                    "connected",
                )
            self._want_hydration[name] = event.epoch
            self._check_hydrated(name)
        elif status == "failed":
            if self._connected_epoch.get(name) is None and name in self._down_since:
                return  # down already: said once
            self._connected_epoch.pop(name, None)
            self._down_since.setdefault(name, now)
            say(name, f"failed: {event.reason or 'no reason given'}", "failed")
        elif status == "rehydrating":
            self._connected_epoch.pop(name, None)
            self._down_since.setdefault(name, now)
        elif status == "dropped":
            self._connected_epoch.pop(name, None)
            self._down_since.pop(name, None)
            self._want_hydration.pop(name, None)
            say(name, "dropped", "dropped")

    # -- hydration -------------------------------------------------------------------------------
    def attach(self, env: Any) -> None:
        """Follow ``env``: hydration completions now; :meth:`follow` reads its status events."""
        self.env = env
        env.hydration_tracker.listeners.append(self._on_hydrated)
        for info in env.replicas():  # connected before we listened: say so now
            if info.connected and info.status == "connected":
                self.on_event(_Connected(info.replica, info.epoch))

    async def follow(self) -> None:
        """Print the environment's replica events until it closes (run as a task)."""
        async with self.env.events() as events:
            async for event in events:
                self.on_event(event)

    def _on_hydrated(self, replica: str, gid: Any, seconds: float) -> None:
        if replica in self._want_hydration:
            self._check_hydrated(replica)

    def _check_hydrated(self, replica: str) -> None:
        if self.env is None:
            return
        epoch = self._want_hydration.get(replica)
        if epoch is None:
            return
        mine = [h for h in self.env.hydration() if h.replica == replica]
        if not mine:
            del self._want_hydration[replica]  # nothing to hydrate
            return
        if not all(h.hydrated and h.seconds is not None for h in mine):
            return
        del self._want_hydration[replica]
        took = max(h.seconds for h in mine if h.seconds is not None)
        what = "hydrated" if epoch <= 1 else "rehydrated"
        self.reporter.event(replica, f"{what} {len(mine)} object(s) in {took:.2f} s", "hydrated")


class _Connected:
    """A ``connected`` event for a replica that connected before :meth:`ReplicaEvents.attach`."""

    status = "connected"
    reason = ""

    def __init__(self, replica: str, epoch: int) -> None:
        self.replica = replica
        self.epoch = epoch
