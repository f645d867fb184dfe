"""DDL as JSON: column specs, index keys, read policies and plans, checked before anything changes.

What ``tidegate create-table/create-index/create-view/read-policy`` send and
the control endpoint (:mod:`.service`) accepts. Every function here is pure and
raises :class:`DdlError` (with the error ``type`` the endpoint answers) for
input it cannot use, so a refused request never reaches the environment.

* Columns: ``[{"name": "id", "type": "int64", "nullable": false}, ...]``
  (``nullable`` defaults to true, as in :meth:`Schema.of`); on the command line
  ``NAME:TYPE`` is NOT NULL and ``NAME:TYPE:null`` nullable.
* Read policies: ``{"kind": "lag", "ms": N, "granularity_ms"?: G}``,
  ``{"kind": "valid-from", "time": T}``, ``{"kind": "step-back"}``,
  ``{"kind": "none"}`` (the since stays where it is now) and
  ``{"kind": "multiple", "policies": [...]}`` (the least restrictive of them).
* Plans: :func:`tidegate.spec.plan.serde.plan_to_dict`'s JSON, where a ``get``
  may name a catalog object instead of carrying its id and schema
  (``{"op": "get", "name": "orders"}``).
* Source connections: ``{"type": "load_generator", "kind": "counter" | "auction",
  "tick_ms"?: N, "seed"?: N, "max_cardinality"?: N, "rows_per_tick"?: N}`` or
  ``{"type": "postgres", "url", "table", "publication", "slot"}``; sink
  connections: ``{"type": "iceberg", "catalog_url", "warehouse", "table",
  "commit_interval_ms"?: N}`` (N >= 1000, as ``COMMIT INTERVAL`` in SQL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from tidegate.spec.errors import PlanDecodeError
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

if TYPE_CHECKING:  # the plan IR is imported where it is used: the CLI's parser stays light
    from tidegate.spec.plan import Plan
    from tidegate.spec.plan.schema import Schema
    from tidegate.spec.storage import SourceConnection, StorageSinkConnection

__all__ = [
    "DEFAULT_GRANULARITY_MS",
    "POLICY_KINDS",
    "SCALAR_TYPES",
    "DdlError",
    "Lookup",
    "columns_to_json",
    "index_keys",
    "parse_column_spec",
    "plan_from_json",
    "policy_from_json",
    "policy_to_json",
    "projection_plan",
    "schema_from_json",
    "sink_connection_from_json",
    "source_connection_from_json",
]

SCALAR_TYPES = (
    "int64",
    "float64",
    "string",
    "bool",
    "date",
    "timestamp",
    "numeric",
    "int16",
    "int32",
    "float32",
)
"""The column types a table may have: the values of the spec's ``ScalarType`` (a test checks)."""

POLICY_KINDS = ("lag", "valid-from", "step-back", "none", "multiple")
"""The read policy kinds :func:`policy_from_json` understands."""

DEFAULT_GRANULARITY_MS = 1000
"""How coarsely a ``lag`` policy rounds the since by default (one tick of ``tidegate up``)."""

Lookup: TypeAlias = "Callable[[str], tuple[GlobalId, Schema]]"
"""The id and schema of a catalog object named (or identified) by a string."""


class DdlError(ValueError):
    """DDL input that cannot be used; ``type`` names the problem (``BadColumns``, ``BadPolicy``...)."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(message)
        self.type = type
        self.message = message


def _plain_int(x: Any) -> bool:
    return type(x) is int


# -- columns ----------------------------------------------------------------------------------


def parse_column_spec(text: str) -> dict[str, Any]:
    """``NAME:TYPE`` (NOT NULL) or ``NAME:TYPE:null`` as a column's JSON; the name may hold colons."""
    body, nullable = text, False
    if body.endswith(":null"):
        body, nullable = body[: -len(":null")], True
    name, sep, scalar = body.rpartition(":")
    if not sep or not name:
        raise DdlError("BadColumns", f"expected NAME:TYPE[:null], got {text!r}")
    if scalar not in SCALAR_TYPES:
        raise DdlError(
            "BadColumns",
            f"column {name!r}: unknown type {scalar!r}; types are {', '.join(SCALAR_TYPES)}",
        )
    return {"name": name, "type": scalar, "nullable": nullable}


