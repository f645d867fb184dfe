"""Evaluating scalar expressions: SQL NULL semantics, typed evaluation errors.

``compile_scalar(expr)`` turns an expression into a function of a row, so an
executor pays the dispatch once per expression, not once per row. Errors
(division by zero, overflow, bad casts) raise subclasses of
:class:`EvaluationError`; operators turn them into error-collection updates.

Rules: any NULL operand makes arithmetic, comparison and string functions
NULL; ``AND``/``OR``/``NOT`` follow three-valued logic and are evaluated left
to right, stopping at the first ``false`` (``AND``) or ``true`` (``OR``);
``COALESCE`` stops at the first non-NULL; ``CONCAT`` skips NULLs; int64
``/`` truncates toward zero and ``%`` takes the sign of the dividend.

As in SQL, an int64 meeting a float64 (in arithmetic or a comparison) is
converted to float64 first, so ``2**62 + 1 = 2.0**62`` is true; an int64 meeting a
numeric is a numeric, a numeric meeting a float64 a float64 (numerics: :mod:`.numeric`). A string cast
to a number accepts what PostgreSQL's input functions accept, in ASCII only:
surrounding ASCII whitespace, a sign, and for int64 decimal digits (or
``0x``/``0o``/``0b`` digits) with single underscores between them, for
float64 decimal notation with an optional exponent (``NaN`` and infinities
are valid syntax but not float64 values here). ``LIKE`` raises when its
pattern ends in the escape character (a backslash, or the ``ESCAPE`` one), as
PostgreSQL does.

A string cast to bool, date or timestamp follows PostgreSQL's (and DuckDB's)
literal syntax, in ASCII: surrounding ASCII whitespace (never Unicode spaces);
for bool ``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0`` and
PostgreSQL's unambiguous prefixes (``t``, ``tr``, ``y``, ``of``, ...), in any
case; for a date ``YYYY-M-D`` (four-digit year, one or two digits for month
and day); for a timestamp a date, optionally followed by a space or ``T`` and
``HH:MM``, ``HH:MM:SS`` or ``HH:MM:SS.ffffff`` (one to six fraction digits:
PostgreSQL rounds a seventh, DuckDB truncates it, tidegate refuses it).

The functions of ``docs/plan-language.md``: ``abs``
(int64 overflow on ``abs(INT64_MIN)``), ``round`` (to an integral value of the
same type, half away from zero as PostgreSQL's ``numeric`` and DuckDB's
``double`` do; PostgreSQL's ``double precision`` rounds half to even),
``greatest``/``least`` (NULLs ignored, NULL only if all are), ``nullif``,
``trim``/``ltrim``/``rtrim`` (spaces only, as SQL's default), ``replace`` (an
empty search string leaves the string as it is), ``ILIKE`` (each character
lower-cased by its simple one-to-one mapping, as DuckDB does; the escape
character matched as written, as PostgreSQL does),
``LIKE``/``ILIKE ... ESCAPE`` (an escape of one character, or empty for none),
``||`` (NULL if either side is), ``date_trunc``, ``extract`` and
``timestamp ± milliseconds`` (years 1 to 9999, else "timestamp out of range").
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import re2

from ..errors import (
    CardinalityViolation,
    DivisionByZero,
    InvalidArgument,
    InvalidCast,
    InvalidPlan,
    NumericOverflow,
)
from ..frontier import Row, value_sort_key
from .numeric import (
    apply_typmod,
    float_to_numeric,
    numeric_add,
    numeric_div,
    numeric_mod,
    numeric_mul,
    numeric_sub,
    numeric_text,
    numeric_to_float,
    numeric_to_int,
    parse_numeric,
    round_numeric,
    trunc_numeric,
)
from .numeric import (
    reduce as reduce_numeric,
)
from .scalar import (
    EXTRACT_FIELDS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from .schema import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, ScalarType

__all__ = [
    "MORE_THAN_ONE_RECORD",
    "NAN",
    "RowFn",
    "canonical_float",
    "cast_value",
    "compile_scalar",
    "date_trunc",
    "eval_scalar",
    "extract_field",
    "float32_numeric",
    "float32_text",
    "float_text",
    "ilike_match",
    "like_match",
    "sql_equal",
    "sql_round",
    "timestamp_text",
    "to_float32",
]

RowFn = Callable[[Row], Any]

MORE_THAN_ONE_RECORD = "more than one record produced in subquery"
"""The error of a scalar subquery that produced a second row (PostgreSQL's and Materialize's
wording; SQLSTATE 21000)."""


def eval_scalar(expr: ScalarExpr, row: Row) -> Any:
    """The value of ``expr`` on ``row`` (``None`` is NULL); raises :class:`EvaluationError`."""
    return compile_scalar(expr)(row)


NAN = float("nan")
"""The one NaN object every float64 NaN result is: Python compares a NaN unequal to itself but
finds the same object in a dict or tuple, so rows holding it consolidate, group and join as
PostgreSQL's NaN (equal to itself, above every other number) does."""


def canonical_float(v: float) -> float:
    """``v``, or :data:`NAN` if ``v`` is a NaN."""
    return v if v == v else NAN


def _int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise NumericOverflow("integer out of range")
    return v


def _float(v: float) -> float:
    if not math.isfinite(v):
        if v != v:
            return NAN
        raise NumericOverflow("float out of range")
    return v


def _checked(r: float, a: Any, b: Any, underflow: bool) -> float:
    """PostgreSQL's float8 checks: an infinite result of finite operands overflows; with
    ``underflow``, a zero result of non-zero finite operands underflows."""
    if r != r:
        return NAN
    if math.isinf(r):
        if math.isinf(a) or math.isinf(b):
            return r
        raise NumericOverflow("float out of range")
    if underflow and r == 0.0 and a != 0 and b != 0:
        raise NumericOverflow("value out of range: underflow")
    return r


def _numeric_operands(a: Any, b: Any) -> tuple[Any, Any, bool]:
    """A numeric meeting an int64 meets it as a numeric, a numeric meeting a float64 meets it
    as a float64 (PostgreSQL's implicit casts); the flag says whether both are now numeric."""
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        return (
            numeric_to_float(a) if ta is Decimal else a,
            numeric_to_float(b) if tb is Decimal else b,
            False,
        )
    return (a if ta is Decimal else Decimal(a)), (b if tb is Decimal else Decimal(b)), True


