"""The catalog's state: its entries and :class:`CatalogState`, the immutable value holding them.

Everything here is a frozen value; it changes only through the ops of
:mod:`._apply`. The lookups raise :class:`~tidegate.runtime.errors.UnknownCatalogObject`
for a missing id or name, so callers never see a ``KeyError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from tidegate.spec.frontier.read_policy import LagWriteFrontier, ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, typecheck
from tidegate.spec.storage.connections import (
    PostgresSource,
    SourceConnection,
    StorageSinkConnection,
)
from tidegate.spec.storage.introspection import managed_schema
from tidegate.spec.storage.reclock import REMAP_SCHEMA

from ..errors import UnknownCatalogObject

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_READ_POLICY",
    "STORAGE_ENTRIES",
    "STORAGE_REPLICA",
    "CatalogState",
    "ClusterEntry",
    "Entry",
    "IndexEntry",
    "MaterializedViewEntry",
    "ProgressEntry",
    "ReplicaEntry",
    "SecretEntry",
    "SinkEntry",
    "SlotToDrop",
    "SourceEntry",
    "StorageEntry",
    "StorageReplicaEntry",
    "SystemCollectionEntry",
    "TableEntry",
    "ViewEntry",
    "entry_dependencies",
    "replica_id",
]

DEFAULT_READ_POLICY: ReadPolicy = LagWriteFrontier(1000, 1000)
"""How far objects without a read policy of their own may be compacted: one second behind
their upper, in whole seconds (Materialize's default logical compaction window)."""

DEFAULT_CLUSTER = "default"
"""The cluster every catalog starts with: where indexes, materialized views, peeks and
subscribes run unless they name another (Materialize's ``SET cluster``, ``IN CLUSTER``)."""

STORAGE_REPLICA = "storage"
"""The name of the storage instance's one replica (a compute replica may not take it: a managed
one's process files are named after it)."""


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A table: a storage collection written by appends."""

    name: str
    id: GlobalId
    schema: Schema


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """An index: object ``id`` computed by ``plan``, arranged by ``keys`` (column positions),
    maintained by the replicas of ``cluster`` (and readable there only)."""

    name: str
    id: GlobalId
    plan: Plan
    keys: tuple[int, ...] = ()
    on: GlobalId | None = None
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class MaterializedViewEntry:
    """A materialized view: ``plan`` computed by the replicas of ``cluster`` and written into
    storage collection ``id`` (readable from any cluster, through storage); ``views`` are the
    views its query was written against (their plans inlined in ``plan``): they cannot be
    dropped while it reads them."""

    name: str
    id: GlobalId
    plan: Plan
    views: tuple[GlobalId, ...] = ()
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class ViewEntry:
    """A view: a named query, not a collection (Materialize's ``CREATE VIEW``).

    Nothing computes or stores it; reading it reads ``plan``, which reads
    collections only (a view defined on views has them inlined). ``views``
    lists the views its definition named, so dropping one of them drops it too
    (with ``cascade``) or is refused.
    """

    name: str
    id: GlobalId
    plan: Plan
    views: tuple[GlobalId, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """A source: collection ``id`` ingested from ``connection`` by the storage instance.

    ``schema`` types its rows (discovered from the upstream when it was
    created); ``remap_id`` is its remap (progress) collection, which the
    catalog lists as a :class:`ProgressEntry` named ``<name>_progress``.
    """

    name: str
    id: GlobalId
    connection: SourceConnection
    schema: Schema
    remap_id: GlobalId


@dataclass(frozen=True, slots=True)
class ProgressEntry:
    """A source's remap collection (Materialize's progress subsource): at every time, the
    upstream offset up to which the source's data is reflected (one ``int64`` column).

    It belongs to source ``source``: it is created and dropped with it.
    """

    name: str
    id: GlobalId
    source: GlobalId

    @property
    def schema(self) -> Schema:
        return REMAP_SCHEMA


@dataclass(frozen=True, slots=True)
class SystemCollectionEntry:
    """A storage-managed collection the controller writes (status history or statistics of
    sources and sinks): a system id (``s1``...), a reserved name, and its ``kind``
    (:data:`tidegate.spec.storage.introspection.MANAGED_KINDS`)."""

    name: str
    id: GlobalId
    kind: str

    @property
    def schema(self) -> Schema:
        return managed_schema(self.kind)


@dataclass(frozen=True, slots=True)
class SinkEntry:
    """A sink: export ``id`` writing collection ``from_id``'s changes to ``connection``.

    Not a collection (nothing reads a sink); it shares the namespace of names.
    """

    name: str
    id: GlobalId
    from_id: GlobalId
    connection: StorageSinkConnection


@dataclass(frozen=True, slots=True)
class SecretEntry:
    """A secret (Materialize's ``CREATE SECRET``): a name connections refer to for a password.

    The catalog records only its name and id; its value is kept apart, in the
    environment's secret store (:mod:`tidegate.runtime.secrets`), so nothing
    printable holds it. A source or sink whose connection names it
    (``password_secret``) depends on it.
    """

    name: str
    id: GlobalId


@dataclass(frozen=True, slots=True)
class StorageReplicaEntry:
    """The storage instance's replica: *managed* (the orchestrator runs ``tidegate replica
    --services storage``) or a process someone else runs at ``address``."""

    managed: bool = True
    address: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaEntry:
    """A replica of ``cluster``: *managed* (the orchestrator runs it, with ``executor`` on
    ``spark_master``, allocated as ``size`` says) or unmanaged (a process someone else runs at
    ``address``). Its name is unique within its cluster; :attr:`id` is unique overall."""

    name: str
    managed: bool = True
    address: str | None = None
    spark_master: str | None = None
    executor: str = "spark"
    cluster: str = DEFAULT_CLUSTER
    size: str | None = None

    @property
    def id(self) -> str:
        """The replica's id for the controller and the orchestrator (:func:`replica_id`)."""
        return replica_id(self.cluster, self.name)


def replica_id(cluster: str, name: str) -> str:
    """Replica ``name`` of ``cluster`` as the controller and the orchestrator know it: the name
    for the default cluster's replicas, ``cluster.name`` for the others' (cluster names and
    their replicas' names have no dot, so these never collide)."""
    return name if cluster == DEFAULT_CLUSTER else f"{cluster}.{name}"


@dataclass(frozen=True, slots=True)
class ClusterEntry:
    """A cluster: a compute instance with replicas of its own (Materialize's ``CREATE CLUSTER``).

    A *managed* cluster has a ``size`` and a ``replication_factor``: its replicas are
    ``r1`` .. ``rN`` of that size, which the environment creates, resizes and drops as they
    change (``ALTER CLUSTER``). An unmanaged one has the replicas created for it one by one
    (``CREATE CLUSTER REPLICA``), each with a size of its own. ``id`` is ``u1``, ``u2``, ...
    in creation order (the system catalog's cluster id).
    """

    name: str
    id: str = "u1"
    managed: bool = False
    size: str | None = None
    replication_factor: int | None = None


@dataclass(frozen=True, slots=True)
class SlotToDrop:
    """The replication slot of PostgreSQL source ``source``, dropped from the catalog but not yet
    from its upstream (which keeps WAL for the slot until then): recorded with the drop, so
    that a crash or a close before the slot is gone leaves it to the next open to drop.

    ``secret`` is the id of the secret the connection's password came from when the source
    was dropped: its value stays in the secret store while the slot is recorded, even if the
    secret itself is dropped meanwhile (``DROP SECRET ... CASCADE``, or after ``DROP
    SOURCE``), so the slot can still be dropped after a restart; it goes with the record.
    """

    source: str
    connection: PostgresSource
    secret: GlobalId | None = None


Entry: TypeAlias = (
    TableEntry
    | IndexEntry
    | MaterializedViewEntry
    | SourceEntry
    | ProgressEntry
    | SystemCollectionEntry
)
"""A collection of the catalog: something a plan can read."""

StorageEntry: TypeAlias = (
    TableEntry | MaterializedViewEntry | SourceEntry | ProgressEntry | SystemCollectionEntry
)
"""A collection with a shard of its own (a storage collection; an index is compute's)."""

STORAGE_ENTRIES = (
    TableEntry,
    MaterializedViewEntry,
    SourceEntry,
    ProgressEntry,
    SystemCollectionEntry,
)
"""The entry types of :data:`StorageEntry` (for ``isinstance``)."""


@dataclass(frozen=True, slots=True)
class CatalogState:
    """Everything the catalog records; an immutable value (tuples sorted by id or name)."""

    tables: tuple[TableEntry, ...] = ()
    indexes: tuple[IndexEntry, ...] = ()
    materialized_views: tuple[MaterializedViewEntry, ...] = ()
    replicas: tuple[ReplicaEntry, ...] = ()
    read_policies: tuple[tuple[GlobalId, ReadPolicy], ...] = ()
    next_user_id: int = 1
    views: tuple[ViewEntry, ...] = ()
    definitions: tuple[tuple[GlobalId, str], ...] = ()
    """The SQL text that created an object (objects created through SQL), for ``SHOW CREATE``."""
    sources: tuple[SourceEntry, ...] = ()
    progress: tuple[ProgressEntry, ...] = ()
    sinks: tuple[SinkEntry, ...] = ()
    system_collections: tuple[SystemCollectionEntry, ...] = ()
    storage_replica: StorageReplicaEntry | None = None
    """The storage instance's replica, once a source or sink needed one (or one was given)."""
    clusters: tuple[ClusterEntry, ...] = (ClusterEntry(DEFAULT_CLUSTER),)
    """Every cluster, by name; ``replicas`` holds the replicas of all of them."""
    next_cluster_id: int = 2
    """The number of the next cluster's id (``u2`` for the first one created after ``default``)."""
    slots_to_drop: tuple[SlotToDrop, ...] = ()
    """Replication slots of dropped PostgreSQL sources still to be dropped upstream."""
    secrets: tuple[SecretEntry, ...] = ()
    """The secrets (names and ids; their values are kept apart)."""
    _memo: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """Lookups derived from the state (entries by id and by name, schemas), each made once:
    the state never changes, and every append or peek looks several of them up."""

    @property
    def next_id(self) -> GlobalId:
        """The id the next created object should take (``u{next_user_id}``)."""
        return GlobalId.user(self.next_user_id)

    def entries(self) -> list[Entry]:
        """Every collection, by id: tables, indexes, materialized views, sources, their
        progress collections and the system collections."""
        return list(self._entries())

    def _entries(self) -> tuple[Entry, ...]:
        memo = self._memo.get("entries")
        if memo is None:
            out: list[Entry] = [
                *self.system_collections,
                *self.tables,
                *self.indexes,
                *self.materialized_views,
                *self.sources,
                *self.progress,
            ]
            memo = self._memo["entries"] = tuple(sorted(out, key=lambda e: e.id.sort_key))
        return memo

    def _index(self, by: str) -> dict[Any, Entry]:
        """The entries by ``"id"`` or by ``"name"`` (the first in id order wins)."""
        memo = self._memo.get(by)
        if memo is None:
            memo = self._memo[by] = {}
            for e in self._entries():
                memo.setdefault(getattr(e, by), e)
        return memo

    def get(self, id: GlobalId) -> Entry:
        """The collection with ``id`` (:class:`UnknownCatalogObject` if none; a view or a sink
        is none)."""
        e = self._index("id").get(id)
        if e is not None:
            return e
        if any(v.id == id for v in self.views):
            raise UnknownCatalogObject(f"{id} is a view, which has no collection of its own")
        if any(k.id == id for k in self.sinks):
            raise UnknownCatalogObject(f"{id} is a sink, which has no collection of its own")
        if any(k.id == id for k in self.secrets):
            raise UnknownCatalogObject(f"{id} is a secret, which has no collection")
        raise UnknownCatalogObject(f"no catalog object with id {id}")

    def by_name(self, name: str) -> Entry:
        """The collection named ``name`` (:class:`UnknownCatalogObject` if none; a view or a
        sink is none)."""
        e = self._index("name").get(name)
        if e is not None:
            return e
        if any(v.name == name for v in self.views):
            raise UnknownCatalogObject(f"{name!r} is a view, which has no collection of its own")
        if any(k.name == name for k in self.sinks):
            raise UnknownCatalogObject(f"{name!r} is a sink, which has no collection of its own")
        if any(k.name == name for k in self.secrets):
            raise UnknownCatalogObject(f"{name!r} is a secret, which has no collection")
        raise UnknownCatalogObject(f"no catalog object named {name!r}")

    def sink(self, ref: str | GlobalId) -> SinkEntry | None:
        """The sink named ``ref`` (or with id ``ref``), if there is one."""
        for k in self.sinks:
            if k.name == ref or k.id == ref:
                return k
        return None

    def source(self, id: GlobalId) -> SourceEntry | None:
        """The source with id ``id``, if there is one."""
        for s in self.sources:
            if s.id == id:
                return s
        return None

    def system_collection(self, kind: str) -> SystemCollectionEntry | None:
        """The system collection of ``kind``, if the catalog has it."""
        for c in self.system_collections:
            if c.kind == kind:
                return c
        return None

    @property
    def has_storage_objects(self) -> bool:
        """Whether any source or sink exists (then the storage instance needs its replica)."""
        return bool(self.sources or self.sinks)

    def secret(self, ref: str | GlobalId) -> SecretEntry | None:
        """The secret named ``ref`` (or with id ``ref``), if there is one."""
        for k in self.secrets:
            if k.name == ref or k.id == ref:
                return k
        return None

    def secret_users(self, name: str) -> tuple[GlobalId, ...]:
        """The sources and sinks whose connection names secret ``name`` (sorted)."""
        users: list[GlobalId] = []
        for e in self.sources:
            if getattr(e.connection, "password_secret", None) == name:
                users.append(e.id)
        for k in self.sinks:
            if getattr(k.connection, "password_secret", None) == name:
                users.append(k.id)
        return tuple(sorted(users, key=lambda g: g.sort_key))

    def view(self, ref: str | GlobalId) -> ViewEntry | None:
        """The view named ``ref`` (or with id ``ref``), if there is one."""
        for v in self.views:
            if v.name == ref or v.id == ref:
                return v
        return None

    def definition(self, id: GlobalId) -> str | None:
        """The SQL text that created object ``id``, if it was created through SQL."""
        return dict(self.definitions).get(id)

    def replica(self, name: str, cluster: str = DEFAULT_CLUSTER) -> ReplicaEntry:
        """The replica named ``name`` of ``cluster`` (:class:`UnknownCatalogObject` if none)."""
        for r in self.replicas:
            if r.name == name and r.cluster == cluster:
                return r
        where = "" if cluster == DEFAULT_CLUSTER else f" in cluster {cluster!r}"
        raise UnknownCatalogObject(f"no replica named {name!r}{where}")

    def cluster(self, name: str) -> ClusterEntry:
        """The cluster named ``name`` (:class:`UnknownCatalogObject` if none)."""
        for c in self.clusters:
            if c.name == name:
                return c
        raise UnknownCatalogObject(f"unknown cluster {name!r}")

    def has_cluster(self, name: str) -> bool:
        return any(c.name == name for c in self.clusters)

    def cluster_replicas(self, cluster: str) -> tuple[ReplicaEntry, ...]:
        """The replicas of ``cluster``, by name."""
        return tuple(r for r in self.replicas if r.cluster == cluster)

    def cluster_objects(self, cluster: str) -> tuple[GlobalId, ...]:
        """The indexes and materialized views that ``cluster`` maintains, by id."""
        placed = [e.id for e in self.indexes if e.cluster == cluster]
        placed += [e.id for e in self.materialized_views if e.cluster == cluster]
        return tuple(sorted(placed, key=lambda g: g.sort_key))

    def placement(self, id: GlobalId) -> str | None:
        """The cluster that maintains index or materialized view ``id`` (``None`` for others)."""
        e = self._index("id").get(id)
        return e.cluster if isinstance(e, IndexEntry | MaterializedViewEntry) else None

    def schema_of(self, id: GlobalId) -> Schema:
        """The schema of object ``id``'s rows (a collection, a view, or the collection a sink
        writes out)."""
        schemas: dict[GlobalId, Schema] = self._memo.setdefault("schemas", {})
        known = schemas.get(id)
        if known is None:
            known = schemas[id] = self._schema_of(id)
        return known

    def _schema_of(self, id: GlobalId) -> Schema:
        v = self.view(id)
        if v is not None:
            return typecheck(v.plan)
        k = self.sink(id)
        if k is not None:
            return self.schema_of(k.from_id)
        e = self.get(id)
        if isinstance(e, IndexEntry | MaterializedViewEntry):
            return typecheck(e.plan)
        return e.schema

    def read_policy(self, id: GlobalId) -> ReadPolicy | None:
        """The read policy set for ``id``, if any."""
        return dict(self.read_policies).get(id)

    def dependencies(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The catalog objects object ``id`` (a collection, a view or a sink) reads (sorted)."""
        return entry_dependencies(self.view(id) or self.sink(id) or self.get(id))

    def dependents(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The objects (views and sinks included) that read ``id`` directly (sorted); of a
        secret, the sources and sinks whose connection names it."""
        secret = self.secret(id)
        if secret is not None:
            return self.secret_users(secret.name)
        readers = [
            e for e in (*self.entries(), *self.views, *self.sinks) if id in entry_dependencies(e)
        ]
        return tuple(sorted((e.id for e in readers), key=lambda g: g.sort_key))

    def owned(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The objects that exist only as part of ``id`` (a source's progress collection)."""
        return tuple(p.id for p in self.progress if p.source == id)


def entry_dependencies(e: Entry | ViewEntry | SinkEntry) -> tuple[GlobalId, ...]:
    """The catalog objects ``e`` reads: its plan's inputs, the object it indexes, the views
    it was defined on, the collection a sink writes out (sorted)."""
    if isinstance(e, SinkEntry):
        return (e.from_id,)
    if isinstance(e, TableEntry | SourceEntry | ProgressEntry | SystemCollectionEntry):
        return ()
    deps = set(gets(e.plan))
    if isinstance(e, IndexEntry) and e.on is not None:
        deps.add(e.on)
    if isinstance(e, ViewEntry | MaterializedViewEntry):
        deps.update(e.views)
    return tuple(sorted(deps, key=lambda g: g.sort_key))
