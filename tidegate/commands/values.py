"""Rows as JSON: what the CLI and the control endpoint send, checked against a table's schema.

JSON has no dates, and does not tell ``1`` from ``1.0`` reliably across tools,
so values are converted by column type: ``date``/``timestamp`` columns take ISO
strings, ``float64`` columns accept integers. Everything else must already be
the right JSON type; :func:`tidegate.spec.plan.schema.check_row` has the final word.

JSON has no NaN or infinities either, while a ``double`` holds them (as in
PostgreSQL and Materialize). So they travel as the strings PostgreSQL writes for
them, ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``, as Materialize's HTTP API
writes them: :func:`dumps` (every JSON answer of the control endpoint) writes a
non-finite float anywhere in a payload so, and ``float64`` columns take those
strings in rows.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from tidegate.spec.errors import ArityMismatch, EvaluationError, TypeMismatch
from tidegate.spec.frontier import Row
from tidegate.spec.plan.numeric import numeric_text, parse_numeric
from tidegate.spec.plan.schema import ScalarType, Schema, check_row

__all__ = [
    "NON_FINITE",
    "RowsError",
    "dumps",
    "format_value",
    "keys_from_json",
    "parse_rows",
    "row_to_json",
    "rows_from_json",
    "value_to_json",
]


class RowsError(ValueError):
    """Rows given on the command line or to the control endpoint that cannot be used."""


NON_FINITE: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""PostgreSQL's text of the ``double`` values JSON cannot hold, and what they are."""


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float in it (nested in lists, tuples and dicts) as its
    PostgreSQL text."""
    if type(value) is float:
        if value != value:
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def dumps(payload: Any) -> str:
    """``payload`` as strict JSON (RFC 8259: no ``NaN`` or ``Infinity`` tokens): a non-finite float
    is written as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``; anything else JSON cannot hold
    as its ``str``."""
    try:
        return json.dumps(payload, default=_text, allow_nan=False)
    except ValueError:  # a non-finite float somewhere (rare): spell it out
        return json.dumps(_finite(payload), default=_text, allow_nan=False)


def _text(value: Any) -> str:
    """What JSON cannot hold, as text (a numeric without an exponent)."""
    return numeric_text(value) if isinstance(value, Decimal) else str(value)


def value_to_json(value: Any) -> Any:
    """A column value as a JSON value (dates and timestamps as ISO strings, numerics as their
    exact text)."""
    if isinstance(value, dt.date):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, Decimal):
        return numeric_text(value)
    return value


def format_value(value: Any) -> str:
    """A JSON value as a line of text shows it: ``NULL``, ``true``/``false``, else as is."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def row_to_json(row: Row) -> list[Any]:
    return [value_to_json(v) for v in row]


def _value_from_json(value: Any, scalar: ScalarType, column: str) -> Any:
    if value is None:
        return None
    try:
        if scalar is ScalarType.DATE and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if scalar is ScalarType.TIMESTAMP and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
    except ValueError as e:
        raise RowsError(f"column {column!r}: {value!r} is not an ISO {scalar}: {e}") from None
    if scalar is ScalarType.NUMERIC and type(value) in (str, int, float):
        try:
            return parse_numeric(value if type(value) is str else repr(value))
        except EvaluationError as e:
            raise RowsError(f"column {column!r}: {value!r} is not a numeric: {e}") from None
    if scalar is ScalarType.FLOAT64:
        if type(value) is int:
            return float(value)
        if isinstance(value, str) and value in NON_FINITE:
            return NON_FINITE[value]
    return value


def rows_from_json(data: Any, schema: Schema) -> list[tuple[Row, int]]:
    """``[[v, ...], ...]`` (each row inserted once) or ``[[[v, ...], diff], ...]`` as ``(row, diff)``.

    A pair is recognised by its first element being a list; the two forms may be mixed.
    Raises :class:`RowsError` naming the first bad row.
    """
    if not isinstance(data, list):
        raise RowsError('rows must be a JSON list of rows, e.g. [["ann", 20], ["bob", 5]]')
    out: list[tuple[Row, int]] = []
    for i, item in enumerate(data):
        if not isinstance(item, list):
            raise RowsError(f"row {i}: expected a list of values, got {item!r}")
        if item and isinstance(item[0], list):
            if len(item) != 2 or type(item[1]) is not int or item[1] == 0:
                raise RowsError(f"row {i}: a [row, diff] pair needs a non-zero integer diff")
            values, diff = item[0], item[1]
        else:
            values, diff = item, 1
        if len(values) != schema.arity:
            raise RowsError(
                f"row {i}: {len(values)} values for {schema.arity} columns ({', '.join(schema.names)})"
            )
        row = tuple(
            _value_from_json(v, c.type.scalar, c.name)
            for v, c in zip(values, schema.columns, strict=True)
        )
        try:
            check_row(row, schema, f"row {i}")
        except (ArityMismatch, TypeMismatch) as e:
            raise RowsError(str(e)) from None
        out.append((row, diff))
    return out


def parse_rows(text: str, schema: Schema) -> list[tuple[Row, int]]:
    """Rows from JSON text (see :func:`rows_from_json`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RowsError(f"rows are not valid JSON: {e}") from None
    return rows_from_json(data, schema)


def keys_from_json(values: Sequence[Any], schema: Schema, key: Iterable[int]) -> Row:
    """A peek key given as JSON values, converted by the key columns' types."""
    cols = list(key)
    if len(values) != len(cols):
        raise RowsError(f"the key has {len(cols)} column(s), got {len(values)} value(s)")
    return tuple(
        _value_from_json(v, schema.column(c).type.scalar, schema.column(c).name)
        for v, c in zip(values, cols, strict=True)
    )
