"""Random cases for the SQL oracle: schemas, update streams over several times, and plans.

Written from the plan IR's documentation (``spec/plan/relation.py``,
``scalar.py``, ``schema.py``), and deliberately *not* from
``tidegate.spec.strategies``: an oracle that shares the generator of the code
it checks shares its blind spots. Only Hypothesis' own strategies are used.

A case is a few input collections (1-3, each 1-4 typed columns, nullable or
not), a stream of updates per input at times ``0..max_time`` (inserts, some of
them retracted later, a few bare retractions that leave a negative
multiplicity), a plan over every operator of the IR (``Get``, ``Constant``,
``Map``, ``Filter``, ``Project``, ``Union``, ``Negate``, inner, left, right
and full ``Join``, ``Reduce`` with count/sum/min/max/avg/bool_and/bool_or/
string_agg and their distinct forms,
``Distinct``, ``Threshold``, ``TopK``, ``ArrangeBy``, ``Let``/``LetRef``) and
every scalar function, the dataflow's ``as_of``, and the schedule by which an
executor is fed (how far each input's upper moves per step).

Values come from small per-case pools (so joins match, groups repeat and
comparisons tie) mixed with fresh ones, and the pools lean on the edges:
int64 bounds, 2^53 + 1, floats at the top of the range, strings that are
almost numbers, dates and booleans, LIKE metacharacters, characters whose case
mapping is special.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from hypothesis import strategies as st

from tidegate.spec.frontier import Update
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
    Threshold,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
    explain,
)
from tidegate.spec.plan.schema import INT64_MAX, INT64_MIN
from tidegate.spec.protocol.types import ColumnOrder

__all__ = ["OracleCase", "oracle_cases"]

S = ScalarType
Types: TypeAlias = tuple[ScalarType, ...]
_TYPES = [t for t in S if t is not S.NUMERIC and not t.is_narrow]
"""The column types DuckDB answers for as tidegate does. Not numeric: DuckDB's DECIMAL holds
38 digits at a scale fixed per column and divides to other scales; the PostgreSQL oracle
(``tests/sql_pg_oracle``) checks numerics. Not smallint, integer or real either: the
PostgreSQL oracle checks their ranges and single precision."""
Draw: TypeAlias = Callable[[st.SearchStrategy[Any]], Any]


# -- values ----------------------------------------------------------------------------------

INT_EDGES = (
    0,
    1,
    -1,
    2,
    3,
    -7,
    10,
    2**31,
    -(2**31),
    3037000500,  # its square overflows int64
    2**53,
    2**53 + 1,  # not a float64
    -(2**53 + 1),
    2**62,
    INT64_MAX,
    INT64_MIN,
    INT64_MAX - 1,
)
FLOAT_EDGES = (
    0.0,
    1.0,
    -1.0,
    0.5,
    1.5,
    2.5,
    -2.5,
    -2.25,
    0.1,
    123.456,
    1e16,
    1e-5,
    5e-324,
    2.0**53,
    2.0**63,  # just beyond int64
    -(2.0**63),  # INT64_MIN exactly
    9.2e18,
    1e308,
    -1e308,
    1.7976931348623157e308,
)
# Strings meant for a cast to each type: SQL literals, almost-literals, what Python reads but
# SQL does not (non-ASCII digits and spaces, underscores), PostgreSQL 16's 0x/0o/0b forms.
CAST_STRINGS: dict[ScalarType, tuple[str, ...]] = {
    S.INT64: (
        "12",
        " -7 ",
        "+5",
        "007",
        "\t42\n",
        "1e3",
        "1.5",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "1_000",
        "1__0",
        "_1",
        "0x1F",
        "-0o17",
        "0b_101",
        "0x",
        "-0x8000000000000000",
        "0xFFFFFFFFFFFFFFFF",
        "\u0661\u0662",
        "\u00a012",
        "12\u2003",
        "",
    ),
    S.FLOAT64: (
        "1.5",
        " -2.25 ",
        ".5",
        "5.",
        "-0.25e-3",
        "1E3",
        "1e400",
        "1e-400",
        "inf",
        "-Infinity",
        "NaN",
        "1_0.5",
        "0x1p3",
        "\u0661.\u0665",
        "\u00a01.5",
        "e5",
        ".",
    ),
    S.BOOL: (
        "true",
        "Yes",
        " off ",
        "T",
        "0",
        "1",
        "maybe",
        "ON",
        "\u00a0true",
        "tr",
        "",
        "o",
        "OF",
        "n",
        "truex",
        "\ttrue\n",
        "true\u3000",
    ),
    S.DATE: (
        "2020-01-31",
        "2020-02-30",
        " 2021-12-01 ",
        "0001-01-01",
        "0000-01-01",
        "9999-12-31",
        "20200101",
        "2020-W01-1",
        "2020-1-1",
        "\u00a02020-01-31",
        "2020-01-31\u2003",
        "2020-01-01 10:11:12",
    ),
    S.TIMESTAMP: (
        "2020-01-01 10:11:12",
        "2020-01-01T10:11:12.5",
        "1999-12-31 23:59:59.123456",
        "2020-01-01",
        "2020-01-01 10:11",
        "2020-01-01 10",
        "2020-01-01 10:11:12.1234567",
        "2020-01-01 10:11:12+01:00",
        "2020-01-01 10:11:12Z",
        "2020-01-01 24:00:00",
        "2020-01-01 23:59:60",
        "2020-01-01T10:11",
        " 2020-1-2 03:04:05 ",
        "2020-01-01X10:11:12",
        "2020-01-01\u00a010:11:12",
        "20200101T101112",
        "2020-01-01 10:11:12.",
    ),
}
# LIKE metacharacters and the escape, characters whose case mapping is special (ß, İ, ﬁ), a
# non-BMP character.
TEXT_STRINGS = (
    "",
    "a",
    "abc",
    "ABC",
    "a%",
    "%b%",
    "a_c",
    "a\\%",
    "\\",
    "a\\",
    "Straße",
    "İstanbul",
    "ﬁne",
    "é😀",
)
STRING_EDGES = TEXT_STRINGS + tuple(x for xs in CAST_STRINGS.values() for x in xs)
STRING_ALPHABET = "abAB%_\\ 019-.eéßİﬁ😀\u0661\u00a0\t\nZ"
LIKE_PATTERNS = (
    "%",
    "_",
    "a%",
    "%b%",
    "%c",
    "a_c",
    "_b%",
    "a\\%",
    "a\\_",
    "\\\\",
    "%\\%%",
    "%é%",
    "_😀",
    "A%",
    "",
    "abc",
    "%\\",  # these three end in the escape character
    "a\\",
    "\\",
)
# Milliseconds to add to a timestamp: a day, a leap year, the whole range of timestamps, the
# int64 ends.
MS_EDGES = (
    0,
    1,
    -1,
    999,
    1500,
    86_400_000,
    -86_400_000,
    366 * 86_400_000,
    253_402_300_799_999,
    -253_402_300_799_999,
    INT64_MAX,
    INT64_MIN,
)
DATE_TRUNC_UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year")
EXTRACT_INT_FIELDS = ("year", "quarter", "month", "day", "dow", "doy")
EXTRACT_TIME_FIELDS = ("hour", "minute", "second")
LIKE_ESCAPES = ("#", "\\", "", "%", "a", "ab")
SEPARATORS = (",", ", ", "", "|")
DATE_EDGES = (
    dt.date(2020, 1, 31),
    dt.date(2020, 2, 29),
    dt.date(1970, 1, 1),
    dt.date(1, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(1999, 12, 31),
)
TIMESTAMP_EDGES = (
    dt.datetime(2020, 1, 1, 10, 11, 12),
    dt.datetime(2020, 1, 1, 10, 11, 12, 500000),
    dt.datetime(1999, 12, 31, 23, 59, 59, 123456),
    dt.datetime(1970, 1, 1),
    dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2020, 1, 31),
)


def _no_negative_zero(x: float) -> float:
    # -0.0 is equal to 0.0 in SQL and in Python, but the two print differently, and which
    # one a GROUP BY (or a Python dict) keeps is arbitrary; inputs never hold it.
    return 0.0 if x == 0 else x


def fresh_values(t: ScalarType) -> st.SearchStrategy[Any]:
    """Any value of ``t``, with the edges above over-represented."""
    if t is S.INT64:
        return st.one_of(
            st.integers(-10, 10), st.sampled_from(INT_EDGES), st.integers(INT64_MIN, INT64_MAX)
        )
    if t is S.FLOAT64:
        return st.one_of(
            st.sampled_from(FLOAT_EDGES),
            st.integers(-40, 40).map(lambda k: k / 4),
            st.floats(allow_nan=False, allow_infinity=False).map(_no_negative_zero),
        )
    if t is S.STRING:
        return st.one_of(
            st.sampled_from(STRING_EDGES),
            st.sampled_from(TEXT_STRINGS),
            st.text(alphabet=STRING_ALPHABET, max_size=5),
        )
    if t is S.BOOL:
        return st.booleans()
    if t is S.DATE:
        return st.one_of(st.sampled_from(DATE_EDGES), st.dates())
    # fold is not a value: DuckDB and SQL know no such thing
    return st.one_of(
        st.sampled_from(TIMESTAMP_EDGES), st.datetimes().map(lambda d: d.replace(fold=0))
    )


# -- the case --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OracleCase:
    """One differential case."""

    inputs: dict[GlobalId, Schema]
    updates: dict[GlobalId, tuple[Update, ...]]
    plan: Plan
    as_of: int
    rounds: tuple[tuple[int, ...], ...]
    """Per executor step, how far each input's upper advances (inputs in ``inputs`` order)."""
    max_time: int = 3
    """Updates happen at times ``0..max_time``; nothing changes after."""

    def describe(self) -> str:
        lines = [f"as_of={self.as_of} max_time={self.max_time} rounds={self.rounds}"]
        for gid, schema in self.inputs.items():
            lines.append(f"input {gid} {schema}:")
            lines.extend(f"    {u!r}" for u in self.updates[gid])
        lines.append("plan:")
        lines.append(explain(self.plan))
        return "\n".join(lines)


