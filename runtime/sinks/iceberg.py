"""Commit a collection's changelog to an Apache Iceberg table, exactly once across restarts.

:class:`IcebergSinkWriter` writes through ``pyiceberg`` to a table of a SQL
catalog (``IcebergSink.catalog_url``, SQLite by default) whose files live in
``IcebergSink.warehouse`` (``file://`` or ``s3://``).

**What the table holds.** The collection's changelog, as Materialize's
append-style sinks write it: one Iceberg row per update, the collection's
columns followed by ``_tidegate_time`` and ``_tidegate_diff`` (``long``).

**Progress.** Every commit is one Iceberg snapshot of the ``main`` branch whose
summary records

* ``tidegate.sink``: the sink id (the export's ``GlobalId``; two sinks writing
  one table are told apart by it),
* ``tidegate.lower`` / ``tidegate.upper``: the tidegate frontier range
  ``[lower, upper)`` the commit covers; every update at a time below ``upper``
  is in the table.

The **covered upper** of a sink is ``tidegate.upper`` of the newest snapshot in
``main``'s ancestry with its sink id (``None``: none yet). The same commit sets
the table property ``tidegate.sink.<id>.upper``, which answers when none of the
sink's snapshots is left (expired: the writer expires old snapshots, and other
sinks' commits may push a quiet sink's last snapshot out of the kept history).
A table rolled back to an older snapshot of the sink makes it re-send what the
rollback removed; a rollback past all of the sink's snapshots is not noticed
(the property still answers).

**Exactly once.** ``commit(updates, lower, upper)`` reads the table fresh and
commits only if the covered upper is ``lower`` (or ``None``: the first commit
starts the sink's history), else raises :class:`SinkConflict`. The append
carries pyiceberg's requirement that ``main`` still points at the snapshot it
read, and the SQL catalog swaps the metadata location with a compare-and-swap,
so between two writers that read the same table state only one commits; the
other gets ``CommitFailedException``, re-reads, and (the covered upper having
moved) raises :class:`SinkConflict`. A commit that lost the race to a writer of
*another* sink id is tried again on the new state. pyiceberg would retry a lost
append on top of the new head by itself (right for plain appends, wrong for a
conditional commit): the writer turns that off for its own commits
(``commit.retry.num-retries`` = 0 in the metadata it commits from, not written
to the table). A restarted sink resumes from :meth:`IcebergSinkWriter.open`;
a zombie's commit fails.

**Quiet collections.** A commit with no updates is still a snapshot (an append
of no data files: one manifest list and one metadata file): the cheapest atomic
way to move the covered upper, and it keeps the snapshot history the one
record of progress. The storage replica makes such a commit only when the
input advanced with no updates for the sink's ``progress_interval_ms``
(60 s by default), so a quiet table changes about once a minute.

**Bounded history.** pyiceberg's cost per commit grows with the number of
snapshots in the table's metadata, so the writer stages each commit from
``main``'s head alone (:func:`_stage_from_head`) and, once the table holds more
than ``2 * keep_snapshots`` snapshots, expires those older than the newest
``keep_snapshots`` of ``main`` (metadata only; no file is deleted). Tables it
creates merge manifests (``commit.manifest-merge.enabled``), so the manifest
list does not grow by one per commit.

**Concurrent readers.** An outside reader reads the catalog's pointer to the
current metadata file, then opens that file, then the manifest list of its
current snapshot. The writer deletes a metadata file only once
:data:`METADATA_VERSIONS_KEPT` newer ones exist (minutes of commits at the
sink's commit interval; :meth:`open` brings older tables to this setting),
and expiring snapshots deletes no file, so a reader's pointer never dangles
while it reads. How often the writer commits is the storage replica's
choice (the sink's commit and progress intervals), not this class's.

Data files written by a commit that did not land (lost race, crash) and the
manifest lists of expired snapshots are not referenced by the table; readers
never see them (Iceberg's orphan-file clean-up removes them; pyiceberg 0.12 has
none).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from tidegate.spec.errors import (
    ArityMismatch,
    SinkConflict,
    SinkDescriptionInvalid,
    SinkFrontierInvalid,
    SinkOutcomeUnknown,
    SinkTableIncompatible,
    SinkUnreachable,
    SinkUpdateInvalid,
    TypeMismatch,
)
from tidegate.spec.frontier import Row
from tidegate.spec.plan.schema import INT64_MAX, INT64_MIN, Schema, check_row, row_checker
from tidegate.spec.storage.connections import IcebergSink, sink_pacing_problem

from . import _iceberg_schema as _s

__all__ = [
    "CATALOG_NAME",
    "DIFF_COLUMN",
    "LOWER_PROPERTY",
    "METADATA_VERSIONS_KEPT",
    "SINK_PROPERTY",
    "TIME_COLUMN",
    "UPPER_PROPERTY",
    "IcebergSinkWriter",
    "committed_property",
    "read_changelog",
]

SINK_PROPERTY = "tidegate.sink"
"""Snapshot summary property: the id of the sink that made the snapshot."""
LOWER_PROPERTY = "tidegate.lower"
"""Snapshot summary property: the lower of the frontier range the snapshot covers."""
UPPER_PROPERTY = "tidegate.upper"
"""Snapshot summary property: the upper of the frontier range the snapshot covers."""
TIME_COLUMN = _s.TIME_COLUMN
DIFF_COLUMN = _s.DIFF_COLUMN
CATALOG_NAME = "tidegate"
"""The SQL catalog's name (its rows in ``iceberg_tables`` carry it)."""


