"""H7 and friends: the reduced history replays to the same replica state as the full one.

Legal command streams come from :class:`ChurnWorkload` (creates, compactions
within read holds, drops, peeks answered and cancelled, configuration), driven
by Hypothesis draws so failures shrink.
"""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import CommandAfterDrop, IllegalReplay
from tidegate.spec.frontier import Antichain
from tidegate.spec.history import CommandHistory, reduce_commands
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekDescription,
    ReplicaSession,
    Schedule,
    SinkExport,
)
from tidegate.spec.testing.history import (
    Answered,
    ChurnWorkload,
    HistoryEvent,
    ModelReplica,
    ReplicaModelState,
    replay_to_model,
)


def drawn_workload(data: st.DataObject) -> tuple[ChurnWorkload, int]:
    target = data.draw(st.integers(1, 6), label="target_dataflows")
    steps = data.draw(st.integers(0, 120), label="steps")

    def choose(n: int) -> int:
        return data.draw(st.integers(0, n - 1))

    return ChurnWorkload(choose, target_dataflows=target), steps


def commands_of(events: list[HistoryEvent]) -> list[ComputeCommand]:
    return [e for e in events if not isinstance(e, Answered)]  # type: ignore[misc]


def assert_same_replica_state(full: ReplicaModelState, reduced: ReplicaModelState) -> None:
    """H7: the reduced replay's state equals the full replay's (answered, uncancelled peeks are re-sent)."""
    assert reduced.collections == full.collections
    assert reduced.scheduled == full.scheduled
    assert reduced.writable == full.writable
    assert reduced.config == full.config
    assert reduced.instance == full.instance
    assert reduced.initialized == full.initialized
    assert set(reduced.pending_peeks) == full.outstanding_peeks
    for u, p in full.pending_peeks.items():
        assert reduced.pending_peeks[u] == p
    assert not reduced.answered_peeks


def session_state(session: ReplicaSession) -> tuple[object, ...]:
    """What a ReplicaSession says about live collections and peeks not cancelled."""
    live = {
        gid: (rec.since, rec.scheduled, rec.writable)
        for gid, rec in session.collections.items()
        if not rec.dropped
    }
    peeks = {u: p for u, p in session.pending_peeks.items() if not session.cancel_requested(u)}
    return live, peeks


def replay_session(commands: list[ComputeCommand]) -> ReplicaSession:
    session = ReplicaSession()
    for c in commands:
        session.on_command(c)  # raises a ProtocolError if the replayed stream is illegal
    return session


@given(st.data())
def test_h7_every_history_state_replays_like_the_full_stream(data: st.DataObject) -> None:
    workload, steps = drawn_workload(data)
    full = ModelReplica()
    full_session = ReplicaSession()
    history = CommandHistory()
    for event in workload.preamble():
        full.apply(event)
        full_session.on_command(event)
        history.push(event)
    for _ in range(steps):
        for event in workload.step():
            if isinstance(event, Answered):
                full.answer(event.uuid)
            else:
                full.apply(event)
                full_session.on_command(event)
                history.push(event)
        # The history as it stands (partly reduced) is a legal stream with the same effect...
        assert_same_replica_state(full.state(), replay_to_model(history).state())
    assert session_state(replay_session(list(history))) == session_state(full_session)
    # ...and so is its full reduction, for the model and for the protocol's ReplicaSession.
    history.reduce()
    assert_same_replica_state(full.state(), replay_to_model(history).state())
    assert session_state(replay_session(list(history))) == session_state(full_session)


def test_replaying_materializes_order_literally_would_break_the_protocol() -> None:
    """Why the reduction drops AllowWrites for an export dropped on its own (see spec/history.py)."""
    u1, u2 = GlobalId.user(1), GlobalId.user(2)
    dataflow = CreateDataflow(
        DataflowDescription(
            debug_name="index+mv",
            index_exports=(IndexExport(u1, u1),),
            sink_exports=(SinkExport(u2, u1, MaterializedViewConnection()),),
            as_of=Antichain.from_elem(0),
        )
    )
    head = [Hello(uuid.UUID(int=0)), CreateInstance(InstanceConfig())]
    cmds = [
        *head,
        dataflow,
        Schedule(u1),
        Schedule(u2),
        AllowWrites(u2),
        AllowCompaction(u2, Antichain.empty()),
    ]
    reduced = reduce_commands(cmds)
    assert AllowWrites(u2) not in reduced
    replay_session(reduced)  # legal
    literal = [
        *head,
        dataflow,
        Schedule(u1),
        Schedule(u2),
        AllowCompaction(u2, Antichain.empty()),
        AllowWrites(u2),
    ]
    with pytest.raises(CommandAfterDrop):
        replay_session(literal)


@given(st.data())
def test_automatic_reductions_compose_into_one(data: st.DataObject) -> None:
    """reduce(reduce(a) + b) == reduce(a + b) for legal streams: the history equals one reduction of all it saw."""
    workload, steps = drawn_workload(data)
    cmds = commands_of(workload.events(steps))
    history = CommandHistory()
    for c in cmds:
        history.push(c)
    history.reduce()
    assert list(history) == reduce_commands(cmds)


@given(st.data())
def test_live_counts_match_the_workload_and_the_reduction(data: st.DataObject) -> None:
    workload, steps = drawn_workload(data)
    history = CommandHistory()
    for c in workload.preamble():
        history.push(c)
    for _ in range(steps):
        for event in workload.step():
            if not isinstance(event, Answered):
                history.push(event)
        assert history.live_dataflow_count == workload.live_dataflow_count
        assert history.live_peek_count == workload.live_peek_count
    history.reduce()
    assert history.live_dataflow_count == sum(isinstance(c, CreateDataflow) for c in history)
    assert history.live_peek_count == sum(isinstance(c, Peek) for c in history)


