"""What the storage controller is asked to create: collection and export descriptions.

A collection is a durable, time-varying multiset bound to one shard. Its
:data:`DataSource` says who writes it and which other collections it depends
on: a dependency's since is held back by the dependent's since (reference
section 2.6), e.g. an ingestion holds its remap collection and a materialized
view's output holds the storage collections it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from ..frontier import Antichain
from ..ids import GlobalId, InstanceId
from ..plan.schema import Schema
from .connections import SourceConnection, StorageSinkConnection

__all__ = [
    "CollectionDescription",
    "ConfigValue",
    "CreateExportToken",
    "DataSource",
    "ExportDescription",
    "Ingestion",
    "Introspection",
    "MaterializedView",
    "Other",
    "Progress",
    "ShardFrontiers",
    "StorageParameters",
    "Table",
    "Webhook",
]


@dataclass(frozen=True, slots=True)
class Table:
    """A table: written by the controller through :meth:`StorageController.append`."""


@dataclass(frozen=True, slots=True)
class Webhook:
    """A webhook source: appended to by the controller as requests arrive."""


@dataclass(frozen=True, slots=True)
class Introspection:
    """A controller-managed introspection collection of the given kind."""

    kind: str


@dataclass(frozen=True, slots=True)
class Progress:
    """The remap (progress) collection of an ingestion."""


@dataclass(frozen=True, slots=True)
class Ingestion:
    """An external source ingested by a storage instance.

    ``remap_collection`` (if any) is a dependency: the ingestion holds its
    since back, and the controller also holds it at ``step_back`` of the
    ingestion's upper, so a restarted ingestion can read the binding it
    resumes from (:mod:`.reclock`). ``connection`` (where to read) is opaque
    to the controller; ``schema`` types the rows the ingestion writes. The
    storage replica runs an ingestion only if it has all three.
    """

    instance: InstanceId
    remap_collection: GlobalId | None = None
    connection: SourceConnection | None = None
    schema: Schema | None = None


@dataclass(frozen=True, slots=True)
class MaterializedView:
    """The output of a materialized view, written by compute; it depends on the storage collections it reads."""

    inputs: tuple[GlobalId, ...] = ()


@dataclass(frozen=True, slots=True)
class Other:
    """Any other collection written outside the storage controller."""


DataSource: TypeAlias = (
    Table | Webhook | Introspection | Progress | Ingestion | MaterializedView | Other
)


@dataclass(frozen=True, slots=True)
class CollectionDescription:
    """The creation request of a collection.

    ``since`` (optional) is joined with the shard's since at creation;
    ``status_collection`` names an existing collection that receives status
    updates; ``schema`` is opaque.
    """

    data_source: DataSource = field(default_factory=Other)
    since: Antichain | None = None
    status_collection: GlobalId | None = None
    schema: tuple[str, ...] = ()

    def dependencies(self) -> tuple[GlobalId, ...]:
        """The collections whose since this collection holds back, sorted, without repeats."""
        src = self.data_source
        if isinstance(src, Ingestion):
            deps: tuple[GlobalId, ...] = (
                () if src.remap_collection is None else (src.remap_collection,)
            )
        elif isinstance(src, MaterializedView):
            deps = src.inputs
        else:
            deps = ()
        return tuple(sorted(set(deps)))

    @property
    def instance(self) -> InstanceId | None:
        """The storage instance that runs this collection's ingestion, if any."""
        return self.data_source.instance if isinstance(self.data_source, Ingestion) else None


@dataclass(frozen=True, slots=True)
class ExportDescription:
    """A sink: reads collection ``from_id`` on storage instance ``instance`` from ``as_of`` on.

    ``connection`` says where it writes and ``schema`` types the rows of
    ``from_id``; the storage replica runs a sink only if it has both.
    """

    from_id: GlobalId
    instance: InstanceId
    as_of: Antichain = field(default_factory=lambda: Antichain.bottom(0))
    connection: StorageSinkConnection | None = None
    schema: Schema | None = None


@dataclass(frozen=True, slots=True)
class CreateExportToken:
    """Proof of :meth:`StorageController.prepare_export`: a hold on ``from_id`` at ``acquired_since``.

    The hold passes to the export when :meth:`StorageController.create_exports`
    consumes the token, or is released by
    :meth:`StorageController.cancel_prepare_export`. ``serial`` tells tokens apart.
    """

    id: GlobalId
    from_id: GlobalId
    acquired_since: Antichain
    serial: int


@dataclass(frozen=True, slots=True)
class ShardFrontiers:
    """A shard's durable ``since`` and ``upper`` as the driver found them in the shard store."""

    since: Antichain
    upper: Antichain


ConfigValue: TypeAlias = bool | int | float | str


@dataclass(frozen=True, slots=True)
class StorageParameters:
    """Storage configuration knobs as sorted ``(name, value)`` pairs; :meth:`update` merges."""

    values: tuple[tuple[str, ConfigValue], ...] = ()

    @classmethod
    def of(cls, **values: ConfigValue) -> StorageParameters:
        return cls(tuple(sorted(values.items())))

    def update(self, other: StorageParameters) -> StorageParameters:
        """``self`` overridden by every value set in ``other``."""
        merged = dict(self.values)
        merged.update(other.values)
        return StorageParameters(tuple(sorted(merged.items())))

    def is_empty(self) -> bool:
        return not self.values
