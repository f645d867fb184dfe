"""The PostgreSQL frontend/backend protocol (version 3): psql, drivers and dbt connect to tidegate.

* :mod:`.messages` -- the protocol's messages; :mod:`._codec` -- their bytes;
* :mod:`.protocol` -- one connection's state machine (sans-IO: bytes in, messages out);
* :mod:`.auth` -- SCRAM-SHA-256, cleartext over TLS, trust;
* :mod:`.session` -- messages to the SQL session (:mod:`tidegate.runtime.sql_session`);
* :mod:`.server` -- the thin anyio server.

``serve_pgwire(env, host, port, auth=AuthConfig(...))`` serves an environment;
``tidegate up`` serves its own on ``--sql-listen`` (default ``127.0.0.1:6875``).
"""

from .auth import AuthConfig, AuthenticationFailed
from .server import PgwireOptions, PgwireServer, serve_pgwire, tls_context

__all__ = [
    "AuthConfig",
    "AuthenticationFailed",
    "PgwireOptions",
    "PgwireServer",
    "serve_pgwire",
    "tls_context",
]
