"""The durable catalog: what the user created, so a restarted controller can bring it all back.

:class:`CatalogState` is an immutable value: tables, indexes, materialized
views, replicas, read policies and the next user id. It changes only through
:func:`apply_op` (pure and validated), and is stored as versioned JSON in one
Consensus key by :class:`Catalog`, whose :meth:`Catalog.apply` commits a batch
of ops with compare-and-set. :func:`restore_plan` turns a state into what the
controller must recreate: storage collections, then dataflows in dependency
order, with as-ofs from the spec's as-of selection when the shards' frontiers
are known.

Rules (checked by :func:`apply_op`, each a typed error from
:mod:`tidegate.runtime.errors`):

* Tables, indexes, materialized views, views, sources (and their
  ``<name>_progress`` collections), sinks and system collections share one
  namespace of names; replicas have their own (created, altered to a new
  spec, dropped; ``storage`` is the storage instance's replica's).
  Names are non-empty and unpadded.
* Ids are user ids (``u7``) and *fresh*: at least ``next_user_id``, so an id
  is never reused, even after a drop (a reader of an old id can never see a
  new object). Creating an object moves ``next_user_id`` past its id.
* A plan may read tables, materialized views and indexes of the catalog, each
  with the catalog's schema for it. An index is built by its own dataflow,
  which builds object ``id`` from its plan and exports it arranged by ``keys``;
  ``on`` optionally names the catalog object it indexes (then a dependency).
* A view is a named plan (no collection, no dataflow): its plan reads
  collections only (views it was defined on are inlined, and recorded as
  dependencies); an index may be ``on`` a view. ``definitions`` keeps the SQL
  text that created an object, for ``SHOW CREATE``.
* A source is ingested by the storage instance from its connection (a load
  generator, a PostgreSQL table), with rows of the schema it was created with;
  its remap collection is a progress collection it owns (created and dropped
  with it). A sink writes out a storage collection (a table, materialized view,
  source, progress or system collection; not an index or a view) and depends
  on it. System collections (status history and statistics of sources and
  sinks, system ids ``s1``...) are created once and never dropped. The storage
  instance's replica is recorded once something needs it: managed, or an address.
* A secret is a name for a password kept apart from the catalog (only its name
  and id are recorded): a PostgreSQL source's or an Iceberg sink's connection
  names one (``password_secret``), and depends on it; a connection URL that
  holds a password itself is refused.
* Dropping an object others read is refused (:class:`HasDependents`) unless
  ``cascade=True``, which drops every transitive dependent too. A drop
  removes the dropped objects' read policies.

Everything public is imported from here; the modules behind it are private,
one per concept:

* ``_entries`` -- the entries and :class:`CatalogState`;
* ``_ops`` -- the ops (:data:`CatalogOp`);
* ``_apply`` -- :func:`apply_op` and its validation;
* ``_codec`` -- the versioned JSON of a state and of read policies;
* ``_store`` -- :class:`Catalog`, the state in Consensus;
* ``_restore`` -- :func:`restore_plan` and :func:`dataflow_for`.
"""

from ._apply import EXECUTORS, MAX_NAME_BYTES, apply_op, apply_ops
from ._codec import (
    CATALOG_FORMAT_VERSION,
    connection_from_dict,
    connection_to_dict,
    decode_catalog,
    encode_catalog,
    has_password,
    policy_from_dict,
    policy_to_dict,
)
from ._entries import (
    DEFAULT_CLUSTER,
    DEFAULT_READ_POLICY,
    STORAGE_ENTRIES,
    STORAGE_REPLICA,
    CatalogState,
    ClusterEntry,
    Entry,
    IndexEntry,
    MaterializedViewEntry,
    ProgressEntry,
    ReplicaEntry,
    SecretEntry,
    SinkEntry,
    SlotToDrop,
    SourceEntry,
    StorageEntry,
    StorageReplicaEntry,
    SystemCollectionEntry,
    TableEntry,
    ViewEntry,
    replica_id,
)
from ._ops import (
    AlterCluster,
    AlterReplica,
    AlterSink,
    CatalogOp,
    CreateCluster,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateSecret,
    CreateSink,
    CreateSource,
    CreateSystemCollection,
    CreateTable,
    CreateView,
    Drop,
    DropCluster,
    DropReplica,
    ForgetReplicationSlot,
    SetDefinition,
    SetReadPolicy,
    SetStorageReplica,
)
from ._restore import RestorePlan, StorageCollection, StorageKind, dataflow_for, restore_plan
from ._store import DEFAULT_CATALOG_KEY, Catalog

__all__ = [
    "CATALOG_FORMAT_VERSION",
    "DEFAULT_CATALOG_KEY",
    "DEFAULT_CLUSTER",
    "DEFAULT_READ_POLICY",
    "EXECUTORS",
    "MAX_NAME_BYTES",
    "STORAGE_ENTRIES",
    "STORAGE_REPLICA",
    "AlterCluster",
    "AlterReplica",
    "AlterSink",
    "Catalog",
    "CatalogOp",
    "CatalogState",
    "ClusterEntry",
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
    "Entry",
    "ForgetReplicationSlot",
    "IndexEntry",
    "MaterializedViewEntry",
    "ProgressEntry",
    "ReplicaEntry",
    "RestorePlan",
    "SecretEntry",
    "SetDefinition",
    "SetReadPolicy",
    "SetStorageReplica",
    "SinkEntry",
    "SlotToDrop",
    "SourceEntry",
    "StorageCollection",
    "StorageEntry",
    "StorageKind",
    "StorageReplicaEntry",
    "SystemCollectionEntry",
    "TableEntry",
    "ViewEntry",
    "apply_op",
    "apply_ops",
    "connection_from_dict",
    "connection_to_dict",
    "dataflow_for",
    "decode_catalog",
    "encode_catalog",
    "has_password",
    "policy_from_dict",
    "policy_to_dict",
    "replica_id",
    "restore_plan",
]
