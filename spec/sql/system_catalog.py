"""The system catalog: ``mz_catalog``, ``mz_internal``, ``pg_catalog`` and ``information_schema``
relations, generated from one snapshot of the catalog.

Clients look at these on connect and to list and describe objects: ``psql``'s
``\\d`` family reads ``pg_class``, ``pg_namespace``, ``pg_attribute``,
``pg_index``; psycopg and asyncpg read ``pg_type``; SQLAlchemy's reflection
reads ``pg_class``/``pg_attribute`` and ``information_schema``; dbt-materialize
reads ``mz_objects``, ``mz_schemas``, ``mz_databases``, ``mz_columns``,
``mz_sources``, ``mz_clusters``. :data:`RELATIONS` declares every relation's
columns (names and :mod:`.pgtypes` types, as Materialize and PostgreSQL name
them); :func:`generate_rows` fills their rows from a :class:`Snapshot` -- a pure
value the runtime builds from one catalog state, so every relation of one
query describes the same moment, and the next DDL is seen by the next query.

Objects get PostgreSQL OIDs from their ids (user ``uN`` is ``20000 + N``,
system ``sN`` is ``16000 + N``, as Materialize numbers user objects from 20000);
the one database (``materialize``), schema (``public``), role and cluster have
fixed ids and OIDs. Types are :data:`.pgtypes.TYPES`, one row each in
``pg_type``/``mz_types``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import pgtypes as T
from .catalog import CatalogItem
from .lower import pg_type

_PRECISION = {T.INT2.oid: 16, T.INT4.oid: 32, T.INT8.oid: 64, T.FLOAT4.oid: 24, T.FLOAT8.oid: 53}
"""``information_schema.columns.numeric_precision`` of the binary number types (in bits)."""

__all__ = [
    "DATABASE_OID",
    "RELATIONS",
    "ClusterInfo",
    "Relation",
    "Snapshot",
    "columns_of",
    "find",
    "generate_rows",
    "object_oid",
    "relation_names",
]

DATABASE_ID, DATABASE_OID = "u1", 16384
PUBLIC_ID, PUBLIC_OID = "u3", 16385
ROLE_ID, ROLE_OID = "u1", 16386
SCHEMA_OIDS = {
    "pg_catalog": 11,
    "information_schema": 13000,
    "mz_catalog": 16387,
    "mz_internal": 16388,
    "mz_introspection": 16389,
}
SCHEMA_IDS = {
    "pg_catalog": "s2",
    "information_schema": "s3",
    "mz_catalog": "s1",
    "mz_internal": "s4",
    "mz_introspection": "s5",
}
PG_CLASS_OID, PG_NAMESPACE_OID, PG_TYPE_OID = 1259, 2615, 1247
BTREE_OID = 403


@dataclass(frozen=True)
class Relation:
    """A system relation: schema, name, and columns as ``(name, type)``."""

    schema: str
    name: str
    columns: tuple[tuple[str, T.PgType], ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


_SHORT = {
    "text": T.TEXT,
    "name": T.NAME,
    "oid": T.OID,
    "int2": T.INT2,
    "int4": T.INT4,
    "int8": T.INT8,
    "float4": T.FLOAT4,
    "float8": T.FLOAT8,
    "bool": T.BOOL,
    "char": T.CHAR,
    "text[]": T.by_oid(T.TEXT.array_oid),
    "oid[]": T.by_oid(T.OID.array_oid),
    "int2[]": T.by_oid(T.INT2.array_oid),
    "char[]": T.by_oid(T.CHAR.array_oid),
    "regproc": T.REGPROC,
    "timestamptz": T.TIMESTAMPTZ,
    "interval": T.INTERVAL,
    "numeric": T.NUMERIC,
}


def _rel(qualified: str, spec: str) -> Relation:
    schema, name = qualified.split(".")
    cols = []
    for part in spec.split():
        col, _, typ = part.partition(":")
        found = _SHORT[typ or "text"]
        assert found is not None
        cols.append((col, found))
    return Relation(schema, name, tuple(cols))


_OBJECT_COLS = "id oid:oid schema_id name owner_id privileges:text[]"
_SQL_COLS = "create_sql redacted_create_sql"

RELATIONS: tuple[Relation, ...] = (
    # -- mz_catalog ---------------------------------------------------------------------------
    _rel("mz_catalog.mz_databases", "id oid:oid name owner_id privileges:text[]"),
    _rel("mz_catalog.mz_schemas", "id oid:oid database_id name owner_id privileges:text[]"),
    _rel(
        "mz_catalog.mz_roles",
        "id oid:oid name inherit:bool rolcanlogin:bool rolsuper:bool",
    ),
    _rel("mz_catalog.mz_tables", f"{_OBJECT_COLS} {_SQL_COLS} source_id"),
    _rel("mz_catalog.mz_views", f"{_OBJECT_COLS} definition {_SQL_COLS}"),
    _rel(
        "mz_catalog.mz_materialized_views",
        f"{_OBJECT_COLS} cluster_id definition {_SQL_COLS}",
    ),
    _rel("mz_catalog.mz_indexes", f"id oid:oid name on_id cluster_id owner_id {_SQL_COLS}"),
    _rel(
        "mz_catalog.mz_index_columns",
        "index_id index_position:int8 on_position:int8 on_expression nullable:bool",
    ),
    _rel(
        "mz_catalog.mz_sources",
        f"{_OBJECT_COLS} type connection_id size envelope_type key_format value_format "
        f"cluster_id {_SQL_COLS}",
    ),
    _rel(
        "mz_catalog.mz_sinks",
        f"{_OBJECT_COLS} type connection_id size envelope_type format key_format value_format "
        f"cluster_id {_SQL_COLS}",
    ),
    _rel(
        "mz_catalog.mz_columns",
        "id name position:int8 nullable:bool type default type_oid:oid type_mod:int4",
    ),
    _rel(
        "mz_catalog.mz_clusters",
        "id name owner_id privileges:text[] managed:bool size replication_factor:int8 "
        "disk:bool availability_zones:text[] introspection_debugging:bool "
        "introspection_interval:interval",
    ),
    _rel(
        "mz_catalog.mz_cluster_replicas",
        "id name cluster_id size availability_zone owner_id disk:bool",
    ),
    _rel(
        "mz_catalog.mz_objects",
        "id oid:oid schema_id name type owner_id cluster_id privileges:text[]",
    ),
    _rel(
        "mz_catalog.mz_relations",
        "id oid:oid schema_id name type owner_id cluster_id privileges:text[]",
    ),
    _rel("mz_catalog.mz_types", "id oid:oid schema_id name category owner_id privileges:text[]"),
    _rel("mz_catalog.mz_secrets", "id oid:oid schema_id name owner_id privileges:text[]"),
    _rel(
        "mz_catalog.mz_connections",
        f"{_OBJECT_COLS} type {_SQL_COLS}",
    ),
    _rel("mz_internal.mz_comments", "id object_type object_sub_id:int4 comment"),
    _rel("mz_internal.mz_show_clusters", "name replicas comment"),
    _rel("mz_internal.mz_show_cluster_replicas", "cluster replica size ready:bool comment"),
    _rel("mz_internal.mz_hydration_statuses", "object_id replica_id hydrated:bool"),
    _rel(
        "mz_internal.mz_cluster_replica_statuses",
        "replica_id process_id:int8 status reason updated_at:timestamptz",
    ),
    # -- pg_catalog ---------------------------------------------------------------------------
    _rel("pg_catalog.pg_namespace", "oid:oid nspname:name nspowner:oid nspacl:text[]"),
    _rel(
        "pg_catalog.pg_class",
        "oid:oid relname:name relnamespace:oid reltype:oid reloftype:oid relowner:oid relam:oid "
        "relfilenode:oid reltablespace:oid relpages:int4 reltuples:float4 relallvisible:int4 "
        "reltoastrelid:oid relhasindex:bool relisshared:bool relpersistence:char relkind:char "
        "relnatts:int2 relchecks:int2 relhasoids:bool relhasrules:bool relhastriggers:bool "
        "relhassubclass:bool relrowsecurity:bool relforcerowsecurity:bool relispopulated:bool "
        "relreplident:char relispartition:bool relrewrite:oid relacl:text[] reloptions:text[] "
        "relpartbound",
    ),
    _rel(
        "pg_catalog.pg_attribute",
        "attrelid:oid attname:name atttypid:oid attstattarget:int4 attlen:int2 attnum:int2 "
        "attndims:int4 attcacheoff:int4 atttypmod:int4 attbyval:bool attalign:char "
        "attstorage:char attcompression:char attnotnull:bool atthasdef:bool atthasmissing:bool "
        "attidentity:char attgenerated:char attisdropped:bool attislocal:bool attinhcount:int4 "
        "attcollation:oid attacl:text[] attoptions:text[] attfdwoptions:text[]",
    ),
    _rel(
        "pg_catalog.pg_type",
        "oid:oid typname:name typnamespace:oid typowner:oid typlen:int2 typbyval:bool "
        "typtype:char typcategory:char typispreferred:bool typisdefined:bool typdelim:char "
        "typrelid:oid typelem:oid typarray:oid typinput:regproc typoutput:regproc "
        "typreceive:regproc typsend:regproc typmodin:regproc typmodout:regproc "
        "typanalyze:regproc typalign:char typstorage:char typnotnull:bool typbasetype:oid "
        "typtypmod:int4 typndims:int4 typcollation:oid typdefaultbin typdefault typacl:text[]",
    ),
    _rel(
        "pg_catalog.pg_index",
        "indexrelid:oid indrelid:oid indnatts:int2 indnkeyatts:int2 indisunique:bool "
        "indisprimary:bool indisexclusion:bool indimmediate:bool indisclustered:bool "
        "indisvalid:bool indcheckxmin:bool indisready:bool indislive:bool indisreplident:bool "
        "indkey:int2[] indcollation:oid[] indclass:oid[] indoption:int2[] indexprs indpred "
        "indnullsnotdistinct:bool",
    ),
    _rel(
        "pg_catalog.pg_database",
        "oid:oid datname:name datdba:oid encoding:int4 datlocprovider:char datistemplate:bool "
        "datallowconn:bool datconnlimit:int4 datcollate datctype daticulocale datacl:text[]",
    ),
    _rel(
        "pg_catalog.pg_roles",
        "oid:oid rolname:name rolsuper:bool rolinherit:bool rolcreaterole:bool "
        "rolcreatedb:bool rolcanlogin:bool rolreplication:bool rolconnlimit:int4 rolpassword "
        "rolvaliduntil:timestamptz rolbypassrls:bool rolconfig:text[]",
    ),
    _rel(
        "pg_catalog.pg_authid",
        "oid:oid rolname:name rolsuper:bool rolinherit:bool rolcreaterole:bool "
        "rolcreatedb:bool rolcanlogin:bool rolreplication:bool rolconnlimit:int4 rolpassword "
        "rolvaliduntil:timestamptz rolbypassrls:bool",
    ),
    _rel(
        "pg_catalog.pg_user",
        "usename:name usesysid:oid usecreatedb:bool usesuper:bool userepl:bool "
        "usebypassrls:bool passwd valuntil:timestamptz useconfig:text[]",
    ),
    _rel("pg_catalog.pg_am", "oid:oid amname:name amhandler:regproc amtype:char"),
    _rel("pg_catalog.pg_attrdef", "oid:oid adrelid:oid adnum:int2 adbin"),
    _rel(
        "pg_catalog.pg_constraint",
        "oid:oid conname:name connamespace:oid contype:char condeferrable:bool "
        "condeferred:bool convalidated:bool conrelid:oid contypid:oid conindid:oid "
        "conparentid:oid confrelid:oid confupdtype:char confdeltype:char confmatchtype:char "
        "conislocal:bool coninhcount:int4 connoinherit:bool conkey:int2[] confkey:int2[] "
        "conpfeqop:oid[] conppeqop:oid[] conffeqop:oid[] conexclop:oid[] conbin",
    ),
    _rel("pg_catalog.pg_description", "objoid:oid classoid:oid objsubid:int4 description"),
    _rel("pg_catalog.pg_shdescription", "objoid:oid classoid:oid description"),
    _rel(
        "pg_catalog.pg_depend",
        "classid:oid objid:oid objsubid:int4 refclassid:oid refobjid:oid refobjsubid:int4 "
        "deptype:char",
    ),
    _rel(
        "pg_catalog.pg_rewrite",
        "oid:oid rulename:name ev_class:oid ev_type:char ev_enabled:char is_instead:bool "
        "ev_qual ev_action",
    ),
    _rel(
        "pg_catalog.pg_proc",
        "oid:oid proname:name pronamespace:oid proowner:oid prolang:oid procost:float4 "
        "prorows:float4 provariadic:oid prosupport:regproc prokind:char prosecdef:bool "
        "proleakproof:bool proisstrict:bool proretset:bool provolatile:char proparallel:char "
        "pronargs:int2 pronargdefaults:int2 prorettype:oid proargtypes:oid[] "
        "proallargtypes:oid[] proargmodes:char[] proargnames:text[] prosrc probin "
        "proconfig:text[] proacl:text[] proisagg:bool proiswindow:bool",
    ),
    _rel(
        "pg_catalog.pg_settings",
        "name setting unit category short_desc extra_desc context vartype source min_val "
        "max_val enumvals:text[] boot_val reset_val sourcefile sourceline:int4 "
        "pending_restart:bool",
    ),
    _rel(
        "pg_catalog.pg_collation",
        "oid:oid collname:name collnamespace:oid collowner:oid collprovider:char "
        "collisdeterministic:bool collencoding:int4 collcollate collctype",
    ),
    _rel(
        "pg_catalog.pg_inherits",
        "inhrelid:oid inhparent:oid inhseqno:int4 inhdetachpending:bool",
    ),
    _rel(
        "pg_catalog.pg_policy",
        "oid:oid polname:name polrelid:oid polcmd:char polpermissive:bool polroles:oid[] "
        "polqual polwithcheck",
    ),
    _rel(
        "pg_catalog.pg_statistic_ext",
        "oid:oid stxrelid:oid stxname:name stxnamespace:oid stxowner:oid stxstattarget:int4 "
        "stxkeys:int2[] stxkind:char[]",
    ),
    _rel(
        "pg_catalog.pg_publication",
        "oid:oid pubname:name pubowner:oid puballtables:bool pubinsert:bool pubupdate:bool "
        "pubdelete:bool pubtruncate:bool pubviaroot:bool",
    ),
    _rel("pg_catalog.pg_publication_rel", "oid:oid prpubid:oid prrelid:oid prqual prattrs:int2[]"),
    _rel("pg_catalog.pg_publication_namespace", "oid:oid pnpubid:oid pnnspid:oid"),
    _rel(
        "pg_catalog.pg_tablespace",
        "oid:oid spcname:name spcowner:oid spcacl:text[] spcoptions:text[]",
    ),
    _rel("pg_catalog.pg_views", "schemaname:name viewname:name viewowner:name definition"),
    _rel(
        "pg_catalog.pg_matviews",
        "schemaname:name matviewname:name matviewowner:name tablespace:name hasindexes:bool "
        "ispopulated:bool definition",
    ),
    _rel(
        "pg_catalog.pg_tables",
        "schemaname:name tablename:name tableowner:name tablespace:name hasindexes:bool "
        "hasrules:bool hastriggers:bool rowsecurity:bool",
    ),
    _rel(
        "pg_catalog.pg_indexes",
        "schemaname:name tablename:name indexname:name tablespace:name indexdef",
    ),
    _rel("pg_catalog.pg_enum", "oid:oid enumtypid:oid enumsortorder:float4 enumlabel:name"),
    _rel("pg_catalog.pg_range", "rngtypid:oid rngsubtype:oid rngmultitypid:oid"),
    _rel(
        "pg_catalog.pg_extension", "oid:oid extname:name extowner:oid extnamespace:oid extversion"
    ),
    _rel(
        "pg_catalog.pg_trigger",
        "oid:oid tgrelid:oid tgparentid:oid tgname:name tgfoid:oid tgtype:int2 tgenabled:char "
        "tgisinternal:bool",
    ),
    _rel("pg_catalog.pg_event_trigger", "oid:oid evtname:name evtevent:name evtenabled:char"),
    _rel("pg_catalog.pg_foreign_table", "ftrelid:oid ftserver:oid ftoptions:text[]"),
    _rel("pg_catalog.pg_sequence", "seqrelid:oid seqtypid:oid seqstart:int8 seqincrement:int8"),
    _rel("pg_catalog.pg_partitioned_table", "partrelid:oid partstrat:char partnatts:int2"),
    _rel(
        "pg_catalog.pg_auth_members", "oid:oid roleid:oid member:oid grantor:oid admin_option:bool"
    ),
    _rel(
        "pg_catalog.pg_operator",
        "oid:oid oprname:name oprnamespace:oid oprleft:oid oprright:oid oprresult:oid",
    ),
    _rel(
        "pg_catalog.pg_cast",
        "oid:oid castsource:oid casttarget:oid castfunc:oid castcontext:char castmethod:char",
    ),
    _rel("pg_catalog.pg_aggregate", "aggfnoid:regproc aggkind:char"),
    _rel("pg_catalog.pg_language", "oid:oid lanname:name"),
    _rel(
        "pg_catalog.pg_opclass",
        "oid:oid opcmethod:oid opcname:name opcnamespace:oid opcowner:oid opcfamily:oid "
        "opcintype:oid opcdefault:bool opckeytype:oid",
    ),
    _rel("pg_catalog.pg_opfamily", "oid:oid opfmethod:oid opfname:name opfnamespace:oid"),
    _rel(
        "pg_catalog.pg_sequences",
        "schemaname:name sequencename:name sequenceowner:name data_type start_value:int8",
    ),
    _rel(
        "pg_catalog.pg_stat_activity",
        "datid:oid datname:name pid:int4 usesysid:oid usename:name application_name "
        "client_addr client_port:int4 backend_start:timestamptz state query",
    ),
    _rel("pg_catalog.pg_locks", "locktype database:oid relation:oid pid:int4 mode granted:bool"),
    # -- information_schema --------------------------------------------------------------------
    _rel(
        "information_schema.schemata",
        "catalog_name schema_name schema_owner default_character_set_catalog "
        "default_character_set_schema default_character_set_name sql_path",
    ),
    _rel(
        "information_schema.tables",
        "table_catalog table_schema table_name table_type self_referencing_column_name "
        "reference_generation user_defined_type_catalog user_defined_type_schema "
        "user_defined_type_name is_insertable_into is_typed commit_action",
    ),
    _rel(
        "information_schema.columns",
        "table_catalog table_schema table_name column_name ordinal_position:int8 "
        "column_default is_nullable data_type character_maximum_length:int8 "
        "character_octet_length:int8 numeric_precision:int8 numeric_precision_radix:int8 "
        "numeric_scale:int8 datetime_precision:int8 interval_type interval_precision:int8 "
        "udt_catalog udt_schema udt_name is_identity identity_generation is_generated "
        "generation_expression is_updatable",
    ),
    _rel(
        "information_schema.views",
        "table_catalog table_schema table_name view_definition check_option is_updatable "
        "is_insertable_into",
    ),
    _rel(
        "information_schema.table_constraints",
        "constraint_catalog constraint_schema constraint_name table_catalog table_schema "
        "table_name constraint_type is_deferrable initially_deferred enforced",
    ),
    _rel(
        "information_schema.key_column_usage",
        "constraint_catalog constraint_schema constraint_name table_catalog table_schema "
        "table_name column_name ordinal_position:int8 position_in_unique_constraint:int8",
    ),
    _rel(
        "information_schema.referential_constraints",
        "constraint_catalog constraint_schema constraint_name unique_constraint_catalog "
        "unique_constraint_schema unique_constraint_name match_option update_rule delete_rule",
    ),
    _rel(
        "information_schema.constraint_column_usage",
        "table_catalog table_schema table_name column_name constraint_catalog "
        "constraint_schema constraint_name",
    ),
    _rel(
        "information_schema.routines",
        "specific_catalog specific_schema specific_name routine_catalog routine_schema "
        "routine_name routine_type data_type",
    ),
    _rel(
        "information_schema.character_sets",
        "character_set_catalog character_set_schema character_set_name",
    ),
    _rel("information_schema.enabled_roles", "role_name"),
    _rel("information_schema.applicable_roles", "grantee role_name is_grantable"),
    _rel(
        "information_schema.table_privileges",
        "grantor grantee table_catalog table_schema table_name privilege_type is_grantable "
        "with_hierarchy",
    ),
    _rel(
        "information_schema.column_privileges",
        "grantor grantee table_catalog table_schema table_name column_name privilege_type "
        "is_grantable",
    ),
    _rel(
        "information_schema.sequences", "sequence_catalog sequence_schema sequence_name data_type"
    ),
)
"""Every system relation and its columns."""

_BY_NAME = {r.qualified: r for r in RELATIONS}


def relation_names() -> frozenset[str]:
    """The unqualified names of the system relations (a query naming one reads the catalog)."""
    return frozenset(r.name for r in RELATIONS)


@dataclass(frozen=True)
class ClusterInfo:
    """A cluster and its replicas as the catalog shows them: ``replicas`` as ``(name, size,
    ready)`` (size ``""`` for a replica without one); a managed cluster's ``size`` and
    ``replication_factor``."""

    id: str
    name: str
    replicas: tuple[tuple[str, str, bool], ...] = ()
    managed: bool = False
    size: str | None = None
    replication_factor: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """What the catalog holds at one moment, for :func:`generate_rows`.

    ``items`` are every named object (the SQL front end's
    :class:`~tidegate.spec.sql.catalog.CatalogItem`); ``definitions`` the SQL that
    created objects; ``system_items`` the ids of objects in ``mz_internal`` (the
    storage-managed collections); ``settings`` the session's variables for
    ``pg_settings``, as ``(name, value, description)``; ``sessions`` the sessions for
    ``pg_stat_activity`` as ``(pid, user, application_name, state)``.
    """

    items: tuple[CatalogItem, ...]
    definitions: Mapping[str, str] = field(default_factory=dict)
    clusters: tuple[ClusterInfo, ...] = (ClusterInfo("u1", "default"),)
    user: str = "materialize"
    database: str = "materialize"
    schema: str = "public"
    system_items: frozenset[str] = frozenset()
    settings: tuple[tuple[str, str, str], ...] = ()
    sessions: tuple[tuple[int, str, str, str], ...] = ()


def object_oid(gid: Any) -> int:
    """An object's OID, from its id: ``u7`` is 20007, ``s3`` is 16003."""
    text = str(gid)
    n = int(text[1:])
    return (20000 if text[0] == "u" else 16000) + n


