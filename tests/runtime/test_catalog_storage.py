"""The catalog's sources, sinks, system collections and storage replica: validated ops, drop
rules, the version-3 codec (which still reads versions 1 and 2) and restore plans."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.dsl import Schema, col, table
from tidegate.runtime.catalog import (
    CATALOG_FORMAT_VERSION,
    CatalogState,
    CreateIndex,
    CreateMaterializedView,
    CreateReplica,
    CreateSink,
    CreateSource,
    CreateSystemCollection,
    CreateTable,
    CreateView,
    Drop,
    ProgressEntry,
    SetReadPolicy,
    SetStorageReplica,
    SinkEntry,
    SourceEntry,
    StorageReplicaEntry,
    SystemCollectionEntry,
    apply_op,
    apply_ops,
    connection_from_dict,
    connection_to_dict,
    decode_catalog,
    encode_catalog,
    restore_plan,
)
from tidegate.runtime.errors import (
    DuplicateCatalogId,
    DuplicateCatalogName,
    HasDependents,
    InvalidCatalogOp,
    UnknownCatalogObject,
)
from tidegate.runtime.sealed import unseal
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    COUNTER_SCHEMA,
    IcebergSink,
    LoadGenerator,
    PostgresSource,
    SimulatedSink,
    SimulatedSource,
)
from tidegate.spec.storage.introspection import SOURCE_STATISTICS, SOURCE_STATUS_HISTORY

U, S = GlobalId.user, GlobalId.system
T = Schema.of(("x", "int64", False))
GEN = LoadGenerator("counter", tick_ms=10)
PG = PostgresSource("postgresql://h/db", "t", "pub", "slot")
ICE = IcebergSink("sqlite:///c.db", "file:///w", "ns.t")


def _state() -> CatalogState:
    return apply_ops(
        CatalogState(),
        [
            CreateSystemCollection("mz_source_status_history", S(1), SOURCE_STATUS_HISTORY),
            CreateSystemCollection("mz_source_statistics", S(3), SOURCE_STATISTICS),
            SetStorageReplica(managed=True),
            CreateSource("c", U(1), GEN, COUNTER_SCHEMA, U(2)),
            CreateTable("t", U(3), T),
            CreateIndex("c_idx", U(4), table("u1", COUNTER_SCHEMA).plan, (0,), U(1)),
            CreateSink("out", U(5), U(3), ICE),
        ],
    )


def test_a_source_comes_with_its_progress_collection_and_a_sink_depends_on_its_input() -> None:
    s = _state()
    assert s.sources == (SourceEntry("c", U(1), GEN, COUNTER_SCHEMA, U(2)),)
    assert s.progress == (ProgressEntry("c_progress", U(2), U(1)),)
    assert s.sinks == (SinkEntry("out", U(5), U(3), ICE),)
    assert s.storage_replica == StorageReplicaEntry(True, None)
    assert s.next_user_id == 6  # system ids do not use up user ids
    assert [e.name for e in s.entries()][:2] == [
        "mz_source_status_history",
        "mz_source_statistics",
    ]
    assert s.schema_of(U(2)).names == ("offset_upper",)
    assert s.schema_of(U(5)) == T  # what the sink writes out
    assert s.dependents(U(3)) == (U(5),) and s.dependencies(U(5)) == (U(3),)
    assert s.has_storage_objects
    with pytest.raises(UnknownCatalogObject):
        s.get(U(5))  # a sink is no collection
    with pytest.raises(UnknownCatalogObject):
        s.by_name("out")
    assert s.sink("out") == s.sink(U(5)) == s.sinks[0]


def test_bad_storage_ops_are_typed_and_change_nothing() -> None:
    s = _state()
    bad = [
        (CreateSource("t", U(9), GEN, COUNTER_SCHEMA, U(10)), DuplicateCatalogName),
        (CreateSource("d", U(9), GEN, T, U(10)), InvalidCatalogOp),  # not the counter's rows
        (CreateSource("d", U(9), GEN, COUNTER_SCHEMA, U(9)), InvalidCatalogOp),
        (CreateSource("d", U(9), GEN, COUNTER_SCHEMA, U(1)), DuplicateCatalogId),
        (
            CreateSource("d", U(9), LoadGenerator("counter", tick_ms=0), COUNTER_SCHEMA, U(10)),
            InvalidCatalogOp,
        ),
        (CreateSource("d", U(9), "counter", COUNTER_SCHEMA, U(10)), InvalidCatalogOp),  # type: ignore[arg-type]
        (CreateSource("d", U(9), PG, Schema(()), U(10)), InvalidCatalogOp),
        (CreateSource("d", U(9), PostgresSource("", "t", "p", "s"), T, U(10)), InvalidCatalogOp),
        (CreateSink("k", U(9), U(4), ICE), InvalidCatalogOp),  # an index
        (CreateSink("k", U(9), U(5), ICE), InvalidCatalogOp),  # a sink
        (CreateSink("k", U(9), U(99), ICE), UnknownCatalogObject),
        (CreateSink("k", U(9), U(3), "iceberg"), InvalidCatalogOp),  # type: ignore[arg-type]
        (CreateSink("c_progress", U(9), U(3), ICE), DuplicateCatalogName),
        (CreateSystemCollection("x", U(9), SOURCE_STATISTICS), InvalidCatalogOp),
        (CreateSystemCollection("x", S(9), SOURCE_STATISTICS), InvalidCatalogOp),  # has one
        (CreateSystemCollection("x", S(9), "nonsense"), InvalidCatalogOp),
        (CreateSystemCollection("x", S(1), SOURCE_STATISTICS), DuplicateCatalogId),
        (SetStorageReplica(managed=False), InvalidCatalogOp),
        (SetStorageReplica(managed=True, address="h:1"), InvalidCatalogOp),
        (CreateReplica("storage", address="h:1", managed=False), InvalidCatalogOp),
        (SetReadPolicy(U(5), LagWriteFrontier(1, 1)), InvalidCatalogOp),
        (Drop(S(1)), InvalidCatalogOp),
        (Drop(U(2)), InvalidCatalogOp),
        (Drop(U(1)), HasDependents),  # the index on it
        (Drop(U(3)), HasDependents),  # the sink of it
    ]
    for op, error in bad:
        with pytest.raises(error):
            apply_op(s, op)
    # a view is not a storage collection either
    v = apply_op(s, CreateView("v", U(9), table("u3", T).plan))
    with pytest.raises(InvalidCatalogOp):
        apply_op(v, CreateSink("k", U(10), U(9), ICE))
    # each PostgreSQL source needs a slot of its own
    p = apply_op(s, CreateSource("p", U(9), PG, T, U(10)))
    with pytest.raises(InvalidCatalogOp):
        apply_op(p, CreateSource("q", U(11), PG, T, U(12)))


def test_drops_take_owned_and_dependent_objects() -> None:
    s = _state()
    with pytest.raises(HasDependents) as e:
        apply_op(s, Drop(U(1)))
    assert e.value.dependents == (U(4),)
    after = apply_op(s, Drop(U(1), cascade=True))
    assert after.sources == () and after.progress == () and after.indexes == ()
    assert [x.name for x in after.sinks] == ["out"]
    after = apply_op(s, Drop(U(5)))
    assert after.sinks == () and [x.name for x in after.tables] == ["t"]
    after = apply_op(s, Drop(U(3), cascade=True))
    assert after.tables == () and after.sinks == ()
    # an index on a source's progress collection depends on the source too
    p = apply_op(
        apply_op(s, Drop(U(4))),
        CreateIndex("p_idx", U(9), table("u2", s.schema_of(U(2))).plan, (), U(2)),
    )
    with pytest.raises(HasDependents) as e:
        apply_op(p, Drop(U(1)))
    assert e.value.dependents == (U(9),)
    assert apply_op(p, Drop(U(1), cascade=True)).indexes == ()


def test_the_codec_round_trips_storage_objects_and_reads_versions_1_and_2() -> None:
    s = apply_ops(
        _state(),
        [
            CreateSource("p", U(9), PG, T, U(10)),
            CreateSource("sim", U(11), SimulatedSource("up"), T, U(12)),
            CreateSink("sim_out", U(13), U(11), SimulatedSink("down")),
            SetStorageReplica(managed=False, address="127.0.0.1:7000"),
        ],
    )
    data = encode_catalog(s)
    assert json.loads(unseal("catalog", data))["version"] == CATALOG_FORMAT_VERSION == 3
    assert decode_catalog(data) == s
    for version in (1, 2):
        old = json.loads(
            unseal(
                "catalog", encode_catalog(apply_ops(CatalogState(), [CreateTable("t", U(1), T)]))
            )
        )
        old["version"] = version
        for key in ("sources", "progress", "sinks", "system_collections", "storage_replica"):
            del old[key]
        back = decode_catalog(json.dumps(old).encode())
        assert back.tables[0].name == "t" and back.sources == () and back.storage_replica is None


@given(
    st.one_of(
        st.builds(
            LoadGenerator,
            st.sampled_from(["counter", "auction"]),
            st.integers(1, 10**6),
            st.integers(0, 2**40),
            st.one_of(st.none(), st.integers(1, 10**6)),
            st.integers(1, 100),
        ),
        st.builds(
            PostgresSource,
            st.text(min_size=1),
            st.text(min_size=1),
            st.text(min_size=1),
            st.text(min_size=1),
        ),
        st.builds(IcebergSink, st.text(min_size=1), st.text(min_size=1), st.text(min_size=1)),
        st.builds(SimulatedSource, st.text(min_size=1)),
        st.builds(SimulatedSink, st.text(min_size=1)),
    )
)
def test_connections_round_trip(connection: object) -> None:
    d = connection_to_dict(connection)  # type: ignore[arg-type]
    assert connection_from_dict(json.loads(json.dumps(d))) == connection


def test_restore_plans_bring_back_storage_collections_before_their_readers_and_list_sinks() -> None:
    s = apply_op(
        _state(),
        CreateMaterializedView(
            "big", U(9), table("u1", COUNTER_SCHEMA).filter(col("counter") > 1).plan
        ),
    )
    plan = restore_plan(s)
    kinds = [(c.name, c.kind) for c in plan.storage_collections]
    assert kinds == [
        ("mz_source_status_history", "system"),
        ("mz_source_statistics", "system"),
        ("t", "table"),
        ("c_progress", "progress"),
        ("c", "source"),
        ("big", "materialized_view"),
    ]
    assert [df.debug_name for df in plan.dataflows] == ["index c_idx", "materialized view big"]
    assert [k.name for k in plan.sinks] == ["out"]
    frontiers = {c.id: (Antichain([5]), Antichain([10])) for c in plan.storage_collections}
    with_as_ofs = restore_plan(s, frontiers, current_time=20)
    assert all(df.as_of is not None for df in with_as_ofs.dataflows)
    assert isinstance(s.get(U(1)), SourceEntry)
    assert isinstance(s.get(S(1)), SystemCollectionEntry)
