"""Example tests pinning the documented behaviour of the command history (reference/compute.md section 8)."""

from __future__ import annotations

import uuid

import pytest

from tidegate.spec.errors import (
    HistoryAsOfUnset,
    HistoryRepeatsCreateInstance,
    HistoryRepeatsHello,
    NotACommand,
    TidegateError,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.history import CommandHistory, reduce_commands
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    InitializationComplete,
    InstanceConfig,
    MaterializedViewConnection,
    Peek,
    PeekDescription,
    Schedule,
    SinkExport,
    SourceImport,
    SubscribeConnection,
    UpdateConfiguration,
)

U1, U2, U3, U4 = (GlobalId.user(i) for i in range(1, 5))
S1 = GlobalId.system(1)
SRC = GlobalId.user(99)


def af(*times: int) -> Antichain:
    return Antichain(times)


def index_dataflow(gid: GlobalId, as_of: int, name: str | None = None) -> CreateDataflow:
    return CreateDataflow(
        DataflowDescription(
            debug_name=name or f"df-{gid}",
            source_imports=(SourceImport(SRC, af(as_of)),),
            index_exports=(IndexExport(gid, gid),),
            as_of=af(as_of),
        )
    )


def two_export_dataflow(
    index: GlobalId, sink: GlobalId, as_of: int, *, mv: bool = False
) -> CreateDataflow:
    connection = MaterializedViewConnection() if mv else SubscribeConnection()
    return CreateDataflow(
        DataflowDescription(
            debug_name=f"df-{index}-{sink}",
            index_exports=(IndexExport(index, index),),
            sink_exports=(SinkExport(sink, index, connection),),
            as_of=af(as_of),
        )
    )


def peek(n: int, gid: GlobalId = U1, t: int = 5) -> Peek:
    return Peek(PeekDescription(uuid.UUID(int=n), gid, t))


def reduced(*cmds: object) -> list[object]:
    h = CommandHistory()
    for c in cmds:
        h.push(c)  # type: ignore[arg-type]
    h.reduce()
    return list(h)


HELLO = Hello(uuid.UUID(int=0))
CREATE = CreateInstance(InstanceConfig())


def test_replay_order_is_the_documented_one() -> None:
    cmds = [
        HELLO,
        CREATE,
        InitializationComplete(),
        UpdateConfiguration(ComputeParameters(max_result_size=10)),
        two_export_dataflow(U3, U4, 0, mv=True),
        index_dataflow(U1, 0),
        Schedule(U3),
        Schedule(U4),
        Schedule(U1),
        AllowWrites(U4),
        peek(2, U1),
        peek(1, U3),
        AllowCompaction(U4, af(3)),
        AllowCompaction(S1, af(2)),
    ]
    out = reduced(*cmds)
    assert [type(c).__name__ for c in out] == [
        "Hello",
        "CreateInstance",
        "UpdateConfiguration",
        "CreateDataflow",
        "CreateDataflow",
        "Schedule",
        "Schedule",
        "Schedule",
        "Peek",
        "Peek",
        "AllowCompaction",
        "AllowCompaction",
        "AllowWrites",
        "InitializationComplete",
    ]
    # Peeks by uuid, compactions by GlobalId (system before user).
    assert [c.peek.uuid.int for c in out if isinstance(c, Peek)] == [1, 2]
    assert [c.id for c in out if isinstance(c, AllowCompaction)] == [S1, U4]
    # Dataflows and schedules keep their original order.
    assert [c.dataflow.debug_name for c in out if isinstance(c, CreateDataflow)] == [
        f"df-{U3}-{U4}",
        f"df-{U1}",
    ]
    assert [c.id for c in out if isinstance(c, Schedule)] == [U3, U4, U1]


def test_h3_fully_dropped_dataflow_disappears_with_its_commands() -> None:
    out = reduced(
        HELLO,
        two_export_dataflow(U1, U2, 0, mv=True),
        Schedule(U1),
        Schedule(U2),
        AllowWrites(U2),
        AllowCompaction(U1, af(4)),
        AllowCompaction(U2, af()),
        AllowCompaction(U1, af()),
        index_dataflow(U3, 1),
        Schedule(U3),
    )
    assert out == [HELLO, index_dataflow(U3, 1), Schedule(U3)]


def test_h4_single_export_as_of_is_the_final_frontier() -> None:
    out = reduced(
        index_dataflow(U1, 2),
        Schedule(U1),
        AllowCompaction(U1, af(4)),
        AllowCompaction(U1, af(7)),
    )
    assert out == [CreateDataflow(index_dataflow(U1, 2).dataflow.with_as_of(af(7))), Schedule(U1)]


