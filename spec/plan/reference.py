"""The reference semantics: what a plan's output is at a time, computed the obvious way.

``evaluate(plan, inputs, time)`` accumulates each input at ``time`` and then
evaluates the operators one by one on whole multisets. It is slow and simple
on purpose; every executor is checked against it.

A collection here is a :class:`Collection`: the rows with their (non-zero)
multiplicities, and the error collection -- messages of scalar evaluation
errors with multiplicities. Errors flow unchanged through every operator
(``Negate`` included), summed over all inputs of an operator. A row whose
expression fails becomes its error with the row's multiplicity; a ``Reduce``
group whose sum is out of range becomes its error once, and has no row.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import EvaluationError, InvalidPlan, UnknownInput
from ..frontier import Row, Time, Update, accumulate
from ..ids import GlobalId
from ..protocol.responses import PeekResult
from ..protocol.types import DataflowDescription, RowSetFinishing
from .aggregates import aggregate
from .lower import lower
from .ordering import peek_result, top_range
from .relation import (
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Let,
    LetRef,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    TemporalFilter,
    TemporalOp,
    Threshold,
    TopK,
    Union,
    Window,
)
from .scalar_eval import RowFn, compile_scalar, sql_equal
from .temporal import bound_millis
from .typecheck import object_order, typecheck, validate_dataflow
from .window import window_partition

__all__ = ["Collection", "evaluate", "evaluate_dataflow", "reference_peek"]


@dataclass(frozen=True)
class Collection:
    """A multiset of rows and a multiset of error messages (zero counts never stored)."""

    rows: dict[Row, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)


def _add(acc: dict, key: object, c: int) -> None:  # type: ignore[type-arg]
    n = acc.get(key, 0) + c
    if n:
        acc[key] = n
    else:
        acc.pop(key, None)


def _sum_errors(*cs: Collection) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cs:
        for e, n in c.errors.items():
            _add(out, e, n)
    return out


def evaluate(plan: Plan, inputs: Mapping[GlobalId, Iterable[Update]], time: Time) -> Collection:
    """``plan``'s output as of ``time``, given every input's updates."""
    typecheck(plan)
    env = {gid: Collection(accumulate(ups, time)) for gid, ups in inputs.items()}
    return _eval(lower(plan), env, {}, time)


def evaluate_dataflow(
    desc: DataflowDescription,
    inputs: Mapping[GlobalId, Iterable[Update]],
    time: Time,
    collections: Mapping[GlobalId, Collection] | None = None,
) -> dict[GlobalId, Collection]:
    """Every object and export of ``desc`` as of ``time``.

    Inputs come from ``inputs`` (update streams) or ``collections`` (contents
    already as of ``time``, e.g. another dataflow's index with its errors);
    an index import may be keyed by its own id or the id it indexes. Sinks and
    index exports map to the object they read. ``as_of`` and ``until`` are
    ignored: this is the content the dataflow denotes.
    """
    validate_dataflow(desc)
    env = {gid: Collection(accumulate(ups, time)) for gid, ups in inputs.items()}
    env.update(collections or {})
    for ix in desc.index_imports:
        if ix.id in env:
            env.setdefault(ix.on_id, env[ix.id])
        elif ix.on_id in env:
            env[ix.id] = env[ix.on_id]
    plans = {b.id: b.plan for b in desc.objects_to_build}
    for oid in object_order(desc):
        env[oid] = _eval(lower(plans[oid]), env, {}, time)
    out = {oid: env[oid] for oid in plans}
    for ex in desc.index_exports:
        out[ex.id] = env[ex.on_id]
    for sk in desc.sink_exports:
        out[sk.id] = env[sk.from_id]
    return out


def reference_peek(collection: Collection, finishing: RowSetFinishing | None = None) -> PeekResult:
    """What a peek of ``collection`` must answer (see :func:`~.ordering.peek_result`)."""
    return peek_result(collection.rows, collection.errors, finishing or RowSetFinishing())


def _eval(
    plan: Plan, env: Mapping[GlobalId, Collection], lets: Mapping[str, Collection], time: Time
) -> Collection:
    if isinstance(plan, Get):
        if plan.id not in env:
            raise UnknownInput(f"no input for Get({plan.id})")
        return env[plan.id]
    if isinstance(plan, Constant):
        rows: dict[Row, int] = {}
        for r, c in plan.rows:
            _add(rows, r, c)
        return Collection(rows)
    if isinstance(plan, LetRef):
        return lets[plan.name]
    if isinstance(plan, Let):
        value = _eval(plan.value, env, lets, time)
        return _eval(plan.body, env, {**lets, plan.name: value}, time)
    if isinstance(plan, Union):
        parts = [_eval(p, env, lets, time) for p in plan.inputs]
        rows = {}
        for part in parts:
            for r, c in part.rows.items():
                _add(rows, r, c)
        return Collection(rows, _sum_errors(*parts))
    if isinstance(plan, Join):
        return _join(plan, [_eval(p, env, lets, time) for p in plan.inputs])
    src = _eval(plan.input, env, lets, time)
    if isinstance(plan, Map | Filter):
        return _map_filter(plan, src)
    if isinstance(plan, TemporalFilter):
        return _temporal_filter(plan, src, time)
    if isinstance(plan, Project):
        rows = {}
        for r, c in src.rows.items():
            _add(rows, tuple(r[i] for i in plan.columns), c)
        return Collection(rows, src.errors)
    if isinstance(plan, Negate):
        return Collection({r: -c for r, c in src.rows.items()}, src.errors)
    if isinstance(plan, Distinct):
        return Collection({r: 1 for r, c in src.rows.items() if c > 0}, src.errors)
    if isinstance(plan, Threshold):
        return Collection({r: c for r, c in src.rows.items() if c > 0}, src.errors)
    if isinstance(plan, ArrangeBy):
        return src
    if isinstance(plan, Reduce):
        groups: dict[Row, list[tuple[Row, int]]] = {}
        for r, c in src.rows.items():
            groups.setdefault(tuple(r[i] for i in plan.group_key), []).append((r, c))
        rows = {}
        errors = dict(src.errors)
        for key, members in groups.items():
            try:
                vals = tuple(
                    aggregate(a, [(r if a.column is None else r[a.column], c) for r, c in members])
                    for a in plan.aggregates
                )
            except EvaluationError as err:  # a sum out of range: the group is one error
                _add(errors, str(err), 1)
                continue
            _add(rows, key + vals, 1)
        return Collection(rows, errors)
    if isinstance(plan, TopK):
        groups = {}
        for r, c in src.rows.items():
            groups.setdefault(tuple(r[i] for i in plan.group_key), []).append((r, c))
        rows = {}
        for members in groups.values():
            for r, c in top_range(members, plan.order_by, plan.offset, plan.limit):
                _add(rows, r, c)
        return Collection(rows, src.errors)
    if isinstance(plan, Window):
        wparts: dict[Row, list[tuple[Row, int]]] = {}
        for r, c in src.rows.items():
            wparts.setdefault(tuple(r[i] for i in plan.partition_key), []).append((r, c))
        out: dict[Row, int] = {}
        errs = dict(src.errors)
        for members in wparts.values():
            try:
                computed = window_partition(members, plan)
            except EvaluationError as err:  # an aggregate out of range: one error
                _add(errs, str(err), 1)
                continue
            for r, c in computed.items():
                _add(out, r, c)
        return Collection(out, errs)
    raise InvalidPlan(f"not a plan: {plan!r}")


def _map_filter(plan: Map | Filter, src: Collection) -> Collection:
    rows: dict[Row, int] = {}
    errors = dict(src.errors)
    exprs = plan.exprs if isinstance(plan, Map) else plan.predicates
    compiled: dict[int, RowFn] = {}

    def fn(i: int) -> RowFn:
        """Expression ``i``, compiled when a row first needs it (a failure to compile is each
        such row's error, as it would be compiled for each)."""
        f = compiled.get(i)
        if f is None:
            f = compiled[i] = compile_scalar(exprs[i])
        return f

    for r, c in src.rows.items():
        try:
            if isinstance(plan, Map):
                out = r
                for i in range(len(exprs)):
                    out = (*out, fn(i)(out))
                _add(rows, out, c)
            elif all(fn(i)(r) is True for i in range(len(exprs))):
                _add(rows, r, c)
        except EvaluationError as err:
            _add(errors, str(err), c)
    return Collection(rows, errors)


def _temporal_filter(plan: TemporalFilter, src: Collection, time: Time) -> Collection:
    """The rows for which every ``mz_now() <op> bound`` holds with ``mz_now()`` = ``time``."""
    if type(time) is not int:
        raise InvalidPlan(f"a TemporalFilter is evaluated at an int time, not {time!r}")
    holds = {
        TemporalOp.EQ: lambda b: time == b,
        TemporalOp.LT: lambda b: time < b,
        TemporalOp.LE: lambda b: time <= b,
        TemporalOp.GT: lambda b: time > b,
        TemporalOp.GE: lambda b: time >= b,
    }
    rows: dict[Row, int] = {}
    errors = dict(src.errors)
    for r, c in src.rows.items():
        try:
            # every bound is evaluated (an error in any makes the row an error), then compared
            bounds = [(op, bound_millis(compile_scalar(e)(r))) for op, e in plan.predicates]
        except EvaluationError as err:
            _add(errors, str(err), c)
            continue
        if all(b is not None and holds[op](b) for op, b in bounds):
            _add(rows, r, c)
    return Collection(rows, errors)


def _join(plan: Join, parts: list[Collection]) -> Collection:
    rows: dict[Row, int] = {}
    for combo in itertools.product(*(p.rows.items() for p in parts)):
        row: Row = tuple(v for r, _ in combo for v in r)
        ok = True
        for cls in plan.equivalences:
            # every two columns of the class equal, as SQL compares them (NULL never equal)
            vals = [row[i] for i in cls]
            if any(v is None for v in vals) or not all(
                sql_equal(a, b) for a, b in itertools.combinations(vals, 2)
            ):
                ok = False
                break
        if ok:
            mult = 1
            for _, c in combo:
                mult *= c
            _add(rows, row, mult)
    return Collection(rows, _sum_errors(*parts))
