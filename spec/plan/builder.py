"""The builder users write: a small, typed, DataFrame-like API that produces plans.

::

    orders = table("u1", Schema.of(("customer", "string"), ("amount", "int64", False)))
    big = orders.filter(col("amount") > 10).group_by("customer").agg(count(), sum_("amount"))
    df = DataflowBuilder("big_orders")
    view = df.build("u2", big)
    df.index("u3", view, key=["customer"])
    df.subscribe("t1", view)
    desc = df.finish(as_of=Antichain([0]))

Columns are named (``col("amount")``) or positional (``col("#1")``). Every
operation type-checks immediately; a mistake raises a typed
:class:`~tidegate.spec.errors.PlanError` that names the operation and the column.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..errors import InvalidPlan, PlanError, TypeMismatch, UnknownColumn
from ..frontier import Antichain, Row
from ..ids import GlobalId
from ..protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from .explain import explain
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
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
)
from .scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    scalar_type,
)
from .schema import ScalarType, Schema, scalar_type_of
from .typecheck import gets, typecheck, validate_dataflow

__all__ = [
    "AggSpec",
    "DataflowBuilder",
    "Expr",
    "Frame",
    "Grouped",
    "WindowSpec",
    "asc",
    "avg",
    "bool_and",
    "bool_or",
    "coalesce",
    "col",
    "concat",
    "constant",
    "count",
    "dense_rank",
    "desc",
    "first_value",
    "greatest",
    "lag",
    "last_value",
    "lead",
    "least",
    "lit",
    "max_",
    "min_",
    "nullif",
    "over",
    "range_",
    "rank",
    "row_number",
    "rows",
    "string_agg",
    "sum_",
    "table",
    "when",
]

IdLike: TypeAlias = GlobalId | str


def _gid(x: IdLike) -> GlobalId:
    return x if isinstance(x, GlobalId) else GlobalId.parse(x)


def _infer(value: Any) -> ScalarType | None:
    if value is None:
        return None
    t = scalar_type_of(value)
    if t is None:
        raise TypeMismatch(f"lit({value!r}): no SQL type for {type(value).__name__}")
    return t


def _resolve_column(name: str, schema: Schema) -> int:
    if name.startswith("#") and name[1:].isdigit():
        i = int(name[1:])
        schema.column(i)
        return i
    hits = [i for i, c in enumerate(schema.columns) if c.name == name]
    if not hits:
        raise UnknownColumn(f"unknown column {name!r}; columns are {list(schema.names)}")
    if len(hits) > 1:
        raise UnknownColumn(f"ambiguous column {name!r} (positions {hits}); use col('#{hits[0]}')")
    return hits[0]


class Expr:
    """An unresolved scalar expression: resolved against a frame's schema when used."""

    def __init__(self, build: Any, name: str | None = None) -> None:
        self._build = build  # (schema, hint) -> ScalarExpr
        self.name = name

    def resolve(self, schema: Schema, hint: ScalarType | None = None) -> ScalarExpr:
        """The positional expression over ``schema`` (raises a typed error naming the column)."""
        e: ScalarExpr = self._build(schema, hint)
        scalar_type(e, schema)
        return e

    def alias(self, name: str) -> Expr:
        """The same expression, output as column ``name``."""
        return Expr(self._build, name)

    # -- operators --
    def _bin(self, func: BinaryFunc, other: Any, swap: bool = False) -> Expr:
        a, b = (_expr(other), self) if swap else (self, _expr(other))

        def build(schema: Schema, hint: ScalarType | None) -> ScalarExpr:
            left, right = _resolve_pair(a, b, schema)
            if func in _ARITH:  # a narrow number takes part as its wide type
                left, right = _widened(left, schema), _widened(right, schema)
            return CallBinary(func, left, right)

        return Expr(build)

    def __add__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.ADD, o)

    def __radd__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.ADD, o, swap=True)

    def __sub__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.SUB, o)

    def __rsub__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.SUB, o, swap=True)

    def __mul__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.MUL, o)

    def __rmul__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.MUL, o, swap=True)

    def __truediv__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.DIV, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.DIV, o, swap=True)

    def __mod__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.MOD, o)

    def __eq__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._bin(BinaryFunc.EQ, o)

    def __ne__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._bin(BinaryFunc.NE, o)

    def __lt__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.LT, o)

    def __le__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.LE, o)

    def __gt__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.GT, o)

    def __ge__(self, o: Any) -> Expr:
        return self._bin(BinaryFunc.GE, o)

    __hash__ = None  # type: ignore[assignment]

    def __and__(self, o: Any) -> Expr:
        return _variadic(VariadicFunc.AND, [self, o])

    def __or__(self, o: Any) -> Expr:
        return _variadic(VariadicFunc.OR, [self, o])

    def __invert__(self) -> Expr:
        return self._unary(UnaryFunc.NOT)

    def __neg__(self) -> Expr:
        return self._unary(UnaryFunc.NEG)

    def _unary(self, func: UnaryFunc) -> Expr:
        return Expr(lambda s, h: CallUnary(func, self.resolve(s)))

    def is_null(self) -> Expr:
        return self._unary(UnaryFunc.IS_NULL)

    def is_not_null(self) -> Expr:
        return self.is_null().__invert__()

    def lower(self) -> Expr:
        return self._unary(UnaryFunc.LOWER)

    def upper(self) -> Expr:
        return self._unary(UnaryFunc.UPPER)

    def length(self) -> Expr:
        return self._unary(UnaryFunc.LENGTH)

    def like(self, pattern: Any, escape: str | None = None) -> Expr:
        """``self LIKE pattern`` (escape ``\\``), or ``... ESCAPE escape`` (one character, or
        ``""`` for none)."""
        if escape is None:
            return self._bin(BinaryFunc.LIKE, pattern)
        return _variadic(VariadicFunc.LIKE_ESCAPE, [self, pattern, lit(escape, ScalarType.STRING)])

    def ilike(self, pattern: Any, escape: str | None = None) -> Expr:
        """Case-insensitive :meth:`like` (each character lower-cased, one to one)."""
        if escape is None:
            return self._bin(BinaryFunc.ILIKE, pattern)
        return _variadic(VariadicFunc.ILIKE_ESCAPE, [self, pattern, lit(escape, ScalarType.STRING)])

    def cat(self, other: Any) -> Expr:
        """``self || other``: NULL if either is NULL (``concat()`` skips NULLs instead)."""
        return self._bin(BinaryFunc.CONCAT, other)

    def abs(self) -> Expr:
        return self._unary(UnaryFunc.ABS)

    def round(self) -> Expr:
        """To an integral value of the same type, halves away from zero."""
        return self._unary(UnaryFunc.ROUND)

    def trim(self) -> Expr:
        """Without leading and trailing spaces (``' '`` only, as SQL's ``trim``)."""
        return self._unary(UnaryFunc.TRIM)

    def ltrim(self) -> Expr:
        return self._unary(UnaryFunc.LTRIM)

    def rtrim(self) -> Expr:
        return self._unary(UnaryFunc.RTRIM)

    def replace(self, old: Any, new: Any) -> Expr:
        """Every occurrence of ``old`` replaced by ``new`` (an empty ``old`` changes nothing)."""
        return _variadic(VariadicFunc.REPLACE, [self, old, new])

    def nullif(self, other: Any) -> Expr:
        """NULL if ``self = other``, else ``self``."""
        return nullif(self, other)

    def add_ms(self, ms: Any) -> Expr:
        """A timestamp (or a date's midnight) plus ``ms`` milliseconds (int64)."""
        return self._bin(BinaryFunc.ADD_MS, ms)

    def sub_ms(self, ms: Any) -> Expr:
        """A timestamp (or a date's midnight) minus ``ms`` milliseconds (int64)."""
        return self._bin(BinaryFunc.SUB_MS, ms)

    def date_trunc(self, unit: str) -> Expr:
        """The timestamp truncated to ``unit`` (second, minute, hour, day, week, month, quarter, year)."""
        u = Literal(unit, ScalarType.STRING)
        return Expr(lambda s, h: CallVariadic(VariadicFunc.DATE_TRUNC, (u, self.resolve(s))))

    def extract(self, field: str) -> Expr:
        """``extract(field FROM self)`` (year, quarter, month, day, hour, minute, second, dow, doy, epoch)."""
        f = Literal(field, ScalarType.STRING)
        return Expr(lambda s, h: CallVariadic(VariadicFunc.EXTRACT, (f, self.resolve(s))))

    def substring(self, start: int, length: int | None = None) -> Expr:
        args = [self, start] if length is None else [self, start, length]
        return _variadic(VariadicFunc.SUBSTRING, args)

    def cast(self, to: ScalarType | str) -> Expr:
        target = ScalarType(to)
        return Expr(lambda s, h: Cast(self.resolve(s), target))

    def __bool__(self) -> bool:
        raise TypeError("an Expr has no truth value; combine conditions with &, | and ~")


