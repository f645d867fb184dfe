"""Views and SQL definitions in the catalog: one namespace, dependencies, drops, the codec."""

from __future__ import annotations

import json

import pytest

from tidegate.runtime.catalog import (
    CatalogState,
    CreateIndex,
    CreateTable,
    CreateView,
    Drop,
    SetDefinition,
    SetReadPolicy,
    ViewEntry,
    apply_op,
    apply_ops,
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
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Filter, Get, Project, Schema
from tidegate.spec.plan.scalar import ColumnRef

U = GlobalId.user
T_SCHEMA = Schema.of(("k", "int64", False), ("flag", "bool", False))
T = Get(U(1), T_SCHEMA)
ONLY_K = Project(T, (0,))
FLAGGED_K = Project(Filter(T, (ColumnRef(1),)), (0,))


def _state() -> CatalogState:
    """Table t (u1); view ks (u2) on it; view flagged (u3) defined on ks, its plan inlined;
    an index on flagged (u4); t's and flagged's SQL text."""
    return apply_ops(
        CatalogState(),
        [
            CreateTable("t", U(1), T_SCHEMA),
            CreateView("ks", U(2), ONLY_K),
            CreateView("flagged", U(3), FLAGGED_K, views=(U(2),)),
            CreateIndex("flagged_idx", U(4), FLAGGED_K, (0,), on=U(3)),
            SetDefinition(U(1), "CREATE TABLE t (k bigint NOT NULL, flag boolean NOT NULL)"),
            SetDefinition(U(3), "CREATE VIEW flagged AS SELECT k FROM ks WHERE flag"),
        ],
    )


def test_a_view_is_named_but_is_no_collection() -> None:
    s = _state()
    assert s.view("ks") == ViewEntry("ks", U(2), ONLY_K) == s.view(U(2))
    assert [e.name for e in s.entries()] == ["t", "flagged_idx"]  # no dataflow, no shard
    assert s.schema_of(U(2)) == T_SCHEMA.project([0])
    with pytest.raises(UnknownCatalogObject, match="is a view"):
        s.get(U(2))
    with pytest.raises(UnknownCatalogObject, match="is a view"):
        s.by_name("ks")
    assert len(restore_plan(s).dataflows) == 1  # the index's


def test_names_and_ids_are_shared_with_collections() -> None:
    s = _state()
    with pytest.raises(DuplicateCatalogName):
        apply_op(s, CreateView("t", U(9), ONLY_K))
    with pytest.raises(DuplicateCatalogName):
        apply_op(s, CreateTable("ks", U(9), T_SCHEMA))
    with pytest.raises(DuplicateCatalogId):
        apply_op(s, CreateView("again", U(2), ONLY_K))  # a view's id is in use


def test_dependencies_run_through_views() -> None:
    s = _state()
    assert s.dependents(U(1)) == (U(2), U(3), U(4))  # the plans read t (views inlined)
    assert s.dependents(U(2)) == (U(3),)  # flagged was defined on ks
    assert s.dependents(U(3)) == (U(4),)  # the index is on flagged
    with pytest.raises(HasDependents):
        apply_op(s, Drop(U(2)))
    after = apply_op(s, Drop(U(2), cascade=True))
    assert after.views == () and [e.name for e in after.entries()] == ["t"]
    assert after.definitions == ((U(1), s.definition(U(1))),)  # flagged's text went with it


def test_a_view_reads_collections_only_and_names_real_views() -> None:
    s = _state()
    with pytest.raises(UnknownCatalogObject):
        apply_op(s, CreateView("bad", U(9), Get(U(2), T_SCHEMA.project([0]))))  # a view's id
    with pytest.raises(UnknownCatalogObject):
        apply_op(s, CreateView("bad", U(9), ONLY_K, views=(U(1),)))  # a table, not a view
    with pytest.raises(UnknownCatalogObject):
        apply_op(s, SetReadPolicy(U(2), LagWriteFrontier(10, 10)))  # views keep no history
    with pytest.raises(InvalidCatalogOp):
        apply_op(s, SetDefinition(U(1), "  "))
    with pytest.raises(UnknownCatalogObject):
        apply_op(s, SetDefinition(U(99), "CREATE TABLE x (a int)"))


def test_the_codec_round_trips_views_and_definitions_and_reads_version_1() -> None:
    s = _state()
    assert decode_catalog(encode_catalog(s)) == s
    old = json.loads(
        unseal(
            "catalog", encode_catalog(apply_ops(CatalogState(), [CreateTable("t", U(1), T_SCHEMA)]))
        )
    )
    old["version"] = 1
    del old["views"], old["definitions"]
    assert decode_catalog(json.dumps(old).encode()).tables[0].name == "t"
