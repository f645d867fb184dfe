"""EXPLAIN: a plan rendered as an indented text tree, one operator per line.

Columns are shown as ``#i{name}`` using the input schema's names, e.g.::

    Reduce group=[#0{customer}] aggs=[count(*), sum(#1{amount})]
      Filter (#1{amount} > 10)
        Get u1 (customer: string?, amount: int64)
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InvalidPlan, PlanError
from ..protocol.types import ColumnOrder
from .relation import (
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
    Threshold,
    TopK,
    Union,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFuncKind,
    children,
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
    VariadicFunc,
)
from .schema import Schema
from .typecheck import typecheck

__all__ = ["explain", "expr_text"]

_INFIX = {
    BinaryFunc.ADD: "+",
    BinaryFunc.SUB: "-",
    BinaryFunc.MUL: "*",
    BinaryFunc.DIV: "/",
    BinaryFunc.MOD: "%",
    BinaryFunc.EQ: "=",
    BinaryFunc.NE: "!=",
    BinaryFunc.LT: "<",
    BinaryFunc.LE: "<=",
    BinaryFunc.GT: ">",
    BinaryFunc.GE: ">=",
    BinaryFunc.LIKE: "LIKE",
    BinaryFunc.ILIKE: "ILIKE",
    BinaryFunc.CONCAT: "||",
    BinaryFunc.ADD_MS: "+ms",
    BinaryFunc.SUB_MS: "-ms",
    BinaryFunc.ADD_US: "+us",
    BinaryFunc.SUB_US: "-us",
    BinaryFunc.REGEX_MATCH: "~",
    BinaryFunc.REGEX_IMATCH: "~*",
}


def _col(i: int, names: tuple[str, ...] | None) -> str:
    if names is not None and 0 <= i < len(names):
        return f"#{i}{{{names[i]}}}"
    return f"#{i}"


def expr_text(e: ScalarExpr, names: tuple[str, ...] | None = None) -> str:
    """A scalar expression as SQL-like text."""
    if isinstance(e, ColumnRef):
        return _col(e.index, names)
    if isinstance(e, Literal):
        return "NULL" if e.value is None else repr(e.value)
    if isinstance(e, CallUnary):
        return f"{e.func.value}({expr_text(e.expr, names)})"
    if isinstance(e, CallBinary):
        op = _INFIX.get(e.func)
        left, right = expr_text(e.left, names), expr_text(e.right, names)
        return f"({left} {op} {right})" if op else f"{e.func.value}({left}, {right})"
    if isinstance(e, CallVariadic):
        args = [expr_text(x, names) for x in e.exprs]
        if e.func in (VariadicFunc.LIKE_ESCAPE, VariadicFunc.ILIKE_ESCAPE) and len(args) == 3:
            op = "LIKE" if e.func is VariadicFunc.LIKE_ESCAPE else "ILIKE"
            return f"({args[0]} {op} {args[1]} ESCAPE {args[2]})"
        if e.func is VariadicFunc.EXTRACT and len(args) == 2:
            return f"extract({args[0]} FROM {args[1]})"
        return f"{e.func.value}({', '.join(args)})"
    if isinstance(e, If):
        c, t, f = (expr_text(x, names) for x in (e.cond, e.then, e.els))
        return f"if({c}, {t}, {f})"
    if isinstance(e, Cast):
        return f"{expr_text(e.expr, names)}::{e.to.value}"
    raise InvalidPlan(f"not a scalar expression: {e!r}")


def _names(plan: Plan, lets: Mapping[str, Schema]) -> tuple[str, ...] | None:
    try:
        return typecheck(plan, None, lets).names
    except PlanError:
        return None


def _line(plan: Plan, lets: Mapping[str, Schema]) -> str:
    if isinstance(plan, Get):
        return f"Get {plan.id} {plan.schema}"
    if isinstance(plan, Constant):
        return f"Constant {len(plan.rows)} rows {plan.schema}"
    if isinstance(plan, LetRef):
        return f"LetRef {plan.name}"
    if isinstance(plan, Let):
        return f"Let {plan.name}"
    if isinstance(plan, Union):
        return "Union"
    if isinstance(plan, Join):
        joined: list[str] = []
        for p in plan.inputs:
            part = _names(p, lets)
            joined.extend(part if part is not None else ())
        eqs = ", ".join("=".join(_col(i, tuple(joined)) for i in cls) for cls in plan.equivalences)
        kind = "" if plan.kind is JoinKind.INNER else f" {plan.kind.value}"
        return f"Join{kind} on=[{eqs}]"
    names = _names(plan.input, lets)
    if isinstance(plan, Map):
        parts: list[str] = []
        cur = list(names) if names is not None else None
        for e, out_name in zip(plan.exprs, plan.names, strict=False):
            parts.append(f"{out_name} := {expr_text(e, tuple(cur) if cur is not None else None)}")
            if cur is not None:
                cur.append(out_name)
        return f"Map {', '.join(parts)}"
    if isinstance(plan, Filter):
        return f"Filter {' AND '.join(expr_text(p, names) for p in plan.predicates)}"
    if isinstance(plan, TemporalFilter):
        preds = (f"mz_now() {op.value} {expr_text(e, names)}" for op, e in plan.predicates)
        return f"TemporalFilter {' AND '.join(preds)}"
    if isinstance(plan, Project):
        return f"Project [{', '.join(_col(i, names) for i in plan.columns)}]"
    if isinstance(plan, Negate):
        return "Negate"
    if isinstance(plan, Distinct):
        return "Distinct"
    if isinstance(plan, Threshold):
        return "Threshold"
    if isinstance(plan, ArrangeBy):
        keys = ", ".join("[" + ", ".join(_col(i, names) for i in k) + "]" for k in plan.keys)
        return f"ArrangeBy keys=[{keys}]"
    if isinstance(plan, Reduce):
        aggs = []
        for a in plan.aggregates:
            arg = "*" if a.column is None else _col(a.column, names)
            sep = "" if a.separator is None else f", {a.separator!r}"
            aggs.append(f"{a.func.value}({'distinct ' if a.distinct else ''}{arg}{sep})")
        group = ", ".join(_col(i, names) for i in plan.group_key)
        return f"Reduce group=[{group}] aggs=[{', '.join(aggs)}]"
    if isinstance(plan, Window):
        return _window_line(plan, names)
    if not isinstance(plan, TopK):
        raise InvalidPlan(f"not a plan: {plan!r}")
    order = _order_text(plan.order_by, names)
    group = ", ".join(_col(i, names) for i in plan.group_key)
    return f"TopK group=[{group}] order=[{order}] limit={plan.limit} offset={plan.offset}"


def _order_text(order_by: tuple[ColumnOrder, ...], names: tuple[str, ...] | None) -> str:
    return ", ".join(
        f"{_col(o.column, names)} {'desc' if o.desc else 'asc'} nulls {'last' if o.nulls_last else 'first'}"
        for o in order_by
    )


def _bound_text(b: WindowBound) -> str:
    word = b.kind.value.replace("_", " ")
    if b.kind in (WindowBoundKind.PRECEDING, WindowBoundKind.FOLLOWING):
        return f"{b.offset} {word}"
    return word


def _window_line(plan: Window, names: tuple[str, ...] | None) -> str:
    funcs = []
    for f in plan.funcs:
        if f.kind is WindowFuncKind.AGGREGATE and f.aggregate is not None:
            a = f.aggregate
            arg = "*" if a.column is None else _col(a.column, names)
            sep = "" if a.separator is None else f", {a.separator!r}"
            text = f"{a.func.value}({arg}{sep})"
        elif f.kind in (WindowFuncKind.LAG, WindowFuncKind.LEAD):
            default = "" if f.default is None else f", {_col(f.default, names)}"
            text = f"{f.kind.value}({_col(f.column or 0, names)}, {f.offset}{default})"
        elif f.column is not None:
            text = f"{f.kind.value}({_col(f.column, names)})"
        else:
            text = f"{f.kind.value}()"
        if f.kind in (
            WindowFuncKind.AGGREGATE,
            WindowFuncKind.FIRST_VALUE,
            WindowFuncKind.LAST_VALUE,
        ):
            mode = "range" if f.frame.range else "rows"
            text += f" {mode} {_bound_text(f.frame.start)}..{_bound_text(f.frame.end)}"
        funcs.append(text)
    part = ", ".join(_col(i, names) for i in plan.partition_key)
    order = _order_text(plan.order_by, names)
    return f"Window partition=[{part}] order=[{order}] funcs=[{', '.join(funcs)}]"


def explain(plan: Plan, indent: str = "  ") -> str:
    """``plan`` as an indented text tree, inputs below their operator."""
    lines: list[str] = []

    def walk(p: Plan, depth: int, lets: Mapping[str, Schema]) -> None:
        lines.append(indent * depth + _line(p, lets))
        if isinstance(p, Let):
            walk(p.value, depth + 1, lets)
            value = _schema_or_none(p.value, lets)
            inner = {**lets, p.name: value} if value is not None else lets
            walk(p.body, depth + 1, inner)
            return
        for c in children(p):
            walk(c, depth + 1, lets)

    walk(plan, 0, {})
    return "\n".join(lines)


def _schema_or_none(plan: Plan, lets: Mapping[str, Schema]) -> Schema | None:
    try:
        return typecheck(plan, None, lets)
    except PlanError:
        return None
