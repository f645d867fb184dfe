"""Type checking and dataflow validation reject invalid plans with typed errors."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    ArityMismatch,
    InvalidPlan,
    PlanCycle,
    TypeMismatch,
    UnknownColumn,
    UnknownInput,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Filter,
    Get,
    Join,
    JoinKind,
    Let,
    LetRef,
    Literal,
    Map,
    Project,
    Reduce,
    ScalarType,
    Schema,
    TopK,
    Union,
    typecheck,
    validate_dataflow,
)
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

U1, U2, U3 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
SCHEMA = Schema.of(("k", "string"), ("v", "int64", False))
SRC = Get(U1, SCHEMA)


def test_schema_of_a_reduce() -> None:
    plan = Reduce(
        SRC, (0,), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.AVG, 1))
    )
    s = typecheck(plan)
    assert s.names == ("k", "count", "sum_v", "avg_v")
    assert [c.type.scalar for c in s.columns] == [
        ScalarType.STRING,
        ScalarType.INT64,
        ScalarType.INT64,
        ScalarType.FLOAT64,
    ]
    assert not s.columns[1].type.nullable and s.columns[2].type.nullable


@pytest.mark.parametrize(
    ("plan", "error"),
    [
        (Project(SRC, (2,)), UnknownColumn),
        (Filter(SRC, (ColumnRef(1),)), TypeMismatch),
        (Filter(SRC, (CallBinary(BinaryFunc.ADD, ColumnRef(0), ColumnRef(1)),)), TypeMismatch),
        (Filter(SRC, (CallBinary(BinaryFunc.EQ, ColumnRef(0), ColumnRef(1)),)), TypeMismatch),
        (Map(SRC, (Literal("x", ScalarType.INT64),), ("m",)), TypeMismatch),
        (Map(SRC, (ColumnRef(0),), ()), ArityMismatch),
        (Union((SRC, Project(SRC, (0,)))), ArityMismatch),
        (Union((SRC, Project(SRC, (1, 0)))), TypeMismatch),
        (Reduce(SRC, (), (Aggregate(AggFunc.SUM, 0),)), TypeMismatch),
        (Reduce(SRC, (), (Aggregate(AggFunc.MIN),)), InvalidPlan),
        (Join((SRC, SRC), ((0, 3),)), TypeMismatch),
        (Join((SRC, SRC), ((0,),)), InvalidPlan),
        (Join((SRC, SRC, SRC), ((0, 2),), JoinKind.LEFT), InvalidPlan),
        (TopK(SRC, (), (), limit=-1), InvalidPlan),
        (LetRef("x"), UnknownInput),
        (Let("x", SRC, LetRef("y")), UnknownInput),
    ],
)
def test_invalid_plans_are_rejected(plan: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        typecheck(plan)  # type: ignore[arg-type]


def _df(*objects: BuildDesc, imports: tuple[GlobalId, ...] = (U1,)) -> DataflowDescription:
    return DataflowDescription(
        "d",
        source_imports=tuple(SourceImport(i) for i in imports),
        objects_to_build=objects,
        index_exports=(IndexExport(GlobalId.user(9), objects[0].id, (0,)),),
        as_of=Antichain([0]),
    )


def test_unknown_input_is_rejected() -> None:
    with pytest.raises(UnknownInput, match="u7"):
        validate_dataflow(_df(BuildDesc(U2, Get(GlobalId.user(7), SCHEMA))))


def test_cycle_between_objects_is_rejected() -> None:
    a = BuildDesc(U2, Get(U3, SCHEMA))
    b = BuildDesc(U3, Get(U2, SCHEMA))
    with pytest.raises(PlanCycle, match=r"u2 -> u3 -> u2|u3 -> u2 -> u3"):
        validate_dataflow(_df(a, b))


def test_objects_may_read_each_other_in_any_listed_order() -> None:
    later = BuildDesc(U3, Project(Get(U2, SCHEMA), (0,)))
    first = BuildDesc(U2, Filter(SRC, ()))
    schemas = validate_dataflow(_df(later, first))
    assert schemas[U3].names == ("k",)


def test_get_must_agree_with_the_object_schema() -> None:
    wrong = BuildDesc(U3, Get(U2, Schema.of(("k", "string"))))
    with pytest.raises(TypeMismatch):
        validate_dataflow(_df(BuildDesc(U2, SRC), wrong))


def test_index_key_out_of_range_is_rejected() -> None:
    desc = DataflowDescription(
        "d",
        source_imports=(SourceImport(U1),),
        objects_to_build=(BuildDesc(U2, SRC),),
        index_exports=(IndexExport(GlobalId.user(9), U2, (5,)),),
    )
    with pytest.raises(UnknownColumn):
        validate_dataflow(desc)
