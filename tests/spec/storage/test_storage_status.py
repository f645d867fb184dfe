"""The controller's side of running ingestions: the remap hold, statuses, statistics and managed collections."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import IdentifierInvalid, RemoteProtocolError, StorageFrontierRegression
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, StepBack, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    CollectionDropped,
    DroppedId,
    ExportDescription,
    Ingestion,
    Introspection,
    ManagedWrite,
    Progress,
    SendStorageCommand,
    SinkStatistics,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowWrites,
    StorageController,
    StorageFrontierUpper,
    Table,
    statistics_row,
    status_row,
)
from tidegate.spec.testing import controller_fingerprint, storage_read_policies

REMAP, ING, SINK = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
HISTORY, STATS, SINK_HISTORY, SINK_STATS = (GlobalId.system(i) for i in (1, 2, 3, 4))
EMPTY = Antichain()


def A(t: int) -> Antichain:
    return Antichain([t])


def _running(ctl: StorageController, *, sink: bool = False) -> None:
    """An instance with one replica running an ingestion (and a sink of it), past initialization."""
    ctl.create_instance("i")
    ctl.create_collections(
        [
            (REMAP, CollectionDescription(Progress())),
            (ING, CollectionDescription(Ingestion("i", REMAP))),
        ]
    )
    if sink:
        ctl.create_exports([(ctl.prepare_export(SINK, ING), ExportDescription(ING, "i"))])
    ctl.connect_replica("i", "r")
    ctl.initialization_complete()
    ctl.drain()


def _managed(ctl: StorageController) -> None:
    ctl.create_collections(
        [
            (HISTORY, CollectionDescription(Introspection("source_status_history"))),
            (STATS, CollectionDescription(Introspection("source_statistics"))),
            (SINK_HISTORY, CollectionDescription(Introspection("sink_status_history"))),
            (SINK_STATS, CollectionDescription(Introspection("sink_statistics"))),
        ]
    )


def _writes(ctl: StorageController) -> list[ManagedWrite]:
    return [e for e in ctl.drain() if isinstance(e, ManagedWrite)]


# -- the remap hold ---------------------------------------------------------------------------


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("upper"), st.integers(0, 30)),
            st.tuples(st.just("remap-upper"), st.integers(0, 40)),
            st.tuples(st.just("remap-policy"), storage_read_policies(40)),
            st.tuples(st.just("policy"), storage_read_policies(40)),
        ),
        max_size=20,
    )
)
def test_the_remap_since_never_passes_step_back_of_the_ingestion_upper(
    steps: list[tuple[str, object]],
) -> None:
    ctl = StorageController()
    _running(ctl)
    for kind, arg in steps:
        if kind == "upper":
            ctl.handle_response("i", "r", StorageFrontierUpper(ING, A(arg)))  # type: ignore[arg-type]
        elif kind == "remap-upper":
            ctl.handle_response("i", "r", StorageFrontierUpper(REMAP, A(arg)))  # type: ignore[arg-type]
        elif kind == "remap-policy":
            ctl.set_read_policy([(REMAP, arg)])  # type: ignore[list-item]
        else:
            ctl.set_read_policy([(ING, arg)])  # type: ignore[list-item]
        remap, ing = ctl.collection(REMAP), ctl.collection(ING)
        assert remap.since <= StepBack().frontier(ing.upper)
        assert ctl.remap_holds() == {ING: (REMAP, StepBack().frontier(ing.upper))}
    # Released when the ingestion goes: only the remap collection's own policy holds it then.
    ctl.set_read_policy([(REMAP, ValidFrom(A(100)))])
    ctl.drop_sources([ING])
    assert ctl.remap_holds() == {}
    assert ctl.collection(REMAP).since == A(100)


def test_the_remap_hold_starts_at_the_remap_since_when_it_is_already_beyond() -> None:
    ctl = StorageController()
    ctl.create_instance("i")
    ctl.create_collections([(REMAP, CollectionDescription(Table()))], {})
    ctl.set_read_policy([(REMAP, ValidFrom(A(5)))])
    ctl.create_collections([(ING, CollectionDescription(Ingestion("i", REMAP)))])
    assert ctl.remap_holds() == {ING: (REMAP, A(5))}


def test_a_remap_collection_serves_one_ingestion() -> None:
    ctl = StorageController()
    _running(ctl)
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierInvalid):
        ctl.create_collections([(GlobalId.user(9), CollectionDescription(Ingestion("i", REMAP)))])
    with pytest.raises(IdentifierInvalid):
        ctl.create_collections([(GlobalId.user(9), CollectionDescription(Ingestion("i", ING)))])
    assert controller_fingerprint(ctl) == before


def test_remap_uppers_advance_the_remap_collection() -> None:
    ctl = StorageController()
    _running(ctl)
    ctl.set_read_policy([(REMAP, LagWriteFrontier(0, 1))])
    ctl.handle_response("i", "r", StorageFrontierUpper(REMAP, A(7)))
    assert ctl.collection(REMAP).upper == A(7)
    assert ctl.collection(REMAP).since == A(0)  # the ingestion (upper 0) holds it


# -- statuses and statistics -----------------------------------------------------------------


def test_statuses_are_kept_and_each_change_is_a_row_of_the_status_history() -> None:
    ctl = StorageController()
    _running(ctl, sink=True)
    _managed(ctl)
    ctl.drain()
    starting = StatusUpdate(ING, SourceStatus.STARTING)
    stalled = StatusUpdate(ING, SourceStatus.STALLED, "connection refused", "check the host")
    ctl.handle_response("i", "r", starting)
    ctl.handle_response("i", "r", starting)  # no change, no row
    ctl.handle_response("i", "r", stalled)
    ctl.handle_response("i", "r", StatusUpdate(SINK, SourceStatus.RUNNING))
    assert _writes(ctl) == [
        ManagedWrite(HISTORY, ((status_row(starting), 1),), stamped=True),
        ManagedWrite(HISTORY, ((status_row(stalled), 1),), stamped=True),
        ManagedWrite(SINK_HISTORY, ((("u3", "running", None, None), 1),), stamped=True),
    ]
    assert ctl.status(ING) == stalled
    assert status_row(stalled) == ("u2", "stalled", "connection refused", "check the host")


def test_statistics_merge_and_the_statistics_collection_follows_them() -> None:
    ctl = StorageController()
    _running(ctl, sink=True)
    ctl.handle_response("i", "r", StatisticsUpdate(ING, SourceStatistics(2, 20, offset_known=5)))
    _managed(ctl)
    first = SourceStatistics(2, 20, offset_known=5)
    # Registering the collection truncates it and writes what the controller knows.
    assert _writes(ctl) == [
        ManagedWrite(STATS, ((statistics_row(ING, first), 1),), truncate=True),
        ManagedWrite(SINK_STATS, (), truncate=True),
    ]
    ctl.handle_response("i", "r", StatisticsUpdate(ING, SourceStatistics(1, 4, offset_committed=3)))
    merged = SourceStatistics(3, 24, offset_known=5, offset_committed=3)
    assert ctl.statistics(ING) == merged
    assert _writes(ctl) == [
        ManagedWrite(STATS, ((statistics_row(ING, first), -1), (statistics_row(ING, merged), 1)))
    ]
    ctl.handle_response("i", "r", StatisticsUpdate(SINK, SinkStatistics(4, 4, 100, 100)))
    assert _writes(ctl) == [
        ManagedWrite(SINK_STATS, ((statistics_row(SINK, SinkStatistics(4, 4, 100, 100)), 1),))
    ]
    ctl.handle_response("i", "r", StatisticsUpdate(ING, SourceStatistics()))
    assert _writes(ctl) == []  # nothing changed


def test_a_drop_records_dropped_retracts_statistics_and_ignores_late_responses() -> None:
    ctl = StorageController()
    _running(ctl)
    _managed(ctl)
    ctl.handle_response("i", "r", StatisticsUpdate(ING, SourceStatistics(1)))
    ctl.drain()
    ctl.drop_sources([ING])
    effects = ctl.drain()
    assert CollectionDropped(ING) in effects
    dropped = StatusUpdate(ING, SourceStatus.DROPPED)
    assert [e for e in effects if isinstance(e, ManagedWrite)] == [
        ManagedWrite(STATS, ((statistics_row(ING, SourceStatistics(1)), -1),)),
        ManagedWrite(HISTORY, ((status_row(dropped), 1),), stamped=True),
    ]
    assert ctl.status(ING) == dropped and ctl.statistics(ING) is None
    for late in (
        StatusUpdate(ING, SourceStatus.DROPPED),
        StatisticsUpdate(ING, SourceStatistics(5)),
        StorageFrontierUpper(ING, A(9)),
        DroppedId(ING),
    ):
        ctl.handle_response("i", "r", late)
    assert [e for e in ctl.drain() if not isinstance(e, SendStorageCommand)] == []
    assert ctl.status(ING) == dropped


def test_a_dropped_sink_is_dropped_too() -> None:
    ctl = StorageController()
    _running(ctl, sink=True)
    _managed(ctl)
    ctl.drain()
    ctl.drop_sinks([SINK])
    assert (
        ManagedWrite(SINK_HISTORY, ((("u3", "dropped", None, None), 1),), stamped=True)
        in ctl.drain()
    )


def test_one_managed_collection_per_kind() -> None:
    ctl = StorageController()
    _managed(ctl)
    before = controller_fingerprint(ctl)
    with pytest.raises(IdentifierInvalid):
        ctl.create_collections(
            [(GlobalId.system(9), CollectionDescription(Introspection("source_statistics")))]
        )
    assert controller_fingerprint(ctl) == before
    ctl.drop_sources([STATS])
    ctl.create_collections(
        [(GlobalId.system(9), CollectionDescription(Introspection("source_statistics")))]
    )
    assert ctl.managed_collections()["source_statistics"] == GlobalId.system(9)


def test_a_read_only_controller_writes_nothing_until_it_is_read_write() -> None:
    ctl = StorageController(read_only=True)
    _running(ctl)
    _managed(ctl)
    ctl.handle_response("i", "r", StatusUpdate(ING, SourceStatus.RUNNING))
    ctl.handle_response("i", "r", StatisticsUpdate(ING, SourceStatistics(3)))
    assert _writes(ctl) == []
    ctl.read_write()
    effects = ctl.drain()
    assert effects[0] == SendStorageCommand("i", "r", StorageAllowWrites())
    assert [e for e in effects if isinstance(e, ManagedWrite)] == [
        ManagedWrite(STATS, ((statistics_row(ING, SourceStatistics(3)), 1),), truncate=True),
        ManagedWrite(SINK_STATS, (), truncate=True),
        ManagedWrite(
            HISTORY, ((status_row(StatusUpdate(ING, SourceStatus.RUNNING)), 1),), stamped=True
        ),
    ]


def test_with_protocol_checks_a_broken_response_changes_nothing() -> None:
    ctl = StorageController(check_protocol=True)
    _running(ctl)
    ctl.handle_response("i", "r", StorageFrontierUpper(ING, A(5)))
    ctl.drain()
    before = controller_fingerprint(ctl)
    with pytest.raises(StorageFrontierRegression) as info:
        ctl.handle_response("i", "r", StorageFrontierUpper(ING, A(5)))
    assert isinstance(info.value, RemoteProtocolError)
    assert controller_fingerprint(ctl) == before and ctl.drain() == []
    session = ctl.protocol_session("i")
    assert session is not None and session.last_reported(ING) == A(5)


@pytest.mark.parametrize("status", list(SourceStatus))
def test_only_a_status_that_reports_an_error_fails_reads(status: SourceStatus) -> None:
    """A read waiting on a source fails with its error while the source is ``stalled`` or
    ``ceased`` (Materialize answers it with the source's error); a ``starting`` or ``running``
    source is merely slow and is waited for."""
    update = StatusUpdate(
        GlobalId.user(1), status, "boom" if status in ("stalled", "ceased") else None
    )
    assert update.fails_reads is (status in (SourceStatus.STALLED, SourceStatus.CEASED))
