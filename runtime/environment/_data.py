"""Reads and writes: appends, peeks, subscribes, copy-to, and the times they read at.

Appends are checked against the table's schema, then group-committed by the
driver at one timestamp. A read without a time reads at the freshest time
(:meth:`ReadsAndWrites.freshest`): the oracle's read timestamp, or the object's
since if later, once its durable inputs (tables and sources, looked up through
views and indexes) are complete there; a time at or past their upper is
refused. Peeks, subscribes and copy-tos are the driver's, on dataflows built
here from plans.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from tidegate.spec.compute import ComputeReadHold
from tidegate.spec.errors import (
    AbsurdSubscribeBounds,
    CollectionMissing,
    ReadBeyondUpper,
    ReadHoldMissing,
    TypeMismatch,
)
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, Schema, gets
from tidegate.spec.plan.builder import Frame
from tidegate.spec.plan.schema import check_row
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexImport,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from tidegate.spec.storage import SourceStatus
from tidegate.spec.storage.holds import StorageReadHold

from ..catalog import (
    DEFAULT_CLUSTER,
    CatalogState,
    IndexEntry,
    MaterializedViewEntry,
    ProgressEntry,
    SourceEntry,
    SystemCollectionEntry,
    TableEntry,
)
from ..controller.errors import (
    RuntimeControllerError,
    SourceCeased,
    SourceStalled,
    SourceUnreadable,
)
from ..controller.streams import Subscription
from ..errors import UnknownCatalogObject, WrongCluster
from ..frames import PeekAnswer, frame_updates, is_frame
from ._core import Core, Ref
from ._ddl import Ddl

__all__ = ["ReadsAndWrites"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _updates(schema: Schema, rows: Iterable[Any], what: str) -> list[tuple[Row, int]]:
    """``rows`` (tuples, ``(row, diff)`` pairs, or an Arrow table/batch or DataFrame: see
    :mod:`tidegate.runtime.frames`) checked against ``schema``, as ``(row, diff)``."""
    if is_frame(rows):
        return frame_updates(schema, rows, what)
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise TypeMismatch(
            f"{what}: rows must be an iterable of tuples or (row, diff) pairs, got {rows!r}"
        )
    out: list[tuple[Row, int]] = []
    for item in rows:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple):
            # A (row, diff) pair: no column holds a tuple, so the shape says which it is.
            row, diff = item
            if type(diff) is not int or not _INT64_MIN <= diff <= _INT64_MAX:
                raise TypeMismatch(
                    f"{what} row {row!r}: its diff must be an int64 (a count), got {diff!r}"
                )
        else:
            row, diff = item, 1
        check_row(row, schema, f"{what} row")
        out.append((row, diff))
    return out


def _project(schema: Schema, finishing: RowSetFinishing | None) -> Schema:
    """The schema of a peek's rows: ``schema``, projected by ``finishing`` if it projects."""
    if finishing is None or finishing.project is None:
        return schema
    return Schema(tuple(schema.columns[i] for i in finishing.project))


