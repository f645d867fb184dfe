"""Window functions, ``DISTINCT ON`` and the Top-K idiom, lowered to the plan IR.

* ``f(...) OVER (PARTITION BY p ORDER BY o [frame])`` in a ``SELECT`` list
  or ``ORDER BY``: the arguments, partition and order expressions are
  computed into columns (a ``Map``), then one :class:`~tidegate.spec.plan.Window`
  per distinct ``(PARTITION BY, ORDER BY)`` appends the functions' columns
  (after ``GROUP BY``/``HAVING``, before ``DISTINCT`` and the final ``ORDER
  BY``, as in SQL). The binder then reads each call as its column.
* ``SELECT DISTINCT ON (e, ...) ... ORDER BY ...``: a ``TopK`` grouped by the
  ``DISTINCT ON`` expressions, ordered by the ``ORDER BY``, limit 1.
* The Top-K idiom, ``WHERE rn <= k`` over a ``ROW_NUMBER() OVER (PARTITION BY
  ... ORDER BY ...) AS rn`` of a subquery: the window's input becomes a
  ``TopK`` (limit ``k``) of the same partition and order, so only ``k`` rows
  per partition are kept and numbered. The window is kept over it (its
  row numbers are the same, the ``TopK`` keeps exactly the first ``k`` slots),
  and so is the filter.

Refused (``UnsupportedSql``): named windows (``WINDOW w AS``), ``GROUPS``
frames, ``EXCLUDE``, ``DISTINCT`` in a window aggregate, ``RANGE`` offsets on
a non-numeric order, ``ntile``, ``nth_value``, ``percent_rank``,
``cume_dist``, ``IGNORE NULLS`` and window functions in ``WHERE``, ``GROUP BY``
and ``HAVING`` (PostgreSQL refuses those too).
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ..errors import InvalidColumnReference, SqlError, SqlSyntaxError, UndefinedFunction
from ..plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    ColumnRef,
    ColumnType,
    Filter,
    Literal,
    Map,
    Plan,
    Project,
    ScalarExpr,
    TopK,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
)
from ..protocol.types import ColumnOrder
from ._binder import ExprBinder, agg_func
from ._common import S, _err, _typed, _unsupported, ident, pg_type
from ._scope import Rel, Scope, ScopeColumn
from ._texpr import _coerce, cast_to

__all__ = ["distinct_on_exprs", "find_windows", "lower_windows", "order_spec", "top_k_pushdown"]


def _werr(message: str, node: Any = None) -> SqlError:
    """PostgreSQL's windowing_error (42P20)."""
    e = _err(SqlError, message, node)
    e.sqlstate = "42P20"
    return e


_RANKING = {
    exp.RowNumber: WindowFuncKind.ROW_NUMBER,
    exp.Rank: WindowFuncKind.RANK,
    exp.DenseRank: WindowFuncKind.DENSE_RANK,
}
_VALUE = {
    exp.Lag: WindowFuncKind.LAG,
    exp.Lead: WindowFuncKind.LEAD,
    exp.FirstValue: WindowFuncKind.FIRST_VALUE,
    exp.LastValue: WindowFuncKind.LAST_VALUE,
}
_NAMED = {
    "row_number": WindowFuncKind.ROW_NUMBER,
    "rank": WindowFuncKind.RANK,
    "dense_rank": WindowFuncKind.DENSE_RANK,
}


def find_windows(node: Any) -> list[exp.Window]:
    """The window calls in ``node`` (not inside subqueries)."""
    out: list[exp.Window] = []
    if not isinstance(node, exp.Expression):
        return out
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, exp.Window):
            out.append(n)
            continue
        if isinstance(n, exp.Subquery | exp.Select):
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


def order_spec(o: Any) -> tuple[bool, bool]:
    """``(desc, nulls_last)`` of an ``Ordered`` item, PostgreSQL's defaults (NULLs sort high)."""
    desc = bool(o.args.get("desc"))
    nulls_first = o.args.get("nulls_first")
    return desc, (not nulls_first if nulls_first is not None else not desc)


