"""Laws of the history's reduction over arbitrary command sequences (reference/compute.md section 8.4: H1, H2, H8).

The sequences here need not be legal protocol: ids, peeks and compactions are
drawn from small pools, so dataflows share exports, compactions regress and
cancels name unknown peeks. The laws must hold anyway.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.frontier import Antichain
from tidegate.spec.history import CommandHistory, reduce_commands
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
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
    UpdateConfiguration,
)

IDS = [GlobalId.user(i) for i in range(1, 6)] + [GlobalId.system(1)]
ids = st.sampled_from(IDS)
frontiers = st.one_of(st.integers(0, 6).map(Antichain.from_elem), st.just(Antichain.empty()))
uuids = st.integers(1, 6).map(lambda n: uuid.UUID(int=n))


@st.composite
def dataflows(draw: st.DrawFn) -> CreateDataflow:
    index_ids = draw(st.lists(ids, max_size=2, unique=True))
    sink_ids = draw(st.lists(ids.filter(lambda i: i not in index_ids), max_size=1))
    return CreateDataflow(
        DataflowDescription(
            debug_name="df",  # made unique by command_sequences
            index_exports=tuple(IndexExport(i, i) for i in index_ids),
            sink_exports=tuple(SinkExport(s, s, MaterializedViewConnection()) for s in sink_ids),
            as_of=draw(frontiers),
        )
    )


params = st.builds(
    ComputeParameters,
    max_result_size=st.none() | st.integers(0, 9),
    workload_class=st.none() | st.sampled_from(["a", "b"]),
    dyncfg_updates=st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 3)), max_size=2).map(
        tuple
    ),
)

body_commands: st.SearchStrategy[ComputeCommand] = st.one_of(
    dataflows(),
    ids.map(Schedule),
    ids.map(AllowWrites),
    st.builds(AllowCompaction, ids, frontiers),
    st.builds(lambda u, i, t: Peek(PeekDescription(u, i, t)), uuids, ids, st.integers(0, 6)),
    uuids.map(CancelPeek),
    params.map(UpdateConfiguration),
    st.just(InitializationComplete()),
)


@st.composite
def command_sequences(draw: st.DrawFn) -> list[ComputeCommand]:
    body = [
        CreateDataflow(replace(c.dataflow, debug_name=f"df{i}"))
        if isinstance(c, CreateDataflow)
        else c
        for i, c in enumerate(draw(st.lists(body_commands, max_size=40)))
    ]
    head: list[ComputeCommand] = []
    if draw(st.booleans()):
        head.append(Hello(uuid.UUID(int=0)))
    if draw(st.booleans()):
        head.append(CreateInstance(InstanceConfig()))
    return head + body


def push_all(cmds: list[ComputeCommand]) -> CommandHistory:
    h = CommandHistory()
    for c in cmds:
        h.push(c)
    return h


@given(command_sequences())
def test_h1_at_most_one_of_each_singleton_and_no_cancels(cmds: list[ComputeCommand]) -> None:
    h = push_all(cmds)
    h.reduce()
    kinds = Counter(type(c) for c in h)
    for kind in (Hello, CreateInstance, UpdateConfiguration, InitializationComplete):
        assert kinds[kind] <= 1
    assert kinds[CancelPeek] == 0
    assert h.reduced_count == len(h)


@given(command_sequences())
def test_h2_reduction_is_idempotent(cmds: list[ComputeCommand]) -> None:
    once = reduce_commands(cmds)
    assert reduce_commands(once) == once
    h = push_all(cmds)
    h.reduce()
    first = list(h)
    h.reduce()
    assert list(h) == first


@given(command_sequences())
def test_h8_reduced_as_of_never_regresses(cmds: list[ComputeCommand]) -> None:
    original = {
        c.dataflow.debug_name: c.dataflow.as_of for c in cmds if isinstance(c, CreateDataflow)
    }
    h = push_all(cmds)
    for reduced in (False, True):
        if reduced:
            h.reduce()
        for c in h:
            if isinstance(c, CreateDataflow):
                before = original[c.dataflow.debug_name]
                assert before is not None and c.dataflow.as_of is not None
                assert before <= c.dataflow.as_of
                # A reduction drops every dataflow whose as_of became [].
                assert not reduced or c.dataflow.as_of != Antichain.empty()


@given(command_sequences())
def test_reduction_only_changes_as_ofs_and_keeps_order(cmds: list[ComputeCommand]) -> None:
    out = reduce_commands(cmds)
    # Every surviving command is an input command, up to a dataflow's as_of (and the merged configuration).
    inputs = {
        c.dataflow.with_as_of(Antichain.empty()) for c in cmds if isinstance(c, CreateDataflow)
    }
    for c in out:
        if isinstance(c, CreateDataflow):
            assert c.dataflow.with_as_of(Antichain.empty()) in inputs
        elif not isinstance(c, UpdateConfiguration):
            assert c in cmds
    # Dataflows and schedules keep their relative order.
    names = [c.dataflow.debug_name for c in cmds if isinstance(c, CreateDataflow)]
    kept = [c.dataflow.debug_name for c in out if isinstance(c, CreateDataflow)]
    assert kept == [n for n in names if n in set(kept)]
    # Live peeks are exactly those never cancelled after their last Peek.
    live: dict[uuid.UUID, Peek] = {}
    for c in cmds:
        if isinstance(c, Peek):
            live[c.uuid] = c
        elif isinstance(c, CancelPeek):
            live.pop(c.uuid, None)
    assert [c for c in out if isinstance(c, Peek)] == [live[u] for u in sorted(live)]


@given(command_sequences())
def test_h5_configuration_is_the_in_order_fold(cmds: list[ComputeCommand]) -> None:
    merged = ComputeParameters()
    for c in cmds:
        if isinstance(c, UpdateConfiguration):
            merged = merged.update(c.params)
    configs = [c for c in reduce_commands(cmds) if isinstance(c, UpdateConfiguration)]
    assert configs == ([] if merged.all_unset() else [UpdateConfiguration(merged)])


@given(command_sequences())
def test_history_never_exceeds_twice_its_reduced_length(cmds: list[ComputeCommand]) -> None:
    h = CommandHistory()
    for c in cmds:
        h.push(c)
        assert len(h) <= 2 * h.reduced_count


@given(command_sequences())
def test_reduce_does_not_modify_its_input(cmds: list[ComputeCommand]) -> None:
    copy = list(cmds)
    reduce_commands(copy)
    assert copy == cmds


@given(command_sequences())
def test_h3_schedules_and_writes_survive_only_with_their_dataflow(
    cmds: list[ComputeCommand],
) -> None:
    out = reduce_commands(cmds)
    retained = {e for c in out if isinstance(c, CreateDataflow) for e in c.dataflow.export_ids}
    dropped_alone = {c.id for c in out if isinstance(c, AllowCompaction) and c.frontier.is_empty()}
    for c in out:
        if isinstance(c, Schedule):
            assert c.id in retained
        elif isinstance(c, AllowWrites):
            assert c.id in retained and c.id not in dropped_alone


@given(command_sequences())
def test_h4_single_export_dataflows_absorb_their_compaction(cmds: list[ComputeCommand]) -> None:
    out = reduce_commands(cmds)
    single = {
        c.dataflow.export_ids[0]
        for c in out
        if isinstance(c, CreateDataflow) and len(c.dataflow.export_ids) == 1
    }
    assert not any(isinstance(c, AllowCompaction) and c.id in single for c in out)
