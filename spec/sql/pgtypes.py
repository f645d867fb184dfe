"""PostgreSQL's types for tidegate's values: one table, read one way by everything SQL.

Each :class:`PgType` says how PostgreSQL knows a type: its OID, its ``typname``,
the name ``format_type`` prints, its length, its array type. :data:`TYPES` is
the one table: the wire protocol takes OIDs and formats from it, the system
catalog (``pg_type``, ``mz_columns``, ``information_schema.columns``) is
generated from it, and :func:`for_scalar` maps each of tidegate's scalar types
(:class:`~tidegate.spec.plan.ScalarType`) to its PostgreSQL type. Types without
a scalar of their own (``oid``, ``varchar``, ``regclass``, ...) are those clients
send and the catalog shows: their values read as the scalar type that holds
them (``oid`` as ``int64``, ``varchar`` as ``string``).

Values travel in two formats (PostgreSQL's ``typoutput``/``typinput`` and
``typsend``/``typreceive``): :func:`text_out` / :func:`text_in` and
:func:`binary_out` / :func:`binary_in`. Text output is PostgreSQL's with its
defaults (``DateStyle=ISO``, ``extra_float_digits=1``): ``t``/``f``, the
shortest float that reads back the same, ``2024-01-02 03:04:05.5``. Text input
reads what a SQL cast reads (:func:`~tidegate.spec.plan.scalar_eval.cast_value`),
so a parameter and a literal agree. Bad input is an
:class:`~tidegate.spec.errors.InvalidTextRepresentation` (SQLSTATE 22P02, or
22P03 for binary data), never another exception.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..errors import EvaluationError, InvalidTextRepresentation, NumericOverflow, PlanError
from ..plan import ScalarType
from ..plan.numeric import numeric_text, parse_numeric
from ..plan.numeric import reduce as reduce_numeric
from ..plan.scalar_eval import (
    canonical_float,
    cast_value,
    float32_text,
    float_text,
    timestamp_text,
)

__all__ = [
    "BOOL",
    "DATE",
    "FLOAT8",
    "INT4",
    "INT8",
    "NUMERIC",
    "OID",
    "TEXT",
    "TIMESTAMP",
    "TYPES",
    "UNKNOWN",
    "PgType",
    "binary_in",
    "binary_out",
    "by_name",
    "by_oid",
    "for_scalar",
    "text_in",
    "text_out",
]


@dataclass(frozen=True, slots=True)
class PgType:
    """A PostgreSQL type: ``oid``, ``name`` (``typname``), ``sql_name`` (what
    ``format_type`` prints), ``length`` (``typlen``, -1 for variable), ``category``
    (``typcategory``), ``array_oid`` (its array type's OID, 0 if none), ``element``
    (an array type's element OID, else 0) and ``scalar``: the tidegate scalar type its
    values read as (``None`` for types tidegate has no values of: arrays, ``unknown``)."""

    oid: int
    name: str
    sql_name: str
    length: int
    category: str
    array_oid: int
    scalar: ScalarType | None
    element: int = 0


S = ScalarType
BOOL = PgType(16, "bool", "boolean", 1, "B", 1000, S.BOOL)
INT8 = PgType(20, "int8", "bigint", 8, "N", 1016, S.INT64)
INT2 = PgType(21, "int2", "smallint", 2, "N", 1005, S.INT16)
INT4 = PgType(23, "int4", "integer", 4, "N", 1007, S.INT32)
TEXT = PgType(25, "text", "text", -1, "S", 1009, S.STRING)
OID = PgType(26, "oid", "oid", 4, "N", 1028, S.INT64)
FLOAT4 = PgType(700, "float4", "real", 4, "N", 1021, S.FLOAT32)
FLOAT8 = PgType(701, "float8", "double precision", 8, "N", 1022, S.FLOAT64)
UNKNOWN = PgType(705, "unknown", "unknown", -2, "X", 0, None)
BPCHAR = PgType(1042, "bpchar", "character", -1, "S", 1014, S.STRING)
VARCHAR = PgType(1043, "varchar", "character varying", -1, "S", 1015, S.STRING)
DATE = PgType(1082, "date", "date", 4, "D", 1182, S.DATE)
TIMESTAMP = PgType(1114, "timestamp", "timestamp without time zone", 8, "D", 1115, S.TIMESTAMP)
TIMESTAMPTZ = PgType(1184, "timestamptz", "timestamp with time zone", 8, "D", 1185, S.TIMESTAMP)
NUMERIC = PgType(1700, "numeric", "numeric", -1, "N", 1231, S.NUMERIC)
NAME = PgType(19, "name", "name", 64, "S", 1003, S.STRING)
CHAR = PgType(18, "char", '"char"', 1, "S", 1002, S.STRING)
REGCLASS = PgType(2205, "regclass", "regclass", 4, "N", 2210, S.INT64)
REGTYPE = PgType(2206, "regtype", "regtype", 4, "N", 2211, S.INT64)
REGPROC = PgType(24, "regproc", "regproc", 4, "N", 1008, S.INT64)
JSON = PgType(114, "json", "json", -1, "U", 199, S.STRING)
JSONB = PgType(3802, "jsonb", "jsonb", -1, "U", 3807, S.STRING)
UUID = PgType(2950, "uuid", "uuid", 16, "U", 2951, S.STRING)
INTERVAL = PgType(1186, "interval", "interval", 16, "T", 1187, S.STRING)
BYTEA = PgType(17, "bytea", "bytea", -1, "U", 1001, S.STRING)
MZ_TIMESTAMP = PgType(16552, "mz_timestamp", "mz_timestamp", 8, "U", 16553, S.INT64)

_SCALARS = (BOOL, INT8, INT2, INT4, TEXT, OID, FLOAT4, FLOAT8, BPCHAR, VARCHAR, DATE, TIMESTAMP)
_OTHERS = (TIMESTAMPTZ, NUMERIC, NAME, CHAR, REGCLASS, REGTYPE, REGPROC, JSON, JSONB, UUID)
_MORE = (INTERVAL, BYTEA, MZ_TIMESTAMP)


def _arrays(types: tuple[PgType, ...]) -> tuple[PgType, ...]:
    return tuple(
        PgType(t.array_oid, "_" + t.name, t.sql_name + "[]", -1, "A", 0, None, t.oid)
        for t in types
        if t.array_oid
    )


TYPES: tuple[PgType, ...] = (
    *_SCALARS,
    *_OTHERS,
    *_MORE,
    UNKNOWN,
    *_arrays(_SCALARS + _OTHERS + _MORE),
)
"""Every type tidegate shows or takes, by OID: its scalar types, the types clients send
(``int2``, ``int4``, ``numeric``, ``varchar``, ...), the catalog's (``oid``, ``name``,
``char``, ``regclass``) and their arrays."""

_BY_OID = {t.oid: t for t in TYPES}
_BY_NAME = {t.name: t for t in TYPES} | {t.sql_name: t for t in TYPES}
_FOR_SCALAR = {
    S.INT64: INT8,
    S.FLOAT64: FLOAT8,
    S.STRING: TEXT,
    S.BOOL: BOOL,
    S.DATE: DATE,
    S.TIMESTAMP: TIMESTAMP,
    S.NUMERIC: NUMERIC,
    S.INT16: INT2,
    S.INT32: INT4,
    S.FLOAT32: FLOAT4,
}


def for_scalar(scalar: ScalarType | None) -> PgType:
    """The PostgreSQL type of a tidegate scalar type (``text`` for an untyped NULL)."""
    return TEXT if scalar is None else _FOR_SCALAR[scalar]


def by_oid(oid: int) -> PgType | None:
    """The type with this OID, or None."""
    return _BY_OID.get(oid)


def by_name(name: str) -> PgType | None:
    """The type called ``name`` (``int8`` or ``bigint``), or None."""
    return _BY_NAME.get(name.lower())


# -- text -----------------------------------------------------------------------------------


# PostgreSQL's text of a float8 (``extra_float_digits=1``) and of a timestamp: the
# evaluator's, which casts to text write too
_float_text = float_text
_timestamp_text = timestamp_text


def text_out(value: Any, pgtype: PgType | None = None) -> str:
    """A non-NULL value in PostgreSQL's text format (its Python type says which, and
    ``pgtype`` whether a float is a ``real``, printed in single precision)."""
    t = type(value)
    if t is str:
        return value  # type: ignore[no-any-return]
    if t is bool:
        return "t" if value else "f"
    if t is int:
        return str(value)
    if t is float:
        return float32_text(value) if pgtype is FLOAT4 else _float_text(value)
    if t is _dt.datetime:
        return _timestamp_text(value)
    if t is _dt.date:
        return value.isoformat()  # type: ignore[no-any-return]
    if t is Decimal:
        return numeric_text(value)
    if t is list or t is tuple:
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    return str(value)


def _array_item(v: Any) -> str:
    if v is None:
        return "NULL"
    text = text_out(v)
    if text == "" or any(c in text for c in ' ,{}"\\') or text.upper() == "NULL":
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def text_in(text: str, pgtype: PgType) -> Any:
    """``text`` read as a value of ``pgtype`` [InvalidTextRepresentation]."""
    scalar = pgtype.scalar
    if scalar is None:  # unknown: the statement's context decides
        return text
    if pgtype.oid in (REGCLASS.oid, REGTYPE.oid, REGPROC.oid):  # a name, or an OID
        return int(text) if text.strip().isdigit() else text
    try:
        value = _numeric_text(text) if pgtype is NUMERIC else cast_value(text, scalar)
    except NumericOverflow as e:
        raise InvalidTextRepresentation(
            f'value "{text}" is out of range for type {pgtype.sql_name}', sqlstate="22003"
        ) from e
    except (PlanError, EvaluationError, ValueError) as e:
        raise InvalidTextRepresentation(
            f'invalid input syntax for type {pgtype.sql_name}: "{text}"'
        ) from e
    return _checked(value, pgtype)


def _numeric_text(text: str) -> Any:
    return parse_numeric(text)  # an EvaluationError: text_in words it


_RANGES = {INT2.oid: 2**15, INT4.oid: 2**31, OID.oid: 2**32}


def _checked(value: Any, pgtype: PgType) -> Any:
    bound = _RANGES.get(pgtype.oid)
    if bound is not None:
        low = 0 if pgtype is OID else -bound
        if not low <= value < bound:
            raise InvalidTextRepresentation(
                f'value "{value}" is out of range for type {pgtype.sql_name}', sqlstate="22003"
            )
    return value


# -- binary ---------------------------------------------------------------------------------

_EPOCH_DATE = _dt.date(2000, 1, 1)
_EPOCH_TS = _dt.datetime(2000, 1, 1)
_EPOCH_ORDINAL = _EPOCH_DATE.toordinal()
_Q = struct.Struct(">q")
_D = struct.Struct(">d")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_F = struct.Struct(">f")
_UI = struct.Struct(">I")
_US = struct.Struct(">H")
_NUMERIC_HEAD = struct.Struct(">hhHH")
_NUMERIC_POS, _NUMERIC_NEG, _NUMERIC_NAN = 0x0000, 0x4000, 0xC000
_NUMERIC_PINF, _NUMERIC_NINF = 0xD000, 0xF000  # PostgreSQL 14's numeric infinities
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def binary_out(value: Any, pgtype: PgType) -> bytes:
    """A non-NULL value in ``pgtype``'s binary format (PostgreSQL's ``typsend``)."""
    oid = pgtype.oid
    if oid == INT8.oid or oid == MZ_TIMESTAMP.oid:
        return _Q.pack(value)
    if oid == FLOAT8.oid:
        return _D.pack(value)
    if oid in (TEXT.oid, VARCHAR.oid, BPCHAR.oid, NAME.oid, CHAR.oid, JSON.oid, UNKNOWN.oid):
        return str(value).encode()
    if oid == BOOL.oid:
        return b"\x01" if value else b"\x00"
    if oid == DATE.oid:
        return _I.pack(value.toordinal() - _EPOCH_ORDINAL)
    if oid in (TIMESTAMP.oid, TIMESTAMPTZ.oid):
        delta = value - _EPOCH_TS
        return _Q.pack((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    if oid == INT4.oid:
        return _I.pack(value)
    if oid == INT2.oid:
        return _H.pack(value)
    if oid in (OID.oid, REGCLASS.oid, REGTYPE.oid, REGPROC.oid):
        return _UI.pack(value)
    if oid == FLOAT4.oid:
        return _F.pack(value)
    if oid == NUMERIC.oid:
        return _numeric_out(value)
    if oid == JSONB.oid:
        return b"\x01" + str(value).encode()
    if pgtype.element:
        element = _BY_OID[pgtype.element]
        return _array_out(value, element)
    raise InvalidTextRepresentation(
        f"type {pgtype.sql_name} has no binary format here", sqlstate="0A000"
    )


def _array_out(values: Any, element: PgType) -> bytes:
    items = list(values)
    has_null = any(v is None for v in items)
    parts = [_I.pack(1), _I.pack(1 if has_null else 0), _UI.pack(element.oid)]
    parts += [_I.pack(len(items)), _I.pack(1)]
    for v in items:
        if v is None:
            parts.append(_I.pack(-1))
        else:
            data = binary_out(v, element)
            parts += [_I.pack(len(data)), data]
    return b"".join(parts)


def _numeric_out(value: Any) -> bytes:
    """``numeric``'s binary format: base-10000 digits, a weight, a sign and a scale."""
    if isinstance(value, float):
        if math.isnan(value):
            return _NUMERIC_HEAD.pack(0, 0, _NUMERIC_NAN, 0)
        if math.isinf(value):
            return _NUMERIC_HEAD.pack(0, 0, _NUMERIC_PINF if value > 0 else _NUMERIC_NINF, 0)
        # the shortest decimal that reads back as the float, without an exponent
        # (``.20f`` would print the binary fraction's digits: 7.5e-05 as 0.0000749999...)
        text = format(Decimal(repr(value)), "f")
    elif isinstance(value, Decimal):
        text = format(value, "f")
    else:
        text = str(int(value))
    sign = _NUMERIC_NEG if text.startswith("-") else _NUMERIC_POS
    text = text.lstrip("-")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    scale = len(frac)
    whole = whole.lstrip("0")
    pad_whole = "0" * (-len(whole) % 4) + whole
    pad_frac = frac + "0" * (-len(frac) % 4)
    digits = [int(pad_whole[i : i + 4]) for i in range(0, len(pad_whole), 4)]
    weight = len(digits) - 1
    digits += [int(pad_frac[i : i + 4]) for i in range(0, len(pad_frac), 4)]
    while digits and digits[0] == 0:  # leading zero groups of a fraction
        digits.pop(0)
        weight -= 1
    while digits and digits[-1] == 0:
        digits.pop()
    if not digits:
        weight, sign = 0, _NUMERIC_POS
    head = _NUMERIC_HEAD.pack(len(digits), weight, sign, scale)
    return head + b"".join(_US.pack(d) for d in digits)


