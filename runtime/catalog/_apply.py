"""How ops change a state: :func:`apply_op`, pure and validated, and :func:`apply_ops`.

The rules it enforces are listed in the package docstring
(:mod:`tidegate.runtime.catalog`); each violation is a typed error from
:mod:`tidegate.runtime.errors`, raised before anything is built, so an
invalid op never yields a half-changed state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from tidegate.spec.errors import InvalidText, InvalidUsage, PlanError
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema, gets, typecheck
from tidegate.spec.storage.connections import (
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
)
from tidegate.spec.storage.introspection import MANAGED_KINDS
from tidegate.spec.storage.loadgen import loadgen_schema
from tidegate.spec.text import find_invalid_text, surrogate_at, surrogate_text

from ..errors import (
    ClusterNotEmpty,
    DuplicateCatalogId,
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from ._codec import has_password, policy_to_dict
from ._entries import (
    DEFAULT_CLUSTER,
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

__all__ = ["EXECUTORS", "MAX_NAME_BYTES", "apply_op", "apply_ops"]

EXECUTORS = ("spark", "python")
"""The executors a managed replica may run."""


MAX_NAME_BYTES = 255
"""The longest object name, in UTF-8 bytes (Materialize's identifier limit)."""


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name or name.strip() != name or not name.isprintable():
        raise InvalidCatalogOp(f"{what} name must be a non-empty, unpadded string, got {name!r}")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidCatalogOp(
            f"{what} name is {len(name.encode())} bytes long; the limit is {MAX_NAME_BYTES}: "
            f"{name[:40]!r}..."
        )
    return name


def _objects(state: CatalogState) -> tuple[Entry | ViewEntry | SinkEntry | SecretEntry, ...]:
    """Every named object: collections, views, sinks and secrets."""
    return (*state.entries(), *state.views, *state.sinks, *state.secrets)


def _check_fresh(state: CatalogState, id: object) -> GlobalId:
    if not isinstance(id, GlobalId) or id.namespace != "u":
        raise InvalidCatalogOp(f"catalog ids are user GlobalIds like u7, got {id!r}")
    if any(e.id == id for e in _objects(state)):
        raise DuplicateCatalogId(f"id {id} is in use")
    if id.value < state.next_user_id:
        raise DuplicateCatalogId(
            f"id {id} is not fresh: ids are never reused (next user id is u{state.next_user_id})"
        )
    return id


def _check_new_name(state: CatalogState, name: str) -> None:
    for e in _objects(state):
        if e.name == name:
            raise DuplicateCatalogName(name, _kind(e))


_KINDS: dict[type, str] = {
    TableEntry: "table",
    ViewEntry: "view",
    IndexEntry: "index",
    MaterializedViewEntry: "materialized view",
    SourceEntry: "source",
    ProgressEntry: "progress collection",
    SystemCollectionEntry: "system collection",
    SinkEntry: "sink",
    SecretEntry: "secret",
}


def _kind(e: Entry | ViewEntry | SinkEntry | SecretEntry) -> str:
    return _KINDS[type(e)]


def _check_object(state: CatalogState, id: object, what: str) -> GlobalId:
    """``id``, the id of a collection, a view or a sink of the catalog."""
    if not isinstance(id, GlobalId):
        raise InvalidCatalogOp(f"{what} must be a GlobalId, got {id!r}")
    if state.view(id) is None and state.sink(id) is None and state.secret(id) is None:
        state.get(id)
    return id


def _check_plan(state: CatalogState, plan: object, what: str) -> Schema:
    """Typecheck ``plan`` against the catalog's objects; returns its output schema."""
    try:
        reads = gets(plan)  # type: ignore[arg-type]
        sources: dict[GlobalId, Schema] = {}
        for gid in reads:  # collections only: a view is read by inlining its plan
            state.get(gid)
            sources[gid] = state.schema_of(gid)
        return typecheck(plan, sources)  # type: ignore[arg-type]
    except UnknownCatalogObject as e:
        raise UnknownCatalogObject(f"{what} reads an unknown object: {e}") from None
    except PlanError as e:
        raise InvalidCatalogOp(f"{what}: invalid plan: {e}") from e
    except (AttributeError, TypeError) as e:
        raise InvalidCatalogOp(f"{what}: not a plan: {plan!r}") from e


def _with_entry(
    state: CatalogState, e: Entry | ViewEntry | SinkEntry | SystemCollectionEntry | SecretEntry
) -> CatalogState:
    key = _by_id
    if isinstance(e, SystemCollectionEntry):  # a system id: the user ids go on as they were
        return replace(
            state, system_collections=tuple(sorted((*state.system_collections, e), key=key))
        )
    nxt = max(state.next_user_id, e.id.value + 1)
    if isinstance(e, SourceEntry):
        return replace(state, sources=tuple(sorted((*state.sources, e), key=key)), next_user_id=nxt)
    if isinstance(e, ProgressEntry):
        progress = tuple(sorted((*state.progress, e), key=key))
        return replace(state, progress=progress, next_user_id=nxt)
    if isinstance(e, SinkEntry):
        return replace(state, sinks=tuple(sorted((*state.sinks, e), key=key)), next_user_id=nxt)
    if isinstance(e, SecretEntry):
        secrets = tuple(sorted((*state.secrets, e), key=key))
        return replace(state, secrets=secrets, next_user_id=nxt)
    if isinstance(e, ViewEntry):
        return replace(state, views=tuple(sorted((*state.views, e), key=key)), next_user_id=nxt)
    if isinstance(e, TableEntry):
        return replace(state, tables=tuple(sorted((*state.tables, e), key=key)), next_user_id=nxt)
    if isinstance(e, IndexEntry):
        return replace(state, indexes=tuple(sorted((*state.indexes, e), key=key)), next_user_id=nxt)
    mvs = tuple(sorted((*state.materialized_views, e), key=key))
    return replace(state, materialized_views=mvs, next_user_id=nxt)


def _by_id(e: Entry | ViewEntry | SinkEntry | SecretEntry) -> tuple[int, int]:
    return e.id.sort_key


def apply_op(state: CatalogState, op: CatalogOp) -> CatalogState:
    """``state`` after ``op``; raises a typed error (see the module docstring) if ``op`` is invalid."""
    bad = find_invalid_text(op)  # names, columns, plans, definitions, connections
    if bad is not None:
        at = surrogate_at(bad)
        where = "" if at is None else f": {surrogate_text(bad, at)}"
        raise InvalidText(f"{type(op).__name__} holds text that is not valid Unicode{where}")
    if isinstance(op, CreateTable):
        name = _check_name(op.name, "table")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        if not isinstance(op.schema, Schema):
            raise InvalidCatalogOp(f"table {name!r}: schema must be a Schema, got {op.schema!r}")
        return _with_entry(state, TableEntry(name, gid, op.schema))
    if isinstance(op, CreateIndex):
        name = _check_name(op.name, "index")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        schema = _check_plan(state, op.plan, f"index {name!r}")
        keys = tuple(op.keys) if isinstance(op.keys, (tuple, list)) else None
        if keys is None or any(type(k) is not int or not 0 <= k < schema.arity for k in keys):
            raise InvalidCatalogOp(
                f"index {name!r}: keys {keys!r} must be column positions below {schema.arity}"
            )
        if op.on is not None:
            _check_object(state, op.on, f"index {name!r}: on")
        _check_placement(state, op.plan, op.cluster, f"index {name!r}")
        return _with_entry(state, IndexEntry(name, gid, op.plan, keys, op.on, op.cluster))
    if isinstance(op, CreateMaterializedView):
        name = _check_name(op.name, "materialized view")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        _check_plan(state, op.plan, f"materialized view {name!r}")
        views = op.views
        if not isinstance(views, tuple):
            raise InvalidCatalogOp(f"materialized view {name!r}: views must be a tuple")
        for v in views:
            if not isinstance(v, GlobalId) or state.view(v) is None:
                raise UnknownCatalogObject(
                    f"materialized view {name!r} is defined on {v!r}, not a view"
                )
        _check_placement(state, op.plan, op.cluster, f"materialized view {name!r}")
        return _with_entry(state, MaterializedViewEntry(name, gid, op.plan, views, op.cluster))
    if isinstance(op, CreateView):
        name = _check_name(op.name, "view")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        _check_plan(state, op.plan, f"view {name!r}")
        if not isinstance(op.views, tuple):
            raise InvalidCatalogOp(f"view {name!r}: views must be a tuple, got {op.views!r}")
        for v in op.views:
            if not isinstance(v, GlobalId) or state.view(v) is None:
                raise UnknownCatalogObject(f"view {name!r} is defined on {v!r}, not a view")
        return _with_entry(state, ViewEntry(name, gid, op.plan, op.views))
    if isinstance(op, CreateSecret):
        name = _check_name(op.name, "secret")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        return _with_entry(state, SecretEntry(name, gid))
    if isinstance(op, CreateSource):
        return _create_source(state, op)
    if isinstance(op, CreateSink):
        return _create_sink(state, op)
    if isinstance(op, CreateSystemCollection):
        return _create_system_collection(state, op)
    if isinstance(op, SetStorageReplica):
        return replace(state, storage_replica=_storage_replica(op))
    if isinstance(op, SetDefinition):
        _check_object(state, op.id, "a definition's id")
        if not isinstance(op.sql, str) or not op.sql.strip():
            raise InvalidCatalogOp(f"the definition of {op.id} must be SQL text, got {op.sql!r}")
        definitions = dict(state.definitions)
        definitions[op.id] = op.sql
        return replace(state, definitions=_sorted_by_id(definitions))
    if isinstance(op, CreateReplica):
        if op.name == STORAGE_REPLICA:
            raise InvalidCatalogOp(
                f"replica name {STORAGE_REPLICA!r} is reserved for the storage instance's replica"
            )
        return replace(
            state, replicas=tuple(sorted((*state.replicas, _replica(state, op)), key=_by_name))
        )
    if isinstance(op, AlterReplica):
        old = state.replica(op.name, op.cluster)
        others = replace(state, replicas=tuple(r for r in state.replicas if r is not old))
        entry = _replica(others, CreateReplica(*_replica_fields(op)))
        replicas = tuple(entry if r is old else r for r in state.replicas)
        return replace(state, replicas=replicas)
    if isinstance(op, Drop):
        return _drop(state, op)
    if isinstance(op, DropReplica):
        old = state.replica(op.name, op.cluster)
        return replace(state, replicas=tuple(r for r in state.replicas if r is not old))
    if isinstance(op, CreateCluster):
        return _create_cluster(state, op)
    if isinstance(op, AlterCluster):
        return _alter_cluster(state, op)
    if isinstance(op, DropCluster):
        return _drop_cluster(state, op)
    if isinstance(op, AlterSink):
        return _alter_sink(state, op)
    if isinstance(op, ForgetReplicationSlot):
        kept = tuple(
            x
            for x in state.slots_to_drop
            if (x.connection.url, x.connection.slot) != (op.url, op.slot)
        )
        return replace(state, slots_to_drop=kept)
    if isinstance(op, SetReadPolicy):
        if state.sink(op.id) is not None:
            raise InvalidCatalogOp(f"sink {op.id} has no read policy: it holds what it writes out")
        state.get(op.id)
        policies = dict(state.read_policies)
        if op.policy is None:
            policies.pop(op.id, None)
        else:
            policy_to_dict(op.policy)  # only policies the catalog can store
            policies[op.id] = op.policy
        return replace(state, read_policies=_sorted_policies(policies))
    raise InvalidCatalogOp(f"not a catalog op: {op!r}")


def apply_ops(state: CatalogState, ops: Iterable[CatalogOp]) -> CatalogState:
    """``state`` after every op in order (all or nothing: the first invalid op raises)."""
    for op in ops:
        state = apply_op(state, op)
    return state


def _by_name(r: ReplicaEntry) -> tuple[str, str]:
    return r.cluster, r.name


def _sorted_policies(
    policies: Mapping[GlobalId, ReadPolicy],
) -> tuple[tuple[GlobalId, ReadPolicy], ...]:
    return tuple(sorted(policies.items(), key=lambda kv: kv[0].sort_key))


def _sorted_by_id(texts: Mapping[GlobalId, str]) -> tuple[tuple[GlobalId, str], ...]:
    return tuple(sorted(texts.items(), key=lambda kv: kv[0].sort_key))


def _replica_fields(
    op: AlterReplica,
) -> tuple[str, bool, str | None, str | None, str, str, str | None]:
    return op.name, op.managed, op.address, op.spark_master, op.executor, op.cluster, op.size


def _check_cluster_name(name: object, what: str) -> str:
    """A name a replica's id and process files can be made of: ``[A-Za-z0-9_-]``, no dot."""
    text = _check_name(name, what)
    if not all(c.isascii() and (c.isalnum() or c in "_-") for c in text) or text[0] == "-":
        raise InvalidCatalogOp(
            f"{what} names are [A-Za-z0-9_-]+ (not starting with -), got {text!r}"
        )
    return text


def _replica(state: CatalogState, op: CreateReplica) -> ReplicaEntry:
    name = _check_name(op.name, "replica")
    if not isinstance(op.cluster, str) or not state.has_cluster(op.cluster):
        raise UnknownCatalogObject(f"replica {name!r}: unknown cluster {op.cluster!r}")
    if op.cluster != DEFAULT_CLUSTER:
        _check_cluster_name(name, "replica")
    if any(r.name == name and r.cluster == op.cluster for r in state.replicas):
        raise DuplicateCatalogName(name, "replica")
    new_id = replica_id(op.cluster, name)
    if any(r.id == new_id for r in state.replicas if r.cluster != op.cluster):
        raise DuplicateCatalogName(new_id, "replica")  # default's "c.r1" and c's "r1"
    if op.size is not None and (not isinstance(op.size, str) or not op.size):
        raise InvalidCatalogOp(f"replica {name!r}: a size is a non-empty name, got {op.size!r}")
    if type(op.managed) is not bool:
        raise InvalidCatalogOp(f"replica {name!r}: managed must be a bool, got {op.managed!r}")
    if op.managed:
        if op.address is not None:
            raise InvalidCatalogOp(
                f"replica {name!r}: a managed replica's address is chosen by the orchestrator"
            )
        if op.executor not in EXECUTORS:
            raise InvalidCatalogOp(
                f"replica {name!r}: executor must be one of {EXECUTORS}, got {op.executor!r}"
            )
        master = "local[1]" if op.spark_master is None else op.spark_master
        if not isinstance(master, str) or not master:
            raise InvalidCatalogOp(f"replica {name!r}: bad spark master {master!r}")
        return ReplicaEntry(name, True, None, master, op.executor, op.cluster, op.size)
    if not isinstance(op.address, str) or not op.address or op.spark_master is not None:
        raise InvalidCatalogOp(
            f"replica {name!r}: an unmanaged replica needs an address (host:port) and no spark master"
        )
    return ReplicaEntry(name, False, op.address, None, op.executor, op.cluster, op.size)


def _check_placement(state: CatalogState, plan: object, cluster: object, what: str) -> None:
    """``cluster`` exists, and the indexes ``plan`` reads are maintained there: an index is
    readable only in its own cluster (a materialized view, through storage, from any)."""
    if not isinstance(cluster, str) or not state.has_cluster(cluster):
        raise UnknownCatalogObject(f"{what}: unknown cluster {cluster!r}")
    for gid in gets(plan):  # type: ignore[arg-type]
        e = state.get(gid)
        if isinstance(e, IndexEntry) and e.cluster != cluster:
            raise InvalidCatalogOp(
                f"{what} runs in cluster {cluster!r} but reads index {e.name!r} of cluster "
                f"{e.cluster!r}: an index is readable only in its own cluster"
            )


def _create_cluster(state: CatalogState, op: CreateCluster) -> CatalogState:
    name = _check_cluster_name(op.name, "cluster")
    if state.has_cluster(name):
        raise DuplicateCatalogName(name, "cluster")
    if type(op.managed) is not bool:
        raise InvalidCatalogOp(f"cluster {name!r}: managed must be a bool, got {op.managed!r}")
    if op.size is not None and (not isinstance(op.size, str) or not op.size):
        raise InvalidCatalogOp(f"cluster {name!r}: a size is a non-empty name, got {op.size!r}")
    factor = op.replication_factor
    if op.managed:
        if type(factor) is not int or factor < 0:
            raise InvalidCatalogOp(
                f"cluster {name!r}: the replication factor is an int >= 0, got {factor!r}"
            )
    elif factor is not None or op.size is not None:
        raise InvalidCatalogOp(
            f"cluster {name!r}: an unmanaged cluster has no size or replication factor "
            "(each of its replicas has its own size)"
        )
    entry = ClusterEntry(name, f"u{state.next_cluster_id}", op.managed, op.size, factor)
    clusters = tuple(sorted((*state.clusters, entry), key=lambda c: c.name))
    return replace(state, clusters=clusters, next_cluster_id=state.next_cluster_id + 1)


def _alter_cluster(state: CatalogState, op: AlterCluster) -> CatalogState:
    old = state.cluster(op.name)
    if not old.managed:
        raise InvalidCatalogOp(
            f"cluster {op.name!r} is unmanaged: its replicas are created and dropped one by one"
        )
    if type(op.replication_factor) is not int or op.replication_factor < 0:
        raise InvalidCatalogOp(
            f"cluster {op.name!r}: the replication factor is an int >= 0, "
            f"got {op.replication_factor!r}"
        )
    if op.size is not None and (not isinstance(op.size, str) or not op.size):
        raise InvalidCatalogOp(f"cluster {op.name!r}: a size is a non-empty name, got {op.size!r}")
    new = replace(old, size=op.size, replication_factor=op.replication_factor)
    return replace(state, clusters=tuple(new if c is old else c for c in state.clusters))


def _drop_cluster(state: CatalogState, op: DropCluster) -> CatalogState:
    entry = state.cluster(op.name)
    placed = state.cluster_objects(op.name)
    if placed and not op.cascade:
        raise ClusterNotEmpty(op.name, placed, tuple(state.get(g).name for g in placed))
    for gid in placed:
        if gid in state.cluster_objects(op.name):  # not dropped with an earlier one
            state = _drop(state, Drop(gid, cascade=True))
    return replace(
        state,
        clusters=tuple(c for c in state.clusters if c is not entry),
        replicas=tuple(r for r in state.replicas if r.cluster != op.name),
    )


def _alter_sink(state: CatalogState, op: AlterSink) -> CatalogState:
    sink = state.sink(op.id) if isinstance(op.id, GlobalId) else None
    if sink is None:
        raise UnknownCatalogObject(f"no sink with id {op.id!r}")
    if not isinstance(op.from_id, GlobalId):
        raise InvalidCatalogOp(f"sink {sink.name!r}: from must be a GlobalId, got {op.from_id!r}")
    what: Entry | ViewEntry | SinkEntry | None = state.view(op.from_id) or state.sink(op.from_id)
    if what is None:
        what = state.get(op.from_id)
    if not isinstance(what, STORAGE_ENTRIES):
        raise InvalidCatalogOp(
            f"sink {sink.name!r}: {what.name} is a {_kind(what)}; a sink writes out a table, "
            "materialized view or source (a collection with a shard of its own)"
        )
    if state.schema_of(op.from_id) != state.schema_of(sink.from_id):
        raise InvalidCatalogOp(
            f"sink {sink.name!r}: {what.name} has schema {state.schema_of(op.from_id)}, but the "
            f"sink writes {state.schema_of(sink.from_id)}: the new relation must have its schema"
        )
    new = replace(sink, from_id=op.from_id)
    return replace(
        state,
        sinks=tuple(new if k is sink else k for k in state.sinks),
        definitions=tuple(kv for kv in state.definitions if kv[0] != op.id),
    )


def _secret_id(state: CatalogState, connection: PostgresSource) -> GlobalId | None:
    """The id of the secret ``connection``'s password comes from (kept for its slot's drop)."""
    if connection.password_secret is None:
        return None
    secret = state.secret(connection.password_secret)
    return None if secret is None else secret.id


def _drop(state: CatalogState, op: Drop) -> CatalogState:
    _check_object(state, op.id, "drop needs an object: its id")
    target = next((e for e in state.entries() if e.id == op.id), None)
    if isinstance(target, SystemCollectionEntry):
        raise InvalidCatalogOp(f"{target.name} is a system collection: it cannot be dropped")
    if isinstance(target, ProgressEntry):
        raise InvalidCatalogOp(
            f"{target.name} is the progress collection of source {target.source}: drop the source"
        )
    doomed = {op.id, *state.owned(op.id)}
    frontier = list(doomed)
    while frontier:
        gid = frontier.pop()
        for d in state.dependents(gid):
            if d not in doomed:
                if not op.cascade:
                    raise HasDependents(op.id, _dependents(state, op.id))
                doomed.add(d)
                doomed.update(state.owned(d))
                frontier.extend([d, *state.owned(d)])
    slots = tuple(
        SlotToDrop(e.name, e.connection, _secret_id(state, e.connection))
        for e in state.sources
        if e.id in doomed and isinstance(e.connection, PostgresSource)
    )
    return replace(
        state,
        slots_to_drop=(*state.slots_to_drop, *slots),
        tables=tuple(e for e in state.tables if e.id not in doomed),
        indexes=tuple(e for e in state.indexes if e.id not in doomed),
        materialized_views=tuple(e for e in state.materialized_views if e.id not in doomed),
        views=tuple(e for e in state.views if e.id not in doomed),
        sources=tuple(e for e in state.sources if e.id not in doomed),
        progress=tuple(e for e in state.progress if e.id not in doomed),
        sinks=tuple(e for e in state.sinks if e.id not in doomed),
        secrets=tuple(e for e in state.secrets if e.id not in doomed),
        read_policies=tuple(kv for kv in state.read_policies if kv[0] not in doomed),
        definitions=tuple(kv for kv in state.definitions if kv[0] not in doomed),
    )


def _dependents(state: CatalogState, id: GlobalId) -> tuple[GlobalId, ...]:
    """What reads ``id`` or an object it owns (a source's progress collection), directly."""
    found = {d for g in (id, *state.owned(id)) for d in state.dependents(g)}
    return tuple(sorted(found - {id, *state.owned(id)}, key=lambda g: g.sort_key))


def _check_schema(schema: object, what: str) -> Schema:
    if not isinstance(schema, Schema) or not schema.columns:
        raise InvalidCatalogOp(f"{what}: the schema must be a Schema of at least one column")
    return schema


def _create_source(state: CatalogState, op: CreateSource) -> CatalogState:
    name = _check_name(op.name, "source")
    progress = _check_name(f"{name}_progress", "source progress collection")
    gid = _check_fresh(state, op.id)
    remap = _check_fresh(state, op.remap_id)
    if remap == gid:
        raise InvalidCatalogOp(f"source {name!r}: its remap collection needs an id of its own")
    _check_new_name(state, name)
    _check_new_name(state, progress)
    schema = _check_schema(op.schema, f"source {name!r}")
    conn = op.connection
    if isinstance(conn, LoadGenerator):
        try:
            expected = loadgen_schema(conn)
        except InvalidUsage as e:
            raise InvalidCatalogOp(f"source {name!r}: {e}") from None
        if schema != expected:
            raise InvalidCatalogOp(
                f"source {name!r}: a {conn.kind} load generator's rows are {expected}, not {schema}"
            )
    elif isinstance(conn, PostgresSource):
        for field in ("url", "table", "publication", "slot"):
            value = getattr(conn, field)
            if not isinstance(value, str) or not value:
                raise InvalidCatalogOp(f"source {name!r}: the {field} must be a non-empty string")
        _check_password(state, conn.url, conn.password_secret, f"source {name!r}")
        for other in state.sources:
            c = other.connection
            if isinstance(c, PostgresSource) and c.url == conn.url and c.slot == conn.slot:
                raise InvalidCatalogOp(
                    f"source {name!r}: replication slot {conn.slot!r} is source "
                    f"{other.name!r}'s (each source needs a slot of its own)"
                )
    elif isinstance(conn, SimulatedSource):
        if not isinstance(conn.name, str) or not conn.name:
            raise InvalidCatalogOp(f"source {name!r}: a simulated source needs a name")
    else:
        raise InvalidCatalogOp(
            f"source {name!r}: not a source connection (LoadGenerator, PostgresSource): {conn!r}"
        )
    state = _with_entry(state, SourceEntry(name, gid, conn, schema, remap))
    return _with_entry(state, ProgressEntry(progress, remap, gid))


def _create_sink(state: CatalogState, op: CreateSink) -> CatalogState:
    name = _check_name(op.name, "sink")
    gid = _check_fresh(state, op.id)
    _check_new_name(state, name)
    if not isinstance(op.from_id, GlobalId):
        raise InvalidCatalogOp(f"sink {name!r}: from must be a GlobalId, got {op.from_id!r}")
    what: Entry | ViewEntry | SinkEntry | None = state.view(op.from_id) or state.sink(op.from_id)
    if what is None:
        try:
            what = state.get(op.from_id)
        except UnknownCatalogObject:
            raise UnknownCatalogObject(
                f"sink {name!r} writes out {op.from_id}, which is not in the catalog"
            ) from None
    if not isinstance(what, STORAGE_ENTRIES):
        assert what is not None
        raise InvalidCatalogOp(
            f"sink {name!r}: {what.name} is a {_kind(what)}; a sink writes out a table, "
            "materialized view or source (a collection with a shard of its own)"
        )
    if not isinstance(op.connection, IcebergSink | SimulatedSink):
        raise InvalidCatalogOp(
            f"sink {name!r}: not a sink connection (IcebergSink): {op.connection!r}"
        )
    if isinstance(op.connection, IcebergSink):
        c = op.connection
        _check_password(state, c.catalog_url, c.password_secret, f"sink {name!r}")
    return _with_entry(state, SinkEntry(name, gid, op.from_id, op.connection))


def _check_password(state: CatalogState, url: str, secret: str | None, what: str) -> None:
    """A connection's password comes from a secret the catalog has, never from its URL: the
    URL is stored and shown (SHOW CREATE, describe, status), a secret's value is not."""
    if has_password(url):
        raise InvalidCatalogOp(
            f"{what}: the connection URL holds a password, which would be stored and shown in "
            "clear: CREATE SECRET name AS '...' and give PASSWORD SECRET name instead"
        )
    if secret is not None and state.secret(secret) is None:
        raise UnknownCatalogObject(f"{what}: no secret named {secret!r} (CREATE SECRET it first)")


def _create_system_collection(state: CatalogState, op: CreateSystemCollection) -> CatalogState:
    name = _check_name(op.name, "system collection")
    if not isinstance(op.id, GlobalId) or op.id.namespace != "s":
        raise InvalidCatalogOp(f"system collections have system ids like s1, got {op.id!r}")
    if any(e.id == op.id for e in _objects(state)):
        raise DuplicateCatalogId(f"id {op.id} is in use")
    if op.kind not in MANAGED_KINDS:
        raise InvalidCatalogOp(f"{op.kind!r} is not a storage-managed collection kind")
    if state.system_collection(op.kind) is not None:
        raise InvalidCatalogOp(f"the catalog has its {op.kind} collection already")
    _check_new_name(state, name)
    return _with_entry(state, SystemCollectionEntry(name, op.id, op.kind))


def _storage_replica(op: SetStorageReplica) -> StorageReplicaEntry:
    if type(op.managed) is not bool:
        raise InvalidCatalogOp(f"storage replica: managed must be a bool, got {op.managed!r}")
    if op.managed:
        if op.address is not None:
            raise InvalidCatalogOp(
                "storage replica: a managed replica's address is chosen by the orchestrator"
            )
        return StorageReplicaEntry(True, None)
    if not isinstance(op.address, str) or not op.address:
        raise InvalidCatalogOp("storage replica: an unmanaged replica needs an address (host:port)")
    return StorageReplicaEntry(False, op.address)
