"""SQL sessions: what one client's connection holds, over an :class:`Environment`.

A :class:`SqlSession` holds session variables (``SET``/``SHOW``/``RESET``),
a transaction, cursors and the statements a client prepared; it runs statements
the way Materialize's adapter does. Three ways in use it, so SQL means the same
everywhere: the PostgreSQL wire protocol (:mod:`tidegate.runtime.pgwire`, one
session per connection), ``POST /sql`` of the control endpoint and
``Environment.execute`` (a fresh session per call).

What a statement is comes from :func:`tidegate.spec.sql.session.classify`:
session statements run here; queries of the system catalog go to the
:class:`~tidegate.runtime.catalog_queries.CatalogEngine`; everything else is
parsed by :mod:`tidegate.spec.sql` and run by :mod:`tidegate.runtime.sql`.

**Transactions**, as Materialize has them. ``BEGIN`` starts a block; its first
statement decides its kind. A *read-only* transaction reads every ``SELECT``
(and ``FETCH``) at one timestamp, chosen by its first read, and holds what that
read reads there until it ends
(:meth:`~tidegate.runtime.environment.Environment.hold_fresh`); a write in it is
refused (``transaction in read-only mode``, 25006). A *write-only* transaction
buffers ``INSERT``\\ s, all to one table (``write transactions only support
writes to a single table``), and appends them at one timestamp at ``COMMIT``;
a read in it is refused (``transaction in write-only mode``, 25000). DDL takes
effect at once and only before any read or write of the block; ``UPDATE``
and ``DELETE`` (a read, then a write) run outside blocks only (25001). After
an error, the block refuses everything (25P02) until ``ROLLBACK`` (or
``COMMIT``, which rolls back). Outside a block a statement commits by itself,
and a script (a simple query of several statements) is one implicit transaction
(:meth:`SqlSession.script`): one of DDL only is one catalog change or none, so a
failure midway leaves the catalog and the controller as they were; another's
``INSERT``\\ s land together when it ends, or not at all. Cluster statements
(``CREATE``/``ALTER``/``DROP CLUSTER [REPLICA]``) and ``ALTER SINK`` start or stop
processes, or cut a sink over, at once: as Materialize, they run by themselves
only, never in a block nor in a script of several statements (25001).

**Streams.** ``SUBSCRIBE`` as a statement answers a :class:`RowStream` whose
rows (``mz_timestamp``, ``mz_diff``, the columns) come as the subscription
produces them; ``COPY (SUBSCRIBE ...) TO STDOUT`` answers a :class:`CopyOut`
over the same stream; ``DECLARE c CURSOR FOR SUBSCRIBE ...`` keeps it in a
cursor that ``FETCH`` reads from, waiting for at least one row unless a
``timeout`` says how long to wait. ``WITH (PROGRESS)`` adds ``mz_progressed``
rows as the frontier moves. ``Environment.execute`` answers a subscription's
first batch (its snapshot), as before.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from tidegate.spec.errors import (
    ActiveSqlTransaction,
    InFailedSqlTransaction,
    InvalidCursorName,
    InvalidParameterValue,
    InvalidTextRepresentation,
    InvalidTransactionState,
    NoActiveSqlTransaction,
    ObjectNotInPrerequisiteState,
    ReadOnlySqlTransaction,
    SqlError,
    UndefinedParameter,
    UnsupportedSql,
)
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import ColumnType, ScalarType, gets
from tidegate.spec.sql import (
    AlterClusterStmt,
    AlterRetainHistoryStmt,
    AlterSinkStmt,
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
    InsertStmt,
    Lowered,
    SelectStmt,
    Statement,
    SubscribeStmt,
    UpdateStmt,
    lower_query,
    parse_one,
    split_statements,
)
from tidegate.spec.sql import pgtypes as T
from tidegate.spec.sql import session as S
from tidegate.spec.sql.secrets import (
    ShowSecretsStmt,
    is_secret_statement,
    parse_secret_statement,
    redacted,
)
from tidegate.spec.sql.subscribe import OutputColumn, subscribe_output
from tidegate.spec.sql.system_catalog import ClusterInfo, Snapshot, relation_names

from .catalog_queries import CatalogEngine, SessionConstants
from .controller.errors import input_dropped
from .errors import UnknownCatalogObject
from .sql import (
    EnvCatalog,
    HeldRead,
    SqlEnvironment,
    SqlResult,
    check_cluster,
    check_params,
    plan_write,
    read_rows,
    read_time,
    run_statement,
)
from .sql_secrets import SecretStatement, run_secret_statement

__all__ = [
    "CopyIn",
    "CopyOut",
    "Described",
    "Prepared",
    "RowStream",
    "SqlSession",
    "execute",
    "execute_script",
    "server_version",
    "shown",
]

SERVER_VERSION = "9.5.0"
"""What ``server_version`` says: Materialize's, a PostgreSQL version every driver accepts."""


def shown(text: str) -> str:
    """A statement's text as an error may show it: a secret statement's value starred out."""
    return redacted(text) if is_secret_statement(text) else text


def server_version() -> str:
    """``version()``: PostgreSQL's shape (drivers parse it), then what tidegate this is."""
    from tidegate import __version__

    return f"PostgreSQL {SERVER_VERSION} on x86_64-pc-linux-gnu (tidegate {__version__})"


def mz_version() -> str:
    """``mz_version()`` and the ``mz_version`` parameter: Materialize's form (``v0.130.0
    (...)``), which dbt-materialize checks is at least 0.68."""
    from tidegate import __version__

    return f"v0.130.0 (tidegate {__version__})"


async def execute(
    env: SqlEnvironment,
    sql: str,
    params: Sequence[Any] | None = None,
    *,
    request_id: str | None = None,
) -> SqlResult:
    """Run the statement(s) of ``sql`` in a fresh session; the last one's result (``params``
    fill ``$1``, ``$2``, ...): what :meth:`Environment.execute` does. ``request_id`` makes the
    write of ``sql`` idempotent (see :meth:`SqlSession.run_script`)."""
    results = await execute_script(env, sql, params, request_id=request_id)
    if not results:
        return SqlResult("EMPTY")
    return results[-1]


async def execute_script(
    env: SqlEnvironment,
    sql: str,
    params: Sequence[Any] | None = None,
    *,
    request_id: str | None = None,
) -> list[SqlResult]:
    """Run every statement of ``sql`` in order in a fresh session, as those of a wire connection
    or of ``POST /sql`` run: one session semantics. Each one's result; stops at the first
    error."""
    session = SqlSession(env)
    try:
        return await session.run_script(sql, params, request_id=request_id)
    finally:
        await session.aclose()


# -- session variables ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Var:
    name: str  # as SHOW prints it
    default: str
    description: str
    report: bool = False  # sent as ParameterStatus at startup and when it changes
    read_only: bool = False
    choices: tuple[str, ...] = ()  # lower case; empty: any value


def _vars() -> dict[str, _Var]:
    defs = [
        _Var("application_name", "", "Sets the application name.", report=True),
        _Var("client_encoding", "UTF8", "The client's character set.", True, False, ("utf8",)),
        _Var("DateStyle", "ISO, MDY", "The display format for dates.", True),
        _Var("TimeZone", "UTC", "The time zone of timestamps.", True),
        _Var(
            "IntervalStyle",
            "postgres",
            "The display format for intervals.",
            True,
            False,
            ("postgres",),
        ),
        _Var("integer_datetimes", "on", "Datetimes are integers.", True, True),
        _Var(
            "standard_conforming_strings",
            "on",
            "'...' strings treat backslashes literally.",
            True,
            False,
            ("on", "true"),
        ),
        _Var("server_version", SERVER_VERSION, "The server's version.", True, True),
        _Var("server_version_num", "90500", "The server's version as a number.", False, True),
        _Var("server_encoding", "UTF8", "The server's character set.", True, True),
        _Var("is_superuser", "off", "Whether the user is a superuser.", True, True),
        _Var("session_authorization", "materialize", "The session's user.", True, True),
        _Var("default_transaction_read_only", "off", "New transactions are read-only.", True, True),
        _Var("in_hot_standby", "off", "Whether the server is a standby.", True, True),
        _Var("mz_version", mz_version(), "Materialize's version.", True, True),
        _Var("search_path", "public", "The schemas names are looked up in."),
        _Var("extra_float_digits", "3", "Digits of float output."),
        _Var("cluster", "default", "The cluster that runs queries and dataflows."),
        _Var("cluster_replica", "", "The replica queries go to."),
        _Var("database", "materialize", "The session's database."),
        _Var(
            "transaction_isolation",
            "strict serializable",
            "The isolation level.",
            False,
            False,
            ("strict serializable", "serializable"),
        ),
        _Var("statement_timeout", "0", "The longest a statement may run (0: no limit)."),
        _Var(
            "idle_in_transaction_session_timeout",
            "120000",
            "The longest a session may idle inside a transaction block (0: no limit).",
        ),
        _Var("idle_session_timeout", "0", "The longest a session may idle (0: no limit)."),
        _Var("client_min_messages", "notice", "The least severe message sent to the client."),
        _Var("welcome_message", "on", "Whether to send a notice on connect."),
        _Var("auto_route_catalog_queries", "on", "Catalog queries go to the catalog cluster."),
        _Var("current_object_missing_warnings", "on", "Warn when the session's objects are gone."),
        _Var("max_query_result_size", "1GB", "The largest result a query may return."),
        _Var("emit_timestamp_notice", "off", "Send a query's timestamp as a notice."),
        _Var("real_time_recency", "off", "Read sources at their upstream's latest."),
        _Var("sql_safe_updates", "off", "Refuse UPDATE and DELETE without WHERE."),
        _Var("lc_messages", "C", "The language of messages."),
        _Var("bytea_output", "hex", "The output format of bytea."),
        _Var("transaction_read_only", "off", "Whether the transaction is read-only.", False, True),
        _Var("max_identifier_length", "255", "The longest identifier.", False, True),
    ]
    return {v.name.lower(): v for v in defs}


