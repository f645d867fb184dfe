"""Running a workload on tidegate and on PostgreSQL side by side, and comparing the answers.

tidegate answers each query twice at every state of the history: as a peek
(``Environment.execute``, the peek's own path: a transient dataflow, or a fast path)
and from an incrementally maintained object created before the history ran (a view
with an index, or a materialized view), read directly. PostgreSQL answers the query at
the same state (the same statements ran on both). Answers are compared:

* rows as multisets, in order where the query orders every column; values by kind
  (``Decimal`` and ``int`` and ``float`` as numbers, floats to 12 significant digits,
  since sums of floats are rounded differently; NaN equals NaN; two numerics exactly:
  ``1.50`` equals ``1.5``, tidegate keeping no display scale);
* errors by SQLSTATE class (``22``, ``42``, ...);
* a tidegate refusal (``0A000``, "not supported") of a query PostgreSQL answers is not a
  disagreement but is counted: the generator is meant to stay on supported ground.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg
from querygen import Metamorphic, Workload

from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import PeekFailed
from tidegate.runtime.sql import _peek_error
from tidegate.spec.errors import SqlError
from tidegate.spec.plan.scalar_eval import to_float32

__all__ = ["Disagreement", "Outcome", "Report", "compare", "run_workload"]


@dataclass(frozen=True)
class Outcome:
    """What a statement answered: rows (for a query), a status, or an error's SQLSTATE."""

    rows: list[tuple[Any, ...]] | None = None
    status: str | None = None
    sqlstate: str | None = None
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.sqlstate is not None

    def __str__(self) -> str:
        if self.failed:
            return f"ERROR {self.sqlstate}: {self.message}"
        if self.rows is not None:
            return f"{len(self.rows)} rows: {self.rows[:12]}{' ...' if len(self.rows) > 12 else ''}"
        return str(self.status)


def _norm(v: Any) -> Any:
    if v is None or isinstance(v, bool | str | dt.date):
        return v
    if isinstance(v, Decimal):  # a numeric: exact (PostgreSQL's sum and avg of integers too)
        return ("n", int(v)) if v == v.to_integral_value() else ("n", v.normalize())
    if isinstance(v, int):
        return ("n", v)  # exact (an integral float equals it: 3 == 3.0)
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan",)
        if math.isinf(v):
            return ("n", v)
        return ("n", float(f"{v:.12g}"))  # float sums round differently
    return v


def _rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_norm(v) for v in r) for r in rows]


def _coarse(row: tuple[Any, ...]) -> str:
    """A sort key that puts rows equal but for float rounding next to each other."""
    return repr(
        tuple(
            ("n", float(f"{v[1]:.6g}")) if isinstance(v, tuple) and v[0] == "n" else v for v in row
        )
    )


def _close(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Whether two row lists are equal, floats to a relative 1e-9 (a float sum rounded in
    another order can land on the other side of the 12th digit)."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if x == y:
                continue
            if not (isinstance(x, tuple) and isinstance(y, tuple) and x[0] == y[0] == "n"):
                return False
            if isinstance(x[1], Decimal) and isinstance(y[1], Decimal):
                return False  # two numerics: exactly equal or not at all
            if not math.isclose(float(x[1]), float(y[1]), rel_tol=1e-9, abs_tol=1e-300):
                return False
    return True


def compare(tg: Outcome, pg: Outcome, ordered: bool) -> str | None:
    """Why ``tg`` and ``pg`` disagree, or None if they agree (see the module docstring)."""
    if tg.failed or pg.failed:
        if tg.failed and pg.failed:
            assert tg.sqlstate is not None and pg.sqlstate is not None
            if tg.sqlstate[:2] == pg.sqlstate[:2] or tg.sqlstate == "0A000":
                return None
            return f"both fail, SQLSTATE class differs: tidegate {tg}, PostgreSQL {pg}"
        if tg.failed and tg.sqlstate == "0A000":
            return None  # refused: counted by the caller
        return f"tidegate {tg}\n  PostgreSQL {pg}"
    if tg.rows is None or pg.rows is None:
        if tg.status != pg.status:
            return f"status: tidegate {tg.status!r}, PostgreSQL {pg.status!r}"
        return None
    a, b = _rows(tg.rows), _rows(pg.rows)
    if ordered:
        if a == b or _close(a, b):
            return None
        return f"ordered rows differ:\n  tidegate {tg}\n  PostgreSQL {pg}"
    if Counter(a) == Counter(b) or _close(sorted(a, key=_coarse), sorted(b, key=_coarse)):
        return None
    only_tg = Counter(a) - Counter(b)
    only_pg = Counter(b) - Counter(a)
    return (
        f"rows differ: only tidegate {sorted(only_tg.items(), key=repr)[:6]}, "
        f"only PostgreSQL {sorted(only_pg.items(), key=repr)[:6]}\n  tidegate {tg}\n  PostgreSQL {pg}"
    )


_FLOAT4 = 700


def _singles(row: tuple[Any, ...], reals: list[int]) -> tuple[Any, ...]:
    out = list(row)
    for i in reals:
        if isinstance(out[i], float):
            out[i] = to_float32(out[i])
    return tuple(out)


def pg_run(conn: psycopg.Connection[Any], sql: str) -> Outcome:
    try:
        with conn.cursor() as cur:
            cur.execute(sql)  # type: ignore[arg-type]
            if cur.description is not None:
                # psycopg reads a real's text as a double (0.1): the single it stands for
                # (0.1000000015) is tidegate's value
                reals = [i for i, c in enumerate(cur.description) if c.type_code == _FLOAT4]
                rows = [tuple(r) for r in cur.fetchall()]
                if reals:
                    rows = [_singles(r, reals) for r in rows]
                return Outcome(rows=rows)
            return Outcome(status=cur.statusmessage)
    except psycopg.Error as e:
        return Outcome(sqlstate=e.sqlstate or "XX000", message=str(e).splitlines()[0])


async def tg_run(env: Environment, sql: str) -> Outcome:
    try:
        res = await env.execute(sql)
    except SqlError as e:
        return Outcome(sqlstate=e.sqlstate, message=e.message)
    except Exception as e:  # anything else escaping execute is a bug: reported, never hidden
        return Outcome(sqlstate="CRASH", message=f"{type(e).__name__}: {e}")
    if res.columns:
        return Outcome(rows=list(res.rows))
    return Outcome(status=res.status)


async def tg_read(env: Environment, name: str) -> Outcome:
    """The contents of a maintained object, read from it directly (an index or a
    materialized view), not through a query."""
    try:
        pairs = await env.peek(name)
    except PeekFailed as e:
        err = _peek_error(e)
        return Outcome(sqlstate=err.sqlstate, message=err.message)
    return Outcome(rows=[tuple(r) for r, n in pairs for _ in range(int(n))])


@dataclass(frozen=True)
class Disagreement:
    seed: int
    what: str
    sql: str
    step: int
    detail: str

    def __str__(self) -> str:
        return f"seed {self.seed}, step {self.step}, {self.what}:\n  {self.sql}\n  {self.detail}"


@dataclass
class Report:
    """What one workload found."""

    cases: int = 0  # queries compared (each at every state, peek and maintained)
    comparisons: int = 0
    refused: list[str] = field(default_factory=list)
    both_failed: int = 0
    errors_compared: int = 0
    metamorphic: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)

    def add(self, other: Report) -> None:
        self.cases += other.cases
        self.comparisons += other.comparisons
        self.refused += other.refused
        self.both_failed += other.both_failed
        self.errors_compared += other.errors_compared
        self.metamorphic += other.metamorphic
        self.disagreements += other.disagreements


