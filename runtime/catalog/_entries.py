"""The catalog's state: its entries and :class:`CatalogState`, the immutable value holding them.

Everything here is a frozen value; it changes only through the ops of
:mod:`._apply`. The lookups raise :class:`~tidegate.runtime.errors.UnknownCatalogObject`
for a missing id or name, so callers never see a ``KeyError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, typecheck

from ..errors import UnknownCatalogObject

__all__ = [
    "CatalogState",
    "Entry",
    "IndexEntry",
    "MaterializedViewEntry",
    "ReplicaEntry",
    "TableEntry",
    "ViewEntry",
    "entry_dependencies",
]


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A table: a storage collection written by appends."""

    name: str
    id: GlobalId
    schema: Schema


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """An index: object ``id`` computed by ``plan``, arranged by ``keys`` (column positions)."""

    name: str
    id: GlobalId
    plan: Plan
    keys: tuple[int, ...] = ()
    on: GlobalId | None = None


@dataclass(frozen=True, slots=True)
class MaterializedViewEntry:
    """A materialized view: ``plan`` computed and written into storage collection ``id``."""

    name: str
    id: GlobalId
    plan: Plan


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
class ReplicaEntry:
    """A replica: *managed* (the orchestrator runs it, with ``executor`` on ``spark_master``)
    or unmanaged (a process someone else runs at ``address``)."""

    name: str
    managed: bool = True
    address: str | None = None
    spark_master: str | None = None
    executor: str = "spark"


Entry: TypeAlias = TableEntry | IndexEntry | MaterializedViewEntry


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

    @property
    def next_id(self) -> GlobalId:
        """The id the next created object should take (``u{next_user_id}``)."""
        return GlobalId.user(self.next_user_id)

    def entries(self) -> list[Entry]:
        """Every table, index and materialized view, by id."""
        out: list[Entry] = [*self.tables, *self.indexes, *self.materialized_views]
        return sorted(out, key=lambda e: e.id.sort_key)

    def get(self, id: GlobalId) -> Entry:
        """The collection with ``id`` (:class:`UnknownCatalogObject` if none; a view is none)."""
        for e in self.entries():
            if e.id == id:
                return e
        if any(v.id == id for v in self.views):
            raise UnknownCatalogObject(f"{id} is a view, which has no collection of its own")
        raise UnknownCatalogObject(f"no catalog object with id {id}")

    def by_name(self, name: str) -> Entry:
        """The collection named ``name`` (:class:`UnknownCatalogObject` if none; a view is none)."""
        for e in self.entries():
            if e.name == name:
                return e
        if any(v.name == name for v in self.views):
            raise UnknownCatalogObject(f"{name!r} is a view, which has no collection of its own")
        raise UnknownCatalogObject(f"no catalog object named {name!r}")

    def view(self, ref: str | GlobalId) -> ViewEntry | None:
        """The view named ``ref`` (or with id ``ref``), if there is one."""
        for v in self.views:
            if v.name == ref or v.id == ref:
                return v
        return None

    def definition(self, id: GlobalId) -> str | None:
        """The SQL text that created object ``id``, if it was created through SQL."""
        return dict(self.definitions).get(id)

    def replica(self, name: str) -> ReplicaEntry:
        """The replica named ``name`` (:class:`UnknownCatalogObject` if none)."""
        for r in self.replicas:
            if r.name == name:
                return r
        raise UnknownCatalogObject(f"no replica named {name!r}")

    def schema_of(self, id: GlobalId) -> Schema:
        """The schema of object ``id``'s rows (a collection or a view)."""
        v = self.view(id)
        if v is not None:
            return typecheck(v.plan)
        e = self.get(id)
        return e.schema if isinstance(e, TableEntry) else typecheck(e.plan)

    def read_policy(self, id: GlobalId) -> ReadPolicy | None:
        """The read policy set for ``id``, if any."""
        return dict(self.read_policies).get(id)

    def dependencies(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The catalog objects object ``id`` (a collection or a view) reads (sorted)."""
        return entry_dependencies(self.view(id) or self.get(id))

    def dependents(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The objects (views included) that read ``id`` directly (sorted)."""
        readers = [e for e in (*self.entries(), *self.views) if id in entry_dependencies(e)]
        return tuple(sorted((e.id for e in readers), key=lambda g: g.sort_key))


def entry_dependencies(e: Entry | ViewEntry) -> tuple[GlobalId, ...]:
    """The catalog objects ``e`` reads: its plan's inputs, the object it indexes, the views
    it was defined on (sorted)."""
    if isinstance(e, TableEntry):
        return ()
    deps = set(gets(e.plan))
    if isinstance(e, IndexEntry) and e.on is not None:
        deps.add(e.on)
    if isinstance(e, ViewEntry):
        deps.update(e.views)
    return tuple(sorted(deps, key=lambda g: g.sort_key))
