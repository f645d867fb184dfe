"""Binding and lowering: a sqlglot query tree, with names resolved against a catalog, to a plan.

:func:`lower_query` turns a query (``SELECT``, set operations, ``WITH``,
subqueries in ``FROM``) into a :class:`Lowered`: a :mod:`tidegate.spec.plan`
plan, its output columns, and the ``ORDER BY``/``LIMIT``/``OFFSET`` that a
peek applies as its finishing (:meth:`Lowered.finishing`) or a view as a
``TopK`` (:meth:`Lowered.relation`). Everything here is pure.

How SQL maps onto the IR:

* ``FROM a, b`` / ``CROSS JOIN``: a ``Join`` without equivalences;
  ``[INNER] JOIN ... ON``: equalities between the two sides become the join's
  equivalences (an expression on either side is computed into a column
  first), anything else a ``Filter`` after the join; ``LEFT JOIN``: the IR's
  left join, whose ``ON`` may add conditions on the right side only (they
  filter the right input); ``RIGHT JOIN``: a left join with the inputs
  swapped; ``FULL JOIN`` only if the IR has ``JoinKind("full")``.
* ``GROUP BY`` / aggregates: a ``Map`` of the keys and arguments, a
  ``Reduce``, then ``HAVING`` as a ``Filter``. Without ``GROUP BY`` an
  aggregate over no rows still answers one row (``count`` 0, others NULL):
  ``Union(Reduce, default, Negate(default x [Reduce non-empty]))``.
* ``DISTINCT``: ``Distinct``; ``UNION``: ``Union`` (then ``Distinct``);
  ``EXCEPT ALL``: ``Threshold(a - b)``; ``INTERSECT ALL``:
  ``a - Threshold(a - b)``; the distinct forms take ``Distinct`` inputs.
* Types follow PostgreSQL's rules where the IR allows: an integer meets a
  float as a float, a string literal takes the type it is compared with or
  assigned to (``d = '2024-01-01'``), an untyped ``NULL`` the other
  operand's type; ``a || b`` is NULL if either is (``concat`` skips NULLs).
  Integer division truncates, as in PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..errors import (
    AmbiguousColumn,
    PlanError,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    UndefinedColumn,
    UndefinedObject,
    UnsupportedSql,
    WrongObjectType,
)
from ..plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    ColumnRef,
    ColumnType,
    Constant,
    Distinct,
    Filter,
    If,
    Join,
    JoinKind,
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
    scalar_type,
    typecheck,
)
from ..plan.scalar import CAST_TABLE
from ..plan.scalar_eval import cast_value, eval_scalar
from ..protocol.types import ColumnOrder, RowSetFinishing
from .catalog import CatalogItem, SqlCatalog

__all__ = [
    "Lowered",
    "Scope",
    "ScopeColumn",
    "bind_scalar",
    "constant_value",
    "lower_query",
    "pg_type",
    "position_of",
]

S = ScalarType

_PG_NAMES = {
    S.INT64: "bigint",
    S.FLOAT64: "double precision",
    S.STRING: "text",
    S.BOOL: "boolean",
    S.DATE: "date",
    S.TIMESTAMP: "timestamp",
}


def pg_type(t: ScalarType | None) -> str:
    """PostgreSQL's name of a scalar type (``unknown`` for an untyped NULL)."""
    return "unknown" if t is None else _PG_NAMES[t]


def position_of(node: Any) -> int | None:
    """The 1-based offset of the first token of ``node`` in its statement, if sqlglot kept it."""
    best: int | None = None
    if not isinstance(node, exp.Expression):
        return None
    for n in node.walk():
        meta = getattr(n, "_meta", None) or {}
        start = meta.get("start")
        if isinstance(start, int) and (best is None or start < best):
            best = start
    return None if best is None else best + 1


def _err(cls: type[SqlError], message: str, node: Any = None, hint: str | None = None) -> SqlError:
    return cls(message, position=position_of(node), hint=hint)


def _unsupported(construct: str, node: Any = None) -> UnsupportedSql:
    return UnsupportedSql(construct, position=position_of(node))


def ident(node: Any) -> str:
    """An identifier's name: as written if quoted, else folded to lower case (as PostgreSQL does)."""
    if isinstance(node, exp.Identifier):
        return str(node.this) if node.quoted else str(node.this).lower()
    if isinstance(node, str):
        return node.lower()
    if isinstance(node, exp.Expression) and isinstance(node.this, exp.Identifier):
        return ident(node.this)
    return str(node.name).lower()


# -- scopes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeColumn:
    """A column a name can refer to: ``qualifier.name`` (``hidden`` from ``*`` and bare names)."""

    qualifier: str | None
    name: str
    type: ColumnType
    hidden: bool = False


@dataclass(frozen=True)
class Scope:
    """The columns of a relation being bound, in plan order."""

    columns: tuple[ScopeColumn, ...]

    @staticmethod
    def of(schema: Schema, qualifier: str | None) -> Scope:
        return Scope(tuple(ScopeColumn(qualifier, c.name, c.type) for c in schema.columns))

    def concat(self, other: Scope) -> Scope:
        return Scope(self.columns + other.columns)

    def retyped(self, schema: Schema) -> Scope:
        return Scope(
            tuple(
                dataclasses.replace(c, type=s.type)
                for c, s in zip(self.columns, schema.columns, strict=True)
            )
        )

    def schema(self) -> Schema:
        return Schema(tuple(Column(c.name, c.type) for c in self.columns))

    def resolve(self, name: str, qualifier: str | None, node: Any) -> int:
        """The position of column ``[qualifier.]name`` [UndefinedColumn, AmbiguousColumn]."""

        def matches(fold: bool) -> list[int]:
            def eq(a: str | None, b: str | None) -> bool:
                if a is None or b is None:
                    return a == b
                return a.lower() == b.lower() if fold else a == b

            return [
                i
                for i, c in enumerate(self.columns)
                if eq(c.name, name)
                and (
                    (qualifier is None and not c.hidden)
                    or (qualifier is not None and eq(c.qualifier, qualifier))
                )
            ]

        hits = matches(False) or matches(True)
        shown = f"{qualifier}.{name}" if qualifier else name
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise _err(AmbiguousColumn, f'column reference "{shown}" is ambiguous', node)
        if qualifier is not None and not any(
            c.qualifier is not None and c.qualifier.lower() == qualifier.lower()
            for c in self.columns
        ):
            raise _err(
                UndefinedObject,
                f'missing FROM-clause entry for table "{qualifier}"',
                node,
            )
        candidates = [
            f"{c.qualifier}.{c.name}" if c.qualifier and qualifier else c.name
            for c in self.columns
            if not c.hidden
        ]
        near = difflib.get_close_matches(shown, candidates, n=1, cutoff=0.6)
        hint = f'Perhaps you meant to reference the column "{near[0]}".' if near else None
        raise _err(UndefinedColumn, f'column "{shown}" does not exist', node, hint)


# -- typed expressions ----------------------------------------------------------------------


@dataclass(frozen=True)
class TExpr:
    """A bound expression: ``expr`` with type ``type``; ``type=None`` is an untyped NULL.

    ``literal`` holds a string literal's text: it may still become another type
    (PostgreSQL's "unknown" literals), see :func:`_coerce`.
    """

    expr: ScalarExpr | None
    type: ColumnType | None
    literal: str | None = None

    @property
    def scalar(self) -> ScalarType | None:
        return None if self.type is None else self.type.scalar


def _literal_as(text: str, to: ScalarType, node: Any) -> Literal:
    try:
        value = cast_value(text, to)
    except Exception:
        raise _err(
            SqlTypeError, f'invalid input syntax for type {pg_type(to)}: "{text}"', node
        ) from None
    return Literal(value, to)


def _coerce(te: TExpr, to: ScalarType, node: Any, what: str = "") -> ScalarExpr:
    """``te`` as a ``to`` (implicit casts only: int to float, literals, NULL) [SqlTypeError]."""
    if te.expr is None or te.type is None:
        return Literal(None, to)
    if te.type.scalar is to:
        return te.expr
    if te.literal is not None:
        return _literal_as(te.literal, to, node)
    if te.type.scalar is S.INT64 and to is S.FLOAT64:
        return Cast(te.expr, S.FLOAT64)
    where = f" {what}" if what else ""
    raise _err(
        SqlTypeError,
        f"{where.strip() + ': ' if what else ''}expected {pg_type(to)}, got {pg_type(te.type.scalar)}",
        node,
    )


