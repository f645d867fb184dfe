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

* Tables, indexes and materialized views share one namespace of names;
  replicas have their own (created, altered to a new spec, dropped).
  Names are non-empty and unpadded.
* Ids are user ids (``u7``) and *fresh*: at least ``next_user_id``, so an id
  is never reused, even after a drop (a reader of an old id can never see a
  new object). Creating an object moves ``next_user_id`` past its id.
* A plan may read tables, materialized views and indexes of the catalog, each
  with the catalog's schema for it. An index is built by its own dataflow,
  which builds object ``id`` from its plan and exports it arranged by ``keys``;
  ``on`` optionally names the catalog object it indexes (then a dependency).
* Dropping an object others read is refused (:class:`HasDependents`) unless
  ``cascade=True``, which drops every transitive dependent too. A drop
  removes the dropped objects' read policies.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from tidegate.spec.compute.as_of_selection import select_as_ofs
from tidegate.spec.errors import InvalidId, PlanError
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    Plan,
    Schema,
    gets,
    plan_from_dict,
    plan_to_dict,
    schema_from_dict,
    schema_to_dict,
    typecheck,
)
from tidegate.spec.protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
)
from tidegate.spec.shard import Consensus, VersionedData

from .errors import (
    CatalogConflict,
    CatalogDecodeError,
    DuplicateCatalogId,
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)

__all__ = [
    "CATALOG_FORMAT_VERSION",
    "DEFAULT_CATALOG_KEY",
    "EXECUTORS",
    "AlterReplica",
    "Catalog",
    "CatalogOp",
    "CatalogState",
    "CreateIndex",
    "CreateMaterializedView",
    "CreateReplica",
    "CreateTable",
    "Drop",
    "DropReplica",
    "IndexEntry",
    "MaterializedViewEntry",
    "ReplicaEntry",
    "RestorePlan",
    "SetReadPolicy",
    "StorageCollection",
    "TableEntry",
    "apply_op",
    "apply_ops",
    "dataflow_for",
    "decode_state",
    "encode_state",
    "policy_from_dict",
    "policy_to_dict",
    "restore_plan",
]

CATALOG_FORMAT_VERSION = 1
DEFAULT_CATALOG_KEY = "tidegate/catalog"
EXECUTORS = ("spark", "python")
"""The executors a managed replica may run."""

