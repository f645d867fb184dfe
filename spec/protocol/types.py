"""Payload types carried by compute commands: instance config, parameters, peeks, dataflows."""

from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from ..frontier import Antichain, Row, Time
from ..ids import GlobalId

__all__ = [
    "BuildDesc",
    "ColumnOrder",
    "ComputeParameters",
    "CopyToConnection",
    "DataflowDescription",
    "IndexExport",
    "IndexImport",
    "InstanceConfig",
    "LoggingConfig",
    "MaterializedViewConnection",
    "PeekDescription",
    "PeekTargetKind",
    "RowSetFinishing",
    "SinkConnection",
    "SinkExport",
    "SourceImport",
    "SubscribeConnection",
]

ConfigValue: TypeAlias = bool | int | float | str


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    """A replica's introspection logging: whether it runs, how often it ticks, which log indexes exist.

    ``index_logs`` pairs a log variant name (e.g. ``"peek_durations"``) with the
    GlobalId of the index that exposes it.
    """

    interval_ms: int = 1000
    enable_logging: bool = False
    log_logging: bool = False
    index_logs: tuple[tuple[str, GlobalId], ...] = ()


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """The payload of ``CreateInstance``."""

    logging: LoggingConfig = field(default_factory=LoggingConfig)
    expiration_offset_ms: int | None = None
    peek_stash_location: str | None = None

    def compatible_with(self, other: InstanceConfig) -> bool:
        """Whether a replica running ``self`` may accept ``other`` on reconnect.

        Logging and stash location must be equal; ``other``'s expiration offset
        must be no larger than ours (``None`` is the top value).
        """
        if self.logging != other.logging or self.peek_stash_location != other.peek_stash_location:
            return False
        if other.expiration_offset_ms is None:
            return self.expiration_offset_ms is None
        return (
            self.expiration_offset_ms is None
            or other.expiration_offset_ms <= self.expiration_offset_ms
        )


@dataclass(frozen=True, slots=True)
class ComputeParameters:
    """The payload of ``UpdateConfiguration``: every field optional, ``None`` meaning "unchanged".

    ``dyncfg_updates`` is a sequence of ``(name, value)`` pairs; later pairs
    override earlier ones with the same name.
    """

    max_result_size: int | None = None
    workload_class: str | None = None
    dyncfg_updates: tuple[tuple[str, ConfigValue], ...] = ()

    def update(self, other: ComputeParameters) -> ComputeParameters:
        """``self`` overridden by the fields set in ``other``."""
        merged = dict(self.dyncfg_updates)
        merged.update(other.dyncfg_updates)
        return ComputeParameters(
            max_result_size=other.max_result_size
            if other.max_result_size is not None
            else self.max_result_size,
            workload_class=other.workload_class
            if other.workload_class is not None
            else self.workload_class,
            dyncfg_updates=tuple(sorted(merged.items())),
        )

    def all_unset(self) -> bool:
        return self == ComputeParameters()


@dataclass(frozen=True, slots=True)
class ColumnOrder:
    """One ORDER BY key: a column index, direction, and where NULLs go."""

    column: int
    desc: bool = False
    nulls_last: bool = True


@dataclass(frozen=True, slots=True)
class RowSetFinishing:
    """What is done to a peek's rows before they are returned: ORDER BY, OFFSET, LIMIT, projection."""

    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    project: tuple[int, ...] | None = None


PeekTargetKind: TypeAlias = Literal["index", "persist"]


@dataclass(frozen=True, slots=True)
class PeekDescription:
    """The payload of a ``Peek``: read collection ``id`` at ``timestamp``.

    ``target`` is ``"index"`` (read an arrangement the replica maintains) or
    ``"persist"`` (read the storage collection directly).
    ``literal_constraints`` restricts the read to rows whose index key equals
    one of the given key rows (never an empty tuple; ``None`` = full scan).
    """

    uuid: _uuid.UUID
    id: GlobalId
    timestamp: Time
    finishing: RowSetFinishing = field(default_factory=RowSetFinishing)
    target: PeekTargetKind = "index"
    literal_constraints: tuple[Row, ...] | None = None


@dataclass(frozen=True, slots=True)
class SourceImport:
    """A storage collection read by a dataflow; ``upper`` is its last known write frontier."""

    id: GlobalId
    upper: Antichain = field(default_factory=lambda: Antichain([0]))
    monotonic: bool = False
    with_snapshot: bool = True


@dataclass(frozen=True, slots=True)
class IndexImport:
    """An index (a compute collection exported by another dataflow) read by a dataflow."""

    id: GlobalId
    on_id: GlobalId
    key: tuple[int, ...] = ()
    monotonic: bool = False


