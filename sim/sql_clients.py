"""The SQL clients of a simulation: DDL, reads and writes as SQL, through sessions and the wire.

Besides the clients of :mod:`.clients`, which call the ``Environment`` API,
every run has SQL clients that say what they want in SQL, through the same
session layer ``POST /sql``, ``tidegate sql`` and the wire protocol use
(:class:`tidegate.runtime.sql_session.SqlSession`). A share of their sessions
go through the PostgreSQL wire protocol: a client of the simulator's own
(:mod:`.pg_client`, SCRAM-authenticated) speaks to the product's server
(:class:`tidegate.runtime.pgwire.server.PgwireServer`, one connection per
session over a :class:`~.pg_client.BytePipe` on the simulated clock: its
protocol machine and session handling, not its socket listener), in the
simple and the extended protocol, with values in text and in binary, and
fetching in portions. So the front end, binding, lowering, the session's
transactions and the wire codec all run under the run's faults.

The actions (weights in :class:`~.scenario.WorkloadMix`):

* ``sql_query``: a query drawn by :mod:`.sql_gen` over the tables, the SQL
  clients' views and materialized views and the scenario's materialized
  views; the answer is recorded as a peek carrying its reference plan, and
  the checkers judge it as any peek (strict serializability included). A
  query the generator drew must be accepted: a refusal as a syntax, binding
  or unsupported-feature error is a finding (``sql_queries_accepted``). Each
  construct the query drew counts ``sql:<construct>`` when drawn and
  ``sql_judged:<construct>`` when its answer is judged;
* ``sql_insert``: ``INSERT ... VALUES`` into a table, on its own or in a
  ``BEGIN ... COMMIT`` block; through a session the write's timestamp is
  known, through the wire (or a block) it is not: the append is then
  recorded as acknowledged at an unknown time, and the end of the run finds
  where it landed -- it must have (``acknowledged_appends_durable``);
* ``sql_ddl``: ``CREATE TABLE`` of a table of the pool (then at once an
  ``INSERT`` into it, while other sessions' DDL may be in flight),
  ``DROP TABLE [CASCADE]``, ``CREATE [MATERIALIZED] VIEW`` of a drawn query,
  ``CREATE INDEX`` on a view, table or materialized view, ``DROP ...
  [CASCADE]``. A table whose ``CREATE`` was acknowledged takes an ``INSERT``
  until someone drops it (``created_tables_writable``);
* ``sql_subscribe``: ``SUBSCRIBE (query) WITH (PROGRESS) UP TO t`` of a drawn
  query (no top-level ``ORDER BY``/``LIMIT``), ``t`` a little after now; it
  ends by itself once the frontier reaches ``t``. Its rows must start with a
  progress row at the as_of, never go back in time, and hold only changes in
  ``[as_of, t)`` (``subscribe_bounded``); accumulated, they are the query's
  contents at ``t - 1``, recorded as a peek at that time and judged against
  the reference as any peek. An ``UP TO`` that the as_of passed (a clock ahead
  of the simulated one) is a typed refusal (``22000``), counted;
* ``sql_bad``: a statement with one planted defect (:mod:`.sql_bad`), alone or
  after a good ``INSERT`` in a block or a script: refused with the SQLSTATE
  PostgreSQL refuses it with (``sql_refused_as_postgresql``), the session
  usable after (``sessions_survive_refusals``), and none of its rows landed
  (``no_phantom_writes``);
* ``sql_copy``: over the wire, ``COPY t [(cols)] FROM STDIN`` of rows in the
  text format, sent in ``CopyData`` pieces cut where the draws say -- now and
  then ended by ``CopyFail`` (refused ``57014``) or carrying a line of the wrong
  width (``22P04``): then none of its rows may land -- recorded as an append
  acknowledged at a time the client is not told; and ``COPY (query) TO STDOUT``,
  its text output read back by the query's column types and judged as the
  query's answer;
* ``sql_read``: a read-only transaction (``BEGIN``, two queries of a relation
  each, the first again, ``COMMIT``) on one session: each read judged as a
  fresh read whose window opens at ``BEGIN``, and the first query answered the
  same twice (``read_transaction_repeatable``); a second query of another
  relation whose since passed the transaction's time is refused ``25000``
  (outside its time domain), counted.

Plans read base tables through symbolic ids (:func:`~.sql_gen.symbol`), one
per table name (the scenario's tables, its sources, the pool's tables); a
query's plan is bound to the catalog's ids when it runs. A query that ran
while DDL on one of its tables was in flight is not judged (which table it
read is not known). Controller restarts end every session; the next
incarnation opens new ones and learns from the catalog which of the SQL
objects exist.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import trio

from tidegate.runtime.environment import Environment
from tidegate.runtime.errors import UnknownCatalogObject
from tidegate.runtime.pgwire.auth import AuthConfig
from tidegate.runtime.pgwire.server import PgwireOptions, PgwireServer
from tidegate.runtime.pgwire.session import sqlstate_of
from tidegate.runtime.sql_session import SqlSession
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    Column,
    Get,
    Plan,
    Schema,
    gets,
    plan_from_dict,
    plan_to_dict,
    replace_gets,
    typecheck,
)
from tidegate.spec.protocol.types import RowSetFinishing

from .choices import ChoiceSource, chance, pick
from .history import ClientHistory, finishing_from_json, finishing_to_json, row_out
from .pg_client import (
    BytePipe,
    PgError,
    PgProtocolBroken,
    PgResult,
    WireClient,
    copy_text_row,
    copy_text_rows,
)
from .process import ProcessKilled
from .scenario import DEFAULT_CLUSTER, SQL_ACTIONS, DataflowSpec, Scenario, SourceSpec
from .sql_bad import WRAPS, BadStatement, draw_bad_read, draw_bad_write, sql_literal
from .sql_gen import CONSTRUCTS, WORDS, QueryInput, SqlGen, symbol
from .world_port import WorldPort


class _Spawner(Protocol):
    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None: ...


class _SqlWorld(WorldPort, Protocol):
    """What the SQL clients use of the world: its services, and the controller process whose
    wire sessions they open."""

    @property
    def controller(self) -> _Spawner: ...

    def storage_damaged(self) -> bool:
        """Whether the storage is damaged (rot, a lost record, a full disk) or was a moment ago."""
        ...

    def disk_was_full(self, since_ms: int) -> bool:
        """Whether the disk was full at some moment since ``since_ms``."""
        ...


class _Owner(Protocol):
    """What the SQL clients use of the workload they belong to (:class:`.clients.Clients`,
    typed here by what it offers so that neither module needs the other)."""

    @property
    def world(self) -> _SqlWorld: ...

    scenario: Scenario
    history: ClientHistory
    source: ChoiceSource
    schemas: dict[str, Schema]
    specs: dict[str, DataflowSpec]
    clusters: set[str]
    source_specs: dict[str, SourceSpec]
    table_ids: dict[str, GlobalId]
    source_ids: dict[str, GlobalId]
    objects: dict[str, GlobalId]
    sql_marker: int

    def _died(self, ev: dict[str, Any]) -> None: ...


__all__ = ["POOL", "SQL_ACTIONS", "SqlClients", "sql_target"]

_T = TypeVar("_T")


SESSIONS = 4
"""Sessions per controller incarnation: the even ones direct, the odd ones over the wire."""
USER, PASSWORD = "sim", "sim-secret"
LATENCY_MS = (0, 2)
"""Each piece of a wire connection's bytes travels this long (virtual ms)."""
MARKER_BASE = 1000
"""Rows whose write time the client cannot learn carry a unique integer from here on."""


@dataclass(frozen=True)
class PoolTable:
    """A table the SQL clients create and drop: ``name`` and its columns with their SQL types."""

    name: str
    schema: Schema
    sql_types: tuple[tuple[str, ...], ...]
    """Each column's SQL type, in the spellings PostgreSQL accepts for it."""

    def ddl(self, choices: ChoiceSource, if_not_exists: bool) -> str:
        cols = []
        for c, spellings in zip(self.schema.columns, self.sql_types, strict=True):
            cols.append(
                f"{c.name} {pick(choices, spellings)}{'' if c.type.nullable else ' NOT NULL'}"
            )
        guard = "IF NOT EXISTS " if if_not_exists else ""
        return f"CREATE TABLE {guard}{self.name} ({', '.join(cols)})"


