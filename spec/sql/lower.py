"""Binding and lowering: a sqlglot query tree, with names resolved against a catalog, to a plan.

:func:`lower_query` turns a query (``SELECT``, set operations, ``WITH``,
subqueries in ``FROM``) into a :class:`Lowered`: a :mod:`tidegate.spec.plan`
plan, its output columns, and the ``ORDER BY``/``LIMIT``/``OFFSET`` that a
peek applies as its finishing (:meth:`Lowered.finishing`) or a view as a
``TopK`` (:meth:`Lowered.relation`). Everything here is pure.

How SQL maps onto the IR:

* ``FROM a, b`` / ``CROSS JOIN``: a ``Join`` without equivalences;
  ``[INNER] JOIN ... ON``: equalities between the two sides become the join's
  equivalences (an expression on either side is computed into a column
  first), anything else a ``Filter`` after the join; ``LEFT JOIN``: the IR's
  left join, whose ``ON`` may add conditions on the right side only (they
  filter the right input); ``RIGHT JOIN``: a left join with the inputs
  swapped; ``FULL JOIN`` only if the IR has ``JoinKind("full")``.
* ``GROUP BY`` / aggregates: a ``Map`` of the keys and arguments, a
  ``Reduce``, then ``HAVING`` as a ``Filter``. Without ``GROUP BY`` an
  aggregate over no rows still answers one row (``count`` 0, others NULL):
  ``Union(Reduce, default, Negate(default x [Reduce non-empty]))``.
* ``DISTINCT``: ``Distinct``; ``UNION``: ``Union`` (then ``Distinct``);
  ``EXCEPT ALL``: ``Threshold(a - b)``; ``INTERSECT ALL``:
  ``a - Threshold(a - b)``; the distinct forms take ``Distinct`` inputs.
* Types follow PostgreSQL's rules where the IR allows: an integer meets a
  float as a float, a string literal takes the type it is compared with or
  assigned to (``d = '2024-01-01'``), an untyped ``NULL`` the other
  operand's type; ``a || b`` is NULL if either is (``concat`` skips NULLs).
  Integer division truncates, as in PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from ..errors import (
    AmbiguousColumn,
    DuplicateAlias,
    GroupingError,
    InvalidColumnReference,
    InvalidParameterValue,
    ProgramLimitExceeded,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedObject,
    UnsupportedSql,
    WrongObjectType,
)
from ..plan import (
    AggFunc,
    Aggregate,
    Cast,
    Column,
    ColumnRef,
    ColumnType,
    Constant,
    Distinct,
    Filter,
    Join,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    ScalarExpr,
    ScalarType,
    Schema,
    TemporalFilter,
    Threshold,
    TopK,
    Union,
)
from ..protocol.types import ColumnOrder
from ._binder import ExprBinder, _contains_agg, _find_aggs, _Grouping, agg_func
from ._common import (
    Lowered,
    S,
    _Ctx,
    _err,
    _renamed,
    _typed,
    _unsupported,
    ident,
    pg_type,
    sql_type,
)
from ._from import _conjuncts, _eval_const, _from, _refs, _values
from ._functions import call_of
from ._limits import MAX_TARGET_LIST, with_enough_frames
from ._scope import Rel, Scope, ScopeColumn
from ._subquery import plan_subqueries
from ._temporal import split_temporal
from ._texpr import TExpr, _coerce, cast_to, common_number
from ._window import distinct_on_exprs, find_windows, lower_windows, top_k_pushdown
from .catalog import SqlCatalog

__all__ = [
    "Lowered",
    "bind_scalar",
    "lower_query",
    "pg_type",
]


@with_enough_frames
def lower_query(
    query: Any, catalog: SqlCatalog, params: Sequence[Any] = (), sql: str | None = None
) -> Lowered:
    """Bind ``query`` (a sqlglot SELECT / set operation) against ``catalog`` and lower it.

    Raises the :mod:`tidegate.spec.errors.sql` errors, positions relative to
    the statement the query was parsed from (its text ``sql``, if given).
    """
    try:
        return _query(query, _Ctx(catalog, params, _query))
    except SqlError as e:
        if sql is not None:
            raise e.located(sql) from None
        raise


def _query(node: Any, ctx: _Ctx) -> Lowered:
    with_ = node.args.get("with_") or node.args.get("with")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise _unsupported("WITH RECURSIVE", with_)
        ctx = _Ctx(ctx.catalog, ctx.params, _query, dict(ctx.ctes), ctx.outer, ctx.uses)
        seen: set[str] = set()
        for cte in with_.expressions:
            name = ident(cte.args["alias"].this)
            if name in seen:
                raise _err(
                    DuplicateAlias, f'WITH query name "{name}" specified more than once', cte
                )
            seen.add(name)
            lowered = _query(cte.this, dataclasses.replace(ctx, outer=None))
            cols = cte.args["alias"].columns if cte.args.get("alias") else None
            if cols:
                lowered = _rename_lowered(lowered, [ident(c) for c in cols], name, cte)
            ctx.ctes[name] = dataclasses.replace(lowered, unknown=())
    if isinstance(node, exp.Select):
        return _select(node, ctx)
    if isinstance(node, exp.Union | exp.Except | exp.Intersect):
        return _set_op(node, ctx)
    if isinstance(node, exp.Subquery):
        return _modifiers(_query(node.this, ctx), node, ctx)
    if isinstance(node, exp.Values):
        rel = _with_outer(_values(node, ctx, None), ctx)
        return Lowered(rel.plan, rel.scope.schema().names, rel.scope.schema().types)
    raise _unsupported(f"{type(node).__name__} as a query", node)


def _modifiers(low: Lowered, node: Any, ctx: _Ctx) -> Lowered:
    """``(query) ORDER BY ... LIMIT ... OFFSET ...``: the outer clauses over the inner result
    (an outer LIMIT/OFFSET without ORDER BY takes the inner query's order)."""
    if not any(node.args.get(k) for k in ("order", "limit", "offset")):
        return low
    # PostgreSQL takes one clause of each kind for a query and the parentheses around it
    for key, word, inner in (
        ("order", "ORDER BY", bool(low.order_by)),
        ("limit", "LIMIT", low.limit is not None),
        ("offset", "OFFSET", bool(low.offset)),
    ):
        if node.args.get(key) is not None and inner:
            raise _err(SqlSyntaxError, f"multiple {word} clauses not allowed", node.args[key])
    if node.args.get("order") is None and low.order_by:
        limit = _limit_value(node.args.get("limit"), ctx, "LIMIT")
        offset = _limit_value(node.args.get("offset"), ctx, "OFFSET") or 0
        if low.limit is not None:
            rest = max(low.limit - offset, 0)
            limit = rest if limit is None else min(rest, limit)
        return dataclasses.replace(low, limit=limit, offset=low.offset + offset, unknown=())
    plan = low.relation()
    scope = Scope.of(_typed(plan, node), None)
    rel = Rel(plan, scope)
    return _order_limit(rel, node, ctx, list(range(low.arity)), list(low.names), None)


def _rename_lowered(low: Lowered, names: list[str], what: str, node: Any) -> Lowered:
    if len(names) > low.arity:
        raise _err(
            InvalidColumnReference,
            f'WITH query "{what}" has {low.arity} columns available but {len(names)} '
            "columns specified",
            node,
        )
    full = [*names, *low.names[len(names) :]]
    return dataclasses.replace(low, names=tuple(full))


def _limit_value(node: Any, ctx: _Ctx, what: str) -> int | None:
    if node is None:
        return None
    value_node = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if value_node is None:
        value_node = node.this
    binder = ExprBinder(Scope(()), ctx.params, context=what)
    te = binder.bind(value_node)
    if te.expr is None:
        return None
    if te.type is not None and te.literal is None and not te.type.scalar.is_numeric:
        raise _err(
            SqlTypeError,
            f"argument of {what} must be type bigint, not type {pg_type(te.scalar)}",
            value_node,
        )
    v = _eval_const(_coerce(te, S.INT64, value_node), value_node)
    if v is None:
        return None
    if v < 0:  # PostgreSQL's 2201W and 2201X
        err = _err(InvalidParameterValue, f"{what} must not be negative", value_node)
        err.sqlstate = "2201W" if what == "LIMIT" else "2201X"
        raise err
    return int(v)


def _set_op(node: Any, ctx: _Ctx) -> Lowered:
    left = _query(node.this, ctx)
    right = _query(node.expression, ctx)
    word = {exp.Union: "UNION", exp.Except: "EXCEPT", exp.Intersect: "INTERSECT"}[type(node)]
    if left.arity != right.arity:
        raise _err(SqlSyntaxError, f"each {word} query must have the same number of columns", node)
    lp, rp = left.relation(), right.relation()
    # unify column types (an int meets a float as a float)
    lcasts: list[ScalarExpr] = []
    rcasts: list[ScalarExpr] = []
    for i, (lt, rt) in enumerate(zip(left.types, right.types, strict=True)):
        lu, ru = left.is_unknown(i), right.is_unknown(i)
        if lu and not ru and lt.scalar is not rt.scalar:  # an untyped NULL or literal
            lcasts.append(Cast(ColumnRef(i), rt.scalar))
            rcasts.append(ColumnRef(i))
        elif ru and not lu and lt.scalar is not rt.scalar:
            lcasts.append(ColumnRef(i))
            rcasts.append(Cast(ColumnRef(i), lt.scalar))
        elif lt.scalar is rt.scalar:
            lcasts.append(ColumnRef(i))
            rcasts.append(ColumnRef(i))
        elif lt.scalar.is_numeric and rt.scalar.is_numeric:
            # up the ladder int2 -> int4 -> int8 -> numeric -> float4 -> float8, as
            # PostgreSQL unifies them
            to = common_number(lt.scalar, rt.scalar)
            lcasts.append(cast_to(ColumnRef(i), lt.scalar, to))
            rcasts.append(cast_to(ColumnRef(i), rt.scalar, to))
        else:
            raise _err(
                SqlTypeError,
                f"{word} types {pg_type(lt.scalar)} and {pg_type(rt.scalar)} cannot be matched",
                node.expression,
            )
    lp = _apply_exprs(lp, lcasts, left.names)
    rp = _apply_exprs(rp, rcasts, left.names)
    distinct = node.args.get("distinct") is not False
    lp2: Plan = Distinct(lp) if distinct else lp
    rp2: Plan = Distinct(rp) if distinct else rp
    plan: Plan
    if isinstance(node, exp.Union):
        plan = Union((lp, rp))
        if distinct:
            plan = Distinct(plan)
    elif isinstance(node, exp.Except):
        plan = Threshold(Union((lp2, Negate(rp2))))
    else:
        plan = Union((lp2, Negate(Threshold(Union((lp2, Negate(rp2)))))))
    schema = _typed(plan, node)
    scope = Scope.of(
        Schema(tuple(Column(n, c.type) for n, c in zip(left.names, schema.columns, strict=True))),
        None,
    )
    return _order_limit(
        Rel(plan, scope), node, ctx, list(range(left.arity)), list(left.names), None
    )


def _apply_exprs(plan: Plan, exprs: Sequence[ScalarExpr], names: Sequence[str]) -> Plan:
    if all(isinstance(e, ColumnRef) and e.index == i for i, e in enumerate(exprs)):
        return plan
    n = _typed(plan).arity
    return Project(Map(plan, tuple(exprs), tuple(names)), tuple(range(n, n + len(exprs))))


# -- SELECT ---------------------------------------------------------------------------------


def _output_name(node: Any) -> str:
    if isinstance(node, exp.Alias):
        return ident(node.args["alias"])
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return ident(node.this)
    if isinstance(node, exp.Paren | exp.Window):
        return _output_name(node.this)
    if isinstance(node, exp.Cast):
        inner = _output_name(node.this)
        return inner if inner != "?column?" else _type_word(node)
    if isinstance(node, exp.Count | exp.Sum | exp.Min | exp.Max | exp.Avg | exp.Coalesce):
        return node.sql_name().lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
        named = _PG_FUNCTION_NAMES.get(type(node))  # type: ignore[arg-type]
        if named is not None:
            return named
        call = call_of(node)
        return call[0] if call is not None else node.sql_name().lower()
    return "?column?"


_PG_FUNCTION_NAMES: dict[type[exp.Expression], str] = {
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.GroupConcat: "string_agg",
    exp.TimestampTrunc: "date_trunc",
    exp.DateTrunc: "date_trunc",
    exp.Extract: "extract",
    exp.Greatest: "greatest",
    exp.Least: "least",
    exp.Nullif: "nullif",
    exp.Trim: "btrim",
}
"""PostgreSQL's output column name of calls sqlglot parses into classes of other names."""


def _type_word(node: Any) -> str:
    try:
        return {
            S.INT64: "int8",
            S.FLOAT64: "float8",
            S.STRING: "text",
            S.BOOL: "bool",
            S.DATE: "date",
            S.TIMESTAMP: "timestamp",
            S.NUMERIC: "numeric",
            S.INT16: "int2",
            S.INT32: "int4",
            S.FLOAT32: "float4",
        }[sql_type(node.args["to"])]
    except SqlError:
        return "?column?"


def _expand_select(items: list[Any], scope: Scope) -> list[tuple[Any, str, int | None]]:
    """Select items as (node, output name, column index for a star expansion)."""
    out: list[tuple[Any, str, int | None]] = []
    for item in items:
        if isinstance(item, exp.Star):
            cols = [i for i, c in enumerate(scope.columns) if not c.hidden]
            if not cols and not scope.columns:
                raise _err(SqlError, "SELECT * with no tables specified is not valid", item)
            out.extend((item, scope.columns[i].name, i) for i in cols)
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            q = ident(item.args["table"])
            cols = [
                i
                for i, c in enumerate(scope.columns)
                if c.qualifier is not None and c.qualifier.lower() == q.lower() and not c.outer
            ]
            if not cols:
                raise _err(UndefinedObject, f'missing FROM-clause entry for table "{q}"', item)
            out.extend((item, scope.columns[i].name, i) for i in cols)
        else:
            out.append((item, _output_name(item), None))
        if len(out) > MAX_TARGET_LIST:  # binding a wider list takes time quadratic in its width
            error = _err(
                ProgramLimitExceeded,
                f"target lists can have at most {MAX_TARGET_LIST} entries",
                item,
            )
            error.sqlstate = "54011"
            raise error
    return out


def _unalias(node: Any) -> Any:
    return node.this if isinstance(node, exp.Alias) else node


def _select(node: exp.Select, ctx: _Ctx) -> Lowered:
    for key in ("windows", "qualify", "laterals", "pivots", "locks", "sample", "connect", "into"):
        if node.args.get(key):
            raise _unsupported(
                key.upper(),
                node.args[key] if not isinstance(node.args[key], list) else node.args[key][0],
            )
    distinct_node = node.args.get("distinct")
    distinct_on = distinct_node.args.get("on") if distinct_node is not None else None
    rel = _with_outer(_from(node, dataclasses.replace(ctx, outer=None)), ctx)
    where = node.args.get("where")
    if where is not None:
        sub, subqueries = plan_subqueries(rel, [where.this], ctx)
        binder = ExprBinder(sub.scope, ctx.params, context="WHERE", subqueries=subqueries)
        plain, temporal = split_temporal(_conjuncts(where.this), binder.bind, binder.folded)
        preds = tuple(binder.predicate(c, "WHERE") for c in plain)
        plan: Plan = top_k_pushdown(Filter(sub.plan, preds)) if preds or not temporal else sub.plan
        if temporal:
            plan = TemporalFilter(plan, tuple(temporal))
        if sub is not rel:  # the subqueries' answers were for the condition only
            plan = Project(plan, tuple(range(len(rel.scope.columns))))
        rel = Rel(plan, rel.scope)
    items = _expand_select(list(node.expressions), rel.scope)
    group = node.args.get("group")
    having = node.args.get("having")
    order = node.args.get("order")
    order_items = list(order.expressions) if order is not None else []
    agg_nodes: list[exp.Expression] = []
    for it, _, star in items:
        if star is None:
            agg_nodes.extend(_find_aggs(it))
    if having is not None:
        agg_nodes.extend(_find_aggs(having.this))
    for o in order_items:
        agg_nodes.extend(_find_aggs(o.this))
    out_names = [name for _, name, _ in items]
    if group is not None or agg_nodes:
        rel, binder = _aggregate(rel, node, items, agg_nodes, ctx)
    else:
        if having is not None:
            raise _unsupported("HAVING without GROUP BY or aggregates", having)
        binder = ExprBinder(rel.scope, ctx.params, context="SELECT")
    # subqueries in SELECT, HAVING and ORDER BY: their answers as (hidden) columns of ``rel``
    sub_nodes = [it for it, _, star in items if star is None] + [o.this for o in order_items]
    rel, subqueries = plan_subqueries(
        rel, sub_nodes + ([having.this] if having is not None else []), ctx, binder
    )
    binder = dataclasses.replace(binder, scope=rel.scope, subqueries=subqueries)
    if having is not None:
        plain, temporal = split_temporal(_conjuncts(having.this), binder.bind, binder.folded)
        having_plan: Plan = rel.plan
        if plain:
            having_plan = Filter(having_plan, tuple(binder.predicate(c, "HAVING") for c in plain))
        if temporal:
            having_plan = TemporalFilter(having_plan, tuple(temporal))
        rel = Rel(having_plan, rel.scope)
    windows = [w for it, _, star in items if star is None for w in find_windows(it)]
    windows += [w for o in order_items for w in find_windows(o.this)]
    if windows:
        rel, binder = lower_windows(rel, binder, windows)
    exprs: list[ScalarExpr] = []
    unknown: list[bool] = []
    for it, _name, star in items:
        unknown.append(False)
        if star is not None:
            if binder.grouping is not None:
                te = _star_column(star, binder)
                assert te.expr is not None
                exprs.append(te.expr)
            else:
                exprs.append(ColumnRef(star))
        else:
            te = binder.bind(_unalias(it))
            unknown[-1] = te.type is None or te.literal is not None
            e, _t = binder.finish(te, _unalias(it))
            exprs.append(e)
    selected = Rel(rel.plan, rel.scope)
    low = _project_order(
        selected,
        node,
        ctx,
        exprs,
        out_names,
        binder,
        items,
        distinct_node is not None and distinct_on is None,
        distinct_on=distinct_on,
        prefix=len(ctx.outer.columns) if ctx.outer is not None else 0,
    )
    return dataclasses.replace(low, unknown=tuple(unknown))


def _star_column(i: int, binder: ExprBinder) -> TExpr:
    # under GROUP BY, * means the input's columns, each of which must be a group key
    g = binder.grouping
    assert g is not None
    in_scope = g.input_binder.scope
    for k, pos in g.keys:
        if k == ColumnRef(i):
            return binder._col(pos)
    c = in_scope.columns[i]
    raise _err(
        GroupingError,
        f'column "{c.qualifier + "." if c.qualifier else ""}{c.name}" must appear in the GROUP BY '
        "clause or be used in an aggregate function",
    )


def _aggregate(
    rel: Rel,
    node: exp.Select,
    items: list[tuple[Any, str, int | None]],
    agg_nodes: list[exp.Expression],
    ctx: _Ctx,
) -> tuple[Rel, ExprBinder]:
    in_binder = ExprBinder(rel.scope, ctx.params, context="GROUP BY")
    group = node.args.get("group")
    # a correlated body groups by the enclosing query's columns first (see _subquery)
    n_outer = len(ctx.outer.columns) if ctx.outer is not None else 0
    key_exprs: list[tuple[ScalarExpr, Any]] = [(ColumnRef(i), None) for i in range(n_outer)]
    aliases = {name: it for it, name, star in items if star is None and isinstance(it, exp.Alias)}
    for g in list(group.expressions) if group is not None else []:
        target = g
        if isinstance(g, exp.Literal) and not g.is_string:
            k = int(str(g.this))
            if not 1 <= k <= len(items):
                raise _err(
                    InvalidColumnReference, f"GROUP BY position {k} is not in select list", g
                )
            it, _, star = items[k - 1]
            if star is not None:
                key_exprs.append((ColumnRef(star), g))
                continue
            target = _unalias(it)
        elif isinstance(g, exp.Column) and not g.args.get("table"):
            name = ident(g.this)
            has_input = any(c.name == name for c in rel.scope.columns)
            if not has_input and name in aliases:
                target = _unalias(aliases[name])
        if _contains_agg(target):
            raise _err(GroupingError, "aggregate functions are not allowed in GROUP BY", g)
        e, _t = in_binder.scalar(target)
        if all(k != e for k, _ in key_exprs):
            key_exprs.append((e, g))
    n_in = len(rel.scope.columns)
    extra: list[ScalarExpr] = []

    def column_for(e: ScalarExpr) -> int:
        if isinstance(e, ColumnRef):
            return e.index
        for k, x in enumerate(extra):
            if x == e:
                return n_in + k
        extra.append(e)
        return n_in + len(extra) - 1

    key_positions = [column_for(e) for e, _ in key_exprs]
    aggregates: list[Aggregate] = []
    agg_pos: dict[int, int] = {}
    narrow: dict[int, ScalarType] = {}  # id(aggregate node) -> the type its result narrows to
    seen: list[tuple[Aggregate, int]] = []
    arg_binder = ExprBinder(rel.scope, ctx.params, context="aggregate function calls")
    for a in agg_nodes:
        func = agg_func(a)
        if func is None:
            word = a.name if isinstance(a, exp.Anonymous) else str(a.key).lower()
            if isinstance(a, exp.Func) and not isinstance(a, exp.Anonymous):
                word = a.sql_name().lower()
            why = " (tidegate has no array types)" if "array" in str(word).lower() else ""
            raise _unsupported(f"aggregate {word}(){why}", a)
        separator: str | None = None
        if isinstance(a, exp.Anonymous):
            if len(a.expressions) != 1:
                raise _err(UndefinedFunction, f"function {a.name} takes one argument", a)
            arg = a.expressions[0]
        else:
            arg = a.this
        if func is AggFunc.STRING_AGG:
            sep = a.args.get("separator")
            if a.args.get("order") is not None or isinstance(arg, exp.Order):
                raise _unsupported("string_agg(... ORDER BY ...)", a)
            if not (isinstance(sep, exp.Literal) and sep.is_string):
                raise _unsupported("string_agg with a separator other than a string constant", a)
            separator = str(sep.this)
        distinct = False
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise _unsupported("DISTINCT over several arguments", arg)
            distinct, arg = True, arg.expressions[0]
        if a.args.get("expressions") and not isinstance(a, exp.Anonymous):
            raise _err(
                UndefinedFunction,
                f"function {func.value}() with {1 + len(a.args['expressions'])} arguments "
                "does not exist",
                a,
            )
        if arg is None:
            raise _err(
                WrongObjectType,
                f"{func.value}(*) must be used to call a parameterless aggregate function",
                a,
            )
        if isinstance(arg, exp.Star):
            if func is not AggFunc.COUNT:
                raise _err(SqlError, f"{func.value}(*) is not valid", a)
            agg = Aggregate(AggFunc.COUNT, None, False)
        else:
            if _contains_agg(arg):
                raise _err(GroupingError, "aggregate function calls cannot be nested", arg)
            hint = {AggFunc.BOOL_AND: S.BOOL, AggFunc.BOOL_OR: S.BOOL}.get(func)
            e, t = arg_binder.scalar(arg, hint)
            refs = _refs(e)
            if n_outer and refs and max(refs) < n_outer:
                # PostgreSQL makes it an aggregate of the enclosing query: refused, never
                # answered differently
                raise _unsupported(
                    "an aggregate in a subquery over only the enclosing query's columns", a
                )
            if (
                (func in (AggFunc.SUM, AggFunc.AVG) and not t.scalar.is_numeric)
                or (func in (AggFunc.MIN, AggFunc.MAX) and t.scalar is S.BOOL)
                or (func in (AggFunc.BOOL_AND, AggFunc.BOOL_OR) and t.scalar is not S.BOOL)
                or (func is AggFunc.STRING_AGG and t.scalar is not S.STRING)
            ):
                raise _err(
                    UndefinedFunction,
                    f"function {func.value}({pg_type(t.scalar)}) does not exist",
                    a,
                )
            if func in (AggFunc.SUM, AggFunc.AVG) and t.scalar.is_narrow:
                # PostgreSQL sums smallints and integers as bigints, and reals as reals
                e = cast_to(e, t.scalar, t.scalar.wide)
                if func is AggFunc.SUM and t.scalar is S.FLOAT32:
                    narrow[id(a)] = S.FLOAT32
            agg = Aggregate(func, column_for(e), distinct, separator)
        for existing, pos in seen:
            if existing == agg:
                agg_pos[id(a)] = pos
                break
        else:
            pos = len(key_exprs) + len(aggregates)
            aggregates.append(agg)
            seen.append((agg, pos))
            agg_pos[id(a)] = pos
    plan = rel.plan
    if extra:
        plan = Map(plan, tuple(extra), tuple(f"?expr{i}" for i in range(len(extra))))
    reduce: Plan = Reduce(plan, tuple(key_positions), tuple(aggregates))
    schema = _typed(reduce, node)
    if len(key_exprs) == n_outer:
        outer_keys = ctx.outer.plan if ctx.outer else None
        reduce = _with_default_row(reduce, schema, outer_keys, n_outer)
        schema = _typed(reduce, node)
    cols = []
    for i, c in enumerate(schema.columns):
        if i < n_outer:
            cols.append(dataclasses.replace(rel.scope.columns[i], type=c.type))
        elif i < len(key_exprs) and isinstance(key_exprs[i][0], ColumnRef):
            src = rel.scope.columns[key_exprs[i][0].index]  # type: ignore[union-attr]
            cols.append(ScopeColumn(src.qualifier, src.name, c.type))
        else:
            cols.append(ScopeColumn(None, f"?agg{i}", c.type, hidden=True))
    out_scope = Scope(tuple(cols))
    grouping = _Grouping([(e, i) for i, (e, _) in enumerate(key_exprs)], agg_pos, in_binder, narrow)
    return Rel(reduce, out_scope), ExprBinder(out_scope, ctx.params, grouping, "SELECT")


def _with_default_row(reduce: Plan, schema: Schema, keys: Plan | None = None, k: int = 0) -> Plan:
    """A global aggregate's answer over no rows: ``count`` 0, the others NULL (in a correlated
    body, for every row of ``keys``, the enclosing query's ``k`` columns, that has no group)."""
    default: list[Any] = []
    cols = []
    assert isinstance(reduce, Reduce)
    for a, c in zip(reduce.aggregates, schema.columns[k:], strict=True):
        if a.func is AggFunc.COUNT:
            default.append(0)
        else:
            default.append(None)
        cols.append(Column(c.name, ColumnType(c.type.scalar, True)))
    dschema = Schema(tuple(cols))
    const = Constant(((tuple(default), 1),), dschema)
    present = Project(reduce, tuple(range(k)))
    if keys is None:
        return Union((reduce, const, Negate(Join((const, present), ()))))
    return Union((reduce, Join((keys, const), ()), Negate(Join((present, const), ()))))


def _project_order(
    rel: Rel,
    node: Any,
    ctx: _Ctx,
    exprs: list[ScalarExpr],
    names: list[str],
    binder: ExprBinder,
    items: list[tuple[Any, str, int | None]],
    distinct: bool,
    set_op: bool = False,
    distinct_on: Any = None,
    prefix: int = 0,
) -> Lowered:
    """The select list ``exprs`` over ``rel``, ordered and limited; ``prefix``: a correlated
    body's output starts with the enclosing query's columns, ``rel``'s first ``prefix``."""
    order = node.args.get("order")
    order_specs: list[tuple[ScalarExpr | int, bool, bool, Any]] = []
    for o in list(order.expressions) if order is not None else []:
        target = o.this
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        nulls_last = not nulls_first if nulls_first is not None else not desc
        # ORDER BY 2, ORDER BY an output name (SQL92), else an expression over the input (SQL99)
        if isinstance(target, exp.Literal) and not target.is_string:
            text = str(target.this)
            if not text.isdigit():
                raise _err(SqlSyntaxError, "non-integer constant in ORDER BY", target)
            k = int(text)
            if not 1 <= k <= len(exprs):
                raise _err(
                    InvalidColumnReference, f"ORDER BY position {k} is not in select list", target
                )
            order_specs.append((k - 1, desc, nulls_last, o))
            continue
        if isinstance(target, exp.Column) and not target.args.get("table"):
            name = ident(target.this)
            matches = [i for i, n in enumerate(names) if n == name]
            if matches:
                if any(exprs[i] != exprs[matches[0]] for i in matches[1:]):
                    raise _err(AmbiguousColumn, f'ORDER BY "{name}" is ambiguous', target)
                order_specs.append((matches[0], desc, nulls_last, o))
                continue
        if set_op:
            if isinstance(target, exp.Column) and not target.args.get("table"):
                raise _err(UndefinedColumn, f'column "{ident(target.this)}" does not exist', target)
            if not isinstance(target, exp.Column):
                raise _err(
                    UnsupportedSql,
                    "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
                    target,
                    hint="Only result column names can be used, not expressions or functions.",
                )
        e, _t = binder.scalar(target)
        hit = [i for i, x in enumerate(exprs) if x == e]
        if hit:
            order_specs.append((hit[0], desc, nulls_last, o))
        elif distinct:
            raise _err(
                InvalidColumnReference,
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                target,
            )
        else:
            order_specs.append((e, desc, nulls_last, o))
    if prefix:
        exprs = [ColumnRef(i) for i in range(prefix)] + exprs
        names = [f"?outer{i}" for i in range(prefix)] + names
        order_specs = [
            (s[0] + prefix if isinstance(s[0], int) else s[0], *s[1:]) for s in order_specs
        ]
    hidden = [s[0] for s in order_specs if not isinstance(s[0], int)]
    all_exprs = exprs + [h for h in hidden if not isinstance(h, int)]
    hidden_names = [f"?order{i}" for i in range(len(hidden))]
    if distinct_on is not None:  # its expressions as hidden columns too: the TopK's key
        ordered = [exprs[s[0]] if isinstance(s[0], int) else s[0] for s in order_specs]
        on_exprs = distinct_on_exprs(distinct_on, exprs, names, ordered, binder)
        on_key = tuple(range(len(all_exprs), len(all_exprs) + len(on_exprs)))
        all_exprs += on_exprs
        hidden_names += [f"?on{i}" for i in range(len(on_exprs))]
    n = len(rel.scope.columns)
    if all(isinstance(e, ColumnRef) for e in all_exprs):
        cols = tuple(e.index for e in all_exprs)  # type: ignore[union-attr]
        identity = cols == tuple(range(n))
        plan: Plan = rel.plan if identity else Project(rel.plan, cols)
    else:
        map_names = tuple(names) + tuple(hidden_names)
        plan = Project(
            Map(rel.plan, tuple(all_exprs), map_names), tuple(range(n, n + len(all_exprs)))
        )
    plan = _rename_prefix(plan, names)
    if distinct:
        plan = Distinct(plan)
    columns = []
    k = 0
    for s in order_specs:
        if isinstance(s[0], int):
            columns.append(ColumnOrder(s[0], s[1], s[2]))
        else:
            columns.append(ColumnOrder(len(exprs) + k, s[1], s[2]))
            k += 1
    if distinct_on is not None:
        plan = TopK(plan, on_key, tuple(columns), 1)
    schema = _typed(plan, node)
    limit = _limit_value(node.args.get("limit"), ctx, "LIMIT")
    offset = _limit_value(node.args.get("offset"), ctx, "OFFSET") or 0
    types = schema.types[: len(exprs)]
    return Lowered(plan, tuple(names), tuple(types), tuple(columns), limit, offset)


def _with_outer(rel: Rel, ctx: _Ctx) -> Rel:
    """In a correlated subquery's body: ``rel`` with the enclosing query's columns in front."""
    if ctx.outer is None:
        return rel
    return Rel(Join((ctx.outer.plan, rel.plan), ()), Scope(ctx.outer.columns + rel.scope.columns))


def _rename_prefix(plan: Plan, names: Sequence[str]) -> Plan:
    schema = _typed(plan)
    full = list(names) + list(schema.names[len(names) :])
    return _renamed(plan, full)


def _order_limit(
    rel: Rel,
    node: Any,
    ctx: _Ctx,
    positions: list[int],
    names: list[str],
    binder: ExprBinder | None,
) -> Lowered:
    exprs: list[ScalarExpr] = [ColumnRef(i) for i in positions]
    b = binder or ExprBinder(rel.scope, ctx.params, context="ORDER BY")
    return _project_order(rel, node, ctx, exprs, names, b, [], False, set_op=True)


@with_enough_frames
def bind_scalar(
    node: Any, schema: Schema, qualifier: str | None, params: Sequence[Any] = (), context: str = ""
) -> tuple[ScalarExpr, ColumnType]:
    """Bind a scalar expression over the columns of one relation (``UPDATE ... SET``, ``WHERE``)."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context=context)
    return binder.scalar(node)


@with_enough_frames
def bind_predicate(
    node: Any, schema: Schema, qualifier: str | None, params: Sequence[Any] = ()
) -> ScalarExpr:
    """Bind a ``WHERE`` condition over the columns of one relation."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context="WHERE")
    return binder.predicate(node, "WHERE")


@with_enough_frames
def coerce_to(
    node: Any,
    schema: Schema,
    qualifier: str | None,
    to: ScalarType,
    params: Sequence[Any],
    what: str,
) -> ScalarExpr:
    """Bind ``node`` and convert it to ``to`` as an assignment does [SqlTypeError]."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context=what)
    return binder.folded(_coerce(binder.bind(node), to, node, what), node)
