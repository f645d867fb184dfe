"""Helpers for the storage replica tests: a checking storage client, shards as a controller makes them,
and the laws an ingestion's shards must satisfy."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from tidegate.runtime.controller.schemas import arrow_schema
from tidegate.runtime.storage import ShardStore, default_urls
from tidegate.runtime.transport import STORAGE, ConnectionLost
from tidegate.runtime.transport.grpc_client import GrpcReplicaStream, GrpcTransport
from tidegate.spec.frontier import Antichain, Update, consolidate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    CollectionDescription,
    Ingestion,
    LoadGenerator,
    RunIngestion,
    SourceConnection,
    StorageAllowWrites,
    StorageCommand,
    StorageControllerSession,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageResponse,
    loadgen_schema,
)
from tidegate.spec.storage.reclock import REMAP_SCHEMA, Bindings, decode_bindings
from tidegate.spec.testing.storage_replica import DeterministicUpstream, uninterrupted_run

DATA = GlobalId.user(2)
REMAP = GlobalId.user(1)
INSTANCE = "storage-1"


def at(t: int) -> Antichain:
    return Antichain([t])


def upper_int(f: Antichain) -> int:
    (t,) = f.elements
    return int(t)


# -- shards ---------------------------------------------------------------------------------


class Shards:
    """The replica's shard store, used as the storage controller's driver does."""

    def __init__(self, storage: Path) -> None:
        self.store = ShardStore.open(*default_urls(storage))

    def create(self, gid: GlobalId, schema: Schema) -> None:
        """Create ``gid``'s shard (rows of ``schema``) with a hold at 0 (the controller's reader)."""
        self.store.create_shard(str(gid), arrow_schema(schema))
        self.store.register_critical_reader(str(gid), "controller")

    def create_ingestion(
        self, schema: Schema, data: GlobalId = DATA, remap: GlobalId = REMAP
    ) -> None:
        self.create(remap, REMAP_SCHEMA)
        self.create(data, schema)

    def upper(self, gid: GlobalId) -> Antichain:
        return self.store.upper(str(gid))

    def updates(self, gid: GlobalId) -> list[Update]:
        """Every update of the shard at its own time (nothing is compacted: the hold is at 0)."""
        shard = str(gid)
        if self.upper(gid) == at(0):
            return []
        rows = list(self.store.snapshot_rows(shard, 0))
        with self.store.listen(shard, 0) as listener:
            event = listener.poll()
            if event is not None:
                rows.extend(event.updates)
        return consolidate(rows)

    def append(self, gid: GlobalId, updates: Sequence[Update], upper: int) -> None:
        self.store.compare_and_append(str(gid), list(updates), self.upper(gid), at(upper))

    def bindings(self, remap: GlobalId = REMAP) -> Bindings:
        return decode_bindings(self.updates(remap), 0, self.upper(remap))

    def close(self) -> None:
        self.store.close()


def ingestion(
    connection: SourceConnection, schema: Schema, data: GlobalId = DATA, remap: GlobalId = REMAP
) -> Callable[[Antichain], RunIngestion]:
    """``RunIngestion`` of ``data`` from ``connection`` at a resume upper."""
    desc = CollectionDescription(Ingestion(INSTANCE, remap, connection, schema))
    return lambda resume: RunIngestion(data, desc, resume)


def check_load_generator_run(shards: Shards, generator: LoadGenerator) -> int:
    """The shards hold what one uninterrupted run minting the same bindings writes; the bindings' count.

    Compared at every time both cover: the data shard's times below its upper
    ``D`` (read first), and the bindings minted below ``D`` (those whose data is durable).
    """
    d = upper_int(shards.upper(DATA))
    bindings = shards.bindings()
    durable = Bindings(bindings.as_of, tuple((t, o) for t, o in bindings.changes if t < d), d)
    remap, data = uninterrupted_run(DeterministicUpstream(generator), durable)
    ours_remap = [u for u in shards.updates(REMAP) if u[1] < d]
    assert ours_remap == remap, "the remap shard holds other bindings than it minted"
    ours = [u for u in shards.updates(DATA) if u[1] < d]  # the replica may still be writing
    assert ours == data, (
        f"the data shard differs from an uninterrupted run's: {len(ours)} updates, "
        f"expected {len(data)}"
    )
    # And explicitly: every generated row exactly once, at the first time bound past its offset.
    assert all(diff == 1 for _, _, diff in ours) or generator.max_cardinality is not None
    return len(durable.changes)


# -- the client -----------------------------------------------------------------------------


@dataclass
class StorageClient:
    """A storage controller stream checked by the spec's ``StorageControllerSession`` (both directions)."""

    stream: GrpcReplicaStream[StorageCommand, StorageResponse]
    session: StorageControllerSession = field(default_factory=StorageControllerSession)
    received: list[StorageResponse] = field(default_factory=list)

    @classmethod
    async def connect(cls, address: str, **transport: Any) -> StorageClient:
        stream = await GrpcTransport(protocol=STORAGE, **transport).connect(address)
        return cls(stream)

    async def send(self, *commands: StorageCommand, check: bool = True) -> None:
        if check:
            for c in commands:
                self.session.on_command(c)
        await self.stream.send_many(commands)

    async def start(self, *commands: StorageCommand, allow_writes: bool = True) -> None:
        """Hello, ``commands``, InitializationComplete (and AllowWrites)."""
        tail: tuple[StorageCommand, ...] = (StorageInitializationComplete(),)
        if allow_writes:
            tail += (StorageAllowWrites(),)
        await self.send(StorageHello(uuid.uuid4()), *commands, *tail)

    async def until(
        self, predicate: Callable[[StorageResponse], bool], timeout: float = 20.0
    ) -> StorageResponse:
        """Receive (checking each response) until one satisfies ``predicate``; return it."""
        with anyio.fail_after(timeout):
            while True:
                r = await self.stream.receive()
                self.session.on_response(r)
                self.received.append(r)
                if predicate(r):
                    return r

    async def upper_beyond(self, id: GlobalId, t: int, timeout: float = 20.0) -> int:
        """Wait for a ``FrontierUpper`` of ``id`` beyond ``t``; the upper."""
        r = await self.until(
            lambda r: (
                isinstance(r, StorageFrontierUpper) and r.id == id and not r.upper.less_equal(t)
            ),
            timeout,
        )
        assert isinstance(r, StorageFrontierUpper)
        return upper_int(r.upper) if r.upper.elements else 2**63

    async def drain(self, seconds: float) -> list[StorageResponse]:
        """Everything received (and checked) within ``seconds``."""
        got: list[StorageResponse] = []
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


COUNTER = LoadGenerator("counter", tick_ms=10, seed=7, rows_per_tick=4)
COUNTER_SCHEMA = loadgen_schema(COUNTER)