def committed_property(sink_id: str) -> str:
    """Table property: the upper of the sink's last commit (set in the same commit as its snapshot)."""
    return f"tidegate.sink.{sink_id}.upper"


_RETRY_PROPERTY = "commit.retry.num-retries"
_RACES = 16
"""Lost commit races (to writers of other sink ids) before a commit gives up."""
METADATA_VERSIONS_KEPT = 300
"""Metadata files a table keeps besides its current one (``write.metadata.previous-versions-max``).

An outside reader reads the catalog's pointer, then opens the metadata file
it names; the file must still be there. Commits come at most once per commit
interval (1 s by default; one more per expiry, every ``keep_snapshots``
commits), so 300 kept versions give a reader at least about 5 minutes.
"""
_TABLE_PROPERTIES = {
    # every commit writes a metadata file; keep enough that a reader holding an older pointer
    # still finds its file (METADATA_VERSIONS_KEPT), not all of them
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": str(METADATA_VERSIONS_KEPT),
    # one manifest per commit would grow every commit's manifest list: merge them (as Java does)
    "commit.manifest-merge.enabled": "true",
}
_WAREHOUSE_SCHEMES = ("file", "s3", "s3a")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class IcebergSinkWriter:
    """Writes one sink's changelog to ``connection.table``; synchronous, one caller at a time.

    ``sink_id`` names the sink in the table's snapshots (the storage replica
    passes the export's ``GlobalId``). ``io_properties`` go to pyiceberg's
    FileIO (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``,
    ``s3.region``, ...). Building a writer checks the description and does no
    IO: :meth:`open` connects.

    ``catalog``, if given, makes the catalog the writer connects to instead of
    the SQL catalog of ``connection.catalog_url`` (whose URL is then only
    checked, never opened): the simulator's catalog over its simulated disk
    (``tidegate.sim.iceberg``). Everything else is the same code.
    """

    def __init__(
        self,
        connection: IcebergSink,
        schema: Schema,
        *,
        sink_id: str = "default",
        io_properties: Mapping[str, str] | None = None,
        keep_snapshots: int = 32,
        catalog: Callable[[], Catalog] | None = None,
    ) -> None:
        _check_connection(connection)
        _s.check_names(schema)
        if not sink_id:
            raise SinkDescriptionInvalid("the sink id must not be empty")
        if type(keep_snapshots) is not int or keep_snapshots < 1:
            raise SinkDescriptionInvalid(
                f"keep_snapshots must be at least 1, not {keep_snapshots!r}"
            )
        self.keep_snapshots = keep_snapshots
        self.connection = connection
        self.schema = schema
        self.sink_id = sink_id
        self._io_properties = dict(io_properties or {})
        self._iceberg_schema = _s.iceberg_schema(schema)
        self._shape = _s.shape(self._iceberg_schema)
        self._arrow_schema = _s.arrow_schema(schema)
        self._row_ok = row_checker(schema)
        self._catalog: Catalog | None = None
        self._make_catalog = catalog

    # -- lifecycle ---------------------------------------------------------

    def open(self) -> int | None:
        """Create the namespace and table if missing; return the upper the table covers for this sink.

        ``None``: the sink has committed nothing to this table. Raises
        :class:`SinkTableIncompatible` if the table exists with another schema,
        :class:`SinkUnreachable` if the catalog or warehouse fails.
        """
        ident = self.connection.table
        with _unreachable(ident, "open"):
            catalog = self._connect()
            catalog.create_namespace_if_not_exists(Catalog.namespace_from(ident))
            table = catalog.create_table_if_not_exists(
                ident, self._iceberg_schema, properties=_TABLE_PROPERTIES
            )
        self._check_table(table)
        self._update_properties(table)
        return _covered_upper(table.metadata, self.sink_id, ident)

    def close(self) -> None:
        """Release the catalog's connections; :meth:`open` or :meth:`commit` reconnects."""
        if isinstance(self._catalog, SqlCatalog):
            self._catalog.engine.dispose()
        self._catalog = None

    def __enter__(self) -> IcebergSinkWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reads -------------------------------------------------------------

    def covered_upper(self) -> int | None:
        """The upper the table covers for this sink now, read fresh from the catalog."""
        table = self._load()
        return _covered_upper(table.metadata, self.sink_id, self.connection.table)

    def read_back(self) -> list[tuple[Row, int, int]]:
        """Every ``(row, time, diff)`` in the table (of every sink writing it), in time order."""
        table = self._load()
        with _unreachable(self.connection.table, "scan"):
            return _s.from_arrow(table.scan().to_arrow())

    # -- commits -----------------------------------------------------------

    def commit(self, updates: Sequence[tuple[Row, int, int]], lower: int, upper: int) -> None:
        """Append ``updates`` (every time in ``[lower, upper)``) as one snapshot recording ``upper``.

        Checks the arguments first (:class:`SinkFrontierInvalid`,
        :class:`SinkUpdateInvalid`); then refuses with :class:`SinkConflict`
        unless the table covers ``lower`` for this sink (or nothing yet).
        :class:`SinkOutcomeUnknown`: the commit may or may not have landed;
        :meth:`open` tells.
        """
        _check_frontiers(lower, upper)
        self._check_updates(updates, lower, upper)
        data = _s.to_arrow(updates, self.schema, self._arrow_schema)
        summary = {
            SINK_PROPERTY: self.sink_id,
            LOWER_PROPERTY: str(lower),
            UPPER_PROPERTY: str(upper),
        }
        ident = self.connection.table
        for _ in range(_RACES):
            table = self._load()
            self._check_table(table)
            covered = _covered_upper(table.metadata, self.sink_id, ident)
            if covered is not None and covered != lower:
                raise SinkConflict(ident, lower, covered)
            history = len(table.metadata.snapshots)
            _stage_from_head(table)
            with _unreachable(ident, "write data files"):
                tx = table.transaction()
                tx.set_properties({committed_property(self.sink_id): str(upper)})
                tx.append(data, snapshot_properties=summary)
            try:
                tx.commit_transaction()
            except CommitFailedException:
                continue  # another writer committed first: decide on the new state
            except Exception as e:
                raise SinkOutcomeUnknown(
                    f"table {ident!r}: the commit of [{lower}, {upper}) failed and may or may "
                    f"not have landed ({type(e).__name__}: {e}); open() tells"
                ) from e
            if history + 1 > 2 * self.keep_snapshots:
                self._expire()
            return
        raise SinkUnreachable(
            f"table {ident!r}: lost {_RACES} commit races in a row to writers of other sinks; "
            f"nothing committed"
        )

    # -- internals ---------------------------------------------------------

    def _update_properties(self, table: Table) -> None:
        """Bring a table made by an older writer to today's retention settings (best effort).

        A table property commit makes no snapshot; a lost race leaves the old
        settings until the next open.
        """
        stale = {k: v for k, v in _TABLE_PROPERTIES.items() if table.properties.get(k) != v}
        if not stale:
            return
        with (
            contextlib.suppress(CommitFailedException, SinkUnreachable),
            _unreachable(self.connection.table, "update table properties"),
        ):
            tx = table.transaction()
            tx.set_properties(stale)
            tx.commit_transaction()

    def _expire(self) -> None:
        """Expire the snapshots older than the newest ``keep_snapshots`` of ``main`` (best effort).

        Runs after a commit landed, so it never raises: a failure leaves the
        history longer until the next try.
        """
        try:
            with _unreachable(self.connection.table, "expire snapshots"):
                table = self._connect().load_table(self.connection.table)
                ancestry = _ancestry(table.metadata)
                if len(ancestry) <= self.keep_snapshots:
                    return
                cutoff = _EPOCH + dt.timedelta(
                    milliseconds=ancestry[self.keep_snapshots - 1].timestamp_ms
                )
                table.maintenance.expire_snapshots().older_than(cutoff).commit()
        except (SinkUnreachable, CommitFailedException, NoSuchTableError, ValueError):
            pass

    def _connect(self) -> Catalog:
        if self._catalog is None:
            make = self._make_catalog
            self._catalog = (
                _catalog(self.connection, self._io_properties) if make is None else make()
            )
        return self._catalog

    def _load(self) -> Table:
        ident = self.connection.table
        try:
            with _unreachable(ident, "load"):
                return self._connect().load_table(ident)
        except NoSuchTableError:
            raise SinkTableIncompatible(
                ident, "the table does not exist (open() creates it)"
            ) from None

    def _check_table(self, table: Table) -> None:
        actual = _s.shape(table.schema())
        if actual != self._shape:
            raise SinkTableIncompatible(
                self.connection.table,
                f"its schema is {_describe(actual)}, this sink writes {_describe(self._shape)}",
            )

    def _check_updates(
        self, updates: Sequence[tuple[Row, int, int]], lower: int, upper: int
    ) -> None:
        row_ok = self._row_ok
        for i, u in enumerate(updates):
            try:
                row, time, diff = u
            except (TypeError, ValueError):
                raise SinkUpdateInvalid(i, u, "not a (row, time, diff) triple") from None
            if not row_ok(row):
                try:
                    check_row(row, self.schema)
                except (ArityMismatch, TypeMismatch) as e:
                    raise SinkUpdateInvalid(i, u, str(e)) from None
            if type(time) is not int or not lower <= time < upper:
                raise SinkUpdateInvalid(i, u, f"time {time!r} is not in [{lower}, {upper})")
            if type(diff) is not int or not INT64_MIN <= diff <= INT64_MAX:
                raise SinkUpdateInvalid(i, u, f"diff {diff!r} is not a 64-bit integer")


