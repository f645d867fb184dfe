"""The expression binder: sqlglot scalar expressions, with names resolved in a scope, to typed
plan expressions, following PostgreSQL's typing rules where the IR allows."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..errors import (
    AmbiguousFunction,
    CannotCoerce,
    EvaluationError,
    GroupingError,
    InvalidTextRepresentation,
    NumericOverflow,
    NumericValueOutOfRange,
    PlanError,
    SqlError,
    SqlSyntaxError,
    SqlTypeError,
    UndefinedFunction,
    UndefinedPlaceholder,
    data_error,
)
from ..plan import (
    AggFunc,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    ColumnType,
    If,
    Literal,
    ScalarExpr,
    ScalarType,
    UnaryFunc,
    VariadicFunc,
    scalar_type,
)
from ..plan.numeric import parse_numeric
from ..plan.scalar import CAST_TABLE
from ..plan.schema import scalar_type_of
from ._common import S, _err, _unsupported, ident, pg_type, position_of, sql_type_of
from ._dialect import is_unknown
from ._fold import fold
from ._functions import _shown, bind_call
from ._scope import Scope
from ._texpr import (
    INTEGERS,
    TExpr,
    _coerce,
    _common_type,
    _literal_as,
    _nullable,
    arith_number,
    cast_to,
)
from ._texpr import arith as narrowed

# -- aggregates -----------------------------------------------------------------------------

_AGGS: dict[type[exp.Expression], AggFunc] = {
    exp.Count: AggFunc.COUNT,
    exp.Sum: AggFunc.SUM,
    exp.Min: AggFunc.MIN,
    exp.Max: AggFunc.MAX,
    exp.Avg: AggFunc.AVG,
    exp.LogicalAnd: AggFunc.BOOL_AND,
    exp.LogicalOr: AggFunc.BOOL_OR,
    exp.GroupConcat: AggFunc.STRING_AGG,
}

_NAMED_AGGS = {"every": AggFunc.BOOL_AND, "bool_and": AggFunc.BOOL_AND, "bool_or": AggFunc.BOOL_OR}
"""Aggregates sqlglot leaves as plain calls."""


def agg_func(node: Any) -> AggFunc | None:
    """The IR aggregate of an aggregate call (None for one tidegate has not)."""
    if isinstance(node, exp.Anonymous):
        return _NAMED_AGGS.get(str(node.name).lower())
    return _AGGS.get(type(node))


def _is_agg(node: Any) -> bool:
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Anonymous) and str(node.name).lower() in _NAMED_AGGS
    )


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
        if isinstance(n, exp.Window):  # the window's own call is no grouping aggregate
            stack.extend(reversed(list(n.this.iter_expressions())))
            stack.extend(reversed([e for e in n.iter_expressions() if e is not n.this]))
            continue
        stack.extend(reversed(list(n.iter_expressions())))
    return out


@dataclass
class _Grouping:
    """Binding over a ``Reduce``'s output: group keys and aggregates are its columns."""

    keys: list[tuple[ScalarExpr, int]]  # key expression over the input -> output position
    aggs: dict[int, int]  # id(aggregate node) -> output position
    input_binder: ExprBinder
    narrow: dict[int, ScalarType] = field(default_factory=dict)
    """id(aggregate node) -> the narrow type its result is cast to (``sum(real)``)."""


# -- the expression binder ------------------------------------------------------------------


