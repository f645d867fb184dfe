"""The floor of a peek's round trip: gRPC ping-pong with the scripted echo replica.

``bench/runtime.py`` and ``bench/replica.py`` print their peeks beside it (the
target: a point peek within 2x of it); ``bench/transport.py`` measures the transport against
the same echo replica. It answers each ``Peek`` at once from another process, so the
floor is the transport's own cost, both ways.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import anyio

from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import Peek
from tidegate.spec.protocol.types import PeekDescription, RowSetFinishing

__all__ = ["echo_floor", "grpc_floor", "start_echo"]


def start_echo() -> tuple[subprocess.Popen[str], str]:
    """The echo replica in a process of its own, and its address (close its stdin to stop it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tidegate.runtime.transport.echo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline().split()
    if ready[:1] != ["ready"]:
        raise SystemExit(f"echo replica failed to start: {ready!r}")
    return proc, f"127.0.0.1:{ready[1]}"


async def grpc_floor(address: str, n: int) -> list[float]:
    """Seconds per ``Peek`` -> ``PeekResponse`` on one established stream, ``n`` times
    (after 200 for warm-up)."""
    gid = GlobalId.user(1)
    out = []
    async with await GrpcTransport().connect(address) as s:
        for i in range(n + 200):
            cmd = Peek(PeekDescription(uuid.UUID(int=i + 1), gid, 1, RowSetFinishing()))
            t0 = time.perf_counter()
            await s.send(cmd)
            await s.receive()
            if i >= 200:  # after warm-up
                out.append(time.perf_counter() - t0)
    return out


def echo_floor(n: int) -> list[float]:
    """:func:`grpc_floor` against an echo replica started for it (and stopped after)."""
    proc, address = start_echo()
    try:
        return anyio.run(grpc_floor, address, n, backend="asyncio")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
