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

**Inside.** :class:`Environment` is a façade: each public method is short and
hands the call to the part that owns its concern. The parts share one
:class:`~._core.Core` (driver, catalog, shard store and its IO, oracle,
platform, options, orchestrator, the DDL lock) and take it, never the
``Environment``; each module's docstring states its part's contract:

* ``_opening`` -- opening (store, catalog, oracle, replicas, driver) and
  restoring everything in the catalog;
* ``_ddl`` -- tables, indexes, materialized views, views, drops, read
  policies: recorded in the catalog, then installed in the controller;
* ``_sources`` -- sources and sinks, and the storage instance's replica;
* ``_data`` -- appends, peeks, subscribes, copy-to, and the times they read at;
* ``_replicas`` -- adding and dropping replicas, their status, hydration;
* ``_promotion`` -- read-only environments following the writer, and promotion;
* ``_transaction`` -- DDL transactions: changes staged, made durable as one, installed.

SQL (:meth:`Environment.execute`) runs on the façade's public methods
(:mod:`tidegate.runtime.sql`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack

from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema
from tidegate.spec.plan.builder import Frame
from tidegate.spec.protocol.types import ColumnOrder, RowSetFinishing
from tidegate.spec.storage import SourceConnection, StorageSinkConnection

from ..catalog import DEFAULT_CLUSTER, DEFAULT_READ_POLICY, Catalog, CatalogState
from ..controller.driver import ControllerDriver, ReplicaInfo
from ..controller.storage_io import ShardStorageIO
from ..controller.storage_status import StorageStatus
from ..controller.streams import EventStream, Subscription
from ..controller.timestamps import Oracle
from ..frames import PeekAnswer
from ..hydration import HydrationInfo
from ..options import EnvironmentOptions, EnvironmentOverrides, Replicas, ReplicaSpec
from ..platform import REAL, Platform
from ..sizes import ReplicaSize
from ..storage.store import ShardStore
from ._clusters import ClusterReplicaStatus, Clusters, ClusterStatus
from ._core import INSTANCE as INSTANCE  # the compute instance: the simulator's checkers read it
from ._core import STORAGE_INSTANCE, SYSTEM_COLLECTIONS, Core, Ref
from ._data import FreshRead, ReadsAndWrites
from ._ddl import Ddl
from ._opening import Opening, open_parts
from ._promotion import Promotion
from ._replicas import ReplicasAndHydration, replica_ops, storage_replica_ops
from ._sources import SlotDrop, SourcesAndSinks
from ._transaction import DdlTransaction

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_READ_POLICY",
    "STORAGE_INSTANCE",
    "SYSTEM_COLLECTIONS",
    "ClusterReplicaStatus",
    "ClusterStatus",
    "Environment",
    "FreshRead",
    "ReplicaSize",
    "ReplicaSpec",
    "Replicas",
    "SlotDrop",
    "StorageStatus",
    "replica_ops",
    "storage_replica_ops",
]


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
        core = Core(driver, catalog, store, io, oracle, orchestrator, platform)
        self._core = core
        self.driver = driver
        self.store = store
        self.io = io
        self.platform = platform
        self.hydration_tracker = core.hydration_tracker
        """Times each collection's hydration on each replica (see :meth:`hydration`)."""
        self._stack: contextlib.AsyncExitStack | None = None
        self._sources = SourcesAndSinks(core)
        self._ddl = Ddl(core, self._sources)
        self._data = ReadsAndWrites(core, self._ddl)
        self._replicas = ReplicasAndHydration(core)
        self._clusters = Clusters(core, self._replicas, self._ddl)
        self._promotion = Promotion(core, self._ddl, self._sources, self._replicas)
        self._transaction = DdlTransaction(core, self._sources, self._promotion)
        self._opening = Opening(core, self._ddl, self._sources, self._promotion, self._replicas)

    @property
    def catalog(self) -> Catalog:
        """The durable :class:`~tidegate.runtime.catalog.Catalog` (a read-only environment's
        follows the writer's, and is replaced as it does)."""
        return self._core.catalog

    @property
    def oracle(self) -> Oracle:
        """The timestamp oracle (a read-only environment's follows the tables' uppers until it
        is promoted and opens the durable one)."""
        return self._core.oracle

    @property
    def orchestrator(self) -> Any:
        """The :class:`~tidegate.runtime.orchestrator.Orchestrator` of managed replicas, if any."""
        return self._core.orchestrator

    @property
    def read_only(self) -> bool:
        """Opened with ``read_only=True`` and not yet promoted (:meth:`promote`)."""
        return self._core.read_only

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
        parts = await open_parts(stack, data_dir, options)
        env = cls(
            parts.driver,
            parts.catalog,
            parts.store,
            parts.io,
            parts.oracle,
            parts.orchestrator,
            parts.platform,
        )
        await env._opening.start(stack, parts)
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
        self,
        replicas: Iterable[str] | None = None,
        *,
        cluster: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Wait until ``replicas`` (their ids; default: every replica of ``cluster``, or of every
        cluster) are connected [ReplicasNotConnected on timeout].

        :meth:`open` returns once managed replica processes run, before the
        controller has connected to them; this waits for the connections. A
        replica's id is its name in the ``default`` cluster, ``cluster.name``
        in the others.
        """
        await self._replicas.wait_connected(replicas, cluster=cluster, timeout_s=timeout_s)

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
        await self._promotion.promote()

    def read_policy(self, ref: Ref) -> ReadPolicy:
        """The read policy of object ``ref``: the one set, else :data:`DEFAULT_READ_POLICY`."""
        return self._ddl.read_policy(ref)

    @property
    def state(self) -> CatalogState:
        """The catalog as this environment last wrote or read it."""
        return self._core.state

    def resolve(self, ref: Ref) -> GlobalId:
        """The id of the object ``ref`` (a name, an id, or an id's text) [UnknownCatalogObject].

        Views and sinks resolve too; what needs a collection (peeks, appends, read
        policies) then refuses their ids with :class:`UnknownCatalogObject`.
        """
        return self._core.resolve(ref)

    def schema(self, ref: Ref) -> Schema:
        """The row schema of object ``ref``."""
        return self._core.schema(ref)

    def table(self, name: Ref) -> Frame:
        """A :class:`tidegate.dsl.Frame` reading table (or materialized view, index or view) ``name``.

        A view's frame is its plan: a view is read by inlining it, as Materialize does.
        """
        return self._core.table(name)

    async def create_table(
        self, name: str, schema: Schema, *, definition: str | None = None
    ) -> GlobalId:
        """Create table ``name`` with ``schema``; returns its id.

        ``definition`` (on every ``create_*``): the SQL text that created it, which
        the catalog keeps for ``SHOW CREATE``.
        """
        return await self._ddl.create_table(name, schema, definition=definition)

    async def create_index(
        self,
        plan: Frame | Plan | Ref,
        keys: Sequence[str | int] = (),
        *,
        name: str | None = None,
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId:
        """Maintain ``plan`` in an index arranged by ``keys`` (names or positions); returns its id.

        Given a name (or id) rather than a plan, the index is *on* that object (a
        dependency: dropping it needs ``cascade``); a view's index maintains its plan.
        ``cluster`` maintains it (Materialize's ``IN CLUSTER``): it is readable there
        only, and a plan reading an index of another cluster is refused [InvalidCatalogOp].
        """
        return await self._ddl.create_index(
            plan, keys, name=name, definition=definition, cluster=cluster
        )

    async def create_materialized_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId:
        """Maintain ``plan`` into durable storage collection ``name``; returns its id.

        ``views``: the views the query was written against (their plans inlined in ``plan``),
        as for :meth:`create_view`: they cannot be dropped while it reads them. ``cluster``
        computes it; its output is readable from any cluster (through storage).
        """
        return await self._ddl.create_materialized_view(
            name, plan, views=views, definition=definition, cluster=cluster
        )

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
        return await self._ddl.create_view(name, plan, views=views, definition=definition)

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
        return await self._sources.create_source(
            name, connection, schema=schema, definition=definition
        )

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
        return await self._sources.create_sink(name, from_ref, connection, definition=definition)

    async def alter_sink(self, ref: Ref, from_ref: Ref, *, definition: str | None = None) -> None:
        """Sink ``ref`` writes out ``from_ref`` from now on (Materialize's ``ALTER SINK ... SET
        FROM``), exactly once: it resumes from what its target covers, reading the new input
        there. The new input must have the sink's schema [InvalidCatalogOp] and be readable
        where the sink resumes [ReadBeforeSince]; a sink that has not committed yet cannot be
        altered (as in Materialize). Nothing changes on error."""
        await self._sources.alter_sink(ref, from_ref, definition=definition)

    def slots_to_drop(self) -> list[SlotDrop]:
        """Replication slots of dropped PostgreSQL sources not yet dropped upstream, with why.

        Dropping a PostgreSQL source records its slot in the catalog with the drop;
        the environment then drops the slot upstream (retrying for a minute) and
        forgets it. A slot listed here is being dropped, or could not be (``error``):
        the next open of the environment tries again.
        """
        return self._sources.slots_to_drop()

    async def create_secret(
        self, name: str, value: str, *, definition: str | None = None
    ) -> GlobalId:
        """Create secret ``name`` holding ``value`` (Materialize's ``CREATE SECRET``); its id.

        A connection names it for its password (``PostgresSource(...,
        password_secret=name)``, ``PASSWORD SECRET name`` in SQL). Its value is
        kept apart from the catalog, in ``DATA_DIR/secrets`` (owner-only files),
        and never shown. [DuplicateCatalogName; SecretsUnavailable without a data
        directory]. ``drop(name)`` drops it (``cascade``: with the sources and
        sinks that use it).
        """
        return await self._ddl.create_secret(name, value, definition=definition)

    async def alter_secret(self, name: str, value: str) -> None:
        """Give secret ``name`` a new value (``ALTER SECRET``) [UnknownCatalogObject].

        Sources and sinks that use it read the new value when they next connect
        from a newly opened environment.
        """
        await self._ddl.alter_secret(name, value)

    def storage_replica(self) -> ReplicaInfo | None:
        """The storage instance's replica and its connection (``None`` until one is needed)."""
        return self._sources.storage_replica()

    async def wait_storage_connected(self, *, timeout_s: float | None = None) -> None:
        """Wait until the storage instance's replica is connected [ReplicasNotConnected]."""
        await self._sources.wait_storage_connected(timeout_s=timeout_s)

    def storage_status(self, ref: Ref | None = None) -> list[StorageStatus]:
        """Every source and sink (or only ``ref``): status, error, frontiers and statistics.

        The status is what the storage replica last reported (``None`` until it
        reports; see :class:`~tidegate.runtime.controller.storage_status.StorageStatus`).
        [UnknownCatalogObject] if ``ref`` is not a source or sink.
        """
        return self._sources.storage_status(ref)

    async def subscribe(
        self,
        plan: Frame | Plan | Ref,
        as_of: int | None = None,
        *,
        buffer: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
        up_to: int | None = None,
        snapshot: bool = True,
    ) -> Subscription:
        """Stream the changes of ``plan`` from ``as_of`` (default: the freshest time, see :meth:`freshest`).

        Returns an async iterator of :class:`~tidegate.spec.compute.SubscribeBatchOut`
        (``lower``, ``upper``, ``updates`` as ``(time, row, diff)``); the first
        batch holds the snapshot at the as_of. Closing it drops the subscribe.
        ``cluster`` computes it (default: the cluster of the indexes it reads,
        else ``default``; an index of another cluster is refused [WrongCluster]);
        ``replica`` (a replica name of that cluster) runs it there only (it ends
        with an error if the replica fails). It also ends with an error if an
        object it reads is dropped. ``snapshot=False`` (Materialize's ``WITH (SNAPSHOT =
        false)``) leaves out the contents at the as_of: only changes after it come.
        ``up_to`` (``UP TO``) leaves out every change at or after it, and the subscribe ends
        (a last batch with an empty upper) once its frontier reaches it; an ``up_to`` before
        the as_of is refused [AbsurdSubscribeBounds].
        """
        return await self._data.subscribe(
            plan,
            as_of,
            buffer=buffer,
            replica=replica,
            cluster=cluster,
            up_to=up_to,
            snapshot=snapshot,
        )

    async def copy_to(
        self, ref: Ref, url: str, *, at: int | None = None, cluster: str | None = None
    ) -> int:
        """Write the contents of ``ref`` at time ``at`` once, as Parquet files under ``url``.

        ``url`` is a blob URL (``file:///dir`` or ``s3://bucket/prefix?...``);
        the files are ``part-<id>-<at>-<n>.parquet`` under it (see
        docs/environment.md). ``at`` defaults to :meth:`freshest`; like a peek's
        time it must be readable [SinceViolation, ReadBeyondUpper]. Returns the
        number of rows written (a row with count ``k`` is written ``k``
        times). A replica's failure to write (an unwritable URL, an error in
        the collection) raises :class:`CopyToFailed` with its message, as does
        a URL of another scheme (before anything runs). Every replica runs
        the copy-to; the first answer is the result. ``cluster`` runs it (as for
        :meth:`subscribe`).
        """
        return await self._data.copy_to(ref, url, at=at, cluster=cluster)

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
        return await self._ddl.drop(ref, cascade=cascade, dropped=dropped)

    async def drop_many(
        self,
        refs: Sequence[Ref],
        *,
        cascade: bool = False,
        dropped: dict[GlobalId, Any] | None = None,
    ) -> list[GlobalId]:
        """Drop every object of ``refs`` in one catalog change, or none (``DROP TABLE a, b``).

        They may depend on each other; anything else that depends on one of them
        refuses the whole drop ([HasDependents], nothing dropped) unless ``cascade``.
        """
        return await self._ddl.drop_many(refs, cascade=cascade, dropped=dropped)

    def ddl_transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """``async with env.ddl_transaction():`` the DDL of the body is one catalog change.

        Its changes (``create_*``, ``drop``, ``drop_many``, ``set_read_policy``,
        secrets) are validated as they are made and seen by the body's own task
        (other tasks see the catalog as it was, and their DDL waits); when the body
        ends they are made durable as one catalog version and installed, and if it
        raises none of them is (a script of several DDL statements runs so: see
        docs/sql.md). Replicas cannot be added or dropped in one. [ReadOnlyEnvironment]
        """
        return self._transaction.open()

    async def set_read_policy(self, ref: Ref, policy: ReadPolicy) -> None:
        """How far object ``ref`` may be compacted (its shard too, for tables and views)."""
        await self._ddl.set_read_policy(ref, policy)

    async def append(
        self, table: Ref, rows: Iterable[Any], *, request_id: str | None = None
    ) -> int:
        """Append rows (tuples, or ``(row, diff)`` pairs) to ``table``; the write timestamp, once durable.

        ``request_id`` makes it idempotent (see :meth:`append_many`).
        """
        return await self._data.append(table, rows, request_id=request_id)

    async def append_many(
        self, batches: Iterable[tuple[Ref, Iterable[Any]]], *, request_id: str | None = None
    ) -> int:
        """Append several batches (to one or more tables; a table may repeat) at one timestamp.

        Every batch is checked first (names, schemas); then all of them are
        written at one write timestamp, which is returned once durable. Nothing
        is written if a batch is refused. The batches land together, with one
        exception: if the controller process dies while the commit is writing,
        each table's share lands whole or not at all, independently of the
        other tables' (one compare-and-append per table; see docs/environment.md).

        An append whose outcome the environment cannot know (it was written, in
        part or whole, but a newer environment took over meanwhile, say) raises
        :class:`~tidegate.runtime.errors.AppendOutcomeUnknown`, never a refusal.
        ``request_id`` (1 to 255 bytes of text; [InvalidRequestId]) makes the
        append idempotent: the id is recorded with the rows, in the same
        compare-and-append, so a retry with the same id -- on this environment,
        after a restart, or on the environment that took over -- answers the
        time it was applied at and never applies it twice. Ids are remembered for
        ten minutes (at most 4,096 per table; see docs/environment.md).
        """
        return await self._data.append_many(batches, request_id=request_id)

    async def peek(
        self,
        ref: Ref,
        at: int | None = None,
        key: Row | None = None,
        finishing: RowSetFinishing | Sequence[ColumnOrder] | None = None,
        *,
        limit: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
    ) -> PeekAnswer:
        """The contents of ``ref`` at time ``at`` as ``(row, count)`` pairs (a
        :class:`~tidegate.runtime.frames.PeekAnswer`: a list with ``to_arrow()``/``to_pandas()``).

        ``at`` defaults to :meth:`freshest` (every acknowledged append shows). It
        must not be before ``ref``'s since [SinceViolation] nor at or beyond
        the upper of its durable inputs (tables, views) [ReadBeyondUpper]; a
        time the inputs have completed is answered once the index catches up.
        ``key`` looks up one key of an index; ``finishing``
        (or a list of column orders, plus ``limit``) orders and limits;
        ``cluster`` answers it (Materialize's ``SET cluster``): an index only
        in its own [WrongCluster], a table or materialized view in any (default:
        the index's or view's own, else ``default``); ``replica`` (a replica
        name of that cluster) asks that replica only (a :class:`PeekFailed` if
        it fails meanwhile) [ReplicaMissing]. Dropping ``ref`` while the peek
        waits fails it with :class:`DependencyDropped`, a :class:`PeekFailed`.
        """
        return await self._data.peek(
            ref, at, key, finishing, limit=limit, replica=replica, cluster=cluster
        )

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
        replica is down. An object without durable inputs (a constant) has nothing to
        wait for: it is read at the oracle's read timestamp too.
        """
        return await self._data.freshest(ref)

    async def hold_fresh(self, refs: Sequence[Ref]) -> FreshRead:
        """The freshest time (:meth:`freshest`) a read of every one of ``refs`` can take, held:
        the answer's read holds keep that time readable on all of them until its
        :meth:`~FreshRead.release` (a transaction's reads at one time; call it, or compaction
        of those objects stops)."""
        return await self._data.hold_fresh(refs)

    async def hold_at(self, refs: Sequence[Ref], time: int) -> FreshRead | None:
        """Read holds keeping ``time`` readable on every one of ``refs``, if each still is
        (its since at or before ``time``); else ``None`` and nothing held. A transaction whose
        later read names objects its first read did not takes them into its time this way."""
        return await self._data.hold_at(refs, time)

    def frontiers(self, ref: Ref) -> tuple[Antichain, Antichain]:
        """``(since, upper)`` of object ``ref`` (of a sink: the time it holds its input at, and
        the frontier its target covers)."""
        return self._data.frontiers(ref)

    def input_upper(self, plan: Frame | Plan | Ref) -> Antichain:
        """The upper of the tables and sources ``plan`` reads (through views, indexes and
        materialized views): where appends and ingested data land. A one-shot read at a given
        time must be before it (``peek`` refuses one that is not [ReadBeyondUpper], as SQL's
        ``SELECT ... AS OF`` does), since no answer is complete there yet."""
        return self._data.input_upper(plan)

    def replicas(self, cluster: str | None = None) -> list[ReplicaInfo]:
        """Every replica (of ``cluster``, or of every cluster) with its status and connection
        (``instance`` is its cluster, ``replica`` its id: see :meth:`wait_connected`)."""
        return self._replicas.replicas(cluster)

    def hydrated(self, ref: Ref | None = None, *, replicas: Iterable[str] | None = None) -> bool:
        """Whether ``ref`` (or, without it, every index and view) is hydrated.

        An object is hydrated once some replica (of ``replicas``, by default
        any) has computed it up to its as_of. [HydrationCheckBadTarget] if
        none of ``replicas`` exists.
        """
        return self._replicas.hydrated(ref, replicas=replicas)

    def hydration(self, ref: Ref | None = None) -> list[HydrationInfo]:
        """Per index and materialized view (or only ``ref``) and replica: whether it is hydrated
        and how long hydration took in seconds (from the dataflow's creation on the replica to
        its frontier first passing the as_of; a reconnect's rehydration starts the clock again).
        See :mod:`tidegate.runtime.hydration`."""
        return self._replicas.hydration(ref)

    async def add_replica(
        self,
        name: str,
        address: str | None = None,
        *,
        executor: str | None = None,
        spark_master: str | None = None,
        size: str | None = None,
    ) -> None:
        """Add replica ``name`` to the ``default`` cluster while running (Materialize's
        ``CREATE CLUSTER REPLICA default.name``; :meth:`create_cluster_replica` for another).

        With ``address`` the controller connects to a replica listening there;
        without, the orchestrator starts a managed one (``executor`` and
        ``spark_master`` default to the environment's, or the ``size``'s). It is
        recorded in the catalog first (a reopened environment runs it too), then
        hydrated with everything the instance runs. [DuplicateCatalogName] if it
        exists; [ReplicaStartFailed] if its process does not start (the record
        is then withdrawn: nothing changed).
        """
        await self._replicas.add_replica(
            name, address, executor=executor, spark_master=spark_master, size=size
        )

    async def drop_replica(self, name: str) -> None:
        """Drop replica ``name`` of the ``default`` cluster (``DROP CLUSTER REPLICA``); a managed
        one is stopped. [UnknownCatalogObject] if there is no such replica."""
        await self._replicas.drop_replica(name)

    # -- clusters ----------------------------------------------------------------------------
    async def create_cluster(
        self, name: str, *, replicas: Replicas = 1, size: str | None = None
    ) -> None:
        """Create cluster ``name``: a compute instance with replicas of its own (Materialize's
        ``CREATE CLUSTER``).

        ``replicas`` a count makes a *managed* cluster of that replication
        factor: replicas ``r1``..``rN`` of ``size`` (default: the environment's
        ``default_replica_size``), which :meth:`alter_cluster` replaces, adds or
        drops. A ``{name: "host:port"}`` mapping or a sequence of
        :class:`ReplicaSpec` makes an *unmanaged* one with those replicas (each
        of its spec's size, else ``size``), to which :meth:`create_cluster_replica`
        adds. Indexes and materialized views are placed on it with ``cluster=``;
        peeks and subscribes run on it with ``cluster=``. A managed replica's
        process is the orchestrator's, named ``name.replica``. Errors, with
        nothing changed: a name in use [DuplicateCatalogName], a name other than
        ``[A-Za-z0-9_-]+``, an unknown size or a bad spec [InvalidCatalogOp], a
        replica that does not start [ReplicaStartFailed].
        """
        await self._clusters.create_cluster(name, replicas=replicas, size=size)

    async def drop_cluster(self, name: str, *, cascade: bool = False) -> list[GlobalId]:
        """Drop cluster ``name`` and its replicas (their processes are stopped); the dropped ids.

        A cluster that maintains indexes or materialized views is refused
        [ClusterNotEmpty, a HasDependents] unless ``cascade``, which drops them
        and what depends on them (Materialize's ``DROP CLUSTER ... CASCADE``).
        """
        return await self._clusters.drop_cluster(name, cascade=cascade)

    async def alter_cluster(
        self, name: str, *, size: str | None = None, replication_factor: int | None = None
    ) -> None:
        """Change managed cluster ``name``'s size or replication factor (``ALTER CLUSTER ... SET``):
        replicas of another size are replaced (stopped and started anew with the new
        allocation, then hydrated again), missing ones started, surplus ones (the highest
        numbered) dropped. [InvalidCatalogOp] for an unmanaged cluster or an unknown size."""
        await self._clusters.alter_cluster(name, size=size, replication_factor=replication_factor)

    async def create_cluster_replica(
        self,
        cluster: str,
        name: str,
        *,
        size: str | None = None,
        address: str | None = None,
        executor: str | None = None,
        spark_master: str | None = None,
    ) -> None:
        """Add replica ``name`` to unmanaged ``cluster`` (``CREATE CLUSTER REPLICA c.name``): as
        :meth:`add_replica`; a managed cluster refuses it [ManagedClusterChange]."""
        await self._clusters.create_cluster_replica(
            cluster, name, size=size, address=address, executor=executor, spark_master=spark_master
        )

    async def drop_cluster_replica(self, cluster: str, name: str) -> None:
        """Drop replica ``name`` of unmanaged ``cluster`` (``DROP CLUSTER REPLICA c.name``); a
        managed cluster refuses it [ManagedClusterChange]."""
        await self._clusters.drop_cluster_replica(cluster, name)

    def clusters(self) -> list[ClusterStatus]:
        """Every cluster: managed or not, size, replication factor, its replicas (size, what the
        size allocates, status) and the indexes and materialized views it maintains."""
        return self._clusters.clusters()

    def sizes(self) -> dict[str, ReplicaSize]:
        """The replica sizes this environment knows (the built-ins and ``replica_sizes``)."""
        return self._core.options.sizes()

    def events(self, buffer: int | None = None) -> EventStream[Any]:
        """Replica status events from now on, as an async iterator."""
        return self._replicas.events(buffer)

    async def wait_for(self, ref: Ref, time: int, *, timeout_s: float | None = None) -> None:
        """Wait until object ``ref`` is complete beyond ``time`` (its upper passed it)."""
        await self._data.wait_for(ref, time, timeout_s=timeout_s)

    async def execute(
        self, sql: str, params: Sequence[Any] | None = None, *, request_id: str | None = None
    ) -> Any:
        """Run SQL; the last statement's :class:`~tidegate.runtime.sql.SqlResult` (see
        :mod:`tidegate.runtime.sql`; ``params`` fill ``$1``, ``$2``, ...). ``request_id``
        makes the one write (``INSERT``, ``UPDATE``, ``DELETE``) idempotent, as an append's."""
        from ..sql_session import execute

        return await execute(self, sql, params, request_id=request_id)

    async def subscribe_sql(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """``SUBSCRIBE ...`` (or a query) as a :class:`Subscription` of batches."""
        from ..sql import subscribe_sql

        return await subscribe_sql(self, sql, params)

    async def serve_pgwire(
        self,
        host: str = "127.0.0.1",
        port: int = 6875,
        *,
        auth: Any,
        tls: Any = None,
        task_status: Any = None,
    ) -> None:
        """Serve this environment over the PostgreSQL wire protocol until cancelled (see
        :func:`tidegate.runtime.pgwire.serve_pgwire`: ``auth`` an ``AuthConfig``, ``tls`` an
        ``ssl.SSLContext``; start it with ``task_group.start`` to learn the address)."""
        import anyio

        from ..pgwire import serve_pgwire

        status = anyio.TASK_STATUS_IGNORED if task_status is None else task_status
        await serve_pgwire(self, host, port, auth=auth, tls=tls, task_status=status)


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