@dataclass
class ExprBinder:
    """Binds sqlglot scalar expressions over a :class:`Scope` (``params``: ``$1`` ...)."""

    scope: Scope
    params: Sequence[Any] = ()
    grouping: _Grouping | None = None
    context: str = ""  # e.g. "WHERE": aggregates are refused there
    windows: dict[int, int] = field(default_factory=dict)  # id(window call) -> its column
    subqueries: dict[int, TExpr] = field(default_factory=dict)
    """id(subquery expression) -> its answer, a column of ``scope`` (see :mod:`._subquery`)."""
    _placeholders: list[int] = field(default_factory=lambda: [0])

    def bind(self, node: Any) -> TExpr:
        answer = self.subqueries.get(id(node))
        if answer is not None:
            return answer
        g = self.grouping
        if g is not None:
            if _is_agg(node):
                pos = g.aggs.get(id(node))
                if pos is None:
                    raise _err(GroupingError, "aggregate not planned", node)
                to = g.narrow.get(id(node))
                col = self._col(pos)
                if to is None or col.expr is None:
                    return col
                return self._make(Cast(col.expr, to), node)
            if not _contains_agg(node) and not isinstance(
                node, exp.Literal | exp.Null | exp.Boolean
            ):
                try:
                    inner = g.input_binder.bind(node)
                except SqlError:
                    inner = None
                if inner is not None and inner.expr is not None:
                    folded = g.input_binder.folded(inner.expr, node)
                    for k, pos in g.keys:
                        if k == folded:
                            return self._col(pos)
                if isinstance(node, exp.Column):
                    name = node.sql(dialect="postgres")
                    raise _err(
                        GroupingError,
                        f'column "{name}" must appear in the GROUP BY clause '
                        "or be used in an aggregate function",
                        node,
                    )
        elif _is_agg(node):
            where = self.context or "this context"
            raise _err(GroupingError, f"aggregate functions are not allowed in {where}", node)
        return self._bind(node)

    def _col(self, i: int) -> TExpr:
        return TExpr(ColumnRef(i), self.scope.columns[i].type)

    def scalar(self, node: Any, hint: ScalarType | None = None) -> tuple[ScalarExpr, ColumnType]:
        """``node`` bound to a concrete expression (an untyped NULL takes ``hint``, else text),
        constant parts folded as PostgreSQL folds them (:mod:`._fold`)."""
        return self.finish(self.bind(node), node, hint)

    def finish(
        self, te: TExpr, node: Any, hint: ScalarType | None = None
    ) -> tuple[ScalarExpr, ColumnType]:
        """A bound expression made concrete (an untyped NULL takes ``hint``, else text) and
        folded."""
        if te.expr is None or te.type is None:
            t = hint or S.STRING
            return Literal(None, t), ColumnType(t, True)
        if hint is not None and te.literal is not None and hint is not S.STRING:
            lit = _literal_as(te.literal, hint, node)
            return lit, ColumnType(hint, False)
        return self.folded(te.expr, node), te.type

    def folded(self, expr: ScalarExpr, node: Any) -> ScalarExpr:
        """``expr`` with its constant parts computed [SqlDataError of one that fails]."""
        try:
            return fold(expr, self.scope.schema())
        except EvaluationError as e:
            err = data_error(str(e))
            err.position = position_of(node)
            raise err from None

    def predicate(self, node: Any, what: str) -> ScalarExpr:
        """``node`` as a condition (``WHERE``, ``ON``, ``HAVING``), folded."""
        return self.folded(self._condition(node, what), node)

    def predicate_of(self, te: TExpr, node: Any, what: str) -> ScalarExpr:
        """A bound expression as a condition, folded."""
        return self.folded(self._condition_of(te, node, what), node)

    def _condition(self, node: Any, what: str) -> ScalarExpr:
        return self._condition_of(self.bind(node), node, what)

    def _condition_of(self, te: TExpr, node: Any, what: str) -> ScalarExpr:
        """A bound expression as a condition (it must be boolean, or become one)."""
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
            if inner.expr is None or inner.literal is not None:
                raise _err(AmbiguousFunction, "operator is not unique: - unknown", node)
            return self._unary_num(UnaryFunc.NEG, inner, node)
        if isinstance(node, exp.Not):
            return self._make(CallUnary(UnaryFunc.NOT, self._condition(node.this, "NOT")), node)
        if isinstance(node, exp.And | exp.Or):
            func = VariadicFunc.AND if isinstance(node, exp.And) else VariadicFunc.OR
            word = "AND" if func is VariadicFunc.AND else "OR"
            parts = [self._condition(node.this, word), self._condition(node.expression, word)]
            flat: list[ScalarExpr] = []
            for p in parts:
                if isinstance(p, CallVariadic) and p.func is func:
                    flat.extend(p.exprs)
                else:
                    flat.append(p)
            return self._make(CallVariadic(func, tuple(flat)), node)
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ):
            return self._distinct_from(node)
        if isinstance(node, exp.RegexpLike | exp.RegexpILike):
            if node.args.get("flag") or node.args.get("full_match"):
                raise _unsupported("regular expression flags", node)
            rx = (
                BinaryFunc.REGEX_IMATCH
                if isinstance(node, exp.RegexpILike)
                else BinaryFunc.REGEX_MATCH
            )
            a, b = self.bind(node.this), self.bind(node.expression)
            if not all(x.type is None or x.scalar is S.STRING for x in (a, b)):
                raise _err(
                    UndefinedFunction,
                    f"operator does not exist: {_shown(a)} ~ {_shown(b)}",
                    node,
                )
            return self._make(
                CallBinary(
                    rx, _coerce(a, S.STRING, node.this), _coerce(b, S.STRING, node.expression)
                ),
                node,
            )
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
            between: ScalarExpr = CallVariadic(VariadicFunc.AND, (_bool(lo), _bool(hi)))
            if node.args.get("symmetric"):  # either order of the bounds
                lo2 = self._binary(BinaryFunc.GE, node.this, node.args["high"], node)
                hi2 = self._binary(BinaryFunc.LE, node.this, node.args["low"], node)
                swapped = CallVariadic(VariadicFunc.AND, (_bool(lo2), _bool(hi2)))
                between = CallVariadic(VariadicFunc.OR, (between, swapped))
            if node.args.get("negate"):
                between = CallUnary(UnaryFunc.NOT, between)
            return self._make(between, node)
        if isinstance(node, exp.In):
            if node.args.get("query"):
                raise _unsupported(f"subqueries in {self.context or 'this context'}", node)
            if node.args.get("unnest") or node.args.get("field"):
                raise _unsupported("IN (subquery)", node)
            items = node.expressions
            if not items:
                raise _err(SqlError, "IN needs at least one value", node)
            eqs = [_bool(self._binary(BinaryFunc.EQ, node.this, item, item)) for item in items]
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
            a, b = self.bind(node.this), self.bind(node.expression)
            if a.type is None:  # NULLIF(NULL, x) is NULL
                if b.type is None or b.literal is not None:
                    return TExpr(None, None)
                return TExpr(Literal(None, b.scalar), ColumnType(b.scalar, True))  # type: ignore[arg-type]
            eq = self._binary_te(BinaryFunc.EQ, a, b, node.this, node.expression, node)
            assert isinstance(eq.expr, CallBinary)
            first = eq.expr.left
            t = self._check(first, node.this).scalar
            return self._make(If(eq.expr, Literal(None, t), first), node)
        if isinstance(node, exp.Cast | exp.TryCast):
            if isinstance(node, exp.TryCast):
                raise _unsupported("TRY_CAST", node)
            return self._cast(node)
        call = bind_call(self, node)
        if call is not None:
            return call
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Any | exp.All):
            raise _unsupported(f"subqueries in {self.context or 'this context'}", node)
        if isinstance(node, exp.Window):
            pos = self.windows.get(id(node))
            if pos is not None:
                return self._col(pos)
            if self.context in ("WHERE", "GROUP BY", "JOIN conditions"):
                err = _err(SqlError, f"window functions are not allowed in {self.context}", node)
                err.sqlstate = "42P20"  # PostgreSQL's windowing_error
                raise err
            raise _unsupported("window functions here", node)
        if isinstance(node, exp.Anonymous):
            raise _err(UndefinedFunction, f"function {node.name}() does not exist", node)
        if isinstance(node, exp.Func):
            raise _unsupported(f"function {node.sql_name().lower()}()", node)
        if isinstance(node, exp.Star):
            raise _unsupported("* in an expression", node)
        raise _unsupported(f"expression {_shown_sql(node)}", node)

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
            raise _err(UndefinedPlaceholder, f"there is no parameter ${n}", node)
        value = self.params[n - 1]
        if value is None:
            return TExpr(None, None)
        t = _python_type(value, node)
        if t is S.STRING:
            return TExpr(Literal(value, t), ColumnType(t, False), literal=value)
        return TExpr(Literal(value, t), ColumnType(t, False))

    def _unary_num(self, func: UnaryFunc, te: TExpr, node: Any) -> TExpr:
        assert te.expr is not None
        t = te.scalar
        if t is None or not t.is_numeric:
            raise _err(SqlTypeError, f"operator does not exist: - {pg_type(te.scalar)}", node)
        return self._make(narrowed(lambda a: CallUnary(func, a[0]), [(te.expr, t)], t), node)

    def _binary(self, func: BinaryFunc, left: Any, right: Any, node: Any) -> TExpr:
        return self._binary_te(func, self.bind(left), self.bind(right), left, right, node)

    def _binary_te(
        self, func: BinaryFunc, a: TExpr, b: TExpr, left: Any, right: Any, node: Any
    ) -> TExpr:
        """``a func b`` of bound operands: an untyped literal or NULL takes the other side's
        type; an integer meets a float as a float, a date a timestamp as a timestamp; ``date -
        date`` is a count of days and ``date +/- integer`` a date, as in PostgreSQL."""
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
        ea, eb = a.expr, b.expr
        if sa is S.DATE and func in (BinaryFunc.ADD, BinaryFunc.SUB) and sb in INTEGERS:
            eb = cast_to(eb, sb, S.INT64)
            days = eb if func is BinaryFunc.ADD else CallUnary(UnaryFunc.NEG, eb)
            return self._make(CallBinary(BinaryFunc.DATE_ADD_DAYS, ea, days), node)
        if sb is S.DATE and func is BinaryFunc.ADD and sa in INTEGERS:
            return self._make(
                CallBinary(BinaryFunc.DATE_ADD_DAYS, eb, cast_to(ea, sa, S.INT64)), node
            )
        if sa is S.DATE and sb is S.DATE and func is BinaryFunc.SUB:
            return self._make(CallBinary(BinaryFunc.DATE_DIFF, ea, eb), node)
        arith = func in _ARITH
        if not arith and {sa, sb} == {S.DATE, S.TIMESTAMP}:
            ea = Cast(ea, S.TIMESTAMP) if sa is S.DATE else ea
            eb = Cast(eb, S.TIMESTAMP) if sb is S.DATE else eb
            sa = sb = S.TIMESTAMP
        ok = (
            (sa.is_numeric and sb.is_numeric)
            if arith
            else (sa is sb or (sa.is_numeric and sb.is_numeric))
        )
        if not ok:
            raise _err(
                UndefinedFunction,
                f"operator does not exist: {pg_type(sa)} {_OP_TEXT[func]} {pg_type(sb)}",
                node,
            )
        if arith:
            out = arith_number(sa, sb)
            call = narrowed(lambda x: CallBinary(func, x[0], x[1]), [(ea, sa), (eb, sb)], out)
            return self._make(call, node)
        if sa is not sb and sa.is_numeric and sb.is_numeric and S.FLOAT32 in (sa, sb):
            # a real compares with another number type as a double precision
            ea, eb = cast_to(ea, sa, S.FLOAT64), cast_to(eb, sb, S.FLOAT64)
        return self._make(CallBinary(func, ea, eb), node)

    def _to_text(self, te: TExpr, node: Any) -> ScalarExpr:
        if te.expr is None:
            return Literal(None, S.STRING)
        if te.scalar is S.STRING:
            return te.expr
        assert te.scalar is not None
        return cast_to(te.expr, te.scalar, S.STRING)

    def _concat_op(self, node: Any) -> TExpr:
        """``a || b``: one side text (or an untyped literal or NULL), the other cast to text;
        NULL if either is."""
        a, b = self.bind(node.this), self.bind(node.expression)

        def texty(x: TExpr) -> bool:
            return x.type is None or x.scalar is S.STRING

        if not (texty(a) or texty(b)):
            raise _err(
                UndefinedFunction,
                f"operator does not exist: {pg_type(a.scalar)} || {pg_type(b.scalar)}",
                node,
            )
        ea, eb = self._to_text(a, node.this), self._to_text(b, node.expression)
        either_null = CallVariadic(
            VariadicFunc.OR, (CallUnary(UnaryFunc.IS_NULL, ea), CallUnary(UnaryFunc.IS_NULL, eb))
        )
        out = If(either_null, Literal(None, S.STRING), CallVariadic(VariadicFunc.CONCAT, (ea, eb)))
        te = self._make(out, node)
        return TExpr(te.expr, ColumnType(S.STRING, _nullable([a, b])))

    def _is(self, node: Any) -> TExpr:
        """``x IS [NOT] NULL``, and for a boolean ``x IS [NOT] TRUE | FALSE | UNKNOWN``."""
        target = node.expression
        inner = self.bind(node.this)
        if isinstance(target, exp.Null) and not is_unknown(target):
            out: ScalarExpr = (
                Literal(True, S.BOOL)
                if inner.expr is None
                else CallUnary(UnaryFunc.IS_NULL, inner.expr)
            )
        else:
            word = "UNKNOWN" if isinstance(target, exp.Null) else str(target.sql()).upper()
            if not isinstance(target, exp.Null | exp.Boolean):
                raise _unsupported(f"IS {target.sql()}", node)
            x = self._condition_of(inner, node.this, f"IS {word}")
            if isinstance(target, exp.Null):
                out = CallUnary(UnaryFunc.IS_NULL, x)
            else:
                want = bool(target.this)
                cond = x if want else CallUnary(UnaryFunc.NOT, x)
                out = If(cond, Literal(True, S.BOOL), Literal(False, S.BOOL))
        if node.args.get("negate"):
            out = CallUnary(UnaryFunc.NOT, out)
        return self._make(out, node)

    def _distinct_from(self, node: Any) -> TExpr:
        """``a IS [NOT] DISTINCT FROM b``: equality where NULL equals NULL, never NULL."""
        a, b = self.bind(node.this), self.bind(node.expression)
        if a.type is None and b.type is None:
            same: ScalarExpr = Literal(True, S.BOOL)
        else:
            eq = self._binary_te(BinaryFunc.EQ, a, b, node.this, node.expression, node)
            assert isinstance(eq.expr, CallBinary)
            la, lb = eq.expr.left, eq.expr.right
            na, nb = CallUnary(UnaryFunc.IS_NULL, la), CallUnary(UnaryFunc.IS_NULL, lb)
            same = If(na, nb, If(nb, Literal(False, S.BOOL), eq.expr))
        if isinstance(node, exp.NullSafeNEQ):
            same = CallUnary(UnaryFunc.NOT, same)
        return self._make(same, node)

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
        if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
            vf = need(VariadicFunc, "DATE_TRUNC", "function date_trunc()")
            unit = node.args.get("unit")
            word = str(unit.this if isinstance(unit, exp.Var | exp.Literal) else unit).lower()
            te = self.bind(node.this)
            if te.type is None or te.literal is not None:
                raise _err(
                    AmbiguousFunction, "function date_trunc(unknown, unknown) is not unique", node
                )
            return self._make(
                CallVariadic(vf, (Literal(word, S.STRING), _timestamp_arg(te, node.this))), node
            )
        if isinstance(node, exp.Extract):
            vf = need(VariadicFunc, "EXTRACT", "EXTRACT")
            field = node.this
            word = str(field.this if isinstance(field, exp.Var | exp.Literal) else field).lower()
            te = self.bind(node.expression)
            if te.type is None or te.literal is not None:
                raise _err(
                    AmbiguousFunction, "function extract(unknown, unknown) is not unique", node
                )
            arg = (
                te.expr
                if te.expr is not None and te.literal is None
                else _timestamp_arg(te, node.expression)
            )
            # PostgreSQL's extract is a numeric (14 on; date_part a double precision): a
            # double precision divides and compares as it does, where an integer would not
            return self._make(
                Cast(CallVariadic(vf, (Literal(word, S.STRING), arg)), S.FLOAT64), node
            )
        if isinstance(node, exp.Add | exp.Sub) and (
            isinstance(node.expression, exp.Interval)
            or (isinstance(node, exp.Add) and isinstance(node.this, exp.Interval))
        ):
            ts_node, iv = (
                (node.this, node.expression)
                if isinstance(node.expression, exp.Interval)
                else (node.expression, node.this)
            )
            bf = BinaryFunc.ADD_US if isinstance(node, exp.Add) else BinaryFunc.SUB_US
            us = _interval_us(iv)
            te = self.bind(ts_node)
            if te.type is None or te.literal is not None:
                # PostgreSQL reads an untyped operand as an interval: interval arithmetic
                raise _unsupported("interval values (only timestamp +/- INTERVAL '...')", node)
            left = (
                te.expr
                if te.expr is not None and te.literal is None
                else _timestamp_arg(te, ts_node)
            )
            if (
                te.type is not None
                and te.literal is None
                and te.scalar not in (S.DATE, S.TIMESTAMP)
            ):
                raise _err(
                    UndefinedFunction,
                    f"operator does not exist: {pg_type(te.scalar)} {'+' if bf is BinaryFunc.ADD_US else '-'} interval",
                    node,
                )
            return self._make(CallBinary(bf, left, Literal(us, S.INT64)), node)
        if isinstance(node, exp.Interval):
            raise _unsupported("interval values (only timestamp +/- INTERVAL '...')", node)
        return None

    def _unify(
        self, items: list[tuple[TExpr, Any]], what: str
    ) -> tuple[list[ScalarExpr], ScalarType]:
        t = _common_type(items, what) or S.STRING
        return [_coerce(te, t, n, what) for te, n in items], t

    def _if_chain(self, whens: list[tuple[Any, Any]], default: Any, node: Any) -> TExpr:
        conds = [self._condition(c, "CASE/WHEN") for c, _ in whens]
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
        spec = sql_type_of(node.args["to"])
        to = spec.scalar
        inner = self.bind(node.this)
        if inner.expr is None:
            return TExpr(Literal(None, to), ColumnType(to, True))
        out: TExpr
        if inner.literal is not None and to is not S.STRING:
            out = TExpr(_literal_as(inner.literal, to, node), ColumnType(to, False))
        else:
            src = inner.scalar
            assert src is not None
            if src is not to and (src, to) not in CAST_TABLE and src is not S.FLOAT32:
                raise _err(CannotCoerce, f"cannot cast type {pg_type(src)} to {pg_type(to)}", node)
            out = self._make(cast_to(inner.expr, src, to), node)
        if spec.typmod is not None:  # numeric(p, s) rounds to s digits, and may overflow
            assert out.expr is not None
            p, s = spec.typmod
            rounded = CallVariadic(
                VariadicFunc.NUMERIC_TYPMOD, (out.expr, Literal(p, S.INT64), Literal(s, S.INT64))
            )
            out = self._make(rounded, node)
        if spec.max_length is not None:  # an explicit cast to varchar(n) cuts to n characters
            assert out.expr is not None
            cut = CallVariadic(
                VariadicFunc.SUBSTRING,
                (out.expr, Literal(1, S.INT64), Literal(spec.max_length, S.INT64)),
            )
            out = self._make(cut, node)
        return out