_VARS = _vars()
_ISOLATIONS = {
    "strict serializable": "strict serializable",
    "serializable": "serializable",
    "strong session serializable": "strict serializable",
    "repeatable read": "serializable",
    "read committed": "serializable",
    "read uncommitted": "serializable",
}
_UTC = ("utc", "gmt", "etc/utc", "etc/gmt", "z", "zulu", "+00:00", "00:00", "+00", "0", "universal")


def _duration_ms(text: str) -> int:
    t = text.strip().lower()
    if t in ("0", "", "off", "default"):
        return 0
    if t.isdigit():
        return int(t)
    from tidegate.spec.sql import parse_interval_ms

    try:
        return parse_interval_ms(t)
    except ValueError as e:
        raise InvalidParameterValue(str(e)) from None


def _check_value(var: _Var, value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        value = value[1:-1]  # asyncpg sends client_encoding='utf-8' quoted
    low = value.lower()
    name = var.name.lower()
    if name == "client_encoding":
        if low.replace("-", "").replace("_", "") not in ("utf8", "unicode"):
            raise InvalidParameterValue(
                f'invalid value for parameter "client_encoding": "{value}"',
                hint="tidegate speaks UTF8 only",
            )
        return "UTF8"
    if name == "timezone":
        if low not in _UTC:
            raise InvalidParameterValue(
                f'invalid value for parameter "TimeZone": "{value}"',
                hint="tidegate's timestamps are in UTC: only UTC is accepted",
            )
        return "UTC"
    if name == "datestyle":
        if "iso" not in low and low not in ("mdy", "us"):
            raise InvalidParameterValue(
                f'invalid value for parameter "DateStyle": "{value}"',
                hint="only the ISO date style is supported",
            )
        return "ISO, MDY"
    if name == "transaction_isolation":
        found = _ISOLATIONS.get(low)
        if found is None:
            raise InvalidParameterValue(
                f'invalid value for parameter "transaction_isolation": "{value}"'
            )
        return found
    if name == "extra_float_digits":
        try:
            n = int(low)
        except ValueError:
            raise InvalidParameterValue(
                'parameter "extra_float_digits" requires a numeric value'
            ) from None
        if not -15 <= n <= 3:
            raise InvalidParameterValue(
                f'{n} is outside the valid range for parameter "extra_float_digits" (-15 .. 3)'
            )
        return str(n)
    if name in ("statement_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout"):
        return str(_duration_ms(value))
    if var.choices and low not in var.choices:
        raise InvalidParameterValue(
            f'invalid value for parameter "{var.name}": "{value}"',
            hint=f"expected one of: {', '.join(var.choices)}",
        )
    if name == "search_path":
        return ", ".join(p.strip() for p in value.split(","))
    return value


# -- results -------------------------------------------------------------------------------------


@dataclass
class RowStream:
    """Rows that keep coming (a ``SUBSCRIBE``): ``columns`` and their ``pg_types``, then
    ``batches()`` until the subscription ends, fails or :meth:`aclose` is called."""

    columns: tuple[str, ...]
    pg_types: tuple[T.PgType, ...]
    batches: AsyncIterator[list[Row]]
    close: Any = None
    tag: str = "SUBSCRIBE"
    bounded: bool = False
    """It ends by itself (``UP TO``): collecting it (``Environment.execute``) takes every
    batch, not only the first."""

    async def aclose(self) -> None:
        if self.close is not None:
            close, self.close = self.close, None
            await close()


@dataclass
class CopyOut:
    """``COPY ... TO STDOUT``: the rows in ``options``' format, all at once (``rows``) or as a
    stream (``stream``: a subscription)."""

    columns: tuple[str, ...]
    pg_types: tuple[T.PgType, ...]
    options: S.CopyOptions
    rows: list[Row] | None = None
    stream: RowStream | None = None


@dataclass
class CopyIn:
    """``COPY t FROM STDIN``: the session waits for the data (:meth:`SqlSession.copy_in`)."""

    table: str
    columns: tuple[str, ...]
    types: tuple[ColumnType, ...]
    options: S.CopyOptions
    all_columns: tuple[str, ...] = ()


Outcome = SqlResult | RowStream | CopyOut | CopyIn


@dataclass
class Described:
    """What a prepared statement takes and answers: parameter types, and the columns it
    answers (``None``: no rows, NoData)."""

    params: tuple[T.PgType, ...]
    columns: tuple[str, ...] | None
    pg_types: tuple[T.PgType, ...] = ()


R = TypeVar("R")

_OFF_LOOP_CHARS = 2048
"""Query strings longer than this are split, classified and parsed in a worker thread (where
the environment's platform allows threads), so that one long statement cannot keep the event
loop -- every other session, the control endpoint's ``/health`` -- waiting while it is parsed;
shorter ones take a few milliseconds at most, about what the hop to a thread costs."""

_PARALLEL_PARSES = 2
"""Long statements parsed at once, per event loop: what many sessions sending long statements
together can hold in tokens and syntax trees is bounded (the others wait their turn)."""

_PARSERS: RunVar[anyio.CapacityLimiter] = RunVar("tidegate_sql_parsers")


async def _off_loop(env: Any, sql: str, fn: Callable[..., R], *args: Any) -> R:
    """``fn(*args)`` (pure work on the text ``sql``: no session or controller state) in a worker
    thread if ``sql`` is long and ``env``'s platform allows threads; else here. The simulator's
    platform allows none, so its runs stay deterministic. A worker thread's stack holds the
    parser at its nesting limit (:mod:`tidegate.spec.sql._limits` lends it the frames; checked
    with 1 MiB thread stacks)."""
    platform = getattr(env, "platform", None)
    if len(sql) <= _OFF_LOOP_CHARS or platform is None or not platform.threads:
        return fn(*args)
    try:
        limiter = _PARSERS.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(_PARALLEL_PARSES)
        _PARSERS.set(limiter)
    return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)


@dataclass(frozen=True)
class _Front:
    """What the text of one statement is, found without the session or the catalog."""

    sql: str
    text: str | None  # the one statement's text; None: no statement
    classified: Any = None
    statement: Statement | None = None  # parsed, unless it needs the session's constants
    secret: SecretStatement | None = None


def _front(sql: str, names: S.Names) -> _Front:
    """Split, classify and (unless it calls constant functions such as ``now()``, which the
    session fills in) parse the one statement of ``sql`` [SqlError]. Pure: it runs on a worker
    thread for long statements."""
    statements = split_statements(sql)
    if len(statements) > 1:
        raise _multi(sql)
    if not statements:
        return _Front(sql, None)
    text = statements[0][0]
    if is_secret_statement(text):
        return _Front(sql, text, secret=parse_secret_statement(text))
    classified = S.classify(text, names)
    statement: Statement | None = None
    if isinstance(classified, S.Passthrough) and not classified.functions:
        try:
            statement = parse_one(classified.sql)
        except SqlError as e:
            raise e.located(text) from None
    return _Front(sql, text, classified, statement)


@dataclass
class Prepared:
    """A statement prepared once (``Parse``), run many times."""

    sql: str
    classified: Any
    statement: Statement | None
    params: tuple[T.PgType, ...]
    described: Described | None = None
    catalog_key: object = None
    secret: SecretStatement | None = None
    """A secret statement (:mod:`tidegate.spec.sql.secrets`): parsed apart, since its text
    holds a value that no answer, error or log may show."""

    @property
    def empty(self) -> bool:
        return not self.sql.strip()


@dataclass
class _Transaction:
    explicit: bool
    read_only: bool = False
    kind: str | None = None  # None, "read", "write", "ddl"
    read_ts: int | None = None
    writes: list[tuple[Any, list[tuple[Row, int]]]] = field(default_factory=list)
    failed: bool = False
    implicit: bool = False
    """The implicit transaction of a script of several statements (:meth:`SqlSession.script`)."""
    held: HeldRead | None = None
    """A read transaction's read holds at ``read_ts`` (released when it ends)."""
    domain: set[GlobalId] = field(default_factory=set)
    """What the transaction's reads read so far: each held at ``read_ts``."""
    more: list[HeldRead] = field(default_factory=list)
    """Holds at ``read_ts`` its later reads took on what its first did not read."""

    def end(self) -> None:
        """The transaction is over (committed, rolled back, failed, or its session closed)."""
        if self.held is not None:
            held, self.held = self.held, None
            held.release()
        more, self.more = self.more, []
        for h in more:
            h.release()


@dataclass
class _Cursor:
    name: str
    columns: tuple[str, ...]
    pg_types: tuple[T.PgType, ...]
    rows: list[Row] | None = None  # a query's rows, read at DECLARE
    stream: RowStream | None = None
    buffered: list[Row] = field(default_factory=list)
    done: bool = False


_NUMERIC_TS = T.NUMERIC


def _subscribe_type(source: OutputColumn, types: Sequence[ColumnType]) -> T.PgType:
    """The PostgreSQL type of a ``SUBSCRIBE`` output column (Materialize's)."""
    if source == "mz_timestamp":
        return _NUMERIC_TS
    if source == "mz_progressed":
        return T.BOOL
    if source == "mz_diff":
        return T.INT8
    if source == "mz_state":
        return T.TEXT
    return T.for_scalar(types[source].scalar)


def _unsupported_tx(word: str) -> ActiveSqlTransaction:
    return ActiveSqlTransaction(f"{word} cannot be run inside a transaction block")


_ALONE = (
    CreateClusterStmt,
    CreateClusterReplicaStmt,
    AlterClusterStmt,
    DropClusterStmt,
    DropClusterReplicaStmt,
    AlterSinkStmt,
)
"""Statements that run by themselves only (as Materialize refuses them in a transaction block):
what they do outside the catalog (replicas started or stopped, a sink cut over) happens at
once, so it could neither wait for a transaction's commit nor be undone by its failure."""


