"""Hypothesis strategies for plans, input update streams and whole executor test cases.

Values come from small domains so that rows collide, joins match and groups
have several members; streams include retractions and negative intermediate
multiplicities. :func:`executor_cases` draws everything the executor contract
test (:mod:`tidegate.spec.testing.executor`) needs.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..plan.relation import (
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
from ..plan.scalar import (
    CAST_TABLE,
    SIGNATURES,
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
    scalar_type,
)
from ..plan.scalar_eval import NAN
from ..plan.schema import INT64_MAX, Column, ColumnType, ScalarType, Schema
from ..plan.typecheck import gets, typecheck
from ..protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    IndexImport,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)

__all__ = [
    "ExecutorAction",
    "ExecutorCase",
    "executor_cases",
    "order_bys",
    "peek_finishings",
    "plans",
    "scalar_exprs",
    "scalar_values",
    "schema_rows",
    "schemas",
    "update_streams",
    "window_frames",
    "window_funcs",
]

S = ScalarType
_SCALARS = (
    S.INT64,
    S.STRING,
    S.BOOL,
    S.FLOAT64,
    S.DATE,
    S.TIMESTAMP,
    S.NUMERIC,
    S.INT16,
    S.INT32,
    S.FLOAT32,
)
_COMMON = (S.INT64, S.INT64, S.STRING, S.BOOL, S.FLOAT64, S.DATE, S.TIMESTAMP, S.NUMERIC, S.INT32)
_NUMERICS = [
    Decimal(0),
    Decimal("1.5"),
    Decimal("-2.25"),
    Decimal("0.001"),
    Decimal(3),
    Decimal("1E-20"),
    Decimal("123456789012345678901234567890.123456789"),
]
"""Numerics: small ones, one far below a float64's precision (``1E-20`` prints as
``0.00000000000000000001``) and one of more digits than any float64 or Arrow decimal128 holds."""


def scalar_values(scalar: ScalarType) -> st.SearchStrategy[Any]:
    """Non-NULL values of ``scalar`` from a small domain.

    Besides small values: int64 ``INT64_MAX`` and ``2**62 + 1`` (sums and
    arithmetic overflow), float64 the largest finite float (float sums and
    averages overflow), ``2.0**62`` (an int64 ``2**62 + 1`` equals it as SQL
    compares them, though not exactly), NaN (the one object :data:`NAN`) and the
    infinities (a ``double`` holds them, as in PostgreSQL and Materialize, so
    every executor must carry, compare, group and order them), and the string
    ``"1_0"`` (an int64 but not a float64 literal); numerics :data:`_NUMERICS`.
    """
    if scalar is S.NUMERIC:
        return st.sampled_from(_NUMERICS)
    if scalar is S.INT32:  # the edges overflow on arithmetic cast back to integer
        return st.one_of(st.integers(-3, 3), st.sampled_from([2**31 - 1, -(2**31)]))
    if scalar is S.INT16:
        return st.one_of(st.integers(-3, 3), st.sampled_from([2**15 - 1, -(2**15)]))
    if scalar is S.FLOAT32:  # 0.1 as a single (0.10000000149...), its largest finite value
        return st.sampled_from([-1.5, 0.0, 0.5, 0.10000000149011612, 3.4028234663852886e38, NAN])
    if scalar is S.INT64:
        return st.one_of(st.integers(-3, 3), st.sampled_from([INT64_MAX, 2**62 + 1]))
    if scalar is S.FLOAT64:
        return st.sampled_from(
            [-1.5, 0.0, 0.5, 2.0, 0.1, 1.7976931348623157e308, 2.0**62, NAN, math.inf, -math.inf]
        )
    if scalar is S.STRING:
        return st.sampled_from(["", "a", "b", "ab", "B", "a%", "12", "1_0"])
    if scalar is S.BOOL:
        return st.booleans()
    if scalar is S.DATE:
        return st.sampled_from(
            [_dt.date(2024, 1, 1), _dt.date(2024, 2, 29), _dt.date(1999, 12, 31)]
        )
    return st.sampled_from([_dt.datetime(2024, 1, 1, 0, 0), _dt.datetime(2024, 1, 1, 12, 30, 0, 5)])


def _value_or_null(t: ColumnType) -> st.SearchStrategy[Any]:
    v = scalar_values(t.scalar)
    return st.one_of(st.none(), v) if t.nullable else v


def schemas(min_columns: int = 1, max_columns: int = 3) -> st.SearchStrategy[Schema]:
    """Schemas with columns ``c0, c1, ...`` of random types and nullability."""
    col = st.tuples(st.sampled_from(_COMMON), st.booleans())
    return st.lists(col, min_size=min_columns, max_size=max_columns).map(
        lambda cs: Schema(tuple(Column(f"c{i}", ColumnType(s, n)) for i, (s, n) in enumerate(cs)))
    )


def schema_rows(schema: Schema) -> st.SearchStrategy[Row]:
    """Rows valid for ``schema``."""
    return st.tuples(*(_value_or_null(c.type) for c in schema.columns))


def update_streams(
    schema: Schema, max_time: int = 4, max_updates: int = 12, distinct_rows: int = 4
) -> st.SearchStrategy[list[Update]]:
    """Updates over a few rows at times ``0..max_time``, diffs in ``-2..2`` (no zeros)."""

    @st.composite
    def build(draw: st.DrawFn) -> list[Update]:
        pool = draw(st.lists(schema_rows(schema), min_size=1, max_size=distinct_rows, unique=True))
        ups = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(pool),
                    st.integers(0, max_time),
                    st.sampled_from([-2, -1, 1, 1, 1, 2]),
                ),
                min_size=1,
                max_size=max_updates,
            )
        )
        return ups

    return build()


def order_bys(arity: int) -> st.SearchStrategy[tuple[ColumnOrder, ...]]:
    if arity == 0:
        return st.just(())
    one = st.builds(ColumnOrder, st.integers(0, arity - 1), st.booleans(), st.booleans())
    return st.lists(one, max_size=2).map(tuple)


def peek_finishings(arity: int) -> st.SearchStrategy[RowSetFinishing]:
    """Peek finishings for rows of ``arity`` columns."""
    project = (
        st.none()
        if arity == 0
        else st.one_of(st.none(), st.lists(st.integers(0, arity - 1), max_size=3).map(tuple))
    )
    return st.builds(
        RowSetFinishing,
        order_bys(arity),
        st.one_of(st.none(), st.integers(0, 4)),
        st.integers(0, 2),
        project,
    )


# -- scalar expressions --------------------------------------------------------------------


def _cols_of(schema: Schema, scalar: ScalarType) -> list[int]:
    return [i for i, c in enumerate(schema.columns) if c.type.scalar is scalar]


def _lit(scalar: ScalarType) -> st.SearchStrategy[ScalarExpr]:
    return st.one_of(scalar_values(scalar), st.none()).map(lambda v: Literal(v, scalar))


def scalar_exprs(
    schema: Schema, scalar: ScalarType, depth: int = 2
) -> st.SearchStrategy[ScalarExpr]:
    """Well-typed expressions over ``schema`` whose type is ``scalar``."""

    @st.composite
    def build(draw: st.DrawFn) -> ScalarExpr:
        return _expr(draw, schema, scalar, depth)

    return build()


def _expr(draw: st.DrawFn, schema: Schema, want: ScalarType, depth: int) -> ScalarExpr:
    cols = _cols_of(schema, want)
    leaf_choices = ["lit"] + ["col"] * (3 if cols else 0)
    choices = leaf_choices if depth <= 0 else [*leaf_choices, "op", "op", "if", "coalesce", "cast"]
    kind = draw(st.sampled_from(choices))
    sub = depth - 1
    if kind == "col":
        return ColumnRef(draw(st.sampled_from(cols)))
    if kind == "lit":
        return draw(_lit(want))
    if kind == "if":
        return If(
            _expr(draw, schema, S.BOOL, sub),
            _expr(draw, schema, want, sub),
            _expr(draw, schema, want, sub),
        )
    if kind == "coalesce":
        n = draw(st.integers(1, 3))
        return CallVariadic(
            VariadicFunc.COALESCE, tuple(_expr(draw, schema, want, sub) for _ in range(n))
        )
    if kind == "cast":
        sources = [s for s in _SCALARS if s is not want and (s, want) in CAST_TABLE]
        src = draw(st.sampled_from(sources))
        return Cast(_expr(draw, schema, src, sub), want)
    return _op(draw, schema, want, sub)


def _signature_call(draw: st.DrawFn, schema: Schema, want: ScalarType, d: int) -> ScalarExpr | None:
    """A call of one of the functions of one fixed signature (``SIGNATURES``) giving ``want``:
    string, math and date functions, each argument drawn of its type (an integer argument
    small, so that ``repeat`` and ``lpad`` stay small)."""
    funcs = sorted(
        (f for f, (_args, out) in SIGNATURES.items() if out is want), key=lambda f: f.value
    )
    if not funcs:
        return None
    f = draw(st.sampled_from(funcs))
    args = tuple(
        Literal(draw(st.integers(-3, 8)), S.INT64)
        if a is S.INT64 and draw(st.booleans())
        else _expr(draw, schema, a, d)
        for a in SIGNATURES[f][0]
    )
    if isinstance(f, UnaryFunc):
        return CallUnary(f, args[0])
    if isinstance(f, BinaryFunc):
        return CallBinary(f, args[0], args[1])
    return CallVariadic(f, args)


def _op(draw: st.DrawFn, schema: Schema, want: ScalarType, d: int) -> ScalarExpr:
    if want.is_narrow:
        # arithmetic on narrow numbers: widened operands, the result cast back (which may
        # overflow), as the SQL front end lowers it
        wide = want.wide
        if draw(st.booleans()):
            return Cast(_op(draw, schema, wide, d), want)
        f = draw(st.sampled_from([BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV]))
        x, y = (Cast(_expr(draw, schema, want, d), wide) for _ in range(2))
        return Cast(CallBinary(f, x, y), want)
    if draw(st.integers(0, 5)) == 0:
        call = _signature_call(draw, schema, want, d)
        if call is not None:
            return call
    if want is S.INT64:
        k = draw(st.sampled_from(["arith", "arith", "neg", "length", "abs", "greatest", "extract"]))
        if k == "abs":
            return CallUnary(UnaryFunc.ABS, _expr(draw, schema, S.INT64, d))
        if k == "greatest":
            vf = draw(st.sampled_from([VariadicFunc.GREATEST, VariadicFunc.LEAST]))
            n = draw(st.integers(1, 3))
            return CallVariadic(vf, tuple(_expr(draw, schema, S.INT64, d) for _ in range(n)))
        if k == "extract":
            src = draw(st.sampled_from([S.TIMESTAMP, S.DATE]))
            fields = ["year", "month", "day", "dow", "doy", "quarter"]
            if src is S.TIMESTAMP:
                fields += ["hour", "minute", "second"]
            field = Literal(draw(st.sampled_from(fields)), S.STRING)
            return CallVariadic(VariadicFunc.EXTRACT, (field, _expr(draw, schema, src, d)))
        if k == "arith":
            f = draw(
                st.sampled_from(
                    [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]
                )
            )
            return CallBinary(f, _expr(draw, schema, S.INT64, d), _expr(draw, schema, S.INT64, d))
        if k == "neg":
            return CallUnary(UnaryFunc.NEG, _expr(draw, schema, S.INT64, d))
        return CallUnary(UnaryFunc.LENGTH, _expr(draw, schema, S.STRING, d))
    if want is S.FLOAT64:
        k = draw(st.sampled_from(["arith", "arith", "arith", "round", "abs"]))
        if k != "arith":
            u = UnaryFunc.ROUND if k == "round" else UnaryFunc.ABS
            return CallUnary(u, _expr(draw, schema, S.FLOAT64, d))
        f = draw(st.sampled_from([BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV]))
        other = draw(st.sampled_from([S.INT64, S.FLOAT64]))
        return CallBinary(f, _expr(draw, schema, S.FLOAT64, d), _expr(draw, schema, other, d))
    if want is S.NUMERIC:
        k = draw(st.sampled_from(["arith", "arith", "arith", "unary", "digits", "typmod"]))
        if k == "unary":
            word = draw(st.sampled_from(["neg", "abs", "round", "ceil", "floor", "trunc", "sign"]))
            return CallUnary(UnaryFunc(word), _expr(draw, schema, S.NUMERIC, d))
        if k == "digits":
            digits = draw(st.sampled_from([BinaryFunc.ROUND_DIGITS, BinaryFunc.TRUNC_DIGITS]))
            places = Literal(draw(st.integers(-2, 3)), S.INT64)
            return CallBinary(digits, _expr(draw, schema, S.NUMERIC, d), places)
        if k == "typmod":
            p = draw(st.integers(1, 12))
            scale = Literal(draw(st.integers(0, p)), S.INT64)
            return CallVariadic(
                VariadicFunc.NUMERIC_TYPMOD,
                (_expr(draw, schema, S.NUMERIC, d), Literal(p, S.INT64), scale),
            )
        f = draw(
            st.sampled_from(
                [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]
            )
        )
        other = draw(st.sampled_from([S.INT64, S.NUMERIC]))
        pair = [_expr(draw, schema, S.NUMERIC, d), _expr(draw, schema, other, d)]
        if draw(st.booleans()):
            pair.reverse()
        return CallBinary(f, pair[0], pair[1])
    if want is S.STRING:
        k = draw(
            st.sampled_from(
                ["lower", "upper", "concat", "substring", "trim", "rtrim", "replace", "cat"]
            )
        )
        if k in ("lower", "upper", "trim", "rtrim"):
            return CallUnary(UnaryFunc(k), _expr(draw, schema, S.STRING, d))
        if k == "replace":
            return CallVariadic(
                VariadicFunc.REPLACE,
                (
                    _expr(draw, schema, S.STRING, d),
                    Literal(draw(st.sampled_from(["a", "", " "])), S.STRING),
                    _expr(draw, schema, S.STRING, d),
                ),
            )
        if k == "cat":
            return CallBinary(
                BinaryFunc.CONCAT,
                _expr(draw, schema, S.STRING, d),
                _expr(draw, schema, S.STRING, d),
            )
        if k == "concat":
            return CallVariadic(
                VariadicFunc.CONCAT,
                (_expr(draw, schema, S.STRING, d), _expr(draw, schema, S.STRING, d)),
            )
        args = [_expr(draw, schema, S.STRING, d), _expr(draw, schema, S.INT64, d)]
        if draw(st.booleans()):
            args.append(_expr(draw, schema, S.INT64, d))
        return CallVariadic(VariadicFunc.SUBSTRING, tuple(args))
    if want is S.BOOL:
        k = draw(st.sampled_from(["cmp", "cmp", "logic", "not", "is_null", "like"]))
        if k == "cmp":
            t = draw(st.sampled_from(_SCALARS))
            f = draw(
                st.sampled_from(
                    [
                        BinaryFunc.EQ,
                        BinaryFunc.NE,
                        BinaryFunc.LT,
                        BinaryFunc.LE,
                        BinaryFunc.GT,
                        BinaryFunc.GE,
                    ]
                )
            )
            return CallBinary(f, _expr(draw, schema, t, d), _expr(draw, schema, t, d))
        if k == "logic":
            vf = draw(st.sampled_from([VariadicFunc.AND, VariadicFunc.OR]))
            n = draw(st.integers(1, 3))
            return CallVariadic(vf, tuple(_expr(draw, schema, S.BOOL, d) for _ in range(n)))
        if k == "not":
            return CallUnary(UnaryFunc.NOT, _expr(draw, schema, S.BOOL, d))
        if k == "is_null":
            return CallUnary(
                UnaryFunc.IS_NULL, _expr(draw, schema, draw(st.sampled_from(_SCALARS)), d)
            )
        pattern = Literal(draw(st.sampled_from(["a%", "_", "%b%", "a\\%", "", "a\\"])), S.STRING)
        subject = _expr(draw, schema, S.STRING, d)
        like = draw(st.sampled_from(["like", "like", "ilike", "escape"]))
        if like == "escape":
            esc = Literal(draw(st.sampled_from(["#", "", "%"])), S.STRING)
            return CallVariadic(VariadicFunc.ILIKE_ESCAPE, (subject, pattern, esc))
        f = BinaryFunc.ILIKE if like == "ilike" else BinaryFunc.LIKE
        return CallBinary(f, subject, pattern)
    if want is S.TIMESTAMP and draw(st.booleans()):
        if draw(st.booleans()):
            unit = Literal(draw(st.sampled_from(["second", "hour", "week", "month"])), S.STRING)
            return CallVariadic(
                VariadicFunc.DATE_TRUNC, (unit, _expr(draw, schema, S.TIMESTAMP, d))
            )
        f = draw(st.sampled_from([BinaryFunc.ADD_MS, BinaryFunc.SUB_MS]))
        src = draw(st.sampled_from([S.TIMESTAMP, S.DATE]))
        ms = Literal(draw(st.sampled_from([0, 1500, -86_400_000, 2**62])), S.INT64)
        return CallBinary(f, _expr(draw, schema, src, d), ms)
    return (
        draw(_lit(want))
        if not _cols_of(schema, want)
        else ColumnRef(draw(st.sampled_from(_cols_of(schema, want))))
    )


# -- plans ---------------------------------------------------------------------------------


def plans(inputs: Mapping[GlobalId, Schema], max_depth: int = 3) -> st.SearchStrategy[Plan]:
    """Well-typed plans reading ``inputs`` (every operator can appear, nested up to ``max_depth``)."""

    @st.composite
    def build(draw: st.DrawFn) -> Plan:
        return _plan(draw, dict(inputs), max_depth, {})[0]

    return build()


def _plan(
    draw: st.DrawFn, inputs: Mapping[GlobalId, Schema], depth: int, lets: Mapping[str, Schema]
) -> tuple[Plan, Schema]:
    leaves = ["get", "get", "get", "constant"] + (["let_ref"] * 3 if lets else [])
    ops = [
        "map",
        "filter",
        "project",
        "union",
        "negate",
        "join",
        "reduce",
        "distinct",
        "threshold",
        "top_k",
        "window",
        "temporal",
        "arrange",
        "let",
        "left_join",
    ]
    kind = draw(st.sampled_from(leaves if depth <= 0 else leaves + ops * 2))
    d = depth - 1
    if kind == "get":
        gid = draw(st.sampled_from(sorted(inputs)))
        return Get(gid, inputs[gid]), inputs[gid]
    if kind == "constant":
        schema = draw(
            st.one_of(st.sampled_from([inputs[g] for g in sorted(inputs)]), schemas(0, 2))
        )
        return _constant(draw, schema), schema
    if kind == "let_ref":
        name = draw(st.sampled_from(sorted(lets)))
        return LetRef(name), lets[name]
    if kind == "let":
        name = f"l{len(lets)}"
        value, vs = _plan(draw, inputs, d, lets)
        body, bs = _plan(draw, inputs, d, {**lets, name: vs})
        return Let(name, value, body), bs
    if kind in ("join", "left_join"):
        n = 2 if kind == "left_join" else draw(st.integers(1, 3))
        parts = [_plan(draw, inputs, d, lets) for _ in range(n)]
        join_kind = (
            draw(st.sampled_from([JoinKind.LEFT, JoinKind.RIGHT, JoinKind.FULL]))
            if kind == "left_join"
            else JoinKind.INNER
        )
        eqs = _equivalences(draw, [s for _, s in parts], join_kind)
        plan: Plan = Join(tuple(p for p, _ in parts), eqs, join_kind)
        return plan, typecheck(plan, None, lets)
    inner, schema = _plan(draw, inputs, d, lets)
    if kind == "map":
        exprs, names, cur = [], [], schema
        for i in range(draw(st.integers(1, 2))):
            e = _expr(draw, cur, draw(st.sampled_from(_COMMON)), 2)
            exprs.append(e)
            names.append(f"m{i}")
            cur = cur.concat(Schema((Column(f"m{i}", scalar_type(e, cur)),)))
        plan = Map(inner, tuple(exprs), tuple(names))
    elif kind == "filter":
        preds = tuple(_expr(draw, schema, S.BOOL, 2) for _ in range(draw(st.integers(1, 2))))
        plan = Filter(inner, preds)
    elif kind == "project":
        cols = draw(st.lists(st.integers(0, schema.arity - 1), max_size=3)) if schema.arity else []
        plan = Project(inner, tuple(cols))
    elif kind == "union":
        other_kind = draw(st.sampled_from(["negate", "filter", "constant", "same"]))
        if other_kind == "negate":
            other: Plan = Negate(inner)
        elif other_kind == "filter":
            other = Filter(inner, (_expr(draw, schema, S.BOOL, 1),))
        elif other_kind == "constant":
            other = _constant(draw, schema)
        else:
            other = inner
        plan = Union((inner, other))
    elif kind == "negate":
        plan = Negate(inner)
    elif kind == "distinct":
        plan = Distinct(inner)
    elif kind == "threshold":
        plan = Threshold(inner)
    elif kind == "arrange":
        key = (
            tuple(draw(st.lists(st.integers(0, schema.arity - 1), max_size=2)))
            if schema.arity
            else ()
        )
        plan = ArrangeBy(inner, (key,))
    elif kind == "reduce":
        key = (
            tuple(draw(st.lists(st.integers(0, max(schema.arity - 1, 0)), max_size=2, unique=True)))
            if schema.arity
            else ()
        )
        aggs = tuple(draw(st.lists(_aggregates(schema), min_size=1, max_size=3)))
        plan = Reduce(inner, key, aggs)
    elif kind == "temporal":
        plan = TemporalFilter(
            inner, tuple(draw(st.lists(_temporal_predicates(schema), min_size=1, max_size=3)))
        )
    elif kind == "window":
        key = (
            tuple(draw(st.lists(st.integers(0, schema.arity - 1), max_size=1, unique=True)))
            if schema.arity
            else ()
        )
        order = draw(order_bys(schema.arity))
        funcs = draw(st.lists(window_funcs(schema, order), min_size=1, max_size=2))
        plan = Window(inner, key, order, tuple(funcs))
    else:
        key = (
            tuple(draw(st.lists(st.integers(0, schema.arity - 1), max_size=1, unique=True)))
            if schema.arity
            else ()
        )
        plan = TopK(
            inner,
            key,
            draw(order_bys(schema.arity)),
            draw(st.one_of(st.none(), st.integers(0, 3))),
            draw(st.integers(0, 2)),
        )
    return plan, typecheck(plan, None, lets)


def _temporal_predicates(schema: Schema) -> st.SearchStrategy[tuple[TemporalOp, ScalarExpr]]:
    """``mz_now() <op> bound`` predicates whose bounds fall among a history's times (an int64
    column plus a little, or a literal, now and then NULL), for a :class:`TemporalFilter`."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[TemporalOp, ScalarExpr]:
        op = draw(st.sampled_from(list(TemporalOp)))
        ints = _cols_of(schema, S.INT64)
        use_column = draw(st.booleans())
        if ints and use_column:
            col = ColumnRef(draw(st.sampled_from(ints)))
            bound: ScalarExpr = CallBinary(
                BinaryFunc.ADD, col, Literal(draw(st.integers(0, 3)), S.INT64)
            )
        else:
            bound = Literal(draw(st.one_of(st.integers(0, 7), st.none())), S.INT64)
        return op, bound

    return build()


