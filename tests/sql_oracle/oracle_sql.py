"""Plans translated to SQL and run on DuckDB: the oracle's side of the comparison.

A collection becomes a DuckDB table of its rows, columns ``c0 .. c{n-1}``, plus
``diff``, the row's multiplicity (a SQL bag cannot hold tidegate's negative
counts). Every operator is one SQL statement over its inputs' tables,
materialized into a temporary table and consolidated (grouped by every column,
multiplicities summed, zeros dropped). Where multiplicities are positive, each
translation is the SQL operator on the bag the table denotes: joins are joins,
a left join pads like ``LEFT JOIN``, ``Distinct`` is ``SELECT DISTINCT``,
``TopK`` is ``ROW_NUMBER()`` over the rows repeated ``diff`` times, aggregates
are SQL's aggregates weighted by ``diff``. Scalar expressions are SQL
expressions, with the differences listed in ``test_sql_oracle.py`` emulated
here.

Materializing every operator matters: SQL lets an engine skip an expression
whose value is not needed (a pruned column, a join whose other side is empty,
a pushed-down filter), while tidegate evaluates every expression of every
operator on every row that reaches it, and its errors are observable. For the
same reason DuckDB's optimizer is off: it may drop or reorder work. Within an
expression, the operands tidegate evaluates are evaluated, and no others:
DuckDB skips the other operand of an operator whose first one is a constant
NULL, and evaluates every operand of ``AND``/``OR``, so operands are bound
first (``list_transform([value], lambda x: ...)[1]``, a "let" evaluating
``value`` once) and short-circuits are spelled out with ``CASE``.

Errors are tidegate's, emulated: when an operator's statement fails, it is
re-run row by row; each row that fails contributes its multiplicity to the
error's category (division by zero, integer or float out of range, invalid
cast, ...) and is left out, the others go on. Errors flow to the output once
per path through the plan (a ``Let`` value read twice counts twice).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb

from tidegate.spec.frontier import Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    ArrangeBy,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    Constant,
    Distinct,
    Filter,
    Get,
    If,
    Join,
    JoinKind,
    Let,
    LetRef,
    Literal,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    ScalarExpr,
    ScalarType,
    Schema,
    Threshold,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
)
from tidegate.spec.plan.schema import INT64_MAX, INT64_MIN

__all__ = [
    "DuckOracle",
    "OracleResult",
    "category_of_tidegate_error",
]

S = ScalarType
Types = tuple[ScalarType, ...]

SQL_TYPE = {
    S.INT64: "BIGINT",
    S.FLOAT64: "DOUBLE",
    S.STRING: "VARCHAR",
    S.BOOL: "BOOLEAN",
    S.DATE: "DATE",
    S.TIMESTAMP: "TIMESTAMP",
}

TIME = "__TIME__"
"""Placeholder for the time in a ``Get``'s statement."""
IN = "__IN__"
"""Placeholder for the input table of an operator that evaluates expressions."""

# Error categories, the level at which the oracle's and tidegate's errors are compared.
DIV0, INT_RANGE, FLOAT_RANGE, BAD_CAST, SUBSTRING, LIKE_ESCAPE, BAD_ESCAPE, TS_RANGE = (
    "division by zero",
    "integer out of range",
    "float out of range",
    "invalid cast",
    "negative substring length",
    "LIKE pattern ends in the escape character",
    "invalid escape string",
    "timestamp out of range",
)

# -- error categories -----------------------------------------------------------------------


def category_of_tidegate_error(message: str) -> str:
    """The category of one of tidegate's evaluation error messages."""
    m = message.lower()
    if m.startswith("division by zero"):
        return DIV0
    if m.startswith("integer out of range"):
        return INT_RANGE
    if m.startswith("float out of range") or m.startswith("value out of range"):
        return FLOAT_RANGE
    if "is out of range for type double precision" in m:
        return FLOAT_RANGE
    if m.startswith("invalid input syntax") or m.startswith("timestamp with a time zone"):
        return BAD_CAST
    if m.startswith("timestamp out of range"):
        return TS_RANGE
    if "substring" in m:
        return SUBSTRING
    if m.startswith("invalid escape string"):
        return BAD_ESCAPE
    if "escape" in m:
        return LIKE_ESCAPE
    return f"unknown: {message}"


def _category_of_duckdb_error(err: Exception) -> str:
    """The category of a DuckDB error raised by one row."""
    m = str(err)
    for cat in (
        DIV0,
        INT_RANGE,
        FLOAT_RANGE,
        SUBSTRING,
        BAD_CAST,
        LIKE_ESCAPE,
        BAD_ESCAPE,
        TS_RANGE,
    ):
        if f"[{cat}]" in m:  # raised by the translation's error('[category]')
            return cat
    if "Division by zero" in m:
        return DIV0
    if isinstance(err, duckdb.OutOfRangeException) and "Overflow in" in m:
        return INT_RANGE  # +, -, *, //, unary - on BIGINT (float results are checked)
    if "Like pattern must not end with escape character" in m:
        return LIKE_ESCAPE
    raise OracleBug(f"DuckDB error the translation does not expect: {type(err).__name__}: {m}")


def pg_float8out(x: float) -> str:
    """PostgreSQL's text of a float8 (``extra_float_digits`` 1, its default): the fewest
    significant digits that read back as ``x``, positional for decimal exponents -4 to 14,
    else ``d.ddde+XX``. Written apart from tidegate's formatter: the digits come from the
    shortest ``%.Ne`` that round-trips."""
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    for p in range(17):
        sci = f"{x:.{p}e}"
        if float(sci) == x:
            break
    mant, exp_s = sci.split("e")
    e = int(exp_s)
    neg = mant.startswith("-")
    digits = mant.lstrip("-").replace(".", "").rstrip("0") or "0"
    sign = "-" if neg else ""
    if e < -4 or e >= 15:
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if e < 0 else '+'}{abs(e):02d}"
    if e < 0:
        return f"{sign}0.{'0' * (-e - 1)}{digits}"
    whole, frac = digits[: e + 1].ljust(e + 1, "0"), digits[e + 1 :]
    return f"{sign}{whole}{'.' + frac if frac else ''}"


_NAN = float("nan")


def _canonical(v: Any) -> Any:
    """A DuckDB value as tidegate holds it: every NaN is tidegate's one NaN object."""
    if type(v) is float and v != v:
        from tidegate.spec.plan.scalar_eval import NAN

        return NAN
    return v


class OracleBug(AssertionError):
    """The translation itself went wrong (not a disagreement)."""


