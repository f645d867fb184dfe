"""Plans nest at most MAX_NESTING deep: refused with PlanTooDeep, never a RecursionError.

Issue 17: a plan of 1,000 nested nodes raised an untyped ``RecursionError``
out of the typechecker and the JSON codec. Every walker must handle the
deepest plan the limit lets through, and every entry point refuses a deeper
one before recursing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidegate.runtime.wire.plans import decode_plan, encode_plan
from tidegate.spec.errors import PlanTooDeep
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Filter,
    Get,
    Literal,
    Map,
    Plan,
    ScalarType,
    Schema,
    plan_from_dict,
    plan_to_dict,
    typecheck,
)
from tidegate.spec.plan.depth import MAX_NESTING, check_nesting
from tidegate.spec.plan.reference import evaluate
from tidegate.spec.plan.serde import expr_from_dict, expr_to_dict
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

U1 = GlobalId.user(1)
SCHEMA = Schema.of(("x", "int64", False))
POSITIVE = CallBinary(BinaryFunc.GT, ColumnRef(0), Literal(0, ScalarType.INT64))


def filters(n: int) -> Plan:
    plan: Plan = Get(U1, SCHEMA)
    for _ in range(n):
        plan = Filter(plan, (POSITIVE,))
    return plan


def sums(n: int) -> Any:
    expr: Any = ColumnRef(0)
    for _ in range(n):
        expr = CallBinary(BinaryFunc.ADD, expr, Literal(1, ScalarType.INT64))
    return expr


def deepest(make: Any) -> int:
    """The largest ``n`` whose ``make(n)`` passes the check, in its object and JSON forms."""
    n = MAX_NESTING
    while True:
        try:
            check_nesting(make(n))
            check_nesting(json.loads(json.dumps(plan_to_dict(make(n)))))
            return n
        except PlanTooDeep:
            n -= 1


def test_the_deepest_plan_allowed_runs_through_every_walker() -> None:
    n = deepest(filters)
    assert n > MAX_NESTING // 2 - 10  # a Filter costs about one level, its JSON two
    plan = Map(filters(n - 2), (sums(n // 2 - 10),), ("y",))
    typecheck(plan)
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan
    assert decode_plan(encode_plan(plan)) == plan
    rows = evaluate(plan, {U1: [((5,), 0, 1), ((-1,), 0, 1)]}, 0)
    assert rows.rows == {(5, 5 + n // 2 - 10): 1} and not rows.errors
    ex = PythonExecutor()
    df = DataflowDescription(
        "deep",
        source_imports=(SourceImport(U1),),
        objects_to_build=(BuildDesc(GlobalId.user(2), plan),),
        index_exports=(IndexExport(GlobalId.user(3), GlobalId.user(2), (0,)),),
        as_of=Antichain([0]),
    )
    h = ex.install(df)
    ex.feed(h, U1, [((5,), 0, 1), ((-1,), 0, 1)], Antichain([1]))
    ex.step()
    assert ex.peek(GlobalId.user(3), 0) == PeekRows((((5, 5 + n // 2 - 10), 1),))


@pytest.mark.parametrize("size", [MAX_NESTING + 1, 1_000, 100_000])
def test_deeper_plans_are_refused_typed_by_every_entry_point(size: int) -> None:
    plan = filters(size)
    for call in (lambda: typecheck(plan), lambda: plan_to_dict(plan)):
        with pytest.raises(PlanTooDeep):
            call()
    nested: Any = {"op": "get", "id": "u1", "schema": {"columns": []}}
    for _ in range(size):
        nested = {"op": "filter", "input": nested, "predicates": []}
    with pytest.raises(PlanTooDeep):
        plan_from_dict(nested)
    with pytest.raises(PlanTooDeep):
        expr_to_dict(sums(size))
    deep_expr: Any = {"kind": "column", "index": 0}
    for _ in range(size):
        deep_expr = {"kind": "unary", "func": "not", "expr": deep_expr}
    with pytest.raises(PlanTooDeep):
        expr_from_dict(deep_expr)
