"""Stable serialisation of plans to plain dicts (JSON-ready) and back.

Every node is a dict with a ``"op"`` (plans) or ``"kind"`` (scalars) tag;
dates and timestamps are ISO strings, a float64 NaN or infinity the string
``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (strict JSON has no such numbers;
a NaN read back is the one object ``NAN``), GlobalIds their text form. Used where
plans are stored as JSON (the runtime's catalog, scenario files); the wire has
its own typed Protobuf messages. ``plan_from_dict(_plan_out(p)) == p``.
"""

from __future__ import annotations

import datetime as _dt
import math
from decimal import Decimal
from typing import Any

from ..errors import InvalidId, PlanDecodeError
from ..ids import GlobalId
from ..protocol.types import ColumnOrder
from .depth import check_nesting
from .numeric import numeric_text, parse_numeric
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
)
from .scalar_eval import NAN, canonical_float
from .schema import Column, ColumnType, ScalarType, Schema

__all__ = [
    "expr_from_dict",
    "expr_to_dict",
    "plan_from_dict",
    "plan_to_dict",
    "schema_from_dict",
    "schema_to_dict",
]

Obj = dict[str, Any]


_NON_FINITE: dict[str, float] = {"NaN": NAN, "Infinity": math.inf, "-Infinity": -math.inf}
"""A float64 NaN or infinity in JSON (which has no such numbers): PostgreSQL's text of it."""


def _value_out(v: Any) -> Any:
    if type(v) is _dt.datetime or type(v) is _dt.date:
        return v.isoformat()
    if type(v) is Decimal:  # as text: a JSON number would be read back as a float
        return numeric_text(v)
    if type(v) is float and not math.isfinite(v):  # strict JSON has no NaN or Infinity
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def _value_in(v: Any, t: ScalarType) -> Any:
    if v is None:
        return None
    if t is ScalarType.DATE:
        return _dt.date.fromisoformat(v)
    if t is ScalarType.TIMESTAMP:
        return _dt.datetime.fromisoformat(v)
    if t is ScalarType.NUMERIC and type(v) is str:
        return parse_numeric(v)
    if t is ScalarType.FLOAT64:
        if type(v) is int:
            return float(v)
        if type(v) is str and v in _NON_FINITE:
            return _NON_FINITE[v]
        if type(v) is float:
            return canonical_float(v)  # every NaN the one object, so rows holding it are equal
    return v


def schema_to_dict(s: Schema) -> Obj:
    return {
        "columns": [
            {"name": c.name, "type": c.type.scalar.value, "nullable": c.type.nullable}
            for c in s.columns
        ]
    }


def schema_from_dict(d: Obj) -> Schema:
    return Schema(
        tuple(
            Column(str(c["name"]), ColumnType(ScalarType(c["type"]), bool(c["nullable"])))
            for c in d["columns"]
        )
    )


def _expr_out(e: ScalarExpr) -> Obj:
    if isinstance(e, ColumnRef):
        return {"kind": "column", "index": e.index}
    if isinstance(e, Literal):
        return {"kind": "literal", "value": _value_out(e.value), "type": e.type.value}
    if isinstance(e, CallUnary):
        return {"kind": "unary", "func": e.func.value, "expr": _expr_out(e.expr)}
    if isinstance(e, CallBinary):
        return {
            "kind": "binary",
            "func": e.func.value,
            "left": _expr_out(e.left),
            "right": _expr_out(e.right),
        }
    if isinstance(e, CallVariadic):
        return {
            "kind": "variadic",
            "func": e.func.value,
            "exprs": [_expr_out(x) for x in e.exprs],
        }
    if isinstance(e, If):
        return {
            "kind": "if",
            "cond": _expr_out(e.cond),
            "then": _expr_out(e.then),
            "else": _expr_out(e.els),
        }
    return {"kind": "cast", "expr": _expr_out(e.expr), "to": e.to.value}


def _expr_in(d: Obj) -> ScalarExpr:
    k = d["kind"]
    if k == "column":
        return ColumnRef(int(d["index"]))
    if k == "literal":
        t = ScalarType(d["type"])
        return Literal(_value_in(d["value"], t), t)
    if k == "unary":
        return CallUnary(UnaryFunc(d["func"]), _expr_in(d["expr"]))
    if k == "binary":
        return CallBinary(BinaryFunc(d["func"]), _expr_in(d["left"]), _expr_in(d["right"]))
    if k == "variadic":
        return CallVariadic(VariadicFunc(d["func"]), tuple(_expr_in(x) for x in d["exprs"]))
    if k == "if":
        return If(_expr_in(d["cond"]), _expr_in(d["then"]), _expr_in(d["else"]))
    if k == "cast":
        return Cast(_expr_in(d["expr"]), ScalarType(d["to"]))
    raise PlanDecodeError(f"unknown scalar kind {k!r}")