def _expr(x: Any) -> Expr:
    return x if isinstance(x, Expr) else lit(x)


def _resolve_pair(a: Expr, b: Expr, schema: Schema) -> tuple[ScalarExpr, ScalarExpr]:
    """Resolve two operands; an untyped NULL literal takes the other side's type, and an int
    literal beside a float64 becomes a float."""
    types = []
    for e in (a, b):
        with contextlib.suppress(_NeedsHint):
            types.append(scalar_type(e.resolve(schema), schema).scalar)
    known = ScalarType.FLOAT64 if ScalarType.FLOAT64 in types else (types[0] if types else None)
    return a.resolve(schema, known), b.resolve(schema, known)


class _NeedsHint(TypeMismatch):
    """An untyped NULL literal with nothing to take a type from."""


def _variadic(func: VariadicFunc, args: Sequence[Any]) -> Expr:
    exprs = [_expr(a) for a in args]

    def build(schema: Schema, hint: ScalarType | None) -> ScalarExpr:
        resolved: list[ScalarExpr | None] = []
        for e in exprs:
            try:
                resolved.append(e.resolve(schema, hint))
            except _NeedsHint:
                resolved.append(None)
        types = [scalar_type(r, schema).scalar for r in resolved if r is not None]
        known = ScalarType.FLOAT64 if ScalarType.FLOAT64 in types else (types[0] if types else hint)
        out = tuple(e.resolve(schema, known) for e in exprs)
        return CallVariadic(func, out)

    return Expr(build)


