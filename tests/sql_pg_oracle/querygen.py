"""A random SQL workload of our own, SQLancer-style: schemas, data with NULLs and edge values,
a history of writes, and queries over tidegate's SQL surface.

Everything is drawn from one ``random.Random``, so a seed names a workload. The SQL is
plain PostgreSQL that tidegate and PostgreSQL both read; where the two are known to
differ (docs/sql.md, "Differences"), the generator stays on the common ground:

* float constants are written ``1.5::float8`` (a bare ``1.5`` is a ``numeric``, in both);
  large integer literals are written ``2147483647::bigint`` (PostgreSQL reads a bare one as
  ``integer``, which overflows at 2**31);
* ``numeric`` values stay below 10**9 with at most 4 decimals, a division's operands are
  columns or constants (never another division), and no numeric is cast to text: a numeric
  keeps no display scale (``1.50`` is ``1.5``, as Materialize keeps it), which PostgreSQL's
  text and its scale of a quotient of a quotient depend on (docs/sql.md);
* only expressions that cannot fail where PostgreSQL and tidegate may evaluate different
  rows (``WHERE``, ``ON``, ``HAVING``, join inputs: PostgreSQL pushes filters below joins):
  division as ``x / NULLIF(y, 0)``, square roots of ``abs``, no casts that can fail.
  Expressions that can fail (casts of text, ``1/x``, overflow) appear only in the select
  list of one-table queries without ``WHERE``, where both evaluate every row;
* ``LIMIT``/``OFFSET`` only with an ``ORDER BY`` of every output column (a total order);
* strings mostly ASCII (the case mapping of other letters depends on the locale).

A query records what the harness needs: its SQL, whether its order is defined (and must be
compared), and whether it may be maintained as a view (no ``ORDER BY`` without ``LIMIT``).
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field

__all__ = ["Column", "Metamorphic", "Query", "Table", "Workload", "workload"]

TYPES = ("int", "float", "text", "bool", "date", "ts", "num", "i4", "i2", "f4")
DDL = {
    "int": "BIGINT",
    "float": "DOUBLE PRECISION",
    "text": "TEXT",
    "bool": "BOOLEAN",
    "date": "DATE",
    "ts": "TIMESTAMP",
    "num": "NUMERIC",
    "i4": "INTEGER",
    "i2": "SMALLINT",
    "f4": "REAL",
}
_NUMBERS = ("int", "float", "num", "i4", "i2", "f4")
"""The number types: any two compare (an int meets a numeric as a numeric, either meets a
float as a float)."""


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    declared: str | None = None  # the column's declared type, if not DDL[type] (numeric(p, s))


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        cols = ", ".join(
            f"{c.name} {c.declared or DDL[c.type]}{'' if c.nullable else ' NOT NULL'}"
            for c in self.columns
        )
        return f"CREATE TABLE {self.name} ({cols})"


@dataclass(frozen=True)
class Query:
    sql: str
    ordered: bool  # the answer's order is defined (ORDER BY of every column)
    may_fail: bool = False  # its expressions may fail on some rows (division, casts)


@dataclass(frozen=True)
class Metamorphic:
    """Two queries whose answers must be equal multisets on any data (no second engine)."""

    kind: str  # "tlp" (ternary logic partitioning) or "norec" (non-optimizing reference)
    left: str
    right: str


@dataclass
class Workload:
    tables: list[Table]
    setup: list[str]  # CREATE TABLE and the first INSERTs
    steps: list[list[str]]  # later writes, a list of statements per step
    queries: list[Query] = field(default_factory=list)
    metamorphic: list[Metamorphic] = field(default_factory=list)


# -- values -------------------------------------------------------------------------------

_INTS = [0, 1, -1, 2, 3, 5, 7, -7, 10, 42, -100, 1000, 2147483647, -2147483648, 1000000000]
_FLOATS = [0.0, 0.5, -1.5, 2.25, 3.0, -0.125, 1e10, -1e-5, 100.0, 1.0 / 3.0, 7.75]
_FLOAT_SPECIAL = ["Infinity", "-Infinity", "NaN"]
_I4S = [0, 1, -1, 2147483647, -2147483648, 65536, -32769, 1000000]
_I2S = [0, 1, -1, 32767, -32768, 255, -100]
_F4S = [0.0, 0.5, -1.5, 0.1, 1.0 / 3.0, 16777217.0, -1e-5, 1e10, 7.75, 1e30, 123456.789]
"""Reals: ones single precision holds exactly, ones it rounds (0.1, 1/3, 2**24 + 1), the large
and small (at most 1e30: a sum of two cannot overflow, products are drawn only where an
error is compared)."""
_NUMS = ["0", "1", "-1", "0.5", "-0.5", "1.25", "0.001", "-2.375", "100", "3.1416", "99999.999"]
_TEXTS = [
    "",
    "a",
    "A",
    "ab",
    "abc",
    "b",
    "B",
    "hello",
    "Hello World",
    "x y",
    " a ",
    "%",
    "a_b",
    "12",
    "0",
    "-3",
    "é",
    "naïve",
    "日本",
    "zz",
]


def _text_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _float_literal(f: float | str) -> str:
    if isinstance(f, str):
        return f"'{f}'::float8"
    return f"{f!r}::float8" if f >= 0 else f"({f!r})::float8"


class _Values:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def value(self, t: str, nullable: bool = True, typed_null: bool = False) -> str:
        r = self.rng
        if nullable and r.random() < 0.15:
            return f"CAST(NULL AS {DDL[t]})" if typed_null and r.random() < 0.8 else "NULL"
        if t == "int":
            v = r.choice(_INTS) if r.random() < 0.3 else r.randint(-20, 20)
            if abs(v) >= 1000:  # PostgreSQL's integer literals are int4: 2147483647 + 1 fails
                return f"{v}::bigint" if v >= 0 else f"({v})::bigint"
            return str(v) if v >= 0 else f"({v})"
        if t in ("i4", "i2"):
            edges = _I4S if t == "i4" else _I2S
            v = r.choice(edges) if r.random() < 0.3 else r.randint(-20, 20)
            return f"{v}::{DDL[t].lower()}" if v >= 0 else f"({v})::{DDL[t].lower()}"
        if t == "f4":
            if r.random() < 0.05:
                return f"'{r.choice(_FLOAT_SPECIAL)}'::real"
            f = r.choice(_F4S) if r.random() < 0.5 else r.randint(-40, 40) / 8
            return f"{f!r}::real" if f >= 0 else f"({f!r})::real"
        if t == "float":
            if r.random() < 0.05:
                return _float_literal(r.choice(_FLOAT_SPECIAL))
            f = r.choice(_FLOATS) if r.random() < 0.4 else r.randint(-40, 40) / 8
            return _float_literal(f)
        if t == "text":
            s = (
                r.choice(_TEXTS)
                if r.random() < 0.6
                else "".join(r.choices("abcxyz", k=r.randint(1, 4)))
            )
            return _text_literal(s)
        if t == "bool":
            return r.choice(["true", "false"])
        if t == "num":
            if r.random() < 0.4:
                text = r.choice(_NUMS)
            else:
                digits = r.choice([0, 1, 2, 3, 4])
                text = f"{r.randint(-20000, 20000) / 10**digits:.{digits}f}"
            return f"({text})" if text.startswith("-") else text
        if t == "date":
            d = dt.date(2020, 1, 1) + dt.timedelta(days=r.randint(-400, 1500))
            return f"DATE '{d.isoformat()}'"
        d = dt.datetime(2021, 6, 1) + dt.timedelta(
            seconds=r.randint(-(10**7), 10**8), microseconds=r.choice([0, 0, 500000, 123456])
        )
        return f"TIMESTAMP '{d.isoformat(sep=' ')}'"

    def small_int(self, lo: int = -3, hi: int = 10) -> str:
        v = self.rng.randint(lo, hi)
        return str(v) if v >= 0 else f"({v})"


# -- the workload ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Ref:
    """A column a query can name: ``sql`` is how (``t1.a``, or ``a`` for a merged column)."""

    sql: str
    type: str
    name: str


class _Gen:
    def __init__(self, rng: random.Random, prefix: str) -> None:
        self.rng = rng
        self.prefix = prefix
        self.values = _Values(rng)
        self.tables: list[Table] = []

    # schema and data
    def schema(self) -> None:
        r = self.rng
        for k in range(r.randint(2, 3)):
            cols = [Column("k", "int", nullable=r.random() < 0.3)]
            used = {"k"}
            for _ in range(r.randint(2, 4)):
                t = r.choice(TYPES)
                # shared names across tables make USING and NATURAL joins possible
                name = r.choice([f"{t}{r.randint(1, 2)}", f"c{k}{len(cols)}"])
                if name in used:
                    continue
                used.add(name)
                declared = "NUMERIC(12,3)" if t == "num" and r.random() < 0.5 else None
                cols.append(Column(name, t, declared=declared))
            self.tables.append(Table(f"{self.prefix}t{k}", tuple(cols)))

    def insert(self, table: Table, n: int) -> str:
        rows = [
            "(" + ", ".join(self.values.value(c.type, c.nullable) for c in table.columns) + ")"
            for _ in range(n)
        ]
        return f"INSERT INTO {table.name} VALUES {', '.join(rows)}"

    def write(self) -> str:
        r = self.rng
        table = r.choice(self.tables)
        refs = [_Ref(c.name, c.type, c.name) for c in table.columns]
        kind = r.random()
        if kind < 0.4:
            return self.insert(table, r.randint(1, 4))
        if kind < 0.7:
            col = r.choice(table.columns)
            value = self.expr(col.type, refs, 1, safe=True)
            if not col.nullable:
                value = f"COALESCE({value}, {self.values.value(col.type, False)})"
            return f"UPDATE {table.name} SET {col.name} = {value} WHERE {self.pred(refs, 1)}"
        return f"DELETE FROM {table.name} WHERE {self.pred(refs, 1)}"

    # expressions: SQL text of the wanted type over ``refs``; ``safe`` ones cannot fail
    def expr(self, t: str, refs: list[_Ref], depth: int, safe: bool = True) -> str:
        r = self.rng
        cols = [x for x in refs if x.type == t]
        if depth <= 0 or r.random() < 0.35:
            if cols and r.random() < 0.75:
                return r.choice(cols).sql
            return self.values.value(t, typed_null=True)
        d = depth - 1
        if r.random() < 0.12:
            return self._generic(t, refs, d, safe)
        return getattr(self, f"_{t}")(refs, d, safe)

    def _generic(self, t: str, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        k = r.randint(0, 3)
        if k == 0:
            return f"COALESCE({self.expr(t, refs, d, safe)}, {self.expr(t, refs, d, safe)})"
        if k == 1:
            return (
                f"CASE WHEN {self.pred(refs, d)} THEN {self.expr(t, refs, d, safe)} "
                f"ELSE {self.expr(t, refs, d, safe)} END"
            )
        if k == 2 and t not in ("bool",):
            return f"NULLIF({self.expr(t, refs, d, safe)}, {self.expr(t, refs, d, safe)})"
        if t in ("int", "float", "text", "date", "ts", "num", "i4", "i2", "f4"):
            f = r.choice(["GREATEST", "LEAST"])
            return f"{f}({self.expr(t, refs, d, safe)}, {self.expr(t, refs, d, safe)})"
        return self.expr(t, refs, d, safe)

    def _int(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        e = lambda: self.expr("int", refs, d, safe)  # noqa: E731
        k = r.randint(0, 12)
        if k <= 2:
            return f"({e()} {r.choice(['+', '-'])} {e()})"
        if k == 3:
            return f"({e()} * {self.values.small_int()})"
        if k == 4:
            return f"({e()} / NULLIF({e()}, 0))" if safe else f"({e()} / {e()})"
        if k == 5:
            return f"({e()} % NULLIF({e()}, 0))"
        if k == 6:
            return f"abs({e()})"
        if k == 7:
            return f"length({self.expr('text', refs, d, safe)})"
        if k == 8:
            return f"strpos({self.expr('text', refs, d, safe)}, {self.expr('text', refs, d, safe)})"
        if k == 9:
            return f"extract(year FROM {self.expr('date', refs, d, safe)})"
        if k == 10:
            return f"({self.expr('date', refs, d, safe)} - {self.expr('date', refs, d, safe)})"
        if k == 11 and not safe:
            src = r.choice(["float", "text", "num", "f4"])
            return f"CAST({self.expr(src, refs, d, safe)} AS BIGINT)"
        if k == 12 and r.random() < 0.5:
            # an integer or smallint meets a bigint: bigint arithmetic
            narrow = self.expr(r.choice(["i4", "i2"]), refs, d, safe)
            return f"({narrow} {r.choice(['+', '-'])} {e()})"
        return f"(- {e()})"

    def _num(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        e = lambda: self.expr("num", refs, d, safe)  # noqa: E731

        def leaf() -> str:  # a division's operand: no quotient (see the module docstring)
            return self.expr(r.choice(["num", "int"]), refs, 0, safe)

        k = r.randint(0, 12)
        if k <= 2:
            return f"({e()} {r.choice(['+', '-', '*'])} {e()})"
        if k == 3:
            return f"({e()} {r.choice(['+', '-', '*'])} {self.expr('int', refs, d, safe)})"
        if k == 4:
            x, y = self.expr("num", refs, 0, safe), leaf()
            return f"({x} / NULLIF({y}, 0))" if safe else f"({x} / {y})"
        if k == 5:
            return f"({self.expr('num', refs, 0, safe)} % NULLIF({leaf()}, 0))"
        if k == 6:
            return f"{r.choice(['abs', 'ceil', 'floor', 'trunc', 'round', 'sign'])}({e()})"
        if k == 7:
            return f"{r.choice(['round', 'trunc'])}({e()}, {self.values.small_int(-1, 3)})"
        if k == 8:
            return f"CAST({self.expr('int', refs, d, safe)} AS NUMERIC)"
        if k == 9 and not safe:
            return f"CAST({e()} AS NUMERIC({r.randint(3, 8)},{r.randint(0, 2)}))"
        if k == 10 and not safe:
            return f"CAST({self.expr('text', refs, d, safe)} AS NUMERIC)"
        if k == 11:
            return f"(- {e()})"
        return e()

    def _float(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        e = lambda: self.expr("float", refs, d, safe)  # noqa: E731
        k = r.randint(0, 10)
        if k <= 2:
            return f"({e()} {r.choice(['+', '-', '*'])} {e()})"
        if k == 3:
            return f"({e()} / NULLIF({e()}, 0::float8))" if safe else f"({e()} / {e()})"
        if k == 4:
            src = r.choice(["int", "int", "num", "f4", "i4"])
            return f"CAST({self.expr(src, refs, d, safe)} AS DOUBLE PRECISION)"
        if k == 9 and r.random() < 0.5:  # a real meets another number as a double precision
            other = self.expr(r.choice(["f4", "i4", "int"]), refs, d, safe)
            real = self.expr("f4", refs, d, safe)
            return f"({real} {r.choice(['+', '-'])} CAST({other} AS DOUBLE PRECISION))"
        if k == 5:
            return f"{r.choice(['abs', 'ceil', 'floor', 'trunc', 'round', 'sign'])}({e()})"
        if k == 6:
            return f"sqrt(abs({e()}))"
        if k == 7 and not safe:
            return f"CAST({self.expr('text', refs, d, safe)} AS DOUBLE PRECISION)"
        if k == 8:
            return f"(- {e()})"
        return e()

    def _text(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        e = lambda: self.expr("text", refs, d, safe)  # noqa: E731
        k = r.randint(0, 16)
        if k <= 1:
            return f"({e()} || {e()})"
        if k == 2:
            return f"{r.choice(['lower', 'upper', 'reverse'])}({e()})"
        if k == 3:
            return f"substring({e()}, {self.values.small_int(1, 4)}, {self.values.small_int(0, 4)})"
        if k == 4:
            return f"{r.choice(['trim', 'ltrim', 'rtrim'])}({e()})"
        if k == 5:
            return f"replace({e()}, {self.values.value('text', False)}, {e()})"
        if k == 6:
            return f"{r.choice(['lpad', 'rpad'])}({e()}, {self.values.small_int(0, 6)}, 'xy')"
        if k == 7:
            other = r.choice(["int", "float", "bool", "date", "ts"])
            return f"concat({e()}, {self.expr(other, refs, d, safe)})"
        if k == 8:
            src = r.choice(["int", "float", "date", "ts", "bool", "i4", "i2", "f4"])
            return f"CAST({self.expr(src, refs, d, safe)} AS TEXT)"
        if k == 9:
            return f"{r.choice(['left', 'right'])}({e()}, {self.values.small_int(-3, 4)})"
        if k == 10:
            return f"repeat({e()}, {self.values.small_int(0, 3)})"
        if k == 11:
            return f"split_part({e()}, {self.values.value('text', False)}, {self.values.small_int(1, 3)})"
        if k == 12:
            return f"translate({e()}, 'abc', 'xy')"
        if k == 13:
            return f"concat_ws('-', {e()}, {e()})"
        if k == 14:
            return f"initcap({e()})"
        return e()

    def _i4(self, refs: list[_Ref], d: int, safe: bool) -> str:
        return self._narrow_int("i4", refs, d, safe)

    def _i2(self, refs: list[_Ref], d: int, safe: bool) -> str:
        return self._narrow_int("i2", refs, d, safe)

    def _narrow_int(self, t: str, refs: list[_Ref], d: int, safe: bool) -> str:
        """An integer or smallint: arithmetic that may overflow its range only where errors are
        compared (not ``safe``); safe forms keep every value in range."""
        r = self.rng
        e = lambda: self.expr(t, refs, d, safe)  # noqa: E731
        name = DDL[t]
        k = r.randint(0, 9)
        if k <= 1 and not safe:
            return f"({e()} {r.choice(['+', '-', '*'])} {e()})"
        if k == 2:
            return f"({e()} / {self.values.small_int(2, 9)})"
        if k == 3:
            return f"({e()} % NULLIF({e()}, 0))"
        if k == 4 and not safe:
            return f"{r.choice(['abs', '-'])}({e()})"
        if k == 5 and t == "i4":
            return f"CAST({self.expr('i2', refs, d, safe)} AS INTEGER)"
        if k == 6 and not safe:
            src = r.choice(["int", "float", "num", "f4", "text", "i4"])
            return f"CAST({self.expr(src, refs, d, safe)} AS {name})"
        if k == 7 and not safe and t == "i4":  # smallint meets integer: integer arithmetic
            return f"({self.expr('i2', refs, d, safe)} {r.choice(['+', '-'])} {e()})"
        if k == 8 and not safe:
            return f"({e()} / {e()})"
        return e()

    def _f4(self, refs: list[_Ref], d: int, safe: bool) -> str:
        """A real: sums of reals in single precision; products and quotients of two reals
        (which may overflow) only where errors are compared."""
        r = self.rng
        e = lambda: self.expr("f4", refs, d, safe)  # noqa: E731
        k = r.randint(0, 8)
        if k <= 1:
            return f"({e()} {r.choice(['+', '-'])} {e()})"
        if k == 2 and not safe:
            return f"({e()} {r.choice(['*', '/'])} {e()})"
        if k == 3:
            return f"({e()} * 0.5::real)"
        if k == 4:
            src = r.choice(["int", "i4", "i2", "num"])
            return f"CAST({self.expr(src, refs, d, safe)} AS REAL)"
        if k == 5:
            return f"{r.choice(['abs', '-'])}({e()})"
        if k == 6 and not safe:
            src = r.choice(["float", "text"])
            return f"CAST({self.expr(src, refs, d, safe)} AS REAL)"
        return e()

    def _bool(self, refs: list[_Ref], d: int, safe: bool) -> str:
        return self.pred(refs, d + 1, safe)

    def _date(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        k = r.randint(0, 3)
        if k == 0:
            return f"({self.expr('date', refs, d, safe)} + {self.values.small_int(-30, 30)})"
        if k == 1:
            return f"({self.expr('date', refs, d, safe)} - {self.values.small_int(0, 30)})"
        if k == 2:
            return f"CAST({self.expr('ts', refs, d, safe)} AS DATE)"
        return self.expr("date", refs, d, safe)

    def _ts(self, refs: list[_Ref], d: int, safe: bool) -> str:
        r = self.rng
        k = r.randint(0, 3)
        if k == 0:
            unit = r.choice(["1 hour", "2 days", "30 minutes", "1.5 seconds", "1 day 02:03:04"])
            op = r.choice(["+", "-"])
            return f"({self.expr('ts', refs, d, safe)} {op} INTERVAL '{unit}')"
        if k == 1:
            return f"date_trunc('{r.choice(['day', 'hour', 'month', 'year'])}', {self.expr('ts', refs, d, safe)})"
        if k == 2:
            return f"CAST({self.expr('date', refs, d, safe)} AS TIMESTAMP)"
        return self.expr("ts", refs, d, safe)

    def pred(self, refs: list[_Ref], depth: int, safe: bool = True) -> str:
        r = self.rng
        d = depth - 1
        if depth <= 0:
            bools = [x for x in refs if x.type == "bool"]
            if bools and r.random() < 0.5:
                return r.choice(bools).sql
            t = self._type(refs)
            return f"({self.expr(t, refs, 0, safe)} {r.choice(['=', '<>', '<', '>=', '<=', '>'])} {self.expr(t, refs, 0, safe)})"
        k = r.randint(0, 12)
        if k <= 3:
            t = self._type(refs)
            op = r.choice(["=", "<>", "<", "<=", ">", ">="])
            return f"({self.expr(t, refs, d, safe)} {op} {self.expr(t, refs, d, safe)})"
        if k == 4:
            return (
                f"({self.pred(refs, d, safe)} {r.choice(['AND', 'OR'])} {self.pred(refs, d, safe)})"
            )
        if k == 5:
            return f"(NOT {self.pred(refs, d, safe)})"
        if k == 6:
            t = self._type(refs)
            return f"({self.expr(t, refs, d, safe)} IS {r.choice(['', 'NOT '])}NULL)"
        if k == 7:
            t = self._type(refs)
            return f"({self.expr(t, refs, d, safe)} IS {r.choice(['', 'NOT '])}DISTINCT FROM {self.expr(t, refs, d, safe)})"
        if k == 8:
            t = r.choice(["int", "float", "text", "date", "num", "i4", "f4"])
            return f"({self.expr(t, refs, d, safe)} {r.choice(['', 'NOT '])}BETWEEN {self.expr(t, refs, d, safe)} AND {self.expr(t, refs, d, safe)})"
        if k == 9:
            t = r.choice(["int", "text", "num", "i4", "i2"])
            items = ", ".join(self.values.value(t) for _ in range(r.randint(1, 4)))
            return f"({self.expr(t, refs, d, safe)} {r.choice(['', 'NOT '])}IN ({items}))"
        if k == 10:
            pat = r.choice(["a%", "%b%", "_", "%", "h_llo", "A%", "%z"])
            op = r.choice(["LIKE", "NOT LIKE", "ILIKE"])
            return f"({self.expr('text', refs, d, safe)} {op} '{pat}')"
        if k == 11:
            return f"({self.pred(refs, d, safe)} IS {r.choice(['', 'NOT '])}{r.choice(['TRUE', 'FALSE', 'UNKNOWN'])})"
        return self.pred(refs, 0, safe)

    # FROM clauses: SQL text and the columns in scope
    def from_clause(self) -> tuple[str, list[_Ref], bool]:
        """A FROM clause, its columns, and whether it is one table (no join)."""
        r = self.rng
        n = 1 if r.random() < 0.4 else r.randint(2, 3)
        picked = [r.choice(self.tables) for _ in range(n)]
        aliases = [f"a{i}" for i in range(n)]
        refs = [_Ref(f"{aliases[0]}.{c.name}", c.type, c.name) for c in picked[0].columns]
        sql = f"{picked[0].name} AS {aliases[0]}"
        for i in range(1, n):
            t, a = picked[i], aliases[i]
            new = [_Ref(f"{a}.{c.name}", c.type, c.name) for c in t.columns]
            # a merged USING column named again by a later table is ambiguous unqualified
            names = {c.name for c in t.columns}
            refs = [x for x in refs if "." in x.sql or x.name not in names]
            kind = r.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN", ","])
            if kind in ("CROSS JOIN", ","):
                sql += f"{' ' if kind != ',' else ''}{kind} {t.name} AS {a}"
                refs += new
                continue
            mode = r.random()
            first = {c.name: c.type for c in picked[0].columns}
            common = [c.name for c in t.columns if first.get(c.name) == c.type]
            if i == 1 and common and mode < 0.3:
                if mode < 0.1:
                    using, clause = common, f" NATURAL {kind} {t.name} AS {a}"
                else:
                    using = r.sample(common, r.randint(1, len(common)))
                    clause = f" {kind} {t.name} AS {a} USING ({', '.join(using)})"
                sql += clause
                merged = [_Ref(u, first[u], u) for u in using]
                refs = merged + refs + new
                continue
            pairs = [
                (x, y)
                for x in refs
                for y in new
                if x.type == y.type or {x.type, y.type} <= set(_NUMBERS)
            ]
            conds = []
            if pairs:
                x, y = r.choice(pairs)
                conds.append(f"{x.sql} = {y.sql}")
            if r.random() < 0.3 or not conds:
                # a condition on one side: it filters that side, or (the side an outer join
                # keeps) turns its join keys NULL
                conds.append(self.pred(r.choice([new, refs]), 1))
            sql += f" {kind} {t.name} AS {a} ON {' AND '.join(conds)}"
            refs += new
        return sql, refs, n == 1

    # queries
    def select(self, kind: str | None = None) -> Query:
        r = self.rng
        kind = (
            kind
            or r.choices(
                [
                    "plain",
                    "agg",
                    "global",
                    "setop",
                    "cte",
                    "unsafe",
                    "subquery",
                    "series",
                    "invalid",
                    "window",
                    "correlated",
                ],
                weights=[5, 3, 1, 2, 1, 1, 1, 1, 1, 2, 2],
            )[0]
        )
        if kind == "window":
            return self._window()
        if kind == "correlated":
            return self._correlated()
        if kind == "subquery":
            inner = self._plain(ordered=False, limit=r.random() < 0.3)
            refs = [_Ref("s." + c, t, c) for c, t in self._last_out]
            outs = self._outputs(refs)
            items = ", ".join(f"{e} AS p{i}" for i, (e, _t) in enumerate(outs))
            return Query(
                f"SELECT {items} FROM ({inner.sql}) AS s WHERE {self.pred(refs, 1)}", False
            )
        if kind == "series":
            t = r.choice(self.tables)
            lo, hi = r.randint(-3, 3), r.randint(-2, 8)
            ordinality = r.random() < 0.5
            cols = "g(v, n)" if ordinality else "g(v)"
            q = (
                f"SELECT g.v, x.k FROM generate_series({lo}, {hi}"
                f"{', ' + str(r.choice([1, 2, -1])) if r.random() < 0.4 else ''})"
                f"{' WITH ORDINALITY' if ordinality else ''} AS {cols} "
                f"{r.choice(['JOIN', 'LEFT JOIN', 'FULL JOIN'])} {t.name} AS x ON g.v = x.k"
            )
            return Query(q, False)
        if kind == "invalid":
            return self._invalid()
        if kind == "setop":
            return self._setop()
        if kind == "cte":
            inner = self._plain(ordered=False, limit=False)
            return Query(
                f"WITH w AS ({inner.sql}) SELECT * FROM w AS x WHERE {self.pred([_Ref('x.' + c, t, c) for c, t in self._last_out], 1)}",
                False,
            )
        if kind == "agg":
            return self._agg(global_=False)
        if kind == "global":
            return self._agg(global_=True)
        if kind == "unsafe":
            return self._unsafe()
        return self._plain(ordered=r.random() < 0.3, limit=r.random() < 0.5)

    def _type(self, refs: list[_Ref]) -> str:
        """A type, mostly one of the columns in scope."""
        present = [x.type for x in refs]
        return (
            self.rng.choice(present)
            if present and self.rng.random() < 0.8
            else self.rng.choice(TYPES)
        )

    def _outputs(self, refs: list[_Ref], safe: bool = True) -> list[tuple[str, str]]:
        r = self.rng
        out = []
        for _ in range(r.randint(1, 4)):
            t = self._type(refs)
            out.append((self.expr(t, refs, r.randint(0, 2), safe), t))
        return out

    def _plain(self, ordered: bool, limit: bool) -> Query:
        r = self.rng
        sql, refs, _one = self.from_clause()
        outs = self._outputs(refs)
        distinct = "DISTINCT " if r.random() < 0.2 else ""
        items = ", ".join(f"{e} AS o{i}" for i, (e, _t) in enumerate(outs))
        self._last_out = [(f"o{i}", t) for i, (_e, t) in enumerate(outs)]
        q = f"SELECT {distinct}{items} FROM {sql}"
        if r.random() < 0.7:
            q += f" WHERE {self.pred(refs, r.randint(1, 3))}"
        if ordered or limit:
            order = ", ".join(
                f"{i + 1}{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
                for i in r.sample(range(len(outs)), len(outs))
            )
            q += f" ORDER BY {order}"
            if limit:
                q += f" LIMIT {r.randint(0, 5)}"
                if r.random() < 0.4:
                    q += f" OFFSET {r.randint(0, 3)}"
                return Query(q, True)
            return Query(q, True)
        return Query(q, False)

    def _agg(self, global_: bool) -> Query:
        r = self.rng
        sql, refs, _one = self.from_clause()
        keys = (
            []
            if global_
            else [
                (self.expr(t, refs, r.randint(0, 1)), t)
                for t in (self._type(refs) for _ in range(r.randint(1, 2)))
            ]
        )
        aggs = []
        for _ in range(r.randint(1, 3)):
            f = r.choice(
                ["count", "count*", "sum", "min", "max", "avg", "countd", "bool_and", "bool_or"]
            )
            if f == "count*":
                aggs.append("count(*)")
                continue
            if f in ("sum", "avg"):
                # no sum of reals: PostgreSQL adds them in single precision, tidegate in
                # double (docs/sql.md)
                t = r.choice(["int", "float", "num", "i4", "i2"] + (["f4"] if f == "avg" else []))
            elif f in ("bool_and", "bool_or"):
                t = "bool"
            else:
                t = self._type(refs)
                if t == "bool" and f in ("min", "max"):  # PostgreSQL has no min(boolean)
                    t = "int"
            arg = self.expr(t, refs, r.randint(0, 1))
            if f == "countd":
                aggs.append(f"count(DISTINCT {arg})")
            else:
                aggs.append(f"{f}({arg})")
        items = [f"{k} AS g{i}" for i, (k, _t) in enumerate(keys)] + [
            f"{a} AS x{i}" for i, a in enumerate(aggs)
        ]
        q = f"SELECT {', '.join(items)} FROM {sql}"
        if r.random() < 0.5:
            q += f" WHERE {self.pred(refs, r.randint(1, 2))}"
        if keys:
            q += f" GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}"
            if r.random() < 0.3:
                q += f" HAVING count(*) {r.choice(['>', '>=', '<'])} {r.randint(0, 2)}"
        return Query(q, False)

    def _window(self) -> Query:
        """Window functions, the ROW_NUMBER Top-K idiom or DISTINCT ON. A function whose
        answer depends on the order of tied rows (row_number, lag/lead, first/last_value,
        ROWS frames, DISTINCT ON) orders by every column in scope, so only identical rows
        tie; rank, dense_rank and aggregates over the default or a RANGE frame treat ties
        as peers, so any ORDER BY will do. Sums and averages take integers (a float sum
        depends on the order of its terms)."""
        r = self.rng
        sql, refs, _one = self.from_clause()

        def key(x: _Ref) -> str:
            return (
                f"{x.sql}{r.choice(['', ' DESC'])}{r.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
            )

        def order(total: bool) -> list[_Ref]:
            keys = r.sample(refs, r.randint(0, min(2, len(refs))))
            return keys + [x for x in refs if x not in keys] if total else keys

        def over(total: bool, frame: str = "", keys: list[_Ref] | None = None) -> str:
            part = r.sample(refs, r.randint(0, min(2, len(refs))))
            keys = order(total) if keys is None else keys
            by = f"PARTITION BY {', '.join(x.sql for x in part)} " if part else ""
            ob = f"ORDER BY {', '.join(key(x) for x in keys)} " if keys else ""
            return f"OVER ({by}{ob}{frame})".replace(" )", ")")

        where = f" WHERE {self.pred(refs, r.randint(1, 2))}" if r.random() < 0.4 else ""
        shown = r.sample(refs, r.randint(1, min(3, len(refs))))
        cols = [f"{x.sql} AS c{i}" for i, x in enumerate(shown)]
        mode = r.random()
        if mode < 0.15:  # the Top-K idiom
            part = r.sample(refs, r.randint(0, min(2, len(refs))))
            by = f"PARTITION BY {', '.join(x.sql for x in part)} " if part else ""
            rn = f"row_number() OVER ({by}ORDER BY {', '.join(key(x) for x in order(True))})"
            cmp = r.choice(["<=", "<", "="])
            inner = f"SELECT {', '.join(cols)}, {rn} AS rn FROM {sql}{where}"
            return Query(f"SELECT * FROM ({inner}) AS s WHERE rn {cmp} {r.randint(1, 3)}", False)
        if mode < 0.25:  # DISTINCT ON: the first row of each key in a total order
            on = r.sample(refs, r.randint(1, min(2, len(refs))))
            rest = [x for x in refs if x not in on]
            ob = ", ".join(key(x) for x in [*on, *rest])
            return Query(
                f"SELECT DISTINCT ON ({', '.join(x.sql for x in on)}) {', '.join(cols)} "
                f"FROM {sql}{where} ORDER BY {ob}",
                False,
            )
        funcs = []
        ints = [x for x in refs if x.type == "int"]
        for _ in range(r.randint(1, 3)):
            f = r.choice(["row_number", "rank", "lag", "value", "agg", "rows", "range"])
            x = r.choice(refs)
            if f == "row_number":
                funcs.append(f"row_number() {over(True)}")
            elif f == "rank":
                funcs.append(f"{r.choice(['rank', 'dense_rank'])}() {over(False)}")
            elif f == "lag":
                args = x.sql
                if r.random() < 0.6:
                    args += f", {r.choice([0, 1, 2, -1])}"
                    if r.random() < 0.5:
                        args += f", {self.values.value(x.type, nullable=False)}"
                funcs.append(f"{r.choice(['lag', 'lead'])}({args}) {over(True)}")
            elif f == "value":
                frame = r.choice(["", "ROWS BETWEEN 1 PRECEDING AND UNBOUNDED FOLLOWING"])
                funcs.append(
                    f"{r.choice(['first_value', 'last_value'])}({x.sql}) {over(True, frame)}"
                )
            else:
                agg = self._window_agg(refs)
                if f == "agg":
                    funcs.append(f"{agg} {over(False)}")
                elif f == "rows":
                    lo, hi = r.randint(0, 2), r.randint(0, 2)
                    frame = r.choice(
                        [
                            f"ROWS BETWEEN {lo} PRECEDING AND {hi} FOLLOWING",
                            f"ROWS {lo} PRECEDING",
                            "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
                        ]
                    )
                    funcs.append(f"{agg} {over(True, frame)}")
                elif ints:
                    lo, hi = r.randint(0, 3), r.randint(0, 3)
                    frame = r.choice(
                        [
                            f"RANGE BETWEEN {lo} PRECEDING AND {hi} FOLLOWING",
                            f"RANGE BETWEEN CURRENT ROW AND {hi} FOLLOWING",
                            f"RANGE {lo} PRECEDING",
                        ]
                    )
                    funcs.append(f"{agg} {over(False, frame, [r.choice(ints)])}")
        items = cols + [f"{f} AS f{i}" for i, f in enumerate(funcs)]
        return Query(f"SELECT {', '.join(items)} FROM {sql}{where}", False)

    def _window_agg(self, refs: list[_Ref]) -> str:
        r = self.rng
        f = r.choice(["count", "count*", "sum", "min", "max", "avg"])
        if f == "count*":
            return "count(*)"
        if f in ("sum", "avg"):
            return f"{f}({self.expr('int', refs, 0)})"
        t = self._type(refs)
        if t == "bool" and f in ("min", "max"):
            t = "int"
        return f"{f}({self.expr(t, refs, r.randint(0, 1))})"

    def _setop(self) -> Query:
        r = self.rng
        n = r.randint(1, 3)
        types = [
            self._type([_Ref(c.name, c.type, c.name) for c in r.choice(self.tables).columns])
            for _ in range(n)
        ]
        sides = []
        for _ in range(2):
            sql, refs, _one = self.from_clause()
            items = ", ".join(
                f"{self.expr(t, refs, r.randint(0, 1))} AS s{i}" for i, t in enumerate(types)
            )
            q = f"SELECT {items} FROM {sql}"
            if r.random() < 0.5:
                q += f" WHERE {self.pred(refs, 1)}"
            sides.append(q)
        op = r.choice(["UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL"])
        q = f"({sides[0]}) {op} ({sides[1]})"
        if r.random() < 0.4:
            order = ", ".join(f"{i + 1}{r.choice(['', ' DESC'])}" for i in range(n))
            q = f"({q}) ORDER BY {order} LIMIT {r.randint(0, 4)}"
            return Query(q, True)
        return Query(q, False)

    def _invalid(self) -> Query:
        """A query PostgreSQL refuses before it runs (names, types, grouping, arity)."""
        r = self.rng
        t = r.choice(self.tables)
        cols = {c.type: c.name for c in t.columns}
        other = r.choice([x for x in self.tables if x is not t] or [t])
        k = r.randint(0, 9)
        if k == 0:
            return Query(f"SELECT nosuch FROM {t.name}", False)
        if k == 1 and "text" in cols:
            return Query(f"SELECT k + {cols['text']} FROM {t.name}", False)
        if k == 2:
            return Query(f"SELECT * FROM {t.name} WHERE k", False)
        if k == 3:
            return Query(f"SELECT k, count(*) FROM {t.name}", False)
        if k == 4:
            return Query(f"SELECT k FROM {t.name} WHERE count(*) > 1", False)
        if k == 5:
            return Query(f"SELECT k FROM {t.name} AS a JOIN {other.name} AS b ON a.k = b.k", False)
        if k == 6:
            return Query(f"SELECT k FROM {t.name} UNION SELECT k, k FROM {other.name}", False)
        if k == 7:
            return Query(f"SELECT k FROM {t.name} ORDER BY 5", False)
        if k == 8:
            return Query(f"SELECT upper(k) FROM {t.name}", False)
        return Query(f"SELECT sum({cols.get('bool', 'k')}) FROM {t.name} GROUP BY 0", False)

    def metamorphic(self) -> Metamorphic:
        """TLP: ``Q`` = ``Q WHERE p`` + ``Q WHERE NOT p`` + ``Q WHERE p IS NULL``; NoREC: the
        rows a filter keeps = the rows whose predicate, computed as a column, is true."""
        r = self.rng
        sql, refs, _one = self.from_clause()
        p = self.pred(refs, r.randint(1, 3))
        if r.random() < 0.5:
            items = ", ".join(e for e, _t in self._outputs(refs))
            base = f"SELECT {items} FROM {sql}"
            parts = [f"{base} WHERE {w}" for w in (p, f"NOT ({p})", f"({p}) IS NULL")]
            return Metamorphic("tlp", base, " UNION ALL ".join(parts))
        return Metamorphic(
            "norec",
            f"SELECT count(*) FROM {sql} WHERE {p}",
            f"SELECT COALESCE(sum(CASE WHEN {p} THEN 1 ELSE 0 END), 0) FROM {sql}",
        )

    def _correlated(self) -> Query:
        """A subquery in an expression, correlated to the outer row or not: a scalar aggregate,
        ``[NOT] EXISTS``, ``[NOT] IN`` or ``op ANY/ALL``, in the select list or ``WHERE``."""
        r = self.rng
        outer, inner = r.choice(self.tables), r.choice(self.tables)
        orefs = [_Ref(f"o.{c.name}", c.type, c.name) for c in outer.columns]
        irefs = [_Ref(f"i.{c.name}", c.type, c.name) for c in inner.columns]
        pairs = [
            (x, y)
            for x in orefs
            for y in irefs
            if x.type == y.type or {x.type, y.type} <= set(_NUMBERS)
        ]
        conds = []
        if pairs and r.random() < 0.8:
            x, y = r.choice(pairs)
            op = r.choice(["=", "=", "<", "IS NOT DISTINCT FROM"])
            conds.append(f"{y.sql} {op} {x.sql}")
        if r.random() < 0.5:
            conds.append(self.pred(irefs + orefs if r.random() < 0.5 else irefs, 1))
        body = f"FROM {inner.name} AS i" + (f" WHERE {' AND '.join(conds)}" if conds else "")
        form = r.choice(["scalar", "exists", "in", "quantified"])
        if form == "scalar":
            col = r.choice([c for c in irefs if c.type != "bool"] or irefs)
            agg = r.choice(["count(*)", f"count({col.sql})", f"max({col.sql})", f"min({col.sql})"])
            if col.type == "bool":
                agg = "count(*)"
            item = f"(SELECT {agg} {body})"
        elif form == "exists":
            item = f"{r.choice(['', 'NOT '])}EXISTS (SELECT 1 {body})"
        else:
            y = r.choice(irefs)
            lhs = self.expr(y.type, orefs, r.randint(0, 1))
            if form == "in":
                item = f"{lhs} {r.choice(['', 'NOT '])}IN (SELECT {y.sql} {body})"
            else:
                op = r.choice(["=", "<>", "<", "<=", ">", ">="])
                item = f"{lhs} {op} {r.choice(['ANY', 'ALL'])} (SELECT {y.sql} {body})"
        outs = ", ".join(e for e, _t in self._outputs(orefs))
        if form != "scalar" and r.random() < 0.5:
            return Query(f"SELECT {outs} FROM {outer.name} AS o WHERE {item}", False)
        return Query(f"SELECT {outs}, {item} AS sq FROM {outer.name} AS o", False)

    def _unsafe(self) -> Query:
        """Expressions that may fail, over one table with no filter: PostgreSQL and tidegate
        evaluate them on every row, so both fail or neither does."""
        r = self.rng
        t = r.choice(self.tables)
        refs = [_Ref(c.name, c.type, c.name) for c in t.columns]
        outs = self._outputs(refs, safe=False)
        items = ", ".join(f"{e} AS u{i}" for i, (e, _t) in enumerate(outs))
        return Query(f"SELECT {items} FROM {t.name}", False, may_fail=True)


def workload(
    seed: int, n_queries: int, n_steps: int, prefix: str, n_metamorphic: int = 0
) -> Workload:
    """The workload of ``seed``: tables named ``{prefix}t0``.., their first rows, ``n_steps``
    steps of writes, ``n_queries`` queries and ``n_metamorphic`` metamorphic pairs."""
    rng = random.Random(seed)
    g = _Gen(rng, prefix)
    g._last_out = []
    g.schema()
    setup = [t.ddl() for t in g.tables] + [g.insert(t, rng.randint(2, 8)) for t in g.tables]
    steps = [[g.write() for _ in range(rng.randint(1, 3))] for _ in range(n_steps)]
    queries = [g.select() for _ in range(n_queries)]
    metamorphic = [g.metamorphic() for _ in range(n_metamorphic)]
    return Workload(g.tables, setup, steps, queries, metamorphic)