@given(st.data())
def test_discarding_peeks_keeps_the_collections(data: st.DataObject) -> None:
    workload, steps = drawn_workload(data)
    cmds = commands_of(workload.events(steps))
    history = CommandHistory()
    for c in cmds:
        history.push(c)
    history.discard_peeks()
    history.reduce()
    full, reduced = replay_to_model(cmds).state(), replay_to_model(history).state()
    assert reduced.collections == full.collections
    assert not reduced.pending_peeks


def test_long_churn_stays_legal_and_small() -> None:
    """A seeded long run: every reduction replays legally, and the history tracks the live state."""
    rng = random.Random(3)
    workload = ChurnWorkload(rng.randrange, target_dataflows=20)
    full = ModelReplica()
    history = CommandHistory()
    for c in workload.preamble():
        full.apply(c)
        history.push(c)
    longest = 0
    for step in range(3000):
        for event in workload.step():
            if isinstance(event, Answered):
                full.answer(event.uuid)
            else:
                full.apply(event)
                history.push(event)
        longest = max(longest, len(history))
        if step % 500 == 499:
            assert_same_replica_state(full.state(), replay_to_model(history).state())
    # ~20 dataflows and a few peeks: the history never grows with the 3000 steps.
    assert longest < 400


# -- the model replica itself ---------------------------------------------------------

U1, U2 = GlobalId.user(1), GlobalId.user(2)
LOG = GlobalId.system(1)


def index_df(gid: GlobalId, as_of: int, imports: tuple[GlobalId, ...] = ()) -> CreateDataflow:
    return CreateDataflow(
        DataflowDescription(
            debug_name=str(gid),
            index_imports=tuple(IndexImport(i, i) for i in imports),
            index_exports=(IndexExport(gid, gid),),
            as_of=Antichain.from_elem(as_of),
        )
    )


def started() -> ModelReplica:
    model = ModelReplica()
    model.apply(Hello(uuid.UUID(int=0)))
    model.apply(CreateInstance(InstanceConfig(logging=LoggingConfig(index_logs=(("l", LOG),)))))
    return model


@pytest.mark.parametrize(
    ("cmds", "rule"),
    [
        ([Schedule(U1)], "schedule-after-create"),
        ([AllowWrites(U1)], "allow-writes-after-create"),
        ([AllowCompaction(U1, Antichain.from_elem(1))], "compaction-after-create"),
        ([index_df(U1, 0), index_df(U1, 0)], "exports-unique"),
        ([index_df(U2, 0, imports=(U1,))], "index-imports-exist"),
        (
            [
                index_df(U1, 0),
                AllowCompaction(U1, Antichain.from_elem(5)),
                index_df(U2, 3, imports=(U1,)),
            ],
            "import-since-at-most-as-of",
        ),
        (
            [index_df(U1, 4), Peek(PeekDescription(uuid.UUID(int=1), U1, 3))],
            "peek-at-readable-time",
        ),
        ([Peek(PeekDescription(uuid.UUID(int=1), U1, 3))], "peek-after-create"),
        (
            [
                index_df(U1, 0),
                Peek(PeekDescription(uuid.UUID(int=1), U1, 3)),
                Peek(PeekDescription(uuid.UUID(int=1), U1, 4)),
            ],
            "peek-uuid-unique",
        ),
        ([CancelPeek(uuid.UUID(int=9))], "cancel-after-peek"),
        (
            [index_df(U1, 0), AllowCompaction(U1, Antichain.empty()), Schedule(U1)],
            "schedule-after-create",
        ),
        ([Hello(uuid.UUID(int=1))], "one-hello"),
        ([CreateInstance(InstanceConfig())], "one-create-instance"),
        ([InitializationComplete(), InitializationComplete()], "one-initialization-complete"),
    ],
)
def test_model_replica_rejects_broken_dependencies(cmds: list[ComputeCommand], rule: str) -> None:
    model = started()
    *prefix, last = cmds
    for c in prefix:
        model.apply(c)
    before = model.state()
    with pytest.raises(IllegalReplay) as info:
        model.apply(last)
    assert info.value.rule == rule
    assert model.state() == before


def test_model_replica_tracks_compaction_drops_and_peeks() -> None:
    model = started()
    model.apply(index_df(U1, 2))
    model.apply(AllowCompaction(U1, Antichain.from_elem(5)))
    model.apply(AllowCompaction(U1, Antichain.from_elem(3)))  # behind: no effect
    model.apply(AllowCompaction(LOG, Antichain.from_elem(4)))
    assert model.state().collections == {U1: Antichain.from_elem(5), LOG: Antichain.from_elem(4)}
    p = Peek(PeekDescription(uuid.UUID(int=1), U1, 6))
    model.apply(p)
    model.answer(p.uuid)
    assert model.state().outstanding_peeks == {p.uuid} and not model.state().pending_peeks
    with pytest.raises(IllegalReplay):
        model.answer(p.uuid)
    model.apply(
        CancelPeek(p.uuid)
    )  # after the answer: ignored, but the peek is no longer outstanding
    assert not model.state().outstanding_peeks
    model.apply(AllowCompaction(U1, Antichain.empty()))
    assert U1 not in model.state().collections
