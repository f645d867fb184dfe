"""What ``tidegate status``, ``describe`` and ``replica list`` report, as JSON, from a running environment.

Kept apart from the request routing (:mod:`.service`) and from the text
(:mod:`.render`): these functions read an ``Environment`` (and the
orchestrator of its managed replicas) and return plain JSON values.

A replica's ``status`` here is what an operator needs to know, from the
controller's view of its connection and the orchestrator's view of its
process:

* ``connected`` -- its connection is up;
* ``starting`` -- not connected yet since the controller started or since it
  was added (its process is starting, or the controller is connecting);
* ``restarting`` -- it was connected and is coming back: its process is being
  restarted, or the controller is reconnecting and rehydrating it;
* ``failed`` -- it cannot be brought back as things stand: its process does
  not start (``last_error`` says why; the orchestrator keeps retrying), or, for
  a replica the controller does not run, connections to it are refused;
* ``stopping`` -- its process is being stopped (it is being dropped, or the
  controller is stopping).

``last_error`` says why a replica that is not connected went down, and is
``null`` once it is connected again. Times are epoch milliseconds with an
``_iso`` twin (:mod:`.times`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.runtime.metrics import lag_ms
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId

from .ddl import columns_to_json, policy_to_json
from .times import iso_frontier, iso_ms

__all__ = [
    "CollectionInfo",
    "clusters_json",
    "collection_json",
    "describe_json",
    "error_json",
    "exit_text",
    "frontier_json",
    "kind_of",
    "process_replicas_json",
    "replica_state",
    "replicas_json",
    "storage_json",
]


@dataclass(frozen=True)
class CollectionInfo:
    """A named object of the environment: ``kind`` is table, index, materialized-view, source,
    progress (a source's progress collection), system (a status or statistics collection) or
    sink (not a collection: it cannot be read)."""

    name: str
    id: GlobalId
    kind: str


def kind_of(entry: Any) -> str:
    name = type(entry).__name__
    return {
        "TableEntry": "table",
        "IndexEntry": "index",
        "ViewEntry": "view",
        "SourceEntry": "source",
        "ProgressEntry": "progress",
        "SystemCollectionEntry": "system",
        "SinkEntry": "sink",
    }.get(name, "materialized-view")


_HAS_PLAN = ("index", "materialized-view", "view")


def storage_json(env: Any, now_ms: int, ref: Any = None) -> list[dict[str, Any]]:
    """Every source and sink (or only ``ref``): its connection (no secrets), status and error,
    frontiers and lag, statistics, and what it reads or its progress collection."""
    statuses = getattr(env, "storage_status", None)
    if statuses is None:  # an environment without sources and sinks (a test's stand-in)
        return []
    names = {e.id: e.name for e in (*env.state.entries(), *getattr(env.state, "sinks", ()))}
    out = []
    for s in statuses(ref):
        row: dict[str, Any] = {
            "name": s.name,
            "id": str(s.id),
            "kind": s.kind,
            "type": s.type,
            "connection": s.connection,
            "connection_details": s.details,
            "status": s.status,
            "error": s.error,
            "hint": s.hint,
        }
        row.update(_frontiers_json(s.since, s.upper, now_ms))
        row["statistics"] = s.statistics
        if s.reads is not None:
            row["reads"] = {"name": names.get(s.reads, str(s.reads)), "id": str(s.reads)}
        if s.progress is not None:
            row["progress"] = {
                "name": names.get(s.progress, str(s.progress)),
                "id": str(s.progress),
            }
        out.append(row)
    return out


def frontier_json(f: Antichain) -> list[Any]:
    return list(f.elements)


def _frontiers_json(since: Antichain, upper: Antichain, now_ms: int) -> dict[str, Any]:
    s, u = frontier_json(since), frontier_json(upper)
    return {
        "since": s,
        "since_iso": iso_frontier(s),
        "upper": u,
        "upper_iso": iso_frontier(u),
        "lag_ms": lag_ms(upper, now_ms),
    }


def error_json(error: Any) -> dict[str, Any] | None:
    """A :class:`~tidegate.runtime.controller.driver.CollectionError` as JSON (``None`` for none)."""
    if error is None:
        return None
    return {
        "message": error.message,
        "source": error.source,
        "seen_ms": error.seen_ms,
        "seen_iso": iso_ms(error.seen_ms),
        "at": error.at,
        "at_iso": iso_ms(error.at),
    }


def _hydration_by_id(env: Any) -> dict[GlobalId, list[dict[str, Any]]]:
    out: dict[GlobalId, list[dict[str, Any]]] = {}
    for h in env.hydration():
        out.setdefault(h.id, []).append(
            {"replica": h.replica, "hydrated": h.hydrated, "seconds": h.seconds}
        )
    return out


def collection_json(
    env: Any,
    c: CollectionInfo,
    now_ms: int,
    hydration: Mapping[GlobalId, list[dict[str, Any]]] | None = None,
    *,
    describe: bool = False,
) -> dict[str, Any]:
    """One collection's row of ``status``: frontiers, lag, read policy, hydration per replica
    (indexes and materialized views; tables are always readable) and the last error it answered;
    with ``describe``, :func:`describe_json`'s fields too."""
    since, upper = env.frontiers(c.id)
    row: dict[str, Any] = {"name": c.name, "id": str(c.id), "kind": c.kind}
    row.update(_frontiers_json(since, upper, now_ms))
    policy = env.state.read_policy(c.id)
    row["read_policy"] = None if policy is None else policy_to_json(policy)
    row["read_policy_effective"] = policy_to_json(env.read_policy(c.id))
    if hydration is None:
        hydration = _hydration_by_id(env)
    row["hydration"] = hydration.get(c.id, []) if c.kind in _HAS_PLAN else []
    row["error"] = error_json(env.driver.collection_errors.get(c.id))
    if describe:
        row.update(_description(env, c.id))
    return row


def _named(env: Any, ids: Iterable[GlobalId]) -> list[dict[str, Any]]:
    out = []
    for g in ids:
        try:
            entry = env.state.view(g) or env.state.get(g)
        except (TidegateError, LookupError):
            continue
        out.append({"name": entry.name, "id": str(g), "kind": kind_of(entry)})
    return out


def _description(env: Any, gid: GlobalId) -> dict[str, Any]:
    """What an object is: columns, keys, plan (EXPLAIN), SQL definition, what it reads and what
    reads it, and its effective read policy (``read_policy_default``: none was set)."""
    from tidegate.spec.plan.explain import explain

    state = env.state
    entry = state.view(gid) or state.sink(gid) or state.get(gid)
    kind = kind_of(entry)
    schema = state.schema_of(gid)
    keys = None
    on = None
    if kind == "index":
        keys = [schema.columns[k].name for k in entry.keys]
        if entry.on is not None:
            on = next(iter(_named(env, [entry.on])), None)
    out: dict[str, Any] = {
        "columns": columns_to_json(schema),
        "keys": keys,
        "on": on,
        "plan": explain(entry.plan) if kind in _HAS_PLAN else None,
        "definition": state.definition(gid),
        "dependencies": _named(env, state.dependencies(gid)),
        "dependents": _named(env, state.dependents(gid)),
    }
    if kind not in ("view", "sink"):
        out["read_policy_effective"] = policy_to_json(env.read_policy(gid))
        out["read_policy_default"] = state.read_policy(gid) is None
    return out


def describe_json(env: Any, gid: GlobalId, now_ms: int) -> dict[str, Any]:
    """``tidegate describe``: the object's name, id and kind, :func:`_description`'s fields, and
    for a collection its frontiers, lag, hydration per replica and last error; for a source or
    sink also its connection, status, error and statistics (``storage``)."""
    state = env.state
    entry = state.view(gid) or state.sink(gid) or state.get(gid)
    kind = kind_of(entry)
    if kind == "view":  # a named query: nothing computed, no frontiers
        return {"name": entry.name, "id": str(gid), "kind": kind, **_description(env, gid)}
    if kind == "sink":  # not a collection: what it writes out, how far, its health
        [storage] = storage_json(env, now_ms, gid)
        return {
            "name": entry.name,
            "id": str(gid),
            "kind": kind,
            **_description(env, gid),
            **{k: storage[k] for k in ("since", "since_iso", "upper", "upper_iso", "lag_ms")},
            "storage": storage,
        }
    row = collection_json(env, CollectionInfo(entry.name, gid, kind), now_ms, describe=True)
    if kind == "source":
        [row["storage"]] = storage_json(env, now_ms, gid)
    return row


# -- replicas -----------------------------------------------------------------------------------


def exit_text(code: int | None) -> str | None:
    if code is None:
        return None
    if code < 0:
        try:
            return f"the process was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the process was killed by signal {-code}"
    return f"the process exited with status {code}"


def replica_state(info: Any, process: Any | None) -> tuple[str, str | None]:
    """``(status, last_error)`` of a replica (see the module docstring) from the driver's
    :class:`~tidegate.runtime.controller.driver.ReplicaInfo` and, for a managed replica, the
    orchestrator's :class:`~tidegate.runtime.orchestrator.ReplicaProcessStatus`."""
    if info is not None and info.connected and info.status == "connected":
        return "connected", None
    reason = (info.last_error or None) if info is not None else None
    epoch = info.epoch if info is not None else 1
    if process is not None:
        if process.state in ("stopping", "stopped"):  # being dropped, or the controller stops
            return "stopping", reason
        if process.last_error:
            return "failed", f"{process.last_error} (retrying; see {process.log_path})"
        if process.restarts == 0 and epoch <= 1:
            return "starting", reason
        return "restarting", exit_text(process.last_exit_code) or reason
    if info is not None and info.status == "failed":
        return "failed", reason
    return ("starting" if epoch <= 1 else "restarting"), reason


def process_replicas_json(
    processes: Mapping[str, Any], memory_limit: int | None
) -> list[dict[str, Any]]:
    """The replicas of a controller that is still starting: only their processes are known."""
    out = []
    for name, p in sorted(processes.items()):
        status, error = replica_state(None, p)
        if p.state == "running":
            status = "starting"  # running, not connected yet
        out.append(
            {
                "name": name,
                "status": status,
                "epoch": None,
                "address": p.address,
                "last_error": error,
                "managed": True,
                "process": p.state,
                "pid": p.pid,
                "restarts": p.restarts,
                "metrics": p.metrics,
                "spark_ui": p.spark_ui,
                "memory_limit": memory_limit,
                "objects_hydrated": None,
                "objects": None,
            }
        )
    return out


def replicas_json(
    env: Any, orchestrator: Any, memory_limit: int | None, *, detail: bool = False
) -> list[dict[str, Any]]:
    """Every replica: status and last error (see the module docstring), epoch, address, the
    process (managed replicas: state, pid, restarts, ``metrics``, the ``HOST:PORT`` its
    Prometheus metrics are served on, if they are, and ``spark_ui``, its Spark web UI's URL,
    with ``--spark-ui``), memory limit, and how many of the
    catalog's indexes and materialized views it has hydrated (``objects_hydrated`` of
    ``objects``). With ``detail``, the catalog's record too (``executor``, ``spark_master``)
    and the process's log file."""
    processes = orchestrator.status() if orchestrator is not None else {}
    recorded = {r.id: r for r in env.state.replicas}
    sizes = env.sizes() if hasattr(env, "sizes") else {}
    hydration: dict[str, list[bool]] = {}
    for h in env.hydration():
        hydration.setdefault(h.replica, []).append(h.hydrated)
    out = []
    for info in env.replicas():
        p = processes.get(info.replica)
        entry = recorded.get(info.replica)
        managed = entry.managed if entry is not None else p is not None
        status, error = replica_state(info, p if managed else None)
        flags = hydration.get(info.replica, [])
        size = entry.size if entry is not None else None
        allocation = sizes.get(size) if size is not None else None
        limit = memory_limit
        if allocation is not None and allocation.memory_limit is not None:
            limit = allocation.memory_limit
        row: dict[str, Any] = {
            "name": info.replica,
            "cluster": info.instance,
            "size": size,
            "status": status,
            "epoch": info.epoch,
            "address": info.address
            or (entry.address if entry is not None else None)
            or (p.address if p is not None else None),
            "last_error": error,
            "managed": managed,
            "process": p.state if p is not None else None,
            "pid": p.pid if p is not None else None,
            "restarts": p.restarts if p is not None else None,
            "metrics": p.metrics if p is not None else None,
            "spark_ui": p.spark_ui if p is not None else None,
            "memory_limit": limit if managed else None,
            "objects_hydrated": sum(flags),
            "objects": len(flags),
            "role": "compute",
        }
        if detail:
            row["executor"] = entry.executor if entry is not None else None
            row["spark_master"] = entry.spark_master if entry is not None else None
            row["log"] = p.log_path if p is not None else None
        out.append(row)
    out.extend(_storage_replicas_json(env, processes, detail=detail))
    return out


def clusters_json(env: Any) -> list[dict[str, Any]]:
    """Every cluster: managed or not, size and replication factor (managed ones), its replicas
    (name, id, size and what it allocates, status) and the objects it maintains, by name."""
    clusters = getattr(env, "clusters", None)
    if clusters is None:  # an environment without clusters (a test's stand-in)
        return []
    names = {e.id: e.name for e in env.state.entries()}
    return [
        {
            "name": c.name,
            "id": c.id,
            "managed": c.managed,
            "size": c.size,
            "replication_factor": c.replication_factor,
            "replicas": [
                {
                    "name": r.name,
                    "id": r.id,
                    "size": r.size,
                    "allocation": r.allocation,
                    "managed": r.managed,
                    "status": r.status,
                    "connected": r.connected,
                }
                for r in c.replicas
            ],
            "objects": [names.get(g, str(g)) for g in c.objects],
        }
        for c in clusters()
    ]


def _storage_replicas_json(
    env: Any, processes: Mapping[str, Any], *, detail: bool
) -> list[dict[str, Any]]:
    """The storage instance's replica (once a source or sink needed it), like a compute one's."""
    recorded = getattr(env.state, "storage_replica", None)
    info = env.storage_replica() if hasattr(env, "storage_replica") else None
    if recorded is None or info is None:
        return []
    p = processes.get(info.replica) if recorded.managed else None
    status, error = replica_state(info, p)
    row: dict[str, Any] = {
        "name": info.replica,
        "status": status,
        "epoch": info.epoch,
        "address": info.address or recorded.address or (p.address if p is not None else None),
        "last_error": error,
        "managed": recorded.managed,
        "process": p.state if p is not None else None,
        "pid": p.pid if p is not None else None,
        "restarts": p.restarts if p is not None else None,
        "metrics": p.metrics if p is not None else None,
        "spark_ui": p.spark_ui if p is not None else None,
        "memory_limit": None,
        "objects_hydrated": None,
        "objects": None,
        "role": "storage",
    }
    if detail:
        row["executor"] = "storage"
        row["spark_master"] = None
        row["log"] = p.log_path if p is not None else None
    return [row]
