"""``numeric`` (``spec/plan/numeric.py`` and the evaluator's use of it): PostgreSQL's answers
for its arithmetic, rounding, casts and input (examples worked out from PostgreSQL's
``numeric.c`` rules and checked against a real PostgreSQL by ``tests/slt/types.slt`` and the
differential oracle), and the laws that make them exact."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import DivisionByZero, InvalidCast, NumericOverflow
from tidegate.spec.plan import ScalarType
from tidegate.spec.plan.aggregates import aggregate
from tidegate.spec.plan.numeric import (
    apply_typmod,
    div_scale,
    float_to_numeric,
    numeric_add,
    numeric_div,
    numeric_mod,
    numeric_mul,
    numeric_sub,
    numeric_text,
    parse_numeric,
    reduce,
    round_numeric,
    trunc_numeric,
)
from tidegate.spec.plan.relation import AggFunc, Aggregate
from tidegate.spec.plan.scalar_eval import cast_value
from tidegate.spec.plan.schema import value_matches

D = Decimal
NUMERICS = st.builds(
    lambda i, e: reduce(D(i).scaleb(-e)), st.integers(-(10**50), 10**50), st.integers(-10, 60)
)


@pytest.mark.parametrize(
    ("a", "b", "q"),
    [
        ("1", "3", "0.33333333333333333333"),
        ("2", "3", "0.66666666666666666667"),
        ("10", "4", "2.5"),
        ("1", "7", "0.14285714285714285714"),
        ("0.001", "7", "0.00014285714285714286"),
        ("123456789", "0.001", "123456789000"),
        ("-1", "3", "-0.33333333333333333333"),
        ("100000000", "3", "33333333.333333333333"),
        ("1.5", "0.0000000001", "15000000000"),
    ],
)
def test_division_rounds_at_postgresqls_scale(a: str, b: str, q: str) -> None:
    assert numeric_div(D(a), D(b)) == D(q)
    assert numeric_text(numeric_div(D(a), D(b))) == q


def test_the_other_operations_are_exact() -> None:
    assert numeric_add(D("0.1"), D("0.2")) == D("0.3")
    assert numeric_mod(D("4.3"), D("2.1")) == D("0.1")
    assert numeric_mod(D("-7.5"), D(2)) == D("-1.5")
    assert numeric_mul(D("1.1"), D("1.1")) == D("1.21")
    assert numeric_sub(D("1.5"), D("1.5")) == D(0) and not numeric_sub(D(1), D(1)).is_signed()
    with pytest.raises(DivisionByZero):
        numeric_div(D(1), D(0))
    with pytest.raises(DivisionByZero):
        numeric_mod(D(1), D(0))


def test_rounding_is_half_away_from_zero() -> None:
    assert [round_numeric(D(x)) for x in ("2.5", "-2.5", "0.49", "-0.5")] == [3, -3, 0, -1]
    assert round_numeric(D("1.235"), 2) == D("1.24")
    assert round_numeric(D("1234.5"), -2) == D(1200)
    assert trunc_numeric(D("-1.29"), 1) == D("-1.2")
    assert cast_value(D("2.5"), ScalarType.INT64) == 3
    assert cast_value(D("-2.5"), ScalarType.INT64) == -3


def test_a_typmod_rounds_and_overflows_as_postgresql() -> None:
    assert apply_typmod(D("1.555"), 5, 2) == D("1.56")
    assert apply_typmod(D("-999.994"), 5, 2) == D("-999.99")
    with pytest.raises(NumericOverflow, match="numeric field overflow"):
        apply_typmod(D("999.995"), 5, 2)  # rounds to 1000.00: four digits before the point
    with pytest.raises(NumericOverflow, match="numeric field overflow"):
        apply_typmod(parse_numeric("1e999"), 5, 2)
    assert apply_typmod(D("0.5"), 1, 1) == D("0.5")
    with pytest.raises(NumericOverflow):
        apply_typmod(D(1), 1, 1)


def test_input_is_postgresqls_and_bad_input_is_typed() -> None:
    cases = {" 1.50 ": "1.5", "1.": "1", ".5": "0.5", "1e-3": "0.001", "-0": "0", "+2E2": "200"}
    assert {k: numeric_text(parse_numeric(k)) for k in cases} == cases
    for bad in ("abc", "", "1.2.3", "1e", "--1", "1_000", "0x10"):
        with pytest.raises(InvalidCast, match="invalid input syntax for type numeric"):
            parse_numeric(bad)
    for special in ("NaN", "Infinity", "-inf"):
        with pytest.raises(InvalidCast, match="not supported"):
            parse_numeric(special)
    assert parse_numeric("1e131071") > 0 and parse_numeric("1e-16383") > 0
    for beyond in ("1e131072", "1e-16384"):  # PostgreSQL's limits: 131072 digits, scale 16383
        with pytest.raises(NumericOverflow):
            parse_numeric(beyond)


def test_floats_convert_through_fifteen_digits() -> None:
    assert float_to_numeric(0.1) == D("0.1")
    assert float_to_numeric(1 / 3) == D("0.333333333333333")
    assert float_to_numeric(-0.0) == D(0)
    with pytest.raises(InvalidCast):
        float_to_numeric(float("nan"))
    assert cast_value(D("0.1"), ScalarType.FLOAT64) == 0.1
    with pytest.raises(NumericOverflow):
        cast_value(D("1e400"), ScalarType.FLOAT64)


def test_text_has_no_exponent_and_no_trailing_zeros() -> None:
    assert numeric_text(reduce(D("1E-7"))) == "0.0000001"
    assert numeric_text(reduce(D("1E+3"))) == "1000"
    assert numeric_text(reduce(D("-2.500"))) == "-2.5"
    assert cast_value(reduce(D("1E-7")), ScalarType.STRING) == "0.0000001"


def test_sum_is_exact_and_avg_rounds_at_the_division_scale() -> None:
    rows = [(D("0.1"), 1), (D("0.2"), 2), (D("123456789012345678901234567890"), 1)]
    assert aggregate(Aggregate(AggFunc.SUM, 0), rows) == D("123456789012345678901234567890.5")
    assert aggregate(Aggregate(AggFunc.AVG, 0), [(D(1), 1), (D(2), 2)]) == D("1.6666666666666667")
    assert aggregate(Aggregate(AggFunc.AVG, 0), [(D("0.1"), 1), (D("0.2"), 1)]) == D("0.15")


@given(NUMERICS, NUMERICS)
def test_add_sub_mul_are_exact(a: Decimal, b: Decimal) -> None:
    fa, fb = Fraction(a), Fraction(b)
    assert Fraction(numeric_add(a, b)) == fa + fb
    assert Fraction(numeric_sub(a, b)) == fa - fb
    assert Fraction(numeric_mul(a, b)) == fa * fb


@given(NUMERICS, NUMERICS.filter(bool))
def test_division_is_the_exact_quotient_rounded_once(a: Decimal, b: Decimal) -> None:
    q, scale = numeric_div(a, b), div_scale(a, b)
    exact = Fraction(a) / Fraction(b)
    ulp = Fraction(1, 10**scale)
    assert abs(Fraction(q) - exact) <= ulp / 2
    assert Fraction(q) * 10**scale == int(Fraction(q) * 10**scale)  # at most `scale` digits
    if q:  # at least 16 significant digits (PostgreSQL's NUMERIC_MIN_SIG_DIGITS), give or take
        # the base-10000 digit PostgreSQL estimates the quotient's weight by
        assert q.adjusted() + scale + 1 >= 16 - 4


@given(NUMERICS)
def test_values_are_reduced_and_text_reads_back(v: Decimal) -> None:
    assert value_matches(v, ScalarType.NUMERIC)
    assert reduce(v) == v and str(reduce(v)) == str(v)
    assert parse_numeric(numeric_text(v)) == v
    assert str(parse_numeric(numeric_text(v))) == str(v)
    assert not value_matches(D("1.50"), ScalarType.NUMERIC)  # not reduced
    assert not value_matches(D("NaN"), ScalarType.NUMERIC)


def test_the_evaluator_keeps_every_digit() -> None:
    """Python's ``-x``, ``abs(x)`` and ``x + y`` round a Decimal to the context's 28 digits;
    the evaluator's numerics never do."""
    from tidegate.spec.plan import BinaryFunc, CallBinary, CallUnary, ColumnRef, UnaryFunc
    from tidegate.spec.plan.scalar_eval import compile_scalar

    big = D("-123456789012345678901234567890123456789.000000000000000000001")
    x = ColumnRef(0)
    assert compile_scalar(CallUnary(UnaryFunc.NEG, x))((big,)) == big.copy_negate()
    assert compile_scalar(CallUnary(UnaryFunc.ABS, x))((big,)) == big.copy_abs()
    assert Fraction(compile_scalar(CallBinary(BinaryFunc.ADD, x, x))((big,))) == 2 * Fraction(big)
    assert compile_scalar(CallBinary(BinaryFunc.MUL, x, ColumnRef(1)))((big, 3)) == D(
        "-370370367037037036703703703670370370367.000000000000000000003"
    )
    assert compile_scalar(CallBinary(BinaryFunc.LT, x, ColumnRef(1)))((big, -(10**38))) is True
    assert compile_scalar(CallBinary(BinaryFunc.EQ, x, ColumnRef(1)))((D("0.5"), 0.5)) is True
    assert compile_scalar(CallBinary(BinaryFunc.EQ, x, ColumnRef(1)))((D("0.1"), 0.1)) is True
