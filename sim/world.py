"""The simulated world: the production runtime among simulated replicas, disk, network and clients.

:class:`World` wires one run together on one trio run and one
:class:`~tidegate.sim.kernel.Kernel`:

* the controller process (:mod:`.controller`): ``tidegate.runtime`` itself,
  killed and restarted by the fault plan;
* N replica processes (:mod:`.replica`) behind simulated endpoints;
* with sources or sinks in the scenario, the storage replica process
  (:mod:`.storage_replica`), the simulated upstreams it ingests
  (:mod:`.upstream`) and the sink targets it commits to (:mod:`.sink_target`);
* the disk (:mod:`.storage`), the network (:mod:`.network`), the clients
  (:mod:`.clients`) and the checkers (:mod:`.checkers`).

Until ``duration_ms`` the clients act and the faults strike; then every fault
heals and the quiet (liveness) phase runs to ``duration_ms + quiet_ms``,
where the end checks run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import trio

from tidegate.replica.storage.sinks import SinkFactory
from tidegate.runtime.environment import Environment
from tidegate.runtime.transport.version import PROTOCOL_VERSION, VERSION_HEADER
from tidegate.spec.errors import TidegateError
from tidegate.spec.ids import GlobalId

from .checkers import CHECK_MS, Checker, StopRun
from .choices import pick
from .clients import Clients
from .clocks import Clocks
from .controller import CLOCK_NAME, ControllerProcess
from .faults import (
    BASE_KINDS,
    CONTROLLER,
    STORAGE_KINDS,
    STORAGE_REPLICA,
    Fault,
    FaultKind,
    FaultPlan,
)
from .history import ClientHistory, Violation
from .iceberg import BLOB_PREFIX as ICEBERG_BLOBS
from .iceberg import ForeignWriter, iceberg_sink_factory
from .kernel import Kernel
from .knobs import Knobs, draw_knobs
from .network import SimNetwork
from .replica import ReplicaProcess, ReplicaWorld
from .scenario import DEFAULT_CLUSTER, Scenario
from .sink_target import SinkFaults, sink_factory
from .storage import (
    CATALOG_KEY,
    ORACLE_KEY,
    BlobClient,
    ConsensusClient,
    CrashPoint,
    SimDisk,
    StorageFaults,
)
from .storage_replica import CLOCK_NAME as STORAGE_CLOCK
from .storage_replica import STORAGE_ADDRESS, StorageReplicaProcess
from .trace import Trace, summarize
from .transport import SimReplicaEndpoint
from .upstream import Upstreams
from .world_port import Streams

__all__ = ["SETTLED_MS", "STORAGE_FAULTS", "SUPPORTED_FAULTS", "Streams", "World"]

SETTLED_MS = 500
"""How long before the end of a run its sinces are judged from (see ``Checker.settled``)."""

SECOND_KINDS = frozenset(
    {
        FaultKind.ZOMBIE_CONTROLLER,
        FaultKind.PAUSE_PROCESS,
        FaultKind.CLOCK_JUMP,
        FaultKind.CLOCK_DRIFT,
        FaultKind.CLOCK_BACK_RESTART,
        FaultKind.BIT_ROT,
        FaultKind.FULL_DISK,
        FaultKind.SLOW_FSYNC,
        FaultKind.LOSE_CATALOG,
    }
)
"""Faults of every scenario handled by :meth:`World._second_fault`."""

DAMAGE_GRACE_MS = 1_000
"""How long after damaged storage was repaired a controller may still refuse to start over it
(it read the damage before the repair)."""


def _decode_catalog(key: str, data: bytes) -> object:
    from tidegate.runtime.catalog import decode_catalog

    return decode_catalog(data)


def _decode_oracle(key: str, data: bytes) -> object:
    from tidegate.runtime.oracle import decode_oracle_state

    return decode_oracle_state(data, key)


def _decode_shard(key: str, data: bytes) -> object:
    from tidegate.spec.shard import decode_state

    return decode_state(key, 0, data)


_ROW_DECODERS = {
    "catalog": _decode_catalog,
    "oracle": _decode_oracle,
    "shard": _decode_shard,
}
"""The product's decoder of each kind of consensus record (a rotten one must be refused)."""

SUPPORTED_FAULTS = BASE_KINDS
"""Fault kinds the world can inject in every scenario."""
STORAGE_FAULTS = tuple(k for k in FaultKind if k in STORAGE_KINDS)
"""Fault kinds of the storage world, injected in scenarios with sources or sinks."""