def _raise(category: str, t: ScalarType) -> str:
    # typed: an untyped error() is a NULL to DuckDB's binder, which folds the call around it
    return f"CAST(error('[{category}]') AS {SQL_TYPE[t]})"


# -- the program ----------------------------------------------------------------------------


@dataclass
class Step:
    """One operator: ``CREATE TABLE table AS sql``.

    ``evaluates`` names the input table of an operator that evaluates scalar expressions
    (``sql`` then reads it as ``IN``), whose failing rows become errors.
    """

    table: str
    sql: str
    evaluates: str | None = None
    finalize: Callable[[list[tuple[Any, ...]]], tuple[list[tuple[Any, ...]], list[str]]] | None = (
        None
    )
    """For a Reduce: the rows of ``sql`` to the table's rows, and the error category of
    each group that is an error instead (a sum beyond its type)."""
    types: Types = ()


@dataclass
class Program:
    steps: list[Step]
    result: str
    types: Types
    error_paths: list[str]
    """The step of every error source, once per path from it to the output."""

    def text(self) -> str:
        out = []
        for s in self.steps:
            sql = s.sql.replace(IN, s.evaluates or IN)
            extra = " -- then exact aggregates in Python" if s.finalize else ""
            out.append(f"CREATE TEMP TABLE {s.table} AS {sql};{extra}")
        out.append(f"SELECT * FROM {self.result};")
        return "\n".join(out)


def _cols(n: int) -> str:
    return ", ".join(f"c{i}" for i in range(n))


def _consolidated(inner: str, n: int) -> str:
    if n == 0:
        return f"SELECT CAST(SUM(diff) AS BIGINT) AS diff FROM ({inner}) AS q HAVING SUM(diff) <> 0"
    cs = _cols(n)
    return (
        f"SELECT {cs}, CAST(SUM(diff) AS BIGINT) AS diff FROM ({inner}) AS q "
        f"GROUP BY {cs} HAVING SUM(diff) <> 0"
    )


def _str_lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_literal(v: Any, t: ScalarType) -> str:
    if v is None:
        return f"CAST(NULL AS {SQL_TYPE[t]})"
    if t is S.INT64:
        return f"CAST(({v}) AS BIGINT)"
    if t is S.FLOAT64:
        return f"CAST('{v!r}' AS DOUBLE)"
    if t is S.STRING:
        return _str_lit(v)
    if t is S.BOOL:
        return "TRUE" if v else "FALSE"
    if t is S.DATE:
        return f"DATE '{v.isoformat()}'"
    return f"TIMESTAMP '{v.isoformat(sep=' ')}'"


# ASCII whitespace (C's isspace), what SQL trims around a number, boolean or date.
_WS_CHARS = "chr(32) || chr(9) || chr(10) || chr(13) || chr(11) || chr(12)"
_WS = "[ \\t\\n\\r\\v\\f]*"
# PostgreSQL 15's int8 input: a sign and decimal digits, ASCII whitespace around
_INT_RE = f"{_WS}[+-]?[0-9]+{_WS}"
_FLOAT_RE = f"{_WS}[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?{_WS}"
# ... and float8's words for what is not a number, any case
_FLOAT_WORD_RE = f"{_WS}[+-]?([iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN]){_WS}"
# The date and timestamp literals both PostgreSQL and DuckDB read: YYYY-M-D, then optionally
# a space or T and HH:MM, HH:MM:SS or HH:MM:SS with 1-6 fraction digits (PostgreSQL rounds a
# 7th digit, DuckDB truncates it: tidegate refuses it), ASCII whitespace around.
_YMD = "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
_DATE_RE = f"{_WS}{_YMD}{_WS}"
_TS_RE = f"{_WS}{_YMD}([ T]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\\.[0-9]{{1,6}})?)?)?{_WS}"
# PostgreSQL's boolean input: 1/0 and the prefixes of true, yes, false, no (on, off: two
# letters at least), any ASCII case
_TRUE = ("t", "tr", "tru", "true", "y", "ye", "yes", "on", "1")
_FALSE = ("f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0")


