"""Running SQL on an :class:`~tidegate.runtime.environment.Environment`: ``env.execute(sql)``.

The statements are parsed, bound and lowered by :mod:`tidegate.spec.sql`;
this module maps each one onto the Environment's methods and answers a
:class:`SqlResult` (column names, types, rows; ``to_arrow()``):

* ``CREATE TABLE`` / ``CREATE MATERIALIZED VIEW`` / ``CREATE INDEX`` / ``DROP`` /
  ``ALTER ... SET (RETAIN HISTORY FOR ...)``: ``create_table``,
  ``create_materialized_view``, ``create_index``, ``drop``, ``set_read_policy``
  (``RETAIN HISTORY FOR '1h'`` is ``LagWriteFrontier(3_600_000, 1000)``; ``RESET``
  the default policy).
* ``CREATE SOURCE`` / ``CREATE SINK`` (parsed by :mod:`tidegate.spec.sql.storage`):
  ``create_source`` (a load generator, or a PostgreSQL table through a
  publication and a slot; the columns come from the upstream) and
  ``create_sink`` (an Iceberg table). A source is read like a table, its
  ``<name>_progress`` collection and the system collections
  (``mz_source_status_history``, ...) too; ``SHOW SOURCES`` / ``SHOW SINKS``
  list them with their type; ``DROP SOURCE`` / ``DROP SINK`` drop them.
* ``CREATE VIEW``: ``create_view``, a named query in the catalog (no
  collection). A query reading a view reads its plan; ``CREATE INDEX ON view``
  maintains it; the views a view was written against are its dependencies
  (``DROP ... CASCADE``). The text of every statement that created an object
  is kept by the catalog with it (``definition=``), for ``SHOW CREATE``.
* ``SELECT``: a peek, served by the fastest path that fits (:func:`_fast_path`): a
  table or materialized view read directly, an index whose plan is the query's
  plan (``SELECT * FROM v`` with an index on ``v``), a key lookup in an index
  (``WHERE k = 5`` on every key column), otherwise a **transient
  dataflow**: the Environment has no peek of an arbitrary plan, so the query
  is run as a subscribe whose first batch (the snapshot at the as-of) is the
  answer; the subscribe is then dropped (Materialize's slow path, which
  builds a temporary dataflow for one peek). ``ORDER BY``/``LIMIT``/``OFFSET``
  are the peek's finishing. ``AS OF t`` reads at ``t``, else the freshest time.
* ``INSERT``/``DELETE``/``UPDATE``: one ``append_many`` at one timestamp of
  the rows, their retractions, or both. The rows to delete or update are read
  first (at the freshest time); a write by someone else in between is not
  seen (no read-write transaction).
* ``SUBSCRIBE``: :func:`subscribe_sql` (an async iterator of batches);
  ``execute`` answers the snapshot (the first batch) and drops it.
* ``COPY name TO 'url'``: ``copy_to`` (a table, materialized view or indexed view).
* ``EXPLAIN``, ``SHOW ...``: text rows from the plan and the catalog.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from tidegate.spec.errors import (
    CharacterNotInRepertoire,
    DependentObjects,
    DuplicateRelation,
    InvalidAsOf,
    InvalidName,
    NotNullViolation,
    NumericOverflow,
    NumericValueOutOfRange,
    ObjectNotInPrerequisiteState,
    ProgramLimitExceeded,
    ReadBeforeSince,
    ReadBeyondUpper,
    SinceViolation,
    SqlError,
    SqlSyntaxError,
    StringDataRightTruncation,
    UndefinedObject,
    UnsupportedSql,
    WrongObjectType,
    data_error,
)
from tidegate.spec.frontier import Row
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    ColumnType,
    Get,
    Plan,
    ScalarType,
    Schema,
    explain,
    gets,
    typecheck,
)
from tidegate.spec.plan.numeric import apply_typmod, numeric_text
from tidegate.spec.plan.ordering import apply_finishing
from tidegate.spec.plan.scalar_eval import float32_text
from tidegate.spec.plan.schema import value_matches
from tidegate.spec.protocol.types import RowSetFinishing
from tidegate.spec.sql import (
    AlterClusterStmt,
    AlterRetainHistoryStmt,
    AlterSinkStmt,
    CatalogItem,
    CopyToStmt,
    CreateClusterReplicaStmt,
    CreateClusterStmt,
    CreateIndexStmt,
    CreateSinkStmt,
    CreateSourceStmt,
    CreateTableStmt,
    CreateViewStmt,
    DeleteStmt,
    DropClusterReplicaStmt,
    DropClusterStmt,
    DropStmt,
    ExplainStmt,
    InsertStmt,
    Lowered,
    SelectStmt,
    ShowColumnsStmt,
    ShowCreateStmt,
    ShowStmt,
    Statement,
    SubscribeStmt,
    UpdateStmt,
    lower_query,
    parse_one,
    pg_type,
    plan_delete,
    plan_insert,
    plan_update,
)
from tidegate.spec.sql._binder import ExprBinder
from tidegate.spec.sql._scope import Scope
from tidegate.spec.text import find_invalid_text

from .catalog import (
    DEFAULT_CLUSTER,
    DEFAULT_READ_POLICY,
    IndexEntry,
    ProgressEntry,
    SinkEntry,
    SourceEntry,
    SystemCollectionEntry,
    TableEntry,
    ViewEntry,
)
from .controller.errors import DependencyDropped, PeekFailed, ResultTooLarge, input_dropped
from .errors import HasDependents, InvalidCatalogOp, UnknownCatalogObject

if TYPE_CHECKING:
    from tidegate.spec.frontier import Antichain
    from tidegate.spec.frontier.read_policy import ReadPolicy
    from tidegate.spec.plan.builder import Frame
    from tidegate.spec.protocol.types import ColumnOrder
    from tidegate.spec.storage import SourceConnection, StorageSinkConnection

    from .catalog import CatalogState
    from .controller.streams import Subscription
    from .frames import PeekAnswer

__all__ = [
    "EnvCatalog",
    "SqlEnvironment",
    "SqlResult",
    "check_cluster",
    "check_params",
    "plan_write",
    "read_rows",
    "read_time",
    "run_statement",
    "subscribe_sql",
]


Ref: TypeAlias = GlobalId | str
"""An object by id or by name (as the environment's methods take it)."""


class HeldRead(Protocol):
    """A read time held readable until :meth:`release` (the environment's ``FreshRead``)."""

    @property
    def time(self) -> int: ...

    def release(self) -> None: ...


class SqlEnvironment(Protocol):
    """What statements run on: the :class:`~tidegate.runtime.environment.Environment`'s public
    methods they map onto (typed here, so that this module does not import the environment,
    which imports it to answer :meth:`~tidegate.runtime.environment.Environment.execute`)."""

    @property
    def state(self) -> CatalogState: ...

    async def create_table(
        self, name: str, schema: Schema, *, definition: str | None = None
    ) -> GlobalId: ...

    async def create_index(
        self,
        plan: Frame | Plan | Ref,
        keys: Sequence[str | int] = (),
        *,
        name: str | None = None,
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId: ...

    async def create_materialized_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
        cluster: str = DEFAULT_CLUSTER,
    ) -> GlobalId: ...

    async def create_cluster(
        self, name: str, *, replicas: Any = 1, size: str | None = None
    ) -> None: ...

    async def drop_cluster(self, name: str, *, cascade: bool = False) -> list[GlobalId]: ...

    async def alter_cluster(
        self, name: str, *, size: str | None = None, replication_factor: int | None = None
    ) -> None: ...

    async def create_cluster_replica(
        self, cluster: str, name: str, *, size: str | None = None
    ) -> None: ...

    async def drop_cluster_replica(self, cluster: str, name: str) -> None: ...

    async def alter_sink(
        self, ref: Ref, from_ref: Ref, *, definition: str | None = None
    ) -> None: ...

    async def create_view(
        self,
        name: str,
        plan: Frame | Plan | Ref,
        *,
        views: Sequence[Ref] = (),
        definition: str | None = None,
    ) -> GlobalId: ...

    async def create_source(
        self,
        name: str,
        connection: SourceConnection,
        *,
        schema: Schema | None = None,
        definition: str | None = None,
    ) -> GlobalId: ...

    async def create_sink(
        self,
        name: str,
        from_ref: Ref,
        connection: StorageSinkConnection,
        *,
        definition: str | None = None,
    ) -> GlobalId: ...

    async def drop(
        self, ref: Ref, *, cascade: bool = False, dropped: dict[GlobalId, Any] | None = None
    ) -> list[GlobalId]: ...

    async def drop_many(
        self,
        refs: Sequence[Ref],
        *,
        cascade: bool = False,
        dropped: dict[GlobalId, Any] | None = None,
    ) -> list[GlobalId]: ...

    async def set_read_policy(self, ref: Ref, policy: ReadPolicy) -> None: ...

    def ddl_transaction(self) -> AbstractAsyncContextManager[None]: ...

    async def append_many(
        self, batches: Iterable[tuple[Ref, Iterable[Any]]], *, request_id: str | None = None
    ) -> int: ...

    async def peek(
        self,
        ref: Ref,
        at: int | None = None,
        key: Row | None = None,
        finishing: RowSetFinishing | Sequence[ColumnOrder] | None = None,
        *,
        limit: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
    ) -> PeekAnswer: ...

    async def subscribe(
        self,
        plan: Frame | Plan | Ref,
        as_of: int | None = None,
        *,
        buffer: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
        up_to: int | None = None,
        snapshot: bool = True,
    ) -> Subscription: ...

    async def copy_to(
        self, ref: Ref, url: str, *, at: int | None = None, cluster: str | None = None
    ) -> int: ...

    async def freshest(self, ref: Ref) -> int: ...

    async def hold_fresh(self, refs: Sequence[Ref]) -> HeldRead: ...

    async def hold_at(self, refs: Sequence[Ref], time: int) -> HeldRead | None: ...

    def frontiers(self, ref: Ref) -> tuple[Antichain, Antichain]: ...

    def input_upper(self, plan: Frame | Plan | Ref) -> Antichain: ...


@dataclass
class SqlResult:
    """What a statement answers: ``columns`` and ``types`` of ``rows`` (for queries), and a
    PostgreSQL-style command ``status`` (``SELECT 3``, ``CREATE TABLE``, ``INSERT 0 2``).

    ``rows`` is a list of tuples, a row of multiplicity ``n`` repeated ``n`` times, in the
    query's order. ``time`` is the timestamp read or written, when there is one.
    """

    status: str
    columns: tuple[str, ...] = ()
    types: tuple[ColumnType, ...] = ()
    rows: list[Row] = field(default_factory=list)
    time: int | None = None
    notice: str | None = None
    pg_types: tuple[Any, ...] | None = None
    """The columns' PostgreSQL types (:class:`~tidegate.spec.sql.pgtypes.PgType`) when they
    are not those of ``types`` (a query of the system catalog: ``oid``, ``int4``, arrays)."""

    @property
    def schema(self) -> Schema:
        return Schema.of(
            *((n, t.scalar, t.nullable) for n, t in zip(self.columns, self.types, strict=True))
        )

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.Table`` (dates as date32, timestamps as microseconds)."""
        import pyarrow as pa

        from .arrow_values import arrow_values
        from .controller.schemas import ARROW_TYPES

        fields = [
            pa.field(n, ARROW_TYPES[t.scalar], t.nullable)
            for n, t in zip(self.columns, self.types, strict=True)
        ]
        cols = (
            [list(c) for c in zip(*self.rows, strict=True)] if self.rows else [[] for _ in fields]
        )
        return pa.table(
            [pa.array(arrow_values(c), type=f.type) for c, f in zip(cols, fields, strict=True)],
            schema=pa.schema(fields),
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (dates and timestamps as ISO text, numerics as their text, as
        Materialize's HTTP API writes them: a JSON number would be read as a float)."""
        from datetime import date

        def value(v: Any, t: ScalarType) -> Any:
            if isinstance(v, Decimal):
                return numeric_text(v)
            if t is ScalarType.FLOAT32 and type(v) is float and math.isfinite(v):
                return float(float32_text(v))  # a real's shortest digits: 0.1, not 0.1000000015
            return v.isoformat() if isinstance(v, date) else v

        types = (
            [t.sql_name for t in self.pg_types]
            if self.pg_types is not None
            else [pg_type(t.scalar) for t in self.types]
        )
        return {
            "status": self.status,
            "columns": list(self.columns),
            "types": types,
            "rows": [
                [value(v, t.scalar) for v, t in zip(r, self.types, strict=True)] for r in self.rows
            ],
            "time": self.time,
            "notice": self.notice,
        }


def _kind(entry: Any) -> str:
    if isinstance(entry, TableEntry):
        return "table"
    if isinstance(entry, IndexEntry):
        return "index"
    if isinstance(entry, SourceEntry | ProgressEntry | SystemCollectionEntry):
        return "source"
    return "materialized-view"


def _source_detail(entry: Any) -> str:
    """What kind of source ``SHOW SOURCES`` says it is."""
    from .controller.storage_status import connection_type

    if isinstance(entry, SourceEntry):
        return connection_type(entry.connection)
    return "progress" if isinstance(entry, ProgressEntry) else "system"


class EnvCatalog:
    """The :class:`~tidegate.spec.sql.SqlCatalog` of an environment's catalog (views included).

    ``views_read``: the views a lowering resolved, in order (a view created from a
    query depends on them).
    """

    def __init__(self, env: SqlEnvironment) -> None:
        self.env = env
        self.views_read: list[GlobalId] = []
        self._items: list[CatalogItem] | None = None

    def _item(self, e: Any) -> CatalogItem:
        state = self.env.state
        if isinstance(e, ViewEntry):  # a view's schema is its plan's: typechecked only here
            return CatalogItem(e.name, e.id, typecheck(e.plan), "view", e.plan)
        if isinstance(e, SinkEntry):
            from .controller.storage_status import connection_type

            return CatalogItem(
                e.name,
                e.id,
                state.schema_of(e.id),
                "sink",
                on=e.from_id,
                detail=connection_type(e.connection),
            )
        schema = state.schema_of(e.id)
        if isinstance(e, TableEntry):
            lengths, typmods = _column_limits(state.definition(e.id))
            return CatalogItem(e.name, e.id, schema, "table", max_lengths=lengths, typmods=typmods)
        if isinstance(e, IndexEntry):
            return CatalogItem(
                e.name, e.id, schema, "index", e.plan, e.on, e.keys, cluster=e.cluster
            )
        if isinstance(e, SourceEntry | ProgressEntry | SystemCollectionEntry):
            return CatalogItem(e.name, e.id, schema, "source", detail=_source_detail(e))
        return CatalogItem(e.name, e.id, schema, "materialized-view", e.plan, cluster=e.cluster)

    def _entries(self) -> list[Any]:
        state = self.env.state
        return [*state.entries(), *state.views, *state.sinks]

    def items(self) -> list[CatalogItem]:
        if self._items is None:
            self._items = [self._item(e) for e in self._entries()]
        return self._items

    def resolve(self, name: str) -> CatalogItem | None:
        entries = self._entries()
        entry = next((e for e in entries if e.name == name), None)
        entry = entry or next((e for e in entries if str(e.id) == name), None)
        if entry is None:
            return None
        found = self._item(entry)
        if found.kind == "view" and found.id not in self.views_read:
            self.views_read.append(found.id)
        return found


async def read_rows(
    env: SqlEnvironment,
    plan: Plan,
    finishing: RowSetFinishing,
    at: int | None,
    at_least: bool = False,
    cluster: str | None = None,
) -> tuple[list[tuple[Row, int]], int | None]:
    """The finished rows of ``plan`` at ``at`` (default: the freshest time; ``at_least``: ``AS
    OF AT LEAST``, see :func:`read_time`), by the fastest path in ``cluster`` (default
    ``default``), with the time read (the session layer's way to a ``SELECT`` it lowered
    itself) [InvalidAsOf, SqlDataError; UndefinedObject for an unknown cluster]."""
    cluster = cluster or DEFAULT_CLUSTER
    _known_cluster(env.state, cluster)
    when = read_time(env, plan, at, at_least)
    try:
        return await _read(env, plan, finishing, when, cluster)
    except PeekFailed as e:
        raise _peek_error(e) from e
    except (ReadBeyondUpper, SinceViolation, ReadBeforeSince) as e:
        raise InvalidAsOf(
            f"Timestamp ({when}) is not valid for all inputs: "
            f"{_names_of(env, sorted(gets(plan), key=lambda g: g.sort_key))} "
            f"({'not yet complete' if isinstance(e, ReadBeyondUpper) else 'compacted past it'})"
        ) from e


def check_cluster(env: SqlEnvironment, cluster: str) -> None:
    """Materialize's ``unknown cluster 'c'`` (SQLSTATE 42704) for a statement that runs in
    ``cluster`` when the environment has none of that name."""
    _known_cluster(env.state, cluster)


async def run_statement(
    env: SqlEnvironment,
    stmt: Statement,
    params: list[Any],
    cluster: str | None = None,
    *,
    request_id: str | None = None,
) -> SqlResult:
    """Run one parsed statement (the session layer's way in: no transaction of its own) in
    ``cluster`` (Materialize's ``SET cluster``; default ``default``): where queries run and
    indexes and materialized views are placed. A failed read, or what the catalog refuses,
    is the SQL error a client sees. ``request_id`` makes a write (``INSERT``, ``UPDATE``,
    ``DELETE``) idempotent (see
    :meth:`~tidegate.runtime.environment.Environment.append_many`)."""
    try:
        return await _run(env, stmt, params, cluster or DEFAULT_CLUSTER, request_id)
    except PeekFailed as e:
        raise _peek_error(e) from e
    except (InvalidCatalogOp, UnknownCatalogObject) as e:
        cls = InvalidName if isinstance(e, InvalidCatalogOp) else UndefinedObject
        raise cls(str(e)) from e


def _read_failed(id: object, at: int, error: str) -> PeekFailed:
    """The error of a read whose subscribe ended with ``error``: an input dropped meanwhile is
    :class:`DependencyDropped`, as for a peek (SQLSTATE 55000, not a data error)."""
    dropped = input_dropped(error)
    if dropped is not None:
        return DependencyDropped(id, at, dropped)
    return PeekFailed(id, at, error)


def _peek_error(e: PeekFailed) -> SqlError:
    """A failed read as the SQL error a client sees: a query's evaluation error (division by
    zero, overflow, a bad cast) as its SQLSTATE class 22 error, the rest as what they are."""
    if isinstance(e, ResultTooLarge):
        return ProgramLimitExceeded(e.message)
    if isinstance(e, DependencyDropped):
        return ObjectNotInPrerequisiteState(e.message)
    return data_error(e.message)


def check_params(sql: str, params: Sequence[Any] | None) -> None:
    """[CharacterNotInRepertoire] for a parameter holding text that is not Unicode scalar values."""
    for n, p in enumerate(params or (), start=1):
        if find_invalid_text(p) is not None:
            raise CharacterNotInRepertoire(
                f'invalid byte sequence for encoding "UTF8" in parameter ${n}', sql=sql
            )


async def _run(
    env: SqlEnvironment,
    stmt: Statement,
    params: list[Any],
    cluster: str = DEFAULT_CLUSTER,
    request_id: str | None = None,
) -> SqlResult:
    cat = EnvCatalog(env)
    if isinstance(
        stmt,
        SelectStmt
        | SubscribeStmt
        | CreateIndexStmt
        | InsertStmt
        | DeleteStmt
        | UpdateStmt
        | CopyToStmt,
    ) or (isinstance(stmt, CreateViewStmt) and stmt.materialized):
        _known_cluster(env.state, cluster)  # where it runs: Materialize's 42704 if unknown
    if isinstance(stmt, SelectStmt):
        return await _select(env, cat, stmt, params, cluster)
    if isinstance(
        stmt,
        CreateClusterStmt
        | CreateClusterReplicaStmt
        | AlterClusterStmt
        | DropClusterStmt
        | DropClusterReplicaStmt
        | AlterSinkStmt,
    ):
        return await _cluster_ddl(env, cat, stmt)
    if isinstance(stmt, CreateTableStmt):
        if cat.resolve(stmt.name) is not None and stmt.if_not_exists:
            return SqlResult(
                "CREATE TABLE", notice=f'relation "{stmt.name}" already exists, skipping'
            )
        schema = Schema.of(*((c.name, c.type, c.nullable) for c in stmt.columns))
        _check_free(cat, stmt.name)
        await env.create_table(stmt.name, schema, definition=stmt.sql.strip())
        return SqlResult("CREATE TABLE")
    if isinstance(stmt, CreateSourceStmt):
        if cat.resolve(stmt.name) is not None and stmt.if_not_exists:
            return SqlResult(
                "CREATE SOURCE", notice=f'source "{stmt.name}" already exists, skipping'
            )
        _check_free(cat, stmt.name)
        await env.create_source(stmt.name, stmt.connection, definition=stmt.sql.strip())
        return SqlResult("CREATE SOURCE")
    if isinstance(stmt, CreateSinkStmt):
        if cat.resolve(stmt.name) is not None and stmt.if_not_exists:
            return SqlResult("CREATE SINK", notice=f'sink "{stmt.name}" already exists, skipping')
        _check_free(cat, stmt.name)
        item = _object(cat, stmt.from_name, None)
        if item.kind in ("index", "view", "sink"):
            raise WrongObjectType(
                f'cannot sink "{stmt.from_name}": it is a {_KIND_WORDS[item.kind]}',
                hint="a sink writes out a table, materialized view or source",
            )
        await env.create_sink(stmt.name, item.id, stmt.connection, definition=stmt.sql.strip())
        return SqlResult("CREATE SINK")
    if isinstance(stmt, CreateViewStmt):
        return await _create_view(env, cat, stmt, params, cluster)
    if isinstance(stmt, CreateIndexStmt):
        return await _create_index(env, cat, stmt, params, cluster)
    if isinstance(stmt, InsertStmt | DeleteStmt | UpdateStmt):
        return await _write(env, cat, stmt, params, cluster, request_id)
    if isinstance(stmt, DropStmt):
        return await _drop(env, cat, stmt)
    if isinstance(stmt, AlterRetainHistoryStmt):
        item = _object(cat, stmt.name, stmt.kind)
        if item.kind in ("view", "sink"):
            raise WrongObjectType(
                f'"{stmt.name}" is a {_KIND_WORDS[item.kind]}: it keeps no history of its own'
            )
        policy = DEFAULT_READ_POLICY if stmt.ms is None else LagWriteFrontier(stmt.ms, 1000)
        await env.set_read_policy(item.id, policy)
        return SqlResult(f"ALTER {stmt.kind.replace('-', ' ').upper()}")
    if isinstance(stmt, ExplainStmt):
        return _explain(cat, stmt, params)
    if isinstance(stmt, ShowStmt):
        return _show(cat, stmt)
    if isinstance(stmt, ShowColumnsStmt):
        item = _object(cat, stmt.name, None)
        rows: list[Row] = [
            (c.name, c.type.nullable, pg_type(c.type.scalar)) for c in item.schema.columns
        ]
        return _text_result(
            "SHOW",
            ("name", "nullable", "type"),
            rows,
            (ScalarType.STRING, ScalarType.BOOL, ScalarType.STRING),
        )
    if isinstance(stmt, ShowCreateStmt):
        item = _object(cat, stmt.name, stmt.kind)
        return _text_result("SHOW", ("name", "create_sql"), [(item.name, _create_sql(cat, item))])
    if isinstance(stmt, SubscribeStmt):
        return await _subscribe_snapshot(env, cat, stmt, params, cluster)
    if isinstance(stmt, CopyToStmt):
        low = lower_query(stmt.query, cat, params, stmt.sql)
        fast = _fast_path(env, low.plan, low.finishing(), cluster)
        if fast is None or fast[1] is not None or fast[2] != RowSetFinishing():
            raise UnsupportedSql(
                "COPY of a query that is not a table, materialized view or indexed view",
                hint="create a materialized view of the query and copy that",
            )
        n = await env.copy_to(fast[0], stmt.url, cluster=cluster)
        return SqlResult(f"COPY {n}")
    raise UnsupportedSql(type(stmt).__name__)


def _text_result(
    status: str,
    columns: tuple[str, ...],
    rows: list[Row],
    types: tuple[ScalarType, ...] | None = None,
) -> SqlResult:
    ts = types or tuple(ScalarType.STRING for _ in columns)
    return SqlResult(
        f"{status} {len(rows)}" if status == "SELECT" else status,
        columns,
        tuple(ColumnType(t, False) for t in ts),
        rows,
    )


def _check_free(cat: EnvCatalog, name: str) -> None:
    if cat.resolve(name) is not None:
        raise DuplicateRelation(f'relation "{name}" already exists')


_KIND_WORDS = {
    "table": "table",
    "view": "view",
    "materialized-view": "materialized view",
    "index": "index",
    "source": "source",
    "sink": "sink",
}


def _object(cat: EnvCatalog, name: str, kind: str | None) -> CatalogItem:
    item = cat.resolve(name)
    if item is None:
        import difflib

        near = difflib.get_close_matches(name, [i.name for i in cat.items()], n=1, cutoff=0.6)
        raise UndefinedObject(
            f'{_KIND_WORDS.get(kind or "", "relation")} "{name}" does not exist',
            hint=f'Perhaps you meant "{near[0]}".' if near else None,
        )
    if kind is not None and item.kind != kind:
        raise WrongObjectType(f'"{name}" is a {_KIND_WORDS[item.kind]}, not a {_KIND_WORDS[kind]}')
    return item


def _create_sql(cat: EnvCatalog, item: CatalogItem) -> str:
    text = cat.env.state.definition(item.id)
    if text is not None:
        return text
    if item.kind == "table":
        cols = ", ".join(
            f"{c.name} {pg_type(c.type.scalar)}{'' if c.type.nullable else ' NOT NULL'}"
            for c in item.schema.columns
        )
        return f"CREATE TABLE {item.name} ({cols})"
    if item.kind in ("source", "sink"):
        from .controller.storage_status import connection_text

        state = cat.env.state
        found = state.source(item.id) or state.sink(item.id)
        what = connection_text(found.connection) if found is not None else item.detail
        return f"-- {item.kind} {item.name} ({item.id}) was not created by SQL: {what}"
    return f"-- {item.kind} {item.name} ({item.id}) was not created by SQL; its plan:\n" + (
        explain(item.plan) if item.plan is not None else ""
    )


# -- queries ---------------------------------------------------------------------------------


async def _read(
    env: SqlEnvironment,
    plan: Plan,
    finishing: RowSetFinishing,
    at: int | None,
    cluster: str = DEFAULT_CLUSTER,
) -> tuple[list[tuple[Row, int]], int | None]:
    """The finished rows of ``plan`` at ``at`` (default: freshest), by the fastest path in
    ``cluster``: its indexes, or storage, or a transient dataflow of its own."""
    fast = _fast_path(env, plan, finishing, cluster)
    if fast is not None:
        target, key, fin = fast
        rows = await env.peek(target, at, key=key, finishing=fin, cluster=cluster)
        return [(tuple(r), int(n)) for r, n in getattr(rows, "rows", rows)], at
    # the slow path: a transient dataflow (a subscribe), its snapshot, then dropped
    _refuse_unreached(env, plan, at)
    sub = await env.subscribe(plan, at, cluster=cluster)
    try:
        batch = await sub.__anext__()
    finally:
        await sub.aclose()
    as_of = int(batch.lower.elements[0]) if batch.lower.elements else at
    if batch.error is not None:
        raise _read_failed(batch.id, as_of if as_of is not None else -1, batch.error)
    acc: dict[Row, int] = {}
    for t, row, diff in batch.updates:
        # the first batch covers [as_of, upper): the snapshot is what is at or before the as_of
        if as_of is None or int(t) <= as_of:
            acc[row] = acc.get(row, 0) + diff
    bad = [(r, c) for r, c in acc.items() if c < 0]
    if bad:
        raise PeekFailed(
            batch.id,
            as_of if as_of is not None else -1,
            f"invalid data: negative multiplicity {bad[0][1]} for row {bad[0][0]!r}",
        )
    return list(apply_finishing({r: c for r, c in acc.items() if c}, finishing)), as_of


def _refuse_unreached(env: SqlEnvironment, plan: Plan, at: int | None) -> None:
    """A one-shot read (a snapshot) at ``at`` needs the inputs complete there: a time at or
    beyond their upper is refused [InvalidAsOf], as a peek refuses it, rather than left waiting
    for a snapshot (for ever, if the time is never reached)."""
    if at is not None and env.input_upper(plan).less_equal(at):
        names = _names_of(env, sorted(gets(plan), key=lambda g: g.sort_key))
        raise InvalidAsOf(
            f"Timestamp ({at}) is not valid for all inputs: {names} (not yet complete)"
        )


def _fast_path(
    env: SqlEnvironment, plan: Plan, finishing: RowSetFinishing, cluster: str = DEFAULT_CLUSTER
) -> tuple[GlobalId, Row | None, RowSetFinishing] | None:
    """A peek that answers ``plan`` without a dataflow: ``(collection, index key, finishing)``.

    A projection on top moves into the finishing; then the plan must be a table or
    materialized view (read from storage), the plan of an index of ``cluster`` (read from
    the index: an index of another cluster is not readable here, as in Materialize), or
    equalities of every key column of such an index with constants over what it indexes
    (a key lookup in the index).
    """
    from tidegate.spec.plan import BinaryFunc, CallBinary, ColumnRef, Filter, Literal, Project

    state = env.state
    for e in state.indexes:  # an index of exactly this plan (a view's, projection included)
        if e.cluster == cluster and e.plan == plan:
            return e.id, None, finishing
    if isinstance(plan, Project):
        cols = plan.columns
        project = cols if finishing.project is None else tuple(cols[j] for j in finishing.project)
        # the finishing orders the projection's rows: its columns are the input's cols[i]
        order = tuple(dataclasses.replace(o, column=cols[o.column]) for o in finishing.order_by)
        finishing = RowSetFinishing(order, finishing.limit, finishing.offset, project)
        plan = plan.input
    state = env.state
    ids = {e.id for e in state.entries() if not isinstance(e, IndexEntry)}
    if isinstance(plan, Get) and plan.id in ids:
        return plan.id, None, finishing
    indexes = [e for e in state.indexes if e.cluster == cluster]
    for e in indexes:
        if e.plan == plan:
            return e.id, None, finishing
    if isinstance(plan, Filter):
        eqs: dict[int, Any] = {}
        for p in plan.predicates:
            if (
                isinstance(p, CallBinary)
                and p.func is BinaryFunc.EQ
                and isinstance(p.left, ColumnRef)
                and isinstance(p.right, Literal)
                and p.right.value is not None
            ):
                eqs[p.left.index] = p.right.value
            else:
                return None
        for e in indexes:
            if e.plan == plan.input and e.keys and set(e.keys) == set(eqs):
                schema = state.schema_of(e.id)
                key = tuple(eqs[k] for k in e.keys)
                if all(
                    value_matches(v, schema.columns[k].type.scalar)
                    for k, v in zip(e.keys, key, strict=True)
                ):
                    return e.id, key, finishing
    return None


def _expand(rows: Iterable[tuple[Row, int]]) -> list[Row]:
    out: list[Row] = []
    for r, n in rows:
        out.extend([r] * n)
    return out


@functools.lru_cache(maxsize=1024)
def _column_limits(
    definition: str | None,
) -> tuple[tuple[int | None, ...], tuple[tuple[int, int] | None, ...]]:
    """The ``varchar(n)`` limits and ``numeric(p, s)`` modifiers a ``CREATE TABLE`` declared
    (its text is the definition)."""
    if definition is None:
        return (), ()
    try:
        stmt = parse_one(definition)
    except SqlError:
        return (), ()
    if not isinstance(stmt, CreateTableStmt):
        return (), ()
    lengths = tuple(c.max_length for c in stmt.columns)
    typmods = tuple(c.typmod for c in stmt.columns)
    return (
        lengths if any(n is not None for n in lengths) else (),
        typmods if any(m is not None for m in typmods) else (),
    )


def _checked_rows(item: CatalogItem, updates: list[tuple[Row, int]]) -> list[tuple[Row, int]]:
    """The rows a write inserts, checked as PostgreSQL checks them: NULL in a ``NOT NULL``
    column [NotNullViolation], a string longer than its ``varchar(n)`` [StringDataRightTruncation]
    (spaces beyond ``n`` are cut, as an assignment to ``varchar(n)`` does)."""
    cols = item.schema.columns
    lengths = item.max_lengths
    typmods = item.typmods
    out = []
    for row, n in updates:
        if n > 0:
            for k, (v, c) in enumerate(zip(row, cols, strict=True)):
                if v is None and not c.type.nullable:
                    raise NotNullViolation(
                        f'null value in column "{c.name}" of relation "{item.name}" violates '
                        "not-null constraint"
                    )
                limit = lengths[k] if k < len(lengths) else None
                if limit is not None and isinstance(v, str) and len(v) > limit:
                    if v[limit:].strip(" "):
                        raise StringDataRightTruncation(
                            f"value too long for type character varying({limit})"
                        )
                    row = (*row[:k], v[:limit], *row[k + 1 :])
                typmod = typmods[k] if k < len(typmods) else None
                if typmod is not None and isinstance(v, Decimal):
                    try:
                        rounded = apply_typmod(v, *typmod)
                    except NumericOverflow as e:
                        raise NumericValueOutOfRange(str(e)) from None
                    row = (*row[:k], rounded, *row[k + 1 :])
        out.append((row, n))
    return out


def _names_of(env: SqlEnvironment, gids: Iterable[GlobalId]) -> str:
    names = {i.id: i.name for i in EnvCatalog(env).items()}
    return ", ".join(names.get(g, str(g)) for g in gids)


def read_time(env: SqlEnvironment, plan: Plan, at: int | None, at_least: bool) -> int | None:
    """The time to read ``plan`` at for ``AS OF [AT LEAST] at``: ``AT LEAST`` moves it up to
    the earliest time every input can be read; an exact time before that is refused
    [InvalidAsOf], naming the inputs and the time they are readable from."""
    if at is None:
        return None
    inputs = sorted(gets(plan), key=lambda g: g.sort_key)
    sinces: list[tuple[GlobalId, int]] = []
    for g in inputs:
        since = env.frontiers(g)[0]
        if not since.elements:
            raise InvalidAsOf(f'"{_names_of(env, [g])}" cannot be read any more (dropped)')
        sinces.append((g, int(since.elements[0])))
    earliest = max((s for _g, s in sinces), default=0)
    if at_least:
        # at t while the inputs can still be read there; else the freshest time (any time
        # from t on will do, and an input's since moves on while a read is on its way)
        return at if at >= earliest else None
    late = [(g, s) for g, s in sinces if s > at]
    if late:
        readable = ", ".join(f"{_names_of(env, [g])} (from {s})" for g, s in late)
        raise InvalidAsOf(
            f"Timestamp ({at}) is not valid for all inputs: {readable}",
            hint="read at a later time, or keep more history (ALTER ... SET (RETAIN HISTORY "
            "FOR '...'))",
        )
    return at


async def _select(
    env: SqlEnvironment, cat: EnvCatalog, stmt: SelectStmt, params: list[Any], cluster: str
) -> SqlResult:
    low = lower_query(stmt.query, cat, params, stmt.sql)
    rows, at = await read_rows(env, low.plan, low.finishing(), stmt.as_of, stmt.at_least, cluster)
    out = _expand(rows)
    return SqlResult(f"SELECT {len(out)}", low.names, low.types, out, at)


def _lowered(cat: EnvCatalog, stmt: Any, params: list[Any]) -> Lowered:
    return lower_query(stmt.query, cat, params, stmt.sql)


async def subscribe_sql(
    env: SqlEnvironment,
    sql: str,
    params: Sequence[Any] | None = None,
    cluster: str | None = None,
) -> AsyncIterator[Any]:
    """``SUBSCRIBE [TO] name | (query) [WITH (...)] [AS OF t] [UP TO t]``: the subscribe's
    batches, as an async iterator (:class:`~tidegate.runtime.controller.streams.Subscription`;
    close it to drop it), computed on ``cluster`` (default: that of the indexes it reads, else
    ``default``). ``WITH (SNAPSHOT = false)`` leaves the as_of's contents out; ``UP TO`` ends
    the iteration once the frontier reaches it; ``WITH (PROGRESS)`` changes nothing (every
    batch carries its upper). An ``ENVELOPE`` reshapes rows, which batches of ``(time, row,
    diff)`` updates cannot carry: it is refused [UnsupportedSql] (``execute`` and the SQL
    session's streams answer it)."""
    stmt = parse_one(sql)
    check_params(sql, params)
    if not isinstance(stmt, SubscribeStmt | SelectStmt):
        raise SqlError("subscribe_sql takes a SUBSCRIBE statement or a query")
    if isinstance(stmt, SubscribeStmt) and stmt.envelope is not None:
        raise UnsupportedSql(
            f"ENVELOPE {stmt.envelope.kind.upper()} in subscribe_sql",
            position=stmt.envelope.position,
            hint="its batches are (time, row, diff) updates; for envelope rows run the "
            "SUBSCRIBE with execute, POST /sql with stream, or the PostgreSQL wire",
        )
    low = lower_query(stmt.query, EnvCatalog(env), list(params or ()), stmt.sql)
    plan = low.relation()
    sub: AsyncIterator[Any] = await env.subscribe(
        plan,
        read_time(env, plan, stmt.as_of, getattr(stmt, "at_least", False)),
        cluster=cluster,
        up_to=getattr(stmt, "up_to", None),
        snapshot=getattr(stmt, "snapshot", True),
    )
    return sub


async def _subscribe_snapshot(
    env: SqlEnvironment, cat: EnvCatalog, stmt: SubscribeStmt, params: list[Any], cluster: str
) -> SqlResult:
    low = _lowered(cat, stmt, params)
    plan = low.relation()
    sub = await env.subscribe(
        plan,
        read_time(env, plan, stmt.as_of, stmt.at_least),
        cluster=cluster,
        up_to=stmt.up_to,
        snapshot=stmt.snapshot,
    )
    try:
        batch = await sub.__anext__()
    finally:
        await sub.aclose()
    if batch.error is not None:
        raise _read_failed(batch.id, -1, batch.error)
    rows: list[Row] = [(int(t), int(d), *r) for t, r, d in batch.updates]
    return SqlResult(
        f"SUBSCRIBE {len(rows)}",
        ("mz_timestamp", "mz_diff", *low.names),
        (ColumnType(ScalarType.INT64, False), ColumnType(ScalarType.INT64, False), *low.types),
        rows,
        int(batch.lower.elements[0]) if batch.lower.elements else None,
    )


# -- DDL -------------------------------------------------------------------------------------


async def _create_view(
    env: SqlEnvironment, cat: EnvCatalog, stmt: CreateViewStmt, params: list[Any], cluster: str
) -> SqlResult:
    word = "CREATE MATERIALIZED VIEW" if stmt.materialized else "CREATE VIEW"
    kind = "materialized-view" if stmt.materialized else "view"
    existing = cat.resolve(stmt.name)
    cat.views_read.clear()  # looking the name up is not reading it
    if existing is not None:
        if stmt.if_not_exists:
            return SqlResult(word, notice=f'view "{stmt.name}" already exists, skipping')
        if not stmt.or_replace:
            raise DuplicateRelation(f'relation "{stmt.name}" already exists')
        if existing.kind != kind:
            raise WrongObjectType(
                f'"{stmt.name}" is a {_KIND_WORDS[existing.kind]}, not a {_KIND_WORDS[kind]}'
            )
    low = _lowered(cat, stmt, params)
    if stmt.columns is not None:
        if len(stmt.columns) > low.arity:
            raise SqlSyntaxError("CREATE VIEW specifies more column names than columns")
        names = (*stmt.columns, *low.names[len(stmt.columns) :])
        low = dataclasses.replace(low, names=names)
    plan = low.relation()
    text = stmt.sql.strip()
    if existing is not None and (existing.id in cat.views_read or existing.id in gets(plan)):
        # OR REPLACE of a view with a query that reads it (Materialize refuses it too)
        raise SqlError(f'cannot replace "{stmt.name}": the new definition reads it')
    if existing is not None:  # OR REPLACE: refused while other objects depend on it
        try:
            await env.drop(existing.id)
        except HasDependents as e:
            raise _has_dependents(cat, existing, e) from None
    views = [v for v in cat.views_read if existing is None or v != existing.id]
    if stmt.materialized:
        await env.create_materialized_view(
            stmt.name, plan, views=views, definition=text, cluster=cluster
        )
    else:
        await env.create_view(stmt.name, plan, views=views, definition=text)
    return SqlResult(word)


def _has_dependents(cat: EnvCatalog, item: CatalogItem, e: HasDependents) -> SqlError:
    names = [_name_of(cat, g) for g in e.dependents if isinstance(g, GlobalId)]
    return DependentObjects(
        f'cannot drop {_KIND_WORDS[item.kind]} "{item.name}": other objects depend on it',
        hint=f"{', '.join(names)} read it; use DROP ... CASCADE to drop them too",
    )


def _name_of(cat: EnvCatalog, gid: GlobalId) -> str:
    return next((i.name for i in cat.items() if i.id == gid), str(gid))


async def _create_index(
    env: SqlEnvironment, cat: EnvCatalog, stmt: CreateIndexStmt, params: list[Any], cluster: str
) -> SqlResult:
    item = _object(cat, stmt.on, None)
    if item.kind == "index":
        raise WrongObjectType(f'cannot create an index on "{stmt.on}": it is an index')
    binder = ExprBinder(Scope.of(item.schema, item.name), params, context="index keys")
    positions: list[int] = []
    from tidegate.spec.plan import ColumnRef
    from tidegate.spec.sql._common import position_of

    for k in stmt.keys:
        e, _t = binder.scalar(k)
        if not isinstance(e, ColumnRef):
            raise UnsupportedSql("expressions as index keys", position=position_of(k))
        positions.append(e.index)
    names = [item.schema.columns[p].name for p in positions]
    name = stmt.name or f"{item.name}_{'_'.join(names) if names else 'primary'}_idx"
    if cat.resolve(name) is not None:
        if stmt.if_not_exists:
            return SqlResult("CREATE INDEX", notice=f'index "{name}" already exists, skipping')
        raise DuplicateRelation(f'relation "{name}" already exists')
    await env.create_index(
        item.id, positions, name=name, definition=stmt.sql.strip(), cluster=cluster
    )
    return SqlResult("CREATE INDEX")


async def _drop(env: SqlEnvironment, cat: EnvCatalog, stmt: DropStmt) -> SqlResult:
    word = f"DROP {_KIND_WORDS[stmt.kind].upper()}"
    notices = []
    items: list[CatalogItem] = []
    for name in stmt.names:  # every name is checked before anything is dropped
        item = cat.resolve(name)
        if item is None:
            if stmt.if_exists:
                notices.append(f'{_KIND_WORDS[stmt.kind]} "{name}" does not exist, skipping')
                continue
            _object(cat, name, stmt.kind)
        items.append(_object(cat, name, stmt.kind))
    if items:
        try:  # all of them or none: one catalog change
            await env.drop_many([i.id for i in items], cascade=stmt.cascade)
        except HasDependents as e:
            item = next((i for i in items if i.id == e.id), items[0])
            raise _has_dependents(cat, item, e) from None
    return SqlResult(word, notice="\n".join(notices) or None)


def _explain(cat: EnvCatalog, stmt: ExplainStmt, params: list[Any]) -> SqlResult:
    inner = stmt.statement
    if isinstance(inner, SelectStmt | CreateViewStmt):
        low = lower_query(inner.query, cat, params, stmt.sql)
        plan = low.relation() if isinstance(inner, CreateViewStmt) else low.plan
        text = explain(plan)
        fin = low.finishing()
        if isinstance(inner, SelectStmt) and (fin.order_by or fin.limit is not None or fin.offset):
            text += (
                f"\nFinishing order_by={[(o.column, 'desc' if o.desc else 'asc') for o in fin.order_by]}"
                f" limit={fin.limit} offset={fin.offset}"
            )
    else:
        item = _object(cat, inner.on, None)
        text = explain(
            item.plan
            if item.kind == "view" and item.plan is not None
            else Get(item.id, item.schema)
        )
    return _text_result("EXPLAIN", ("Optimized Plan",), [(text,)])


def _show(cat: EnvCatalog, stmt: ShowStmt) -> SqlResult:
    items = cat.items()
    if stmt.kind == "objects":  # the system collections are not listed (as Materialize's)
        rows: list[Row] = [(i.name, _KIND_WORDS[i.kind]) for i in items if not _system(i)]
        return _text_result("SELECT", ("name", "type"), sorted(rows))
    if stmt.kind == "sources":  # the system collections are not listed (as Materialize's)
        listed: list[Row] = [
            (i.name, i.detail or "") for i in items if i.kind == "source" and not _system(i)
        ]
        return _text_result("SELECT", ("name", "type"), sorted(listed))
    if stmt.kind == "sinks":
        names = {i.id: i.name for i in items}
        sinks: list[Row] = [
            (i.name, i.detail or "", names.get(i.on, str(i.on)) if i.on is not None else "")
            for i in items
            if i.kind == "sink"
        ]
        return _text_result("SELECT", ("name", "type", "from"), sorted(sinks))
    kind = {
        "tables": "table",
        "views": "view",
        "materialized-views": "materialized-view",
        "indexes": "index",
    }[stmt.kind]
    chosen = [i for i in items if i.kind == kind]
    if kind == "index":
        by_id = {i.id: i for i in items}
        out: list[Row] = []
        for i in chosen:
            on = by_id[i.on].name if i.on is not None and i.on in by_id else _view_of(cat, i)
            if stmt.on is not None and on != stmt.on:
                continue
            keys = ", ".join(i.schema.columns[k].name for k in i.keys)
            out.append((i.name, on, keys))
        return _text_result("SELECT", ("name", "on", "key"), sorted(out))
    return _text_result("SELECT", ("name",), sorted((i.name,) for i in chosen))


def _system(item: CatalogItem) -> bool:
    """Whether ``item`` is a system collection (``mz_source_status_history``, ...): readable
    by name, listed by no ``SHOW`` (Materialize keeps them in ``mz_internal``)."""
    return item.kind == "source" and item.detail == "system"


def _view_of(cat: EnvCatalog, index: CatalogItem) -> str:
    """What an index was created on, when that is not a collection: a view, or a query."""
    view = cat.env.state.view(index.on) if index.on is not None else None
    return view.name if view is not None else "(query)"


async def _write(
    env: SqlEnvironment,
    cat: EnvCatalog,
    stmt: InsertStmt | DeleteStmt | UpdateStmt,
    params: list[Any],
    cluster: str = DEFAULT_CLUSTER,
    request_id: str | None = None,
) -> SqlResult:
    table, updates, status = await plan_write(env, cat, stmt, params, cluster)
    if not updates:
        return SqlResult(status)
    ts = await env.append_many([(table, updates)], request_id=request_id)
    return SqlResult(status, time=ts)


async def plan_write(
    env: SqlEnvironment,
    cat: EnvCatalog,
    stmt: InsertStmt | DeleteStmt | UpdateStmt,
    params: list[Any],
    cluster: str = DEFAULT_CLUSTER,
) -> tuple[GlobalId, list[tuple[Row, int]], str]:
    """What a write appends: the table, its updates and the command tag (nothing appended;
    a transaction appends several at its ``COMMIT``); what it reads is read in ``cluster``."""
    try:
        if isinstance(stmt, InsertStmt):
            w = plan_insert(stmt, cat, params)
        elif isinstance(stmt, DeleteStmt):
            w = plan_delete(stmt, cat, params)
        else:
            w = plan_update(stmt, cat, params)
    except SqlError as e:
        raise e.located(stmt.sql) from None
    updates: list[tuple[Row, int]] = [(r, 1) for r in w.rows]
    if w.plan is not None:
        read, _at = await read_rows(env, w.plan, RowSetFinishing(), None, cluster=cluster)
        if w.mode == "insert":
            updates.extend(read)
        elif w.mode == "delete":
            updates.extend((r, -n) for r, n in read)
        else:
            for r, n in read:
                updates.append((r[: w.arity], -n))
                updates.append((r[w.arity :], n))
    table = cat.resolve(str(w.table))
    assert table is not None  # planned from the catalog just now
    updates = _checked_rows(table, updates)
    count = (
        sum(abs(n) for _r, n in updates)
        if w.mode != "update"
        else sum(n for _r, n in updates if n > 0)
    )
    status = {
        "insert": f"INSERT 0 {count}",
        "delete": f"DELETE {count}",
        "update": f"UPDATE {count}",
    }[w.mode]
    return w.table, updates, status


# -- clusters --------------------------------------------------------------------------------


async def _cluster_ddl(
    env: SqlEnvironment,
    cat: EnvCatalog,
    stmt: CreateClusterStmt
    | CreateClusterReplicaStmt
    | AlterClusterStmt
    | DropClusterStmt
    | DropClusterReplicaStmt
    | AlterSinkStmt,
) -> SqlResult:
    """The cluster statements and ``ALTER SINK``, on the environment's methods (see
    :mod:`tidegate.spec.sql.clusters`), with Materialize's errors and notices."""
    from .errors import ClusterNotEmpty

    state = env.state
    if isinstance(stmt, CreateClusterStmt):
        if state.has_cluster(stmt.name):
            if stmt.if_not_exists:
                return SqlResult(
                    "CREATE CLUSTER", notice=f'cluster "{stmt.name}" already exists, skipping'
                )
            raise _sql_error(f'cluster "{stmt.name}" already exists', "42710")
        if stmt.replicas is not None:
            from .options import ReplicaSpec

            specs = [ReplicaSpec(name, size=size) for name, size in stmt.replicas]
            await env.create_cluster(stmt.name, replicas=specs)
        else:
            await env.create_cluster(
                stmt.name, replicas=stmt.replication_factor or 0, size=stmt.size
            )
        return SqlResult("CREATE CLUSTER")
    if isinstance(stmt, CreateClusterReplicaStmt):
        _known_cluster(state, stmt.cluster)
        _unmanaged(state, stmt.cluster)
        await env.create_cluster_replica(stmt.cluster, stmt.name, size=stmt.size)
        return SqlResult("CREATE CLUSTER REPLICA")
    if isinstance(stmt, AlterClusterStmt):
        _known_cluster(state, stmt.name)
        await env.alter_cluster(
            stmt.name, size=stmt.size, replication_factor=stmt.replication_factor
        )
        return SqlResult("ALTER CLUSTER")
    if isinstance(stmt, DropClusterStmt):
        notices = []
        for name in stmt.names:
            if not env.state.has_cluster(name):
                if stmt.if_exists:
                    notices.append(f'cluster "{name}" does not exist, skipping')
                    continue
                _known_cluster(env.state, name)
            try:
                await env.drop_cluster(name, cascade=stmt.cascade)
            except ClusterNotEmpty as e:
                names = ", ".join(_name_of(cat, g) for g in e.dependents if isinstance(g, GlobalId))
                raise _sql_error(
                    f'cannot drop cluster "{name}" because other objects depend on it',
                    "2BP01",
                    hint=f"{names} run(s) on it; use DROP CLUSTER ... CASCADE to drop them too",
                ) from None
        return SqlResult("DROP CLUSTER", notice="\n".join(notices) or None)
    if isinstance(stmt, DropClusterReplicaStmt):
        notices = []
        for cluster, name in stmt.replicas:
            state = env.state
            if not state.has_cluster(cluster) or not any(
                r.name == name for r in state.cluster_replicas(cluster)
            ):
                if stmt.if_exists:
                    notices.append(f'cluster replica "{cluster}.{name}" does not exist, skipping')
                    continue
                _known_cluster(state, cluster)
                raise _undefined_object(f"unknown cluster replica '{cluster}.{name}'")
            _unmanaged(state, cluster)
            await env.drop_cluster_replica(cluster, name)
        return SqlResult("DROP CLUSTER REPLICA", notice="\n".join(notices) or None)
    sink = _object(cat, stmt.name, "sink")
    source = _object(cat, stmt.from_name, None)
    if source.kind in ("index", "view", "sink"):
        raise WrongObjectType(
            f'cannot sink "{stmt.from_name}": it is a {_KIND_WORDS[source.kind]}',
            hint="a sink writes out a table, materialized view or source",
        )
    await env.alter_sink(sink.id, source.id, definition=stmt.sql.strip())
    return SqlResult("ALTER SINK")


def _known_cluster(state: CatalogState, name: str) -> None:
    if not state.has_cluster(name):
        raise _undefined_object(f"unknown cluster '{name}'")


def _undefined_object(message: str) -> UndefinedObject:
    error = UndefinedObject(message)
    error.sqlstate = "42704"  # undefined_object (42P01 is a relation's)
    return error


def _unmanaged(state: CatalogState, name: str) -> None:
    """Materialize's refusal of a replica created or dropped by hand in a managed cluster."""
    if state.cluster(name).managed:
        raise SqlError(
            f"cannot modify managed cluster {name}",
            hint="change its SIZE or REPLICATION FACTOR with ALTER CLUSTER",
        )


def _sql_error(message: str, sqlstate: str, hint: str | None = None) -> SqlError:
    error = SqlError(message, hint=hint)
    error.sqlstate = sqlstate
    return error