def schema_from_json(columns: Any) -> Schema:
    """A table's schema from ``[{"name", "type", "nullable"?}, ...]``: at least one column, unique names."""
    from tidegate.spec.plan.schema import Column, ColumnType, ScalarType, Schema

    if not isinstance(columns, list) or not columns:
        raise DdlError(
            "BadColumns",
            'columns must be a non-empty list like [{"name": "id", "type": "int64"}]',
        )
    out: list[Column] = []
    seen: set[str] = set()
    for i, c in enumerate(columns):
        if not isinstance(c, dict):
            raise DdlError("BadColumns", f"column {i}: expected an object, got {c!r}")
        unknown = set(c) - {"name", "type", "nullable"}
        if unknown:
            raise DdlError("BadColumns", f"column {i}: unknown field(s) {sorted(unknown)}")
        name, scalar, nullable = c.get("name"), c.get("type"), c.get("nullable", True)
        if not isinstance(name, str) or not name or name.strip() != name:
            raise DdlError(
                "BadColumns", f"column {i}: name must be a non-empty, unpadded string, got {name!r}"
            )
        if name in seen:
            raise DdlError("BadColumns", f"column {name!r} appears twice")
        if scalar not in SCALAR_TYPES:
            raise DdlError(
                "BadColumns",
                f"column {name!r}: unknown type {scalar!r}; types are {', '.join(SCALAR_TYPES)}",
            )
        if type(nullable) is not bool:
            raise DdlError("BadColumns", f"column {name!r}: nullable must be true or false")
        seen.add(name)
        out.append(Column(name, ColumnType(ScalarType(scalar), nullable)))
    return Schema(tuple(out))


def columns_to_json(schema: Schema) -> list[dict[str, Any]]:
    """The inverse of :func:`schema_from_json`."""
    from tidegate.spec.plan import schema_to_dict

    cols: list[dict[str, Any]] = schema_to_dict(schema)["columns"]
    return cols


# -- index keys --------------------------------------------------------------------------------


def index_keys(keys: Any, schema: Schema) -> tuple[int, ...]:
    """Key columns as positions: each a column name, a position, or a position's digits.

    A name wins over digits (a column called ``"2"`` is that column). At least
    one key, none repeated.
    """
    if not isinstance(keys, list) or not keys:
        raise DdlError("BadKeys", "keys must be a non-empty list of column names or positions")
    out: list[int] = []
    for k in keys:
        if isinstance(k, str):
            if k in schema.names:
                pos = schema.names.index(k)
            elif k.isdecimal() and int(k) < schema.arity:
                pos = int(k)
            else:
                raise DdlError("BadKeys", f"no column {k!r}; columns are {', '.join(schema.names)}")
        elif _plain_int(k) and 0 <= k < schema.arity:
            pos = k
        else:
            raise DdlError(
                "BadKeys",
                f"key {k!r} is neither a column name nor a position below {schema.arity}",
            )
        if pos in out:
            raise DdlError("BadKeys", f"key column {schema.names[pos]!r} is given twice")
        out.append(pos)
    return tuple(out)


# -- read policies ----------------------------------------------------------------------------


def _field_int(d: dict[str, Any], field: str, kind: str, *, minimum: int) -> int:
    v: Any = d.get(field)
    if not _plain_int(v) or v < minimum:
        raise DdlError(
            "BadPolicy", f"a {kind!r} policy needs {field!r}: an integer >= {minimum}, got {v!r}"
        )
    return int(v)