class _Translator:
    def __init__(self, sources: Mapping[GlobalId, str]) -> None:
        self.sources = sources
        self.steps: list[Step] = []
        self.n_tables = 0

    def scalar(self, e: ScalarExpr, types: Types) -> tuple[str, ScalarType]:
        return _scalar(self, e, types)

    # -- tables

    def emit(
        self, sql: str, types: Types, evaluates: str | None = None, consolidate: bool = True
    ) -> str:
        self.n_tables += 1
        name = f"n{self.n_tables}"
        self.steps.append(
            Step(
                name,
                _consolidated(sql, len(types)) if consolidate else sql,
                evaluates,
                types=types,
            )
        )
        return name

    # -- relations: (table, column types, error sources)

    def rel(self, plan: Plan, lets: Mapping[str, _LetBinding]) -> tuple[str, Types, list[str]]:
        if isinstance(plan, Get):
            types = tuple(c.type.scalar for c in plan.schema.columns)
            n = len(types)
            sel = f"{_cols(n)}, diff" if n else "diff"
            sql = f"SELECT {sel} FROM {self.sources[plan.id]} WHERE time <= {TIME}"
            return self.emit(sql, types), types, []
        if isinstance(plan, Constant):
            types = tuple(c.type.scalar for c in plan.schema.columns)
            return self.constant(plan, types), types, []
        if isinstance(plan, LetRef):
            b = lets[plan.name]
            if b.table is None:
                b.table, b.types, b.errors = self.rel(b.value, b.env)
            assert b.types is not None and b.errors is not None
            return b.table, b.types, list(b.errors)
        if isinstance(plan, Let):
            binding = _LetBinding(plan.value, lets)
            return self.rel(plan.body, {**lets, plan.name: binding})
        if isinstance(plan, Union):
            parts = [self.rel(p, lets) for p in plan.inputs]
            types = parts[0][1]
            n = len(types)
            sel = f"{_cols(n)}, diff" if n else "diff"
            sql = " UNION ALL ".join(f"SELECT {sel} FROM {t}" for t, _, _ in parts)
            return self.emit(sql, types), types, [e for _, _, es in parts for e in es]
        if isinstance(plan, Join):
            return self.join(plan, lets)
        src, types, errs = self.rel(plan.input, lets)
        n = len(types)
        sel = f"{_cols(n)}, diff" if n else "diff"
        if isinstance(plan, Map):
            sql = IN
            for e in plan.exprs:
                x, t = self.scalar(e, types)
                frm = IN if sql == IN else f"({sql})"
                sql = f"SELECT *, {x} AS c{len(types)} FROM {frm} AS q"
                types = (*types, t)
            name = self.emit(sql, types, evaluates=src)
            return name, types, [*errs, name]
        if isinstance(plan, Filter):
            cond = "TRUE"
            for p in reversed(plan.predicates):
                x, _ = self.scalar(p, types)
                cond = f"CASE WHEN ({x}) IS NOT TRUE THEN FALSE ELSE {cond} END"
            name = self.emit(f"SELECT {sel} FROM {IN} WHERE {cond}", types, evaluates=src)
            return name, types, [*errs, name]
        if isinstance(plan, Project):
            out = tuple(types[i] for i in plan.columns)
            cols = ", ".join(f"c{i} AS c{j}" for j, i in enumerate(plan.columns))
            sql = f"SELECT {cols + ', ' if cols else ''}diff FROM {src}"
            return self.emit(sql, out), out, errs
        if isinstance(plan, Negate):
            neg = f"{_cols(n)}, -diff AS diff" if n else "-diff AS diff"
            return self.emit(f"SELECT {neg} FROM {src}", types), types, errs
        if isinstance(plan, Distinct):
            one = f"{_cols(n)}, CAST(1 AS BIGINT) AS diff" if n else "CAST(1 AS BIGINT) AS diff"
            return self.emit(f"SELECT DISTINCT {one} FROM {src} WHERE diff > 0", types), types, errs
        if isinstance(plan, Threshold):
            return self.emit(f"SELECT {sel} FROM {src} WHERE diff > 0", types), types, errs
        if isinstance(plan, ArrangeBy):
            return src, types, errs
        if isinstance(plan, TopK):
            return self.topk(plan, src, types), types, errs
        if isinstance(plan, Reduce):
            name, out = self.reduce(plan, src, types)
            return name, out, [*errs, name]
        raise OracleBug(f"not a plan: {plan!r}")

    def constant(self, plan: Constant, types: Types) -> str:
        n = len(types)
        if not plan.rows:
            nulls = ", ".join(f"CAST(NULL AS {SQL_TYPE[t]}) AS c{i}" for i, t in enumerate(types))
            return self.emit(
                f"SELECT {nulls + ', ' if nulls else ''}CAST(0 AS BIGINT) AS diff WHERE FALSE",
                types,
            )
        rows = ", ".join(
            "("
            + ", ".join([*(sql_literal(v, t) for v, t in zip(r, types, strict=True)), f"{d}"])
            + ")"
            for r, d in plan.rows
        )
        names = f"{_cols(n)}, diff" if n else "diff"
        return self.emit(f"SELECT * FROM (VALUES {rows}) AS v({names})", types)

    def join(self, plan: Join, lets: Mapping[str, _LetBinding]) -> tuple[str, Types, list[str]]:
        parts = [self.rel(p, lets) for p in plan.inputs]
        refs: list[str] = []
        types: list[ScalarType] = []
        for k, (_, ts, _) in enumerate(parts):
            refs.extend(f"t{k}.c{i}" for i in range(len(ts)))
            types.extend(ts)
        sel = ", ".join(f"{r} AS c{i}" for i, r in enumerate(refs))
        diff = " * ".join(f"t{k}.diff" for k in range(len(parts)))
        frm = ", ".join(f"{t} AS t{k}" for k, (t, _, _) in enumerate(parts))

        def conds(ref: Sequence[str]) -> str:
            # every two columns of a class equal (SQL's =: an int64 and a float64 as doubles)
            cs = [
                f"{ref[a]} = {ref[b]}"
                for cls in plan.equivalences
                for a, b in itertools.combinations(cls, 2)
            ]
            return " AND ".join(cs) or "TRUE"

        inner = f"SELECT {sel + ', ' if sel else ''}{diff} AS diff FROM {frm} WHERE {conds(refs)}"
        if plan.kind is JoinKind.INNER:
            errs = [e for _, _, es in parts for e in es]
            return self.emit(inner, tuple(types)), tuple(types), errs
        # LEFT: the inner join, plus each left row that no right key of positive multiplicity
        # matches, padded with NULLs (for inputs of positive multiplicities: SQL's LEFT JOIN);
        # RIGHT the mirror image, FULL both (SQL's RIGHT and FULL OUTER JOIN).
        (lt, ltypes, lerrs), (rt, rtypes, rerrs) = parts
        nl, nr = len(ltypes), len(rtypes)

        def unmatched(mine: int) -> str:
            # the rows of side `mine` (0 left, 1 right) matching no key of the other side
            tab, other = (lt, rt) if mine == 0 else (rt, lt)
            lo, hi = (nl, nl + nr) if mine == 0 else (0, nl)
            okeys = sorted({i - lo for cls in plan.equivalences for i in cls if lo <= i < hi})
            kcols = ", ".join(f"c{r}" for r in okeys)
            keys = f"SELECT {kcols} FROM {other} GROUP BY {kcols} HAVING SUM(diff) > 0"
            refs = [
                (f"t0.c{i}" if mine == 0 else f"k.c{i}")
                if i < nl
                else (f"k.c{i - nl}" if mine == 0 else f"t0.c{i - nl}")
                for i in range(nl + nr)
            ]
            cols = []
            for i, t in enumerate(types):
                mine_col = (i < nl) == (mine == 0)
                if mine_col:
                    cols.append(f"t0.c{i if mine == 0 else i - nl} AS c{i}")
                else:
                    cols.append(f"CAST(NULL AS {SQL_TYPE[t]}) AS c{i}")
            return (
                f"SELECT {', '.join([*cols, 't0.diff AS diff'])} FROM {tab} AS t0 "
                f"WHERE NOT EXISTS (SELECT 1 FROM ({keys}) AS k WHERE {conds(refs)})"
            )

        sql = inner
        # Errors as the documented lowering carries them: inner + pad(left - semijoin) reads
        # the left input three times and the right one twice (the mirror image for RIGHT;
        # FULL reads each four times).
        errs = list(lerrs) + list(rerrs)
        if plan.kind in (JoinKind.LEFT, JoinKind.FULL):
            sql += f" UNION ALL {unmatched(0)}"
            errs += lerrs * 2 + rerrs
        if plan.kind in (JoinKind.RIGHT, JoinKind.FULL):
            sql += f" UNION ALL {unmatched(1)}"
            errs += rerrs * 2 + lerrs
        return self.emit(sql, tuple(types)), tuple(types), errs

    def topk(self, plan: TopK, src: str, types: Types) -> str:
        n = len(types)
        cs = _cols(n) if n else "0 AS dummy"
        part = (
            f"PARTITION BY {', '.join(f'c{k}' for k in plan.group_key)} " if plan.group_key else ""
        )
        order = [
            f"c{o.column} {'DESC' if o.desc else 'ASC'} NULLS {'LAST' if o.nulls_last else 'FIRST'}"
            for o in plan.order_by
        ]
        order += [f"c{i} ASC NULLS FIRST" for i in range(n)]  # ties: the whole row, ascending
        over = f"{part}{'ORDER BY ' + ', '.join(order) if order else ''}"
        repeated = f"SELECT {cs} FROM {src} AS t, range(t.diff) AS r(i) WHERE t.diff > 0"
        ranked = f"SELECT {cs if n else 'dummy'}, ROW_NUMBER() OVER ({over}) AS rn FROM ({repeated}) AS e"
        window = f"rn > {plan.offset}"
        if plan.limit is not None:
            window += f" AND rn <= {plan.offset + plan.limit}"
        if n:
            sql = (
                f"SELECT {_cols(n)}, COUNT(*) AS diff FROM ({ranked}) AS k WHERE {window} "
                f"GROUP BY {_cols(n)}"
            )
        else:
            sql = f"SELECT COUNT(*) AS diff FROM ({ranked}) AS k WHERE {window}"
        return self.emit(sql, types)

    def reduce(self, plan: Reduce, src: str, types: Types) -> tuple[str, Types]:
        key = plan.group_key
        keycols = [f"c{k}" for k in key]
        out_types = [types[k] for k in key]
        windows: dict[int, str] = {}
        aggs: list[str] = []
        post: list[Callable[[Any], tuple[Any, str | None]] | None] = []
        for a in plan.aggregates:
            if a.column is None:
                aggs.append("SUM(diff)")
                out_types.append(S.INT64)
                post.append(None)
                continue
            c = f"c{a.column}"
            vt = windows.setdefault(a.column, f"vt{a.column}")
            t = types[a.column]
            f = a.func
            if f is AggFunc.COUNT:
                aggs.append(
                    f"COUNT(DISTINCT {c}) FILTER (WHERE {vt} > 0)"
                    if a.distinct
                    else f"COALESCE(SUM(diff) FILTER (WHERE {c} IS NOT NULL), 0)"
                )
                out_types.append(S.INT64)
                post.append(None)
            elif f in (AggFunc.MIN, AggFunc.MAX, AggFunc.BOOL_AND, AggFunc.BOOL_OR):
                # over the values of positive total multiplicity (BOOL_AND/OR: min/max of bools)
                aggs.append(f"{f.value.upper()}({c}) FILTER (WHERE {vt} > 0)")
                out_types.append(t)
                post.append(None)
            elif f is AggFunc.STRING_AGG:
                sep = _str_lit(a.separator or "")
                if a.distinct:
                    # SQL leaves the order open: tidegate sorts by code point, as ORDER BY does
                    aggs.append(
                        f"string_agg(DISTINCT {c}, {sep} ORDER BY {c}) FILTER (WHERE {vt} > 0)"
                    )
                else:
                    # each value repeated its total multiplicity (the table holds signed diffs)
                    each = f"LIST(DISTINCT {{'v': {c}, 'n': {vt}}}) FILTER (WHERE {vt} > 0 AND {c} IS NOT NULL)"
                    aggs.append(
                        f"array_to_string(flatten(list_transform(list_sort({each}), "
                        f"lambda x: list_resize([x.v], x.n, x.v))), {sep})"
                    )
                out_types.append(S.STRING)
                post.append(None)
            elif f is AggFunc.SUM and t is S.INT64:
                aggs.append(
                    f"SUM(DISTINCT CAST({c} AS HUGEINT)) FILTER (WHERE {vt} > 0)"
                    if a.distinct
                    else f"SUM(CAST({c} AS HUGEINT) * diff)"
                )
                out_types.append(S.INT64)
                post.append(_int_sum)
            else:
                # float sums and every avg: exact, rounded once (computed in Python below)
                aggs.append(
                    f"LIST(DISTINCT {c}) FILTER (WHERE {vt} > 0 AND {c} IS NOT NULL)"
                    if a.distinct
                    else f"LIST({{'v': {c}, 'c': diff}}) FILTER (WHERE {c} IS NOT NULL)"
                )
                out_types.append(S.FLOAT64 if f is AggFunc.AVG else t)
                post.append(_exact_avg if f is AggFunc.AVG else _exact_float_sum)
        over = [
            f"SUM(diff) OVER (PARTITION BY {', '.join([*keycols, f'c{col}'])}) AS {name}"
            for col, name in windows.items()
        ]
        inner = f"SELECT *{''.join(', ' + o for o in over)} FROM {src}"
        sel = [*(f"{k} AS o{i}" for i, k in enumerate(keycols)), *aggs]
        sql = f"SELECT {', '.join(sel)} FROM ({inner}) AS r"
        sql += f" GROUP BY {', '.join(keycols)}" if keycols else " HAVING COUNT(*) > 0"
        nkey = len(key)
        posts = [None] * nkey + post

        def finalize(
            raw: list[tuple[Any, ...]],
        ) -> tuple[list[tuple[Any, ...]], list[str]]:
            rows, errors = [], []
            for r in raw:
                vals = []
                failed = None
                for v, p in zip(r, posts, strict=True):
                    if p is None:
                        vals.append(v)
                        continue
                    value, err = p(v)
                    if err is not None and failed is None:
                        failed = err
                    vals.append(value)
                if failed is not None:
                    errors.append(failed)
                else:
                    rows.append((*vals, 1))
            return rows, errors

        self.n_tables += 1
        name = f"n{self.n_tables}"
        out = tuple(out_types)
        self.steps.append(Step(name, sql, finalize=finalize, types=out))
        return name, out


