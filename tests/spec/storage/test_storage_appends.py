"""Appends with completions (reference section 2.9) and snapshots (section 2.10)."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    IdentifierInvalid,
    IdentifierMissing,
    InvalidAppendBounds,
    InvalidUpper,
    InvalidUppers,
    InvalidUsage,
    ReadBeforeSince,
    ReadBeyondUpper,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    AppendCommand,
    AppendCompleted,
    CollectionDescription,
    Ingestion,
    ReadSnapshot,
    StorageController,
    Table,
    UpperChanged,
    WriteToShard,
)
from tidegate.spec.testing import ShardStoreModel, controller_fingerprint

u1, u2, u3 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
TABLE = CollectionDescription(Table())


def A(*ts: int) -> Antichain:
    return Antichain(ts)


@pytest.fixture
def ctl(store: ShardStoreModel) -> StorageController:
    c = StorageController()
    c.create_collections([(u1, TABLE), (u2, TABLE)])
    store.run(c)
    return c


def test_append_writes_then_completes(ctl: StorageController, store: ShardStoreModel) -> None:
    ticket = ctl.append([AppendCommand(u1, [(("a",), 0, 1), (("b",), 2, 1)], A(3))])
    effects = ctl.drain()
    assert effects == [WriteToShard(ticket, u1, ((("a",), 0, 1), (("b",), 2, 1)), A(0), A(3))]
    assert ctl.pending_appends() == [ticket]
    assert ctl.collection(u1).upper == A(0)  # nothing is visible before the store confirms
    done = store.run(ctl, effects)
    assert done[1:] == [UpperChanged(u1, A(3)), AppendCompleted(ticket, None)]
    assert ctl.collection(u1).upper == A(3)
    assert ctl.pending_appends() == []


def test_commands_for_one_id_are_grouped(ctl: StorageController) -> None:
    ticket = ctl.append(
        [AppendCommand(u1, [(("a",), 0, 1)], A(2)), AppendCommand(u1, [(("b",), 3, 1)], A(4))]
    )
    effects = ctl.drain()
    assert effects == [WriteToShard(ticket, u1, ((("a",), 0, 1), (("b",), 3, 1)), A(0), A(4))]


def test_pipelined_appends_expect_the_previous_upper(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.append([AppendCommand(u1, [(("a",), 0, 1)], A(2))])
    first = ctl.drain()
    ctl.append([AppendCommand(u1, [(("b",), 2, 1)], A(5))])
    second = ctl.drain()
    assert isinstance(second[0], WriteToShard) and second[0].expected_upper == A(2)
    store.run(ctl, first + second)
    assert ctl.collection(u1).upper == A(5)
    assert store.contents(u1, 4) == [(("a",), 1), (("b",), 1)]


def test_an_empty_append_completes_at_once(ctl: StorageController) -> None:
    ticket = ctl.append([])
    effects = ctl.drain()
    assert effects == [AppendCompleted(ticket, None)]
    assert ctl.pending_appends() == []


def test_an_append_without_updates_advances_the_upper(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.append([AppendCommand(u1, [], A(7))])
    store.run(ctl)
    assert ctl.collection(u1).upper == A(7)


def test_an_empty_append_at_the_upper_succeeds_as_a_no_op(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    """Issue 16: no updates and the upper unchanged is one write expecting the upper it sets, which
    the shard (the spec shard's compare-and-append) accepts as a no-op. Before the fix the shard
    refused it with InvalidShardBounds and the runtime reported a contradictory InvalidUppers."""
    ctl.append([AppendCommand(u1, [(("a",), 1, 1)], A(5))])
    store.run(ctl)
    ticket = ctl.append([AppendCommand(u1, [], A(5))])
    effects = ctl.drain()
    assert effects == [WriteToShard(ticket, u1, (), A(5), A(5))]
    done = store.run(ctl, effects)
    assert done[1:] == [AppendCompleted(ticket, None)]  # no UpperChanged: nothing moved
    assert ctl.collection(u1).upper == A(5) == store.shards[u1].upper
    # Behind a write in flight it expects the upper that write leaves.
    ctl.append([AppendCommand(u1, [(("b",), 5, 1)], A(6))])
    ticket = ctl.append([AppendCommand(u1, [], A(6))])
    assert AppendCompleted(ticket, None) in store.run(ctl)
    assert ctl.collection(u1).upper == A(6)
    assert store.contents(u1, 5) == [(("a",), 1), (("b",), 1)]
    # Another writer moved the shard on: an ordinary mismatch, and the controller learns the upper.
    store.shards[u1].upper = A(9)
    ticket = ctl.append([AppendCommand(u1, [], A(6))])
    assert store.run(ctl)[-1] == AppendCompleted(ticket, InvalidUppers([InvalidUpper(u1, A(9))]))
    assert ctl.collection(u1).upper == A(9)


def test_upper_mismatch_resolves_with_invalid_uppers(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    store.shards[u1].upper = A(4)  # another writer moved the shard on
    ticket = ctl.append([AppendCommand(u1, [(("a",), 1, 1)], A(2)), AppendCommand(u2, [], A(2))])
    done = store.run(ctl)
    (completed,) = [e for e in done if isinstance(e, AppendCompleted)]
    assert completed == AppendCompleted(ticket, InvalidUppers([InvalidUpper(u1, A(4))]))
    assert completed.error is not None and completed.error.ids == (u1,)
    assert ctl.collection(u1).upper == A(4)  # the controller learns the shard's upper
    assert ctl.collection(u2).upper == A(2)  # no atomicity across collections
    # The next append starts from the learned upper and succeeds.
    ctl.append([AppendCommand(u1, [(("a",), 4, 1)], A(5))])
    done = store.run(ctl)
    assert done[-1] == AppendCompleted(ticket + 1, None)


@pytest.mark.parametrize(
    ("commands", "error"),
    [
        ([AppendCommand(u3, [], A(1))], IdentifierMissing),
        ([AppendCommand(u1, [(("a",), 3, 1)], A(3))], UpdateBeyondUpper),
        (
            [AppendCommand(u1, [(("a",), 0, 1)], A(2)), AppendCommand(u2, [(("a",), 5, 1)], A(5))],
            UpdateBeyondUpper,
        ),
    ],
)
def test_synchronous_append_errors(
    ctl: StorageController, commands: list[AppendCommand], error: type[Exception]
) -> None:
    before = controller_fingerprint(ctl)
    with pytest.raises(error):
        ctl.append(commands)
    assert controller_fingerprint(ctl) == before


def test_appends_before_the_upper_or_moving_it_back(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.append([AppendCommand(u1, [], A(5))])
    store.run(ctl)
    with pytest.raises(UpdateNotBeyondLower) as err:
        ctl.append([AppendCommand(u1, [(("a",), 4, 1)], A(6))])
    assert (err.value.id, err.value.time, err.value.lower) == (u1, 4, A(5))
    with pytest.raises(InvalidAppendBounds):
        ctl.append([AppendCommand(u1, [], A(3))])


def test_appends_to_ingestions_and_dropped_tables(ctl: StorageController) -> None:
    ctl.create_instance("i")
    ctl.create_collections([(u3, CollectionDescription(Ingestion("i")))])
    with pytest.raises(IdentifierInvalid):
        ctl.append([AppendCommand(u3, [], A(1))])
    ctl.acquire_read_holds([u1])
    ctl.drop_sources([u1])
    with pytest.raises(IdentifierMissing):
        ctl.append([AppendCommand(u1, [], A(1))])


def test_complete_write_for_an_unknown_ticket(ctl: StorageController) -> None:
    with pytest.raises(InvalidUsage):
        ctl.complete_write(99, u1, True, A(1))


# -- snapshots -----------------------------------------------------------------------------------


def test_snapshot_reads_at_as_of_and_holds_it(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.append([AppendCommand(u1, [(("a",), 1, 1), (("a",), 3, 1), (("b",), 5, 1)], A(8))])
    store.run(ctl)
    request = ctl.snapshot(u1, 4)
    effects = ctl.drain()
    assert effects == [ReadSnapshot(request, u1, 4)]
    ctl.set_read_policy([(u1, LagWriteFrontier(0, 1))])
    assert ctl.collection(u1).since == A(4)  # the pending read holds 4
    store.run(ctl, effects)
    assert store.snapshots[request] == [(("a",), 2)]
    assert ctl.collection(u1).since == A(8)
    assert ctl.pending_snapshots() == []
    with pytest.raises(InvalidUsage):
        ctl.complete_snapshot(request)


def test_snapshot_is_valid_only_between_since_and_upper(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.append([AppendCommand(u1, [], A(8))])
    store.run(ctl)
    ctl.set_read_policy([(u1, ValidFrom(A(3)))])
    before = controller_fingerprint(ctl)
    with pytest.raises(ReadBeforeSince) as before_since:
        ctl.snapshot(u1, 2)
    assert (before_since.value.id, before_since.value.as_of, before_since.value.since) == (
        u1,
        2,
        A(3),
    )
    with pytest.raises(ReadBeyondUpper) as beyond:
        ctl.snapshot(u1, 8)
    assert beyond.value.upper == A(8)
    with pytest.raises(IdentifierMissing):
        ctl.snapshot(u3, 0)
    assert controller_fingerprint(ctl) == before
    ctl.snapshot(u1, 3)
    ctl.snapshot(u1, 7)
