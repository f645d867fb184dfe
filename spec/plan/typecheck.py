"""Type checking and validation: an invalid plan is rejected before anything runs.

:func:`typecheck` gives a plan's output schema; :func:`validate_dataflow`
checks a whole :class:`DataflowDescription` (inputs known, schemas agree,
objects acyclic, exports well formed) and returns every collection's schema.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from ..errors import (
    ArityMismatch,
    InvalidPlan,
    PlanCycle,
    TypeMismatch,
    UnknownColumn,
    UnknownInput,
)
from ..ids import GlobalId
from ..protocol.types import DataflowDescription
from .depth import check_nesting
from .relation import (
    AggFunc,
    Aggregate,
    ArrangeBy,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    JoinKind,
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
    WindowBoundKind,
    WindowFrame,
    WindowFuncKind,
    children,
)
from .scalar import scalar_type
from .schema import Column, ColumnType, ScalarType, Schema, check_row

__all__ = ["gets", "object_order", "typecheck", "validate_dataflow"]

_NESTING_CHECKED: OrderedDict[int, Plan] = OrderedDict()
"""Plans whose nesting was checked lately, by ``id`` (each kept alive here, so no other plan
takes its ``id`` while it is remembered): a plan typechecked again -- an executor compiling a
dataflow typechecks each operator's input -- is not walked whole again."""

_NESTING_MEMORY = 512


def _check_nesting_once(plan: Plan) -> None:
    """:func:`check_nesting` of ``plan``, unless this very plan object passed it lately."""
    key = id(plan)
    if _NESTING_CHECKED.get(key) is plan:
        _NESTING_CHECKED.move_to_end(key)
        return
    check_nesting(plan)
    _NESTING_CHECKED[key] = plan
    if len(_NESTING_CHECKED) > _NESTING_MEMORY:
        _NESTING_CHECKED.popitem(last=False)


def _cols(schema: Schema, idx: tuple[int, ...], what: str) -> None:
    for i in idx:
        if type(i) is not int or not 0 <= i < schema.arity:
            raise UnknownColumn(f"{what}: column #{i} out of range for {schema}")


def typecheck(
    plan: Plan,
    sources: Mapping[GlobalId, Schema] | None = None,
    _lets: Mapping[str, Schema] | None = None,
) -> Schema:
    """The output schema of ``plan``; raise a typed :class:`PlanError` if it is invalid.

    With ``sources``, every ``Get`` must name a key of it and carry the same schema.
    A plan nested deeper than :data:`~.depth.MAX_NESTING` is :class:`PlanTooDeep`.
    """
    if _lets is None:
        _check_nesting_once(plan)
    lets = _lets or {}
    if isinstance(plan, Get):
        if not isinstance(plan.id, GlobalId):
            raise InvalidPlan(f"Get of {plan.id!r}: not a GlobalId")
        if sources is not None:
            if plan.id not in sources:
                raise UnknownInput(f"Get({plan.id}): not an input or object of this dataflow")
            if sources[plan.id] != plan.schema:
                raise TypeMismatch(
                    f"Get({plan.id}) schema {plan.schema} differs from {sources[plan.id]}"
                )
        return plan.schema
    if isinstance(plan, Constant):
        for entry in plan.rows:
            if type(entry) is not tuple or len(entry) != 2 or type(entry[1]) is not int:
                raise InvalidPlan(f"Constant entry {entry!r} is not (row, int diff)")
            check_row(entry[0], plan.schema, "Constant row")
        return plan.schema
    if isinstance(plan, LetRef):
        if plan.name not in lets:
            raise UnknownInput(f"LetRef({plan.name!r}): no enclosing Let binds it")
        return lets[plan.name]
    if isinstance(plan, Let):
        value = typecheck(plan.value, sources, lets)
        return typecheck(plan.body, sources, {**lets, plan.name: value})
    if isinstance(plan, Union):
        if not plan.inputs:
            raise InvalidPlan("Union of no inputs")
        schemas = [typecheck(p, sources, lets) for p in plan.inputs]
        first = schemas[0]
        for k, s in enumerate(schemas[1:], 1):
            if s.arity != first.arity:
                raise ArityMismatch(
                    f"Union input #{k} has arity {s.arity}, input #0 has {first.arity}"
                )
            for a, b in zip(first.columns, s.columns, strict=True):
                if a.type.scalar is not b.type.scalar:
                    raise TypeMismatch(
                        f"Union input #{k} column {b.name!r} is {b.type.scalar}, not {a.type.scalar}"
                    )
        cols = tuple(
            Column(
                c.name, ColumnType(c.type.scalar, any(s.columns[i].type.nullable for s in schemas))
            )
            for i, c in enumerate(first.columns)
        )
        return Schema(cols)
    if isinstance(plan, Join):
        return _join_schema(plan, [typecheck(p, sources, lets) for p in plan.inputs])
    inner = typecheck(plan.input, sources, lets)
    if isinstance(plan, Map):
        if len(plan.names) != len(plan.exprs):
            raise ArityMismatch(
                f"Map has {len(plan.exprs)} expressions but {len(plan.names)} names"
            )
        schema = inner
        for name, e in zip(plan.names, plan.exprs, strict=True):
            schema = schema.concat(Schema((Column(name, scalar_type(e, schema)),)))
        return schema
    if isinstance(plan, Filter):
        for p in plan.predicates:
            t = scalar_type(p, inner)
            if t.scalar is not ScalarType.BOOL:
                raise TypeMismatch(f"Filter predicate {p!r} is {t.scalar}, not bool")
        return inner
    if isinstance(plan, TemporalFilter):
        if not plan.predicates:
            raise InvalidPlan("TemporalFilter with no predicates")
        for op, e in plan.predicates:
            if not isinstance(op, TemporalOp):
                raise InvalidPlan(f"TemporalFilter comparison {op!r} is not a TemporalOp")
            t = scalar_type(e, inner)
            if t.scalar not in (ScalarType.INT64, ScalarType.TIMESTAMP, ScalarType.DATE):
                raise TypeMismatch(
                    f"TemporalFilter bound {e!r} is {t.scalar}, not int64, timestamp or date"
                )
        return inner
    if isinstance(plan, Project):
        _cols(inner, plan.columns, "Project")
        return inner.project(plan.columns)
    if isinstance(plan, Negate | Distinct | Threshold):
        return inner
    if isinstance(plan, ArrangeBy):
        for key in plan.keys:
            _cols(inner, key, "ArrangeBy key")
        return inner
    if isinstance(plan, Reduce):
        return _reduce_schema(plan, inner)
    if isinstance(plan, TopK):
        _cols(inner, plan.group_key, "TopK group key")
        _cols(inner, tuple(o.column for o in plan.order_by), "TopK order by")
        if plan.limit is not None and (type(plan.limit) is not int or plan.limit < 0):
            raise InvalidPlan(f"TopK limit {plan.limit!r} must be a non-negative int or None")
        if type(plan.offset) is not int or plan.offset < 0:
            raise InvalidPlan(f"TopK offset {plan.offset!r} must be a non-negative int")
        return inner
    if isinstance(plan, Window):
        return _window_schema(plan, inner)
    raise InvalidPlan(f"not a plan: {plan!r}")


