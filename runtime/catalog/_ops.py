"""The catalog's ops: one frozen dataclass per change a user can make, under :data:`CatalogOp`.

An op is a request, not yet a fact: :func:`~._apply.apply_op` validates it
against a state and only then makes it part of the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema
from tidegate.spec.storage.connections import SourceConnection, StorageSinkConnection

from ._entries import DEFAULT_CLUSTER

__all__ = [
    "AlterCluster",
    "AlterReplica",
    "AlterSink",
    "CatalogOp",
    "CreateCluster",
    "CreateIndex",
    "CreateMaterializedView",
    "CreateReplica",
    "CreateSecret",
    "CreateSink",
    "CreateSource",
    "CreateSystemCollection",
    "CreateTable",
    "CreateView",
    "Drop",
    "DropCluster",
    "DropReplica",
    "ForgetReplicationSlot",
    "SetDefinition",
    "SetReadPolicy",
    "SetStorageReplica",
]


@dataclass(frozen=True, slots=True)
class CreateTable:
    """Create table ``name`` as storage collection ``id`` with rows of ``schema``."""

    name: str
    id: GlobalId
    schema: Schema


@dataclass(frozen=True, slots=True)
class CreateIndex:
    """Create index ``name``: object ``id`` built by ``plan``, arranged by ``keys`` (on ``on``)."""

    name: str
    id: GlobalId
    plan: Plan
    keys: tuple[int, ...] = ()
    on: GlobalId | None = None
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class CreateMaterializedView:
    """Create materialized view ``name``: ``plan`` (computed by ``cluster``) written into
    storage collection ``id``, defined on ``views`` (their plans inlined in ``plan``)."""

    name: str
    id: GlobalId
    plan: Plan
    views: tuple[GlobalId, ...] = ()
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class CreateView:
    """Create view ``name``: the query ``plan`` (over collections), defined on ``views``."""

    name: str
    id: GlobalId
    plan: Plan
    views: tuple[GlobalId, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateSource:
    """Create source ``name``: collection ``id`` ingested from ``connection`` with rows of
    ``schema``, and its remap collection ``remap_id`` (named ``<name>_progress``)."""

    name: str
    id: GlobalId
    connection: SourceConnection
    schema: Schema
    remap_id: GlobalId


@dataclass(frozen=True, slots=True)
class CreateSink:
    """Create sink ``name``: export ``id`` of collection ``from_id`` to ``connection``."""

    name: str
    id: GlobalId
    from_id: GlobalId
    connection: StorageSinkConnection


@dataclass(frozen=True, slots=True)
class CreateSystemCollection:
    """Create the storage-managed collection of ``kind`` as system collection ``id`` named ``name``."""

    name: str
    id: GlobalId
    kind: str


@dataclass(frozen=True, slots=True)
class SetStorageReplica:
    """Record the storage instance's replica: managed, or a process at ``address``."""

    managed: bool = True
    address: str | None = None


@dataclass(frozen=True, slots=True)
class SetDefinition:
    """Record ``sql``, the statement that created object ``id`` (for ``SHOW CREATE``)."""

    id: GlobalId
    sql: str


@dataclass(frozen=True, slots=True)
class CreateReplica:
    """Add a replica to ``cluster``; managed replicas default to ``spark_master="local[1]"``."""

    name: str
    managed: bool = True
    address: str | None = None
    spark_master: str | None = None
    executor: str = "spark"
    cluster: str = DEFAULT_CLUSTER
    size: str | None = None


@dataclass(frozen=True, slots=True)
class CreateCluster:
    """Create cluster ``name``: managed (of ``size``, ``replication_factor`` replicas, each
    created by its own :class:`CreateReplica`) or unmanaged (replicas created one by one)."""

    name: str
    managed: bool = True
    size: str | None = None
    replication_factor: int | None = 1


@dataclass(frozen=True, slots=True)
class AlterCluster:
    """Record managed cluster ``name``'s new ``size`` and ``replication_factor`` (its replicas
    are replaced, added or dropped by their own ops)."""

    name: str
    size: str | None
    replication_factor: int


@dataclass(frozen=True, slots=True)
class DropCluster:
    """Drop cluster ``name`` and its replicas; with ``cascade``, the indexes and materialized
    views it maintains (and what depends on them) too, else those refuse the drop."""

    name: str
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class AlterSink:
    """Sink ``id`` writes out ``from_id`` from now on (of the same schema): ``ALTER SINK ...
    SET FROM``."""

    id: GlobalId
    from_id: GlobalId


@dataclass(frozen=True, slots=True)
class ForgetReplicationSlot:
    """The slot recorded by the drop of a PostgreSQL source is gone upstream: forget it."""

    url: str
    slot: str


@dataclass(frozen=True, slots=True)
class CreateSecret:
    """Create secret ``name`` as ``id`` (its value goes to the secret store, never here)."""

    name: str
    id: GlobalId


@dataclass(frozen=True, slots=True)
class Drop:
    """Drop object ``id`` (and, with ``cascade``, everything that reads it; of a secret,
    the sources and sinks that use it)."""

    id: GlobalId
    cascade: bool = False


@dataclass(frozen=True, slots=True)
class AlterReplica:
    """Replace the recorded spec of replica ``name`` (fields and defaults as :class:`CreateReplica`)."""

    name: str
    managed: bool = True
    address: str | None = None
    spark_master: str | None = None
    executor: str = "spark"
    cluster: str = DEFAULT_CLUSTER
    size: str | None = None


@dataclass(frozen=True, slots=True)
class DropReplica:
    """Drop replica ``name`` of ``cluster`` (a managed one is stopped by the environment)."""

    name: str
    cluster: str = DEFAULT_CLUSTER


@dataclass(frozen=True, slots=True)
class SetReadPolicy:
    """Set (or with ``None``, clear) the read policy of object ``id``."""

    id: GlobalId
    policy: ReadPolicy | None


CatalogOp: TypeAlias = (
    CreateTable
    | CreateIndex
    | CreateMaterializedView
    | CreateView
    | CreateReplica
    | AlterReplica
    | Drop
    | DropReplica
    | SetReadPolicy
    | SetDefinition
    | CreateSource
    | CreateSink
    | CreateSystemCollection
    | SetStorageReplica
    | CreateCluster
    | AlterCluster
    | DropCluster
    | AlterSink
    | ForgetReplicationSlot
    | CreateSecret
)
"""Every op :func:`~._apply.apply_op` accepts."""