def col(name: str) -> Expr:
    """The column called ``name`` (or at position ``#i``)."""
    return Expr(
        lambda s, h: ColumnRef(_resolve_column(name, s)),
        name=None if name.startswith("#") else name,
    )


_ARITH = frozenset({BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD})


def _widened(e: ScalarExpr, schema: Schema) -> ScalarExpr:
    """``e`` cast to its wide type if it is a smallint, integer or real (the plan's arithmetic
    takes int64, float64 and numeric)."""
    try:
        t = scalar_type(e, schema).scalar
    except PlanError:
        return e  # ill-typed: the call's type check says why
    return Cast(e, t.wide) if t.is_narrow else e


def lit(value: Any, type: ScalarType | str | None = None) -> Expr:
    """A constant. Its type is ``type``, else inferred from ``value`` (an int beside a float64
    becomes a float); ``None`` takes its type from the other operand."""
    explicit = ScalarType(type) if type is not None else None
    inferred = _infer(value)

    def build(schema: Schema, hint: ScalarType | None) -> ScalarExpr:
        if explicit is not None:
            return Literal(value, explicit)
        if inferred is ScalarType.INT64 and hint is ScalarType.FLOAT64:
            return Literal(float(value), ScalarType.FLOAT64)
        t = inferred or hint
        if t is None:
            raise _NeedsHint("lit(None) needs a type: write lit(None, 'int64')")
        return Literal(value, t)

    return Expr(build)


def coalesce(*exprs: Any) -> Expr:
    """The first non-NULL argument."""
    return _variadic(VariadicFunc.COALESCE, exprs)


def concat(*exprs: Any) -> Expr:
    """String concatenation, skipping NULLs (``a.cat(b)`` is ``a || b``, NULL if either is)."""
    return _variadic(VariadicFunc.CONCAT, exprs)