def _common_type(items: Sequence[tuple[TExpr, Any]], what: str) -> ScalarType | None:
    """The type several values unify to (CASE branches, COALESCE, UNION columns)."""
    typed = [(t, n) for t, n in items if t.type is not None and t.literal is None]
    if not typed:
        literals = [t for t, _ in items if t.literal is not None]
        return S.STRING if literals else None
    first = typed[0][0].scalar
    assert first is not None
    out = first
    for t, n in typed[1:]:
        s = t.scalar
        assert s is not None
        if s is out:
            continue
        if s.is_numeric and out.is_numeric:
            out = S.FLOAT64
            continue
        raise _err(
            SqlTypeError, f"{what} types {pg_type(out)} and {pg_type(s)} cannot be matched", n
        )
    return out


def _nullable(exprs: Iterable[TExpr]) -> bool:
    return any(t.type is None or t.type.nullable for t in exprs)


# -- aggregates -----------------------------------------------------------------------------

_AGGS: dict[type[exp.Expression], AggFunc] = {
    exp.Count: AggFunc.COUNT,
    exp.Sum: AggFunc.SUM,
    exp.Min: AggFunc.MIN,
    exp.Max: AggFunc.MAX,
    exp.Avg: AggFunc.AVG,
}


def _is_agg(node: Any) -> bool:
    return isinstance(node, exp.AggFunc)


def _find_aggs(node: Any) -> list[exp.Expression]:
    """The outermost aggregate calls in ``node`` (not inside subqueries)."""
    out: list[exp.Expression] = []
    if not isinstance(node, exp.Expression):
        return out
    stack = [node]
    while stack:
        n = stack.pop()
        if _is_agg(n):
            out.append(n)
            continue
        if isinstance(n, exp.Subquery | exp.Select):
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


@dataclass
class _Grouping:
    """Binding over a ``Reduce``'s output: group keys and aggregates are its columns."""

    keys: list[tuple[ScalarExpr, int]]  # key expression over the input -> output position
    aggs: dict[int, int]  # id(aggregate node) -> output position
    input_binder: ExprBinder


# -- the expression binder ------------------------------------------------------------------


