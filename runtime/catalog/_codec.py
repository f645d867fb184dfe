"""The catalog as versioned JSON: :func:`encode_catalog`, :func:`decode_catalog` and read policies.

One format version (:data:`CATALOG_FORMAT_VERSION`) is read and written;
plans and schemas go through the spec's plan serde. Decoding anything else
-- another version, a truncated or hand-edited document -- is a
:class:`~tidegate.runtime.errors.CatalogDecodeError`, never a partial state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

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

from ..errors import CatalogDecodeError, InvalidCatalogOp
from ._entries import (
    CatalogState,
    IndexEntry,
    MaterializedViewEntry,
    ReplicaEntry,
    TableEntry,
    ViewEntry,
)

__all__ = [
    "CATALOG_FORMAT_VERSION",
    "decode_catalog",
    "encode_catalog",
    "policy_from_dict",
    "policy_to_dict",
]

CATALOG_FORMAT_VERSION = 2
"""The version of the JSON document :func:`encode_catalog` writes; :func:`decode_catalog` reads
it and version 1 (before views and definitions)."""


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
    }
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def decode_catalog(data: bytes) -> CatalogState:
    """Inverse of :func:`encode_catalog`; :class:`CatalogDecodeError` for anything else."""
    try:
        obj = json.loads(data)
        version = obj.get("version")
        if version not in (1, CATALOG_FORMAT_VERSION):
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
        return CatalogState(
            tables,
            indexes,
            mvs,
            replicas,
            policies,
            _int(obj["next_user_id"]),
            views,
            definitions,
        )
    except CatalogDecodeError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, InvalidId, PlanError) as e:
        raise CatalogDecodeError(f"unreadable catalog: {type(e).__name__}: {e}") from e
