"""Opening and restore: the store, catalog, oracle, replicas and driver, then everything back.

:func:`open_parts` opens what an environment runs on, in order: the shard store
(at the data directory's default URLs, or the given backends), the catalog,
the timestamp oracle (none when read-only: reads follow the tables' uppers),
the replicas' catalog records, the orchestrator of managed replicas, the
transport, the spec controller and its driver; each is pushed on the opening's
exit stack. :meth:`Opening.start` then starts the managed replicas and
restores everything in the catalog (:meth:`Opening.restore`, the one place a
(re)starting controller is built up), and a read-only environment starts
following the writer's catalog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import uuid as _uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tidegate.spec.controller import Controller
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import ReadPolicy
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.types import ComputeParameters
from tidegate.spec.storage import ShardFrontiers, StorageController

from ..catalog import (
    DEFAULT_CLUSTER,
    DEFAULT_READ_POLICY,
    Catalog,
    CatalogState,
    ReplicaEntry,
    apply_ops,
    restore_plan,
)
from ..controller.driver import ControllerDriver
from ..controller.errors import RuntimeControllerError
from ..controller.schemas import parse_shard_name, shard_name
from ..controller.storage_io import CONTROLLER_READER, ShardStorageIO
from ..controller.timestamps import Oracle, UpperOracle, default_oracle
from ..errors import CatalogConflict, CatalogMissing, InvalidEnvironmentOptions
from ..files import mkdir_private
from ..options import EnvironmentOptions
from ..oracle import durable_epoch
from ..platform import Platform
from ..secrets import SecretStore
from ..storage.store import ShardStore
from ..storage.urls import default_urls, open_blob, open_consensus
from ._core import INSTANCE, STORAGE_INSTANCE, Core, log
from ._ddl import Ddl
from ._promotion import Promotion
from ._replicas import (
    ReplicasAndHydration,
    memory_limit_args,
    metrics_host,
    replica_ops,
    start_all,
    storage_replica_ops,
)
from ._sources import SourcesAndSinks, storage_address, storage_wanted

__all__ = ["Opening", "Parts", "open_parts"]


async def _close_all(started: list[Any]) -> None:
    """Close what was started after opening (orchestrators, transports), newest first."""
    for thing in reversed(started):
        await thing.aclose()


@dataclasses.dataclass
class Parts:
    """What :func:`open_parts` opened, and what :meth:`Opening.start` needs of it."""

    driver: ControllerDriver
    catalog: Catalog
    store: ShardStore
    io: ShardStorageIO
    oracle: Oracle
    orchestrator: Any
    platform: Platform
    options: EnvironmentOptions
    state: CatalogState
    """The catalog as it was opened (with the replicas' records applied unless read-only)."""
    entries: tuple[ReplicaEntry, ...]
    """The replicas to run, of every cluster (a read-only environment runs them without
    recording them)."""
    addresses: dict[str, str]
    data_dir: Path | None
    later: list[Any]
    own: Path | None
    """The replicas directory of a read-only environment's own orchestrator."""
    core_ref: list[Core]
    """Filled by :meth:`Opening.start`: the storage replicas' addresses are the core's to say."""
    token: str | None
    """The compute replicas' token (the transport's): see :attr:`Core.token`."""


async def claim_catalog(catalog: Catalog, options: EnvironmentOptions, retry: Any) -> CatalogState:
    """Write ``catalog`` as a new version with this environment's replicas (a read-write open);
    its state. A predecessor's DDL that lands first is kept (the catalog is read again and the
    write retried)."""
    state = catalog.state
    while True:
        ops = replica_ops(
            state, options.replicas, executor=options.executor, spark_master=options.spark_master
        )
        ops += storage_replica_ops(state, options.storage_replica)
        try:
            if ops:
                written: CatalogState = await retry("catalog write", catalog.apply, ops)
            else:
                written = await retry("catalog fence", catalog.touch)
            return written
        except CatalogConflict:
            state = await retry("catalog read", catalog.load)


async def open_parts(
    stack: contextlib.AsyncExitStack,
    data_dir: str | Path | None,
    options: EnvironmentOptions,
) -> Parts:
    """Open what an environment runs on (see the module docstring); each is pushed on ``stack``."""
    blob, consensus, platform = options.blob, options.consensus, options.platform
    blob_url, consensus_url = options.blob_url, options.consensus_url
    oracle, orchestrator, transport = options.oracle, options.orchestrator, options.transport
    executor, spark_master, token = options.executor, options.spark_master, options.token
    given = (blob is not None or blob_url is not None) and (
        consensus is not None or consensus_url is not None
    )
    if data_dir is None and not given:
        tmp = tempfile.mkdtemp(prefix="tidegate-")
        stack.callback(shutil.rmtree, tmp, True)
        data_dir = tmp
    if data_dir is not None:
        # Private: the shards, the catalog and the replicas' logs are nobody else's to read.
        mkdir_private(data_dir)
        default_blob, default_consensus = default_urls(data_dir)
        blob_url = blob_url or default_blob
        consensus_url = consensus_url or default_consensus
    run = platform.run_blocking

    def open_store() -> ShardStore:
        return ShardStore(
            blob if blob is not None else open_blob(str(blob_url)),
            consensus if consensus is not None else open_consensus(str(consensus_url)),
            clock_ms=platform.clock_ms,
            new_id=platform.new_id,
            policy=options.shard_policy,
            background=platform.threads,
            owns_backends=blob is None and consensus is None,  # closed with the store
        )

    store = await run(open_store)
    stack.callback(store.close)
    read_only = options.read_only
    # A read-only environment holds the shards with a critical reader of its own: its
    # holds must not move the writer's (it takes the writer's over when promoted).
    reader = f"{CONTROLLER_READER}-read-only-{platform.new_id()}" if read_only else None
    io = ShardStorageIO(
        store,
        platform=platform,
        reader_id=reader or CONTROLLER_READER,
        since_interval_ms=options.since_downgrade_interval_ms,
    )
    retry = io.retrying  # the store may be unreachable for a while: wait for it
    catalog = Catalog(store.consensus)
    state = await retry("catalog read", catalog.load)
    shard_ids = await retry("shard listing", store.list_shards)
    if catalog.seqno is None:  # no catalog record: refuse if the store holds data all the same
        await _refuse_without_catalog(store, catalog.key, shard_ids, retry)
    tables_upper: list[Callable[[], int | None]] = []
    if read_only:  # no oracle (opening one fences the writer): reads follow the tables
        oracle = UpperOracle(lambda: tables_upper[0]() if tables_upper else None)
    elif oracle is None:
        oracle = await retry(
            "timestamp oracle",
            default_oracle,
            store.consensus,
            platform.clock_ms,
            platform.new_id(),
        )
    own: Path | None = None
    ops = replica_ops(
        state,
        options.replicas,
        executor=executor,
        spark_master=spark_master,
        sizes=options.sizes(),
    )
    ops += storage_replica_ops(state, options.storage_replica)
    wanted = apply_ops(state, ops)
    if data_dir is None and orchestrator is None and any(r.managed for r in wanted.replicas):
        raise RuntimeControllerError(
            "managed replicas need a data directory for their processes: open the "
            "environment with a data_dir, or pass replicas={name: 'host:port'} to connect "
            "to replicas that run already"
        )
    if not read_only:
        # Writing the catalog as a new version fences the previous writer's DDL (as the oracle
        # fenced its writes): a predecessor that still runs -- stopped, taken for dead,
        # resumed -- can change it no more. Its holds are claimed the same way.
        state = wanted = await claim_catalog(catalog, options, retry)
        io.writer_epoch = oracle.epoch or None
    entries = wanted.replicas  # a read-only environment runs them without recording them
    addresses = {r.id: r.address for r in entries if not r.managed and r.address}
    managed = [r for r in entries if r.managed]
    if orchestrator is not None:
        # Authenticated whoever builds the orchestrator: its replicas require its token.
        outer = getattr(orchestrator, "token", None)
        if token is None:
            token = outer
        elif outer is not None and outer != token:
            raise InvalidEnvironmentOptions(
                "token", "differs from the orchestrator's token, which its replicas require"
            )
    if token is None and orchestrator is None and data_dir is not None:
        # Authenticated by default: managed replicas (started now, or by the orchestrator
        # started later for the first one needed, see ensure_orchestrator) start afresh with
        # each open, so a token of this environment's lifetime is enough (never written down).
        token = platform.new_id()
    if managed and orchestrator is None:
        from ..orchestrator import Orchestrator

        assert data_dir is not None  # checked above
        # A read-only environment's replicas get a directory of their own: the writer's
        # orchestrator owns DATA_DIR/replicas (and would reap what it finds there).
        own = Path(data_dir) / f"replicas-{platform.new_id()[:12]}" if read_only else None
        orchestrator = await stack.enter_async_context(
            Orchestrator(
                data_dir,
                executor=executor,
                spark_master=spark_master,
                token=token,
                tls=options.replica_tls,
                replicas_dir=own,
                extra_args=memory_limit_args(options.replica_memory_limit),
                spark_conf=options.spark_conf,
                spark_ui=options.spark_ui,
                metrics_host=metrics_host(options.replica_metrics),
            )
        )
    if transport is None:
        from ..transport.grpc_client import GrpcTransport

        transport = GrpcTransport(token=token, tls=options.tls)
        stack.push_async_callback(transport.aclose)
    # What is started later (the storage replica's orchestrator and transport, when the
    # first source or sink needs them) is closed after the driver, like what is entered here.
    later: list[Any] = []
    stack.push_async_callback(_close_all, later)

    core_ref: list[Core] = []  # the environment's core, once built

    def address_of(name: str) -> str:
        if name in addresses:
            return addresses[name]
        # The core's orchestrator: one started after opening (ensure_orchestrator) counts too.
        running = core_ref[0].orchestrator if core_ref else orchestrator
        if running is None:
            raise LookupError(f"no address for replica {name!r}")
        return str(running.address(name))

    durable = _droppable(state, shard_ids)
    controller = Controller(
        StorageController(
            durable_shards=durable,
            read_only=read_only,
            check_protocol=options.check_protocol,
        ),
        uuid_factory=lambda: _uuid.UUID(hex=platform.new_id()),
        check_protocol=options.check_protocol,
        read_only=read_only,
    )
    # Every replica's Hello brings the writer epoch (a read-only environment's is the writer's
    # it warms up beside): a replica refuses a controller older than one it has served.
    epoch = (
        await retry("writer epoch", durable_epoch, store.consensus) if read_only else oracle.epoch
    )
    controller.set_epoch(epoch)
    if options.max_result_size is not None:  # every instance's first UpdateConfiguration
        controller.compute.update_configuration(
            ComputeParameters(max_result_size=options.max_result_size)
        )

    def storage_address_of(name: str) -> str:
        return storage_address(core_ref[0], name)

    driver = ControllerDriver(
        controller,
        transport,
        io,
        address_of=address_of,
        oracle=oracle,
        instance=INSTANCE,
        tick_ms=options.tick_ms,
        maintain_ms=options.maintain_ms,
        poll_ms=options.poll_ms,
        storage_transport=options.storage_transport,
        storage_address_of=storage_address_of,
    )
    await stack.enter_async_context(driver)
    tables_upper.append(driver.tables_upper)
    return Parts(
        driver,
        catalog,
        store,
        io,
        oracle,
        orchestrator,
        platform,
        options,
        state,
        entries,
        addresses,
        None if data_dir is None else Path(data_dir),
        later,
        own,
        core_ref,
        token,
    )


async def _refuse_without_catalog(
    store: ShardStore, key: str, shard_ids: Sequence[str], retry: Any
) -> None:
    """[CatalogMissing] if the store holds shards or blobs although the catalog record is missing.

    Started empty, the environment would take what it finds for garbage (and
    before, it finalized every shard it found and deleted their blobs): a lost
    or misplaced catalog must stop the open, never delete the data.
    """
    shards = sorted(s for s in shard_ids if parse_shard_name(s) is not None)
    if shards:
        raise CatalogMissing(key, shards)

    def any_blob() -> int:
        return len(store.blob.list_keys())

    blobs = await retry("blob listing", any_blob)
    if blobs:
        raise CatalogMissing(key, [], blobs)


def _droppable(state: CatalogState, shard_ids: Sequence[str]) -> list[GlobalId]:
    """The shards the spec controller may reconcile away: those of objects the catalog recorded
    as dropped. Ids are fresh (never reused) and a shard is created only after the catalog
    records its object, so a user id below the catalog's next id that no live object has was
    dropped by a committed catalog change. Any other shard (a newer catalog's, a foreign
    one) is left alone, with a warning."""
    live = {e.id for e in state.entries()}
    out: list[GlobalId] = []
    for s in shard_ids:
        parsed = parse_shard_name(s)
        if parsed is None:
            continue
        gid, current = parsed
        if not current:  # an earlier schema's shard of a collection that has a new one
            log.info(
                "shard %s holds an earlier schema of %s (now %s): left alone",
                s,
                gid,
                shard_name(gid),
            )
            continue
        if gid in live or (gid.namespace == "u" and gid.value < state.next_user_id):
            out.append(gid)
        else:
            log.warning(
                "shard %s is not in the catalog and was never recorded as dropped: left alone", s
            )
    return out


class Opening:
    """The second half of opening an environment, and its restore (see the module docstring)."""

    def __init__(
        self,
        core: Core,
        ddl: Ddl,
        sources: SourcesAndSinks,
        promotion: Promotion,
        replicas: ReplicasAndHydration,
    ) -> None:
        self.core = core
        self.ddl = ddl
        self.sources = sources
        self.promotion = promotion
        self.replicas = replicas

    async def start(self, stack: contextlib.AsyncExitStack, parts: Parts) -> None:
        """Finish opening over ``parts``: the core's settings, what closing must do, the managed
        replicas, the restore, and (read-only) following the writer's catalog."""
        core, driver, read_only = self.core, parts.driver, parts.options.read_only
        parts.core_ref.append(core)
        core.addresses = parts.addresses
        core.options = parts.options
        core.data_dir = parts.data_dir
        core.secrets = SecretStore(None if parts.data_dir is None else parts.data_dir / "secrets")
        core.later = parts.later
        core.replicas_dir = parts.own
        core.opened_read_only = read_only
        core.token = parts.token
        if read_only:  # its holds go with it, unless it was promoted (they are the writer's then)
            stack.push_async_callback(self.promotion.release_read_only_holds)
        else:
            driver.fence_check = core.fence_check
            stack.push_async_callback(self.sources.finish_slot_drops)  # before the driver stops
        core.io.finalize_check = core.finalize_check  # only what the catalog recorded as dropped
        managed = [r for r in parts.entries if r.managed]
        if managed:
            await start_all(parts.orchestrator, managed, parts.options)
        await self.restore(parts.state, parts.entries)
        if read_only:
            driver.start_soon(self.promotion.follow_catalog, parts.options.tick_ms or 1000)
        else:
            self.sources.drop_replication_slots(parts.state)  # those an earlier one left

    async def restore(self, state: CatalogState, replicas: Sequence[ReplicaEntry]) -> None:
        """Bring back everything in ``state``: collections at their shards' frontiers, then dataflows.

        The one place a (re)starting controller is built up: storage
        collections, a compute instance per cluster, dataflows (each on its
        cluster) with as-ofs from the spec's as-of selection, read policies,
        replicas, and finally initialization complete (replicas then reconcile
        what they run).
        """
        ctl, driver = self.core.driver.ctl, self.core.driver
        frontiers: dict[GlobalId, tuple[Antichain, Antichain]] = {}
        shards: dict[GlobalId, ShardFrontiers] = {}
        plan = restore_plan(state)
        for c in plan.storage_collections:
            fr = await self.core.io.ensure_shard(c.id, c.schema)
            shards[c.id] = fr
            frontiers[c.id] = (fr.since, fr.upper)
            if c.kind in ("table", "system") and fr.upper.elements:  # the controller writes them
                await self.core.io.retrying(
                    "oracle apply",
                    self.core.oracle.apply_write,
                    max(0, int(fr.upper.elements[0]) - 1),
                )
        current = self.core.oracle.read_ts()
        if frontiers:
            plan = restore_plan(
                state,
                frontiers,
                current_time=current,
                read_only=self.core.read_only,
                default_policy=DEFAULT_READ_POLICY,
            )
        descriptions = [
            (c.id, self.core.description(state, c.id, c.kind)) for c in plan.storage_collections
        ]
        # A materialized view whose shard has nothing yet (its controller stopped before the
        # dataflow wrote) is readable from its as_of on, as a new one is.
        as_ofs = {g: df.as_of for df in plan.dataflows for g in df.persist_sink_ids}
        descriptions = [
            (g, dataclasses.replace(d, since=as_of))
            if (as_of := as_ofs.get(g)) is not None
            and as_of.elements
            and shards[g].upper <= shards[g].since
            else (g, d)
            for g, d in descriptions
        ]
        ctl.storage.create_instance(STORAGE_INSTANCE)  # sources and sinks run there
        ctl.storage.create_collections(descriptions, shards)
        driver.apply()
        for cluster_entry in state.clusters:
            ctl.compute.create_instance(cluster_entry.name)
        driver.apply()
        for df in plan.dataflows:
            cluster = state.placement(df.export_ids[0]) or DEFAULT_CLUSTER
            if df.as_of is None:
                df = df.with_as_of(self.ddl.select_as_of(state, df, current, cluster=cluster))
            driver.create_dataflow(df, cluster)
            for id in df.persist_sink_ids:
                ctl.compute.allow_writes(cluster, id)
                driver.apply()
        # Sinks hold what they write out from where it is readable now (their as-ofs follow
        # the SinkAsOf rule); each resumes from what its target already covers.
        for sink in plan.sinks:
            self.sources.install_sink(state, sink.id)
        # Policies last: the dataflows now hold their inputs at their as-ofs, so no
        # policy can move a since past an as_of chosen above. Objects without one compact
        # by the default policy.
        policies = {e.id: self.core.effective_policy(state, e.id) for e in state.entries()}
        storage_ids = {c.id for c in plan.storage_collections}
        storage_policies = [(g, p) for g, p in policies.items() if g in storage_ids]
        if storage_policies:
            driver.set_storage_read_policy(storage_policies)
        by_cluster: dict[str, list[tuple[GlobalId, ReadPolicy]]] = {}
        for g, p in policies.items():
            if g not in storage_ids:
                by_cluster.setdefault(state.placement(g) or DEFAULT_CLUSTER, []).append((g, p))
        for cluster, compute_policies in sorted(by_cluster.items()):
            driver.set_read_policy(compute_policies, cluster)
        self.replicas.connect(replicas)
        ctl.initialization_complete()
        driver.apply()
        ctl.storage.reconcile_state()
        driver.apply()
        if not self.core.read_only and storage_wanted(state):
            await self.sources.connect_storage_replica(state)
