"""A sqllogictest runner of our own: the standard record format, run against any engine.

The format is SQLite's (https://www.sqlite.org/sqllogictest), as Materialize and DuckDB
use it::

    statement ok
    CREATE TABLE t (a BIGINT, b TEXT)

    statement error 42P01
    SELECT * FROM nosuch

    query IT rowsort
    SELECT a, b FROM t
    ----
    1
    x

A record is separated from the next by a blank line. ``statement ok | error
[what]``: the statement must succeed, or fail; ``what``, if given, is a SQLSTATE
(five characters, e.g. ``22012``; ``22`` alone matches the class) or a regular
expression the message must contain. ``query <types> [nosort | rowsort | valuesort]
[label]`` runs a query; ``types`` has one letter per column (``I`` integer, ``R``
real, shown with three decimals, ``T`` text, ``B`` boolean). Results follow ``----``,
one value per line, row after row (SQLite's layout); ``NULL`` is NULL and
``(empty)`` the empty string. ``query error [what]``
expects an error. ``skipif <engine>`` and ``onlyif <engine>`` lines before a record
choose the engines it runs on; ``halt`` stops the file; ``hash-threshold`` and
``# comments`` are read and ignored (results are always listed).

Values are written as PostgreSQL's text output writes them (``t``/``f`` are written
``true``/``false``), so one file checks tidegate and PostgreSQL alike.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

__all__ = [
    "Engine",
    "EngineError",
    "Failure",
    "Record",
    "format_value",
    "parse",
    "run",
]


class EngineError(Exception):
    """A statement an engine refused, with its SQLSTATE."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(f"{sqlstate}: {message}")
        self.sqlstate = sqlstate
        self.message = message


class Engine(Protocol):
    name: str

    def execute(self, sql: str) -> list[tuple[Any, ...]] | None:
        """The rows of a query, None for a statement [EngineError]."""
        ...


@dataclass
class Record:
    kind: str  # "statement" or "query"
    sql: str
    line: int
    expect_error: bool = False
    error: str | None = None  # a SQLSTATE (class) or a regular expression
    types: str = ""
    sort: str = "nosort"
    label: str | None = None
    results: list[str] = field(default_factory=list)
    skipif: set[str] = field(default_factory=set)
    onlyif: set[str] = field(default_factory=set)

    def runs_on(self, engine: str) -> bool:
        if engine in self.skipif:
            return False
        return not self.onlyif or engine in self.onlyif


@dataclass(frozen=True)
class Failure:
    path: str
    line: int
    sql: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}\n    {self.sql}"


def parse(text: str) -> list[Record]:
    """The records of a sqllogictest file."""
    records: list[Record] = []
    lines = text.split("\n")
    i = 0
    skipif: set[str] = set()
    onlyif: set[str] = set()
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        words = line.split()
        head = words[0]
        if head == "halt":
            break
        if head == "hash-threshold":
            i += 1
            continue
        if head in ("skipif", "onlyif"):
            (skipif if head == "skipif" else onlyif).add(words[1])
            i += 1
            continue
        if head not in ("statement", "query"):
            raise ValueError(f"line {i + 1}: unknown record {line!r}")
        start = i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        rec = Record(head, "\n".join(body), start, skipif=skipif, onlyif=onlyif)
        skipif, onlyif = set(), set()
        rest = words[1:]
        if rest and rest[0] == "error":
            rec.expect_error = True
            rec.error = " ".join(rest[1:]) or None
        elif head == "statement":
            if rest != ["ok"]:
                raise ValueError(f"line {start}: statement ok | error, got {line!r}")
        else:
            rec.types = rest[0] if rest else ""
            rec.sort = rest[1] if len(rest) > 1 else "nosort"
            rec.label = rest[2] if len(rest) > 2 else None
            if rec.sort not in ("nosort", "rowsort", "valuesort"):
                raise ValueError(f"line {start}: unknown sort mode {rec.sort!r}")
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            while i < len(lines) and lines[i].strip():
                rec.results.append(lines[i].rstrip("\r"))  # spaces in a value are its own
                i += 1
        records.append(rec)
    return records


def format_value(v: Any, t: str) -> str:
    """A value as the file writes it, for a column of type letter ``t``."""
    if v is None:
        return "NULL"
    if t == "I":
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, float | Decimal) and v == int(v):
            return str(int(v))
        return str(v)
    if t == "R":
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return f"{float(v):.3f}"
    if t == "B" or isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        return s + (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, Decimal):  # a numeric without trailing zeros: tidegate keeps no display
        # scale (as Materialize), PostgreSQL does (1.50); the number is what both answer
        return format(v.normalize(), "f") if v else "0"
    s = str(v)
    return "(empty)" if s == "" else s


def _error_matches(want: str | None, e: EngineError) -> bool:
    if want is None:
        return True
    if re.fullmatch(r"[0-9A-Z]{2}([0-9A-Z]{3})?", want):
        return e.sqlstate.startswith(want)
    return re.search(want, e.message) is not None


def _results(rec: Record, rows: Sequence[Sequence[Any]]) -> list[str]:
    """``rows`` as the record's result lines (sorted as it says)."""
    types = rec.types
    formatted = [
        [format_value(v, types[k] if k < len(types) else "T") for k, v in enumerate(r)]
        for r in rows
    ]
    if rec.sort == "rowsort":
        formatted.sort()
    values = [v for r in formatted for v in r]
    if rec.sort == "valuesort":
        values.sort()
    return values


def _expected(rec: Record) -> list[str]:
    """The expected values (one per line, SQLite's layout), sorted as the record says."""
    width = len(rec.types) or 1
    out = list(rec.results)
    if rec.sort == "rowsort":
        rows = [out[k : k + width] for k in range(0, len(out), width)]
        rows.sort()
        out = [v for r in rows for v in r]
    elif rec.sort == "valuesort":
        out.sort()
    return out


def run(
    records: Sequence[Record],
    engine: Engine,
    path: str = "",
    on_record: Callable[[Record], None] | None = None,
) -> list[Failure]:
    """Run ``records`` on ``engine``; the records whose outcome is not the expected one."""
    failures: list[Failure] = []
    for rec in records:
        if not rec.runs_on(engine.name):
            continue
        if on_record is not None:
            on_record(rec)
        try:
            rows = engine.execute(rec.sql)
        except EngineError as e:
            if not rec.expect_error:
                failures.append(Failure(path, rec.line, rec.sql, f"unexpected error {e}"))
            elif not _error_matches(rec.error, e):
                failures.append(
                    Failure(path, rec.line, rec.sql, f"wanted error {rec.error}, got {e}")
                )
            continue
        if rec.expect_error:
            failures.append(
                Failure(path, rec.line, rec.sql, f"wanted error {rec.error or ''}, it ran")
            )
            continue
        if rec.kind == "query":
            got = _results(rec, rows or [])
            want = _expected(rec)
            if rows and rec.types and len(rows[0]) != len(rec.types):
                failures.append(
                    Failure(path, rec.line, rec.sql, f"{len(rows[0])} columns, types {rec.types!r}")
                )
            elif got != want:
                failures.append(
                    Failure(
                        path,
                        rec.line,
                        rec.sql,
                        f"results differ:\n      got  {got}\n      want {want}",
                    )
                )
    return failures
