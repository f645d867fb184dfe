"""The production Iceberg sink writer in the simulated world: a pyiceberg catalog and FileIO on the simulated disk.

The storage replica's sinks write through the production
:class:`~tidegate.runtime.sinks.IcebergSinkWriter` (pyiceberg's transactions,
manifests, snapshot summaries, expiry), handed a catalog of this module's
instead of a SQL catalog (its ``catalog`` parameter), so that what it does
lands on the simulated disk and the world's faults strike it:

* :class:`SimCatalog` is a pyiceberg ``Catalog`` with the SQL catalog's
  contract: a table is a pointer to its current metadata file, and a commit
  validates pyiceberg's requirements against the pointer read fresh, writes
  the new metadata file, and swaps the pointer with a compare-and-set --
  here of the consensus key :func:`pointer_key` through the process's own
  :class:`~tidegate.sim.storage.ConsensusClient` (so the process's death,
  consensus outages and the ``sink_commit`` crash point, before or after the
  swap, strike it). A lost swap raises ``CommitFailedException``, as the SQL
  catalog's conditional ``UPDATE`` does. Namespaces are consensus keys too.
* :class:`SimFileIO` is pyiceberg's ``PyArrowFileIO`` whose files are blobs of
  the simulated disk (under :data:`BLOB_PREFIX`), reached through the
  process's :class:`~tidegate.sim.storage.BlobClient` (blob outages, the
  ``blob`` crash point); data files, manifests, manifest lists and metadata
  files are really written and read by pyiceberg and pyarrow. Its pyarrow
  filesystem (for scans) reads the same blobs.

Faults of the target itself (:class:`~tidegate.sim.sink_target.SinkFaults`):
a commit fails before the swap (nothing committed) or after it (landed, the
answer lost), both raised as a storage outage (an ``OSError``) out of the
commit; and another writer -- the production writer again, as a second sink
``foreign-writer`` on the same table, through a catalog no fault strikes --
commits an empty snapshot, half the time, between a commit's read of the
pointer and its swap (so the writer's commit loses the race, and its retry
decides on the new state) or before a table's load, and then
expires every snapshot but its own newest (``keep_snapshots`` 1): the sink's
own snapshots leave the table's history, and its covered upper is found in
the table property alone.

Determinism (:func:`pyiceberg_in_simulation`, entered around every run):
pyiceberg's random ids (``uuid4``: snapshot ids, file names, commit ids) come
from a counter hashed per run, its clock (snapshot and metadata timestamps)
is the storage replica's simulated wall clock, Avro's sync markers are fixed,
its thread pool runs every task inline (no thread, so the order of storage
calls is the kernel's), and its process-wide manifest cache is cleared (file
names repeat between runs).

The checkers read targets back through :class:`IcebergReader`, over the disk's record (no fault, deleted files
included) and pyiceberg's own parsers and scan, never the writer's code.

Bit rot does not strike these blobs: Iceberg's metadata and manifests carry
no checksum, so a flipped digit reads as other data by the format's design.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io as _io
import itertools
import json
import sys
import types
import uuid as _uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, MetastoreCatalog, PropertiesUpdateSummary
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties
from pyiceberg.view import View

from tidegate.runtime.sinks.iceberg import (
    CATALOG_NAME,
    DIFF_COLUMN,
    LOWER_PROPERTY,
    SINK_PROPERTY,
    TIME_COLUMN,
    UPPER_PROPERTY,
    IcebergSinkWriter,
)
from tidegate.spec.errors import TidegateError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.shard import VersionedData
from tidegate.spec.storage.connections import IcebergSink, SimulatedSink, StorageSinkConnection

from .sink_target import FOREIGN_WRITER, SinkCommit, SinkFaults
from .storage import SimDisk, StorageOutage

__all__ = [
    "BLOB_PREFIX",
    "KEEP_SNAPSHOTS",
    "POINTER_PREFIX",
    "ForeignWriter",
    "IcebergReader",
    "SimCatalog",
    "SimFileIO",
    "iceberg_sink_factory",
    "pointer_key",
    "pyiceberg_in_simulation",
    "table_identifier",
]

POINTER_PREFIX = "sinks/iceberg/"
"""Consensus keys of the tables' metadata pointers (``sinks/``: the ``sink_commit`` crash point)."""
NAMESPACE_PREFIX = "sinks/iceberg-namespaces/"
BLOB_PREFIX = "iceberg/"
"""Blob keys of the warehouse's files (``iceberg/<bucket>/<path>``)."""
WAREHOUSE = "s3://tidegate-sim"
NAMESPACE = "sim"
CATALOG_URL = "sqlite:///tidegate-sim-catalog.db"
"""The connection's catalog URL: checked by the writer, never opened (the catalog is injected)."""
KEEP_SNAPSHOTS = 4
"""The sinks' ``keep_snapshots`` in the simulator: expiry runs every few commits."""


