"""PostgreSQL's semantics in the pure front end and evaluator: text output of floats, NaN and
infinities, input syntax, interval literals, constant folding, function resolution and
SQLSTATEs. End to end (against PostgreSQL itself) these are checked by ``tests/slt`` and
``tests/sql_pg_oracle``; here they are pinned on examples and stated as laws."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.errors import (
    AmbiguousFunction,
    DuplicateAlias,
    EvaluationError,
    GroupingError,
    InvalidParameterValue,
    NumericValueOutOfRange,
    SqlDivisionByZero,
    SqlError,
    SqlSyntaxError,
    UndefinedFunction,
    UnsupportedSql,
    WrongObjectType,
    data_error,
)
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    ColumnRef,
    If,
    Join,
    JoinKind,
    Literal,
    Map,
    Project,
    ScalarType,
    Schema,
    UnaryFunc,
    VariadicFunc,
    eval_scalar,
    evaluate,
)
from tidegate.spec.plan.scalar_eval import NAN, cast_value, float_text, timestamp_text
from tidegate.spec.sql import CatalogItem, DictCatalog, lower_query, parse_one
from tidegate.spec.sql._binder import interval_us
from tidegate.spec.sql._fold import fold

S = ScalarType
A = Schema.of(("k", "int64"), ("x", "string"))
B = Schema.of(("k", "int64"), ("y", "string"))
CAT = DictCatalog(
    [CatalogItem("a", GlobalId.user(1), A, "table"), CatalogItem("b", GlobalId.user(2), B, "table")]
)
ROWS = {
    GlobalId.user(1): {(1, "a1"): 1, (2, "a2"): 1},
    GlobalId.user(2): {(2, "b2"): 1, (3, "b3"): 1},
}


def _answer(sql: str) -> list[tuple[Any, ...]]:
    stmt = parse_one(sql)
    low = lower_query(stmt.query, CAT, (), sql)  # type: ignore[union-attr]
    inputs = {g: [(row, 0, n) for row, n in r.items()] for g, r in ROWS.items()}
    coll = evaluate(low.relation(), inputs, 0)
    assert not coll.errors, coll.errors
    return sorted(((r, n) for r, n in coll.rows.items()), key=repr)  # type: ignore[arg-type]


def _error(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        stmt = parse_one(sql)
        lower_query(stmt.query, CAT, (), sql)  # type: ignore[union-attr]
    return info.value


# -- joins --------------------------------------------------------------------------------------


def test_using_merges_the_join_columns_and_lists_them_first() -> None:
    full = _answer("SELECT * FROM a FULL JOIN b USING (k)")
    assert full == sorted(
        [((1, "a1", None), 1), ((2, "a2", "b2"), 1), ((3, None, "b3"), 1)], key=repr
    )
    right = _answer("SELECT k FROM a RIGHT JOIN b USING (k)")
    assert right == [((2,), 1), ((3,), 1)]
    natural = _answer("SELECT * FROM a NATURAL LEFT JOIN b")
    assert natural == [((1, "a1", None), 1), ((2, "a2", "b2"), 1)]


def test_the_comma_binds_looser_than_join() -> None:
    got = _answer("SELECT a.k, b.k, c.k FROM a, b RIGHT JOIN a AS c ON b.k = c.k")
    assert len(got) == 4  # every a row with each of c's two rows (one matched, one not)
    assert isinstance(_error("SELECT * FROM a, b JOIN a AS c ON a.k = c.k"), SqlError)


def test_a_one_sided_condition_of_an_outer_join_keeps_the_side_it_keeps() -> None:
    stmt = parse_one("SELECT a.x, b.y FROM a LEFT JOIN b ON a.k = b.k AND a.x = 'a1'")
    plan = lower_query(stmt.query, CAT).plan  # type: ignore[union-attr]
    assert any(isinstance(p, Join) and p.kind is JoinKind.LEFT for p in _walk(plan))
    got = _answer("SELECT a.x, b.y FROM a LEFT JOIN b ON a.k = b.k AND a.x = 'a1'")
    assert got == [(("a1", None), 1), (("a2", None), 1)]


def _walk(p: Any) -> list[Any]:
    from tidegate.spec.plan import children

    out = [p]
    for c in children(p):
        out.extend(_walk(c))
    return out


def test_invalid_sql_is_refused_with_postgresqls_codes() -> None:
    cases = {
        "SELECT * FROM a, a": DuplicateAlias,
        "WITH q AS (SELECT 1), q AS (SELECT 2) SELECT * FROM q": DuplicateAlias,
        "SELECT count() FROM a": WrongObjectType,
        "SELECT true || false": UndefinedFunction,
        "SELECT length('x', 9)": UndefinedFunction,
        "SELECT extract(year FROM NULL)": AmbiguousFunction,
        "SELECT k, count(*) FROM a": GroupingError,
        "SELECT 1::float(0)": InvalidParameterValue,
        "SELECT 2 * FROM a": SqlSyntaxError,
        "SELECT random()": UnsupportedSql,
        "SELECT 1::uuid": UnsupportedSql,
    }
    for sql, cls in cases.items():
        e = _error(sql)
        assert isinstance(e, cls), (sql, e)
        assert e.sqlstate == cls.sqlstate and "sqlglot" not in e.message, (sql, e)


# -- values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-0.0, "-0"),
        (0.1, "0.1"),
        (1e15, "1e+15"),
        (123456789012345.6, "123456789012345.6"),
        (0.0001, "0.0001"),
        (1e-05, "1e-05"),
        (1.5e-07, "1.5e-07"),
        (1e100, "1e+100"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (NAN, "NaN"),
    ],
)
def test_floats_print_as_postgresql_prints_them(value: float, text: str) -> None:
    assert float_text(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_reads_back_as_the_same_float(x: float) -> None:
    assert float(float_text(x)) == x


def test_timestamps_print_without_trailing_zeros() -> None:
    import datetime as dt

    assert timestamp_text(dt.datetime(2024, 1, 1, 10, 0, 0, 500000)) == "2024-01-01 10:00:00.5"
    assert timestamp_text(dt.datetime(2024, 1, 1)) == "2024-01-01 00:00:00"


def test_nan_equals_itself_and_sorts_above_infinity() -> None:
    nan, inf = Literal(NAN, S.FLOAT64), Literal(math.inf, S.FLOAT64)
    assert eval_scalar(CallBinary(BinaryFunc.EQ, nan, nan), ()) is True
    assert eval_scalar(CallBinary(BinaryFunc.GT, nan, inf), ()) is True
    assert eval_scalar(CallBinary(BinaryFunc.LT, inf, nan), ()) is True
    assert eval_scalar(CallBinary(BinaryFunc.SUB, inf, inf), ()) is NAN
    assert eval_scalar(CallUnary(UnaryFunc.NEG, nan), ()) is NAN  # one object: rows consolidate
    with pytest.raises(EvaluationError, match="underflow"):
        eval_scalar(
            CallBinary(BinaryFunc.MUL, Literal(1e-300, S.FLOAT64), Literal(1e-300, S.FLOAT64)), ()
        )


def test_input_syntax_is_postgresql_15s() -> None:
    assert cast_value(" 12 ", S.INT64) == 12
    for bad in ("1_000", "0x10", "1.5", ""):
        with pytest.raises(EvaluationError):
            cast_value(bad, S.INT64)
    assert cast_value("-Infinity", S.FLOAT64) == -math.inf
    assert cast_value("nan", S.FLOAT64) is NAN
    with pytest.raises(EvaluationError, match="out of range"):
        cast_value("1e-400", S.FLOAT64)


def test_interval_literals_keep_microseconds() -> None:
    assert interval_us("22.0044", "second") == 22_004_400
    assert interval_us("1 day 02:03:04.5") == ((26 * 60 + 3) * 60 + 4) * 1_000_000 + 500_000
    assert interval_us("-1 hour 30 minutes") == -30 * 60 * 1_000_000
    with pytest.raises(LookupError):
        interval_us("1 month")


# -- constant folding -----------------------------------------------------------------------------

_X = Schema.of(("x", "int64"))
_I = S.INT64


def _div0() -> CallBinary:
    return CallBinary(BinaryFunc.DIV, Literal(1, _I), Literal(0, _I))


def test_folding_fails_where_postgresql_fails_and_skips_what_it_skips() -> None:
    with pytest.raises(EvaluationError):  # a branch no row may take is still folded
        fold(
            If(CallBinary(BinaryFunc.GT, ColumnRef(0), Literal(0, _I)), Literal(1, _I), _div0()), _X
        )
    # a constant condition picks its branch; COALESCE, AND stop early
    assert fold(If(Literal(True, S.BOOL), Literal(1, _I), _div0()), _X) == Literal(1, _I)
    assert fold(CallVariadic(VariadicFunc.COALESCE, (Literal(1, _I), _div0())), _X) == Literal(
        1, _I
    )
    false_and = CallVariadic(
        VariadicFunc.AND,
        (Literal(False, S.BOOL), CallBinary(BinaryFunc.EQ, _div0(), Literal(1, _I))),
    )
    assert fold(false_and, _X) == Literal(False, S.BOOL)
    # a strict call with a constant NULL is NULL, its other arguments not evaluated
    null_plus = CallBinary(BinaryFunc.ADD, Literal(None, _I), ColumnRef(0))
    assert fold(null_plus, _X) == Literal(None, _I)


_exprs = st.deferred(
    lambda: st.one_of(
        st.builds(lambda v: Literal(v, _I), st.one_of(st.none(), st.integers(-5, 5))),
        st.just(ColumnRef(0)),
        st.builds(
            lambda f, a, b: CallBinary(f, a, b),
            st.sampled_from([BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV]),
            _exprs,
            _exprs,
        ),
        st.builds(lambda a, b: CallVariadic(VariadicFunc.COALESCE, (a, b)), _exprs, _exprs),
        st.builds(
            lambda a, b, c: If(CallBinary(BinaryFunc.LT, a, Literal(0, _I)), b, c),
            _exprs,
            _exprs,
            _exprs,
        ),
    )
)


@given(_exprs, st.one_of(st.none(), st.integers(-5, 5)))
def test_folding_never_changes_an_answer(e: Any, x: int | None) -> None:
    """Where both the folded and the unfolded expression give an answer, it is the same one."""
    try:
        folded = fold(e, _X)
        want = eval_scalar(e, (x,))
    except EvaluationError:
        return
    assert eval_scalar(folded, (x,)) == want


def test_data_errors_carry_postgresqls_codes() -> None:
    assert isinstance(data_error("division by zero"), SqlDivisionByZero)
    assert isinstance(data_error("integer out of range"), NumericValueOutOfRange)
    assert data_error("cannot take square root of a negative number").sqlstate == "2201F"
    assert data_error("null character not permitted").sqlstate == "54000"
    assert data_error("field position must not be zero").sqlstate == "22023"


def test_a_computed_column_is_a_map() -> None:
    stmt = parse_one("SELECT k + 1 AS j FROM a")
    plan = lower_query(stmt.query, CAT).plan  # type: ignore[union-attr]
    assert any(isinstance(p, Map | Project) for p in _walk(plan))
