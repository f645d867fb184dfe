"""int16, int32 and float32: the plan's narrow number types. Laws of the widen-and-narrow
arithmetic the SQL front end lowers ``smallint``/``integer``/``real`` operators to, the
single-precision text against NumPy's shortest float32 digits (a library we did not write),
and PostgreSQL's answers at the edges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import InvalidCast, NumericOverflow, TypeMismatch
from tidegate.spec.plan import ScalarType as S
from tidegate.spec.plan.scalar import BinaryFunc, CallBinary, Cast, ColumnRef, scalar_type
from tidegate.spec.plan.scalar_eval import (
    cast_value,
    compile_scalar,
    float32_numeric,
    float32_text,
    to_float32,
)
from tidegate.spec.plan.schema import ColumnType, Schema, is_float32, value_matches

_OPS = [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]
_RANGE = {S.INT16: (-(2**15), 2**15 - 1), S.INT32: (-(2**31), 2**31 - 1)}
_NAME = {S.INT16: "smallint", S.INT32: "integer"}
singles = st.floats(width=32, allow_nan=False)


def _narrowed(op: BinaryFunc, wide: S, narrow: S) -> CallBinary | Cast:
    return Cast(CallBinary(op, Cast(ColumnRef(0), wide), Cast(ColumnRef(1), wide)), narrow)


@given(st.sampled_from([S.INT16, S.INT32]), st.data())
def test_integer_arithmetic_is_exact_or_out_of_range(t: S, data: st.DataObject) -> None:
    lo, hi = _RANGE[t]
    a, b = data.draw(st.integers(lo, hi)), data.draw(st.integers(lo, hi))
    op = data.draw(st.sampled_from(_OPS))
    f = compile_scalar(_narrowed(op, S.INT64, t))
    if op in (BinaryFunc.DIV, BinaryFunc.MOD) and b == 0:
        return
    exact = {
        BinaryFunc.ADD: a + b,
        BinaryFunc.SUB: a - b,
        BinaryFunc.MUL: a * b,
        BinaryFunc.DIV: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) if b else 0,
        BinaryFunc.MOD: (abs(a) % abs(b)) * (1 if a >= 0 else -1) if b else 0,
    }[op]
    if lo <= exact <= hi:
        assert f((a, b)) == exact
        assert value_matches(exact, t)
    else:
        with pytest.raises(NumericOverflow, match=f"{_NAME[t]} out of range"):
            f((a, b))


@given(singles, singles, st.sampled_from(_OPS[:4]))
def test_real_arithmetic_is_the_single_nearest_the_exact_result(
    a: float, b: float, op: BinaryFunc
) -> None:
    """Computed in double and rounded once, each of + - * / is the correctly rounded single
    (a double holds the exact sum or product of two singles' 24-bit mantissas, so the one
    rounding is NumPy's float32 operation), or PostgreSQL's 22003 where that overflows."""
    if op is BinaryFunc.DIV and b == 0:
        return
    f = compile_scalar(_narrowed(op, S.FLOAT64, S.FLOAT32))
    with np.errstate(all="ignore"):
        x, y = np.float32(a), np.float32(b)
        want = {BinaryFunc.ADD: x + y, BinaryFunc.SUB: x - y, BinaryFunc.MUL: x * y}.get(op)
    try:
        got = f((a, b))
    except NumericOverflow:
        return  # overflow (a finite result beyond single range) or underflow: both 22003
    assert is_float32(got)
    if want is not None:
        assert got == float(want) or (got != got and want != want)


@given(singles)
def test_real_text_is_numpys_shortest_single_digits(v: float) -> None:
    text = float32_text(v)
    assert to_float32(float(text.replace("Infinity", "inf"))) == v or v != v
    ours = float(text)
    theirs = float(np.format_float_scientific(np.float32(v), unique=True))
    assert ours == theirs


def test_postgresqls_answers_at_the_edges() -> None:
    assert float32_text(to_float32(1 / 3)) == "0.33333334"
    assert float32_text(to_float32(123456789.0)) == "1.2345679e+08"
    assert float32_text(to_float32(1e-5)) == "1e-05"
    assert float32_text(to_float32(100000.0)) == "100000"
    assert float32_text(to_float32(1e6)) == "1e+06"
    assert str(float32_numeric(to_float32(123456789.0))) == "123457000"
    assert cast_value(2.5, S.INT32) == 2 and cast_value(3.5, S.INT16) == 4
    for v, t, message in (
        ("40000", S.INT16, 'value "40000" is out of range for type smallint'),
        (3_000_000_000, S.INT32, "integer out of range"),
        (1e39, S.FLOAT32, "value out of range: overflow"),
        (1e-50, S.FLOAT32, "value out of range: underflow"),
        ("1e39", S.FLOAT32, '"1e39" is out of range for type real'),
    ):
        with pytest.raises(NumericOverflow, match=message):
            cast_value(v, t)
    with pytest.raises(InvalidCast, match='type integer: "abc"'):
        cast_value("abc", S.INT32)


def test_arithmetic_takes_only_wide_types() -> None:
    schema = Schema.of(("a", "int32"), ("b", "float32"))
    with pytest.raises(TypeMismatch, match="cast to its wide type"):
        scalar_type(CallBinary(BinaryFunc.ADD, ColumnRef(0), ColumnRef(0)), schema)
    with pytest.raises(TypeMismatch):
        scalar_type(Cast(ColumnRef(1), S.STRING), schema)
    widened = _narrowed(BinaryFunc.ADD, S.INT64, S.INT32)
    assert scalar_type(widened, schema) == ColumnType(S.INT32, True)


def test_the_dsl_takes_narrow_columns_in_arithmetic_and_sums_widened() -> None:
    """A table with SQL's integer and real columns, used from the DSL: arithmetic and sums
    take them as their wide types (int64, float64)."""
    from tidegate.dsl import avg, col, count, sum_, table
    from tidegate.spec.ids import GlobalId

    f = table(GlobalId.user(1), Schema.of(("a", "int32"), ("g", "string"), ("r", "float32")))
    m = f.with_columns(x=col("a") + 1, y=col("r") * 2).filter(col("a") > 3)
    assert [str(c.type) for c in m.schema.columns[3:]] == ["int64?", "float64?"]
    g = f.group_by("g").agg(sum_("a"), avg("r"), count())
    assert str(g.schema) == "(g: string?, sum_a: int64?, avg_r: float64?, count: int64)"