def _int_sum(v: Any) -> tuple[Any, str | None]:
    if v is None or INT64_MIN <= v <= INT64_MAX:
        return v, None
    return None, INT_RANGE


def _pairs(v: Any) -> list[tuple[Any, int]]:
    if not v:
        return []
    return [(x["v"], x["c"]) if isinstance(x, dict) else (x, 1) for x in v]


def _special(pairs: list[tuple[Any, int]]) -> float | None:
    """A float sum's value when it is not finite: NaN with a NaN (counted) or both
    infinities, else the infinity in it; None when every value is finite."""
    nan = sum(c for x, c in pairs if x != x)
    pos = sum(c for x, c in pairs if x == math.inf)
    neg = sum(c for x, c in pairs if x == -math.inf)
    if nan or (pos and neg):
        return _canonical(_NAN)
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return None


def _exact_float_sum(v: Any) -> tuple[Any, str | None]:
    pairs = _pairs(v)
    if not pairs:
        return None, None
    special = _special(pairs)
    if special is not None:
        return special, None
    total = sum((Fraction(x) * c for x, c in pairs), Fraction(0))
    try:
        return float(total), None
    except OverflowError:
        return None, FLOAT_RANGE


def _exact_avg(v: Any) -> tuple[Any, str | None]:
    pairs = _pairs(v)
    count = sum(c for _, c in pairs)
    if not pairs or count == 0:
        return None, None
    special = _special(pairs)
    if special is not None:
        return special, None
    total = sum((Fraction(x) * c for x, c in pairs), Fraction(0))
    try:
        return float(total / count), None
    except OverflowError:
        return None, FLOAT_RANGE