def _statement_word(stmt: Statement) -> str:
    names = {
        CreateClusterStmt: "CREATE CLUSTER",
        CreateClusterReplicaStmt: "CREATE CLUSTER REPLICA",
        AlterClusterStmt: "ALTER CLUSTER",
        DropClusterStmt: "DROP CLUSTER",
        DropClusterReplicaStmt: "DROP CLUSTER REPLICA",
        AlterSinkStmt: "ALTER SINK",
        CreateTableStmt: "CREATE TABLE",
        CreateViewStmt: "CREATE VIEW",
        CreateIndexStmt: "CREATE INDEX",
        CreateSourceStmt: "CREATE SOURCE",
        CreateSinkStmt: "CREATE SINK",
        DropStmt: "DROP",
        UpdateStmt: "UPDATE",
        DeleteStmt: "DELETE",
        CopyToStmt: "COPY",
    }
    return names.get(type(stmt), type(stmt).__name__.removesuffix("Stmt").upper())


class SqlSession:
    """One client's session over ``env`` (see the module docstring)."""

    _next_pid = 1000

    def __init__(
        self,
        env: SqlEnvironment,
        *,
        user: str = "materialize",
        database: str = "materialize",
        options: Mapping[str, str] | None = None,
        engine: CatalogEngine | None = None,
        pid: int | None = None,
    ) -> None:
        self.env = env
        self.user = user
        self.database = database
        if pid is None:
            SqlSession._next_pid += 1
            pid = SqlSession._next_pid
        self.pid = pid
        self.engine = engine if engine is not None else _shared_engine(env)
        self._values: dict[str, str] = {k: v.default for k, v in _VARS.items()}
        self._values["session_authorization"] = user
        self._values["database"] = database
        self.changed: list[tuple[str, str]] = []
        """Reported variables changed since the driver last looked (ParameterStatus)."""
        self.notices: list[tuple[str, str]] = []
        """``(severity, message)`` notices since the driver last looked."""
        self._tx: _Transaction | None = None
        self._cursors: dict[str, _Cursor] = {}
        self._stmt_cluster = self._values["cluster"]
        """The cluster of the statement running (its ``IN CLUSTER``, else the session's)."""
        self._plans: dict[Any, tuple[Any, SelectStmt, Lowered]] = {}
        for name, value in (options or {}).items():
            self._set(name, value, at_startup=True)
        self.changed.clear()

    # -- variables ------------------------------------------------------------------------------

    def reported(self) -> list[tuple[str, str]]:
        """The variables a server reports at startup (``ParameterStatus``), as PostgreSQL names
        them."""
        return [(v.name, self._values[k]) for k, v in _VARS.items() if v.report]

    def var(self, name: str) -> str:
        """A variable's value [UndefinedParameter]."""
        key = name.lower()
        if key not in _VARS:
            raise UndefinedParameter(f'unrecognized configuration parameter "{name}"')
        if key == "transaction_read_only":
            return "on" if self._tx is not None and self._tx.read_only else "off"
        return self._values[key]

    def timeout_ms(self, name: str) -> int:
        return int(self._values.get(name, "0") or 0)

    def _set(self, name: str, value: str | None, *, at_startup: bool = False) -> None:
        key = name.lower()
        if key == "time zone":
            key = "timezone"
        var = _VARS.get(key)
        if var is None:
            if at_startup:
                return  # PostgreSQL refuses; Materialize ignores unknown startup options
            raise UndefinedParameter(f'unrecognized configuration parameter "{name}"')
        if var.read_only and not (at_startup and key == "session_authorization"):
            if value is not None and value == self._values[key]:
                return
            raise InvalidParameterValue(
                f'parameter "{var.name}" cannot be changed', sqlstate="55P02"
            )
        new = var.default if value is None else _check_value(var, value)
        if key == "cluster" and new not in self._clusters():
            self.notices.append(("NOTICE", f'cluster "{new}" does not exist'))
        if new != self._values[key] and var.report:
            self.changed.append((var.name, new))
        self._values[key] = new

    def _clusters(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.env.state.clusters)

    def _cluster(self, prepared: Prepared | None = None) -> str:
        """Where a statement runs: its ``IN CLUSTER`` clause's cluster, else the session's."""
        c = None if prepared is None else prepared.classified
        if isinstance(c, S.Passthrough) and c.cluster is not None:
            return c.cluster
        return self._values["cluster"]

    # -- status ---------------------------------------------------------------------------------

    @property
    def transaction_status(self) -> str:
        """``I`` idle, ``T`` in a transaction block, ``E`` in a failed one."""
        if self._tx is None or not self._tx.explicit:
            return "I"
        return "E" if self._tx.failed else "T"

    def fail(self) -> None:
        """A statement of this session failed: an explicit transaction is aborted."""
        if self._tx is not None:
            self._tx.end()  # it reads no more
            if self._tx.explicit:
                self._tx.failed = True
            else:
                self._tx = None

    def names(self) -> S.Names:
        state = self.env.state
        collections = frozenset(e.name for e in state.system_collections)
        return S.Names(
            self.database,
            "public",
            self._clusters(),
            relation_names() - collections,
        )

    # -- preparing ------------------------------------------------------------------------------

    def prepare(self, sql: str, param_oids: Sequence[int] = ()) -> Prepared:
        """Parse ``sql`` (one statement) [SqlError]; ``param_oids`` fix parameter types (0:
        inferred from the statement)."""
        return self._prepared(_front(sql, self.names()), param_oids)

    async def prepare_async(self, sql: str, param_oids: Sequence[int] = ()) -> Prepared:
        """:meth:`prepare`, the parsing of a long ``sql`` in a worker thread (see
        :func:`_off_loop`): the catalog's names are read here, on the event loop, and only the
        pure work of the text (tokenizing, classifying, parsing) runs on the thread."""
        front = await _off_loop(self.env, sql, _front, sql, self.names())
        return self._prepared(front, param_oids)

    async def split(self, sql: str) -> list[tuple[str, int]]:
        """:func:`~tidegate.spec.sql.parse.split_statements`, a long ``sql`` split in a worker
        thread [ProgramLimitExceeded, StatementTooComplex: past the size limits; SqlError]."""
        return await _off_loop(self.env, sql, split_statements, sql)

    def _prepared(self, front: _Front, param_oids: Sequence[int]) -> Prepared:
        """The :class:`Prepared` of a parsed ``front``: what needs the session or the catalog
        (constants such as ``now()``, parameter types inferred from the catalog)."""
        sql, text, classified = front.sql, front.text, front.classified
        if text is None:
            return Prepared(sql, None, None, tuple(t or T.TEXT for t in _declared(param_oids)))
        if front.secret is not None:
            return Prepared(text, None, None, (), secret=front.secret)
        statement = front.statement
        if isinstance(classified, S.Passthrough) and statement is None:
            rewritten = self._constants_in(classified)
            try:
                statement = parse_one(rewritten)
            except SqlError as e:
                raise e.located(text) from None
        count = _placeholder_count(text)
        declared = list(_declared(param_oids))
        if count > len(declared):
            declared += [None] * (count - len(declared))
        if any(t is None for t in declared) and isinstance(classified, S.CatalogQuery):
            from .catalog_queries import param_types

            inferred = param_types(classified.sql, len(declared))
            declared = [d if d is not None else inferred[i] for i, d in enumerate(declared)]
        if any(t is None for t in declared):
            inferred = _infer_params(statement, EnvCatalog(self.env), len(declared))
            declared = [d if d is not None else inferred[i] for i, d in enumerate(declared)]
        params = tuple(t if t is not None else T.TEXT for t in declared)
        return Prepared(text, classified, statement, params)

    def _constants_in(self, passthrough: S.Passthrough) -> str:
        if not passthrough.functions:
            return passthrough.sql
        now = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
        values = {
            "current_database": _quote(self.database),
            "current_catalog": _quote(self.database),
            "current_schema": _quote("public"),
            "current_user": _quote(self.user),
            "session_user": _quote(self.user),
            "current_role": _quote(self.user),
            "user": _quote(self.user),
            "version": _quote(server_version()),
            "mz_version": _quote(mz_version()),
            "pg_backend_pid": str(self.pid),
            "now": f"CAST({_quote(now.isoformat(sep=' '))} AS TIMESTAMP)",
            "current_timestamp": f"CAST({_quote(now.isoformat(sep=' '))} AS TIMESTAMP)",
            "mz_now": str(self._now_ms()),
        }
        used = {k: v for k, v in values.items() if k in passthrough.functions}
        if "mz_now" in used and _temporal_filter(passthrough.sql):
            del used["mz_now"]  # lowered as a temporal filter, evaluated at the read's own time
        return S.substitute_functions(passthrough.sql, used) if used else passthrough.sql

    def _now_ms(self) -> int:
        oracle = getattr(self.env, "oracle", None)
        if oracle is not None:
            try:
                return int(oracle.read_ts())
            except Exception:  # an oracle that cannot answer now: the wall clock
                pass
        return int(time.time() * 1000)

    def interruptible(self, prepared: Prepared) -> bool:
        """Whether cancelling ``prepared`` midway leaves nothing half done: reads (queries,
        ``SUBSCRIBE``, ``FETCH``, ``COPY ... TO``, the catalog, ``SHOW``) are; DDL and writes run
        to their end once started (a ``CancelRequest``, ``statement_timeout`` or a client that
        goes away stops them before, never in the middle)."""
        c = prepared.classified
        if isinstance(c, S.CatalogQuery | S.Fetch | S.CopyTo | S.Show):
            return True
        stmt = prepared.statement
        return isinstance(stmt, SelectStmt | SubscribeStmt) or (
            stmt is not None and _is_text_result(stmt)
        )

    async def describe(self, prepared: Prepared) -> Described:
        """Parameter types and result columns of ``prepared``, without running it."""
        if prepared.described is not None:
            return prepared.described
        cols: tuple[str, ...] | None = None
        types: tuple[T.PgType, ...] = ()
        c = prepared.classified
        stmt = prepared.statement
        if isinstance(prepared.secret, ShowSecretsStmt):
            cols, types = ("name",), (T.TEXT,)
        elif isinstance(c, S.CatalogQuery):
            res = self._catalog(c.sql, [], describe=len(prepared.params))
            cols, types = res.columns, res.pg_types or ()
        elif isinstance(c, S.Show):
            cols, types = (
                ((c.name,), (T.TEXT,))
                if c.name != "all"
                else (("name", "setting", "description"), (T.TEXT,) * 3)
            )
        elif isinstance(c, S.Fetch):
            cursor = self._cursors.get(c.name)
            if cursor is not None:
                cols, types = cursor.columns, cursor.pg_types
        elif isinstance(stmt, SelectStmt | SubscribeStmt):
            dummies = [_dummy(t) for t in prepared.params]
            low = lower_query(stmt.query, EnvCatalog(self.env), dummies, stmt.sql)
            names, ctypes = low.names, tuple(T.for_scalar(t.scalar) for t in low.types)
            if isinstance(stmt, SubscribeStmt):
                out = subscribe_output(
                    low.names, progress=stmt.progress, envelope=stmt.envelope, sql=stmt.sql
                )
                names = out.names
                ctypes = tuple(_subscribe_type(src, low.types) for src in out.sources)
            cols, types = names, ctypes
        elif stmt is not None and _is_text_result(stmt):
            ran = await self._run_parsed(stmt, [_dummy(t) for t in prepared.params], dry=True)
            if isinstance(ran, SqlResult) and ran.columns:
                res = ran
                cols = res.columns
                types = res.pg_types or tuple(T.for_scalar(t.scalar) for t in res.types)
        prepared.described = Described(prepared.params, cols, types)
        return prepared.described

    # -- running --------------------------------------------------------------------------------

    async def run_script(
        self, sql: str, params: Sequence[Any] | None = None, *, request_id: str | None = None
    ) -> list[SqlResult]:
        """Every statement of ``sql`` (the simple query protocol without a wire): each one's
        result; a stream answers its first batch. Stops at the first error.

        ``request_id`` makes the write of ``sql`` idempotent (see
        :meth:`~tidegate.runtime.environment.Environment.append_many`): ``sql`` must then be
        exactly one ``INSERT``, ``UPDATE`` or ``DELETE`` outside a transaction block
        [InvalidParameterValue]."""
        statements = await self.split(sql)
        if params and len(statements) > 1:
            raise SqlError("parameters need exactly one statement")
        if request_id is not None:
            await self._check_idempotent(statements)
        out: list[SqlResult] = []
        text = sql
        try:
            async with self.script(statements):
                for text, _offset in statements:
                    prepared = await self.prepare_async(text)
                    outcome = await self.execute(
                        prepared, list(params or ()), request_id=request_id
                    )
                    out.append(await _collect(self, outcome))
        except SqlError as e:
            self.fail()
            raise e.located(shown(text)) from None
        except Exception:
            self.fail()
            raise
        return out

    async def stream_script(
        self, sql: str, params: Sequence[Any] | None = None
    ) -> AsyncIterator[SqlResult | RowStream]:
        """Every statement of ``sql`` as :meth:`run_script` runs them, each one's outcome as it
        comes: a :class:`SqlResult`, or a :class:`RowStream` (a ``SUBSCRIBE``) that the caller
        reads, and closes, before asking for the next. Stops at the first error (raised,
        located in its statement). A script is one implicit transaction, as in
        :meth:`run_script` (:meth:`script`): a script of DDL only answers once all of it has
        committed; the writes of another land when its last statement has run."""
        statements = await self.split(sql)
        if params and len(statements) > 1:
            raise SqlError("parameters need exactly one statement")
        try:
            ddl_only = await self._ddl_only(statements)
        except SqlError:
            self.fail()
            raise
        if ddl_only:  # no stream among them
            for result in await self.run_script(sql, params):
                yield result
            return
        text = sql
        try:
            async with self.script(statements):  # its writes land when the last has run
                for text, _offset in statements:
                    prepared = await self.prepare_async(text)
                    outcome = await self.execute(prepared, list(params or ()))
                    if not isinstance(outcome, RowStream):
                        outcome = await _collect(self, outcome)
                    yield outcome
        except SqlError as e:
            self.fail()
            raise e.located(shown(text)) from None
        except Exception:
            self.fail()
            raise

    @contextlib.asynccontextmanager
    async def script(self, statements: Sequence[tuple[str, int]]) -> AsyncIterator[None]:
        """The implicit transaction of a script (a simple query of several statements outside
        a block), as PostgreSQL and Materialize run one: all of it or none of it.

        A script of DDL only (``CREATE``, ``DROP``, ``ALTER``, secrets) is the environment's
        DDL transaction: one catalog change when the body ends, none if it raises. Any other
        script without ``BEGIN``/``COMMIT``/``ROLLBACK`` of its own buffers its ``INSERT``\\ s
        and appends them at one timestamp when the body ends (none if it raises). A read of a
        collection after a buffered write is refused (``transaction in write-only mode``,
        25000), as Materialize refuses reads in a write transaction, and so are ``UPDATE`` and
        ``DELETE`` (25001: a read, then a write, whose read would not see the buffered
        writes). DDL in such a script takes effect at once, each statement whole (a table
        the script creates is there for its ``INSERT``), and stays if a later statement
        fails. [SqlError: a statement of a DDL script that does not parse, before anything
        runs.]"""
        if await self._ddl_only(statements):
            async with self.env.ddl_transaction():
                yield
            return
        if not await self._implicit(statements):
            yield
            return
        tx = self._tx = _Transaction(False, implicit=True)
        try:
            yield
        except BaseException:
            if self._tx is tx:
                self._tx = None
            raise
        if self._tx is not tx:
            return
        self._tx = None
        if tx.writes:
            await self.env.append_many(tx.writes)

    async def _implicit(self, statements: Sequence[tuple[str, int]]) -> bool:
        """Whether ``statements`` run as an implicit transaction of writes (see :meth:`script`):
        several, outside a block, none of them transaction control."""
        if len(statements) < 2 or self._tx is not None:
            return False
        for text, _offset in statements:
            try:
                prepared = await self.prepare_async(text)
            except SqlError:
                continue  # refused when it is reached, and the script with it
            if isinstance(prepared.classified, S.Begin | S.Commit | S.Rollback):
                return False
        return True

    async def _ddl_only(self, statements: Sequence[tuple[str, int]]) -> bool:
        """Whether ``statements`` are a script of DDL only outside a block (see
        :meth:`script`) [SqlError: one of them does not parse, the others being DDL; one
        that must run alone]."""
        if len(statements) < 2 or (self._tx is not None and self._tx.explicit):
            return False
        failure: SqlError | None = None
        ddl = True
        for text, _offset in statements:
            try:
                prepared = await self.prepare_async(text)
            except SqlError as e:
                failure = failure or e.located(shown(text))
                continue
            if isinstance(prepared.statement, _ALONE):  # before anything runs
                raise _unsupported_tx(_statement_word(prepared.statement)).located(shown(text))
            ddl = ddl and _changes_catalog(prepared)
        if not ddl:
            return False
        if failure is not None:  # the others are DDL: none of them runs
            raise failure
        return True

    async def _check_idempotent(self, statements: list[tuple[str, int]]) -> None:
        """[InvalidParameterValue] unless ``statements`` are one write a request id can name."""
        ok = len(statements) == 1 and (self._tx is None or not self._tx.explicit)
        if ok:
            stmt = (await self.prepare_async(statements[0][0])).statement
            ok = isinstance(stmt, InsertStmt | UpdateStmt | DeleteStmt)
        if not ok:
            raise InvalidParameterValue(
                "a request id makes one write idempotent: give it one INSERT, UPDATE or DELETE"
            )

    async def execute(
        self, prepared: Prepared, params: Sequence[Any], *, request_id: str | None = None
    ) -> Outcome:
        """Run ``prepared`` with ``params`` (Python values) [SqlError and the runtime's errors;
        the caller calls :meth:`fail` on an error]; ``request_id`` makes a write outside a
        transaction block idempotent."""
        if prepared.empty:
            return SqlResult("EMPTY")
        check_params(prepared.sql, params)
        c = prepared.classified
        tx = self._tx
        if tx is not None and tx.failed and not isinstance(c, S.Commit | S.Rollback):
            raise InFailedSqlTransaction()
        if isinstance(c, S.Begin | S.Commit | S.Rollback | S.SetTransaction):
            return await self._transaction_statement(c)
        if prepared.secret is not None:
            return await self._secret(prepared.secret)
        if isinstance(c, S.SetVariable):
            self._set(c.name, c.value)
            return SqlResult("SET")
        if isinstance(c, S.Reset):
            if c.name is None:
                for k, v in _VARS.items():
                    if not v.read_only and self._values[k] != v.default:
                        self._set(k, None)
            else:
                self._set(c.name, None)
            return SqlResult("RESET")
        if isinstance(c, S.Show):
            return self._show(c.name)
        if isinstance(c, S.Noop):
            if c.notice:
                self.notices.append(("NOTICE", c.notice))
            return SqlResult(c.tag)
        if isinstance(c, S.Discard):
            if c.what == "all":
                if self._tx is not None and self._tx.explicit:
                    raise _unsupported_tx("DISCARD ALL")
                self._cursors.clear()
                for k, v in _VARS.items():
                    if not v.read_only:
                        self._values[k] = v.default
                return SqlResult("DISCARD ALL")
            if c.what == "deallocate":
                return SqlResult("DEALLOCATE ALL" if c.name is None else "DEALLOCATE")
            return SqlResult(f"DISCARD {c.what.upper()}")
        self._stmt_cluster = self._values["cluster"]
        if isinstance(c, S.CatalogQuery):
            return self._catalog(c.sql, list(params))
        if isinstance(c, S.Declare):
            return await self._declare(c, params)
        if isinstance(c, S.Fetch):
            return await self._fetch(c)
        if isinstance(c, S.CloseCursor):
            if c.name is None:
                for cur in self._cursors.values():
                    if cur.stream is not None:
                        await cur.stream.aclose()
                self._cursors.clear()
            else:
                if c.name not in self._cursors:
                    raise InvalidCursorName(f'cursor "{c.name}" does not exist')
                cur = self._cursors.pop(c.name)
                if cur.stream is not None:
                    await cur.stream.aclose()
            return SqlResult("CLOSE CURSOR")
        if isinstance(c, S.CopyTo):
            return await self._copy_to(c, params)
        if isinstance(c, S.CopyFrom):
            return self._copy_from(c)
        stmt = prepared.statement
        assert stmt is not None
        self._stmt_cluster = self._cluster(prepared)
        return await self._run_parsed(stmt, list(params), request_id=request_id)

    async def _secret(self, stmt: SecretStatement) -> SqlResult:
        """A secret statement: DDL (so, in a block, only before any read or write), except
        ``SHOW SECRETS``; an error about it carries its text with the value starred out."""
        tx = self._tx
        if tx is not None and tx.explicit and not isinstance(stmt, ShowSecretsStmt):
            if tx.kind in ("read", "write") or tx.read_only:
                raise _unsupported_tx(stmt.sql.split()[0].upper() + " SECRET")
            tx.kind = "ddl"
        try:
            answer = await run_secret_statement(self.env, stmt)  # type: ignore[arg-type]
        except SqlError as e:
            raise e.located(redacted(stmt.sql)) from None
        if answer.names is None:
            return SqlResult(answer.status, notice=answer.notice)
        return _text_rows(("name",), [(n,) for n in answer.names], "SHOW")

    async def _transaction_statement(self, c: Any) -> SqlResult:
        tx = self._tx
        if isinstance(c, S.Begin):
            if tx is not None and tx.explicit:
                self.notices.append(("WARNING", "there is already a transaction in progress"))
                return SqlResult("BEGIN")
            if c.isolation is not None:
                _check_value(_VARS["transaction_isolation"], c.isolation)
            self._tx = _Transaction(True, read_only=c.read_only)
            return SqlResult("BEGIN")
        if isinstance(c, S.SetTransaction):
            if c.isolation is not None:
                value = _check_value(_VARS["transaction_isolation"], c.isolation)
                if c.session or tx is None:
                    self._values["transaction_isolation"] = value
            if c.read_only is not None and tx is not None and tx.explicit:
                if tx.kind is not None:
                    raise InvalidTransactionState(
                        "transaction read-write mode must be set before any query"
                    )
                tx.read_only = c.read_only
            return SqlResult("SET")
        if isinstance(c, S.Rollback):
            if tx is None or not tx.explicit:
                self.notices.append(("WARNING", "there is no transaction in progress"))
            await self._close_cursors()
            self._end_transaction()
            return SqlResult("ROLLBACK")
        # COMMIT
        if tx is None or not tx.explicit:
            self.notices.append(("WARNING", "there is no transaction in progress"))
            return SqlResult("COMMIT")
        self._end_transaction()
        await self._close_cursors()
        if tx.failed:
            return SqlResult("ROLLBACK")
        if tx.writes:
            await self.env.append_many(tx.writes)
        return SqlResult("COMMIT")

    def _end_transaction(self) -> None:
        if self._tx is not None:
            self._tx.end()
        self._tx = None

    async def aclose(self) -> None:
        """The session is over (its connection or request ended): an open transaction ends
        (its read holds go back) and its cursors close."""
        self._end_transaction()
        await self._close_cursors()

    async def _close_cursors(self) -> None:
        for cur in self._cursors.values():
            if cur.stream is not None:
                await cur.stream.aclose()
        self._cursors.clear()

    def _show(self, name: str) -> SqlResult:
        if name == "all":
            rows: list[Row] = [
                (v.name, self.var(k), v.description) for k, v in sorted(_VARS.items())
            ]
            return _text_rows(("name", "setting", "description"), rows, "SHOW")
        value = self.var(name)
        return _text_rows((name,), [(value,)], "SHOW")

    # -- the system catalog ---------------------------------------------------------------------

    def _catalog(self, sql: str, params: Sequence[Any], describe: int | None = None) -> SqlResult:
        state = self.env.state
        clusters = self._clusters_info()
        key = (id(state), clusters, self.user)
        constants = SessionConstants(
            self.user,
            self.database,
            "public",
            server_version(),
            mz_version(),
            self.pid,
            {k: self._values[k] for k in _VARS},
            self._now_ms(),
        )

        def snapshot() -> Snapshot:
            return self._snapshot(clusters)

        if describe is not None:
            result = self.engine.describe(sql, key, snapshot, constants, describe)
        else:
            result = self.engine.query(sql, key, snapshot, constants, params)
        rows = result.rows
        return SqlResult(
            f"SELECT {len(rows)}",
            result.columns,
            tuple(ColumnType(t.scalar or ScalarType.STRING, True) for t in result.types),
            rows,
            pg_types=result.types,
        )

    def _clusters_info(self) -> tuple[ClusterInfo, ...]:
        """The catalog's clusters with their replicas' sizes and whether each is ready (connected,
        as the controller sees it; every replica when the environment cannot say)."""
        state = self.env.state
        live = getattr(self.env, "replicas", None)
        ready: dict[str, bool] | None = None
        if callable(live):
            try:
                ready = {r.replica: r.connected and r.status == "connected" for r in live()}
            except Exception:  # not running (a catalog-only environment): say ready
                ready = None
        out = []
        for c in state.clusters:
            reps = tuple(
                (
                    r.name,
                    r.size or "",
                    True if ready is None else ready.get(r.id, False),
                )
                for r in state.cluster_replicas(c.name)
            )
            out.append(ClusterInfo(c.id, c.name, reps, c.managed, c.size, c.replication_factor))
        return tuple(out)

    def _snapshot(self, clusters: tuple[ClusterInfo, ...]) -> Snapshot:
        env = self.env
        state = env.state
        cat = EnvCatalog(env)
        items = tuple(cat.items())
        definitions = {str(gid): text for gid, text in state.definitions}
        system = frozenset(str(e.id) for e in state.system_collections)
        return Snapshot(
            items,
            definitions,
            clusters,
            self.user,
            self.database,
            "public",
            system,
        )

    # -- statements of the front end ------------------------------------------------------------

    async def _run_parsed(
        self,
        stmt: Statement,
        params: list[Any],
        dry: bool = False,
        *,
        request_id: str | None = None,
    ) -> Outcome:
        tx = self._tx
        explicit = tx is not None and tx.explicit
        if isinstance(stmt, SubscribeStmt) and not dry:
            if explicit:
                raise InvalidTransactionState(
                    "SUBSCRIBE in transactions must be the only read statement",
                    hint="use DECLARE c CURSOR FOR SUBSCRIBE ... and FETCH from it",
                )
            return await self._subscribe(stmt, params)
        if tx is not None and tx.implicit and not dry:
            return await self._in_script(tx, stmt, params)
        if isinstance(stmt, SelectStmt) and not dry:
            if explicit:
                assert tx is not None
                if tx.kind == "write":
                    raise InvalidTransactionState("transaction in write-only mode")
                tx.kind = "read"
                if stmt.as_of is None:
                    stmt = replace(stmt, as_of=await self._read_ts(stmt, params))
            return await self._select(stmt, params)
        if not explicit or dry:
            return await run_statement(
                self.env, stmt, params, self._stmt_cluster, request_id=request_id
            )
        assert tx is not None
        if isinstance(stmt, InsertStmt):
            if tx.kind == "read" or tx.read_only:
                raise ReadOnlySqlTransaction("transaction in read-only mode")
            table, updates, status = await plan_write(
                self.env, EnvCatalog(self.env), stmt, params, self._stmt_cluster
            )
            if tx.writes and tx.writes[0][0] != table:
                raise InvalidTransactionState(
                    "write transactions only support writes to a single table"
                )
            tx.kind = "write"
            if updates:
                if tx.writes:
                    tx.writes[0][1].extend(updates)
                else:
                    tx.writes.append((table, list(updates)))
            return SqlResult(status)
        if isinstance(stmt, UpdateStmt | DeleteStmt):
            raise _unsupported_tx(_statement_word(stmt))
        if _is_text_result(stmt):
            return await run_statement(self.env, stmt, params, self._stmt_cluster)
        # DDL: at once, and only before the block has read or written
        if isinstance(stmt, _ALONE) or tx.kind in ("read", "write") or tx.read_only:
            raise _unsupported_tx(_statement_word(stmt))
        tx.kind = "ddl"
        return await run_statement(self.env, stmt, params, self._stmt_cluster)

    async def _in_script(self, tx: _Transaction, stmt: Statement, params: list[Any]) -> Outcome:
        """``stmt`` in the implicit transaction of a script (see :meth:`script`)."""
        if isinstance(stmt, InsertStmt):
            table, updates, status = await plan_write(
                self.env, EnvCatalog(self.env), stmt, params, self._stmt_cluster
            )
            if updates:
                tx.writes.append((table, list(updates)))
            tx.kind = "write"
            return SqlResult(status)
        if isinstance(stmt, UpdateStmt | DeleteStmt):
            word = _statement_word(stmt)
            raise ActiveSqlTransaction(
                f"{word} cannot be run in a script of several statements",
                hint=f"send the {word} by itself",
            )
        if (
            tx.kind == "write"
            and isinstance(stmt, SelectStmt | SubscribeStmt)
            and (stmt.as_of is not None or gets(self._lowered_any(stmt, params).plan))
        ):
            raise InvalidTransactionState(
                "transaction in write-only mode",
                hint="a read in a script does not see the script's writes: send it apart",
            )
        if isinstance(stmt, SubscribeStmt):
            return await self._subscribe(stmt, params)
        if isinstance(stmt, SelectStmt):
            return await self._select(stmt, params)
        return await run_statement(self.env, stmt, params, self._stmt_cluster)

    def _lowered_any(self, stmt: SelectStmt | SubscribeStmt, params: list[Any]) -> Lowered:
        if isinstance(stmt, SelectStmt):
            return self._lowered(stmt, params)
        return lower_query(stmt.query, EnvCatalog(self.env), params, stmt.sql)

    async def _select(self, stmt: SelectStmt, params: list[Any]) -> SqlResult:
        """A ``SELECT``: lowered once per catalog state and parameters (a prepared statement
        run again skips binding and lowering), then read by the fastest path."""
        low = self._lowered(stmt, params)
        rows, at = await read_rows(
            self.env, low.plan, low.finishing(), stmt.as_of, stmt.at_least, self._stmt_cluster
        )
        out = [r for r, n in rows for _ in range(n)]
        return SqlResult(f"SELECT {len(out)}", low.names, low.types, out, at)

    def _lowered(self, stmt: SelectStmt, params: list[Any]) -> Lowered:
        state = self.env.state
        try:
            key: Any = (id(stmt), tuple(params))
            hash(key)
        except TypeError:  # a parameter without a hash (a list): no caching
            return lower_query(stmt.query, EnvCatalog(self.env), params, stmt.sql)
        cached = self._plans.get(key)
        if cached is not None and cached[0] is state and cached[1] is stmt:
            return cached[2]
        low = lower_query(stmt.query, EnvCatalog(self.env), params, stmt.sql)
        if len(self._plans) >= 256:
            self._plans.clear()
        self._plans[key] = (state, stmt, low)
        return low

    async def _read_ts(self, stmt: SelectStmt, params: list[Any]) -> int:
        """The transaction's read timestamp: chosen by its first read (every object it reads
        complete there, every acknowledged write visible)."""
        tx = self._tx
        assert tx is not None
        low = lower_query(stmt.query, EnvCatalog(self.env), params, stmt.sql)
        ids = sorted(gets(low.plan))
        if tx.read_ts is None:
            if ids:  # held until the transaction ends, so every read of it finds its time
                tx.held = await self.env.hold_fresh(ids)
                tx.read_ts = tx.held.time
            else:
                tx.read_ts = self._now_ms()
            tx.domain.update(ids)
            return tx.read_ts
        new = [g for g in ids if g not in tx.domain]
        if new:  # objects the first read did not read: at the transaction's time, if still there
            more = await self.env.hold_at(new, tx.read_ts)
            if more is None:
                raise InvalidTransactionState(
                    "Transactions can only reference objects in the same timedomain. See "
                    "https://materialize.com/docs/sql/begin/#same-timedomain-error",
                    hint=f"{', '.join(_names(self.env, new))} can no longer be read at the "
                    f"transaction's time {tx.read_ts}; read them in a transaction of their own",
                )
            tx.more.append(more)
            tx.domain.update(new)
        return tx.read_ts

    async def _subscribe(self, stmt: SubscribeStmt, params: list[Any]) -> RowStream:
        """A ``SUBSCRIBE``'s rows as they come, shaped as its options say
        (:mod:`tidegate.spec.sql.subscribe`); it ends by itself once complete (``UP TO``
        reached, or every input complete)."""
        low = lower_query(stmt.query, EnvCatalog(self.env), params, stmt.sql)
        out = subscribe_output(
            low.names, progress=stmt.progress, envelope=stmt.envelope, sql=stmt.sql
        )
        check_cluster(self.env, self._stmt_cluster)
        plan = low.relation()
        sub = await self.env.subscribe(
            plan,
            read_time(self.env, plan, stmt.as_of, stmt.at_least),
            cluster=self._stmt_cluster,
            up_to=stmt.up_to,
            snapshot=stmt.snapshot,
        )
        as_of = int(sub.as_of.elements[0]) if sub.as_of and sub.as_of.elements else 0
        if stmt.up_to is not None and stmt.up_to == as_of:
            self.notices.append(("NOTICE", f"subscribe as of and up to are equal: {as_of}"))
        types = tuple(_subscribe_type(src, low.types) for src in out.sources)

        async def batches() -> AsyncIterator[list[Row]]:
            first = out.initial(as_of)
            async for batch in sub:
                if batch.error is not None:
                    if input_dropped(batch.error) is not None:  # as a read's (55000)
                        raise ObjectNotInPrerequisiteState(batch.error)
                    raise SqlError(f"subscribe failed: {batch.error}")
                rows = first + out.rows(batch.updates, batch.upper.elements, as_of)
                first = []
                yield rows

        return RowStream(out.names, types, batches(), sub.aclose, bounded=stmt.up_to is not None)

    # -- cursors --------------------------------------------------------------------------------

    async def _declare(self, c: S.Declare, params: Sequence[Any]) -> SqlResult:
        tx = self._tx
        if tx is None or not tx.explicit:
            raise NoActiveSqlTransaction("DECLARE CURSOR can only be used in transaction blocks")
        if c.name in self._cursors:
            raise InvalidCursorName(f'cursor "{c.name}" already exists', sqlstate="42P03")
        inner = self.prepare(c.body)
        stmt = inner.statement
        if stmt is None and isinstance(inner.classified, S.Passthrough):
            raise UnsupportedSql("DECLARE of this statement")
        if isinstance(stmt, SubscribeStmt):
            if tx.kind in ("read", "write"):
                raise InvalidTransactionState(
                    "SUBSCRIBE in transactions must be the only read statement"
                )
            tx.kind = "read"
            stream = await self._subscribe(stmt, list(params))
            self._cursors[c.name] = _Cursor(c.name, stream.columns, stream.pg_types, stream=stream)
            return SqlResult("DECLARE CURSOR")
        outcome = await self.execute(inner, params)
        if not isinstance(outcome, SqlResult) or not outcome.columns:
            raise UnsupportedSql("DECLARE of a statement that answers no rows")
        types = outcome.pg_types or tuple(T.for_scalar(t.scalar) for t in outcome.types)
        self._cursors[c.name] = _Cursor(c.name, outcome.columns, types, rows=list(outcome.rows))
        return SqlResult("DECLARE CURSOR")

    async def _fetch(self, c: S.Fetch) -> SqlResult:
        cur = self._cursors.get(c.name)
        if cur is None:
            raise InvalidCursorName(f'cursor "{c.name}" does not exist')
        want = c.count
        out: list[Row] = []
        if cur.rows is not None:
            n = len(cur.rows) if want is None else want
            out, cur.rows = cur.rows[:n], cur.rows[n:]
        else:
            assert cur.stream is not None
            out = await self._fetch_stream(cur, want, c.timeout_ms)
        return SqlResult(
            f"FETCH {len(out)}",
            cur.columns,
            tuple(ColumnType(t.scalar or ScalarType.STRING, True) for t in cur.pg_types),
            out,
            pg_types=cur.pg_types,
        )

    async def _fetch_stream(
        self, cur: _Cursor, want: int | None, timeout_ms: int | None
    ) -> list[Row]:
        """Rows of a subscription: what is buffered, else wait for a batch with rows (at most
        ``timeout_ms``; without one, until at least one row comes)."""
        assert cur.stream is not None
        it = cur.stream.batches
        if not cur.buffered and not cur.done:
            deadline = None if timeout_ms is None else anyio.current_time() + timeout_ms / 1000
            while not cur.buffered:
                try:
                    if deadline is None:
                        batch = await anext(it)
                    else:
                        left = deadline - anyio.current_time()
                        if left <= 0:
                            break
                        with anyio.move_on_after(left) as scope:
                            batch = await anext(it)
                        if scope.cancelled_caught:
                            break
                except StopAsyncIteration:
                    cur.done = True
                    break
                cur.buffered.extend(batch)
                if timeout_ms == 0:
                    break
        n = len(cur.buffered) if want is None else want
        out, cur.buffered = cur.buffered[:n], cur.buffered[n:]
        return out

    # -- COPY -----------------------------------------------------------------------------------

    async def _copy_to(self, c: S.CopyTo, params: Sequence[Any]) -> CopyOut:
        inner = self.prepare(c.body)
        stmt = inner.statement
        if isinstance(stmt, SubscribeStmt):
            if self._tx is not None and self._tx.explicit:
                raise InvalidTransactionState(
                    "SUBSCRIBE in transactions must be the only read statement"
                )
            stream = await self._subscribe(stmt, list(params))
            return CopyOut(stream.columns, stream.pg_types, c.options, stream=stream)
        outcome = await self.execute(inner, params)
        if not isinstance(outcome, SqlResult) or not outcome.columns:
            raise UnsupportedSql("COPY of a statement that answers no rows")
        types = outcome.pg_types or tuple(T.for_scalar(t.scalar) for t in outcome.types)
        return CopyOut(outcome.columns, types, c.options, rows=list(outcome.rows))

    def _copy_from(self, c: S.CopyFrom) -> CopyIn:
        tx = self._tx
        if tx is not None and tx.explicit and (tx.kind == "read" or tx.read_only):
            raise ReadOnlySqlTransaction("transaction in read-only mode")
        cat = EnvCatalog(self.env)
        item = cat.resolve(c.table)
        if item is None:
            from tidegate.spec.errors import UndefinedObject

            raise UndefinedObject(f'relation "{c.table}" does not exist')
        if item.kind != "table":
            from tidegate.spec.errors import WrongObjectType

            raise WrongObjectType(f'cannot copy to "{c.table}": it is not a table')
        names = tuple(col.name for col in item.schema.columns)
        columns = c.columns if c.columns is not None else names
        for name in columns:
            if name not in names:
                from tidegate.spec.errors import UndefinedColumn

                raise UndefinedColumn(f'column "{name}" of relation "{c.table}" does not exist')
        types = tuple(item.schema.columns[names.index(n)].type for n in columns)
        return CopyIn(c.table, columns, types, c.options, names)

    async def copy_in(self, copy: CopyIn, data: bytes) -> SqlResult:
        """Append the rows of ``data`` (what the client sent) to ``copy.table`` at one
        timestamp [InvalidTextRepresentation: nothing is appended]."""
        rows = parse_copy_rows(copy, data)
        cat = EnvCatalog(self.env)
        item = cat.resolve(copy.table)
        assert item is not None
        tx = self._tx
        if tx is not None and tx.explicit:
            if tx.writes and tx.writes[0][0] != item.id:
                raise InvalidTransactionState(
                    "write transactions only support writes to a single table"
                )
            tx.kind = "write"
            if tx.writes:
                tx.writes[0][1].extend((r, 1) for r in rows)
            else:
                tx.writes.append((item.id, [(r, 1) for r in rows]))
            return SqlResult(f"COPY {len(rows)}")
        if rows:
            ts = await self.env.append_many([(item.id, rows)])
            return SqlResult(f"COPY {len(rows)}", time=ts)
        return SqlResult("COPY 0")