# -- state ------------------------------------------------------------------------------------


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

    @property
    def next_id(self) -> GlobalId:
        """The id the next created object should take (``u{next_user_id}``)."""
        return GlobalId.user(self.next_user_id)

    def entries(self) -> list[Entry]:
        """Every table, index and materialized view, by id."""
        out: list[Entry] = [*self.tables, *self.indexes, *self.materialized_views]
        return sorted(out, key=lambda e: e.id.sort_key)

    def get(self, id: GlobalId) -> Entry:
        """The object with ``id`` (:class:`UnknownCatalogObject` if none)."""
        for e in self.entries():
            if e.id == id:
                return e
        raise UnknownCatalogObject(f"no catalog object with id {id}")

    def by_name(self, name: str) -> Entry:
        """The object named ``name`` (:class:`UnknownCatalogObject` if none)."""
        for e in self.entries():
            if e.name == name:
                return e
        raise UnknownCatalogObject(f"no catalog object named {name!r}")

    def replica(self, name: str) -> ReplicaEntry:
        """The replica named ``name`` (:class:`UnknownCatalogObject` if none)."""
        for r in self.replicas:
            if r.name == name:
                return r
        raise UnknownCatalogObject(f"no replica named {name!r}")

    def schema_of(self, id: GlobalId) -> Schema:
        """The schema of object ``id``'s rows."""
        e = self.get(id)
        return e.schema if isinstance(e, TableEntry) else typecheck(e.plan)

    def read_policy(self, id: GlobalId) -> ReadPolicy | None:
        """The read policy set for ``id``, if any."""
        return dict(self.read_policies).get(id)

    def dependencies(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The catalog objects object ``id`` reads (sorted)."""
        return _dependencies(self.get(id))

    def dependents(self, id: GlobalId) -> tuple[GlobalId, ...]:
        """The objects that read ``id`` directly (sorted)."""
        return tuple(e.id for e in self.entries() if id in _dependencies(e))


def _dependencies(e: Entry) -> tuple[GlobalId, ...]:
    if isinstance(e, TableEntry):
        return ()
    deps = set(gets(e.plan))
    if isinstance(e, IndexEntry) and e.on is not None:
        deps.add(e.on)
    return tuple(sorted(deps, key=lambda g: g.sort_key))


# -- ops -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTable:
    name: str
    id: GlobalId
    schema: Schema


@dataclass(frozen=True, slots=True)
class CreateIndex:
    name: str
    id: GlobalId
    plan: Plan
    keys: tuple[int, ...] = ()
    on: GlobalId | None = None


@dataclass(frozen=True, slots=True)
class CreateMaterializedView:
    name: str
    id: GlobalId
    plan: Plan


@dataclass(frozen=True, slots=True)
class CreateReplica:
    """Add a replica; managed replicas default to ``spark_master="local[1]"``."""

    name: str
    managed: bool = True
    address: str | None = None
    spark_master: str | None = None
    executor: str = "spark"


@dataclass(frozen=True, slots=True)
class Drop:
    """Drop object ``id`` (and, with ``cascade``, everything that reads it)."""

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


@dataclass(frozen=True, slots=True)
class DropReplica:
    name: str


@dataclass(frozen=True, slots=True)
class SetReadPolicy:
    """Set (or with ``None``, clear) the read policy of object ``id``."""

    id: GlobalId
    policy: ReadPolicy | None


CatalogOp: TypeAlias = (
    CreateTable
    | CreateIndex
    | CreateMaterializedView
    | CreateReplica
    | AlterReplica
    | Drop
    | DropReplica
    | SetReadPolicy
)


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name or name.strip() != name or not name.isprintable():
        raise InvalidCatalogOp(f"{what} name must be a non-empty, unpadded string, got {name!r}")
    return name


def _check_fresh(state: CatalogState, id: object) -> GlobalId:
    if not isinstance(id, GlobalId) or id.namespace != "u":
        raise InvalidCatalogOp(f"catalog ids are user GlobalIds like u7, got {id!r}")
    if any(e.id == id for e in state.entries()):
        raise DuplicateCatalogId(f"id {id} is in use")
    if id.value < state.next_user_id:
        raise DuplicateCatalogId(
            f"id {id} is not fresh: ids are never reused (next user id is u{state.next_user_id})"
        )
    return id


def _check_new_name(state: CatalogState, name: str) -> None:
    for e in state.entries():
        if e.name == name:
            raise DuplicateCatalogName(name, _kind(e))


def _kind(e: Entry) -> str:
    if isinstance(e, TableEntry):
        return "table"
    return "index" if isinstance(e, IndexEntry) else "materialized view"


def _check_plan(state: CatalogState, plan: object, what: str) -> Schema:
    """Typecheck ``plan`` against the catalog's objects; returns its output schema."""
    try:
        reads = gets(plan)  # type: ignore[arg-type]
        sources: dict[GlobalId, Schema] = {}
        for gid in reads:
            sources[gid] = state.schema_of(gid)
        return typecheck(plan, sources)  # type: ignore[arg-type]
    except UnknownCatalogObject as e:
        raise UnknownCatalogObject(f"{what} reads an unknown object: {e}") from None
    except PlanError as e:
        raise InvalidCatalogOp(f"{what}: invalid plan: {e}") from e
    except (AttributeError, TypeError) as e:
        raise InvalidCatalogOp(f"{what}: not a plan: {plan!r}") from e


def _with_entry(state: CatalogState, e: Entry) -> CatalogState:
    nxt = max(state.next_user_id, e.id.value + 1)
    key = _by_id
    if isinstance(e, TableEntry):
        return replace(state, tables=tuple(sorted((*state.tables, e), key=key)), next_user_id=nxt)
    if isinstance(e, IndexEntry):
        return replace(state, indexes=tuple(sorted((*state.indexes, e), key=key)), next_user_id=nxt)
    mvs = tuple(sorted((*state.materialized_views, e), key=key))
    return replace(state, materialized_views=mvs, next_user_id=nxt)


def _by_id(e: Entry) -> tuple[int, int]:
    return e.id.sort_key


def apply_op(state: CatalogState, op: CatalogOp) -> CatalogState:
    """``state`` after ``op``; raises a typed error (see the module docstring) if ``op`` is invalid."""
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
            if not isinstance(op.on, GlobalId):
                raise InvalidCatalogOp(f"index {name!r}: on must be a GlobalId, got {op.on!r}")
            state.get(op.on)
        return _with_entry(state, IndexEntry(name, gid, op.plan, keys, op.on))
    if isinstance(op, CreateMaterializedView):
        name = _check_name(op.name, "materialized view")
        gid = _check_fresh(state, op.id)
        _check_new_name(state, name)
        _check_plan(state, op.plan, f"materialized view {name!r}")
        return _with_entry(state, MaterializedViewEntry(name, gid, op.plan))
    if isinstance(op, CreateReplica):
        return replace(
            state, replicas=tuple(sorted((*state.replicas, _replica(state, op)), key=_by_name))
        )
    if isinstance(op, AlterReplica):
        state.replica(op.name)
        others = CatalogState(replicas=tuple(r for r in state.replicas if r.name != op.name))
        entry = _replica(others, CreateReplica(*_replica_fields(op)))
        replicas = tuple(entry if r.name == op.name else r for r in state.replicas)
        return replace(state, replicas=replicas)
    if isinstance(op, Drop):
        return _drop(state, op)
    if isinstance(op, DropReplica):
        state.replica(op.name)
        return replace(state, replicas=tuple(r for r in state.replicas if r.name != op.name))
    if isinstance(op, SetReadPolicy):
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


def _by_name(r: ReplicaEntry) -> str:
    return r.name


def _sorted_policies(
    policies: Mapping[GlobalId, ReadPolicy],
) -> tuple[tuple[GlobalId, ReadPolicy], ...]:
    return tuple(sorted(policies.items(), key=lambda kv: kv[0].sort_key))


def _replica_fields(op: AlterReplica) -> tuple[str, bool, str | None, str | None, str]:
    return op.name, op.managed, op.address, op.spark_master, op.executor


def _replica(state: CatalogState, op: CreateReplica) -> ReplicaEntry:
    name = _check_name(op.name, "replica")
    if any(r.name == name for r in state.replicas):
        raise DuplicateCatalogName(name, "replica")
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
        return ReplicaEntry(name, True, None, master, op.executor)
    if not isinstance(op.address, str) or not op.address or op.spark_master is not None:
        raise InvalidCatalogOp(
            f"replica {name!r}: an unmanaged replica needs an address (host:port) and no spark master"
        )
    return ReplicaEntry(name, False, op.address, None, op.executor)


def _drop(state: CatalogState, op: Drop) -> CatalogState:
    if not isinstance(op.id, GlobalId):
        raise InvalidCatalogOp(f"drop needs a GlobalId, got {op.id!r}")
    state.get(op.id)
    doomed = {op.id}
    frontier = [op.id]
    while frontier:
        gid = frontier.pop()
        for d in state.dependents(gid):
            if d not in doomed:
                if not op.cascade:
                    raise HasDependents(op.id, state.dependents(op.id))
                doomed.add(d)
                frontier.append(d)
    return replace(
        state,
        tables=tuple(e for e in state.tables if e.id not in doomed),
        indexes=tuple(e for e in state.indexes if e.id not in doomed),
        materialized_views=tuple(e for e in state.materialized_views if e.id not in doomed),
        read_policies=tuple(kv for kv in state.read_policies if kv[0] not in doomed),
    )


# -- JSON encoding --------------------------------------------------------------------------------


def _antichain_out(a: Antichain, what: str) -> list[int]:
    els = list(a.elements)
    if any(type(t) is not int for t in els):
        raise InvalidCatalogOp(f"{what}: the catalog stores int frontiers only, got {a!r}")
    return els


def policy_to_dict(p: ReadPolicy) -> dict[str, Any]:
    """A read policy as JSON-ready data (:class:`InvalidCatalogOp` for kinds it cannot store)."""
    if isinstance(p, ValidFrom):
        return {"kind": "valid_from", "frontier": _antichain_out(p.valid_from, "ValidFrom")}
    if isinstance(p, LagWriteFrontier):
        return {"kind": "lag_write_frontier", "lag": p.lag, "max_granularity": p.max_granularity}
    if isinstance(p, StepBack):
        return {"kind": "step_back"}
    if isinstance(p, NoPolicy):
        return {"kind": "no_policy", "initial_since": _antichain_out(p.initial_since, "NoPolicy")}
    if isinstance(p, Multiple):
        return {"kind": "multiple", "policies": [policy_to_dict(q) for q in p.policies]}
    raise InvalidCatalogOp(f"the catalog cannot store read policy {p!r}")


def policy_from_dict(d: Mapping[str, Any]) -> ReadPolicy:
    """Inverse of :func:`policy_to_dict`."""
    kind = d["kind"]
    if kind == "valid_from":
        return ValidFrom(Antichain(_ints(d["frontier"])))
    if kind == "lag_write_frontier":
        return LagWriteFrontier(_int(d["lag"]), _int(d["max_granularity"]))
    if kind == "step_back":
        return StepBack()
    if kind == "no_policy":
        return NoPolicy(Antichain(_ints(d["initial_since"])))
    if kind == "multiple":
        return Multiple(policy_from_dict(q) for q in d["policies"])
    raise ValueError(f"unknown read policy kind {kind!r}")


def _int(x: Any) -> int:
    if type(x) is not int:
        raise ValueError(f"expected an int, got {x!r}")
    return x


def _ints(xs: Any) -> list[int]:
    if not isinstance(xs, list):
        raise ValueError(f"expected a list of ints, got {xs!r}")
    return [_int(x) for x in xs]


def _opt_id(x: Any) -> GlobalId | None:
    return None if x is None else GlobalId.parse(x)


def encode_state(state: CatalogState) -> bytes:
    """``state`` as versioned JSON bytes (plans via the spec's plan serde)."""
    obj = {
        "version": CATALOG_FORMAT_VERSION,
        "next_user_id": state.next_user_id,
        "tables": [
            {"name": t.name, "id": str(t.id), "schema": schema_to_dict(t.schema)}
            for t in state.tables
        ],
        "indexes": [
            {
                "name": i.name,
                "id": str(i.id),
                "plan": plan_to_dict(i.plan),
                "keys": list(i.keys),
                "on": None if i.on is None else str(i.on),
            }
            for i in state.indexes
        ],
        "materialized_views": [
            {"name": m.name, "id": str(m.id), "plan": plan_to_dict(m.plan)}
            for m in state.materialized_views
        ],
        "replicas": [
            {
                "name": r.name,
                "managed": r.managed,
                "address": r.address,
                "spark_master": r.spark_master,
                "executor": r.executor,
            }
            for r in state.replicas
        ],
        "read_policies": [
            {"id": str(gid), "policy": policy_to_dict(p)} for gid, p in state.read_policies
        ],
    }
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def decode_state(data: bytes) -> CatalogState:
    """Inverse of :func:`encode_state`; :class:`CatalogDecodeError` for anything else."""
    try:
        obj = json.loads(data)
        version = obj.get("version")
        if version != CATALOG_FORMAT_VERSION:
            raise CatalogDecodeError(
                f"catalog format version {version!r} is not supported "
                f"(this build reads {CATALOG_FORMAT_VERSION})"
            )
        tables = tuple(
            TableEntry(t["name"], GlobalId.parse(t["id"]), schema_from_dict(t["schema"]))
            for t in obj["tables"]
        )
        indexes = tuple(
            IndexEntry(
                i["name"],
                GlobalId.parse(i["id"]),
                plan_from_dict(i["plan"]),
                tuple(_ints(i["keys"])),
                _opt_id(i["on"]),
            )
            for i in obj["indexes"]
        )
        mvs = tuple(
            MaterializedViewEntry(m["name"], GlobalId.parse(m["id"]), plan_from_dict(m["plan"]))
            for m in obj["materialized_views"]
        )
        replicas = tuple(
            ReplicaEntry(
                r["name"], bool(r["managed"]), r["address"], r["spark_master"], r["executor"]
            )
            for r in obj["replicas"]
        )
        policies = tuple(
            (GlobalId.parse(p["id"]), policy_from_dict(p["policy"])) for p in obj["read_policies"]
        )
        return CatalogState(tables, indexes, mvs, replicas, policies, _int(obj["next_user_id"]))
    except CatalogDecodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, InvalidId, PlanError) as e:
        raise CatalogDecodeError(f"unreadable catalog: {type(e).__name__}: {e}") from e