def _numeric_arith(
    a: Any, b: Any, exact: Callable[[Decimal, Decimal], Decimal], inexact: Callable[[Any, Any], Any]
) -> Any:
    x, y, both = _numeric_operands(a, b)
    return exact(x, y) if both else inexact(x, y)


def _add(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return _int(a + b)
    if type(a) is Decimal or type(b) is Decimal:
        return _numeric_arith(a, b, numeric_add, _add)
    return _checked(a + b, a, b, False)


def _sub(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return _int(a - b)
    if type(a) is Decimal or type(b) is Decimal:
        return _numeric_arith(a, b, numeric_sub, _sub)
    return _checked(a - b, a, b, False)


def _mul(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return _int(a * b)
    if type(a) is Decimal or type(b) is Decimal:
        return _numeric_arith(a, b, numeric_mul, _mul)
    return _checked(a * b, a, b, True)


def _div(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        if b == 0:
            raise DivisionByZero("division by zero")
        q = abs(a) // abs(b)
        return _int(q if (a < 0) == (b < 0) else -q)
    if type(a) is Decimal or type(b) is Decimal:
        return _numeric_arith(a, b, numeric_div, _div)
    if b == 0:
        if a != a:
            return NAN
        raise DivisionByZero("division by zero")
    r = a / b
    if r != r:
        return NAN
    if math.isinf(r) and not math.isinf(a):
        raise NumericOverflow("float out of range")
    if r == 0.0 and a != 0 and not math.isinf(b):
        raise NumericOverflow("value out of range: underflow")
    return r


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        raise DivisionByZero("division by zero")
    if type(a) is Decimal or type(b) is Decimal:
        return _numeric_arith(a, b, numeric_mod, _mod)
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if math.isinf(a) or a != a or b != b:
        return NAN
    return _float(math.fmod(a, b))


def _comparands(a: Any, b: Any) -> tuple[Any, Any]:
    """Two numbers of different types as SQL compares them: an int64 with a numeric exactly
    (Python compares ``int`` and ``Decimal`` exactly), anything with a float64 as float64."""
    if type(a) is float or type(b) is float:
        return float(a), float(b)
    return a, b


def _eq(a: Any, b: Any) -> Any:
    # operands of one type but for numbers of two types (the typechecker allows no other
    # mix): SQL converts an int64 or numeric meeting a float64 to float64, where Python would
    # compare exactly; a NaN equals a NaN (PostgreSQL's float8eq)
    if type(a) is not type(b):
        a, b = _comparands(a, b)
    return a == b or (a != a and b != b)


def _ne(a: Any, b: Any) -> Any:
    return not _eq(a, b)


def _lt(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        a, b = _comparands(a, b)
    if a != a:
        return False
    return b != b or a < b


def _le(a: Any, b: Any) -> Any:
    if type(a) is not type(b):
        a, b = _comparands(a, b)
    if b != b:
        return True
    return a == a and a <= b


def _gt(a: Any, b: Any) -> Any:
    return _lt(b, a)


def _ge(a: Any, b: Any) -> Any:
    return _le(b, a)


def sql_equal(a: Any, b: Any) -> bool:
    """Whether non-NULL ``a`` and ``b`` are equal as SQL compares them: an int64 and a
    float64 as float64 (``2**62 + 1`` equals ``2.0**62``), other values of one type exactly."""
    return bool(_eq(a, b))


@lru_cache(maxsize=256)
def _regex(pattern: str, fold: bool) -> Any:
    """``pattern`` compiled by RE2, whose matching time is linear in the input (as PostgreSQL's
    and Materialize's regex engines bound theirs): a backtracking engine lets one pattern such
    as ``(a+)+b`` pin the replica evaluating it. RE2's syntax is Materialize's (Rust's regex
    crate) less its few extensions; back-references are refused, as Materialize refuses them."""
    options = re2.Options()
    options.case_sensitive = not fold
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        why = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidArgument(f"invalid regular expression: {why}") from None


_BINARY: dict[BinaryFunc, Callable[[Any, Any], Any]] = {
    BinaryFunc.ADD: _add,
    BinaryFunc.SUB: _sub,
    BinaryFunc.MUL: _mul,
    BinaryFunc.DIV: _div,
    BinaryFunc.MOD: _mod,
    BinaryFunc.EQ: _eq,
    BinaryFunc.NE: _ne,
    BinaryFunc.LT: _lt,
    BinaryFunc.LE: _le,
    BinaryFunc.GT: _gt,
    BinaryFunc.GE: _ge,
    BinaryFunc.LIKE: lambda s, p: like_match(s, p),
    BinaryFunc.ILIKE: lambda s, p: ilike_match(s, p),
    BinaryFunc.CONCAT: lambda a, b: a + b,
    BinaryFunc.ADD_MS: lambda t, ms: _add_us(t, ms * 1000),
    BinaryFunc.SUB_MS: lambda t, ms: _add_us(t, -ms * 1000),
    BinaryFunc.ADD_US: lambda t, us: _add_us(t, us),
    BinaryFunc.SUB_US: lambda t, us: _add_us(t, -us),
    BinaryFunc.DATE_ADD_DAYS: lambda d, n: _add_days(d, n),
    BinaryFunc.DATE_DIFF: lambda a, b: (a - b).days,
    BinaryFunc.POWER: lambda a, b: _power(a, b),
    BinaryFunc.LOG: lambda b, x: _log(b, x),
    BinaryFunc.ROUND_DIGITS: lambda x, n: (
        round_numeric(x, n) if type(x) is Decimal else _round_digits(x, n, False)
    ),
    BinaryFunc.TRUNC_DIGITS: lambda x, n: (
        trunc_numeric(x, n) if type(x) is Decimal else _round_digits(x, n, True)
    ),
    BinaryFunc.LEFT: lambda s, n: s[:n] if n >= 0 else s[: max(len(s) + n, 0)],
    BinaryFunc.RIGHT: lambda s, n: (s[-n:] if n > 0 else "") if n >= 0 else s[min(-n, len(s)) :],
    BinaryFunc.REPEAT: lambda s, n: _repeat(s, n),
    BinaryFunc.STRPOS: lambda s, sub: s.find(sub) + 1,
    BinaryFunc.REGEX_MATCH: lambda s, p: _regex(p, False).search(s) is not None,
    BinaryFunc.REGEX_IMATCH: lambda s, p: _regex(p, True).search(s) is not None,
}

_UNARY: dict[UnaryFunc, Callable[[Any], Any]] = {
    UnaryFunc.NOT: lambda v: not v,
    UnaryFunc.NEG: lambda v: (
        canonical_float(-v)
        if type(v) is float
        else (v.copy_negate() if v else v)  # exact (unary minus rounds to the context)
        if type(v) is Decimal
        else _int(-v)
    ),
    UnaryFunc.LOWER: str.lower,
    UnaryFunc.UPPER: str.upper,
    UnaryFunc.LENGTH: len,
    UnaryFunc.ABS: lambda v: (
        canonical_float(abs(v))
        if type(v) is float
        else v.copy_abs()
        if type(v) is Decimal
        else _int(abs(v))
    ),
    UnaryFunc.ROUND: lambda v: sql_round(v),
    UnaryFunc.TRIM: lambda v: v.strip(" "),
    UnaryFunc.LTRIM: lambda v: v.lstrip(" "),
    UnaryFunc.RTRIM: lambda v: v.rstrip(" "),
    UnaryFunc.CEIL: lambda v: (
        Decimal(math.ceil(v)) if type(v) is Decimal else _integral(v, math.ceil)
    ),
    UnaryFunc.FLOOR: lambda v: (
        Decimal(math.floor(v)) if type(v) is Decimal else _integral(v, math.floor)
    ),
    UnaryFunc.TRUNC: lambda v: trunc_numeric(v) if type(v) is Decimal else _integral(v, math.trunc),
    UnaryFunc.RINT: lambda v: _integral(v, round),
    # a NaN's sign is 0, as PostgreSQL's float8 sign (its comparisons with 0 are false)
    UnaryFunc.SIGN: lambda v: (
        Decimal((v > 0) - (v < 0)) if type(v) is Decimal else float((v > 0) - (v < 0))
    ),
    UnaryFunc.SQRT: lambda v: _sqrt(v),
    UnaryFunc.CBRT: lambda v: canonical_float(math.cbrt(v)),
    UnaryFunc.LN: lambda v: _ln(v, math.log),
    UnaryFunc.LOG10: lambda v: _ln(v, math.log10),
    UnaryFunc.EXP: lambda v: _exp(v),
    UnaryFunc.ASCII: lambda s: ord(s[0]) if s else 0,
    UnaryFunc.CHR: lambda n: _chr(n),
    UnaryFunc.INITCAP: lambda s: _initcap(s),
    UnaryFunc.REVERSE: lambda s: s[::-1],
    UnaryFunc.OCTET_LENGTH: lambda s: len(s.encode("utf-8", "surrogatepass")),
    UnaryFunc.FLOAT32_TEXT: lambda v: float32_text(v),
    UnaryFunc.FLOAT32_NUMERIC: lambda v: float32_numeric(v),
    UnaryFunc.ERROR: lambda s: _raise(s),
}


def _raise(message: str) -> Any:
    if message == MORE_THAN_ONE_RECORD:
        raise CardinalityViolation(message)
    raise InvalidArgument(message)


def _integral(v: float, f: Callable[[float], Any]) -> float:
    if not math.isfinite(v):
        return canonical_float(v)
    r = float(f(v))
    return math.copysign(r, v) if r == 0 else r  # ceil(-0.5) is -0


def _sqrt(v: float) -> float:
    if v < 0:
        raise InvalidArgument("cannot take square root of a negative number")
    return canonical_float(math.sqrt(v)) if v == v else NAN


def _ln(v: float, f: Callable[[float], float]) -> float:
    if v != v:
        return NAN
    if v == 0:
        raise InvalidArgument("cannot take logarithm of zero")
    if v < 0:
        raise InvalidArgument("cannot take logarithm of a negative number")
    return v if math.isinf(v) else f(v)


def _exp(v: float) -> float:
    if not math.isfinite(v):
        return NAN if v != v else (v if v > 0 else 0.0)
    try:
        r = math.exp(v)
    except OverflowError:
        raise NumericOverflow("value out of range: overflow") from None
    if r == 0.0:
        raise NumericOverflow("value out of range: underflow")
    return r


def _power(a: float, b: float) -> float:
    if a == 0 and b < 0:
        raise InvalidArgument("zero raised to a negative power is undefined")
    if a < 0 and math.isfinite(b) and b != math.floor(b):
        raise InvalidArgument(
            "a negative number raised to a non-integer power yields a complex result"
        )
    if a != a:
        return 1.0 if b == 0 else NAN
    if b != b:
        return 1.0 if a == 1 else NAN
    try:
        r = math.pow(a, b)
    except OverflowError:
        raise NumericOverflow("value out of range: overflow") from None
    if math.isinf(r) and math.isfinite(a) and math.isfinite(b):
        raise NumericOverflow("value out of range: overflow")
    if r == 0 and a != 0 and math.isfinite(a) and math.isfinite(b):
        raise NumericOverflow("value out of range: underflow")
    return r


def _log(b: float, x: float) -> float:
    if b != b or x != x:
        return NAN
    if b <= 0 or x <= 0:
        if b == 0 or x == 0:
            raise InvalidArgument("cannot take logarithm of zero")
        raise InvalidArgument("cannot take logarithm of a negative number")
    if b == 1:
        raise DivisionByZero("division by zero")
    return math.log(x) / math.log(b)


def _round_digits(x: float, n: int, truncate: bool) -> float:
    """``x`` to ``n`` decimal digits on its shortest decimal form, halves away from zero."""
    if not math.isfinite(x):
        return canonical_float(x)
    import decimal

    d = decimal.Decimal(repr(x))
    step = decimal.Decimal(1).scaleb(-max(min(n, 400), -400))
    mode = decimal.ROUND_DOWN if truncate else decimal.ROUND_HALF_UP
    with decimal.localcontext() as ctx:
        ctx.prec = 1000
        r = d.quantize(step, rounding=mode) if n >= -400 else decimal.Decimal(0)
    f = float(r)
    if math.isinf(f):
        raise NumericOverflow("float out of range")
    return math.copysign(f, x) if f == 0 else f


_MAX_STRING = 100 * 1024 * 1024


def _repeat(s: str, n: int) -> str:
    if n <= 0 or not s:
        return ""
    if len(s) * n > _MAX_STRING:
        raise InvalidArgument("requested length too large")
    return s * n


def _chr(n: int) -> str:
    if n == 0:
        raise InvalidArgument("null character not permitted")
    if n < 0 or n > 0x10FFFF:
        raise InvalidArgument("requested character too large for encoding")
    if 0xD800 <= n <= 0xDFFF:
        raise InvalidArgument("requested character not valid for encoding")
    return chr(n)


def _initcap(s: str) -> str:
    out = []
    prev = False
    for ch in s:
        out.append(ch.lower() if prev else ch.upper())
        prev = ch.isalnum()
    return "".join(out)


def _add_days(d: _dt.date, n: int) -> _dt.date:
    try:
        return d + _dt.timedelta(days=n)
    except OverflowError:
        raise NumericOverflow("date out of range") from None


def _regexp_replace(s: str, pattern: str, replacement: str, flags: str) -> str:
    bad = set(flags) - set("gi")
    if bad:
        raise InvalidArgument(f'invalid regular expression option: "{sorted(bad)[0]}"')
    rx = _regex(pattern, "i" in flags)

    def expand(m: Any) -> str:
        out, i = [], 0
        while i < len(replacement):
            ch = replacement[i]
            if ch == "\\" and i + 1 < len(replacement):
                nxt = replacement[i + 1]
                if nxt.isdigit() and nxt != "0":
                    k = int(nxt)
                    out.append((m.group(k) or "") if k <= rx.groups else "")
                elif nxt == "&":
                    out.append(m.group(0))
                else:
                    out.append(nxt)
                i += 2
                continue
            out.append(ch)
            i += 1
        return "".join(out)

    replaced: str = rx.sub(expand, s, count=0 if "g" in flags else 1)
    return replaced


def _pad(s: str, n: int, fill: str, left: bool) -> str:
    if n <= 0:
        return ""
    if n > _MAX_STRING:
        raise InvalidArgument("requested length too large")
    if len(s) >= n or not fill:
        return s[:n]
    k = n - len(s)
    pad = (fill * (k // len(fill) + 1))[:k]
    return pad + s if left else s + pad


def _translate(s: str, src: str, dst: str) -> str:
    table: dict[str, str | None] = {}
    for i, ch in enumerate(src):
        if ch not in table:
            table[ch] = dst[i] if i < len(dst) else None
    return "".join(c for c in (table.get(ch, ch) for ch in s) if c is not None)


def _split_part(s: str, delim: str, n: int) -> str:
    if n == 0:
        raise InvalidArgument("field position must not be zero")
    if not delim:
        return s if n in (1, -1) else ""
    parts = s.split(delim)
    k = n - 1 if n > 0 else len(parts) + n
    return parts[k] if 0 <= k < len(parts) else ""


def sql_round(v: Any) -> Any:
    """``round(v)``: an int64 unchanged; a float64 to the nearest integral float64, halves
    away from zero (``round(2.5) = 3.0``, ``round(-0.5) = -1.0``, ``round(-0.4) = -0.0``)."""
    if type(v) is int:
        return v
    if type(v) is Decimal:
        return round_numeric(v)
    if not math.isfinite(v):
        return canonical_float(v)
    a = abs(v)
    f = math.floor(a)
    r = f + 1.0 if a - f >= 0.5 else float(f)  # a - f is exact: no 0.49999999999999994 trap
    return math.copysign(r, v)


_EPOCH = _dt.datetime(1970, 1, 1)
_MICRO = _dt.timedelta(microseconds=1)
_TS_MIN_US = (_dt.datetime.min - _EPOCH) // _MICRO
_TS_MAX_US = (_dt.datetime.max - _EPOCH) // _MICRO


def _micros(v: _dt.date) -> int:
    """Microseconds since 1970-01-01 00:00 of a timestamp (or a date's midnight)."""
    if type(v) is not _dt.datetime:
        v = _dt.datetime(v.year, v.month, v.day)
    return (v - _EPOCH) // _MICRO


def _add_us(v: _dt.date, delta: int) -> _dt.datetime:
    us = _micros(v) + delta
    if not _TS_MIN_US <= us <= _TS_MAX_US:
        raise NumericOverflow("timestamp out of range")
    return _EPOCH + _dt.timedelta(microseconds=us)


def date_trunc(unit: str, ts: _dt.datetime) -> _dt.datetime:
    """``ts`` truncated to the start of its ``unit`` (one of :data:`~.scalar.DATE_TRUNC_UNITS`)."""
    if unit == "second":
        return ts.replace(microsecond=0)
    if unit == "minute":
        return ts.replace(second=0, microsecond=0)
    if unit == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    day = _dt.datetime(ts.year, ts.month, ts.day)
    if unit == "day":
        return day
    if unit == "week":  # ISO weeks start on Monday; 0001-01-01 is a Monday, so none is lost
        return day - _dt.timedelta(days=ts.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "quarter":
        return _dt.datetime(ts.year, 3 * ((ts.month - 1) // 3) + 1, 1)
    if unit == "year":
        return _dt.datetime(ts.year, 1, 1)
    raise InvalidArgument(f"date_trunc() unit {unit!r} not supported")


def extract_field(field: str, v: _dt.date) -> Any:
    """``extract(field FROM v)`` (see :data:`~.scalar.EXTRACT_FIELDS`)."""
    if field == "year":
        return v.year
    if field == "quarter":
        return (v.month - 1) // 3 + 1
    if field == "month":
        return v.month
    if field == "day":
        return v.day
    if field == "dow":
        return v.isoweekday() % 7
    if field == "doy":
        return v.timetuple().tm_yday
    if field == "epoch":
        # the microseconds as float64, then divided: exact below 2^53 us (years 1685-2255)
        return float(_micros(v)) / 1e6
    if type(v) is not _dt.datetime:
        raise InvalidArgument(f"extract({field}) of a date")
    if field == "hour":
        return v.hour
    if field == "minute":
        return v.minute
    if field == "second":
        return v.second
    raise InvalidArgument(f"extract() field {field!r} not supported")


@dataclass(frozen=True, slots=True)
class _LikePattern:
    """A LIKE pattern cut at its ``%`` wildcards: ``head`` must match at the start, ``tail`` at
    the end, and each of ``middle`` somewhere between, in order. Each piece is a regex of
    literal characters and ``.`` (for ``_``) only, so it matches exactly its length in
    characters and never backtracks over a ``%``."""

    head: re.Pattern[str]
    middle: tuple[re.Pattern[str], ...]
    tail: tuple[re.Pattern[str], int] | None
    """The last piece and its length; ``None`` without a ``%`` (``head`` is all of it)."""
    min_length: int

    def matches(self, s: str) -> bool:
        # Matching each middle piece at its leftmost place is optimal: a later place leaves
        # less room for the pieces after it, never more. So this costs O(len(s) * len(pattern))
        # where a backtracking regex of the whole pattern costs exponential time.
        if len(s) < self.min_length:
            return False
        if self.tail is None:
            return self.head.fullmatch(s) is not None
        m = self.head.match(s)
        if m is None:
            return False
        at = m.end()
        for piece in self.middle:
            found = piece.search(s, at)
            if found is None:
                return False
            at = found.end()
        tail, length = self.tail
        start = len(s) - length
        return start >= at and tail.fullmatch(s, start) is not None


@lru_cache(maxsize=256)
def _like_pattern(pattern: str, escape: str, fold: bool) -> _LikePattern | None:
    """The pieces of a LIKE pattern, or ``None`` if it ends in an unpaired escape.

    ``escape`` is one character, or empty for none; with ``fold``, literal
    characters are lower-cased (:func:`_simple_lower`), for ILIKE.
    """
    lit = _simple_lower if fold else str
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            if i + 1 == len(pattern):
                return None
            pieces[-1].append(re.escape(lit(pattern[i + 1])))
            i += 2
        elif ch == "%":
            pieces.append([])
            i += 1
        else:
            pieces[-1].append("." if ch == "_" else re.escape(lit(ch)))
            i += 1
    compiled = [re.compile("".join(p), re.DOTALL) for p in pieces]
    min_length = sum(len(p) for p in pieces)
    if len(pieces) == 1:
        return _LikePattern(compiled[0], (), None, min_length)
    tail = (compiled[-1], len(pieces[-1]))
    return _LikePattern(compiled[0], tuple(compiled[1:-1]), tail, min_length)


def _match(s: str, pattern: str, escape: str, fold: bool) -> bool:
    if len(escape) > 1:
        raise InvalidArgument("invalid escape string: must be empty or one character")
    like = _like_pattern(pattern, escape, fold)
    if like is None:
        raise InvalidArgument("LIKE pattern must not end with escape character")
    return like.matches(_simple_lower(s) if fold else s)


def like_match(s: str, pattern: str, escape: str = "\\") -> bool:
    """SQL ``s LIKE pattern ESCAPE escape``: ``%`` any run, ``_`` one character, ``escape``
    (a backslash unless given; empty for none) makes the next character literal;
    case-sensitive.

    A pattern ending in the escape character is an error (PostgreSQL's "LIKE
    pattern must not end with escape character"), raised on every evaluation
    rather than only when matching reaches the end of the pattern, so the
    outcome does not depend on the matching algorithm. An escape of more than
    one character is an error too ("invalid escape string").
    """
    return _match(s, pattern, escape, False)


def _simple_lower(s: str) -> str:
    """``s`` with each character lower-cased by its simple (one-to-one) mapping: Python's
    ``lower`` is the full mapping, which turns ``İ`` into two characters; its first is the
    simple mapping's (the only unconditional one-to-many lower-case mapping)."""
    if s.isascii():
        return s.lower()
    return "".join(c.lower()[0] for c in s)


def ilike_match(s: str, pattern: str, escape: str = "\\") -> bool:
    """SQL ``s ILIKE pattern ESCAPE escape``: :func:`like_match` with the string and the
    pattern's literal characters lower-cased character by character (so ``'İ' ILIKE 'i'``
    holds, ``'ß' ILIKE 'SS'`` does not); the escape character is matched as written."""
    return _match(s, pattern, escape, True)


def _substring(s: str, start: int, length: int | None) -> str:
    begin = max(start, 1) - 1
    if length is None:
        return s[begin:]
    if length < 0:
        raise InvalidArgument("negative substring length not allowed")
    end = max(start + length - 1, begin)
    return s[begin:end]


_INT_SYNTAX = re.compile(r"[ \t\n\r\v\f]*([+-]?)([0-9]+)[ \t\n\r\v\f]*")
"""What PostgreSQL 15's int8 input accepts: ASCII whitespace around, a sign, decimal digits
(no underscores, no ``0x``/``0o``/``0b`` prefixes: those came with version 16)."""
_BASES = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
_FLOAT_SYNTAX = re.compile(
    r"[ \t\n\r\v\f]*[+-]?"
    r"(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)"
    r"[ \t\n\r\v\f]*",
    re.ASCII | re.IGNORECASE,
)
"""What PostgreSQL's float8 input accepts, in decimal notation: ASCII whitespace around, a
sign, digits with an optional point and exponent, ``NaN``, ``Inf`` and ``Infinity`` (any
case). Python's ``float`` reads every such string the same way (and more: non-ASCII
digits and spaces, underscores, which this excludes)."""


def _parse_int(v: str) -> int:
    """``v`` as an int64 literal (:data:`_INT_SYNTAX`); raise :class:`InvalidCast` or
    :class:`NumericOverflow`."""
    m = _INT_SYNTAX.fullmatch(v)
    if m is None:
        raise InvalidCast(f"invalid input syntax for type int64: {v!r}")
    sign, digits = m.group(1, 2)
    if len(digits) > 40:
        raise NumericOverflow("integer out of range")
    n = int(digits)
    return _int(-n if sign == "-" else n)


def _parse_float(v: str) -> float:
    """``v`` as a float64 literal (:data:`_FLOAT_SYNTAX`), ``NaN`` and infinities included;
    raise :class:`InvalidCast`, or :class:`NumericOverflow` for a finite number beyond float64
    (``1e400``) or one that rounds to zero (``1e-400``), as PostgreSQL does."""
    if not _FLOAT_SYNTAX.fullmatch(v):
        raise InvalidCast(f"invalid input syntax for type float64: {v!r}")
    f = float(v)
    if f != f:
        return NAN
    word = v.strip(" \t\n\r\v\f").lstrip("+-").lower()
    if math.isinf(f) and word.startswith("inf"):
        return f
    if math.isinf(f) or (f == 0.0 and any(c in "123456789" for c in word.split("e")[0])):
        raise NumericOverflow(f"{v.strip()!r} is out of range for type double precision")
    return f


_WS = "[ \t\n\r\v\f]*"
_DATE = "([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_DATE_SYNTAX = re.compile(f"{_WS}{_DATE}{_WS}", re.ASCII)
_TS_SYNTAX = re.compile(
    f"{_WS}{_DATE}(?:[ T]([0-9]{{2}}):([0-9]{{2}})(?::([0-9]{{2}})(?:\\.([0-9]{{1,6}}))?)?)?{_WS}",
    re.ASCII,
)
"""The date and timestamp literals PostgreSQL and DuckDB both read (ASCII only)."""
_BOOL_WORDS = (("true", True, 1), ("yes", True, 1), ("on", True, 2))
_BOOL_WORDS_FALSE = (("false", False, 1), ("no", False, 1), ("off", False, 2))


def _parse_bool(v: str) -> bool:
    """PostgreSQL's ``boolin``: ASCII whitespace around, any ASCII case, ``1``/``0`` or a
    prefix of ``true``, ``yes``, ``false``, ``no`` (at least one letter) or of ``on``,
    ``off`` (at least two)."""
    w = v.strip(" \t\n\r\v\f")
    if w.isascii() and w:
        low = w.lower()
        if low == "1":
            return True
        if low == "0":
            return False
        for word, value, least in (*_BOOL_WORDS, *_BOOL_WORDS_FALSE):
            if len(low) >= least and word.startswith(low):
                return value
    raise InvalidCast(f"invalid input syntax for type bool: {v!r}")


def _parse_datetime(v: str, to: ScalarType) -> Any:
    m = (_DATE_SYNTAX if to is ScalarType.DATE else _TS_SYNTAX).fullmatch(v)
    if m is None:
        raise InvalidCast(f"invalid input syntax for type {to.value}: {v!r}")
    parts = m.groups()
    try:
        if to is ScalarType.DATE:
            return _dt.date(int(parts[0]), int(parts[1]), int(parts[2]))
        y, mo, d, h, mi, sec, frac = parts
        return _dt.datetime(
            int(y),
            int(mo),
            int(d),
            int(h or 0),
            int(mi or 0),
            int(sec or 0),
            int((frac or "0").ljust(6, "0")),
        )
    except ValueError:  # a field out of range (month 13, 2020-02-30, hour 24, year 0)
        raise InvalidCast(f"invalid input syntax for type {to.value}: {v!r}") from None


def float_text(v: float) -> str:
    """A float64 as PostgreSQL prints it: the shortest digits that read back as ``v``, in
    positional notation for decimal exponents from -4 to 14, else as ``1.5e+20``; ``NaN``,
    ``Infinity``, ``-Infinity``, and ``-0`` for negative zero."""
    return _float_text(v, repr(v), 15)


def float32_text(v: float) -> str:
    """A float32 as PostgreSQL prints a ``real``: the shortest digits that read back as the
    same single-precision value, in positional notation for decimal exponents from -4 to 5,
    else as ``1.2345679e+08``."""
    shortest = repr(v)
    if math.isfinite(v) and v:
        for p in range(1, 10):
            text = f"{v:.{p}g}"
            try:
                back = to_float32(float(text))
            except NumericOverflow:  # rounded past the largest single (3.403e+38): more digits
                continue
            if back == v:
                shortest = repr(float(text))
                break
    return _float_text(v, shortest, 6)


def to_float32(v: float) -> float:
    """``v`` rounded to single precision, as PostgreSQL's ``float8`` to ``real`` (22003
    "value out of range: overflow" beyond it, "underflow" for a non-zero that rounds to 0)."""
    if not math.isfinite(v):
        return canonical_float(v)
    try:
        r: float = _FLOAT32.unpack(_FLOAT32.pack(v))[0]
    except OverflowError:
        raise NumericOverflow("value out of range: overflow") from None
    if r == 0.0 and v != 0.0:
        raise NumericOverflow("value out of range: underflow")
    return r


def float32_numeric(v: float) -> Decimal:
    """A float32 as PostgreSQL converts a ``real`` to ``numeric``: 6 significant digits."""
    if not math.isfinite(v):
        raise InvalidCast(f"cannot convert {'NaN' if v != v else 'infinity'} to numeric")
    return reduce_numeric(Decimal(f"{v:.6g}"))


_FLOAT32 = struct.Struct("<f")
_INT_BOUNDS = {
    ScalarType.INT64: (INT64_MIN, INT64_MAX),
    ScalarType.INT32: (INT32_MIN, INT32_MAX),
    ScalarType.INT16: (INT16_MIN, INT16_MAX),
}


def _narrow_int(n: int, lo: int, hi: int, name: str) -> int:
    if not lo <= n <= hi:
        raise NumericOverflow(f"{name} out of range")
    return n


def _parse_narrow_int(v: str, lo: int, hi: int, name: str) -> int:
    """Text as a ``smallint``/``integer``, with PostgreSQL's words for each failure."""
    try:
        n = _parse_int(v)
    except InvalidCast:
        raise InvalidCast(f'invalid input syntax for type {name}: "{v}"') from None
    except NumericOverflow:
        n = hi + 1
    if not lo <= n <= hi:
        raise NumericOverflow(f'value "{v}" is out of range for type {name}')
    return n


def _parse_float32(v: str) -> float:
    try:
        f = _parse_float(v)
    except InvalidCast:
        raise InvalidCast(f'invalid input syntax for type real: "{v}"') from None
    except NumericOverflow:
        raise NumericOverflow(f'"{v.strip()}" is out of range for type real') from None
    try:
        return to_float32(f)
    except NumericOverflow:
        raise NumericOverflow(f'"{v.strip()}" is out of range for type real') from None


def _float_text(v: float, text: str, limit: int) -> str:
    """``v`` printed from its shortest digits ``text`` (Python's ``repr`` form), positional
    for decimal exponents from -4 to ``limit - 1``."""
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exp_text = text.lstrip("-").partition("e")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    exp10 = (int(exp_text) if exp_text else 0) + len(whole.lstrip("0")) - 1
    if not whole.lstrip("0"):  # 0.00ddd
        exp10 = (int(exp_text) if exp_text else 0) - (len(frac) - len(frac.lstrip("0"))) - 1
    digits = digits.rstrip("0") or "0"
    if exp10 < -4 or exp10 >= limit:
        head, tail = digits[0], digits[1:]
        return (
            f"{sign}{head}{'.' + tail if tail else ''}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
        )
    if exp10 < 0:
        return f"{sign}0.{'0' * (-exp10 - 1)}{digits}"
    if len(digits) <= exp10 + 1:
        return f"{sign}{digits}{'0' * (exp10 + 1 - len(digits))}"
    return f"{sign}{digits[: exp10 + 1]}.{digits[exp10 + 1 :]}"


def timestamp_text(v: _dt.datetime) -> str:
    """A timestamp as PostgreSQL prints it (ISO, the fraction without trailing zeros)."""
    text = v.strftime("%Y-%m-%d %H:%M:%S") if v.year >= 1000 else v.isoformat(sep=" ")[:19]
    if v.microsecond:
        text += f".{v.microsecond:06d}".rstrip("0")
    return text


def _to_string(v: Any) -> str:
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is float:
        return float_text(v)
    if type(v) is _dt.datetime:
        return timestamp_text(v)
    if type(v) is _dt.date:
        return v.isoformat()
    if type(v) is Decimal:
        return numeric_text(v)
    return str(v)


def cast_value(v: Any, to: ScalarType) -> Any:
    """Convert the non-NULL value ``v`` to ``to`` (the source type is ``v``'s Python type)."""
    t = type(v)
    if to is ScalarType.STRING:
        return v if t is str else _to_string(v)
    if to is ScalarType.INT64:
        if t is int:
            return v
        if t is bool:
            return int(v)
        if t is Decimal:
            return numeric_to_int(v, INT64_MIN, INT64_MAX, "bigint")
        if t is float:
            if not math.isfinite(v):
                raise NumericOverflow("integer out of range")
            r = round(v)
            if not INT64_MIN <= r <= INT64_MAX:
                raise NumericOverflow("integer out of range")
            return r
        return _parse_int(v)
    if to is ScalarType.FLOAT64:
        if t is float:
            return v
        if t is int:
            return float(v)
        if t is Decimal:
            return numeric_to_float(v)
        return _parse_float(v)
    if to is ScalarType.NUMERIC:
        if t is Decimal:
            return v
        if t is int:
            return Decimal(v)
        if t is float:
            return float_to_numeric(v)
        return parse_numeric(v)
    if to is ScalarType.INT32:
        return _to_narrow_int(v, INT32_MIN, INT32_MAX, "integer")
    if to is ScalarType.INT16:
        return _to_narrow_int(v, INT16_MIN, INT16_MAX, "smallint")
    if to is ScalarType.FLOAT32:
        if t is str:
            return _parse_float32(v)
        if t is Decimal:
            f = float(v)
            if math.isinf(f) or (f == 0.0 and v):
                raise NumericOverflow(f'"{numeric_text(v)}" is out of range for type real')
            return to_float32(f)
        return to_float32(float(v))
    if to is ScalarType.BOOL:
        if t is bool:
            return v
        if t is int:
            return v != 0
        return _parse_bool(v)
    if to is ScalarType.DATE:
        if t is _dt.date:
            return v
        if t is _dt.datetime:
            return v.date()
        return _parse_datetime(v, to)
    if t is _dt.datetime:
        return v
    if t is _dt.date:
        return _dt.datetime(v.year, v.month, v.day)
    return _parse_datetime(v, to)


def _to_narrow_int(v: Any, lo: int, hi: int, name: str) -> int:
    """A non-NULL value as a ``smallint``/``integer`` (floats round half to even, numerics
    half away from zero, as PostgreSQL's casts)."""
    t = type(v)
    if t is str:
        return _parse_narrow_int(v, lo, hi, name)
    if t is bool:
        return int(v)
    if t is Decimal:
        return numeric_to_int(v, lo, hi, name)
    if t is float:
        if not math.isfinite(v):
            raise NumericOverflow(f"{name} out of range")
        return _narrow_int(round(v), lo, hi, name)
    return _narrow_int(v, lo, hi, name)


def _compile_and(fs: list[RowFn]) -> RowFn:
    def f(row: Row) -> Any:
        saw_null = False
        for g in fs:
            v = g(row)
            if v is False:
                return False
            if v is None:
                saw_null = True
        return None if saw_null else True

    return f


def _compile_or(fs: list[RowFn]) -> RowFn:
    def f(row: Row) -> Any:
        saw_null = False
        for g in fs:
            v = g(row)
            if v is True:
                return True
            if v is None:
                saw_null = True
        return None if saw_null else False

    return f


def _word(e: ScalarExpr) -> str:
    if not (isinstance(e, Literal) and isinstance(e.value, str)):
        raise InvalidPlan(f"expected a string literal, got {e!r}")
    return e.value.lower()


def _int_literal(e: ScalarExpr) -> int:
    if not (isinstance(e, Literal) and type(e.value) is int):
        raise InvalidPlan(f"expected an int64 literal, got {e!r}")
    return e.value


def _strict(fn: Callable[..., Any], fs: list[RowFn]) -> RowFn:
    """``fn`` of the arguments' values, NULL if any is NULL (every argument evaluated)."""

    def f(row: Row) -> Any:
        args = [g(row) for g in fs]
        if any(a is None for a in args):
            return None
        return fn(*args)

    return f


def _compile_variadic(expr: CallVariadic, fs: list[RowFn]) -> RowFn:
    vf = expr.func
    if vf in (VariadicFunc.GREATEST, VariadicFunc.LEAST):
        pick = max if vf is VariadicFunc.GREATEST else min

        def extreme(row: Row) -> Any:
            vals = [v for v in (g(row) for g in fs) if v is not None]
            # SQL's order (a NaN above every number), not Python's comparisons
            return pick(vals, key=value_sort_key) if vals else None

        return extreme
    if vf is VariadicFunc.NULLIF:
        a, b = fs

        def nullif(row: Row) -> Any:
            x, y = a(row), b(row)
            if x is None or y is None:
                return x
            return None if sql_equal(x, y) else x

        return nullif
    if vf is VariadicFunc.REPLACE:
        return _strict(lambda s, old, new: s.replace(old, new) if old else s, fs)
    if vf is VariadicFunc.CONCAT_WS:
        sep_fn, rest = fs[0], fs[1:]

        def concat_ws(row: Row) -> Any:
            sep = sep_fn(row)
            if sep is None:
                return None
            return sep.join(v for v in (g(row) for g in rest) if v is not None)

        return concat_ws
    if vf is VariadicFunc.LPAD:
        return _strict(lambda s, n, fill: _pad(s, n, fill, True), fs)
    if vf is VariadicFunc.RPAD:
        return _strict(lambda s, n, fill: _pad(s, n, fill, False), fs)
    if vf is VariadicFunc.TRANSLATE:
        return _strict(_translate, fs)
    if vf is VariadicFunc.SPLIT_PART:
        return _strict(_split_part, fs)
    if vf is VariadicFunc.REGEXP_REPLACE:
        return _strict(_regexp_replace, fs)
    if vf is VariadicFunc.LIKE_ESCAPE:
        return _strict(like_match, fs)
    if vf is VariadicFunc.ILIKE_ESCAPE:
        return _strict(ilike_match, fs)
    if vf is VariadicFunc.DATE_TRUNC:
        unit, ts = _word(expr.exprs[0]), fs[1]

        def trunc(row: Row) -> Any:
            v = ts(row)
            return None if v is None else date_trunc(unit, v)

        return trunc
    if vf is VariadicFunc.NUMERIC_TYPMOD:
        precision, scale = (_int_literal(e) for e in expr.exprs[1:])
        x = fs[0]

        def typmod(row: Row) -> Any:
            v = x(row)
            return None if v is None else apply_typmod(v, precision, scale)

        return typmod
    if vf is VariadicFunc.EXTRACT:
        field, src = _word(expr.exprs[0]), fs[1]
        if field not in EXTRACT_FIELDS:
            raise InvalidPlan(f"extract() field {field!r} not supported")

        def extract(row: Row) -> Any:
            v = src(row)
            return None if v is None else extract_field(field, v)

        return extract
    raise InvalidPlan(f"not a variadic function: {vf!r}")


def compile_scalar(expr: ScalarExpr) -> RowFn:
    """A function computing ``expr`` on a row. The expression is assumed well typed."""
    if isinstance(expr, ColumnRef):
        i = expr.index
        return lambda row: row[i]
    if isinstance(expr, Literal):
        value = expr.value
        return lambda row: value
    if isinstance(expr, CallUnary):
        inner = compile_scalar(expr.expr)
        if expr.func is UnaryFunc.IS_NULL:
            return lambda row: inner(row) is None
        op = _UNARY[expr.func]

        def unary(row: Row) -> Any:
            v = inner(row)
            return None if v is None else op(v)

        return unary
    if isinstance(expr, CallBinary):
        left, right = compile_scalar(expr.left), compile_scalar(expr.right)
        bop = _BINARY[expr.func]

        def binary(row: Row) -> Any:
            a = left(row)
            b = right(row)
            if a is None or b is None:
                return None
            return bop(a, b)

        return binary
    if isinstance(expr, CallVariadic):
        fs = [compile_scalar(e) for e in expr.exprs]
        if expr.func is VariadicFunc.AND:
            return _compile_and(fs)
        if expr.func is VariadicFunc.OR:
            return _compile_or(fs)
        if expr.func is VariadicFunc.COALESCE:

            def coalesce(row: Row) -> Any:
                for g in fs:
                    v = g(row)
                    if v is not None:
                        return v
                return None

            return coalesce
        if expr.func is VariadicFunc.CONCAT:

            def concat(row: Row) -> Any:
                return "".join(v for v in (g(row) for g in fs) if v is not None)

            return concat
        if expr.func is not VariadicFunc.SUBSTRING:
            return _compile_variadic(expr, fs)

        def substring(row: Row) -> Any:
            args = [g(row) for g in fs]
            if any(a is None for a in args):
                return None
            return _substring(args[0], args[1], args[2] if len(args) > 2 else None)

        return substring
    if isinstance(expr, If):
        cond, then, els = (
            compile_scalar(expr.cond),
            compile_scalar(expr.then),
            compile_scalar(expr.els),
        )
        return lambda row: then(row) if cond(row) is True else els(row)
    if isinstance(expr, Cast):
        inner = compile_scalar(expr.expr)
        to = expr.to
        bounds = _INT_BOUNDS.get(to)
        if bounds is not None:  # the widen-and-narrow casts of integer arithmetic: fast paths
            lo, hi = bounds

            def to_int(row: Row) -> Any:
                v = inner(row)
                if type(v) is int and lo <= v <= hi:
                    return v
                return None if v is None else cast_value(v, to)

            return to_int
        if to is ScalarType.FLOAT64:

            def to_double(row: Row) -> Any:
                v = inner(row)
                if type(v) is float:
                    return v
                return None if v is None else cast_value(v, to)

            return to_double
        if to is ScalarType.FLOAT32:

            def to_single(row: Row) -> Any:
                v = inner(row)
                if type(v) is float:
                    return to_float32(v)
                return None if v is None else cast_value(v, to)

            return to_single

        def cast(row: Row) -> Any:
            v = inner(row)
            return None if v is None else cast_value(v, to)

        return cast
    raise InvalidPlan(f"not a scalar expression: {expr!r}")