def _names(env: SqlEnvironment, ids: Sequence[GlobalId]) -> list[str]:
    """The catalog's names of ``ids`` (an id, for one it no longer knows)."""
    out = []
    for gid in ids:
        try:
            out.append(env.state.get(gid).name)
        except UnknownCatalogObject:
            out.append(str(gid))
    return out


def _multi(sql: str) -> SqlError:
    e = SqlError("cannot insert multiple commands into a prepared statement", sql=sql)
    e.sqlstate = "42601"
    return e


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text_rows(columns: tuple[str, ...], rows: list[Row], status: str) -> SqlResult:
    return SqlResult(
        status,
        columns,
        tuple(ColumnType(ScalarType.STRING, False) for _ in columns),
        rows,
    )


def _changes_catalog(prepared: Prepared) -> bool:
    """Whether ``prepared`` is DDL (a statement that changes the catalog and nothing else)."""
    if prepared.secret is not None:
        return not isinstance(prepared.secret, ShowSecretsStmt)
    ddl = (
        CreateTableStmt,
        CreateViewStmt,
        CreateIndexStmt,
        CreateSourceStmt,
        CreateSinkStmt,
        DropStmt,
        AlterRetainHistoryStmt,
    )
    return isinstance(prepared.classified, S.Passthrough) and isinstance(prepared.statement, ddl)


