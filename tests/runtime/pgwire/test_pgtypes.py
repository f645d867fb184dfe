"""The type table's formats, against psycopg's own codecs (an implementation we did not write).

Binary: what we send, psycopg's loaders read back as the same value, and what psycopg's
dumpers send, we read back. Text: psycopg's text loaders read our output as the value.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.types import bool as pbool
from psycopg.types import datetime as pdatetime
from psycopg.types import numeric as pnum
from psycopg.types import string as pstring

from tidegate.spec.errors import InvalidTextRepresentation
from tidegate.spec.plan.numeric import reduce
from tidegate.spec.sql import pgtypes as T

ints = st.integers(-(2**63), 2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"))
dates = st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31))
stamps = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31))

CASES: list[tuple[Any, T.PgType, Any, Any, Any, Any]] = [
    (ints, T.INT8, pnum.Int8BinaryLoader, pnum.Int8BinaryDumper, pnum.IntLoader, int),
    (floats, T.FLOAT8, pnum.Float8BinaryLoader, pnum.FloatBinaryDumper, pnum.FloatLoader, float),
    (texts, T.TEXT, pstring.TextBinaryLoader, pstring.StrBinaryDumper, pstring.TextLoader, str),
    (st.booleans(), T.BOOL, pbool.BoolBinaryLoader, pbool.BoolBinaryDumper, pbool.BoolLoader, bool),
    (
        dates,
        T.DATE,
        pdatetime.DateBinaryLoader,
        pdatetime.DateBinaryDumper,
        pdatetime.DateLoader,
        dt.date,
    ),
    (
        stamps,
        T.TIMESTAMP,
        pdatetime.TimestampBinaryLoader,
        pdatetime.DatetimeNoTzBinaryDumper,
        pdatetime.TimestampLoader,
        dt.datetime,
    ),
]


@pytest.mark.parametrize(
    ("values", "pgtype", "bin_loader", "bin_dumper", "text_loader", "py"),
    CASES,
    ids=[c[1].name for c in CASES],
)
@given(data=st.data())
def test_formats_agree_with_psycopg(
    values: Any,
    pgtype: T.PgType,
    bin_loader: Any,
    bin_dumper: Any,
    text_loader: Any,
    py: Any,
    data: st.DataObject,
) -> None:
    v = data.draw(values)
    ours = T.binary_out(v, pgtype)
    assert bin_loader(pgtype.oid).load(ours) == v
    theirs = bytes(bin_dumper(py).dump(v))
    assert T.binary_in(theirs, pgtype) == v
    text = T.text_out(v)
    assert text_loader(pgtype.oid).load(text.encode()) == v
    assert T.text_in(text, pgtype) == v


@given(
    st.one_of(
        ints,
        st.decimals(
            allow_nan=False, allow_infinity=False, places=6, min_value=-(10**12), max_value=10**12
        ),
    )
)
def test_numeric_binary_agrees_with_psycopg(v: Any) -> None:
    value = int(v) if isinstance(v, int) else float(v)
    ours = T.binary_out(value, T.NUMERIC)
    loaded = pnum.NumericBinaryLoader(T.NUMERIC.oid).load(ours)
    assert Decimal(loaded) == Decimal(repr(value)) if isinstance(value, float) else loaded == value
    theirs = bytes(pnum.DecimalBinaryDumper(Decimal).dump(Decimal(str(v))))
    back = T.binary_in(theirs, T.NUMERIC)
    assert back == Decimal(str(v)) and back == reduce(back)  # exact, and reduced


NUMERICS = st.builds(
    lambda i, e: reduce(Decimal(i).scaleb(-e)), st.integers(-(10**40), 10**40), st.integers(-5, 60)
)
"""Numerics of up to 40 digits before the point and 60 after."""


@given(NUMERICS)
def test_numeric_values_agree_with_psycopg_in_text_and_binary(v: Decimal) -> None:
    """A numeric value (any digits, any scale) goes out exactly and comes back itself."""
    assert pnum.NumericBinaryLoader(T.NUMERIC.oid).load(T.binary_out(v, T.NUMERIC)) == v
    assert Decimal(T.text_out(v)) == v and "E" not in T.text_out(v)
    assert T.text_in(T.text_out(v), T.NUMERIC) == v
    theirs = bytes(pnum.DecimalBinaryDumper(Decimal).dump(v))
    assert T.binary_in(theirs, T.NUMERIC) == v


def test_float_text_is_postgresql_s() -> None:
    assert [T.text_out(x) for x in (1.0, 100.0, 0.1, 1e20, 1.5e-7, -2.5, 1e16)] == [
        "1",
        "100",
        "0.1",
        "1e+20",
        "1.5e-07",
        "-2.5",
        "1e+16",
    ]
    assert T.text_out(dt.datetime(2024, 1, 2, 3, 4, 5, 500000)) == "2024-01-02 03:04:05.5"
    assert T.text_out(True) == "t" and T.text_out([1, None, "a b"]) == '{1,NULL,"a b"}'


@pytest.mark.parametrize(
    ("text", "pgtype", "state"),
    [
        ("abc", T.INT8, "22P02"),
        ("1.5x", T.FLOAT8, "22P02"),
        ("2024-13-01", T.DATE, "22P02"),
        ("70000", T.INT2, "22003"),
        ("maybe", T.BOOL, "22P02"),
    ],
)
def test_bad_text_is_a_typed_error(text: str, pgtype: T.PgType, state: str) -> None:
    with pytest.raises(InvalidTextRepresentation) as e:
        T.text_in(text, pgtype)
    assert e.value.sqlstate == state


@given(st.binary(max_size=20), st.sampled_from(T.TYPES))
def test_any_binary_input_is_a_value_or_a_typed_error(data: bytes, pgtype: T.PgType) -> None:
    try:
        T.binary_in(data, pgtype)
    except InvalidTextRepresentation as e:
        assert e.sqlstate in ("22P03", "0A000")


def test_every_scalar_type_has_one_postgresql_type() -> None:
    from tidegate.spec.plan import ScalarType

    assert {s: T.for_scalar(s).name for s in ScalarType} == {
        ScalarType.INT64: "int8",
        ScalarType.FLOAT64: "float8",
        ScalarType.STRING: "text",
        ScalarType.BOOL: "bool",
        ScalarType.DATE: "date",
        ScalarType.TIMESTAMP: "timestamp",
        ScalarType.NUMERIC: "numeric",
        ScalarType.INT16: "int2",
        ScalarType.INT32: "int4",
        ScalarType.FLOAT32: "float4",
    }
    assert len({t.oid for t in T.TYPES}) == len(T.TYPES)


def test_narrow_numbers_in_text_and_binary() -> None:
    """smallint, integer and real: PostgreSQL's text (a real's shortest single-precision
    digits) and binary formats, read back by psycopg's loaders, and their ranges on input."""
    single = 0.10000000149011612  # 0.1 as a real
    assert T.text_out(single, T.FLOAT4) == "0.1"
    assert T.text_out(single, T.FLOAT8) == "0.10000000149011612"
    assert T.text_out(123456792.0, T.FLOAT4) == "1.2345679e+08"
    assert T.text_in("0.1", T.FLOAT4) == single
    assert pnum.Float4BinaryLoader(T.FLOAT4.oid).load(T.binary_out(single, T.FLOAT4)) == single
    assert pnum.Int2BinaryLoader(T.INT2.oid).load(T.binary_out(-32768, T.INT2)) == -32768
    assert pnum.Int4BinaryLoader(T.INT4.oid).load(T.binary_out(2**31 - 1, T.INT4)) == 2**31 - 1
    for text, t in (("32768", T.INT2), ("2147483648", T.INT4), ("1e39", T.FLOAT4)):
        with pytest.raises(InvalidTextRepresentation) as e:
            T.text_in(text, t)
        assert e.value.sqlstate == "22003"