def _order_out(o: ColumnOrder) -> Obj:
    return {"column": o.column, "desc": o.desc, "nulls_last": o.nulls_last}


def _plan_out(p: Plan) -> Obj:
    if isinstance(p, Get):
        return {"op": "get", "id": str(p.id), "schema": schema_to_dict(p.schema)}
    if isinstance(p, Constant):
        return {
            "op": "constant",
            "schema": schema_to_dict(p.schema),
            "rows": [[[_value_out(v) for v in r], c] for r, c in p.rows],
        }
    if isinstance(p, LetRef):
        return {"op": "let_ref", "name": p.name}
    if isinstance(p, Let):
        return {
            "op": "let",
            "name": p.name,
            "value": _plan_out(p.value),
            "body": _plan_out(p.body),
        }
    if isinstance(p, Union):
        return {"op": "union", "inputs": [_plan_out(x) for x in p.inputs]}
    if isinstance(p, Join):
        return {
            "op": "join",
            "inputs": [_plan_out(x) for x in p.inputs],
            "equivalences": [list(c) for c in p.equivalences],
            "kind": p.kind.value,
        }
    base: Obj = {"input": _plan_out(p.input)}
    if isinstance(p, Map):
        return {
            "op": "map",
            **base,
            "exprs": [_expr_out(e) for e in p.exprs],
            "names": list(p.names),
        }
    if isinstance(p, Filter):
        return {"op": "filter", **base, "predicates": [_expr_out(e) for e in p.predicates]}
    if isinstance(p, TemporalFilter):
        return {
            "op": "temporal_filter",
            **base,
            "predicates": [[op.value, _expr_out(e)] for op, e in p.predicates],
        }
    if isinstance(p, Project):
        return {"op": "project", **base, "columns": list(p.columns)}
    if isinstance(p, Negate):
        return {"op": "negate", **base}
    if isinstance(p, Distinct):
        return {"op": "distinct", **base}
    if isinstance(p, Threshold):
        return {"op": "threshold", **base}
    if isinstance(p, ArrangeBy):
        return {"op": "arrange_by", **base, "keys": [list(k) for k in p.keys]}
    if isinstance(p, Reduce):
        return {
            "op": "reduce",
            **base,
            "group_key": list(p.group_key),
            "aggregates": [
                {
                    "func": a.func.value,
                    "column": a.column,
                    "distinct": a.distinct,
                    **({} if a.separator is None else {"separator": a.separator}),
                }
                for a in p.aggregates
            ],
        }
    if isinstance(p, Window):
        return {
            "op": "window",
            **base,
            "partition_key": list(p.partition_key),
            "order_by": [_order_out(o) for o in p.order_by],
            "funcs": [_window_func_out(f) for f in p.funcs],
        }
    return {
        "op": "top_k",
        **base,
        "group_key": list(p.group_key),
        "order_by": [_order_out(o) for o in p.order_by],
        "limit": p.limit,
        "offset": p.offset,
    }


def _agg_out(a: Aggregate) -> Obj:
    return {
        "func": a.func.value,
        "column": a.column,
        "distinct": a.distinct,
        **({} if a.separator is None else {"separator": a.separator}),
    }


def _agg_in(a: Obj) -> Aggregate:
    return Aggregate(
        AggFunc(a["func"]),
        None if a["column"] is None else int(a["column"]),
        bool(a["distinct"]),
        None if a.get("separator") is None else str(a["separator"]),
    )


def _window_func_out(f: WindowFunc) -> Obj:
    def bound(b: WindowBound) -> Obj:
        return {"kind": b.kind.value, "offset": b.offset}

    return {
        "kind": f.kind.value,
        "column": f.column,
        "offset": f.offset,
        "default": f.default,
        "aggregate": None if f.aggregate is None else _agg_out(f.aggregate),
        "frame": {
            "range": f.frame.range,
            "start": bound(f.frame.start),
            "end": bound(f.frame.end),
        },
    }


def _window_func_in(d: Obj) -> WindowFunc:
    def bound(b: Obj) -> WindowBound:
        off = b["offset"]
        if off is not None and type(off) not in (int, float):
            raise PlanDecodeError(f"window frame offset {off!r} is not a number")
        return WindowBound(WindowBoundKind(b["kind"]), off)

    fr = d["frame"]
    return WindowFunc(
        WindowFuncKind(d["kind"]),
        None if d["column"] is None else int(d["column"]),
        int(d["offset"]),
        None if d["default"] is None else int(d["default"]),
        None if d["aggregate"] is None else _agg_in(d["aggregate"]),
        WindowFrame(bool(fr["range"]), bound(fr["start"]), bound(fr["end"])),
    )


