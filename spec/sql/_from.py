"""``FROM``: tables, views, subqueries, ``VALUES`` and table functions, joined as SQL joins them
(the comma binds looser than ``JOIN``; ``USING``/``NATURAL`` merge their columns)."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from ..errors import (
    SqlError,
    UndefinedObject,
    WrongObjectType,
)
from ..plan import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    ColumnRef,
    ColumnType,
    Constant,
    Filter,
    If,
    Join,
    JoinKind,
    Map,
    Plan,
    Project,
    ScalarExpr,
    Schema,
)
from ..plan.scalar_eval import eval_scalar
from ._binder import ExprBinder, _coerce, _common_type
from ._common import S, _Ctx, _err, _typed, _unsupported, ident
from ._scope import Rel, Scope
from .catalog import CatalogItem, SqlCatalog

# -- FROM -----------------------------------------------------------------------------------

_UNIT = Constant((((), 1),), Schema(()))


def _from_item(node: Any, ctx: _Ctx) -> Rel:
    alias = node.args.get("alias")
    alias_name = ident(alias.this) if alias is not None and alias.this is not None else None
    alias_cols = [ident(c) for c in alias.columns] if alias is not None and alias.columns else []
    if isinstance(node, exp.Table):
        if node.args.get("db") or node.args.get("catalog"):
            raise _unsupported("schema-qualified names", node)
        if node.args.get("joins") or node.args.get("pivots"):
            raise _unsupported("PIVOT", node)
        name = ident(node.this)
        if isinstance(node.this, exp.Anonymous | exp.Func):
            raise _unsupported("table functions", node)
        if name in ctx.ctes:
            low = ctx.ctes[name]
            plan = low.relation()
            rel = Rel(plan, Scope.of(_typed(plan), alias_name or name))
        else:
            item = _resolve_object(ctx.catalog, name, node)
            rel = Rel(_read(item, node), Scope.of(item.schema, alias_name or name))
    elif isinstance(node, exp.Subquery):
        from .lower import _query

        low = _query(node.this, ctx)
        plan = low.relation()
        rel = Rel(plan, Scope.of(_typed(plan), alias_name))
    elif isinstance(node, exp.Values):
        rel = _values(node, ctx, alias_name)
    else:
        raise _unsupported(f"{type(node).__name__} in FROM", node)
    if alias_cols:
        cols = rel.scope.columns
        if len(alias_cols) > len(cols):
            raise _err(
                SqlError,
                f'table "{alias_name}" has {len(cols)} columns available but '
                f"{len(alias_cols)} columns specified",
                alias,
            )
        renamed = tuple(
            dataclasses.replace(c, name=alias_cols[i]) if i < len(alias_cols) else c
            for i, c in enumerate(cols)
        )
        rel = Rel(rel.plan, Scope(renamed))
    return rel


def _read(item: CatalogItem, node: Any = None) -> Plan:
    from ..plan import Get

    if item.kind == "view":
        if item.plan is None:
            raise _err(SqlError, f"view {item.name} has no definition")
        return item.plan
    if item.kind == "sink":
        raise _err(
            WrongObjectType, f'"{item.name}" is a sink: it writes out, it cannot be read', node
        )
    return Get(item.id, item.schema)


def _resolve_object(catalog: SqlCatalog, name: str, node: Any) -> CatalogItem:
    item = catalog.resolve(name)
    if item is None:
        folded = [i for i in catalog.items() if i.name.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        near = difflib.get_close_matches(name, [i.name for i in catalog.items()], n=1, cutoff=0.6)
        hint = f'Perhaps you meant "{near[0]}".' if near else None
        raise _err(UndefinedObject, f'relation "{name}" does not exist', node, hint)
    return item


def _values(node: Any, ctx: _Ctx, alias: str | None) -> Rel:
    rows_nodes = list(node.expressions)
    if not rows_nodes:
        raise _err(SqlError, "VALUES needs at least one row", node)
    binder = ExprBinder(Scope(()), ctx.params, context="VALUES")
    bound = []
    for r in rows_nodes:
        items = r.expressions if isinstance(r, exp.Tuple) else [r]
        bound.append([(binder.bind(i), i) for i in items])
    width = len(bound[0])
    if any(len(r) != width for r in bound):
        raise _err(SqlError, "VALUES lists must all be the same length", node)
    cols = []
    rows: list[tuple[tuple[Any, ...], int]] = []
    types = []
    for c in range(width):
        column = [r[c] for r in bound]
        t = _common_type(column, "VALUES") or S.STRING
        types.append(t)
    values: list[list[Any]] = [[] for _ in bound]
    for c, t in enumerate(types):
        for k, r in enumerate(bound):
            te, n = r[c]
            values[k].append(_eval_const(_coerce(te, t, n), n))
    nullable = [any(v[c] is None for v in values) for c in range(width)]
    for c, t in enumerate(types):
        cols.append(Column(f"column{c + 1}", ColumnType(t, nullable[c])))
    rows = [(tuple(v), 1) for v in values]
    schema = Schema(tuple(cols))
    return Rel(Constant(tuple(rows), schema), Scope.of(schema, alias))


def _eval_const(expr: ScalarExpr, node: Any) -> Any:
    try:
        return eval_scalar(expr, ())
    except Exception as e:
        raise _err(SqlError, f"{e}" if str(e) else type(e).__name__, node) from None


def constant_value(node: Any, to: ColumnType, params: Sequence[Any] = (), what: str = "") -> Any:
    """The value of the constant expression ``node``, assigned to a column of type ``to``."""
    binder = ExprBinder(Scope(()), params, context="VALUES")
    te = binder.bind(node)
    value = _eval_const(_coerce(te, to.scalar, node, what), node)
    return value


def _conjuncts(node: Any) -> list[Any]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


def _refs(e: ScalarExpr) -> set[int]:
    out: set[int] = set()
    stack: list[ScalarExpr] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ColumnRef):
            out.add(x.index)
        elif isinstance(x, CallUnary):
            stack.append(x.expr)
        elif isinstance(x, CallBinary):
            stack.extend((x.left, x.right))
        elif isinstance(x, CallVariadic):
            stack.extend(x.exprs)
        elif isinstance(x, If):
            stack.extend((x.cond, x.then, x.els))
        elif isinstance(x, Cast):
            stack.append(x.expr)
    return out


def _shift(e: ScalarExpr, by: int) -> ScalarExpr:
    return _remap(e, lambda i: i + by)


def _remap(e: ScalarExpr, f: Callable[[int], int]) -> ScalarExpr:
    if isinstance(e, ColumnRef):
        return ColumnRef(f(e.index))
    if isinstance(e, CallUnary):
        return CallUnary(e.func, _remap(e.expr, f))
    if isinstance(e, CallBinary):
        return CallBinary(e.func, _remap(e.left, f), _remap(e.right, f))
    if isinstance(e, CallVariadic):
        return CallVariadic(e.func, tuple(_remap(x, f) for x in e.exprs))
    if isinstance(e, If):
        return If(_remap(e.cond, f), _remap(e.then, f), _remap(e.els, f))
    if isinstance(e, Cast):
        return Cast(_remap(e.expr, f), e.to)
    return e


def _join(left: Rel, node: Any, ctx: _Ctx) -> Rel:
    right = _from_item(node.this, ctx)
    side = str(node.args.get("side") or "").upper()
    kind = str(node.args.get("kind") or "").upper()
    method = str(node.args.get("method") or "").upper()
    on = node.args.get("on")
    using = [ident(u) for u in node.args.get("using") or []]
    if method == "NATURAL":
        lnames = {c.name for c in left.scope.columns if not c.hidden}
        using = [c.name for c in right.scope.columns if c.name in lnames]
    if kind in ("SEMI", "ANTI") or method in ("ASOF",):
        raise _unsupported(f"{kind or method} JOIN", node)
    if side == "RIGHT":
        swapped = _join_rels(right, left, on, using, "LEFT", node, ctx, using_hide_left=True)
        nr, nl = len(right.scope.columns), len(left.scope.columns)
        order = tuple(range(nr, nr + nl)) + tuple(range(nr))
        cols = swapped.scope.columns
        return Rel(Project(swapped.plan, order), Scope(tuple(cols[i] for i in order)))
    if side == "FULL":
        try:
            JoinKind("full")
        except ValueError:
            raise _unsupported("FULL JOIN", node) from None
        return _join_rels(left, right, on, using, "FULL", node, ctx)
    if side == "LEFT":
        return _join_rels(left, right, on, using, "LEFT", node, ctx)
    if kind == "CROSS" and (on is not None or using):
        raise _err(SqlError, "CROSS JOIN takes no ON or USING", node)
    return _join_rels(left, right, on, using, "INNER", node, ctx)


def _join_rels(
    left: Rel,
    right: Rel,
    on: Any,
    using: list[str],
    kind: str,
    node: Any,
    ctx: _Ctx,
    using_hide_left: bool = False,
) -> Rel:
    nl, nr = len(left.scope.columns), len(right.scope.columns)
    scope = left.scope.concat(right.scope)
    pairs: list[tuple[ScalarExpr, ScalarExpr, Any]] = []  # left expr, right expr (own numbering)
    residual: list[tuple[ScalarExpr, Any]] = []  # over the combined scope
    if using:
        cols = list(scope.columns)
        for name in using:
            li = Scope(left.scope.columns).resolve(name, None, node)
            ri = Scope(right.scope.columns).resolve(name, None, node)
            pairs.append((ColumnRef(li), ColumnRef(ri), node))
            hide = li if using_hide_left else nl + ri
            cols[hide] = dataclasses.replace(cols[hide], hidden=True)
        scope = Scope(tuple(cols))
    binder = ExprBinder(scope, ctx.params, context="JOIN conditions")
    for cond in _conjuncts(on) if on is not None else []:
        pred = binder.predicate(cond, "JOIN/ON")
        if isinstance(pred, CallBinary) and pred.func is BinaryFunc.EQ:
            lr, rr = _refs(pred.left), _refs(pred.right)

            def lside(refs: set[int]) -> bool:
                return bool(refs) and all(i < nl for i in refs)

            def rside(refs: set[int]) -> bool:
                return bool(refs) and all(i >= nl for i in refs)

            if lside(lr) and rside(rr):
                pairs.append((pred.left, _shift(pred.right, -nl), cond))
                continue
            if rside(lr) and lside(rr):
                pairs.append((pred.right, _shift(pred.left, -nl), cond))
                continue
        residual.append((pred, cond))
    # compute non-column key expressions into extra columns of each side
    lextra: list[ScalarExpr] = []
    rextra: list[ScalarExpr] = []
    lkeys: list[int] = []
    rkeys: list[int] = []
    for le, re_, _n in pairs:
        if isinstance(le, ColumnRef):
            lkeys.append(le.index)
        else:
            lkeys.append(nl + len(lextra))
            lextra.append(le)
        if isinstance(re_, ColumnRef):
            rkeys.append(re_.index)
        else:
            rkeys.append(nr + len(rextra))
            rextra.append(re_)
    rplan = right.plan
    if kind in ("LEFT", "FULL"):
        right_only = []
        for pred, cond in residual:
            refs = _refs(pred)
            if kind == "LEFT" and refs and all(i >= nl for i in refs):
                right_only.append(_shift(pred, -nl))
            else:
                raise _unsupported(
                    f"this {kind} JOIN condition (only equalities between the two sides"
                    + (" and conditions on the right side" if kind == "LEFT" else "")
                    + ")",
                    cond,
                )
        residual = []
        if right_only:
            rplan = Filter(rplan, tuple(right_only))
    lplan = left.plan
    if lextra:
        lplan = Map(lplan, tuple(lextra), tuple(f"?key{i}" for i in range(len(lextra))))
    if rextra:
        rplan = Map(rplan, tuple(rextra), tuple(f"?key{i}" for i in range(len(rextra))))
    wl = nl + len(lextra)
    eqs = tuple((lk, wl + rk) for lk, rk in zip(lkeys, rkeys, strict=True))
    join_kind = JoinKind.INNER if kind == "INNER" else JoinKind(kind.lower())
    plan: Plan = Join((lplan, rplan), eqs, join_kind)
    _typed(plan, node)
    if lextra or rextra:
        plan = Project(plan, tuple(range(nl)) + tuple(range(wl, wl + nr)))
    if residual:
        plan = Filter(plan, tuple(p for p, _ in residual))
    schema = _typed(plan, node)
    return Rel(plan, scope.retyped(schema))


def _from(node: Any, ctx: _Ctx) -> Rel:
    from_ = node.args.get("from_") or node.args.get("from")
    joins = node.args.get("joins") or []
    if from_ is None:
        if joins:
            raise _err(SqlError, "JOIN without FROM", joins[0])
        return Rel(_UNIT, Scope(()))
    rel = _from_item(from_.this, ctx)
    for extra in from_.expressions if hasattr(from_, "expressions") else []:
        other = _from_item(extra, ctx)
        rel = _join_rels(rel, other, None, [], "INNER", extra, ctx)
    for j in joins:
        rel = _join(rel, j, ctx)
    return rel
