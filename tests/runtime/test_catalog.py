"""The durable catalog: validated ops, versioned JSON, compare-and-set, restore plans."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.catalog import (
    AlterReplica,
    Catalog,
    CatalogOp,
    CatalogState,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateTable,
    Drop,
    DropReplica,
    ReplicaEntry,
    SetReadPolicy,
    apply_op,
    apply_ops,
    dataflow_for,
    decode_catalog,
    encode_catalog,
    restore_plan,
)
from tidegate.runtime.errors import (
    CatalogConflict,
    CatalogDecodeError,
    CatalogError,
    DuplicateCatalogId,
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from tidegate.runtime.storage import SqliteConsensus
from tidegate.spec.errors import TidegateError
from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.frontier.read_policy import (
    LagWriteFrontier,
    Multiple,
    NoPolicy,
    ReadPolicy,
    StepBack,
    ValidFrom,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Get, Project, Schema, typecheck, validate_dataflow
from tidegate.spec.shard import MemoryConsensus, VersionedData
from tidegate.spec.strategies.plan import plans, schemas

U = GlobalId.user
T_SCHEMA = Schema.of(("k", "int64", False), ("v", "string"))


def _base() -> CatalogState:
    """Table t (u1), index t_by_k on it (u2), MV big (u3) over t, index big_idx over the MV (u4)."""
    t = Get(U(1), T_SCHEMA)
    return apply_ops(
        CatalogState(),
        [
            CreateTable("t", U(1), T_SCHEMA),
            CreateIndex("t_by_k", U(2), t, (0,), on=U(1)),
            CreateMaterializedView("big", U(3), Project(t, (0,))),
            CreateIndex("big_idx", U(4), Get(U(3), T_SCHEMA.project([0])), (0,)),
            CreateReplica("r1"),
            CreateReplica("ext", managed=False, address="10.0.0.1:6000"),
            SetReadPolicy(U(2), LagWriteFrontier(1000, 100)),
        ],
    )


# -- apply_op rules ---------------------------------------------------------------------------


def test_creates_record_objects_and_advance_the_next_id() -> None:
    s = _base()
    assert [t.name for t in s.tables] == ["t"]
    assert [i.id for i in s.indexes] == [U(2), U(4)]
    assert s.by_name("big").id == U(3)
    assert s.next_user_id == 5 and s.next_id == U(5)
    assert s.replica("r1") == ReplicaEntry("r1", True, None, "local[1]", "spark")
    assert s.replica("ext").address == "10.0.0.1:6000"
    assert s.read_policy(U(2)) == LagWriteFrontier(1000, 100)
    assert s.dependencies(U(4)) == (U(3),)
    assert s.dependents(U(1)) == (U(2), U(3))
    assert s.schema_of(U(3)) == T_SCHEMA.project([0])


@pytest.mark.parametrize(
    ("op", "error"),
    [
        (CreateTable("t", U(9), T_SCHEMA), DuplicateCatalogName),  # clashes with the table
        (CreateTable("t_by_k", U(9), T_SCHEMA), DuplicateCatalogName),  # one namespace
        (CreateTable("x", U(3), T_SCHEMA), DuplicateCatalogId),  # in use
        (CreateTable("x", GlobalId("s", 9), T_SCHEMA), InvalidCatalogOp),  # not a user id
        (CreateTable("", U(9), T_SCHEMA), InvalidCatalogOp),
        (CreateTable(" x", U(9), T_SCHEMA), InvalidCatalogOp),
        (CreateTable("x", U(9), "k int"), InvalidCatalogOp),  # type: ignore[arg-type]
        (CreateIndex("i", U(9), Get(U(77), T_SCHEMA)), UnknownCatalogObject),
        (CreateIndex("i", U(9), Get(U(1), Schema.of(("k", "string")))), InvalidCatalogOp),
        (CreateIndex("i", U(9), Get(U(1), T_SCHEMA), (2,)), InvalidCatalogOp),  # key past arity
        (CreateIndex("i", U(9), Get(U(1), T_SCHEMA), on=U(50)), UnknownCatalogObject),
        (CreateIndex("i", U(9), "not a plan"), InvalidCatalogOp),  # type: ignore[arg-type]
        (CreateIndex("i", U(9), Get(U(1), T_SCHEMA), 0), InvalidCatalogOp),  # type: ignore[arg-type]
        (CreateMaterializedView("m", U(9), Get(U(2), T_SCHEMA.project([0]))), InvalidCatalogOp),
        (CreateReplica("r1"), DuplicateCatalogName),
        (CreateReplica("r2", address="h:1"), InvalidCatalogOp),  # managed: no address
        (CreateReplica("r2", executor="flink"), InvalidCatalogOp),
        (CreateReplica("r2", managed=False), InvalidCatalogOp),  # unmanaged: address needed
        (CreateReplica("r2", managed=False, address="h:1", spark_master="local"), InvalidCatalogOp),
        (DropReplica("nope"), UnknownCatalogObject),
        (AlterReplica("nope"), UnknownCatalogObject),
        (AlterReplica("r1", address="h:1"), InvalidCatalogOp),  # managed: no address
        (AlterReplica("r1", executor="flink"), InvalidCatalogOp),
        (AlterReplica("ext", managed=False), InvalidCatalogOp),  # unmanaged: address needed
        (AlterReplica("", managed=False, address="h:1"), UnknownCatalogObject),
        (Drop(U(42)), UnknownCatalogObject),
        (Drop(U(1)), HasDependents),
        (Drop(U(3)), HasDependents),
        (SetReadPolicy(U(42), StepBack()), UnknownCatalogObject),
        (SetReadPolicy(U(1), ValidFrom(Antichain([Product(1, 2)]))), InvalidCatalogOp),
    ],
)
def test_invalid_ops_raise_typed_errors(op: CatalogOp, error: type[Exception]) -> None:
    s = _base()
    with pytest.raises(error) as info:
        apply_op(s, op)
    assert isinstance(info.value, CatalogError)
    assert isinstance(info.value, TidegateError)
    assert s == _base()


def test_unknown_custom_policy_cannot_be_stored() -> None:
    class Custom(ReadPolicy):
        def frontier(self, write_frontier: Antichain) -> Antichain:
            return write_frontier

    with pytest.raises(InvalidCatalogOp, match="cannot store"):
        apply_op(_base(), SetReadPolicy(U(1), Custom()))


def test_ids_are_never_reused_after_a_drop() -> None:
    s = apply_op(_base(), Drop(U(4)))
    assert U(4) not in [e.id for e in s.entries()]
    with pytest.raises(DuplicateCatalogId, match="never reused"):
        apply_op(s, CreateTable("again", U(4), T_SCHEMA))
    s = apply_op(s, CreateTable("again", U(5), T_SCHEMA))
    assert s.next_user_id == 6


def test_cascade_drops_transitive_dependents_and_their_policies() -> None:
    s = apply_op(_base(), SetReadPolicy(U(4), StepBack()))
    s = apply_op(s, Drop(U(1), cascade=True))
    assert s.entries() == []
    assert s.read_policies == ()
    assert [r.name for r in s.replicas] == ["ext", "r1"]  # replicas are not objects
    assert s.next_user_id == 5


def test_drop_leaf_then_its_input() -> None:
    s = apply_ops(_base(), [Drop(U(4)), Drop(U(3)), Drop(U(2)), Drop(U(1)), DropReplica("r1")])
    assert s.entries() == [] and [r.name for r in s.replicas] == ["ext"]
    assert s.read_policies == ()


def test_set_read_policy_none_clears() -> None:
    s = apply_op(_base(), SetReadPolicy(U(2), None))
    assert s.read_policy(U(2)) is None
    assert apply_op(s, SetReadPolicy(U(2), None)) == s


def test_index_reading_an_index_imports_it() -> None:
    s = apply_op(_base(), CreateIndex("on_idx", U(5), Get(U(2), T_SCHEMA), (1,)))
    d = dataflow_for(s, U(5))
    assert [i.id for i in d.index_imports] == [U(2)]
    assert d.index_imports[0].key == (0,)
    assert d.source_imports == ()
    validate_dataflow(d)
    with pytest.raises(InvalidCatalogOp):
        dataflow_for(s, U(1))


# -- encoding and the durable catalog ----------------------------------------------------------


def test_round_trip_of_the_example_state() -> None:
    s = apply_op(
        _base(),
        SetReadPolicy(
            U(1), Multiple([ValidFrom(Antichain([7])), StepBack(), NoPolicy(Antichain([0]))])
        ),
    )
    assert decode_catalog(encode_catalog(s)) == s


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b"{}", b'{"version": 2}', b'{"version": 1, "tables": 3}', b"\xff"],
)
def test_undecodable_catalogs_are_typed_errors(data: bytes) -> None:
    with pytest.raises(CatalogDecodeError):
        decode_catalog(data)


def test_catalog_persists_across_reopen_over_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "consensus.db"
    c = Catalog(SqliteConsensus(db))
    assert c.load() == CatalogState()
    ops: list[CatalogOp] = [
        CreateTable("t", U(1), T_SCHEMA),
        CreateIndex("t_by_k", U(2), Get(U(1), T_SCHEMA), (0,)),
    ]
    c.apply(ops[:1])
    c.apply(ops[1:])
    again = Catalog(SqliteConsensus(db))
    assert again.load() == apply_ops(CatalogState(), ops)
    assert again.seqno == c.seqno == 1
    assert [d.export_ids for d in again.restore_plan().dataflows] == [(U(2),)]


def test_a_conflicting_writer_gets_a_typed_error_and_no_change() -> None:
    consensus = MemoryConsensus()
    a, b = Catalog(consensus), Catalog(consensus)
    a.load(), b.load()
    a.apply([CreateTable("t", U(1), T_SCHEMA)])
    with pytest.raises(CatalogConflict) as info:
        b.apply([CreateTable("other", U(1), T_SCHEMA)])
    assert (info.value.expected_seqno, info.value.found_seqno) == (None, 0)
    assert b.state == CatalogState()
    assert Catalog(consensus).load() == a.state
    b.load()
    b.apply([CreateTable("other", U(2), T_SCHEMA)])
    assert [t.name for t in Catalog(consensus).load().tables] == ["t", "other"]  # by id


def test_an_invalid_batch_writes_nothing() -> None:
    consensus = MemoryConsensus()
    c = Catalog(consensus)
    c.apply([CreateTable("t", U(1), T_SCHEMA)])
    head = consensus.head("tidegate/catalog")
    with pytest.raises(DuplicateCatalogName):
        c.apply([CreateTable("fine", U(2), T_SCHEMA), CreateTable("t", U(3), T_SCHEMA)])
    assert consensus.head("tidegate/catalog") == head
    assert c.state == Catalog(consensus).load()
    assert c.apply([]) == c.state
    assert consensus.head("tidegate/catalog") == head


def test_a_garbled_durable_catalog_fails_to_load() -> None:
    consensus = MemoryConsensus()
    consensus.compare_and_set("tidegate/catalog", None, VersionedData(0, b"garbage"))
    with pytest.raises(CatalogDecodeError):
        Catalog(consensus).load()


# -- restore ------------------------------------------------------------------------------------


def test_restore_plan_orders_collections_then_dataflows() -> None:
    s = apply_op(_base(), CreateIndex("on_idx", U(5), Get(U(2), T_SCHEMA), (1,)))
    plan = restore_plan(s)
    assert [(c.id, c.kind) for c in plan.storage_collections] == [
        (U(1), "table"),
        (U(3), "materialized_view"),
    ]
    assert plan.storage_collections[1].schema == T_SCHEMA.project([0])
    assert [d.export_ids for d in plan.dataflows] == [(U(2),), (U(3),), (U(4),), (U(5),)]
    assert all(d.as_of is None for d in plan.dataflows)
    assert plan.read_policies == {U(2): LagWriteFrontier(1000, 100)}
    assert [r.name for r in plan.replicas] == ["ext", "r1"]
    for d in plan.dataflows:
        validate_dataflow(d)


def test_restore_plan_selects_as_ofs_from_the_shards_frontiers() -> None:
    s = apply_op(_base(), SetReadPolicy(U(2), LagWriteFrontier(100, 10)))
    frontiers = {
        U(1): (Antichain([10]), Antichain([500])),  # table: readable from 10, complete to 499
        U(3): (Antichain([5]), Antichain([300])),  # MV output: written up to 299
    }
    plan = restore_plan(s, frontiers, current_time=499)
    as_ofs = {d.export_ids[0]: d.as_of for d in plan.dataflows}
    assert as_ofs[U(3)] == Antichain([299])  # a durable output continues where it left off
    assert as_ofs[U(2)] == Antichain([400])  # where its read policy wants it readable
    big_idx = as_ofs[U(4)]
    assert big_idx is not None and Antichain([5]) <= big_idx
    assert plan.storage_holds[U(1)] == Antichain([10])
    assert plan.as_of_failures == ()
    by_export = {d.export_ids[0]: d for d in plan.dataflows}
    assert by_export[U(3)].source_imports[0].upper == Antichain([500])


def test_restore_plan_keeps_the_history_of_an_index_without_a_policy_by_the_default() -> None:
    """An index without a policy of its own compacts by the default one; restored without it,
    it came back readable only from its inputs' upper (the simulator's churn seed 5: an index
    created at 211 and restored at 1021 came back at since 1020, losing the second of history
    the default policy keeps)."""
    s = _base()
    frontiers = {
        U(1): (Antichain([10]), Antichain([500])),
        U(3): (Antichain([5]), Antichain([300])),
    }
    bare = {
        d.export_ids[0]: d.as_of for d in restore_plan(s, frontiers, current_time=499).dataflows
    }
    assert bare[U(4)] == Antichain([299])  # big_idx has no policy: the latest correct time
    plan = restore_plan(s, frontiers, current_time=499, default_policy=LagWriteFrontier(100, 10))
    as_ofs = {d.export_ids[0]: d.as_of for d in plan.dataflows}
    assert as_ofs[U(4)] == Antichain([200])  # as far back as the default keeps (its input: 300)
    assert as_ofs[U(2)] == bare[U(2)]  # an index's own policy wins over the default


def test_restore_plan_needs_every_storage_frontier_and_a_time() -> None:
    s = _base()
    with pytest.raises(UnknownCatalogObject):
        restore_plan(s, {U(1): (Antichain([0]), Antichain([1]))}, current_time=1)
    with pytest.raises(ValueError):
        restore_plan(s, {U(1): (Antichain([0]), Antichain([1]))})


def test_alter_replica_replaces_its_spec_and_keeps_the_others() -> None:
    s = _base()
    s2 = apply_op(s, AlterReplica("r1", spark_master="local[4]", executor="python"))
    assert s2.replica("r1") == ReplicaEntry("r1", True, None, "local[4]", "python")
    assert s2.replica("ext") == s.replica("ext")
    assert [r.name for r in s2.replicas] == [r.name for r in s.replicas]
    # Managed to unmanaged and back; the same spec again changes nothing.
    s3 = apply_op(s2, AlterReplica("r1", managed=False, address="h:7000"))
    assert s3.replica("r1") == ReplicaEntry("r1", False, "h:7000", None, "spark")
    assert apply_op(s3, AlterReplica("r1", managed=False, address="h:7000")) == s3
    assert apply_op(s3, AlterReplica("r1")).replica("r1") == s.replica("r1")
    assert decode_catalog(encode_catalog(s3)) == s3


def test_alter_replica_is_durable(tmp_path: Path) -> None:
    consensus = SqliteConsensus(tmp_path / "c.db")
    Catalog(consensus).apply([CreateReplica("r1")])
    Catalog(consensus).apply([AlterReplica("r1", executor="python")])
    assert Catalog(consensus).load().replica("r1").executor == "python"


# -- properties -----------------------------------------------------------------------------------

_policies: st.SearchStrategy[ReadPolicy] = st.recursive(
    st.one_of(
        st.builds(
            ValidFrom, st.one_of(st.just(Antichain()), st.integers(0, 99).map(Antichain.from_elem))
        ),
        st.builds(LagWriteFrontier, st.integers(0, 50), st.integers(1, 20)),
        st.just(StepBack()),
        st.builds(NoPolicy, st.integers(0, 9).map(Antichain.from_elem)),
    ),
    lambda inner: st.lists(inner, max_size=3).map(Multiple),
    max_leaves=4,
)


@st.composite
def _op(draw: st.DrawFn, state: CatalogState) -> CatalogOp:
    """A valid op for ``state``."""
    entries = state.entries()
    kinds = ["table", "replica"]
    if entries:
        kinds += ["index", "mv", "index", "mv", "drop", "policy"]
    if state.replicas:
        kinds += ["drop_replica", "alter_replica"]
    kind = draw(st.sampled_from(kinds))
    fresh = U(state.next_user_id + draw(st.integers(0, 3)))
    name = f"o{fresh.value}"
    if kind == "table":
        return CreateTable(name, fresh, draw(schemas(1, 3)))
    if kind in ("index", "mv"):
        picked = draw(st.lists(st.sampled_from(entries), min_size=1, max_size=2, unique=True))
        inputs = {e.id: state.schema_of(e.id) for e in picked}
        plan = draw(plans(inputs, max_depth=2))
        if kind == "mv":
            return CreateMaterializedView(name, fresh, plan)
        arity = typecheck(plan).arity
        keys = tuple(draw(st.lists(st.integers(0, arity - 1), max_size=2))) if arity else ()
        return CreateIndex(name, fresh, plan, keys, draw(st.sampled_from([None, picked[0].id])))
    if kind == "drop":
        return Drop(draw(st.sampled_from(entries)).id, cascade=True)
    if kind == "policy":
        target = draw(st.sampled_from(entries)).id
        return SetReadPolicy(target, draw(st.one_of(st.none(), _policies)))
    if kind == "drop_replica":
        return DropReplica(draw(st.sampled_from(state.replicas)).name)
    taken = {r.name for r in state.replicas}
    if kind == "alter_replica":
        rname = draw(st.sampled_from(sorted(taken)))
    else:
        rname = draw(st.integers(0, 99).map(lambda i: f"r{i}").filter(lambda n: n not in taken))
    op = AlterReplica if kind == "alter_replica" else CreateReplica
    if draw(st.booleans()):
        master = draw(st.sampled_from([None, "local[2]", "spark://h:7077"]))
        return op(rname, spark_master=master, executor="python")
    return op(rname, managed=False, address=f"{rname}.example:6000")


@st.composite
def _histories(draw: st.DrawFn, max_ops: int = 12) -> tuple[list[CatalogOp], list[CatalogState]]:
    state = CatalogState()
    ops: list[CatalogOp] = []
    states = [state]
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(_op(state))
        state = apply_op(state, op)
        ops.append(op)
        states.append(state)
    return ops, states


@given(_histories())
def test_encoding_round_trips(history: tuple[list[CatalogOp], list[CatalogState]]) -> None:
    for state in history[1]:
        assert decode_catalog(encode_catalog(state)) == state
        assert encode_catalog(decode_catalog(encode_catalog(state))) == encode_catalog(state)


@given(_histories())
def test_lookups_agree_with_a_scan_of_each_state(
    history: tuple[list[CatalogOp], list[CatalogState]],
) -> None:
    """A state remembers its lookups; each state's are its own, though every
    state after the first is made from the one before, whose lookups ran first."""
    for state in history[1]:
        collections = [
            *state.tables,
            *state.indexes,
            *state.materialized_views,
            *state.system_collections,
            *state.sources,
            *state.progress,
        ]
        assert state.entries() == sorted(collections, key=lambda e: e.id.sort_key)
        for e in collections:
            assert state.get(e.id) is e and state.by_name(e.name) is e
            plan = getattr(e, "plan", None)
            assert state.schema_of(e.id) == (e.schema if plan is None else typecheck(plan))
        with pytest.raises(UnknownCatalogObject):
            state.get(state.next_id)


@given(_histories(), st.data())
def test_ops_replayed_in_batches_across_reloads_give_the_same_state(
    history: tuple[list[CatalogOp], list[CatalogState]], data: st.DataObject
) -> None:
    ops, states = history
    consensus = MemoryConsensus()
    i = 0
    while i < len(ops):
        n = data.draw(st.integers(1, 4))
        catalog = Catalog(consensus)  # a restart: reload from the durable state
        before = catalog.load()
        assert before == states[i]
        if data.draw(st.booleans()):
            stale = CreateTable("stale", U(0), T_SCHEMA)  # u0 is never fresh
            with pytest.raises(DuplicateCatalogId):  # a valid prefix, then an invalid op
                catalog.apply([*ops[i : i + n], stale])
            assert catalog.state == before == Catalog(consensus).load()
        catalog.apply(ops[i : i + n])
        i = min(len(ops), i + n)
    assert Catalog(consensus).load() == states[-1] == apply_ops(CatalogState(), ops)


@given(_histories())
def test_restore_plans_are_valid_and_in_dependency_order(
    history: tuple[list[CatalogOp], list[CatalogState]],
) -> None:
    state = history[1][-1]
    plan = restore_plan(state)
    storage = {c.id for c in plan.storage_collections}
    assert storage == {e.id for e in state.tables} | {m.id for m in state.materialized_views}
    seen: set[GlobalId] = set()
    for d in plan.dataflows:
        validate_dataflow(d)
        assert all(s.id in storage for s in d.source_imports)
        assert all(ix.id in seen for ix in d.index_imports)
        seen.update(d.export_ids)
    assert seen == {i.id for i in state.indexes} | {m.id for m in state.materialized_views}
    indexes = {i.id for i in state.indexes}
    frontiers = {gid: (Antichain([3]), Antichain([10])) for gid in storage}
    chosen = restore_plan(state, frontiers, current_time=20)
    for d in chosen.dataflows:
        assert d.as_of is not None
        if any(e in indexes for e in d.export_ids) and d.as_of.elements:
            assert d.as_of <= Antichain([20])