def greatest(*exprs: Any) -> Expr:
    """The largest non-NULL argument (NULL if all are); arguments of one type."""
    return _variadic(VariadicFunc.GREATEST, exprs)


def least(*exprs: Any) -> Expr:
    """The smallest non-NULL argument (NULL if all are); arguments of one type."""
    return _variadic(VariadicFunc.LEAST, exprs)


def nullif(a: Any, b: Any) -> Expr:
    """NULL if ``a = b``, else ``a``."""
    x, y = _expr(a), _expr(b)

    def build(schema: Schema, hint: ScalarType | None) -> ScalarExpr:
        left, right = _resolve_pair(x, y, schema)
        return CallVariadic(VariadicFunc.NULLIF, (left, right))

    return Expr(build)


class _When:
    def __init__(self, cond: Expr, then: Any) -> None:
        self.cond, self.then = cond, _expr(then)

    def otherwise(self, els: Any) -> Expr:
        cond, then, other = self.cond, self.then, _expr(els)

        def build(schema: Schema, hint: ScalarType | None) -> ScalarExpr:
            t, e = _resolve_pair(then, other, schema)
            return If(cond.resolve(schema), t, e)

        return Expr(build)


def when(cond: Expr, then: Any) -> _When:
    """``when(cond, a).otherwise(b)``: CASE WHEN cond THEN a ELSE b END."""
    return _When(cond, then)


@dataclass(frozen=True)
class AggSpec:
    """An aggregate in ``group_by(...).agg(...)``; ``column=None`` for ``count()``."""

    func: AggFunc
    column: str | None = None
    distinct: bool = False
    name: str | None = None
    separator: str | None = None

    def alias(self, name: str) -> AggSpec:
        return AggSpec(self.func, self.column, self.distinct, name, self.separator)


def count(column: str | None = None, *, distinct: bool = False) -> AggSpec:
    return AggSpec(AggFunc.COUNT, column, distinct)


def sum_(column: str, *, distinct: bool = False) -> AggSpec:
    return AggSpec(AggFunc.SUM, column, distinct)


def min_(column: str) -> AggSpec:
    return AggSpec(AggFunc.MIN, column)


def max_(column: str) -> AggSpec:
    return AggSpec(AggFunc.MAX, column)


def avg(column: str, *, distinct: bool = False) -> AggSpec:
    return AggSpec(AggFunc.AVG, column, distinct)


def bool_and(column: str) -> AggSpec:
    """True if every value is true (NULLs ignored; NULL if there are none)."""
    return AggSpec(AggFunc.BOOL_AND, column)


def bool_or(column: str) -> AggSpec:
    """True if some value is true (NULLs ignored; NULL if there are none)."""
    return AggSpec(AggFunc.BOOL_OR, column)


def string_agg(column: str, separator: str, *, distinct: bool = False) -> AggSpec:
    """The values joined by ``separator``, in ascending code point order (NULLs skipped)."""
    return AggSpec(AggFunc.STRING_AGG, column, distinct, separator=separator)


@dataclass(frozen=True)
class _Order:
    column: str
    desc: bool
    nulls_last: bool


def asc(column: str, *, nulls_last: bool = True) -> _Order:
    return _Order(column, False, nulls_last)


def desc(column: str, *, nulls_last: bool = True) -> _Order:
    return _Order(column, True, nulls_last)


_DEFAULT_FRAME = WindowFrame()
"""SQL's default frame: ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``."""


@dataclass(frozen=True)
class WindowSpec:
    """A window function in ``frame.window(...)``: made by :func:`row_number`, :func:`rank`,
    :func:`dense_rank`, :func:`lag`, :func:`lead`, :func:`first_value`, :func:`last_value`,
    or :func:`over` (an aggregate over a frame); ``alias()`` names its column."""

    kind: WindowFuncKind
    column: str | None = None
    offset: int = 1
    default: str | None = None
    agg: AggSpec | None = None
    frame: WindowFrame = _DEFAULT_FRAME
    name: str | None = None

    def alias(self, name: str) -> WindowSpec:
        return dataclasses.replace(self, name=name)


