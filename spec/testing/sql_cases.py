"""Fixed cases whose answers SQL (PostgreSQL) fixes, for the reference and every executor.

The property test of :mod:`.executor` checks executors against the reference
evaluator, so a meaning that the reference and the executors get wrong in the
same way (they share the scalar evaluation code) goes unnoticed there. Each
:class:`SqlCase` pins the answer itself: a plan, its input updates, and the
rows and errors SQL gives at some times. :meth:`.ExecutorContractTests.test_sql_cases`
checks that the reference gives exactly those and that an executor, fed the
inputs one time at a time, agrees with the reference at every time.

The cases are the edge cases where engines most often part from SQL: sums beyond the range of their
type, int64 compared with (and joined to) float64, string-to-number casts of
non-ASCII or malformed numbers, LIKE patterns ending in the escape
character, string-to-bool/date/timestamp casts in SQL's literal syntax, and
the plan language of its section 4 (right and full joins, bool and string
aggregates, the scalar functions users reach for).
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..frontier import Antichain, Row, Update
from ..ids import GlobalId
from ..plan.relation import AggFunc, Aggregate, Get, Join, JoinKind, Map, Plan, Reduce
from ..plan.scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from ..plan.scalar_eval import NAN
from ..plan.schema import ScalarType, Schema
from ..protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from ..strategies.plan import ExecutorAction, ExecutorCase

__all__ = ["SQL_CASES", "SqlCase", "sql_executor_case"]

S = ScalarType
_A, _B, _C = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
_OBJ, _IDX, _SUB = GlobalId.user(10), GlobalId.user(20), GlobalId.transient(1)

DBL_MAX = 1.7976931348623157e308
"""The largest finite float64: two of them sum beyond the float64 range."""
BIG = 2**62
"""2**62: two of them sum to 2**63, one beyond the int64 range."""


@dataclass(frozen=True)
class SqlCase:
    """``plan`` over ``inputs`` (update streams by input id) must give ``expected[t]`` at ``t``.

    ``expected`` maps a time to ``(rows, errors)``: the rows with their
    multiplicities and the error messages with theirs, as the reference's
    :class:`~tidegate.spec.plan.reference.Collection` holds them.
    """

    name: str
    plan: Plan
    inputs: Mapping[GlobalId, tuple[Update, ...]]
    expected: Mapping[int, tuple[dict[Row, int], dict[str, int]]] = field(default_factory=dict)

    @property
    def max_time(self) -> int:
        return max((t for ups in self.inputs.values() for _, t, _ in ups), default=0)


def sql_executor_case(case: SqlCase) -> ExecutorCase:
    """``case`` as an :class:`ExecutorCase`: one dataflow with an index and a subscribe on the
    plan, fed one time per step (so incremental state is exercised), then closed."""
    desc = DataflowDescription(
        case.name,
        source_imports=tuple(SourceImport(g) for g in case.inputs),
        objects_to_build=(BuildDesc(_OBJ, case.plan),),
        index_exports=(IndexExport(_IDX, _OBJ, ()),),
        sink_exports=(SinkExport(_SUB, _OBJ, SubscribeConnection()),),
        as_of=Antichain([0]),
    )
    actions: list[ExecutorAction] = []
    for t in range(case.max_time + 1):
        for g, ups in case.inputs.items():
            now = tuple(u for u in ups if u[1] == t)
            actions.append(ExecutorAction("feed", g, now, Antichain([t + 1])))
        actions.append(ExecutorAction("step"))
    for g in case.inputs:
        actions.append(ExecutorAction("feed", g, (), Antichain()))
    actions.append(ExecutorAction("step"))
    return ExecutorCase(
        desc,
        {g: tuple(ups) for g, ups in case.inputs.items()},
        tuple(actions),
        {_IDX: RowSetFinishing()},
        case.max_time,
    )


def _col(i: int) -> ColumnRef:
    return ColumnRef(i)


def _cmp(f: BinaryFunc, a: ScalarExpr, b: ScalarExpr) -> CallBinary:
    return CallBinary(f, a, b)


def _sum_cases() -> list[SqlCase]:
    floats = Schema.of(("g", "string"), ("v", "float64"))
    sum_count = (Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.COUNT))
    float_ups = (
        (("a", DBL_MAX), 0, 1),
        (("b", 1.0), 0, 1),
        (("a", DBL_MAX), 1, 1),  # a's sum is beyond float64: an error, and no row for a
        (("a", -DBL_MAX), 2, 1),  # back in range
    )
    out: list[SqlCase] = [
        SqlCase(
            "float-sum-overflow",
            Reduce(Get(_A, floats), (0,), sum_count),
            {_A: float_ups},
            {
                0: ({("a", DBL_MAX, 1): 1, ("b", 1.0, 1): 1}, {}),
                1: ({("b", 1.0, 1): 1}, {"float out of range": 1}),
                2: ({("a", DBL_MAX, 3): 1, ("b", 1.0, 1): 1}, {}),
            },
        )
    ]
    # not SQL's (it has no negative multiplicities), but the same rule: x, x counted +1 and
    # 0 counted -1 average to 2x, beyond float64 for x = DBL_MAX
    out.append(
        SqlCase(
            "float-avg-overflow-negative-multiplicity",
            Reduce(Get(_A, floats), (0,), (Aggregate(AggFunc.AVG, 1),)),
            {_A: ((("a", DBL_MAX), 0, 2), (("a", 0.0), 0, -1), (("a", 0.0), 1, 1))},
            {0: ({}, {"float out of range": 1}), 1: ({("a", DBL_MAX): 1}, {})},
        )
    )
    int_ups = (
        (("a", BIG), 0, 1),
        (("b", -BIG), 0, 2),
        (("a", BIG), 1, 1),  # a: 2**63, out of range
        (("b", -BIG), 1, 1),  # b: -3 * 2**62, out of range
        (("a", -7), 2, 1),  # a: 2**63 - 7, in range again
        (("b", BIG), 3, 1),  # b: -2**63, the least int64
    )
    over = "integer out of range"
    for nullable in (False, True):
        ints = Schema.of(("g", "string"), ("v", "int64", nullable))
        base = Get(_A, ints)
        kind = "nullable" if nullable else "non-nullable"
        out.append(
            SqlCase(
                f"int-sum-overflow-{kind}",
                Reduce(base, (0,), sum_count),
                {_A: int_ups},
                {
                    0: ({("a", BIG, 1): 1, ("b", -2 * BIG, 2): 1}, {}),
                    1: ({}, {over: 2}),
                    2: ({("a", 2**63 - 7, 3): 1}, {over: 1}),
                    3: ({("a", 2**63 - 7, 3): 1, ("b", -(2**63), 4): 1}, {}),
                },
            )
        )
    ints = Schema.of(("g", "string"), ("v", "int64"))
    # recomputed (min) and distinct sums: the other Reduce implementations
    out.append(
        SqlCase(
            "int-sum-overflow-recomputed",
            Reduce(
                Get(_A, ints),
                (0,),
                (Aggregate(AggFunc.MIN, 1), Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.AVG, 1)),
            ),
            {_A: int_ups},
            {
                1: ({}, {"integer out of range": 2}),
                2: ({("a", -7, 2**63 - 7, (2**63 - 7) / 3): 1}, {"integer out of range": 1}),
            },
        )
    )
    out.append(
        SqlCase(
            "int-sum-distinct-overflow",
            Reduce(
                Get(_A, ints),
                (),
                (Aggregate(AggFunc.SUM, 1, distinct=True),),
            ),
            {_A: ((("a", BIG), 0, 1), (("b", BIG - 1), 0, 1), (("c", 1), 1, 1))},
            {0: ({(2**63 - 1,): 1}, {}), 1: ({}, {"integer out of range": 1})},
        )
    )
    return out


def _comparison_cases() -> list[SqlCase]:
    mixed = Schema.of(("i", "int64"), ("f", "float64"))
    funcs = (BinaryFunc.EQ, BinaryFunc.NE, BinaryFunc.LT, BinaryFunc.LE, BinaryFunc.GT)
    exprs = (
        *(_cmp(f, _col(0), _col(1)) for f in funcs),
        _cmp(BinaryFunc.EQ, _col(1), _col(0)),
        _cmp(BinaryFunc.GE, _col(0), Literal(float(BIG), S.FLOAT64)),
        _cmp(BinaryFunc.LT, Literal(BIG + 1, S.INT64), _col(1)),
    )
    ups = (((BIG + 1, float(BIG)), 0, 1), ((3, 2.5), 0, 1))
    big = (BIG + 1, float(BIG))
    return [
        SqlCase(
            "int-float-comparison",
            Map(Get(_A, mixed), exprs, tuple(f"c{i}" for i in range(len(exprs)))),
            {_A: ups},
            {
                0: (
                    {
                        (*big, True, False, False, True, False, True, True, False): 1,
                        (3, 2.5, False, True, False, False, True, False, False, False): 1,
                    },
                    {},
                )
            },
        )
    ]


def _join_cases() -> list[SqlCase]:
    left = Schema.of(("i", "int64"), ("tag", "string"))
    right = Schema.of(
        ("f", "float64"),
    )
    third = Schema.of(
        ("j", "int64"),
    )
    lups = (
        ((BIG + 1, "odd"), 0, 1),
        ((BIG, "even"), 0, 1),
        ((0, "zero"), 0, 1),
        ((5, "five"), 0, 1),
        ((None, "null"), 0, 1),
        ((BIG + 1, "late"), 2, 1),
    )
    rups = (((float(BIG),), 0, 1), ((-0.0,), 1, 1), ((None,), 1, 1))
    inner = Join((Get(_A, left), Get(_B, right)), ((0, 2),))
    left_join = Join((Get(_A, left), Get(_B, right)), ((0, 2),), JoinKind.LEFT)
    flip = Join((Get(_B, right), Get(_A, left)), ((0, 1),))
    fb = float(BIG)
    at2_inner = {
        (BIG + 1, "odd", fb): 1,
        (BIG, "even", fb): 1,
        (0, "zero", -0.0): 1,
        (BIG + 1, "late", fb): 1,
    }
    out = [
        SqlCase(
            "int-float-join-inner",
            inner,
            {_A: lups, _B: rups},
            {
                0: ({(BIG + 1, "odd", fb): 1, (BIG, "even", fb): 1}, {}),
                2: (at2_inner, {}),
            },
        ),
        SqlCase(
            "float-int-join-inner",
            flip,
            {_A: lups, _B: rups},
            {2: ({(r[2], r[0], r[1]): c for r, c in at2_inner.items()}, {})},
        ),
        SqlCase(
            "int-float-join-left",
            left_join,
            {_A: lups, _B: rups},
            {
                0: (
                    {
                        (BIG + 1, "odd", fb): 1,
                        (BIG, "even", fb): 1,
                        (0, "zero", None): 1,
                        (5, "five", None): 1,
                        (None, "null", None): 1,
                    },
                    {},
                ),
                2: (
                    {**at2_inner, (5, "five", None): 1, (None, "null", None): 1},
                    {},
                ),
            },
        ),
    ]
    # a class of three columns: every two must be equal, an int64 and a float64 compared as
    # float64, two int64s exactly (2**62 + 1 and 2**62 are both 2.0**62, yet differ)
    tri = Join((Get(_A, left), Get(_B, right), Get(_C, third)), ((0, 2, 3),))
    one = Join(
        (Get(_A, Schema.of(("i", "int64"), ("f", "float64"), ("j", "int64"))),), ((0, 1, 2),)
    )
    tri_ups = (((BIG,), 0, 1), ((BIG + 1,), 0, 1))
    out.append(
        SqlCase(
            "int-float-int-join-class",
            tri,
            {_A: lups[:2], _B: rups[:1], _C: tri_ups},
            {0: ({(BIG + 1, "odd", fb, BIG + 1): 1, (BIG, "even", fb, BIG): 1}, {})},
        )
    )
    one_ups = (
        ((BIG + 1, fb, BIG + 1), 0, 1),
        ((BIG + 1, fb, BIG), 0, 1),
        ((BIG, fb, BIG), 0, 1),
        ((3, 3.5, 3), 0, 1),
    )
    out.append(
        SqlCase(
            "int-float-int-one-input-class",
            one,
            {_A: one_ups},
            {0: ({(BIG + 1, fb, BIG + 1): 1, (BIG, fb, BIG): 1}, {})},
        )
    )
    return out


def _cast_cases() -> list[SqlCase]:
    strings = Schema.of(
        ("s", "string"),
    )
    to_int = Map(Get(_A, strings), (Cast(_col(0), S.INT64),), ("n",))
    to_float = Map(Get(_A, strings), (Cast(_col(0), S.FLOAT64),), ("x",))
    good_int = {
        " 12\t": 12,
        "+7": 7,
        "-0": 0,
    }
    bad_int = [
        "1_000",  # PostgreSQL 15 refuses underscores between digits (16 reads them)
        "0x1F",  # and non-decimal integers
        "0o17",
        "-0b101",
        "0x_ff",
        "\u0661\u0662",
        "12\u00a0",
        "\u200912",
        "1__0",
        "_1",
        "1_",
        "1.0",
        "",
        "  ",
        "0x",
        "\uff11\uff12",
    ]
    good_float = {
        " 1.5 ": 1.5,
        "-2e3": -2000.0,
        ".5": 0.5,
        "5.": 5.0,
        "+1E-2": 0.01,
        "1e308": 1e308,
        "inf": math.inf,
        " -Infinity": -math.inf,
        "NaN": NAN,  # the one NaN object: a row holding it equals itself
    }
    bad_float = [
        "1_000",
        "\u0661.\u0665",
        "1.5\u3000",
        "0x10",
        "1e",
        "e5",
        "--1",
        "1.2.3",
        "infinit",
    ]
    int_rows: dict[Row, int] = {(s, n): 1 for s, n in good_int.items()}
    int_errs = {f"invalid input syntax for type int64: {s!r}": 1 for s in bad_int}
    float_rows: dict[Row, int] = {(s, x): 1 for s, x in good_float.items()}
    float_errs = {f"invalid input syntax for type float64: {s!r}": 1 for s in bad_float}
    return [
        SqlCase(
            "string-to-int64-cast",
            to_int,
            {_A: tuple(((s,), 0, 1) for s in [*good_int, *bad_int])},
            {0: (int_rows, int_errs)},
        ),
        SqlCase(
            "string-to-float64-cast",
            to_float,
            {_A: tuple(((s,), 0, 1) for s in [*good_float, *bad_float])},
            {0: (float_rows, float_errs)},
        ),
    ]


def _like_cases() -> list[SqlCase]:
    strings = Schema.of(
        ("s", "string"),
    )
    msg = "LIKE pattern must not end with escape character"
    literal_pattern = Map(
        Get(_A, strings), (CallBinary(BinaryFunc.LIKE, _col(0), Literal("a\\", S.STRING)),), ("m",)
    )
    column_pattern = Map(
        Get(_A, strings), (CallBinary(BinaryFunc.LIKE, Literal("x\\", S.STRING), _col(0)),), ("m",)
    )
    patterns = {"x\\\\": True, "x%": True, "": False, "x": False}
    bad = ["x\\", "%\\", "\\", "x\\\\\\"]
    return [
        SqlCase(
            "like-literal-pattern-ending-in-escape",
            literal_pattern,
            {_A: ((("a\\",), 0, 2), (("b",), 0, 1), ((None,), 0, 1), (("c",), 1, -1))},
            {0: ({(None, None): 1}, {msg: 3}), 1: ({(None, None): 1}, {msg: 2})},
        ),
        SqlCase(
            "like-column-pattern-ending-in-escape",
            column_pattern,
            {_A: tuple(((p,), 0, 1) for p in [*patterns, *bad])},
            {0: ({(p, m): 1 for p, m in patterns.items()}, {msg: len(bad)})},
        ),
    ]


def _outer_join_cases() -> list[SqlCase]:
    left = Schema.of(("i", "int64"), ("s", "string"))
    right = Schema.of(("f", "float64"), ("t", "string"))
    # left key 2 is retracted below zero at time 1: right row 2.0 becomes unmatched (padded),
    # and comes back matched at time 2; 2**62 + 1 meets 2.0**62 as float64
    lups = (
        ((BIG + 1, "odd"), 0, 1),
        ((2, "two"), 0, 1),
        ((None, "null"), 0, 1),
        ((2, "two"), 1, -2),
        ((2, "two"), 2, 2),
    )
    rups = (
        ((float(BIG), "big"), 0, 1),
        ((2.0, "x"), 0, 1),
        ((None, "n"), 0, 1),
        ((7.5, "y"), 0, 2),
    )
    fb = float(BIG)
    right_at0 = {
        (BIG + 1, "odd", fb, "big"): 1,
        (2, "two", 2.0, "x"): 1,
        (None, None, None, "n"): 1,
        (None, None, 7.5, "y"): 2,
    }
    right_at1 = {
        (BIG + 1, "odd", fb, "big"): 1,
        (2, "two", 2.0, "x"): -1,
        (None, None, 2.0, "x"): 1,
        (None, None, None, "n"): 1,
        (None, None, 7.5, "y"): 2,
    }
    return [
        SqlCase(
            "int-float-join-right",
            Join((Get(_A, left), Get(_B, right)), ((0, 2),), JoinKind.RIGHT),
            {_A: lups, _B: rups},
            {0: (right_at0, {}), 1: (right_at1, {})},
        ),
        SqlCase(
            "int-float-join-full",
            Join((Get(_A, left), Get(_B, right)), ((0, 2),), JoinKind.FULL),
            {_A: lups, _B: rups},
            {
                0: ({**right_at0, (None, "null", None, None): 1}, {}),
                # left (2, "two") at -1 still meets right key 2.0: joined, not padded
                1: ({**right_at1, (None, "null", None, None): 1}, {}),
                2: ({**right_at0, (None, "null", None, None): 1}, {}),
            },
        ),
    ]


def _aggregate_cases() -> list[SqlCase]:
    rows = Schema.of(("k", "int64"), ("b", "bool"), ("s", "string"))
    plan = Reduce(
        Get(_A, rows),
        (0,),
        (
            Aggregate(AggFunc.BOOL_AND, 1),
            Aggregate(AggFunc.BOOL_OR, 1),
            Aggregate(AggFunc.STRING_AGG, 2, separator=","),
            Aggregate(AggFunc.STRING_AGG, 2, distinct=True, separator=""),
        ),
    )
    ups = (
        ((1, True, "b"), 0, 2),
        ((1, False, "a"), 0, 1),
        ((1, None, None), 0, 1),
        ((2, None, "z"), 0, 1),
        ((1, False, "a"), 1, -1),
        ((2, True, "z"), 1, -2),  # "z" at -1 in total: no value of group 2 at time 1
    )
    return [
        SqlCase(
            "bool-and-or-string-agg",
            plan,
            {_A: ups},
            {
                0: ({(1, False, True, "a,b,b", "ab"): 1, (2, None, None, "z", "z"): 1}, {}),
                1: ({(1, True, True, "b,b", "b"): 1, (2, None, None, None, None): 1}, {}),
            },
        )
    ]


def _function_cases() -> list[SqlCase]:
    rows = Schema.of(("i", "int64"), ("s", "string"), ("t", "timestamp"))
    i, st, t = _col(0), _col(1), _col(2)

    def text(v: str) -> Literal:
        return Literal(v, S.STRING)

    exprs: tuple[ScalarExpr, ...] = (
        CallUnary(UnaryFunc.ABS, i),
        CallUnary(UnaryFunc.ROUND, Cast(i, S.FLOAT64)),
        CallUnary(UnaryFunc.TRIM, st),
        CallBinary(BinaryFunc.ILIKE, st, text("%B%")),
        CallBinary(BinaryFunc.CONCAT, st, text("|")),
        CallVariadic(VariadicFunc.GREATEST, (i, Literal(0, S.INT64))),
        CallVariadic(VariadicFunc.NULLIF, (st, text(" ab "))),
        CallVariadic(VariadicFunc.REPLACE, (st, text("b"), text("B"))),
        CallVariadic(VariadicFunc.LIKE_ESCAPE, (st, text("%#%"), text("#"))),
        CallVariadic(VariadicFunc.DATE_TRUNC, (text("week"), t)),
        CallVariadic(VariadicFunc.EXTRACT, (text("dow"), t)),
        CallBinary(BinaryFunc.SUB_MS, t, i),
    )
    plan = Map(Get(_A, rows), exprs, tuple(f"e{k}" for k in range(len(exprs))))
    ts = _dt.datetime(2020, 1, 1, 12)  # a Wednesday
    week = _dt.datetime(2019, 12, 30)
    ups = (
        ((-3, " ab ", ts), 0, 1),
        ((5, "x%", None), 0, 2),
        ((-(2**63), "", ts), 1, 1),  # abs overflows
        ((2**62, "", ts), 1, 1),  # far before year 1
    )
    later = _dt.datetime(2020, 1, 1, 12, 0, 0, 3000)  # minus -3 ms
    row1: Row = (
        -3,
        " ab ",
        ts,
        3,
        -3.0,
        "ab",
        True,
        " ab |",
        0,
        None,
        " aB ",
        False,
        week,
        3,
        later,
    )
    row2: Row = (5, "x%", None, 5, 5.0, "x%", False, "x%|", 5, "x%", "x%", True, None, None, None)
    return [
        SqlCase(
            "scalar-functions",
            plan,
            {_A: ups},
            {
                0: ({row1: 1, row2: 2}, {}),
                1: (
                    {row1: 1, row2: 2},
                    {"integer out of range": 1, "timestamp out of range": 1},
                ),
            },
        )
    ]


def _string_literal_cases() -> list[SqlCase]:
    strings = Schema.of(("s", "string"))
    to_bool = Map(Get(_A, strings), (Cast(_col(0), S.BOOL),), ("b",))
    to_ts = Map(Get(_A, strings), (Cast(_col(0), S.TIMESTAMP),), ("t",))
    good_bool = {" yes ": True, "TR": True, "on": True, "Of": False, "n": False, "0": False}
    bad_bool = ["\u00a0true", "true\u3000", "o", "2", "", "truex"]
    good_ts = {
        "2020-01-02 03:04:05.5": _dt.datetime(2020, 1, 2, 3, 4, 5, 500000),
        " 2020-1-2T03:04 ": _dt.datetime(2020, 1, 2, 3, 4),
        "2020-01-02": _dt.datetime(2020, 1, 2),
    }
    bad_ts = [
        "20200102",
        "2020-W01-1",
        "2020-01-02 03",
        "2020-01-02X03:04:05",
        "2020-01-02 03:04:05.1234567",
        "\u00a02020-01-02",
        "2020-01-02 24:00:00",
    ]
    return [
        SqlCase(
            "string-to-bool-cast",
            to_bool,
            {_A: tuple(((s,), 0, 1) for s in [*good_bool, *bad_bool])},
            {
                0: (
                    {(s, b): 1 for s, b in good_bool.items()},
                    {f"invalid input syntax for type bool: {s!r}": 1 for s in bad_bool},
                )
            },
        ),
        SqlCase(
            "string-to-timestamp-cast",
            to_ts,
            {_A: tuple(((s,), 0, 1) for s in [*good_ts, *bad_ts])},
            {
                0: (
                    {(s, v): 1 for s, v in good_ts.items()},
                    {f"invalid input syntax for type timestamp: {s!r}": 1 for s in bad_ts},
                )
            },
        ),
    ]


SQL_CASES: tuple[SqlCase, ...] = (
    *_sum_cases(),
    *_comparison_cases(),
    *_join_cases(),
    *_cast_cases(),
    *_like_cases(),
    *_outer_join_cases(),
    *_aggregate_cases(),
    *_function_cases(),
    *_string_literal_cases(),
)
"""Every case, named (see :class:`SqlCase`)."""