def _join_schema(plan: Join, schemas: list[Schema]) -> Schema:
    if not schemas:
        raise InvalidPlan("Join of no inputs")
    if not isinstance(plan.kind, JoinKind):
        raise InvalidPlan(f"Join kind {plan.kind!r} is not a JoinKind")
    if plan.kind is not JoinKind.INNER:
        if len(schemas) != 2:
            raise InvalidPlan(f"{plan.kind.value} Join needs exactly 2 inputs, got {len(schemas)}")
        n = schemas[0].arity
        for cls in plan.equivalences:
            if not any(type(i) is int and i < n for i in cls) or not any(
                type(i) is int and i >= n for i in cls
            ):
                raise InvalidPlan(
                    f"{plan.kind.value} Join equivalence {cls} must name columns of both inputs"
                )
        pad_left = plan.kind in (JoinKind.RIGHT, JoinKind.FULL)
        pad_right = plan.kind in (JoinKind.LEFT, JoinKind.FULL)
        schemas = [
            _nullable(schemas[0]) if pad_left else schemas[0],
            _nullable(schemas[1]) if pad_right else schemas[1],
        ]
    out = schemas[0]
    for s in schemas[1:]:
        out = out.concat(s)
    for cls in plan.equivalences:
        if len(cls) < 2:
            raise InvalidPlan(f"Join equivalence class {cls} needs at least two columns")
        _cols(out, cls, "Join equivalence")
        t0 = out.columns[cls[0]].type.scalar
        for i in cls[1:]:
            t = out.columns[i].type.scalar
            if not (t is t0 or (t.is_numeric and t0.is_numeric)):
                raise TypeMismatch(f"Join equates column #{cls[0]} ({t0}) with #{i} ({t})")
    return out


def _nullable(s: Schema) -> Schema:
    return Schema(tuple(Column(c.name, ColumnType(c.type.scalar, True)) for c in s.columns))


