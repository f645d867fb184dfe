"""The embedding API: an async :class:`Environment` over the controller driver, catalog and shards.

::

    async with Environment.open("./tidegate-data", replicas={"r1": "127.0.0.1:6876"}) as env:
        orders = await env.create_table("orders", Schema.of(("id", "int64", False), ("amount", "int64")))
        await env.append("orders", [(1, 10), (2, 25)])
        big = env.table("orders").filter(col("amount") > 20)
        idx = await env.create_index(big, ["id"], name="big_orders")
        rows = await env.peek(idx)               # [((2, 25), 1)] at the freshest complete time

``env = await Environment.open(...)`` then ``await env.aclose()`` (in the same
task) works as well. :meth:`Environment.open` returns once the replicas'
processes run; :meth:`Environment.wait_connected` waits for their connections.
Replicas are recorded in the catalog too: a reopen without ``replicas=`` runs
the recorded ones.

Every DDL is recorded in the durable :class:`~tidegate.runtime.catalog.Catalog`
first (it validates names, ids and plans), then carried out through the spec
controller; opening an environment over an existing data directory restores
everything in the catalog (:meth:`Environment._restore`, as-ofs chosen by the
spec's as-of selection from the shards' frontiers). Errors are the spec's
typed errors (and the catalog's); a call that raises leaves state unchanged.
Tables are written at timestamps of the durable
:class:`~tidegate.runtime.oracle.TimestampOracle`; their uppers tick forward
every ``tick_ms`` even without data.

Opened with ``read_only=True`` beside the environment that writes the same
data, an environment restores everything and serves peeks and subscribes but
writes nothing, learning the tables' uppers from their shards;
:meth:`Environment.promote` then fences the writer and takes over (a
zero-downtime upgrade; see docs/environment.md).

**Sources and sinks** (:meth:`Environment.create_source`,
:meth:`Environment.create_sink`) run on the storage instance's one replica, a
``tidegate replica --services storage`` process: managed (started by the
orchestrator with the first source or sink, and at every open while any
exist; restarted when it dies) or at the ``storage_replica`` address. A
source is read like a table (peek, subscribe, index, materialized view, SQL);
its ``<name>_progress`` collection says up to which upstream offset its data
is reflected at each time. Their status and statistics are in
:meth:`Environment.storage_status` and in the system collections
``mz_source_status_history``, ``mz_sink_status_history``,
``mz_source_statistics`` and ``mz_sink_statistics`` (created with the first
source or sink), which the controller writes in its group commits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import sys
import tempfile
import uuid as _uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias, Unpack

import anyio

from tidegate.spec.compute.as_of_selection import select_as_ofs
from tidegate.spec.controller import Controller
from tidegate.spec.errors import (
    CollectionMissing,
    InvalidUppers,
    ReadBeyondUpper,
    TidegateError,
    TypeMismatch,
)
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, typecheck
from tidegate.spec.plan.builder import Frame
from tidegate.spec.plan.relation import Get
from tidegate.spec.plan.schema import check_row
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    ComputeParameters,
    DataflowDescription,
    IndexImport,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from tidegate.spec.storage import (
    CollectionDescription,
    ExportDescription,
    IcebergSink,
    Ingestion,
    Introspection,
    LoadGenerator,
    MaterializedView,
    PostgresSource,
    Progress,
    ShardFrontiers,
    SimulatedSink,
    SimulatedSource,
    SourceConnection,
    StorageController,
    StorageSinkConnection,
    Table,
)
from tidegate.spec.storage.introspection import (
    SINK_STATISTICS,
    SINK_STATUS_HISTORY,
    SOURCE_STATISTICS,
    SOURCE_STATUS_HISTORY,
)
from tidegate.spec.storage.loadgen import loadgen_schema

from ..catalog import (
    STORAGE_ENTRIES,
    STORAGE_REPLICA,
    AlterReplica,
    Catalog,
    CatalogOp,
    CatalogState,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateSink,
    CreateSource,
    CreateSystemCollection,
    CreateTable,
    CreateView,
    Drop,
    DropReplica,
    IndexEntry,
    MaterializedViewEntry,
    ProgressEntry,
    ReplicaEntry,
    SetDefinition,
    SetReadPolicy,
    SetStorageReplica,
    SinkEntry,
    SourceEntry,
    StorageKind,
    SystemCollectionEntry,
    TableEntry,
    apply_ops,
    dataflow_for,
    restore_plan,
)
from ..controller.driver import ControllerDriver, ReplicaInfo
from ..controller.errors import RuntimeControllerError, SourceSchemaMismatch
from ..controller.storage_io import CONTROLLER_READER, ShardStorageIO
from ..controller.storage_status import StorageStatus, connection_text, connection_type
from ..controller.streams import EventStream, Subscription
from ..controller.timestamps import Oracle, UpperOracle, default_oracle
from ..errors import (
    CatalogConflict,
    EnvironmentFenced,
    InvalidCatalogOp,
    ReadOnlyEnvironment,
    ReplicaStartFailed,
)
from ..frames import PeekAnswer, frame_updates, is_frame
from ..hydration import HydrationInfo, HydrationTracker, catalog_hydration
from ..options import EnvironmentOptions, EnvironmentOverrides, Replicas, ReplicaSpec
from ..platform import REAL, Platform
from ..storage.store import ShardStore
from ..storage.urls import default_urls, open_blob, open_consensus

__all__ = [
    "DEFAULT_READ_POLICY",
    "STORAGE_INSTANCE",
    "SYSTEM_COLLECTIONS",
    "Environment",
    "ReplicaSpec",
    "Replicas",
    "StorageStatus",
    "replica_ops",
    "storage_replica_ops",
]

INSTANCE = "default"

STORAGE_INSTANCE = "storage"
"""The storage instance (cluster) that runs every source and sink, on its one replica."""

SYSTEM_COLLECTIONS: tuple[tuple[GlobalId, str, str], ...] = (
    (GlobalId.system(1), "mz_source_status_history", SOURCE_STATUS_HISTORY),
    (GlobalId.system(2), "mz_sink_status_history", SINK_STATUS_HISTORY),
    (GlobalId.system(3), "mz_source_statistics", SOURCE_STATISTICS),
    (GlobalId.system(4), "mz_sink_statistics", SINK_STATISTICS),
)
"""The storage-managed collections: ``(id, reserved name, kind)`` (Materialize's names)."""

log = logging.getLogger(__name__)

DEFAULT_READ_POLICY: ReadPolicy = LagWriteFrontier(1000, 1000)
"""How far objects without a read policy of their own may be compacted: one second behind
their upper, in whole seconds (Materialize's default logical compaction window)."""

Ref: TypeAlias = GlobalId | str
"""An object by id or by name."""


def _replica_specs(replicas: Replicas) -> list[ReplicaSpec]:
    if isinstance(replicas, int):
        return [ReplicaSpec(f"r{i}") for i in range(1, replicas + 1)]
    if isinstance(replicas, Mapping):
        return [ReplicaSpec(name, address) for name, address in replicas.items()]
    return list(replicas)


def _updates(schema: Schema, rows: Iterable[Any], what: str) -> list[tuple[Row, int]]:
    """``rows`` (tuples, ``(row, diff)`` pairs, or an Arrow table/batch or DataFrame: see
    :mod:`tidegate.runtime.frames`) checked against ``schema``, as ``(row, diff)``."""
    if is_frame(rows):
        return frame_updates(schema, rows, what)
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise TypeMismatch(
            f"{what}: rows must be an iterable of tuples or (row, diff) pairs, got {rows!r}"
        )
    out: list[tuple[Row, int]] = []
    for item in rows:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple):
            # A (row, diff) pair: no column holds a tuple, so the shape says which it is.
            row, diff = item
            if type(diff) is not int or not _INT64_MIN <= diff <= _INT64_MAX:
                raise TypeMismatch(
                    f"{what} row {row!r}: its diff must be an int64 (a count), got {diff!r}"
                )
        else:
            row, diff = item, 1
        check_row(row, schema, f"{what} row")
        out.append((row, diff))
    return out


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SLOT_DROP_WAIT_S = 30.0
"""How long closing an environment waits for the slots of sources it dropped to be dropped."""


