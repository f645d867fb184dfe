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

* Tables, indexes, materialized views and views share one namespace of names;
  replicas have their own (created, altered to a new spec, dropped).
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
    decode_catalog,
    encode_catalog,
    policy_from_dict,
    policy_to_dict,
)
from ._entries import (
    CatalogState,
    Entry,
    IndexEntry,
    MaterializedViewEntry,
    ReplicaEntry,
    TableEntry,
    ViewEntry,
)
from ._ops import (
    AlterReplica,
    CatalogOp,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateTable,
    CreateView,
    Drop,
    DropReplica,
    SetDefinition,
    SetReadPolicy,
)
from ._restore import RestorePlan, StorageCollection, dataflow_for, restore_plan
from ._store import DEFAULT_CATALOG_KEY, Catalog

__all__ = [
    "CATALOG_FORMAT_VERSION",
    "DEFAULT_CATALOG_KEY",
    "EXECUTORS",
    "MAX_NAME_BYTES",
    "AlterReplica",
    "Catalog",
    "CatalogOp",
    "CatalogState",
    "CreateIndex",
    "CreateMaterializedView",
    "CreateReplica",
    "CreateTable",
    "CreateView",
    "Drop",
    "DropReplica",
    "Entry",
    "IndexEntry",
    "MaterializedViewEntry",
    "ReplicaEntry",
    "RestorePlan",
    "SetDefinition",
    "SetReadPolicy",
    "StorageCollection",
    "TableEntry",
    "ViewEntry",
    "apply_op",
    "apply_ops",
    "dataflow_for",
    "decode_catalog",
    "encode_catalog",
    "policy_from_dict",
    "policy_to_dict",
    "restore_plan",
]