def _is_text_result(stmt: Statement) -> bool:
    from tidegate.spec.sql import ExplainStmt, ShowColumnsStmt, ShowCreateStmt, ShowStmt

    return isinstance(stmt, ExplainStmt | ShowStmt | ShowColumnsStmt | ShowCreateStmt)


def _temporal_filter(sql: str) -> bool:
    """Whether ``sql``'s ``mz_now()`` calls are temporal filters (:func:`S.keeps_mz_now`); a
    statement that does not parse keeps the session's constant (its error comes later)."""
    try:
        return S.keeps_mz_now(parse_one(sql))
    except SqlError:
        return False


def _declared(oids: Sequence[int]) -> list[T.PgType | None]:
    out: list[T.PgType | None] = []
    for oid in oids:
        if oid == 0:
            out.append(None)
            continue
        t = T.by_oid(oid)
        if t is None:
            from tidegate.spec.errors import UndefinedObject

            err = UndefinedObject(f"type with OID {oid} does not exist")
            err.sqlstate = "42704"
            raise err
        out.append(t if t is not T.UNKNOWN else None)
    return out


def _placeholder_count(text: str) -> int:
    import re

    found = [int(m) for m in re.findall(r"\$(\d+)", _strip_strings(text))]
    return max(found, default=0)


