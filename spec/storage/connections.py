"""Where ingestions read from and sinks write to, as data; and what a source reader delivers.

The storage controller never looks inside a connection: it hands it to the
storage instance in ``RunIngestion``/``RunSink``. The storage replica picks
the reader or writer for its type (``tidegate.replica.storage``); the
simulator has its own (:class:`SimulatedSource`, :class:`SimulatedSink`).

A source's position is an **offset**: a non-negative ``int`` that only grows
(a PostgreSQL LSN, a load generator's tick, a simulated log's index). A reader
delivers :class:`SourceBatch` es: updates tagged with the offset at which they
happened, and the reader's new **offset upper** (every update at an offset
below it has been delivered). Reclocking (:mod:`.reclock`) maps offsets to
tidegate timestamps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..frontier import Row

__all__ = [
    "SINK_COMMIT_INTERVAL_MS",
    "SINK_PROGRESS_INTERVAL_MS",
    "IcebergSink",
    "LoadGenerator",
    "PostgresSource",
    "SimulatedSink",
    "SimulatedSource",
    "SourceBatch",
    "SourceConnection",
    "SourceUpdate",
    "StorageSinkConnection",
    "redact_passwords",
    "sink_pacing_problem",
]

SourceUpdate: TypeAlias = tuple[Row, int, int]
"""``(row, offset, diff)``: one upstream change, at the offset where it happened."""


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """Upstream changes and the reader's new offset upper.

    Every update's offset is below ``upper``; after this batch, every update at
    an offset below ``upper`` has been delivered (a batch may carry no updates
    and only advance the upper). Uppers of successive batches never decrease.
    ``size_bytes`` is what the reader received for it on the wire (for
    statistics only; 0 if unknown).
    """

    updates: tuple[SourceUpdate, ...]
    upper: int
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class LoadGenerator:
    """Materialize's ``LOAD GENERATOR``: deterministic, seeded data at one offset per tick.

    ``kind`` is ``"counter"`` (one row ``(n,)`` per tick; with
    ``max_cardinality`` the oldest rows are retracted past that many) or
    ``"auction"`` (auctions and bids). ``tick_ms`` is the wall-clock (or
    virtual) time between ticks; ``seed`` decides every generated value, so
    the same offsets always carry the same updates.
    """

    kind: Literal["counter", "auction"] = "counter"
    tick_ms: int = 1000
    seed: int = 0
    max_cardinality: int | None = None
    rows_per_tick: int = 1


@dataclass(frozen=True, slots=True)
class PostgresSource:
    """One upstream PostgreSQL table, replicated through logical replication (``pgoutput``).

    ``url`` is a libpq connection URL; ``table`` a (schema-qualified) table in
    ``publication``; ``slot`` the replication slot the source owns.
    ``password_secret`` names the secret that holds the password (Materialize's
    ``PASSWORD SECRET name``): the password is never part of the URL, so it is
    never stored with the catalog's printable state or shown.
    """

    url: str
    table: str
    publication: str
    slot: str
    password_secret: str | None = None


@dataclass(frozen=True, slots=True)
class SimulatedSource:
    """The simulator's deterministic upstream log named ``name`` (``tidegate.sim``)."""

    name: str


SourceConnection: TypeAlias = LoadGenerator | PostgresSource | SimulatedSource


@dataclass(frozen=True, slots=True)
class IcebergSink:
    """An Apache Iceberg table written through ``pyiceberg``.

    ``catalog_url`` is a SQL catalog's SQLAlchemy URL (``sqlite:///...`` by
    default), ``warehouse`` where data files go (``file://`` or ``s3://``),
    ``table`` the ``namespace.name`` identifier. ``password_secret`` names the
    secret holding the catalog database's password, if it needs one.

    ``commit_interval_ms`` (``WITH (COMMIT INTERVAL = '...')``, as Materialize
    spells it): the sink commits at most once per interval, every update and
    frontier advance of the interval in one snapshot, and only when there are
    updates. ``progress_interval_ms``: how long the covered upper may stand
    still while the input advances with no updates; then one snapshot with no
    data records the progress (so a restart resumes from near the input's
    upper and the sink's read hold lets the input compact). See
    :data:`SINK_COMMIT_INTERVAL_MS` and :data:`SINK_PROGRESS_INTERVAL_MS`.
    """

    catalog_url: str
    warehouse: str
    table: str
    password_secret: str | None = None
    commit_interval_ms: int = 1_000
    progress_interval_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class SimulatedSink:
    """The simulator's sink target named ``name`` (``tidegate.sim``).

    ``commit_interval_ms`` and ``progress_interval_ms`` pace its commits as
    :class:`IcebergSink`'s do (the simulator uses short ones, so runs see commits).
    """

    name: str
    commit_interval_ms: int = 1_000
    progress_interval_ms: int = 60_000


SINK_COMMIT_INTERVAL_MS = 1_000
"""The default commit interval of a sink (Materialize's floor for ``COMMIT INTERVAL``)."""
SINK_PROGRESS_INTERVAL_MS = 60_000
"""The default longest time a sink leaves its covered upper behind a quiet input."""

StorageSinkConnection: TypeAlias = IcebergSink | SimulatedSink
"""Where a storage sink writes (named apart from the compute protocol's ``SinkConnection``)."""

SinkConnection = StorageSinkConnection
"""Deprecated alias of :data:`StorageSinkConnection` (not exported: the name is compute's)."""


_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]*:)[^@\s/'\"]*@")
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'\"]+)", re.IGNORECASE)


def redact_passwords(text: str) -> str:
    """``text`` with every password a connection URL or conninfo in it carries starred out
    (``scheme://user:***@host``, ``password=***``): for errors and logs, which may quote a
    connection the way a reader used it (with its secret's value put in)."""
    return _KEYWORD_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


def sink_pacing_problem(connection: StorageSinkConnection) -> str | None:
    """What is wrong with a sink's commit and progress intervals (``None``: nothing).

    Both must be ints >= 1 ms (a progress interval below the commit interval
    acts as the commit interval: commits are never closer than that).
    """
    commit, progress = connection.commit_interval_ms, connection.progress_interval_ms
    for name, value in (("commit_interval_ms", commit), ("progress_interval_ms", progress)):
        if type(value) is not int or not 1 <= value <= 2**53:
            return f"{name} must be an int in [1, 2**53] (milliseconds), not {value!r}"
    return None
