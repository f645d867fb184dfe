"""Dataflow plans: a typed relational IR, its reference semantics, and a builder.

* :mod:`.schema` -- column types and schemas;
* :mod:`.scalar` / :mod:`.scalar_eval` -- scalar expressions, their types and evaluation;
* :mod:`.relation` -- the relational operators (the plan IR);
* :mod:`.typecheck` -- validation of plans and whole dataflows;
* :mod:`.lower` -- rewriting derived operators (outer joins) into primitive ones;
* :mod:`.ordering` / :mod:`.aggregates` / :mod:`.window` -- ORDER BY, TopK, finishing,
  aggregates and window functions;
* :mod:`.reference` -- the oracle: ``evaluate(plan, inputs, time)``;
* :mod:`.serde` / :mod:`.explain` -- plain-dict serialisation and EXPLAIN text;
* :mod:`.builder` -- the DataFrame-like API users write (re-exported as ``tidegate.dsl``).
"""

from .aggregates import aggregate
from .explain import explain
from .lower import lower
from .ordering import apply_finishing, check_finishing, order_key, peek_result
from .reference import Collection, evaluate, evaluate_dataflow, reference_peek
from .relation import (
    AggFunc,
    Aggregate,
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    JoinKind,
    Let,
    LetRef,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    TemporalFilter,
    TemporalOp,
    Threshold,
    TopK,
    Union,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
    children,
    replace_gets,
    with_children,
)
from .scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    scalar_type,
)
from .scalar_eval import compile_scalar, eval_scalar
from .schema import Column, ColumnType, ScalarType, Schema, check_row
from .serde import plan_from_dict, plan_to_dict, schema_from_dict, schema_to_dict
from .typecheck import gets, object_order, typecheck, validate_dataflow

__all__ = [
    "AggFunc",
    "Aggregate",
    "ArrangeBy",
    "BinaryFunc",
    "CallBinary",
    "CallUnary",
    "CallVariadic",
    "Cast",
    "Collection",
    "Column",
    "ColumnRef",
    "ColumnType",
    "Constant",
    "Distinct",
    "Filter",
    "Get",
    "If",
    "Join",
    "JoinKind",
    "Let",
    "LetRef",
    "Literal",
    "Map",
    "Negate",
    "Plan",
    "Project",
    "Reduce",
    "ScalarExpr",
    "ScalarType",
    "Schema",
    "TemporalFilter",
    "TemporalOp",
    "Threshold",
    "TopK",
    "UnaryFunc",
    "Union",
    "VariadicFunc",
    "Window",
    "WindowBound",
    "WindowBoundKind",
    "WindowFrame",
    "WindowFunc",
    "WindowFuncKind",
    "aggregate",
    "apply_finishing",
    "check_finishing",
    "check_row",
    "children",
    "compile_scalar",
    "eval_scalar",
    "evaluate",
    "evaluate_dataflow",
    "explain",
    "gets",
    "lower",
    "object_order",
    "order_key",
    "peek_result",
    "plan_from_dict",
    "plan_to_dict",
    "reference_peek",
    "replace_gets",
    "scalar_type",
    "schema_from_dict",
    "schema_to_dict",
    "typecheck",
    "validate_dataflow",
    "with_children",
]
