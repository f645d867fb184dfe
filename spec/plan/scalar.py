"""Scalar expressions over one row, and their types.

An expression refers to columns by position (:class:`ColumnRef`); the builder
(:mod:`.builder`) resolves names. :func:`scalar_type` type-checks an expression
against a schema and gives its result type; evaluation lives in
:mod:`.scalar_eval`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from ..errors import InvalidPlan, TypeMismatch
from .schema import ColumnType, ScalarType, Schema, value_matches

__all__ = [
    "CAST_TABLE",
    "DATE_TRUNC_UNITS",
    "EXTRACT_FIELDS",
    "SIGNATURES",
    "BinaryFunc",
    "CallBinary",
    "CallUnary",
    "CallVariadic",
    "Cast",
    "ColumnRef",
    "If",
    "Literal",
    "ScalarExpr",
    "UnaryFunc",
    "VariadicFunc",
    "scalar_type",
]

S = ScalarType


class UnaryFunc(StrEnum):
    NOT = "not"
    NEG = "neg"
    IS_NULL = "is_null"
    LOWER = "lower"
    UPPER = "upper"
    LENGTH = "length"
    ABS = "abs"
    ROUND = "round"
    TRIM = "trim"
    LTRIM = "ltrim"
    RTRIM = "rtrim"
    CEIL = "ceil"
    FLOOR = "floor"
    TRUNC = "trunc"
    """Toward zero, to an integral float64."""
    RINT = "rint"
    """To the nearest integral float64, halves to even (PostgreSQL's ``round(double)``)."""
    SIGN = "sign"
    SQRT = "sqrt"
    CBRT = "cbrt"
    LN = "ln"
    LOG10 = "log10"
    EXP = "exp"
    ASCII = "ascii"
    """The code point of the first character (0 for ``''``)."""
    CHR = "chr"
    """The character of a code point."""
    INITCAP = "initcap"
    """Each word's first letter upper-cased, the others lower-cased (words: runs of letters and
    digits)."""
    REVERSE = "reverse"
    OCTET_LENGTH = "octet_length"
    """The length of the UTF-8 encoding."""
    FLOAT32_TEXT = "float32_text"
    """A float32 as PostgreSQL's ``real`` prints it: the shortest digits that read back as the
    same single-precision value (a cast to string would print its float64 digits)."""
    FLOAT32_NUMERIC = "float32_numeric"
    """A float32 as PostgreSQL converts ``real`` to ``numeric``: its 6 significant digits
    (a cast to numeric would keep the 15 of a float64)."""
    ERROR = "error"
    """``error(message)``: never a value; evaluating it fails with the evaluation error
    ``message`` (a string; NULL if the message is). Its type is bool, so it fits a predicate:
    lowering uses it for run-time errors a plan detects rather than a function, such as a
    scalar subquery's second row (``If(count > 1, error('more than one record produced in
    subquery'), true)``)."""


class BinaryFunc(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    LIKE = "like"
    ILIKE = "ilike"
    CONCAT = "concat"
    """``a || b``: NULL if either is NULL (unlike :attr:`VariadicFunc.CONCAT`)."""
    ADD_MS = "add_ms"
    """``timestamp + interval`` with the interval an int64 count of milliseconds."""
    SUB_MS = "sub_ms"
    """``timestamp - interval`` with the interval an int64 count of milliseconds."""
    ADD_US = "add_us"
    """``timestamp + interval`` with the interval an int64 count of microseconds."""
    SUB_US = "sub_us"
    """``timestamp - interval`` with the interval an int64 count of microseconds."""
    DATE_ADD_DAYS = "date_add_days"
    """``date + integer``: a date that many days later."""
    DATE_DIFF = "date_diff"
    """``date - date``: the int64 number of days between them."""
    POWER = "power"
    LOG = "log"
    """``log(base, x)``."""
    ROUND_DIGITS = "round_digits"
    """``round(x, n)``: ``x`` rounded to ``n`` decimal digits (left of the point if negative),
    halves away from zero, on ``x``'s shortest decimal form (as PostgreSQL's ``numeric``)."""
    TRUNC_DIGITS = "trunc_digits"
    """``trunc(x, n)``: ``x`` truncated toward zero to ``n`` decimal digits."""
    LEFT = "left"
    """``left(s, n)``: the first ``n`` characters (all but the last ``-n`` if negative)."""
    RIGHT = "right"
    """``right(s, n)``: the last ``n`` characters (all but the first ``-n`` if negative)."""
    REPEAT = "repeat"
    STRPOS = "strpos"
    """``strpos(s, sub)``: the 1-based position of ``sub`` in ``s``, 0 if absent."""
    REGEX_MATCH = "regex_match"
    """``s ~ pattern`` (a Python regular expression, searched for)."""
    REGEX_IMATCH = "regex_imatch"
    """``s ~* pattern``: case-insensitive."""


class VariadicFunc(StrEnum):
    AND = "and"
    OR = "or"
    COALESCE = "coalesce"
    CONCAT = "concat"
    SUBSTRING = "substring"
    GREATEST = "greatest"
    LEAST = "least"
    NULLIF = "nullif"
    REPLACE = "replace"
    LIKE_ESCAPE = "like_escape"
    """``s LIKE pattern ESCAPE e``: arguments ``(s, pattern, e)``."""
    ILIKE_ESCAPE = "ilike_escape"
    """``s ILIKE pattern ESCAPE e``: arguments ``(s, pattern, e)``."""
    DATE_TRUNC = "date_trunc"
    """``date_trunc(unit, timestamp)``: ``unit`` a string :class:`Literal` of :data:`DATE_TRUNC_UNITS`."""
    EXTRACT = "extract"
    """``extract(field FROM x)``: arguments ``(field, x)``, ``field`` a string :class:`Literal`
    of :data:`EXTRACT_FIELDS`."""
    CONCAT_WS = "concat_ws"
    """``concat_ws(sep, s, ...)``: the non-NULL strings joined by ``sep`` (NULL if ``sep`` is)."""
    LPAD = "lpad"
    """``lpad(s, n, fill)``: ``s`` padded on the left with ``fill`` to ``n`` characters (cut to
    ``n`` if longer)."""
    RPAD = "rpad"
    TRANSLATE = "translate"
    """``translate(s, from, to)``: each character of ``from`` replaced by the one at its
    position in ``to``, or removed if ``to`` is shorter."""
    SPLIT_PART = "split_part"
    """``split_part(s, delimiter, n)``: the ``n``-th field (from the end if negative)."""
    REGEXP_REPLACE = "regexp_replace"
    """``regexp_replace(s, pattern, replacement, flags)``: flags ``g`` (every match) and ``i``
    (case-insensitive); ``\\1``..``\\9`` and ``\\&`` in the replacement name groups."""
    NUMERIC_TYPMOD = "numeric_typmod"
    """``numeric_typmod(x, precision, scale)``: the numeric ``x`` assigned to
    ``numeric(precision, scale)`` (rounded to ``scale`` digits; 22003 if too many digits remain
    before the point); ``precision`` and ``scale`` are int64 :class:`Literal` s."""


@dataclass(frozen=True, slots=True)
class ColumnRef:
    """The value of column ``index`` of the input row."""

    index: int


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant of type ``type``; ``value=None`` is a typed NULL."""

    value: Any
    type: ScalarType


@dataclass(frozen=True, slots=True)
class CallUnary:
    func: UnaryFunc
    expr: ScalarExpr


@dataclass(frozen=True, slots=True)
class CallBinary:
    func: BinaryFunc
    left: ScalarExpr
    right: ScalarExpr


@dataclass(frozen=True, slots=True)
class CallVariadic:
    func: VariadicFunc
    exprs: tuple[ScalarExpr, ...]


@dataclass(frozen=True, slots=True)
class If:
    """``CASE WHEN cond THEN then ELSE els END`` (a NULL condition takes ``els``)."""

    cond: ScalarExpr
    then: ScalarExpr
    els: ScalarExpr


@dataclass(frozen=True, slots=True)
class Cast:
    """Convert to ``to``; see :data:`CAST_TABLE` for the allowed conversions."""

    expr: ScalarExpr
    to: ScalarType


ScalarExpr: TypeAlias = ColumnRef | Literal | CallUnary | CallBinary | CallVariadic | If | Cast

_F, _I, _STR = ScalarType.FLOAT64, ScalarType.INT64, ScalarType.STRING
SIGNATURES: dict[
    UnaryFunc | BinaryFunc | VariadicFunc, tuple[tuple[ScalarType, ...], ScalarType]
] = {
    **{
        f: ((_F,), _F)
        for f in (
            UnaryFunc.RINT,
            UnaryFunc.SQRT,
            UnaryFunc.CBRT,
            UnaryFunc.LN,
            UnaryFunc.LOG10,
            UnaryFunc.EXP,
        )
    },
    UnaryFunc.ASCII: ((_STR,), _I),
    UnaryFunc.CHR: ((_I,), _STR),
    UnaryFunc.INITCAP: ((_STR,), _STR),
    UnaryFunc.REVERSE: ((_STR,), _STR),
    UnaryFunc.OCTET_LENGTH: ((_STR,), _I),
    UnaryFunc.ERROR: ((_STR,), ScalarType.BOOL),
    UnaryFunc.FLOAT32_TEXT: ((ScalarType.FLOAT32,), _STR),
    UnaryFunc.FLOAT32_NUMERIC: ((ScalarType.FLOAT32,), ScalarType.NUMERIC),
    BinaryFunc.DATE_ADD_DAYS: ((ScalarType.DATE, _I), ScalarType.DATE),
    BinaryFunc.DATE_DIFF: ((ScalarType.DATE, ScalarType.DATE), _I),
    BinaryFunc.POWER: ((_F, _F), _F),
    BinaryFunc.LOG: ((_F, _F), _F),
    BinaryFunc.LEFT: ((_STR, _I), _STR),
    BinaryFunc.RIGHT: ((_STR, _I), _STR),
    BinaryFunc.REPEAT: ((_STR, _I), _STR),
    BinaryFunc.STRPOS: ((_STR, _STR), _I),
    BinaryFunc.REGEX_MATCH: ((_STR, _STR), ScalarType.BOOL),
    BinaryFunc.REGEX_IMATCH: ((_STR, _STR), ScalarType.BOOL),
    VariadicFunc.LPAD: ((_STR, _I, _STR), _STR),
    VariadicFunc.RPAD: ((_STR, _I, _STR), _STR),
    VariadicFunc.TRANSLATE: ((_STR, _STR, _STR), _STR),
    VariadicFunc.SPLIT_PART: ((_STR, _STR, _I), _STR),
    VariadicFunc.REGEXP_REPLACE: ((_STR, _STR, _STR, _STR), _STR),
}
"""The fixed signatures of the functions whose arguments and result have one type each:
argument types and result type (NULL if any argument is NULL)."""

_NUMBER_TYPES = tuple(t for t in S if t.is_numeric)
CAST_TABLE: frozenset[tuple[ScalarType, ScalarType]] = frozenset(
    {
        *((a, b) for a in _NUMBER_TYPES for b in _NUMBER_TYPES if a is not b),
        (S.INT64, S.BOOL),
        (S.BOOL, S.INT64),
        (S.INT32, S.BOOL),
        (S.BOOL, S.INT32),
        (S.DATE, S.TIMESTAMP),
        (S.TIMESTAMP, S.DATE),
        *((t, S.STRING) for t in S),
        *((S.STRING, t) for t in S),
    }
    - {(S.FLOAT32, S.STRING), (S.FLOAT32, S.NUMERIC)}
)
"""The (from, to) pairs a :class:`Cast` supports, besides the identity. A cast to a narrow
number type checks its range (PostgreSQL's 22003 "integer out of range", "smallint out of
range", "value out of range: overflow"/"underflow"); a float32 becomes text or numeric through
:attr:`UnaryFunc.FLOAT32_TEXT` and :attr:`UnaryFunc.FLOAT32_NUMERIC`, which know its
precision."""

DATE_TRUNC_UNITS: tuple[str, ...] = (
    "second",
    "minute",
    "hour",
    "day",
    "week",
    "month",
    "quarter",
    "year",
)
"""The units of ``date_trunc`` (``week`` starts on Monday, as ISO 8601, PostgreSQL and DuckDB say)."""

EXTRACT_FIELDS: dict[str, ScalarType] = {
    "year": ScalarType.INT64,
    "quarter": ScalarType.INT64,
    "month": ScalarType.INT64,
    "day": ScalarType.INT64,
    "hour": ScalarType.INT64,
    "minute": ScalarType.INT64,
    "second": ScalarType.INT64,
    "dow": ScalarType.INT64,
    "doy": ScalarType.INT64,
    "epoch": ScalarType.FLOAT64,
}
"""The fields of ``extract`` and their result types. ``second`` is the whole seconds
(0..59, fraction dropped), ``dow`` the day of the week (0 = Sunday .. 6), ``doy`` the day
of the year (1..366), ``epoch`` the seconds since 1970-01-01 00:00:00 as float64 (with the
fraction). On a date, ``hour``, ``minute`` and ``second`` are refused."""

_TIME_OF_DAY = frozenset({"hour", "minute", "second"})

_ARITH = {BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD}
_COMPARE = {
    BinaryFunc.EQ,
    BinaryFunc.NE,
    BinaryFunc.LT,
    BinaryFunc.LE,
    BinaryFunc.GT,
    BinaryFunc.GE,
}


def _arith_type(a: ScalarType, b: ScalarType) -> ScalarType:
    """The type of arithmetic on two wide number types: int64 of two int64s, float64 if either
    is float64, else numeric (PostgreSQL's implicit casts: int8 -> numeric -> float8)."""
    if a is S.FLOAT64 or b is S.FLOAT64:
        return S.FLOAT64
    if a is S.NUMERIC or b is S.NUMERIC:
        return S.NUMERIC
    return S.INT64


def _wide_number(t: ScalarType) -> bool:
    return t.is_numeric and not t.is_narrow


def _comparable(a: ScalarType, b: ScalarType) -> bool:
    return a == b or (a.is_numeric and b.is_numeric)


def scalar_type(expr: ScalarExpr, schema: Schema) -> ColumnType:
    """The type of ``expr`` over rows of ``schema``; raise a typed error if it is ill-typed."""
    if isinstance(expr, ColumnRef):
        return schema.column(expr.index).type
    if isinstance(expr, Literal):
        if not isinstance(expr.type, ScalarType):
            raise TypeMismatch(f"literal type {expr.type!r} is not a ScalarType")
        if expr.value is not None and not value_matches(expr.value, expr.type):
            raise TypeMismatch(f"literal {expr.value!r} is not a {expr.type}")
        return ColumnType(expr.type, expr.value is None)
    if isinstance(expr, CallUnary):
        t = scalar_type(expr.expr, schema)
        f = expr.func
        if f is UnaryFunc.IS_NULL:
            return ColumnType(S.BOOL, False)
        if f in SIGNATURES:
            return _signature(f, [t])
        want = {
            UnaryFunc.NOT: (S.BOOL,),
            UnaryFunc.NEG: (S.INT64, S.FLOAT64, S.NUMERIC),
            UnaryFunc.ABS: (S.INT64, S.FLOAT64, S.NUMERIC),
            UnaryFunc.ROUND: (S.INT64, S.FLOAT64, S.NUMERIC),
            UnaryFunc.CEIL: (S.FLOAT64, S.NUMERIC),
            UnaryFunc.FLOOR: (S.FLOAT64, S.NUMERIC),
            UnaryFunc.TRUNC: (S.FLOAT64, S.NUMERIC),
            UnaryFunc.SIGN: (S.FLOAT64, S.NUMERIC),
            UnaryFunc.LOWER: (S.STRING,),
            UnaryFunc.UPPER: (S.STRING,),
            UnaryFunc.LENGTH: (S.STRING,),
            UnaryFunc.TRIM: (S.STRING,),
            UnaryFunc.LTRIM: (S.STRING,),
            UnaryFunc.RTRIM: (S.STRING,),
        }[f]
        if t.scalar not in want:
            raise TypeMismatch(
                f"{f.value}() expects {'/'.join(w.value for w in want)}, got {t.scalar}"
            )
        out = S.INT64 if f is UnaryFunc.LENGTH else t.scalar
        return ColumnType(out, t.nullable)
    if isinstance(expr, CallBinary):
        lt, rt = scalar_type(expr.left, schema), scalar_type(expr.right, schema)
        nullable = lt.nullable or rt.nullable
        fn = expr.func
        if fn in SIGNATURES:
            return _signature(fn, [lt, rt])
        if fn in _ARITH:
            if not (_wide_number(lt.scalar) and _wide_number(rt.scalar)):
                raise TypeMismatch(
                    f"{fn.value} expects int64, float64 or numeric, got {lt.scalar} and "
                    f"{rt.scalar} (a narrow number is cast to its wide type first)"
                )
            return ColumnType(_arith_type(lt.scalar, rt.scalar), nullable)
        if fn in (BinaryFunc.ROUND_DIGITS, BinaryFunc.TRUNC_DIGITS):
            if lt.scalar not in (S.FLOAT64, S.NUMERIC) or rt.scalar is not S.INT64:
                raise TypeMismatch(
                    f"{fn.value}() expects (float64 or numeric, int64), "
                    f"got ({lt.scalar}, {rt.scalar})"
                )
            return ColumnType(lt.scalar, nullable)
        if fn in _COMPARE:
            if not _comparable(lt.scalar, rt.scalar):
                raise TypeMismatch(f"cannot compare {lt.scalar} with {rt.scalar} ({fn.value})")
            return ColumnType(S.BOOL, nullable)
        if fn in (BinaryFunc.ADD_MS, BinaryFunc.SUB_MS, BinaryFunc.ADD_US, BinaryFunc.SUB_US):
            if lt.scalar not in (S.TIMESTAMP, S.DATE) or rt.scalar is not S.INT64:
                raise TypeMismatch(
                    f"{fn.value} expects (timestamp or date, int64), "
                    f"got {lt.scalar} and {rt.scalar}"
                )
            return ColumnType(S.TIMESTAMP, nullable)
        if lt.scalar is not S.STRING or rt.scalar is not S.STRING:
            raise TypeMismatch(f"{fn.value} expects strings, got {lt.scalar} and {rt.scalar}")
        return ColumnType(S.STRING if fn is BinaryFunc.CONCAT else S.BOOL, nullable)
    if isinstance(expr, CallVariadic):
        ts = [scalar_type(e, schema) for e in expr.exprs]
        vf = expr.func
        if not ts:
            raise InvalidPlan(f"{vf.value}() needs at least one argument")
        if vf in SIGNATURES:
            return _signature(vf, ts)
        if vf is VariadicFunc.CONCAT_WS:
            for t in ts:
                if t.scalar is not S.STRING:
                    raise TypeMismatch(f"concat_ws() expects string arguments, got {t.scalar}")
            return ColumnType(S.STRING, ts[0].nullable)
        if vf in (VariadicFunc.AND, VariadicFunc.OR, VariadicFunc.CONCAT):
            wanted = S.STRING if vf is VariadicFunc.CONCAT else S.BOOL
            for t in ts:
                if t.scalar is not wanted:
                    raise TypeMismatch(f"{vf.value}() expects {wanted} arguments, got {t.scalar}")
            if vf is VariadicFunc.CONCAT:
                return ColumnType(S.STRING, False)
            return ColumnType(S.BOOL, any(t.nullable for t in ts))
        if vf is VariadicFunc.COALESCE:
            for t in ts[1:]:
                if t.scalar is not ts[0].scalar:
                    raise TypeMismatch(
                        f"coalesce() arguments differ: {ts[0].scalar} and {t.scalar}"
                    )
            return ColumnType(ts[0].scalar, all(t.nullable for t in ts))
        if vf in (VariadicFunc.GREATEST, VariadicFunc.LEAST):
            # one type for all (cast an int64 to mix it with float64s): the result's type is
            # then known without a schema, as the evaluator needs
            first = ts[0].scalar
            if any(t.scalar is not first for t in ts):
                raise TypeMismatch(
                    f"{vf.value}() arguments differ: {', '.join(t.scalar.value for t in ts)}"
                )
            return ColumnType(first, all(t.nullable for t in ts))
        if vf is not VariadicFunc.SUBSTRING:
            return _variadic_fixed(expr, ts)
        if len(ts) not in (2, 3):
            raise InvalidPlan(f"substring() takes 2 or 3 arguments, got {len(ts)}")
        if ts[0].scalar is not S.STRING or any(t.scalar is not S.INT64 for t in ts[1:]):
            raise TypeMismatch("substring() expects (string, int64[, int64])")
        return ColumnType(S.STRING, any(t.nullable for t in ts))
    if isinstance(expr, If):
        ct = scalar_type(expr.cond, schema)
        if ct.scalar is not S.BOOL:
            raise TypeMismatch(f"if condition must be bool, got {ct.scalar}")
        tt, et = scalar_type(expr.then, schema), scalar_type(expr.els, schema)
        if tt.scalar is not et.scalar:
            raise TypeMismatch(f"if branches differ: {tt.scalar} and {et.scalar}")
        return ColumnType(tt.scalar, tt.nullable or et.nullable)
    if isinstance(expr, Cast):
        t = scalar_type(expr.expr, schema)
        if not isinstance(expr.to, ScalarType):
            raise TypeMismatch(f"cast target {expr.to!r} is not a ScalarType")
        if t.scalar is not expr.to and (t.scalar, expr.to) not in CAST_TABLE:
            raise TypeMismatch(f"cannot cast {t.scalar} to {expr.to}")
        return ColumnType(expr.to, t.nullable)
    raise InvalidPlan(f"not a scalar expression: {expr!r}")


def _signature(f: UnaryFunc | BinaryFunc | VariadicFunc, ts: list[ColumnType]) -> ColumnType:
    args, out = SIGNATURES[f]
    if len(ts) != len(args):
        raise InvalidPlan(f"{f.value}() takes {len(args)} arguments, got {len(ts)}")
    if any(t.scalar is not a for t, a in zip(ts, args, strict=True)):
        want = ", ".join(a.value for a in args)
        got = ", ".join(t.scalar.value for t in ts)
        raise TypeMismatch(f"{f.value}() expects ({want}), got ({got})")
    return ColumnType(out, any(t.nullable for t in ts))


def _literal_word(e: ScalarExpr, what: str, allowed: Collection[str]) -> str:
    if not (isinstance(e, Literal) and e.type is S.STRING and isinstance(e.value, str)):
        raise InvalidPlan(f"{what} must be a non-NULL string literal, got {e!r}")
    word = e.value.lower()
    if word not in allowed:
        raise InvalidPlan(f"{what} {e.value!r} is not one of {', '.join(allowed)}")
    return word


def _variadic_fixed(expr: CallVariadic, ts: list[ColumnType]) -> ColumnType:
    """The functions of a fixed number of arguments: nullif, replace, like/ilike with an
    escape, date_trunc and extract."""
    vf = expr.func
    arity = {
        VariadicFunc.NULLIF: 2,
        VariadicFunc.REPLACE: 3,
        VariadicFunc.LIKE_ESCAPE: 3,
        VariadicFunc.ILIKE_ESCAPE: 3,
        VariadicFunc.DATE_TRUNC: 2,
        VariadicFunc.EXTRACT: 2,
        VariadicFunc.NUMERIC_TYPMOD: 3,
    }[vf]
    if len(ts) != arity:
        raise InvalidPlan(f"{vf.value}() takes {arity} arguments, got {len(ts)}")
    if vf is VariadicFunc.NULLIF:
        a, b = ts
        if not _comparable(a.scalar, b.scalar):
            raise TypeMismatch(f"nullif() cannot compare {a.scalar} with {b.scalar}")
        return ColumnType(a.scalar, True)
    if vf is VariadicFunc.NUMERIC_TYPMOD:
        if ts[0].scalar is not S.NUMERIC:
            raise TypeMismatch(f"numeric_typmod() expects a numeric, got {ts[0].scalar}")
        p, sc = expr.exprs[1:]
        if not (
            isinstance(p, Literal)
            and isinstance(sc, Literal)
            and type(p.value) is int
            and type(sc.value) is int
            and 1 <= p.value <= 1000
            and 0 <= sc.value <= p.value
        ):
            raise InvalidPlan(
                f"numeric_typmod() needs int64 literals 1 <= precision <= 1000 and "
                f"0 <= scale <= precision, got {p!r}, {sc!r}"
            )
        return ColumnType(S.NUMERIC, ts[0].nullable)
    if vf is VariadicFunc.DATE_TRUNC:
        _literal_word(expr.exprs[0], "date_trunc() unit", DATE_TRUNC_UNITS)
        if ts[1].scalar is not S.TIMESTAMP:
            raise TypeMismatch(f"date_trunc() expects a timestamp, got {ts[1].scalar}")
        return ColumnType(S.TIMESTAMP, ts[1].nullable)
    if vf is VariadicFunc.EXTRACT:
        field = _literal_word(expr.exprs[0], "extract() field", EXTRACT_FIELDS)
        src = ts[1].scalar
        if src not in (S.TIMESTAMP, S.DATE):
            raise TypeMismatch(f"extract() expects a timestamp or date, got {src}")
        if src is S.DATE and field in _TIME_OF_DAY:
            raise TypeMismatch(f"extract({field}) of a date: cast it to timestamp first")
        return ColumnType(EXTRACT_FIELDS[field], ts[1].nullable)
    for t in ts:
        if t.scalar is not S.STRING:
            raise TypeMismatch(f"{vf.value}() expects string arguments, got {t.scalar}")
    out = S.STRING if vf is VariadicFunc.REPLACE else S.BOOL
    return ColumnType(out, any(t.nullable for t in ts))