def _reduce_schema(plan: Reduce, inner: Schema) -> Schema:
    _cols(inner, plan.group_key, "Reduce group key")
    cols = list(inner.project(plan.group_key).columns)
    for agg in plan.aggregates:
        if not isinstance(agg.func, AggFunc):
            raise InvalidPlan(f"aggregate function {agg.func!r} is not an AggFunc")
        if agg.func is AggFunc.STRING_AGG:
            if type(agg.separator) is not str:
                raise InvalidPlan(f"string_agg() needs a string separator, got {agg.separator!r}")
        elif agg.separator is not None:
            raise InvalidPlan(f"{agg.func.value}() takes no separator (only string_agg does)")
        if agg.column is None:
            if agg.func is not AggFunc.COUNT:
                raise InvalidPlan(f"{agg.func.value}() needs a column (only count may omit it)")
            cols.append(Column("count", ColumnType(ScalarType.INT64, False)))
            continue
        _cols(inner, (agg.column,), f"Reduce {agg.func.value}()")
        c = inner.columns[agg.column]
        name = f"{agg.func.value}_{c.name}"
        if agg.func is AggFunc.COUNT:
            cols.append(Column(name, ColumnType(ScalarType.INT64, False)))
        elif agg.func in (AggFunc.SUM, AggFunc.AVG):
            if not c.type.scalar.is_numeric or c.type.scalar.is_narrow:
                raise TypeMismatch(
                    f"{agg.func.value}({c.name}) needs an int64, float64 or numeric, "
                    f"{c.name!r} is {c.type.scalar}"
                )
            numeric = c.type.scalar is ScalarType.NUMERIC
            avg = agg.func is AggFunc.AVG
            out = ScalarType.FLOAT64 if avg and not numeric else c.type.scalar
            cols.append(Column(name, ColumnType(out, True)))
        elif agg.func in _WANTS:
            want = _WANTS[agg.func]
            if c.type.scalar is not want:
                raise TypeMismatch(
                    f"{agg.func.value}({c.name}) needs a {want}, {c.name!r} is {c.type.scalar}"
                )
            cols.append(Column(name, ColumnType(want, True)))
        else:
            cols.append(Column(name, ColumnType(c.type.scalar, True)))
    return Schema(tuple(cols))


def _window_schema(plan: Window, inner: Schema) -> Schema:
    _cols(inner, plan.partition_key, "Window partition key")
    _cols(inner, tuple(o.column for o in plan.order_by), "Window order by")
    cols: list[Column] = []
    for f in plan.funcs:
        if not isinstance(f.kind, WindowFuncKind):
            raise InvalidPlan(f"window function {f.kind!r} is not a WindowFuncKind")
        _window_frame(f.frame, plan, inner)
        k = f.kind
        if k in (WindowFuncKind.ROW_NUMBER, WindowFuncKind.RANK, WindowFuncKind.DENSE_RANK):
            cols.append(Column(k.value, ColumnType(ScalarType.INT64, False)))
        elif k is WindowFuncKind.AGGREGATE:
            agg = f.aggregate
            if not isinstance(agg, Aggregate) or agg.distinct:
                raise InvalidPlan(f"window aggregate {agg!r} must be an Aggregate without distinct")
            cols.append(_reduce_schema(Reduce(plan.input, (), (agg,)), inner).columns[0])
        else:
            if f.column is None:
                raise InvalidPlan(f"{k.value}() needs a column")
            _cols(inner, (f.column,), f"Window {k.value}()")
            t = inner.columns[f.column].type.scalar
            if k in (WindowFuncKind.LAG, WindowFuncKind.LEAD):
                if type(f.offset) is not int:
                    raise InvalidPlan(f"{k.value}() offset {f.offset!r} must be an int")
                if f.default is not None:
                    _cols(inner, (f.default,), f"Window {k.value}() default")
                    d = inner.columns[f.default].type.scalar
                    if d is not t:
                        raise TypeMismatch(f"{k.value}() default is {d}, the column is {t}")
            cols.append(Column(f"{k.value}_{inner.columns[f.column].name}", ColumnType(t, True)))
    return inner.concat(Schema(tuple(cols)))


def _window_frame(frame: WindowFrame, plan: Window, inner: Schema) -> None:
    bounds = (frame.start, frame.end)
    order = list(WindowBoundKind)
    if (
        frame.start.kind is WindowBoundKind.UNBOUNDED_FOLLOWING
        or frame.end.kind is WindowBoundKind.UNBOUNDED_PRECEDING
        or order.index(frame.start.kind) > order.index(frame.end.kind)
    ):
        raise InvalidPlan(f"window frame from {frame.start.kind} to {frame.end.kind} is invalid")
    for b in bounds:
        offset = b.kind in (WindowBoundKind.PRECEDING, WindowBoundKind.FOLLOWING)
        if not offset:
            if b.offset is not None:
                raise InvalidPlan(f"window frame bound {b.kind} takes no offset")
            continue
        off = b.offset
        if (
            off is None
            or type(off) not in ((int,) if not frame.range else (int, float))
            or off < 0
            or off != off  # NaN
        ):
            raise InvalidPlan(f"window frame offset {b.offset!r} must be a non-negative number")
        if frame.range:
            if len(plan.order_by) != 1:
                raise InvalidPlan("a RANGE frame with an offset needs exactly one ORDER BY column")
            t = inner.columns[plan.order_by[0].column].type.scalar
            if not t.is_numeric:
                raise TypeMismatch(f"a RANGE frame offset needs a numeric ORDER BY column, not {t}")