_INT, _TEXT, _BOOL = ("bigint", "int8"), ("text",), ("boolean", "bool")
POOL = (
    PoolTable(
        "sq_a",
        Schema.of(("customer", "string", False), ("amount", "int64"), ("flag", "bool")),
        (_TEXT, _INT, _BOOL),
    ),
    PoolTable("sq_b", Schema.of(("kind", "string"), ("n", "int64", False)), (_TEXT, _INT)),
)
"""The tables the SQL clients create and drop (names shared with the scenario's columns, so
joins find columns in common)."""

_ACCEPTED = ("42P01", "40001", "25006", "57P01", "57P03")
"""The refusals a statement the generator drew may meet: a relation that is gone (42P01), a
read whose inputs went (40001), a controller that may not write (25006: an upgrade's
read-only incarnation) or is going (57P01, 57P03). Anything else -- a syntax, binding or
unsupported-feature error, a data exception, an internal error -- is a finding."""
UNKNOWN_CLUSTER = "42704"
"""Materialize's refusal of a statement run in (or placing a dataflow on) a cluster that does
not exist: ``unknown cluster 'c'``, undefined_object."""
OUTCOME_UNKNOWN = "08007"
"""PostgreSQL's transaction_resolution_unknown: a write that reached storage but could not be
acknowledged (a newer controller took over); recorded in doubt, its landing decided from disk."""
DISK_FULL = "53100"
"""PostgreSQL's disk_full: the refusal of a write begun while the disk was full (and only then;
with nothing applied)."""
INPUT_DROPPED = "55000"
"""object_not_in_prerequisite_state: the refusal of a query an input of which a client dropped
while it ran (and only then)."""
DATA_CORRUPTED = "XX001"
"""PostgreSQL's data_corrupted: the refusal of a statement that met a damaged record, while the
storage is damaged (and only then; the one ``XX`` code that is not an internal error here)."""
_GOING = ("25006", "57P01", "57P03")
"""The refusals of a controller that may not write (an upgrade's read-only incarnation) or is
being replaced: even a table just created may refuse a write then."""


def sql_target(ev: Mapping[str, Any]) -> GlobalId:
    """The reference model's id of SQL query ``ev`` (unique in a history)."""
    return GlobalId.transient(3_000_000_000 + int(ev["n"]))


@dataclass
class SqlObject:
    """A view, materialized view or index the SQL clients created (or tried to)."""

    name: str
    kind: str
    """``view``, ``materialized_view`` or ``index``."""
    plan: Plan
    """Its rows' reference plan, over symbolic ids (an index: what it indexes)."""
    reads: tuple[str, ...]
    """The base tables it reads (by name), through the views and objects it was defined on."""
    on: str | None = None
    """An index: the object it indexes."""
    columns: tuple[str, ...] = ()
    """Its columns' names in SQL (those of the plan's output may differ)."""

    def schema(self) -> Schema:
        types = [c.type for c in typecheck(self.plan).columns]
        names = self.columns or tuple(c.name for c in typecheck(self.plan).columns)
        return Schema(tuple(Column(n, t) for n, t in zip(names, types, strict=True)))


@dataclass(eq=False)
class _Session:
    """One client connection (direct: a ``SqlSession``; wire: a connection to the server)."""

    k: int
    lock: trio.Lock = field(default_factory=trio.Lock)
    direct: SqlSession | None = None
    wire: WireClient | None = None
    pipe: BytePipe | None = None
    failed: bool = False


@dataclass
class _Answer:
    """What a statement answered, through either path: rows (``None`` for a command), its tag,
    the write time if the session knew it."""

    tag: str
    rows: list[Row] | None = None
    time: int | None = None


@dataclass
class _Watch:
    """A read being watched for DDL: its plan over the catalog's ids when it began (``None``: a
    table it reads was not known to exist), how many DDL statements on each table it reads had
    started, and whether one was running. A read is judged only if none started, nor was
    running, while it ran (which table it read is not known otherwise)."""

    clients: SqlClients
    bound: Plan | None
    started: dict[str, int]
    busy: bool

    def judged(self) -> Plan | None:
        """The bound plan to judge the read's answer by, if it can be judged (see the class
        docstring); else ``None``."""
        started, running = self.clients.ddl_started, self.clients.ddl_running
        raced = self.busy or any(
            started.get(t, 0) != n or running.get(t, 0) for t, n in self.started.items()
        )
        return None if raced else self.bound