@dataclass
class ExprBinder:
    """Binds sqlglot scalar expressions over a :class:`Scope` (``params``: ``$1`` ...)."""

    scope: Scope
    params: Sequence[Any] = ()
    grouping: _Grouping | None = None
    context: str = ""  # e.g. "WHERE": aggregates are refused there
    _placeholders: list[int] = field(default_factory=lambda: [0])

    def bind(self, node: Any) -> TExpr:
        g = self.grouping
        if g is not None:
            if _is_agg(node):
                pos = g.aggs.get(id(node))
                if pos is None:
                    raise _err(SqlError, "aggregate not planned", node)
                return self._col(pos)
            if not _contains_agg(node) and not isinstance(
                node, exp.Literal | exp.Null | exp.Boolean
            ):
                try:
                    inner = g.input_binder.bind(node)
                except SqlError:
                    inner = None
                if inner is not None and inner.expr is not None:
                    for k, pos in g.keys:
                        if k == inner.expr:
                            return self._col(pos)
                if isinstance(node, exp.Column):
                    name = node.sql(dialect="postgres")
                    raise _err(
                        SqlError,
                        f'column "{name}" must appear in the GROUP BY clause '
                        "or be used in an aggregate function",
                        node,
                    )
        elif _is_agg(node):
            where = self.context or "this context"
            raise _err(SqlError, f"aggregate functions are not allowed in {where}", node)
        return self._bind(node)

    def _col(self, i: int) -> TExpr:
        return TExpr(ColumnRef(i), self.scope.columns[i].type)

    def scalar(self, node: Any, hint: ScalarType | None = None) -> tuple[ScalarExpr, ColumnType]:
        """``node`` bound to a concrete expression (an untyped NULL takes ``hint``, else text)."""
        te = self.bind(node)
        if te.expr is None or te.type is None:
            t = hint or S.STRING
            return Literal(None, t), ColumnType(t, True)
        if hint is not None and te.literal is not None and hint is not S.STRING:
            lit = _literal_as(te.literal, hint, node)
            return lit, ColumnType(hint, False)
        return te.expr, te.type

    def predicate(self, node: Any, what: str) -> ScalarExpr:
        te = self.bind(node)
        if te.type is None:
            return Literal(None, S.BOOL)
        if te.scalar is not S.BOOL:
            if te.literal is not None:
                return _literal_as(te.literal, S.BOOL, node)
            raise _err(
                SqlTypeError,
                f"argument of {what} must be type boolean, not type {pg_type(te.scalar)}",
                node,
            )
        assert te.expr is not None
        return te.expr

    def _check(self, expr: ScalarExpr, node: Any) -> ColumnType:
        try:
            return scalar_type(expr, self.scope.schema())
        except PlanError as e:
            raise _err(SqlTypeError, str(e), node) from None

    def _make(self, expr: ScalarExpr, node: Any) -> TExpr:
        return TExpr(expr, self._check(expr, node))

    # the cases
    def _bind(self, node: Any) -> TExpr:
        if isinstance(node, exp.Paren):
            return self.bind(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise _unsupported("* in an expression", node)
            qualifier = ident(node.args["table"]) if node.args.get("table") else None
            if node.args.get("db") or node.args.get("catalog"):
                raise _unsupported("schema-qualified column names", node)
            return self._col(self.scope.resolve(ident(node.this), qualifier, node))
        if isinstance(node, exp.Null):
            return TExpr(None, None)
        if isinstance(node, exp.Boolean):
            return TExpr(Literal(bool(node.this), S.BOOL), ColumnType(S.BOOL, False))
        if isinstance(node, exp.Literal):
            if node.is_string:
                text = str(node.this)
                return TExpr(Literal(text, S.STRING), ColumnType(S.STRING, False), literal=text)
            return _number(str(node.this), node)
        if isinstance(node, exp.Parameter | exp.Placeholder):
            return self._param(node)
        if isinstance(node, exp.Neg):
            if isinstance(node.this, exp.Literal) and not node.this.is_string:
                return _number("-" + str(node.this.this), node)
            inner = self.bind(node.this)
            if inner.expr is None:
                return inner
            return self._unary_num(UnaryFunc.NEG, inner, node)
        if isinstance(node, exp.Not):
            return self._make(CallUnary(UnaryFunc.NOT, self.predicate(node.this, "NOT")), node)
        if isinstance(node, exp.And | exp.Or):
            func = VariadicFunc.AND if isinstance(node, exp.And) else VariadicFunc.OR
            word = "AND" if func is VariadicFunc.AND else "OR"
            parts = [self.predicate(node.this, word), self.predicate(node.expression, word)]
            flat: list[ScalarExpr] = []
            for p in parts:
                if isinstance(p, CallVariadic) and p.func is func:
                    flat.extend(p.exprs)
                else:
                    flat.append(p)
            return self._make(CallVariadic(func, tuple(flat)), node)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _unsupported("IS other than IS [NOT] NULL", node)
            inner = self.bind(node.this)
            if inner.expr is None:
                out: ScalarExpr = Literal(True, S.BOOL)
            else:
                out = CallUnary(UnaryFunc.IS_NULL, inner.expr)
            if node.args.get("negate"):
                out = CallUnary(UnaryFunc.NOT, out)
            return self._make(out, node)
        newer = self._newer_function(node)
        if newer is not None:
            return newer
        binary = _BINARY.get(type(node))
        if binary is not None:
            return self._binary(binary, node.this, node.expression, node)
        if isinstance(node, exp.DPipe):
            return self._concat_op(node)
        if isinstance(node, exp.Like | exp.ILike):
            return self._like(node)
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like | exp.ILike):
            return self._like(node.this, node.expression)
        if isinstance(node, exp.Between):
            lo = self._binary(BinaryFunc.GE, node.this, node.args["low"], node)
            hi = self._binary(BinaryFunc.LE, node.this, node.args["high"], node)
            assert lo.expr is not None and hi.expr is not None
            out = CallVariadic(VariadicFunc.AND, (lo.expr, hi.expr))
            if node.args.get("negate"):
                out = CallUnary(UnaryFunc.NOT, out)
            return self._make(out, node)
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise _unsupported("IN (subquery)", node)
            items = node.expressions
            if not items:
                raise _err(SqlError, "IN needs at least one value", node)
            eqs = []
            for item in items:
                te = self._binary(BinaryFunc.EQ, node.this, item, item)
                if te.expr is not None:
                    eqs.append(te.expr)
            out2: ScalarExpr = (
                eqs[0] if len(eqs) == 1 else CallVariadic(VariadicFunc.OR, tuple(eqs))
            )
            if node.args.get("negate"):
                out2 = CallUnary(UnaryFunc.NOT, out2)
            return self._make(out2, node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            return self._if_chain([(node.this, node.args["true"])], node.args.get("false"), node)
        if isinstance(node, exp.Coalesce):
            return self._coalesce([node.this, *node.expressions], node)
        if isinstance(node, exp.Nullif):
            a = self.bind(node.this)
            eq = self._binary(BinaryFunc.EQ, node.this, node.expression, node)
            assert eq.expr is not None
            t = a.scalar or S.STRING
            value = _coerce(a, t, node.this)
            return self._make(If(eq.expr, Literal(None, t), value), node)
        if isinstance(node, exp.Cast | exp.TryCast):
            return self._cast(node)
        if isinstance(node, exp.Lower | exp.Upper | exp.Length):
            ufunc = {exp.Lower: UnaryFunc.LOWER, exp.Upper: UnaryFunc.UPPER}.get(
                type(node), UnaryFunc.LENGTH
            )
            arg = self.bind(node.this)
            return self._make(CallUnary(ufunc, _coerce(arg, S.STRING, node.this)), node)
        if isinstance(node, exp.Abs) and _ir(UnaryFunc, "ABS") is not None:
            return self._make(CallUnary(_ir(UnaryFunc, "ABS"), self._number_arg(node.this)), node)
        if isinstance(node, exp.Abs):
            arg = self.bind(node.this)
            if arg.expr is None:
                return arg
            if arg.scalar not in (S.INT64, S.FLOAT64):
                raise _err(
                    SqlTypeError, f"function abs({pg_type(arg.scalar)}) does not exist", node
                )
            zero = Literal(0, S.INT64) if arg.scalar is S.INT64 else Literal(0.0, S.FLOAT64)
            neg = CallBinary(BinaryFunc.LT, arg.expr, zero)
            return self._make(If(neg, CallUnary(UnaryFunc.NEG, arg.expr), arg.expr), node)
        if isinstance(node, exp.Substring):
            s = self.bind(node.this)
            args = [_coerce(s, S.STRING, node.this)]
            for key in ("start", "length"):
                arg_node = node.args.get(key)
                if arg_node is not None:
                    args.append(_coerce(self.bind(arg_node), S.INT64, arg_node))
            if len(args) == 1:
                raise _err(SqlError, "substring needs a start position", node)
            return self._make(CallVariadic(VariadicFunc.SUBSTRING, tuple(args)), node)
        if isinstance(node, exp.Concat):
            bound = [self.bind(a) for a in node.expressions]
            exprs = tuple(self._to_text(a, n) for a, n in zip(bound, node.expressions, strict=True))
            return self._make(CallVariadic(VariadicFunc.CONCAT, exprs), node)
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
            raise _unsupported("subqueries in expressions", node)
        if isinstance(node, exp.Window):
            raise _unsupported("window functions", node)
        if isinstance(node, exp.Anonymous):
            raise _unsupported(f"function {node.name}()", node)
        if isinstance(node, exp.Func):
            raise _unsupported(f"function {node.sql_name().lower()}()", node)
        if isinstance(node, exp.Star):
            raise _unsupported("* in an expression", node)
        raise _unsupported(f"expression {type(node).__name__}", node)

    def _param(self, node: Any) -> TExpr:
        if isinstance(node, exp.Placeholder):
            self._placeholders[0] += 1
            n = self._placeholders[0]
        else:
            try:
                n = int(str(node.this.this if isinstance(node.this, exp.Expression) else node.this))
            except ValueError:
                raise _unsupported("named parameters", node) from None
        if not 1 <= n <= len(self.params):
            raise _err(SqlError, f"there is no parameter ${n}", node)
        value = self.params[n - 1]
        if value is None:
            return TExpr(None, None)
        t = _python_type(value, node)
        if t is S.STRING:
            return TExpr(Literal(value, t), ColumnType(t, False), literal=value)
        return TExpr(Literal(value, t), ColumnType(t, False))

    def _unary_num(self, func: UnaryFunc, te: TExpr, node: Any) -> TExpr:
        assert te.expr is not None
        if te.scalar not in (S.INT64, S.FLOAT64):
            raise _err(SqlTypeError, f"operator does not exist: - {pg_type(te.scalar)}", node)
        return self._make(CallUnary(func, te.expr), node)

    def _binary(self, func: BinaryFunc, left: Any, right: Any, node: Any) -> TExpr:
        a, b = self.bind(left), self.bind(right)
        if a.type is None and b.type is None:
            return TExpr(None, None)
        # unknown literals and NULLs take the other side's type
        if a.literal is not None and b.literal is None and b.type is not None:
            a = TExpr(_coerce(a, b.type.scalar, left), ColumnType(b.type.scalar, False))
        elif b.literal is not None and a.literal is None and a.type is not None:
            b = TExpr(_coerce(b, a.type.scalar, right), ColumnType(a.type.scalar, False))
        if a.type is None:
            a = TExpr(Literal(None, b.scalar), ColumnType(b.scalar or S.STRING, True))  # type: ignore[arg-type]
        if b.type is None:
            b = TExpr(Literal(None, a.scalar), ColumnType(a.scalar or S.STRING, True))  # type: ignore[arg-type]
        assert a.expr is not None and b.expr is not None
        sa, sb = a.scalar, b.scalar
        assert sa is not None and sb is not None
        arith = func in (
            BinaryFunc.ADD,
            BinaryFunc.SUB,
            BinaryFunc.MUL,
            BinaryFunc.DIV,
            BinaryFunc.MOD,
        )
        ok = (
            (sa.is_numeric and sb.is_numeric)
            if arith
            else (sa is sb or (sa.is_numeric and sb.is_numeric))
        )
        if not ok:
            raise _err(
                SqlTypeError,
                f"operator does not exist: {pg_type(sa)} {_OP_TEXT[func]} {pg_type(sb)}",
                node,
            )
        return self._make(CallBinary(func, a.expr, b.expr), node)

    def _to_text(self, te: TExpr, node: Any) -> ScalarExpr:
        if te.expr is None:
            return Literal(None, S.STRING)
        if te.scalar is S.STRING:
            return te.expr
        return Cast(te.expr, S.STRING)

    def _concat_op(self, node: Any) -> TExpr:
        a, b = self.bind(node.this), self.bind(node.expression)
        ea, eb = self._to_text(a, node.this), self._to_text(b, node.expression)
        either_null = CallVariadic(
            VariadicFunc.OR, (CallUnary(UnaryFunc.IS_NULL, ea), CallUnary(UnaryFunc.IS_NULL, eb))
        )
        out = If(either_null, Literal(None, S.STRING), CallVariadic(VariadicFunc.CONCAT, (ea, eb)))
        te = self._make(out, node)
        return TExpr(te.expr, ColumnType(S.STRING, _nullable([a, b])))

    def _like(self, node: Any, escape: Any = None) -> TExpr:
        a, b = self.bind(node.this), self.bind(node.expression)
        ea, eb = _coerce(a, S.STRING, node.this), _coerce(b, S.STRING, node.expression)
        insensitive = isinstance(node, exp.ILike)
        out: ScalarExpr
        if escape is not None:
            name = "ILIKE_ESCAPE" if insensitive else "LIKE_ESCAPE"
            vf = _ir(VariadicFunc, name)
            if vf is None:
                raise _unsupported("LIKE ... ESCAPE", node)
            ee = _coerce(self.bind(escape), S.STRING, escape)
            out = CallVariadic(vf, (ea, eb, ee))
        else:
            ilike = _ir(BinaryFunc, "ILIKE") if insensitive else None
            if ilike is not None:
                out = CallBinary(ilike, ea, eb)
            else:
                if insensitive:
                    ea, eb = CallUnary(UnaryFunc.LOWER, ea), CallUnary(UnaryFunc.LOWER, eb)
                out = CallBinary(BinaryFunc.LIKE, ea, eb)
        if node.args.get("negate"):
            out = CallUnary(UnaryFunc.NOT, out)
        return self._make(out, node)

    def _newer_function(self, node: Any) -> TExpr | None:
        """The IR's newer scalar functions (round, trim, greatest, least, replace, date_trunc,
        extract, interval arithmetic), each refused as :class:`UnsupportedSql` if the IR at
        hand lacks it."""

        def need(kind: Any, name: str, what: str) -> Any:
            f = _ir(kind, name)
            if f is None:
                raise _unsupported(what, node)
            return f

        if isinstance(node, exp.Round):
            if node.args.get("decimals") is not None:
                raise _unsupported("round() with a precision", node)
            f = need(UnaryFunc, "ROUND", "function round()")
            return self._make(CallUnary(f, self._number_arg(node.this)), node)
        if isinstance(node, exp.Trim):
            if node.args.get("expression") is not None:
                raise _unsupported("trim() of other characters than spaces", node)
            position = str(node.args.get("position") or "BOTH").upper()
            name = {"LEADING": "LTRIM", "TRAILING": "RTRIM"}.get(position, "TRIM")
            f = need(UnaryFunc, name, f"function {name.lower()}()")
            return self._make(
                CallUnary(f, _coerce(self.bind(node.this), S.STRING, node.this)), node
            )
        if isinstance(node, exp.Greatest | exp.Least):
            name = "GREATEST" if isinstance(node, exp.Greatest) else "LEAST"
            vf = need(VariadicFunc, name, f"function {name.lower()}()")
            items = [(self.bind(a), a) for a in [node.this, *node.expressions]]
            values, _t = self._unify(items, name)
            return self._make(CallVariadic(vf, tuple(values)), node)
        if isinstance(node, exp.Replace):
            vf = need(VariadicFunc, "REPLACE", "function replace()")
            args = [node.this, node.expression, node.args.get("replacement")]
            if args[2] is None:
                raise _err(SqlError, "replace() takes 3 arguments", node)
            exprs = tuple(_coerce(self.bind(a), S.STRING, a) for a in args)
            return self._make(CallVariadic(vf, exprs), node)
        if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
            vf = need(VariadicFunc, "DATE_TRUNC", "function date_trunc()")
            unit = node.args.get("unit")
            word = str(unit.this if isinstance(unit, exp.Var | exp.Literal) else unit).lower()
            te = self.bind(node.this)
            return self._make(
                CallVariadic(vf, (Literal(word, S.STRING), _timestamp_arg(te, node.this))), node
            )
        if isinstance(node, exp.Extract):
            vf = need(VariadicFunc, "EXTRACT", "EXTRACT")
            field = node.this
            word = str(field.this if isinstance(field, exp.Var | exp.Literal) else field).lower()
            te = self.bind(node.expression)
            arg = (
                te.expr
                if te.expr is not None and te.literal is None
                else _timestamp_arg(te, node.expression)
            )
            return self._make(CallVariadic(vf, (Literal(word, S.STRING), arg)), node)
        if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
            name = "ADD_MS" if isinstance(node, exp.Add) else "SUB_MS"
            bf = need(BinaryFunc, name, "interval arithmetic")
            ms = _interval_ms(node.expression)
            te = self.bind(node.this)
            left = (
                te.expr
                if te.expr is not None and te.literal is None
                else _timestamp_arg(te, node.this)
            )
            return self._make(CallBinary(bf, left, Literal(ms, S.INT64)), node)
        return None

    def _number_arg(self, node: Any) -> ScalarExpr:
        te = self.bind(node)
        if te.expr is None:
            return Literal(None, S.FLOAT64)
        if te.literal is not None:
            return _literal_as(te.literal, S.FLOAT64, node)
        return te.expr

    def _unify(
        self, items: list[tuple[TExpr, Any]], what: str
    ) -> tuple[list[ScalarExpr], ScalarType]:
        t = _common_type(items, what) or S.STRING
        return [_coerce(te, t, n, what) for te, n in items], t

    def _if_chain(self, whens: list[tuple[Any, Any]], default: Any, node: Any) -> TExpr:
        conds = [self.predicate(c, "CASE/WHEN") for c, _ in whens]
        results: list[tuple[TExpr, Any]] = [(self.bind(r), r) for _, r in whens]
        if default is not None:
            results.append((self.bind(default), default))
        values, t = self._unify(results, "CASE")
        els: ScalarExpr = values[-1] if default is not None else Literal(None, t)
        branches = values[: len(whens)]
        out = els
        for cond, value in reversed(list(zip(conds, branches, strict=True))):
            out = If(cond, value, out)
        return self._make(out, node)

    def _case(self, node: Any) -> TExpr:
        operand = node.this
        whens: list[tuple[Any, Any]] = []
        for w in node.args.get("ifs") or []:
            cond = w.this
            if operand is not None:
                cond = exp.EQ(this=operand, expression=cond)
            whens.append((cond, w.args["true"]))
        return self._if_chain(whens, node.args.get("default"), node)

    def _coalesce(self, args: list[Any], node: Any) -> TExpr:
        items = [(self.bind(a), a) for a in args]
        values, _t = self._unify(items, "COALESCE")
        return self._make(CallVariadic(VariadicFunc.COALESCE, tuple(values)), node)

    def _cast(self, node: Any) -> TExpr:
        to = sql_type(node.args["to"])
        inner = self.bind(node.this)
        if inner.expr is None:
            return TExpr(Literal(None, to), ColumnType(to, True))
        if inner.literal is not None and to is not S.STRING:
            return TExpr(_literal_as(inner.literal, to, node), ColumnType(to, False))
        src = inner.scalar
        assert src is not None
        if src is not to and (src, to) not in CAST_TABLE:
            raise _err(SqlTypeError, f"cannot cast type {pg_type(src)} to {pg_type(to)}", node)
        return self._make(Cast(inner.expr, to) if src is not to else inner.expr, node)


def _ir(kind: Any, name: str) -> Any:
    """The member ``name`` of one of the IR's function enums, or None if this IR lacks it."""
    return getattr(kind, name, None)


def _timestamp_arg(te: TExpr, node: Any) -> ScalarExpr:
    if te.expr is None:
        return Literal(None, S.TIMESTAMP)
    if te.literal is not None:
        return _literal_as(te.literal, S.TIMESTAMP, node)
    return te.expr


def _interval_ms(node: Any) -> int:
    """``INTERVAL '1 day'`` / ``INTERVAL '2' HOUR`` in milliseconds."""
    from .interval import parse_interval_ms

    text = str(node.this.this if isinstance(node.this, exp.Literal) else node.this)
    unit = node.args.get("unit")
    if unit is not None:
        text = f"{text} {unit.this if isinstance(unit, exp.Var) else unit}"
    try:
        return parse_interval_ms(text)
    except ValueError as e:
        raise _err(SqlTypeError, str(e), node) from None


def _contains_agg(node: Any) -> bool:
    return bool(_find_aggs(node))


_BINARY: dict[type[exp.Expression], BinaryFunc] = {
    exp.Add: BinaryFunc.ADD,
    exp.Sub: BinaryFunc.SUB,
    exp.Mul: BinaryFunc.MUL,
    exp.Div: BinaryFunc.DIV,
    exp.Mod: BinaryFunc.MOD,
    exp.EQ: BinaryFunc.EQ,
    exp.NEQ: BinaryFunc.NE,
    exp.LT: BinaryFunc.LT,
    exp.LTE: BinaryFunc.LE,
    exp.GT: BinaryFunc.GT,
    exp.GTE: BinaryFunc.GE,
}

_OP_TEXT = {
    BinaryFunc.ADD: "+",
    BinaryFunc.SUB: "-",
    BinaryFunc.MUL: "*",
    BinaryFunc.DIV: "/",
    BinaryFunc.MOD: "%",
    BinaryFunc.EQ: "=",
    BinaryFunc.NE: "<>",
    BinaryFunc.LT: "<",
    BinaryFunc.LE: "<=",
    BinaryFunc.GT: ">",
    BinaryFunc.GE: ">=",
    BinaryFunc.LIKE: "~~",
}


def _number(text: str, node: Any) -> TExpr:
    if all(ch.isdigit() or ch == "-" for ch in text):
        try:
            v = int(text)
        except ValueError:
            raise _err(SqlSyntaxError, f'invalid number "{text}"', node) from None
        if not -(2**63) <= v < 2**63:
            raise _err(SqlTypeError, f'value "{text}" is out of range for type bigint', node)
        return TExpr(Literal(v, S.INT64), ColumnType(S.INT64, False))
    try:
        f = float(text)
    except ValueError:
        raise _err(SqlSyntaxError, f'invalid number "{text}"', node) from None
    if not math.isfinite(f):
        raise _err(SqlTypeError, f'value "{text}" is out of range for type double precision', node)
    return TExpr(Literal(f, S.FLOAT64), ColumnType(S.FLOAT64, False))


def _python_type(value: Any, node: Any) -> ScalarType:
    if isinstance(value, bool):
        return S.BOOL
    if isinstance(value, int):
        return S.INT64
    if isinstance(value, float):
        return S.FLOAT64
    if isinstance(value, str):
        return S.STRING
    if type(value) is _dt.datetime:
        return S.TIMESTAMP
    if type(value) is _dt.date:
        return S.DATE
    raise _err(SqlTypeError, f"a parameter of type {type(value).__name__} has no SQL type", node)


_TYPES: dict[Any, ScalarType] = {
    exp.DataType.Type.BIGINT: S.INT64,
    exp.DataType.Type.INT: S.INT64,
    exp.DataType.Type.SMALLINT: S.INT64,
    exp.DataType.Type.DOUBLE: S.FLOAT64,
    exp.DataType.Type.FLOAT: S.FLOAT64,
    exp.DataType.Type.TEXT: S.STRING,
    exp.DataType.Type.VARCHAR: S.STRING,
    exp.DataType.Type.CHAR: S.STRING,
    exp.DataType.Type.BOOLEAN: S.BOOL,
    exp.DataType.Type.DATE: S.DATE,
    exp.DataType.Type.TIMESTAMP: S.TIMESTAMP,
}


def sql_type(node: Any) -> ScalarType:
    """The scalar type a SQL type name stands for [UnsupportedSql for the others]."""
    if isinstance(node, exp.DataType):
        t = _TYPES.get(node.this)
        if t is not None:
            return t
        if node.this is exp.DataType.Type.USERDEFINED:
            name = str(node.args.get("kind") or node.sql()).lower()
            named = {"int64": S.INT64, "float64": S.FLOAT64, "string": S.STRING}.get(name)
            if named is not None:
                return named
    raise _unsupported(
        f"type {node.sql(dialect='postgres') if isinstance(node, exp.Expression) else node}", node
    )


# -- relations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rel:
    """A bound relation: a plan and the scope of its columns."""

    plan: Plan
    scope: Scope


def _typed(plan: Plan, node: Any = None) -> Schema:
    try:
        return typecheck(plan)
    except PlanError as e:
        raise _err(SqlTypeError, str(e), node) from None


@dataclass(frozen=True)
class Lowered:
    """A lowered query: ``plan`` (its first ``len(names)`` columns are the output, then any
    hidden ``ORDER BY`` columns), the output's names and types, and its ordering and range."""

    plan: Plan
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0

    @property
    def arity(self) -> int:
        return len(self.names)

    @property
    def schema(self) -> Schema:
        return Schema(tuple(Column(n, t) for n, t in zip(self.names, self.types, strict=True)))

    def _hidden(self) -> bool:
        return _typed(self.plan).arity != self.arity

    def finishing(self) -> RowSetFinishing:
        """How a peek of :attr:`plan` orders, limits and projects its rows."""
        project = tuple(range(self.arity)) if self._hidden() else None
        return RowSetFinishing(self.order_by, self.limit, self.offset, project)

    def relation(self) -> Plan:
        """The query as a collection (a view's plan): ``LIMIT``/``OFFSET`` as a ``TopK``; a bare
        ``ORDER BY`` orders nothing in a collection and is dropped."""
        plan = self.plan
        if self.limit is not None or self.offset:
            plan = TopK(plan, (), self.order_by, self.limit, self.offset)
        if self._hidden():
            plan = Project(plan, tuple(range(self.arity)))
        return _renamed(plan, self.names)


def _renamed(plan: Plan, names: Sequence[str]) -> Plan:
    """``plan`` with its columns called ``names`` (a Map of the columns and a Project if needed)."""
    schema = _typed(plan)
    if tuple(schema.names) == tuple(names):
        return plan
    n = schema.arity
    mapped = Map(plan, tuple(ColumnRef(i) for i in range(n)), tuple(names))
    return Project(mapped, tuple(range(n, 2 * n)))


@dataclass
class _Ctx:
    catalog: SqlCatalog
    params: Sequence[Any]
    ctes: dict[str, Lowered] = field(default_factory=dict)


def lower_query(
    query: Any, catalog: SqlCatalog, params: Sequence[Any] = (), sql: str | None = None
) -> Lowered:
    """Bind ``query`` (a sqlglot SELECT / set operation) against ``catalog`` and lower it.

    Raises the :mod:`tidegate.spec.errors.sql` errors, positions relative to
    the statement the query was parsed from (its text ``sql``, if given).
    """
    try:
        return _query(query, _Ctx(catalog, params))
    except SqlError as e:
        if sql is not None:
            raise e.located(sql) from None
        raise


def _query(node: Any, ctx: _Ctx) -> Lowered:
    with_ = node.args.get("with_") or node.args.get("with")
    if with_ is not None:
        if with_.args.get("recursive"):
            raise _unsupported("WITH RECURSIVE", with_)
        ctx = _Ctx(ctx.catalog, ctx.params, dict(ctx.ctes))
        for cte in with_.expressions:
            name = ident(cte.args["alias"].this)
            lowered = _query(cte.this, ctx)
            cols = cte.args["alias"].columns if cte.args.get("alias") else None
            if cols:
                lowered = _rename_lowered(lowered, [ident(c) for c in cols], cte)
            ctx.ctes[name] = lowered
    if isinstance(node, exp.Select):
        return _select(node, ctx)
    if isinstance(node, exp.Union | exp.Except | exp.Intersect):
        return _set_op(node, ctx)
    if isinstance(node, exp.Subquery):
        return _query(node.this, ctx)
    if isinstance(node, exp.Values):
        rel = _values(node, ctx, None)
        return Lowered(rel.plan, rel.scope.schema().names, rel.scope.schema().types)
    raise _unsupported(f"{type(node).__name__} as a query", node)


def _rename_lowered(low: Lowered, names: list[str], node: Any) -> Lowered:
    if len(names) > low.arity:
        raise _err(SqlError, f"too many column names: {len(names)} for {low.arity} columns", node)
    full = [*names, *low.names[len(names) :]]
    return dataclasses.replace(low, names=tuple(full))


def _limit_value(node: Any, ctx: _Ctx, what: str) -> int | None:
    if node is None:
        return None
    value_node = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if value_node is None:
        value_node = node.this
    binder = ExprBinder(Scope(()), ctx.params, context=what)
    te = binder.bind(value_node)
    if te.expr is None:
        return None
    if te.scalar is not S.INT64 or not isinstance(te.expr, Literal):
        raise _err(SqlTypeError, f"{what} must be an integer constant", value_node)
    v = int(te.expr.value)
    if v < 0:
        raise _err(SqlError, f"{what} must not be negative", value_node)
    return v


def _set_op(node: Any, ctx: _Ctx) -> Lowered:
    left = _query(node.this, ctx)
    right = _query(node.expression, ctx)
    word = {exp.Union: "UNION", exp.Except: "EXCEPT", exp.Intersect: "INTERSECT"}[type(node)]
    if left.arity != right.arity:
        raise _err(SqlError, f"each {word} query must have the same number of columns", node)
    lp, rp = left.relation(), right.relation()
    # unify column types (an int meets a float as a float)
    lcasts: list[ScalarExpr] = []
    rcasts: list[ScalarExpr] = []
    for i, (lt, rt) in enumerate(zip(left.types, right.types, strict=True)):
        if lt.scalar is rt.scalar:
            lcasts.append(ColumnRef(i))
            rcasts.append(ColumnRef(i))
        elif lt.scalar.is_numeric and rt.scalar.is_numeric:
            lcasts.append(ColumnRef(i) if lt.scalar is S.FLOAT64 else Cast(ColumnRef(i), S.FLOAT64))
            rcasts.append(ColumnRef(i) if rt.scalar is S.FLOAT64 else Cast(ColumnRef(i), S.FLOAT64))
        else:
            raise _err(
                SqlTypeError,
                f"{word} types {pg_type(lt.scalar)} and {pg_type(rt.scalar)} cannot be matched",
                node.expression,
            )
    lp = _apply_exprs(lp, lcasts, left.names)
    rp = _apply_exprs(rp, rcasts, left.names)
    distinct = node.args.get("distinct") is not False
    lp2: Plan = Distinct(lp) if distinct else lp
    rp2: Plan = Distinct(rp) if distinct else rp
    plan: Plan
    if isinstance(node, exp.Union):
        plan = Union((lp, rp))
        if distinct:
            plan = Distinct(plan)
    elif isinstance(node, exp.Except):
        plan = Threshold(Union((lp2, Negate(rp2))))
    else:
        plan = Union((lp2, Negate(Threshold(Union((lp2, Negate(rp2)))))))
    schema = _typed(plan, node)
    scope = Scope.of(
        Schema(tuple(Column(n, c.type) for n, c in zip(left.names, schema.columns, strict=True))),
        None,
    )
    return _order_limit(
        Rel(plan, scope), node, ctx, list(range(left.arity)), list(left.names), None
    )


def _apply_exprs(plan: Plan, exprs: Sequence[ScalarExpr], names: Sequence[str]) -> Plan:
    if all(isinstance(e, ColumnRef) and e.index == i for i, e in enumerate(exprs)):
        return plan
    n = _typed(plan).arity
    return Project(Map(plan, tuple(exprs), tuple(names)), tuple(range(n, n + len(exprs))))


# -- FROM -----------------------------------------------------------------------------------

_UNIT = Constant((((), 1),), Schema(()))


def _from_item(node: Any, ctx: _Ctx) -> Rel:
    alias = node.args.get("alias")
    alias_name = ident(alias.this) if alias is not None and alias.this is not None else None
    alias_cols = [ident(c) for c in alias.columns] if alias is not None and alias.columns else []
    if isinstance(node, exp.Table):
        if node.args.get("db") or node.args.get("catalog"):
            raise _unsupported("schema-qualified names", node)
        if node.args.get("joins") or node.args.get("pivots"):
            raise _unsupported("PIVOT", node)
        name = ident(node.this)
        if isinstance(node.this, exp.Anonymous | exp.Func):
            raise _unsupported("table functions", node)
        if name in ctx.ctes:
            low = ctx.ctes[name]
            plan = low.relation()
            rel = Rel(plan, Scope.of(_typed(plan), alias_name or name))
        else:
            item = _resolve_object(ctx.catalog, name, node)
            rel = Rel(_read(item, node), Scope.of(item.schema, alias_name or name))
    elif isinstance(node, exp.Subquery):
        low = _query(node.this, ctx)
        plan = low.relation()
        rel = Rel(plan, Scope.of(_typed(plan), alias_name))
    elif isinstance(node, exp.Values):
        rel = _values(node, ctx, alias_name)
    else:
        raise _unsupported(f"{type(node).__name__} in FROM", node)
    if alias_cols:
        cols = rel.scope.columns
        if len(alias_cols) > len(cols):
            raise _err(
                SqlError,
                f'table "{alias_name}" has {len(cols)} columns available but '
                f"{len(alias_cols)} columns specified",
                alias,
            )
        renamed = tuple(
            dataclasses.replace(c, name=alias_cols[i]) if i < len(alias_cols) else c
            for i, c in enumerate(cols)
        )
        rel = Rel(rel.plan, Scope(renamed))
    return rel


def _read(item: CatalogItem, node: Any = None) -> Plan:
    from ..plan import Get

    if item.kind == "view":
        if item.plan is None:
            raise _err(SqlError, f"view {item.name} has no definition")
        return item.plan
    if item.kind == "sink":
        raise _err(
            WrongObjectType, f'"{item.name}" is a sink: it writes out, it cannot be read', node
        )
    return Get(item.id, item.schema)


def _resolve_object(catalog: SqlCatalog, name: str, node: Any) -> CatalogItem:
    item = catalog.resolve(name)
    if item is None:
        folded = [i for i in catalog.items() if i.name.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        near = difflib.get_close_matches(name, [i.name for i in catalog.items()], n=1, cutoff=0.6)
        hint = f'Perhaps you meant "{near[0]}".' if near else None
        raise _err(UndefinedObject, f'relation "{name}" does not exist', node, hint)
    return item


def _values(node: Any, ctx: _Ctx, alias: str | None) -> Rel:
    rows_nodes = list(node.expressions)
    if not rows_nodes:
        raise _err(SqlError, "VALUES needs at least one row", node)
    binder = ExprBinder(Scope(()), ctx.params, context="VALUES")
    bound = []
    for r in rows_nodes:
        items = r.expressions if isinstance(r, exp.Tuple) else [r]
        bound.append([(binder.bind(i), i) for i in items])
    width = len(bound[0])
    if any(len(r) != width for r in bound):
        raise _err(SqlError, "VALUES lists must all be the same length", node)
    cols = []
    rows: list[tuple[tuple[Any, ...], int]] = []
    types = []
    for c in range(width):
        column = [r[c] for r in bound]
        t = _common_type(column, "VALUES") or S.STRING
        types.append(t)
    values: list[list[Any]] = [[] for _ in bound]
    for c, t in enumerate(types):
        for k, r in enumerate(bound):
            te, n = r[c]
            values[k].append(_eval_const(_coerce(te, t, n), n))
    nullable = [any(v[c] is None for v in values) for c in range(width)]
    for c, t in enumerate(types):
        cols.append(Column(f"column{c + 1}", ColumnType(t, nullable[c])))
    rows = [(tuple(v), 1) for v in values]
    schema = Schema(tuple(cols))
    return Rel(Constant(tuple(rows), schema), Scope.of(schema, alias))


def _eval_const(expr: ScalarExpr, node: Any) -> Any:
    try:
        return eval_scalar(expr, ())
    except Exception as e:
        raise _err(SqlError, f"{e}" if str(e) else type(e).__name__, node) from None


def constant_value(node: Any, to: ColumnType, params: Sequence[Any] = (), what: str = "") -> Any:
    """The value of the constant expression ``node``, assigned to a column of type ``to``."""
    binder = ExprBinder(Scope(()), params, context="VALUES")
    te = binder.bind(node)
    value = _eval_const(_coerce(te, to.scalar, node, what), node)
    return value


def _conjuncts(node: Any) -> list[Any]:
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


def _refs(e: ScalarExpr) -> set[int]:
    out: set[int] = set()
    stack: list[ScalarExpr] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, ColumnRef):
            out.add(x.index)
        elif isinstance(x, CallUnary):
            stack.append(x.expr)
        elif isinstance(x, CallBinary):
            stack.extend((x.left, x.right))
        elif isinstance(x, CallVariadic):
            stack.extend(x.exprs)
        elif isinstance(x, If):
            stack.extend((x.cond, x.then, x.els))
        elif isinstance(x, Cast):
            stack.append(x.expr)
    return out


def _shift(e: ScalarExpr, by: int) -> ScalarExpr:
    return _remap(e, lambda i: i + by)


def _remap(e: ScalarExpr, f: Callable[[int], int]) -> ScalarExpr:
    if isinstance(e, ColumnRef):
        return ColumnRef(f(e.index))
    if isinstance(e, CallUnary):
        return CallUnary(e.func, _remap(e.expr, f))
    if isinstance(e, CallBinary):
        return CallBinary(e.func, _remap(e.left, f), _remap(e.right, f))
    if isinstance(e, CallVariadic):
        return CallVariadic(e.func, tuple(_remap(x, f) for x in e.exprs))
    if isinstance(e, If):
        return If(_remap(e.cond, f), _remap(e.then, f), _remap(e.els, f))
    if isinstance(e, Cast):
        return Cast(_remap(e.expr, f), e.to)
    return e


def _join(left: Rel, node: Any, ctx: _Ctx) -> Rel:
    right = _from_item(node.this, ctx)
    side = str(node.args.get("side") or "").upper()
    kind = str(node.args.get("kind") or "").upper()
    method = str(node.args.get("method") or "").upper()
    on = node.args.get("on")
    using = [ident(u) for u in node.args.get("using") or []]
    if method == "NATURAL":
        lnames = {c.name for c in left.scope.columns if not c.hidden}
        using = [c.name for c in right.scope.columns if c.name in lnames]
    if kind in ("SEMI", "ANTI") or method in ("ASOF",):
        raise _unsupported(f"{kind or method} JOIN", node)
    if side == "RIGHT":
        swapped = _join_rels(right, left, on, using, "LEFT", node, ctx, using_hide_left=True)
        nr, nl = len(right.scope.columns), len(left.scope.columns)
        order = tuple(range(nr, nr + nl)) + tuple(range(nr))
        cols = swapped.scope.columns
        return Rel(Project(swapped.plan, order), Scope(tuple(cols[i] for i in order)))
    if side == "FULL":
        try:
            JoinKind("full")
        except ValueError:
            raise _unsupported("FULL JOIN", node) from None
        return _join_rels(left, right, on, using, "FULL", node, ctx)
    if side == "LEFT":
        return _join_rels(left, right, on, using, "LEFT", node, ctx)
    if kind == "CROSS" and (on is not None or using):
        raise _err(SqlError, "CROSS JOIN takes no ON or USING", node)
    return _join_rels(left, right, on, using, "INNER", node, ctx)


def _join_rels(
    left: Rel,
    right: Rel,
    on: Any,
    using: list[str],
    kind: str,
    node: Any,
    ctx: _Ctx,
    using_hide_left: bool = False,
) -> Rel:
    nl, nr = len(left.scope.columns), len(right.scope.columns)
    scope = left.scope.concat(right.scope)
    pairs: list[tuple[ScalarExpr, ScalarExpr, Any]] = []  # left expr, right expr (own numbering)
    residual: list[tuple[ScalarExpr, Any]] = []  # over the combined scope
    if using:
        cols = list(scope.columns)
        for name in using:
            li = Scope(left.scope.columns).resolve(name, None, node)
            ri = Scope(right.scope.columns).resolve(name, None, node)
            pairs.append((ColumnRef(li), ColumnRef(ri), node))
            hide = li if using_hide_left else nl + ri
            cols[hide] = dataclasses.replace(cols[hide], hidden=True)
        scope = Scope(tuple(cols))
    binder = ExprBinder(scope, ctx.params, context="JOIN conditions")
    for cond in _conjuncts(on) if on is not None else []:
        pred = binder.predicate(cond, "JOIN/ON")
        if isinstance(pred, CallBinary) and pred.func is BinaryFunc.EQ:
            lr, rr = _refs(pred.left), _refs(pred.right)

            def lside(refs: set[int]) -> bool:
                return bool(refs) and all(i < nl for i in refs)

            def rside(refs: set[int]) -> bool:
                return bool(refs) and all(i >= nl for i in refs)

            if lside(lr) and rside(rr):
                pairs.append((pred.left, _shift(pred.right, -nl), cond))
                continue
            if rside(lr) and lside(rr):
                pairs.append((pred.right, _shift(pred.left, -nl), cond))
                continue
        residual.append((pred, cond))
    # compute non-column key expressions into extra columns of each side
    lextra: list[ScalarExpr] = []
    rextra: list[ScalarExpr] = []
    lkeys: list[int] = []
    rkeys: list[int] = []
    for le, re_, _n in pairs:
        if isinstance(le, ColumnRef):
            lkeys.append(le.index)
        else:
            lkeys.append(nl + len(lextra))
            lextra.append(le)
        if isinstance(re_, ColumnRef):
            rkeys.append(re_.index)
        else:
            rkeys.append(nr + len(rextra))
            rextra.append(re_)
    rplan = right.plan
    if kind in ("LEFT", "FULL"):
        right_only = []
        for pred, cond in residual:
            refs = _refs(pred)
            if kind == "LEFT" and refs and all(i >= nl for i in refs):
                right_only.append(_shift(pred, -nl))
            else:
                raise _unsupported(
                    f"this {kind} JOIN condition (only equalities between the two sides"
                    + (" and conditions on the right side" if kind == "LEFT" else "")
                    + ")",
                    cond,
                )
        residual = []
        if right_only:
            rplan = Filter(rplan, tuple(right_only))
    lplan = left.plan
    if lextra:
        lplan = Map(lplan, tuple(lextra), tuple(f"?key{i}" for i in range(len(lextra))))
    if rextra:
        rplan = Map(rplan, tuple(rextra), tuple(f"?key{i}" for i in range(len(rextra))))
    wl = nl + len(lextra)
    eqs = tuple((lk, wl + rk) for lk, rk in zip(lkeys, rkeys, strict=True))
    join_kind = JoinKind.INNER if kind == "INNER" else JoinKind(kind.lower())
    plan: Plan = Join((lplan, rplan), eqs, join_kind)
    _typed(plan, node)
    if lextra or rextra:
        plan = Project(plan, tuple(range(nl)) + tuple(range(wl, wl + nr)))
    if residual:
        plan = Filter(plan, tuple(p for p, _ in residual))
    schema = _typed(plan, node)
    return Rel(plan, scope.retyped(schema))


def _from(node: Any, ctx: _Ctx) -> Rel:
    from_ = node.args.get("from_") or node.args.get("from")
    joins = node.args.get("joins") or []
    if from_ is None:
        if joins:
            raise _err(SqlError, "JOIN without FROM", joins[0])
        return Rel(_UNIT, Scope(()))
    rel = _from_item(from_.this, ctx)
    for extra in from_.expressions if hasattr(from_, "expressions") else []:
        other = _from_item(extra, ctx)
        rel = _join_rels(rel, other, None, [], "INNER", extra, ctx)
    for j in joins:
        rel = _join(rel, j, ctx)
    return rel


# -- SELECT ---------------------------------------------------------------------------------


def _output_name(node: Any) -> str:
    if isinstance(node, exp.Alias):
        return ident(node.args["alias"])
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return ident(node.this)
    if isinstance(node, exp.Paren):
        return _output_name(node.this)
    if isinstance(node, exp.Cast):
        inner = _output_name(node.this)
        return inner if inner != "?column?" else _type_word(node)
    if isinstance(node, exp.Count | exp.Sum | exp.Min | exp.Max | exp.Avg | exp.Coalesce):
        return node.sql_name().lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
        return node.sql_name().lower()
    return "?column?"


def _type_word(node: Any) -> str:
    try:
        return {
            S.INT64: "int8",
            S.FLOAT64: "float8",
            S.STRING: "text",
            S.BOOL: "bool",
            S.DATE: "date",
            S.TIMESTAMP: "timestamp",
        }[sql_type(node.args["to"])]
    except SqlError:
        return "?column?"


def _expand_select(items: list[Any], scope: Scope) -> list[tuple[Any, str, int | None]]:
    """Select items as (node, output name, column index for a star expansion)."""
    out: list[tuple[Any, str, int | None]] = []
    for item in items:
        if isinstance(item, exp.Star):
            cols = [i for i, c in enumerate(scope.columns) if not c.hidden]
            if not cols and not scope.columns:
                raise _err(SqlError, "SELECT * with no tables specified is not valid", item)
            out.extend((item, scope.columns[i].name, i) for i in cols)
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            q = ident(item.args["table"])
            cols = [
                i
                for i, c in enumerate(scope.columns)
                if c.qualifier is not None and c.qualifier.lower() == q.lower()
            ]
            if not cols:
                raise _err(UndefinedObject, f'missing FROM-clause entry for table "{q}"', item)
            out.extend((item, scope.columns[i].name, i) for i in cols)
        else:
            out.append((item, _output_name(item), None))
    return out


def _unalias(node: Any) -> Any:
    return node.this if isinstance(node, exp.Alias) else node


def _select(node: exp.Select, ctx: _Ctx) -> Lowered:
    for key in ("windows", "qualify", "laterals", "pivots", "locks", "sample", "connect", "into"):
        if node.args.get(key):
            raise _unsupported(
                key.upper(),
                node.args[key] if not isinstance(node.args[key], list) else node.args[key][0],
            )
    distinct_node = node.args.get("distinct")
    if distinct_node is not None and distinct_node.args.get("on"):
        raise _unsupported("DISTINCT ON", distinct_node)
    for it in node.expressions:
        window = it.find(exp.Window)
        if window is not None:
            raise _unsupported("window functions", window)
    rel = _from(node, ctx)
    where = node.args.get("where")
    if where is not None:
        binder = ExprBinder(rel.scope, ctx.params, context="WHERE")
        preds = tuple(binder.predicate(c, "WHERE") for c in _conjuncts(where.this))
        rel = Rel(Filter(rel.plan, preds), rel.scope)
    items = _expand_select(list(node.expressions), rel.scope)
    group = node.args.get("group")
    having = node.args.get("having")
    order = node.args.get("order")
    order_items = list(order.expressions) if order is not None else []
    agg_nodes: list[exp.Expression] = []
    for it, _, star in items:
        if star is None:
            agg_nodes.extend(_find_aggs(it))
    if having is not None:
        agg_nodes.extend(_find_aggs(having.this))
    for o in order_items:
        agg_nodes.extend(_find_aggs(o.this))
    out_names = [name for _, name, _ in items]
    if group is not None or agg_nodes:
        rel, binder = _aggregate(rel, node, items, agg_nodes, ctx)
        if having is not None:
            pred = binder.predicate(having.this, "HAVING")
            rel = Rel(Filter(rel.plan, (pred,)), rel.scope)
    else:
        if having is not None:
            raise _unsupported("HAVING without GROUP BY or aggregates", having)
        binder = ExprBinder(rel.scope, ctx.params, context="SELECT")
    exprs: list[ScalarExpr] = []
    for it, _name, star in items:
        if star is not None:
            if binder.grouping is not None:
                te = _star_column(star, binder)
                assert te.expr is not None
                exprs.append(te.expr)
            else:
                exprs.append(ColumnRef(star))
        else:
            e, _t = binder.scalar(_unalias(it))
            exprs.append(e)
    selected = Rel(rel.plan, rel.scope)
    return _project_order(
        selected, node, ctx, exprs, out_names, binder, items, distinct_node is not None
    )


def _star_column(i: int, binder: ExprBinder) -> TExpr:
    # under GROUP BY, * means the input's columns, each of which must be a group key
    g = binder.grouping
    assert g is not None
    in_scope = g.input_binder.scope
    for k, pos in g.keys:
        if k == ColumnRef(i):
            return binder._col(pos)
    c = in_scope.columns[i]
    raise _err(
        SqlError,
        f'column "{c.qualifier + "." if c.qualifier else ""}{c.name}" must appear in the GROUP BY '
        "clause or be used in an aggregate function",
    )


def _aggregate(
    rel: Rel,
    node: exp.Select,
    items: list[tuple[Any, str, int | None]],
    agg_nodes: list[exp.Expression],
    ctx: _Ctx,
) -> tuple[Rel, ExprBinder]:
    in_binder = ExprBinder(rel.scope, ctx.params, context="GROUP BY")
    group = node.args.get("group")
    key_exprs: list[tuple[ScalarExpr, Any]] = []
    aliases = {name: it for it, name, star in items if star is None and isinstance(it, exp.Alias)}
    for g in list(group.expressions) if group is not None else []:
        target = g
        if isinstance(g, exp.Literal) and not g.is_string:
            k = int(str(g.this))
            if not 1 <= k <= len(items):
                raise _err(SqlError, f"GROUP BY position {k} is not in select list", g)
            it, _, star = items[k - 1]
            if star is not None:
                key_exprs.append((ColumnRef(star), g))
                continue
            target = _unalias(it)
        elif isinstance(g, exp.Column) and not g.args.get("table"):
            name = ident(g.this)
            has_input = any(c.name == name for c in rel.scope.columns)
            if not has_input and name in aliases:
                target = _unalias(aliases[name])
        if _contains_agg(target):
            raise _err(SqlError, "aggregate functions are not allowed in GROUP BY", g)
        e, _t = in_binder.scalar(target)
        if all(k != e for k, _ in key_exprs):
            key_exprs.append((e, g))
    n_in = len(rel.scope.columns)
    extra: list[ScalarExpr] = []

    def column_for(e: ScalarExpr) -> int:
        if isinstance(e, ColumnRef):
            return e.index
        for k, x in enumerate(extra):
            if x == e:
                return n_in + k
        extra.append(e)
        return n_in + len(extra) - 1

    key_positions = [column_for(e) for e, _ in key_exprs]
    aggregates: list[Aggregate] = []
    agg_pos: dict[int, int] = {}
    seen: list[tuple[Aggregate, int]] = []
    arg_binder = ExprBinder(rel.scope, ctx.params, context="aggregate function calls")
    for a in agg_nodes:
        func = _AGGS.get(type(a))
        if func is None:
            raise _unsupported(f"aggregate {type(a).__name__.lower()}()", a)
        arg = a.this
        distinct = False
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise _unsupported("DISTINCT over several arguments", arg)
            distinct, arg = True, arg.expressions[0]
        if a.args.get("expressions"):
            raise _unsupported(f"{func.value}() with several arguments", a)
        if isinstance(arg, exp.Star) or arg is None:
            if func is not AggFunc.COUNT:
                raise _err(SqlError, f"{func.value}(*) is not valid", a)
            agg = Aggregate(AggFunc.COUNT, None, False)
        else:
            if _contains_agg(arg):
                raise _err(SqlError, "aggregate function calls cannot be nested", arg)
            e, t = arg_binder.scalar(arg)
            if func in (AggFunc.SUM, AggFunc.AVG) and not t.scalar.is_numeric:
                raise _err(
                    SqlTypeError,
                    f"function {func.value}({pg_type(t.scalar)}) does not exist",
                    a,
                )
            agg = Aggregate(func, column_for(e), distinct)
        for existing, pos in seen:
            if existing == agg:
                agg_pos[id(a)] = pos
                break
        else:
            pos = len(key_exprs) + len(aggregates)
            aggregates.append(agg)
            seen.append((agg, pos))
            agg_pos[id(a)] = pos
    plan = rel.plan
    if extra:
        plan = Map(plan, tuple(extra), tuple(f"?expr{i}" for i in range(len(extra))))
    reduce: Plan = Reduce(plan, tuple(key_positions), tuple(aggregates))
    schema = _typed(reduce, node)
    if not key_exprs:
        reduce = _with_default_row(reduce, schema)
        schema = _typed(reduce, node)
    cols = []
    for i, c in enumerate(schema.columns):
        if i < len(key_exprs) and isinstance(key_exprs[i][0], ColumnRef):
            src = rel.scope.columns[key_exprs[i][0].index]  # type: ignore[union-attr]
            cols.append(ScopeColumn(src.qualifier, src.name, c.type))
        else:
            cols.append(ScopeColumn(None, f"?agg{i}", c.type, hidden=True))
    out_scope = Scope(tuple(cols))
    grouping = _Grouping([(e, i) for i, (e, _) in enumerate(key_exprs)], agg_pos, in_binder)
    return Rel(reduce, out_scope), ExprBinder(out_scope, ctx.params, grouping, "SELECT")


def _with_default_row(reduce: Plan, schema: Schema) -> Plan:
    """A global aggregate's answer over no rows: ``count`` 0, the others NULL."""
    default: list[Any] = []
    cols = []
    assert isinstance(reduce, Reduce)
    for a, c in zip(reduce.aggregates, schema.columns, strict=True):
        if a.func is AggFunc.COUNT:
            default.append(0)
        else:
            default.append(None)
        cols.append(Column(c.name, ColumnType(c.type.scalar, True)))
    dschema = Schema(tuple(cols))
    const = Constant(((tuple(default), 1),), dschema)
    present = Project(reduce, ())
    return Union((reduce, const, Negate(Join((const, present), ()))))


def _project_order(
    rel: Rel,
    node: Any,
    ctx: _Ctx,
    exprs: list[ScalarExpr],
    names: list[str],
    binder: ExprBinder,
    items: list[tuple[Any, str, int | None]],
    distinct: bool,
) -> Lowered:
    order = node.args.get("order")
    order_specs: list[tuple[ScalarExpr | int, bool, bool, Any]] = []
    for o in list(order.expressions) if order is not None else []:
        target = o.this
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        nulls_last = not nulls_first if nulls_first is not None else not desc
        # ORDER BY 2, ORDER BY alias, else an expression
        if isinstance(target, exp.Literal) and not target.is_string:
            k = int(str(target.this))
            if not 1 <= k <= len(exprs):
                raise _err(SqlError, f"ORDER BY position {k} is not in select list", target)
            order_specs.append((k - 1, desc, nulls_last, o))
            continue
        if isinstance(target, exp.Column) and not target.args.get("table"):
            name = ident(target.this)
            matches = [i for i, n in enumerate(names) if n == name]
            if len(matches) == 1:
                order_specs.append((matches[0], desc, nulls_last, o))
                continue
        e, _t = binder.scalar(target)
        hit = [i for i, x in enumerate(exprs) if x == e]
        if hit:
            order_specs.append((hit[0], desc, nulls_last, o))
        elif distinct:
            raise _err(
                SqlError,
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                target,
            )
        else:
            order_specs.append((e, desc, nulls_last, o))
    hidden = [s[0] for s in order_specs if not isinstance(s[0], int)]
    all_exprs = exprs + [h for h in hidden if not isinstance(h, int)]
    n = len(rel.scope.columns)
    if all(isinstance(e, ColumnRef) for e in all_exprs):
        cols = tuple(e.index for e in all_exprs)  # type: ignore[union-attr]
        identity = cols == tuple(range(n))
        plan: Plan = rel.plan if identity else Project(rel.plan, cols)
    else:
        map_names = tuple(names) + tuple(f"?order{i}" for i in range(len(hidden)))
        plan = Project(
            Map(rel.plan, tuple(all_exprs), map_names), tuple(range(n, n + len(all_exprs)))
        )
    plan = _rename_prefix(plan, names)
    if distinct:
        plan = Distinct(plan)
    schema = _typed(plan, node)
    columns = []
    k = 0
    for s in order_specs:
        if isinstance(s[0], int):
            columns.append(ColumnOrder(s[0], s[1], s[2]))
        else:
            columns.append(ColumnOrder(len(exprs) + k, s[1], s[2]))
            k += 1
    limit = _limit_value(node.args.get("limit"), ctx, "LIMIT")
    offset = _limit_value(node.args.get("offset"), ctx, "OFFSET") or 0
    types = schema.types[: len(exprs)]
    return Lowered(plan, tuple(names), tuple(types), tuple(columns), limit, offset)


def _rename_prefix(plan: Plan, names: Sequence[str]) -> Plan:
    schema = _typed(plan)
    full = list(names) + list(schema.names[len(names) :])
    return _renamed(plan, full)


def _order_limit(
    rel: Rel,
    node: Any,
    ctx: _Ctx,
    positions: list[int],
    names: list[str],
    binder: ExprBinder | None,
) -> Lowered:
    exprs: list[ScalarExpr] = [ColumnRef(i) for i in positions]
    b = binder or ExprBinder(rel.scope, ctx.params, context="ORDER BY")
    return _project_order(rel, node, ctx, exprs, names, b, [], False)


def bind_scalar(
    node: Any, schema: Schema, qualifier: str | None, params: Sequence[Any] = (), context: str = ""
) -> tuple[ScalarExpr, ColumnType]:
    """Bind a scalar expression over the columns of one relation (``UPDATE ... SET``, ``WHERE``)."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context=context)
    return binder.scalar(node)


def bind_predicate(
    node: Any, schema: Schema, qualifier: str | None, params: Sequence[Any] = ()
) -> ScalarExpr:
    """Bind a ``WHERE`` condition over the columns of one relation."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context="WHERE")
    return binder.predicate(node, "WHERE")


def coerce_to(
    node: Any,
    schema: Schema,
    qualifier: str | None,
    to: ScalarType,
    params: Sequence[Any],
    what: str,
) -> ScalarExpr:
    """Bind ``node`` and convert it to ``to`` as an assignment does [SqlTypeError]."""
    binder = ExprBinder(Scope.of(schema, qualifier), params, context=what)
    return _coerce(binder.bind(node), to, node, what)