def _numeric_in(data: bytes) -> Any:
    ndigits, weight, sign, _scale = _NUMERIC_HEAD.unpack_from(data)
    if len(data) != 8 + 2 * ndigits:
        raise ValueError("numeric length")
    if sign == _NUMERIC_NAN:
        return canonical_float(math.nan)
    if sign in (_NUMERIC_PINF, _NUMERIC_NINF):
        return math.inf if sign == _NUMERIC_PINF else -math.inf
    if sign not in (_NUMERIC_POS, _NUMERIC_NEG):
        raise ValueError("numeric sign")
    digits = [_US.unpack_from(data, 8 + 2 * i)[0] for i in range(ndigits)]
    if any(d > 9999 for d in digits):
        raise ValueError("numeric digit")
    # exact: the digits as one integer, then scaled by 10000^(weight - ndigits + 1)
    value = 0
    for d in digits:
        value = value * 10000 + d
    shift = weight - ndigits + 1
    result = Decimal(value).scaleb(4 * shift, _EXACT)
    return reduce_numeric(result.copy_negate() if sign == _NUMERIC_NEG else result)


def binary_in(data: bytes, pgtype: PgType) -> Any:
    """``data`` in ``pgtype``'s binary format read as a value [InvalidTextRepresentation]."""
    oid = pgtype.oid
    try:
        if oid in (INT8.oid, MZ_TIMESTAMP.oid):
            return _Q.unpack(data)[0]
        if oid == FLOAT8.oid:
            return _finite(_D.unpack(data)[0])
        if oid in (TEXT.oid, VARCHAR.oid, BPCHAR.oid, NAME.oid, CHAR.oid, JSON.oid, UNKNOWN.oid):
            return data.decode()
        if oid == JSONB.oid:
            if data[:1] != b"\x01":
                raise ValueError("jsonb version")
            return data[1:].decode()
        if oid == BOOL.oid:
            if data not in (b"\x00", b"\x01"):
                raise ValueError("bool")
            return data == b"\x01"
        if oid == INT4.oid:
            return _I.unpack(data)[0]
        if oid == INT2.oid:
            return _H.unpack(data)[0]
        if oid in (OID.oid, REGCLASS.oid, REGTYPE.oid, REGPROC.oid):
            return _UI.unpack(data)[0]
        if oid == FLOAT4.oid:
            return _finite(float(_F.unpack(data)[0]))
        if oid == NUMERIC.oid:
            return _numeric_in(data)
        if oid == DATE.oid:
            return _dt.date.fromordinal(_I.unpack(data)[0] + _EPOCH_ORDINAL)
        if oid in (TIMESTAMP.oid, TIMESTAMPTZ.oid):
            value = _EPOCH_TS + _dt.timedelta(microseconds=_Q.unpack(data)[0])
            return value
        if pgtype.element:
            return _array_in(data, pgtype)
    except (struct.error, ValueError, OverflowError, UnicodeDecodeError) as e:
        raise InvalidTextRepresentation(
            f"incorrect binary data format for type {pgtype.sql_name}", sqlstate="22P03"
        ) from e
    raise InvalidTextRepresentation(
        f"binary parameters of type {pgtype.sql_name} are not supported", sqlstate="0A000"
    )


def _array_in(data: bytes, pgtype: PgType) -> list[Any]:
    """A one-dimensional array in the binary format (``array_send``'s layout)."""
    ndim, _has_null, element_oid = _I.unpack_from(data, 0)[0], 0, _UI.unpack_from(data, 8)[0]
    if ndim == 0:
        return []
    if ndim != 1:
        raise ValueError("only one-dimensional arrays")
    element = _BY_OID.get(element_oid)
    if element is None or element_oid != pgtype.element:
        raise ValueError("array element type")
    (count,) = _I.unpack_from(data, 12)
    pos = 20
    out: list[Any] = []
    for _ in range(count):
        (size,) = _I.unpack_from(data, pos)
        pos += 4
        if size == -1:
            out.append(None)
            continue
        if size < 0 or pos + size > len(data):
            raise ValueError("array element length")
        out.append(binary_in(data[pos : pos + size], element))
        pos += size
    if pos != len(data):
        raise ValueError("array length")
    return out


def _finite(value: float) -> float:
    """A float read from the wire: infinities are values, every NaN the one NaN object."""
    return canonical_float(value)