def policy_from_json(data: Any, since: Antichain) -> ReadPolicy:
    """The read policy ``data`` describes; ``since`` is the object's since now (for ``none``)."""
    if not isinstance(data, dict):
        raise DdlError(
            "BadPolicy", f'a policy is an object like {{"kind": "lag", "ms": 60000}}, got {data!r}'
        )
    kind = data.get("kind")
    allowed = {
        "lag": {"ms", "granularity_ms"},
        "valid-from": {"time"},
        "step-back": set(),
        "none": set(),
        "multiple": {"policies"},
    }
    if kind not in allowed:
        raise DdlError(
            "UnknownPolicyKind",
            f"unknown read policy kind {kind!r}; kinds are {', '.join(POLICY_KINDS)}",
        )
    extra = set(data) - allowed[kind] - {"kind"}
    if extra:
        raise DdlError("BadPolicy", f"a {kind!r} policy takes no field(s) {sorted(extra)}")
    if kind == "lag":
        lag = _field_int(data, "ms", kind, minimum=0)
        gran = data.get("granularity_ms", DEFAULT_GRANULARITY_MS)
        if not _plain_int(gran) or gran < 1:
            raise DdlError("BadPolicy", f"granularity_ms must be an integer >= 1, got {gran!r}")
        return LagWriteFrontier(lag, gran)
    if kind == "valid-from":
        return ValidFrom(Antichain([_field_int(data, "time", kind, minimum=0)]))
    if kind == "step-back":
        return StepBack()
    if kind == "none":
        return NoPolicy(since)
    members = data.get("policies")
    if not isinstance(members, list) or not members:
        raise DdlError("BadPolicy", "a 'multiple' policy needs a non-empty list 'policies'")
    return Multiple(policy_from_json(m, since) for m in members)


def policy_to_json(policy: ReadPolicy) -> dict[str, Any]:
    """A read policy as :func:`policy_from_json` reads it; ``none`` also shows the since it holds."""
    if isinstance(policy, LagWriteFrontier):
        return {"kind": "lag", "ms": policy.lag, "granularity_ms": policy.max_granularity}
    if isinstance(policy, ValidFrom):
        els = list(policy.valid_from.elements)
        if len(els) == 1:
            return {"kind": "valid-from", "time": els[0]}
        return {"kind": "valid-from", "frontier": els}
    if isinstance(policy, StepBack):
        return {"kind": "step-back"}
    if isinstance(policy, NoPolicy):
        return {"kind": "none", "since": list(policy.initial_since.elements)}
    if isinstance(policy, Multiple):
        return {"kind": "multiple", "policies": [policy_to_json(p) for p in policy.policies]}
    return {"kind": type(policy).__name__}


# -- plans -----------------------------------------------------------------------------------------


