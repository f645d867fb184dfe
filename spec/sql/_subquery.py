"""Subqueries in expressions, decorrelated into joins, reduces and distincts.

A subquery expression (``(SELECT ...)``, ``EXISTS``, ``x IN (SELECT ...)``, ``x op ANY/ALL
(SELECT ...)``) in ``WHERE``, ``SELECT``, ``HAVING``, ``ORDER BY`` or a ``CASE`` is computed
for the whole enclosing relation at once and joined to it as a column, which the expression
binder then reads (:attr:`ExprBinder.subqueries`). No new operator: every executor maintains
the answer incrementally as it maintains any join.

Decorrelation, as Materialize and most engines do it: the body of a subquery that refers to
columns of the enclosing query is lowered over ``D``, the *distinct* rows of just those columns
(:class:`._scope.Outer`), joined in front of its ``FROM``; every operator of the body carries
them (a ``Reduce`` groups by them, a ``LIMIT`` becomes a ``TopK`` per outer key, a global
aggregate answers per key), so the body's answer is keyed by them. Which columns the body
uses is learnt by lowering it once over all of them (binding marks what it resolves), then
again over those it used; a body that uses none is uncorrelated and lowered as it is. The keyed
answer is left-joined back to the enclosing relation on those columns, NULL-safely (a NULL
key is one value here: ``(c IS NULL, COALESCE(c, v))`` on both sides).

The answers, with SQL's three-valued logic:

* scalar: ``Reduce`` by key of ``count(*)`` and the value; a key with two rows is the run-time
  error ``more than one record produced in subquery`` (SQLSTATE 21000), an evaluation error of
  the dataflow (``error(...)`` in a ``Filter``), as PostgreSQL and Materialize report it; no
  row is NULL;
* ``EXISTS``: the distinct keys with ``true``; no row is ``false``;
* ``x IN (SELECT y ...)``: ``true`` if some ``y = x`` (an equi-join on key and value), else
  NULL if the body has rows and ``x`` is NULL or some ``y`` is, else ``false`` (a ``Reduce``
  by key of ``count(*)`` and ``count(y)``); ``NOT IN`` is its negation;
* ``x op ANY (SELECT y ...)``: per key and ``x``, ``bool_or(x op y)`` with the counts of rows
  and of non-NULL comparisons: ``true`` if one holds, NULL if one is NULL, else ``false``;
  ``x op ALL`` is ``NOT (x negated-op ANY)``.

A subquery is computed for every row, also where a ``CASE`` branch would not be taken, so a
second row in a scalar subquery is an error even then (Materialize does the same).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..errors import SqlSyntaxError, StatementTooComplex, UndefinedFunction
from ..plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    ColumnRef,
    ColumnType,
    Constant,
    Distinct,
    Filter,
    Get,
    If,
    Join,
    JoinKind,
    Let,
    LetRef,
    Literal,
    Map,
    Plan,
    Project,
    Reduce,
    ScalarExpr,
    ScalarType,
    Schema,
    TopK,
    UnaryFunc,
    VariadicFunc,
)
from ..plan.relation import children, with_children
from ..plan.scalar_eval import MORE_THAN_ONE_RECORD
from ..plan.typecheck import typecheck
from ._common import Lowered, S, _Ctx, _err, _typed, _unsupported, pg_type
from ._scope import Outer, OuterRef, Rel, Scope, ScopeColumn
from ._texpr import TExpr, _coerce

if TYPE_CHECKING:
    from ._binder import ExprBinder

__all__ = ["find_subqueries", "lateral_join", "plan_subqueries"]

_COMPARE: dict[type[exp.Expression], BinaryFunc] = {
    exp.EQ: BinaryFunc.EQ,
    exp.NEQ: BinaryFunc.NE,
    exp.LT: BinaryFunc.LT,
    exp.LTE: BinaryFunc.LE,
    exp.GT: BinaryFunc.GT,
    exp.GTE: BinaryFunc.GE,
}
_NEGATED = {
    BinaryFunc.EQ: BinaryFunc.NE,
    BinaryFunc.NE: BinaryFunc.EQ,
    BinaryFunc.LT: BinaryFunc.GE,
    BinaryFunc.LE: BinaryFunc.GT,
    BinaryFunc.GT: BinaryFunc.LE,
    BinaryFunc.GE: BinaryFunc.LT,
}
_BOOL = ColumnType(S.BOOL, False)
_TRUE = Literal(True, S.BOOL)
_FALSE = Literal(False, S.BOOL)
_NULL_BOOL = Literal(None, S.BOOL)


def find_subqueries(node: Any) -> list[exp.Expression]:
    """The outermost subquery expressions in ``node`` (not those inside a subquery's body)."""
    out: list[exp.Expression] = []
    if not isinstance(node, exp.Expression):
        return out
    stack = [node]
    while stack:
        n = stack.pop()
        if _kind(n) is not None:
            out.append(n)
            continue
        if isinstance(n, exp.Query):  # a body of its own (a subquery in FROM never gets here)
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


def _kind(n: Any) -> str | None:
    if isinstance(n, exp.Exists):
        return "exists"
    if isinstance(n, exp.In) and n.args.get("query") is not None:
        return "in"
    if type(n) in _COMPARE and isinstance(n.expression, exp.Any | exp.All):
        return "quantified"
    if isinstance(n, exp.Subquery):
        return "scalar"
    return None


def plan_subqueries(
    rel: Rel, nodes: Sequence[Any], ctx: _Ctx, binder: ExprBinder | None = None
) -> tuple[Rel, dict[int, TExpr]]:
    """``rel`` with one or more columns (hidden) per subquery expression in ``nodes``, and what
    each such expression binds to (keyed by ``id`` of its node); ``binder`` binds the left
    side of an ``IN``/``ANY``/``ALL`` over ``rel`` (the grouping one after a ``GROUP BY``)."""
    found = [s for n in nodes for s in find_subqueries(n)]
    if not found:
        return rel, {}
    if ctx.outer is None:
        for node in found:
            _check_depth(node)
    answers: dict[int, TExpr] = {}
    for node in found:
        rel, answer = _plan_one(rel, node, ctx, binder)
        answers[id(node)] = answer
    return Rel(share(rel.plan), rel.scope), answers


def share(plan: Plan) -> Plan:
    """``plan`` with each largest subtree that occurs more than once (the enclosing relation,
    its distinct keys, a body read twice) computed once: bound by a ``Let`` at the top and
    read through ``LetRef``s. Only closed subtrees (no ``LetRef`` to a ``Let`` inside
    ``plan``) move, under names no ``Let`` in ``plan`` uses."""
    counts: dict[Plan, int] = {}
    taken: set[str] = set()

    def count(p: Plan) -> None:
        counts[p] = counts.get(p, 0) + 1
        if isinstance(p, Let):
            taken.add(p.name)
        if counts[p] == 1:
            for c in children(p):
                count(c)
        else:  # its subtrees were counted once per occurrence already: count them again
            for c in children(p):
                count(c)

    count(plan)
    bound: dict[Plan, str] = {}
    order: list[Plan] = []

    def rewrite(p: Plan) -> Plan:
        if counts[p] > 1 and not isinstance(p, Get | Constant | LetRef) and not _free_refs(p):
            name = bound.get(p)
            if name is None:
                k = len(bound)
                while f"s{k}" in taken:
                    k += 1
                name = f"s{k}"
                taken.add(name)
                bound[p] = name
                order.append(p)
            return LetRef(name)
        inputs = children(p)
        if not inputs:
            return p
        return with_children(p, tuple(rewrite(c) for c in inputs))

    body = rewrite(plan)
    for value in reversed(order):
        body = Let(bound[value], value, body)
    return body


def _free_refs(p: Plan) -> set[str]:
    if isinstance(p, LetRef):
        return {p.name}
    if isinstance(p, Let):
        return _free_refs(p.value) | (_free_refs(p.body) - {p.name})
    out: set[str] = set()
    for c in children(p):
        out |= _free_refs(c)
    return out


MAX_DEPTH = 6
"""How deep subqueries in expressions may nest. Lowering a correlated body takes time that
grows with the depth below it (each level's plan carries its enclosing keys), so a deeper
statement is refused, typed, before lowering starts."""


def _check_depth(node: Any) -> None:
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        n, depth = stack.pop()
        if isinstance(n, exp.Select):
            depth += 1
            if depth > MAX_DEPTH:
                raise _err(
                    StatementTooComplex,
                    f"subqueries nested more than {MAX_DEPTH} deep are not supported",
                    n,
                )
        stack.extend((c, depth) for c in n.iter_expressions())


def _plan_one(rel: Rel, node: Any, ctx: _Ctx, binder: ExprBinder | None) -> tuple[Rel, TExpr]:
    kind = _kind(node)
    if kind == "scalar":
        return _scalar(rel, node, ctx)
    if kind == "exists":
        return _exists(rel, node.this, ctx)
    if kind == "in":
        r, te = _in(rel, node.this, node.args["query"], BinaryFunc.EQ, node, ctx, binder)
        return r, te
    func = _COMPARE[type(node)]
    quant = node.expression
    body = quant.this
    if isinstance(quant, exp.Any):
        return _in(rel, node.this, body, func, node, ctx, binder)
    # x op ALL (S) is NOT (x negated-op ANY (S)), in three-valued logic too
    r, te = _in(rel, node.this, body, _NEGATED[func], node, ctx, binder)
    assert te.expr is not None
    return r, TExpr(CallUnary(UnaryFunc.NOT, te.expr), te.type)


# -- the body, keyed by the outer columns it uses -------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Keyed:
    """A subquery body's answer: ``plan``'s first ``len(keys)`` columns are the enclosing
    relation's columns ``keys``, then the body's output columns (``types``)."""

    plan: Plan
    keys: tuple[int, ...]
    types: tuple[ColumnType, ...]
    names: tuple[str, ...]

    @property
    def k(self) -> int:
        return len(self.keys)


def signature(scope: Scope, i: int) -> tuple[object, ...]:
    """Column ``i`` of ``scope``, named so that every lowering of the same query names it
    alike: the how-many-th of the query's own columns, or (for a column of an enclosing query
    joined in front, whose number varies with what the body uses) that column's signature
    there."""
    c = scope.columns[i]
    if c.outer is not None:
        return ("outer", c.outer.sig)
    return ("own", sum(1 for x in scope.columns[:i] if x.outer is None))


def _outer_columns(scope: Scope, positions: Sequence[int]) -> tuple[ScopeColumn, ...]:
    out = []
    for i in positions:
        c = scope.columns[i]
        level = c.outer.level + 1 if c.outer is not None else 1
        hidden = c.outer.hidden if c.outer is not None else c.hidden
        ref = OuterRef(level, hidden, c.outer, sig=signature(scope, i))
        out.append(dataclasses.replace(c, hidden=True, outer=ref))
    return tuple(out)


def _body(rel: Rel, body: Any, ctx: _Ctx) -> _Keyed:
    """Lower ``body`` correlated to ``rel``: over all its columns to learn which it uses (once
    per body: every later lowering of the query around it reuses what was learnt, so nested
    subqueries cost linear, not exponential, time), then over just those (or, if none,
    uncorrelated)."""
    every = tuple(range(len(rel.scope.columns)))
    known = ctx.uses.get(id(body))
    if known is None:
        probe = _outer_columns(rel.scope, every)
        ctx.query(body, dataclasses.replace(ctx, outer=Outer(Distinct(rel.plan), probe)))
        used = tuple(i for i, c in zip(every, probe, strict=True) if c.outer and c.outer.used)
        ctx.uses[id(body)] = frozenset(signature(rel.scope, i) for i in used)
    else:
        used = tuple(i for i in every if signature(rel.scope, i) in known)
        for i in used:  # what the body uses, the queries between use too
            ref = rel.scope.columns[i].outer
            if ref is not None:
                ref.use()
    if not used:
        low = ctx.query(body, dataclasses.replace(ctx, outer=None))
        return _Keyed(low.relation(), (), low.types, low.names)
    keys_plan = Distinct(Project(rel.plan, used))
    outer = Outer(keys_plan, _outer_columns(rel.scope, used))
    low = ctx.query(body, dataclasses.replace(ctx, outer=outer))
    plan = _equi_joins(_keyed_relation(low, len(used)))
    return _Keyed(plan, used, low.types[len(used) :], low.names[len(used) :])


def _equi_joins(plan: Plan, lets: dict[str, Schema] | None = None) -> Plan:
    """``plan`` with each equality of two columns in a ``Filter`` right over an inner ``Join``
    made one of the join's equivalences (the same comparison: both sides non-NULL and equal).
    A correlated body joins the outer keys to its ``FROM`` with no equivalences and filters on
    ``inner = outer``: this makes that an equi-join, not a cross product. (``lets``: the
    schemas of the ``Let`` bindings in scope.)"""
    lets = lets or {}
    if isinstance(plan, Let):
        value = _equi_joins(plan.value, lets)
        inner = {**lets, plan.name: typecheck(value, None, lets)}
        return Let(plan.name, value, _equi_joins(plan.body, inner))
    inputs = children(plan)
    if inputs:
        plan = with_children(plan, tuple(_equi_joins(c, lets) for c in inputs))
    if not (isinstance(plan, Filter) and isinstance(plan.input, Join)):
        return plan
    join = plan.input
    if join.kind is not JoinKind.INNER:
        return plan
    schema = typecheck(join, None, lets)
    eqs = list(join.equivalences)
    rest: list[ScalarExpr] = []
    for p in plan.predicates:
        if (
            isinstance(p, CallBinary)
            and p.func is BinaryFunc.EQ
            and isinstance(p.left, ColumnRef)
            and isinstance(p.right, ColumnRef)
            and p.left.index != p.right.index
        ):
            a = schema.columns[p.left.index].type.scalar
            b = schema.columns[p.right.index].type.scalar
            # a numeric meets a float as a float (0.1 = 0.1::float8), which no equality of
            # values is: that pair stays a filter
            if a is b or {a, b} <= {S.INT64, S.NUMERIC} or {a, b} <= {S.INT64, S.FLOAT64}:
                eqs.append((p.left.index, p.right.index))
                continue
        rest.append(p)
    if len(eqs) == len(join.equivalences):
        return plan
    equi = dataclasses.replace(join, equivalences=tuple(eqs))
    return Filter(equi, tuple(rest)) if rest else equi


def _keyed_relation(low: Lowered, k: int) -> Plan:
    """A lowered correlated body as a collection: its ``LIMIT``/``OFFSET`` per outer key."""
    plan = low.plan
    if low.limit is not None or low.offset:
        plan = TopK(plan, tuple(range(k)), low.order_by, low.limit, low.offset)
    if _typed(plan).arity != low.arity:
        plan = Project(plan, tuple(range(low.arity)))
    return plan


def _one_column(keyed: _Keyed, node: Any, what: str) -> None:
    if len(keyed.types) != 1:
        raise _err(SqlSyntaxError, f"subquery {what}", node)


# -- joining an answer back ----------------------------------------------------------------

_DEFAULTS: dict[ScalarType, Any] = {
    S.INT64: 0,
    S.FLOAT64: 0.0,
    S.STRING: "",
    S.BOOL: False,
    S.DATE: _dt.date(2000, 1, 1),
    S.TIMESTAMP: _dt.datetime(2000, 1, 1),
    S.NUMERIC: Decimal(0),
    S.INT16: 0,
    S.INT32: 0,
    S.FLOAT32: 0.0,
}


def _null_safe(plan: Plan, cols: Sequence[int], nullable: Sequence[bool]) -> tuple[Plan, list[int]]:
    """``plan`` with ``(c IS NULL, COALESCE(c, v))`` appended for each nullable key column
    ``c``, and the columns to equate for each key (a NULL key then matches a NULL key)."""
    n = _typed(plan).arity
    exprs: list[ScalarExpr] = []
    out: list[int] = []
    schema = _typed(plan)
    for c, null in zip(cols, nullable, strict=True):
        if not null:
            out.append(c)
            continue
        t = schema.columns[c].type.scalar
        out.extend((n + len(exprs), n + len(exprs) + 1))
        exprs.append(CallUnary(UnaryFunc.IS_NULL, ColumnRef(c)))
        exprs.append(CallVariadic(VariadicFunc.COALESCE, (ColumnRef(c), Literal(_DEFAULTS[t], t))))
    if not exprs:
        return plan, out
    names = tuple(f"?key{i}" for i in range(len(exprs)))
    return Map(plan, tuple(exprs), names), out


def _attach(
    rel: Rel,
    keys: Sequence[int],
    answer: Plan,
    what: str,
    kind: JoinKind = JoinKind.LEFT,
    visible: tuple[str | None, Sequence[str]] | None = None,
) -> tuple[Rel, int]:
    """``rel`` left-joined (or ``kind``-joined) with ``answer`` (its first ``len(keys)``
    columns equal to ``rel``'s ``keys``, NULL-safely), its other columns appended (hidden, or
    ``visible`` as ``(qualifier, names)``); and the position of the first of those."""
    n = len(rel.scope.columns)
    lschema, aschema = _typed(rel.plan), _typed(answer)
    k = len(keys)
    nullable = [
        lschema.columns[c].type.nullable or aschema.columns[i].type.nullable
        for i, c in enumerate(keys)
    ]
    lplan, lkeys = _null_safe(rel.plan, keys, nullable)
    rplan, rkeys = _null_safe(answer, range(k), nullable)
    wl = _typed(lplan).arity
    eqs = tuple((a, wl + b) for a, b in zip(lkeys, rkeys, strict=True))
    plan: Plan = Join((lplan, rplan), eqs, kind)
    m = aschema.arity - k
    if wl != n or _typed(rplan).arity != aschema.arity or k:
        plan = Project(plan, (*range(n), *range(wl + k, wl + k + m)))
    schema = _typed(plan)
    if visible is not None:
        qualifier, names = visible
        extra = tuple(
            ScopeColumn(qualifier, name, schema.columns[n + i].type) for i, name in enumerate(names)
        )
    else:
        extra = tuple(
            ScopeColumn(None, f"?{what}{i}", schema.columns[n + i].type, hidden=True)
            for i in range(m)
        )
    return Rel(plan, Scope(rel.scope.columns + extra)), n


# -- LATERAL --------------------------------------------------------------------------------


def lateral_join(left: Rel, join: Any, ctx: _Ctx) -> Rel:
    """``left`` joined with ``[LEFT] JOIN LATERAL (subquery) alias`` (or ``, LATERAL ...``):
    the subquery correlated to ``left``'s columns, decorrelated as a subquery in an
    expression is, and joined on the columns it uses. An inner lateral join's ``ON`` filters
    the result; a ``LEFT`` one takes ``ON true`` only."""
    from ._binder import ExprBinder  # the binder imports this module
    from ._common import ident

    lat = join.this
    side = str(join.args.get("side") or "").upper()
    on = join.args.get("on")
    if side not in ("", "LEFT") or join.args.get("using") or join.args.get("method"):
        raise _unsupported(f"{side or 'this'} JOIN LATERAL", join)
    if not isinstance(lat.this, exp.Subquery):
        raise _unsupported("LATERAL function calls", lat)
    if side == "LEFT" and on is not None and not (isinstance(on, exp.Boolean) and on.this):
        raise _unsupported("LEFT JOIN LATERAL with an ON condition other than true", on)
    keyed = _body(left, lat.this, ctx)
    alias = lat.args.get("alias")
    qualifier = ident(alias.this) if alias is not None and alias.this is not None else None
    names = list(keyed.names)
    renames = [ident(c) for c in alias.columns] if alias is not None and alias.columns else []
    if len(renames) > len(names):
        raise _err(
            SqlSyntaxError,
            f'table "{qualifier}" has {len(names)} columns available but {len(renames)} '
            "columns specified",
            alias,
        )
    names[: len(renames)] = renames
    kind = JoinKind.LEFT if side == "LEFT" else JoinKind.INNER
    rel, _pos = _attach(left, keyed.keys, keyed.plan, "lateral", kind, (qualifier, names))
    if on is None or side == "LEFT":
        return Rel(share(rel.plan), rel.scope)
    sub, answers = plan_subqueries(rel, [on], ctx)
    binder = ExprBinder(sub.scope, ctx.params, context="JOIN conditions", subqueries=answers)
    plan: Plan = Filter(sub.plan, (binder.predicate(on, "JOIN/ON"),))
    if sub is not rel:
        plan = Project(plan, tuple(range(len(rel.scope.columns))))
    return Rel(share(plan), rel.scope)


# -- the kinds ------------------------------------------------------------------------------


def _scalar(rel: Rel, node: Any, ctx: _Ctx) -> tuple[Rel, TExpr]:
    keyed = _body(rel, node, ctx)
    _one_column(keyed, node, "must return only one column")
    k, t = keyed.k, keyed.types[0].scalar
    value = AggFunc.BOOL_OR if t is S.BOOL else AggFunc.MIN
    counted = Reduce(keyed.plan, tuple(range(k)), (Aggregate(AggFunc.COUNT), Aggregate(value, k)))
    # a key with a second row is the dataflow's error, as PostgreSQL's and Materialize's
    one = If(
        CallBinary(BinaryFunc.GT, ColumnRef(k), Literal(1, S.INT64)),
        CallUnary(UnaryFunc.ERROR, Literal(MORE_THAN_ONE_RECORD, S.STRING)),
        _TRUE,
    )
    answer = Project(Filter(counted, (one,)), (*range(k), k + 1))
    out, pos = _attach(rel, keyed.keys, answer, "subquery")
    return out, TExpr(ColumnRef(pos), ColumnType(t, True))


def _exists(rel: Rel, body: Any, ctx: _Ctx) -> tuple[Rel, TExpr]:
    keyed = _body(rel, body, ctx)
    k = keyed.k
    answer = Map(Distinct(Project(keyed.plan, tuple(range(k)))), (_TRUE,), ("?exists",))
    out, pos = _attach(rel, keyed.keys, answer, "exists")
    return out, TExpr(CallVariadic(VariadicFunc.COALESCE, (ColumnRef(pos), _FALSE)), _BOOL)


def _in(
    rel: Rel,
    lhs: Any,
    body: Any,
    func: BinaryFunc,
    node: Any,
    ctx: _Ctx,
    lhs_binder: ExprBinder | None,
) -> tuple[Rel, TExpr]:
    """``lhs func ANY (body)`` (``IN`` is ``= ANY``)."""
    from ._binder import ExprBinder  # the binder imports this module

    if isinstance(lhs, exp.Tuple):
        raise _unsupported("a row constructor compared with a subquery", lhs)
    keyed = _body(rel, body, ctx)
    _one_column(keyed, node, "has too many columns")
    _k, yt = keyed.k, keyed.types[0].scalar
    binder = lhs_binder or ExprBinder(rel.scope, ctx.params, context="IN")
    te = binder.bind(lhs)
    if te.type is None or te.literal is not None:
        x: ScalarExpr = _coerce(te, yt, lhs)
    else:
        assert te.expr is not None and te.scalar is not None
        if not (te.scalar is yt or (te.scalar.is_numeric and yt.is_numeric)):
            op = "=" if func is BinaryFunc.EQ else func.value
            raise _err(
                UndefinedFunction,
                f"operator does not exist: {pg_type(te.scalar)} {op} {pg_type(yt)}",
                node,
            )
        x = binder.folded(te.expr, lhs)
    # x as a column of rel
    n = len(rel.scope.columns)
    if isinstance(x, ColumnRef):
        xpos, base = x.index, rel
    else:
        plan = Map(rel.plan, (x,), ("?lhs",))
        xt = _typed(plan).columns[n].type
        base = Rel(plan, Scope((*rel.scope.columns, ScopeColumn(None, "?lhs", xt, True))))
        xpos = n
    if func is BinaryFunc.EQ:
        return _in_equal(base, xpos, keyed)
    return _any(base, xpos, keyed, func)


def _in_equal(rel: Rel, xpos: int, keyed: _Keyed) -> tuple[Rel, TExpr]:
    k = keyed.k
    xcol = ColumnRef(xpos)
    # a match: an equi-join of (key, x) with the body's distinct (key, y)
    pairs = Map(Distinct(keyed.plan), (_TRUE,), ("?match",))
    n = len(rel.scope.columns)
    lschema = _typed(rel.plan)
    nullable = [lschema.columns[c].type.nullable for c in keyed.keys]
    lplan, lkeys = _null_safe(rel.plan, keyed.keys, nullable)
    rplan, rkeys = _null_safe(pairs, range(k), nullable)
    wl = _typed(lplan).arity
    eqs = (
        *((a, wl + b) for a, b in zip(lkeys, rkeys, strict=True)),
        (xpos, wl + k),  # SQL equality: a NULL on either side matches nothing
    )
    joined: Plan = Join((lplan, rplan), eqs, JoinKind.LEFT)
    joined = Project(joined, (*range(n), wl + k + 1))
    mschema = _typed(joined)
    with_match = Rel(
        joined,
        Scope((*rel.scope.columns, ScopeColumn(None, "?in", mschema.columns[n].type, True))),
    )
    # whether the body has rows, and whether it has NULLs, per key
    counts = Reduce(
        keyed.plan, tuple(range(k)), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.COUNT, k))
    )
    out, cpos = _attach(with_match, keyed.keys, counts, "in")
    rows, non_null = ColumnRef(cpos), ColumnRef(cpos + 1)
    some = CallBinary(
        BinaryFunc.GT,
        CallVariadic(VariadicFunc.COALESCE, (rows, Literal(0, S.INT64))),
        Literal(0, S.INT64),
    )
    unknown = CallVariadic(
        VariadicFunc.AND,
        (
            some,
            CallVariadic(
                VariadicFunc.OR,
                (
                    CallUnary(UnaryFunc.IS_NULL, xcol),
                    CallBinary(BinaryFunc.LT, non_null, rows),
                ),
            ),
        ),
    )
    matched = CallVariadic(VariadicFunc.COALESCE, (ColumnRef(n), _FALSE))
    expr = If(matched, _TRUE, If(unknown, _NULL_BOOL, _FALSE))
    return out, TExpr(expr, ColumnType(S.BOOL, True))


