"""``FROM``: tables, views, subqueries, ``VALUES`` and table functions, joined as SQL joins them
(the comma binds looser than ``JOIN``; ``USING``/``NATURAL`` merge their columns)."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

from ..errors import (
    AmbiguousColumn,
    DuplicateAlias,
    DuplicateColumn,
    EvaluationError,
    InvalidParameterValue,
    NumericValueOutOfRange,
    PlanError,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedObject,
    WrongObjectType,
    data_error,
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
    Literal,
    Map,
    Plan,
    Project,
    ScalarExpr,
    ScalarType,
    Schema,
    VariadicFunc,
)
from ..plan.scalar_eval import eval_scalar
from ._binder import ExprBinder
from ._common import S, _Ctx, _err, _typed, _unsupported, ident, pg_type, position_of
from ._scope import Rel, Scope, ScopeColumn
from ._subquery import find_subqueries, lateral_join, plan_subqueries
from ._texpr import (
    INTEGERS,
    _coerce,
    _common_type,
    arith_number,
    assign,
    cast_to,
    common_number,
)
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
        if node.args.get("pivots"):
            raise _unsupported("PIVOT", node)
        if node.args.get("rows_from") or isinstance(node.this, exp.Func):
            rel = _table_function(node, ctx, alias_name, bool(alias_cols))
            return _renamed_columns(rel, alias, alias_name, alias_cols)
        if node.args.get("joins"):
            return _renamed_columns(_paren_join(node, ctx), alias, alias_name, alias_cols)
        name = ident(node.this)
        if name in ctx.ctes:
            low = ctx.ctes[name]
            plan = low.relation()
            rel = Rel(plan, Scope.of(_typed(plan), alias_name or name))
        else:
            item = _resolve_object(ctx.catalog, name, node)
            rel = Rel(_read(item, node), Scope.of(item.schema, alias_name or name))
    elif isinstance(node, exp.Subquery) and not isinstance(node.this, exp.Query):
        inner = node.this
        rel = _paren_join(inner, ctx) if isinstance(inner, exp.Table) else _from_item(inner, ctx)
        if alias_name is not None:
            # an alias hides the names inside: only the join's own output columns remain
            rel = Rel(
                rel.plan,
                Scope(
                    tuple(
                        dataclasses.replace(c, qualifier=None if c.hidden else alias_name)
                        for c in rel.scope.columns
                    )
                ),
            )
    elif isinstance(node, exp.Subquery):
        low = ctx.query(node.this, ctx)
        plan = low.relation()
        rel = Rel(plan, Scope.of(_typed(plan), alias_name))
    elif isinstance(node, exp.Values):
        rel = _values(node, ctx, alias_name)
    else:
        raise _unsupported(f"{type(node).__name__} in FROM", node)
    return _renamed_columns(rel, alias, alias_name, alias_cols)


_MAX_SERIES = 1_000_000
"""The most rows a table function in ``FROM`` may make (they become a constant of the plan)."""


def _series(binder: ExprBinder, node: Any) -> tuple[list[Any], ScalarType]:
    """The values of ``generate_series(start, stop[, step])`` over integers (constant
    arguments; NULL in any gives no rows)."""
    if isinstance(node, exp.Anonymous):
        args = list(node.expressions)
    else:
        args = [node.args.get("start"), node.args.get("end")]
        if node.args.get("step") is not None:
            args.append(node.args["step"])
    if not 2 <= len(args) <= 3 or any(a is None for a in args):
        raise _err(
            UndefinedFunction, "function generate_series with these arguments does not exist", node
        )
    values = []
    out = S.INT32  # generate_series(integer, integer) is an integer, as in PostgreSQL
    for a in args:
        te = binder.bind(a)
        if te.type is not None and te.literal is None and te.scalar not in INTEGERS:
            raise _unsupported(f"generate_series over {pg_type(te.scalar)}", node)
        if te.scalar is S.INT64 and te.literal is None:
            out = S.INT64
        values.append(_eval_const(_coerce(te, S.INT64, a), a))
    if any(v is None for v in values):
        return [], out
    start, stop = values[0], values[1]
    step = values[2] if len(values) == 3 else 1
    if step == 0:
        raise _err(InvalidParameterValue, "step size cannot equal zero", node)
    n = max(0, (stop - start) // step + 1)
    if n > _MAX_SERIES:
        raise _unsupported(f"table functions of more than {_MAX_SERIES} rows", node)
    series = list(range(start, stop + (1 if step > 0 else -1), step))
    if out is S.INT32 and series and not -(2**31) <= series[-1] < 2**31:
        raise _err(NumericValueOutOfRange, "integer out of range", node)
    return series, out


def _table_function(node: Any, ctx: _Ctx, alias_name: str | None, has_columns: bool) -> Rel:
    """Functions in ``FROM`` (``generate_series``, any scalar function as one row), ``ROWS
    FROM (f(...), g(...))`` side by side (the shorter padded with NULLs) and ``WITH
    ORDINALITY``: constants of the plan, so their arguments must be constants."""
    items = [t.this for t in node.args.get("rows_from") or []] or [node.this]
    binder = ExprBinder(Scope(()), ctx.params, context="functions in FROM")
    columns: list[tuple[str, ScalarType, list[Any]]] = []
    for f in items:
        name = (
            "generate_series"
            if isinstance(f, exp.ExplodingGenerateSeries)
            else str(f.name if isinstance(f, exp.Anonymous) else f.sql_name()).lower()
        )
        if name == "generate_series":
            values, t = _series(binder, f)
        elif name in ("unnest", "jsonb_array_elements", "regexp_split_to_table"):
            raise _unsupported(f"table function {name}()", f)
        else:
            te = binder.bind(f)
            expr, ct = binder.finish(te, f)
            values, t = [_eval_const(expr, f)], ct.scalar
        columns.append((name, t, values))
    if len(columns) == 1 and alias_name is not None and not has_columns:
        columns = [(alias_name, columns[0][1], columns[0][2])]
    n = max((len(v) for _n, _t, v in columns), default=0)
    rows: list[list[Any]] = [[] for _ in range(n)]
    cols: list[Column] = []
    for name, t, values in columns:
        padded = values + [None] * (n - len(values))
        for r, v in zip(rows, padded, strict=True):
            r.append(v)
        cols.append(Column(name, ColumnType(t, any(v is None for v in padded) or n == 0)))
    if node.args.get("ordinality"):
        for k, r in enumerate(rows):
            r.append(k + 1)
        cols.append(Column("ordinality", ColumnType(S.INT64, False)))
    schema = Schema(tuple(cols))
    qualifier = alias_name or (columns[0][0] if len(columns) == 1 else None)
    return Rel(Constant(tuple((tuple(r), 1) for r in rows), schema), Scope.of(schema, qualifier))


def _renamed_columns(rel: Rel, alias: Any, alias_name: str | None, alias_cols: list[str]) -> Rel:
    if alias_cols:
        cols = rel.scope.columns
        visible = [i for i, c in enumerate(cols) if not c.hidden]
        if len(alias_cols) > len(visible):
            raise _err(
                SqlError,
                f'table "{alias_name}" has {len(visible)} columns available but '
                f"{len(alias_cols)} columns specified",
                alias,
            )
        names = dict(zip(visible, alias_cols, strict=False))
        renamed = tuple(
            dataclasses.replace(c, name=names[i]) if i in names else c for i, c in enumerate(cols)
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
    """The value of a constant expression [its evaluation error as a SqlDataError]."""
    try:
        return eval_scalar(expr, ())
    except EvaluationError as e:
        err = data_error(str(e))
        err.position = position_of(node)
        raise err from None


def constant_value(node: Any, to: ColumnType, params: Sequence[Any] = (), what: str = "") -> Any:
    """The value of the constant expression ``node``, assigned to a column of type ``to``."""
    binder = ExprBinder(Scope(()), params, context="VALUES")
    te = binder.bind(node)
    value = _eval_const(assign(te, to.scalar, node, what), node)
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


def _is_comma(j: Any) -> bool:
    """Whether a sqlglot ``Join`` is a comma in the ``FROM`` list: sqlglot builds those without
    the ``pivots`` argument that every keyword join gets (pinned by a test)."""
    return "pivots" not in j.args and not any(
        j.args.get(k) for k in ("kind", "side", "method", "on", "using")
    )


def _names(rel: Rel) -> set[str]:
    return {c.qualifier for c in rel.scope.columns if c.qualifier is not None}


def _check_names(left: Rel, right: Rel, node: Any) -> None:
    """PostgreSQL refuses one name for two relations of one ``FROM`` (42712)."""
    both = sorted(_names(left) & _names(right))
    if both:
        raise _err(DuplicateAlias, f'table name "{both[0]}" specified more than once', node)


def _from(node: Any, ctx: _Ctx) -> Rel:
    """The ``FROM`` clause: its comma-separated items, each with the ``JOIN``s that follow it
    (``JOIN`` binds tighter than the comma), cross-joined left to right."""
    from_ = node.args.get("from_") or node.args.get("from")
    joins = node.args.get("joins") or []
    if from_ is None:
        if joins:
            raise _err(SqlSyntaxError, 'syntax error at or near "JOIN"', joins[0])
        return Rel(_UNIT, Scope(()))
    groups = [_from_item(from_.this, ctx)]
    for extra in from_.expressions if hasattr(from_, "expressions") else []:
        groups.append(_from_item(extra, ctx))
    for j in joins:
        if isinstance(j.this, exp.Lateral):  # correlated to every item before it
            rel = groups[0]
            for other in groups[1:]:
                rel = _join_rels(rel, other, None, [], JoinKind.INNER, node, ctx)
            groups = [lateral_join(rel, j, ctx)]
            continue
        if _is_comma(j):
            groups.append(_from_item(j.this, ctx))
        else:
            groups[-1] = _join(groups[-1], j, ctx)
    rel = groups[0]
    for other in groups[1:]:
        rel = _join_rels(rel, other, None, [], JoinKind.INNER, node, ctx)
    return rel


def _paren_join(node: Any, ctx: _Ctx) -> Rel:
    """``(a JOIN b ...)``, which sqlglot keeps as the table ``a`` with its joins attached."""
    first = node.copy()
    first.set("joins", None)
    rel = _from_item(first, ctx)
    for j in node.args.get("joins") or []:
        if _is_comma(j):
            raise _err(SqlSyntaxError, 'syntax error at or near ","', j)
        rel = _join(rel, j, ctx)
    return rel


def _join(left: Rel, node: Any, ctx: _Ctx) -> Rel:
    right = _from_item(node.this, ctx)
    side = str(node.args.get("side") or "").upper()
    kind = str(node.args.get("kind") or "").upper()
    method = str(node.args.get("method") or "").upper()
    on = node.args.get("on")
    using = [ident(u) for u in node.args.get("using") or []]
    if kind in ("SEMI", "ANTI") or method in ("ASOF",) or side not in ("", "LEFT", "RIGHT", "FULL"):
        raise _unsupported(f"{kind or method or side} JOIN", node)
    if method == "NATURAL":
        if on is not None or using:
            raise _err(SqlSyntaxError, 'syntax error at or near "ON"', on or node)
        lnames = [c.name for c in left.scope.columns if not c.hidden]
        rnames = {c.name for c in right.scope.columns if not c.hidden}
        using = list(dict.fromkeys(n for n in lnames if n in rnames))
    elif kind == "CROSS":
        if on is not None or using:
            raise _err(SqlSyntaxError, 'syntax error at or near "ON"', on or node)
    elif on is None and not using:
        raise _err(SqlSyntaxError, "syntax error: JOIN needs ON or USING", node)
    jk = {"": JoinKind.INNER, "LEFT": JoinKind.LEFT, "RIGHT": JoinKind.RIGHT, "FULL": JoinKind.FULL}
    return _join_rels(left, right, on, using, jk[side], node, ctx)


def _using_side(scope: Scope, name: str, side: str, node: Any) -> int:
    hits = [i for i, c in enumerate(scope.columns) if c.name == name and not c.hidden]
    if not hits:
        raise _err(
            UndefinedColumn,
            f'column "{name}" specified in USING clause does not exist in {side} table',
            node,
        )
    if len(hits) > 1:
        raise _err(
            AmbiguousColumn,
            f'common column name "{name}" appears more than once in {side} table',
            node,
        )
    return hits[0]


def _key_pair(
    le: ScalarExpr, re_: ScalarExpr, lschema: Schema, rschema: Schema, node: Any
) -> tuple[ScalarExpr, ScalarExpr]:
    """Join keys of two number types made one type where values of the two would not be
    equal as SQL compares them: a numeric meeting a float as a float (``0.1 = 0.1::float8``),
    an integer meeting a numeric as a numeric (so both sides' keys are one type, also in
    Spark's Arrow)."""
    lt, rt = _scalar_type(le, lschema, node), _scalar_type(re_, rschema, node)
    if lt is not rt and lt.is_numeric and rt.is_numeric and {lt, rt} != {S.INT64, S.FLOAT64}:
        to = arith_number(lt, rt)
        le, re_ = cast_to(le, lt, to), cast_to(re_, rt, to)
    return le, re_


def _gate(key: ScalarExpr, conds: list[ScalarExpr], t: ScalarType) -> ScalarExpr:
    """``key`` where every condition holds, else NULL: a NULL key matches nothing, so an outer
    join pads the rows whose side of the ``ON`` condition fails."""
    if not conds:
        return key
    cond = conds[0] if len(conds) == 1 else CallVariadic(VariadicFunc.AND, tuple(conds))
    return If(cond, key, Literal(None, t))


def _join_rels(
    left: Rel,
    right: Rel,
    on: Any,
    using: list[str],
    kind: JoinKind,
    node: Any,
    ctx: _Ctx,
) -> Rel:
    """``left`` joined with ``right``: equalities between the two sides become the join's
    equivalences, a condition on one side filters that side (or, on the side an outer join
    keeps, turns its keys NULL), anything else filters an inner join's output (an outer
    join's is refused); ``USING`` columns are merged (the left's value, the right's for a
    ``RIGHT`` join, ``COALESCE`` of both for ``FULL``) and come first."""
    _check_names(left, right, node)
    nl, nr = len(left.scope.columns), len(right.scope.columns)
    cols = list(left.scope.concat(right.scope).columns)
    pairs: list[tuple[ScalarExpr, ScalarExpr]] = []  # left expr, right expr (own numbering)
    merged: list[tuple[str, int, int]] = []
    for name in using:
        if any(m[0] == name for m in merged):
            raise _err(
                DuplicateColumn,
                f'column name "{name}" appears more than once in USING clause',
                node,
            )
        li = _using_side(left.scope, name, "left", node)
        ri = _using_side(right.scope, name, "right", node)
        lt, rt = cols[li].type.scalar, cols[nl + ri].type.scalar
        if not (lt is rt or (lt.is_numeric and rt.is_numeric)):
            raise _err(
                UndefinedFunction, f"operator does not exist: {pg_type(lt)} = {pg_type(rt)}", node
            )
        pairs.append((ColumnRef(li), ColumnRef(ri)))
        merged.append((name, li, ri))
        for k in (li, nl + ri):
            cols[k] = dataclasses.replace(cols[k], hidden=True)
    scope = Scope(tuple(cols))
    binder = ExprBinder(scope, ctx.params, context="JOIN conditions")
    left_only: list[ScalarExpr] = []
    right_only: list[ScalarExpr] = []  # over the right input's columns
    constant: list[ScalarExpr] = []
    residual: list[tuple[ScalarExpr, Any]] = []
    with_subqueries: list[Any] = []  # conditions with subqueries: a filter after the join
    for cond in _conjuncts(on) if on is not None else []:
        if find_subqueries(cond):
            if kind is not JoinKind.INNER:
                raise _unsupported(f"subqueries in a {kind.value.upper()} JOIN's ON", cond)
            with_subqueries.append(cond)
            continue
        pred = binder.predicate(cond, "JOIN/ON")
        if isinstance(pred, CallBinary) and pred.func is BinaryFunc.EQ:
            lr, rr = _refs(pred.left), _refs(pred.right)

            def lside(refs: set[int]) -> bool:
                return bool(refs) and all(i < nl for i in refs)

            def rside(refs: set[int]) -> bool:
                return bool(refs) and all(i >= nl for i in refs)

            if lside(lr) and rside(rr):
                pairs.append((pred.left, _shift(pred.right, -nl)))
                continue
            if rside(lr) and lside(rr):
                pairs.append((pred.right, _shift(pred.left, -nl)))
                continue
        refs = _refs(pred)
        if not refs:
            constant.append(pred)
        elif all(i < nl for i in refs):
            left_only.append(pred)
        elif all(i >= nl for i in refs):
            right_only.append(_shift(pred, -nl))
        else:
            residual.append((pred, cond))
    lplan, rplan = left.plan, right.plan
    gate_left: list[ScalarExpr] = []
    gate_right: list[ScalarExpr] = []
    post: list[ScalarExpr] = []
    if kind is JoinKind.INNER:
        if left_only:
            lplan = Filter(lplan, tuple(left_only))
        if right_only:
            rplan = Filter(rplan, tuple(right_only))
        post = constant + [p for p, _ in residual]
    else:
        if residual:
            raise _unsupported(
                f"this {kind.value.upper()} JOIN condition (a condition over both sides other "
                "than an equality between them)",
                residual[0][1],
            )
        if kind is JoinKind.LEFT:
            gate_left = constant + left_only
            if right_only:
                rplan = Filter(rplan, tuple(right_only))
        elif kind is JoinKind.RIGHT:
            gate_right = constant + right_only
            if left_only:
                lplan = Filter(lplan, tuple(left_only))
        else:
            gate_left, gate_right = constant + left_only, right_only
    if (gate_left or gate_right) and not pairs:
        pairs.append((Literal(True, S.BOOL), Literal(True, S.BOOL)))
    lschema, rschema = left.scope.schema(), right.scope.schema()
    # the key expressions that are not plain columns become extra columns of each side
    lextra: list[ScalarExpr] = []
    rextra: list[ScalarExpr] = []
    lkeys: list[int] = []
    rkeys: list[int] = []
    for k, (le, re_) in enumerate(pairs):
        if k == 0 and gate_left:
            le = _gate(le, gate_left, _scalar_type(le, lschema, node))
        if k == 0 and gate_right:
            re_ = _gate(re_, gate_right, _scalar_type(re_, rschema, node))
        le, re_ = _key_pair(le, re_, lschema, rschema, node)
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
    if lextra:
        lplan = Map(lplan, tuple(lextra), tuple(f"?key{i}" for i in range(len(lextra))))
    if rextra:
        rplan = Map(rplan, tuple(rextra), tuple(f"?key{i}" for i in range(len(rextra))))
    wl = nl + len(lextra)
    eqs = tuple((lk, wl + rk) for lk, rk in zip(lkeys, rkeys, strict=True))
    plan: Plan = Join((lplan, rplan), eqs, kind)
    _typed(plan, node)
    if lextra or rextra:
        plan = Project(plan, tuple(range(nl)) + tuple(range(wl, wl + nr)))
    if post:
        plan = Filter(plan, tuple(post))
    if with_subqueries:
        sub, answers = plan_subqueries(Rel(plan, scope.retyped(_typed(plan))), with_subqueries, ctx)
        on_binder = ExprBinder(sub.scope, ctx.params, context="JOIN conditions", subqueries=answers)
        preds = tuple(on_binder.predicate(c, "JOIN/ON") for c in with_subqueries)
        plan = Project(Filter(sub.plan, preds), tuple(range(nl + nr)))
    schema = _typed(plan, node)
    if merged:
        exprs: list[ScalarExpr] = []
        for _name, li, ri in merged:
            lt, rt = schema.columns[li].type.scalar, schema.columns[nl + ri].type.scalar
            t = lt if lt is rt else common_number(lt, rt)
            lv: ScalarExpr = cast_to(ColumnRef(li), lt, t)
            rv: ScalarExpr = cast_to(ColumnRef(nl + ri), rt, t)
            if kind is JoinKind.FULL:
                exprs.append(CallVariadic(VariadicFunc.COALESCE, (lv, rv)))
            else:
                exprs.append(rv if kind is JoinKind.RIGHT else lv)
        n = nl + nr
        names = tuple(m[0] for m in merged)
        plan = Project(Map(plan, tuple(exprs), names), (*range(n, n + len(merged)), *range(n)))
        schema = _typed(plan, node)
        front = tuple(
            ScopeColumn(None, m[0], c.type) for m, c in zip(merged, schema.columns, strict=False)
        )
        scope = Scope(front + scope.columns)
    return Rel(plan, scope.retyped(schema))


def _scalar_type(e: ScalarExpr, schema: Schema, node: Any) -> ScalarType:
    from ..plan import scalar_type

    try:
        return scalar_type(e, schema).scalar
    except PlanError as err:
        raise _err(SqlTypeError, str(err), node) from None
