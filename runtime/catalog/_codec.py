"""The catalog as versioned JSON: :func:`encode_catalog`, :func:`decode_catalog` and read policies.

One format version (:data:`CATALOG_FORMAT_VERSION`) is written; it and the
older ones are read (a version-1 catalog has no views, a version-2 one no
sources, sinks, system collections or storage replica). Plans and schemas go
through the spec's plan serde; source and sink connections are plain objects
tagged with their ``type``. The JSON is sealed with its SHA-256
(:mod:`tidegate.runtime.sealed`, as shard records are), so bit rot or a hand
edit that still parses is refused; a record written before sealing is read
as it is. Decoding anything else -- a newer version, a truncated or edited
document, a checksum that does not match -- is a
:class:`~tidegate.runtime.errors.CatalogDecodeError`, never a partial state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

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
from tidegate.spec.plan import plan_from_dict, plan_to_dict, schema_from_dict, schema_to_dict
from tidegate.spec.storage.connections import (
    SINK_COMMIT_INTERVAL_MS,
    SINK_PROGRESS_INTERVAL_MS,
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
    SourceConnection,
    StorageSinkConnection,
)

from ..errors import CatalogDecodeError, InvalidCatalogOp
from ..sealed import seal, unseal
from ._entries import (
    DEFAULT_CLUSTER,
    CatalogState,
    ClusterEntry,
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
)

__all__ = [
    "CATALOG_FORMAT_VERSION",
    "connection_from_dict",
    "connection_to_dict",
    "decode_catalog",
    "encode_catalog",
    "has_password",
    "policy_from_dict",
    "policy_to_dict",
]

CATALOG_FORMAT_VERSION = 3
"""The version of the JSON document :func:`encode_catalog` writes; :func:`decode_catalog` reads
it, version 2 (before sources, sinks and system collections) and version 1 (before views and
definitions)."""


_CONNINFO_PASSWORD = re.compile(r"(?:^|\s)password\s*=", re.IGNORECASE)


def has_password(url: str) -> bool:
    """Whether a connection URL (libpq URL or conninfo, SQLAlchemy URL) carries a password: in
    its netloc (``user:pw@host``), as a ``password=`` query parameter, or a conninfo keyword."""
    if _CONNINFO_PASSWORD.search(url):
        return True
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.password is not None:
        return True
    return any(k.lower() == "password" for k in parse_qs(parts.query, keep_blank_values=True))


def connection_to_dict(c: SourceConnection | StorageSinkConnection) -> dict[str, Any]:
    """A source or sink connection as JSON-ready data (``type`` says which)."""
    if isinstance(c, LoadGenerator):
        return {
            "type": "load_generator",
            "kind": c.kind,
            "tick_ms": c.tick_ms,
            "seed": c.seed,
            "max_cardinality": c.max_cardinality,
            "rows_per_tick": c.rows_per_tick,
        }
    if isinstance(c, PostgresSource):
        out: dict[str, Any] = {
            "type": "postgres",
            "url": c.url,
            "table": c.table,
            "publication": c.publication,
            "slot": c.slot,
        }
        if c.password_secret is not None:  # the secret's name; its value is kept apart
            out["password_secret"] = c.password_secret
        return out
    if isinstance(c, IcebergSink):
        out = {
            "type": "iceberg",
            "catalog_url": c.catalog_url,
            "warehouse": c.warehouse,
            "table": c.table,
            **_pacing_out(c),
        }
        if c.password_secret is not None:
            out["password_secret"] = c.password_secret
        return out
    if isinstance(c, SimulatedSource):
        return {"type": "simulated_source", "name": c.name}
    if isinstance(c, SimulatedSink):
        return {"type": "simulated_sink", "name": c.name, **_pacing_out(c)}
    raise InvalidCatalogOp(f"the catalog cannot store connection {c!r}")


def connection_from_dict(d: Mapping[str, Any]) -> SourceConnection | StorageSinkConnection:
    """Inverse of :func:`connection_to_dict`."""
    kind = d["type"]
    if kind == "load_generator":
        cardinality = d["max_cardinality"]
        return LoadGenerator(
            _text(d["kind"]),  # type: ignore[arg-type]
            _int(d["tick_ms"]),
            _int(d["seed"]),
            None if cardinality is None else _int(cardinality),
            _int(d["rows_per_tick"]),
        )
    secret = d.get("password_secret")
    if kind == "postgres":
        return PostgresSource(
            _text(d["url"]),
            _text(d["table"]),
            _text(d["publication"]),
            _text(d["slot"]),
            None if secret is None else _text(secret),
        )
    if kind == "iceberg":
        return IcebergSink(
            _text(d["catalog_url"]),
            _text(d["warehouse"]),
            _text(d["table"]),
            None if secret is None else _text(secret),
            **_pacing_in(d),
        )
    if kind == "simulated_source":
        return SimulatedSource(_text(d["name"]))
    if kind == "simulated_sink":
        return SimulatedSink(_text(d["name"]), **_pacing_in(d))
    raise ValueError(f"unknown connection type {kind!r}")


def _pacing_out(c: IcebergSink | SimulatedSink) -> dict[str, int]:
    return {
        "commit_interval_ms": c.commit_interval_ms,
        "progress_interval_ms": c.progress_interval_ms,
    }


def _pacing_in(d: Mapping[str, Any]) -> dict[str, int]:
    """A sink's intervals; a catalog written before sinks had them has the defaults."""
    return {
        "commit_interval_ms": _int(d.get("commit_interval_ms", SINK_COMMIT_INTERVAL_MS)),
        "progress_interval_ms": _int(d.get("progress_interval_ms", SINK_PROGRESS_INTERVAL_MS)),
    }


