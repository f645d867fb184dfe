"""Plans on the wire: every IR node and scalar kind round-trips as typed Protobuf; bad input is refused."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import typing
from collections.abc import Iterator
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from tidegate.runtime.wire import MalformedMessage, UnknownMessageKind, WireError
from tidegate.runtime.wire.codec import command_from_bytes, command_to_bytes
from tidegate.runtime.wire.gen import tidegate_compute_pb2 as pb
from tidegate.runtime.wire.plans import decode_plan, encode_plan
from tidegate.spec import strategies
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
    ColumnRef,
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
    children,
    lower,
    typecheck,
)
from tidegate.spec.plan.scalar import SIGNATURES
from tidegate.spec.protocol import (
    BuildDesc,
    ColumnOrder,
    CreateDataflow,
    DataflowDescription,
)

S = ScalarType
U1 = GlobalId.user(1)
_PLANS = strategies.schemas().flatmap(lambda schema: strategies.plans({U1: schema}))
# Deeper scalar expressions than plans hold, over every result type, each in a Map over its input.
_EXPR_PLANS = st.tuples(strategies.schemas(), st.sampled_from(list(ScalarType))).flatmap(
    lambda a: strategies.scalar_exprs(a[0], a[1], depth=3).map(
        lambda e: Map(Get(U1, a[0]), (e,), ("e",))
    )
)


def _through_bytes(plan: Plan) -> Plan:
    return decode_plan(pb.ProtoPlan.FromString(encode_plan(plan).SerializeToString()))


def _in_command(plan: Plan) -> CreateDataflow:
    return CreateDataflow(
        DataflowDescription("d", objects_to_build=(BuildDesc(GlobalId.user(9), plan),))
    )


# ---- round trips -----------------------------------------------------------------


@given(st.one_of(_PLANS, _EXPR_PLANS))
def test_every_generated_plan_and_expression_round_trips(plan: Plan) -> None:
    assert _through_bytes(plan) == plan
    cmd = _in_command(plan)
    assert command_from_bytes(command_to_bytes(cmd)) == cmd
    lowered = lower(plan)  # left joins rewritten: subplans shared by several parents
    assert _through_bytes(lowered) == lowered


def _walk(plan: Plan) -> Iterator[Plan | ScalarExpr]:
    yield plan
    exprs: tuple[ScalarExpr, ...] = ()
    if isinstance(plan, Map):
        exprs = plan.exprs
    elif isinstance(plan, Filter):
        exprs = plan.predicates
    for e in exprs:
        yield from _walk_expr(e)
    for child in children(plan):
        yield from _walk(child)


def _walk_expr(e: ScalarExpr) -> Iterator[ScalarExpr]:
    yield e
    if isinstance(e, CallUnary | Cast):
        yield from _walk_expr(e.expr)
    elif isinstance(e, CallBinary):
        yield from _walk_expr(e.left)
        yield from _walk_expr(e.right)
    elif isinstance(e, CallVariadic):
        for x in e.exprs:
            yield from _walk_expr(x)
    elif isinstance(e, If):
        for x in (e.cond, e.then, e.els):
            yield from _walk_expr(x)


def _kinds(plan: Plan) -> set[str]:
    """Tags for every node class, expression kind, function, type and option ``plan`` uses."""
    out: set[str] = set()
    for x in _walk(plan):
        out.add(type(x).__name__)
        match x:
            case Get(_, schema) | Constant(_, schema):
                out.update(f"column:{c.type.scalar}" for c in schema.columns)
            case Literal(value, type_):
                out.add(f"{'null' if value is None else 'literal'}:{type_}")
            case CallUnary(func) | CallBinary(func) | CallVariadic(func):
                out.add(f"func:{func}")
            case Cast(_, to):
                out.add(f"cast:{to}")
            case Join(_, _, kind):
                out.add(f"join:{kind}")
            case Reduce(_, _, aggs):
                for a in aggs:
                    out.add(f"agg:{a.func}" + ("(*)" if a.column is None else ""))
                    out.add(f"distinct:{a.distinct}")
            case TopK(limit=limit):
                out.add(f"limit:{limit is not None}")
            case TemporalFilter(predicates=predicates):
                out.update(f"temporal:{op}" for op, _ in predicates)
            case Window(funcs=funcs):
                for f in funcs:
                    out.add(f"window:{f.kind}")
                    for b in (f.frame.start, f.frame.end):
                        out.add(f"bound:{b.kind}:{type(b.offset).__name__}")
                    out.add(f"frame:{'range' if f.frame.range else 'rows'}")
    return out


UNIVERSE = (
    {t.__name__ for t in typing.get_args(Plan)}
    | {t.__name__ for t in typing.get_args(ScalarExpr)}
    | {f"column:{t}" for t in S}
    | {f"literal:{t}" for t in S}
    | {f"null:{t}" for t in S}
    | {f"cast:{t}" for t in S}
    | {f"func:{f}" for e in (UnaryFunc, BinaryFunc, VariadicFunc) for f in e}
    | {f"join:{k}" for k in JoinKind}
    | {f"agg:{f}" for f in AggFunc}
    | {"agg:count(*)", "distinct:True", "distinct:False", "limit:True", "limit:False"}
    | {f"window:{k}" for k in WindowFuncKind}
    | {"frame:range", "frame:rows"}
    | {f"temporal:{op}" for op in TemporalOp}
    | {f"bound:{k}:NoneType" for k in WindowBoundKind if k not in ("preceding", "following")}
    | {f"bound:{k}:{t}" for k in ("preceding", "following") for t in ("int", "float")}
)

_Z = Schema.of(
    ("i", S.INT64), ("f", S.FLOAT64), ("s", S.STRING), ("b", S.BOOL), ("d", S.DATE),
    ("t", S.TIMESTAMP), ("n", S.NUMERIC), ("i2", S.INT16), ("i4", S.INT32), ("f4", S.FLOAT32),
)  # fmt: skip
INT, F, STR, B, D, T, N, I2, I4, F4 = (ColumnRef(k) for k in range(10))
_CAST_FROM = {
    S.INT64: F, S.FLOAT64: INT, S.STRING: D, S.BOOL: INT, S.DATE: T, S.TIMESTAMP: D,
    S.NUMERIC: INT, S.INT16: I4, S.INT32: F4, S.FLOAT32: N,
}  # fmt: skip
_UNARY_ARG = {
    UnaryFunc.NOT: B, UnaryFunc.NEG: F, UnaryFunc.IS_NULL: T, UnaryFunc.LOWER: STR,
    UnaryFunc.UPPER: STR, UnaryFunc.LENGTH: STR, UnaryFunc.ABS: INT, UnaryFunc.ROUND: F,
    UnaryFunc.TRIM: STR, UnaryFunc.LTRIM: STR, UnaryFunc.RTRIM: STR, UnaryFunc.CEIL: N,
    UnaryFunc.FLOOR: F, UnaryFunc.TRUNC: N, UnaryFunc.SIGN: F,
}  # fmt: skip
_BY_TYPE = {
    S.INT64: INT, S.FLOAT64: F, S.STRING: STR, S.BOOL: B, S.DATE: D, S.TIMESTAMP: T, S.NUMERIC: N,
    S.INT16: I2, S.INT32: I4, S.FLOAT32: F4,
}  # fmt: skip
_UNARY_ARG.update(
    {f: _BY_TYPE[SIGNATURES[f][0][0]] for f in UnaryFunc if f in SIGNATURES}
)  # the functions of one fixed signature
_STRING_BINARY = (BinaryFunc.LIKE, BinaryFunc.ILIKE, BinaryFunc.CONCAT)
_DIGITS_BINARY = (BinaryFunc.ROUND_DIGITS, BinaryFunc.TRUNC_DIGITS)
_TIME_BINARY = (BinaryFunc.ADD_MS, BinaryFunc.SUB_MS, BinaryFunc.ADD_US, BinaryFunc.SUB_US)
_VARIADIC_ARGS: dict[VariadicFunc, tuple[ScalarExpr, ...]] = {
    VariadicFunc.AND: (B, Literal(True, S.BOOL)),
    VariadicFunc.OR: (B, B, Literal(None, S.BOOL)),
    VariadicFunc.COALESCE: (INT, Literal(0, S.INT64)),
    VariadicFunc.CONCAT: (STR, Literal("-", S.STRING)),
    VariadicFunc.SUBSTRING: (STR, Literal(2, S.INT64), INT),
    VariadicFunc.GREATEST: (INT, Literal(None, S.INT64), INT),
    VariadicFunc.LEAST: (D, D),
    VariadicFunc.NULLIF: (INT, F),
    VariadicFunc.REPLACE: (STR, Literal("a", S.STRING), Literal("b", S.STRING)),
    VariadicFunc.LIKE_ESCAPE: (STR, Literal("a#%", S.STRING), Literal("#", S.STRING)),
    VariadicFunc.ILIKE_ESCAPE: (STR, STR, Literal("", S.STRING)),
    VariadicFunc.DATE_TRUNC: (Literal("month", S.STRING), T),
    VariadicFunc.EXTRACT: (Literal("epoch", S.STRING), D),
    VariadicFunc.CONCAT_WS: (STR, STR, Literal(None, S.STRING)),
    VariadicFunc.NUMERIC_TYPMOD: (N, Literal(5, S.INT64), Literal(2, S.INT64)),
    **{f: tuple(_BY_TYPE[a] for a in SIGNATURES[f][0]) for f in VariadicFunc if f in SIGNATURES},
}
_SAMPLE = {
    S.INT64: -7, S.FLOAT64: 2.5, S.STRING: "x", S.BOOL: True, S.DATE: dt.date(2026, 2, 28),
    S.TIMESTAMP: dt.datetime(2026, 11, 22, 15, 30, 0, 123456), S.NUMERIC: Decimal("-12.5"),
    S.INT16: -32768, S.INT32: 2147483647, S.FLOAT32: 0.10000000149011612,
}  # fmt: skip
_ZOO_EXPRS: tuple[ScalarExpr, ...] = (
    *(CallUnary(f, _UNARY_ARG[f]) for f in UnaryFunc),
    *(
        CallBinary(f, INT, F)
        for f in BinaryFunc
        if f not in (*_STRING_BINARY, *_TIME_BINARY, *_DIGITS_BINARY) and f not in SIGNATURES
    ),
    CallBinary(BinaryFunc.ROUND_DIGITS, N, INT),
    CallBinary(BinaryFunc.TRUNC_DIGITS, F, Literal(-2, S.INT64)),
    CallBinary(BinaryFunc.MUL, N, INT),
    CallBinary(BinaryFunc.DIV, N, F),
    *(
        CallBinary(f, *(_BY_TYPE[a] for a in SIGNATURES[f][0]))
        for f in BinaryFunc
        if f in SIGNATURES
    ),
    CallBinary(BinaryFunc.ADD_US, T, INT),
    CallBinary(BinaryFunc.SUB_US, D, INT),
    *(CallBinary(f, STR, Literal("a%", S.STRING)) for f in _STRING_BINARY),
    CallBinary(BinaryFunc.ADD_MS, T, INT),
    CallBinary(BinaryFunc.SUB_MS, D, Literal(-1, S.INT64)),
    *(CallVariadic(f, _VARIADIC_ARGS[f]) for f in VariadicFunc),
    *(Literal(_SAMPLE[t], t) for t in S),
    *(Literal(None, t) for t in S),
    *(Cast(_CAST_FROM[t], t) for t in S),
    If(B, STR, Literal(None, S.STRING)),
)
_W = _Z.arity + len(_ZOO_EXPRS)  # the width of the Map


def _to_out(p: Plan, count_first: bool = False) -> Plan:
    """A (string key, x, y) reduce reshaped to (string, int64, float64)."""
    a, b = ColumnRef(1), ColumnRef(2)
    n = a if count_first else Cast(a, S.INT64)
    x = Cast(Cast(b, S.INT64) if count_first else CallUnary(UnaryFunc.LENGTH, b), S.FLOAT64)
    return Project(Map(p, (n, x), ("n", "x")), (0, 3, 4))


_OUT = Schema.of(("k", S.STRING), ("n", S.INT64), ("x", S.FLOAT64))
ZOO: Plan = Let(
    "z",
    Filter(Map(Get(U1, _Z), _ZOO_EXPRS, tuple(f"e{k}" for k in range(len(_ZOO_EXPRS)))), (B,)),
    ArrangeBy(
        TopK(
            Union(
                (
                    Reduce(
                        Project(
                            Join((LetRef("z"), Get(U1, _Z), Get(U1, _Z)), ((0, _W, _W + 10),)),
                            (2, 0, 1),
                        ),
                        (0,),
                        (
                            Aggregate(AggFunc.COUNT),
                            Aggregate(AggFunc.SUM, 2, distinct=True),
                        ),
                    ),
                    Negate(
                        Reduce(
                            Join((Get(U1, _Z), Get(U1, _Z)), ((0, 10),), JoinKind.LEFT),
                            (2,),
                            (Aggregate(AggFunc.COUNT, 0), Aggregate(AggFunc.MIN, 1)),
                        )
                    ),
                    _to_out(
                        Reduce(
                            Join((Get(U1, _Z), Get(U1, _Z)), ((0, 10),), JoinKind.RIGHT),
                            (2,),
                            (
                                Aggregate(AggFunc.BOOL_AND, 3),
                                Aggregate(AggFunc.STRING_AGG, 12, separator=", "),
                            ),
                        )
                    ),
                    _to_out(
                        Reduce(
                            Join((Get(U1, _Z), Get(U1, _Z)), ((1, 10),), JoinKind.FULL),
                            (2,),
                            (
                                Aggregate(AggFunc.COUNT),
                                Aggregate(AggFunc.BOOL_OR, 13, distinct=True),
                            ),
                        ),
                        count_first=True,
                    ),
                    Threshold(
                        Distinct(
                            Reduce(
                                Get(U1, _Z),
                                (2,),
                                (Aggregate(AggFunc.MAX, 0), Aggregate(AggFunc.AVG, 1)),
                            )
                        )
                    ),
                    Constant(((("k", 1, 0.5), 1), ((None, None, None), -1)), _OUT),
                )
            ),
            (0,),
            (ColumnOrder(1, desc=True, nulls_last=False), ColumnOrder(2)),
            None,
            1,
        ),
        ((0,), (1, 2)),
    ),
)
"""A well-typed plan with every node class, function, cast, aggregate, literal type and NULL."""

# Values the strategies' small domains never hold: float specials and the ends of every range.
_EDGE_ROWS = (
    ((-(2**63), math.inf, "", False, dt.date.min, dt.datetime.min, Decimal(0)), 1),
    (
        (
            2**63 - 1,
            -math.inf,
            "ünï\u2603\U0001f600",
            True,
            dt.date.max,
            dt.datetime.max,
            Decimal("-123456789012345678901234567890123456789012.000000000000000000001"),
        ),
        -3,
    ),
    (
        (
            0,
            -0.0,
            "\x00",
            None,
            dt.date(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 1),
            Decimal("1E-30"),
        ),
        2,
    ),
    ((None, 5e-324, None, None, None, None, None), 2**62),
)
EXAMPLES: tuple[Plan, ...] = (
    ZOO,
    Constant(_EDGE_ROWS, _Z),
    Map(
        Get(U1, _Z),
        (
            Literal(math.nan, S.FLOAT64),
            Literal(1.7976931348623157e308, S.FLOAT64),
            Literal(-math.inf, S.FLOAT64),
        ),
        ("nan", "big", "-inf"),
    ),
    TopK(Get(U1, _Z), (0,), (), 0, 3),
    TemporalFilter(
        Get(U1, _Z),
        (
            (TemporalOp.GE, INT),
            (TemporalOp.LT, CallBinary(BinaryFunc.ADD_MS, T, Literal(3_600_000, S.INT64))),
            (TemporalOp.LE, D),
            (TemporalOp.GT, Literal(None, S.INT64)),
            (TemporalOp.EQ, Literal(7, S.INT64)),
        ),
    ),
    Window(
        Get(U1, _Z),
        (2,),
        (ColumnOrder(1, desc=True, nulls_last=False),),
        (
            WindowFunc(WindowFuncKind.ROW_NUMBER),
            WindowFunc(WindowFuncKind.RANK),
            WindowFunc(WindowFuncKind.DENSE_RANK),
            WindowFunc(WindowFuncKind.LAG, 0, 2, 0),
            WindowFunc(WindowFuncKind.LEAD, 4, -1),
            WindowFunc(WindowFuncKind.FIRST_VALUE, 2),
            WindowFunc(
                WindowFuncKind.LAST_VALUE,
                5,
                frame=WindowFrame(
                    False,
                    WindowBound(WindowBoundKind.PRECEDING, 2),
                    WindowBound(WindowBoundKind.UNBOUNDED_FOLLOWING),
                ),
            ),
            WindowFunc(
                WindowFuncKind.AGGREGATE,
                aggregate=Aggregate(AggFunc.SUM, 1),
                frame=WindowFrame(
                    True,
                    WindowBound(WindowBoundKind.PRECEDING, 1.5),
                    WindowBound(WindowBoundKind.FOLLOWING, 3.0),
                ),
            ),
            WindowFunc(
                WindowFuncKind.AGGREGATE,
                aggregate=Aggregate(AggFunc.STRING_AGG, 2, separator="/"),
                frame=WindowFrame(
                    False,
                    WindowBound(WindowBoundKind.CURRENT_ROW),
                    WindowBound(WindowBoundKind.FOLLOWING, 1),
                ),
            ),
        ),
    ),
    Project(Constant((), Schema(())), ()),
    Join((), (), JoinKind.INNER),
    Union(()),
)


def test_the_zoo_is_well_typed_and_the_examples_cover_every_kind() -> None:
    typecheck(ZOO)
    assert UNIVERSE - set().union(*map(_kinds, EXAMPLES)) == set()


def _search(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


_CLASSES = {t.__name__ for t in (*typing.get_args(Plan), *typing.get_args(ScalarExpr))}


def test_every_node_and_scalar_kind_is_produced_by_the_strategies_or_the_examples() -> None:
    """So the round-trip properties exercise the codec over the whole IR.

    The strategies must make every node class and scalar expression class (a
    sweep finds most; each rarer one is then searched for on its own); every
    function, cast, literal type and option comes from them or the examples.
    """
    seen: set[str] = set()

    @_search(150)
    @given(_PLANS)
    def sweep(plan: Plan) -> None:
        seen.update(_kinds(plan))

    sweep()
    for kind in sorted(_CLASSES - seen):
        with contextlib.suppress(NoSuchExample):
            seen.update(
                _kinds(find(_PLANS, lambda p, k=kind: k in _kinds(p), settings=_search(2000)))
            )
    assert _CLASSES - seen == set(), "node or expression classes the strategies never make"
    assert UNIVERSE - seen - set().union(*map(_kinds, EXAMPLES)) == set()


@pytest.mark.parametrize("plan", EXAMPLES, ids=lambda p: type(p).__name__)
def test_explicit_examples_round_trip_exactly(plan: Plan) -> None:
    # repr compares NaN, -0.0 and the special floats by spelling, which == cannot
    assert repr(_through_bytes(plan)) == repr(plan)
    assert repr(command_from_bytes(command_to_bytes(_in_command(plan)))) == repr(_in_command(plan))


def test_values_keep_their_exact_python_type() -> None:
    plan = Constant(_EDGE_ROWS, _Z)
    out = _through_bytes(plan)
    assert isinstance(out, Constant)
    for (row, diff), (orig, odiff) in zip(out.rows, plan.rows, strict=True):
        assert diff == odiff
        assert [type(v) for v in row] == [type(v) for v in orig]
    nan = _through_bytes(Map(Get(U1, _Z), (Literal(math.nan, S.FLOAT64),), ("n",)))
    assert isinstance(nan, Map) and isinstance(nan.exprs[0], Literal)
    assert math.isnan(nan.exprs[0].value)


def test_an_ill_typed_plan_travels_intact_for_the_receiver_to_refuse() -> None:
    wrong = Filter(Get(U1, _Z), (Literal(1, S.FLOAT64), Literal("x", S.INT64)))
    assert _through_bytes(wrong) == wrong  # the int stays an int: no coercion on the wire


def test_shared_subplans_are_sent_once_and_decoded_shared() -> None:
    base = Filter(Get(U1, _Z), (CallBinary(BinaryFunc.GT, ColumnRef(0), Literal(1, S.INT64)),))
    pred = base.predicates[0]
    plan = Union((base, Negate(base), Filter(base, (pred, pred))))
    m = encode_plan(plan)
    assert len(m.nodes) == 5  # get, filter, negate, filter, union
    assert len(m.exprs) == 3  # column, literal, gt
    out = decode_plan(m)
    assert out == plan
    assert isinstance(out, Union)
    first, negated, again = out.inputs
    assert isinstance(negated, Negate) and isinstance(again, Filter)
    assert negated.input is first and again.input is first
    assert again.predicates[0] is again.predicates[1]


def test_plans_far_deeper_than_protobufs_nesting_cap_travel() -> None:
    plan: Plan = Get(U1, _Z)
    expr: ScalarExpr = ColumnRef(0)
    for i in range(300):
        plan = Negate(plan) if i % 2 else Distinct(plan)
        expr = CallUnary(UnaryFunc.NEG, expr)
    plan = Map(plan, (expr,), ("deep",))
    cmd = _in_command(plan)
    assert command_from_bytes(command_to_bytes(cmd)) == cmd


# ---- malformed input ---------------------------------------------------------------


def _plan_msg(**node: typing.Any) -> pb.ProtoPlan:
    return pb.ProtoPlan(nodes=[pb.ProtoPlanNode(**node)])


_GET = pb.ProtoPlanNode(get=pb.ProtoGet(id="u1", schema=pb.ProtoSchema()))


@pytest.mark.parametrize(
    ("msg", "error", "match"),
    [
        (pb.ProtoPlan(), MalformedMessage, "without nodes"),
        (pb.ProtoPlan(nodes=[pb.ProtoPlanNode()]), UnknownMessageKind, "plan node #0"),
        (_plan_msg(negate=pb.ProtoNegate(input=0)), MalformedMessage, "not an earlier"),
        (
            pb.ProtoPlan(nodes=[_GET, pb.ProtoPlanNode(union=pb.ProtoUnion(inputs=[0, 5]))]),
            MalformedMessage,
            "plan node #1",
        ),
        (
            pb.ProtoPlan(nodes=[_GET, pb.ProtoPlanNode(filter=pb.ProtoFilter(predicates=[0]))]),
            MalformedMessage,
            "missing expression",
        ),
        (
            pb.ProtoPlan(
                exprs=[pb.ProtoScalarExpr(call_unary=pb.ProtoCallUnary(func=1, expr=0))],
                nodes=[_GET],
            ),
            MalformedMessage,
            "expression #0",
        ),
        (
            pb.ProtoPlan(exprs=[pb.ProtoScalarExpr()], nodes=[_GET]),
            UnknownMessageKind,
            "expression #0",
        ),
        (
            pb.ProtoPlan(
                exprs=[
                    pb.ProtoScalarExpr(column=0),
                    pb.ProtoScalarExpr(call_unary=pb.ProtoCallUnary(func=99, expr=0)),
                ],
                nodes=[_GET],
            ),
            UnknownMessageKind,
            "unary function 99",
        ),
        (
            pb.ProtoPlan(
                exprs=[
                    pb.ProtoScalarExpr(
                        literal=pb.ProtoLiteral(value=pb.ProtoDatum(int64_value=1), type=0)
                    )
                ],
                nodes=[_GET],
            ),
            UnknownMessageKind,
            "literal type 0",
        ),
        (
            pb.ProtoPlan(
                exprs=[pb.ProtoScalarExpr(literal=pb.ProtoLiteral(type=1))],
                nodes=[_GET],
            ),
            UnknownMessageKind,
            "value without a kind",
        ),
        (
            _plan_msg(
                constant=pb.ProtoConstant(
                    rows=[pb.ProtoConstantRow(values=[pb.ProtoDatum(date_days=2**31 - 1)])]
                )
            ),
            MalformedMessage,
            "date_days",
        ),
        (
            _plan_msg(
                constant=pb.ProtoConstant(
                    rows=[pb.ProtoConstantRow(values=[pb.ProtoDatum(timestamp_micros=-(2**63))])]
                )
            ),
            MalformedMessage,
            "timestamp_micros",
        ),
        (_plan_msg(get=pb.ProtoGet(id="x1")), MalformedMessage, "get"),
        (
            _plan_msg(
                get=pb.ProtoGet(
                    id="u1",
                    schema=pb.ProtoSchema(
                        columns=[pb.ProtoColumn(name="a", type=pb.ProtoColumnType(scalar=42))]
                    ),
                )
            ),
            UnknownMessageKind,
            "column type 42",
        ),
        (
            pb.ProtoPlan(nodes=[_GET, pb.ProtoPlanNode(join=pb.ProtoJoin(inputs=[0]))]),
            UnknownMessageKind,
            "join kind 0",
        ),
        (
            pb.ProtoPlan(
                nodes=[
                    _GET,
                    pb.ProtoPlanNode(
                        reduce=pb.ProtoReduce(aggregates=[pb.ProtoAggregate(func=17)])
                    ),
                ]
            ),
            UnknownMessageKind,
            "aggregate function 17",
        ),
    ],
)
def test_malformed_plans_are_refused_with_a_typed_error(
    msg: pb.ProtoPlan, error: type[WireError], match: str
) -> None:
    with pytest.raises(error, match=match):
        decode_plan(msg)
    cmd = pb.ProtoComputeCommand(
        create_dataflow=pb.ProtoDataflowDescription(
            objects_to_build=[pb.ProtoBuildDesc(id="u9", plan=msg)]
        )
    )
    with pytest.raises(error, match="object u9"):
        command_from_bytes(cmd.SerializeToString())


def test_an_object_without_a_plan_is_malformed() -> None:
    cmd = pb.ProtoComputeCommand(
        create_dataflow=pb.ProtoDataflowDescription(objects_to_build=[pb.ProtoBuildDesc(id="u9")])
    )
    with pytest.raises(MalformedMessage, match="without a plan"):
        command_from_bytes(cmd.SerializeToString())


@given(_PLANS, st.data())
def test_corrupted_plan_bytes_decode_or_raise_a_wire_error(plan: Plan, data: st.DataObject) -> None:
    raw = bytearray(command_to_bytes(_in_command(plan)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(WireError):
        command_from_bytes(bytes(raw[:cut] if data.draw(st.booleans()) else raw))


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        (Project(Get(U1, _Z), (-1,)), "projected column -1"),
        (Filter(Get(U1, _Z), (ColumnRef(-2),)), "column -2"),
        (Constant((((2**63,), 1),), Schema.of(("i", S.INT64))), "outside int64"),
        (Constant((((2**63 - 1,), 2**63),), Schema.of(("i", S.INT64))), "cannot encode plan"),
        (
            Constant(
                (((dt.datetime(2026, 1, 1, tzinfo=dt.UTC),), 1),),
                Schema.of(("t", S.TIMESTAMP)),
            ),
            "naive",
        ),
        (Constant((((b"bytes",), 1),), Schema.of(("s", S.STRING))), "not a value"),
        (TopK(Get(U1, _Z), limit=-1), "top-k limit"),
        (Map(Get(U1, _Z), ("not an expr",), ("x",)), "not a scalar expression"),  # type: ignore[arg-type]
        (Negate("not a plan"), "not a plan node"),  # type: ignore[arg-type]
        (Filter(Get(U1, _Z), (Literal(1, "decimal"),)), "literal type"),  # type: ignore[arg-type]
    ],
)
def test_unrepresentable_plans_are_refused_when_encoding(plan: Plan, match: str) -> None:
    with pytest.raises(MalformedMessage, match=match):
        encode_plan(plan)


def test_a_plan_nested_beyond_the_recursion_limit_is_refused_not_crashed() -> None:
    plan: Plan = Get(U1, _Z)
    for _ in range(5000):
        plan = Negate(plan)
    with pytest.raises(MalformedMessage, match="recursion"):
        encode_plan(plan)