def _constant(draw: st.DrawFn, schema: Schema) -> Constant:
    entries = draw(
        st.lists(st.tuples(schema_rows(schema), st.sampled_from([-1, 1, 2])), max_size=3)
    )
    return Constant(tuple(entries), schema)


_BOUNDS = list(WindowBoundKind)


def window_frames(schema: Schema, order: tuple[ColumnOrder, ...]) -> st.SearchStrategy[WindowFrame]:
    """Valid frames: ``ROWS`` with row offsets, ``RANGE`` with value offsets only over one
    numeric ORDER BY column."""
    numeric = len(order) == 1 and schema.columns[order[0].column].type.scalar.is_numeric

    @st.composite
    def build(draw: st.DrawFn) -> WindowFrame:
        is_range = draw(st.booleans())
        offsets = not is_range or numeric
        kinds = [
            k
            for k in _BOUNDS
            if offsets or k not in (WindowBoundKind.PRECEDING, WindowBoundKind.FOLLOWING)
        ]
        a = draw(st.sampled_from(kinds[:-1]))  # a start is never UNBOUNDED FOLLOWING
        b = draw(st.sampled_from([k for k in kinds[1:] if _BOUNDS.index(k) >= _BOUNDS.index(a)]))

        def bound(k: WindowBoundKind) -> WindowBound:
            if k not in (WindowBoundKind.PRECEDING, WindowBoundKind.FOLLOWING):
                return WindowBound(k)
            if is_range and draw(st.booleans()):
                return WindowBound(k, draw(st.sampled_from([0.5, 1.0, 2.5])))
            return WindowBound(k, draw(st.integers(0, 2)))

        return WindowFrame(is_range, bound(a), bound(b))

    return build()