def read_changelog(
    connection: IcebergSink, *, io_properties: Mapping[str, str] | None = None
) -> list[tuple[Row, int, int]]:
    """Every ``(row, time, diff)`` in the sink's table, in time order (for tests, the simulator, bench)."""
    _check_connection(connection)
    ident = connection.table
    catalog: Catalog | None = None
    try:
        with _unreachable(ident, "scan"):
            catalog = _catalog(connection, dict(io_properties or {}))
            return _s.from_arrow(catalog.load_table(ident).scan().to_arrow())
    except NoSuchTableError:
        raise SinkTableIncompatible(ident, "the table does not exist") from None
    finally:
        if isinstance(catalog, SqlCatalog):
            catalog.engine.dispose()


def _catalog(connection: IcebergSink, io_properties: dict[str, str]) -> Catalog:
    return SqlCatalog(
        CATALOG_NAME,
        **{**io_properties, "uri": connection.catalog_url, "warehouse": connection.warehouse},
    )


def _check_connection(connection: IcebergSink) -> None:
    problem = sink_pacing_problem(connection)
    if problem is not None:
        raise SinkDescriptionInvalid(problem)
    try:
        url = make_url(connection.catalog_url)
    except ArgumentError:
        raise SinkDescriptionInvalid(
            f"catalog_url {connection.catalog_url!r} is not a SQLAlchemy URL"
        ) from None
    try:  # loads the dialect and its driver module, nothing more: no connection yet
        url.get_dialect().import_dbapi()
    except (NoSuchModuleError, ImportError) as e:
        raise SinkDescriptionInvalid(
            f"catalog_url {connection.catalog_url!r}: no SQL catalog of kind "
            f"{url.drivername!r} here ({e}); use sqlite:///PATH or postgresql://..."
        ) from None
    scheme = urlparse(connection.warehouse).scheme
    if scheme not in _WAREHOUSE_SCHEMES:
        raise SinkDescriptionInvalid(
            f"warehouse {connection.warehouse!r}: expected a file:// or s3:// location"
        )
    parts = connection.table.split(".")
    if len(parts) < 2 or not all(parts):
        raise SinkDescriptionInvalid(
            f"table {connection.table!r}: expected a 'namespace.name' identifier"
        )