ARMED_KINDS = frozenset(
    {
        FaultKind.CRASH_CONTROLLER_IN,
        FaultKind.TORN_BLOB_WRITE,
        FaultKind.CRASH_REPLICA_REHYDRATING,
        FaultKind.CRASH_STORAGE_REPLICA_IN,
        FaultKind.UPSTREAM_FAILS_AFTER_DELIVERY,
    }
)
"""Faults that wait for their moment (a matching storage call, a rehydration) once planned."""


class World:
    """One run's world (see the module docstring)."""

    def __init__(
        self,
        scenario: Scenario,
        plan: FaultPlan,
        streams: Streams,
        trace: Trace,
        *,
        trace_messages: bool = True,
        knobs: Knobs | None = None,
    ) -> None:
        self.scenario = scenario
        self.plan = plan
        self.streams = streams
        self.trace = trace
        self.kernel = Kernel()
        self.sometimes: Counter[str] = Counter()
        self.knobs = draw_knobs(streams.knobs) if knobs is None else knobs
        self.count(f"knob_shard_policy_{self.knobs.shard_policy_name}")
        self.count(f"knob_frame_size_{self.knobs.frame_size_name}")
        self.network = SimNetwork(self.kernel, streams.network)
        self.network.max_frame_bytes = self.knobs.max_frame_bytes
        self.clocks = Clocks(self.kernel)
        self.disk = SimDisk()
        self.disk.rot_reads = self._rot_read
        self.faults = StorageFaults(streams.storage, count=self.count, on_crash=self._crash_fired)
        self.faults.on_stop = self._stop_fired
        self.faults.on_fill = self._fill_at_catalog
        self._zombie_ms = 0
        self._damage_healed_ms = -DAMAGE_GRACE_MS - 1
        """When damaged storage (rot, a lost record, a full disk) was last repaired."""
        self._disk_room_ms = -1
        """When a full disk last got room again (-1: never full)."""
        self._healing: list[Any] = []
        """What heals each fault in force (kernel events: run at once when the quiet starts)."""
        self.history = ClientHistory()
        self.replicas: dict[str, ReplicaProcess] = {}
        self.cluster_of: dict[str, str] = {}
        """Every replica process the world started -> the cluster it started it for: the
        simulator's own record, which the checkers judge the controller's routing against."""
        self._declared_clusters = {DEFAULT_CLUSTER, *(c.name for c in scenario.clusters)}
        self.endpoints: dict[str, SimReplicaEndpoint] = {}
        self.alias: dict[str, str] = {}
        self.quiet = False
        self.ending = False
        self.violation: Violation | None = None
        self.dropped_ids: set[GlobalId] = set()
        self.crash_restart_ms = 100
        self.end_ms = scenario.duration_ms + scenario.quiet_ms
        self._trace_messages = trace_messages
        self._pending_replace: dict[str, str] = {}
        self._replacements = 0
        self._replica_world = ReplicaWorld(
            self.kernel,
            self.network,
            self.disk,
            self.faults,
            streams.latencies,
            self.record,
            self.count,
            self.violate,
            scenario.replica_step_ms,
            shard_policy=self.knobs.shard_policy,
            clocks=self.clocks,
        )
        self.upstreams: Upstreams | None = None
        self.sink_faults: SinkFaults | None = None
        self.storage: StorageReplicaProcess | None = None
        """The storage replica (scenarios with sources or sinks only)."""
        self.storage_endpoints: dict[str, SimReplicaEndpoint] = {}
        if scenario.storage:
            self._storage_world()
        self.controller = ControllerProcess(self)
        self.clients = Clients(
            self,
            self._swarmed(scenario, plan),
            self.history,
            streams.workload,
            streams.times,
            plan.actions,
        )
        self.checker = Checker(self)
        self.nursery: trio.Nursery

    def process_clock(self, process: str) -> Callable[[], int]:
        """``process``'s wall clock (which clock faults set off)."""
        return self._replica_world.clock(process)

    def _storage_world(self) -> None:
        io = self.streams.upstream_io
        assert io is not None, "a scenario with sources or sinks needs the upstream streams"
        self.upstreams = Upstreams(io, lambda: self.kernel.now_ms, self._acknowledged, self.count)
        for src in self.scenario.sources:
            self.upstreams.add(src.upstream, src.schema)
        self.sink_faults = faults = SinkFaults(io)
        if self.scenario.sink_writer == "iceberg":
            foreign = ForeignWriter(self.disk, faults, self.count)

            def sinks(consensus: ConsensusClient, blob: BlobClient) -> SinkFactory:
                return iceberg_sink_factory(consensus, blob, foreign, self.count)
        else:

            def sinks(consensus: ConsensusClient, blob: BlobClient) -> SinkFactory:
                return sink_factory(consensus, faults, self.count)

        self.storage = StorageReplicaProcess(
            self._replica_world,
            self.upstreams,
            sinks,
            self.scenario.storage_tick_ms,
            self._violate_soon,
        )
        endpoint = self.storage.endpoint
        endpoint.on_cut = self._command_rejected
        if self._trace_messages:
            endpoint.observe = self._message
        self.storage_endpoints[STORAGE_ADDRESS] = endpoint
        self.faults.shard_kind = self._shard_kind

    @staticmethod
    def _swarmed(scenario: Scenario, plan: FaultPlan) -> Scenario:
        """The scenario with the workload features the plan leaves out weighed 0 (swarm)."""
        if plan.workload is None or plan.actions is not None:
            return scenario
        mix = scenario.workload
        off: dict[str, Any] = {k: 0 for k, _ in mix.weights() if k not in set(plan.workload)}
        return replace(scenario, workload=replace(mix, **off)) if off else scenario

    def _shard_kind(self, key: str) -> str:
        checks = self.checker.storage
        return "" if checks is None else checks.shard_kind(key)

    def _violate_soon(self, property: str, message: str) -> None:
        """Report a broken property from the next kernel event (not from inside a service)."""
        self.kernel.call_later(0, self.violate, property, message)

    def _acknowledged(self, source: GlobalId, offset: int) -> None:
        """A storage replica acknowledged ``offset`` of ``source`` upstream: it must be durable."""
        self.record("upstream_ack", id=str(source), offset=offset)
        self.checker.storage_acknowledged(source, offset)

    # -- bookkeeping -----------------------------------------------------------------------
    def record(self, event: str, /, **fields: Any) -> None:
        self.trace.record_fields(self.kernel.now_ms, event, fields)

    def count(self, name: str) -> None:
        self.sometimes[name] += 1

    def violate(self, property: str, message: str) -> None:
        """Stop the run at a broken property (the first one is the run's verdict)."""
        v = Violation(property, message, self.kernel.now_ms)
        if self.violation is None:
            self.violation = v
        raise StopRun(v)

    def controller_crashed(self, group: BaseException) -> None:
        """The controller process raised an exception it did not handle: a finding."""
        import traceback

        self.error = "".join(traceback.format_exception(group))
        first = group.exceptions[0] if isinstance(group, BaseExceptionGroup) else group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        self.violate(
            "controller_survives",
            f"the controller crashed: {type(first).__name__}: {first}".splitlines()[0],
        )

    def dropped(self, gid: GlobalId) -> None:
        self.dropped_ids.add(gid)

    def replica_names(self) -> list[str]:
        return sorted(self.replicas)

    def catalog_has_replicas(self) -> bool:
        """Whether the durable catalog records replicas (the world reads the disk directly)."""
        from tidegate.runtime.catalog import DEFAULT_CATALOG_KEY, decode_catalog

        head = self.disk.consensus.head(DEFAULT_CATALOG_KEY)
        return head is not None and bool(decode_catalog(head.data).replicas)

    def _message(self, direction: str, replica: str, message: Any) -> None:
        self.trace.record_message(self.kernel.now_ms, direction, replica, summarize(message))

    def hydration_answered(
        self, env: Environment, ev: dict[str, Any], replicas: list[str] | None
    ) -> None:
        self.checker.judge_hydration(env, ev, replicas)

    def peek_answered(self, ev: dict[str, Any]) -> None:
        self.checker.judge_peek_cluster(ev)

    def _observe(self, direction: str, replica: str, message: Any) -> None:
        """A compute message on the network: the checkers' trace, and the run's if kept."""
        self.checker.progress.observe(direction, replica, message)
        if self._trace_messages:
            self.record(direction, r=replica, m=summarize(message))

    def _command_rejected(self, replica: str, reason: str) -> None:
        if reason.startswith("malformed"):  # bytes of our own codec that do not decode
            self.violate("wire_messages_decode", f"stream of replica {replica} cut: {reason}")
        if "[deposed_controller]" in reason and self.controller.zombies:
            self.count("deposed_controller_refused")  # a zombie's Hello: refused, as it must be
            return
        self.violate("controller_protocol", f"replica {replica} rejected a command: {reason}")

    # -- setup -------------------------------------------------------------------------------
    def _new_replica(self, name: str) -> ReplicaProcess:
        replica = ReplicaProcess(name, self._replica_world)
        replica.endpoint.on_cut = self._command_rejected
        replica.endpoint.observe = self._observe
        self.replicas[name] = replica
        self.endpoints[name] = replica.endpoint
        replica.start()
        return replica

    def start_cluster_replica(self, cluster: str, name: str) -> str:
        """Start a replica process for replica ``name`` of ``cluster`` (a client is about to add
        it); its address, ``cluster.name``."""
        process = f"{cluster}.{name}"
        self.cluster_of[process] = cluster
        if process not in self.replicas:
            self._new_replica(process)
        return process

    def stop_cluster_replica(self, process: str) -> None:
        """A client dropped the replica at ``process``: its process stops (it stays recorded as
        the cluster's, for the trace's sake)."""
        replica = self.replicas.pop(process, None)
        self.endpoints.pop(process, None)
        if replica is not None:
            replica.crash()

    def start(self) -> None:
        for name, cluster in self.scenario.cluster_replicas().items():
            self.alias[name] = name
            self.cluster_of[name] = cluster
            self._new_replica(name)
        if self.storage is not None:
            self.storage.start()
        k = self.kernel
        self.clients.schedule(0, self.scenario.duration_ms)
        for fault in self.plan.faults:
            if fault.at_ms < self.scenario.duration_ms:
                k.call_at(fault.at_ms, self._fault, fault)
        k.call_at(CHECK_MS, self._check)
        k.call_at(self.scenario.duration_ms, self._quiet)
        self.controller.start()

    def _check(self) -> None:
        self.checker.check()
        self.kernel.call_later(CHECK_MS, self._check)

    # -- faults ---------------------------------------------------------------------------------
    def _fault(self, f: Fault) -> None:
        if self.quiet:
            return
        name = self.alias.get(f.target, f.target)
        replica = self.replicas.get(name)
        self.record(
            "fault", fault=f.kind.value, target=name, duration=f.duration_ms, factor=f.factor
        )
        k = self.kernel
        kind = f.kind
        if kind in (
            FaultKind.CRASH_REPLICA,
            FaultKind.CUT_CONNECTION,
            FaultKind.SLOW_REPLICA,
            FaultKind.REPLACE_REPLICA,
            FaultKind.CRASH_REPLICA_REHYDRATING,
            FaultKind.GHOST_CONNECTION,
        ) and (replica is None or f.target in self._pending_replace):
            self.count("fault_skipped")
            return
        assert replica is not None or kind not in (FaultKind.CRASH_REPLICA,)
        if replica is not None and self.cluster_of.get(name) not in self._declared_clusters:
            self.count("fault_on_created_cluster")  # a replica of a cluster made during the run
        if kind is FaultKind.CRASH_REPLICA:
            assert replica is not None
            if not replica.alive:
                self.count("fault_skipped")
                return
            replica.crash()
            k.call_later(f.duration_ms, self._restart_replica, name)
        elif kind is FaultKind.CUT_CONNECTION:
            assert replica is not None
            if not replica.endpoint.cut(k.now_ms + f.duration_ms):
                self.count("fault_skipped")
                return
        elif kind is FaultKind.SLOW_REPLICA:
            self.network.slow[name] = f.factor
            k.call_later(f.duration_ms, self._unslow, name)
        elif kind is FaultKind.REPLACE_REPLICA:
            if not self.controller.ready:
                self.count("fault_skipped")
                return
            self._replacements += 1
            new = f"{f.target}x{self._replacements}"
            self._pending_replace[f.target] = new
            self.controller.spawn(self._replace, f.target, name, new, f.duration_ms)
        elif kind is FaultKind.RESTART_CONTROLLER:
            if not self.controller.up:
                self.count("restart_while_down")
            self.controller.kill("restart fault", f.duration_ms)
        elif kind is FaultKind.DELAY_STORAGE_WRITE:
            self.faults.slow_factor = max(self.faults.slow_factor, f.factor)
            k.call_later(f.duration_ms, self._storage_speed_back)
        elif kind in (FaultKind.CRASH_CONTROLLER_IN, FaultKind.TORN_BLOB_WRITE):
            # Armed even while the controller is down: it strikes the next incarnation
            # (a "restore" crash point is meant for exactly that).
            torn = kind is FaultKind.TORN_BLOB_WRITE
            target = "blob" if torn else f.target
            after = bool(self.streams.storage.integer(0, 1)) and not torn
            self.faults.crash_points = [
                p for p in self.faults.crash_points if p.process != "controller"
            ]
            self.faults.crash_points.append(CrashPoint("controller", target, after, torn))
            self.crash_restart_ms = f.duration_ms
        elif kind is FaultKind.CONSENSUS_FAILURES:
            self.faults.consensus_failing += 1
            k.call_later(f.duration_ms, self._consensus_back)
        elif kind is FaultKind.BLOB_FAILURES:
            self.faults.blob_failing += 1
            k.call_later(f.duration_ms, self._blob_back)
        elif kind is FaultKind.CRASH_REPLICA_REHYDRATING:
            assert replica is not None
            replica.crash_on_rehydration = f.duration_ms
        elif kind is FaultKind.GHOST_CONNECTION:
            assert replica is not None
            k.call_later(f.duration_ms, replica.endpoint.ghost, {VERSION_HEADER: PROTOCOL_VERSION})
        elif kind in SECOND_KINDS:
            if not self._second_fault(f):
                self.count("fault_skipped")
                return
        elif kind in STORAGE_KINDS and not self._storage_fault(f):
            self.count("fault_skipped")
            return
        if kind in ARMED_KINDS or (kind is FaultKind.ZOMBIE_CONTROLLER and f.target):
            self.count(f"armed:{kind.value}")  # counted as fired when it strikes
        else:
            self.count(kind.value)

    def _heal_later(self, ms: int, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` ``ms`` from now, or when the quiet phase starts if sooner."""
        handle = self.kernel.call_later(ms, fn, *args)
        self._healing.append(handle)

    def _process_clock(self, target: str) -> str:
        if target == CONTROLLER:
            return CLOCK_NAME
        if target == STORAGE_REPLICA:
            return STORAGE_CLOCK
        return self.alias.get(target, target)

    def _second_fault(self, f: Fault) -> bool:
        """A fault of the second round (zombies, stops, clocks, the medium); False if it could
        not strike now."""
        k, kind, d = self.kernel, f.kind, f.duration_ms
        if kind is FaultKind.ZOMBIE_CONTROLLER:
            if f.target == "commit":  # at the next append's commit, between write and answer
                points = self.faults.stop_points
                points[:] = [p for p in points if p.process != "controller"]
                points.append(CrashPoint("controller", "commit", True))
                self._zombie_ms = d
                return True
            return self.controller.zombify(d)
        if kind is FaultKind.PAUSE_PROCESS:
            resume = None
            if f.target == CONTROLLER:
                resume = self.controller.pause()
            elif f.target == STORAGE_REPLICA:
                resume = None if self.storage is None else self.storage.pause()
            elif f.target not in self._pending_replace:
                replica = self.replicas.get(self.alias.get(f.target, f.target))
                resume = None if replica is None else replica.pause()
            if resume is None:
                return False
            self._heal_later(d, resume)
            return True
        if kind is FaultKind.CLOCK_JUMP:
            self.clocks.jump(self._process_clock(f.target), f.skew_ms, d)
            return True
        if kind is FaultKind.CLOCK_DRIFT:
            self.clocks.drift(self._process_clock(f.target), f.skew_ms, d)
            return True
        if kind is FaultKind.CLOCK_BACK_RESTART:
            # Behind from now on (until the quiet phase sets every clock right), and the
            # controller restarts before the clock has caught up with what it handed out.
            self.clocks.jump(CLOCK_NAME, f.skew_ms, self.end_ms)
            k.call_later(d, self._restart_controller, "clock_back_restart")
            return True
        if kind is FaultKind.BIT_ROT:
            return self._rot(f)
        if kind is FaultKind.FULL_DISK:
            if f.target == "catalog":  # right after the next catalog commit lands
                self.faults.fill_at_catalog.append(d)
                return True
            self._fill_disk(d)
            return True
        if kind is FaultKind.SLOW_FSYNC:
            self.faults.fsync_stall_ms = max(self.faults.fsync_stall_ms, 50 * f.factor)
            self._heal_later(d, self._fsync_fast)
            return True
        if kind is FaultKind.LOSE_CATALOG:
            if not self.disk.lose(CATALOG_KEY):
                return False
            self.record("catalog_lost")
            self._restart_controller("lose_catalog")
            self._heal_later(d, self._catalog_back)
            return True
        return False

    def _stop_fired(self, point: CrashPoint) -> None:
        """An armed zombie fault strikes: inside the controller's storage call, just applied."""
        self.record("stop_point", process=point.process, target=point.target)
        if self.controller.zombify(self._zombie_ms):
            self.count("zombie_controller")
            self.count("zombie_at_commit")

    def _restart_controller(self, why: str) -> None:
        if not self.quiet:
            self.controller.kill(why, 50)

    def _healed(self) -> None:
        self._damage_healed_ms = self.kernel.now_ms

    def _fill_disk(self, duration_ms: int) -> None:
        self.faults.disk_full += 1
        self._heal_later(duration_ms, self._disk_has_room)

    def _fill_at_catalog(self, duration_ms: int) -> None:
        """An armed full disk strikes: a catalog commit just landed (inside the storage call)."""
        if not self.quiet:
            self.count("full_disk_after_catalog_commit")
            self._fill_disk(duration_ms)

    def _disk_has_room(self) -> None:
        self.faults.disk_full = max(0, self.faults.disk_full - 1)
        if not self.faults.disk_full:
            self._disk_room_ms = self.kernel.now_ms
        self._healed()

    def disk_was_full(self, since_ms: int) -> bool:
        """Whether the disk was full at some moment since ``since_ms``: a write begun then may
        be refused for want of room (typed: SQLSTATE 53100), and only then."""
        return self.faults.disk_full > 0 or self._disk_room_ms >= since_ms

    def _fsync_fast(self) -> None:
        self.faults.fsync_stall_ms = 0

    def _catalog_back(self) -> None:
        if CATALOG_KEY not in self.disk.lost:
            return
        self._healed()
        if self.disk.recover(CATALOG_KEY):
            self.record("catalog_recovered")
            self.count("catalog_recovered")
        else:  # the product wrote a catalog of its own where the lost one was
            self.record("catalog_overwritten")
            self.count("catalog_lost_overwritten")

    def _rot(self, f: Fault) -> bool:
        """Flip a byte of a committed blob, or of a consensus key's head row."""
        source = self.streams.faults or self.streams.workload
        disk = self.disk
        if f.target == "blob":
            # not the Iceberg warehouse's files: the format has no checksum to refuse rot with
            keys = [m.key for m in disk.blobs.list_keys() if not m.key.startswith(ICEBERG_BLOBS)]
            if not keys:
                return False
            key = pick(source, keys)
            data = disk.blobs.get(key) or b""
            if not disk.rot_blob(
                key, source.integer(0, max(0, len(data) - 1)), source.integer(0, 7)
            ):
                return False
            what = "blob"
        else:
            keys = [k for k in disk.consensus.list_keys() if self._row_kind(k) == f.target]
            if not keys:
                return False
            key = pick(source, keys)
            head = disk.consensus.head(key)
            data = b"" if head is None else head.data
            at, bit = source.integer(0, max(0, len(data) - 1)), source.integer(0, 7)
            digits = [i for i, b in enumerate(data) if 0x30 <= b <= 0x39]
            if digits and source.integer(0, 1):
                # Half the time the rot turns a digit into another digit (bit 0): the damage a
                # record without a checksum cannot tell from data.
                at, bit = pick(source, digits), 0
            if not disk.rot_row(key, at, bit):
                return False
            what = self._row_kind(key)
        self.record("bit_rot", target=f.target, key=key)
        self.count(f"bit_rot_{what}")
        self._heal_later(f.duration_ms, self._repair, f.target, key)
        return True

    def _row_kind(self, key: str) -> str:
        if key == CATALOG_KEY:
            return "catalog"
        if key == ORACLE_KEY:
            return "oracle"
        if key.startswith("sinks/"):
            return "sink_target"
        return "shard"

    def _repair(self, target: str, key: str) -> None:
        self._healed()
        if target == "blob":
            self.disk.rotten_blobs.pop(key, None)
        else:
            for k in [k for k in self.disk.rotten_rows if k[0] == key]:
                del self.disk.rotten_rows[k]

    def _rot_read(self, what: str, key: str, data: bytes) -> None:
        """A process read rotten bytes: the product's own decoder must refuse them (typed)."""
        kind = self._row_kind(key) if what == "consensus" else "blob"
        self.count(f"rot_read_{kind}")
        decoder = _ROW_DECODERS.get(kind)
        if decoder is None:
            return
        try:
            decoder(key, data)
        except TidegateError:
            return
        except Exception as e:  # untyped: a finding too
            self._violate_soon("rot_detected", f"rotten {kind} {key!r} raised untyped {e!r}")
            return
        self._violate_soon(
            "rot_detected", f"a rotten {kind} record ({key!r}) decodes as valid data: read as such"
        )

    def refusal_expected(self, group: BaseException) -> bool:
        """Whether a controller may refuse to start with ``group`` now: typed errors only, while
        the storage is damaged (rot, a lost record, a full disk)."""
        from tidegate.spec.errors import TidegateError

        leaves: list[BaseException] = []

        def walk(e: BaseException) -> None:
            if isinstance(e, BaseExceptionGroup):
                for sub in e.exceptions:
                    walk(sub)
            else:
                leaves.append(e)

        walk(group)
        return self.storage_damaged() and all(isinstance(e, TidegateError) for e in leaves)

    def storage_damaged(self) -> bool:
        """Whether the storage is damaged (rot, a lost record, a full disk) or was a moment ago:
        a call that read the damage just before it was repaired may refuse a moment later."""
        damaged = bool(self.disk.rotten_blobs or self.disk.rotten_rows or self.disk.lost) or bool(
            self.faults.disk_full
        )
        return damaged or self.kernel.now_ms - self._damage_healed_ms <= DAMAGE_GRACE_MS

    def controller_starting(self, platform: Any) -> None:
        """A controller incarnation starts: is its clock behind what an oracle handed out?"""
        checker = self.checker
        checker.truth.refresh()
        handed = [
            int(fr[1].elements[0]) - 1
            for key, fr in checker.truth.frontiers.items()
            if fr[1].elements and GlobalId.parse(key) in set(checker.truth.tables())
        ]
        if handed and platform.clock_ms() < max(handed):
            self.count("oracle_reopened_behind")
            self.record("oracle_reopens_behind", clock=platform.clock_ms(), handed=max(handed))

    def _storage_fault(self, f: Fault) -> bool:
        """A fault of the storage world; False if it could not strike now."""
        k, kind, sr = self.kernel, f.kind, self.storage
        if sr is None or self.upstreams is None or self.sink_faults is None:
            return False
        if kind is FaultKind.CRASH_STORAGE_REPLICA:
            if not sr.alive:
                return False
            sr.crash()
            k.call_later(f.duration_ms, sr.restart)
        elif kind is FaultKind.CRASH_STORAGE_REPLICA_IN:
            sr.restart_after_ms = f.duration_ms
            if f.target == "rehydration":
                sr.crash_on_rehydration = f.duration_ms
            else:
                after = bool(self.streams.storage.integer(0, 1))
                points = self.faults.crash_points
                points[:] = [p for p in points if p.process != sr.name]
                points.append(CrashPoint(sr.name, f.target, after))
        elif kind is FaultKind.CUT_STORAGE_CONNECTION:
            return sr.endpoint.cut(k.now_ms + f.duration_ms)
        elif kind is FaultKind.ZOMBIE_STORAGE_REPLICA:
            return sr.zombie(f.duration_ms)
        elif kind in (FaultKind.UPSTREAM_UNREACHABLE, FaultKind.SLOW_UPSTREAM):
            log = self.upstreams.logs.get(f.target)
            if log is None:
                return False
            if kind is FaultKind.UPSTREAM_UNREACHABLE:
                log.unreachable_until_ms = max(log.unreachable_until_ms, k.now_ms + f.duration_ms)
            else:
                log.lag_ms = max(log.lag_ms, 20 * f.factor)
                k.call_later(f.duration_ms, self._upstream_prompt, f.target)
        elif kind is FaultKind.SINK_COMMIT_FAILURES:
            failing = self.sink_faults.failing
            failing[f.target] = failing.get(f.target, 0) + 1
            k.call_later(f.duration_ms, self._sinks_back, f.target)
        elif kind is FaultKind.FOREIGN_SINK_COMMITS:
            self.sink_faults.foreign += 1
            self._heal_later(f.duration_ms, self._foreign_back)
        elif kind in (
            FaultKind.UPSTREAM_FAILS_AFTER_DELIVERY,
            FaultKind.UPSTREAM_SCHEMA_CHANGE,
            FaultKind.SLOT_LOST,
        ):
            log = self.upstreams.logs.get(f.target)
            if log is None:
                return False
            if kind is FaultKind.UPSTREAM_FAILS_AFTER_DELIVERY:
                log.fail_after_delivery_ms = max(10, f.duration_ms)
            elif kind is FaultKind.UPSTREAM_SCHEMA_CHANGE:
                if log.schema_changed_at is not None:
                    return False
                log.schema_changed_at = log.upper
                self.record("upstream_schema_changed", upstream=f.target, offset=log.upper)
            else:
                lost = {s for s, offset in log.slots.items() if offset > 0} - log.lost_slots
                if not lost:
                    return False
                log.lost_slots |= lost
                self.record("slots_lost", upstream=f.target, sources=sorted(map(str, lost)))
        return True

    def _foreign_back(self) -> None:
        if self.sink_faults is not None:
            self.sink_faults.foreign = max(0, self.sink_faults.foreign - 1)

    def _upstream_prompt(self, name: str) -> None:
        if self.upstreams is not None and name in self.upstreams.logs:
            self.upstreams.logs[name].lag_ms = 0

    def _sinks_back(self, target: str) -> None:
        if self.sink_faults is not None:
            failing = self.sink_faults.failing
            failing[target] = max(0, failing.get(target, 0) - 1)

    def _crash_fired(self, point: CrashPoint) -> None:
        self.record("crash_point", process=point.process, target=point.target)
        kind = FaultKind.TORN_BLOB_WRITE if point.torn else FaultKind.CRASH_CONTROLLER_IN
        if self.storage is not None and point.process == self.storage.name:
            kind = FaultKind.CRASH_STORAGE_REPLICA_IN
        self.count(kind.value)

    def _restart_replica(self, name: str) -> None:
        replica = self.replicas.get(name)
        if replica is not None and not replica.alive:
            replica.start()

    def _unslow(self, name: str) -> None:
        self.network.slow.pop(name, None)

    def _storage_speed_back(self) -> None:
        self.faults.slow_factor = 1

    def _consensus_back(self) -> None:
        self.faults.consensus_failing = max(0, self.faults.consensus_failing - 1)

    def _blob_back(self) -> None:
        self.faults.blob_failing = max(0, self.faults.blob_failing - 1)

    def _in_cluster(self, process: str) -> tuple[str, str]:
        """The cluster of replica process ``process`` and its name there (the world's record)."""
        cluster = self.cluster_of.get(process, DEFAULT_CLUSTER)
        if cluster == DEFAULT_CLUSTER:
            return cluster, process
        return cluster, process.removeprefix(f"{cluster}.")

    async def _replace(self, target: str, old: str, new: str, after_ms: int) -> None:
        """Drop replica ``old`` through the API, add ``new`` ``after_ms`` later (a client's work)."""
        env = self.controller.env
        if env is None:
            return
        cluster, name = self._in_cluster(old)
        self.cluster_of[new] = cluster
        try:
            if cluster == DEFAULT_CLUSTER:
                await env.drop_replica(old)
            else:
                await env.drop_cluster_replica(cluster, name)
        except Exception as e:  # typed refusals are findings only if unexpected; record them
            self.record("replace_failed", replica=old, error=type(e).__name__)
            self._pending_replace.pop(target, None)
            return
        replica = self.replicas.pop(old, None)
        self.endpoints.pop(old, None)
        if replica is not None:
            replica.crash()
        self.kernel.call_later(after_ms, self._add_replacement, target)

    def _add_replacement(self, target: str) -> None:
        new = self._pending_replace.get(target)
        if new is None or new in self.replicas:
            return
        self.alias[target] = new
        self._new_replica(new)
        self.controller.spawn(self._add, target, new)

    async def _add(self, target: str, new: str) -> None:
        env = self.controller.env
        if env is None:
            return
        cluster, name = self._in_cluster(new)
        try:
            if cluster == DEFAULT_CLUSTER:
                await env.add_replica(new, address=new)
            else:
                await env.create_cluster_replica(cluster, name, address=new)
        except Exception as e:
            self.record("add_replica_failed", replica=new, error=type(e).__name__)
            return
        self._pending_replace.pop(target, None)
        self.count("replica_added")

    def _quiet(self) -> None:
        """Faults stop and heal; clients stop acting; the liveness clock starts."""
        self.quiet = True
        self.record("quiet")
        for handle in self._healing:  # what heals later heals now
            if not handle.cancelled:
                handle.cancel()
                handle.callback(*handle.args)
        self._healing.clear()
        self.clocks.heal()
        self.disk.repair()
        if CATALOG_KEY in self.disk.lost:
            self._catalog_back()
        if self.faults.disk_full:
            self._disk_room_ms = self.kernel.now_ms
        self.faults.disk_full = 0
        self.faults.fill_at_catalog.clear()
        self.faults.fsync_stall_ms = 0
        self.faults.crash_points.clear()
        self.faults.consensus_failing = self.faults.blob_failing = 0
        self.faults.slow_factor = 1
        self.network.slow.clear()
        for replica in self.replicas.values():
            replica.crash_on_rehydration = None
            replica.endpoint.refuse_until_ms = 0
            if not replica.alive:
                replica.start()
        if self.storage is not None:
            self.storage.crash_on_rehydration = None
            self.storage.endpoint.refuse_until_ms = 0
            self.storage.bury_zombies()
            self.storage.restart()
        if self.upstreams is not None:
            self.upstreams.heal()
        if self.sink_faults is not None:
            self.sink_faults.failing.clear()
            self.sink_faults.foreign = 0
        self.controller.restart_now()
        for target in sorted(self._pending_replace):
            self._add_replacement(target)
        self.kernel.call_later(self.scenario.quiet_ms // 2, self._mark_quiet)
        late = self.scenario.quiet_ms - SETTLED_MS
        if late > self.scenario.quiet_ms // 2:
            self.kernel.call_later(late, self.checker.settled)

    def _mark_quiet(self) -> None:
        """Half way through the quiet phase, when the controller is surely back: the baseline."""
        self.checker.quiet_started()

    # -- running ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run the world on trio's virtual clock; a violation ends it as :class:`StopRun`."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.start()
            try:
                await self.kernel.run(self.end_ms)
                self.record("end")
                self.checker.check_end()
                self.ending = True
                nursery.cancel_scope.cancel()
            finally:
                # Ended, by a violation too: every controller process dies where it stands, and
                # its shielded work (woken by the closed kernel) unwinds instead of waiting for
                # ever on events no one runs.
                self.controller.end_all()
                self.kernel.close()
