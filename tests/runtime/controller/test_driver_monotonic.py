"""The runtime's monotonic appender: appends to an append-only collection without a race.

As Materialize's ``StorageController::monotonic_appender``: a handle for an
append-only collection only (a status history, a webhook source; anything else
is refused, typed), whose ``append`` lands the rows once, at a time the writer
chooses, even when another writer moved the collection's upper meanwhile (the
caller never sees the compare-and-append race). A status history is written by
the group commit, with the tables; a webhook source's collection by the spec
controller's monotonic write. The shard store is in memory; no replicas.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import anyio
import pytest

from tidegate.runtime.controller import Backoff, ControllerDriver, MonotonicHandle, ShardStorageIO
from tidegate.runtime.controller.schemas import shard_name
from tidegate.spec.controller import Controller
from tidegate.spec.errors import IdentifierInvalid, IdentifierMissing, InvalidUsage
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    COUNTER_SCHEMA,
    CollectionDescription,
    Introspection,
    StorageController,
    Table,
)
from tidegate.spec.storage.descriptions import Webhook
from tidegate.spec.storage.introspection import SOURCE_STATUS_HISTORY, STATUS_HISTORY_SCHEMA

pytestmark = pytest.mark.timeout(60)

HISTORY, TABLE, HOOK = GlobalId.system(1), GlobalId.user(1), GlobalId.user(2)
AT = dt.datetime(2026, 1, 1)


def _driver(cluster: Any) -> ControllerDriver:
    io = ShardStorageIO(cluster.store)
    for id, schema in (
        (HISTORY, STATUS_HISTORY_SCHEMA),
        (TABLE, COUNTER_SCHEMA),
        (HOOK, COUNTER_SCHEMA),
    ):
        io.set_schema(id, schema)
    return ControllerDriver(
        Controller(StorageController(check_protocol=True), check_protocol=True),
        None,  # type: ignore[arg-type]  # no compute replicas here
        io,
        address_of=lambda r: r,
        backoff=Backoff(0.01, 0.05),
        tick_ms=None,
        maintain_ms=None,
        poll_ms=None,
    )


def _create(driver: ControllerDriver) -> None:
    driver.ctl.storage.create_collections(
        [
            (HISTORY, CollectionDescription(Introspection(SOURCE_STATUS_HISTORY))),
            (TABLE, CollectionDescription(Table())),
            (HOOK, CollectionDescription(Webhook())),
        ]
    )
    driver.ctl.initialization_complete()
    driver.apply()


def _status(n: int) -> tuple[Any, ...]:
    return (AT + dt.timedelta(seconds=n), "u9", "running", None, None)


async def _counts(driver: ControllerDriver, id: GlobalId, at: int) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for row, _t, d in await driver.snapshot(id, at):
        counts[row] = counts.get(row, 0) + d
    return {r: n for r, n in counts.items() if n}


def test_a_status_history_append_joins_the_group_commit_and_survives_a_race(
    cluster: Any,
) -> None:
    async def main() -> None:
        async with _driver(cluster) as driver:
            _create(driver)
            history = driver.monotonic_appender(HISTORY)
            assert isinstance(history, MonotonicHandle)
            ts = await history.append([(_status(1), 1)])
            assert ts is not None
            assert await _counts(driver, HISTORY, ts) == {_status(1): 1}
            # written by the one writer of the collections advanced together: the table too
            assert driver.storage_frontiers(TABLE)[1] == Antichain([ts + 1])
            assert driver.storage_frontiers(HISTORY)[1] == Antichain([ts + 1])
            # another writer moves the history's upper behind the driver's back
            cluster.store.compare_and_append(
                shard_name(HISTORY), [(_status(2), ts + 1, 1)], ts + 1, ts + 2
            )
            again = await history.append([(_status(3), 1)])
            assert again is not None and again >= ts + 2
            # landed once, at a time of the writer's choosing: no race seen by the caller
            assert await _counts(driver, HISTORY, again) == {
                _status(1): 1,
                _status(2): 1,
                _status(3): 1,
            }

    anyio.run(main)


def test_a_webhook_collection_is_appended_to_by_the_spec_controllers_write(cluster: Any) -> None:
    async def main() -> None:
        async with _driver(cluster) as driver:
            _create(driver)
            hook = driver.monotonic_appender(HOOK)
            assert await hook.append([((7,), 1)]) is None
            upper = driver.storage_frontiers(HOOK)[1]
            (u,) = upper.elements
            assert await _counts(driver, HOOK, int(u) - 1) == {(7,): 1}
            # raced: the spec controller writes again at the upper it finds
            cluster.store.compare_and_append(
                shard_name(HOOK), [((8,), int(u), 1)], int(u), int(u) + 3
            )
            await hook.append([((9,), 1)])
            (u2,) = driver.storage_frontiers(HOOK)[1].elements
            assert int(u2) > int(u) + 3
            assert await _counts(driver, HOOK, int(u2) - 1) == {(7,): 1, (8,): 1, (9,): 1}

    anyio.run(main)


def test_only_append_only_collections_get_an_appender_and_bad_input_changes_nothing(
    cluster: Any,
) -> None:
    async def main() -> None:
        async with _driver(cluster) as driver:
            _create(driver)
            with pytest.raises(IdentifierInvalid):
                driver.monotonic_appender(TABLE)  # a table is written by appends, not blindly
            with pytest.raises(IdentifierMissing):
                driver.monotonic_appender(GlobalId.user(99))
            history = driver.monotonic_appender(HISTORY)
            before = driver.storage_frontiers(HISTORY)[1]
            with pytest.raises(InvalidUsage):
                await history.append([(_status(1), "one")])  # type: ignore[list-item]
            assert driver.storage_frontiers(HISTORY)[1] == before

    anyio.run(main)
