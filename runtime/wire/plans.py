"""Plans on the wire: the plan IR of :mod:`tidegate.spec.plan` <-> ``ProtoPlan``.

A ``ProtoPlan`` is two flat arenas, children first: scalar expressions and
relational nodes, the last node the root; parents refer to children by
position (see ``proto/tidegate_compute.proto``). Flat, so a plan of any depth
fits under Protobuf's nesting cap, and an object shared by several parents
(the same Python object) is sent once and decoded as one shared object.

:func:`encode_plan` is total over plans whose column positions, counts and
values are representable (non-negative positions, int64 ints, naive
timestamps); anything else raises :class:`~.errors.MalformedMessage`.
:func:`decode_plan` checks the structure -- every oneof and enum known, every
reference to an earlier position, every value in range -- and raises
:class:`~.errors.WireError` subclasses, never a bare exception. Whether the
plan is well-typed is the receiver's question (``typecheck``), not the codec's:
an ill-typed plan travels intact.
"""

from __future__ import annotations

import datetime as _dt
import typing
from collections.abc import Callable, Sequence
from decimal import Decimal
from enum import Enum
from typing import Any, TypeVar

from google.protobuf.message import Message

from tidegate.spec.errors import EvaluationError, TidegateError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    ArrangeBy,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
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
    Negate,
    Plan,
    Project,
    Reduce,
    ScalarExpr,
    ScalarType,
    Schema,
    TemporalFilter,
    TemporalOp,
    Threshold,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
)
from tidegate.spec.plan.numeric import numeric_text, parse_numeric
from tidegate.spec.plan.scalar_eval import canonical_float
from tidegate.spec.protocol import ColumnOrder

from .errors import MalformedMessage, UnknownMessageKind
from .gen import tidegate_compute_pb2 as pb

__all__ = ["decode_plan", "encode_plan"]