def table_identifier(target: str) -> str:
    """The Iceberg table of sink target ``target``."""
    return f"{NAMESPACE}.{target}"


def pointer_key(target: str) -> str:
    """The consensus key holding target ``target``'s metadata pointer."""
    return POINTER_PREFIX + table_identifier(target)


def _blob_key(location: str) -> str:
    return BLOB_PREFIX + location.split("://", 1)[-1].lstrip("/")


# -- the storage a catalog and a FileIO reach ---------------------------------------------------


class Blobs(Protocol):
    """Blob access (a process's :class:`~tidegate.sim.storage.BlobClient`, or the disk itself)."""

    def get(self, key: str) -> bytes | None: ...

    def set(self, key: str, value: bytes) -> None: ...

    def delete(self, key: str) -> int | None: ...


class Pointers(Protocol):
    """Consensus access (a process's :class:`~tidegate.sim.storage.ConsensusClient`, or the disk)."""

    def head(self, key: str) -> VersionedData | None: ...

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool: ...


@dataclass
class DiskAccess:
    """The disk reached by no process (no fault strikes): another writer's, and the checkers'
    (who also read deleted files)."""

    disk: SimDisk

    def get(self, key: str) -> bytes | None:
        return self.disk.blob(key)

    def set(self, key: str, value: bytes) -> None:
        self.disk.set_blob(key, value)

    def delete(self, key: str) -> int | None:
        return self.disk.delete_blob(key)

    def head(self, key: str) -> VersionedData | None:
        return self.disk.consensus.head(key)

    def compare_and_set(self, key: str, expected: int | None, new: VersionedData) -> bool:
        return self.disk.compare_and_set(key, expected, new)


# -- FileIO -------------------------------------------------------------------------------------


class _Out:
    """An output stream: the bytes become the blob when it is closed."""

    def __init__(self, file: _SimFile) -> None:
        self.file = file
        self.buffer = _io.BytesIO()
        self.closed = False

    def write(self, b: bytes) -> int:
        return self.buffer.write(b)

    def tell(self) -> int:
        return self.buffer.tell()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        data = self.buffer.getvalue()
        self.file.io.blobs.set(self.file.key, data)
        self.file.size = len(data)

    def __enter__(self) -> _Out:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SimFile(InputFile, OutputFile):
    def __init__(self, io: SimFileIO, location: str) -> None:
        super().__init__(location)
        self.io = io
        self.key = _blob_key(location)
        self.size: int | None = None

    def _bytes(self) -> bytes:
        data = self.io.blobs.get(self.key)
        if data is None:
            raise FileNotFoundError(f"Cannot open file, does not exist: {self.location}")
        return data

    def __len__(self) -> int:
        return self.size if self.size is not None else len(self._bytes())

    def exists(self) -> bool:
        return self.io.blobs.get(self.key) is not None

    def open(self, seekable: bool = True) -> InputStream:
        return _io.BytesIO(self._bytes())

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"Cannot create file, already exists: {self.location}")
        return _Out(self)

    def to_input_file(self) -> InputFile:
        return self


