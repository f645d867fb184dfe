"""The executor contract: how a replica runs dataflows (see the package docstring).

Times are ``int`` (totally ordered); executors may reject other timestamp
kinds with :class:`UnsupportedTimestamp`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..protocol.responses import PeekResult
from ..protocol.types import DataflowDescription, RowSetFinishing

__all__ = ["DataflowHandle", "ErrorUpdate", "Executor", "ExportBatch"]

DataflowHandle: TypeAlias = int
"""Names one installed dataflow (assigned by :meth:`Executor.install`)."""

ErrorUpdate: TypeAlias = tuple[str, int, int]
"""``(message, time, diff)``: a change to an export's error collection."""


@dataclass(frozen=True, slots=True)
class ExportBatch:
    """What changed in export ``id`` for times in ``[lower, upper)``.

    ``updates`` and ``errors`` are consolidated. Successive batches of one
    export are contiguous (each ``lower`` is the previous ``upper``); the first
    starts at the dataflow's ``as_of``.
    """

    id: GlobalId
    lower: Antichain
    upper: Antichain
    updates: tuple[Update, ...] = ()
    errors: tuple[ErrorUpdate, ...] = ()


class Executor(Protocol):
    """Runs dataflows incrementally. Every method validates first: a call that raises changes nothing.

    Life of a dataflow: :meth:`install` it at its ``as_of``; :meth:`feed` each
    source import its updates and new upper (updates before the ``as_of`` are
    read as of it); :meth:`step` processes every time all inputs have completed
    and reports each export's changes and new upper; index imports are fed by
    the executor itself from the exporting dataflow. :meth:`allow_compaction`
    lets an index forget history before a frontier (the empty frontier drops
    the export; a dataflow goes once all its exports are gone). :meth:`peek`
    reads an index at a time in ``[since, upper)``.
    """

    def install(self, dataflow: DataflowDescription) -> DataflowHandle:
        """Validate and install ``dataflow`` (its ``as_of`` must be set)."""
        ...

    def feed(
        self,
        handle: DataflowHandle,
        input_id: GlobalId,
        updates: Iterable[Update],
        upper: Antichain,
    ) -> None:
        """Give source import ``input_id`` of dataflow ``handle`` new updates and its new upper."""
        ...

    def step(self) -> list[ExportBatch]:
        """Process all completed times; one batch per export whose contents or upper changed.

        Everything fed before the call is finished when it returns: a step with
        no ``feed``, ``install``, ``allow_compaction`` or ``drop`` since the last
        one returns ``[]`` (the replica core skips such steps).
        """
        ...

    def allow_compaction(self, export_id: GlobalId, frontier: Antichain) -> None:
        """Times before ``frontier`` are no longer read from ``export_id``; ``[]`` drops it."""
        ...

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        """The index's contents at ``time``, finished; restricted to rows whose key is in ``key_lookup``."""
        ...

    def drop(self, handle: DataflowHandle) -> None:
        """Remove a dataflow and all its exports."""
        ...

    def since(self, export_id: GlobalId) -> Antichain:
        """The export's compaction frontier."""
        ...

    def upper(self, export_id: GlobalId) -> Antichain:
        """The export's write frontier: contents final for times before it."""
        ...

    def source_inputs(self, handle: DataflowHandle) -> tuple[GlobalId, ...]:
        """The source imports of ``handle`` that the caller must :meth:`feed`."""
        ...

    def state_records(self) -> dict[DataflowHandle, int]:
        """An estimate of the state each live dataflow holds, in records (operators' state,
        pending input, indexes kept in this process): what a memory limit weighs."""
        ...

    def fail(self, handle: DataflowHandle, message: str) -> None:
        """Give up on dataflow ``handle`` (it exceeded a resource limit) and free its state.

        From the first time it has not processed on, each export holds only the error
        ``message`` (an index's rows are retracted there): reads at or after that time
        answer it; earlier times keep their contents; uppers keep advancing with the
        inputs; later input is not kept. A finished or failed dataflow is left alone.
        """
        ...
