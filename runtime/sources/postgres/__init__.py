"""Reading a PostgreSQL table through logical replication: :class:`PostgresReader`.

Modules: :mod:`.reader` (the reader: offsets, snapshot, resumption, errors; a thin
driver of the IO around ``_core``), ``_core`` (the protocol logic without IO:
replication frames in, batches, standby status updates and typed errors out; the
simulator runs it over a simulated upstream's bytes),
``_replication`` (the replication connection, over psycopg 3's libpq binding),
``_pgoutput`` (the ``pgoutput`` protocol decoder), ``_types`` (column types and
value parsing), ``_catalog`` (what the server says about table, publication and slot).
"""

from .reader import PostgresReader

__all__ = ["PostgresReader"]
