"""The SQL front end: SQL text to typed statements, and queries to :mod:`tidegate.spec.plan` plans.

Pure and sans-IO, like the rest of ``tidegate.spec``:

* :mod:`.parse` -- text to :mod:`.ast` statements (sqlglot, PostgreSQL dialect, plus
  Materialize's ``SUBSCRIBE``, ``SHOW``, ``EXPLAIN``, ``ALTER ... RETAIN HISTORY``, ``AS OF``,
  ``DROP SOURCE``/``SINK``); :mod:`.storage` -- ``CREATE SOURCE`` and ``CREATE SINK``;
* :mod:`.catalog` -- the :class:`SqlCatalog` protocol names are bound against;
* :mod:`.lower` -- binding and lowering of queries (:func:`lower_query`);
* :mod:`.dml` -- ``INSERT``/``DELETE``/``UPDATE`` as rows and plans to append.

Errors are :mod:`tidegate.spec.errors.sql`'s, with PostgreSQL's wording and a
position in the statement. The runtime's ``Environment.execute`` runs statements.
"""

from .ast import (
    AlterClusterStmt,
    AlterRetainHistoryStmt,
    AlterSinkStmt,
    ColumnDef,
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
    SelectStmt,
    ShowColumnsStmt,
    ShowCreateStmt,
    ShowStmt,
    Statement,
    SubscribeEnvelope,
    SubscribeStmt,
    UpdateStmt,
)
from .catalog import CatalogItem, DictCatalog, ObjectKind, SqlCatalog
from .dml import Write, plan_delete, plan_insert, plan_update
from .lower import Lowered, lower_query, pg_type
from .parse import parse, parse_interval_ms, parse_one, split_statements

__all__ = [
    "AlterClusterStmt",
    "AlterRetainHistoryStmt",
    "AlterSinkStmt",
    "CatalogItem",
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
    "DictCatalog",
    "DropClusterReplicaStmt",
    "DropClusterStmt",
    "DropStmt",
    "ExplainStmt",
    "InsertStmt",
    "Lowered",
    "ObjectKind",
    "SelectStmt",
    "ShowColumnsStmt",
    "ShowCreateStmt",
    "ShowStmt",
    "SqlCatalog",
    "Statement",
    "SubscribeEnvelope",
    "SubscribeStmt",
    "UpdateStmt",
    "Write",
    "lower_query",
    "parse",
    "parse_interval_ms",
    "parse_one",
    "pg_type",
    "plan_delete",
    "plan_insert",
    "plan_update",
    "split_statements",
]
