"""Function calls: sqlglot's function nodes to PostgreSQL's name and arguments, resolved against
the plan IR's functions with PostgreSQL's rules.

sqlglot parses many functions into classes of its own, with named arguments
(``Pad(this, expression, fill_pattern, is_left)`` for ``lpad``); :func:`call_of`
turns each back into the name and the positional arguments PostgreSQL sees, so
a call with arguments PostgreSQL has no function for (``length('a', 99)``) is
refused as PostgreSQL refuses it (42883), never silently dropped.

Resolution is PostgreSQL's, on tidegate's types: an argument of the exact type
matches; an untyped literal or NULL takes the parameter's type; an integer is
promoted to a float where a float is wanted; anything else is "function ...
does not exist". Functions PostgreSQL defines on ``numeric`` only
(``round(x, n)``, ``trunc(x, n)``, ``log(b, x)``) take ``double precision``
here (the shortest decimal form of the value is rounded, as ``numeric`` would
be).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import sqlglot
from sqlglot import exp

from ..errors import AmbiguousFunction, SqlError, UndefinedFunction, UnsupportedSql
from ..plan import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    ColumnType,
    If,
    Literal,
    ScalarExpr,
    ScalarType,
    UnaryFunc,
    VariadicFunc,
)
from ._common import _err, pg_type
from ._dialect import DIALECT
from ._texpr import _IMPLICIT_CASTS, TExpr, _coerce, arith, cast_to

__all__ = ["bind_call", "call_of"]


class _Binder(Protocol):
    """What calls need of the expression binder (:class:`._binder.ExprBinder`)."""

    def bind(self, node: Any) -> TExpr: ...

    def _make(self, expr: ScalarExpr, node: Any) -> TExpr: ...

    def _binary(self, func: BinaryFunc, left: Any, right: Any, node: Any) -> TExpr: ...


S = ScalarType

# sqlglot's flags that carry no argument of the call (defaults it fills in for the dialect)
_FLAGS = frozenset(
    {
        "safe",
        "coalesce",
        "flatten",
        "is_left",
        "single_replace",
        "negative_length_returns_empty",
        "part_index_zero_as_one",
        "empty_delimiter_returns_whole",
        "clamp_position",
        "fractions_supported",
        "casts_non_integer_decimals",
        "zero_start",
        "charset",
        "binary",
        "ignore_nulls",
        "is_nvl",
        "is_null",
        "big_int",
    }
)


def _initcap_default() -> str:
    """The delimiters sqlglot fills into ``initcap(x)`` (other dialects' second argument)."""
    node = sqlglot.parse_one("SELECT initcap(x)", read=DIALECT).expressions[0]
    extra = node.args.get("expression")
    return str(extra.name) if extra is not None else ""


_INITCAP_DEFAULT = _initcap_default()

# class -> (PostgreSQL name, its positional arguments in order)
_POSITIONAL: dict[type[exp.Expression], tuple[str, tuple[str, ...]]] = {
    exp.Lower: ("lower", ("this",)),
    exp.Upper: ("upper", ("this",)),
    exp.Length: ("length", ("this", "encoding")),
    exp.Abs: ("abs", ("this",)),
    exp.Ceil: ("ceil", ("this", "decimals", "to")),
    exp.Floor: ("floor", ("this", "decimals", "to")),
    exp.Round: ("round", ("this", "decimals", "truncate")),
    exp.Trunc: ("trunc", ("this", "decimals")),
    exp.Sqrt: ("sqrt", ("this",)),
    exp.Cbrt: ("cbrt", ("this",)),
    exp.Ln: ("ln", ("this",)),
    exp.Exp: ("exp", ("this",)),
    exp.Sign: ("sign", ("this",)),
    exp.Log: ("log", ("this", "expression")),
    exp.Pow: ("power", ("this", "expression")),
    exp.Mod: ("mod", ("this", "expression")),
    exp.Left: ("left", ("this", "expression")),
    exp.Right: ("right", ("this", "expression")),
    exp.Repeat: ("repeat", ("this", "times")),
    exp.Reverse: ("reverse", ("this",)),
    exp.Ascii: ("ascii", ("this",)),
    exp.Initcap: ("initcap", ("this",)),
    exp.StrPosition: ("strpos", ("this", "substr", "position", "occurrence")),
    exp.Translate: ("translate", ("this", "from_", "to")),
    exp.SplitPart: ("split_part", ("this", "delimiter", "part_index")),
    exp.RegexpReplace: (
        "regexp_replace",
        ("this", "expression", "replacement", "modifiers", "position", "occurrence"),
    ),
    exp.Replace: ("replace", ("this", "expression", "replacement")),
    exp.Substring: ("substring", ("this", "start", "length")),
}


def call_of(node: Any) -> tuple[str, list[Any]] | None:
    """The PostgreSQL name and positional arguments of a function node, or None if ``node``
    is not one this module binds."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower(), list(node.expressions)
    if isinstance(node, exp.ConcatWs):
        return "concat_ws", list(node.expressions)
    if isinstance(node, exp.Concat):
        return "concat", list(node.expressions)
    if isinstance(node, exp.Chr):
        return "chr", list(node.expressions)
    if isinstance(node, exp.Rand):
        return "random", []
    if isinstance(node, exp.CurrentTimestamp):
        return "current_timestamp", []
    if isinstance(node, exp.CurrentDate):
        return "current_date", []
    if isinstance(node, exp.Initcap):
        # sqlglot fills in the word delimiters of other dialects' two-argument initcap
        extra = node.args.get("expression")
        given = extra is not None and not (
            isinstance(extra, exp.Literal) and extra.is_string and extra.name == _INITCAP_DEFAULT
        )
        return "initcap", [node.this, extra] if given else [node.this]
    if isinstance(node, exp.Pad):
        name = "lpad" if node.args.get("is_left") else "rpad"
        return name, _positional(node, ("this", "expression", "fill_pattern"))
    spec = _POSITIONAL.get(type(node))
    if spec is None:
        return None
    name, keys = spec
    return name, _positional(node, keys)


def _positional(node: Any, keys: tuple[str, ...]) -> list[Any]:
    """The arguments in ``keys`` order, up to the last one given; any other argument sqlglot
    filled in makes the call one PostgreSQL does not have."""
    extra = [
        k
        for k, v in node.args.items()
        if v not in (None, False, [], "") and k not in keys and k not in _FLAGS
    ]
    if extra:
        raise _err(UndefinedFunction, f"function {node.sql_name().lower()} with {extra[0]}", node)
    args = [node.args.get(k) for k in keys]
    args = [None if a in (False, [], "") else a for a in args]
    while args and args[-1] is None:
        args.pop()
    if any(a is None for a in args):
        raise _err(SqlError, f"function {node.sql_name().lower()}: missing argument", node)
    return args


_LACKING = {
    **dict.fromkeys(
        (
            "regexp_match",
            "regexp_matches",
            "regexp_split_to_array",
            "string_to_array",
            "array_length",
            "array_to_string",
            "cardinality",
        ),
        "tidegate has no array types",
    ),
    **dict.fromkeys(
        ("to_char", "to_date", "to_timestamp", "age", "justify_days", "justify_hours", "make_date"),
        "tidegate has no interval or formatting functions yet",
    ),
    **dict.fromkeys(
        (
            "jsonb_build_object",
            "jsonb_agg",
            "jsonb_array_elements",
            "to_jsonb",
            "json_build_object",
        ),
        "tidegate has no jsonb type",
    ),
    **dict.fromkeys(("md5", "sha256", "encode", "decode", "format", "quote_ident"), ""),
}
"""PostgreSQL functions tidegate does not have (refused as not supported, not unknown)."""

_NONDETERMINISTIC = frozenset(
    {
        "random",
        "rand",
        "now",
        "current_timestamp",
        "current_date",
        "clock_timestamp",
        "gen_random_uuid",
        "mz_now",
    }
)

# name -> arity -> (argument types, builder of the IR call from the coerced arguments)
_Builder = Callable[[list[ScalarExpr]], ScalarExpr]
_F, _I, _STR, _B = S.FLOAT64, S.INT64, S.STRING, S.BOOL


def _u(f: UnaryFunc) -> _Builder:
    return lambda a: CallUnary(f, a[0])


def _b(f: BinaryFunc) -> _Builder:
    return lambda a: CallBinary(f, a[0], a[1])


def _v(f: VariadicFunc) -> _Builder:
    return lambda a: CallVariadic(f, tuple(a))


_TABLE: dict[str, dict[int, tuple[tuple[ScalarType, ...], _Builder]]] = {
    "ceil": {1: ((_F,), _u(UnaryFunc.CEIL))},
    "ceiling": {1: ((_F,), _u(UnaryFunc.CEIL))},
    "floor": {1: ((_F,), _u(UnaryFunc.FLOOR))},
    "sign": {1: ((_F,), _u(UnaryFunc.SIGN))},
    "sqrt": {1: ((_F,), _u(UnaryFunc.SQRT))},
    "cbrt": {1: ((_F,), _u(UnaryFunc.CBRT))},
    "ln": {1: ((_F,), _u(UnaryFunc.LN))},
    "exp": {1: ((_F,), _u(UnaryFunc.EXP))},
    "log": {1: ((_F,), _u(UnaryFunc.LOG10)), 2: ((_F, _F), _b(BinaryFunc.LOG))},
    "log10": {1: ((_F,), _u(UnaryFunc.LOG10))},
    "power": {2: ((_F, _F), _b(BinaryFunc.POWER))},
    "pow": {2: ((_F, _F), _b(BinaryFunc.POWER))},
    "trunc": {1: ((_F,), _u(UnaryFunc.TRUNC)), 2: ((_F, _I), _b(BinaryFunc.TRUNC_DIGITS))},
    "lower": {1: ((_STR,), _u(UnaryFunc.LOWER))},
    "upper": {1: ((_STR,), _u(UnaryFunc.UPPER))},
    "length": {1: ((_STR,), _u(UnaryFunc.LENGTH))},
    "char_length": {1: ((_STR,), _u(UnaryFunc.LENGTH))},
    "character_length": {1: ((_STR,), _u(UnaryFunc.LENGTH))},
    "octet_length": {1: ((_STR,), _u(UnaryFunc.OCTET_LENGTH))},
    "ascii": {1: ((_STR,), _u(UnaryFunc.ASCII))},
    "chr": {1: ((_I,), _u(UnaryFunc.CHR))},
    "initcap": {1: ((_STR,), _u(UnaryFunc.INITCAP))},
    "reverse": {1: ((_STR,), _u(UnaryFunc.REVERSE))},
    "left": {2: ((_STR, _I), _b(BinaryFunc.LEFT))},
    "right": {2: ((_STR, _I), _b(BinaryFunc.RIGHT))},
    "repeat": {2: ((_STR, _I), _b(BinaryFunc.REPEAT))},
    "strpos": {2: ((_STR, _STR), _b(BinaryFunc.STRPOS))},
    "lpad": {
        2: ((_STR, _I), lambda a: CallVariadic(VariadicFunc.LPAD, (*a, Literal(" ", _STR)))),
        3: ((_STR, _I, _STR), _v(VariadicFunc.LPAD)),
    },
    "rpad": {
        2: ((_STR, _I), lambda a: CallVariadic(VariadicFunc.RPAD, (*a, Literal(" ", _STR)))),
        3: ((_STR, _I, _STR), _v(VariadicFunc.RPAD)),
    },
    "translate": {3: ((_STR, _STR, _STR), _v(VariadicFunc.TRANSLATE))},
    "split_part": {3: ((_STR, _STR, _I), _v(VariadicFunc.SPLIT_PART))},
    "replace": {3: ((_STR, _STR, _STR), _v(VariadicFunc.REPLACE))},
    "regexp_replace": {
        3: (
            (_STR, _STR, _STR),
            lambda a: CallVariadic(VariadicFunc.REGEXP_REPLACE, (*a, Literal("", _STR))),
        ),
        4: ((_STR, _STR, _STR, _STR), _v(VariadicFunc.REGEXP_REPLACE)),
    },
    "substring": {
        2: ((_STR, _I), _v(VariadicFunc.SUBSTRING)),
        3: ((_STR, _I, _I), _v(VariadicFunc.SUBSTRING)),
    },
    "substr": {
        2: ((_STR, _I), _v(VariadicFunc.SUBSTRING)),
        3: ((_STR, _I, _I), _v(VariadicFunc.SUBSTRING)),
    },
}


def _shown(te: TExpr) -> str:
    if te.type is None or te.literal is not None:
        return "unknown"
    return pg_type(te.scalar)


def _no_function(name: str, bound: list[TExpr], node: Any) -> SqlError:
    return _err(
        UndefinedFunction,
        f"function {name}({', '.join(_shown(t) for t in bound)}) does not exist",
        node,
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


def _fits(te: TExpr, want: ScalarType) -> bool:
    if te.type is None or te.literal is not None:
        return True
    s = te.scalar
    return s is want or (s, want) in _IMPLICIT_CASTS


_NUMERIC_OVERLOADS = frozenset({"ceil", "ceiling", "floor", "sign", "trunc"})
"""The functions whose numeric overload keeps a numeric argument numeric (the others take it
as a double precision)."""


def _decimal_literal(node: Any) -> bool:
    """A literal PostgreSQL reads as ``numeric`` (``2.5``, ``-1.5``, ``1e3``)."""
    while isinstance(node, exp.Neg | exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and not str(node.this).isdigit()


def bind_call(binder: _Binder, node: Any) -> TExpr | None:
    """The call ``node`` bound, or None if it is not a function this module knows."""

    call = call_of(node)
    if call is None:
        return None
    name, args = call
    if name == "mz_now":
        raise _err(
            UnsupportedSql,
            "call to mz_now() outside a temporal filter (it cannot be materialized: tidegate "
            "accepts mz_now() only compared with a bound in a conjunct of WHERE or HAVING, "
            "e.g. WHERE mz_now() <= ts + INTERVAL '1 hour')",
            node,
        )
    if name in _NONDETERMINISTIC:
        raise _err(
            UnsupportedSql,
            f"function {name}() (its result changes from one call to the next: a view of it "
            "cannot be maintained)",
            node,
        )
    if name == "concat" or name == "concat_ws":
        return _concat(binder, name, args, node)
    bound = [binder.bind(a) for a in args]
    if name == "abs" and len(bound) == 1:
        te = bound[0]
        if te.type is None:  # abs(NULL) is abs(double precision), as in PostgreSQL
            return TExpr(Literal(None, S.FLOAT64), ColumnType(S.FLOAT64, True))
        arg = _coerce(te, S.FLOAT64, args[0]) if te.literal is not None else te.expr
        t = S.FLOAT64 if te.literal is not None else te.scalar
        if t is None or not t.is_numeric:
            raise _no_function(name, bound, node)
        assert arg is not None
        return binder._make(arith(lambda a: CallUnary(UnaryFunc.ABS, a[0]), [(arg, t)], t), node)
    if name == "mod" and len(bound) == 2:
        return binder._binary(BinaryFunc.MOD, args[0], args[1], node)
    if name == "round" and len(bound) in (1, 2):
        if any(not _fits(t, S.FLOAT64 if k == 0 else S.INT64) for k, t in enumerate(bound)):
            raise _no_function(name, bound, node)
        numeric = bound[0].scalar is S.NUMERIC and bound[0].literal is None
        x = _coerce(bound[0], S.NUMERIC if numeric else S.FLOAT64, args[0])
        if len(bound) == 2:
            n = _coerce(bound[1], S.INT64, args[1])
            return binder._make(CallBinary(BinaryFunc.ROUND_DIGITS, x, n), node)
        # round(numeric) rounds halves away from zero, round(double precision) to even
        func = UnaryFunc.ROUND if numeric or _decimal_literal(args[0]) else UnaryFunc.RINT
        return binder._make(CallUnary(func, x), node)
    if name == "trunc" and bound and (bound[0].type is None or bound[0].literal is not None):
        # trunc(unknown) also fits PostgreSQL's trunc(macaddr)
        raise _err(AmbiguousFunction, f"function trunc({_shown(bound[0])}) is not unique", node)
    overloads = _TABLE.get(name)
    if overloads is None:
        why = _LACKING.get(name)
        if why is not None or not isinstance(node, exp.Anonymous):
            raise _err(UnsupportedSql, f"function {name}(){f' ({why})' if why else ''}", node)
        raise _err(UndefinedFunction, f"function {name} does not exist", node)
    sig = overloads.get(len(bound))
    if sig is None or not all(_fits(t, w) for t, w in zip(bound, sig[0], strict=True)):
        raise _no_function(name, bound, node)
    want = list(sig[0])
    if name in _NUMERIC_OVERLOADS and bound[0].scalar is S.NUMERIC and bound[0].literal is None:
        want[0] = S.NUMERIC
    exprs = [_coerce(t, w, a) for t, w, a in zip(bound, want, args, strict=True)]
    return binder._make(sig[1](exprs), node)


def output_text(te: TExpr) -> ScalarExpr:
    """A value as its type's output function writes it (what ``concat`` joins): a boolean is
    ``t`` or ``f``, anything else its cast to text."""
    if te.expr is None:
        return Literal(None, S.STRING)
    if te.scalar is S.STRING:
        return te.expr
    if te.scalar is S.BOOL:
        word = If(te.expr, Literal("t", S.STRING), Literal("f", S.STRING))
        return If(CallUnary(UnaryFunc.IS_NULL, te.expr), Literal(None, S.STRING), word)
    assert te.scalar is not None
    return cast_to(te.expr, te.scalar, S.STRING)


def _concat(binder: _Binder, name: str, args: list[Any], node: Any) -> TExpr:
    bound = [binder.bind(a) for a in args]
    if not bound or (name == "concat_ws" and len(bound) < 2):
        raise _no_function(name, bound, node)
    texts = tuple(output_text(t) for t in bound)
    func = VariadicFunc.CONCAT if name == "concat" else VariadicFunc.CONCAT_WS
    return binder._make(CallVariadic(func, texts), node)