class ReadsAndWrites:
    """Appends, peeks, subscribes and copy-tos of one environment (see the module docstring)."""

    def __init__(self, core: Core, ddl: Ddl) -> None:
        self.core = core
        self.ddl = ddl
        self._tables_cache: tuple[CatalogState | None, dict[Ref, TableEntry]] = (None, {})
        """Tables by the refs appends named them with, for one catalog state."""

    async def append(
        self, table: Ref, rows: Iterable[Any], *, request_id: str | None = None
    ) -> int:
        """Append rows (tuples, or ``(row, diff)`` pairs) to ``table``; the write timestamp, once durable."""
        return await self.append_many([(table, rows)], request_id=request_id)

    async def append_many(
        self, batches: Iterable[tuple[Ref, Iterable[Any]]], *, request_id: str | None = None
    ) -> int:
        """Append several batches (to one or more tables; a table may repeat) at one timestamp."""
        checked: list[tuple[GlobalId, list[tuple[Row, int]]]] = []
        for ref, rows in batches:
            entry = self._table_entry(ref)
            checked.append((entry.id, _updates(entry.schema, rows, entry.name)))
        if not checked:
            raise TypeMismatch("append_many needs at least one batch")
        return (await self.core.driver.append_many(checked, request_id=request_id))[0]

    def _table_entry(self, ref: Ref) -> TableEntry:
        """The table ``ref`` names [UnknownCatalogObject, IdentifierInvalid]; cached per
        catalog state (an immutable value: any change replaces it), as every append asks."""
        state = self.core.state
        cache = self._tables_cache
        if cache[0] is not state:
            cache = self._tables_cache = (state, {})
        entry = cache[1].get(ref) if isinstance(ref, str | GlobalId) else None
        if entry is not None:
            return entry
        gid = self.core.resolve(ref)
        found = state.get(gid)
        if not isinstance(found, TableEntry):
            from tidegate.spec.errors import IdentifierInvalid

            raise IdentifierInvalid(gid, f"{found.name} is not a table")
        if isinstance(ref, str | GlobalId):
            cache[1][ref] = found
        return found

    async def _resolve_read(self, ref: Ref) -> GlobalId:
        """``ref``'s id for a read [UnknownCatalogObject]; a writer that does not know it first
        confirms that no newer environment took over [EnvironmentFenced]: a deposed one's
        catalog is stale (its successor may have created the object), so "unknown" from it
        would be a wrong answer."""
        try:
            return self.core.resolve(ref)
        except UnknownCatalogObject:
            if not self.core.read_only:
                await self.core.driver.confirm_leader()
            raise

    async def peek(
        self,
        ref: Ref,
        at: int | None = None,
        key: Row | None = None,
        finishing: RowSetFinishing | Sequence[ColumnOrder] | None = None,
        *,
        limit: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
    ) -> PeekAnswer:
        """The contents of ``ref`` at time ``at`` as ``(row, count)`` pairs (a
        :class:`~tidegate.runtime.frames.PeekAnswer`: a list with ``to_arrow()``/``to_pandas()``).

        ``at`` defaults to :meth:`freshest` (every acknowledged append shows). It
        must not be before ``ref``'s since [SinceViolation] nor at or beyond
        the upper of its durable inputs (tables, views) [ReadBeyondUpper]; a
        time the inputs have completed is answered once the index catches up.
        ``key`` looks up one key of an index; ``finishing``
        (or a list of column orders, plus ``limit``) orders and limits;
        ``replica`` asks that replica only (a :class:`PeekFailed` if it fails
        meanwhile) [ReplicaMissing]. Dropping ``ref`` while the peek waits
        fails it with :class:`DependencyDropped`, a :class:`PeekFailed`.
        """
        gid = await self._resolve_read(ref)
        entry = self.core.state.get(gid)
        target: Literal["index", "persist"] = (
            "index" if isinstance(entry, IndexEntry) else "persist"
        )
        cluster = self.cluster_of(entry, cluster)
        if finishing is None and limit is not None:
            finishing = RowSetFinishing(limit=limit)
        elif finishing is not None and not isinstance(finishing, RowSetFinishing):
            finishing = RowSetFinishing(order_by=tuple(finishing), limit=limit)
        constraints = None
        if key is not None:
            if not isinstance(entry, IndexEntry):
                raise RuntimeControllerError(f"key lookups need an index; {entry.name} is not one")
            constraints = (self._check_key(entry, key),)
        with self._held_for(gid) if at is None else self._held() as held:
            at = await self._read_time(gid, at)
            pairs = await self.core.driver.peek(
                gid,
                at,
                finishing=finishing,
                target=target,
                literal_constraints=constraints,
                target_replica=self.replica_id(cluster, replica),
                instance=cluster,
                issued=held.release,
            )
        return PeekAnswer(pairs, _project(self.core.schema(gid), finishing))

    def cluster_of(self, entry: object, cluster: str | None) -> str:
        """The cluster a read of ``entry`` runs on: ``cluster`` (default: an index's or a
        materialized view's own, else ``default``); an index only in its own [WrongCluster]."""
        if isinstance(entry, IndexEntry):
            if cluster is not None and cluster != entry.cluster:
                raise WrongCluster(entry.name, entry.cluster, cluster)
            return entry.cluster
        if cluster is not None:
            self.core.state.cluster(cluster)  # UnknownCatalogObject
            return cluster
        if isinstance(entry, MaterializedViewEntry):
            return entry.cluster
        return DEFAULT_CLUSTER

    def replica_id(self, cluster: str, replica: str | None) -> str | None:
        """Replica ``replica`` of ``cluster`` as the controller knows it (``None`` stays)."""
        if replica is None:
            return None
        from ..catalog import replica_id

        return replica_id(cluster, replica)

    async def _read_time(self, gid: GlobalId, at: int | None) -> int:
        """``at``, or :meth:`freshest` by default; a time at or past the inputs' upper is
        refused [ReadBeyondUpper]."""
        if at is None:
            return await self.freshest(gid)
        upper = self._input_upper(gid)
        if upper.less_equal(at):
            raise ReadBeyondUpper(gid, at, upper)
        return at

    def _check_key(self, entry: IndexEntry, key: Any) -> Row:
        """``key`` as a row of the index's key columns [ArityMismatch, TypeMismatch].

        A NULL is allowed in any key column (it matches nothing, as in SQL).
        """
        columns = self.core.state.schema_of(entry.id).columns
        key_schema = Schema(
            tuple(
                dataclasses.replace(c, type=dataclasses.replace(c.type, nullable=True))
                for c in (columns[k] for k in entry.keys)
            )
        )
        if type(key) is not tuple:
            raise TypeMismatch(
                f"a key of index {entry.name} is a tuple of its key columns {key_schema}, got {key!r}"
            )
        check_row(key, key_schema, f"key of index {entry.name}")
        return key

    async def freshest(self, ref: Ref) -> int:
        """The time a read of ``ref`` that starts now takes: every acknowledged append shows there."""
        gid = await self._resolve_read(ref)
        with self._held_for(gid):
            return await self._fresh_time([gid], self._since_of(gid), gid)

    async def hold_fresh(self, refs: Sequence[Ref]) -> FreshRead:
        """The freshest time a read of every one of ``refs`` can take, and read holds on what
        they read that keep that time readable until :meth:`FreshRead.release`."""
        gids = [await self._resolve_read(r) for r in refs]
        holds = self._acquire_for(gids)
        try:
            times = [await self._fresh_time([g], self._since_of(g), g) for g in gids]
        except BaseException:
            holds.release()
            raise
        return FreshRead(max(times) if times else self.core.oracle.read_ts(), holds)

    async def hold_at(self, refs: Sequence[Ref], time: int) -> FreshRead | None:
        """Read holds keeping ``time`` readable on what reads of ``refs`` read, if every one of
        them is still readable there (its since at or before ``time``); else ``None``, holding
        nothing."""
        gids = [await self._resolve_read(r) for r in refs]
        holds = self._acquire_for(gids)
        if all(self.frontiers(g)[0].less_equal(time) for g in gids):
            return FreshRead(time, holds)
        holds.release()
        return None

    def _since_of(self, gid: GlobalId) -> Callable[[], Antichain]:
        return lambda: self.frontiers(gid)[0]

    def _reads_of(self, gid: GlobalId) -> tuple[list[GlobalId], list[tuple[str, GlobalId]]]:
        """What a read of ``gid`` reads: the index in its cluster, or the storage collection."""
        entry = self.core.state.get(gid)
        if isinstance(entry, IndexEntry):
            return [], [(entry.cluster, gid)]
        if self.core.state.sink(gid) is not None:
            return [], []
        return [gid], []

    def _acquire_for(self, gids: Sequence[GlobalId]) -> _Holds:
        """Read holds at their sinces now on what reads of ``gids`` read (:meth:`_reads_of`)."""
        storage: list[GlobalId] = []
        indexes: list[tuple[str, GlobalId]] = []
        for gid in gids:
            s, i = self._reads_of(gid)
            storage += s
            indexes += i
        return self._acquire(storage, indexes)

    def _held_for(self, gid: GlobalId) -> contextlib.AbstractContextManager[_Holds]:
        """Read holds (see :meth:`_held`) on what a read of ``gid`` reads (:meth:`_reads_of`)."""
        storage, indexes = self._reads_of(gid)
        return self._held(storage, indexes)

    def _acquire(
        self, storage: Iterable[GlobalId], indexes: Iterable[tuple[str, GlobalId]]
    ) -> _Holds:
        ctl = self.core.driver.ctl
        holds = _Holds(
            self.core,
            ctl.storage.acquire_read_holds(storage),
            [ctl.compute.acquire_read_hold(c, g) for c, g in indexes],
        )
        self.core.driver.apply()
        return holds

    @contextlib.contextmanager
    def _held(
        self,
        storage: Iterable[GlobalId] = (),
        indexes: Iterable[tuple[str, GlobalId]] = (),
    ) -> Iterator[_Holds]:
        """Read holds on the ``storage`` collections and the ``indexes`` (``(cluster, id)``) at
        their sinces now, until the block ends or its :meth:`_Holds.release` is called.

        A fresh read chooses its time and waits for the upper to pass it inside the block, and
        the holds go once its read is issued (which holds the time itself), as Materialize's
        timestamp selection holds its inputs first and hands the holds to the peek. Without
        them a since that follows the upper closely (a read policy of lag 0) passes every time
        the read chooses while it waits, and the read waits for ever."""
        holds = self._acquire(storage, indexes)
        try:
            yield holds
        finally:
            holds.release()

    async def _fresh_time(
        self, inputs: Sequence[GlobalId], since: Callable[[], Antichain], what: GlobalId
    ) -> int:
        """The freshest read time over ``inputs`` (see :meth:`freshest`), at or after ``since()``.

        A writer first confirms that no newer environment took over [EnvironmentFenced]: one
        that did may have acknowledged writes this one's read timestamp does not cover.
        """
        if not self.core.read_only:
            await self.core.driver.confirm_leader()
        while True:
            lower = since()
            if not lower.elements:
                raise CollectionMissing(what)
            if self.core.read_only:  # the writer moves the tables: learn where they are now
                await self.core.driver.poll_uppers()
            read = self.core.oracle.read_ts()
            t = max(int(lower.elements[0]), read)
            if t > read:
                await self.core.io.retrying("oracle apply", self.core.oracle.apply_write, t)
            if self._input_upper(*inputs).less_equal(t):
                blocked = self._unreadable_input(*inputs)
                if blocked is not None:  # its data is not coming: say so rather than wait
                    raise blocked
                self.core.driver.request_commit()  # every table then moves past t
                await self.core.driver.wait_frontiers(
                    lambda t=t: (  # type: ignore[misc]
                        not self._input_upper(*inputs).less_equal(t)
                        or self._unreadable_input(*inputs) is not None
                    )
                )
                continue  # judged again (a source may have stalled or ceased meanwhile)
            if since().less_equal(t):  # not compacted past t while waiting
                return t

    def input_upper(self, plan: Frame | Plan | Ref) -> Antichain:
        """The upper of the tables and sources ``plan`` reads (see :meth:`_input_upper`)."""
        return self._input_upper(*gets(self.core.plan(plan)))

    def _input_upper(self, *gids: GlobalId) -> Antichain:
        """The upper of the tables and sources ``gids`` read (through views and indexes): where
        appends and ingested data land.

        Views are looked through: a view's shard lags the tables it is computed
        from, and a time chosen from its upper could miss an acknowledged append.
        A source's upper is where its storage replica has ingested to: a read at
        a later time waits for it (as Materialize's strict-serializable reads do).
        """
        state, seen, stack = self.core.state, set(), list(gids)
        uppers: list[Antichain] = []
        while stack:
            g = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            if state.view(g) is None and isinstance(state.get(g), _DURABLE_INPUTS):
                uppers.append(self.core.driver.storage_frontiers(g)[1])
            else:
                stack.extend(state.dependencies(g))
        return Antichain.meet_all(uppers) if uppers else Antichain.empty()

    def _unreadable_input(self, *gids: GlobalId) -> SourceUnreadable | None:
        """The error of a source among what ``gids`` read (through views, indexes and materialized
        views) whose status fails reads (:attr:`StatusUpdate.fails_reads`: ``stalled`` or
        ``ceased``): :class:`SourceCeased` before :class:`SourceStalled`, else ``None``.

        A read that must wait for such a source's data is answered with its error, as in
        Materialize; one only slow (``starting``, ``running``) is waited for.
        """
        state, seen, stack = self.core.state, set(), list(gids)
        storage = self.core.driver.ctl.storage
        found: list[SourceUnreadable] = []
        while stack:
            g = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            if state.view(g) is not None:  # a view has no collection: look through it first
                stack.extend(state.dependencies(g))
                continue
            entry = state.get(g)
            if isinstance(entry, SourceEntry):
                status = storage.status(g)
                if status is not None and status.fails_reads:
                    kind = SourceCeased if status.status is SourceStatus.CEASED else SourceStalled
                    found.append(kind(g, status.error, entry.name))
            elif not isinstance(entry, _DURABLE_INPUTS):
                stack.extend(state.dependencies(g))
        found.sort(key=lambda e: (not isinstance(e, SourceCeased), str(e.source)))
        return found[0] if found else None

    def frontiers(self, ref: Ref) -> tuple[Antichain, Antichain]:
        """``(since, upper)`` of object ``ref`` (of a sink: the time it holds its input at, and
        the frontier its target covers)."""
        gid = self.core.resolve(ref)
        if self.core.state.sink(gid) is not None:  # what it holds its input at, and what it covers
            export = self.core.driver.ctl.storage.export(gid)
            return export.read_capability, export.upper
        entry = self.core.state.get(gid)
        if isinstance(entry, IndexEntry):
            return self.core.driver.frontiers(gid, entry.cluster)
        return self.core.driver.storage_frontiers(gid)

    async def subscribe(
        self,
        plan: Frame | Plan | Ref,
        as_of: int | None = None,
        *,
        buffer: int | None = None,
        replica: str | None = None,
        cluster: str | None = None,
        up_to: int | None = None,
        snapshot: bool = True,
    ) -> Subscription:
        """Stream the changes of ``plan`` from ``as_of`` (default: the freshest time, see
        :meth:`freshest`), computed on ``cluster`` (default: that of the indexes it reads, else
        ``default``); ``snapshot=False`` leaves out the as_of's contents, ``up_to`` ends the
        stream once its frontier reaches it (the dataflow's ``until`` and its sink's ``up_to``,
        so the replica stops it) [AbsurdSubscribeBounds if before the as_of]."""
        p = self.core.plan(plan)
        schema = self.core.checked_schema(p)
        cluster = self._plan_cluster(p, cluster)
        gid = self.core.driver.new_transient_id()
        if as_of is not None:
            df = self._dataflow(p, gid, Antichain([as_of]), up_to=up_to, snapshot=snapshot)
        else:  # the freshest time (see :meth:`freshest`), where the inputs are readable
            df = self._dataflow(p, gid, None, up_to=up_to, snapshot=snapshot)
            inputs = sorted(gets(p))
            if self._input_upper(*inputs).elements:
                held = self._held(
                    storage=[s.id for s in df.source_imports],
                    indexes=[(cluster, i.id) for i in df.index_imports],
                )
                with held:
                    t = await self._fresh_time(inputs, lambda: self._inputs_since(df, cluster), gid)
                    df = df.with_as_of(Antichain([t]))
                    return self._subscribed(df, schema, up_to, buffer, cluster, replica)
            else:  # complete inputs: still a fresh read, so a deposed writer must not choose it
                if not self.core.read_only:
                    await self.core.driver.confirm_leader()
                df = df.with_as_of(
                    self.ddl.select_as_of(
                        self.core.state, df, self.core.oracle.read_ts(), cluster=cluster
                    )
                )
        return self._subscribed(df, schema, up_to, buffer, cluster, replica)

    def _subscribed(
        self,
        df: DataflowDescription,
        schema: Schema,
        up_to: int | None,
        buffer: int | None,
        cluster: str,
        replica: str | None,
    ) -> Subscription:
        """The subscription of ``df`` (its as_of chosen) [AbsurdSubscribeBounds]."""
        chosen = df.as_of.elements if df.as_of is not None else ()
        if up_to is not None and chosen and up_to < int(chosen[0]):
            raise AbsurdSubscribeBounds(
                f'subscription lower ("as of") bound is beyond its upper ("up to") bound: '
                f"{up_to} < {chosen[0]}",
                hint="subscribe up to a later time, or from an earlier one (AS OF)",
            )
        sub = self.core.driver.subscribe(
            df, buffer=buffer, target_replica=self.replica_id(cluster, replica), instance=cluster
        )
        sub.schema = schema  # its batches have to_arrow() and to_pandas()
        return sub

    def _dataflow(
        self,
        plan: Plan,
        export: GlobalId,
        as_of: Antichain | None,
        *,
        up_to: int | None = None,
        snapshot: bool = True,
    ) -> DataflowDescription:
        state = self.core.state
        sources: list[SourceImport] = []
        imports: list[IndexImport] = []
        for gid in sorted(gets(plan)):
            entry = state.get(gid)
            if isinstance(entry, IndexEntry):
                imports.append(IndexImport(gid, gid, entry.keys))
            else:
                sources.append(SourceImport(gid))
        until = Antichain([up_to]) if up_to is not None else Antichain.empty()
        return DataflowDescription(
            f"subscribe {export}",
            source_imports=tuple(sources),
            index_imports=tuple(imports),
            objects_to_build=(BuildDesc(export, plan),),
            sink_exports=(SinkExport(export, export, SubscribeConnection(), snapshot, until),),
            as_of=as_of,
            until=until,
        )

    def _inputs_since(self, df: DataflowDescription, cluster: str) -> Antichain:
        """The earliest time every input of ``df`` is readable (the join of their sinces)."""
        since = Antichain([0])
        for s in df.source_imports:
            since = since.join(self.core.driver.storage_frontiers(s.id)[0])
        for ii in df.index_imports:
            since = since.join(self.core.driver.frontiers(ii.id, cluster)[0])
        return since

    def _plan_cluster(self, plan: Plan, cluster: str | None) -> str:
        """Where a dataflow of ``plan`` runs: ``cluster``, else where the indexes it reads are,
        else ``default``; an index read from another cluster is refused [WrongCluster]."""
        state = self.core.state
        indexes = [e for g in gets(plan) if isinstance(e := state.get(g), IndexEntry)]
        if cluster is None:
            cluster = indexes[0].cluster if indexes else DEFAULT_CLUSTER
        else:
            state.cluster(cluster)  # UnknownCatalogObject
        for e in indexes:
            if e.cluster != cluster:
                raise WrongCluster(e.name, e.cluster, cluster)
        return cluster

    async def copy_to(
        self, ref: Ref, url: str, *, at: int | None = None, cluster: str | None = None
    ) -> int:
        """Write the contents of ``ref`` at time ``at`` once, as Parquet files under ``url``."""
        from urllib.parse import urlsplit

        from tidegate.spec.protocol.types import CopyToConnection

        from ..controller.errors import CopyToFailed

        if urlsplit(url).scheme not in ("file", "s3", "mem"):
            raise CopyToFailed(ref, url, "unsupported URL scheme (use file:// or s3://)")
        gid = await self._resolve_read(ref)
        with self._held_for(gid) if at is None else self._held():
            at = await self._read_time(gid, at)
            plan = self.core.plan(gid)
            cluster = self._plan_cluster(plan, cluster)
            cid = self.core.driver.new_transient_id()
            df = self._dataflow(plan, cid, Antichain([at]))
            sink = SinkExport(cid, cid, CopyToConnection(url), up_to=Antichain([at + 1]))
            df = dataclasses.replace(df, debug_name=f"copy-to {cid}", sink_exports=(sink,))
            return await self.core.driver.copy_to(df, instance=cluster)

    async def wait_for(self, ref: Ref, time: int, *, timeout_s: float | None = None) -> None:
        """Wait until object ``ref`` is complete beyond ``time`` (its upper passed it)."""
        gid = self.core.resolve(ref)
        await self.core.driver.wait_frontiers(
            lambda: not self.frontiers(gid)[1].less_equal(time), timeout_s=timeout_s
        )


