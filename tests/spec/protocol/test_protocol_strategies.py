"""The protocol strategies cover every message and field, and round-trip; sessions survive fuzzing."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from tidegate.spec.errors import ProtocolError
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ControllerSession,
    CopyToDropped,
    CopyToResponse,
    CopyToRowCount,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    Hello,
    InitializationComplete,
    Peek,
    PeekCanceled,
    PeekError,
    PeekResponse,
    PeekRows,
    ReplicaSession,
    Schedule,
    Status,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)
from tidegate.spec.strategies import (
    commands,
    dataflow_descriptions,
    frontiers_responses,
    global_ids,
    instance_configs,
    peek_descriptions,
    responses,
    subscribe_batches,
)


def exists(strategy: st.SearchStrategy[Any], predicate: Any) -> None:
    """Some value of ``strategy`` satisfies ``predicate`` (found without shrinking, which is slow)."""
    find(
        strategy,
        predicate,
        settings=settings(phases=[Phase.generate], max_examples=2000, database=None),
    )


def assert_never_generated(strategy: st.SearchStrategy[Any], predicate: Any) -> None:
    """No value of ``strategy`` (in a generous sample) satisfies ``predicate``."""

    @settings(max_examples=300, database=None)
    @given(strategy)
    def check(value: Any) -> None:
        assert not predicate(value), value

    check()


COMMAND_TYPES = (
    Hello,
    CreateInstance,
    InitializationComplete,
    AllowWrites,
    UpdateConfiguration,
    CreateDataflow,
    Schedule,
    AllowCompaction,
    Peek,
    CancelPeek,
)


@given(st.one_of(commands(), responses()))
def test_messages_round_trip_through_pickle_and_copy(msg: Any) -> None:
    assert pickle.loads(pickle.dumps(msg)) == msg
    assert copy.deepcopy(msg) == msg
    assert hash(copy.deepcopy(msg)) == hash(msg)


@given(commands())
def test_commands_are_commands(cmd: Any) -> None:
    assert isinstance(cmd, COMMAND_TYPES)


@given(responses())
def test_responses_are_responses(resp: Any) -> None:
    assert isinstance(resp, Frontiers | PeekResponse | SubscribeResponse | CopyToResponse | Status)


def test_every_command_and_response_variant_is_generated() -> None:
    for kind in COMMAND_TYPES:
        exists(commands(), lambda c, k=kind: isinstance(c, k))
    for pred in (
        lambda r: isinstance(r, PeekResponse) and isinstance(r.result, PeekRows) and r.result.rows,
        lambda r: isinstance(r, PeekResponse) and isinstance(r.result, PeekError),
        lambda r: isinstance(r, PeekResponse) and isinstance(r.result, PeekCanceled),
        lambda r: isinstance(r, SubscribeResponse) and isinstance(r.result, SubscribeDroppedAt),
        lambda r: isinstance(r, CopyToResponse) and isinstance(r.result, CopyToRowCount),
        lambda r: isinstance(r, CopyToResponse) and isinstance(r.result, CopyToDropped),
        lambda r: isinstance(r, Status),
    ):
        exists(responses(), pred)


def test_every_field_takes_non_default_values() -> None:
    for pred in (
        lambda df: bool(df.source_imports),
        lambda df: bool(df.index_imports),
        lambda df: bool(df.objects_to_build),
        lambda df: bool(df.index_exports),
        lambda df: bool(df.sink_exports),
        lambda df: df.as_of is None,
        lambda df: df.as_of is not None and df.as_of.is_empty(),
        lambda df: not df.until.is_empty(),
    ):
        exists(dataflow_descriptions(), pred)
    for pred in (
        lambda c: bool(c.logging.index_logs),
        lambda c: c.logging.enable_logging and c.logging.log_logging,
        lambda c: c.expiration_offset_ms is not None,
        lambda c: c.peek_stash_location is not None,
    ):
        exists(instance_configs(), pred)
    for pred in (
        lambda p: p.literal_constraints is not None,
        lambda p: p.target == "persist",
        lambda p: p.finishing.limit is not None and p.finishing.project is not None,
        lambda p: bool(p.finishing.order_by) and p.finishing.offset > 0,
    ):
        exists(peek_descriptions(), pred)
    exists(frontiers_responses(), lambda f: None not in (f.write, f.input, f.output))
    exists(subscribe_batches(), lambda b: b.error is not None)
    exists(subscribe_batches(), lambda b: len(b.updates) > 1)
    # A batch is updates or an error (Materialize's Result), never both.
    assert_never_generated(subscribe_batches(), lambda b: b.error is not None and bool(b.updates))
    exists(global_ids(), lambda g: g.value >= 2**63)
    for ns in "sut":
        exists(global_ids(), lambda g, ns=ns: g.namespace == ns)


@given(st.data())
def test_dataflow_export_ids_are_distinct(data: st.DataObject) -> None:
    df = data.draw(dataflow_descriptions())
    assert len(set(df.export_ids)) == len(df.export_ids)


@settings(max_examples=30)
@given(st.lists(st.one_of(commands(), responses()), max_size=25))
def test_sessions_reject_arbitrary_messages_only_with_protocol_errors(msgs: list[Any]) -> None:
    """Random (mostly illegal) traffic: each message is accepted or raises a ProtocolError, leaving the
    session unchanged; nothing else ever escapes."""
    for session in (ControllerSession(), ReplicaSession()):
        for msg in msgs:
            is_response = isinstance(
                msg, Frontiers | PeekResponse | SubscribeResponse | CopyToResponse | Status
            )
            before = session.snapshot()
            try:
                if is_response:
                    session.on_response(msg)
                else:
                    session.on_command(msg)
            except ProtocolError:
                assert session.snapshot() == before