# -- the durable catalog ------------------------------------------------------------------------


class Catalog:
    """The catalog state kept in Consensus key ``key``; changed only by :meth:`apply`.

    Not thread-safe; one controller owns it. A second writer on the same key
    makes the loser's :meth:`apply` fail with :class:`CatalogConflict`.
    """

    def __init__(self, consensus: Consensus, *, key: str = DEFAULT_CATALOG_KEY) -> None:
        self._consensus = consensus
        self._key = key
        self._seqno: int | None = None
        self._state = CatalogState()
        self._loaded = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def state(self) -> CatalogState:
        """The state as of the last :meth:`load` or :meth:`apply` (loads on first use)."""
        if not self._loaded:
            self.load()
        return self._state

    @property
    def seqno(self) -> int | None:
        """The durable version the cached state came from (``None``: nothing written yet)."""
        return self._seqno

    def load(self) -> CatalogState:
        """Read the durable state (an empty catalog if none was written)."""
        head = self._consensus.head(self._key)
        state = CatalogState() if head is None else decode_state(head.data)
        self._seqno = None if head is None else head.seqno
        self._state, self._loaded = state, True
        return state

    def apply(self, ops: Sequence[CatalogOp]) -> CatalogState:
        """Apply ``ops`` atomically and durably; returns the new state.

        Invalid ops raise their typed error and nothing is written; if another
        writer committed since this catalog's last load or apply, raises
        :class:`CatalogConflict` (nothing applied; :meth:`load` and retry).
        """
        current = self.state
        new = apply_ops(current, ops)
        if not ops:
            return current
        data = encode_state(new)
        seqno = 0 if self._seqno is None else self._seqno + 1
        try:
            ok = self._consensus.compare_and_set(self._key, self._seqno, VersionedData(seqno, data))
        except Exception:
            # The outcome is unknown: look. If the store cannot say either, the error stands
            # (nothing changed here) and a retry finds out (below).
            if not self._landed(seqno, data):
                raise
            ok = True
        # Not applied now, but an earlier attempt whose answer was lost may have landed it.
        if not ok and not self._landed(seqno, data):
            head = self._consensus.head(self._key)
            raise CatalogConflict(self._key, self._seqno, None if head is None else head.seqno)
        self._seqno, self._state = seqno, new
        with contextlib.suppress(Exception):  # housekeeping only: history is not needed
            self._consensus.truncate(self._key, seqno)
        return new

    def _landed(self, seqno: int, data: bytes) -> bool:
        """Whether version ``seqno`` with ``data`` is durable (a write whose answer was lost)."""
        head = self._consensus.head(self._key)
        return head is not None and head.seqno == seqno and head.data == data

    def restore_plan(
        self,
        frontiers: Mapping[GlobalId, tuple[Antichain, Antichain]] | None = None,
        *,
        current_time: int | None = None,
        read_only: bool = False,
    ) -> RestorePlan:
        """:func:`restore_plan` of the current state."""
        return restore_plan(self.state, frontiers, current_time=current_time, read_only=read_only)


