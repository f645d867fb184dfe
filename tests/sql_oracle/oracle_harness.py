"""Running a case on every engine and comparing each, at every time, with the SQL oracle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oracle_cases import OracleCase
from oracle_sql import DuckOracle, OracleResult, category_of_tidegate_error

from tidegate.spec.executor import Executor
from tidegate.spec.frontier import Antichain, accumulate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Plan, evaluate
from tidegate.spec.protocol.responses import PeekError, PeekResult, PeekRows
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

__all__ = ["Observation", "check_case", "differs", "reference_at", "run_executor"]

OUT, INDEX = GlobalId.user(100), GlobalId.user(101)


@dataclass
class Observation:
    """What an engine says a plan's output is at one time."""

    rows: dict[tuple[Any, ...], int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    crash: BaseException | None = None
    peek: bool = False
    """A peek's answer: the rows, or one error message (the collection's first error, or
    a negative multiplicity)."""


class Disagreement(AssertionError):
    pass


def _typed(rows: Mapping[tuple[Any, ...], int]) -> dict[tuple[Any, ...], int]:
    # type-strict: True and 1, 1 and 1.0 are equal (and hash alike) in Python, not here
    return {tuple((type(v).__name__, v) for v in r): c for r, c in rows.items()}


def _categories(errors: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for msg, c in errors.items():
        cat = category_of_tidegate_error(msg)
        out[cat] = out.get(cat, 0) + c
    return {k: v for k, v in out.items() if v}


def differs(want: OracleResult, got: Observation) -> str | None:
    """Why ``got`` is not what the oracle says, or None."""
    if got.crash is not None:
        return f"raised {type(got.crash).__name__}: {got.crash}"
    if got.peek:
        # a peek answers an error if the collection has one (which: not compared, as the
        # oracle knows categories) or a negative multiplicity, else its rows
        if got.errors and want.signed_errors:
            return None
        if want.errors and not want.signed_errors:
            return (
                None
                if got.errors
                else f"peek answered rows {got.rows}, oracle errors {want.errors}"
            )
        if any(c < 0 for c in want.rows.values()):
            msg = next(iter(got.errors), "")
            return (
                None
                if "negative multiplicity" in msg
                else f"peek answered {got}, oracle has negative multiplicities"
            )
        if got.errors:
            return f"peek answered {got.errors}, oracle rows {want.rows}"
    if _typed(got.rows) != _typed(want.rows):
        return f"rows {sorted(got.rows.items(), key=repr)} != oracle {sorted(want.rows.items(), key=repr)}"
    if not want.signed_errors and _categories(got.errors) != want.errors:
        return (
            f"errors {got.errors} (by category {_categories(got.errors)}) != oracle {want.errors}"
        )
    return None


# -- engines -------------------------------------------------------------------------------


def times_of(case: OracleCase) -> range:
    return range(case.as_of, case.max_time + 1)


def reference_at(case: OracleCase, plan: Plan, t: int) -> Observation:
    try:
        out = evaluate(plan, case.updates, t)
    except Exception as e:  # reported as a disagreement
        return Observation(crash=e)
    return Observation(dict(out.rows), dict(out.errors))


def dataflow(case: OracleCase) -> DataflowDescription:
    return DataflowDescription(
        "sql-oracle",
        source_imports=tuple(SourceImport(g) for g in case.inputs),
        objects_to_build=(BuildDesc(OUT, case.plan),),
        index_exports=(IndexExport(INDEX, OUT, ()),),
        as_of=Antichain([case.as_of]),
    )


def run_executor(
    case: OracleCase, executor: Executor, check: Callable[[int, Observation], None]
) -> None:
    """Feed ``case`` to ``executor`` step by step; ``check(t, output at t)`` each completed time."""
    top = case.max_time + 1
    handle = executor.install(dataflow(case))
    fed = set(executor.source_inputs(handle))
    gids = list(case.inputs)
    uppers = dict.fromkeys(gids, 0)
    rows: list[Any] = []
    errors: list[Any] = []
    checked = case.as_of
    schedule = [*case.rounds, tuple(top + 1 for _ in gids)]
    for r, advance in enumerate(schedule):
        for gid, inc in zip(gids, advance, strict=True):
            if gid not in fed:
                continue
            last = r == len(schedule) - 1
            new = top if last else min(uppers[gid] + inc, top)
            if new == uppers[gid] and not last:
                continue
            ups = [u for u in case.updates[gid] if uppers[gid] <= u[1] < new]
            executor.feed(handle, gid, ups, Antichain() if last else Antichain([new]))
            uppers[gid] = new
        try:
            batches = executor.step()
        except Exception as e:
            check(checked, Observation(crash=e))
            return
        for b in batches:
            if b.id != INDEX:
                continue
            rows.extend(b.updates)
            errors.extend(b.errors)
        up = executor.upper(INDEX)
        upper = top + 1 if up.is_empty() else int(up.elements[0])
        while checked < min(upper, top + 1):
            if checked <= case.max_time:
                check(checked, Observation(accumulate(rows, checked), accumulate(errors, checked)))
            checked += 1
    # the index answers peeks at every time since its as_of (no compaction happened)
    for t in times_of(case):
        try:
            answer = _peeked(executor.peek(INDEX, t))
        except Exception as e:
            answer = Observation(crash=e)
        check(t, answer)


def _peeked(result: PeekResult) -> Observation:
    if isinstance(result, PeekRows):
        return Observation(dict(result.rows), peek=True)
    assert isinstance(result, PeekError), result
    return Observation(errors={result.message: 1}, peek=True)


# -- one case ------------------------------------------------------------------------------


def _fail(case: OracleCase, oracle: DuckOracle, engine: str, t: int, why: str) -> None:
    raise Disagreement(
        f"{engine} disagrees with the SQL oracle at time {t}: {why}\n\n"
        f"{case.describe()}\n\nSQL (DuckDB):\n{oracle.program.text()}"
    )


def check_case(
    case: OracleCase, executors: Mapping[str, Callable[[], Executor]], reference: bool = True
) -> None:
    """Compare every engine with the SQL oracle at every time of ``case``."""
    oracle = DuckOracle(case.plan, case.inputs, case.updates)
    try:

        def compare(engine: str, t: int, got: Observation) -> None:
            want = oracle.at(t)
            why = differs(want, got)
            if why is None:
                return
            _fail(case, oracle, engine, t, why)

        for t in times_of(case):
            oracle.at(t)
        if reference:
            for t in times_of(case):
                compare("reference", t, reference_at(case, case.plan, t))
        for name, make in executors.items():
            run_executor(case, make(), lambda t, got, name=name: compare(name, t, got))
    finally:
        oracle.close()
