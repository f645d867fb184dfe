"""Lowering: rewrite derived operators (outer joins) into primitive ones.

Evaluators and executors run the lowered plan, so a left join means exactly
``inner + pad(left - semijoin(left, right))`` for every one of them, a right
join its mirror image, and a full join ``inner`` plus both paddings. Each
operator of the lowering is incremental in every executor (joins, distinct,
negate, union), so outer joins are maintained incrementally with retractions.
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
    TemporalFilter,
    Threshold,
    TopK,
    Union,
    Window,
)
from .scalar import Literal
from .schema import Schema
from .typecheck import typecheck

__all__ = ["lower"]


def lower(plan: Plan, _lets: Mapping[str, Schema] | None = None) -> Plan:
    """``plan`` with every outer join rewritten into inner joins, distinct, negate and union."""
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
        return _lower_outer(plan.kind, inputs, plan.equivalences, lets)
    if isinstance(plan, Map):
        return Map(lower(plan.input, lets), plan.exprs, plan.names)
    if isinstance(plan, Filter):
        return Filter(lower(plan.input, lets), plan.predicates)
    if isinstance(plan, TemporalFilter):
        return TemporalFilter(lower(plan.input, lets), plan.predicates)
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
    if isinstance(plan, Window):
        return Window(lower(plan.input, lets), plan.partition_key, plan.order_by, plan.funcs)
    if isinstance(plan, ArrangeBy):
        return ArrangeBy(lower(plan.input, lets), plan.keys)
    return plan  # Get, Constant, LetRef


def _unmatched(
    left: Plan, right: Plan, nl: int, eqs: tuple[tuple[int, ...], ...], rs: Schema
) -> Plan:
    """The rows of ``left`` (arity ``nl``) that match no right key of positive
    multiplicity, padded with NULL columns of ``rs``: ``pad(left - semijoin(left, right))``."""
    n = nl
    rcols = sorted({i - n for cls in eqs for i in cls if i >= n})
    remap = {n + r: n + k for k, r in enumerate(rcols)}
    keys = Distinct(Project(right, tuple(rcols)))
    semi_eqs = tuple(tuple(remap.get(i, i) for i in cls) for cls in eqs)
    semi = Project(Join((left, keys), semi_eqs), tuple(range(n)))
    unmatched = Union((left, Negate(semi)))
    nulls = tuple(Literal(None, c.type.scalar) for c in rs.columns)
    return Map(unmatched, nulls, rs.names)


def _lower_outer(
    kind: JoinKind,
    inputs: tuple[Plan, ...],
    eqs: tuple[tuple[int, ...], ...],
    lets: Mapping[str, Schema],
) -> Plan:
    left, right = inputs
    ls, rs = typecheck(left, None, lets), typecheck(right, None, lets)
    n, m = ls.arity, rs.arity
    for cls in eqs:
        if not any(i < n for i in cls) or not any(i >= n for i in cls):
            raise InvalidPlan(
                f"{kind.value} Join equivalence {cls} must name columns of both inputs"
            )
    parts: list[Plan] = [Join((left, right), eqs)]
    if kind in (JoinKind.LEFT, JoinKind.FULL):
        parts.append(_unmatched(left, right, n, eqs, rs))
    if kind in (JoinKind.RIGHT, JoinKind.FULL):
        # the mirror image: positions of the (right, left) row, then right's columns moved after
        swap = {i: (i + m if i < n else i - n) for cls in eqs for i in cls}
        mirrored = tuple(tuple(swap[i] for i in cls) for cls in eqs)
        padded = _unmatched(right, left, m, mirrored, ls)
        parts.append(Project(padded, (*range(m, m + n), *range(m))))
    return Union(tuple(parts))