def expr_to_dict(e: ScalarExpr) -> Obj:
    """``e`` as nested plain dicts [PlanTooDeep past :data:`~.depth.MAX_NESTING`]."""
    check_nesting(e, "scalar expression")
    return _expr_out(e)


def expr_from_dict(d: Obj) -> ScalarExpr:
    """Decode :func:`expr_to_dict`'s output [PlanDecodeError, PlanTooDeep]."""
    check_nesting(d, "scalar expression")
    try:
        return _expr_in(d)
    except (KeyError, TypeError, ValueError, AttributeError, InvalidId) as e:
        raise PlanDecodeError(f"malformed scalar expression: {type(e).__name__}: {e}") from None


def plan_to_dict(p: Plan) -> Obj:
    """``p`` as nested plain dicts/lists of JSON scalars [PlanTooDeep past :data:`~.depth.MAX_NESTING`]."""
    check_nesting(p)
    return _plan_out(p)


def plan_from_dict(d: Obj) -> Plan:
    """Decode :func:`plan_to_dict`'s output; raise :class:`PlanDecodeError` on malformed input.

    Input nested deeper than :data:`~.depth.MAX_NESTING` is :class:`PlanTooDeep`.
    """
    check_nesting(d)
    try:
        return _plan_in(d)
    except PlanDecodeError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, InvalidId) as e:
        raise PlanDecodeError(f"malformed plan: {type(e).__name__}: {e}") from None


def _ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _plan_in(d: Obj) -> Plan:
    op = d["op"]
    if op == "get":
        return Get(GlobalId.parse(d["id"]), schema_from_dict(d["schema"]))
    if op == "constant":
        schema = schema_from_dict(d["schema"])
        types = [c.type.scalar for c in schema.columns]
        rows = tuple(
            (tuple(_value_in(v, t) for v, t in zip(r, types, strict=True)), int(c))
            for r, c in d["rows"]
        )
        return Constant(rows, schema)
    if op == "let_ref":
        return LetRef(str(d["name"]))
    if op == "let":
        return Let(str(d["name"]), _plan_in(d["value"]), _plan_in(d["body"]))
    if op == "union":
        return Union(tuple(_plan_in(x) for x in d["inputs"]))
    if op == "join":
        return Join(
            tuple(_plan_in(x) for x in d["inputs"]),
            tuple(_ints(c) for c in d["equivalences"]),
            JoinKind(d["kind"]),
        )
    inp = _plan_in(d["input"])
    if op == "map":
        return Map(inp, tuple(_expr_in(e) for e in d["exprs"]), tuple(str(n) for n in d["names"]))
    if op == "filter":
        return Filter(inp, tuple(_expr_in(e) for e in d["predicates"]))
    if op == "temporal_filter":
        return TemporalFilter(
            inp, tuple((TemporalOp(str(o)), _expr_in(e)) for o, e in d["predicates"])
        )
    if op == "project":
        return Project(inp, _ints(d["columns"]))
    if op == "negate":
        return Negate(inp)
    if op == "distinct":
        return Distinct(inp)
    if op == "threshold":
        return Threshold(inp)
    if op == "arrange_by":
        return ArrangeBy(inp, tuple(_ints(k) for k in d["keys"]))
    if op == "reduce":
        aggs = tuple(
            Aggregate(
                AggFunc(a["func"]),
                None if a["column"] is None else int(a["column"]),
                bool(a["distinct"]),
                None if a.get("separator") is None else str(a["separator"]),
            )
            for a in d["aggregates"]
        )
        return Reduce(inp, _ints(d["group_key"]), aggs)
    if op == "top_k":
        order = tuple(
            ColumnOrder(int(o["column"]), bool(o["desc"]), bool(o["nulls_last"]))
            for o in d["order_by"]
        )
        limit = None if d["limit"] is None else int(d["limit"])
        return TopK(inp, _ints(d["group_key"]), order, limit, int(d["offset"]))
    if op == "window":
        order = tuple(
            ColumnOrder(int(o["column"]), bool(o["desc"]), bool(o["nulls_last"]))
            for o in d["order_by"]
        )
        funcs = tuple(_window_func_in(f) for f in d["funcs"])
        return Window(inp, _ints(d["partition_key"]), order, funcs)
    raise PlanDecodeError(f"unknown plan op {op!r}")
