"""smallint, integer and real in answers outside the wire protocol: JSON answers write a real
by the shortest digits of its single precision (as its text), Arrow answers carry Arrow's
int16, int32 and float32 columns."""

from __future__ import annotations

import pyarrow as pa

from tidegate.runtime.sql import SqlResult
from tidegate.spec.plan import ColumnType, ScalarType

_TYPES = (
    ColumnType(ScalarType.INT16),
    ColumnType(ScalarType.INT32),
    ColumnType(ScalarType.FLOAT32),
)
_ROWS = [(-32768, 2**31 - 1, 0.10000000149011612), (None, None, float("inf"))]


def test_json_answers_write_a_real_by_its_single_precision_digits() -> None:
    out = SqlResult("SELECT 2", ("a", "b", "c"), _TYPES, _ROWS).to_json()
    assert out["types"] == ["smallint", "integer", "real"]
    assert out["rows"] == [[-32768, 2**31 - 1, 0.1], [None, None, float("inf")]]


def test_arrow_answers_have_arrow_narrow_types() -> None:
    table = SqlResult("SELECT 2", ("a", "b", "c"), _TYPES, _ROWS).to_arrow()
    assert table.schema.types == [pa.int16(), pa.int32(), pa.float32()]
    assert [tuple(r.values()) for r in table.to_pylist()] == _ROWS
