"""What the upstream server says about the source's table, publication and slot (psycopg 3).

Each check raises the typed error that names what is wrong and how to fix it:
the server (``wal_level``, the role's ``REPLICATION`` attribute), the table
(exists, is an ordinary table, ``REPLICA IDENTITY FULL``, supported column
types), the publication (exists, publishes every operation of the table, with
no row filter or column list) and the replication slot (a ``pgoutput`` slot of
this database). Generated columns are left out, as ``pgoutput`` leaves them out.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidegate.spec.errors import (
    PublicationMissing,
    ReplicaIdentityNotFull,
    SourceConfigurationInvalid,
    TableNotPublished,
    UnsupportedUpstreamType,
    UpstreamTableMissing,
    UpstreamUnreachable,
)
from tidegate.spec.plan.schema import Column, ColumnType, ScalarType, Schema

from ._types import SESSION_OPTIONS, scalar_type

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SlotInfo",
    "UpstreamColumn",
    "UpstreamTable",
    "check_publication",
    "check_server",
    "connect",
    "describe_table",
    "find_slot",
    "format_lsn",
    "parse_lsn",
    "server_name",
    "session_conninfo",
    "unreachable",
    "upstream_errors",
]

_IDENTITIES = {"d": "default", "n": "nothing", "i": "using index", "f": "full"}


@dataclass(frozen=True, slots=True)
class UpstreamColumn:
    """One replicated column: its name, PostgreSQL type, and tidegate type."""

    name: str
    type_oid: int
    type_modifier: int
    type_name: str
    not_null: bool
    scalar: ScalarType


@dataclass(frozen=True, slots=True)
class UpstreamTable:
    """The source's table as the catalog describes it (``oid`` names it in pgoutput messages)."""

    oid: int
    namespace: str
    name: str
    columns: tuple[UpstreamColumn, ...]

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"

    def schema(self) -> Schema:
        """The tidegate schema of the table's rows: its columns in order, nullable unless NOT NULL."""
        return Schema(
            tuple(Column(c.name, ColumnType(c.scalar, not c.not_null)) for c in self.columns)
        )

    def as_created(self, expected: Schema) -> UpstreamTable:
        """This table read as a source created before ``smallint``, ``integer`` and ``real``
        had types of their own: a column ``expected`` holds as the wide type (``int64``,
        ``float64``) keeps it, so an existing source's collection keeps its schema and
        values (a real read as the double of its text, as then)."""
        if len(expected.columns) != len(self.columns):
            return self
        cols = tuple(
            dataclasses.replace(c, scalar=e.type.scalar)
            if c.scalar.is_narrow and e.name == c.name and e.type.scalar is c.scalar.wide
            else c
            for c, e in zip(self.columns, expected.columns, strict=True)
        )
        return dataclasses.replace(self, columns=cols)


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """A replication slot as ``pg_replication_slots`` shows it."""

    name: str
    plugin: str | None
    logical: bool
    this_database: bool
    confirmed_flush: int | None
    active_pid: int | None
    lost: bool


def server_name(url: str) -> str:
    """``host:port/dbname`` of a libpq URL or conninfo, for messages (never the password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except Exception:
        return "<unparsable connection string>"
    return (
        f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/{params.get('dbname', '')}"
    )


def unreachable(url: str, error: BaseException) -> UpstreamUnreachable:
    """The typed error for a connection that failed or broke."""
    return UpstreamUnreachable(server_name(url), str(error).strip() or type(error).__name__)


def session_conninfo(url: str, connect_timeout_s: float, **extra: str) -> str:
    """``url`` as a conninfo string with the reader's session options (after any of its own).

    libpq's ``connect_timeout`` is whole seconds, at least 2.
    """
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        own = conninfo_to_dict(url).get("options")
        options = f"{own} {SESSION_OPTIONS}" if own else SESSION_OPTIONS
        timeout = str(max(2, round(connect_timeout_s)))
        return make_conninfo(url, options=options, connect_timeout=timeout, **extra)
    except psycopg.Error as e:
        raise SourceConfigurationInvalid(
            "connection URL", "unparsable", f"a libpq URL or conninfo string is needed: {e}"
        ) from None


def connect(url: str, connect_timeout_s: float) -> psycopg.Connection[Any]:
    """An autocommit session with the reader's session options; :class:`UpstreamUnreachable` if it fails."""
    import psycopg

    conninfo = session_conninfo(url, connect_timeout_s)
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as e:
        raise unreachable(url, e) from e


@contextlib.contextmanager
def upstream_errors(url: str) -> Iterator[None]:
    """Turn psycopg's errors inside the block into typed ones.

    A connection that failed, broke or was shut down: :class:`UpstreamUnreachable`;
    missing privileges (e.g. to read the table): :class:`SourceConfigurationInvalid`;
    any other refusal: :class:`SourceConfigurationInvalid` naming its SQLSTATE.
    """
    import psycopg

    try:
        yield
    except psycopg.OperationalError as e:
        raise unreachable(url, e) from e
    except psycopg.errors.InsufficientPrivilege as e:
        raise SourceConfigurationInvalid("role privileges", "insufficient", str(e).strip()) from e
    except psycopg.Error as e:
        raise SourceConfigurationInvalid(
            "upstream", f"refused (SQLSTATE {e.sqlstate})", str(e).strip()
        ) from e