def lower_windows(
    rel: Rel, binder: ExprBinder, windows: list[exp.Window]
) -> tuple[Rel, ExprBinder]:
    """``rel`` with one column per window call appended (and the columns they need); a binder
    over the result that reads each call as its column."""
    n_in = len(rel.scope.columns)
    extra: list[ScalarExpr] = []
    extra_types: list[ColumnType] = []

    def column_for(e: ScalarExpr, t: ColumnType) -> int:
        if isinstance(e, ColumnRef):
            return e.index
        for k, x in enumerate(extra):
            if x == e:
                return n_in + k
        extra.append(e)
        extra_types.append(t)
        return n_in + len(extra) - 1

    specs: dict[tuple[tuple[int, ...], tuple[ColumnOrder, ...]], list[tuple[int, WindowFunc]]] = {}
    for w in windows:
        if w.args.get("alias") is not None:
            raise _unsupported("named windows (OVER name)", w)
        part = tuple(column_for(*binder.scalar(p)) for p in w.args.get("partition_by") or [])
        order: list[ColumnOrder] = []
        order_node = w.args.get("order")
        for o in list(order_node.expressions) if order_node is not None else []:
            desc, nulls_last = order_spec(o)
            if isinstance(o.this, exp.Literal) and not o.this.is_string:
                continue  # a constant orders nothing (PostgreSQL takes no position here)
            order.append(ColumnOrder(column_for(*binder.scalar(o.this)), desc, nulls_last))
        types = [c.type for c in rel.scope.columns] + extra_types
        func = _window_func(w, binder, column_for, tuple(order), types)
        specs.setdefault((part, tuple(order)), []).append((id(w), func))
    plan: Plan = rel.plan
    cols = list(rel.scope.columns)
    if extra:
        plan = Map(plan, tuple(extra), tuple(f"?window_arg{i}" for i in range(len(extra))))
        cols.extend(
            ScopeColumn(None, f"?window_arg{i}", t, hidden=True) for i, t in enumerate(extra_types)
        )
    positions: dict[int, int] = {}
    # windows made of prefix-only functions last (outermost), where the Top-K idiom finds them
    for (part, w_order), funcs in sorted(
        specs.items(), key=lambda kv: all(_prefix_only(f) for _, f in kv[1])
    ):
        base = len(cols)
        plan = Window(plan, part, w_order, tuple(f for _, f in funcs))
        schema = _typed(plan)
        for k, (wid, _) in enumerate(funcs):
            positions[wid] = base + k
            cols.append(
                ScopeColumn(None, f"?window{base + k}", schema.columns[base + k].type, True)
            )
    scope = Scope(tuple(cols))
    out = dataclasses.replace(binder, scope=scope, windows={**binder.windows, **positions})
    return Rel(plan, scope), out


def _window_func(
    w: exp.Window,
    binder: ExprBinder,
    column_for: Any,
    order: tuple[ColumnOrder, ...],
    types: list[ColumnType],
) -> WindowFunc:
    fn = w.this
    if isinstance(fn, exp.IgnoreNulls | exp.RespectNulls):
        raise _unsupported("IGNORE NULLS / RESPECT NULLS", fn)
    frame = _frame(w.args.get("spec"), binder, order, types)
    kind = _RANKING.get(type(fn))
    if kind is None and isinstance(fn, exp.Anonymous):
        kind = _NAMED.get(str(fn.name).lower())
    if kind is not None:
        if isinstance(fn, exp.Anonymous) and fn.expressions:
            raise _err(UndefinedFunction, f"function {fn.name}() takes no arguments", fn)
        return WindowFunc(kind)
    kind = _VALUE.get(type(fn))
    if kind is not None:
        col_e, col_t = binder.scalar(fn.this)
        column = column_for(col_e, col_t)
        if kind in (WindowFuncKind.LAG, WindowFuncKind.LEAD):
            offset = 1
            off_node = fn.args.get("offset")
            if off_node is not None:
                offset = _int_constant(off_node, binder, f"{kind.value}() offset")
            default = None
            d_node = fn.args.get("default")
            if d_node is not None:
                te = binder.bind(d_node)
                d_e = binder.folded(_coerce(te, col_t.scalar, d_node, "lag/lead default"), d_node)
                default = column_for(d_e, ColumnType(col_t.scalar, True))
            return WindowFunc(kind, column, offset, default)
        return WindowFunc(kind, column, frame=frame)
    func = agg_func(fn)
    if func is not None:
        return WindowFunc(
            WindowFuncKind.AGGREGATE,
            aggregate=_aggregate(fn, func, binder, column_for),
            frame=frame,
        )
    if isinstance(fn, exp.Func) and not isinstance(fn, exp.Anonymous):
        word = fn.sql_name().lower()
    else:
        word = str(getattr(fn, "name", fn)).lower()
    if word in ("ntile", "nth_value", "percent_rank", "cume_dist"):
        raise _unsupported(f"window function {word}()", fn)
    raise _werr(f"OVER specified, but {word} is not a window function", fn)