def row_number() -> WindowSpec:
    """The row's position in its partition, from 1 (ties ordered by the whole row)."""
    return WindowSpec(WindowFuncKind.ROW_NUMBER)


def rank() -> WindowSpec:
    """The position of the row's first peer (rows equal in the order), from 1."""
    return WindowSpec(WindowFuncKind.RANK)


def dense_rank() -> WindowSpec:
    """The number of the row's peer group, from 1."""
    return WindowSpec(WindowFuncKind.DENSE_RANK)


def lag(column: str, offset: int = 1, default: str | None = None) -> WindowSpec:
    """``column`` of the row ``offset`` rows before, else the ``default`` column (or NULL)."""
    return WindowSpec(WindowFuncKind.LAG, column, offset, default)


def lead(column: str, offset: int = 1, default: str | None = None) -> WindowSpec:
    """``column`` of the row ``offset`` rows after, else the ``default`` column (or NULL)."""
    return WindowSpec(WindowFuncKind.LEAD, column, offset, default)


def first_value(column: str, frame: WindowFrame = _DEFAULT_FRAME) -> WindowSpec:
    """``column`` of the frame's first row (the default frame: up to the row's last peer)."""
    return WindowSpec(WindowFuncKind.FIRST_VALUE, column, frame=frame)


def last_value(column: str, frame: WindowFrame = _DEFAULT_FRAME) -> WindowSpec:
    """``column`` of the frame's last row."""
    return WindowSpec(WindowFuncKind.LAST_VALUE, column, frame=frame)


def over(agg: AggSpec, frame: WindowFrame = _DEFAULT_FRAME) -> WindowSpec:
    """The aggregate ``agg`` (no ``distinct``) over each row's frame."""
    return WindowSpec(WindowFuncKind.AGGREGATE, agg=agg, frame=frame)


def _bound(n: int | float | None, start: bool) -> WindowBound:
    if n is None:
        kind = WindowBoundKind.UNBOUNDED_PRECEDING if start else WindowBoundKind.UNBOUNDED_FOLLOWING
        return WindowBound(kind)
    if n == 0:
        return WindowBound(WindowBoundKind.CURRENT_ROW)
    if n < 0:
        return WindowBound(WindowBoundKind.PRECEDING, -n)
    return WindowBound(WindowBoundKind.FOLLOWING, n)


def rows(start: int | None, end: int | None = 0) -> WindowFrame:
    """``ROWS BETWEEN``: ``-2`` is 2 PRECEDING, ``0`` CURRENT ROW, ``1`` 1 FOLLOWING, ``None``
    unbounded (on the start's side, or the end's)."""
    return WindowFrame(False, _bound(start, True), _bound(end, False))


def range_(start: float | None, end: float | None = 0) -> WindowFrame:
    """``RANGE BETWEEN``: offsets are distances of the (single, numeric) order column's
    value; ``0`` is the row's peers' end, ``None`` unbounded."""
    return WindowFrame(True, _bound(start, True), _bound(end, False))


def _checked(what: str, plan: Plan) -> Frame:
    try:
        return Frame(plan, typecheck(plan))
    except PlanError as e:
        raise type(e)(f"{what}: {e}") from None


def _in(what: str, fn: Any) -> Any:
    try:
        return fn()
    except PlanError as e:
        raise type(e)(f"{what}: {e}") from None