def check_server(conn: psycopg.Connection[Any]) -> None:
    """The server can stream logical replication to this role."""
    row = conn.execute(
        "SELECT current_setting('wal_level'), current_user, "
        "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)"
    ).fetchone()
    assert row is not None
    wal_level, user, may_replicate = row
    if wal_level != "logical":
        raise SourceConfigurationInvalid(
            "wal_level",
            wal_level,
            "logical replication needs wal_level = logical "
            "(ALTER SYSTEM SET wal_level = logical, then restart the server)",
        )
    if not may_replicate:
        raise SourceConfigurationInvalid(
            "role attribute REPLICATION",
            f"absent for {user}",
            f"ALTER ROLE {user} REPLICATION",
        )


def describe_table(conn: psycopg.Connection[Any], table: str) -> UpstreamTable:
    """The table named ``table`` (as SQL would resolve it), checked to be replicable."""
    import psycopg

    try:
        row = conn.execute(
            "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.oid = to_regclass(%s)",
            (table,),
        ).fetchone()
    except (psycopg.DataError, psycopg.ProgrammingError):
        row = None
    if row is None:
        raise UpstreamTableMissing(table)
    oid, namespace, name, relkind, identity = row
    qualified = f"{namespace}.{name}"
    if relkind != "r":
        raise UpstreamTableMissing(qualified, "is not an ordinary table (partitioned, a view, ...)")
    if identity != "f":
        raise ReplicaIdentityNotFull(qualified, _IDENTITIES.get(identity, identity))
    generated = "AND a.attgenerated = ''" if conn.info.server_version >= 120000 else ""
    rows = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull FROM pg_attribute a "
        f"WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped {generated} "
        "ORDER BY a.attnum",
        (oid,),
    ).fetchall()
    columns = []
    for col, type_oid, typmod, type_name, not_null in rows:
        scalar = scalar_type(type_oid)
        if scalar is None:
            raise UnsupportedUpstreamType(qualified, col, type_name)
        columns.append(UpstreamColumn(col, type_oid, typmod, type_name, not_null, scalar))
    return UpstreamTable(oid, namespace, name, tuple(columns))


def check_publication(
    conn: psycopg.Connection[Any], publication: str, table: UpstreamTable
) -> None:
    """``publication`` exists and publishes every change of every column of ``table``."""
    version = conn.info.server_version
    truncate = "pubtruncate" if version >= 110000 else "true"
    row = conn.execute(
        f"SELECT pubinsert, pubupdate, pubdelete, {truncate} FROM pg_publication "
        "WHERE pubname = %s",
        (publication,),
    ).fetchone()
    if row is None:
        raise PublicationMissing(publication)
    left_out = [
        op for op, on in zip(("insert", "update", "delete", "truncate"), row, strict=True) if not on
    ]
    if left_out:
        raise TableNotPublished(
            table.qualified, publication, "the operations " + ", ".join(left_out)
        )
    extra = "attnames, rowfilter" if version >= 150000 else "NULL, NULL"
    published = conn.execute(
        f"SELECT {extra} FROM pg_publication_tables "
        "WHERE pubname = %s AND schemaname = %s AND tablename = %s",
        (publication, table.namespace, table.name),
    ).fetchone()
    if published is None:
        raise TableNotPublished(table.qualified, publication, "the table")
    attnames, rowfilter = published
    if rowfilter is not None:
        raise TableNotPublished(
            table.qualified, publication, f"the rows outside its row filter ({rowfilter})"
        )
    if attnames is not None:
        missing = [c.name for c in table.columns if c.name not in attnames]
        if missing:
            raise TableNotPublished(
                table.qualified, publication, "the columns " + ", ".join(missing)
            )


def find_slot(conn: psycopg.Connection[Any], slot: str) -> SlotInfo | None:
    """The replication slot called ``slot``, or ``None``."""
    lost = "wal_status = 'lost'" if conn.info.server_version >= 130000 else "false"
    row = conn.execute(
        "SELECT plugin, slot_type = 'logical', "
        "database IS NOT DISTINCT FROM current_database(), "
        f"confirmed_flush_lsn::text, active_pid, {lost} "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    plugin, logical, this_db, confirmed, pid, is_lost = row
    return SlotInfo(slot, plugin, logical, this_db, parse_lsn(confirmed), pid, bool(is_lost))


def parse_lsn(text: str | None) -> int | None:
    """An LSN's ``X/Y`` text as an int (``None`` stays ``None``)."""
    if text is None:
        return None
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def format_lsn(lsn: int) -> str:
    """An int LSN as PostgreSQL writes it, ``X/Y``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"