def _strip_strings(text: str) -> str:
    import re

    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "", text)


def _dummy(t: T.PgType) -> Any:
    """A value of type ``t`` to describe a statement with (None for text: an untyped NULL
    takes whatever type its place needs)."""
    scalar = t.scalar
    if scalar is None or scalar is ScalarType.STRING:
        return None
    return {
        ScalarType.INT64: 0,
        ScalarType.FLOAT64: 0.0,
        ScalarType.BOOL: False,
        ScalarType.DATE: _dt.date(2000, 1, 1),
        ScalarType.TIMESTAMP: _dt.datetime(2000, 1, 1),
        ScalarType.NUMERIC: Decimal(0),
        ScalarType.INT16: 0,
        ScalarType.INT32: 0,
        ScalarType.FLOAT32: 0.0,
    }[scalar]


def _infer_params(stmt: Statement | None, cat: EnvCatalog, n: int) -> list[T.PgType | None]:
    """The types of ``$1..$n`` from where they stand: compared with or assigned to a column,
    in a ``LIMIT``, cast to a type; None where nothing says (text is assumed then)."""
    from sqlglot import exp

    from tidegate.spec.sql._common import sql_type

    out: list[T.PgType | None] = [None] * n
    if stmt is None or n == 0:
        return out
    trees: list[Any] = []
    target: Any = None
    for attr in ("query", "source", "where"):
        node = getattr(stmt, attr, None)
        if node is not None:
            trees.append(node)
    if isinstance(stmt, UpdateStmt):
        trees += [e for _c, e in stmt.assignments]
    if isinstance(stmt, InsertStmt | UpdateStmt | DeleteStmt):
        target = cat.resolve(stmt.table)
    tables: dict[str, Any] = {}
    if target is not None:
        tables[target.name] = target
    for tree in trees:
        for t in tree.find_all(exp.Table):
            item = cat.resolve(str(t.name).lower()) or cat.resolve(str(t.name))
            if item is not None:
                tables[str(t.alias_or_name).lower()] = item
                tables[item.name] = item

    def column_type(col: Any) -> T.PgType | None:
        name = str(col.name).lower()
        qual = str(col.table).lower() if col.table else None
        candidates = [tables[qual]] if qual and qual in tables else list(tables.values())
        for item in candidates:
            for c in item.schema.columns:
                if c.name.lower() == name:
                    return T.for_scalar(c.type.scalar)
        return None

    def type_of(node: Any) -> T.PgType | None:
        if isinstance(node, exp.Column):
            return column_type(node)
        if isinstance(node, exp.Cast):
            try:
                return T.for_scalar(sql_type(node.args.get("to")))
            except SqlError:
                return None
        if isinstance(node, exp.Literal):
            if node.is_string:
                return T.TEXT
            return T.FLOAT8 if any(ch in str(node.this) for ch in ".eE") else T.INT8
        if isinstance(node, exp.Paren):
            return type_of(node.this)
        return None

    def index_of(node: Any) -> int | None:
        if isinstance(node, exp.Placeholder):
            text = str(node.this or "")
        elif isinstance(node, exp.Parameter):
            text = node.sql(dialect="postgres").lstrip("$")
        else:
            return None
        text = text.lstrip("$")
        return int(text) - 1 if text.isdigit() and 0 < int(text) <= n else None

    for tree in trees:
        for node in tree.walk():
            i = index_of(node)
            if i is None or out[i] is not None:
                continue
            parent = node.parent
            found: T.PgType | None = None
            if isinstance(parent, exp.Cast):
                found = type_of(parent)
            elif isinstance(parent, exp.Binary | exp.Predicate) and not isinstance(
                parent, exp.And | exp.Or
            ):
                other = parent.expression if parent.this is node else parent.this
                found = type_of(other)
                if isinstance(parent, exp.Like | exp.ILike):
                    found = T.TEXT
            elif isinstance(parent, exp.In):
                found = type_of(parent.this)
            elif isinstance(parent, exp.Limit | exp.Offset):
                found = T.INT8
            elif isinstance(parent, exp.Tuple) and isinstance(stmt, InsertStmt) and target:
                pos = parent.expressions.index(node) if node in parent.expressions else -1
                names = stmt.columns or tuple(c.name for c in target.schema.columns)
                if 0 <= pos < len(names):
                    col = next((c for c in target.schema.columns if c.name == names[pos]), None)
                    if col is not None:
                        found = T.for_scalar(col.type.scalar)
            out[i] = found
    if isinstance(stmt, UpdateStmt) and target is not None:
        for col_name, e in stmt.assignments:
            i = index_of(e)
            if i is not None and out[i] is None:
                col = next((c for c in target.schema.columns if c.name == col_name), None)
                if col is not None:
                    out[i] = T.for_scalar(col.type.scalar)
    return out