class Frame:
    """A plan and its schema; every method returns a new frame (nothing runs)."""

    def __init__(self, plan: Plan, schema: Schema) -> None:
        self.plan = plan
        self.schema = schema

    @property
    def columns(self) -> tuple[str, ...]:
        return self.schema.names

    def explain(self) -> str:
        return explain(self.plan)

    def _cols(self, what: str, names: Iterable[str]) -> tuple[int, ...]:
        return tuple(
            _in(f"{what} column {n!r}", lambda n=n: _resolve_column(n, self.schema)) for n in names
        )

    def filter(self, *predicates: Expr) -> Frame:
        preds = tuple(
            _in("filter()", lambda p=p: _expr(p).resolve(self.schema)) for p in predicates
        )
        return _checked("filter()", Filter(self.plan, preds))

    def valid_during(self, start: Any = None, end: Any = None) -> Frame:
        """The rows at the times ``t`` with ``start <= t < end``, each bound an expression of
        the row (a column name, an ``Expr`` or an int; ``None``: open) in milliseconds or a
        timestamp: a temporal filter, as SQL's ``WHERE mz_now() >= start AND mz_now() <
        end``. A row leaves the result when time reaches ``end``, with no new input."""
        preds: list[tuple[TemporalOp, ScalarExpr]] = []
        for op, bound in ((TemporalOp.GE, start), (TemporalOp.LT, end)):
            if bound is None:
                continue
            e = col(bound) if isinstance(bound, str) else _expr(bound)
            preds.append((op, _in("valid_during()", lambda e=e: e.resolve(self.schema))))
        if not preds:
            raise InvalidPlan("valid_during() needs a start, an end or both")
        return _checked("valid_during()", TemporalFilter(self.plan, tuple(preds)))

    def with_columns(self, **exprs: Any) -> Frame:
        """Append computed columns (each may use the ones before it)."""
        schema, plan_exprs = self.schema, []
        for name, e in exprs.items():
            resolved = _in(
                f"with_columns({name}=...)", lambda e=e, schema=schema: _expr(e).resolve(schema)
            )
            plan_exprs.append(resolved)
            schema = typecheck(Map(Constant((), schema), (resolved,), (name,)))
        return _checked("with_columns()", Map(self.plan, tuple(plan_exprs), tuple(exprs)))

    def select(self, *items: str | Expr) -> Frame:
        """Keep/reorder columns or compute expressions (``col("x").alias("y")``)."""
        names: list[str] = []
        exprs: list[ScalarExpr] = []
        for k, item in enumerate(items):
            e = col(item) if isinstance(item, str) else item
            exprs.append(_in(f"select() item #{k}", lambda e=e: e.resolve(self.schema)))
            names.append(e.name or f"column{k + 1}")
        refs = [e for e in exprs if isinstance(e, ColumnRef)]
        if len(refs) == len(exprs) and all(
            self.schema.columns[e.index].name == n for e, n in zip(refs, names, strict=True)
        ):
            return _checked("select()", Project(self.plan, tuple(e.index for e in refs)))
        n = self.schema.arity
        mapped = Map(self.plan, tuple(exprs), tuple(names))
        return _checked("select()", Project(mapped, tuple(range(n, n + len(exprs)))))

    def union(self, *others: Frame) -> Frame:
        return _checked("union()", Union((self.plan, *(o.plan for o in others))))

    def negate(self) -> Frame:
        return _checked("negate()", Negate(self.plan))

    def except_all(self, other: Frame) -> Frame:
        """Multiset difference (may leave negative multiplicities; follow with ``threshold()``)."""
        return _checked("except_all()", Union((self.plan, Negate(other.plan))))

    def distinct(self) -> Frame:
        return _checked("distinct()", Distinct(self.plan))

    def threshold(self) -> Frame:
        return _checked("threshold()", Threshold(self.plan))

    def join(
        self, other: Frame, on: str | Sequence[str | tuple[str, str]] = (), how: str = "inner"
    ) -> Frame:
        """Equi-join: ``on="k"`` (same name both sides) or ``on=[("left_col", "right_col"), ...]``.

        ``how`` is ``"inner"``, ``"left"``, ``"right"`` or ``"full"`` (outer joins pad the
        unmatched rows of the other side with NULLs)."""
        pairs = [on] if isinstance(on, str) else list(on)
        n = self.schema.arity
        eqs = []
        for p in pairs:
            ln, rn = (p, p) if isinstance(p, str) else p
            li = _in(f"join() left column {ln!r}", lambda ln=ln: _resolve_column(ln, self.schema))
            ri = _in(f"join() right column {rn!r}", lambda rn=rn: _resolve_column(rn, other.schema))
            eqs.append((li, n + ri))
        try:
            kind = JoinKind(how)
        except ValueError:
            raise InvalidPlan(
                f"join(): how={how!r}, expected 'inner', 'left', 'right' or 'full'"
            ) from None
        return _checked("join()", Join((self.plan, other.plan), tuple(eqs), kind))

    def group_by(self, *keys: str) -> Grouped:
        return Grouped(self, self._cols("group_by()", keys))

    def top_k(
        self,
        by: Sequence[str | _Order] = (),
        limit: int | None = None,
        offset: int = 0,
        group_by: Sequence[str] = (),
    ) -> Frame:
        """Per group, rows ``offset .. offset+limit`` ordered ``by`` (``desc("x")`` for descending)."""
        order = []
        for o in by:
            spec = asc(o) if isinstance(o, str) else o
            (i,) = self._cols("top_k() order", [spec.column])
            order.append(ColumnOrder(i, spec.desc, spec.nulls_last))
        key = self._cols("top_k() group", group_by)
        return _checked("top_k()", TopK(self.plan, key, tuple(order), limit, offset))

    def window(
        self,
        *funcs: WindowSpec,
        partition_by: Sequence[str] = (),
        order_by: Sequence[str | _Order] = (),
    ) -> Frame:
        """Every row with one more column per window function, computed over its partition
        (rows equal in ``partition_by``) ordered ``by`` ``order_by``. A change recomputes
        the partitions it touches only."""
        order = []
        for o in order_by:
            spec = asc(o) if isinstance(o, str) else o
            (i,) = self._cols("window() order", [spec.column])
            order.append(ColumnOrder(i, spec.desc, spec.nulls_last))
        built = []
        for f in funcs:
            col_ = None if f.column is None else self._cols(f"{f.kind.value}()", [f.column])[0]
            default = None if f.default is None else self._cols("default", [f.default])[0]
            agg = None
            if f.agg is not None:
                a = f.agg
                column = (
                    None if a.column is None else self._cols(f"{a.func.value}()", [a.column])[0]
                )
                agg = Aggregate(a.func, column, a.distinct, a.separator)
            built.append(WindowFunc(f.kind, col_, f.offset, default, agg, f.frame))
        key = self._cols("window() partition", partition_by)
        out = _checked("window()", Window(self.plan, key, tuple(order), tuple(built)))
        if not any(f.name for f in funcs):
            return out
        names = list(out.schema.names)
        base = self.schema.arity
        for k, f in enumerate(funcs):
            if f.name:
                names[base + k] = f.name
        n = out.schema.arity
        mapped = Map(out.plan, tuple(ColumnRef(i) for i in range(n)), tuple(names))
        return _checked("window()", Project(mapped, tuple(range(n, 2 * n))))

    def index(self, *keys: str) -> Frame:
        """The same collection, arranged by ``keys``."""
        return _checked("index()", ArrangeBy(self.plan, (self._cols("index()", keys),)))