def test_multi_export_as_of_is_the_meet_and_the_ahead_export_keeps_its_compaction() -> None:
    out = reduced(
        two_export_dataflow(U1, U2, 0),
        AllowCompaction(U1, af(5)),
        AllowCompaction(U2, af(3)),
    )
    assert out == [
        CreateDataflow(two_export_dataflow(U1, U2, 0).dataflow.with_as_of(af(3))),
        AllowCompaction(U1, af(5)),
    ]


def test_partly_dropped_dataflow_keeps_schedules_but_not_the_dropped_exports_writes() -> None:
    out = reduced(
        two_export_dataflow(U1, U2, 0, mv=True),
        Schedule(U1),
        Schedule(U2),
        AllowWrites(U2),
        AllowCompaction(U1, af(2)),
        AllowCompaction(U2, af()),
    )
    # The dataflow survives (U1 is live), so both schedules stay; U2's drop stays, after the peeks;
    # AllowWrites(U2) would follow that drop, so it is not replayed.
    assert out == [
        CreateDataflow(two_export_dataflow(U1, U2, 0, mv=True).dataflow.with_as_of(af(2))),
        Schedule(U1),
        Schedule(U2),
        AllowCompaction(U2, af()),
    ]


def test_compaction_behind_the_as_of_is_dropped_and_does_not_regress_it() -> None:
    out = reduced(index_dataflow(U1, 5), AllowCompaction(U1, af(2)))
    assert out == [index_dataflow(U1, 5)]
    out = reduced(
        two_export_dataflow(U1, U2, 5), AllowCompaction(U1, af(2)), AllowCompaction(U2, af(8))
    )
    assert out == [two_export_dataflow(U1, U2, 5), AllowCompaction(U2, af(8))]


def test_unchanged_dataflows_are_kept_as_the_same_objects() -> None:
    cmd = index_dataflow(U1, 3)
    out = reduce_commands([cmd, AllowCompaction(U1, af(3))])
    assert out == [cmd] and out[0] is cmd


def test_compactions_for_ids_without_dataflow_survive() -> None:
    out = reduced(HELLO, CREATE, AllowCompaction(S1, af(2)), AllowCompaction(S1, af(6)))
    assert out == [HELLO, CREATE, AllowCompaction(S1, af(6))]


def test_h5_configurations_merge_in_order() -> None:
    a = ComputeParameters(max_result_size=5, dyncfg_updates=(("x", 1), ("y", 2)))
    b = ComputeParameters(workload_class="prod", dyncfg_updates=(("x", 3),))
    c = ComputeParameters(max_result_size=9)
    out = reduced(
        UpdateConfiguration(a),
        index_dataflow(U1, 0),
        UpdateConfiguration(b),
        UpdateConfiguration(c),
    )
    assert out[0] == UpdateConfiguration(ComputeParameters().update(a).update(b).update(c))
    assert out[0] == UpdateConfiguration(
        ComputeParameters(
            max_result_size=9, workload_class="prod", dyncfg_updates=(("x", 3), ("y", 2))
        )
    )


def test_entirely_unset_configuration_is_not_replayed() -> None:
    assert reduced(UpdateConfiguration(ComputeParameters()), InitializationComplete()) == [
        InitializationComplete()
    ]


def test_h6_cancelled_peeks_disappear_and_live_ones_survive() -> None:
    out = reduced(index_dataflow(U1, 0), peek(1), peek(2), CancelPeek(uuid.UUID(int=1)))
    assert out == [index_dataflow(U1, 0), peek(2)]
    # A cancel for a peek the history never saw (or already dropped) is harmless.
    assert reduced(CancelPeek(uuid.UUID(int=7))) == []


def test_peeks_do_not_hold_back_the_as_of() -> None:
    out = reduced(index_dataflow(U1, 0), peek(1, U1, t=2), AllowCompaction(U1, af(2)))
    assert out == [
        CreateDataflow(index_dataflow(U1, 0).dataflow.with_as_of(af(2))),
        peek(1, U1, t=2),
    ]


def test_dataflow_with_empty_as_of_is_dropped() -> None:
    cmd = CreateDataflow(index_dataflow(U1, 0).dataflow.with_as_of(af()))
    assert reduced(cmd, Schedule(U1)) == []


