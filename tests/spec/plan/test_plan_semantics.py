"""Example tests pinning documented semantics: NULLs, evaluation errors, aggregates, TopK, Threshold."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tidegate.spec.errors import DivisionByZero, InvalidCast, InvalidPlan, NumericOverflow
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
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
    Literal,
    Map,
    Reduce,
    ScalarType,
    Schema,
    Threshold,
    TopK,
    UnaryFunc,
    VariadicFunc,
    eval_scalar,
    evaluate,
)
from tidegate.spec.protocol.types import ColumnOrder

U1 = GlobalId.user(1)
S = ScalarType
NULL_B = Literal(None, S.BOOL)
T, F = Literal(True, S.BOOL), Literal(False, S.BOOL)


def lit(v: object, t: ScalarType = S.INT64) -> Literal:
    return Literal(v, t)


@pytest.mark.parametrize(
    ("func", "args", "want"),
    [
        (VariadicFunc.AND, (T, NULL_B), None),
        (VariadicFunc.AND, (F, NULL_B), False),
        (VariadicFunc.AND, (NULL_B, F), False),
        (VariadicFunc.AND, (T, T), True),
        (VariadicFunc.OR, (T, NULL_B), True),
        (VariadicFunc.OR, (NULL_B, F), None),
        (VariadicFunc.OR, (F, F), False),
    ],
)
def test_three_valued_logic(func: VariadicFunc, args: tuple[Literal, ...], want: object) -> None:
    assert eval_scalar(CallVariadic(func, args), ()) is want


def test_null_propagation_and_null_tests() -> None:
    assert eval_scalar(CallUnary(UnaryFunc.NOT, NULL_B), ()) is None
    assert eval_scalar(CallBinary(BinaryFunc.EQ, lit(None), lit(None)), ()) is None
    assert eval_scalar(CallBinary(BinaryFunc.ADD, lit(1), lit(None)), ()) is None
    assert eval_scalar(CallUnary(UnaryFunc.IS_NULL, lit(None)), ()) is True
    assert eval_scalar(CallVariadic(VariadicFunc.COALESCE, (lit(None), lit(3), lit(4))), ()) == 3
    concat = CallVariadic(
        VariadicFunc.CONCAT, (lit("a", S.STRING), lit(None, S.STRING), lit("b", S.STRING))
    )
    assert eval_scalar(concat, ()) == "ab"
    # a NULL condition takes the ELSE branch
    assert eval_scalar(If(NULL_B, lit(1), lit(2)), ()) == 2


def test_filter_drops_null_and_false_rows() -> None:
    schema = Schema.of(("x", "int64"))
    pred = CallBinary(BinaryFunc.GT, ColumnRef(0), lit(1))
    plan = Filter(Get(U1, schema), (pred,))
    out = evaluate(plan, {U1: [((None,), 0, 1), ((1,), 0, 1), ((2,), 0, 3)]}, 0)
    assert out.rows == {(2,): 3}


def test_join_never_matches_null_keys() -> None:
    schema = Schema.of(("k", "int64"))
    plan = Join((Get(U1, schema), Get(U1, schema)), ((0, 1),))
    out = evaluate(plan, {U1: [((None,), 0, 1), ((1,), 0, 2)]}, 0)
    assert out.rows == {(1, 1): 4}


def test_left_join_pads_unmatched_rows_with_nulls() -> None:
    ls = Schema.of(("k", "int64"), ("a", "string"))
    rs = Schema.of(("k", "int64"), ("b", "string"))
    left = Constant((((1, "x"), 1), ((2, "y"), 1), ((None, "z"), 1)), ls)
    right = Constant((((1, "p"), 1), ((1, "q"), 1)), rs)
    out = evaluate(Join((left, right), ((0, 2),), JoinKind.LEFT), {}, 0)
    assert out.rows == {
        (1, "x", 1, "p"): 1,
        (1, "x", 1, "q"): 1,
        (2, "y", None, None): 1,
        (None, "z", None, None): 1,
    }


def test_division_by_zero_and_overflow_are_typed_errors() -> None:
    with pytest.raises(DivisionByZero):
        eval_scalar(CallBinary(BinaryFunc.DIV, lit(1), lit(0)), ())
    with pytest.raises(DivisionByZero):
        eval_scalar(CallBinary(BinaryFunc.MOD, lit(1.0, S.FLOAT64), lit(0.0, S.FLOAT64)), ())
    with pytest.raises(NumericOverflow):
        eval_scalar(CallBinary(BinaryFunc.ADD, lit(2**63 - 1), lit(1)), ())
    with pytest.raises(NumericOverflow):
        eval_scalar(CallBinary(BinaryFunc.DIV, lit(-(2**63)), lit(-1)), ())
    with pytest.raises(InvalidCast):
        eval_scalar(Cast(lit("abc", S.STRING), S.INT64), ())


def test_integer_division_truncates_and_modulo_follows_the_dividend() -> None:
    assert eval_scalar(CallBinary(BinaryFunc.DIV, lit(-7), lit(2)), ()) == -3
    assert eval_scalar(CallBinary(BinaryFunc.MOD, lit(-7), lit(2)), ()) == -1
    assert eval_scalar(CallBinary(BinaryFunc.MOD, lit(7), lit(-2)), ()) == 1


def test_erroring_rows_go_to_the_error_collection_with_their_multiplicity() -> None:
    schema = Schema.of(("x", "int64", False))
    plan = Map(Get(U1, schema), (CallBinary(BinaryFunc.DIV, lit(10), ColumnRef(0)),), ("q",))
    ups = [((0,), 0, 2), ((5,), 0, 1), ((0,), 1, -2)]
    at0 = evaluate(plan, {U1: ups}, 0)
    assert at0.rows == {(5, 2): 1}
    assert at0.errors == {"division by zero": 2}
    assert evaluate(plan, {U1: ups}, 1).errors == {}


def test_string_functions() -> None:
    s = lit("Hello", S.STRING)
    assert eval_scalar(CallUnary(UnaryFunc.LOWER, s), ()) == "hello"
    assert eval_scalar(CallUnary(UnaryFunc.LENGTH, s), ()) == 5
    assert eval_scalar(CallVariadic(VariadicFunc.SUBSTRING, (s, lit(2), lit(3))), ()) == "ell"
    assert eval_scalar(CallVariadic(VariadicFunc.SUBSTRING, (s, lit(0), lit(2))), ()) == "H"
    assert eval_scalar(CallBinary(BinaryFunc.LIKE, s, lit("H_l%", S.STRING)), ()) is True
    assert (
        eval_scalar(CallBinary(BinaryFunc.LIKE, lit("a%", S.STRING), lit("a\\%", S.STRING)), ())
        is True
    )
    assert (
        eval_scalar(CallBinary(BinaryFunc.LIKE, lit("ab", S.STRING), lit("a\\%", S.STRING)), ())
        is False
    )


def _minmax_plan() -> Reduce:
    schema = Schema.of(("g", "string"), ("v", "int64"))
    aggs = (
        Aggregate(AggFunc.MIN, 1),
        Aggregate(AggFunc.MAX, 1),
        Aggregate(AggFunc.COUNT),
        Aggregate(AggFunc.SUM, 1),
    )
    return Reduce(Get(U1, schema), (0,), aggs)


def test_min_max_when_the_current_extreme_is_retracted() -> None:
    ups = [
        (("a", 1), 0, 1),
        (("a", 5), 0, 1),
        (("a", 3), 0, 1),
        (("a", 1), 1, -1),
        (("a", 5), 2, -1),
    ]
    plan = _minmax_plan()
    assert evaluate(plan, {U1: ups}, 0).rows == {("a", 1, 5, 3, 9): 1}
    assert evaluate(plan, {U1: ups}, 1).rows == {("a", 3, 5, 2, 8): 1}
    assert evaluate(plan, {U1: ups}, 2).rows == {("a", 3, 3, 1, 3): 1}
    # the whole group retracted: the group disappears
    gone = [*ups, (("a", 3), 3, -1)]
    assert evaluate(plan, {U1: gone}, 3).rows == {}


def test_aggregates_ignore_nulls_and_sum_of_nothing_is_null() -> None:
    schema = Schema.of(("g", "string"), ("v", "int64"))
    aggs = (
        Aggregate(AggFunc.COUNT),
        Aggregate(AggFunc.COUNT, 1),
        Aggregate(AggFunc.SUM, 1),
        Aggregate(AggFunc.AVG, 1),
        Aggregate(AggFunc.COUNT, 1, distinct=True),
    )
    plan = Reduce(Get(U1, schema), (0,), aggs)
    ups = [(("a", None), 0, 1), (("b", 2), 0, 2), (("b", 4), 0, 1), (("b", None), 0, 1)]
    assert evaluate(plan, {U1: ups}, 0).rows == {
        ("a", 1, 0, None, None, 0): 1,
        ("b", 4, 3, 8, 8 / 3, 2): 1,
    }


def test_float_sums_are_exact_then_rounded_once() -> None:
    schema = Schema.of(("v", "float64"))
    plan = Reduce(Get(U1, schema), (), (Aggregate(AggFunc.SUM, 0),))
    ups = [((0.1,), 0, 1), ((0.2,), 0, 1), ((0.3,), 0, -1)]
    # exactly 0.1 + 0.2 - 0.3 in binary, rounded once: not 5.55e-17 from left-to-right float addition
    (row,) = evaluate(plan, {U1: ups}, 0).rows
    assert row[0] == float(Fraction(0.1) + Fraction(0.2) - Fraction(0.3))
    assert row[0] != 0.1 + 0.2 - 0.3


def test_top_k_breaks_ties_by_the_whole_row() -> None:
    schema = Schema.of(("g", "string"), ("score", "int64"), ("name", "string"))
    data = [
        (("x", 10, "b"), 0, 1),
        (("x", 10, "a"), 0, 1),
        (("x", 7, "c"), 0, 1),
        (("x", None, "n"), 0, 1),
    ]
    desc = TopK(Get(U1, schema), (0,), (ColumnOrder(1, desc=True),), limit=2)
    assert evaluate(desc, {U1: data}, 0).rows == {("x", 10, "a"): 1, ("x", 10, "b"): 1}
    nulls_first = TopK(Get(U1, schema), (0,), (ColumnOrder(1, nulls_last=False),), limit=1)
    assert evaluate(nulls_first, {U1: data}, 0).rows == {("x", None, "n"): 1}
    offset = TopK(Get(U1, schema), (), (ColumnOrder(1),), limit=2, offset=1)
    assert evaluate(offset, {U1: data}, 0).rows == {("x", 10, "a"): 1, ("x", 10, "b"): 1}


def test_top_k_counts_multiplicities_as_slots() -> None:
    schema = Schema.of(("v", "int64"))
    plan = TopK(Get(U1, schema), (), (ColumnOrder(0),), limit=3, offset=1)
    assert evaluate(plan, {U1: [((1,), 0, 2), ((2,), 0, 5)]}, 0).rows == {(1,): 1, (2,): 2}


def test_threshold_and_distinct_keep_positive_multiplicities() -> None:
    schema = Schema.of(("v", "int64"))
    ups = [((1,), 0, 3), ((2,), 0, -2), ((3,), 0, 1)]
    assert evaluate(Threshold(Get(U1, schema)), {U1: ups}, 0).rows == {(1,): 3, (3,): 1}
    assert evaluate(Distinct(Get(U1, schema)), {U1: ups}, 0).rows == {(1,): 1, (3,): 1}


def test_constant_rows_must_match_the_schema() -> None:
    with pytest.raises(InvalidPlan):
        evaluate(Constant((((1,), "x"),), Schema.of(("v", "int64"))), {}, 0)  # type: ignore[arg-type]
