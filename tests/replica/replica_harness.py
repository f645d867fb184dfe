"""Helpers for the replica-process tests: the process, a checking client, tables in a shard store."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import grpc
import pyarrow as pa

from tidegate.runtime.storage import ShardStore, default_urls
from tidegate.runtime.transport import PROTOCOL_VERSION, VERSION_HEADER, ConnectionLost
from tidegate.runtime.transport.grpc_client import METHOD, GrpcReplicaStream, GrpcTransport
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Get
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    BuildDesc,
    ControllerSession,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    InitializationComplete,
    InstanceConfig,
    SinkExport,
    SourceImport,
)
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.responses import ComputeResponse

SCHEMA = Schema.of(("k", "int64", False), ("s", "string"))
ARROW_SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s", pa.string())])
CONFIG = InstanceConfig()
ROWS = [((1, "a"), 0, 1), ((2, "b"), 0, 1), ((3, "c"), 1, 1)]
"""A small table's updates: complete at upper 2 or later."""
GOOD_MD = ((VERSION_HEADER, PROTOCOL_VERSION),)

_ids = iter(range(100, 10**6))


def fresh_id() -> GlobalId:
    """A user id no other test of this session uses (collections are shards by that name)."""
    return GlobalId.user(next(_ids))


def at(t: int) -> Antichain:
    return Antichain([t])


# -- the process ------------------------------------------------------------------------------


class ReplicaProcess:
    """``python -m tidegate replica ...`` in a subprocess; waits for its ``listening`` line."""

    def __init__(
        self,
        storage: Path,
        *extra: str,
        executor: str = "python",
        ready_timeout: float = 60.0,
        env: dict[str, str] | None = None,
        with_storage: bool = True,
        with_metrics: bool = True,
    ) -> None:
        self.storage = storage
        self.stderr_path = storage / f"replica-{uuid.uuid4().hex[:8]}.log"
        self._stderr = self.stderr_path.open("w")
        cmd = [
            *(sys.executable, "-m", "tidegate", "replica", "--listen", "127.0.0.1:0"),
            *(("--storage", str(storage)) if with_storage else ()),
            *(("--metrics", "127.0.0.1:0") if with_metrics else ()),
            *("--executor", executor, "--tick-ms", "20", *extra),
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, **(env or {})},
        )
        lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: lines.put(out.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=ready_timeout)
        except queue.Empty:
            self.kill()
            raise AssertionError(f"no ready line in {ready_timeout}s: {self.logs_text()}") from None
        if not line:
            self.proc.wait(10)
            raise AssertionError(f"replica exited ({self.proc.returncode}): {self.logs_text()}")
        ready = json.loads(line)
        assert ready["event"] == "listening", ready
        self.address: str = ready["address"]
        self.metrics_address: str | None = ready["metrics"]

    def logs_text(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()

    def log_events(self, event: str) -> list[dict[str, Any]]:
        """Structured log records named ``event`` (every stderr line that is one JSON object)."""
        found = []
        for line in self.logs_text().splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and doc.get("event") == event:
                    found.append(doc)
        return found

    def scrape(self) -> str:
        assert self.metrics_address is not None, "started without --metrics"
        with urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=10) as r:
            return str(r.read().decode())

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of sample ``name{labels}`` (labels matched as a subset), or None."""
        for line in self.scrape().splitlines():
            if line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$", line)
            if m is None or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(got.get(k) == v for k, v in labels.items()):
                return float(m.group(3))
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM; the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()


@contextlib.contextmanager
def replica_process(
    storage: Path, *extra: str, executor: str = "python", **kw: Any
) -> Iterator[ReplicaProcess]:
    p = ReplicaProcess(storage, *extra, executor=executor, **kw)
    try:
        yield p
    finally:
        if p.alive():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.terminate()
        p.kill()


# -- storage --------------------------------------------------------------------------------


class Tables:
    """Tables in the replica's shard store, written as a controller would (compare-and-append)."""

    def __init__(self, storage: Path | None = None, *, store: ShardStore | None = None) -> None:
        assert (storage is None) != (store is None), "a storage directory or a store"
        self.store = store if store is not None else ShardStore.open(*default_urls(storage))

    def create(self, gid: GlobalId | None = None, schema: pa.Schema = ARROW_SCHEMA) -> GlobalId:
        gid = gid or fresh_id()
        self.store.create_shard(str(gid), schema)
        # The controller's hold: the since stays at 0 whatever readers come and go.
        self.store.register_critical_reader(str(gid), "controller")
        return gid

    def append(self, gid: GlobalId, rows: Sequence[tuple[Any, int, int]], upper: int) -> None:
        """Append ``(row, time, diff)`` updates and move the upper to ``upper``."""
        current = self.store.upper(str(gid))
        self.store.compare_and_append(str(gid), list(rows), current, at(upper))

    def upper(self, gid: GlobalId) -> Antichain:
        return self.store.upper(str(gid))

    def contents(self, gid: GlobalId, t: int) -> dict[Any, int]:
        return {r: d for r, _t, d in self.store.snapshot_rows(str(gid), t)}