@dataclass(frozen=True, slots=True)
class BuildDesc:
    """One object the dataflow builds: ``id`` is computed by ``plan``.

    ``plan`` is a :mod:`tidegate.spec.plan` plan (typed loosely here so this
    module does not depend on the plan IR).
    """

    id: GlobalId
    plan: Any


@dataclass(frozen=True, slots=True)
class IndexExport:
    """An arrangement of object ``on_id`` by ``key`` columns, exported as collection ``id``."""

    id: GlobalId
    on_id: GlobalId
    key: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SubscribeConnection:
    """A subscribe sink: updates stream back to the controller as ``SubscribeResponse`` batches."""


@dataclass(frozen=True, slots=True)
class MaterializedViewConnection:
    """A materialized-view sink: output is written into the storage collection named by the sink id."""


@dataclass(frozen=True, slots=True)
class CopyToConnection:
    """A copy-to sink (Materialize's ``CopyToS3Oneshot``): write-only and one-shot.

    The replica writes the contents of the sink's input at the dataflow's
    as_of, once, as Parquet files under the blob URL ``url`` (``file://`` or
    ``s3://``), and answers with one ``CopyToResponse`` (rows written, or an
    error). Updates after the as_of are never written.
    """

    url: str


SinkConnection: TypeAlias = SubscribeConnection | MaterializedViewConnection | CopyToConnection


@dataclass(frozen=True, slots=True)
class SinkExport:
    """A sink exported as ``id``, reading object ``from_id``."""

    id: GlobalId
    from_id: GlobalId
    connection: SinkConnection
    with_snapshot: bool = True
    up_to: Antichain = field(default_factory=Antichain.empty)


@dataclass(frozen=True, slots=True)
class DataflowDescription:
    """One dataflow: what it imports, what it builds, what it exports, from which time.

    ``as_of`` must be set before the dataflow is sent; ``[]`` means "never
    runs". Updates at times at or beyond ``until`` are suppressed.
    """

    debug_name: str
    source_imports: tuple[SourceImport, ...] = ()
    index_imports: tuple[IndexImport, ...] = ()
    objects_to_build: tuple[BuildDesc, ...] = ()
    index_exports: tuple[IndexExport, ...] = ()
    sink_exports: tuple[SinkExport, ...] = ()
    as_of: Antichain | None = None
    until: Antichain = field(default_factory=Antichain.empty)

    @property
    def export_ids(self) -> tuple[GlobalId, ...]:
        """Index exports, then sink exports."""
        return (*(e.id for e in self.index_exports), *(s.id for s in self.sink_exports))

    @property
    def import_ids(self) -> tuple[GlobalId, ...]:
        """Source imports, then index imports."""
        return (*(s.id for s in self.source_imports), *(i.id for i in self.index_imports))

    @property
    def subscribe_ids(self) -> tuple[GlobalId, ...]:
        return tuple(
            s.id for s in self.sink_exports if isinstance(s.connection, SubscribeConnection)
        )

    @property
    def copy_to_ids(self) -> tuple[GlobalId, ...]:
        """Copy-to sinks (one-shot writes of the as_of's contents to a blob URL)."""
        return tuple(s.id for s in self.sink_exports if isinstance(s.connection, CopyToConnection))

    @property
    def persist_sink_ids(self) -> tuple[GlobalId, ...]:
        """Sinks that write to storage (materialized views)."""
        return tuple(
            s.id for s in self.sink_exports if isinstance(s.connection, MaterializedViewConnection)
        )

    def with_as_of(self, as_of: Antichain) -> DataflowDescription:
        return replace(self, as_of=as_of)

    def with_source_uppers(self, uppers: dict[GlobalId, Antichain]) -> DataflowDescription:
        """A copy whose source imports carry the given (current) write frontiers."""
        imports = tuple(
            replace(s, upper=uppers[s.id]) if s.id in uppers else s for s in self.source_imports
        )
        return replace(self, source_imports=imports)

    def compatible_with(self, other: DataflowDescription) -> bool:
        """Whether a replica may keep ``self`` running in place of ``other`` (reconciliation).

        Structure must be equal once source-import uppers are blanked, and
        ``self.as_of <= other.as_of``.
        """
        blank = {s.id: Antichain.empty() for s in self.source_imports}
        blank.update({s.id: Antichain.empty() for s in other.source_imports})
        a = replace(self.with_source_uppers(blank), as_of=None, debug_name="")
        b = replace(other.with_source_uppers(blank), as_of=None, debug_name="")
        if a != b:
            return False
        if self.as_of is None or other.as_of is None:
            return False
        return self.as_of <= other.as_of
