"""A real replica process (``tidegate replica --executor python``) driven over gRPC.

One process serves the whole module; every test opens its own connection (a
new protocol iteration: whatever earlier tests left is reconciled away) and
its own tables. Responses are checked by the spec's ``ControllerSession``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from replica_harness import (
    ROWS,
    SCHEMA,
    Client,
    ReplicaProcess,
    Tables,
    at,
    fresh_id,
    index_dataflow,
    raw_stream,
    replica_process,
    wait_for,
)

from tidegate.runtime.transport.grpc_server import SERVICE
from tidegate.runtime.wire.codec import command_to_bytes
from tidegate.spec.compute_replica import compaction_error_message
from tidegate.spec.frontier import Antichain
from tidegate.spec.plan.relation import AggFunc, Aggregate, Filter, Get, Project, Reduce
from tidegate.spec.plan.scalar import ColumnRef
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Frontiers,
    Hello,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    Schedule,
    SinkExport,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from tidegate.spec.protocol.responses import ComputeResponse

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replica-store")


@pytest.fixture(scope="module")
def replica(storage: Path) -> Iterator[ReplicaProcess]:
    with replica_process(storage) as p:
        yield p


@pytest.fixture(scope="module")
def tables(storage: Path) -> Tables:
    return Tables(storage)


def peek(idx: object, t: int, n: int | None = None) -> Peek:
    u = uuid.UUID(int=n) if n is not None else uuid.uuid4()
    return Peek(PeekDescription(u, idx, t))  # type: ignore[arg-type]


def answer_to(p: Peek):  # type: ignore[no-untyped-def]
    return lambda r: isinstance(r, PeekResponse) and r.uuid == p.peek.uuid


def output_at_least(gid: object, t: int):  # type: ignore[no-untyped-def]
    return lambda r: (
        isinstance(r, Frontiers)
        and r.id == gid
        and r.output is not None
        and (r.output.is_empty() or r.output.elements[0] >= t)
    )


def rows_of(r: ComputeResponse) -> dict[object, int]:
    assert isinstance(r, PeekResponse) and isinstance(r.result, PeekRows), r
    return dict(r.result.rows)


async def installed_index(tables: Tables, replica: ReplicaProcess, *, upper: int = 3):  # type: ignore[no-untyped-def]
    """A table with ROWS (upper ``upper``) and a running index on it, on a fresh connection."""
    t = tables.create()
    tables.append(t, ROWS, upper)
    idx = fresh_id()
    c = await Client.connect(replica.address)
    await c.initialized()
    await c.send(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
    await c.until(output_at_least(idx, upper))
    return c, t, idx


# -- basics -------------------------------------------------------------------------------------


def test_health_service_reports_serving(replica: ReplicaProcess) -> None:
    with grpc.insecure_channel(replica.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", SERVICE):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_peeks_before_at_and_after_the_upper(replica: ReplicaProcess, tables: Tables) -> None:
    async def main() -> None:
        c, t, idx = await installed_index(tables, replica, upper=3)
        before = peek(idx, 0)
        await c.send(before)
        assert rows_of(await c.until(answer_to(before))) == {(1, "a"): 1, (2, "b"): 1}
        last = peek(idx, 2)  # the last complete time
        await c.send(last)
        assert rows_of(await c.until(answer_to(last))) == {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1}
        at_upper, beyond = peek(idx, 3), peek(idx, 5)
        await c.send(at_upper, beyond)
        assert not [r for r in await c.drain(0.3) if isinstance(r, PeekResponse)]
        tables.append(t, [((1, "a"), 3, -1), ((4, "d"), 4, 1)], 5)
        assert rows_of(await c.until(answer_to(at_upper))) == {(2, "b"): 1, (3, "c"): 1}
        assert c.session.unanswered_peeks.keys() == {beyond.peek.uuid}
        tables.append(t, [((5, "e"), 5, 1)], 6)
        assert rows_of(await c.until(answer_to(beyond))) == {
            (2, "b"): 1,
            (3, "c"): 1,
            (4, "d"): 1,
            (5, "e"): 1,
        }
        # Compacted away: the documented error, naming the since.
        await c.send(AllowCompaction(idx, at(4)))
        old = peek(idx, 2)
        await c.send(old)
        r = await c.until(answer_to(old))
        assert isinstance(r, PeekResponse) and r.result == PeekError(
            compaction_error_message(at(4), 2)
        )
        await c.close()

    anyio.run(main)


def test_cancel_of_a_pending_and_of_an_answered_peek(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        c, _t, idx = await installed_index(tables, replica)
        pending = peek(idx, 1000)
        await c.send(pending, CancelPeek(pending.peek.uuid))
        r = await c.until(answer_to(pending))
        assert isinstance(r, PeekResponse) and r.result == PeekCanceled()
        answered = peek(idx, 1)
        await c.send(answered)
        await c.until(answer_to(answered))
        await c.send(CancelPeek(answered.peek.uuid))  # tolerated: no second answer
        later = peek(idx, 2)
        await c.send(later)
        await c.until(answer_to(later))
        answers = [r for r in c.received if isinstance(r, PeekResponse)]
        assert [r.uuid for r in answers] == [pending.peek.uuid, answered.peek.uuid, later.peek.uuid]
        await c.close()

    anyio.run(main)


def test_compaction_to_the_empty_frontier_reports_empty_frontiers_then_nothing(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        c, t, idx = await installed_index(tables, replica)
        await c.send(AllowCompaction(idx, Antichain()))
        r = await c.until(
            lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == Antichain()
        )
        assert isinstance(r, Frontiers) and r.input == Antichain() and r.write == Antichain()
        tables.append(t, [((9, "z"), 3, 1)], 10)
        later = await c.drain(0.5)
        assert not [x for x in later if getattr(x, "id", None) == idx]
        await c.close()

    anyio.run(main)


# -- reconnects -----------------------------------------------------------------------------------


def test_reconnect_drops_pending_peeks_and_reuses_compatible_dataflows(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        t = tables.create()
        tables.append(t, ROWS, 3)
        idx = fresh_id()
        df = index_dataflow(t, index=idx)
        first = await Client.connect(replica.address)
        await first.initialized(CreateDataflow(df), Schedule(idx))
        await first.until(output_at_least(idx, 3))
        pending = peek(idx, 50)
        await first.send(pending)
        await first.drain(0.2)
        reused_before = (
            replica.metric("tidegate_replica_reconciled_dataflows_total", outcome="reused") or 0.0
        )

        second = await Client.connect(replica.address)
        await second.initialized(CreateDataflow(df), Schedule(idx))
        lost = await first.ended()
        assert "ABORTED" in str(lost)
        await second.until(output_at_least(idx, 3))
        tables.append(t, [((7, "g"), 3, 1)], 60)
        p = peek(idx, 55)
        await second.send(p)
        assert rows_of(await second.until(answer_to(p))) == {
            (1, "a"): 1,
            (2, "b"): 1,
            (3, "c"): 1,
            (7, "g"): 1,
        }
        # The first connection's pending peek was dropped, unanswered: the session
        # would have rejected an answer for a uuid it never sent.
        assert not [
            r
            for r in second.received
            if isinstance(r, PeekResponse) and r.uuid == pending.peek.uuid
        ]
        wait_for(
            lambda: (
                (
                    replica.metric("tidegate_replica_reconciled_dataflows_total", outcome="reused")
                    or 0
                )
                >= reused_before + 1
            ),
            what="a reused dataflow in the metrics",
        )
        assert any([str(idx)] in e["reused"] for e in replica.log_events("reconciled"))
        await second.close()

    anyio.run(main)


# -- materialized views and subscribes --------------------------------------------------------------


def test_a_materialized_view_writes_only_after_allow_writes(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        t = tables.create()
        mv = tables.create()  # the view's output shard
        tables.append(t, ROWS, 3)
        obj = fresh_id()
        df = index_dataflow(t, obj=obj, sinks=[SinkExport(mv, obj, MaterializedViewConnection())])
        c = await Client.connect(replica.address)
        await c.initialized(CreateDataflow(df), Schedule(mv))
        await c.drain(0.8)  # read-only: computed, but never written
        assert tables.upper(mv) == at(0)
        assert not [
            r for r in c.received if isinstance(r, Frontiers) and r.write is not None and r.id == mv
        ]
        await c.send(AllowWrites(mv))
        await c.until(
            lambda r: (
                isinstance(r, Frontiers) and r.id == mv and r.write is not None and r.write == at(3)
            )
        )
        assert tables.upper(mv) == at(3)
        assert tables.contents(mv, 2) == {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1}
        tables.append(t, [((2, "b"), 4, -1)], 6)
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == mv and r.write == at(6))
        assert tables.contents(mv, 5) == {(1, "a"): 1, (3, "c"): 1}
        await c.close()

    anyio.run(main)


def test_a_view_written_first_by_another_replica_is_not_written_twice(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        t = tables.create()
        mv = tables.create()
        tables.append(t, ROWS, 3)
        tables.append(mv, ROWS, 3)  # another replica wrote [0, 3) already
        obj = fresh_id()
        df = index_dataflow(t, obj=obj, sinks=[SinkExport(mv, obj, MaterializedViewConnection())])
        c = await Client.connect(replica.address)
        await c.initialized(CreateDataflow(df), Schedule(mv), AllowWrites(mv))
        # The replica's append expecting [0] loses the race; it goes on from [3].
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == mv and r.write == at(3))
        tables.append(t, [((4, "d"), 3, 1)], 4)
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == mv and r.write == at(4))
        assert tables.contents(mv, 3) == {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1, (4, "d"): 1}
        await c.close()

    anyio.run(main)
    assert (replica.metric("tidegate_replica_writes_total", outcome="upper_mismatch") or 0) >= 1


def test_subscribe_batches_are_contiguous_and_end_with_dropped_at(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        t = tables.create()
        tables.append(t, ROWS, 2)
        sub = fresh_id()
        obj = fresh_id()
        plan = Reduce(Get(t, SCHEMA), (), (Aggregate(AggFunc.COUNT),))
        df = index_dataflow(
            t, plan=plan, obj=obj, sinks=[SinkExport(sub, obj, SubscribeConnection())]
        )
        c = await Client.connect(replica.address)
        await c.initialized(CreateDataflow(df), Schedule(sub))

        def batch_upto(n: int):  # type: ignore[no-untyped-def]
            return lambda r: (
                isinstance(r, SubscribeResponse)
                and isinstance(r.result, SubscribeBatch)
                and not r.result.upper.less_equal(n - 1)
            )

        await c.until(batch_upto(2))
        tables.append(t, [((4, "d"), 2, 1), ((1, "a"), 3, -1), ((2, "b"), 3, -1)], 5)
        await c.until(batch_upto(5))
        updates = [
            u
            for r in c.received
            if isinstance(r, SubscribeResponse) and isinstance(r.result, SubscribeBatch)
            for u in r.result.updates
        ]
        assert sorted(updates) == sorted(
            [
                (0, (2,), 1),
                (1, (2,), -1),
                (1, (3,), 1),
                (2, (3,), -1),
                (2, (4,), 1),
                (3, (4,), -1),
                (3, (2,), 1),
            ]
        )
        await c.send(AllowCompaction(sub, Antichain()))
        r = await c.until(
            lambda r: isinstance(r, SubscribeResponse) and isinstance(r.result, SubscribeDroppedAt)
        )
        assert isinstance(r, SubscribeResponse)
        await c.close()

    anyio.run(main)


# -- bad input ---------------------------------------------------------------------------------------


def test_bad_input_gets_a_clear_error_and_the_replica_keeps_its_dataflows(
    replica: ReplicaProcess, tables: Tables
) -> None:
    t = tables.create()
    tables.append(t, ROWS, 3)
    idx = fresh_id()
    df = index_dataflow(t, index=idx)

    async def good_connection(expect: dict[object, int]) -> None:
        c = await Client.connect(replica.address)
        await c.initialized(CreateDataflow(df), Schedule(idx))
        p = peek(idx, 2)
        await c.send(p)
        assert rows_of(await c.until(answer_to(p))) == expect
        await c.close()

    expected = {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1}
    anyio.run(good_connection, expected)

    def start() -> list[bytes]:
        # Every bad stream replays the good dataflow first: a stream that completed an
        # iteration without it would (rightly) drop it.
        cmds = (
            Hello(uuid.uuid4()),
            CreateInstance(InstanceConfig()),
            CreateDataflow(df),
            Schedule(idx),
        )
        return [command_to_bytes(c) for c in cmds]

    cases: list[tuple[list[bytes], grpc.StatusCode, str]] = [
        ([*start(), b"\xff\xff\xff\xff"], grpc.StatusCode.INVALID_ARGUMENT, "malformed command"),
        # An empty command, and one whose only field is unknown (a newer oneof).
        ([b""], grpc.StatusCode.INVALID_ARGUMENT, "without a known kind"),
        ([*start(), b"\xa0\x06\x01"], grpc.StatusCode.INVALID_ARGUMENT, "without a known kind"),
        # Illegal for the stage: a Hello must come first; InitializationComplete twice.
        (
            [command_to_bytes(InitializationComplete())],
            grpc.StatusCode.FAILED_PRECONDITION,
            "stage-order",
        ),
        (
            [
                *start(),
                command_to_bytes(InitializationComplete()),
                command_to_bytes(InitializationComplete()),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "stage-order",
        ),
        # A Get of a collection the dataflow does not import.
        (
            [
                *start(),
                command_to_bytes(
                    CreateDataflow(
                        index_dataflow(t, index=fresh_id(), plan=Get(fresh_id(), SCHEMA))
                    )
                ),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "dataflow-runnable",
        ),
        # An index import of a collection nobody created.
        (
            [
                *start(),
                command_to_bytes(
                    CreateDataflow(
                        DataflowDescription(
                            "bad import",
                            index_imports=(IndexImport(fresh_id(), fresh_id(), (0,)),),
                            objects_to_build=(),
                            as_of=at(0),
                        )
                    )
                ),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "collection-created-first",
        ),
        # Ill-typed plans: a string predicate, a column out of range.
        (
            [
                *start(),
                command_to_bytes(
                    CreateDataflow(
                        index_dataflow(
                            t, index=fresh_id(), plan=Filter(Get(t, SCHEMA), (ColumnRef(1),))
                        )
                    )
                ),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "dataflow-runnable",
        ),
        (
            [
                *start(),
                command_to_bytes(
                    CreateDataflow(
                        index_dataflow(t, index=fresh_id(), plan=Project(Get(t, SCHEMA), (7,)))
                    )
                ),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "dataflow-runnable",
        ),
        # A peek of an unknown id.
        (
            [
                *start(),
                command_to_bytes(InitializationComplete()),
                command_to_bytes(peek(fresh_id(), 0)),
            ],
            grpc.StatusCode.FAILED_PRECONDITION,
            "collection-created-first",
        ),
    ]
    for requests, code, words in cases:
        err = raw_stream(replica.address, requests)
        assert err.code() == code, (err.code(), err.details())
        assert words in (err.details() or ""), err.details()
        assert replica.alive()
        anyio.run(good_connection, expected)
    assert replica.metric("tidegate_replica_command_errors_total", error="DataflowRejected")


# -- metrics ------------------------------------------------------------------------------------------


def test_metrics_endpoint_exposes_the_replica_metrics(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        c, _t, idx = await installed_index(tables, replica)
        p = peek(idx, 1)
        await c.send(p)
        await c.until(answer_to(p))
        await c.drain(0.2)
        text = replica.scrape()
        for name in [
            "tidegate_replica_connections_accepted_total",
            "tidegate_replica_commands_total",
            "tidegate_replica_responses_total",
            "tidegate_replica_peek_latency_seconds_bucket",
            "tidegate_replica_step_latency_seconds_count",
            "tidegate_replica_frontier_lag_seconds",
            "tidegate_replica_output_frontier_timestamp_seconds",
            "process_resident_memory_bytes",
            "python_gc_objects_collected_total",
            'tidegate_build_info{component="replica",version="',
            "tidegate_replica_arrangement_records",
        ]:
            assert name in text, name
        assert (
            replica.metric("tidegate_replica_peek_latency_seconds_count", result="rows") or 0
        ) >= 1
        assert replica.metric("tidegate_replica_arrangement_records", collection=str(idx)) == 3
        assert replica.metric("tidegate_replica_frontier_lag_seconds", collection=str(idx)) == 0
        assert replica.metric("tidegate_replica_commands_total", kind="Peek")
        await c.close()

    anyio.run(main)


# -- stages and persist peeks ------------------------------------------------------------------------


def test_nothing_is_sent_before_initialization_complete(
    replica: ReplicaProcess, tables: Tables
) -> None:
    async def main() -> None:
        t = tables.create()
        tables.append(t, ROWS, 3)
        idx = fresh_id()
        c = await Client.connect(replica.address)
        p = peek(idx, 1)
        await c.send(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx), p)
        assert await c.drain(0.5) == []  # computed maybe, but nothing may be sent yet
        await c.send(InitializationComplete())
        assert rows_of(await c.until(answer_to(p))) == {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1}
        await c.close()

    anyio.run(main)


def test_persist_peeks_read_storage_once_its_upper_passes_their_time(
    replica: ReplicaProcess, tables: Tables
) -> None:
    def persist_peek(gid: object, t: int) -> Peek:
        return Peek(PeekDescription(uuid.uuid4(), gid, t, target="persist"))  # type: ignore[arg-type]

    async def main() -> None:
        t = tables.create()
        tables.append(t, ROWS, 3)
        c = await Client.connect(replica.address)
        await c.initialized()
        now, later, missing = persist_peek(t, 0), persist_peek(t, 8), persist_peek(fresh_id(), 0)
        await c.send(now, later, missing)
        assert rows_of(await c.answer(now.peek.uuid)) == {(1, "a"): 1, (2, "b"): 1}
        r = await c.answer(missing.peek.uuid)
        assert isinstance(r, PeekResponse) and isinstance(r.result, PeekError)
        assert "UnknownShard" in r.result.message
        assert later.peek.uuid in c.session.unanswered_peeks
        tables.append(t, [((2, "b"), 5, -1)], 9)
        assert rows_of(await c.until(answer_to(later))) == {(1, "a"): 1, (3, "c"): 1}
        await c.close()

    anyio.run(main)