@dataclass
class _LetBinding:
    value: Plan
    env: Mapping[str, _LetBinding]
    table: str | None = None
    types: Types | None = None
    errors: list[str] | None = None


# -- scalars -------------------------------------------------------------------------------


class _Scalars:
    """Scalar expressions as SQL, each evaluated the way tidegate documents it."""

    def __init__(self) -> None:
        self.n_vars = 0

    def var(self) -> str:
        self.n_vars += 1
        return f"_v{self.n_vars}"

    def bind(self, value: str, body: Callable[[str], str]) -> str:
        """``body(x)`` with ``x`` the value of ``value``, computed once (a one-element lambda)."""
        x = self.var()
        return f"list_transform([{value}], lambda {x}: {body(x)})[1]"


def _scalar(tr: _Translator, e: ScalarExpr, types: Types) -> tuple[str, ScalarType]:
    sc = _SCALARS
    if isinstance(e, ColumnRef):
        return f"c{e.index}", types[e.index]
    if isinstance(e, Literal):
        return sql_literal(e.value, e.type), e.type
    if isinstance(e, CallUnary):
        x, t = _scalar(tr, e.expr, types)
        f = e.func
        if f is UnaryFunc.NOT:
            return f"(NOT {x})", S.BOOL
        if f is UnaryFunc.NEG:
            if t is S.INT64:
                # 0 - x: DuckDB negates a constant INT64_MIN without the overflow error
                return f"(CAST(0 AS BIGINT) - {x})", t
            return f"(- {x})", t
        if f is UnaryFunc.IS_NULL:
            return f"({x} IS NULL)", S.BOOL
        if f is UnaryFunc.LOWER:
            # full case mapping (Unicode SpecialCasing): İ lowers to i + combining dot
            return f"lower(replace({x}, 'İ', 'i̇'))", S.STRING
        if f is UnaryFunc.UPPER:
            # full case mapping: ß uppers to SS, ﬁ to FI (DuckDB: ẞ, ﬁ)
            return f"upper(replace(replace({x}, 'ß', 'SS'), 'ﬁ', 'FI'))", S.STRING
        if f is UnaryFunc.ABS:
            if t is S.INT64:
                # DuckDB's abs(INT64_MIN) fails as a conversion, not as an overflow
                return sc.bind(
                    x,
                    lambda v: (
                        f"CASE WHEN {v} = {INT64_MIN} THEN {_raise(INT_RANGE, t)} ELSE abs({v}) END"
                    ),
                ), t
            return f"abs({x})", t
        if f is UnaryFunc.ROUND:
            # DuckDB's round(DOUBLE) rounds halves away from zero, as tidegate documents
            return (x if t is S.INT64 else f"round({x})"), t
        if f in (UnaryFunc.TRIM, UnaryFunc.LTRIM, UnaryFunc.RTRIM):
            return f"{f.value}({x})", S.STRING  # spaces only, as SQL's default
        return f"length({x})", S.INT64
    if isinstance(e, CallBinary):
        a, at = _scalar(tr, e.left, types)
        b, bt = _scalar(tr, e.right, types)
        f = e.func
        # Both operands are packed into a struct first, so both are evaluated (tidegate
        # evaluates both, then returns NULL if either is): DuckDB skips the right operand of
        # an operator whose left one is a constant NULL vector, and with it the right
        # operand's errors.
        packed = f"{{'a': {a}, 'b': {b}}}"
        if f is BinaryFunc.LIKE:
            # a pattern ending in an unpaired escape is an error on every evaluation (tidegate's
            # documented choice; PostgreSQL and DuckDB raise only when matching reaches it)
            return (
                sc.bind(
                    packed,
                    lambda p: (
                        f"CASE WHEN {p}.a IS NULL OR {p}.b IS NULL THEN NULL "
                        f"WHEN regexp_matches({p}.b, '(^|[^\\\\])(\\\\\\\\)*\\\\$') "
                        f"THEN {_raise(LIKE_ESCAPE, S.BOOL)} "
                        f"ELSE ({p}.a LIKE {p}.b ESCAPE '\\') END"
                    ),
                ),
                S.BOOL,
            )
        if f is BinaryFunc.ILIKE:
            return _like(packed, "ILIKE", "\\"), S.BOOL
        if f is BinaryFunc.CONCAT:
            return sc.bind(packed, lambda p: f"({p}.a || {p}.b)"), S.STRING
        if f in (BinaryFunc.ADD_MS, BinaryFunc.SUB_MS):
            sign = "+" if f is BinaryFunc.ADD_MS else "-"

            def shifted(p: str) -> str:
                # exact microseconds in HUGEINT; tidegate's timestamps span years 1 to 9999
                us = f"(CAST(epoch_us(CAST({p}.a AS TIMESTAMP)) AS HUGEINT) {sign} CAST({p}.b AS HUGEINT) * 1000)"
                return sc.bind(
                    us,
                    lambda u: (
                        f"CASE WHEN {u} IS NULL THEN NULL "
                        f"WHEN {u} BETWEEN {_TS_MIN_US} AND {_TS_MAX_US} "
                        f"THEN make_timestamp(CAST({u} AS BIGINT)) "
                        f"ELSE {_raise(TS_RANGE, S.TIMESTAMP)} END"
                    ),
                )

            return sc.bind(packed, shifted), S.TIMESTAMP
        cmp = {
            BinaryFunc.EQ: "=",
            BinaryFunc.NE: "<>",
            BinaryFunc.LT: "<",
            BinaryFunc.LE: "<=",
            BinaryFunc.GT: ">",
            BinaryFunc.GE: ">=",
        }
        if f in cmp:
            # an int64 against a float64: SQL's (and DuckDB's) comparison as doubles
            return sc.bind(packed, lambda p: f"({p}.a {cmp[f]} {p}.b)"), S.BOOL
        op = {
            BinaryFunc.ADD: "+",
            BinaryFunc.SUB: "-",
            BinaryFunc.MUL: "*",
            BinaryFunc.DIV: "//",
            BinaryFunc.MOD: "%",
        }[f]
        if at is S.INT64 and bt is S.INT64:
            # BIGINT arithmetic: overflow and x // 0, x % 0 raise; // truncates toward zero
            # and % takes the dividend's sign, as tidegate documents
            return sc.bind(packed, lambda p: f"({p}.a {op} {p}.b)"), S.INT64
        fop = "/" if f is BinaryFunc.DIV else op

        def body(p: str) -> str:
            r = f"({p}.a {fop} {p}.b)"
            a_, b_ = f"CAST({p}.a AS DOUBLE)", f"CAST({p}.b AS DOUBLE)"
            if f is BinaryFunc.DIV:  # NaN / 0 is NaN
                zero = f"WHEN {p}.b = 0 AND NOT isnan({a_}) THEN {_raise(DIV0, S.FLOAT64)} "
            elif f is BinaryFunc.MOD:
                zero = f"WHEN {p}.b = 0 THEN {_raise(DIV0, S.FLOAT64)} "
            else:
                zero = ""
            # PostgreSQL's float8 checks: an infinity of finite operands overflows; a zero
            # product or quotient of non-zero (finite divisor) operands underflows
            under = (
                f"WHEN {r} = 0 AND {p}.a <> 0 AND {p}.b <> 0 AND NOT isinf({b_}) "
                f"THEN {_raise(FLOAT_RANGE, S.FLOAT64)} "
                if f in (BinaryFunc.MUL, BinaryFunc.DIV)
                else ""
            )
            return (
                f"CASE WHEN {p}.a IS NULL OR {p}.b IS NULL THEN NULL {zero}"
                f"WHEN isinf({r}) AND isfinite({a_}) AND isfinite({b_}) "
                f"THEN {_raise(FLOAT_RANGE, S.FLOAT64)} {under}ELSE {r} END"
            )

        return sc.bind(packed, body), S.FLOAT64
    if isinstance(e, CallVariadic):
        args = [_scalar(tr, x, types) for x in e.exprs]
        f = e.func
        if f in (VariadicFunc.AND, VariadicFunc.OR):
            stop, go = ("FALSE", "TRUE") if f is VariadicFunc.AND else ("TRUE", "FALSE")

            def chain(i: int, seen: list[str]) -> str:
                def body(x: str) -> str:
                    if i == len(args) - 1:
                        nulls = " OR ".join(f"{v} IS NULL" for v in [*seen, x])
                        return f"CASE WHEN {x} IS {stop} THEN {stop} WHEN {nulls} THEN NULL ELSE {go} END"
                    return (
                        f"CASE WHEN {x} IS {stop} THEN {stop} ELSE {chain(i + 1, [*seen, x])} END"
                    )

                return sc.bind(args[i][0], body)

            return chain(0, []), S.BOOL
        if f is VariadicFunc.COALESCE:
            return f"COALESCE({', '.join(x for x, _ in args)})", args[0][1]
        if f is VariadicFunc.CONCAT:
            return f"concat({', '.join(x for x, _ in args)})", S.STRING
        if f is not VariadicFunc.SUBSTRING:
            return _variadic(e, args)
        # SUBSTRING(s, start[, len]): PostgreSQL's, positions from 1, start may be < 1
        if len(args) == 2:
            return (
                sc.bind(
                    f"{{'s': {args[0][0]}, 'a': {args[1][0]}}}",
                    lambda p: f"substring({p}.s, LEAST(GREATEST({p}.a, 1), length({p}.s) + 1))",
                ),
                S.STRING,
            )

        def sub3(p: str) -> str:
            # characters [max(a, 1), a + n) of s, 1-based; clamped to s, as DuckDB refuses
            # offsets beyond 2^32
            count = (
                f"CAST(LEAST(GREATEST(CAST({p}.a AS HUGEINT) + {p}.n - GREATEST({p}.a, 1), 0), "
                f"length({p}.s)) AS BIGINT)"
            )
            start = f"LEAST(GREATEST({p}.a, 1), length({p}.s) + 1)"
            return (
                f"CASE WHEN {p}.s IS NULL OR {p}.a IS NULL OR {p}.n IS NULL THEN NULL "
                f"WHEN {p}.n < 0 THEN {_raise(SUBSTRING, S.STRING)} "
                f"ELSE substring({p}.s, {start}, {count}) END"
            )

        packed = f"{{'s': {args[0][0]}, 'a': {args[1][0]}, 'n': {args[2][0]}}}"
        return sc.bind(packed, sub3), S.STRING
    if isinstance(e, If):
        c, _ = _scalar(tr, e.cond, types)
        a, t = _scalar(tr, e.then, types)
        b, _ = _scalar(tr, e.els, types)
        return f"CASE WHEN {c} THEN {a} ELSE {b} END", t
    if isinstance(e, Cast):
        x, t = _scalar(tr, e.expr, types)
        return _cast(x, t, e.to), e.to
    raise OracleBug(f"not a scalar expression: {e!r}")


