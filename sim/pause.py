"""Stopped processes: SIGSTOP and SIGCONT for the simulated controller.

A :class:`Pause` is one process's stop switch. While it is stopped, nothing of
the process reaches the world and nothing of the world reaches it: its
storage calls wait before they touch the disk and before their answers come
back (:class:`~tidegate.sim.platform.SimPlatform` awaits :meth:`Pause.gate`),
and its streams (:class:`PausableTransport`) neither send nor deliver. Its
timers still expire -- a stopped process's clock moves on -- but whatever they
wake waits at the first of those gates, so that, once resumed, the process
finds every deadline past at once, as a process does after ``SIGCONT`` or a
long garbage collection. A storage call stopped between its request and the
disk applies only when the process resumes: a compare-and-set delayed past
whatever happened meanwhile (another controller's takeover, say).

The replica processes stop through their hosts instead
(:meth:`tidegate.sim.kernel_host.KernelHost.pause`): their work is kernel
events, which a stopped host defers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic

import trio
from typing_extensions import TypeVar

from tidegate.runtime.transport.port import ReplicaStream, Transport
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

__all__ = ["PausableStream", "PausableTransport", "Pause"]

C = TypeVar("C", default=ComputeCommand)
R = TypeVar("R", default=ComputeResponse)


class Pause:
    """A process's stop switch (see the module docstring)."""

    def __init__(self) -> None:
        self.stopped = False
        self._resumed: trio.Event | None = None
        self.stops = 0

    def stop(self) -> None:
        """SIGSTOP (idempotent)."""
        if not self.stopped:
            self.stopped = True
            self.stops += 1

    def resume(self) -> None:
        """SIGCONT: whatever waits at a gate goes on."""
        self.stopped = False
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None

    async def gate(self) -> None:
        """Return at once if the process runs; else once it is resumed (a cancellation point
        only while stopped)."""
        while self.stopped:
            if self._resumed is None:
                self._resumed = trio.Event()
            await self._resumed.wait()


class PausableTransport(Transport[C, R], Generic[C, R]):
    """``inner``, whose connections and streams stop while ``pause`` is stopped."""

    def __init__(self, inner: Transport[C, R], pause: Pause) -> None:
        self.inner = inner
        self.pause = pause

    async def connect(self, address: str) -> ReplicaStream[C, R]:
        await self.pause.gate()
        stream = await self.inner.connect(address)
        return PausableStream(stream, self.pause)

    async def aclose(self) -> None:
        await self.inner.aclose()


class PausableStream(ReplicaStream[C, R], Generic[C, R]):
    """A stream whose sends wait while the process is stopped, and whose responses (and its
    end) are delivered only once it runs."""

    def __init__(self, inner: ReplicaStream[C, R], pause: Pause) -> None:
        self.inner = inner
        self.pause = pause
        self.address = inner.address
        self._held: tuple[R] | None = None

    async def send(self, command: C) -> None:
        await self.pause.gate()
        await self.inner.send(command)

    async def send_many(self, commands: Sequence[C]) -> None:
        await self.pause.gate()
        await self.inner.send_many(commands)

    async def receive(self) -> R:
        await self.pause.gate()
        if self._held is None:
            try:
                self._held = (await self.inner.receive(),)
            except Exception:
                await self.pause.gate()
                raise
            # Held until the process runs; a cancelled wait loses nothing (the next takes it).
            await self.pause.gate()
        response, self._held = self._held[0], None
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