def _aggregate(fn: Any, func: AggFunc, binder: ExprBinder, column_for: Any) -> Aggregate:
    if isinstance(fn, exp.Anonymous):
        if len(fn.expressions) != 1:
            raise _err(UndefinedFunction, f"function {fn.name} takes one argument", fn)
        arg = fn.expressions[0]
    else:
        arg = fn.this
    if isinstance(arg, exp.Distinct):
        raise _unsupported("DISTINCT in a window aggregate", fn)
    if fn.args.get("expressions") and not isinstance(fn, exp.Anonymous):
        raise _unsupported(f"{func.value}() with several arguments over a window", fn)
    separator: str | None = None
    if func is AggFunc.STRING_AGG:
        sep = fn.args.get("separator")
        if not (isinstance(sep, exp.Literal) and sep.is_string):
            raise _unsupported("string_agg with a separator other than a string constant", fn)
        separator = str(sep.this)
    if arg is None or isinstance(arg, exp.Star):
        if func is not AggFunc.COUNT:
            raise _err(SqlError, f"{func.value}(*) is not valid", fn)
        return Aggregate(AggFunc.COUNT)
    hint = {AggFunc.BOOL_AND: S.BOOL, AggFunc.BOOL_OR: S.BOOL}.get(func)
    e, t = binder.scalar(arg, hint)
    if (
        (func in (AggFunc.SUM, AggFunc.AVG) and not t.scalar.is_numeric)
        or (func in (AggFunc.MIN, AggFunc.MAX) and t.scalar is S.BOOL)
        or (func in (AggFunc.BOOL_AND, AggFunc.BOOL_OR) and t.scalar is not S.BOOL)
        or (func is AggFunc.STRING_AGG and t.scalar is not S.STRING)
    ):
        raise _err(
            UndefinedFunction, f"function {func.value}({pg_type(t.scalar)}) does not exist", fn
        )
    if func in (AggFunc.SUM, AggFunc.AVG) and t.scalar.is_narrow:
        # summed as its wide type (a window's sum of reals is a double precision here)
        e = cast_to(e, t.scalar, t.scalar.wide)
        t = ColumnType(t.scalar.wide, t.nullable)
    return Aggregate(func, column_for(e, t), False, separator)


def _frame(
    spec: Any, binder: ExprBinder, order: tuple[ColumnOrder, ...], types: list[ColumnType]
) -> WindowFrame:
    if spec is None:
        return WindowFrame()
    mode = str(spec.args.get("kind") or "").lower()
    if mode == "groups":
        raise _unsupported("GROUPS frames", spec)
    if spec.args.get("exclude") is not None:
        raise _unsupported("EXCLUDE in a window frame", spec)
    is_range = mode == "range"
    start = _bound(spec.args.get("start"), spec.args.get("start_side"), binder, is_range, spec)
    end_node = spec.args.get("end")
    end = (
        WindowBound(WindowBoundKind.CURRENT_ROW)
        if end_node is None
        else _bound(end_node, spec.args.get("end_side"), binder, is_range, spec)
    )
    if start.kind is WindowBoundKind.UNBOUNDED_FOLLOWING:
        raise _werr("frame start cannot be UNBOUNDED FOLLOWING", spec)
    if end.kind is WindowBoundKind.UNBOUNDED_PRECEDING:
        raise _werr("frame end cannot be UNBOUNDED PRECEDING", spec)
    kinds = list(WindowBoundKind)
    if kinds.index(start.kind) > kinds.index(end.kind):
        if start.kind is WindowBoundKind.CURRENT_ROW:
            msg = "frame starting from current row cannot have preceding rows"
        else:
            msg = "frame starting from following row cannot have preceding rows"
        raise _werr(msg, spec)
    if is_range and any(
        b.kind in (WindowBoundKind.PRECEDING, WindowBoundKind.FOLLOWING) for b in (start, end)
    ):
        if len(order) != 1:
            raise _werr(
                "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column", spec
            )
        t = types[order[0].column].scalar
        if not t.is_numeric:
            raise _unsupported(f"RANGE offsets over a {pg_type(t)} ORDER BY column", spec)
    return WindowFrame(is_range, start, end)


