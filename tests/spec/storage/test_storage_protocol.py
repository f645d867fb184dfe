"""The storage protocol's rules (reference section 2.12), each broken once on each side.

A violating message raises the rule's error, blamed on whoever sent it
(``LocalProtocolError`` for this side's own message, ``RemoteProtocolError``
for the peer's), and leaves the session exactly as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import (
    DuplicateDroppedId,
    DuplicateStorageAllowWrites,
    DuplicateStorageObject,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    ResponseAfterDroppedId,
    StatisticsKindMismatch,
    StorageCommandAfterDrop,
    StorageCompactionRegression,
    StorageFrontierRegression,
    StorageProtocolError,
    StorageResponseAfterDrop,
    StorageStageViolation,
    UnknownStorageObject,
    UnrequestedDroppedId,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    DroppedId,
    ExportDescription,
    Ingestion,
    RunIngestion,
    RunSink,
    SinkStatistics,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageCommand,
    StorageControllerSession,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
    StorageReplicaSession,
    StorageResponse,
    StorageStage,
)
from tidegate.spec.strategies import storage_commands, storage_responses

ING, REMAP, SINK, OTHER = (GlobalId.user(i) for i in (1, 2, 3, 9))
EMPTY = Antichain()


def A(t: int) -> Antichain:
    return Antichain([t])


HELLO = StorageHello(uuid.UUID(int=7))
INIT = StorageInitializationComplete()
RUN_ING = RunIngestion(ING, CollectionDescription(Ingestion("i", REMAP)), A(0))
RUN_SINK = RunSink(SINK, ExportDescription(ING, "i"), A(0), False)
SETUP: tuple[StorageCommand, ...] = (HELLO, RUN_ING, RUN_SINK, INIT)


def _sessions() -> list[Any]:
    return [StorageControllerSession(), StorageReplicaSession()]


def _feed(
    session: Any, commands: Sequence[StorageCommand], responses: Sequence[StorageResponse] = ()
) -> None:
    for c in commands:
        session.on_command(c)
    for r in responses:
        session.on_response(r)


def _refused(
    session: Any,
    call: Any,
    message: Any,
    rule: type[StorageProtocolError],
    side: type[ProtocolError],
) -> None:
    before = session.snapshot()
    with pytest.raises(rule) as info:
        call(message)
    assert isinstance(info.value, side), type(info.value).__mro__
    assert info.value.rule == rule.rule
    assert session.snapshot() == before


COMMAND_VIOLATIONS: list[
    tuple[str, tuple[StorageCommand, ...], StorageCommand, type[StorageProtocolError]]
] = [
    ("before-hello", (), RUN_ING, StorageStageViolation),
    ("init-twice", (HELLO, INIT), INIT, StorageStageViolation),
    (
        "allow-writes-twice",
        (HELLO, StorageAllowWrites()),
        StorageAllowWrites(),
        DuplicateStorageAllowWrites,
    ),
    (
        "allow-writes-twice-running",
        (HELLO, INIT, StorageAllowWrites()),
        StorageAllowWrites(),
        DuplicateStorageAllowWrites,
    ),
    ("run-twice", (HELLO, RUN_ING), RUN_ING, DuplicateStorageObject),
    (
        "remap-reused",
        (HELLO, RUN_ING),
        RunIngestion(OTHER, CollectionDescription(Ingestion("i", REMAP)), A(0)),
        DuplicateStorageObject,
    ),
    (
        "sink-on-a-remap-id",
        (HELLO, RUN_ING),
        RunSink(REMAP, ExportDescription(ING, "i"), A(0), False),
        DuplicateStorageObject,
    ),
    (
        "own-remap",
        (HELLO,),
        RunIngestion(ING, CollectionDescription(Ingestion("i", ING)), A(0)),
        DuplicateStorageObject,
    ),
    ("compact-unknown", (HELLO,), StorageAllowCompaction(ING, A(3)), UnknownStorageObject),
    (
        "compact-a-remap",
        (HELLO, RUN_ING),
        StorageAllowCompaction(REMAP, A(3)),
        UnknownStorageObject,
    ),
    (
        "compact-after-drop",
        (HELLO, RUN_ING, StorageAllowCompaction(ING, EMPTY)),
        StorageAllowCompaction(ING, EMPTY),
        StorageCommandAfterDrop,
    ),
    (
        "compaction-regresses",
        (HELLO, RUN_SINK, StorageAllowCompaction(SINK, A(5))),
        StorageAllowCompaction(SINK, A(4)),
        StorageCompactionRegression,
    ),
]


@pytest.mark.parametrize(
    ("name", "before", "bad", "rule"), COMMAND_VIOLATIONS, ids=[c[0] for c in COMMAND_VIOLATIONS]
)
def test_command_rules(
    name: str,
    before: tuple[StorageCommand, ...],
    bad: StorageCommand,
    rule: type[StorageProtocolError],
) -> None:
    controller, replica = _sessions()
    _feed(controller, before)
    _feed(replica, before)
    _refused(controller, controller.on_command, bad, rule, LocalProtocolError)
    _refused(replica, replica.on_command, bad, rule, RemoteProtocolError)


DROP_ING = StorageAllowCompaction(ING, EMPTY)
RESPONSE_VIOLATIONS: list[
    tuple[
        str,
        tuple[StorageCommand, ...],
        tuple[StorageResponse, ...],
        StorageResponse,
        type[StorageProtocolError],
        bool,
    ]
] = [
    # (name, commands, earlier responses, bad response, rule, also on the controller side)
    (
        "before-init",
        (HELLO, RUN_ING),
        (),
        StorageFrontierUpper(ING, A(1)),
        StorageStageViolation,
        True,
    ),
    ("unknown-upper", SETUP, (), StorageFrontierUpper(OTHER, A(1)), UnknownStorageObject, True),
    (
        "unknown-status",
        SETUP,
        (),
        StatusUpdate(OTHER, SourceStatus.RUNNING),
        UnknownStorageObject,
        True,
    ),
    ("dropped-id-of-a-remap", (*SETUP, DROP_ING), (), DroppedId(REMAP), UnknownStorageObject, True),
    (
        "upper-regresses",
        SETUP,
        (StorageFrontierUpper(ING, A(4)),),
        StorageFrontierUpper(ING, A(4)),
        StorageFrontierRegression,
        True,
    ),
    (
        "remap-upper-regresses",
        SETUP,
        (StorageFrontierUpper(REMAP, A(4)),),
        StorageFrontierUpper(REMAP, A(3)),
        StorageFrontierRegression,
        True,
    ),
    (
        "upper-after-drop",
        (*SETUP, DROP_ING),
        (),
        StorageFrontierUpper(ING, A(4)),
        StorageResponseAfterDrop,
        False,
    ),
    (
        "remap-upper-after-drop",
        (*SETUP, DROP_ING),
        (),
        StorageFrontierUpper(REMAP, A(4)),
        StorageResponseAfterDrop,
        False,
    ),
    (
        "running-after-drop",
        (*SETUP, DROP_ING),
        (),
        StatusUpdate(ING, SourceStatus.RUNNING),
        StorageResponseAfterDrop,
        False,
    ),
    (
        "statistics-after-drop",
        (*SETUP, DROP_ING),
        (),
        StatisticsUpdate(ING, SourceStatistics(1)),
        StorageResponseAfterDrop,
        False,
    ),
    (
        "dropped-before-drop",
        SETUP,
        (),
        StatusUpdate(ING, SourceStatus.DROPPED),
        StorageResponseAfterDrop,
        True,
    ),
    ("unrequested-dropped-id", SETUP, (), DroppedId(ING), UnrequestedDroppedId, True),
    (
        "dropped-id-twice",
        (*SETUP, DROP_ING),
        (DroppedId(ING),),
        DroppedId(ING),
        DuplicateDroppedId,
        True,
    ),
    (
        "status-after-dropped-id",
        (*SETUP, DROP_ING),
        (DroppedId(ING),),
        StatusUpdate(ING, SourceStatus.DROPPED),
        ResponseAfterDroppedId,
        True,
    ),
    (
        "upper-after-dropped-id",
        (*SETUP, DROP_ING),
        (DroppedId(ING),),
        StorageFrontierUpper(REMAP, A(9)),
        ResponseAfterDroppedId,
        True,
    ),
    (
        "sink-statistics-of-an-ingestion",
        SETUP,
        (),
        StatisticsUpdate(ING, SinkStatistics(1)),
        StatisticsKindMismatch,
        True,
    ),
    (
        "source-statistics-of-a-sink",
        SETUP,
        (),
        StatisticsUpdate(SINK, SourceStatistics(1)),
        StatisticsKindMismatch,
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "commands", "earlier", "bad", "rule", "controller_too"),
    RESPONSE_VIOLATIONS,
    ids=[c[0] for c in RESPONSE_VIOLATIONS],
)
def test_response_rules(
    name: str,
    commands: tuple[StorageCommand, ...],
    earlier: tuple[StorageResponse, ...],
    bad: StorageResponse,
    rule: type[StorageProtocolError],
    controller_too: bool,
) -> None:
    controller, replica = _sessions()
    _feed(controller, commands, earlier)
    _feed(replica, commands, earlier)
    _refused(replica, replica.on_response, bad, rule, LocalProtocolError)
    if controller_too:
        _refused(controller, controller.on_response, bad, rule, RemoteProtocolError)
    else:
        # The controller cannot tell: the replica may have answered before the drop arrived.
        controller.on_response(bad)


def test_stages_and_a_new_hello_starts_over() -> None:
    for s in _sessions():
        assert s.stage is StorageStage.AWAITING_HELLO
        assert s.on_command(HELLO) is StorageStage.INITIALIZATION
        assert s.on_command(StorageAllowWrites()) is StorageStage.INITIALIZATION
        assert s.on_command(RUN_ING) is StorageStage.INITIALIZATION
        assert (
            s.on_command(INIT) is StorageStage.READ_WRITE
        )  # AllowWrites came during initialization
        assert s.writes_allowed and s.is_live(ING) and not s.is_live(SINK)
        s.on_response(StorageFrontierUpper(ING, A(3)))
        assert s.last_reported(ING) == A(3)
        s.on_command(DROP_ING)
        assert s.owes_dropped_id() == (ING,)
        s.on_response(DroppedId(ING))
        assert s.owes_dropped_id() == ()
        assert s.on_command(StorageHello(uuid.UUID(int=8))) is StorageStage.INITIALIZATION
        assert s.nonce == uuid.UUID(int=8) and s.objects == {} and not s.writes_allowed
        assert (
            s.on_command(RUN_ING) is StorageStage.INITIALIZATION
        )  # a new iteration: id usable again
        assert s.on_command(INIT) is StorageStage.READ_ONLY
        assert s.on_command(StorageAllowWrites()) is StorageStage.READ_WRITE


@given(st.lists(st.one_of(storage_commands(), storage_responses()), max_size=25))
def test_any_message_sequence_is_accepted_or_refused_without_change(messages: list[Any]) -> None:
    # The two sides agree on every command; a refusal never changes a session.
    controller, replica = _sessions()
    commands = (
        StorageHello,
        StorageInitializationComplete,
        StorageAllowWrites,
        RunIngestion,
        RunSink,
        StorageAllowCompaction,
    )
    for m in messages:
        is_command = isinstance(m, commands) or type(m).__name__ == "StorageUpdateConfiguration"
        outcomes = []
        for s in (controller, replica):
            before = s.snapshot()
            try:
                (s.on_command if is_command else s.on_response)(m)
                outcomes.append(None)
            except StorageProtocolError as e:
                assert s.snapshot() == before
                outcomes.append(e.rule)
        if is_command:
            assert outcomes[0] == outcomes[1], (m, outcomes)
        elif outcomes[0] is None and outcomes[1] is not None:
            # Only the rules that need every command to have arrived are the replica's alone.
            assert outcomes[1] == StorageResponseAfterDrop.rule
        elif outcomes[0] is not None and outcomes[1] is None:
            raise AssertionError(f"the controller refused {m} that the replica may send")