def _any(rel: Rel, xpos: int, keyed: _Keyed, func: BinaryFunc) -> tuple[Rel, TExpr]:
    k = keyed.k
    keys = (*keyed.keys, xpos)
    # every (key, x) against every row of its key's body
    pairs_left = Distinct(Project(rel.plan, keys))
    lschema = _typed(pairs_left)
    nullable = [c.type.nullable for c in lschema.columns[:k]]
    lplan, lkeys = _null_safe(pairs_left, range(k), nullable)
    rplan, rkeys = _null_safe(keyed.plan, range(k), nullable)
    wl = _typed(lplan).arity
    eqs = tuple((a, wl + b) for a, b in zip(lkeys, rkeys, strict=True))
    joined: Plan = Join((lplan, rplan), eqs)
    cmp = CallBinary(func, ColumnRef(k), ColumnRef(wl + k))
    width = _typed(joined).arity
    compared = Map(joined, (cmp,), ("?cmp",))
    answer = Reduce(
        compared,
        tuple(range(k + 1)),
        (
            Aggregate(AggFunc.BOOL_OR, width),
            Aggregate(AggFunc.COUNT),
            Aggregate(AggFunc.COUNT, width),
        ),
    )
    out, pos = _attach(rel, keys, answer, "any")
    some_true, rows, non_null = ColumnRef(pos), ColumnRef(pos + 1), ColumnRef(pos + 2)
    expr = If(
        CallVariadic(VariadicFunc.COALESCE, (some_true, _FALSE)),
        _TRUE,
        If(CallBinary(BinaryFunc.LT, non_null, rows), _NULL_BOOL, _FALSE),
    )
    return out, TExpr(expr, ColumnType(S.BOOL, True))
