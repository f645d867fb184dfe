"""Lowering: rewrite derived operators (left outer joins) into primitive ones.

Evaluators and executors run the lowered plan, so a left join means exactly
``inner + pad(left - semijoin(left, right))`` for every one of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InvalidPlan
from .relation import (
    ArrangeBy,
    Distinct,
    Filter,
    Join,
    JoinKind,
    Let,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    Threshold,
    TopK,
    Union,
)
from .scalar import Literal
from .schema import Schema
from .typecheck import typecheck

__all__ = ["lower"]


def lower(plan: Plan, _lets: Mapping[str, Schema] | None = None) -> Plan:
    """``plan`` with every left join rewritten into inner joins, distinct, negate and union."""
    lets = dict(_lets or {})
    if isinstance(plan, Let):
        value = lower(plan.value, lets)
        return Let(
            plan.name, value, lower(plan.body, {**lets, plan.name: typecheck(value, None, lets)})
        )
    if isinstance(plan, Union):
        return Union(tuple(lower(p, lets) for p in plan.inputs))
    if isinstance(plan, Join):
        inputs = tuple(lower(p, lets) for p in plan.inputs)
        if plan.kind is JoinKind.INNER:
            return Join(inputs, plan.equivalences)
        return _lower_left(inputs, plan.equivalences, lets)
    if isinstance(plan, Map):
        return Map(lower(plan.input, lets), plan.exprs, plan.names)
    if isinstance(plan, Filter):
        return Filter(lower(plan.input, lets), plan.predicates)
    if isinstance(plan, Project):
        return Project(lower(plan.input, lets), plan.columns)
    if isinstance(plan, Negate):
        return Negate(lower(plan.input, lets))
    if isinstance(plan, Distinct):
        return Distinct(lower(plan.input, lets))
    if isinstance(plan, Threshold):
        return Threshold(lower(plan.input, lets))
    if isinstance(plan, Reduce):
        return Reduce(lower(plan.input, lets), plan.group_key, plan.aggregates)
    if isinstance(plan, TopK):
        return TopK(lower(plan.input, lets), plan.group_key, plan.order_by, plan.limit, plan.offset)
    if isinstance(plan, ArrangeBy):
        return ArrangeBy(lower(plan.input, lets), plan.keys)
    return plan  # Get, Constant, LetRef


def _lower_left(
    inputs: tuple[Plan, ...], eqs: tuple[tuple[int, ...], ...], lets: Mapping[str, Schema]
) -> Plan:
    left, right = inputs
    ls, rs = typecheck(left, None, lets), typecheck(right, None, lets)
    n = ls.arity
    for cls in eqs:
        if not any(i < n for i in cls) or not any(i >= n for i in cls):
            raise InvalidPlan(f"left Join equivalence {cls} must name columns of both inputs")
    rcols = sorted({i - n for cls in eqs for i in cls if i >= n})
    remap = {n + r: n + k for k, r in enumerate(rcols)}
    keys = Distinct(Project(right, tuple(rcols)))
    semi_eqs = tuple(tuple(remap.get(i, i) for i in cls) for cls in eqs)
    semi = Project(Join((left, keys), semi_eqs), tuple(range(n)))
    unmatched = Union((left, Negate(semi)))
    nulls = tuple(Literal(None, c.type.scalar) for c in rs.columns)
    padded = Map(unmatched, nulls, rs.names)
    return Union((Join((left, right), eqs), padded))