_WANTS = {
    AggFunc.BOOL_AND: ScalarType.BOOL,
    AggFunc.BOOL_OR: ScalarType.BOOL,
    AggFunc.STRING_AGG: ScalarType.STRING,
}


def gets(plan: Plan) -> dict[GlobalId, Schema]:
    """Every collection ``plan`` reads by ``Get``, with the schema it expects (first occurrence)."""
    found: dict[GlobalId, Schema] = {}
    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, Get):
            if p.id in found and found[p.id] != p.schema:
                raise TypeMismatch(
                    f"Get({p.id}) used with two schemas: {found[p.id]} and {p.schema}"
                )
            found.setdefault(p.id, p.schema)
        stack.extend(children(p))
    return found


def object_order(desc: DataflowDescription) -> list[GlobalId]:
    """The objects of ``desc`` in an order where each comes after the objects it reads."""
    objs = {b.id: b for b in desc.objects_to_build}
    if len(objs) != len(desc.objects_to_build):
        raise InvalidPlan(f"dataflow {desc.debug_name!r} builds an object id twice")
    deps = {oid: [g for g in gets(b.plan) if g in objs] for oid, b in objs.items()}
    order: list[GlobalId] = []
    state: dict[GlobalId, int] = {}  # 1 = visiting, 2 = done

    def visit(oid: GlobalId, path: list[GlobalId]) -> None:
        if state.get(oid) == 2:
            return
        if state.get(oid) == 1:
            cycle = [*path[path.index(oid) :], oid]
            raise PlanCycle(f"objects depend on each other: {' -> '.join(map(str, cycle))}")
        state[oid] = 1
        for d in deps[oid]:
            visit(d, [*path, oid])
        state[oid] = 2
        order.append(oid)

    for b in desc.objects_to_build:
        visit(b.id, [])
    return order


def validate_dataflow(desc: DataflowDescription) -> dict[GlobalId, Schema]:
    """Check ``desc`` and return the schema of every import, index import and object.

    Imported collections take their schema from the ``Get`` nodes reading them;
    an index import may be read by its own id or by the id it indexes.
    """
    objects = {b.id for b in desc.objects_to_build}
    order = object_order(desc)
    imports: set[GlobalId] = {s.id for s in desc.source_imports}
    for ix in desc.index_imports:
        imports |= {ix.id, ix.on_id}
    clash = imports & objects
    if clash:
        raise InvalidPlan(f"ids both imported and built: {sorted(clash)}")
    schemas: dict[GlobalId, Schema] = {}
    for b in desc.objects_to_build:
        for gid, schema in gets(b.plan).items():
            if gid not in imports and gid not in objects:
                raise UnknownInput(
                    f"object {b.id} reads {gid}, which the dataflow neither imports nor builds"
                )
            if gid in imports:
                if gid in schemas and schemas[gid] != schema:
                    raise TypeMismatch(f"{gid} read with two schemas: {schemas[gid]} and {schema}")
                schemas[gid] = schema
    plans = {b.id: b.plan for b in desc.objects_to_build}
    for oid in order:
        try:
            schemas[oid] = typecheck(plans[oid], schemas)
        except (TypeMismatch, UnknownInput, UnknownColumn, ArityMismatch, InvalidPlan) as e:
            raise type(e)(f"object {oid}: {e}") from None
    for ix in desc.index_imports:
        s = schemas.get(ix.id, schemas.get(ix.on_id))
        if s is not None:
            schemas.setdefault(ix.id, s)
            schemas.setdefault(ix.on_id, s)
            _cols(s, ix.key, f"index import {ix.id} key")
    for ex in desc.index_exports:
        if ex.on_id not in schemas:
            raise UnknownInput(
                f"index export {ex.id} is on {ex.on_id}, which the dataflow does not have"
            )
        _cols(schemas[ex.on_id], ex.key, f"index export {ex.id} key")
    for sk in desc.sink_exports:
        if sk.from_id not in schemas:
            raise UnknownInput(f"sink {sk.id} reads {sk.from_id}, which the dataflow does not have")
    exports = desc.export_ids
    if len(set(exports)) != len(exports):
        raise InvalidPlan(f"dataflow {desc.debug_name!r} exports an id twice")
    return schemas