def test_numeric_binary_carries_nan_and_infinities() -> None:
    """A float8 may be NaN or infinite; numeric's binary format has PostgreSQL 14's codes."""
    for value, exact in ((math.inf, "Infinity"), (-math.inf, "-Infinity")):
        ours = T.binary_out(value, T.NUMERIC)
        assert pnum.NumericBinaryLoader(T.NUMERIC.oid).load(ours) == Decimal(exact)
        theirs = bytes(pnum.DecimalBinaryDumper(Decimal).dump(Decimal(exact)))
        assert T.binary_in(theirs, T.NUMERIC) == value
    assert pnum.NumericBinaryLoader(T.NUMERIC.oid).load(T.binary_out(math.nan, T.NUMERIC)).is_nan()
    theirs = bytes(pnum.DecimalBinaryDumper(Decimal).dump(Decimal("NaN")))
    assert math.isnan(T.binary_in(theirs, T.NUMERIC))


def test_numeric_binary_of_a_float_is_its_shortest_decimal() -> None:
    """Found by the property above: 7.5e-05 was sent as its binary fraction's 20 digits."""
    ours = T.binary_out(7.5e-05, T.NUMERIC)
    assert pnum.NumericBinaryLoader(T.NUMERIC.oid).load(ours) == Decimal("0.000075")