def _bound(node: Any, side: Any, binder: ExprBinder, is_range: bool, spec: Any) -> WindowBound:
    side_word = str(side or "").lower()
    if isinstance(node, str):
        word = node.upper()
        if word == "CURRENT ROW":
            return WindowBound(WindowBoundKind.CURRENT_ROW)
        if word == "UNBOUNDED":
            if side_word == "following":
                return WindowBound(WindowBoundKind.UNBOUNDED_FOLLOWING)
            return WindowBound(WindowBoundKind.UNBOUNDED_PRECEDING)
        raise _unsupported(f"window frame bound {node}", spec)
    kind = WindowBoundKind.FOLLOWING if side_word == "following" else WindowBoundKind.PRECEDING
    te = binder.bind(node)
    if te.expr is None:
        raise _werr("frame starting offset must not be null", node)
    value = _constant(te, binder, node)
    if isinstance(value, Decimal):  # a decimal literal: an offset is an int or a float
        exact = value
        value = int(exact) if exact == exact.to_integral_value() else float(exact)
        if Decimal(value) != exact:
            raise _unsupported("a window frame offset a double precision cannot hold", node)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _unsupported("a window frame offset that is not a number", node)
    if value < 0:
        raise _werr("frame starting offset must not be negative", node)
    if not is_range and not isinstance(value, int):
        raise _err(SqlSyntaxError, "ROWS frame offsets must be integers", node)
    return WindowBound(kind, value)


def _constant(te: Any, binder: ExprBinder, node: Any) -> Any:
    expr = binder.folded(te.expr, node)
    if not isinstance(expr, Literal):
        raise _unsupported("a window offset that is not a constant", node)
    return expr.value


def _int_constant(node: Any, binder: ExprBinder, what: str) -> int:
    te = binder.bind(node)
    if te.expr is None:
        raise _unsupported(f"a NULL {what}", node)
    value = _constant(te, binder, node)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _unsupported(f"a {what} that is not an integer constant", node)
    return int(value)


def _prefix_only(f: WindowFunc) -> bool:
    """Whether ``f`` of a row depends on that row and the rows before it only."""
    k = f.kind
    if k in (WindowFuncKind.ROW_NUMBER, WindowFuncKind.RANK, WindowFuncKind.DENSE_RANK):
        return True
    if k is WindowFuncKind.LAG:
        return f.offset >= 0
    if k is WindowFuncKind.LEAD:
        return f.offset <= 0
    return not f.frame.range and f.frame.end.kind in (
        WindowBoundKind.UNBOUNDED_PRECEDING,
        WindowBoundKind.PRECEDING,
        WindowBoundKind.CURRENT_ROW,
    )


# -- DISTINCT ON ----------------------------------------------------------------------------