_EPOCH = dt.datetime(1970, 1, 1)
_TS_MIN_US = (dt.datetime.min - _EPOCH) // dt.timedelta(microseconds=1)
_TS_MAX_US = (dt.datetime.max - _EPOCH) // dt.timedelta(microseconds=1)


def _like(packed: str, op: str, escape: str) -> str:
    """``packed.a op packed.b ESCAPE escape`` (``escape`` a constant): NULL if either is
    NULL, an error if the escape is longer than one character or the pattern ends in an
    unpaired escape, on every evaluation (tidegate's documented choice; PostgreSQL and
    DuckDB raise only when matching reaches it)."""
    if len(escape) > 1:
        # DuckDB refuses it when binding the statement; tidegate on each non-NULL row
        return _SCALARS.bind(
            packed,
            lambda p: (
                f"CASE WHEN {p}.a IS NULL OR {p}.b IS NULL THEN NULL ELSE {_raise(BAD_ESCAPE, S.BOOL)} END"
            ),
        )
    if escape:
        e = re.escape(escape).replace("'", "''")
        ends = f"WHEN regexp_matches({{p}}.b, '(^|[^{e}])({e}{e})*{e}$') THEN {_raise(LIKE_ESCAPE, S.BOOL)} "
    else:
        ends = ""
    esc = _str_lit(escape)

    def match(p: str) -> str:
        if op == "LIKE":
            return f"({p}.a LIKE {p}.b ESCAPE {esc})"
        if escape.lower() == escape.upper():
            # lower-casing neither makes nor unmakes an uncased escape character
            return f"(lower({p}.a) LIKE lower({p}.b) ESCAPE {esc})"
        # A cased escape (a letter): ILIKE as PostgreSQL (and tidegate) have it, the escape
        # matched as written, then both sides lower-cased (PostgreSQL rewrites the pattern to
        # backslash escapes first; DuckDB lower-cases the escape character too). Rewritten
        # here the same way, with two private-use characters standing for a literal
        # backslash and for an escape while the pattern is lower-cased.
        lit_bs, mark = "\ue001", "\ue000"
        e = re.escape(escape).replace("'", "''")
        protected = f"replace({p}.b, '\\', '{lit_bs}')"
        marked = f"regexp_replace({protected}, '{e}(.)', '{mark}\\1', 'gs')"
        back = (
            f"replace(replace(replace(lower({marked}), '{mark}{lit_bs}', '\\\\'), "
            f"'{lit_bs}', '\\\\'), '{mark}', '\\')"
        )
        return f"(lower({p}.a) LIKE {back} ESCAPE '\\')"

    return _SCALARS.bind(
        packed,
        lambda p: (
            f"CASE WHEN {p}.a IS NULL OR {p}.b IS NULL THEN NULL "
            + ends.replace("{p}", p)
            + f"ELSE {match(p)} END"
        ),
    )