def _source_connection(d: Mapping[str, Any]) -> SourceConnection:
    c = connection_from_dict(d)
    if not isinstance(c, LoadGenerator | PostgresSource | SimulatedSource):
        raise ValueError(f"not a source connection: {d!r}")
    return c


def _postgres_connection(d: Mapping[str, Any]) -> PostgresSource:
    c = connection_from_dict(d)
    if not isinstance(c, PostgresSource):
        raise CatalogDecodeError(f"expected a PostgreSQL connection, got {d!r}")
    return c


def _sink_connection(d: Mapping[str, Any]) -> StorageSinkConnection:
    c = connection_from_dict(d)
    if not isinstance(c, IcebergSink | SimulatedSink):
        raise ValueError(f"not a sink connection: {d!r}")
    return c


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


def _text(x: Any) -> str:
    if type(x) is not str:
        raise ValueError(f"expected text, got {x!r}")
    return x


def _opt_id(x: Any) -> GlobalId | None:
    return None if x is None else GlobalId.parse(x)


def encode_catalog(state: CatalogState) -> bytes:
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
                "cluster": i.cluster,
            }
            for i in state.indexes
        ],
        "materialized_views": [
            {
                "name": m.name,
                "id": str(m.id),
                "plan": plan_to_dict(m.plan),
                **({"views": [str(g) for g in m.views]} if m.views else {}),
                "cluster": m.cluster,
            }
            for m in state.materialized_views
        ],
        "replicas": [
            {
                "name": r.name,
                "managed": r.managed,
                "address": r.address,
                "spark_master": r.spark_master,
                "executor": r.executor,
                "cluster": r.cluster,
                "size": r.size,
            }
            for r in state.replicas
        ],
        "clusters": [
            {
                "name": c.name,
                "id": c.id,
                "managed": c.managed,
                "size": c.size,
                "replication_factor": c.replication_factor,
            }
            for c in state.clusters
        ],
        "next_cluster_id": state.next_cluster_id,
        "slots_to_drop": [
            {
                "source": x.source,
                "connection": connection_to_dict(x.connection),
                **({"secret": str(x.secret)} if x.secret is not None else {}),
            }
            for x in state.slots_to_drop
        ],
        "read_policies": [
            {"id": str(gid), "policy": policy_to_dict(p)} for gid, p in state.read_policies
        ],
        "views": [
            {
                "name": v.name,
                "id": str(v.id),
                "plan": plan_to_dict(v.plan),
                "views": [str(g) for g in v.views],
            }
            for v in state.views
        ],
        "definitions": [{"id": str(gid), "sql": sql} for gid, sql in state.definitions],
        "sources": [
            {
                "name": x.name,
                "id": str(x.id),
                "connection": connection_to_dict(x.connection),
                "schema": schema_to_dict(x.schema),
                "remap_id": str(x.remap_id),
            }
            for x in state.sources
        ],
        "progress": [
            {"name": x.name, "id": str(x.id), "source": str(x.source)} for x in state.progress
        ],
        "sinks": [
            {
                "name": x.name,
                "id": str(x.id),
                "from": str(x.from_id),
                "connection": connection_to_dict(x.connection),
            }
            for x in state.sinks
        ],
        "system_collections": [
            {"name": x.name, "id": str(x.id), "kind": x.kind} for x in state.system_collections
        ],
        "storage_replica": None
        if state.storage_replica is None
        else {"managed": state.storage_replica.managed, "address": state.storage_replica.address},
    }
    if state.secrets:  # names and ids only: the values are kept apart (runtime/secrets.py)
        obj["secrets"] = [{"name": x.name, "id": str(x.id)} for x in state.secrets]
    return seal("catalog", json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def decode_catalog(data: bytes) -> CatalogState:
    """Inverse of :func:`encode_catalog`; :class:`CatalogDecodeError` for anything else (a
    record whose checksum fails included: see :mod:`tidegate.runtime.sealed`)."""
    try:
        obj = json.loads(unseal("catalog", data))
        version = obj.get("version")
        if version not in (1, 2, CATALOG_FORMAT_VERSION):
            raise CatalogDecodeError(
                f"catalog format version {version!r} is not supported "
                f"(this build reads 1 to {CATALOG_FORMAT_VERSION})"
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
                _text(i.get("cluster", DEFAULT_CLUSTER)),  # none before clusters
            )
            for i in obj["indexes"]
        )
        mvs = tuple(
            MaterializedViewEntry(
                m["name"],
                GlobalId.parse(m["id"]),
                plan_from_dict(m["plan"]),
                tuple(GlobalId.parse(g) for g in m.get("views", [])),  # none recorded before
                _text(m.get("cluster", DEFAULT_CLUSTER)),
            )
            for m in obj["materialized_views"]
        )
        replicas = tuple(
            ReplicaEntry(
                r["name"],
                bool(r["managed"]),
                r["address"],
                r["spark_master"],
                r["executor"],
                _text(r.get("cluster", DEFAULT_CLUSTER)),
                None if r.get("size") is None else _text(r["size"]),
            )
            for r in obj["replicas"]
        )
        clusters = (
            tuple(
                ClusterEntry(
                    _text(c["name"]),
                    _text(c["id"]),
                    bool(c["managed"]),
                    None if c["size"] is None else _text(c["size"]),
                    None if c["replication_factor"] is None else _int(c["replication_factor"]),
                )
                for c in obj["clusters"]
            )
            if "clusters" in obj
            else (ClusterEntry(DEFAULT_CLUSTER),)  # a catalog from before clusters
        )
        slots = tuple(
            SlotToDrop(
                _text(x["source"]),
                _postgres_connection(x["connection"]),
                _opt_id(x.get("secret")),  # none recorded before the secret was kept
            )
            for x in obj.get("slots_to_drop", [])
        )
        policies = tuple(
            (GlobalId.parse(p["id"]), policy_from_dict(p["policy"])) for p in obj["read_policies"]
        )
        views = tuple(
            ViewEntry(
                v["name"],
                GlobalId.parse(v["id"]),
                plan_from_dict(v["plan"]),
                tuple(GlobalId.parse(g) for g in v["views"]),
            )
            for v in obj.get("views", [])  # none before version 2
        )
        definitions = tuple(
            (GlobalId.parse(d["id"]), _text(d["sql"])) for d in obj.get("definitions", [])
        )
        sources = tuple(  # none before version 3, nor anything below
            SourceEntry(
                _text(x["name"]),
                GlobalId.parse(x["id"]),
                _source_connection(x["connection"]),
                schema_from_dict(x["schema"]),
                GlobalId.parse(x["remap_id"]),
            )
            for x in obj.get("sources", [])
        )
        progress = tuple(
            ProgressEntry(_text(x["name"]), GlobalId.parse(x["id"]), GlobalId.parse(x["source"]))
            for x in obj.get("progress", [])
        )
        sinks = tuple(
            SinkEntry(
                _text(x["name"]),
                GlobalId.parse(x["id"]),
                GlobalId.parse(x["from"]),
                _sink_connection(x["connection"]),
            )
            for x in obj.get("sinks", [])
        )
        system = tuple(
            SystemCollectionEntry(_text(x["name"]), GlobalId.parse(x["id"]), _text(x["kind"]))
            for x in obj.get("system_collections", [])
        )
        secrets = tuple(
            SecretEntry(_text(x["name"]), GlobalId.parse(x["id"])) for x in obj.get("secrets", [])
        )
        sr = obj.get("storage_replica")
        storage_replica = (
            None
            if sr is None
            else StorageReplicaEntry(
                bool(sr["managed"]), None if sr["address"] is None else _text(sr["address"])
            )
        )
        return CatalogState(
            tables,
            indexes,
            mvs,
            replicas,
            policies,
            _int(obj["next_user_id"]),
            views,
            definitions,
            sources,
            progress,
            sinks,
            system,
            storage_replica,
            clusters,
            _int(obj.get("next_cluster_id", 2)),
            slots,
            secrets,
        )
    except CatalogDecodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, InvalidId, PlanError) as e:
        raise CatalogDecodeError(f"unreadable catalog: {type(e).__name__}: {e}") from e