def _shown_sql(node: Any) -> str:
    """A node as SQL text for a message (never sqlglot's class names)."""
    try:
        text = str(node.sql(dialect="postgres"))
    except Exception:  # a node sqlglot cannot print back
        text = str(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _bool(te: TExpr) -> ScalarExpr:
    """A bound comparison as an expression (an untyped NULL one is a NULL boolean)."""
    return te.expr if te.expr is not None else Literal(None, S.BOOL)


def _ir(kind: Any, name: str) -> Any:
    """The member ``name`` of one of the IR's function enums, or None if this IR lacks it."""
    return getattr(kind, name, None)


def _timestamp_arg(te: TExpr, node: Any) -> ScalarExpr:
    if te.expr is None:
        return Literal(None, S.TIMESTAMP)
    if te.literal is not None:
        return _literal_as(te.literal, S.TIMESTAMP, node)
    return te.expr


_INTERVAL_UNITS: dict[str, int] = {
    **dict.fromkeys(("microsecond", "microseconds", "us", "usec", "usecs"), 1),
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs"), 1_000),
    **dict.fromkeys(("second", "seconds", "s", "sec", "secs"), 1_000_000),
    **dict.fromkeys(("minute", "minutes", "m", "min", "mins"), 60_000_000),
    **dict.fromkeys(("hour", "hours", "h", "hr", "hrs"), 3_600_000_000),
    **dict.fromkeys(("day", "days", "d"), 86_400_000_000),
    **dict.fromkeys(("week", "weeks", "w"), 7 * 86_400_000_000),
}
_CALENDAR = frozenset(
    {
        "month",
        "months",
        "mon",
        "mons",
        "year",
        "years",
        "y",
        "yr",
        "yrs",
        "decade",
        "decades",
        "century",
        "centuries",
        "millennium",
        "millennia",
    }
)
_TIME_OF_DAY = re.compile(r"([+-]?)(\d+):(\d{1,2})(?::(\d{1,2}(?:\.\d*)?))?")
_QUANTITY = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*([a-z]*)")


def interval_us(text: str, unit: str | None = None) -> int:
    """An interval literal as microseconds: ``'1 day 2 hours'``, ``'1.5 seconds'``,
    ``'01:02:03.5'``, ``'1 day 01:02'``, or a number of ``unit`` (``INTERVAL '22.0044'
    SECOND``); rounded to the microsecond [ValueError; months and years have no fixed length
    and are refused]."""
    from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

    s = text.strip().lower()
    if unit is not None:
        u = unit.lower()
        if u in _CALENDAR:
            raise LookupError(u)
        if u not in _INTERVAL_UNITS:
            raise ValueError(f'invalid input syntax for type interval: "{text}"')
        try:
            total = Decimal(s) * _INTERVAL_UNITS[u]
        except InvalidOperation:
            raise ValueError(f'invalid input syntax for type interval: "{text}"') from None
        return int(total.to_integral_value(rounding=ROUND_HALF_EVEN))
    total = Decimal(0)
    pos = 0
    seen = False
    while pos < len(s):
        if s[pos].isspace():
            pos += 1
            continue
        m = _TIME_OF_DAY.match(s, pos)
        if m is not None:
            sign = -1 if m.group(1) == "-" else 1
            secs = Decimal(m.group(4) or 0)
            part = int(m.group(2)) * 3600 + int(m.group(3)) * 60
            total += sign * (Decimal(part) + secs) * 1_000_000
            pos, seen = m.end(), True
            continue
        m = _QUANTITY.match(s, pos)
        if m is None or m.end() == pos:
            raise ValueError(f'invalid input syntax for type interval: "{text}"')
        word = m.group(2) or "second"
        if word in _CALENDAR:
            raise LookupError(word)
        if word not in _INTERVAL_UNITS:
            raise ValueError(f'invalid input syntax for type interval: "{text}"')
        total += Decimal(m.group(1)) * _INTERVAL_UNITS[word]
        pos, seen = m.end(), True
    if not seen:
        raise ValueError(f'invalid input syntax for type interval: "{text}"')
    return int(total.to_integral_value(rounding=ROUND_HALF_EVEN))


def _interval_us(node: Any) -> int:
    """``INTERVAL '1 day'`` / ``INTERVAL '22.0044' SECOND`` in microseconds."""
    text = str(node.this.this if isinstance(node.this, exp.Literal) else node.this)
    unit = node.args.get("unit")
    word = None
    if "interval_text" in node.meta:  # the text as written (see _dialect)
        text, unit = node.meta["interval_text"], None
    if unit is not None:
        word = str(unit.this if isinstance(unit, exp.Var) else unit)
        if " " in word.strip():
            raise _unsupported(f"INTERVAL ... {word.upper()}", node)
    try:
        return interval_us(text, word)
    except LookupError as e:
        raise _unsupported(
            f"intervals of {e.args[0]} (months and years have no fixed length)", node
        ) from None
    except ValueError as e:
        raise _err(InvalidTextRepresentation, str(e), node) from None


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

_ARITH = frozenset({BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD})

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
    """A numeric literal: an ``integer`` if it is an integer in its range, a ``bigint`` if in
    that one, else a ``numeric`` (a decimal point, an exponent, or an integer beyond bigint),
    as PostgreSQL reads it."""
    if all(ch.isdigit() or ch == "-" for ch in text):
        try:
            v = int(text)
        except ValueError:
            raise _err(SqlSyntaxError, f'invalid number "{text}"', node) from None
        if -(2**31) <= v < 2**31:
            return TExpr(Literal(v, S.INT32), ColumnType(S.INT32, False))
        if -(2**63) <= v < 2**63:
            return TExpr(Literal(v, S.INT64), ColumnType(S.INT64, False))
    try:
        d = parse_numeric(text)
    except NumericOverflow:
        raise _err(NumericValueOutOfRange, "value overflows numeric format", node) from None
    except EvaluationError:
        raise _err(SqlSyntaxError, f'invalid number "{text}"', node) from None
    return TExpr(Literal(d, S.NUMERIC), ColumnType(S.NUMERIC, False))


def _python_type(value: Any, node: Any) -> ScalarType:
    t = scalar_type_of(value)
    if t is None:
        raise _err(
            SqlTypeError, f"a parameter of type {type(value).__name__} has no SQL type", node
        )
    return t
