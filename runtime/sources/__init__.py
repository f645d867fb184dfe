"""Source readers: what a storage replica's ingestions read upstream changes through.

* :mod:`.postgres` -- :class:`~.postgres.PostgresReader`, a PostgreSQL table
  through logical replication (``pgoutput``).
"""

__all__: list[str] = []