def distinct_on_exprs(
    on: Any,
    exprs: list[ScalarExpr],
    names: list[str],
    ordered: list[ScalarExpr],
    binder: ExprBinder,
) -> list[ScalarExpr]:
    """The ``DISTINCT ON`` expressions (a position or an output name as in ``ORDER BY``),
    checked against the ``ORDER BY`` (``ordered``, its expressions) as PostgreSQL checks them:
    they must be its leftmost items, in any order."""
    nodes = list(on.expressions) if isinstance(on, exp.Tuple) else [on]
    out: list[ScalarExpr] = []
    for n in nodes:
        if isinstance(n, exp.Literal) and not n.is_string:
            k = int(str(n.this))
            if not 1 <= k <= len(exprs):
                raise _err(
                    InvalidColumnReference, f"DISTINCT ON position {k} is not in select list", n
                )
            out.append(exprs[k - 1])
            continue
        if isinstance(n, exp.Column) and not n.args.get("table") and ident(n.this) in names:
            out.append(exprs[names.index(ident(n.this))])
            continue
        out.append(binder.scalar(n)[0])
    covered: list[ScalarExpr] = []
    skipped = False
    for o in ordered:
        if o in out:
            if skipped:
                break
            covered.append(o)
        else:
            skipped = True
    else:
        if not skipped or all(e in covered for e in out):
            return out
    raise _err(
        InvalidColumnReference,
        "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
        on,
    )


# -- the Top-K idiom ------------------------------------------------------------------------


def top_k_pushdown(plan: Filter) -> Plan:
    """``plan`` with a ``TopK`` under the ``ROW_NUMBER`` window its ``rn <= k`` bounds, if any.

    The filter's input is followed through ``Project``s and renaming ``Map``s
    to a ``Window`` whose functions depend only on each row and those before
    it; a predicate ``rn <= k``, ``rn < k``, ``rn = k`` (``k`` an integer
    constant, or mirrored) on one of its ``row_number`` columns bounds how many
    rows per partition can pass, so the window's input is cut to that many by
    a ``TopK``.
    """
    path: list[Project | Map] = []
    node: Plan = plan.input
    while isinstance(node, Project | Map):
        path.append(node)
        node = node.input
    if not isinstance(node, Window) or not all(_prefix_only(f) for f in node.funcs):
        return plan
    # map the filter's columns down to the window's (None: computed above it)
    cols: list[int | None] = list(range(_typed(plan.input).arity))
    for p in path:
        if isinstance(p, Project):
            cols = [None if c is None else p.columns[c] for c in cols]
        else:
            n_in = _typed(p.input).arity
            refs = [e.index if isinstance(e, ColumnRef) else None for e in p.exprs]
            cols = [
                None if c is None else (c if c < n_in else _through(refs, c - n_in, n_in))
                for c in cols
            ]
    arity = _typed(node.input).arity
    rn_cols = {arity + k for k, f in enumerate(node.funcs) if f.kind is WindowFuncKind.ROW_NUMBER}
    limit: int | None = None
    for pred in plan.predicates:
        bound = _row_number_bound(pred, cols, rn_cols)
        if bound is not None:
            limit = bound if limit is None else min(limit, bound)
    if limit is None:
        return plan
    cut = TopK(node.input, node.partition_key, node.order_by, limit)
    new: Plan = dataclasses.replace(node, input=cut)
    for p in reversed(path):
        new = dataclasses.replace(p, input=new)
    return dataclasses.replace(plan, input=new)


def _through(refs: list[int | None], k: int, n_in: int) -> int | None:
    """The input column a renaming ``Map``'s ``k``-th expression is (None: computed)."""
    ref = refs[k]
    # a Map's expression may also read the columns appended before it
    while ref is not None and ref >= n_in:
        ref = refs[ref - n_in]
    return ref


def _row_number_bound(pred: ScalarExpr, cols: list[int | None], rn_cols: set[int]) -> int | None:
    if not isinstance(pred, CallBinary):
        return None
    f, a, b = pred.func, pred.left, pred.right
    flip = {
        BinaryFunc.GE: BinaryFunc.LE,
        BinaryFunc.GT: BinaryFunc.LT,
        BinaryFunc.EQ: BinaryFunc.EQ,
    }
    if isinstance(a, Literal) and isinstance(b, ColumnRef) and f in flip:
        f, a, b = flip[f], b, a
    if not (isinstance(a, ColumnRef) and isinstance(b, Literal)):
        return None
    if not 0 <= a.index < len(cols) or cols[a.index] not in rn_cols:
        return None
    if isinstance(b.value, bool) or not isinstance(b.value, int):
        return None
    k = int(b.value)
    if f is BinaryFunc.LE or f is BinaryFunc.EQ:
        return max(k, 0)
    if f is BinaryFunc.LT:
        return max(k - 1, 0)
    return None
