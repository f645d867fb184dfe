"""Simulated upstreams: deterministic change logs that ``SimulatedSource(name)`` ingestions read.

An :class:`UpstreamLog` stands for an upstream table behind its replication
slot (PostgreSQL's ``pgoutput``): every change is written at an **offset**
(a transaction's changes share its offset; offsets grow with gaps, as LSNs
do) and never changes afterwards. The world writes to it on virtual time
(the plan's ``upstream`` actions, drawn from the run's upstream stream), so
replaying a plan replays the upstream too.

Each source (by its ``GlobalId``) has a **slot** on the log: what the source
acknowledged is forgotten there, and a reader asked to start below it
starts at it -- PostgreSQL starts a slot at its ``confirmed_flush_lsn``
whatever LSN the client asks for. So an ingestion that acknowledges data
before it is durable loses it after a crash, as it would in production; the
checkers (:mod:`.storage_checks`) watch every acknowledgement.

A :class:`SimSourceReader` is the storage service's
:class:`~tidegate.replica.storage.sources.SourceReader` for a simulated
source (made by :meth:`Upstreams.source_factory`). It delivers what the log
holds, in batches split at offsets the upstream stream chooses (empty
batches that only move the upper included), and suffers the log's faults:
an unreachable upstream (``start`` and ``poll`` raise the typed
:class:`~tidegate.spec.errors.UpstreamUnreachable`: the source goes
``stalled`` and is retried), slow delivery (only changes written at
least ``lag_ms`` ago are visible), a connection that breaks right after a
delivery (before the source has written it), a schema change (from its
offset on, readers raise :class:`~tidegate.spec.errors.UpstreamSchemaChanged`
and never deliver a change of the new shape) and lost slots (a source whose
slot was lost raises :class:`~tidegate.spec.errors.ReplicationSlotMissing`
rather than resume past changes it never read).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tidegate.spec.errors import (
    ReplicationSlotMissing,
    SourceConfigurationInvalid,
    UpstreamSchemaChanged,
    UpstreamUnreachable,
)
from tidegate.spec.frontier import Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage.connections import (
    SimulatedSource,
    SourceBatch,
    SourceConnection,
    SourceUpdate,
)

from .choices import ChoiceSource, chance

__all__ = ["SimSourceReader", "UpstreamLog", "Upstreams"]


@dataclass
class UpstreamLog:
    """One upstream's changes by offset, its slots and its faults (see the module docstring)."""

    name: str
    schema: Schema
    offsets: list[int] = field(default_factory=list)
    """The offsets that carry changes, ascending."""
    written_ms: list[int] = field(default_factory=list)
    """When each of them was written (virtual ms)."""
    changes: list[tuple[SourceUpdate, ...]] = field(default_factory=list)
    upper: int = 0
    """Every offset below it is written (the next change goes at or after it)."""
    present: list[Row] = field(default_factory=list)
    """The rows upstream holds now (what a deletion may take)."""
    slots: dict[GlobalId, int] = field(default_factory=dict)
    """What each source acknowledged (forgotten below it)."""
    unreachable_until_ms: int = 0
    lag_ms: int = 0
    """Slow delivery: a change becomes visible this long after it was written."""
    fail_after_delivery_ms: int | None = None
    """Armed: the connection breaks right after the next delivery of changes, and the upstream
    refuses connections this long."""
    schema_changed_at: int | None = None
    """The offset from which the table has another schema (readers stop there, typed)."""
    lost_slots: set[GlobalId] = field(default_factory=set)
    """Sources whose slot was lost (dropped, or invalidated)."""
    readers: set[GlobalId] = field(default_factory=set)
    """Sources that started a reader (and so have a slot)."""

    @property
    def broken_for(self) -> set[GlobalId] | None:
        """The sources that can never catch up with this upstream (``None``: every source, after a
        schema change)."""
        return None if self.schema_changed_at is not None else self.lost_slots

    def write(self, changes: Sequence[tuple[Row, int]], gap: int, now_ms: int) -> int:
        """Write ``changes`` (``(row, diff)``) as one transaction ``gap`` offsets on; its offset."""
        offset = self.upper + max(0, gap)
        updates = tuple((row, offset, diff) for row, diff in changes)
        if updates:
            self.offsets.append(offset)
            self.written_ms.append(now_ms)
            self.changes.append(updates)
        self.upper = offset + 1
        for row, diff in changes:
            if diff > 0:
                self.present.extend([row] * diff)
            else:
                for _ in range(-diff):
                    if row in self.present:
                        self.present.remove(row)
        return offset

    def between(self, lower: int, upper: int) -> list[SourceUpdate]:
        """Every change at an offset in ``[lower, upper)``, in offset order."""
        i = bisect.bisect_left(self.offsets, lower)
        j = bisect.bisect_left(self.offsets, upper)
        return [u for updates in self.changes[i:j] for u in updates]

    def visible_upper(self, now_ms: int) -> int:
        """The upper a reader sees now: every offset below it was written ``lag_ms`` ago or more."""
        if not self.lag_ms:
            return self.upper
        cutoff = now_ms - self.lag_ms
        for k in range(len(self.written_ms) - 1, -1, -1):  # the newest few are the lagging ones
            if self.written_ms[k] <= cutoff:
                later = k + 1
                return self.offsets[later] if later < len(self.offsets) else self.upper
        return self.offsets[0] if self.offsets else self.upper

    def reachable(self, now_ms: int) -> bool:
        return now_ms >= self.unreachable_until_ms

    def acknowledged(self, source: GlobalId) -> int:
        """What ``source``'s slot forgot (it acknowledged everything below)."""
        return self.slots.get(source, 0)

    def acknowledge(self, source: GlobalId, offset: int) -> None:
        self.slots[source] = max(self.slots.get(source, 0), offset)