class Grouped:
    """``frame.group_by(keys)``: call :meth:`agg`."""

    def __init__(self, frame: Frame, key: tuple[int, ...]) -> None:
        self.frame, self.key = frame, key

    def agg(self, *aggs: AggSpec) -> Frame:
        frame = self.frame
        built = []
        widened: list[ScalarExpr] = []  # sums of narrow numbers take them widened
        wide_names: list[str] = []
        n_in = frame.schema.arity
        for a in aggs:
            column = None if a.column is None else frame._cols(f"{a.func.value}()", [a.column])[0]
            if column is not None and a.func in (AggFunc.SUM, AggFunc.AVG):
                t = frame.schema.columns[column].type.scalar
                if t.is_narrow:
                    widened.append(Cast(ColumnRef(column), t.wide))
                    wide_names.append(frame.schema.columns[column].name)
                    column = n_in + len(widened) - 1
            built.append(Aggregate(a.func, column, a.distinct, a.separator))
        source: Plan = frame.plan
        if widened:
            source = Map(source, tuple(widened), tuple(wide_names))
        out = _checked("agg()", Reduce(source, self.key, tuple(built)))
        if not any(a.name for a in aggs):
            return out
        names = list(out.schema.names)
        for k, a in enumerate(aggs):
            if a.name:
                names[len(self.key) + k] = a.name
        n = out.schema.arity
        mapped = Map(out.plan, tuple(ColumnRef(i) for i in range(n)), tuple(names))
        return _checked("agg()", Project(mapped, tuple(range(n, 2 * n))))