async def _collect(session: SqlSession, outcome: Outcome) -> SqlResult:
    """An outcome as one result: a stream's first batch, a COPY's rows."""
    if isinstance(outcome, SqlResult):
        return outcome
    if isinstance(outcome, RowStream):
        return _stream_result(outcome, await _stream_rows(outcome))
    if isinstance(outcome, CopyOut):
        if outcome.stream is not None:
            return _stream_result(outcome.stream, await _stream_rows(outcome.stream))
        rows = outcome.rows or []
        return SqlResult(
            f"COPY {len(rows)}",
            outcome.columns,
            tuple(ColumnType(t.scalar or ScalarType.STRING, True) for t in outcome.pg_types),
            rows,
            pg_types=outcome.pg_types,
        )
    raise UnsupportedSql("COPY FROM STDIN without a client that sends the data")


async def _stream_rows(stream: RowStream) -> list[Row]:
    """A stream's rows as one answer: every batch until it ends if it is bounded (``UP TO``),
    else its first batch (the snapshot); the stream is closed after."""
    rows: list[Row] = []
    try:
        if stream.bounded:
            async for batch in stream.batches:
                rows.extend(batch)
        else:
            rows = await anext(stream.batches, [])
    finally:
        await stream.aclose()
    return rows


def _stream_result(stream: RowStream, rows: list[Row]) -> SqlResult:
    types = tuple(
        ColumnType(ScalarType.INT64 if t is _NUMERIC_TS else (t.scalar or ScalarType.STRING), True)
        for t in stream.pg_types
    )
    first_ts = next((int(r[0]) for r in rows), None)
    return SqlResult(f"SUBSCRIBE {len(rows)}", stream.columns, types, rows, first_ts)


