"""Simulated upstreams: deterministic change logs that ``SimulatedSource(name)`` ingestions read.

An :class:`UpstreamLog` stands for an upstream table behind its replication
slots (PostgreSQL's ``pgoutput``): every change is written at an **offset**
(a transaction's changes share its offset, the end LSN of its commit record;
offsets grow with gaps, as LSNs do, from 1) and never changes afterwards. The
world writes to it on virtual time (the plan's ``upstream`` actions, drawn
from the run's upstream stream), so replaying a plan replays the upstream too.
The checkers (:mod:`.storage_checks`) judge every ingestion against this log
itself, never against a decoding of it.

Each source (by its ``GlobalId``) has a **slot** on the log once its reader
first started: its ``confirmed_flush_lsn`` (:attr:`UpstreamLog.slots`). What
is confirmed is forgotten: a stream starts at the confirmed position whatever
LSN the client asks for, as PostgreSQL's does. So an ingestion that
acknowledges data before it is durable loses it after a crash, as it would in
production; the checkers watch every acknowledgement, as the upstream receives
it (a standby status update's flushed LSN).

A :class:`SimSourceReader` is the storage service's
:class:`~tidegate.replica.storage.sources.SourceReader` for a simulated
source (made by :meth:`Upstreams.source_factory`). It is a driver of the
production reader's protocol core
(:class:`~tidegate.runtime.sources.postgres._core.ReplicationCore`), as
:class:`~tidegate.runtime.sources.postgres.PostgresReader` is: it plays the
upstream's catalog (the table's description, the slot), takes the snapshot
when the core needs one, and feeds the core the bytes of a simulated
walsender (:class:`~.pg_upstream.Walsender`: a real ``pgoutput`` replication
stream, transactions fragmented across reads, relation messages re-sent,
keepalives), sending the core's standby status updates back as bytes. So the
production decoder, transaction assembly, snapshot rewind and LSN/ack logic
run in every ``sources`` seed.

It suffers the log's faults: an unreachable upstream (``start`` raises, and a
stream breaks: the core hands out what was complete, then the typed
:class:`~tidegate.spec.errors.UpstreamUnreachable`; the source goes
``stalled`` and is retried), slow delivery (only changes written at least
``lag_ms`` ago are sent), a connection that breaks right after a delivery
(before the source has written it), a schema change (a column added from its
offset on: the walsender sends the new ``RELATION`` before the first change of
the new shape, and the core raises
:class:`~tidegate.spec.errors.UpstreamSchemaChanged`; a reader starting later
finds the table changed) and lost slots (the server ends the stream; a reader
restarting with durable data finds no slot: the core's
:class:`~tidegate.spec.errors.ReplicationSlotMissing`, rather than resume past
changes it never read).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tidegate.runtime.sources.postgres._catalog import SlotInfo, UpstreamColumn, UpstreamTable
from tidegate.runtime.sources.postgres._core import ReplicationCore, ServerRefused, plan_start
from tidegate.spec.errors import (
    SourceConfigurationInvalid,
    SourceError,
    SourceReaderMisused,
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

from .choices import ChoiceSource
from .pg_upstream import ADDED_COLUMN, PG_TYPES, Walsender, parse_standby_status

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
    upper: int = 1
    """Every offset below it is written (the next change goes at or after it; a commit record
    ends past the WAL's start, so offsets start at 1)."""
    present: list[Row] = field(default_factory=list)
    """The rows upstream holds now (what a deletion may take)."""
    slots: dict[GlobalId, int] = field(default_factory=dict)
    """Each source's slot: its confirmed position (the changes at offsets up to it are
    forgotten)."""
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
    oid: int = 16384
    """The table's OID (names it in ``pgoutput`` messages)."""

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
        """What ``source``'s slot forgot: every offset below this (0: it has no slot)."""
        slot = self.slots.get(source)
        return 0 if slot is None else slot + 1

    def table(self) -> UpstreamTable:
        """The table as PostgreSQL's catalog describes it (before any schema change)."""
        return UpstreamTable(
            self.oid,
            "public",
            self.name,
            tuple(
                UpstreamColumn(
                    c.name,
                    *PG_TYPES[c.type.scalar][:1],
                    -1,
                    PG_TYPES[c.type.scalar][1],
                    not c.type.nullable,
                    c.type.scalar,
                )
                for c in self.schema.columns
            ),
        )

    def snapshot(self, point: int) -> tuple[Counter[Row], int]:
        """The table's rows in a snapshot at ``point`` (every change at an offset up to it), and
        a size for them."""
        rows: Counter[Row] = Counter()
        for row, _, diff in self.between(0, point + 1):
            rows[row] += diff
        return +rows, 16 * sum(rows.values())


class SimSourceReader:
    """A storage service's reader of one :class:`UpstreamLog` for source ``source``: a driver of
    the production protocol core over a simulated walsender (see the module docstring).
    ``on_ack(source, offset)`` is told every acknowledgement the upstream receives, first."""

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
        self.core: ReplicationCore | None = None
        self.walsender: Walsender | None = None
        self.closed = False

    @property
    def slot_name(self) -> str:
        return f"sim_{self.log.name}_{self.source}".lower()

    def _now_s(self) -> float:
        return self.now_ms() / 1000

    def _reachable(self, what: str) -> None:
        if self.closed:
            raise SourceReaderMisused(f"{what} on a closed reader")
        if not self.log.reachable(self.now_ms()):
            self.count("upstream_unreachable_met")
            raise UpstreamUnreachable(f"sim:{self.log.name}", f"{what}: connection refused")

    def start(self, resume_offset: int) -> None:
        if self.core is not None:
            raise SourceReaderMisused("start() on a reader that is started")
        self._reachable("connect")
        log = self.log
        log.readers.add(self.source)
        table = log.table()
        if log.schema_changed_at is not None:  # the catalog describes the table as it is now
            self.count("upstream_schema_change_met")
            raise UpstreamSchemaChanged(
                table.qualified, (f"column {ADDED_COLUMN[0]!r} added (text)",)
            )
        core = ReplicationCore(
            table, slot=self.slot_name, publication="sim", server=f"sim:{log.name}"
        )
        lost = self.source in log.lost_slots
        confirmed = log.slots.get(self.source)
        slot = None
        if confirmed is not None or lost:
            slot = SlotInfo(self.slot_name, "pgoutput", True, True, confirmed, None, lost)
        if lost:
            self.count("slot_lost_met")
        plan = plan_start(self.slot_name, resume_offset, slot)
        now = self.now_ms()
        if plan.kind == "resume":
            self.count("upstream_resumed")
            start = core.resume(resume_offset, plan.confirmed)
        else:
            # CREATE_REPLICATION_SLOT's consistent point: every change written so far is in
            # its snapshot, every later one commits in a record starting at or after it.
            taken = max(log.visible_upper(now) - 1, plan.confirmed)
            rows, size = log.snapshot(taken)
            if plan.kind == "fresh":
                self.count("upstream_snapshot")
                log.slots[self.source] = taken
                log.lost_slots.discard(self.source)
                start = core.fresh_snapshot(resume_offset, taken, rows, size)
            else:  # the slot exists: its snapshot again, rewound from a later one
                self.count("upstream_snapshot_rewound")
                start = core.rewound_snapshot(resume_offset, plan.confirmed, taken, rows, size)
        # START_REPLICATION: the stream starts at the slot's confirmed position, if later.
        position = max(start, log.slots[self.source])
        self.walsender = Walsender(log, log.oid, position, self.choices, self.count)
        core.started(start, self._now_s())
        self.core = core

    def poll(self, timeout_s: float) -> SourceBatch | None:
        core = self.core
        if core is None or self.closed:
            raise SourceReaderMisused("poll() on a reader that is not started")
        if core.error is None:
            core.tick(self._now_s())
            try:
                self._send_status()
            except SourceError as e:
                core.fail(e)
        while True:
            batch = core.deliverable()
            if batch is not None:
                return self._delivered(batch)
            if core.error is not None:
                raise core.error
            self._read()
            if not core.has_news():
                return None

    def _read(self) -> None:
        """What the socket has now, into the core (or the stream's end, as the core's error)."""
        core, walsender, log = self.core, self.walsender, self.log
        assert core is not None and walsender is not None
        now = self.now_ms()
        if not log.reachable(now):
            self.count("upstream_unreachable_met")
            if core.reported > log.acknowledged(self.source):
                # It delivered changes that are not durable yet (or not acknowledged): the
                # source must keep them, or read them again, exactly once.
                self.count("reader_failed_with_unacked_delivery")
            core.fail(UpstreamUnreachable(f"sim:{log.name}", "the connection broke"))
            return
        if self.source in log.lost_slots:  # the slot was dropped: its walsender is terminated
            self.count("slot_lost_met")
            refused = ServerRefused("57P01", "terminating connection due to administrator command")
            core.fail(core.refusal(refused))
            return
        for frame in walsender.read(now):
            if not core.wants_frames():
                walsender.queue.appendleft(frame)  # left on the socket for the next read
                continue
            core.receive(frame, now / 1000)
        try:
            self._send_status()
        except SourceError as e:
            core.fail(e)

    def _delivered(self, batch: SourceBatch) -> SourceBatch:
        log = self.log
        if batch.updates and log.fail_after_delivery_ms is not None:
            # The connection breaks right after this delivery: the next call finds it gone, while
            # the source still holds these changes unwritten.
            log.unreachable_until_ms = max(
                log.unreachable_until_ms, self.now_ms() + log.fail_after_delivery_ms
            )
            log.fail_after_delivery_ms = None
            self.count("upstream_fails_after_delivery")
        return batch

    def _send_status(self) -> None:
        """Send the core's standby status updates: the slot confirms what they say is flushed."""
        core, log = self.core, self.log
        assert core is not None
        for status in core.take_status():
            if not log.reachable(self.now_ms()):
                raise UpstreamUnreachable(f"sim:{log.name}", "status update: connection broke")
            parsed = parse_standby_status(status.encode(self.now_ms() * 1000))
            assert parsed is not None, "the core sent something else than a status update"
            flushed = parsed[1]
            if self.source in log.lost_slots:
                continue
            if flushed > log.slots.get(self.source, -1):
                self.on_ack(self.source, flushed + 1)
                log.slots[self.source] = flushed

    def ack(self, offset: int) -> None:
        core = self.core
        if core is None or self.closed:
            raise SourceReaderMisused("ack() on a reader that is not started")
        core.ack(offset, self._now_s())
        self._send_status()

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
