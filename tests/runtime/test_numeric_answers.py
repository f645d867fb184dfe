"""Numerics in answers outside the wire protocol: JSON answers (``SqlResult.to_json``, the
CLI's rows) write a numeric as its exact text, as Materialize's HTTP API does, and read it
back from text or a JSON number; Arrow answers carry it exactly."""

from __future__ import annotations

import json
from decimal import Decimal

from tidegate.commands.values import dumps, row_to_json, rows_from_json
from tidegate.runtime.arrow_values import column_values
from tidegate.runtime.sql import SqlResult
from tidegate.spec.plan import ColumnType, ScalarType, Schema

BIG = Decimal("-123456789012345678901234567890123456789.000000000000000000001")


def test_json_answers_write_numerics_as_exact_text() -> None:
    result = SqlResult(
        "SELECT 2",
        ("n",),
        (ColumnType(ScalarType.NUMERIC),),
        [(BIG,), (Decimal("1E-30"),)],
    )
    out = result.to_json()
    assert out["types"] == ["numeric"]
    assert out["rows"] == [[str(BIG)], ["0.000000000000000000000000000001"]]
    assert json.loads(dumps({"n": Decimal("1E-7")})) == {"n": "0.0000001"}
    assert row_to_json((Decimal("12.5"), 1)) == ["12.5", 1]


def test_json_rows_take_numerics_as_text_or_numbers() -> None:
    schema = Schema.of(("n", "numeric"))
    rows = rows_from_json([["12.50"], [3], [0.5], [None]], schema)
    assert rows == [
        ((Decimal("12.5"),), 1),
        ((Decimal(3),), 1),
        ((Decimal("0.5"),), 1),
        ((None,), 1),
    ]


def test_arrow_answers_carry_numerics_exactly() -> None:
    result = SqlResult("SELECT 2", ("n",), (ColumnType(ScalarType.NUMERIC),), [(BIG,), (None,)])
    table = result.to_arrow()
    assert column_values(table.column(0)) == [BIG, None]
