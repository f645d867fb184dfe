"""Serialisation round-trips; EXPLAIN renders an indented tree."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import PlanDecodeError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Filter,
    Get,
    Literal,
    Reduce,
    ScalarType,
    Schema,
    explain,
    plan_from_dict,
    plan_to_dict,
)
from tidegate.spec.strategies import plans, schemas

INPUTS = st.dictionaries(
    st.sampled_from([GlobalId.user(1), GlobalId.user(2)]), schemas(), min_size=1
)


@given(data=st.data())
def test_plan_round_trips_through_json(data: st.DataObject) -> None:
    plan = data.draw(plans(data.draw(INPUTS)))
    encoded = json.dumps(plan_to_dict(plan), allow_nan=False)  # strict JSON, NaN literals too
    assert plan_from_dict(json.loads(encoded)) == plan
    assert json.dumps(plan_to_dict(plan_from_dict(json.loads(encoded)))) == encoded


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"op": "nope"},
        {"op": "get", "id": "not-an-id", "schema": {"columns": []}},
        {"op": "negate"},
    ],
)
def test_malformed_plans_raise_decode_errors(bad: dict[str, object]) -> None:
    with pytest.raises(PlanDecodeError):
        plan_from_dict(bad)


def test_explain_renders_an_indented_tree_with_column_names() -> None:
    schema = Schema.of(("customer", "string"), ("amount", "int64", False))
    pred = CallBinary(BinaryFunc.GT, ColumnRef(1), Literal(10, ScalarType.INT64))
    plan = Reduce(
        Filter(Get(GlobalId.user(1), schema), (pred,)),
        (0,),
        (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1)),
    )
    assert explain(plan) == (
        "Reduce group=[#0{customer}] aggs=[count(*), sum(#1{amount})]\n"
        "  Filter (#1{amount} > 10)\n"
        "    Get u1 (customer: string?, amount: int64)"
    )


@given(data=st.data())
def test_explain_has_one_line_per_operator(data: st.DataObject) -> None:
    from tidegate.spec.plan import children

    plan = data.draw(plans(data.draw(INPUTS)))
    count, stack = 0, [plan]
    while stack:
        p = stack.pop()
        count += 1
        stack.extend(children(p))
    assert len(explain(plan).splitlines()) == count
