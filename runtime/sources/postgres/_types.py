"""PostgreSQL column types as tidegate types, and their text form as tidegate values.

Supported (by type OID, so domains and arrays are not):

=============================================  ===========
PostgreSQL                                     tidegate
=============================================  ===========
``smallint``, ``integer``, ``bigint``          ``int64``
``real``, ``double precision``                 ``float64``
``text``, ``varchar(n)``, ``char(n)``          ``string``
``boolean``                                    ``bool``
``date``                                       ``date``
``timestamp`` (without time zone)              ``timestamp``
``numeric``, ``numeric(p, s)``                 ``numeric``
=============================================  ===========

Everything else is refused, with :class:`~tidegate.spec.errors.UnsupportedUpstreamType`.

Values are parsed from the server's text output (``DateStyle=ISO``, the
sessions' settings in :data:`SESSION_OPTIONS`), the same way for the snapshot
(``COPY ... TO STDOUT``) and the stream (pgoutput's text tuples), so a row
retracted by the stream equals the row the snapshot inserted. ``real`` values
are the ``float64`` of their shortest decimal text; ``char(n)`` keeps its
padding; NaN, ``Infinity`` and ``-Infinity`` are ``float64`` values as in
PostgreSQL and Materialize (every NaN the one object
:data:`~tidegate.spec.plan.scalar_eval.NAN`, so a retraction equals its insert). Values outside a
tidegate type (``infinity`` dates, BC dates, years past 9999, a numeric ``NaN`` or
``Infinity``) raise :class:`~tidegate.spec.errors.UpstreamValueUnrepresentable`. A numeric is
its exact value, reduced (``1.50`` is ``1.5``: tidegate's numerics keep no display scale).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Final, TypeAlias

from tidegate.spec.errors import EvaluationError
from tidegate.spec.plan.numeric import parse_numeric
from tidegate.spec.plan.scalar_eval import canonical_float, to_float32
from tidegate.spec.plan.schema import ScalarType

__all__ = [
    "PARSERS",
    "SESSION_OPTIONS",
    "SUPPORTED_TYPES",
    "TextParser",
    "Unrepresentable",
    "scalar_type",
]

SESSION_OPTIONS: Final = (
    "-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=1 "
    "-c client_encoding=UTF8 -c TimeZone=UTC"
)
"""libpq ``options`` for every session a reader opens: they fix the text form of values."""


class Unrepresentable(ValueError):
    """A text value outside its tidegate type; the reader names the column and raises its typed error."""


TextParser: TypeAlias = Callable[[str], object]

_INT2, _INT4, _INT8 = 21, 23, 20
_FLOAT4, _FLOAT8 = 700, 701
_TEXT, _VARCHAR, _BPCHAR = 25, 1043, 1042
_BOOL, _DATE, _TIMESTAMP = 16, 1082, 1114
_NUMERIC = 1700

SUPPORTED_TYPES: Final[dict[int, ScalarType]] = {
    _INT2: ScalarType.INT16,
    _INT4: ScalarType.INT32,
    _INT8: ScalarType.INT64,
    _FLOAT4: ScalarType.FLOAT32,
    _FLOAT8: ScalarType.FLOAT64,
    _TEXT: ScalarType.STRING,
    _VARCHAR: ScalarType.STRING,
    _BPCHAR: ScalarType.STRING,
    _BOOL: ScalarType.BOOL,
    _DATE: ScalarType.DATE,
    _TIMESTAMP: ScalarType.TIMESTAMP,
    _NUMERIC: ScalarType.NUMERIC,
}
"""Type OIDs the reader ingests, with their tidegate type."""


def scalar_type(type_oid: int) -> ScalarType | None:
    """The tidegate type of a PostgreSQL type OID, or ``None`` if it is not supported."""
    return SUPPORTED_TYPES.get(type_oid)


def _float(text: str) -> float:
    # PostgreSQL writes NaN, Infinity and -Infinity, which float() reads
    return canonical_float(float(text))


def _float32(text: str) -> float:
    # PostgreSQL writes a real's shortest digits (extra_float_digits 1): read as a double,
    # they round to the same single-precision value
    return to_float32(_float(text))


def _bool(text: str) -> bool:
    if text == "t":
        return True
    if text == "f":
        return False
    raise Unrepresentable(text)


def _date(text: str) -> dt.date:
    # ISO output is YYYY-MM-DD for years 1..9999; BC dates, 5-digit years and
    # +-infinity have other forms, none of which a Python date can hold.
    if len(text) != 10:
        raise Unrepresentable(text)
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise Unrepresentable(text) from None


def _timestamp(text: str) -> dt.datetime:
    if len(text) < 19 or text[4] != "-" or text.endswith(" BC"):
        raise Unrepresentable(text)
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise Unrepresentable(text) from None


def _str(text: str) -> str:
    return text


def _numeric(text: str) -> Decimal:
    try:
        return parse_numeric(text)
    except EvaluationError:  # NaN, Infinity: no value of tidegate's numeric
        raise Unrepresentable(text) from None


PARSERS: Final[dict[ScalarType, TextParser]] = {
    ScalarType.INT64: int,
    ScalarType.FLOAT64: _float,
    ScalarType.STRING: _str,
    ScalarType.BOOL: _bool,
    ScalarType.DATE: _date,
    ScalarType.TIMESTAMP: _timestamp,
    ScalarType.NUMERIC: _numeric,
    ScalarType.INT16: int,
    ScalarType.INT32: int,
    ScalarType.FLOAT32: _float32,
}
"""The parser of each tidegate type's upstream text; raises :class:`Unrepresentable`."""