class _Holds:
    """The read holds a fresh read took (see :meth:`ReadsAndWrites._held`)."""

    def __init__(
        self, core: Core, storage: list[StorageReadHold], indexes: list[ComputeReadHold]
    ) -> None:
        self._core, self._storage, self._indexes = core, storage, indexes

    def release(self) -> None:
        """Give the holds back (again: nothing)."""
        if not self._storage and not self._indexes:
            return
        compute = self._core.driver.ctl.compute
        for h in self._storage:
            h.release()
        for hold in self._indexes:
            with contextlib.suppress(ReadHoldMissing):  # its cluster was dropped meanwhile
                compute.release_read_hold(hold)
        self._storage, self._indexes = [], []
        self._core.driver.apply()


class FreshRead:
    """A read time chosen fresh (:meth:`Environment.hold_fresh`) and the read holds that keep
    it readable: a read-only transaction's, which reads at one time from its first read to its
    end, as Materialize's transactions hold back compaction of what they read."""

    def __init__(self, time: int, holds: _Holds) -> None:
        self.time = time
        self._holds = holds

    def release(self) -> None:
        """Give the holds back: compaction may pass :attr:`time` again (again: nothing)."""
        self._holds.release()


_DURABLE_INPUTS = (TableEntry, SourceEntry, ProgressEntry, SystemCollectionEntry)
"""Collections written outside compute: a read at a time waits for their uppers to pass it."""