class _Handler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The blobs as a pyarrow filesystem (what pyiceberg's scan reads data files through)."""

    def __init__(self, blobs: Blobs) -> None:
        self.blobs = blobs

    def _get(self, path: str) -> bytes:
        data = self.blobs.get(BLOB_PREFIX + path)
        if data is None:
            raise FileNotFoundError(path)
        return data

    def get_type_name(self) -> str:
        return "tidegate-sim"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return self is other

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        out = []
        for p in paths:
            data = self.blobs.get(BLOB_PREFIX + p)
            out.append(
                pafs.FileInfo(p, pafs.FileType.NotFound)
                if data is None
                else pafs.FileInfo(p, pafs.FileType.File, size=len(data))
            )
        return out

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._get(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._get(path))

    def delete_file(self, path: str) -> None:
        if self.blobs.delete(BLOB_PREFIX + path) is None:
            raise FileNotFoundError(path)

    def _unsupported(self, *args: Any) -> Any:
        raise NotImplementedError("the simulated warehouse reads and deletes files only here")

    get_file_info_selector = create_dir = delete_dir = delete_dir_contents = _unsupported
    delete_root_dir_contents = move = copy_file = open_output_stream = _unsupported
    open_append_stream = _unsupported


class SimFileIO(PyArrowFileIO):
    """pyiceberg's ``PyArrowFileIO`` over the simulated disk's blobs (see the module docstring)."""

    def __init__(self, blobs: Blobs) -> None:
        super().__init__({})
        self.blobs = blobs

    def new_input(self, location: str) -> _SimFile:  # type: ignore[override]
        return _SimFile(self, location)

    def new_output(self, location: str) -> _SimFile:  # type: ignore[override]
        return _SimFile(self, location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        where = location if isinstance(location, str) else location.location
        if self.blobs.delete(_blob_key(where)) is None:
            raise FileNotFoundError(f"Cannot delete file, does not exist: {where}")

    def _initialize_fs(self, scheme: str, netloc: str | None = None) -> pafs.FileSystem:
        return pafs.PyFileSystem(_Handler(self.blobs))


# -- the catalog --------------------------------------------------------------------------------


def _encode_pointer(location: str, previous: str | None) -> bytes:
    body = {"metadata_location": location, "previous_metadata_location": previous}
    return json.dumps(body, sort_keys=True).encode()


def _decode_pointer(data: bytes) -> str:
    return str(json.loads(data)["metadata_location"])


class SimCatalog(MetastoreCatalog):
    """A pyiceberg catalog whose pointer swap is a compare-and-set on the simulated disk.

    ``after_read(identifier)`` runs in a commit between its read of the
    pointer and its swap, and before a table's load (another writer may
    commit then);
    ``strikes(identifier)`` says whether this commit fails (``"before"`` or
    ``"after"`` the swap) or not (``None``); ``lost(identifier)`` is told of a
    lost swap.
    """

    def __init__(
        self,
        pointers: Pointers,
        file_io: SimFileIO,
        *,
        after_read: Callable[[str], None] = lambda ident: None,
        strikes: Callable[[str], str | None] = lambda ident: None,
        lost: Callable[[str], None] = lambda ident: None,
    ) -> None:
        super().__init__(CATALOG_NAME, warehouse=WAREHOUSE)
        self.pointers = pointers
        self.file_io = file_io
        self.after_read = after_read
        self.strikes = strikes
        self.lost = lost

    @staticmethod
    def _ident(identifier: str | Identifier) -> str:
        return ".".join(Catalog.identifier_to_tuple(identifier))

    def _load_file_io(
        self, properties: Properties = EMPTY_DICT, location: str | None = None
    ) -> FileIO:
        return self.file_io

    def _head(self, ident: str) -> VersionedData | None:
        return self.pointers.head(POINTER_PREFIX + ident)

    def _table(self, ident: str, head: VersionedData) -> Table:
        location = _decode_pointer(head.data)
        metadata = FromInputFile.table_metadata(self.file_io.new_input(location))
        return Table(
            Catalog.identifier_to_tuple(ident), metadata, location, self.file_io, catalog=self
        )

    # -- tables
    def load_table(self, identifier: str | Identifier) -> Table:
        ident = self._ident(identifier)
        self.after_read(ident)  # another writer may have committed just before this read
        head = self._head(ident)
        if head is None:
            raise NoSuchTableError(f"Table does not exist: {ident}")
        return self._table(ident, head)

    def create_table(
        self,
        identifier: str | Identifier,
        schema: IcebergSchema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> Table:
        iceberg_schema = self._convert_schema_if_needed(schema)
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        name = Catalog.table_name_from(identifier)
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        where = self._resolve_table_location(location, namespace, name)
        metadata_location = load_location_provider(
            where, properties
        ).new_table_metadata_file_location()
        metadata = new_table_metadata(
            location=where,
            schema=iceberg_schema,
            partition_spec=partition_spec,
            sort_order=sort_order,
            properties=properties,
        )
        self._write_metadata(metadata, self.file_io, metadata_location)
        ident = self._ident(identifier)
        new = VersionedData(0, _encode_pointer(metadata_location, None))
        if not self.pointers.compare_and_set(POINTER_PREFIX + ident, None, new):
            raise TableAlreadyExistsError(f"Table {ident} already exists")
        return self.load_table(identifier)

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """The SQL catalog's commit: requirements checked against the pointer read now, the new
        metadata file written, the pointer swapped if it still is what was read."""
        ident = self._ident(table.name())
        head = self._head(ident)
        self.after_read(ident)
        current = None if head is None else self._table(ident, head)
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            return CommitTableResponse(  # type: ignore[call-arg]  # by field name, as the SQL catalog
                metadata=current.metadata, metadata_location=current.metadata_location
            )
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        fault = self.strikes(ident)
        if fault == "before":
            raise StorageOutage(f"simulated catalog failure: the commit to {ident} was not applied")
        previous = None if current is None else current.metadata_location
        new = VersionedData(
            0 if head is None else head.seqno + 1,
            _encode_pointer(staged.metadata_location, previous),
        )
        if not self.pointers.compare_and_set(
            POINTER_PREFIX + ident, None if head is None else head.seqno, new
        ):
            self.lost(ident)
            if head is None:
                raise TableAlreadyExistsError(f"Table {ident} already exists")
            raise CommitFailedException(f"Table has been updated by another process: {ident}")
        if fault == "after":
            raise StorageOutage(f"simulated catalog failure: no answer to the commit to {ident}")
        return CommitTableResponse(  # type: ignore[call-arg]  # by field name, as the SQL catalog
            metadata=staged.metadata, metadata_location=staged.metadata_location
        )

    def table_exists(self, identifier: str | Identifier) -> bool:
        return self.pointers.head(POINTER_PREFIX + self._ident(identifier)) is not None

    # -- namespaces
    def create_namespace(
        self, namespace: str | Identifier, properties: Properties = EMPTY_DICT
    ) -> None:
        name = self._ident(namespace)
        body = json.dumps({"exists": "true", **properties}, sort_keys=True).encode()
        if not self.pointers.compare_and_set(NAMESPACE_PREFIX + name, None, VersionedData(0, body)):
            raise NamespaceAlreadyExistsError(f"Namespace {name} already exists")

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        name = self._ident(namespace)
        head = self.pointers.head(NAMESPACE_PREFIX + name)
        if head is None:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name}")
        return {str(k): str(v) for k, v in json.loads(head.data).items()}

    # -- what the writer never asks of a catalog
    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("not part of the simulated catalog")

    def register_table(
        self, identifier: str | Identifier, metadata_location: str, overwrite: bool = False
    ) -> Table:
        return self._unsupported()  # type: ignore[no-any-return]

    def drop_table(self, identifier: str | Identifier) -> None:
        self._unsupported()

    def rename_table(
        self, from_identifier: str | Identifier, to_identifier: str | Identifier
    ) -> Table:
        return self._unsupported()  # type: ignore[no-any-return]

    def drop_namespace(self, namespace: str | Identifier) -> None:
        self._unsupported()

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        return self._unsupported()  # type: ignore[no-any-return]

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        return self._unsupported()  # type: ignore[no-any-return]

    def update_namespace_properties(
        self,
        namespace: str | Identifier,
        removals: set[str] | None = None,
        updates: Properties = EMPTY_DICT,
    ) -> PropertiesUpdateSummary:
        return self._unsupported()  # type: ignore[no-any-return]

    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        return []

    def view_exists(self, identifier: str | Identifier) -> bool:
        return False

    def load_view(self, identifier: str | Identifier) -> View:
        return self._unsupported()  # type: ignore[no-any-return]

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> View:
        return self._unsupported()  # type: ignore[no-any-return]

    def drop_view(self, identifier: str | Identifier) -> None:
        self._unsupported()


# -- the storage replica's writers ---------------------------------------------------------------


def _connection(target: str, paced: SimulatedSink | None = None) -> IcebergSink:
    return IcebergSink(
        CATALOG_URL,
        WAREHOUSE,
        table_identifier(target),
        commit_interval_ms=1_000 if paced is None else paced.commit_interval_ms,
        progress_interval_ms=60_000 if paced is None else paced.progress_interval_ms,
    )


@dataclass
class ForeignWriter:
    """Another sink writing the same tables (:data:`FOREIGN_WRITER`), when the fault is open."""

    disk: SimDisk
    faults: SinkFaults
    count: Callable[[str], None]
    schemas: dict[str, Schema] = field(default_factory=dict)
    busy: bool = False

    def after_read(self, ident: str) -> None:
        """Maybe commit to table ``ident`` now (a sink's commit read its pointer and has yet to
        swap it, or a sink's writer is about to load the table)."""
        schema = self.schemas.get(ident)
        if self.busy or schema is None or not self.faults.foreign:
            return
        if self.faults.choices.integer(0, 1):
            return
        self.busy = True
        try:
            access = DiskAccess(self.disk)
            writer = IcebergSinkWriter(
                _connection(ident.split(".", 1)[1]),
                schema,
                sink_id=FOREIGN_WRITER,
                keep_snapshots=1,
                catalog=lambda: SimCatalog(access, SimFileIO(access)),
            )
            lower = writer.covered_upper() or 0
            writer.commit([], lower, lower + 1)
            self.faults.foreign_commits += 1
            self.count("iceberg_foreign_commit")
        except TidegateError:
            self.count("iceberg_foreign_commit_failed")
        finally:
            self.busy = False


def iceberg_sink_factory(
    pointers: Pointers,
    blobs: Blobs,
    foreign: ForeignWriter,
    count: Callable[[str], None],
) -> Callable[[GlobalId, StorageSinkConnection, Schema], IcebergSinkWriter | None]:
    """The storage service's ``sink_factory``: the production writer for every
    :class:`SimulatedSink`, over :class:`SimCatalog` and :class:`SimFileIO` on ``pointers`` and
    ``blobs`` (one process's clients)."""
    faults = foreign.faults

    def strikes(ident: str) -> str | None:
        fault = faults.strikes(ident.split(".", 1)[1])
        if fault is not None:
            count(f"sink_commit_failed_{fault}")
        return fault

    def make(id: GlobalId, connection: StorageSinkConnection, schema: Schema) -> Any:
        if not isinstance(connection, SimulatedSink):
            return None
        iceberg = _connection(connection.name, connection)
        foreign.schemas[iceberg.table] = schema
        file_io = SimFileIO(blobs)
        return IcebergSinkWriter(
            iceberg,
            schema,
            sink_id=str(id),
            keep_snapshots=KEEP_SNAPSHOTS,
            catalog=lambda: SimCatalog(
                pointers,
                file_io,
                after_read=foreign.after_read,
                strikes=strikes,
                lost=lambda ident: count("sink_commit_lost_race"),
            ),
        )

    return make


# -- determinism --------------------------------------------------------------------------------


class _Inline(Executor):
    """pyiceberg's thread pool, run inline: no thread, storage calls in the kernel's order."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:
            future.set_exception(e)
        return future


class _Shim(types.ModuleType):
    """A module whose attributes are another's, some replaced."""

    def __init__(self, base: types.ModuleType, **replaced: Any) -> None:
        super().__init__(base.__name__)
        self._base = base
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def _is_uuid(module: Any) -> bool:
    """``uuid``, or a shim of it (an enclosing run's)."""
    return module is _uuid or (isinstance(module, _Shim) and module._base is _uuid)


@contextlib.contextmanager
def pyiceberg_in_simulation(clock_ms: Callable[[], int], seed: int) -> Iterator[None]:
    """pyiceberg made deterministic for one run (see the module docstring)."""
    import os
    import time

    import pyiceberg.avro.file
    import pyiceberg.catalog
    import pyiceberg.io.pyarrow
    import pyiceberg.partitioning
    import pyiceberg.table
    import pyiceberg.table.locations
    import pyiceberg.table.metadata
    import pyiceberg.table.snapshots
    import pyiceberg.table.update
    import pyiceberg.table.update.snapshot
    from pyiceberg.manifest import clear_manifest_cache
    from pyiceberg.utils.concurrent import ExecutorFactory

    counter = itertools.count()

    def uuid4() -> _uuid.UUID:
        digest = hashlib.sha256(f"{seed}/{next(counter)}".encode()).digest()
        return _uuid.UUID(bytes=digest[:16], version=4)

    class SimDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> SimDatetime:
            at = _dt.datetime.fromtimestamp(clock_ms() / 1000, tz or _dt.UTC)
            return cls.fromisoformat(at.isoformat())

    def wall_time() -> float:
        return clock_ms() / 1000

    uuid_shim = _Shim(_uuid, uuid4=uuid4)
    patches: list[tuple[Any, str, Any]] = [
        (m, "uuid", uuid_shim)
        for name, m in sorted(sys.modules.items())
        if name.startswith("pyiceberg") and _is_uuid(getattr(m, "uuid", None))
    ]
    patches += [
        (pyiceberg.table.update, "datetime", SimDatetime),
        (pyiceberg.table.metadata, "datetime", _Shim(_dt, datetime=SimDatetime)),
        (pyiceberg.table.snapshots, "time", _Shim(time, time=wall_time)),
        (pyiceberg.avro.file, "os", _Shim(os, urandom=lambda n: bytes(n))),
        (ExecutorFactory, "_instance", _Inline()),
        (ExecutorFactory, "_instance_pid", os.getpid()),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    clear_manifest_cache()
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        clear_manifest_cache()


# -- what the checkers read ---------------------------------------------------------------------


@dataclass
class IcebergReader:
    """Reads the sink targets' tables back from the disk's record, with pyiceberg's parsers.

    Keeps what it parsed (files never change once written), so a check reads only what is new.
    """

    disk: SimDisk
    _metadata: dict[str, TableMetadata] = field(default_factory=dict)
    _added: dict[int, tuple[tuple[Any, int, int], ...]] = field(default_factory=dict)
    _commits: dict[str, tuple[int, list[SinkCommit], int | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        access = DiskAccess(self.disk)
        self.io = SimFileIO(access)
        self.catalog = SimCatalog(access, self.io)

    def metadata(self, location: str) -> TableMetadata:
        m = self._metadata.get(location)
        if m is None:
            m = self._metadata[location] = FromInputFile.table_metadata(self.io.new_input(location))
        return m

    def _rows(self, path: str) -> list[tuple[Any, int, int]]:
        data = self.disk.blob(_blob_key(path))
        assert data is not None, f"data file {path} is not on the disk"
        table = pq.read_table(pa.BufferReader(data))
        names = [n for n in table.column_names if n not in (TIME_COLUMN, DIFF_COLUMN)]
        columns = [table.column(n).to_pylist() for n in names]
        times = table.column(TIME_COLUMN).to_pylist()
        diffs = table.column(DIFF_COLUMN).to_pylist()
        rows = zip(*columns, strict=True) if columns else iter([()] * len(times))
        return [(tuple(r), int(t), int(d)) for r, t, d in zip(rows, times, diffs, strict=True)]

    def added(self, metadata: TableMetadata, snapshot_id: int) -> tuple[tuple[Any, int, int], ...]:
        """The updates in the data files snapshot ``snapshot_id`` added."""
        got = self._added.get(snapshot_id)
        if got is not None:
            return got
        snapshot = metadata.snapshot_by_id(snapshot_id)
        assert snapshot is not None
        out: list[tuple[Any, int, int]] = []
        for manifest in snapshot.manifests(self.io):
            if manifest.added_snapshot_id != snapshot_id:
                continue  # written by an earlier commit: adds nothing of this one
            for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True):
                if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot_id:
                    out.extend(self._rows(entry.data_file.file_path))
        self._added[snapshot_id] = got = tuple(out)
        return got

    def commits(self, target: str) -> list[SinkCommit]:
        """Every commit that became the table's current snapshot, in order, with its updates."""
        key = pointer_key(target)
        versions = self.disk.versions.get(key, ())
        seen, commits, current = self._commits.get(key, (0, [], None))
        for v in versions[seen:]:
            metadata = self.metadata(_decode_pointer(v.data))
            snapshot = metadata.current_snapshot()
            if snapshot is None or snapshot.snapshot_id == current:
                continue
            current = snapshot.snapshot_id
            summary = snapshot.summary
            sink = None if summary is None else summary.get(SINK_PROPERTY)
            if summary is None or sink is None:
                commits.append(SinkCommit("", 0, 0, ()))  # not a sink's snapshot
                continue
            commits.append(
                SinkCommit(
                    str(sink),
                    int(str(summary[LOWER_PROPERTY])),
                    int(str(summary[UPPER_PROPERTY])),
                    self.added(metadata, snapshot.snapshot_id),
                )
            )
        self._commits[key] = (len(versions), commits, current)
        return commits

    def scan(self, target: str) -> list[tuple[Any, int, int]] | None:
        """Every ``(row, time, diff)`` the table holds now, by pyiceberg's scan (``None``: no
        table)."""
        try:
            table = self.catalog.load_table(table_identifier(target))
        except NoSuchTableError:
            return None
        arrow = table.scan().to_arrow()
        names = [n for n in arrow.column_names if n not in (TIME_COLUMN, DIFF_COLUMN)]
        columns = [arrow.column(n).to_pylist() for n in names]
        times = arrow.column(TIME_COLUMN).to_pylist()
        diffs = arrow.column(DIFF_COLUMN).to_pylist()
        rows = zip(*columns, strict=True) if columns else iter([()] * len(times))
        return [(tuple(r), int(t), int(d)) for r, t, d in zip(rows, times, diffs, strict=True)]