class _Gen:
    """Draws a well-typed plan; tracks each relation's column types itself."""

    def __init__(self, draw: Draw, inputs: dict[GlobalId, Schema], pools: dict[S, list[Any]]):
        self.draw = draw
        self.inputs = inputs
        self.pools = pools
        self.lets: list[tuple[str, Types]] = []
        self.n_lets = 0
        self.n_names = 0

    # -- helpers

    def choose(self, options: list[tuple[int, Callable[[], Any]]]) -> Any:
        total = sum(w for w, _ in options if w > 0)
        k = self.draw(st.integers(0, total - 1))
        for w, f in options:
            if w <= 0:
                continue
            if k < w:
                return f()
            k -= w
        raise AssertionError("unreachable")

    def flip(self, p_percent: int) -> bool:
        return bool(self.draw(st.integers(0, 99)) < p_percent)

    def value(self, t: ScalarType) -> Any:
        pool = self.pools[t]
        if pool and self.flip(80):
            return self.draw(st.sampled_from(pool))
        return self.draw(fresh_values(t))

    def name(self) -> str:
        self.n_names += 1
        return f"m{self.n_names}"

    # -- scalar expressions

    def literal(self, t: ScalarType) -> Literal:
        if self.flip(8):
            return Literal(None, t)
        if t is S.STRING and self.flip(15):
            return Literal(self.draw(st.sampled_from(LIKE_PATTERNS)), t)
        return Literal(self.value(t), t)

    def leaf(self, t: ScalarType, types: Types) -> ScalarExpr:
        cols = [i for i, ct in enumerate(types) if ct is t]
        if cols and self.flip(70):
            return ColumnRef(self.draw(st.sampled_from(cols)))
        return self.literal(t)

    def expr(self, t: ScalarType, types: Types, depth: int) -> ScalarExpr:
        if depth <= 0 or self.flip(10):
            return self.leaf(t, types)
        d = depth - 1
        e = self.expr

        def common() -> list[tuple[int, Callable[[], ScalarExpr]]]:
            return [
                (2, lambda: If(e(S.BOOL, types, d), e(t, types, d), e(t, types, d))),
                (
                    2,
                    lambda: CallVariadic(
                        VariadicFunc.COALESCE,
                        tuple(e(t, types, d) for _ in range(self.draw(st.integers(1, 3)))),
                    ),
                ),
                (3, lambda: Cast(self.cast_source(t, types, d), t)),
            ]

        if t is S.INT64:

            def arith() -> ScalarExpr:
                f = self.draw(st.sampled_from(list(BinaryFunc)[:5]))
                return CallBinary(f, e(S.INT64, types, d), e(S.INT64, types, d))

            return self.choose(
                [
                    (8, arith),
                    (2, lambda: CallUnary(UnaryFunc.NEG, e(S.INT64, types, d))),
                    (2, lambda: CallUnary(UnaryFunc.LENGTH, e(S.STRING, types, d))),
                    (1, lambda: CallUnary(UnaryFunc.ABS, e(S.INT64, types, d))),
                    (1, lambda: CallUnary(UnaryFunc.ROUND, e(S.INT64, types, d))),
                    (2, lambda: self.extreme(S.INT64, types, d)),
                    (1, lambda: self.nullif(S.INT64, types, d)),
                    (2, lambda: self.extract(types, d)),
                    (2, lambda: Cast(e(S.FLOAT64, types, d), S.INT64)),
                    (1, lambda: Cast(e(S.BOOL, types, d), S.INT64)),
                    *common(),
                ]
            )
        if t is S.FLOAT64:

            def farith() -> ScalarExpr:
                f = self.draw(st.sampled_from(list(BinaryFunc)[:5]))
                lt, rt = self.draw(
                    st.sampled_from(
                        [(S.FLOAT64, S.FLOAT64), (S.INT64, S.FLOAT64), (S.FLOAT64, S.INT64)]
                    )
                )
                return CallBinary(f, e(lt, types, d), e(rt, types, d))

            return self.choose(
                [
                    (8, farith),
                    (2, lambda: CallUnary(UnaryFunc.NEG, e(S.FLOAT64, types, d))),
                    (1, lambda: CallUnary(UnaryFunc.ABS, e(S.FLOAT64, types, d))),
                    (2, lambda: CallUnary(UnaryFunc.ROUND, e(S.FLOAT64, types, d))),
                    (1, lambda: self.extreme(S.FLOAT64, types, d)),
                    (1, lambda: self.nullif(S.FLOAT64, types, d)),
                    (
                        1,
                        lambda: CallVariadic(
                            VariadicFunc.EXTRACT,
                            (Literal("epoch", S.STRING), e(self.time_type(), types, d)),
                        ),
                    ),
                    (2, lambda: Cast(e(S.INT64, types, d), S.FLOAT64)),
                    *common(),
                ]
            )
        if t is S.BOOL:

            def compare() -> ScalarExpr:
                f = self.draw(st.sampled_from(list(BinaryFunc)[5:11]))
                lt = self.draw(st.sampled_from(_TYPES))
                rt = lt
                if lt.is_numeric and self.flip(30):
                    rt = S.FLOAT64 if lt is S.INT64 else S.INT64
                    if self.flip(50):
                        # against the value of the other type SQL finds (nearly) equal to one of
                        # the pool's, where converting the int64 to float64 decides
                        x = self.expr(lt, types, d)
                        v = self.draw(st.sampled_from(self.pools[lt]))
                        near = float(v) if rt is S.FLOAT64 else int(v) if abs(v) < 2.0**63 else 0
                        return CallBinary(f, x, Literal(near, rt))
                return CallBinary(f, e(lt, types, d), e(rt, types, d))

            def like() -> ScalarExpr:
                pat = (
                    Literal(self.draw(st.sampled_from(LIKE_PATTERNS)), S.STRING)
                    if self.flip(60)
                    else e(S.STRING, types, d)
                )
                if self.flip(40):
                    esc = Literal(self.draw(st.sampled_from(LIKE_ESCAPES)), S.STRING)
                    f = self.draw(
                        st.sampled_from([VariadicFunc.LIKE_ESCAPE, VariadicFunc.ILIKE_ESCAPE])
                    )
                    return CallVariadic(f, (e(S.STRING, types, d), pat, esc))
                f = self.draw(st.sampled_from([BinaryFunc.LIKE, BinaryFunc.LIKE, BinaryFunc.ILIKE]))
                return CallBinary(f, e(S.STRING, types, d), pat)

            def andor() -> ScalarExpr:
                f = self.draw(st.sampled_from([VariadicFunc.AND, VariadicFunc.OR]))
                n = self.draw(st.integers(1, 3))
                return CallVariadic(f, tuple(e(S.BOOL, types, d) for _ in range(n)))

            return self.choose(
                [
                    (8, compare),
                    (3, like),
                    (2, lambda: CallUnary(UnaryFunc.NOT, e(S.BOOL, types, d))),
                    (
                        2,
                        lambda: CallUnary(
                            UnaryFunc.IS_NULL, e(self.draw(st.sampled_from(_TYPES)), types, d)
                        ),
                    ),
                    (4, andor),
                    (1, lambda: Cast(e(S.INT64, types, d), S.BOOL)),
                    (1, lambda: self.extreme(S.BOOL, types, d)),
                    (1, lambda: self.nullif(S.BOOL, types, d)),
                    *common(),
                ]
            )
        if t is S.STRING:
            trims = [UnaryFunc.TRIM, UnaryFunc.LTRIM, UnaryFunc.RTRIM]

            def substring() -> ScalarExpr:
                def pos() -> ScalarExpr:
                    if self.flip(80):
                        return Literal(self.draw(st.integers(-2, 6)), S.INT64)
                    return e(S.INT64, types, d)

                args = [e(S.STRING, types, d), pos()]
                if self.flip(70):
                    args.append(pos())
                return CallVariadic(VariadicFunc.SUBSTRING, tuple(args))

            def to_string() -> ScalarExpr:
                return Cast(e(self.draw(st.sampled_from(_TYPES)), types, d), S.STRING)

            return self.choose(
                [
                    (2, lambda: CallUnary(UnaryFunc.LOWER, e(S.STRING, types, d))),
                    (2, lambda: CallUnary(UnaryFunc.UPPER, e(S.STRING, types, d))),
                    (
                        3,
                        lambda: CallVariadic(
                            VariadicFunc.CONCAT,
                            tuple(
                                e(S.STRING, types, d) for _ in range(self.draw(st.integers(1, 3)))
                            ),
                        ),
                    ),
                    (3, substring),
                    (5, to_string),
                    (
                        1,
                        lambda: CallUnary(self.draw(st.sampled_from(trims)), e(S.STRING, types, d)),
                    ),
                    (
                        2,
                        lambda: CallVariadic(
                            VariadicFunc.REPLACE,
                            (
                                e(S.STRING, types, d),
                                self.short_string(types, d),
                                self.short_string(types, d),
                            ),
                        ),
                    ),
                    (
                        3,
                        lambda: CallBinary(
                            BinaryFunc.CONCAT, e(S.STRING, types, d), e(S.STRING, types, d)
                        ),
                    ),
                    (1, lambda: self.extreme(S.STRING, types, d)),
                    (1, lambda: self.nullif(S.STRING, types, d)),
                    *common()[:2],
                ]
            )
        if t is S.DATE:
            return self.choose(
                [
                    (2, lambda: Cast(e(S.TIMESTAMP, types, d), S.DATE)),
                    (1, lambda: self.extreme(S.DATE, types, d)),
                    (1, lambda: self.nullif(S.DATE, types, d)),
                    *common(),
                ]
            )

        def shift() -> ScalarExpr:
            f = self.draw(st.sampled_from([BinaryFunc.ADD_MS, BinaryFunc.SUB_MS]))
            ms = (
                Literal(self.draw(st.sampled_from(MS_EDGES)), S.INT64)
                if self.flip(60)
                else e(S.INT64, types, d)
            )
            return CallBinary(f, e(self.time_type(), types, d), ms)

        def trunc() -> ScalarExpr:
            unit = Literal(self.draw(st.sampled_from(DATE_TRUNC_UNITS)), S.STRING)
            return CallVariadic(VariadicFunc.DATE_TRUNC, (unit, e(S.TIMESTAMP, types, d)))

        return self.choose(
            [
                (2, lambda: Cast(e(S.DATE, types, d), S.TIMESTAMP)),
                (3, shift),
                (2, trunc),
                (1, lambda: self.extreme(S.TIMESTAMP, types, d)),
                (1, lambda: self.nullif(S.TIMESTAMP, types, d)),
                *common(),
            ]
        )

    def time_type(self) -> ScalarType:
        return S.TIMESTAMP if self.flip(70) else S.DATE

    def extreme(self, t: ScalarType, types: Types, d: int) -> ScalarExpr:
        f = self.draw(st.sampled_from([VariadicFunc.GREATEST, VariadicFunc.LEAST]))
        n = self.draw(st.integers(1, 3))
        return CallVariadic(f, tuple(self.expr(t, types, d) for _ in range(n)))

    def nullif(self, t: ScalarType, types: Types, d: int) -> ScalarExpr:
        other = t
        if t.is_numeric and self.flip(30):
            other = S.FLOAT64 if t is S.INT64 else S.INT64
        return CallVariadic(
            VariadicFunc.NULLIF, (self.expr(t, types, d), self.expr(other, types, d))
        )

    def extract(self, types: Types, d: int) -> ScalarExpr:
        src = self.time_type()
        fields = EXTRACT_INT_FIELDS + (EXTRACT_TIME_FIELDS if src is S.TIMESTAMP else ())
        field = Literal(self.draw(st.sampled_from(fields)), S.STRING)
        return CallVariadic(VariadicFunc.EXTRACT, (field, self.expr(src, types, d)))

    def short_string(self, types: Types, d: int) -> ScalarExpr:
        if self.flip(60):
            return Literal(
                self.draw(st.sampled_from(("", "a", "b", "ab", "%", " ", "é"))), S.STRING
            )
        return self.expr(S.STRING, types, d)

    def cast_source(self, t: ScalarType, types: Types, depth: int) -> ScalarExpr:
        if self.flip(50):
            return Literal(self.draw(st.sampled_from(CAST_STRINGS[t])), S.STRING)
        return self.expr(S.STRING, types, depth)

    def any_expr(self, types: Types) -> tuple[ScalarExpr, ScalarType]:
        t = self.draw(st.sampled_from(_TYPES))
        return self.expr(t, types, self.draw(st.integers(1, 3))), t

    # -- relations

    def plan(self, depth: int) -> tuple[Plan, Types]:
        if depth <= 0:
            return self.leaf_plan()
        d = depth - 1
        options: list[tuple[int, Callable[[], tuple[Plan, Types]]]] = [
            (1, self.leaf_plan),
            (9, lambda: self.map(d)),
            (6, lambda: self.filter(d)),
            (2, lambda: self.project(d)),
            (3, lambda: self.union(d)),
            (2, lambda: self.negate(d)),
            (5, lambda: self.join(d)),
            (5, lambda: self.reduce(d)),
            (2, lambda: self.distinct(d)),
            (2, lambda: self.threshold(d)),
            (3, lambda: self.topk(d)),
            (1, lambda: self.arrange(d)),
            (2, lambda: self.let(d)),
        ]
        return self.choose(options)

    def leaf_plan(self) -> tuple[Plan, Types]:
        options: list[tuple[int, Callable[[], tuple[Plan, Types]]]] = [
            (6, self.get),
            (1, self.constant),
        ]
        if self.lets:
            options.append((6, self.letref))
        return self.choose(options)

    def get(self) -> tuple[Plan, Types]:
        gid = self.draw(st.sampled_from(list(self.inputs)))
        schema = self.inputs[gid]
        return Get(gid, schema), tuple(c.type.scalar for c in schema.columns)

    def constant(self, types: Types | None = None) -> tuple[Plan, Types]:
        if types is None:
            types = tuple(self.draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3)))
        schema = Schema.of(*((f"k{i}", t.value) for i, t in enumerate(types)))
        rows = []
        for _ in range(self.draw(st.integers(0, 3))):
            row = tuple(None if self.flip(10) else self.value(t) for t in types)
            rows.append((row, self.draw(st.sampled_from([1, 1, 1, 2, -1]))))
        return Constant(tuple(rows), schema), types

    def letref(self) -> tuple[Plan, Types]:
        name, types = self.draw(st.sampled_from(self.lets))
        return LetRef(name), types

    def map(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        exprs, names = [], []
        for _ in range(self.draw(st.integers(1, 3))):
            ex, t = self.any_expr(types)
            exprs.append(ex)
            names.append(self.name())
            types = (*types, t)
        return Map(inp, tuple(exprs), tuple(names)), types

    def filter(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        n = self.draw(st.integers(1, 2))
        preds = tuple(self.expr(S.BOOL, types, self.draw(st.integers(1, 3))) for _ in range(n))
        return Filter(inp, preds), types

    def project(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        if not types:
            return Project(inp, ()), ()
        cols = self.draw(st.lists(st.integers(0, len(types) - 1), min_size=0, max_size=4))
        if not cols and self.flip(70):
            cols = [0]
        return Project(inp, tuple(cols)), tuple(types[i] for i in cols)

    def coerce(self, plan: Plan, types: Types, want: Types) -> Plan:
        """``plan`` reshaped (Map and Project) to exactly the column types ``want``."""
        exprs: list[ScalarExpr] = []
        cols: list[int] = []
        extended = types
        for t in want:
            have = [i for i, ct in enumerate(types) if ct is t]
            if have and self.flip(75):
                cols.append(self.draw(st.sampled_from(have)))
            else:
                exprs.append(self.expr(t, types, self.draw(st.integers(0, 2))))
                cols.append(len(extended))
                extended = (*extended, t)
        if exprs:
            plan = Map(plan, tuple(exprs), tuple(self.name() for _ in exprs))
        return Project(plan, tuple(cols))

    def union(self, d: int) -> tuple[Plan, Types]:
        first, types = self.plan(d)
        parts = [first]
        for _ in range(self.draw(st.integers(1, 2))):
            p, pt = self.plan(d)
            parts.append(p if pt == types and self.flip(50) else self.coerce(p, pt, types))
        return Union(tuple(parts)), types

    def negate(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        return Negate(inp), types

    def join(self, d: int) -> tuple[Plan, Types]:
        left = self.flip(35)
        n = 2 if left else self.draw(st.integers(2, 3))
        parts = [self.plan(max(d - 1, 0)) if k else self.plan(d) for k in range(n)]
        offsets, all_types = [], []
        for _, ts in parts:
            offsets.append(len(all_types))
            all_types.extend(ts)

        def compatible(a: ScalarType, b: ScalarType) -> bool:
            return a is b or (a.is_numeric and b.is_numeric)

        classes: list[tuple[int, ...]] = []
        for _ in range(self.draw(st.integers(0 if not left else 1, 2))):
            i, j = (0, 1) if left else self.draw(st.sampled_from([(0, 1), (1, 0), (0, 2), (1, 2)]))
            if j >= n or not parts[i][1] or not parts[j][1]:
                continue
            a = offsets[i] + self.draw(st.integers(0, len(parts[i][1]) - 1))
            cands = [
                offsets[j] + k for k, t in enumerate(parts[j][1]) if compatible(t, all_types[a])
            ]
            if not cands:
                continue
            cls = [a, self.draw(st.sampled_from(cands))]
            if self.flip(15):
                extra = [
                    k
                    for k, t in enumerate(all_types)
                    if k not in cls and compatible(t, all_types[a])
                ]
                if extra:
                    cls.append(self.draw(st.sampled_from(extra)))
            classes.append(tuple(self.draw(st.permutations(cls))))
        if left and not classes:
            # an outer join needs an equivalence naming both sides; without one, join inner
            left = False
        kind = (
            self.draw(st.sampled_from([JoinKind.LEFT, JoinKind.RIGHT, JoinKind.FULL]))
            if left
            else JoinKind.INNER
        )
        return Join(tuple(p for p, _ in parts), tuple(classes), kind), tuple(all_types)

    def reduce(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        n = len(types)
        key = (
            tuple(self.draw(st.lists(st.integers(0, n - 1), max_size=2, unique=True))) if n else ()
        )
        aggs: list[Aggregate] = []
        out = [types[i] for i in key]
        for _ in range(self.draw(st.integers(1, 3))):
            numeric = [i for i, t in enumerate(types) if t.is_numeric]
            funcs = [AggFunc.COUNT]
            if n:
                funcs += [AggFunc.MIN, AggFunc.MAX]
            if numeric:
                funcs += [AggFunc.SUM, AggFunc.SUM, AggFunc.AVG]
            bools = [i for i, t in enumerate(types) if t is S.BOOL]
            strings = [i for i, t in enumerate(types) if t is S.STRING]
            if bools:
                funcs += [AggFunc.BOOL_AND, AggFunc.BOOL_OR]
            if strings:
                funcs += [AggFunc.STRING_AGG]
            f = self.draw(st.sampled_from(funcs))
            if f is AggFunc.COUNT and (not n or self.flip(40)):
                aggs.append(Aggregate(AggFunc.COUNT))
                out.append(S.INT64)
                continue
            cols = (
                numeric
                if f in (AggFunc.SUM, AggFunc.AVG)
                else bools
                if f in (AggFunc.BOOL_AND, AggFunc.BOOL_OR)
                else strings
                if f is AggFunc.STRING_AGG
                else list(range(n))
            )
            col = self.draw(st.sampled_from(cols))
            sep = self.draw(st.sampled_from(SEPARATORS)) if f is AggFunc.STRING_AGG else None
            aggs.append(Aggregate(f, col, self.flip(25), sep))
            out.append(
                S.INT64 if f is AggFunc.COUNT else S.FLOAT64 if f is AggFunc.AVG else types[col]
            )
        return Reduce(inp, key, tuple(aggs)), tuple(out)

    def distinct(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        return Distinct(inp), types

    def threshold(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        return Threshold(inp), types

    def topk(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        n = len(types)
        if not n:
            return TopK(inp, (), (), self.draw(st.none() | st.integers(0, 3))), types
        key = tuple(self.draw(st.lists(st.integers(0, n - 1), max_size=1)))
        order = tuple(
            ColumnOrder(c, self.flip(40), self.flip(50))
            for c in self.draw(st.lists(st.integers(0, n - 1), max_size=2))
        )
        limit = self.draw(st.none() | st.integers(0, 3))
        offset = self.draw(st.sampled_from([0, 0, 0, 1, 2]))
        return TopK(inp, key, order, limit, offset), types

    def arrange(self, d: int) -> tuple[Plan, Types]:
        inp, types = self.plan(d)
        n = len(types)
        keys = tuple(
            tuple(self.draw(st.lists(st.integers(0, n - 1), max_size=2))) if n else ()
            for _ in range(self.draw(st.integers(1, 2)))
        )
        return ArrangeBy(inp, keys), types

    def let(self, d: int) -> tuple[Plan, Types]:
        value, vtypes = self.plan(d)
        self.n_lets += 1
        name = f"l{self.n_lets}"
        self.lets.append((name, vtypes))
        try:
            body, btypes = self.plan(d)
        finally:
            self.lets.pop()
        return Let(name, value, body), btypes


def _schemas(draw: Draw) -> dict[GlobalId, Schema]:
    out = {}
    for k in range(draw(st.integers(1, 3))):
        cols = draw(
            st.lists(st.tuples(st.sampled_from(_TYPES), st.booleans()), min_size=1, max_size=4)
        )
        out[GlobalId.user(k + 1)] = Schema.of(
            *((f"c{i}", t.value, nullable) for i, (t, nullable) in enumerate(cols))
        )
    return out


def _updates(
    draw: Draw, schema: Schema, pools: dict[S, list[Any]], max_time: int, max_events: int
) -> tuple[Update, ...]:
    def row() -> tuple[Any, ...]:
        vals = []
        for c in schema.columns:
            if c.type.nullable and draw(st.integers(0, 99)) < 15:
                vals.append(None)
            elif pools[c.type.scalar] and draw(st.integers(0, 99)) < 80:
                vals.append(draw(st.sampled_from(pools[c.type.scalar])))
            else:
                vals.append(draw(fresh_values(c.type.scalar)))
        return tuple(vals)

    out: list[Update] = []
    for _ in range(draw(st.integers(0, max_events))):
        r, t = row(), draw(st.integers(0, max_time))
        kind = draw(st.integers(0, 99))
        if kind < 6:
            out.append((r, t, -1))  # a retraction of nothing: a negative multiplicity
            continue
        diff = draw(st.sampled_from([1, 1, 1, 2]))
        out.append((r, t, diff))
        if kind < 35:
            out.append((r, draw(st.integers(t, max_time)), -diff))
    return tuple(out)


@st.composite
def oracle_cases(
    draw: Draw, max_depth: int = 4, max_time: int = 3, max_events: int = 8
) -> OracleCase:
    """A differential case: inputs, their updates at times ``0..max_time``, a plan, an
    ``as_of`` and a feeding schedule."""
    inputs = _schemas(draw)
    pools: dict[S, list[Any]] = {
        t: draw(st.lists(fresh_values(t), min_size=1, max_size=4)) for t in _TYPES
    }
    # numbers of the two types that meet: an int64 and the float64 SQL finds equal to it
    # (2^53 + 1 and 2.0^53), so comparisons and join keys across the types are decided there
    if draw(st.booleans()):
        pools[S.FLOAT64].append(float(draw(st.sampled_from(pools[S.INT64]))))
    if draw(st.booleans()):
        f = draw(st.sampled_from(pools[S.FLOAT64]))
        if -(2.0**63) <= f < 2.0**63:
            pools[S.INT64].append(int(f))
    updates = {
        gid: _updates(draw, schema, pools, max_time, max_events) for gid, schema in inputs.items()
    }
    gen = _Gen(draw, inputs, pools)
    plan, types = gen.plan(draw(st.integers(1, max_depth)))
    # most plans end in expressions over what they computed, so that every case evaluates some
    if draw(st.integers(0, 9)) < 7:
        exprs = []
        for _ in range(draw(st.integers(2, 4))):
            e, t = gen.any_expr(types)
            exprs.append(e)
            types = (*types, t)
        plan = Map(plan, tuple(exprs), tuple(gen.name() for _ in exprs))
    if draw(st.integers(0, 9)) < 3:
        plan = Filter(plan, (gen.expr(S.BOOL, types, draw(st.integers(1, 3))),))
    as_of = draw(st.sampled_from([0, 0, 0, 1, 2]))
    rounds = tuple(
        tuple(draw(st.integers(0, 2)) for _ in inputs)
        for _ in range(draw(st.integers(0, max_time + 1)))
    )
    return OracleCase(inputs, updates, plan, as_of, rounds, max_time)
