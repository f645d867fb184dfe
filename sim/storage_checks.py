"""The checkers of sources and sinks: exactly once, reclocked by the bindings, acknowledged only when durable.

:class:`StorageChecker` follows, on the simulated disk, every source and sink
the durable catalog ever named (it reads the catalog itself, so objects whose
creation's answer was lost count too) and judges what landed against the
simulated world (the upstream logs of :mod:`.upstream`, the targets of
:mod:`.sink_target`). It does not trust the product's reclocking code: it
decodes the bindings itself and re-derives each update's time.

Safety, as the run goes (each violation names its property):

* ``remap_bindings_valid`` -- each remap collection holds exactly one
  binding per time from its first one on, and bindings never go back (so
  times are monotone in offsets: an update at a later offset never lands at
  an earlier time);
* ``binding_before_data`` -- data of times ``[lo, hi)`` lands only once the
  bindings of those times are durable (the remap shard's upper, when the data
  commit landed, is at least ``hi``);
* ``source_exactly_once`` -- the data of times ``[lo, hi)`` are exactly the
  upstream changes at offsets ``[binding(lo - 1), binding(hi - 1))``, each at
  the least time whose binding is beyond its offset: every upstream change
  appears once, at a time its offset explains, and nothing else appears;
* ``upstream_acked_only_durable`` -- an ingestion acknowledges an upstream
  offset (letting upstream forget what is below it) only once everything
  below it is durable in its data shard: nothing acknowledged is lost in a
  crash;
* ``sink_commits_chain`` and ``sink_exactly_once`` -- a sink's commits in its
  target start at its as_of and each starts where the previous one ended, and
  the target holds, up to the sink's covered upper, exactly its input's
  changes from the as_of on (the snapshot at the as_of with times advanced to
  it), consolidated per time.

Liveness, at the end of the quiet phase (faults healed, upstreams quiet):
the storage replica is connected; every source's upper passed the time the
quiet phase was judged from, and its bindings cover every upstream change
(``sources_catch_up``); every sink covers what its input had when the
faults stopped (``sinks_catch_up``). Cleanup: no dropped source or sink runs
on the storage replica.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tidegate.runtime.catalog import DEFAULT_CATALOG_KEY, CatalogState, decode_catalog
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage.connections import SimulatedSink, SimulatedSource

from .controller import ControllerProcess
from .iceberg import IcebergReader
from .sink_target import SinkCommit, read_target
from .truth import LandedBatch, TruthLog
from .world_port import WorldPort

__all__ = ["RemapLog", "StorageCheckedWorld", "StorageChecker"]


class StorageCheckedWorld(WorldPort, Protocol):
    """What the checks of sources and sinks use of the world: its services and the controller."""

    @property
    def controller(self) -> ControllerProcess: ...


SINK_CHECK_MS = 1_000
"""How often (virtual ms) the sinks' targets are judged as the run goes (and at the end)."""


def _int(f: Antichain) -> int | None:
    return int(f.elements[0]) if f.elements else None


class RemapLog:
    """A remap collection's bindings, decoded from its landed batches (independently of the
    product's :mod:`tidegate.spec.storage.reclock`)."""

    def __init__(self) -> None:
        self.times: list[int] = []
        self.offsets: list[int] = []
        self.upper = 0
        self._contents: Counter[int] = Counter()

    def feed(self, updates: Iterable[Update], upper: int) -> str | None:
        """Take a landed batch; a problem with the collection, if any."""
        by_time: dict[int, list[tuple[Row, int]]] = {}
        for row, t, d in updates:
            by_time.setdefault(int(t), []).append((row, d))
        for t in sorted(by_time):
            for row, d in by_time[t]:
                if len(row) != 1 or not isinstance(row[0], int):
                    return f"remap row {row!r} at {t} is not (offset,)"
                self._contents[row[0]] += d
            self._contents = +self._contents
            held = sorted(self._contents.items())
            if not held:
                return f"the remap collection is empty at {t} after holding a binding"
            if len(held) != 1 or held[0][1] != 1:
                return f"the remap collection holds {held} at {t}, not one binding"
            offset = held[0][0]
            if self.offsets and offset < self.offsets[-1]:
                return f"the binding goes back from {self.offsets[-1]} to {offset} at {t}"
            if not self.offsets or offset != self.offsets[-1]:
                self.times.append(t)
                self.offsets.append(offset)
        self.upper = max(self.upper, upper)
        return None

    def at(self, t: int) -> int:
        """The binding at time ``t`` (0 before the first)."""
        i = bisect.bisect_right(self.times, t) - 1
        return self.offsets[i] if i >= 0 else 0

    def time_of(self, offset: int) -> int | None:
        """The least time whose binding is beyond ``offset`` (``None``: none yet)."""
        i = bisect.bisect_right(self.offsets, offset)
        return self.times[i] if i < len(self.times) else None