# -- COPY data ----------------------------------------------------------------------------------


def parse_copy_rows(copy: CopyIn, data: bytes) -> list[Row]:
    """The rows of ``COPY FROM STDIN`` data in text or CSV format, in the table's column order
    (left-out columns NULL) [InvalidTextRepresentation].

    Arrow's CSV reader parses them when it reads them as PostgreSQL does (text without
    backslash escapes, CSV without an escape character of its own): in C, several times faster
    than Python. Anything else, and any data it refuses, goes through :func:`_parse_copy_rows`,
    which says where the error is.
    """
    fast = _arrow_copy_rows(copy, data)
    return fast if fast is not None else _parse_copy_rows(copy, data)


_TRUE = ["t", "true", "yes", "on", "1", "y", "T", "TRUE", "True", "YES", "ON", "Y"]
_FALSE = ["f", "false", "no", "off", "0", "n", "F", "FALSE", "False", "NO", "OFF", "N"]


def _arrow_copy_rows(copy: CopyIn, data: bytes) -> list[Row] | None:
    opts = copy.options
    if opts.format == "text" and data.replace(opts.null_text.encode(), b"").find(b"\\") >= 0:
        return None  # backslash escapes: PostgreSQL's, not Arrow's
    if opts.format == "csv" and opts.escape not in (None, opts.quote):
        return None
    if not data.strip():
        return []
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from .arrow_values import column_values
    from .frames import arrow_type

    names = list(copy.columns)
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(
                column_names=names, skip_rows=1 if opts.header else 0, use_threads=False
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=opts.sep,
                quote_char=opts.quote if opts.format == "csv" else False,
                double_quote=opts.format == "csv",
                escape_char=False,
                newlines_in_values=opts.format == "csv",
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={
                    n: arrow_type(t.scalar) for n, t in zip(names, copy.types, strict=True)
                },
                null_values=[opts.null_text],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                true_values=_TRUE,
                false_values=_FALSE,
            ),
        )
    except (pa.ArrowException, ValueError):
        return None  # let the exact parser find and word the error
    for name, t in zip(names, copy.types, strict=True):
        col = table.column(name)
        if not t.nullable and col.null_count:
            return None  # the exact parser says which line
    values = [column_values(table.column(n)) for n in names]
    if list(copy.columns) == list(copy.all_columns):
        return list(zip(*values, strict=True))
    positions = [copy.all_columns.index(c) for c in copy.columns]
    width = len(copy.all_columns)
    out: list[Row] = []
    for row in zip(*values, strict=True):
        full: list[Any] = [None] * width
        for pos, v in zip(positions, row, strict=True):
            full[pos] = v
        out.append(tuple(full))
    return out


def _parse_copy_rows(copy: CopyIn, data: bytes) -> list[Row]:
    opts = copy.options
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise InvalidTextRepresentation(
            "invalid byte sequence for encoding UTF8", sqlstate="22021"
        ) from None
    positions = [copy.all_columns.index(c) for c in copy.columns]
    width = len(copy.all_columns)
    fields_of = _csv_fields(text, opts) if opts.format == "csv" else _text_fields(text, opts)
    out: list[Row] = []
    types = copy.types
    converters = [_converter(t) for t in types]
    for line_no, fields in enumerate(fields_of, 1):
        if line_no == 1 and opts.header:
            continue
        if len(fields) != len(positions):
            raise InvalidTextRepresentation(
                f"COPY {copy.table}, line {line_no}: expected {len(positions)} columns, "
                f"got {len(fields)}",
                sqlstate="22P04",
            )
        row: list[Any] = [None] * width
        for i, (value, pos) in enumerate(zip(fields, positions, strict=True)):
            if value is None:
                if not types[i].nullable:
                    err = InvalidTextRepresentation(
                        f'null value in column "{copy.columns[i]}" violates not-null constraint',
                        sqlstate="23502",
                    )
                    raise err
                continue
            try:
                row[pos] = converters[i](value)
            except InvalidTextRepresentation as e:
                raise InvalidTextRepresentation(
                    f"COPY {copy.table}, line {line_no}, column {copy.columns[i]}: {e.message}",
                    sqlstate=e.sqlstate,
                ) from None
        out.append(tuple(row))
    return out


def _converter(t: ColumnType) -> Any:
    scalar = t.scalar
    if scalar is ScalarType.STRING:
        return lambda v: v
    if scalar is ScalarType.INT64:

        def to_int(v: str) -> int:
            try:
                n = int(v)
            except ValueError:
                return T.text_in(v, T.INT8)  # type: ignore[no-any-return]
            if not -(2**63) <= n < 2**63:
                raise InvalidTextRepresentation(
                    f'value "{v}" is out of range for type bigint', sqlstate="22003"
                )
            return n

        return to_int
    pg = T.for_scalar(scalar)
    return lambda v: T.text_in(v, pg)


def _text_fields(text: str, opts: S.CopyOptions) -> list[list[str | None]]:
    sep, null = opts.sep, opts.null_text
    out: list[list[str | None]] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    for line in lines:
        if line.endswith("\r"):
            line = line[:-1]
        if line == "\\.":
            break
        parts = line.split(sep)
        fields: list[str | None] = []
        for p in parts:
            if p == null:
                fields.append(None)
            elif "\\" in p:
                fields.append(_unescape(p))
            else:
                fields.append(p)
        out.append(fields)
    return out


_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if nxt.isdigit():
                j = i + 1
                while j < len(text) and j < i + 4 and text[j] in "01234567":
                    j += 1
                out.append(chr(int(text[i + 1 : j], 8)))
                i = j
                continue
            out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _csv_fields(text: str, opts: S.CopyOptions) -> list[list[str | None]]:
    null = opts.null_text
    out: list[list[str | None]] = []
    # an unquoted empty field is NULL (with the default NULL ''); a quoted one is ''
    for row in _csv_rows(text, opts):
        out.append([None if (v == null and not quoted) else v for v, quoted in row])
    return out


def _csv_rows(text: str, opts: S.CopyOptions) -> list[list[tuple[str, bool]]]:
    """CSV rows with, per field, whether it was quoted (``csv`` loses that)."""
    rows: list[list[tuple[str, bool]]] = []
    quote, sep = opts.quote, opts.sep
    i, n = 0, len(text)
    row: list[tuple[str, bool]] = []
    while i < n:
        if text.startswith("\\.", i) and (i + 2 == n or text[i + 2] in "\r\n") and not row:
            break
        if text[i] == quote:
            j = i + 1
            buf = []
            while True:
                if j >= n:
                    raise InvalidTextRepresentation(
                        "unterminated CSV quoted field", sqlstate="22P04"
                    )
                if text[j] == quote:
                    if j + 1 < n and text[j + 1] == quote:
                        buf.append(quote)
                        j += 2
                        continue
                    j += 1
                    break
                buf.append(text[j])
                j += 1
            row.append(("".join(buf), True))
            i = j
        else:
            j = i
            while j < n and text[j] not in (sep, "\n", "\r"):
                j += 1
            row.append((text[i:j], False))
            i = j
        if i < n and text[i] == sep:
            i += 1
            if not (i == n or text[i] in "\r\n"):
                continue
            row.append(("", False))  # a separator ends the line: one more (empty) field
        if i < n and text[i] == "\r":
            i += 1
        if i < n and text[i] == "\n":
            i += 1
        rows.append(row)
        row = []
    if row:
        rows.append(row)
    return rows


# -- copy out -----------------------------------------------------------------------------------


def copy_text(row: Row, opts: S.CopyOptions, types: Sequence[T.PgType] = ()) -> bytes:
    """One row in ``COPY TO``'s text or CSV format (a line, newline included); ``types`` are
    its columns' types (a ``real`` prints in single precision)."""
    types = tuple(types) or (T.TEXT,) * len(row)
    if opts.format == "csv":
        fields = []
        for v, pt in zip(row, types, strict=True):
            if v is None:
                fields.append(opts.null_text)
                continue
            text = T.text_out(v, pt)
            if text == "" or any(ch in text for ch in (opts.sep, opts.quote, "\n", "\r")):
                text = opts.quote + text.replace(opts.quote, opts.quote * 2) + opts.quote
            fields.append(text)
        return (opts.sep.join(fields) + "\n").encode()
    out = []
    for v, pt in zip(row, types, strict=True):
        if v is None:
            out.append(opts.null_text)
        else:
            text = T.text_out(v, pt)
            if any(ch in text for ch in "\\\n\r\t" + opts.sep):
                text = (
                    text.replace("\\", "\\\\")
                    .replace("\n", "\\n")
                    .replace("\r", "\\r")
                    .replace("\t", "\\t")
                )
                if opts.sep != "\t":
                    text = text.replace(opts.sep, "\\" + opts.sep)
            out.append(text)
    return (opts.sep.join(out) + "\n").encode()


# -- one catalog engine per environment ---------------------------------------------------------

_ENGINES: dict[int, CatalogEngine] = {}


def _shared_engine(env: Any) -> CatalogEngine:
    """The environment's catalog engine (one DuckDB database for all its sessions)."""
    engine = getattr(env, "_tidegate_catalog_engine", None)
    if engine is None:
        engine = CatalogEngine()
        try:
            env._tidegate_catalog_engine = engine
        except AttributeError:  # an object without a __dict__: one engine per id
            engine = _ENGINES.setdefault(id(env), engine)
    return engine