# -- restore ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StorageCollection:
    """A storage collection the controller must (re)create: a table or a materialized view's output."""

    id: GlobalId
    name: str
    kind: Literal["table", "materialized_view"]
    schema: Schema


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a (re)starting controller must create, in this order.

    ``storage_collections``: tables, then materialized-view outputs (by id).
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
        for d in _dependencies(entries[gid]):
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
    if isinstance(e, TableEntry):
        raise InvalidCatalogOp(f"{id} is a table: tables have no dataflow")
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
) -> RestorePlan:
    """What the controller must recreate for ``state`` (see :class:`RestorePlan`).

    With ``frontiers`` (every storage collection's ``(since, upper)`` from its
    shard) and ``current_time`` (e.g. the oracle's read timestamp), dataflows
    get as-ofs from :func:`~tidegate.spec.compute.as_of_selection.select_as_ofs`
    and their source imports carry the shards' uppers.
    """
    order = _dependency_order(state)
    collections = [
        StorageCollection(e.id, e.name, "table", e.schema)
        for e in order
        if isinstance(e, TableEntry)
    ] + [
        StorageCollection(e.id, e.name, "materialized_view", typecheck(e.plan))
        for e in order
        if isinstance(e, MaterializedViewEntry)
    ]
    dataflows = [dataflow_for(state, e.id) for e in order if not isinstance(e, TableEntry)]
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
        index_policies = {i.id: policies[i.id] for i in state.indexes if i.id in policies}
        selection = select_as_ofs(
            dataflows, frontiers, index_policies, current_time, read_only=read_only
        )
        dataflows = list(selection.dataflows)
        holds, failures = selection.storage_holds, selection.failures
    return RestorePlan(
        tuple(collections), tuple(dataflows), policies, state.replicas, holds, failures
    )
