"""Monotonic appends (Materialize's ``monotonic_appender``; reference section 2.9, item 7).

Pinned behaviours (``src/storage-controller/src/collection_mgmt.rs``):
``monotonic_appender`` is for append-only collections and answers
``IdentifierMissing`` for any other id; a batch is written at
``max(upper, at_least)`` (``monotonic_append``), the upper advancing one past
it, and written again at the new upper when another writer moved it, so the
caller never sees a compare-and-append race; in read-only mode it is refused
(``StorageError::ReadOnly``); an empty append to a closed collection is
ignored, a non-empty one refused.
"""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    IdentifierInvalid,
    IdentifierMissing,
    InvalidUppers,
    InvalidUsage,
    ReadOnlyController,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    AppendCommand,
    AppendCompleted,
    CollectionDescription,
    Introspection,
    MonotonicAppender,
    StorageController,
    Table,
    Webhook,
    WriteToShard,
)
from tidegate.spec.storage.introspection import SOURCE_STATISTICS, SOURCE_STATUS_HISTORY
from tidegate.spec.testing import ShardStoreModel, controller_fingerprint

hook, hist, stats, table = (GlobalId.user(n) for n in (1, 2, 3, 4))


def A(*ts: int) -> Antichain:
    return Antichain(ts)


@pytest.fixture
def ctl(store: ShardStoreModel) -> StorageController:
    c = StorageController()
    c.create_collections(
        [
            (hook, CollectionDescription(Webhook())),
            (hist, CollectionDescription(Introspection(SOURCE_STATUS_HISTORY))),
            (stats, CollectionDescription(Introspection(SOURCE_STATISTICS))),
            (table, CollectionDescription(Table())),
        ]
    )
    store.run(c)
    return c


def test_an_append_lands_at_the_upper_or_at_least(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    appender = ctl.monotonic_appender(hook)
    assert isinstance(appender, MonotonicAppender)
    t1 = appender.append([(("a",), 1)], at_least=5)
    done = store.run(ctl)
    assert AppendCompleted(t1, None) in done
    assert store.shards[hook].updates == [(("a",), 5, 1)]
    assert ctl.collection(hook).upper == A(6)
    t2 = appender.append([(("b",), 1)], at_least=2)  # behind the upper: at the upper
    assert AppendCompleted(t2, None) in store.run(ctl)
    assert store.shards[hook].updates[-1] == (("b",), 6, 1)
    assert ctl.pending_appends() == []


def test_a_race_is_retried_at_the_new_upper_never_reported(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ticket = ctl.monotonic_append(hist, [(("x",), 1)], at_least=3)
    (first,) = ctl.drain()
    assert isinstance(first, WriteToShard) and first.expected_upper == A(0)
    store.shards[hist].upper = A(40)  # another writer moved the shard meanwhile
    done = store.run(ctl, [first])
    assert AppendCompleted(ticket, None) in done
    retried = [e for e in done if isinstance(e, WriteToShard)]
    assert [(w.expected_upper, w.new_upper) for w in retried] == [(A(0), A(4)), (A(40), A(41))]
    assert store.shards[hist].updates == [(("x",), 40, 1)]  # once, at the new upper


def test_a_monotonic_append_chains_behind_a_write_in_flight(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    t1 = ctl.monotonic_append(hook, [(("a",), 1)], at_least=10)
    t2 = ctl.monotonic_append(hook, [(("b",), 1)], at_least=0)
    writes = ctl.drain()
    assert [(w.expected_upper, w.new_upper) for w in writes] == [(A(0), A(11)), (A(11), A(12))]  # type: ignore[union-attr]
    done = store.run(ctl, writes)
    assert {AppendCompleted(t1, None), AppendCompleted(t2, None)} <= set(done)


def test_a_refused_write_fails_the_ticket(ctl: StorageController) -> None:
    ticket = ctl.monotonic_append(hook, [(("a",), 1)])
    (w,) = ctl.drain()
    ctl.complete_write(ticket, hook, False, A(0))  # the store said no; the upper did not move
    assert ctl.drain() == [AppendCompleted(ticket, InvalidUppers([_upper(hook, A(0))]))]
    assert ctl.pending_appends() == []
    assert isinstance(w, WriteToShard)


def _upper(id: GlobalId, upper: Antichain) -> object:
    from tidegate.spec.errors import InvalidUpper

    return InvalidUpper(id, upper)


def test_only_append_only_collections_take_monotonic_appends(ctl: StorageController) -> None:
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierInvalid):
        ctl.monotonic_appender(stats)  # differential
    with pytest.raises(IdentifierInvalid):
        ctl.monotonic_appender(table)  # a table names the upper it expects
    with pytest.raises(IdentifierMissing):
        ctl.monotonic_appender(GlobalId.user(9))
    with pytest.raises(InvalidUsage):
        ctl.monotonic_append(hook, [("not a pair",)])  # type: ignore[list-item]
    assert controller_fingerprint(ctl) == before and ctl.drain() == []
    ctl.drop_sources([hook])
    with pytest.raises(IdentifierMissing):
        ctl.monotonic_append(hook, [])


def test_a_read_only_controller_refuses_monotonic_appends() -> None:
    c = StorageController(read_only=True)
    c.create_collections([(hook, CollectionDescription(Webhook()))])
    appender = c.monotonic_appender(hook)  # the handle is given out...
    with pytest.raises(ReadOnlyController):
        appender.append([(("a",), 1)])  # ...but it writes nothing


def test_a_closed_collection_takes_empty_appends_only(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    ctl.update_write_frontiers([(hook, Antichain.empty())])
    ctl.drain()
    with pytest.raises(IdentifierInvalid):
        ctl.monotonic_append(hook, [(("a",), 1)])
    ticket = ctl.monotonic_append(hook, [])
    assert ctl.drain() == [AppendCompleted(ticket, None)]


def test_a_table_append_after_a_monotonic_one_expects_its_upper(
    ctl: StorageController, store: ShardStoreModel
) -> None:
    """Webhook collections are appended to monotonically; an ordinary append in between
    (the controller's own, e.g. truncating) chains on the upper the monotonic write leaves."""
    ctl.monotonic_append(hook, [(("a",), 1)], at_least=7)
    ticket = ctl.append([AppendCommand(hook, [(("b",), 8, 1)], A(9))])
    writes = ctl.drain()
    assert [w.expected_upper for w in writes] == [A(0), A(8)]  # type: ignore[union-attr]
    assert AppendCompleted(ticket, None) in store.run(ctl, writes)
