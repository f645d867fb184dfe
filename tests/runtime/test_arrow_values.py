"""``column_values`` is ``to_pylist``, value for value and type for type.

The law: for every Arrow column the runtime meets (each scalar type's Arrow type,
plus the narrower integers and the decimal that wide sums travel as), with or
without NULLs, chunked or not, ``column_values(col)`` equals ``col.to_pylist()``
element by element, including each value's Python type and a float's bits (NaN,
-0.0). Bytes that are not UTF-8 raise ``to_pylist``'s own error.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.runtime.arrow_values import column_values

_I64 = st.integers(-(2**63), 2**63 - 1)
_VALUES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.int64(), _I64),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    (pa.float32(), st.floats(width=32)),
    (pa.string(), st.text()),
    (pa.bool_(), st.booleans()),
    (pa.date32(), st.dates()),
    (pa.timestamp("us"), st.datetimes(min_value=dt.datetime(1, 1, 1))),
    (pa.decimal128(38, 0), st.integers(-(10**37), 10**37).map(Decimal)),
]


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@st.composite
def _columns(draw: st.DrawFn) -> pa.Array | pa.ChunkedArray:
    arrow_type, values = draw(st.sampled_from(_VALUES))
    item = st.none() | values if draw(st.booleans()) else values
    chunks = draw(st.lists(st.lists(item, max_size=20), max_size=4))
    if draw(st.booleans()) and len(chunks) == 1:
        return pa.array(chunks[0], arrow_type)
    return pa.chunked_array([pa.array(c, arrow_type) for c in chunks], arrow_type)


@given(_columns())
def test_column_values_are_to_pylist_value_for_value_and_type_for_type(
    col: pa.Array | pa.ChunkedArray,
) -> None:
    got, want = column_values(col), col.to_pylist()
    assert len(got) == len(want)
    assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (got, want)


@pytest.mark.parametrize("chunked", [False, True])
def test_a_string_column_that_is_not_utf8_raises_to_pylists_error(chunked: bool) -> None:
    offsets = pa.py_buffer(pa.array([0, 4], pa.int32()).buffers()[1].to_pybytes())
    bad = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(b"ab\xff\xfe")])
    col = pa.chunked_array([bad]) if chunked else bad
    with pytest.raises(UnicodeDecodeError):
        col.to_pylist()
    with pytest.raises(UnicodeDecodeError):
        column_values(col)
