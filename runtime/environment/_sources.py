"""Sources and sinks: creating them, their storage instance's one replica, their status.

A source or sink is recorded in the catalog first (with, for the first one, the
system collections and a managed storage replica), then installed in the
controller: a source as its data and progress collections, whose ingestion is
sent to the storage instance; a sink as an export whose input is held by
``prepare_export`` until ``create_exports`` chooses its as-of. The storage
replica runs (managed, under an orchestrator started on first need) and is
connected once; its reports are read back by :meth:`SourcesAndSinks.storage_status`.
A dropped PostgreSQL source's replication slot is dropped upstream, as
Materialize does (the upstream keeps WAL for a slot until it is dropped): the
drop records the slot in the catalog (:class:`~tidegate.runtime.catalog.SlotToDrop`,
in the same commit), a background task drops it -- waiting while the storage
replica still reads from it, retrying for a minute while the server cannot be
reached -- and then forgets the record. Closing the environment waits a while
for that; a slot still recorded (the close came first, the process died, the
server was gone) is dropped by the next environment that opens the catalog to
write, and :meth:`SourcesAndSinks.slots_to_drop` says which slots wait and why
(Materialize's adapter drops them best-effort and forgets them on a crash).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import anyio

from tidegate.spec.errors import SinkDescriptionInvalid, TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.storage import (
    ExportDescription,
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
    SourceConnection,
    StorageController,
    StorageSinkConnection,
    sink_pacing_problem,
)
from tidegate.spec.storage.connections import redact_passwords
from tidegate.spec.storage.loadgen import loadgen_schema

from ..catalog import (
    STORAGE_ENTRIES,
    STORAGE_REPLICA,
    AlterSink,
    CatalogOp,
    CatalogState,
    CreateSink,
    CreateSource,
    CreateSystemCollection,
    ForgetReplicationSlot,
    ProgressEntry,
    SetStorageReplica,
    SlotToDrop,
    has_password,
)
from ..controller.driver import ReplicaInfo, sendable
from ..controller.errors import RuntimeControllerError, SourceSchemaMismatch
from ..controller.storage_status import StorageStatus, connection_text, connection_type
from ..errors import InvalidCatalogOp, ReplicaStartFailed, UnknownCatalogObject
from ..secrets import redact_error, resolve
from ._core import STORAGE_INSTANCE, SYSTEM_COLLECTIONS, Core, Ref, defined, log
from ._replicas import ensure_orchestrator, not_staged

__all__ = ["SlotDrop", "SourcesAndSinks", "storage_address", "storage_wanted"]

_SLOT_DROP_WAIT_S = 30.0
"""How long closing an environment waits for the slots of sources it dropped to be dropped."""

_SLOT_DROP_RETRY_S = 60.0
"""How long one environment retries dropping a slot whose server fails (Materialize's adapter
retries for a minute: users often drop a source because its server was decommissioned);
the slot then stays recorded for the next open."""


@dataclass(frozen=True, slots=True)
class SlotDrop:
    """A replication slot of a dropped PostgreSQL source still to be dropped upstream: the
    source's name, the server (its connection's URL, password hidden) and slot, whether this
    environment is dropping it now, and the last error if an attempt failed."""

    source: str
    server: str
    slot: str
    dropping: bool
    error: str | None


def storage_wanted(state: CatalogState) -> bool:
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


def _no_inline_password(name: str, connection: object) -> None:
    """[InvalidCatalogOp] for a connection whose URL holds a password (before it is used: an
    upstream's error may quote it); a password is a secret's (``PASSWORD SECRET name``)."""
    url = getattr(connection, "url", None) or getattr(connection, "catalog_url", None)
    if isinstance(url, str) and has_password(url):
        raise InvalidCatalogOp(
            f"{name!r}: the connection URL holds a password, which would be stored and shown in "
            "clear: CREATE SECRET name AS '...' and give PASSWORD SECRET name instead"
        )


def _check_sink_connection(connection: object, schema: Schema, gid: GlobalId) -> None:
    """Refuse a sink connection that cannot work whatever the target holds (no IO)."""
    if isinstance(connection, IcebergSink):
        from ..sinks.iceberg import IcebergSinkWriter

        IcebergSinkWriter(connection, schema, sink_id=str(gid))  # SinkDescriptionInvalid
    elif not isinstance(connection, SimulatedSink):
        raise InvalidCatalogOp(f"not a sink connection (IcebergSink): {connection!r}")
    else:
        problem = sink_pacing_problem(connection)
        if problem is not None:
            raise SinkDescriptionInvalid(problem)


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


def storage_address(core: Core, name: str) -> str:
    """Where storage replica ``name`` listens (asked on every connection attempt)."""
    entry = core.state.storage_replica
    if entry is not None and not entry.managed and entry.address:
        return entry.address
    if core.orchestrator is None:
        raise LookupError(f"no address for storage replica {name!r}")
    return str(core.orchestrator.address(name))


def kept_secrets(state: CatalogState) -> set[GlobalId]:
    """The secrets whose values recorded slots still need (see :class:`SlotToDrop`): kept in
    the secret store though the secret may have been dropped."""
    return {x.secret for x in state.slots_to_drop if x.secret is not None}


class SourcesAndSinks:
    """The sources and sinks of one environment (see the module docstring)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._storage_token: str | None = None
        self._storage_connected = False
        """Whether the storage instance's replica was connected (it then stays connected)."""
        self._slot_drops: dict[tuple[str, str], anyio.Event] = {}
        """The slots (server URL, slot) being dropped now, each with its end's event."""
        self._slot_errors: dict[tuple[str, str], str] = {}
        """The last failure of each slot drop that failed."""

    async def create_source(
        self,
        name: str,
        connection: SourceConnection,
        *,
        schema: Schema | None = None,
        definition: str | None = None,
    ) -> GlobalId:
        """Create source ``name``, ingesting ``connection`` on the storage instance; returns its id."""
        sendable((name, connection, schema, definition), f"source {name!r}")
        _no_inline_password(name, connection)
        async with self.core.lock:
            resolved = self.core.resolved(self.core.state, connection)
            try:
                schema = await self._source_schema(name, resolved, schema)
            except TidegateError as e:  # it may quote the connection: never its password
                raise redact_error(e, *self._secret_values(connection)) from None
            gid = self.core.fresh_id()
            remap = GlobalId.user(gid.value + 1)
            ops: list[CatalogOp] = [
                *self._storage_ops(),
                CreateSource(name, gid, connection, schema, remap),
                *defined(gid, definition),
            ]
            state = await self.core.apply(ops)
            if self.core.staged:  # a DDL transaction: installed at its commit
                return gid
            await self.install_system_collections(state)
            await self.install_source(state, gid)
            await self.connect_storage_replica(state)
            return gid

    def _secret_values(self, connection: object) -> tuple[str, ...]:
        """The value of the secret ``connection`` names (to keep out of messages), if any."""
        name = getattr(connection, "password_secret", None)
        secret = None if not isinstance(name, str) else self.core.state.secret(name)
        if secret is None or not isinstance(name, str):
            return ()
        try:
            return (self.core.secrets.get(secret.id, name),)
        except TidegateError:
            return ()

    async def _source_schema(
        self, name: str, connection: SourceConnection, given: Schema | None
    ) -> Schema:
        """The schema of ``connection``'s rows, from the upstream [SourceSchemaMismatch]."""
        if given is not None and not isinstance(given, Schema):
            raise InvalidCatalogOp(f"source {name!r}: schema must be a Schema, got {given!r}")
        if isinstance(connection, LoadGenerator):
            found = loadgen_schema(connection)  # InvalidUsage for bad parameters
        elif isinstance(connection, PostgresSource):
            found = await self.core.platform.run_blocking(_postgres_schema, connection)
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
        """Create sink ``name``, writing ``from_ref``'s changes out to ``connection``; its id."""
        sendable((name, connection, definition), f"sink {name!r}")
        _no_inline_password(name, connection)
        async with self.core.lock:
            from_id = self.core.resolve(from_ref)
            state = self.core.state
            what = state.view(from_id) or state.sink(from_id) or state.get(from_id)
            if not isinstance(what, STORAGE_ENTRIES):
                raise InvalidCatalogOp(
                    f"sink {name!r}: {what.name} is not a table, materialized view or source: "
                    "a sink writes out a collection with a shard of its own"
                )
            gid = self.core.fresh_id()
            try:
                _check_sink_connection(
                    self.core.resolved(state, connection), state.schema_of(from_id), gid
                )
            except TidegateError as e:
                raise redact_error(e, *self._secret_values(connection)) from None
            ops: list[CatalogOp] = [
                *self._storage_ops(),
                CreateSink(name, gid, from_id, connection),
                *defined(gid, definition),
            ]
            state = await self.core.apply(ops)
            if self.core.staged:  # a DDL transaction: installed at its commit
                return gid
            await self.install_system_collections(state)
            self.install_sink(state, gid)
            await self.connect_storage_replica(state)
            return gid

    async def alter_sink(self, ref: Ref, from_ref: Ref, *, definition: str | None = None) -> None:
        """Sink ``ref`` writes out ``from_ref`` from now on (Materialize's ``ALTER SINK ... SET
        FROM``): the spec's ``alter_export``, which keeps it exactly once. The new input must
        have the sink's schema [InvalidCatalogOp] and be readable where the sink resumes (what
        its target covers) [ReadBeforeSince]; a sink that has committed nothing yet cannot be
        altered (as in Materialize). Held from the check to the change, so that it stays so."""
        async with self.core.lock:
            not_staged(self.core, "alter_sink")
            gid = self.core.resolve(ref)
            state = self.core.state
            sink = state.sink(gid)
            if sink is None:
                from ..errors import UnknownCatalogObject

                raise UnknownCatalogObject(f"{ref} is not a sink")
            from_id = self.core.resolve(from_ref)
            storage = self.core.driver.ctl.storage
            (hold,) = storage.acquire_read_holds([from_id])  # its since stays until the change
            self.core.driver.apply()
            try:
                desc = ExportDescription(
                    from_id,
                    STORAGE_INSTANCE,
                    Antichain([0]),
                    sink.connection,
                    state.schema_of(sink.from_id),
                )
                storage.check_alter_export(gid, desc)
                state = await self.core.apply([AlterSink(gid, from_id), *defined(gid, definition)])
                storage.alter_export(gid, desc)
                self.core.driver.apply()
            finally:
                hold.release()
                self.core.driver.apply()

    def _storage_ops(self) -> list[CatalogOp]:
        """What the first source or sink brings along: the system collections and, unless one
        is recorded, a managed storage replica [RuntimeControllerError if none can run]."""
        state = self.core.state
        ops: list[CatalogOp] = [
            CreateSystemCollection(name, gid, kind)
            for gid, name, kind in SYSTEM_COLLECTIONS
            if state.system_collection(kind) is None
        ]
        if state.storage_replica is None:
            if self.core.orchestrator is None and self.core.data_dir is None:
                raise RuntimeControllerError(
                    "sources and sinks run on a storage replica: open the environment with a "
                    "data directory (its orchestrator then runs one) or with "
                    "storage_replica='host:port' (a `tidegate replica --services storage` process)"
                )
            ops.append(SetStorageReplica(managed=True))
        return ops

    async def install_system_collections(
        self, state: CatalogState, ids: Sequence[GlobalId] | None = None
    ) -> None:
        """Create the system collections of ``state`` the controller lacks (or only ``ids``)."""
        ctl = self.core.driver.ctl
        wanted = [
            c
            for c in state.system_collections
            if (ids is None or c.id in ids) and ctl.storage.storage_frontiers(c.id) is None
        ]
        if not wanted:
            return
        shards = {c.id: await self.core.io.ensure_shard(c.id, c.schema) for c in wanted}
        descs = [(c.id, self.core.description(state, c.id, "system")) for c in wanted]
        ctl.storage.create_collections(descs, shards)
        self.core.driver.apply()
        self.core.driver.set_storage_read_policy(
            [(c.id, self.core.effective_policy(state, c.id)) for c in wanted]
        )

    async def install_source(self, state: CatalogState, gid: GlobalId) -> None:
        """Create source ``gid`` of catalog ``state`` and its progress collection (their shards
        too); the ingestion is sent to the storage instance's replica."""
        entry = state.source(gid)
        assert entry is not None
        progress = state.get(entry.remap_id)
        assert isinstance(progress, ProgressEntry)
        shards = {
            entry.remap_id: await self.core.io.ensure_shard(entry.remap_id, progress.schema),
            gid: await self.core.io.ensure_shard(gid, entry.schema),
        }
        ctl = self.core.driver.ctl
        ctl.storage.create_collections(
            [
                (entry.remap_id, self.core.description(state, entry.remap_id, "progress")),
                (gid, self.core.description(state, gid, "source")),
            ],
            shards,
        )
        self.core.driver.apply()
        self.core.driver.set_storage_read_policy(
            [(g, self.core.effective_policy(state, g)) for g in (entry.remap_id, gid)]
        )

    def install_sink(self, state: CatalogState, gid: GlobalId) -> None:
        """Create sink ``gid`` of catalog ``state``: its input held by ``prepare_export`` until
        ``create_exports`` chooses its as-of (the SinkAsOf rule) and the hold passes to it."""
        entry = state.sink(gid)
        assert entry is not None
        storage = self.core.driver.ctl.storage
        token = storage.prepare_export(gid, entry.from_id)
        desc = ExportDescription(
            entry.from_id,
            STORAGE_INSTANCE,
            Antichain([0]),  # at or before the held since: it becomes the since
            self.core.resolved(state, entry.connection),
            state.schema_of(entry.from_id),
        )
        try:
            storage.create_exports([(token, desc)])
        except BaseException:
            storage.cancel_prepare_export(token)
            self.core.driver.apply()
            raise
        self.core.driver.apply()

    async def connect_storage_replica(self, state: CatalogState) -> None:
        """Run (if managed) and connect the storage instance's replica, once.

        A managed replica that fails to start is left to the orchestrator, which
        retries; the controller connects as soon as it listens.
        """
        if self._storage_connected or self.core.read_only:
            return
        entry = state.storage_replica
        if entry is None:
            return
        links = self.core.driver.storage_links
        if links.transport is None:
            # A managed storage replica gets a token of its own, unless one was given for all
            # or the orchestrator (one that outlives this environment) has its own: a replica
            # it still runs from an earlier open keeps that one.
            token = self.core.options.token
            if token is None and entry.managed:
                outer = getattr(self.core.orchestrator, "token", None)
                token = outer if isinstance(outer, str) else self.core.platform.new_id()
            self._storage_token = token
            from ..transport import STORAGE
            from ..transport.grpc_client import GrpcTransport

            links.transport = GrpcTransport(
                protocol=STORAGE, token=token, tls=self.core.options.tls
            )
            self.core.later.append(links.transport)
        if entry.managed:
            orchestrator = await ensure_orchestrator(self.core)
            extra: tuple[str, ...] = ()
            if self.core.options.storage_tick_ms is not None:
                extra = ("--storage-tick-ms", str(self.core.options.storage_tick_ms))
            try:
                await orchestrator.ensure(
                    STORAGE_REPLICA,
                    services=("storage",),
                    token=self._storage_token,
                    extra_args=extra,
                )
            except ReplicaStartFailed as e:
                log.warning("the storage replica did not start (retrying): %s", e)
        self.core.driver.connect_storage_replica(STORAGE_INSTANCE, STORAGE_REPLICA)
        self._storage_connected = True

    def storage_replica(self) -> ReplicaInfo | None:
        """The storage instance's replica and its connection (``None`` until one is needed)."""
        infos = self.core.driver.storage_replicas()
        return infos[0] if infos else None

    async def wait_storage_connected(self, *, timeout_s: float | None = None) -> None:
        """Wait until the storage instance's replica is connected [ReplicasNotConnected]."""
        await self.core.driver.wait_storage_connected(STORAGE_INSTANCE, timeout_s=timeout_s)

    def storage_status(self, ref: Ref | None = None) -> list[StorageStatus]:
        """Every source and sink (or only ``ref``): status, error, frontiers and statistics."""
        state = self.core.state
        wanted: GlobalId | None = None
        if ref is not None:
            wanted = self.core.resolve(ref)
            if state.source(wanted) is None and state.sink(wanted) is None:
                from ..errors import UnknownCatalogObject

                raise UnknownCatalogObject(f"{ref} is not a source or a sink")
        storage = self.core.driver.ctl.storage
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

    def drop_replication_slots(
        self, state: CatalogState, before: CatalogState | None = None
    ) -> None:
        """Start dropping, in the background, every slot ``state`` records as still to drop
        (those of sources it dropped, and any an earlier environment left); only a writing
        environment does (one following another's DDL leaves them to the writer). Their
        passwords are read now: from ``state``'s secrets, or from ``before`` (the catalog
        before the drop) for a secret dropped with its source, whose value goes right after."""
        if self.core.read_only:
            return
        for x in state.slots_to_drop:
            key = (x.connection.url, x.connection.slot)
            if key in self._slot_drops:
                continue
            try:
                resolved = self._slot_connection(x, state, before)
            except TidegateError as e:  # its secret is gone: the record stays, with why
                self._slot_errors[key] = f"{type(e).__name__}: {e}"
                log.warning("source %s: its slot cannot be dropped: %s", x.source, e)
                continue
            done = anyio.Event()
            self._slot_drops[key] = done
            self.core.driver.start_soon(self._drop_replication_slot, x, resolved, done)

    def _slot_connection(
        self, entry: SlotToDrop, state: CatalogState, before: CatalogState | None
    ) -> PostgresSource:
        """``entry``'s connection with its password put in [UnknownCatalogObject,
        SecretMissing]: from the secret the record keeps (by id: its value stays while the slot
        is recorded, the secret dropped or not), else -- a record made before secrets were
        kept -- from ``state``'s secrets or ``before``'s."""
        connection, name = entry.connection, entry.connection.password_secret
        if entry.secret is not None and name is not None:
            return resolve(connection, {name: self.core.secrets.get(entry.secret, name)})
        try:
            return self.core.resolved(state, connection)
        except UnknownCatalogObject:
            if before is None:
                raise
            return self.core.resolved(before, connection)

    async def release_kept_secret(self, entry: SlotToDrop) -> None:
        """``entry``'s slot was dropped and forgotten: the value of the secret it kept goes too,
        unless the secret still exists or another recorded slot keeps it."""
        gid, state = entry.secret, self.core.state
        if gid is None or state.secret(gid) is not None or gid in kept_secrets(state):
            return
        await self.core.platform.run_blocking(self.core.secrets.delete, gid)

    def slots_to_drop(self) -> list[SlotDrop]:
        """The replication slots of dropped PostgreSQL sources not yet dropped upstream."""
        out = []
        for x in self.core.state.slots_to_drop:
            key = (x.connection.url, x.connection.slot)
            out.append(
                SlotDrop(
                    x.source,
                    connection_text(x.connection),
                    x.connection.slot,
                    key in self._slot_drops,
                    self._slot_errors.get(key),
                )
            )
        return out

    async def _drop_replication_slot(
        self, entry: SlotToDrop, resolved: PostgresSource, done: anyio.Event
    ) -> None:
        """Drop ``entry``'s slot upstream (waiting while the storage replica still reads from it),
        retrying with backoff for :data:`_SLOT_DROP_RETRY_S`, then forget it in the catalog. A
        slot that cannot be dropped is logged with what to run by hand, and stays recorded."""
        name, connection = entry.source, entry.connection
        key = (connection.url, connection.slot)
        deadline = self.core.platform.clock_ms() + int(_SLOT_DROP_RETRY_S * 1000)
        delay = 0.5
        try:
            while True:
                try:
                    await self.core.platform.run_blocking(_drop_postgres_slot, resolved)
                    break
                except Exception as e:
                    self._slot_errors[key] = redact_passwords(f"{type(e).__name__}: {e}")
                    if self.core.platform.clock_ms() >= deadline:
                        log.warning(
                            "source %s was dropped but its replication slot %s was not (%s); it "
                            "holds WAL upstream until dropped: SELECT pg_drop_replication_slot("
                            "'%s') on %s (the next open of this environment tries again)",
                            name,
                            connection.slot,
                            redact_passwords(str(e)),
                            connection.slot,
                            connection_text(connection),
                        )
                        return
                await anyio.sleep(delay)
                delay = min(delay * 2, 10.0)
            self._slot_errors.pop(key, None)
            log.info("source %s: replication slot %s dropped", name, connection.slot)
            async with self.core.lock:
                await self.core.apply([ForgetReplicationSlot(connection.url, connection.slot)])
                await self.release_kept_secret(entry)
        except Exception as e:  # the catalog write failed (fenced, say): the record stays
            self._slot_errors.setdefault(key, f"{type(e).__name__}: {e}")
            log.warning("replication slot %s: %s", connection.slot, e)
        finally:
            self._slot_drops.pop(key, None)
            done.set()

    async def finish_slot_drops(self) -> None:
        """On close: wait up to :data:`_SLOT_DROP_WAIT_S` for dropped sources' slots to go; a
        slot still being dropped then is logged with what to run by hand (it stays recorded)."""
        with anyio.move_on_after(_SLOT_DROP_WAIT_S):
            for done in list(self._slot_drops.values()):
                await done.wait()
        for x in self.core.state.slots_to_drop:
            key = (x.connection.url, x.connection.slot)
            if key in self._slot_drops:
                log.warning(
                    "closing before source %s's replication slot %s was dropped (%s); it holds "
                    "WAL upstream until dropped: SELECT pg_drop_replication_slot('%s') on %s "
                    "(the next open of this environment tries again)",
                    x.source,
                    x.connection.slot,
                    self._slot_errors.get(key, "still waiting"),
                    x.connection.slot,
                    connection_text(x.connection),
                )