def window_funcs(schema: Schema, order: tuple[ColumnOrder, ...]) -> st.SearchStrategy[WindowFunc]:
    """Valid functions of a :class:`Window` over ``schema`` ordered by ``order``."""

    @st.composite
    def build(draw: st.DrawFn) -> WindowFunc:
        kinds = list(WindowFuncKind) if schema.arity else [WindowFuncKind.ROW_NUMBER]
        kind = draw(st.sampled_from(kinds))
        if kind in (WindowFuncKind.ROW_NUMBER, WindowFuncKind.RANK, WindowFuncKind.DENSE_RANK):
            return WindowFunc(kind)
        if kind is WindowFuncKind.AGGREGATE:
            agg = draw(_aggregates(schema))
            agg = Aggregate(agg.func, agg.column, False, agg.separator)
            return WindowFunc(kind, aggregate=agg, frame=draw(window_frames(schema, order)))
        col = draw(st.integers(0, schema.arity - 1))
        if kind in (WindowFuncKind.LAG, WindowFuncKind.LEAD):
            t = schema.columns[col].type.scalar
            same = [i for i, c in enumerate(schema.columns) if c.type.scalar is t]
            default = draw(st.one_of(st.none(), st.sampled_from(same)))
            return WindowFunc(kind, col, draw(st.integers(-1, 2)), default)
        return WindowFunc(kind, col, frame=draw(window_frames(schema, order)))

    return build()


