"""Reading a PostgreSQL table through logical replication: :class:`PostgresReader`.

Modules: :mod:`.reader` (the reader: offsets, snapshot, resumption, errors),
``_replication`` (the replication connection, over psycopg 3's libpq binding),
``_pgoutput`` (the ``pgoutput`` protocol decoder), ``_types`` (column types and
value parsing), ``_catalog`` (what the server says about table, publication and slot).
"""

from .reader import PostgresReader

__all__ = ["PostgresReader"]