_KIND_TYPES = {
    "table": "table",
    "view": "view",
    "materialized-view": "materialized-view",
    "index": "index",
    "source": "source",
    "sink": "sink",
}
_RELKIND = {"table": "r", "view": "v", "materialized-view": "m", "index": "i", "source": "r"}


def _create_sql(item: CatalogItem, definitions: Mapping[str, str]) -> str | None:
    return definitions.get(str(item.id))


def generate_rows(snapshot: Snapshot) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every relation of :data:`RELATIONS`, by qualified name."""
    return _Generator(snapshot).run()


class _Generator:
    def __init__(self, snap: Snapshot) -> None:
        self.s = snap
        self.rows: dict[str, list[tuple[Any, ...]]] = {r.qualified: [] for r in RELATIONS}
        self.items = list(snap.items)
        self.by_id = {i.id: i for i in self.items}
        self.cluster_ids = {c.name: c.id for c in snap.clusters}
        self.cluster_id = snap.clusters[0].id if snap.clusters else None

    def add(self, name: str, *row: Any) -> None:
        rel = _BY_NAME[name]
        assert len(row) == len(rel.columns), (name, len(row), len(rel.columns))
        self.rows[name].append(row)

    def schema_of(self, item: CatalogItem) -> tuple[str, str, int]:
        """(schema name, schema id, schema oid) of an item."""
        if str(item.id) in self.s.system_items:
            return "mz_internal", SCHEMA_IDS["mz_internal"], SCHEMA_OIDS["mz_internal"]
        return self.s.schema, PUBLIC_ID, PUBLIC_OID

    def run(self) -> dict[str, list[tuple[Any, ...]]]:
        self._databases_schemas_roles()
        self._clusters()
        self._types()
        for item in self.items:
            self._item(item)
        self._system_relations()
        self._settings_sessions()
        return self.rows

    def _databases_schemas_roles(self) -> None:
        s = self.s
        self.add("mz_catalog.mz_databases", DATABASE_ID, DATABASE_OID, s.database, ROLE_ID, [])
        self.add(
            "pg_catalog.pg_database",
            DATABASE_OID,
            s.database,
            ROLE_OID,
            6,
            "c",
            False,
            True,
            -1,
            "C",
            "C",
            None,
            None,
        )
        self.add("mz_catalog.mz_schemas", PUBLIC_ID, PUBLIC_OID, DATABASE_ID, s.schema, ROLE_ID, [])
        self.add("pg_catalog.pg_namespace", PUBLIC_OID, s.schema, ROLE_OID, None)
        self.add(
            "information_schema.schemata", s.database, s.schema, s.user, None, None, None, None
        )
        for name, oid in SCHEMA_OIDS.items():
            sid = SCHEMA_IDS[name]
            self.add("mz_catalog.mz_schemas", sid, oid, None, name, "s1", [])
            self.add("pg_catalog.pg_namespace", oid, name, 10, None)
            self.add("information_schema.schemata", s.database, name, "mz_system", *([None] * 4))
        self.add("mz_catalog.mz_roles", ROLE_ID, ROLE_OID, s.user, True, True, True)
        role = (ROLE_OID, s.user, True, True, True, True, True, False, -1, None, None, True)
        self.add("pg_catalog.pg_roles", *role, None)
        self.add("pg_catalog.pg_authid", *role)
        system = (10, "mz_system", True, True, True, True, False, False, -1, None, None, True)
        self.add("pg_catalog.pg_roles", *system, None)
        self.add("pg_catalog.pg_authid", *system)
        self.add("mz_catalog.mz_roles", "s1", 10, "mz_system", True, False, True)
        self.add("pg_catalog.pg_user", s.user, ROLE_OID, True, True, False, True, None, None, None)
        self.add("information_schema.enabled_roles", s.user)
        self.add("pg_catalog.pg_am", BTREE_OID, "btree", "bthandler", "i")
        self.add("pg_catalog.pg_am", 2, "heap", "heap_tableam_handler", "t")
        self.add("pg_catalog.pg_tablespace", 1663, "pg_default", 10, None, None)
        self.add(
            "pg_catalog.pg_collation",
            100,
            "default",
            SCHEMA_OIDS["pg_catalog"],
            10,
            "d",
            True,
            -1,
            None,
            None,
        )
        self.add("information_schema.character_sets", None, None, "UTF8")

    def _clusters(self) -> None:
        for c in self.s.clusters:
            self.add(
                "mz_catalog.mz_clusters",
                c.id,
                c.name,
                ROLE_ID,
                [],
                c.managed,
                c.size,
                c.replication_factor if c.managed else None,
                False,
                [],
                False,
                "1s",
            )
            self.add(
                "mz_internal.mz_show_clusters",
                c.name,
                ",".join(f"{r}({size or 'default'})" for r, size, _ in c.replicas),
                None,
            )
            for i, (name, size, ready) in enumerate(c.replicas, 1):
                rid = f"{c.id}.{i}"
                self.add(
                    "mz_catalog.mz_cluster_replicas",
                    rid,
                    name,
                    c.id,
                    size or None,
                    None,
                    ROLE_ID,
                    False,
                )
                self.add(
                    "mz_internal.mz_show_cluster_replicas", c.name, name, size or None, ready, None
                )
                self.add(
                    "mz_internal.mz_cluster_replica_statuses",
                    rid,
                    0,
                    "online" if ready else "offline",
                    None,
                    None,
                )

    def _types(self) -> None:
        pg = SCHEMA_OIDS["pg_catalog"]
        for t in T.TYPES:
            array = t.element != 0
            self.add(
                "pg_catalog.pg_type",
                t.oid,
                t.name,
                pg,
                10,
                t.length,
                t.length in (1, 2, 4, 8) and not array,
                "b" if t.oid != T.UNKNOWN.oid else "p",
                t.category,
                t.oid in (25, 701, 16),
                True,
                ",",
                0,
                t.element,
                t.array_oid,
                f"{t.name}in",
                f"{t.name}out",
                f"{t.name}recv",
                f"{t.name}send",
                "-",
                "-",
                "-",
                "i",
                "x" if t.length < 0 else "p",
                False,
                0,
                -1,
                1 if array else 0,
                100 if t.category == "S" else 0,
                None,
                None,
                None,
            )
            self.add(
                "mz_catalog.mz_types",
                f"s{t.oid}",
                t.oid,
                SCHEMA_IDS["pg_catalog"],
                t.name,
                "array" if array else t.category,
                "s1",
                [],
            )

    def _item(self, item: CatalogItem) -> None:
        s = self.s
        kind = item.kind
        gid = str(item.id)
        oid = object_oid(item.id)
        schema_name, schema_id, schema_oid = self.schema_of(item)
        create = _create_sql(item, s.definitions)
        cluster = (
            self.cluster_ids.get(item.cluster or "", self.cluster_id)
            if kind in ("materialized-view", "index")
            else None
        )
        mz_type = _KIND_TYPES[kind]
        self.add(
            "mz_catalog.mz_objects", gid, oid, schema_id, item.name, mz_type, ROLE_ID, cluster, []
        )
        if kind == "sink":
            self.add(
                "mz_catalog.mz_sinks",
                gid,
                oid,
                schema_id,
                item.name,
                ROLE_ID,
                [],
                item.detail or "",
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                create,
                create,
            )
            return
        if kind != "index":
            self.add(
                "mz_catalog.mz_relations",
                gid,
                oid,
                schema_id,
                item.name,
                mz_type,
                ROLE_ID,
                cluster,
                [],
            )
        if kind == "table":
            self.add(
                "mz_catalog.mz_tables",
                gid,
                oid,
                schema_id,
                item.name,
                ROLE_ID,
                [],
                create,
                create,
                None,
            )
        elif kind == "view":
            self.add(
                "mz_catalog.mz_views",
                gid,
                oid,
                schema_id,
                item.name,
                ROLE_ID,
                [],
                _definition(create),
                create,
                create,
            )
        elif kind == "materialized-view":
            self.add(
                "mz_catalog.mz_materialized_views",
                gid,
                oid,
                schema_id,
                item.name,
                ROLE_ID,
                [],
                cluster,
                _definition(create),
                create,
                create,
            )
        elif kind == "source":
            self.add(
                "mz_catalog.mz_sources",
                gid,
                oid,
                schema_id,
                item.name,
                ROLE_ID,
                [],
                item.detail or "",
                None,
                None,
                None,
                None,
                None,
                None,
                create,
                create,
            )
        elif kind == "index":
            self._index(item, oid, cluster, create)
            return
        self._relation(item, oid, schema_name, schema_oid, create)

    def _relation(
        self, item: CatalogItem, oid: int, schema: str, schema_oid: int, create: str | None
    ) -> None:
        s = self.s
        kind = item.kind
        relkind = _RELKIND[kind]
        has_index = any(i.kind == "index" and i.on == item.id for i in self.items)
        self.add(
            "pg_catalog.pg_class",
            oid,
            item.name,
            schema_oid,
            0,
            0,
            ROLE_OID,
            2 if relkind != "v" else 0,
            oid,
            0,
            0,
            -1.0,
            0,
            0,
            has_index,
            False,
            "p",
            relkind,
            len(item.schema.columns),
            0,
            False,
            False,
            False,
            False,
            False,
            False,
            True,
            "d",
            False,
            0,
            None,
            None,
            None,
        )
        table_type = {
            "table": "BASE TABLE",
            "view": "VIEW",
            "materialized-view": "MATERIALIZED VIEW",
            "source": "SOURCE",
        }[kind]
        self.add(
            "information_schema.tables",
            s.database,
            schema,
            item.name,
            table_type,
            None,
            None,
            None,
            None,
            None,
            "YES" if kind == "table" else "NO",
            "NO",
            None,
        )
        for pos, col in enumerate(item.schema.columns, 1):
            t = T.for_scalar(col.type.scalar)
            self.add(
                "mz_catalog.mz_columns",
                str(item.id),
                col.name,
                pos,
                col.type.nullable,
                pg_type(col.type.scalar),
                None,
                t.oid,
                -1,
            )
            self.add(
                "pg_catalog.pg_attribute",
                oid,
                col.name,
                t.oid,
                -1,
                t.length,
                pos,
                0,
                -1,
                -1,
                t.length in (1, 2, 4, 8),
                "d",
                "p" if t.length > 0 else "x",
                "",
                not col.type.nullable,
                False,
                False,
                "",
                "",
                False,
                True,
                0,
                100 if t.category == "S" else 0,
                None,
                None,
                None,
            )
            self.add(
                "information_schema.columns",
                s.database,
                schema,
                item.name,
                col.name,
                pos,
                None,
                "YES" if col.type.nullable else "NO",
                t.sql_name,
                None,
                None,
                _PRECISION.get(t.oid),
                2 if t.oid in _PRECISION else 10 if t is T.NUMERIC else None,
                0 if t in (T.INT8, T.INT4, T.INT2) else None,
                6 if t is T.TIMESTAMP else 0 if t is T.DATE else None,
                None,
                None,
                s.database,
                "pg_catalog",
                t.name,
                "NO",
                None,
                "NEVER",
                None,
                "YES" if item.kind == "table" else "NO",
            )
        owner = s.user
        if kind == "view":
            self.add("pg_catalog.pg_views", schema, item.name, owner, _definition(create))
            self.add(
                "information_schema.views",
                s.database,
                schema,
                item.name,
                _definition(create),
                "NONE",
                "NO",
                "NO",
            )
        elif kind == "materialized-view":
            self.add(
                "pg_catalog.pg_matviews",
                schema,
                item.name,
                owner,
                None,
                has_index,
                True,
                _definition(create),
            )
        else:
            self.add(
                "pg_catalog.pg_tables",
                schema,
                item.name,
                owner,
                None,
                has_index,
                False,
                False,
                False,
            )

    def _index(self, item: CatalogItem, oid: int, cluster: str | None, create: str | None) -> None:
        on = self.by_id.get(item.on) if item.on is not None else None
        on_id = str(item.on) if item.on is not None else None
        self.add(
            "mz_catalog.mz_indexes",
            str(item.id),
            oid,
            item.name,
            on_id,
            cluster,
            ROLE_ID,
            create,
            create,
        )
        keys = item.keys
        for pos, k in enumerate(keys, 1):
            nullable = (
                item.schema.columns[k].type.nullable if k < len(item.schema.columns) else True
            )
            self.add("mz_catalog.mz_index_columns", str(item.id), pos, k + 1, None, nullable)
        if on is None:
            return
        schema_name, _sid, schema_oid = self.schema_of(on)
        on_oid = object_oid(on.id)
        self.add(
            "pg_catalog.pg_class",
            oid,
            item.name,
            schema_oid,
            0,
            0,
            ROLE_OID,
            BTREE_OID,
            oid,
            0,
            0,
            -1.0,
            0,
            0,
            False,
            False,
            "p",
            "i",
            len(keys),
            0,
            False,
            False,
            False,
            False,
            False,
            False,
            True,
            "d",
            False,
            0,
            None,
            None,
            None,
        )
        indkey = [k + 1 for k in keys] or list(range(1, len(on.schema.columns) + 1))
        self.add(
            "pg_catalog.pg_index",
            oid,
            on_oid,
            len(indkey),
            len(indkey),
            False,
            False,
            False,
            True,
            False,
            True,
            False,
            True,
            True,
            False,
            indkey,
            [0] * len(indkey),
            [0] * len(indkey),
            [0] * len(indkey),
            None,
            None,
            False,
        )
        cols = ", ".join(on.schema.columns[k - 1].name for k in indkey)
        self.add(
            "pg_catalog.pg_indexes",
            schema_name,
            on.name,
            item.name,
            None,
            f"CREATE INDEX {item.name} ON {schema_name}.{on.name} USING arrangement ({cols})",
        )

    def _system_relations(self) -> None:
        """The system relations themselves, in their schemas (``\\dS``, ``mz_objects``)."""
        for i, rel in enumerate(RELATIONS, 1):
            oid = 15000 + i
            schema_oid = SCHEMA_OIDS[rel.schema]
            gid = f"s{oid}"
            self.add(
                "mz_catalog.mz_objects",
                gid,
                oid,
                SCHEMA_IDS[rel.schema],
                rel.name,
                "view",
                "s1",
                None,
                [],
            )
            self.add(
                "mz_catalog.mz_relations",
                gid,
                oid,
                SCHEMA_IDS[rel.schema],
                rel.name,
                "view",
                "s1",
                None,
                [],
            )
            self.add(
                "pg_catalog.pg_class",
                oid,
                rel.name,
                schema_oid,
                0,
                0,
                10,
                0,
                oid,
                0,
                0,
                -1.0,
                0,
                0,
                False,
                False,
                "p",
                "v",
                len(rel.columns),
                0,
                False,
                False,
                False,
                False,
                False,
                False,
                True,
                "n",
                False,
                0,
                None,
                None,
                None,
            )
            for pos, (col, t) in enumerate(rel.columns, 1):
                self.add(
                    "pg_catalog.pg_attribute",
                    oid,
                    col,
                    t.oid,
                    -1,
                    t.length,
                    pos,
                    0,
                    -1,
                    -1,
                    t.length in (1, 2, 4, 8),
                    "d",
                    "p" if t.length > 0 else "x",
                    "",
                    False,
                    False,
                    False,
                    "",
                    "",
                    False,
                    True,
                    0,
                    0,
                    None,
                    None,
                    None,
                )
                self.add("mz_catalog.mz_columns", gid, col, pos, True, t.sql_name, None, t.oid, -1)

    def _settings_sessions(self) -> None:
        for name, value, description in self.s.settings:
            self.add(
                "pg_catalog.pg_settings",
                name,
                value,
                None,
                "Client Connection Defaults",
                description,
                None,
                "user",
                "string",
                "session",
                None,
                None,
                None,
                value,
                value,
                None,
                None,
                False,
            )
        for pid, user, app, state in self.s.sessions:
            self.add(
                "pg_catalog.pg_stat_activity",
                DATABASE_OID,
                self.s.database,
                pid,
                ROLE_OID,
                user,
                app,
                None,
                None,
                None,
                state,
                None,
            )


def _definition(create: str | None) -> str | None:
    """The query of a ``CREATE [MATERIALIZED] VIEW ... AS query`` text."""
    if create is None:
        return None
    import re

    m = re.search(r"\bAS\b", create, re.IGNORECASE)
    return create[m.end() :].strip() + ";" if m else create


def columns_of(name: str) -> Sequence[tuple[str, T.PgType]]:
    """The columns of the system relation ``schema.name``."""
    return _BY_NAME[name].columns


def find(schema: str | None, name: str) -> Relation | None:
    """The system relation ``[schema.]name`` (unqualified: ``pg_catalog``, then ``mz_catalog``,
    then ``mz_internal``, then ``information_schema``), or None."""
    if schema is not None:
        return _BY_NAME.get(f"{schema}.{name}")
    for s in ("pg_catalog", "mz_catalog", "mz_internal"):
        found = _BY_NAME.get(f"{s}.{name}")
        if found is not None:
            return found
    return None