def _aggregates(schema: Schema) -> st.SearchStrategy[Aggregate]:
    @st.composite
    def build(draw: st.DrawFn) -> Aggregate:
        if schema.arity == 0 or draw(st.integers(0, 4)) == 0:
            return Aggregate(AggFunc.COUNT)
        col = draw(st.integers(0, schema.arity - 1))
        scalar = schema.columns[col].type.scalar
        numeric = scalar.is_numeric and not scalar.is_narrow
        funcs = [AggFunc.COUNT, AggFunc.MIN, AggFunc.MAX] + (
            [AggFunc.SUM, AggFunc.AVG] * 2 if numeric else []
        )
        if scalar is S.BOOL:
            funcs += [AggFunc.BOOL_AND, AggFunc.BOOL_OR]
        if scalar is S.STRING:
            funcs += [AggFunc.STRING_AGG]
        func = draw(st.sampled_from(funcs))
        sep = draw(st.sampled_from([",", "", " | "])) if func is AggFunc.STRING_AGG else None
        return Aggregate(func, col, draw(st.integers(0, 3)) == 0, sep)

    return build()


def _equivalences(
    draw: st.DrawFn, parts: Sequence[Schema], kind: JoinKind
) -> tuple[tuple[int, ...], ...]:
    offsets, total = [], 0
    for s in parts:
        offsets.append(total)
        total += s.arity
    cols = [
        (p, offsets[p] + i, c.type.scalar)
        for p, s in enumerate(parts)
        for i, c in enumerate(s.columns)
    ]
    pairs = [
        (a, b)
        for pa, a, ta in cols
        for pb, b, tb in cols
        if pa < pb and (ta is tb or (ta.is_numeric and tb.is_numeric))
    ]
    if not pairs:
        return ()
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=2, unique=True))
    return tuple(chosen)