@dataclass
class _Source:
    id: GlobalId
    name: str
    remap: GlobalId
    upstream: str
    bindings: RemapLog = field(default_factory=RemapLog)
    remap_seen: int = 0
    remap_uppers: list[tuple[int, int]] = field(default_factory=list)
    """``(commit seq, upper)`` of each landed remap batch."""
    data_seen: int = 0
    dropped: bool = False


@dataclass
class _Sink:
    id: GlobalId
    name: str
    input: GlobalId
    target: str
    dropped: bool = False


def _counted(updates: Iterable[Update]) -> Counter[tuple[Row, int]]:
    out: Counter[tuple[Row, int]] = Counter()
    for row, t, d in updates:
        out[(tuple(row), int(t))] += d
    return Counter({k: n for k, n in out.items() if n})


def _difference(got: Counter[tuple[Row, int]], want: Counter[tuple[Row, int]]) -> str:
    keys = set(got) | set(want)
    extra = sorted(((k, got[k] - want[k]) for k in keys if got[k] > want[k]), key=repr)
    missing = sorted(((k, want[k] - got[k]) for k in keys if got[k] < want[k]), key=repr)
    return f"extra {extra[:3]}, missing {missing[:3]}"


class StorageChecker:
    """The checks of sources and sinks (see the module docstring)."""

    def __init__(
        self, world: StorageCheckedWorld, truth: TruthLog, violate: Callable[[str, str], None]
    ) -> None:
        self.world = world
        self.truth = truth
        self.violate = violate
        self.sources: dict[GlobalId, _Source] = {}
        self.sinks: dict[GlobalId, _Sink] = {}
        self._catalog_seen = 0
        self._catalog: CatalogState | None = None
        self._next_sink_check = 0
        self.quiet_ms: int | None = None
        self.quiet_uppers: dict[GlobalId, Antichain] = {}
        self.commits = 0
        self.iceberg = (
            IcebergReader(world.disk) if world.scenario.sink_writer == "iceberg" else None
        )

    # -- what exists ------------------------------------------------------------------------
    def discover(self) -> None:
        """Register the sources and sinks of the durable catalog (read from the disk)."""
        versions = self.world.disk.versions.get(DEFAULT_CATALOG_KEY, [])
        if len(versions) <= self._catalog_seen:
            return
        self._catalog_seen = len(versions)
        state = decode_catalog(versions[-1].data)
        self._catalog = state
        for src in state.sources:
            if src.id not in self.sources and isinstance(src.connection, SimulatedSource):
                self.track_source(src.id, src.name, src.remap_id, src.connection.name)
        for sink in state.sinks:
            if sink.id not in self.sinks and isinstance(sink.connection, SimulatedSink):
                self.track_sink(sink.id, sink.name, sink.from_id, sink.connection.name)
        live = {s.id for s in state.sources} | {s.id for s in state.sinks}
        for obj in self._objects():
            obj.dropped = obj.id not in live

    def _objects(self) -> list[_Source | _Sink]:
        return [*self.sources.values(), *self.sinks.values()]

    def track_source(self, id: GlobalId, name: str, remap: GlobalId, upstream: str) -> None:
        """Judge source ``id`` (remap collection ``remap``) of upstream ``upstream`` from now on."""
        self.sources[id] = _Source(id, name, remap, upstream)
        self.truth.watch(str(id))
        self.truth.watch(str(remap))

    def track_sink(self, id: GlobalId, name: str, input: GlobalId, target: str) -> None:
        """Judge sink ``id`` of ``input`` into target ``target`` from now on."""
        self.sinks[id] = _Sink(id, name, input, target)
        self.truth.watch(str(input))

    def shard_kind(self, key: str) -> str:
        """``"remap"`` or ``"data"`` if shard ``key`` is a source's, else ``""``."""
        self.discover()
        for src in self.sources.values():
            if key == str(src.id):
                return "data"
            if key == str(src.remap):
                return "remap"
        return ""

    # -- sources ----------------------------------------------------------------------------
    def _advance(self, src: _Source) -> None:
        """Judge the remap and data batches of ``src`` that landed since the last look."""
        remap = self.truth.batches(src.remap)
        while src.remap_seen < len(remap):
            b = remap[src.remap_seen]
            src.remap_seen += 1
            upper = _int(b.upper)
            if upper is None:
                continue
            problem = src.bindings.feed(b.updates, upper)
            if problem is not None:
                self.violate("remap_bindings_valid", f"source {src.name} ({src.id}): {problem}")
            src.remap_uppers.append((b.seq, upper))
        data = self.truth.batches(src.id)
        while src.data_seen < len(data):
            b = data[src.data_seen]
            src.data_seen += 1
            self._judge_data(src, b)

    def _judge_data(self, src: _Source, b: LandedBatch) -> None:
        lo, hi = _int(b.lower), _int(b.upper)
        if lo is None or hi is None:
            return
        k = bisect.bisect_left(src.remap_uppers, (b.seq, -1))
        bound = src.remap_uppers[k - 1][1] if k else 0
        if bound < hi:
            self.violate(
                "binding_before_data",
                f"source {src.name} ({src.id}): data of times [{lo}, {hi}) landed while its "
                f"bindings were durable only below {bound}",
            )
        bindings = src.bindings
        if bindings.upper < hi:
            return  # judged by binding_before_data
        log = self._log(src)
        low = bindings.at(lo - 1) if lo > 0 else 0
        high = bindings.at(hi - 1)
        want: list[Update] = []
        for row, offset, diff in log.between(low, high):
            t = bindings.time_of(offset)
            assert t is not None  # offset < high = binding(hi - 1)
            want.append((row, t, diff))
        got, expected = _counted(b.updates), _counted(want)
        self.world.count("source_batch_checked" if want else "source_batch_checked_empty")
        if got != expected:
            self.violate(
                "source_exactly_once",
                f"source {src.name} ({src.id}): the data of times [{lo}, {hi}) are not the "
                f"upstream changes at offsets [{low}, {high}) at their reclocked times: "
                f"{_difference(got, expected)}",
            )

    def stopped_for_good(self) -> set[GlobalId]:
        """The sources that can never catch up again (their upstream changed schema, or their
        slot was lost)."""
        out: set[GlobalId] = set()
        for src in self.sources.values():
            broken = self._log(src).broken_for
            if broken is None or src.id in broken:
                out.add(src.id)
        return out

    def _log(self, src: _Source) -> Any:
        upstreams = self.world.upstreams
        assert upstreams is not None
        return upstreams.logs[src.upstream]

    def _durable_offset(self, src: _Source) -> int | None:
        """Everything upstream below this offset is durable in ``src``'s data shard (``None``:
        its shard is gone)."""
        fr = self.truth.frontiers.get(str(src.id))
        if fr is None:
            return 0
        d = _int(fr[1])
        if d is None:
            return None
        return src.bindings.at(d - 1) if d > 0 else 0

    def acknowledged(self, source: GlobalId, offset: int) -> None:
        """A storage replica acknowledged ``offset`` of ``source`` upstream."""
        self.discover()
        src = self.sources.get(source)
        if src is None:
            self.violate(
                "upstream_acked_only_durable",
                f"an ingestion acknowledged offset {offset} for {source}, which no catalog names",
            )
            return
        self.truth.refresh(only=(str(src.id), str(src.remap)))
        self._advance(src)
        durable = self._durable_offset(src)
        self.world.count("upstream_ack_checked")
        if durable is not None and offset > durable:
            self.violate(
                "upstream_acked_only_durable",
                f"source {src.name} ({src.id}) acknowledged upstream offset {offset}, but only "
                f"the changes below {durable} are durable in its data shard",
            )

    # -- sinks ------------------------------------------------------------------------------
    def _judge_sink(self, sink: _Sink, commits: list[SinkCommit]) -> None:
        mine = [c for c in commits if c.sink == str(sink.id)]
        if not mine:
            return
        as_of = mine[0].lower
        for prev, c in zip([None, *mine], mine, strict=False):
            if prev is not None and c.lower != prev.upper:
                self.violate(
                    "sink_commits_chain",
                    f"sink {sink.name} ({sink.id}) committed [{c.lower}, {c.upper}) after "
                    f"[{prev.lower}, {prev.upper})",
                )
            if not c.lower < c.upper or any(not c.lower <= t < c.upper for _, t, _ in c.updates):
                self.violate(
                    "sink_commits_chain",
                    f"sink {sink.name} ({sink.id}) committed updates outside [{c.lower}, {c.upper})",
                )
        covered = mine[-1].upper
        got = _counted(u for c in mine for u in c.updates)
        if not self.truth.watching(str(sink.input)):
            return
        self.world.count("sink_target_checked")
        want = _counted(
            (row, max(t, as_of), d) for row, t, d in self.truth.updates(sink.input) if t < covered
        )
        if got != want:
            self.violate(
                "sink_exactly_once",
                f"sink {sink.name} ({sink.id}) of {sink.input}: its target {sink.target!r} "
                f"holds, up to {covered}, not its input's changes from its as_of {as_of}: "
                f"{_difference(got, want)}",
            )

    def check_sinks(self) -> None:
        """Judge every sink's target against what landed in its input."""
        self.truth.refresh(only=[str(s.input) for s in self.sinks.values()])
        targets: dict[str, list[SinkCommit]] = {}
        for sink in self.sinks.values():
            if sink.target not in targets:
                targets[sink.target] = self._read(sink.target)
            self._judge_sink(sink, targets[sink.target])
        self.commits = sum(len(c) for c in targets.values())

    def _read(self, target: str) -> list[SinkCommit]:
        """Every commit that landed in ``target``, in order, read back from the disk: an Iceberg
        table's from its metadata, manifests and data files, with pyiceberg's parsers."""
        if self.iceberg is not None:
            return self.iceberg.commits(target)
        return read_target(self.world.disk, target)

    def covered(self, sink: _Sink) -> int | None:
        mine = [c for c in self._read(sink.target) if c.sink == str(sink.id)]
        return mine[-1].upper if mine else None

    def check_tables(self) -> None:
        """Each Iceberg table holds, by pyiceberg's scan, exactly the updates its commits added
        (a commit that replaced the head without its parent's files, or a later commit that
        removed some, shows here and nowhere else)."""
        if self.iceberg is None:
            return
        for target in sorted({s.target for s in self.sinks.values()}):
            held = self.iceberg.scan(target)
            if held is None:
                continue
            self.world.count("iceberg_table_scanned")
            want = _counted(u for c in self.iceberg.commits(target) for u in c.updates)
            got = _counted(held)
            if got != want:
                self.violate(
                    "sink_table_matches_commits",
                    f"the Iceberg table of target {target!r} does not hold what its commits "
                    f"added: {_difference(got, want)}",
                )

    # -- the periodic check and the end -----------------------------------------------------
    def check(self) -> None:
        self.discover()
        self.truth.refresh()
        for src in self.sources.values():
            self._advance(src)
        if self.world.kernel.now_ms >= self._next_sink_check:
            self._next_sink_check = self.world.kernel.now_ms + SINK_CHECK_MS
            self.check_sinks()

    def quiet_started(self) -> None:
        """The faults stopped some time ago: what must have caught up by the end."""
        self.quiet_ms = self.world.kernel.now_ms
        env = self.world.controller.env
        if env is None:
            return
        for sink in self.sinks.values():
            fr = env.driver.ctl.storage.storage_frontiers(sink.input)
            if fr is not None and not sink.dropped:
                self.quiet_uppers[sink.id] = fr[1]

    def check_end(self) -> None:
        self.check()
        self.check_sinks()
        self.check_tables()
        env = self.world.controller.env
        info = None if env is None else env.storage_replica()
        if info is not None and info.status != "connected":
            self.violate(
                "storage_replica_recovers",
                f"the storage replica is {info.status} at the end ({info.last_error})",
            )
        for src in self.sources.values():
            if src.dropped:
                continue
            broken = self._log(src).broken_for
            if broken is None or src.id in broken:  # its upstream changed schema, or its slot
                self.world.count("source_stopped_for_good")  # is gone: it can never catch up
                continue
            fr = self.truth.frontiers.get(str(src.id))
            upper = None if fr is None else _int(fr[1])
            if upper is None:
                continue
            if self.quiet_ms is not None and upper <= self.quiet_ms:
                self.violate(
                    "sources_catch_up",
                    f"source {src.name} ({src.id}) is complete only to {upper} at the end, not "
                    f"past {self.quiet_ms}, when the quiet phase was judged from",
                )
            log = self._log(src)
            durable = self._durable_offset(src)
            if durable is not None and durable < log.upper:
                self.violate(
                    "sources_catch_up",
                    f"source {src.name} ({src.id}) reflects upstream {src.upstream!r} only below "
                    f"offset {durable} at the end; upstream was written up to {log.upper}",
                )
        for sink in self.sinks.values():
            want = self.quiet_uppers.get(sink.id)
            if sink.dropped or want is None or not want.elements:
                continue
            covered = self.covered(sink)
            if covered is None or covered < int(want.elements[0]):
                self.violate(
                    "sinks_catch_up",
                    f"sink {sink.name} ({sink.id}) covers {covered} at the end, behind its "
                    f"input's upper {want} when the faults stopped",
                )
        self._check_cleanup()
        self._note_history()

    def _check_cleanup(self) -> None:
        sr = self.world.storage
        service = None if sr is None else sr.service
        if service is None:
            return
        running = set(service.core.ingestions()) | set(service.core.sinks())
        for obj in self._objects():
            if obj.dropped and obj.id in running:
                self.violate(
                    "drops_clean_up",
                    f"the storage replica still runs dropped {obj.name} ({obj.id}) at the end",
                )

    def _note_history(self) -> None:
        """Every source's landed data into the client history, for the offline checker."""
        now = self.world.kernel.now_ms
        for src in sorted(self.sources.values(), key=lambda s: s.id.sort_key):
            updates = self.truth.updates(src.id)
            self.world.history.note(
                "source_data",
                now,
                id=str(src.id),
                updates=[[t, list(row), d] for row, t, d in updates],
            )