def _variadic(e: CallVariadic, args: list[tuple[str, ScalarType]]) -> tuple[str, ScalarType]:
    """greatest, least, nullif, replace, LIKE/ILIKE ... ESCAPE, date_trunc and extract."""
    sc = _SCALARS
    f = e.func
    # every argument evaluated once, first (a struct), as tidegate evaluates them all
    packed = "{" + ", ".join(f"'a{k}': {x}" for k, (x, _) in enumerate(args)) + "}"
    if f in (VariadicFunc.GREATEST, VariadicFunc.LEAST):
        # DuckDB's greatest/least skip NULLs, NULL only if all are: SQL's (and tidegate's)
        fn = f.value
        return sc.bind(
            packed, lambda p: f"{fn}({', '.join(f'{p}.a{k}' for k in range(len(args)))})"
        ), args[0][1]
    if f is VariadicFunc.NULLIF:
        # = as SQL compares: an int64 against a float64 as doubles; the first argument's type
        return sc.bind(
            packed, lambda p: f"CASE WHEN {p}.a0 = {p}.a1 THEN NULL ELSE {p}.a0 END"
        ), args[0][1]
    if f is VariadicFunc.REPLACE:
        return sc.bind(packed, lambda p: f"replace({p}.a0, {p}.a1, {p}.a2)"), S.STRING
    if f in (VariadicFunc.LIKE_ESCAPE, VariadicFunc.ILIKE_ESCAPE):
        esc = e.exprs[2]
        if not isinstance(esc, Literal) or esc.value is None:
            raise OracleBug(f"the generator makes constant escapes only: {esc!r}")
        op = "LIKE" if f is VariadicFunc.LIKE_ESCAPE else "ILIKE"
        two = f"{{'a': {args[0][0]}, 'b': {args[1][0]}}}"
        return _like(two, op, esc.value), S.BOOL
    word = e.exprs[0]
    if not isinstance(word, Literal):
        raise OracleBug(f"{f.value}() of a non-literal: {word!r}")
    x = args[1][0]
    if f is VariadicFunc.DATE_TRUNC:
        return f"date_trunc({_str_lit(word.value)}, {x})", S.TIMESTAMP
    field = word.value.lower()
    if field == "epoch":
        # DuckDB: the microseconds as DOUBLE, divided by 10^6, as tidegate documents
        return f"CAST(epoch_us(CAST({x} AS TIMESTAMP)) AS DOUBLE) / 1000000.0", S.FLOAT64
    # BIGINT (DuckDB binds a constant NULL's extract to DOUBLE)
    return f"CAST(extract({field} FROM {x}) AS BIGINT)", S.INT64


def _cast(x: str, frm: ScalarType, to: ScalarType) -> str:
    sc = _SCALARS
    if frm is to:
        return x
    if to is S.STRING:
        if frm is S.FLOAT64:
            return f"pg_float8out({x})"  # PostgreSQL's text of a float8 (a function of ours)
        return f"CAST({x} AS VARCHAR)"  # timestamps: both trim the fraction's zeros
    if frm is S.STRING:
        return sc.bind(x, lambda v: _from_string(v, to))
    if frm is S.FLOAT64 and to is S.INT64:
        # tidegate rounds half to even (Python's round); DuckDB's cast rounds half away
        return sc.bind(
            f"round_even({x}, 0)",
            lambda v: (
                f"COALESCE(TRY_CAST({v} AS BIGINT), CASE WHEN {v} IS NOT NULL "
                f"THEN {_raise(INT_RANGE, S.INT64)} END)"
            ),
        )
    return f"CAST({x} AS {SQL_TYPE[to]})"


def _from_string(v: str, to: ScalarType) -> str:
    sc = _SCALARS
    trimmed = f"trim({v}, {_WS_CHARS})"
    bad = _raise(BAD_CAST, to)
    if to is S.INT64:
        # decimal only (PostgreSQL 15): DuckDB's cast, once the syntax is checked
        decimal = f"COALESCE(TRY_CAST({trimmed} AS BIGINT), {_raise(INT_RANGE, S.INT64)})"
        return (
            f"CASE WHEN {v} IS NULL THEN NULL WHEN regexp_full_match({v}, '{_INT_RE}') "
            f"THEN {decimal} ELSE {bad} END"
        )
    if to is S.FLOAT64:
        # NaN and infinities are values; a finite number beyond float64, or one that rounds
        # to zero, is out of range (PostgreSQL's float8in)
        rng = _raise(FLOAT_RANGE, S.FLOAT64)
        convert = sc.bind(
            f"CAST({trimmed} AS DOUBLE)",
            lambda f: (
                f"CASE WHEN isinf({f}) THEN {rng} WHEN {f} = 0 AND regexp_matches("
                f"regexp_replace({trimmed}, '[eE].*$', ''), '[1-9]') THEN {rng} ELSE {f} END"
            ),
        )
        return (
            f"CASE WHEN {v} IS NULL THEN NULL WHEN regexp_full_match({v}, '{_FLOAT_RE}') "
            f"THEN {convert} WHEN regexp_full_match({v}, '{_FLOAT_WORD_RE}') "
            f"THEN CAST({trimmed} AS DOUBLE) ELSE {bad} END"
        )
    if to is S.BOOL:
        low = f"lower({trimmed})"
        trues = ", ".join(f"'{w}'" for w in _TRUE)
        falses = ", ".join(f"'{w}'" for w in _FALSE)
        return (
            f"CASE WHEN {v} IS NULL THEN NULL WHEN {low} IN ({trues}) "
            f"THEN TRUE WHEN {low} IN ({falses}) THEN FALSE ELSE {bad} END"
        )
    regex = _DATE_RE if to is S.DATE else _TS_RE
    target = SQL_TYPE[to]
    # year 0 exists in DuckDB, not in tidegate's value domain (Python's date)
    return (
        f"CASE WHEN {v} IS NULL THEN NULL WHEN regexp_full_match({v}, '{regex}') "
        f"AND NOT starts_with({trimmed}, '0000') "
        f"THEN COALESCE(TRY_CAST({trimmed} AS {target}), {bad}) ELSE {bad} END"
    )