# -- executor cases ------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutorAction:
    """One step of an executor test: ``feed`` (input, updates, new upper), ``step``, or ``compact`` (export, frontier)."""

    kind: str
    target: GlobalId | None = None
    updates: tuple[Update, ...] = ()
    frontier: Antichain | None = None


@dataclass(frozen=True)
class ExecutorCase:
    """A dataflow, every input's full update stream, a script of actions, and a finishing per index."""

    dataflow: DataflowDescription
    inputs: Mapping[GlobalId, tuple[Update, ...]]
    actions: tuple[ExecutorAction, ...]
    finishings: Mapping[GlobalId, RowSetFinishing]
    max_time: int
    readers: tuple[DataflowDescription, ...] = ()
    """Dataflows installed after ``dataflow`` that read its indexes (by index import)."""


@st.composite
def executor_cases(draw: st.DrawFn, max_time: int = 4, max_depth: int = 3) -> ExecutorCase:
    """A random dataflow (1-2 inputs, 1-2 objects, an index and a subscribe per object) and a script."""
    n_inputs = draw(st.integers(1, 2))
    input_schemas = {GlobalId.user(i + 1): draw(schemas(1, 3)) for i in range(n_inputs)}
    if n_inputs == 2 and draw(st.booleans()):
        input_schemas[GlobalId.user(2)] = input_schemas[GlobalId.user(1)]
    objects: list[BuildDesc] = []
    visible = dict(input_schemas)
    for k in range(draw(st.integers(1, 2))):
        oid = GlobalId.user(10 + k)
        plan = draw(plans(visible, max_depth))
        objects.append(BuildDesc(oid, plan))
        visible[oid] = typecheck(plan)
    index_exports, sinks, fins = [], [], {}
    for k, b in enumerate(objects):
        arity = visible[b.id].arity
        key = (
            tuple(draw(st.lists(st.integers(0, arity - 1), max_size=2, unique=True)))
            if arity
            else ()
        )
        ix = GlobalId.user(20 + k)
        index_exports.append(IndexExport(ix, b.id, key))
        sinks.append(SinkExport(GlobalId.transient(k + 1), b.id, SubscribeConnection()))
        fins[ix] = draw(peek_finishings(arity))
    as_of = draw(st.integers(0, 2))
    used = sorted({g for b in objects for g in _gets(b.plan)} & set(input_schemas))
    desc = DataflowDescription(
        "case",
        source_imports=tuple(SourceImport(g) for g in used),
        objects_to_build=tuple(objects),
        index_exports=tuple(index_exports),
        sink_exports=tuple(sinks),
        as_of=Antichain([as_of]),
    )
    inputs = {g: tuple(draw(update_streams(input_schemas[g], max_time))) for g in used}
    actions: list[ExecutorAction] = []
    uppers = dict.fromkeys(used, 0)
    unsent = {g: list(inputs[g]) for g in used}
    sinces = {ix.id: as_of for ix in index_exports}
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["feed", "feed", "step", "compact"]))
        if kind == "feed" and used:
            g = draw(st.sampled_from(used))
            new_upper = draw(st.integers(uppers[g], max_time + 1))
            send = [u for u in unsent[g] if u[1] < new_upper or draw(st.integers(0, 3)) == 0]
            for u in send:
                unsent[g].remove(u)
            uppers[g] = new_upper
            actions.append(ExecutorAction("feed", g, tuple(send), Antichain([new_upper])))
        elif kind == "compact":
            ix_id = draw(st.sampled_from(sorted(sinces)))
            f = draw(st.integers(sinces[ix_id], max_time + 1))
            sinces[ix_id] = f
            actions.append(ExecutorAction("compact", ix_id, frontier=Antichain([f])))
        else:
            actions.append(ExecutorAction("step"))
    for g in used:  # finish: everything fed, inputs closed
        actions.append(ExecutorAction("feed", g, tuple(unsent[g]), Antichain()))
    actions.append(ExecutorAction("step"))
    readers: tuple[DataflowDescription, ...] = ()
    if draw(st.booleans()):
        imported = draw(st.sampled_from(index_exports))
        schema = visible[imported.on_id]
        plan = draw(plans({imported.on_id: schema}, max_depth=2))
        arity = typecheck(plan).arity
        reader_ix = GlobalId.user(41)
        key = tuple(draw(st.lists(st.integers(0, arity - 1), max_size=1))) if arity else ()
        readers = (
            DataflowDescription(
                "reader",
                index_imports=(IndexImport(imported.id, imported.on_id, imported.key),),
                objects_to_build=(BuildDesc(GlobalId.user(40), plan),),
                index_exports=(IndexExport(reader_ix, GlobalId.user(40), key),),
                sink_exports=(
                    SinkExport(GlobalId.transient(11), GlobalId.user(40), SubscribeConnection()),
                ),
                as_of=Antichain([as_of + draw(st.integers(0, 2))]),
            ),
        )
        fins[reader_ix] = draw(peek_finishings(arity))
    return ExecutorCase(desc, inputs, tuple(actions), fins, max_time, readers)


def _gets(plan: Plan) -> set[GlobalId]:
    return set(gets(plan))