def test_dataflow_without_exports_is_dropped() -> None:
    """Issue 16: the meet of its exports' frontiers is the meet over none, ``[]``."""
    bare = CreateDataflow(
        DataflowDescription(
            debug_name="bare", source_imports=(SourceImport(SRC, af(0)),), as_of=af(0)
        )
    )
    assert reduced(HELLO, bare, index_dataflow(U3, 1)) == [HELLO, index_dataflow(U3, 1)]


def test_push_reduces_when_the_history_has_doubled() -> None:
    h = CommandHistory()
    h.push(index_dataflow(U1, 0))
    assert h.reduced_count == 1 and len(h) == 1  # the first push reduces at once
    h.push(AllowCompaction(U1, af(1)))
    assert len(h) == 2 and h.reduced_count == 1
    h.push(AllowCompaction(U1, af(2)))  # 3 > 2 * 1: reduce
    assert list(h) == [CreateDataflow(index_dataflow(U1, 0).dataflow.with_as_of(af(2)))]
    assert h.reduced_count == 1


def test_repeated_hello_or_create_instance_is_rejected_and_changes_nothing() -> None:
    h = CommandHistory()
    h.push(HELLO)
    h.push(CREATE)
    before = list(h)
    with pytest.raises(HistoryRepeatsHello):
        h.push(Hello(uuid.UUID(int=1)))
    with pytest.raises(HistoryRepeatsCreateInstance):
        h.push(CREATE)
    assert list(h) == before
    h.reduce()
    with pytest.raises(HistoryRepeatsHello):
        h.push(HELLO)


def test_dataflow_without_as_of_is_rejected() -> None:
    h = CommandHistory()
    no_as_of = CreateDataflow(
        DataflowDescription(debug_name="x", index_exports=(IndexExport(U1, U1),))
    )
    with pytest.raises(HistoryAsOfUnset) as info:
        h.push(no_as_of)
    assert isinstance(info.value, TidegateError)
    assert len(h) == 0 and h.live_dataflow_count == 0
    with pytest.raises(HistoryAsOfUnset):
        reduce_commands([no_as_of])


def test_non_commands_are_rejected() -> None:
    h = CommandHistory()
    with pytest.raises(NotACommand):
        h.push("Schedule(u1)")  # type: ignore[arg-type]
    assert len(h) == 0
    with pytest.raises(NotACommand):
        reduce_commands([42])  # type: ignore[list-item]


def test_discard_peeks_removes_peeks_and_cancels_only() -> None:
    h = CommandHistory()
    for c in (
        HELLO,
        index_dataflow(U1, 0),
        peek(1),
        peek(2),
        CancelPeek(uuid.UUID(int=1)),
        Schedule(U1),
    ):
        h.push(c)
    h.discard_peeks()
    assert not any(isinstance(c, Peek | CancelPeek) for c in h)
    assert Schedule(U1) in list(h) and HELLO in list(h)
    assert h.live_peek_count == 0


def test_update_source_uppers_rewrites_only_matching_imports() -> None:
    h = CommandHistory()
    untouched = CreateDataflow(
        DataflowDescription(debug_name="other", index_exports=(IndexExport(U2, U2),), as_of=af(0))
    )
    for c in (index_dataflow(U1, 0), untouched, Schedule(U1)):
        h.push(c)
    h.update_source_uppers({SRC: af(42)})
    dataflows = [c for c in h if isinstance(c, CreateDataflow)]
    assert dataflows[0].dataflow.source_imports[0].upper == af(42)
    assert dataflows[1] is untouched
    h.update_source_uppers({})
    first = next(c for c in h if isinstance(c, CreateDataflow))
    assert first.dataflow.source_imports[0].upper == af(42)


def test_iteration_is_a_snapshot() -> None:
    h = CommandHistory()
    h.push(index_dataflow(U1, 0))
    seen = []
    for c in h:
        seen.append(c)
        h.push(Schedule(U1))
    assert seen == [index_dataflow(U1, 0)]
    assert len(h) == 2


def test_live_counts_follow_pushes() -> None:
    h = CommandHistory()
    h.push(two_export_dataflow(U1, U2, 0))
    h.push(index_dataflow(U3, 0))
    h.push(peek(1, U3))
    assert (h.live_dataflow_count, h.live_peek_count) == (2, 1)
    h.push(AllowCompaction(U1, af()))
    assert h.live_dataflow_count == 2  # U2 still live
    h.push(AllowCompaction(U2, af()))
    h.push(CancelPeek(uuid.UUID(int=1)))
    assert (h.live_dataflow_count, h.live_peek_count) == (1, 0)
    h.reduce()
    assert (h.live_dataflow_count, h.live_peek_count) == (1, 0)
    assert repr(h).startswith("CommandHistory(len=")
