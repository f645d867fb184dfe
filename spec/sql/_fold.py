"""Constant folding, as PostgreSQL's planner folds (``eval_const_expressions``).

PostgreSQL simplifies every expression before it runs a query, and that is
visible: a constant subexpression that fails fails the whole statement, even
over no rows or in a ``CASE`` branch no row takes (``SELECT CASE WHEN x > 0 THEN
1 ELSE 1/0 END FROM t`` is a division by zero), and a strict function with a
constant NULL argument is NULL without its other arguments being evaluated
(``NULL + CAST(s AS bigint)`` never fails). :func:`fold` does the same, top
down, so the same statements fail and the same ones do not:

* a strict call (every operator, cast and function but those below) folds its
  arguments; any NULL constant among them makes it NULL; all constant, it is
  evaluated now;
* ``CASE``: a constant condition picks its branch (the other is not folded);
  otherwise the condition and both branches are folded;
* ``AND``/``OR``: arguments are folded left to right, a constant ``false``
  (``true`` for ``OR``) ends it, other constants are dropped;
* ``COALESCE``: arguments are folded left to right up to the first non-NULL
  constant; NULL constants are dropped;
* ``NULLIF``, ``GREATEST``, ``LEAST``, ``concat``, ``concat_ws``, ``IS NULL``:
  every argument is folded, and all constant, the call is evaluated.
"""

from __future__ import annotations

from ..plan import (
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    ColumnRef,
    If,
    Literal,
    ScalarExpr,
    ScalarType,
    Schema,
    UnaryFunc,
    VariadicFunc,
    eval_scalar,
    scalar_type,
)

__all__ = ["fold"]

_LAZY = frozenset({VariadicFunc.AND, VariadicFunc.OR, VariadicFunc.COALESCE})
_NOT_STRICT = frozenset(
    {
        VariadicFunc.NULLIF,
        VariadicFunc.GREATEST,
        VariadicFunc.LEAST,
        VariadicFunc.CONCAT,
        VariadicFunc.CONCAT_WS,
    }
)


def _null(e: ScalarExpr) -> bool:
    return isinstance(e, Literal) and e.value is None


def fold(e: ScalarExpr, schema: Schema) -> ScalarExpr:
    """``e`` (over rows of ``schema``) with its constant parts computed [EvaluationError of a
    constant part that fails]."""
    if isinstance(e, ColumnRef | Literal):
        return e
    if isinstance(e, If):
        c = fold(e.cond, schema)
        if isinstance(c, Literal):
            return fold(e.then if c.value is True else e.els, schema)
        return If(c, fold(e.then, schema), fold(e.els, schema))
    if isinstance(e, CallVariadic) and e.func in _LAZY:
        return _fold_lazy(e, schema)
    if isinstance(e, CallUnary):
        args: tuple[ScalarExpr, ...] = (fold(e.expr, schema),)
        new: ScalarExpr = CallUnary(e.func, args[0])
        strict = e.func is not UnaryFunc.IS_NULL
    elif isinstance(e, CallBinary):
        args = (fold(e.left, schema), fold(e.right, schema))
        new = CallBinary(e.func, *args)
        strict = True
    elif isinstance(e, CallVariadic):
        args = tuple(fold(a, schema) for a in e.exprs)
        new = CallVariadic(e.func, args)
        strict = e.func not in _NOT_STRICT
    elif isinstance(e, Cast):
        args = (fold(e.expr, schema),)
        new = Cast(args[0], e.to)
        strict = True
    else:  # pragma: no cover - the IR has no other expressions
        return e
    if strict and any(_null(a) for a in args):
        return Literal(None, scalar_type(new, schema).scalar)
    if all(isinstance(a, Literal) for a in args):
        return _constant(new, schema)
    return new


def _constant(e: ScalarExpr, schema: Schema) -> Literal:
    t: ScalarType = scalar_type(e, schema).scalar
    return Literal(eval_scalar(e, ()), t)


def _fold_lazy(e: CallVariadic, schema: Schema) -> ScalarExpr:
    t = scalar_type(e, schema).scalar
    if e.func is VariadicFunc.COALESCE:
        kept: list[ScalarExpr] = []
        for a in e.exprs:
            f = fold(a, schema)
            if _null(f):
                continue
            kept.append(f)
            if isinstance(f, Literal):
                break
        if not kept:
            return Literal(None, t)
        return kept[0] if len(kept) == 1 else CallVariadic(e.func, tuple(kept))
    stop = e.func is VariadicFunc.OR  # the constant that decides: false for AND, true for OR
    rest: list[ScalarExpr] = []
    saw_null = False
    for a in e.exprs:
        f = fold(a, schema)
        if isinstance(f, Literal):
            if f.value is None:
                saw_null = True
            elif f.value is stop:
                return Literal(stop, ScalarType.BOOL)
            continue
        rest.append(f)
    if saw_null:
        rest.append(Literal(None, ScalarType.BOOL))
    if not rest:
        return Literal(not stop, ScalarType.BOOL)
    return rest[0] if len(rest) == 1 else CallVariadic(e.func, tuple(rest))
