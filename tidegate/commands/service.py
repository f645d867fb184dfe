"""What the control endpoint does: status, peek, subscribe, append, DDL and replicas, against a
running ``Environment``.

Kept apart from the HTTP layer (:mod:`.control`) so it can be called and
tested directly. Collections are named as in the catalog (a table's,
index's or materialized view's name) or by id (``u7``). What ``status``,
``describe`` and ``replicas`` report is built by :mod:`.overview`.

``subscribe`` answers a :class:`~.control.Stream`: a first line describing
the subscribe (``{"subscribe": NAME, "id", "columns", "as_of", "as_of_iso"}``),
then a line per batch as it arrives (``{"lower", "upper", "updates": [{"time",
"row", "diff", "time_iso"}, ...]}`` with ``_iso`` twins), ending after the
batch whose upper is ``[]``, or with an ``{"error": {"type", "message"}}``
line; closing the stream drops the subscribe.

``sql`` with ``"stream": true`` (``POST /sql``) answers a stream too, the messages of
Materialize's WebSocket API, one JSON object per line: for each statement a
``{"type": "CommandStarting", "payload": {"has_rows", "is_streaming"}}``, then for one
that returns rows a ``{"type": "Rows", "payload": {"columns": [{"name", "type",
"type_oid", "type_len"}, ...]}}`` and a ``{"type": "Row", "payload": [values]}`` per
row, then ``{"type": "CommandComplete", "payload": TAG}``; ``Notice`` messages
(``{"message", "severity"}``) where the statement raised one; at the first error an
``{"type": "Error", "payload": {"type", "message", "code", "hint"?}}`` (``code``: the
SQLSTATE), which ends the script; last a ``{"type": "ReadyForQuery", "payload":
"I"}``. A ``SUBSCRIBE`` sends its rows as its batches arrive (``WITH (PROGRESS)``:
``mz_progressed`` rows too) and never completes unless it ends (``UP TO``, or its
input will never change): closing the stream drops it.

Replicas: ``replicas`` lists them; ``add_replica`` / ``drop_replica`` are
``Environment.add_replica`` / ``drop_replica`` (Materialize's ``CREATE/DROP
CLUSTER REPLICA``, recorded in the catalog).

Sources and sinks: ``create_source`` and ``create_sink`` take a connection's
JSON (:mod:`.ddl`); ``status`` lists them (``sources``, ``sinks``: status,
error, frontiers, statistics), ``describe`` and ``drop`` work on them. A
source reads like a table; a sink cannot be read (``NotReadable``).

DDL (``create_table``, ``create_index``, ``create_view``, ``drop``,
``set_read_policy``) checks its input here first (:mod:`.ddl`), then lets the
``Environment`` and its catalog decide; every refusal is a :class:`Refusal`
(404 for unknown objects, 409 for name clashes and dependents, 400 for the
rest) and leaves the catalog unchanged.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio

from tidegate.runtime.errors import (
    AppendOutcomeUnknown,
    DuplicateCatalogName,
    HasDependents,
    UnknownCatalogObject,
)
from tidegate.runtime.metrics import lag_ms
from tidegate.runtime.platform import wall_ms
from tidegate.spec.errors import InvalidId, TidegateError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets, typecheck

from .control import Refusal, Stream
from .ddl import (
    DdlError,
    columns_to_json,
    index_keys,
    plan_from_json,
    policy_from_json,
    policy_to_json,
    projection_plan,
    schema_from_json,
    sink_connection_from_json,
    source_connection_from_json,
)
from .overview import (
    CollectionInfo,
    clusters_json,
    collection_json,
    describe_json,
    frontier_json,
    kind_of,
    replicas_json,
    storage_json,
)
from .times import iso_frontier, iso_ms
from .values import RowsError, keys_from_json, row_to_json, rows_from_json

__all__ = ["CollectionInfo", "ControlService", "frontier_json", "lag_ms"]


class ControlService:
    """Serves control requests from an ``Environment`` (see :mod:`tidegate.runtime.environment`).

    The request methods raise :class:`Refusal`, :class:`~.ddl.DdlError` or the
    environment's typed errors; :meth:`handle` answers every one of them as a
    :class:`Refusal` with the error's type.
    """

    def __init__(
        self,
        env: Any,
        *,
        orchestrator: Any = None,
        clock_ms: Callable[[], int] = wall_ms,
        wait_s: float = 30.0,
        metrics: str | None = None,
        replica_memory_limit: int | None = None,
        started_ms: int | None = None,
    ) -> None:
        self.env = env
        self.orchestrator = orchestrator
        """Runs the managed replicas, if any: ``status`` adds their process state."""
        self.metrics = metrics
        """``HOST:PORT`` of the Prometheus metrics endpoint, if one is served: ``status`` shows it."""
        self.clock_ms = clock_ms
        self.wait_s = wait_s
        """How long a peek at a given time waits for the collection to be complete there."""
        self.replica_memory_limit = replica_memory_limit
        """The memory limit of each managed replica, in bytes (``None``: none): ``status`` shows it."""
        self.started_ms = clock_ms() if started_ms is None else started_ms
        """When the controller started (``status`` shows it)."""
        self._refs: tuple[Any, dict[str, CollectionInfo]] | None = None

    # -- the environment's catalog, by name ------------------------------------------------

    def collections(self) -> list[CollectionInfo]:
        """Every collection of the catalog (tables, indexes, materialized views, sources and
        their progress, system collections), in id order."""
        out = [CollectionInfo(e.name, e.id, kind_of(e)) for e in self.env.state.entries()]
        return sorted(out, key=lambda c: c.id)

    def _objects(self) -> list[CollectionInfo]:
        """The collections and the sinks."""
        sinks = [CollectionInfo(k.name, k.id, "sink") for k in self.env.state.sinks]
        return [*self.collections(), *sinks]

    def resolve(self, name: str, *, readable: bool = True) -> CollectionInfo:
        """The collection (or, unless ``readable``, the sink) called ``name`` (or with id ``name``)."""
        c = self._by_ref().get(name)
        if c is None:
            raise Refusal(404, "UnknownCollection", f"no table, index, source or view {name!r}")
        if readable and c.kind == "sink":
            raise Refusal(
                400, "NotReadable", f"{name!r} is a sink: it writes out, it cannot be read"
            )
        return c

    def _by_ref(self) -> dict[str, CollectionInfo]:
        """:meth:`_objects` by name and by id, for the catalog state as it is (an append
        resolves its table on every request; the state is replaced, never changed, on DDL)."""
        state = self.env.state
        cached = self._refs
        if cached is None or cached[0] is not state:
            refs: dict[str, CollectionInfo] = {}
            for c in reversed(self._objects()):  # the first match wins, as a scan would
                refs[str(c.id)] = c
                refs[c.name] = c
            cached = self._refs = (state, refs)
        return cached[1]

    # -- requests --------------------------------------------------------------------------

    def controller_json(self, state: str = "running") -> dict[str, Any]:
        """The controller's own line of ``status``: its state, pid and start time."""
        return {
            "state": state,
            "pid": os.getpid(),
            "started_ms": self.started_ms,
            "started_iso": iso_ms(self.started_ms),
        }

    async def status(self, *, describe: bool = False) -> dict[str, Any]:
        """Collections (frontiers, lag, read policy, hydration, last error; with ``describe``
        also their columns, keys, plan and dependencies), replicas, and the metrics address."""
        now = self.clock_ms()
        hydration: dict[GlobalId, list[dict[str, Any]]] = {}
        for h in self.env.hydration():
            hydration.setdefault(h.id, []).append(
                {"replica": h.replica, "hydrated": h.hydrated, "seconds": h.seconds}
            )
        rows = [
            collection_json(self.env, c, now, hydration, describe=describe)
            for c in self.collections()
        ]
        storage = storage_json(self.env, now)
        return {
            "state": "running",
            "controller": self.controller_json(),
            "now_ms": now,
            "now_iso": iso_ms(now),
            "collections": rows,
            "sources": [x for x in storage if x["kind"] == "source"],
            "sinks": [x for x in storage if x["kind"] == "sink"],
            "replicas": self.replicas(),
            "clusters": clusters_json(self.env),
            "metrics": self.metrics,
        }

    def replicas(self, *, detail: bool = False) -> list[dict[str, Any]]:
        """Every replica: status, last error, epoch, address, process, memory limit, hydration."""
        return replicas_json(self.env, self.orchestrator, self.replica_memory_limit, detail=detail)

    async def describe(self, name: str) -> dict[str, Any]:
        """What ``name`` (a collection or a view) is: columns, keys, plan, dependencies, read
        policy, and for a collection its frontiers, hydration and last error."""
        try:
            gid = self.env.resolve(name)
        except (UnknownCatalogObject, LookupError):
            raise Refusal(
                404, "UnknownCollection", f"no table, index, view or materialized view {name!r}"
            ) from None
        return describe_json(self.env, gid, self.clock_ms())

    async def add_replica(
        self, name: Any, address: Any = None, executor: Any = None, spark_master: Any = None
    ) -> dict[str, Any]:
        """Add replica ``name``: managed (started by the orchestrator) or, with ``address``, one
        that runs already; answers its line of :meth:`replicas`."""
        for field, value in (
            ("name", name),
            ("address", address),
            ("executor", executor),
            ("spark_master", spark_master),
        ):
            if value is not None and not isinstance(value, str):
                raise Refusal(400, "BadRequest", f"{field} must be a string, got {value!r}")
        if address is not None and spark_master is not None:
            raise Refusal(
                400, "BadRequest", "a replica at an address runs already: no spark master"
            )
        await self.env.add_replica(name, address, executor=executor, spark_master=spark_master)
        return self._replica(name)

    async def drop_replica(self, name: Any) -> dict[str, Any]:
        """Drop replica ``name`` (a managed one is stopped)."""
        if not isinstance(name, str):
            raise Refusal(400, "BadRequest", f"name must be a string, got {name!r}")
        try:
            entry = self.env.state.replica(name)
        except UnknownCatalogObject:
            raise Refusal(404, "UnknownReplica", f"no replica named {name!r}") from None
        await self.env.drop_replica(name)
        return {"name": name, "managed": entry.managed}

    def _replica(self, name: str) -> dict[str, Any]:
        for r in self.replicas(detail=True):
            if r["name"] == name:
                return r
        raise Refusal(404, "UnknownReplica", f"no replica {name!r}")  # pragma: no cover

    async def subscribe(
        self, name: str, as_of: Any = None, up_to: Any = None, snapshot: Any = True
    ) -> Stream:
        """Stream ``name``'s changes from ``as_of`` (default: the freshest time) as they come;
        ``snapshot`` false leaves out the contents at the as_of, ``up_to`` ends the stream once
        the frontier reaches it (``Environment.subscribe``'s) [Refusal 400]."""
        as_of = _time_field("as_of", as_of)
        up_to = _time_field("up_to", up_to)
        if type(snapshot) is not bool:
            raise Refusal(400, "BadRequest", f"snapshot must be true or false, got {snapshot!r}")
        c = self.resolve(name)
        schema = self.env.schema(c.id)
        sub = await self.env.subscribe(c.id, as_of, up_to=up_to, snapshot=snapshot)
        start = frontier_json(sub.upper)
        header = {
            "subscribe": c.name,
            "id": str(c.id),
            "columns": list(schema.names),
            "as_of": start[0] if start else None,
            "as_of_iso": iso_ms(start[0]) if start else None,
        }
        return Stream(_subscribe_lines(header, sub), sub.aclose)

    async def peek(self, name: str, at: int | None, key: Sequence[Any] | None) -> dict[str, Any]:
        """Read ``name`` at ``at`` (waiting up to ``wait_s`` for it to be complete) or freshest."""
        c = self.resolve(name)
        schema = self.env.schema(c.id)
        kwargs: dict[str, Any] = {}
        if key is not None:
            if c.kind != "index":
                raise Refusal(
                    400, "NotAnIndex", f"key lookups need an index; {name!r} is a {c.kind}"
                )
            try:
                kwargs["key"] = keys_from_json(key, schema, self.env.state.get(c.id).keys)
            except RowsError as e:
                raise Refusal(400, "BadKey", str(e)) from None
        at = _time_field("at", at)
        freshest = at is None
        if at is not None:
            with anyio.move_on_after(self.wait_s):
                await self.env.wait_for(c.id, at)
            result = await self.env.peek(c.id, at, **kwargs)
        else:  # held from choosing the time to reading there (the since may follow closely)
            held = await self.env.hold_fresh([c.id])
            try:
                at = held.time
                result = await self.env.peek(c.id, at, **kwargs)
            finally:
                held.release()
        return {
            "name": c.name,
            "id": str(c.id),
            "time": at,
            "time_iso": iso_ms(at),
            "freshest": freshest,
            "columns": list(schema.names),
            "rows": [[row_to_json(r), n] for r, n in _rows_of(result)],
        }

    async def copy_to(self, name: str, url: str, at: int | None) -> dict[str, Any]:
        """Write ``name``'s contents at ``at`` (or the freshest time) as Parquet under ``url``."""
        c = self.resolve(name)
        at = _time_field("at", at)
        if at is not None:
            with anyio.move_on_after(self.wait_s):
                await self.env.wait_for(c.id, at)
        rows = await self.env.copy_to(c.id, str(url), at=at)
        return {"name": c.name, "id": str(c.id), "url": url, "rows": rows}

    async def append(self, table: str, rows: Any, request_id: Any = None) -> dict[str, Any]:
        """Append ``rows`` to ``table``; with a ``request_id`` (the ``Idempotency-Key`` header),
        a retry is answered with the first one's time and never applied twice."""
        c = self.resolve(table)
        if c.kind != "table":
            raise Refusal(400, "NotATable", f"{table!r} is a {c.kind}; only tables take appends")
        try:
            updates = rows_from_json(rows, self.env.schema(c.id))
        except RowsError as e:
            raise Refusal(400, "BadRows", str(e)) from None
        idempotent = {} if request_id is None else {"request_id": request_id}
        ts = await self.env.append(c.name, updates, **idempotent)
        return {"table": c.name, "time": ts, "time_iso": iso_ms(ts), "rows": len(updates)}

    async def sql(self, text: Any, params: Any = None, request_id: Any = None) -> dict[str, Any]:
        """Run the SQL statement(s) ``text`` (see :mod:`tidegate.runtime.sql`); the last result.

        A refused statement is a :class:`Refusal` whose message is PostgreSQL-style
        (the line with a caret under the position, and a hint).
        """
        from tidegate.spec.errors import SqlError

        if not isinstance(text, str):
            raise Refusal(400, "BadRequest", f"sql must be a string, got {text!r}")
        if params is not None and not isinstance(params, list):
            raise Refusal(400, "BadRequest", f"params must be a list, got {params!r}")
        try:
            idempotent = {} if request_id is None else {"request_id": request_id}
            result = await self.env.execute(text, params, **idempotent)
        except SqlError as e:
            raise Refusal(400, type(e).__name__, e.render()) from None
        out: dict[str, Any] = result.to_json()
        return out

    def sql_stream(self, text: Any, params: Any = None) -> Stream:
        """Run the statement(s) ``text`` in one session, answering each as it comes (``POST
        /sql`` with ``"stream": true``): Materialize's WebSocket messages, one per line (see the
        module docstring). A ``SUBSCRIBE`` streams its rows until it ends or the client goes
        away, which drops it."""
        if not isinstance(text, str):
            raise Refusal(400, "BadRequest", f"sql must be a string, got {text!r}")
        if params is not None and not isinstance(params, list):
            raise Refusal(400, "BadRequest", f"params must be a list, got {params!r}")
        items = _sql_messages(self.env, text, params)
        return Stream(items, items.aclose)

    # -- DDL -----------------------------------------------------------------------------------

    def _new_name(self, name: Any, what: str) -> str:
        if not isinstance(name, str):
            raise Refusal(400, "BadName", f"a {what} name must be a string, got {name!r}")
        try:
            GlobalId.parse(name)
        except InvalidId:
            return name
        raise Refusal(
            400, "BadName", f"{name!r} reads as an object id; give the {what} another name"
        )

    def _lookup(self, ref: str) -> tuple[GlobalId, Schema]:
        c = self.resolve(ref)
        return c.id, self.env.schema(c.id)

    def _describe(self, gid: GlobalId) -> dict[str, Any]:
        entry = self.env.state.get(gid)
        schema = self.env.state.schema_of(gid)
        return {
            "name": entry.name,
            "id": str(gid),
            "kind": kind_of(entry),
            "columns": columns_to_json(schema),
        }

    async def create_table(self, name: Any, columns: Any) -> dict[str, Any]:
        """Create table ``name`` with ``columns`` (``[{"name", "type", "nullable"?}, ...]``)."""
        name = self._new_name(name, "table")
        schema = schema_from_json(columns)
        return self._describe(await self.env.create_table(name, schema))

    async def create_index(self, on: Any, keys: Any, name: Any = None) -> dict[str, Any]:
        """Index the collection ``on`` by ``keys`` (column names or positions); ``name`` is optional."""
        if name is not None:
            name = self._new_name(name, "index")
        if not isinstance(on, str):
            raise Refusal(400, "BadRequest", f"on must name a collection, got {on!r}")
        c = self.resolve(on)
        positions = index_keys(keys, self.env.schema(c.id))
        gid = await self.env.create_index(c.id, positions, name=name)
        return {**self._describe(gid), "on": c.name, "keys": list(positions)}

    def _checked_plan(self, plan: Plan) -> Schema:
        """Typecheck ``plan`` against the catalog: the spec's typed error, else ``BadPlan``."""
        sources = {g: self.env.state.schema_of(g) for g in gets(plan)}
        return typecheck(plan, sources)

    async def create_view(
        self,
        name: Any,
        plan: Any = None,
        source: Any = None,
        columns: Any = None,
    ) -> dict[str, Any]:
        """Create materialized view ``name`` from a plan's JSON, or from ``source`` (``columns`` of it)."""
        name = self._new_name(name, "view")
        if (plan is None) == (source is None):
            raise Refusal(400, "BadRequest", "give either a plan or a source collection (from)")
        if plan is not None:
            if columns is not None:
                raise Refusal(400, "BadRequest", "columns go with from, not with a plan")
            p = plan_from_json(plan, self._lookup)
        else:
            if not isinstance(source, str):
                raise Refusal(400, "BadRequest", f"from must name a collection, got {source!r}")
            p = projection_plan(self._lookup(source), columns)
        self._checked_plan(p)
        return self._describe(await self.env.create_materialized_view(name, p))

    async def drop(self, name: Any, cascade: Any = False) -> dict[str, Any]:
        """Drop ``name`` (with ``cascade``, everything that reads it too); the dropped objects."""
        if not isinstance(name, str):
            raise Refusal(400, "BadRequest", f"name must be a string, got {name!r}")
        if type(cascade) is not bool:
            raise Refusal(400, "BadRequest", f"cascade must be true or false, got {cascade!r}")
        c = self.resolve(name, readable=False)
        before = {x.id: x for x in self._objects()}
        entries: dict[GlobalId, Any] = {}  # as the drop found them: a cascade may take objects
        try:  # created while it waited for another DDL (they are not in ``before``)
            gone = await self.env.drop(c.id, cascade=cascade, dropped=entries)
        except HasDependents as e:  # the catalog's refusal, told in the CLI's words
            named = {str(g): info.name for g, info in before.items()}
            names = ", ".join(f"{named.get(str(d), d)} ({d})" for d in e.dependents)
            raise Refusal(
                409,
                "HasDependents",
                f"cannot drop {c.name} ({c.id}): {names} read(s) it; "
                "drop those first or drop with cascade",
            ) from None
        return {
            "dropped": [
                {"name": entries[g].name, "id": str(g), "kind": kind_of(entries[g])} for g in gone
            ]
        }

    async def create_source(self, name: Any, connection: Any) -> dict[str, Any]:
        """Create source ``name`` from ``connection``'s JSON; its line of ``status``'s sources."""
        name = self._new_name(name, "source")
        conn = source_connection_from_json(connection)
        gid = await self.env.create_source(name, conn)
        return self._storage_row(gid)

    async def create_sink(self, name: Any, source: Any, connection: Any) -> dict[str, Any]:
        """Create sink ``name`` writing out ``source`` to ``connection``; its ``status`` line."""
        name = self._new_name(name, "sink")
        if not isinstance(source, str):
            raise Refusal(400, "BadRequest", f"from must name a collection, got {source!r}")
        conn = sink_connection_from_json(connection)
        c = self.resolve(source)
        gid = await self.env.create_sink(name, c.id, conn)
        return self._storage_row(gid)

    def _storage_row(self, gid: GlobalId) -> dict[str, Any]:
        [row] = storage_json(self.env, self.clock_ms(), gid)
        columns = columns_to_json(self.env.schema(gid))
        return {**row, "columns": columns}

    async def set_read_policy(self, name: Any, policy: Any) -> dict[str, Any]:
        """Set ``name``'s read policy (see :func:`.ddl.policy_from_json`); answers its since after."""
        if not isinstance(name, str):
            raise Refusal(400, "BadRequest", f"name must be a string, got {name!r}")
        c = self.resolve(name)
        p = policy_from_json(policy, self.env.frontiers(c.id)[0])
        await self.env.set_read_policy(c.id, p)
        since = frontier_json(self.env.frontiers(c.id)[0])
        return {
            "name": c.name,
            "id": str(c.id),
            "policy": policy_to_json(p),
            "since": since,
            "since_iso": iso_frontier(since),
        }

    # -- routing -------------------------------------------------------------------------------

    async def handle(self, method: str, path: str, body: Mapping[str, Any]) -> Any:
        """The :data:`~.control.Handler` for :func:`~.control.serve_control`."""
        try:
            if (method, path) == ("GET", "/health"):
                return {"ok": True}
            if (method, path) == ("GET", "/status"):
                return await self.status(describe=bool(body.get("describe", False)))
            if (method, path) == ("POST", "/describe"):
                return await self.describe(str(body["name"]))
            if (method, path) == ("POST", "/subscribe"):
                self._fields(path, body, {"name"}, {"as_of", "up_to", "snapshot"})
                return await self.subscribe(
                    str(body["name"]),
                    body.get("as_of"),
                    body.get("up_to"),
                    body.get("snapshot", True),
                )
            if (method, path) == ("GET", "/replicas"):
                return {"replicas": self.replicas(detail=True)}
            if (method, path) == ("POST", "/replica-add"):
                self._fields(path, body, {"name"}, {"address", "executor", "spark_master"})
                return await self.add_replica(
                    body["name"],
                    body.get("address"),
                    body.get("executor"),
                    body.get("spark_master"),
                )
            if (method, path) == ("POST", "/replica-drop"):
                self._fields(path, body, {"name"}, set())
                return await self.drop_replica(body["name"])
            if (method, path) == ("GET", "/clusters"):
                return self.clusters()
            if method == "POST" and path in _CLUSTER_FIELDS:
                self._fields(path, body, *_CLUSTER_FIELDS[path])
                return await self._cluster(path, body)
            if (method, path) == ("POST", "/peek"):
                return await self.peek(str(body["name"]), body.get("at"), body.get("key"))
            if (method, path) == ("POST", "/copy-to"):
                return await self.copy_to(str(body["name"]), body["url"], body.get("at"))
            if (method, path) == ("POST", "/append"):
                return await self.append(
                    str(body["table"]), body.get("rows"), body.get("request_id")
                )
            if (method, path) == ("POST", "/sql"):
                if body.get("stream") is True:
                    self._fields(path, body, {"sql", "stream"}, {"params"})
                    return self.sql_stream(body["sql"], body.get("params"))
                return await self.sql(body["sql"], body.get("params"), body.get("request_id"))
            if method == "POST" and path in _DDL_FIELDS:
                self._fields(path, body, *_DDL_FIELDS[path])
                return await self._ddl(path, body)
        except UnknownCatalogObject as e:  # a KeyError too: caught first
            raise Refusal(404, "UnknownCollection", str(e)) from None
        except KeyError as e:
            raise Refusal(400, "BadRequest", f"missing field {e}") from None
        except DdlError as e:
            raise Refusal(400, e.type, e.message) from None
        except (DuplicateCatalogName, HasDependents) as e:
            raise Refusal(409, type(e).__name__, str(e)) from None
        except AppendOutcomeUnknown as e:  # not a refusal: it may have been applied
            raise Refusal(504, type(e).__name__, str(e)) from None
        except TidegateError as e:
            raise Refusal(400, type(e).__name__, str(e)) from None
        raise Refusal(404, "NotFound", f"no route {method} {path}")

    def clusters(self) -> dict[str, Any]:
        """Every cluster (see :func:`.overview.clusters_json`) and the sizes a replica may have."""
        from tidegate.runtime.sizes import size_json

        return {
            "clusters": clusters_json(self.env),
            "sizes": {n: size_json(z) for n, z in sorted(self.env.sizes().items())},
        }

    async def _cluster(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``tidegate cluster create|drop|alter|add-replica|drop-replica``: the Environment's
        cluster methods; answers the clusters as :meth:`clusters` does."""
        for field, value in body.items():
            ok = (
                isinstance(value, bool)
                if field == "cascade"
                else isinstance(value, int) and not isinstance(value, bool)
                if field == "replication_factor"
                else isinstance(value, str)
            )
            if not ok:
                raise Refusal(400, "BadRequest", f"{path}: bad {field} {value!r}")
        env = self.env
        if path == "/cluster-create":
            await env.create_cluster(
                body["name"], replicas=body.get("replication_factor", 1), size=body.get("size")
            )
        elif path == "/cluster-drop":
            await env.drop_cluster(body["name"], cascade=body.get("cascade", False))
        elif path == "/cluster-alter":
            await env.alter_cluster(
                body["name"],
                size=body.get("size"),
                replication_factor=body.get("replication_factor"),
            )
        elif path == "/cluster-replica-add":
            await env.create_cluster_replica(
                body["cluster"], body["name"], size=body.get("size"), address=body.get("address")
            )
        else:
            await env.drop_cluster_replica(body["cluster"], body["name"])
        return self.clusters()

    @staticmethod
    def _fields(path: str, body: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
        unknown = set(body) - required - optional
        if unknown:
            raise Refusal(400, "BadRequest", f"{path} takes no field(s) {sorted(unknown)}")
        missing = sorted(required - set(body))
        if missing:
            raise Refusal(400, "BadRequest", f"{path} needs field(s) {missing}")

    async def _ddl(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if path == "/create-table":
            return await self.create_table(body["name"], body["columns"])
        if path == "/create-index":
            return await self.create_index(body["on"], body["keys"], body.get("name"))
        if path == "/create-view":
            return await self.create_view(
                body["name"], body.get("plan"), body.get("from"), body.get("columns")
            )
        if path == "/drop":
            return await self.drop(body["name"], body.get("cascade", False))
        if path == "/create-source":
            return await self.create_source(body["name"], body["connection"])
        if path == "/create-sink":
            return await self.create_sink(body["name"], body["from"], body["connection"])
        return await self.set_read_policy(body["name"], body["policy"])


_DDL_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "/create-table": ({"name", "columns"}, set()),
    "/create-index": ({"on", "keys"}, {"name"}),
    "/create-view": ({"name"}, {"plan", "from", "columns"}),
    "/drop": ({"name"}, {"cascade"}),
    "/create-source": ({"name", "connection"}, set()),
    "/create-sink": ({"name", "from", "connection"}, set()),
    "/read-policy": ({"name", "policy"}, set()),
}
"""Each DDL route's required and optional body fields (anything else is refused)."""


async def _subscribe_lines(header: dict[str, Any], sub: Any) -> AsyncIterator[dict[str, Any]]:
    """The lines of a subscribe's stream (see the module docstring)."""
    yield header
    async for batch in sub:
        lower, upper = frontier_json(batch.lower), frontier_json(batch.upper)
        line: dict[str, Any] = {
            "lower": lower,
            "lower_iso": iso_frontier(lower),
            "upper": upper,
            "upper_iso": iso_frontier(upper),
        }
        if batch.error is not None:
            line["error"] = {"type": "SubscribeFailed", "message": batch.error}
            yield line
            return
        line["updates"] = [
            {"time": t, "time_iso": iso_ms(t), "row": row_to_json(row), "diff": d}
            for t, row, d in batch.updates
        ]
        yield line
    if not sub.finished:  # ended without its last batch: the controller is stopping
        yield {"error": {"type": "ControllerStopping", "message": "the controller stopped"}}


_TIME_LIMIT = 2**63
"""Times are milliseconds since the Unix epoch, held as signed 64-bit integers downstream."""


def _time_field(field: str, value: Any) -> int | None:
    """A request's time ``field``: absent, or a JSON integer in ``[0, 2**63)`` [Refusal 400
    BadRequest for anything else: a fraction is not truncated, a string not parsed]."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value < _TIME_LIMIT:
        raise Refusal(
            400,
            "BadRequest",
            f"{field} must be a time in milliseconds since the Unix epoch (an integer from 0 "
            f"to 2^63 - 1), got {value!r}",
        )
    return value


async def _sql_messages(env: Any, text: str, params: Any) -> AsyncGenerator[dict[str, Any], None]:
    """The messages of a streamed ``POST /sql`` (see the module docstring)."""
    from tidegate.runtime.sql_session import RowStream, SqlSession
    from tidegate.spec.errors import SqlError
    from tidegate.spec.sql import pgtypes as T

    session = SqlSession(env)
    try:
        try:
            async for outcome in session.stream_script(text, params):
                for severity, message in session.notices:
                    yield {"type": "Notice", "payload": {"message": message, "severity": severity}}
                session.notices.clear()
                if isinstance(outcome, RowStream):
                    yield {
                        "type": "CommandStarting",
                        "payload": {"has_rows": True, "is_streaming": True},
                    }
                    yield {
                        "type": "Rows",
                        "payload": {"columns": _columns(outcome.columns, outcome.pg_types)},
                    }
                    sent = 0
                    try:
                        async for batch in outcome.batches:
                            for row in batch:
                                yield {"type": "Row", "payload": row_to_json(row)}
                            sent += len(batch)
                    finally:
                        await outcome.aclose()
                    yield {"type": "CommandComplete", "payload": f"{outcome.tag} {sent}"}
                    continue
                has_rows = bool(outcome.columns)
                yield {
                    "type": "CommandStarting",
                    "payload": {"has_rows": has_rows, "is_streaming": False},
                }
                if has_rows:
                    pg_types = outcome.pg_types or tuple(
                        T.for_scalar(t.scalar) for t in outcome.types
                    )
                    yield {
                        "type": "Rows",
                        "payload": {"columns": _columns(outcome.columns, pg_types)},
                    }
                    for row in outcome.to_json()["rows"]:
                        yield {"type": "Row", "payload": row}
                if outcome.notice:
                    yield {
                        "type": "Notice",
                        "payload": {"message": outcome.notice, "severity": "NOTICE"},
                    }
                yield {"type": "CommandComplete", "payload": outcome.status}
        except SqlError as e:
            yield {"type": "Error", "payload": _error_payload(e, e.render(), e.sqlstate)}
        except TidegateError as e:
            yield {"type": "Error", "payload": _error_payload(e, str(e), "XX000")}
        yield {"type": "ReadyForQuery", "payload": session.transaction_status}
    finally:  # a transaction left open ends with the request (its read holds go back)
        await session.aclose()


def _columns(names: Sequence[str], pg_types: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"name": n, "type": t.sql_name, "type_oid": t.oid, "type_len": t.length}
        for n, t in zip(names, pg_types, strict=True)
    ]


def _error_payload(e: Exception, message: str, code: str) -> dict[str, Any]:
    out = {"type": type(e).__name__, "message": message, "code": code}
    hint = getattr(e, "hint", None)
    if hint:
        out["hint"] = hint
    return out


def _rows_of(result: Any) -> list[tuple[Any, int]]:
    rows = getattr(result, "rows", result)
    return [(tuple(r), int(n)) for r, n in rows]


_CLUSTER_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "/cluster-create": ({"name"}, {"size", "replication_factor"}),
    "/cluster-drop": ({"name"}, {"cascade"}),
    "/cluster-alter": ({"name"}, {"size", "replication_factor"}),
    "/cluster-replica-add": ({"cluster", "name"}, {"size", "address"}),
    "/cluster-replica-drop": ({"cluster", "name"}, set()),
}
"""The cluster requests' required and optional fields."""
