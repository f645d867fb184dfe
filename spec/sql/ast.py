"""The statements of tidegate's SQL, as a typed AST of our own.

Each statement keeps its own text (``sql``): positions in errors are
1-based offsets into it. Queries (``SELECT`` and set operations) stay
sqlglot expression trees (``query``): :mod:`.lower` binds and lowers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..plan import ScalarType
from ..storage.connections import SourceConnection, StorageSinkConnection

__all__ = [
    "AlterClusterStmt",
    "AlterRetainHistoryStmt",
    "AlterSinkStmt",
    "ColumnDef",
    "CopyToStmt",
    "CreateClusterReplicaStmt",
    "CreateClusterStmt",
    "CreateIndexStmt",
    "CreateSinkStmt",
    "CreateSourceStmt",
    "CreateTableStmt",
    "CreateViewStmt",
    "DeleteStmt",
    "DropClusterReplicaStmt",
    "DropClusterStmt",
    "DropKind",
    "DropStmt",
    "ExplainStmt",
    "InsertStmt",
    "SelectStmt",
    "ShowColumnsStmt",
    "ShowCreateStmt",
    "ShowKind",
    "ShowStmt",
    "Statement",
    "SubscribeEnvelope",
    "SubscribeStmt",
    "UpdateStmt",
]

DropKind: TypeAlias = Literal["table", "view", "materialized-view", "index", "source", "sink"]
ShowKind: TypeAlias = Literal[
    "objects", "tables", "views", "materialized-views", "indexes", "sources", "sinks"
]


@dataclass(frozen=True)
class ColumnDef:
    """A column of ``CREATE TABLE``; ``max_length`` is ``n`` of ``varchar(n)``, ``typmod``
    ``(p, s)`` of ``numeric(p, s)``."""

    name: str
    type: ScalarType
    nullable: bool = True
    max_length: int | None = None
    typmod: tuple[int, int] | None = None


@dataclass(frozen=True)
class CreateTableStmt:
    """``CREATE TABLE [IF NOT EXISTS] name (col type [NOT NULL], ...)``."""

    sql: str
    name: str
    columns: tuple[ColumnDef, ...]
    if_not_exists: bool = False
    keys: tuple[tuple[str, ...], ...] = ()
    """The ``PRIMARY KEY`` and ``UNIQUE`` column lists, as declared (the primary key first)."""


@dataclass(frozen=True)
class InsertStmt:
    """``INSERT INTO table [(cols)] VALUES ... | SELECT ...``: ``source`` is a sqlglot Values or query."""

    sql: str
    table: str
    columns: tuple[str, ...] | None
    source: Any


@dataclass(frozen=True)
class DeleteStmt:
    """``DELETE FROM table [[AS] alias] [WHERE cond]``: retractions of the matching rows."""

    sql: str
    table: str
    where: Any | None
    alias: str | None = None


@dataclass(frozen=True)
class UpdateStmt:
    """``UPDATE table SET col = expr, ... [WHERE cond]``: retractions and insertions at one time."""

    sql: str
    table: str
    assignments: tuple[tuple[str, Any], ...]
    where: Any | None
    alias: str | None = None


@dataclass(frozen=True)
class CreateIndexStmt:
    """``CREATE INDEX [name] ON object (expr, ...)`` (an empty list: the whole row is the key)."""

    sql: str
    name: str | None
    on: str
    keys: tuple[Any, ...]
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateViewStmt:
    """``CREATE [OR REPLACE] [MATERIALIZED] VIEW name [(column, ...)] AS query``."""

    sql: str
    name: str
    query: Any
    materialized: bool
    if_not_exists: bool = False
    or_replace: bool = False
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CreateSourceStmt:
    """``CREATE SOURCE [IF NOT EXISTS] name FROM LOAD GENERATOR ... | POSTGRES CONNECTION ...``
    (see :mod:`.storage`)."""

    sql: str
    name: str
    connection: SourceConnection
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateSinkStmt:
    """``CREATE SINK [IF NOT EXISTS] name FROM object INTO ICEBERG CATALOG ...`` (see :mod:`.storage`)."""

    sql: str
    name: str
    from_name: str
    connection: StorageSinkConnection
    if_not_exists: bool = False


@dataclass(frozen=True)
class SelectStmt:
    """A query read once (a peek), ``AS OF [AT LEAST] time`` or at the freshest time."""

    sql: str
    query: Any
    as_of: int | None = None
    at_least: bool = False
    """``AS OF AT LEAST t``: any time from ``t`` on (the freshest one), not exactly ``t``."""


@dataclass(frozen=True)
class SubscribeEnvelope:
    """``ENVELOPE UPSERT (KEY (k, ...))`` or ``ENVELOPE DEBEZIUM (KEY (k, ...))`` of a
    ``SUBSCRIBE``: its rows describe each key's state instead of each row's changes."""

    kind: Literal["upsert", "debezium"]
    key: tuple[str, ...]
    position: int | None = None
    """1-based position of the clause in the statement (for errors about its key columns)."""


@dataclass(frozen=True)
class SubscribeStmt:
    """``SUBSCRIBE [TO] name | (query) [ENVELOPE ...] [WITH (options)] [AS OF [AT LEAST] time]
    [UP TO time]``: ``query`` is a sqlglot query.

    As Materialize has them: ``snapshot`` (``WITH (SNAPSHOT = false)``: only changes after
    the as_of), ``progress`` (``WITH (PROGRESS)``: ``mz_progressed`` rows), ``up_to`` (no
    update at or after it; the subscribe ends once its frontier reaches it), ``envelope``.
    """

    sql: str
    query: Any
    as_of: int | None = None
    at_least: bool = False
    up_to: int | None = None
    snapshot: bool = True
    progress: bool = False
    envelope: SubscribeEnvelope | None = None


@dataclass(frozen=True)
class ExplainStmt:
    """``EXPLAIN [PLAN FOR] query | CREATE [MATERIALIZED] VIEW ... | CREATE INDEX ...``."""

    sql: str
    statement: SelectStmt | CreateViewStmt | CreateIndexStmt


@dataclass(frozen=True)
class ShowStmt:
    """``SHOW OBJECTS | TABLES | VIEWS | MATERIALIZED VIEWS | INDEXES [ON name] | SOURCES | SINKS``."""

    sql: str
    kind: ShowKind
    on: str | None = None


@dataclass(frozen=True)
class ShowColumnsStmt:
    """``SHOW COLUMNS FROM name``."""

    sql: str
    name: str


@dataclass(frozen=True)
class ShowCreateStmt:
    """``SHOW CREATE TABLE | VIEW | MATERIALIZED VIEW | INDEX | SOURCE | SINK name``."""

    sql: str
    kind: DropKind
    name: str


@dataclass(frozen=True)
class DropStmt:
    """``DROP kind [IF EXISTS] name, ... [CASCADE | RESTRICT]``."""

    sql: str
    kind: DropKind
    names: tuple[str, ...]
    cascade: bool = False
    if_exists: bool = False


@dataclass(frozen=True)
class AlterRetainHistoryStmt:
    """``ALTER kind name SET (RETAIN HISTORY [=] FOR 'interval')`` or ``RESET (RETAIN HISTORY)``.

    ``ms`` is the interval in milliseconds, ``None`` for ``RESET`` (the default policy).
    """

    sql: str
    kind: DropKind
    name: str
    ms: int | None


@dataclass(frozen=True)
class CopyToStmt:
    """``COPY name | (query) TO 'url' [WITH (FORMAT = 'parquet')]``: the contents, once, as
    Parquet files under ``url`` (``file://`` or ``s3://``)."""

    sql: str
    query: Any
    url: str


@dataclass(frozen=True)
class CreateClusterStmt:
    """``CREATE CLUSTER name (SIZE = 'size', REPLICATION FACTOR = n)`` (a managed cluster) or
    ``CREATE CLUSTER name REPLICAS (r1 (SIZE = 'size'), ...)`` (an unmanaged one: ``replicas``
    as ``(name, size)`` pairs); see :mod:`.clusters`."""

    sql: str
    name: str
    size: str | None = None
    replication_factor: int | None = None
    replicas: tuple[tuple[str, str | None], ...] | None = None
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateClusterReplicaStmt:
    """``CREATE CLUSTER REPLICA cluster.name (SIZE = 'size')``."""

    sql: str
    cluster: str
    name: str
    size: str | None = None


@dataclass(frozen=True)
class AlterClusterStmt:
    """``ALTER CLUSTER name SET (SIZE = 'size', REPLICATION FACTOR = n)`` (either or both)."""

    sql: str
    name: str
    size: str | None = None
    replication_factor: int | None = None


@dataclass(frozen=True)
class DropClusterStmt:
    """``DROP CLUSTER [IF EXISTS] name, ... [CASCADE | RESTRICT]``."""

    sql: str
    names: tuple[str, ...]
    cascade: bool = False
    if_exists: bool = False


@dataclass(frozen=True)
class DropClusterReplicaStmt:
    """``DROP CLUSTER REPLICA [IF EXISTS] cluster.name, ...``: ``replicas`` as pairs."""

    sql: str
    replicas: tuple[tuple[str, str], ...]
    if_exists: bool = False


@dataclass(frozen=True)
class AlterSinkStmt:
    """``ALTER SINK name SET FROM relation``: the sink writes out ``from_name`` from now on."""

    sql: str
    name: str
    from_name: str


Statement: TypeAlias = (
    CreateTableStmt
    | InsertStmt
    | DeleteStmt
    | UpdateStmt
    | CreateIndexStmt
    | CreateViewStmt
    | SelectStmt
    | SubscribeStmt
    | ExplainStmt
    | ShowStmt
    | ShowColumnsStmt
    | ShowCreateStmt
    | DropStmt
    | AlterRetainHistoryStmt
    | CopyToStmt
    | CreateSourceStmt
    | CreateSinkStmt
    | CreateClusterStmt
    | CreateClusterReplicaStmt
    | AlterClusterStmt
    | DropClusterStmt
    | DropClusterReplicaStmt
    | AlterSinkStmt
)