class SimSourceReader:
    """A storage service's reader of one :class:`UpstreamLog` for source ``source`` (see the
    module docstring). ``on_ack(source, offset)`` is told every acknowledgement first."""

    def __init__(
        self,
        log: UpstreamLog,
        source: GlobalId,
        choices: ChoiceSource,
        now_ms: Callable[[], int],
        on_ack: Callable[[GlobalId, int], None],
        count: Callable[[str], None],
    ) -> None:
        self.log = log
        self.source = source
        self.choices = choices
        self.now_ms = now_ms
        self.on_ack = on_ack
        self.count = count
        self.position: int | None = None
        self.acked = 0
        self.closed = False

    def _check(self, what: str) -> None:
        if self.closed:
            raise UpstreamUnreachable(f"sim:{self.log.name}", f"{what} on a closed reader")
        if not self.log.reachable(self.now_ms()):
            self.count("upstream_unreachable_met")
            if self.position is not None and self.position > self.acked:
                # It delivered changes that are not durable yet (or not acknowledged): the
                # source must keep them, or read them again, exactly once.
                self.count("reader_failed_with_unacked_delivery")
            raise UpstreamUnreachable(f"sim:{self.log.name}", f"{what}: connection refused")
        if self.source in self.log.lost_slots:
            self.count("slot_lost_met")
            raise ReplicationSlotMissing(f"sim_{self.log.name}_{self.source}", self.acked)

    def _schema_changed(self) -> UpstreamSchemaChanged:
        self.count("upstream_schema_change_met")
        return UpstreamSchemaChanged(
            f"sim:{self.log.name}",
            (f"a column changed type at offset {self.log.schema_changed_at}",),
        )

    def start(self, resume_offset: int) -> None:
        self._check("connect")
        self.log.readers.add(self.source)
        changed = self.log.schema_changed_at
        if changed is not None and resume_offset >= changed:
            raise self._schema_changed()
        slot = self.log.acknowledged(self.source)
        if resume_offset < slot:
            self.count("upstream_resumed_below_slot")  # it starts at the slot, as PostgreSQL does
        self.position = max(resume_offset, slot)
        self.acked = slot

    def poll(self, timeout_s: float) -> SourceBatch | None:
        self._check("read")
        assert self.position is not None, "poll before start"
        visible = self.log.visible_upper(self.now_ms())
        changed = self.log.schema_changed_at
        if changed is not None:
            if self.position >= changed:
                raise self._schema_changed()  # nothing of the new shape is ever delivered
            visible = min(visible, changed)
        if visible <= self.position:
            return None
        cut = visible
        if chance(self.choices, 400):  # a batch split anywhere (an offset boundary)
            cut = self.choices.integer(self.position + 1, visible)
            self.count("upstream_batch_split")
        updates = tuple(self.log.between(self.position, cut))
        self.position = cut
        log = self.log
        if updates and log.fail_after_delivery_ms is not None:
            # The connection breaks right after this delivery: the next call finds it gone, while
            # the source still holds these changes unwritten.
            log.unreachable_until_ms = max(
                log.unreachable_until_ms, self.now_ms() + log.fail_after_delivery_ms
            )
            log.fail_after_delivery_ms = None
            self.count("upstream_fails_after_delivery")
        return SourceBatch(updates, cut, size_bytes=16 * len(updates))

    def ack(self, offset: int) -> None:
        self.on_ack(self.source, offset)
        self.log.acknowledge(self.source, offset)
        self.acked = max(self.acked, offset)

    def close(self) -> None:
        self.closed = True


class Upstreams:
    """The world's upstream logs by name, and the storage service's ``source_factory`` for them."""

    def __init__(
        self,
        choices: ChoiceSource,
        now_ms: Callable[[], int],
        on_ack: Callable[[GlobalId, int], None],
        count: Callable[[str], None],
    ) -> None:
        self.logs: dict[str, UpstreamLog] = {}
        self.choices = choices
        self.now_ms = now_ms
        self.on_ack = on_ack
        self.count = count

    def add(self, name: str, schema: Schema) -> UpstreamLog:
        return self.logs.setdefault(name, UpstreamLog(name, schema))

    def source_factory(
        self, id: GlobalId, connection: SourceConnection, schema: Schema
    ) -> SimSourceReader | None:
        """The reader of a :class:`SimulatedSource` (``None`` for any other connection)."""
        if not isinstance(connection, SimulatedSource):
            return None
        log = self.logs.get(connection.name)
        if log is None:
            raise SourceConfigurationInvalid(
                "simulated source", connection.name, "the simulated world has no such upstream"
            )
        if log.schema != schema:
            raise SourceConfigurationInvalid(
                "simulated source", connection.name, f"the upstream's rows are {log.schema}"
            )
        return SimSourceReader(log, id, self.choices, self.now_ms, self.on_ack, self.count)

    def heal(self) -> None:
        """Every upstream reachable and prompt again (the quiet phase)."""
        for log in self.logs.values():
            log.unreachable_until_ms = 0
            log.lag_ms = 0
            log.fail_after_delivery_ms = None  # a schema change and lost slots last for good
