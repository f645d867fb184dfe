"""The control endpoint's handler across ``tidegate up``'s life: starting, running, stopping.

``tidegate up`` serves the control endpoint before anything else, so that
``tidegate status`` can say what is going on while the replicas start (which
takes seconds on Spark). A :class:`Gate` answers for the controller in each
state:

* ``starting`` -- ``GET /status`` answers ``{"state": "starting", ...}`` with
  the replicas' processes as the orchestrator sees them; every other request
  is refused ``503 Starting`` (the CLI's clients wait and retry);
* ``running`` -- requests go to the :class:`~.service.ControlService`;
* ``stopping`` -- ``GET /status`` answers ``{"state": "stopping", ...}``,
  other requests ``503 Stopping``; :meth:`Gate.stop` waits (briefly) for the
  requests in flight before the environment closes.

``GET /health`` answers ``{"ok": true, "state": ...}`` in every state.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio

from tidegate.runtime.platform import wall_ms

from .control import Refusal
from .overview import process_replicas_json
from .times import iso_ms

__all__ = ["Gate"]

State = Literal["starting", "running", "stopping"]


class Gate:
    """The :data:`~.control.Handler` of ``tidegate up`` (see the module docstring)."""

    def __init__(
        self,
        *,
        orchestrator: Any = None,
        replica_memory_limit: int | None = None,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.state: State = "starting"
        self.orchestrator = orchestrator
        self.replica_memory_limit = replica_memory_limit
        self.clock_ms = clock_ms
        self.started_ms = clock_ms()
        self.service: Any = None
        self._in_flight = 0
        self._idle = anyio.Event()
        self._idle.set()

    def run(self, service: Any) -> None:
        """The environment is open: hand requests to ``service`` from now on."""
        self.service = service
        self.state = "running"

    async def stop(self, grace_s: float = 3.0) -> None:
        """Refuse new requests, then wait up to ``grace_s`` for those in flight."""
        self.state = "stopping"
        with anyio.move_on_after(grace_s):
            await self._idle.wait()

    def _status(self) -> dict[str, Any]:
        now = self.clock_ms()
        processes = self.orchestrator.status() if self.orchestrator is not None else {}
        return {
            "state": self.state,
            "controller": {
                "state": self.state,
                "pid": os.getpid(),
                "started_ms": self.started_ms,
                "started_iso": iso_ms(self.started_ms),
            },
            "now_ms": now,
            "now_iso": iso_ms(now),
            "collections": [],
            "replicas": process_replicas_json(processes, self.replica_memory_limit),
            "metrics": None,
        }

    async def handle(self, method: str, path: str, body: Mapping[str, Any]) -> Any:
        if (method, path) == ("GET", "/health"):
            return {"ok": True, "state": self.state}
        if self.state == "running" and self.service is not None:
            self._in_flight += 1
            if self._idle.is_set():
                self._idle = anyio.Event()
            try:
                result = await self.service.handle(method, path, body)
            finally:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._idle.set()
            return result  # a Stream is not waited for: it ends when the environment closes
        if (method, path) == ("GET", "/status"):
            return self._status()
        if self.state == "starting":
            raise Refusal(
                503, "Starting", "the controller is starting (see tidegate status); try again"
            )
        raise Refusal(503, "Stopping", "the controller is stopping")