async def run_workload(
    env: Environment,
    conn: psycopg.Connection[Any],
    w: Workload,
    seed: int,
    prefix: str,
    materialize_every: int = 4,
) -> Report:
    """Run ``w`` on both engines and compare every answer; tidegate's objects are dropped at
    the end (PostgreSQL's too)."""
    rep = Report()

    def note(what: str, sql: str, step: int, detail: str | None) -> None:
        rep.comparisons += 1
        if detail is not None:
            rep.disagreements.append(Disagreement(seed, what, sql, step, detail))

    async def both(
        sql: str, step: int, what: str, ordered: bool = False
    ) -> tuple[Outcome, Outcome]:
        tg, pg = await tg_run(env, sql), pg_run(conn, sql)
        note(what, sql, step, compare(tg, pg, ordered))
        if tg.sqlstate == "0A000" and not pg.failed:
            rep.refused.append(f"{sql}\n  {tg.message}")
        elif tg.failed and pg.failed:
            rep.both_failed += 1
        return tg, pg

    try:
        for s in w.setup:
            tg, pg = await both(s, 0, "setup")
            if tg.failed or pg.failed:  # the workload cannot go on
                return rep
        # one maintained object per query that binds: a view and its index, or an MV
        maintained: dict[int, str] = {}
        for i, q in enumerate(w.queries):
            rep.cases += 1
            # a materialized view keeps its rows but not its evaluation errors (a known defect,
            # docs/sql.md): queries that may fail are maintained as indexed views
            if i % materialize_every == 0 and not q.may_fail:
                name, ddl = f"{prefix}m{i}", f"CREATE MATERIALIZED VIEW {prefix}m{i} AS {q.sql}"
                created = await tg_run(env, ddl)
                read_as = name
            else:
                name = f"{prefix}v{i}"
                created = await tg_run(env, f"CREATE VIEW {name} AS {q.sql}")
                if not created.failed:
                    created = await tg_run(env, f"CREATE INDEX {name}_idx ON {name}")
                read_as = f"{name}_idx"
            if not created.failed:
                maintained[i] = read_as
        for step in range(len(w.steps) + 1):
            if step:
                for s in w.steps[step - 1]:
                    await both(s, step, "write")
            for i, q in enumerate(w.queries):
                _tg, pg = await both(q.sql, step, "peek", q.ordered)
                if pg.failed:
                    rep.errors_compared += 1
                if i in maintained:
                    kept = await tg_read(env, maintained[i])
                    note(
                        f"maintained {maintained[i]}",
                        q.sql,
                        step,
                        compare(kept, pg, False) if pg.sqlstate != "0A000" else None,
                    )
            for m in w.metamorphic:
                await _metamorphic(env, m, step, note)
                rep.metamorphic += 1
    finally:
        for t in w.tables:
            await tg_run(env, f"DROP TABLE IF EXISTS {t.name} CASCADE")
            pg_run(conn, f"DROP TABLE IF EXISTS {t.name} CASCADE")
    return rep


async def _metamorphic(env: Environment, m: Metamorphic, step: int, note: Any) -> None:
    left, right = await tg_run(env, m.left), await tg_run(env, m.right)
    if left.sqlstate == "0A000" or right.sqlstate == "0A000":
        return
    note(f"metamorphic {m.kind}", f"{m.left}\n  vs {m.right}", step, compare(left, right, False))
