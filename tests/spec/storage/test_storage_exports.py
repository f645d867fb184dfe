"""Exports and the CreateExportToken (reference section 2.8), sink drops (section 2.11)."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    ExportInstanceMissing,
    IdentifierInvalid,
    IdentifierMissing,
    InvalidUsage,
    SinkIdReused,
    SourceIdReused,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, StepBack, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    CollectionDescription,
    CollectionDropped,
    ExportDescription,
    RunSink,
    SendStorageCommand,
    SinceChanged,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageController,
    StorageFrontierUpper,
    Table,
)
from tidegate.spec.testing import controller_fingerprint

u1, u2, u5, u6 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(5), GlobalId.user(6)
TABLE = CollectionDescription(Table())


def A(*ts: int) -> Antichain:
    return Antichain(ts)


@pytest.fixture
def ctl() -> StorageController:
    """Instance ``i`` with replica ``r``; table u1 at upper 10, lagging by 2 (since 8)."""
    c = StorageController()
    c.create_instance("i")
    c.connect_replica("i", "r")
    c.create_collections([(u1, TABLE), (u2, TABLE)])
    c.update_write_frontiers([(u1, A(10))])
    c.set_read_policy([(u1, LagWriteFrontier(2, 1))])
    return c


def test_prepare_export_holds_the_input_at_its_implied_capability(ctl: StorageController) -> None:
    token = ctl.prepare_export(u5, u1)
    assert (token.id, token.from_id, token.acquired_since) == (u5, u1, A(8))
    ctl.update_write_frontiers([(u1, A(20))])
    assert ctl.collection(u1).since == A(8)
    assert ctl.outstanding_tokens() == [token]
    ctl.drain()
    ctl.cancel_prepare_export(token)
    effects = ctl.drain()
    assert SinceChanged(u1, A(18)) in effects
    assert ctl.outstanding_tokens() == []
    with pytest.raises(InvalidUsage):
        ctl.cancel_prepare_export(token)


def test_prepare_export_errors(ctl: StorageController) -> None:
    with pytest.raises(IdentifierMissing):
        ctl.prepare_export(u5, u6)
    token = ctl.prepare_export(u5, u1)
    ctl.create_exports([(token, ExportDescription(u1, "i"))])
    with pytest.raises(SourceIdReused):
        ctl.prepare_export(u5, u1)


def test_create_exports_takes_over_the_token_hold(ctl: StorageController) -> None:
    token = ctl.prepare_export(u5, u1)
    desc = ExportDescription(u1, "i", as_of=A(3))
    ctl.drain()
    ctl.create_exports([(token, desc)])
    effects = ctl.drain()
    # The as_of (3) is before the held since (8): it is advanced and marked strict.
    assert effects == [SendStorageCommand("i", "r", RunSink(u5, desc, A(8), True))]
    e = ctl.export(u5)
    assert (e.as_of, e.strict, e.read_capability, e.upper) == (A(8), True, A(8), A(0))
    assert e.read_policy == StepBack()
    assert ctl.dependencies(u5) == [u1]
    assert ctl.collection(u1).read_capabilities == ((8, 2),)
    assert ctl.exports() == [e]
    with pytest.raises(InvalidUsage):  # the token was consumed
        ctl.cancel_prepare_export(token)


def test_a_later_as_of_is_kept(ctl: StorageController) -> None:
    token = ctl.prepare_export(u5, u1)
    ctl.create_exports([(token, ExportDescription(u1, "i", as_of=A(9)))])
    assert (ctl.export(u5).as_of, ctl.export(u5).strict) == (A(9), False)


def test_sink_progress_moves_its_hold_by_step_back(ctl: StorageController) -> None:
    token = ctl.prepare_export(u5, u1)
    ctl.create_exports([(token, ExportDescription(u1, "i"))])
    ctl.update_write_frontiers([(u1, A(30))])
    assert ctl.collection(u1).since == A(8)
    ctl.drain()
    ctl.handle_response("i", "r", StorageFrontierUpper(u5, A(15)))
    effects = ctl.drain()
    assert SendStorageCommand("i", "r", StorageAllowCompaction(u5, A(14))) in effects
    assert ctl.export(u5).read_capability == A(14)
    assert ctl.collection(u1).since == A(14)
    # A step back behind the capability changes nothing.
    ctl.handle_response("i", "r", StorageFrontierUpper(u5, A(12)))
    assert ctl.drain() == []


def test_create_exports_validation_is_all_or_nothing(ctl: StorageController) -> None:
    t1 = ctl.prepare_export(u5, u1)
    t2 = ctl.prepare_export(u5, u1)
    t3 = ctl.prepare_export(u6, u1)
    before = controller_fingerprint(ctl)
    good = (t3, ExportDescription(u1, "i"))
    cases: list[tuple[type[Exception], list[tuple[object, ExportDescription]]]] = [
        (SinkIdReused, [good, (t1, ExportDescription(u1, "i")), (t2, ExportDescription(u1, "i"))]),
        (InvalidUsage, [good, (t1, ExportDescription(u2, "i"))]),
        (ExportInstanceMissing, [good, (t1, ExportDescription(u1, "nowhere"))]),
        (InvalidUsage, [good, good]),
    ]
    for error, exports in cases:
        with pytest.raises(error):
            ctl.create_exports(exports)  # type: ignore[arg-type]
        assert controller_fingerprint(ctl) == before


def test_existing_export_id(ctl: StorageController) -> None:
    desc = ExportDescription(u1, "i")
    ctl.create_exports([(ctl.prepare_export(u5, u1), desc)])
    other = ctl.prepare_export(u6, u1)
    twin = ctl.prepare_export(u6, u1)
    ctl.create_exports([(other, ExportDescription(u1, "i"))])
    with pytest.raises(SinkIdReused):
        ctl.create_exports([(twin, ExportDescription(u1, "i", as_of=A(9)))])
    # The same description again is a no-op that returns the token's hold.
    ctl.create_exports([(twin, ExportDescription(u1, "i"))])
    assert ctl.outstanding_tokens() == []
    assert ctl.collection(u1).read_capabilities == ((8, 3),)


def test_an_export_id_may_not_be_a_collection(ctl: StorageController) -> None:
    token = ctl.prepare_export(u2, u1)
    with pytest.raises(SinkIdReused):
        ctl.create_exports([(token, ExportDescription(u1, "i"))])


def test_exports_are_not_readable_or_writable(ctl: StorageController) -> None:
    ctl.create_exports([(ctl.prepare_export(u5, u1), ExportDescription(u1, "i"))])
    with pytest.raises(IdentifierInvalid):
        ctl.set_read_policy([(u5, ValidFrom(A(1)))])
    with pytest.raises(IdentifierInvalid):
        ctl.snapshot(u5, 0)
    with pytest.raises(IdentifierInvalid):
        ctl.acquire_read_holds([u5])
    with pytest.raises(IdentifierInvalid):
        ctl.update_read_capabilities({u5: [(8, 1)]})


def test_drop_sinks_releases_the_input_and_tears_the_sink_down(ctl: StorageController) -> None:
    ctl.create_exports([(ctl.prepare_export(u5, u1), ExportDescription(u1, "i"))])
    ctl.update_write_frontiers([(u1, A(30))])
    with pytest.raises(IdentifierMissing):
        ctl.drop_sinks([u5, u6])
    ctl.drain()
    ctl.drop_sinks([u5])
    effects = ctl.drain()
    assert SinceChanged(u1, A(28)) in effects
    assert SendStorageCommand("i", "r", StorageAllowCompaction(u5, Antichain.empty())) in effects
    assert effects[-1] == CollectionDropped(u5)
    assert ctl.exports() == [] and ctl.history("i") == [StorageAllowWrites()]
    with pytest.raises(IdentifierMissing):
        ctl.export(u5)
    ctl.drop_sinks_unvalidated([u5, u6])
    assert ctl.drain() == []
    with pytest.raises(SinkIdReused):
        ctl.create_exports([(ctl.prepare_export(u5, u1), ExportDescription(u1, "i"))])