_SCALARS = _Scalars()


def translate(plan: Plan, sources: Mapping[GlobalId, str]) -> Program:
    tr = _Translator(sources)
    table, types, errors = tr.rel(plan, {})
    return Program(tr.steps, table, types, errors)


# -- running it -----------------------------------------------------------------------------


@dataclass
class OracleResult:
    """The oracle's answer at one time: rows with multiplicities and error categories."""

    rows: dict[tuple[Any, ...], int]
    errors: dict[str, int]
    signed_errors: bool = False
    """Some failing row had a negative multiplicity: tidegate may cancel errors by message,
    which categories cannot follow, so errors are then not compared."""


class DuckOracle:
    """A case's inputs in DuckDB and its plan's translation, evaluated at any time."""

    def __init__(
        self,
        plan: Plan,
        inputs: Mapping[GlobalId, Schema],
        updates: Mapping[GlobalId, Sequence[Update]],
    ) -> None:
        self.con = duckdb.connect()
        self.con.create_function(
            "pg_float8out", pg_float8out, ["DOUBLE"], "VARCHAR", side_effects=False
        )
        self.con.execute("PRAGMA disable_optimizer")
        self.con.execute("SET threads TO 1")
        sources = {}
        for k, (gid, schema) in enumerate(inputs.items()):
            name = f"src{k}"
            sources[gid] = name
            cols = [f"c{i} {SQL_TYPE[c.type.scalar]}" for i, c in enumerate(schema.columns)]
            self.con.execute(
                f"CREATE TABLE {name} ({', '.join([*cols, 'time BIGINT', 'diff BIGINT'])})"
            )
            ups = updates.get(gid, ())
            if ups:
                marks = ", ".join("?" for _ in range(schema.arity + 2))
                self.con.executemany(
                    f"INSERT INTO {name} VALUES ({marks})", [(*r, t, d) for r, t, d in ups]
                )
        self.program = translate(plan, sources)
        self._cache: dict[int, OracleResult] = {}
        self._types_checked = False

    def close(self) -> None:
        self.con.close()

    def at(self, time: int) -> OracleResult:
        if time not in self._cache:
            self._cache[time] = self._run(time)
        return self._cache[time]

    def _run(self, time: int) -> OracleResult:
        own: dict[str, dict[str, int]] = {}
        signed = False
        for step in self.program.steps:
            sql = step.sql.replace(TIME, str(time))
            if step.finalize is not None:
                raw = self.con.execute(sql).fetchall()
                rows, errs = step.finalize(raw)
                self._create(step.table, step.types, rows)
                own[step.table] = {}
                for cat in errs:
                    own[step.table][cat] = own[step.table].get(cat, 0) + 1
                continue
            if step.evaluates is None:
                self.con.execute(f"CREATE OR REPLACE TEMP TABLE {step.table} AS {sql}")
                continue
            try:
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {step.table} AS {sql.replace(IN, step.evaluates)}"
                )
                continue
            except duckdb.Error:
                pass
            # Some row fails: find which, one at a time; they become errors, the rest go on.
            errors: dict[str, int] = {}
            ok: list[int] = []
            for rowid, diff in self.con.execute(
                f"SELECT rowid, diff FROM {step.evaluates}"
            ).fetchall():
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE __one AS SELECT * FROM {step.evaluates} "
                    f"WHERE rowid = {rowid}"
                )
                try:
                    self.con.execute(sql.replace(IN, "__one")).fetchall()
                    ok.append(rowid)
                except duckdb.Error as err:
                    cat = _category_of_duckdb_error(err)
                    errors[cat] = errors.get(cat, 0) + diff
                    signed = signed or diff < 0
            keep = ", ".join(map(str, ok)) or "NULL"
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE __ok AS SELECT * FROM {step.evaluates} "
                f"WHERE rowid IN ({keep})"
            )
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {step.table} AS {sql.replace(IN, '__ok')}"
            )
            own[step.table] = {c: n for c, n in errors.items() if n}
        if not self._types_checked:
            for step in self.program.steps:
                self._check_types(step)
            self._types_checked = True
        n = len(self.program.types)
        result = self.con.execute(f"SELECT * FROM {self.program.result}").fetchall()
        rows = {tuple(_canonical(v) for v in r[:n]): int(r[n]) for r in result}
        if len(rows) != len(result):
            raise OracleBug(f"result table {self.program.result} not consolidated: {result}")
        total: dict[str, int] = {}
        for src in self.program.error_paths:
            for cat, c in own.get(src, {}).items():
                total[cat] = total.get(cat, 0) + c
        return OracleResult(rows, {c: k for c, k in total.items() if k}, signed)

    def _check_types(self, step: Step) -> None:
        """Each table's columns have the types the translation means (DuckDB may widen)."""
        desc = self.con.execute(f"SELECT * FROM {step.table} LIMIT 0").description
        got = [str(d[1]) for d in desc]
        want = [*(SQL_TYPE[t] for t in step.types), "BIGINT"]
        if got != want:
            raise OracleBug(f"{step.table} has column types {got}, the translation means {want}")

    def _create(self, table: str, types: Types, rows: list[tuple[Any, ...]]) -> None:
        cols = [f"c{i} {SQL_TYPE[t]}" for i, t in enumerate(types)]
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} ({', '.join([*cols, 'diff BIGINT'])})"
        )
        if rows:
            marks = ", ".join("?" for _ in range(len(types) + 1))
            self.con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
