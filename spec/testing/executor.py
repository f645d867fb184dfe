"""The executor contract test: any :class:`~tidegate.spec.executor.Executor` against the reference.

Reuse it unchanged for a new executor::

    class TestMyExecutor(ExecutorContractTests):
        max_examples = 25            # optional: cap for slow executors

        def make_executor(self):
            return MyExecutor()

or call :func:`check_executor_against_reference` with a factory. A case
(:func:`~tidegate.spec.strategies.plan.executor_cases`) installs a random
dataflow, feeds random update streams in random chunks with random uppers,
steps, and compacts indexes; after every step it checks, for every export and
every time ``t`` in ``[as_of, upper)``, that the accumulated output equals
:func:`~tidegate.spec.plan.reference.evaluate_dataflow` at ``t``, that every
index peek at ``t`` in ``[since, upper)`` equals the reference after the
finishing (and with a key lookup), and that the upper is exactly the meet of
the inputs' uppers (never below the as_of).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings

from ..errors import (
    CompactionRegression,
    DuplicateExport,
    InputFrontierRegression,
    PeekNotReady,
    PeekOutOfRange,
    UpdateBeforeFrontier,
)
from ..executor.contract import Executor, ExportBatch
from ..frontier import Antichain, accumulate
from ..ids import GlobalId
from ..plan.reference import Collection, evaluate, evaluate_dataflow, reference_peek
from ..plan.relation import AggFunc, Aggregate, Get, Reduce
from ..plan.schema import Schema
from ..protocol.responses import PeekError
from ..protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    RowSetFinishing,
    SourceImport,
)
from ..strategies.plan import ExecutorAction, ExecutorCase, executor_cases, plans, update_streams
from .sql_cases import SQL_CASES, SqlCase, sql_executor_case

__all__ = [
    "ExecutorAction",
    "ExecutorCase",
    "ExecutorContractTests",
    "check_executor_against_reference",
    "check_sql_case",
    "executor_cases",
    "plans",
    "run_executor_case",
    "update_streams",
]


def _fail(msg: str) -> None:
    raise AssertionError(msg)


def _frontier_int(a: Antichain, top: int) -> int:
    return top if a.is_empty() else int(a.elements[0])


class _Checker:
    def __init__(self, executor: Executor, case: ExecutorCase) -> None:
        self.ex = executor
        self.case = case
        self.dataflows = (case.dataflow, *case.readers)
        self.top = case.max_time + 2  # checked up to here (a temporal filter's later times
        # come out when every input is closed)
        self.as_ofs: dict[GlobalId, int] = {}
        self.keys: dict[GlobalId, tuple[int, ...]] = {}
        for k, desc in enumerate(self.dataflows):
            assert desc.as_of is not None
            handle = executor.install(desc)
            if k == 0:
                self.handle = handle
            for eid in desc.export_ids:
                self.as_ofs[eid] = int(desc.as_of.elements[0])
            self.keys.update({ix.id: ix.key for ix in desc.index_exports})
        self.as_of = self.as_ofs[case.dataflow.export_ids[0]]
        self.primary = set(case.dataflow.export_ids)
        self.uppers = dict(self.as_ofs)
        self.outputs: dict[GlobalId, list[Any]] = {eid: [] for eid in self.as_ofs}
        self.errors: dict[GlobalId, list[Any]] = {eid: [] for eid in self.as_ofs}
        self.input_uppers = {s.id: 0 for s in case.dataflow.source_imports}
        self.sinces = {ix: self.as_ofs[ix] for ix in self.keys}
        self._ref: dict[int, dict[GlobalId, Collection]] = {}

    def ref(self, t: int) -> dict[GlobalId, Collection]:
        if t not in self._ref:
            out = evaluate_dataflow(self.case.dataflow, self.case.inputs, t)
            for reader in self.case.readers:
                seen = {}
                for ix in reader.index_imports:
                    seen[ix.id] = seen[ix.on_id] = out[ix.id]
                out.update(evaluate_dataflow(reader, {}, t, seen))
            self._ref[t] = out
        return self._ref[t]

    def run(self) -> None:
        for action in self.case.actions:
            if action.kind == "feed":
                assert action.target is not None and action.frontier is not None
                self.ex.feed(self.handle, action.target, action.updates, action.frontier)
                self.input_uppers[action.target] = _frontier_int(action.frontier, self.top)
            elif action.kind == "compact":
                assert action.target is not None and action.frontier is not None
                self.ex.allow_compaction(action.target, action.frontier)
                self.sinces[action.target] = _frontier_int(action.frontier, self.top)
            else:
                self.step()
        for eid, upper in self.uppers.items():
            if upper < self.top:
                _fail(f"{eid}: upper stuck at {upper} after every input was closed")

    def step(self) -> None:
        batches = self.ex.step()
        seen: set[GlobalId] = set()
        for b in batches:
            self.absorb(b, seen)
        again = self.ex.step()
        if again:
            _fail(
                f"a second step with nothing fed in between returned {len(again)} batch(es) "
                f"(for {sorted({b.id for b in again})}): a step must finish what was fed before it"
            )
        meet = min(self.input_uppers.values(), default=self.top)
        primary = max(meet, self.as_of)
        for eid, upper in self.uppers.items():
            expected = primary if eid in self.primary else max(primary, self.as_ofs[eid])
            if upper != expected:
                _fail(
                    f"{eid}: upper {upper} after step, but the inputs are complete up to {expected}"
                )
            self.check_export(eid)

    def absorb(self, b: ExportBatch, seen: set[GlobalId]) -> None:
        if b.id not in self.uppers:
            _fail(f"batch for unknown export {b.id}")
        if b.id in seen:
            _fail(f"two batches for {b.id} in one step")
        seen.add(b.id)
        lower = _frontier_int(b.lower, self.top)
        upper = _frontier_int(b.upper, self.top)
        if lower != self.uppers[b.id]:
            _fail(f"{b.id}: batch lower {b.lower} is not the previous upper {self.uppers[b.id]}")
        if upper < lower:
            _fail(f"{b.id}: batch upper {b.upper} is behind its lower {b.lower}")
        closed = b.upper.is_empty()  # a temporal filter's changes past ``top`` come out then
        for row, t, d in b.updates:
            if t < lower or (t >= upper and not closed) or d == 0:
                _fail(f"{b.id}: update {(row, t, d)} outside [{b.lower}, {b.upper}) or zero")
        self.uppers[b.id] = upper
        self.outputs[b.id].extend(b.updates)
        self.errors[b.id].extend(b.errors)

    def check_export(self, eid: GlobalId) -> None:
        upper = self.uppers[eid]
        for t in range(self.as_ofs[eid], min(upper, self.top)):
            want = self.ref(t)[eid]
            got_rows = accumulate(self.outputs[eid], t)
            got_errs: dict[Any, int] = accumulate(self.errors[eid], t)
            if got_rows != want.rows or got_errs != dict(want.errors):
                _fail(
                    f"{eid} at {t}: executor output rows={got_rows} errors={got_errs}, "
                    f"reference rows={want.rows} errors={want.errors}"
                )
            if eid in self.sinces and t >= self.sinces[eid]:
                self.check_peeks(eid, t, want)

    def check_peeks(self, eid: GlobalId, t: int, want: Collection) -> None:
        fin = self.case.finishings.get(eid, RowSetFinishing())
        for finishing in (RowSetFinishing(), fin):
            got = self.ex.peek(eid, t, finishing)
            expected = reference_peek(want, finishing)
            if got != expected:
                _fail(f"peek {eid} at {t} with {finishing}: got {got}, reference {expected}")
        key = self.keys[eid]
        if want.rows:
            first = min(want.rows, key=repr)
            k = tuple(first[i] for i in key)
            sub = Collection(
                {r: c for r, c in want.rows.items() if tuple(r[i] for i in key) == k}, want.errors
            )
            got = self.ex.peek(eid, t, RowSetFinishing(), (k,))
            if got != reference_peek(sub):
                _fail(f"peek {eid} at {t} for key {k}: got {got}, reference {reference_peek(sub)}")


def run_executor_case(executor: Executor, case: ExecutorCase) -> None:
    """Run one case on a fresh ``executor``; raise ``AssertionError`` naming the first disagreement."""
    _Checker(executor, case).run()


def check_executor_against_reference(
    executor_factory: Callable[[], Executor], max_examples: int | None = None
) -> None:
    """Property-test executors made by ``executor_factory`` against the reference (Hypothesis)."""
    chosen = settings() if max_examples is None else settings(max_examples=max_examples)

    @chosen
    @given(case=executor_cases())
    def prop(case: ExecutorCase) -> None:
        run_executor_case(executor_factory(), case)

    prop()


_U1 = GlobalId.user(1)
_SCHEMA = Schema.of(("k", "string"), ("v", "int64", False))


def _simple_dataflow(as_of: int = 0) -> DataflowDescription:
    ix = GlobalId.user(3)
    plan = Reduce(Get(_U1, _SCHEMA), (0,), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1)))
    return DataflowDescription(
        "contract",
        source_imports=(SourceImport(_U1),),
        objects_to_build=(BuildDesc(GlobalId.user(2), plan),),
        index_exports=(IndexExport(ix, GlobalId.user(2), (0,)),),
        as_of=Antichain([as_of]),
    )


def check_sql_case(case: SqlCase, executor: Executor | None = None) -> None:
    """The reference gives ``case``'s expected rows and errors; ``executor`` (if given), fed
    the case one time per step, agrees with the reference at every time. Raises
    ``AssertionError`` naming the case and the first difference."""
    for t, (rows, errors) in case.expected.items():
        got = evaluate(case.plan, case.inputs, t)
        if got.rows != rows or got.errors != errors:
            _fail(
                f"SQL case {case.name!r} at {t}: reference rows={got.rows} errors={got.errors}, "
                f"SQL wants rows={rows} errors={errors}"
            )
    if executor is not None:
        try:
            run_executor_case(executor, sql_executor_case(case))
        except AssertionError as e:
            raise AssertionError(f"SQL case {case.name!r}: {e}") from None


class ExecutorContractTests:
    """Pytest mixin: subclass as ``TestX(ExecutorContractTests)`` and implement :meth:`make_executor`."""

    max_examples: int | None = None

    def make_executor(self) -> Executor:
        raise NotImplementedError

    def test_matches_reference(self) -> None:
        check_executor_against_reference(self.make_executor, self.max_examples)

    def test_sql_cases(self) -> None:
        """Edge cases whose answer SQL fixes (:data:`~.sql_cases.SQL_CASES`): overflowing sums,
        int64 against float64, number casts, LIKE escapes -- the reference and the executor."""
        for case in SQL_CASES:
            check_sql_case(case, self.make_executor())

    def test_peek_outside_since_upper_is_rejected(self) -> None:
        ex = self.make_executor()
        h = ex.install(_simple_dataflow(as_of=2))
        ix = GlobalId.user(3)
        ex.feed(h, _U1, [(("a", 1), 0, 1)], Antichain([5]))
        ex.step()
        try:
            ex.peek(ix, 1)
        except PeekOutOfRange:
            pass
        else:
            _fail("a peek before the since must raise PeekOutOfRange")
        try:
            ex.peek(ix, 5)
        except PeekNotReady:
            pass
        else:
            _fail("a peek at the upper must raise PeekNotReady")
        if ex.peek(ix, 4) != ex.peek(ix, 2):
            _fail("no update after 0, yet peeks at 2 and 4 differ")

    def test_input_misuse_is_rejected_and_changes_nothing(self) -> None:
        ex = self.make_executor()
        h = ex.install(_simple_dataflow())
        ex.feed(h, _U1, [(("a", 1), 1, 1)], Antichain([3]))
        for bad_updates, bad_upper, err in (
            ([(("a", 1), 2, 1)], Antichain([4]), UpdateBeforeFrontier),
            ([], Antichain([2]), InputFrontierRegression),
        ):
            try:
                ex.feed(h, _U1, bad_updates, bad_upper)
            except err:
                pass
            else:
                _fail(f"expected {err.__name__}")
        ex.step()
        if ex.upper(GlobalId.user(3)) != Antichain([3]):
            _fail(f"upper should be [3], is {ex.upper(GlobalId.user(3))}")

    def test_compaction_and_duplicates_are_checked(self) -> None:
        ex = self.make_executor()
        ex.install(_simple_dataflow())
        ex.allow_compaction(GlobalId.user(3), Antichain([2]))
        try:
            ex.allow_compaction(GlobalId.user(3), Antichain([1]))
        except CompactionRegression:
            pass
        else:
            _fail("compaction backwards must raise CompactionRegression")
        try:
            ex.install(_simple_dataflow())
        except DuplicateExport:
            pass
        else:
            _fail("installing an export twice must raise DuplicateExport")
        if ex.since(GlobalId.user(3)) != Antichain([2]):
            _fail("since should be [2]")

    def test_a_failed_dataflow_holds_only_its_error_from_then_on(self) -> None:
        """:meth:`~.contract.Executor.fail` (a resource limit): the state goes, the exports hold
        the error from the first unprocessed time on, earlier times keep their contents, the
        uppers go on advancing, and what is fed afterwards is not kept."""
        ex = self.make_executor()
        h = ex.install(_simple_dataflow())
        ix = GlobalId.user(3)
        ex.feed(h, _U1, [(("a", 1), 0, 1), (("b", 2), 1, 1)], Antichain([2]))
        ex.step()
        if ex.state_records().get(h, 0) <= 0:
            _fail(f"a reduce over two rows holds state, got {ex.state_records()}")
        before = ex.peek(ix, 1)
        ex.fail(h, "dataflow exceeded the replica's memory limit")
        if h in ex.state_records():
            _fail("a failed dataflow counts no state")
        ex.feed(h, _U1, [(("c", 3), t, 1) for t in range(2, 6)], Antichain([6]))
        batches = [b for b in ex.step() if b.id == ix]
        placed = [(m, t, d) for b in batches for m, t, d in b.errors]
        if placed != [("dataflow exceeded the replica's memory limit", 2, 1)]:
            _fail(f"the error goes in once, at the first unprocessed time 2: {placed}")
        if ex.upper(ix) != Antichain([6]):
            _fail(f"the upper advances with the input: {ex.upper(ix)}")
        if ex.peek(ix, 1) != before:
            _fail("times before the failure keep their contents")
        for t in (2, 5):
            result = ex.peek(ix, t)
            if not isinstance(result, PeekError) or "memory limit" not in result.message:
                _fail(f"a peek at {t}, after the failure, answers the error: {result!r}")
        ex.fail(h, "again")  # a failed dataflow is left alone
        ex.feed(h, _U1, [], Antichain([8]))
        if any(b.errors or b.updates for b in ex.step()):
            _fail("nothing changes after the failure was placed")
