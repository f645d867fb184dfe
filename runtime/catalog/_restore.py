"""What a (re)starting controller must recreate from a catalog state: :func:`restore_plan`.

Storage collections first (system collections, tables, sources and their
progress collections, materialized-view outputs), then one dataflow per index
and materialized view in dependency order (:func:`dataflow_for`), with as-ofs
from the spec's as-of selection when the shards' frontiers are known, and the
sinks (created last: each holds the collection it writes out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tidegate.spec.compute.as_of_selection import select_as_ofs
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema, gets, typecheck
from tidegate.spec.protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
)

from ..errors import InvalidCatalogOp, UnknownCatalogObject
from ._entries import (
    CatalogState,
    Entry,
    IndexEntry,
    MaterializedViewEntry,
    ReplicaEntry,
    SinkEntry,
    entry_dependencies,
)

__all__ = ["RestorePlan", "StorageCollection", "dataflow_for", "restore_plan"]


StorageKind = Literal["table", "materialized_view", "source", "progress", "system"]
"""What writes a storage collection: appends (a table), a dataflow (a materialized view), the
storage instance (a source and its progress collection) or the controller (a system collection)."""


@dataclass(frozen=True, slots=True)
class StorageCollection:
    """A storage collection the controller must (re)create, of one of the :data:`StorageKind` s."""

    id: GlobalId
    name: str
    kind: StorageKind
    schema: Schema


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a (re)starting controller must create, in this order.

    ``storage_collections``: system collections, tables, progress collections and
    sources, then materialized-view outputs (by id within each kind).
    ``dataflows``: one per index and materialized view, each after the dataflows
    whose indexes it imports; ``as_of`` is set when frontiers were given
    (otherwise ``None``). ``storage_holds``: the sinces to hold on storage inputs
    until the dataflows are installed. ``as_of_failures``: constraints the
    as-of selection could not meet (see :mod:`tidegate.spec.compute.as_of_selection`).
    """

    storage_collections: tuple[StorageCollection, ...]
    dataflows: tuple[DataflowDescription, ...]
    read_policies: Mapping[GlobalId, ReadPolicy]
    replicas: tuple[ReplicaEntry, ...]
    storage_holds: Mapping[GlobalId, Antichain] = field(default_factory=dict)
    as_of_failures: tuple[tuple[Literal["hard", "soft"], str, str], ...] = ()
    sinks: tuple[SinkEntry, ...] = ()
    """The sinks, by id: each is created once what it writes out exists."""


def _dependency_order(state: CatalogState) -> list[Entry]:
    entries = {e.id: e for e in state.entries()}
    done: set[GlobalId] = set()
    order: list[Entry] = []

    def visit(gid: GlobalId) -> None:
        # Dependencies always have smaller ids than their dependents (ids are fresh), so this
        # terminates; the recursion depth is bounded by the longest dependency chain.
        if gid in done or gid not in entries:
            return
        done.add(gid)
        for d in entry_dependencies(entries[gid]):
            visit(d)
        order.append(entries[gid])

    for gid in entries:
        visit(gid)
    return order


def dataflow_for(state: CatalogState, id: GlobalId) -> DataflowDescription:
    """The dataflow that maintains index or materialized view ``id`` (``as_of`` unset).

    It builds object ``id`` from the plan; reads of tables and materialized
    views are source imports, reads of indexes are index imports. An index is
    exported as ``id`` (arranged by its keys), a materialized view as a sink
    writing storage collection ``id``. Its debug name is ``"<kind> <name>"``.
    """
    e = state.get(id)
    if not isinstance(e, IndexEntry | MaterializedViewEntry):
        raise InvalidCatalogOp(
            f"{id} is a {type(e).__name__}: only indexes and views have dataflows"
        )
    sources: list[SourceImport] = []
    index_imports: list[IndexImport] = []
    for gid in sorted(gets(e.plan), key=lambda g: g.sort_key):
        dep = state.get(gid)
        if isinstance(dep, IndexEntry):
            index_imports.append(IndexImport(gid, gid, dep.keys))
        else:
            sources.append(SourceImport(gid))
    build = (BuildDesc(id, e.plan),)
    if isinstance(e, IndexEntry):
        return DataflowDescription(
            f"index {e.name}",
            source_imports=tuple(sources),
            index_imports=tuple(index_imports),
            objects_to_build=build,
            index_exports=(IndexExport(id, id, e.keys),),
        )
    return DataflowDescription(
        f"materialized view {e.name}",
        source_imports=tuple(sources),
        index_imports=tuple(index_imports),
        objects_to_build=build,
        sink_exports=(SinkExport(id, id, MaterializedViewConnection()),),
    )


def restore_plan(
    state: CatalogState,
    frontiers: Mapping[GlobalId, tuple[Antichain, Antichain]] | None = None,
    *,
    current_time: int | None = None,
    read_only: bool = False,
    default_policy: ReadPolicy | None = None,
) -> RestorePlan:
    """What the controller must recreate for ``state`` (see :class:`RestorePlan`).

    With ``frontiers`` (every storage collection's ``(since, upper)`` from its
    shard) and ``current_time`` (e.g. the oracle's read timestamp), dataflows
    get as-ofs from :func:`~tidegate.spec.compute.as_of_selection.select_as_ofs`
    and their source imports carry the shards' uppers. An index is restored as
    readable as its read policy wants it: the one it was given, else
    ``default_policy`` (the one it compacts by), so a restart loses none of the
    history its policy kept.
    """
    order = _dependency_order(state)
    collections = [
        *(StorageCollection(e.id, e.name, "system", e.schema) for e in state.system_collections),
        *(StorageCollection(e.id, e.name, "table", e.schema) for e in state.tables),
        *(StorageCollection(e.id, e.name, "progress", e.schema) for e in state.progress),
        *(StorageCollection(e.id, e.name, "source", e.schema) for e in state.sources),
        *(
            StorageCollection(e.id, e.name, "materialized_view", typecheck(e.plan))
            for e in order
            if isinstance(e, MaterializedViewEntry)
        ),
    ]
    dataflows = [
        dataflow_for(state, e.id)
        for e in order
        if isinstance(e, IndexEntry | MaterializedViewEntry)
    ]
    policies = dict(state.read_policies)
    holds: Mapping[GlobalId, Antichain] = {}
    failures: tuple[tuple[Literal["hard", "soft"], str, str], ...] = ()
    if frontiers is not None:
        if current_time is None:
            raise ValueError("restore_plan: current_time is required with frontiers")
        missing = [c.id for c in collections if c.id not in frontiers]
        if missing:
            raise UnknownCatalogObject(
                f"restore_plan: no frontiers for storage collection(s) {missing}"
            )
        uppers = {gid: f[1] for gid, f in frontiers.items()}
        dataflows = [d.with_source_uppers(uppers) for d in dataflows]
        index_policies = {
            i.id: p for i in state.indexes if (p := policies.get(i.id, default_policy)) is not None
        }
        selection = select_as_ofs(
            dataflows, frontiers, index_policies, current_time, read_only=read_only
        )
        dataflows = list(selection.dataflows)
        holds, failures = selection.storage_holds, selection.failures
    return RestorePlan(
        tuple(collections),
        tuple(dataflows),
        policies,
        state.replicas,
        holds,
        failures,
        state.sinks,
    )