def _named_gets(node: Any, lookup: Lookup) -> Any:
    """``node`` with every ``{"op": "get", "name": N}`` given the id and schema of ``N``."""
    if isinstance(node, list):
        return [_named_gets(x, lookup) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("op") == "get" and ("name" in node or "schema" not in node):
        ref = node.get("name", node.get("id"))
        if not isinstance(ref, str):
            raise DdlError(
                "BadPlan", f"a get names a catalog object by 'name' or 'id', got {node!r}"
            )
        from tidegate.spec.plan import schema_to_dict

        gid, schema = lookup(ref)
        return {"op": "get", "id": str(gid), "schema": schema_to_dict(schema)}
    return {k: _named_gets(v, lookup) for k, v in node.items()}


def plan_from_json(data: Any, lookup: Lookup) -> Plan:
    """The plan ``data`` encodes (see the module docstring); :class:`DdlError` ``BadPlan`` if malformed.

    Only decodes: whether the plan typechecks against the catalog is the
    catalog's to say when the object is created.
    """
    from tidegate.spec.plan import plan_from_dict

    if not isinstance(data, dict):
        raise DdlError(
            "BadPlan", f"a plan is a JSON object with an 'op', got {type(data).__name__}"
        )
    try:
        return plan_from_dict(_named_gets(data, lookup))
    except RecursionError:
        raise DdlError("BadPlan", "the plan is nested too deeply") from None
    except PlanDecodeError as e:
        raise DdlError("BadPlan", str(e)) from None


def projection_plan(source: tuple[GlobalId, Schema], columns: Sequence[str] | None) -> Plan:
    """``source`` read whole, or just ``columns`` (by name, in that order)."""
    from tidegate.spec.plan.relation import Get, Project

    gid, schema = source
    get = Get(gid, schema)
    if columns is None:
        return get
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise DdlError("BadColumns", "columns must be a non-empty list of column names")
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise DdlError(
            "BadColumns", f"no column(s) {missing}; columns are {', '.join(schema.names)}"
        )
    return Project(get, tuple(schema.names.index(c) for c in columns))


# -- source and sink connections -------------------------------------------------------------------


def _connection_fields(
    data: Any, what: str, required: set[str], optional: set[str]
) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise DdlError("BadConnection", f"a {what} connection is a JSON object, got {data!r}")
    unknown = set(data) - required - optional - {"type"}
    if unknown:
        raise DdlError("BadConnection", f"a {what} connection has no field(s) {sorted(unknown)}")
    missing = sorted(required - set(data))
    if missing:
        raise DdlError("BadConnection", f"a {what} connection needs field(s) {missing}")
    for field in required:
        if not isinstance(data[field], str) or not data[field]:
            raise DdlError("BadConnection", f"{what}: {field} must be a non-empty string")
    return data


def source_connection_from_json(data: Any) -> SourceConnection:
    """A source's connection from its JSON (see the module docstring) [DdlError ``BadConnection``]."""
    from tidegate.spec.storage import LoadGenerator, PostgresSource

    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "load_generator":
        d = _connection_fields(
            data,
            "load generator",
            set(),
            {"kind", "tick_ms", "seed", "max_cardinality", "rows_per_tick"},
        )
        gen = d.get("kind", "counter")
        if gen not in ("counter", "auction"):
            raise DdlError("BadConnection", f"load generators are counter and auction, not {gen!r}")
        ints: dict[str, int | None] = {}
        for field, default, minimum in (
            ("tick_ms", 1000, 1),
            ("seed", 0, 0),
            ("max_cardinality", None, 1),
            ("rows_per_tick", 1, 1),
        ):
            value = d.get(field, default)
            if value is not None and (not _plain_int(value) or value < minimum):
                raise DdlError(
                    "BadConnection", f"load generator {field} must be an integer >= {minimum}"
                )
            ints[field] = value
        return LoadGenerator(
            gen,
            int(ints["tick_ms"] or 1000),
            int(ints["seed"] or 0),
            ints["max_cardinality"],
            int(ints["rows_per_tick"] or 1),
        )
    if kind == "postgres":
        d = _connection_fields(data, "postgres", {"url", "table", "publication", "slot"}, set())
        return PostgresSource(d["url"], d["table"], d["publication"], d["slot"])
    raise DdlError(
        "BadConnection",
        f'a source connection\'s type is "load_generator" or "postgres", got {kind!r}',
    )


def sink_connection_from_json(data: Any) -> StorageSinkConnection:
    """A sink's connection from its JSON (see the module docstring) [DdlError ``BadConnection``]."""
    from tidegate.spec.storage import IcebergSink

    kind = data.get("type") if isinstance(data, dict) else None
    if kind != "iceberg":
        raise DdlError("BadConnection", f'a sink connection\'s type is "iceberg", got {kind!r}')
    d = _connection_fields(
        data, "iceberg", {"catalog_url", "warehouse", "table"}, {"commit_interval_ms"}
    )
    interval = d.get("commit_interval_ms", 1_000)
    if not _plain_int(interval) or not 1_000 <= interval <= 2**53:
        raise DdlError(
            "BadConnection", "iceberg commit_interval_ms must be an integer >= 1000 (1 s)"
        )
    return IcebergSink(d["catalog_url"], d["warehouse"], d["table"], commit_interval_ms=interval)