def table(id: IdLike, schema: Schema) -> Frame:
    """The collection ``id`` (``"u1"`` or a GlobalId) with ``schema``."""
    return Frame(Get(_gid(id), schema), schema)


def constant(rows: Iterable[Row | tuple[Row, int]], schema: Schema) -> Frame:
    """A fixed collection: rows (multiplicity 1) or ``(row, diff)`` pairs."""
    entries = tuple(
        r if len(r) == 2 and isinstance(r[0], tuple) and isinstance(r[1], int) else (r, 1)
        for r in rows
    )
    return _checked("constant()", Constant(entries, schema))


class DataflowBuilder:
    """Collects objects and exports, then makes a validated :class:`DataflowDescription`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._objects: list[BuildDesc] = []
        self._index_imports: list[IndexImport] = []
        self._index_exports: list[IndexExport] = []
        self._sinks: list[SinkExport] = []

    def build(self, id: IdLike, frame: Frame) -> Frame:
        """Build ``frame`` as object ``id``; returns a frame reading it, for further objects."""
        gid = _gid(id)
        self._objects.append(BuildDesc(gid, frame.plan))
        return Frame(Get(gid, frame.schema), frame.schema)

    def import_index(
        self, id: IdLike, on: IdLike, schema: Schema, key: Sequence[str] = ()
    ) -> Frame:
        """Read index ``id`` (arranging collection ``on`` by ``key``), exported by another dataflow."""
        gid, on_id = _gid(id), _gid(on)
        cols = tuple(
            _in(f"import_index() key {k!r}", lambda k=k: _resolve_column(k, schema)) for k in key
        )
        self._index_imports.append(IndexImport(gid, on_id, cols))
        return Frame(Get(on_id, schema), schema)

    def index(self, id: IdLike, on: Frame, key: Sequence[str] = ()) -> None:
        """Export an index ``id`` of built object ``on`` by ``key`` columns."""
        self._index_exports.append(
            IndexExport(_gid(id), self._object_id(on, "index()"), on._cols("index()", key))
        )

    def materialize(self, id: IdLike, on: Frame) -> None:
        """Export built object ``on`` into storage collection ``id`` (a materialized view)."""
        self._sinks.append(
            SinkExport(_gid(id), self._object_id(on, "materialize()"), MaterializedViewConnection())
        )

    def subscribe(
        self, id: IdLike, on: Frame, *, with_snapshot: bool = True, up_to: Antichain | None = None
    ) -> None:
        """Export a subscribe ``id`` streaming the changes of built object ``on``."""
        self._sinks.append(
            SinkExport(
                _gid(id),
                self._object_id(on, "subscribe()"),
                SubscribeConnection(),
                with_snapshot,
                up_to if up_to is not None else Antichain.empty(),
            )
        )

    def _object_id(self, frame: Frame, what: str) -> GlobalId:
        if isinstance(frame.plan, Get) and any(o.id == frame.plan.id for o in self._objects):
            return frame.plan.id
        raise InvalidPlan(f"{what}: export a frame returned by build(), not an unbuilt expression")

    def finish(self, as_of: Antichain | None = None) -> DataflowDescription:
        """The validated dataflow; source imports are every read collection not built or index-imported."""
        built = {o.id for o in self._objects}
        imported = {i.id for i in self._index_imports} | {i.on_id for i in self._index_imports}
        sources: list[GlobalId] = []
        for o in self._objects:
            for g in gets(o.plan):
                if g not in built and g not in imported and g not in sources:
                    sources.append(g)
        desc = DataflowDescription(
            self.name,
            source_imports=tuple(SourceImport(g) for g in sorted(sources)),
            index_imports=tuple(self._index_imports),
            objects_to_build=tuple(self._objects),
            index_exports=tuple(self._index_exports),
            sink_exports=tuple(self._sinks),
            as_of=as_of,
        )
        validate_dataflow(desc)
        return desc