class Environment:
    """A running tidegate environment (use :meth:`open`); see the module docstring."""

    def __init__(
        self,
        driver: ControllerDriver,
        catalog: Catalog,
        store: ShardStore,
        io: ShardStorageIO,
        oracle: Oracle,
        orchestrator: Any = None,
        platform: Platform = REAL,
    ) -> None:
        self.driver = driver
        self.catalog = catalog
        self.store = store
        self.io = io
        self.oracle = oracle
        self.platform = platform
        self.orchestrator = orchestrator
        """The :class:`~tidegate.runtime.orchestrator.Orchestrator` of managed replicas, if any."""
        self._ddl = anyio.Lock()
        self._stack: contextlib.AsyncExitStack | None = None
        self._addresses: dict[str, str] = {}
        """Where unmanaged replicas listen, by name (the driver resolves through it)."""
        self.read_only = driver.ctl.read_only
        """Opened with ``read_only=True`` and not yet promoted (:meth:`promote`)."""
        self._options = EnvironmentOptions()
        self.hydration_tracker = HydrationTracker(driver, platform.clock_ms)
        """Times each collection's hydration on each replica (see :meth:`hydration`)."""
        self._data_dir: Path | None = None
        self._storage_token: str | None = None
        self._storage_connected = False
        """Whether the storage instance's replica was connected (it then stays connected)."""
        self._later: list[Any] = []
        """Orchestrators and transports started after opening (closed after the driver)."""
        self._replicas_dir: Path | None = None
        """Where an orchestrator started later keeps its files (``None``: ``DATA_DIR/replicas``)."""
        self._opened_read_only = False
        self._tables_cache: tuple[CatalogState | None, dict[Ref, TableEntry]] = (None, {})
        """Tables by the refs appends named them with, for one catalog state."""
        self._slot_drops: set[anyio.Event] = set()
        """One event per dropped PostgreSQL source whose slot is still being dropped."""

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        data_dir: str | Path | None = None,
        options: EnvironmentOptions | None = None,
        **overrides: Unpack[EnvironmentOverrides],
    ) -> _Opening:
        """Open (creating or restoring) the environment stored in ``data_dir`` or at the URLs.

        Use ``async with Environment.open(...) as env:``, or ``env = await
        Environment.open(...)`` and later ``await env.aclose()`` in the same task
        (the environment's background tasks live in a task group it enters).

        The options are an :class:`~tidegate.runtime.options.EnvironmentOptions`
        (its fields document each one), given as ``options``, as keywords
        (``Environment.open("data", replicas=2, executor="python")``), or both
        (keywords override fields of ``options``). Bad values raise
        :class:`~tidegate.runtime.errors.InvalidEnvironmentOptions` here,
        before anything is opened; an unknown keyword is a :class:`TypeError`.

        Without a directory or URLs a temporary directory is used (deleted at
        close). ``replicas`` ``None`` (the default) runs the replicas recorded
        in the catalog (one managed replica ``r1`` in a catalog that records
        none); given explicitly, it replaces the catalog's record (replicas
        created, altered or dropped to match). Managed replicas run under the
        ``orchestrator`` and are started concurrently; the environment opens
        once their processes run (:meth:`wait_connected` waits for the
        connections).
        """
        if options is None:
            options = EnvironmentOptions()
        elif not isinstance(options, EnvironmentOptions):
            raise TypeError(f"options must be an EnvironmentOptions, got {options!r}")
        return _Opening(cls, data_dir, options.replace(**overrides))

    @classmethod
    async def _open(
        cls,
        stack: contextlib.AsyncExitStack,
        data_dir: str | Path | None,
        options: EnvironmentOptions,
    ) -> Environment:
        """The body of :meth:`open`: everything it enters is pushed on ``stack``."""
        blob, consensus, platform = options.blob, options.consensus, options.platform
        blob_url, consensus_url = options.blob_url, options.consensus_url
        oracle, orchestrator, transport = options.oracle, options.orchestrator, options.transport
        executor, spark_master, token = options.executor, options.spark_master, options.token
        given = (blob is not None or blob_url is not None) and (
            consensus is not None or consensus_url is not None
        )
        if data_dir is None and not given:
            tmp = tempfile.mkdtemp(prefix="tidegate-")
            stack.callback(shutil.rmtree, tmp, True)
            data_dir = tmp
        if data_dir is not None:
            # Private: the shards, the catalog and the replicas' logs are nobody else's to read.
            Path(data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
            default_blob, default_consensus = default_urls(data_dir)
            blob_url = blob_url or default_blob
            consensus_url = consensus_url or default_consensus
        run = platform.run_blocking

        def open_store() -> ShardStore:
            return ShardStore(
                blob if blob is not None else open_blob(str(blob_url)),
                consensus if consensus is not None else open_consensus(str(consensus_url)),
                clock_ms=platform.clock_ms,
                new_id=platform.new_id,
                policy=options.shard_policy,
                background=platform.threads,
                owns_backends=blob is None and consensus is None,  # closed with the store
            )

        store = await run(open_store)
        stack.callback(store.close)
        read_only = options.read_only
        # A read-only environment holds the shards with a critical reader of its own: its
        # holds must not move the writer's (it takes the writer's over when promoted).
        reader = f"{CONTROLLER_READER}-read-only-{platform.new_id()}" if read_only else None
        io = ShardStorageIO(store, platform=platform, reader_id=reader or CONTROLLER_READER)
        retry = io.retrying  # the store may be unreachable for a while: wait for it
        catalog = Catalog(store.consensus)
        state = await retry("catalog read", catalog.load)
        tables_upper: list[Callable[[], int | None]] = []
        if read_only:  # no oracle (opening one fences the writer): reads follow the tables
            oracle = UpperOracle(lambda: tables_upper[0]() if tables_upper else None)
        elif oracle is None:
            oracle = await retry(
                "timestamp oracle", default_oracle, store.consensus, platform.clock_ms
            )
        own: Path | None = None
        ops = replica_ops(state, options.replicas, executor=executor, spark_master=spark_master)
        ops += storage_replica_ops(state, options.storage_replica)
        wanted = apply_ops(state, ops)
        if data_dir is None and orchestrator is None and any(r.managed for r in wanted.replicas):
            raise RuntimeControllerError(
                "managed replicas need a data directory for their processes: open the "
                "environment with a data_dir, or pass replicas={name: 'host:port'} to connect "
                "to replicas that run already"
            )
        if wanted != state and not read_only:
            state = await retry("catalog write", catalog.apply, ops)
        entries = wanted.replicas  # a read-only environment runs them without recording them
        addresses = {r.name: r.address for r in entries if not r.managed and r.address}
        managed = [r for r in entries if r.managed]
        if managed and orchestrator is None:
            from ..orchestrator import Orchestrator

            if token is None:
                # Authenticated by default: managed replicas start afresh with each open, so a
                # token of this environment's lifetime is enough (and is never written down).
                token = platform.new_id()

            assert data_dir is not None  # checked above
            # A read-only environment's replicas get a directory of their own: the writer's
            # orchestrator owns DATA_DIR/replicas (and would reap what it finds there).
            own = Path(data_dir) / f"replicas-{platform.new_id()[:12]}" if read_only else None
            orchestrator = await stack.enter_async_context(
                Orchestrator(
                    data_dir,
                    executor=executor,
                    spark_master=spark_master,
                    token=token,
                    tls=options.replica_tls,
                    replicas_dir=own,
                    extra_args=_memory_limit_args(options.replica_memory_limit),
                    spark_conf=options.spark_conf,
                    spark_ui=options.spark_ui,
                    metrics_host=_metrics_host(options.replica_metrics),
                )
            )
        if transport is None:
            from ..transport.grpc_client import GrpcTransport

            transport = GrpcTransport(token=token, tls=options.tls)
            stack.push_async_callback(transport.aclose)
        # What is started later (the storage replica's orchestrator and transport, when the
        # first source or sink needs them) is closed after the driver, like what is entered here.
        later: list[Any] = []
        stack.push_async_callback(_close_all, later)

        def address_of(name: str) -> str:
            if name in addresses:
                return addresses[name]
            if orchestrator is None:
                raise LookupError(f"no address for replica {name!r}")
            return str(orchestrator.address(name))

        shard_ids = await retry("shard listing", store.list_shards)
        durable = [g for g in (_parse_id(s) for s in shard_ids) if g is not None]
        controller = Controller(
            StorageController(
                durable_shards=durable,
                read_only=read_only,
                check_protocol=options.check_protocol,
            ),
            uuid_factory=lambda: _uuid.UUID(hex=platform.new_id()),
            check_protocol=options.check_protocol,
            read_only=read_only,
        )
        if options.max_result_size is not None:  # every instance's first UpdateConfiguration
            controller.update_compute_configuration(
                ComputeParameters(max_result_size=options.max_result_size)
            )
        env_ref: list[Environment] = []

        def storage_address_of(name: str) -> str:
            return env_ref[0]._storage_address(name)

        driver = ControllerDriver(
            controller,
            transport,
            io,
            address_of=address_of,
            oracle=oracle,
            instance=INSTANCE,
            tick_ms=options.tick_ms,
            maintain_ms=options.maintain_ms,
            poll_ms=options.poll_ms,
            storage_transport=options.storage_transport,
            storage_address_of=storage_address_of,
        )
        await stack.enter_async_context(driver)
        tables_upper.append(driver.tables_upper)
        env = cls(driver, catalog, store, io, oracle, orchestrator, platform)
        env_ref.append(env)
        env._addresses = addresses
        env._options = options
        env._data_dir = None if data_dir is None else Path(data_dir)
        env._later = later
        env._replicas_dir = own
        env._opened_read_only = read_only
        if read_only:  # its holds go with it, unless it was promoted (they are the writer's then)
            stack.push_async_callback(env._release_read_only_holds)
        else:
            driver.fence_check = env._fence_check
            stack.push_async_callback(env._finish_slot_drops)  # before the driver stops
        if managed:
            await _start_all(orchestrator, managed)
        await env._restore(state, [r.name for r in entries])
        if read_only:
            driver.start_soon(env._follow_catalog, options.tick_ms or 1000)
        return env

    async def aclose(self) -> None:
        """Close the environment: the driver, managed replicas, transport and store (idempotent).

        With ``env = await Environment.open(...)``, call it from the task that opened it.
        """
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> Environment:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    async def wait_connected(
        self, replicas: Iterable[str] | None = None, *, timeout_s: float | None = None
    ) -> None:
        """Wait until ``replicas`` (default: all) are connected [ReplicasNotConnected on timeout].

        :meth:`open` returns once managed replica processes run, before the
        controller has connected to them; this waits for the connections.
        """
        await self.driver.wait_connected(replicas, timeout_s=timeout_s)

    # -- zero-downtime upgrades: read-only, then promoted ------------------------------------
    async def promote(self) -> None:
        """Take over writing from the environment that writes this data (a read-only one only).

        The last step of a zero-downtime upgrade: an environment opened with
        ``read_only=True`` has warmed up beside the writer (its replicas
        hydrated); now it fences the writer and becomes the writer, in order:

        1. *Fence.* It opens the durable timestamp oracle, whose new epoch is
           the writer epoch: the old writer's oracle can reserve no more
           timestamps, and its failed writes find out they are fenced.
        2. *Catalog.* It loads the writer's latest catalog and writes it again
           as a new version (recording its own replicas if ``replicas`` was
           given), so the old writer's next DDL fails; objects the writer
           created or dropped meanwhile are created or dropped here.
        3. *Read-write.* The spec controller's ``read_write``: every
           materialized view gets its ``AllowWrites`` (once), appends and ticks
           start. Every table is then advanced past the old writer's last
           timestamp, so the old writer's next append fails too.
        4. *Read holds.* Its holds on the shards move to the controller's
           reader (the old writer's holds there are released).

        From then on every write of the old environment raises
        :class:`~tidegate.runtime.errors.EnvironmentFenced`, and nothing it
        acknowledged is lost. [RuntimeControllerError] if this environment is
        not read-only.
        """
        async with self._ddl:
            if not self.read_only:
                raise RuntimeControllerError("promote: this environment is not read-only")
            retry, options = self.io.retrying, self._options
            oracle = await retry(
                "timestamp oracle", default_oracle, self.store.consensus, self.platform.clock_ms
            )
            before = self.state
            # The new catalog is swapped in once the controller has caught up with it, so
            # that no name resolves to an object the controller does not have yet.
            catalog = Catalog(self.store.consensus, key=self.catalog.key)
            while True:  # the old writer may commit DDL up to our catalog write: reload, retry
                latest = await retry("catalog read", catalog.load)
                ops = replica_ops(
                    latest,
                    options.replicas,
                    executor=options.executor,
                    spark_master=options.spark_master,
                )
                ops += storage_replica_ops(latest, options.storage_replica)
                try:
                    if ops:
                        await retry("catalog write", catalog.apply, ops)
                    else:
                        await retry("catalog fence", catalog.touch)
                    break
                except CatalogConflict:
                    continue
            self.oracle = oracle
            self.driver.oracle = oracle
            self.driver.fence_check = self._fence_check
            await self._catch_up(before, catalog.state)
            self.catalog = catalog
            await self.driver.poll_uppers()  # the old writer's last uppers
            self.driver.read_write()
            self.read_only = False
            for _ in range(100):  # each failure means the old writer wrote first: it is adopted
                try:
                    await self.driver.tick()
                    break
                except InvalidUppers:
                    continue
            ids = [c.id for c in self.driver.ctl.storage.collections() if not c.is_dropped]
            await self.io.take_over(ids, CONTROLLER_READER, oracle.epoch)
            if _storage_wanted(self.state):  # sources and sinks run from now on
                await self._connect_storage_replica(self.state)

    async def _release_read_only_holds(self) -> None:
        """At close, unless promoted: release the read-only reader's holds on every shard.

        Not shielded: a close that is cancelled (the process is going away) skips it.
        """
        if self.read_only:
            ids = [c.id for c in self.driver.ctl.storage.collections()]
            await self.io.release_holds(ids)

    async def _catch_up(self, before: CatalogState, after: CatalogState) -> None:
        """Bring the controller from catalog ``before`` to ``after`` (another environment's DDL).

        Dropped objects are dropped, new ones created (by id: dependencies
        first), changed read policies set. Replicas are this environment's own.
        """
        old = {e.id: e for e in (*before.entries(), *before.sinks)}
        new = {e.id for e in (*after.entries(), *after.sinks)}
        gone = sorted(set(old) - new, reverse=True)
        if gone:
            self._uninstall(old, gone)
        for e in after.entries():
            if e.id in old:
                if after.read_policy(e.id) != before.read_policy(e.id):
                    policy = [(e.id, self._effective_policy(after, e.id))]
                    if isinstance(e, IndexEntry):
                        self.driver.set_read_policy(policy)
                    else:
                        self.driver.set_storage_read_policy(policy)
            elif isinstance(e, TableEntry):
                await self._install_table(after, e.id)
            elif isinstance(e, MaterializedViewEntry):
                await self._install_materialized_view(after, e.id)
            elif isinstance(e, IndexEntry):
                self._install_index(after, e.id)
            elif isinstance(e, SystemCollectionEntry):
                await self._install_system_collections(after, [e.id])
            elif isinstance(e, SourceEntry):
                await self._install_source(after, e.id)  # its progress collection too
        for sink in after.sinks:
            if sink.id not in old:
                self._install_sink(after, sink.id)

    async def _follow_catalog(self, period_ms: int) -> None:
        """While read-only: pick up the writer's DDL every ``period_ms`` (so it hydrates too)."""
        while self.read_only:
            await anyio.sleep(period_ms / 1000)
            async with self._ddl:
                if not self.read_only:
                    return
                before, catalog = self.state, Catalog(self.store.consensus, key=self.catalog.key)
                try:
                    after = await self.io.retrying("catalog read", catalog.load)
                    if after != before:
                        await self._catch_up(before, after)
                        self.catalog = catalog  # once the controller has it all
                except Exception as e:  # a background step never takes the environment down
                    log.warning("following the catalog failed: %r", e)

    async def _restore(self, state: CatalogState, replicas: Sequence[str]) -> None:
        """Bring back everything in ``state``: collections at their shards' frontiers, then dataflows.

        The one place a (re)starting controller is built up: storage
        collections, the compute instance, dataflows with as-ofs from the
        spec's as-of selection, read policies, replicas, and finally
        initialization complete (replicas then reconcile what they run).
        """
        ctl, driver = self.driver.ctl, self.driver
        frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        shards: dict[GlobalId, ShardFrontiers] = {}
        plan = restore_plan(state)
        for c in plan.storage_collections:
            fr = await self.io.ensure_shard(c.id, c.schema)
            shards[c.id] = fr
            frontiers[c.id] = (fr.since, fr.upper)
            if c.kind in ("table", "system") and fr.upper.elements:  # the controller writes them
                await self.io.retrying(
                    "oracle apply", self.oracle.apply_write, max(0, int(fr.upper.elements[0]) - 1)
                )
        current = self.oracle.read_ts()
        if frontiers:
            plan = restore_plan(state, frontiers, current_time=current, read_only=self.read_only)
        descriptions = [
            (c.id, self._description(state, c.id, c.kind)) for c in plan.storage_collections
        ]
        ctl.storage.create_instance(STORAGE_INSTANCE)  # sources and sinks run there
        ctl.create_collections(descriptions, shards)
        driver.apply()
        ctl.create_instance(INSTANCE)
        driver.apply()
        for df in plan.dataflows:
            if df.as_of is None:
                df = df.with_as_of(self._select_as_of(state, df, current))
            driver.create_dataflow(df)
            for id in df.persist_sink_ids:
                ctl.allow_writes(INSTANCE, id)
                driver.apply()
        # Sinks hold what they write out from where it is readable now (their as-ofs follow
        # the SinkAsOf rule); each resumes from what its target already covers.
        for sink in plan.sinks:
            self._install_sink(state, sink.id)
        # Policies last: the dataflows now hold their inputs at their as-ofs, so no
        # policy can move a since past an as_of chosen above. Objects without one compact
        # by the default policy.
        policies = {e.id: self._effective_policy(state, e.id) for e in state.entries()}
        storage_ids = {c.id for c in plan.storage_collections}
        storage_policies = [(g, p) for g, p in policies.items() if g in storage_ids]
        if storage_policies:
            driver.set_storage_read_policy(storage_policies)
        compute_policies = [(g, p) for g, p in policies.items() if g not in storage_ids]
        if compute_policies:
            driver.set_read_policy(compute_policies)
        for name in replicas:
            ctl.add_replica(INSTANCE, name)
            driver.apply()
        ctl.initialization_complete()
        driver.apply()
        ctl.reconcile_state()
        driver.apply()
        if not self.read_only and _storage_wanted(state):
            await self._connect_storage_replica(state)

    @staticmethod
    def _effective_policy(state: CatalogState, id: GlobalId) -> ReadPolicy:
        return state.read_policy(id) or DEFAULT_READ_POLICY

    def read_policy(self, ref: Ref) -> ReadPolicy:
        """The read policy of object ``ref``: the one set, else :data:`DEFAULT_READ_POLICY`."""
        return self._effective_policy(self.state, self.resolve(ref))

    @staticmethod
    def _description(state: CatalogState, id: GlobalId, kind: StorageKind) -> CollectionDescription:
        if kind == "table":
            return CollectionDescription(Table())
        entry = state.get(id)
        if isinstance(entry, SystemCollectionEntry):
            return CollectionDescription(Introspection(entry.kind))
        if isinstance(entry, ProgressEntry):
            return CollectionDescription(Progress())
        if isinstance(entry, SourceEntry):
            ingestion = Ingestion(STORAGE_INSTANCE, entry.remap_id, entry.connection, entry.schema)
            return CollectionDescription(ingestion)
        assert isinstance(entry, MaterializedViewEntry)
        inputs = tuple(
            g for g in sorted(gets(entry.plan)) if isinstance(state.get(g), STORAGE_ENTRIES)
        )
        return CollectionDescription(MaterializedView(inputs))

    # -- lookup ----------------------------------------------------------------------------
    @property
    def state(self) -> CatalogState:
        """The catalog as this environment last wrote or read it."""
        return self.catalog.state

    def resolve(self, ref: Ref) -> GlobalId:
        """The id of the object ``ref`` (a name, an id, or an id's text) [UnknownCatalogObject].

        Views and sinks resolve too; what needs a collection (peeks, appends, read
        policies) then refuses their ids with :class:`UnknownCatalogObject`.
        """
        key = ref if isinstance(ref, GlobalId) else _parse_id(ref) or ref
        named = self.state.view(key) or self.state.sink(key)
        if named is not None:
            return named.id
        if isinstance(ref, GlobalId):
            return self.state.get(ref).id
        try:
            return self.state.by_name(ref).id
        except LookupError:
            gid = _parse_id(ref)
            if gid is None:
                raise
            return self.state.get(gid).id

    def schema(self, ref: Ref) -> Schema:
        """The row schema of object ``ref``."""
        return self.state.schema_of(self.resolve(ref))

    def table(self, name: Ref) -> Frame:
        """A :class:`tidegate.dsl.Frame` reading table (or materialized view, index or view) ``name``.

        A view's frame is its plan: a view is read by inlining it, as Materialize does.
        """
        gid = self.resolve(name)
        schema = self.state.schema_of(gid)
        view = self.state.view(gid)
        return Frame(view.plan if view is not None else Get(gid, schema), schema)

    # -- DDL -------------------------------------------------------------------------------
    async def _apply(self, ops: Sequence[CatalogOp]) -> CatalogState:
        """Apply ``ops`` to the durable catalog [ReadOnlyEnvironment, EnvironmentFenced]."""
        if self.read_only:
            raise ReadOnlyEnvironment("a catalog change")
        if self.driver.fenced is not None:
            raise self.driver.fenced
        try:
            return await self.io.retrying("catalog write", self.catalog.apply, ops)
        except CatalogConflict as e:  # another writer: a newer environment that fenced this one?
            fenced = await self.io.retrying("fence check", self._fence_check)
            if fenced is None:
                raise
            self.driver.fenced = fenced
            raise fenced from e

    def _fence_check(self) -> EnvironmentFenced | None:
        """Blocking: the error to fence with if a newer environment took over writing, else ``None``.

        The writer epoch is the durable timestamp oracle's: an environment that opens
        read-write, or is promoted, opens a new oracle, which bumps it.
        """
        newer = self.oracle.superseded_by()
        return None if newer is None else EnvironmentFenced(self.oracle.epoch, newer)

    def _fresh_id(self) -> GlobalId:
        return GlobalId.user(self.state.next_user_id)

    async def create_table(
        self, name: str, schema: Schema, *, definition: str | None = None
    ) -> GlobalId:
        """Create table ``name`` with ``schema``; returns its id.

        ``definition`` (on every ``create_*``): the SQL text that created it, which
        the catalog keeps for ``SHOW CREATE``.
        """
        async with self._ddl:
            gid = self._fresh_id()
            state = await self._apply([CreateTable(name, gid, schema), *_defined(gid, definition)])
            await self._install_table(state, gid)
            return gid

    async def _install_table(self, state: CatalogState, gid: GlobalId) -> None:
        """Create table ``gid`` of catalog ``state`` in the controller (its shard too)."""
        entry = state.get(gid)
        assert isinstance(entry, TableEntry)
        fr = await self.io.ensure_shard(gid, entry.schema)
        ctl = self.driver.ctl
        ctl.create_collections([(gid, self._description(state, gid, "table"))], {gid: fr})
        self.driver.apply()
        self.driver.set_storage_read_policy([(gid, self._effective_policy(state, gid))])

    async def create_index(
        self,
        plan: Frame | Plan | Ref,
        keys: Sequence[str | int] = (),
        *,
        name: str | None = None,
        definition: str | None = None,
    ) -> GlobalId:
        """Maintain ``plan`` in an index arranged by ``keys`` (names or positions); returns its id.

        Given a name (or id) rather than a plan, the index is *on* that object (a
        dependency: dropping it needs ``cascade``); a view's index maintains its plan.
        """
        async with self._ddl:
            p = self._plan(plan)
            schema = typecheck(p)
            positions = tuple(k if isinstance(k, int) else schema.index(k) for k in keys)
            on = p.id if isinstance(p, Get) else None
            if isinstance(plan, GlobalId | str) and self.state.view(self.resolve(plan)) is not None:
                on = self.resolve(plan)
            gid = self._fresh_id()
            index = CreateIndex(name or f"index_{gid}", gid, p, positions, on)
            state = await self._apply([index, *_defined(gid, definition)])
            self._install_index(state, gid)
            return gid

    def _install_index(self, state: CatalogState, gid: GlobalId) -> None:
        """Create index ``gid`` of catalog ``state`` in the controller."""
        df = dataflow_for(state, gid)
        current = self.oracle.read_ts()
        self.driver.create_dataflow(df.with_as_of(self._select_as_of(state, df, current)))
        self.driver.set_read_policy([(gid, self._effective_policy(state, gid))])

    async def create_materialized_view(
        self, name: str, plan: Frame | Plan | Ref, *, definition: str | None = None
    ) -> GlobalId:
        """Maintain ``plan`` into durable storage collection ``name``; returns its id."""
        async with self._ddl:
            p = self._plan(plan)
            gid = self._fresh_id()
            mv = CreateMaterializedView(name, gid, p)
            state = await self._apply([mv, *_defined(gid, definition)])
            await self._install_materialized_view(state, gid)
            return gid

    async def _install_materialized_view(self, state: CatalogState, gid: GlobalId) -> None:
        """Create materialized view ``gid`` of catalog ``state`` in the controller (its shard too)."""
        entry = state.get(gid)
        assert isinstance(entry, MaterializedViewEntry)
        fr = await self.io.ensure_shard(gid, typecheck(entry.plan))
        df = dataflow_for(state, gid)
        current = self.oracle.read_ts()
        as_of = self._select_as_of(state, df, current, output=(fr.since, fr.upper))
        desc = self._description(state, gid, "materialized_view")
        desc = CollectionDescription(desc.data_source, since=as_of)
        ctl = self.driver.ctl
        ctl.create_collections([(gid, desc)], {gid: fr})
        self.driver.apply()
        self.driver.create_dataflow(df.with_as_of(as_of))
        ctl.allow_writes(INSTANCE, gid)  # a read-only controller sends it once promoted
        self.driver.apply()
        self.driver.set_storage_read_policy([(gid, self._effective_policy(state, gid))])

    async def create_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
    ) -> GlobalId:
        """Name the query ``plan`` (Materialize's ``CREATE VIEW``); returns its id.

        Nothing is computed or stored: reading the view (:meth:`table`, SQL)
        reads its plan, and an index on it maintains that plan. ``views``: the
        views the query was written against (their plans are inlined in
        ``plan``); dropping one of them drops this view too (``cascade``) or is
        refused. A view has no collection: peeks, appends and read policies
        refuse it [UnknownCatalogObject].
        """
        async with self._ddl:
            p = self._plan(plan)
            on_views = tuple(self.resolve(v) for v in views)
            gid = self._fresh_id()
            await self._apply([CreateView(name, gid, p, on_views), *_defined(gid, definition)])
            return gid

    # -- sources and sinks --------------------------------------------------------------------
    async def create_source(
        self,
        name: str,
        connection: SourceConnection,
        *,
        schema: Schema | None = None,
        definition: str | None = None,
    ) -> GlobalId:
        """Create source ``name``, ingesting ``connection`` on the storage instance; returns its id.

        ``connection`` is a :class:`~tidegate.spec.storage.LoadGenerator`
        (Materialize's ``LOAD GENERATOR COUNTER``/``AUCTION``) or a
        :class:`~tidegate.spec.storage.PostgresSource` (a table replicated
        through a publication and a replication slot of its own). The rows'
        schema comes from the upstream: the load generator's kind, or the
        PostgreSQL table's columns, read now and checked for replication (its
        ``REPLICA IDENTITY FULL``, supported types, the publication; as
        Materialize's purification does). A ``schema`` given must be that one
        [SourceSchemaMismatch]. The upstream's refusals are typed
        (:class:`~tidegate.spec.errors.SourceError`:
        :class:`~tidegate.spec.errors.UpstreamUnreachable`,
        :class:`~tidegate.spec.errors.ReplicaIdentityNotFull`, ...), a name in
        use is [DuplicateCatalogName]; nothing is created then.

        The source is also a collection named ``<name>_progress``: at each
        time, the upstream offset (a load generator's tick, a PostgreSQL LSN)
        up to which the source's data is reflected. The first source or sink
        also creates the system collections (status history and statistics)
        and, unless the environment was given a ``storage_replica`` address, the
        managed storage replica process. The source is read like a table; a
        read at the freshest time waits until the source's upper passes it.
        """
        async with self._ddl:
            schema = await self._source_schema(name, connection, schema)
            gid = self._fresh_id()
            remap = GlobalId.user(gid.value + 1)
            ops: list[CatalogOp] = [
                *self._storage_ops(),
                CreateSource(name, gid, connection, schema, remap),
                *_defined(gid, definition),
            ]
            state = await self._apply(ops)
            await self._install_system_collections(state)
            await self._install_source(state, gid)
            await self._connect_storage_replica(state)
            return gid

    async def _source_schema(
        self, name: str, connection: SourceConnection, given: Schema | None
    ) -> Schema:
        """The schema of ``connection``'s rows, from the upstream [SourceSchemaMismatch]."""
        if given is not None and not isinstance(given, Schema):
            raise InvalidCatalogOp(f"source {name!r}: schema must be a Schema, got {given!r}")
        if isinstance(connection, LoadGenerator):
            found = loadgen_schema(connection)  # InvalidUsage for bad parameters
        elif isinstance(connection, PostgresSource):
            found = await self.platform.run_blocking(_postgres_schema, connection)
        elif isinstance(connection, SimulatedSource):
            if given is None:
                raise InvalidCatalogOp(f"source {name!r}: a simulated source needs its schema")
            found = given
        else:
            raise InvalidCatalogOp(
                f"source {name!r}: not a source connection (LoadGenerator, PostgresSource): "
                f"{connection!r}"
            )
        if given is not None and given != found:
            raise SourceSchemaMismatch(name, found, given)
        return found

    async def create_sink(
        self,
        name: str,
        from_ref: Ref,
        connection: StorageSinkConnection,
        *,
        definition: str | None = None,
    ) -> GlobalId:
        """Create sink ``name``, writing ``from_ref``'s changes out to ``connection``; its id.

        ``from_ref`` is a table, materialized view or source (a collection with a
        shard; an index or a view is refused [InvalidCatalogOp]), unknown
        [UnknownCatalogObject]. ``connection`` is an
        :class:`~tidegate.spec.storage.IcebergSink`: the changelog (rows with
        ``_tidegate_time`` and ``_tidegate_diff``) is committed to that Iceberg
        table exactly once, every commit recording the frontier it covers, from
        which a restarted sink resumes. A bad description is a
        :class:`~tidegate.spec.errors.SinkDescriptionInvalid`; a name in use
        [DuplicateCatalogName]. It starts at the earliest time its input is
        readable (its since): the contents there, then every change.
        """
        async with self._ddl:
            from_id = self.resolve(from_ref)
            state = self.state
            what = state.view(from_id) or state.sink(from_id) or state.get(from_id)
            if not isinstance(what, STORAGE_ENTRIES):
                raise InvalidCatalogOp(
                    f"sink {name!r}: {what.name} is not a table, materialized view or source: "
                    "a sink writes out a collection with a shard of its own"
                )
            gid = self._fresh_id()
            _check_sink_connection(connection, state.schema_of(from_id), gid)
            ops: list[CatalogOp] = [
                *self._storage_ops(),
                CreateSink(name, gid, from_id, connection),
                *_defined(gid, definition),
            ]
            state = await self._apply(ops)
            await self._install_system_collections(state)
            self._install_sink(state, gid)
            await self._connect_storage_replica(state)
            return gid

    def _storage_ops(self) -> list[CatalogOp]:
        """What the first source or sink brings along: the system collections and, unless one
        is recorded, a managed storage replica [RuntimeControllerError if none can run]."""
        state = self.state
        ops: list[CatalogOp] = [
            CreateSystemCollection(name, gid, kind)
            for gid, name, kind in SYSTEM_COLLECTIONS
            if state.system_collection(kind) is None
        ]
        if state.storage_replica is None:
            if self.orchestrator is None and self._data_dir is None:
                raise RuntimeControllerError(
                    "sources and sinks run on a storage replica: open the environment with a "
                    "data directory (its orchestrator then runs one) or with "
                    "storage_replica='host:port' (a `tidegate replica --services storage` process)"
                )
            ops.append(SetStorageReplica(managed=True))
        return ops

    async def _install_system_collections(
        self, state: CatalogState, ids: Sequence[GlobalId] | None = None
    ) -> None:
        """Create the system collections of ``state`` the controller lacks (or only ``ids``)."""
        ctl = self.driver.ctl
        wanted = [
            c
            for c in state.system_collections
            if (ids is None or c.id in ids) and ctl.storage_frontiers(c.id) is None
        ]
        if not wanted:
            return
        shards = {c.id: await self.io.ensure_shard(c.id, c.schema) for c in wanted}
        descs = [(c.id, self._description(state, c.id, "system")) for c in wanted]
        ctl.create_collections(descs, shards)
        self.driver.apply()
        self.driver.set_storage_read_policy(
            [(c.id, self._effective_policy(state, c.id)) for c in wanted]
        )

    async def _install_source(self, state: CatalogState, gid: GlobalId) -> None:
        """Create source ``gid`` of catalog ``state`` and its progress collection (their shards
        too); the ingestion is sent to the storage instance's replica."""
        entry = state.source(gid)
        assert entry is not None
        progress = state.get(entry.remap_id)
        assert isinstance(progress, ProgressEntry)
        shards = {
            entry.remap_id: await self.io.ensure_shard(entry.remap_id, progress.schema),
            gid: await self.io.ensure_shard(gid, entry.schema),
        }
        ctl = self.driver.ctl
        ctl.create_collections(
            [
                (entry.remap_id, self._description(state, entry.remap_id, "progress")),
                (gid, self._description(state, gid, "source")),
            ],
            shards,
        )
        self.driver.apply()
        self.driver.set_storage_read_policy(
            [(g, self._effective_policy(state, g)) for g in (entry.remap_id, gid)]
        )

    def _install_sink(self, state: CatalogState, gid: GlobalId) -> None:
        """Create sink ``gid`` of catalog ``state``: its input held by ``prepare_export`` until
        ``create_exports`` chooses its as-of (the SinkAsOf rule) and the hold passes to it."""
        entry = state.sink(gid)
        assert entry is not None
        storage = self.driver.ctl.storage
        token = storage.prepare_export(gid, entry.from_id)
        desc = ExportDescription(
            entry.from_id,
            STORAGE_INSTANCE,
            Antichain([0]),  # at or before the held since: it becomes the since
            entry.connection,
            state.schema_of(entry.from_id),
        )
        try:
            storage.create_exports([(token, desc)])
        except BaseException:
            storage.cancel_prepare_export(token)
            self.driver.apply()
            raise
        self.driver.apply()

    async def _connect_storage_replica(self, state: CatalogState) -> None:
        """Run (if managed) and connect the storage instance's replica, once.

        A managed replica that fails to start is left to the orchestrator, which
        retries; the controller connects as soon as it listens.
        """
        if self._storage_connected or self.read_only:
            return
        entry = state.storage_replica
        if entry is None:
            return
        links = self.driver.storage_links
        if links.transport is None:
            # A managed storage replica gets a token of its own, unless one was given for all
            # or the orchestrator (one that outlives this environment) has its own: a replica
            # it still runs from an earlier open keeps that one.
            token = self._options.token
            if token is None and entry.managed:
                outer = getattr(self.orchestrator, "token", None)
                token = outer if isinstance(outer, str) else self.platform.new_id()
            self._storage_token = token
            from ..transport import STORAGE
            from ..transport.grpc_client import GrpcTransport

            links.transport = GrpcTransport(protocol=STORAGE, token=token, tls=self._options.tls)
            self._later.append(links.transport)
        if entry.managed:
            orchestrator = await self._storage_orchestrator()
            extra: tuple[str, ...] = ()
            if self._options.storage_tick_ms is not None:
                extra = ("--storage-tick-ms", str(self._options.storage_tick_ms))
            try:
                await orchestrator.ensure(
                    STORAGE_REPLICA,
                    services=("storage",),
                    token=self._storage_token,
                    extra_args=extra,
                )
            except ReplicaStartFailed as e:
                log.warning("the storage replica did not start (retrying): %s", e)
        self.driver.connect_storage_replica(STORAGE_INSTANCE, STORAGE_REPLICA)
        self._storage_connected = True

    async def _storage_orchestrator(self) -> Any:
        """The orchestrator that runs the managed storage replica (started now if there is none)."""
        if self.orchestrator is not None:
            return self.orchestrator
        from ..orchestrator import Orchestrator

        assert self._data_dir is not None  # checked before the replica was recorded managed
        options = self._options
        if self._opened_read_only and self._replicas_dir is None:  # not the writer's directory
            self._replicas_dir = self._data_dir / f"replicas-{self.platform.new_id()[:12]}"
        orchestrator = Orchestrator(
            self._data_dir,
            executor=options.executor,
            spark_master=options.spark_master,
            token=options.token,
            tls=options.replica_tls,
            extra_args=_memory_limit_args(options.replica_memory_limit),
            spark_conf=options.spark_conf,
            spark_ui=options.spark_ui,
            metrics_host=_metrics_host(options.replica_metrics),
            replicas_dir=self._replicas_dir,
        )
        await orchestrator.start(self.driver._task_group())
        self._later.append(orchestrator)
        self.orchestrator = orchestrator
        return orchestrator

    def _storage_address(self, name: str) -> str:
        """Where storage replica ``name`` listens (asked on every connection attempt)."""
        entry = self.state.storage_replica
        if entry is not None and not entry.managed and entry.address:
            return entry.address
        if self.orchestrator is None:
            raise LookupError(f"no address for storage replica {name!r}")
        return str(self.orchestrator.address(name))

    def storage_replica(self) -> ReplicaInfo | None:
        """The storage instance's replica and its connection (``None`` until one is needed)."""
        infos = self.driver.storage_replicas()
        return infos[0] if infos else None

    async def wait_storage_connected(self, *, timeout_s: float | None = None) -> None:
        """Wait until the storage instance's replica is connected [ReplicasNotConnected]."""
        await self.driver.wait_storage_connected(STORAGE_INSTANCE, timeout_s=timeout_s)

    def storage_status(self, ref: Ref | None = None) -> list[StorageStatus]:
        """Every source and sink (or only ``ref``): status, error, frontiers and statistics.

        The status is what the storage replica last reported (``None`` until it
        reports; see :class:`~tidegate.runtime.controller.storage_status.StorageStatus`).
        [UnknownCatalogObject] if ``ref`` is not a source or sink.
        """
        state = self.state
        wanted: GlobalId | None = None
        if ref is not None:
            wanted = self.resolve(ref)
            if state.source(wanted) is None and state.sink(wanted) is None:
                from ..errors import UnknownCatalogObject

                raise UnknownCatalogObject(f"{ref} is not a source or a sink")
        storage = self.driver.ctl.storage
        out: list[StorageStatus] = []
        for src in state.sources:
            if wanted is not None and src.id != wanted:
                continue
            fr = storage.storage_frontiers(src.id)
            since, upper = fr if fr is not None else (Antichain.empty(), Antichain.empty())
            out.append(
                _status_of(
                    storage,
                    src.id,
                    src.name,
                    "source",
                    src.connection,
                    since,
                    upper,
                    None,
                    src.remap_id,
                )
            )
        for sink in state.sinks:
            if wanted is not None and sink.id != wanted:
                continue
            try:
                view = storage.export(sink.id)
                since, upper = view.read_capability, view.upper
            except TidegateError:
                since, upper = Antichain.empty(), Antichain.empty()
            out.append(
                _status_of(
                    storage,
                    sink.id,
                    sink.name,
                    "sink",
                    sink.connection,
                    since,
                    upper,
                    sink.from_id,
                    None,
                )
            )
        return sorted(out, key=lambda x: x.id.sort_key)

    def _plan(self, plan: Frame | Plan | Ref) -> Plan:
        if isinstance(plan, Frame):
            return plan.plan
        if isinstance(plan, GlobalId | str):
            return self.table(plan).plan
        return plan

    def _select_as_of(
        self,
        state: CatalogState,
        df: DataflowDescription,
        current: int,
        output: tuple[Antichain, Antichain] | None = None,
    ) -> Antichain:
        """The as_of of a new dataflow: the spec's as-of selection over its inputs' frontiers.

        A new materialized view's empty output does not constrain it; imported
        indexes hold it at or after their sinces.
        """
        storage = {s.id: self.driver.storage_frontiers(s.id) for s in df.source_imports}
        if output is not None and output[1] != output[0]:
            for sid in df.persist_sink_ids:
                storage[sid] = output
        policies = {ie.id: p for ie in df.index_exports if (p := state.read_policy(ie.id))}
        df = df.with_source_uppers({g: f[1] for g, f in storage.items()})
        as_of = select_as_ofs([df], storage, policies, current).dataflows[0].as_of
        assert as_of is not None
        if as_of.is_empty() and not df.source_imports:
            as_of = Antichain([current])  # only index imports: start at the present
        for ii in df.index_imports:
            as_of = as_of.join(self.driver.frontiers(ii.id)[0])
        return as_of

    def _inputs_since(self, df: DataflowDescription) -> Antichain:
        """The earliest time every input of ``df`` is readable (the join of their sinces)."""
        since = Antichain([0])
        for s in df.source_imports:
            since = since.join(self.driver.storage_frontiers(s.id)[0])
        for ii in df.index_imports:
            since = since.join(self.driver.frontiers(ii.id)[0])
        return since

    def _dataflow(
        self, plan: Plan, export: GlobalId, as_of: Antichain | None
    ) -> DataflowDescription:
        state = self.state
        sources: list[SourceImport] = []
        imports: list[IndexImport] = []
        for gid in sorted(gets(plan)):
            entry = state.get(gid)
            if isinstance(entry, IndexEntry):
                imports.append(IndexImport(gid, gid, entry.keys))
            else:
                sources.append(SourceImport(gid))
        return DataflowDescription(
            f"subscribe {export}",
            source_imports=tuple(sources),
            index_imports=tuple(imports),
            objects_to_build=(BuildDesc(export, plan),),
            sink_exports=(SinkExport(export, export, SubscribeConnection()),),
            as_of=as_of,
        )

    async def subscribe(
        self,
        plan: Frame | Plan | Ref,
        as_of: int | None = None,
        *,
        buffer: int | None = None,
        replica: str | None = None,
    ) -> Subscription:
        """Stream the changes of ``plan`` from ``as_of`` (default: the freshest time, see :meth:`freshest`).

        Returns an async iterator of :class:`~tidegate.spec.compute.SubscribeBatchOut`
        (``lower``, ``upper``, ``updates`` as ``(time, row, diff)``); the first
        batch holds the snapshot at the as_of. Closing it drops the subscribe.
        ``replica`` runs it on that replica only (it ends with an error if the
        replica fails). It also ends with an error if an object it reads is
        dropped.
        """
        p = self._plan(plan)
        schema = typecheck(p)
        gid = self.driver.new_transient_id()
        if as_of is not None:
            df = self._dataflow(p, gid, Antichain([as_of]))
        else:  # the freshest time (see :meth:`freshest`), where the inputs are readable
            df = self._dataflow(p, gid, None)
            inputs = sorted(gets(p))
            if self._input_upper(*inputs).elements:
                t = await self._fresh_time(inputs, lambda: self._inputs_since(df), gid)
                df = df.with_as_of(Antichain([t]))
            else:
                df = df.with_as_of(self._select_as_of(self.state, df, self.oracle.read_ts()))
        sub = self.driver.subscribe(df, buffer=buffer, target_replica=replica)
        sub.schema = schema  # its batches have to_arrow() and to_pandas()
        return sub

    async def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """Run SQL; the last statement's :class:`~tidegate.runtime.sql.SqlResult` (see
        :mod:`tidegate.runtime.sql`; ``params`` fill ``$1``, ``$2``, ...)."""
        from ..sql import execute

        return await execute(self, sql, params)

    async def subscribe_sql(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """``SUBSCRIBE ...`` (or a query) as a :class:`Subscription` of batches."""
        from ..sql import subscribe_sql

        return await subscribe_sql(self, sql, params)

    async def copy_to(self, ref: Ref, url: str, *, at: int | None = None) -> int:
        """Write the contents of ``ref`` at time ``at`` once, as Parquet files under ``url``.

        ``url`` is a blob URL (``file:///dir`` or ``s3://bucket/prefix?...``);
        the files are ``part-<id>-<at>-<n>.parquet`` under it (see
        docs/environment.md). ``at`` defaults to :meth:`freshest`; like a peek's
        time it must be readable [SinceViolation, ReadBeyondUpper]. Returns the
        number of rows written (a row with count ``k`` is written ``k``
        times). A replica's failure to write (an unwritable URL, an error in
        the collection) raises :class:`CopyToFailed` with its message, as does
        a URL of another scheme (before anything runs). Every replica runs
        the copy-to; the first answer is the result.
        """
        from urllib.parse import urlsplit

        from tidegate.spec.protocol.types import CopyToConnection

        from ..controller.errors import CopyToFailed

        if urlsplit(url).scheme not in ("file", "s3", "mem"):
            raise CopyToFailed(ref, url, "unsupported URL scheme (use file:// or s3://)")
        gid = self.resolve(ref)
        at = await self._read_time(gid, at)
        cid = self.driver.new_transient_id()
        df = self._dataflow(self._plan(gid), cid, Antichain([at]))
        sink = SinkExport(cid, cid, CopyToConnection(url), up_to=Antichain([at + 1]))
        df = dataclasses.replace(df, debug_name=f"copy-to {cid}", sink_exports=(sink,))
        return await self.driver.copy_to(df)

    async def drop(
        self, ref: Ref, *, cascade: bool = False, dropped: dict[GlobalId, Any] | None = None
    ) -> list[GlobalId]:
        """Drop object ``ref`` (with ``cascade``, its dependents too); returns the dropped ids.

        A source goes with its progress collection; a sink stops writing (what
        it committed stays in its target). An index or materialized view on a
        source, or a sink of it, is a dependent.

        ``dropped``, if given, receives each dropped object's catalog entry as it was when the
        drop applied (a cascade may take objects created while the call waited its turn).
        """
        async with self._ddl:
            gid = self.resolve(ref)
            before = {
                e.id: e for e in (*self.state.entries(), *self.state.views, *self.state.sinks)
            }
            after = await self._apply([Drop(gid, cascade)])
            left = {e.id for e in (*after.entries(), *after.views, *after.sinks)}
            gone = sorted(set(before) - left, reverse=True)
            if dropped is not None:
                dropped.update((g, before[g]) for g in gone)
            self._uninstall(before, gone)
            self._drop_replication_slots(before[g] for g in gone)
            return gone

    def _uninstall(self, before: Mapping[GlobalId, Any], gone: Sequence[GlobalId]) -> None:
        """Drop the objects ``gone`` (entries in ``before``, dependents first) from the controller."""
        ctl, driver = self.driver.ctl, self.driver
        driver.end_reads_of(gone)
        for g in gone:
            entry = before[g]
            if isinstance(entry, IndexEntry | MaterializedViewEntry):
                driver.drop_collections([g])
            if isinstance(entry, SinkEntry):
                ctl.storage.drop_sinks([g])
                driver.apply()
            elif isinstance(entry, STORAGE_ENTRIES):
                ctl.drop_sources([g])
                driver.apply()

    def _drop_replication_slots(self, dropped: Iterable[Any]) -> None:
        """Start dropping the slots of the PostgreSQL sources among ``dropped`` (catalog entries
        this environment dropped; one following another's DDL leaves them to the writer)."""
        for entry in dropped:
            if isinstance(entry, SourceEntry) and isinstance(entry.connection, PostgresSource):
                done = anyio.Event()
                self._slot_drops.add(done)
                self.driver.start_soon(self._drop_replication_slot, entry, done)

    async def _drop_replication_slot(self, entry: SourceEntry, done: anyio.Event) -> None:
        """A dropped PostgreSQL source's slot goes too, as in Materialize: the upstream keeps
        WAL for a slot until it is dropped. In the background, once the storage replica
        has stopped reading from it (closing the environment waits for it a while); a slot
        that cannot be dropped (the server is unreachable, say) is logged with what to run
        by hand."""
        name, connection = entry.name, entry.connection
        assert isinstance(connection, PostgresSource)
        try:
            await self.platform.run_blocking(_drop_postgres_slot, connection)
        except Exception as e:
            log.warning(
                "source %s was dropped but its replication slot %s was not (%s); it holds "
                "WAL upstream until dropped: SELECT pg_drop_replication_slot('%s') on %s",
                name,
                connection.slot,
                e,
                connection.slot,
                connection_text(connection),
            )
        else:
            log.info("source %s: replication slot %s dropped", name, connection.slot)
        finally:
            self._slot_drops.discard(done)
            done.set()

    async def _finish_slot_drops(self) -> None:
        """On close: wait up to :data:`_SLOT_DROP_WAIT_S` for dropped sources' slots to go."""
        with anyio.move_on_after(_SLOT_DROP_WAIT_S):
            for done in list(self._slot_drops):
                await done.wait()

    async def set_read_policy(self, ref: Ref, policy: ReadPolicy) -> None:
        """How far object ``ref`` may be compacted (its shard too, for tables and views)."""
        async with self._ddl:
            gid = self.resolve(ref)
            entry = self.state.get(gid)
            if isinstance(entry, IndexEntry):
                self.driver.ctl.compute.instance(INSTANCE).collection(gid)  # validates first
            await self._apply([SetReadPolicy(gid, policy)])
            if isinstance(entry, IndexEntry):
                self.driver.set_read_policy([(gid, policy)])
            else:
                self.driver.set_storage_read_policy([(gid, policy)])

    # -- data ------------------------------------------------------------------------------
    async def append(self, table: Ref, rows: Iterable[Any]) -> int:
        """Append rows (tuples, or ``(row, diff)`` pairs) to ``table``; the write timestamp, once durable."""
        return await self.append_many([(table, rows)])

    async def append_many(self, batches: Iterable[tuple[Ref, Iterable[Any]]]) -> int:
        """Append several batches (to one or more tables; a table may repeat) at one timestamp.

        Every batch is checked first (names, schemas); then all of them are
        written at one write timestamp, which is returned once durable. Nothing
        is written if a batch is refused. The batches land together, with one
        exception: if the controller process dies while the commit is writing,
        each table's share lands whole or not at all, independently of the
        other tables' (one compare-and-append per table; see docs/environment.md).
        """
        checked: list[tuple[GlobalId, list[tuple[Row, int]]]] = []
        for ref, rows in batches:
            entry = self._table_entry(ref)
            checked.append((entry.id, _updates(entry.schema, rows, entry.name)))
        if not checked:
            raise TypeMismatch("append_many needs at least one batch")
        return (await self.driver.append_many(checked))[0]

    def _table_entry(self, ref: Ref) -> TableEntry:
        """The table ``ref`` names [UnknownCatalogObject, IdentifierInvalid]; cached per
        catalog state (an immutable value: any change replaces it), as every append asks."""
        state = self.state
        cache = self._tables_cache
        if cache[0] is not state:
            cache = self._tables_cache = (state, {})
        entry = cache[1].get(ref) if isinstance(ref, str | GlobalId) else None
        if entry is not None:
            return entry
        gid = self.resolve(ref)
        found = state.get(gid)
        if not isinstance(found, TableEntry):
            from tidegate.spec.errors import IdentifierInvalid

            raise IdentifierInvalid(gid, f"{found.name} is not a table")
        if isinstance(ref, str | GlobalId):
            cache[1][ref] = found
        return found

    async def peek(
        self,
        ref: Ref,
        at: int | None = None,
        key: Row | None = None,
        finishing: RowSetFinishing | Sequence[ColumnOrder] | None = None,
        *,
        limit: int | None = None,
        replica: str | None = None,
    ) -> PeekAnswer:
        """The contents of ``ref`` at time ``at`` as ``(row, count)`` pairs (a
        :class:`~tidegate.runtime.frames.PeekAnswer`: a list with ``to_arrow()``/``to_pandas()``).

        ``at`` defaults to :meth:`freshest` (every acknowledged append shows). It
        must not be before ``ref``'s since [SinceViolation] nor at or beyond
        the upper of its durable inputs (tables, views) [ReadBeyondUpper]; a
        time the inputs have completed is answered once the index catches up.
        ``key`` looks up one key of an index; ``finishing``
        (or a list of column orders, plus ``limit``) orders and limits;
        ``replica`` asks that replica only (a :class:`PeekFailed` if it fails
        meanwhile) [ReplicaMissing]. Dropping ``ref`` while the peek waits
        fails it with :class:`DependencyDropped`, a :class:`PeekFailed`.
        """
        gid = self.resolve(ref)
        entry = self.state.get(gid)
        target: Literal["index", "persist"] = (
            "index" if isinstance(entry, IndexEntry) else "persist"
        )
        if finishing is None and limit is not None:
            finishing = RowSetFinishing(limit=limit)
        elif finishing is not None and not isinstance(finishing, RowSetFinishing):
            finishing = RowSetFinishing(order_by=tuple(finishing), limit=limit)
        constraints = None
        if key is not None:
            if not isinstance(entry, IndexEntry):
                raise RuntimeControllerError(f"key lookups need an index; {entry.name} is not one")
            constraints = (self._check_key(entry, key),)
        at = await self._read_time(gid, at)
        pairs = await self.driver.peek(
            gid,
            at,
            finishing=finishing,
            target=target,
            literal_constraints=constraints,
            target_replica=replica,
        )
        return PeekAnswer(pairs, _project(self.schema(gid), finishing))

    async def _read_time(self, gid: GlobalId, at: int | None) -> int:
        """``at``, or :meth:`freshest` by default; a time at or past the inputs' upper is
        refused [ReadBeyondUpper]."""
        if at is None:
            return await self.freshest(gid)
        upper = self._input_upper(gid)
        if upper.less_equal(at):
            raise ReadBeyondUpper(gid, at, upper)
        return at

    def _check_key(self, entry: IndexEntry, key: Any) -> Row:
        """``key`` as a row of the index's key columns [ArityMismatch, TypeMismatch].

        A NULL is allowed in any key column (it matches nothing, as in SQL).
        """
        columns = self.state.schema_of(entry.id).columns
        key_schema = Schema(
            tuple(
                dataclasses.replace(c, type=dataclasses.replace(c.type, nullable=True))
                for c in (columns[k] for k in entry.keys)
            )
        )
        if type(key) is not tuple:
            raise TypeMismatch(
                f"a key of index {entry.name} is a tuple of its key columns {key_schema}, got {key!r}"
            )
        check_row(key, key_schema, f"key of index {entry.name}")
        return key

    async def freshest(self, ref: Ref) -> int:
        """The time a read of ``ref`` that starts now takes: every acknowledged append shows there.

        It is the oracle's read timestamp, which covers every acknowledged
        append (strict serializability, Materialize's default), or ``ref``'s
        since if that is later -- then the oracle moves up to it, so that later
        appends come after this read. It waits until ``ref``'s durable inputs
        are complete there (asking for an empty commit when they are not); an
        index that lags its inputs answers a peek there once it has caught up.
        A source is complete at a time once its storage replica has ingested up
        to it (every tick of the replica, 100 ms by default): a read of a source
        at the freshest time waits for that, and for as long as the storage
        replica is down.
        """
        gid = self.resolve(ref)
        if not self._input_upper(gid).elements:  # no durable inputs: the object's own upper
            return int(await self.driver.freshest(gid, "index"))
        return await self._fresh_time([gid], lambda: self.frontiers(gid)[0], gid)

    async def _fresh_time(
        self, inputs: Sequence[GlobalId], since: Callable[[], Antichain], what: GlobalId
    ) -> int:
        """The freshest read time over ``inputs`` (see :meth:`freshest`), at or after ``since()``."""
        while True:
            lower = since()
            if not lower.elements:
                raise CollectionMissing(what)
            if self.read_only:  # the writer moves the tables: learn where they are now
                await self.driver.poll_uppers()
            read = self.oracle.read_ts()
            t = max(int(lower.elements[0]), read)
            if t > read:
                await self.io.retrying("oracle apply", self.oracle.apply_write, t)
            if self._input_upper(*inputs).less_equal(t):
                self.driver.request_commit()  # every table then moves past t
                await self.driver.wait_frontiers(
                    lambda t=t: not self._input_upper(*inputs).less_equal(t)  # type: ignore[misc]
                )
            if since().less_equal(t):  # not compacted past t while waiting
                return t

    def _input_upper(self, *gids: GlobalId) -> Antichain:
        """The upper of the tables and sources ``gids`` read (through views and indexes): where
        appends and ingested data land.

        Views are looked through: a view's shard lags the tables it is computed
        from, and a time chosen from its upper could miss an acknowledged append.
        A source's upper is where its storage replica has ingested to: a read at
        a later time waits for it (as Materialize's strict-serializable reads do).
        """
        state, seen, stack = self.state, set(), list(gids)
        uppers: list[Antichain] = []
        while stack:
            g = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            if state.view(g) is None and isinstance(state.get(g), _DURABLE_INPUTS):
                uppers.append(self.driver.storage_frontiers(g)[1])
            else:
                stack.extend(state.dependencies(g))
        return Antichain.meet_all(uppers) if uppers else Antichain.empty()

    def frontiers(self, ref: Ref) -> tuple[Antichain, Antichain]:
        """``(since, upper)`` of object ``ref`` (of a sink: the time it holds its input at, and
        the frontier its target covers)."""
        gid = self.resolve(ref)
        if self.state.sink(gid) is not None:  # what it holds its input at, and what it covers
            export = self.driver.ctl.storage.export(gid)
            return export.read_capability, export.upper
        if isinstance(self.state.get(gid), IndexEntry):
            return self.driver.frontiers(gid)
        return self.driver.storage_frontiers(gid)

    def replicas(self) -> list[ReplicaInfo]:
        """Every replica with its status and connection."""
        return self.driver.replicas()

    def hydrated(self, ref: Ref | None = None, *, replicas: Iterable[str] | None = None) -> bool:
        """Whether ``ref`` (or, without it, every index and view) is hydrated.

        An object is hydrated once some replica (of ``replicas``, by default
        any) has computed it up to its as_of. [HydrationCheckBadTarget] if
        none of ``replicas`` exists.
        """
        ctl = self.driver.ctl
        if ref is None:
            return ctl.compute.collections_hydrated_on_replicas(INSTANCE, replicas, ())
        gid = self.resolve(ref)
        if not isinstance(self.state.get(gid), IndexEntry | MaterializedViewEntry):
            return True  # tables are always readable
        if replicas is None:
            return ctl.collection_hydrated(INSTANCE, gid)
        others = [c.id for c in ctl.instance(INSTANCE).collections() if c.id != gid]
        return ctl.compute.collections_hydrated_on_replicas(INSTANCE, replicas, others)

    def hydration(self, ref: Ref | None = None) -> list[HydrationInfo]:
        """Per index and materialized view (or only ``ref``) and replica: whether it is hydrated
        and how long hydration took in seconds (from the dataflow's creation on the replica to
        its frontier first passing the as_of; a reconnect's rehydration starts the clock again).
        See :mod:`tidegate.runtime.hydration`."""
        return catalog_hydration(self, None if ref is None else self.resolve(ref))

    async def add_replica(
        self,
        name: str,
        address: str | None = None,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
    ) -> None:
        """Add replica ``name`` while running (Materialize's ``CREATE CLUSTER REPLICA``).

        With ``address`` the controller connects to a replica listening there;
        without, the orchestrator starts a managed one (``executor`` and
        ``spark_master`` default to the environment's). It is recorded in the
        catalog first (a reopened environment runs it too), then hydrated with
        everything the instance runs. [DuplicateCatalogName] if it exists;
        [ReplicaStartFailed] if its process does not start (the record is then
        withdrawn: nothing changed).
        """
        async with self._ddl:
            managed = address is None
            if managed and self.orchestrator is None:
                raise RuntimeControllerError(
                    f"replica {name!r} needs an address: this environment manages no replicas"
                )
            if managed:
                from ..orchestrator import check_replica_name

                check_replica_name(name)  # before anything is recorded
            op = CreateReplica(
                name,
                managed,
                address,
                spark_master or (self._options.spark_master if managed else None),
                executor or self._options.executor,
            )
            state = await self._apply([op])
            entry = state.replica(name)
            if managed:
                try:
                    await _start_all(self.orchestrator, [entry])
                except Exception:
                    with anyio.CancelScope(shield=True):
                        with contextlib.suppress(TidegateError):  # it never ran
                            await self.orchestrator.stop(name)  # no retrying behind the error
                        await self._apply([DropReplica(name)])
                    raise
            elif address is not None:
                self._addresses[name] = address
            self.driver.ctl.add_replica(INSTANCE, name)
            self.driver.apply()

    async def drop_replica(self, name: str) -> None:
        """Drop replica ``name`` (Materialize's ``DROP CLUSTER REPLICA``); a managed one is stopped.

        [UnknownCatalogObject] if there is no such replica.
        """
        async with self._ddl:
            entry = self.state.replica(name)
            await self._apply([DropReplica(name)])
            self.driver.ctl.drop_replica(INSTANCE, name)
            self.driver.apply()
            self._addresses.pop(name, None)
            if entry.managed and self.orchestrator is not None:
                await self.orchestrator.stop(name)

    def events(self, buffer: int | None = None) -> EventStream[Any]:
        """Replica status events from now on, as an async iterator."""
        return self.driver.events(buffer)

    async def wait_for(self, ref: Ref, time: int, *, timeout_s: float | None = None) -> None:
        """Wait until object ``ref`` is complete beyond ``time`` (its upper passed it)."""
        gid = self.resolve(ref)
        await self.driver.wait_frontiers(
            lambda: not self.frontiers(gid)[1].less_equal(time), timeout_s=timeout_s
        )


class _Opening:
    """What :meth:`Environment.open` returns: awaitable, or an async context manager."""

    def __init__(
        self, cls: type[Environment], data_dir: str | Path | None, options: EnvironmentOptions
    ) -> None:
        self._cls = cls
        self._data_dir = data_dir
        self._options = options
        self._env: Environment | None = None

    async def _enter(self) -> Environment:
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            env = await self._cls._open(stack, self._data_dir, self._options)
        except BaseException:
            await stack.__aexit__(*sys.exc_info())
            raise
        env._stack = stack
        return env

    def __await__(self) -> Generator[Any, None, Environment]:
        return self._enter().__await__()

    async def __aenter__(self) -> Environment:
        self._env = await self._enter()
        return self._env

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        env, self._env = self._env, None
        if env is not None:
            await env.__aexit__(exc_type, exc, tb)


def replica_ops(
    state: CatalogState,
    replicas: Replicas | None,
    *,
    executor: str = "spark",
    spark_master: str = "local[1]",
) -> list[CatalogOp]:
    """The catalog ops that make ``state``'s replicas those ``replicas`` asks for.

    ``None`` keeps the recorded replicas (creating managed ``r1`` if there are
    none); otherwise unknown names are created, known ones altered to the given
    spec (a no-op when equal) and the others dropped. Managed replicas without
    their own ``executor``/``spark_master`` take the given defaults.
    """
    if replicas is None:
        if state.replicas:
            return []
        specs = [ReplicaSpec("r1")]
    else:
        specs = _replica_specs(replicas)
    known = {r.name for r in state.replicas}
    wanted = {s.name for s in specs}
    ops: list[CatalogOp] = []
    for s in specs:
        managed = s.address is None
        master = s.spark_master or (spark_master if managed else None)
        op = AlterReplica if s.name in known else CreateReplica
        ops.append(op(s.name, managed, s.address, master, s.executor or executor))
    ops.extend(DropReplica(r.name) for r in state.replicas if r.name not in wanted)
    return ops


def storage_replica_ops(state: CatalogState, address: str | None) -> list[CatalogOp]:
    """The catalog op that records the ``storage_replica`` option: an unmanaged storage replica
    at ``address`` (``None``: keep what is recorded)."""
    if address is None:
        return []
    wanted = SetStorageReplica(managed=False, address=address)
    recorded = state.storage_replica
    if recorded is not None and not recorded.managed and recorded.address == address:
        return []
    return [wanted]


_DURABLE_INPUTS = (TableEntry, SourceEntry, ProgressEntry, SystemCollectionEntry)
"""Collections written outside compute: a read at a time waits for their uppers to pass it."""


def _storage_wanted(state: CatalogState) -> bool:
    """Whether the storage instance's replica should run: one was given (an address), or a
    managed one has sources or sinks to run."""
    entry = state.storage_replica
    return entry is not None and (not entry.managed or state.has_storage_objects)


def _postgres_schema(connection: PostgresSource) -> Schema:
    """Blocking: the upstream table's schema, checked for replication (the reader's typed errors)."""
    from ..sources.postgres import PostgresReader

    with PostgresReader(connection) as reader:
        return reader.schema()


def _drop_postgres_slot(connection: PostgresSource) -> None:
    """Blocking: drop ``connection``'s replication slot, waiting while a reader still holds it."""
    from ..sources.postgres import PostgresReader

    # It waits no longer than closing does: a close past the wait cancels the drop, and the
    # cancellation itself waits for this call (a worker thread) to return.
    with PostgresReader(connection, slot_busy_timeout_s=_SLOT_DROP_WAIT_S) as reader:
        reader.drop_slot()


def _check_sink_connection(connection: object, schema: Schema, gid: GlobalId) -> None:
    """Refuse a sink connection that cannot work whatever the target holds (no IO)."""
    if isinstance(connection, IcebergSink):
        from ..sinks.iceberg import IcebergSinkWriter

        IcebergSinkWriter(connection, schema, sink_id=str(gid))  # SinkDescriptionInvalid
    elif not isinstance(connection, SimulatedSink):
        raise InvalidCatalogOp(f"not a sink connection (IcebergSink): {connection!r}")


def _status_of(
    storage: StorageController,
    id: GlobalId,
    name: str,
    kind: Literal["source", "sink"],
    connection: SourceConnection | StorageSinkConnection,
    since: Antichain,
    upper: Antichain,
    reads: GlobalId | None,
    progress: GlobalId | None,
) -> StorageStatus:
    from ..controller.storage_status import connection_details

    status = storage.status(id)
    stats = storage.statistics(id)
    return StorageStatus(
        id,
        name,
        kind,
        connection_type(connection),
        connection_text(connection),
        None if status is None else status.status.value,
        None if status is None else status.error,
        None if status is None else status.hint,
        since,
        upper,
        None if stats is None else dataclasses.asdict(stats),
        reads,
        progress,
        connection_details(connection),
    )


async def _close_all(started: list[Any]) -> None:
    """Close what was started after opening (orchestrators, transports), newest first."""
    for thing in reversed(started):
        await thing.aclose()


async def _start_all(orchestrator: Any, replicas: Sequence[ReplicaEntry]) -> None:
    """Start managed ``replicas`` concurrently; the first failure (by name) is raised, typed.

    Every start is awaited to its end (a failing one does not cancel the
    others); a failure's :class:`ReplicaStartFailed` is raised as it is, with
    the other failures noted on it.
    """
    failures: dict[str, BaseException] = {}

    async def start(r: ReplicaEntry) -> None:
        try:
            await orchestrator.ensure(r.name, executor=r.executor, spark_master=r.spark_master)
        except Exception as e:
            failures[r.name] = e

    async with anyio.create_task_group() as tg:
        for r in replicas:
            tg.start_soon(start, r)
    if failures:
        first, *rest = sorted(failures)
        error = failures[first]
        for name in rest:
            error.add_note(f"replica {name!r} failed too: {failures[name]}")
        raise error


def _memory_limit_args(limit: int | None) -> tuple[str, ...]:
    """A managed replica's arguments for ``replica_memory_limit``."""
    return () if limit is None else ("--memory-limit", str(limit))


def _metrics_host(replica_metrics: bool) -> str | None:
    """The orchestrator's ``metrics_host`` for ``replica_metrics``: loopback, like replicas."""
    return "127.0.0.1" if replica_metrics else None


def _project(schema: Schema, finishing: RowSetFinishing | None) -> Schema:
    """The schema of a peek's rows: ``schema``, projected by ``finishing`` if it projects."""
    if finishing is None or finishing.project is None:
        return schema
    return Schema(tuple(schema.columns[i] for i in finishing.project))


def _defined(gid: GlobalId, definition: str | None) -> list[CatalogOp]:
    """The op recording ``definition`` as object ``gid``'s SQL text, if there is one."""
    return [] if definition is None else [SetDefinition(gid, definition)]


def _parse_id(text: str) -> GlobalId | None:
    try:
        return GlobalId.parse(text)
    except Exception:
        return None
