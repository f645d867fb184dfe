"""Transport benchmark: the gRPC bridge against an echo replica in another process.

    python bench/transport.py [--pings N] [--messages N] [--batch N]

For each caller backend (trio, asyncio), on one established stream:

* ping-pong: ``Schedule`` -> ``Status`` round trips one at a time (median, p99);
* one-way: ``N`` unanswered commands (``AllowWrites``) sent in batches of
  ``--batch``, then one ``Schedule`` as a marker; messages per second until
  its answer arrives;
* echo: ``N`` ``Schedule`` s in batches while another task receives the ``N``
  answers; round trips per second.

Loopback, 2 shared cores: expect +-50% noise between runs. The reference
calibration for a small round trip on this machine is ~0.59 ms median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import anyio

from tidegate.runtime.transport.aio_thread import shared_aio_thread
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowWrites, Schedule


def start_replica() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tidegate.runtime.transport.echo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"]:
        raise SystemExit(f"echo replica failed to start: {line!r}")
    return proc, f"127.0.0.1:{line[1]}"


async def measure(address: str, pings: int, messages: int, batch: int) -> dict[str, float]:
    gid = GlobalId.user(1)
    async with await GrpcTransport().connect(address) as s:
        for _ in range(200):  # warm up
            await s.send(Schedule(gid))
            await s.receive()
        rtts = []
        for _ in range(pings):
            t0 = time.perf_counter()
            await s.send(Schedule(gid))
            await s.receive()
            rtts.append(time.perf_counter() - t0)
        rtts.sort()

        t0 = time.perf_counter()
        for start in range(0, messages, batch):
            await s.send_many([AllowWrites(gid)] * min(batch, messages - start))
        await s.send(Schedule(gid))
        await s.receive()
        one_way = messages / (time.perf_counter() - t0)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                for _ in range(messages):
                    await s.receive()

            tg.start_soon(consume)
            for start in range(0, messages, batch):
                await s.send_many([Schedule(gid)] * min(batch, messages - start))
        echo = messages / (time.perf_counter() - t0)
    return {
        "rtt_median_ms": statistics.median(rtts) * 1e3,
        "rtt_p99_ms": rtts[int(len(rtts) * 0.99) - 1] * 1e3,
        "one_way_msgs_per_s": one_way,
        "echo_msgs_per_s": echo,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    proc, address = start_replica()
    try:
        for backend in ("trio", "asyncio"):
            r = anyio.run(measure, address, args.pings, args.messages, args.batch, backend=backend)
            print(
                f"{backend:8s} ping-pong median {r['rtt_median_ms']:.3f} ms, "
                f"p99 {r['rtt_p99_ms']:.3f} ms ({args.pings} round trips); "
                f"one-way {r['one_way_msgs_per_s']:,.0f} msg/s; "
                f"echo {r['echo_msgs_per_s']:,.0f} msg/s "
                f"({args.messages} messages, batches of {args.batch})"
            )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
        shared_aio_thread().stop()


if __name__ == "__main__":
    main()