def index_dataflow(
    table: GlobalId,
    *,
    as_of: int = 0,
    plan: Any = None,
    index: GlobalId | None = None,
    sinks: Sequence[SinkExport] = (),
    obj: GlobalId | None = None,
    name: str = "index",
) -> DataflowDescription:
    """A dataflow over ``table`` exporting an index (if ``index``) and ``sinks`` of one object."""
    obj = obj or fresh_id()
    return DataflowDescription(
        name,
        source_imports=(SourceImport(table),),
        objects_to_build=(BuildDesc(obj, plan if plan is not None else Get(table, SCHEMA)),),
        index_exports=(IndexExport(index, obj, (0,)),) if index is not None else (),
        sink_exports=tuple(sinks),
        as_of=at(as_of),
    )


# -- the client -----------------------------------------------------------------------------


@dataclass
class Client:
    """A controller stream checked by the spec's ``ControllerSession`` (both directions)."""

    stream: GrpcReplicaStream
    session: ControllerSession = field(default_factory=ControllerSession)
    received: list[ComputeResponse] = field(default_factory=list)

    @classmethod
    async def connect(cls, address: str, *, start: bool = True) -> Client:
        stream = await GrpcTransport().connect(address)
        client = cls(stream)
        if start:
            await client.send(Hello(uuid.uuid4()), CreateInstance(CONFIG))
        return client

    async def send(self, *commands: ComputeCommand, check: bool = True) -> None:
        if check:
            for c in commands:
                self.session.on_command(c)
        await self.stream.send_many(commands)

    async def initialized(self, *commands: ComputeCommand) -> None:
        await self.send(*commands, InitializationComplete())

    async def until(
        self, predicate: Callable[[ComputeResponse], bool], timeout: float = 15.0
    ) -> ComputeResponse:
        """Receive (checking each response) until one satisfies ``predicate``; return it."""
        with anyio.fail_after(timeout):
            while True:
                r = await self.stream.receive()
                self.session.on_response(r)
                self.received.append(r)
                if predicate(r):
                    return r

    async def answer(self, peek_uuid: uuid.UUID, timeout: float = 15.0) -> ComputeResponse:
        """The answer to peek ``peek_uuid``, received already or waited for."""
        for r in self.received:
            if getattr(r, "uuid", None) == peek_uuid:
                return r
        return await self.until(lambda r: getattr(r, "uuid", None) == peek_uuid, timeout)

    async def drain(self, seconds: float) -> list[ComputeResponse]:
        """Everything received (and checked) within ``seconds``."""
        got: list[ComputeResponse] = []
        with anyio.move_on_after(seconds):
            while True:
                r = await self.stream.receive()
                self.session.on_response(r)
                self.received.append(r)
                got.append(r)
        return got

    async def ended(self, timeout: float = 15.0) -> ConnectionLost:
        """Wait until the replica ends the stream (ignoring responses); the error it ended with."""
        with anyio.fail_after(timeout):
            while True:
                try:
                    await self.stream.receive()
                except ConnectionLost as e:
                    return e

    async def close(self) -> None:
        await self.stream.aclose()


def raw_stream(address: str, requests: list[bytes]) -> grpc.RpcError:
    """Send ``requests`` as raw bytes on one stream; the error the replica ends it with."""
    with grpc.insecure_channel(address) as channel:
        call = channel.stream_stream(METHOD)(iter(requests), metadata=GOOD_MD, timeout=15)
        try:
            for _ in call:
                pass
        except grpc.RpcError as e:
            return e
    raise AssertionError("the stream ended without an error")


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.02)