class _Refused(Exception):
    """A statement's typed refusal: its SQLSTATE and message."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(f"{sqlstate}: {message}")
        self.sqlstate = sqlstate
        self.message = message


class SqlClients:
    """The SQL clients of a run (see the module docstring)."""

    def __init__(self, owner: _Owner) -> None:
        self.owner = owner
        self.world = owner.world
        self.history = owner.history
        scenario = owner.scenario
        self.base: list[str] = [t.id for t in scenario.tables]
        self.base += [s.name for s in scenario.sources]
        self.base += [p.name for p in POOL]
        self.symbols = {name: symbol(k) for k, name in enumerate(self.base)}
        self.pool = {p.name: p for p in POOL}
        self.tables: dict[str, GlobalId] = {}
        """Pool tables known to exist, by name."""
        self.defined: dict[str, SqlObject] = {}
        """Every object the SQL clients tried to create, by name (names are never reused)."""
        self.objects: dict[str, GlobalId] = {}
        """Those known to exist."""
        self.ddl_started: dict[str, int] = {}
        """Per base table name: how many DDL statements on it started (a query judged only if
        none started, nor was running, while it ran)."""
        self.ddl_running: dict[str, int] = {}
        self.sessions: list[_Session] = []
        """The sessions of the controller that came up last (see :meth:`come_up`)."""
        self.env: Environment | None = None
        self.elsewhere: dict[int, list[_Session]] = {}
        """Direct sessions of another controller (a zombie predecessor still acting), by its
        environment's ``id``: a session speaks to one environment only."""
        self.server: PgwireServer | None = None
        self.io: ChoiceSource = owner.world.streams.sql_io or owner.world.streams.network
        self.placed: dict[str, str] = {}
        """The objects the SQL clients created ``IN CLUSTER`` (``sql_cluster``): name -> cluster."""
        self._nonce = 0

    # -- incarnations ---------------------------------------------------------------------------
    def come_up(self, env: Environment) -> None:
        """A controller is up: new sessions; learn which pool tables and SQL objects exist."""
        self.sessions = [_Session(k) for k in range(SESSIONS)]
        self.env = env
        self.elsewhere.clear()
        self.server = None
        for name in [p.name for p in POOL]:
            try:
                gid = env.resolve(name)
            except UnknownCatalogObject:
                self.tables.pop(name, None)
                continue
            if self.tables.get(name) != gid:
                self.tables[name] = gid
                self._note_table(name, gid)
        for name in sorted(self.defined):
            try:
                gid = env.resolve(name)
            except UnknownCatalogObject:
                self.objects.pop(name, None)
                continue
            if self.objects.get(name) != gid:
                self.objects[name] = gid
                self._note_object(name, gid)

    def _note_table(self, name: str, gid: GlobalId) -> None:
        self.history.note("table", self.world.kernel.now_ms, name=name, id=str(gid))

    def _note_object(self, name: str, gid: GlobalId) -> None:
        obj = self.defined[name]
        if obj.kind == "view":
            return  # no collection of its own
        plan = self._bound(obj.plan)
        if plan is None:
            return
        self.history.note(
            "install",
            self.world.kernel.now_ms,
            id=str(gid),
            name=name,
            kind=obj.kind if obj.kind != "index" else "index",
            plan=plan_to_dict(plan),
            **({"cluster": self.placed[name]} if name in self.placed else {}),
        )

    # -- what queries read ----------------------------------------------------------------------
    def relations(self) -> list[QueryInput]:
        """What a query may read now (by what the clients know exists)."""
        out: list[QueryInput] = []
        for t in self.owner.scenario.tables:
            out.append(QueryInput(t.id, t.schema, Get(self.symbols[t.id], t.schema)))
        for p in POOL:
            if p.name in self.tables:
                out.append(QueryInput(p.name, p.schema, Get(self.symbols[p.name], p.schema)))
        for name in sorted(self.objects):
            obj = self.defined[name]
            if obj.kind in ("view", "materialized_view"):
                out.append(QueryInput(name, obj.schema(), obj.plan))
        scenario_ids = {
            GlobalId.parse(t.id): self.symbols[t.id] for t in self.owner.scenario.tables
        }
        for name in sorted(self.owner.objects):
            spec = self.owner.specs[name]
            if spec.kind != "materialized_view" or any(
                str(g) in self.owner.source_specs for g in gets(spec.plan)
            ):
                continue
            plan = replace_gets(spec.plan, scenario_ids)
            schema = typecheck(plan)
            names = [c.name for c in schema.columns]
            if len(set(names)) == len(names) and all(n.isidentifier() for n in names):
                out.append(QueryInput(name, schema, plan))
        return out

    def _invoke_read(
        self, name: str, at: int | None, finishing: Any, sql: Any, via: str
    ) -> dict[str, Any]:
        """Record a SQL read's invocation as a peek of its own reference target
        (:func:`sql_target`), judged like any peek once answered."""
        ev = self.history.invoke(
            "peek",
            self.world.kernel.now_ms,
            target="",
            name=name,
            at=at,
            finishing=finishing,
            expect="answer",
            sql=sql,
            via=via,
        )
        ev["target"] = str(sql_target(ev))
        return ev

    def _watch(self, plan: Plan) -> _Watch:
        """Start watching a read of ``plan`` for DDL on the tables it reads (see :class:`_Watch`)."""
        reads = self._reads(plan)
        return _Watch(
            self,
            self._bound(plan),
            {t: self.ddl_started.get(t, 0) for t in reads},
            any(self.ddl_running.get(t, 0) for t in reads),
        )

    def _reads(self, plan: Plan) -> tuple[str, ...]:
        by_symbol = {v: k for k, v in self.symbols.items()}
        return tuple(sorted({by_symbol[g] for g in gets(plan) if g in by_symbol}))

    def _ids(self) -> dict[GlobalId, GlobalId]:
        ids: dict[GlobalId, GlobalId] = {}
        for t in self.owner.scenario.tables:
            if t.id in self.owner.table_ids:
                ids[self.symbols[t.id]] = self.owner.table_ids[t.id]
        for s in self.owner.scenario.sources:
            if s.id in self.owner.source_ids:
                ids[self.symbols[s.name]] = self.owner.source_ids[s.id]
        for name, gid in self.tables.items():
            ids[self.symbols[name]] = gid
        return ids

    def _bound(self, plan: Plan) -> Plan | None:
        """``plan`` over the catalog's ids (``None`` if a table it reads is not known to exist)."""
        ids = self._ids()
        symbols = set(self.symbols.values())
        if any(g in symbols and g not in ids for g in gets(plan)):
            return None
        return replace_gets(plan, ids)

    # -- sessions ---------------------------------------------------------------------------------
    async def _session(self, env: Environment, k: int) -> _Session:
        if env is not self.env:  # a zombie's client: its own sessions, direct ones
            others = self.elsewhere.setdefault(id(env), [_Session(2 * j) for j in range(SESSIONS)])
            s = others[k % len(others)]
            if s.direct is None:
                s.direct = SqlSession(env)
            return s
        s = self.sessions[k % len(self.sessions)]
        if s.direct is None and s.wire is None and not s.failed:
            if s.k % 2 == 0:
                s.direct = SqlSession(env)
            else:
                await self._connect(env, s)
        return s

    async def _connect(self, env: Environment, s: _Session) -> None:
        if self.server is None:
            self.server = PgwireServer(env, PgwireOptions(AuthConfig({USER: PASSWORD})))
        pipe = BytePipe(self.world.kernel, self.io, LATENCY_MS)
        server = self.server
        self.world.controller.spawn(server.handle_stream, pipe.server)
        client = WireClient(pipe.client)
        self._nonce += 1
        await client.connect(USER, PASSWORD, f"simnonce{self._nonce:08d}")
        s.pipe, s.wire = pipe, client
        self.world.count("sql_wire_connected")

    async def _statement(
        self,
        env: Environment,
        k: int,
        sql: str,
        params: Sequence[Any],
        mode: str,
        *,
        cluster: str | None = None,
    ) -> _Answer:
        """Run ``sql`` on session ``k`` [_Refused; PgProtocolBroken; the runtime's errors are
        refusals]; with ``cluster``, after ``SET cluster`` to it, and ``RESET cluster`` after
        (the session is the action's meanwhile: other actions' statements keep the default)."""
        s = await self._session(env, k)
        async with s.lock:
            if cluster is None:
                return await self._on(s, sql, params, mode)
            await self._on(s, f"SET cluster = '{cluster}'", (), "script")
            try:
                return await self._on(s, sql, params, mode)
            finally:
                await self._on(s, "RESET cluster", (), "script")

    async def _on(self, s: _Session, sql: str, params: Sequence[Any], mode: str) -> _Answer:
        """Run ``sql`` on session ``s``, whose lock the caller holds (see :meth:`_statement`)."""
        if s.direct is not None:
            return await self._direct(s.direct, sql, params, mode)
        assert s.wire is not None
        return await self._wire(s.wire, sql, params, mode)

    async def _direct(
        self, session: SqlSession, sql: str, params: Sequence[Any], mode: str
    ) -> _Answer:
        try:
            if mode == "script":
                results = await session.run_script(sql, list(params) or None)
                result = results[-1]
            else:
                prepared = session.prepare(sql)
                try:
                    outcome = await session.execute(prepared, list(params))
                except BaseException:
                    session.fail()
                    raise
                result = outcome  # type: ignore[assignment]
                if not hasattr(result, "status"):
                    raise _Refused("XX000", f"a statement answered {type(outcome).__name__}")
        except TidegateError as e:
            raise _Refused(sqlstate_of(e), str(e).splitlines()[0]) from e
        rows = list(result.rows) if result.columns else None
        return _Answer(result.status, rows, result.time)

    async def _wire(
        self, client: WireClient, sql: str, params: Sequence[Any], mode: str
    ) -> _Answer:
        if mode == "script" and not params:
            results = await client.simple(sql)
            last = results[-1] if results else PgResult()
            for r in results:
                if isinstance(r, PgError):
                    raise _Refused(r.sqlstate, r.message)
            assert isinstance(last, PgResult)
            return _Answer(last.tag, last.rows if last.names else None)
        try:
            r = await client.extended(
                sql,
                params,
                binary=mode == "binary",
                max_rows=2 if mode == "portions" else 0,
            )
        except PgError as e:
            raise _Refused(e.sqlstate, e.message) from e
        return _Answer(r.tag, r.rows if r.names else None)

    # -- running an action, recording its outcome ------------------------------------------------
    async def _outcome(self, ev: dict[str, Any], run: Callable[[], Awaitable[_T]]) -> _T | None:
        """Await ``run()`` for op ``ev``; on a refusal record it and return ``None``."""
        try:
            return await run()
        except (trio.Cancelled, ProcessKilled):
            self.owner._died(ev)
            raise
        except _Refused as e:
            if e.sqlstate == OUTCOME_UNKNOWN:  # a write that may have landed: found on disk
                self.history.info(ev, self.world.kernel.now_ms, f"{e.sqlstate}: {e.message}")
                self.world.count("sql_outcome_unknown")
                return None
            self.history.fail(ev, self.world.kernel.now_ms, f"{e.sqlstate}: {e.message}")
            if e.sqlstate.startswith("XX") and not self._damage_met(e.sqlstate):
                self.world.violate(
                    "typed_errors", f"{ev['op']} {ev['n']} ({ev.get('sql', '')}): {e.message}"
                )
            return None
        except PgProtocolBroken as e:
            self.world.violate(
                "wire_protocol_readable", f"{ev['op']} {ev['n']}: the server's bytes: {e}"
            )
            return None
        except Exception as e:  # an untyped error escaped the session layer: a finding
            self.history.fail(ev, self.world.kernel.now_ms, e)
            self.world.violate(
                "typed_errors", f"{ev['op']} {ev['n']} raised an untyped {type(e).__name__}: {e}"
            )
            return None

    def _dropped_meanwhile(self, ev: Mapping[str, Any], error: str) -> bool:
        """Whether the object ``error`` names was dropped by a client while query ``ev`` ran."""
        named = error.split(":", 1)[-1].split()
        if not named:
            return False
        for d in [*self.history.ops("drop"), *self.history.ops("drop_cluster")]:
            gone = {d.get("id"), *d.get("gone", ())}
            if named[0] in gone and d.get("complete_ms", ev["invoke_ms"]) >= ev["invoke_ms"]:
                self.world.count("sql_query_input_dropped")
                return True
        return False

    def _damage_met(self, sqlstate: str) -> bool:
        """Whether ``sqlstate`` is a statement's refusal for meeting damaged storage (a record
        whose checksum does not match), and the storage is damaged."""
        return sqlstate == DATA_CORRUPTED and self.world.storage_damaged()

    # -- draws ----------------------------------------------------------------------------------
    def draw(self, kind: str) -> dict[str, Any] | None:
        return getattr(self, f"_draw_{kind}")()  # type: ignore[no-any-return]

    async def run(self, env: Environment, kind: str, args: Mapping[str, Any]) -> None:
        await getattr(self, f"_do_{kind}")(env, args)

    def _temporal(self, per_mille: int = 300) -> dict[str, Any]:
        """What a query drawn now needs to draw temporal filters: the time, and their own
        stream (the workload's draws stay as they were without them)."""
        return {
            "now_ms": self.world.kernel.now_ms,
            "temporal_per_mille": per_mille,
            "temporal_choices": self.world.streams.sql_temporal,
        }

    def _mode(self, source: ChoiceSource) -> str:
        return pick(source, ("script", "script", "prepared", "binary", "portions"))

    # queries
    def _draw_sql_query(self) -> dict[str, Any] | None:
        source = self.owner.source
        relations = self.relations()
        if not relations:
            return None
        q = SqlGen(source, relations, params=True, **self._temporal()).query()
        for c in sorted(set(q.constructs)):
            self.world.count(f"sql:{c}")
        return {
            "sql": q.sql,
            "params": list(q.params),
            "plan": plan_to_dict(q.plan),
            "finishing": finishing_to_json(q.finishing()),
            "session": source.integer(0, SESSIONS - 1),
            "mode": self._mode(source),
            "constructs": sorted(set(q.constructs)),
        }

    async def _do_sql_query(self, env: Environment, args: Mapping[str, Any]) -> None:
        await self._query(env, args, None)

    async def _query(
        self, env: Environment, args: Mapping[str, Any], cluster: str | None
    ) -> dict[str, Any]:
        """Run a drawn query (after ``SET cluster``, with ``cluster``); its history event."""
        plan = plan_from_dict(args["plan"])
        watch = self._watch(plan)
        k = int(args["session"])
        mode = str(args["mode"])
        ev = self._invoke_read(
            "sql", None, dict(args["finishing"]), args["sql"], "wire" if k % 2 else "session"
        )
        sql, params = str(args["sql"]), list(args["params"])
        if mode == "script" and params and k % 2 == 0:
            mode = "prepared"
        if cluster is None:
            answer = await self._outcome(ev, lambda: self._statement(env, k, sql, params, mode))
        else:
            ev["sql_cluster"] = cluster
            answer = await self._outcome(
                ev, lambda: self._statement(env, k, sql, params, mode, cluster=cluster)
            )
        self.world.count(f"sql_query_{ev['via']}_{mode}")
        if answer is None:
            if cluster is None or not str(ev.get("error", "")).startswith(UNKNOWN_CLUSTER):
                self._judge_refusal(ev)
            return ev
        if answer.rows is None:
            self.world.violate("sql_queries_answered", f"query {ev['n']} answered no rows: {sql}")
        fin = finishing_from_json(args["finishing"])
        rows = _counted(answer.rows or [], ordered=bool(fin.order_by))
        judged = watch.judged()
        if judged is not None:
            ev["plan"] = plan_to_dict(judged)
            self.world.count("sql_query_judged")
            for c in args.get("constructs", ()):  # (plans saved before they were recorded: none)
                self.world.count(f"sql_judged:{c}")
        else:
            self.world.count("sql_query_raced_ddl")
        self.history.ok(ev, self.world.kernel.now_ms, rows=rows)
        return ev

    def _judge_refusal(self, ev: Mapping[str, Any]) -> None:
        error = str(ev.get("error", ""))
        state = error.split(":", 1)[0]
        if ev["status"] != "fail":
            return
        self.world.count(f"sql_refused_{state}")
        if state == INPUT_DROPPED and self._dropped_meanwhile(ev, error):
            return
        if state not in _ACCEPTED and not self._damage_met(state):
            self.world.violate(
                "sql_queries_accepted",
                f"query {ev['n']} was refused ({error}), though the generator drew it from the "
                f"supported language: {ev.get('sql')}",
            )

    # read-only transactions
    def _draw_sql_read(self) -> dict[str, Any] | None:
        source = self.owner.source
        relations = self.relations()
        if not relations:
            return None
        queries = []
        for _ in range(2):  # the second may read another relation: taken into the time held
            on = [relations[source.integer(0, len(relations) - 1)]]
            q = SqlGen(source, on, params=True, enabled=_UNJOINED, **self._temporal()).query()
            queries.append(
                {
                    "sql": q.sql,
                    "params": list(q.params),
                    "plan": plan_to_dict(q.plan),
                    "finishing": finishing_to_json(q.finishing()),
                }
            )
        return {
            "queries": queries,
            "session": source.integer(0, SESSIONS - 1),
            "mode": self._mode(source),
            # a client thinking between statements: writes land meanwhile
            "think_ms": source.integer(0, 400),
        }

    async def _do_sql_read(self, env: Environment, args: Mapping[str, Any]) -> None:
        """``BEGIN; q1; q2; q1; COMMIT`` on one session: every read is judged as a fresh read
        whose window opens at ``BEGIN`` (a transaction reads at one time, chosen by its first
        read), and the second answer of ``q1`` must be its first (``read_transaction_repeatable``).
        ``q2`` may read another relation: it is read at that time too, or refused as outside
        the transaction's time domain."""
        k = int(args["session"])
        queries = [*args["queries"], args["queries"][0]]
        via = "wire" if k % 2 else "session"
        watches = [self._watch(plan_from_dict(q["plan"])) for q in queries]
        evs = [
            self._invoke_read("sql_read", None, dict(q["finishing"]), q["sql"], via)
            for q in queries
        ]

        def skip(rest: Sequence[dict[str, Any]]) -> None:
            for ev in rest:
                if ev["status"] == "pending":
                    self.history.fail(ev, self.world.kernel.now_ms, "not run: the block failed")

        try:
            await self._read_block(env, k, args, queries, watches, evs, skip)
        except (trio.Cancelled, ProcessKilled):
            for ev in evs:
                self.owner._died(ev)
            raise

    async def _read_block(
        self,
        env: Environment,
        k: int,
        args: Mapping[str, Any],
        queries: Sequence[Mapping[str, Any]],
        watches: Sequence[_Watch],
        evs: Sequence[dict[str, Any]],
        skip: Callable[[Sequence[dict[str, Any]]], None],
    ) -> None:
        s = await self._outcome(evs[0], lambda: self._session(env, k))
        if s is None:
            return skip(evs)
        async with s.lock:
            began = await self._outcome(evs[0], lambda: self._on(s, "BEGIN", (), "script"))
            if began is None:
                return skip(evs)
            answers: list[list[list[Any]] | None] = []
            failed = False
            for q, watch, ev in zip(queries, watches, evs, strict=True):
                if failed:
                    break
                await trio.sleep(int(args.get("think_ms", 0)) / 1000)
                sql, params, mode = str(q["sql"]), list(q["params"]), str(args["mode"])
                answer = await self._outcome(ev, functools.partial(self._on, s, sql, params, mode))
                if answer is None:
                    if _outside_domain(ev):  # its since passed the time (see _outside_domain)
                        self.world.count("sql_read_outside_domain")
                    else:
                        self._judge_refusal(ev)
                    failed = True
                    answers.append(None)
                    continue
                rows = _counted(answer.rows or [], ordered=bool(q["finishing"].get("order_by")))
                judged = watch.judged()
                if judged is not None:
                    ev["plan"] = plan_to_dict(judged)
                    self.world.count("sql_read_judged")
                self.history.ok(ev, self.world.kernel.now_ms, rows=rows)
                answers.append(rows if judged is not None else None)
            skip(evs)
            end = "ROLLBACK" if failed else "COMMIT"
            with contextlib.suppress(_Refused, PgProtocolBroken):
                await self._on(s, end, (), "script")
        self.world.count(f"sql_read_{'failed' if failed else 'committed'}")
        first, again = answers[0], answers[-1] if len(answers) == len(queries) else None
        if first is not None and again is not None:
            self.world.count("sql_read_repeated")
            if sorted(map(repr, first)) != sorted(map(repr, again)):
                self.world.violate(
                    "read_transaction_repeatable",
                    f"read transaction {evs[0]['n']}..{evs[-1]['n']} answered {queries[0]['sql']} "
                    f"twice, differently: {first[:4]} then {again[:4]}",
                )

    # bounded subscribes
    def _draw_sql_subscribe(self) -> dict[str, Any] | None:
        source = self.owner.source
        relations = self.relations()
        if not relations:
            return None
        q = SqlGen(source, relations, **self._temporal()).query(top=False)
        return {
            "sql": q.sql,
            # (a DISTINCT ON's ORDER BY ... LIMIT may still end the query: its rows' meaning)
            "plan": plan_to_dict(q.relation()),
            "ahead_ms": source.integer(50, 1500),
            "session": source.integer(0, SESSIONS - 1),
        }

    async def _do_sql_subscribe(self, env: Environment, args: Mapping[str, Any]) -> None:
        plan = plan_from_dict(args["plan"])
        watch = self._watch(plan)
        k = int(args["session"])
        up_to = self.world.kernel.now_ms + int(args["ahead_ms"])
        sql = f"SUBSCRIBE ({args['sql']}) WITH (PROGRESS) UP TO {up_to}"
        ev = self._invoke_read(
            "sql_subscribe",
            up_to - 1,
            finishing_to_json(RowSetFinishing()),
            sql,
            "wire" if k % 2 else "session",
        )
        answer = await self._outcome(ev, lambda: self._statement(env, k, sql, (), "script"))
        self.world.count(f"sql_subscribe_{ev['via']}")
        if answer is None:
            if str(ev.get("error", "")).startswith("22000:"):
                self.world.count("sql_subscribe_up_to_passed")
                return
            self._judge_refusal(ev)
            return
        counts = self._bounded_changes(ev, answer, up_to)
        if counts is None:
            return
        judged = watch.judged()
        if judged is not None:
            ev["plan"] = plan_to_dict(judged)
            self.world.count("sql_subscribe_judged")
        self.history.ok(
            ev, self.world.kernel.now_ms, rows=[[list(r), n] for r, n in counts.items()]
        )

    def _bounded_changes(
        self, ev: Mapping[str, Any], answer: _Answer, up_to: int
    ) -> dict[Row, int] | None:
        """The changes of a ``SUBSCRIBE ... WITH (PROGRESS) UP TO up_to``'s rows, accumulated;
        ``None`` (and a violation) if the rows are not what Materialize documents."""
        rows = answer.rows or []

        def bad(why: str) -> None:
            self.world.violate("subscribe_bounded", f"subscribe {ev['n']} ({ev['sql']}): {why}")

        if not rows or not _is_true(rows[0][1]):
            bad(f"its first row is not a progress row: {rows[:1]}")
            return None
        as_of = int(str(rows[0][0]))
        last = as_of
        counts: dict[Row, int] = {}
        for r in rows:
            t = int(str(r[0]))
            if t < last:
                bad(f"a row at {t} after one at {last}")
                return None
            last = t
            if _is_true(r[1]):
                if t > up_to:
                    bad(f"progress to {t}, past UP TO {up_to}")
                    return None
                continue
            if not as_of <= t < up_to:
                bad(f"a change at {t}, outside [{as_of}, {up_to})")
                return None
            row = tuple(r[3:])
            n = counts.get(row, 0) + int(str(r[2]))
            if n:
                counts[row] = n
            else:
                counts.pop(row, None)
        if any(n < 0 for n in counts.values()):
            bad(f"its changes accumulate to a negative count: {counts}")
            return None
        return counts

    # statements PostgreSQL refuses
    def _draw_sql_bad(self) -> dict[str, Any] | None:
        source = self.owner.source
        k = source.integer(0, SESSIONS - 1)
        if chance(source, 500):

            def marker() -> int:
                self.owner.sql_marker += 1
                return MARKER_BASE + self.owner.sql_marker

            bad = draw_bad_write(
                source, self._writable(), marker, wrap=pick(source, (*WRAPS, "script"))
            )
        else:
            bad = draw_bad_read(source, self.relations())
        if bad is None:
            return None
        mode = "script" if bad.simple else pick(source, ("script", "script", "prepared"))
        return {"bad": bad.to_json(), "session": k, "mode": mode}

    async def _do_sql_bad(self, env: Environment, args: Mapping[str, Any]) -> None:
        bad = BadStatement.from_json(dict(args["bad"]))
        k, mode = int(args["session"]), str(args["mode"])
        self.world.count(f"sql_bad:{bad.kind}")
        gid = self._table_id(bad.table) if bad.table is not None else None
        if bad.table is not None and gid is not None:
            ev = self.history.invoke(
                "append",
                self.world.kernel.now_ms,
                batches=[[str(gid), [[row_out(r), 1] for r in bad.rows]]],
                sql=bad.sql,
                expect="refusal",
            )
        else:
            ev = self.history.invoke("sql", self.world.kernel.now_ms, sql=bad.sql, expect="refusal")
        answer = await self._outcome(ev, lambda: self._statement(env, k, bad.sql, (), mode))
        if answer is not None:
            self.history.ok(ev, self.world.kernel.now_ms)
            if not (bad.empty_ok and answer.rows == []):
                self.world.violate(
                    "sql_refused_as_postgresql",
                    f"{bad.kind} statement {ev['n']} was answered {answer.tag!r} "
                    f"({(answer.rows or [])[:2]}); PostgreSQL refuses it ({bad.sqlstate}): "
                    f"{bad.sql}",
                )
            self.world.count("sql_bad_empty_answer")
            return
        error = str(ev.get("error", ""))
        state = error.split(":", 1)[0]
        if ev["status"] != "fail":
            return
        if state == bad.sqlstate:
            self.world.count("sql_bad_refused_as_postgresql")
        elif not self._expected_otherwise(bad, ev, state):
            self.world.violate(
                "sql_refused_as_postgresql",
                f"{bad.kind} statement {ev['n']} was refused with {error!r}; PostgreSQL refuses it "
                f"with {bad.sqlstate}: {bad.sql}",
            )
        await self._still_usable(env, k, bad)

    def _expected_otherwise(self, bad: BadStatement, ev: Mapping[str, Any], state: str) -> bool:
        """Whether refusal ``state`` of ``bad`` (other than PostgreSQL's for its defect) is what
        the run's weather explains: a controller going, damage, a full disk, or a relation it
        names dropped by another client (they are refused before the defect is seen)."""
        if state in _GOING or self._damage_met(state):
            return True
        if state == DISK_FULL and bad.table is not None:
            return self.world.disk_was_full(int(ev["invoke_ms"]))
        droppable = set(self.pool) | set(self.defined)
        return state in ("42P01", "40001", INPUT_DROPPED) and bool(droppable & set(bad.reads))

    async def _still_usable(self, env: Environment, k: int, bad: BadStatement) -> None:
        """After a refusal the session answers its next statement (a block is rolled back
        first: its transaction is aborted until then)."""
        probe = "ROLLBACK; SELECT 1" if bad.block else "SELECT 1"
        ev = self.history.invoke("sql", self.world.kernel.now_ms, sql=probe, expect="answer")
        answer = await self._outcome(ev, lambda: self._statement(env, k, probe, (), "script"))
        if answer is None:
            state = str(ev.get("error", "")).split(":", 1)[0]
            if ev["status"] == "fail" and state not in _GOING and not self._damage_met(state):
                self.world.violate(
                    "sessions_survive_refusals",
                    f"after {bad.kind} ({bad.sql}) was refused, its session refused {probe!r}: "
                    f"{ev.get('error')}",
                )
            return
        self.history.ok(ev, self.world.kernel.now_ms)
        if [list(r) for r in answer.rows or []] not in ([[1]], [["1"]]):
            self.world.violate(
                "sessions_survive_refusals",
                f"after {bad.kind} was refused, its session answered {probe!r} with {answer.rows}",
            )
        self.world.count("sql_bad_session_usable")

    # COPY over the wire
    def _draw_sql_copy(self) -> dict[str, Any] | None:
        source = self.owner.source
        k = 2 * source.integer(0, SESSIONS // 2 - 1) + 1  # a wire session
        cuts = sorted(source.integer(0, 1000) for _ in range(source.integer(0, 3)))
        if chance(source, 500):
            targets = self._writable()
            if not targets:
                return None
            name, schema = pick(source, targets)
            rows = [self._rows(source, schema, True)[0] for _ in range(source.integer(1, 5))]
            end = pick(source, ("done",) * 5 + ("fail", "fail", "short_line"))
            return {"copy": "in", "table": name, "rows": rows, "session": k, "cuts": cuts,
                    "columns": chance(source, 300), "end": end}  # fmt: skip
        relations = self.relations()
        if not relations:
            return None
        q = SqlGen(source, relations, params=False).query()
        return {
            "copy": "out",
            "sql": q.sql,
            "plan": plan_to_dict(q.plan),
            "finishing": finishing_to_json(q.finishing()),
            "session": k,
        }

    async def _do_sql_copy(self, env: Environment, args: Mapping[str, Any]) -> None:
        if args["copy"] == "in":
            await self._copy_in(env, args)
        else:
            await self._copy_out(env, args)

    async def _wire_session(self, env: Environment, k: int) -> _Session | None:
        s = await self._session(env, k)
        return s if s.wire is not None else None

    async def _copy_in(self, env: Environment, args: Mapping[str, Any]) -> None:
        name = str(args["table"])
        gid = self._table_id(name)
        schema = self.pool[name].schema if name in self.pool else self.owner.schemas.get(name)
        if gid is None or schema is None:
            return
        k = int(args["session"])
        rows = [tuple(r) for r in args["rows"]]
        order = list(range(len(schema.columns)))
        cols = ""
        if args["columns"]:
            order = order[::-1]
            cols = " (" + ", ".join(schema.columns[i].name for i in order) + ")"
        data = b"".join(copy_text_row([r[i] for i in order]) for r in rows)
        end = str(args["end"])
        if end == "short_line":  # one field short: PostgreSQL's 22P04, and nothing lands
            data += copy_text_row([rows[0][i] for i in order][:-1] or [None, None])
        cuts = [len(data) * c // 1000 for c in args["cuts"]]
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        sql = f"COPY {name}{cols} FROM STDIN"
        expected = {"fail": "57014", "short_line": "22P04"}.get(end)
        ev = self.history.invoke(
            "append",
            self.world.kernel.now_ms,
            batches=[[str(gid), [[row_out(r), 1] for r in rows]]],
            sql=sql,
            **({"expect": "refusal"} if expected else {}),
        )

        async def run() -> _Answer:
            s = await self._wire_session(env, k)
            if s is None or s.wire is None:
                raise _Refused("08006", "no wire session")
            async with s.lock:
                r = await s.wire.copy_in(
                    sql, pieces, fail="the client gave up" if end == "fail" else None
                )
            if isinstance(r, PgError):
                raise _Refused(r.sqlstate, r.message)
            return _Answer(r.tag)

        answer = await self._outcome(ev, run)
        self.world.count(f"sql_copy_in_{end}")
        if answer is None:
            state = str(ev.get("error", "")).split(":", 1)[0]
            if expected is not None and state == expected:
                self.world.count("sql_copy_in_refused_as_postgresql")
            elif state == "08006":
                self.world.count("sql_copy_no_session")
            elif expected is not None and state not in _GOING and not self._damage_met(state):
                self.world.violate(
                    "sql_refused_as_postgresql",
                    f"copy {ev['n']} ended by {end} was refused with {ev.get('error')!r}; "
                    f"PostgreSQL refuses it with {expected}",
                )
            elif expected is None:
                self._judge_write_refusal(ev, name)
            return
        if expected is not None:
            self.history.ok(ev, self.world.kernel.now_ms)
            self.world.violate(
                "sql_refused_as_postgresql",
                f"copy {ev['n']} ended by {end} was answered {answer.tag!r}; PostgreSQL refuses "
                f"it with {expected}",
            )
            return
        if answer.tag != f"COPY {len(rows)}":
            self.world.violate(
                "sql_command_tags", f"copy {ev['n']} of {len(rows)} rows answered {answer.tag!r}"
            )
        ev["acked"] = True  # its time is not told: found on disk at the end
        self.history.info(ev, self.world.kernel.now_ms, "acknowledged; its time unknown")

    async def _copy_out(self, env: Environment, args: Mapping[str, Any]) -> None:
        plan = plan_from_dict(args["plan"])
        watch = self._watch(plan)
        k = int(args["session"])
        sql = f"COPY ({args['sql']}) TO STDOUT"
        ev = self._invoke_read("sql_copy", None, dict(args["finishing"]), sql, "wire")
        oids = [_OIDS[c.type.scalar.value] for c in typecheck(plan).columns]

        async def run() -> _Answer:
            s = await self._wire_session(env, k)
            if s is None or s.wire is None:
                raise _Refused("08006", "no wire session")
            async with s.lock:
                data, r = await s.wire.copy_out(sql)
            if isinstance(r, PgError):
                raise _Refused(r.sqlstate, r.message)
            return _Answer(r.tag, copy_text_rows(data, oids))

        answer = await self._outcome(ev, run)
        self.world.count("sql_copy_out")
        if answer is None:
            if str(ev.get("error", "")).startswith("08006"):
                return
            self._judge_refusal(ev)
            return
        rows = answer.rows or []
        if answer.tag != f"COPY {len(rows)}":
            self.world.violate(
                "sql_command_tags", f"copy {ev['n']} of {len(rows)} rows answered {answer.tag!r}"
            )
        fin = finishing_from_json(args["finishing"])
        judged = watch.judged()
        if judged is not None:
            ev["plan"] = plan_to_dict(judged)
            self.world.count("sql_copy_out_judged")
        self.history.ok(
            ev, self.world.kernel.now_ms, rows=_counted(rows, ordered=bool(fin.order_by))
        )

    # inserts
    def _writable(self) -> list[tuple[str, Schema]]:
        out = [(t.id, t.schema) for t in self.owner.scenario.tables if _has_int(t.schema)]
        out += [(p.name, p.schema) for p in POOL if p.name in self.tables]
        return out

    def _draw_sql_insert(self) -> dict[str, Any] | None:
        source = self.owner.source
        targets = self._writable()
        if not targets:
            return None
        name, schema = pick(source, targets)
        block = chance(source, 250)
        k = source.integer(0, SESSIONS - 1)
        marked = block or k % 2 == 1
        statements = [self._rows(source, schema, marked) for _ in range(2 if block else 1)]
        return {
            "table": name,
            "rows": statements,
            "block": block,
            "session": k,
            "columns": chance(source, 300),
        }

    def _rows(self, source: ChoiceSource, schema: Schema, marked: bool) -> list[list[Any]]:
        rows = []
        for _ in range(source.integer(1, 3)):
            row: list[Any] = []
            marker_used = False
            for c in schema.columns:
                scalar = c.type.scalar.value
                if scalar == "int64" and marked and not marker_used:
                    self.owner.sql_marker += 1
                    row.append(MARKER_BASE + self.owner.sql_marker)
                    marker_used = True
                elif c.type.nullable and chance(source, 150):
                    row.append(None)
                elif scalar == "string":
                    row.append(pick(source, WORDS))
                elif scalar == "bool":
                    row.append(bool(source.integer(0, 1)))
                else:
                    row.append(source.integer(0, 9))
            rows.append(row)
        return rows

    def _insert_sql(
        self, name: str, schema: Schema, rows: Sequence[Sequence[Any]], columns: bool
    ) -> str:
        cols = ""
        order = list(range(len(schema.columns)))
        if columns:
            order = order[::-1]
            cols = " (" + ", ".join(schema.columns[i].name for i in order) + ")"
        values = ", ".join("(" + ", ".join(sql_literal(r[i]) for i in order) + ")" for r in rows)
        return f"INSERT INTO {name}{cols} VALUES {values}"

    def _table_id(self, name: str) -> GlobalId | None:
        if name in self.pool:
            return self.tables.get(name)
        return self.owner.table_ids.get(name)

    async def _do_sql_insert(self, env: Environment, args: Mapping[str, Any]) -> None:
        name = str(args["table"])
        gid = self._table_id(name)
        schema = self.pool[name].schema if name in self.pool else self.owner.schemas.get(name)
        if gid is None or schema is None:
            return
        statements = [[tuple(r) for r in rows] for rows in args["rows"]]
        sql = [self._insert_sql(name, schema, rows, bool(args["columns"])) for rows in statements]
        block = bool(args["block"])
        text = "BEGIN; " + "; ".join(sql) + "; COMMIT" if block else sql[0]
        await self._insert(env, int(args["session"]), gid, name, text, statements, block)

    async def _insert(
        self,
        env: Environment,
        k: int,
        gid: GlobalId,
        name: str,
        text: str,
        statements: Sequence[Sequence[Row]],
        block: bool,
    ) -> dict[str, Any]:
        """Run an INSERT (or a block of them) and record it as an append (the op)."""
        rows = [r for stmt in statements for r in stmt]
        ev = self.history.invoke(
            "append",
            self.world.kernel.now_ms,
            batches=[[str(gid), [[row_out(r), 1] for r in rows]]],
            sql=text,
        )
        answer = await self._outcome(ev, lambda: self._statement(env, k, text, (), "script"))
        via = "wire" if k % 2 else "session"
        self.world.count(f"sql_insert_{via}{'_block' if block else ''}")
        if answer is None:
            self._judge_write_refusal(ev, name)
            return ev
        if not block and answer.tag != f"INSERT 0 {len(rows)}":
            self.world.violate(
                "sql_command_tags", f"insert {ev['n']} of {len(rows)} rows answered {answer.tag!r}"
            )
        if answer.time is not None and not block:
            self.history.ok(ev, self.world.kernel.now_ms, time=answer.time)
        else:  # acknowledged, at a time the client was not told: found on disk at the end
            ev["acked"] = True
            self.history.info(ev, self.world.kernel.now_ms, "acknowledged; its time unknown")
        return ev

    def _judge_write_refusal(self, ev: Mapping[str, Any], table: str) -> None:
        if ev["status"] == "info":  # in doubt (08007, or its controller died)
            return
        error = str(ev.get("error", ""))
        state = error.split(":", 1)[0]
        self.world.count(f"sql_refused_{state}")
        if state == DISK_FULL and self.world.disk_was_full(int(ev["invoke_ms"])):
            return
        if state not in _ACCEPTED and not self._damage_met(state):
            self.world.violate(
                "sql_statements_accepted", f"{ev['op']} {ev['n']} into {table} was refused: {error}"
            )

    # DDL
    def _draw_sql_ddl(self) -> dict[str, Any] | None:
        source = self.owner.source
        self.owner.sql_marker += 1
        n = self.owner.sql_marker
        k = source.integer(0, SESSIONS - 1)
        choice = source.integer(0, 99)
        missing = [p for p in POOL if p.name not in self.tables]
        present = [p for p in POOL if p.name in self.tables]
        if (choice < 22 and missing) or choice < 8:
            p = pick(source, missing or list(POOL))
            rows = self._rows(source, p.schema, True)
            return {
                "ddl": "create_table",
                "table": p.name,
                "sql": p.ddl(source, chance(source, 200)),
                "rows": rows,
                "session": k,
            }
        if choice < 30 and present:
            p = pick(source, present)
            cascade = chance(source, 600)
            return {
                "ddl": "drop",
                "kind": "TABLE",
                "name": p.name,
                "cascade": cascade,
                "session": k,
            }
        if choice < 75:
            materialized = chance(source, 400)
            # views keep their dataflows: where a temporal filter's time passes
            q = SqlGen(source, self.relations(), params=False, **self._temporal(600)).query(
                top=True
            )
            name = f"{'sm' if materialized else 'sv'}{n}"
            word = "MATERIALIZED VIEW" if materialized else "VIEW"
            if "temporal_filter" in q.constructs:
                self.world.count(f"sql_temporal_{'materialized_view' if materialized else 'view'}")
            return {
                "ddl": "create_view",
                "name": name,
                "kind": "materialized_view" if materialized else "view",
                "sql": f"CREATE {word} {name} AS {q.sql}",
                "plan": plan_to_dict(q.relation()),
                "columns": list(q.names),
                "session": k,
            }
        if choice < 88:
            targets = [o for o in sorted(self.objects) if self.defined[o].kind != "index"]
            targets += sorted(self.tables) + [t.id for t in self.owner.scenario.tables]
            on = pick(source, targets)
            schema = (
                self.defined[on].schema() if on in self.defined else typecheck(self._table_plan(on))
            )
            col = pick(source, [c.name for c in schema.columns])
            name = f"si{n}"
            return {
                "ddl": "create_index",
                "name": name,
                "on": on,
                "sql": f"CREATE INDEX {name} ON {on} ({col})",
                "session": k,
            }
        objects = sorted(self.objects)
        if not objects:
            return None
        name = pick(source, objects)
        kind = {"view": "VIEW", "materialized_view": "MATERIALIZED VIEW", "index": "INDEX"}[
            self.defined[name].kind
        ]
        return {
            "ddl": "drop",
            "kind": kind,
            "name": name,
            "cascade": chance(source, 400),
            "session": k,
        }

    def _table_plan(self, name: str) -> Plan:
        schema = self.pool[name].schema if name in self.pool else self.owner.schemas[name]
        return Get(self.symbols[name], schema)

    async def _do_sql_ddl(self, env: Environment, args: Mapping[str, Any]) -> None:
        ddl = str(args["ddl"])
        k = int(args["session"])
        if ddl == "create_table":
            await self._create_table(env, k, args)
        elif ddl == "drop":
            await self._drop(env, k, str(args["kind"]), str(args["name"]), bool(args["cascade"]))
        else:
            await self._create_object(env, k, args)

    @contextlib.contextmanager
    def _ddl_on(self, tables: Sequence[str]) -> Any:
        for t in tables:
            self.ddl_started[t] = self.ddl_started.get(t, 0) + 1
            self.ddl_running[t] = self.ddl_running.get(t, 0) + 1
        try:
            yield
        finally:
            for t in tables:
                self.ddl_running[t] -= 1

    async def _create_table(self, env: Environment, k: int, args: Mapping[str, Any]) -> None:
        name = str(args["table"])
        pool = self.pool[name]
        ev = self.history.invoke(
            "create", self.world.kernel.now_ms, name=name, kind="table", sql=args["sql"]
        )
        with self._ddl_on([name]):
            answer = await self._outcome(
                ev, lambda: self._statement(env, k, str(args["sql"]), (), "script")
            )
            if answer is None:
                if str(ev.get("error", "")).startswith("42P07"):  # another session's came first
                    self.world.count("sql_create_table_exists")
                else:
                    self._judge_write_refusal(ev, name)
                return
            try:
                gid = env.resolve(name)
            except UnknownCatalogObject:
                self.world.violate(
                    "created_tables_writable",
                    f"create {ev['n']} of table {name} was acknowledged, yet {name} is not in the "
                    "catalog",
                )
                return
            self.history.ok(ev, self.world.kernel.now_ms, id=str(gid))
            if self.tables.get(name) != gid:
                self.tables[name] = gid
                self._note_table(name, gid)
            self.world.count("sql_create_table")
        drops = self.ddl_started.get(name, 0)
        rows = [tuple(r) for r in args["rows"]]
        text = self._insert_sql(name, pool.schema, rows, False)
        last = await self._insert(env, k, gid, name, text, [rows], False)
        self.world.count("sql_insert_after_create")
        if (
            last["status"] == "fail"
            and not str(last.get("error", "")).startswith(_GOING)
            and self.ddl_started.get(name, 0) == drops
            and not self.ddl_running.get(name, 0)
        ):
            self.world.violate(
                "created_tables_writable",
                f"insert {last['n']} into table {name}, created by create {ev['n']} (acknowledged, "
                f"not dropped since), was refused: {last.get('error')}",
            )

    async def _drop(self, env: Environment, k: int, kind: str, name: str, cascade: bool) -> None:
        before = _catalog_ids(env)
        try:
            gid = env.resolve(name)
        except UnknownCatalogObject:
            gid = None
        reads = [name] if name in self.pool else []
        sql = f"DROP {kind} {name}{' CASCADE' if cascade else ''}"
        ev = self.history.invoke(
            "drop",
            self.world.kernel.now_ms,
            id=str(gid) if gid is not None else "",
            name=name,
            sql=sql,
            **({"cascade": True} if cascade else {}),
        )
        with self._ddl_on(reads):
            answer = await self._outcome(ev, lambda: self._statement(env, k, sql, (), "script"))
        if answer is None:
            error = str(ev.get("error", ""))
            self.world.count(f"sql_drop_refused_{error.split(':', 1)[0]}")
            if error.startswith("2BP01"):
                self.world.count("sql_drop_has_dependents")
            elif not error.startswith(("42809",)):  # a kind that does not match (DROP VIEW i)
                self._judge_write_refusal(ev, name)
            return
        after = _catalog_ids(env)
        gone = sorted(before - after, key=lambda g: g.sort_key)
        if gone:
            ev["gone"] = [str(g) for g in gone]
        self.history.ok(ev, self.world.kernel.now_ms)
        self.world.count(f"sql_drop_{kind.lower().replace(' ', '_')}")
        for g in gone:
            self.world.dropped(g)
        for table in (self.tables, self.objects):
            for key in [n for n, v in table.items() if v in gone or n == name]:
                del table[key]
        for o in [n for n in self.objects if self.defined[n].on == name]:
            self.objects.pop(o, None)

    async def _create_object(
        self, env: Environment, k: int, args: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Run a ``CREATE [MATERIALIZED] VIEW`` or ``CREATE INDEX``; its history event."""
        name = str(args["name"])
        ddl = str(args["ddl"])
        if ddl == "create_index":
            on = str(args["on"])
            target = self.defined.get(on)
            plan = target.plan if target is not None else self._table_plan(on)
            columns = target.columns if target is not None else ()
            obj = SqlObject(name, "index", plan, self._reads(plan), on, columns)
        else:
            plan = plan_from_dict(args["plan"])
            columns = tuple(args.get("columns", ()))
            obj = SqlObject(name, str(args["kind"]), plan, self._reads(plan), None, columns)
        self.defined[name] = obj
        ev = self.history.invoke(
            "create", self.world.kernel.now_ms, name=name, kind=obj.kind, sql=args["sql"]
        )
        answer = await self._outcome(
            ev, lambda: self._statement(env, k, str(args["sql"]), (), "script")
        )
        if answer is None:
            error = str(ev.get("error", ""))
            self.world.count(f"sql_create_refused_{error.split(':', 1)[0]}")
            unknown = error.startswith(UNKNOWN_CLUSTER) and name in self.placed
            if not error.startswith("42P07") and not unknown:  # 42P07: an earlier create in doubt
                self._judge_write_refusal(ev, name)
            return ev
        try:
            gid = env.resolve(name)
        except UnknownCatalogObject:
            self.world.violate(
                "sql_ddl_effective",
                f"create {ev['n']} of {name} was acknowledged but it is missing",
            )
            return ev
        self.history.ok(ev, self.world.kernel.now_ms, id=str(gid))
        self.objects[name] = gid
        self._note_object(name, gid)
        self.world.count(f"sql_create_{obj.kind}")
        return ev

    # clusters
    def _draw_sql_cluster(self) -> dict[str, Any] | None:
        """A query run after ``SET cluster = c``, or an index or materialized view created ``IN
        CLUSTER c``: ``c`` is ``default``, one of the scenario's or one the clients created
        (now and then one they dropped: refused, 42704)."""
        source = self.owner.source
        live = [DEFAULT_CLUSTER, *(c.name for c in self.owner.scenario.clusters)]
        live += sorted(self.owner.clusters)
        gone = sorted(self._dropped_clusters(None))
        cluster = pick(source, gone) if gone and chance(source, 300) else pick(source, live)
        what = pick(source, ("query", "query", "index", "materialized_view"))
        if what == "query":
            args = self._draw_sql_query()
            return None if args is None else {**args, "cluster": cluster}
        drawn = self._draw_create(source, index=what == "index")
        if drawn is None:
            return None
        word = "INDEX" if what == "index" else "MATERIALIZED VIEW"
        where = f"CREATE {word} {drawn['name']} IN CLUSTER {cluster} "
        drawn["sql"] = where + str(drawn["sql"]).removeprefix(f"CREATE {word} {drawn['name']} ")
        return {**drawn, "cluster": cluster}

    def _draw_create(self, source: ChoiceSource, *, index: bool) -> dict[str, Any] | None:
        """A ``CREATE INDEX`` or ``CREATE MATERIALIZED VIEW`` as :meth:`_draw_sql_ddl` draws."""
        self.owner.sql_marker += 1
        n = self.owner.sql_marker
        k = source.integer(0, SESSIONS - 1)
        if index:
            targets = [o for o in sorted(self.objects) if self.defined[o].kind != "index"]
            targets += sorted(self.tables) + [t.id for t in self.owner.scenario.tables]
            on = pick(source, targets)
            schema = (
                self.defined[on].schema() if on in self.defined else typecheck(self._table_plan(on))
            )
            col = pick(source, [c.name for c in schema.columns])
            name = f"si{n}"
            sql = f"CREATE INDEX {name} ON {on} ({col})"
            return {"ddl": "create_index", "name": name, "on": on, "sql": sql, "session": k}
        q = SqlGen(source, self.relations(), params=False, **self._temporal(600)).query(top=True)
        name = f"sm{n}"
        return {
            "ddl": "create_view",
            "name": name,
            "kind": "materialized_view",
            "sql": f"CREATE MATERIALIZED VIEW {name} AS {q.sql}",
            "plan": plan_to_dict(q.relation()),
            "columns": list(q.names),
            "session": k,
        }

    def on_cluster(self, cluster: str) -> dict[str, GlobalId]:
        """The SQL clients' objects known to exist ``IN CLUSTER cluster``, by name."""
        return {n: g for n, g in sorted(self.objects.items()) if self.placed.get(n) == cluster}

    def forget(self, gone: set[GlobalId]) -> None:
        """Objects ``gone`` were dropped (their cluster was): forget them, and the indexes on
        them."""
        names = {n for n, g in self.objects.items() if g in gone}
        for n in sorted(names):
            del self.objects[n]
        for n in [n for n in self.objects if self.defined[n].on in names]:
            self.objects.pop(n, None)

    def _dropped_clusters(self, before_ms: int | None) -> set[str]:
        """The clusters whose drop a client saw acknowledged (before ``before_ms``, if given)."""
        return {
            str(d["cluster"])
            for d in self.history.ops("drop_cluster")
            if d["status"] == "ok" and (before_ms is None or int(d["complete_ms"]) <= before_ms)
        }

    def _may_be_unknown(self, cluster: str) -> bool:
        """Whether ``cluster`` may not exist: not one of the scenario's, and not created by an
        acknowledged create that no drop (acknowledged or not) followed."""
        if cluster == DEFAULT_CLUSTER or cluster in {c.name for c in self.owner.scenario.clusters}:
            return False
        created = any(
            e["cluster"] == cluster and e["status"] == "ok"
            for e in self.history.ops("create_cluster")
        )
        dropped = any(d["cluster"] == cluster for d in self.history.ops("drop_cluster"))
        return dropped or not created

    async def _do_sql_cluster(self, env: Environment, args: Mapping[str, Any]) -> None:
        cluster = str(args["cluster"])
        now = self.world.kernel.now_ms
        gone = cluster in self._dropped_clusters(now)  # it must be refused (42704)
        if "ddl" in args:
            self.placed[str(args["name"])] = cluster
            ev = await self._create_object(env, int(args["session"]), args)
        else:
            ev = await self._query(env, args, cluster)
        error = str(ev.get("error", ""))
        what = "query" if "ddl" not in args else str(args.get("kind", "index"))
        if ev["status"] == "ok" and gone:
            self.world.violate(
                "sql_cluster_refusals",
                f"{ev['op']} {ev['n']} ran in cluster {cluster}, dropped before it started: "
                f"{args['sql']}",
            )
        elif ev["status"] == "ok":
            self.world.count(f"sql_cluster_{what}")
        elif error.startswith(UNKNOWN_CLUSTER):
            self.world.count("sql_cluster_unknown_refused")
            if not self._may_be_unknown(cluster):
                self.world.violate(
                    "sql_cluster_refusals",
                    f"{ev['op']} {ev['n']} in cluster {cluster}, which exists, was refused: "
                    f"{error}",
                )


def _outside_domain(ev: Mapping[str, Any]) -> bool:
    """Whether a read of a transaction was refused for reading an object its earlier reads did
    not, whose since passed the transaction's time (Materialize's "same timedomain" refusal):
    a read policy's lag behind the upper can be shorter than a client's thinking."""
    return str(ev.get("error", "")).startswith("25000:") and "timedomain" in str(ev["error"])


_UNJOINED = frozenset(CONSTRUCTS) - {
    "join_on",
    "left_join_on",
    "join_using",
    "left_join_using",
    "right_join_using",
    "full_join_using",
    "comma_join",
}
"""What a read transaction's queries draw from: a join of one relation with itself costs the
reference (and the replicas) its square for little news."""

_OIDS = {"int64": 20, "float64": 701, "bool": 16, "string": 25, "date": 1082, "timestamp": 1114}
"""The type a ``COPY ... TO STDOUT`` column's text is read as, by its reference type."""


def _has_int(schema: Schema) -> bool:
    return any(c.type.scalar.value == "int64" for c in schema.columns)


def _is_true(v: Any) -> bool:
    """A boolean as either path answers it (the wire's text format says ``t``)."""
    return v is True or v in ("t", "true")


def _counted(rows: Sequence[Row], *, ordered: bool) -> list[list[Any]]:
    """Rows as ``[[row, count], ...]``: runs of equal rows in order (ordered), else totals."""
    out: list[list[Any]] = []
    if ordered:
        for r in rows:
            row = list(r)
            if out and out[-1][0] == row:
                out[-1][1] += 1
            else:
                out.append([row, 1])
        return out
    counts: dict[Row, int] = {}
    for r in rows:
        counts[tuple(r)] = counts.get(tuple(r), 0) + 1
    return [[list(r), n] for r, n in counts.items()]


def _catalog_ids(env: Environment) -> set[GlobalId]:
    state = env.state
    ids = {e.id for e in state.entries()}
    ids |= {v.id for v in state.views}
    return ids
