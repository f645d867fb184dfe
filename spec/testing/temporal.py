"""The temporal-filter law, reusable by every executor's tests.

A dataflow maintaining ``TemporalFilter(input)`` (alone, or under a ``count(*)`` per key)
must hold, at every time ``t``, exactly the rows of the input accumulated at ``t`` whose
predicates hold with ``mz_now()`` = ``t`` -- also at times after the last input change,
when only the input's frontier moves; while its index is compacted behind the frontier;
and after the dataflow is dropped and installed again at the index's since (a replica
restart: the new dataflow recomputes the future retractions from the input alone).

The oracle here compares ``t`` with each bound in plain Python (:func:`oracle_rows`),
independently of the executors' validity intervals (:mod:`tidegate.spec.plan.temporal`);
the reference evaluator is held to it too.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from ..executor.contract import Executor
from ..frontier import Antichain, Row, Update, accumulate
from ..ids import GlobalId
from ..plan.reference import Collection, evaluate, reference_peek
from ..plan.relation import AggFunc, Aggregate, Get, Plan, Reduce, TemporalFilter, TemporalOp
from ..plan.scalar import BinaryFunc, CallBinary, ColumnRef, Literal, ScalarExpr
from ..plan.schema import ScalarType, Schema
from ..protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

__all__ = ["TemporalCase", "check_temporal_case", "oracle_rows", "temporal_cases"]

SCHEMA = Schema.of(("k", "int64", False), ("ts", "int64"))
"""The input: a key and an event time in milliseconds (NULL now and then)."""

_INPUT, _OBJECT, _INDEX = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)

_HOLDS: dict[TemporalOp, Callable[[int, int], bool]] = {
    TemporalOp.EQ: operator.eq,
    TemporalOp.LT: operator.lt,
    TemporalOp.LE: operator.le,
    TemporalOp.GT: operator.gt,
    TemporalOp.GE: operator.ge,
}


@dataclass(frozen=True)
class Bound:
    """``ts + offset`` (``literal`` None) or the constant ``literal``."""

    offset: int = 0
    literal: int | None = None

    def expr(self) -> ScalarExpr:
        if self.literal is not None:
            return Literal(self.literal, ScalarType.INT64)
        return CallBinary(BinaryFunc.ADD, ColumnRef(1), Literal(self.offset, ScalarType.INT64))

    def value(self, row: Row) -> int | None:
        if self.literal is not None:
            return self.literal
        ts = row[1]
        return None if ts is None else ts + self.offset


@dataclass(frozen=True)
class TemporalCase:
    """A history of the input, the filter's predicates, and how the dataflow is run."""

    predicates: tuple[tuple[TemporalOp, Bound], ...]
    updates: tuple[Update, ...]
    horizon: int
    """Every time in ``0..horizon`` is checked (the last input change is well before it)."""
    count: bool
    """Maintain ``count(*)`` per key over the filter's output instead of its rows."""
    lag: int | None
    """Compact the index to ``t - lag`` as ``t`` advances (None: never)."""
    restart_at: int | None
    """Drop the dataflow at this time and install it again at the index's since."""

    def plan(self) -> Plan:
        filtered = TemporalFilter(
            Get(_INPUT, SCHEMA), tuple((op, b.expr()) for op, b in self.predicates)
        )
        if not self.count:
            return filtered
        return Reduce(filtered, (0,), (Aggregate(AggFunc.COUNT),))

    def dataflow(self, as_of: int) -> DataflowDescription:
        return DataflowDescription(
            "temporal",
            source_imports=(SourceImport(_INPUT),),
            objects_to_build=(BuildDesc(_OBJECT, self.plan()),),
            index_exports=(IndexExport(_INDEX, _OBJECT, (0,)),),
            as_of=Antichain([as_of]),
        )


def temporal_cases(max_time: int = 8) -> st.SearchStrategy[TemporalCase]:
    """Random :class:`TemporalCase` s: updates at times ``0..max_time``, bounds around them."""

    @st.composite
    def build(draw: st.DrawFn) -> TemporalCase:
        bound = st.one_of(
            st.builds(Bound, offset=st.integers(0, 6)),
            st.builds(Bound, literal=st.integers(0, max_time + 6)),
        )
        predicates = draw(
            st.lists(st.tuples(st.sampled_from(list(TemporalOp)), bound), min_size=1, max_size=3)
        )
        rows = st.tuples(st.integers(0, 2), st.one_of(st.integers(0, max_time + 4), st.none()))
        updates = draw(
            st.lists(
                st.tuples(rows, st.integers(0, max_time), st.sampled_from([-1, 1, 1, 2])),
                max_size=12,
            )
        )
        horizon = max_time + 14
        return TemporalCase(
            tuple(predicates),
            tuple(updates),
            horizon,
            draw(st.booleans()),
            draw(st.one_of(st.none(), st.integers(0, 3))),
            draw(st.one_of(st.none(), st.integers(1, horizon - 1))),
        )

    return build()


def oracle_rows(case: TemporalCase, t: int) -> dict[Row, int]:
    """What the maintained collection holds at ``t``: the input at ``t``, each row kept if
    every ``t <op> bound`` holds (a NULL bound never does), then counted per key if asked."""
    kept: dict[Row, int] = {}
    for row, n in accumulate(case.updates, t).items():
        values = [(op, b.value(row)) for op, b in case.predicates]
        if all(v is not None and _HOLDS[op](t, v) for op, v in values):
            kept[row] = n
    if not case.count:
        return kept
    counts: dict[Row, int] = {}
    for row, n in kept.items():
        counts[(row[0],)] = counts.get((row[0],), 0) + n
    return {(k[0], n): 1 for k, n in counts.items()}


def check_temporal_case(make_executor: Callable[[], Executor], case: TemporalCase) -> None:
    """Run ``case`` one time per step and check every peek and batch (AssertionError if not)."""
    for t in range(case.horizon + 1):
        got = evaluate(case.plan(), {_INPUT: case.updates}, t)
        assert got.rows == oracle_rows(case, t) and not got.errors, (
            f"reference at {t}: {got.rows}, oracle {oracle_rows(case, t)}"
        )
    ex = make_executor()
    handle = ex.install(case.dataflow(0))
    since = 0
    fed = 0  # input times before this are fed to the installed dataflow
    for t in range(case.horizon + 1):
        if case.restart_at == t:
            ex.drop(handle)
            handle = ex.install(case.dataflow(since))
            fed = 0
        ex.feed(handle, _INPUT, [u for u in case.updates if fed <= u[1] <= t], Antichain([t + 1]))
        fed = t + 1
        for batch in ex.step():
            lower, upper = batch.lower.elements[0], batch.upper.elements[0]
            for row, at, d in batch.updates:
                assert lower <= at < upper, f"update {(row, at, d)} outside [{lower}, {upper})"
        assert ex.upper(_INDEX) == Antichain([t + 1]), f"upper {ex.upper(_INDEX)} after {t}"
        for at in range(since, t + 1):
            answer = ex.peek(_INDEX, at)
            want = reference_peek(Collection(oracle_rows(case, at)))
            assert answer == want, f"peek at {at} (step {t}): {answer}, want {want}"
        if case.lag is not None and t - case.lag > since:
            since = t - case.lag
            ex.allow_compaction(_INDEX, Antichain([since]))
