"""What a source or sink is doing, as the controller knows it: :class:`StorageStatus`.

Built by :meth:`tidegate.runtime.environment.Environment.storage_status` from
the storage controller's state: the latest status the storage replica
reported (Materialize's ``starting``, ``running``, ``paused``, ``stalled``,
``ceased``, ``dropped``), its error and hint, the object's frontiers and its
merged statistics. Connections are described without secrets
(:func:`connection_text`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
    SourceConnection,
    StorageSinkConnection,
)

__all__ = [
    "StorageStatus",
    "connection_details",
    "connection_text",
    "connection_type",
    "redact_url",
]


@dataclass(frozen=True, slots=True)
class StorageStatus:
    """One source or sink: what it reads or writes, its health, frontiers and statistics.

    ``status`` is ``None`` until the storage replica first reports one (and
    after a controller restart, until it reports again). For a source,
    ``since``/``upper`` are its collection's and ``progress`` names its
    progress collection; for a sink, ``upper`` is the frontier its target
    covers (every update before it is written out), ``since`` the time it
    holds its input at, and ``reads`` the collection it writes out.
    ``statistics`` are the merged counters and gauges (``None`` before any).
    """

    id: GlobalId
    name: str
    kind: Literal["source", "sink"]
    type: str
    """``load-generator``, ``postgres``, ``iceberg`` (``simulated`` in the simulator)."""
    connection: str
    """The connection, described without secrets."""
    status: str | None
    error: str | None
    hint: str | None
    since: Antichain
    upper: Antichain
    statistics: dict[str, int | None] | None = None
    reads: GlobalId | None = None
    progress: GlobalId | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """Connection fields (no secrets), for ``describe``."""


def connection_type(c: SourceConnection | StorageSinkConnection) -> str:
    """A connection's kind as ``status`` shows it."""
    if isinstance(c, LoadGenerator):
        return "load-generator"
    if isinstance(c, PostgresSource):
        return "postgres"
    if isinstance(c, IcebergSink):
        return "iceberg"
    if isinstance(c, SimulatedSource | SimulatedSink):
        return "simulated"
    return type(c).__name__


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (``postgres://u:***@host/db``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connection_details(c: SourceConnection | StorageSinkConnection) -> dict[str, Any]:
    """A connection's fields, URLs redacted (for ``describe``)."""
    if isinstance(c, LoadGenerator):
        return {
            "kind": c.kind,
            "tick_ms": c.tick_ms,
            "seed": c.seed,
            "max_cardinality": c.max_cardinality,
            "rows_per_tick": c.rows_per_tick,
        }
    if isinstance(c, PostgresSource):
        return {
            "url": redact_url(c.url),
            "table": c.table,
            "publication": c.publication,
            "slot": c.slot,
            "password": None if c.password_secret is None else f"SECRET {c.password_secret}",
        }
    if isinstance(c, IcebergSink):
        return {
            "catalog_url": redact_url(c.catalog_url),
            "warehouse": redact_url(c.warehouse),
            "table": c.table,
            "password": None if c.password_secret is None else f"SECRET {c.password_secret}",
        }
    return {"name": c.name}


def connection_text(c: SourceConnection | StorageSinkConnection) -> str:
    """One line describing a connection (no secrets)."""
    d = connection_details(c)
    if isinstance(c, LoadGenerator):
        return f"load generator {c.kind} (tick {c.tick_ms} ms, seed {c.seed})"
    if isinstance(c, PostgresSource):
        return f"{d['url']} table {c.table} (publication {c.publication}, slot {c.slot})"
    if isinstance(c, IcebergSink):
        return f"iceberg {c.table} in {d['warehouse']} (catalog {d['catalog_url']})"
    return f"simulated {c.name}"
