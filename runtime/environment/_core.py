"""The state every part of an :class:`~tidegate.runtime.environment.Environment` shares.

An environment is one :class:`Core` (the driver, catalog, shard store and its
IO, oracle, platform, options, orchestrator, and the DDL lock) and the parts
that act on it, one concern each (see the package docstring). A part takes
the core, and the parts it builds on, never the ``Environment``: the façade
imports the parts, and nothing here imports the façade.

The core also holds what every part asks of the catalog: the current
:class:`~tidegate.runtime.catalog.CatalogState`, name resolution, plans of
refs, the effective read policy and storage description of an object, and the
one way to change the durable catalog (:meth:`Core.apply`, which refuses a
read-only or fenced environment).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import anyio

from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, typecheck
from tidegate.spec.plan.builder import Frame
from tidegate.spec.plan.relation import Get
from tidegate.spec.storage import (
    CollectionDescription,
    Ingestion,
    Introspection,
    MaterializedView,
    Progress,
    Table,
)
from tidegate.spec.storage.introspection import (
    SINK_STATISTICS,
    SINK_STATUS_HISTORY,
    SOURCE_STATISTICS,
    SOURCE_STATUS_HISTORY,
)

from ..catalog import (
    DEFAULT_CLUSTER,
    DEFAULT_READ_POLICY,
    STORAGE_ENTRIES,
    Catalog,
    CatalogOp,
    CatalogState,
    MaterializedViewEntry,
    ProgressEntry,
    SetDefinition,
    SourceEntry,
    StorageKind,
    SystemCollectionEntry,
    apply_ops,
)
from ..controller.driver import ControllerDriver
from ..controller.storage_io import ShardStorageIO
from ..controller.timestamps import Oracle
from ..errors import (
    CatalogConflict,
    EnvironmentFenced,
    ReadOnlyEnvironment,
    UnknownCatalogObject,
)
from ..hydration import HydrationTracker
from ..options import EnvironmentOptions
from ..platform import REAL, Platform
from ..secrets import SecretStore, resolve
from ..storage.store import ShardStore

__all__ = [
    "INSTANCE",
    "STORAGE_INSTANCE",
    "SYSTEM_COLLECTIONS",
    "Core",
    "Ref",
    "Staging",
    "TaskLock",
    "defined",
    "log",
    "parse_id",
]

INSTANCE = DEFAULT_CLUSTER
"""The compute instance of the ``default`` cluster (the driver's default instance)."""

STORAGE_INSTANCE = "storage"
"""The storage instance (cluster) that runs every source and sink, on its one replica."""

SYSTEM_COLLECTIONS: tuple[tuple[GlobalId, str, str], ...] = (
    (GlobalId.system(1), "mz_source_status_history", SOURCE_STATUS_HISTORY),
    (GlobalId.system(2), "mz_sink_status_history", SINK_STATUS_HISTORY),
    (GlobalId.system(3), "mz_source_statistics", SOURCE_STATISTICS),
    (GlobalId.system(4), "mz_sink_statistics", SINK_STATISTICS),
)
"""The storage-managed collections: ``(id, reserved name, kind)`` (Materialize's names)."""

log = logging.getLogger("tidegate.runtime.environment")
"""The environment's one logger, whatever part logs (its name is what users configure)."""

Ref: TypeAlias = GlobalId | str
"""An object by id or by name."""

C = TypeVar("C")


class Core:
    """What the parts of one environment share (see the module docstring)."""

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
        """Replaced when a read-only environment follows or takes over the writer's catalog."""
        self.store = store
        self.io = io
        self.oracle = oracle
        """Replaced when a read-only environment is promoted (it opens the durable oracle)."""
        self.platform = platform
        self.orchestrator = orchestrator
        """The :class:`~tidegate.runtime.orchestrator.Orchestrator` of managed replicas, if any."""
        self.lock = TaskLock()
        """Held by every DDL (and by promotion and catalog following): one at a time (a DDL
        transaction holds it throughout, and its statements take it again, in its task)."""
        self.staging: Staging | None = None
        """An open DDL transaction (see :mod:`._transaction`): its catalog changes are staged
        in memory, seen by its own task only, until it commits them as one."""
        self.addresses: dict[str, str] = {}
        """Where unmanaged replicas listen, by name (the driver resolves through it)."""
        self.read_only = driver.ctl.read_only
        """Opened with ``read_only=True`` and not yet promoted."""
        self.options = EnvironmentOptions()
        self.hydration_tracker = HydrationTracker(driver, platform.clock_ms)
        """Times each collection's hydration on each replica."""
        self.data_dir: Path | None = None
        self.later: list[Any] = []
        """Orchestrators and transports started after opening (closed after the driver)."""
        self.replicas_dir: Path | None = None
        """Where an orchestrator started later keeps its files (``None``: ``DATA_DIR/replicas``)."""
        self.opened_read_only = False
        self.token: str | None = None
        """The token of this environment's compute replicas (its transport's, decided at
        opening): an orchestrator started later gives it to the replicas it runs."""
        self.secrets = SecretStore(None)
        """Where secrets' values are kept (``DATA_DIR/secrets``; none without a data dir)."""

    # -- lookup ----------------------------------------------------------------------------
    @property
    def state(self) -> CatalogState:
        """The catalog as this environment last wrote or read it (in an open DDL
        transaction's task: as the transaction has staged it)."""
        staging = self.staging
        if staging is not None and staging.task == _current_task():
            return staging.state
        return self.catalog.state

    def resolve(self, ref: Ref) -> GlobalId:
        """The id of the object ``ref`` (see :meth:`Environment.resolve`)."""
        key = ref if isinstance(ref, GlobalId) else parse_id(ref) or ref
        named = self.state.view(key) or self.state.sink(key) or self.state.secret(key)
        if named is not None:
            return named.id
        if isinstance(ref, GlobalId):
            return self.state.get(ref).id
        try:
            return self.state.by_name(ref).id
        except LookupError:
            gid = parse_id(ref)
            if gid is None:
                raise
            return self.state.get(gid).id

    def schema(self, ref: Ref) -> Schema:
        """The row schema of object ``ref``."""
        return self.state.schema_of(self.resolve(ref))

    def table(self, name: Ref) -> Frame:
        """A frame reading ``name`` (see :meth:`Environment.table`)."""
        gid = self.resolve(name)
        schema = self.state.schema_of(gid)
        view = self.state.view(gid)
        return Frame(view.plan if view is not None else Get(gid, schema), schema)

    def plan(self, plan: Frame | Plan | Ref) -> Plan:
        if isinstance(plan, Frame):
            return plan.plan
        if isinstance(plan, GlobalId | str):
            return self.table(plan).plan
        return plan

    def checked_schema(self, plan: Plan) -> Schema:
        """``plan``'s output schema, typechecked against the catalog: every ``Get`` must read a
        collection of it with the schema it has there (a plan built by hand may say anything)
        [UnknownCatalogObject; TypeMismatch and the other PlanErrors]. A replica told to read
        rows of one shape from a shard of another would answer garbage or fail; so the plan is
        refused before any dataflow is made, as the catalog refuses it in a view or an index."""
        sources: dict[GlobalId, Schema] = {}
        for g in gets(plan):
            self.state.get(g)  # a collection (a view is read by inlining its plan)
            sources[g] = self.state.schema_of(g)
        return typecheck(plan, sources)

    @staticmethod
    def effective_policy(state: CatalogState, id: GlobalId) -> ReadPolicy:
        return state.read_policy(id) or DEFAULT_READ_POLICY

    def description(
        self, state: CatalogState, id: GlobalId, kind: StorageKind
    ) -> CollectionDescription:
        if kind == "table":
            return CollectionDescription(Table())
        entry = state.get(id)
        if isinstance(entry, SystemCollectionEntry):
            return CollectionDescription(Introspection(entry.kind))
        if isinstance(entry, ProgressEntry):
            return CollectionDescription(Progress())
        if isinstance(entry, SourceEntry):
            connection = self.resolved(state, entry.connection)
            ingestion = Ingestion(STORAGE_INSTANCE, entry.remap_id, connection, entry.schema)
            return CollectionDescription(ingestion)
        assert isinstance(entry, MaterializedViewEntry)
        inputs = tuple(
            g for g in sorted(gets(entry.plan)) if isinstance(state.get(g), STORAGE_ENTRIES)
        )
        return CollectionDescription(MaterializedView(inputs))

    def resolved(self, state: CatalogState, connection: C) -> C:
        """``connection`` with the value of the secret it names put into it (see
        :func:`tidegate.runtime.secrets.resolve`) [UnknownCatalogObject, SecretMissing]."""
        name = getattr(connection, "password_secret", None)
        if name is None:
            return connection
        secret = state.secret(name)
        if secret is None:
            raise UnknownCatalogObject(f"no secret named {name!r}")
        return resolve(connection, {name: self.secrets.get(secret.id, name)})

    # -- the durable catalog ---------------------------------------------------------------
    @property
    def staged(self) -> bool:
        """Whether this task's catalog changes are being staged (a DDL transaction): the part
        that made one then installs nothing; the transaction installs them all at its commit."""
        staging = self.staging
        return staging is not None and staging.task == _current_task()

    async def apply(self, ops: Sequence[CatalogOp]) -> CatalogState:
        """Apply ``ops`` to the durable catalog [ReadOnlyEnvironment, EnvironmentFenced]; in a
        DDL transaction's task, stage them (validated now, durable at its commit)."""
        if self.read_only:
            raise ReadOnlyEnvironment("a catalog change")
        staging = self.staging
        if staging is not None and staging.task == _current_task():
            staging.state = apply_ops(staging.state, ops)  # refused here, typed, if invalid
            staging.ops.extend(ops)
            return staging.state
        if self.driver.fenced is not None:
            raise self.driver.fenced
        try:
            return await self.io.retrying("catalog write", self.catalog.apply, ops)
        except CatalogConflict as e:  # another writer: a newer environment that fenced this one?
            fenced = await self.io.retrying("fence check", self.fence_check)
            if fenced is None:
                raise
            self.driver.fenced = fenced
            raise fenced from e

    def fence_check(self) -> EnvironmentFenced | None:
        """Blocking: the error to fence with if a newer environment took over writing, else ``None``.

        The writer epoch is the durable timestamp oracle's: an environment that opens
        read-write, or is promoted, opens a new oracle, which bumps it.
        """
        newer = self.oracle.superseded_by()
        return None if newer is None else EnvironmentFenced(self.oracle.epoch, newer)

    def finalize_check(self, id: GlobalId) -> str | None:
        """Blocking: why shard ``id`` must not be finalized, or ``None`` (the durable catalog
        recorded its object as dropped).

        Read from the durable catalog, not this environment's copy: a shard is
        finalized only if the catalog as it stands says its object was created
        (its id is below the next id: ids are never reused) and is gone.
        """
        state = Catalog(self.store.consensus, key=self.catalog.key).load()
        if any(e.id == id for e in state.entries()):
            return "the durable catalog still has its object"
        if id.namespace != "u" or id.value >= state.next_user_id:
            return "the durable catalog never recorded its object"
        return None

    def fresh_id(self) -> GlobalId:
        return GlobalId.user(self.state.next_user_id)


def _current_task() -> int | None:
    """The running task's id (``None`` outside one: a plain call from another thread)."""
    try:
        return anyio.get_current_task().id
    except Exception:
        return None


class TaskLock:
    """An anyio lock its holding task may take again (a DDL transaction runs DDL statements,
    each of which takes the DDL lock)."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._owner: int | None = None
        self._depth = 0

    async def __aenter__(self) -> None:
        me = anyio.get_current_task().id
        if self._owner == me:
            self._depth += 1
            return
        await self._lock.acquire()
        self._owner, self._depth = me, 1

    async def __aexit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


@dataclasses.dataclass
class Staging:
    """An open DDL transaction: the task that runs it, the catalog as it staged it, the ops
    staged so far, the secrets it created (their values are written; removed if it fails)."""

    task: int | None
    state: CatalogState
    ops: list[CatalogOp] = dataclasses.field(default_factory=list)
    secrets: list[GlobalId] = dataclasses.field(default_factory=list)
    values: dict[GlobalId, str] = dataclasses.field(default_factory=dict)
    """New values of existing secrets (``ALTER SECRET``), written at the commit."""


def defined(gid: GlobalId, definition: str | None) -> list[CatalogOp]:
    """The op recording ``definition`` as object ``gid``'s SQL text, if there is one."""
    return [] if definition is None else [SetDefinition(gid, definition)]


def parse_id(text: str) -> GlobalId | None:
    try:
        return GlobalId.parse(text)
    except Exception:
        return None
