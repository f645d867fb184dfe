"""The dataflow builder, for users: ``from tidegate.dsl import table, col, count, sum_``.

A re-export of :mod:`tidegate.spec.plan.builder`; see it for the full API.
"""

from tidegate.spec.plan.builder import (
    AggSpec,
    DataflowBuilder,
    Expr,
    Frame,
    Grouped,
    asc,
    avg,
    coalesce,
    col,
    concat,
    constant,
    count,
    desc,
    lit,
    max_,
    min_,
    sum_,
    table,
    when,
)
from tidegate.spec.plan.schema import ScalarType, Schema

__all__ = [
    "AggSpec",
    "DataflowBuilder",
    "Expr",
    "Frame",
    "Grouped",
    "ScalarType",
    "Schema",
    "asc",
    "avg",
    "coalesce",
    "col",
    "concat",
    "constant",
    "count",
    "desc",
    "lit",
    "max_",
    "min_",
    "sum_",
    "table",
    "when",
]