def _check_frontiers(lower: Any, upper: Any) -> None:
    for name, value in (("lower", lower), ("upper", upper)):
        if type(value) is not int or not 0 <= value <= INT64_MAX:
            raise SinkFrontierInvalid(lower, upper, f"{name} is not a timestamp in [0, 2**63)")
    if not lower < upper:
        raise SinkFrontierInvalid(lower, upper, "upper must be beyond lower")


def _ancestry(metadata: TableMetadata) -> list[Any]:
    """``main``'s snapshots, newest first, back to the oldest one not expired."""
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    out = []
    snapshot = metadata.current_snapshot()
    while snapshot is not None:
        out.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = by_id.get(parent) if parent is not None else None
    return out


def _covered_upper(metadata: TableMetadata, sink_id: str, ident: str) -> int | None:
    """``tidegate.upper`` of the newest snapshot of ``sink_id`` in ``main``'s ancestry.

    If none of the sink's snapshots is left (expired), the table property
    :func:`committed_property`, set by the same commits, tells.
    """
    snapshot = metadata.current_snapshot()
    by_id: dict[int, Any] | None = None
    while snapshot is not None:
        summary = snapshot.summary
        if summary is not None and summary[SINK_PROPERTY] == sink_id:
            return _upper(ident, f"snapshot {snapshot.snapshot_id}", summary[UPPER_PROPERTY])
        parent = snapshot.parent_snapshot_id
        if parent is None:
            break
        if by_id is None:
            by_id = {s.snapshot_id: s for s in metadata.snapshots}
        snapshot = by_id.get(parent)
    committed = metadata.properties.get(committed_property(sink_id))
    if committed is None:
        return None
    return _upper(ident, "the table's properties", committed)