E = TypeVar("E", bound=Enum)
P = TypeVar("P", bound=int)

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1)
_MICRO = _dt.timedelta(microseconds=1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT32_END = 2**32
_UINT64_END = 2**64


def _enum_maps(spec: type[E], proto: type[P], prefix: str) -> tuple[dict[E, P], dict[int, E]]:
    """Spec enum -> Protobuf enum value, and back, matched by member name."""
    values: Any = proto  # a generated enum class: Value() is on its metaclass
    out = {member: typing.cast(P, values.Value(f"{prefix}_{member.name}")) for member in spec}
    return out, {v: k for k, v in out.items()}


_SCALAR_OUT, _SCALAR_IN = _enum_maps(ScalarType, pb.ProtoScalarType, "PROTO_SCALAR_TYPE")
_UNARY_OUT, _UNARY_IN = _enum_maps(UnaryFunc, pb.ProtoUnaryFunc, "PROTO_UNARY_FUNC")
_BINARY_OUT, _BINARY_IN = _enum_maps(BinaryFunc, pb.ProtoBinaryFunc, "PROTO_BINARY_FUNC")
_VARIADIC_OUT, _VARIADIC_IN = _enum_maps(VariadicFunc, pb.ProtoVariadicFunc, "PROTO_VARIADIC_FUNC")
_JOIN_OUT, _JOIN_IN = _enum_maps(JoinKind, pb.ProtoJoinKind, "PROTO_JOIN_KIND")
_AGG_OUT, _AGG_IN = _enum_maps(AggFunc, pb.ProtoAggFunc, "PROTO_AGG_FUNC")
_WFUNC_OUT, _WFUNC_IN = _enum_maps(WindowFuncKind, pb.ProtoWindowFuncKind, "PROTO_WINDOW_FUNC_KIND")
_TEMPORAL_OUT, _TEMPORAL_IN = _enum_maps(TemporalOp, pb.ProtoTemporalOp, "PROTO_TEMPORAL_OP")
_WBOUND_OUT, _WBOUND_IN = _enum_maps(
    WindowBoundKind, pb.ProtoWindowBoundKind, "PROTO_WINDOW_BOUND_KIND"
)


# ---- encoding --------------------------------------------------------------------


def _u32(n: Any, what: str) -> int:
    if type(n) is not int or not 0 <= n < _UINT32_END:
        raise MalformedMessage(f"cannot encode {what} {n!r}: not a position in 0..2**32-1")
    return n


def _u64(n: Any, what: str) -> int:
    if type(n) is not int or not 0 <= n < _UINT64_END:
        raise MalformedMessage(f"cannot encode {what} {n!r}: not a count in 0..2**64-1")
    return n


def _u32s(ns: Sequence[Any], what: str) -> list[int]:
    return [_u32(n, what) for n in ns]


def _enum_out(table: dict[E, P], value: Any, what: str) -> P:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise MalformedMessage(f"cannot encode {what} {value!r}") from None


def _datum_into(m: pb.ProtoDatum, v: Any) -> None:
    """Set ``m`` to the value ``v`` (its kind follows ``v``'s Python type)."""
    if v is None:
        m.null_value.SetInParent()
    elif isinstance(v, bool):
        m.bool_value = v
    elif isinstance(v, int):
        if not _INT64[0] <= v <= _INT64[1]:
            raise MalformedMessage(f"cannot encode {v!r}: outside int64")
        m.int64_value = v
    elif isinstance(v, float):
        m.float64_value = v
    elif isinstance(v, str):
        m.string_value = v
    elif isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            raise MalformedMessage(f"cannot encode {v!r}: timestamps are naive")
        m.timestamp_micros = (v - _EPOCH) // _MICRO
    elif isinstance(v, _dt.date):
        m.date_days = (v - _EPOCH_DATE).days
    elif isinstance(v, Decimal):
        m.numeric_text = numeric_text(v)
    else:
        raise MalformedMessage(f"cannot encode {v!r}: not a value of any column type")


def _aggregate_into(agg: pb.ProtoAggregate, a: Aggregate) -> None:
    agg.func = _enum_out(_AGG_OUT, a.func, "aggregate function")
    if a.column is not None:
        agg.column = _u32(a.column, "aggregated column")
    agg.distinct = a.distinct
    if a.separator is not None:
        if type(a.separator) is not str:
            raise MalformedMessage(f"cannot encode separator {a.separator!r}: not a str")
        agg.separator = a.separator


def _bound_into(m: pb.ProtoWindowBound, b: WindowBound) -> None:
    m.kind = _enum_out(_WBOUND_OUT, b.kind, "window frame bound")
    if b.offset is None:
        return
    if type(b.offset) is int:
        m.rows = _u64(b.offset, "window frame offset")
    elif type(b.offset) is float:
        m.value = b.offset
    else:
        raise MalformedMessage(f"cannot encode window frame offset {b.offset!r}: not a number")


def _schema_into(m: pb.ProtoSchema, s: Schema) -> None:
    for c in s.columns:
        col = m.columns.add()
        col.name = c.name
        col.type.scalar = _enum_out(_SCALAR_OUT, c.type.scalar, "column type")
        col.type.nullable = c.type.nullable


M = TypeVar("M", bound=Message)


def _present(m: M) -> M:
    """Mark the oneof member ``m`` as set, even if all its fields stay at their defaults.

    Only needed where no scalar field is assigned: assigning one (even its
    default) marks the message present in its parent.
    """
    m.SetInParent()
    return m


class _Encoder:
    """Appends expressions and nodes to one ``ProtoPlan``, each distinct object once."""

    def __init__(self, out: pb.ProtoPlan) -> None:
        # Upb makes a new wrapper object at every field access: hold the two arenas once.
        self.exprs = out.exprs
        self.nodes = out.nodes
        self.expr_at: dict[int, int] = {}
        self.node_at: dict[int, int] = {}

    def expr(self, e: ScalarExpr) -> int:
        pos = self.expr_at.get(id(e))
        if pos is None:
            write = _EXPR_WRITERS.get(type(e))
            if write is None:
                raise MalformedMessage(f"cannot encode {e!r}: not a scalar expression")
            write(self, e)
            pos = self.expr_at[id(e)] = len(self.exprs) - 1
        return pos

    def node(self, p: Plan) -> int:
        pos = self.node_at.get(id(p))
        if pos is None:
            write = _NODE_WRITERS.get(type(p))
            if write is None:
                raise MalformedMessage(f"cannot encode {p!r}: not a plan node")
            write(self, p)
            pos = self.node_at[id(p)] = len(self.nodes) - 1
        return pos

    # Each writer encodes the children first, then appends the parent.

    def column_ref(self, e: ColumnRef) -> None:
        self.exprs.add().column = _u32(e.index, "column")

    def literal(self, e: Literal) -> None:
        lit = self.exprs.add().literal
        lit.type = _enum_out(_SCALAR_OUT, e.type, "literal type")
        _datum_into(lit.value, e.value)

    def call_unary(self, e: CallUnary) -> None:
        arg = self.expr(e.expr)
        u = self.exprs.add().call_unary
        u.func = _enum_out(_UNARY_OUT, e.func, "unary function")
        u.expr = arg

    def call_binary(self, e: CallBinary) -> None:
        left, right = self.expr(e.left), self.expr(e.right)
        b = self.exprs.add().call_binary
        b.func = _enum_out(_BINARY_OUT, e.func, "binary function")
        b.left, b.right = left, right

    def call_variadic(self, e: CallVariadic) -> None:
        args = [self.expr(x) for x in e.exprs]
        v = self.exprs.add().call_variadic
        v.func = _enum_out(_VARIADIC_OUT, e.func, "variadic function")
        v.exprs.extend(args)

    def if_then_else(self, e: If) -> None:
        cond, then, els = self.expr(e.cond), self.expr(e.then), self.expr(e.els)
        i = self.exprs.add().if_then_else
        i.cond, i.then, i.els = cond, then, els

    def cast(self, e: Cast) -> None:
        arg = self.expr(e.expr)
        c = self.exprs.add().cast
        c.expr = arg
        c.to = _enum_out(_SCALAR_OUT, e.to, "cast target")

    def get(self, p: Get) -> None:
        g = self.nodes.add().get
        g.id = str(p.id)
        _schema_into(g.schema, p.schema)

    def constant(self, p: Constant) -> None:
        c = _present(self.nodes.add().constant)
        _schema_into(c.schema, p.schema)
        for row, diff in p.rows:
            r = c.rows.add()
            for v in row:
                _datum_into(r.values.add(), v)
            r.diff = diff

    def map(self, p: Map) -> None:
        inp, exprs = self.node(p.input), [self.expr(e) for e in p.exprs]
        m = self.nodes.add().map
        m.input = inp
        m.exprs.extend(exprs)
        m.names.extend(p.names)

    def filter(self, p: Filter) -> None:
        inp, preds = self.node(p.input), [self.expr(e) for e in p.predicates]
        f = self.nodes.add().filter
        f.input = inp
        f.predicates.extend(preds)

    def temporal_filter(self, p: TemporalFilter) -> None:
        inp, bounds = self.node(p.input), [self.expr(e) for _op, e in p.predicates]
        f = self.nodes.add().temporal_filter
        f.input = inp
        f.ops.extend(_enum_out(_TEMPORAL_OUT, op, "temporal comparison") for op, _e in p.predicates)
        f.bounds.extend(bounds)

    def project(self, p: Project) -> None:
        inp = self.node(p.input)
        pr = self.nodes.add().project
        pr.input = inp
        pr.columns.extend(_u32s(p.columns, "projected column"))

    def union(self, p: Union) -> None:
        inputs = [self.node(x) for x in p.inputs]
        _present(self.nodes.add().union).inputs.extend(inputs)

    def negate(self, p: Negate) -> None:
        inp = self.node(p.input)
        self.nodes.add().negate.input = inp

    def join(self, p: Join) -> None:
        inputs = [self.node(x) for x in p.inputs]
        j = self.nodes.add().join
        j.inputs.extend(inputs)
        for cls in p.equivalences:
            j.equivalences.add().columns.extend(_u32s(cls, "join column"))
        j.kind = _enum_out(_JOIN_OUT, p.kind, "join kind")

    def reduce(self, p: Reduce) -> None:
        inp = self.node(p.input)
        r = self.nodes.add().reduce
        r.input = inp
        r.group_key.extend(_u32s(p.group_key, "group key column"))
        for a in p.aggregates:
            _aggregate_into(r.aggregates.add(), a)

    def window(self, p: Window) -> None:
        inp = self.node(p.input)
        w = self.nodes.add().window
        w.input = inp
        w.partition_key.extend(_u32s(p.partition_key, "partition key column"))
        for o in p.order_by:
            order = w.order_by.add()
            order.column = _u32(o.column, "order-by column")
            order.desc, order.nulls_last = o.desc, o.nulls_last
        for f in p.funcs:
            m = w.funcs.add()
            m.kind = _enum_out(_WFUNC_OUT, f.kind, "window function")
            if f.column is not None:
                m.column = _u32(f.column, "window function column")
            if type(f.offset) is not int or not _INT64[0] <= f.offset <= _INT64[1]:
                raise MalformedMessage(f"cannot encode window offset {f.offset!r}: not an int64")
            m.offset = f.offset
            if f.default is not None:
                m.default = _u32(f.default, "window default column")
            if f.aggregate is not None:
                _aggregate_into(m.aggregate, f.aggregate)
            m.frame.range = f.frame.range
            _bound_into(m.frame.start, f.frame.start)
            _bound_into(m.frame.end, f.frame.end)

    def distinct(self, p: Distinct) -> None:
        inp = self.node(p.input)
        self.nodes.add().distinct.input = inp

    def threshold(self, p: Threshold) -> None:
        inp = self.node(p.input)
        self.nodes.add().threshold.input = inp

    def top_k(self, p: TopK) -> None:
        inp = self.node(p.input)
        t = self.nodes.add().top_k
        t.input = inp
        t.group_key.extend(_u32s(p.group_key, "group key column"))
        for o in p.order_by:
            order = t.order_by.add()
            order.column = _u32(o.column, "order-by column")
            order.desc, order.nulls_last = o.desc, o.nulls_last
        if p.limit is not None:
            t.limit = _u64(p.limit, "top-k limit")
        t.offset = _u64(p.offset, "top-k offset")

    def arrange_by(self, p: ArrangeBy) -> None:
        inp = self.node(p.input)
        a = self.nodes.add().arrange_by
        a.input = inp
        for key in p.keys:
            a.keys.add().columns.extend(_u32s(key, "arrangement key column"))

    def let(self, p: Let) -> None:
        value, body = self.node(p.value), self.node(p.body)
        let = self.nodes.add().let
        let.name, let.value, let.body = p.name, value, body

    def let_ref(self, p: LetRef) -> None:
        self.nodes.add().let_ref.name = p.name


_EXPR_WRITERS: dict[type, Callable[[_Encoder, Any], None]] = {
    ColumnRef: _Encoder.column_ref,
    Literal: _Encoder.literal,
    CallUnary: _Encoder.call_unary,
    CallBinary: _Encoder.call_binary,
    CallVariadic: _Encoder.call_variadic,
    If: _Encoder.if_then_else,
    Cast: _Encoder.cast,
}
_NODE_WRITERS: dict[type, Callable[[_Encoder, Any], None]] = {
    Get: _Encoder.get,
    Constant: _Encoder.constant,
    Map: _Encoder.map,
    Filter: _Encoder.filter,
    TemporalFilter: _Encoder.temporal_filter,
    Project: _Encoder.project,
    Union: _Encoder.union,
    Negate: _Encoder.negate,
    Join: _Encoder.join,
    Reduce: _Encoder.reduce,
    Distinct: _Encoder.distinct,
    Threshold: _Encoder.threshold,
    TopK: _Encoder.top_k,
    Window: _Encoder.window,
    ArrangeBy: _Encoder.arrange_by,
    Let: _Encoder.let,
    LetRef: _Encoder.let_ref,
}


def encode_plan(plan: Plan, into: pb.ProtoPlan | None = None) -> pb.ProtoPlan:
    """``plan`` as a ``ProtoPlan`` (written into ``into`` if given, which must be empty).

    The encoder recurses, so a plan nested deeper than about half of Python's
    recursion limit is refused (as are the spec's own checks of such a plan).
    """
    out = pb.ProtoPlan() if into is None else into
    try:
        _Encoder(out).node(plan)
    except (TypeError, ValueError) as e:  # a field of the wrong Python type, invalid UTF-8
        if isinstance(e, TidegateError):
            raise
        raise MalformedMessage(f"cannot encode plan: {type(e).__name__}: {e}") from e
    except RecursionError:
        raise MalformedMessage("cannot encode plan: nested beyond the recursion limit") from None
    return out


# ---- decoding --------------------------------------------------------------------


def _enum_in(table: dict[int, E], value: int, what: str) -> E:
    try:
        return table[value]
    except KeyError:
        raise UnknownMessageKind(f"unknown {what} {value} (unspecified or newer)") from None


def _datum(m: pb.ProtoDatum) -> Any:
    kind = m.WhichOneof("kind")
    if kind == "null_value":
        return None
    if kind == "float64_value":
        return canonical_float(m.float64_value)
    if kind in ("int64_value", "string_value", "bool_value"):
        return getattr(m, kind)
    try:
        if kind == "date_days":
            return _EPOCH_DATE + _dt.timedelta(days=m.date_days)
        if kind == "timestamp_micros":
            return _EPOCH + _dt.timedelta(microseconds=m.timestamp_micros)
        if kind == "numeric_text":
            return parse_numeric(m.numeric_text)
    except EvaluationError as e:
        raise MalformedMessage(f"numeric_text {m.numeric_text!r}: {e}") from None
    except OverflowError:
        raise MalformedMessage(f"{kind} {getattr(m, kind)} is out of range") from None
    raise UnknownMessageKind("value without a kind")


def _schema(m: pb.ProtoSchema) -> Schema:
    return Schema(
        tuple(
            Column(
                c.name,
                ColumnType(_enum_in(_SCALAR_IN, c.type.scalar, "column type"), c.type.nullable),
            )
            for c in m.columns
        )
    )


# Each reader builds one IR object from its message; ``x`` and ``n`` are the
# expressions and nodes decoded so far, indexed by position, so a reference to
# a later (or missing) position is an IndexError, reported by decode_plan.
_Exprs = list[ScalarExpr]
_Nodes = list[Plan]


def _read_literal(m: pb.ProtoLiteral, x: _Exprs) -> ScalarExpr:
    return Literal(_datum(m.value), _enum_in(_SCALAR_IN, m.type, "literal type"))


def _read_unary(m: pb.ProtoCallUnary, x: _Exprs) -> ScalarExpr:
    return CallUnary(_enum_in(_UNARY_IN, m.func, "unary function"), x[m.expr])


def _read_binary(m: pb.ProtoCallBinary, x: _Exprs) -> ScalarExpr:
    return CallBinary(_enum_in(_BINARY_IN, m.func, "binary function"), x[m.left], x[m.right])


def _read_variadic(m: pb.ProtoCallVariadic, x: _Exprs) -> ScalarExpr:
    func = _enum_in(_VARIADIC_IN, m.func, "variadic function")
    return CallVariadic(func, tuple([x[i] for i in m.exprs]))


def _read_if(m: pb.ProtoIf, x: _Exprs) -> ScalarExpr:
    return If(x[m.cond], x[m.then], x[m.els])


def _read_cast(m: pb.ProtoCast, x: _Exprs) -> ScalarExpr:
    return Cast(x[m.expr], _enum_in(_SCALAR_IN, m.to, "cast target"))


_EXPR_READERS: dict[str, Callable[[Any, _Exprs], ScalarExpr]] = {
    "column": lambda m, x: ColumnRef(m),
    "literal": _read_literal,
    "call_unary": _read_unary,
    "call_binary": _read_binary,
    "call_variadic": _read_variadic,
    "if_then_else": _read_if,
    "cast": _read_cast,
}


def _read_get(m: pb.ProtoGet, n: _Nodes, x: _Exprs) -> Plan:
    try:
        gid = GlobalId.parse(m.id)
    except TidegateError as e:
        raise MalformedMessage(f"get: {e}") from e
    return Get(gid, _schema(m.schema))


def _read_constant(m: pb.ProtoConstant, n: _Nodes, x: _Exprs) -> Plan:
    rows = tuple((tuple([_datum(v) for v in r.values]), r.diff) for r in m.rows)
    return Constant(rows, _schema(m.schema))


def _read_map(m: pb.ProtoMap, n: _Nodes, x: _Exprs) -> Plan:
    return Map(n[m.input], tuple([x[i] for i in m.exprs]), tuple(m.names))


def _read_filter(m: pb.ProtoFilter, n: _Nodes, x: _Exprs) -> Plan:
    return Filter(n[m.input], tuple([x[i] for i in m.predicates]))


def _read_temporal_filter(m: pb.ProtoTemporalFilter, n: _Nodes, x: _Exprs) -> Plan:
    if len(m.ops) != len(m.bounds):
        raise MalformedMessage(
            f"temporal filter with {len(m.ops)} comparisons but {len(m.bounds)} bounds"
        )
    ops = [_enum_in(_TEMPORAL_IN, op, "temporal comparison") for op in m.ops]
    return TemporalFilter(
        n[m.input], tuple([(op, x[i]) for op, i in zip(ops, m.bounds, strict=True)])
    )


def _read_join(m: pb.ProtoJoin, n: _Nodes, x: _Exprs) -> Plan:
    return Join(
        tuple([n[i] for i in m.inputs]),
        tuple([tuple(e.columns) for e in m.equivalences]),
        _enum_in(_JOIN_IN, m.kind, "join kind"),
    )


def _read_aggregate(a: pb.ProtoAggregate) -> Aggregate:
    return Aggregate(
        _enum_in(_AGG_IN, a.func, "aggregate function"),
        a.column if a.HasField("column") else None,
        a.distinct,
        a.separator if a.HasField("separator") else None,
    )


def _read_reduce(m: pb.ProtoReduce, n: _Nodes, x: _Exprs) -> Plan:
    aggs = tuple([_read_aggregate(a) for a in m.aggregates])
    return Reduce(n[m.input], tuple(m.group_key), aggs)


def _read_bound(m: pb.ProtoWindowBound) -> WindowBound:
    which = m.WhichOneof("offset")
    offset: int | float | None = None if which is None else getattr(m, which)
    return WindowBound(_enum_in(_WBOUND_IN, m.kind, "window frame bound"), offset)


def _read_window(m: pb.ProtoWindow, n: _Nodes, x: _Exprs) -> Plan:
    order = tuple([ColumnOrder(o.column, o.desc, o.nulls_last) for o in m.order_by])
    funcs = tuple(
        [
            WindowFunc(
                _enum_in(_WFUNC_IN, f.kind, "window function"),
                f.column if f.HasField("column") else None,
                f.offset,
                f.default if f.HasField("default") else None,
                _read_aggregate(f.aggregate) if f.HasField("aggregate") else None,
                WindowFrame(f.frame.range, _read_bound(f.frame.start), _read_bound(f.frame.end)),
            )
            for f in m.funcs
        ]
    )
    return Window(n[m.input], tuple(m.partition_key), order, funcs)


def _read_top_k(m: pb.ProtoTopK, n: _Nodes, x: _Exprs) -> Plan:
    order = tuple([ColumnOrder(o.column, o.desc, o.nulls_last) for o in m.order_by])
    limit = m.limit if m.HasField("limit") else None
    return TopK(n[m.input], tuple(m.group_key), order, limit, m.offset)


_NODE_READERS: dict[str, Callable[[Any, _Nodes, _Exprs], Plan]] = {
    "get": _read_get,
    "constant": _read_constant,
    "map": _read_map,
    "filter": _read_filter,
    "temporal_filter": _read_temporal_filter,
    "project": lambda m, n, x: Project(n[m.input], tuple(m.columns)),
    "union": lambda m, n, x: Union(tuple([n[i] for i in m.inputs])),
    "negate": lambda m, n, x: Negate(n[m.input]),
    "join": _read_join,
    "reduce": _read_reduce,
    "distinct": lambda m, n, x: Distinct(n[m.input]),
    "threshold": lambda m, n, x: Threshold(n[m.input]),
    "top_k": _read_top_k,
    "window": _read_window,
    "arrange_by": lambda m, n, x: ArrangeBy(n[m.input], tuple([tuple(k.columns) for k in m.keys])),
    "let": lambda m, n, x: Let(m.name, n[m.value], n[m.body]),
    "let_ref": lambda m, n, x: LetRef(m.name),
}


def decode_plan(m: pb.ProtoPlan) -> Plan:
    """The plan a ``ProtoPlan`` denotes: its last node, with every reference resolved."""
    if not m.nodes:
        raise MalformedMessage("plan without nodes")
    exprs: _Exprs = []
    for pos, e in enumerate(m.exprs):
        kind = e.WhichOneof("kind")
        read = _EXPR_READERS.get(kind) if kind is not None else None
        if read is None:
            raise UnknownMessageKind(f"expression #{pos} has no known kind (unset or newer)")
        try:
            exprs.append(read(getattr(e, kind), exprs))
        except IndexError:
            raise MalformedMessage(
                f"expression #{pos} refers to an expression that is not an earlier one"
            ) from None
    nodes: _Nodes = []
    for pos, node in enumerate(m.nodes):
        kind = node.WhichOneof("kind")
        read_node = _NODE_READERS.get(kind) if kind is not None else None
        if read_node is None:
            raise UnknownMessageKind(f"plan node #{pos} has no known kind (unset or newer)")
        try:
            nodes.append(read_node(getattr(node, kind), nodes, exprs))
        except IndexError:
            raise MalformedMessage(
                f"plan node #{pos} ({kind}) refers to a node that is not an earlier one, "
                f"or to a missing expression"
            ) from None
    return nodes[-1]