def _upper(ident: str, where: str, text: Any) -> int:
    try:
        return int(str(text))
    except ValueError:
        raise SinkTableIncompatible(
            ident, f"{where} records the covered upper {text!r}, not an integer"
        ) from None


def _stage_from_head(table: Table) -> None:
    """Let the transaction start from ``main``'s head alone, and raise a lost race.

    An append needs only the parent snapshot, but pyiceberg deep-copies the
    whole metadata (every snapshot) each time it looks at a transaction's
    state, a dozen times per append: the writer hands it a copy with the head
    snapshot only. pyiceberg would also retry a lost race by re-applying the
    append on the new head (right for plain appends, wrong for a conditional
    commit): the copy sets ``commit.retry.num-retries`` to 0. The catalog
    applies only the transaction's updates (the new snapshot, the ``main``
    ref, the sink's property) to the table's real, fresh metadata, behind the
    requirement that ``main`` is still that head; nothing of the copy is
    written.
    """
    meta = table.metadata
    head = meta.current_snapshot()
    table.metadata = meta.model_copy(
        update={
            "properties": {**meta.properties, _RETRY_PROPERTY: "0"},
            "snapshots": [head] if head is not None else [],
            "snapshot_log": [],
            "refs": {name: ref for name, ref in meta.refs.items() if name == MAIN_BRANCH},
        }
    )


def _describe(shape: list[tuple[str, Any, bool]]) -> str:
    return "(" + ", ".join(f"{n}: {t}{'' if r else '?'}" for n, t, r in shape) + ")"


@contextlib.contextmanager
def _unreachable(ident: str, what: str) -> Iterator[None]:
    """Catalog (SQLAlchemy) and storage (OS, Arrow IO) failures as :class:`SinkUnreachable`."""
    try:
        yield
    except (SQLAlchemyError, OSError) as e:
        raise SinkUnreachable(f"table {ident!r}: {what} failed: {type(e).__name__}: {e}") from e
